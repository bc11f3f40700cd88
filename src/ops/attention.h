/* Internal attention entry points shared by the public call, the tuner and the bench. */
#ifndef TDACL_ATTENTION_H
#define TDACL_ATTENTION_H

#include "ops/variants.h"

/* Everything a launch needs, derived from a validated descriptor and tensors. */
typedef struct tdacl_attention_plan {
    tdacl_attention_desc desc; /* with defaults resolved (scale, offset) */
    int64_t B, H, Tq, Tk, offset;
    int d, dv, dpad, dvpad;
    tdacl_dtype dtype, odtype, gdtype;
    int aligned4;   /* views whose rows load 4 elements at a time (strides, offsets, d multiples of 4) */
    int aligned16;  /* views whose rows start on 16 bytes (the mma variant's cp.async) */
    tdacl_mma_choice mma; /* the matrix-unit body the mma variant would compile with */
    tdacl_attention_path path;  /* TDACL_PATH_PREFILL or TDACL_PATH_DECODE */
    int pmode;      /* 1, 2 or 0 (general power) */
    tdacl_problem problem;
    const tdacl_variant_def *row; /* the variant that runs the call */
    char variant_why[640];
    const struct tdacl_kv_rows *kv_rows; /* per-sequence key ranges, or NULL */
    cl_mem given_norms[4]; /* inverse norms of q, k, q2, k2 the caller computed (or NULL) */
} tdacl_attention_plan;

/* Per-sequence key ranges of a decode (a model's sequences at their own positions, in KV
 * cache slots): query row b reads cache sequence host[2b] (the batch index of k, v, k2, whose
 * batch dim is the cache's), its query 0 sitting at position host[2b + 1], so it sees keys
 * 0 .. host[2b + 1] + i.  mem holds the same pairs on the device (int2 per row). */
typedef struct tdacl_kv_rows {
    cl_mem mem;
    const int32_t *host;
} tdacl_kv_rows;

/* What the variant functions of the registry receive for an attention call. */
typedef struct tdacl_attention_call {
    const tdacl_attention_plan *plan;
    const tdacl_attention_tensors *t;
    tdacl_attention_stats *stats; /* NULL: no counters, no waiting */
    double *ms;                   /* accumulates kernel time (NULL: events released unread) */
} tdacl_attention_call;

tdacl_status tdacl__attention_plan(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                   const tdacl_attention_tensors *t, tdacl_attention_plan *plan);
/* The same with per-sequence key ranges (rows != NULL; the decode path, desc.offset unused):
 * k/v/k2's batch dim is the cache's, their T the longest range. */
tdacl_status tdacl__attention_plan_rows(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                        const tdacl_attention_tensors *t, const tdacl_kv_rows *rows,
                                        tdacl_attention_plan *plan);

/* tdacl_attention with per-sequence key ranges (rows may be NULL), without statistics.
 * norms (may be NULL): the inverse norms of q, k, q2, k2 rows ([B, H, T] fp32 each, Tq = Tk)
 * already computed (a model's RoPE pass), so the normalised kinds skip theirs. */
tdacl_status tdacl__attention_rows(tdacl_context *ctx, const tdacl_attention_desc *desc,
                                   const tdacl_attention_tensors *tensors, const tdacl_kv_rows *rows,
                                   const cl_mem *norms);

/* Runs a planned call on plan->row.  `force` overrides the tuned parameters (tuner); NULL
 * uses the lookup.  `used` (may be NULL) receives the parameters and where they came from. */
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

/* ---- the registry rows' functions (call: const tdacl_attention_call *) ---- */
int tdacl__attention_simt_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
int tdacl__attention_entmax_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
int tdacl__attention_topk_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
/* -D options of the row-tiled kernels (entmax, Top-theta): the prefill ones, plus ALIGNED16 for wide 16-bit loads */
void tdacl__attention_rows_call_options(const void *call, tdacl_strbuf *sb);
void tdacl__attention_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p);
void tdacl__attention_call_options(const void *call, tdacl_strbuf *sb);
void tdacl__attention_decode_call_options(const void *call, tdacl_strbuf *sb);
tdacl_status tdacl__attention_prefill_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                             const tdacl_param_values *v);
tdacl_status tdacl__attention_decode_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                            const tdacl_param_values *v);
tdacl_status tdacl__attention_decode_mma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                                const tdacl_param_values *v);
/* work-items per row of attention_decode_reduce (RED_NT) */
int tdacl__reduce_nt(const tdacl_attention_plan *p);
/* attention_mma.c */
int tdacl__attention_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
int tdacl__attention_mma_in(const tdacl_attention_plan *p);
int tdacl__attention_mma_lazy(const tdacl_attention_plan *p);
void tdacl__attention_mma_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p);
void tdacl__attention_mma_call_options(const void *call, tdacl_strbuf *sb);
/* attention.mma_views: a two-view kind one view a launch (attention_mma.c) */
int tdacl__attention_views_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
void tdacl__attention_views_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p);
void tdacl__attention_views_call_options(const void *call, tdacl_strbuf *sb);
/* The call as one of its views: the view's one-view kind, f32 output, no Norm, scale 1. */
void tdacl__attention_one_view_plan(const tdacl_attention_plan *p, tdacl_attention_plan *one);
int tdacl__attention_views_vec(const tdacl_attention_plan *p);
int tdacl__attention_views_tail(const tdacl_attention_plan *p);
tdacl_status tdacl__attention_views_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                           const tdacl_param_values *v);
int tdacl__attention_decode_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
void tdacl__attention_decode_mma_call_options(const void *call, tdacl_strbuf *sb);

#endif
