/* alpha-entmax attention with ASEntmax's length-adaptive temperature (docs/spec.md section
 * 1b), prefill and decode, on the FP32 lanes, in the row tiling of cl/attention_rows.cl (BM
 * query rows of one (batch, head) a work-group, LPR work-items a row).  The row threshold tau
 * solves
 *     sum_j max(u_j - tau, 0)^e = 1,   u_j = (alpha - 1) * t_i * scale * <q_i, k_j>,
 *     e = 1 / (alpha - 1),
 * without a T x T matrix:
 *   pass 0        the row maximum m (tau lies in [m - 1, m - n^(1-alpha)], so only keys with
 *                 u > m - 1 can have a weight)
 *   passes 1..    f(tau) = sum (u - tau)_+^e and its slope at NPTS guesses at once: a Newton
 *                 step from the bracket's lower end (from the left it never overshoots for
 *                 alpha <= 2, where f is convex) and guesses spread from it to the upper end;
 *                 the bracket shrinks to the guesses either side of f = 1; stops when some
 *                 |f - 1| <= TOL, the bracket is an ulp wide, or after MAXIT passes.  Pass 2
 *                 keeps each row's candidates (u above the bracket's lower end) in local
 *                 memory, up to CAP a row, and marks the key tiles that hold one; when no
 *                 row of the work-group has more than CAP, the later passes read only those
 *                 (no key is scored again), otherwise every pass re-scores the keys.
 *   last pass     weights (u - tau)_+^e / f(tau) (summing to one) times V, over the marked
 *                 tiles only (up to MAXT tiles are tracked; later ones are all visited); a
 *                 tile in which no row has a non-zero weight skips its V load and product. */

#ifndef MAXIT
#define MAXIT 40 /* threshold passes at most */
#endif
#ifndef CAP
#define CAP 128 /* candidate scores a row keeps in local memory */
#endif
#define MAXT 1024 /* key tiles whose candidate mark is kept */
#ifndef NPTS
#define NPTS 8 /* threshold guesses a pass */
#endif

/* x^e for x > 0, with exact forms for alpha = 2 (e = 1) and 1.5 (e = 2). */
inline float ent_pow(float x, int emode, float e) { return emode == 1 ? x : emode == 2 ? x * x : pow(x, e); }

/* Adds u's terms to f0[k] = sum (u - pt[k])_+^e and f1[k] = sum (u - pt[k])_+^(e-1) (every
 * guess pt[k] >= lo). */
#define ACCUMULATE(uval)                                                                         \
    do {                                                                                         \
        const float u_ = (uval);                                                                 \
        if (u_ > lo) /* below every guess: most keys */                                          \
        _Pragma("unroll") for (int k_ = 0; k_ < NPTS; k_++) {                                    \
            const float x_ = u_ - pt[k_];                                                        \
            if (x_ > 0.0f) {                                                                     \
                const float p_ = ent_pow(x_, emode, e);                                          \
                f0[k_] += p_;                                                                    \
                f1[k_] += emode == 1 ? 1.0f : emode == 2 ? x_ : p_ / x_;                         \
            }                                                                                    \
        }                                                                                        \
    } while (0)

/* The tile after kt that the weighted pass visits: every tile, or with marks only the marked
 * ones (tiles past MAXT are always visited). */
inline int next_tile(int kt, int ntiles, int marks, __local const uint *tile_mark)
{
    for (kt++; kt < ntiles; kt++)
        if (!marks || kt >= MAXT || ((tile_mark[kt >> 5] >> (kt & 31)) & 1u)) break;
    return kt;
}

