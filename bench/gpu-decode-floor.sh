#!/bin/bash
# Where a batch-1 decode token's time goes on NVIDIA's OpenCL, on the GPU host of
# ../shared/gpu-host:   bash bench/gpu-decode-floor.sh
#   probe.txt      bench/probes/launch_probe.c: back-to-back launches of an empty kernel and
#                  of a plain bf16 GEMV (one pass over K, no split) per launch, wall and event
#   generate.txt   `tdacl generate` (GPT-2-small softmax model, bf16 weights and activations,
#                  960-id prompt, 129 new): ms/token, and its TDACL_PROFILE per-kernel times
#   forward.txt    tdacl-bench --suite forward decode rows (softmax, bf16act, ctx 1024 and 8192)
. bench/gpu-setup.sh
gcc -O2 -o /tmp/launch_probe bench/probes/launch_probe.c -lOpenCL && /tmp/launch_probe >"$OUT/probe.txt" 2>&1
cat "$OUT/probe.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
build-gpu/tdacl-bench --device nvidia --suite forward --kinds softmax --dtype bf16act --no-prefill \
    --json "$OUT/forward.json" >"$OUT/forward.txt" 2>&1
grep -E "decode" "$OUT/forward.txt" | cut -c1-200
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
{
    for rep in 1 2; do
        build-gpu/tdacl generate --device nvidia --model "$M" --tokens "$PROMPT" --max-new 129 --dtype bf16 \
            --activations bf16 2>&1 >/dev/null | grep -E "ms/token"
    done
    TDACL_PROFILE=1 build-gpu/tdacl generate --device nvidia --model "$M" --tokens "$PROMPT" --max-new 129 \
        --dtype bf16 --activations bf16 2>&1 >/dev/null | grep -E "profile|ms/token"
} >"$OUT/generate.txt"
cat "$OUT/generate.txt"
