/* GPT-family decoders (docs/spec.md section 4): weights from a checkpoint, the forward pass for
 * prefill and for KV-cache decode, and sampling.  Read top to bottom:
 *
 *   x = wte[tokens] (+ wpe[positions])                       x   [rows, C]
 *   for each layer:
 *     xn  = Norm1(x)                                          xn  [rows, C]
 *     qkv = xn @ W_attn + b_attn                              qkv [rows, kC]  k = 3 or 5
 *     RoPE on the q/k views of qkv (rope models)
 *     k/v views -> KV cache at their positions                cache [B, ctx, C]
 *     att = Attention(q views of qkv, cache)                  att [rows, C]  (token-major)
 *     x  += att @ W_proj + b_proj
 *     x  += gelu(Norm2(x) @ W_fc + b_fc) @ W_fcproj + b_fcproj   (hidden [rows, 4C])
 *   logits = Normf(x) @ wte^T (or lm_head^T)                  logits [rows, V]
 *
 * Rows are token-major: row = b * T + t.  All activations are fp32; weight matrices are
 * fp32 or bf16 on the device (a load option). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/kinds.h"
#include "model/checkpoint.h"
#include "model/hub.h"
#include "model/model.h"
#include "model/model_impl.h"
#include "model/thresholds.h"
#include "ops/attention.h"
#include "ops/gemm.h"

/* ---- helpers ---- */

static void free_tensor(tdacl_tensor **t)
{
    tdacl_tensor_destroy(*t);
    *t = NULL;
}

/* A device copy of checkpoint tensor `name` in dtype (or its file dtype when dtype < 0). */
/* Elements of unaligned checkpoint data whose exponent bits are all ones (Inf or NaN). */
static int64_t count_nonfinite(const unsigned char *p, tdacl_dtype dt, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (dt == TDACL_F32) {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            bad += (u & 0x7f800000u) == 0x7f800000u;
        } else {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            bad += dt == TDACL_BF16 ? (h & 0x7f80u) == 0x7f80u : (h & 0x7c00u) == 0x7c00u;
        }
    }
    return bad;
}

/* Checkpoint tensor `name` on the device in dtype (< 0: its own); layer l's part `part` (l < 0:
 * a tensor of the model's own). */
static tdacl_status upload_part(tdacl_model *m, const tdacl_checkpoint *ck, const char *name, int dtype, int l, int part,
                                tdacl_tensor **out)
{
    const tdacl_ckpt_tensor *ct = tdacl__checkpoint_get(ck, name);
    if (!ct) return tdacl__fail(m->ctx, TDACL_ERR_FORMAT, "tdacl_model_load: tensor %s is missing", name);
    int64_t shape[4], n = 1;
    int nd = ct->ndim ? ct->ndim : 1;
    for (int i = 0; i < nd; i++) shape[i] = ct->ndim ? ct->shape[i] : 1, n *= shape[i];
    const tdacl_dtype dt = dtype < 0 ? ct->dtype : (tdacl_dtype)dtype;
    tdacl_status st = l < 0 ? tdacl_tensor_create(m->ctx, dt, nd, shape, out)
                            : tdacl__model_part_create(m, l, part, dt, nd, shape, out);
    if (!st && !(l >= 0 && tdacl__model_part_staged(m, l, part, dt, ct->data, ct->dtype, n)))
        st = tdacl_tensor_upload(*out, ct->data, ct->dtype, n);
    /* policy (docs/spec.md): non-finite weights are loaded as they are, with one warning
     * per model, since they make the logits NaN; non-finite scalars are refused */
    int64_t bad = st ? 0 : count_nonfinite(ct->data, ct->dtype, n);
    if (bad && !m->warned_nonfinite) {
        m->warned_nonfinite = 1;
        tdacl__log(m->ctx, TDACL_LOG_WARN, "tdacl_model_load: tensor %s holds %lld non-finite value(s) (Inf/NaN); "
                   "the logits will not be finite", name, (long long)bad);
    }
    if (!st) {
        m->info.parameters += (uint64_t)n;
        m->info.weight_bytes += (uint64_t)n * tdacl_dtype_size((*out)->dtype);
    }
    return st;
}

static tdacl_status upload(tdacl_model *m, const tdacl_checkpoint *ck, const char *name, int dtype, tdacl_tensor **out)
{
    return upload_part(m, ck, name, dtype, -1, 0, out);
}

static float scalar(const tdacl_checkpoint *ck, const char *name, int index)
{
    const tdacl_ckpt_tensor *t = tdacl__checkpoint_get(ck, name);
    if (!t) return NAN;
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    if (index >= n) index = 0; /* a scalar applies to every head */
    /* tensor data in a safetensors file need not be aligned: copy bytes */
    const unsigned char *p = (const unsigned char *)t->data + (size_t)index * tdacl_dtype_size(t->dtype);
    float f;
    uint16_t h;
    switch (t->dtype) {
    case TDACL_F32: memcpy(&f, p, 4); return f;
    case TDACL_BF16: memcpy(&h, p, 2); return tdacl_bf16_to_f32(h);
    case TDACL_F16: memcpy(&h, p, 2); return tdacl_f16_to_f32(h);
    }
    return NAN;
}

/* ---- loading ---- */

void tdacl_model_desc_init(tdacl_model_desc *desc)
{
    if (!desc) return;
    memset(desc, 0, sizeof *desc);
    desc->weight_dtype = TDACL_F32;
    desc->activation_dtype = TDACL_F32;
    desc->max_batch = 1;
    desc->max_context = 0;
    desc->topk_sdc = -1;
    desc->topk_vmc = -1;
}

/* An fp32 device tensor of shape[0..nd) holding host values. */
static tdacl_status device_f32(tdacl_model *m, int nd, const int64_t *shape, const float *vals, tdacl_tensor **out)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    tdacl_status st = tdacl_tensor_create(m->ctx, TDACL_F32, nd, shape, out);
    return st ? st : tdacl_tensor_upload(*out, vals, TDACL_F32, n);
}

/* Layer l's entmax alpha (h.l.attn.entmax_alpha, else the config's) and per-head inverse
 * temperature terms (h.l.attn.entmax_delta / _beta / _gamma, scalars or [H], else the
 * config's) as the [H, 3] tensor the attention takes. */
