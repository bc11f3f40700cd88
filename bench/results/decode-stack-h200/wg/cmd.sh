#!/bin/bash
# The session-30 device call r1, as it ran from the repository root (bundle in .gpubundle/,
# gpu-env.sh in .gpu/): the stacked decode kernel at other work-group sizes (TDACL_DECODE_WG)
# and loads in flight -> variants.txt, regs.txt, test-*.txt, forward.txt
export OUT=$OUT/r1
. bench/gpu-setup.sh >/dev/null 2>&1
echo "built at $SECONDS s"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
timeout 200 build-gpu/tdacl-bench --device nvidia --suite forward --kinds softmax --dtype bf16act --no-prefill --json $OUT/forward.json > $OUT/forward.txt 2>&1
echo "bench at $SECONDS s"
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --dtype bf16 --activations bf16"
regs() { # WG: ptxas's report of decode_layer
  rm -rf /tmp/jc; TDACL_CACHE_DIR=/tmp/jc TDACL_DECODE_WG=$1 TDACL_LOG=debug TDACL_BUILD_OPTIONS="-cl-nv-verbose $2" timeout 60 build-gpu/tdacl generate $G --max-new 2 2>&1 >/dev/null |
    awk '/Compiling entry function/ { k = $0 } /Used [0-9]+ registers|spill/ && k ~ /decode_layer/ { print "wg '$1' '"$2"':", $0 }' | sort -u
}
run() { # WG OPTIONS
  local p=$(TDACL_DECODE_WG=$1 TDACL_BUILD_OPTIONS="$2" TDACL_PROFILE=1 timeout 120 build-gpu/tdacl generate $G --max-new 65 2>&1 >/dev/null | grep -E "profile: decode_layer |error" | sed -E 's/.* ([0-9.]+) ms each/\1/' | head -2)
  local w=$(TDACL_DECODE_WG=$1 TDACL_BUILD_OPTIONS="$2" timeout 120 build-gpu/tdacl generate $G --max-new 129 2>&1 >/dev/null | grep -oE "[0-9.]+ ms/token|error.*" | head -1)
  echo "wg $1 options '$2': decode_layer $p ms a launch; generate $w"
}
{ regs 256 ""; regs 512 ""; regs 1024 ""; } | tee $OUT/regs.txt
{
  run 256 ""
  run 512 ""
  run 1024 ""
  run 512 "-DDL_LOADS=2"
  run 512 "-DDL_LOADS=8"
  run 128 ""
  run 256 ""
  run 512 ""
} | tee $OUT/variants.txt
echo "variants at $SECONDS s"
for wg in 64 512; do
  (cd build-gpu/tests && TDACL_DECODE_WG=$wg timeout 150 ./test_model --filter "test_decode_one_launch*") > $OUT/test-wg$wg.txt 2>&1
  echo "wg $wg: $(grep -E "PASSED|FAILED" $OUT/test-wg$wg.txt | tr '\n' ' ')"
done
(cd build-gpu/tests && timeout 150 ./test_model --filter "test_decode_*") > $OUT/test-decode.txt 2>&1
grep -E "PASSED|FAILED" $OUT/test-decode.txt
echo "done at $SECONDS s"
