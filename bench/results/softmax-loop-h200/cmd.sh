#!/bin/bash
# The device calls of this folder, from the repository root (bundle in .gpubundle/, gpu-env.sh in .gpu/).
# pipe/r1, r2: the tree with pipe.patch applied
DS=64 TUNE_KINDS=softmax TILES="BN=64 NWARPS=4 MT=1 KSTAGES=2 PIPE=1;BN=64 NWARPS=4 MT=2 KSTAGES=2 PIPE=1;BN=32 NWARPS=4 MT=2 KSTAGES=2 PIPE=1;BN=64 NWARPS=4 MT=1 KSTAGES=2 PIPE=0;BN=64 NWARPS=8 MT=1 KSTAGES=2 PIPE=1;BN=32 NWARPS=4 MT=1 KSTAGES=2 PIPE=1" \
    bash bench/gpu-attention-tiles.sh
TUNE_KINDS=diff_softmax NATIVE_PARTS=mma-rescale TILES="BN=32 NWARPS=4 MT=1 KSTAGES=2 PIPE=1;BN=32 NWARPS=4 MT=1 KSTAGES=2 PIPE=0;BN=32 NWARPS=2 MT=1 KSTAGES=2 PIPE=1;BN=32 NWARPS=8 MT=1 KSTAGES=2 PIPE=1;BN=16 NWARPS=4 MT=1 KSTAGES=2 PIPE=1;BN=16 NWARPS=4 MT=2 KSTAGES=2 PIPE=1" \
    bash bench/gpu-attention-tiles.sh
# pipe/ncu: Nsight Compute on softmax d=64 BN=64 NWARPS=4 MT=1 KSTAGES=2, PIPE=1 and PIPE=0
for pipe in 1 0; do
    echo "attention_mma class=nvidia-sm_90 kind=softmax dtype=bf16 d=64 dv=64 t=long : BN=64 NWARPS=4 MT=1 KSTAGES=2 PIPE=$pipe" >/tmp/pipe$pipe.tdb
    OUT=/tmp/ncu-pipe$pipe TDACL_TUNING_FILE=/tmp/pipe$pipe.tdb NCU_KINDS=softmax bash bench/profile/gpu-ncu-attention.sh
done
# rowsum/: the tree with rowsum.patch applied, against 388baf2
BASE=388baf2 NATIVE_PARTS="mma mma-wide mma-decode mma-f32" TUNE_KINDS=softmax DEC_TQ=4 TILES="BN=128 NWARPS=4 MT=1 KSTAGES=1" \
    bash bench/gpu-attention-tiles.sh
# d128-tiles/: this tree
KINDS=softmax DS=128 TS=4096,8192,16384,32768 NATIVE_PARTS=mma-rescale \
    TILES="BN=32 NWARPS=4 MT=1 KSTAGES=2;BN=32 NWARPS=4 MT=2 KSTAGES=2;BN=32 NWARPS=8 MT=1 KSTAGES=2;BN=32 NWARPS=4 MT=1 KSTAGES=1;BN=64 NWARPS=4 MT=2 KSTAGES=1;BN=128 NWARPS=4 MT=1 KSTAGES=1" \
    bash bench/gpu-attention-tiles.sh
# ex2-rate.txt
. .gpu/gpu-env.sh .gpubundle >/dev/null 2>&1; python3 bench/probes/ex2_rate.py
# qlocal/: the tree with qlocal.patch applied, each tile with and without the switch
for q in 1 0; do
    OUT=qlocal/q$q KINDS=softmax DS=64 NATIVE_PARTS=mma-rescale TILE_OPTS="-DQLOCAL=$q" \
        TILES="BN=128 NWARPS=2 MT=2 KSTAGES=1;BN=64 NWARPS=2 MT=2 KSTAGES=2;BN=64 NWARPS=4 MT=2 KSTAGES=1;BN=128 NWARPS=4 MT=1 KSTAGES=1;BN=64 NWARPS=4 MT=1 KSTAGES=2" \
        bash bench/gpu-attention-tiles.sh
done
# profile-shipped/: this tree
OUT=/tmp/ncu-ship NCU_KINDS=tra,softmax bash bench/profile/gpu-ncu-attention.sh
# --- the next session (2026-11-28, second) ---
# two-view-tiles/qlocal-*: qlocal.patch applied; TILE_OPTS=-DQLOCAL=1 on two-m-tile tiles of each kind
#   (the call's script: run() { OUT=... KINDS=$2 DS=64 TS=8192 NATIVE_PARTS=" " TILE_OPTS="-DQLOCAL=1" TILES="$3" bash bench/gpu-attention-tiles.sh; })
#   diff_softmax,softmax "BN=32 NWARPS=2 MT=2 KSTAGES=1;BN=32 NWARPS=2 MT=2 KSTAGES=2;BN=16 NWARPS=4 MT=2 KSTAGES=2;BN=16 NWARPS=4 MT=2 KSTAGES=1"
#   tda "BN=64 NWARPS=2 MT=2 KSTAGES=1;BN=64 NWARPS=2 MT=2 KSTAGES=2;BN=32 NWARPS=2 MT=2 KSTAGES=2;BN=32 NWARPS=4 MT=2 KSTAGES=1"
#   tra "BN=128 NWARPS=2 MT=2 KSTAGES=1;BN=64 NWARPS=4 MT=2 KSTAGES=2;BN=64 NWARPS=2 MT=2 KSTAGES=2;BN=128 NWARPS=4 MT=2 KSTAGES=1"
#   test-native-qlocal.txt: TDACL_BUILD_OPTIONS=-DQLOCAL=1 with those tiles in TDACL_TUNING_FILE, test_attention --part mma
# two-view-tiles/tra-one-mtile and tda-eager-ncu: this tree
KINDS=tra DS=64 TS=8192 NATIVE_PARTS=" " TILES="BN=64 NWARPS=4 MT=1 KSTAGES=2;BN=64 NWARPS=4 MT=1 KSTAGES=3;BN=32 NWARPS=4 MT=2 KSTAGES=2" \
    bash bench/gpu-attention-tiles.sh
OUT=/tmp/ncu-tda NCU_KINDS=tda bash bench/profile/gpu-ncu-attention.sh
# sum-guard/: the tree with sum-guard.patch applied, against ecb81d1
BASE=ecb81d1 KINDS=softmax,diff_softmax DS="64 128" TS=4096,8192,16384 DEC_TQ=4 NATIVE_PARTS="mma mma-wide mma-rescale mma-decode" \
    TILES="BN=128 NWARPS=4 MT=1 KSTAGES=2;BN=64 NWARPS=4 MT=1 KSTAGES=2" bash bench/gpu-attention-tiles.sh
