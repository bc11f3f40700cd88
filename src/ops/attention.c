/* Attention: descriptor validation, planning (prefill or flash-decoding), parameter
 * lookup, launches and the sparsity statistics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/kinds.h"
#include "ops/attention.h"
#include "ops/spaces.h"

#define DECODE_MAX_TQ 16

void tdacl_attention_desc_init(tdacl_attention_desc *d)
{
    if (!d) return;
    memset(d, 0, sizeof *d);
    d->kind = TDACL_ATTN_TRA;
    d->beta = 1.0f;
    d->kappa = 1.0f;
    d->power = 2.0f;
    d->lambda = 0.5f;
    d->scale = NAN;
    d->normalize = 1;
    d->norm = TDACL_NORM_NONE;
    d->norm_eps = 1e-5f;
    d->out_scale = 1.0f;
    d->offset = -1;
    d->want_stats = 0;
    d->path = TDACL_PATH_AUTO;
    d->precision = TDACL_PRECISION_EXACT;
    d->alpha = 1.5f;
    d->temp_delta = 1.0f;
    d->temp_beta = 0.0f;
    d->temp_gamma = 1.0f;
    d->theta_post = 0;
    d->sdc = TDACL_SDC_NONE;
    d->sdc_gamma = 0.05f;
    d->vmc = 0;
}


uint64_t tdacl__visible_pairs(int64_t tq, int64_t tk, int64_t offset)
{
    /* row i sees min(offset + i + 1, tk) keys */
    uint64_t total = 0;
    int64_t full_from = tk - offset - 1; /* rows i >= full_from see all tk keys */
    if (full_from < 0) full_from = 0;
    int64_t partial = full_from < tq ? full_from : tq; /* rows 0..partial-1 see offset+i+1 */
    total += (uint64_t)partial * (uint64_t)(offset + 1) + (uint64_t)partial * (uint64_t)(partial - 1) / 2;
    if (tq > partial) total += (uint64_t)(tq - partial) * (uint64_t)tk;
    return total;
}

double tdacl_attention_flops(tdacl_attention_kind kind, int64_t batch_heads, int64_t tq, int64_t tk,
                             int64_t offset, int64_t d, int64_t dv)
{
    if (offset < 0) offset = tk - tq;
    double pairs = (double)tdacl__visible_pairs(tq, tk, offset);
    /* one q.k product (2d per pair) and one weight x v product (2dv per pair); two-view
     * kinds add a second q.k product */
    double per_pair = tdacl__kind_views((int)kind) == 2 ? 2.0 * (2.0 * (double)d) + 2.0 * (double)dv
                                           : 2.0 * (double)d + 2.0 * (double)dv;
    return (double)batch_heads * pairs * per_pair;
}

static int pad32(int x) { return (x + 31) / 32 * 32; }

static tdacl_status check_tensor(tdacl_context *ctx, const char *name, const tdacl_tensor *t,
                                 int64_t b, int64_t h, int64_t rows, int64_t cols, int need_rows_cols)
{
    const char *call = "tdacl_attention";
    if (!t) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tensor %s is NULL", call, name);
    if (t->ctx != ctx)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tensor %s belongs to another context", call, name);
    if (t->ndim != 4)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: %s must have 4 dims [B,H,T,d], has %d", call, name, t->ndim);
    const int64_t want[4] = {b, h, rows, cols};
    static const char *dim[4] = {"B", "H", "T", "d"};
    for (int i = 0; i < 4; i++) {
        if (i >= 2 && !need_rows_cols) continue;
        if (t->shape[i] != want[i])
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: %s.shape[%d] (%s) is %lld, expected %lld", call,
                               name, i, dim[i], (long long)t->shape[i], (long long)want[i]);
    }
    return TDACL_SUCCESS;
}

/* [first, last] element range a view can touch. */
static void extent(const tdacl_tensor *t, int64_t *lo, int64_t *hi)
{
    int64_t last = t->offset;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > 0) last += (t->shape[i] - 1) * t->strides[i];
    *lo = t->offset;
    *hi = last;
}

static int overlaps(const tdacl_tensor *a, const tdacl_tensor *b)
{
    if (!a || !b || a->storage != b->storage) return 0;
    int64_t al, ah, bl, bh;
    extent(a, &al, &ah);
    extent(b, &bl, &bh);
    size_t es = tdacl_dtype_size(a->dtype);
    return !((ah + 1) * (int64_t)es <= bl * (int64_t)es || (bh + 1) * (int64_t)es <= al * (int64_t)es);
}

/* Rows of 8 16-bit elements start on 16 bytes (cp.async of the mma variant). */
static int aligned16_view(const tdacl_tensor *t)
{
    if (!t) return 1;
    return t->strides[3] == 1 && t->strides[2] % 8 == 0 && t->strides[1] % 8 == 0 && t->strides[0] % 8 == 0 &&
           t->offset % 8 == 0;
}

static int aligned4_view(const tdacl_tensor *t)
{
    if (!t) return 1;
    return t->strides[3] == 1 && t->strides[2] % 4 == 0 && t->strides[1] % 4 == 0 &&
           t->strides[0] % 4 == 0 && t->offset % 4 == 0;
}

/* Top-theta's tensors: thresholds (and the offline SDC table) f32 [H, R], v_sum f32 [B, H, dv];
 * refused with any other kind. */
static int is_f32_matrix(const tdacl_context *ctx, const tdacl_tensor *x, int64_t rows)
{
    return x->ctx == ctx && x->ndim == 2 && x->shape[0] == rows && x->shape[1] >= 1 && x->dtype == TDACL_F32 &&
           tdacl__tensor_is_contiguous(x);
}

static tdacl_status check_topk_tensors(tdacl_context *ctx, const tdacl_attention_desc *d, const tdacl_attention_tensors *t,
                                       int64_t B, int64_t H, int64_t dv)
{
    const char *call = "tdacl_attention";
    const int topk = d->kind == TDACL_ATTN_TOPK_THETA;
    const struct { const char *n; const tdacl_tensor *x; } own[] = {{"thresholds", t->thresholds},
                                                                     {"sdc_log_mass", t->sdc_log_mass}, {"v_sum", t->v_sum}};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(own); i++)
        if (own[i].x && !topk)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s given but kind %s is not topk_theta", call, own[i].n,
                               tdacl__kind_name(d->kind));
    if (!topk) return TDACL_SUCCESS;
    if (!t->thresholds)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: kind topk_theta needs tensors.thresholds (f32 [H, R])", call);
    if (!is_f32_matrix(ctx, t->thresholds, H))
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: thresholds must be a contiguous f32 tensor of shape [H=%lld, R >= 1]",
                           call, (long long)H);
    const int offline = d->sdc == TDACL_SDC_OFFLINE;
    if (offline && !t->sdc_log_mass)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.sdc offline needs tensors.sdc_log_mass (f32 [H, R])", call);
    if (!offline && t->sdc_log_mass)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: sdc_log_mass given but desc.sdc is not offline", call);
    if (offline && (!is_f32_matrix(ctx, t->sdc_log_mass, H) || t->sdc_log_mass->shape[1] != t->thresholds->shape[1]))
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: sdc_log_mass must be a contiguous f32 tensor shaped like thresholds "
                           "[H=%lld, R=%lld]", call, (long long)H, (long long)t->thresholds->shape[1]);
    if (t->v_sum && !d->vmc)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: v_sum given but desc.vmc is 0", call);
    if (t->v_sum && (t->v_sum->ctx != ctx || t->v_sum->ndim != 3 || t->v_sum->shape[0] != B || t->v_sum->shape[1] != H ||
                     t->v_sum->shape[2] != dv || t->v_sum->dtype != TDACL_F32 || !tdacl__tensor_is_contiguous(t->v_sum)))
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: v_sum must be a contiguous f32 tensor of shape [B=%lld, H=%lld, dv=%lld]",
                           call, (long long)B, (long long)H, (long long)dv);
    return TDACL_SUCCESS;
}

tdacl_status tdacl__attention_plan(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                   const tdacl_attention_tensors *t, tdacl_attention_plan *plan)
{
    return tdacl__attention_plan_rows(ctx, desc, t, NULL, plan);
}

/* Checks the per-sequence key ranges of `rows` (B query rows of Tq, caches of Bk sequences
 * and Tk keys); *offset receives the largest position of a query 0. */
static tdacl_status check_kv_rows(tdacl_context *ctx, const tdacl_kv_rows *rows, int64_t B, int64_t Bk, int64_t Tq,
                                  int64_t Tk, int64_t *offset)
{
    const char *call = "tdacl_attention";
    if (!rows->mem || !rows->host)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: per-sequence key ranges without their buffer", call);
    if (Tq > DECODE_MAX_TQ)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: per-sequence key ranges take Tq <= %d (got %lld)", call,
                           DECODE_MAX_TQ, (long long)Tq);
    *offset = 0;
    for (int64_t b = 0; b < B; b++) {
        const int64_t seq = rows->host[2 * b], pos = rows->host[2 * b + 1];
        if (seq < 0 || seq >= Bk || pos < 0 || pos + Tq > Tk)
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: row %lld reads cache sequence %lld at position %lld, outside "
                               "the %lld sequences of %lld keys", call, (long long)b, (long long)seq, (long long)pos,
                               (long long)Bk, (long long)Tk);
        if (pos > *offset) *offset = pos;
    }
    return TDACL_SUCCESS;
}

