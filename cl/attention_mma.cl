/* Tensor-core causal attention, prefill: the FlashAttention-2 work split on the m16n8k16
 * fragments of mma.cl.  A work-group owns BM = 16 * MT * NWARPS query rows of one (batch,
 * head); each warp owns 16 * MT of them (MT m-tiles sharing every K and V fragment) and keeps
 * their scores, weights and output in registers (C fragments).  Per key tile of BN keys:
 *   S = Q K^T        Q fragments loaded once, K tiles KSTAGES deep in local memory
 *   weights          the kind's rule on S (online softmax, ReLU, threshold rectifier, ...)
 *   O += W V         weights re-packed as A operands, V tile from local memory
 * Tiles above the block's diagonal are never visited, and only tiles that cross a warp's
 * diagonal or the end of the keys pay for masking.  Softmax kinds load V with K, KSTAGES
 * deep.  The sparse kinds do a tile's W V one iteration late: iteration kt forms tile kt's
 * weights, packed as A operands, and flags whether any warp has one; iteration kt+1 loads V
 * tile kt only where some weight of the block survived, and it lands while Q K^T of tile
 * kt+1 runs; then W V of tile kt (the last tile's after the loop).  A warp with no survivor
 * in a tile skips its W V products, a work-group with none the V tile and the wait for it.
 * SPLIT 1 is the decode form (a few query rows, Tq <= BM, against a long key range): work-group
 * dimension 2 is a split of the keys instead of a query block, and the kernel writes each
 * split's unnormalised sums (and softmax maxima and sums) for attention_decode_reduce
 * (attention_reduce.cl), which combines the splits, as the SIMT decode does.
 * Inputs are 16-bit (DT 1 bf16, 2 f16), or fp32 (DT 0) when the call's precision allows it:
 * rounded to bf16 as they are staged (MMA_IN 1), or staged as they are and rounded to tf32 as
 * fragments are formed (MMA_IN 3); products accumulate in f32.  The same argument list
 * as attention_fwd (attention.cl), so the host launches either; topk_theta (KIND 6, without VMC,
 * docs/spec.md section 1c) adds its tables after it and runs as softmax whose weights below a
 * row's threshold are zero, their sum kept for the SDC.  Post-softmax (TOPK_POST) takes two
 * launches: TOPK_ROW_STATS keeps every key and skips V, writing each row's maximum and sum
 * (rowstat); the call's own program then keeps the scores at or above m + log2 l + log2 theta,
 * with SDC exact, which gives each kept key its softmax weight. */

#ifndef BN
#define BN 64 /* keys per tile (multiple of 16) */
#endif
#ifndef PMODE
#define PMODE 2 /* the rectifier's power: 1 (x), 2 (x*x), 3..8 (that integer power, by products;
                   entmax at alpha 1 + 1/PMODE), 0 (any p at run time); a compile-time choice, so
                   the general power is never evaluated for the common ones */
#endif
#ifndef NWARPS
#define NWARPS 4 /* warps per work-group */
#endif
#ifndef MT
#define MT 1 /* 16-row m-tiles per warp: 2 reuses every K and V fragment for 32 rows */
#endif
#ifndef KSTAGES
#define KSTAGES 2 /* K tiles in flight: 2 loads tile kt+1 while kt is used, 3 also kt+2; softmax
                     kinds also 1: one K and one V buffer, FlashAttention-2's split waits (V kt
                     lands during Q K^T, K kt+1 during W V), which fits 128-key tiles in 48 KB */
#endif
#ifndef KINV
#define KINV 0 /* 1: scores are scaled by inverse query and key norms (normalised tra/tda) */
#endif
#ifndef SPLIT
#define SPLIT 0 /* 1: the decode form (see above); the kernel is attention_mma_split */
#endif
#ifndef VIEWS_TAIL
/* 1: view 2 of a two-view kind run one view a launch (attention.mma_views,
 * src/ops/attention_mma.c): the one-view kind whose epilogue combines its output with view 1's
 * (argument `first`) and applies the Norm, gain and output scale (VIEWS_ODT, VIEWS_CLAMP,
 * VIEWS_VEC from the host) */
#define VIEWS_TAIL 0
#endif

#define TWO_VIEWS (KIND == 3 || KIND == 4)
#define TOPK (KIND == 6)
#define ENTMAX (KIND == 5)
#ifndef ENTMAX_PASS
#define ENTMAX_PASS 3 /* entmax: 1 the rows' thresholds from the scores each admits (ENTMAX_BUF below),
                         2 a Newton step on the rows it left unsettled, 3 the weights */
#endif
#ifndef TOPK_POST
#define TOPK_POST 0 /* topk_theta: 1 thresholds on the softmax weights (two launches) */
#endif
#ifndef TOPK_ROW_STATS
#define TOPK_ROW_STATS 0 /* 1: the first of the post-softmax launches */
#endif
/* 0 thresholds on the scores; post-softmax 1 the rows' statistics, 2 the weights */
#define TOPK_PASS (TOPK_ROW_STATS ? 1 : TOPK_POST ? 2 : 0)
#define ROW_STATS (TOPK && TOPK_PASS == 1) /* no V: the rows' maxima and sums only */
#define SOFTMAX (KIND == 0 || KIND == 4 || TOPK)
/* softmax and diff_softmax leave the scores of unmasked tiles unscaled: the row maximum of
 * s * sr is sr times that of s (sr >= 0: a negative scale negates Q instead), and the scale
 * enters the exponent's fused multiply-add, one instruction per score fewer */
#define FOLD (KIND == 0 || KIND == 4)
#define SPARSE ((KIND >= 1 && KIND <= 3) || ENTMAX)
#if KSTAGES == 1 && !SOFTMAX
#error "KSTAGES 1 is for the softmax kinds (the sparse kinds load K at least one tile ahead)"
#endif
#define NV (TWO_VIEWS ? 2 : 1)
#define NO_V (ENTMAX && ENTMAX_PASS < 3) /* entmax's threshold passes read no V */
#define NT (32 * NWARPS)
#define BM (16 * MT * NWARPS)
#define NR (2 * MT) /* query rows per lane: g, g + 8 of each m-tile */
#define LDK (D + MMA_PAD)   /* padded rows (16 bytes): ldmatrix row addresses fall in distinct banks */
#define LDV (DV + MMA_PAD)
#define NB (BN / 8)   /* n-blocks of a score tile */
#define KD (D / 16)   /* k-steps of Q K^T */
#define KB (BN / 16)  /* k-steps of W V */
#define NBV (DV / 8)  /* n-blocks of the output */
#define NW (KIND == 4 ? 2 : 1) /* weight sets (diff_softmax keeps both) */
#undef UNROLL
#define UNROLL _Pragma("unroll") /* register arrays stay registers only when fully unrolled */
/* V stages: softmax kinds prefetch V with K; the sparse kinds load one V tile a tile late */
#define VSTAGES (SOFTMAX ? KSTAGES : 1)
#ifndef SM_FUSED
/* softmax kinds: 1 forms a tile's weights and runs its W V in one block (see the loop).  bf16,
 * T=8192 (bench/results/lmhead-softmax/): d=64 softmax 0.95x the time, diff_softmax 0.94x; not
 * d=128 softmax on its one-stage tile (1.05x: the V wait moves before the exponents there) nor
 * topk_theta (1.25x: its weights hold more registers) */
#define SM_FUSED (!TOPK && (KSTAGES > 1 || D < 128))
#endif
#ifndef STATS
#define STATS 1 /* count survivors for tdacl_attention_stats; 0 drops that per-weight work
                   (7 % of the time of the sparse kinds on the H200) */
#endif
#if STATS
#define COUNT(n, cond) n += (cond)
#else
#define COUNT(n, cond) (void)0
#endif
#define KNORM ((KIND == 2 || KIND == 3) && KINV) /* scores scaled by inverse key norms */
/* f16 weights of the sparse kinds have no fixed scale (x^p can underflow f16, a large ReLU
 * score overflow it): each row's weights are scaled by a power of two that puts the row's
 * largest at [1, 2), and the output is rescaled as that power moves, as online softmax does
 * with its maximum (exact: powers of two). */
#define WSCALE (SPARSE && MMA_IN == 2)
#ifndef RESCALE_SLACK
#define RESCALE_SLACK 8.0f /* softmax kinds: how far (log2 units) a row's maximum may pass its
                              reference before o and the sums are rescaled (weights < 256) */
#endif
/* tra and tda (16-bit weights without WSCALE): on a tile no mask touches, a score s only
 * feeds a running maximum of s kn - tcut (kn the key's inverse norm where normalised, tcut the
 * row's tau / (scale / |q|) less 2^-20 of its size), whose sign is that of the rectifier's
 * argument s (scale / |q|) kn - tau but for rounding, which the 2^-20 covers; only a warp
 * whose maximum is >= 0 (or NaN) forms that tile's weights from the kept scores, just before
 * packing them for W V.  At beta 1 almost no warp does, so a score costs one fma and one max.
 * A negative scale negates Q (exact) so that scale / |q| >= 0.  tda keeps one maximum over
 * both views' cuts (a weight w1 - lambda w2 is non-zero only where w1 or w2 is).  The host
 * sets LAZY 1 for beta >= 1 only: below, about every warp has weights in every tile and forms
 * them anyway (the lazy tda was 8-10 % slower at beta 0.5..0 on the H200, and a per-warp
 * switch back to forming them at once cost tra 4 % at beta 1).  Not rela, whose weights are
 * about half non-zero (10 % slower lazy). */
#ifndef LAZY
#define LAZY 0 /* 1: LAZY_W where the kind allows it (the host's choice, by beta) */
#endif
#define LAZY_W ((KIND == 2 || KIND == 3) && !WSCALE && LAZY)

/* LAZY_W's cut of a row: tau / (its score scale), less 2^-20 of its size for rounding */
inline float lazy_cut(float tau, float sr)
{
    const float c = tau / sr;
    return c - fabs(c) * 0x1p-20f;
}

