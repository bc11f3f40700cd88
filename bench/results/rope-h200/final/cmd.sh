# s36 r6: the final tree's registry and views tests natively
res=$OUT
export OUT=$res/r6
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
native_parts mma-views
cd $res && tar -czf data.tgz r6
echo "done ($SECONDS s)"
