#!/bin/bash
# Nsight Compute on the tensor-core GEMM (bf16 a, w and c): for each tile candidate the gemm
# suite builds the program (a user tuning file names it), its PTX comes out of that run's
# program cache, ptxas -v gives its registers and spills, ptx_gemm.py times it through the CUDA
# driver on two GPT-2 shapes, and the first candidate runs under ncu.  Reports (text) in $OUT.
NO_GPU_TXT=1 . bench/gpu-setup.sh
PTXAS=$(find / -name ptxas -type f -perm -u+x 2>/dev/null | head -1)
CANDIDATES=(
    "${NCU_GEMM_FIRST:-GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2}"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=16 GMM_STAGES=4"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=16 GMM_STAGES=4"
)
for i in "${!CANDIDATES[@]}"; do
    echo "gemm_mma class=nvidia-sm_90 : ${CANDIDATES[$i]}" >/tmp/cand.tdb
    rm -rf /tmp/cache-$i
    TDACL_CACHE_DIR=/tmp/cache-$i TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia \
        --suite gemm --min-samples 3 --json "$OUT/gemm-$i.json" 2>&1 | grep "bf16act" | grep -v " 1x"
    gemm_ptx_of_cache /tmp/cache-$i "$OUT/gemm$i"
    p=$OUT/gemm$i
    [ -f "$p.ptx" ] || { echo "candidate $i: no PTX found"; continue; }
    echo "candidate $i: ${CANDIDATES[$i]}" | tee "$p.txt"
    [ -n "$PTXAS" ] && "$PTXAS" -arch=sm_90 -v "$p.ptx" -o /tmp/g.cubin 2>&1 | grep -E "registers|spill" | tee -a "$p.txt"
    for shape in "8192 3072 768" "8192 768 3072" "1024 2304 768"; do
        set -- $shape
        python3 bench/profile/ptx_gemm.py --ptx "$p.ptx" --opts "$(cat "$p.opts")" --M $1 --N $2 --K $3 2>&1 | tail -1 | tee -a "$p.txt"
    done
done
p=$OUT/gemm0
A="--M 8192 --N 3072 --K 768"
ncu --clock-control none -k gemm_mma -s 2 -c 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    python3 bench/profile/ptx_gemm.py --ptx "$p.ptx" --opts "$(cat "$p.opts")" $A >"$p.ncu.txt" 2>&1
ncu --clock-control none -k gemm_mma -s 2 -c 1 \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    python3 bench/profile/ptx_gemm.py --ptx "$p.ptx" --opts "$(cat "$p.opts")" $A 2>&1 |
    awk '$NF+0 > 0.05' | sort -k3 -n -r | head -14 >"$p.stalls.txt"
cat "$p.stalls.txt"
ncu --clock-control none -k gemm_mma -s 2 -c 1 --section SourceCounters --section WarpStateStats \
    --page source --print-source sass --csv \
    python3 bench/profile/ptx_gemm.py --ptx "$p.ptx" --opts "$(cat "$p.opts")" $A >"$p.source.csv" 2>&1
gzip -f "$p.source.csv"
grep -E "Duration|Warp Cycles Per Issued|Issued Warp|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers|Shared Memory|Block Limit|Stall|Pipe" "$p.ncu.txt" | head -40
exit 0
