#!/bin/bash
# The device calls of this folder, from the repository root (bundle in .gpubundle/, gpu-env.sh in .gpu/).
# sdpa-backends.txt: which kernel SDPA runs by default, each backend's time (written by the same
# code run inline in the device call, before it was committed as the probe)
. .gpu/gpu-env.sh .gpubundle >/dev/null 2>&1; python3 bench/probes/sdpa_backends.py | tee sdpa-backends.txt
# att-*.json, anchors-*.json, att-table.txt: every tensor-core kind of 1d5ad4c (the kernels of ecb81d1) on its shipped
# tiles against SDPA's default (cuDNN) and FlashAttention-2 (SDPA's flash backend), anchors.py with the fa2 rows
KINDS=softmax,tra,tda,diff_softmax DS="64 128" TS=4096,8192,16384,32768 NATIVE_PARTS=" " bash bench/gpu-attention-tiles.sh
# profile-fa2/: Nsight Compute on FlashAttention-2 (flash backend) at B4 H8 T8192 d64 causal
cat > /tmp/fa2.py <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend
q, k, v = (torch.randn(4, 8, 8192, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    for _ in range(13):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.cuda.synchronize()
PY
ncu --clock-control none -k regex:flash -s 2 -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    python3 /tmp/fa2.py >profile-fa2/fa2.ncu.txt 2>&1
ncu --clock-control none -k regex:flash -s 2 -c 1 --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 /tmp/fa2.py 2>&1 | awk '$NF+0 > 0.05' | sort -k3 -n -r | head -14 >profile-fa2/fa2.stalls.txt
ncu --clock-control none -k regex:flash -s 2 -c 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    python3 /tmp/fa2.py >profile-fa2/fa2.source.csv 2>&1
python3 bench/profile/sass_breakdown.py profile-fa2/fa2.source.csv --top 20 >profile-fa2/fa2.breakdown.txt
gzip -f profile-fa2/fa2.source.csv
# d128-spread/: softmax d=128 at T=16384 and 32768 against FlashAttention-2, three runs in one call
for i in 1 2 3; do
    OUT=d128-spread/run$i KINDS=softmax DS=128 TS=16384,32768 NATIVE_PARTS=" " NO_GPU_TXT=1 bash bench/gpu-attention-tiles.sh
done
# d128-tiles/: five more d=128 softmax tiles over T=4096..32768 (those marked "shipped" in the table were refused: local memory or registers)
OUT=d128-tiles KINDS=softmax DS=128 TS=4096,8192,16384,32768 NATIVE_PARTS=" " \
    TILES="BN=64 NWARPS=8 MT=1 KSTAGES=1;BN=64 NWARPS=2 MT=1 KSTAGES=1;BN=32 NWARPS=8 MT=1 KSTAGES=1;BN=64 NWARPS=4 MT=2 KSTAGES=1;BN=32 NWARPS=4 MT=1 KSTAGES=1" \
    bash bench/gpu-attention-tiles.sh
