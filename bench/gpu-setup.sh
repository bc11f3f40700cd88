# Sourced by the bench/gpu-*.sh scripts on the GPU host of ../shared/gpu-host, from the
# repository root (bundle in .gpubundle/, gpu-env.sh in .gpu/): results folder $OUT (default
# /tmp/out), the bundle's environment, a program cache, the GPU's name and driver in
# $OUT/gpu.txt (unless NO_GPU_TXT=1), and a Release build in build-gpu/ (exits on failure).
set -o pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. .gpu/gpu-env.sh .gpubundle >/dev/null
export TDACL_CACHE_DIR=/tmp/tdacl-cache
[ "${NO_GPU_TXT:-0}" = 1 ] || nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build-gpu -j"$(nproc)" >/dev/null || exit 1

# build_base REV: a Release build of commit REV in /tmp/base/build (for before/after runs)
build_base() {
    rm -rf /tmp/base && mkdir -p /tmp/base && git archive "$1" | tar -x -C /tmp/base
    (cd /tmp/base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null) ||
        { echo "base build failed"; exit 1; }
}

# build_with_kernels DIR: a Release build in /tmp/base/build (tdacl-bench) of this tree with the
# kernel files of DIR/cl (`git show REV:cl/FILE` of the commit to compare against)
build_with_kernels() {
    rm -rf /tmp/base && mkdir -p /tmp/base && tar --exclude=./build-gpu --exclude=./.git -cf - . | tar -xf - -C /tmp/base &&
        cp "$1"/cl/*.cl /tmp/base/cl/ || { echo "no base kernels in $1/cl"; exit 1; }
    (cd /tmp/base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTDACL_BUILD_TESTS=OFF >/dev/null &&
        cmake --build build --target tdacl-bench -j"$(nproc)" >/dev/null) || { echo "base build failed"; exit 1; }
}

# build_reverted PATCH: a Release build in /tmp/base/build of this tree without PATCH (a change
# as `git diff` wrote it; for before/after runs of a change not yet committed)
build_reverted() {
    rm -rf /tmp/base && mkdir -p /tmp/base && git ls-files -z | xargs -0 tar -cf - | tar -xf - -C /tmp/base
    cp -r cl src include bench tests /tmp/base/ && (cd /tmp/base && git apply -R "$OLDPWD/$1") ||
        { echo "patch failed"; exit 1; }
    (cd /tmp/base && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build -j"$(nproc)" >/dev/null) ||
        { echo "base build failed"; exit 1; }
}

# native_parts PART...: test_registry and the named test_attention parts on this GPU
# -> $OUT/test-native.txt, with the pass/fail lines echoed
native_parts() {
    {
        (cd build-gpu/tests && ./test_registry) 2>&1
        for part in "$@"; do
            (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
        done
    } >"$OUT/test-native.txt"
    grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -14
}

# native_limited LIMIT PART...: the named test_attention parts on this GPU, each within LIMIT
# seconds, appended to $OUT/test-native.txt (a part that fails or runs out says so there)
native_limited() {
    local limit=$1
    shift
    for part in "$@"; do
        (cd build-gpu/tests && TDACL_LOG=warn timeout "$limit" ./test_attention --part "$part") >>"$OUT/test-native.txt" 2>&1 ||
            echo "part $part: FAILED or timed out (status $?)" >>"$OUT/test-native.txt"
    done
    grep -E "PASSED|FAILED|ERROR|timed out" "$OUT/test-native.txt" | tail -4
    echo "tested $* ($SECONDS s)"
}

# native_model_tests: test_model, test_matmul, test_registry and test_attention --part decode
# on this GPU -> $OUT/test-native.txt, with the pass/fail lines echoed
native_model_tests() {
    (cd build-gpu/tests && ./test_model && ./test_matmul && ./test_registry &&
        TDACL_LOG=warn ./test_attention --part decode) >"$OUT/test-native.txt" 2>&1
    grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -8
}

# gemm_vs_base_and_torch: TDACL_PRECISION=bf16 tdacl-bench --suite peak,gemm of this build and of
# /tmp/base (build_base) -> $OUT/gemm-{new,base}.json, gemm-compare.txt; torch.addmm bf16 on the
# same shapes (bench/anchors/matmul.py) -> matmul-anchors.json, and ours against it ->
# gemm-vs-torch.txt
gemm_vs_base_and_torch() {
    TDACL_PRECISION=bf16 /tmp/base/build/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm-base.json" \
        >/dev/null 2>&1
    TDACL_PRECISION=bf16 build-gpu/tdacl-bench --device nvidia --suite peak,gemm --json "$OUT/gemm-new.json" \
        >/dev/null 2>&1
    build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/gemm-base.json" >"$OUT/gemm-compare.txt" 2>&1
    (cd bench/anchors && python3 matmul.py --out "$OUT/matmul-anchors.json") >/dev/null 2>&1
    build-gpu/tdacl-bench --load "$OUT/gemm-new.json" --compare "$OUT/matmul-anchors.json" >"$OUT/gemm-vs-torch.txt" 2>&1
}

# hf_as_bf16act IN OUT: bench/anchors/gpt_hf.py's rows with each bf16 row also as "bf16act"
# (transformers' bf16 is bf16 weights and activations: compared with ours of that mode)
hf_as_bf16act() {
    python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["rows"] += [dict(r, dtype="bf16act") for r in d["rows"] if r["dtype"] == "bf16"]
json.dump(d, open(sys.argv[2], "w"))' "$1" "$2"
}

# sass_of_cache DIR: the machine code of the tensor-core attention programs in the program cache
# (NVIDIA's OpenCL binaries are PTX: ptxas and cuobjdump) -> DIR/kindK.sass, and per program a
# count of its instructions and of the exponent instructions and predicated multiplies
sass_of_cache() {
    python3 - "$1" <<'PY'
import glob, os, re, subprocess, sys
out = sys.argv[1]
for f in glob.glob(os.environ['TDACL_CACHE_DIR'] + '/*.bin'):
    data = open(f, 'rb').read()
    m = re.search(rb'-DKIND=(\d)', data[:4096])
    st = re.search(rb'-DSTATS=(\d)', data[:4096])
    i = data.find(b'.version')
    if not m or b'-DMMA_NATIVE=1' not in data[:4096] or i < 0: continue
    ptx = data[i:].split(b'\x00')[0]
    name = '%s/kind%s-stats%s-%s' % (out, m.group(1).decode(), st.group(1).decode() if st else '1',
                                     os.path.basename(f)[:6])
    open(name + '.ptx', 'wb').write(ptx)
    subprocess.run(['ptxas', '-arch=sm_90', name + '.ptx', '-o', name + '.cubin'], check=False)
    sass = subprocess.run(['cuobjdump', '-sass', name + '.cubin'], capture_output=True, text=True).stdout
    open(name + '.sass', 'w').write(sass)
    os.remove(name + '.cubin')
    ins = [l for l in sass.splitlines() if re.match(r'\s+/\*[0-9a-f]{4}\*/', l)]
    count = lambda pat: sum(1 for l in ins if re.search(pat, l))
    print('%s: %d instructions, %d MUFU.EX2, %d FSETP, %d predicated FMUL, %d HMMA; ptx ex2: %s' % (
        name, len(ins), count(r'MUFU\.EX2'), count(r'FSETP'), count(r'@!?P\d FMUL'), count(r'HMMA'),
        sorted(set(re.findall(rb'ex2\.approx[.a-z0-9]*', ptx)))))
PY
}

