# s36 r7: the final tree natively (test_model: the in-place RoPE form, test_wide_rows) and RoPE's time a launch
res=$OUT
export OUT=$res/r7
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
(cd build-gpu/tests && timeout 100 ./test_model) > "$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -3
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
TDACL_PROFILE=1 timeout 60 build-gpu/tdacl-bench --device nvidia --suite forward --dtype bf16act --no-decode --kinds tda --min-samples 3 --min-ms 0 > "$OUT/profile-new.txt" 2>&1
grep -E "prefill|profile: (rope|norm)" "$OUT/profile-new.txt" | cut -c1-130
cd $res && tar -czf data.tgz r7
echo "done ($SECONDS s)"
