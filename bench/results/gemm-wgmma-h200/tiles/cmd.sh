# w2: gemm.wgmma's registers (ptxas report of NVIDIA's JIT), -cl-nv-maxrregcount=128 A/B, and its tiles on the 8 shapes
res=$OUT; export OUT=$res/w2; mkdir -p $OUT
. bench/gpu-setup.sh >/dev/null 2>&1 || { echo setup failed; exit 1; }
rm -rf /tmp/jc; TDACL_CACHE_DIR=/tmp/jc TDACL_LOG=debug TDACL_BUILD_OPTIONS=-cl-nv-verbose TDACL_PRECISION=bf16 \
  build-gpu/tdacl-bench --device nvidia --suite gemm --min-samples 1 --min-ms 0 > $OUT/jit.log 2>&1
awk '/Compiling entry function/ {k=$0} /Used [0-9]+ registers/ {print k; print}' $OUT/jit.log | sort | uniq -c | head -20
grep -c "loaded as sm_90a" $OUT/jit.log
sweep() { # label, then env assignments
  local label=$1; shift
  env "$@" TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm --min-samples 5 > $OUT/sweep-$label.txt 2>&1
  echo "$label: $(grep bf16act $OUT/sweep-$label.txt | grep -v ' 1x' | awk '{printf "%s %s  ", $6, $9}')"
}
sweep default
sweep maxrreg128 TDACL_BUILD_OPTIONS=-cl-nv-maxrregcount=128
for c in "GWG_BM=64 GWG_BN=64 GWG_STAGES=4" "GWG_BM=64 GWG_BN=128 GWG_STAGES=4" "GWG_BM=128 GWG_BN=64 GWG_STAGES=4" "GWG_BM=128 GWG_BN=128 GWG_STAGES=2" "GWG_BM=64 GWG_BN=64 GWG_STAGES=2"; do
  echo "gemm_wgmma class=nvidia-sm_90 : $c" > /tmp/cand.tdb
  sweep "$(echo $c | tr -d 'GWG_ ' | tr '=' '-')" TDACL_TUNING_FILE=/tmp/cand.tdb
done
cd $res && tar -czf data.tgz w2
