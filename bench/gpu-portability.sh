#!/bin/bash
# After the OpenCL C portability fixes (UNROLL instead of `#pragma unroll`, work-item-count
# independent zeroing and row loops), on the GPU host of ../shared/gpu-host in one session:
#   bash bench/gpu-portability.sh [BASE]
# the SIMT attention and decode test parts natively ($OUT/test-native.txt), then the SIMT
# attention prefill and decode rows and the SIMT GEMM with the build of commit BASE (default
# HEAD, the device copy's starting commit) and with the working tree, compared: the unroll
# hints must still reach NVIDIA's compiler (no row slower).  Results in $OUT.
. bench/gpu-setup.sh
BASE=${1:-HEAD}
native_parts basics decode forced-big semantics ladder-ends layouts-bf16

build_base "$BASE"
export TDACL_VARIANT=attention.simt,attention_decode.simt,gemm.simt,gemv.simt
ROWS="--device nvidia --suite attention,gemm --dtype f32,bf16 --T 4096 --beta 1 --kinds tra,tda,softmax"
TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench $ROWS --json "$OUT/simt-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $ROWS --json "$OUT/simt.json" --compare "$OUT/simt-base.json" 2>&1 | tee "$OUT/compare.txt" | tail -24
