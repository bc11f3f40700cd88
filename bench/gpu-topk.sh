#!/bin/bash
# Top-theta on the GPU host: its test parts natively, with the entmax parts (their kernel now
# shares cl/attention_rows.cl) and the NaN test (-> test-native.txt); a sweep of the decode
# tiles and split counts (user tuning entries, B8 H16 Tk 32768, thresholds keeping ~64 keys
# a row -> sweep.txt), the best of each dtype kept in best.tdb; then, in one run, decode rows
# of topk_theta (with best.tdb) against our softmax (-> decode.json/txt), prefill rows of
# softmax, entmax and topk_theta at B4 H8 T 1024-8192 (-> prefill.json/txt), and entmax's rows
# from a build of BASE (default HEAD: before this change) against this build's
# (-> entmax-base.json, entmax-compare.txt).
# Usage (repository root): OUT=/tmp/out bash bench/gpu-topk.sh [BASE]
. bench/gpu-setup.sh
native_parts topk-theta topk-theta-layouts entmax entmax-layouts
(cd build-gpu/tests && TDACL_LOG=warn ./test_attention --filter test_nan_inputs) >>"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native.txt" | tail -1

class=$(build-gpu/tdacl devices 2>/dev/null | sed -n 's/.*\(nvidia-sm_[0-9]*\)).*/\1/p' | head -1)
: >"$OUT/best.tdb"
: >"$OUT/sweep.txt"
for dt in bf16 f32; do
    best="" best_ms=""
    for tiles in "BM=1 BN=64 LPR=64" "BM=2 BN=64 LPR=32" "BM=1 BN=128 LPR=64" "BM=1 BN=32 LPR=32"; do
        for waves in 16 32 64; do
            for pf in 0 1; do
                p="$tiles PREFETCH=$pf WAVES=$waves"
                echo "attention_topk_decode class=$class kind=topk_theta dtype=$dt d=64 : $p" >/tmp/cand.tdb
                ms=$(TDACL_TUNING_FILE=/tmp/cand.tdb build-gpu/tdacl-bench --device nvidia --suite attention \
                    --kinds topk_theta --dtype "$dt" --no-prefill --csv /tmp/cand.csv >/dev/null 2>&1 &&
                    python3 -c 'import csv,sys; r=[x for x in csv.DictReader(open(sys.argv[1])) if x["name"]=="topk_theta"]; print(r[0]["median_ms"] if r else "")' /tmp/cand.csv)
                echo "$dt $p: ${ms:-failed} ms" | tee -a "$OUT/sweep.txt"
                if [ -n "$ms" ] && { [ -z "$best_ms" ] || python3 -c "import sys; sys.exit(0 if $ms < $best_ms else 1)"; }; then
                    best="$p" best_ms="$ms"
                fi
            done
        done
    done
    echo "attention_topk_decode class=$class kind=topk_theta dtype=$dt d=64 : $best  # $best_ms ms at B8 H16 Tk32768" >>"$OUT/best.tdb"
done
cat "$OUT/best.tdb"

TDACL_TUNING_FILE="$OUT/best.tdb" build-gpu/tdacl-bench --device nvidia --suite peak,attention --kinds softmax,topk_theta \
    --dtype bf16,f32 --no-prefill --json "$OUT/decode.json" >"$OUT/decode.txt" 2>&1
build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax,entmax,topk_theta --dtype bf16 \
    --T 1024,4096,8192 --no-decode --json "$OUT/prefill.json" >"$OUT/prefill.txt" 2>&1
build_base "${1:-HEAD}"
/tmp/base/build/tdacl-bench --device nvidia --suite attention --kinds entmax --dtype bf16 --T 4096,8192 \
    --json "$OUT/entmax-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench --device nvidia --suite attention --kinds entmax --dtype bf16 --T 4096,8192 \
    --json "$OUT/entmax-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/entmax-new.json" --compare "$OUT/entmax-base.json" >"$OUT/entmax-compare.txt" 2>&1
tail -8 "$OUT/decode.txt"
tail -10 "$OUT/prefill.txt"
tail -8 "$OUT/entmax-compare.txt"
