# Sourced by the bench/gpu-*.sh scripts on the GPU host of ../shared/gpu-host, from the
# repository root (bundle in .gpubundle/, gpu-env.sh in .gpu/): results folder $OUT (default
# /tmp/out), the bundle's environment, a program cache, the GPU's name and driver in
# $OUT/gpu.txt (unless NO_GPU_TXT=1), and a Release build in build-gpu/ (exits on failure).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh .gpubundle >/dev/null
export TDACL_CACHE_DIR=/tmp/tdacl-cache
[ "${NO_GPU_TXT:-0}" = 1 ] || nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build-gpu -j"$(nproc)" >/dev/null || exit 1
