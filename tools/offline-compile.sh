#!/bin/bash
# Offline compilation for GPUs this project cannot run: every kernel program the library builds
# for a device of each target's class (class defaults, else the generic ladder; `tdacl
# __programs` writes them exactly as src/runtime/program.c assembles them) is compiled with the
# vendor's compiler, and its resource report goes into a table.
#   tools/offline-compile.sh path/to/tdacl OUTDIR [TARGET...]
# Targets: AMD gfx90a (MI200), gfx942 (MI300), gfx1100 (RDNA3) through clang-19 and Debian's
# rocm-device-libs (ISA-version bitcode for gfx942/gfx1100, which that package predates, is
# generated here); Intel dg2 (Arc A / Flex, class intel-xe-hpg) and pvc (Max, intel-xe-hpc)
# through ocloc (tools/fetch-ocloc.sh, or $OCLOC).  Writes OUTDIR/table.md (AMD, per program
# and target: VGPRs, AGPRs, SGPRs, scratch bytes per lane, spills, LDS bytes, occupancy in
# waves per SIMD; Intel: SIMD width IGC chose, GRFs per thread, spill bytes per thread,
# threads per EU) and OUTDIR/logs/.
# Fails when a program does not compile, when OFFLINE_NO_SPILLS=1 and a program spills, and when
# OFFLINE_NO_WARNINGS=1 and a compiler warns about a program's source.
# OFFLINE_DTYPES (default "f32 bf16 f16") limits the attention programs compiled to those
# storage types (ctest: f32 bf16; f16 differs from bf16 only in its loads); OFFLINE_PROGRAMS, a
# bash regular expression, keeps only the programs whose label matches (e.g. '^attention\.simt tda').
# Parameters come from the usual lookup, so TDACL_TUNING_FILE can put candidates in front.
set -uo pipefail
TDACL="$1"
OUT="$2"
shift 2
TARGETS=("$@")
[ "$#" -eq 0 ] && TARGETS=(gfx90a gfx942 gfx1100 dg2 pvc)
CLANG=${CLANG:-clang-19}
BC=${ROCM_BITCODE:-/usr/lib/x86_64-linux-gnu/amdgcn/bitcode}
amd=0 intel=0
for t in "${TARGETS[@]}"; do case "$t" in gfx*) amd=1 ;; dg2 | pvc) intel=1 ;; *) echo "offline-compile: unknown target $t"; exit 1 ;; esac; done
if [ "$amd" = 1 ]; then
    command -v "$CLANG" >/dev/null || { echo "offline-compile: $CLANG not found (apt-get install clang-19)"; exit 1; }
    [ -f "$BC/ocml.bc" ] || { echo "offline-compile: no device libraries in $BC (apt-get install rocm-device-libs)"; exit 1; }
fi
if [ "$intel" = 1 ] && [ -z "${OCLOC:-}" ]; then
    OCLOC=$(bash "$(dirname "${BASH_SOURCE[0]}")/fetch-ocloc.sh") || { echo "offline-compile: no ocloc (tools/fetch-ocloc.sh)"; exit 1; }
fi
rm -rf "$OUT"
mkdir -p "$OUT/logs" "$OUT/bitcode"
OUT=$(cd "$OUT" && pwd)  # absolute: ocloc runs inside it (IGC drops default.visaasm in its cwd)

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

failed=0 spilled=0
# want_program LABEL: whether OFFLINE_DTYPES keeps this program
want_program() {
    [[ -z "${OFFLINE_PROGRAMS:-}" || "$1" =~ $OFFLINE_PROGRAMS ]] || return 1
    case "$1" in attention*) [[ " ${OFFLINE_DTYPES:-f32 bf16 f16} " == *" $(echo "$1" | awk '{print $3}') "* ]] ;; *) true ;; esac
}