/* r^y for r > 0 and a run-time y: natively one MUFU.LG2 and one MUFU.EX2 (relative error
 * about 3e-7 at entmax's powers, within its stopping rule's 1e-6; with pow, a long software
 * sequence, alpha 1.4 at T=8192 took 604 ms, 7.5 ms with this and the steps on f^(1/p) on an
 * H200), the portable body pow */
inline float rect_powr(float r, float y)
{
#if MMA_PTX
    return mma_exp2(y * mma_log2(r));
#else
    return pow(r, y);
#endif
}

/* r^n for a compile-time n <= 8, by products */
inline float rect_ipow(float r, int n)
{
    float y = r;
    UNROLL for (int i = 1; i < 8; i++)
        if (i < n) y *= r;
    return y;
}

/* max(r, 0)^(p - 1) for r >= 0 and p > 1: r^p = r^(p-1) r and its slope p r^(p-1) (entmax's
 * Newton step) from one power */
inline float rect_pm1(float r, float p)
{
#if PMODE == 2
    return r;
#elif PMODE == 1
    return r > 0.0f ? 1.0f : 0.0f;
#elif PMODE >= 3
    return rect_ipow(r, PMODE - 1);
#else
    return r > 0.0f ? rect_powr(r, p - 1.0f) : 0.0f;
#endif
}

/* entmax's Newton step: d/dr of r^p for r = max(x, 0) */
inline float rect_slope(float r, float p)
{
#if PMODE >= 3
    return (float)PMODE * rect_pm1(r, p);
#else
    return p * rect_pm1(r, p);
#endif
}

/* max(x, 0)^p, NaN passing through (mma_relu keeps it) */
inline float rectify(float x, float p)
{
    const float r = mma_relu(x);
#if PMODE == 2
    return r * r;
#elif PMODE == 1
    return r;
#elif PMODE >= 3
    return rect_ipow(r, PMODE);
#else
    return r > 0.0f ? rect_powr(r, p) : r;
#endif
}

/* entmax's threshold search in one pass (ENTMAX_PASS 1).  With x = (alpha - 1) z, the row's
 * threshold tau solves f(tau) = sum_j max(x_j - tau, 0)^p = 1, and depends only on the scores
 * above it.  Any subset of a row's scores has its root at or below tau (fewer terms, a smaller
 * f), and tau >= max - 1 (the maximum's term alone reaches 1 there).  So each lane keeps, in
 * its own slice of EL slots in local memory (what the device's leaves, at most 32), its scores of the row above the row's best lower
 * bound so far -- max(root of the scores kept, the lane's maximum so far - 1).  Once a slice
 * of the warp's rows passes EHW (a tile could then overflow it), every row of the warp takes
 * the root of its kept scores, its quad's lanes together, and drops those at or below it.
 * After the last tile the root of the kept scores is the row's tau: they hold every score
 * above tau.  A row whose slice overflowed (a score was not kept) stops keeping scores; it,
 * and a row whose steps ran out, leaves a lower bound and its "unsettled" flag: the Newton
 * launches (ENTMAX_PASS 2) go on from there.  Only at p = 2 (alpha 1.5) does the pass keep
 * scores (ENTMAX_KEEP): there the root of the kept scores is exact in a step or two.  At other
 * powers the supports are wide (alpha 1.25: 10-30 % of the keys on the bench's rows), the
 * slots overflow and pruning them would cost more than it saves, so the pass only finds the
 * rows' maxima and every row starts its Newton steps at max - 1 (so too where local memory
 * leaves fewer than BN / 4 + 4 slots a lane).  The host runs this pass on
 * its own tile (tdacl__entmax_pass_tile). */
#if ENTMAX && ENTMAX_PASS == 1
#define ENTMAX_BUF 1
#ifndef EL
#error "EL: the threshold pass's slots a lane (what local memory leaves, at most 32: the host's choice)"
#endif
#define ESL (4 * BM)      /* slices: row r's are 4 r .. 4 r + 3; slot i of slice s at i * ESL + s */
#define EHW (EL - BN / 4) /* a slice above this may overflow in the next tile (BN / 4 keys a lane) */
/* scores are kept at p = 2 only (see above), and where a slice holds a tile and 4 more */
#define ENTMAX_KEEP (PMODE == 2 && EHW >= 4)
#ifndef ENTMAX_PRUNE_STEPS
#define ENTMAX_PRUNE_STEPS 2 /* a lower bound is all a prune needs (2: 0.89x the pass time of 4 at alpha 1.5, T=8192, H200) */
#endif
#ifndef ENTMAX_FINAL_STEPS
#define ENTMAX_FINAL_STEPS 32
#endif
#else
#define ENTMAX_BUF 0
#endif

#if ENTMAX_BUF
/* slice sl of the kept scores: slot i at ebuf[i * ESL + sl]; this lane's of its row ri */
#define ESLICE(ri_) (4 * (16 * MT * warp + 16 * ((ri_) >> 1) + g + 8 * ((ri_)&1)) + t)
/* quad sums and minima: natively whole-warp shuffles (callers are warp-uniform), the portable
 * body's through local memory (every work-item reaches them) */
#if MMA_PTX
#define EXCHG ((__local float *)0)
#define EQ_SUM(x_, xc_) mma_quad_sum(x_)
#define EQ_MIN(x_, xc_) (-mma_quad_max(-(x_)))
#else
#define EXCHG mma_xchg
#define EQ_SUM(x_, xc_) mma_quad_sum_x((x_), (xc_))
#define EQ_MIN(x_, xc_) (-mma_quad_max_x(-(x_), (xc_)))
#endif

/* The root of f over the scores a row keeps, by Newton's method from t (f(t) >= 1: f is
 * convex and decreasing, so every step stays at or below the root); each lane of the row's
 * quad sums its own slice sl (n scores).  At p = 2, f is the quadratic of the scores above t
 * until t passes the next one: its root u is the answer once no kept score lies in (t, u].
 * *exact: the root was found (or f(t) came within ENTMAX_TOL of 1, or the steps stopped
 * moving).  live 0 (the portable body's warps with nothing to prune) runs the reductions and
 * changes nothing; natively the loop ends once every quad of the warp is done. */
inline float entmax_kept_root(__local const float *ebuf, int sl, int n, float t, float p, int steps, int live, int *exact,
                              __local float *xchg)
{
    int fin = !live;
    *exact = 0;
    for (int it = 0; it < steps; it++) {
        float c = 0.0f, f = 0.0f, fp = 0.0f, mn = INFINITY;
        for (int i = 0; i < n; i++) {
            const float x = ebuf[i * ESL + sl], r = x - t;
            if (r > 0.0f) c += 1.0f, f += rectify(r, p), fp += rect_slope(r, p), mn = fmin(mn, x);
        }
        c = EQ_SUM(c, xchg), f = EQ_SUM(f, xchg), fp = EQ_SUM(fp, xchg), mn = EQ_MIN(mn, xchg);
#if PMODE == 2
        if (!fin) {
            const float h = 0.5f * fp; /* sum of r: c u^2 - 2 h u + f = 1 at t + u */
            const float u = t + (h - sqrt(fmax(h * h - c * (f - 1.0f), 0.0f))) / c;
            if (c > 0.0f && u <= mn) t = u, fin = 1, *exact = 1;
        }
#endif
        if (!fin) {
            const float nt = fp > 0.0f ? t + (f - 1.0f) / fp : t;
            if (fabs(f - 1.0f) <= ENTMAX_TOL || nt == t) fin = 1, *exact = 1;
            else t = nt;
        }
#if MMA_PTX
        if (!mma_warp_any(!fin)) break;
#endif
    }
    return t;
}

/* drops the n scores of slice sl at or below t, in place; how many stay */
inline int entmax_prune_slice(__local float *ebuf, int sl, int n, float t)
{
    int w = 0;
    for (int i = 0; i < n; i++) {
        const float x = ebuf[i * ESL + sl];
        if (x > t) ebuf[w++ * ESL + sl] = x;
    }
    return w;
}
#endif

/* Rows [r0, r0 + nrows) of a [.., T, cols] view into local rows of ld elements, columns
 * 0..CPAD-1, zero beyond `rows` and `cols`.  Tiles of the storage type (16-bit, or fp32 for
 * tf32): aligned views move 16-byte chunks (cp.async on NVIDIA), others go element by
 * element.  fp32 storage computed in bf16 (MMA_IN 1) is rounded (nearest even) as it is
 * staged: two float4 loads per 8 elements on aligned views. */
