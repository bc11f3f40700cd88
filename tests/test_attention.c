/* tdacl_attention against the double-precision reference (tests/ref/attention_ref.c).
 *
 * Coverage is a designed covering set, not a cartesian product.  PoCL spends seconds to
 * tens of seconds compiling each kernel variant (kind, storage dtype, output dtype, padded
 * d and dv, aligned loads, tile or decode row count), while the runtime parameters (T,
 * offsets, beta, kappa, p, lambda, Norm, out_scale, scale, normalize) cost nothing to
 * change.  So a few variants per kind are compiled and the runtime parameters are swept
 * across them:
 *
 *   variant  storage in/out  d    dv   layout of q, k, v (and out)          prefill Tq/Tk
 *   A        f32 / f32       32   32   [B,H,T,D] contiguous (aligned loads)  T in {1,2,17,64,65,300}
 *   B        f32 / f32       64   22   token-major views, padded out rows;   17/65 (offset Tk-Tq), 64/64
 *                                      dv % 4 != 0: the unaligned f32 loads
 *   C        bf16 / bf16     80   50   views into one fused QKV buffer      65/65, 20/300 offset 100
 *   D        f16 / f16       128  96   token-major views, padded out rows   300/300, 5/17 offset 40
 *
 * Every kind runs every variant, so every kind meets every d {32, 64, 80, 128}, dv != d,
 * every storage dtype and every layout.  In A every kind meets each of the six parameter
 * sets below, which between them hold every value of beta {0, .5, 1, 2}, kappa {.5, 1, 4},
 * p {1, 2, 3, 1.5}, lambda {0, .3, 1, 1.7}, Norm {none, rms, rms + gain}, out_scale, an
 * explicit scale and normalize = 0 (the authors' Triton TRA).  Decode (Tq 1..16, so every
 * padded row count 1, 2, 4, 8, 16 occurs) is checked against the prefill rows and the
 * reference on A (all kinds), C (all kinds) and D.  B*H > 1 everywhere.  entmax, whose
 * kernel differs (cl/attention_entmax.cl), has its own tests over A-D (test_entmax_*): every
 * alpha of {1.25, 1.5, 2, 3} at every T of {1, 2, 17, 300}, its temperatures, ties and
 * one-survivor rows, decode rows, and the tiny subset under Oclgrind.
 *
 * TDACL_TEST_TINY=1 (or the argument --tiny) runs only a small subset (T <= 17, d = 32,
 * each kind, prefill and decode, f32 and bf16) for the Oclgrind run of tests/CMakeLists.txt;
 * --filter PATTERN runs the tests whose names match (cmocka wildcards).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ops/attention.h" /* tdacl__attention_plan/run: forced tile parameters */
#include "ref/attention_ref.h"
#include "tdacl.h"

/* ---- deterministic inputs: splitmix64 + Box-Muller ------------------------------------ */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double rng_uniform(rng *r) { return ((double)(rng_next(r) >> 11) + 0.5) * 0x1p-53; } /* (0, 1) */

