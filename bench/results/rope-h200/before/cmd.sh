# the tree before the RoPE change: forward B1 T4096 profiles, the attention at the TDA model's
# batched shape (B8 H12 d64) with and without attention.mma_views pinned, and NVIDIA's JIT
# optimisation level (-cl-nv-opt-level=3 against the default: the same times)
res=$OUT
export OUT=$res/r1
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
F=(--device nvidia --suite forward --dtype bf16act --no-decode --T 4096 --min-samples 3)
for kind in tda softmax; do
    TDACL_PROFILE=1 timeout 200 build-gpu/tdacl-bench "${F[@]}" --kinds $kind --json "$OUT/fwd-$kind.json" > "$OUT/fwd-$kind.txt" 2>&1
done
TDACL_VARIANT=attention.mma_views timeout 200 build-gpu/tdacl-bench "${F[@]}" --kinds tda --json "$OUT/fwd-tda-views.json" > "$OUT/fwd-tda-views.txt" 2>&1
A=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --beta 1 --B 8 --H 12 --d 64 --T 1024,4096)
timeout 200 build-gpu/tdacl-bench "${A[@]}" --kinds softmax,tra,tda --json "$OUT/att.json" > "$OUT/att.txt" 2>&1
TDACL_VARIANT=attention.mma_views timeout 200 build-gpu/tdacl-bench "${A[@]}" --kinds tda --json "$OUT/att-views.json" > "$OUT/att-views.txt" 2>&1
B=(--device nvidia --suite attention --dtype bf16 --no-decode --min-samples 5 --beta 1 --T 8192 --kinds softmax,tra)
for o in none 3; do
    opt=""; [ $o != none ] && opt="-cl-nv-opt-level=$o"
    TDACL_CACHE=off TDACL_BUILD_OPTIONS="$opt" timeout 200 build-gpu/tdacl-bench "${B[@]}" --json "$OUT/opt-$o.json" > "$OUT/opt-$o.txt" 2>&1
done
