"""Medians over repeated tdacl-bench decode runs, for the bench/gpu-decode-*.sh scripts.

medians(out, label) reads out/decode-<label>-*.json and returns two dicts keyed by
(row name, dtype, context, batch): the median of the runs' median times (ms), and the median
host enqueue time a step (ms) where the row's note gives one.
"""
import glob
import json
import re
import statistics


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
