/* Streaming causal attention, prefill: one work-group owns BM query rows of one (batch,
 * head) and walks the key tiles from 0 up to the diagonal (tiles above it are never
 * visited).  Scores live in registers as a TM x TN micro-tile per work-item; weights go
 * through local memory for the weight x V product.  One source serves every kind:
 *
 *   KIND 0 softmax       online softmax (base-2, log2(e) folded into the q scale)
 *   KIND 1 rela          max(s, 0)
 *   KIND 2 tra           max(s - tau(p_i), 0)^p
 *   KIND 3 tda           a1 - lc*a2 over two views sharing each V tile
 *   KIND 4 diff_softmax  softmax(s1) - lambda*softmax(s2), two online states
 *
 * Sparse kinds (1-3) first compute only the scores and a per-key "any survivor" mask; a
 * tile with an empty mask skips its V loads and weight x V work, and a sparse mask loads
 * and multiplies only the surviving V rows.  Nothing T x T is ever stored. */

#ifndef KIND
#define KIND 2 /* attention kind, see above */
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
#ifndef BM
#define BM 64 /* query rows per work-group */
#endif
#ifndef BN
#define BN 32 /* keys per tile */
#endif
#ifndef TM
#define TM 8 /* query rows per work-item (multiple of 1; rows interleave by BM/TM) */
#endif
#ifndef TN
#define TN 4 /* keys per work-item in the score tile (interleave by BN/TN) */
#endif
#ifndef DENSE_FRACTION
#define DENSE_FRACTION 4 /* take the dense weight x V loop when > BN*3/4 keys survive */
#endif

#define TWO_VIEWS (KIND == 3 || KIND == 4)
#define SOFTMAX (KIND == 0 || KIND == 4)
#define SPARSE (KIND >= 1 && KIND <= 3)
#define NRG (BM / TM) /* row groups */
#define NCG (BN / TN) /* column groups */
#define NT (NRG * NCG) /* work-items per work-group */
#define D4 (D / 4)
#define DV4 (DV / 4)
#define DVT4 (DV4 / NCG) /* float4 output columns per work-item */
#define QS4 (D4 + 1)     /* padded row stride of Qs/Ks in float4 (bank spread) */
#define VS4 (DV4 + 1)    /* padded row stride of Vs in float4 */
#define WS (BN + 8)      /* padded row stride of Ws in floats */
#define KV_FLOATS ((BN * QS4 * (TWO_VIEWS ? 2 : 1) > BN * VS4 ? BN * QS4 * (TWO_VIEWS ? 2 : 1) : BN * VS4) * 4)
#define MASK_WORDS ((BN + 31) / 32)

#if SOFTMAX
#define NEG_BIG (-INFINITY)
#endif

