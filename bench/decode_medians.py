"""Medians over repeated tdacl-bench decode runs, for the bench/gpu-decode-*.sh scripts.

medians(out, label) reads out/decode-<label>-*.json and returns two dicts keyed by
(row name, dtype, context, batch): the median of the runs' median times (ms), and the median
host enqueue time a step (ms) where the row's note gives one.

python3 bench/decode_medians.py OUT A B [C] prints each row of B: A's ms ("-" where A has no such
row), B's ms, B / A, C's ms (when given), and the host enqueue times of A and B where the notes
give them.
"""
import glob
import json
import re
import statistics
import sys


def medians(out, label):
    rows, host = {}, {}
    for f in sorted(glob.glob(f"{out}/decode-{label}-*.json")):
        for r in json.load(open(f))["rows"]:
            sh = r["shape"]
            key = (r["name"], r["dtype"], sh["Tk"], sh["B"])
            rows.setdefault(key, []).append(r["time_ms"]["median"])
            m = re.search(r"host enqueue ([0-9.]+) ms", r.get("note", ""))
            if m:
                host.setdefault(key, []).append(float(m.group(1)))
    return ({k: statistics.median(x) for k, x in rows.items()},
            {k: statistics.median(x) for k, x in host.items()})


def compare(out, labels):
    (a, ah), (b, bh) = medians(out, labels[0]), medians(out, labels[1])
    c = medians(out, labels[2])[0] if len(labels) > 2 else None
    extra = f", {labels[2]} ms" if c is not None else ""
    print(f"row (name dtype ctx B): {labels[0]} ms, {labels[1]} ms, ratio{extra} (medians of the runs' medians); "
          f"host enqueue ms a step, {labels[0]} / {labels[1]}")
    for k in sorted(b):  # a row only B has (a new row): "-" for A
        h = f"   host {ah[k]:.3f} / {bh[k]:.3f}" if k in ah and k in bh else ""
        q = "" if c is None else f" {c[k]:8.4f}" if k in c else "        -"
        av, r = (f"{a[k]:8.4f}", f"{b[k] / a[k]:6.3f}") if k in a else ("       -", "     -")
        print(f"{k[0]:22s} {k[1]:8s} ctx {k[2]:5d} B{k[3]:<3d} {av} {b[k]:8.4f} {r}{q}{h}")


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: decode_medians.py OUT A B [C]")
    compare(sys.argv[1], sys.argv[2:])
