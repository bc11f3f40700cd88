# s36 r5: norm_rows holding the row in registers, warp shuffles on NVIDIA (PATCH) -- forward prefill rows before/after, both models
res=$OUT
export OUT=$res/r5
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
(cd build-gpu/tests && timeout 300 ./test_model && timeout 200 ./test_sparse_models) > "$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -4
REPS=2 KINDS=tda,softmax bash bench/gpu-prefill-compare.sh .gpu/norm.patch 2>&1 | tail -20
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for b in new base; do
    bin=build-gpu/tdacl-bench; [ $b = base ] && bin=/tmp/base/build/tdacl-bench
    TDACL_PROFILE=1 timeout 200 $bin --device nvidia --suite forward --dtype bf16act --no-decode --kinds softmax --min-samples 3 --min-ms 0 > "$OUT/profile-$b.txt" 2>&1
    echo "== $b"; grep -E "profile: (rope|attention|gemm|norm|kv)" "$OUT/profile-$b.txt" | cut -c1-120
done
cd $res && tar -czf data.tgz r5
echo "done ($SECONDS s)"
