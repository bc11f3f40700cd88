#!/bin/bash
# softmax bf16 d=64 T=8192 (B4 H8) over tiles and register caps (-cl-nv-maxrregcount through
# TDACL_BUILD_OPTIONS), each tile through a one-entry user tuning file; one line per run.
# Usage (repository root, GPU host): bash bench/gpu-regcap.sh
. bench/gpu-setup.sh >/dev/null 2>&1
dev=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
for tile in "BN=128 NWARPS=4 MT=2 KSTAGES=1:0" "BN=128 NWARPS=4 MT=1 KSTAGES=1:0" "BN=128 NWARPS=4 MT=1 KSTAGES=1:168" \
            "BN=64 NWARPS=4 MT=1 KSTAGES=2:168" "BN=64 NWARPS=4 MT=1 KSTAGES=1:168" "BN=64 NWARPS=8 MT=1 KSTAGES=2:128" \
            "BN=128 NWARPS=8 MT=1 KSTAGES=1:128" "BN=64 NWARPS=4 MT=1 KSTAGES=2:128" "BN=128 NWARPS=4 MT=1 KSTAGES=1:128" \
            "BN=64 NWARPS=8 MT=1 KSTAGES=1:128" "BN=128 NWARPS=4 MT=2 KSTAGES=1:232"; do
    t=${tile%:*}; r=${tile#*:}
    echo "attention_mma device=\"$dev\" class=nvidia-sm_90 kind=softmax dtype=bf16 d=64 dv=64 : $t" >/tmp/t.tdb
    opt=""; [ "$r" != 0 ] && opt="-cl-nv-maxrregcount=$r"
    line=$(TDACL_BUILD_OPTIONS="$opt" TDACL_TUNING_FILE=/tmp/t.tdb build-gpu/tdacl-bench --device nvidia --suite attention \
        --kinds softmax --dtype bf16 --T 8192 --no-decode 2>&1 | grep "attention softmax")
    echo "$t maxreg=$r :: $(echo "$line" | awk '{print $9, $12}') $(echo "$line" | grep -o 'attention.mma.*')"
done
