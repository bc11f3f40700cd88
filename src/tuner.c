/* Parameter search for the attention kernels (see tuner.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

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

static int two_views(int kind) { return kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX; }

/* Every combination of the space's candidate values. */
static int enumerate(const tdacl_kernel_space *ks, tdacl_param_values **out)
{
    int total = 1, count[TDACL_MAX_PARAMS];
    for (int p = 0; p < ks->nparams; p++) {
        count[p] = 0;
        while (count[p] < TDACL_MAX_CANDIDATES && ks->params[p].candidates[count[p]] != TDACL_END) count[p]++;
        total *= count[p];
    }
    *out = calloc((size_t)total + 1, sizeof **out); /* + the generic default */
    if (!*out) return -1;
    for (int i = 0; i < total; i++) {
        int rem = i;
        for (int p = ks->nparams - 1; p >= 0; p--) {
            (*out)[i].v[p] = ks->params[p].candidates[rem % count[p]];
            rem /= count[p];
        }
    }
    return total;
}

typedef struct problem_data {
    tdacl_tensor *q, *k, *v, *q2, *k2, *out;
    tdacl_attention_tensors t;
    tdacl_attention_plan plan;
} problem_data;

static void free_problem(problem_data *p)
{
    tdacl_tensor_destroy(p->q), tdacl_tensor_destroy(p->k), tdacl_tensor_destroy(p->v);
    tdacl_tensor_destroy(p->q2), tdacl_tensor_destroy(p->k2), tdacl_tensor_destroy(p->out);
    memset(p, 0, sizeof *p);
}

/* Device tensors of one problem; host copies (rounded to the storage dtype) when asked. */
static tdacl_status make_problem(tdacl_context *ctx, const tdacl_tune_job *job, int64_t B, int64_t H, int64_t Tq,
                                 int64_t Tk, float beta, float **host, problem_data *p)
{
    memset(p, 0, sizeof *p);
    int two = two_views(job->kind), d = job->d;
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
            for (int64_t e = 0; e < n; e++) {
                float x = normal(&seed);
                /* the reference sees exactly what the device stores */
                if (job->dtype == TDACL_BF16) x = tdacl_bf16_to_f32(tdacl_f32_to_bf16(x));
                else if (job->dtype == TDACL_F16) x = tdacl_f16_to_f32(tdacl_f32_to_f16(x));
                host[i][e] = x;
            }
            st = tdacl_tensor_upload(*slots[i], host[i], TDACL_F32, n);
        } else {
            st = tdacl__tensor_fill_normal(*slots[i], (uint32_t)(job->seed + (unsigned)i), 0.0f, 1.0f);
        }
    }
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, qs, &p->out);
    if (!st) {
        p->t.q = p->q, p->t.k = p->k, p->t.v = p->v, p->t.q2 = p->q2, p->t.k2 = p->k2, p->t.out = p->out;
        tdacl_attention_desc desc;
        tdacl_attention_desc_init(&desc);
        desc.kind = (tdacl_attention_kind)job->kind;
        desc.beta = beta;
        desc.path = strcmp(job->kernel, "attention_decode") ? TDACL_PATH_PREFILL : TDACL_PATH_DECODE;
        st = tdacl__attention_plan(ctx, &desc, &p->t, &p->plan);
    }
    if (st) free_problem(p);
    return st;
}

typedef struct timing_job {
    tdacl_context *ctx;
    problem_data *p;
    const tdacl_param_values *v;
} timing_job;

static tdacl_status time_once(void *user, double *ms)
{
    timing_job *j = user;
    tdacl_attention_stats s;
    tdacl_status st = tdacl__attention_run(j->ctx, &j->p->plan, &j->p->t, j->v, NULL, &s);
    *ms = s.kernel_ms;
    return st;
}

