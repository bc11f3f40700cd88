# s35 r5: two-view kinds one view a launch (attention.mma_views: two one-view launches and a combine) against the one-pass kernel, FA2 anchors
res=$OUT
export OUT=$res/r5
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
grep -E "warning" "$OUT/setup-stderr.txt" || echo "no warnings in the Release build"
pack() { (cd $res && tar -czf data.tgz r5); }
native_limited 200 mma-views mma
pack
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5)
for d in 64 128; do
    timeout 150 build-gpu/tdacl-bench "${A[@]}" --kinds softmax,tra,tda,diff_softmax --beta 1 --T 2048,4096,8192,16384 --d $d --json "$OUT/att-views-d$d.json" >"$OUT/views-d$d.log" 2>&1
    TDACL_VARIANT=attention.mma,attention.simt timeout 150 build-gpu/tdacl-bench "${A[@]}" --kinds tda,diff_softmax --beta 1 --T 2048,4096,8192,16384 --d $d --json "$OUT/att-fused-d$d.json" >"$OUT/fused-d$d.log" 2>&1
    echo "d$d timed ($SECONDS s)"
    pack
done
timeout 120 build-gpu/tdacl-bench "${A[@]}" --kinds tra,tda --beta 0.5,0 --T 8192 --d 64 --json "$OUT/views-beta.json" >"$OUT/views-beta.log" 2>&1
TDACL_VARIANT=attention.mma,attention.simt timeout 120 build-gpu/tdacl-bench "${A[@]}" --kinds tda --beta 0.5,0 --T 8192 --d 64 --json "$OUT/fused-beta.json" >"$OUT/fused-beta.log" 2>&1
for d in 64 128; do
    for kind in tda diff_softmax; do
        TDACL_PROFILE=1 timeout 100 build-gpu/tdacl-bench "${A[@]}" --beta 1 --T 8192 --kinds $kind --d $d 2>&1 | grep -E "profile: (attention|row_inv)" > "$OUT/profile-$kind-d$d.txt"
    done
done
pack
for d in 64 128; do
    timeout 90 python3 bench/anchors/anchors.py --T 4096,8192,16384 --d $d --skip sdpa-fp32,tra,tda --out "$OUT/anchors-d$d.json" >"$OUT/anchors-d$d.log" 2>&1
done
python3 bench/att_table.py "$OUT" views fused > "$OUT/summary.txt" 2>&1
python3 - "$OUT" >> "$OUT/summary.txt" <<'PY'
import json, sys
for f in ("views-beta", "fused-beta"):
    for r in json.load(open("%s/%s.json" % (sys.argv[1], f)))["rows"]:
        print(f, r["name"], r.get("beta"), r["shape"]["Tq"], r["time_ms"]["median"], r.get("variant"))
PY
for f in $OUT/profile-*.txt; do echo "== $(basename $f)"; cut -c20-150 $f; done >> "$OUT/summary.txt"
cut -c1-160 "$OUT/summary.txt"
pack
echo "done ($SECONDS s)"
