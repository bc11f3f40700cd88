/* Plain double-precision reference of docs/spec.md section 1 (see attention_ref.h).
 *
 * Read it top to bottom: the small functions are the concepts of the spec (threshold,
 * L2 normalisation, causal visibility, rectified power, softmax, rms Norm); then one
 * function computes the weights of one query row for every kind; then the driver walks
 * batches, heads and rows and adds up the weighted V rows. */
#include "ref/attention_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

attn_ref_params attn_ref_params_default(tdacl_attention_kind kind)
{
    attn_ref_params p;
    memset(&p, 0, sizeof p);
    p.kind = kind;
    p.beta = 1.0;
    p.kappa = 1.0;
    p.power = 2.0;
    p.lambda = 0.5;
    p.scale = NAN;
    p.normalize = 1;
    p.norm = TDACL_NORM_NONE;
    p.norm_eps = 1e-5;
    p.gain = NULL;
    p.out_scale = 1.0;
    p.offset = -1;
    p.alpha = 1.5;
    p.temp_delta = 1.0;
    p.temp_beta = 0.0;
    p.temp_gamma = 1.0;
    p.temps = NULL;
    p.sdc = TDACL_SDC_NONE;
    p.sdc_gamma = 0.05;
    return p;
}

/* ---- the concepts ---------------------------------------------------------------- */

/* Length-adaptive threshold of a query at absolute position pos:
 * tau(p) = beta * sqrt(max(0, 2 ln((p + 1) / kappa)) / d). */
double attn_ref_tau(int64_t pos, double beta, double kappa, int d)
{
    double l = 2.0 * log(((double)pos + 1.0) / kappa);
    if (l < 0.0) l = 0.0;
    return beta * sqrt(l / (double)d);
}

/* y = x / max(||x||_2, 1e-12). */
void attn_ref_l2_normalize(const double *x, int n, double *y)
{
    double ss = 0.0;
    for (int c = 0; c < n; c++) ss += x[c] * x[c];
    double norm = sqrt(ss);
    if (norm < 1e-12) norm = 1e-12;
    for (int c = 0; c < n; c++) y[c] = x[c] / norm;
}

/* Causal rule: query i (absolute position offset + i) sees key j iff j <= offset + i. */
int attn_ref_visible(int64_t i, int64_t j, int64_t offset) { return j <= offset + i; }

/* max(x, 0)^p, written so that x <= 0 gives exactly 0. */
double attn_ref_rectified_power(double x, double p) { return x > 0.0 ? pow(x, p) : 0.0; }

static int descending(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* alpha-entmax by sorting.  With u = (alpha-1) z sorted descending (u_1 >= u_2 >= ...) and
 * e = 1/(alpha-1), f(tau) = sum_j max(u_j - tau, 0)^e falls as tau rises, and the k-th largest
 * key is in the support exactly when f(u_k) = sum_{j<k} (u_j - u_k)^e < 1.  The support is the
 * largest such k; on [max(u_{k+1}, u_1 - 1), u_k] f is a smooth sum over those k keys, and
 * bisection to the last bit of a double finds its root (a closed form exists for alpha 2 and
 * 1.5 only). */
double attn_ref_entmax(const double *z, int n, double alpha, double *p)
{
    const double am1 = alpha - 1.0, e = 1.0 / am1;
    double *u = malloc((size_t)(n > 0 ? n : 1) * sizeof *u);
    if (!u || n < 1) {
        free(u);
        return NAN;
    }
    for (int j = 0; j < n; j++) u[j] = am1 * z[j];
    qsort(u, (size_t)n, sizeof *u, descending);
    int k = 1;
    while (k < n) {
        double f = 0.0;
        for (int j = 0; j < k; j++) f += pow(u[j] - u[k], e);
        if (f >= 1.0) break;
        k++;
    }
    double lo = u[0] - 1.0, hi = u[k - 1];
    if (k < n && u[k] > lo) lo = u[k];
    for (int it = 0; it < 200 && lo < hi; it++) {
        double mid = 0.5 * (lo + hi), f = 0.0;
        if (mid <= lo || mid >= hi) break;
        for (int j = 0; j < k; j++) f += pow(u[j] - mid, e);
        if (f >= 1.0) lo = mid;
        else hi = mid;
    }
    const double tau = 0.5 * (lo + hi);
    for (int j = 0; j < n; j++) {
        double x = am1 * z[j] - tau;
        p[j] = x > 0.0 ? pow(x, e) : 0.0;
    }
    free(u);
    return tau;
}

/* The inverse temperature of a row that sees n keys: delta + beta (ln n)^gamma, the second
 * term 0 for n = 1. */
static double entmax_temperature(const attn_ref_params *p, int h, int n)
{
    const double *t = p->temps ? p->temps + 3 * h : NULL;
    double delta = t ? t[0] : p->temp_delta, beta = t ? t[1] : p->temp_beta, gamma = t ? t[2] : p->temp_gamma;
    return delta + (n > 1 ? beta * pow(log((double)n), gamma) : 0.0);
}

/* a = softmax(s) over n scores (max-subtracted for range, which does not change it). */
void attn_ref_softmax(const double *s, int n, double *a)
{
    double m = -INFINITY;
    for (int j = 0; j < n; j++)
        if (s[j] > m) m = s[j];
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        a[j] = exp(s[j] - m);
        sum += a[j];
    }
    for (int j = 0; j < n; j++) a[j] /= sum;
}