static tdacl_status load_entmax(tdacl_model *m, const tdacl_checkpoint *ck, int l)
{
    layer *L = &m->layers[l];
    char n[160];
    snprintf(n, sizeof n, "h.%d.attn.entmax_alpha", l);
    L->alpha = tdacl__checkpoint_get(ck, n) ? scalar(ck, n, 0) : m->cfg.alpha;
    if (!(L->alpha > 1.0f && L->alpha <= 8.0f))
        return tdacl__fail(m->ctx, TDACL_ERR_FORMAT, "tdacl_model_load: %s = %g is outside (1, 8]", n, L->alpha);
    static const char *const terms[3] = {"delta", "beta", "gamma"};
    const float defaults[3] = {m->cfg.temp_delta, m->cfg.temp_beta, m->cfg.temp_gamma};
    float *t = malloc((size_t)m->H * 3 * sizeof *t);
    if (!t) return tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl_model_load: out of memory");
    tdacl_status st = TDACL_SUCCESS;
    for (int j = 0; j < 3 && !st; j++) {
        snprintf(n, sizeof n, "h.%d.attn.entmax_%s", l, terms[j]);
        const int have = tdacl__checkpoint_get(ck, n) != NULL;
        for (int h = 0; h < m->H && !st; h++) {
            t[3 * h + j] = have ? scalar(ck, n, h) : defaults[j];
            if (!isfinite(t[3 * h + j]))
                st = tdacl__fail(m->ctx, TDACL_ERR_FORMAT, "tdacl_model_load: %s[%d] = %g is not finite", n, h, t[3 * h + j]);
        }
    }
    int64_t shape[2] = {m->H, 3};
    if (!st) st = device_f32(m, 2, shape, t, &L->temps);
    free(t);
    return st;
}

/* Top-theta: the threshold file (desc.thresholds, else the config's, relative to the model
 * directory) as each layer's tables, the SDC and VMC settings, and VMC's running V sums. */
static tdacl_status load_topk(tdacl_model *m, const tdacl_model_desc *desc, const char *dir)
{
    const char *call = "tdacl_model_load";
    char path[TDACL_PATH_LIMIT];
    if (desc->thresholds) snprintf(path, sizeof path, "%s", desc->thresholds);
    else if (m->cfg.thresholds[0] == '/') snprintf(path, sizeof path, "%s", m->cfg.thresholds);
    else if (m->cfg.thresholds[0]) snprintf(path, sizeof path, "%s/%s", dir, m->cfg.thresholds);
    else
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: attention kind topk_theta needs a threshold file "
                           "(config.json attention.thresholds or desc.thresholds; tdacl calibrate writes one)", call);
    if (desc->topk_sdc < -1 || desc->topk_sdc > TDACL_SDC_OFFLINE)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.topk_sdc %d is not a tdacl_sdc or -1", call,
                           desc->topk_sdc);
    if (desc->topk_vmc < -1 || desc->topk_vmc > 1)
        return tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.topk_vmc must be -1, 0 or 1 (got %d)", call,
                           desc->topk_vmc);
    m->sdc = (tdacl_sdc)(desc->topk_sdc >= 0 ? desc->topk_sdc : m->cfg.sdc);
    m->vmc = desc->topk_vmc >= 0 ? desc->topk_vmc : m->cfg.vmc;
    m->sdc_gamma = m->cfg.sdc_gamma;
    tdacl_thresholds th;
    tdacl_status st = tdacl__thresholds_read(path, m->info.n_layer, m->H, m->info.max_context, &th);
    if (st) return tdacl__fail(m->ctx, st, "%s", tdacl_last_error(NULL));
    m->theta_post = th.post;
    if (th.post && m->sdc != TDACL_SDC_NONE)
        st = tdacl__fail(m->ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s holds post-softmax thresholds, which take no SDC "
                         "(attention.sdc must be none)", call, path);
    for (int l = 0; !st && l < m->info.n_layer; l++) {
        layer *L = &m->layers[l];
        const tdacl_threshold_layer *tl = &th.layers[l];
        int64_t shape[2] = {m->H, tl->rows}, vs[2] = {m->info.max_batch, m->C};
        if (m->sdc == TDACL_SDC_OFFLINE && !tl->log_mass)
            st = tdacl__fail(m->ctx, TDACL_ERR_FORMAT, "%s: %s has no layers[%d].sdc_log_mass, which attention.sdc "
                             "offline needs", call, path, l);
        if (!st) st = device_f32(m, 2, shape, tl->theta, &L->thresholds);
        if (!st && m->sdc == TDACL_SDC_OFFLINE) st = device_f32(m, 2, shape, tl->log_mass, &L->log_mass);
        if (!st && m->vmc) st = tdacl_tensor_create(m->ctx, TDACL_F32, 2, vs, &L->v_sum);
    }
    tdacl__thresholds_free(&th);
    return st;
}

static tdacl_status load_layer(tdacl_model *m, const tdacl_checkpoint *ck, int l)
{
    layer *L = &m->layers[l];
    char n[160];
    tdacl_status st = TDACL_SUCCESS;
    /* h.<l>.<suffix> (model_pack.c's table): biases of the layer norms only with layernorm,
     * the head norm's gain only with head_norm rms */
    for (int i = 0; i < TDACL_LAYER_PARTS && !st; i++) {
        if (!tdacl__layer_part_present(m, i)) continue;
        const tdacl_layer_part *p = &tdacl__layer_parts[i];
        snprintf(n, sizeof n, "h.%d.%s", l, p->suffix);
        st = upload_part(m, ck, n, p->matrix ? (int)m->wdt : TDACL_F32, l, i, (tdacl_tensor **)((char *)L + p->at));
    }
    if (st) return st;
    int kind = m->cfg.attn_kind;
    L->beta = m->cfg.beta;
    if (tdacl__kind_threshold(kind)) {
        snprintf(n, sizeof n, "h.%d.attn.beta", l);
        if (tdacl__checkpoint_get(ck, n)) L->beta = scalar(ck, n, 0); /* absent: the config's beta */
        if (!(L->beta >= 0) || !isfinite(L->beta))
            return tdacl__fail(m->ctx, TDACL_ERR_FORMAT, "tdacl_model_load: %s = %g is not a finite value >= 0", n, L->beta);
    }
    if (tdacl__kind(kind)->lambda) {
        snprintf(n, sizeof n, "h.%d.attn.lambda", l);
        float *lam = malloc((size_t)m->H * sizeof *lam);
        if (!lam) return tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl_model_load: out of memory");
        for (int h = 0; h < m->H; h++) {
            lam[h] = scalar(ck, n, h);
            if (!isfinite(lam[h])) {
                float bad = lam[h];
                free(lam);
                return tdacl__fail(m->ctx, TDACL_ERR_FORMAT, "tdacl_model_load: %s[%d] = %g is not finite", n, h, bad);
            }
        }
        int64_t hs = m->H;
        st = tdacl_tensor_create(m->ctx, TDACL_F32, 1, &hs, &L->lambdas);
        if (!st) st = tdacl_tensor_upload(L->lambdas, lam, TDACL_F32, hs);
        free(lam);
        if (st) return st;
    }
    if (kind == TDACL_ATTN_ENTMAX && (st = load_entmax(m, ck, l))) return st;
    /* KV cache, token-major [B, ctx, C] per projected view */
    int64_t cs[3] = {m->info.max_batch, m->info.max_context, m->C};
    st = tdacl__model_part_create(m, l, TDACL_PART_KCACHE, m->adt, 3, cs, &L->kcache);
    if (!st) st = tdacl__model_part_create(m, l, TDACL_PART_VCACHE, m->adt, 3, cs, &L->vcache);
    if (!st && m->kqkv == 5) st = tdacl_tensor_create(m->ctx, m->adt, 3, cs, &L->k2cache);
    return st;
}

