#!/bin/bash
# Intel's offline OpenCL compiler (ocloc, with IGC) from Debian 12's intel-opencl-icd,
# unpacked with dpkg -x into DIR (default: $TDACL_OCLOC_DIR, else $XDG_CACHE_HOME/tdacl-ocloc), so that no OpenCL
# driver is registered on this machine; prints a command that runs it.  Its LLVM 14 runtime
# libraries come from tools/packages-test.txt (clang, libclang-cpp14).
#   tools/fetch-ocloc.sh [DIR]
set -euo pipefail
DIR="${1:-${TDACL_OCLOC_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tdacl-ocloc}}"
LIB="$DIR/root/usr/lib/x86_64-linux-gnu"
if [ ! -x "$DIR/root/usr/bin/ocloc" ]; then
    mkdir -p "$DIR/debs"
    (cd "$DIR/debs" && apt-get download intel-opencl-icd libigc1 libigdfcl1 libigdgmm12 libopencl-clang14 \
        libllvmspirvlib14 >&2) || { echo "fetch-ocloc: apt-get download failed" >&2; exit 1; }
    for f in "$DIR"/debs/*.deb; do dpkg -x "$f" "$DIR/root"; done
fi
missing=$(LD_LIBRARY_PATH="$LIB" ldd "$LIB/libigdfcl.so.1" "$LIB/libigc.so.1" | grep "not found" || true)
[ -z "$missing" ] || { echo "fetch-ocloc: libraries missing (apt-get install libclang-cpp14 libllvm14): $missing" >&2; exit 1; }
echo "env LD_LIBRARY_PATH=$LIB $DIR/root/usr/bin/ocloc"