#if DT == 0 && MMA_IN != 1 && MMA_IN != 3
#error "fp32 storage reaches the matrix units as bf16 or tf32 (MMA_IN 1 or 3)"
#endif
#if DT != 0 && MMA_TF32
#error "tf32 (MMA_IN 3) takes fp32 storage"
#endif
#define STAGE_AS_IS (DT != 0 || MMA_TF32) /* the tile holds the stored values */
#if MMA_TF32
#define TILE_F32(x) (x) /* a tile element as the f32 value stored (tf32 rounds only operands) */
#else
#define TILE_F32(x) mma_to_f32(x)
#endif
#define VEC (16 / (int)sizeof(mma_t))     /* elements per 16-byte chunk */
inline void load_tile(__local mma_t *dst, int ld, __global const void *src, long base, long st, long sd, long r0,
                      long rows, int cols, int CPAD, int nrows, int tid)
{
    const int chunks = CPAD / VEC;
#if STAGE_AS_IS && defined(ALIGNED16)
    if (r0 + nrows <= rows && cols == CPAD) {
        /* a whole tile: every chunk is 16 bytes, and a thread's chunks sit NT / chunks rows
         * apart in one column, so their addresses are one product and additions (CPAD / VEC
         * divides NT: both powers of two, CPAD <= 128).  The loop has a trip count known at
         * compile time (nrows is a constant at every call, and tid & (NT - 1) tells the
         * compiler r < step): unrolled, with no loop control or remainder code per tile. */
        const int tl = tid & (NT - 1), r = tl / chunks, c = (tl - r * chunks) * VEC, step = NT / chunks;
        __global const mma_t *from = (__global const mma_t *)src + base + (r0 + r) * st + c;
        __local mma_t *to = dst + r * ld + c;
        const long from_step = (long)step * st;
        UNROLL for (int i = 0; i < (nrows + step - 1) / step; i++)
            if (r + i * step < nrows) mma_copy16(to + i * step * ld, from + i * from_step, 16);
        return;
    }
#endif
    for (int idx = tid; idx < nrows * chunks; idx += NT) {
        const int r = idx / chunks, c = (idx - r * chunks) * VEC;
        const long row = r0 + r;
        __local mma_t *to = dst + r * ld + c;
#if !STAGE_AS_IS
        __global const float *from = (__global const float *)src + base + row * st;
#ifdef ALIGNED16
        if (row < rows && c + 8 <= cols) {
            const float4 a = vload4(0, from + c), b = vload4(1, from + c);
            to[0] = f32_to_bf16(a.s0), to[1] = f32_to_bf16(a.s1), to[2] = f32_to_bf16(a.s2), to[3] = f32_to_bf16(a.s3);
            to[4] = f32_to_bf16(b.s0), to[5] = f32_to_bf16(b.s1), to[6] = f32_to_bf16(b.s2), to[7] = f32_to_bf16(b.s3);
            continue;
        }
#endif
        for (int i = 0; i < 8; i++)
            to[i] = (row < rows && c + i < cols) ? f32_to_bf16(from[(long)(c + i) * sd]) : (ushort)0;
#elif defined(ALIGNED16)
        const int bytes = row < rows ? (int)sizeof(mma_t) * clamp(cols - c, 0, VEC) : 0;
        mma_copy16(to, (__global const mma_t *)src + base + (bytes ? row * st + c : 0), bytes);
#else
        __global const mma_t *from = (__global const mma_t *)src + base + row * st;
        for (int i = 0; i < VEC; i++) to[i] = (row < rows && c + i < cols) ? from[(long)(c + i) * sd] : (mma_t)0;
#endif
    }
}

/* The weight rule on one score tile, in place: s (and s2) become weights.  MASKED (a literal)
 * adds the causal and key-count mask, which only tiles crossing the warp's diagonal or the
 * end of the keys need.  Softmax kinds leave scaled scores and track the tile's row maxima;
 * tra and tda (LAZY_W) on unmasked tiles leave the scores as they are and keep a running
 * maximum of their cut; the other sparse kinds, and tra and tda on masked tiles, form the
 * weights at once and OR their bits into anyb (NaN and every nonzero weight set a bit). */
#define VISIBLE_0 1                              /* unmasked tiles: every key */
#define VISIBLE_1 (j <= lim[ri] && j < kmax)    /* masked: causal limit and key count */
#if TOPK /* an infinite or NaN visible score makes the row NaN (docs/spec.md section 1c) */
#define SCORE_BAD(MASKED) bad[ri] = (VISIBLE_##MASKED && !isfinite(x)) ? 1.0f : bad[ri];
#else
#define SCORE_BAD(MASKED)
#endif
#if FOLD
#define SCALED_0(x_, sr_) (x_)
#else
#define SCALED_0(x_, sr_) ((x_) * (sr_))
#endif
#define SCALED_1(x_, sr_) ((x_) * (sr_))
#if SOFTMAX
#define SCORE_ELEM(MASKED)                                                       \
    float x = SCALED_##MASKED(s[mt][n][e], sr[ri]);                              \
    SCORE_BAD(MASKED)                                                            \
    x = VISIBLE_##MASKED ? x : -INFINITY;                                        \
    tmax[ri] = fmax(tmax[ri], x);                                                \
    s[mt][n][e] = x;                                                             \
    SCORE_ELEM2(MASKED)
#if KIND == 4
#define SCORE_ELEM2(MASKED)                                                      \
    float x2 = SCALED_##MASKED(s2[mt][n][e], sr2[ri]);                           \
    x2 = VISIBLE_##MASKED ? x2 : -INFINITY;                                      \
    tmax2[ri] = fmax(tmax2[ri], x2);                                             \
    s2[mt][n][e] = x2;
