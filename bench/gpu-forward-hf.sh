#!/bin/bash
# The forward suite against Hugging Face transformers in the same run, on the GPU host of
# ../shared/gpu-host:  bash bench/gpu-forward-hf.sh
# ours: tdacl-bench --suite peak,forward --kinds softmax --dtype f32,bf16 (GPT-2 small, random
# weights); theirs: bench/anchors/gpt_hf.py (GPT2LMHeadModel, sdpa, fp32 and bf16), then a
# time-limited torch.compile attempt (bf16, T=1024); the ratios with --compare.  Results in $OUT.
. bench/gpu-setup.sh
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
build-gpu/tdacl-bench --device nvidia --suite peak,forward --kinds softmax --dtype f32,bf16 --json "$OUT/forward.json" \
    >"$OUT/forward.txt" 2>&1
python3 bench/anchors/gpt_hf.py --out "$OUT/hf.json" 2>&1 | tee "$OUT/hf.txt" | tail -12
timeout 240 python3 bench/anchors/gpt_hf.py --compile --dtypes bf16 --T 1024 --ctx 1024 --out "$OUT/hf-compile.json" \
    >"$OUT/hf-compile.txt" 2>&1; echo "compile run: exit $?" >>"$OUT/hf-compile.txt"; tail -6 "$OUT/hf-compile.txt"
build-gpu/tdacl-bench --load "$OUT/forward.json" --compare "$OUT/hf.json" 2>&1 | tee "$OUT/compare.txt" | tail -16
