/* Streaming causal attention, prefill: one work-group owns BM query rows of one (batch,
 * head) and walks the key tiles from 0 up to the diagonal (tiles above it are never
 * visited).  Scores live in registers as a TM x TN micro-tile per work-item, computed like
 * an SGEMM from k-major local tiles; weights go through local memory, VC keys at a time,
 * for the weight x V product.  One source serves every kind:
 *
 *   KIND 0 softmax       online softmax (base-2, log2(e) folded into the q scale)
 *   KIND 1 rela          max(s, 0)
 *   KIND 2 tra           max(s - tau(p_i), 0)^p
 *   KIND 3 tda           a1 - lc*a2 over two views sharing each V chunk
 *   KIND 4 diff_softmax  softmax(s1) - lambda*softmax(s2), two online states
 *
 * Sparse kinds (1-3) compute the scores and a per-key "any survivor" mask first; a tile
 * with an empty mask skips all V loads and weight x V work, a V chunk with no survivor is
 * skipped, and a sparse chunk loads and multiplies only the surviving V rows.
 * Local memory: Qs (k-major) persists; one region holds the K tile(s) during scoring and
 * then the W and V chunks.  The weight x V step of a tile runs at the start of the next
 * iteration, so a tile whose mask is empty costs two barriers; with PREFETCH the next K
 * tile's global loads are in flight while the current one is scored.  Nothing T x T is
 * ever stored. */

#ifndef BM
#define BM 64 /* query rows per work-group (multiple of 4*TM/4 groups) */
#endif
#ifndef BN
#define BN 32 /* keys per tile */
#endif
#ifndef TM
#define TM 8 /* query rows per work-item (multiple of 4) */
#endif
#ifndef TN
#define TN 4 /* keys per work-item in the score tile (multiple of 4) */
#endif
#ifndef VC
#define VC BN /* keys per weight x V chunk (divides BN) */
#endif
#ifndef KUNROLL
#define KUNROLL 2 /* unroll of the head-dim loop, in steps of 4 */
#endif
#ifndef PREFETCH
#define PREFETCH 1 /* stage the next K tile in registers while scoring the current one */
#endif
#ifndef SEQV
#define SEQV 0 /* two-view kinds: stage K1 and K2 through one buffer in turn (half the memory) */
#endif

#define TWO_VIEWS (KIND == 3 || KIND == 4)
#define SOFTMAX (KIND == 0 || KIND == 4)
#define SPARSE (KIND >= 1 && KIND <= 3)
#define NV (TWO_VIEWS ? 2 : 1)
#define NW (KIND == 4 ? 2 : 1) /* weight sets per key (diff_softmax keeps both) */
#define TM4 (TM / 4)
#define TN4 (TN / 4)
#define NRG (BM / TM) /* row groups */
#define NCG (BN / TN) /* column groups */
#define NT (NRG * NCG) /* work-items per work-group */
#define BM4 (BM / 4)
#define BN4 (BN / 4)
#define DV4 (DV / 4)
#define DVT4 (DV4 / NCG) /* float4 output columns per work-item */
#define VS4 (DV4 + 1)    /* padded row stride of the V chunk in float4 */
#define SWZ (BN4 >= 8 ? 7 : BN4 - 1) /* xor swizzle of K column groups, per 4 rows of k */
#define WSWZ (BM4 >= 8 ? 7 : BM4 - 1)
#define KV_VIEWS ((TWO_VIEWS && !SEQV) ? 2 : 1) /* K tiles resident at once */
#define K_FLOAT4 (KV_VIEWS * D * BN4)
#define WV_FLOAT4 (NW * VC * BM4 + VC * VS4)
#define REGION_FLOAT4 (K_FLOAT4 > WV_FLOAT4 ? K_FLOAT4 : WV_FLOAT4)
#define MASK_WORDS ((BN + 31) / 32)

/* A BN-key tile goes to k-major local memory: element (k, key c) lives in float4 group
 * (c/4) ^ ((k/4) & SWZ) of row k, which keeps both the coalesced row-wise global loads and
 * the group-wise reads of the score loop nearly free of bank conflicts.  A work-item moves
 * KPT float4s of the tile: fetched from global memory, then stored to local memory. */
