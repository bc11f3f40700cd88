/* The on-disk program binary cache (src/runtime/cache.c, src/runtime/program.c): hits and misses, the
 * entry layout, rejection of corrupted / truncated / foreign entries, disabling it, write
 * failures and two processes writing the same entry at once.  Every test gets its own
 * temporary cache directory; after each rebuild a kernel is run to prove the program
 * works. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clcheck.h"

static const char *ADD1_SRC =
    "__kernel void add1(__global float *x) { x[get_global_id(0)] += 1.0f; }\n";
#define ADD1_N 64

/* FNV-1a 64 written from its definition, to check entry naming and checksums. */
static uint64_t ref_fnv1a64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* the entry header: magic, format, key length, payload length, SHA-256 */
#define HDR (8 + 4 + 4 + 8 + 32)

static void sha256_of(const void *data, size_t n, unsigned char out[32])
{
    tdacl_sha256 h;
    tdacl__sha256_init(&h);
    tdacl__sha256_update(&h, data, n);
    tdacl__sha256_final(&h, out);
}

static void hex(const unsigned char *d, char out[65])
{
    for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* FIPS 180-4 / NIST example vectors, fed whole and in odd-sized pieces. */
static void test_sha256_vectors(void **state)
{
    (void)state;
    static const struct { const char *msg; const char *digest; } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    char got[65];
    unsigned char d[32];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        sha256_of(v[i].msg, strlen(v[i].msg), d);
        hex(d, got);
        assert_string_equal(got, v[i].digest);
        tdacl_sha256 h;
        tdacl__sha256_init(&h);
        for (size_t k = 0; k < strlen(v[i].msg); k += 3)
            tdacl__sha256_update(&h, v[i].msg + k, strlen(v[i].msg) - k < 3 ? strlen(v[i].msg) - k : 3);
        tdacl__sha256_final(&h, d);
        hex(d, got);
        assert_string_equal(got, v[i].digest);
    }
    /* one million 'a', in 1000-byte pieces */
    char a[1000];
    memset(a, 'a', sizeof a);
    tdacl_sha256 h;
    tdacl__sha256_init(&h);
    for (int i = 0; i < 1000; i++) tdacl__sha256_update(&h, a, sizeof a);
    tdacl__sha256_final(&h, d);
    hex(d, got);
    assert_string_equal(got, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Runs add1 on 64 floats and checks every result. Returns 0 when correct (usable from
 * the child processes too, where cmocka asserts are not available). */
static int run_add1(tdacl_context *ctx, cl_program prog, char *why, size_t n)
{
    float host[ADD1_N];
    for (int i = 0; i < ADD1_N; i++) host[i] = 0.5f * (float)i - 3.0f;
    cl_int err;
    cl_kernel k = clCreateKernel(prog, "add1", &err);
    if (!k) return snprintf(why, n, "clCreateKernel: %d", err), 1;
    cl_mem buf = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof host, host, &err);
    if (!buf) {
        clReleaseKernel(k);
        return snprintf(why, n, "clCreateBuffer: %d", err), 1;
    }
    size_t global = ADD1_N;
    err = clSetKernelArg(k, 0, sizeof buf, &buf);
    if (!err) err = clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, NULL, 0, NULL, NULL);
    float out[ADD1_N];
    if (!err) err = clEnqueueReadBuffer(ctx->queue, buf, CL_TRUE, 0, sizeof out, out, 0, NULL, NULL);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    if (err) return snprintf(why, n, "running add1: OpenCL error %d", err), 1;
    for (int i = 0; i < ADD1_N; i++)
        if (out[i] != host[i] + 1.0f) return snprintf(why, n, "add1[%d] = %g, expected %g", i, out[i], host[i] + 1.0f), 1;
    return 0;
}

static void check_add1(tdacl_context *ctx, cl_program prog)
{
    char why[256] = "";
    if (run_add1(ctx, prog, why, sizeof why)) fail_msg("%s", why);
}

/* A context on the cache directory `dir` (cache forced on unless `cache` says otherwise)
 * whose log goes to `log` at debug level. */
