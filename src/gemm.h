/* The model's matmuls (cl/layers.cl): a tiled GEMM with fused epilogues for many rows and
 * GEMV kernels for the few rows of decode. */
#ifndef TDACL_GEMM_H
#define TDACL_GEMM_H

#include "tuning.h"

enum { TDACL_EPI_BIAS = 1, TDACL_EPI_GELU = 2, TDACL_EPI_RESIDUAL = 4 };

#define TDACL_GEMV_MAX_ROWS 8 /* up to this many rows take the GEMV kernels */

/* c[M,N] = epilogue(a[M,K] @ B): B is w[K,N] or, with trans, w[N,K] (the tied LM head).
 * a, c, bias, res are f32 2-D tensors (row strides from their shapes); w is f32/bf16/f16.
 * epilogue: + bias[n] (TDACL_EPI_BIAS), gelu_tanh (EPI_GELU), + res[m][n] (EPI_RESIDUAL; res
 * may be c itself).  force pins the GEMM parameters (tuner); NULL looks them up. */
tdacl_status tdacl__gemm(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                         const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K, int trans,
                         const tdacl_param_values *force, cl_event *ev);
/* Build options of the GEMM kernel for parameters v (program "layers"). */
void tdacl__gemm_options(tdacl_dtype wdt, const tdacl_param_values *v, int trans, tdacl_strbuf *sb);

#endif
