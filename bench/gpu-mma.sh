#!/bin/bash
# The tensor-core attention on the GPU host of ../shared/gpu-host, in one session:
#   1. build (tests on), 2. the attention test parts natively (mma, layouts), 3. tdacl-bench
#   bf16 prefill, every kind, the mma variant and the SIMT one, 4. PyTorch SDPA anchors.
# Run from the repository root with the bundle in .gpubundle/ and gpu-env.sh in .gpu/;
# results go to $OUT (default /tmp/out).  T list: $MMA_T (default 1024,4096,8192,16384,32768).
. bench/gpu-setup.sh
T=${MMA_T:-1024,4096,8192,16384,32768}
: >"$OUT/test-attention-native.txt"
for part in mma mma-wide mma-f32 ${MMA_TEST_PARTS:-}; do
    (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1 | tee -a "$OUT/test-attention-native.txt" | tail -4
done
# registers and spills of the mma programs, from NVIDIA's compiler (-cl-nv-verbose)
TDACL_CACHE=off TDACL_LOG=debug TDACL_BUILD_OPTIONS=-cl-nv-verbose build-gpu/tdacl-bench --device nvidia \
    --suite attention --kinds softmax,rela,tra,tda,diff_softmax --dtype bf16 --T 256 --no-decode --min-samples 1 \
    --min-ms 0 2>&1 | grep -E "build log of|attention_mma_fwd|registers|spill|stack" >"$OUT/nv-verbose.txt"
B=(build-gpu/tdacl-bench --device nvidia --suite attention --dtype bf16 --T "$T" --no-decode --beta "${MMA_BETA:-1}"
   --kinds "${MMA_KINDS:-softmax,tra,tda,diff_softmax,rela}")
"${B[@]}" --json "$OUT/attention-mma.json" 2>&1 | tail -40
[ -n "${MMA_SIMT:-}" ] && TDACL_VARIANT=attention.simt "${B[@]}" --json "$OUT/attention-simt.json" 2>&1 | tail -20
[ -n "${MMA_ANCHORS-1}" ] && python3 bench/anchors/anchors.py --T "$T" --skip sdpa-fp32,tra,tda --out "$OUT/anchors.json" 2>&1 | tail -12
exit 0
