#!/bin/bash
# A change's effect on the forward suite's prefill rows (bf16 weights and activations), on the
# GPU host of ../shared/gpu-host:   bash bench/gpu-prefill-compare.sh PATCH
# PATCH: the change as `git diff` wrote it; the base is this tree without it (build_reverted).
#   forward-{base,new}-I.json / .txt   REPS (default 2) interleaved runs of each build, KINDS
#                                      (default tda,softmax)
#   compare-I.txt                      new against base, run by run
. bench/gpu-setup.sh
build_reverted "$1"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for i in $(seq 1 "${REPS:-2}"); do
    for b in base new; do
        bin=build-gpu/tdacl-bench
        [ $b = base ] && bin=/tmp/base/build/tdacl-bench
        timeout 300 $bin --device nvidia --suite forward --kinds "${KINDS:-tda,softmax}" --dtype bf16act --no-decode \
            --json "$OUT/forward-$b-$i.json" >"$OUT/forward-$b-$i.txt" 2>&1
    done
    build-gpu/tdacl-bench --load "$OUT/forward-new-$i.json" --compare "$OUT/forward-base-$i.json" >"$OUT/compare-$i.txt" 2>&1
    grep -E "prefill" "$OUT/compare-$i.txt" | tail -8
done
grep -E "prefill" "$OUT/forward-new-1.txt" | sed -E 's/.*(B[0-9]+ T[0-9]+).* ([0-9.]+) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ .*(host enqueue [0-9.]+ ms).*/\1 \2 \3/'
