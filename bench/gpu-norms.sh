#!/bin/bash
# The inverse-norm pre-pass of the normalised kinds (cl/attention_prep.cl, 8 work-items per
# row) against the session's starting commit, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-norms.sh [BASE]
#   test-native.txt  test_registry and the parts basics, layouts, mma natively
#   norms.json, norms-base.json, compare.txt  tra and tda prefill, bf16 and f32, T=4096 and
#                    8192 (B4 H8 d64), this build against BASE in the same run
. bench/gpu-setup.sh
BASE=${1:-HEAD}
native_parts basics layouts mma
build_base "$BASE"
ROWS="--device nvidia --suite attention --T 4096,8192 --B 4 --H 8 --beta 1 --dtype bf16,f32 --kinds tra,tda --no-decode"
TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench $ROWS --json "$OUT/norms-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $ROWS --json "$OUT/norms.json" --compare "$OUT/norms-base.json" 2>&1 | tee "$OUT/compare.txt" | tail -12
exit 0
