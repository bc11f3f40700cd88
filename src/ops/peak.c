/* Peak probe: measured FP32 FMA rate, global-memory read bandwidth and launch latency,
 * the denominators of every "percent of peak" the bench reports.  Each probe calibrates
 * its size to run long enough for stable timing, then keeps the best of a few runs. */
#include <stdio.h>
#include <string.h>

#include "ops/peak.h"

#define FMA_ITERS 512

static tdacl_status run_timed(tdacl_context *ctx, cl_kernel k, size_t global, size_t local, double *ms)
{
    cl_event ev = NULL;
    tdacl_status st = tdacl__launch(ctx, k, 1, &global, &local, &ev, "peak probe");
    if (st) return st;
    st = tdacl__event_ms(ctx, ev, ms);
    clReleaseEvent(ev);
    return st;
}

static tdacl_status probe_kernel(tdacl_context *ctx, const char *options, const char *name, cl_kernel *k)
{
    return tdacl__variant_kernel(ctx, tdacl__variant("peak"), options, name, k);
}

int tdacl__peak_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    if (ctx->info.nv_cc_major >= 8) return 0;
    return snprintf(why, n, "%s has no mma.sync (NVIDIA compute capability >= 8.0)", ctx->info.name), 1;
}


/* The shortest of `runs` timed launches, the first `warmup` of them not counted. */
static tdacl_status best_of(tdacl_context *ctx, cl_kernel k, size_t global, size_t local, int runs, int warmup, double *best)
{
    double ms;
    tdacl_status st = TDACL_SUCCESS;
    for (int r = 0; !st && r < runs; r++)
        if (!(st = run_timed(ctx, k, global, local, &ms)) && r >= warmup && ms < *best) *best = ms;
    return st;
}

static tdacl_status fma_rate(tdacl_context *ctx, double *gflops)
{
    char opts[32];
    snprintf(opts, sizeof opts, "-DFMA_ITERS=%d", FMA_ITERS);
    cl_kernel k;
    tdacl_status st = probe_kernel(ctx, opts, "fma_peak", &k);
    if (st) return st;
    size_t local = ctx->info.max_work_group_size < 256 ? ctx->info.max_work_group_size : 256;
    size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    size_t global = cu * local * 4;
    double target_ms = ctx->info.type == TDACL_DEVICE_GPU ? 20.0 : 150.0;
    size_t max_global = (size_t)1 << 24;
    cl_mem out = clCreateBuffer(ctx->cl, CL_MEM_WRITE_ONLY, max_global * 4, NULL, NULL);
    if (!out) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "peak probe: cannot allocate its output");
    cl_float a = 0.9999f, b = 1e-4f;
    st = tdacl__set_args(ctx, k, "fma_peak", sizeof out, &out, sizeof a, &a, sizeof b, &b, (size_t)0);
    double ms = 0, best = 1e30;
    for (int cal = 0; !st && cal < 4; cal++) {
        if ((st = run_timed(ctx, k, global, local, &ms))) break;
        if (ms >= target_ms / 2 || global >= max_global) break;
        double scale = ms > 0 ? target_ms / ms : 16;
        if (scale > 16) scale = 16;
        size_t g = (size_t)((double)global * scale) / local * local;
        global = g > max_global ? max_global : g < global ? global : g;
    }
    if (!st) st = best_of(ctx, k, global, local, 3, 0, &best);
    clReleaseMemObject(out);
    if (st) return st;
    *gflops = (double)global * FMA_ITERS * 256.0 / (best * 1e-3) * 1e-9;
    return TDACL_SUCCESS;
}