/* In place: x <- x / sqrt(mean(x^2) + eps) * g (g = ones when gain is NULL). */
void attn_ref_rms_norm(double *x, int n, double eps, const double *gain)
{
    double ss = 0.0;
    for (int c = 0; c < n; c++) ss += x[c] * x[c];
    double inv = 1.0 / sqrt(ss / (double)n + eps);
    for (int c = 0; c < n; c++) x[c] = x[c] * inv * (gain ? gain[c] : 1.0);
}

static double dot(const double *x, const double *y, int n)
{
    double s = 0.0;
    for (int c = 0; c < n; c++) s += x[c] * y[c];
    return s;
}

static double abs_dot(const double *x, const double *y, int n)
{
    double s = 0.0;
    for (int c = 0; c < n; c++) s += fabs(x[c]) * fabs(y[c]);
    return s;
}

static int two_views(tdacl_attention_kind kind)
{
    return kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX;
}

static int is_softmax(tdacl_attention_kind kind)
{
    return kind == TDACL_ATTN_SOFTMAX || kind == TDACL_ATTN_DIFF_SOFTMAX;
}

static int uses_threshold(tdacl_attention_kind kind)
{
    return kind == TDACL_ATTN_TRA || kind == TDACL_ATTN_TDA;
}

/* Score scale with the spec's defaults: cosine scores (tra, tda) are not scaled, the
 * others use 1/sqrt(d). */
static double resolved_scale(const attn_ref_params *p, int d)
{
    if (!isnan(p->scale)) return p->scale;
    return uses_threshold(p->kind) ? 1.0 : 1.0 / sqrt((double)d);
}

/* ---- the weights of one query row --------------------------------------------------- */

/* Top-theta over one row's n scores s, m their maximum (docs/spec.md section 1c): a key is kept
 * when s >= theta (pre-softmax) or softmax(s) >= theta, i.e. s >= m + ln sum e^(s - m) + ln theta
 * (post-softmax; theta <= 0 keeps all).  Kept keys weigh e^(s - m) / (R + E~), R the kept keys'
 * sum of e^(s - m) and E~ the dropped keys' estimated share: their exact sum E (post-softmax,
 * SDC exact), gamma (n - kept) e^(theta - m) (exp-threshold), e^(eta - m) (offline), else 0.
 * VMC adds E~ / (R + E~) times the mean V row, that is that much spread evenly over the n keys.
 * Out: a (the total weight), kept (the kept keys' weights, 0 for dropped ones), D as softmax's
 * (2 a), *cut the smallest score kept. */