/* 0 when the candidate's output on the check problem matches the reference. */
static int check_candidate(tdacl_context *ctx, problem_data *small, const float *want, int64_t n,
                           const tdacl_param_values *v, char *why, size_t wn)
{
    tdacl_attention_stats s;
    tdacl_status st = tdacl__attention_run(ctx, &small->plan, &small->t, v, NULL, &s);
    if (st) {
        snprintf(why, wn, "run failed: %s", tdacl_last_error(ctx));
        return -1;
    }
    float *got = malloc((size_t)n * sizeof *got);
    if (!got) return snprintf(why, wn, "out of memory"), -1;
    st = tdacl_tensor_download(small->out, got, TDACL_F32, n);
    if (st) {
        free(got);
        snprintf(why, wn, "download failed: %s", tdacl_last_error(ctx));
        return -1;
    }
    double scale = 0, err = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= err)) err = isnan(e) ? INFINITY : e;
    }
    free(got);
    /* fp32 accumulation over a few hundred terms stays far below 1e-4 of the row scale */
    if (err > 1e-4 * scale + 1e-6) {
        snprintf(why, wn, "wrong result: max error %.3g vs scale %.3g", err, scale);
        return 1;
    }
    return 0;
}

/* Compiles the candidates through job->prebuild so that the timing loop finds them in the
 * program cache (compilation dominates tuning time; timing stays sequential). */
static void prebuild(tdacl_context *ctx, const tdacl_tune_job *job, const tdacl_attention_plan *plan,
                     const tdacl_param_values *cands, int n, double deadline)
{
    if (!ctx->cache.enabled || !job->prebuild || n <= 0) return;
    char **opts = calloc((size_t)n, sizeof *opts);
    int ok = opts != NULL;
    for (int i = 0; ok && i < n; i++) {
        tdacl_strbuf sb = {0};
        tdacl__attention_options(plan, &cands[i], &sb);
        opts[i] = sb.data;
        ok = !sb.oom;
    }
    if (ok)
        job->prebuild(ctx->device_index, ctx->cache.dir,
                      plan->path == TDACL_PATH_DECODE ? "attention_decode" : "attention", opts, n, job->jobs,
                      deadline);
    for (int i = 0; opts && i < n; i++) free(opts[i]);
    free(opts);
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
    desc.log_fn = old->log_fn;
    desc.log_user = old->log_user;
    desc.log_level = old->log_level;
    desc.use_tuning_db = old->use_tuning_db;
    tdacl_context_destroy(old);
    *ctxp = NULL;
    return tdacl_context_create(&desc, ctxp);
}

