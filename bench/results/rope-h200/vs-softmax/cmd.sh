# s36 r3: TDA model against softmax model, prefill rows in one run (RoPE change in the tree), and tda pinned to attention.mma_views
res=$OUT
export OUT=$res/r3
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
F=(--device nvidia --suite forward --dtype bf16act --no-decode)
for i in 1 2; do
    timeout 250 build-gpu/tdacl-bench "${F[@]}" --kinds tda,softmax --json "$OUT/fwd-$i.json" > "$OUT/fwd-$i.txt" 2>&1
    TDACL_VARIANT=attention.mma_views timeout 250 build-gpu/tdacl-bench "${F[@]}" --kinds tda --json "$OUT/fwd-views-$i.json" > "$OUT/fwd-views-$i.txt" 2>&1
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, sys
for i in (1, 2):
    rows = {}
    for f in ("fwd-%d" % i, "fwd-views-%d" % i):
        for r in json.load(open("%s/%s.json" % (sys.argv[1], f)))["rows"]:
            rows[(f.split("-")[1] if "views" in f else "default", r["name"], r["shape"]["B"], r["shape"]["Tq"])] = r["time_ms"]["median"]
    for (v, n, B, T), ms in sorted(rows.items()):
        s = rows.get(("default", "softmax-prefill", B, T))
        print("run %d %-8s %-16s B%d T%-5d %8.3f ms  %.3fx softmax" % (i, v, n, B, T, ms, ms / s if s else 0))
PY
cat "$OUT/summary.txt"
cd $res && tar -czf data.tgz r3
echo "done ($SECONDS s)"
