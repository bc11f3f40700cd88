#!/bin/bash
# The tensor-core decode (the split form of cl/attention_mma.cl, attention_decode.mma) on the
# GPU host of ../shared/gpu-host in one session:   bash bench/gpu-decode-mma.sh
#   test-native.txt        test_registry and the parts decode, mma-decode, mma natively
#   decode-mma-tune.log/.tdb  `tdacl tune --kernel attention_decode_mma`: every kind, bf16,
#                          d = 64, B8 H16, Tk = 32768, 8 query rows (shipped in tuning/)
#   decode.txt, decode-json.tgz  decode rows B8 H16 Tk=32768 bf16 for Tq = 1, 2, 4, 8, 16 on
#                          those entries: mma-tqN.json (the variant the registry takes: the
#                          tensor-core decode from 2 rows) and simt-tqN.json (TDACL_VARIANT pins
#                          the FP32-lane decode), with the peak rows (bandwidth bound column)
. bench/gpu-setup.sh
native_parts decode mma-decode mma
build-gpu/tdacl tune --device nvidia --kernel attention_decode_mma --kinds softmax,rela,tra,tda,diff_softmax --dtype bf16 \
    --d 64 --T 32768 --B 4 --H 8 --budget "${DECODE_TUNE_BUDGET:-20}" --jobs 8 --out "$OUT/decode-mma.tdb" \
    >"$OUT/decode-mma-tune.log" 2>&1
grep -E "best|combinations" "$OUT/decode-mma-tune.log"
export TDACL_TUNING_FILE="$OUT/decode-mma.tdb"
mkdir -p /tmp/dec
ROWS="--device nvidia --no-prefill --dtype bf16 --kinds softmax,rela,tra,tda,diff_softmax --beta 1"
for tq in 1 2 4 8 16; do
    build-gpu/tdacl-bench $ROWS --suite peak,attention --decode-Tq "$tq" --json "/tmp/dec/mma-tq$tq.json"
    TDACL_VARIANT=attention_decode.simt build-gpu/tdacl-bench $ROWS --suite peak,attention --decode-Tq "$tq" \
        --json "/tmp/dec/simt-tq$tq.json"
done >"$OUT/decode.txt" 2>&1
grep -E " decode " "$OUT/decode.txt" | cut -c1-175
tar czf "$OUT/decode-json.tgz" -C /tmp/dec .
exit 0
