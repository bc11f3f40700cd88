/* Dispatch of the matmul kernels of cl/layers.cl through the variant registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/gemm.h"

static cl_mem mem(const tdacl_tensor *t) { return t ? t->storage->mem : NULL; }

/* GEMV geometry (cl/layers.cl gemv: GV_COLS columns per work-group of GEMV_WG work-items;
 * 128 columns where a scattered QKV row's RoPE needs whole heads of 128 in a block). */
#define GEMV_WG 128
#define GEMV_T_LANES 8 /* work-items per column of the transposed GEMV (cl/layers.cl GVT_LANES) */
#define GEMV_T_XLOCAL 16384 /* bytes of local memory the transposed GEMV may stage a in (any OpenCL device has 32 KB) */

static int pow2_at_least(int m)
{
    int p = 1;
    while (p < m) p *= 2;
    return p;
}

int tdacl__gemv_rope_fits(int d, char *why, size_t n)
{
    if (d > 0 && (64 % d == 0 || d == 128)) return 0;
    return snprintf(why, n, "head_dim %d: the fused QKV GEMV turns RoPE pairs within a block of 64 or 128 "
                    "columns (head_dim dividing 64, or 128)", d), 1;
}

static int gemv_cols(const tdacl_matmul_call *c)
{
    return c->fuse && c->fuse->scatter && c->fuse->cos_t && c->fuse->d == 128 ? 128 : 64;
}

/* 8 elements a load (16 bytes of bf16) where B's rows start 8-element aligned; a row's last
 * group of fewer than 8 is read one element at a time */
static int gemv_vec(const tdacl_matmul_call *c)
{
    return c->w->strides[0] % 8 == 0 && c->w->offset % 8 == 0 ? 8 : 1;
}

int tdacl__gemv_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_matmul_call *c = call;
    if (c->M > TDACL_GEMV_MAX_ROWS) return snprintf(why, n, "M=%d rows exceed the GEMV's %d", c->M, TDACL_GEMV_MAX_ROWS), 1;
    if (c->fuse && c->trans && c->fuse->scatter) return snprintf(why, n, "the QKV scatter takes B not transposed"), 1;
    if (c->fuse && c->fuse->argmax_ids && (!c->trans || c->c->dtype != TDACL_F32))
        return snprintf(why, n, "the fused greedy pick takes B transposed and f32 c"), 1;
    if (c->fuse && c->fuse->scatter && c->fuse->cos_t) return tdacl__gemv_rope_fits(c->fuse->d, why, n);
    return 0;
}

/* the GEMM rows run no decode fusions */
static int refuse_fusion(const tdacl_matmul_call *c, char *why, size_t n)
{
    return c->fuse ? (snprintf(why, n, "the decode step's norm and QKV scatter run in the GEMV only"), 1) : 0;
}

int tdacl__gemm_simt_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    (void)ctx;
    return refuse_fusion(call, why, n);
}

/* A's and C's storage dtypes (cl/epilogue.cl ADT, CDT) where they are not f32 */
static void io_dtype_options(const tdacl_matmul_call *c, tdacl_strbuf *sb)
{
    if (c->a->dtype != TDACL_F32) tdacl__sb_printf(sb, " -DADT=%d", (int)c->a->dtype);
    if (c->c->dtype != TDACL_F32) tdacl__sb_printf(sb, " -DCDT=%d", (int)c->c->dtype);
}

void tdacl__gemv_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_matmul_call *c = call;
    tdacl__sb_printf(sb, "-DWDT=%d -DGV_M=%d -DGV_WG=%d -DGV_COLS=%d -DGVT_LANES=%d", (int)c->w->dtype,
                     pow2_at_least(c->M), GEMV_WG, gemv_cols(c), GEMV_T_LANES);
    io_dtype_options(c, sb);
    if (gemv_vec(c) > 1) tdacl__sb_printf(sb, " -DGV_VEC=%d", gemv_vec(c));
    if (c->fuse && c->fuse->norm_w) tdacl__sb_printf(sb, " -DGV_NORM=1");
    if (c->fuse && c->fuse->scatter) tdacl__sb_printf(sb, " -DGV_SCATTER=1");
    if (c->fuse && c->fuse->argmax_ids) tdacl__sb_printf(sb, " -DGV_ARGMAX=1");
}

/* The norm fusion's arguments (cl/layers.cl GV_NORM: nw, nb, eps, rms) from argument *next on,
 * where the call fuses a norm; *next moves past them. */
