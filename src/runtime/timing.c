/* Launch helpers and profiling-event timing, shared by ops, the tuner and the benchmark. */
#include <stdio.h>
#include <time.h>

#include "runtime/runtime.h"

double tdacl__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tdacl_status tdacl__span_ms(tdacl_context *ctx, cl_event ev[2], double *ms)
{
    cl_event first = ev[0], last = ev[1] ? ev[1] : ev[0];
    cl_ulong t0 = 0, t1 = 0;
    cl_int err = clWaitForEvents(ev[1] ? 2 : 1, ev);
    if (!err && !ctx->queue_profiling) { /* the caller's queue does not time: reported as 0 */
        *ms = 0.0;
        return TDACL_SUCCESS;
    }
    if (!err) err = clGetEventProfilingInfo(first, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL);
    if (!err) err = clGetEventProfilingInfo(last, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL);
    if (err) return tdacl__fail_cl(ctx, err, "reading kernel profiling times");
    *ms = t1 > t0 ? 1e-6 * (double)(t1 - t0) : 0.0;
    return TDACL_SUCCESS;
}

tdacl_status tdacl__event_ms(tdacl_context *ctx, cl_event ev, double *ms)
{
    cl_event one[2] = {ev, NULL};
    return tdacl__span_ms(ctx, one, ms);
}

tdacl_status tdacl__launch(tdacl_context *ctx, cl_kernel k, cl_uint dims, const size_t *global,
                           const size_t *local, cl_event *ev, const char *what)
{
    size_t g[3] = {1, 1, 1};
    for (cl_uint i = 0; i < dims; i++) {
        g[i] = global[i];
        if (g[i] == 0) return TDACL_SUCCESS; /* nothing to do */
        if (local && local[i]) g[i] = (g[i] + local[i] - 1) / local[i] * local[i];
    }
    cl_event own = NULL;
    cl_event *evp = ev ? ev : ctx->profile ? &own : NULL;
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, k, dims, NULL, g, local, 0, NULL, evp);
    if (!err) ctx->launches++;
    if (!err && evp) tdacl__profile_add(ctx, what, *evp);
    if (own) clReleaseEvent(own);
    if (err) {
        char shape[128];
        snprintf(shape, sizeof shape, "global %zu x %zu x %zu, local %zu x %zu x %zu", g[0],
                 dims > 1 ? g[1] : 1, dims > 2 ? g[2] : 1, local ? local[0] : 0,
                 local && dims > 1 ? local[1] : 0, local && dims > 2 ? local[2] : 0);
        return tdacl__fail_cl(ctx, err, "launching %s (%s)", what, shape);
    }
    return TDACL_SUCCESS;
}

static tdacl_status set_args_va(tdacl_context *ctx, cl_kernel k, const char *what, cl_uint first, va_list ap)
{
    for (cl_uint i = first;; i++) {
        size_t size = va_arg(ap, size_t);
        if (size == 0) break;
        const void *p = va_arg(ap, const void *);
        cl_int err = clSetKernelArg(k, i, size, p);
        if (err) return tdacl__fail_cl(ctx, err, "clSetKernelArg(%s, arg %u)", what, i);
    }
    return TDACL_SUCCESS;
}

tdacl_status tdacl__set_args(tdacl_context *ctx, cl_kernel k, const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    tdacl_status st = set_args_va(ctx, k, what, 0, ap);
    va_end(ap);
    return st;
}

tdacl_status tdacl__set_args_from(tdacl_context *ctx, cl_kernel k, const char *what, unsigned first, ...)
{
    va_list ap;
    va_start(ap, first);
    tdacl_status st = set_args_va(ctx, k, what, first, ap);
    va_end(ap);
    return st;
}
