/* The table of attention kinds: what each kind means to every layer that handles one
 * (validation, dispatch, kernel options, tuning, the model config, the reference, the CLI
 * and the bench).  Adding a kind is one row here plus its kernel code; docs/spec.md gives
 * the math of each row. */
#ifndef TDACL_KINDS_H
#define TDACL_KINDS_H

#include "base/base.h"

typedef struct tdacl_kind_info {
    tdacl_attention_kind kind;
    const char *name;
    int views;        /* score views: 1 (q, k) or 2 (q, k and q2, k2) */
    int weight_sets;  /* weight rows multiplied into V: 2 for diff_softmax (W1 V - lambda W2 V) */
    int softmax;      /* weights from an online softmax: positive, so never an exact zero */
    int threshold;    /* the tau(n) threshold applies: beta, kappa, power and normalize */
    int rectified_power; /* the rectifier is raised to desc.power (tra, tda); rela uses 1 */
    int lambda;       /* desc.lambda (or the per-head lambdas) combines the views */
    int lambda_clamped; /* lambda is clamped to [0, 1] (tda) */
    int cosine_scale; /* default scale 1 (cosine scores of normalised q, k); else 1/sqrt(d) */
    int view_kind;    /* two views: the one-view kind each view is on its own (tda: tra), whose
                         weights combine linearly (attention.mma_views); -1 otherwise */
    const char *fields; /* descriptor fields the kind reads besides scale, norm, out_scale */
} tdacl_kind_info;

/* The row of `kind`, or NULL when kind is not a tdacl_attention_kind. */
const tdacl_kind_info *tdacl__kind(int kind);
/* The kind's name, or "any" for -1 (tuning entries) and "?" for anything else. */
const char *tdacl__kind_name(int kind);
/* The kind named s, or -2 when no kind has that name. */
int tdacl__kind_from_name(const char *s);
/* "softmax, rela, ...": the names in table order, for messages and usage lines. */
void tdacl__kind_names(char *buf, size_t n);

/* Shorthands over the table (0 for an invalid kind). */
static inline int tdacl__kind_views(int kind) { const tdacl_kind_info *k = tdacl__kind(kind); return k ? k->views : 1; }
static inline int tdacl__kind_weight_sets(int kind) { const tdacl_kind_info *k = tdacl__kind(kind); return k ? k->weight_sets : 1; }
static inline int tdacl__kind_softmax(int kind) { const tdacl_kind_info *k = tdacl__kind(kind); return k && k->softmax; }
static inline int tdacl__kind_threshold(int kind) { const tdacl_kind_info *k = tdacl__kind(kind); return k && k->threshold; }

#endif
