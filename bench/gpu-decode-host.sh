. bench/gpu-setup.sh
gcc -O2 -o /tmp/launch_probe bench/probes/launch_probe.c -lOpenCL && /tmp/launch_probe 2>&1 | head -8 | tee "$OUT/probe.txt"
export TDACL_BENCH_MODELS=/tmp/tdacl-bench-models
for i in 1 2; do
build-gpu/tdacl-bench --device nvidia --suite forward --kinds softmax,tda --dtype f32,bf16act --no-prefill --json "$OUT/host-$i.json" 2>&1 | grep -E "decode " | grep -v slots | sed 's/  */ /g' | cut -c1-60,150-400
done
