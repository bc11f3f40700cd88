#!/bin/bash
# Top-theta post-softmax prefill on the tensor cores (two launches, 8989ee9) against the
# FP32-lane kernel, and the threaded calibration, in one run on the GPU host:
# native test parts topk-theta-mma, mma-tiny (with TDACL_MMA_EMULATE unset: mma.sync) and
# test_sparse_models -> test-native.txt; tdacl-bench prefill B4 H8 d64 causal bf16,
# T 1024/4096/8192, weight thresholds keeping ~64 keys a row (--topk-post): FP32 lanes
# (TDACL_VARIANT=attention.topk_theta) -> simt.json, tensor cores -> mma.json, with our
# softmax; compare.txt; tdacl calibrate of a GPT-2-small-shaped model (4096 ids, k 64)
# -> calibrate.txt.  Usage (repository root): OUT=/tmp/out bash bench/gpu-topk-mma-post.sh
. bench/gpu-setup.sh
{
    for part in topk-theta-mma mma-tiny; do
        (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
    done
    (cd build-gpu/tests && ./test_sparse_models) 2>&1
} >"$OUT/test-native.txt"
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -6
B=(--device nvidia --suite attention --dtype bf16 --T 1024,4096,8192 --no-decode --topk-post)
TDACL_VARIANT=attention.topk_theta build-gpu/tdacl-bench "${B[@]}" --kinds topk_theta --json "$OUT/simt.json" \
    >"$OUT/simt.txt" 2>&1
build-gpu/tdacl-bench "${B[@]}" --kinds softmax,topk_theta --json "$OUT/mma.json" >"$OUT/mma.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/mma.json" --compare "$OUT/simt.json" >"$OUT/compare.txt" 2>&1
cat "$OUT/compare.txt"; grep -h "attention " "$OUT/mma.txt"
M=/tmp/gpt2-random
build-gpu/tdacl make-model --config examples/models/gpt2-small-softmax.json --seed 1 --dtype bf16 --out $M >/dev/null
python3 -c 'import random; random.seed(3); print(",".join(str(random.randrange(50257)) for _ in range(4096)))' \
    >/tmp/cal-ids.txt
{ time build-gpu/tdacl calibrate --device nvidia --model $M --tokens /tmp/cal-ids.txt --k 64 --seq-len 1024 \
    --out /tmp/th.json; } >"$OUT/calibrate.txt" 2>&1
nproc >>"$OUT/calibrate.txt"
tail -5 "$OUT/calibrate.txt"
