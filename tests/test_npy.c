/* .npy reading and writing (src/tools/npy.c): round trips, files laid out exactly as NumPy
 * writes them, and one malformed input per check, each a TDACL_ERR_FORMAT whose message
 * says what is wrong.  Inputs sit in exactly-sized heap buffers so that the sanitizer
 * build catches any read past the end. */
#include <math.h>

#include "common/testutil.h"
#include "tools/npy.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = tu_mkdtemp("npy");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rm_rf(dir);
    free(dir);
    return 0;
}

/* A .npy image: magic, version, header (padded with spaces to a multiple of 64 like
 * NumPy, unless `raw_hlen` >= 0 overrides the length field), then `data_bytes` bytes of
 * float data (i * 0.5). */
static unsigned char *make_npy(int major, const char *dict, size_t data_bytes, long raw_hlen, size_t *len)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = dl + 1;
    hlen += (64 - (pre + hlen) % 64) % 64;
    size_t total = pre + hlen + data_bytes;
    unsigned char *b = malloc(total);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    size_t field = raw_hlen >= 0 ? (size_t)raw_hlen : hlen;
    for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(field >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hlen - dl - 1);
    b[pre + hlen - 1] = '\n';
    for (size_t i = 0; i * 4 + 4 <= data_bytes; i++) {
        float f = 0.5f * (float)i;
        memcpy(b + pre + hlen + 4 * i, &f, 4);
    }
    *len = total;
    return b;
}

/* Parses an exactly-sized copy of buf[0..len) and returns the status. */
static tdacl_status parse_copy(const unsigned char *buf, size_t len, tdacl_npy *out)
{
    unsigned char *exact = malloc(len ? len : 1);
    assert_non_null(exact);
    memcpy(exact, buf, len);
    tdacl_status st = tdacl__npy_parse(exact, len, "probe.npy", out);
    free(exact);
    return st;
}

static void expect_format_error(const char *dict, size_t data_bytes, const char *why, int line)
{
    size_t len = 0;
    unsigned char *b = make_npy(1, dict, data_bytes, -1, &len);
    tdacl_npy a;
    memset(&a, 0x55, sizeof a);
    tdacl_status st = parse_copy(b, len, &a);
    free(b);
    if (st != TDACL_ERR_FORMAT)
        fail_msg("line %d: status %d (%s) for %s; wanted TDACL_ERR_FORMAT", line, (int)st, tdacl_status_str(st), dict);
    if (!strstr(tdacl_last_error(NULL), why) || !strstr(tdacl_last_error(NULL), "probe.npy"))
        fail_msg("line %d: message \"%s\" lacks \"%s\" or the file name", line, tdacl_last_error(NULL), why);
    /* the output is cleared on failure: nothing to free, nothing dangling */
    assert_null(a.data);
    assert_int_equal(a.ndim, 0);
    assert_int_equal(a.count, 0);
}
#define EXPECT_FORMAT(dict, bytes, why) expect_format_error(dict, bytes, why, __LINE__)

