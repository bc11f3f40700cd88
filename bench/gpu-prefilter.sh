#!/bin/bash
# rela and tra on the tensor cores (cl/attention_mma.cl PREFILTER): each row's largest score
# first, the weight rule only in warps where a row passes its threshold.  One run on the GPU host:
#   bash bench/gpu-prefilter.sh bench PATCH [TDB]   the tree without PATCH in /tmp/base against this
#       tree (with TDB's entries as a user file when given); native test parts -> test-native.txt;
#       bf16 prefill B4 H8 d64 causal, rela and tra at beta 1 and tra at 0.5 / 0.25 / 0 ->
#       base.json, new.json, compare.txt; the SDPA anchors (anchors.json) and ours against
#       them (vs-fa2.txt)
#   bash bench/gpu-prefilter.sh tune                 tiles of rela and tra, bf16 d=64 T=8192 ->
#       mma.tdb, mma-tune.log
# Reverted after its run (bench/results/experiments/prefilter-h100/): to run it again, `git apply`
# that folder's prefilter.patch and pass the same file as PATCH.
# Run from the repository root with the bundle in .gpubundle/ and gpu-env.sh in .gpu/.
. bench/gpu-setup.sh
case "${1:-bench}" in
tune)
    : >"$OUT/mma.tdb"
    build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds rela,tra --dtype bf16 --d 64 --T 8192 --B 4 \
        --H 8 --budget "${TUNE_BUDGET:-60}" --jobs 12 --out "$OUT/mma.tdb" 2>&1 | tee "$OUT/mma-tune.log" |
        grep -E "^attention_mma|candidates"
    ;;
bench)
    PATCH=${2:?usage: gpu-prefilter.sh bench PATCH [TDB]}
    build_reverted "$PATCH"
    native_parts mma mma-wide mma-f32 mma-tf32 mma-decode
    T=${PRE_T:-4096,8192,16384,32768}
    run() { # BUILD JSON [env]
        "$1" --device nvidia --suite attention --dtype bf16 --T "$T" --d 64 --no-decode --beta 1 --kinds rela,tra \
            --json "$2.json" >"$2.txt" 2>&1
        "$1" --device nvidia --suite attention --dtype bf16 --T 8192 --d 64 --no-decode --beta 0.5,0.25,0 --kinds tra \
            --json "$2-density.json" >"$2-density.txt" 2>&1
    }
    run /tmp/base/build/tdacl-bench "$OUT/base"
    [ -n "${3:-}" ] && export TDACL_TUNING_FILE="$3"
    run build-gpu/tdacl-bench "$OUT/new"
    for f in "" -density; do
        build-gpu/tdacl-bench --load "$OUT/new$f.json" --compare "$OUT/base$f.json" >>"$OUT/compare.txt" 2>&1
    done
    python3 bench/anchors/anchors.py --T "$T" --skip sdpa-fp32,tra,tda --out "$OUT/anchors.json" >"$OUT/anchors.txt" 2>&1
    build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-fa2.txt" 2>&1
    grep -vE "^dev|^0 " "$OUT/compare.txt"; grep -E "ratio|pytorch" "$OUT/vs-fa2.txt"
    ;;
esac
