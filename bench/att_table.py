"""Tensor-core attention rows against the anchors from one GPU run's files: OUT/anchors-dD.json
(bench/anchors/anchors.py: PyTorch SDPA bf16 with the backend it picks -- cuDNN's sm90 kernel on
an H200 with torch 2.11 -- and, where the file has them, FlashAttention-2 itself, SDPA held to its
flash backend) and OUT/att-TAG-dD.json (tdacl-bench), for d in 64 and 128.  One line a prefill
row: the run's label (TAG, or LABEL of TAG=LABEL), kind, d, T, ms, the ratios to SDPA and to
FA2 at that T and d, and the tuning parameters the row ran with.  (Files written before
2026-11-28's second session have SDPA rows only, which their tables called FA2.)
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
    anchor = lambda impl: {(r["shape"]["Tq"], r["shape"]["d"]): r["time_ms"]["median"] for d in (64, 128)
                           for r in rows("%s/anchors-d%d.json" % (out, d)) if r["impl"] == impl and r["dtype"] == "bf16"}
    sdpa, fa = anchor("pytorch-sdpa"), anchor("fa2")
    print("ms, bf16 B4 H8 causal; in the same run, SDPA bf16 (its default backend):", sdpa)
    print("FlashAttention-2 (SDPA's flash backend):", fa)
    for d in (64, 128):
        for tag, label in runs:
            for r in rows("%s/att-%s-d%d.json" % (out, tag, d)):
                if r.get("path") != "prefill":
                    continue
                t, ms, tun = r["shape"]["Tq"], r["time_ms"]["median"], r.get("tuning", {})
                a, f = sdpa.get((t, d)), fa.get((t, d))
                print("%-7s %-13s d%-4d T%-6d %.4f%-13s%-12s %s (%s)" % (label or tag, r["name"], d, t, ms,
                                                                       "  %.2fx SDPA" % (ms / a) if a else "",
                                                                       "  %.2fx FA2" % (ms / f) if f else "",
                                                                       tun.get("params"), tun.get("source")))


if __name__ == "__main__":
    main()
