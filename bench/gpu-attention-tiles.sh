#!/bin/bash
# The tensor-core attention of this tree on chosen tiles, against the shipped tiles and
# (BASE=commit) against another tree, in one run on the GPU host: bf16, B4 H8, causal, $KINDS
# (default softmax,diff_softmax) at T=$TS (default 8192,16384) and d in $DS (default 64 128),
# PyTorch SDPA bf16 (its default backend: cuDNN's wgmma kernel on an H200) and FlashAttention-2
# (SDPA held to its flash backend) in the same run.
#  - native tests of this tree: test_attention parts $NATIVE_PARTS (default mma mma-wide) -> test-native.txt
#  - BASE's build on its shipped tiles: att-base-dD.json; this tree's: att-ship-dD.json; each tile
#    of $TILES (';'-separated parameter strings, given to every kind of $KINDS through a user
#    tuning file, with the kernel switches of $TILE_OPTS, a TDACL_BUILD_OPTIONS string): att-tN-dD.json
#  - with DEC_TQ (e.g. 4): the split (decode) form at that many query rows, BASE and this tree -> dec-compare.txt
#  - with TUNE_KINDS (e.g. softmax,diff_softmax): tdacl tune of this tree at d=64, T=8192 -> mma.tdb, mma-tune.log
#  - att-table.txt: every row against both anchors (bench/att_table.py).  Everything also in $OUT/data.tgz.
#   BASE=HEAD TILES="BN=64 NWARPS=4 MT=1 KSTAGES=2;..." bash bench/gpu-attention-tiles.sh
# (bench/results/softmax-loop-h200/ ran it, with the patches there applied: cmd.sh.)
. bench/gpu-setup.sh
[ -n "${BASE:-}" ] && build_base "$BASE"
pack() { (cd "$OUT" && tar -czf data.tgz --exclude=data.tgz . 2>/dev/null); }
native_limited ${TEST_LIMIT:-150} ${NATIVE_PARTS:-mma mma-wide}
pack
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --kinds ${KINDS:-softmax,diff_softmax} --T ${TS:-8192,16384})
IFS=';' read -r -a tiles <<<"${TILES:-}"
for d in ${DS:-64 128}; do
    [ -n "${BASE:-}" ] && timeout 120 /tmp/base/build/tdacl-bench "${A[@]}" --d $d --json "$OUT/att-base-d$d.json" >/dev/null 2>&1
    timeout 120 build-gpu/tdacl-bench "${A[@]}" --d $d --json "$OUT/att-ship-d$d.json" >/dev/null 2>&1
    for i in "${!tiles[@]}"; do
        f=/tmp/tile-$i.tdb
        : >$f
        for kind in $(echo ${KINDS:-softmax,diff_softmax} | tr , ' '); do
            echo "attention_mma class=nvidia-sm_90 kind=$kind dtype=bf16 d=$d dv=$d t=long : ${tiles[$i]}" >>$f
        done
        TDACL_BUILD_OPTIONS="${TILE_OPTS:-}" TDACL_TUNING_FILE=$f timeout 120 build-gpu/tdacl-bench "${A[@]}" --d $d --json "$OUT/att-t$i-d$d.json" \
            >"$OUT/att-t$i-d$d.log" 2>&1
    done
    timeout 60 python3 bench/anchors/anchors.py --T ${TS:-8192,16384} --d $d --skip sdpa-fp32,tra,tda --out "$OUT/anchors-d$d.json" \
        >/dev/null 2>&1
    echo "attention d$d timed ($SECONDS s)"
done
targs=()
for i in "${!tiles[@]}"; do targs+=("t$i"); done
python3 bench/att_table.py "$OUT" base ship "${targs[@]}" | tee "$OUT/att-table.txt"
pack
if [ -n "${DEC_TQ:-}" ]; then # the split (decode) form at DEC_TQ query rows, BASE against this tree
    DM=(--device nvidia --suite attention --dtype bf16 --no-prefill --kinds ${KINDS:-softmax,diff_softmax} --decode-Tq $DEC_TQ --min-samples 5)
    [ -n "${BASE:-}" ] && timeout 60 /tmp/base/build/tdacl-bench "${DM[@]}" --json "$OUT/dec-base.json" >/dev/null 2>&1
    timeout 60 build-gpu/tdacl-bench "${DM[@]}" --json "$OUT/dec-new.json" >/dev/null 2>&1
    [ -n "${BASE:-}" ] && build-gpu/tdacl-bench --load "$OUT/dec-new.json" --compare "$OUT/dec-base.json" 2>&1 | tee "$OUT/dec-compare.txt"
fi
for kind in ${TUNE_KINDS//,/ }; do
    timeout 120 build-gpu/tdacl tune --device nvidia --kernel attention_mma --kinds "$kind" --dtype bf16 --d 64 --T 8192 \
        --B 4 --H 8 --budget 40 --jobs 12 --out "$OUT/mma.tdb" 2>&1 | grep -v "warning generated" >>"$OUT/mma-tune.log"
    grep -E "^attention_mma|best" "$OUT/mma-tune.log" | tail -2
done
pack
echo "done ($SECONDS s)"
