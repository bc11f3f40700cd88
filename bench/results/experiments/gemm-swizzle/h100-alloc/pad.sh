export OUT=$OUT/r7; mkdir -p $OUT
. bench/gpu-setup.sh >/dev/null 2>&1
for t in "2 0" "2 5120" "2 16384" "3 0"; do set -- $t
  echo "gemm_mma class=nvidia-sm_90 : GMM_BM=128 GMM_BN=128 GMM_WM=2 GMM_WN=4 GMM_BK=32 GMM_STAGES=$1" >/tmp/cand.tdb
  TDACL_BUILD_OPTIONS="-DGMM_LOCAL_PAD=$2" TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite gemm --min-samples 5 --json $OUT/p$1-$2.json >/dev/null 2>&1
  echo "stages $1 local pad $2: $(python3 -c 'import json,sys; print(" ".join("%.4f" % r["time_ms"]["median"] for r in json.load(open(sys.argv[1]))["rows"] if r["suite"]=="gemm" and r["dtype"]=="bf16act" and r["shape"]["M"]>8))' $OUT/p$1-$2.json)" | tee -a $OUT/pad.txt
done
