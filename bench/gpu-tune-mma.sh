#!/bin/bash
# Tunes the tensor-core attention variant (tuning space attention_mma: BN, NWARPS, MT) on the
# GPU host for every kind, bf16, d = 64 and 128 at the long-T bucket; entries go to
# $OUT/mma.tdb (device-specific lines, as tuning/shipped.tdb keeps them).  Run after
# bench/gpu-compare.sh in the same session (it reuses build-gpu/).
NO_GPU_TXT=1 . bench/gpu-setup.sh
for d in ${MMA_TUNE_D:-64 128}; do
    build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds softmax,rela,tra,tda,diff_softmax --dtype bf16 \
        --d "$d" --T 8192 --B 4 --H 8 --budget "${MMA_TUNE_BUDGET:-25}" --jobs 8 --out "$OUT/mma.tdb" 2>&1 | tail -20
done
exit 0