static tdacl_context *new_ctx(const char *dir, int cache, tu_log *log)
{
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.cache = cache;
    desc.cache_dir = dir;
    desc.use_tuning_db = 0;
    if (log) {
        desc.log_fn = tu_log_fn;
        desc.log_user = log;
        desc.log_level = TDACL_LOG_DEBUG;
    }
    tdacl_context *ctx = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &ctx));
    assert_non_null(ctx);
    return ctx;
}

static tdacl_cache_stats stats_of(tdacl_context *ctx)
{
    tdacl_cache_stats s;
    assert_ok(ctx, tdacl_context_cache_stats(ctx, &s));
    return s;
}

#define assert_stats(ctx, h, m, r, w, wf)                                                    \
    do {                                                                                     \
        tdacl_cache_stats s_ = stats_of(ctx);                                                \
        if (s_.hits != (h) || s_.misses != (m) || s_.rejected != (r) || s_.writes != (w) ||  \
            s_.write_failures != (wf))                                                       \
            fail_msg("cache stats hits %llu misses %llu rejected %llu writes %llu "          \
                     "write_failures %llu; wanted %d %d %d %d %d",                           \
                     (unsigned long long)s_.hits, (unsigned long long)s_.misses,             \
                     (unsigned long long)s_.rejected, (unsigned long long)s_.writes,         \
                     (unsigned long long)s_.write_failures, h, m, r, w, wf);                 \
    } while (0)

static cl_program build(tdacl_context *ctx, const char *options)
{
    cl_program prog = NULL;
    assert_ok(ctx, tdacl__program_build_source(ctx, "add1", ADD1_SRC, options, &prog));
    assert_non_null(prog);
    return prog;
}

/* The single entry file of a directory holding exactly one. */
static void only_entry(const char *dir, char *path, size_t n)
{
    assert_int_equal(tu_count_files(dir, ".bin", 0, path, n), 1);
}

/* ---- tests ---- */

static void test_entry_path_naming(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-name");
    tdacl_context *ctx = new_ctx(dir, 1, NULL);
    const char *key = "tdacl-program v1\nsome key text\n";
    char path[1024], want[1024];
    tdacl__cache_entry_path(ctx, key, path, sizeof path);
    snprintf(want, sizeof want, "%s/%016llx.bin", dir, (unsigned long long)ref_fnv1a64(key, strlen(key)));
    assert_string_equal(path, want);
    tdacl_cache_stats s = stats_of(ctx);
    assert_int_equal(s.enabled, 1);
    assert_string_equal(s.dir, dir);
    tu_destroy_checked(ctx);
    tu_rm_rf(dir);
    free(dir);
}

