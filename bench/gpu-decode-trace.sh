#!/bin/bash
# Where the one-launch decode layer's time goes, phase by phase and work-group by work-group, on
# the GPU host of ../shared/gpu-host:   bash bench/gpu-decode-trace.sh
#   trace.txt        the dl_trace lines of `tdacl generate` (GPT-2 small softmax, bf16 weights and
#                    activations, 960-id prompt) built with -DDL_TRACE=1000 plus each of $VARIANTS
#                    (';'-separated TDACL_BUILD_OPTIONS; default: none besides the trace)
#   trace-table.txt  bench/decode_trace.py's table of it (each phase's end: first, median and last
#                    work-group, and the phase's share of the launch)
#   profile.txt      TDACL_PROFILE=1 `tdacl generate` (129 new): every kernel's device time a token
. bench/gpu-setup.sh
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
[ -d "$M" ] || timeout 300 build-gpu/tdacl-bench --device nvidia --suite forward --kinds softmax --dtype bf16act \
    --no-prefill >/dev/null 2>&1
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --dtype bf16 --activations bf16"
IFS=';' read -ra VLIST <<<"${VARIANTS:-none}"
for v in "${VLIST[@]}"; do
    o=$v; [ "$v" = none ] && o=""
    echo "== -DDL_TRACE=1000 $o"
    TDACL_BUILD_OPTIONS="-DDL_TRACE=1000 $o" timeout 120 build-gpu/tdacl generate $G --max-new 45 2>&1 | grep -E "dl_trace"
done >"$OUT/trace.txt"
python3 bench/decode_trace.py "$OUT/trace.txt" | tee "$OUT/trace-table.txt"
TDACL_PROFILE=1 timeout 120 build-gpu/tdacl generate $G --max-new 129 2>&1 >/dev/null | grep -vE "^[0-9,]+$" >"$OUT/profile.txt"
tail -25 "$OUT/profile.txt"
