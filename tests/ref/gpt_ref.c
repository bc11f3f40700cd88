/* Plain double-precision reference of the GPT-family decoder (see gpt_ref.h).
 *
 * Read it top to bottom: first the layers (norms, matmul, GELU, RoPE, the threshold), then
 * the attention of one layer for every kind of docs/spec.md section 1, then the forward pass that
 * strings them together, and last the loader that turns checkpoint tensors into doubles.
 *
 * Notation: T tokens, C = n_embd, NH heads of d = C / NH, V vocabulary, NQ = 3 ([q|k|v])
 * or 5 ([q1|k1|q2|k2|v], tda and diff_softmax) column groups of the fused c_attn. */
#include "ref/gpt_ref.h"
#include "ref/attention_ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the layers ------------------------------------------------------------------------ */

/* LayerNorm over the last dim: out = (x - mean) / sqrt(var + eps) * w + b, biased var.
 * inp, out: [T, C]; w, b: [C] (b may be NULL). */
void gpt_ref_layernorm(double *out, const double *inp, const double *w, const double *b, int T, int C,
                       double eps)
{
    for (int t = 0; t < T; t++) {
        const double *x = inp + (size_t)t * C;
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < C; i++) mean += x[i];
        mean /= C;
        for (int i = 0; i < C; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= C;
        double rstd = 1.0 / sqrt(var + eps);
        for (int i = 0; i < C; i++) out[(size_t)t * C + i] = (x[i] - mean) * rstd * w[i] + (b ? b[i] : 0.0);
    }
}

/* RMSNorm (norm_type "rmsnorm"): out = x / sqrt(mean(x^2) + eps) * w.  inp, out: [T, C]. */
void gpt_ref_rmsnorm(double *out, const double *inp, const double *w, int T, int C, double eps)
{
    for (int t = 0; t < T; t++) {
        const double *x = inp + (size_t)t * C;
        double ss = 0.0;
        for (int i = 0; i < C; i++) ss += x[i] * x[i];
        double r = 1.0 / sqrt(ss / C + eps);
        for (int i = 0; i < C; i++) out[(size_t)t * C + i] = x[i] * r * w[i];
    }
}

/* GPT-2 Conv1D: out = inp @ w + b.  inp: [T, IN]; w: [IN, OUT] (stored [in, out]);
 * b: [OUT] or NULL; out: [T, OUT]. */
void gpt_ref_matmul(double *out, const double *inp, const double *w, const double *b, int T, int IN, int OUT)
{
    for (int t = 0; t < T; t++)
        for (int o = 0; o < OUT; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < IN; i++) acc += inp[(size_t)t * IN + i] * w[(size_t)i * OUT + o];
            out[(size_t)t * OUT + o] = acc;
        }
}

/* gelu_new, the tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
double gpt_ref_gelu(double x)
{
    const double s = sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * x * (1.0 + tanh(s * (x + 0.044715 * x * x * x)));
}

/* NTK-aware scaling of the RoPE base: theta' = theta * factor^(d / (d - 2)); factor 1 is
 * plain RoPE. */
double gpt_ref_rope_theta(double theta, double ntk_factor, int d)
{
    if (ntk_factor == 1.0) return theta;
    return theta * pow(ntk_factor, (double)d / (double)(d - 2));
}

/* Rotate-half RoPE of one head vector x[d] at absolute position pos, in place: element
 * m < d/2 pairs with m + d/2 and turns by pos * theta^(-2m/d) (Hugging Face Llama/NeoX):
 *   x[m]       <- x[m] cos - x[m+d/2] sin
 *   x[m+d/2]   <- x[m+d/2] cos + x[m] sin */
void gpt_ref_rope(double *x, int d, int64_t pos, double theta)
{
    int half = d / 2;
    for (int m = 0; m < half; m++) {
        double angle = (double)pos * pow(theta, -2.0 * m / d);
        double c = cos(angle), s = sin(angle);
        double x1 = x[m], x2 = x[m + half];
        x[m] = x1 * c - x2 * s;
        x[m + half] = x2 * c + x1 * s;
    }
}