/* The arguments are the prefill kernels' (cl/attention.cl; q2, k2, the norms and lambdas
 * unused), then the entmax ones: temps (fp32 [H][3]: delta, beta, gamma per head, or NULL
 * for the scalars), alpha - 1, e = 1 / (alpha - 1) and its fast form emode. */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) TDACL_SUBGROUP_ATTR void attention_entmax_fwd(
    PREFILL_KERNEL_ARGS,
    __global const float *temps, float am1, float e, int emode, float t_delta, float t_beta, float t_gamma)
{
    ROW_TILE_LOCALS;
    __local float cand[BM * CAP];
    __local int ncand[BM];
    __local uint tile_mark[MAXT / 32];

    const int tid = get_local_id(0), r = tid / LPR, l = tid - (tid / LPR) * LPR;
    ATTENTION_HEAD(H, lambdas, lambda);
    ATTENTION_QUERY_BLOCK(BM);
    const long row = m0 + r;
    const int live = row < Tq;
    /* keys 0 .. nvis-1 are visible to the row */
    const long nvis = live ? min(offset + row + 1, Tk) : 0;
    float td = t_delta, tb = t_beta, tg = t_gamma;
    if (temps) td = temps[3 * h], tb = temps[3 * h + 1], tg = temps[3 * h + 2];
    /* inverse temperature delta + beta * (ln n)^gamma; the term is 0 for n = 1 */
    const float temp = td + (nvis > 1 ? tb * pow(log((float)nvis), tg) : 0.0f);
    const float cr = am1 * scale * temp;

    ZERO_LOCAL(counters, 4, tid, NT);
    ZERO_LOCAL(ncand, BM, tid, NT);
    ZERO_LOCAL(tile_mark, MAXT / 32, tid, NT);
    STAGE_ROWS(Qs, QS, D / 4, q, q_off + b * qs.s0 + h * qs.s1, qs.s2, qs.s3, m0, Tq, BM, d);
    const long last_row = min(m0 + BM, Tq) - 1;
    const long kend = min(Tk, offset + last_row + 1);
    const int ntiles = (int)((kend + BN - 1) / BN);
    ROW_TILE_PRIVATE;

    /* pass 0: the row maximum; a NaN score makes the row NaN */
    float m = -INFINITY;
    int row_nan = 0;
    if (ntiles > 0) K_FIRST(0L);
    for (int kt = 0; kt < ntiles; kt++) {
        STAGE_AND_SCORE((long)kt * BN, (long)(kt + 1) * BN, kt + 1 < ntiles, cr);
UNROLL
        for (int t = 0; t < NJ; t++) m = fmax(m, u[t]), row_nan |= isnan(u[t]);
    }
    float2 mx = row_reduce(red, m, (float)row_nan, tid, r, 1);
    m = mx.x;
    /* NaN, or an infinite score (no finite threshold exists): the row comes out NaN */
    row_nan = live && (mx.y != 0.0f || !isfinite(m));

    /* threshold passes: bracket [lo, hi] with f(lo) >= 1 > f(hi), NPTS guesses a pass in
     * increasing order (the first pass's first at lo = m - 1, so that the next Newton step
     * has the slope there); (tau, fsum) is what the weights use: a converged guess, else lo */
    float lo = m - 1.0f, hi = m - exp(-am1 * log((float)max(nvis, 1L)));
    float flo = 0.0f, dlo = 0.0f; /* f at lo and sum (u - lo)^(e-1), once evaluated */
    float tau = lo, fsum = 1.0f, pt[NPTS], f0[NPTS], f1[NPTS];
UNROLL
    for (int k = 0; k < NPTS; k++) pt[k] = lo + (hi - lo) * (float)k / (float)NPTS;
    int done = !live || row_nan, cached = 0, marks = 0;
    for (int it = 0; it < MAXIT; it++) {
        if (!group_any(&flag, !done && l == 0)) break;
UNROLL
        for (int k = 0; k < NPTS; k++) f0[k] = 0.0f, f1[k] = 0.0f;
        if (cached) {
            const int nc = ncand[r];
            for (int i = l; i < nc; i += LPR) ACCUMULATE(cand[r * CAP + i]);
        } else {
            /* the second pass keeps the row's candidates (above lo, or above tau once done) and
             * marks the tiles that hold one */
            const float keep = done ? tau : lo;
            if (ntiles > 0) K_FIRST(0L);
            for (int kt = 0; kt < ntiles; kt++) {
                STAGE_AND_SCORE((long)kt * BN, (long)(kt + 1) * BN, kt + 1 < ntiles, cr);
                int marked = 0;
UNROLL
                for (int t = 0; t < NJ; t++) {
                    ACCUMULATE(u[t]);
                    if (it == 1 && live && !row_nan && u[t] > keep) {
                        marked = 1;
                        if (!done) {
                            int i = atomic_inc(&ncand[r]);
                            if (i < CAP) cand[r * CAP + i] = u[t];
                        }
                    }
                    marked |= it == 1 && row_nan && u[t] != -INFINITY; /* its NaN reaches the output */
                }
                if (it == 1 && marked && kt < MAXT) atomic_or(&tile_mark[kt >> 5], 1u << (kt & 31));
            }
        }
UNROLL
        for (int k = 0; k < NPTS; k++) {
            float2 s = row_reduce(red, f0[k], f1[k], tid, r, 0);
            f0[k] = s.x, f1[k] = s.y;
        }
        if (it == 1) cached = !group_any(&flag, ncand[r] > CAP), marks = 1; /* uniform */
        if (done) continue;
UNROLL
        for (int k = 0; k < NPTS; k++) {
            if (f0[k] >= 1.0f && pt[k] >= lo) lo = pt[k], flo = f0[k], dlo = f1[k];
            else if (f0[k] < 1.0f && pt[k] < hi) hi = pt[k];
            if (!done && fabs(f0[k] - 1.0f) <= ENTMAX_TOL) tau = pt[k], fsum = f0[k], done = 1;
        }
        if (done) continue;
        if (flo <= 0.0f) { /* not even m - 1 reached 1 (rounding): take that point as it is */
            tau = pt[0], fsum = f0[0] > 0.0f ? f0[0] : 1.0f, done = 1;
            continue;
        }
        tau = lo, fsum = flo;
        float nx = lo + (flo - 1.0f) / (e * dlo); /* Newton: f' = -e * dlo */
        if (!(nx > lo && nx < hi)) nx = 0.5f * (lo + hi);
        if (!(nx > lo && nx < hi)) { /* the bracket is an ulp wide */
            done = 1;
            continue;
        }
        /* alpha <= 2: f is convex, the root lies above the Newton point; else anywhere in the bracket */
        const float a = e >= 1.0f ? nx : lo;
        pt[0] = nx;
UNROLL
        for (int k = 1; k < NPTS; k++) pt[k] = a + (hi - a) * (float)k / (float)NPTS;
    }

    /* last pass: normalised weights times V */
    const float inv = 1.0f / fsum;
    float o[NC];
UNROLL
    for (int c = 0; c < NC; c++) o[c] = 0.0f;
    uint nz = 0, vtiles = 0;
    int kt = next_tile(-1, ntiles, marks, tile_mark);
    if (kt < ntiles) K_FIRST((long)kt * BN);
    while (kt < ntiles) {
        const long n0 = (long)kt * BN;
        const int next = next_tile(kt, ntiles, marks, tile_mark);
        STAGE_AND_SCORE(n0, (long)next * BN, next < ntiles, cr);
        int any = 0;
UNROLL
        for (int t = 0; t < NJ; t++) {
            float x = u[t] - tau;
            float w = x > 0.0f ? ent_pow(x, emode, e) * inv : 0.0f;
            if (row_nan && u[t] != -INFINITY) w = NAN;
            nz += w != 0.0f;
            any |= w != 0.0f;
            Ws[r * WS + l + LPR * t] = w;
        }
        if (group_any(&flag, any)) { /* uniform: some weight in this tile */
            vtiles++;
            STAGE_V(n0, 0); /* K reads ended at group_any */
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int j = 0; j < BN; j++) {
                const float w = Ws[r * WS + j];
UNROLL
                for (int c = 0; c < NC; c++) o[c] = fma(w, R[j * DV + l + LPR * c], o[c]);
            }
        }
        kt = next;
    }

    row_epilogue(o, red, tid, r, l, live, row, b, h, gain, out, os, o_off, dv, norm, norm_eps, out_scale);
    if (want_stats) stats_flush(counters, stats, (long)bh * nqb + qb, nz, 0, 0, vtiles, tid);
}
