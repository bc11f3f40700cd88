#!/bin/bash
# The transposed GEMV (the tied LM head) at GEMV_T_LANES work-items a column and GEMV_T_BLOCKS
# column blocks a work-group (src/ops/gemm.c) of each of $VARIANTS ("LANES:BLOCKS ...", default
# "8:1 16:1 32:1"), on the GPU host in one call: this tree built with each (/tmp/lanesN-B),
# test_matmul natively on each (test-native-N-B.txt), and
# bench/probes/gemv_probe.c (wall clock and TDACL_PROFILE device time a launch, b bf16, a f32
# and bf16) -> gemv-lanes.txt.
# GEMV_T_BLOCKS exists only with PATCH applied (bench/results/lmhead-softmax/h200-blocks/blocks.patch:
# a work-group loops over that many column blocks, a staged once); a PATCH is applied to each copy.
#   bash bench/gpu-gemv-lanes.sh [PATCH]
PATCH=${1:-}
. bench/gpu-setup.sh
# VARIANTS: "LANES:BLOCKS ..." (GEMV_T_LANES, GEMV_T_BLOCKS of src/ops/gemm.c)
for var in ${VARIANTS:-8:1 16:1 32:1}; do
    n=${var%:*} nb=${var#*:}
    dir=/tmp/lanes$n-$nb
    rm -rf $dir && mkdir -p $dir && git ls-files -z | xargs -0 tar -cf - | tar -xf - -C $dir && cp -r cl src include bench tests $dir/ &&
        { [ -z "$PATCH" ] || (cd $dir && git apply "$OLDPWD/$PATCH"); } &&
        sed -i -e "s/^#define GEMV_T_LANES [0-9]*/#define GEMV_T_LANES $n/" -e "s/^#define GEMV_T_BLOCKS [0-9]*/#define GEMV_T_BLOCKS $nb/" \
            $dir/src/ops/gemm.c &&
        (cd $dir && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" --target tdacl test_matmul >/dev/null) ||
        { echo "lanes $n: build failed"; continue; }
    (cd $dir/build/tests && ./test_matmul) >"$OUT/test-native-$n-$nb.txt" 2>&1
    echo "== GEMV_T_LANES $n, GEMV_T_BLOCKS $nb: $(grep -E 'PASSED|FAILED' "$OUT/test-native-$n-$nb.txt" | tail -1)"
    gcc -std=c11 -O2 -o /tmp/gemv_probe bench/probes/gemv_probe.c -Iinclude -L$dir/build -ltdacl -Wl,-rpath,$dir/build &&
        for adt in f32 bf16; do
            TDACL_PROFILE=1 /tmp/gemv_probe 50257 768 $adt 2>&1 | grep -E "gemv_t|GB/s"
        done
done | tee "$OUT/gemv-lanes.txt"
