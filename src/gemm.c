/* Dispatch of the matmul kernels of cl/layers.cl. */
#include <stdio.h>

#include "gemm.h"

void tdacl__gemm_options(tdacl_dtype wdt, const tdacl_param_values *v, int trans, tdacl_strbuf *sb)
{
    tdacl__sb_printf(sb, "-DWDT=%d -DGBM=%d -DGBN=%d -DGTM=%d -DGTN=%d -DGKC=%d -DTRANS_B=%d", (int)wdt, v->v[0],
                     v->v[1], v->v[2], v->v[3], v->v[4], trans);
}

static cl_mem mem(const tdacl_tensor *t) { return t ? t->storage->mem : NULL; }

/* Decode GEMV, B [K, N] not transposed: partial sums over K chunks, then a reduce with
 * the epilogue.  The chunk count gives the device about four work-groups per compute unit
 * (cl/layers.cl: GV_COLS columns per work-group).  `ev` (if asked) is the reduce's event. */
#define GEMV_COLS 64
#define GEMV_WG 128
static tdacl_status gemv_split(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                               const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K,
                               const char *opts, cl_event *ev)
{
    const int colblocks = (N + GEMV_COLS - 1) / GEMV_COLS, step = 4 * (GEMV_WG / GEMV_COLS);
    int target = 4 * (int)ctx->info.compute_units, ksplit = (target + colblocks - 1) / colblocks;
    if (ksplit < 1) ksplit = 1;
    int kchunk = (K + ksplit - 1) / ksplit;
    kchunk = (kchunk + step - 1) / step * step;
    if (kchunk < step) kchunk = step;
    const int nchunks = (K + kchunk - 1) / kchunk;
    int gvm = 1;
    while (gvm < M) gvm *= 2;
    cl_mem part;
    tdacl_status st = tdacl__scratch(ctx, TDACL_SCRATCH_GEMV, (size_t)nchunks * (size_t)gvm * (size_t)N * 4, &part);
    cl_kernel kp, kr;
    if (!st) st = tdacl__kernel_get(ctx, "layers", opts, "gemv_part", &kp);
    if (!st) st = tdacl__kernel_get(ctx, "layers", opts, "gemv_reduce", &kr);
    if (st) return st;
    cl_mem cm = mem(c), am = mem(a), wm = mem(w), bm = mem(bias), rm = mem(res);
    cl_int cM = M, cN = N, cK = K, lda = (cl_int)a->shape[1], ldb = (cl_int)w->shape[1], ldc = (cl_int)c->shape[1],
           fl = flags, kc = kchunk, nc = nchunks;
    st = tdacl__set_args(ctx, kp, "gemv_part", sizeof part, &part, sizeof am, &am, sizeof wm, &wm, sizeof cM, &cM,
                         sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb, sizeof kc, &kc, (size_t)0);
    if (!st)
        st = tdacl__set_args(ctx, kr, "gemv_reduce", sizeof cm, &cm, sizeof part, &part, sizeof bm, &bm, sizeof rm, &rm,
                             sizeof cM, &cM, sizeof cN, &cN, sizeof ldc, &ldc, sizeof fl, &fl, sizeof nc, &nc,
                             (size_t)0);
    if (st) return st;
    size_t g[2] = {(size_t)colblocks * GEMV_WG, (size_t)nchunks}, l[2] = {GEMV_WG, 1};
    st = tdacl__launch(ctx, kp, 2, g, l, NULL, "gemv_part");
    size_t g2[2] = {(size_t)N, (size_t)M}, l2[2] = {64, 1};
    return st ? st : tdacl__launch(ctx, kr, 2, g2, l2, ev, "gemv_reduce");
}

tdacl_status tdacl__gemm(tdacl_context *ctx, tdacl_tensor *c, const tdacl_tensor *a, const tdacl_tensor *w,
                         const tdacl_tensor *bias, const tdacl_tensor *res, int flags, int M, int N, int K, int trans,
                         const tdacl_param_values *force, cl_event *ev)
{
    tdacl_strbuf opts = {0};
    size_t g[2], l[2];
    const char *name;
    tdacl_status st;
    if (M <= TDACL_GEMV_MAX_ROWS && !force) {
        int gvm = 1;
        while (gvm < M) gvm *= 2;
        tdacl__sb_printf(&opts, "-DWDT=%d -DGV_M=%d -DGV_WG=%d", (int)w->dtype, gvm, GEMV_WG);
        if (!trans) {
            st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "gemv: out of memory")
                          : gemv_split(ctx, c, a, w, bias, res, flags, M, N, K, opts.data, ev);
            tdacl__sb_free(&opts);
            return st;
        }
        name = "gemv_t"; /* one column per work-group */
        g[0] = (size_t)N * GEMV_WG, l[0] = GEMV_WG;
        g[1] = 1, l[1] = 1;
    } else {
        tdacl_tuned tp;
        if (force) {
            tp.values = *force;
        } else {
            tdacl_problem p = {-1, w->dtype, 0, 0, M, 0};
            if ((st = tdacl__tuned(ctx, "gemm", &p, &tp))) return st;
        }
        const int *v = tp.values.v;
        tdacl__gemm_options(w->dtype, &tp.values, trans, &opts);
        name = "gemm";
        size_t nt = (size_t)((v[0] / v[2]) * (v[1] / v[3]));
        g[0] = (size_t)(N + v[1] - 1) / (size_t)v[1] * nt, l[0] = nt;
        g[1] = (size_t)(M + v[0] - 1) / (size_t)v[0], l[1] = 1;
    }
    cl_kernel k;
    st = opts.oom ? tdacl__fail(ctx, TDACL_ERR_OUT_OF_MEMORY, "gemm: out of memory")
                  : tdacl__kernel_get(ctx, "layers", opts.data, name, &k);
    tdacl__sb_free(&opts);
    if (st) return st;
    cl_mem cm = mem(c), am = mem(a), wm = mem(w), bm = mem(bias), rm = mem(res);
    cl_int cM = M, cN = N, cK = K, lda = (cl_int)a->shape[1], ldb = (cl_int)w->shape[1], ldc = (cl_int)c->shape[1],
           fl = flags;
    st = tdacl__set_args(ctx, k, name, sizeof cm, &cm, sizeof am, &am, sizeof wm, &wm, sizeof bm, &bm, sizeof rm, &rm,
                         sizeof cM, &cM, sizeof cN, &cN, sizeof cK, &cK, sizeof lda, &lda, sizeof ldb, &ldb,
                         sizeof ldc, &ldc, sizeof fl, &fl, (size_t)0);
    return st ? st : tdacl__launch(ctx, k, 2, g, l, ev, name);
}
