#!/bin/bash
# Top-theta prefill on the tensor cores (cl/attention_mma.cl KIND 6) on the GPU host, one run:
# native tests (test_attention parts topk-theta-mma, topk-theta, topk-theta-layouts, mma;
# test_sparse_models) -> test-native.txt; then tdacl-bench prefill B4 H8 d64 causal bf16,
# T 1024/4096/8192, our softmax and topk_theta (pre-softmax thresholds keeping ~64 keys a row):
# on the FP32-lane kernel (TDACL_VARIANT=attention.topk_theta) -> simt.json, on the tensor
# cores with the class's tile -> mma.json, and with softmax's shipped tile for this GPU
# (a user tuning file) -> mma-tile.json; compare-mma.txt (mma / simt), compare-tile.txt.
# Usage (repository root): OUT=/tmp/out bash bench/gpu-topk-mma.sh
. bench/gpu-setup.sh
{
    for part in topk-theta-mma topk-theta topk-theta-layouts mma; do
        (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
    done
    (cd build-gpu/tests && ./test_sparse_models) 2>&1
} >"$OUT/test-native.txt"
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -8
B=(--device nvidia --suite attention --kinds softmax,topk_theta --dtype bf16 --T 1024,4096,8192 --no-decode)
TDACL_VARIANT=attention.topk_theta build-gpu/tdacl-bench "${B[@]}" --kinds topk_theta \
    --json "$OUT/simt.json" >"$OUT/simt.txt" 2>&1
build-gpu/tdacl-bench "${B[@]}" --json "$OUT/mma.json" >"$OUT/mma.txt" 2>&1
dev=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "attention_mma device=\"$dev\" class=nvidia-sm_90 kind=topk_theta dtype=bf16 d=64 dv=64 : BN=64 NWARPS=4 MT=2 KSTAGES=2" \
    >"$OUT/tile.tdb"
TDACL_TUNING_FILE="$OUT/tile.tdb" build-gpu/tdacl-bench "${B[@]}" --kinds topk_theta --json "$OUT/mma-tile.json" \
    >"$OUT/mma-tile.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/mma.json" --compare "$OUT/simt.json" >"$OUT/compare-mma.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/mma-tile.json" --compare "$OUT/mma.json" >"$OUT/compare-tile.txt" 2>&1
cat "$OUT/compare-mma.txt" "$OUT/compare-tile.txt"; grep -h "attention " "$OUT/mma.txt" "$OUT/mma-tile.txt" | sort -u
