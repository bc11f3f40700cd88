/* The benchmark suites: peak (the denominators), attention (every kind x T x dtype x
 * density, prefill and decode) and gemm (CLBlast at the transformer's shapes). */
#include <clblast_c.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/kinds.h"
#include "bench.h"
#include "ops/attention.h"
#include "ops/gemm.h"
#include "tools/tuner.h"

static bench_row *new_row(bench_run *run, int dev, const char *suite, const char *name)
{
    bench_row *r = bench_add_row(run);
    if (!r) return NULL;
    snprintf(r->suite, sizeof r->suite, "%s", suite);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->device, sizeof r->device, "%s", run->devices[dev].info.name);
    r->device_index = dev;
    return r;
}

int bench_suite_peak(bench_run *run, tdacl_context *ctx, int dev)
{
    const bench_device *d = &run->devices[dev];
    if (run->planning) return 0; /* measured before the suites: not counted */
    if (!d->have_peak) return 1;
    static const char *names[7] = {"fp32_fma", "read_bandwidth", "launch_latency", "enqueue", "enqueue_per_pointer_arg",
                                   "mma_bf16", "mma_tf32"};
    static const char *units[7] = {"GFLOP/s", "GB/s", "us", "us", "us", "GFLOP/s", "GFLOP/s"};
    double vals[7] = {d->peak.fp32_gflops, d->peak.bandwidth_gbs, d->peak.launch_us, d->peak.enqueue_us,
                      d->peak.enqueue_arg_us, d->peak.mma_bf16_gflops, d->peak.mma_tf32_gflops};
    for (int i = 0; i < 7; i++) {
        if (i >= 5 && vals[i] <= 0) continue; /* no matrix units the library drives */
        bench_row *r = new_row(run, dev, "peak", names[i]);
        if (!r) return 1;
        r->value = vals[i];
        snprintf(r->unit, sizeof r->unit, "%s", units[i]);
        bench_row_done(run, r);
    }
    (void)ctx;
    return 0;
}

/* ---- attention ---- */

typedef struct attn_job {
    tdacl_context *ctx;
    tdacl_attention_plan plan;
    tdacl_attention_tensors t;
    const tdacl_param_values *force;
} attn_job;

static tdacl_status attn_once(void *user, double *ms)
{
    attn_job *j = user;
    tdacl_attention_stats s;
    tdacl_status st = tdacl__attention_run(j->ctx, &j->plan, &j->t, j->force, NULL, &s);
    *ms = s.kernel_ms;
    return st;
}

typedef struct attn_buffers {
    tdacl_tensor *q, *k, *v, *q2, *k2, *out;
} attn_buffers;

static void free_buffers(attn_buffers *b)
{
    tdacl_tensor_destroy(b->q), tdacl_tensor_destroy(b->k), tdacl_tensor_destroy(b->v);
    tdacl_tensor_destroy(b->q2), tdacl_tensor_destroy(b->k2), tdacl_tensor_destroy(b->out);
    memset(b, 0, sizeof *b);
}

static tdacl_status make_buffers(tdacl_context *ctx, tdacl_dtype dt, int64_t B, int64_t H, int64_t Tq,
                                 int64_t Tk, int d, attn_buffers *b)
{
    memset(b, 0, sizeof *b);
    int64_t qs[4] = {B, H, Tq, d}, ks[4] = {B, H, Tk, d};
    tdacl_tensor **qk[4] = {&b->q, &b->k, &b->q2, &b->k2};
    tdacl_status st = TDACL_SUCCESS;
    for (int i = 0; i < 4 && !st; i++) {
        st = tdacl_tensor_create(ctx, dt, 4, i % 2 ? ks : qs, qk[i]);
        if (!st) st = tdacl__tensor_fill_normal(*qk[i], 1234u + (uint32_t)i, 0.0f, 1.0f);
    }
    if (!st) st = tdacl_tensor_create(ctx, dt, 4, ks, &b->v);
    if (!st) st = tdacl__tensor_fill_normal(b->v, 99u, 0.0f, 1.0f);
    if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 4, qs, &b->out);
    if (!st) st = tdacl_finish(ctx);
    if (st) free_buffers(b);
    return st;
}

