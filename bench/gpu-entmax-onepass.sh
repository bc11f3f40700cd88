#!/bin/bash
# entmax's threshold in one pass (cl/attention_mma.cl ENTMAX_BUF: each row keeps its scores
# above a rising lower bound; Newton launches only for rows it cannot settle) against the tree
# without PATCH (a max launch, then Newton launches for every row), on the GPU host in one run:
#   test-native.txt, anchors.json/.txt, entmax-checks.json   native tests, AdaSplash, PyPI entmax
#   tune-T.log, entmax-mma.tdb    `tdacl tune` of attention_mma for entmax at T 8192 and 1024
#   base.json / new.json          softmax and entmax (alpha 1.25, 1.5), bf16 B4 H8 d64, T 1024..8192
#                                 (new: this tree, shipped tiles; tuned.json: with entmax-mma.tdb)
#   compare*.txt, vs-adasplash*.txt new / base, new / AdaSplash's forward
#   profile-alphaA.txt            TDACL_PROFILE=1 of entmax at T 8192: the threshold pass, Newton steps, weights
# Needs the entmax and adasplash wheels in .whl/.  Usage: OUT=/tmp/out [TUNE=0] bash bench/gpu-entmax-onepass.sh PATCH
. bench/gpu-setup.sh
PATCH=${1:?usage: gpu-entmax-onepass.sh PATCH}
build_reverted "$PATCH"
entmax_tests_and_anchors || exit 1
touch "$OUT/entmax-mma.tdb"
for T in $([ "${TUNE:-1}" = 1 ] && echo 8192 1024); do  # TUNE=0: no tuning (entmax-mma.tdb then empty)
    timeout 200 build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds entmax --dtype bf16 --d 64 --T "$T" \
        --B 4 --H 8 --budget "${BUDGET:-30}" --jobs 16 --out "$OUT/entmax-mma.tdb" >"$OUT/tune-$T.log" 2>&1
    tail -4 "$OUT/tune-$T.log"
done
B=(--device nvidia --suite attention --dtype bf16 --T 1024,4096,8192 --no-decode --kinds softmax,entmax --alpha 1.25,1.5)
/tmp/base/build/tdacl-bench "${B[@]}" --json "$OUT/base.json" >"$OUT/base.txt" 2>&1
build-gpu/tdacl-bench "${B[@]}" --json "$OUT/new.json" >"$OUT/new.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/base.json" >"$OUT/compare.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-adasplash.txt" 2>&1
if [ "${TUNE:-1}" = 1 ]; then
    TDACL_TUNING_FILE="$OUT/entmax-mma.tdb" build-gpu/tdacl-bench "${B[@]}" --json "$OUT/tuned.json" >"$OUT/tuned.txt" 2>&1
    build-gpu/tdacl-bench --load "$OUT/tuned.json" --compare "$OUT/base.json" >"$OUT/compare-tuned.txt" 2>&1
    build-gpu/tdacl-bench --load "$OUT/tuned.json" --compare "$OUT/anchors.json" >"$OUT/vs-adasplash-tuned.txt" 2>&1
fi
for a in 1.5 1.25; do
    TDACL_PROFILE=1 build-gpu/tdacl-bench --device nvidia --suite attention --dtype bf16 --T 8192 --no-decode \
        --kinds entmax --alpha $a --min-samples 3 --min-ms 0 2>&1 | grep "profile:" >"$OUT/profile-alpha$a.txt"
done
cat "$OUT/compare.txt" "$OUT/vs-adasplash.txt" | grep -vE "^dev|^0 "
grep -h "attention " "$OUT/new.txt" | cut -c1-60,100-330
cat "$OUT"/profile-alpha*.txt
