#!/bin/bash
# Two measurements in one call on the GPU host (before/after, same run):
#  1. the transposed GEMV (the tied LM head) with a staged in local memory: this tree against
#     BASE (a commit, built by build_base) in tdacl-bench's gemm suite (gemm-{base,new}.json,
#     gemm-compare.txt) and this tree with the kernel switches of $GEMV_OPTS (one
#     TDACL_BUILD_OPTIONS string each, ';'-separated: gemm-opt-N.json), then the batch-1 decode
#     rows of the forward suite for both trees, twice interleaved (decode-*.json), and the LM head
#     alone through bench/probes/gemv_probe.c, wall clock and device time (gemv-probe.txt);
#  2. the softmax kinds ($KINDS, default softmax,diff_softmax,topk_theta) of the tensor-core
#     attention, bf16, d=64 and 128, T=8192 and 16384: BASE against this tree (att-{base,new}-dD.json)
#     and this tree with the switches of $ATT_OPTS (';'-separated TDACL_BUILD_OPTIONS strings:
#     att-optN-dD.json), PyTorch SDPA bf16 in the same run (anchors-dD.json): att-table.txt; the
#     tensor-core decode at 4 query rows on both trees (dec-compare.txt);
#  3. the tile tuning of this tree for the kinds of $TUNE_KINDS (d=64, T=8192: mma.tdb, mma-tune.log).
# Native tests of this tree first: test_matmul and the tensor-core test_attention parts
# ($NATIVE_PARTS, default mma mma-rescale topk-theta-mma mma-decode mma-wide: test-native.txt).  Everything comes back in $OUT/data.tgz.
#   bash bench/gpu-lmhead-softmax.sh BASE
BASE=${1:?usage: gpu-lmhead-softmax.sh BASE_COMMIT}
. bench/gpu-setup.sh
build_base "$BASE"
echo "built ($SECONDS s)"
pack() { (cd "$OUT" && tar -czf data.tgz --exclude=data.tgz . 2>/dev/null); }

(cd build-gpu/tests && ./test_matmul) >"$OUT/test-native.txt" 2>&1
native_limited 100 ${NATIVE_PARTS:-mma mma-rescale topk-theta-mma mma-decode mma-wide}
pack

G=(--device nvidia --suite gemm --min-samples 10)
/tmp/base/build/tdacl-bench "${G[@]}" --json "$OUT/gemm-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench "${G[@]}" --json "$OUT/gemm-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/gemm-base.json" >"$OUT/gemm-compare.txt" 2>&1
grep -E "gemm_bias_bt|gemv" "$OUT/gemm-compare.txt"
IFS=';' read -r -a gopts <<<"${GEMV_OPTS:-}"
for i in "${!gopts[@]}"; do
    TDACL_BUILD_OPTIONS="${gopts[$i]}" build-gpu/tdacl-bench "${G[@]}" --json "$OUT/gemm-opt-$i.json" >/dev/null 2>&1
done
# the LM head alone, 200 launches back to back, wall clock and (TDACL_PROFILE) device time, both trees
for tree in /tmp/base/build build-gpu; do
    gcc -std=c11 -O2 -o /tmp/gemv_probe bench/probes/gemv_probe.c -Iinclude -L$tree -ltdacl -Wl,-rpath,$PWD/$tree,-rpath,$tree &&
        for adt in f32 bf16; do
            echo "== $tree, a $adt" && TDACL_PROFILE=1 /tmp/gemv_probe 50257 768 $adt 2>&1 | grep -E "gemv_t|GB/s"
        done
done | tee "$OUT/gemv-probe.txt"
echo "gemm timed ($SECONDS s)"
F=(--device nvidia --suite forward --dtype bf16act,bf16 --no-prefill --decode-Tk 1024)
for r in 1 2; do
    timeout 100 /tmp/base/build/tdacl-bench "${F[@]}" --json "$OUT/decode-base-$r.json" >/dev/null 2>&1
    timeout 100 build-gpu/tdacl-bench "${F[@]}" --json "$OUT/decode-new-$r.json" >/dev/null 2>&1
done
echo "decode timed ($SECONDS s)"
pack

A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --kinds ${KINDS:-softmax,diff_softmax,topk_theta} --T 8192,16384)
IFS=';' read -r -a aopts <<<"${ATT_OPTS:-}"
for d in 64 128; do
    timeout 120 /tmp/base/build/tdacl-bench "${A[@]}" --d $d --json "$OUT/att-base-d$d.json" >/dev/null 2>&1
    timeout 120 build-gpu/tdacl-bench "${A[@]}" --d $d --json "$OUT/att-new-d$d.json" >/dev/null 2>&1
    for i in "${!aopts[@]}"; do
        TDACL_BUILD_OPTIONS="${aopts[$i]}" timeout 120 build-gpu/tdacl-bench "${A[@]}" --d $d --json "$OUT/att-opt$i-d$d.json" \
            >/dev/null 2>&1
    done
    echo "attention d$d timed ($SECONDS s)"
done
# the tensor-core decode (split form) at 4 query rows, both trees
DM=(--device nvidia --suite attention --dtype bf16 --no-prefill --kinds softmax,diff_softmax --decode-Tq 4 --min-samples 5)
timeout 60 /tmp/base/build/tdacl-bench "${DM[@]}" --json "$OUT/dec-base.json" >/dev/null 2>&1
timeout 60 build-gpu/tdacl-bench "${DM[@]}" --json "$OUT/dec-new.json" >/dev/null 2>&1
build-gpu/tdacl-bench --load "$OUT/dec-new.json" --compare "$OUT/dec-base.json" >"$OUT/dec-compare.txt" 2>&1
for d in 64 128; do
    timeout 60 python3 bench/anchors/anchors.py --T 8192,16384 --d $d --skip sdpa-fp32,tra,tda --out "$OUT/anchors-d$d.json" \
        >/dev/null 2>&1
done
oargs=()
for i in "${!aopts[@]}"; do oargs+=("opt$i=${aopts[$i]}"); done
python3 bench/att_table.py "$OUT" base new "${oargs[@]}" | tee "$OUT/att-table.txt"
pack
# tile tuning of this tree ($TUNE_KINDS, d=64, T=8192, 30 s a kind) -> mma.tdb, mma-tune.log
for kind in ${TUNE_KINDS//,/ }; do
    timeout 100 build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds "$kind" --dtype bf16 --d 64 --T 8192 \
        --B 4 --H 8 --budget 30 --jobs 12 --out "$OUT/mma.tdb" 2>&1 | grep -v "warning generated" >>"$OUT/mma-tune.log"
    grep -E "^attention_mma|best" "$OUT/mma-tune.log" | tail -2
done
pack
echo "done ($SECONDS s)"
