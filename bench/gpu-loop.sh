#!/bin/bash
# The tensor-core attention loop's per-tile overhead (K/V tile copies unrolled, no score
# zeroing per tile, the sparse kinds' last W V after the loop) on the GPU host, in one call:
#   bash bench/gpu-loop.sh BASE_DIR
# BASE_DIR/cl holds the kernel files before the change (`git show REV:cl/FILE`).  Builds this
# tree and the tree with those kernels, runs six tensor-core test parts natively
# (-> test-native.txt), times the kinds in $KINDS (default every kind but entmax) at bf16,
# d=64, T=8192 and 16384 on both trees (base.json, new.json, compare.txt) and the density
# sweep of $SWEEP_KINDS (default tra) at T=8192 (beta 0.5, 0.25, 0: sweep-*.json,
# compare-sweep.txt), PyTorch SDPA bf16 on the same shapes (anchors.json,
# vs-fa2.txt), the tile tuning of the kinds in $TUNE_KINDS (mma.tdb, mma-tune.log), then
# Nsight Compute on this tree's tra ($NCU_KINDS, none to skip: profile/); the JSON rows, the
# native test log, the tuning and the profile come back in data.tgz.  Each step has a time limit, so
# that a short lease still returns what finished.  Run from the repository root
# with the bundle in .gpubundle/ and gpu-env.sh in .gpu/.
BASE=${1:?usage: gpu-loop.sh BASE_DIR}
. bench/gpu-setup.sh
build_with_kernels "$BASE"
echo "built ($SECONDS s)"

# the device tool brings back 8 files: the tables stay apart, the rest goes in data.tgz (also
# packed half way, in case the lease ends first)
pack() {
    (cd "$OUT" && tar -czf data.tgz --ignore-failed-read base.json new.json sweep-base.json sweep-new.json anchors.json \
        test-native.txt profile mma-tune.log mma.tdb 2>/dev/null)
}
native() { native_limited 40 "$@"; }
native mma-lazy-weights mma mma-rescale mma-decode

A=(--device nvidia --suite attention --dtype bf16 --d 64 --no-decode --min-samples 5)
ALL=(--kinds ${KINDS:-softmax,tra,tda,rela,diff_softmax,topk_theta} --T 8192,16384 --beta 1)
timeout 90 /tmp/base/build/tdacl-bench "${A[@]}" "${ALL[@]}" --json "$OUT/base.json" >/dev/null 2>&1
timeout 90 build-gpu/tdacl-bench "${A[@]}" "${ALL[@]}" --json "$OUT/new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/base.json" >"$OUT/compare.txt" 2>&1
grep -E "prefill" "$OUT/compare.txt" | tail -12
echo "timed ($SECONDS s)"
SW=(--kinds ${SWEEP_KINDS:-tra} --T 8192 --beta 0.5,0.25,0)
timeout 60 /tmp/base/build/tdacl-bench "${A[@]}" "${SW[@]}" --json "$OUT/sweep-base.json" >/dev/null 2>&1
timeout 60 build-gpu/tdacl-bench "${A[@]}" "${SW[@]}" --json "$OUT/sweep-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/sweep-new.json" --compare "$OUT/sweep-base.json" >"$OUT/compare-sweep.txt" 2>&1
grep -E "prefill" "$OUT/compare-sweep.txt"
echo "swept ($SECONDS s)"
pack

native topk-theta-mma entmax-mma

timeout 45 python3 bench/anchors/anchors.py --T 8192,16384 --d 64 --skip sdpa-fp32,tra,tda --out "$OUT/anchors.json" \
    >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/new.json" --compare "$OUT/anchors.json" >"$OUT/vs-fa2.txt" 2>&1
grep -E "pytorch" "$OUT/vs-fa2.txt"
echo "anchored ($SECONDS s)"

# tile tuning of this tree ($TUNE_KINDS, d=64, T=8192, $TUNE_BUDGET s a kind) -> mma.tdb, mma-tune.log
for kind in ${TUNE_KINDS//,/ }; do
    timeout $((${TUNE_BUDGET:-30} + 60)) build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds "$kind" \
        --dtype bf16 --d 64 --T 8192 --B 4 --H 8 --budget "${TUNE_BUDGET:-30}" --jobs 12 --out "$OUT/mma.tdb" 2>&1 |
        grep -v "warning generated" >>"$OUT/mma-tune.log"
    grep -E "^attention_mma|best" "$OUT/mma-tune.log" | tail -3
done
[ -n "${TUNE_KINDS:-}" ] && echo "tuned ($SECONDS s)"
if [ "${NCU_KINDS:-tra}" != none ]; then
    mkdir -p "$OUT/profile"
    OUT=$OUT/profile NCU_KINDS=${NCU_KINDS:-tra} timeout 200 bash bench/profile/gpu-ncu-attention.sh >"$OUT/profile/log.txt" 2>&1
    for f in "$OUT"/profile/kind*.source.csv.gz; do
        python3 bench/profile/sass_breakdown.py "$f" --top 14 | tee "${f%.source.csv.gz}.breakdown.txt"
    done
fi
pack && (cd "$OUT" && rm -rf base.json new.json sweep-base.json sweep-new.json anchors.json test-native.txt profile \
    mma-tune.log mma.tdb)
echo "done ($SECONDS s)"
