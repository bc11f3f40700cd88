#!/bin/bash
# Decode at a model's shape and the LM head on the GPU host of ../shared/gpu-host, against
# commit BASE (default HEAD) built in the same run:   bash bench/gpu-decode-bh.sh [BASE]
#   test-native.txt        test_tuning, test_matmul, test_model natively
#   tune-{1024,8192}.*     tdacl tune --kernel attention_decode at B1 H12 (entries keyed bh=few)
#   forward-*.txt/json     tdacl-bench forward decode rows (softmax, tda; f32, bf16act): base,
#                          new, new with the bh=few entries (TDACL_TUNING_FILE)
#   gemm-*.json            the GEMV rows (M = 1; the LM head as [N, K], gemm_bias_bt), base and new
#   tda-*.json             tda prefill d 64 and 128 at beta 1 and 0.5, base and new (weights=lazy tiles)
. bench/gpu-setup.sh
BASE=${1:-$(git rev-parse HEAD)}
build_base "$BASE"
(cd build-gpu/tests && ./test_tuning && ./test_matmul && ./test_model) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -6
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for T in 1024 8192; do
    build-gpu/tdacl tune --device nvidia --kernel attention_decode --kinds softmax,tda,tra --dtype bf16,f32 --d 64 \
        --T $T --B 1 --H 12 --budget ${BUDGET:-10} --out "$OUT/tune-$T.tdb" >"$OUT/tune-$T.txt" 2>&1
done
cat "$OUT"/tune-*.tdb | grep -v "^#"
cat "$OUT"/tune-*.tdb >/tmp/bh.tdb
ROWS="--device nvidia --suite forward --kinds softmax,tda --dtype f32,bf16act --no-prefill"
for i in 1; do
    /tmp/base/build/tdacl-bench $ROWS --json "$OUT/forward-base$i.json" >/dev/null 2>&1
    build-gpu/tdacl-bench $ROWS --json "$OUT/forward-new$i.json" >/dev/null 2>&1
    TDACL_TUNING_FILE=/tmp/bh.tdb build-gpu/tdacl-bench $ROWS --json "$OUT/forward-bh$i.json" >/dev/null 2>&1
done
for v in new bh; do
    build-gpu/tdacl-bench --load "$OUT/forward-${v}1.json" --compare "$OUT/forward-base1.json" | grep -E "decode|regress"
done
G="--device nvidia --suite gemm --dtype bf16"
/tmp/base/build/tdacl-bench $G --json "$OUT/gemm-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench $G --json "$OUT/gemm-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" | grep -E " 1x"
A="--device nvidia --suite attention --kinds tda --dtype bf16 --T 8192 --beta 1,0.5 --no-decode"
for dd in 64 128; do
    /tmp/base/build/tdacl-bench $A --d $dd --json "$OUT/tda-base-d$dd.json" >/dev/null 2>&1
    build-gpu/tdacl-bench $A --d $dd --json "$OUT/tda-new-d$dd.json" >/dev/null 2>&1
    build-gpu/tdacl-bench --load "$OUT/tda-new-d$dd.json" --compare "$OUT/tda-base-d$dd.json" | grep -E "tda"
done
cd "$OUT" && tar czf data.tgz forward-*.json gemm-*.json tda-*.json tune-*.txt && rm -f forward-*.json gemm-*.json tda-*.json tune-*.txt