#else
#define SCORE_ELEM2(MASKED)
#endif
#elif ENTMAX /* x = (alpha - 1) z: pass 1 its maximum, pass 2 the sums of Newton's step, pass 3 the weights */
#if ENTMAX_PASS == 1 /* the tile's row maxima; invisible scores -inf (never kept) */
#define SCORE_ELEM(MASKED)                                                       \
    {                                                                            \
        const float x = s[mt][n][e] * sr[ri];                                    \
        if (VISIBLE_##MASKED) etm[ri] = fmax(etm[ri], x), eb[ri] = fma(x, 0.0f, eb[ri]); \
        s[mt][n][e] = VISIBLE_##MASKED ? x : -INFINITY;                          \
    }
#elif ENTMAX_PASS == 2
#define SCORE_ELEM(MASKED)                                                       \
    {                                                                            \
        const float r = VISIBLE_##MASKED ? mma_relu(fma(s[mt][n][e], sr[ri], -tau[ri])) : 0.0f; \
        const float rq = rect_pm1(r, epow); /* r^(p-1) */                        \
        ea[ri] = fma(rq, r, ea[ri]);                                             \
        eb[ri] = fma(epow, rq, eb[ri]);                                          \
        s[mt][n][e] = 0.0f;                                                      \
    }
#else
#define SCORE_ELEM(MASKED)                                                       \
    float w = VISIBLE_##MASKED ? rectify(fma(s[mt][n][e], sr[ri], -tau[ri]), epow) : 0.0f; \
    COUNT(nz1, w != 0.0f);                                                       \
    anyb |= as_uint(w);                                                          \
    ea[ri] += w;                                                                 \
    s[mt][n][e] = w;
#endif
#else /* rela, tra, tda (EAGER_ELEM: the weights of a score, counted and flagged in anyb) */
#if KIND == 3 /* tda: both views through the rectifier, then w1 - lambda w2 */
#define EAGER_ELEM(MASKED)                                                       \
    float w1 = rectify(fma(s[mt][n][e], SR_J(sr, ri, 0), -tau[ri]), power);      \
    float w2 = rectify(fma(s2[mt][n][e], SR_J(sr2, ri, 1), -tau[ri]), power);      \
    if (!VISIBLE_##MASKED) w1 = 0.0f, w2 = 0.0f;                                 \
    const float w = fma(-lc, w2, w1);                                            \
    COUNT(nz1, w1 != 0.0f);                                                      \
    COUNT(nz2, w2 != 0.0f);                                                      \
    COUNT(nzc, w != 0.0f);                                                       \
    anyb |= as_uint(w1) | as_uint(w2);                                           \
    s[mt][n][e] = w;
#else /* rela: ReLU of the scaled score; tra: the rectifier past the row's threshold */
#if KIND == 1
#define WEIGHT_OF(x_) mma_relu(x_)
#else
#define WEIGHT_OF(x_) rectify(x_, power)
#endif
#define EAGER_ELEM(MASKED)                                                       \
    float w = WEIGHT_OF(fma(s[mt][n][e], SR_J(sr, ri, 0), -tau[ri]));            \
    if (!VISIBLE_##MASKED) w = 0.0f;                                             \
    COUNT(nz1, w != 0.0f);                                                       \
    anyb |= as_uint(w);                                                          \
    s[mt][n][e] = w;
#endif
#if LAZY_W
/* unmasked tiles: only the running maximum of s kn - tcut (LAZY_W), the scores kept; masked
 * tiles (the diagonal, the end of the keys) form their weights at once */
#define SCORE_ELEM(MASKED) LAZY_ELEM_##MASKED
#if KIND == 3
#define LAZY_ELEM_0                                                                                   \
    xmax[e] = mma_max_nan(xmax[e], mma_max_nan(SCORE_CUT(s[mt][n][e], tcut, ri, 0), SCORE_CUT(s2[mt][n][e], tcut2, ri, 1)));
#else
#define LAZY_ELEM_0 xmax[e] = mma_max_nan(xmax[e], SCORE_CUT(s[mt][n][e], tcut, ri, 0));
#endif
#define LAZY_ELEM_1 EAGER_ELEM(1)
#else
#define SCORE_ELEM(MASKED) EAGER_ELEM(MASKED)
#endif
#endif
/* the inverse norm of key j = 8 n + 2 t + (e & 1) of view vw_, from the registers the loop
 * fills before Q K^T (knr; n and e are the element loops' variables) */
#define KN_OF(vw_) ((e & 1) ? knr[vw_][n].y : knr[vw_][n].x)
#if KNORM
#define SCORE_CUT(x_, cut_, ri_, vw_) fma((x_), KN_OF(vw_), -(cut_)[ri_])
#else
#define SCORE_CUT(x_, cut_, ri_, vw_) ((x_) - (cut_)[ri_])
#endif
#if KNORM
#define SR_J(sr_, ri_, vw_) ((sr_)[ri_] * KN_OF(vw_))
#else
#define SR_J(sr_, ri_, vw_) ((sr_)[ri_])
#endif
/* ELEM_ on every score of the tile: element e of n-block n of m-tile mt, row ri, key j */
#define SCORE_TILE_AS(ELEM_)                                                     \
    UNROLL for (int mt = 0; mt < MT; mt++)                                       \
        UNROLL for (int n = 0; n < NB; n++)                                      \
            UNROLL for (int e = 0; e < 4; e++) {                                 \
                const int ri = 2 * mt + (e >> 1), j = 8 * n + 2 * t + (e & 1);   \
                ELEM_                                                            \
            }
#define SCORE_TILE(MASKED) SCORE_TILE_AS(SCORE_ELEM(MASKED))
#if LAZY_W /* an unmasked tile's weights from its kept scores, where its warp has one */
#define TILE_WEIGHTS SCORE_TILE_AS(EAGER_ELEM(0))
#else
#define TILE_WEIGHTS
#endif

#if SPLIT
#if TQP != BM
#error "the split form writes TQP = BM rows of partials"
#endif
#define MMA_KERNEL attention_mma_split
#define SPLIT_PARAMS , __global float *opart, __global float *mlpart, long split_len
#else
#define MMA_KERNEL attention_mma_fwd
#if ENTMAX /* temperature terms [H][3] (or NULL: the scalars), alpha - 1, 1 / (alpha - 1), the rows' thresholds */
#define SPLIT_PARAMS , __global const float *temps, float am1, float epow, float t_delta, float t_beta, float t_gamma, \
    __global float *taubuf
#elif TOPK /* thresholds [H][nthr], the offline SDC table (or NULL), the SDC mode and gamma */
#define SPLIT_PARAMS , __global const float *thresholds, long nthr, __global const float *log_mass, int sdc, \
    float sdc_gamma, __global float2 *rowstat
#elif VIEWS_TAIL /* view 1's normalised output, f32 [B * H][Tq][dv] */
#define SPLIT_PARAMS , __global const float *first
#else
#define SPLIT_PARAMS
#endif
#endif
/* The epilogue's last steps for lane row ri (m-tile mt, elements e0, e0 + 1 of o): the Norm
 * (rms over dv: the row's squares are spread over the quad, the padded columns hold zeros), its
 * gain and the output scale, stored as dtype odt_.  Reached by every work-item, as the quad's
 * reductions require. */
#define NORM_STORE(ri_, odt_)                                                                          \
    do {                                                                                               \
        float ss_ = 0.0f;                                                                              \
        UNROLL for (int n_ = 0; n_ < NBV; n_++) ss_ += o[mt][n_][e0] * o[mt][n_][e0] + o[mt][n_][e0 + 1] * o[mt][n_][e0 + 1]; \
        ss_ = mma_quad_sum(ss_);                                                                       \
        const float rn_ = norm ? rsqrt(ss_ / (float)dv + norm_eps) : 1.0f;                             \
        if (row[ri_] < Tq) {                                                                           \
            UNROLL for (int n_ = 0; n_ < NBV; n_++)                                                    \
                UNROLL for (int e_ = e0; e_ < e0 + 2; e_++) {                                          \
                    const int c_ = 8 * n_ + 2 * t + (e_ & 1);                                          \
                    if (c_ >= dv) continue;                                                            \
                    float y_ = o[mt][n_][e_] * rn_ * out_scale;                                        \
                    if (norm && gain) y_ *= LOAD(GDT, gain, c_);                                       \
                    STORE(odt_, out, ob_off + row[ri_] * os.s2 + c_ * os.s3, y_);                      \
                }                                                                                      \
        }                                                                                              \
    } while (0)
#if VIEWS_TAIL
/* view 1's rows a round of the combine: as many as the V region holds at DV + 4 floats a row, a
 * multiple of 8 (sizeof: a constant expression the preprocessor cannot evaluate); at least 8, as
 * the region holds BN >= 16 rows of DV + 8 16-bit values */
#define VT_ROWS_FIT ((int)(sizeof(Vs) / ((DV + 4) * sizeof(float))) / 8 * 8)
#define VT_ROWS (VT_ROWS_FIT < BM ? VT_ROWS_FIT : BM)
#endif

__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) TDACL_SUBGROUP_ATTR void MMA_KERNEL(
    PREFILL_KERNEL_ARGS SPLIT_PARAMS)
{
#if MMA_PTX
    /* Q is staged once through the K region, then lives in registers */
    __local mma_t Ks[(KSTAGES * NV * BN > NV * BM ? KSTAGES * NV * BN : NV * BM) * LDK] __attribute__((aligned(16)));
    __local mma_t *Qs = Ks;
#else
    __local mma_t Ks[KSTAGES * NV * BN * LDK] __attribute__((aligned(16)));
    __local mma_t Qs[NV * BM * LDK] __attribute__((aligned(16))); /* A fragments refer to it */
    /* weight fragments; the sparse kinds keep two tiles' (one ahead) */
    __local mma_t Ps[(SOFTMAX ? 1 : 2) * NWARPS * NW * MT * 16 * MMA_SCRATCH_LD(BN)];
    __local float mma_xchg[NT];
#endif
    __local mma_t Vs[NO_V ? 8 : VSTAGES * BN * LDV] __attribute__((aligned(16)));
#if ENTMAX_BUF
    __local float ebuf[EL > 0 ? EL * ESL : 1]; /* the rows' kept scores (see ENTMAX_BUF), a slice a lane */
#endif
#if KIND == 2 || KIND == 3
    __local float kn_s[KSTAGES * NV * BN] __attribute__((aligned(16))); /* inverse key norms per K stage */
#endif
    __local int wg_any[4]; /* sparse kinds: tile kt's survivor flag in wg_any[kt & 3] */
    __local uint counters[4];

    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    ATTENTION_HEAD(H, lambdas, lambda);
#if SPLIT
    const long m0 = 0; /* every query row; the keys of split get_group_id(2) */
    const int split = get_group_id(2), nsplit = get_num_groups(2);
#else
    ATTENTION_QUERY_BLOCK(BM);
#endif
#if ENTMAX && ENTMAX_PASS < 3
    /* each row's "threshold unsettled" flag, after the thresholds in taubuf: pass 1 sets it
     * where its root is a lower bound only; a Newton step clears it once the row's sum_j r_j^p
     * is within ENTMAX_TOL of 1 (or its tau stopped moving).  A Newton launch returns at once
     * from a work-group whose rows are all settled. */
    __global uint *unsettled = (__global uint *)(taubuf + (long)get_num_groups(1) * Tq) + (long)bh * Tq;
#if ENTMAX_PASS == 2
    if (tid == 0) wg_any[0] = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < BM && m0 + tid < Tq && unsettled[m0 + tid]) atomic_or(&wg_any[0], 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!wg_any[0]) return; /* the same value for the whole work-group */
    barrier(CLK_LOCAL_MEM_FENCE); /* read before the loop's flags reuse it */
#endif
#endif
    const long wrow0 = m0 + 16 * MT * warp; /* this warp's first query row */
    /* this lane's rows: ri = 2 mt + hb is row g + 8 hb of m-tile mt; C element e of an
     * m-tile belongs to hb = e / 2 */
    long row[NR];
    UNROLL for (int ri = 0; ri < NR; ri++) row[ri] = wrow0 + 16 * (ri >> 1) + g + 8 * (ri & 1);

    __global const void *qp = q, *kp = k;
    __global const void *vp = v;
    const long qb_off = q_off + b * qs.s0 + h * qs.s1, kb_off = k_off + b * ks.s0 + h * ks.s1;
    const long vb_off = v_off + b * vs.s0 + h * vs.s1;
#if TWO_VIEWS
    __global const void *q2p = q2, *k2p = k2;
    const long q2b_off = q2_off + b * q2s.s0 + h * q2s.s1, k2b_off = k2_off + b * k2s.s0 + h * k2s.s1;
#endif
    if (tid < 4) counters[tid] = 0;
    if (tid < 4) wg_any[tid] = 0;

    /* keys visible to some row of this block */
    const long last_row = min(m0 + BM, Tq) - 1;
    const long kend = min(Tk, offset + last_row + 1);
    /* key tiles [kt_begin, kt_end): all of them, or the split's (split_len is a multiple of BN) */
#if SPLIT
    const long s0 = (long)split * split_len, s1 = min(s0 + split_len, kend);
    const int kt_begin = (int)(s0 / BN), kt_end = (int)((s1 + BN - 1) / BN);
#else
    const int kt_begin = 0, kt_end = (int)((kend + BN - 1) / BN);
#endif

/* K tile `tile_` (and its inverse norms) into stage `stg_`; V tile into V stage `vst_`.  The
 * split form computes the key norms from the tile itself (below): a decode reads each key
 * once, and a separate pass over the keys would read them twice. */
#if KNORM && !SPLIT
#define LOAD_KN(n0_, stg_, vw_, inv_)                                                                       \
    for (int i_ = tid; i_ < BN; i_ += NT)                                                                  \
        mma_copy4(&kn_s[((stg_) * NV + (vw_)) * BN + i_], (inv_) + (long)bh * Tk + min((n0_) + i_, Tk - 1),   \
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
        __local mma_t *Kd_ = Ks + (stg_) * NV * BN * LDK;                                  \
        load_tile(Kd_, LDK, kp, kb_off, ks.s2, ks.s3, n0_, Tk, d, D, BN, tid);              \
        LOAD_KN(n0_, stg_, 0, kinv);                                                        \
        LOAD_K2(n0_, Kd_, stg_);                                                            \
    } while (0)
#if ROW_STATS || NO_V
#define LOAD_V_TILE(tile_, vst_) ((void)0)
#else
#define LOAD_V_TILE(tile_, vst_) \
    load_tile(Vs + (vst_) * BN * LDV, LDV, vp, vb_off, vs.s2, vs.s3, (long)(tile_) * BN, Tk, dv, DV, BN, tid)
#endif
/* O += W V of V tile Vt_: each V fragment serves all MT m-tiles */
#if KIND == 4
#define WV_ACC2(n2_, mt_, kk_) mma_acc(o2[mt_][2 * (n2_)], &pa2[mt_][kk_], &b0), mma_acc(o2[mt_][2 * (n2_) + 1], &pa2[mt_][kk_], &b1)
#else
#define WV_ACC2(n2_, mt_, kk_) (void)0
#endif
#if NO_V
#define WV_TILE(Vt_)
#else
#define WV_TILE(Vt_)                                                                                        \
    UNROLL for (int kk = 0; kk < KB; kk++)                                                                  \
        UNROLL for (int n2 = 0; n2 < NBV / 2; n2++) {                                                       \
            frag_b b0, b1;                                                                                  \
            mma_load_b_kn_w(&b0, &b1, (Vt_) + 16 * kk * LDV + 16 * n2, LDV);                               \
            UNROLL for (int mt = 0; mt < MT; mt++) {                                                        \
                mma_acc(o[mt][2 * n2], &pa[mt][kk], &b0);                                                   \
                mma_acc(o[mt][2 * n2 + 1], &pa[mt][kk], &b1);                                               \
                WV_ACC2(n2, mt, kk);                                                                        \
            }                                                                                               \
        }
#endif
/* the next stage index, without a modulo */
#define NEXT_STAGE(s_, n_) ((s_) + 1 == (n_) ? 0 : (s_) + 1)

    /* Q fragments */
    load_tile(Qs, LDK, qp, qb_off, qs.s2, qs.s3, m0, Tq, d, D, BM, tid);
#if TWO_VIEWS
    load_tile(Qs + BM * LDK, LDK, q2p, q2b_off, q2s.s2, q2s.s3, m0, Tq, d, D, BM, tid);
#endif
    mma_copy_commit();
    MMA_COPY_WAIT(0);
    barrier(CLK_LOCAL_MEM_FENCE);
#if FOLD || LAZY_W
    if (scale < 0.0f) { /* exact: a sign flip of every staged element */
        for (int i = tid; i < NV * BM * LDK; i += NT) Qs[i] = mma_neg(Qs[i]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    frag_a qf[MT][NV][KD];
    UNROLL for (int mt = 0; mt < MT; mt++)
        UNROLL for (int vw = 0; vw < NV; vw++)
            UNROLL for (int kk = 0; kk < KD; kk++)
                mma_load_a(&qf[mt][vw][kk], Qs + vw * BM * LDK + (16 * MT * warp + 16 * mt) * LDK + 16 * kk, LDK);
#if MMA_PTX
    barrier(CLK_LOCAL_MEM_FENCE); /* Q read out of the K region before the first K tile lands */
#endif

    /* Copy groups, oldest first.  Softmax kinds: one group per tile holding K and V, tiles
     * 0..KSTAGES-2 issued here, tile kt + KSTAGES - 1 in iteration kt.  Sparse kinds:
     * iteration kt commits [V kt-1] (empty where no weight survived) and [K kt+KSTAGES-1]; the
     * prologue's groups make the pattern start at kt = kt_begin, so that each wait below
     * names how many younger groups may stay in flight. */
#if SOFTMAX && KSTAGES == 1
    if (kt_begin < kt_end) LOAD_K_TILE(kt_begin, 0);
    mma_copy_commit();
#elif SOFTMAX
    UNROLL for (int i = 0; i < KSTAGES - 1; i++) {
        if (kt_begin + i < kt_end) {
            LOAD_K_TILE(kt_begin + i, i);
            LOAD_V_TILE(kt_begin + i, i);
        }
        mma_copy_commit();
    }
#else
    UNROLL for (int i = 0; i < KSTAGES - 1; i++) {
        mma_copy_commit(); /* stands for a V tile */
        if (kt_begin + i < kt_end) LOAD_K_TILE(kt_begin + i, i);
        mma_copy_commit();
    }
#endif

    /* per-row state */
#if FOLD
    const float sscale = fabs(scale) * 1.44269504088896341f; /* Q carries the sign */
#elif SOFTMAX
    const float sscale = scale * 1.44269504088896341f; /* scores in log2 units */
#elif LAZY_W
    const float sscale = fabs(scale); /* Q carries the sign */
#else
    const float sscale = scale;
#endif
    float sr[NR]; /* the score scale with each row's inverse query norm folded in */
#if TWO_VIEWS
    float sr2[NR];
#endif
#if SPARSE
    float tau[NR]; /* each row's threshold: 0 for rela */
#endif
#if ENTMAX
    float ea[NR], eb[NR]; /* pass 1: maximum, NaN once a score was not finite; 2: sum of r^p, of its slope; 3: sum of weights */
#endif
#if ENTMAX_BUF
    /* this lane's slice of each row: scores kept, the row's lower bound on tau, whether the
     * row is left to the Newton launches (a score was not kept; every row where the pass keeps
     * none, ENTMAX_KEEP 0) */
    int ecn[NR], eovr[NR];
    float elbr[NR];
    UNROLL for (int ri = 0; ri < NR; ri++) ecn[ri] = 0, eovr[ri] = !ENTMAX_KEEP, elbr[ri] = -INFINITY;
#endif
#if SOFTMAX
    float mrow[NR], lrow[NR];
#endif
#if TOPK
    /* each row's threshold in the scores' log2 units, the dropped keys' sum of weights, the
     * kept keys' count and whether a visible score was not finite */
    float th[NR], edrop[NR], kc[NR], bad[NR];
#endif
#if KIND == 4
    float mrow2[NR], lrow2[NR];
#endif
#if WSCALE
    int erow[NR]; /* log2 of each row's weight scale; -150: no weight yet */
    float rsc[NR]; /* the rescale of o owed once the previous tile's W V is in */
#endif
    UNROLL for (int ri = 0; ri < NR; ri++) {
        const long r = row[ri];
        sr[ri] = sscale * ((KNORM && r < Tq) ? qinv[(long)bh * Tq + r] : 1.0f);
#if TWO_VIEWS
        sr2[ri] = sscale * ((KNORM && r < Tq) ? q2inv[(long)bh * Tq + r] : 1.0f);
#endif
#if KIND == 2 || KIND == 3
        tau[ri] = tau_of(offset + r, beta, kappa, d);
#elif KIND == 1
        tau[ri] = 0.0f;
#elif ENTMAX
        {
            /* the scores times alpha - 1 and the row's inverse temperature delta + beta (ln n)^gamma */
            const long nvis = min(offset + r + 1, Tk);
            const float td = temps ? temps[3 * h] : t_delta, tb = temps ? temps[3 * h + 1] : t_beta,
                        tg = temps ? temps[3 * h + 2] : t_gamma;
            sr[ri] *= am1 * (td + (nvis > 1 ? tb * pow(log((float)nvis), tg) : 0.0f));
            tau[ri] = ENTMAX_PASS > 1 && r < Tq ? taubuf[(long)bh * Tq + r] : 0.0f;
            ea[ri] = ENTMAX_PASS == 1 ? -INFINITY : 0.0f, eb[ri] = 0.0f;
        }
#endif
#if SOFTMAX
        mrow[ri] = -INFINITY, lrow[ri] = 0.0f;
#endif
#if TOPK
        {
            const long nvis = min(offset + r + 1, Tk);
            const float theta = r < Tq ? thresholds[h * nthr + min(max(nvis - 1, 0L), nthr - 1)] : INFINITY;
#if TOPK_PASS == 1
            th[ri] = -INFINITY;
#elif TOPK_PASS == 2 /* a weight e^(s - m) / z >= theta: the score at or above m + ln z + ln theta */
            const float2 rs = r < Tq ? rowstat[(long)bh * Tq + r] : (float2)(INFINITY, 1.0f);
            th[ri] = theta > 0.0f ? rs.x + log2(rs.y) + log2(theta) : -INFINITY;
#else
            th[ri] = theta * 1.44269504088896341f;
#endif
            edrop[ri] = 0.0f, kc[ri] = 0.0f, bad[ri] = 0.0f;
        }
#endif
#if KIND == 4
        mrow2[ri] = -INFINITY, lrow2[ri] = 0.0f;
#endif
#if WSCALE
        erow[ri] = -150;
#endif
    }
#if KIND == 3
    const float lc = clamp(lambda, 0.0f, 1.0f);
#endif
#if LAZY_W /* see LAZY_W; tau / 0 (a zero scale) gives an infinite or NaN cut, never a missed weight */
    float tcut[NR];
#if TWO_VIEWS
    float tcut2[NR];
#endif
    UNROLL for (int ri = 0; ri < NR; ri++) {
        tcut[ri] = lazy_cut(tau[ri], sr[ri]);
#if TWO_VIEWS
        tcut2[ri] = lazy_cut(tau[ri], sr2[ri]);
#endif
    }
#endif
    float o[MT][NBV][4];
#if KIND == 4
    float o2[MT][NBV][4];
#endif
    UNROLL for (int mt = 0; mt < MT; mt++)
        UNROLL for (int n = 0; n < NBV; n++)
            UNROLL for (int e = 0; e < 4; e++) {
                o[mt][n][e] = 0.0f;
#if KIND == 4
                o2[mt][n][e] = 0.0f;
#endif
            }
    /* for the masks, in 32 bits (positions stay below 2^31): the warp's first row position
     * and how many of its rows exist */
    const int wpos = (int)min(offset + wrow0, (long)INT_MAX - 16 * MT - BN);
    const int wrows = (int)clamp(Tq - wrow0, 0L, (long)(16 * MT));
    uint nz1 = 0, nz2 = 0, nzc = 0, vtiles = 0;
    const long warp_last = min(wrow0 + 16 * MT - 1, Tq - 1); /* the warp's last real row */
    /* the rows of the warps that share this warp's matrix instructions (mma.cl): they skip
     * a tile together, so a warp may compute a tile wholly above its own rows (its mask
     * zeroes those weights) */
    const int gw0 = warp - warp % MMA_GROUP_WARPS, gw1 = min(gw0 + MMA_GROUP_WARPS, NWARPS) - 1;
    const long group_row0 = m0 + 16 * MT * gw0, group_last = min(m0 + 16 * MT * (gw1 + 1) - 1, Tq - 1);
#if MMA_PTX
    __local mma_t *Pw = 0;
#endif
#if SPARSE
    frag_a pa[MT][KB]; /* the previous tile's weights as A operands */
    int warp_had_w = 0;
#endif
    int kst = 0; /* K stage of tile kt */

    /* the sparse kinds do the last tile's W V after the loop (WV_TILE) */
    for (int kt = kt_begin; kt < kt_end; kt++) {
        const long n0 = (long)kt * BN;
#if SOFTMAX && KSTAGES == 1
        MMA_COPY_WAIT(0); /* K tile kt landed (the only group in flight) */
#elif SOFTMAX
        MMA_COPY_WAIT(KSTAGES - 2); /* tile kt's K and V landed */
#else
        MMA_COPY_WAIT(2 * (KSTAGES - 2)); /* tile kt's K landed; [V kt-2, K kt+1] may be in flight */
#endif
        barrier(CLK_LOCAL_MEM_FENCE); /* every stage read in iteration kt-1 is free again */
        __local mma_t *Kt = Ks + kst * NV * BN * LDK;
#if ENTMAX_BUF
        /* once a slice of the warp's rows passes EHW, every row of the warp drops its kept
         * scores at or below their root (the warp pays once for any of them) */
        {
            int need = 0;
            UNROLL for (int ri = 0; ri < NR; ri++) need |= ecn[ri] > EHW && !eovr[ri];
#if MMA_PTX
            if (mma_warp_any(need)) {
#define ENEED 1
#else
            need = mma_warp_any(need); /* reached by every work-item; so is the root's every step */
            {
#define ENEED need
#endif
                UNROLL for (int ri = 0; ri < NR; ri++) {
                    const float mr = mma_quad_max(ea[ri]);
                    int ex;
                    /* a row that overflowed is left to the Newton launches: no more pruning, and
                     * none of its lanes keeps more */
                    const int over = mma_quad_max(eovr[ri] ? 1.0f : 0.0f) != 0.0f, live = ENEED && !over;
                    eovr[ri] = over;
                    const float r = entmax_kept_root(ebuf, ESLICE(ri), ecn[ri], fmax(elbr[ri], mr - 1.0f), epow,
                                                     ENTMAX_PRUNE_STEPS, live, &ex, EXCHG);
                    if (live) {
                        ecn[ri] = entmax_prune_slice(ebuf, ESLICE(ri), ecn[ri], r);
                        elbr[ri] = r;
                    }
                }
#undef ENEED
            }
        }
#endif
#if KNORM && SPLIT
        { /* 1 / max(|k|, 1e-12) of the tile's keys (rows past Tk are zero) */
            for (int i = tid; i < NV * BN; i += NT) {
                __local const mma_t *kr = Kt + i * LDK;
                float ss = 0.0f;
                /* lane i starts 2i elements in: the lanes' rows then fall in distinct banks */
                for (int c = 0; c < D; c++) {
                    const float x = TILE_F32(kr[(c + 2 * tid) % D]);
                    ss = fma(x, x, ss);
                }
                kn_s[kst * NV * BN + i] = 1.0f / fmax(sqrt(ss), 1e-12f);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
#endif
#if SOFTMAX && KSTAGES == 1
        LOAD_V_TILE(kt, 0); /* lands while Q K^T and the weights run */
        mma_copy_commit();
#elif SOFTMAX
        {
            const int ahead = kt + KSTAGES - 1;
            const int ast = kst == 0 ? KSTAGES - 1 : kst - 1; /* the stage tile kt-1 used */
            if (ahead < kt_end) {
                LOAD_K_TILE(ahead, ast);
                LOAD_V_TILE(ahead, ast);
            }
            mma_copy_commit();
        }
#else
        /* V tile kt-1 only where some weight of the block survived (flags published by the
         * barrier above); K runs KSTAGES - 1 tiles ahead, into the stage tile kt-1 used */
        const int wv = wg_any[(kt - 1) & 3]; /* work-group uniform */
        if (tid == 0) wg_any[(kt + 1) & 3] = 0;
        if (wv) {
            LOAD_V_TILE(kt - 1, 0);
            vtiles++;
        }
        mma_copy_commit();
        if (kt + KSTAGES - 1 < kt_end) LOAD_K_TILE(kt + KSTAGES - 1, kst == 0 ? KSTAGES - 1 : kst - 1);
        mma_copy_commit();
#endif
#if KNORM
        /* the inverse key norms of this lane's score columns (8 n + 2 t and the next), read
         * before Q K^T so that the loads' latency hides behind it */
        float2 knr[NV][NB];
        UNROLL for (int vw = 0; vw < NV; vw++)
            UNROLL for (int n = 0; n < NB; n++) knr[vw][n] = vload2(0, kn_s + (kst * NV + vw) * BN + 8 * n + 2 * t);
#endif

        /* S = Q K^T (and S2); each K fragment serves all MT m-tiles.  Every warp computes it,
         * also one whose rows all lie above the tile (not warp_live: its mask then zeroes the
         * weights): a branch around it made the compiler zero the scores on every tile.  The
         * first k-step writes the scores (mma_mul), so nothing zeroes them. */
        float s[MT][NB][4];
#if TWO_VIEWS
        float s2[MT][NB][4];
#endif
        const int warp_live = group_row0 <= group_last && n0 <= offset + group_last; /* group-uniform */
        {
#define QK_STEP(c_, a_, b_) (kk == 0 ? mma_mul(c_, a_, b_) : mma_acc(c_, a_, b_))
            UNROLL for (int kk = 0; kk < KD; kk++)
                UNROLL for (int n2 = 0; n2 < NB / 2; n2++) {
                    frag_b b0, b1;
                    mma_load_b_nk(&b0, &b1, Kt + 16 * n2 * LDK + 16 * kk, LDK);
                    UNROLL for (int mt = 0; mt < MT; mt++) {
                        QK_STEP(s[mt][2 * n2], &qf[mt][0][kk], &b0);
                        QK_STEP(s[mt][2 * n2 + 1], &qf[mt][0][kk], &b1);
                    }
#if TWO_VIEWS
                    mma_load_b_nk(&b0, &b1, Kt + BN * LDK + 16 * n2 * LDK + 16 * kk, LDK);
                    UNROLL for (int mt = 0; mt < MT; mt++) {
                        QK_STEP(s2[mt][2 * n2], &qf[mt][1][kk], &b0);
                        QK_STEP(s2[mt][2 * n2 + 1], &qf[mt][1][kk], &b1);
                    }
#endif
                }
#undef QK_STEP
        }

        /* key j of the tile is visible to row r when j <= lim[r] (causal) and j < kmax; a
         * tile wholly visible to every row of the warp skips the mask (warp-uniform) */
#if SPLIT /* rows past Tq only fill partials nobody reads: no mask for them */
        const int masked = !(n0 + BN - 1 <= offset + wrow0 && n0 + BN <= Tk); /* warp-uniform */
#else
        const int masked = !(wrow0 + 16 * MT <= Tq && n0 + BN - 1 <= offset + wrow0 && n0 + BN <= Tk); /* warp-uniform */
#endif
#if SOFTMAX
        float tmax[NR];
        UNROLL for (int ri = 0; ri < NR; ri++) tmax[ri] = -INFINITY;
#if KIND == 4
        float tmax2[NR];
        UNROLL for (int ri = 0; ri < NR; ri++) tmax2[ri] = -INFINITY;
#endif
#else
        uint anyb = 0;
#if ENTMAX_BUF
        float etm[NR]; /* the tile's row maxima (this lane's scores) */
        UNROLL for (int ri = 0; ri < NR; ri++) etm[ri] = -INFINITY;
#endif
#if LAZY_W
        float xmax[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}; /* per C element index: four chains */
#endif
#endif
        if (warp_live && !masked) {
            SCORE_TILE(0)
        } else { /* a warp whose rows all lie above the tile ends with weights 0 */
            const int n0i = kt * BN, kmax = min(BN, (int)(Tk - n0));
            int lim[NR];
            UNROLL for (int ri = 0; ri < NR; ri++) {
                const int r = 16 * (ri >> 1) + g + 8 * (ri & 1); /* the row within the warp */
                lim[ri] = r < wrows ? clamp(wpos + r - n0i, -1, BN) : -1;
            }
            SCORE_TILE(1)
        }
#if ENTMAX_BUF
        /* each lane keeps its scores above its row's bound: the root kept so far, or its own
         * maximum so far less 1 (at most the row's); once its slice overflowed, none.  No
         * branch per score (a warp nearly always has some lane keeping one): a kept score goes
         * to the next slot, or to the last when the slice is full -- the row then overflowed
         * (its root is a lower bound only; its slots still hold some of its scores). */
        UNROLL for (int ri = 0; ri < NR; ri++) {
            ea[ri] = fmax(ea[ri], etm[ri]);
            if (!ENTMAX_KEEP) continue; /* the maxima only */
            const int sl = ESLICE(ri), mt = ri >> 1, e0 = 2 * (ri & 1);
            const float bound = eovr[ri] ? INFINITY : fmax(elbr[ri], ea[ri] - 1.0f);
            int c = ecn[ri];
            UNROLL for (int n = 0; n < NB; n++)
                UNROLL for (int e = e0; e < e0 + 2; e++) {
                    const float x = s[mt][n][e];
                    const int keep = x > bound;
                    if (keep) ebuf[min(c, EL - 1) * ESL + sl] = x;
                    c += keep;
                }
            eovr[ri] |= c > EL;
            ecn[ri] = min(c, EL);
        }
#endif
#if WSCALE
        /* the rows' scales follow their largest weight so far (see WSCALE); o is rescaled
         * after the previous tile's W V, which was weighed at the old scale */
        UNROLL for (int ri = 0; ri < NR; ri++) {
            float wm = 0.0f;
            const int mt = ri >> 1, e0 = 2 * (ri & 1);
            UNROLL for (int n = 0; n < NB; n++)
                UNROLL for (int e = e0; e < e0 + 2; e++)
                    if (isfinite(s[mt][n][e])) wm = fmax(wm, fabs(s[mt][n][e]));
            const float mx = mma_quad_max(wm);
            const int ne = mx > 0.0f ? clamp(max(erow[ri], ilogb(mx)), -100, 127) : erow[ri];
            rsc[ri] = ldexp(1.0f, erow[ri] - ne);
            const float is = ldexp(1.0f, -max(ne, -100));
            erow[ri] = ne;
            UNROLL for (int n = 0; n < NB; n++) s[mt][n][e0] *= is, s[mt][n][e0 + 1] *= is;
        }
#endif
#if SOFTMAX
        /* online softmax with a lazy reference maximum: each row's weights are 2^(x - m)
         * with m its reference, which moves up to the row's running maximum only when the
         * tile's maximum passes m + RESCALE_SLACK (in any row of the warp: the test is
         * warp-uniform), so most tiles skip the rescale of o and of the sums.  The weights
         * stay below 2^RESCALE_SLACK, and l, o (and the SDC sums) are all relative to the
         * same m, so the result is the same up to rounding (FlashAttention-4's conditional
         * rescaling).  A row with no visible key yet keeps m = -inf; it subtracts 0 instead,
         * so its masked scores still give exp2(-inf) = 0 without a test per weight.  sm
         * scales the scores FOLD left unscaled (warp-uniform). */
        const int raw = FOLD && warp_live && !masked;
        float tm[NR];
#if KIND == 4
        float tm2[NR];
#endif
        int grow = 0;
        UNROLL for (int ri = 0; ri < NR; ri++) {
            tm[ri] = mma_quad_max(tmax[ri]) * (raw ? sr[ri] : 1.0f);
            grow |= tm[ri] > mrow[ri] + RESCALE_SLACK;
#if KIND == 4
            tm2[ri] = mma_quad_max(tmax2[ri]) * (raw ? sr2[ri] : 1.0f);
            grow |= tm2[ri] > mrow2[ri] + RESCALE_SLACK;
#endif
        }
        if (mma_warp_any(grow)) { /* reached by every work-item (mma.cl) */
            UNROLL for (int ri = 0; ri < NR; ri++) {
                const int mt = ri >> 1, e0 = 2 * (ri & 1);
                const float mn = fmax(mrow[ri], tm[ri]);
                const float al = mma_exp2(mrow[ri] - (mn == -INFINITY ? 0.0f : mn));
                mrow[ri] = mn;
                lrow[ri] *= al;
                UNROLL for (int n = 0; n < NBV; n++) o[mt][n][e0] *= al, o[mt][n][e0 + 1] *= al;
#if TOPK
                edrop[ri] *= al;
#endif
#if KIND == 4
                const float mn2 = fmax(mrow2[ri], tm2[ri]);
                const float al2 = mma_exp2(mrow2[ri] - (mn2 == -INFINITY ? 0.0f : mn2));
                mrow2[ri] = mn2;
                lrow2[ri] *= al2;
                UNROLL for (int n = 0; n < NBV; n++) o2[mt][n][e0] *= al2, o2[mt][n][e0 + 1] *= al2;
#endif
            }
        }
        /* SM_FUSED: natively, a warp with no visible key in the tile (not warp_live) forms no
         * weights, so its exponents, their packing and W V are one straight block that the
         * compiler can interleave (exponents of later keys under the products of earlier ones) */
        vtiles++;
#if SM_FUSED && KSTAGES == 1
        MMA_COPY_WAIT(0); /* V tile kt landed */
        barrier(CLK_LOCAL_MEM_FENCE); /* ... everyone's part, and K tile kt is read out */
        if (kt + 1 < kt_end) LOAD_K_TILE(kt + 1, 0); /* lands while the weights and W V run */
        mma_copy_commit();
#endif
#if SM_FUSED && MMA_PTX
        if (warp_live)
#endif
        {
            UNROLL for (int ri = 0; ri < NR; ri++) {
                const int mt = ri >> 1, e0 = 2 * (ri & 1);
                const float sm = raw ? sr[ri] : 1.0f;
                const float ms = mrow[ri] == -INFINITY ? 0.0f : mrow[ri];
#if TOPK
                UNROLL for (int n = 0; n < NB; n++)
                    UNROLL for (int e = e0; e < e0 + 2; e++) {
                        const float x = s[mt][n][e], p = mma_exp2(x - ms);
                        const int keep = x >= th[ri] && x != -INFINITY; /* masked keys are -inf */
                        lrow[ri] += keep ? p : 0.0f;
                        edrop[ri] += keep ? 0.0f : p;
                        kc[ri] += keep ? 1.0f : 0.0f;
                        COUNT(nz1, keep);
                        s[mt][n][e] = keep || isnan(p) ? p : 0.0f; /* a NaN score stays NaN */
                    }
#else
                UNROLL for (int n = 0; n < NB; n++)
                    UNROLL for (int e = e0; e < e0 + 2; e++) {
                        const float p = mma_exp2(fma(s[mt][n][e], sm, -ms)); /* a NaN score stays NaN */
                        lrow[ri] += p;
                        s[mt][n][e] = p;
                    }
#endif
#if KIND == 4
                const float sm2 = raw ? sr2[ri] : 1.0f;
                const float ms2 = mrow2[ri] == -INFINITY ? 0.0f : mrow2[ri];
                UNROLL for (int n = 0; n < NB; n++)
                    UNROLL for (int e = e0; e < e0 + 2; e++) {
                        const float p = mma_exp2(fma(s2[mt][n][e], sm2, -ms2));
                        lrow2[ri] += p;
                        s2[mt][n][e] = p;
                    }
#endif
            }
            __local const mma_t *Vt = Vs + kst * BN * LDV;
#if !MMA_PTX
            __local mma_t *Pw = Ps + warp * NW * MT * 16 * MMA_SCRATCH_LD(BN);
#endif
            frag_a pa[MT][KB];
            UNROLL for (int mt = 0; mt < MT; mt++)
                UNROLL for (int kk = 0; kk < KB; kk++)
                    mma_stage_a(&pa[mt][kk], s[mt][2 * kk], s[mt][2 * kk + 1], Pw + mt * 16 * MMA_SCRATCH_LD(BN), kk);
#if KIND == 4
            frag_a pa2[MT][KB];
            UNROLL for (int mt = 0; mt < MT; mt++)
                UNROLL for (int kk = 0; kk < KB; kk++)
                    mma_stage_a(&pa2[mt][kk], s2[mt][2 * kk], s2[mt][2 * kk + 1],
                                Pw + (MT + mt) * 16 * MMA_SCRATCH_LD(BN), kk);
#endif
            MMA_STAGE_SYNC();
            UNROLL for (int mt = 0; mt < MT; mt++)
                UNROLL for (int kk = 0; kk < KB; kk++) {
                    mma_staged_a(&pa[mt][kk], Pw + mt * 16 * MMA_SCRATCH_LD(BN), kk);
#if KIND == 4
                    mma_staged_a(&pa2[mt][kk], Pw + (MT + mt) * 16 * MMA_SCRATCH_LD(BN), kk);
#endif
                }
            const int warp_has_w = ROW_STATS ? 0 : warp_live; /* (a constant operand of && draws a compiler warning) */
#if KSTAGES == 1 && !SM_FUSED
            MMA_COPY_WAIT(0); /* V tile kt landed */
            barrier(CLK_LOCAL_MEM_FENCE); /* ... everyone's part, and K tile kt is read out */
            if (kt + 1 < kt_end) LOAD_K_TILE(kt + 1, 0); /* lands while W V runs */
            mma_copy_commit();
#endif
            if (warp_has_w) { WV_TILE(Vt) }
        }
#else /* sparse: W V of tile kt-1, then this tile's weights become its A operands */
#if LAZY_W
        const float xm = mma_max_nan(mma_max_nan(xmax[0], xmax[1]), mma_max_nan(xmax[2], xmax[3]));
        const int warp_has_w = mma_warp_any(anyb != 0 || !(xm < 0.0f)); /* reached by every warp: see mma.cl */
#else
        const int warp_has_w = mma_warp_any(anyb != 0); /* reached by every warp: see mma.cl */
#endif
        if (warp_has_w && lane == 0) wg_any[kt & 3] = 1;
        /* W V of tile kt-1 (a warp with weights there had set wv).  The portable body waits
         * always: PoCL takes barriers in uniform branches, but not within this loop. */
#if MMA_PTX
        if (wv)
#endif
        {
            MMA_COPY_WAIT(1); /* V tile kt-1 (this thread's part); K ahead may still be in flight */
            barrier(CLK_LOCAL_MEM_FENCE); /* ... everyone's part */
            if (warp_had_w) { WV_TILE(Vs) }
        }
#if WSCALE
        UNROLL for (int ri = 0; ri < NR; ri++) {
            const int mt = ri >> 1, e0 = 2 * (ri & 1);
            UNROLL for (int n = 0; n < NBV; n++) o[mt][n][e0] *= rsc[ri], o[mt][n][e0 + 1] *= rsc[ri];
        }
#endif
        /* natively a warp without survivors packs nothing (pa is then not read); the portable
         * body's staging holds a barrier, so every warp goes through it (two scratch tiles:
         * tile kt-1's are read by W V above, in lanes that may run after this warp's) */
#if !MMA_PTX
        __local mma_t *Pw = Ps + ((kt & 1) * NWARPS + warp) * MT * 16 * MMA_SCRATCH_LD(BN);
#endif
#if MMA_PTX
        if (warp_has_w)
#endif
        {
            if (warp_live && !masked) { TILE_WEIGHTS }
            UNROLL for (int mt = 0; mt < MT; mt++)
                UNROLL for (int kk = 0; kk < KB; kk++)
                    mma_stage_a(&pa[mt][kk], s[mt][2 * kk], s[mt][2 * kk + 1], Pw + mt * 16 * MMA_SCRATCH_LD(BN), kk);
            MMA_STAGE_SYNC();
            UNROLL for (int mt = 0; mt < MT; mt++)
                UNROLL for (int kk = 0; kk < KB; kk++) mma_staged_a(&pa[mt][kk], Pw + mt * 16 * MMA_SCRATCH_LD(BN), kk);
        }
        warp_had_w = warp_has_w;
#endif
        kst = NEXT_STAGE(kst, KSTAGES);
    }
    MMA_COPY_WAIT(0); /* nothing may land in local memory after the work-group ends */
#if SPARSE /* the last tile's W V */
    barrier(CLK_LOCAL_MEM_FENCE); /* its survivor flags; V is free */
    if (wg_any[(kt_end - 1) & 3]) { /* 0 where the loop ran no tile */
        LOAD_V_TILE(kt_end - 1, 0);
        vtiles++;
    }
    mma_copy_commit();
    MMA_COPY_WAIT(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (warp_had_w) { WV_TILE(Vs) }
#endif

#if SPLIT
    /* the split's partials of every row (rows past Tq too: the reduce reads rows < Tq): the
     * weighted V sums, with the weight scale undone; softmax maxima and sums over the quad */
    const long slot = (long)bh * nsplit + split;
    UNROLL for (int ri = 0; ri < NR; ri++) {
        const int mt = ri >> 1, e0 = 2 * (ri & 1), r = (int)row[ri];
        float f = 1.0f;
#if WSCALE
        f = erow[ri] > -150 ? ldexp(1.0f, erow[ri]) : 0.0f;
#endif
        UNROLL for (int n = 0; n < NBV; n++)
            UNROLL for (int e = e0; e < e0 + 2; e++) {
                const int c = 8 * n + 2 * t + (e & 1);
                opart[(slot * NW * TQP + r) * DV + c] = o[mt][n][e] * f;
#if KIND == 4
                opart[((slot * NW + 1) * TQP + r) * DV + c] = o2[mt][n][e];
#endif
            }
#if SOFTMAX
        const float l = mma_quad_sum(lrow[ri]); /* reached by every work-item (mma.cl) */
        if (t == 0) mlpart[(slot * NV * TQP + r) * 2] = mrow[ri], mlpart[(slot * NV * TQP + r) * 2 + 1] = l;
#endif
#if KIND == 4
        const float l2 = mma_quad_sum(lrow2[ri]);
        if (t == 0) mlpart[((slot * NV + 1) * TQP + r) * 2] = mrow2[ri], mlpart[((slot * NV + 1) * TQP + r) * 2 + 1] = l2;
#endif
    }
#else
    /* epilogue, per row: undo the weight scale, normalise, combine, Norm, store */
    const long ob_off = o_off + b * os.s0 + h * os.s1;
#if ENTMAX && ENTMAX_PASS == 2
    /* other work-items of the work-group read these rows' tau and flags before the loop */
    barrier(CLK_GLOBAL_MEM_FENCE);
#endif
    UNROLL for (int ri = 0; ri < NR; ri++) {
        const int mt = ri >> 1, e0 = 2 * (ri & 1);
        float f = 1.0f;
#if WSCALE
        f = erow[ri] > -150 ? ldexp(1.0f, erow[ri]) : 0.0f;
#endif
#if ENTMAX && ENTMAX_PASS == 1 /* the root of the kept scores: tau, or a lower bound to go on from */
        {
            /* reached by every work-item */
            /* eb: 0 + x * 0 over the row's scores, NaN once one was not finite */
            const float mr = mma_quad_max(ea[ri]), bd = mma_quad_max(isnan(eb[ri]) ? 1.0f : 0.0f);
            const float over = mma_quad_max(eovr[ri] ? 1.0f : 0.0f);
            int ex = 0;
            const float r = entmax_kept_root(ebuf, ESLICE(ri), ecn[ri], fmax(elbr[ri], mr - 1.0f), epow,
                                             ENTMAX_FINAL_STEPS, 1, &ex, EXCHG);
            if (t == 0 && row[ri] < Tq) {
                taubuf[(long)bh * Tq + row[ri]] = bd != 0.0f ? NAN : r;
                unsettled[row[ri]] = bd == 0.0f && (!ex || over != 0.0f);
            }
            continue;
        }
#elif ENTMAX && ENTMAX_PASS == 2 /* Newton from below on the convex sum_j r_j^p = 1 (alpha <= 2) */
        {
            /* Newton's step on h = f^(1/p), a p-norm of the rectified scores: convex and
             * decreasing as f is, so the steps stay below the root, but linear for keys that
             * tie (one step), where f's own steps close only 1/p of the distance each:
             * t + p (f - f^(1 - 1/p)) / -f'(t) */
            const float fs = mma_quad_sum(ea[ri]), gs = mma_quad_sum(eb[ri]);
            const float nt = gs > 0.0f ? tau[ri] + epow * (fs - pow(fs, 1.0f - 1.0f / epow)) / gs : tau[ri];
            if (t == 0 && row[ri] < Tq) {
                taubuf[(long)bh * Tq + row[ri]] = nt;
                /* unsettled: f(tau) is off 1 by more than the stopping rule, and the step
                 * moved tau (a NaN row stays NaN) */
                unsettled[row[ri]] = fabs(fs - 1.0f) > ENTMAX_TOL && nt != tau[ri] && !isnan(nt);
            }
            continue;
        }
#elif ENTMAX /* the weights summed to one up to the threshold's rounding: divide by their sum */
        {
            const float l = mma_quad_sum(ea[ri]);
            f = l > 0.0f ? f / l : 0.0f;
        }
#endif
#if SOFTMAX
        const float l = mma_quad_sum(lrow[ri]);
        f = l > 0.0f ? 1.0f / l : 0.0f;
#endif
#if TOPK
        {
            /* E~, the dropped keys' estimated share of the denominator (topk_norm of
             * attention_topk.cl in log2 units): exact, exp-threshold, offline.  The quad
             * reductions are reached by every work-item (sdc is uniform). */
            const long nvis = min(offset + row[ri] + 1, Tk);
            float est = 0.0f;
            if (sdc == 1) est = mma_quad_sum(edrop[ri]);
            else if (sdc == 2) est = sdc_gamma * ((float)nvis - mma_quad_sum(kc[ri])) * mma_exp2(th[ri] - mrow[ri]);
            else if (sdc == 3 && row[ri] < Tq)
                est = mma_exp2(log_mass[h * nthr + min(max(nvis - 1, 0L), nthr - 1)] * 1.44269504088896341f - mrow[ri]);
            const float den = l + est;
            f = mma_quad_max(bad[ri]) != 0.0f ? NAN : den > 0.0f ? 1.0f / den : 0.0f;
#if ROW_STATS
            if (t == 0 && row[ri] < Tq) rowstat[(long)bh * Tq + row[ri]] = (float2)(mrow[ri], l);
            continue; /* the quad's reductions above were reached by every work-item */
#endif
        }
#endif
#if KIND == 4
        const float l2 = mma_quad_sum(lrow2[ri]);
        const float f2 = l2 > 0.0f ? lambda / l2 : 0.0f;
        UNROLL for (int n = 0; n < NBV; n++)
            UNROLL for (int e = e0; e < e0 + 2; e++) o[mt][n][e] = o[mt][n][e] * f - o2[mt][n][e] * f2;
#else
        UNROLL for (int n = 0; n < NBV; n++) o[mt][n][e0] *= f, o[mt][n][e0 + 1] *= f;
#endif
#if !VIEWS_TAIL /* (there the Norm follows the combine, below) */
        NORM_STORE(ri, ODT);
#endif
    }
#if VIEWS_TAIL
    /* o = first - lambda o, then the Norm, its gain and the output scale.  first's rows for
     * this block (contiguous in its [B * H][Tq][dv]) come by asynchronous copies into the V
     * region, free after the loop, vt_rows a round at a row stride of DV + 4 floats (a quad's
     * reads of rows g, g + 8 in distinct banks); each lane then combines its own fragment
     * elements.  (Combining with first read from global memory into registers made NVIDIA's
     * compiler allocate the whole kernel's registers worse, and a separate launch cost
     * 0.05-0.1 ms at T=8192: bench/results/views-h200/.) */
    {
        __local float *ys = (__local float *)Vs;
        const int vt_rows = VT_ROWS, vt_chunks = dv / VIEWS_VEC; /* a row's copies */
        const float lc = VIEWS_CLAMP ? clamp(lambda, 0.0f, 1.0f) : lambda;
        __global const float *fb = first + ((long)bh * Tq + m0) * dv;
        barrier(CLK_LOCAL_MEM_FENCE); /* every warp is past its last V fragment reads */
        for (int r0 = 0; r0 < BM; r0 += vt_rows) {
            const int nrows = (int)min((long)vt_rows, min((long)BM - r0, Tq - m0 - r0)); /* rows < Tq */
            for (int i = tid; i < nrows * vt_chunks; i += NT) {
                const int r = i / vt_chunks, c = (i - r * vt_chunks) * VIEWS_VEC;
#if VIEWS_VEC == 4
                mma_copy16(ys + r * (DV + 4) + c, fb + (long)(r0 + r) * dv + c, 16);
#else
                mma_copy4(ys + r * (DV + 4) + c, fb + (long)(r0 + r) * dv + c, 4);
#endif
            }
            mma_copy_commit();
            MMA_COPY_WAIT(0);
            barrier(CLK_LOCAL_MEM_FENCE);
            UNROLL for (int ri = 0; ri < NR; ri++) {
                const int mt = ri >> 1, e0 = 2 * (ri & 1), lr = 8 * (2 * MT * warp + ri) + g - r0;
                if (lr >= 0 && lr < nrows)
                    UNROLL for (int n = 0; n < NBV; n++)
                        UNROLL for (int e = e0; e < e0 + 2; e++) {
                            const int c = 8 * n + 2 * t + (e & 1);
                            if (c < dv) o[mt][n][e] = fma(-lc, o[mt][n][e], ys[lr * (DV + 4) + c]);
                        }
            }
            barrier(CLK_LOCAL_MEM_FENCE); /* before the next round's copies overwrite ys */
        }
    }
    UNROLL for (int ri = 0; ri < NR; ri++) {
        const int mt = ri >> 1, e0 = 2 * (ri & 1);
        NORM_STORE(ri, VIEWS_ODT);
    }
#endif
#endif /* SPLIT */
    /* STATS 0 programs run only for calls with want_stats 0, so this is skipped there; it
     * stays compiled in because removing it made NVIDIA's compiler schedule tra and tda 20 %
     * slower (H200, T=8192) while dropping the counters alone made them 7 % faster */
    if (want_stats) {
        /* rows >= Tq and masked keys never survive, so these count visible pairs only */
        barrier(CLK_LOCAL_MEM_FENCE);
#if SPLIT
        stats_flush(counters, stats, slot, nz1, nz2, nzc, vtiles, tid);
#else
        stats_flush(counters, stats, (long)bh * nqb + qb, nz1, nz2, nzc, vtiles, tid);
#endif
    }
}
