#!/bin/bash
# The transposed GEMV (the tied LM head: four columns a warp) against the same tree without
# that change, on the GPU host of ../shared/gpu-host:   bash bench/gpu-gemv-t.sh PATCH
# (measured with bench/results/gemv-t-h100/gemv-t.patch: no change in the decode rows, the
# change was not kept)
#   test-native.txt      test_matmul and test_model natively
#   gemm-{new,base}.json, gemm-compare.txt  tdacl-bench --suite peak,gemm (the M = 1 rows are
#                        the GEMVs; 1 x 50257 x 768 the LM head)
#   decode-{new,base}-MODE.json/.txt, decode-compare.txt  --suite peak,forward --no-prefill, softmax
#                        model, f32 and bf16act
. bench/gpu-setup.sh
build_reverted "$1"
(cd build-gpu/tests && ./test_matmul && ./test_model) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native.txt"
for which in new base; do
    bin=build-gpu/tdacl-bench
    [ "$which" = base ] && bin=/tmp/base/build/tdacl-bench
    "$bin" --device nvidia --suite peak,gemm --json "$OUT/gemm-$which.json" >/dev/null 2>&1
done
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/gemm-base.json" >"$OUT/gemm-compare.txt" 2>&1
grep -E "1x50257|compared" "$OUT/gemm-compare.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
: >"$OUT/decode-compare.txt"
for mode in f32 bf16act; do
    for which in new base; do
        bin=build-gpu/tdacl-bench
        [ "$which" = base ] && bin=/tmp/base/build/tdacl-bench
        "$bin" --device nvidia --suite peak,forward --kinds softmax --dtype "$mode" --no-prefill \
            --json "$OUT/decode-$which-$mode.json" >"$OUT/decode-$which-$mode.txt" 2>&1
    done
    build-gpu/tdacl-bench --load "$OUT/decode-new-$mode.json" --compare "$OUT/decode-base-$mode.json" 2>&1 |
        sed -n '/^compare:/,$p' >>"$OUT/decode-compare.txt"
done
cut -c1-140 "$OUT/decode-compare.txt"
exit 0
