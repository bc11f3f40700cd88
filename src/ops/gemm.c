/* Dispatch of the matmul kernels of cl/layers.cl through the variant registry. */
#include <stdio.h>
#include <string.h>

#include "ops/gemm.h"

static cl_mem mem(const tdacl_tensor *t) { return t ? t->storage->mem : NULL; }

/* GEMV geometry (cl/layers.cl: GV_COLS columns per work-group of GEMV_WG work-items). */
#define GEMV_COLS 64
#define GEMV_WG 128

static int pow2_at_least(int m)
{
    int p = 1;
    while (p < m) p *= 2;
    return p;
}

int tdacl__gemv_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_matmul_call *c = call;
    if (c->M > TDACL_GEMV_MAX_ROWS) return snprintf(why, n, "M=%d rows exceed the GEMV's %d", c->M, TDACL_GEMV_MAX_ROWS), 1;
    return 0;
}

void tdacl__gemv_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_matmul_call *c = call;
    tdacl__sb_printf(sb, "-DWDT=%d -DGV_M=%d -DGV_WG=%d", (int)c->w->dtype, pow2_at_least(c->M), GEMV_WG);
}

/* B [K, N] not transposed: partial sums over K chunks, then a reduce with the epilogue; the
 * chunk count gives the device about four work-groups per compute unit.  Transposed (the
 * tied LM head): one column per work-group. */
tdacl_status tdacl__gemv_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, c, v, &opts);
    if (opts.oom) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "gemv: out of memory");
    cl_mem cm = mem(c->c), am = mem(c->a), wm = mem(c->w), bm = mem(c->bias), rm = mem(c->res);
    cl_int cM = c->M, cN = c->N, cK = c->K, lda = (cl_int)c->a->strides[0], ldb = (cl_int)c->w->strides[0],
           ldc = (cl_int)c->c->strides[0], fl = c->flags;
    tdacl_status st;
    if (c->trans) {
        cl_kernel k;
        st = tdacl__variant_kernel(ctx, row, opts.data, "gemv_t", &k);
        tdacl__sb_free(&opts);
        if (!st)
            st = tdacl__set_args(ctx, k, "gemv_t", sizeof cm, &cm, sizeof am, &am, sizeof wm, &wm, sizeof bm, &bm, sizeof rm,
                                 &rm, sizeof cM, &cM, sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb,
                                 sizeof ldc, &ldc, sizeof fl, &fl, (size_t)0);
        size_t g[2] = {(size_t)c->N * GEMV_WG, 1}, l[2] = {GEMV_WG, 1};
        return st ? st : tdacl__launch(ctx, k, 2, g, l, c->ev, "gemv_t");
    }
    const int colblocks = (c->N + GEMV_COLS - 1) / GEMV_COLS, step = 4 * (GEMV_WG / GEMV_COLS);
    int target = 4 * (int)ctx->info.compute_units, ksplit = (target + colblocks - 1) / colblocks;
    if (ksplit < 1) ksplit = 1;
    int kchunk = (c->K + ksplit - 1) / ksplit;
    kchunk = (kchunk + step - 1) / step * step;
    if (kchunk < step) kchunk = step;
    const int nchunks = (c->K + kchunk - 1) / kchunk;
    cl_mem part;
    cl_kernel kp, kr;
    st = tdacl__scratch(ctx, TDACL_SCRATCH_GEMV, (size_t)nchunks * (size_t)pow2_at_least(c->M) * (size_t)c->N * 4, &part);
    if (!st) st = tdacl__variant_kernel(ctx, row, opts.data, "gemv_part", &kp);
    if (!st) st = tdacl__variant_kernel(ctx, row, opts.data, "gemv_reduce", &kr);
    tdacl__sb_free(&opts);
    if (st) return st;
    cl_int kc = kchunk, nc = nchunks;
    st = tdacl__set_args(ctx, kp, "gemv_part", sizeof part, &part, sizeof am, &am, sizeof wm, &wm, sizeof cM, &cM,
                         sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb, sizeof kc, &kc, (size_t)0);
    if (!st)
        st = tdacl__set_args(ctx, kr, "gemv_reduce", sizeof cm, &cm, sizeof part, &part, sizeof bm, &bm, sizeof rm, &rm,
                             sizeof cM, &cM, sizeof cN, &cN, sizeof ldc, &ldc, sizeof fl, &fl, sizeof nc, &nc,
                             (size_t)0);
    if (st) return st;
    size_t g[2] = {(size_t)colblocks * GEMV_WG, (size_t)nchunks}, l[2] = {GEMV_WG, 1};
    st = tdacl__launch(ctx, kp, 2, g, l, NULL, "gemv_part");
    size_t g2[2] = {(size_t)c->N, (size_t)c->M}, l2[2] = {64, 1};
    return st ? st : tdacl__launch(ctx, kr, 2, g2, l2, c->ev, "gemv_reduce");
}

