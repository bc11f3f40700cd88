# s38 r4: the committed tree (aeda30f) natively: the tensor-core test parts whose epilogue the NORM_STORE form now writes, and test_registry whole
res=$OUT
export OUT=$res/r4
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
grep -E "warning" "$OUT/setup-stderr.txt" || echo "no warnings in the Release build"
pack() { (cd $res && tar -czf data.tgz r4); }
(cd build-gpu/tests && timeout 200 ./test_registry) > "$OUT/test-registry.txt" 2>&1; grep -E "PASSED|FAILED" "$OUT/test-registry.txt"
pack
native_limited 90 mma-wide mma-f32 mma-tf32 mma-rescale mma-lazy-weights topk-theta-mma entmax-mma class-tiles
pack
echo "done ($SECONDS s)"