static int is_kind_selected(const bench_options *o, const char *kind)
{
    if (o->nkinds == 0) return 1;
    for (int i = 0; i < o->nkinds; i++)
        if (!strcmp(o->kinds[i], kind)) return 1;
    return 0;
}

/* topk_theta's thresholds [H, Tk] for the bench's inputs: q, k ~ N(0, 1) make every score
 * q.k / sqrt(d) ~ N(0, 1), so row id r keeps about k of its r + 1 keys at the upper
 * k / (r + 1) quantile of N(0, 1) (tdacl__topk_normal_threshold); what a calibration would
 * find on such data, without running one.  post: the weight of that score, e^theta over the
 * row's expected denominator (r + 1) e^(1/2) (E e^s for s ~ N(0, 1)). */
static tdacl_status topk_thresholds(tdacl_context *ctx, int64_t H, int64_t Tk, int64_t k, int post, tdacl_tensor **out)
{
    float *th = malloc((size_t)(H * Tk) * sizeof *th);
    if (!th) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl-bench: out of memory");
    tdacl__topk_normal_thresholds(H, Tk, k, th);
    for (int64_t i = 0; post && i < H * Tk; i++) th[i] = (float)(exp(th[i]) / ((double)(i % Tk + 1) * exp(0.5)));
    const int64_t shape[2] = {H, Tk};
    tdacl_status st = tdacl_tensor_create(ctx, TDACL_F32, 2, shape, out);
    if (!st) st = tdacl_tensor_upload(*out, th, TDACL_F32, H * Tk);
    free(th);
    return st;
}

/* Measures one attention configuration; force != NULL pins the parameters. */
/* dt_name: the row's dtype ("tf32": f32 storage at desc.precision tf32); beta: the density knob, tra/tda's beta or
 * entmax's alpha (-1: none) */