#define KPT ((BN * (D / 4) + NT - 1) / NT)

inline void fetch_k_tile(float4 *regs, __global const void *src, long base, long st, long sd, long n0,
                         long rows, int d, __global const float *inv, long inv_base, int tid)
{
UNROLL
    for (int u = 0; u < KPT; u++) {
        int idx = tid + u * NT;
        int c = idx / (D / 4), k4 = idx - c * (D / 4);
        long row = n0 + c;
        float4 v = (float4)(0.0f);
        if (idx < BN * (D / 4)) {
            v = load4(src, base, st, sd, row, rows, k4, d);
            if (inv && row < rows) v *= inv[inv_base + row];
        }
        regs[u] = v;
    }
}

inline void store_k_tile(__local float *dst, const float4 *regs, int tid)
{
UNROLL
    for (int u = 0; u < KPT; u++) {
        int idx = tid + u * NT;
        if (idx < BN * (D / 4)) {
            int c = idx / (D / 4), k4 = idx - c * (D / 4);
            int g = ((c >> 2) ^ (k4 & SWZ)) * 4 + (c & 3);
            dst[(4 * k4 + 0) * BN + g] = regs[u].s0;
            dst[(4 * k4 + 1) * BN + g] = regs[u].s1;
            dst[(4 * k4 + 2) * BN + g] = regs[u].s2;
            dst[(4 * k4 + 3) * BN + g] = regs[u].s3;
        }
    }
}

/* The query block into k-major local memory (no swizzle: written once per work-group). */
inline void load_q_tile(__local float *dst, __global const void *src, long base, long st, long sd, long m0,
                        long rows, int d, __global const float *inv, long inv_base, float scale, int tid)
{
    for (int idx = tid; idx < BM * (D / 4); idx += NT) {
        int r = idx / (D / 4), k4 = idx - r * (D / 4);
        long row = m0 + r;
        float4 v = load4(src, base, st, sd, row, rows, k4, d);
        if (row < rows) v *= scale * (inv ? inv[inv_base + row] : 1.0f);
        dst[(4 * k4 + 0) * BM + r] = v.s0;
        dst[(4 * k4 + 1) * BM + r] = v.s1;
        dst[(4 * k4 + 2) * BM + r] = v.s2;
        dst[(4 * k4 + 3) * BM + r] = v.s3;
    }
}

/* s[i][j] = sum_k Q[row i][k] K[col j][k].  Work-item rows: 4*(rg + NRG*i4) + e; columns:
 * 4*(cg + NCG*j4) + e. */
