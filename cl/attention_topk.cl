/* Top-theta attention (docs/spec.md section 1c), prefill and decode, on the FP32 lanes, in the
 * row tiling of cl/attention_rows.cl.  A row that sees n keys has scores a_j = scale <q, k_j>
 * and the threshold theta of its row id n - 1 (clamped to the calibrated ones).  Key j is kept
 * when a_j >= theta (pre-softmax) or e^(a_j - m) / z >= theta with m the row maximum and z =
 * sum_j e^(a_j - m), that is a_j >= m + ln z + ln theta (post-softmax: a first pass takes m
 * and z).  One pass over the keys (online, as flash attention: the running maximum m rescales
 * the sums when it grows) adds each kept key's e^(a_j - m) to R and e^(a_j - m) v_j to the
 * output, each dropped key's e^(a_j - m) to E; a tile in which no row keeps a key skips its V
 * load and product (unless the mean V row is read there).  Then
 *     out = (sum_kept e^(a_j - m) v_j + [vmc] E~ mu) / (R + E~),
 * E~ the dropped keys' estimated share of the denominator: 0 (pre-softmax without
 * compensation), E (post-softmax, and SDC exact), gamma (n - kept) e^(theta - m) (SDC
 * exp-threshold), e^(eta - m) (SDC offline), and mu the mean of the n visible V rows.
 * Decode splits each row's keys over NSPLIT work-groups, which write their partial m, R, E,
 * kept count, output and V sum; attention_topk_combine merges them.  Post-softmax, split: a
 * first split pass keeps no key (row_cut +inf), so its combine has the row's m and
 * z = E and writes the row's score cut m + ln z + ln theta (cut_out); the second pass keeps the
 * scores at or above that cut with SDC exact, which gives the kept keys their softmax weights
 * (R + E = z). */

#define PSTRIDE(dv) (4 + 2 * (dv)) /* floats of one split's partials: m, R, E, kept, o[dv], vsum[dv] */

/* How much of the row's weight the kept keys leave to the mean V row, and the normalisation:
 * returns (1 / (R + E~), E~ / (R + E~)) (zeros when R + E~ = 0; the second 0 without vmc). */
inline float2 topk_norm(float m, float rsum, float esum, float nkept, long nvis, float theta, int post, int sdc,
                        float sdc_gamma, __global const float *log_mass, long at, int vmc)
{
    float est = 0.0f; /* E~ */
    if (post || sdc == 1) est = esum;
    else if (sdc == 2) est = sdc_gamma * ((float)nvis - nkept) * exp(theta - m);
    else if (sdc == 3) est = exp(log_mass[at] - m);
    const float den = rsum + est;
    const float inv = den > 0.0f ? 1.0f / den : 0.0f;
    return (float2)(inv, vmc ? est * inv : 0.0f);
}

/* Column col's sum over the row's n visible V rows, from v_sum (the sum over all Tk rows)
 * less the rows past the last visible one. */
inline float topk_vsum_tail(__global const float *v_sum, long vsum_off, __global const void *v, long vb_off, long4 vs,
                            long bh, int dv, int col, long nvis, long Tk)
{
    float s = v_sum[vsum_off + bh * dv + col];
    for (long j = nvis; j < Tk; j++) s -= LOAD(DT, v, vb_off + j * vs.s2 + col * vs.s3);
    return s;
}

