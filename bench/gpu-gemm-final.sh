#!/bin/bash
# A trial of the tensor-core GEMM with one epilogue loop for pairs and edges (tried because
# Intel's DPAS body spilled with two; not kept: the two loops stay, the pairs compiled out on
# DPAS), natively, and its gemm rows, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-gemm-final.sh     (on the trial's tree)
#   test-native.txt (test_matmul, test_registry), gemm.json / gemm.txt (TDACL_PRECISION=bf16
#   tdacl-bench --suite peak,gemm), compare-gemm-forward.txt (against ../gemm-new.json, the
#   run with the two-loop epilogue)
. bench/gpu-setup.sh
(cd build-gpu/tests && ./test_matmul && ./test_registry) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -4
TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm.json" >"$OUT/gemm.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm.json" --compare bench/results/gemm-forward-h100/gemm-new.json 2>&1 |
    sed -n '/^compare:/,$p' >"$OUT/compare-gemm-forward.txt"
grep -v " 1x" "$OUT/compare-gemm-forward.txt" | cut -c1-150
exit 0
