# s38 r8 (experiment): the one-launch decode's key splits per (row, head) fixed by TDACL_DL_NSPLIT (nsplit.patch), GPT-2-small softmax bf16act, batch 1
res=$OUT
export OUT=$res/r8
mkdir -p $OUT
git apply .gpu/nsplit.patch || { echo "patch failed"; exit 1; }
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
D=(--device nvidia --suite forward --kinds softmax --dtype bf16act --no-prefill)
build-gpu/tdacl-bench "${D[@]}" > /dev/null 2>&1  # the models, once
for rep in 1 2; do
  for n in default 2 4 6 8 16 24; do
    if [ $n = default ]; then unset TDACL_DL_NSPLIT; else export TDACL_DL_NSPLIT=$n; fi
    TDACL_PROFILE=1 timeout 60 build-gpu/tdacl-bench "${D[@]}" --json "$OUT/n$n-$rep.json" > "$OUT/n$n-$rep.log" 2>&1
    echo "n=$n rep $rep: $(grep -E "decode ctx|decode_layer" "$OUT/n$n-$rep.log" | grep -oE '(decode[^ ]*|[0-9]+\.[0-9]+ ms each)' | tr '\n' ' ')"
  done
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, sys, glob, collections, statistics
t = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/n*-*.json")):
    n = f.split("/")[-1].split("-")[0]
    for r in json.load(open(f))["rows"]:
        if "decode" in r["name"] and "slots" not in r["name"]:
            t[(r["name"], n)].append(r["time_ms"]["median"])
for k in sorted(t): print(k, " ".join("%.4f" % x for x in t[k]))
PY
cat $OUT/summary.txt
(cd $res && tar -czf data.tgz r8)
echo "done ($SECONDS s)"