void tdacl__gemm_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p)
{
    const tdacl_matmul_call *c = call;
    memset(p, 0, sizeof *p);
    p->kind = -1;
    p->dtype = c->w->dtype;
    p->t = c->M;
}

void tdacl__gemm_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_matmul_call *c = call;
    tdacl__sb_printf(sb, "-DWDT=%d -DTRANS_B=%d", (int)c->w->dtype, c->trans);
}

/* Both GEMM kernels (gemm, gemm_mma) take the same arguments: build the row's program for
 * this call and launch `kernel` over global g in work-groups of l. */
static tdacl_status launch_gemm_kernel(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_matmul_call *c,
                                       const tdacl_param_values *v, const char *kernel, size_t g[2], size_t l[2])
{
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, c, v, &opts);
    cl_kernel k;
    tdacl_status st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", kernel)
                               : tdacl__variant_kernel(ctx, row, opts.data, kernel, &k);
    tdacl__sb_free(&opts);
    if (st) return st;
    cl_mem cm = mem(c->c), am = mem(c->a), wm = mem(c->w), bmm = mem(c->bias), rm = mem(c->res);
    cl_int cM = c->M, cN = c->N, cK = c->K, lda = (cl_int)c->a->strides[0], ldb = (cl_int)c->w->strides[0],
           ldc = (cl_int)c->c->strides[0], fl = c->flags;
    st = tdacl__set_args(ctx, k, kernel, sizeof cm, &cm, sizeof am, &am, sizeof wm, &wm, sizeof bmm, &bmm, sizeof rm, &rm,
                         sizeof cM, &cM, sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb,
                         sizeof ldc, &ldc, sizeof fl, &fl, (size_t)0);
    return st ? st : tdacl__launch(ctx, k, 2, g, l, c->ev, kernel);
}

tdacl_status tdacl__gemm_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    const tdacl_kernel_space *ks = row->space;
    const int bm = tdacl__param(ks, v, "GBM"), bn = tdacl__param(ks, v, "GBN");
    const size_t nt = (size_t)((bm / tdacl__param(ks, v, "GTM")) * (bn / tdacl__param(ks, v, "GTN")));
    size_t g[2] = {(size_t)(c->N + bn - 1) / (size_t)bn * nt, (size_t)(c->M + bm - 1) / (size_t)bm}, l[2] = {nt, 1};
    return launch_gemm_kernel(ctx, row, c, v, "gemm", g, l);
}

/* ---- the tensor-core GEMM (cl/gemm_mma.cl) ---- */

