#!/bin/bash
# The tensor-core GEMM's whole-tile copies and paired epilogue stores, before and after, and a
# sweep of tiles after it, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-gemm-whole.sh PATCH      (PATCH: the change as `git diff` wrote it)
# -> gemm-{new,base}.json, gemm-compare.txt, matmul-anchors.json, gemm-vs-torch.txt (shipped
# entries), then per candidate gemm-N.json and the table gemm-sweep.txt (bf16act rows: bf16 a, w, c).
. bench/gpu-setup.sh
build_reverted "$1"
gemm_vs_base_and_torch
CANDIDATES=(
    "GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=64 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=128 GMM_WM=4 GMM_WN=2 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=64 GMM_BN=256 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=4"
    "GMM_BM=128 GMM_BN=64 GMM_WM=4 GMM_WN=1 GMM_BK=32 GMM_STAGES=3"
)
gemm_sweep "${CANDIDATES[@]}"
exit 0
