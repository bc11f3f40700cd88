#!/bin/bash
# The decode layer in one launch (cl/decode_layer.cl) against five launches a layer, on the
# GPU host of ../shared/gpu-host:   bash bench/gpu-decode-layer.sh
#   test-one-launch.txt  test_model test_decode_one_launch, natively
#   decode.txt     tdacl-bench forward decode rows (softmax; $DTYPES, default f32,bf16act), TDACL_DECODE=launches
#                  and the default (one launch a layer) interleaved REPS times (default 3), and
#                  the default with TDACL_BUILD_OPTIONS=$ALT (-DDL_PREFETCH=1: the L2 prefetch);
#                  medians of the runs' medians
#   generate.txt   `tdacl generate` (GPT-2-small softmax, bf16 weights and activations, 960-id
#                  prompt, 129 new) both ways, then TDACL_PROFILE per-kernel device times
#   test-native.txt  test_matmul, test_model, test_tuning, test_registry natively
#   data.tgz       the JSON runs
# QUICK=1: decode.txt only (no test runs, no generate).
. bench/gpu-setup.sh
if [ "${QUICK:-0}" != 1 ]; then
    (cd build-gpu/tests && timeout 300 ./test_model --filter test_decode_one_launch) >"$OUT/test-one-launch.txt" 2>&1
    tail -3 "$OUT/test-one-launch.txt"
fi
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
D="--device nvidia --suite forward --kinds softmax --dtype ${DTYPES:-f32,bf16act} --no-prefill"
for i in $(seq "${REPS:-3}"); do
    TDACL_DECODE=launches timeout 300 build-gpu/tdacl-bench $D --json "$OUT/decode-launches-$i.json" >/dev/null 2>&1
    timeout 300 build-gpu/tdacl-bench $D --json "$OUT/decode-layer-$i.json" >"$OUT/bench-layer-$i.txt" 2>&1
    TDACL_BUILD_OPTIONS=${ALT:--DDL_PREFETCH=1} timeout 300 build-gpu/tdacl-bench $D \
        --json "$OUT/decode-alt-$i.json" >/dev/null 2>&1
done
python3 bench/decode_medians.py "$OUT" launches layer alt >"$OUT/decode.txt"
cat "$OUT/decode.txt"
grep -E "decode" "$OUT/bench-layer-1.txt" | cut -c1-250 | head -12
if [ "${QUICK:-0}" = 1 ]; then
    cd "$OUT" && tar czf data.tgz *.json bench-layer-*.txt && rm -f *.json bench-layer-*.txt
    exit 0
fi
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --max-new 129 --dtype bf16 --activations bf16"
{
    for rep in 1 2; do
        echo "five launches a layer:"
        TDACL_DECODE=launches timeout 120 build-gpu/tdacl generate $G 2>&1 >/dev/null | grep -E "ms/token"
        echo "one launch a layer:"
        timeout 120 build-gpu/tdacl generate $G 2>&1 >/dev/null | grep -E "ms/token"
    done
    TDACL_PROFILE=1 timeout 120 build-gpu/tdacl generate $G 2>&1 >/dev/null | grep -E "profile|ms/token"
} >"$OUT/generate.txt"
cat "$OUT/generate.txt"
(cd build-gpu/tests && for t in test_matmul test_model test_tuning test_registry; do timeout 400 ./$t 2>&1 | tail -4; done) \
    >"$OUT/test-native.txt" 2>&1
cat "$OUT/test-native.txt"
cd "$OUT" && tar czf data.tgz *.json bench-layer-*.txt && rm -f *.json bench-layer-*.txt
