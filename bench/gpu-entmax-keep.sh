#!/bin/bash
# entmax on the tensor cores, this tree against the tree without PATCH, on the GPU host in one
# run (the threshold pass's keeping without a branch per score; integer powers by products,
# others by MUFU.LG2/EX2; Newton's steps on f^(1/p)):
#   test-native.txt               test_attention parts entmax-mma, entmax, entmax-layouts (and
#                                 MMA_PARTS); test_sparse_models, test_registry natively
#   anchors.json/.txt, entmax-checks.json   AdaSplash's forward, PyPI entmax (same run)
#   base.json / new.json          softmax, entmax (alpha 1.25, 1.4, 1.5), bf16 B4 H8 d64,
#                                 T 1024..8192
#   compare.txt, vs-adasplash.txt new / base, new / AdaSplash
#   profile-alphaA.txt            TDACL_PROFILE=1 of entmax at T 8192: each launch's time
# Needs the entmax and adasplash wheels in .whl/.  MMA_PARTS: the other native test_attention parts
# (default "mma mma-f32"; "" none).  Usage: OUT=/tmp/out [MMA_PARTS=...] bash bench/gpu-entmax-keep.sh PATCH
. bench/gpu-setup.sh
PATCH=${1:?usage: gpu-entmax-keep.sh PATCH}
build_reverted "$PATCH"
entmax_tests_and_anchors || exit 1
[ -n "${MMA_PARTS-mma mma-f32}" ] && native_limited 200 ${MMA_PARTS-mma mma-f32}
(cd build-gpu/tests && ./test_registry) >>"$OUT/test-native.txt" 2>&1 || echo "test_registry FAILED" >>"$OUT/test-native.txt"
grep -E "PASSED|FAILED|timed out" "$OUT/test-native.txt"
B=(--device nvidia --suite attention --dtype bf16 --T 1024,4096,8192 --no-decode)
for b in /tmp/base/build build-gpu; do
    j=$([ $b = build-gpu ] && echo new || echo base)
    $b/tdacl-bench "${B[@]}" --kinds softmax,entmax --alpha 1.25,1.4,1.5 --json "$OUT/$j.json" >"$OUT/$j.txt" 2>&1
done
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/base.json" >"$OUT/compare.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-adasplash.txt" 2>&1
for a in 1.5 1.25 1.4; do
    TDACL_PROFILE=1 build-gpu/tdacl-bench --device nvidia --suite attention --dtype bf16 --T 8192 --no-decode \
        --kinds entmax --alpha $a --min-samples 3 --min-ms 0 2>&1 | grep "profile:" >"$OUT/profile-alpha$a.txt"
done
cat "$OUT/compare.txt" "$OUT/vs-adasplash.txt" | grep -vE "^dev|^0 "
grep -h "attention " "$OUT/new.txt" | cut -c1-60,100-330
grep -h "entmax\|attention_mma" "$OUT"/profile-alpha*.txt