tdacl_status tdacl__attention_plan_rows(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                        const tdacl_attention_tensors *t, const tdacl_kv_rows *rows,
                                        tdacl_attention_plan *plan)
{
    const char *call = "tdacl_attention";
    if (!desc) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc is NULL", call);
    if (!t) return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tensors is NULL", call);
    memset(plan, 0, sizeof *plan);
    tdacl_attention_desc d = *desc;
    const tdacl_kind_info *kind = tdacl__kind((int)d.kind);
    if (!kind)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.kind %d is not a tdacl_attention_kind", call, (int)d.kind);
    if (!isfinite(d.beta) || d.beta < 0)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.beta must be finite and >= 0 (got %g)", call, d.beta);
    if (!isfinite(d.kappa) || d.kappa <= 0)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.kappa must be finite and > 0 (got %g)", call, d.kappa);
    if (!isfinite(d.power) || d.power < 1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.power must be finite and >= 1 (got %g)", call, d.power);
    if (!isfinite(d.lambda))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.lambda must be finite (got %g)", call, d.lambda);
    if (!isnan(d.scale) && (!isfinite(d.scale)))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.scale must be finite or NAN for the default (got %g)", call, d.scale);
    if (d.normalize != 0 && d.normalize != 1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.normalize must be 0 or 1 (got %d)", call, d.normalize);
    if ((int)d.norm != TDACL_NORM_NONE && (int)d.norm != TDACL_NORM_RMS)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.norm %d is not a tdacl_head_norm", call, (int)d.norm);
    if (!isfinite(d.norm_eps) || d.norm_eps <= 0)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.norm_eps must be finite and > 0 (got %g)", call, d.norm_eps);
    if (!isfinite(d.out_scale))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.out_scale must be finite (got %g)", call, d.out_scale);
    if (d.offset < -1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.offset must be >= 0, or -1 for Tk - Tq (got %lld)", call, (long long)d.offset);
    if ((int)d.path < TDACL_PATH_AUTO || (int)d.path > TDACL_PATH_DECODE)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.path %d is not a tdacl_attention_path", call, (int)d.path);
    if ((int)d.precision < TDACL_PRECISION_EXACT || (int)d.precision > TDACL_PRECISION_BF16)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.precision %d is not a tdacl_precision", call, (int)d.precision);
    tdacl_status pst = tdacl__precision_env(ctx, call, &d.precision);
    if (pst) return pst;
    if (!isfinite(d.alpha) || d.alpha <= 1.0f || d.alpha > 8.0f)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.alpha must be in (1, 8] (got %g)", call, d.alpha);
    if (!isfinite(d.temp_delta) || !isfinite(d.temp_beta) || !isfinite(d.temp_gamma))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.temp_%s must be finite (got %g)", call,
                           !isfinite(d.temp_delta) ? "delta" : !isfinite(d.temp_beta) ? "beta" : "gamma",
                           !isfinite(d.temp_delta) ? d.temp_delta : !isfinite(d.temp_beta) ? d.temp_beta : d.temp_gamma);
    if (d.want_stats != 0 && d.want_stats != 1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.want_stats must be 0 or 1", call);
    if (d.theta_post != 0 && d.theta_post != 1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.theta_post must be 0 or 1 (got %d)", call, d.theta_post);
    if ((int)d.sdc < TDACL_SDC_NONE || (int)d.sdc > TDACL_SDC_OFFLINE)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.sdc %d is not a tdacl_sdc", call, (int)d.sdc);
    if (!isfinite(d.sdc_gamma) || d.sdc_gamma < 0)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.sdc_gamma must be finite and >= 0 (got %g)", call,
                           d.sdc_gamma);
    if (d.vmc != 0 && d.vmc != 1)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.vmc must be 0 or 1 (got %d)", call, d.vmc);
    if (d.kind == TDACL_ATTN_TOPK_THETA && d.theta_post && d.sdc != TDACL_SDC_NONE)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.sdc applies to pre-softmax thresholds only "
                           "(post-softmax weights keep the whole denominator)", call);

    if (!t->q || !t->k || !t->v || !t->out)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: tensor %s is NULL", call,
                           !t->q ? "q" : !t->k ? "k" : !t->v ? "v" : "out");
    tdacl_status st;
    if (t->q->ndim != 4) return check_tensor(ctx, "q", t->q, 0, 0, 0, 0, 0);
    int64_t B = t->q->shape[0], H = t->q->shape[1], Tq = t->q->shape[2], dd = t->q->shape[3];
    if ((st = check_tensor(ctx, "q", t->q, B, H, Tq, dd, 1))) return st;
    /* with per-sequence key ranges the caches hold their own number of sequences */
    const int64_t Bk = rows && t->k && t->k->ndim == 4 ? t->k->shape[0] : B;
    if ((st = check_tensor(ctx, "k", t->k, Bk, H, 0, 0, 0))) return st;
    int64_t Tk = t->k->shape[2];
    if ((st = check_tensor(ctx, "k", t->k, Bk, H, Tk, dd, 1))) return st;
    if ((st = check_tensor(ctx, "v", t->v, Bk, H, Tk, 0, 0))) return st;
    int64_t dv = t->v->shape[3];
    if ((st = check_tensor(ctx, "v", t->v, Bk, H, Tk, dv, 1))) return st;
    if ((st = check_tensor(ctx, "out", t->out, B, H, Tq, dv, 1))) return st;
    if (kind->views == 2) {
        if (!t->q2 || !t->k2)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: kind %s needs tensors q2 and k2", call,
                               tdacl__kind_name(d.kind));
        if ((st = check_tensor(ctx, "q2", t->q2, B, H, Tq, dd, 1))) return st;
        if ((st = check_tensor(ctx, "k2", t->k2, Bk, H, Tk, dd, 1))) return st;
    } else if (t->q2 || t->k2) {
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: q2/k2 given but kind %s has one view", call,
                           tdacl__kind_name(d.kind));
    }
    if (dd < 1 || dd > 256)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: head dim d=%lld is outside 1..256", call, (long long)dd);
    if (dv < 1 || dv > 256)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: v head dim dv=%lld is outside 1..256", call, (long long)dv);
    if (Tk == 0 && Tq > 0)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: k has no keys but q has %lld rows", call, (long long)Tq);
    tdacl_dtype dt = t->q->dtype;
    const struct { const char *n; const tdacl_tensor *x; } in[] = {{"k", t->k}, {"v", t->v}, {"q2", t->q2}, {"k2", t->k2}};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(in); i++)
        if (in[i].x && in[i].x->dtype != dt)
            return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: %s is %s but q is %s (q, k, v, q2, k2 share a dtype)", call,
                               in[i].n, tdacl_dtype_name(in[i].x->dtype), tdacl_dtype_name(dt));
    if (t->lambdas) {
        if (t->lambdas->ctx != ctx || t->lambdas->ndim != 1 || t->lambdas->shape[0] != H ||
            t->lambdas->dtype != TDACL_F32 || !tdacl__tensor_is_contiguous(t->lambdas))
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: lambdas must be a contiguous f32 tensor of length H=%lld", call,
                               (long long)H);
    }
    if (t->temps) {
        if (d.kind != TDACL_ATTN_ENTMAX)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: temps given but kind %s is not entmax", call,
                               tdacl__kind_name(d.kind));
        if (t->temps->ctx != ctx || t->temps->ndim != 2 || t->temps->shape[0] != H || t->temps->shape[1] != 3 ||
            t->temps->dtype != TDACL_F32 || !tdacl__tensor_is_contiguous(t->temps))
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: temps must be a contiguous f32 tensor of shape [H=%lld, 3]", call,
                               (long long)H);
    }
    if ((st = check_topk_tensors(ctx, &d, t, B, H, dv))) return st;
    if (rows && (d.kind == TDACL_ATTN_ENTMAX || d.kind == TDACL_ATTN_TOPK_THETA))
        return tdacl__fail(ctx, TDACL_ERR_UNSUPPORTED, "%s: kind %s does not take per-sequence key ranges yet "
                           "(a model's batched decode)", call, tdacl__kind_name(d.kind));
    if (t->gain) {
        if (t->gain->ctx != ctx || t->gain->ndim != 1 || t->gain->shape[0] != dv)
            return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: gain must be a 1-D tensor of length dv=%lld", call, (long long)dv);
        if (d.norm != TDACL_NORM_RMS)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: gain given but desc.norm is not rms", call);
    }
    /* the kernels read these from element 0 of their buffers, densely */
    const struct { const char *n; const tdacl_tensor *x; } dense[] = {{"gain", t->gain}, {"lambdas", t->lambdas},
                                                                      {"temps", t->temps}, {"thresholds", t->thresholds},
                                                                      {"sdc_log_mass", t->sdc_log_mass}};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(dense); i++)
        if (dense[i].x && (dense[i].x->offset != 0 || !tdacl__tensor_is_contiguous(dense[i].x)))
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s must be a contiguous tensor starting at element 0 "
                               "of its storage (a view at element %lld was given)", call, dense[i].n,
                               (long long)dense[i].x->offset);
    if (!tdacl__view_is_injective(t->out))
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT,
                           "%s: out is a view whose strides map several elements to one place", call);
    const struct { const char *n; const tdacl_tensor *x; } all[] = {{"q", t->q}, {"k", t->k}, {"v", t->v}, {"q2", t->q2}, {"k2", t->k2}, {"gain", t->gain}, {"lambdas", t->lambdas}, {"temps", t->temps},
                                                                       {"thresholds", t->thresholds}, {"sdc_log_mass", t->sdc_log_mass}, {"v_sum", t->v_sum}};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(all); i++)
        if (overlaps(t->out, all[i].x))
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: out overlaps the storage of %s", call, all[i].n);
    int64_t offset = d.offset < 0 ? Tk - Tq : d.offset;
    if (rows && (st = check_kv_rows(ctx, rows, B, Bk, Tq, Tk, &offset))) return st;
    if (offset < 0)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: Tq=%lld exceeds Tk=%lld; pass desc.offset explicitly", call,
                           (long long)Tq, (long long)Tk);
    /* compared before adding, so the check itself cannot overflow */
    if (Tq > TDACL_MAX_POSITION || Tk > TDACL_MAX_POSITION || offset > TDACL_MAX_POSITION - Tq)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT,
                           "%s: desc.offset %lld + Tq %lld (Tk %lld) exceeds the largest position %lld "
                           "(TDACL_MAX_POSITION)", call, (long long)offset, (long long)Tq, (long long)Tk,
                           (long long)TDACL_MAX_POSITION);
    if (B * H > 65535 * 1024LL)
        return tdacl__fail(ctx, TDACL_ERR_SHAPE, "%s: B*H=%lld is too large", call, (long long)(B * H));
    if (isnan(d.scale))
        d.scale = kind->cosine_scale ? 1.0f : 1.0f / sqrtf((float)dd);
    d.offset = offset;

    plan->desc = d;
    plan->B = B, plan->H = H, plan->Tq = Tq, plan->Tk = Tk, plan->offset = offset;
    plan->d = (int)dd, plan->dv = (int)dv;
    plan->dpad = pad32((int)dd), plan->dvpad = pad32((int)dv);
    plan->dtype = dt;
    plan->odtype = t->out->dtype;
    plan->gdtype = t->gain ? t->gain->dtype : TDACL_F32;
    plan->aligned4 = dd % 4 == 0 && dv % 4 == 0 && aligned4_view(t->q) &&
                     aligned4_view(t->k) && aligned4_view(t->v) && aligned4_view(t->q2) && aligned4_view(t->k2);
    plan->kv_rows = rows;
    if (rows)
        plan->path = TDACL_PATH_DECODE; /* the ranges are the decode kernels' */
    else if (d.path == TDACL_PATH_AUTO)
        plan->path = Tq <= DECODE_MAX_TQ && Tk >= 4 * Tq ? TDACL_PATH_DECODE : TDACL_PATH_PREFILL;
    else
        plan->path = d.path;
    if (plan->path == TDACL_PATH_DECODE && Tq > DECODE_MAX_TQ)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: the decode path takes Tq <= %d (got %lld)", call,
                           DECODE_MAX_TQ, (long long)Tq);
    plan->pmode = d.power == 1.0f ? 1 : d.power == 2.0f ? 2 : 0;
    plan->problem.kind = d.kind;
    plan->problem.dtype = dt;
    plan->problem.d = plan->dpad;
    plan->problem.dv = plan->dvpad;
    plan->problem.t = Tk;
    plan->problem.bh = B * H;
    plan->problem.tq = (int)(Tq < DECODE_MAX_TQ ? Tq : DECODE_MAX_TQ);
    if (plan->problem.tq < 1) plan->problem.tq = 1;
    plan->aligned16 = aligned16_view(t->q) && aligned16_view(t->k) && aligned16_view(t->v) && aligned16_view(t->q2) &&
                      aligned16_view(t->k2);
    plan->problem.wide16 = dt != TDACL_F32 && plan->aligned16 && dd % 8 == 0;
    tdacl__mma_choose(&ctx->info, &plan->mma);
    const tdacl_attention_call c = {plan, t, NULL, NULL};
    const tdacl_op op = plan->path == TDACL_PATH_DECODE ? TDACL_OP_ATTENTION_DECODE : TDACL_OP_ATTENTION_PREFILL;
    st = tdacl__variant_choose(ctx, op, &c, &plan->row, plan->variant_why, sizeof plan->variant_why);
    if (!st && plan->row->matrix_units) {
        const size_t used = strlen(plan->variant_why);
        const int threshold = d.kind == TDACL_ATTN_TRA || d.kind == TDACL_ATTN_TDA;
        snprintf(plan->variant_why + used, sizeof plan->variant_why - used, " (%s)%s",
                 plan->mma.body == TDACL_MMA_PTX ? "native mma.sync" : plan->mma.name,
                 !threshold                            ? ""
                 : tdacl__attention_mma_lazy(plan)     ? "; weights formed only in warps that have one (beta >= 1)"
                 : tdacl__attention_mma_in(plan) == 2  ? "; weights formed at once (f16 weights are rescaled per row)"
                                                       : "; weights formed at once (beta < 1)");
    }
    tdacl__log(ctx, TDACL_LOG_DEBUG, "attention %s %s %s d=%d: %s", tdacl__kind_name(d.kind), tdacl_dtype_name(dt),
               tdacl__op_name(op), (int)dd, st ? tdacl_last_error(ctx) : plan->variant_why);
    return st;
}

