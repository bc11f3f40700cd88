/* Parameter search (see tuner.h).  One loop serves every kernel: a target supplies the check
 * problem with its reference result, the timing problem, and the build options of a
 * candidate; the loop enumerates, filters, prebuilds, checks, times and keeps the best. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kinds.h"
#include "ops/gemm.h"
#include "tools/tuner.h"

/* splitmix64: deterministic candidate order and test inputs */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static float normal(uint64_t *s)
{
    double u1 = ((double)(mix(s) >> 11) + 1.0) / 9007199254740993.0, u2 = (double)(mix(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* x rounded to what the device stores for dtype */
static float stored(float x, tdacl_dtype dt)
{
    if (dt == TDACL_BF16) return tdacl_bf16_to_f32(tdacl_f32_to_bf16(x));
    if (dt == TDACL_F16) return tdacl_f16_to_f32(tdacl_f32_to_f16(x));
    return x;
}

/* Every combination of the space's candidate values (+1 slot for the generic default); -1 out of
 * memory, -2 a space of more than TDACL_MAX_PARAMS parameters. */
static int enumerate(const tdacl_kernel_space *ks, tdacl_param_values **out)
{
    const int np = ks->nparams;
    int total = 1, count[TDACL_MAX_PARAMS];
    if (np < 0 || np > TDACL_MAX_PARAMS) return -2;
    for (int p = 0; p < np; p++) {
        count[p] = 0;
        while (count[p] < TDACL_MAX_CANDIDATES && ks->params[p].candidates[count[p]] != TDACL_END) count[p]++;
        total *= count[p];
    }
    *out = calloc((size_t)total + 1, sizeof **out);
    if (!*out) return -1;
    for (int i = 0; i < total; i++) {
        int rem = i;
        for (int p = np - 1; p >= 0; p--) {
            (*out)[i].v[p] = ks->params[p].candidates[rem % count[p]];
            rem /= count[p];
        }
    }
    return total;
}

/* ---- targets ---- */

typedef struct target target;
struct target {
    const tdacl_tune_job *job;
    const tdacl_variant_def *row;   /* the variant being tuned */
    tdacl_problem problem;          /* of the timing shape: constraints and database keys */
    tdacl_status (*setup)(target *t, tdacl_context *ctx);
    void (*teardown)(target *t);
    tdacl_status (*run_check)(target *t, tdacl_context *ctx, const tdacl_param_values *v, float *got);
    tdacl_status (*run_timed)(target *t, tdacl_context *ctx, const tdacl_param_values *v, double *ms);
    void (*options)(target *t, const tdacl_param_values *v, tdacl_strbuf *sb);
    float *want;                    /* reference output of the check problem */
    int64_t nwant;
    double tol;                     /* relative to the largest |want| */
    void *state;
};

/* -- attention -- */

typedef struct attn_problem {
    tdacl_tensor *q, *k, *v, *q2, *k2, *out, *thresholds;
    tdacl_attention_tensors t;
    tdacl_attention_plan plan;
} attn_problem;

typedef struct attn_state {
    attn_problem small, big;
} attn_state;


static void attn_free_problem(attn_problem *p)
{
    tdacl_tensor_destroy(p->q), tdacl_tensor_destroy(p->k), tdacl_tensor_destroy(p->v);
    tdacl_tensor_destroy(p->q2), tdacl_tensor_destroy(p->k2), tdacl_tensor_destroy(p->out);
    tdacl_tensor_destroy(p->thresholds);
    memset(p, 0, sizeof *p);
}

/* Device tensors of one problem; host copies (as stored) when asked. */
static tdacl_status attn_make(tdacl_context *ctx, const tdacl_tune_job *job, int64_t B, int64_t H, int64_t Tq,
                              int64_t Tk, float beta, float **host, attn_problem *p)
{
    memset(p, 0, sizeof *p);
    int two = tdacl__kind_views(job->kind) == 2, d = job->d;
    int64_t qs[4] = {B, H, Tq, d}, ks[4] = {B, H, Tk, d};
    tdacl_tensor **slots[5] = {&p->q, &p->k, &p->v, &p->q2, &p->k2};
    const int64_t *shapes[5] = {qs, ks, ks, qs, ks};
    tdacl_status st = TDACL_SUCCESS;
    uint64_t seed = job->seed * 7919ULL + 17;
    for (int i = 0; i < 5 && !st; i++) {
        if (i >= 3 && !two) continue;
        st = tdacl_tensor_create(ctx, job->dtype, 4, shapes[i], slots[i]);
        if (st) break;
        int64_t n = shapes[i][0] * shapes[i][1] * shapes[i][2] * shapes[i][3];
        if (host) {
            host[i] = malloc((size_t)n * sizeof(float));
            if (!host[i]) { st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuner: out of memory"); break; }
            for (int64_t e = 0; e < n; e++) host[i][e] = stored(normal(&seed), job->dtype);
            st = tdacl_tensor_upload(*slots[i], host[i], TDACL_F32, n);
        } else {
            st = tdacl__tensor_fill_normal(*slots[i], (uint32_t)(job->seed + (unsigned)i), 0.0f, 1.0f);
        }
    }
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, qs, &p->out);
    if (!st && job->kind == TDACL_ATTN_TOPK_THETA) { /* thresholds for N(0, 1) scores, as the reference's */
        const int64_t ts[2] = {H, Tk};
        float *th = malloc((size_t)(H * Tk) * sizeof *th);
        if (!th) st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuner: out of memory");
        else tdacl__topk_normal_thresholds(H, Tk, TDACL_TUNE_TOPK, th);
        if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 2, ts, &p->thresholds);
        if (!st) st = tdacl_tensor_upload(p->thresholds, th, TDACL_F32, H * Tk);
        free(th);
    }
    if (!st) {
        p->t.q = p->q, p->t.k = p->k, p->t.v = p->v, p->t.q2 = p->q2, p->t.k2 = p->k2, p->t.out = p->out;
        p->t.thresholds = p->thresholds;
        tdacl_attention_desc desc;
        tdacl_attention_desc_init(&desc);
        desc.kind = (tdacl_attention_kind)job->kind;
        desc.beta = beta;
        desc.path = tdacl__variant_of_space(job->kernel)->op == TDACL_OP_ATTENTION_DECODE ? TDACL_PATH_DECODE
                                                                                           : TDACL_PATH_PREFILL;
        desc.precision = job->precision;
        st = tdacl__attention_plan(ctx, &desc, &p->t, &p->plan);
    }
    /* the plan took the preferred variant; the tuner times the one it tunes */
    const tdacl_variant_def *row = tdacl__variant_of_space(job->kernel);
    char why[200];
    const tdacl_attention_call call = {&p->plan, &p->t, NULL, NULL};
    if (!st && row->supports && row->supports(ctx, &call, why, sizeof why))
        st = tdacl__fail(ctx, TDACL_ERR_UNSUPPORTED, "tune: %s does not run this problem: %s", row->name, why);
    if (!st) p->plan.row = row;
    if (st) attn_free_problem(p);
    return st;
}

static int attn_decode(const target *t) { return t->row->op == TDACL_OP_ATTENTION_DECODE; }
/* query rows of a decode job */
static int64_t decode_rows(const tdacl_tune_job *job) { return job->tq > 1 ? job->tq : 1; }

static tdacl_status attn_setup(target *t, tdacl_context *ctx)
{
    const tdacl_tune_job *job = t->job;
    attn_state *s = t->state;
    int decode = attn_decode(t);
    /* a small, awkward check problem; beta 0.5 keeps a fraction of weights non-zero.  Decode
     * checks the timing shape's query rows: local memory grows with the rows, and a
     * candidate that fits the timed problem must not fail on the check */
    int64_t sTq = decode ? decode_rows(job) : 77, sTk = decode ? 333 : 77;
    float *host[5] = {0};
    tdacl_status st = attn_make(ctx, job, 1, 2, sTq, sTk, 0.5f, host, &s->small);
    if (!st && !t->want) {
        t->nwant = 2 * sTq * job->d;
        t->want = malloc((size_t)t->nwant * sizeof *t->want);
        if (!t->want) st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuner: out of memory");
        else
            job->reference(&s->small.plan.desc, 1, 2, (int)sTq, (int)sTk, job->d, job->d, host[0], host[1], host[2],
                           host[3], host[4], t->want);
    }
    for (int i = 0; i < 5; i++) free(host[i]);
    if (!st) st = attn_make(ctx, job, job->B, job->H, decode ? decode_rows(job) : job->T, job->T, 1.0f, NULL, &s->big);
    /* the lookup key as the variant sees it (the mma row adds whether it runs natively) */
    const tdacl_attention_call call = {&s->big.plan, &s->big.t, NULL, NULL};
    if (!st) t->row->problem(ctx, &call, &t->problem);
    return st;
}

static void attn_teardown(target *t)
{
    attn_state *s = t->state;
    attn_free_problem(&s->small);
    attn_free_problem(&s->big);
}

static tdacl_status attn_run_check(target *t, tdacl_context *ctx, const tdacl_param_values *v, float *got)
{
    attn_state *s = t->state;
    tdacl_attention_stats st_;
    tdacl_status st = tdacl__attention_run(ctx, &s->small.plan, &s->small.t, v, NULL, &st_);
    return st ? st : tdacl_tensor_download(s->small.out, got, TDACL_F32, t->nwant);
}

static tdacl_status attn_run_timed(target *t, tdacl_context *ctx, const tdacl_param_values *v, double *ms)
{
    attn_state *s = t->state;
    tdacl_attention_stats st_;
    tdacl_status st = tdacl__attention_run(ctx, &s->big.plan, &s->big.t, v, NULL, &st_);
    *ms = st_.kernel_ms;
    return st;
}

static void attn_options(target *t, const tdacl_param_values *v, tdacl_strbuf *sb)
{
    attn_state *s = t->state;
    tdacl__attention_options(&s->big.plan, v, sb);
}

/* -- gemm -- */

typedef struct gemm_state {
    tdacl_tensor *a, *w, *bias, *res, *c;     /* check problem */
    tdacl_tensor *ba, *bw, *bbias, *bc;        /* timing problem */
    int m, n, k;
} gemm_state;

enum { CHECK_M = 77, CHECK_N = 67, CHECK_K = 129 }; /* odd sizes exercise every edge */

static tdacl_status gemm_tensor(tdacl_context *ctx, tdacl_dtype dt, int64_t r, int64_t c, const float *host,
                                tdacl_tensor **t)
{
    int64_t shape[2] = {r, c};
    tdacl_status st = tdacl_tensor_create(ctx, dt, 2, shape, t);
    if (!st && host) st = tdacl_tensor_upload(*t, host, TDACL_F32, r * c);
    return st;
}

/* the tensor-core row takes bf16 weights at precision bf16 (a rounded to bf16) and f32 weights
 * at precision tf32 */
static tdacl_precision gemm_precision(const target *t)
{
    if (!t->row->matrix_units) return TDACL_PRECISION_EXACT;
    return t->job->dtype == TDACL_F32 ? TDACL_PRECISION_TF32 : TDACL_PRECISION_BF16;
}

/* a's dtype: f32, or bf16 where the row takes only that (the wgmma GEMM); -1 (why says so)
 * when the row takes neither on this device */
static int gemm_a_dtype(const target *t, tdacl_context *ctx, tdacl_tensor *w, tdacl_tensor *c, char *why, size_t n)
{
    static const tdacl_dtype tries[2] = {TDACL_F32, TDACL_BF16};
    for (int i = 0; i < 2; i++) {
        tdacl_tensor *a = NULL;
        if (gemm_tensor(ctx, tries[i], 1, 16, NULL, &a)) return snprintf(why, n, "%s", tdacl_last_error(ctx)), -1;
        const tdacl_matmul_call call = {c, a, w, NULL, NULL, 0, 16, 16, 16, 0, NULL, gemm_precision(t), NULL};
        const int refused = t->row->supports && t->row->supports(ctx, &call, why, n);
        tdacl_tensor_destroy(a);
        if (!refused) return (int)tries[i];
    }
    return -1;
}

static tdacl_status gemm_setup(target *t, tdacl_context *ctx)
{
    const tdacl_tune_job *job = t->job;
    gemm_state *s = t->state;
    const int M = CHECK_M, N = CHECK_N, K = CHECK_K;
    char why[256];
    tdacl_tensor *w16 = NULL, *c16 = NULL;
    int adt_or = -1;
    if (!gemm_tensor(ctx, job->dtype, 16, 16, NULL, &w16) && !gemm_tensor(ctx, TDACL_F32, 16, 16, NULL, &c16))
        adt_or = gemm_a_dtype(t, ctx, w16, c16, why, sizeof why);
    else
        snprintf(why, sizeof why, "%s", tdacl_last_error(ctx)); /* its probe tensors were not allocated */
    tdacl_tensor_destroy(w16), tdacl_tensor_destroy(c16);
    if (adt_or < 0) return tdacl__fail(ctx, TDACL_ERR_UNSUPPORTED, "tune: %s cannot run here: %s", t->row->name, why);
    const tdacl_dtype adt = (tdacl_dtype)adt_or;
    uint64_t seed = job->seed * 131ULL + 3;
    float *a = malloc((size_t)M * K * 4), *w = malloc((size_t)K * N * 4), *b = malloc((size_t)N * 4),
          *r = malloc((size_t)M * N * 4);
    tdacl_status st = (a && w && b && r) ? TDACL_SUCCESS : tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuner: out of memory");
    for (int i = 0; !st && i < M * K; i++) a[i] = stored(normal(&seed), adt);
    for (int i = 0; !st && i < K * N; i++) w[i] = stored(normal(&seed), job->dtype);
    for (int i = 0; !st && i < N; i++) b[i] = normal(&seed);
    for (int i = 0; !st && i < M * N; i++) r[i] = normal(&seed);
    if (!st && !t->want) {
        t->nwant = (int64_t)M * N;
        t->want = malloc((size_t)t->nwant * 4);
        if (!t->want) st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tuner: out of memory");
        else tdacl__reference_gemm(a, w, b, r, TDACL_EPI_BIAS | TDACL_EPI_GELU | TDACL_EPI_RESIDUAL, M, N, K, t->want);
    }
    if (!st) st = gemm_tensor(ctx, adt, M, K, a, &s->a);
    if (!st) st = gemm_tensor(ctx, job->dtype, K, N, w, &s->w);
    if (!st) st = gemm_tensor(ctx, TDACL_F32, 1, N, b, &s->bias);
    if (!st) st = gemm_tensor(ctx, TDACL_F32, M, N, r, &s->res);
    if (!st) st = gemm_tensor(ctx, TDACL_F32, M, N, NULL, &s->c);
    free(a), free(w), free(b), free(r);
    s->m = (int)job->T, s->n = (int)job->N, s->k = (int)job->K;
    if (!st) st = gemm_tensor(ctx, adt, s->m, s->k, NULL, &s->ba);
    if (!st) st = gemm_tensor(ctx, job->dtype, s->k, s->n, NULL, &s->bw);
    if (!st) st = gemm_tensor(ctx, TDACL_F32, 1, s->n, NULL, &s->bbias);
    if (!st) st = gemm_tensor(ctx, TDACL_F32, s->m, s->n, NULL, &s->bc);
    if (!st) st = tdacl__tensor_fill_normal(s->ba, job->seed, 0, 1);
    if (!st) st = tdacl__tensor_fill_normal(s->bw, job->seed + 1, 0, 0.02f);
    if (!st) st = tdacl__tensor_fill_normal(s->bbias, job->seed + 2, 0, 0.02f);
    const tdacl_matmul_call call = {s->bc, s->ba, s->bw, NULL, NULL, 0, s->m, s->n, s->k, 0, NULL, gemm_precision(t), NULL};
    if (!st) t->row->problem(ctx, &call, &t->problem);
    return st;
}

static void gemm_teardown(target *t)
{
    gemm_state *s = t->state;
    tdacl_tensor *all[] = {s->a, s->w, s->bias, s->res, s->c, s->ba, s->bw, s->bbias, s->bc};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(all); i++) tdacl_tensor_destroy(all[i]);
    memset(s, 0, sizeof *s);
}

static tdacl_status gemm_run_check(target *t, tdacl_context *ctx, const tdacl_param_values *v, float *got)
{
    gemm_state *s = t->state;
    tdacl_status st = tdacl__gemm(ctx, s->c, s->a, s->w, s->bias, s->res,
                                  TDACL_EPI_BIAS | TDACL_EPI_GELU | TDACL_EPI_RESIDUAL, CHECK_M, CHECK_N, CHECK_K, 0,
                                  gemm_precision(t), t->row, v, NULL);
    return st ? st : tdacl_tensor_download(s->c, got, TDACL_F32, t->nwant);
}

static tdacl_status gemm_run_timed(target *t, tdacl_context *ctx, const tdacl_param_values *v, double *ms)
{
    gemm_state *s = t->state;
    cl_event ev[2] = {NULL, NULL};
    tdacl_status st = tdacl__gemm(ctx, s->bc, s->ba, s->bw, s->bbias, NULL, TDACL_EPI_BIAS | TDACL_EPI_GELU, s->m, s->n,
                                  s->k, 0, gemm_precision(t), t->row, v, ev);
    if (!st) st = tdacl__span_ms(ctx, ev, ms);
    for (int i = 0; i < 2; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    return st;
}

static void gemm_options(target *t, const tdacl_param_values *v, tdacl_strbuf *sb)
{
    gemm_state *s = t->state;
    const tdacl_matmul_call call = {s->bc, s->ba, s->bw, NULL, NULL, 0, s->m, s->n, s->k, 0, NULL, gemm_precision(t), NULL};
    tdacl__variant_options(t->row, &call, v, sb);
}

/* ---- the search ---- */

typedef struct timing_job {
    target *t;
    tdacl_context *ctx;
    const tdacl_param_values *v;
} timing_job;

static tdacl_status time_once(void *user, double *ms)
{
    timing_job *j = user;
    return j->t->run_timed(j->t, j->ctx, j->v, ms);
}

/* 0 when the candidate matches the reference on the check problem; > 0 wrong; < 0 failed. */
static int check_candidate(target *t, tdacl_context *ctx, const tdacl_param_values *v, char *why, size_t wn)
{
    float *got = malloc((size_t)t->nwant * sizeof *got);
    if (!got) return snprintf(why, wn, "out of memory"), -1;
    tdacl_status st = t->run_check(t, ctx, v, got);
    if (st) {
        free(got);
        snprintf(why, wn, "run failed: %s", tdacl_last_error(ctx));
        return -1;
    }
    double scale = 0, err = 0;
    for (int64_t i = 0; i < t->nwant; i++) scale = fmax(scale, fabs(t->want[i]));
    for (int64_t i = 0; i < t->nwant; i++) {
        double e = fabs((double)got[i] - t->want[i]);
        if (!(e <= err)) err = isnan(e) ? INFINITY : e;
    }
    free(got);
    if (err > t->tol * scale + 1e-6) {
        snprintf(why, wn, "wrong result: max error %.3g vs scale %.3g", err, scale);
        return 1;
    }
    return 0;
}

/* Compiles the candidates through job->prebuild so that the timing loop finds them in the
 * program cache (compilation dominates tuning time; timing stays sequential). */
static int prebuild(tdacl_context *ctx, target *t, const tdacl_param_values *cands, int n, double deadline)
{
    const tdacl_tune_job *job = t->job;
    int killed = 0;
    if (!ctx->cache.enabled || !job->prebuild || n <= 0) return 0;
    char **opts = calloc((size_t)n, sizeof *opts);
    int ok = opts != NULL;
    for (int i = 0; ok && i < n; i++) {
        tdacl_strbuf sb = {0};
        t->options(t, &cands[i], &sb);
        opts[i] = sb.data;
        ok = !sb.oom;
    }
    if (ok) killed = job->prebuild(ctx->device_index, ctx->cache.dir, t->row->name, opts, n, job->jobs, deadline, job->stop);
    for (int i = 0; opts && i < n; i++) free(opts[i]);
    free(opts);
    return killed;
}

/* A new context on the same device and cache, for after a candidate broke the old one
 * (a kernel fault leaves an OpenCL context unusable). */
static tdacl_status reopen(tdacl_context **ctxp)
{
    tdacl_context *old = *ctxp;
    char sel[16], dir[512];
    snprintf(sel, sizeof sel, "%d", old->device_index);
    snprintf(dir, sizeof dir, "%s", old->cache.dir);
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.device = sel;
    desc.cache = old->cache.enabled;
    desc.cache_dir = dir;
    desc.log_fn = old->diag.log_fn;
    desc.log_user = old->diag.log_user;
    desc.log_level = old->diag.log_level;
    desc.use_tuning_db = old->use_tuning_db;
    tdacl_context_destroy(old);
    *ctxp = NULL;
    return tdacl_context_create(&desc, ctxp);
}

tdacl_status tdacl__tune(tdacl_context **ctxp, const tdacl_tune_job *job, tdacl_tune_result *res)
{
    tdacl_context *ctx = *ctxp;
    memset(res, 0, sizeof *res);
    const tdacl_variant_def *row = tdacl__variant_of_space(job->kernel);
    if (!row) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tune: unknown kernel '%s'", job->kernel);
    const tdacl_kernel_space *ks = row->space;
    attn_state as;
    gemm_state gs;
    memset(&as, 0, sizeof as), memset(&gs, 0, sizeof gs);
    target t = {0};
    t.job = job;
    t.row = row;
    if (row->op == TDACL_OP_MATMUL) {
        t.setup = gemm_setup, t.teardown = gemm_teardown, t.run_check = gemm_run_check;
        t.run_timed = gemm_run_timed, t.options = gemm_options, t.state = &gs;
        /* fp32 over K = 129 terms: far below 1e-4 of the largest output; a rounded to bf16
         * (2^-9 relative per product) on the matrix units stays below 1e-2 */
        t.tol = row->matrix_units ? 1e-2 : 1e-4;
    } else {
        if (!job->reference) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tune: no reference for attention");
        t.setup = attn_setup, t.teardown = attn_teardown, t.run_check = attn_run_check, t.run_timed = attn_run_timed;
        t.options = attn_options, t.state = &as;
        /* fp32 accumulation over a few hundred terms stays far below 1e-4 of the row scale; the
         * matrix units round each weight to the 16-bit input type before W x V (2^-8
         * relative for bf16), so their candidates are held to 1e-2 */
        t.tol = row->matrix_units ? 1e-2 : 1e-4;
    }
    double t_start = tdacl__now();
    tdacl_param_values *cands = NULL;
    tdacl_status st = t.setup(&t, ctx);
    if (st) goto done;
    res->problem = t.problem;
    int total = enumerate(ks, &cands);
    res->combinations = total;
    if (total < 0) {
        st = total == -2 ? tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: space %s has more than %d parameters", ks->kernel,
                                       TDACL_MAX_PARAMS)
                         : tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tune: out of memory");
        goto done;
    }
    /* keep only candidates that pass the constraints; the generic default goes first so
     * the result is never worse than what an unknown device gets */
    char why[256];
    int kept = 0;
    for (int i = 0; i < ks->nladder; i++) {
        tdacl_param_values v;
        if (!tdacl__params_parse(ks, ks->ladder[i], &v, why, sizeof why) &&
            !tdacl__params_check(ks, &ctx->info, &t.problem, &v, why, sizeof why)) {
            res->generic = v;
            break;
        }
    }
    /* filtered into a second array (reading and writing one array in place would clobber
     * candidates not yet read) */
    tdacl_param_values *all = cands;
    cands = calloc((size_t)total + 2, sizeof *cands);
    if (!cands) {
        free(all);
        st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tune: out of memory");
        goto done;
    }
    cands[kept++] = res->generic;
    /* second, what the lookup gives today (a shipped entry or a class default): the search
     * is timed against it early, so a short budget cannot settle on something slower */
    tdacl_tuned current;
    int have_current = !tdacl__tuned(ctx, ks, &t.problem, &current) &&
                       memcmp(&current.values, &res->generic, sizeof current.values) != 0;
    if (have_current) cands[kept++] = current.values;
    for (int i = 0; i < total; i++) {
        if (!memcmp(&all[i], &res->generic, sizeof all[i])) continue;
        if (have_current && !memcmp(&all[i], &current.values, sizeof all[i])) continue;
        if (tdacl__params_check(ks, &ctx->info, &t.problem, &all[i], why, sizeof why)) {
            res->rejected_constraint++;
            tdacl__log(ctx, TDACL_LOG_DEBUG, "tune: candidate rejected by constraints: %s", why);
            continue;
        }
        cands[kept++] = all[i];
    }
    free(all);
    res->candidates = kept;
    uint64_t rng = job->seed * 31ULL + 5;
    if (!ctx->cache.enabled || !job->prebuild)
        tdacl__log(ctx, TDACL_LOG_WARN, "tune: %s: candidates compile in this process, where neither the budget nor "
                   "Ctrl-C can stop a compile", !ctx->cache.enabled ? "the program cache is off" : "no prebuild helper");
    if (job->strategy != TDACL_TUNE_EXHAUSTIVE)
        for (int i = kept - 1; i > 1 + have_current; i--) { /* shuffle all but the defaults */
            int j = 1 + have_current + (int)(mix(&rng) % (uint64_t)(i - have_current));
            tdacl_param_values tmp = cands[i];
            cands[i] = cands[j];
            cands[j] = tmp;
        }
    res->best_ms = INFINITY;
    double cur_ms = INFINITY, temp = 0.3;
    int cur = 0;
    const double deadline = job->budget_s > 0 ? t_start + job->budget_s : 1e300;
    double timed_since = 0;
    for (int step = 0; step < kept; step++) {
        if (job->stop && *job->stop) { res->interrupted = 1; break; }
        if (step > 0 && tdacl__now() > deadline) { res->budget_spent = 1; break; }
        if (step == 1) timed_since = tdacl__now(); /* the estimate leaves out the first compile */
        int idx = step;
        /* compile the next batch in parallel; a builder still compiling at the deadline is
         * killed (the generic default, step 0, is always built: it is the fallback) */
        const int batch = 4 * job->jobs;
        int batched = job->jobs > 1 && job->strategy != TDACL_TUNE_ANNEAL;
        if (batched && step % batch == 0 &&
            prebuild(ctx, &t, cands + step, step + batch <= kept ? batch : kept - step, step ? deadline : 1e300)) {
            res->compile_stopped = 1;
            if (job->stop && *job->stop) { res->interrupted = 1; break; }
            if (tdacl__now() > deadline) { res->budget_spent = 1; break; }
        }
        if (job->strategy == TDACL_TUNE_ANNEAL && step > 1) {
            /* neighbour of the current point: the candidate differing least in log2 distance */
            int bestj = -1;
            double bestd = 1e30;
            for (int tries = 0; tries < 24; tries++) {
                int j = 1 + (int)(mix(&rng) % (uint64_t)(kept - 1));
                double dist = 0;
                for (int p = 0; p < ks->nparams; p++)
                    dist += fabs(log2(1.0 + cands[j].v[p]) - log2(1.0 + cands[cur].v[p]));
                if (dist > 0 && dist < bestd) bestd = dist, bestj = j;
            }
            idx = bestj < 0 ? step : bestj;
        }
        const tdacl_param_values *v = &cands[idx];
        char text[200];
        tdacl__params_text(ks, v, text, sizeof text);
        /* "[i/N ~time left]": the pace of the candidates after the first, capped by the budget */
        char at[64];
        int len = snprintf(at, sizeof at, "[%d/%d", step + 1, kept);
        if (step >= 2) {
            double left = (tdacl__now() - timed_since) / (step - 1) * (kept - step);
            if (deadline < 1e300 && deadline - tdacl__now() < left) left = deadline - tdacl__now();
            snprintf(at + len, sizeof at - (size_t)len, left >= 90 ? " ~%.0f min left]" : " ~%.0f s left]",
                     left >= 90 ? left / 60 : left);
        } else {
            snprintf(at + len, sizeof at - (size_t)len, "]");
        }
        /* one candidate at a time: compiled in a child process that the deadline can stop */
        if (!batched && prebuild(ctx, &t, v, 1, step ? deadline : 1e300)) {
            res->compile_stopped = 1;
            if (job->stop && *job->stop) { res->interrupted = 1; break; }
            res->budget_spent = 1;
            if (job->verbose) fprintf(stderr, "  %s %-48s compile stopped: the budget ran out\n", at, text);
            break;
        }
        res->tried++;
        int bad = check_candidate(&t, ctx, v, why, sizeof why);
        tdacl_samples s;
        if (!bad) {
            timing_job tj = {&t, ctx, v};
            if (tdacl__measure(time_once, &tj, &job->measure, &s)) {
                bad = -1;
                snprintf(why, sizeof why, "failed at the timing shape: %s", tdacl_last_error(ctx));
            }
        }
        if (bad > 0) {
            res->rejected_reference++;
            tdacl__log(ctx, TDACL_LOG_INFO, "tune: %s rejected: %s", text, why);
            if (job->verbose) fprintf(stderr, "  %s %-48s rejected: %s\n", at, text, why);
            if (idx == 0) {
                st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: the generic default %s fails its check: %s", text, why);
                goto done;
            }
            continue;
        }
        if (bad < 0) {
            /* a build or launch failure may have broken the context: start over */
            res->failed++;
            tdacl__log(ctx, TDACL_LOG_WARN, "tune: %s %s", text, why);
            if (job->verbose) fprintf(stderr, "  %s %-48s %s\n", at, text, why);
            if (idx == 0) {
                st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: the generic default %s fails: %s", text, why);
                goto done;
            }
            t.teardown(&t);
            st = reopen(ctxp);
            ctx = *ctxp;
            if (!st) st = t.setup(&t, ctx);
            if (st) goto done;
            continue;
        }
        if (idx == 0 && step == 0) res->generic_ms = s.median;
        if (job->verbose)
            fprintf(stderr, "  %s %-48s %10.4f ms%s\n", at, text, s.median, s.median < res->best_ms ? "  best" : "");
        if (s.median < res->best_ms) res->best_ms = s.median, res->best = *v;
        if (job->strategy == TDACL_TUNE_ANNEAL) {
            double accept = s.median < cur_ms ? 1.0 : exp(-(s.median / cur_ms - 1.0) / temp);
            if ((double)(mix(&rng) >> 11) / 9007199254740992.0 < accept) cur = idx, cur_ms = s.median;
            temp *= 0.97;
        }
    }
    if (!isfinite(res->best_ms) && res->interrupted)
        st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: %s interrupted before any candidate was timed", job->kernel);
    else if (!isfinite(res->best_ms))
        st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: no candidate of %s could be timed", job->kernel);
done:
    free(cands);
    free(t.want);
    if (*ctxp) t.teardown(&t);
    return st;
}

void tdacl__tune_entry(const tdacl_context *ctx, const tdacl_tune_job *job, const tdacl_tune_result *res,
                       int device_specific, tdacl_tdb_entry *e)
{
    const tdacl_kernel_space *ks = tdacl__variant_of_space(job->kernel)->space;
    int gemm = tdacl__variant_of_space(job->kernel)->op == TDACL_OP_MATMUL;
    tdacl__tdb_entry_init(e);
    snprintf(e->kernel, sizeof e->kernel, "%s", job->kernel);
    if (device_specific) {
        snprintf(e->device, sizeof e->device, "%s", ctx->info.name);
        snprintf(e->driver, sizeof e->driver, "%s", ctx->info.driver_version);
    }
    snprintf(e->arch, sizeof e->arch, "%s", ctx->info.arch);
    e->kind = gemm ? -1 : job->kind;
    e->dtype = tdacl__problem_key_dtype(&res->problem);
    e->d = gemm ? 0 : res->problem.d;
    e->dv = gemm ? 0 : res->problem.dv;
    snprintf(e->tbucket, sizeof e->tbucket, "%s", tdacl__t_bucket(job->T));
    /* a decode's key splits depend on how many (batch, head) pairs share the device */
    if (tdacl__variant_of_space(job->kernel)->op == TDACL_OP_ATTENTION_DECODE)
        snprintf(e->bhbucket, sizeof e->bhbucket, "%s", tdacl__bh_bucket(job->B * job->H));
    /* tra/tda's lazy weights (the tuner's beta 1) want other tiles than weights formed at once */
    if (res->problem.lazy) e->lazy = 1;
    e->nparams = ks->nparams;
    for (int i = 0; i < ks->nparams; i++) {
        snprintf(e->pname[i], sizeof e->pname[i], "%s", ks->params[i].name);
        e->pvalue[i] = res->best.v[i];
    }
    if (gemm)
        snprintf(e->comment, sizeof e->comment, "%.4f ms at M%lld N%lld K%lld (generic %.4f ms, %.2fx)", res->best_ms,
                 (long long)job->T, (long long)job->N, (long long)job->K, res->generic_ms,
                 res->best_ms > 0 ? res->generic_ms / res->best_ms : 0.0);
    else
        snprintf(e->comment, sizeof e->comment, "%.4f ms at B%lld H%lld T%lld (generic %.4f ms, %.2fx)", res->best_ms,
                 (long long)job->B, (long long)job->H, (long long)job->T, res->generic_ms,
                 res->best_ms > 0 ? res->generic_ms / res->best_ms : 0.0);
}
