#!/bin/bash
# Every tensor-core path natively, and the shared kernel source against a base build, on the
# GPU host of ../shared/gpu-host in one session:   bash bench/gpu-mma-check.sh [BASE]
#   test-native.txt         test_registry and the test_attention parts $MMA_CHECK_PARTS natively
#                           (default mma, mma-wide, mma-f32, mma-tf32, mma-decode, decode,
#                           layouts-bf16; with the base build they fill a 10-minute call,
#                           so mma-units, the vendor bodies' emulations, runs in a call of
#                           its own: MMA_CHECK_PARTS=mma-units)
#   test-native-matmul.txt  test_matmul natively;  devices.txt  `tdacl devices --peak`
#   mma.json, mma-base.json, compare.txt  bf16 prefill (T=4096, 8192) and one-row decode rows
#                           of every kind, this build against commit BASE (default HEAD, the
#                           device copy's starting commit) in the same run
. bench/gpu-setup.sh
BASE=${1:-HEAD}
native_parts ${MMA_CHECK_PARTS:-mma mma-wide mma-f32 mma-tf32 mma-decode decode layouts-bf16}
(cd build-gpu/tests && ./test_matmul) >"$OUT/test-native-matmul.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native-matmul.txt" | tail -2
build-gpu/tdacl devices --peak >"$OUT/devices.txt" 2>&1
build_base "$BASE"
ROWS="--device nvidia --suite attention --T 4096,8192 --B 4 --H 8 --beta 1 --dtype bf16 --kinds softmax,rela,tra,tda,diff_softmax"
TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench $ROWS --json "$OUT/mma-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $ROWS --json "$OUT/mma.json" --compare "$OUT/mma-base.json" 2>&1 | tee "$OUT/compare.txt" | tail -18
exit 0
