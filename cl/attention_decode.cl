/* Decode attention (flash-decoding): a few query rows (Tq <= 16) against a long key range.
 * The visible keys are split over work-groups along grid dim 2; each work-group walks its
 * split in chunks of NTD keys, one key per work-item, then accumulates weight x V.
 * Sparse kinds (rela, tra, tda) compact the surviving keys of a chunk into a local list
 * and read only those V rows.  The last split of a (batch, head) to finish combines the
 * splits (combine_row, attention_reduce.cl), applies the Norm epilogue and stores the output:
 * one launch (FUSED_COMBINE=0, a class option: attention_decode_reduce does it).  Same kinds and dtype macros as attention.cl. */

#ifndef TQP
#define TQP 1 /* query rows padded to 1, 2, 4, 8 or 16 */
#endif
#ifndef NTD
#define NTD 128 /* work-items per work-group = keys per chunk */
#endif
#ifndef RED_NT
#define RED_NT 64 /* work-items per row of the split reduction (attention_reduce.cl) */
#endif
#define COMBINE_NT (NTD < RED_NT ? NTD : RED_NT)
#ifndef KV_ROWS
#define KV_ROWS 0 /* 1: per-row cache sequence and position from kv_rows (tdacl_kv_rows) */
#endif
#ifndef FUSED_COMBINE
#define FUSED_COMBINE 1 /* 0: attention_decode_reduce combines the splits in a second launch */
#endif

#define TWO_VIEWS (KIND == 3 || KIND == 4)
#define NV (TWO_VIEWS ? 2 : 1)
#define SOFTMAX (KIND == 0 || KIND == 4)
#define NW (KIND == 4 ? 2 : 1) /* weight sets kept per key */
#define D4 (D / 4)
#define DV4 (DV / 4)
#define KPART (NTD / DV4) /* key partitions of the accumulation phase (NTD >= DV4) */


/* Survivor-list capacity = keys per round: a round scores LIST keys, NTD at a time, then
 * multiplies the survivors' V rows.  Softmax kinds keep every visible key of the round. */
#define LIST (NTD * (TQP <= 2 ? 4 : TQP <= 8 ? 2 : 1))
#define KS4 (D4 + 1) /* padded row stride of the key chunk, in float4 */

/* A key chunk moves through registers as raw pieces (kreg): work-item tid loads piece
 * (tid + u*NTD) of each view's chunk, coalesced across work-items.  fp32 and unaligned
 * views: a piece is 4 elements (a float4).  16-bit views on 16-byte rows (WIDE16): 8
 * elements (a uint4, 16 bytes), converted to fp32 only where they are used, so the
 * registers hold half the bytes and one load moves twice as many keys. */
#if DT != 0 && defined(ALIGNED16)
#define WIDE16 1
#define KLOADS (D4 / 2) /* pieces per key row and view */
typedef uint4 kpiece;
#else
#define WIDE16 0
#define KLOADS D4
typedef float4 kpiece;
#endif
/* Raw 16-bit pieces are small enough to hold two chunks in registers, so the next chunk's
 * loads start before the current chunk is scored; fp32 chunks (twice the registers) are
 * fetched after it is staged, which keeps occupancy (measured: fp32 decode 1.1-2.3x slower
 * with two chunks held). */
#ifndef EARLY_FETCH
#define EARLY_FETCH WIDE16 /* a device class may turn it off where the two chunks spill */
#endif

/* Scoring a chunk.  With PARTIAL, the work-item that loaded a piece of a key row (KLOADS
 * pieces per row, always the same column piece cc = tid % KLOADS since NTD % KLOADS == 0)
 * multiplies it at once with its query rows' piece, held in registers, and writes one
 * partial dot per query row (and |k|^2 piece for the threshold kinds) to local memory; the
 * key's owner adds its KLOADS partials.  That is D/KLOADS times less local-memory traffic
 * and no second pass over the key in local memory: the few-row decode step becomes
 * bandwidth-bound.  Without PARTIAL (many query rows, where the partials would outgrow the
 * staged keys, or NTD not a multiple of KLOADS) the chunk is staged whole in Ks and every
 * key's owner reads its row back.  fp32 keys stay staged: their decode is at the bandwidth
 * bound already, and partials measured 3-7 % slower there (H200). */