static int attn_row(bench_run *run, tdacl_context *ctx, int dev, int kind, const char *dt_name, double beta,
                    int64_t B, int64_t H, int64_t Tq, int64_t Tk, int d, int path, attn_buffers *bufs,
                    int generic)
{
    if (bench_stop_requested() || bench_count_only(run)) return 0;
    attn_job job = {0};
    job.ctx = ctx;
    tdacl_attention_desc desc;
    tdacl_attention_desc_init(&desc);
    desc.kind = (tdacl_attention_kind)kind;
    /* the knob: beta of tra/tda, alpha of entmax */
    const double alpha = kind == TDACL_ATTN_ENTMAX ? beta : -1;
    if (alpha >= 0) desc.alpha = (float)alpha, beta = -1;
    if (beta >= 0) desc.beta = (float)beta;
    desc.path = path;
    if (!strcmp(dt_name, "tf32")) desc.precision = TDACL_PRECISION_TF32;
    int two = tdacl__kind_views(kind) == 2;
    job.t.q = bufs->q, job.t.k = bufs->k, job.t.v = bufs->v, job.t.out = bufs->out;
    if (two) job.t.q2 = bufs->q2, job.t.k2 = bufs->k2;
    bench_row *r = new_row(run, dev, "attention", tdacl_attention_kind_name((tdacl_attention_kind)kind));
    if (!r) return 1;
    tdacl_tensor *thresholds = NULL;
    if (kind == TDACL_ATTN_TOPK_THETA) {
        desc.theta_post = run->opt.topk_post;
        if (topk_thresholds(ctx, H, Tk, run->opt.topk, run->opt.topk_post, &thresholds)) {
            snprintf(r->note, sizeof r->note, "failed: %s", tdacl_last_error(ctx));
            bench_row_done(run, r);
            return 1;
        }
        job.t.thresholds = thresholds;
        snprintf(r->note, sizeof r->note, "%s-softmax thresholds keeping ~%lld keys a row",
                 run->opt.topk_post ? "post" : "pre", (long long)run->opt.topk);
    }
    snprintf(r->dtype, sizeof r->dtype, "%s", dt_name);
    snprintf(r->path, sizeof r->path, "%s", path == TDACL_PATH_DECODE ? "decode" : "prefill");
    r->B = B, r->H = H, r->Tq = Tq, r->Tk = Tk, r->d = d, r->dv = d;
    r->beta = beta, r->alpha = alpha;
    bench_progress(run, "%s attention %s %s %s T=%lld%s", run->devices[dev].info.name, r->name, r->dtype, r->path,
                   (long long)Tk, generic ? " (generic params)" : "");
    tdacl_status st = tdacl__attention_plan(ctx, &desc, &job.t, &job.plan);
    if (!st && !job.plan.row) st = tdacl__fail(ctx, TDACL_ERR_INTERNAL, "the attention plan names no variant");
    tdacl_tuned used;
    tdacl_param_values generic_values;
    const tdacl_kernel_space *ks = st ? NULL : job.plan.row->space;
    if (!st && generic) {
        /* the first ladder entry that fits: what an unknown device gets */
        char why[200];
        int found = 0;
        tdacl_problem prob;
        const tdacl_attention_call call = {&job.plan, &job.t, NULL, NULL};
        job.plan.row->problem(ctx, &call, &prob);
        for (int i = 0; i < ks->nladder && !found; i++)
            found = !tdacl__params_parse(ks, ks->ladder[i], &generic_values, why, sizeof why) &&
                    !tdacl__params_check(ks, &ctx->info, &prob, &generic_values, why, sizeof why);
        job.force = found ? &generic_values : NULL;
    }
    /* one run with statistics: sparsity and the parameters actually used */
    if (!st) {
        job.plan.desc.want_stats = 1;
        tdacl_attention_stats s;
        st = tdacl__attention_run(ctx, &job.plan, &job.t, job.force, &used, &s);
        job.plan.desc.want_stats = 0;
        if (!st) {
            r->sparsity = s.sparsity;
            /* entmax's threshold search: blocks its one pass left to Newton launches */
            if (kind == TDACL_ATTN_ENTMAX && s.variant == TDACL_VARIANT_MMA)
                snprintf(r->note, sizeof r->note, "threshold: %llu row(s) refined by Newton launches",
                         (unsigned long long)s.threshold_rows_refined);
            /* the kernel variant that ran names the implementation */
            if (s.variant == TDACL_VARIANT_MMA) snprintf(r->impl, sizeof r->impl, "tdacl-mma");
            snprintf(r->variant, sizeof r->variant, "%s", job.plan.row->name);
            tdacl__params_text(ks, &used.values, r->params, sizeof r->params);
            if (s.variant == TDACL_VARIANT_MMA && (!job.plan.mma.hardware || job.plan.mma.experimental))
                snprintf(r->params + strlen(r->params), sizeof r->params - strlen(r->params), " %s",
                         job.plan.mma.hardware ? "experimental" : "emulated");
            snprintf(r->params_source, sizeof r->params_source, "%s", generic ? "generic" : tdacl__tuned_source_name(used.source));
            snprintf(r->params_origin, sizeof r->params_origin, "%s", generic ? "generic ladder" : used.origin);
        }
    }
    if (!st) st = tdacl__measure(attn_once, &job, &run->opt.measure, &r->s);
    tdacl_tensor_destroy(thresholds);
    if (st) {
        snprintf(r->note, sizeof r->note, "failed: %s", tdacl_last_error(ctx));
        fprintf(stderr, "\ntdacl-bench: %s %s T=%lld: %s\n", r->name, r->path, (long long)Tk, tdacl_last_error(ctx));
        bench_row_done(run, r);
        return 1;
    }
    r->flops = tdacl_attention_flops((tdacl_attention_kind)kind, B * H, Tq, Tk, Tk - Tq, d, d);
    size_t el = strcmp(dt_name, "tf32") ? tdacl_dtype_size((tdacl_dtype)tdacl__dtype_from_name(dt_name)) : 4;
    r->bytes = (double)(B * H) * (double)el * (double)d * ((two ? 2.0 : 1.0) * (double)(Tq + Tk) + (double)Tk) +
               (double)(B * H * Tq * d) * 4.0;
    bench_finish_row(run, r);
    const bench_device *bd = &run->devices[dev];
    if (path == TDACL_PATH_DECODE && bd->have_peak && bd->peak.bandwidth_gbs > 0)
        r->bound_ms = (double)(B * H * Tk * d) * (double)el * (two ? 2.0 : 1.0) / (bd->peak.bandwidth_gbs * 1e9) * 1e3;
    if (bd->have_peak && r->tflops * 1e3 > bd->peak.fp32_gflops && strcmp(r->impl, "tdacl-mma"))
        snprintf(r->note, sizeof r->note, "effective rate above the FP32 peak: zero tiles skipped");
    bench_row_done(run, r);
    return 0;
}