/* The arguments are the prefill kernels' (cl/attention.cl; q2, k2, the norms and lambdas
 * unused), then Top-theta's: thresholds (fp32 [H][nthr]), the offline SDC table eta (fp32
 * [H][nthr], or NULL), v_sum (fp32 [B][H][dv] sums of all Tk V rows, or NULL) from element
 * vsum_off of its buffer, post, sdc
 * (tdacl_sdc), sdc_gamma, vmc; then the key split: part (the partials, [B*H][Tq][nsplit]
 * PSTRIDE(dv) floats; NULL: one split, the kernel finishes the rows itself), split_len,
 * nsplit (work-group dimension 2 is query block * nsplit + split); row_cut ([B*H][Tq], or
 * NULL): each row's smallest kept score, replacing its threshold (post-softmax splits). */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1))) TDACL_SUBGROUP_ATTR void attention_topk_fwd(
    PREFILL_KERNEL_ARGS,
    __global const float *thresholds, long nthr, __global const float *log_mass, __global const float *v_sum,
    long vsum_off, int post, int sdc, float sdc_gamma, int vmc, __global float *part, long split_len, int nsplit,
    __global const float *row_cut)
{
    ROW_TILE_LOCALS;

    const int tid = get_local_id(0), r = tid / LPR, l = tid - (tid / LPR) * LPR;
    ATTENTION_HEAD(H, lambdas, lambda);
    const int split = get_group_id(2) % nsplit;
    const long nqb = get_num_groups(2) / nsplit;
    const long qb = nqb - 1 - get_group_id(2) / nsplit; /* heaviest (most keys) first */
    const long m0 = qb * BM;
    const long row = m0 + r;
    const int live = row < Tq;
    /* keys 0 .. nvis-1 are visible to the row; its row id nvis - 1 picks the threshold */
    const long nvis = live ? min(offset + row + 1, Tk) : 0;
    const long rid = min(max(nvis - 1, 0L), nthr - 1);
    const float theta = thresholds[h * nthr + rid];

    ZERO_LOCAL(counters, 4, tid, NT);
    STAGE_ROWS(Qs, QS, D / 4, q, q_off + b * qs.s0 + h * qs.s1, qs.s2, qs.s3, m0, Tq, BM, d);
    const long last_row = min(m0 + BM, Tq) - 1;
    /* this split's keys: [k0, kend), whole tiles from k0 (split_len is a multiple of BN) */
    const long k0 = split * split_len;
    const long kend = min(min(Tk, offset + last_row + 1), k0 + split_len);
    const int ntiles = kend > k0 ? (int)((kend - k0 + BN - 1) / BN) : 0;
    ROW_TILE_PRIVATE;

    /* post-softmax, a first pass: this work-item's maximum and its sum of e^(a - m), rescaled
     * as its maximum grows; then the row's (unsplit: a split post-softmax decode runs two passes
     * with row_cut instead, post = 0) */
    float m = -INFINITY, z = 0.0f;
    int row_nan = 0;
    if (post) {
        if (ntiles > 0) K_FIRST(k0);
        for (int kt = 0; kt < ntiles; kt++) {
            STAGE_AND_SCORE(k0 + (long)kt * BN, k0 + (long)(kt + 1) * BN, kt + 1 < ntiles, scale);
            float tm = -INFINITY;
UNROLL
            for (int t = 0; t < NJ; t++) tm = fmax(tm, u[t]);
            if (tm > m) z *= exp(m - tm), m = tm;
UNROLL
            for (int t = 0; t < NJ; t++) z += u[t] != -INFINITY ? exp(u[t] - m) : 0.0f;
        }
        const float mrow = row_reduce(red, m, 0.0f, tid, r, 1).x;
        z = row_reduce(red, m != -INFINITY ? z * exp(m - mrow) : 0.0f, 0.0f, tid, r, 0).x;
        m = mrow;
    }
    /* the smallest score kept; post-softmax a threshold <= 0 keeps every key */
    const float cut = row_cut ? (live ? row_cut[(long)bh * Tq + row] : INFINITY)
                      : !post ? theta : theta > 0.0f ? m + log(z) + log(theta) : -INFINITY;

    /* the pass: kept keys' weights e^(a - m) times V; the dropped keys' sum E; pre-softmax, m
     * is the running row maximum (row-uniform, so that the weights staged for the product are) */
    const int dense_v = vmc && !v_sum; /* the mean V row from every visible V row */
    float o[NC], vsum[NC];
UNROLL
    for (int c = 0; c < NC; c++) o[c] = 0.0f, vsum[c] = 0.0f;
    float rsum = 0.0f, esum = 0.0f;
    uint kept = 0, vtiles = 0;
    if (ntiles > 0) K_FIRST(k0);
    for (int kt = 0; kt < ntiles; kt++) {
        const long n0 = k0 + (long)kt * BN;
        STAGE_AND_SCORE(n0, n0 + BN, kt + 1 < ntiles, scale);
        float tm = -INFINITY;
        int tnan = 0;
UNROLL
        for (int t = 0; t < NJ; t++) tm = fmax(tm, u[t]), tnan |= isnan(u[t]);
        row_nan |= tnan;
        if (!post) {
            tm = row_reduce(red, tm, 0.0f, tid, r, 1).x;
            if (tm > m) { /* the maximum grew: rescale what the row holds */
                const float sc = exp(m - tm);
                rsum *= sc, esum *= sc;
UNROLL
                for (int c = 0; c < NC; c++) o[c] *= sc;
                m = tm;
            }
        }
        int any = 0;
UNROLL
        for (int t = 0; t < NJ; t++) {
            const int vis = n0 + l + LPR * t < nvis;
            const float ex = vis ? exp(u[t] - m) : 0.0f;
            const int keep = vis && u[t] >= cut;
            float w = keep ? ex : 0.0f;
            rsum += w;
            esum += keep ? 0.0f : ex;
            kept += keep;
            any |= w != 0.0f;
            Ws[r * WS + l + LPR * t] = w;
        }
        if (group_any(&flag, any || dense_v)) { /* uniform: some weight in this tile, or the mean needs it */
            vtiles++;
            STAGE_V(n0, dense_v); /* K reads ended at group_any */
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int j = 0; j < BN; j++) {
                const float w = Ws[r * WS + j];
                const float in_mean = dense_v && n0 + j < nvis ? 1.0f : 0.0f;
UNROLL
                for (int c = 0; c < NC; c++) {
                    const float x = R[j * DV + l + LPR * c];
                    o[c] = fma(w, x, o[c]);
                    vsum[c] = fma(in_mean, x, vsum[c]);
                }
            }
        }
    }
    /* NaN, or an infinite score (no finite weights): the row comes out NaN */
    row_nan = row_reduce(red, (float)row_nan, 0.0f, tid, r, 1).x != 0.0f || m == INFINITY;
    const float2 re = row_reduce(red, rsum, esum, tid, r, 0);
    const float nkept = row_reduce(red, (float)kept, 0.0f, tid, r, 0).x;
    if (part) { /* one split of several: its partials, which attention_topk_combine merges */
        if (live) {
            __global float *pp = part + (((long)bh * Tq + row) * nsplit + split) * PSTRIDE(dv);
            if (l == 0) pp[0] = row_nan ? NAN : m, pp[1] = re.x, pp[2] = re.y, pp[3] = nkept;
UNROLL
            for (int c = 0; c < NC; c++) {
                const int col = l + LPR * c;
                if (col < dv) pp[4 + col] = o[c], pp[4 + dv + col] = vsum[c];
            }
        }
        if (want_stats) stats_flush(counters, stats, ((long)bh * nqb + qb) * nsplit + split, kept, 0, 0, vtiles, tid);
        return;
    }
    const float2 nd = topk_norm(m, re.x, re.y, nkept, nvis, theta, post, sdc, sdc_gamma, log_mass, h * nthr + rid, vmc);
    if (vmc && live && nvis > 0) {
        /* the mean V row: v_sum less the rows past the last visible key, else the sum above */
UNROLL
        for (int c = 0; c < NC; c++) {
            const int col = l + LPR * c;
            if (v_sum && col < dv) vsum[c] = topk_vsum_tail(v_sum, vsum_off, v, vb_off, vs, bh, dv, col, nvis, Tk);
            o[c] = o[c] * nd.x + nd.y * (vsum[c] / (float)nvis);
        }
    } else {
UNROLL
        for (int c = 0; c < NC; c++) o[c] *= nd.x;
    }
    if (row_nan) {
UNROLL
        for (int c = 0; c < NC; c++) o[c] = NAN;
    }

    row_epilogue(o, red, tid, r, l, live, row, b, h, gain, out, os, o_off, dv, norm, norm_eps, out_scale);
    if (want_stats) stats_flush(counters, stats, (long)bh * nqb + qb, kept, 0, 0, vtiles, tid);
}

