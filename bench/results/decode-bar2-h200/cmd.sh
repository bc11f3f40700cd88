# s39 r9: the grid barrier's poll reading the error word with the counter (DL_BAR=2) against DL_BAR=1, one build
res=$OUT
export OUT=$res/r9
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
for t in "test_decode_one_launch*" "test_decode_phased*"; do (cd build-gpu/tests && timeout 120 ./test_model --filter "$t"); done >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
D="--device nvidia --suite forward --kinds softmax --dtype bf16act --no-prefill"
for i in 1 2 3; do
  TDACL_BUILD_OPTIONS=-DDL_BAR=1 timeout 100 build-gpu/tdacl-bench $D --json "$OUT/decode-bar1-$i.json" >/dev/null 2>&1
  timeout 100 build-gpu/tdacl-bench $D --json "$OUT/decode-bar2-$i.json" >/dev/null 2>&1
done
python3 bench/decode_medians.py "$OUT" bar1 bar2 | tee "$OUT/decode.txt"
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --dtype bf16 --activations bf16"
for rep in 1 2; do for o in "-DDL_BAR=1" ""; do
  echo "${o:-DL_BAR=2}: $(TDACL_BUILD_OPTIONS="$o" TDACL_PROFILE=1 timeout 60 build-gpu/tdacl generate $G --max-new 65 2>&1 >/dev/null | grep -E "profile: decode_layer " | sed -E 's/.* ([0-9.]+) ms each/\1 ms a launch/')"
done; done | tee "$OUT/parts.txt"
(cd $res && tar -czf data.tgz r9)
echo "done ($SECONDS s)"