static cl_long4 strides4(const tdacl_tensor *t)
{
    cl_long4 s = {{0, 0, 0, 0}};
    if (t)
        for (int i = 0; i < 4; i++) s.s[i] = t->strides[i];
    return s;
}

static cl_mem mem_of(const tdacl_tensor *t) { return t ? t->storage->mem : NULL; }
static cl_long off_of(const tdacl_tensor *t) { return t ? t->offset : 0; }

/* The kernel arguments every attention launch takes from the tensors and the descriptor. */
typedef struct launch_args {
    cl_mem qm, km, vm, q2m, k2m, gm, lm, om;
    cl_long4 qs, ks, vs, q2s, k2s, os;
    cl_long qo, ko, vo, q2o, k2o, oo;
    cl_float scale, beta, kappa, power, lambda, eps, out_scale;
} launch_args;

static void launch_args_of(const tdacl_attention_plan *p, const tdacl_attention_tensors *t, launch_args *a)
{
    const tdacl_tensor *x[6] = {t->q, t->k, t->v, t->q2, t->k2, t->out};
    cl_mem *mems[6] = {&a->qm, &a->km, &a->vm, &a->q2m, &a->k2m, &a->om};
    cl_long4 *strides[6] = {&a->qs, &a->ks, &a->vs, &a->q2s, &a->k2s, &a->os};
    cl_long *offsets[6] = {&a->qo, &a->ko, &a->vo, &a->q2o, &a->k2o, &a->oo};
    for (int i = 0; i < 6; i++) *mems[i] = mem_of(x[i]), *strides[i] = strides4(x[i]), *offsets[i] = off_of(x[i]);
    a->gm = mem_of(t->gain), a->lm = mem_of(t->lambdas);
    const tdacl_attention_desc *d = &p->desc;
    a->scale = d->scale, a->beta = tdacl__kind_threshold(d->kind) ? d->beta : 0.0f, a->kappa = d->kappa;
    a->power = d->power, a->lambda = d->lambda, a->eps = d->norm_eps, a->out_scale = d->out_scale;
}

/* The streaming kernels keep one running state per row; entmax needs its threshold passes. */
int tdacl__attention_simt_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    if (p->desc.kind == TDACL_ATTN_ENTMAX) return snprintf(why, n, "kind entmax runs on attention.entmax"), 1;
    if (p->desc.kind == TDACL_ATTN_TOPK_THETA) return snprintf(why, n, "kind topk_theta runs on attention.topk_theta"), 1;
    return 0;
}

int tdacl__attention_entmax_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    if (p->desc.kind != TDACL_ATTN_ENTMAX) return snprintf(why, n, "entmax only"), 1;
    return 0;
}

int tdacl__attention_topk_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    if (p->desc.kind != TDACL_ATTN_TOPK_THETA) return snprintf(why, n, "topk_theta only"), 1;
    return 0;
}

void tdacl__attention_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p)
{
    *p = ((const tdacl_attention_call *)call)->plan->problem;
}

void tdacl__attention_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    tdacl__sb_printf(sb, "-DKIND=%d -DDT=%d -DODT=%d -DGDT=%d -DD=%d -DDV=%d%s", (int)p->desc.kind,
                     (int)p->dtype, (int)p->odtype, (int)p->gdtype, p->dpad, p->dvpad,
                     p->aligned4 ? " -DALIGNED4" : "");
}

/* The row-tiled kernels (cl/attention_rows.cl): 16-bit storage on 16-byte-aligned rows loads
 * 8 elements at a time. */
void tdacl__attention_rows_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    tdacl__attention_call_options(call, sb);
    if (p->problem.wide16) tdacl__sb_printf(sb, " -DALIGNED16");
}

/* Adds an event's device time to *total, or (total NULL) just releases it: without stats
 * the call returns with its kernels queued, so a model's layers do not wait on the host. */
static tdacl_status add_event_ms(tdacl_context *ctx, cl_event ev, double *total)
{
    if (!ev) return TDACL_SUCCESS;
    if (!total) {
        clReleaseEvent(ev);
        return TDACL_SUCCESS;
    }
    double ms = 0;
    tdacl_status st = tdacl__event_ms(ctx, ev, &ms);
    clReleaseEvent(ev);
    *total += ms;
    return st;
}

/* Inverse norms of the rows of n <= 4 views x[i] (rows[i] rows each) into out[i], one launch
 * (cl/attention_prep.cl). */
static tdacl_status inv_norms(tdacl_context *ctx, const tdacl_attention_plan *p, int n, const tdacl_tensor *const x[4],
                              const int64_t rows[4], const cl_mem out[4], cl_event *ev)
{
    char opts[32];
    snprintf(opts, sizeof opts, "-DDT=%d", (int)p->dtype);
    cl_kernel k;
    tdacl_status st = tdacl__variant_kernel(ctx, tdacl__variant_of_op(TDACL_OP_ATTENTION_PREP), opts, "row_inv_norm", &k);
    if (st) return st;
    cl_mem xm[4], om[4];
    cl_long4 xs[4], xo, rn;
    cl_int wide = 0, H = (cl_int)p->H, d = p->d;
    int64_t most = 0;
    for (int i = 0; i < 4; i++) {
        const int j = i < n ? i : 0; /* slots past n repeat view 0 with no rows */
        xm[i] = mem_of(x[j]), om[i] = out[j], xs[i] = strides4(x[j]);
        xo.s[i] = off_of(x[j]), rn.s[i] = i < n ? rows[j] : 0;
        /* rows of 8-element chunks: contiguous, every row starting on a multiple of 8 */
        if (i < n && xs[i].s[3] == 1 && d % 8 == 0 && xo.s[i] % 8 == 0 && xs[i].s[0] % 8 == 0 && xs[i].s[1] % 8 == 0 &&
            xs[i].s[2] % 8 == 0)
            wide |= 1 << i;
        if (i < n && rows[j] > most) most = rows[j];
    }
    st = tdacl__set_args(ctx, k, "row_inv_norm", sizeof xm[0], &xm[0], sizeof xm[1], &xm[1], sizeof xm[2], &xm[2],
                         sizeof xm[3], &xm[3], sizeof xs[0], &xs[0], sizeof xs[1], &xs[1], sizeof xs[2], &xs[2],
                         sizeof xs[3], &xs[3], sizeof xo, &xo, sizeof rn, &rn, sizeof wide, &wide, sizeof H, &H,
                         sizeof d, &d, sizeof om[0], &om[0], sizeof om[1], &om[1], sizeof om[2], &om[2],
                         sizeof om[3], &om[3], (size_t)0);
    if (st) return st;
    /* 256 work-items per work-group, 8 per row; dimension 2 the view */
    size_t global[3] = {(size_t)((most + 31) / 32) * 256, (size_t)(p->B * p->H), (size_t)n}, local[3] = {256, 1, 1};
    return tdacl__launch(ctx, k, 3, global, local, ev, "row_inv_norm");
}

void tdacl__attention_decode_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_attention_plan *p = ((const tdacl_attention_call *)call)->plan;
    tdacl__attention_call_options(call, sb);
    tdacl__sb_printf(sb, " -DTQP=%d -DRED_NT=%d%s", tdacl__decode_tqp(p->Tq), tdacl__reduce_nt(p),
                     p->kv_rows ? " -DKV_ROWS=1" : "");
    /* 16-bit keys on 16-byte rows move 8 elements per load (cl/attention_decode.cl) */
    if (p->problem.wide16) tdacl__sb_printf(sb, " -DALIGNED16");
}

/* Build options of the planned kernel with parameters v (the program cache key). */
void tdacl__attention_options(const tdacl_attention_plan *p, const tdacl_param_values *v, tdacl_strbuf *sb)
{
    const tdacl_attention_call c = {p, NULL, NULL, NULL};
    tdacl__variant_options(p->row, &c, v, sb);
}

tdacl_status tdacl__attention_build(tdacl_context *ctx, const tdacl_attention_plan *p, const tdacl_param_values *v)
{
    tdacl_strbuf opts = {0};
    tdacl__attention_options(p, v, &opts);
    cl_program prog;
    tdacl_status st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory")
                               : tdacl__program_get(ctx, &p->row->program, opts.data, &prog);
    tdacl__sb_free(&opts);
    return st;
}

/* The counters of a stats buffer (4 per work-group: survivors of view 1 and 2, pairs with a
 * non-zero combined weight, tiles whose V was loaded) into the public statistics. */
