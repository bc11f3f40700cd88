# s35 r6: the final tree natively (registry, tuning, the mma parts) and the default choice of attention.mma_views in the bench
res=$OUT
export OUT=$res/r6
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
grep -E "warning" "$OUT/setup-stderr.txt" || echo "no warnings in the Release build"
pack() { (cd $res && tar -czf data.tgz r6); }
(cd build-gpu/tests && ./test_registry && ./test_tuning) > "$OUT/test-native.txt" 2>&1
native_limited 200 mma-views mma mma-wide mma-f32
pack
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5)
for d in 64 128; do
    timeout 150 build-gpu/tdacl-bench "${A[@]}" --kinds softmax,tra,tda,diff_softmax --beta 1 --T 2048,4096,8192,16384 --d $d --json "$OUT/att-default-d$d.json" >"$OUT/default-d$d.log" 2>&1
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, sys
for d in (64, 128):
    for r in json.load(open("%s/att-default-d%d.json" % (sys.argv[1], d)))["rows"]:
        print("%-13s d%-4d T%-6d %.4f ms  %s" % (r["name"], d, r["shape"]["Tq"], r["time_ms"]["median"], r.get("variant")))
PY
cat "$OUT/summary.txt"
grep -E "PASSED|FAILED" "$OUT/test-native.txt"
pack
echo "done ($SECONDS s)"
