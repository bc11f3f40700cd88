/* Sampling loop and order statistics for device timings. */
#include <stdlib.h>
#include <string.h>

#include "tools/measure.h"

void tdacl__measure_opts_init(tdacl_measure_opts *o)
{
    o->warmup = 2;
    o->min_samples = 10;
    o->min_ms = 100.0;
    o->max_samples = 200;
    o->max_seconds = 20.0;
    o->noisy_spread = 0.10;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Linear-interpolated quantile of sorted data. */
static double quantile(const double *v, int n, double q)
{
    if (n == 1) return v[0];
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) return v[n - 1];
    return v[i] + (pos - i) * (v[i + 1] - v[i]);
}

void tdacl__samples_summarise(tdacl_samples *s, double noisy_spread)
{
    if (s->n <= 0) {
        s->min = s->median = s->max = s->mean = s->spread = 0;
        s->noisy = 0;
        return;
    }
    double *v = malloc((size_t)s->n * sizeof *v);
    if (!v) return;
    memcpy(v, s->ms, (size_t)s->n * sizeof *v);
    qsort(v, (size_t)s->n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < s->n; i++) sum += v[i];
    s->min = v[0];
    s->max = v[s->n - 1];
    s->median = quantile(v, s->n, 0.5);
    s->mean = sum / s->n;
    s->spread = s->median > 0 ? (quantile(v, s->n, 0.9) - quantile(v, s->n, 0.1)) / s->median : 0;
    s->noisy = s->spread > noisy_spread;
    free(v);
}

tdacl_status tdacl__measure(tdacl_run_fn fn, void *user, const tdacl_measure_opts *o_in, tdacl_samples *s)
{
    tdacl_measure_opts o;
    if (o_in) o = *o_in;
    else tdacl__measure_opts_init(&o);
    if (o.max_samples > TDACL_MAX_SAMPLES) o.max_samples = TDACL_MAX_SAMPLES;
    memset(s, 0, sizeof *s);
    double ms;
    for (int i = 0; i < o.warmup; i++) {
        tdacl_status st = fn(user, &ms);
        if (st) return st;
    }
    double total = 0, t0 = tdacl__now();
    while (s->n < o.max_samples) {
        tdacl_status st = fn(user, &ms);
        if (st) return st;
        s->ms[s->n++] = ms;
        total += ms;
        if (s->n >= o.min_samples && total >= o.min_ms) break;
        if (s->n >= o.min_samples && tdacl__now() - t0 > o.max_seconds) break;
    }
    tdacl__samples_summarise(s, o.noisy_spread);
    return TDACL_SUCCESS;
}