/* cos/sin of pos * theta^(-2m/d) for every cached position, in double (NTK-aware scaling
 * raises the base: theta * factor^(d / (d - 2))). */
static tdacl_status rope_tables(tdacl_model *m)
{
    int half = m->d / 2;
    size_t n = (size_t)m->info.max_context * (size_t)half;
    float *c = malloc(n * sizeof *c), *s = malloc(n * sizeof *s);
    tdacl_status st = TDACL_SUCCESS;
    if (!c || !s) st = tdacl__fail(m->ctx, TDACL_ERR_OUT_OF_MEMORY, "tdacl_model_load: out of memory (RoPE tables)");
    double theta = m->cfg.rope_theta;
    if (m->cfg.rope_ntk_factor != 1.0f && m->d > 2)
        theta *= pow((double)m->cfg.rope_ntk_factor, (double)m->d / (double)(m->d - 2));
    for (int p = 0; !st && p < m->info.max_context; p++)
        for (int i = 0; i < half; i++) {
            double a = (double)p * pow(theta, -2.0 * i / (double)m->d);
            c[(size_t)p * half + i] = (float)cos(a);
            s[(size_t)p * half + i] = (float)sin(a);
        }
    cl_int err = CL_SUCCESS;
    if (!st) m->rope_cos = clCreateBuffer(m->ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, c, &err);
    if (!st && !err) m->rope_sin = clCreateBuffer(m->ctx->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * 4, s, &err);
    if (!st && err) st = tdacl__fail_cl(m->ctx, err, "tdacl_model_load: RoPE tables");
    free(c), free(s);
    return st;
}

static tdacl_status destroy_child(void *m) { return tdacl_model_destroy(m); }

tdacl_status tdacl_model_load(tdacl_context *ctx, const tdacl_model_desc *desc, tdacl_model **out)
{
    const char *call = "tdacl_model_load";
    if (!ctx) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "%s: ctx is NULL", call);
    if (!desc || !out || !desc->path)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: %s is NULL", call, !desc ? "desc" : !out ? "out" : "desc.path");
    *out = NULL;
    if (desc->weight_dtype != TDACL_F32 && desc->weight_dtype != TDACL_BF16)
        return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: desc.weight_dtype must be TDACL_F32 or TDACL_BF16", call);
    if (desc->activation_dtype != TDACL_F32 && desc->activation_dtype != TDACL_BF16)
        return tdacl__fail(ctx, TDACL_ERR_DTYPE, "%s: desc.activation_dtype must be TDACL_F32 or TDACL_BF16", call);
    if (desc->max_batch < 1 || desc->max_batch > 4096)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.max_batch %d is outside 1..4096", call, desc->max_batch);
    if (desc->max_context < 0)
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.max_context %d is negative", call, desc->max_context);
    tdacl_checkpoint *ck;
    char dir[TDACL_PATH_LIMIT];
    tdacl_status st = tdacl__resolve_model_dir(desc->path, dir, sizeof dir);
    if (!st) st = tdacl__checkpoint_open(dir, &ck);
    if (st) return tdacl__fail(ctx, st, "%s", tdacl_last_error(NULL));
    tdacl_model *m = calloc(1, sizeof *m);
    if (!m) {
        tdacl__checkpoint_close(ck);
        return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", call);
    }
    m->ctx = ctx;
    if ((st = tdacl__child_add(ctx, m, destroy_child))) {
        free(m);
        tdacl__checkpoint_close(ck);
        return st;
    }
    m->cfg = *tdacl__checkpoint_config(ck);
    m->wdt = desc->weight_dtype;
    m->adt = desc->activation_dtype;
    m->C = m->cfg.n_embd;
    m->H = m->cfg.n_head;
    m->d = m->C / m->H;
    m->kqkv = tdacl__config_qkv_blocks(&m->cfg);
    tdacl_model_info *i = &m->info;
    i->n_layer = m->cfg.n_layer, i->n_head = m->H, i->n_embd = m->C, i->vocab_size = m->cfg.vocab_size;
    i->n_positions = m->cfg.n_positions, i->head_dim = m->d;
    i->attention = m->cfg.attn_kind, i->position = m->cfg.position, i->head_norm = m->cfg.head_norm;
    i->tied_lm_head = m->cfg.tie_word_embeddings;
    i->weight_dtype = m->wdt, i->activation_dtype = m->adt;
    i->max_batch = desc->max_batch;
    i->max_context = desc->max_context ? desc->max_context : m->cfg.n_positions;
    if (m->cfg.position == TDACL_POSITION_LEARNED && i->max_context > m->cfg.n_positions) {
        int npos = m->cfg.n_positions; /* read before m is freed */
        tdacl_model_destroy(m);
        tdacl__checkpoint_close(ck);
        return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT,
                           "%s: desc.max_context %d exceeds n_positions %d of a learned-position model", call,
                           desc->max_context, npos);
    }
    m->layers = calloc((size_t)i->n_layer, sizeof *m->layers);
    m->slot_len = calloc((size_t)i->max_batch, sizeof *m->slot_len);
    m->rowmap_host = calloc((size_t)ROWMAP_RING * 2 * (size_t)i->max_batch, sizeof *m->rowmap_host);
    if (!m->layers || !m->slot_len || !m->rowmap_host) st = tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", call);
    if (!st) st = upload(m, ck, "wte.weight", (int)m->wdt, &m->wte);
    if (!st && m->cfg.position == TDACL_POSITION_LEARNED) st = upload(m, ck, "wpe.weight", (int)m->wdt, &m->wpe);
    if (!st) st = tdacl__model_pack_plan(m, ck);
    for (int l = 0; !st && l < i->n_layer; l++) st = load_layer(m, ck, l);
    if (!st) st = tdacl__model_pack_upload(m);
    /* desc.thresholds turns a softmax model into Top-theta (its thresholds are softmax's) */
    m->kind = m->cfg.attn_kind;
    if (!st && desc->thresholds && m->kind != TDACL_ATTN_SOFTMAX && m->kind != TDACL_ATTN_TOPK_THETA)
        st = tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "%s: desc.thresholds applies to softmax and topk_theta "
                         "models, not %s", call, tdacl__kind_name(m->kind));
    if (!st && desc->thresholds) m->kind = TDACL_ATTN_TOPK_THETA;
    i->attention = m->kind;
    if (!st && m->kind == TDACL_ATTN_TOPK_THETA) st = load_topk(m, desc, dir);
    if (!st) st = upload(m, ck, "ln_f.weight", TDACL_F32, &m->lnf_w);
    if (!st && m->cfg.norm_type == 0) st = upload(m, ck, "ln_f.bias", TDACL_F32, &m->lnf_b);
    if (!st && !m->cfg.tie_word_embeddings) st = upload(m, ck, "lm_head.weight", (int)m->wdt, &m->lm_head);
    if (!st && m->cfg.position == TDACL_POSITION_ROPE) st = rope_tables(m);
    if (!st) st = tdacl_finish(ctx);
    tdacl__checkpoint_close(ck);
    if (st) {
        tdacl_model_destroy(m);
        return st;
    }
    tdacl__log(ctx, TDACL_LOG_INFO, "model %s: %d layers, %d heads, C=%d, vocab %d, %s attention, %s positions, %.1f M parameters",
               desc->path, i->n_layer, i->n_head, i->n_embd, i->vocab_size, tdacl__kind_name(i->attention),
               i->position == TDACL_POSITION_ROPE ? "rope" : "learned", (double)i->parameters * 1e-6);
    *out = m;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_model_destroy(tdacl_model *m)
{
    if (!m) return TDACL_SUCCESS;
    tdacl__child_remove(m->ctx, m);
    for (int l = 0; m->layers && l < m->info.n_layer; l++) {
        layer *L = &m->layers[l];
        tdacl_tensor **all[] = {&L->ln1_w, &L->ln1_b, &L->attn_w, &L->attn_b, &L->proj_w, &L->proj_b,
                                &L->ln2_w, &L->ln2_b, &L->fc_w, &L->fc_b, &L->fcproj_w, &L->fcproj_b,
                                &L->head_norm, &L->lambdas, &L->kcache, &L->k2cache, &L->vcache,
                                &L->temps, &L->thresholds, &L->log_mass, &L->v_sum};
        for (size_t k = 0; k < TDACL_ARRAY_LEN(all); k++) free_tensor(all[k]);
    }
    free(m->layers);
    tdacl__model_pack_release(m); /* after the sub-buffers in them */
    tdacl_tensor **globals[] = {&m->wte, &m->wpe, &m->lnf_w, &m->lnf_b, &m->lm_head, &m->x, &m->xn,
                                &m->qkv, &m->att, &m->hid, &m->last, &m->logits, &m->inv_norm[0],
                                &m->inv_norm[1], &m->inv_norm[2], &m->inv_norm[3]};
    for (size_t k = 0; k < TDACL_ARRAY_LEN(globals); k++) free_tensor(globals[k]);
    if (m->rope_cos) clReleaseMemObject(m->rope_cos);
    if (m->rope_sin) clReleaseMemObject(m->rope_sin);
    if (m->drawn_ev) {
        clWaitForEvents(1, &m->drawn_ev);
        clReleaseEvent(m->drawn_ev);
    }
    free(m->drawn);
    if (m->read_queue) clReleaseCommandQueue(m->read_queue);
    tdacl__model_decode_release(m);
    if (m->tokens) clReleaseMemObject(m->tokens);
    for (int r = 0; r < ROWMAP_RING; r++)
        if (m->rowmap_ev[r]) clWaitForEvents(1, &m->rowmap_ev[r]), clReleaseEvent(m->rowmap_ev[r]);
    if (m->rowmap) clReleaseMemObject(m->rowmap);
    free(m->rowmap_host);
    free(m->slot_len);
    free(m);
    return TDACL_SUCCESS;
}

