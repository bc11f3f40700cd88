#!/bin/bash
# alpha-entmax on the GPU host: its test parts natively (-> test-native.txt, with test_registry),
# then tdacl-bench rows of entmax against our softmax in the same run: prefill B4 H8 d64
# causal at T 1024, 4096, 8192 in bf16 and f32, decode B8 H16 Tk 32768 (-> entmax.json,
# entmax.txt).  Usage (repository root): OUT=/tmp/out bash bench/gpu-entmax.sh
. bench/gpu-setup.sh
native_parts entmax entmax-layouts
build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax,entmax --dtype bf16,f32 \
    --T 1024,4096,8192 --json "$OUT/entmax.json" >"$OUT/entmax.txt" 2>&1
tail -30 "$OUT/entmax.txt"