# entmax_tests_and_anchors: the wheels of .whl/ (entmax, adasplash) into /tmp/site; test_attention
# parts entmax-mma, entmax, entmax-layouts and test_sparse_models natively -> $OUT/test-native.txt
# (pass/fail lines echoed); bench/anchors/entmax_anchor.py (PyPI entmax checks, AdaSplash's
# forward timed) -> $OUT/entmax-checks.json, anchors.json, anchors.txt
entmax_tests_and_anchors() {
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
        return 1
    export PYTHONPATH=/tmp/site:$PWD/python TDACL_LIBRARY=$PWD/build-gpu/libtdacl.so
    {
        for part in entmax-mma entmax entmax-layouts; do
            (cd build-gpu/tests && TDACL_LOG=warn ./test_attention --part "$part") 2>&1
        done
        (cd build-gpu/tests && ./test_sparse_models) 2>&1
    } >"$OUT/test-native.txt"
    grep -E "PASSED|FAILED|ERROR" "$OUT/test-native.txt" | tail -6
    (cd bench/anchors && python3 entmax_anchor.py --out "$OUT/entmax-checks.json" --anchors "$OUT/anchors.json") \
        >"$OUT/anchors.txt" 2>&1
}

# gemm_sweep CANDIDATE...: the gemm suite (TDACL_PRECISION=bf16) with each tensor-core GEMM
# parameter set as the user's tuning entry -> $OUT/TAG-N.json, .txt, and the table
# $OUT/TAG-sweep.txt of the bf16act rows (bf16 a, w, c) at M > 8; TAG is $SWEEP_TAG (default
# gemm), the build $SWEEP_BENCH (default build-gpu/tdacl-bench)
gemm_sweep() {
    local cands=("$@") tag=${SWEEP_TAG:-gemm}
    for i in "${!cands[@]}"; do
        echo "gemm_mma class=nvidia-sm_90 : ${cands[$i]}" >/tmp/cand.tdb
        TDACL_TUNING_FILE=/tmp/cand.tdb TDACL_PRECISION=bf16 ${SWEEP_BENCH:-build-gpu/tdacl-bench} --device nvidia \
            --suite gemm --json "$OUT/$tag-$i.json" >"$OUT/$tag-$i.txt" 2>&1
    done
    python3 - "$OUT/$tag" "${cands[@]}" <<'PY' | tee "$OUT/$tag-sweep.txt"
import json, sys
out, cands = sys.argv[1], sys.argv[2:]
print("ms, tensor-core GEMM bf16act rows (bf16 a, w, c); [user] = the candidate ran, else refused")
for i, c in enumerate(cands):
    try:
        rows = [r for r in json.load(open("%s-%d.json" % (out, i)))["rows"]
                if r["suite"] == "gemm" and r["dtype"] == "bf16act" and r["shape"]["M"] > 8]
    except (OSError, ValueError) as e:
        print("%s: no result (%s)" % (c, e))
        continue
    src = set(r.get("tuning", {}).get("source", "") for r in rows)
    print("%s [%s]\n  " % (c, ",".join(sorted(src))) + "  ".join(
        "%dx%dx%d %.4f" % (r["shape"]["M"], r["shape"]["N"], r["shape"]["K"], r["time_ms"]["median"]) for r in rows))
    print("  sum %.4f" % sum(r["time_ms"]["median"] for r in rows))
PY
}

# gemm_ptx_of_cache CACHE PREFIX: the PTX of the tensor-core GEMM program built for bf16 a
# (NVIDIA's OpenCL binaries are PTX) out of the program cache CACHE -> PREFIX.ptx, and its
# build options -> PREFIX.opts (bench/profile/ptx_gemm.py reads the tile from them)
gemm_ptx_of_cache() {
    python3 - "$1" "$2" <<'PY'
import glob, re, sys
for f in glob.glob(sys.argv[1] + '/*.bin'):
    data = open(f, 'rb').read()
    m = re.search(r'(-D[^\x00]*GMM_BM=[^\x00]*)', data[:4096].decode('latin1'))
    i = data.find(b'.version')
    if not m or i < 0 or 'ADT=1' not in m.group(1) or 'MMA_NATIVE=1' not in m.group(1): continue
    open(sys.argv[2] + '.ptx', 'wb').write(data[i:].split(b'\x00')[0])
    open(sys.argv[2] + '.opts', 'w').write(m.group(1)[:800])
    break
PY
}