#define SCORE_TILE(s, Qs4, Ks4)                                                          \
    do {                                                                                 \
        _Pragma("unroll") for (int i_ = 0; i_ < TM; i_++)                                \
            _Pragma("unroll") for (int j_ = 0; j_ < TN; j_++) s[i_][j_] = 0.0f;          \
        UNROLL_BY(KUNROLL) for (int k4 = 0; k4 < D / 4; k4++) {                   \
            const int sw_ = k4 & SWZ;                                                    \
            _Pragma("unroll") for (int e_ = 0; e_ < 4; e_++) {                           \
                const int k_ = 4 * k4 + e_;                                              \
                float4 qv[TM4], kv[TN4];                                                 \
                _Pragma("unroll") for (int i4 = 0; i4 < TM4; i4++)                       \
                    qv[i4] = Qs4[k_ * BM4 + rg + NRG * i4];                              \
                _Pragma("unroll") for (int j4 = 0; j4 < TN4; j4++)                       \
                    kv[j4] = Ks4[k_ * BN4 + ((cg + NCG * j4) ^ sw_)];                    \
                _Pragma("unroll") for (int i4 = 0; i4 < TM4; i4++)                       \
                    _Pragma("unroll") for (int j4 = 0; j4 < TN4; j4++) {                 \
                        float4 q_ = qv[i4], kk_ = kv[j4];                                \
                        s[4 * i4 + 0][4 * j4 + 0] = fma(q_.s0, kk_.s0, s[4 * i4 + 0][4 * j4 + 0]); \
                        s[4 * i4 + 0][4 * j4 + 1] = fma(q_.s0, kk_.s1, s[4 * i4 + 0][4 * j4 + 1]); \
                        s[4 * i4 + 0][4 * j4 + 2] = fma(q_.s0, kk_.s2, s[4 * i4 + 0][4 * j4 + 2]); \
                        s[4 * i4 + 0][4 * j4 + 3] = fma(q_.s0, kk_.s3, s[4 * i4 + 0][4 * j4 + 3]); \
                        s[4 * i4 + 1][4 * j4 + 0] = fma(q_.s1, kk_.s0, s[4 * i4 + 1][4 * j4 + 0]); \
                        s[4 * i4 + 1][4 * j4 + 1] = fma(q_.s1, kk_.s1, s[4 * i4 + 1][4 * j4 + 1]); \
                        s[4 * i4 + 1][4 * j4 + 2] = fma(q_.s1, kk_.s2, s[4 * i4 + 1][4 * j4 + 2]); \
                        s[4 * i4 + 1][4 * j4 + 3] = fma(q_.s1, kk_.s3, s[4 * i4 + 1][4 * j4 + 3]); \
                        s[4 * i4 + 2][4 * j4 + 0] = fma(q_.s2, kk_.s0, s[4 * i4 + 2][4 * j4 + 0]); \
                        s[4 * i4 + 2][4 * j4 + 1] = fma(q_.s2, kk_.s1, s[4 * i4 + 2][4 * j4 + 1]); \
                        s[4 * i4 + 2][4 * j4 + 2] = fma(q_.s2, kk_.s2, s[4 * i4 + 2][4 * j4 + 2]); \
                        s[4 * i4 + 2][4 * j4 + 3] = fma(q_.s2, kk_.s3, s[4 * i4 + 2][4 * j4 + 3]); \
                        s[4 * i4 + 3][4 * j4 + 0] = fma(q_.s3, kk_.s0, s[4 * i4 + 3][4 * j4 + 0]); \
                        s[4 * i4 + 3][4 * j4 + 1] = fma(q_.s3, kk_.s1, s[4 * i4 + 3][4 * j4 + 1]); \
                        s[4 * i4 + 3][4 * j4 + 2] = fma(q_.s3, kk_.s2, s[4 * i4 + 3][4 * j4 + 2]); \
                        s[4 * i4 + 3][4 * j4 + 3] = fma(q_.s3, kk_.s3, s[4 * i4 + 3][4 * j4 + 3]); \
                    }                                                                    \
            }                                                                            \
        }                                                                                \
    } while (0)

/* Row index (within the block) of work-item row i, and key index of work-item column j. */
#define ROW_OF(i) (4 * (rg + NRG * ((i) / 4)) + ((i) % 4))
#define COL_OF(j) (4 * (cg + NCG * ((j) / 4)) + ((j) % 4))

/* Weights of chunk keys [c0, c0 + VC) into Wc (key-major, rows in swizzled float4 groups):
 * the work-items owning those columns write their TM values per column. */
#define WRITE_W_CHUNK(Wc, w, c0)                                                          \
    do {                                                                                  \
        _Pragma("unroll") for (int j_ = 0; j_ < TN; j_++) {                               \
            int c_ = COL_OF(j_) - (c0);                                                   \
            if (c_ >= 0 && c_ < VC) {                                                     \
                _Pragma("unroll") for (int i4 = 0; i4 < TM4; i4++) {                      \
                    int g_ = (rg + NRG * i4) ^ ((c_ >> 2) & WSWZ);                        \
                    ((__local float4 *)(Wc))[c_ * BM4 + g_] =                             \
                        (float4)(w[4 * i4][j_], w[4 * i4 + 1][j_], w[4 * i4 + 2][j_], w[4 * i4 + 3][j_]); \
                }                                                                         \
            }                                                                             \
        }                                                                                 \
    } while (0)

/* o[i][g] += W[row i][c] * V[c][group g] for the chunk's key c; optionally also sums the
 * weights of each row into l[i] (softmax denominators). */
