# s38 r6 (experiment): tda's views with the in-epilogue combine (TDACL_VIEWS_TAIL_ALL=1, tail-all.patch) on other tra tiles, against the combine launch on each
res=$OUT
export OUT=$res/r6
mkdir -p $OUT
git apply .gpu/tail-all.patch || { echo "patch failed"; exit 1; }
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
pack() { (cd $res && tar -czf data.tgz r6); }
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --beta 1 --d 64)
i=0
for tile in "" "BN=64 NWARPS=4 MT=2 KSTAGES=2" "BN=64 NWARPS=4 MT=1 KSTAGES=3" "BN=32 NWARPS=4 MT=2 KSTAGES=2" "BN=128 NWARPS=4 MT=1 KSTAGES=2"; do
  i=$((i+1))
  if [ -n "$tile" ]; then echo "attention_mma device=\"NVIDIA H200\" class=nvidia-sm_90 kind=tra dtype=bf16 d=64 dv=64 t=long : $tile" > $OUT/tile$i.tdb; export TDACL_TUNING_FILE=$OUT/tile$i.tdb; else unset TDACL_TUNING_FILE; fi
  for rep in 1 2; do
    timeout 60 build-gpu/tdacl-bench "${A[@]}" --kinds tra,tda --T 8192,16384 --json "$OUT/combine-$i-$rep.json" > "$OUT/combine-$i-$rep.log" 2>&1
    TDACL_VIEWS_TAIL_ALL=1 timeout 60 build-gpu/tdacl-bench "${A[@]}" --kinds tda --T 8192,16384 --json "$OUT/tail-$i-$rep.json" > "$OUT/tail-$i-$rep.log" 2>&1
  done
  echo "tile $i [$tile] ($SECONDS s)"
done
python3 - "$OUT" > "$OUT/summary.txt" <<'PY'
import json, sys, glob, collections, statistics
t = collections.defaultdict(list); par = {}
for f in sorted(glob.glob(sys.argv[1] + "/*-*-*.json")):
    form, i, rep = f.split("/")[-1][:-5].split("-")
    for r in json.load(open(f))["rows"]:
        t[(int(i), r["name"], r["shape"]["Tq"], form)].append(r["time_ms"]["median"])
        par[(int(i), r["name"], form)] = r["tuning"]["params"]
for k in sorted(t): print(k, "%.4f" % statistics.mean(t[k]), par.get((k[0], k[1], k[3])))
PY
cat $OUT/summary.txt
pack
echo "done ($SECONDS s)"
