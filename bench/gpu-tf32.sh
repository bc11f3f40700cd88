#!/bin/bash
# TF32 on the tensor-core attention (fp32 storage at desc.precision tf32), on the GPU host of
# ../shared/gpu-host in one session:   bash bench/gpu-tf32.sh [BASE]
#   test-native.txt   test_registry and the parts mma, mma-f32, mma-tf32 through mma.sync
#   devices-peak.txt  `tdacl devices --peak` (mma.sync bf16 and tf32 rates)
#   tf32-tune.log, tf32.tdb   `tdacl tune --dtype tf32`: every kind, d = 64 and 128, T = 8192
#   tf32.json, bench.txt      every kind, T = 1024..16384, d = 64, on those entries
#                     ($TDACL_TUNING_FILE), as tf32 (tensor cores), f32 (exact, FP32 lanes) and
#                     bf16, with the peak rows; density.json: tra and tda tf32 at beta 1..0
#   with BASE: mma.json, compare.txt  bf16 rows of this build against commit BASE: the shared
#                     kernel source must not slow down (bench/results/tf32-h100/ has one)
. bench/gpu-setup.sh
native_parts mma mma-f32 mma-tf32
build-gpu/tdacl devices --peak >"$OUT/devices-peak.txt" 2>&1
for d in 64 128; do
    build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds softmax,rela,tra,tda,diff_softmax --dtype tf32 \
        --d "$d" --T 8192 --B 4 --H 8 --budget "${TF32_TUNE_BUDGET:-20}" --jobs 8 --out "$OUT/tf32.tdb"
done >"$OUT/tf32-tune.log" 2>&1
grep -E "best|combinations" "$OUT/tf32-tune.log"
export TDACL_TUNING_FILE="$OUT/tf32.tdb"
ROWS="--device nvidia --suite peak,attention --B 4 --H 8 --kinds softmax,rela,tra,tda,diff_softmax --no-decode"
build-gpu/tdacl-bench $ROWS --beta 1 --T 1024,4096,8192,16384 --dtype tf32,f32,bf16 --json "$OUT/tf32.json" \
    >"$OUT/bench.txt" 2>&1
build-gpu/tdacl-bench --device nvidia --suite attention --B 4 --H 8 --kinds tra,tda --no-decode --T 8192 --dtype tf32 \
    --beta 1,0.5,0.25,0 --json "$OUT/density.json" >>"$OUT/bench.txt" 2>&1
grep -E " tf32 " "$OUT/bench.txt" | cut -c1-150
if [ -n "$1" ]; then
    build_base "$1"
    BF="--device nvidia --suite attention --T 4096,8192 --B 4 --H 8 --beta 1 --dtype bf16 --kinds softmax,tra,tda,diff_softmax --no-decode"
    env -u TDACL_TUNING_FILE TDACL_CACHE_DIR=/tmp/tdacl-cache-base /tmp/base/build/tdacl-bench $BF --json "$OUT/mma-base.json" >/dev/null 2>&1
    env -u TDACL_TUNING_FILE build-gpu/tdacl-bench $BF --json "$OUT/mma.json" --compare "$OUT/mma-base.json" 2>&1 | tee "$OUT/compare.txt" | tail -12
fi
exit 0
