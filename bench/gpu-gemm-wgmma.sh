#!/bin/bash
# The GEMM on Hopper's warpgroup products (gemm.wgmma, cl/wgmma.cl) against the mma.sync GEMM
# (the same binary with TDACL_WGMMA=0) and torch, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-gemm-wgmma.sh
#   test-native.txt      test_matmul, test_registry, then (last) test_tuning, test_model, natively
#   gemm-{new,base}.json, gemm-compare.txt   tdacl-bench --suite peak,gemm (TDACL_PRECISION=bf16)
#                        with gemm.wgmma and with TDACL_WGMMA=0, one process each
#   matmul-anchors.json, gemm-vs-torch.txt   torch.addmm bf16 on the same shapes; ours against it
#   forward-{new,base}-softmax-bf16act.json/.txt, compare-bf16act.txt   the prefill rows, both ways
#   hf.json, vs-hf-bf16act.txt   transformers in the same run, our bf16act rows against its bf16
. bench/gpu-setup.sh
# (first builds compile every program: test_matmul takes minutes natively with a cold cache)
(cd build-gpu/tests && timeout 300 stdbuf -oL ./test_matmul && timeout 60 stdbuf -oL ./test_registry) \
    >"$OUT/test-native.txt" 2>&1
echo "tests: status $?"
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -8
TDACL_PRECISION=bf16 TDACL_WGMMA=0 build-gpu/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm-base.json" \
    >/dev/null 2>&1
TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/gemm-base.json" >"$OUT/gemm-compare.txt" 2>&1
(cd bench/anchors && python3 matmul.py --out "$OUT/matmul-anchors.json") >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/matmul-anchors.json" >"$OUT/gemm-vs-torch.txt" 2>&1
grep bf16act "$OUT/gemm-compare.txt" | grep -v " 1x" | cut -c1-170
grep bf16act "$OUT/gemm-vs-torch.txt" | grep -v " 1x" | cut -c1-170
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for which in new base; do
    off=1
    [ "$which" = base ] && off=0
    TDACL_WGMMA=$off timeout 150 build-gpu/tdacl-bench --device nvidia --suite peak,forward --kinds softmax --dtype bf16act \
        --no-decode --json "$OUT/forward-$which-softmax-bf16act.json" >"$OUT/forward-$which-softmax-bf16act.txt" 2>&1
done
build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-bf16act.json" --compare "$OUT/forward-base-softmax-bf16act.json" \
    2>&1 | sed -n '/^compare:/,$p' >"$OUT/compare-bf16act.txt"
cut -c1-150 "$OUT/compare-bf16act.txt"
timeout 120 python3 bench/anchors/gpt_hf.py --out "$OUT/hf.json" >"$OUT/hf.txt" 2>&1
hf_as_bf16act "$OUT/hf.json" /tmp/hf-bf16act.json
build-gpu/tdacl-bench --load "$OUT/forward-new-softmax-bf16act.json" --compare /tmp/hf-bf16act.json 2>&1 |
    sed -n '/^compare:/,$p' >"$OUT/vs-hf-bf16act.txt"
cut -c1-150 "$OUT/vs-hf-bf16act.txt"
(cd build-gpu/tests && timeout 60 stdbuf -oL ./test_tuning && TDACL_LOG=warn timeout 200 stdbuf -oL ./test_model) \
    >>"$OUT/test-native.txt" 2>&1
echo "tests (tuning, model): status $?"
grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -8
exit 0
