# s38 r7: per-launch device time of softmax and of diff_softmax's two views in one bench process (TDACL_PROFILE=1), d=64 and 128, T=8192, three processes each
res=$OUT
export OUT=$res/r7
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --T 8192)
for d in 64 128; do
  for rep in 1 2 3; do
    TDACL_PROFILE=1 timeout 60 build-gpu/tdacl-bench "${A[@]}" --kinds softmax,diff_softmax --d $d --json "$OUT/d$d-$rep.json" > "$OUT/d$d-$rep.log" 2>&1
    echo "== d$d rep $rep"; grep -E "profile: attention" "$OUT/d$d-$rep.log" | cut -c1-140
  done
done
(cd $res && tar -czf data.tgz r7)
echo "done ($SECONDS s)"
