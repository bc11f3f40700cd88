#!/bin/bash
# After the architecture classes (class compiler options, the decode kernel's EARLY_FETCH
# switch and its private-array fix), on the GPU host of ../shared/gpu-host in one session:
#   bash bench/gpu-classes.sh [BASE]
# the attention test parts natively ($OUT/test-native.txt; class-tiles runs the AMD and Intel
# class tiles on this GPU, decode the kernel as NVIDIA builds it), then the SIMT decode rows
# with the build of commit BASE (default HEAD, the device copy's starting commit) and with the
# working tree, compared: NVIDIA's build must not get slower.  Results in $OUT.
. bench/gpu-setup.sh
BASE=${1:-HEAD}
native_parts basics decode layouts-bf16 class-tiles
(cd build-gpu/tests && TDACL_BUILD_OPTIONS=-DEARLY_FETCH=0 ./test_attention --part decode) >"$OUT/test-native-one-chunk.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native-one-chunk.txt" | tail -2

build_base "$BASE"
export TDACL_VARIANT=attention.simt,attention_decode.simt
ROWS="--device nvidia --suite attention --T 512 --beta 1 --dtype f32,bf16 --decode-Tk 32768 --kinds tra,tda,softmax,diff_softmax"
TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench $ROWS --json "$OUT/decode-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $ROWS --json "$OUT/decode.json" --compare "$OUT/decode-base.json" 2>&1 | tee "$OUT/compare.txt" | tail -16
