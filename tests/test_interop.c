/* Interop and threads: a context on the caller's cl_context and in-order queue, tensors over
 * the caller's buffers (with byte offsets), attention results read on the caller's queue
 * without tdacl_finish, every refusal with its message, no reference left behind; and two
 * contexts used from two threads at once.  Results against the double-precision reference. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/testutil.h"
#include "ref/attention_ref.h"
#include "runtime/runtime.h"

enum { B = 1, H = 2, T = 37, D = 16 };
#define N ((size_t)B * H * T * D)

/* The default device as a plain OpenCL enumeration sees it, found by name. */
static cl_device_id raw_device(cl_platform_id *platform)
{
    int index;
    tdacl_device_info info;
    assert_ok(NULL, tdacl_device_select(NULL, &index));
    assert_ok(NULL, tdacl_device_get_info(index, &info));
    cl_platform_id plats[16];
    cl_uint np = 0;
    assert_int_equal(clGetPlatformIDs(16, plats, &np), CL_SUCCESS);
    for (cl_uint p = 0; p < np; p++) {
        cl_device_id devs[16];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd; d++) {
            char name[256] = "";
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof name, name, NULL);
            if (!strcmp(name, info.name)) {
                *platform = plats[p];
                return devs[d];
            }
        }
    }
    fail_msg("device %s not found by a direct enumeration", info.name);
    return NULL;
}

static void fill(float *x, size_t n, unsigned seed)
{
    uint64_t s = seed * 2654435761ULL + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

/* max |got - ref| against the double reference of tra on these inputs, relative to max |ref| */
static double tra_error(const float *q, const float *k, const float *v, const float *got)
{
    double *dq = malloc(N * sizeof *dq), *dk = malloc(N * sizeof *dk), *dv = malloc(N * sizeof *dv),
           *out = malloc(N * sizeof *out);
    assert_non_null(dq), assert_non_null(dk), assert_non_null(dv), assert_non_null(out);
    for (size_t i = 0; i < N; i++) dq[i] = q[i], dk[i] = k[i], dv[i] = v[i];
    attn_ref_params p = attn_ref_params_default(TDACL_ATTN_TRA);
    p.beta = 0.5;
    attn_ref_shape shape = {B, H, T, T, D, D};
    attn_ref_inputs in = {dq, dk, dv, NULL, NULL};
    attn_ref_outputs o = {0};
    o.out = out;
    attn_ref_counts counts;
    assert_int_equal(attn_ref_attention(&p, shape, in, o, &counts), 0);
    double scale = 1e-30, err = 0;
    for (size_t i = 0; i < N; i++) scale = fmax(scale, fabs(out[i]));
    for (size_t i = 0; i < N; i++) err = fmax(err, fabs(got[i] - out[i]));
    free(dq), free(dk), free(dv), free(out);
    return err / scale;
}

static tdacl_attention_desc tra_desc(void)
{
    tdacl_attention_desc desc;
    tdacl_attention_desc_init(&desc);
    desc.kind = TDACL_ATTN_TRA;
    desc.beta = 0.5f;
    return desc;
}

static cl_uint refcount(cl_context c)
{
    cl_uint refs = 0;
    clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof refs, &refs, NULL);
    return refs;
}

