#!/bin/bash
# The project's single test command (CI runs it through .ci/run):
#   0. the Debian packages of tools/packages.txt and tools/packages-test.txt still missing
#      (tools/apt-install.sh, no Recommends), Intel's offline compiler unpacked into the user's cache
#      (tools/fetch-ocloc.sh), the Python test tools of tools/requirements-test.txt (PyPI) in .venv-test/, once
#   1. Release build with warnings as errors (build/), every test except the Oclgrind ones
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), the same tests but
#      the Python ones (they load the library into an uninstrumented interpreter) and the offline
#      compilation (its work is the vendor compiler's, not ours), leak
#      checking on (third-party leaks suppressed by tools/lsan.supp); tests that failed only by
#      LeakSanitizer's tracer crashing at exit run once more
#   3. install the Release build into a temporary prefix and build + run examples/hello
#      against it through find_package(tdacl) and through pkg-config; pip install ./python
#      into a fresh virtual environment and import it
#   4. the tests labelled "oclgrind" (kernels under the Oclgrind simulator), if any
#   5. the libFuzzer targets (tools/fuzz.sh, clang build in build-fuzz/), $FUZZ_SECONDS
#      (default 10) seconds each, one per core at a time, on the safetensors, config.json, .npy, tuning-database,
#      cache-entry and command-line parsers
#   6. clang's static analyzer over the library, the CLI, the tuner and tdacl-bench (tools/analyze.sh,
#      build-analyze/): any report fails
# Any failure stops the script with a non-zero status.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"
SECONDS=0
TMP="$(mktemp -d "${TMPDIR:-/tmp}/tdacl-run-tests.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

step() { printf '\n==== [%4ds] %s\n' "$SECONDS" "$*"; }

# Runs ctest with the given arguments, keeps its output in $1 and fails when it fails.
run_ctest() {
    local log="$1"
    shift
    ctest "$@" 2>&1 | tee "$log"
}

# The ASan + UBSan tests.  LeakSanitizer's own stop-the-world tracer now and then crashes at a
# process's exit ("Tracer caught signal 11", then "LeakSanitizer has encountered a fatal
# error"; google/sanitizers#1353): not a leak report.  When every failed test failed that way,
# they run once more (their second run's summary joins the log); any other failure stands.
asan_ctest() {
    local log="$TMP/ctest-asan.log" failed crashes
    if run_ctest "$log" "$@"; then return 0; fi
    failed=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Failed\)' "$log" || true)
    crashes=$(grep -c 'LeakSanitizer has encountered a fatal error' "$log" || true)
    if [ "$failed" -gt 0 ] && [ "$failed" -eq "$crashes" ]; then
        echo "-- $failed test(s) failed by LeakSanitizer's tracer crash alone: running them once more"
        run_ctest "$TMP/ctest-asan-rerun.log" "$@" --rerun-failed || return 1
        grep -E 'tests passed' "$TMP/ctest-asan-rerun.log" | sed 's/^/rerun: /' >>"$log"
        return 0
    fi
    return 1
}

# ---- 0. Debian packages, then the Python test tools ----
step "Debian packages (tools/packages.txt, tools/packages-test.txt)"
bash tools/apt-install.sh tools/packages.txt tools/packages-test.txt

# ---- 0a. Intel's offline compiler for the offline_compile_intel_* tests (unpacked, not installed) ----
step "Intel offline compiler (tools/fetch-ocloc.sh)"
bash tools/fetch-ocloc.sh >/dev/null

# ---- 0b. Python test tools (PyPI, tools/requirements-test.txt) in .venv-test/ ----
step "Python test tools (.venv-test/)"
if ! .venv-test/bin/python -c 'import tokenizers, numpy, pytest, ml_dtypes' 2>/dev/null; then
    python3 -m venv .venv-test
    .venv-test/bin/pip install --quiet --disable-pip-version-check -r tools/requirements-test.txt
fi

