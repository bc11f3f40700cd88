#!/bin/bash
# The README's first command: on a fresh Debian 12 machine (as root, or with sudo), install
# the packages in tools/packages.txt that are missing (no Recommends), build a Release tree in
# build/ (library, CLI, bench; the tests need tools/run-tests.sh), list the OpenCL devices and
# run the quick benchmark on the default device (the GPU when there is one, PoCL's CPU device
# otherwise).  Extra arguments go to tdacl-bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash tools/apt-install.sh tools/packages.txt

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTDACL_BUILD_TESTS=OFF
cmake --build build -j"$(nproc)"

build/tdacl devices
# default device only: TDACL_DEVICE (if set) or the library's default choice
sel="${TDACL_DEVICE:-$(build/tdacl devices 2>/dev/null |
    awk '/^\[[0-9]+\]/ { i = substr($1, 2, length($1) - 2) } /\(default device\)/ { print i; exit }')}"
build/tdacl-bench --quick --device "${sel:-0}" "$@"
