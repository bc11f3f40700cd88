#!/bin/bash
# entmax with and without a change in the same run (PATCH: the change as `git diff` wrote it):
# the entmax test parts natively on this tree (-> test-native.txt), then tdacl-bench entmax
# rows (B4 H8 d64 causal prefill T 1024, 4096, 8192; decode B8 H16 Tk 32768; bf16 and f32)
# of both builds -> entmax-new.json, entmax-base.json, compare.txt.
# Usage (repository root): OUT=/tmp/out bash bench/gpu-entmax-cache.sh PATCH
. bench/gpu-setup.sh
build_reverted "$1"
native_parts entmax entmax-layouts
args=(--device nvidia --suite attention --kinds entmax --dtype bf16,f32 --T 1024,4096,8192)
/tmp/base/build/tdacl-bench "${args[@]}" --json "$OUT/entmax-base.json" >/dev/null 2>&1
build-gpu/tdacl-bench "${args[@]}" --json "$OUT/entmax-new.json" >"$OUT/entmax-new.txt" 2>&1
build-gpu/tdacl-bench --load "$OUT/entmax-new.json" --compare "$OUT/entmax-base.json" >"$OUT/compare.txt" 2>&1
cat "$OUT/compare.txt"