/* Length-adaptive threshold (docs/spec.md section 1): tau(p) = beta sqrt(max(0, 2 ln((p+1)/kappa)) / d). */
double gpt_ref_tau(int64_t pos, double beta, double kappa, int d)
{
    double l = 2.0 * log(((double)pos + 1.0) / kappa);
    if (l < 0.0) l = 0.0;
    return beta * sqrt(l / d);
}

/* x <- x / max(||x||_2, 1e-12), in place. */
static void l2_normalize(double *x, int n)
{
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double norm = sqrt(ss);
    if (norm < 1e-12) norm = 1e-12;
    for (int i = 0; i < n; i++) x[i] /= norm;
}

/* a[0..n-1] = softmax(s[0..n-1]). */
static void softmax(const double *s, int n, double *a)
{
    double mx = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    for (int j = 0; j < n; j++) sum += (a[j] = exp(s[j] - mx));
    for (int j = 0; j < n; j++) a[j] /= sum;
}

static double dot(const double *a, const double *b, int n)
{
    double acc = 0.0;
    for (int i = 0; i < n; i++) acc += a[i] * b[i];
    return acc;
}

static int two_views(tdacl_attention_kind k) { return k == TDACL_ATTN_TDA || k == TDACL_ATTN_DIFF_SOFTMAX; }
static int thresholded(tdacl_attention_kind k) { return k == TDACL_ATTN_TRA || k == TDACL_ATTN_TDA; }

/* Per-head Norm: rms over d with eps 1e-5 (docs/spec.md section 1's default; docs/spec.md
 * section 4 names no other), times head_norm.weight.  A zero row stays exactly zero. */
static void head_norm(const gpt_ref_model *m, const gpt_ref_layer *L, double *o)
{
    if (m->head_norm != TDACL_NORM_RMS) return;
    const int d = m->head_dim;
    double ss = 0.0;
    for (int c = 0; c < d; c++) ss += o[c] * o[c];
    double r = 1.0 / sqrt(ss / d + m->head_norm_eps);
    for (int c = 0; c < d; c++) o[c] = o[c] * r * (L->head_norm_w ? L->head_norm_w[c] : 1.0);
}

/* entmax and topk_theta heads through the attention reference (tests/ref/attention_ref.c,
 * one head, keys 0..i for row i): head h's rows of out, before the head Norm. */
static int sparse_head(const gpt_ref_model *m, const gpt_ref_layer *L, int h, int T, const double *q, const double *k,
                       const double *qkv, double *out, gpt_ref_stats *st)
{
    const int C = m->n_embd, d = m->head_dim, NQ = 3;
    double *v = malloc(sizeof(double) * (size_t)T * d), *o = malloc(sizeof(double) * (size_t)T * d);
    double *thr = m->topk_hook ? malloc(sizeof(double) * (size_t)T) : NULL;
    int rc = -1;
    if (!v || !o || (m->topk_hook && !thr)) goto done;
    for (int t = 0; t < T; t++)
        memcpy(v + (size_t)t * d, qkv + (size_t)t * NQ * C + 2 * (size_t)C + (size_t)h * d, sizeof(double) * d);
    attn_ref_params p = attn_ref_params_default(m->kind);
    p.offset = 0;
    p.scale = 1.0 / sqrt((double)d);
    if (m->kind == TDACL_ATTN_ENTMAX) {
        p.alpha = L->alpha;
        p.temp_delta = L->temps[3 * h], p.temp_beta = L->temps[3 * h + 1], p.temp_gamma = L->temps[3 * h + 2];
    } else {
        const int layer = (int)(L - m->layers);
        if (thr && m->topk_hook(m->topk_user, layer, h, T, d, q, k, thr)) goto done;
        p.thresholds = thr ? thr : L->thresholds + (size_t)h * L->nthr;
        p.nthr = thr ? T : L->nthr;
        p.log_mass = L->log_mass && !thr ? L->log_mass + (size_t)h * L->nthr : NULL;
        p.theta_post = m->theta_post, p.sdc = thr ? TDACL_SDC_NONE : m->sdc, p.sdc_gamma = m->sdc_gamma;
        p.vmc = thr ? 0 : m->vmc;
    }
    attn_ref_shape shape = {1, 1, T, T, d, d};
    attn_ref_inputs in = {q, k, v, NULL, NULL};
    attn_ref_outputs outs = {0};
    outs.out = o;
    attn_ref_counts counts;
    if (attn_ref_attention(&p, shape, in, outs, &counts)) goto done;
    for (int t = 0; t < T; t++) memcpy(out + (size_t)t * C + (size_t)h * d, o + (size_t)t * d, sizeof(double) * d);
    if (st) {
        st->visible_pairs += counts.visible_pairs;
        st->zero_weights += counts.zero_weights;
        st->survivors[0] += counts.survivors[0];
    }
    rc = 0;
done:
    free(v), free(o), free(thr);
    return rc;
}

