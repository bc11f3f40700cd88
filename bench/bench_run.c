/* The in-memory run: rows, progress line and the derived rates of a row.  Shared by the
 * driver, the JSON loader and the tests. */
#include <signal.h>
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
    r->alpha = -1;
    r->sparsity = -1;
    snprintf(r->impl, sizeof r->impl, "tdacl");
    return r;
}

static volatile sig_atomic_t stop_signal;

void bench_on_signal(int sig) { stop_signal = sig; }

int bench_stop_requested(void) { return stop_signal; }

int bench_count_only(bench_run *run)
{
    if (!run->planning) return 0;
    run->total_planned++;
    return 1;
}

/* "i/N" and, once a few rows are done, the time left at the average pace so far */
static void progress_count(const bench_run *run, char *buf, size_t n)
{
    if (run->total_planned <= 0) {
        buf[0] = 0;
        return;
    }
    int next = run->done < run->total_planned ? run->done + 1 : run->total_planned;
    int len = snprintf(buf, n, "%d/%d ", next, run->total_planned);
    if (run->done >= 2 && len > 0 && (size_t)len < n) {
        double per = (tdacl__now() - run->measuring_since) / run->done;
        double left = per * (run->total_planned - run->done);
        if (left >= 90) snprintf(buf + len, n - (size_t)len, "~%.0f min left ", left / 60);
        else snprintf(buf + len, n - (size_t)len, "~%.0f s left ", left);
    }
}

void bench_progress(bench_run *run, const char *fmt, ...)
{
    if (!run->opt.progress) return;
    char msg[256], count[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    progress_count(run, count, sizeof count);
    fprintf(stderr, "\r\033[K[%5.1fs] %s%s", tdacl__now() - run->started, count, msg);
    fflush(stderr);
}

void bench_row_done(bench_run *run, bench_row *r)
{
    if (strcmp(r->suite, "peak")) run->done++;
    if (run->opt.progress) fprintf(stderr, "\r\033[K");
    if (!run->header_printed) bench_print_header(stdout), run->header_printed = 1;
    bench_print_row(r, stdout);
    fflush(stdout);
    /* failures to write are reported at the end, where they count */
    if (run->opt.json) bench_write_json(run, run->opt.json);
    if (run->opt.csv) bench_write_csv(run, run->opt.csv);
}

void bench_finish_row(bench_run *run, bench_row *r)
{
    const bench_device *d = &run->devices[r->device_index];
    double sec = r->s.median * 1e-3;
    if (sec > 0 && r->flops > 0) r->tflops = r->flops / sec * 1e-12;
    if (sec > 0 && r->bytes > 0) r->gbs = r->bytes / sec * 1e-9;
    /* rows of the tensor-core variant against the matrix units' measured rate of their
     * operand type (tf32 rows: f32 storage at precision tf32) */
    const double mma_peak = !strcmp(r->dtype, "tf32") ? d->peak.mma_tf32_gflops : d->peak.mma_bf16_gflops;
    const double flops_peak = !strcmp(r->impl, "tdacl-mma") && mma_peak > 0 ? mma_peak : d->peak.fp32_gflops;
    if (d->have_peak && flops_peak > 0) r->pct_peak_flops = 100.0 * r->tflops * 1e3 / flops_peak;
    if (d->have_peak && d->peak.bandwidth_gbs > 0) r->pct_peak_bw = 100.0 * r->gbs / d->peak.bandwidth_gbs;
}

void bench_free(bench_run *run)
{
    free(run->rows);
    run->rows = NULL;
    run->nrows = run->cap = 0;
}
