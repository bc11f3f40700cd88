#!/bin/bash
# tdacl-bench interrupted by Ctrl-C (SIGINT) mid-run, as a user would: the rows measured so far
# were printed as they finished, the progress line counted i/N with an estimate, and the JSON
# and CSV hold exactly those rows (valid, marked unfinished); the exit status is 130.
#   bench_interrupt.sh path/to/tdacl-bench WORKDIR
set -uo pipefail
BENCH="$1"
WORK="$2"
rm -rf "$WORK"
mkdir -p "$WORK"
fail() { echo "FAIL: $*"; sed 's/^/  out | /' "$WORK/out" | tail -30; tr '\r' '\n' <"$WORK/err" | sed 's/^/  err | /' | tail -20; exit 1; }

# 16 rows of at least 0.3 s each: far more than the time it takes to see the first three
"$BENCH" --suite attention --kinds tra --dtype f32 --beta 1 --B 1 --H 1 --no-decode --min-ms 300 --progress \
    --T 64,72,80,88,96,104,112,120,128,136,144,152,160,168,176,184 \
    --json "$WORK/run.json" --csv "$WORK/run.csv" >"$WORK/out" 2>"$WORK/err" &
pid=$!
for _ in $(seq 1 1200); do # up to 120 s for the first compile and three rows
    [ "$(grep -c "^0 .*attention" "$WORK/out" 2>/dev/null)" -ge 3 ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || fail "exit status $rc, wanted 130"
printed=$(grep -c '^0 .*attention .*tra' "$WORK/out")
[ "$printed" -ge 3 ] && [ "$printed" -lt 16 ] || fail "$printed rows printed (wanted 3..15: the run was stopped)"
grep -q 'interrupted' "$WORK/out" || fail "no word of the interruption on stdout"
tr '\r' '\n' <"$WORK/err" | grep -Eq '\] 3/16 ~[0-9]+ s left' || fail "no 'i/N ~x s left' on the progress line"
python3 - "$WORK/run.json" "$printed" <<'PY' || fail "the JSON does not hold the printed rows"
import json, sys
j = json.load(open(sys.argv[1]))
rows = [r for r in j["rows"] if r["suite"] == "attention"]
assert j["complete"] is False and j["interrupted"] is True, (j.get("complete"), j.get("interrupted"))
assert len(rows) == int(sys.argv[2]), (len(rows), sys.argv[2])
assert all(r["time_ms"]["median"] > 0 for r in rows)
PY
csv_rows=$(($(wc -l <"$WORK/run.csv") - 1))
json_rows=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rows"]))' "$WORK/run.json")
[ "$csv_rows" = "$json_rows" ] || fail "CSV has $csv_rows rows, JSON $json_rows"
# a saved unfinished run says so when loaded
"$BENCH" --load "$WORK/run.json" >"$WORK/out" 2>"$WORK/err" || fail "--load of the interrupted run failed"
grep -q 'holds an unfinished run (interrupted)' "$WORK/err" || fail "--load did not say the run is unfinished"
echo "ok: stopped after $printed of 16 rows; exit 130; JSON and CSV hold them"

# a bare run (every suite, every T) warns with its size before measuring; Ctrl-C then ends it
"$BENCH" --json "$WORK/bare.json" >"$WORK/out" 2>"$WORK/err" &
pid=$!
for _ in $(seq 1 600); do
    grep -q 'timed rows on' "$WORK/err" 2>/dev/null && break
    sleep 0.1
done
kill -INT "$pid"
wait "$pid"
rc=$?
grep -Eq '^tdacl-bench: [0-9]+ timed rows on [0-9]+ device\(s\): expect .*--quick measures a representative subset' "$WORK/err" ||
    fail "no warning before a bare run"
[ "$rc" = 130 ] || fail "bare run: exit status $rc after Ctrl-C, wanted 130"
python3 -c 'import json,sys; j = json.load(open(sys.argv[1])); assert j["interrupted"] is True' "$WORK/bare.json" ||
    fail "bare run: the JSON is not a valid interrupted run"
echo "ok: a bare run warns first and stops on Ctrl-C"
