#!/bin/bash
# The softmax kinds' exponent on the tensor-core kernel (cl/attention_mma.cl): one
# ex2.approx.ftz per weight (mma_exp2) instead of native_exp2's non-flushing ex2, and the score
# scale folded into the exponent's multiply-add.  One run on the GPU host: the tree without
# PATCH (`git diff` of the change) in /tmp/base, this tree in build-gpu; native test parts;
# bf16 prefill B4 H8 d64 causal on the shipped tiles, both builds -> base.json, new.json,
# compare.txt; the machine code's instruction counts of both (sass-base/, sass-new/); the
# SDPA anchors (anchors.json) and ours against them (vs-fa2.txt).
# Usage (repository root): OUT=/tmp/out bash bench/gpu-exp-fold.sh PATCH
. bench/gpu-setup.sh
PATCH=${1:?usage: gpu-exp-fold.sh PATCH}
build_reverted "$PATCH"
native_parts mma mma-wide mma-f32 mma-tf32 mma-decode topk-theta-mma
KINDS=${FOLD_KINDS:-softmax,diff_softmax,topk_theta,tra}
T=${FOLD_T:-4096,8192,16384}
ARGS=(--device nvidia --suite attention --dtype bf16 --T "$T" --d 64 --no-decode --beta 1 --kinds "$KINDS")
mkdir -p "$OUT/sass-base" "$OUT/sass-new"
rm -rf "$TDACL_CACHE_DIR"
/tmp/base/build/tdacl-bench "${ARGS[@]}" --json "$OUT/base.json" >"$OUT/base.txt" 2>&1
sass_of_cache "$OUT/sass-base" | tee "$OUT/sass-base/counts.txt"
rm -rf "$TDACL_CACHE_DIR"
build-gpu/tdacl-bench --device nvidia --suite peak --json "$OUT/peak.json" >"$OUT/peak.txt" 2>&1
build-gpu/tdacl-bench "${ARGS[@]}" --json "$OUT/new.json" >"$OUT/new.txt" 2>&1
sass_of_cache "$OUT/sass-new" | tee "$OUT/sass-new/counts.txt"
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/base.json" >"$OUT/compare.txt" 2>&1
python3 bench/anchors/anchors.py --T "$T" --skip sdpa-fp32,tra,tda --out "$OUT/anchors.json" >"$OUT/anchors.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-fa2.txt" 2>&1
cat "$OUT/compare.txt" "$OUT/vs-fa2.txt" | grep -v "^$" | tail -40
