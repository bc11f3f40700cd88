#!/bin/bash
# Where a decode step's time goes, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-decode-profile.sh
#   decode.txt/.json   tdacl-bench forward decode rows (softmax and tda, f32 and bf16, GPT-2
#                      small with random weights, contexts 1024 and 8192; no prefill rows)
#   generate.txt       `tdacl generate` on the softmax model (prompt 960 ids, 129 new): its
#                      ms/token, then with TDACL_PROFILE=1 the per-kernel device times of the
#                      run (prefill kernels included: gemm, attention_fwd, tensor_copy)
#   test-native.txt    test_model and test_attention --part decode natively
. bench/gpu-setup.sh
(cd build-gpu/tests && ./test_model && TDACL_LOG=warn ./test_attention --part decode) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -4
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
build-gpu/tdacl-bench --device nvidia --suite peak,forward --kinds softmax,tda --dtype f32,bf16 --no-prefill \
    --json "$OUT/decode.json" >"$OUT/decode.txt" 2>&1
grep -E "decode" "$OUT/decode.txt" | cut -c1-200
M=$TDACL_BENCH_MODELS/gpt2-small-softmax
P=$(python3 -c "print(','.join(str((i * 7919) % 50257) for i in range(960)))")
for dt in bf16 f32; do
    echo "== $dt"
    build-gpu/tdacl generate --device nvidia --model "$M" --tokens "$P" --max-new 129 --dtype "$dt" 2>&1 >/dev/null |
        grep -E "ms/token"
    TDACL_PROFILE=1 build-gpu/tdacl generate --device nvidia --model "$M" --tokens "$P" --max-new 129 --dtype "$dt" \
        2>&1 >/dev/null | grep -E "profile"
done | tee "$OUT/generate.txt"
exit 0
