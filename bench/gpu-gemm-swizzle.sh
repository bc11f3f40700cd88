#!/bin/bash
# The tensor-core GEMM's swizzled stages (no row padding, so three stages of a 128 x 128 x 32
# tile fit NVIDIA's 48 KB), on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-gemm-swizzle.sh PATCH       (PATCH: a change as `git diff` wrote it,
#   applied to the tree; bench/results/experiments/gemm-swizzle/swizzle.patch was measured so)
# -> test-native.txt (test_matmul, test_registry natively); gemm-{new,base}.json and
#    gemm-compare.txt (the shipped entries with and without the change); matmul-anchors.json and
#    gemm-vs-torch.txt (torch.addmm bf16, same run); base-sweep.txt (the tree without the change,
#    the 128 x 128 tile of two stages, all its local memory holds) and gemm-sweep.txt (tiles on the
#    new code), with their gemm suites base-N.json, gemm-N.json
. bench/gpu-setup.sh
build_reverted "$1"
(cd build-gpu/tests && ./test_matmul && ./test_registry) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -6
gemm_vs_base_and_torch
SWEEP_TAG=base SWEEP_BENCH=/tmp/base/build/tdacl-bench gemm_sweep \
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2"
gemm_sweep \
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2" \
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=3" \
    "GMM_BM=128 GMM_BN=128 GMM_WM=4 GMM_WN=2 GMM_BK=32 GMM_STAGES=3" \
    "GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=4" \
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=16 GMM_STAGES=6"
