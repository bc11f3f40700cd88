# s37 r4: the tree of the session's last kernel change natively, program cache off so that every
# program is built: test_model whole, test_registry, and test_attention parts, counting the
# "N warning(s) generated" lines NVIDIA's compiler prints for a build that warns
res=$OUT
export OUT=$res/r4
mkdir -p $OUT
. bench/gpu-setup.sh 2>"$OUT/setup-stderr.txt"
echo "build done ($SECONDS s)"
export TDACL_CACHE=off
(cd build-gpu/tests && TDACL_LOG=warn timeout 300 ./test_model) > "$OUT/test-model-native.txt" 2>&1; echo "test_model status $?" >> "$OUT/test-model-native.txt"
(cd build-gpu/tests && TDACL_LOG=warn timeout 150 ./test_registry) > "$OUT/test-registry-native.txt" 2>&1; echo "test_registry status $?" >> "$OUT/test-registry-native.txt"
native_limited 40 mma-f32 mma-tf32 entmax-mma mma-units
mv "$OUT/test-native.txt" "$OUT/test-attention-native.txt"
for f in test-model-native test-registry-native test-attention-native; do echo "$f: $(grep -E 'PASSED|FAILED|status|timed out' $OUT/$f.txt | tr '\n' ' ') | builds that warned: $(grep -c 'warnings\? generated' $OUT/$f.txt)"; done
cd $res && tar -czf data.tgz r4
echo "done ($SECONDS s)"
