/* Kernel build failures: a status, a message naming the program, the compiler log through
 * tdacl_build_log() and the error log line; nothing is cached and the context stays
 * usable. */
#include "common/clcheck.h"
#include "ops/variants.h"

static const char *BROKEN_SRC =
    "__kernel void broken(__global float *x)\n"
    "{\n"
    "    x[get_global_id(0)] = tdacl_undefined_symbol_42 + 1.0f;\n"
    "}\n";

static const char *GOOD_SRC =
    "__kernel void twice(__global float *x) { x[get_global_id(0)] *= 2.0f; }\n";

typedef struct fixture {
    char *dir;
    tu_log log;
    tdacl_context *ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->dir = tu_mkdtemp("build-error");
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.cache = 1;
    desc.cache_dir = f->dir;
    desc.use_tuning_db = 0;
    desc.log_fn = tu_log_fn;
    desc.log_user = &f->log;
    desc.log_level = TDACL_LOG_DEBUG;
    if (tdacl_context_create(&desc, &f->ctx)) {
        print_error("context: %s\n", tdacl_last_error(NULL));
        return -1;
    }
    *state = f;
    return 0;
}

/* Runs last (cmocka ignores failures in a group teardown): failed builds left no
 * program or kernel behind. */
static void test_release_context(void **state)
{
    fixture *f = *state;
    tu_destroy_checked(f->ctx);
    f->ctx = NULL;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tdacl_context_destroy(f->ctx); /* only when a test failed before test_release_context */
    tu_log_clear(&f->log);
    tu_rm_rf(f->dir);
    free(f->dir);
    free(f);
    return 0;
}

static void test_broken_source(void **state)
{
    fixture *f = *state;
    tu_log_clear(&f->log);
    assert_string_equal(tdacl_build_log(f->ctx), "");
    cl_program prog = (cl_program)0x1;
    assert_status(f->ctx, tdacl__program_build_source(f->ctx, "my-broken-label", BROKEN_SRC, "-DSOME_OPT=3", &prog),
                  TDACL_ERR_BUILD);
    assert_true(prog == (cl_program)0x1); /* untouched on failure */
    const char *log = tdacl_build_log(f->ctx);
    assert_true(log[0] != '\0');
    assert_contains(log, "tdacl_undefined_symbol_42");
    assert_contains(log, "error");
    const char *msg = tdacl_last_error(f->ctx);
    assert_contains(msg, "my-broken-label");
    assert_contains(msg, "CL_BUILD_PROGRAM_FAILURE");
    assert_contains(msg, "-DSOME_OPT=3");
    assert_contains(msg, "first error:");
    assert_contains(msg, "tdacl_undefined_symbol_42");
    /* the thread's last error is the same message */
    assert_string_equal(tdacl_last_error(NULL), msg);
    /* the whole compiler log goes to the log at error level */
    int i = tu_log_find(&f->log, TDACL_LOG_ERROR, "build log of 'my-broken-label'", "tdacl_undefined_symbol_42", NULL);
    if (i < 0) {
        tu_log_dump(&f->log);
        fail_msg("no error-level log line with the build log");
    }
    /* a failed build is never cached */
    tdacl_cache_stats s;
    assert_ok(f->ctx, tdacl_context_cache_stats(f->ctx, &s));
    assert_int_equal(s.writes, 0);
    assert_int_equal(tu_count_files(f->dir, ".bin", 0, NULL, 0), 0);
}

static void test_bad_options(void **state)
{
    fixture *f = *state;
    cl_program prog = NULL;
    tdacl_status st = tdacl__program_build_source(f->ctx, "bad-options-label", GOOD_SRC,
                                                  "-cl-tdacl-no-such-option", &prog);
    assert_int_equal(st, TDACL_ERR_BUILD);
    assert_contains(tdacl_last_error(f->ctx), "bad-options-label");
    assert_contains(tdacl_last_error(f->ctx), "-cl-tdacl-no-such-option");
    assert_null(prog);
}

/* After a failure the same context builds good code, the log is that build's log, and
 * the kernel runs. */
static void test_recovers(void **state)
{
    fixture *f = *state;
    cl_program prog = NULL;
    assert_status(f->ctx, tdacl__program_build_source(f->ctx, "broken-again", BROKEN_SRC, "", &prog),
                  TDACL_ERR_BUILD);
    assert_ok(f->ctx, tdacl__program_build_source(f->ctx, "good", GOOD_SRC, "", &prog));
    assert_null(strstr(tdacl_build_log(f->ctx), "tdacl_undefined_symbol_42"));
    cl_int err;
    cl_kernel k = clCreateKernel(prog, "twice", &err);
    assert_non_null(k);
    float x[8] = {1, -2, 3.5f, 0, 1e-3f, -0.0f, 100, 7};
    cl_mem buf = clCreateBuffer(f->ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, x, &err);
    assert_non_null(buf);
    size_t global = 8;
    assert_int_equal(clSetKernelArg(k, 0, sizeof buf, &buf), CL_SUCCESS);
    assert_int_equal(clEnqueueNDRangeKernel(f->ctx->queue, k, 1, NULL, &global, NULL, 0, NULL, NULL), CL_SUCCESS);
    float y[8];
    assert_int_equal(clEnqueueReadBuffer(f->ctx->queue, buf, CL_TRUE, 0, sizeof y, y, 0, NULL, NULL), CL_SUCCESS);
    for (int i = 0; i < 8; i++) assert_true(y[i] == 2.0f * x[i]);
    clReleaseMemObject(buf);
    clReleaseKernel(k);
    assert_int_equal(tu_count_files(f->dir, ".bin", 0, NULL, 0), 1);
}

