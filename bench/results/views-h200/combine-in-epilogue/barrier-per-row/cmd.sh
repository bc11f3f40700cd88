# s35 r7: the second view combining in its epilogue, a barrier between rows (TDACL_VIEWS_EPILOGUE=1) against the combine launch
res=$OUT
export OUT=$res/r7
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
(cd build-gpu/tests && TDACL_VIEWS_EPILOGUE=1 TDACL_LOG=warn timeout 150 ./test_attention --part mma-views) > "$OUT/test-native-epilogue.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native-epilogue.txt"
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --beta 1 --T 8192,16384)
for d in 64 128; do
    for e in 0 1; do
        TDACL_VIEWS_EPILOGUE=$e TDACL_PROFILE=1 timeout 100 build-gpu/tdacl-bench "${A[@]}" --kinds softmax,tda,diff_softmax --d $d --json "$OUT/e$e-d$d.json" 2>&1 | grep -E "profile: attention" > "$OUT/profile-e$e-d$d.txt"
    done
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, sys
for d in (64, 128):
    for e in (0, 1):
        for r in json.load(open("%s/e%d-d%d.json" % (sys.argv[1], e, d)))["rows"]:
            print("epilogue=%d d%-4d %-13s T%-6d %.4f ms  %s" % (e, d, r["name"], r["shape"]["Tq"], r["time_ms"]["median"], r.get("variant")))
PY
cat "$OUT/summary.txt"
for f in $OUT/profile-*.txt; do echo "== $(basename $f)"; cut -c20-150 $f; done
cd $res && tar -czf data.tgz r7
echo "done ($SECONDS s)"
