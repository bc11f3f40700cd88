# s38 r5: test_mma_views (now with f32 storage at tf32) natively on the final tree
res=$OUT
export OUT=$res/r5
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
grep -E "warning" "$OUT/setup-stderr.txt" || echo "no warnings in the Release build"
native_limited 150 mma-views
(cd $res && tar -czf data.tgz r5)
echo "done ($SECONDS s)"
