#!/bin/bash
# The tensor-core GEMM's tiles and copy pipeline depth (GMM_STAGES: bf16 a copied into the tiles
# as it is) on the GPU host of ../shared/gpu-host:   bash bench/gpu-gemm-stages.sh
# For each candidate: a user tuning file naming it for the class, then TDACL_PRECISION=bf16
# tdacl-bench --suite gemm (bf16 rows: f32 a at precision bf16, two stages; bf16act rows: bf16
# a, w and c) -> gemm-N.json; the default (shipped entries) -> gemm-default.json; a table of
# the tensor-core rows' medians per candidate -> stages.txt.
. bench/gpu-setup.sh
CANDIDATES=(
    "GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=64 GMM_BN=128 GMM_WM=1 GMM_WN=4 GMM_BK=16 GMM_STAGES=4"
    "GMM_BM=64 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=2"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=2 GMM_BK=16 GMM_STAGES=3"
    "GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=16 GMM_STAGES=3"
    "GMM_BM=128 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=3"
    "GMM_BM=64 GMM_BN=64 GMM_WM=2 GMM_WN=2 GMM_BK=32 GMM_STAGES=4"
)
TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm --json "$OUT/gemm-default.json" >/dev/null 2>&1
for i in "${!CANDIDATES[@]}"; do
    echo "gemm_mma class=nvidia-sm_90 : ${CANDIDATES[$i]}" >/tmp/stages.tdb
    TDACL_TUNING_FILE=/tmp/stages.tdb TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm \
        --json "$OUT/gemm-$i.json" >"$OUT/gemm-$i.txt" 2>&1
done
python3 - "$OUT" "${CANDIDATES[@]}" <<'PY' | tee "$OUT/stages.txt"
import json, sys
out, cands = sys.argv[1], ["default (shipped)"] + sys.argv[2:]
files = ["gemm-default.json"] + ["gemm-%d.json" % i for i in range(len(cands) - 1)]
keys, table = [], []
for f in files:
    rows = {}
    for r in json.load(open("%s/%s" % (out, f)))["rows"]:
        if r["suite"] == "gemm" and r["shape"]["M"] > 8 and r.get("impl", "").startswith("tdacl-mma"):
            k = "%s %dx%dx%d" % (r["dtype"], r["shape"]["M"], r["shape"]["N"], r["shape"]["K"])
            rows[k] = r["time_ms"]["median"]
            if k not in keys: keys.append(k)
    table.append(rows)
print("ms, tensor-core GEMM rows (bf16: f32 a rounded, two stages; bf16act: bf16 a, w, c)")
for c, rows in zip(cands, table):
    print("%s\n  " % c + "  ".join("%s %.4f" % (k, rows[k]) if k in rows else "%s -" % k for k in keys))
    print("  sum bf16act %.4f  sum bf16 %.4f" % (sum(v for k, v in rows.items() if k.startswith("bf16act")),
                                               sum(v for k, v in rows.items() if k.startswith("bf16 "))))
PY
exit 0
