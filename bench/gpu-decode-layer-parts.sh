#!/bin/bash
# Where the one-launch decode layer's time goes (cl/decode_layer.cl), on the GPU host of
# ../shared/gpu-host:   bash bench/gpu-decode-layer-parts.sh
#   test-one-launch.txt  test_model test_decode_one_launch, natively
#   parts.txt      `TDACL_PROFILE=1 tdacl generate` (GPT-2-small softmax, bf16 weights and
#                  activations, 960-id prompt, 65 new) with each TDACL_BUILD_OPTIONS of $VARIANTS:
#                  decode_layer's device time a launch and ms/token.  -DDL_SKIP=mask leaves parts
#                  out (bit 0 the L2 prefetch, 1-5 steps 1-5, 6 grid barriers, 7 norms): their cost
#                  is the difference (the logits are wrong then)
. bench/gpu-setup.sh
(cd build-gpu/tests && timeout 300 ./test_model --filter "test_decode_one_launch" &&
    timeout 300 ./test_model --filter "test_decode_phased*") >"$OUT/test-one-launch.txt" 2>&1
grep -E "OK|FAIL|ERROR|LINE|error|bound" "$OUT/test-one-launch.txt" | head -20
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
timeout 300 build-gpu/tdacl-bench --device nvidia --suite forward --kinds softmax --dtype bf16act --no-prefill \
    --json "$OUT/forward.json" >"$OUT/forward.txt" 2>&1
grep decode "$OUT/forward.txt" | cut -c1-220
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
G="--device nvidia --model $M --tokens $PROMPT --max-new 65 --dtype bf16 --activations bf16"
VARIANTS=${VARIANTS:-"none;-DDL_CGU_MAX=1;-DDL_PREFETCH=0;-DDL_SKIP=2;-DDL_SKIP=4;-DDL_SKIP=8;-DDL_SKIP=16;-DDL_SKIP=32;-DDL_SKIP=64;-DDL_SKIP=128;-DDL_SKIP=190;-DDL_SKIP=255"}
IFS=';' read -ra VLIST <<<"$VARIANTS"
for v in "${VLIST[@]}"; do
    o=$v; [ "$v" = none ] && o=""
    r=$(TDACL_BUILD_OPTIONS="$o" TDACL_PROFILE=1 timeout 120 build-gpu/tdacl generate $G 2>&1 >/dev/null |
        grep -E "decode_layer|ms/token" | sed -E 's/.*decode_layer +([0-9]+) launches.* ([0-9.]+) ms each/decode_layer \2 ms a launch/; s/.*decode [0-9]+ tokens: .*, ([0-9.]+) ms\/token/\1 ms\/token/' | tr '\n' ' ')
    echo "$v: $r"
done | tee "$OUT/parts.txt"
