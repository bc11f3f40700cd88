#!/bin/bash
# The layers' weights as the checkpoint has them ([K, N], TDACL_WEIGHT_LAYOUT=kn) against
# transposed ([N, K], the default where the one-launch decode layer runs), one build, one run on
# the GPU host of ../shared/gpu-host.  Kept with the experiment: it needs weight-layout.patch
# (TDACL_WEIGHT_LAYOUT) applied to 9df81ab and runs from the repository root:
#   git apply bench/results/experiments/decode-wt-h200/weight-layout.patch
#   bash bench/results/experiments/decode-wt-h200/gpu-weight-layout.sh
#   test-native.txt  test_model's tests named by $TESTS (';'-separated cmocka filters; default the
#                    one-launch and phased decode tests), natively
#   decode.txt       tdacl-bench forward decode rows (softmax, bf16act), kn and nk interleaved
#                    REPS times (default 3): medians of the runs' medians, nk / kn
#   prefill.txt      tdacl-bench forward prefill rows (softmax, bf16act), kn and nk, PREFILL_REPS times
#                    each (default 2; rows B1 T1024, B8 T1024, B1 T4096, B8 T4096 in that order)
#   parts.txt        decode_layer's device time a launch (TDACL_PROFILE=1 `tdacl generate`, GPT-2
#                    small softmax, bf16 weights and activations, 960-id prompt, 65 new), each layout twice
#   generate.txt     `tdacl generate` 129 new, each layout twice
. bench/gpu-setup.sh
IFS=';' read -ra TLIST <<<"${TESTS:-test_decode_one_launch*;test_decode_phased*}"
for t in "${TLIST[@]}"; do (cd build-gpu/tests && timeout 300 ./test_model --filter "$t"); done >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
D="--device nvidia --suite forward --kinds softmax --dtype bf16act"
for i in $(seq "${REPS:-3}"); do
    TDACL_WEIGHT_LAYOUT=kn timeout 300 build-gpu/tdacl-bench $D --no-prefill --json "$OUT/decode-kn-$i.json" >/dev/null 2>&1
    timeout 300 build-gpu/tdacl-bench $D --no-prefill --json "$OUT/decode-nk-$i.json" >"$OUT/bench-nk-$i.txt" 2>&1
done
python3 bench/decode_medians.py "$OUT" kn nk >"$OUT/decode.txt"
cat "$OUT/decode.txt"
for i in $(seq "${PREFILL_REPS:-2}"); do
    TDACL_WEIGHT_LAYOUT=kn timeout 300 build-gpu/tdacl-bench $D --no-decode --json "$OUT/prefill-kn-$i.json" >/dev/null 2>&1
    timeout 300 build-gpu/tdacl-bench $D --no-decode --json "$OUT/prefill-nk-$i.json" >/dev/null 2>&1
done
python3 - "$OUT" >"$OUT/prefill.txt" <<'PY'
import json, sys, glob, collections
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/prefill-*.json")):
    lay = f.split("/")[-1].split("-")[1]
    for r in json.load(open(f))["rows"]:
        sh = r["shape"]
        t[("%s B%s T%s" % (r["name"], sh.get("B"), sh.get("Tq")), lay)].append(r["time_ms"]["median"])
for name in sorted({k[0] for k in t}):
    kn, nk = t[(name, "kn")], t[(name, "nk")]
    print("%-40s kn %s  nk %s  nk/kn %.3f" % (name, " ".join("%.3f" % x for x in kn), " ".join("%.3f" % x for x in nk),
                                              min(nk) / min(kn) if kn and nk else float("nan")))
PY
cat "$OUT/prefill.txt"
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --dtype bf16 --activations bf16"
profile() { # LAYOUT: decode_layer's device time a launch
    TDACL_WEIGHT_LAYOUT=$1 TDACL_PROFILE=1 timeout 120 build-gpu/tdacl generate $G --max-new 65 2>&1 >/dev/null |
        grep -E "profile: (decode_layer|gemv_t) " |
        sed -E 's/.*profile: ([a-z_0-9]+) +([0-9]+) launches.* ([0-9.]+) ms each/\1 \3 ms a launch (\2)/' | paste -sd ';'
}
for rep in 1 2; do for lay in kn nk; do echo "$lay: $(profile $lay)"; done; done | tee "$OUT/parts.txt"
for rep in 1 2; do
    for lay in kn nk; do
        echo "$lay: $(TDACL_WEIGHT_LAYOUT=$lay timeout 120 build-gpu/tdacl generate $G --max-new 129 2>&1 >/dev/null | grep -E "ms/token")"
    done
done | tee "$OUT/generate.txt"
cd "$OUT" && tar czf data.tgz *.json bench-nk-*.txt && rm -f *.json bench-nk-*.txt