static tdacl_status read_stats(tdacl_context *ctx, const tdacl_attention_plan *p, cl_mem mem, size_t groups,
                               tdacl_attention_stats *stats)
{
    size_t n = groups * 4;
    cl_uint *buf = malloc(n * sizeof *buf);
    if (!buf) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "attention stats: out of memory");
    cl_int err = clEnqueueReadBuffer(ctx->queue, mem, CL_TRUE, 0, n * sizeof *buf, buf, 0, NULL, NULL);
    if (err) {
        free(buf);
        return tdacl__fail_cl(ctx, err, "reading attention stats");
    }
    uint64_t s1 = 0, s2 = 0, sc = 0, vt = 0;
    for (size_t i = 0; i < n; i += 4) s1 += buf[i], s2 += buf[i + 1], sc += buf[i + 2], vt += buf[i + 3];
    free(buf);
    const tdacl_kind_info *kind = tdacl__kind(p->desc.kind);
    stats->survivors[0] = s1;
    stats->survivors[1] = s2;
    stats->tiles_skipped_v = stats->tiles_visited - vt;
    /* two views combined into one weight (tda): a pair counts when the combination is non-zero */
    uint64_t nonzero = kind->views == 2 && kind->weight_sets == 1 ? sc : s1;
    if (kind->softmax) {
        nonzero = stats->visible_pairs;
        stats->survivors[0] = stats->visible_pairs;
        stats->survivors[1] = kind->views == 2 ? stats->visible_pairs : 0;
    }
    stats->zero_weights = stats->visible_pairs - nonzero;
    return TDACL_SUCCESS;
}

/* The counters of `groups` work-groups (4 each, written by stats_flush), zeroed first. */
static tdacl_status zeroed_stats(tdacl_context *ctx, size_t groups, cl_mem *mem)
{
    tdacl_status st = tdacl__scratch(ctx, TDACL_SCRATCH_STATS, groups * 16, mem);
    if (st) return st;
    cl_uint zero = 0;
    cl_int err = clEnqueueFillBuffer(ctx->queue, *mem, &zero, sizeof zero, 0, groups * 16, 0, NULL, NULL);
    return err ? tdacl__fail_cl(ctx, err, "clEnqueueFillBuffer(stats)") : TDACL_SUCCESS;
}

/* Inverse norms of q, k (and q2, k2) for the normalised kinds, into subs[0..3] (q, k, q2,
 * k2: a scratch buffer each, which the context keeps); nothing for the others, and for the
 * keys only with `keys` (the tensor-core decode computes them from its tiles).  The caller
 * releases the events. */
static tdacl_status prepare_norms(tdacl_context *ctx, const tdacl_attention_plan *p, const tdacl_attention_tensors *t,
                                  int keys, cl_mem subs[4], cl_event evs[4])
{
    const tdacl_attention_desc *d = &p->desc;
    if (!(d->normalize && tdacl__kind_threshold(d->kind))) return TDACL_SUCCESS;
    if (p->given_norms[0]) { /* the caller's (tdacl__attention_rows) */
        for (int i = 0; i < 2 * tdacl__kind_views(d->kind); i++) subs[i] = keys || !(i & 1) ? p->given_norms[i] : NULL;
        return TDACL_SUCCESS;
    }
    const int64_t bh = p->B * p->H;
    const size_t nq = (size_t)(bh * p->Tq), nk = (size_t)(bh * p->Tk);
    const int nviews = tdacl__kind_views(d->kind);
    const size_t sizes[4] = {4 * nq, keys ? 4 * nk : 0, 4 * nq, keys ? 4 * nk : 0};
    tdacl_status st = TDACL_SUCCESS;
    for (int i = 0; i < 2 * nviews && !st; i++)
        if (sizes[i]) st = tdacl__scratch(ctx, TDACL_SCRATCH_NORMS + i, sizes[i], &subs[i]);
    if (st) return st;
    const tdacl_tensor *src[4] = {t->q, t->k, t->q2, t->k2}, *x[4];
    const int64_t all_rows[4] = {p->Tq, p->Tk, p->Tq, p->Tk};
    int64_t rows[4];
    cl_mem out[4];
    int n = 0;
    for (int i = 0; i < 2 * nviews; i++)
        if (subs[i]) x[n] = src[i], rows[n] = all_rows[i], out[n] = subs[i], n++;
    return n ? inv_norms(ctx, p, n, x, rows, out, &evs[0]) : TDACL_SUCCESS;
}

/* The argument list the prefill kernels share (attention_fwd, attention_mma_fwd, and the
 * first PREFILL_NARGS of attention_mma_split). */
#define PREFILL_NARGS 41
static tdacl_status set_prefill_args(tdacl_context *ctx, cl_kernel k, const char *name, const tdacl_attention_plan *p,
                                     const tdacl_attention_tensors *t, cl_mem subs[4], cl_mem stats_mem, int want)
{
    const tdacl_attention_desc *d = &p->desc;
    launch_args a;
    launch_args_of(p, t, &a);
    cl_mem qinv = subs[0], kinv = subs[1], q2inv = subs[2], k2inv = subs[3];
    cl_int H = (cl_int)p->H, dd = p->d, dv = p->dv, pmode = p->pmode, norm = d->norm == TDACL_NORM_RMS, want_i = want;
    cl_long Tq = p->Tq, Tk = p->Tk, offset = p->offset;
    return tdacl__set_args(ctx, k, name, sizeof a.qm, &a.qm, sizeof a.km, &a.km, sizeof a.vm, &a.vm,
                           sizeof a.q2m, &a.q2m, sizeof a.k2m, &a.k2m, sizeof qinv, &qinv, sizeof kinv, &kinv,
                           sizeof q2inv, &q2inv, sizeof k2inv, &k2inv, sizeof a.gm, &a.gm, sizeof a.lm, &a.lm, sizeof a.om, &a.om,
                           sizeof stats_mem, &stats_mem, sizeof a.qs, &a.qs, sizeof a.ks, &a.ks, sizeof a.vs, &a.vs,
                           sizeof a.q2s, &a.q2s, sizeof a.k2s, &a.k2s, sizeof a.os, &a.os, sizeof a.qo, &a.qo,
                           sizeof a.ko, &a.ko, sizeof a.vo, &a.vo, sizeof a.q2o, &a.q2o, sizeof a.k2o, &a.k2o,
                           sizeof a.oo, &a.oo, sizeof H, &H, sizeof Tq, &Tq, sizeof Tk, &Tk,
                           sizeof offset, &offset, sizeof dd, &dd, sizeof dv, &dv, sizeof a.scale, &a.scale,
                           sizeof a.beta, &a.beta, sizeof a.kappa, &a.kappa, sizeof pmode, &pmode,
                           sizeof a.power, &a.power, sizeof a.lambda, &a.lambda, sizeof norm, &norm,
                           sizeof a.eps, &a.eps, sizeof a.out_scale, &a.out_scale, sizeof want_i, &want_i,
                           (size_t)0);
}

/* The entmax kernel's arguments after the prefill ones (cl/attention_entmax.cl). */
static tdacl_status set_entmax_args(tdacl_context *ctx, cl_kernel k, const tdacl_attention_plan *p,
                                    const tdacl_attention_tensors *t)
{
    const tdacl_attention_desc *d = &p->desc;
    cl_mem temps = mem_of(t->temps);
    cl_float am1 = d->alpha - 1.0f, e = 1.0f / (d->alpha - 1.0f);
    cl_int emode = d->alpha == 2.0f ? 1 : d->alpha == 1.5f ? 2 : 0;
    const void *vals[7] = {&temps, &am1, &e, &emode, &d->temp_delta, &d->temp_beta, &d->temp_gamma};
    const size_t sizes[7] = {sizeof temps, sizeof am1, sizeof e, sizeof emode, sizeof(cl_float), sizeof(cl_float),
                             sizeof(cl_float)};
    for (cl_uint i = 0; i < 7; i++) {
        cl_int err = clSetKernelArg(k, PREFILL_NARGS + i, sizes[i], vals[i]);
        if (err) return tdacl__fail_cl(ctx, err, "clSetKernelArg(attention_entmax_fwd, argument %u)", PREFILL_NARGS + i);
    }
    return TDACL_SUCCESS;
}

static void split_keys(const tdacl_context *ctx, int64_t kend, int unit, int waves, int64_t bh, int64_t *nsplit,
                       int64_t *split_len);
static uint64_t split_tiles(int64_t kend, int64_t nsplit, int64_t split_len, int64_t unit);

/* The tensor-core kernel's Top-theta arguments after the prefill ones (cl/attention_mma.cl,
 * KIND 6): thresholds, their row count, the offline SDC table, the SDC mode and gamma, the
 * rows' maxima and sums of the post-softmax passes (or NULL). */
static tdacl_status set_topk_mma_args(tdacl_context *ctx, cl_kernel k, const tdacl_attention_plan *p,
                                      const tdacl_attention_tensors *t, cl_int sdc, cl_mem rowstat)
{
    cl_mem th = mem_of(t->thresholds), lm = mem_of(t->sdc_log_mass);
    cl_long nthr = t->thresholds->shape[1];
    const void *vals[6] = {&th, &nthr, &lm, &sdc, &p->desc.sdc_gamma, &rowstat};
    const size_t sizes[6] = {sizeof th, sizeof nthr, sizeof lm, sizeof sdc, sizeof(cl_float), sizeof rowstat};
    for (cl_uint i = 0; i < 6; i++) {
        cl_int err = clSetKernelArg(k, PREFILL_NARGS + i, sizes[i], vals[i]);
        if (err) return tdacl__fail_cl(ctx, err, "clSetKernelArg(attention_mma_fwd, argument %u)", PREFILL_NARGS + i);
    }
    return TDACL_SUCCESS;
}

/* A kernel of the call's program with `extra` options appended: the tensor-core kernel's
 * passes that precede the call's own launch (entmax's threshold search, Top-theta's row
 * statistics). */
static tdacl_status pass_kernel(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_attention_call *call,
                                const tdacl_param_values *v, const char *kernel_name, const char *extra, cl_kernel *k)
{
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, call, v, &opts);
    tdacl__sb_printf(&opts, "%s", extra);
    tdacl_status st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory (options of a pass)")
                               : tdacl__variant_kernel(ctx, row, opts.data, kernel_name, k);
    tdacl__sb_free(&opts);
    return st;
}

/* The tensor-core kernel's entmax arguments after the prefill ones (cl/attention_mma.cl KIND 5). */
static tdacl_status set_entmax_mma_args(tdacl_context *ctx, cl_kernel k, const tdacl_attention_plan *p,
                                        const tdacl_attention_tensors *t, cl_mem taubuf)
{
    const tdacl_attention_desc *d = &p->desc;
    cl_mem temps = mem_of(t->temps);
    cl_float am1 = d->alpha - 1.0f, e = 1.0f / (d->alpha - 1.0f);
    const void *vals[7] = {&temps, &am1, &e, &d->temp_delta, &d->temp_beta, &d->temp_gamma, &taubuf};
    const size_t sizes[7] = {sizeof temps, sizeof am1, sizeof e, sizeof(cl_float), sizeof(cl_float), sizeof(cl_float),
                             sizeof taubuf};
    for (cl_uint i = 0; i < 7; i++) {
        cl_int err = clSetKernelArg(k, PREFILL_NARGS + i, sizes[i], vals[i]);
        if (err) return tdacl__fail_cl(ctx, err, "clSetKernelArg(attention_mma_fwd, argument %u)", PREFILL_NARGS + i);
    }
    return TDACL_SUCCESS;
}