int bench_suite_attention(bench_run *run, tdacl_context *ctx, int dev)
{
    const bench_options *o = &run->opt;
    const tdacl_device_info *info = &run->devices[dev].info;
    int gpu = info->type == TDACL_DEVICE_GPU;
    int64_t Ts[BENCH_MAX_LIST];
    int nT = o->nT;
    memcpy(Ts, o->T, sizeof Ts);
    if (!nT) {
        static const int64_t gpuT[] = {512, 1024, 2048, 4096, 8192, 16384, 32768};
        static const int64_t cpuT[] = {128, 256, 512, 1024, 2048, 4096};
        static const int64_t quickT[] = {256, 1024};
        const int64_t *src = o->quick ? quickT : gpu ? gpuT : cpuT;
        nT = o->quick ? 2 : gpu ? 7 : 6;
        memcpy(Ts, src, (size_t)nT * sizeof *Ts);
    }
    char dtypes[BENCH_MAX_LIST][8];
    int ndt = o->ndtypes;
    memcpy(dtypes, o->dtypes, sizeof dtypes);
    if (!ndt) {
        snprintf(dtypes[0], 8, "f32");
        snprintf(dtypes[1], 8, "bf16");
        ndt = o->quick ? 1 : 2;
    }
    double betas[BENCH_MAX_LIST] = {1, 0.5, 0.25, 0};
    int nb = 4;
    if (o->nbetas) memcpy(betas, o->betas, sizeof betas), nb = o->nbetas;
    else if (o->quick) nb = 2, betas[1] = 0;
    double alphas[BENCH_MAX_LIST] = {1.5};
    int na = 1;
    if (o->nalphas) memcpy(alphas, o->alphas, sizeof alphas), na = o->nalphas;
    static const char *quick_kinds[] = {"tra", "tda", "softmax"};
    int failures = 0;
    for (int di = 0; di < ndt; di++) {
        const char *dtn = dtypes[di];
        if (!strcmp(dtn, "bf16act")) continue; /* a forward mode: the attention rows of bf16 are "bf16" */
        const tdacl_dtype dt = !strcmp(dtn, "tf32") ? TDACL_F32 : (tdacl_dtype)tdacl__dtype_from_name(dtn);
        for (int ti = 0; ti < (o->no_prefill ? 0 : nT) && !bench_stop_requested(); ti++) {
            int64_t T = Ts[ti];
            attn_buffers bufs = {0};
            if (!run->planning && make_buffers(ctx, dt, o->B, o->H, T, T, o->d, &bufs)) {
                fprintf(stderr, "\ntdacl-bench: cannot allocate attention inputs at T=%lld: %s\n", (long long)T,
                        tdacl_last_error(ctx));
                failures++;
                continue;
            }
            for (int kind = 0; tdacl_attention_kind_name((tdacl_attention_kind)kind); kind++) {
                const char *kn = tdacl_attention_kind_name((tdacl_attention_kind)kind);
                if (!is_kind_selected(o, kn)) continue;
                if (o->quick && !o->nkinds) {
                    int keep = 0;
                    for (int q = 0; q < 3; q++) keep |= !strcmp(kn, quick_kinds[q]);
                    if (!keep) continue;
                }
                int thresholded = tdacl__kind_threshold(kind), entmax = kind == TDACL_ATTN_ENTMAX;
                for (int bi = 0; bi < (thresholded ? nb : entmax ? na : 1); bi++) {
                    double beta = thresholded ? betas[bi] : entmax ? alphas[bi] : -1; /* attn_row's knob */
                    failures += attn_row(run, ctx, dev, kind, dtn, beta, o->B, o->H, T, T, o->d,
                                         TDACL_PATH_PREFILL, &bufs, 0);
                    if (o->vs_generic)
                        failures += attn_row(run, ctx, dev, kind, dtn, beta, o->B, o->H, T, T, o->d,
                                             TDACL_PATH_PREFILL, &bufs, 1);
                }
            }
            free_buffers(&bufs);
        }
        if (!o->decode || (o->quick && di > 0) || bench_stop_requested()) continue;
        int64_t Tk = o->decode_Tk ? o->decode_Tk : o->quick ? 2048 : gpu ? 32768 : 4096;
        attn_buffers bufs = {0};
        if (!run->planning && make_buffers(ctx, dt, o->decode_B, o->decode_H, o->decode_Tq, Tk, o->d, &bufs)) {
            fprintf(stderr, "\ntdacl-bench: cannot allocate decode inputs: %s\n", tdacl_last_error(ctx));
            failures++;
            continue;
        }
        for (int kind = 0; tdacl_attention_kind_name((tdacl_attention_kind)kind); kind++) {
            const char *kn = tdacl_attention_kind_name((tdacl_attention_kind)kind);
            if (!is_kind_selected(o, kn)) continue;
            if (o->quick && !o->nkinds && kind != TDACL_ATTN_TRA && kind != TDACL_ATTN_SOFTMAX) continue;
            int thresholded = tdacl__kind_threshold(kind);
            const double knob = thresholded ? 1.0 : kind == TDACL_ATTN_ENTMAX ? alphas[0] : -1;
            failures += attn_row(run, ctx, dev, kind, dtn, knob, o->decode_B, o->decode_H, o->decode_Tq, Tk,
                                 o->d, TDACL_PATH_DECODE, &bufs, 0);
            if (o->vs_generic)
                failures += attn_row(run, ctx, dev, kind, dtn, knob, o->decode_B, o->decode_H,
                                     o->decode_Tq, Tk, o->d, TDACL_PATH_DECODE, &bufs, 1);
        }
        free_buffers(&bufs);
    }
    return failures;
}

