#!/bin/bash
# Where a GPT-2-small prefill's device time goes, TDA model against softmax model (bf16 weights
# and activations), on the GPU host of ../shared/gpu-host:   bash bench/gpu-prefill-profile.sh
#   test-native.txt          test_model natively (the whole suite; TESTS=0 skips it)
#   forward.txt              tdacl-bench forward prefill rows of both models
#   profile-KIND-T.txt       `TDACL_PROFILE=1 tdacl generate` of a T-token prompt, one new token:
#                            device time per kernel name; TDACL_LOG=debug's variant choices
#                            (attention and matmul lines, deduplicated) after it
. bench/gpu-setup.sh
if [ "${TESTS:-1}" = 1 ]; then
    (cd build-gpu/tests && timeout 400 ./test_model) >"$OUT/test-native.txt" 2>&1
    grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -6
fi
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
timeout 300 build-gpu/tdacl-bench --device nvidia --suite forward --kinds ${KINDS:-tda,softmax} --dtype bf16act \
    --no-decode --json "$OUT/forward.json" >"$OUT/forward.txt" 2>&1
grep prefill "$OUT/forward.txt" | cut -c1-150
for T in ${TS:-1024}; do  # prompt lengths
    PROMPT=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range($T)))")
    for kind in ${PROFILE_KINDS:-tda softmax}; do
        f="$OUT/profile-$kind-$T.txt"
        G="--device nvidia --model $TDACL_BENCH_MODELS/gpt2-small-$kind --tokens $PROMPT --max-new 1 --dtype bf16 --activations bf16"
        TDACL_PROFILE=1 timeout 120 build-gpu/tdacl generate $G 2>&1 >/dev/null | grep -E "profile|prefill" >"$f"
        TDACL_LOG=debug timeout 120 build-gpu/tdacl generate $G 2>&1 >/dev/null |
            grep -E "^tdacl debug: (attention|matmul)" | sed -E 's/ (M|T|Tq|Tk)=[0-9]+//g' | sort | uniq -c >>"$f"
        echo "== $kind T=$T"; grep -E "prefill|profile: [a-z]" "$f" | head -16
    done
done