/* How many Newton steps entmax's threshold search takes for rows of up to n keys at power p =
 * 1 / (alpha - 1) > 1.  Its slowest case is a row whose keys all tie, sum_j r^p = n r^p: from
 * r = 1 each step keeps 1 - 1/p of the distance to the root r* = n^(-1/p) until it is near
 * (about ln(1 / r*) / -ln(1 - 1/p) steps), then converges quadratically (4 more reach fp32). */
static int entmax_newton_steps(float alpha, int64_t n)
{
    const double p = 1.0 / (alpha - 1.0), linear = (log((double)(n > 1 ? n : 2)) / p) / -log(1.0 - 1.0 / p);
    const int steps = (int)ceil(linear) + 4;
    return steps < 4 ? 4 : steps > 64 ? 64 : steps;
}

/* The rows whose "unsettled" flag (after the rows' thresholds in taubuf) is set, into *n. */
static tdacl_status count_unsettled(tdacl_context *ctx, const tdacl_attention_plan *p, cl_mem taubuf, uint64_t *n)
{
    const size_t rows = (size_t)(p->B * p->H * p->Tq);
    cl_uint *flag = malloc(rows * sizeof *flag);
    if (!flag) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "entmax statistics: out of memory");
    cl_int err = clEnqueueReadBuffer(ctx->queue, taubuf, CL_TRUE, rows * sizeof(cl_float), rows * sizeof *flag, flag, 0,
                                     NULL, NULL);
    *n = 0;
    for (size_t i = 0; !err && i < rows; i++) *n += flag[i] != 0;
    free(flag);
    return err ? tdacl__fail_cl(ctx, err, "reading entmax's unsettled flags") : TDACL_SUCCESS;
}

/* entmax on the tensor cores (cl/attention_mma.cl KIND 5): each row's threshold tau first, by
 * launches that load no V -- one pass that keeps each row's scores above a rising lower bound
 * and takes tau as the root of those (ENTMAX_BUF there), then Newton steps on sum_j max(x_j -
 * tau, 0)^p = 1 for the rows it could not settle (more scores kept than it has room for),
 * which is convex and decreasing in tau for alpha < 2, so the steps rise monotonically to the
 * root from the pass's bound (entmax_newton_steps; a work-group whose rows are all settled --
 * by the pass, or by sums within 1e-6 of 1, the FP32-lane kernel's stopping rule -- returns at
 * once) -- and leaves the weights' launch (k, ENTMAX_PASS 3, the call's own options) its
 * arguments.  With statistics, the rows the pass left unsettled are counted (a read that
 * waits).  The pass has its own tile (tdacl__entmax_pass_tile).  Events of the search into evs[1..2]. */
static tdacl_status entmax_mma_passes(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_attention_call *call,
                                      const tdacl_param_values *v, cl_kernel k, const char *kernel_name, cl_mem subs[4],
                                      const size_t global[3], const size_t local[3], cl_event evs[4])
{
    const tdacl_attention_plan *p = call->plan;
    cl_mem tau = NULL;
    /* the rows' taus, then their unsettled flags */
    tdacl_status st = tdacl__scratch(ctx, TDACL_SCRATCH_ML, (size_t)(p->B * p->H * p->Tq) * 8, &tau);
    tdacl_param_values v1;
    tdacl__entmax_pass_tile(row->space, v, &v1);
    const int nwarps1 = tdacl__param(row->space, &v1, "NWARPS"), bm1 = 16 * nwarps1; /* MT 1 */
    const size_t global1[3] = {(size_t)(32 * nwarps1), global[1], (size_t)((p->Tq + bm1 - 1) / bm1)};
    const size_t local1[3] = {global1[0], 1, 1};
    tdacl_problem prob;
    row->problem(ctx, call, &prob);
    char pass1[64];
    snprintf(pass1, sizeof pass1, " -DENTMAX_PASS=1 -DEL=%d",
             tdacl__entmax_pass_slots(row->space, &prob, &v1, ctx->info.local_mem_bytes));
    for (int pass = 1; !st && pass <= 2; pass++) {
        cl_kernel kp;
        st = pass_kernel(ctx, row, call, pass == 1 ? &v1 : v, kernel_name, pass == 1 ? pass1 : " -DENTMAX_PASS=2", &kp);
        if (!st) st = set_prefill_args(ctx, kp, kernel_name, p, call->t, subs, NULL, 0);
        if (!st) st = set_entmax_mma_args(ctx, kp, p, call->t, tau);
        const int kend = (int)(p->offset + p->Tq < p->Tk ? p->offset + p->Tq : p->Tk);
        if (!st && pass == 2 && call->stats) st = count_unsettled(ctx, p, tau, &call->stats->threshold_rows_refined);
        for (int i = 0; !st && i < (pass == 1 ? 1 : entmax_newton_steps(p->desc.alpha, kend)); i++) {
            cl_event ev = NULL;
            /* named apart for TDACL_PROFILE */
            st = tdacl__launch(ctx, kp, 3, pass == 1 ? global1 : global, pass == 1 ? local1 : local, &ev,
                               pass == 1 ? "entmax threshold pass" : "entmax Newton step");
            /* each launch's time is added, the previous event released as the next takes its place */
            if (evs[pass] && ev) {
                cl_event old = evs[pass];
                evs[pass] = ev;
                tdacl_status s2 = add_event_ms(ctx, old, call->ms);
                if (!st) st = s2;
            } else {
                evs[pass] = ev;
            }
        }
    }
    return st ? st : set_entmax_mma_args(ctx, k, p, call->t, tau);
}

/* Top-theta post-softmax on the tensor cores, its first launch (cl/attention_mma.cl
 * TOPK_ROW_STATS, its program the call's options with that flag added): every row's
 * maximum and sum of e^(s - m) into *rowstat ([B*H][Tq] float2), for the second. */
static tdacl_status topk_mma_row_stats(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_attention_call *call,
                                       const tdacl_param_values *v, const char *kernel_name, cl_mem subs[4],
                                       const size_t global[3], const size_t local[3], cl_mem *rowstat, cl_event *ev)
{
    const tdacl_attention_plan *p = call->plan;
    cl_kernel k;
    tdacl_status st = pass_kernel(ctx, row, call, v, kernel_name, " -DTOPK_ROW_STATS=1", &k);
    if (!st) st = tdacl__scratch(ctx, TDACL_SCRATCH_ML, (size_t)(p->B * p->H * p->Tq) * 8, rowstat);
    if (!st) st = set_prefill_args(ctx, k, kernel_name, p, call->t, subs, NULL, 0);
    if (!st) st = set_topk_mma_args(ctx, k, p, call->t, TDACL_SDC_NONE, *rowstat);
    return st ? st : tdacl__launch(ctx, k, 3, global, local, ev, kernel_name);
}

/* One Top-theta pass over the keys: the call's own mode, or a step of the post-softmax split
 * (cl/attention_topk.cl: row_cut replaces the thresholds; cut_out makes the combine write the
 * rows' cuts). */
typedef struct topk_pass {
    cl_int post, sdc, vmc;
    cl_mem row_cut, cut_out;
} topk_pass;

/* The Top-theta kernel's arguments after the prefill ones (cl/attention_topk.cl): its tables
 * and fields, then the key split (part NULL: unsplit). */
static tdacl_status set_topk_args(tdacl_context *ctx, cl_kernel k, const tdacl_attention_plan *p,
                                  const tdacl_attention_tensors *t, cl_mem part, int64_t split_len, int64_t nsplit,
                                  const topk_pass *pass)
{
    const tdacl_attention_desc *d = &p->desc;
    cl_mem th = mem_of(t->thresholds), lm = mem_of(t->sdc_log_mass), vsum = mem_of(t->v_sum), cut = pass->row_cut;
    cl_long nthr = t->thresholds->shape[1], sl = split_len, vso = t->v_sum ? off_of(t->v_sum) : 0;
    cl_int ns = (cl_int)nsplit;
    const void *vals[13] = {&th, &nthr, &lm, &vsum, &vso, &pass->post, &pass->sdc, &d->sdc_gamma, &pass->vmc, &part,
                            &sl, &ns, &cut};
    const size_t sizes[13] = {sizeof th, sizeof nthr, sizeof lm, sizeof vsum, sizeof vso, sizeof(cl_int), sizeof(cl_int),
                              sizeof(cl_float), sizeof(cl_int), sizeof part, sizeof sl, sizeof ns, sizeof cut};
    for (cl_uint i = 0; i < 13; i++) {
        cl_int err = clSetKernelArg(k, PREFILL_NARGS + i, sizes[i], vals[i]);
        if (err) return tdacl__fail_cl(ctx, err, "clSetKernelArg(attention_topk_fwd, argument %u)", PREFILL_NARGS + i);
    }
    return TDACL_SUCCESS;
}

/* attention_topk_combine: the key splits of each (batch*head, query row) merged and finished. */
static tdacl_status launch_topk_combine(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_attention_call *call,
                                        const tdacl_param_values *v, cl_mem part, int64_t nsplit, const topk_pass *pass,
                                        cl_event *ev)
{
    const tdacl_attention_plan *p = call->plan;
    const tdacl_attention_tensors *t = call->t;
    const tdacl_attention_desc *d = &p->desc;
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, call, v, &opts);
    cl_kernel k;
    tdacl_status st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory")
                               : tdacl__variant_kernel(ctx, row, opts.data, "attention_topk_combine", &k);
    tdacl__sb_free(&opts);
    if (st) return st;
    launch_args a;
    launch_args_of(p, t, &a);
    cl_mem th = mem_of(t->thresholds), lm = mem_of(t->sdc_log_mass), vsum = mem_of(t->v_sum);
    cl_long nthr = t->thresholds->shape[1], Tq = p->Tq, Tk = p->Tk, offset = p->offset,
            vso = t->v_sum ? off_of(t->v_sum) : 0;
    cl_int ns = (cl_int)nsplit, sdc = pass->sdc, vmc = pass->vmc, H = (cl_int)p->H, dv = p->dv,
           norm = d->norm == TDACL_NORM_RMS;
    cl_mem cut_out = pass->cut_out;
    st = tdacl__set_args(ctx, k, "attention_topk_combine", sizeof part, &part, sizeof ns, &ns, sizeof th, &th,
                         sizeof nthr, &nthr, sizeof lm, &lm, sizeof vsum, &vsum, sizeof vso, &vso, sizeof a.vm, &a.vm,
                         sizeof a.vs, &a.vs,
                         sizeof a.vo, &a.vo, sizeof sdc, &sdc, sizeof(cl_float), &d->sdc_gamma, sizeof vmc, &vmc,
                         sizeof H, &H, sizeof Tq, &Tq, sizeof Tk, &Tk, sizeof offset, &offset, sizeof dv, &dv,
                         sizeof a.gm, &a.gm, sizeof a.om, &a.om, sizeof a.os, &a.os, sizeof a.oo, &a.oo, sizeof norm, &norm,
                         sizeof a.eps, &a.eps, sizeof a.out_scale, &a.out_scale, sizeof cut_out, &cut_out, (size_t)0);
    if (st) return st;
    size_t g[3] = {64, (size_t)(p->B * p->H), (size_t)p->Tq}, l[3] = {64, 1, 1};
    return tdacl__launch(ctx, k, 3, g, l, ev, "attention_topk_combine");
}

