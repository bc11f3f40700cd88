#!/bin/bash
# The `tdacl` command line against hostile and careless input (issue: hardening).  Every
# case ran once as a crash, a hang, a silently wrong answer or an empty message; each must
# now end with the stated exit status and a message naming the problem, within a timeout.
#   cli_hardening.sh path/to/tdacl SOURCE_DIR WORKDIR
set -uo pipefail
TDACL="$1"
SRC="$2"
WORK="$3"
rm -rf "$WORK"
mkdir -p "$WORK"
fails=0
n=0

# expect NAME RC REGEX -- command...   (REGEX is matched against stdout+stderr; RC "nz" = non-zero)
expect() {
    local name="$1" want="$2" regex="$3"
    shift 4
    n=$((n + 1))
    timeout 120 "$@" >"$WORK/out" 2>&1
    local rc=$?
    local ok=1
    if [ "$want" = nz ]; then [ "$rc" -ne 0 ] || ok=0; else [ "$rc" -eq "$want" ] || ok=0; fi
    [ "$rc" -ge 124 ] && ok=0 # timeout, or killed by a signal (a crash is 128 + signal)
    grep -Eq -- "$regex" "$WORK/out" || ok=0
    if [ "$ok" = 1 ]; then
        echo "ok   $name (rc $rc)"
    else
        echo "FAIL $name: rc $rc (wanted $want), output:"
        sed 's/^/     | /' "$WORK/out" | head -20
        echo "     (wanted /$regex/)"
        fails=$((fails + 1))
    fi
}

M="$WORK/tiny"           # learned positions, vocabulary 256
R="$WORK/rope-huge"      # RoPE with n_positions 16,777,216
"$TDACL" make-model --config "$SRC/examples/models/tiny-softmax.json" --seed 1 --out "$M" >/dev/null || exit 1
sed 's/"n_positions": 128/"n_positions": 16777216/' "$SRC/examples/models/tiny-tda-rope.json" >"$WORK/rope.json"
"$TDACL" make-model --config "$WORK/rope.json" --seed 2 --out "$R" >/dev/null || exit 1

# 1. --tokens on a byte-level model once segfaulted (fwrite of a NULL prompt); the ids come
#    back as ids, the prompt's first
expect tokens-byte-model 0 '^104,105,[0-9]+,[0-9]+$' -- \
    sh -c '"$0" generate --model "$1" --tokens 104,105 --max-new 2 2>/dev/null' "$TDACL" "$M"
expect prompt-text 0 '^hi' -- "$TDACL" generate --model "$M" --prompt hi --max-new 2
# 4. --max-new near INT64_MAX overflowed the bound check
expect max-new-huge 2 "bad value '9223372036854775807' for --max-new" -- \
    "$TDACL" generate --model "$M" --tokens 1 --max-new 9223372036854775807
expect max-new-context 1 'needs a context of 2147483647 positions' -- \
    "$TDACL" generate --model "$M" --tokens 1,2 --max-new 2147483646
# 8. sampling parameters are checked before any work, with a message
for t in nan inf -inf 1e300 -1 ''; do
    expect "temperature-$t" 2 "bad value '$t' for --temperature: expected a finite number" -- \
        "$TDACL" generate --model "$M" --tokens 1 --temperature "$t"
done
# 9. --top-k beyond int was truncated (4294967297 became 1)
for k in 2147483648 4294967297 -1; do
    expect "top-k-$k" 2 "bad value '$k' for --top-k" -- "$TDACL" generate --model "$M" --tokens 1 --top-k "$k"
done
# 15. token lists are parsed strictly
for t in '1,2,' '1, 2' '+5' ',1' '1,,2' '' '99999999999' '0x10'; do
    expect "tokens-'$t'" 2 "bad value '.*' for --tokens" -- "$TDACL" forward --model "$M" --tokens "$t" --out "$WORK/l.npy"
done
# 10. an option a command does not use is an error; --context is real
expect forward-max-new 2 'option --max-new does not apply' -- \
    "$TDACL" forward --model "$M" --tokens 1,2 --out "$WORK/l.npy" --max-new 3
expect generate-out 2 'option --out does not apply' -- "$TDACL" generate --model "$M" --tokens 1 --out "$WORK/x"
expect context-small 2 'context 2 is smaller than the 3 positions' -- \
    "$TDACL" forward --model "$M" --tokens 1,2,3 --out "$WORK/l.npy" --context 2
expect context-learned 1 'exceeds n_positions 128' -- \
    "$TDACL" forward --model "$M" --tokens 1,2,3 --out "$WORK/l.npy" --context 129