static void test_miss_then_hit(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-hit");
    tu_log log = {0};
    tdacl_context *a = new_ctx(dir, 1, &log);
    assert_stats(a, 0, 0, 0, 0, 0);
    cl_program p = build(a, "");
    assert_stats(a, 0, 1, 0, 1, 0);
    check_add1(a, p);
    assert_true(tu_log_find(&log, TDACL_LOG_INFO, "program 'add1' compiled", NULL) >= 0);

    /* the entry follows the documented layout */
    char path[1024];
    only_entry(dir, path, sizeof path);
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    assert_true(len > HDR);
    assert_memory_equal(f, "TDACLPB2", 8);
    assert_int_equal(le32(f + 8), 2);
    uint32_t klen = le32(f + 12);
    uint64_t plen = le64(f + 16);
    assert_int_equal(len, HDR + (uint64_t)klen + plen);
    assert_true(plen > 0);
    unsigned char want_digest[32];
    sha256_of(f + HDR, klen + plen, want_digest); /* key and payload are adjacent */
    assert_memory_equal(f + 24, want_digest, 32);
    /* the stored key names the device, the full options and the source hash, and its
     * hash names the file */
    char *key = calloc(1, klen + 1);
    assert_non_null(key);
    memcpy(key, f + HDR, klen);
    tdacl_device_info info;
    assert_ok(a, tdacl_context_get_info(a, &info));
    assert_contains(key, info.name);
    assert_contains(key, info.driver_version);
    char line[1024];
    snprintf(line, sizeof line, "options: %s\n", tdacl__base_options(a));
    assert_contains(key, line);
    snprintf(line, sizeof line, "source: %016llx %zu\n",
             (unsigned long long)ref_fnv1a64(ADD1_SRC, strlen(ADD1_SRC)), strlen(ADD1_SRC));
    assert_contains(key, line);
    char named[1024];
    tdacl__cache_entry_path(a, key, named, sizeof named);
    assert_string_equal(named, path);
    free(key);
    free(f);

    /* a second context on the same directory loads it */
    tu_log log2 = {0};
    tdacl_context *b = new_ctx(dir, 1, &log2);
    cl_program q = build(b, "");
    assert_stats(b, 1, 0, 0, 0, 0);
    check_add1(b, q);
    assert_true(tu_log_find(&log2, TDACL_LOG_DEBUG, "'add1' loaded from cache", NULL) >= 0);
    assert_int_equal(tu_log_find(&log2, -1, "compiled", NULL), -1);
    /* and the context's own registry is separate from the disk cache: building again
     * goes through the cache once more */
    build(b, "");
    assert_stats(b, 2, 0, 0, 0, 0);
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 1);

    tu_destroy_checked(a);
    tu_destroy_checked(b);
    tu_log_clear(&log);
    tu_log_clear(&log2);
    tu_rm_rf(dir);
    free(dir);
}

static void test_options_change_key(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-opts");
    tdacl_context *a = new_ctx(dir, 1, NULL);
    build(a, "");
    build(a, "-DUNUSED_OPTION=1");
    assert_stats(a, 0, 2, 0, 2, 0);
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 2);
    tdacl_context *b = new_ctx(dir, 1, NULL);
    check_add1(b, build(b, "-DUNUSED_OPTION=1"));
    build(b, "-DUNUSED_OPTION=2");
    assert_stats(b, 1, 1, 0, 1, 0);
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 3);
    tu_destroy_checked(a);
    tu_destroy_checked(b);
    tu_rm_rf(dir);
    free(dir);
}

/* Builds once to create the entry, lets `damage` modify the file, then checks that a new
 * context rejects it with a warning containing `why`, rebuilds, runs the kernel and
 * leaves a valid entry that a further context hits. */
static void damaged_entry(const char *tag, void (*damage)(const char *path, const char *dir),
                          const char *why)
{
    char *dir = tu_mkdtemp(tag);
    tdacl_context *a = new_ctx(dir, 1, NULL);
    build(a, "");
    tu_destroy_checked(a);
    char path[1024];
    only_entry(dir, path, sizeof path);
    size_t good_len = 0;
    unsigned char *good = tu_read_file(path, &good_len);
    assert_non_null(good);

    damage(path, dir);

    tu_log log = {0};
    tdacl_context *b = new_ctx(dir, 1, &log);
    cl_program p = build(b, "");
    assert_stats(b, 0, 1, 1, 1, 0);
    int w = tu_log_find(&log, TDACL_LOG_WARN, "program cache: discarding", path, why, NULL);
    if (w < 0) {
        tu_log_dump(&log);
        fail_msg("no warning naming %s and '%s'", path, why);
    }
    check_add1(b, p);
    /* the rewritten entry is whole again (same key and payload as the original) */
    size_t len = 0;
    unsigned char *now = tu_read_file(path, &len);
    assert_non_null(now);
    assert_int_equal(len, good_len);
    assert_memory_equal(now, good, len);
    tdacl_context *c = new_ctx(dir, 1, NULL);
    check_add1(c, build(c, ""));
    assert_stats(c, 1, 0, 0, 0, 0);

    free(now);
    free(good);
    tu_destroy_checked(b);
    tu_destroy_checked(c);
    tu_log_clear(&log);
    tu_rm_rf(dir);
    free(dir);
}