/* ---- gemm ---- */

typedef struct gemm_job {
    tdacl_context *ctx;
    cl_mem a, b, c;
    size_t m, n, k;
} gemm_job;

/* Wall clock around a drained queue: CLBlast may run several kernels per call and its
 * returned event covers only the last one. */
static tdacl_status gemm_once(void *user, double *ms)
{
    gemm_job *j = user;
    cl_int err = clFinish(j->ctx->queue);
    double t0 = tdacl__now();
    CLBlastStatusCode s = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, j->m, j->n,
                                       j->k, 1.0f, j->a, 0, j->k, j->b, 0, j->n, 0.0f, j->c, 0, j->n,
                                       &j->ctx->queue, NULL);
    if (s != CLBlastSuccess)
        return tdacl__fail(j->ctx, TDACL_ERR_OPENCL, "CLBlastSgemm(%zu x %zu x %zu) failed with status %d", j->m,
                           j->n, j->k, (int)s);
    if (!err) err = clFinish(j->ctx->queue);
    if (err) return tdacl__fail_cl(j->ctx, err, "clFinish after CLBlastSgemm");
    *ms = (tdacl__now() - t0) * 1e3;
    return TDACL_SUCCESS;
}

typedef struct own_gemm_job {
    tdacl_context *ctx;
    tdacl_tensor *a, *w, *bias, *c;
    int m, n, k, trans;
    tdacl_precision precision; /* $TDACL_PRECISION=bf16: bf16 weights take the tensor-core GEMM */
} own_gemm_job;

/* GEMV launches timed together: a decode step issues them back to back, so their cost is the
 * steady-state time a launch, not one launch's round trip from the host (about 11 us on
 * NVIDIA's OpenCL, more than reading a 3 MB matrix) */