/* ---- attention of one layer ------------------------------------------------------------
 * qkv: [T, NQ*C] (the c_attn output, bias included); out: [T, C] (heads concatenated in
 * head order, before c_proj).  Head h of every view is the d-wide column slice
 * [g*C + h*d, g*C + (h+1)*d) of column group g. */
int gpt_ref_attention(const gpt_ref_model *m, const gpt_ref_layer *L, int T, const double *qkv, double *out,
                      gpt_ref_stats *st)
{
    const int C = m->n_embd, NH = m->n_head, d = m->head_dim;
    const int nv = two_views(m->kind) ? 2 : 1, NQ = 2 * nv + 1;
    const double theta = gpt_ref_rope_theta(m->rope_theta, m->rope_ntk_factor, d);
    double *q = malloc(sizeof(double) * (size_t)nv * T * d);  /* [nv, T, d] this head's queries */
    double *k = malloc(sizeof(double) * (size_t)nv * T * d);  /* [nv, T, d] keys */
    double *s = malloc(sizeof(double) * (size_t)nv * T);      /* [nv, T] scores of one row */
    double *a = malloc(sizeof(double) * (size_t)nv * T);      /* [nv, T] per-view weights */
    double *w = malloc(sizeof(double) * (size_t)T);           /* [T] final weights of one row */
    if (!q || !k || !s || !a || !w) {
        free(q), free(k), free(s), free(a), free(w);
        return -1;
    }
    for (int h = 0; h < NH; h++) {
        /* Gather the q and k views of head h; RoPE before the L2 normalisation (docs/spec.md section 4). */
        for (int vw = 0; vw < nv; vw++)
            for (int t = 0; t < T; t++) {
                double *qt = q + ((size_t)vw * T + t) * d, *kt = k + ((size_t)vw * T + t) * d;
                memcpy(qt, qkv + (size_t)t * NQ * C + (size_t)(2 * vw) * C + (size_t)h * d, sizeof(double) * d);
                memcpy(kt, qkv + (size_t)t * NQ * C + (size_t)(2 * vw + 1) * C + (size_t)h * d, sizeof(double) * d);
                if (m->position == TDACL_POSITION_ROPE) {
                    gpt_ref_rope(qt, d, t, theta);
                    gpt_ref_rope(kt, d, t, theta);
                }
                if (thresholded(m->kind)) { /* normalize is always on in models */
                    l2_normalize(qt, d);
                    l2_normalize(kt, d);
                }
            }
        if (m->kind == TDACL_ATTN_ENTMAX || m->kind == TDACL_ATTN_TOPK_THETA) {
            if (sparse_head(m, L, h, T, q, k, qkv, out, st)) {
                free(q), free(k), free(s), free(a), free(w);
                return -1;
            }
            for (int i = 0; i < T; i++) head_norm(m, L, out + (size_t)i * C + (size_t)h * d);
            continue;
        }
        /* Softmax kinds use 1/sqrt(d); tra/tda compare cosines with tau (scale 1). */
        const double scale = thresholded(m->kind) ? 1.0 : 1.0 / sqrt((double)d);
        const double lam = L->lambda ? L->lambda[h] : 0.0;
        const double lc = lam < 0.0 ? 0.0 : lam > 1.0 ? 1.0 : lam; /* tda clamps, diff_softmax not */
        for (int i = 0; i < T; i++) {
            const int n = i + 1; /* causal: query at position i sees keys 0..i */
            for (int vw = 0; vw < nv; vw++)
                for (int j = 0; j < n; j++)
                    s[vw * T + j] = scale * dot(q + ((size_t)vw * T + i) * d, k + ((size_t)vw * T + j) * d, d);
            const double tau = thresholded(m->kind) ? gpt_ref_tau(i, L->beta, m->kappa, d) : 0.0;
            switch (m->kind) {
            case TDACL_ATTN_SOFTMAX:
                softmax(s, n, w);
                break;
            case TDACL_ATTN_DIFF_SOFTMAX:
                softmax(s, n, a);
                softmax(s + T, n, a + T);
                for (int j = 0; j < n; j++) w[j] = a[j] - lam * a[T + j];
                break;
            case TDACL_ATTN_RELA:
            case TDACL_ATTN_TRA:
            case TDACL_ATTN_TDA: {
                const double p = m->kind == TDACL_ATTN_RELA ? 1.0 : m->power;
                for (int vw = 0; vw < nv; vw++)
                    for (int j = 0; j < n; j++) {
                        double x = s[vw * T + j] - tau;
                        a[vw * T + j] = x > 0.0 ? pow(x, p) : 0.0; /* exactly 0 at or below tau */
                        if (st && fabs(x) < st->min_margin) st->min_margin = fabs(x);
                    }
                for (int j = 0; j < n; j++) w[j] = nv == 2 ? a[j] - lc * a[T + j] : a[j];
                break;
            }
            case TDACL_ATTN_ENTMAX: /* sparse_head computed these heads */
            case TDACL_ATTN_TOPK_THETA:
                break;
            }
            if (st) {
                st->visible_pairs += (uint64_t)n;
                for (int j = 0; j < n; j++) {
                    int rect = m->kind == TDACL_ATTN_RELA || thresholded(m->kind);
                    for (int vw = 0; vw < nv; vw++) st->survivors[vw] += !rect || a[vw * T + j] != 0.0;
                    st->zero_weights += w[j] == 0.0;
                }
            }
            /* o = sum_j w_j v_j over the visible keys: [d] */
            double *o = out + (size_t)i * C + (size_t)h * d;
            for (int c = 0; c < d; c++) {
                double acc = 0.0;
                for (int j = 0; j < n; j++) acc += w[j] * qkv[(size_t)j * NQ * C + (size_t)(NQ - 1) * C + (size_t)h * d + c];
                o[c] = acc;
            }
            head_norm(m, L, o);
        }
    }
    free(q), free(k), free(s), free(a), free(w);
    return 0;
}