static void flip_payload_byte(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    uint32_t klen = le32(f + 12);
    size_t at = HDR + klen + (len - HDR - klen) / 2; /* the middle of the payload */
    f[at] ^= 0x5a;
    tu_write_file(path, f, len);
    free(f);
}

static void forge_fnv(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    uint32_t klen = le32(f + 12);
    f[HDR + klen + 1] ^= 0x01;
    uint64_t sum = ref_fnv1a64(f + HDR + klen, len - HDR - klen);
    for (int i = 0; i < 8; i++) f[24 + i] = (unsigned char)(sum >> (8 * i));
    tu_write_file(path, f, len);
    free(f);
}

static void foreign_payload(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    uint32_t klen = le32(f + 12);
    unsigned char *p = f + HDR + klen;
    for (int i = 0; i < 64; i++) p[i] = (unsigned char)(i * 37 + 11);
    for (int i = 0; i < 8; i++) f[16 + i] = (unsigned char)((uint64_t)64 >> (8 * i));
    uint64_t sum = ref_fnv1a64(p, 64);
    for (int i = 0; i < 8; i++) f[24 + i] = (unsigned char)(sum >> (8 * i));
    tu_write_file(path, f, HDR + klen + 64);
    free(f);
}

/* Entries the cache's user could not have written alone: refused, never handed over. */
static void group_writable(const char *path, const char *dir)
{
    (void)dir;
    assert_int_equal(chmod(path, 0666), 0);
}

static void owned_by_nobody(const char *path, const char *dir)
{
    (void)dir;
    assert_int_equal(chown(path, 65534, 65534), 0);
}

/* A FIFO in an entry's place: opening it must not block. */
static void fifo_entry(const char *path, const char *dir)
{
    (void)dir;
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void test_untrusted_entry(void **state)
{
    (void)state;
    damaged_entry("cache-gw", group_writable, "writable by group or others");
    damaged_entry("cache-fifo", fifo_entry, "not a regular file");
    /* only root can give a file away; CI runs as root */
    if (geteuid() == 0) damaged_entry("cache-nobody", owned_by_nobody, "owned by another user");
    else print_message("not root: the foreign-owner case needs chown and is checked in CI\n");
}

/* A directory others can write (or that is a regular file, or whose path is too long to be
 * used whole) turns the cache off once, with one warning, and the builds still work. */
static void expect_disabled(const char *cache_dir, const char *why)
{
    tu_log log = {0};
    tdacl_context *a = new_ctx(cache_dir, 1, &log);
    assert_int_equal(stats_of(a).enabled, 0);
    if (tu_log_find(&log, TDACL_LOG_WARN, "program cache disabled", why, NULL) < 0) {
        tu_log_dump(&log);
        fail_msg("no warning '%s'", why);
    }
    check_add1(a, build(a, ""));
    check_add1(a, build(a, "-DSECOND=1"));
    assert_int_equal(tu_log_find(&log, TDACL_LOG_WARN, "cannot write", NULL), -1);
    tu_destroy_checked(a);
    tu_log_clear(&log);
}

static void test_untrusted_dir(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-open");
    assert_int_equal(chmod(dir, 0777), 0);
    expect_disabled(dir, "writable by group or others");
    char file[1024];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    tu_write_file(file, "x", 1);
    expect_disabled(file, "Not a directory");
    char longdir[700];
    memset(longdir, 'd', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = 0;
    expect_disabled(longdir, "characters; at most");
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 0);
    tu_rm_rf(dir);
    free(dir);
}

static void truncate_payload(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    tu_write_file(path, f, len - 7);
    free(f);
}

static void truncate_header(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    tu_write_file(path, f, 20);
    free(f);
}

static void append_byte(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    f[len] = 0; /* tu_read_file leaves room for one more byte */
    tu_write_file(path, f, len + 1);
    free(f);
}

static void bad_magic(const char *path, const char *dir)
{
    (void)dir;
    size_t len = 0;
    unsigned char *f = tu_read_file(path, &len);
    assert_non_null(f);
    memcpy(f, "TDACLPB9", 8);
    tu_write_file(path, f, len);
    free(f);
}

static void test_corrupt_entry(void **state)
{
    (void)state;
    damaged_entry("cache-corrupt", flip_payload_byte, "digest mismatch");
    /* the outside test's forgery: a flipped byte with a recomputed 64-bit FNV checksum, and
     * a short foreign payload whose length and FNV checksum were made to match */
    damaged_entry("cache-forged", forge_fnv, "digest mismatch");
    damaged_entry("cache-foreign64", foreign_payload, "digest mismatch");
}

static void test_truncated_entry(void **state)
{
    (void)state;
    damaged_entry("cache-trunc", truncate_payload, "size does not match");
    damaged_entry("cache-trunc-hdr", truncate_header, "truncated header");
    damaged_entry("cache-trailing", append_byte, "size does not match");
    damaged_entry("cache-magic", bad_magic, "not a tdacl cache entry");
}

static void test_foreign_entry(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-foreign");
    tdacl_context *a = new_ctx(dir, 1, NULL);
    build(a, "");
    char path_a[1024];
    only_entry(dir, path_a, sizeof path_a);
    build(a, "-DOTHER_KEY=1");
    tu_destroy_checked(a);
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 2);
    /* find the other entry and copy it over this key's file: a valid entry, wrong key */
    char path_b[1024] = "";
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".bin") && strcmp(p, path_a)) snprintf(path_b, sizeof path_b, "%s", p);
    }
    closedir(d);
    assert_true(path_b[0] != 0);
    size_t len = 0;
    unsigned char *other = tu_read_file(path_b, &len);
    assert_non_null(other);
    tu_write_file(path_a, other, len);
    free(other);

    tu_log log = {0};
    tdacl_context *b = new_ctx(dir, 1, &log);
    cl_program p = build(b, "");
    assert_stats(b, 0, 1, 1, 1, 0);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, path_a, "belongs to another", NULL) >= 0);
    check_add1(b, p);
    /* the other key's own entry was not touched */
    tdacl_context *c = new_ctx(dir, 1, NULL);
    build(c, "-DOTHER_KEY=1");
    build(c, "");
    assert_stats(c, 2, 0, 0, 0, 0);
    tu_destroy_checked(b);
    tu_destroy_checked(c);
    tu_log_clear(&log);
    tu_rm_rf(dir);
    free(dir);
}