int tdacl__gemm_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_matmul_call *c = call;
    tdacl_mma_choice m;
    tdacl__mma_choose(&ctx->info, &m);
    if (m.body < 0) return snprintf(why, n, "%s", m.why), 1;
    if (c->w->dtype == TDACL_F32) {
        if (c->precision != TDACL_PRECISION_TF32)
            return snprintf(why, n, "f32 weights reach the matrix units only at precision tf32 (desc.precision, "
                            "TDACL_PRECISION)"), 1;
        if (m.body != TDACL_MMA_PTX && m.body != TDACL_MMA_PORTABLE)
            return snprintf(why, n, "%s: precision tf32 runs on mma.sync only", m.name), 1;
        return 0;
    }
    if (c->w->dtype != TDACL_BF16)
        return snprintf(why, n, "weights are %s: the tensor-core GEMM takes bf16 weights (or f32 at precision tf32)",
                        tdacl_dtype_name(c->w->dtype)), 1;
    if (c->precision != TDACL_PRECISION_BF16)
        return snprintf(why, n, "f32 activations meet bf16 weights on the matrix units only at precision bf16 "
                        "(desc.precision, TDACL_PRECISION)"), 1;
    return 0;
}

void tdacl__gemm_mma_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p)
{
    tdacl__gemm_problem(ctx, call, p);
    tdacl_mma_choice m;
    tdacl__mma_choose(&ctx->info, &m);
    p->native = m.hardware;
    p->mma_regs = m.body == TDACL_MMA_PTX;
    p->tile_bytes = ((const tdacl_matmul_call *)call)->w->dtype == TDACL_F32 ? 4 : 2; /* tf32: f32 tiles */
}

void tdacl__gemm_mma_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_matmul_call *c = call;
    /* the operands start at their storage's element 0 (tdacl_matmul's contract), so row
     * strides decide the alignment of float4 loads of a and 16-byte copies of b */
    tdacl_mma_choice m;
    tdacl__mma_choose(&c->c->ctx->info, &m);
    tdacl__mma_options(&m, sb);
    /* MMA_IN: bf16 weights meet a rounded to bf16; f32 weights run as tf32 */
    tdacl__sb_printf(sb, " -DTRANS_B=%d -DMMA_IN=%d%s%s", c->trans, c->w->dtype == TDACL_F32 ? 3 : 1,
                     c->a->strides[0] % 4 == 0 ? " -DALIGNED_A" : "", c->w->strides[0] % 8 == 0 ? " -DALIGNED_B" : "");
}

tdacl_status tdacl__gemm_mma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                    const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    const int bm = tdacl__param(row->space, v, "GMM_BM"), bn = tdacl__param(row->space, v, "GMM_BN");
    const size_t nt = 32 * (size_t)tdacl__param(row->space, v, "GMM_WM") * (size_t)tdacl__param(row->space, v, "GMM_WN");
    size_t g[2] = {(size_t)(c->N + bn - 1) / (size_t)bn * nt, (size_t)(c->M + bm - 1) / (size_t)bm}, l[2] = {nt, 1};
    return launch_gemm_kernel(ctx, row, c, v, "gemm_mma", g, l);
}

tdacl_status tdacl__gemm(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                         const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K, int trans,
                         tdacl_precision precision, const tdacl_variant_def *force_row,
                         const tdacl_param_values *force, cl_event *ev)
{
    const tdacl_matmul_call call = {c, a, w, bias, res, flags, M, N, K, trans, ev, precision};
    const tdacl_variant_def *row = force ? (force_row ? force_row : tdacl__variant("gemm.simt")) : NULL;
    char why[256];
    tdacl_status st = row ? TDACL_SUCCESS : tdacl__variant_choose(ctx, TDACL_OP_MATMUL, &call, &row, why, sizeof why);
    if (!force && !st) {
        /* the matrix-unit row also names its body */
        tdacl_mma_choice m = {.name = NULL};
        if (row->matrix_units) tdacl__mma_choose(&ctx->info, &m);
        tdacl__log(ctx, TDACL_LOG_DEBUG, "matmul M=%d N=%d K=%d %s weights: %s%s%s%s", M, N, K, tdacl_dtype_name(w->dtype),
                   why, m.name ? " (" : "", m.name ? m.name : "", m.name ? ")" : "");
    }
    tdacl_tuned tuned;
    if (!st) st = tdacl__variant_params(ctx, row, &call, force, &tuned);
    return st ? st : row->launch(ctx, row, &call, &tuned.values);
}
