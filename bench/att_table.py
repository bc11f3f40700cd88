"""Tensor-core attention rows against FlashAttention-2 from one GPU run's files: OUT/anchors-dD.json
(bench/anchors/anchors.py; its SDPA bf16 rows) and OUT/att-TAG-dD.json (tdacl-bench), for d in 64
and 128.  One line a prefill row: the run's label (TAG, or LABEL of TAG=LABEL), kind, d, T, ms,
the ratio to FA2 at that T and d, and the tuning parameters the row ran with.
    python3 bench/att_table.py OUT base ship t0="BN=64 NWARPS=4 MT=1 KSTAGES=2" ..."""
import json
import sys


def rows(path):
    try:
        return json.load(open(path))["rows"]
    except (OSError, ValueError):
        return []


def main():
    out, runs = sys.argv[1], [a.partition("=")[::2] for a in sys.argv[2:]]
    fa = {(r["shape"]["Tq"], r["shape"]["d"]): r["time_ms"]["median"] for d in (64, 128)
          for r in rows("%s/anchors-d%d.json" % (out, d)) if r["impl"] == "pytorch-sdpa" and r["dtype"] == "bf16"}
    print("ms, bf16 B4 H8 causal; FA2 (SDPA bf16) in the same run:", fa)
    for d in (64, 128):
        for tag, label in runs:
            for r in rows("%s/att-%s-d%d.json" % (out, tag, d)):
                if r.get("path") != "prefill":
                    continue
                t, ms, tun = r["shape"]["Tq"], r["time_ms"]["median"], r.get("tuning", {})
                f = fa.get((t, d))
                print("%-7s %-13s d%-4d T%-6d %.4f%-12s %s (%s)" % (label or tag, r["name"], d, t, ms,
                                                                  "  %.2fx FA2" % (ms / f) if f else "",
                                                                  tun.get("params"), tun.get("source")))


if __name__ == "__main__":
    main()
