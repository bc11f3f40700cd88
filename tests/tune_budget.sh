#!/bin/bash
# `tdacl tune` keeps its budget and stops promptly on Ctrl-C, even while a candidate compiles
# (candidates compile in child processes that the tuner kills), and reports in words.
#   tune_budget.sh path/to/tdacl WORKDIR
# Uses the decode kernel of tra at d=32 (a few seconds per PoCL compile, 24 candidates).
set -uo pipefail
TDACL="$1"
WORK="$2"
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "FAIL: $*"; for f in "$WORK"/*.log; do echo "--- $f"; tail -20 "$f"; done; exit 1; }
TUNE=("$TDACL" tune --kernel attention_decode --kinds tra --dtype f32 --d 32 --T 256 --B 1 --H 1)
now() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); } # ms

# 1. the generic default is built and timed even past a tiny budget: it is the fallback
"${TUNE[@]}" --budget 0.001 --out "$WORK/a.tdb" >"$WORK/first.log" 2>&1 || fail "first run exited non-zero"
grep -q '1 tried before the 0.001 s budget ran out' "$WORK/first.log" || fail "first run: no budget report"
grep -q 'the generic default won' "$WORK/first.log" || fail "first run: no word that the generic default won"

# 2. a 3 s budget holds (the generic default is cached now); a compile running at the deadline is killed
t0=$(now)
"${TUNE[@]}" --budget 3 --out "$WORK/b.tdb" >"$WORK/budget.log" 2>&1 || fail "budget run exited non-zero"
t1=$(now)
ms=$((t1 - t0))
echo "budget run: $ms ms for a 3 s budget"
[ "$ms" -lt 15000 ] || fail "a 3 s budget took $ms ms"
grep -Eq 'tried before the 3 s budget ran out|valid; 24 tried \(all\)' "$WORK/budget.log" || fail "no budget report"
grep -Eq '\[2/24\]' "$WORK/budget.log" || fail "no i/N on the candidate lines"
grep -q '^attention_decode ' "$WORK/b.tdb" || fail "no entry written"

# 3. Ctrl-C while candidate 2 compiles in a child (fresh caches, ours and PoCL's, so the
#    compile takes seconds; long budget): out within 2 s, keeping the best so far
export TDACL_CACHE_DIR="$WORK/cache"
POCL_KERNEL_CACHE=0 "${TUNE[@]}" --budget 300 --out "$WORK/c.tdb" >"$WORK/ctrlc.log" 2>&1 &
pid=$!
for _ in $(seq 1 1800); do
    grep -q '\[2/24\]' "$WORK/ctrlc.log" 2>/dev/null && break
    sleep 0.1
done
grep -q '\[2/24\]' "$WORK/ctrlc.log" || { kill "$pid"; fail "candidate 2 never started"; }
t0=$(now)
kill -INT "$pid"
wait "$pid"
rc=$?
ms=$(($(now) - t0))
echo "Ctrl-C: exit $rc after $ms ms"
[ "$ms" -lt 2000 ] || fail "Ctrl-C took $ms ms to stop the tuner"
[ "$rc" = 0 ] || fail "exit status $rc after Ctrl-C (the best so far is kept: 0)"
grep -q 'before Ctrl-C' "$WORK/ctrlc.log" || fail "no word of the interruption"
grep -q '^attention_decode ' "$WORK/c.tdb" || fail "the best so far was not written"
pgrep -f "__prebuild .*$WORK/cache" >/dev/null && fail "a prebuild child outlived the tuner"
echo "PASS"
