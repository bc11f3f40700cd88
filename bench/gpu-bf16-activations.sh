#!/bin/bash
# bf16 activations end to end (desc.activation_dtype, docs/spec.md section 4.6) against commit
# BASE (default: the session's start) on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-bf16-activations.sh [BASE]
#   test-native.txt      test_matmul (bf16 / f16 a and c on every matmul row, the tensor-core GEMM
#                        copying bf16 a as it is), test_model (test_bf16_activations among all),
#                        test_registry, natively
#   logits.json, logits.txt  bench/anchors/gpt_logits.py: the logits error of each storage mode
#                        on GPT-2 small written by transformers, against transformers in float64
#   forward-{new,base}-KIND-MODE.json/.txt  tdacl-bench --suite peak,forward, one process each:
#                        softmax bf16 (new and base), softmax and tda bf16act (new)
#   compare.txt          softmax bf16 new / base
#   hf.json, vs-hf.txt, vs-hf-bf16act.txt  bench/anchors/gpt_hf.py in the same run, and our
#                        softmax rows against it (bf16 and bf16act against its bf16)
#   gemm-{base,new}.json, gemm-compare.txt  TDACL_PRECISION=bf16 tdacl-bench --suite peak,gemm
#   matmul-anchors.json, gemm-vs-torch.txt  torch.addmm bf16 on the same shapes, and ours
#                        (bf16act: bf16 a, w and c, like torch's) against it
. bench/gpu-setup.sh
BASE=${1:-$(git rev-parse HEAD)}
build_base "$BASE"
(cd build-gpu/tests && ./test_matmul && ./test_model && ./test_registry) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -8
TDACL_DEVICE=nvidia python3 bench/anchors/gpt_logits.py --tdacl build-gpu/tdacl --out "$OUT/logits.json" \
    >"$OUT/logits.txt" 2>&1
cat "$OUT/logits.txt" | tail -8
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
: >"$OUT/compare.txt"
for run in softmax:bf16:new softmax:bf16:base softmax:bf16act:new tda:bf16act:new; do
    IFS=: read -r kind mode which <<<"$run"
    bin=build-gpu/tdacl-bench
    [ "$which" = base ] && bin=/tmp/base/build/tdacl-bench
    "$bin" --device nvidia --suite peak,forward --kinds "$kind" --dtype "$mode" \
        --json "$OUT/forward-$which-$kind-$mode.json" >"$OUT/forward-$which-$kind-$mode.txt" 2>&1
    grep -E "forward" "$OUT/forward-$which-$kind-$mode.txt" | cut -c1-200
done
build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-bf16.json" --compare "$OUT/forward-base-softmax-bf16.json" 2>&1 |
    sed -n '/^compare:/,$p' >"$OUT/compare.txt"
tail -3 "$OUT/compare.txt"
python3 bench/anchors/gpt_hf.py --out "$OUT/hf.json" >"$OUT/hf.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-bf16.json" --compare "$OUT/hf.json" 2>&1 |
    sed -n '/^compare:/,$p' >"$OUT/vs-hf.txt"
hf_as_bf16act "$OUT/hf.json" /tmp/hf-bf16act.json
build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-bf16act.json" --compare /tmp/hf-bf16act.json 2>&1 |
    sed -n '/^compare:/,$p' >"$OUT/vs-hf-bf16act.txt"
cut -c1-150 "$OUT/vs-hf.txt" "$OUT/vs-hf-bf16act.txt"
gemm_vs_base_and_torch
tail -8 "$OUT/gemm-compare.txt" | cut -c1-160
grep bf16act "$OUT/gemm-vs-torch.txt" | cut -c1-160
exit 0