#     a RoPE model with 16M positions sizes its cache by the run (it allocated 2.2 GB up front)
expect rope-huge-positions 0 'logits \[3, 256\]' -- "$TDACL" forward --model "$R" --tokens 1,2,3 --out "$WORK/l.npy"
# --activations: bf16 activations and KV cache (the attention runs on bf16 q/k/v); only f32 / bf16
expect activations-bf16 0 'attention softmax bf16' -- \
    env TDACL_LOG=debug "$TDACL" forward --model "$M" --tokens 1,2,3 --out "$WORK/l.npy" --dtype bf16 --activations bf16
expect activations-generate 0 '^1,2,[0-9]+,[0-9]+$' -- \
    sh -c '"$0" generate --model "$1" --tokens 1,2 --max-new 2 --activations bf16 2>/dev/null' "$TDACL" "$M"
expect activations-f16 2 "bad value 'f16' for --activations: expected f32 or bf16" -- \
    "$TDACL" forward --model "$M" --tokens 1,2,3 --out "$WORK/l.npy" --activations f16
# TDACL_PROFILE=1 prints the kernel table without TDACL_LOG
expect profile-table 0 'profile: forward|profile: attention_fwd|profile: gemm' -- \
    env -u TDACL_LOG TDACL_PROFILE=1 "$TDACL" forward --model "$M" --tokens 1,2,3 --out "$WORK/l.npy"
# tokenize: a directory without a tokenizer is named; one of --text and --ids; no device
expect tokenize-none 1 'has no tokenizer.json and no vocab.json' -- "$TDACL" tokenize --model "$M" --text hi
expect tokenize-both 2 'exactly one of --text and --ids' -- "$TDACL" tokenize --model "$M" --text hi --ids 1
expect tokenize-device 2 'option --device does not apply' -- "$TDACL" tokenize --model "$M" --text hi --device pocl
# 14. make-model blames the file it was given
expect make-model-bad-config 1 '/etc/passwd' -- "$TDACL" make-model --config /etc/passwd --out "$WORK/mm1"
[ -e "$WORK/mm1/config.json" ] && { echo "FAIL make-model wrote $WORK/mm1/config.json from a bad config"; fails=$((fails + 1)); }
# 6. a FIFO in place of the weights is refused at once, not waited on
mkdir -p "$WORK/fifo"
cp "$M/config.json" "$WORK/fifo/"
mkfifo "$WORK/fifo/model.safetensors"
expect fifo-weights 1 'not a regular file' -- "$TDACL" forward --model "$WORK/fifo" --tokens 1 --out "$WORK/l.npy"
# 2. attention positions: offset + Tq must fit
python3 - "$WORK" <<'EOF'
import struct, sys
def npy(path, shape):
    n = 1
    for s in shape: n *= s
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join("%d, " % s for s in shape)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%df" % n, *[((i * 37) % 11 - 5) * 0.1 for i in range(n)]))
for x in ("q", "k", "v"):
    npy(sys.argv[1] + "/%s.npy" % x, (1, 2, 4, 8))
npy(sys.argv[1] + "/th.npy", (2, 3))  # topk_theta: thresholds of 2 heads, 3 row ids
with open(sys.argv[1] + "/q.npy", "rb") as f:
    b = bytearray(f.read())
b[-4:] = struct.pack("<f", float("nan"))
with open(sys.argv[1] + "/qnan.npy", "wb") as f:
    f.write(b)
