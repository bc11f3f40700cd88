#!/bin/bash
# The one-launch decode layer (cl/decode_layer.cl) of this tree against commit BASE, both built
# and timed in one run on the GPU host of ../shared/gpu-host:   bash bench/gpu-decode-compare.sh BASE
#   test-one-launch.txt  test_model's tests named by $TESTS (';'-separated cmocka filters; default
#                  the one-launch and phased decode tests), natively (this tree)
#   parts.txt      the device time a launch of each kernel matching $KERNELS (an extended regex,
#                  default decode_layer; TDACL_PROFILE=1 `tdacl generate`, GPT-2 small softmax,
#                  bf16 weights and activations, 960-id prompt, 65 new) for BASE, this tree, and
#                  this tree with each TDACL_BUILD_OPTIONS of $VARIANTS (';'-separated)
#   decode.txt     tdacl-bench forward decode rows (softmax, bf16act) of BASE and this tree
#                  interleaved REPS times (default 3): medians of the runs' medians, and the ratio
#   generate.txt   `tdacl generate` 129 new, both builds, twice each
. bench/gpu-setup.sh
BASE=${1:?usage: bench/gpu-decode-compare.sh BASE (a commit, or a patch file: this tree without it)}
if [ -f "$BASE" ]; then build_reverted "$BASE"; else build_base "$BASE"; fi
IFS=';' read -ra TLIST <<<"${TESTS:-test_decode_one_launch*;test_decode_phased*}"
for t in "${TLIST[@]}"; do (cd build-gpu/tests && timeout 200 ./test_model --filter "$t"); done >"$OUT/test-one-launch.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-one-launch.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
D="--device nvidia --suite forward --kinds softmax --dtype bf16act --no-prefill"
# the bench writes the checkpoints the generate runs read
for i in $(seq "${REPS:-3}"); do
    timeout 300 /tmp/base/build/tdacl-bench $D --json "$OUT/decode-base-$i.json" >/dev/null 2>&1
    timeout 300 build-gpu/tdacl-bench $D --json "$OUT/decode-new-$i.json" >"$OUT/bench-new-$i.txt" 2>&1
done
python3 bench/decode_medians.py "$OUT" base new >"$OUT/decode.txt"
cat "$OUT/decode.txt"
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --dtype bf16 --activations bf16"
profile() { # BINARY OPTIONS: the $KERNELS kernels' device time a launch, on one line
    TDACL_BUILD_OPTIONS="$2" TDACL_PROFILE=1 timeout 120 "$1" generate $G --max-new 65 2>&1 >/dev/null |
        grep -E "profile: (${KERNELS:-decode_layer}) " |
        sed -E 's/.*profile: ([a-z_0-9]+) +([0-9]+) launches.* ([0-9.]+) ms each/\1 \3 ms a launch (\2)/' | paste -sd ';'
}
{
    for rep in 1 2; do
        echo "base: $(profile /tmp/base/build/tdacl "")"
        echo "new: $(profile build-gpu/tdacl "")"
    done
    IFS=';' read -ra VLIST <<<"${VARIANTS:-}"
    for v in "${VLIST[@]}"; do echo "new $v: $(profile build-gpu/tdacl "$v")"; done
} | tee "$OUT/parts.txt"
{
    for rep in 1 2; do
        echo "base: $(timeout 120 /tmp/base/build/tdacl generate $G --max-new 129 2>&1 >/dev/null | grep -E "ms/token")"
        echo "new: $(timeout 120 build-gpu/tdacl generate $G --max-new 129 2>&1 >/dev/null | grep -E "ms/token")"
    done
} | tee "$OUT/generate.txt"
cd "$OUT" && tar czf data.tgz *.json bench-new-*.txt && rm -f *.json bench-new-*.txt
