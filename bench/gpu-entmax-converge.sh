#!/bin/bash
# entmax on the tensor cores with converged work-groups skipping the remaining Newton steps
# (cl/attention_mma.cl, ENTMAX_PASS 2), on the GPU host in one run: native tests (test_attention
# parts entmax-mma, entmax, entmax-layouts; test_sparse_models) -> test-native.txt; AdaSplash's
# forward and the PyPI entmax checks (bench/anchors/entmax_anchor.py) -> anchors.json,
# entmax-checks.json; entmax at alpha 1.25 / 1.5 and softmax, bf16 B4 H8 d64 causal,
# T 1024/4096/8192 with the tree without PATCH (base.json) and this tree (new.json), shipped
# tiles; compare.txt (new / base), vs-adasplash.txt (new / AdaSplash).
# PATCH: the change as `git diff` (or `git show COMMIT -- cl src`) wrote it.
# Needs the entmax and adasplash wheels in .whl/.  Usage: OUT=/tmp/out bash bench/gpu-entmax-converge.sh PATCH
. bench/gpu-setup.sh
PATCH=${1:?usage: gpu-entmax-converge.sh PATCH}
build_reverted "$PATCH"
entmax_tests_and_anchors || exit 1
B=(--device nvidia --suite attention --dtype bf16 --T 1024,4096,8192 --no-decode --kinds softmax,entmax --alpha 1.25,1.5)
/tmp/base/build/tdacl-bench "${B[@]}" --json "$OUT/base.json" >"$OUT/base.txt" 2>&1
build-gpu/tdacl-bench "${B[@]}" --json "$OUT/new.json" >"$OUT/new.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/base.json" >"$OUT/compare.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-adasplash.txt" 2>&1
cat "$OUT/compare.txt" "$OUT/vs-adasplash.txt" | grep -vE "^dev|^0 "; grep -h "attention " "$OUT/new.txt"
