/* tdacl-bench: shared types of the benchmark's driver, suites and reports. */
#ifndef TDACL_BENCH_H
#define TDACL_BENCH_H

#include <stdio.h>

#include "tools/measure.h"
#include "runtime/tuning.h"

#define BENCH_SCHEMA "tdacl-bench/1"
#define BENCH_MAX_DEVICES 16
#define BENCH_MAX_LIST 16

typedef struct bench_device {
    tdacl_device_info info;
    tdacl_peak peak;
    int have_peak;
} bench_device;

/* One measured configuration.  Rows compare across runs by their key (suite, name, impl
 * aside, dtype, path, shape, beta, device name). */
typedef struct bench_row {
    char suite[16];      /* peak | attention | gemm | forward */
    char name[32];       /* fma, bandwidth, launch, tra, softmax, sgemm, ... */
    char impl[32];       /* tdacl, clblast, pytorch-sdpa, authors-triton, ... */
    char variant[32];    /* tdacl rows: the registry row that ran (attention.mma, gemm.simt, ...) */
    char device[128];    /* device name */
    int device_index;
    char dtype[8];
    char path[8];        /* prefill | decode | "" */
    int64_t B, H, Tq, Tk, M, N, K;
    int d, dv;
    double beta;         /* density knob of tra/tda; -1 when not applicable */
    double alpha;        /* entmax's alpha (its density knob); -1 when not applicable */
    char params[160];    /* tuning parameters used */
    char params_source[16];
    char params_origin[240];
    tdacl_samples s;
    double flops;        /* nominal FLOPs per run (docs/spec.md section 5) */
    double bytes;        /* minimum bytes per run (inputs once + output once) */
    double tflops, gbs, pct_peak_flops, pct_peak_bw;
    double bound_ms;     /* decode: time to read K once at the measured bandwidth */
    double sparsity;     /* attention: exact-zero fraction of the weights, -1 if unknown */
    double value;        /* peak rows: the measured rate (GFLOP/s, GB/s, us) */
    char unit[12];
    char note[400];
} bench_row;

typedef struct bench_options {
    char suites[BENCH_MAX_LIST][16];
    int nsuites;
    const char *device;
    int quick;
    char kinds[BENCH_MAX_LIST][16];
    int nkinds;
    int64_t T[BENCH_MAX_LIST];
    int nT;
    char dtypes[BENCH_MAX_LIST][8];
    int ndtypes;
    double betas[BENCH_MAX_LIST];
    int nbetas;
    double alphas[BENCH_MAX_LIST]; /* entmax density sweep (default 1.5) */
    int nalphas;
    int64_t B, H;
    int d;
    int64_t decode_B, decode_H, decode_Tk, decode_Tq;
    int64_t topk; /* topk_theta: keys its thresholds keep a row (of N(0,1) scores) */
    int topk_post; /* topk_theta: post-softmax thresholds (on the weights) */
    int decode;          /* include decode rows */
    int serving;         /* forward serving rows with --quick (always without it) */
    int no_prefill;      /* skip the attention prefill rows */
    int vs_generic;      /* also time the generic-ladder parameters */
    const char *json, *csv, *plot, *compare;
    const char *load;    /* report a saved run instead of measuring */
    tdacl_measure_opts measure;
    int progress;        /* progress lines on stderr */
} bench_options;

typedef struct bench_run {
    bench_options opt;
    bench_device devices[BENCH_MAX_DEVICES];
    int ndevices;
    bench_row *rows;
    int nrows, cap;
    int planning;            /* suites only count their timed rows into total_planned */
    int total_planned, done; /* progress: timed rows planned and finished */
    double started, measuring_since;
    int header_printed;      /* the table's column header went to stdout */
    int complete, interrupted;
    char created[32];
} bench_run;

/* Parses argv into o (defaults first).  Returns 0, 1 after printing --help, or 2 after
 * naming the bad argument on stderr. */
int bench_parse_args(int argc, char **argv, bench_options *o);

bench_row *bench_add_row(bench_run *run);
/* In the planning pass: counts one timed row and returns 1 (the suite skips the work). */
int bench_count_only(bench_run *run);
/* A timed row is finished (measured or failed): prints it, rewrites --json/--csv so that they
 * hold every row so far, and advances the progress count. */
void bench_row_done(bench_run *run, bench_row *r);
/* The signal handler: the first SIGINT/SIGTERM lets the row being measured finish, then the
 * suites start no more rows and the run ends with its rows printed and its files complete;
 * bench_main.c installs it with SA_RESETHAND, so a second signal kills at once. */
void bench_on_signal(int sig);
/* The signal number received, 0 if none. */
int bench_stop_requested(void);
void bench_progress(bench_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fills tflops/gbs/percentages from samples, flops, bytes and the device's peak. */
void bench_finish_row(bench_run *run, bench_row *r);

/* suites: return 0 on success; they append rows */
int bench_suite_peak(bench_run *run, tdacl_context *ctx, int dev);
int bench_suite_attention(bench_run *run, tdacl_context *ctx, int dev);
int bench_suite_gemm(bench_run *run, tdacl_context *ctx, int dev);
int bench_suite_forward(bench_run *run, tdacl_context *ctx, int dev);

/* reports */
void bench_print_device(const bench_run *run, int i, FILE *f);
void bench_print_header(FILE *f);
void bench_print_row(const bench_row *r, FILE *f);
void bench_print_table(const bench_run *run, FILE *f);
int bench_write_json(const bench_run *run, const char *path);
int bench_write_csv(const bench_run *run, const char *path);
/* Plot format from the file name's extension (0 png, 1 svg, 2 pdf); -1 after naming the
 * problem on stderr. */
int bench_plot_format(const char *path);
/* Prefill latency vs T, one panel per (device, dtype); old (--compare) dashed, or NULL. */
int bench_plot(const bench_run *run, const bench_run *old, const char *path);
/* Loads rows of a JSON file written by bench_write_json (or the anchors script). */
int bench_load_json(const char *path, bench_run *out);
/* Prints new/old ratios; returns the number of regressions. */
int bench_compare(const bench_run *now, const bench_run *old, FILE *f);
void bench_free(bench_run *run);
/* Row key equality used by --compare (impl and device name ignored when `loose`). */
int bench_same_key(const bench_row *a, const bench_row *b, int loose);

#endif
