#!/bin/bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs each for a bounded
# time on a copy of its seed corpus (fuzz/corpus/NAME), with AddressSanitizer and
# UndefinedBehaviorSanitizer.  Fails on the first crash, leak, sanitizer report, timeout or
# oversized allocation; the reproducer is kept in build-fuzz/artifacts/.  Targets run as many
# at a time as there are cores ($FUZZ_JOBS to change it).
#
#   tools/fuzz.sh [SECONDS_PER_TARGET]     default 60 (or $FUZZ_SECONDS)
#
# Reproduce a finding:  build-fuzz/fuzz/fuzz_safetensors build-fuzz/artifacts/safetensors/crash-...
# Inputs stay below 64 KiB and no single allocation may exceed 8 MiB (-malloc_limit_mb): a
# header length or shape that sized an allocation would show up as an out-of-memory crash.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECS="${1:-${FUZZ_SECONDS:-60}}"
CC_FUZZ="${FUZZ_CC:-clang}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"

if ! command -v "$CC_FUZZ" >/dev/null; then
    echo "fuzz.sh: $CC_FUZZ not found (apt-get install clang libclang-rt-14-dev)" >&2
    exit 1
fi

cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDACL_FUZZ=ON \
      -DTDACL_WERROR=ON -DTDACL_BUILD_TESTS=OFF -DTDACL_BUILD_BENCH=OFF -DTDACL_BUILD_SHARED=OFF >/dev/null
TARGETS=(safetensors config npy tdb cache_entry cli)
cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]/#/fuzz_}"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/tdacl-fuzz.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# One target: its own log; 0 when libFuzzer found nothing.
fuzz_one() {
    local name="$1" dict=()
    [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
    mkdir -p "$WORK/$name" "$BUILD/artifacts/$name"
    # The first corpus directory receives new inputs; the seed corpus is only read.
    "$BUILD/fuzz/fuzz_$name" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb=8 -max_len=65536 "${dict[@]}" -print_final_stats=1 \
        -artifact_prefix="$BUILD/artifacts/$name/" "$WORK/$name" "fuzz/corpus/$name" >"$WORK/$name.log" 2>&1
}

# report NAME STATUS: the statistics, or the log's tail and the reproducer's place
report() {
    local name="$1" status="$2"
    echo "==== fuzz_$name (${SECS}s)"
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$WORK/$name.log" >&2
        echo "fuzz.sh: fuzz_$name failed; reproducer in $BUILD/artifacts/$name/" >&2
        return 1
    fi
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$WORK/$name.log" || true
    echo "corpus: $(find "$WORK/$name" -type f | wc -l) new inputs"
}

# as many targets at a time as there are cores (each libFuzzer process uses one)
PARALLEL="${FUZZ_JOBS:-$(nproc)}"
bad=0
for ((i = 0; i < ${#TARGETS[@]}; i += PARALLEL)); do
    batch=("${TARGETS[@]:i:PARALLEL}")
    pids=()
    for name in "${batch[@]}"; do
        fuzz_one "$name" &
        pids+=($!)
    done
    for k in "${!batch[@]}"; do
        status=0
        wait "${pids[$k]}" || status=$?
        report "${batch[$k]}" "$status" || bad=1
    done
    [ "$bad" -eq 0 ] || exit 1
done
echo "fuzz.sh: no findings"