static void test_callers_context_queue_and_buffers(void **state)
{
    (void)state;
    cl_platform_id plat = NULL;
    cl_device_id dev = raw_device(&plat);
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)plat, 0};
    cl_context cl = clCreateContext(props, 1, &dev, NULL, NULL, &err);
    assert_non_null(cl);
    cl_command_queue queue = clCreateCommandQueue(cl, dev, 0, &err); /* no profiling */
    assert_non_null(queue);
    /* q, k, v packed in one buffer after a 64-byte header; out 128 bytes into another */
    const size_t head = 64, out_at = 128, bytes = N * 4;
    cl_mem qkv = clCreateBuffer(cl, CL_MEM_READ_WRITE, head + 3 * bytes, NULL, &err);
    cl_mem outm = clCreateBuffer(cl, CL_MEM_READ_WRITE, out_at + bytes, NULL, &err);
    assert_non_null(qkv), assert_non_null(outm);
    float *q = malloc(bytes), *k = malloc(bytes), *v = malloc(bytes), *got = malloc(bytes);
    assert_non_null(q), assert_non_null(k), assert_non_null(v), assert_non_null(got);
    fill(q, N, 1), fill(k, N, 2), fill(v, N, 3);
    assert_int_equal(clEnqueueWriteBuffer(queue, qkv, CL_TRUE, head, bytes, q, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clEnqueueWriteBuffer(queue, qkv, CL_TRUE, head + bytes, bytes, k, 0, NULL, NULL), CL_SUCCESS);
    assert_int_equal(clEnqueueWriteBuffer(queue, qkv, CL_TRUE, head + 2 * bytes, bytes, v, 0, NULL, NULL), CL_SUCCESS);

    tdacl_context *ctx;
    assert_ok(NULL, tdacl_context_create_from_cl(NULL, cl, dev, queue, &ctx));
    void *got_cl = NULL, *got_dev = NULL, *got_queue = NULL;
    assert_ok(ctx, tdacl_context_get_cl(ctx, &got_cl, &got_dev, &got_queue));
    assert_ptr_equal(got_cl, cl), assert_ptr_equal(got_dev, dev), assert_ptr_equal(got_queue, queue);

    int64_t shape[4] = {B, H, T, D};
    tdacl_tensor *tq, *tk, *tv, *to;
    assert_ok(ctx, tdacl_tensor_from_cl_mem(ctx, qkv, head, TDACL_F32, 4, shape, &tq));
    assert_ok(ctx, tdacl_tensor_from_cl_mem(ctx, qkv, head + bytes, TDACL_F32, 4, shape, &tk));
    assert_ok(ctx, tdacl_tensor_from_cl_mem(ctx, qkv, head + 2 * bytes, TDACL_F32, 4, shape, &tv));
    assert_ok(ctx, tdacl_tensor_from_cl_mem(ctx, outm, out_at, TDACL_F32, 4, shape, &to));
    void *mem = NULL;
    size_t off = 0;
    assert_ok(ctx, tdacl_tensor_get_cl_mem(tk, &mem, &off));
    assert_ptr_equal(mem, qkv);
    assert_int_equal(off, head + bytes);

    /* no tdacl_finish: a blocking read on the caller's queue is ordered after the kernels */
    tdacl_attention_desc desc = tra_desc();
    tdacl_attention_tensors t = {.q = tq, .k = tk, .v = tv, .out = to};
    assert_ok(ctx, tdacl_attention(ctx, &desc, &t, NULL));
    assert_int_equal(clEnqueueReadBuffer(queue, outm, CL_TRUE, out_at, bytes, got, 0, NULL, NULL), CL_SUCCESS);
    double e = tra_error(q, k, v, got);
    print_message("caller's queue: relative error %.3g\n", e);
    assert_true(e < 1e-5);
    /* with stats on a queue without profiling: counters, and kernel time 0 */
    tdacl_attention_stats stats;
    assert_ok(ctx, tdacl_attention(ctx, &desc, &t, &stats));
    assert_true(stats.visible_pairs == (uint64_t)B * H * T * (T + 1) / 2);
    assert_true(stats.kernel_ms == 0.0);

    /* refusals, each naming the problem */
    tdacl_tensor *bad = NULL;
    assert_int_equal(tdacl_tensor_from_cl_mem(ctx, qkv, 2, TDACL_F32, 4, shape, &bad), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(ctx), "not a multiple of the f32 size"));
    assert_int_equal(tdacl_tensor_from_cl_mem(ctx, outm, out_at + 4, TDACL_F32, 4, shape, &bad), TDACL_ERR_SHAPE);
    assert_non_null(strstr(tdacl_last_error(ctx), "the buffer has"));
    assert_int_equal(tdacl_tensor_from_cl_mem(ctx, NULL, 0, TDACL_F32, 4, shape, &bad), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(ctx), "cl_mem is NULL"));
    assert_int_equal(tdacl_tensor_from_cl_mem(ctx, qkv, 0, (tdacl_dtype)7, 4, shape, &bad), TDACL_ERR_DTYPE);
    assert_null(bad);
    /* a buffer and a queue of another context */
    cl_context other = clCreateContext(props, 1, &dev, NULL, NULL, &err);
    assert_non_null(other);
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_command_queue foreign_q = clCreateCommandQueue(other, dev, 0, &err);
    assert_non_null(foreign), assert_non_null(foreign_q);
    assert_int_equal(tdacl_tensor_from_cl_mem(ctx, foreign, 0, TDACL_F32, 4, shape, &bad), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(ctx), "belongs to another cl_context"));
    tdacl_context *ctx2 = NULL;
    assert_int_equal(tdacl_context_create_from_cl(NULL, cl, dev, foreign_q, &ctx2), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(NULL), "cl_command_queue belongs to another context"));
    assert_int_equal(tdacl_context_create_from_cl(NULL, NULL, dev, NULL, &ctx2), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(NULL), "cl_context is NULL"));
    assert_int_equal(tdacl_context_create_from_cl(NULL, cl, NULL, NULL, &ctx2), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(NULL), "cl_device_id is NULL"));
    assert_int_equal(tdacl_context_create_from_cl(NULL, cl, (void *)queue, NULL, &ctx2), TDACL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(tdacl_last_error(NULL), "is not one of the"));
    assert_null(ctx2);
    clReleaseMemObject(foreign), clReleaseCommandQueue(foreign_q), clReleaseContext(other);

    /* a second context of ours on the same cl_context, with its own (profiling) queue */
    assert_ok(NULL, tdacl_context_create_from_cl(NULL, cl, dev, NULL, &ctx2));
    tdacl_tensor *oq, *ok_, *ov, *oo;
    assert_ok(ctx2, tdacl_tensor_from_cl_mem(ctx2, qkv, head, TDACL_F32, 4, shape, &oq));
    assert_ok(ctx2, tdacl_tensor_from_cl_mem(ctx2, qkv, head + bytes, TDACL_F32, 4, shape, &ok_));
    assert_ok(ctx2, tdacl_tensor_from_cl_mem(ctx2, qkv, head + 2 * bytes, TDACL_F32, 4, shape, &ov));
    assert_ok(ctx2, tdacl_tensor_create(ctx2, TDACL_F32, 4, shape, &oo));
    tdacl_attention_tensors t2 = {.q = oq, .k = ok_, .v = ov, .out = oo};
    assert_ok(ctx2, tdacl_attention(ctx2, &desc, &t2, &stats));
    assert_true(stats.kernel_ms > 0.0); /* its own queue times */
    assert_ok(ctx2, tdacl_tensor_download(oo, got, TDACL_F32, (int64_t)N));
    assert_true(tra_error(q, k, v, got) < 1e-5);
    assert_ok(NULL, tdacl_context_destroy(ctx2));

    /* destroying the contexts releases every reference they took: the caller's objects stay
     * valid, and once the caller releases its own, only its cl_context reference is left
     * (PoCL lets a buffer keep the queue of its last command alive until the buffer goes,
     * so the count is read after the caller's buffers are released) */
    tdacl_tensor_destroy(tq), tdacl_tensor_destroy(tk), tdacl_tensor_destroy(tv);
    assert_ok(NULL, tdacl_context_destroy(ctx)); /* `to` is left for the context to release */
    assert_int_equal(clEnqueueReadBuffer(queue, outm, CL_TRUE, out_at, bytes, got, 0, NULL, NULL), CL_SUCCESS);
    assert_true(tra_error(q, k, v, got) < 1e-5);
    clReleaseMemObject(qkv), clReleaseMemObject(outm), clReleaseCommandQueue(queue);
    for (int ms = 0; ms < 5000 && refcount(cl) != 1; ms++) {
        struct timespec one = {0, 1000000};
        nanosleep(&one, NULL);
    }
    assert_int_equal(refcount(cl), 1);
    clReleaseContext(cl);
    free(q), free(k), free(v), free(got);
}

