/* Status strings, last-error messages (per thread and per context), the log (context
 * callback, process-wide sink, $TDACL_LOG) and the argument checks of every public call:
 * NULL handles and bad descriptors return the documented status with a message that
 * names the field.  No kernel is launched here: every attention call fails validation. */
#include <math.h>
#include <pthread.h>

#include "common/clcheck.h"

static tdacl_context *ctx;

static int setup(void **state)
{
    (void)state;
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    if (tdacl_context_create(&desc, &ctx)) {
        print_error("context: %s\n", tdacl_last_error(NULL));
        return -1;
    }
    return 0;
}

/* Runs last (cmocka ignores failures in a group teardown). */
static void test_release_context(void **state)
{
    (void)state;
    assert_int_equal(ctx->live_tensors, 0);
    tu_destroy_checked(ctx);
    ctx = NULL;
}

static int teardown(void **state)
{
    (void)state;
    tdacl_log_set_callback(NULL, NULL, -1);
    tdacl_context_destroy(ctx); /* only when a test failed before test_release_context */
    return 0;
}

/* ---- status strings, version ---- */

static void test_status_strings(void **state)
{
    (void)state;
    const char *s[TDACL_ERR_INTERNAL + 1];
    for (int i = TDACL_SUCCESS; i <= TDACL_ERR_INTERNAL; i++) {
        s[i] = tdacl_status_str((tdacl_status)i);
        assert_non_null(s[i]);
        assert_true(s[i][0] != '\0');
        assert_string_not_equal(s[i], "unknown status");
        for (int j = 0; j < i; j++)
            if (!strcmp(s[i], s[j])) fail_msg("statuses %d and %d share the text \"%s\"", i, j, s[i]);
    }
    assert_string_equal(tdacl_status_str(TDACL_SUCCESS), "success");
    assert_string_equal(tdacl_status_str(TDACL_ERR_INVALID_ARGUMENT), "invalid argument");
    const int unknown[] = {TDACL_ERR_INTERNAL + 1, -1, 1000, INT32_MIN};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
        assert_string_equal(tdacl_status_str((tdacl_status)unknown[i]), "unknown status");
}

static void test_version(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TDACL_VERSION_MAJOR, TDACL_VERSION_MINOR, TDACL_VERSION_PATCH);
    assert_string_equal(tdacl_version(), want);
    assert_non_null(tdacl_git_revision());
    assert_true(tdacl_git_revision()[0] != '\0');
}

/* ---- last-error messages ---- */

static void *other_thread(void *arg)
{
    char *result = arg;
    /* a new thread starts with no message, and its failures stay its own */
    snprintf(result, 256, "start:%s|", tdacl_last_error(NULL));
    tdacl_device_get_info(0, NULL);
    size_t n = strlen(result);
    snprintf(result + n, 256 - n, "after:%s", tdacl_last_error(NULL));
    return NULL;
}

static void test_thread_local_error(void **state)
{
    (void)state;
    assert_status(NULL, tdacl_device_count(NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "tdacl_device_count: count is NULL");
    char result[256] = "";
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, result), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_contains(result, "start:|");
    assert_contains(result, "after:tdacl_device_get_info: info is NULL");
    assert_contains(tdacl_last_error(NULL), "tdacl_device_count: count is NULL");
}

static void test_context_error(void **state)
{
    (void)state;
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    tdacl_context *other = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &other));
    assert_string_equal(tdacl_last_error(other), "");
    assert_string_equal(tdacl_build_log(other), "");
    const int64_t shape[1] = {4};
    tdacl_tensor *t = NULL;
    assert_status(ctx, tdacl_tensor_create(ctx, (tdacl_dtype)9, 1, shape, &t), TDACL_ERR_DTYPE);
    assert_contains(tdacl_last_error(ctx), "tdacl_tensor_create: dtype 9");
    assert_string_equal(tdacl_last_error(NULL), tdacl_last_error(ctx)); /* the thread's too */
    assert_string_equal(tdacl_last_error(other), "");                 /* not the other's */
    assert_status(other, tdacl_tensor_create(other, TDACL_F32, 1, NULL, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(other), "shape is NULL");
    assert_contains(tdacl_last_error(ctx), "dtype 9"); /* unchanged */
    tdacl_context_destroy(other);
}

