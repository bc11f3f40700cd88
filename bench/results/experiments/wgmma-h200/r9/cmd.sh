# r9: Nsight Compute's L2 counters for the probe's wgmma GEMM and the library's mma.sync GEMM (same tile), 8192x3072x768
res=$OUT; export OUT=$res/r9; mkdir -p $OUT
. bench/gpu-setup.sh >/dev/null 2>&1 || { echo setup failed; exit 1; }
gcc -O2 -o /tmp/wgg bench/probes/wgmma_gemm_probe.c -lOpenCL -lm && timeout 200 /tmp/wgg $OUT > $OUT/wgmma-gemm.txt 2>&1
echo "gemm_mma class=nvidia-sm_90 : GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2" >/tmp/cand.tdb
rm -rf /tmp/rc; TDACL_CACHE_DIR=/tmp/rc TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm --min-samples 3 >$OUT/lib-gemm.txt 2>&1
python3 - /tmp/rc "$OUT/lib.ptx" <<'PY'
import glob, sys
for f in glob.glob(sys.argv[1] + '/*.bin'):
    data = open(f, 'rb').read(); head = data[:4096].decode('latin1'); i = data.find(b'.version')
    if i < 0 or 'GMM_BM=' not in head or 'ADT=1' not in head or 'MMA_NATIVE=1' not in head: continue
    open(sys.argv[2], 'wb').write(data[i:].split(b'\x00')[0]); break
PY
M="gpu__time_duration.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.sum,smsp__inst_executed_op_ldgsts.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,lts__average_t_sector_hit_rate_realtime.pct,lts__t_sectors_srcunit_tex_op_write.sum,lts__d_sectors.sum,smsp__inst_executed.sum"
cd bench/profile
timeout 100 ncu --clock-control none -k gemm_wgmma -s 2 -c 1 --metrics $M python3 ptx_wgmma_gemm.py --ptx $OUT/gemm-bn128-s3-p0-w20-k1-m0-x0.ptx --bn 128 --kmajor --reps 3 > $OUT/ncu-wgmma.txt 2>&1
timeout 100 ncu --clock-control none -k gemm_wgmma -s 2 -c 1 --metrics $M python3 ptx_wgmma_gemm.py --ptx $OUT/gemm-bn128-s3-p0-w20-k0-m0-x0.ptx --bn 128 --reps 3 > $OUT/ncu-wgmma-mn.txt 2>&1
OPTS="-DGMM_BM=128 -DGMM_BN=128 -DGMM_WM=2 -DGMM_WN=4 -DGMM_BK=32 -DGMM_STAGES=2"
timeout 60 python3 ptx_gemm.py --ptx $OUT/lib.ptx --opts "$OPTS" --M 8192 --N 3072 --K 768 2>&1 | tail -1
timeout 100 ncu --clock-control none -k gemm_mma -s 2 -c 1 --metrics $M python3 ptx_gemm.py --ptx $OUT/lib.ptx --opts "$OPTS" --M 8192 --N 3072 --K 768 > $OUT/ncu-lib.txt 2>&1
for f in ncu-wgmma ncu-wgmma-mn ncu-lib; do echo "== $f"; grep -E "gpu__|lts__|smsp__|l1tex__" $OUT/$f.txt | awk '{print $1, $(NF)}'; done
cd $res && tar -czf data.tgz r9