/* ---- the forward pass ------------------------------------------------------------------ */

/* x[0..n) rounded to bf16 when the model rounds its activations */
static void activations(const gpt_ref_model *m, double *x, size_t n)
{
    if (m->round_activations)
        for (size_t i = 0; i < n; i++) x[i] = tdacl_bf16_to_f32(tdacl_f32_to_bf16((float)x[i]));
}

static void norm(const gpt_ref_model *m, double *out, const double *inp, const double *w, const double *b, int T)
{
    if (m->rmsnorm)
        gpt_ref_rmsnorm(out, inp, w, T, m->n_embd, m->ln_eps);
    else
        gpt_ref_layernorm(out, inp, w, b, T, m->n_embd, m->ln_eps);
    activations(m, out, (size_t)T * m->n_embd);
}

int gpt_ref_forward(const gpt_ref_model *m, int T, const int32_t *tokens, double *logits, gpt_ref_stats *stats)
{
    if (!m || !tokens || !logits || T <= 0) return -1;
    if (m->position == TDACL_POSITION_LEARNED && T > m->n_positions) return -1;
    const int C = m->n_embd, V = m->vocab_size, NQ = two_views(m->kind) ? 5 : 3;
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V) return -1;
    if (stats) {
        memset(stats, 0, sizeof *stats);
        stats->min_margin = INFINITY;
    }
    double *x = malloc(sizeof(double) * (size_t)T * C);        /* [T, C] residual stream */
    double *xn = malloc(sizeof(double) * (size_t)T * C);       /* [T, C] normalised input of a sublayer */
    double *qkv = malloc(sizeof(double) * (size_t)T * NQ * C); /* [T, NQ*C] c_attn output */
    double *att = malloc(sizeof(double) * (size_t)T * C);      /* [T, C] heads concatenated */
    double *y = malloc(sizeof(double) * (size_t)T * C);        /* [T, C] sublayer output */
    double *fc = malloc(sizeof(double) * (size_t)T * 4 * C);   /* [T, 4C] MLP hidden */
    int rc = -1;
    if (!x || !xn || !qkv || !att || !y || !fc) goto done;

    /* Embedding: x[t] = wte[token] (+ wpe[t] for learned positions; RoPE adds nothing here). */
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            x[(size_t)t * C + c] = m->wte[(size_t)tokens[t] * C + c] +
                                   (m->wpe ? m->wpe[(size_t)t * C + c] : 0.0);

    for (int l = 0; l < m->n_layer; l++) {
        const gpt_ref_layer *L = &m->layers[l];
        /* x = x + c_proj(Attention(c_attn(ln_1(x)))) */
        norm(m, xn, x, L->ln_1_w, L->ln_1_b, T);
        gpt_ref_matmul(qkv, xn, L->c_attn_w, L->c_attn_b, T, C, NQ * C);
        activations(m, qkv, (size_t)T * NQ * C);
        if (gpt_ref_attention(m, L, T, qkv, att, stats)) goto done;
        activations(m, att, (size_t)T * C);
        gpt_ref_matmul(y, att, L->attn_proj_w, L->attn_proj_b, T, C, C);
        for (size_t i = 0; i < (size_t)T * C; i++) x[i] += y[i];
        /* x = x + mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))) */
        norm(m, xn, x, L->ln_2_w, L->ln_2_b, T);
        gpt_ref_matmul(fc, xn, L->fc_w, L->fc_b, T, C, 4 * C);
        for (size_t i = 0; i < (size_t)T * 4 * C; i++) fc[i] = gpt_ref_gelu(fc[i]);
        activations(m, fc, (size_t)T * 4 * C);
        gpt_ref_matmul(y, fc, L->mlp_proj_w, L->mlp_proj_b, T, 4 * C, C);
        for (size_t i = 0; i < (size_t)T * C; i++) x[i] += y[i];
    }
    /* logits = ln_f(x) @ lm_head^T, lm_head [V, C] (wte when tied). */
    norm(m, xn, x, m->ln_f_w, m->ln_f_b, T);
    for (int t = 0; t < T; t++)
        for (int v = 0; v < V; v++)
            logits[(size_t)t * V + v] = dot(xn + (size_t)t * C, m->lm_head + (size_t)v * C, C);
    rc = 0;