/* ---- two contexts, two threads ---- */

typedef struct worker {
    unsigned seed;
    double worst;
    int failed;
    char why[256];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    tdacl_context *ctx = NULL;
    float *q = malloc(N * 4), *k = malloc(N * 4), *v = malloc(N * 4), *got = malloc(N * 4);
    tdacl_tensor *tq = NULL, *tk = NULL, *tv = NULL, *to = NULL;
    int64_t shape[4] = {B, H, T, D};
    tdacl_status st = q && k && v && got ? tdacl_context_create(NULL, &ctx) : TDACL_ERR_OUT_OF_MEMORY;
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, shape, &tq);
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, shape, &tk);
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, shape, &tv);
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, shape, &to);
    for (int round = 0; round < 4 && !st; round++) {
        fill(q, N, w->seed + 10u * round), fill(k, N, w->seed + 10u * round + 1), fill(v, N, w->seed + 10u * round + 2);
        st = tdacl_tensor_upload(tq, q, TDACL_F32, (int64_t)N);
        if (!st) st = tdacl_tensor_upload(tk, k, TDACL_F32, (int64_t)N);
        if (!st) st = tdacl_tensor_upload(tv, v, TDACL_F32, (int64_t)N);
        tdacl_attention_desc desc = tra_desc();
        tdacl_attention_tensors t = {.q = tq, .k = tk, .v = tv, .out = to};
        if (!st) st = tdacl_attention(ctx, &desc, &t, NULL);
        if (!st) st = tdacl_tensor_download(to, got, TDACL_F32, (int64_t)N);
        if (!st) w->worst = fmax(w->worst, tra_error(q, k, v, got));
    }
    if (st) w->failed = 1, snprintf(w->why, sizeof w->why, "%s", tdacl_last_error(ctx));
    tdacl_tensor_destroy(tq), tdacl_tensor_destroy(tk), tdacl_tensor_destroy(tv), tdacl_tensor_destroy(to);
    tdacl_context_destroy(ctx);
    free(q), free(k), free(v), free(got);
    return NULL;
}

static void test_two_contexts_two_threads(void **state)
{
    (void)state;
    worker w[2] = {{.seed = 100}, {.seed = 200}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        if (w[i].failed) fail_msg("thread %d: %s", i, w[i].why);
        print_message("thread %d: worst relative error %.3g\n", i, w[i].worst);
        assert_true(w[i].worst < 1e-5);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_callers_context_queue_and_buffers),
        cmocka_unit_test(test_two_contexts_two_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
