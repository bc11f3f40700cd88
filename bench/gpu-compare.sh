#!/bin/bash
# After a change that should not move performance (a refactor), on the GPU host of
# ../shared/gpu-host in one session: build, the registry and tensor-core test parts natively,
# then tdacl-bench rows compared (--compare) with committed H200 runs:
#   attention bf16 prefill (the mma variant) against bench/results/mma-h200/attention-mma.json,
#   attention f32+bf16 prefill and decode (SIMT) against bench/results/bench-h200.json,
#   gemm against bench/results/bench-h200.json;
# then fp32 storage at precision bf16 (the tensor-core variant) at T=8192.
# Run from the repository root with the bundle in .gpubundle/ and gpu-env.sh in .gpu/;
# results go to $OUT (default /tmp/out).
. bench/gpu-setup.sh
{
    (cd build-gpu/tests && ./test_registry) 2>&1
    for part in mma mma-wide mma-f32 ${GPU_TEST_PARTS:-}; do
        (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
    done
    build-gpu/tdacl devices --verbose --device nvidia 2>&1
} >"$OUT/test-native.txt"
grep -E "PASSED|FAILED|formula|attention (prefill|decode)|matmul" "$OUT/test-native.txt" | tail -30
B=build-gpu/tdacl-bench
$B --device nvidia --suite attention --dtype bf16 --T "${MMA_T:-1024,8192,32768}" --no-decode --beta 1 \
    --kinds softmax,rela,tra,tda,diff_softmax --json "$OUT/attention-mma.json" \
    --compare bench/results/mma-h200/attention-mma.json 2>&1 | tail -24
TDACL_VARIANT=attention.simt,attention_decode.simt,gemm.simt,gemv.simt \
    $B --device nvidia --suite attention,gemm --dtype f32,bf16 --T "${SIMT_T:-4096}" --beta 1 --kinds tra,tda,softmax \
    --json "$OUT/simt.json" --compare bench/results/bench-h200.json 2>&1 | tail -40
# fp32 storage on the matrix units (precision bf16) next to the same rows exact
TDACL_PRECISION=bf16 $B --device nvidia --suite attention --dtype f32 --T 8192 --no-decode --beta 1 \
    --kinds softmax,tra,tda --json "$OUT/f32-bf16.json" 2>&1 | tail -6
exit 0