#define WV_KEY(o, Wc, c, l, WANT_L)                                                       \
    do {                                                                                  \
        float4 vv_[DVT4];                                                                 \
        _Pragma("unroll") for (int g_ = 0; g_ < DVT4; g_++) vv_[g_] = Vs4[(c) * VS4 + cg + NCG * g_]; \
        _Pragma("unroll") for (int i4 = 0; i4 < TM4; i4++) {                              \
            float4 wv_ = ((__local float4 *)(Wc))[(c) * BM4 + ((rg + NRG * i4) ^ (((c) >> 2) & WSWZ))]; \
            if (WANT_L) {                                                                 \
                l[4 * i4 + 0] += wv_.s0, l[4 * i4 + 1] += wv_.s1;                          \
                l[4 * i4 + 2] += wv_.s2, l[4 * i4 + 3] += wv_.s3;                          \
            }                                                                             \
            _Pragma("unroll") for (int g_ = 0; g_ < DVT4; g_++) {                         \
                o[4 * i4 + 0][g_] = fma((float4)(wv_.s0), vv_[g_], o[4 * i4 + 0][g_]);     \
                o[4 * i4 + 1][g_] = fma((float4)(wv_.s1), vv_[g_], o[4 * i4 + 1][g_]);     \
                o[4 * i4 + 2][g_] = fma((float4)(wv_.s2), vv_[g_], o[4 * i4 + 2][g_]);     \
                o[4 * i4 + 3][g_] = fma((float4)(wv_.s3), vv_[g_], o[4 * i4 + 3][g_]);     \
            }                                                                             \
        }                                                                                 \
    } while (0)

/* Online softmax, per query row i of this work-item: move the running maximum to the new
 * tile's maximum (from tmax, offset 0 or BM for the second view), rescale the running sum
 * and output, and turn the scores into weights.  Masked keys (score -inf) weigh 0; testing
 * the score rather than the row maximum keeps a NaN score NaN (fmax drops NaN, so a row
 * whose every score is NaN keeps maximum -inf and would otherwise come out as silent
 * zeros). */
#define ONLINE_RESCALE(i, mrow, lrow, o, s, toff)                                                    \
    do {                                                                                         \
        float mnew_ = fmax(mrow[i], ord_float(tmax[(kt - 1) & 1][(toff) + ROW_OF(i)]));           \
        float alpha_ = mnew_ == -INFINITY ? 1.0f : native_exp2(mrow[i] - mnew_);                   \
        mrow[i] = mnew_;                                                                         \
        lrow[i] *= alpha_;                                                                       \
        for (int g_ = 0; g_ < DVT4; g_++) o[i][g_] *= alpha_;                                      \
        for (int j_ = 0; j_ < TN; j_++) s[i][j_] = s[i][j_] == -INFINITY ? 0.0f : native_exp2(s[i][j_] - mnew_); \
    } while (0)