static tdacl_status set_norm_args(tdacl_context *ctx, cl_kernel k, const char *name, unsigned *next,
                                  const tdacl_gemv_fusion *f)
{
    if (!f->norm_w) return TDACL_SUCCESS;
    cl_mem nwm = mem(f->norm_w), nbm = mem(f->norm_b);
    cl_float eps = f->eps;
    cl_int rms = f->rms;
    tdacl_status st = tdacl__set_args_from(ctx, k, name, *next, sizeof nwm, &nwm, sizeof nbm, &nbm, sizeof eps, &eps,
                                           sizeof rms, &rms, (size_t)0);
    *next += 4;
    return st;
}

static tdacl_status launch_gemv_t(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_matmul_call *c,
                                  const char *opts)
{
    cl_mem cm = mem(c->c), am = mem(c->a), wm = mem(c->w), bm = mem(c->bias), rm = mem(c->res);
    cl_int cM = c->M, cN = c->N, cK = c->K, lda = (cl_int)c->a->strides[0], ldb = (cl_int)c->w->strides[0],
           ldc = (cl_int)c->c->strides[0], fl = c->flags;
    /* a's rows staged as f32 in local memory (cl/layers.cl gemv_t), K rounded up to 8 floats a
     * row, where local memory is the device's own and they fit GEMV_T_XLOCAL bytes; else read
     * from global memory.  A CPU's local memory is ordinary memory: there the copy only costs
     * (PoCL, decode steps of 4 sequences 1.13-1.25x slower, bench/results/lmhead-softmax/).
     * $TDACL_GEMV_STAGE=0|1 overrides the device's choice (tests, comparisons). */
    const int rows = pow2_at_least(c->M);
    int stage = ctx->info.local_mem_is_dedicated;
    const char *env = getenv("TDACL_GEMV_STAGE");
    if (env && *env) {
        if (strcmp(env, "0") && strcmp(env, "1"))
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "TDACL_GEMV_STAGE=%.32s is not 0 or 1", env);
        stage = env[0] == '1';
    }
    cl_int xk = (cK + 7) / 8 * 8;
    const int fits = (size_t)rows * (size_t)xk * sizeof(float) <= GEMV_T_XLOCAL;
    if (!stage || !fits) xk = 0;
    if (tdacl__log_enabled(ctx, TDACL_LOG_DEBUG))
        tdacl__log(ctx, TDACL_LOG_DEBUG, "gemv_t %dx%dx%d: a %s", c->M, c->N, c->K,
                   xk ? "staged in local memory"
                   : !fits ? "read from global memory (its rows exceed the local copy's 16 KB)"
                   : env && *env ? "read from global memory (TDACL_GEMV_STAGE=0)"
                                 : "read from global memory (local memory is not the device's own)");
    const size_t xbytes = xk ? (size_t)rows * (size_t)xk * sizeof(float) : 16;
    const size_t cols = GEMV_WG / GEMV_T_LANES, groups = ((size_t)c->N + cols - 1) / cols; /* cl/layers.cl GVT_COLS */
    const tdacl_gemv_fusion none = {.eps = 0}, *f = c->fuse ? c->fuse : &none;
    cl_mem part = NULL, count = NULL;
    if (f->argmax_ids) { /* each work-group's pick of each row, then one arrival counter */
        tdacl_status st = tdacl__scratch(ctx, TDACL_SCRATCH_GEMV, groups * (size_t)rows * 8, &part);
        if (!st) st = tdacl__arrival_counters(ctx, 1, &count);
        if (st) return st;
    }
    tdacl_strbuf o = {0};
    tdacl__sb_printf(&o, "%s -DGVT_STAGE=%d", opts, xk ? 1 : 0);
    if (o.oom) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "gemv_t: out of memory");
    cl_kernel k;
    tdacl_status st = tdacl__variant_kernel(ctx, row, o.data, "gemv_t", &k);
    tdacl__sb_free(&o);
    if (!st)
        st = tdacl__set_args(ctx, k, "gemv_t", sizeof cm, &cm, sizeof am, &am, sizeof wm, &wm, sizeof bm, &bm, sizeof rm,
                             &rm, sizeof cM, &cM, sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb,
                             sizeof ldc, &ldc, sizeof fl, &fl, xbytes, (const void *)NULL, sizeof xk, &xk, (size_t)0);
    unsigned next = 14; /* the fusions' arguments follow only where compiled in */
    if (!st) st = set_norm_args(ctx, k, "gemv_t", &next, f);
    if (!st && f->argmax_ids)
        st = tdacl__set_args_from(ctx, k, "gemv_t", next, sizeof part, &part, sizeof count, &count, sizeof f->argmax_ids,
                                  &f->argmax_ids, (size_t)0);
    size_t g[2] = {groups * GEMV_WG, 1}, l[2] = {GEMV_WG, 1};
    return st ? st : tdacl__launch(ctx, k, 2, g, l, c->ev, "gemv_t");
}