static tdacl_status read_bandwidth(tdacl_context *ctx, double *gbs)
{
    cl_kernel k;
    tdacl_status st = probe_kernel(ctx, "", "read_bw", &k);
    if (st) return st;
    size_t bytes = ctx->info.type == TDACL_DEVICE_GPU ? ((size_t)1 << 30) : ((size_t)128 << 20);
    while (bytes > ctx->info.max_alloc_bytes / 2 && bytes > ((size_t)1 << 20)) bytes /= 2;
    cl_int err;
    cl_mem in = clCreateBuffer(ctx->cl, CL_MEM_READ_ONLY, bytes, NULL, &err);
    if (!in) return tdacl__fail_cl(ctx, err, "peak probe: clCreateBuffer(%zu bytes)", bytes);
    size_t local = ctx->info.max_work_group_size < 256 ? ctx->info.max_work_group_size : 256;
    size_t cu = ctx->info.compute_units ? ctx->info.compute_units : 1;
    size_t global = cu * local * (ctx->info.type == TDACL_DEVICE_GPU ? 32 : 4);
    cl_mem out = clCreateBuffer(ctx->cl, CL_MEM_WRITE_ONLY, global * 4, NULL, &err);
    if (!out) {
        clReleaseMemObject(in);
        return tdacl__fail_cl(ctx, err, "peak probe: clCreateBuffer(out)");
    }
    cl_float zero = 0.0f;
    err = clEnqueueFillBuffer(ctx->queue, in, &zero, sizeof zero, 0, bytes, 0, NULL, NULL);
    if (err) st = tdacl__fail_cl(ctx, err, "peak probe: clEnqueueFillBuffer");
    cl_long n4 = (cl_long)(bytes / 16);
    /* GPUs coalesce a grid stride; CPU work-items each stream a contiguous chunk */
    cl_long chunk = ctx->info.type == TDACL_DEVICE_GPU ? 0 : (n4 + (cl_long)global - 1) / (cl_long)global;
    if (!st)
        st = tdacl__set_args(ctx, k, "read_bw", sizeof in, &in, sizeof n4, &n4, sizeof out, &out,
                             sizeof chunk, &chunk, (size_t)0);
    double best = 1e30;
    if (!st) st = best_of(ctx, k, global, local, 6, 1, &best); /* the first run warms up */
    clReleaseMemObject(in);
    clReleaseMemObject(out);
    if (st) return st;
    *gbs = (double)bytes / (best * 1e-3) * 1e-9;
    return TDACL_SUCCESS;
}

static tdacl_status launch_latency(tdacl_context *ctx, double *us)
{
    cl_mem out = clCreateBuffer(ctx->cl, CL_MEM_WRITE_ONLY, 4, NULL, NULL);
    if (!out) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "peak probe: cannot allocate");
    cl_kernel k;
    tdacl_status st = probe_kernel(ctx, "", "empty_kernel", &k);
    if (!st) st = tdacl__set_args(ctx, k, "empty_kernel", sizeof out, &out, (size_t)0);
    size_t one = 1;
    const int n = 200;
    double t0 = 0;
    for (int i = 0; !st && i < n + 10; i++) {
        if (i == 10) t0 = tdacl__now();
        st = tdacl__launch(ctx, k, 1, &one, &one, NULL, "empty_kernel");
        if (!st) {
            cl_int err = clFinish(ctx->queue);
            if (err) st = tdacl__fail_cl(ctx, err, "clFinish");
        }
    }
    double t = tdacl__now() - t0;
    clReleaseMemObject(out);
    if (st) return st;
    *us = t / n * 1e6;
    return TDACL_SUCCESS;
}

/* The host's time per launch of n launches enqueued back to back (waiting once at the end): on
 * a GPU whose driver takes longer to enqueue a kernel than the kernel runs, a step of many small
 * kernels is bound by this, not by the device. */
static tdacl_status enqueue_time(tdacl_context *ctx, cl_kernel k, double *us)
{
    size_t one = 1;
    const int n = 400;
    double best = 1e30;
    tdacl_status st = TDACL_SUCCESS;
    for (int rep = 0; !st && rep < 3; rep++) {
        cl_int err = clFinish(ctx->queue);
        double t0 = tdacl__now();
        for (int i = 0; !st && i < n; i++) st = tdacl__launch(ctx, k, 1, &one, &one, NULL, "enqueue probe");
        double t = (tdacl__now() - t0) / n * 1e6;
        if (!err) err = clFinish(ctx->queue);
        if (!st && err) st = tdacl__fail_cl(ctx, err, "clFinish");
        if (t < best) best = t;
    }
    *us = best;
    return st;
}