TDACL_GETTER(tdacl_model_get_info, tdacl_model, "model", tdacl_model_info, "info", o->info)

/* ---- activations ---- */

static tdacl_status ensure(tdacl_model *m, tdacl_tensor **t, tdacl_dtype dt, int64_t rows, int64_t cols)
{
    if (*t && (*t)->shape[0] >= rows && (*t)->shape[1] == cols) return TDACL_SUCCESS;
    free_tensor(t);
    int64_t shape[2] = {rows, cols};
    return tdacl_tensor_create(m->ctx, dt, 2, shape, t);
}

static tdacl_status activations(tdacl_model *m, int64_t rows)
{
    if (rows <= m->rows_cap) return TDACL_SUCCESS;
    /* the residual stream stays f32 (docs/spec.md section 4.6) */
    tdacl_status st = ensure(m, &m->x, TDACL_F32, rows, m->C);
    if (!st) st = ensure(m, &m->xn, m->adt, rows, m->C);
    if (!st) st = ensure(m, &m->qkv, m->adt, rows, (int64_t)m->kqkv * m->C);
    if (!st) st = ensure(m, &m->att, m->adt, rows, m->C);
    if (!st) st = ensure(m, &m->hid, m->adt, rows, 4 * (int64_t)m->C);
    if (!st) m->rows_cap = rows;
    return st;
}

/* ---- kernels ---- */

tdacl_status tdacl__model_layers_kernel(tdacl_model *m, const char *name, const char *extra, cl_kernel *k)
{
    char opts[160], adt[16] = "";
    if (m->adt != TDACL_F32) snprintf(adt, sizeof adt, " -DADT=%d", (int)m->adt);
    snprintf(opts, sizeof opts, "-DWDT=%d%s%s%s", (int)m->wdt, adt, extra && *extra ? " " : "", extra ? extra : "");
    return tdacl__variant_kernel(m->ctx, tdacl__variant_of_op(TDACL_OP_LAYERS), opts, name, k);
}

static cl_mem mem(const tdacl_tensor *t) { return t ? t->storage->mem : NULL; }

/* The row map of a step (NULL: sequences 0..B-1 at positions pos0 ..). */
static cl_mem rowmap_of(const tdacl_kv_rows *kv) { return kv ? kv->mem : NULL; }

