/* The in-memory run: rows, progress line and the derived rates of a row.  Shared by the
 * driver, the JSON loader and the tests. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

bench_row *bench_add_row(bench_run *run)
{
    if (run->nrows == run->cap) {
        int cap = run->cap ? 2 * run->cap : 64;
        bench_row *g = realloc(run->rows, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        run->rows = g;
        run->cap = cap;
    }
    bench_row *r = &run->rows[run->nrows++];
    memset(r, 0, sizeof *r);
    r->beta = -1;
    r->sparsity = -1;
    snprintf(r->impl, sizeof r->impl, "tdacl");
    return r;
}

void bench_progress(bench_run *run, const char *fmt, ...)
{
    if (!run->opt.progress) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\r\033[K[%5.1fs] %s", tdacl__now() - run->started, msg);
    fflush(stderr);
}

void bench_finish_row(bench_run *run, bench_row *r)
{
    const bench_device *d = &run->devices[r->device_index];
    double sec = r->s.median * 1e-3;
    if (sec > 0 && r->flops > 0) r->tflops = r->flops / sec * 1e-12;
    if (sec > 0 && r->bytes > 0) r->gbs = r->bytes / sec * 1e-9;
    /* rows of the tensor-core variant against the matrix units' measured rate */
    const double flops_peak = !strcmp(r->impl, "tdacl-mma") && d->peak.mma_bf16_gflops > 0 ? d->peak.mma_bf16_gflops
                                                                                           : d->peak.fp32_gflops;
    if (d->have_peak && flops_peak > 0) r->pct_peak_flops = 100.0 * r->tflops * 1e3 / flops_peak;
    if (d->have_peak && d->peak.bandwidth_gbs > 0) r->pct_peak_bw = 100.0 * r->gbs / d->peak.bandwidth_gbs;
}

void bench_free(bench_run *run)
{
    free(run->rows);
    run->rows = NULL;
    run->nrows = run->cap = 0;
}
