#!/bin/bash
# The decode step against commit BASE (default: the parent of HEAD) built in the same run, on
# the GPU host of ../shared/gpu-host:   bash bench/gpu-decode-steps.sh [BASE | PATCH]
# (PATCH: a `git diff` of a change not yet committed; the base is this tree without it)
#   decode.txt     tdacl-bench forward decode rows (softmax, tda; f32, bf16act), base and new
#                  interleaved three times, each row's median of the three medians (the batch-1
#                  rows vary by up to 30 % between processes), new / base
#   compare-prefill.txt  the bf16act prefill rows, new against base (one run each)
#   generate.txt   `tdacl generate` (GPT-2-small softmax model, bf16 weights and activations,
#                  960-id prompt, 129 new), base and new interleaved: ms/token, then the new
#                  build's TDACL_PROFILE per-kernel device times
#   gemv.txt       the new build's GEMV rows (gemm suite, M = 1, bf16 weights)
#   data.tgz       the JSON runs
. bench/gpu-setup.sh
BASE=${1:-$(git rev-parse HEAD~1)}
case "$BASE" in
*.patch) build_reverted "$BASE" ;; # this tree without a change not yet committed
*) build_base "$BASE" ;;
esac
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
D="--device nvidia --suite forward --kinds softmax,tda --dtype f32,bf16act --no-prefill"
for i in $(seq "${REPS:-3}"); do
    /tmp/base/build/tdacl-bench $D --json "$OUT/decode-base-$i.json" >/dev/null 2>&1
    build-gpu/tdacl-bench $D --json "$OUT/decode-new-$i.json" >/dev/null 2>&1
done
python3 bench/decode_medians.py "$OUT" base new >"$OUT/decode.txt"
cat "$OUT/decode.txt"
[ "${STEPS_ONLY:-0}" = 1 ] && { cd "$OUT" && tar czf data.tgz *.json && rm -f *.json; exit 0; }
P="--device nvidia --suite forward --kinds softmax,tda --dtype bf16act --no-decode"
/tmp/base/build/tdacl-bench $P --json "$OUT/prefill-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $P --json "$OUT/prefill-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/prefill-new.json" --compare "$OUT/prefill-base.json" >"$OUT/compare-prefill.txt" 2>&1
grep -E "prefill |regression" "$OUT/compare-prefill.txt" | cut -c1-150
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
gen() { "$1" generate --device nvidia --model "$M" --tokens "$PROMPT" --max-new 129 --dtype bf16 --activations bf16 2>&1 >/dev/null; }
{
    for rep in 1 2 3; do
        for bin in /tmp/base/build/tdacl build-gpu/tdacl; do echo "$bin: $(gen $bin | grep ms/token)"; done
    done
    TDACL_PROFILE=1 gen build-gpu/tdacl | grep -E "profile"
} >"$OUT/generate.txt"
cat "$OUT/generate.txt"
build-gpu/tdacl-bench --device nvidia --suite gemm --dtype bf16 --json "$OUT/gemm-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" 2>&1 | grep -E " 1x" >"$OUT/gemv.txt"
cut -c1-150 "$OUT/gemv.txt"
cd "$OUT" && tar czf data.tgz *.json && rm -f *.json