# Intel: IGC's shader dump (.asm per kernel, for the SIMD width it kept) gives GRFs and spills
intel_target() {
    local t="$1" class dir
    case "$t" in dg2) class=intel-xe-hpg ;; pvc) class=intel-xe-hpc ;; esac
    dir="$OUT/programs-$t"
    "$TDACL" __programs "$class" "$dir" >/dev/null || { echo "offline-compile: tdacl __programs $class failed"; exit 1; }
    while IFS=$'\t' read -r file label opts; do
        want_program "$label" || continue
        local log="$OUT/logs/$t-${file%.cl}.txt" dump="$OUT/dump"
        rm -rf "$dump"
        # shellcheck disable=SC2086 # $OCLOC is a command line
        if ! (cd "$OUT" && IGC_ShaderDumpEnable=1 IGC_DumpToCustomDir="$dump" $OCLOC compile -file "$dir/$file" \
            -device "$t" -options "$opts" -out_dir "$OUT/bin") >"$log" 2>&1; then
            echo "FAIL $t $label (log: $log)"
            failed=$((failed + 1))
            continue
        fi
        # one .asm per kernel and SIMD width kept; IGC's retry of a kernel that spilled much
        # (a second compile, files named *_1_simd*) is the binary it keeps
        local -A final=()
        local asm kernel simd grf spill
        for asm in "$dump"/*_simd*.asm; do
            [ -f "$asm" ] || continue
            kernel=$(sed -n 's|^//\.kernel ||p' "$asm" | head -1)
            [[ "$(basename "$asm")" == *_1_simd* || -z "${final[$kernel]:-}" ]] && final[$kernel]="$asm"
        done
        for kernel in "${!final[@]}"; do
            asm="${final[$kernel]}"
            simd=$(basename "$asm" | sed -E 's/.*_simd([0-9]+)_.*/\1/')
            grf=$(sed -n -E 's|^//\.thread_config numGRF=([0-9]+).*|\1|p' "$asm" | head -1)
            spill=$(sed -n -E 's|^//\.spill size ([0-9]+).*|\1|p' "$asm" | head -1)
            echo "| $label: $kernel | $t | $simd | $grf | ${spill:-0} | $((grf > 128 ? 4 : 8)) |" >>"$OUT/intel.md"
            [ "${spill:-0}" -gt 0 ] && spilled=$((spilled + 1))
        done
        unset final
        rm -rf "$dump"
    done <"$dir/index.tsv"
}

{
    echo "| program | target | VGPRs | AGPRs | SGPRs | scratch B/lane | VGPR spill | SGPR spill | LDS B | waves/SIMD |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
} >"$OUT/table.md"
{
    echo "| program | target | SIMD | GRFs | spill B/thread | threads/EU |"
    echo "|---|---|---|---|---|---|"
} >"$OUT/intel.md"
for t in "${TARGETS[@]}"; do
    if [[ "$t" != gfx* ]]; then
        intel_target "$t"
        continue
    fi
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
        want_program "$label" || continue
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
# spilling AMD rows: scratch bytes per lane or VGPRs spilled above zero (AGPRs used as spill
# space on gfx90a/gfx942 are not counted: they are registers)
spilled=$((spilled + $(awk -F'|' 'NR > 2 && ($7 + 0 > 0 || $8 + 0 > 0)' "$OUT/table.md" | wc -l)))
if [ "$intel" = 1 ]; then
    { echo; echo "Intel (ocloc):"; echo; cat "$OUT/intel.md"; } >>"$OUT/table.md"
fi
rows=$(grep -c '^| .*: ' "$OUT/table.md")
# compiler warnings about the kernel source (IGC's "ShaderDumpEnable Warning!" is its dump's, not ours)
warned=$(grep -l "warning:" "$OUT"/logs/*.txt 2>/dev/null | wc -l)
echo "offline-compile: $rows program x target builds in $OUT/table.md, $failed failed, $spilled spill, $warned with warnings"
if [ "$warned" -gt 0 ]; then
    grep -h -A2 "warning:" "$OUT"/logs/*.txt | sort | uniq -c | sort -rn | head -12
fi
[ "$failed" -eq 0 ] || exit 1
if [ "${OFFLINE_NO_WARNINGS:-0}" = 1 ] && [ "$warned" -gt 0 ]; then
    echo "offline-compile: $warned builds warn (OFFLINE_NO_WARNINGS=1; logs in $OUT/logs)"
    exit 1
fi
if [ "${OFFLINE_NO_SPILLS:-0}" = 1 ] && [ "$spilled" -gt 0 ]; then
    echo "offline-compile: $spilled kernel builds spill (OFFLINE_NO_SPILLS=1)"
    exit 1
fi
