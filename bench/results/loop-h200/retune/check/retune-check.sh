. bench/gpu-setup.sh >/dev/null 2>&1
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --T 8192 --beta 1,0.5,0)
for d in 64 128; do
  K=tda; [ $d = 128 ] && K=tra,tda
  TDACL_TUNING_FILE=.gpu/old.tdb timeout 60 build-gpu/tdacl-bench "${A[@]}" --kinds $K --d $d --json $OUT/old-d$d.json >/dev/null 2>&1
  timeout 60 build-gpu/tdacl-bench "${A[@]}" --kinds $K --d $d --json $OUT/new-d$d.json >/dev/null 2>&1
  build-gpu/tdacl-bench --load $OUT/new-d$d.json --compare $OUT/old-d$d.json > $OUT/compare-d$d.txt 2>&1
  grep -E "tdacl-mma" $OUT/compare-d$d.txt
done
grep -h "attention " $OUT/compare-d*.txt | awk '{print $3, $7, $8, $9, $NF, $(NF-1), $(NF-2), $(NF-3), $(NF-4)}' | head -12
