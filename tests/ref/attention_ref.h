/* Plain double-precision reference of the attention kinds of docs/spec.md section 1.
 *
 * Deliberately simple: no tiling, no streaming, no fused anything.  For every (batch, head,
 * query row) it computes every visible score, every weight, then the weighted sum of the V
 * rows, then the optional Norm and the output scale.  Inputs are contiguous [B,H,T,D]
 * arrays of doubles; strides, layouts and storage dtypes are the test harness's business.
 *
 * Besides the output it reports what the tests need to check the library exactly and to
 * choose honest tolerances:
 *  - exact counts for the sparsity statistic (TDA paper, Appendix E.1),
 *  - the distance of every score from the threshold, so inputs can be kept off it,
 *  - per-output magnitudes that drive the floating-point error of a fp32 kernel.
 */
#ifndef TDACL_TESTS_ATTENTION_REF_H
#define TDACL_TESTS_ATTENTION_REF_H

#include <stdint.h>

#include "tdacl.h" /* only for the tdacl_attention_kind / tdacl_head_norm enum values */

typedef struct attn_ref_params {
    tdacl_attention_kind kind;
    double beta, kappa, power; /* threshold and rectifier (tra/tda) */
    double lambda;             /* tda uses clamp(lambda, 0, 1); diff_softmax uses it as is */
    double scale;              /* NAN: 1/sqrt(d) for softmax/rela/diff_softmax, 1 for tra/tda */
    int normalize;             /* tra/tda: L2-normalise q and k before the dot product */
    tdacl_head_norm norm;      /* none or rms over dv */
    double norm_eps;
    const double *gain;        /* [dv] rms gain, or NULL for ones */
    double out_scale;
    int64_t offset;            /* absolute position of query 0; -1 means Tk - Tq */
    /* entmax: alpha, and the inverse temperature delta + beta (ln n)^gamma of a row that sees
     * n keys (temps: [H][3] per head, or NULL for the scalars) */
    double alpha, temp_delta, temp_beta, temp_gamma;
    const double *temps;
    /* topk_theta: thresholds [H][nthr] (row id n - 1 at column min(n - 1, nthr - 1)), compared
     * with the scores (theta_post 0) or the softmax weights (1); sdc, sdc_gamma and the offline
     * table log_mass [H][nthr]; vmc (docs/spec.md section 1c) */
    const double *thresholds, *log_mass;
    int nthr, theta_post, vmc;
    tdacl_sdc sdc;
    double sdc_gamma;
} attn_ref_params;

/* Every field of a default-initialised params struct set to the documented defaults:
 * beta 1, kappa 1, power 2, lambda 0.5, scale NAN, normalize 1, norm none, eps 1e-5,
 * out_scale 1, offset -1. */
attn_ref_params attn_ref_params_default(tdacl_attention_kind kind);

typedef struct attn_ref_shape {
    int B, H, Tq, Tk, d, dv;
} attn_ref_shape;

/* q, k (and q2, k2 for tda / diff_softmax): [B,H,Tq|Tk,d]; v: [B,H,Tk,dv]. */
typedef struct attn_ref_inputs {
    const double *q, *k, *v, *q2, *k2;
} attn_ref_inputs;

/* Outputs.  `out` is required; every other array may be NULL. */
typedef struct attn_ref_outputs {
    double *out;        /* [B,H,Tq,dv] the attention output (after Norm and out_scale) */
    double *pre_norm;   /* [B,H,Tq,dv] sum_j a_ij v_j, before Norm and out_scale */
    double *mag;        /* [B,H,Tq,dv] sum_j (|a1_ij| + |w2*a2_ij|) |v_jc|: the size of the
                           terms a kernel adds up (w2 = lc or lambda for two-view kinds) */
    double *dmag;       /* [B,H,Tq,dv] sum_j D_ij |v_jc|, D_ij = a bound on |d a_ij| when every
                           score of row i moves by at most 1 (see attention_ref.c) */
    double *row_smag;   /* [B,H,Tq] max over the row's visible pairs of |scale|*sum|q~||k~|
                           + |tau|: the magnitude that drives the rounding error of a score */
    double *key_margin; /* [B,H,Tk] min over visible queries (and both views) of |s - tau|;
                           INFINITY for keys no query sees and for softmax kinds */
    double *row_margin; /* [B,H,Tq] min over the row's visible keys of |s - tau| (entmax:
                           the row's own threshold in score units; topk_theta: the smallest
                           score kept); INFINITY for softmax kinds */
} attn_ref_outputs;

typedef struct attn_ref_counts {
    uint64_t visible_pairs; /* causally visible (query, key) pairs, all heads */
    uint64_t zero_weights;  /* exact zeros of the final weight among them (0 for softmax kinds;
                               topk_theta: the dropped keys, whatever VMC adds) */
    uint64_t survivors[2];  /* non-zero weights of view 1 and view 2 (topk_theta: kept keys) */
    double min_margin;      /* min |s - tau| over visible pairs (rela: tau = 0); INFINITY for
                               softmax kinds */
    double max_smag;        /* max of row_smag */
} attn_ref_counts;

/* Returns 0 on success, -1 on a bad argument or out of memory. */
int attn_ref_attention(const attn_ref_params *params, attn_ref_shape shape, attn_ref_inputs in,
                       attn_ref_outputs out, attn_ref_counts *counts);

/* The concepts, exposed so the tests can check them on their own. */
double attn_ref_tau(int64_t pos, double beta, double kappa, int d);
void attn_ref_l2_normalize(const double *x, int n, double *y);
int attn_ref_visible(int64_t i, int64_t j, int64_t offset);
double attn_ref_rectified_power(double x, double p);
/* alpha-entmax of n scores z (alpha > 1): p_j = max((alpha-1) z_j - tau, 0)^(1/(alpha-1)) with
 * tau such that sum p = 1, found exactly by sorting (docs/spec.md section 1b); returns tau. */
double attn_ref_entmax(const double *z, int n, double alpha, double *p);
void attn_ref_softmax(const double *s, int n, double *a);
void attn_ref_rms_norm(double *x, int n, double eps, const double *gain);

#endif