static void test_disabled_by_desc(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-off");
    tdacl_context *a = new_ctx(dir, 0, NULL);
    check_add1(a, build(a, ""));
    assert_stats(a, 0, 0, 0, 0, 0);
    assert_int_equal(stats_of(a).enabled, 0);
    assert_int_equal(tu_count_files(dir, "", 1, NULL, 0), 2); /* only "." and ".." */
    /* cache = 1 wins over TDACL_CACHE=off */
    setenv("TDACL_CACHE", "off", 1);
    tdacl_context *b = new_ctx(dir, 1, NULL);
    unsetenv("TDACL_CACHE");
    build(b, "");
    assert_stats(b, 0, 1, 0, 1, 0);
    tu_destroy_checked(a);
    tu_destroy_checked(b);
    tu_rm_rf(dir);
    free(dir);
}

static void test_disabled_by_env(void **state)
{
    (void)state;
    const char *offs[] = {"off", "OFF", "0", "no"};
    for (size_t i = 0; i < sizeof offs / sizeof *offs; i++) {
        char *dir = tu_mkdtemp("cache-env");
        setenv("TDACL_CACHE", offs[i], 1);
        tdacl_context *a = new_ctx(dir, -1, NULL);
        check_add1(a, build(a, ""));
        assert_int_equal(stats_of(a).enabled, 0);
        assert_stats(a, 0, 0, 0, 0, 0);
        assert_int_equal(tu_count_files(dir, "", 1, NULL, 0), 2);
        tu_destroy_checked(a);
        tu_rm_rf(dir);
        free(dir);
    }
    /* any other value leaves it on; so does an unset variable */
    char *dir = tu_mkdtemp("cache-env-on");
    setenv("TDACL_CACHE", "on", 1);
    tdacl_context *a = new_ctx(dir, -1, NULL);
    assert_int_equal(stats_of(a).enabled, 1);
    unsetenv("TDACL_CACHE");
    tdacl_context *b = new_ctx(dir, -1, NULL);
    assert_int_equal(stats_of(b).enabled, 1);
    build(b, "");
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 1);
    tu_destroy_checked(a);
    tu_destroy_checked(b);
    tu_rm_rf(dir);
    free(dir);
}

