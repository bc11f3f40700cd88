#!/bin/bash
# After the AMD and Intel bodies of the fragment layer (cl/mma_units.cl), on the GPU host of
# ../shared/gpu-host in one session:   bash bench/gpu-units.sh [BASE]
# the tensor-core test parts natively on NVIDIA ($OUT/test-native.txt: mma, mma-wide, mma-f32
# through mma.sync; mma-units runs the vendor bodies' emulations on this GPU; test_matmul),
# `tdacl devices`, then the tensor-core prefill rows with the build of commit BASE (default
# HEAD, the device copy's starting commit) and with the working tree, compared: the shared
# kernel source must not get slower on mma.sync.  Results in $OUT.
. bench/gpu-setup.sh
BASE=${1:-HEAD}
native_parts mma mma-wide mma-f32 mma-units
(cd build-gpu/tests && ./test_matmul) >"$OUT/test-native-matmul.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native-matmul.txt" | tail -2
build-gpu/tdacl devices >"$OUT/devices.txt" 2>&1

build_base "$BASE"
ROWS="--device nvidia --suite attention --T 4096,8192 --B 4 --H 8 --beta 1 --dtype bf16 --kinds softmax,tra,tda,diff_softmax"
TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench $ROWS --json "$OUT/mma-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $ROWS --json "$OUT/mma.json" --compare "$OUT/mma-base.json" 2>&1 | tee "$OUT/compare.txt" | tail -12