static void topk_theta_weights(const attn_ref_params *p, int n, const double *s, double theta, double eta,
                               double *a, double *kept, double *D, double *cut)
{
    double m = -INFINITY, z = 0.0, R = 0.0, E = 0.0;
    for (int j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
    for (int j = 0; j < n; j++) z += exp(s[j] - m);
    *cut = !p->theta_post ? theta : theta > 0.0 ? m + log(z) + log(theta) : -INFINITY;
    int nkept = 0;
    for (int j = 0; j < n; j++) {
        if (s[j] >= *cut) R += exp(s[j] - m), nkept++;
        else E += exp(s[j] - m);
    }
    double est = 0.0;
    if (p->theta_post || p->sdc == TDACL_SDC_EXACT) est = E;
    else if (p->sdc == TDACL_SDC_EXP_THRESHOLD) est = p->sdc_gamma * (n - nkept) * exp(theta - m);
    else if (p->sdc == TDACL_SDC_OFFLINE) est = exp(eta - m);
    const double den = R + est, spread = p->vmc && den > 0.0 ? est / den / n : 0.0;
    for (int j = 0; j < n; j++) {
        kept[j] = s[j] >= *cut && den > 0.0 ? exp(s[j] - m) / den : 0.0;
        a[j] = kept[j] + spread;
        D[j] = 2.0 * a[j];
    }
}

/* Scores and weights of one row over its n visible keys (keys 0..n-1).
 * In:  s1, s2 (scores of view 1 and 2; s2 unused for one-view kinds), tau of the row.
 * Out: a1, a2 (the per-view weights), a (the final weight) and D (first-order bound on
 *      |change of a_j| when every score of the row moves by at most 1):
 *        softmax       a = softmax(s)                      D = 2a   (da_j = a_j (ds_j - sum_k a_k ds_k))
 *        rela          a = max(s, 0)                       D = 1 where s > 0
 *        tra           a = max(s - tau, 0)^p               D = p (s - tau)^(p-1) where s > tau
 *        tda           a = a1 - lc a2, lc = clamp(lambda)  D = D1 + lc D2
 *        diff_softmax  a = softmax(s1) - lambda softmax(s2) D = 2 a1 + 2 |lambda| a2 */
static void row_weights(const attn_ref_params *p, int n, const double *s1, const double *s2,
                        double *tau_io, double temp, double *a1, double *a2, double *a, double *D)
{
    const double tau = *tau_io;
    switch (p->kind) {
    case TDACL_ATTN_ENTMAX: {
        /* a = entmax(temp * s); da_j = g_j (du_j - dtau) with g_j = e (u_j - tau)^(e-1) on the
         * support, dtau a g-weighted mean of du, du = (alpha-1) temp ds: D = 2 g (alpha-1)|temp|.
         * The threshold is reported in score units, tau / ((alpha-1) temp), so that |s - it| is
         * a key's distance from it. */
        const double am1 = p->alpha - 1.0, e = 1.0 / am1;
        for (int j = 0; j < n; j++) a2[j] = temp * s1[j];
        double t = attn_ref_entmax(a2, n, p->alpha, a1);
        for (int j = 0; j < n; j++) {
            double x = am1 * temp * s1[j] - t;
            a[j] = a1[j];
            a2[j] = 0.0;
            D[j] = x > 0.0 ? 2.0 * e * pow(x, e - 1.0) * am1 * fabs(temp) : 0.0;
        }
        *tau_io = temp != 0.0 ? t / (am1 * temp) : -INFINITY;
        break;
    }
    case TDACL_ATTN_SOFTMAX:
        attn_ref_softmax(s1, n, a1);
        for (int j = 0; j < n; j++) a2[j] = 0.0, a[j] = a1[j], D[j] = 2.0 * a1[j];
        break;
    case TDACL_ATTN_RELA:
        for (int j = 0; j < n; j++) {
            a1[j] = attn_ref_rectified_power(s1[j], 1.0);
            a2[j] = 0.0;
            a[j] = a1[j];
            D[j] = s1[j] > 0.0 ? 1.0 : 0.0;
        }
        break;
    case TDACL_ATTN_TRA:
        for (int j = 0; j < n; j++) {
            double x = s1[j] - tau;
            a1[j] = attn_ref_rectified_power(x, p->power);
            a2[j] = 0.0;
            a[j] = a1[j];
            D[j] = x > 0.0 ? p->power * pow(x, p->power - 1.0) : 0.0;
        }
        break;
    case TDACL_ATTN_TDA: {
        double lc = p->lambda < 0.0 ? 0.0 : p->lambda > 1.0 ? 1.0 : p->lambda;
        for (int j = 0; j < n; j++) {
            double x1 = s1[j] - tau, x2 = s2[j] - tau;
            a1[j] = attn_ref_rectified_power(x1, p->power);
            a2[j] = attn_ref_rectified_power(x2, p->power);
            a[j] = a1[j] - lc * a2[j];
            D[j] = (x1 > 0.0 ? p->power * pow(x1, p->power - 1.0) : 0.0) +
                   lc * (x2 > 0.0 ? p->power * pow(x2, p->power - 1.0) : 0.0);
        }
        break;
    }
    case TDACL_ATTN_TOPK_THETA: /* topk_theta_weights, which needs the row's table entries */
        break;
    case TDACL_ATTN_DIFF_SOFTMAX:
        attn_ref_softmax(s1, n, a1);
        attn_ref_softmax(s2, n, a2);
        for (int j = 0; j < n; j++) {
            a[j] = a1[j] - p->lambda * a2[j];
            D[j] = 2.0 * a1[j] + 2.0 * fabs(p->lambda) * a2[j];
        }
        break;
    }
}

/* Weight of view 2 in the magnitude of the summed terms. */
static double view2_factor(const attn_ref_params *p)
{
    if (p->kind == TDACL_ATTN_TDA) return p->lambda < 0.0 ? 0.0 : p->lambda > 1.0 ? 1.0 : p->lambda;
    if (p->kind == TDACL_ATTN_DIFF_SOFTMAX) return fabs(p->lambda);
    return 0.0;
}

/* ---- the driver ----------------------------------------------------------------------- */

/* Query/key rows of one head as used in the dot product: L2-normalised for tra/tda when
 * normalize is on, else copied as is. */
static void prepare_rows(const attn_ref_params *p, const double *x, int rows, int d, double *y)
{
    int normalize = uses_threshold(p->kind) && p->normalize;
    for (int r = 0; r < rows; r++) {
        if (normalize)
            attn_ref_l2_normalize(x + (size_t)r * d, d, y + (size_t)r * d);
        else
            memcpy(y + (size_t)r * d, x + (size_t)r * d, (size_t)d * sizeof *y);
    }
}

int attn_ref_attention(const attn_ref_params *p, attn_ref_shape sh, attn_ref_inputs in,
                       attn_ref_outputs out, attn_ref_counts *counts)
{
    if (!p || !counts || !out.out || !in.q || !in.k || !in.v) return -1;
    if (two_views(p->kind) && (!in.q2 || !in.k2)) return -1;
    if (sh.B < 0 || sh.H < 0 || sh.Tq < 0 || sh.Tk < 0 || sh.d < 1 || sh.dv < 1) return -1;
    const int B = sh.B, H = sh.H, Tq = sh.Tq, Tk = sh.Tk, d = sh.d, dv = sh.dv;
    const int nviews = two_views(p->kind) ? 2 : 1;
    const int64_t offset = p->offset < 0 ? (int64_t)Tk - Tq : p->offset;
    const double scale = resolved_scale(p, d);
    const double w2 = view2_factor(p);
    memset(counts, 0, sizeof *counts);
    counts->min_margin = INFINITY;

    size_t kn = (size_t)(Tk > 0 ? Tk : 1);
    double *qr[2] = {0}, *kr[2] = {0};
    double *s1 = calloc(kn, sizeof(double)), *s2 = calloc(kn, sizeof(double));
    double *a1 = calloc(kn, sizeof(double)), *a2 = calloc(kn, sizeof(double));
    double *a = calloc(kn, sizeof(double)), *D = calloc(kn, sizeof(double));
    double *smag = calloc(kn, sizeof(double)), *y = calloc((size_t)dv, sizeof(double));
    int ok = s1 && s2 && a1 && a2 && a && D && smag && y;
    for (int t = 0; t < nviews && ok; t++) {
        qr[t] = calloc((size_t)(Tq > 0 ? Tq : 1) * d, sizeof(double));
        kr[t] = calloc(kn * d, sizeof(double));
        ok = qr[t] && kr[t];
    }
    for (int b = 0; b < B && ok; b++)
        for (int h = 0; h < H; h++) {
            size_t head = (size_t)b * H + h;
            const double *qsrc[2] = {in.q, in.q2}, *ksrc[2] = {in.k, in.k2};
            for (int t = 0; t < nviews; t++) {
                prepare_rows(p, qsrc[t] + head * Tq * d, Tq, d, qr[t]);
                prepare_rows(p, ksrc[t] + head * Tk * d, Tk, d, kr[t]);
            }
            const double *v = in.v + head * Tk * dv;
            if (out.key_margin)
                for (int j = 0; j < Tk; j++) out.key_margin[head * Tk + j] = INFINITY;

            for (int i = 0; i < Tq; i++) {
                int64_t pos = offset + i;
                /* the visible keys are the prefix 0..n-1 */
                int n = 0;
                while (n < Tk && attn_ref_visible(i, n, offset)) n++;
                double tau = uses_threshold(p->kind) ? attn_ref_tau(pos, p->beta, p->kappa, d) : 0.0;
                const double temp = p->kind == TDACL_ATTN_ENTMAX ? entmax_temperature(p, h, n) : 1.0;

                double row_smag = 0.0;
                for (int j = 0; j < n; j++) {
                    s1[j] = scale * dot(qr[0] + (size_t)i * d, kr[0] + (size_t)j * d, d);
                    smag[j] = fabs(scale) * abs_dot(qr[0] + (size_t)i * d, kr[0] + (size_t)j * d, d);
                    if (nviews == 2) {
                        s2[j] = scale * dot(qr[1] + (size_t)i * d, kr[1] + (size_t)j * d, d);
                        double m2 = fabs(scale) * abs_dot(qr[1] + (size_t)i * d, kr[1] + (size_t)j * d, d);
                        if (m2 > smag[j]) smag[j] = m2;
                    }
                    if (smag[j] + fabs(tau) > row_smag) row_smag = smag[j] + fabs(tau);
                }
                if (p->kind == TDACL_ATTN_TOPK_THETA) {
                    /* a1 = a (the whole weight, VMC's share included), a2 = the kept keys' weights */
                    const int rid = (n > 0 ? n - 1 : 0) < p->nthr - 1 ? (n > 0 ? n - 1 : 0) : p->nthr - 1;
                    const double eta = p->log_mass ? p->log_mass[(size_t)h * p->nthr + rid] : 0.0;
                    topk_theta_weights(p, n, s1, p->thresholds[(size_t)h * p->nthr + rid], eta, a1, a2, D, &tau);
                    memcpy(a, a1, (size_t)n * sizeof *a);
                } else {
                    row_weights(p, n, s1, s2, &tau, temp, a1, a2, a, D);
                }

                /* output row: y = sum_j a_ij v_j, then Norm and the output scale */
                size_t orow = (head * Tq + i) * dv;
                for (int c = 0; c < dv; c++) {
                    double sum = 0.0, m = 0.0, dm = 0.0;
                    for (int j = 0; j < n; j++) {
                        double vj = v[(size_t)j * dv + c];
                        sum += a[j] * vj;
                        m += (fabs(a1[j]) + w2 * fabs(a2[j])) * fabs(vj);
                        dm += D[j] * fabs(vj);
                    }
                    y[c] = sum;
                    if (out.pre_norm) out.pre_norm[orow + c] = sum;
                    if (out.mag) out.mag[orow + c] = m;
                    if (out.dmag) out.dmag[orow + c] = dm;
                }
                if (p->norm == TDACL_NORM_RMS) attn_ref_rms_norm(y, dv, p->norm_eps, p->gain);
                for (int c = 0; c < dv; c++) out.out[orow + c] = y[c] * p->out_scale;
                if (out.row_smag) out.row_smag[head * Tq + i] = row_smag;
                if (row_smag > counts->max_smag) counts->max_smag = row_smag;

                /* sparsity counts: softmax weights are positive by definition */
                counts->visible_pairs += (uint64_t)n;
                if (out.row_margin) out.row_margin[head * Tq + i] = INFINITY;
                if (is_softmax(p->kind)) {
                    counts->survivors[0] += (uint64_t)n;
                    if (nviews == 2) counts->survivors[1] += (uint64_t)n;
                    continue;
                }
                const int topk = p->kind == TDACL_ATTN_TOPK_THETA;
                for (int j = 0; j < n; j++) {
                    counts->zero_weights += (topk ? a2[j] : a[j]) == 0.0;
                    counts->survivors[0] += (topk ? a2[j] : a1[j]) != 0.0;
                    counts->survivors[1] += !topk && a2[j] != 0.0;
                    /* distance from the threshold (rela: from 0) in every view */
                    double margin = fabs(s1[j] - tau);
                    if (nviews == 2 && fabs(s2[j] - tau) < margin) margin = fabs(s2[j] - tau);
                    if (margin < counts->min_margin) counts->min_margin = margin;
                    if (out.row_margin && margin < out.row_margin[head * Tq + i]) out.row_margin[head * Tq + i] = margin;
                    if (out.key_margin && margin < out.key_margin[head * Tk + j])
                        out.key_margin[head * Tk + j] = margin;
                }
            }
        }
    for (int t = 0; t < 2; t++) free(qr[t]), free(kr[t]);
    free(s1), free(s2), free(a1), free(a2), free(a), free(D), free(smag), free(y);
    return ok ? 0 : -1;
}