#define KK (KIND == 2 || KIND == 3) /* a partial |k|^2 per piece */
#define SEGS (D4 / KLOADS)           /* float4s per piece: 2 for 16-byte loads, else 1 */
#define PSLOTS (TQP + KK)            /* partial slots per view */
#define PARTIAL (WIDE16 && NTD % KLOADS == 0 && PSLOTS * KLOADS <= 4 * KS4)

/* 8 bf16 or f16 elements (a uint4) as two float4s. */
inline void unpack8(uint4 w, float4 *lo, float4 *hi)
{
#if DT == 1
    *lo = (float4)(as_float(w.x << 16), as_float(w.x & 0xffff0000u), as_float(w.y << 16), as_float(w.y & 0xffff0000u));
    *hi = (float4)(as_float(w.z << 16), as_float(w.z & 0xffff0000u), as_float(w.w << 16), as_float(w.w & 0xffff0000u));
#else
    __private uint4 tmp = w;
    *lo = vload_half4(0, (__private const half *)&tmp);
    *hi = vload_half4(1, (__private const half *)&tmp);
#endif
}

/* Element group g (0 or 1) of a piece as fp32. */
inline float4 piece_f32(kpiece w, int g)
{
#if WIDE16
    float4 lo, hi;
    unpack8(w, &lo, &hi);
    return g ? hi : lo;
#else
    return w;
#endif
}

inline void fetch_chunk(kpiece kreg[NV][KLOADS], __global const void *k, long kb, long4 ks,
                        __global const void *k2, long k2b, long4 k2s, long c0, long s1, int d, int tid)
{
UNROLL
    for (int t = 0; t < NV; t++)
UNROLL
        for (int u = 0; u < KLOADS; u++) {
            int idx = tid + u * NTD, j = idx / KLOADS, cc = idx - (idx / KLOADS) * KLOADS;
            long n = c0 + j;
#if WIDE16
            uint4 w = (uint4)(0u);
            if (n < s1 && 8 * cc < d) {
#if TWO_VIEWS
                if (t) w = *(__global const uint4 *)((__global const ushort *)k2 + k2b + n * k2s.s2 + 8 * cc);
                else
#endif
                    w = *(__global const uint4 *)((__global const ushort *)k + kb + n * ks.s2 + 8 * cc);
            }
            kreg[t][u] = w;
#else
            float4 val = (float4)(0.0f);
            if (n < s1) {
#if TWO_VIEWS
                if (t) val = load_row4(k2, k2b + n * k2s.s2, k2s.s3, cc, d);
                else
#endif
                    val = load_row4(k, kb + n * ks.s2, ks.s3, cc, d);
            }
            kreg[t][u] = val;
#endif
        }
}

void combine_row(__global volatile const float *opart, __global volatile const float *mlpart,
                 __global const void *gain, __global void *out, long4 os, long o_off, int b, int h, int bh, int i,
                 int nsplit, int dv, float lambda, int norm, float norm_eps, float out_scale, __local float *red);

