#!/bin/bash
# `tdacl generate` with PoCL's default work-group method (the other tests run
# POCL_WORK_GROUP_METHOD=loops): the three device draws (greedy, top-k, all tokens) and the
# fused decode step.  A sampling kernel with barriers behind branches once crashed PoCL's
# default method only.  Kernels unoptimized like the other tests' (-cl-opt-disable): optimized,
# the cold test took 100 s of CI time against 19 s; attention_optimized and the main job's
# bench tests build optimized programs.
#   generate_default_pocl.sh path/to/tdacl SOURCE_DIR WORKDIR
set -euo pipefail
TDACL="$1"
SRC="$2"
WORK="$3"
rm -rf "$WORK"
mkdir -p "$WORK"
unset POCL_WORK_GROUP_METHOD POCL_WORK_GROUP_SPECIALIZATION
export TDACL_BUILD_OPTIONS=-cl-opt-disable
"$TDACL" make-model --config "$SRC/examples/models/tiny-tda-rope.json" --seed 4 --out "$WORK/m" >/dev/null
for args in "" "--temperature 0.8 --top-k 40" "--temperature 0.8"; do
    # shellcheck disable=SC2086 # args are options
    out=$(timeout 240 "$TDACL" generate --device pocl --model "$WORK/m" --tokens 5,9,200 --max-new 6 $args 2>/dev/null)
    [[ "$out" =~ ^5,9,200(,[0-9]+){6}$ ]] || { echo "generate $args printed '$out'"; exit 1; }
done
echo "three draws, six tokens each"