done:
    free(x), free(xn), free(qkv), free(att), free(y), free(fc);
    return rc;
}

/* ---- loading --------------------------------------------------------------------------- */

static int64_t numel(const tdacl_ckpt_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* A copy of tensor `name` as doubles, checked against the expected shape (ndim 0..2;
 * want_ndim -1 accepts a scalar stored as [] or [1]).  NULL when absent and optional. */
static double *tensor(const tdacl_checkpoint *ck, int round_bf16, int optional, int *err, int want_ndim,
                      int64_t d0, int64_t d1, const char *fmt, int layer)
{
    char name[160];
    snprintf(name, sizeof name, fmt, layer);
    const tdacl_ckpt_tensor *t = tdacl__checkpoint_get(ck, name);
    if (!t) {
        if (!optional) {
            fprintf(stderr, "gpt_ref: tensor %s missing\n", name);
            *err = 1;
        }
        return NULL;
    }
    int ok = want_ndim < 0 ? numel(t) == 1 && t->ndim <= 1
                           : t->ndim == want_ndim && (want_ndim < 1 || t->shape[0] == d0) &&
                                 (want_ndim < 2 || t->shape[1] == d1);
    if (!ok) {
        fprintf(stderr, "gpt_ref: tensor %s has an unexpected shape (ndim %d)\n", name, t->ndim);
        *err = 1;
        return NULL;
    }
    int64_t n = numel(t);
    double *out = malloc(sizeof(double) * (size_t)n);
    if (!out) {
        *err = 1;
        return NULL;
    }
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < n; i++) {
        float f;
        uint16_t h;
        if (t->dtype == TDACL_F32) {
            memcpy(&f, p + 4 * i, 4);
        } else {
            memcpy(&h, p + 2 * i, 2);
            f = t->dtype == TDACL_BF16 ? tdacl_bf16_to_f32(h) : tdacl_f16_to_f32(h);
        }
        if (round_bf16) f = tdacl_bf16_to_f32(tdacl_f32_to_bf16(f));
        out[i] = f;
    }
    return out;
}