tdacl_status tdacl__model_embed(tdacl_model *m, int rows, int T, int pos0, const tdacl_kv_rows *kv)
{
    cl_kernel k;
    tdacl_status st = tdacl__model_layers_kernel(m, "embed", NULL, &k);
    if (st) return st;
    cl_mem x = mem(m->x), wte = mem(m->wte), wpe = mem(m->wpe), rm = rowmap_of(kv);
    cl_int C = m->C, cT = T, p0 = pos0, r = rows;
    st = tdacl__set_args(m->ctx, k, "embed", sizeof x, &x, sizeof m->tokens, &m->tokens, sizeof wte, &wte,
                         sizeof wpe, &wpe, sizeof C, &C, sizeof cT, &cT, sizeof p0, &p0, sizeof r, &r, sizeof rm, &rm,
                         (size_t)0);
    size_t g[2] = {(size_t)m->C, (size_t)rows}, l[2] = {64, 1};
    return st ? st : tdacl__launch(m->ctx, k, 2, g, l, NULL, "embed");
}

/* out[rows, C] = Norm(in) with gain w and bias b (b NULL: RMSNorm). */
static tdacl_status norm(tdacl_model *m, tdacl_tensor *out, const tdacl_tensor *in, const tdacl_tensor *w,
                         const tdacl_tensor *b, int rows)
{
    cl_kernel k;
    tdacl_status st = tdacl__model_layers_kernel(m, "norm_rows", NULL, &k);
    if (st) return st;
    cl_mem o = mem(out), x = mem(in), wm = mem(w), bm = mem(b);
    cl_int C = m->C, rms = m->cfg.norm_type == 1;
    cl_float eps = m->cfg.layer_norm_epsilon;
    st = tdacl__set_args(m->ctx, k, "norm_rows", sizeof o, &o, sizeof x, &x, sizeof wm, &wm, sizeof bm, &bm,
                         sizeof C, &C, sizeof eps, &eps, sizeof rms, &rms, (size_t)0);
    size_t g[2] = {128, (size_t)rows}, l[2] = {128, 1};
    return st ? st : tdacl__launch(m->ctx, k, 2, g, l, NULL, "norm_rows");
}

enum { EPI_BIAS = TDACL_EPI_BIAS, EPI_GELU = TDACL_EPI_GELU, EPI_RESIDUAL = TDACL_EPI_RESIDUAL };

/* c[M,N] = epilogue(a[M,K] @ B) where B is w[K,N], or w[N,K] transposed (trans).  Exact
 * unless $TDACL_PRECISION=bf16 lets bf16 weights take the tensor-core GEMM. */
static tdacl_status linear(tdacl_model *m, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                           const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K,
                           int trans)
{
    tdacl_precision precision = TDACL_PRECISION_EXACT;
    tdacl_status st = tdacl__precision_env(m->ctx, "model forward", &precision);
    return st ? st : tdacl__gemm(m->ctx, c, a, w, bias, res, flags, M, N, K, trans, precision, NULL, NULL, NULL);
}

/* RoPE on the q and k views of qkv, the turned k (k2) rows also into layer L's caches (slots
 * slot0.. at positions pos0.., or through the row map), so that kv_append copies v only.
 * *normed: whether it also wrote the views' inverse norms into m->inv_norm for the attention,
 * which it does for a prefill from position 0 of a normalised kind (tra, tda: the keys are
 * then exactly the rows turned here). */
static tdacl_status rope(tdacl_model *m, const layer *L, int rows, int T, int pos0, int slot0, const tdacl_kv_rows *kv,
                         int *normed)
{
    cl_kernel k;
    tdacl_status st = tdacl__model_layers_kernel(m, "rope", NULL, &k);
    if (st) return st;
    int C = m->C;
    /* q1, k1 (, q2, k2) columns of [q|k|v] or [q1|k1|q2|k2|v] */
    cl_int4 cols = {{0, C, 2 * C, 3 * C}};
    cl_int nviews = m->kqkv == 5 ? 4 : 2, ld = m->kqkv * C, cT = T, p0 = pos0, r = rows, H = m->H, d = m->d;
    /* eight (four) pairs a work-item where every such access is aligned: the view columns are
     * multiples of C, head columns of d */
    cl_int vec = (d / 2) % 8 == 0 && C % 8 == 0 ? 8 : (d / 2) % 4 == 0 && C % 4 == 0 ? 4 : 1;
    const size_t per_head = (size_t)(d / 2 / vec), per_row = (size_t)(m->H * nviews) * per_head;
    const int norms = !kv && pos0 == 0 && per_head <= 128 &&
                      (m->kind == TDACL_ATTN_TRA || m->kind == TDACL_ATTN_TDA);
    for (int v = 0; norms && v < nviews && !st; v++) st = ensure(m, &m->inv_norm[v], TDACL_F32, (int64_t)rows * H, 1);
    if (st) return st;
    cl_mem q = mem(m->qkv), rm = rowmap_of(kv), inv[4] = {NULL, NULL, NULL, NULL};
    cl_mem kc = mem(L->kcache), k2c = mem(L->k2cache);
    cl_long cache_ld = (cl_long)m->info.max_context * C;
    cl_int s0 = slot0;
    for (int v = 0; norms && v < 4; v++) inv[v] = mem(m->inv_norm[v < nviews ? v : 0]);
    st = tdacl__set_args(m->ctx, k, "rope", sizeof q, &q, sizeof ld, &ld, sizeof cT, &cT, sizeof p0, &p0,
                         sizeof r, &r, sizeof H, &H, sizeof d, &d, sizeof cols, &cols, sizeof nviews, &nviews,
                         sizeof m->rope_cos, &m->rope_cos, sizeof m->rope_sin, &m->rope_sin, sizeof rm, &rm,
                         sizeof vec, &vec, sizeof inv[0], &inv[0], sizeof inv[1], &inv[1], sizeof inv[2], &inv[2],
                         sizeof inv[3], &inv[3], sizeof kc, &kc, sizeof k2c, &k2c, sizeof cache_ld, &cache_ld,
                         sizeof s0, &s0, (size_t)0);
    /* d/2/vec work-items a head and view, a row's in work-groups of whole heads, at most 256
     * work-items (cl/layers.cl ROPE_WG; the kernel skips work-items past the row's) */
    const size_t wg = per_head <= 256 ? per_head * (256 / per_head) : 256;
    size_t l[2] = {per_row < wg ? per_row : wg, 1}, g[2] = {(per_row + l[0] - 1) / l[0] * l[0], (size_t)rows};
    if (!st) st = tdacl__launch(m->ctx, k, 2, g, l, NULL, "rope");
    if (!st) *normed = norms;
    return st;
}

/* The k (k2) and v columns of the rows of B sequences of T tokens into the caches: slots
 * slot0.., positions pos0..; or through a decode step's row map. */
