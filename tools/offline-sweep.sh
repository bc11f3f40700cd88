#!/bin/bash
# Candidate tile sizes for a device class this project cannot run, judged by the vendor
# compiler's resource report (tools/offline-compile.sh): each candidate is put in front of the
# lookup through a user tuning file and the attention program of one kind and dtype is
# compiled for one target.  Used to choose the class defaults in src/ops/spaces.c.
#   tools/offline-sweep.sh path/to/tdacl OUTDIR TARGET KERNEL KIND DTYPE "P=v ..." ["P=v ..." ...]
# KERNEL: attention (prefill on the FP32 lanes), attention_decode, or attention_mma (prefill on
# the class's matrix-unit body, built as with TDACL_EXPERIMENTAL_MATRIX=1).  Extra compiler options
# (e.g. -cl-intel-256-GRF-per-thread) go in TDACL_BUILD_OPTIONS.  Writes OUTDIR/sweep.md.
set -uo pipefail
TDACL="$1" OUT="$2" TARGET="$3" KERNEL="$4" KIND="$5" DTYPE="$6"
shift 6
case "$TARGET" in gfx*) class="amd-$TARGET" ;; dg2) class=intel-xe-hpg ;; pvc) class=intel-xe-hpc ;;
*) echo "offline-sweep: unknown target $TARGET"; exit 1 ;; esac
case "$KERNEL" in attention | attention_decode) row="$KERNEL\\.simt" ;; attention_mma) row='attention\.mma' ;;
*) echo "offline-sweep: KERNEL is attention, attention_decode or attention_mma"; exit 1 ;; esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$OUT"
echo "| candidate | $([[ "$TARGET" == gfx* ]] && echo "kernel | target | VGPRs | AGPRs | SGPRs | scratch B/lane | VGPR spill | SGPR spill | LDS B | waves/SIMD" || echo "kernel | target | SIMD | GRFs | spill B/thread | threads/EU") |" >"$OUT/sweep.md"
i=0
for cand in "$@"; do
    i=$((i + 1))
    echo "$KERNEL class=$class kind=$KIND : $cand" >"$OUT/cand.tdb"
    TDACL_TUNING_FILE="$OUT/cand.tdb" OFFLINE_DTYPES="$DTYPE" OFFLINE_PROGRAMS="^$row $KIND $DTYPE" \
        bash "$here/offline-compile.sh" "$TDACL" "$OUT/run" "$TARGET" >"$OUT/run-$i.log" 2>&1
    used=$(grep -P "\t$row $KIND $DTYPE" "$OUT/run/programs-$TARGET/index.tsv" | cut -f3)
    ok=1
    # every parameter that is a macro must have the candidate's value (others, like the
    # decode's WAVES, only size the launch)
    for pv in $cand; do [[ " $used " != *" -D${pv%%=*}="* || " $used " == *" -D$pv "* ]] || ok=0; done
    if [ "$ok" = 0 ]; then
        echo "| $cand | not used: the constraints refuse it (run-$i.log) |" >>"$OUT/sweep.md"
        continue
    fi
    grep '^| .*: ' "$OUT/run/table.md" | grep "$row" | grep -v "_reduce" |
        sed "s/^| $row [^:]*: /| $cand | /" >>"$OUT/sweep.md" || echo "| $cand | failed (run-$i.log) |" >>"$OUT/sweep.md"
done
cat "$OUT/sweep.md"
