#!/bin/bash
# The seeds' sparse attentions on the GPU host (issue 14), one run:
#  1. natively: test_sparse_models (entmax and Top-theta models, calibration against the fp64
#     reference), the topk-theta and entmax parts of test_attention -> test-native.txt
#  2. our entmax against the PyPI `entmax` package and AdaSplash (bench/anchors/entmax_anchor.py)
#     -> entmax-checks.json; AdaSplash's forward and PyTorch SDPA bf16 timed -> anchors.json
#  3. ours in the same run: entmax (alpha 1.25, 1.5, 2, 4: the density sweep) and softmax, bf16,
#     B4 H8 d64 causal, T 1024/4096/8192 -> ours.json, ours.txt; against the anchors
#     -> compare.txt
#  4. a GPT-2-small-shaped softmax model (random weights): tdacl calibrate (k 64, four
#     sequences of 1024) and tdacl generate with and without its thresholds -> calibrate.txt,
#     generate.txt
# Needs the wheels of `entmax` and `adasplash` in .whl/ (carried; torch and triton are there).
# Usage (repository root): OUT=/tmp/out bash bench/gpu-sparse-models.sh
. bench/gpu-setup.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
    exit 1
export PYTHONPATH=/tmp/site:$PWD/python TDACL_LIBRARY=$PWD/build-gpu/libtdacl.so
{
    (cd build-gpu/tests && ./test_sparse_models) 2>&1
    for part in topk-theta topk-theta-layouts entmax entmax-layouts; do
        (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
    done
} >"$OUT/test-native.txt"
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -12
(cd bench/anchors && python3 entmax_anchor.py --out "$OUT/entmax-checks.json" --anchors "$OUT/anchors.json") \
    >"$OUT/entmax-anchor.txt" 2>&1
tail -20 "$OUT/entmax-anchor.txt"
build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax,entmax --alpha 1.25,1.5,2,4 --dtype bf16 \
    --T 1024,4096,8192 --no-decode --json "$OUT/ours.json" >"$OUT/ours.txt" 2>&1
tail -16 "$OUT/ours.txt"
build-gpu/tdacl-bench --load "$OUT/ours.json" --compare "$OUT/anchors.json" >"$OUT/compare.txt" 2>&1
cat "$OUT/compare.txt"
M=/tmp/gpt2-random
build-gpu/tdacl make-model --config examples/models/gpt2-small-softmax.json --seed 1 --dtype bf16 --out $M >/dev/null
python3 -c 'import random; random.seed(3); print(",".join(str(random.randrange(50257)) for _ in range(4096)))' \
    >/tmp/cal-ids.txt
{ time build-gpu/tdacl calibrate --device nvidia --model $M --tokens /tmp/cal-ids.txt --k 64 --seq-len 1024 \
    --out "$OUT/gpt2-random-thresholds.json"; } >"$OUT/calibrate.txt" 2>&1
tail -5 "$OUT/calibrate.txt"
# each mode twice: the first run compiles its kernels (cold program cache), the second is timed
P=$(cut -d, -f1-512 /tmp/cal-ids.txt)
G=(build-gpu/tdacl generate --device nvidia --model $M --tokens "$P" --max-new 64 --dtype bf16 --activations bf16)
{
    for mode in softmax "none 0" "exact 1" "exp_threshold 1"; do
        set -- $mode
        if [ "$1" = softmax ]; then T=(); else T=(--thresholds "$OUT/gpt2-random-thresholds.json" --sdc "$1" --vmc "$2"); fi
        echo "== ${1/softmax/softmax (no thresholds)}${2:+ vmc $2}"
        "${G[@]}" "${T[@]}" >/dev/null 2>&1
        "${G[@]}" "${T[@]}" 2>&1 >/dev/null
    done
} >"$OUT/generate.txt" 2>&1
cat "$OUT/generate.txt"
gzip -f "$OUT/gpt2-random-thresholds.json"