static void test_roundtrip(void **state)
{
    (void)state;
    struct { int ndim; int64_t shape[4]; } cases[] = {
        {3, {2, 3, 4}}, {1, {5}}, {0, {0}}, {2, {0, 3}}, {4, {1, 1, 1, 7}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int64_t n = 1;
        for (int i = 0; i < cases[c].ndim; i++) n *= cases[c].shape[i];
        float *x = malloc((size_t)(n ? n : 1) * 4);
        assert_non_null(x);
        for (int64_t i = 0; i < n; i++) x[i] = (float)i * 0.75f - 3.0f;
        if (n > 2) x[1] = NAN, x[2] = -INFINITY;
        char path[1024];
        snprintf(path, sizeof path, "%s/rt%zu.npy", dir, c);
        assert_ok(NULL, tdacl__npy_write(path, cases[c].ndim, cases[c].shape, x));
        /* the header follows the format: 64-byte aligned, newline-terminated, v1.0 */
        size_t len;
        unsigned char *raw = tu_read_file(path, &len);
        assert_non_null(raw);
        assert_memory_equal(raw, "\x93NUMPY\x01\x00", 8);
        size_t hlen = raw[8] | (size_t)raw[9] << 8;
        assert_int_equal((10 + hlen) % 64, 0);
        assert_int_equal(raw[10 + hlen - 1], '\n');
        assert_int_equal(len, 10 + hlen + (size_t)n * 4);
        int has_descr = 0;
        for (size_t i = 0; i + 14 <= len && !has_descr; i++) has_descr = !memcmp(raw + i, "'descr': '<f4'", 14);
        assert_true(has_descr);
        free(raw);

        tdacl_npy a;
        assert_ok(NULL, tdacl__npy_read(path, &a));
        assert_int_equal(a.ndim, cases[c].ndim);
        for (int i = 0; i < a.ndim; i++) assert_int_equal(a.shape[i], cases[c].shape[i]);
        assert_int_equal(a.count, n);
        assert_non_null(a.data);
        if (n) assert_memory_equal(a.data, x, (size_t)n * 4); /* bit-exact, NaN included */
        tdacl__npy_free(&a);
        assert_null(a.data);
        free(x);
    }
}

/* Files as NumPy 1.x writes them (np.save of np.arange(6, dtype='<f4').reshape(2,3) / 2
 * and of a 1-D array), version 2.0 headers and double-quoted keys. */
static void test_numpy_layouts(void **state)
{
    (void)state;
    size_t len = 0;
    tdacl_npy a;
    unsigned char *b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24, -1, &len);
    assert_int_equal(len, 128 + 24);
    assert_ok(NULL, parse_copy(b, len, &a));
    assert_int_equal(a.ndim, 2);
    assert_true(a.shape[0] == 2 && a.shape[1] == 3 && a.count == 6);
    for (int i = 0; i < 6; i++) assert_true(a.data[i] == 0.5f * (float)i);
    tdacl__npy_free(&a);
    free(b);

    b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 16, -1, &len);
    assert_ok(NULL, parse_copy(b, len, &a));
    assert_true(a.ndim == 1 && a.shape[0] == 4 && a.data[3] == 1.5f);
    tdacl__npy_free(&a);
    free(b);

    b = make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 12, -1, &len);
    assert_ok(NULL, parse_copy(b, len, &a));
    assert_true(a.ndim == 1 && a.shape[0] == 3 && a.data[2] == 1.0f);
    tdacl__npy_free(&a);
    free(b);

    b = make_npy(3, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1, 2)}", 8, -1, &len);
    assert_ok(NULL, parse_copy(b, len, &a));
    assert_true(a.ndim == 2 && a.count == 2);
    tdacl__npy_free(&a);
    free(b);

    /* keys in another order, scalar shape () */
    b = make_npy(1, "{'shape': (), 'fortran_order': False, 'descr': '<f4'}", 4, -1, &len);
    assert_ok(NULL, parse_copy(b, len, &a));
    assert_true(a.ndim == 0 && a.count == 1 && a.data[0] == 0.0f);
    tdacl__npy_free(&a);
    free(b);
}

static void test_malformed_header(void **state)
{
    (void)state;
    EXPECT_FORMAT("{'fortran_order': False, 'shape': (2,), }", 8, "no 'descr'");
    EXPECT_FORMAT("{'descr': <f4, 'fortran_order': False, 'shape': (2,), }", 8, "no 'descr'");
    EXPECT_FORMAT("{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }", 8, "dtype");
    EXPECT_FORMAT("{'descr': '<f4", 8, "malformed 'descr'");
    EXPECT_FORMAT("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, "dtype '<f8'");
    EXPECT_FORMAT("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "dtype '>f4'");
    EXPECT_FORMAT("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8, "'<f4'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "fortran_order");
    EXPECT_FORMAT("{'descr': '<f4', 'shape': (2,), }", 8, "no 'fortran_order'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 8, "malformed 'fortran_order'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, }", 8, "no 'shape'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 2], }", 16, "no 'shape' tuple");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", 16, "malformed 'shape'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (2 2), }", 16, "malformed 'shape'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, "malformed 'shape'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8, "malformed 'shape'");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, "more than 8 dims");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 4, "out of range");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 4,
                  "shape product overflows");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, "has 20 data bytes");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28, "holds 6 floats (24 bytes)");
    EXPECT_FORMAT("{'descr': '<f4', 'fortran_order': False, 'shape': (0,), }", 4, "has 4 data bytes");
}