static tdacl_status kv_append(tdacl_model *m, const layer *L, int B, int T, int pos0, int slot0, const tdacl_kv_rows *kv,
                               int v_only)
{
    cl_kernel k;
    tdacl_status st = tdacl__model_layers_kernel(m, "kv_append", NULL, &k);
    if (st) return st;
    const int C = m->C, two = m->kqkv == 5;
    cl_int ld = m->kqkv * C, r = B * T, cC = C, cT = T, p0 = pos0, s0 = slot0;
    /* v_only: RoPE wrote the keys (rope) */
    cl_int4 cols = {{v_only ? -1 : C, two && !v_only ? 3 * C : -1, two ? 4 * C : 2 * C, -1}};
    cl_mem q = mem(m->qkv), kc = mem(L->kcache), k2c = mem(L->k2cache), vc = mem(L->vcache), rm = rowmap_of(kv);
    cl_long cache_ld = (cl_long)m->info.max_context * C;
    st = tdacl__set_args(m->ctx, k, "kv_append", sizeof q, &q, sizeof ld, &ld, sizeof r, &r, sizeof cC, &cC,
                         sizeof cols, &cols, sizeof kc, &kc, sizeof k2c, &k2c, sizeof vc, &vc, sizeof cache_ld,
                         &cache_ld, sizeof cT, &cT, sizeof p0, &p0, sizeof s0, &s0, sizeof rm, &rm, (size_t)0);
    /* cl/layers.cl KV_VEC = 8 elements a work-item; the three views in one work-group */
    size_t g[3] = {(((size_t)C + 7) / 8 + 31) / 32 * 32, 3, (size_t)r}, l[3] = {32, 3, 1};
    return st ? st : tdacl__launch(m->ctx, k, 3, g, l, NULL, "kv_append");
}

/* [B, H, T, d] head view of token-major rows (row stride ld) starting at column col. */
static tdacl_status head_view(tdacl_model *m, tdacl_tensor *base, int B, int T, int64_t batch_stride, int64_t ld,
                              int64_t col, tdacl_tensor **out)
{
    int64_t shape[4] = {B, m->H, T, m->d}, strides[4] = {batch_stride, m->d, ld, 1};
    return tdacl_tensor_view(base, 4, shape, strides, col, out);
}

/* VMC's running V sums of layer l gain the rows just appended (restarting at position 0). */
static tdacl_status v_sum_add(tdacl_model *m, const layer *L, int B, int T, int pos0, int slot0, const tdacl_kv_rows *kv)
{
    cl_kernel k;
    tdacl_status st = tdacl__model_layers_kernel(m, "v_sum_add", NULL, &k);
    if (st) return st;
    cl_mem vs = mem(L->v_sum), vc = mem(L->vcache), rm = rowmap_of(kv);
    cl_long cache_ld = (cl_long)m->info.max_context * m->C;
    cl_int C = m->C, cT = T, p0 = pos0, s0 = slot0, seqs = B;
    st = tdacl__set_args(m->ctx, k, "v_sum_add", sizeof vs, &vs, sizeof vc, &vc, sizeof cache_ld, &cache_ld, sizeof C, &C,
                         sizeof cT, &cT, sizeof p0, &p0, sizeof s0, &s0, sizeof seqs, &seqs, sizeof rm, &rm, (size_t)0);
    size_t g[2] = {((size_t)m->C + 63) / 64 * 64, (size_t)B}, l[2] = {64, 1};
    return st ? st : tdacl__launch(m->ctx, k, 2, g, l, NULL, "v_sum_add");
}

/* The attention call of layer l over views of the caches (the model's kind and its
 * per-layer tensors). */
static tdacl_status attend(tdacl_model *m, const layer *L, tdacl_attention_tensors *t, int pos0, const tdacl_kv_rows *kv,
                           tdacl_tensor *const *inv_norm)
{
    tdacl_attention_desc desc;
    tdacl_attention_desc_init(&desc);
    desc.kind = m->kind;
    desc.beta = L->beta;
    desc.kappa = m->cfg.kappa;
    desc.power = m->cfg.power;
    desc.norm = m->cfg.head_norm;
    desc.offset = pos0;
    if (m->kind == TDACL_ATTN_ENTMAX) desc.alpha = L->alpha, t->temps = L->temps;
    if (m->kind == TDACL_ATTN_TOPK_THETA) {
        desc.theta_post = m->theta_post, desc.sdc = m->sdc, desc.sdc_gamma = m->sdc_gamma, desc.vmc = m->vmc;
        t->thresholds = L->thresholds, t->sdc_log_mass = L->log_mass;
    }
    if (!inv_norm) return tdacl__attention_rows(m->ctx, &desc, t, kv, NULL);
    const cl_mem norms[4] = {mem(inv_norm[0]), mem(inv_norm[1]), mem(inv_norm[2]), mem(inv_norm[3])};
    return tdacl__attention_rows(m->ctx, &desc, t, kv, norms);
}

/* The attention block of layer l for B sequences of T new tokens at positions pos0.., in
 * cache slots slot0..; or (kv) a decode step's rows at their own slots and positions, pos0
 * the largest.  append: copy the new k (k2) and v rows into the caches first (the fused
 * decode's QKV GEMV wrote them already). */
