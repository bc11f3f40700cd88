# s41: the TDA model's prefill against the softmax model's, both on the wgmma GEMM (shipped
# defaults, bf16 weights/activations/cache), and test_registry natively (its exact local-size
# check on sm_90, mended in session 40 and not run on the GPU since)
res=$OUT
export OUT=$res/r1
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
(cd build-gpu/tests && timeout 90 stdbuf -oL ./test_registry) > "$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -4
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
timeout 200 build-gpu/tdacl-bench --device nvidia --suite forward --dtype bf16act --no-decode --kinds softmax,tda \
    --min-samples 5 --json "$OUT/forward-bf16act.json" > "$OUT/forward-bf16act.txt" 2>&1
grep -E "prefill" "$OUT/forward-bf16act.txt" | cut -c1-160
cd $res && tar -czf data.tgz r1
echo "done ($SECONDS s)"
