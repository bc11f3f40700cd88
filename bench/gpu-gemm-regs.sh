#!/bin/bash
# Registers of the tensor-core GEMM (bf16 a, w, c) before and after a change, and its times
# under a register cap, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-gemm-regs.sh PATCH     (PATCH: a change as `git diff` wrote it,
#   applied to the tree; bench/results/experiments/gemm-swizzle/swizzle.patch was measured so)
# For each (build, tile, cap): the gemm suite with the tile as the user's tuning entry and
# -cl-nv-maxrregcount=cap (0: none) through TDACL_BUILD_OPTIONS, in a fresh program cache; its
# PTX out of the cache through ptxas -v -> $OUT/regs.txt (registers, spills, the M=8192 bf16act
# rows' ms), $OUT/<build>-<n>.ptx and .opts
. bench/gpu-setup.sh
build_reverted "$1"
PTXAS=$(find / -name ptxas -type f -perm -u+x 2>/dev/null | head -1)
n=0
run() { # build-dir tag tile cap
    local bench=$1/tdacl-bench tag=$2 tile=$3 cap=$4 opt=""
    [ "$cap" != 0 ] && opt="-cl-nv-maxrregcount=$cap"
    echo "gemm_mma class=nvidia-sm_90 : $tile" >/tmp/cand.tdb
    rm -rf /tmp/rc && n=$((n + 1))
    TDACL_CACHE_DIR=/tmp/rc TDACL_BUILD_OPTIONS="$opt" TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 $bench \
        --device nvidia --suite gemm --min-samples 5 --json "$OUT/$tag-$n.json" >/dev/null 2>&1
    gemm_ptx_of_cache /tmp/rc "$OUT/$tag-$n"
    local regs=$("$PTXAS" -arch=sm_90 -v "$OUT/$tag-$n.ptx" -o /tmp/g.cubin 2>&1 | grep -A3 "gemm_mma'" | grep -oE "Used [0-9]+ registers|[0-9]+ bytes spill stores" | tr '\n' ' ')
    local ms=$(python3 -c 'import json,sys; print(" ".join("%.4f" % r["time_ms"]["median"] for r in json.load(open(sys.argv[1]))["rows"] if r["suite"]=="gemm" and r["dtype"]=="bf16act" and r["shape"]["M"]==8192))' "$OUT/$tag-$n.json")
    echo "$tag [$tile] cap $cap: $regs :: M=8192 bf16act ms $ms" | tee -a "$OUT/regs.txt"
}
T2="GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2"
T3="GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=3"
run /tmp/base/build base "$T2" 0
run build-gpu new "$T2" 0
run build-gpu new "$T3" 0
run build-gpu new "$T2" 128
run build-gpu new "$T3" 128
run /tmp/base/build base "$T2" 128
T3b="GMM_BM=128 GMM_BN=128 GMM_WM=4 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
run build-gpu new "$T3b" 0
run build-gpu new "$T3b" 128
exit 0
