/* Repeated device timing, shared by the benchmark and the tuner: warm up, then sample
 * until at least min_samples samples and min_ms of device time are collected. */
#ifndef TDACL_MEASURE_H
#define TDACL_MEASURE_H

#include "runtime/runtime.h"

#define TDACL_MAX_SAMPLES 1000

/* One run: enqueue the work, wait, and return its device time in ms. */
typedef tdacl_status (*tdacl_run_fn)(void *user, double *ms);

typedef struct tdacl_samples {
    int n;
    double ms[TDACL_MAX_SAMPLES];
    double min, median, max, mean;
    double spread;  /* (p90 - p10) / median: the noise band of this row */
    int noisy;      /* spread above the noise threshold */
} tdacl_samples;

typedef struct tdacl_measure_opts {
    int warmup;          /* untimed runs first (default 2) */
    int min_samples;     /* default 10 */
    double min_ms;       /* total sampled device time, default 100 */
    int max_samples;     /* default 200 */
    double max_seconds;  /* wall-clock cap per row, default 20 */
    double noisy_spread; /* default 0.10 */
} tdacl_measure_opts;

void tdacl__measure_opts_init(tdacl_measure_opts *o);
tdacl_status tdacl__measure(tdacl_run_fn fn, void *user, const tdacl_measure_opts *o, tdacl_samples *s);
/* Fills min/median/max/mean/spread/noisy from s->ms[0..n). */
void tdacl__samples_summarise(tdacl_samples *s, double noisy_spread);

#endif
