#!/bin/bash
# The tensor-core GEMM with f32 weights as tf32 (TDACL_PRECISION=tf32), on the GPU host of
# ../shared/gpu-host in one session:   bash bench/gpu-gemm-tf32.sh
#   test-native-matmul.txt  test_matmul natively (the tf32 cases through mma.sync)
#   gemm-tf32-tune.log/.tdb  `tdacl tune --kernel gemm_mma --dtype f32` (tf32), M=8192 N=3072 K=768
#   bench.txt, json.tgz     on those entries: gemm-tf32.json (TDACL_PRECISION=tf32: f32 weights
#                           on the matrix units, rows named tf32; CLBlast SGEMM beside),
#                           gemm-f32.json (exact), forward-tf32.json / forward-f32.json (the
#                           forward suite's f32 models with and without TDACL_PRECISION=tf32)
. bench/gpu-setup.sh
(cd build-gpu/tests && ./test_matmul) >"$OUT/test-native-matmul.txt" 2>&1
grep -E "tf32|PASSED|FAILED" "$OUT/test-native-matmul.txt" | tail -6
build-gpu/tdacl tune --device nvidia --kernel gemm_mma --dtype f32 --T 8192 --N 3072 --K 768 --budget 40 --jobs 8 \
    --out "$OUT/gemm-tf32.tdb" >"$OUT/gemm-tf32-tune.log" 2>&1
grep -E "best|combinations" "$OUT/gemm-tf32-tune.log"
export TDACL_TUNING_FILE="$OUT/gemm-tf32.tdb"
mkdir -p /tmp/js
{
    TDACL_PRECISION=tf32 build-gpu/tdacl-bench --device nvidia --suite peak,gemm --json /tmp/js/gemm-tf32.json
    build-gpu/tdacl-bench --device nvidia --suite gemm --json /tmp/js/gemm-f32.json
    TDACL_PRECISION=tf32 build-gpu/tdacl-bench --device nvidia --suite forward --dtype f32 --json /tmp/js/forward-tf32.json
    build-gpu/tdacl-bench --device nvidia --suite forward --dtype f32 --json /tmp/js/forward-f32.json \
        --compare /tmp/js/forward-tf32.json
} >"$OUT/bench.txt" 2>&1
grep -E "gemm|forward|ratio" "$OUT/bench.txt" | cut -c1-160 | tail -60
tar czf "$OUT/json.tgz" -C /tmp/js .
exit 0