static void test_cache_dir_from_env(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-envdir");
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/nested/deeper", dir); /* created on demand */
    char *saved = getenv("TDACL_CACHE_DIR") ? strdup(getenv("TDACL_CACHE_DIR")) : NULL;
    setenv("TDACL_CACHE_DIR", sub, 1);
    tdacl_context *a = new_ctx(NULL, 1, NULL);
    if (saved) setenv("TDACL_CACHE_DIR", saved, 1);
    else unsetenv("TDACL_CACHE_DIR");
    free(saved);
    assert_string_equal(stats_of(a).dir, sub);
    build(a, "");
    assert_int_equal(tu_count_files(sub, ".bin", 0, NULL, 0), 1);
    tu_destroy_checked(a);
    tu_rm_rf(dir);
    free(dir);
}

static void test_uncreatable_dir(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-bad");
    char file[1024], sub[1100];
    snprintf(file, sizeof file, "%s/plainfile", dir);
    tu_write_file(file, "x", 1);
    snprintf(sub, sizeof sub, "%s/cache", file); /* below a regular file: cannot exist */
    tu_log log = {0};
    tdacl_context *a = new_ctx(sub, 1, &log);
    assert_int_equal(stats_of(a).enabled, 0);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, "program cache disabled", sub, NULL) >= 0);
    check_add1(a, build(a, ""));
    assert_stats(a, 0, 0, 0, 0, 0);
    tu_destroy_checked(a);
    tu_log_clear(&log);
    tu_rm_rf(dir);
    free(dir);
}

/* A write that cannot land (the entry's name is taken by a directory, which stops root
 * as well) is counted and logged; the build still succeeds. */
static void test_write_failure(void **state)
{
    (void)state;
    char *first = tu_mkdtemp("cache-wf1"), *dir = tu_mkdtemp("cache-wf2");
    tdacl_context *a = new_ctx(first, 1, NULL);
    build(a, "");
    tu_destroy_checked(a);
    char path[1024], blocked[1200];
    only_entry(first, path, sizeof path);
    snprintf(blocked, sizeof blocked, "%s/%s", dir, strrchr(path, '/') + 1);
    assert_int_equal(mkdir(blocked, 0755), 0);

    tu_log log = {0};
    tdacl_context *b = new_ctx(dir, 1, &log);
    cl_program p = build(b, "");
    tdacl_cache_stats s = stats_of(b);
    assert_int_equal(s.hits, 0);
    assert_int_equal(s.writes, 0);
    assert_int_equal(s.write_failures, 1);
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, "program cache: cannot write", blocked, NULL) >= 0);
    check_add1(b, p);
    assert_int_equal(tu_count_files(dir, ".tmp.", 1, NULL, 0), 0); /* the temp file is gone */
    tu_destroy_checked(b);
    tu_log_clear(&log);
    tu_rm_rf(first);
    tu_rm_rf(dir);
    free(first);
    free(dir);
}

/* ---- two processes writing the same entry ---- */

static char self_exe[1024];

/* Child: create a context on `dir`, say "ready" on `ready_fd`, wait until `go_fd` closes,
 * then build and run add1.  Exit status 0 when it compiled and wrote the entry, CHILD_HIT
 * when it loaded the other child's entry, anything else on failure. */
