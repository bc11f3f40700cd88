#!/bin/bash
# Top-theta's post-softmax decode split over the keys (two passes, 75da776) against the same
# tree without that change (unsplit: one work-group a row), in one run on the GPU host:
# native test parts -> test-native.txt; tdacl-bench decode B8 H16 Tk 32768 d64, thresholds on
# the weights keeping ~64 keys a row (--topk-post), bf16 and f32, with our softmax decode
# -> post-{base,new}.json/.txt, compare.txt; the pre-softmax rows of the new build -> pre.txt.
# Usage (repository root): git diff 870b15e 75da776 -- cl/attention_topk.cl src/ops/attention.c
#   > .gpu/postsplit.patch; OUT=/tmp/out bash bench/gpu-topk-post.sh
. bench/gpu-setup.sh
build_reverted .gpu/postsplit.patch
native_parts topk-theta topk-theta-layouts
B=(--device nvidia --suite attention --kinds softmax,topk_theta --no-prefill --dtype bf16,f32)
/tmp/base/build/tdacl-bench "${B[@]}" --topk-post --json "$OUT/post-base.json" >"$OUT/post-base.txt" 2>&1
build-gpu/tdacl-bench "${B[@]}" --topk-post --json "$OUT/post-new.json" >"$OUT/post-new.txt" 2>&1
build-gpu/tdacl-bench "${B[@]}" --json "$OUT/pre.json" >"$OUT/pre.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/post-new.json" --compare "$OUT/post-base.json" >"$OUT/compare.txt" 2>&1
cat "$OUT/compare.txt"; grep -h topk_theta "$OUT/pre.txt" "$OUT/post-new.txt" "$OUT/post-base.txt"