static double rng_normal(rng *r)
{
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* The value grid of f32 inputs computed in tf32 (test-only; not a tdacl_dtype). */
#define GRID_TF32 ((tdacl_dtype)100)

/* x rounded to a storage dtype, so the reference sees exactly what the device stores; or to
 * tf32 (10 mantissa bits), the grid the matrix units take at precision tf32. */
static double to_storage(tdacl_dtype dt, double x)
{
    float f = (float)x;
    if (dt == GRID_TF32) {
        uint32_t u;
        memcpy(&u, &f, 4);
        u = (u + 0x1000u) & 0xffffe000u; /* nearest, ties away (finite normal values here) */
        memcpy(&f, &u, 4);
        return f;
    }
    if (dt == TDACL_BF16) return tdacl_bf16_to_f32(tdacl_f32_to_bf16(f));
    if (dt == TDACL_F16) return tdacl_f16_to_f32(tdacl_f32_to_f16(f));
    return f;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    assert_non_null(p);
    return p;
}

/* ---- error model ------------------------------------------------------------------------
 * The kernels accumulate in fp32 (unit roundoff u = 2^-24).  For one output element
 * o_ic = sum_j a_ij v_jc the worst-case first-order error is
 *
 *   |o - o_ref| <= eps_acc * sum_j |a_ij| |v_jc|                  (weight x V sum, n <= Tk terms)
 *                + (eps_s * S_i + 16u) * sum_j D_ij |v_jc|         (score errors through the weights)
 *
 * eps_acc = (Tk + 32) u: gamma_n for the chain of n fma's, plus slack for the per-weight
 *   error (OpenCL allows pow up to 16 ulp, exp2 a few) and the few rescales/divisions of
 *   online softmax and of the decode split reduction.
 * eps_s = (2d + 16) u per unit of S_i: the d-term dot product (gamma_d), the two inverse
 *   norms of tra/tda ((d/2 + 3) u each), the scale, and tau (log, sqrt, divide); S_i is
 *   the row's largest |scale| sum|q~||k~| + |tau| (attention_ref.h: row_smag).
 * 16u: native_exp2 of the softmax kinds (implementation-defined; a few ulp on PoCL and
 *   about 2^-21 relative on GPUs).
 * D_ij bounds |d a_ij| per unit score change (softmax: 2a; rela: 1; tra: p x^(p-1)).
 * Norm rms: y = x/r * g with r = sqrt(mean(x^2) + eps) moves by at most
 *   |g|/r (tol_x + |x| rms(tol_x)/r), plus (dv + 8) u |y| for the sum of squares.
 * The sum is doubled to absorb second-order terms and unitemised few-ulp function errors,
 * and storing into bf16 / f16 adds their half-ulp relative rounding (2^-8 / 2^-11).
 * Measured on PoCL the f32 outputs use under 2% of this budget (TDACL_TEST_VERBOSE=1
 * prints the largest error/tolerance), yet a wrong, missing or extra key still shows: it
 * moves an output by about |a_ij v_j|, ~1/n of the magnitude term, while eps_acc is
 * (n + 32) 2^-24 of it, so for the n <= 300 keys of the prefill and decode-vs-prefill cases
 * a single average key is >100x the tolerance.  (The 4096-key decode case is there for
 * the split/round bookkeeping and its exact counters; a defect there drops or repeats
 * whole chunks of keys.) */
#define U32 (1.0 / 16777216.0)

static double eps_score(int d) { return (2.0 * d + 16.0) * U32; }


/* Inputs are re-drawn until every score is at least this far from the threshold: 4x the
 * worst-case score error, so a kernel can never decide s > tau differently from the
 * reference and the sparsity counters can be compared exactly. */
static double margin_needed(int d, double max_smag) { return 4.0 * eps_score(d) * max_smag; }

/* ---- test cases ------------------------------------------------------------------------ */

/* [B,H,T,D] contiguous; token-major [B,T,H,D]; one fused [B,T,(q|k|..|v)] buffer; and
 * [B,H,D,T] ("d-major": the head dim is the strided one, innermost stride T). */
typedef enum layout { LAYOUT_BHTD, LAYOUT_BTHD, LAYOUT_FUSED, LAYOUT_DMAJOR } layout;

typedef struct attn_case {
    tdacl_attention_kind kind;
    int B, H, Tq, Tk, d, dv;
    int64_t offset; /* -1 = Tk - Tq */
    layout lay;
    tdacl_dtype dtype, odtype, gdtype;
    float beta, kappa, power, lambda, scale, out_scale, norm_eps;
    double ref_scale; /* scale given to the reference; NAN: the same as `scale` */
    int normalize;
    tdacl_head_norm norm;
    int gain;
    tdacl_attention_path path;
    uint64_t seed;
    const char *force; /* "NAME=value ..." over the tuned parameters; NULL = the tuned ones */
    tdacl_precision precision; /* desc.precision; bf16 with f32 storage draws bf16-exact inputs */
    float alpha, temp_delta, temp_beta, temp_gamma; /* entmax */
    int head_temps; /* entmax: per-head (delta, beta, gamma) through tensors.temps */
    /* topk_theta: desc.theta_post, sdc, sdc_gamma, vmc; the mean V row from tensors.v_sum;
     * calibrated row ids (thresholds' columns); the fraction of keys a threshold keeps */
    int theta_post, vmc, vsum, nthr;
    tdacl_sdc sdc;
    float sdc_gamma;
    double keep;
} attn_case;

/* entmax: the kernel stops its threshold solve at |f(tau) - 1| <= 1e-6 (cl/attention_entmax.cl)
 * as computed in fp32, a sum of at most Tk terms (gamma_Tk), so the true |f - 1| is below
 * entmax_df.  That moves tau (in units of u = (alpha-1) temp s) by at most df / |f'(tau)|,
 * and |f'| = e sum (u - tau)^(e-1) >= min(e, 1) because every (u - tau)^e <= 1; dividing by
 * (alpha-1) temp gives score units.  temp >= the case's smallest inverse temperature. */
static double entmax_df(const attn_case *c) { return 1e-6 + (c->Tk + 16.0) * U32; }

static double entmax_dtau(const attn_case *c)
{
    const double am1 = c->alpha - 1.0, e = 1.0 / am1;
    const double tmin = c->head_temps ? 0.6 : c->temp_delta; /* temp_beta >= 0 in the suite's scalar cases */
    return entmax_df(c) / ((e < 1.0 ? e : 1.0) * am1 * tmin);
}

/* The dtype the inputs q, k, v are drawn in: the storage dtype, or bf16 / tf32 for f32
 * storage computed in bf16 / tf32 (so the kernel's rounding of them is exact and the
 * reference sees what the matrix units take). */
static tdacl_dtype input_values(const attn_case *c)
{
    if (c->dtype == TDACL_F32 && c->precision == TDACL_PRECISION_BF16) return TDACL_BF16;
    if (c->dtype == TDACL_F32 && c->precision == TDACL_PRECISION_TF32) return GRID_TF32;
    return c->dtype;
}

static const char *kind_name(tdacl_attention_kind k)
{
    static const char *n[] = {"softmax", "rela", "tra", "tda", "diff_softmax", "entmax", "topk_theta"};
    return (int)k >= 0 && (int)k < 7 ? n[k] : "?";
}

static int two_views(tdacl_attention_kind k) { return k == TDACL_ATTN_TDA || k == TDACL_ATTN_DIFF_SOFTMAX; }
static int softmax_kind(tdacl_attention_kind k) { return k == TDACL_ATTN_SOFTMAX || k == TDACL_ATTN_DIFF_SOFTMAX; }

static void case_str(const attn_case *c, char *buf, size_t n)
{
    static const char *lay[] = {"BHTD", "BTHD", "fused", "BHDT"};
    snprintf(buf, n,
             "%s B%d H%d Tq%d Tk%d d%d dv%d off%lld %s %s->%s beta%g kappa%g p%g lambda%g scale%g "
             "normalize%d norm%d gain%d out_scale%g path%d seed%llu%s alpha%g temp%g,%g,%g%s post%d sdc%d/%g vmc%d%s R%d",
             kind_name(c->kind), c->B, c->H, c->Tq, c->Tk, c->d, c->dv, (long long)c->offset, lay[c->lay],
             tdacl_dtype_name(c->dtype), tdacl_dtype_name(c->odtype), c->beta, c->kappa, c->power, c->lambda,
             c->scale, c->normalize, (int)c->norm, c->gain, c->out_scale, (int)c->path,
             (unsigned long long)c->seed, c->force ? " forced-tiles" : "", c->alpha, c->temp_delta, c->temp_beta,
             c->temp_gamma, c->head_temps ? " per-head" : "", c->theta_post, (int)c->sdc, c->sdc_gamma, c->vmc,
             c->vsum ? " v_sum" : "", c->nthr);
}

/* The compiled variants of the table at the top, and the bf16 one of the tiny subset. */
typedef enum variant { VAR_A, VAR_B, VAR_C, VAR_D, VAR_TINY_BF16 } variant;

static attn_case make_case(tdacl_attention_kind kind, variant var, int Tq, int Tk, int64_t offset)
{
    attn_case c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.B = 2, c.H = 2;
    c.Tq = Tq, c.Tk = Tk, c.offset = offset;
    c.dtype = c.odtype = c.gdtype = TDACL_F32;
    c.beta = 1.0f, c.kappa = 1.0f, c.power = 2.0f, c.lambda = 0.5f, c.scale = NAN, c.ref_scale = NAN;
    c.out_scale = 1.0f, c.norm_eps = 1e-5f, c.normalize = 1, c.norm = TDACL_NORM_NONE;
    c.path = TDACL_PATH_PREFILL;
    c.alpha = 1.5f, c.temp_delta = 1.0f, c.temp_beta = 0.0f, c.temp_gamma = 1.0f;
    c.sdc_gamma = 0.05f, c.nthr = Tk > 0 ? Tk : 1, c.keep = 0.3;
    switch (var) {
    case VAR_A: c.d = 32, c.dv = 32, c.lay = LAYOUT_BHTD; break;
    case VAR_B: c.d = 64, c.dv = 22, c.lay = LAYOUT_BTHD, c.H = 3; break;
    case VAR_C:
        c.d = 80, c.dv = 50, c.lay = LAYOUT_FUSED, c.B = 1;
        c.dtype = c.odtype = TDACL_BF16;
        break;
    case VAR_D:
        c.d = 128, c.dv = 96, c.lay = LAYOUT_BTHD;
        c.dtype = c.odtype = TDACL_F16;
        break;
    case VAR_TINY_BF16:
        c.d = 32, c.dv = 40, c.lay = LAYOUT_BTHD, c.B = 1;
        c.dtype = c.odtype = TDACL_BF16;
        break;
    }
    if (Tk >= 300) c.B = 1; /* keep the long cases quick */
    c.seed = 0x5eed0000ULL + (uint64_t)kind * 1000003ULL + (uint64_t)var * 10007ULL + (uint64_t)Tq * 101ULL +
             (uint64_t)Tk;
    return c;
}

/* Runtime parameter sets; rows of this table are rotated over the cases so every value
 * meets every kind.  softmax/rela/diff_softmax get beta/kappa/p too, which they must ignore. */
typedef struct pset {
    float beta, kappa, power, lambda, scale, out_scale;
    int normalize;
    tdacl_head_norm norm;
    int gain;
} pset;

static const pset PSETS[6] = {
    /* beta kappa  p     lambda scale out_scale normalize norm           gain */
    {0.0f, 1.0f, 2.0f, 0.0f, NAN, 1.0f, 1, TDACL_NORM_NONE, 0},
    {0.5f, 0.5f, 1.0f, 0.3f, NAN, 1.0f, 1, TDACL_NORM_RMS, 0},
    {1.0f, 4.0f, 3.0f, 1.0f, NAN, 0.75f, 1, TDACL_NORM_RMS, 1},
    {2.0f, 1.0f, 1.5f, 1.7f, NAN, 1.0f, 1, TDACL_NORM_NONE, 0}, /* beta 2: late rows lose every key */
    /* the authors' Triton semantics: kappa 1, no scale, raw dot products (their TRA does not
     * normalise), no Norm */
    {1.0f, 1.0f, 2.0f, 0.5f, NAN, 1.0f, 0, TDACL_NORM_NONE, 0},
    {0.5f, 0.5f, 2.0f, 0.3f, -2.0f, -1.5f, 1, TDACL_NORM_RMS, 1}, /* a negative scale: the kernels that fold the scale into the exponent negate Q */
};

static void apply_pset(attn_case *c, const pset *p)
{
    c->beta = p->beta, c->kappa = p->kappa, c->power = p->power, c->lambda = p->lambda;
    c->scale = p->scale, c->out_scale = p->out_scale, c->normalize = p->normalize;
    c->norm = p->norm, c->gain = p->gain;
}

/* ---- host problem: inputs, reference ------------------------------------------------------ */

typedef struct problem {
    attn_case c;
    double *q, *k, *v, *q2, *k2; /* [B,H,Tq|Tk,D], exactly representable in c.dtype */
    double *gain;                /* [dv] or NULL */
    double *temps;               /* entmax per-head temperatures [H][3], or NULL */
    double *thresholds, *log_mass; /* topk_theta [H][nthr]; log_mass for sdc offline */
    double *v_sum;               /* topk_theta with vsum: [B][H][dv] sums of all Tk V rows */
} problem;

typedef struct ref_out {
    double *out, *pre, *mag, *dmag, *smag;
    attn_ref_counts counts;
} ref_out;

static attn_ref_params ref_params(const attn_case *c, const double *gain, int64_t offset)
{
    /* the float values the library receives, so the reference computes the same problem */
    attn_ref_params p = attn_ref_params_default(c->kind);
    p.beta = c->beta, p.kappa = c->kappa, p.power = c->power, p.lambda = c->lambda;
    p.scale = isnan(c->ref_scale) ? c->scale : c->ref_scale; /* NAN: the reference's own default */
    p.normalize = c->normalize, p.norm = c->norm, p.norm_eps = c->norm_eps;
    p.gain = c->gain ? gain : NULL;
    p.out_scale = c->out_scale;
    p.offset = offset;
    p.alpha = c->alpha, p.temp_delta = c->temp_delta, p.temp_beta = c->temp_beta, p.temp_gamma = c->temp_gamma;
    p.nthr = c->nthr, p.theta_post = c->theta_post, p.vmc = c->vmc, p.sdc = c->sdc, p.sdc_gamma = c->sdc_gamma;
    return p;
}

static void ref_free(ref_out *r)
{
    free(r->out), free(r->pre), free(r->mag), free(r->dmag), free(r->smag);
    memset(r, 0, sizeof *r);
}

/* Reference over Tq query rows q (and q2) against the problem's keys. */
static void ref_compute(const problem *pb, int Tq, int64_t offset, const double *q, const double *q2,
                        ref_out *r, double *key_margin)
{
    const attn_case *c = &pb->c;
    size_t no = (size_t)c->B * c->H * Tq * c->dv;
    r->out = xcalloc(no, sizeof(double));
    r->pre = xcalloc(no, sizeof(double));
    r->mag = xcalloc(no, sizeof(double));
    r->dmag = xcalloc(no, sizeof(double));
    r->smag = xcalloc((size_t)c->B * c->H * Tq, sizeof(double));
    attn_ref_params p = ref_params(c, pb->gain, offset);
    p.temps = pb->temps;
    p.thresholds = pb->thresholds, p.log_mass = pb->log_mass;
    attn_ref_shape sh = {c->B, c->H, Tq, c->Tk, c->d, c->dv};
    attn_ref_inputs in = {q, pb->k, pb->v, q2, pb->k2};
    attn_ref_outputs out = {r->out, r->pre, r->mag, r->dmag, r->smag, key_margin, NULL};
    assert_int_equal(attn_ref_attention(&p, sh, in, out, &r->counts), 0);
}

static double *normal_array(rng *r, size_t n, tdacl_dtype dt)
{
    double *x = xcalloc(n, sizeof(double));
    for (size_t i = 0; i < n; i++) x[i] = to_storage(dt, rng_normal(r));
    return x;
}

/* entmax: each row's threshold depends on all its keys, so re-drawing a key would move the
 * thresholds of every row that sees it; a query row is re-drawn instead, which moves only
 * its own (until no visible score of any row is closer than the margin to its row's). */
static void keep_rows_off_threshold(problem *pb, rng *r)
{
    const attn_case *c = &pb->c;
    const int64_t offset = c->offset < 0 ? (int64_t)c->Tk - c->Tq : c->offset;
    size_t nq = (size_t)c->B * c->H * c->Tq;
    double *rm = xcalloc(nq, sizeof(double));
    for (int iter = 0;; iter++) {
        ref_out ro;
        size_t no = nq * (size_t)c->dv;
        ro.out = xcalloc(no, sizeof(double)), ro.pre = xcalloc(no, sizeof(double));
        ro.mag = xcalloc(no, sizeof(double)), ro.dmag = xcalloc(no, sizeof(double)), ro.smag = xcalloc(nq, sizeof(double));
        attn_ref_params p = ref_params(c, pb->gain, offset);
        p.temps = pb->temps;
        attn_ref_shape sh = {c->B, c->H, c->Tq, c->Tk, c->d, c->dv};
        attn_ref_inputs in = {pb->q, pb->k, pb->v, pb->q2, pb->k2};
        attn_ref_outputs out = {ro.out, ro.pre, ro.mag, ro.dmag, ro.smag, NULL, rm};
        assert_int_equal(attn_ref_attention(&p, sh, in, out, &ro.counts), 0);
        double need = margin_needed(c->d, ro.counts.max_smag) + 2.0 * entmax_dtau(c);
        int done = ro.counts.min_margin >= need;
        ref_free(&ro);
        if (done) break;
        if (iter >= 100) fail_msg("entmax inputs could not be kept off the thresholds after %d re-draws", iter);
        for (size_t row = 0; row < nq; row++)
            if (rm[row] < need)
                for (int e = 0; e < c->d; e++) pb->q[row * c->d + e] = to_storage(input_values(c), rng_normal(r));
    }
    free(rm);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* topk_theta: a threshold per (head, row id) that keeps about c->keep of the keys of the rows
 * using it (every batch, and every row past the last calibrated id), placed in the widest gap
 * near that quantile of their scores (pre-softmax) or of s - ln sum e^s (post-softmax: the log
 * of the weight), at least 2 margin_needed wide, so that no key sits near its threshold; where
 * no gap is wide enough the threshold keeps every key.  The offline SDC table: eta = theta +
 * ln(n / 4) (a quarter of the keys at the threshold, say). */
static void choose_thresholds(problem *pb)
{
    const attn_case *c = &pb->c;
    const int64_t offset = c->offset < 0 ? (int64_t)c->Tk - c->Tq : c->offset;
    const double scale = isnan(c->ref_scale) ? (isnan(c->scale) ? 1.0 / sqrt((double)c->d) : c->scale) : c->ref_scale;
    pb->thresholds = xcalloc((size_t)c->H * c->nthr, sizeof(double));
    if (c->sdc == TDACL_SDC_OFFLINE) pb->log_mass = xcalloc((size_t)c->H * c->nthr, sizeof(double));
    double *vals = xcalloc((size_t)c->B * c->Tq * c->Tk + 1, sizeof(double)), *s = xcalloc((size_t)c->Tk + 1, sizeof(double));
    double smag = 0.0;
    for (size_t i = 0; i < (size_t)c->B * c->H * c->Tq * c->d; i++) smag = fmax(smag, fabs(pb->q[i]));
    double kmag = 0.0;
    for (size_t i = 0; i < (size_t)c->B * c->H * c->Tk * c->d; i++) kmag = fmax(kmag, fabs(pb->k[i]));
    /* a bound on any score's size, for its rounding; post-softmax adds ln z's (Tk terms) */
    const double need = margin_needed(c->d, fabs(scale) * c->d * smag * kmag) + (c->theta_post ? (c->Tk + 16.0) * 4 * U32 : 0.0);
    for (int h = 0; h < c->H; h++)
        for (int rid = 0; rid < c->nthr; rid++) {
            size_t nv = 0, nmax = 0;
            for (int b = 0; b < c->B; b++)
                for (int i = 0; i < c->Tq; i++) {
                    const int64_t n = offset + i + 1 < c->Tk ? offset + i + 1 : c->Tk;
                    if ((n - 1 < c->nthr - 1 ? n - 1 : c->nthr - 1) != rid) continue;
                    const double *qi = pb->q + (((size_t)b * c->H + h) * c->Tq + i) * c->d;
                    double m = -INFINITY, z = 0.0;
                    for (int j = 0; j < n; j++) {
                        const double *kj = pb->k + (((size_t)b * c->H + h) * c->Tk + j) * c->d;
                        double dotp = 0.0;
                        for (int e = 0; e < c->d; e++) dotp += qi[e] * kj[e];
                        s[j] = scale * dotp;
                        m = fmax(m, s[j]);
                    }
                    for (int j = 0; j < n; j++) z += exp(s[j] - m);
                    for (int j = 0; j < n; j++) vals[nv++] = c->theta_post ? s[j] - m - log(z) : s[j];
                    nmax = (size_t)n > nmax ? (size_t)n : nmax;
                }
            double theta = c->theta_post ? 0.0 : -INFINITY; /* keep all */
            if (nv > 1) {
                qsort(vals, nv, sizeof *vals, cmp_double);
                const double want = (1.0 - c->keep) * (double)(nv - 1);
                double best = -1.0;
                for (size_t g = 0; g + 1 < nv; g++) {
                    const double width = vals[g + 1] - vals[g];
                    if (width < 2.0 * need + 1e-12) continue;
                    const double dist = fabs((double)g + 0.5 - want);
                    if (best < 0.0 || dist < best) {
                        best = dist;
                        const double mid = (float)(0.5 * (vals[g] + vals[g + 1])); /* the float the library gets */
                        theta = c->theta_post ? (double)(float)exp(mid) : mid;
                    }
                }
            }
            pb->thresholds[(size_t)h * c->nthr + rid] = theta;
            if (pb->log_mass)
                pb->log_mass[(size_t)h * c->nthr + rid] = (float)((isfinite(theta) ? theta : 0.0) + log(fmax((double)nmax, 1.0) / 4.0));
        }
    free(vals), free(s);
    if (c->vsum) { /* the sums a KV cache would keep, as the f32 the library gets */
        pb->v_sum = xcalloc((size_t)c->B * c->H * c->dv, sizeof(double));
        for (size_t bh = 0; bh < (size_t)c->B * c->H; bh++)
            for (int e = 0; e < c->dv; e++) {
                double sum = 0.0;
                for (int j = 0; j < c->Tk; j++) sum += pb->v[(bh * c->Tk + j) * c->dv + e];
                pb->v_sum[bh * c->dv + e] = (float)sum;
            }
    }
}

/* Re-draw (deterministically, from the same stream) every key row that comes closer than
 * margin_needed() to a threshold, until no visible score does.  Keys rather than queries:
 * every pair involving a re-drawn key changes, and the offending keys are few (about
 * P(|s - tau| < margin) * Tk/2 per key, well under one per cent here). */
static void keep_off_threshold(problem *pb, rng *r)
{
    const attn_case *c = &pb->c;
    if (softmax_kind(c->kind)) return;
    if (c->kind == TDACL_ATTN_TOPK_THETA) {
        choose_thresholds(pb);
        return;
    }
    if (c->kind == TDACL_ATTN_ENTMAX) {
        keep_rows_off_threshold(pb, r);
        return;
    }
    size_t nk = (size_t)c->B * c->H * c->Tk;
    double *km = xcalloc(nk, sizeof(double));
    for (int iter = 0;; iter++) {
        ref_out ro;
        ref_compute(pb, c->Tq, c->offset, pb->q, pb->q2, &ro, km);
        /* entmax: plus how far the kernel's threshold may be from the exact one */
        double need = margin_needed(c->d, ro.counts.max_smag) + (c->kind == TDACL_ATTN_ENTMAX ? 2.0 * entmax_dtau(c) : 0.0);
        int done = ro.counts.min_margin >= need;
        ref_free(&ro);
        if (done) break;
        if (iter >= 100) fail_msg("inputs could not be kept off the threshold after %d re-draws", iter);
        for (size_t row = 0; row < nk; row++) {
            if (km[row] >= need) continue;
            for (int e = 0; e < c->d; e++) {
                pb->k[row * c->d + e] = to_storage(input_values(c), rng_normal(r));
                if (pb->k2) pb->k2[row * c->d + e] = to_storage(input_values(c), rng_normal(r));
            }
        }
    }
    free(km);
}

/* a test's own change to the drawn q, k (and q2, k2), before the threshold kinds' inputs are
 * kept off their thresholds (choose_thresholds then sees the changed scores) */
static void (*g_edit_inputs)(problem *pb);

static void problem_generate(problem *pb, const attn_case *c)
{
    memset(pb, 0, sizeof *pb);
    pb->c = *c;
    rng r = {c->seed};
    size_t bh = (size_t)c->B * c->H;
    pb->q = normal_array(&r, bh * c->Tq * c->d, input_values(c));
    pb->k = normal_array(&r, bh * c->Tk * c->d, input_values(c));
    pb->v = normal_array(&r, bh * c->Tk * c->dv, input_values(c));
    if (two_views(c->kind)) {
        pb->q2 = normal_array(&r, bh * c->Tq * c->d, input_values(c));
        pb->k2 = normal_array(&r, bh * c->Tk * c->d, input_values(c));
    }
    if (c->head_temps) {
        /* per-head (delta, beta, gamma): inverse temperatures between 0.6 and 1.6 */
        pb->temps = xcalloc((size_t)c->H * 3, sizeof(double));
        for (int h = 0; h < c->H; h++) {
            pb->temps[3 * h + 0] = (float)(0.6 + 0.2 * h);
            pb->temps[3 * h + 1] = (float)(0.25 - 0.1 * h);
            pb->temps[3 * h + 2] = (float)(0.5 + 0.5 * h);
        }
    }
    if (c->gain) {
        /* gains of both signs, away from 0 */
        pb->gain = xcalloc((size_t)c->dv, sizeof(double));
        for (int e = 0; e < c->dv; e++)
            pb->gain[e] = to_storage(c->gdtype, (rng_uniform(&r) < 0.5 ? -1.0 : 1.0) * (0.5 + rng_uniform(&r)));
    }
    if (g_edit_inputs) g_edit_inputs(pb);
    keep_off_threshold(pb, &r);
}

static void problem_free(problem *pb)
{
    free(pb->q), free(pb->k), free(pb->v), free(pb->q2), free(pb->k2), free(pb->gain), free(pb->temps);
    free(pb->thresholds), free(pb->log_mass), free(pb->v_sum);
    memset(pb, 0, sizeof *pb);
}

/* Rows r0..r0+n-1 of every head of x [B*H, T, D]. */
static double *slice_rows(const double *x, int BH, int T, int D, int r0, int n)
{
    double *y = xcalloc((size_t)BH * n * D, sizeof(double));
    for (int bh = 0; bh < BH; bh++)
        memcpy(y + (size_t)bh * n * D, x + ((size_t)bh * T + r0) * D, (size_t)n * D * sizeof(double));
    return y;
}

/* ---- device side: layouts --------------------------------------------------------------- */

enum { TQ, TK, TV, TQ2, TK2, NIN };

/* Where a logical [B,H,T,D] tensor lives inside one of the storage buffers. */
typedef struct place {
    int base;
    int64_t off, st[4];
} place;

typedef struct dev_problem {
    tdacl_tensor *base[NIN]; /* storage buffers (fused layout: everything in base[0]) */
    place pl[NIN];
    tdacl_tensor *gain;
    tdacl_tensor *temps;
    tdacl_tensor *thresholds, *log_mass, *v_sum; /* topk_theta */
} dev_problem;

static void host_to_bits(tdacl_dtype dt, const float *x, size_t n, void *bits)
{
    for (size_t i = 0; i < n; i++) {
        if (dt == TDACL_F32) ((float *)bits)[i] = x[i];
        else if (dt == TDACL_BF16) ((uint16_t *)bits)[i] = tdacl_f32_to_bf16(x[i]);
        else ((uint16_t *)bits)[i] = tdacl_f32_to_f16(x[i]);
    }
}

static double bits_to_double(tdacl_dtype dt, const void *bits, size_t i)
{
    if (dt == TDACL_F32) return ((const float *)bits)[i];
    if (dt == TDACL_BF16) return tdacl_bf16_to_f32(((const uint16_t *)bits)[i]);
    return tdacl_f16_to_f32(((const uint16_t *)bits)[i]);
}

/* The kernel variant of the last call (tdacl_attention_stats.variant): the tensor-core
 * variant rounds each weight to the 16-bit input type before the W x V product, which adds
 * u_in * sum_j |a_ij| |v_jc| (= u_in * mag) to the error model; and whether a test expects
 * that variant to have run. */
static int g_variant, g_expect_mma;
static int g_expect_mma_decode; /* decode calls must run on the tensor-core decode too */
/* two-view kinds: the output checked is that of the call without statistics, which takes
 * attention.mma_views (one view a launch) where the tensor-core variant runs; the statistics
 * still come from the one-pass kernel */
static int g_views;
/* run each call a second time without statistics and compare (the mma-f32 part) */
static int g_also_without_stats;

static tdacl_context *ctx_of(void **state) { return (tdacl_context *)*state; }

#define CHECK_OK(ctx, call)                                                                        \
    do {                                                                                           \
        tdacl_status st_ = (call);                                                                 \
        if (st_ != TDACL_SUCCESS) fail_msg("%s -> %s: %s", #call, tdacl_status_str(st_), tdacl_last_error(ctx)); \
    } while (0)

static tdacl_tensor *new_tensor(tdacl_context *ctx, tdacl_dtype dt, int ndim, const int64_t *shape)
{
    tdacl_tensor *t = NULL;
    CHECK_OK(ctx, tdacl_tensor_create(ctx, dt, ndim, shape, &t));
    return t;
}

/* Uploads a host float array (already storage-exact) into a contiguous tensor as raw bits,
 * so no conversion kernel runs. */
static void upload_raw(tdacl_context *ctx, tdacl_tensor *t, tdacl_dtype dt, const float *x, size_t n)
{
    void *bits = xcalloc(n, tdacl_dtype_size(dt));
    host_to_bits(dt, x, n, bits);
    CHECK_OK(ctx, tdacl_tensor_upload(t, bits, dt, (int64_t)n));
    free(bits);
}

/* Places and uploads the problem's inputs.  Unused parts of a fused buffer hold NaN, so a
 * kernel that reads outside its view shows up in the output. */
static void dev_upload(tdacl_context *ctx, const problem *pb, dev_problem *dp)
{
    const attn_case *c = &pb->c;
    memset(dp, 0, sizeof *dp);
    const int nv = two_views(c->kind) ? 2 : 1, B = c->B, H = c->H, d = c->d, dv = c->dv;
    const int rows[NIN] = {c->Tq, c->Tk, c->Tk, c->Tq, c->Tk};
    const int dims[NIN] = {d, d, dv, d, d};
    const double *src[NIN] = {pb->q, pb->k, pb->v, pb->q2, pb->k2};
    int64_t numel[NIN] = {0};
    if (c->lay == LAYOUT_FUSED) {
        /* one [B, Tk, W] buffer with columns [q | k | (q2 | k2 |) v]; q occupies the last Tq
         * token rows, as the rows of the current tokens in a decode step */
        int64_t W = (int64_t)H * (2 * nv * d + dv), T = c->Tk;
        const int64_t col[NIN] = {0, (int64_t)H * d, (int64_t)2 * nv * H * d, (int64_t)2 * H * d, (int64_t)3 * H * d};
        for (int t = 0; t < NIN; t++) {
            int64_t row0 = t == TQ || t == TQ2 ? T - c->Tq : 0;
            dp->pl[t] = (place){0, row0 * W + col[t], {T * W, dims[t], W, 1}};
        }
        numel[0] = B * T * W;
    } else {
        for (int t = 0; t < NIN; t++) {
            int64_t T = rows[t], D = dims[t];
            if (c->lay == LAYOUT_BHTD)
                dp->pl[t] = (place){t, 0, {H * T * D, T * D, D, 1}};
            else if (c->lay == LAYOUT_BTHD) /* token-major [B,T,H,D] seen as [B,H,T,D] */
                dp->pl[t] = (place){t, 0, {T * H * D, D, H * D, 1}};
            else /* [B,H,D,T] seen as [B,H,T,D] */
                dp->pl[t] = (place){t, 0, {H * D * T, D * T, 1, T}};
            numel[t] = B * H * T * D;
        }
    }
    float *host[NIN] = {0};
    for (int t = 0; t < NIN; t++)
        if (numel[t]) {
            host[t] = xcalloc((size_t)numel[t], sizeof(float));
            for (int64_t i = 0; i < numel[t]; i++) host[t][i] = NAN;
        }
    for (int t = 0; t < NIN; t++) {
        if (!src[t]) continue;
        const place *p = &dp->pl[t];
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int r = 0; r < rows[t]; r++)
                    for (int e = 0; e < dims[t]; e++)
                        host[p->base][p->off + b * p->st[0] + h * p->st[1] + r * p->st[2] + e * p->st[3]] =
                            (float)src[t][(((size_t)b * H + h) * rows[t] + r) * dims[t] + e];
    }
    for (int t = 0; t < NIN; t++) {
        if (!numel[t]) continue;
        int64_t shape[1] = {numel[t]};
        dp->base[t] = new_tensor(ctx, c->dtype, 1, shape);
        upload_raw(ctx, dp->base[t], c->dtype, host[t], (size_t)numel[t]);
        free(host[t]);
    }
    if (pb->gain) {
        int64_t shape[1] = {dv};
        float *g = xcalloc((size_t)dv, sizeof(float));
        for (int e = 0; e < dv; e++) g[e] = (float)pb->gain[e];
        dp->gain = new_tensor(ctx, c->gdtype, 1, shape);
        upload_raw(ctx, dp->gain, c->gdtype, g, (size_t)dv);
        free(g);
    }
    if (pb->temps) {
        int64_t shape[2] = {H, 3};
        float t3[3 * 16];
        assert_true(H <= 16);
        for (int i = 0; i < 3 * H; i++) t3[i] = (float)pb->temps[i];
        dp->temps = new_tensor(ctx, TDACL_F32, 2, shape);
        upload_raw(ctx, dp->temps, TDACL_F32, t3, (size_t)(3 * H));
    }
    const double *tables[3] = {pb->thresholds, pb->log_mass, pb->v_sum};
    tdacl_tensor **dst[3] = {&dp->thresholds, &dp->log_mass, &dp->v_sum};
    for (int i = 0; i < 3; i++) {
        if (!tables[i]) continue;
        const int64_t mat[2] = {H, c->nthr}, sums[3] = {c->B, H, c->dv};
        const size_t n = i < 2 ? (size_t)H * c->nthr : (size_t)c->B * H * c->dv;
        float *f = xcalloc(n, sizeof(float));
        for (size_t j = 0; j < n; j++) f[j] = (float)tables[i][j];
        *dst[i] = i < 2 ? new_tensor(ctx, TDACL_F32, 2, mat) : new_tensor(ctx, TDACL_F32, 3, sums);
        upload_raw(ctx, *dst[i], TDACL_F32, f, n);
        free(f);
    }
}

static void dev_free(dev_problem *dp)
{
    for (int t = 0; t < NIN; t++) tdacl_tensor_destroy(dp->base[t]);
    tdacl_tensor_destroy(dp->gain);
    tdacl_tensor_destroy(dp->temps);
    tdacl_tensor_destroy(dp->thresholds), tdacl_tensor_destroy(dp->log_mass), tdacl_tensor_destroy(dp->v_sum);
    memset(dp, 0, sizeof *dp);
}

/* A [B,H,rows,D] view of tensor t starting at row r0. */
static tdacl_tensor *view_of(tdacl_context *ctx, const attn_case *c, const dev_problem *dp, int t, int r0, int rows)
{
    const place *p = &dp->pl[t];
    int64_t shape[4] = {c->B, c->H, rows, t == TV ? c->dv : c->d};
    tdacl_tensor *v = NULL;
    CHECK_OK(ctx, tdacl_tensor_view(dp->base[p->base], 4, shape, p->st, p->off + r0 * p->st[2], &v));
    return v;
}

#define OUT_SENTINEL (-3.25) /* exact in f32, bf16 and f16 */
#define OUT_PAD 3

/* Runs one call on query rows r0..r0+Tq-1 of the uploaded problem and returns the output
 * as [B,H,Tq,dv] doubles.  The output tensor follows the case's layout: contiguous, a
 * token-major view with OUT_PAD unused columns per row (checked untouched), the
 * token-major [B,T,H*dv] a fused projection consumes, or [B,H,dv,Tq]. */
/* The tuned kernel parameters of a planned call with some of them overridden by name
 * ("BM=64 BN=32"), so the test does not depend on the full parameter list. */
/* TDACL_MMA_EMULATE names an AMD or Intel body (dpas8, dpas16, mfma, wmma), not the portable one */
static int emulates_vendor_body(const char *emu)
{
    return emu && *emu && strcmp(emu, "0") && strcmp(emu, "1") && strcmp(emu, "portable");
}

static tdacl_param_values forced_params(tdacl_context *ctx, const tdacl_attention_plan *plan, const char *force)
{
    const tdacl_kernel_space *ks = plan->row->space;
    const char *kernel = plan->row->name;
    tdacl_tuned tuned;
    const tdacl_attention_call call = {plan, NULL, NULL, NULL};
    CHECK_OK(ctx, tdacl__variant_params(ctx, plan->row, &call, NULL, &tuned));
    char name[32], why[256];
    int value, used;
    tdacl_problem pr;
    plan->row->problem(ctx, &call, &pr);
    for (int round = 0; round < 2; round++) {
        for (const char *p = force; sscanf(p, " %31[A-Z0-9_]=%d%n", name, &value, &used) == 2; p += used) {
            int i = tdacl__param_index(ks, name);
            if (i < 0) fail_msg("%s has no parameter %s", kernel, name);
            tuned.values.v[i] = value;
        }
        /* the forced names over the device's own tile may not fit its local memory (an
         * emulated vendor body on a GPU of 48 KB needs more than the tile it was tuned for):
         * then over the smallest tile of the generic ladder */
        if (!tdacl__params_check(ks, &ctx->info, &pr, &tuned.values, why, sizeof why)) break;
        if (round) fail_msg("%s: forced %s does not fit this device even over its smallest tile: %s", kernel, force, why);
        if (tdacl__params_parse(ks, ks->ladder[ks->nladder - 1], &tuned.values, why, sizeof why))
            fail_msg("%s: its ladder's last entry does not parse: %s", kernel, why);
    }
    return tuned.values;
}

static void dev_run(tdacl_context *ctx, const attn_case *c, const dev_problem *dp, int r0, int Tq, int64_t offset,
                    tdacl_attention_path path, const char *force, double *got, tdacl_attention_stats *stats)
{
    const int B = c->B, H = c->H, dv = c->dv;
    tdacl_tensor *in[NIN] = {0};
    for (int t = 0; t < NIN; t++)
        if (dp->base[dp->pl[t].base] && (t < TQ2 || two_views(c->kind)))
            in[t] = view_of(ctx, c, dp, t, t == TQ || t == TQ2 ? r0 : 0, t == TQ || t == TQ2 ? Tq : c->Tk);

    int64_t ld = c->lay == LAYOUT_BTHD ? dv + OUT_PAD : dv; /* elements per (token, head) row */
    int64_t n_out = (int64_t)B * Tq * H * ld;
    int64_t oshape[4] = {B, H, Tq, dv}, ost[4];
    if (c->lay == LAYOUT_BHTD)
        ost[0] = (int64_t)H * Tq * dv, ost[1] = (int64_t)Tq * dv, ost[2] = dv, ost[3] = 1;
    else if (c->lay == LAYOUT_DMAJOR)
        ost[0] = (int64_t)H * dv * Tq, ost[1] = (int64_t)dv * Tq, ost[2] = 1, ost[3] = Tq;
    else
        ost[0] = (int64_t)Tq * H * ld, ost[1] = ld, ost[2] = (int64_t)H * ld, ost[3] = 1;
    int64_t bshape[1] = {n_out};
    tdacl_tensor *obase = new_tensor(ctx, c->odtype, 1, bshape), *out = NULL;
    float *fill = xcalloc((size_t)n_out, sizeof(float));
    for (int64_t i = 0; i < n_out; i++) fill[i] = (float)OUT_SENTINEL;
    upload_raw(ctx, obase, c->odtype, fill, (size_t)n_out);
    free(fill);
    CHECK_OK(ctx, tdacl_tensor_view(obase, 4, oshape, ost, 0, &out));

    tdacl_attention_desc desc;
    tdacl_attention_desc_init(&desc);
    desc.kind = c->kind;
    desc.beta = c->beta, desc.kappa = c->kappa, desc.power = c->power, desc.lambda = c->lambda;
    desc.scale = c->scale, desc.normalize = c->normalize, desc.norm = c->norm, desc.norm_eps = c->norm_eps;
    desc.out_scale = c->out_scale, desc.offset = offset, desc.want_stats = 1, desc.path = path;
    desc.precision = c->precision;
    desc.alpha = c->alpha, desc.temp_delta = c->temp_delta, desc.temp_beta = c->temp_beta;
    desc.temp_gamma = c->temp_gamma;
    desc.theta_post = c->theta_post, desc.sdc = c->sdc, desc.sdc_gamma = c->sdc_gamma, desc.vmc = c->vmc;
    tdacl_attention_tensors ts = {in[TQ], in[TK], in[TV], in[TQ2], in[TK2], dp->gain, out, NULL, dp->temps,
                                  dp->thresholds, dp->log_mass, dp->v_sum};
    if (force) {
        tdacl_attention_plan plan;
        CHECK_OK(ctx, tdacl__attention_plan(ctx, &desc, &ts, &plan));
        tdacl_param_values values = forced_params(ctx, &plan, force);
        CHECK_OK(ctx, tdacl__attention_run(ctx, &plan, &ts, &values, NULL, stats));
    } else {
        CHECK_OK(ctx, tdacl_attention(ctx, &desc, &ts, stats));
    }
    g_variant = stats->variant;
    if (g_expect_mma && (path == TDACL_PATH_PREFILL || g_expect_mma_decode) && stats->variant != 1) {
        char cs[512];
        case_str(c, cs, sizeof cs);
        fail_msg("the tensor-core variant did not run [%s] (TDACL_LOG=debug says why)", cs);
    }

    if (g_views && g_expect_mma && path == TDACL_PATH_PREFILL) {
        /* again without statistics, on attention.mma_views; the output of the statistics run
         * is overwritten first, so that a launch that wrote nothing fails */
        fill = xcalloc((size_t)n_out, sizeof(float));
        for (int64_t i = 0; i < n_out; i++) fill[i] = (float)OUT_SENTINEL;
        upload_raw(ctx, obase, c->odtype, fill, (size_t)n_out);
        free(fill);
        desc.want_stats = 0;
        tdacl_attention_plan plan;
        setenv("TDACL_VARIANT", "attention.mma_views", 1); /* at any length */
        tdacl_status pst = tdacl__attention_plan(ctx, &desc, &ts, &plan);
        unsetenv("TDACL_VARIANT");
        CHECK_OK(ctx, pst);
        if (g_expect_mma && strcmp(plan.row->name, "attention.mma_views"))
            fail_msg("%s ran instead of attention.mma_views: %s", plan.row->name, plan.variant_why);
        tdacl_param_values values;
        if (force) values = forced_params(ctx, &plan, force);
        tdacl_attention_stats plain;
        CHECK_OK(ctx, tdacl__attention_run(ctx, &plan, &ts, force ? &values : NULL, NULL, &plain));
    }
    void *bits = xcalloc((size_t)n_out, tdacl_dtype_size(c->odtype));
    CHECK_OK(ctx, tdacl_tensor_download(obase, bits, c->odtype, n_out));
    if (g_also_without_stats && !force) {
        /* the same call without statistics runs a program without the survivor counters
         * (the mma variant's STATS=0); its output must be the same, bit for bit */
        tdacl_attention_stats plain;
        desc.want_stats = 0;
        CHECK_OK(ctx, tdacl_attention(ctx, &desc, &ts, &plain));
        void *again = xcalloc((size_t)n_out, tdacl_dtype_size(c->odtype));
        CHECK_OK(ctx, tdacl_tensor_download(obase, again, c->odtype, n_out));
        if (memcmp(bits, again, (size_t)n_out * tdacl_dtype_size(c->odtype)))
            fail_msg("the output without statistics differs from the output with them");
        free(again);
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < Tq; i++)
                for (int e = 0; e < (int)ld; e++) {
                    /* columns past dv are the padding of a token-major row (ost[3] == 1) */
                    size_t at = (size_t)(b * ost[0] + h * ost[1] + i * ost[2] + e * ost[3]);
                    double x = bits_to_double(c->odtype, bits, at);
                    if (e < dv)
                        got[(((size_t)b * H + h) * Tq + i) * dv + e] = x;
                    else if (x != OUT_SENTINEL)
                        fail_msg("output padding (b%d h%d row%d col%d) was overwritten: %g", b, h, i, e, x);
                }
    free(bits);
    tdacl_tensor_destroy(out);
    tdacl_tensor_destroy(obase);
    for (int t = 0; t < NIN; t++) tdacl_tensor_destroy(in[t]);
}

/* ---- comparison ----------------------------------------------------------------------------- */

/* Per-element tolerance of a reference output with Tk keys (error model above). */
static void tolerance(const attn_case *c, int Tq, const ref_out *r, const double *gain, double *tol)
{
    const int dv = c->dv, rows = c->B * c->H * Tq;
    /* the matrix units take bf16 (bf16 storage, and f32 storage at precision bf16), f16 or
     * tf32 (f32 storage at precision tf32): the weights are rounded to it, half an ulp */
    const int tf32 = c->dtype == TDACL_F32 && c->precision == TDACL_PRECISION_TF32;
    const double u_in = g_variant != 1 ? 0.0 : (c->dtype == TDACL_F16 || tf32) ? 0x1p-11 : 0x1p-8;
    const double eps_acc = (c->Tk + 32.0) * U32 + u_in, eps_s = eps_score(c->d);
    const double u_out = c->odtype == TDACL_BF16 ? 0x1p-8 : c->odtype == TDACL_F16 ? 0x1p-11 : 0.0;
    double *tx = xcalloc((size_t)dv, sizeof(double));
    for (int row = 0; row < rows; row++) {
        const size_t o = (size_t)row * dv;
        double ss_x = 0.0, ss_t = 0.0;
        for (int e = 0; e < dv; e++) {
            tx[e] = eps_acc * r->mag[o + e] + (eps_s * r->smag[row] + 16.0 * U32) * r->dmag[o + e];
            /* entmax: the threshold's solve error (score units) through the weights, and the
             * division by f(tau) = 1 +- 1e-6 */
            if (c->kind == TDACL_ATTN_ENTMAX) tx[e] += entmax_dtau(c) * r->dmag[o + e] + entmax_df(c) * r->mag[o + e];
            ss_x += r->pre[o + e] * r->pre[o + e];
            ss_t += tx[e] * tx[e];
        }
        double rr = sqrt(ss_x / dv + (double)c->norm_eps), t_rms = sqrt(ss_t / dv);
        for (int e = 0; e < dv; e++) {
            double y = fabs(r->out[o + e]), t;
            if (c->norm == TDACL_NORM_RMS) {
                double g = fabs((double)c->out_scale * (gain && c->gain ? gain[e] : 1.0));
                t = g / rr * (tx[e] + fabs(r->pre[o + e]) * t_rms / rr) + (dv + 8.0) * U32 * y;
            } else {
                t = fabs((double)c->out_scale) * tx[e] + U32 * y;
            }
            t *= 2.0;
            t += u_out * (y + t) + (c->odtype == TDACL_F16 ? 0x1p-24 : 0.0); /* f16 subnormals */
            tol[o + e] = t;
        }
    }
    free(tx);
}

/* Largest |got - want| / tol seen by compare() per output dtype, printed with
 * TDACL_TEST_VERBOSE=1: how much room the error model leaves on this device.  (A 16-bit
 * output's own rounding may take up to its whole 2^-8 / 2^-11 share, so its ratio can
 * approach 1 legitimately; the f32 ratio shows the room left for computation.) */
static double g_worst_ratio[3];

/* Asserts |got - want| <= tol elementwise (NaN fails); reports the worst element. */
static void compare(const attn_case *c, const char *what, int Tq, const double *got, const double *want,
                    const double *tol)
{
    const int dv = c->dv;
    size_t n = (size_t)c->B * c->H * Tq * dv, bad = 0, worst = 0;
    double worst_ratio = -1.0;
    for (size_t i = 0; i < n; i++) {
        double err = fabs(got[i] - want[i]);
        int ok = err <= tol[i];
        double ratio = isnan(err) ? INFINITY : tol[i] > 0 ? err / tol[i] : err > 0 ? INFINITY : 0.0;
        if (!ok) bad++;
        if (ratio > worst_ratio || (!ok && bad == 1)) worst_ratio = ratio, worst = i;
    }
    if (worst_ratio > g_worst_ratio[c->odtype]) g_worst_ratio[c->odtype] = worst_ratio;
    if (bad) {
        char cs[512];
        case_str(c, cs, sizeof cs);
        size_t e = worst % dv, row = worst / dv;
        fail_msg("%s: %zu of %zu outputs out of tolerance [%s]; worst at head %zu row %zu col %zu: got %.9g want "
                 "%.9g tol %.3g",
                 what, bad, n, cs, row / Tq, row % Tq, e, got[worst], want[worst], tol[worst]);
    }
}

static void check_stats(const attn_case *c, const char *what, const tdacl_attention_stats *st,
                        const attn_ref_counts *rc, int path)
{
    char cs[512];
    case_str(c, cs, sizeof cs);
    if (st->visible_pairs != rc->visible_pairs || st->zero_weights != rc->zero_weights ||
        st->survivors[0] != rc->survivors[0] || st->survivors[1] != rc->survivors[1])
        fail_msg("%s stats [%s]: visible %llu/%llu zeros %llu/%llu survivors %llu,%llu / %llu,%llu (got/want)", what,
                 cs, (unsigned long long)st->visible_pairs, (unsigned long long)rc->visible_pairs,
                 (unsigned long long)st->zero_weights, (unsigned long long)rc->zero_weights,
                 (unsigned long long)st->survivors[0], (unsigned long long)st->survivors[1],
                 (unsigned long long)rc->survivors[0], (unsigned long long)rc->survivors[1]);
    assert_int_equal(st->path, path);
    double want = rc->visible_pairs ? (double)rc->zero_weights / (double)rc->visible_pairs : 0.0;
    assert_true(fabs(st->sparsity - want) <= 1e-12);
    if (st->tiles_skipped_v > st->tiles_visited || (softmax_kind(c->kind) && st->tiles_skipped_v != 0))
        fail_msg("%s stats [%s]: %llu of %llu visited tiles skipped their V work (softmax kinds skip none)", what,
                 cs, (unsigned long long)st->tiles_skipped_v, (unsigned long long)st->tiles_visited);
    /* docs/spec.md section 2: a tile whose weights are all zero skips its V work; with no survivor at all,
     * that is every tile */
    /* (Top-theta's mean V row without v_sum reads every V tile) */
    if (!softmax_kind(c->kind) && rc->zero_weights == rc->visible_pairs && rc->survivors[0] == 0 &&
        rc->survivors[1] == 0 && !(c->vmc && !c->vsum))
        assert_int_equal(st->tiles_skipped_v, st->tiles_visited);
}

/* ---- drivers ---------------------------------------------------------------------------------- */

/* One call on the whole problem against the reference: outputs and exact counters. */
static void check_case(void **state, const attn_case *c, int expect_path)
{
    tdacl_context *ctx = ctx_of(state);
    problem pb;
    problem_generate(&pb, c);
    ref_out r;
    ref_compute(&pb, c->Tq, c->offset, pb.q, pb.q2, &r, NULL);
    dev_problem dp;
    dev_upload(ctx, &pb, &dp);
    size_t n = (size_t)c->B * c->H * c->Tq * c->dv;
    double *got = xcalloc(n, sizeof(double)), *tol = xcalloc(n, sizeof(double));
    tdacl_attention_stats st;
    dev_run(ctx, c, &dp, 0, c->Tq, c->offset, c->path, c->force, got, &st);
    tolerance(c, c->Tq, &r, pb.gain, tol);
    compare(c, "output", c->Tq, got, r.out, tol);
    check_stats(c, expect_path == TDACL_PATH_DECODE ? "decode" : "prefill", &st, &r.counts, expect_path);
    free(got), free(tol);
    ref_free(&r);
    dev_free(&dp);
    problem_free(&pb);
}

/* Decode of the last tq rows (offset T - tq, passed explicitly or as the default) against
 * the prefill rows of the same inputs and against the reference.  c is the prefill case
 * (Tq = Tk = T). */
/* The last tq rows of case c through the decode path, against the reference of those rows
 * (computed as decode rows and checked equal to the full reference's rows).  With
 * with_prefill, the prefill path runs all rows too and the decode rows must match its rows;
 * without, no prefill program is built (on PoCL its first launch costs 10-100 s). */
static void check_decode_rows(void **state, const attn_case *c, int tq, int explicit_offset, const char *force,
                              int with_prefill)
{
    tdacl_context *ctx = ctx_of(state);
    const int T = c->Tk, BH = c->B * c->H, r0 = T - tq;
    problem pb;
    problem_generate(&pb, c);
    dev_problem dp;
    dev_upload(ctx, &pb, &dp);

    /* prefill over all T rows */
    ref_out rf;
    ref_compute(&pb, T, 0, pb.q, pb.q2, &rf, NULL);
    size_t nf = (size_t)BH * T * c->dv, nd = (size_t)BH * tq * c->dv;
    double *pre = xcalloc(nf, sizeof(double)), *tolf = xcalloc(nf, sizeof(double));
    tdacl_attention_stats st;
    if (with_prefill) {
        dev_run(ctx, c, &dp, 0, T, c->offset, TDACL_PATH_PREFILL, NULL, pre, &st);
        tolerance(c, T, &rf, pb.gain, tolf);
        compare(c, "prefill", T, pre, rf.out, tolf);
        check_stats(c, "prefill", &st, &rf.counts, TDACL_PATH_PREFILL);
    }

    /* the reference of the decode rows; its rows must equal the full reference's rows */
    attn_case dc = *c;
    dc.Tq = tq;
    dc.offset = explicit_offset ? r0 : -1;
    double *qd = slice_rows(pb.q, BH, T, c->d, r0, tq), *q2d = pb.q2 ? slice_rows(pb.q2, BH, T, c->d, r0, tq) : NULL;
    ref_out rd;
    ref_compute(&pb, tq, r0, qd, q2d, &rd, NULL);
    double *full_rows = slice_rows(rf.out, BH, T, c->dv, r0, tq);
    assert_memory_equal(full_rows, rd.out, nd * sizeof(double));

    double *dec = xcalloc(nd, sizeof(double)), *told = xcalloc(nd, sizeof(double));
    double *pre_rows = slice_rows(pre, BH, T, c->dv, r0, tq);
    dev_run(ctx, &dc, &dp, r0, tq, dc.offset, TDACL_PATH_DECODE, force, dec, &st);
    tolerance(&dc, tq, &rd, pb.gain, told);
    compare(&dc, "decode vs reference", tq, dec, rd.out, told);
    check_stats(&dc, "decode", &st, &rd.counts, TDACL_PATH_DECODE);
    /* decode and prefill rows: each within its own tolerance of the reference (the prefill
     * one may be the tensor-core variant's), so within their sum of each other */
    if (with_prefill) {
        double *tolf_rows = slice_rows(tolf, BH, T, c->dv, r0, tq);
        for (size_t i = 0; i < nd; i++) told[i] += tolf_rows[i];
        free(tolf_rows);
        compare(&dc, "decode vs prefill rows", tq, dec, pre_rows, told);
    }

    free(qd), free(q2d), free(full_rows), free(pre_rows), free(pre), free(tolf), free(dec), free(told);
    ref_free(&rf), ref_free(&rd);
    dev_free(&dp);
    problem_free(&pb);
}

static void check_decode(void **state, const attn_case *c, int tq, int explicit_offset, const char *force)
{
    check_decode_rows(state, c, tq, explicit_offset, force, 1);
}

/* The kinds of the streaming kernels, then entmax (its own tests below; the tiny subset takes
 * all six). */
static const tdacl_attention_kind KINDS[6] = {TDACL_ATTN_SOFTMAX, TDACL_ATTN_RELA, TDACL_ATTN_TRA, TDACL_ATTN_TDA,
                                              TDACL_ATTN_DIFF_SOFTMAX, TDACL_ATTN_ENTMAX};

/* ---- the reference on its own: hand-computed values ----------------------------------------- */

static void test_reference_by_hand(void **state)
{
    (void)state;
    /* tau: (p + 1)/kappa = e gives 2 ln e = 2, so tau = beta sqrt(2/d) */
    assert_true(fabs(attn_ref_tau(9, 2.0, 10.0 / exp(1.0), 8) - 1.0) < 1e-15);
    assert_true(attn_ref_tau(0, 3.0, 1.0, 64) == 0.0); /* ln 1 = 0 */
    assert_true(attn_ref_tau(2, 3.0, 4.0, 64) == 0.0); /* (p+1)/kappa < 1: clamped to 0 */
    assert_true(attn_ref_rectified_power(-0.5, 2.0) == 0.0 && attn_ref_rectified_power(0.5, 3.0) == 0.125);
    assert_true(attn_ref_visible(0, 0, 0) && !attn_ref_visible(0, 1, 0) && attn_ref_visible(1, 4, 3));
    {
        /* entmax: sparsemax of (1, .5, -1) keeps two keys, tau = .25 -> (.75, .25, 0); 1.5-entmax
         * of (0, 0) is uniform; of (2, 0): u = (1, 0), the second key exactly at the
         * threshold, weight 0; of (1, 0): (.5 - tau)^2 + tau^2 = 1, tau = (1 - sqrt 7)/4 */
        double z3[3] = {1.0, 0.5, -1.0}, p[3];
        assert_true(fabs(attn_ref_entmax(z3, 3, 2.0, p) - 0.25) < 1e-15);
        assert_true(fabs(p[0] - 0.75) < 1e-15 && fabs(p[1] - 0.25) < 1e-15 && p[2] == 0.0);
        double z2[2] = {0.0, 0.0};
        attn_ref_entmax(z2, 2, 1.5, p);
        assert_true(fabs(p[0] - 0.5) < 1e-15 && fabs(p[1] - 0.5) < 1e-15);
        z2[0] = 2.0;
        attn_ref_entmax(z2, 2, 1.5, p);
        assert_true(fabs(p[0] - 1.0) < 1e-15 && p[1] == 0.0);
        z2[0] = 1.0;
        double t = (1.0 - sqrt(7.0)) / 4.0;
        assert_true(fabs(attn_ref_entmax(z2, 2, 1.5, p) - t) < 1e-15);
        assert_true(fabs(p[0] - (0.5 - t) * (0.5 - t)) < 1e-15 && fabs(p[1] - t * t) < 1e-15);
        /* alpha 3: p = (u - tau)^(1/2), u = 2z; z = (1, 1, 1, 1) -> each 1/4 */
        double z4[4] = {1.0, 1.0, 1.0, 1.0}, p4[4];
        attn_ref_entmax(z4, 4, 3.0, p4);
        for (int j = 0; j < 4; j++) assert_true(fabs(p4[j] - 0.25) < 1e-15);
    }

    /* tda, d = 2, T = 2, beta 0 (tau 0), p 2, lambda 1.7 (clamped to 1):
     *  q1 = [1,0],[0,2] -> [1,0],[0,1];  k1 = [3,0],[1,1] -> [1,0],[r,r] (r = 1/sqrt 2)
     *  q2 = [0,1],[1,0];                 k2 = [0,5],[-1,0] -> [0,1],[-1,0]
     *  row 0 sees key 0: s1 = 1, s2 = 1 -> a1 = 1, a2 = 1, a = 1 - 1 = 0       -> o = 0
     *  row 1 sees 0, 1:  s1 = 0, r -> a1 = 0, 1/2; s2 = 0, -1 -> a2 = 0, 0     -> o = v1/2 */
    const double q[] = {1, 0, 0, 2}, k[] = {3, 0, 1, 1}, q2[] = {0, 1, 1, 0}, k2[] = {0, 5, -1, 0};
    const double v[] = {1, 2, 10, 20};
    double out[4], pre[4];
    attn_ref_params p = attn_ref_params_default(TDACL_ATTN_TDA);
    p.beta = 0.0, p.lambda = 1.7;
    attn_ref_counts n;
    attn_ref_outputs o = {out, pre, NULL, NULL, NULL, NULL, NULL};
    assert_int_equal(attn_ref_attention(&p, (attn_ref_shape){1, 1, 2, 2, 2, 2}, (attn_ref_inputs){q, k, v, q2, k2}, o, &n), 0);
    assert_true(out[0] == 0.0 && out[1] == 0.0);
    assert_true(fabs(out[2] - 5.0) < 1e-12 && fabs(out[3] - 10.0) < 1e-12);
    assert_int_equal(n.visible_pairs, 3);
    assert_int_equal(n.zero_weights, 2);
    assert_int_equal(n.survivors[0], 2);
    assert_int_equal(n.survivors[1], 1);

    /* the same inputs as softmax: row 0 is v0; row 1 weighs v0, v1 by softmax(0, 2/sqrt 2) */
    p = attn_ref_params_default(TDACL_ATTN_SOFTMAX);
    assert_int_equal(attn_ref_attention(&p, (attn_ref_shape){1, 1, 2, 2, 2, 2}, (attn_ref_inputs){q, k, v, NULL, NULL}, o, &n), 0);
    double w1 = 1.0 / (1.0 + exp(-2.0 / sqrt(2.0)));
    assert_true(fabs(out[0] - 1.0) < 1e-12 && fabs(out[1] - 2.0) < 1e-12);
    assert_true(fabs(out[2] - ((1 - w1) * 1 + w1 * 10)) < 1e-12);
    assert_int_equal(n.zero_weights, 0);
    assert_int_equal(n.survivors[0], 3);

    /* rela ignores beta/kappa/power/normalize: scores [0,1]/sqrt 2 ... at row 1: q=[0,2] ->
     * s = (0, 2)/sqrt 2 -> o = sqrt 2 * v1; row 0: s = 3/sqrt 2 -> o = 3/sqrt 2 * v0 */
    p = attn_ref_params_default(TDACL_ATTN_RELA);
    p.beta = 5.0, p.power = 3.0, p.normalize = 1;
    assert_int_equal(attn_ref_attention(&p, (attn_ref_shape){1, 1, 2, 2, 2, 2}, (attn_ref_inputs){q, k, v, NULL, NULL}, o, &n), 0);
    assert_true(fabs(out[0] - 3.0 / sqrt(2.0)) < 1e-12 && fabs(out[3] - 20.0 * sqrt(2.0)) < 1e-12);
    assert_int_equal(n.zero_weights, 1);

    /* rms Norm with gain and out_scale, and diff_softmax's unclamped lambda: identical views
     * give (1 - lambda) softmax, here -0.7 v0 on row 0; rms of that row is 0.7 sqrt(2.5) */
    const double gain[] = {2.0, -1.0};
    p = attn_ref_params_default(TDACL_ATTN_DIFF_SOFTMAX);
    p.lambda = 1.7, p.norm = TDACL_NORM_RMS, p.norm_eps = 0.0, p.gain = gain, p.out_scale = 0.5;
    assert_int_equal(attn_ref_attention(&p, (attn_ref_shape){1, 1, 2, 2, 2, 2}, (attn_ref_inputs){q, k, v, q, k}, o, &n), 0);
    double r = 0.7 * sqrt(2.5);
    assert_true(fabs(pre[0] + 0.7) < 1e-12 && fabs(out[0] - 0.5 * 2.0 * -0.7 / r) < 1e-12);
    assert_true(fabs(out[1] - 0.5 * -1.0 * -1.4 / r) < 1e-12);
}

/* ---- variant sweeps ---------------------------------------------------------------------------- */

/* A: every kind, every T in {1, 2, 17, 64, 65, 300} (prefill, Tq = Tk), each with a different
 * parameter set; path AUTO, which must choose prefill when Tk < 4 Tq. */
static void test_variant_a_all_lengths(void **state)
{
    static const int Ts[6] = {1, 2, 17, 64, 65, 300};
    for (int ki = 0; ki < 5; ki++)
        for (int t = 0; t < 6; t++) {
            attn_case c = make_case(KINDS[ki], VAR_A, Ts[t], Ts[t], -1);
            apply_pset(&c, &PSETS[(t + ki) % 6]);
            c.path = TDACL_PATH_AUTO;
            check_case(state, &c, TDACL_PATH_PREFILL);
        }
}

/* B, C, D: two shapes each, Tq < Tk with default and explicit offsets among them. */
/* Kinds [k0, k1) of a variant (programs differ by kind, so disjoint ranges share none). */
static void sweep_kinds(void **state, variant var, const int shapes[2][3], int k0, int k1)
{
    for (int ki = k0; ki < k1; ki++)
        for (int s = 0; s < 2; s++) {
            attn_case c = make_case(KINDS[ki], var, shapes[s][0], shapes[s][1], shapes[s][2]);
            apply_pset(&c, &PSETS[(2 * ki + s + (int)var) % 6]);
            check_case(state, &c, TDACL_PATH_PREFILL);
        }
}

static void sweep_variant(void **state, variant var, const int shapes[2][3]) { sweep_kinds(state, var, shapes, 0, 5); }

static void test_variant_b_token_major_d64(void **state)
{
    static const int shapes[2][3] = {{17, 65, -1}, {64, 64, -1}};
    sweep_variant(state, VAR_B, shapes);
}

static void test_variant_c_bf16_fused_qkv_d80(void **state)
{
    /* offset 100 < Tk - Tq: keys 120..299 are visible to no row and must not matter */
    static const int shapes[2][3] = {{65, 65, -1}, {20, 300, 100}};
    sweep_variant(state, VAR_C, shapes);
    /* the same compiled variant on [B,H,D,T] views (innermost stride T) and a [B,H,dv,T]
     * output: strided head-dim loads and stores */
    for (int ki = 0; ki < 5; ki += 2) {
        attn_case c = make_case(KINDS[ki], VAR_C, 17, 40, -1);
        c.lay = LAYOUT_DMAJOR, c.B = 2;
        apply_pset(&c, &PSETS[(ki + 5) % 6]);
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
}

/* offset 40 > Tk - Tq: every row sees every key, thresholds of positions 40..44.  In two
 * tests (one-view kinds, two-view kinds) so that each ctest part stays under five minutes. */
static const int D_SHAPES[2][3] = {{300, 300, -1}, {5, 17, 40}};
/* three ctest parts (softmax and rela; tra; the two-view kinds): each kind's f16 d=128
 * programs take PoCL about 100 s to compile cold */
static void test_variant_d_f16_d128(void **state) { sweep_kinds(state, VAR_D, D_SHAPES, 0, 2); }
static void test_variant_d_f16_d128_tra(void **state) { sweep_kinds(state, VAR_D, D_SHAPES, 2, 3); }
static void test_variant_d_f16_d128_two_views(void **state) { sweep_kinds(state, VAR_D, D_SHAPES, 3, 5); }

/* ---- entmax (cl/attention_entmax.cl) ---------------------------------------------------------- */

static const float ENTMAX_ALPHAS[4] = {1.25f, 1.5f, 2.0f, 3.0f};

/* Inverse temperatures: plain alpha-entmax, ASEntmax's length-adaptive scalars, per-head
 * (delta, beta, gamma) through tensors.temps. */
static void entmax_temps(attn_case *c, int which)
{
    if (which == 1) c->temp_delta = 0.75f, c->temp_beta = 0.5f, c->temp_gamma = 0.5f;
    if (which == 2) c->head_temps = 1, c->H = 3;
}

/* Variant A (f32, d = 32): every alpha meets every T in {1, 2, 17, 300}, with the parameter
 * sets' Norm, scale and output scale, and each kind of temperature. */
static void test_entmax_lengths(void **state)
{
    static const int Ts[4] = {1, 2, 17, 300};
    for (int a = 0; a < 4; a++)
        for (int t = 0; t < 4; t++) {
            attn_case c = make_case(TDACL_ATTN_ENTMAX, VAR_A, Ts[t], Ts[t], -1);
            apply_pset(&c, &PSETS[(a + t) % 6]);
            c.alpha = ENTMAX_ALPHAS[a];
            entmax_temps(&c, (a + 2 * t) % 3);
            c.path = TDACL_PATH_AUTO;
            check_case(state, &c, TDACL_PATH_PREFILL);
        }
}

/* Token-major f32 with dv % 4 != 0 (B), bf16 views into a fused buffer with an offset
 * below Tk - Tq (C), f16 at d = 128 with an offset above it (D). */
static void test_entmax_layouts(void **state)
{
    static const struct { variant var; int tq, tk, off; float alpha; } cs[] = {
        {VAR_B, 17, 65, -1, 1.5f},      {VAR_B, 64, 64, -1, 2.0f}, {VAR_C, 65, 65, -1, 1.25f},
        {VAR_C, 20, 300, 100, 3.0f},    {VAR_D, 5, 17, 40, 2.0f}};
    for (int i = 0; i < 5; i++) {
        attn_case c = make_case(TDACL_ATTN_ENTMAX, cs[i].var, cs[i].tq, cs[i].tk, cs[i].off);
        apply_pset(&c, &PSETS[(i + 1) % 6]);
        c.alpha = cs[i].alpha;
        entmax_temps(&c, i % 3);
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    /* few kept candidates: alpha 1.25 rows hold more than 32, so every threshold pass
     * re-scores the keys (cl/attention_entmax.cl CAP) */
    attn_case c = make_case(TDACL_ATTN_ENTMAX, VAR_A, 300, 300, -1);
    c.alpha = 1.25f, c.force = "CAP=32";
    check_case(state, &c, TDACL_PATH_PREFILL);
    /* K tiles fetched one ahead (PREFETCH, as the H100 decode entry runs it) */
    c.alpha = 1.5f, c.force = "PREFETCH=1";
    check_case(state, &c, TDACL_PATH_PREFILL);
    /* bf16 on 16-byte rows (8 elements a load, cl/attention_rows.cl WIDE8), prefetched; on
     * this kernel (natively, NVIDIA's bf16 calls take the tensor cores) */
    attn_case w = make_case(TDACL_ATTN_ENTMAX, VAR_TINY_BF16, 65, 65, -1);
    w.force = "PREFETCH=1";
    setenv("TDACL_VARIANT", "attention.entmax", 1);
    check_case(state, &w, TDACL_PATH_PREFILL);
    unsetenv("TDACL_VARIANT");
}

/* Decode rows (the decode row of the registry runs the same kernel with its own tiles)
 * against the prefill rows and the reference. */
static void test_entmax_decode(void **state)
{
    attn_case c = make_case(TDACL_ATTN_ENTMAX, VAR_A, 300, 300, -1);
    entmax_temps(&c, 1);
    check_decode(state, &c, 3, 1, NULL);
    c.alpha = 2.0f;
    entmax_temps(&c, 2);
    check_decode_rows(state, &c, 1, 0, NULL, 0);
    check_decode_rows(state, &c, 2, 1, "PREFETCH=1", 0);
}

/* A hand-edited problem (B = 1 or more) through the prefill path against the reference:
 * outputs within tolerance and exact statistics; returns the outputs and their tolerances
 * (the caller's to free) for checks of its own. */
static void check_problem(void **state, const problem *pb, const char *what, double **got, double **tol,
                          tdacl_attention_stats *st)
{
    tdacl_context *ctx = ctx_of(state);
    const attn_case *c = &pb->c;
    ref_out r;
    ref_compute(pb, c->Tq, c->offset, pb->q, pb->q2, &r, NULL);
    dev_problem dp;
    dev_upload(ctx, pb, &dp);
    size_t n = (size_t)c->B * c->H * c->Tq * c->dv;
    *got = xcalloc(n, sizeof(double)), *tol = xcalloc(n, sizeof(double));
    dev_run(ctx, c, &dp, 0, c->Tq, -1, TDACL_PATH_PREFILL, NULL, *got, st);
    tolerance(c, c->Tq, &r, pb->gain, *tol);
    compare(c, what, c->Tq, *got, r.out, *tol);
    check_stats(c, what, st, &r.counts, TDACL_PATH_PREFILL);
    ref_free(&r);
    dev_free(&dp);
}

/* Case c (prefill) with element 3 of q row prow (what 0) or of key row prow (what 1) of head
 * hb set to NaN: that row (what 1: every row that sees that key) must come out NaN, every other
 * output as the reference of the unpoisoned inputs says. */
static void check_poisoned_row(void **state, const attn_case *c, int what, int hb, int prow)
{
    problem pb;
    problem_generate(&pb, c);
    ref_out r;
    ref_compute(&pb, c->Tq, 0, pb.q, pb.q2, &r, NULL);
    (what ? pb.k : pb.q)[((size_t)hb * (what ? c->Tk : c->Tq) + prow) * c->d + 3] = NAN;
    dev_problem dp;
    dev_upload(ctx_of(state), &pb, &dp);
    const size_t n = (size_t)c->B * c->H * c->Tq * c->dv;
    double *got = xcalloc(n, sizeof(double)), *tol = xcalloc(n, sizeof(double));
    tdacl_attention_stats st;
    dev_run(ctx_of(state), c, &dp, 0, c->Tq, -1, TDACL_PATH_PREFILL, NULL, got, &st);
    tolerance(c, c->Tq, &r, NULL, tol); /* after the run: its error model is the variant's */
    for (size_t i = 0; i < n; i++) {
        const int bh = (int)(i / ((size_t)c->Tq * c->dv)), row = (int)(i / c->dv % c->Tq);
        const int nan_row = bh == hb && (what ? row >= prow : row == prow);
        if (nan_row ? !isnan(got[i]) : !(fabs(got[i] - r.out[i]) <= tol[i]))
            fail_msg("%s, NaN in %s: head %d row %d element %zu is %g (reference %g)", kind_name(c->kind),
                     what ? "k" : "q", bh, row, i % c->dv, got[i], r.out[i]);
    }
    free(got), free(tol);
    ref_free(&r);
    dev_free(&dp);
    problem_free(&pb);
}

/* Ties and extremes on variant A, against the reference (checked by hand above): keys 4..8
 * of head 0 equal (tied scores), query row 10 of head 0 aligned with key 3 and 8x longer
 * (one survivor), and every key of head 1 the same (uniform weights, where the threshold
 * sits exactly at the bracket's end). */
static void test_entmax_ties(void **state)
{
    for (int a = 0; a < 4; a++) {
        attn_case c = make_case(TDACL_ATTN_ENTMAX, VAR_A, 17, 17, -1);
        c.B = 1, c.alpha = ENTMAX_ALPHAS[a];
        problem pb;
        problem_generate(&pb, &c);
        const int d = c.d, T = c.Tk;
        for (int j = 5; j <= 8; j++) memcpy(pb.k + (size_t)j * d, pb.k + 4 * (size_t)d, (size_t)d * sizeof(double));
        for (int e = 0; e < d; e++) pb.q[10 * (size_t)d + e] = 8.0 * pb.k[3 * (size_t)d + e];
        for (int j = 1; j < T; j++) memcpy(pb.k + ((size_t)T + j) * d, pb.k + (size_t)T * d, (size_t)d * sizeof(double));
        /* query rows near their threshold are re-drawn (the keys keep their ties) */
        rng rr = {c.seed + 1};
        keep_rows_off_threshold(&pb, &rr);
        for (int e = 0; e < d; e++)
            if (pb.q[10 * (size_t)d + e] != 8.0 * pb.k[3 * (size_t)d + e]) fail_msg("alpha %g: row 10 was re-drawn", c.alpha);
        double *got, *tol;
        tdacl_attention_stats st;
        check_problem(state, &pb, "ties", &got, &tol, &st);
        /* the single survivor: row 10's output is v_3 itself */
        for (int e = 0; e < c.dv; e++) assert_true(fabs(got[10 * (size_t)c.dv + e] - pb.v[3 * (size_t)c.dv + e]) <= tol[10 * c.dv + e]);
        free(got), free(tol);
        problem_free(&pb);
    }
}

/* ---- Top-theta (cl/attention_topk.cl) ------------------------------------------------------- */

/* The modes: pre-softmax plain, with each SDC estimate and VMC, post-softmax with and without
 * VMC.  (SDC alone only scales a row, which an rms Norm would undo; with VMC the estimate also
 * sets how much of the mean V row is added.) */
static const struct { int post; tdacl_sdc sdc; int vmc; } TOPK_MODES[6] = {
    {0, TDACL_SDC_NONE, 0},    {0, TDACL_SDC_EXACT, 1}, {0, TDACL_SDC_EXP_THRESHOLD, 1},
    {0, TDACL_SDC_OFFLINE, 1}, {1, TDACL_SDC_NONE, 0},  {1, TDACL_SDC_NONE, 1},
};
static const double TOPK_KEEP[3] = {0.3, 0.05, 0.8};

static void topk_mode(attn_case *c, int i)
{
    c->theta_post = TOPK_MODES[i % 6].post, c->sdc = TOPK_MODES[i % 6].sdc, c->vmc = TOPK_MODES[i % 6].vmc;
    c->keep = TOPK_KEEP[i % 3];
}

/* Every mode at every length, thresholds for every row id or only the first few (later rows
 * use the last one), with the Norm / gain / scale sets. */
static void test_topk_lengths(void **state)
{
    static const int Ts[4] = {1, 2, 17, 300};
    for (int m = 0; m < 6; m++)
        for (int t = 0; t < 4; t++) {
            attn_case c = make_case(TDACL_ATTN_TOPK_THETA, VAR_A, Ts[t], Ts[t], -1);
            apply_pset(&c, &PSETS[(m + 2 * t + 1) % 6]); /* every mode meets Norm and no Norm */
            topk_mode(&c, m + t);
            if ((m + t) % 2) c.nthr = Ts[t] > 8 ? Ts[t] / 3 : 1; /* calibrated up to here */
            c.sdc_gamma = m % 2 ? 0.05f : 0.5f;
            check_case(state, &c, TDACL_PATH_PREFILL);
        }
}

/* Token-major f32 with dv % 4 != 0 (B), bf16 views into a fused buffer with an offset below
 * Tk - Tq (C), f16 at d = 128 with an offset above it (D), the K prefetch forced. */
static void test_topk_layouts(void **state)
{
    static const struct { variant var; int tq, tk, off; } cs[] = {
        {VAR_B, 17, 65, -1}, {VAR_B, 64, 64, -1}, {VAR_C, 65, 65, -1}, {VAR_C, 20, 300, 100}, {VAR_D, 5, 17, 40}};
    for (int i = 0; i < 5; i++) {
        attn_case c = make_case(TDACL_ATTN_TOPK_THETA, cs[i].var, cs[i].tq, cs[i].tk, cs[i].off);
        apply_pset(&c, &PSETS[(i + 1) % 6]);
        topk_mode(&c, i + 1);
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    attn_case c = make_case(TDACL_ATTN_TOPK_THETA, VAR_A, 300, 300, -1);
    topk_mode(&c, 4);
    c.force = "PREFETCH=1";
    check_case(state, &c, TDACL_PATH_PREFILL);
    /* bf16 on 16-byte rows (8 elements a load, cl/attention_rows.cl WIDE8), staged and prefetched */
    attn_case w = make_case(TDACL_ATTN_TOPK_THETA, VAR_TINY_BF16, 65, 65, -1);
    topk_mode(&w, 3);
    check_case(state, &w, TDACL_PATH_PREFILL);
    w.force = "PREFETCH=1";
    check_case(state, &w, TDACL_PATH_PREFILL);
}

/* Top-theta on the tensor-core kernel (without VMC: softmax whose weights below a row's
 * threshold are zero, the dropped ones' sum kept for the SDC; post-softmax in two launches):
 * each SDC mode and post-softmax, bf16 and f16, rows and keys across its 16-row slices and
 * key tiles, an offset, thresholds for only the first row ids; through the portable fragment body with
 * TDACL_MMA_EMULATE=1 (CI) or mma.sync natively, the variant asserted. */
static void test_topk_mma(void **state)
{
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    static const struct { variant var; int tq, tk, off, post; tdacl_sdc sdc; } cs[] = {
        {VAR_TINY_BF16, 17, 17, -1, 0, TDACL_SDC_NONE},          {VAR_TINY_BF16, 65, 65, -1, 0, TDACL_SDC_EXACT},
        {VAR_TINY_BF16, 20, 90, 60, 0, TDACL_SDC_EXP_THRESHOLD}, {VAR_TINY_BF16, 40, 40, -1, 0, TDACL_SDC_OFFLINE},
        {VAR_D, 33, 33, -1, 0, TDACL_SDC_EXACT},                 {VAR_TINY_BF16, 65, 65, -1, 1, TDACL_SDC_NONE},
        {VAR_TINY_BF16, 20, 90, 60, 1, TDACL_SDC_NONE},          {VAR_D, 33, 33, -1, 1, TDACL_SDC_NONE}};
    for (int i = 0; i < 8; i++) {
        attn_case c = make_case(TDACL_ATTN_TOPK_THETA, cs[i].var, cs[i].tq, cs[i].tk, cs[i].off);
        apply_pset(&c, &PSETS[(i + 1) % 6]);
        c.theta_post = cs[i].post, c.sdc = cs[i].sdc, c.vmc = 0, c.keep = TOPK_KEEP[i % 3];
        /* an rms Norm would undo the SDC's scale, and post-softmax's denominator */
        if (c.sdc != TDACL_SDC_NONE || c.theta_post) c.norm = TDACL_NORM_NONE, c.gain = 0;
        if (i == 1) c.nthr = 20; /* later rows take the last calibrated threshold */
        if (i == 2) c.sdc_gamma = 0.5f; /* an estimate large enough to see the kept count in it */
        /* one K and one V buffer, pre- and post-softmax (its statistics launch too), two key tiles */
        if (g_expect_mma && (i == 1 || i == 5)) c.force = "KSTAGES=1 BN=32";
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    /* a NaN in q row 5 of head 1 makes that row NaN (its scores are not finite), every other
     * row as without it */
    attn_case c = make_case(TDACL_ATTN_TOPK_THETA, VAR_TINY_BF16, 17, 17, -1);
    c.theta_post = 0, c.sdc = TDACL_SDC_EXACT, c.vmc = 0, c.norm = TDACL_NORM_NONE, c.gain = 0;
    check_poisoned_row(state, &c, 0, 1, 5);
    g_expect_mma = 0;
}

/* entmax on the tensor-core kernel (alpha <= 1.5: the threshold from one pass that keeps each
 * row's scores above a rising bound, Newton launches for the rows it leaves, then the weights'
 * W x V on the matrix units): alpha 1.125, 1.25, 1.4 and 1.5, scalar and per-head temperatures, bf16
 * and f16, rows and keys across its tiles, an offset; through the portable body with
 * TDACL_MMA_EMULATE=1 (CI) or mma.sync natively, the variant asserted.  Which rows the one
 * pass settles is asserted too: random rows and rows that must drop kept scores as their
 * bound rises settle there (no Newton launch does anything, so the output is the pass's), tied
 * rows overflow its slots and are refined.  A NaN in a query or key row poisons exactly the
 * rows it reaches. */
static void test_entmax_mma(void **state)
{
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    static const struct { variant var; int tq, tk, off; float alpha; int temps; } cs[] = {
        {VAR_TINY_BF16, 17, 17, -1, 1.5f, 0}, {VAR_TINY_BF16, 65, 65, -1, 1.4f, 1}, {VAR_TINY_BF16, 20, 90, 60, 1.25f, 0},
        {VAR_D, 33, 33, -1, 1.5f, 1},         {VAR_TINY_BF16, 40, 40, -1, 1.125f, 0}};
    /* powers 1 / (alpha - 1): 2, 2.5 (at run time), 4 and 8 (products) */
    for (int i = 0; i < 5; i++) {
        attn_case c = make_case(TDACL_ATTN_ENTMAX, cs[i].var, cs[i].tq, cs[i].tk, cs[i].off);
        apply_pset(&c, &PSETS[(i + 1) % 6]);
        c.alpha = cs[i].alpha;
        if (cs[i].temps) c.head_temps = 1;
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    /* the Newton search's slowest rows: every key tied (q row zero: all scores 0) or nearly,
     * 300 keys, alpha 1.25 and 1.5 */
    for (int i = 0; i < 2; i++) {
        attn_case c = make_case(TDACL_ATTN_ENTMAX, VAR_TINY_BF16, 300, 300, -1);
        c.alpha = i ? 1.5f : 1.25f, c.H = 1;
        problem pb;
        problem_generate(&pb, &c);
        for (int r = 150; r < 225; r++) memset(pb.q + (size_t)r * c.d, 0, sizeof(double) * (size_t)c.d);
        /* nearly tied: every visible key in the support, each with its own weight, more than
         * the one pass keeps (so its root is a lower bound and the Newton launches finish) */
        for (int r = 225; r < 300; r++)
            for (int e = 0; e < c.d; e++) pb.q[(size_t)r * c.d + e] /= 64.0;
        double *got, *tol;
        tdacl_attention_stats st;
        check_problem(state, &pb, "tied keys", &got, &tol, &st);
        if (g_expect_mma && st.threshold_rows_refined == 0) fail_msg("tied keys: no row was left to Newton launches");
        free(got), free(tol);
        problem_free(&pb);
    }
    /* random rows (alpha 1.5; 1.25, whose rows the one pass leaves to Newton launches); rows
     * whose scores rise along the keys, 1/64 of a unit of x = (alpha - 1) z apart in key
     * pairs: each row keeps every score within 1 of its maximum so far, about 128, so it
     * prunes again and again as the maximum climbs; rows whose support lies in their first
     * 128 keys (x spread over 0.3 below 2, the later keys 0): the prune there is at the final
     * threshold, about 80 scores stay, the least weighing ~1e-5 */
    for (int i = 0; i < 4; i++) {
        attn_case c = make_case(TDACL_ATTN_ENTMAX, VAR_TINY_BF16, i >= 2 ? 600 : 160, i >= 2 ? 600 : 160, -1);
        c.alpha = i == 1 ? 1.25f : 1.5f, c.H = 1, c.scale = 1.0f, c.norm = TDACL_NORM_NONE, c.gain = 0;
        problem pb;
        problem_generate(&pb, &c);
        if (i >= 2) {
            for (int r = 0; r < c.Tq; r++)
                for (int e = 0; e < c.d; e++) pb.q[(size_t)r * c.d + e] = e == 0 ? 1.0 : 0.0;
            for (int j = 0; j < c.Tk; j++) {
                const double z = i == 2 ? (double)(j / 2) / 32.0 : j < 128 ? 4.0 - 0.6 * (double)(127 - j) / 128.0 : 0.0;
                for (int e = 0; e < c.d; e++) pb.k[(size_t)j * c.d + e] = e == 0 ? to_storage(input_values(&c), z) : 0.0;
            }
        }
        double *got, *tol;
        tdacl_attention_stats st;
        check_problem(state, &pb, i == 2 ? "rising scores" : i == 3 ? "support first" : "random rows", &got, &tol, &st);
        /* alpha 1.5: every row settles in the one pass; other powers keep no scores there */
        const unsigned long long want = c.alpha == 1.5f ? 0 : (unsigned long long)(c.B * c.H * c.Tq);
        if (g_expect_mma && st.threshold_rows_refined != want)
            fail_msg("case %d: %llu row(s) left to Newton launches, want %llu", i, (unsigned long long)st.threshold_rows_refined,
                     want);
        free(got), free(tol);
        problem_free(&pb);
    }
    /* a NaN in q row 40 makes that row NaN, one in key row 50 every row that sees it (the
     * threshold pass flags scores that are not finite), alpha 1.5 and 1.25 */
    for (int what = 0; what < 2; what++) {
        attn_case t = make_case(TDACL_ATTN_ENTMAX, VAR_TINY_BF16, 70, 70, -1);
        t.alpha = what ? 1.25f : 1.5f;
        check_poisoned_row(state, &t, what, 1, what ? 50 : 40);
    }
    g_expect_mma = 0;
}

/* Decode rows (the same kernel, the decode row's tiles) against the prefill rows and the
 * reference; the mean V row from v_sum (a KV cache's running sum: only the rows past a row's
 * last visible key are read). */
static void test_topk_decode(void **state)
{
    attn_case c = make_case(TDACL_ATTN_TOPK_THETA, VAR_A, 300, 300, -1);
    topk_mode(&c, 1);
    check_decode(state, &c, 3, 1, NULL);
    topk_mode(&c, 4);
    check_decode_rows(state, &c, 1, 0, NULL, 0);
    for (int m = 1; m < 6; m += 2) {
        topk_mode(&c, m);
        c.vmc = 1, c.vsum = 1;
        check_decode_rows(state, &c, m == 3 ? 16 : 2, 1, m == 5 ? "PREFETCH=1" : NULL, 0);
    }
}

/* Thresholds that drop every key: pre-softmax without SDC gives 0; with exact SDC and VMC the
 * whole weight goes to the mean V row; post-softmax (theta 2 > any weight) the same. */
static void test_topk_drop_all(void **state)
{
    static const struct { int post; tdacl_sdc sdc; int vmc; } m[3] = {
        {0, TDACL_SDC_NONE, 1}, {0, TDACL_SDC_EXACT, 1}, {1, TDACL_SDC_NONE, 1}};
    for (int i = 0; i < 3; i++) {
        attn_case c = make_case(TDACL_ATTN_TOPK_THETA, VAR_A, 17, 17, -1);
        c.theta_post = m[i].post, c.sdc = m[i].sdc, c.vmc = m[i].vmc, c.nthr = 1;
        problem pb;
        problem_generate(&pb, &c);
        for (int h = 0; h < c.H; h++) pb.thresholds[h] = m[i].post ? 2.0 : 1e4;
        double *got, *tol;
        tdacl_attention_stats st;
        check_problem(state, &pb, "drop all", &got, &tol, &st);
        assert_int_equal(st.survivors[0], 0);
        /* the mean of the visible V rows (row 5 sees 6), or 0 without compensation */
        for (int e = 0; e < c.dv; e++) {
            double mean = 0.0;
            for (int j = 0; j < 6; j++) mean += pb.v[(size_t)j * c.dv + e] / 6.0;
            const double want = m[i].sdc == TDACL_SDC_NONE && !m[i].post ? 0.0 : mean;
            if (fabs(got[5 * (size_t)c.dv + e] - want) > tol[5 * c.dv + e] + 1e-6)
                fail_msg("mode %d column %d: got %g, want %g", i, e, got[5 * (size_t)c.dv + e], want);
        }
        free(got), free(tol);
        problem_free(&pb);
    }
}

/* ---- the tensor-core variant ------------------------------------------------------------------ */

/* the precision the f32 shapes of mma_shapes run at */
static tdacl_precision g_f32_precision = TDACL_PRECISION_BF16;

/* Every kind through cl/attention_mma.cl: natively on NVIDIA sm_80+, through the portable
 * fragment body with TDACL_MMA_EMULATE=1 (CI, PoCL); on other devices the SIMT variant
 * answers the same cases.  Shapes straddle the 16-row warp slices, the 64-row blocks and the
 * 16/32/64-key tiles; d 32, 64 and 128 (and 96 with dv 40 padded to 64), both 16-bit
 * dtypes, contiguous, token-major and fused (16-byte cp.async and element loads), offsets,
 * every parameter set. */
static void mma_shapes(void **state, int first, int count, int alternate)
{
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    static const struct { int d, dv, Tq, Tk, off; layout lay; tdacl_dtype dt; } shapes[] = {
        {64, 64, 65, 65, -1, LAYOUT_BHTD, TDACL_BF16},   /* one row past a block, one key past a tile */
        {32, 32, 40, 150, 110, LAYOUT_BTHD, TDACL_F16},  /* rows at the end: whole tiles with no mask, padded out rows */
        {128, 128, 33, 33, -1, LAYOUT_BHTD, TDACL_BF16}, /* 32-key tiles */
        {96, 40, 20, 70, 5, LAYOUT_FUSED, TDACL_BF16},   /* keys 25..69 seen by no row; element loads */
        {64, 64, 40, 40, -1, LAYOUT_BTHD, TDACL_F32},    /* f32 storage at precision bf16 / tf32: aligned staging */
        {40, 24, 19, 37, -1, LAYOUT_FUSED, TDACL_F32},   /* ... and element staging */
        {128, 72, 70, 70, -1, LAYOUT_BHTD, TDACL_F32},   /* tf32 at d 128, keys past a 64-key tile */
    };
    for (int ki = 0; ki < 5; ki++)
        for (int s = first; s < first + count; s++) {
            if (alternate && s != first + ki % count) continue; /* one shape per kind, in turn */
            if (g_views && !two_views(KINDS[ki])) continue;
            attn_case c = make_case(KINDS[ki], VAR_TINY_BF16, shapes[s].Tq, shapes[s].Tk, shapes[s].off);
            c.d = shapes[s].d, c.dv = shapes[s].dv, c.lay = shapes[s].lay;
            c.dtype = c.odtype = shapes[s].dt;
            if (c.dtype == TDACL_F32) c.precision = g_f32_precision;
            c.B = 1, c.H = 2;
            c.seed += 77 * (uint64_t)s;
            /* two shapes take their K tiles three stages deep (loads two tiles ahead) */
            if (g_expect_mma && (s == 1 || s == 3)) c.force = s == 1 ? "KSTAGES=3" : "KSTAGES=3 BN=16";
            /* the softmax kinds' single K and V buffers: 128-key tiles, a partial one (64-key
             * tiles for an emulated vendor body on a GPU of 48 KB, where 128 do not fit) */
            const int small_local = emulates_vendor_body(emu) && info.local_mem_bytes < 64 * 1024;
            if (g_expect_mma && s == 0 && KINDS[ki] == TDACL_ATTN_SOFTMAX)
                c.force = small_local ? "KSTAGES=1 BN=64" : "KSTAGES=1 BN=128";
            if (g_expect_mma && s == 0 && KINDS[ki] == TDACL_ATTN_DIFF_SOFTMAX) c.force = "KSTAGES=1 NWARPS=2";
            apply_pset(&c, &PSETS[(ki + s) % 6]);
            check_case(state, &c, TDACL_PATH_PREFILL);
        }
    g_expect_mma = 0;
}

/* two halves, so that each ctest part stays well under five minutes cold on PoCL */
static void test_mma_variant(void **state) { mma_shapes(state, 0, 2, 0); }
static void test_mma_variant_wide(void **state) { mma_shapes(state, 2, 2, 0); }
/* fp32 storage on the matrix units (desc.precision bf16), each kind on one of the shapes, each
 * call also without statistics */
static void test_mma_f32_bf16(void **state)
{
    g_also_without_stats = 1; /* also the program without survivor counters (STATS=0) */
    mma_shapes(state, 4, 2, 1);
    g_also_without_stats = 0;
}
/* fp32 storage on the matrix units as tf32 (desc.precision tf32): every kind on three
 * shapes (aligned and element staging, d 32..128) */
static void test_mma_f32_tf32(void **state)
{
    g_f32_precision = TDACL_PRECISION_TF32;
    mma_shapes(state, 4, 3, 0);
    g_f32_precision = TDACL_PRECISION_BF16;
}

/* tda and diff_softmax one view a launch (attention.mma_views): the 16-bit shapes of the mma
 * parts (d 32 to 128, dv 40, offsets, three layouts), forced tiles included, dv 30 and f32
 * storage as tf32 */
static void test_mma_views(void **state)
{
    g_views = 1;
    mma_shapes(state, 0, 4, 0);
    /* dv not a multiple of 4: the combine's column at a time */
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    for (int ki = 0; ki < 5; ki++) {
        if (!two_views(KINDS[ki])) continue;
        attn_case c = make_case(KINDS[ki], VAR_TINY_BF16, 37, 37, -1);
        c.d = 48, c.dv = 30, c.B = 2, c.H = 3, c.lay = LAYOUT_BTHD;
        apply_pset(&c, &PSETS[ki]);
        check_case(state, &c, TDACL_PATH_PREFILL);
        /* f32 storage at precision tf32: 4-byte tiles, so the V region holds more rows a round */
        c = make_case(KINDS[ki], VAR_TINY_BF16, 45, 45, -1);
        c.d = c.dv = 64, c.B = 1, c.H = 2, c.lay = LAYOUT_BHTD;
        c.dtype = c.odtype = TDACL_F32, c.precision = TDACL_PRECISION_TF32;
        apply_pset(&c, &PSETS[(ki + 3) % 6]);
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    g_expect_mma = 0;
    g_views = 0;
}

/* The tensor-core decode (the split form of cl/attention_mma.cl, one warp of 16 query rows per
 * split of the keys, attention_decode_reduce combining the splits, the key norms of tra and
 * tda computed from the tiles): 2..16 query rows (4..16 for tra and tda) against
 * a few hundred keys (several splits, a partial last tile), every kind, bf16, f16 and f32 at
 * precision tf32, against the reference (and, for one case per kind, the prefill rows of the
 * same inputs); one case per kind on other tiles (16 or 32 keys, three K stages, other split
 * counts). */
static void test_mma_decode(void **state)
{
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = g_expect_mma_decode = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    static const struct { int tq, T, d, dv; layout lay; tdacl_dtype dt; const char *force; } cases[] = {
        {2, 300, 64, 64, LAYOUT_BHTD, TDACL_BF16, NULL},
        {16, 200, 32, 40, LAYOUT_BTHD, TDACL_F16, "BN=32 KSTAGES=3 WAVES=2"},
        {5, 150, 64, 24, LAYOUT_FUSED, TDACL_F32, "BN=16 KSTAGES=2 WAVES=32"}, /* tf32; element loads */
    };
    for (int ki = 0; ki < 5; ki++)
        for (int s = 0; s < 3; s++) {
            if (s == 2 - ki % 2 && ki != 2) continue; /* two cases per kind (all three for tra) */
            attn_case c = make_case(KINDS[ki], VAR_TINY_BF16, cases[s].T, cases[s].T, -1);
            c.d = cases[s].d, c.dv = cases[s].dv, c.lay = cases[s].lay;
            c.dtype = c.odtype = cases[s].dt;
            if (c.dtype == TDACL_F32) c.precision = TDACL_PRECISION_TF32;
            c.B = 1, c.H = 2;
            c.seed += 31 * (uint64_t)s;
            apply_pset(&c, &PSETS[(ki + s + 2) % 6]);
            /* the threshold kinds take the matrix units from 4 rows (test_registry) */
            const int threshold = KINDS[ki] == TDACL_ATTN_TRA || KINDS[ki] == TDACL_ATTN_TDA;
            const int tq = threshold && cases[s].tq < 4 ? 4 : cases[s].tq;
            check_decode_rows(state, &c, tq, (ki + s) % 2, g_expect_mma ? cases[s].force : NULL, s == 0);
        }
    g_expect_mma = g_expect_mma_decode = 0;
}

/* Scores that rise along the keys: every q row gains 2 u and key j gains 0.3 j u (u a unit
 * vector), so with scale 1/sqrt(32) a row's scores climb about 0.1 a key, 30 over 300 keys:
 * the row maxima pass the tensor-core kernel's lazy softmax reference (RESCALE_SLACK, 8 in
 * log2 units) many times after o and the sums hold weight, and each time they must be
 * rescaled (a kernel that skipped the rescale of o, of l or of the dropped sum fails here). */
static void rising_scores(problem *pb)
{
    const attn_case *c = &pb->c;
    const double u = 1.0 / sqrt((double)c->d);
    for (int v = 0; v < 2; v++) {
        double *q = v ? pb->q2 : pb->q, *k = v ? pb->k2 : pb->k;
        if (!q) continue;
        for (size_t i = 0; i < (size_t)c->B * c->H * c->Tq; i++)
            for (int e = 0; e < c->d; e++)
                q[i * c->d + e] = to_storage(input_values(c), q[i * c->d + e] + 2.0 * (e % 2 ? -u : u));
        for (size_t i = 0; i < (size_t)c->B * c->H * c->Tk; i++)
            for (int e = 0; e < c->d; e++)
                k[i * c->d + e] = to_storage(input_values(c), k[i * c->d + e] + 0.3 * (double)(i % c->Tk) * (e % 2 ? -u : u));
    }
}

/* The tensor-core kernel's lazy softmax reference maximum, with rising scores (rising_scores):
 * softmax on the default and on 16-key tiles and with f16 weights, diff_softmax, Top-theta
 * pre-softmax with exact and exp-threshold SDC and post-softmax (its row statistics launch
 * too), and the split decode of the last rows. */
static void test_mma_rescale(void **state)
{
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    g_edit_inputs = rising_scores;
    static const struct { tdacl_attention_kind kind; int post; tdacl_sdc sdc; const char *force; tdacl_dtype dt; } cs[] = {
        {TDACL_ATTN_SOFTMAX, 0, TDACL_SDC_NONE, NULL, TDACL_BF16},
        {TDACL_ATTN_SOFTMAX, 0, TDACL_SDC_NONE, "BN=16 KSTAGES=2", TDACL_BF16},
        /* f16 weights overflow past 2^16: a reference left more than 16 below the maximum fails */
        {TDACL_ATTN_SOFTMAX, 0, TDACL_SDC_NONE, NULL, TDACL_F16},
        {TDACL_ATTN_DIFF_SOFTMAX, 0, TDACL_SDC_NONE, NULL, TDACL_BF16},
        {TDACL_ATTN_TOPK_THETA, 0, TDACL_SDC_EXACT, NULL, TDACL_BF16},
        {TDACL_ATTN_TOPK_THETA, 0, TDACL_SDC_EXP_THRESHOLD, NULL, TDACL_BF16},
        {TDACL_ATTN_TOPK_THETA, 1, TDACL_SDC_NONE, NULL, TDACL_BF16},
    };
    for (int i = 0; i < 7; i++) {
        attn_case c = make_case(cs[i].kind, VAR_TINY_BF16, 300, 300, -1);
        c.H = 1, c.dtype = c.odtype = cs[i].dt;
        c.theta_post = cs[i].post, c.sdc = cs[i].sdc, c.vmc = 0, c.keep = 0.3;
        if (g_expect_mma) c.force = cs[i].force;
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    attn_case c = make_case(TDACL_ATTN_SOFTMAX, VAR_TINY_BF16, 300, 300, -1);
    c.H = 1;
    g_expect_mma_decode = g_expect_mma;
    check_decode_rows(state, &c, 4, 0, NULL, 0);
    g_edit_inputs = NULL;
    g_expect_mma = g_expect_mma_decode = 0;
}

/* tra's and tda's weights on the tensor cores, formed on tiles no mask touches only in warps
 * whose cut reaches 0 (LAZY_W): 300 keys, so that most tiles are whole, at beta 2 and at beta
 * 1 normalised (about one survivor a warp's tile, just past its threshold: a cut set too high
 * loses it) and at beta 1 on raw dot products (the cut without key norms), outputs and
 * survivor counts against the reference.  Then a NaN in one q row (one key row) must make that
 * row (the rows that see that key) NaN, also where the rest of the warp has no survivor: tra at
 * 300 keys, rela (which forms its weights at once) and tda at 70.  The debug log names the form
 * the host chose by beta (-DLAZY): lazy at beta >= 1, at once at beta 0.5. */
static char g_weights_log[512];
static void capture_weights_log(tdacl_log_level level, const char *message, void *user)
{
    (void)level, (void)user;
    const char *w = strstr(message, "weights formed");
    if (w) snprintf(g_weights_log, sizeof g_weights_log, "%s", w);
}

static void test_mma_lazy_weights(void **state)
{
    tdacl_device_info info;
    CHECK_OK(ctx_of(state), tdacl_context_get_info(ctx_of(state), &info));
    const char *emu = getenv("TDACL_MMA_EMULATE");
    g_expect_mma = info.nv_cc_major >= 8 || (emu && *emu && strcmp(emu, "0"));
    /* tra, then tda (one running maximum over both views' cuts) */
    for (int i = 0; i < 6; i++) {
        attn_case c = make_case(i < 3 ? TDACL_ATTN_TRA : TDACL_ATTN_TDA, VAR_TINY_BF16, 300, 300, -1);
        c.H = 2;
        apply_pset(&c, &PSETS[i % 3 == 0 ? 3 : 4]);
        /* beta 1 normalised: tau is 3.4 standard deviations of the cosines at 300 keys, so a
         * warp's tile holds about one survivor, just past its threshold */
        if (i % 3 == 2) c.normalize = 1;
        g_weights_log[0] = 0;
        if (i == 0) tdacl_log_set_callback(capture_weights_log, NULL, TDACL_LOG_DEBUG);
        check_case(state, &c, TDACL_PATH_PREFILL);
        if (i == 0) {
            tdacl_log_set_callback(NULL, NULL, -1);
            if (g_expect_mma) assert_non_null(strstr(g_weights_log, "only in warps that have one (beta >= 1)"));
        }
    }
    { /* beta 0.5: the weights are formed at once */
        attn_case c = make_case(TDACL_ATTN_TRA, VAR_TINY_BF16, 70, 70, -1);
        apply_pset(&c, &PSETS[1]);
        g_weights_log[0] = 0;
        tdacl_log_set_callback(capture_weights_log, NULL, TDACL_LOG_DEBUG);
        check_case(state, &c, TDACL_PATH_PREFILL);
        tdacl_log_set_callback(NULL, NULL, -1);
        if (g_expect_mma) assert_non_null(strstr(g_weights_log, "formed at once (beta < 1)"));
    }
    static const tdacl_attention_kind sparse[3] = {TDACL_ATTN_RELA, TDACL_ATTN_TRA, TDACL_ATTN_TDA};
    for (int ki = 0; ki < 3; ki++)
        for (int what = 0; what < 2; what++) { /* 0: q row 40, 1: key row 50 */
            const int T = sparse[ki] == TDACL_ATTN_TRA ? 300 : 70;
            attn_case t = make_case(sparse[ki], VAR_TINY_BF16, T, T, -1);
            apply_pset(&t, &PSETS[3]); /* beta 2 */
            check_poisoned_row(state, &t, what, 1, what ? 50 : 40);
        }
    g_expect_mma = 0;
}

/* The AMD and Intel bodies of the fragment layer (cl/mma_units.cl) with their instructions
 * emulated from the vendors' documented lane layouts: every kind through each body, on the
 * shapes of test_mma_variant (bf16 and f16, rows and keys past the tiles, padded rows), so a
 * loader that puts an element in the wrong lane or register shows as a wrong output.  The
 * MFMA body also takes its two-warp skipping groups (a 64-lane wave) here. */
static void test_mma_units(void **state)
{
    static const char *const bodies[] = {"dpas8", "dpas16", "mfma", "wmma"};
    for (int i = 0; i < 4; i++) {
        setenv("TDACL_MMA_EMULATE", bodies[i], 1);
        mma_shapes(state, 0, 2, 1);
    }
    unsetenv("TDACL_MMA_EMULATE");
}

/* The smallest mma case per kind, for the Oclgrind runs of the portable fragment body and
 * of the emulated AMD/Intel bodies (TDACL_MMA_EMULATE names the body); f32 inputs when
 * TDACL_PRECISION=tf32 (fp32 tiles). */
static void test_mma_tiny(void **state)
{
    const char *emu = getenv("TDACL_MMA_EMULATE"), *prec = getenv("TDACL_PRECISION");
    const int tf32 = prec && !strcmp(prec, "tf32");
    g_expect_mma = emu && *emu && strcmp(emu, "0");
    /* each kind in a context of its own: under Oclgrind, a launch of one mma program followed
     * by another in the same context (rela, then tra) draws "uninitialized value" reports in
     * the second that no order of one kind per context reproduces; see bench/results/README.md */
    /* the five kinds, then topk_theta (pre-softmax, SDC exact), then through the portable body
     * entmax (alpha 1.5: its threshold pass keeps scores in local memory).  The vendor bodies'
     * runs take, for time, the three ways the kernel drives the fragment layer: one view
     * (softmax), the sparse kinds' per-warp skipping (tra) and two views (tda); every kind
     * through every body is test_mma_units' (PoCL) */
    const int vendor = emulates_vendor_body(emu);
    const int nkinds = emu && !strcmp(emu, "1") ? 7 : 6;
    for (int ki = 0; ki < nkinds; ki++) {
        if (vendor && ki != 0 && ki != 2 && ki != 3) continue;
        tdacl_context *own = NULL;
        CHECK_OK(NULL, tdacl_context_create(NULL, &own));
        void *own_state = own;
        attn_case c = make_case(ki < 5 ? KINDS[ki] : ki == 5 ? TDACL_ATTN_TOPK_THETA : TDACL_ATTN_ENTMAX, VAR_TINY_BF16, 17,
                                17, -1);
        c.d = 32, c.dv = 32, c.B = 1, c.H = 1;
        if (tf32) c.dtype = c.odtype = TDACL_F32, c.precision = TDACL_PRECISION_TF32;
        apply_pset(&c, &PSETS[(ki + 1) % 6]);
        if (ki == 5) c.theta_post = 0, c.sdc = TDACL_SDC_EXACT, c.vmc = 0, c.norm = TDACL_NORM_NONE, c.gain = 0;
        /* softmax on one K and one V buffer, over two key tiles: the split waits' barriers.  The
         * vendor bodies' runs take two warps of one m-tile (32 rows for the 17, and the MFMA
         * body's two-warp group): their emulated instructions cost the simulator a minute a
         * launch at the default four warps of two m-tiles, mostly on padding rows */
        if (g_expect_mma && ki == 0) c.force = vendor ? "KSTAGES=1 BN=16 NWARPS=2 MT=1" : "KSTAGES=1 BN=16";
        else if (vendor) c.force = "BN=16 NWARPS=2 MT=1";
        /* tda and diff_softmax also one view a launch through the portable body
         * (attention.mma_views: tda's combine kernel; diff_softmax's view 2 combining in its
         * epilogue, on a tile whose V region holds 16 of the 32 rows: two rounds, the second
         * short) */
        else if (g_expect_mma && ki == 4) c.force = "BN=16 NWARPS=2 MT=1 KSTAGES=2";
        g_views = g_expect_mma && !vendor && (ki == 3 || ki == 4);
        check_case(&own_state, &c, TDACL_PATH_PREFILL);
        g_views = 0;
        tdacl_context_destroy(own);
    }
    g_expect_mma = 0;
}

/* ---- decode ------------------------------------------------------------------------------------- */

/* Decode rows per kind on A: Tq = 1 everywhere and one longer step, so the padded row
 * counts 1, 4, 8 and 16 all occur (2 comes from test_decode_other_variants). */
static void test_decode_matches_prefill(void **state)
{
    static const int tqs[5][3] = {{1, 16, 0}, {1, 7, 0}, {1, 3, 0}, {1, 9, 0}, {1, 5, 0}};
    for (int ki = 0; ki < 5; ki++)
        for (int s = 0; s < 3 && tqs[ki][s]; s++) {
            int T = s == 0 ? 300 : 65; /* 300 keys: several splits and chunks per split */
            attn_case c = make_case(KINDS[ki], VAR_A, T, T, -1);
            apply_pset(&c, &PSETS[(ki + 2 * s + 1) % 6]);
            check_decode(state, &c, tqs[ki][s], s % 2, NULL);
        }
}

static void test_decode_other_variants(void **state)
{
    /* C: bf16, q rows of a fused buffer, unaligned dv = 50 (decode rows against the
     * reference; decode against prefill rows is test_decode_matches_prefill's) */
    for (int ki = 0; ki < 5; ki++) {
        attn_case c = make_case(KINDS[ki], VAR_C, 65, 65, -1);
        apply_pset(&c, &PSETS[(ki + 4) % 6]);
        check_decode_rows(state, &c, 2, ki % 2, NULL, 0);
    }
    /* a long KV cache (4096 keys; B*H = 8 leaves one split of many key rounds on a small
     * device) against the reference directly: the decode step of a real model, its split
     * and round bookkeeping and its counters.  Row counts shared with
     * test_decode_matches_prefill, so no extra compile. */
    static const struct { tdacl_attention_kind kind; int tq; int ps; } longkv[] = {
        {TDACL_ATTN_SOFTMAX, 1, 5}, {TDACL_ATTN_TRA, 3, 1}, {TDACL_ATTN_TDA, 1, 3}};
    for (size_t i = 0; i < sizeof longkv / sizeof longkv[0]; i++) {
        attn_case c = make_case(longkv[i].kind, VAR_A, longkv[i].tq, 4096, -1);
        c.B = 2, c.H = 4;
        apply_pset(&c, &PSETS[longkv[i].ps]);
        c.path = TDACL_PATH_AUTO; /* Tq <= 16 and Tk >= 4 Tq: AUTO takes decode */
        check_case(state, &c, TDACL_PATH_DECODE);
    }
    /* bf16 on 16-byte rows: the chunk held as partial dot products (PARTIAL in
     * cl/attention_decode.cl) for every kind, one row and, for tda, 5 rows (9 partial slots
     * per view, the most that path takes at d = 32) */
    for (int ki = 0; ki < 5; ki++) {
        attn_case c = make_case(KINDS[ki], VAR_TINY_BF16, KINDS[ki] == TDACL_ATTN_TDA ? 5 : 1, 300, -1);
        apply_pset(&c, &PSETS[(ki + 1) % 6]);
        c.path = TDACL_PATH_DECODE; /* against the reference directly: no prefill program to build */
        check_case(state, &c, TDACL_PATH_DECODE);
    }
    /* D: f16, d = 128, dv = 96 (more columns than the reduce kernel's 64 work-items) */
    static const struct { tdacl_attention_kind kind; int tq; } more[] = {{TDACL_ATTN_TRA, 4}, {TDACL_ATTN_SOFTMAX, 1}};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        attn_case c = make_case(more[i].kind, VAR_D, 300, 300, -1);
        apply_pset(&c, &PSETS[(i + 3) % 6]);
        check_decode_rows(state, &c, more[i].tq, (int)i % 2, NULL, 0);
    }
}

/* ---- tiles other than the device's tuned ones --------------------------------------------------- */

/* The tiles tuned for PoCL (32 x 32 with 4 x 4 per work-item, when this was written) are
 * not the ones GPUs use (the generic ladder starts at 64 x 32 with 8 x 4).  Forcing two through the
 * tuner's entry point checks the index arithmetic of other shapes: V chunks smaller than
 * the key tile (VC < BN) with an unrolled head-dim loop, and 8 x 8 tiles of 4 work-items
 * that straddle every boundary.  The two-view kinds run the code of the one-view ones
 * (sparse mask and V chunks; online softmax) plus their second view, so they stand for
 * all five here; each forced tile is a compile of its own. */
static void forced_tiles(void **state, int first, int count, int with_decode)
{
    /* the other parameters (prefetch and the like) keep their tuned values */
#define BIG "BM=64 BN=32 TM=8 TN=4 VC=16 KUNROLL=2"
#define TINY "BM=8 BN=8 TM=4 TN=4 VC=4 KUNROLL=1"
    /* gdtype: the BIG cases carry a bf16 rms gain on f32 data (its own dtype macro), both of
     * them, so that tile, by far the slowest to JIT on PoCL, is compiled once */
    static const struct { tdacl_attention_kind kind; const char *tiles; int tq, tk, ps; tdacl_dtype gdtype; } cases[] = {
        {TDACL_ATTN_TDA, BIG, 65, 65, 2, TDACL_BF16},         {TDACL_ATTN_TDA, BIG, 17, 65, 5, TDACL_BF16},
        {TDACL_ATTN_DIFF_SOFTMAX, TINY, 65, 65, 1, TDACL_F32}, {TDACL_ATTN_DIFF_SOFTMAX, TINY, 30, 65, 5, TDACL_F32},
        /* the generic ladder's last tile: one work-item does everything (it once left three of
         * the four statistics counters unzeroed) */
        {TDACL_ATTN_TRA, "BM=4 BN=4 TM=4 TN=4 VC=4 KUNROLL=1", 23, 23, 2, TDACL_F32}};
#undef BIG
#undef TINY
    for (int i = first; i < first + count; i++) {
        attn_case c = make_case(cases[i].kind, VAR_A, cases[i].tq, cases[i].tk, -1);
        apply_pset(&c, &PSETS[cases[i].ps]);
        c.force = cases[i].tiles;
        c.gdtype = cases[i].gdtype;
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
    if (!with_decode) return;
    attn_case c = make_case(TDACL_ATTN_TDA, VAR_A, 300, 300, -1);
    apply_pset(&c, &PSETS[1]);
    check_decode(state, &c, 9, 1, "NTD=32 WAVES=32"); /* many small splits */
}

/* The tiles the AMD and Intel class defaults use (src/ops/spaces.c, chosen from the offline
 * compilers' reports), every kind on one of them: 256 work-items of 4 x 4 with BN = 64 and no
 * register prefetch; 128 work-items of 4 x 4 for the two-view kinds; 64 for Intel's. */
static void test_class_tiles(void **state)
{
    /* d = 64 as the class defaults are chosen for (BN/TN column groups must divide dv/4); the
     * two-view tile at d = 32, which fits the 48 KiB of local memory NVIDIA GPUs have too */
    static const struct { tdacl_attention_kind kind; const char *tiles; int tq, tk, ps, d, dv; } cases[] = {
        {TDACL_ATTN_SOFTMAX, "BM=64 BN=64 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=0 SEQV=0", 130, 130, 1, 64, 64},
        {TDACL_ATTN_TRA, "BM=64 BN=64 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=0 SEQV=0", 65, 129, 2, 64, 64},
        {TDACL_ATTN_RELA, "BM=64 BN=64 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=0 SEQV=0", 17, 200, 3, 64, 64},
        {TDACL_ATTN_TDA, "BM=64 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 100, 100, 5, 32, 64},
        {TDACL_ATTN_DIFF_SOFTMAX, "BM=32 BN=32 TM=4 TN=4 VC=32 KUNROLL=1 PREFETCH=1 SEQV=0", 70, 90, 4, 64, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attn_case c = make_case(cases[i].kind, VAR_A, cases[i].tq, cases[i].tk, -1);
        c.d = cases[i].d, c.dv = cases[i].dv;
        apply_pset(&c, &PSETS[cases[i].ps]);
        c.force = cases[i].tiles;
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
}

/* the big tile alone (one program, the slowest to compile), then the rest: two ctest parts */
static void test_forced_tiles_big(void **state) { forced_tiles(state, 0, 2, 0); }
static void test_forced_tiles(void **state) { forced_tiles(state, 2, 2, 1); }

/* The generic ladders' smallest entries, which an unknown device may fall back to: the
 * one-work-item prefill tile (it left three of the four statistics counters unzeroed) and
 * a 16-work-item decode group for tda's 2 views x 16 padded query rows (rows past the 16th
 * were never normalised). */
static void test_ladder_ends(void **state)
{
    forced_tiles(state, 4, 1, 0);
    attn_case c = make_case(TDACL_ATTN_TDA, VAR_A, 300, 300, -1);
    apply_pset(&c, &PSETS[1]);
    check_decode(state, &c, 9, 1, "NTD=16 WAVES=4");
}

/* docs/spec.md section 1: with norm = none, tra and tda must equal the authors' Triton kernels: kappa 1, no
 * 1/sqrt(d) scale, q and k L2-normalised outside the kernel for TDA (here: normalize on),
 * raw dot products for their TRA (normalize off), lambda clamped, no Norm.  The library
 * runs on its documented defaults (tdacl_attention_desc_init: beta 1, kappa 1, p 2,
 * lambda 0.5, scale NAN); the reference is told the Triton values explicitly, scale 1
 * included, so a default that drifted from the paper's setting fails here. */
static void test_authors_triton_semantics(void **state)
{
    tdacl_attention_desc defaults;
    tdacl_attention_desc_init(&defaults);
    assert_int_equal(defaults.kind, TDACL_ATTN_TRA);
    assert_true(defaults.beta == 1.0f && defaults.kappa == 1.0f && defaults.power == 2.0f);
    assert_true(defaults.lambda == 0.5f && isnan(defaults.scale) && defaults.normalize == 1);
    assert_true(defaults.norm == TDACL_NORM_NONE && defaults.out_scale == 1.0f && defaults.offset == -1);
    static const struct { tdacl_attention_kind kind; int normalize; } runs[] = {{TDACL_ATTN_TRA, 0}, {TDACL_ATTN_TDA, 1}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        attn_case c = make_case(runs[i].kind, VAR_A, 65, 65, -1);
        c.beta = defaults.beta, c.kappa = defaults.kappa, c.power = defaults.power, c.lambda = defaults.lambda;
        c.scale = defaults.scale, c.norm = defaults.norm, c.out_scale = defaults.out_scale;
        c.normalize = runs[i].normalize;
        c.ref_scale = 1.0;
        check_case(state, &c, TDACL_PATH_PREFILL);
    }
}

/* ---- edge cases ------------------------------------------------------------------------------------ */

/* A threshold above every score: all weights zero, the output exactly 0 with and without
 * rms Norm (0 / sqrt(0 + eps) = 0, never NaN), and every tile skips its V work.  kappa 0.5
 * puts a threshold on position 0 too. */
static void test_no_survivors(void **state)
{
    static const tdacl_attention_kind kinds[2] = {TDACL_ATTN_TRA, TDACL_ATTN_TDA};
    for (int ki = 0; ki < 2; ki++)
        for (int norm = 0; norm < 2; norm++) {
            attn_case c = make_case(kinds[ki], VAR_A, 65, 65, -1);
            c.beta = 50.0f, c.kappa = 0.5f;
            c.norm = norm ? TDACL_NORM_RMS : TDACL_NORM_NONE, c.gain = norm;
            problem pb;
            problem_generate(&pb, &c);
            ref_out r;
            ref_compute(&pb, c.Tq, -1, pb.q, pb.q2, &r, NULL);
            assert_int_equal(r.counts.zero_weights, r.counts.visible_pairs);
            dev_problem dp;
            dev_upload(ctx_of(state), &pb, &dp);
            size_t n = (size_t)c.B * c.H * c.Tq * c.dv, nd = (size_t)c.B * c.H * 3 * c.dv;
            double *got = xcalloc(n, sizeof(double));
            tdacl_attention_stats st;
            dev_run(ctx_of(state), &c, &dp, 0, c.Tq, -1, TDACL_PATH_PREFILL, NULL, got, &st);
            for (size_t i = 0; i < n; i++)
                if (got[i] != 0.0) fail_msg("%s norm %d: output %zu is %g, not 0", kind_name(c.kind), norm, i, got[i]);
            check_stats(&c, "prefill", &st, &r.counts, TDACL_PATH_PREFILL);
            assert_true(st.tiles_visited > 0);
            /* decode of the last rows (row counts shared with test_decode_matches_prefill) */
            int tq = c.kind == TDACL_ATTN_TRA ? 3 : 1;
            nd = (size_t)c.B * c.H * tq * c.dv;
            dev_run(ctx_of(state), &c, &dp, c.Tq - tq, tq, -1, TDACL_PATH_DECODE, NULL, got, &st);
            for (size_t i = 0; i < nd; i++)
                if (got[i] != 0.0) fail_msg("%s norm %d decode: output %zu is %g, not 0", kind_name(c.kind), norm, i, got[i]);
            assert_int_equal(st.zero_weights, st.visible_pairs);
            assert_int_equal(st.survivors[0] + st.survivors[1], 0);
            assert_int_equal(st.tiles_skipped_v, st.tiles_visited);
            free(got);
            ref_free(&r);
            dev_free(&dp);
            problem_free(&pb);
        }
}

/* Tq = 0 is a no-op that succeeds, on both paths, and reports no pairs. */
static void test_empty_query(void **state)
{
    tdacl_context *ctx = ctx_of(state);
    for (int ki = 0; ki < 5; ki++)
        for (int path = TDACL_PATH_AUTO; path <= TDACL_PATH_DECODE; path++) {
            int64_t qs[4] = {2, 2, 0, 32}, ks[4] = {2, 2, 9, 32}, vs[4] = {2, 2, 9, 16}, os[4] = {2, 2, 0, 16};
            tdacl_tensor *q = new_tensor(ctx, TDACL_F32, 4, qs), *k = new_tensor(ctx, TDACL_F32, 4, ks);
            tdacl_tensor *v = new_tensor(ctx, TDACL_F32, 4, vs), *o = new_tensor(ctx, TDACL_F32, 4, os);
            tdacl_tensor *q2 = two_views(KINDS[ki]) ? new_tensor(ctx, TDACL_F32, 4, qs) : NULL;
            tdacl_tensor *k2 = two_views(KINDS[ki]) ? new_tensor(ctx, TDACL_F32, 4, ks) : NULL;
            tdacl_attention_desc desc;
            tdacl_attention_desc_init(&desc);
            desc.kind = KINDS[ki], desc.path = (tdacl_attention_path)path, desc.want_stats = 1;
            tdacl_attention_tensors ts = {q, k, v, q2, k2, NULL, o, NULL, NULL, NULL, NULL, NULL};
            tdacl_attention_stats st;
            memset(&st, 0xab, sizeof st);
            CHECK_OK(ctx, tdacl_attention(ctx, &desc, &ts, &st));
            assert_int_equal(st.visible_pairs, 0);
            assert_int_equal(st.zero_weights, 0);
            assert_true(st.sparsity == 0.0);
            tdacl_tensor_destroy(q), tdacl_tensor_destroy(k), tdacl_tensor_destroy(v), tdacl_tensor_destroy(o);
            tdacl_tensor_destroy(q2), tdacl_tensor_destroy(k2);
        }
}

/* NaN inputs never crash.  What comes out (kernel semantics, both paths):
 *  - a NaN anywhere in q row i makes output row i NaN in every column (its scores are NaN;
 *    NaN passes the rectifier and the softmax maximum); every other row and head is exact;
 *  - a NaN in key row j makes every row that sees j (i.e. i >= j) NaN; rows i < j and other
 *    heads are exact (masked keys get score -inf before any weight is formed);
 *  - a NaN in v row j reaches only its own head: rows with a non-zero weight on j are NaN,
 *    and rows of the same tile with a zero weight may be too (0 * NaN in a dense tile), so
 *    only the other heads are asserted. */
static void test_nan_inputs(void **state)
{
    tdacl_context *ctx = ctx_of(state);
    static const tdacl_attention_kind kinds[5] = {TDACL_ATTN_TRA, TDACL_ATTN_SOFTMAX, TDACL_ATTN_TDA,
                                                  TDACL_ATTN_ENTMAX, TDACL_ATTN_TOPK_THETA};
    for (int ki = 0; ki < 5; ki++)
        for (int what = 0; what < 3; what++) /* 0: q, 1: k, 2: v */
            for (int dec = 0; dec < 2; dec++) {
                attn_case c = make_case(kinds[ki], VAR_A, 17, 17, -1);
                c.beta = 0.5f;
                /* decode row counts as in test_decode_matches_prefill (no extra compile) */
                const int H = c.H, T = 17, tq = !dec ? T : c.kind == TDACL_ATTN_TRA ? 3 : 1, r0 = T - tq;
                const int j = 9, hb = 1; /* poisoned key row and head */
                problem pb;
                problem_generate(&pb, &c);
                ref_out r;
                ref_compute(&pb, T, 0, pb.q, pb.q2, &r, NULL);
                double *tol = xcalloc((size_t)c.B * H * T * c.dv, sizeof(double));
                tolerance(&c, T, &r, NULL, tol);
                /* poison element 3 of: the last q row (a decode row too), key row j, or v row j */
                int prow = what == 0 ? T - 1 : j;
                double *x = what == 0 ? pb.q : what == 1 ? pb.k : pb.v;
                int D = what == 2 ? c.dv : c.d, rows = what == 0 ? c.Tq : c.Tk;
                x[((size_t)hb * rows + prow) * D + 3] = NAN;
                dev_problem dp;
                dev_upload(ctx, &pb, &dp);
                double *got = xcalloc((size_t)c.B * H * tq * c.dv, sizeof(double));
                tdacl_attention_stats st;
                dev_run(ctx, &c, &dp, r0, tq, -1, dec ? TDACL_PATH_DECODE : TDACL_PATH_PREFILL, NULL, got, &st);
                for (int bh = 0; bh < c.B * H; bh++)
                    for (int i = 0; i < tq; i++) {
                        int row = r0 + i; /* absolute query row */
                        int nan_row = bh == hb && ((what == 0 && row == prow) || (what == 1 && row >= j));
                        int exact = bh != hb || (what == 0 && row != prow) || (what == 1 && row < j);
                        for (int e = 0; e < c.dv; e++) {
                            double g = got[((size_t)bh * tq + i) * c.dv + e];
                            size_t at = ((size_t)bh * T + row) * c.dv + e;
                            if (nan_row && !isnan(g))
                                fail_msg("%s NaN in %s, %s: head %d row %d col %d is %g, expected NaN", kind_name(c.kind),
                                         what == 0 ? "q" : what == 1 ? "k" : "v", dec ? "decode" : "prefill", bh, row, e, g);
                            if (exact && !(fabs(g - r.out[at]) <= tol[at]))
                                fail_msg("%s NaN in %s, %s: unaffected head %d row %d col %d is %g, want %g",
                                         kind_name(c.kind), what == 0 ? "q" : what == 1 ? "k" : "v",
                                         dec ? "decode" : "prefill", bh, row, e, g, r.out[at]);
                        }
                    }
                free(got), free(tol);
                ref_free(&r);
                dev_free(&dp);
                problem_free(&pb);
            }
}

/* Invalid descriptors and mismatched tensors: the documented status, a message naming the
 * field, and an untouched output. */
static void expect_error(tdacl_context *ctx, const tdacl_attention_desc *desc, const tdacl_attention_tensors *ts,
                         tdacl_status want, const char *field)
{
    tdacl_status st = tdacl_attention(ctx, desc, ts, NULL);
    if (st != want)
        fail_msg("expected %s naming '%s', got %s: %s", tdacl_status_str(want), field, tdacl_status_str(st),
                 tdacl_last_error(ctx));
    if (!strstr(tdacl_last_error(ctx), field))
        fail_msg("error message '%s' does not name '%s'", tdacl_last_error(ctx), field);
}

static void test_invalid_arguments(void **state)
{
    tdacl_context *ctx = ctx_of(state);
    int64_t qs[4] = {1, 2, 8, 32}, vs[4] = {1, 2, 8, 16}, q17[4] = {1, 2, 17, 32}, o17[4] = {1, 2, 17, 16};
    int64_t kbad[4] = {1, 2, 8, 40}, vbad[4] = {1, 2, 7, 16}, obad[4] = {1, 2, 8, 17}, g5[1] = {5}, g16[1] = {16};
    tdacl_tensor *q = new_tensor(ctx, TDACL_F32, 4, qs), *k = new_tensor(ctx, TDACL_F32, 4, qs);
    tdacl_tensor *v = new_tensor(ctx, TDACL_F32, 4, vs), *o = new_tensor(ctx, TDACL_F32, 4, vs);
    tdacl_tensor *k_d40 = new_tensor(ctx, TDACL_F32, 4, kbad), *v_t7 = new_tensor(ctx, TDACL_F32, 4, vbad);
    tdacl_tensor *o_dv17 = new_tensor(ctx, TDACL_F32, 4, obad), *v_bf16 = new_tensor(ctx, TDACL_BF16, 4, vs);
    tdacl_tensor *q_t17 = new_tensor(ctx, TDACL_F32, 4, q17), *o_t17 = new_tensor(ctx, TDACL_F32, 4, o17);
    tdacl_tensor *gain5 = new_tensor(ctx, TDACL_F32, 1, g5), *gain16 = new_tensor(ctx, TDACL_F32, 1, g16);
    int64_t ths[2] = {2, 5}, th4s[2] = {2, 4}, vss[3] = {1, 2, 16};
    tdacl_tensor *th = new_tensor(ctx, TDACL_F32, 2, ths), *th_bf16 = new_tensor(ctx, TDACL_BF16, 2, ths);
    tdacl_tensor *th4 = new_tensor(ctx, TDACL_F32, 2, th4s), *vsum = new_tensor(ctx, TDACL_F32, 3, vss);
    tdacl_tensor *o_alias = NULL; /* the storage of v, seen as an output */
    CHECK_OK(ctx, tdacl_tensor_view(v, 4, vs, (int64_t[]){256, 128, 16, 1}, 0, &o_alias));
    /* views the kernels cannot read (they take these from element 0): a gain at element 16 of
     * a [32], thresholds at row 1 of a [3, 5] */
    int64_t g32[1] = {32}, th3s[2] = {3, 5};
    tdacl_tensor *gain32 = new_tensor(ctx, TDACL_F32, 1, g32), *th3 = new_tensor(ctx, TDACL_F32, 2, th3s);
    tdacl_tensor *gain_at16 = NULL, *th_at5 = NULL;
    CHECK_OK(ctx, tdacl_tensor_view(gain32, 1, g16, (int64_t[]){1}, 16, &gain_at16));
    CHECK_OK(ctx, tdacl_tensor_view(th3, 2, ths, (int64_t[]){5, 1}, 5, &th_at5));
    float sentinel[256];
    for (int i = 0; i < 256; i++) sentinel[i] = 42.0f;
    CHECK_OK(ctx, tdacl_tensor_upload(o, sentinel, TDACL_F32, 256));

    tdacl_attention_desc base, d;
    tdacl_attention_desc_init(&base);
    base.kind = TDACL_ATTN_TRA;
    const tdacl_attention_tensors good = {q, k, v, NULL, NULL, NULL, o, NULL, NULL, NULL, NULL, NULL};
    tdacl_attention_tensors t;

#define FIELD_CASE(assign, status, field) \
    do {                                  \
        d = base;                         \
        t = good;                         \
        assign;                           \
        expect_error(ctx, &d, &t, status, field); \
    } while (0)
    FIELD_CASE(d.beta = -1.0f, TDACL_ERR_INVALID_ARGUMENT, "desc.beta");
    FIELD_CASE(d.beta = INFINITY, TDACL_ERR_INVALID_ARGUMENT, "desc.beta");
    FIELD_CASE(d.kappa = 0.0f, TDACL_ERR_INVALID_ARGUMENT, "desc.kappa");
    FIELD_CASE(d.power = 0.5f, TDACL_ERR_INVALID_ARGUMENT, "desc.power");
    FIELD_CASE(d.lambda = NAN, TDACL_ERR_INVALID_ARGUMENT, "desc.lambda");
    FIELD_CASE(d.scale = INFINITY, TDACL_ERR_INVALID_ARGUMENT, "desc.scale");
    FIELD_CASE(d.norm_eps = 0.0f, TDACL_ERR_INVALID_ARGUMENT, "desc.norm_eps");
    FIELD_CASE(d.out_scale = NAN, TDACL_ERR_INVALID_ARGUMENT, "desc.out_scale");
    FIELD_CASE(d.normalize = 2, TDACL_ERR_INVALID_ARGUMENT, "desc.normalize");
    FIELD_CASE(d.kind = (tdacl_attention_kind)7, TDACL_ERR_INVALID_ARGUMENT, "desc.kind");
    FIELD_CASE(d.norm = (tdacl_head_norm)3, TDACL_ERR_INVALID_ARGUMENT, "desc.norm");
    FIELD_CASE(d.offset = -2, TDACL_ERR_INVALID_ARGUMENT, "desc.offset");
    FIELD_CASE(d.path = (tdacl_attention_path)9, TDACL_ERR_INVALID_ARGUMENT, "desc.path");
    FIELD_CASE(t.k = k_d40, TDACL_ERR_SHAPE, "k.shape[3]");
    FIELD_CASE(t.v = v_t7, TDACL_ERR_SHAPE, "v.shape[2]");
    FIELD_CASE(t.out = o_dv17, TDACL_ERR_SHAPE, "out.shape[3]");
    FIELD_CASE(t.v = v_bf16, TDACL_ERR_DTYPE, "v is bf16");
    FIELD_CASE(t.k = NULL, TDACL_ERR_INVALID_ARGUMENT, "tensor k");
    FIELD_CASE(d.kind = TDACL_ATTN_TDA, TDACL_ERR_INVALID_ARGUMENT, "q2");
    FIELD_CASE((t.q2 = q, t.k2 = k), TDACL_ERR_INVALID_ARGUMENT, "q2/k2");
    FIELD_CASE(t.gain = gain5, TDACL_ERR_SHAPE, "gain");
    FIELD_CASE(t.gain = gain16, TDACL_ERR_INVALID_ARGUMENT, "desc.norm");
    FIELD_CASE((d.kind = TDACL_ATTN_ENTMAX, d.alpha = 1.0f), TDACL_ERR_INVALID_ARGUMENT, "desc.alpha");
    FIELD_CASE((d.kind = TDACL_ATTN_ENTMAX, d.alpha = NAN), TDACL_ERR_INVALID_ARGUMENT, "desc.alpha");
    FIELD_CASE((d.kind = TDACL_ATTN_ENTMAX, d.alpha = 9.0f), TDACL_ERR_INVALID_ARGUMENT, "desc.alpha");
    FIELD_CASE((d.kind = TDACL_ATTN_ENTMAX, d.temp_beta = INFINITY), TDACL_ERR_INVALID_ARGUMENT, "desc.temp_beta");
    FIELD_CASE((d.kind = TDACL_ATTN_ENTMAX, d.temp_gamma = NAN), TDACL_ERR_INVALID_ARGUMENT, "desc.temp_gamma");
    FIELD_CASE((d.kind = TDACL_ATTN_ENTMAX, t.temps = gain16), TDACL_ERR_SHAPE, "temps");
    FIELD_CASE(t.temps = gain16, TDACL_ERR_INVALID_ARGUMENT, "temps given but kind tra");
    /* topk_theta: its tables, its fields, and its tensors with other kinds */
    FIELD_CASE(d.kind = TDACL_ATTN_TOPK_THETA, TDACL_ERR_INVALID_ARGUMENT, "needs tensors.thresholds");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = gain16), TDACL_ERR_SHAPE, "thresholds must be");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th_bf16), TDACL_ERR_SHAPE, "thresholds must be");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.sdc = TDACL_SDC_OFFLINE), TDACL_ERR_INVALID_ARGUMENT,
               "needs tensors.sdc_log_mass");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.sdc = TDACL_SDC_OFFLINE, t.sdc_log_mass = th4),
               TDACL_ERR_SHAPE, "sdc_log_mass must be");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, t.sdc_log_mass = th), TDACL_ERR_INVALID_ARGUMENT,
               "desc.sdc is not offline");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.theta_post = 1, d.sdc = TDACL_SDC_EXACT),
               TDACL_ERR_INVALID_ARGUMENT, "pre-softmax thresholds only");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.theta_post = 2), TDACL_ERR_INVALID_ARGUMENT,
               "desc.theta_post");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.sdc = (tdacl_sdc)4), TDACL_ERR_INVALID_ARGUMENT,
               "desc.sdc");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.sdc_gamma = -1.0f), TDACL_ERR_INVALID_ARGUMENT,
               "desc.sdc_gamma");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.vmc = 3), TDACL_ERR_INVALID_ARGUMENT, "desc.vmc");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, t.v_sum = vsum), TDACL_ERR_INVALID_ARGUMENT,
               "desc.vmc is 0");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th, d.vmc = 1, t.v_sum = th), TDACL_ERR_SHAPE, "v_sum must be");
    FIELD_CASE(t.thresholds = th, TDACL_ERR_INVALID_ARGUMENT, "thresholds given but kind tra");
    FIELD_CASE(t.v_sum = vsum, TDACL_ERR_INVALID_ARGUMENT, "v_sum given but kind tra");
    FIELD_CASE((d.norm = TDACL_NORM_RMS, t.gain = gain_at16), TDACL_ERR_INVALID_ARGUMENT, "gain must be a contiguous tensor "
               "starting at element 0");
    FIELD_CASE((d.kind = TDACL_ATTN_TOPK_THETA, t.thresholds = th_at5), TDACL_ERR_INVALID_ARGUMENT,
               "thresholds must be a contiguous tensor starting at element 0 of its storage (a view at element 5");
    FIELD_CASE(t.out = o_alias, TDACL_ERR_INVALID_ARGUMENT, "overlaps");
    FIELD_CASE((t.q = q_t17, t.out = o_t17), TDACL_ERR_SHAPE, "offset");              /* Tq > Tk */
    FIELD_CASE((t.q = q_t17, t.out = o_t17, d.offset = 0, d.path = TDACL_PATH_DECODE), TDACL_ERR_INVALID_ARGUMENT,
               "Tq <= 16");
