/* Tensor-core causal attention, prefill: the FlashAttention-2 work split on the m16n8k16
 * fragments of mma.cl.  A work-group owns BM = 16 * NWARPS query rows of one (batch, head);
 * each warp owns 16 of them and keeps their scores, weights and output in registers (C
 * fragments).  Per key tile of BN keys:
 *   S = Q K^T        Q fragments loaded once, K tile double-buffered in local memory
 *   weights          the kind's rule on S (online softmax, ReLU, threshold rectifier, ...)
 *   O += W V         weights re-packed as A operands, V tile from local memory
 * Tiles above the block's diagonal are never visited; a warp whose rows all lie above a
 * tile skips its S products, and for the sparse kinds a warp with no surviving weight in a
 * tile skips its W V products, and a work-group with none skips loading the V tile.
 * Inputs are 16-bit (DT 1 bf16, 2 f16); products accumulate in f32.  The same argument list
 * as attention_fwd (attention.cl), so the host launches either. */

#ifndef KIND
#define KIND 2
#endif
#ifndef DT
#define DT 1
#endif
#ifndef ODT
#define ODT 1
#endif
#ifndef GDT
#define GDT 0
#endif
#ifndef D
#define D 64 /* head dim padded to a multiple of 16 */
#endif
#ifndef DV
#define DV 64
#endif
#ifndef BN
#define BN 64 /* keys per tile (multiple of 16) */
#endif
#ifndef PMODE
#define PMODE 2 /* the rectifier's power: 1 (x), 2 (x*x), 0 (pow(x, p)); a compile-time choice, so
                   the general pow is never evaluated for the common powers */
#endif
#ifndef NWARPS
#define NWARPS 4 /* warps per work-group; BM = 16 * NWARPS */
#endif

#define TWO_VIEWS (KIND == 3 || KIND == 4)
#define SOFTMAX (KIND == 0 || KIND == 4)
#define SPARSE (KIND >= 1 && KIND <= 3)
#define NV (TWO_VIEWS ? 2 : 1)
#define NT (32 * NWARPS)
#define BM (16 * NWARPS)
#define LDK (D + 8)   /* padded rows: ldmatrix row addresses fall in distinct banks */
#define LDV (DV + 8)
#define NB (BN / 8)   /* n-blocks of a score tile */
#define KD (D / 16)   /* k-steps of Q K^T */
#define KB (BN / 16)  /* k-steps of W V */
#define NBV (DV / 8)  /* n-blocks of the output */
#define NW (KIND == 4 ? 2 : 1) /* weight sets (diff_softmax keeps both) */
#define UNROLL _Pragma("unroll") /* register arrays stay registers only when fully unrolled */
/* K tiles are prefetched one tile ahead (2 stages).  Dense kinds prefetch V with K; sparse
 * kinds load V only after a tile's weights show a survivor (one V stage).  Measured on the
 * H200 (tra/tda bf16, T=8192, beta 1): K two tiles ahead through 3 stages gave tra 1.96 ms
 * but tda 4.66 (local memory); two ahead through 2 stages 2.55 / 4.78; one ahead, as
 * here, 2.01 / 3.73. */
#define VSTAGES (SOFTMAX ? 2 : 1)
#define KSTAGES 2
#define KNORM (KIND == 2 || KIND == 3) /* kinds that may scale scores by inverse key norms */
/* f16 weights of the sparse kinds have no fixed scale (x^p can underflow f16, a large ReLU
 * score overflow it): each row's weights are scaled by a power of two that puts the row's
 * largest at [1, 2), and the output is rescaled as that power moves, as online softmax does
 * with its maximum (exact: powers of two). */
#define WSCALE (SPARSE && MMA_IN == 2)

/* max(x, 0)^p for x not NaN (the callers pass NaN through themselves) */
inline float rectify(float x, float p)
{
#if PMODE == 2
    return x > 0.0f ? x * x : 0.0f;
#elif PMODE == 1
    return x > 0.0f ? x : 0.0f;
#else
    return x > 0.0f ? pow(x, p) : 0.0f;
#endif
}