/* A program naming a source that is not embedded and a kernel missing from a program fail
 * with a status, not a crash; every row of the variant registry names embedded sources. */
static void test_unknown_program_and_kernel(void **state)
{
    fixture *f = *state;
    cl_program prog = NULL;
    const tdacl_program_def missing = {"no_such_program", {"common.cl", "no_such_file.cl"}, 0};
    assert_status(f->ctx, tdacl__program_get(f->ctx, &missing, "", &prog), TDACL_ERR_INTERNAL);
    assert_contains(tdacl_last_error(f->ctx), "no_such_file.cl");
    cl_kernel k = NULL;
    const tdacl_variant_def *layers = tdacl__variant_of_op(TDACL_OP_LAYERS);
    assert_non_null(layers);
    assert_status(f->ctx, tdacl__variant_kernel(f->ctx, layers, "", "no_such_kernel", &k), TDACL_ERR_OPENCL);
    assert_contains(tdacl_last_error(f->ctx), "layers.no_such_kernel");
    assert_contains(tdacl_last_error(f->ctx), "CL_INVALID_KERNEL_NAME");
    assert_null(k);
    int rows = 0;
    for (const tdacl_variant_def *r; (r = tdacl__variant_at(rows)) != NULL; rows++)
        for (size_t j = 0; j < TDACL_ARRAY_LEN(r->program.files) && r->program.files[j]; j++)
            if (!tdacl__find_source(r->program.files[j])) fail_msg("%s: %s is not embedded", r->name, r->program.files[j]);
    assert_true(rows >= 8);
}

/* TDACL_BUILD_OPTIONS is appended to every program a context builds: a macro defined only
 * there reaches the kernel, and the cache keeps the two builds apart. */
static void test_env_build_options(void **state)
{
    fixture *f = *state;
    static const char *SCALED = "__kernel void scaled(__global float *x) { x[get_global_id(0)] *= TDACL_TEST_SCALE; }\n";
    const char *saved = getenv("TDACL_BUILD_OPTIONS");
    char *keep = saved ? strdup(saved) : NULL;
    float got[2];
    for (int i = 0; i < 2; i++) {
        setenv("TDACL_BUILD_OPTIONS", i ? "-DTDACL_TEST_SCALE=5.0f" : "-DTDACL_TEST_SCALE=3.0f", 1);
        tdacl_context_desc desc;
        tdacl_context_desc_init(&desc);
        desc.cache = 1;
        desc.cache_dir = f->dir;
        desc.use_tuning_db = 0;
        tdacl_context *ctx = NULL;
        assert_int_equal(tdacl_context_create(&desc, &ctx), TDACL_SUCCESS);
        assert_non_null(strstr(tdacl__base_options(ctx), i ? "-DTDACL_TEST_SCALE=5.0f" : "-DTDACL_TEST_SCALE=3.0f"));
        cl_program prog = NULL;
        assert_ok(ctx, tdacl__program_build_source(ctx, "env-options", SCALED, "", &prog));
        cl_int err;
        cl_kernel k = clCreateKernel(prog, "scaled", &err);
        assert_non_null(k);
        float x = 2.0f;
        cl_mem buf = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof x, &x, &err);
        assert_non_null(buf);
        size_t global = 1;
        assert_int_equal(clSetKernelArg(k, 0, sizeof buf, &buf), CL_SUCCESS);
        assert_int_equal(clEnqueueNDRangeKernel(ctx->queue, k, 1, NULL, &global, NULL, 0, NULL, NULL), CL_SUCCESS);
        assert_int_equal(clEnqueueReadBuffer(ctx->queue, buf, CL_TRUE, 0, sizeof x, &got[i], 0, NULL, NULL), CL_SUCCESS);
        clReleaseMemObject(buf);
        clReleaseKernel(k);
        tdacl_context_destroy(ctx);
    }
    if (keep) setenv("TDACL_BUILD_OPTIONS", keep, 1);
    else unsetenv("TDACL_BUILD_OPTIONS");
    free(keep);
    assert_true(got[0] == 6.0f && got[1] == 10.0f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broken_source),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_recovers),
        cmocka_unit_test(test_unknown_program_and_kernel),
        cmocka_unit_test(test_env_build_options),
        cmocka_unit_test(test_release_context), /* last */
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