int gpt_ref_load(const tdacl_checkpoint *ck, int round_bf16, gpt_ref_model *m)
{
    memset(m, 0, sizeof *m);
    const tdacl_model_config *cfg = tdacl__checkpoint_config(ck);
    if (!cfg || cfg->n_head <= 0 || cfg->n_embd % cfg->n_head) return -1;
    m->n_layer = cfg->n_layer, m->n_head = cfg->n_head, m->n_embd = cfg->n_embd;
    m->vocab_size = cfg->vocab_size, m->n_positions = cfg->n_positions;
    m->head_dim = cfg->n_embd / cfg->n_head;
    m->rmsnorm = cfg->norm_type == 1;
    m->ln_eps = cfg->layer_norm_epsilon;
    m->kind = cfg->attn_kind;
    m->kappa = cfg->kappa, m->power = cfg->power;
    m->head_norm = cfg->head_norm;
    m->head_norm_eps = 1e-5;
    m->position = cfg->position;
    m->rope_theta = cfg->rope_theta, m->rope_ntk_factor = cfg->rope_ntk_factor;
    m->sdc = (tdacl_sdc)cfg->sdc, m->sdc_gamma = cfg->sdc_gamma, m->vmc = cfg->vmc;
    const int C = m->n_embd, V = m->vocab_size, NH = m->n_head, d = m->head_dim;
    const int NQ = two_views(m->kind) ? 5 : 3, R = round_bf16, ln_bias = !m->rmsnorm;
    int err = 0;
    m->wte = tensor(ck, R, 0, &err, 2, V, C, "wte.weight", 0);
    if (m->position == TDACL_POSITION_LEARNED)
        m->wpe = tensor(ck, R, 0, &err, 2, m->n_positions, C, "wpe.weight", 0);
    m->ln_f_w = tensor(ck, R, 0, &err, 1, C, 0, "ln_f.weight", 0);
    if (ln_bias) m->ln_f_b = tensor(ck, R, 0, &err, 1, C, 0, "ln_f.bias", 0);
    m->lm_head = tensor(ck, R, 1, &err, 2, V, C, "lm_head.weight", 0);
    m->tied = m->lm_head == NULL;
    if (m->tied) m->lm_head = m->wte;
    m->layers = calloc((size_t)(m->n_layer > 0 ? m->n_layer : 1), sizeof *m->layers);
    if (!m->layers) err = 1;
    for (int l = 0; !err && l < m->n_layer; l++) {
        gpt_ref_layer *L = &m->layers[l];
        L->ln_1_w = tensor(ck, R, 0, &err, 1, C, 0, "h.%d.ln_1.weight", l);
        if (ln_bias) L->ln_1_b = tensor(ck, R, 0, &err, 1, C, 0, "h.%d.ln_1.bias", l);
        L->c_attn_w = tensor(ck, R, 0, &err, 2, C, (int64_t)NQ * C, "h.%d.attn.c_attn.weight", l);
        L->c_attn_b = tensor(ck, R, 1, &err, 1, (int64_t)NQ * C, 0, "h.%d.attn.c_attn.bias", l);
        L->attn_proj_w = tensor(ck, R, 0, &err, 2, C, C, "h.%d.attn.c_proj.weight", l);
        L->attn_proj_b = tensor(ck, R, 1, &err, 1, C, 0, "h.%d.attn.c_proj.bias", l);
        L->ln_2_w = tensor(ck, R, 0, &err, 1, C, 0, "h.%d.ln_2.weight", l);
        if (ln_bias) L->ln_2_b = tensor(ck, R, 0, &err, 1, C, 0, "h.%d.ln_2.bias", l);
        L->fc_w = tensor(ck, R, 0, &err, 2, C, 4 * (int64_t)C, "h.%d.mlp.c_fc.weight", l);
        L->fc_b = tensor(ck, R, 1, &err, 1, 4 * (int64_t)C, 0, "h.%d.mlp.c_fc.bias", l);
        L->mlp_proj_w = tensor(ck, R, 0, &err, 2, 4 * (int64_t)C, C, "h.%d.mlp.c_proj.weight", l);
        L->mlp_proj_b = tensor(ck, R, 1, &err, 1, C, 0, "h.%d.mlp.c_proj.bias", l);
        /* beta: the layer's tensor when present, else the config's attention.beta. */
        L->beta = cfg->beta;
        if (thresholded(m->kind)) {
            double *b = tensor(ck, R, 1, &err, -1, 0, 0, "h.%d.attn.beta", l);
            if (b) L->beta = b[0];
            free(b);
        }
        if (two_views(m->kind)) {
            /* lambda: scalar (every head) or [n_head] */
            char name[64];
            snprintf(name, sizeof name, "h.%d.attn.lambda", l);
            const tdacl_ckpt_tensor *t = tdacl__checkpoint_get(ck, name);
            int per_head = t && t->ndim == 1 && t->shape[0] == NH && NH > 1;
            double *lam = per_head ? tensor(ck, R, 0, &err, 1, NH, 0, "h.%d.attn.lambda", l)
                                   : tensor(ck, R, 0, &err, -1, 0, 0, "h.%d.attn.lambda", l);
            L->lambda = malloc(sizeof(double) * (size_t)NH);
            if (!L->lambda) err = 1;
            for (int h = 0; lam && L->lambda && h < NH; h++) L->lambda[h] = lam[per_head ? h : 0];
            free(lam);
        }
        if (m->head_norm == TDACL_NORM_RMS)
            L->head_norm_w = tensor(ck, R, 0, &err, 1, d, 0, "h.%d.attn.head_norm.weight", l);
        if (m->kind == TDACL_ATTN_ENTMAX) {
            /* each: the layer's tensor (scalar or one a head) when present, else the config's */
            static const char *const names[4] = {"alpha", "delta", "beta", "gamma"};
            const double defaults[4] = {cfg->alpha, cfg->temp_delta, cfg->temp_beta, cfg->temp_gamma};
            L->temps = malloc(sizeof(double) * 3 * (size_t)NH);
            if (!L->temps) err = 1;
            for (int e = 0; !err && e < 4; e++) {
                char name[64];
                snprintf(name, sizeof name, "h.%d.attn.entmax_%s", l, names[e]);
                const tdacl_ckpt_tensor *t = tdacl__checkpoint_get(ck, name);
                int per_head = t && t->ndim == 1 && t->shape[0] == NH && NH > 1;
                double *x = !t ? NULL : per_head ? tensor(ck, R, 0, &err, 1, NH, 0, name, 0)
                                                 : tensor(ck, R, 0, &err, -1, 0, 0, name, 0);
                for (int h = 0; h < NH; h++) {
                    double val = x ? x[per_head ? h : 0] : defaults[e];
                    if (e == 0) L->alpha = val;
                    else L->temps[3 * h + e - 1] = val;
                }
                free(x);
            }
        }
    }
    if (err) {
        gpt_ref_free(m);
        return -1;
    }
    return 0;
}

void gpt_ref_free(gpt_ref_model *m)
{
    if (!m) return;
    for (int l = 0; m->layers && l < m->n_layer; l++) {
        gpt_ref_layer *L = &m->layers[l];
        double *all[] = {L->ln_1_w, L->ln_1_b, L->c_attn_w, L->c_attn_b, L->attn_proj_w, L->attn_proj_b,
                         L->ln_2_w, L->ln_2_b, L->fc_w, L->fc_b, L->mlp_proj_w, L->mlp_proj_b,
                         L->lambda, L->head_norm_w, L->temps, L->thresholds, L->log_mass};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    }
    free(m->layers);
    if (m->lm_head != m->wte) free(m->lm_head);
    free(m->wte), free(m->wpe), free(m->ln_f_w), free(m->ln_f_b);
    memset(m, 0, sizeof *m);
}