/* Top-theta's key-split decode: its passes and their combines (events into evs[0..3]).
 * Pre-softmax one pass.  Post-softmax two, the threshold being on weights whose denominator
 * is the whole row's: a first pass keeping no key (row cut +inf: every e^(a - m) into E), whose
 * combine writes each row's score cut m + ln E + ln theta, then a pass keeping the scores at
 * or above it with SDC exact, which gives each kept key e^(a - m) / (R + E), its softmax
 * weight (docs/spec.md section 1c). */
static tdacl_status topk_split_passes(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_attention_call *call,
                                      const tdacl_param_values *v, cl_kernel k, cl_mem subs[4], cl_mem stats_mem,
                                      int want, cl_mem part, int64_t split_len, int64_t nsplit, const size_t global[3],
                                      const size_t local[3], cl_event evs[4])
{
    const tdacl_attention_plan *p = call->plan;
    const tdacl_attention_desc *d = &p->desc;
    const topk_pass plain = {d->theta_post, (cl_int)d->sdc, d->vmc, NULL, NULL};
    tdacl_status st = TDACL_SUCCESS;
    if (!d->theta_post) {
        st = set_topk_args(ctx, k, p, call->t, part, split_len, nsplit, &plain);
        if (!st) st = tdacl__launch(ctx, k, 3, global, local, &evs[0], "attention_topk_fwd");
        return st ? st : launch_topk_combine(ctx, row, call, v, part, nsplit, &plain, &evs[1]);
    }
    cl_mem cut = NULL;
    st = tdacl__scratch(ctx, TDACL_SCRATCH_ML, (size_t)(p->B * p->H * p->Tq) * 4, &cut);
    const cl_float inf = INFINITY;
    cl_int err = st ? CL_SUCCESS
                    : clEnqueueFillBuffer(ctx->queue, cut, &inf, sizeof inf, 0, (size_t)(p->B * p->H * p->Tq) * 4, 0, NULL, NULL);
    if (err) st = tdacl__fail_cl(ctx, err, "clEnqueueFillBuffer(Top-theta row cuts)");
    const topk_pass first = {0, TDACL_SDC_NONE, 0, cut, cut}, second = {0, TDACL_SDC_EXACT, d->vmc, cut, NULL};
    /* the first pass counts nothing: its statistics would be the dropped keys of a cut at +inf */
    if (!st) st = set_prefill_args(ctx, k, "attention_topk_fwd", p, call->t, subs, NULL, 0);
    if (!st) st = set_topk_args(ctx, k, p, call->t, part, split_len, nsplit, &first);
    if (!st) st = tdacl__launch(ctx, k, 3, global, local, &evs[0], "attention_topk_fwd");
    if (!st) st = launch_topk_combine(ctx, row, call, v, part, nsplit, &first, &evs[1]);
    if (!st) st = set_prefill_args(ctx, k, "attention_topk_fwd", p, call->t, subs, stats_mem, want);
    if (!st) st = set_topk_args(ctx, k, p, call->t, part, split_len, nsplit, &second);
    if (!st) st = tdacl__launch(ctx, k, 3, global, local, &evs[2], "attention_topk_fwd");
    if (!st) st = launch_topk_combine(ctx, row, call, v, part, nsplit, &second, &evs[3]);
    return st;
}

/* Key tiles a prefill visits: per query block of bm rows (and key split), the tiles of bn keys up
 * to its last visible key, over every (batch, head). */
static uint64_t prefill_tiles(const tdacl_attention_plan *p, int64_t bm, int64_t bn, int64_t nsplit, int64_t split_len)
{
    uint64_t visited = 0;
    for (int64_t qb = 0; qb * bm < p->Tq; qb++) {
        int64_t last = (qb + 1) * bm < p->Tq ? (qb + 1) * bm : p->Tq;
        int64_t kend = p->offset + last < p->Tk ? p->offset + last : p->Tk;
        visited += nsplit > 1 ? split_tiles(kend, nsplit, split_len, bn) : (uint64_t)((kend + bn - 1) / bn);
    }
    return visited * (uint64_t)(p->B * p->H);
}

/* Each launch's device time into call->ms; the events released. */
static tdacl_status add_events_ms(tdacl_context *ctx, cl_event *evs, int n, double *ms, tdacl_status st)
{
    for (int i = 0; i < n; i++) {
        if (!evs[i]) continue;
        tdacl_status s2 = add_event_ms(ctx, evs[i], ms);
        if (!st) st = s2;
    }
    return st;
}

/* Both prefill variants take the same arguments; they differ in program, work-group size
 * and tile, which follow from their named parameters. */
tdacl_status tdacl__attention_prefill_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                             const tdacl_param_values *v)
{
    const tdacl_attention_call *call = callp;
    const tdacl_attention_plan *p = call->plan;
    const tdacl_attention_tensors *t = call->t;
    const tdacl_attention_desc *d = &p->desc;
    const tdacl_kernel_space *space = row->space;
    const int entmax = d->kind == TDACL_ATTN_ENTMAX && !row->matrix_units, topk = d->kind == TDACL_ATTN_TOPK_THETA && !row->matrix_units;
    const int entmax_mma = d->kind == TDACL_ATTN_ENTMAX && row->matrix_units;
    const int topk_mma = d->kind == TDACL_ATTN_TOPK_THETA && row->matrix_units;
    const char *kernel_name = entmax ? "attention_entmax_fwd" : topk ? "attention_topk_fwd"
                              : row->matrix_units ? "attention_mma_fwd" : "attention_fwd";
    int nt, bm, bn = tdacl__param(space, v, "BN");
    if (entmax || topk) { /* the row tiling of cl/attention_rows.cl */
        bm = tdacl__param(space, v, "BM");
        nt = bm * tdacl__param(space, v, "LPR");
    } else if (row->matrix_units) {
        nt = 32 * tdacl__param(space, v, "NWARPS");
        bm = 16 * tdacl__param(space, v, "MT") * tdacl__param(space, v, "NWARPS");
    } else {
        bm = tdacl__param(space, v, "BM");
        nt = (bm / tdacl__param(space, v, "TM")) * (bn / tdacl__param(space, v, "TN"));
    }
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, call, v, &opts);
    int64_t bh = p->B * p->H, nqb = (p->Tq + bm - 1) / bm;
    /* Top-theta's decode splits each row's keys (topk_split_passes) */
    int64_t nsplit = 1, split_len = p->Tk + bn;
    const int64_t kend_all = p->offset + p->Tq < p->Tk ? p->offset + p->Tq : p->Tk;
    if (topk && p->path == TDACL_PATH_DECODE)
        split_keys(ctx, kend_all, bn, tdacl__param(space, v, "WAVES"), bh * nqb, &nsplit, &split_len);
    cl_mem part = NULL;
    cl_kernel k;
    tdacl_status st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory")
                               : tdacl__variant_kernel(ctx, row, opts.data, kernel_name, &k);
    tdacl__sb_free(&opts);
    if (st) return st;

    /* inverse norms of q, k (and q2, k2) for normalised kinds */
    cl_event evs[4] = {0};
    cl_mem subs[4] = {0};
    st = prepare_norms(ctx, p, t, 1, subs, evs);
    cl_mem stats_mem = NULL;
    const int want = call->stats != NULL && d->want_stats;
    if (!st && want) st = zeroed_stats(ctx, (size_t)(bh * nqb * nsplit), &stats_mem);
    if (!st && nsplit > 1) {
        const size_t floats = (size_t)(bh * p->Tq * nsplit) * (size_t)(4 + 2 * p->dv);
        st = tdacl__scratch(ctx, TDACL_SCRATCH_PARTIAL, floats * 4, &part);
    }
    cl_event kevs[4] = {0};
    const size_t global[3] = {(size_t)nt, (size_t)bh, (size_t)(nqb * nsplit)}, local[3] = {(size_t)nt, 1, 1};
    if (!st) {
        st = set_prefill_args(ctx, k, kernel_name, p, t, subs, stats_mem, want);
        if (!st && entmax) st = set_entmax_args(ctx, k, p, t);
        if (!st && entmax_mma) st = entmax_mma_passes(ctx, row, call, v, k, kernel_name, subs, global, local, kevs);
        cl_mem rowstat = NULL;
        if (!st && topk_mma && d->theta_post)
            st = topk_mma_row_stats(ctx, row, call, v, kernel_name, subs, global, local, &rowstat, &kevs[1]);
        /* post-softmax: the weights' threshold as a score cut from the rows' sums, SDC exact */
        if (!st && topk_mma) st = set_topk_mma_args(ctx, k, p, t, d->theta_post ? TDACL_SDC_EXACT : (cl_int)d->sdc, rowstat);
        const topk_pass plain = {d->theta_post, (cl_int)d->sdc, d->vmc, NULL, NULL};
        if (!st && part) {
            st = topk_split_passes(ctx, row, call, v, k, subs, stats_mem, want, part, split_len, nsplit, global, local,
                                   kevs);
        } else if (!st) {
            if (topk) st = set_topk_args(ctx, k, p, t, NULL, split_len, 1, &plain);
            if (!st) st = tdacl__launch(ctx, k, 3, global, local, &kevs[0], kernel_name);
        }
    }
    st = add_events_ms(ctx, evs, 4, call->ms, st);
    st = add_events_ms(ctx, kevs, 4, call->ms, st);
    if (!st && call->stats) {
        /* a post-softmax split decode reads the keys in two passes */
        call->stats->tiles_visited = prefill_tiles(p, bm, bn, nsplit, split_len) * (topk && nsplit > 1 && d->theta_post ? 2 : 1);
        if (want) st = read_stats(ctx, p, stats_mem, (size_t)(bh * nqb * nsplit), call->stats);
    }
    return st;
}

/* attention.mma_views (attention_mma.c): view 1 as its one-view kind into an f32 buffer
 * [B, H, Tq, dv]; then, where the view kind is softmax, view 2 as the same kind built with
 * VIEWS_TAIL, whose epilogue combines its output with view 1's and applies the Norm
 * (cl/attention_mma.cl); otherwise view 2 into a second buffer and attention_views_combine
 * (tdacl__attention_views_tail says why).  A call that wants statistics (the bench's counting
 * run, on a plan made without them) runs on the one-pass kernel. */