#define CHILD_HIT 10
static int child_main(const char *dir, int ready_fd, int go_fd)
{
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.cache = 1;
    desc.cache_dir = dir;
    desc.use_tuning_db = 0;
    tdacl_context *ctx = NULL;
    if (tdacl_context_create(&desc, &ctx)) {
        fprintf(stderr, "child: %s\n", tdacl_last_error(NULL));
        return 2;
    }
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1) return 3;
    close(ready_fd);
    while (read(go_fd, &c, 1) > 0) {} /* EOF: go */
    close(go_fd);
    cl_program prog;
    int rc = 0;
    if (tdacl__program_build_source(ctx, "add1", ADD1_SRC, "", &prog)) {
        fprintf(stderr, "child: %s\n", tdacl_last_error(ctx));
        rc = 4;
    } else {
        char why[256];
        tdacl_cache_stats s;
        tdacl_context_cache_stats(ctx, &s);
        /* either this child compiled and wrote, or the other one was faster */
        int ok = (s.misses == 1 && s.writes == 1 && s.hits == 0) || (s.hits == 1 && s.misses == 0);
        if (!ok || s.rejected || s.write_failures) {
            fprintf(stderr, "child: stats hits %llu misses %llu rejected %llu writes %llu failures %llu\n",
                    (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.rejected,
                    (unsigned long long)s.writes, (unsigned long long)s.write_failures);
            rc = 5;
        } else if (run_add1(ctx, prog, why, sizeof why)) {
            fprintf(stderr, "child: %s\n", why);
            rc = 6;
        } else if (s.hits) {
            rc = CHILD_HIT;
        }
    }
    tdacl_context_destroy(ctx);
    return rc;
}

static void test_concurrent_writers(void **state)
{
    (void)state;
    char *dir = tu_mkdtemp("cache-race");
    int ready[2], go[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pids[2];
    for (int i = 0; i < 2; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            /* exec a fresh copy: the parent may already run OpenCL threads, which a plain
             * fork() child must not use */
            close(ready[0]);
            close(go[1]);
            char rfd[16], gfd[16];
            snprintf(rfd, sizeof rfd, "%d", ready[1]);
            snprintf(gfd, sizeof gfd, "%d", go[0]);
            execl(self_exe, self_exe, "--cache-child", dir, rfd, gfd, (char *)NULL);
            _exit(127);
        }
    }
    close(ready[1]);
    close(go[0]);
    char c;
    int got = 0;
    while (got < 2 && read(ready[0], &c, 1) == 1) got++;
    close(ready[0]);
    close(go[1]); /* both children build now */
    assert_int_equal(got, 2);
    int writers = 0;
    for (int i = 0; i < 2; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        int rc = WEXITSTATUS(status);
        if (rc != 0 && rc != CHILD_HIT) fail_msg("child %d exited with %d", i, rc);
        writers += rc == 0;
    }
    /* usually both compile and write at once; at least one must have written */
    assert_true(writers >= 1);
    print_message("concurrent writers: %d of 2 children wrote the entry\n", writers);
    assert_int_equal(tu_count_files(dir, ".tmp.", 1, NULL, 0), 0);
    assert_int_equal(tu_count_files(dir, ".bin", 0, NULL, 0), 1);
    tdacl_context *ctx = new_ctx(dir, 1, NULL);
    check_add1(ctx, build(ctx, ""));
    assert_stats(ctx, 1, 0, 0, 0, 0);
    tu_destroy_checked(ctx);
    tu_rm_rf(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--cache-child"))
        return child_main(argv[2], atoi(argv[3]), atoi(argv[4]));
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (n <= 0) snprintf(self_exe, sizeof self_exe, "%s", argv[0]);
    else self_exe[n] = 0;

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entry_path_naming),
        cmocka_unit_test(test_miss_then_hit),
        cmocka_unit_test(test_options_change_key),
        cmocka_unit_test(test_corrupt_entry),
        cmocka_unit_test(test_truncated_entry),
        cmocka_unit_test(test_foreign_entry),
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_untrusted_entry),
        cmocka_unit_test(test_untrusted_dir),
        cmocka_unit_test(test_disabled_by_desc),
        cmocka_unit_test(test_disabled_by_env),
        cmocka_unit_test(test_cache_dir_from_env),
        cmocka_unit_test(test_uncreatable_dir),
        cmocka_unit_test(test_write_failure),
        cmocka_unit_test(test_concurrent_writers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