# ---- 1. Release ----
step "Release build (build/)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTDACL_BUILD_TESTS=ON -DTDACL_WERROR=ON -DTDACL_TEST_PYTHON="$ROOT/.venv-test/bin/python"
cmake --build build -j"$JOBS"

step "Release tests"
run_ctest "$TMP/ctest-release.log" --test-dir build --output-on-failure -j"$JOBS" -LE oclgrind

# ---- 2. sanitizers ----
step "ASan + UBSan build (build-asan/)"
# the Release run's program cache: kernels (PoCL JIT, not instrumented) compile once
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTDACL_BUILD_TESTS=ON -DTDACL_SANITIZE=ON -DTDACL_WERROR=ON \
    -DTDACL_TEST_CACHE_DIR="$ROOT/build/tests/cache"
cmake --build build-asan -j"$JOBS"

step "ASan + UBSan tests"
ASAN_OPTIONS=detect_leaks=1 \
LSAN_OPTIONS="suppressions=$ROOT/tools/lsan.supp" \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    asan_ctest --test-dir build-asan --output-on-failure -j"$JOBS" -LE "oclgrind|python|offline|release-only"

# ---- 3. the installed package ----
step "install into a temporary prefix and build examples/hello against it"
PREFIX="$TMP/prefix"
cmake --install build --prefix "$PREFIX"
PC_DIR="$(dirname "$(find "$PREFIX" -name tdacl.pc -print -quit)")"
LIB_DIR="$(PKG_CONFIG_PATH="$PC_DIR" pkg-config --variable=libdir tdacl)"

echo "-- find_package(tdacl)"
cmake -S examples/hello -B "$TMP/hello-cmake" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX"
cmake --build "$TMP/hello-cmake" -j"$JOBS"
LD_LIBRARY_PATH="$LIB_DIR" "$TMP/hello-cmake/hello"

echo "-- pkg-config ($(PKG_CONFIG_PATH="$PC_DIR" pkg-config --cflags --libs tdacl))"
PKG_CONFIG_PATH="$PC_DIR" make -C examples/hello -f Makefile.pkgconfig OUT="$TMP/hello-pkgconfig"
LD_LIBRARY_PATH="$LIB_DIR" "$TMP/hello-pkgconfig"

echo "-- pip install ./python (builds libtdacl with CMake into the package)"
python3 -m venv "$TMP/pyvenv"
"$TMP/pyvenv/bin/pip" install --quiet --disable-pip-version-check ./python
(cd "$TMP" && "$TMP/pyvenv/bin/python" -c 'import tdacl; print("tdacl", tdacl.version(), "from", tdacl.__file__, "sees", len(tdacl.devices()), "device(s)")')

# ---- 4. Oclgrind ----
step "Oclgrind tests"
n_oclgrind="$(ctest --test-dir build -N -L oclgrind | sed -n 's/^Total Tests: *//p')"
if [ "${n_oclgrind:-0}" -gt 0 ]; then
    run_ctest "$TMP/ctest-oclgrind.log" --test-dir build -L oclgrind --output-on-failure -j"$JOBS" # one core each
else
    echo "no test carries the oclgrind label"
fi

# ---- 5. fuzzing ----
step "fuzz the parsers (tools/fuzz.sh, ${FUZZ_SECONDS:-10}s per target)"
tools/fuzz.sh "${FUZZ_SECONDS:-10}"

# ---- 6. static analysis ----
step "clang's static analyzer (tools/analyze.sh)"
tools/analyze.sh

step "summary"
for run in release asan oclgrind; do
    [ -f "$TMP/ctest-$run.log" ] || continue
    printf '%-9s %s | %s\n' "$run:" "$(grep -E 'tests passed' "$TMP/ctest-$run.log" | tail -1)" \
        "$(grep -E 'Total Test time' "$TMP/ctest-$run.log" | tail -1)"
done
echo "all steps passed in ${SECONDS}s"