static tdacl_status attention_block(tdacl_model *m, int l, int B, int T, int pos0, int slot0, const tdacl_kv_rows *kv,
                                    int append, int normed)
{
    layer *L = &m->layers[l];
    const int C = m->C, ld = m->kqkv * C, two = m->kqkv == 5;
    const int Tk = pos0 + T;
    /* new k (and k2) and v rows into the caches */
    const int v_only = m->cfg.position == TDACL_POSITION_ROPE; /* RoPE wrote the keys (rope) */
    tdacl_status st = append ? kv_append(m, L, B, T, pos0, slot0, kv, v_only) : TDACL_SUCCESS;
    if (!st && L->v_sum) st = v_sum_add(m, L, B, T, pos0, slot0, kv);
    if (st) return st;
    if (m->hook && !kv && (st = m->hook(m, l, B, T, m->hook_user))) return st;
    const int64_t cache_b = (int64_t)m->info.max_context * C;
    /* entmax and Top-theta take no per-sequence key ranges: one call per sequence */
    const int per_row = kv && (m->kind == TDACL_ATTN_ENTMAX || m->kind == TDACL_ATTN_TOPK_THETA);
    if (per_row && !m->warned_rows) {
        m->warned_rows = 1;
        tdacl__log(m->ctx, TDACL_LOG_DEBUG, "model decode: %s attention over sequences at different positions runs "
                   "one call per sequence (its kernels take no per-sequence key ranges)", tdacl__kind_name(m->kind));
    }
    for (int r = 0; r < (per_row ? B : 1) && !st; r++) {
        /* attention over the cache (every slot with a row map); queries straight from the
         * projection rows */
        const int nb = per_row ? 1 : B, slot = per_row ? kv->host[2 * r] : slot0, pos = per_row ? kv->host[2 * r + 1] : pos0;
        const int tk = per_row ? pos + 1 : Tk, bk = kv && !per_row ? m->info.max_batch : nb;
        const tdacl_kv_rows *rows = per_row ? NULL : kv;
        const int64_t c0 = rows ? 0 : slot * cache_b, q0 = (int64_t)r * ld, o0 = (int64_t)r * C;
        tdacl_tensor *q = NULL, *q2 = NULL, *k = NULL, *k2 = NULL, *v = NULL, *o = NULL, *vsum = NULL;
        st = head_view(m, m->qkv, nb, T, (int64_t)T * ld, ld, q0, &q);
        if (!st) st = head_view(m, L->kcache, bk, tk, cache_b, C, c0, &k);
        if (!st) st = head_view(m, L->vcache, bk, tk, cache_b, C, c0, &v);
        if (!st && two) st = head_view(m, m->qkv, nb, T, (int64_t)T * ld, ld, q0 + 2 * C, &q2);
        if (!st && two) st = head_view(m, L->k2cache, bk, tk, cache_b, C, c0, &k2);
        if (!st) st = head_view(m, m->att, nb, T, (int64_t)T * C, C, o0, &o);
        if (!st && L->v_sum) { /* [nb, H, d] of the slots read */
            int64_t shape[3] = {nb, m->H, m->d}, strides[3] = {C, m->d, 1};
            st = tdacl_tensor_view(L->v_sum, 3, shape, strides, (int64_t)slot * C, &vsum);
        }
        if (!st) {
            tdacl_attention_tensors t = {q, k, v, q2, k2, L->head_norm, o, L->lambdas, NULL, NULL, NULL, vsum};
            st = attend(m, L, &t, pos, rows, normed ? m->inv_norm : NULL);
        }
        tdacl_tensor *views[] = {q, q2, k, k2, v, o, vsum};
        for (size_t i = 0; i < TDACL_ARRAY_LEN(views); i++) tdacl_tensor_destroy(views[i]);
    }
    return st;
}

static tdacl_status head(tdacl_model *m, int B, int T, int last_only);

/* Whether a decode step of B sequences runs fused (decode_step); why (may be NULL) says why
 * not.  $TDACL_DECODE=unfused keeps the layer-by-layer kernels (for comparisons). */
int tdacl__model_decode_fused(const tdacl_model *m, int B, char *why, size_t n)
{
    char buf[200];
    if (!why) why = buf, n = sizeof buf;
    const char *env = getenv("TDACL_DECODE");
    if (env && !strcmp(env, "unfused")) return snprintf(why, n, "TDACL_DECODE=unfused"), 0;
    if (B > TDACL_GEMV_MAX_ROWS)
        return snprintf(why, n, "batch %d exceeds the GEMV's %d rows", B, TDACL_GEMV_MAX_ROWS), 0;
    if (m->cfg.position == TDACL_POSITION_ROPE && tdacl__gemv_rope_fits(m->d, why, n)) return 0;
    return 1;
}

/* One decode step of B sequences at position pos, five launches a layer (docs/spec.md §4.2):
 *   qkv  = Norm1(x) @ W_attn + b_attn; RoPE; k, v rows into the caches at pos   (one GEMV)
 *   att  = Attention(q, caches)                     (one launch: the last split combines)
 *   x   += att @ W_proj + b_proj                                                (GEMV)
 *   hid  = gelu(Norm2(x) @ W_fc + b_fc)                                         (GEMV)
 *   x   += hid @ W_fcproj + b_fcproj                                            (GEMV)
 * after the embedding, then the final norm and the LM head.  Where the device and the model
 * allow it, the five are phases of one launch a layer, the first also embedding the rows
 * (model_decode.c). */
static tdacl_status decode_step(tdacl_model *m, int B, int pos, const tdacl_kv_rows *kv)
{
    const int C = m->C, two = m->kqkv == 5, rope = m->cfg.position == TDACL_POSITION_ROPE;
    const int64_t cache_ld = (int64_t)m->info.max_context * C;
    int one_launch = 0;
    tdacl_status st = tdacl__model_decode_layers(m, B, pos, kv, &one_launch);
    if (!st && !one_launch) st = tdacl__model_embed(m, B, 1, pos, kv);
    for (int l = 0; !st && !one_launch && l < m->info.n_layer; l++) {
        layer *L = &m->layers[l];
        /* views: [q|k|v] or [q1|k1|q2|k2|v] */
        tdacl_gemv_fusion qkv = {.norm_w = L->ln1_w, .norm_b = L->ln1_b, .eps = m->cfg.layer_norm_epsilon,
                                 .rms = m->cfg.norm_type == 1, .scatter = 1, .kc = L->kcache->storage->mem,
                                 .k2c = two ? L->k2cache->storage->mem : NULL, .vc = L->vcache->storage->mem,
                                 .cache_ld = cache_ld, .pos = pos, .C = C, .d = m->d,
                                 .rope_cols = {0, C, two ? 2 * C : -1, two ? 3 * C : -1},
                                 .cache_cols = {C, two ? 3 * C : -1, two ? 4 * C : 2 * C, -1},
                                 .cos_t = rope ? m->rope_cos : NULL, .sin_t = rope ? m->rope_sin : NULL,
                                 .rowmap = rowmap_of(kv)};
        tdacl_gemv_fusion ln2 = {.norm_w = L->ln2_w, .norm_b = L->ln2_b, .eps = m->cfg.layer_norm_epsilon,
                                 .rms = m->cfg.norm_type == 1};
        st = tdacl__gemv_fused(m->ctx, m->qkv, m->x, L->attn_w, L->attn_b, NULL, EPI_BIAS, B, m->kqkv * C, C, 0, &qkv);
        if (!st) st = attention_block(m, l, B, 1, pos, 0, kv, 0, 0);
        if (!st) st = linear(m, m->x, m->att, L->proj_w, L->proj_b, m->x, EPI_BIAS | EPI_RESIDUAL, B, C, C, 0);
        if (!st)
            st = tdacl__gemv_fused(m->ctx, m->hid, m->x, L->fc_w, L->fc_b, NULL, EPI_BIAS | EPI_GELU, B, 4 * C, C, 0, &ln2);
        if (!st) st = linear(m, m->x, m->hid, L->fcproj_w, L->fcproj_b, m->x, EPI_BIAS | EPI_RESIDUAL, B, C, 4 * C, 0);
    }
    return st ? st : head(m, B, 1, 0);
}