/* B [K, N] not transposed: one launch of cl/layers.cl gemv over (column block, K chunk)
 * work-groups, the chunk count giving the device about four work-groups per compute unit;
 * the last chunk of a block to finish applies the epilogue.  Transposed (the tied LM head):
 * gemv_t, one column per work-group. */
tdacl_status tdacl__gemv_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, c, v, &opts);
    if (opts.oom) return tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "gemv: out of memory");
    if (c->trans) {
        tdacl_status st = launch_gemv_t(ctx, row, c, opts.data);
        tdacl__sb_free(&opts);
        return st;
    }
    const int cols = gemv_cols(c), colblocks = (c->N + cols - 1) / cols, step = 4 * (GEMV_WG / (cols / gemv_vec(c)));
    int target = 4 * (int)ctx->info.compute_units, ksplit = (target + colblocks - 1) / colblocks;
    if (ksplit < 1) ksplit = 1;
    int kchunk = (c->K + ksplit - 1) / ksplit;
    kchunk = (kchunk + step - 1) / step * step;
    if (kchunk < step) kchunk = step;
    const int nchunks = (c->K + kchunk - 1) / kchunk;
    cl_mem part, arrivals;
    cl_kernel k;
    tdacl_status st = tdacl__scratch(ctx, TDACL_SCRATCH_GEMV, (size_t)nchunks * (size_t)pow2_at_least(c->M) * (size_t)c->N * 4, &part);
    if (!st) st = tdacl__arrival_counters(ctx, (size_t)colblocks, &arrivals);
    if (!st) st = tdacl__variant_kernel(ctx, row, opts.data, "gemv", &k);
    tdacl__sb_free(&opts);
    if (st) return st;
    const tdacl_gemv_fusion none = {.eps = 0}, *f = c->fuse ? c->fuse : &none;
    cl_mem cm = mem(c->c), am = mem(c->a), wm = mem(c->w), bm = mem(c->bias), rm = mem(c->res);
    cl_int cM = c->M, cN = c->N, cK = c->K, lda = (cl_int)c->a->strides[0], ldb = (cl_int)c->w->strides[0],
           ldc = (cl_int)c->c->strides[0], fl = c->flags, kc = kchunk, nc = nchunks, pos = f->pos, C = f->C, d = f->d;
    cl_long cache_ld = f->cache_ld;
    cl_int4 rope_cols = {{f->rope_cols[0], f->rope_cols[1], f->rope_cols[2], f->rope_cols[3]}};
    cl_int4 cache_cols = {{f->cache_cols[0], f->cache_cols[1], f->cache_cols[2], f->cache_cols[3]}};
    /* the fusions' arguments follow only where compiled in (cl/layers.cl gemv) */
    st = tdacl__set_args(ctx, k, "gemv", sizeof cm, &cm, sizeof am, &am, sizeof wm, &wm, sizeof bm, &bm, sizeof rm, &rm,
                         sizeof part, &part, sizeof arrivals, &arrivals, sizeof cM, &cM, sizeof cN, &cN, sizeof cK, &cK,
                         sizeof lda, &lda, sizeof ldb, &ldb, sizeof ldc, &ldc, sizeof fl, &fl, sizeof kc, &kc,
                         sizeof nc, &nc, (size_t)0);
    unsigned next = 16; /* the arguments set above */
    if (!st) st = set_norm_args(ctx, k, "gemv", &next, f);
    if (!st && f->scatter)
        st = tdacl__set_args_from(ctx, k, "gemv", next, sizeof f->kc, &f->kc, sizeof f->k2c, &f->k2c, sizeof f->vc, &f->vc,
                                  sizeof cache_ld, &cache_ld, sizeof pos, &pos, sizeof C, &C, sizeof d, &d,
                                  sizeof rope_cols, &rope_cols, sizeof cache_cols, &cache_cols, sizeof f->cos_t,
                                  &f->cos_t, sizeof f->sin_t, &f->sin_t, sizeof f->rowmap, &f->rowmap, (size_t)0);
    size_t g[2] = {(size_t)colblocks * GEMV_WG, (size_t)nchunks}, l[2] = {GEMV_WG, 1};
    return st ? st : tdacl__launch(ctx, k, 2, g, l, c->ev, "gemv");
}

