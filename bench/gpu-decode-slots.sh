#!/bin/bash
# Serving decode (sequences at their own positions in the KV cache's slots, one step of all
# of them: tdacl_model_decode_slots) and the split-K tiled GEMM, against commit BASE (default:
# the session's start) on the GPU host of ../shared/gpu-host:   bash bench/gpu-decode-slots.sh [BASE]
#   test-native.txt      test_model (test_decode_slots: every row of steps of 10, 5, 3 and 1
#                        slots equals its sequence's prefill; every kind's decode), test_matmul
#                        (split-K cases forced and by occupancy), test_registry,
#                        test_attention --part decode, natively
#   forward-{new,base}-KIND-DTYPE.json/.txt  tdacl-bench --suite peak,forward, softmax and tda,
#                        f32 and bf16, one process each (GPT-2 small, random weights): prefill
#                        B1/B8 x T1024/T4096, decode at contexts 1024 and 8192 (batch 1) and, new
#                        only, the serving rows: 32 and 64 sequences at positions 512..1023 in
#                        one step, tokens/s
#   compare.txt          new / base on the common forward rows of each process
#   test-native-kvrows.txt  the native tests again after the per-sequence decode became a
#                        program of its own (-DKV_ROWS=1): `. bench/gpu-setup.sh; native_model_tests`
#   hf.json, vs-hf.txt   bench/anchors/gpt_hf.py (Hugging Face GPT2LMHeadModel, sdpa, fp32 and
#                        bf16) and our softmax rows against it
#   gemm-{base,new}.json, gemm-compare.txt  TDACL_PRECISION=bf16 tdacl-bench --suite peak,gemm
#   matmul-anchors.json, gemm-vs-torch.txt  torch.addmm bf16 (cuBLAS) on the same shapes, and
#                        ours against it
. bench/gpu-setup.sh
BASE=${1:-$(git rev-parse HEAD)}
build_base "$BASE"
native_model_tests
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
# one process per (kind, dtype), new then base: a row is not timed after another build's or
# another model's rows on a GPU whose memory they left in use
: >"$OUT/compare.txt"
for kind in softmax tda; do
    for dt in f32 bf16; do
        ROWS="--device nvidia --suite peak,forward --kinds $kind --dtype $dt"
        build-gpu/tdacl-bench $ROWS --json "$OUT/forward-new-$kind-$dt.json" >"$OUT/forward-new-$kind-$dt.txt" 2>&1
        /tmp/base/build/tdacl-bench $ROWS --json "$OUT/forward-base-$kind-$dt.json" >"$OUT/forward-base-$kind-$dt.txt" 2>&1
        build-gpu/tdacl-bench --load "$OUT/forward-new-$kind-$dt.json" --compare "$OUT/forward-base-$kind-$dt.json" 2>&1 |
            sed -n '/^compare:/,$p' >>"$OUT/compare.txt"
        grep -E "forward" "$OUT/forward-new-$kind-$dt.txt" | cut -c1-200
    done
done
grep -E "REGRESSION|faster|compared" "$OUT/compare.txt"
# Hugging Face transformers in the same run (GPT2LMHeadModel, sdpa, fp32 and bf16), and ours
# against it on the softmax rows
python3 bench/anchors/gpt_hf.py --out "$OUT/hf.json" >"$OUT/hf.txt" 2>&1
for dt in f32 bf16; do
    build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-$dt.json" --compare "$OUT/hf.json" 2>&1 |
        sed -n '/^compare:/,$p'
done >"$OUT/vs-hf.txt"
cat "$OUT/vs-hf.txt" | cut -c1-150
gemm_vs_base_and_torch
tail -14 "$OUT/gemm-compare.txt" | cut -c1-160
tail -10 "$OUT/gemm-vs-torch.txt" | cut -c1-160
exit 0
