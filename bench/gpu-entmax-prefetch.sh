#!/bin/bash
# The entmax K-tile prefetch (PREFETCH, a tuned parameter) with and without the change in one
# run: PATCH as `git diff` wrote it.  Same rows as bench/gpu-entmax-cache.sh (which this calls),
# then the bench rows against our softmax with the shipped entries -> entmax.txt / .json.
# Usage (repository root): OUT=/tmp/out bash bench/gpu-entmax-prefetch.sh PATCH
bash bench/gpu-entmax-cache.sh "$1"
NO_GPU_TXT=1 . bench/gpu-setup.sh
build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax,entmax --dtype bf16,f32 \
    --T 1024,4096,8192 --json "$OUT/entmax.json" >"$OUT/entmax.txt" 2>&1