/* The whole stack (model_impl.h). */
tdacl_status tdacl__model_forward(tdacl_model *m, int B, int T, int pos0, int slot0, const tdacl_kv_rows *kv,
                                  const int32_t *tokens, int last_only)
{
    const int rows = B * T, C = m->C;
    tdacl_status st = activations(m, rows);
    if (st) return st;
    if (rows > m->tokens_cap) {
        if (m->tokens) clReleaseMemObject(m->tokens);
        cl_int err;
        m->tokens = clCreateBuffer(m->ctx->cl, CL_MEM_READ_WRITE, (size_t)rows * 4, NULL, &err); /* sampling writes */
        if (!m->tokens) return tdacl__fail_cl(m->ctx, err, "model: token buffer");
        m->tokens_cap = rows;
    }
    m->greedy_ready = 0; /* `tokens` is this pass's input until its head has run */
    /* blocking: `tokens` is the caller's memory, free to change once we return; NULL: the
     * tokens tdacl_model_sample left on the device */
    if (tokens) {
        if ((st = tdacl__model_tokens_guard(m))) return st;
        cl_int err = clEnqueueWriteBuffer(m->ctx->queue, m->tokens, CL_TRUE, 0, (size_t)rows * 4, tokens, 0, NULL, NULL);
        if (err) return tdacl__fail_cl(m->ctx, err, "model: uploading tokens");
    }
    if (T == 1 && slot0 == 0) {
        char why[200];
        if (tdacl__model_decode_fused(m, B, why, sizeof why)) return decode_step(m, B, pos0, kv); /* it embeds */
        tdacl__log(m->ctx, TDACL_LOG_DEBUG, "model decode step: layer by layer, not fused (%s)", why);
    }
    st = tdacl__model_embed(m, rows, T, pos0, kv);
    for (int l = 0; !st && l < m->info.n_layer; l++) {
        layer *L = &m->layers[l];
        st = norm(m, m->xn, m->x, L->ln1_w, L->ln1_b, rows);
        if (!st) st = linear(m, m->qkv, m->xn, L->attn_w, L->attn_b, NULL, EPI_BIAS, rows, m->kqkv * C, C, 0);
        int normed = 0; /* RoPE wrote the attention's inverse norms */
        if (!st && m->cfg.position == TDACL_POSITION_ROPE) st = rope(m, L, rows, T, pos0, slot0, kv, &normed);
        if (!st) st = attention_block(m, l, B, T, pos0, slot0, kv, 1, normed);
        if (!st) st = linear(m, m->x, m->att, L->proj_w, L->proj_b, m->x, EPI_BIAS | EPI_RESIDUAL, rows, C, C, 0);
        if (!st) st = norm(m, m->xn, m->x, L->ln2_w, L->ln2_b, rows);
        if (!st) st = linear(m, m->hid, m->xn, L->fc_w, L->fc_b, NULL, EPI_BIAS | EPI_GELU, rows, 4 * C, C, 0);
        if (!st) st = linear(m, m->x, m->hid, L->fcproj_w, L->fcproj_b, m->x, EPI_BIAS | EPI_RESIDUAL, rows, C, 4 * C, 0);
    }
    return st ? st : head(m, B, T, last_only);
}

int tdacl__model_head_fused(int rows, int one_row, char *what, size_t n)
{
    const char *env = getenv("TDACL_HEAD");
    const int fused = rows <= TDACL_GEMV_MAX_ROWS && !(env && !strcmp(env, "unfused"));
    snprintf(what, n, "%s",
             fused ? (one_row ? "one launch (final norm, LM head, greedy pick)"
                              : "one launch (final norm, LM head; the greedy pick needs one row a sequence)")
             : rows > TDACL_GEMV_MAX_ROWS ? "norm kernel and LM head (rows exceed the GEMV's 8)"
                                          : "norm kernel and LM head (TDACL_HEAD=unfused)");
    return fused;
}

/* The final norm and the LM head, on every row or on the last row of each sequence. */
static tdacl_status head(tdacl_model *m, int B, int T, int last_only)
{
    const int rows = B * T, C = m->C, V = m->info.vocab_size;
    tdacl_status st = TDACL_SUCCESS;
    const tdacl_tensor *head = m->lm_head ? m->lm_head : m->wte;
    tdacl_tensor *src = m->x;
    int out_rows = rows;
    if (last_only && T > 1) {
        /* gather row b*T + T-1 of each sequence */
        if ((st = ensure(m, &m->last, TDACL_F32, B, C))) return st;
        tdacl_tensor *from = NULL, *to = NULL;
        int64_t fs[2] = {B, C}, fst[2] = {(int64_t)T * C, 1}, ts[2] = {C, 1};
        st = tdacl_tensor_view(m->x, 2, fs, fst, (int64_t)(T - 1) * C, &from);
        if (!st) st = tdacl_tensor_view(m->last, 2, fs, ts, 0, &to);
        if (!st) st = tdacl_tensor_copy(to, from);
        tdacl_tensor_destroy(from), tdacl_tensor_destroy(to);
        if (st) return st;
        src = m->last;
        out_rows = B;
    }
    if ((int64_t)out_rows > m->logits_cap) {
        free_tensor(&m->logits);
        int64_t ls[2] = {out_rows, V};
        if ((st = tdacl_tensor_create(m->ctx, TDACL_F32, 2, ls, &m->logits))) return st;
        m->logits_cap = out_rows;
    }
    /* a few rows (a decode step, a prefill's last rows): the final norm runs inside the LM
     * head's GEMV, and with one row a sequence so does the greedy pick, into `tokens`
     * (tdacl_model_sample then launches nothing); more rows: the norm kernel, then the head.
     * $TDACL_HEAD=unfused keeps the separate kernels (comparisons, tests). */
    const int one_row = last_only || T == 1;
    char what[160];
    const int fused = tdacl__model_head_fused(out_rows, one_row, what, sizeof what);
    if (!m->head_logged) tdacl__log(m->ctx, TDACL_LOG_DEBUG, "model head: %s", what);
    m->head_logged = 1;
    m->greedy_ready = 0;
    if (fused) {
        const tdacl_gemv_fusion f = {.norm_w = m->lnf_w, .norm_b = m->lnf_b, .eps = m->cfg.layer_norm_epsilon,
                                     .rms = m->cfg.norm_type == 1, .argmax_ids = one_row ? m->tokens : NULL};
        if (one_row) st = tdacl__model_tokens_guard(m); /* the greedy picks go to `tokens` */
        if (!st) st = tdacl__gemv_fused(m->ctx, m->logits, src, head, NULL, NULL, 0, out_rows, V, C, 1, &f);
        m->greedy_ready = !st && one_row;
    } else {
        st = norm(m, m->xn, src, m->lnf_w, m->lnf_b, out_rows);
        if (!st) st = linear(m, m->logits, m->xn, head, NULL, NULL, 0, out_rows, V, C, 1);
    }
    if (!st) m->logit_rows = last_only ? 1 : T;
    return st;
}
