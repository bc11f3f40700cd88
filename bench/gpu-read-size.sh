#!/bin/bash
# The LM head's GEMV against a plain read of the same bytes, on the GPU host of ../shared/gpu-host:
#   bash bench/gpu-read-size.sh
#   read-N.txt   bench/probes/read_probe.c: back-to-back float4 reads of 19 MB .. 1 GB (run twice)
#   gemv.txt     bench/probes/gemv_probe.c 50257 768 f32|bf16, TDACL_PROFILE=1 (wall and device time)
#   peak.txt     tdacl devices --peak (the read bandwidth the bench's percentages are of: 1 GB)
. bench/gpu-setup.sh
gcc -O2 -o /tmp/read_probe bench/probes/read_probe.c -lOpenCL || exit 1
gcc -std=c11 -O2 -o /tmp/gemv_probe bench/probes/gemv_probe.c -Iinclude -Lbuild-gpu -ltdacl -Wl,-rpath,$PWD/build-gpu || exit 1
build-gpu/tdacl devices --device nvidia --peak >"$OUT/peak.txt" 2>&1
for i in 1 2; do
    /tmp/read_probe >"$OUT/read-$i.txt" 2>&1
    for adt in f32 bf16; do TDACL_PROFILE=1 /tmp/gemv_probe 50257 768 $adt 2>&1 | grep -E "gemv_t|GB/s"; done >>"$OUT/gemv.txt"
done
cat "$OUT/peak.txt" "$OUT/read-1.txt" "$OUT/read-2.txt" "$OUT/gemv.txt"