void tdacl__gemm_problem(const tdacl_context *ctx, const void *call, tdacl_problem *p)
{
    const tdacl_matmul_call *c = call;
    memset(p, 0, sizeof *p);
    p->kind = -1;
    p->dtype = c->w->dtype;
    p->adtype = c->a->dtype; /* bf16 a is copied into the tiles as it is: other tiles pay */
    p->t = c->M;
}

void tdacl__gemm_call_options(const void *call, tdacl_strbuf *sb)
{
    const tdacl_matmul_call *c = call;
    tdacl__sb_printf(sb, "-DWDT=%d -DTRANS_B=%d", (int)c->w->dtype, c->trans);
    io_dtype_options(c, sb);
}

/* Chunks of K (a multiple of `step`) the tiled GEMM splits into: when the tiles alone leave
 * compute units without a work-group, K is split so that each has about two (each chunk at
 * least two steps).  Where the tiles fill the device once, the partials' round trip costs
 * more than the second wave saves (H100: 1024 x 2304 x 768 bf16 0.060 -> 0.093 ms split in
 * two).  $TDACL_GEMM_SPLIT_K=N forces N chunks (as far as K allows; tests and comparisons). */
static tdacl_status k_chunk(tdacl_context *ctx, int64_t tiles, int K, int step, int *nsplit, cl_int *kchunk)
{
    const int64_t units = ctx->info.compute_units ? ctx->info.compute_units : 1;
    if (tiles < 1) tiles = 1; /* (an empty product has no tiles; callers pass M, N >= 1) */
    const char *env = getenv("TDACL_GEMM_SPLIT_K");
    int64_t n = tiles >= units ? 1 : (2 * units + tiles - 1) / tiles;
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end || v < 1 || v > 4096)
            return tdacl__fail(ctx, TDACL_ERR_INVALID_ARGUMENT, "TDACL_GEMM_SPLIT_K=%s is not a chunk count 1..4096", env);
        n = v;
    }
    const int64_t most = K / (2 * step);
    if (n > most) n = most;
    if (n < 1) n = 1;
    int64_t chunk = (K + n - 1) / n;
    chunk = (chunk + step - 1) / step * step;
    *nsplit = (int)((K + chunk - 1) / chunk);
    *kchunk = (cl_int)chunk;
    return TDACL_SUCCESS;
}

/* Both GEMM kernels (gemm, gemm_mma) take the same arguments: build the row's program for
 * this call and launch `kernel` over the (column block, row block) tiles of bm x bn in
 * work-groups of nt, K split into chunks of a multiple of `step` where the tiles are few. */
