/* TDACL_PROFILE=1: device time per kernel name, summed over a context's life and written to
 * the log (level info) when the context is destroyed.  Events are collected as kernels are
 * queued and read in batches, so profiling adds no host wait between launches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

#define PROFILE_PENDING 512
#define PROFILE_NAMES 64

typedef struct profile_name {
    char name[48];
    double ms;
    long count;
} profile_name;

struct tdacl_profile {
    cl_event pending[PROFILE_PENDING];
    const char *pending_name[PROFILE_PENDING];
    int npending;
    profile_name names[PROFILE_NAMES];
    int nnames;
    double first_start_ns, last_end_ns;
};

void tdacl__profile_init(tdacl_context *ctx)
{
    const char *e = getenv("TDACL_PROFILE");
    if (!e || !*e || !strcmp(e, "0") || !strcmp(e, "off")) return;
    ctx->profile = calloc(1, sizeof *ctx->profile);
    if (!ctx->profile) tdacl__log(ctx, TDACL_LOG_WARN, "TDACL_PROFILE: out of memory, profiling off");
}

static void fold(tdacl_context *ctx)
{
    tdacl_profile *p = ctx->profile;
    for (int i = 0; i < p->npending; i++) {
        cl_ulong t0 = 0, t1 = 0;
        cl_event ev = p->pending[i];
        if (!clWaitForEvents(1, &ev) &&
            !clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof t0, &t0, NULL) &&
            !clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof t1, &t1, NULL) && t1 >= t0) {
            int k = 0;
            while (k < p->nnames && strcmp(p->names[k].name, p->pending_name[i])) k++;
            if (k == p->nnames && p->nnames < PROFILE_NAMES)
                snprintf(p->names[p->nnames++].name, sizeof p->names[0].name, "%s", p->pending_name[i]);
            if (k < p->nnames) p->names[k].ms += 1e-6 * (double)(t1 - t0), p->names[k].count++;
            if (p->first_start_ns == 0 || (double)t0 < p->first_start_ns) p->first_start_ns = (double)t0;
            if ((double)t1 > p->last_end_ns) p->last_end_ns = (double)t1;
        }
        clReleaseEvent(ev);
    }
    p->npending = 0;
}

/* Records a queued kernel; `ev` is retained here (the caller keeps its own reference). */
void tdacl__profile_add(tdacl_context *ctx, const char *name, cl_event ev)
{
    tdacl_profile *p = ctx->profile;
    if (!p || !ev) return;
    if (p->npending == PROFILE_PENDING) fold(ctx);
    clRetainEvent(ev);
    p->pending[p->npending] = ev;
    p->pending_name[p->npending++] = name; /* string literals at every call site */
}

static int by_time(const void *a, const void *b)
{
    double x = ((const profile_name *)a)->ms, y = ((const profile_name *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void tdacl__profile_report(tdacl_context *ctx)
{
    tdacl_profile *p = ctx->profile;
    if (!p) return;
    fold(ctx);
    qsort(p->names, (size_t)p->nnames, sizeof p->names[0], by_time);
    double total = 0;
    for (int i = 0; i < p->nnames; i++) total += p->names[i].ms;
    double span = p->last_end_ns > p->first_start_ns ? 1e-6 * (p->last_end_ns - p->first_start_ns) : 0;
    /* asked for by TDACL_PROFILE: shown at the default log level too, not only with TDACL_LOG=info */
    const tdacl_log_level level = tdacl__log_enabled(ctx, TDACL_LOG_INFO) ? TDACL_LOG_INFO : TDACL_LOG_WARN;
    tdacl__log(ctx, level, "profile: %.3f ms of kernels in a %.3f ms span (the rest: gaps between kernels)",
               total, span);
    for (int i = 0; i < p->nnames; i++)
        tdacl__log(ctx, level, "profile: %-28s %8ld launches %10.3f ms %5.1f%% %9.4f ms each",
                   p->names[i].name, p->names[i].count, p->names[i].ms, total > 0 ? 100 * p->names[i].ms / total : 0,
                   p->names[i].ms / (double)p->names[i].count);
    free(p);
    ctx->profile = NULL;
}