#define GEMV_BACK_TO_BACK 20

static tdacl_status own_gemm_once(void *user, double *ms)
{
    own_gemm_job *j = user;
    if (j->m <= TDACL_GEMV_MAX_ROWS) {
        /* the GEMV: the wall clock around GEMV_BACK_TO_BACK launches from a drained queue, per launch */
        cl_int err = clFinish(j->ctx->queue);
        double t0 = tdacl__now();
        tdacl_status st = TDACL_SUCCESS;
        for (int i = 0; !st && i < GEMV_BACK_TO_BACK; i++)
            st = tdacl__gemm(j->ctx, j->c, j->a, j->w, j->bias, NULL, TDACL_EPI_BIAS, j->m, j->n, j->k, j->trans,
                             j->precision, NULL, NULL, NULL);
        if (!st && !err) err = clFinish(j->ctx->queue);
        if (!st && err) st = tdacl__fail_cl(j->ctx, err, "clFinish after the GEMV");
        *ms = (tdacl__now() - t0) * 1e3 / GEMV_BACK_TO_BACK;
        return st;
    }
    cl_event ev[2] = {NULL, NULL};
    tdacl_status st = tdacl__gemm(j->ctx, j->c, j->a, j->w, j->bias, NULL, TDACL_EPI_BIAS, j->m, j->n, j->k, j->trans,
                                  j->precision, NULL, NULL, ev);
    if (!st) st = tdacl__span_ms(j->ctx, ev, ms);
    for (int i = 0; i < 2; i++)
        if (ev[i]) clReleaseEvent(ev[i]);
    return st;
}

