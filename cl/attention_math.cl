/* What every attention kernel (prefill, decode, tensor-core prefill) shares: the macros a
 * call fixes, scalar math and row loads.  docs/spec.md states the formulas. */

#ifndef KIND
#define KIND 2 /* tdacl_attention_kind: 0 softmax, 1 rela, 2 tra, 3 tda, 4 diff_softmax */
#endif
#ifndef DT
#define DT 0 /* storage dtype of q, k, v, q2, k2 (0 f32, 1 bf16, 2 f16) */
#endif
#ifndef ODT
#define ODT 0 /* storage dtype of out */
#endif
#ifndef GDT
#define GDT 0 /* storage dtype of the rms gain */
#endif
#ifndef D
#define D 64 /* q/k head dim padded to a multiple of 32; the true d is an argument */
#endif
#ifndef DV
#define DV 64 /* v head dim padded likewise */
#endif

/* The (batch, head) of work-group dimension 1, and the per-head lambda when given. */
#define ATTENTION_HEAD(H, lambdas, lambda)                 \
    const int bh = get_group_id(1);                        \
    const int b = bh / (H), h = bh - (bh / (H)) * (H);     \
    if (lambdas) lambda = (lambdas)[h]

/* Query blocks of work-group dimension 2, heaviest (last, most keys) first. */
#define ATTENTION_QUERY_BLOCK(rows)                         \
    const long nqb = get_num_groups(2);                     \
    const long qb = nqb - 1 - get_group_id(2);              \
    const long m0 = qb * (rows)

/* The arguments every prefill kernel takes, in order (src/ops/attention.c set_prefill_args):
 * q, k, v (and q2, k2), the inverse L2 norms or NULL, gain, per-head lambdas, out, the
 * statistics counters; strides (b, h, t, d) and offsets of each view; shapes; the
 * descriptor's numbers. */
#define PREFILL_KERNEL_ARGS                                                                         \
    __global const void *q, __global const void *k, __global const void *v, \
    __global const void *q2, __global const void *k2, \
    __global const float *qinv, __global const float *kinv, \
    __global const float *q2inv, __global const float *k2inv, \
    __global const void *gain, __global const float *lambdas, __global void *out, __global uint *stats, \
    long4 qs, long4 ks, long4 vs, long4 q2s, long4 k2s, long4 os, \
    long q_off, long k_off, long v_off, long q2_off, long k2_off, long o_off, \
    int H, long Tq, long Tk, long offset, int d, int dv, \
    float scale, float beta, float kappa, int pmode, float power, float lambda, \
    int norm, float norm_eps, float out_scale, int want_stats

/* Float <-> int mapping that preserves order, for local atomic_max on scores. */
inline int ord_int(float f)
{
    int i = as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
inline float ord_float(int i) { return as_float(i >= 0 ? i : i ^ 0x7fffffff); }

/* entmax's threshold search stops at |f(tau) - 1| <= ENTMAX_TOL, f = sum_j r_j^p (both kernels;
 * the weights are then divided by f(tau)) */
#define ENTMAX_TOL 1e-6f

/* Threshold tau(p) = beta * sqrt(max(0, 2 ln((p+1)/kappa)) / d). */
inline float tau_of(long pos, float beta, float kappa, int d)
{
    float l = 2.0f * log(((float)pos + 1.0f) / kappa);
    return beta * sqrt(fmax(l, 0.0f) / (float)d);
}

/* Rectified power with fast paths: pmode 1 -> x, 2 -> x*x, else pow(x, p).  NaN is the
 * caller's to pass through (x <= 0 is false for NaN, so NaN reaches pow or the product). */
inline float rect_pow(float x, int pmode, float p)
{
    if (x <= 0.0f) return 0.0f;
    return pmode == 2 ? x * x : pmode == 1 ? x : pow(x, p);
}

/* Four consecutive elements (4*c4..) of the row starting at element p of a view whose
 * innermost stride is sd, zero beyond d.  Storage type DT.  ALIGNED4 (the host's promise:
 * innermost stride 1, the other strides, the offset and d multiples of 4) takes one wide
 * load: 16 bytes of f32, or 8 bytes of bf16/f16 converted in registers. */
inline float4 load_row4(__global const void *x, long p, long sd, int c4, int d)
{
    float4 v = (float4)(0.0f);
    int c = 4 * c4;
#if defined(ALIGNED4)
    if (c < d) {
#if DT == 0
        v = vload4(0, (__global const float *)x + p + c);
#elif DT == 1
        uint2 u = *(__global const uint2 *)((__global const ushort *)x + p + c);
        v = (float4)(as_float(u.x << 16), as_float(u.x & 0xffff0000u), as_float(u.y << 16), as_float(u.y & 0xffff0000u));
#else
        v = vload_half4(0, (__global const half *)x + p + c);
#endif
    }
#else
    if (c + 0 < d) v.s0 = LOAD(DT, x, p + (c + 0) * sd);
    if (c + 1 < d) v.s1 = LOAD(DT, x, p + (c + 1) * sd);
    if (c + 2 < d) v.s2 = LOAD(DT, x, p + (c + 2) * sd);
    if (c + 3 < d) v.s3 = LOAD(DT, x, p + (c + 3) * sd);
#endif
    return v;
}

/* Four consecutive elements (4*c4..) of row `row` of a [.., T, d] view, zero outside. */
inline float4 load4(__global const void *x, long base, long st, long sd, long row, long rows, int c4, int d)
{
    return row < rows ? load_row4(x, base + row * st, sd, c4, d) : (float4)(0.0f);
}

/* The statistics of one work-group: each work-item adds its counts (survivors of view 1 and
 * 2, pairs with a non-zero combined weight) to the local counters (zeroed at the start),
 * then work-item 0 writes them and the count of tiles whose V was read to slot `slot` of
 * stats.  Call from every work-item of the group (it holds a barrier). */
/* arr[0..n) = 0 by the work-items tid = 0..nt-1 together (nt may be below n) */
#define ZERO_LOCAL(arr, n, tid, nt)                                                                   \
    for (int z_ = (tid); z_ < (n); z_ += (nt)) (arr)[z_] = 0

inline void stats_flush(__local uint *counters, __global uint *stats, long slot, uint nz1, uint nz2, uint nzc,
                        uint vtiles, int tid)
{
    if (nz1) atomic_add(&counters[0], nz1);
    if (nz2) atomic_add(&counters[1], nz2);
    if (nzc) atomic_add(&counters[2], nzc);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) {
        stats[4 * slot + 0] = counters[0];
        stats[4 * slot + 1] = counters[1];
        stats[4 * slot + 2] = counters[2];
        stats[4 * slot + 3] = vtiles;
    }
}