static tdacl_status launch_gemm_kernel(tdacl_context *ctx, const tdacl_variant_def *row, const tdacl_matmul_call *c,
                                       const tdacl_param_values *v, const char *kernel, int bm, int bn, size_t nt,
                                       int step)
{
    const char *reduce = "gemm_splitk_reduce";
    const size_t cols = (size_t)(c->N + bn - 1) / (size_t)bn, rows = (size_t)(c->M + bm - 1) / (size_t)bm;
    int nsplit = 1;
    cl_int kchunk = c->K;
    tdacl_status st = k_chunk(ctx, (int64_t)(cols * rows), c->K, step, &nsplit, &kchunk);
    if (st) return st;
    tdacl_strbuf opts = {0};
    tdacl__variant_options(row, c, v, &opts);
    cl_kernel k, kr = NULL;
    st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", kernel)
                  : tdacl__variant_kernel(ctx, row, opts.data, kernel, &k);
    if (!st && nsplit > 1) st = tdacl__variant_kernel(ctx, row, opts.data, reduce, &kr);
    tdacl__sb_free(&opts);
    cl_mem part = NULL;
    if (!st && nsplit > 1)
        st = tdacl__scratch(ctx, TDACL_SCRATCH_GEMV, (size_t)nsplit * (size_t)c->M * (size_t)c->N * 4, &part);
    if (st) return st;
    cl_mem cm = mem(c->c), am = mem(c->a), wm = mem(c->w), bmm = mem(c->bias), rm = mem(c->res);
    cl_int cM = c->M, cN = c->N, cK = c->K, lda = (cl_int)c->a->strides[0], ldb = (cl_int)c->w->strides[0],
           ldc = (cl_int)c->c->strides[0], fl = c->flags, ns = nsplit;
    st = tdacl__set_args(ctx, k, kernel, sizeof cm, &cm, sizeof am, &am, sizeof wm, &wm, sizeof bmm, &bmm, sizeof rm, &rm,
                         sizeof cM, &cM, sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb,
                         sizeof ldc, &ldc, sizeof fl, &fl, sizeof part, &part, sizeof kchunk, &kchunk, (size_t)0);
    size_t g[3] = {cols * nt, rows, (size_t)nsplit}, l[3] = {nt, 1, 1};
    if (!st) st = tdacl__launch(ctx, k, 3, g, l, c->ev, kernel);
    if (st || !kr) return st;
    /* the chunks' sums in order and the epilogue, one work-item per element */
    st = tdacl__set_args(ctx, kr, reduce, sizeof cm, &cm, sizeof part, &part, sizeof ns, &ns, sizeof cM, &cM,
                         sizeof cN, &cN, sizeof ldc, &ldc, sizeof fl, &fl, sizeof bmm, &bmm, sizeof rm, &rm, (size_t)0);
    size_t gr[2] = {(size_t)(c->N + 63) / 64 * 64, (size_t)c->M}, lr[2] = {64, 1};
    return st ? st : tdacl__launch(ctx, kr, 2, gr, lr, c->ev ? c->ev + 1 : NULL, reduce);
}

tdacl_status tdacl__gemm_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    const tdacl_kernel_space *ks = row->space;
    const int bm = tdacl__param(ks, v, "GBM"), bn = tdacl__param(ks, v, "GBN");
    const size_t nt = (size_t)((bm / tdacl__param(ks, v, "GTM")) * (bn / tdacl__param(ks, v, "GTN")));
    return launch_gemm_kernel(ctx, row, c, v, "gemm", bm, bn, nt, tdacl__param(ks, v, "GKC"));
}

/* ---- the tensor-core GEMM (cl/gemm_mma.cl) ---- */

/* what both matrix-unit rows refuse first: a fused decode GEMV, a device without matrix units */
static int mma_row_refuses(const tdacl_context *ctx, const tdacl_matmul_call *c, tdacl_mma_choice *m, char *why, size_t n)
{
    if (refuse_fusion(c, why, n)) return 1;
    tdacl__mma_choose(&ctx->info, m);
    return m->body < 0 ? (snprintf(why, n, "%s", m->why), 1) : 0;
}

int tdacl__gemm_mma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_matmul_call *c = call;
    tdacl_mma_choice m;
    if (mma_row_refuses(ctx, c, &m, why, n)) return 1;
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
    /* bf16 a goes in as it is; any other a is rounded to bf16 */
    if (c->a->dtype != TDACL_BF16 && c->precision != TDACL_PRECISION_BF16)
        return snprintf(why, n, "%s activations meet bf16 weights on the matrix units only at precision bf16 "
                        "(desc.precision, TDACL_PRECISION)", tdacl_dtype_name(c->a->dtype)), 1;
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
     * strides decide the alignment of 16-byte loads and copies of a and b */
    tdacl_mma_choice m;
    tdacl__mma_choose(&c->c->ctx->info, &m);
    tdacl__mma_options(&m, sb);
    /* MMA_IN: bf16 weights meet a rounded to bf16; f32 weights run as tf32 */
    const int64_t a_row_bytes = c->a->strides[0] * (int64_t)tdacl_dtype_size(c->a->dtype);
    tdacl__sb_printf(sb, " -DTRANS_B=%d -DMMA_IN=%d%s%s", c->trans, c->w->dtype == TDACL_F32 ? 3 : 1,
                     a_row_bytes % 16 == 0 ? " -DALIGNED_A" : "", c->w->strides[0] % 8 == 0 ? " -DALIGNED_B" : "");
    io_dtype_options(c, sb);
}

tdacl_status tdacl__gemm_mma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                    const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    const int bm = tdacl__param(row->space, v, "GMM_BM"), bn = tdacl__param(row->space, v, "GMM_BN");
    const size_t nt = 32 * (size_t)tdacl__param(row->space, v, "GMM_WM") * (size_t)tdacl__param(row->space, v, "GMM_WN");
    return launch_gemm_kernel(ctx, row, c, v, "gemm_mma", bm, bn, nt, tdacl__param(row->space, v, "GMM_BK"));
}

