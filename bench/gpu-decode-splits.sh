#!/bin/bash
# The model's decode steps with at most 64 key splits per (sequence, head) against commit BASE
# (default: the session's start), on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-decode-splits.sh [BASE]
#   decode-{new,base}-KIND-MODE.json/.txt  tdacl-bench --suite peak,forward --no-prefill, one
#                        process each: softmax f32 / bf16, tda bf16 (new and base); softmax and
#                        tda bf16act (new only: the mode is new)
#   decode-compare.txt   new / base
. bench/gpu-setup.sh
BASE=${1:-$(git rev-parse HEAD)}
build_base "$BASE"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for run in softmax:f32:new softmax:f32:base softmax:bf16:new softmax:bf16:base tda:bf16:new tda:bf16:base \
    softmax:bf16act:new tda:bf16act:new; do
    IFS=: read -r kind mode which <<<"$run"
    bin=build-gpu/tdacl-bench
    [ "$which" = base ] && bin=/tmp/base/build/tdacl-bench
    "$bin" --device nvidia --suite peak,forward --kinds "$kind" --dtype "$mode" --no-prefill \
        --json "$OUT/decode-$which-$kind-$mode.json" >"$OUT/decode-$which-$kind-$mode.txt" 2>&1
    grep -E "forward" "$OUT/decode-$which-$kind-$mode.txt" | cut -c1-150
done
for r in softmax:f32 softmax:bf16 tda:bf16; do
    IFS=: read -r k m <<<"$r"
    build-gpu/tdacl-bench --load "$OUT/decode-new-$k-$m.json" --compare "$OUT/decode-base-$k-$m.json" 2>&1 |
        sed -n '/^compare:/,$p'
done >"$OUT/decode-compare.txt"
cut -c1-140 "$OUT/decode-compare.txt"
exit 0
