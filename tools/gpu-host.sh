#!/bin/bash
# Build libtdacl on the offline NVIDIA host of ../shared/gpu-host (run from the repo root
# there).  Expects the bundle in .gpubundle/ and gpu-env.sh in .gpu/ (both git-ignored;
# see docs/gpu-host.md).  Leaves the build in build-gpu/.
set -eo pipefail
. .gpu/gpu-env.sh .gpubundle >/dev/null
export TDACL_CACHE_DIR=${TDACL_CACHE_DIR:-/tmp/tdacl-cache}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTDACL_BUILD_TESTS=OFF >/dev/null
cmake --build build-gpu -j"$(nproc)" >/dev/null
echo "built $(build-gpu/tdacl version)"
