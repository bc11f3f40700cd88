#!/bin/bash
# What NVIDIA's OpenCL compiler itself made of the library's programs (registers, spills, local
# memory per kernel: its ptxas report, which -cl-nv-verbose puts in the build log that
# TDACL_LOG=debug prints), on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-jit-report.sh [PATCH]
# -> $OUT/jit-<run>.log (the whole debug logs) and $OUT/jit-report.txt (one line per kernel and
# run: its name and ptxas's register, spill and shared-memory lines), for the gemm suite (with the
# 128 x 128 tile of eight warps as the user's entry) and bf16 tra / softmax prefill at T=1024; with
# PATCH (a change as `git diff` wrote it) the same again after `git apply --exclude='bench/*'`.
# Compare with ptxas -v on the PTX the program cache holds (bench/gpu-gemm-regs.sh): the CUDA
# driver and OpenCL may not compile the same PTX alike (bench/results/experiments/gemm-swizzle/).
. bench/gpu-setup.sh
echo "gemm_mma class=nvidia-sm_90 : GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2" >/tmp/jit.tdb
report() { # tag, then tdacl-bench arguments
    local tag=$1
    shift
    rm -rf /tmp/jit-cache
    TDACL_CACHE_DIR=/tmp/jit-cache TDACL_LOG=debug TDACL_BUILD_OPTIONS=-cl-nv-verbose TDACL_TUNING_FILE=/tmp/jit.tdb \
        TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --min-samples 1 --min-ms 0 "$@" >"$OUT/jit-$tag.log" 2>&1
    awk -v tag="$tag" '/Compiling entry function/ { match($0, /function .[a-z_0-9]+/); k = substr($0, RSTART + 10, RLENGTH - 10) }
        /Used [0-9]+ registers|spill stores/ && k != "" { sub(/^ptxas */, ""); sub(/^info *: */, ""); sub(/^[.] */, ""); print tag, k ":", $0 }' "$OUT/jit-$tag.log" |
        sort -u | tee -a "$OUT/jit-report.txt"
}
run_all() { # suffix
    report "gemm$1" --suite gemm
    report "attention$1" --suite attention --kinds tra,softmax --T 1024 --dtype bf16 --no-decode --beta 1
}
run_all ""
if [ -n "${1:-}" ]; then
    git apply --exclude='bench/*' "$1" && cmake --build build-gpu -j"$(nproc)" >/dev/null || { echo "patch failed"; exit 1; }
    run_all "-patched"
fi
exit 0
