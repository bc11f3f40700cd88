#!/bin/bash
# attention_decode entries for a model's batch-1 step (bh=few) on this GPU, and the forward
# decode rows without and with them, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-decode-bh-tune.sh
#   test-native.txt   test_tuning, test_matmul, test_model, test_registry natively
#   tune.tdb, tune-*.txt   tdacl tune --kernel attention_decode --B 1 --H 12 at Tk 1024 and 8192
#   decode.txt        forward decode rows (softmax, tda; f32, bf16act), shipped entries against
#                     these (TDACL_TUNING_FILE), interleaved twice, medians
. bench/gpu-setup.sh
(cd build-gpu/tests && ./test_tuning && ./test_matmul && ./test_model && ./test_registry) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -8
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for T in 1024 8192; do
    build-gpu/tdacl tune --device nvidia --kernel attention_decode --kinds softmax,tda,tra --dtype bf16,f32 --d 64 \
        --T $T --B 1 --H 12 --budget ${BUDGET:-8} --out "$OUT/tune.tdb" >"$OUT/tune-$T.txt" 2>&1
done
grep -v "^#" "$OUT/tune.tdb"
D="--device nvidia --suite forward --kinds softmax,tda --dtype f32,bf16act --no-prefill"
for i in 1 2; do
    build-gpu/tdacl-bench $D --json "$OUT/decode-base-$i.json" >/dev/null 2>&1
    TDACL_TUNING_FILE="$OUT/tune.tdb" build-gpu/tdacl-bench $D --json "$OUT/decode-new-$i.json" >/dev/null 2>&1
done
python3 - "$OUT" >"$OUT/decode.txt" <<'PY'
import json, statistics, sys, glob
out = sys.argv[1]
def med(v):
    rows = {}
    for f in sorted(glob.glob(f"{out}/decode-{v}-*.json")):
        for r in json.load(open(f))["rows"]:
            sh = r["shape"]
            rows.setdefault((r["name"], r["dtype"], sh["Tk"], sh["B"]), []).append(r["time_ms"]["median"])
    return {k: statistics.median(x) for k, x in rows.items()}
b, n = med("base"), med("new")
print("row (name dtype ctx B): shipped ms, with the bh=few entries ms, ratio (medians of the runs' medians)")
for k in sorted(n):
    if k in b: print(f"{k[0]:22s} {k[1]:8s} ctx {k[2]:5d} B{k[3]:<3d} {b[k]:8.4f} {n[k]:8.4f} {n[k] / b[k]:6.3f}")
PY
cat "$OUT/decode.txt"
cd "$OUT" && tar czf data.tgz *.json && rm -f *.json
