#!/bin/bash
# The tensor-core attention kernel's lazy steps (a lazy softmax reference maximum; the
# threshold kinds' weights formed only in warps whose cut is reached) on the GPU host, in one
# short call:
#   bash bench/gpu-lazy.sh BASE_DIR
# BASE_DIR/cl holds the kernel files before the change (`git show REV:cl/FILE`).  Builds this
# tree and the tree with those kernels side by side (only the targets used), runs three
# tensor-core test parts natively (-> test-native.txt), times every kind at bf16, d=64,
# T=8192 and 16384 on both trees (base.json, new.json, compare.txt), runs three more test
# parts, then PyTorch SDPA bf16 on the same shapes (anchors.json, vs-fa2.txt).  Each step has
# a time limit, so that a short lease still returns what finished.  Run from the repository
# root with the bundle in .gpubundle/ and gpu-env.sh in .gpu/.
BASE=${1:?usage: gpu-lazy.sh BASE_DIR}
. bench/gpu-setup.sh
build_with_kernels "$BASE" # the base: this tree with the kernel files of BASE
echo "built ($SECONDS s)"

# `bash bench/gpu-lazy.sh BASE_DIR again` (after a change to the threshold kinds): the mma part
# natively without the short limit (-> test-native-mma.txt), rela, tra and tda on both trees
# (base2.json, new2.json, compare2.txt)
if [ "${2:-}" = again ]; then
    (cd build-gpu/tests && TDACL_LOG=warn timeout 150 ./test_attention --part mma) >"$OUT/test-native-mma.txt" 2>&1
    grep -E "PASSED|FAILED|ERROR" "$OUT/test-native-mma.txt" | head
    A=(--device nvidia --suite attention --dtype bf16 --T 8192,16384 --d 64 --no-decode --beta 1 --min-samples 5
        --kinds rela,tra,tda)
    /tmp/base/build/tdacl-bench "${A[@]}" --json "$OUT/base2.json" >/dev/null 2>&1
    build-gpu/tdacl-bench "${A[@]}" --json "$OUT/new2.json" >/dev/null 2>&1
    build-gpu/tdacl-bench --load "$OUT/new2.json" --compare "$OUT/base2.json" >"$OUT/compare2.txt" 2>&1
    grep -E "prefill" "$OUT/compare2.txt"
    exit 0
fi

# native tests, most telling first; the rest after the timing
native() { native_limited 30 "$@"; }
native mma-lazy-weights mma-rescale mma

ARGS=(--device nvidia --suite attention --dtype bf16 --T 8192,16384 --d 64 --no-decode --beta 1 --min-samples 5
    --kinds softmax,tra,tda,rela,diff_softmax,topk_theta)
timeout 70 /tmp/base/build/tdacl-bench "${ARGS[@]}" --json "$OUT/base.json" >/dev/null 2>&1
timeout 70 build-gpu/tdacl-bench "${ARGS[@]}" --json "$OUT/new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/base.json" >"$OUT/compare.txt" 2>&1
grep -E "x|ratio|prefill" "$OUT/compare.txt" | tail -14
echo "timed ($SECONDS s)"

native topk-theta-mma mma-decode mma-wide

timeout 45 python3 bench/anchors/anchors.py --T 8192,16384 --d 64 --skip sdpa-fp32,tra,tda --out "$OUT/anchors.json" \
    >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-fa2.txt" 2>&1
grep -E "pytorch" "$OUT/vs-fa2.txt"
echo "done ($SECONDS s)"
