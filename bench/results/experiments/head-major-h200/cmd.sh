# s37 r5 EXPERIMENT: attention_mma's launch order head-major (-DHEAD_MAJOR=1 through
# TDACL_BUILD_OPTIONS) against the shipped query-block-major order, same binary, interleaved;
# native test_attention --part mma under both; FlashAttention-2 d=128 in the same call
res=$OUT
export OUT=$res/r5
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
echo "build done ($SECONDS s)"
for opt in "" "-DHEAD_MAJOR=1"; do
  (cd build-gpu/tests && TDACL_BUILD_OPTIONS="$opt" TDACL_LOG=warn timeout 90 ./test_attention --part mma) > "$OUT/test-mma${opt:+-hm}.txt" 2>&1
  echo "test mma [$opt]: $(grep -E 'PASSED|FAILED' $OUT/test-mma${opt:+-hm}.txt | tr '\n' ' ')"
done
echo "tests done ($SECONDS s)"
for rep in 1 2; do
  for opt in "" "-DHEAD_MAJOR=1"; do
    tag=$([ -z "$opt" ] && echo qb || echo hm)
    for d in 64 128; do
      TDACL_BUILD_OPTIONS="$opt" timeout 100 build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax,tra --dtype bf16 --T 8192,32768 --d $d --beta 1 --no-decode --min-samples 5 --json "$OUT/att-$tag-d$d-$rep.json" > "$OUT/att-$tag-d$d-$rep.txt" 2>&1
    done
  done
done
echo "bench done ($SECONDS s)"
timeout 90 python3 bench/anchors/anchors.py --T 8192,32768 --d 128 --skip sdpa-fp32,tra,tda --out "$OUT/anchors-d128.json" > "$OUT/anchors-d128.txt" 2>&1
python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
rows = {}
for f in sorted(glob.glob(os.path.join(out, "att-*.json"))):
    tag = os.path.basename(f)[4:-5]
    for r in json.load(open(f)).get("rows", []):
        if r.get("path") != "prefill": continue
        sh = r["shape"]
        key = (r["name"], sh["Tq"], sh["d"])
        rows.setdefault(key, {})[tag.rsplit("-d", 1)[0] + tag[-2:]] = r["time_ms"]["median"]
for k, v in sorted(rows.items(), key=lambda kv: str(kv[0])):
    print(k, " ".join(f"{t}={v[t]:.4f}" for t in sorted(v)))
for r in json.load(open(os.path.join(out, "anchors-d128.json"))).get("rows", []):
    print("anchor", r["name"], r.get("impl", ""), r["dtype"], r["shape"]["Tq"], r["shape"]["d"], r["time_ms"]["median"])
PY
cd $res && tar -czf data.tgz r5
echo "done ($SECONDS s)"
