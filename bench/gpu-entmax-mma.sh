#!/bin/bash
# entmax on the tensor cores (cl/attention_mma.cl KIND 5, alpha < 2) on the GPU host, one run:
# native tests (test_attention parts entmax-mma, entmax, entmax-layouts; test_sparse_models)
# -> test-native.txt; bench/anchors/entmax_anchor.py (our entmax against the PyPI entmax
# package and AdaSplash -- its f16 check now takes the tensor cores -- and AdaSplash's forward
# timed) -> entmax-checks.json, anchors.json; ours: entmax at alpha 1.25, 1.5, 1.75 and softmax,
# bf16, B4 H8 d64 causal, T 1024/4096/8192 -> mma.json; entmax on the FP32-lane kernel
# (TDACL_VARIANT=attention.entmax) -> simt.json; compare-anchors.txt, compare-simt.txt.
# Needs the entmax and adasplash wheels in .whl/.  Usage: OUT=/tmp/out bash bench/gpu-entmax-mma.sh
. bench/gpu-setup.sh
entmax_tests_and_anchors || exit 1
grep -v Deprec "$OUT/anchors.txt" | tail -20
B=(--device nvidia --suite attention --dtype bf16 --T 1024,4096,8192 --no-decode)
build-gpu/tdacl-bench "${B[@]}" --kinds softmax,entmax --alpha 1.25,1.5,1.75 --json "$OUT/mma.json" >"$OUT/mma.txt" 2>&1
TDACL_VARIANT=attention.entmax build-gpu/tdacl-bench "${B[@]}" --kinds entmax --alpha 1.25,1.5,1.75 \
    --json "$OUT/simt.json" >"$OUT/simt.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/mma.json" --compare "$OUT/anchors.json" >"$OUT/compare-anchors.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/mma.json" --compare "$OUT/simt.json" >"$OUT/compare-simt.txt" 2>&1
cat "$OUT/compare-anchors.txt" "$OUT/compare-simt.txt"; grep -h "attention " "$OUT/mma.txt"
