/* What the row-tiled multi-pass kernels share (alpha-entmax, cl/attention_entmax.cl; Top-theta,
 * cl/attention_topk.cl): one work-group owns BM query rows of one (batch, head); LPR
 * work-items share a row, each scoring every LPR-th key of a BN-key tile and owning every
 * LPR-th output column.  Each pass over the keys stages K tiles in local memory (PREFETCH:
 * one tile ahead in registers); reductions over a row's work-items run in one fixed order. */

#ifndef BM
#define BM 16 /* query rows per work-group */
#endif
#ifndef BN
#define BN 32 /* keys per tile (multiple of LPR) */
#endif
#ifndef LPR
#define LPR 8 /* work-items per query row */
#endif
#ifndef PREFETCH
#define PREFETCH 0 /* 1: the next K tile's loads are in flight while the current one is scored */
#endif
#define NT (BM * LPR)
#define NJ (BN / LPR)  /* keys a work-item scores per tile */
#define NC (DV / LPR)  /* output columns per work-item */
#define QS (D + 4)     /* row stride of the Q block and the K tile (floats): 16-byte rows, and
                          rows 17 float4s apart for d = 64 fall in different banks */
#define QS4 (QS / 4)
#define REGION (BN * QS > BN * DV ? BN * QS : BN * DV) /* the K tile, or a V tile */
#define WS (BN + 1)

/* 16-bit storage on 16-byte-aligned rows (ALIGNED16, the host's promise: innermost stride 1,
 * the other strides and the offset multiples of 8, d % 8 == 0) moves 8 elements a load. */
#if defined(ALIGNED16) && DT != 0
#define WIDE8 1
#else
#define WIDE8 0
#endif

#if WIDE8
/* Elements 8*c8 .. 8*c8+7 of row `row` of a [.., T, d] view into lo and hi; zero beyond d
 * and outside the view's rows. */
inline void load8(float4 *lo, float4 *hi, __global const void *x, long base, long st, long row, long rows, int c8,
                  int d)
{
    *lo = (float4)(0.0f), *hi = (float4)(0.0f);
    const int c = 8 * c8;
    if (row >= rows || c >= d) return;
    const long p = base + row * st;
    if (c + 8 <= d) {
#if DT == 1
        const uint4 u = *(__global const uint4 *)((__global const ushort *)x + p + c);
        *lo = (float4)(as_float(u.x << 16), as_float(u.x & 0xffff0000u), as_float(u.y << 16), as_float(u.y & 0xffff0000u));
        *hi = (float4)(as_float(u.z << 16), as_float(u.z & 0xffff0000u), as_float(u.w << 16), as_float(u.w & 0xffff0000u));
#else
        const float8 f = vload_half8(0, (__global const half *)x + p + c);
        *lo = f.lo, *hi = f.hi;
#endif
    } else { /* the end of a row whose width is not a multiple of 8 (dv) */
        *lo = load_row4(x, p, 1, 2 * c8, d);
        *hi = load_row4(x, p, 1, 2 * c8 + 1, d);
    }
}

/* Rows [r0, r0 + nrows) of a [.., T, d] view (COLS4 float4s a row) into a row-major local
 * block of row stride LD, zero beyond d and beyond the view's rows. */
#define STAGE_ROWS(dst, LD, COLS4, src, base, st, sd, r0, rows, nrows, d)                        \
    for (int idx_ = tid; idx_ < (nrows) * ((COLS4) / 2); idx_ += NT) {                            \
        const int rr_ = idx_ / ((COLS4) / 2), c8_ = idx_ - (idx_ / ((COLS4) / 2)) * ((COLS4) / 2); \
        float4 lo_, hi_;                                                                          \
        load8(&lo_, &hi_, src, base, st, (r0) + rr_, rows, c8_, d);                               \
        vstore4(lo_, 0, (dst) + rr_ * (LD) + 8 * c8_);                                           \
        vstore4(hi_, 0, (dst) + rr_ * (LD) + 8 * c8_ + 4);                                       \
    }
#else
/* Rows [r0, r0 + nrows) of a [.., T, d] view (COLS4 float4s a row) into a row-major local
 * block of row stride LD, zero beyond d and beyond the view's rows. */
#define STAGE_ROWS(dst, LD, COLS4, src, base, st, sd, r0, rows, nrows, d)                        \
    for (int idx_ = tid; idx_ < (nrows) * (COLS4); idx_ += NT) {                                  \
        const int rr_ = idx_ / (COLS4), c4_ = idx_ - (idx_ / (COLS4)) * (COLS4);                  \
        const float4 x_ = load4(src, base, st, sd, (r0) + rr_, rows, c4_, d);                     \
        vstore4(x_, 0, (dst) + rr_ * (LD) + 4 * c4_);                                            \
    }
#endif

/* The local memory every row-tiled kernel declares: the query block (Qs), the K tile or a V
 * tile (R), a tile's weights (Ws), a reduction buffer, a flag and the statistics counters. */
