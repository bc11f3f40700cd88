# s41 r3 (with the patch applied as it then was): the wgmma part natively, every failing case listed,
# then NVIDIA's compiler reports on KSTAGES 3 through a user tuning file
. bench/gpu-setup.sh
(cd build-gpu/tests && TDACL_TEST_KEEP_GOING=1 TDACL_LOG=warn timeout 300 stdbuf -oL ./test_attention --part wgmma) > $OUT/test-native.txt 2>&1
f=/tmp/ks3.tdb; : > $f
for kind in softmax rela tra; do echo "attention_wgmma class=nvidia-sm_90 kind=$kind dtype=bf16 d=64 dv=64 t=short : BN=64 NWARPS=4 MT=1 KSTAGES=3" >> $f; done
sed -i 's/kind=softmax dtype=bf16 d=64 dv=64 t=short : BN=64/kind=softmax dtype=bf16 d=64 dv=64 t=short : BN=32/' $f
TDACL_TUNING_FILE=$f TDACL_CACHE=off TDACL_LOG=debug TDACL_BUILD_OPTIONS=-cl-nv-verbose timeout 120 build-gpu/tdacl-bench --device nvidia --suite attention --dtype bf16 --no-decode --beta 1 --kinds softmax,rela,tra --T 256 --min-samples 1 --min-ms 0 2>&1 | grep -E "program 'attention_wgmma'.*compiled|registers|spill|stack|arn" | grep -v "noinline\|Used [0-9]* registers, used 0 barriers$" | cut -c1-400 > $OUT/nv-verbose-ks3.txt
