#!/bin/bash
# The tensor-core GEMM's whole-tile copies and paired epilogue stores, before and after, and a
# sweep of tiles after it, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-gemm-whole.sh PATCH      (PATCH: the change as `git diff` wrote it)
# -> gemm-{new,base}.json, gemm-compare.txt, matmul-anchors.json, gemm-vs-torch.txt (shipped
# entries), then per candidate gemm-N.json and the table sweep.txt (bf16act rows: bf16 a, w, c).
. bench/gpu-setup.sh
build_reverted "$1"
gemm_vs_base_and_torch
CANDIDATES=(
    "GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=64 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=128 GMM_WM=4 GMM_WN=2 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=64 GMM_BN=256 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=4"
    "GMM_BM=128 GMM_BN=64 GMM_WM=4 GMM_WN=1 GMM_BK=32 GMM_STAGES=3"
)
for i in "${!CANDIDATES[@]}"; do
    echo "gemm_mma class=nvidia-sm_90 : ${CANDIDATES[$i]}" >/tmp/cand.tdb
    TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm \
        --json "$OUT/gemm-$i.json" >"$OUT/gemm-$i.txt" 2>&1
done
python3 - "$OUT" "${CANDIDATES[@]}" <<'PY' | tee "$OUT/sweep.txt"
import json, sys
out, cands = sys.argv[1], sys.argv[2:]
print("ms, tensor-core GEMM bf16act rows (bf16 a, w, c); [user] = the candidate ran, else refused")
for i, c in enumerate(cands):
    rows = [r for r in json.load(open("%s/gemm-%d.json" % (out, i)))["rows"]
            if r["suite"] == "gemm" and r["dtype"] == "bf16act" and r["shape"]["M"] > 8]
    src = set(r.get("tuning", {}).get("source", "") for r in rows)
    print("%s [%s]\n  " % (c, ",".join(sorted(src))) + "  ".join(
        "%dx%dx%d %.4f" % (r["shape"]["M"], r["shape"]["N"], r["shape"]["K"], r["time_ms"]["median"]) for r in rows))
    print("  sum %.4f" % sum(r["time_ms"]["median"] for r in rows))
PY
exit 0
