#!/bin/bash
# Top-theta decode against how many keys its thresholds keep (issue 14 part 5's sweep): B8 H16
# Tk 32768 d64, bf16 and f32, K = 16 .. 4096 keys a row (tdacl-bench --topk K), with our
# softmax decode in the same run (-> topk-K.json each, sweep.txt: time and V rows read).
# Usage (repository root): OUT=/tmp/out bash bench/gpu-topk-sweep.sh
. bench/gpu-setup.sh
build-gpu/tdacl-bench --device nvidia --suite attention --kinds softmax --dtype bf16,f32 --no-prefill \
    --json "$OUT/softmax.json" >"$OUT/softmax.txt" 2>&1
for k in 16 64 256 1024 4096; do
    build-gpu/tdacl-bench --device nvidia --suite attention --kinds topk_theta --dtype bf16,f32 --no-prefill \
        --topk "$k" --json "$OUT/topk-$k.json" >"$OUT/topk-$k.txt" 2>&1
done
python3 - "$OUT" <<'PY' | tee "$OUT/sweep.txt"
import json, sys
out = sys.argv[1]
soft = {r["dtype"]: r["time_ms"]["median"] for r in json.load(open(out + "/softmax.json"))["rows"] if r["name"] == "softmax"}
print("K      dtype  topk_theta ms  softmax ms  ratio  V rows read (of 32768 a row)")
for k in (16, 64, 256, 1024, 4096):
    for r in json.load(open("%s/topk-%d.json" % (out, k)))["rows"]:
        if r["name"] != "topk_theta":
            continue
        print("%-6d %-6s %13.4f %11.4f %6.3f  %.0f" % (k, r["dtype"], r["time_ms"]["median"], soft[r["dtype"]],
              r["time_ms"]["median"] / soft[r["dtype"]], (1 - r["sparsity"]) * 32768))
PY