__kernel __attribute__((reqd_work_group_size(NTD, 1, 1))) TDACL_SUBGROUP_ATTR void attention_decode_part(
    __global const void *q, __global const void *k, __global const void *v,
    __global const void *q2, __global const void *k2,
    __global const float *lambdas, __global float *opart, __global float *mlpart, __global uint *stats,
    __global uint *arrivals, __global const int2 *kv_rows, __global const void *gain, __global void *out, long4 os,
    long o_off, int norm, float norm_eps, float out_scale,
    long4 qs, long4 ks, long4 vs, long4 q2s, long4 k2s,
    long q_off, long k_off, long v_off, long q2_off, long k2_off,
    int H, int Tq, long Tk, long offset_all, int d, int dv, long split_len,
    float scale, float beta, float kappa, int pmode, float power, float lambda,
    int normalize, int want_stats)
{
    __local float4 Qs[NV * TQP * D4];
#if PARTIAL
    __local float Pl[NV * PSLOTS * NTD * KLOADS]; /* partial dots of the current chunk */
#else
    __local float4 Ks[NV * NTD * KS4]; /* the current chunk of keys */
#endif
    __local float Wl[LIST * TQP * NW]; /* weights (or log2 scores) of listed keys */
    __local int klist[LIST];
    __local float4 red[TQP * DV4]; /* partition sums at the end */
    __local uint cnt;
    __local int tmax[NV * TQP];
    __local uint counters[4];
    __local float cred[COMBINE_NT];
    __local int last;

    const int tid = get_local_id(0);
    ATTENTION_HEAD(H, lambdas, lambda);
    const int split = get_group_id(2), nsplit = get_num_groups(2);
    /* KV_ROWS (a model's sequences at their own positions; a program of its own, so the usual
     * decode keeps its registers): row b reads cache sequence kv_rows[b].x, its query 0 at
     * position kv_rows[b].y; the splits past its keys are empty */
#if KV_ROWS
    const int2 kr = kv_rows[b];
    const int bk = kr.x;
    const long offset = kr.y;
#else
    const int bk = b;
    const long offset = offset_all;
#endif
    const long kend_all = min(Tk, offset + Tq);
    const long s0 = (long)split * split_len, s1 = min(s0 + split_len, kend_all);

    /* query rows: normalised (tra/tda) and scaled; softmax in log2 units */
#if SOFTMAX
    const float qscale = scale * 1.44269504088896341f;
#else
    const float qscale = scale;
#endif
    for (int idx = tid; idx < NV * TQP * D4; idx += NTD) {
        int view = idx / (TQP * D4), rem = idx - view * (TQP * D4);
        int r = rem / D4, c4 = rem - (rem / D4) * D4;
        float4 val = (float4)(0.0f);
        if (r < Tq) {
#if TWO_VIEWS
            if (view) val = load_row4(q2, q2_off + b * q2s.s0 + h * q2s.s1 + r * q2s.s2, q2s.s3, c4, d);
            else
#endif
                val = load_row4(q, q_off + b * qs.s0 + h * qs.s1 + r * qs.s2, qs.s3, c4, d);
        }
        Qs[idx] = val;
    }
    ZERO_LOCAL(counters, 4, tid, NTD);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* rows strided over the work-items: NTD may be below NV x TQP (16 against 32) */
    for (int row = tid; row < NV * TQP; row += NTD) {
        float ss = 0.0f;
        for (int c4 = 0; c4 < D4; c4++) ss += dot(Qs[row * D4 + c4], Qs[row * D4 + c4]);
        float f = qscale * (normalize ? 1.0f / fmax(sqrt(ss), 1e-12f) : 1.0f);
        for (int c4 = 0; c4 < D4; c4++) Qs[row * D4 + c4] *= f;
    }
#if PARTIAL
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 qp[NV][TQP][SEGS]; /* this work-item's piece of every query row */
    {
        const int cc = tid % KLOADS;
UNROLL
        for (int t = 0; t < NV; t++)
UNROLL
            for (int i = 0; i < TQP; i++)
UNROLL
                for (int g = 0; g < SEGS; g++) qp[t][i][g] = Qs[(t * TQP + i) * D4 + SEGS * cc + g];
    }
#endif

    float tau[TQP];
UNROLL
    for (int i = 0; i < TQP; i++) {
#if KIND == 2 || KIND == 3
        tau[i] = tau_of(offset + i, beta, kappa, d);
#else
        tau[i] = 0.0f;
#endif
    }
#if KIND == 3
    const float lc = clamp(lambda, 0.0f, 1.0f);
#endif
    const int part = tid / DV4, c4 = tid - (tid / DV4) * DV4;
    const int active = part < KPART; /* the last NTD % DV4 work-items only score */
    float4 o[TQP];
UNROLL
    for (int i = 0; i < TQP; i++) o[i] = (float4)(0.0f);
#if SOFTMAX
    float m[NV][TQP], l[NV][TQP];
UNROLL
    for (int t = 0; t < NV; t++)
UNROLL
        for (int i = 0; i < TQP; i++) m[t][i] = -INFINITY, l[t][i] = 0.0f;
#endif
#if KIND == 4
    float4 o2[TQP];
UNROLL
    for (int i = 0; i < TQP; i++) o2[i] = (float4)(0.0f);
#endif
    uint nz1 = 0, nz2 = 0, nzc = 0, vchunks = 0;
    const long kb = k_off + bk * ks.s0 + h * ks.s1;
    const long k2b = k2_off + bk * k2s.s0 + h * k2s.s1;
    const long vb = v_off + bk * vs.s0 + h * vs.s1;

#if EARLY_FETCH
    kpiece kreg[NV][KLOADS], kcur[NV][KLOADS];
#define KCUR kcur
#else
    kpiece kreg[NV][KLOADS];
#define KCUR kreg
#endif
    if (s0 < s1) fetch_chunk(kreg, k, kb, ks, k2, k2b, k2s, s0, s1, d, tid);
    for (long r0 = s0; r0 < s1; r0 += LIST) {
        barrier(CLK_LOCAL_MEM_FENCE); /* previous round's list fully consumed */
        if (tid == 0) cnt = 0;
#if SOFTMAX
        for (int row = tid; row < NV * TQP; row += NTD) tmax[row] = ord_int(-INFINITY);
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
        /* phase 1: score this round's keys NTD at a time */
        for (int j0 = 0; j0 < LIST && r0 + j0 < s1; j0 += NTD) {
            const long c0 = r0 + j0;
            const long next = (j0 + NTD < LIST) ? c0 + NTD : r0 + LIST; /* possibly in the next round */
#if EARLY_FETCH
            /* this chunk has landed: take it and start the next one */
UNROLL
            for (int t = 0; t < NV; t++)
UNROLL
                for (int u = 0; u < KLOADS; u++) kcur[t][u] = kreg[t][u];
            if (next < s1) fetch_chunk(kreg, k, kb, ks, k2, k2b, k2s, next, s1, d, tid);
#endif
            if (j0 > 0 || r0 > s0) barrier(CLK_LOCAL_MEM_FENCE); /* previous chunk fully read */
UNROLL
            for (int t = 0; t < NV; t++)
UNROLL
                for (int u = 0; u < KLOADS; u++) {
                    int idx = tid + u * NTD;
#if PARTIAL
                    float4 kv[SEGS], pk = (float4)(0.0f);
UNROLL
                    for (int g = 0; g < SEGS; g++) {
                        kv[g] = piece_f32(KCUR[t][u], g);
                        pk = fma(kv[g], kv[g], pk);
                    }
UNROLL
                    for (int i = 0; i < TQP; i++) {
                        float4 pq = (float4)(0.0f);
UNROLL
                        for (int g = 0; g < SEGS; g++) pq = fma(qp[t][i][g], kv[g], pq);
                        Pl[(t * PSLOTS + i) * NTD * KLOADS + idx] = (pq.s0 + pq.s1) + (pq.s2 + pq.s3);
                    }
#if KK
                    Pl[(t * PSLOTS + TQP) * NTD * KLOADS + idx] = (pk.s0 + pk.s1) + (pk.s2 + pk.s3);
#endif
#else
                    int j = idx / KLOADS, cc = idx - (idx / KLOADS) * KLOADS;
UNROLL
                    for (int g = 0; g < SEGS; g++) Ks[(t * NTD + j) * KS4 + SEGS * cc + g] = piece_f32(KCUR[t][u], g);
#endif
                }
            barrier(CLK_LOCAL_MEM_FENCE);
#if !EARLY_FETCH
            if (next < s1) fetch_chunk(kreg, k, kb, ks, k2, k2b, k2s, next, s1, d, tid);
#endif
            const long n = c0 + tid;
            const int j = j0 + tid;
            if (n < s1) {
                float sc[NV][TQP];
UNROLL
                for (int t = 0; t < NV; t++) {
                    float4 acc[TQP];
                    float4 kk = (float4)(0.0f);
UNROLL
                    for (int i = 0; i < TQP; i++) acc[i] = (float4)(0.0f);
#if PARTIAL
                    /* the key's KLOADS partials of each slot, four at a time */
                    __local const float4 *pp = (__local const float4 *)(Pl + (t * PSLOTS * NTD + tid) * KLOADS);
UNROLL
                    for (int c = 0; c < KLOADS / 4; c++) {
UNROLL
                        for (int i = 0; i < TQP; i++) acc[i] += pp[i * NTD * KLOADS / 4 + c];
#if KK
                        kk += pp[TQP * NTD * KLOADS / 4 + c];
#endif
                    }
#else
UNROLL_BY(4)
                    for (int cc = 0; cc < D4; cc++) {
                        float4 kv = Ks[(t * NTD + tid) * KS4 + cc];
                        kk = fma(kv, kv, kk);
UNROLL
                        for (int i = 0; i < TQP; i++) acc[i] = fma(Qs[(t * TQP + i) * D4 + cc], kv, acc[i]);
                    }
#endif
                    float kinv = 1.0f;
#if KIND == 2 || KIND == 3
                    if (normalize) kinv = 1.0f / fmax(sqrt((kk.s0 + kk.s1) + (kk.s2 + kk.s3)), 1e-12f);
#endif
UNROLL
                    for (int i = 0; i < TQP; i++) {
                        float sv = ((acc[i].s0 + acc[i].s1) + (acc[i].s2 + acc[i].s3)) * kinv;
                        sc[t][i] = (i < Tq && n <= offset + i) ? sv : -INFINITY;
                    }
                }
#if !SOFTMAX
                /* weights; a key with any non-zero weight joins the survivor list */
                float wv[TQP];
                int any = 0;
UNROLL
                for (int i = 0; i < TQP; i++) {
                    float x1 = sc[0][i] - tau[i];
#if KIND == 1
                    float w1 = x1 <= 0.0f ? 0.0f : x1;
                    wv[i] = w1;
#else
                    float w1 = isnan(x1) ? x1 : rect_pow(x1, pmode, power);
#if KIND == 3
                    float x2 = sc[1][i] - tau[i];
                    float w2 = isnan(x2) ? x2 : rect_pow(x2, pmode, power);
                    wv[i] = w1 - lc * w2;
                    nz2 += w2 != 0.0f;
                    nzc += wv[i] != 0.0f;
                    any |= w2 != 0.0f;
#else
                    wv[i] = w1;
#endif
#endif
                    nz1 += w1 != 0.0f;
                    any |= w1 != 0.0f;
                }
                if (any) {
                    uint idx = atomic_inc(&cnt);
                    klist[idx] = (int)n;
UNROLL
                    for (int i = 0; i < TQP; i++) Wl[idx * TQP + i] = wv[i];
                }
#else
UNROLL
                for (int t = 0; t < NV; t++)
UNROLL
                    for (int i = 0; i < TQP; i++) {
                        Wl[(t * LIST + j) * TQP + i] = sc[t][i];
                        if (sc[t][i] != -INFINITY) atomic_max(&tmax[t * TQP + i], ord_int(sc[t][i]));
                    }
#endif
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* phase 2: weight x V over the list, work-items split over (key partition, column) */
#if !SOFTMAX
        const int count = (int)cnt;
        if (count) vchunks++;
        for (int idx = part; active && idx < count; idx += KPART) {
            float4 vv = load_row4(v, vb + (long)klist[idx] * vs.s2, vs.s3, c4, dv);
UNROLL
            for (int i = 0; i < TQP; i++) o[i] = fma((float4)(Wl[idx * TQP + i]), vv, o[i]);
        }
#else
        vchunks++;
UNROLL
        for (int t = 0; t < NV; t++)
UNROLL
            for (int i = 0; i < TQP; i++) {
                float mn = fmax(m[t][i], ord_float(tmax[t * TQP + i]));
                float alpha = mn == -INFINITY ? 1.0f : native_exp2(m[t][i] - mn);
                m[t][i] = mn;
                l[t][i] *= alpha;
#if KIND == 4
                if (t) o2[i] *= alpha;
                else
#endif
                    o[i] *= alpha;
            }
        const int count = (int)min((long)LIST, s1 - r0);
        /* probabilities once per (key, row), not once per column group; each work-item's l
         * holds its keys' share, summed over the work-group at the end */
        for (int idx = tid; idx < count; idx += NTD)
UNROLL
            for (int t = 0; t < NV; t++)
UNROLL
                for (int i = 0; i < TQP; i++) {
                    float sv = Wl[(t * LIST + idx) * TQP + i];
                    float p = sv == -INFINITY ? 0.0f : native_exp2(sv - m[t][i]);
                    l[t][i] += p;
                    Wl[(t * LIST + idx) * TQP + i] = p;
                }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int idx = part; active && idx < count; idx += KPART) {
            float4 vv = load_row4(v, vb + (r0 + idx) * vs.s2, vs.s3, c4, dv);
UNROLL
            for (int i = 0; i < TQP; i++) {
                o[i] = fma((float4)(Wl[idx * TQP + i]), vv, o[i]);
#if KIND == 4
                o2[i] = fma((float4)(Wl[(LIST + idx) * TQP + i]), vv, o2[i]);
#endif
            }
        }
#endif
    }

    /* sum the key partitions (one after another, through local memory) and write this
     * split's partials */
    const long slot = (long)bh * nsplit + split;
    for (int view = 0; view < NW; view++) {
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int idx = tid; idx < TQP * DV4; idx += NTD) red[idx] = (float4)(0.0f);
        for (int p = 0; p < KPART; p++) {
            barrier(CLK_LOCAL_MEM_FENCE);
            if (part == p) {
UNROLL
                for (int i = 0; i < TQP; i++) {
#if KIND == 4
                    red[i * DV4 + c4] += view ? o2[i] : o[i];
#else
                    red[i * DV4 + c4] += o[i];
#endif
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int idx = tid; idx < TQP * DV4; idx += NTD)
            vstore4(red[idx], 0, opart + ((slot * NW + view) * TQP) * DV + 4 * idx);
    }
#if SOFTMAX
    /* every work-item saw the same maxima; their partial l sums add up */
    barrier(CLK_LOCAL_MEM_FENCE);
    __local float *lsum = Wl; /* NTD * NV * TQP <= LIST * TQP * NW floats */
UNROLL
    for (int t = 0; t < NV; t++)
UNROLL
        for (int i = 0; i < TQP; i++) lsum[(tid * NV + t) * TQP + i] = l[t][i];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int row = tid; row < NV * TQP; row += NTD) {
        int t = row / TQP, i = row - (row / TQP) * TQP;
        float sum = 0.0f;
        for (int p = 0; p < NTD; p++) sum += lsum[(p * NV + t) * TQP + i];
        /* m[t][i] by selection: a run-time index into a private array puts it in scratch memory */
        float mv = -INFINITY;
UNROLL
        for (int tt = 0; tt < NV; tt++)
UNROLL
            for (int ii = 0; ii < TQP; ii++) mv = (tt == t && ii == i) ? m[tt][ii] : mv;
        mlpart[((slot * NV + t) * TQP + i) * 2 + 0] = mv;
        mlpart[((slot * NV + t) * TQP + i) * 2 + 1] = sum;
    }
#endif
    if (want_stats) {
        stats_flush(counters, stats, slot, nz1, nz2, nzc, vchunks, tid);
    }
#if FUSED_COMBINE
    /* The last split of (b, h) to arrive combines them all.  Each work-item's partials are
     * made visible device-wide before the arrival is counted; the counter goes back to 0 for
     * the next launch.  No work-group waits on another, so any schedule completes. */
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (tid == 0) last = atomic_inc(arrivals + bh) == (uint)(nsplit - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (last) {
        if (tid == 0) arrivals[bh] = 0;
        mem_fence(CLK_GLOBAL_MEM_FENCE);
        for (int i = 0; i < Tq; i++)
            combine_row(opart, mlpart, gain, out, os, o_off, b, h, bh, i, nsplit, dv, lambda, norm, norm_eps, out_scale,
                        cred);
    }
#endif
}