/* The splits of one (batch, head, query row) merged: the largest m, R, E and the output
 * rescaled to it, kept counts and V sums added; then as the unsplit kernel finishes a row
 * (compensation, mean V row, Norm, scale, gain, store).  COMBINE_NT work-items, columns
 * strided over them.  cut_out (post-softmax splits' first pass, every key dropped): writes
 * the row's score cut m + ln E + ln theta ([B*H][Tq]; -inf for theta <= 0) instead. */
#define COMBINE_NT 64
__kernel __attribute__((reqd_work_group_size(COMBINE_NT, 1, 1))) void attention_topk_combine(
    __global const float *part, int nsplit, __global const float *thresholds, long nthr,
    __global const float *log_mass, __global const float *v_sum, long vsum_off, __global const void *v, long4 vs,
    long v_off, int sdc, float sdc_gamma, int vmc, int H, long Tq, long Tk, long offset, int dv, __global const void *gain,
    __global void *out, long4 os, long o_off, int norm, float norm_eps, float out_scale, __global float *cut_out)
{
    __local float red[COMBINE_NT];
    const int tid = get_local_id(0);
    const int bh = get_group_id(1), b = bh / H, h = bh - (bh / H) * H;
    const long row = get_group_id(2);
    const long nvis = min(offset + row + 1, Tk);
    const long rid = min(max(nvis - 1, 0L), nthr - 1);
    const float theta = thresholds[h * nthr + rid];
    __global const float *pp = part + ((long)bh * Tq + row) * nsplit * PSTRIDE(dv);
    float m = -INFINITY;
    int row_nan = 0;
    for (int s = 0; s < nsplit; s++) {
        const float ms = pp[s * PSTRIDE(dv)];
        row_nan |= isnan(ms);
        m = fmax(m, ms);
    }
    float rsum = 0.0f, esum = 0.0f, nkept = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        __global const float *ps = pp + s * PSTRIDE(dv);
        const float sc = ps[0] == -INFINITY ? 0.0f : exp(ps[0] - m);
        rsum += ps[1] * sc, esum += ps[2] * sc, nkept += ps[3];
    }
    row_nan |= !isfinite(m);
    if (cut_out) { /* a NaN cut keeps no key: the second pass's scores make the row NaN */
        if (tid == 0)
            cut_out[(long)bh * Tq + row] = row_nan ? NAN : theta > 0.0f ? m + log(esum) + log(theta) : -INFINITY;
        return;
    }
    const float2 nd = topk_norm(m, rsum, esum, nkept, nvis, theta, 0, sdc, sdc_gamma, log_mass, h * nthr + rid, vmc);
    const long vb_off = v_off + b * vs.s0 + h * vs.s1;
    float ys[(256 + COMBINE_NT - 1) / COMBINE_NT];
    float ss = 0.0f;
    for (int c = 0; c * COMBINE_NT + tid < dv; c++) {
        const int col = c * COMBINE_NT + tid;
        float o = 0.0f, vsum = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            __global const float *ps = pp + s * PSTRIDE(dv);
            o += ps[4 + col] * (ps[0] == -INFINITY ? 0.0f : exp(ps[0] - m));
            vsum += ps[4 + dv + col];
        }
        float y = o * nd.x;
        if (vmc && nvis > 0) {
            if (v_sum) vsum = topk_vsum_tail(v_sum, vsum_off, v, vb_off, vs, bh, dv, col, nvis, Tk);
            y += nd.y * (vsum / (float)nvis);
        }
        if (row_nan) y = NAN;
        ys[c] = y;
        ss += y * y;
    }
    float rs = 1.0f;
    if (norm) { /* rms over dv: a fixed-order tree over the work-items */
        red[tid] = ss;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int w = COMBINE_NT / 2; w > 0; w >>= 1) {
            if (tid < w) red[tid] += red[tid + w];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        rs = rsqrt(red[0] / (float)dv + norm_eps);
    }
    const long ob = o_off + b * os.s0 + h * os.s1 + row * os.s2;
    for (int c = 0; c * COMBINE_NT + tid < dv; c++) {
        const int col = c * COMBINE_NT + tid;
        float y = ys[c] * rs * out_scale;
        if (norm && gain) y *= LOAD(GDT, gain, col);
        STORE(ODT, out, ob + col * os.s3, y);
    }
}