/* Rows [r0, r0 + nrows) of a [.., T, cols] view into local rows of ld elements, columns
 * 0..CPAD-1, zero beyond `rows` and `cols`.  Aligned views move 16-byte chunks (cp.async on
 * NVIDIA); others go element by element. */
inline void load_tile(__local ushort *dst, int ld, __global const ushort *src, long base, long st, long sd, long r0,
                      long rows, int cols, int CPAD, int nrows, int tid)
{
    const int chunks = CPAD / 8;
    for (int idx = tid; idx < nrows * chunks; idx += NT) {
        const int r = idx / chunks, c = (idx - r * chunks) * 8;
        const long row = r0 + r;
        __local ushort *to = dst + r * ld + c;
#ifdef ALIGNED16
        const int bytes = row < rows ? 2 * clamp(cols - c, 0, 8) : 0;
        mma_copy16(to, src + base + (bytes ? row * st + c : 0), bytes);
#else
        for (int i = 0; i < 8; i++)
            to[i] = (row < rows && c + i < cols) ? src[base + row * st + (long)(c + i) * sd] : (ushort)0;
#endif
    }
}

__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) void attention_mma_fwd(
    __global const void *q, __global const void *k, __global const void *v,
    __global const void *q2, __global const void *k2,
    __global const float *qinv, __global const float *kinv,
    __global const float *q2inv, __global const float *k2inv,
    __global const void *gain, __global const float *lambdas, __global void *out, __global uint *stats,
    long4 qs, long4 ks, long4 vs, long4 q2s, long4 k2s, long4 os,
    long q_off, long k_off, long v_off, long q2_off, long k2_off, long o_off,
    int H, long Tq, long Tk, long offset, int d, int dv,
    float scale, float beta, float kappa, int pmode, float power, float lambda,
    int norm, float norm_eps, float out_scale, int want_stats)
{
#if MMA_NATIVE
    /* Q is staged once through the K region, then lives in registers */
    __local ushort Ks[(KSTAGES * NV * BN > NV * BM ? KSTAGES * NV * BN : NV * BM) * LDK] __attribute__((aligned(16)));
    __local ushort *Qs = Ks;
#else
    __local ushort Ks[KSTAGES * NV * BN * LDK] __attribute__((aligned(16)));
    __local ushort Qs[NV * BM * LDK] __attribute__((aligned(16))); /* A fragments refer to it */
    __local ushort Ps[NWARPS * NW * 16 * MMA_SCRATCH_LD(BN)];
    __local float mma_xchg[NT];
#endif
    __local ushort Vs[VSTAGES * BN * LDV] __attribute__((aligned(16)));
#if KNORM
    __local float kn_s[KSTAGES * NV * BN] __attribute__((aligned(16))); /* inverse key norms per K stage */
#endif
    __local int wg_any[2];
    __local uint counters[4];

    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int bh = get_group_id(1);
    const int b = bh / H, h = bh - (bh / H) * H;
    if (lambdas) lambda = lambdas[h];
    const long nqb = get_num_groups(2);
    const long qb = nqb - 1 - get_group_id(2); /* heaviest blocks first */
    const long m0 = qb * BM;
    const long wrow0 = m0 + 16 * warp;               /* this warp's first query row */
    const long row_a = wrow0 + g, row_b = row_a + 8; /* this lane's two rows */

    __global const ushort *qp = (__global const ushort *)q, *kp = (__global const ushort *)k;
    __global const ushort *vp = (__global const ushort *)v;
    const long qb_off = q_off + b * qs.s0 + h * qs.s1, kb_off = k_off + b * ks.s0 + h * ks.s1;
    const long vb_off = v_off + b * vs.s0 + h * vs.s1;
#if TWO_VIEWS
    __global const ushort *q2p = (__global const ushort *)q2, *k2p = (__global const ushort *)k2;
    const long q2b_off = q2_off + b * q2s.s0 + h * q2s.s1, k2b_off = k2_off + b * k2s.s0 + h * k2s.s1;
#endif
    if (tid < 4) counters[tid] = 0;
    if (tid < 2) wg_any[tid] = 0;

    /* keys visible to some row of this block */
    const long last_row = min(m0 + BM, Tq) - 1;
    const long kend = min(Tk, offset + last_row + 1);
    const int ntiles = (int)((kend + BN - 1) / BN);

/* K tile `tile_` (and its inverse norms) into stage `stg_`; V tile into V stage `vst_` */
#if KNORM
#define LOAD_KN(n0_, stg_, vw_, inv_)                                                                       \
    if (inv_)                                                                                              \
        for (int i_ = tid; i_ < BN; i_ += NT)                                                              \
            mma_copy4(&kn_s[((stg_) * NV + (vw_)) * BN + i_], (inv_) + (long)bh * Tk + min((n0_) + i_, Tk - 1), \
                      (n0_) + i_ < Tk ? 4 : 0)
#else
#define LOAD_KN(n0_, stg_, vw_, inv_) ((void)0)
#endif
#if TWO_VIEWS
#define LOAD_K2(n0_, Kd_, stg_)                                                                   \
    load_tile((Kd_) + BN * LDK, LDK, k2p, k2b_off, k2s.s2, k2s.s3, (n0_), Tk, d, D, BN, tid);     \
    LOAD_KN(n0_, stg_, 1, k2inv)
#else
#define LOAD_K2(n0_, Kd_, stg_) ((void)0)
#endif
#define LOAD_K_TILE(tile_, stg_)                                                            \
    do {                                                                                    \
        const long n0_ = (long)(tile_) * BN;                                                \
        __local ushort *Kd_ = Ks + (stg_) * NV * BN * LDK;                                  \
        load_tile(Kd_, LDK, kp, kb_off, ks.s2, ks.s3, n0_, Tk, d, D, BN, tid);              \
        LOAD_KN(n0_, stg_, 0, kinv);                                                        \
        LOAD_K2(n0_, Kd_, stg_);                                                            \
    } while (0)
#define LOAD_V_TILE(tile_, vst_) \
    load_tile(Vs + (vst_) * BN * LDV, LDV, vp, vb_off, vs.s2, vs.s3, (long)(tile_) * BN, Tk, dv, DV, BN, tid)

    /* Q fragments */
    load_tile(Qs, LDK, qp, qb_off, qs.s2, qs.s3, m0, Tq, d, D, BM, tid);
#if TWO_VIEWS
    load_tile(Qs + BM * LDK, LDK, q2p, q2b_off, q2s.s2, q2s.s3, m0, Tq, d, D, BM, tid);
#endif
    mma_copy_commit();
    MMA_COPY_WAIT(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    frag_a qf[NV][KD];
    UNROLL for (int vw = 0; vw < NV; vw++)
        UNROLL for (int kk = 0; kk < KD; kk++) mma_load_a(&qf[vw][kk], Qs + vw * BM * LDK + 16 * warp * LDK + 16 * kk, LDK);
#if MMA_NATIVE
    barrier(CLK_LOCAL_MEM_FENCE); /* Q read out of the K region before the first K tile lands */
#endif
    if (ntiles > 0) {
        LOAD_K_TILE(0, 0);
#if SOFTMAX
        LOAD_V_TILE(0, 0);
#endif
    }
    mma_copy_commit();

    /* per-row state: this lane's rows a (e = 0, 1) and b (e = 2, 3) */
    const float qia = (qinv && row_a < Tq) ? qinv[(long)bh * Tq + row_a] : 1.0f;
    const float qib = (qinv && row_b < Tq) ? qinv[(long)bh * Tq + row_b] : 1.0f;
#if TWO_VIEWS
    const float q2ia = (q2inv && row_a < Tq) ? q2inv[(long)bh * Tq + row_a] : 1.0f;
    const float q2ib = (q2inv && row_b < Tq) ? q2inv[(long)bh * Tq + row_b] : 1.0f;
#endif
#if KIND == 2 || KIND == 3
    const float tau_a = tau_of(offset + row_a, beta, kappa, d), tau_b = tau_of(offset + row_b, beta, kappa, d);
#endif
#if SOFTMAX
    const float sscale = scale * 1.44269504088896341f; /* scores in log2 units */
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;
#else
    const float sscale = scale;
#endif
    /* the score scale with each row's inverse query norm folded in */
    const float sa = sscale * qia, sb = sscale * qib;
#if TWO_VIEWS
    const float s2a = sscale * q2ia, s2b = sscale * q2ib;
#endif
#if KIND == 4
    float m2_a = -INFINITY, m2_b = -INFINITY, l2_a = 0.0f, l2_b = 0.0f;
    float o2[NBV][4];
#endif
#if KIND == 3
    const float lc = clamp(lambda, 0.0f, 1.0f);
#endif
#if WSCALE
    int e_a = -150, e_b = -150; /* log2 of each row's weight scale; -150: no weight yet */
#endif
    float o[NBV][4];
    UNROLL for (int n = 0; n < NBV; n++)
        UNROLL for (int e = 0; e < 4; e++) {
            o[n][e] = 0.0f;
#if KIND == 4
            o2[n][e] = 0.0f;
#endif
        }
    uint nz1 = 0, nz2 = 0, nzc = 0, vtiles = 0;
    const long warp_last = min(wrow0 + 15, Tq - 1); /* the warp's last real row */

    for (int kt = 0; kt < ntiles; kt++) {
        const long n0 = (long)kt * BN;
        const int stg = kt % KSTAGES;
        __local ushort *Kt = Ks + stg * NV * BN * LDK;
        MMA_COPY_WAIT(0);
        barrier(CLK_LOCAL_MEM_FENCE); /* tile kt landed; the other stages are free */
        if (tid == 0) wg_any[(kt + 1) & 1] = 0;
        if (kt + 1 < ntiles) {
            LOAD_K_TILE(kt + 1, stg ^ 1);
#if SOFTMAX
            LOAD_V_TILE(kt + 1, stg ^ 1);
#endif
        }
        mma_copy_commit();

        /* S = Q K^T (and S2), unless every key of the tile is above this warp's rows */
        float s[NB][4];
#if TWO_VIEWS
        float s2[NB][4];
#endif
        UNROLL for (int n = 0; n < NB; n++)
            UNROLL for (int e = 0; e < 4; e++) {
                s[n][e] = 0.0f;
#if TWO_VIEWS
                s2[n][e] = 0.0f;
#endif
            }
        const int warp_live = wrow0 <= warp_last && n0 <= offset + warp_last; /* warp-uniform */
        if (warp_live) {
            UNROLL for (int kk = 0; kk < KD; kk++)
                UNROLL for (int n2 = 0; n2 < NB / 2; n2++) {
                    frag_b b0, b1;
                    mma_load_b_nk(&b0, &b1, Kt + 16 * n2 * LDK + 16 * kk, LDK);
                    mma_acc(s[2 * n2], &qf[0][kk], &b0);
                    mma_acc(s[2 * n2 + 1], &qf[0][kk], &b1);
#if TWO_VIEWS
                    mma_load_b_nk(&b0, &b1, Kt + BN * LDK + 16 * n2 * LDK + 16 * kk, LDK);
                    mma_acc(s2[2 * n2], &qf[1][kk], &b0);
                    mma_acc(s2[2 * n2 + 1], &qf[1][kk], &b1);
#endif
                }
        }

        /* key j of the tile is visible to row r when j <= lim_r (causal) and j < kmax */
        const int lim_a = row_a < Tq ? (int)clamp(offset + row_a - n0, -1L, (long)BN) : -1;
        const int lim_b = row_b < Tq ? (int)clamp(offset + row_b - n0, -1L, (long)BN) : -1;
        const int kmax = (int)min((long)BN, Tk - n0);
#if KNORM
        __local const float *kn = kn_s + stg * NV * BN;
#endif
        int any = 0;
#if SOFTMAX
        float tmax_a = -INFINITY, tmax_b = -INFINITY;
#if KIND == 4
        float tmax2_a = -INFINITY, tmax2_b = -INFINITY;
#endif
#endif
#if WSCALE
        float wm_a = 0.0f, wm_b = 0.0f;
#endif
        UNROLL for (int n = 0; n < NB; n++)
            UNROLL for (int e = 0; e < 4; e++) {
                const int j = 8 * n + 2 * t + (e & 1);
                const int visible = j <= (e < 2 ? lim_a : lim_b) && j < kmax;
                float x = s[n][e] * (e < 2 ? sa : sb);
#if TWO_VIEWS
                float x2 = s2[n][e] * (e < 2 ? s2a : s2b);
#endif
#if KNORM
                if (kinv) x *= kn[j];
#if TWO_VIEWS
                if (k2inv) x2 *= kn[BN + j];
#endif
#endif
#if SOFTMAX
                x = visible ? x : -INFINITY;
                if (e < 2) tmax_a = fmax(tmax_a, x);
                else tmax_b = fmax(tmax_b, x);
                s[n][e] = x;
#if KIND == 4
                x2 = visible ? x2 : -INFINITY;
                if (e < 2) tmax2_a = fmax(tmax2_a, x2);
                else tmax2_b = fmax(tmax2_b, x2);
                s2[n][e] = x2;
#endif
#elif KIND == 1
                float w = (!visible || x <= 0.0f) ? 0.0f : x; /* NaN passes */
                nz1 += w != 0.0f;
                any |= w != 0.0f;
                s[n][e] = w;
#elif KIND == 2
                x -= (e < 2) ? tau_a : tau_b;
                float w = !visible ? 0.0f : isnan(x) ? x : rectify(x, power);
                nz1 += w != 0.0f;
                any |= w != 0.0f;
                s[n][e] = w;
#else /* tda */
                const float tau = (e < 2) ? tau_a : tau_b;
                x -= tau;
                x2 -= tau;
                float w1 = !visible ? 0.0f : isnan(x) ? x : rectify(x, power);
                float w2 = !visible ? 0.0f : isnan(x2) ? x2 : rectify(x2, power);
                float w = w1 - lc * w2;
                nz1 += w1 != 0.0f;
                nz2 += w2 != 0.0f;
                nzc += w != 0.0f;
                any |= w1 != 0.0f || w2 != 0.0f;
                s[n][e] = w;
#endif
#if WSCALE
                if (isfinite(s[n][e])) {
                    if (e < 2) wm_a = fmax(wm_a, fabs(s[n][e]));
                    else wm_b = fmax(wm_b, fabs(s[n][e]));
                }
#endif
            }
#if WSCALE
        {
            /* the rows' scales follow their largest weight so far (see WSCALE) */
            wm_a = mma_quad_max(wm_a), wm_b = mma_quad_max(wm_b);
            const int na = wm_a > 0.0f ? clamp(max(e_a, ilogb(wm_a)), -100, 127) : e_a;
            const int nb = wm_b > 0.0f ? clamp(max(e_b, ilogb(wm_b)), -100, 127) : e_b;
            const float ra = ldexp(1.0f, e_a - na), rb = ldexp(1.0f, e_b - nb);
            UNROLL for (int n = 0; n < NBV; n++) o[n][0] *= ra, o[n][1] *= ra, o[n][2] *= rb, o[n][3] *= rb;
            e_a = na, e_b = nb;
            const float ia = ldexp(1.0f, -max(e_a, -100)), ib = ldexp(1.0f, -max(e_b, -100));
            UNROLL for (int n = 0; n < NB; n++) s[n][0] *= ia, s[n][1] *= ia, s[n][2] *= ib, s[n][3] *= ib;
        }
#endif
#if SOFTMAX
        /* online softmax: new row maxima over the quad, rescale, exponentiate */
        {
            const float mx_a = mma_quad_max(tmax_a), mx_b = mma_quad_max(tmax_b);
            const float mn_a = fmax(m_a, mx_a), mn_b = fmax(m_b, mx_b);
            const float al_a = mn_a == -INFINITY ? 1.0f : native_exp2(m_a - mn_a);
            const float al_b = mn_b == -INFINITY ? 1.0f : native_exp2(m_b - mn_b);
            m_a = mn_a, m_b = mn_b;
            l_a *= al_a, l_b *= al_b;
            UNROLL for (int n = 0; n < NBV; n++) o[n][0] *= al_a, o[n][1] *= al_a, o[n][2] *= al_b, o[n][3] *= al_b;
            UNROLL for (int n = 0; n < NB; n++)
                UNROLL for (int e = 0; e < 4; e++) {
                    /* masked keys (score -inf) weigh 0; a NaN score stays NaN */
                    const float p = s[n][e] == -INFINITY ? 0.0f : native_exp2(s[n][e] - (e < 2 ? mn_a : mn_b));
                    if (e < 2) l_a += p;
                    else l_b += p;
                    s[n][e] = p;
                }
#if KIND == 4
            const float mx2_a = mma_quad_max(tmax2_a), mx2_b = mma_quad_max(tmax2_b);
            const float mn2_a = fmax(m2_a, mx2_a), mn2_b = fmax(m2_b, mx2_b);
            const float al2_a = mn2_a == -INFINITY ? 1.0f : native_exp2(m2_a - mn2_a);
            const float al2_b = mn2_b == -INFINITY ? 1.0f : native_exp2(m2_b - mn2_b);
            m2_a = mn2_a, m2_b = mn2_b;
            l2_a *= al2_a, l2_b *= al2_b;
            UNROLL for (int n = 0; n < NBV; n++)
                o2[n][0] *= al2_a, o2[n][1] *= al2_a, o2[n][2] *= al2_b, o2[n][3] *= al2_b;
            UNROLL for (int n = 0; n < NB; n++)
                UNROLL for (int e = 0; e < 4; e++) {
                    const float p = s2[n][e] == -INFINITY ? 0.0f : native_exp2(s2[n][e] - (e < 2 ? mn2_a : mn2_b));
                    if (e < 2) l2_a += p;
                    else l2_b += p;
                    s2[n][e] = p;
                }
#endif
        }
        const int warp_has_w = warp_live;
        vtiles++;
        __local const ushort *Vt = Vs + stg * BN * LDV;
#else
        /* the V tile only when some weight of the block survived */
        const int warp_has_w = mma_warp_any(any); /* reached by every warp: see mma.cl */
        if (warp_has_w && lane == 0) wg_any[kt & 1] = 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (wg_any[kt & 1]) {
            LOAD_V_TILE(kt, 0);
            vtiles++;
        }
        mma_copy_commit();
        MMA_COPY_WAIT(0); /* the V tile, and the K prefetch issued before it */
        barrier(CLK_LOCAL_MEM_FENCE);
        __local const ushort *Vt = Vs;
#endif

        /* O += W V: weights become A operands */
#if MMA_NATIVE
        __local ushort *Pw = 0;
#else
        __local ushort *Pw = Ps + warp * NW * 16 * MMA_SCRATCH_LD(BN);
#endif
        frag_a pa[KB];
        UNROLL for (int kk = 0; kk < KB; kk++) mma_stage_a(&pa[kk], s[2 * kk], s[2 * kk + 1], Pw, kk);
#if KIND == 4
        frag_a pa2[KB];
        UNROLL for (int kk = 0; kk < KB; kk++)
            mma_stage_a(&pa2[kk], s2[2 * kk], s2[2 * kk + 1], Pw + 16 * MMA_SCRATCH_LD(BN), kk);
#endif
        MMA_STAGE_SYNC();
        UNROLL for (int kk = 0; kk < KB; kk++) {
            mma_staged_a(&pa[kk], Pw, kk);
#if KIND == 4
            mma_staged_a(&pa2[kk], Pw + 16 * MMA_SCRATCH_LD(BN), kk);
#endif
        }
        if (warp_has_w) {
            UNROLL for (int kk = 0; kk < KB; kk++)
                UNROLL for (int n2 = 0; n2 < NBV / 2; n2++) {
                    frag_b b0, b1;
                    mma_load_b_kn(&b0, &b1, Vt + 16 * kk * LDV + 16 * n2, LDV);
                    mma_acc(o[2 * n2], &pa[kk], &b0);
                    mma_acc(o[2 * n2 + 1], &pa[kk], &b1);
#if KIND == 4
                    mma_acc(o2[2 * n2], &pa2[kk], &b0);
                    mma_acc(o2[2 * n2 + 1], &pa2[kk], &b1);
#endif
                }
        }
    }

    /* epilogue: normalise, combine, Norm, store */
#if WSCALE
    {
        const float ra = e_a > -150 ? ldexp(1.0f, e_a) : 0.0f, rb = e_b > -150 ? ldexp(1.0f, e_b) : 0.0f;
        UNROLL for (int n = 0; n < NBV; n++) o[n][0] *= ra, o[n][1] *= ra, o[n][2] *= rb, o[n][3] *= rb;
    }
#endif
#if SOFTMAX
    {
        const float la = mma_quad_sum(l_a), lb = mma_quad_sum(l_b);
        const float ia = la > 0.0f ? 1.0f / la : 0.0f, ib = lb > 0.0f ? 1.0f / lb : 0.0f;
#if KIND == 4
        const float l2a = mma_quad_sum(l2_a), l2b = mma_quad_sum(l2_b);
        const float i2a = l2a > 0.0f ? lambda / l2a : 0.0f, i2b = l2b > 0.0f ? lambda / l2b : 0.0f;
        UNROLL for (int n = 0; n < NBV; n++) {
            o[n][0] = o[n][0] * ia - o2[n][0] * i2a, o[n][1] = o[n][1] * ia - o2[n][1] * i2a;
            o[n][2] = o[n][2] * ib - o2[n][2] * i2b, o[n][3] = o[n][3] * ib - o2[n][3] * i2b;
        }
#else
        UNROLL for (int n = 0; n < NBV; n++) o[n][0] *= ia, o[n][1] *= ia, o[n][2] *= ib, o[n][3] *= ib;
#endif
    }
#endif
    {
        /* Norm rms over dv: the row's squares are spread over the quad (the padded columns
         * hold zeros).  Reached by every work-item, as the reductions require. */
        float ss_a = 0.0f, ss_b = 0.0f;
        UNROLL for (int n = 0; n < NBV; n++) ss_a += o[n][0] * o[n][0] + o[n][1] * o[n][1], ss_b += o[n][2] * o[n][2] + o[n][3] * o[n][3];
        ss_a = mma_quad_sum(ss_a), ss_b = mma_quad_sum(ss_b);
        const float ra = norm ? rsqrt(ss_a / (float)dv + norm_eps) : 1.0f;
        const float rb = norm ? rsqrt(ss_b / (float)dv + norm_eps) : 1.0f;
        const long ob_off = o_off + b * os.s0 + h * os.s1;
        UNROLL for (int n = 0; n < NBV; n++)
            UNROLL for (int e = 0; e < 4; e++) {
                const long row = e < 2 ? row_a : row_b;
                const int c = 8 * n + 2 * t + (e & 1);
                if (row >= Tq || c >= dv) continue;
                float y = o[n][e] * (e < 2 ? ra : rb) * out_scale;
                if (norm && gain) y *= LOAD(GDT, gain, c);
                STORE(ODT, out, ob_off + row * os.s2 + c * os.s3, y);
            }
    }
    if (want_stats) {
        /* rows >= Tq and masked keys never survive, so these count visible pairs only */
        barrier(CLK_LOCAL_MEM_FENCE);
        if (nz1) atomic_add(&counters[0], nz1);
        if (nz2) atomic_add(&counters[1], nz2);
        if (nzc) atomic_add(&counters[2], nzc);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid == 0) {
            const long wg = (long)bh * nqb + qb;
            stats[4 * wg + 0] = counters[0];
            stats[4 * wg + 1] = counters[1];
            stats[4 * wg + 2] = counters[2];
            stats[4 * wg + 3] = vtiles;
        }
    }
}
