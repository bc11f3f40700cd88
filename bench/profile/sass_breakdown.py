"""SASS instructions per warp and key tile, by opcode, from an Nsight Compute source-counter
export (`ncu --page source --print-source sass --csv`, as bench/profile/gpu-ncu-attention.sh
writes it, gzipped or not).  A warp-tile is the loop count that accounts for the most executed
instructions, so the table reads as "what one warp does per key tile".

    python3 bench/profile/sass_breakdown.py kind2.source.csv.gz [--top 16]
"""
import argparse, collections, csv, gzip, io, re


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=16)
    a = ap.parse_args()
    opener = gzip.open if a.csv.endswith(".gz") else open
    with opener(a.csv, "rt") as f:
        text = f.read()
    rows = list(csv.reader(io.StringIO(text[text.index('"Address"'):])))
    head, rows = rows[0], rows[1:]
    i_stall = head.index("Warp Stall Sampling (All Samples)")
    i_exec = head.index("Instructions Executed")
    executed = sum(int(r[i_exec]) for r in rows)
    samples = sum(int(r[i_stall]) for r in rows) or 1
    loops = collections.Counter(int(r[i_exec]) for r in rows)
    tile = max(loops.items(), key=lambda x: x[0] * x[1])[0]
    ops, stalls = collections.Counter(), collections.Counter()
    for r in rows:
        m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", r[1])
        op = m.group(2) if m else "?"
        ops[op] += int(r[i_exec])
        stalls[op] += int(r[i_stall])
    print(f"{executed} instructions, {executed / tile:.0f} per warp-tile ({tile} warp-tiles)")
    print("opcode     per warp-tile  % executed  % stall samples")
    for op, n in ops.most_common(a.top):
        print(f"{op:10s} {n / tile:12.1f} {100 * n / executed:10.2f} {100 * stalls[op] / samples:12.2f}")


if __name__ == "__main__":
    main()