static void test_malformed_framing(void **state)
{
    (void)state;
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    size_t len = 0;
    tdacl_npy a;
    unsigned char *b = make_npy(1, good, 8, -1, &len);

    /* bad magic, and files too short to hold one */
    unsigned char *m = malloc(len);
    assert_non_null(m);
    memcpy(m, b, len);
    m[1] = 'X';
    assert_status(NULL, parse_copy(m, len, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "bad magic");
    free(m);
    for (size_t cut = 0; cut < 10; cut++) {
        assert_status(NULL, parse_copy(b, cut, &a), TDACL_ERR_FORMAT);
        assert_contains(tdacl_last_error(NULL), "probe.npy");
    }
    /* truncated anywhere after the magic: header or data */
    for (size_t cut = 10; cut < len; cut++) {
        tdacl_status st = parse_copy(b, cut, &a);
        if (st != TDACL_ERR_FORMAT) fail_msg("cut at %zu of %zu: status %d", cut, len, (int)st);
    }
    assert_status(NULL, parse_copy(b, 20, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "runs past the end");
    assert_status(NULL, parse_copy(b, len - 1, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "data bytes");

    /* unsupported versions */
    const int versions[] = {0, 4, 255};
    for (size_t i = 0; i < 3; i++) {
        unsigned char *v = make_npy(1, good, 8, -1, &len);
        v[6] = (unsigned char)versions[i];
        assert_status(NULL, parse_copy(v, len, &a), TDACL_ERR_FORMAT);
        char want[48];
        snprintf(want, sizeof want, "unsupported .npy version %d.0", versions[i]);
        assert_contains(tdacl_last_error(NULL), want);
        free(v);
    }
    /* a header length past the end, for v1 and v2 length fields */
    unsigned char *h = make_npy(1, good, 8, 0xffff, &len);
    assert_status(NULL, parse_copy(h, len, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "header length 65535 runs past the end");
    free(h);
    h = make_npy(2, good, 8, 0x7fffffff, &len);
    assert_status(NULL, parse_copy(h, len, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "runs past the end");
    free(h);
    /* v2 needs 12 bytes before the header */
    h = make_npy(2, good, 8, -1, &len);
    assert_status(NULL, parse_copy(h, 11, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "truncated .npy header");
    free(h);
    /* a header larger than any real one, yet inside the file */
    char big[70100];
    snprintf(big, sizeof big, "%s", good);
    memset(big + strlen(good), ' ', 70000);
    big[strlen(good) + 70000] = 0;
    h = make_npy(2, big, 8, -1, &len);
    assert_status(NULL, parse_copy(h, len, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "implausibly long");
    free(h);
    /* a NUL byte inside the header */
    h = make_npy(1, good, 8, -1, &len);
    h[12] = 0;
    assert_status(NULL, parse_copy(h, len, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), "NUL byte");
    free(h);
    free(b);
}

static void test_io_errors(void **state)
{
    (void)state;
    tdacl_npy a;
    char path[1024];
    snprintf(path, sizeof path, "%s/does-not-exist.npy", dir);
    assert_status(NULL, tdacl__npy_read(path, &a), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(NULL), path);
    assert_null(a.data);
    /* a file that exists but is malformed reports its path */
    snprintf(path, sizeof path, "%s/garbage.npy", dir);
    tu_write_file(path, "not an npy file at all", 22);
    assert_status(NULL, tdacl__npy_read(path, &a), TDACL_ERR_FORMAT);
    assert_contains(tdacl_last_error(NULL), path);
    snprintf(path, sizeof path, "%s/empty.npy", dir);
    tu_write_file(path, "", 0);
    assert_status(NULL, tdacl__npy_read(path, &a), TDACL_ERR_FORMAT);
    /* a directory opens and "seeks" to LONG_MAX on Linux; it must fail cleanly */
    assert_status(NULL, tdacl__npy_read(dir, &a), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(NULL), "not a regular file");
    /* writes */
    const int64_t shape[2] = {2, 2};
    const float x[4] = {1, 2, 3, 4};
    snprintf(path, sizeof path, "%s/no/such/dir/x.npy", dir);
    assert_status(NULL, tdacl__npy_write(path, 2, shape, x), TDACL_ERR_IO);
    assert_contains(tdacl_last_error(NULL), path);
    snprintf(path, sizeof path, "%s/x.npy", dir);
    assert_status(NULL, tdacl__npy_write(path, 9, shape, x), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl__npy_write(path, -1, shape, x), TDACL_ERR_INVALID_ARGUMENT);
    assert_false(tu_exists(path));
    /* the largest rank writes and reads back */
    const int64_t s8[8] = {1, 2, 1, 2, 1, 1, 1, 1};
    assert_ok(NULL, tdacl__npy_write(path, 8, s8, x));
    assert_ok(NULL, tdacl__npy_read(path, &a));
    assert_int_equal(a.ndim, 8);
    assert_int_equal(a.count, 4);
    assert_memory_equal(a.data, x, sizeof x);
    tdacl__npy_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_numpy_layouts),
        cmocka_unit_test(test_malformed_header),
        cmocka_unit_test(test_malformed_framing),
        cmocka_unit_test(test_io_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