/* ---- the log ---- */

static void test_context_log_callback(void **state)
{
    (void)state;
    tdacl_device_info info;
    assert_ok(ctx, tdacl_context_get_info(ctx, &info));
    tu_log log = {0};
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    desc.cache = 0;
    desc.log_fn = tu_log_fn;
    desc.log_user = &log;
    desc.log_level = TDACL_LOG_DEBUG;
    tdacl_context *c = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    assert_true(tu_log_find(&log, TDACL_LOG_INFO, "context on [", info.name, info.arch, NULL) >= 0);
    assert_true(tu_log_find(&log, TDACL_LOG_DEBUG, "program cache off", NULL) >= 0);
    /* failures are logged at debug level with their status */
    tdacl_tensor *t;
    tdacl_tensor_create(c, TDACL_F32, 1, NULL, &t);
    assert_true(tu_log_find(&log, TDACL_LOG_DEBUG, "error (invalid argument)", "shape is NULL", NULL) >= 0);
    /* a compile announces itself at info level */
    cl_program prog;
    assert_ok(c, tdacl__program_build_source(c, "log-probe", "__kernel void k(__global int *x) { x[0] = 1; }", "", &prog));
    assert_true(tu_log_find(&log, TDACL_LOG_INFO, "program 'log-probe' compiled", NULL) >= 0);
    for (int i = 0; i < log.count; i++) assert_true(log.level[i] <= TDACL_LOG_ERROR);
    tdacl_context_destroy(c);
    tu_log_clear(&log);

    /* the level filters: at warn, none of the above arrives */
    desc.log_level = TDACL_LOG_WARN;
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    tdacl_tensor_create(c, TDACL_F32, 1, NULL, &t);
    assert_ok(c, tdacl__program_build_source(c, "log-probe", "__kernel void k(__global int *x) { x[0] = 1; }", "", &prog));
    assert_int_equal(log.count, 0);
    tdacl_context_destroy(c);
    /* off silences even warnings (a cache directory that cannot exist warns) */
    desc.log_level = TDACL_LOG_OFF;
    desc.cache = 1;
    desc.cache_dir = "/proc/tdacl-cannot-exist/cache";
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    assert_int_equal(log.count, 0);
    tdacl_context_destroy(c);
    desc.log_level = TDACL_LOG_WARN;
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    assert_true(tu_log_find(&log, TDACL_LOG_WARN, "program cache disabled", "/proc/tdacl-cannot-exist", NULL) >= 0);
    tdacl_context_destroy(c);
    tu_log_clear(&log);
}

