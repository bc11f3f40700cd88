#!/bin/bash
# Offline compilation for GPUs this project cannot run: every kernel program the library builds
# for a device of each target's class (class defaults, else the generic ladder; `tdacl
# __programs` writes them exactly as src/runtime/program.c assembles them) is compiled with the
# vendor's compiler, and its resource report goes into a table.
#   tools/offline-compile.sh path/to/tdacl OUTDIR [TARGET...]
# Targets: AMD gfx90a (MI200), gfx942 (MI300), gfx1100 (RDNA3) through clang-19 and Debian's
# rocm-device-libs (ISA-version bitcode for gfx942/gfx1100, which that package predates, is
# generated here).  Writes OUTDIR/table.md (per program and target: VGPRs, AGPRs, SGPRs,
# scratch bytes per lane, spills, LDS bytes, occupancy in waves per SIMD) and OUTDIR/logs/.
# Fails when a program does not compile; spills are reported, not failed (class defaults
# without spills are still to be chosen).  OFFLINE_DTYPES (default "f32 bf16 f16") limits the
# attention programs compiled to those storage types (ctest: f32 bf16; f16 differs from bf16
# only in its loads).
set -uo pipefail
TDACL="$1"
OUT="$2"
shift 2
TARGETS=("$@")
[ "$#" -eq 0 ] && TARGETS=(gfx90a gfx942 gfx1100)
CLANG=${CLANG:-clang-19}
BC=${ROCM_BITCODE:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
command -v "$CLANG" >/dev/null || { echo "offline-compile: $CLANG not found (apt-get install clang-19)"; exit 1; }
[ -f "$BC/ocml.bc" ] || { echo "offline-compile: no device libraries in $BC (apt-get install rocm-device-libs)"; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/bitcode"

# isa_version NNN: the device libraries' __oclc_ISA_version (major * 1000 + minor * 100 + stepping)
isa_bitcode() {
    local t="$1" n="${1#gfx}" f="$BC/oclc_isa_version_${1#gfx}.bc"
    if [ -f "$f" ]; then echo "$f"; return; fi
    local v
    case "$t" in
    gfx942) v=9402 ;;
    gfx1100) v=11000 ;;
    *) echo "offline-compile: no ISA bitcode for $t" >&2; return 1 ;;
    esac
    echo "__constant int __oclc_ISA_version = $v;" >"$OUT/bitcode/isa_$n.cl"
    "$CLANG" -x cl -cl-std=CL1.2 -target amdgcn-amd-amdhsa -mcpu="$t" -nogpulib -emit-llvm -c \
        "$OUT/bitcode/isa_$n.cl" -o "$OUT/bitcode/oclc_isa_version_$n.bc" || return 1
    echo "$OUT/bitcode/oclc_isa_version_$n.bc"
}

# the report of one remark: the value after "<name>: "
field() { grep -m1 "remark: *$1" "$2" | sed -E 's/.*: ([0-9A-Za-z]+) \[-Rpass.*/\1/'; }

failed=0
{
    echo "| program | target | VGPRs | AGPRs | SGPRs | scratch B/lane | VGPR spill | SGPR spill | LDS B | waves/SIMD |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$OUT/table.md"
for t in "${TARGETS[@]}"; do
    isa=$(isa_bitcode "$t") || { failed=$((failed + 1)); continue; }
    wave=on
    [[ "$t" == gfx1* ]] && wave=off # RDNA: wave32
    libs=()
    for b in opencl.bc ocml.bc ockl.bc oclc_daz_opt_off.bc oclc_finite_only_off.bc oclc_unsafe_math_off.bc \
        oclc_correctly_rounded_sqrt_on.bc oclc_abi_version_500.bc "oclc_wavefrontsize64_$wave.bc"; do
        libs+=(-Xclang -mlink-builtin-bitcode -Xclang "$BC/$b")
    done
    libs+=(-Xclang -mlink-builtin-bitcode -Xclang "$isa")
    dir="$OUT/programs-$t"
    "$TDACL" __programs "amd-$t" "$dir" >/dev/null || { echo "offline-compile: tdacl __programs amd-$t failed"; exit 1; }
    while IFS=$'\t' read -r file label opts; do
        case "$label" in attention*) dt=$(echo "$label" | awk '{print $3}'); [[ " ${OFFLINE_DTYPES:-f32 bf16 f16} " == *" $dt "* ]] || continue ;; esac
        log="$OUT/logs/$t-${file%.cl}.txt"
        # shellcheck disable=SC2086 # the option string is a list of flags
        if ! "$CLANG" -x cl -target amdgcn-amd-amdhsa -mcpu="$t" -nogpulib "${libs[@]}" -O3 $opts \
            -Rpass-analysis=kernel-resource-usage -c "$dir/$file" -o /dev/null >"$log" 2>&1; then
            echo "FAIL $t $label (log: $log)"
            failed=$((failed + 1))
            continue
        fi
        # one row per kernel of the program, from clang's resource-usage remarks
        awk -v label="$label" -v t="$t" '
            function v(line) { sub(/ \[-Rpass.*/, "", line); n = split(line, a, " "); return a[n] }
            /remark: Function Name:/      { if (name) emit(); name = v($0); vg = ag = sg = sc = vs = ss = lds = occ = "-" }
            /remark: +VGPRs:/             { vg = v($0) }
            /remark: +AGPRs:/             { ag = v($0) }
            /remark: +SGPRs:/             { sg = v($0) }
            /remark: +ScratchSize/        { sc = v($0) }
            /remark: +VGPRs Spill:/       { vs = v($0) }
            /remark: +SGPRs Spill:/       { ss = v($0) }
            /remark: +LDS Size/           { lds = v($0) }
            /remark: +Occupancy/          { occ = v($0) }
            function emit() { printf "| %s: %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label, name, t, vg, ag, sg, sc, vs, ss, lds, occ }
            END { if (name) emit() }' "$log" >>"$OUT/table.md"
    done <"$dir/index.tsv"
done
rows=$(($(wc -l <"$OUT/table.md") - 2))
echo "offline-compile: $rows program x target builds in $OUT/table.md, $failed failed"
[ "$failed" -eq 0 ]
