# s38 r3: the final form (diff_softmax's view 2 combining in its epilogue, tda keeping the combine launch) against the tree before, same run; native tests
res=$OUT
export OUT=$res/r3
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
grep -E "warning" "$OUT/setup-stderr.txt" || echo "no warnings in the Release build"
pack() { (cd $res && tar -czf data.tgz r3); }
build_reverted .gpu/views-tail.patch
echo "base built ($SECONDS s)"
(cd build-gpu/tests && timeout 60 ./test_registry) > "$OUT/test-registry.txt" 2>&1; tail -3 "$OUT/test-registry.txt"
native_limited 150 mma-views mma
pack
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5)
for d in 64 128; do
  for rep in 1 2; do
    TDACL_LOG=debug timeout 100 build-gpu/tdacl-bench "${A[@]}" --kinds softmax,tra,tda,diff_softmax --beta 1 --T 4096,8192,16384 --d $d --json "$OUT/tail-d$d-$rep.json" >"$OUT/tail-d$d-$rep.log" 2>&1
    timeout 100 /tmp/base/build/tdacl-bench "${A[@]}" --kinds softmax,tra,tda,diff_softmax --beta 1 --T 4096,8192,16384 --d $d --json "$OUT/base-d$d-$rep.json" >"$OUT/base-d$d-$rep.log" 2>&1
    echo "d$d rep $rep timed ($SECONDS s)"
  done
  pack
done
grep -h "warning" $OUT/tail-*.log | sort | uniq -c > "$OUT/build-warnings.txt"; echo "build warnings: $(wc -l < $OUT/build-warnings.txt) distinct lines"
for d in 64 128; do
  for kind in tda diff_softmax; do
    TDACL_PROFILE=1 timeout 60 build-gpu/tdacl-bench "${A[@]}" --beta 1 --T 8192 --kinds $kind --d $d 2>&1 | grep -E "profile: (attention|row_inv)" > "$OUT/profile-$kind-d$d.txt"
  done
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, sys, glob, collections
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/*-d*-*.json")):
    tree = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["rows"]:
        t[(r["shape"].get("d"), r["name"], r["shape"]["Tq"], tree)].append(r["time_ms"]["median"])
for k in sorted(t, key=str): print(k, " ".join("%.4f" % x for x in t[k]))
PY
for f in $OUT/profile-*.txt; do echo "== $(basename $f)"; cut -c20-150 $f; done >> "$OUT/summary.txt"
cat "$OUT/summary.txt" | cut -c1-160
pack
echo "done ($SECONDS s)"
