/* The tuner: search a kernel's parameter space on this device.  Each candidate must pass
 * the constraint predicate, build, and match a reference on a small problem before it is
 * timed at the representative shape; the best survives interruption. */
#ifndef TDACL_TUNER_H
#define TDACL_TUNER_H

#include "ops/attention.h"
#include "tools/measure.h"

typedef enum tdacl_tune_strategy {
    TDACL_TUNE_EXHAUSTIVE = 0,
    TDACL_TUNE_RANDOM = 1,
    TDACL_TUNE_ANNEAL = 2
} tdacl_tune_strategy;

/* Plain double-precision C[M,N] = epilogue(A[M,K] W[K,N]) for the GEMM check (see gemm.h). */
void tdacl__reference_gemm(const float *a, const float *w, const float *bias, const float *res, int flags, int M,
                           int N, int K, float *c);

/* Reference attention on host arrays (contiguous [B,H,T,D] floats; q2/k2 NULL for one-view
 * kinds); writes out [B,H,Tq,dv].  `desc` has its defaults resolved (scale, offset). */
typedef void (*tdacl_reference_fn)(const tdacl_attention_desc *desc, int B, int H, int Tq, int Tk, int d,
                                   int dv, const float *q, const float *k, const float *v, const float *q2,
                                   const float *k2, float *out);

/* topk_theta without a calibration (the tuner's and the bench's inputs): the pre-softmax
 * threshold of row id r that keeps about k of r + 1 scores drawn from N(0, 1) -- the upper
 * k / (r + 1) quantile of N(0, 1), -inf (keep all) for r + 1 <= k.  The tuner uses k =
 * TDACL_TUNE_TOPK, and its reference the same thresholds. */
#define TDACL_TUNE_TOPK 16
double tdacl__topk_normal_threshold(int64_t row_id, int64_t k);
/* Those thresholds for every row id 0..T-1 of H heads: out[h * T + r], as fp32. */
void tdacl__topk_normal_thresholds(int64_t H, int64_t T, int64_t k, float *out);

/* The library's own double-precision reference (src/tools/reference.c). */
void tdacl__reference_attention(const tdacl_attention_desc *desc, int B, int H, int Tq, int Tk, int d, int dv,
                                const float *q, const float *k, const float *v, const float *q2,
                                const float *k2, float *out);

typedef struct tdacl_tune_job {
    const char *kernel;     /* "attention", "attention_decode" or "gemm" */
    int kind;               /* attention kind */
    tdacl_dtype dtype;      /* attention: q/k/v storage; gemm: weight storage */
    tdacl_precision precision; /* attention: desc.precision (tf32: f32 storage as tf32) */
    int d;                  /* attention: head dim (= dv) */
    int tq;                 /* decode: query rows (0: 1) */
    int64_t B, H, T;        /* attention timing shape: prefill Tq = Tk = T; decode Tq = 1, Tk = T;
                               gemm: M = T rows */
    int64_t N, K;           /* gemm timing shape: C[T, N] = A[T, K] W[K, N] */
    tdacl_tune_strategy strategy;
    double budget_s;        /* wall-clock budget for the search (0 = none) */
    unsigned seed;
    volatile int *stop;     /* set asynchronously (SIGINT) to end the search early */
    tdacl_reference_fn reference;
    tdacl_measure_opts measure;
    int verbose;            /* progress lines on stderr */
    int jobs;               /* > 1: build the candidates in that many processes first */
    /* Builds programs into the cache in fresh processes (OpenCL state cannot cross fork(),
     * and a compiler cannot be stopped in-process); each process gets a share of the option
     * strings; unfinished builders are killed at `deadline` (tdacl__now() time) or when
     * *stop is set.  Returns the number of builders killed unfinished.  With it, the search
     * keeps its budget and stops promptly even inside a long compile; NULL: candidates
     * compile in-process, which the budget and *stop cannot interrupt. */
    int (*prebuild)(int device_index, const char *cache_dir, const char *variant, char *const *options, int n,
                    int jobs, double deadline, volatile int *stop);
} tdacl_tune_job;

typedef struct tdacl_tune_result {
    tdacl_param_values best, generic;
    double best_ms, generic_ms; /* median device time at the timing shape */
    int combinations;           /* the space's size */
    int candidates, tried, rejected_constraint, rejected_reference, failed;
    int interrupted;
    int budget_spent;           /* the budget ended the search before every candidate was tried */
    int compile_stopped;        /* a candidate's compile was killed at the deadline or by *stop */
    tdacl_problem problem;
} tdacl_tune_result;

/* *ctx may be replaced by a fresh context on the same device when a candidate breaks it. */
tdacl_status tdacl__tune(tdacl_context **ctx, const tdacl_tune_job *job, tdacl_tune_result *res);

/* Fills a database entry for this device and the job's problem from a result. */
void tdacl__tune_entry(const tdacl_context *ctx, const tdacl_tune_job *job, const tdacl_tune_result *res,
                       int device_specific, tdacl_tdb_entry *e);

#endif
