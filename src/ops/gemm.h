/* The model's matmuls (cl/layers.cl, cl/gemm_mma.cl): a tiled GEMM with fused epilogues for
 * many rows (on the matrix units where the weights and the precision allow), GEMV kernels for
 * the few rows of decode, as rows of the variant registry. */
#ifndef TDACL_GEMM_H
#define TDACL_GEMM_H

#include "ops/variants.h"

enum { TDACL_EPI_BIAS = 1, TDACL_EPI_GELU = 2, TDACL_EPI_RESIDUAL = 4 };

#define TDACL_GEMV_MAX_ROWS 8 /* up to this many rows take the GEMV kernels */

/* What the model's decode step fuses into a GEMV (cl/layers.cl gemv, gemv_t): a norm of the
 * rows of a before the product; the QKV scatter (RoPE, KV-cache append) after it (B not
 * transposed); the greedy pick of each row of c (the transposed LM head, c in f32). */
typedef struct tdacl_gemv_fusion {
    const tdacl_tensor *norm_w, *norm_b; /* norm_w NULL: no norm; norm_b NULL: no bias */
    float eps;
    int rms;     /* RMSNorm rather than LayerNorm */
    int scatter; /* the QKV scatter below */
    cl_mem kc, k2c, vc; /* caches [B, ctx, C] (k2c NULL: one view) */
    int64_t cache_ld;   /* elements from one sequence's cache rows to the next */
    int pos, C, d;
    int rope_cols[4], cache_cols[4]; /* view start columns (-1: none): rotated; k, k2, v */
    cl_mem cos_t, sin_t;             /* RoPE tables [ctx, d/2], NULL: no RoPE */
    cl_mem rowmap; /* int2 per row: its cache sequence and position (replacing row m, pos), or NULL */
    cl_mem argmax_ids; /* M ints: row m's first largest c column (sample_greedy's rule), or NULL */
} tdacl_gemv_fusion;

/* One matmul call: c[M,N] = epilogue(a[M,K] @ B), B = w[K,N] or, with trans, w[N,K]. */
typedef struct tdacl_matmul_call {
    tdacl_tensor *c;
    const tdacl_tensor *a, *w, *bias, *res;
    int flags, M, N, K, trans;
    cl_event *ev; /* when not NULL: ev[0] receives the first kernel's event, ev[1] the second's
                     (split K's reduction) or NULL; tdacl__span_ms times them */
    tdacl_precision precision; /* BF16: an a not in bf16 may be rounded to bf16 for the matrix units */
    const tdacl_gemv_fusion *fuse; /* NULL, or a fused decode GEMV (gemv.simt only) */
} tdacl_matmul_call;

/* c[M,N] = epilogue(a[M,K] @ B): B is w[K,N] or, with trans, w[N,K] (the tied LM head).
 * a, c, res are 2-D tensors of f32, bf16 or f16 (res in c's dtype; row strides from their
 * shapes), bias f32; w is f32/bf16/f16.  epilogue: + bias[n] (TDACL_EPI_BIAS), gelu_tanh
 * (EPI_GELU), + res[m][n] (EPI_RESIDUAL; res may be c itself), in fp32, rounded once to c's
 * dtype.  bf16 a meets bf16 weights on the matrix units as it is; precision BF16 lets the
 * tensor-core row round any other a to bf16.
 * force_row with force pins a row and its parameters (the tuner); NULL chooses the variant
 * and looks its parameters up. */
tdacl_status tdacl__gemm(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                         const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K, int trans,
                         tdacl_precision precision, const tdacl_variant_def *force_row,
                         const tdacl_param_values *force, cl_event ev[2]);
/* A GEMV (M <= TDACL_GEMV_MAX_ROWS) with the decode step's fusions; trans: B is w[N,K]. */
tdacl_status tdacl__gemv_fused(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                               const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K,
                               int trans, const tdacl_gemv_fusion *fuse);
/* 0 when a GEMV can scatter QKV rows of head size d with RoPE (why says otherwise). */
int tdacl__gemv_rope_fits(int d, char *why, size_t n);

/* ---- the registry rows' functions (call: const tdacl_matmul_call *) ---- */
int tdacl__gemv_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
void tdacl__gemv_call_options(const void *call, tdacl_strbuf *sb);
tdacl_status tdacl__gemv_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                const tdacl_param_values *v);
int tdacl__gemm_simt_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
void tdacl__gemm_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p);
void tdacl__gemm_call_options(const void *call, tdacl_strbuf *sb);
tdacl_status tdacl__gemm_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                const tdacl_param_values *v);
int tdacl__gemm_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
/* the same kernel on Hopper's warpgroup products (gemm.wgmma: NVIDIA sm_90, bf16 a and weights) */
int tdacl__gemm_wgmma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n);
void tdacl__gemm_wgmma_call_options(const void *call, tdacl_strbuf *sb);
tdacl_status tdacl__gemm_wgmma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                      const tdacl_param_values *v);
void tdacl__gemm_mma_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p);
void tdacl__gemm_mma_call_options(const void *call, tdacl_strbuf *sb);
tdacl_status tdacl__gemm_mma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *call,
                                    const tdacl_param_values *v);

#endif