__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) TDACL_SUBGROUP_ATTR void attention_fwd(
    PREFILL_KERNEL_ARGS)
{
    __local float4 Qs4[NV * D * BM4];
    __local float4 R4[REGION_FLOAT4]; /* K tile(s) while scoring; then W and V chunks */
#if SPARSE
    __local uint mask_buf[2][MASK_WORDS]; /* tile kt's mask is read in iteration kt+1 */
#endif
#if SOFTMAX
    __local int tmax[2][NV * BM];
#endif
    __local uint counters[4];

    const int tid = get_local_id(0);
    const int rg = tid / NCG, cg = tid - (tid / NCG) * NCG;
    ATTENTION_HEAD(H, lambdas, lambda);
    ATTENTION_QUERY_BLOCK(BM);
    __local float *Ks = (__local float *)R4;
    __local float4 *Ks4 = R4;
    __local float4 *Ws4 = R4;                       /* NW x VC keys x BM4 */
    __local float4 *Vs4 = R4 + NW * VC * BM4;       /* VC keys x VS4 */

    const long inv_q = (long)bh * Tq, inv_k = (long)bh * Tk;
#if SOFTMAX
    const float qscale = scale * 1.44269504088896341f; /* scores in log2 units */
#else
    const float qscale = scale;
#endif
    load_q_tile((__local float *)Qs4, q, q_off + b * qs.s0 + h * qs.s1, qs.s2, qs.s3, m0, Tq, d, qinv, inv_q,
                qscale, tid);
#if TWO_VIEWS
    load_q_tile((__local float *)(Qs4 + D * BM4), q2, q2_off + b * q2s.s0 + h * q2s.s1, q2s.s2, q2s.s3, m0, Tq, d,
                q2inv, inv_q, qscale, tid);
#endif
    ZERO_LOCAL(counters, 4, tid, NT); /* the smallest ladder tile has one work-item */

    /* per-row state */
    float tau[TM];
UNROLL
    for (int i = 0; i < TM; i++) {
#if KIND == 2 || KIND == 3
        tau[i] = tau_of(offset + m0 + ROW_OF(i), beta, kappa, d);
#else
        tau[i] = 0.0f;
#endif
    }
    float4 o[TM][DVT4];
UNROLL
    for (int i = 0; i < TM; i++)
UNROLL
        for (int g = 0; g < DVT4; g++) o[i][g] = (float4)(0.0f);
#if SOFTMAX
    float mrow[TM], lrow[TM];
UNROLL
    for (int i = 0; i < TM; i++) mrow[i] = -INFINITY, lrow[i] = 0.0f;
#endif
#if KIND == 4
    float4 o2[TM][DVT4];
    float mrow2[TM], lrow2[TM];
UNROLL
    for (int i = 0; i < TM; i++) {
        mrow2[i] = -INFINITY, lrow2[i] = 0.0f;
UNROLL
        for (int g = 0; g < DVT4; g++) o2[i][g] = (float4)(0.0f);
    }
#endif
#if KIND == 3
    const float lc = clamp(lambda, 0.0f, 1.0f);
#endif
    uint nz1 = 0, nz2 = 0, nzc = 0, vtiles = 0;

    /* keys visible to some row of this block: j <= offset + last row */
    const long last_row = min(m0 + BM, Tq) - 1;
    const long kend = min(Tk, offset + last_row + 1);
    const int ntiles = (int)((kend + BN - 1) / BN);
    const long first_pos = offset + m0;
    const long vb_off = v_off + b * vs.s0 + h * vs.s1;

    const long kb_off = k_off + b * ks.s0 + h * ks.s1;
#if TWO_VIEWS
    const long k2b_off = k2_off + b * k2s.s0 + h * k2s.s1;
#endif
    float4 kreg[KPT];
#if KV_VIEWS == 2
    float4 k2reg[KPT];
#endif
    if (ntiles > 0) {
        fetch_k_tile(kreg, k, kb_off, ks.s2, ks.s3, 0, Tk, d, kinv, inv_k, tid);
#if KV_VIEWS == 2
        fetch_k_tile(k2reg, k2, k2b_off, k2s.s2, k2s.s3, 0, Tk, d, k2inv, inv_k, tid);
#endif
    }
    float s[TM][TN];
#if TWO_VIEWS
    float s2[TM][TN];
#endif
    long prev_n0 = -1;

    /* Iteration kt scores tile kt and finishes tile kt-1 (its weight x V step); one extra
     * iteration finishes the last tile. */
    for (int kt = 0; kt <= ntiles; kt++) {
        barrier(CLK_LOCAL_MEM_FENCE); /* tile kt-1: scores done, mask/maxima complete */
        if (prev_n0 >= 0) {
            const long n0 = prev_n0;
            int used = 0; /* chunks that touched the region */
#if SPARSE
            uint mask[MASK_WORDS];
            uint any_mask = 0u;
UNROLL
            for (int w = 0; w < MASK_WORDS; w++) any_mask |= (mask[w] = mask_buf[(kt - 1) & 1][w]);
            if (any_mask) {
                vtiles++;
                /* weights, counting exact zeros when asked */
UNROLL
                for (int i = 0; i < TM; i++)
UNROLL
                    for (int j = 0; j < TN; j++) {
#if KIND == 1
                        float wgt = s[i][j] <= 0.0f ? 0.0f : s[i][j]; /* NaN passes */
                        nz1 += wgt != 0.0f;
#elif KIND == 2
                        float wgt = isnan(s[i][j]) ? s[i][j] : rect_pow(s[i][j], pmode, power);
                        nz1 += wgt != 0.0f;
#else
                        float w1 = isnan(s[i][j]) ? s[i][j] : rect_pow(s[i][j], pmode, power);
                        float w2 = isnan(s2[i][j]) ? s2[i][j] : rect_pow(s2[i][j], pmode, power);
                        float wgt = w1 - lc * w2;
                        nz1 += w1 != 0.0f;
                        nz2 += w2 != 0.0f;
                        nzc += wgt != 0.0f;
#endif
                        s[i][j] = wgt;
                    }
                /* chunks of VC keys: skip empty ones, load only surviving V rows of sparse ones */
                for (int c0 = 0; c0 < BN; c0 += VC) {
                    uint cm[MASK_WORDS];
                    uint chunk_any = 0u;
                    int nsurv = 0;
UNROLL
                    for (int w = 0; w < MASK_WORDS; w++) {
                        /* bits [lo, hi) of word w belong to this chunk (shifts stay in 0..31) */
                        const int lo = clamp(c0 - 32 * w, 0, 32), hi = clamp(c0 + VC - 32 * w, 0, 32);
                        uint sel = 0u;
                        if (lo < hi) sel = (hi == 32 ? 0xffffffffu : ((1u << hi) - 1u)) & ~((1u << lo) - 1u);
                        cm[w] = mask[w] & sel;
                        chunk_any |= cm[w];
                        nsurv += popcount(cm[w]);
                    }
                    if (!chunk_any) continue; /* uniform */
                    const int dense = nsurv * 4 > VC * 3;
                    if (used++) barrier(CLK_LOCAL_MEM_FENCE); /* previous chunk fully read */
                    WRITE_W_CHUNK(Ws4, s, c0);
                    for (int idx = tid; idx < VC * DV4; idx += NT) {
                        int c = idx / DV4, c4 = idx - (idx / DV4) * DV4;
                        int key = c0 + c;
                        uint live = dense;
UNROLL
                        for (int w = 0; w < MASK_WORDS; w++)
                            if ((key >> 5) == w) live |= (cm[w] >> (key & 31)) & 1u;
                        if (live) Vs4[c * VS4 + c4] = load4(v, vb_off, vs.s2, vs.s3, n0 + key, Tk, c4, dv);
                    }
                    barrier(CLK_LOCAL_MEM_FENCE);
                    if (dense) {
                        float lunused[TM];
                        for (int c = 0; c < VC; c++) WV_KEY(o, Ws4, c, lunused, 0);
                    } else {
UNROLL
                        for (int w = 0; w < MASK_WORDS; w++) {
                            uint m = cm[w];
                            while (m) {
                                int c = 32 * w + (31 - clz(m & (0u - m))) - c0;
                                m &= m - 1u;
                                float lunused[TM];
                                WV_KEY(o, Ws4, c, lunused, 0);
                            }
                        }
                    }
                }
            }
#else /* SOFTMAX: rescale by the new row maxima, then every key */
            vtiles++;
UNROLL
            for (int i = 0; i < TM; i++) {
                ONLINE_RESCALE(i, mrow, lrow, o, s, 0);
#if KIND == 4
                ONLINE_RESCALE(i, mrow2, lrow2, o2, s2, BM);
#endif
            }
            for (int c0 = 0; c0 < BN; c0 += VC) {
                if (used++) barrier(CLK_LOCAL_MEM_FENCE); /* previous chunk fully read */
                WRITE_W_CHUNK(Ws4, s, c0);
#if KIND == 4
                WRITE_W_CHUNK((Ws4 + VC * BM4), s2, c0);
#endif
                for (int idx = tid; idx < VC * DV4; idx += NT) {
                    int c = idx / DV4, c4 = idx - (idx / DV4) * DV4;
                    Vs4[c * VS4 + c4] = load4(v, vb_off, vs.s2, vs.s3, n0 + c0 + c, Tk, c4, dv);
                }
                barrier(CLK_LOCAL_MEM_FENCE);
                for (int c = 0; c < VC; c++) {
                    WV_KEY(o, Ws4, c, lrow, 1);
#if KIND == 4
                    WV_KEY(o2, (Ws4 + VC * BM4), c, lrow2, 1);
#endif
                }
            }
#endif
            if (used) barrier(CLK_LOCAL_MEM_FENCE); /* region free for the next K tile */
        }
        if (kt == ntiles) break;

        /* tile kt: K to local memory, then (with PREFETCH) tile kt+1's loads in flight */
        const long n0 = (long)kt * BN;
        const int need_mask = (n0 + BN - 1 > first_pos) || (n0 + BN > Tk);
#if !PREFETCH
        if (kt > 0) {
            fetch_k_tile(kreg, k, kb_off, ks.s2, ks.s3, n0, Tk, d, kinv, inv_k, tid);
#if KV_VIEWS == 2
            fetch_k_tile(k2reg, k2, k2b_off, k2s.s2, k2s.s3, n0, Tk, d, k2inv, inv_k, tid);
#endif
        }
#endif
        store_k_tile(Ks, kreg, tid);
#if KV_VIEWS == 2
        store_k_tile(Ks + D * BN, k2reg, tid);
#endif
#if SPARSE
        ZERO_LOCAL(mask_buf[kt & 1], MASK_WORDS, tid, NT);
#endif
#if SOFTMAX
        for (int r = tid; r < NV * BM; r += NT) tmax[kt & 1][r] = ord_int(-INFINITY);
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
#if TWO_VIEWS && SEQV
        /* view 1 from the buffer, view 2's tile loads in flight; then view 2 */
#if PREFETCH
        fetch_k_tile(kreg, k2, k2b_off, k2s.s2, k2s.s3, n0, Tk, d, k2inv, inv_k, tid);
#endif
        SCORE_TILE(s, Qs4, Ks4);
        barrier(CLK_LOCAL_MEM_FENCE);
#if !PREFETCH
        fetch_k_tile(kreg, k2, k2b_off, k2s.s2, k2s.s3, n0, Tk, d, k2inv, inv_k, tid);
#endif
        store_k_tile(Ks, kreg, tid);
        barrier(CLK_LOCAL_MEM_FENCE);
#if PREFETCH
        if (kt + 1 < ntiles) fetch_k_tile(kreg, k, kb_off, ks.s2, ks.s3, n0 + BN, Tk, d, kinv, inv_k, tid);
#endif
        SCORE_TILE(s2, (Qs4 + D * BM4), Ks4);
#else
#if PREFETCH
        if (kt + 1 < ntiles) {
            fetch_k_tile(kreg, k, kb_off, ks.s2, ks.s3, n0 + BN, Tk, d, kinv, inv_k, tid);
#if TWO_VIEWS
            fetch_k_tile(k2reg, k2, k2b_off, k2s.s2, k2s.s3, n0 + BN, Tk, d, k2inv, inv_k, tid);
#endif
        }
#endif
        SCORE_TILE(s, Qs4, Ks4);
#if TWO_VIEWS
        SCORE_TILE(s2, (Qs4 + D * BM4), (Ks4 + D * BN4));
#endif
#endif
        /* causal and tail mask */
        if (need_mask) {
UNROLL
            for (int j = 0; j < TN; j++) {
                long n = n0 + COL_OF(j);
UNROLL
                for (int i = 0; i < TM; i++)
                    if (n > first_pos + ROW_OF(i) || n >= Tk) {
                        s[i][j] = -INFINITY;
#if TWO_VIEWS
                        s2[i][j] = -INFINITY;
#endif
                    }
            }
        }
#if SPARSE
        /* x = s - tau; a key survives when some row has x > 0 (or NaN, which propagates) */
        uint bits[MASK_WORDS];
UNROLL
        for (int w = 0; w < MASK_WORDS; w++) bits[w] = 0u;
UNROLL
        for (int j = 0; j < TN; j++) {
            int any = 0;
UNROLL
            for (int i = 0; i < TM; i++) {
                s[i][j] -= tau[i];
                any |= !(s[i][j] <= 0.0f);
#if KIND == 3
                s2[i][j] -= tau[i];
                any |= !(s2[i][j] <= 0.0f);
#endif
            }
            const int c = COL_OF(j);
UNROLL
            for (int w = 0; w < MASK_WORDS; w++)
                if (any && (c >> 5) == w) bits[w] |= 1u << (c & 31);
        }
UNROLL
        for (int w = 0; w < MASK_WORDS; w++)
            if (bits[w]) atomic_or(&mask_buf[kt & 1][w], bits[w]);
#else
        /* tile row maxima through local atomics on order-preserving ints */
UNROLL
        for (int i = 0; i < TM; i++) {
            float mx = s[i][0];
UNROLL
            for (int j = 1; j < TN; j++) mx = fmax(mx, s[i][j]);
            if (mx != -INFINITY) atomic_max(&tmax[kt & 1][ROW_OF(i)], ord_int(mx));
#if KIND == 4
            float mx2 = s2[i][0];
UNROLL
            for (int j = 1; j < TN; j++) mx2 = fmax(mx2, s2[i][j]);
            if (mx2 != -INFINITY) atomic_max(&tmax[kt & 1][BM + ROW_OF(i)], ord_int(mx2));
#endif
        }
#endif
        prev_n0 = n0;
    }

    /* epilogue: combine, normalise, store */
#if KIND == 0
UNROLL
    for (int i = 0; i < TM; i++) {
        float inv = lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f;
UNROLL
        for (int g = 0; g < DVT4; g++) o[i][g] *= inv;
    }
#elif KIND == 4
UNROLL
    for (int i = 0; i < TM; i++) {
        float inv1 = lrow[i] > 0.0f ? 1.0f / lrow[i] : 0.0f;
        float inv2 = lrow2[i] > 0.0f ? lambda / lrow2[i] : 0.0f;
UNROLL
        for (int g = 0; g < DVT4; g++) o[i][g] = o[i][g] * inv1 - o2[i][g] * inv2;
    }
#endif
    if (norm) {
        /* row sums of squares: one partial per column group, through the region */
        __local float *red = (__local float *)R4;
        barrier(CLK_LOCAL_MEM_FENCE);
UNROLL
        for (int i = 0; i < TM; i++) {
            float ss = 0.0f;
UNROLL
            for (int g = 0; g < DVT4; g++) ss += dot(o[i][g], o[i][g]);
            red[cg * BM + ROW_OF(i)] = ss;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
UNROLL
        for (int i = 0; i < TM; i++) {
            float ss = 0.0f;
            for (int c = 0; c < NCG; c++) ss += red[c * BM + ROW_OF(i)];
            float inv = rsqrt(ss / (float)dv + norm_eps);
UNROLL
            for (int g = 0; g < DVT4; g++) o[i][g] *= inv;
        }
    }
    const long ob_off = o_off + b * os.s0 + h * os.s1;
UNROLL
    for (int i = 0; i < TM; i++) {
        long row = m0 + ROW_OF(i);
        if (row >= Tq) continue;
UNROLL
        for (int g = 0; g < DVT4; g++) {
            int c = 4 * (cg + NCG * g);
            float vals[4] = {o[i][g].s0, o[i][g].s1, o[i][g].s2, o[i][g].s3};
UNROLL
            for (int e = 0; e < 4; e++) {
                if (c + e < dv) {
                    float y = vals[e] * out_scale;
                    if (norm && gain) y *= LOAD(GDT, gain, c + e);
                    STORE(ODT, out, ob_off + row * os.s2 + (c + e) * os.s3, y);
                }
            }
        }
    }
    if (want_stats) {
        /* rows >= Tq and masked keys never survive, so these count visible pairs only */
        stats_flush(counters, stats, (long)bh * nqb + qb, nz1, nz2, nzc, vtiles, tid);
    }
}