#define ROW_TILE_LOCALS                                                                          \
    __local float4 Qs4[BM * QS4];                                                                \
    __local float4 R4[REGION / 4];                                                               \
    __local float *Qs = (__local float *)Qs4, *R = (__local float *)R4;                          \
    __local float Ws[BM * WS];                                                                   \
    __local float red[2 * NT];                                                                   \
    __local int flag;                                                                            \
    __local uint counters[4]

/* Scaled scores u of this work-item's keys n0 + l + LPR*t of the staged tile; -INFINITY
 * where row r does not see the key (key index >= nvis). */
inline void score_keys(float *u, __local const float4 *Qs4, __local const float4 *Ks4, int r, int l, long n0,
                       long nvis, float cr)
{
UNROLL
    for (int t = 0; t < NJ; t++) u[t] = 0.0f;
    for (int k4 = 0; k4 < D / 4; k4++) {
        const float4 qv = Qs4[r * QS4 + k4];
UNROLL
        for (int t = 0; t < NJ; t++) {
            const float4 kv = Ks4[(l + LPR * t) * QS4 + k4];
            u[t] = fma(qv.s0, kv.s0, fma(qv.s1, kv.s1, fma(qv.s2, kv.s2, fma(qv.s3, kv.s3, u[t]))));
        }
    }
UNROLL
    for (int t = 0; t < NJ; t++) u[t] = n0 + l + LPR * t < nvis ? cr * u[t] : -INFINITY;
}

/* a and b summed (or, max_a, a's maximum taken) over the LPR work-items of row r, in one
 * fixed order, so that every work-item of the row gets bit-identical results. */
inline float2 row_reduce(__local float *red, float a, float b, int tid, int r, int max_a)
{
    barrier(CLK_LOCAL_MEM_FENCE); /* the previous reduction's reads are done */
    red[2 * tid] = a;
    red[2 * tid + 1] = b;
    barrier(CLK_LOCAL_MEM_FENCE);
    float2 s = (float2)(max_a ? -INFINITY : 0.0f, 0.0f);
    /* left rolled except on NVIDIA (whose measured kernel stays as it was): the threshold
     * passes call this NPTS times in a row, and unrolled copies of up to 64 loads each held
     * the AMD compilers' registers (spills) */
#if !TDACL_NVIDIA
UNROLL_BY(1)
#endif
    for (int i = 0; i < LPR; i++) {
        float x = red[2 * (r * LPR + i)], y = red[2 * (r * LPR + i) + 1];
        s.x = max_a ? fmax(s.x, x) : s.x + x;
        s.y += y;
    }
    return s;
}

/* Every work-item: 1 when `mine` is non-zero in some work-item of the group. */
inline int group_any(__local int *flag, int mine)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) *flag = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (mine) atomic_or(flag, 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    return *flag;
}

/* K tiles go global -> registers (kreg, KREGS float4s a work-item) -> local memory; with
 * PREFETCH one tile ahead, so that the next tile's loads are in flight while the current one
 * is scored (faster decode on the H100, slower prefill: more registers).  A work-item moves
 * KPT chunks of 4 elements (WIDE8: of 8, two float4s each). */
#if WIDE8
#define CW 8
#else
#define CW 4
#endif
#define KPT ((BN * (D / CW) + NT - 1) / NT)
#define KREGS (KPT * CW / 4)
#if WIDE8
#define FETCH_CHUNK(u_, idx_, n0)                                                                \
    load8(&kreg[2 * (u_)], &kreg[2 * (u_) + 1], k, kb_off, ks.s2, (n0) + (idx_) / (D / 8), Tk, (idx_) % (D / 8), d)
#define STORE_CHUNK(u_, idx_)                                                                    \
    do {                                                                                         \
        vstore4(kreg[2 * (u_)], 0, R + ((idx_) / (D / 8)) * QS + 8 * ((idx_) % (D / 8)));        \
        vstore4(kreg[2 * (u_) + 1], 0, R + ((idx_) / (D / 8)) * QS + 8 * ((idx_) % (D / 8)) + 4); \
    } while (0)
#else
#define FETCH_CHUNK(u_, idx_, n0)                                                                \
    (kreg[u_] = load4(k, kb_off, ks.s2, ks.s3, (n0) + (idx_) / (D / 4), Tk, (idx_) % (D / 4), d))
#define STORE_CHUNK(u_, idx_) vstore4(kreg[u_], 0, R + ((idx_) / (D / 4)) * QS + 4 * ((idx_) % (D / 4)))
#endif
#define FETCH_K(n0)                                                                              \
    do {                                                                                         \
        _Pragma("unroll") for (int u_ = 0; u_ < KPT; u_++) {                                     \
            const int idx_ = tid + u_ * NT;                                                      \
            if (idx_ < BN * (D / CW)) FETCH_CHUNK(u_, idx_, n0);                                 \
        }                                                                                        \
    } while (0)
