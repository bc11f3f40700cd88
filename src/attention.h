/* Internal attention entry points shared by the public call, the tuner and the bench. */
#ifndef TDACL_ATTENTION_H
#define TDACL_ATTENTION_H

#include "tuning.h"

/* Everything a launch needs, derived from a validated descriptor and tensors. */
typedef struct tdacl_attention_plan {
    tdacl_attention_desc desc; /* with defaults resolved (scale, offset) */
    int64_t B, H, Tq, Tk, offset;
    int d, dv, dpad, dvpad;
    tdacl_dtype dtype, odtype, gdtype;
    int aligned4;
    int path;       /* TDACL_PATH_PREFILL or TDACL_PATH_DECODE */
    int pmode;      /* 1, 2 or 0 (general power) */
    tdacl_problem problem;
    int variant;    /* tdacl_variant: which kernel runs (attention_mma.c decides) */
    int mma_native, mma_bn, mma_nwarps, mma_mt, aligned16;
    char variant_why[192];
} tdacl_attention_plan;

typedef enum tdacl_variant {
    TDACL_VARIANT_SIMT = 0, /* cl/attention.cl, cl/attention_decode.cl: the FP32 lanes */
    TDACL_VARIANT_MMA = 1   /* cl/attention_mma.cl: matrix units through cl/mma.cl */
} tdacl_variant;

/* attention_mma.c: sets plan->variant (and its tile) for this device and call. */
void tdacl__attention_choose_variant(tdacl_context *ctx, tdacl_attention_plan *p, const tdacl_attention_tensors *t);
void tdacl__attention_mma_options(const tdacl_attention_plan *p, tdacl_strbuf *sb);
size_t tdacl__attention_mma_local_bytes(int kind, int d, int dv, int bn, int nwarps, int mt, int native);
int tdacl__attention_mma_rows(const tdacl_attention_plan *p);
int tdacl__attention_mma_threads(const tdacl_attention_plan *p);

tdacl_status tdacl__attention_plan(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                   const tdacl_attention_tensors *t, tdacl_attention_plan *plan);

/* Runs a planned call.  `force` overrides the tuned parameters (tuner); NULL uses the
 * lookup.  `used` (may be NULL) receives the parameters and where they came from. */
tdacl_status tdacl__attention_run(tdacl_context *ctx, const tdacl_attention_plan *plan,
                                  const tdacl_attention_tensors *t,
                                  const tdacl_param_values *force, tdacl_tuned *used,
                                  tdacl_attention_stats *stats);

/* Build options (after the device's base options) of a planned call with parameters v. */
void tdacl__attention_options(const tdacl_attention_plan *plan, const tdacl_param_values *v, tdacl_strbuf *sb);

/* Builds (or loads from the cache) the program of a planned call with parameters v. */
tdacl_status tdacl__attention_build(tdacl_context *ctx, const tdacl_attention_plan *plan, const tdacl_param_values *v);

/* Visible (query, key) pairs per head for the causal rule j <= offset + i, j < Tk. */
uint64_t tdacl__visible_pairs(int64_t tq, int64_t tk, int64_t offset);

#endif