int bench_suite_gemm(bench_run *run, tdacl_context *ctx, int dev)
{
    const bench_options *o = &run->opt;
    int gpu = run->devices[dev].info.type == TDACL_DEVICE_GPU;
    /* GPT-2 small projections: qkv (C -> 3C), attention out (C -> C), MLP up (C -> 4C), down;
     * on GPUs also one row (a decode step: the GEMV, read against the bandwidth), with the LM
     * head's 50257 columns as [K, N] and as the tied head stores them, [N, K] (trans) */
    static const size_t nk[6][3] = {{2304, 768, 0}, {768, 768, 0}, {3072, 768, 0}, {768, 3072, 0}, {50257, 768, 0},
                                    {50257, 768, 1}};
    size_t ms_gpu[3] = {1024, 8192, 1}, ms_cpu[2] = {256, 1024};
    int nm = o->quick ? 1 : gpu ? 3 : 2;
    int failures = 0;
    for (int mi = 0; mi < nm; mi++) {
        size_t m = gpu ? ms_gpu[mi] : ms_cpu[mi];
        const int nshapes = o->quick ? 1 : m == 1 ? 6 : 4;
        for (int si = 0; si < nshapes; si++) {
            const size_t n = nk[si][0], k = nk[si][1];
            const int trans = (int)nk[si][2];
            /* CLBlast SGEMM, then our own GEMM (+bias epilogue) with f32 and bf16 weights (f32 a
             * and c), and all bf16 (a, w and c: "bf16act", the model's bf16 activations; not in
             * --quick: one more program to build on a CPU) */
            for (int impl = trans ? 1 : 0; impl < (o->quick ? 3 : 4); impl++) {
                if (bench_stop_requested() || bench_count_only(run)) continue;
                bench_row *r = bench_add_row(run);
                if (!r) return failures + 1;
                snprintf(r->suite, sizeof r->suite, "gemm");
                snprintf(r->name, sizeof r->name, "%s", !impl ? "sgemm" : trans ? "gemm_bias_bt" : "gemm_bias");
                snprintf(r->impl, sizeof r->impl, "%s", impl ? "tdacl" : "clblast");
                snprintf(r->device, sizeof r->device, "%s", run->devices[dev].info.name);
                r->device_index = dev;
                const tdacl_dtype wdt = impl >= 2 ? TDACL_BF16 : TDACL_F32, adt = impl == 3 ? TDACL_BF16 : TDACL_F32;
                snprintf(r->dtype, sizeof r->dtype, "%s", impl == 3 ? "bf16act" : tdacl_dtype_name(wdt));
                r->M = (int64_t)m, r->N = (int64_t)n, r->K = (int64_t)k;
                bench_progress(run, "%s gemm %s %s %zux%zux%zu", run->devices[dev].info.name, r->impl, r->dtype, m, n, k);
                int64_t sa[2] = {(int64_t)m, (int64_t)k}, sb[2] = {trans ? (int64_t)n : (int64_t)k, trans ? (int64_t)k : (int64_t)n}, sc[2] = {(int64_t)m, (int64_t)n},
                        sbias[2] = {1, (int64_t)n};
                tdacl_tensor *ta = NULL, *tb = NULL, *tc = NULL, *tbias = NULL;
                tdacl_status st = tdacl_tensor_create(ctx, adt, 2, sa, &ta);
                if (!st) st = tdacl_tensor_create(ctx, wdt, 2, sb, &tb);
                if (!st) st = tdacl_tensor_create(ctx, adt, 2, sc, &tc);
                if (!st) st = tdacl_tensor_create(ctx, TDACL_F32, 2, sbias, &tbias);
                if (!st) st = tdacl__tensor_fill_normal(ta, 7, 0, 1);
                if (!st) st = tdacl__tensor_fill_normal(tb, 8, 0, 1);
                if (!st) st = tdacl__tensor_fill_normal(tbias, 9, 0, 1);
                if (!st && impl == 0) {
                    gemm_job j = {ctx, ta->storage->mem, tb->storage->mem, tc->storage->mem, m, n, k};
                    st = tdacl__measure(gemm_once, &j, &o->measure, &r->s);
                } else if (!st) {
                    own_gemm_job j = {ctx, ta, tb, tbias, tc, (int)m, (int)n, (int)k, trans, TDACL_PRECISION_EXACT};
                    st = tdacl__precision_env(ctx, "tdacl-bench gemm", &j.precision);
                    const tdacl_matmul_call call = {tc, ta, tb, tbias, NULL, TDACL_EPI_BIAS, (int)m, (int)n, (int)k, trans, NULL,
                                                    j.precision, NULL};
                    const tdacl_variant_def *row;
                    tdacl_tuned used;
                    char why[256];
                    if (!tdacl__variant_choose(ctx, TDACL_OP_MATMUL, &call, &row, why, sizeof why) &&
                        !tdacl__variant_params(ctx, row, &call, NULL, &used)) {
                        snprintf(r->variant, sizeof r->variant, "%s", row->name);
                        /* matrix-unit rows are measured against the mma.sync peak (f32 weights: tf32) */
                        if (row->matrix_units) snprintf(r->impl, sizeof r->impl, "tdacl-mma");
                        if (row->matrix_units && wdt == TDACL_F32) snprintf(r->dtype, sizeof r->dtype, "tf32");
                        if (row->space) tdacl__params_text(row->space, &used.values, r->params, sizeof r->params);
                        snprintf(r->params_source, sizeof r->params_source, "%s", tdacl__tuned_source_name(used.source));
                        snprintf(r->params_origin, sizeof r->params_origin, "%s", used.origin);
                    }
                    if (!st) st = tdacl__measure(own_gemm_once, &j, &o->measure, &r->s);
                }
                if (st) {
                    snprintf(r->note, sizeof r->note, "failed: %s", tdacl_last_error(ctx));
                    fprintf(stderr, "\ntdacl-bench: gemm: %s\n", tdacl_last_error(ctx));
                    failures++;
                } else {
                    r->flops = 2.0 * (double)m * (double)n * (double)k;
                    r->bytes = (double)tdacl_dtype_size(adt) * ((double)m * k + (double)m * n) +
                               (double)tdacl_dtype_size(wdt) * k * n;
                    bench_finish_row(run, r);
                }
                bench_row_done(run, r);
                tdacl_tensor_destroy(ta), tdacl_tensor_destroy(tb), tdacl_tensor_destroy(tc), tdacl_tensor_destroy(tbias);
            }
        }
    }
    return failures;
}
