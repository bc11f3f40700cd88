#!/bin/bash
# Nsight Compute on the tensor-core attention: the bench compiles the programs (bf16, d=64,
# T=8192, shipped entries, no statistics), their PTX comes out of the program cache, and
# ptx_attention.py launches each through the CUDA driver under ncu.  Kinds: $NCU_KINDS
# (default tra,softmax).  Reports (text) in $OUT.
NO_GPU_TXT=1 . bench/gpu-setup.sh
KINDS=${NCU_KINDS:-tra,softmax}
# a program cache of these kinds' programs alone
export TDACL_CACHE_DIR=/tmp/tdacl-ncu-cache
rm -rf "$TDACL_CACHE_DIR"
build-gpu/tdacl-bench --device nvidia --suite attention --kinds "$KINDS" --dtype bf16 --T 8192 --no-decode \
    --min-samples 3 --min-ms 0 2>&1 | grep "attention "
python3 - "$OUT" <<'PY'
import glob, os, re, sys
out = sys.argv[1]
for f in glob.glob(os.environ['TDACL_CACHE_DIR'] + '/*.bin'):
    data = open(f, 'rb').read()
    head = data[:4096].decode('latin1')
    m = re.search(r'(-DKIND=(\d)[^\x00]*STATS=0[^\x00]*)', head)
    i = data.find(b'.version')
    if not m or '-DMMA_NATIVE=1' not in head or i < 0: continue
    ptx = data[i:].split(b'\x00')[0]
    open('%s/kind%s.ptx' % (out, m.group(2)), 'wb').write(ptx)
    text = ptx.decode('latin1')
    e = text.index('.entry')
    with open('%s/kind%s.entry' % (out, m.group(2)), 'w') as f:
        f.write(text[e:text.index(')', e) + 1] + '\n')
        f.write('\n'.join(l for l in text.splitlines() if re.search(r'ctaid|ntid|envreg|\.const|ld\.param', l)))
    open('%s/kind%s.opts' % (out, m.group(2)), 'w').write(m.group(1)[:600])
PY
for p in "$OUT"/kind*.ptx; do
    k=${p%.ptx}
    python3 bench/profile/ptx_attention.py --ptx "$p" --opts "$(cat "$k.opts")" 2>&1 | tail -3
    ncu --clock-control none -k attention_mma_fwd -s 2 -c 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
        python3 bench/profile/ptx_attention.py --ptx "$p" --opts "$(cat "$k.opts")" >"$k.ncu.txt" 2>&1
    ncu --clock-control none -k attention_mma_fwd -s 2 -c 1 \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
        python3 bench/profile/ptx_attention.py --ptx "$p" --opts "$(cat "$k.opts")" 2>&1 |
        awk '$NF+0 > 0.05' | sort -k3 -n -r | head -14 >"$k.stalls.txt"
    cat "$k.stalls.txt"
    # per-instruction executed counts and stall samples (SASS), for the hot-loop breakdown
    ncu --clock-control none -k attention_mma_fwd -s 2 -c 1 --section SourceCounters --section WarpStateStats \
        --page source --print-source sass --csv \
        python3 bench/profile/ptx_attention.py --ptx "$p" --opts "$(cat "$k.opts")" >"$k.source.csv" 2>&1
    gzip -f "$k.source.csv"
    rm -f "$k.entry"
    grep -E "Duration|Warp Cycles Per Issued|Issued Warp|No Eligible|Achieved Occupancy|Theoretical Occupancy|Registers|Stall|stall" "$k.ncu.txt" | head -30
    rm -f "$p"
done
exit 0
