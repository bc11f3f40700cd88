#!/bin/bash
# Decode attention (cl/attention_decode.cl) before and after a change, in one run on the GPU
# host of ../shared/gpu-host:
#   bash bench/gpu-decode.sh [BASE]
# builds the working tree (build-gpu/) and commit BASE (default HEAD, the device copy's
# starting commit) in /tmp/base, runs the decode test parts natively ($OUT/test-native.txt),
# times the decode rows (B=8, H=16, Tk=32768, f32 and bf16, tra/softmax/tda, shipped
# entries) with both builds ($OUT/decode-base.json, $OUT/decode.json, compared), tunes the
# decode kernel with the new build ($OUT/decode.tdb) and times it again on those entries
# ($OUT/decode-tuned.json).  Run from the repository root with the bundle in .gpubundle/
# and gpu-env.sh in .gpu/; results go to $OUT (default /tmp/out).
. bench/gpu-setup.sh
BASE=${1:-HEAD}
KINDS=${DECODE_KINDS:-tra,softmax,tda}
ROWS="--suite peak,attention --T 1024 --dtype f32,bf16 --beta 1 --kinds $KINDS"

native_parts decode layouts-bf16 layouts-f16 layouts-f16-tra semantics

build_base "$BASE"
TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench --device nvidia $ROWS \
    --json "$OUT/decode-base.json" 2>&1 | grep -E "decode" | tail -8
build-gpu/tdacl-bench --device nvidia $ROWS --json "$OUT/decode.json" --compare "$OUT/decode-base.json" 2>&1 | tail -14

: >"$OUT/decode.tdb"
for dt in bf16 f32; do
    build-gpu/tdacl tune --device nvidia --kernel attention_decode --kinds "$KINDS" --dtype "$dt" --d 64 \
        --T 32768 --budget "${DECODE_TUNE_BUDGET:-8}" --jobs 8 --out "$OUT/decode.tdb" 2>&1 | tee -a "$OUT/tune.log" | grep -E "^attention_decode|candidates"
done
TDACL_TUNING_FILE="$OUT/decode.tdb" build-gpu/tdacl-bench --device nvidia $ROWS --json "$OUT/decode-tuned.json" \
    --compare "$OUT/decode-base.json" 2>&1 | tail -14
