#!/bin/bash
# The tensor-core GEMM's whole-tile copies, paired epilogue stores and the bf16-a H100 entry
# (tuning key adtype=) in the GEMM rows and the model's prefill, before and after in one run,
# on the GPU host of ../shared/gpu-host:   bash bench/gpu-gemm-forward.sh PATCH
# (PATCH: the change as `git diff` wrote it; the "before" build is this tree without it)
#   test-native.txt      test_matmul, test_tuning, test_registry, natively
#   gemm-{base,new}.json, gemm-compare.txt, matmul-anchors.json, gemm-vs-torch.txt
#   forward-{new,base}-softmax-MODE.json/.txt  tdacl-bench --suite peak,forward --no-decode, one
#                        process each, MODE bf16act and bf16; compare-MODE.txt new / base
#   hf.json, vs-hf-bf16act.txt  bench/anchors/gpt_hf.py in the same run, our bf16act rows against
#                        its bf16 rows
. bench/gpu-setup.sh
build_reverted "$1"
(cd build-gpu/tests && ./test_matmul && ./test_tuning && ./test_registry) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -6
gemm_vs_base_and_torch
grep -E "bf16" "$OUT/gemm-compare.txt" | grep -v " 1x" | cut -c1-160
grep bf16act "$OUT/gemm-vs-torch.txt" | grep -v " 1x" | cut -c1-160
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for mode in bf16act bf16; do
    for which in new base; do
        bin=build-gpu/tdacl-bench
        [ "$which" = base ] && bin=/tmp/base/build/tdacl-bench
        "$bin" --device nvidia --suite peak,forward --kinds softmax --dtype "$mode" --no-decode \
            --json "$OUT/forward-$which-softmax-$mode.json" >"$OUT/forward-$which-softmax-$mode.txt" 2>&1
    done
    build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-$mode.json" --compare "$OUT/forward-base-softmax-$mode.json" \
        2>&1 | sed -n '/^compare:/,$p' >"$OUT/compare-$mode.txt"
    cut -c1-150 "$OUT/compare-$mode.txt"
done
python3 bench/anchors/gpt_hf.py --out "$OUT/hf.json" >"$OUT/hf.txt" 2>&1
hf_as_bf16act "$OUT/hf.json" /tmp/hf-bf16act.json
build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-bf16act.json" --compare /tmp/hf-bf16act.json 2>&1 |
    sed -n '/^compare:/,$p' >"$OUT/vs-hf-bf16act.txt"
cut -c1-150 "$OUT/vs-hf-bf16act.txt"
exit 0
