# The device calls of this experiment (2026-11-29, session 39), each from the repository root
# with .gpu/ and .gpubundle/ carried (../shared/gpu-host), results under $OUT/rN:
# r1  gcc -O2 -o /tmp/glp bench/probes/gemv_layout_probe.c -lOpenCL -lm && /tmp/glp   (one GEMV a launch)
# r2  the same probe, 12 GEMVs a launch with a grid barrier after each            -> probe-r2/
# r3  the same with the flat W^T pattern added                                      -> probe-r3/
# r4  git apply weight-layout.patch (its first form: activations read one float at a time);
#     bash gpu-weight-layout.sh                                                     -> layout-r4/
# r5  the form reading them as two swizzled float4; the same script                 -> layout-r5/
# r6  TDACL_WEIGHT_LAYOUT=kn|nk bash bench/gpu-decode-trace.sh                       -> trace-r6/
# r7  the round's positions counted instead of divided; PREFILL_REPS=0, and the traces -> layout-r7/
# r8  a column's sum in one register until it changes (weight-layout.patch as kept here);
#     TESTS='*' PREFILL_REPS=0 bash gpu-weight-layout.sh, and the nk trace           -> layout-r8/