static void test_global_log_sink(void **state)
{
    (void)state;
    tu_log glog = {0}, clog = {0};
    assert_ok(NULL, tdacl_log_set_callback(tu_log_fn, &glog, TDACL_LOG_DEBUG));
    /* messages without a context */
    tdacl_device_count(NULL);
    assert_true(tu_log_find(&glog, TDACL_LOG_DEBUG, "error (invalid argument)", "count is NULL", NULL) >= 0);
    /* contexts without their own callback use the sink */
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 0;
    tdacl_context *c = NULL;
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    assert_true(tu_log_find(&glog, TDACL_LOG_INFO, "context on [", NULL) >= 0);
    tdacl_context_destroy(c);
    /* contexts with one do not */
    tu_log_clear(&glog);
    desc.log_fn = tu_log_fn;
    desc.log_user = &clog;
    assert_ok(NULL, tdacl_context_create(&desc, &c));
    assert_true(tu_log_find(&clog, TDACL_LOG_INFO, "context on [", NULL) >= 0);
    assert_int_equal(tu_log_find(&glog, -1, "context on [", NULL), -1);
    tdacl_context_destroy(c);

    /* level -1 follows $TDACL_LOG, read at each message */
    tu_log_clear(&glog);
    assert_ok(NULL, tdacl_log_set_callback(tu_log_fn, &glog, -1));
    setenv("TDACL_LOG", "error", 1);
    tdacl_device_count(NULL);
    assert_int_equal(glog.count, 0);
    setenv("TDACL_LOG", "DEBUG", 1);
    tdacl_device_count(NULL);
    assert_int_equal(glog.count, 1);
    setenv("TDACL_LOG", "off", 1);
    tdacl_device_count(NULL);
    assert_int_equal(glog.count, 1);
    unsetenv("TDACL_LOG");
    assert_int_equal(tdacl__log_level_from_env(), TDACL_LOG_WARN);
    setenv("TDACL_LOG", "nonsense", 1);
    assert_int_equal(tdacl__log_level_from_env(), TDACL_LOG_WARN);
    setenv("TDACL_LOG", "info", 1);
    assert_int_equal(tdacl__log_level_from_env(), TDACL_LOG_INFO);
    unsetenv("TDACL_LOG");

    /* bad levels are refused and leave the sink as it was */
    assert_status(NULL, tdacl_log_set_callback(NULL, NULL, TDACL_LOG_OFF + 1), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "level 5");
    assert_ok(NULL, tdacl_log_set_callback(NULL, NULL, -1)); /* back to stderr */
    tdacl_device_count(NULL);
    assert_int_equal(glog.count, 1);
    tu_log_clear(&glog);
    tu_log_clear(&clog);
}

/* ---- NULL handles and bad arguments, call by call through tdacl.h ---- */