tdacl_status tdacl__tune(tdacl_context **ctxp, const tdacl_tune_job *job, tdacl_tune_result *res)
{
    tdacl_context *ctx = *ctxp;
    memset(res, 0, sizeof *res);
    const tdacl_kernel_space *ks = tdacl__kernel_space(job->kernel);
    if (!ks) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "tune: unknown kernel '%s'", job->kernel);
    int decode = !strcmp(job->kernel, "attention_decode");
    double t_start = tdacl__now();

    /* the check problem, with the reference computed once */
    problem_data small, big;
    float *host[5] = {0};
    int64_t sTq = decode ? 3 : 77, sTk = decode ? 333 : 77;
    tdacl_status st = make_problem(ctx, job, 1, 2, sTq, sTk, 0.5f, host, &small);
    if (st) return st;
    int64_t n_out = 2 * sTq * job->d;
    float *want = malloc((size_t)n_out * sizeof *want);
    if (!want) {
        st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tune: out of memory");
        goto done_small;
    }
    job->reference(&small.plan.desc, 1, 2, (int)sTq, (int)sTk, job->d, job->d, host[0], host[1], host[2], host[3],
                   host[4], want);
    st = make_problem(ctx, job, job->B, job->H, decode ? 1 : job->T, job->T, 1.0f, NULL, &big);
    if (st) goto done_small;
    res->problem = big.plan.problem;

    tdacl_param_values *cands = NULL;
    int total = enumerate(ks, &cands);
    if (total < 0) {
        st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tune: out of memory");
        goto done;
    }
    /* keep only candidates that pass the constraints; the generic default goes first so
     * the result is never worse than what an unknown device gets */
    char why[256];
    int kept = 0;
    for (int i = 0; i < ks->nladder; i++)
        if (!ks->check(&ctx->info, &big.plan.problem, ks->ladder[i].v, why, sizeof why)) {
            res->generic = ks->ladder[i];
            break;
        }
    cands[kept++] = res->generic;
    for (int i = 0; i < total; i++) {
        if (!memcmp(&cands[i], &res->generic, sizeof res->generic)) continue;
        if (ks->check(&ctx->info, &big.plan.problem, cands[i].v, why, sizeof why)) {
            res->rejected_constraint++;
            tdacl__log(ctx, TDACL_LOG_DEBUG, "tune: candidate rejected by constraints: %s", why);
            continue;
        }
        cands[kept++] = cands[i];
    }
    res->candidates = kept;
    uint64_t rng = job->seed * 31ULL + 5;
    if (job->strategy != TDACL_TUNE_EXHAUSTIVE)
        for (int i = kept - 1; i > 1; i--) { /* shuffle all but the generic default */
            int j = 1 + (int)(mix(&rng) % (uint64_t)i);
            tdacl_param_values tmp = cands[i];
            cands[i] = cands[j];
            cands[j] = tmp;
        }
    res->best_ms = INFINITY;
    double cur_ms = INFINITY, temp = 0.3;
    int cur = 0;
    for (int step = 0; step < kept; step++) {
        if (job->stop && *job->stop) { res->interrupted = 1; break; }
        if (step > 0 && job->budget_s > 0 && tdacl__now() - t_start > job->budget_s) break;
        int idx = step;
        /* compile the next batch in parallel (the budget is checked between batches) */
        const int batch = 4 * job->jobs;
        if (job->jobs > 1 && job->strategy != TDACL_TUNE_ANNEAL && step % batch == 0)
            prebuild(ctx, job, &big.plan, cands + step, step + batch <= kept ? batch : kept - step,
                     job->budget_s > 0 ? t_start + job->budget_s : 1e300);
        if (job->strategy == TDACL_TUNE_ANNEAL && step > 1) {
            /* neighbour of the current point: the candidate differing least in log2 distance */
            int bestj = -1;
            double bestd = 1e30;
            for (int tries = 0; tries < 24; tries++) {
                int j = 1 + (int)(mix(&rng) % (uint64_t)(kept - 1));
                double dist = 0;
                for (int p = 0; p < ks->nparams; p++)
                    dist += fabs(log2((double)cands[j].v[p]) - log2((double)cands[cur].v[p]));
                if (dist > 0 && dist < bestd) bestd = dist, bestj = j;
            }
            idx = bestj < 0 ? step : bestj;
        }
        const tdacl_param_values *v = &cands[idx];
        char text[160];
        tdacl__params_text(ks, v, text, sizeof text);
        res->tried++;
        int bad = check_candidate(ctx, &small, want, n_out, v, why, sizeof why);
        if (bad < 0 && idx != 0) {
            /* a build or launch failure: the context may be broken, so start over */
            res->failed++;
            tdacl__log(ctx, TDACL_LOG_WARN, "tune: %s failed: %s", text, why);
            if (job->verbose) fprintf(stderr, "  %-40s failed: %s\n", text, why);
            free_problem(&big);
            free_problem(&small);
            for (int i = 0; i < 5; i++) free(host[i]), host[i] = NULL;
            st = reopen(ctxp);
            ctx = *ctxp;
            if (!st) st = make_problem(ctx, job, 1, 2, sTq, sTk, 0.5f, host, &small);
            if (!st) st = make_problem(ctx, job, job->B, job->H, decode ? 1 : job->T, job->T, 1.0f, NULL, &big);
            if (st) goto done;
            continue;
        }
        if (bad) {
            if (bad > 0) res->rejected_reference++;
            else res->failed++;
            tdacl__log(ctx, TDACL_LOG_INFO, "tune: %s rejected: %s", text, why);
            if (job->verbose) fprintf(stderr, "  %-40s rejected: %s\n", text, why);
            if (idx == 0) {
                st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: the generic default %s fails its check: %s", text, why);
                goto done;
            }
            continue;
        }
        timing_job tj = {ctx, &big, v};
        tdacl_samples s;
        st = tdacl__measure(time_once, &tj, &job->measure, &s);
        if (st) {
            res->failed++;
            tdacl__log(ctx, TDACL_LOG_WARN, "tune: %s failed at the timing shape: %s", text, tdacl_last_error(ctx));
            if (job->verbose) fprintf(stderr, "  %-40s failed: %s\n", text, tdacl_last_error(ctx));
            /* the failure may have broken the context: start over on a fresh one */
            free_problem(&big);
            free_problem(&small);
            for (int i = 0; i < 5; i++) free(host[i]), host[i] = NULL;
            st = reopen(ctxp);
            ctx = *ctxp;
            if (!st) st = make_problem(ctx, job, 1, 2, sTq, sTk, 0.5f, host, &small);
            if (!st) st = make_problem(ctx, job, job->B, job->H, decode ? 1 : job->T, job->T, 1.0f, NULL, &big);
            if (st) goto done;
            continue;
        }
        if (idx == 0 && step == 0) res->generic_ms = s.median;
        if (job->verbose)
            fprintf(stderr, "  %-40s %10.4f ms%s\n", text, s.median, s.median < res->best_ms ? "  best" : "");
        if (s.median < res->best_ms) res->best_ms = s.median, res->best = *v;
        if (job->strategy == TDACL_TUNE_ANNEAL) {
            double accept = s.median < cur_ms ? 1.0 : exp(-(s.median / cur_ms - 1.0) / temp);
            if ((double)(mix(&rng) >> 11) / 9007199254740992.0 < accept) cur = idx, cur_ms = s.median;
            temp *= 0.97;
        }
    }
    if (!isfinite(res->best_ms))
        st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "tune: no candidate of %s could be timed", job->kernel);