tdacl_status tdacl__attention_views_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                           const tdacl_param_values *v)
{
    const tdacl_attention_call *call = callp;
    const tdacl_attention_plan *p = call->plan;
    const tdacl_attention_tensors *t = call->t;
    const tdacl_attention_desc *d = &p->desc;
    if (call->stats && d->want_stats) {
        const tdacl_variant_def *fused = tdacl__variant("attention.mma");
        tdacl_tuned tuned;
        tdacl__log(ctx, TDACL_LOG_DEBUG, "%s: statistics asked, so %s runs this call (the combined weights are counted in "
                   "one pass)", row->name, fused->name);
        tdacl_status st = tdacl__variant_params(ctx, fused, call, NULL, &tuned);
        return st ? st : fused->launch(ctx, fused, call, &tuned.values);
    }
    const tdacl_kernel_space *space = row->space;
    const int bn = tdacl__param(space, v, "BN"), nt = 32 * tdacl__param(space, v, "NWARPS");
    const int bm = 16 * tdacl__param(space, v, "MT") * tdacl__param(space, v, "NWARPS");
    const int64_t bh = p->B * p->H, nqb = (p->Tq + bm - 1) / bm;
    const int tail = tdacl__attention_views_tail(p);

    /* view 1 (and view 2 without the tail) writes f32 without the epilogue; with the tail,
     * view 2 takes the call's */
    tdacl_attention_plan one, two;
    tdacl__attention_one_view_plan(p, &one);
    two = one;
    if (tail) two.desc.norm = d->norm, two.desc.out_scale = d->out_scale;
    cl_mem view_out[2] = {NULL, NULL};
    const size_t bytes = (size_t)(bh * p->Tq) * (size_t)p->dv * sizeof(cl_float);
    tdacl_status st = TDACL_SUCCESS;
    for (int i = 0; i < 2 - tail && !st; i++) st = tdacl__scratch(ctx, TDACL_SCRATCH_VIEWS + i, bytes, &view_out[i]);
    cl_kernel k[2] = {NULL, NULL}, kc = NULL;
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, call, v, &opts);
    if (!st) st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory")
                           : tdacl__variant_kernel(ctx, row, opts.data, "attention_mma_fwd", &k[0]);
    k[1] = k[0];
    if (!st && tail) { /* view 2's program */
        tdacl__sb_printf(&opts, " -DVIEWS_TAIL=1");
        st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory")
                      : tdacl__variant_kernel(ctx, row, opts.data, "attention_mma_fwd", &k[1]);
    } else if (!st) {
        st = tdacl__variant_kernel(ctx, row, opts.data, "attention_views_combine", &kc);
    }
    tdacl__sb_free(&opts);
    if (st) return st;

    cl_event evs[4] = {0}, kevs[3] = {0};
    cl_mem subs[4] = {0};
    st = prepare_norms(ctx, p, t, 1, subs, evs);
    const size_t global[3] = {(size_t)nt, (size_t)bh, (size_t)nqb}, local[3] = {(size_t)nt, 1, 1};
    static const char *names[2][2] = {{"attention_mma_fwd (view 1)", "attention_mma_fwd (view 2)"},
                                      {"attention_mma_fwd (view 1)", "attention_mma_fwd (view 2 and the combine)"}};
    for (int i = 0; i < 2 && !st; i++) {
        tdacl_storage s = {view_out[i], bytes, 1};
        tdacl_tensor o = {ctx, &s, TDACL_F32, 4, {p->B, p->H, p->Tq, p->dv}, {p->H * p->Tq * p->dv, p->Tq * p->dv, p->dv, 1},
                          0, NULL, NULL};
        tdacl_attention_tensors tv = *t;
        if (i) tv.q = t->q2, tv.k = t->k2;
        if (!(i && tail)) tv.out = &o, tv.gain = NULL;
        cl_mem norms[4] = {subs[2 * i], subs[2 * i + 1], NULL, NULL};
        st = set_prefill_args(ctx, k[i], "attention_mma_fwd", i ? &two : &one, &tv, norms, NULL, 0);
        if (!st && i && tail) {
            cl_int err = clSetKernelArg(k[i], PREFILL_NARGS, sizeof view_out[0], &view_out[0]);
            if (err) st = tdacl__fail_cl(ctx, err, "clSetKernelArg(attention_mma_fwd, argument %u)", PREFILL_NARGS);
        }
        if (!st) st = tdacl__launch(ctx, k[i], 3, global, local, &kevs[i], names[tail][i]);
    }
    if (!st && !tail) {
        launch_args a;
        launch_args_of(p, t, &a);
        cl_int H = (cl_int)p->H, dv = p->dv, norm = d->norm == TDACL_NORM_RMS;
        cl_long Tq = p->Tq;
        st = tdacl__set_args(ctx, kc, "attention_views_combine", sizeof(cl_mem), &view_out[0], sizeof(cl_mem), &view_out[1],
                             sizeof a.gm, &a.gm, sizeof a.lm, &a.lm, sizeof a.om, &a.om, sizeof a.os, &a.os, sizeof a.oo, &a.oo,
                             sizeof H, &H, sizeof Tq, &Tq, sizeof dv, &dv, sizeof a.lambda, &a.lambda, sizeof norm, &norm,
                             sizeof a.eps, &a.eps, sizeof a.out_scale, &a.out_scale, (size_t)0);
        /* cl/attention_views.cl: dv / vec work-items a row, 128 / that rows a work-group */
        const size_t lanes = (size_t)(p->dvpad / tdacl__attention_views_vec(p)), rows = 128 / lanes;
        const size_t cg[3] = {lanes, (size_t)bh, ((size_t)p->Tq + rows - 1) / rows * rows}, cl[3] = {lanes, 1, rows};
        if (!st) st = tdacl__launch(ctx, kc, 3, cg, cl, &kevs[2], "attention_views_combine");
    }
    st = add_events_ms(ctx, evs, 4, call->ms, st);
    st = add_events_ms(ctx, kevs, 3, call->ms, st);
    if (!st && call->stats) call->stats->tiles_visited = 2 * prefill_tiles(p, bm, bn, 1, 0);
    return st;
}

/* How a decode splits its visible keys [0, kend) over work-groups: about `waves` work-groups
 * per compute unit in all, splits of a multiple of `unit` keys, none empty, at most
 * DECODE_MAX_SPLITS per (batch, head): one work-group combines a row's splits, serially, so
 * hundreds of splits (few heads, parameters tuned for many) make that combine the cost (H100,
 * softmax bf16 NTD=32 WAVES=32 at B1 H12 Tk 8192: 256 splits, a 2.35 ms model step). */
#define DECODE_MAX_SPLITS 64
static void split_keys(const tdacl_context *ctx, int64_t kend, int unit, int waves, int64_t bh, int64_t *nsplit,
                       int64_t *split_len)
{
    int64_t chunks = (kend + unit - 1) / unit;
    int64_t target = (int64_t)waves * (ctx->info.compute_units ? ctx->info.compute_units : 1);
    int64_t n = (target + bh - 1) / bh;
    if (n > DECODE_MAX_SPLITS) n = DECODE_MAX_SPLITS;
    if (n > chunks) n = chunks;
    if (n < 1) n = 1;
    *split_len = ((kend + n - 1) / n + unit - 1) / unit * unit;
    *nsplit = (kend + *split_len - 1) / *split_len;
}

/* The kernels of a decode row's program: the split kernel `part` and, when kr is not NULL,
 * the reduction. */
static tdacl_status decode_kernels(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_attention_call *call,
                                   const tdacl_param_values *v, const char *part, cl_kernel *kp, cl_kernel *kr)
{
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, call, v, &opts);
    tdacl_status st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "out of memory")
                               : tdacl__variant_kernel(ctx, row, opts.data, part, kp);
    if (!st && kr) st = tdacl__variant_kernel(ctx, row, opts.data, "attention_decode_reduce", kr);
    tdacl__sb_free(&opts);
    return st;
}

/* Tiles of `unit` keys the splits of one (batch, head) visit together. */
static uint64_t split_tiles(int64_t kend, int64_t nsplit, int64_t split_len, int64_t unit)
{
    uint64_t tiles = 0;
    for (int64_t s = 0; s < nsplit; s++) {
        int64_t lo = s * split_len, hi = lo + split_len < kend ? lo + split_len : kend;
        if (hi > lo) tiles += (uint64_t)((hi - lo + unit - 1) / unit);
    }
    return tiles;
}

/* Scratch for the splits' partials (attention_reduce.cl's layout, tqp rows per split). */
static tdacl_status partial_buffers(tdacl_context *ctx, const tdacl_attention_plan *p, size_t slots, int tqp,
                                    cl_mem *opart, cl_mem *mlpart)
{
    const int nw = tdacl__kind_weight_sets(p->desc.kind), nv = tdacl__kind_views(p->desc.kind);
    tdacl_status st = tdacl__scratch(ctx, TDACL_SCRATCH_PARTIAL, slots * (size_t)nw * (size_t)tqp * (size_t)p->dvpad * 4, opart);
    if (!st) st = tdacl__scratch(ctx, TDACL_SCRATCH_ML, slots * (size_t)nv * (size_t)tqp * 8, mlpart);
    return st;
}

/* attention_decode_reduce over nsplit splits: one work-group per (batch*head, query row). */
static tdacl_status launch_reduce(tdacl_context *ctx, cl_kernel kr, const tdacl_attention_plan *p,
                                  const tdacl_attention_tensors *t, cl_mem opart, cl_mem mlpart, int64_t nsplit,
                                  cl_event *ev)
{
    launch_args a;
    launch_args_of(p, t, &a);
    cl_int H = (cl_int)p->H, dv = p->dv, norm = p->desc.norm == TDACL_NORM_RMS, ns = (cl_int)nsplit;
    tdacl_status st = tdacl__set_args(ctx, kr, "attention_decode_reduce", sizeof opart, &opart, sizeof mlpart, &mlpart,
                                      sizeof a.gm, &a.gm, sizeof a.lm, &a.lm, sizeof a.om, &a.om, sizeof a.os, &a.os,
                                      sizeof a.oo, &a.oo, sizeof H, &H, sizeof ns, &ns, sizeof dv, &dv, sizeof a.lambda,
                                      &a.lambda, sizeof norm, &norm, sizeof a.eps, &a.eps, sizeof a.out_scale,
                                      &a.out_scale, (size_t)0);
    if (st) return st;
    const size_t nr = (size_t)tdacl__reduce_nt(p);
    size_t g[3] = {nr, (size_t)(p->B * p->H), (size_t)p->Tq}, l[3] = {nr, 1, 1};
    return tdacl__launch(ctx, kr, 3, g, l, ev, "attention_decode_reduce");
}

int tdacl__reduce_nt(const tdacl_attention_plan *p) { return p->dvpad >= 64 ? 64 : p->dvpad; }

