#!/bin/bash
# The tensor-core attention after the pipelined rewrite (sparse kinds one tile ahead, K tiles
# KSTAGES deep, masks only on boundary tiles), on the GPU host of ../shared/gpu-host.
#   bash bench/gpu-mma-pipeline.sh check   build, test_registry and the tensor-core test parts
#                                          natively, registers per program, bf16 T=8192 rows
#                                          on the shipped entries against the committed run
#   bash bench/gpu-mma-pipeline.sh tune    build, tune the tile (BN, NWARPS, MT, KSTAGES) for
#                                          every kind at d=64 and 128 ($OUT/mma.tdb)
#   bash bench/gpu-mma-pipeline.sh bench   build, the native test parts, bf16 rows of every kind
#                                          over T on the shipped entries against the committed
#                                          run, the density sweep and the SDPA anchors
#   bash bench/gpu-mma-pipeline.sh sass    machine code of the tensor-core programs
# Run from the repository root with the bundle in .gpubundle/ and gpu-env.sh in .gpu/;
# results go to $OUT (default /tmp/out).
. bench/gpu-setup.sh
B=build-gpu/tdacl-bench
KINDS=softmax,rela,tra,tda,diff_softmax
PREV=${MMA_PREV:-bench/results/pipeline-h200/attention-mma.json}
# test_registry and the tensor-core test parts natively, into $OUT/test-native.txt
native_tests() {
    {
        (cd build-gpu/tests && ./test_registry) 2>&1
        for part in mma mma-wide mma-f32; do
            (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
        done
    } >"$OUT/test-native.txt"
    grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -12
}
case "${1:-check}" in
check)
    native_tests
    TDACL_CACHE=off TDACL_LOG=debug TDACL_BUILD_OPTIONS=-cl-nv-verbose $B --device nvidia --suite attention \
        --kinds "$KINDS" --dtype bf16 --T 256 --no-decode --min-samples 1 --min-ms 0 2>&1 |
        grep -E "attention_mma_fwd|registers|spill" >"$OUT/nv-verbose.txt"
    grep -E "registers" "$OUT/nv-verbose.txt"
    $B --device nvidia --suite peak,attention --dtype bf16 --T 8192 --no-decode --beta 1 --kinds "$KINDS" \
        --json "$OUT/attention-shipped.json" --compare "$PREV" 2>&1 | tail -16
    ;;
tune)
    : >"$OUT/mma.tdb"
    for d in ${MMA_TUNE_D:-64 128}; do
        build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds "${MMA_TUNE_KINDS:-$KINDS}" --dtype bf16 \
            --d "$d" --T 8192 --B 4 --H 8 --budget "${MMA_TUNE_BUDGET:-15}" --jobs 8 --out "$OUT/mma.tdb" 2>&1 |
            tee -a "$OUT/mma-tune.log" | grep -E "^attention_mma|candidates"
    done
    ;;
bench)
    # on the shipped entries: native tests, every kind over T, the density sweep, the anchors
    native_tests
    T=${MMA_T:-1024,4096,8192,16384,32768}
    $B --device nvidia --suite peak,attention --dtype bf16 --T "$T" --d "${MMA_D:-64}" --no-decode --beta 1 \
        --kinds "$KINDS" --json "$OUT/attention-mma.json" --compare "$PREV" 2>&1 | tail -28
    $B --device nvidia --suite attention --dtype bf16 --T 8192 --no-decode --beta 0.5,0.25,0 --kinds tra,tda \
        --json "$OUT/density.json" 2>&1 | grep "attention "
    python3 bench/anchors/anchors.py --T "$T" --skip sdpa-fp32,tra,tda --out "$OUT/anchors.json" 2>&1 | tail -6
    ;;
sass)
    # the machine code of the tensor-core programs the bench compiled (KIND=$SASS_KIND at d=64)
    $B --device nvidia --suite attention --kinds "${SASS_KINDS:-tra,softmax}" --dtype bf16 --T 1024 --no-decode \
        --min-samples 1 --min-ms 0 >/dev/null 2>&1
    sass_of_cache "$OUT"
    ;;
esac
exit 0
