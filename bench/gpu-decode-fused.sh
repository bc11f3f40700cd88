#!/bin/bash
# The fused decode step (five kernels a layer, device sampling, the generation loop enqueueing
# step n + 1 before it reads token n) against commit BASE (default: the session's start) on
# the GPU host of ../shared/gpu-host:   bash bench/gpu-decode-fused.sh [BASE]
#   test-native.txt     test_model (every kind's decode against its prefill and the fp64
#                       reference, the device draw against its rule, launch counts), test_matmul,
#                       test_registry, test_attention --part decode, natively
#   forward-{base,new}.json/.txt   tdacl-bench --suite peak,forward, softmax and tda, f32 and bf16
#                       (GPT-2 small, random weights; decode rows at contexts 1024 and 8192)
#   forward-unfused.json  the same decode rows with TDACL_DECODE=unfused (layer by layer)
#   generate.txt        `tdacl generate` on the GPT-2-small softmax model, prompt 960 ids, 129 new
#                       (ctx ~1024), f32 and bf16, base and new: its ms/token (three runs), and the kernel time
#                       per token from TDACL_PROFILE (the 129-token run minus a 1-token run)
#   generate-profile.txt  the new build's per-kernel device times of that bf16 run (prefill's
#                       gemm, attention_fwd and tensor_copy included)
#   gemm-{base,new}.json, gemm-compare.txt  TDACL_PRECISION=bf16 tdacl-bench --suite peak,gemm
#                       (GPT-2 small's projections at 1024, 8192 and 1 row, the last the GEMV
#                       with the LM head's 50257 columns, f32 and bf16 weights)
. bench/gpu-setup.sh
BASE=${1:-$(git rev-parse HEAD)}
build_base "$BASE"
native_model_tests
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
ROWS="--device nvidia --suite peak,forward --kinds softmax,tda --dtype f32,bf16"
/tmp/base/build/tdacl-bench $ROWS --json "$OUT/forward-base.json" >"$OUT/forward-base.txt" 2>&1
build-gpu/tdacl-bench $ROWS --json "$OUT/forward-new.json" >"$OUT/forward-new.txt" 2>&1
TDACL_DECODE=unfused build-gpu/tdacl-bench $ROWS --no-prefill --json "$OUT/forward-unfused.json" \
    >"$OUT/forward-unfused.txt" 2>&1
grep -E "decode" "$OUT/forward-new.txt" | cut -c1-200
TDACL_PRECISION=bf16 /tmp/base/build/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm-base.json" \
    >/dev/null 2>&1
TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm-new.json" \
    >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/gemm-base.json" >"$OUT/gemm-compare.txt" 2>&1
tail -32 "$OUT/gemm-compare.txt" | cut -c1-160
build-gpu/tdacl-bench --load "$OUT/forward-new.json" --compare "$OUT/forward-base.json" >"$OUT/compare.txt" 2>&1
tail -20 "$OUT/compare.txt"
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
# generate's own ms/token (no profiling), and the kernel ms of a run from TDACL_PROFILE's summary
gen() { # BIN DTYPE NEW [PROFILE]
    TDACL_PROFILE=${4:-0} "$1" generate --device nvidia --model "$M" --tokens "$PROMPT" --max-new "$3" --dtype "$2" \
        2>&1 >/dev/null | grep -E "profile: [0-9.]+ ms of kernels|ms/token"
}
kms() { sed -n 's/.*profile: \([0-9.]*\) ms of kernels.*/\1/p'; }
for bin in /tmp/base/build/tdacl build-gpu/tdacl; do
    for dt in f32 bf16; do
        line=$(for rep in 1 2 3; do gen "$bin" "$dt" 129; done | sed -n 's/.*decode 128 tokens: .*, \([0-9.]*\) ms\/token/\1/p' | tr '\n' ' ')
        one=$(gen "$bin" "$dt" 1 1 | kms)
        many=$(gen "$bin" "$dt" 129 1 | kms)
        echo "$bin $dt: ms/token of three runs: $line; kernel ms/token (profile, 129 minus 1 new): $(python3 -c "print('%.4f' % (($many - $one) / 128))")"
    done
done | tee "$OUT/generate.txt"
TDACL_PROFILE=1 build-gpu/tdacl generate --device nvidia --model "$M" --tokens "$PROMPT" --max-new 129 --dtype bf16 \
    2>&1 >/dev/null | grep profile >"$OUT/generate-profile.txt"
exit 0
