#!/bin/bash
# Softmax kinds on one K and one V buffer with FlashAttention-2's split waits (KSTAGES=1, which
# fits 128-key tiles in NVIDIA's 48 KB of local memory), with the exponent change of
# bench/gpu-exp-fold.sh, on the GPU host:
#   bash bench/gpu-split-waits.sh tune          tile tuning (BN, NWARPS, MT, KSTAGES) of softmax,
#                                               diff_softmax, topk_theta at d=64 and softmax at
#                                               d=128, bf16 T=8192 -> $OUT/mma.tdb, mma-tune.log
#   bash bench/gpu-split-waits.sh bench PATCH TDB
#                                               native test parts; the tree without PATCH (the
#                                               commit before both changes) on its shipped tiles
#                                               -> base.json, this tree with the entries of TDB
#                                               -> new.json, compare.txt; SDPA anchors
#                                               ours against them (vs-fa2.txt)
# Run from the repository root with the bundle in .gpubundle/ and gpu-env.sh in .gpu/.
. bench/gpu-setup.sh
case "${1:-tune}" in
tune)
    : >"$OUT/mma.tdb"
    for kd in softmax,diff_softmax,topk_theta:64 softmax:128; do
        build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds "${kd%:*}" --dtype bf16 --d "${kd#*:}" \
            --T 8192 --B 4 --H 8 --budget "${TUNE_BUDGET:-80}" --jobs 12 --out "$OUT/mma.tdb" 2>&1 |
            tee -a "$OUT/mma-tune.log" | grep -E "^attention_mma|candidates"
    done
    ;;
bench)
    PATCH=${2:?usage: gpu-split-waits.sh bench PATCH TDB}
    TDB=${3:?usage: gpu-split-waits.sh bench PATCH TDB}
    build_reverted "$PATCH"
    native_parts mma mma-wide mma-f32 mma-tf32 mma-decode topk-theta-mma entmax-mma
    T=${SPLIT_T:-4096,8192,16384,32768}
    ARGS=(--device nvidia --suite attention --dtype bf16 --T "$T" --no-decode --beta 1)
    for d in 64 128; do
        k=softmax,diff_softmax,topk_theta,tra
        [ "$d" = 128 ] && k=softmax
        /tmp/base/build/tdacl-bench "${ARGS[@]}" --d "$d" --kinds "$k" --json "$OUT/base-d$d.json" >"$OUT/base-d$d.txt" 2>&1
        TDACL_TUNING_FILE="$TDB" build-gpu/tdacl-bench "${ARGS[@]}" --d "$d" --kinds "$k" --json "$OUT/new-d$d.json" \
            >"$OUT/new-d$d.txt" 2>&1
        build-gpu/tdacl-bench --load "$OUT/new-d$d.json" --compare "$OUT/base-d$d.json" >>"$OUT/compare.txt" 2>&1
    done
    for d in 64 128; do
        python3 bench/anchors/anchors.py --T "$T" --d "$d" --skip sdpa-fp32,tra,tda --out "$OUT/anchors-d$d.json" \
            >"$OUT/anchors-d$d.txt" 2>&1
        build-gpu/tdacl-bench --load "$OUT/new-d$d.json" --compare "$OUT/anchors-d$d.json" >>"$OUT/vs-fa2.txt" 2>&1
    done
    cat "$OUT/compare.txt" "$OUT/vs-fa2.txt" | grep -E "x|ratio|prefill"
    ;;
esac
