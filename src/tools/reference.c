/* Double-precision CPU attention used by the tuner to reject wrong candidates (the test
 * suite has its own, independent oracle in tests/ref/).  Straight from docs/spec.md section 1: for
 * each query row, score every visible key, turn scores into weights, sum weights x v. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/kinds.h"
#include "ops/gemm.h"
#include "tools/tuner.h"

static double dotd(const float *a, const float *b, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * (double)b[i];
    return s;
}

static double inv_norm(const float *x, int n)
{
    double s = sqrt(dotd(x, x, n));
    return 1.0 / (s > 1e-12 ? s : 1e-12);
}

/* entmax (docs/spec.md section 1b): scores s[0..n) -> weights, tau by bisection. */
static void entmax_weights(const tdacl_attention_desc *a, int n, double *s)
{
    const double am1 = (double)a->alpha - 1.0, e = 1.0 / am1;
    const double t = a->temp_delta + (n > 1 ? a->temp_beta * pow(log((double)n), a->temp_gamma) : 0.0);
    double mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        s[j] *= am1 * t;
        if (s[j] > mx) mx = s[j];
    }
    double lo = mx - 1.0, hi = mx;
    for (int it = 0; it < 200; it++) {
        double mid = 0.5 * (lo + hi), f = 0;
        for (int j = 0; j < n; j++) f += s[j] > mid ? pow(s[j] - mid, e) : 0.0;
        if (f >= 1.0) lo = mid;
        else hi = mid;
    }
    double sum = 0;
    for (int j = 0; j < n; j++) sum += (s[j] = s[j] > lo ? pow(s[j] - lo, e) : 0.0);
    for (int j = 0; j < n; j++) s[j] /= sum;
}

double tdacl__topk_normal_threshold(int64_t row_id, int64_t k)
{
    if (row_id + 1 <= k) return -INFINITY;
    const double tail = (double)k / (double)(row_id + 1);
    double lo = -10.0, hi = 10.0;
    for (int it = 0; it < 60; it++) { /* P(x > mid) = erfc(mid / sqrt 2) / 2 falls with mid */
        const double mid = 0.5 * (lo + hi);
        if (0.5 * erfc(mid / sqrt(2.0)) > tail) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

void tdacl__topk_normal_thresholds(int64_t H, int64_t T, int64_t k, float *out)
{
    for (int64_t r = 0; r < T; r++) {
        const float th = (float)tdacl__topk_normal_threshold(r, k);
        for (int64_t h = 0; h < H; h++) out[h * T + r] = th;
    }
}

/* topk_theta (docs/spec.md section 1c) as the tuner runs it -- pre-softmax, no compensation,
 * thresholds tdacl__topk_normal_threshold(row id, TDACL_TUNE_TOPK): softmax over the kept
 * scores (all zero when none is kept). */
static void topk_weights(int n, double *s)
{
    const double theta = (float)tdacl__topk_normal_threshold(n - 1, TDACL_TUNE_TOPK); /* as the device holds it */
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++)
        if (s[j] > mx) mx = s[j];
    for (int j = 0; j < n; j++) sum += (s[j] = s[j] >= theta ? exp(s[j] - mx) : 0.0);
    for (int j = 0; j < n; j++) s[j] = sum > 0 ? s[j] / sum : 0.0;
}

/* Weights of one view for query row i (w has `visible` entries). */
static void row_weights(const tdacl_attention_desc *a, const float *q, const float *k, int d, long pos,
                        int visible, double *w)
{
    const tdacl_kind_info *kind = tdacl__kind(a->kind);
    const int thr = kind->threshold, softmax = kind->softmax;
    double qn = thr && a->normalize ? inv_norm(q, d) : 1.0;
    double tau = 0;
    if (thr) {
        double l = 2.0 * log(((double)pos + 1.0) / a->kappa);
        tau = a->beta * sqrt((l > 0 ? l : 0) / d);
    }
    double mx = -INFINITY;
    for (int j = 0; j < visible; j++) {
        const float *kj = k + (size_t)j * d;
        double kn = thr && a->normalize ? inv_norm(kj, d) : 1.0;
        double s = a->scale * dotd(q, kj, d) * qn * kn;
        if (softmax) {
            w[j] = s;
            if (s > mx) mx = s;
        } else {
            double x = s - tau;
            w[j] = a->kind == TDACL_ATTN_ENTMAX || a->kind == TDACL_ATTN_TOPK_THETA ? s
                   : x > 0 ? (kind->rectified_power ? pow(x, a->power) : x) : 0.0;
        }
    }
    if (softmax) {
        double sum = 0;
        for (int j = 0; j < visible; j++) sum += (w[j] = exp(w[j] - mx));
        for (int j = 0; j < visible; j++) w[j] /= sum;
    }
    if (a->kind == TDACL_ATTN_ENTMAX) entmax_weights(a, visible, w);
    if (a->kind == TDACL_ATTN_TOPK_THETA) topk_weights(visible, w);
}

void tdacl__reference_attention(const tdacl_attention_desc *a, int B, int H, int Tq, int Tk, int d, int dv,
                                const float *q, const float *k, const float *v, const float *q2,
                                const float *k2, float *out)
{
    double *w = malloc((size_t)(Tk ? Tk : 1) * sizeof *w), *w2 = malloc((size_t)(Tk ? Tk : 1) * sizeof *w2);
    double *o = malloc((size_t)dv * sizeof *o);
    if (!w || !w2 || !o) {
        free(w), free(w2), free(o);
        return;
    }
    const tdacl_kind_info *kind = tdacl__kind(a->kind);
    const int two = kind->views == 2;
    const double lam = kind->lambda_clamped ? fmin(fmax(a->lambda, 0.0), 1.0) : a->lambda;
    for (int bh = 0; bh < B * H; bh++) {
        const float *kb = k + (size_t)bh * Tk * d, *vb = v + (size_t)bh * Tk * dv;
        for (int i = 0; i < Tq; i++) {
            long pos = a->offset + i;
            int visible = pos + 1 < Tk ? (int)(pos + 1) : Tk;
            const float *qi = q + ((size_t)bh * Tq + i) * d;
            row_weights(a, qi, kb, d, pos, visible, w);
            if (two) {
                row_weights(a, q2 + ((size_t)bh * Tq + i) * d, k2 + (size_t)bh * Tk * d, d, pos, visible, w2);
                for (int j = 0; j < visible; j++) w[j] -= lam * w2[j];
            }
            for (int c = 0; c < dv; c++) o[c] = 0;
            for (int j = 0; j < visible; j++)
                for (int c = 0; c < dv; c++) o[c] += w[j] * vb[(size_t)j * dv + c];
            double f = a->out_scale;
            if (a->norm == TDACL_NORM_RMS) {
                double ms = 0;
                for (int c = 0; c < dv; c++) ms += o[c] * o[c];
                f /= sqrt(ms / dv + a->norm_eps);
            }
            for (int c = 0; c < dv; c++) out[((size_t)bh * Tq + i) * dv + c] = (float)(o[c] * f);
        }
    }
    free(w), free(w2), free(o);
}

void tdacl__reference_gemm(const float *a, const float *w, const float *bias, const float *res, int flags, int M,
                           int N, int K, float *c)
{
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)a[(size_t)m * K + k] * (double)w[(size_t)k * N + n];
            if (flags & TDACL_EPI_BIAS) acc += bias[n];
            if (flags & TDACL_EPI_GELU) acc = 0.5 * acc * (1.0 + tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
            if (flags & TDACL_EPI_RESIDUAL) acc += res[(size_t)m * N + n];
            c[(size_t)m * N + n] = (float)acc;
        }
}