/* ---- Hopper's warpgroup products (the same kernel with GMM_WG, cl/wgmma.cl) ---- */

int tdacl__gemm_wgmma_supports(const tdacl_context *ctx, const void *call, char *why, size_t n)
{
    const tdacl_matmul_call *c = call;
    tdacl_mma_choice m;
    if (mma_row_refuses(ctx, c, &m, why, n)) return 1;
    if (!m.wgmma)
        return snprintf(why, n, "wgmma runs on NVIDIA sm_90 alone (TDACL_MMA_EMULATE=wgmma emulates it)"), 1;
    const char *off = getenv("TDACL_WGMMA");
    if (off && !strcmp(off, "0")) return snprintf(why, n, "TDACL_WGMMA=0 turns it off"), 1;
    if (c->w->dtype != TDACL_BF16 || c->a->dtype != TDACL_BF16)
        return snprintf(why, n, "a and weights are %s and %s: the wgmma GEMM takes both in bf16", tdacl_dtype_name(c->a->dtype),
                        tdacl_dtype_name(c->w->dtype)), 1;
    return 0;
}

void tdacl__gemm_wgmma_call_options(const void *call, tdacl_strbuf *sb)
{
    tdacl__gemm_mma_call_options(call, sb);
    tdacl__sb_printf(sb, " -DGMM_WG=1");
}

tdacl_status tdacl__gemm_wgmma_launch(tdacl_context *ctx, const tdacl_variant_def *row, const void *callp,
                                      const tdacl_param_values *v)
{
    const tdacl_matmul_call *c = callp;
    const int bm = tdacl__param(row->space, v, "GWG_BM"), bn = tdacl__param(row->space, v, "GWG_BN");
    return launch_gemm_kernel(ctx, row, c, v, "gemm_mma", bm, bn, 2 * (size_t)bm, 32); /* a warp a 16 rows; 32-k steps */
}

/* Chooses the row (force_row with force pins it), logs the choice, looks its parameters up
 * and launches: every matmul call, fused or not, goes through here. */
static tdacl_status run_call(tdacl_context *ctx, const tdacl_matmul_call *call, const tdacl_variant_def *force_row,
                             const tdacl_param_values *force)
{
    const tdacl_variant_def *row = force ? (force_row ? force_row : tdacl__variant("gemm.simt")) : NULL;
    char why[256];
    tdacl_status st = row ? TDACL_SUCCESS : tdacl__variant_choose(ctx, TDACL_OP_MATMUL, call, &row, why, sizeof why);
    if (!force && !st) {
        /* the matrix-unit row also names its body */
        tdacl_mma_choice m = {.name = NULL};
        if (row->matrix_units) tdacl__mma_choose(&ctx->info, &m);
        if (row->matrix_units == 2 && m.body == TDACL_MMA_PTX) m.name = "wgmma.mma_async, sm_90a";
        tdacl__log(ctx, TDACL_LOG_DEBUG, "matmul M=%d N=%d K=%d %s weights%s: %s%s%s%s", call->M, call->N, call->K,
                   tdacl_dtype_name(call->w->dtype), call->fuse ? " (fused decode GEMV)" : "", why, m.name ? " (" : "",
                   m.name ? m.name : "", m.name ? ")" : "");
    }
    tdacl_tuned tuned;
    if (!st) st = tdacl__variant_params(ctx, row, call, force, &tuned);
    return st ? st : row->launch(ctx, row, call, &tuned.values);
}

tdacl_status tdacl__gemm(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                         const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K, int trans,
                         tdacl_precision precision, const tdacl_variant_def *force_row,
                         const tdacl_param_values *force, cl_event ev[2])
{
    const tdacl_matmul_call call = {c, a, w, bias, res, flags, M, N, K, trans, ev, precision, NULL};
    return run_call(ctx, &call, force_row, force);
}

tdacl_status tdacl__gemv_fused(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                               const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K,
                               int trans, const tdacl_gemv_fusion *fuse)
{
    const tdacl_matmul_call call = {c, a, w, bias, res, flags, M, N, K, trans, NULL, TDACL_PRECISION_EXACT, fuse};
    return run_call(ctx, &call, NULL, NULL);
}