/* enqueue_us: an empty kernel with one pointer argument; enqueue_arg_us: what each of fifteen
 * more pointer arguments (all the same buffer) adds */
static tdacl_status enqueue_costs(tdacl_context *ctx, double *us, double *arg_us)
{
    cl_mem out = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE, 4, NULL, NULL);
    if (!out) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "peak probe: cannot allocate");
    cl_kernel k1, k16;
    tdacl_status st = probe_kernel(ctx, "", "empty_kernel", &k1);
    if (!st) st = probe_kernel(ctx, "", "pointers_kernel", &k16);
    if (!st) st = tdacl__set_args(ctx, k1, "empty_kernel", sizeof out, &out, (size_t)0);
    for (cl_uint i = 0; !st && i < 16; i++) {
        cl_int err = clSetKernelArg(k16, i, sizeof out, &out);
        if (err) st = tdacl__fail_cl(ctx, err, "clSetKernelArg(pointers_kernel, arg %u)", i);
    }
    double t16 = 0;
    if (!st) st = enqueue_time(ctx, k1, us);
    if (!st) st = enqueue_time(ctx, k16, &t16);
    clReleaseMemObject(out);
    if (!st) *arg_us = t16 > *us ? (t16 - *us) / 15 : 0;
    return st;
}

/* mma.sync rate of operand type mma_in (cl/mma.cl MMA_IN: 1 bf16, 3 tf32): four warps per
 * work-group, eight per compute unit's worth of work-groups, MMA_ITERS calibrated to about
 * 20 ms for bf16. */
static tdacl_status mma_rate(tdacl_context *ctx, int mma_in, double *gflops)
{
    const tdacl_variant_def *row = tdacl__variant("peak.mma");
    char why[160];
    *gflops = 0;
    if (row->supports(ctx, NULL, why, sizeof why)) {
        tdacl__log(ctx, TDACL_LOG_DEBUG, "peak probe: no matrix-unit rate: %s", why);
        return TDACL_SUCCESS;
    }
    const int iters = 2048;
    char opts[64];
    snprintf(opts, sizeof opts, "-DMMA_NATIVE=1 -DMMA_IN=%d -DMMA_ITERS=%d", mma_in, iters);
    cl_kernel k;
    tdacl_status st = tdacl__variant_kernel(ctx, row, opts, "mma_peak", &k);
    if (st) return st;
    const size_t local = 128, cu = ctx->info.compute_units ? ctx->info.compute_units : 1, global = cu * 8 * local;
    cl_mem out = clCreateBuffer(ctx->cl, CL_MEM_WRITE_ONLY, global * 4, NULL, NULL);
    if (!out) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "peak probe: cannot allocate its output");
    cl_uint seed = 1;
    st = tdacl__set_args(ctx, k, "mma_peak", sizeof out, &out, sizeof seed, &seed, (size_t)0);
    double best = 1e30;
    if (!st) st = best_of(ctx, k, global, local, 4, 1, &best);
    clReleaseMemObject(out);
    if (!st) *gflops = (double)(global / 32) * iters * 8 * 4096.0 / (best * 1e-3) * 1e-9;
    return st;
}

tdacl_status tdacl_measure_peak(tdacl_context *ctx, tdacl_peak *peak)
{
    if (!ctx || !peak)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tdacl_measure_peak: %s is NULL", ctx ? "peak" : "ctx");
    memset(peak, 0, sizeof *peak);
    tdacl_status st = fma_rate(ctx, &peak->fp32_gflops);
    if (!st) st = read_bandwidth(ctx, &peak->bandwidth_gbs);
    if (!st) st = launch_latency(ctx, &peak->launch_us);
    if (!st) st = enqueue_costs(ctx, &peak->enqueue_us, &peak->enqueue_arg_us);
    if (!st) st = mma_rate(ctx, 1, &peak->mma_bf16_gflops);
    if (!st) st = mma_rate(ctx, 3, &peak->mma_tf32_gflops);
    return st;
}
