"""Where a one-launch decode layer's time goes, from the lines `-DDL_TRACE=pos` makes
cl/decode_layer.cl print (bench/gpu-decode-trace.sh):

  dl_trace g<group> gt <start ns> <duration ns>: <clock at the end of each of 12 phases>

The phases: start (the first weight loads issued), stats1 (first norm), qkv (its GEMV and the
cache writes), bar1, attn (attention units and their combine), bar2, proj, bar3, stats2, fc, bar4,
fcproj.  For each section (a line starting with ==) it prints, as medians over the launches,
each phase's end in us from the launch's start: the first, median and last work-group to get
there; the last minus the previous phase's last is that phase's share of the launch.
"""
import re
import statistics
import sys

PHASES = "start stats1 qkv bar1 attn bar2 proj bar3 stats2 fc bar4 fcproj".split()
CLOCK_GHZ = None  # from the lines themselves: cycles at the end over the launch's ns


def launches(rows):
    rows.sort(key=lambda r: r[1])
    out, cur = [], []
    for r in rows:
        if cur and r[1] - cur[0][1] > 10000:
            out.append(cur)
            cur = []
        cur.append(r)
    if cur:
        out.append(cur)
    return out


def main(path):
    sec, data = None, {}
    for line in open(path):
        if line.startswith("=="):
            sec = line.strip()
            data[sec] = []
            continue
        for m in re.finditer(r"dl_trace g(\d+) gt (\d+) (\d+):((?: \d+){12})", line):
            data.setdefault(sec, []).append(
                (int(m.group(1)), int(m.group(2)), int(m.group(3)), [int(v) for v in m.group(4).split()]))
    for sec, rows in data.items():
        ls = launches(rows)
        if not ls:
            print(sec, "no trace lines")
            continue
        ghz = statistics.median(r[3][-1] / r[2] for r in rows if r[2] > 0)
        print(f"{sec}: {len(ls)} launches, {len(rows)} work-group lines, SM clock {ghz:.2f} GHz")
        print(f"  {'phase':8s} {'first':>7s} {'median':>7s} {'last':>7s} {'share':>7s}  (us from the launch's start)")
        prev = 0.0
        for i, name in enumerate(PHASES):
            first, med, last = [], [], []
            for la in ls:
                t0 = min(r[1] for r in la)
                ends = sorted((r[1] - t0) / 1000 + r[3][i] / ghz / 1000 for r in la)
                first.append(ends[0]), med.append(ends[len(ends) // 2]), last.append(ends[-1])
            f, m, l = statistics.median(first), statistics.median(med), statistics.median(last)
            print(f"  {name:8s} {f:7.2f} {m:7.2f} {l:7.2f} {l - prev:7.2f}")
            prev = l
        print(f"  launch (global timer): {statistics.median(max(r[2] for r in la) for la in ls) / 1000:.1f} us")


if __name__ == "__main__":
    main(sys.argv[1])