static void test_context_calls(void **state)
{
    (void)state;
    tdacl_context_desc_init(NULL); /* no crash */
    tdacl_attention_desc_init(NULL);
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    assert_int_equal(desc.cache, -1);
    assert_int_equal(desc.use_tuning_db, 1);
    assert_int_equal(desc.log_level, -1);
    assert_null(desc.device);
    assert_null(desc.log_fn);
    tdacl_context *c = (tdacl_context *)0x1;
    assert_status(NULL, tdacl_context_create(&desc, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "out is NULL");
    desc.log_level = TDACL_LOG_OFF + 1;
    assert_status(NULL, tdacl_context_create(&desc, &c), TDACL_ERR_INVALID_ARGUMENT);
    assert_null(c);
    assert_contains(tdacl_last_error(NULL), "desc.log_level");
    tdacl_context_desc_init(&desc);
    desc.cache = 2;
    assert_status(NULL, tdacl_context_create(&desc, &c), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "desc.cache");
    desc.cache = -2;
    assert_status(NULL, tdacl_context_create(&desc, &c), TDACL_ERR_INVALID_ARGUMENT);
    tdacl_context_desc_init(&desc);
    desc.use_tuning_db = 7;
    assert_status(NULL, tdacl_context_create(&desc, &c), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "desc.use_tuning_db must be 0 or 1 (got 7)");
    /* NULL desc means the defaults */
    assert_ok(NULL, tdacl_context_create(NULL, &c));
    assert_non_null(c);
    assert_ok(NULL, tdacl_context_destroy(c));

    assert_ok(NULL, tdacl_context_destroy(NULL));
    tdacl_device_info info;
    assert_status(NULL, tdacl_context_get_info(NULL, &info), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "ctx is NULL");
    assert_status(ctx, tdacl_context_get_info(ctx, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "info is NULL");
    assert_status(NULL, tdacl_finish(NULL), TDACL_ERR_INVALID_ARGUMENT);
    tdacl_cache_stats cs;
    assert_status(NULL, tdacl_context_cache_stats(NULL, &cs), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_context_cache_stats(ctx, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "stats is NULL");
    assert_string_equal(tdacl_build_log(NULL), "");
    tdacl_peak peak;
    assert_status(NULL, tdacl_measure_peak(NULL, &peak), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(ctx, tdacl_measure_peak(ctx, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(ctx), "peak is NULL");
}

static void test_tensor_calls(void **state)
{
    (void)state;
    const int64_t shape[1] = {4}, st[1] = {1};
    tdacl_tensor *t = NULL;
    int nd;
    int64_t n;
    tdacl_dtype dt;
    float buf[4] = {0};
    assert_status(NULL, tdacl_tensor_create(NULL, TDACL_F32, 1, shape, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "ctx is NULL");
    assert_status(NULL, tdacl_tensor_view(NULL, 1, shape, st, 0, &t), TDACL_ERR_INVALID_ARGUMENT);
    assert_ok(NULL, tdacl_tensor_destroy(NULL));
    assert_status(NULL, tdacl_tensor_ndim(NULL, &nd), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "t is NULL");
    assert_status(NULL, tdacl_tensor_shape(NULL, NULL, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_dtype(NULL, &dt), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_numel(NULL, &n), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_upload(NULL, buf, TDACL_F32, 4), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_download(NULL, buf, TDACL_F32, 4), TDACL_ERR_INVALID_ARGUMENT);
    assert_status(NULL, tdacl_tensor_copy(NULL, NULL), TDACL_ERR_INVALID_ARGUMENT);
}

/* The attention fixture: valid f32 tensors q,k,v,out [1,2,8,16] and a two-view pair. */
typedef struct attn_set {
    tdacl_tensor *q, *k, *v, *out, *q2, *k2;
} attn_set;

static tdacl_tensor *tensor4(tdacl_context *c, tdacl_dtype dt, int64_t b, int64_t h, int64_t t, int64_t d)
{
    const int64_t shape[4] = {b, h, t, d};
    tdacl_tensor *x = NULL;
    assert_ok(c, tdacl_tensor_create(c, dt, 4, shape, &x));
    return x;
}

static tdacl_attention_tensors tensors_of(const attn_set *s)
{
    tdacl_attention_tensors t;
    memset(&t, 0, sizeof t);
    t.q = s->q, t.k = s->k, t.v = s->v, t.out = s->out;
    return t;
}

/* tdacl_attention(ctx, d, t) must fail with `want` and a message containing `field`. */
static void expect_attn(const tdacl_attention_desc *d, const tdacl_attention_tensors *t, tdacl_status want,
                        const char *field, int line)
{
    tdacl_attention_stats stats;
    tdacl_status st = tdacl_attention(ctx, d, t, &stats);
    if (st != want)
        fail_msg("line %d: tdacl_attention returned %d (%s), wanted %d; message: %s", line, (int)st,
                 tdacl_status_str(st), (int)want, tdacl_last_error(ctx));
    if (!strstr(tdacl_last_error(ctx), field))
        fail_msg("line %d: message \"%s\" does not name \"%s\"", line, tdacl_last_error(ctx), field);
}
#define EXPECT_ATTN(d, t, want, field) expect_attn(d, t, want, field, __LINE__)

static void test_attention_desc_defaults(void **state)
{
    (void)state;
    tdacl_attention_desc d;
    memset(&d, 0x7f, sizeof d);
    tdacl_attention_desc_init(&d);
    assert_int_equal(d.kind, TDACL_ATTN_TRA);
    assert_true(d.beta == 1.0f && d.kappa == 1.0f && d.power == 2.0f && d.lambda == 0.5f);
    assert_true(isnan(d.scale));
    assert_int_equal(d.normalize, 1);
    assert_int_equal(d.norm, TDACL_NORM_NONE);
    assert_true(d.norm_eps == 1e-5f && d.out_scale == 1.0f);
    assert_int_equal(d.offset, -1);
    assert_int_equal(d.want_stats, 0);
    assert_int_equal(d.path, TDACL_PATH_AUTO);
}

static void test_attention_bad_descriptors(void **state)
{
    (void)state;
    attn_set s = {tensor4(ctx, TDACL_F32, 1, 2, 8, 16), tensor4(ctx, TDACL_F32, 1, 2, 8, 16),
                  tensor4(ctx, TDACL_F32, 1, 2, 8, 16), tensor4(ctx, TDACL_F32, 1, 2, 8, 16), NULL, NULL};
    tdacl_attention_tensors t = tensors_of(&s);
    tdacl_attention_desc base, d;
    tdacl_attention_desc_init(&base);

    assert_status(NULL, tdacl_attention(NULL, &base, &t, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_contains(tdacl_last_error(NULL), "ctx is NULL");
    EXPECT_ATTN(NULL, &t, TDACL_ERR_INVALID_ARGUMENT, "desc is NULL");
    EXPECT_ATTN(&base, NULL, TDACL_ERR_INVALID_ARGUMENT, "tensors is NULL");

#define BAD(field_expr, text)                                                                \
    do {                                                                                     \
        d = base;                                                                            \
        field_expr;                                                                          \
        EXPECT_ATTN(&d, &t, TDACL_ERR_INVALID_ARGUMENT, text);                               \
    } while (0)
    BAD(d.kind = (tdacl_attention_kind)7, "desc.kind");
    BAD(d.kind = (tdacl_attention_kind)-1, "desc.kind");
    BAD(d.beta = -0.5f, "desc.beta");
    BAD(d.beta = NAN, "desc.beta");
    BAD(d.beta = INFINITY, "desc.beta");
    BAD(d.kappa = 0.0f, "desc.kappa");
    BAD(d.kappa = -1.0f, "desc.kappa");
    BAD(d.power = 0.5f, "desc.power");
    BAD(d.power = NAN, "desc.power");
    BAD(d.lambda = INFINITY, "desc.lambda");
    BAD(d.scale = INFINITY, "desc.scale");
    BAD(d.normalize = 2, "desc.normalize");
    BAD(d.norm = (tdacl_head_norm)2, "desc.norm");
    BAD(d.norm_eps = 0.0f, "desc.norm_eps");
    BAD(d.out_scale = NAN, "desc.out_scale");
    BAD(d.offset = -2, "desc.offset");
    BAD(d.path = (tdacl_attention_path)3, "desc.path");
    BAD(d.want_stats = 2, "desc.want_stats");
#undef BAD

    /* missing tensors */
    tdacl_attention_tensors u;
    u = t, u.q = NULL;
    EXPECT_ATTN(&base, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor q is NULL");
    u = t, u.k = NULL;
    EXPECT_ATTN(&base, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor k is NULL");
    u = t, u.v = NULL;
    EXPECT_ATTN(&base, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor v is NULL");
    u = t, u.out = NULL;
    EXPECT_ATTN(&base, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor out is NULL");

    /* two-view kinds need q2 and k2; one-view kinds refuse them */
    d = base, d.kind = TDACL_ATTN_TDA;
    EXPECT_ATTN(&d, &t, TDACL_ERR_INVALID_ARGUMENT, "q2 and k2");
    d.kind = TDACL_ATTN_DIFF_SOFTMAX;
    EXPECT_ATTN(&d, &t, TDACL_ERR_INVALID_ARGUMENT, "q2 and k2");
    u = t, u.q2 = s.q;
    d.kind = TDACL_ATTN_TDA;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "q2 and k2");
    u.k2 = s.k;
    EXPECT_ATTN(&base, &u, TDACL_ERR_INVALID_ARGUMENT, "q2/k2 given");
    tdacl_tensor *q2bad = tensor4(ctx, TDACL_F32, 1, 2, 7, 16);
    u.q2 = q2bad;
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "q2.shape[2]");

    tdacl_tensor *all[] = {s.q, s.k, s.v, s.out};
    for (int i = 0; i < 4; i++) assert_ok(ctx, tdacl_tensor_destroy(all[i]));
    assert_ok(ctx, tdacl_tensor_destroy(q2bad));
}

static void test_attention_bad_tensors(void **state)
{
    (void)state;
    tdacl_tensor *q = tensor4(ctx, TDACL_F32, 1, 2, 8, 16), *k = tensor4(ctx, TDACL_F32, 1, 2, 8, 16),
                 *v = tensor4(ctx, TDACL_F32, 1, 2, 8, 16), *out = tensor4(ctx, TDACL_F32, 1, 2, 8, 16);
    tdacl_attention_desc d;
    tdacl_attention_desc_init(&d);
    tdacl_attention_tensors t = {q, k, v, NULL, NULL, NULL, out, NULL, NULL, NULL, NULL, NULL}, u;
    tdacl_tensor *made[40];
    int nmade = 0;
#define MAKE(dt, b, h, tt, dd) (made[nmade++] = tensor4(ctx, dt, b, h, tt, dd))

    const int64_t s3[3] = {2, 8, 16};
    tdacl_tensor *q3 = NULL;
    assert_ok(ctx, tdacl_tensor_create(ctx, TDACL_F32, 3, s3, &q3));
    made[nmade++] = q3;
    u = t, u.q = q3;
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "q must have 4 dims");
    u = t, u.k = MAKE(TDACL_F32, 1, 3, 8, 16);
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "k.shape[1] (H) is 3, expected 2");
    u = t, u.k = MAKE(TDACL_F32, 1, 2, 8, 8);
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "k.shape[3]");
    u = t, u.v = MAKE(TDACL_F32, 1, 2, 9, 16);
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "v.shape[2]");
    u = t, u.out = MAKE(TDACL_F32, 1, 2, 8, 12);
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "out.shape[3]");
    u = t, u.out = MAKE(TDACL_F32, 2, 2, 8, 16);
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "out.shape[0]");
    /* dtypes: q, k, v share one */
    u = t, u.k = MAKE(TDACL_BF16, 1, 2, 8, 16);
    EXPECT_ATTN(&d, &u, TDACL_ERR_DTYPE, "k is bf16 but q is f32");
    u = t, u.v = MAKE(TDACL_F16, 1, 2, 8, 16);
    EXPECT_ATTN(&d, &u, TDACL_ERR_DTYPE, "v is f16");
    /* head dims and lengths */
    tdacl_tensor *qd = MAKE(TDACL_F32, 1, 1, 1, 300), *kd = MAKE(TDACL_F32, 1, 1, 1, 300),
                 *vd = MAKE(TDACL_F32, 1, 1, 1, 4), *od = MAKE(TDACL_F32, 1, 1, 1, 4);
    u = (tdacl_attention_tensors){qd, kd, vd, NULL, NULL, NULL, od, NULL, NULL, NULL, NULL, NULL};
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "d=300");
    tdacl_tensor *vdv = MAKE(TDACL_F32, 1, 2, 8, 300), *odv = MAKE(TDACL_F32, 1, 2, 8, 300);
    u = t, u.v = vdv, u.out = odv;
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "dv=300");
    tdacl_tensor *k0 = MAKE(TDACL_F32, 1, 2, 0, 16), *v0 = MAKE(TDACL_F32, 1, 2, 0, 16);
    u = t, u.k = k0, u.v = v0;
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "no keys");
    tdacl_tensor *k4 = MAKE(TDACL_F32, 1, 2, 4, 16), *v4 = MAKE(TDACL_F32, 1, 2, 4, 16);
    u = t, u.k = k4, u.v = v4;
    EXPECT_ATTN(&d, &u, TDACL_ERR_SHAPE, "desc.offset");
    /* positions: offset + Tq must fit the kernels' 32-bit positions; no overflow on the way */
    tdacl_attention_desc big = d;
    big.offset = INT64_MAX;
    EXPECT_ATTN(&big, &t, TDACL_ERR_INVALID_ARGUMENT, "exceeds the largest position");
    big.offset = TDACL_MAX_POSITION - 8 + 1; /* Tq = 8 */
    EXPECT_ATTN(&big, &t, TDACL_ERR_INVALID_ARGUMENT, "exceeds the largest position");
    big.path = TDACL_PATH_DECODE;
    EXPECT_ATTN(&big, &t, TDACL_ERR_INVALID_ARGUMENT, "exceeds the largest position");
    /* an output view whose strides send several elements to one place */
    const int64_t oshape[4] = {1, 2, 8, 16}, zero[4] = {0, 0, 0, 0}, rowdup[4] = {256, 128, 0, 1};
    tdacl_tensor *ozero = NULL, *odup = NULL, *obase = MAKE(TDACL_F32, 1, 2, 8, 16);
    assert_ok(ctx, tdacl_tensor_view(obase, 4, oshape, zero, 0, &ozero));
    assert_ok(ctx, tdacl_tensor_view(obase, 4, oshape, rowdup, 0, &odup));
    made[nmade++] = ozero;
    made[nmade++] = odup;
    u = t, u.out = ozero;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "out is a view whose strides map several elements");
    u = t, u.out = odup;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "out is a view whose strides map several elements");
    /* out may not overlap an input */
    u = t, u.out = q;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "out overlaps the storage of q");
    /* gain: only with rms, only [dv] */
    const int64_t g16[1] = {16}, g8[1] = {8};
    tdacl_tensor *gain = NULL, *gain8 = NULL;
    assert_ok(ctx, tdacl_tensor_create(ctx, TDACL_F32, 1, g16, &gain));
    assert_ok(ctx, tdacl_tensor_create(ctx, TDACL_F32, 1, g8, &gain8));
    made[nmade++] = gain;
    made[nmade++] = gain8;
    u = t, u.gain = gain;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "desc.norm is not rms");
    tdacl_attention_desc rms = d;
    rms.norm = TDACL_NORM_RMS;
    u.gain = gain8;
    EXPECT_ATTN(&rms, &u, TDACL_ERR_SHAPE, "gain must be a 1-D tensor of length dv=16");
    /* the decode path takes at most 16 query rows */
    tdacl_tensor *q17 = MAKE(TDACL_F32, 1, 2, 17, 16), *o17 = MAKE(TDACL_F32, 1, 2, 17, 16);
    tdacl_tensor *k32 = MAKE(TDACL_F32, 1, 2, 32, 16), *v32 = MAKE(TDACL_F32, 1, 2, 32, 16);
    u = (tdacl_attention_tensors){q17, k32, v32, NULL, NULL, NULL, o17, NULL, NULL, NULL, NULL, NULL};
    tdacl_attention_desc dec = d;
    dec.path = TDACL_PATH_DECODE;
    EXPECT_ATTN(&dec, &u, TDACL_ERR_INVALID_ARGUMENT, "decode path takes Tq <= 16");
    /* tensors of another context */
    tdacl_context_desc cd;
    tdacl_context_desc_init(&cd);
    cd.use_tuning_db = 0;
    tdacl_context *other = NULL;
    assert_ok(NULL, tdacl_context_create(&cd, &other));
    tdacl_tensor *kx = tensor4(other, TDACL_F32, 1, 2, 8, 16);
    u = t, u.k = kx;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor k belongs to another context");
    /* q too (it was once taken on trust), and every other role */
    u = t, u.q = kx;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor q belongs to another context");
    u = t, u.v = kx;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor v belongs to another context");
    u = t, u.out = kx;
    EXPECT_ATTN(&d, &u, TDACL_ERR_INVALID_ARGUMENT, "tensor out belongs to another context");
    assert_ok(other, tdacl_tensor_destroy(kx));
    tdacl_context_destroy(other);
#undef MAKE
    for (int i = 0; i < nmade; i++) assert_ok(ctx, tdacl_tensor_destroy(made[i]));
    tdacl_tensor *base[] = {q, k, v, out};
    for (int i = 0; i < 4; i++) assert_ok(ctx, tdacl_tensor_destroy(base[i]));
    assert_int_equal(ctx->live_tensors, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_thread_local_error),
        cmocka_unit_test(test_context_error),
        cmocka_unit_test(test_context_log_callback),
        cmocka_unit_test(test_global_log_sink),
        cmocka_unit_test(test_context_calls),
        cmocka_unit_test(test_tensor_calls),
        cmocka_unit_test(test_attention_desc_defaults),
        cmocka_unit_test(test_attention_bad_descriptors),
        cmocka_unit_test(test_attention_bad_tensors),
        cmocka_unit_test(test_release_context), /* last */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