/* Float <-> int mapping that preserves order, for local atomic_max on scores. */
inline int ord_int(float f)
{
    int i = as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
inline float ord_float(int i) { return as_float(i >= 0 ? i : i ^ 0x7fffffff); }

/* Threshold tau(p) = beta * sqrt(max(0, 2 ln((p+1)/kappa)) / d). */
inline float tau_of(long pos, float beta, float kappa, int d)
{
    float l = 2.0f * log(((float)pos + 1.0f) / kappa);
    return beta * sqrt(fmax(l, 0.0f) / (float)d);
}

/* Rectified power with fast paths: pmode 1 -> x, 2 -> x*x, else pow(x, p).  NaN passes. */
inline float rect_pow(float x, int pmode, float p)
{
    if (x <= 0.0f) return 0.0f;
    return pmode == 2 ? x * x : pmode == 1 ? x : pow(x, p);
}

/* Load one BN x D (or BM x D) tile of a [B,H,T,d] view into local rows of QS4 float4s,
 * zero-filled beyond `rows` and d, each row multiplied by scale * inv[row] (inv may be
 * NULL: no normalisation). */
inline void load_rows(__local float4 *dst, int nrows, __global const void *src, long base,
                      long st, long sd, long row0, long rows, int d,
                      __global const float *inv, long inv_base, float scale, int tid)
{
    for (int idx = tid; idx < nrows * D4; idx += NT) {
        int r = idx / D4, c4 = idx - r * D4;
        long row = row0 + r;
        float4 v = (float4)(0.0f);
        if (row < rows) {
            long p = base + row * st;
            int c = 4 * c4;
#if DT == 0 && defined(ALIGNED4)
            if (c < d) v = vload4(0, (__global const float *)src + p + c);
#else
            if (c + 0 < d) v.s0 = LOAD(DT, src, p + (c + 0) * sd);
            if (c + 1 < d) v.s1 = LOAD(DT, src, p + (c + 1) * sd);
            if (c + 2 < d) v.s2 = LOAD(DT, src, p + (c + 2) * sd);
            if (c + 3 < d) v.s3 = LOAD(DT, src, p + (c + 3) * sd);
#endif
            v *= scale * (inv ? inv[inv_base + row] : 1.0f);
        }
        dst[r * QS4 + c4] = v;
    }
}

/* Four consecutive v elements (columns 4*c4..) of key n, zero beyond Tk and dv. */
inline float4 load_v4(__global const void *v, long base, long4 vs, long n, long Tk, int c4, int dv)
{
    float4 val = (float4)(0.0f);
    if (n >= Tk) return val;
    long p = base + n * vs.s2;
    int cc = 4 * c4;
#if DT == 0 && defined(ALIGNED4)
    if (cc < dv) val = vload4(0, (__global const float *)v + p + cc);
#else
    if (cc + 0 < dv) val.s0 = LOAD(DT, v, p + (cc + 0) * vs.s3);
    if (cc + 1 < dv) val.s1 = LOAD(DT, v, p + (cc + 1) * vs.s3);
    if (cc + 2 < dv) val.s2 = LOAD(DT, v, p + (cc + 2) * vs.s3);
    if (cc + 3 < dv) val.s3 = LOAD(DT, v, p + (cc + 3) * vs.s3);
#endif
    return val;
}

/* Score micro-tile s[i][j] = <Qs row (rg + NRG*i), Ks row (cg + NCG*j)>. */
#define SCORE_TILE(s, Qs, Ks)                                                     \
    do {                                                                          \
        for (int i_ = 0; i_ < TM; i_++)                                           \
            for (int j_ = 0; j_ < TN; j_++) s[i_][j_] = 0.0f;                     \
        for (int k4 = 0; k4 < D4; k4++) {                                         \
            float4 qv[TM], kv[TN];                                                \
            for (int i_ = 0; i_ < TM; i_++) qv[i_] = Qs[(rg + NRG * i_) * QS4 + k4]; \
            for (int j_ = 0; j_ < TN; j_++) kv[j_] = Ks[(cg + NCG * j_) * QS4 + k4]; \
            for (int i_ = 0; i_ < TM; i_++)                                       \
                for (int j_ = 0; j_ < TN; j_++) {                                 \
                    float a_ = s[i_][j_];                                         \
                    a_ = fma(qv[i_].s0, kv[j_].s0, a_);                           \
                    a_ = fma(qv[i_].s1, kv[j_].s1, a_);                           \
                    a_ = fma(qv[i_].s2, kv[j_].s2, a_);                           \
                    a_ = fma(qv[i_].s3, kv[j_].s3, a_);                           \
                    s[i_][j_] = a_;                                               \
                }                                                                 \
        }                                                                         \
    } while (0)

/* Dense o[i][g] += sum_c Ws[row i][c] * Vs[c][group g] over all BN keys; optionally also
 * sums the weights of each row into l[i] (softmax denominators). */
#define WV_DENSE(o, Wsm, l, WANT_L)                                              \
    do {                                                                         \
        for (int c4 = 0; c4 < BN / 4; c4++) {                                    \
            float4 wv[TM];                                                       \
            for (int i_ = 0; i_ < TM; i_++)                                      \
                wv[i_] = ((__local float4 *)(Wsm))[((rg + NRG * i_) * WS + 4 * c4) / 4];         \
            if (WANT_L)                                                          \
                for (int i_ = 0; i_ < TM; i_++)                                  \
                    l[i_] += (wv[i_].s0 + wv[i_].s1) + (wv[i_].s2 + wv[i_].s3);  \
            for (int e_ = 0; e_ < 4; e_++) {                                     \
                float4 vv[DVT4];                                                 \
                for (int g_ = 0; g_ < DVT4; g_++)                                \
                    vv[g_] = Vs[(4 * c4 + e_) * VS4 + cg + NCG * g_];            \
                for (int i_ = 0; i_ < TM; i_++) {                                \
                    float w_ = e_ == 0 ? wv[i_].s0 : e_ == 1 ? wv[i_].s1 : e_ == 2 ? wv[i_].s2 : wv[i_].s3; \
                    for (int g_ = 0; g_ < DVT4; g_++) o[i_][g_] = fma((float4)(w_), vv[g_], o[i_][g_]); \
                }                                                                \
            }                                                                    \
        }                                                                        \
    } while (0)

__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) void attention_fwd(
    __global const void *q, __global const void *k, __global const void *v,
    __global const void *q2, __global const void *k2,
    __global const float *qinv, __global const float *kinv,   /* inverse L2 norms or NULL */
    __global const float *q2inv, __global const float *k2inv,
    __global const void *gain, __global void *out, __global uint *stats,
    long4 qs, long4 ks, long4 vs, long4 q2s, long4 k2s, long4 os, /* strides b,h,t,d */
    long q_off, long k_off, long v_off, long q2_off, long k2_off, long o_off,
    int H, long Tq, long Tk, long offset, int d, int dv,
    float scale, float beta, float kappa, int pmode, float power, float lambda,
    int norm, float norm_eps, float out_scale, int want_stats)
{
    __local float4 Qs[BM * QS4 * (TWO_VIEWS ? 2 : 1)];
    __local float4 KVs[KV_FLOATS / 4]; /* K tile(s), then reused for the V tile */
    __local float4 Ws4[BM * WS / 4 * (KIND == 4 ? 2 : 1)];
    __local float *Ws = (__local float *)Ws4;
#if SPARSE
    __local uint mask_buf[MASK_WORDS];
#endif
#if SOFTMAX
    __local int tmax[(KIND == 4 ? 2 : 1) * BM];
#endif
    __local float red[NCG * BM]; /* row reductions of the norm epilogue */
    __local uint counters[4];

    const int tid = get_local_id(0);
    const int rg = tid / NCG, cg = tid - (tid / NCG) * NCG;
    const int bh = get_group_id(1);
    const int b = bh / H, h = bh - (bh / H) * H;
    const long nqb = get_num_groups(2);
    const long qb = nqb - 1 - get_group_id(2); /* heaviest blocks first */
    const long m0 = qb * BM;
    __local float4 *Ks = KVs;
    __local float4 *Vs = KVs;
#if TWO_VIEWS
    __local float4 *Q2s = Qs + BM * QS4;
    __local float4 *K2s = KVs + BN * QS4;
#endif

    const long qb_off = q_off + b * qs.s0 + h * qs.s1;
    const long kb_off = k_off + b * ks.s0 + h * ks.s1;
    const long vb_off = v_off + b * vs.s0 + h * vs.s1;
    const long inv_q = (long)bh * Tq, inv_k = (long)bh * Tk;

#if SOFTMAX
    const float qscale = scale * 1.44269504088896341f; /* scores in log2 units */
#else
    const float qscale = scale;
#endif
    load_rows(Qs, BM, q, qb_off, qs.s2, qs.s3, m0, Tq, d, qinv, inv_q, qscale, tid);
#if TWO_VIEWS
    load_rows(Q2s, BM, q2, q2_off + b * q2s.s0 + h * q2s.s1, q2s.s2, q2s.s3, m0, Tq, d, q2inv,
              inv_q, qscale, tid);
#endif
    if (tid < 4) counters[tid] = 0;

    /* per-row state */
    long pos[TM];
    float tau[TM];
    for (int i = 0; i < TM; i++) {
        pos[i] = offset + m0 + rg + NRG * i;
#if KIND == 2 || KIND == 3
        tau[i] = tau_of(pos[i], beta, kappa, d);
#else
        tau[i] = 0.0f;
#endif
    }
    float4 o[TM][DVT4];
    for (int i = 0; i < TM; i++)
        for (int g = 0; g < DVT4; g++) o[i][g] = (float4)(0.0f);
#if SOFTMAX
    float mrow[TM], lrow[TM];
    for (int i = 0; i < TM; i++) mrow[i] = NEG_BIG, lrow[i] = 0.0f;
#endif
#if KIND == 4
    float4 o2[TM][DVT4];
    float mrow2[TM], lrow2[TM];
    for (int i = 0; i < TM; i++) {
        mrow2[i] = NEG_BIG, lrow2[i] = 0.0f;
        for (int g = 0; g < DVT4; g++) o2[i][g] = (float4)(0.0f);
    }
#endif
#if KIND == 3
    const float lc = clamp(lambda, 0.0f, 1.0f);
#endif
    uint nz1 = 0, nz2 = 0, nzc = 0, vtiles = 0;

    /* keys visible to some row of this block: j <= offset + last row */
    long last_row = min(m0 + BM, Tq) - 1;
    long kend = min(Tk, offset + last_row + 1);
    const int ntiles = (int)((kend + BN - 1) / BN);
    const long first_pos = offset + m0;

    for (int kt = 0; kt < ntiles; kt++) {
        const long n0 = (long)kt * BN;
        const int need_mask = (n0 + BN - 1 > first_pos) || (n0 + BN > Tk);
        barrier(CLK_LOCAL_MEM_FENCE);
        load_rows(Ks, BN, k, kb_off, ks.s2, ks.s3, n0, Tk, d, kinv, inv_k, 1.0f, tid);
#if TWO_VIEWS
        load_rows(K2s, BN, k2, k2_off + b * k2s.s0 + h * k2s.s1, k2s.s2, k2s.s3, n0, Tk, d,
                  k2inv, inv_k, 1.0f, tid);
#endif
#if SPARSE
        if (tid < MASK_WORDS) mask_buf[tid] = 0u;
#endif
#if SOFTMAX
        for (int r = tid; r < (KIND == 4 ? 2 : 1) * BM; r += NT) tmax[r] = ord_int(NEG_BIG);
#endif
        barrier(CLK_LOCAL_MEM_FENCE);

        float s[TM][TN];
        SCORE_TILE(s, Qs, Ks);
#if TWO_VIEWS
        float s2[TM][TN];
        SCORE_TILE(s2, Q2s, K2s);
#endif
        /* causal and tail mask */
        if (need_mask) {
            for (int j = 0; j < TN; j++) {
                long n = n0 + cg + NCG * j;
                for (int i = 0; i < TM; i++)
                    if (n > pos[i] || n >= Tk) {
#if SOFTMAX
                        s[i][j] = NEG_BIG;
#if KIND == 4
                        s2[i][j] = NEG_BIG;
#endif
#else
                        s[i][j] = -INFINITY;
#if TWO_VIEWS
                        s2[i][j] = -INFINITY;
#endif
#endif
                    }
            }
        }

#if SPARSE
        /* x = s - tau; a key survives when some row has x > 0 (or NaN, which propagates) */
        uint bits[MASK_WORDS];
        for (int w = 0; w < MASK_WORDS; w++) bits[w] = 0u;
        for (int j = 0; j < TN; j++) {
            int c = cg + NCG * j;
            int any = 0;
            for (int i = 0; i < TM; i++) {
                s[i][j] -= tau[i];
                any |= !(s[i][j] <= 0.0f);
#if KIND == 3
                s2[i][j] -= tau[i];
                any |= !(s2[i][j] <= 0.0f);
#endif
            }
            for (int w = 0; w < MASK_WORDS; w++)
                if (any && (c >> 5) == w) bits[w] |= 1u << (c & 31);
        }
        for (int w = 0; w < MASK_WORDS; w++)
            if (bits[w]) atomic_or(&mask_buf[w], bits[w]);
        barrier(CLK_LOCAL_MEM_FENCE);
        uint mask[MASK_WORDS];
        uint any_mask = 0u;
        int nsurv = 0;
        for (int w = 0; w < MASK_WORDS; w++) {
            mask[w] = mask_buf[w];
            any_mask |= mask[w];
            nsurv += popcount(mask[w]);
        }
        if (any_mask == 0u) continue; /* uniform: the whole tile is zero */
        vtiles++;
        /* weights into Ws (row-major, padded), counting exact zeros when asked */
        for (int i = 0; i < TM; i++)
            for (int j = 0; j < TN; j++) {
#if KIND == 1
                float wgt = s[i][j] <= 0.0f ? 0.0f : s[i][j]; /* NaN passes */
                nz1 += wgt != 0.0f;
#elif KIND == 2
                float wgt = rect_pow(s[i][j], pmode, power);
                if (isnan(s[i][j])) wgt = s[i][j];
                nz1 += wgt != 0.0f;
#else
                float w1 = rect_pow(s[i][j], pmode, power), w2 = rect_pow(s2[i][j], pmode, power);
                if (isnan(s[i][j])) w1 = s[i][j];
                if (isnan(s2[i][j])) w2 = s2[i][j];
                float wgt = w1 - lc * w2;
                nz1 += w1 != 0.0f;
                nz2 += w2 != 0.0f;
                nzc += wgt != 0.0f;
#endif
                Ws[(rg + NRG * i) * WS + cg + NCG * j] = wgt;
            }
        /* V rows of surviving keys only (the K tile is no longer needed); a nearly full
         * mask takes the dense loop, which needs every row (zero weights times stale data
         * could otherwise make 0 * NaN) */
        const int dense = nsurv * DENSE_FRACTION > BN * 3;
        for (int idx = tid; idx < BN * DV4; idx += NT) {
            int c = idx / DV4, c4 = idx - (idx / DV4) * DV4;
            uint live = dense;
            for (int w = 0; w < MASK_WORDS; w++)
                if ((c >> 5) == w) live |= (mask[w] >> (c & 31)) & 1u;
            if (live) Vs[c * VS4 + c4] = load_v4(v, vb_off, vs, n0 + c, Tk, c4, dv);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (dense) {
            float lunused[TM];
            WV_DENSE(o, Ws, lunused, 0);
        } else {
            for (int w = 0; w < MASK_WORDS; w++) {
                uint m = mask[w];
                while (m) {
                    int c = 32 * w + (31 - clz(m & (0u - m)));
                    m &= m - 1u;
                    float4 vv[DVT4];
                    for (int g = 0; g < DVT4; g++) vv[g] = Vs[c * VS4 + cg + NCG * g];
                    for (int i = 0; i < TM; i++) {
                        float wgt = Ws[(rg + NRG * i) * WS + c];
                        for (int g = 0; g < DVT4; g++) o[i][g] = fma((float4)(wgt), vv[g], o[i][g]);
                    }
                }
            }
        }
#else /* SOFTMAX */
        /* tile row maxima through local atomics on order-preserving ints */
        for (int i = 0; i < TM; i++) {
            float mx = s[i][0];
            for (int j = 1; j < TN; j++) mx = fmax(mx, s[i][j]);
            atomic_max(&tmax[rg + NRG * i], ord_int(mx));
#if KIND == 4
            float mx2 = s2[i][0];
            for (int j = 1; j < TN; j++) mx2 = fmax(mx2, s2[i][j]);
            atomic_max(&tmax[BM + rg + NRG * i], ord_int(mx2));
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        vtiles++;
        for (int i = 0; i < TM; i++) {
            float mnew = fmax(mrow[i], ord_float(tmax[rg + NRG * i]));
            float alpha = native_exp2(mrow[i] - mnew);
            if (mnew == NEG_BIG) alpha = 1.0f; /* nothing visible yet */
            mrow[i] = mnew;
            lrow[i] *= alpha;
            for (int g = 0; g < DVT4; g++) o[i][g] *= alpha;
            for (int j = 0; j < TN; j++) {
                float pw = mnew == NEG_BIG ? 0.0f : native_exp2(s[i][j] - mnew);
                Ws[(rg + NRG * i) * WS + cg + NCG * j] = pw;
            }
#if KIND == 4
            float mnew2 = fmax(mrow2[i], ord_float(tmax[BM + rg + NRG * i]));
            float alpha2 = native_exp2(mrow2[i] - mnew2);
            if (mnew2 == NEG_BIG) alpha2 = 1.0f;
            mrow2[i] = mnew2;
            lrow2[i] *= alpha2;
            for (int g = 0; g < DVT4; g++) o2[i][g] *= alpha2;
            for (int j = 0; j < TN; j++) {
                float pw = mnew2 == NEG_BIG ? 0.0f : native_exp2(s2[i][j] - mnew2);
                Ws[BM * WS + (rg + NRG * i) * WS + cg + NCG * j] = pw;
            }
#endif
        }
        for (int idx = tid; idx < BN * DV4; idx += NT) {
            int c = idx / DV4, c4 = idx - (idx / DV4) * DV4;
            Vs[c * VS4 + c4] = load_v4(v, vb_off, vs, n0 + c, Tk, c4, dv);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        WV_DENSE(o, Ws, lrow, 1);
#if KIND == 4
        WV_DENSE(o2, (Ws + BM * WS), lrow2, 1);
#endif
#endif
    }

    /* epilogue: combine, normalise, store */
#if KIND == 0
    for (int i = 0; i < TM; i++) {
        float inv = lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f;
        for (int g = 0; g < DVT4; g++) o[i][g] *= inv;
    }
#elif KIND == 4
    for (int i = 0; i < TM; i++) {
        float inv1 = lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f;
        float inv2 = lrow2[i] > 0.0f ? lambda / lrow2[i] : 0.0f;
        for (int g = 0; g < DVT4; g++) o[i][g] = o[i][g] * inv1 - o2[i][g] * inv2;
    }
#endif
    if (norm) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TM; i++) {
            float ss = 0.0f;
            for (int g = 0; g < DVT4; g++) ss += dot(o[i][g], o[i][g]);
            red[cg * BM + rg + NRG * i] = ss;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < TM; i++) {
            float ss = 0.0f;
            for (int c = 0; c < NCG; c++) ss += red[c * BM + rg + NRG * i];
            float inv = rsqrt(ss / (float)dv + norm_eps);
            for (int g = 0; g < DVT4; g++) o[i][g] *= inv;
        }
    }
    const long ob_off = o_off + b * os.s0 + h * os.s1;
    for (int i = 0; i < TM; i++) {
        long row = m0 + rg + NRG * i;
        if (row >= Tq) continue;
        for (int g = 0; g < DVT4; g++) {
            int c = 4 * (cg + NCG * g);
            float vals[4] = {o[i][g].s0, o[i][g].s1, o[i][g].s2, o[i][g].s3};
            for (int e = 0; e < 4; e++) {
                if (c + e >= dv) break;
                float y = vals[e] * out_scale;
                if (norm && gain) y *= LOAD(GDT, gain, c + e);
                STORE(ODT, out, ob_off + row * os.s2 + (c + e) * os.s3, y);
            }
        }
    }
    if (want_stats) {
        /* rows >= Tq and masked keys never survive, so these count visible pairs only */
        if (nz1) atomic_add(&counters[0], nz1);
        if (nz2) atomic_add(&counters[1], nz2);
        if (nzc) atomic_add(&counters[2], nzc);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid == 0) {
            long wg = (long)bh * nqb + qb;
            stats[4 * wg + 0] = counters[0];
            stats[4 * wg + 1] = counters[1];
            stats[4 * wg + 2] = counters[2];
            stats[4 * wg + 3] = vtiles;
        }
    }
}