done:
    free(cands);
    free_problem(&big);
done_small:
    free(want);
    for (int i = 0; i < 5; i++) free(host[i]);
    free_problem(&small);
    return st;
}

void tdacl__tune_entry(const tdacl_context *ctx, const tdacl_tune_job *job, const tdacl_tune_result *res,
                       int device_specific, tdacl_tdb_entry *e)
{
    const tdacl_kernel_space *ks = tdacl__kernel_space(job->kernel);
    memset(e, 0, sizeof *e);
    snprintf(e->kernel, sizeof e->kernel, "%s", job->kernel);
    if (device_specific) {
        snprintf(e->device, sizeof e->device, "%s", ctx->info.name);
        snprintf(e->driver, sizeof e->driver, "%s", ctx->info.driver_version);
    }
    snprintf(e->arch, sizeof e->arch, "%s", ctx->info.arch);
    e->kind = job->kind;
    e->dtype = (int)job->dtype;
    e->d = res->problem.d;
    e->dv = res->problem.dv;
    snprintf(e->tbucket, sizeof e->tbucket, "%s", tdacl__t_bucket(job->T));
    e->nparams = ks->nparams;
    for (int i = 0; i < ks->nparams; i++) {
        snprintf(e->pname[i], sizeof e->pname[i], "%s", ks->params[i].name);
        e->pvalue[i] = res->best.v[i];
    }
    snprintf(e->comment, sizeof e->comment, "%.4f ms at B%lld H%lld T%lld (generic %.4f ms, %.2fx)", res->best_ms,
             (long long)job->B, (long long)job->H, (long long)job->T, res->generic_ms,
             res->best_ms > 0 ? res->generic_ms / res->best_ms : 0.0);
}