EOF
A=(attention --kind tra --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o.npy")
expect offset-int64-max 1 'exceeds the largest position' -- "$TDACL" "${A[@]}" --offset 9223372036854775807
expect offset-decode 1 'exceeds the largest position' -- "$TDACL" "${A[@]}" --offset 2147483645 --path decode
expect offset-fine 0 'written to' -- "$TDACL" "${A[@]}" --offset 1000
# 12. non-finite inputs are computed as given, with one warning
expect nan-input 0 'warning: .*qnan.npy holds 1 non-finite value' -- \
    "$TDACL" attention --kind tra --q "$WORK/qnan.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o.npy"
# entmax through the CLI: its own kernel, named in the debug log; a bad --temp or --alpha is refused
TDACL_LOG=debug expect entmax-cli 0 'took attention.entmax' -- "$TDACL" attention --kind entmax --alpha 2 \
    --temp 1,0.5,1 --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o-ent.npy"
expect entmax-bad-temp 2 'bad value' -- "$TDACL" attention --kind entmax --temp 1,2 --q "$WORK/q.npy" \
    --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o-ent2.npy"
expect entmax-bad-alpha 1 'desc.alpha must be in' -- "$TDACL" attention --kind entmax --alpha 1 --q "$WORK/q.npy" \
    --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o-ent3.npy"
# topk_theta through the CLI: its kernel, its tables from .npy, its fields; a missing or
# misshapen table and a bad --sdc are refused
TDACL_LOG=debug expect topk-cli 0 'took attention.topk_theta' -- "$TDACL" attention --kind topk_theta \
    --thresholds "$WORK/th.npy" --sdc exact --vmc 1 --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" \
    --out "$WORK/o-topk.npy"
expect topk-offline 0 'written to' -- "$TDACL" attention --kind topk_theta --thresholds "$WORK/th.npy" --sdc offline \
    --sdc-log-mass "$WORK/th.npy" --theta-post 0 --sdc-gamma 0.1 --q "$WORK/q.npy" --k "$WORK/k.npy" \
    --v "$WORK/v.npy" --out "$WORK/o-topk2.npy"
expect topk-no-thresholds 1 'kind topk_theta needs tensors.thresholds' -- "$TDACL" attention --kind topk_theta \
    --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o-topk3.npy"
expect topk-4d-thresholds 1 'q.npy has 4 dims; expected \[H,R\]' -- "$TDACL" attention --kind topk_theta \
    --thresholds "$WORK/q.npy" --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o-topk4.npy"
expect topk-bad-sdc 2 "bad value 'some' for --sdc" -- "$TDACL" attention --kind topk_theta --sdc some \
    --thresholds "$WORK/th.npy" --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" --out "$WORK/o-topk5.npy"
expect topk-post-sdc 1 'pre-softmax thresholds only' -- "$TDACL" attention --kind topk_theta --theta-post 1 \
    --sdc exact --thresholds "$WORK/th.npy" --q "$WORK/q.npy" --k "$WORK/k.npy" --v "$WORK/v.npy" \
    --out "$WORK/o-topk6.npy"
# Top-theta models: make-model's placeholder thresholds, tdacl calibrate (ids or text, a fitted
# function), the result run through --thresholds; bad options and inputs refused by name
TK="$WORK/tiny-topk"
sed 's/"n_positions": 128/"n_positions": 24/' "$SRC/examples/models/tiny-topk-theta.json" >"$WORK/topk.json"
expect topk-make-model 0 '^wrote ' -- "$TDACL" make-model --config "$WORK/topk.json" --seed 3 --out "$TK"
expect topk-placeholder 0 '"first_row": 24' -- cat "$TK/thresholds.json"
expect topk-model-runs 0 '^logits' -- "$TDACL" forward --model "$TK" --tokens 1,2,3,4 --out "$WORK/lt.npy"
python3 -c 'print(",".join(str((i * 7) % 256) for i in range(70)))' >"$WORK/ids.txt"
printf 'Top-theta keeps the keys whose scores pass a calibrated threshold.\n' >"$WORK/cal.txt"
expect calibrate-ids 0 'thresholds of 2 layers x 2 heads \(70 tokens\) written to' -- \
    "$TDACL" calibrate --model "$TK" --tokens "$WORK/ids.txt" --k 4 --seq-len 24 --offset-std 0.5 --out "$TK/thresholds.json"
expect calibrate-file 0 '"offset_std":[[:space:]]*0.5' -- cat "$TK/thresholds.json"
expect calibrate-run 0 '^logits' -- "$TDACL" forward --model "$TK" --tokens 1,2,3,4,5,6,7,8,9 --out "$WORK/lt.npy"
expect calibrate-text-fit 0 'written to' -- "$TDACL" calibrate --model "$M" --text "$WORK/cal.txt" --k-per-layer 3,5 \
    --seq-len 32 --fit 2 --post 1 --out "$WORK/post.json"
expect calibrate-fit-file 0 '"mode":[[:space:]]*"post"' -- cat "$WORK/post.json"
expect thresholds-softmax-model 0 '^logits' -- "$TDACL" forward --model "$M" --tokens 1,2,3,4,5 --thresholds \
    "$WORK/post.json" --vmc 1 --out "$WORK/lt.npy"
expect thresholds-post-sdc 1 'post-softmax thresholds, which take no SDC' -- "$TDACL" forward --model "$M" \
    --tokens 1,2,3 --thresholds "$WORK/post.json" --sdc exact --out "$WORK/lt.npy"
expect thresholds-bad-sdc 2 "bad value 'all' for --sdc" -- "$TDACL" forward --model "$M" --tokens 1,2 \
    --thresholds "$WORK/post.json" --sdc all --out "$WORK/lt.npy"
expect thresholds-bad-vmc 2 "bad value '2' for --vmc" -- "$TDACL" generate --model "$M" --tokens 1,2 --vmc 2
sed 's/"n_layer": 2/"n_layer": 3/' "$SRC/examples/models/tiny-softmax.json" >"$WORK/three.json"
"$TDACL" make-model --config "$WORK/three.json" --seed 4 --out "$WORK/three" >/dev/null || exit 1
expect thresholds-wrong-model 1 'does not match the model \(3 layers, 2 heads\)' -- "$TDACL" forward --model \
    "$WORK/three" --tokens 1,2 --thresholds "$WORK/post.json" --out "$WORK/lt.npy"
expect thresholds-tda-model 1 'desc.thresholds applies to softmax and topk_theta models, not tda' -- "$TDACL" forward \
    --model "$R" --tokens 1,2 --thresholds "$WORK/post.json" --out "$WORK/lt.npy"
expect thresholds-not-json 1 'thresholds.json|ids.txt' -- "$TDACL" forward --model "$M" --tokens 1,2 \
    --thresholds "$WORK/ids.txt" --out "$WORK/lt.npy"
expect calibrate-no-k 2 'k K is required' -- "$TDACL" calibrate --model "$M" --tokens "$WORK/ids.txt" --out "$WORK/x.json"
expect calibrate-both 2 'exactly one of --tokens FILE and --text FILE' -- "$TDACL" calibrate --model "$M" --k 2 \
    --tokens "$WORK/ids.txt" --text "$WORK/cal.txt" --out "$WORK/x.json"
expect calibrate-bad-fit 2 "bad value '4' for --fit" -- "$TDACL" calibrate --model "$M" --k 2 --fit 4 \
    --tokens "$WORK/ids.txt" --out "$WORK/x.json"
expect calibrate-k-list 2 '--k-per-layer gives 3 values for 2 layers' -- "$TDACL" calibrate --model "$M" \
    --k-per-layer 1,2,3 --tokens "$WORK/ids.txt" --out "$WORK/x.json"
expect calibrate-bad-ids 2 'byte 0 is not part of a token id' -- "$TDACL" calibrate --model "$M" --k 2 \
    --tokens "$WORK/cal.txt" --out "$WORK/x.json"
expect calibrate-tra 1 'thresholds are calibrated on softmax' -- "$TDACL" calibrate --model "$R" --k 2 --seq-len 8 \
    --tokens "$WORK/ids.txt" --out "$WORK/x.json"
expect calibrate-k-too-big 1 'no calibration sequence is longer than k = 50' -- "$TDACL" calibrate --model "$M" --k 50 \
    --seq-len 20 --tokens "$WORK/ids.txt" --out "$WORK/x.json"
[ -e "$WORK/x.json" ] && { echo "FAIL calibrate wrote $WORK/x.json on an error"; fails=$((fails + 1)); }
# 14. a tuning file named by the user that cannot be read is reported
TDACL_TUNING_FILE=/dev/zero expect tuning-dev-zero 0 'tuning database /dev/zero cannot be read \(not a regular file\)' -- \
    "$TDACL" "${A[@]}"
TDACL_TUNING_FILE="$WORK/none.tdb" expect tuning-missing 0 'none.tdb cannot be read' -- "$TDACL" "${A[@]}"

# the variant choice is visible: a row excluded by TDACL_VARIANT says so at debug level; the
# emulated mma row names its portable body; naming only a row that cannot run the call (f32
# storage on the mma row) is an error with the reason, not a silent fallback
TDACL_LOG=debug TDACL_MMA_EMULATE=1 TDACL_VARIANT=attention.simt expect variant-simt 0 \
    'attention.mma: excluded by TDACL_VARIANT; took attention.simt' -- "$TDACL" "${A[@]}" --dtype bf16
TDACL_LOG=debug TDACL_MMA_EMULATE=1 expect variant-mma-emulated 0 'took attention.mma \(portable fragment body\)' -- \
    "$TDACL" "${A[@]}" --dtype bf16
TDACL_MMA_EMULATE=1 TDACL_VARIANT=attention.mma expect variant-mma-refused 1 \
    'no variant runs this call \(attention.mma_views: two-view kinds only; attention.mma: f32 storage runs exact on the FP32 lanes \(precision tf32 or bf16 takes the matrix units\); attention.simt: excluded by TDACL_VARIANT; attention.entmax: entmax only; attention.topk_theta: topk_theta only\)' -- \
    "$TDACL" "${A[@]}"
# the Intel/AMD bodies: an emulated one is named; an unknown TDACL_MMA_EMULATE value is refused
# by the mma row with the reason; `tdacl devices` names what the matrix-unit rows run
TDACL_LOG=debug TDACL_MMA_EMULATE=wmma expect variant-mma-wmma 0 'took attention.mma \(AMD WMMA 16x16x16, emulated\)' -- \
    "$TDACL" "${A[@]}" --dtype bf16
TDACL_LOG=debug TDACL_MMA_EMULATE=dpas4 expect variant-mma-bad-emulate 0 \
    "attention.mma: TDACL_MMA_EMULATE='dpas4' is not 1, portable, dpas8, dpas16, mfma, wmma or wgmma; took attention.simt" -- \
    "$TDACL" "${A[@]}" --dtype bf16
TDACL_MMA_EMULATE=dpas16 expect devices-emulated 0 'matrix units: none; the mma kernels run through the Intel DPAS sub-group 16, emulated' -- \
    "$TDACL" devices
TDACL_MMA_EMULATE=wgmma expect devices-emulated-wgmma 0 "the mma kernels run through the portable fragment body, with Hopper's warpgroup products" -- \
    "$TDACL" devices
# conventions: --version, help COMMAND, --opt=value, one dtype spelling, no silent overwrite
expect version-flag 0 '^libtdacl [0-9]' -- "$TDACL" --version
expect help-command 0 'usage: tdacl attention' -- "$TDACL" help attention
expect opt-equals 0 'written to' -- "$TDACL" attention --kind=tra --q="$WORK/q.npy" --k="$WORK/k.npy" \
    --v="$WORK/v.npy" --out="$WORK/o-eq.npy" --dtype=f32
expect opt-equals-bad 2 "unknown option '--bogus'" -- "$TDACL" attention --bogus=1 --kind tra
# an unknown option last on the line is unknown, not "needs a value"
for c in attention tune make-model forward generate tokenize calibrate; do
    expect "unknown-last-$c" 2 "tdacl $c: unknown option '--bogus'" -- "$TDACL" "$c" --bogus
done
expect dtype-spelling 0 'written to' -- "$TDACL" attention --kind tra --q "$WORK/q.npy" --k "$WORK/k.npy" \
    --v "$WORK/v.npy" --out "$WORK/o-fp.npy" --dtype fp32
expect make-model-exists 2 'already holds a checkpoint; --force replaces it' -- \
    "$TDACL" make-model --config "$SRC/examples/models/tiny-softmax.json" --out "$M"
expect make-model-force 0 '^wrote ' -- "$TDACL" make-model --config "$SRC/examples/models/tiny-softmax.json" --seed 1 \
    --out "$M" --force
# the first compile is announced on a terminal only (script(1) gives the command a TTY), once,
# and not when the cache already has the programs; TDACL_LOG=info logs it anywhere
fresh="$WORK/fresh-cache"
rm -rf "$fresh"
FWD=("$TDACL" forward --model "$M" --tokens 1,2,3 --out "$WORK/l.npy")
expect compile-note-tty 0 'tdacl: compiling kernels for .*; cached for next time' -- \
    env -u TDACL_LOG TDACL_CACHE_DIR="$fresh" script -qec "${FWD[*]}" /dev/null
[ "$(grep -c 'compiling kernels' "$WORK/out")" = 1 ] || { echo "FAIL compile-note-tty: announced more than once"; fails=$((fails + 1)); }
expect compile-note-cached 0 '^logits' -- env -u TDACL_LOG TDACL_CACHE_DIR="$fresh" script -qec "${FWD[*]}" /dev/null
grep -q 'compiling kernels' "$WORK/out" && { echo "FAIL compile-note-cached: announced with a warm cache"; fails=$((fails + 1)); }
rm -rf "$fresh"
expect compile-note-pipe 0 '^logits' -- env -u TDACL_LOG TDACL_CACHE_DIR="$fresh" "${FWD[@]}"
grep -q 'compiling kernels' "$WORK/out" && { echo "FAIL compile-note-pipe: announced into a pipe"; fails=$((fails + 1)); }
rm -rf "$fresh"
expect compile-note-info 0 'tdacl info: compiling kernels for .*; cached for next time in ' -- \
    env TDACL_LOG=info TDACL_CACHE_DIR="$fresh" "${FWD[@]}"

# the matrix units the device offers to attention are named (none on a CPU)
expect devices-matrix-units 0 'matrix units: (none used|mma.sync)' -- "$TDACL" devices

echo "$((n - fails)) passed, $fails failed"
[ "$fails" -eq 0 ]