tdacl_status tdacl__attention_decode_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                            const tdacl_param_values *v)
{
    const tdacl_attention_call *call = callp;
    const tdacl_attention_plan *p = call->plan;
    const tdacl_attention_desc *d = &p->desc;
    const int ntd = tdacl__param(row->space, v, "NTD"), waves = tdacl__param(row->space, v, "WAVES");
    int64_t bh = p->B * p->H;
    int64_t kend = p->offset + p->Tq < p->Tk ? p->offset + p->Tq : p->Tk;
    int64_t nsplit, split_len;
    split_keys(ctx, kend, ntd, waves, bh, &nsplit, &split_len);

    const int tqp = tdacl__decode_tqp(p->Tq);
    /* the last split combines in the same launch unless the device class compiles that out */
    const int fused = !strstr(tdacl__program_class_options(ctx, row->program.name), "-DFUSED_COMBINE=0");
    cl_kernel kp, kr = NULL;
    tdacl_status st = decode_kernels(ctx, row, call, v, "attention_decode_part", &kp, fused ? NULL : &kr);
    if (st) return st;

    cl_mem opart, mlpart, arrivals, stats_mem = NULL;
    size_t slots = (size_t)(bh * nsplit);
    if ((st = partial_buffers(ctx, p, slots, tqp, &opart, &mlpart))) return st;
    if ((st = tdacl__arrival_counters(ctx, (size_t)bh, &arrivals))) return st;
    int want = call->stats != NULL && d->want_stats;
    if (want && (st = tdacl__scratch(ctx, TDACL_SCRATCH_STATS, slots * 16, &stats_mem))) return st;
    launch_args a;
    launch_args_of(p, call->t, &a);
    cl_int H = (cl_int)p->H, Tq = (cl_int)p->Tq, dd = p->d, dv = p->dv, pmode = p->pmode,
           normalize = d->normalize && tdacl__kind_threshold(d->kind), want_i = want,
           norm = d->norm == TDACL_NORM_RMS;
    cl_long Tk = p->Tk, offset = p->offset, sl = split_len;
    cl_mem kv = p->kv_rows ? p->kv_rows->mem : NULL;
    st = tdacl__set_args(ctx, kp, "attention_decode_part", sizeof a.qm, &a.qm, sizeof a.km, &a.km, sizeof a.vm, &a.vm,
                         sizeof a.q2m, &a.q2m, sizeof a.k2m, &a.k2m, sizeof a.lm, &a.lm, sizeof opart, &opart, sizeof mlpart, &mlpart,
                         sizeof stats_mem, &stats_mem, sizeof arrivals, &arrivals, sizeof kv, &kv, sizeof a.gm, &a.gm,
                         sizeof a.om, &a.om,
                         sizeof a.os, &a.os, sizeof a.oo, &a.oo, sizeof norm, &norm, sizeof a.eps, &a.eps,
                         sizeof a.out_scale, &a.out_scale, sizeof a.qs, &a.qs, sizeof a.ks, &a.ks, sizeof a.vs, &a.vs,
                         sizeof a.q2s, &a.q2s, sizeof a.k2s, &a.k2s, sizeof a.qo, &a.qo, sizeof a.ko, &a.ko, sizeof a.vo, &a.vo,
                         sizeof a.q2o, &a.q2o, sizeof a.k2o, &a.k2o, sizeof H, &H, sizeof Tq, &Tq, sizeof Tk, &Tk,
                         sizeof offset, &offset, sizeof dd, &dd, sizeof dv, &dv, sizeof sl, &sl,
                         sizeof a.scale, &a.scale, sizeof a.beta, &a.beta, sizeof a.kappa, &a.kappa, sizeof pmode, &pmode,
                         sizeof a.power, &a.power, sizeof a.lambda, &a.lambda, sizeof normalize, &normalize,
                         sizeof want_i, &want_i, (size_t)0);
    cl_event e1 = NULL, e2 = NULL;
    if (!st) {
        size_t g[3] = {(size_t)ntd, (size_t)bh, (size_t)nsplit}, l[3] = {(size_t)ntd, 1, 1};
        st = tdacl__launch(ctx, kp, 3, g, l, &e1, "attention_decode_part");
    }
    if (!st && kr) st = launch_reduce(ctx, kr, p, call->t, opart, mlpart, nsplit, &e2);
    tdacl_status s2 = add_event_ms(ctx, e1, call->ms);
    if (!st) st = s2;
    s2 = add_event_ms(ctx, e2, call->ms);
    if (!st) st = s2;
    if (!st && call->stats) {
        /* the kernel counts rounds of LIST keys, not NTD chunks (tdacl__decode_list) */
        const int64_t list = tdacl__decode_list(ntd, tqp);
        if (p->kv_rows) {
            uint64_t tiles = 0;
            for (int64_t b = 0; b < p->B; b++) {
                int64_t end = p->kv_rows->host[2 * b + 1] + p->Tq;
                tiles += split_tiles(end < p->Tk ? end : p->Tk, nsplit, split_len, list);
            }
            call->stats->tiles_visited = tiles * (uint64_t)p->H;
        } else {
            call->stats->tiles_visited = split_tiles(kend, nsplit, split_len, list) * (uint64_t)bh;
        }
        if (want) st = read_stats(ctx, p, stats_mem, slots, call->stats);
    }
    return st;
}

/* The decode on the matrix units: the split form of attention_mma.cl (one warp of TQP = 16
 * query rows per work-group, BN-key tiles) writes each split's partials, which
 * attention_decode_reduce combines as for the SIMT decode. */
tdacl_status tdacl__attention_decode_mma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                                const tdacl_param_values *v)
{
    const tdacl_attention_call *call = callp;
    const tdacl_attention_plan *p = call->plan;
    const tdacl_attention_tensors *t = call->t;
    const int bn = tdacl__param(row->space, v, "BN"), waves = tdacl__param(row->space, v, "WAVES");
    const int64_t bh = p->B * p->H, kend = p->offset + p->Tq < p->Tk ? p->offset + p->Tq : p->Tk;
    int64_t nsplit, split_len;
    split_keys(ctx, kend, bn, waves, bh, &nsplit, &split_len);

    cl_kernel k, kr;
    tdacl_status st = decode_kernels(ctx, row, call, v, "attention_mma_split", &k, &kr);
    if (st) return st;

    const size_t slots = (size_t)(bh * nsplit);
    cl_mem opart, mlpart, stats_mem = NULL;
    if ((st = partial_buffers(ctx, p, slots, TDACL_DECODE_MMA_ROWS, &opart, &mlpart))) return st;
    const int want = call->stats != NULL && p->desc.want_stats;
    if (want && (st = zeroed_stats(ctx, slots, &stats_mem))) return st;
    cl_event evs[4] = {0}, e1 = NULL, e2 = NULL;
    cl_mem subs[4] = {0};
    st = prepare_norms(ctx, p, t, 0, subs, evs);
    if (!st) st = set_prefill_args(ctx, k, "attention_mma_split", p, t, subs, stats_mem, want);
    cl_long sl = split_len;
    cl_int err = CL_SUCCESS;
    if (!st && ((err = clSetKernelArg(k, PREFILL_NARGS, sizeof opart, &opart)) ||
                (err = clSetKernelArg(k, PREFILL_NARGS + 1, sizeof mlpart, &mlpart)) ||
                (err = clSetKernelArg(k, PREFILL_NARGS + 2, sizeof sl, &sl))))
        st = tdacl__fail_cl(ctx, err, "clSetKernelArg(attention_mma_split, split arguments)");
    if (!st) {
        size_t g[3] = {32, (size_t)bh, (size_t)nsplit}, l[3] = {32, 1, 1};
        st = tdacl__launch(ctx, k, 3, g, l, &e1, "attention_mma_split");
    }
    if (!st) st = launch_reduce(ctx, kr, p, t, opart, mlpart, nsplit, &e2);
    cl_event all[6] = {evs[0], evs[1], evs[2], evs[3], e1, e2};
    for (int i = 0; i < 6; i++) {
        tdacl_status s2 = add_event_ms(ctx, all[i], call->ms);
        if (!st) st = s2;
    }
    if (!st && call->stats) {
        call->stats->tiles_visited = split_tiles(kend, nsplit, split_len, bn) * (uint64_t)bh;
        if (want) st = read_stats(ctx, p, stats_mem, slots, call->stats);
    }
    return st;
}

tdacl_status tdacl__attention_run(tdacl_context *ctx, const tdacl_attention_plan *p,
                                  const tdacl_attention_tensors *t, const tdacl_param_values *force,
                                  tdacl_tuned *used, tdacl_attention_stats *stats)
{
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->path = p->path;
        stats->variant = p->row->matrix_units ? TDACL_VARIANT_MMA : TDACL_VARIANT_SIMT;
        if (p->kv_rows) {
            for (int64_t b = 0; b < p->B; b++) {
                const int64_t pos = p->kv_rows->host[2 * b + 1];
                stats->visible_pairs += tdacl__visible_pairs(p->Tq, pos + p->Tq, pos) * (uint64_t)p->H;
            }
        } else {
            stats->visible_pairs = tdacl__visible_pairs(p->Tq, p->Tk, p->offset) * (uint64_t)(p->B * p->H);
        }
    }
    if (p->Tq == 0 || p->B * p->H == 0) return TDACL_SUCCESS;
    double ms = 0;
    const tdacl_attention_call call = {p, t, stats, stats ? &ms : NULL};
    tdacl_tuned tuned;
    tdacl_status st = tdacl__variant_params(ctx, p->row, &call, force, &tuned);
    if (st) return st;
    if (used) *used = tuned;
    st = p->row->launch(ctx, p->row, &call, &tuned.values);
    if (stats) {
        stats->kernel_ms = ms;
        stats->sparsity = stats->visible_pairs ? (double)stats->zero_weights / (double)stats->visible_pairs : 0.0;
    }
    return st;
}

tdacl_status tdacl_attention(tdacl_context *ctx, const tdacl_attention_desc *desc,
                             const tdacl_attention_tensors *tensors, tdacl_attention_stats *stats)
{
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_attention: ctx is NULL");
    tdacl_attention_plan plan;
    tdacl_status st = tdacl__attention_plan(ctx, desc, tensors, &plan);
    if (st) return st;
    return tdacl__attention_run(ctx, &plan, tensors, NULL, NULL, stats);
}

tdacl_status tdacl__attention_rows(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                   const tdacl_attention_tensors *tensors, const tdacl_kv_rows *rows,
                                   const cl_mem *norms)
{
    tdacl_attention_plan plan;
    tdacl_status st = tdacl__attention_plan_rows(ctx, desc, tensors, rows, &plan);
    if (st) return st;
    if (norms && plan.Tq != plan.Tk)
        return tdacl__fail(ctx, TDACL_ERR_INTERNAL, "attention: given inverse norms need Tq = Tk (got %lld, %lld)",
                           (long long)plan.Tq, (long long)plan.Tk);
    for (int i = 0; norms && i < 4; i++) plan.given_norms[i] = norms[i];
    return tdacl__attention_run(ctx, &plan, tensors, NULL, NULL, NULL);
}