#undef FIELD_CASE
    assert_int_equal(tdacl_attention(NULL, &base, &good, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_int_equal(tdacl_attention(ctx, NULL, &good, NULL), TDACL_ERR_INVALID_ARGUMENT);
    assert_int_equal(tdacl_attention(ctx, &base, NULL, NULL), TDACL_ERR_INVALID_ARGUMENT);

    float after[256];
    CHECK_OK(ctx, tdacl_tensor_download(o, after, TDACL_F32, 256));
    assert_memory_equal(after, sentinel, sizeof after); /* no failed call wrote the output */
    tdacl_tensor *all[] = {q, k, v, o, k_d40, v_t7, o_dv17, v_bf16, q_t17, o_t17, gain5, gain16, o_alias, th, th_bf16, th4, vsum,
                           gain_at16, th_at5, gain32, th3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tdacl_tensor_destroy(all[i]);
}

/* The Oclgrind subset (TDACL_TEST_TINY): each kind once per path and dtype (topk_theta in f32),
 * T = 17, d = 32. */
static void test_tiny_subset(void **state)
{
    for (int ki = 0; ki < 6; ki++) {
        attn_case c = make_case(KINDS[ki], VAR_A, 17, 17, -1);
        c.B = 1;
        apply_pset(&c, &PSETS[(ki + 1) % 6]);
        check_decode(state, &c, 1, 1, NULL); /* prefill (all rows) and decode, f32 */
        attn_case b = make_case(KINDS[ki], VAR_TINY_BF16, 17, 17, -1);
        apply_pset(&b, &PSETS[(ki + 4) % 6]);
        check_decode(state, &b, 2, 0, NULL); /* bf16, token-major */
    }
    /* topk_theta, post-softmax with the mean V row (every V tile read) */
    attn_case c = make_case(TDACL_ATTN_TOPK_THETA, VAR_A, 17, 17, -1);
    c.B = 1, c.theta_post = 1, c.vmc = 1;
    check_decode(state, &c, 1, 1, NULL);
}

/* ---- main ------------------------------------------------------------------------------------------ */

static int group_setup(void **state)
{
    tdacl_context_desc cd;
    tdacl_context_desc_init(&cd);
    tdacl_context *ctx = NULL;
    tdacl_status st = tdacl_context_create(&cd, &ctx);
    if (st) {
        fprintf(stderr, "tdacl_context_create: %s\n", tdacl_last_error(NULL));
        return -1;
    }
    *state = ctx;
    return 0;
}

static int group_teardown(void **state)
{
    tdacl_context_destroy(ctx_of(state));
    return 0;
}

int main(int argc, char **argv)
{
    const char *env = getenv("TDACL_TEST_TINY");
    int tiny = env && *env && strcmp(env, "0") != 0;
    const char *part = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tiny")) tiny = 1;
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) cmocka_set_test_filter(argv[++i]); /* e.g. "*decode*" */
        if (!strcmp(argv[i], "--part") && i + 1 < argc) part = argv[++i];
    }
    const struct CMUnitTest full[] = {
        cmocka_unit_test(test_reference_by_hand),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_empty_query),
        cmocka_unit_test(test_variant_a_all_lengths),
        cmocka_unit_test(test_variant_b_token_major_d64),
        cmocka_unit_test(test_variant_c_bf16_fused_qkv_d80),
        cmocka_unit_test(test_variant_d_f16_d128),
        cmocka_unit_test(test_variant_d_f16_d128_tra),
        cmocka_unit_test(test_variant_d_f16_d128_two_views),
        cmocka_unit_test(test_decode_matches_prefill),
        cmocka_unit_test(test_decode_other_variants),
        cmocka_unit_test(test_forced_tiles_big),
        cmocka_unit_test(test_forced_tiles),
        cmocka_unit_test(test_ladder_ends),
        cmocka_unit_test(test_authors_triton_semantics),
        cmocka_unit_test(test_no_survivors),
        cmocka_unit_test(test_nan_inputs),
        cmocka_unit_test(test_mma_variant),
        cmocka_unit_test(test_mma_variant_wide),
        cmocka_unit_test(test_mma_units),
        cmocka_unit_test(test_mma_f32_bf16),
        cmocka_unit_test(test_mma_f32_tf32),
        cmocka_unit_test(test_mma_decode),
        cmocka_unit_test(test_mma_tiny),
        cmocka_unit_test(test_class_tiles),
        cmocka_unit_test(test_entmax_lengths),
        cmocka_unit_test(test_entmax_ties),
        cmocka_unit_test(test_entmax_decode),
        cmocka_unit_test(test_entmax_layouts),
        cmocka_unit_test(test_topk_lengths),
        cmocka_unit_test(test_topk_drop_all),
        cmocka_unit_test(test_topk_decode),
        cmocka_unit_test(test_topk_layouts),
        cmocka_unit_test(test_topk_mma),
        cmocka_unit_test(test_entmax_mma),
        cmocka_unit_test(test_mma_rescale),
        cmocka_unit_test(test_mma_lazy_weights),
        cmocka_unit_test(test_mma_views),
    };
    const struct CMUnitTest small[] = {
        cmocka_unit_test(test_reference_by_hand),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_empty_query),
        cmocka_unit_test(test_tiny_subset),
    };
    /* --part splits the suite for ctest (tests/CMakeLists.txt), so that each piece stays well
     * under five minutes on a cold 2-core machine and the pieces run side by side; the parts
     * cover `full` exactly once, in its order */
    static const struct { const char *name; int first, count; } parts[] = {
        {"basics", 0, 4}, {"layouts", 4, 1}, {"layouts-bf16", 5, 1}, {"layouts-f16", 6, 1}, {"layouts-f16-tra", 7, 1},
        {"layouts-f16-two-views", 8, 1}, {"decode", 9, 2}, {"forced-big", 11, 1}, {"semantics", 12, 1},
        {"ladder-ends", 13, 1}, {"semantics-edge", 14, 3}, {"mma", 17, 1}, {"mma-wide", 18, 1}, {"mma-units", 19, 1},
        {"mma-f32", 20, 1}, {"mma-tf32", 21, 1}, {"mma-decode", 22, 1}, {"mma-tiny", 23, 1}, {"class-tiles", 24, 1},
        {"entmax", 25, 3}, {"entmax-layouts", 28, 1}, {"topk-theta", 29, 3}, {"topk-theta-layouts", 32, 1},
        {"topk-theta-mma", 33, 1}, {"entmax-mma", 34, 1}, {"mma-rescale", 35, 1}, {"mma-lazy-weights", 36, 1},
        {"mma-views", 37, 1},
    };
    int first = 0, count = (int)(sizeof full / sizeof full[0]);
    if (part) {
        int found = 0;
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (!strcmp(part, parts[i].name)) first = parts[i].first, count = parts[i].count, found = 1;
        if (!found) {
            fprintf(stderr, "test_attention: unknown --part '%s' (basics, layouts, layouts-bf16, layouts-f16, layouts-f16-tra, layouts-f16-two-views, decode, forced-big, semantics, ladder-ends, semantics-edge, mma, mma-wide, mma-units, mma-f32, mma-tf32, mma-decode, mma-tiny, class-tiles, entmax, entmax-layouts, topk-theta, topk-theta-layouts, topk-theta-mma, entmax-mma, mma-rescale, mma-lazy-weights, mma-views)\n", part);
            return 2;
        }
    }
    int failed = tiny ? cmocka_run_group_tests_name("attention (tiny)", small, group_setup, group_teardown)
                      : _cmocka_run_group_tests(part ? part : "attention", full + first, (size_t)count, group_setup,
                                                group_teardown);
    const char *verbose = getenv("TDACL_TEST_VERBOSE");
    if (verbose && *verbose && strcmp(verbose, "0") != 0)
        printf("largest error / tolerance: f32 outputs %.3g, bf16 outputs %.3g, f16 outputs %.3g\n",
               g_worst_ratio[TDACL_F32], g_worst_ratio[TDACL_BF16], g_worst_ratio[TDACL_F16]);
    return failed;
}
