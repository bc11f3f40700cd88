#!/bin/bash
# The tensor-core GEMM (cl/gemm_mma.cl) on the GPU host of ../shared/gpu-host, in one session:
# build, test_matmul and test_registry natively, tune the gemm_mma space (bf16 weights, the
# GPT-2 MLP shape), then the gemm suite at precision bf16 on those entries and with the FP32
# lanes, and torch.addmm bf16 on the same shapes.  Results in $OUT (default /tmp/out).
. bench/gpu-setup.sh
{ (cd build-gpu/tests && ./test_matmul && ./test_registry) 2>&1; } >"$OUT/test-native-gemm.txt"
grep -E "mma|PASSED|FAILED|ERROR" "$OUT/test-native-gemm.txt" | tail -10
build-gpu/tdacl tune --device nvidia --kernel gemm_mma --dtype bf16 --T 8192 --N 3072 --K 768 --budget 150 \
    --out "$OUT/gemm-mma.tdb" 2>&1 | tee "$OUT/gemm-mma-tune.log" | tail -8
TDACL_TUNING_FILE="$OUT/gemm-mma.tdb" TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite peak,gemm \
    --json "$OUT/gemm-mma.json" 2>&1 | grep -E "gemm|peak" | tail -30
(cd bench/anchors && python3 matmul.py --out "$OUT/matmul-anchors.json" 2>&1 | tail -3)
build-gpu/tdacl-bench --load "$OUT/gemm-mma.json" --compare "$OUT/matmul-anchors.json" 2>&1 | grep -E "torch|ratio"
exit 0