/* The fetched tile into R (every work-item of the group; R's previous readers are done). */
#define STORE_K()                                                                                \
    do {                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
        _Pragma("unroll") for (int u_ = 0; u_ < KPT; u_++) {                                     \
            const int idx_ = tid + u_ * NT;                                                      \
            if (idx_ < BN * (D / CW)) STORE_CHUNK(u_, idx_);                                     \
        }                                                                                        \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
    } while (0)

/* The V rows of the tile at n0 into R (row-major, stride DV), after the tile's weights are in
 * Ws and a barrier.  Decode tiles (BM <= 4) read only the rows some row of the work-group
 * weighs (non-zero or NaN in Ws) and zero the others, so a sparse decode reads only its
 * surviving V rows; wider tiles, and `all` (every visible row needed), read the whole tile. */
#define SPARSE_V (BM <= 4)
#define STAGE_V(n0, all)                                                                         \
    do {                                                                                         \
        if (!SPARSE_V || (all)) {                                                                \
            STAGE_ROWS(R, DV, DV / 4, v, vb_off, vs.s2, vs.s3, n0, Tk, BN, dv);                  \
        } else {                                                                                 \
            for (int idx_ = tid; idx_ < BN * (DV / 4); idx_ += NT) {                             \
                const int rr_ = idx_ / (DV / 4), c4_ = idx_ - (idx_ / (DV / 4)) * (DV / 4);      \
                int used_ = 0;                                                                   \
                for (int i_ = 0; i_ < BM; i_++) used_ |= Ws[i_ * WS + rr_] != 0.0f;              \
                const float4 x_ = used_ ? load4(v, vb_off, vs.s2, vs.s3, (n0) + rr_, Tk, c4_, dv) \
                                        : (float4)(0.0f);                                        \
                vstore4(x_, 0, R + rr_ * DV + 4 * c4_);                                          \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* Each work-item's: its head's K and V offsets, its scores of a tile (u) and, with PREFETCH,
 * the next K tile's registers. */
#if PREFETCH
#define ROW_TILE_PRIVATE                                                                         \
    const long kb_off = k_off + b * ks.s0 + h * ks.s1, vb_off = v_off + b * vs.s0 + h * vs.s1;  \
    float u[NJ];                                                                                 \
    float4 kreg[KREGS]
#else
#define ROW_TILE_PRIVATE                                                                         \
    const long kb_off = k_off + b * ks.s0 + h * ks.s1, vb_off = v_off + b * vs.s0 + h * vs.s1;  \
    float u[NJ]
#endif

/* The tile at n0 staged (the next at nn0 in flight when has_next) and this work-item's
 * scores of it, scaled by cr, in u. */
#define STAGE_AND_SCORE(n0, nn0, has_next, cr)                                                   \
    do {                                                                                         \
        K_STAGE(n0, nn0, has_next);                                                              \
        score_keys(u, Qs4, R4, r, l, n0, nvis, cr);                                              \
    } while (0)

/* Before a loop over tiles (first tile at n0), and at the top of each iteration (tile n0;
 * the next at nn0 when has_next). */
#if PREFETCH
#define K_FIRST(n0) FETCH_K(n0)
#define K_STAGE(n0, nn0, has_next)                                                               \
    do {                                                                                         \
        STORE_K();                                                                               \
        if (has_next) FETCH_K(nn0);                                                              \
    } while (0)
#else /* straight to local memory (fewer registers: the faster prefill on the H100) */
#define K_FIRST(n0) do { } while (0)
#define K_STAGE(n0, nn0, has_next)                                                               \
    do {                                                                                         \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
        STAGE_ROWS(R, QS, D / 4, k, kb_off, ks.s2, ks.s3, (n0), Tk, BN, d);                      \
        barrier(CLK_LOCAL_MEM_FENCE);                                                            \
    } while (0)
#endif

/* The row's output columns (o[c] is column l + LPR * c): rms Norm over dv, output scale,
 * gain, store.  Every work-item of the group (the Norm's reduction holds barriers). */
inline void row_epilogue(float *o, __local float *red, int tid, int r, int l, int live, long row, int b, int h,
                         __global const void *gain, __global void *out, long4 os, long o_off, int dv, int norm,
                         float norm_eps, float out_scale)
{
    if (norm) {
        float ss = 0.0f;
UNROLL
        for (int c = 0; c < NC; c++) ss += o[c] * o[c];
        float2 t2 = row_reduce(red, ss, 0.0f, tid, r, 0);
        const float rs = rsqrt(t2.x / (float)dv + norm_eps);
UNROLL
        for (int c = 0; c < NC; c++) o[c] *= rs;
    }
    if (live) {
        const long ob = o_off + b * os.s0 + h * os.s1 + row * os.s2;
UNROLL
        for (int c = 0; c < NC; c++) {
            const int col = l + LPR * c;
            if (col < dv) {
                float y = o[c] * out_scale;
                if (norm && gain) y *= LOAD(GDT, gain, col);
                STORE(ODT, out, ob + col * os.s3, y);
            }
        }
    }
}
