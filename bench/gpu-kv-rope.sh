#!/bin/bash
# The KV append (8 elements a work-item, three views a work-group) and RoPE (256 work-items a
# work-group) against the same tree without that change, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-kv-rope.sh PATCH      (PATCH: the change, as `git diff` wrote it)
#   test-native.txt      test_model natively
#   forward-{new,base}-KIND-MODE.json/.txt  tdacl-bench --suite peak,forward --no-decode, one
#                        process each: softmax and tda, bf16act and f32
#   compare.txt          new / base
. bench/gpu-setup.sh
build_reverted "$1"
(cd build-gpu/tests && ./test_model) >"$OUT/test-native.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/test-native.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
: >"$OUT/compare.txt"
for kind in softmax tda; do
    for mode in bf16act f32; do
        for which in new base; do
            bin=build-gpu/tdacl-bench
            [ "$which" = base ] && bin=/tmp/base/build/tdacl-bench
            "$bin" --device nvidia --suite peak,forward --kinds "$kind" --dtype "$mode" --no-decode \
                --json "$OUT/forward-$which-$kind-$mode.json" >"$OUT/forward-$which-$kind-$mode.txt" 2>&1
        done
        build-gpu/tdacl-bench --load "$OUT/forward-new-$kind-$mode.json" --compare "$OUT/forward-base-$kind-$mode.json" \
            2>&1 | sed -n '/^compare:/,$p' >>"$OUT/compare.txt"
    done
done
cut -c1-140 "$OUT/compare.txt"
exit 0
