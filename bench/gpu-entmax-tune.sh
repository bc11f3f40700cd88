#!/bin/bash
# Tunes the entmax rows on the GPU host (every candidate checked against the tuner's reference):
# prefill B4 H8 T8192 d64 and decode B8 H16 Tk32768, bf16 and f32 -> entmax.tdb (entries to
# ship), tune-*.log; then the same tdacl-bench rows as bench/gpu-entmax.sh with those entries
# (TDACL_TUNING_FILE) against our softmax in one run -> entmax-tuned.txt / .json.
# Usage (repository root): OUT=/tmp/out bash bench/gpu-entmax-tune.sh
. bench/gpu-setup.sh
for dt in bf16 f32; do
    build-gpu/tdacl tune --device nvidia --kernel attention_entmax --kinds entmax --dtype $dt --d 64 --T 8192 \
        --B 4 --H 8 --budget 120 --strategy random --seed 1 --jobs 16 --out "$OUT/entmax.tdb" >"$OUT/tune-prefill-$dt.log" 2>&1
    build-gpu/tdacl tune --device nvidia --kernel attention_entmax_decode --kinds entmax --dtype $dt --d 64 --T 32768 \
        --B 8 --H 16 --budget 60 --strategy random --seed 1 --jobs 16 --out "$OUT/entmax.tdb" >"$OUT/tune-decode-$dt.log" 2>&1
done
TDACL_TUNING_FILE="$OUT/entmax.tdb" build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax,entmax \
    --dtype bf16,f32 --T 1024,4096,8192 --json "$OUT/entmax-tuned.json" >"$OUT/entmax-tuned.txt" 2>&1
echo done >"$OUT/done"
