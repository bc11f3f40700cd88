#!/bin/bash
# A tiny tuning run on PoCL writes a database entry that the next process picks up.
#   tune_roundtrip.sh path/to/tdacl WORKDIR
# 1. `tdacl tune` searches the decode kernel of tra (f32, d=64, Tk=8192: the long-T bucket
#    that `tdacl devices --verbose` reports) for a few seconds into a fresh user database;
# 2. the file must hold one well-formed attention_decode entry for this device;
# 3. a new process (`tdacl devices --verbose`) must report that entry, from that file,
#    instead of the shipped or class default;
# 4. (below) the tensor-core rows' tuners write their own keys.
# Budgets of 9-12 s: two or three candidates each (3-4 s a candidate on a cold 2-core CI
# machine); every second here runs twice in CI (Release and ASan).
set -euo pipefail
TDACL="$1"
WORK="$2"
rm -rf "$WORK"
mkdir -p "$WORK"
export TDACL_TUNING_FILE="$WORK/tuning.tdb"

"$TDACL" tune --kernel attention_decode --kinds tra --dtype f32 --d 64 --T 8192 --B 1 --H 2 \
    --budget 12 --strategy random --seed 7 --quiet 2>"$WORK/tune.log" || {
    cat "$WORK/tune.log"
    echo "FAIL: tdacl tune exited non-zero"
    exit 1
}
cat "$WORK/tune.log"

entry="$(grep -E '^attention_decode ' "$TDACL_TUNING_FILE" || true)"
echo "entry: $entry"
if [ "$(printf '%s\n' "$entry" | grep -c .)" -ne 1 ]; then
    echo "FAIL: expected exactly one attention_decode entry in $TDACL_TUNING_FILE"
    cat "$TDACL_TUNING_FILE"
    exit 1
fi
params="$(printf '%s\n' "$entry" | sed -n 's/.*: *\(NTD=[0-9]* WAVES=[0-9]*\).*/\1/p')"
if [ -z "$params" ]; then
    echo "FAIL: the entry has no 'NTD=n WAVES=n' parameters"
    exit 1
fi

"$TDACL" devices --verbose >"$WORK/devices.txt" 2>&1
line="$(grep 'attention decode tra f32 d=64' "$WORK/devices.txt" || true)"
echo "next process: $line"
case "$line" in
*"$params"*"[user: $TDACL_TUNING_FILE"*) echo "PASS: the new entry ($params) is used" ;;
*)
    echo "FAIL: the next process did not use the tuned entry ($params) from $TDACL_TUNING_FILE"
    cat "$WORK/devices.txt"
    exit 1
    ;;
esac

# 4. the tensor-core rows through their portable body: tf32 prefill tiles are written under
#    their own key (dtype=tf32), the tensor-core decode under attention_decode_mma
for run in "attention_mma tf32 64 dtype=tf32" "attention_decode_mma bf16 256 dtype=bf16"; do
    set -- $run
    TDACL_MMA_EMULATE=1 "$TDACL" tune --kernel "$1" --kinds tra --dtype "$2" --d 32 --T "$3" --B 1 --H 1 \
        --budget 9 --strategy random --seed 7 --quiet --out "$WORK/mma.tdb" 2>"$WORK/tune-$1.log" || {
        cat "$WORK/tune-$1.log"
        echo "FAIL: tdacl tune --kernel $1 --dtype $2 exited non-zero"
        exit 1
    }
    if ! grep -qE "^$1 .* kind=tra $4 d=32 " "$WORK/mma.tdb"; then
        echo "FAIL: no '$1 ... $4' entry in $WORK/mma.tdb"
        cat "$WORK/mma.tdb" "$WORK/tune-$1.log"
        exit 1
    fi
    echo "PASS: $1 --dtype $2 wrote a $4 entry"
done

# tune_checked KERNEL KIND ARGS...: a tune of one row whose candidates are checked against the
# tuner's own reference (src/tools/reference.c): it must write an entry with none wrong
tune_checked() {
    local kernel="$1" kind="$2"
    shift 2
    "$TDACL" tune --kernel "$kernel" --kinds "$kind" --dtype f32 --d 32 "$@" --strategy random --seed 7 \
        --out "$WORK/$kind.tdb" >"$WORK/tune-$kind.log" 2>&1 || {
        cat "$WORK/tune-$kind.log"
        echo "FAIL: tdacl tune --kernel $kernel exited non-zero"
        exit 1
    }
    if ! grep -qE "^$kernel .* kind=$kind dtype=f32 d=32 " "$WORK/$kind.tdb" ||
        ! grep -q " 0 wrong against the reference" "$WORK/tune-$kind.log"; then
        echo "FAIL: no $kernel entry, or candidates wrong against the reference"
        cat "$WORK/$kind.tdb" "$WORK/tune-$kind.log"
        exit 1
    fi
    echo "PASS: $kernel wrote an entry, no candidate wrong"
}
# 5. the entmax row
tune_checked attention_entmax entmax --T 64 --B 1 --H 1 --budget 9
# 6. the Top-theta decode row: thresholds keeping ~16 keys of N(0, 1) scores on the device and
#    in the tuner's reference alike (tdacl__topk_normal_threshold), key splits included
tune_checked attention_topk_decode topk_theta --T 300 --B 1 --H 2 --budget 10
# 7. the GEMM on Hopper's wgmma, through its emulation: tuned with bf16 a (the only a it takes),
#    candidates checked against the reference; without the emulation (no sm_90 here) the tuner
#    refuses it by name
TDACL_MMA_EMULATE=wgmma "$TDACL" tune --kernel gemm_wgmma --dtype bf16 --T 64 --N 64 --K 64 --budget 6 --strategy random \
    --seed 7 --out "$WORK/wgmma.tdb" >"$WORK/tune-wgmma.log" 2>&1 || {
    cat "$WORK/tune-wgmma.log"
    echo "FAIL: tdacl tune --kernel gemm_wgmma exited non-zero"
    exit 1
}
if ! grep -qE "^gemm_wgmma .* dtype=bf16 .*GWG_BM=" "$WORK/wgmma.tdb" || ! grep -q " 0 wrong against the reference" "$WORK/tune-wgmma.log"; then
    echo "FAIL: no gemm_wgmma entry, or candidates wrong against the reference"
    cat "$WORK/wgmma.tdb" "$WORK/tune-wgmma.log"
    exit 1
fi
echo "PASS: gemm_wgmma wrote an entry, no candidate wrong"
if TDACL_MMA_EMULATE= "$TDACL" tune --kernel gemm_wgmma --dtype bf16 --T 64 --N 64 --K 64 --budget 2 \
    --out "$WORK/wgmma-no.tdb" >"$WORK/tune-wgmma-no.log" 2>&1 || ! grep -q "gemm.wgmma cannot run here" "$WORK/tune-wgmma-no.log"; then
    cat "$WORK/tune-wgmma-no.log"
    echo "FAIL: gemm_wgmma without its emulation was not refused by name"
    exit 1
fi
echo "PASS: gemm_wgmma refused where it cannot run"
