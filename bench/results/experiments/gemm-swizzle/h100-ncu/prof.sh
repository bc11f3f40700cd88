export OUT=$OUT/r6
. bench/gpu-setup.sh >/dev/null 2>&1
cp .gpu/pad.ptx $OUT/pad.ptx
echo "gemm_mma class=nvidia-sm_90 : GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=2" >/tmp/cand.tdb
rm -rf /tmp/rc; TDACL_CACHE_DIR=/tmp/rc TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm --min-samples 3 >/dev/null 2>&1
python3 - /tmp/rc "$OUT/swz.ptx" <<'PY'
import glob, sys
for f in glob.glob(sys.argv[1] + '/*.bin'):
    data = open(f, 'rb').read(); head = data[:4096].decode('latin1'); i = data.find(b'.version')
    if i < 0 or 'GMM_BM=' not in head or 'ADT=1' not in head or 'MMA_NATIVE=1' not in head: continue
    open(sys.argv[2], 'wb').write(data[i:].split(b'\x00')[0]); break
PY
PTXAS=$(find / -name ptxas -type f -perm -u+x 2>/dev/null | head -1); CUOBJ=$(dirname $PTXAS)/cuobjdump; [ -x $CUOBJ ] || CUOBJ=$(find / -name cuobjdump -type f 2>/dev/null | head -1)
OPTS="-DGMM_BM=128 -DGMM_BN=128 -DGMM_WM=2 -DGMM_WN=4 -DGMM_BK=32 -DGMM_STAGES=2"
M="smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warp_latency_per_inst_issued.ratio,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,lts__t_sectors.sum"
for v in pad swz; do
  $PTXAS -arch=sm_90 -v $OUT/$v.ptx -o /tmp/$v.cubin 2>&1 | grep -A2 "gemm_mma'" | tail -1 | tee $OUT/$v.regs.txt
  $CUOBJ -sass /tmp/$v.cubin > $OUT/$v.sass 2>&1
  (cd bench/profile && timeout 60 python3 ptx_gemm.py --ptx $OUT/$v.ptx --opts "$OPTS" --M 8192 --N 3072 --K 768 2>&1 | tail -1)
  (cd bench/profile && timeout 90 ncu --clock-control none -k gemm_mma -s 2 -c 1 --metrics $M python3 ptx_gemm.py --ptx $OUT/$v.ptx --opts "$OPTS" --M 8192 --N 3072 --K 768 > $OUT/$v.ncu.txt 2>&1)
  grep -E "smsp__|l1tex__|sm__|gpu__|lts__" $OUT/$v.ncu.txt | awk '{print "'$v'", $1, $(NF)}'
done
cd $OUT/.. && tar czf r6.tgz r6 && rm -rf r6
