/* Transformer layers around attention: embedding, LayerNorm/RMSNorm, RoPE, and the matmuls
 * (a tiled GEMM for prefill and a GEMV for decode) with bias, GELU and residual fused into
 * their epilogues.  Weights are stored as WDT (fp32 or bf16); the residual stream x is fp32, the
 * other activations ADT (fp32 or bf16; the matmuls' C and residual CDT, cl/epilogue.cl). */

#ifndef WDT
#define WDT 0 /* storage dtype of weights (0 f32, 1 bf16, 2 f16) */
#endif
#ifndef GBM
#define GBM 64 /* GEMM rows per work-group */
#endif
#ifndef GBN
#define GBN 64 /* GEMM columns per work-group */
#endif
#ifndef GTM
#define GTM 4 /* GEMM rows per work-item (multiple of 4) */
#endif
#ifndef GTN
#define GTN 4 /* GEMM columns per work-item (multiple of 4) */
#endif
#ifndef GKC
#define GKC 16 /* GEMM k-chunk staged in local memory (multiple of 4) */
#endif
#ifndef TRANS_B
#define TRANS_B 0 /* 1: B[k][n] is stored at b[n * ldb + k] (the tied LM head reads wte) */
#endif
#define NORM_WG 128 /* work-items a row (a work-group) in the norm kernel */
#define NORM_HELD 8  /* a work-item's elements held in registers: rows up to 1024 wide are read once */
#ifndef GV_WG
#define GV_WG 128 /* work-items per work-group of the GEMV kernels */
#endif
#ifndef GV_M
#define GV_M 1 /* rows of A handled together by the GEMV kernels (decode batch) */
#endif

/* Row r of a step is token r % T of its sequence at position pos0 + r % T; or, with a row
 * map (a decode step of sequences at their own positions, T = 1), at rowmap[r].y, its KV
 * cache rows in sequence slot rowmap[r].x. */
inline long row_pos(__global const int2 *rowmap, int row, int T, int pos0)
{
    return rowmap ? (long)rowmap[row].y : (long)pos0 + row % T;
}

/* ---- embedding: x[row] = wte[token] (+ wpe[pos]) ---- */

__kernel void embed(__global float *x, __global const int *tokens, __global const void *wte,
                    __global const void *wpe, int C, int T, int pos0, int rows, __global const int2 *rowmap)
{
    int c = get_global_id(0), row = get_global_id(1);
    if (c >= C || row >= rows) return;
    int tok = tokens[row];
    float v = LOAD(WDT, wte, (long)tok * C + c);
    if (wpe) v += LOAD(WDT, wpe, row_pos(rowmap, row, T, pos0) * C + c);
    x[(long)row * C + c] = v;
}

/* ---- LayerNorm (rms = 0: (x - mean) / sqrt(var + eps) * w + b) or RMSNorm (rms = 1) ----
 * A work-group a row.  The row is read once (a work-item's first NORM_HELD elements stay in
 * registers; rows wider than NORM_WG x NORM_HELD read the rest again), and the mean and the
 * variance are two passes over those values, so the variance keeps its precision. */

/* the sum of v over the work-group, to every work-item: within each warp by shuffles on
 * NVIDIA, then the warps' partials; elsewhere through local memory (red: NORM_WG floats) */
inline float norm_sum(__local float *red, float v)
{
    const int tid = get_local_id(0);
    float s = 0.0f;
#if TDACL_NVIDIA
    for (int o = 16; o > 0; o >>= 1) {
        float u;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(u) : "f"(v), "r"(o));
        v += u;
    }
    if ((tid & 31) == 0) red[tid >> 5] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int w = 0; w < NORM_WG / 32; w++) s += red[w];
#else
    red[tid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 s4 = (float4)(0.0f);
    for (int j = 0; j < NORM_WG / 4; j++) s4 += vload4(j, red);
    s = (s4.x + s4.y) + (s4.z + s4.w);
#endif
    barrier(CLK_LOCAL_MEM_FENCE); /* red is reused */
    return s;
}

__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void norm_rows(
    __global void *out, __global const float *x, __global const float *w, __global const float *b, int C,
    float eps, int rms)
{
    __local float red[NORM_WG];
    const int tid = get_local_id(0);
    const long row = get_group_id(1);
    __global const float *xr = x + row * C;
    float held[NORM_HELD], sum = 0.0f;
    UNROLL for (int j = 0; j < NORM_HELD; j++) {
        const int c = tid + NORM_WG * j;
        held[j] = c < C ? xr[c] : 0.0f;
        sum += held[j];
    }
    for (int c = tid + NORM_WG * NORM_HELD; c < C; c += NORM_WG) sum += xr[c];
    const float mean = rms ? 0.0f : norm_sum(red, sum) / (float)C;
    float sq = 0.0f;
    UNROLL for (int j = 0; j < NORM_HELD; j++) {
        const float v = tid + NORM_WG * j < C ? held[j] - mean : 0.0f;
        sq = fma(v, v, sq);
    }
    for (int c = tid + NORM_WG * NORM_HELD; c < C; c += NORM_WG) {
        const float v = xr[c] - mean;
        sq = fma(v, v, sq);
    }
    const float inv = rsqrt(norm_sum(red, sq) / (float)C + eps);
    UNROLL for (int j = 0; j < NORM_HELD; j++) {
        const int c = tid + NORM_WG * j;
        if (c < C) {
            float v = (held[j] - mean) * inv * w[c];
            if (b) v += b[c];
            STORE(ADT, out, row * C + c, v);
        }
    }
    for (int c = tid + NORM_WG * NORM_HELD; c < C; c += NORM_WG) {
        float v = (xr[c] - mean) * inv * w[c];
        if (b) v += b[c];
        STORE(ADT, out, row * C + c, v);
    }
}

/* ---- RoPE, rotate-half, in place on the q/k views of the QKV rows ----
 * Row r of qkv (width ld) is token t = r % T of its sequence at position pos0 + t.  View v
 * (q1, k1[, q2, k2]) starts at column view_cols[v]; head h at + h*d.  Element m < d/2 pairs
 * with m + d/2 and turns by angle pos * theta^(-2m/d), read from the host's cos/sin table
 * [pos][d/2] (computed in double so long positions keep their precision).  A work-item turns
 * `vec` consecutive pairs: 8 where d/2, ld and the view columns are multiples of 8 (one 16-byte
 * load of each half in 16-bit types), else 4 where they are multiples of 4, else 1 (element by
 * element the kernel ran at a third of the bandwidth on the H200).  With inv_norms (a prefill
 * from position 0 of a normalised kind) it also writes each turned row's 1 / max(||x||, 1e-12)
 * over the values as stored (rounded here as the stores round them), view v's (q1, k1, q2, k2)
 * at inv_v[(seq * H + h) * T + t], the attention's own layout, so the attention skips its norm
 * pass; a work-group then holds whole heads (the host's local size is a multiple of d/2/vec).
 * With kc (k2c), the turned k (k2) rows also go straight into the caches, as kv_append would
 * copy them, which then copies v only. */
inline float4 ld4_0(__global const void *p, long i) { return *(__global const float4 *)((__global const float *)p + i); }
inline float4 ld4_1(__global const void *p, long i)
{
    const uint2 u = *(__global const uint2 *)((__global const ushort *)p + i);
    return (float4)(as_float(u.x << 16), as_float(u.x & 0xffff0000u), as_float(u.y << 16), as_float(u.y & 0xffff0000u));
}
inline float4 ld4_2(__global const void *p, long i) { return vload_half4(0, (__global const half *)p + i); }
inline void st4_0(__global void *p, long i, float4 v) { *(__global float4 *)((__global float *)p + i) = v; }
inline void st4_1(__global void *p, long i, float4 v)
{
    *(__global uint2 *)((__global ushort *)p + i) =
        (uint2)((uint)f32_to_bf16(v.x) | (uint)f32_to_bf16(v.y) << 16, (uint)f32_to_bf16(v.z) | (uint)f32_to_bf16(v.w) << 16);
}
inline void st4_2(__global void *p, long i, float4 v) { vstore_half4_rte(v, 0, (__global half *)p + i); }
/* the 8 elements from index i (a multiple of 8) of w; 16-bit types in one 16-byte store */
inline void st8_0(__global void *p, long i, const float *w)
{
    vstore4((float4)(w[0], w[1], w[2], w[3]), 0, (__global float *)p + i);
    vstore4((float4)(w[4], w[5], w[6], w[7]), 1, (__global float *)p + i);
}
inline void st8_1(__global void *p, long i, const float *w)
{
    uint u[4];
    for (int e = 0; e < 4; e++) u[e] = (uint)f32_to_bf16(w[2 * e]) | (uint)f32_to_bf16(w[2 * e + 1]) << 16;
    *(__global uint4 *)((__global ushort *)p + i) = (uint4)(u[0], u[1], u[2], u[3]);
}
inline void st8_2(__global void *p, long i, const float *w)
{
    vstore_half8_rte((float8)(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]), 0, (__global half *)p + i);
}
/* v as a store of that dtype keeps it (the inverse norms are of the values as stored) */
inline float as_stored_0(float v) { return v; }
inline float as_stored_1(float v) { return as_float((uint)f32_to_bf16(v) << 16); }
inline float as_stored_2(float v)
{
    ushort u;
    vstore_half_rte(v, 0, (__private half *)&u);
    return vload_half(0, (__private const half *)&u);
}
#define AS_STORED(dt, v) TDACL_CAT(as_stored_, dt)(v)
#define ROPE_WG 256 /* the largest local size the host uses */
/* where column c of this row's key goes in a cache [slots, ctx, H d] (kv_append's addressing) */
#define ROPE_CACHE_AT(c) ((rowmap ? (long)rowmap[row].x : (long)(slot0 + row / T)) * cache_ld + pos * (H * d) + (c))
__kernel void rope(__global void *qkv, int ld, int T, int pos0, int rows, int H, int d, int4 view_cols,
                   int nviews, __global const float *cos_t, __global const float *sin_t,
                   __global const int2 *rowmap, int vec, __global float *inv_0, __global float *inv_1,
                   __global float *inv_2, __global float *inv_3, __global void *kc, __global void *k2c,
                   long cache_ld, int slot0)
{
    __global float *const inv_norms = inv_0; /* NULL: no norms */
    __local float part[ROPE_WG];
    /* dimension 0 runs over (head and view, group of vec pairs), dimension 1 over rows */
    const int hd = d / 2, per_head = hd / vec, i = get_global_id(0), row = get_global_id(1);
    const int hv = i / per_head, m = (i - hv * per_head) * vec, live = hv < H * nviews && row < rows;
    const int v = hv / H, h = hv - (hv / H) * H;
    float ss = 0.0f;
    if (live) {
        const int col = (v == 0 ? view_cols.s0 : v == 1 ? view_cols.s1 : v == 2 ? view_cols.s2 : view_cols.s3) + h * d;
        const long pos = row_pos(rowmap, row, T, pos0);
        const long at = (long)row * ld + col;
        __global void *cache = kc && (v & 1) ? (v == 1 ? kc : k2c) : NULL;
        const long to = cache ? ROPE_CACHE_AT(h * d) : 0;
        if (vec == 8) { /* the host checked the alignment (see above) */
            /* turned in place, four angles at a time (few registers: Intel's SIMD32 spilled
             * with every operand an array of 8) */
            float x1[8], x2[8];
            LOAD8(ADT, qkv, at + m, x1);
            LOAD8(ADT, qkv, at + m + hd, x2);
            for (int e0 = 0; e0 < 8; e0 += 4) {
                const float4 c4 = vload4(0, cos_t + pos * hd + m + e0), s4 = vload4(0, sin_t + pos * hd + m + e0);
                const float c[4] = {c4.x, c4.y, c4.z, c4.w}, s[4] = {s4.x, s4.y, s4.z, s4.w};
                for (int e = 0; e < 4; e++) {
                    const float a = x1[e0 + e], b = x2[e0 + e];
                    x1[e0 + e] = a * c[e] - b * s[e], x2[e0 + e] = b * c[e] + a * s[e];
                }
            }
            TDACL_CAT(st8_, ADT)(qkv, at + m, x1);
            TDACL_CAT(st8_, ADT)(qkv, at + m + hd, x2);
            if (cache) { /* the same values into the cache (the same rounding: the same bits) */
                TDACL_CAT(st8_, ADT)(cache, to + m, x1);
                TDACL_CAT(st8_, ADT)(cache, to + m + hd, x2);
            }
            for (int e = 0; e < 8; e++) {
                const float y1 = AS_STORED(ADT, x1[e]), y2 = AS_STORED(ADT, x2[e]);
                ss += y1 * y1 + y2 * y2;
            }
        } else if (vec == 4) {
            const float4 c = *(__global const float4 *)(cos_t + pos * hd + m), s = *(__global const float4 *)(sin_t + pos * hd + m);
            const float4 x1 = TDACL_CAT(ld4_, ADT)(qkv, at + m), x2 = TDACL_CAT(ld4_, ADT)(qkv, at + m + hd);
            const float4 r1 = x1 * c - x2 * s, r2 = x2 * c + x1 * s;
            TDACL_CAT(st4_, ADT)(qkv, at + m, r1);
            TDACL_CAT(st4_, ADT)(qkv, at + m + hd, r2);
            if (cache) {
                TDACL_CAT(st4_, ADT)(cache, to + m, r1);
                TDACL_CAT(st4_, ADT)(cache, to + m + hd, r2);
            }
            const float y[8] = {AS_STORED(ADT, r1.x), AS_STORED(ADT, r1.y), AS_STORED(ADT, r1.z), AS_STORED(ADT, r1.w),
                                AS_STORED(ADT, r2.x), AS_STORED(ADT, r2.y), AS_STORED(ADT, r2.z), AS_STORED(ADT, r2.w)};
            for (int e = 0; e < 8; e++) ss += y[e] * y[e];
        } else {
            const float c = cos_t[pos * hd + m], s = sin_t[pos * hd + m];
            const float x1 = LOAD(ADT, qkv, at + m), x2 = LOAD(ADT, qkv, at + m + hd);
            const float r1 = x1 * c - x2 * s, r2 = x2 * c + x1 * s;
            STORE(ADT, qkv, at + m, r1);
            STORE(ADT, qkv, at + m + hd, r2);
            if (cache) {
                STORE(ADT, cache, to + m, r1);
                STORE(ADT, cache, to + m + hd, r2);
            }
            const float y1 = AS_STORED(ADT, r1), y2 = AS_STORED(ADT, r2);
            ss = y1 * y1 + y2 * y2;
        }
    }
    if (inv_norms) { /* the same for the whole launch */
        const int lid = get_local_id(0);
        part[lid] = ss;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (live && m == 0) { /* the head's first work-item sums its per_head partials */
            float sum = 0.0f;
            for (int j = 0; j < per_head; j++) sum += part[lid + j];
            __global float *out = v == 0 ? inv_0 : v == 1 ? inv_1 : v == 2 ? inv_2 : inv_3;
            out[((long)(row / T) * H + h) * T + row % T] = 1.0f / fmax(sqrt(sum), 1e-12f);
        }
    }
}

/* ---- KV append: the C columns of row r of qkv that start at cols.s0 (k), cols.s1 (k2, -1:
 * none) and cols.s2 (v) go to the caches [slots, ctx, C] at sequence slot0 + r / T, position
 * row_pos(r); with a row map, at sequence rowmap[r].x.  KV_VEC consecutive elements a
 * work-item (vload8 needs only the element's alignment), the row's last ones one by one ---- */
#define KV_VEC 8
__kernel void kv_append(__global const void *qkv, int ld, int rows, int C, int4 cols, __global void *kc,
                        __global void *k2c, __global void *vc, long cache_ld, int T, int pos0, int slot0,
                        __global const int2 *rowmap)
{
    const int c0 = get_global_id(0) * KV_VEC, v = get_global_id(1), row = get_global_id(2);
    if (c0 >= C || row >= rows) return;
    const int col = v == 0 ? cols.s0 : v == 1 ? cols.s1 : cols.s2;
    __global void *dst = v == 0 ? kc : v == 1 ? k2c : vc;
    if (col < 0 || !dst) return;
    const long seq = rowmap ? rowmap[row].x : slot0 + row / T;
    const long from = (long)row * ld + col + c0, to = seq * cache_ld + row_pos(rowmap, row, T, pos0) * C + c0;
    if (c0 + KV_VEC <= C) {
#if ADT == 0
        vstore8(vload8(0, (__global const float *)qkv + from), 0, (__global float *)dst + to);
#else
        vstore8(vload8(0, (__global const ushort *)qkv + from), 0, (__global ushort *)dst + to); /* the bits */
#endif
        return;
    }
    for (int c = 0; c < C - c0; c++) STORE(ADT, dst, to + c, LOAD(ADT, qkv, from + c)); /* exact: ADT to ADT */
}

/* ---- Running V sums for Top-theta's VMC (docs/spec.md section 1c): vsum [slots, C] (fp32)
 * of sequence b gains the cache's V rows at positions p0 .. p0 + T - 1 (p0 = pos0, or
 * rowmap[b].y), and restarts at position 0; sequence slot0 + b, or rowmap[b].x ---- */
__kernel void v_sum_add(__global float *vsum, __global const void *vc, long cache_ld, int C, int T, int pos0,
                        int slot0, int seqs, __global const int2 *rowmap)
{
    const int c = get_global_id(0), b = get_global_id(1);
    if (c >= C || b >= seqs) return;
    const long seq = rowmap ? rowmap[b].x : slot0 + b;
    const int p0 = rowmap ? rowmap[b].y : pos0;
    float acc = p0 == 0 ? 0.0f : vsum[seq * C + c];
    for (int t = 0; t < T; t++) acc += LOAD(ADT, vc, seq * cache_ld + (long)(p0 + t) * C + c);
    vsum[seq * C + c] = acc;
}

/* ---- GEMM: C[M,N] = epilogue(A[M,K] B[K,N]) ----
 * A in ADT with row stride lda; B in WDT (row stride ldb, or transposed when TRANS_B); C and
 * the residual R (CDT) with row stride ldc.  Work-item (rg, cg) owns rows 4*(rg + NRG*i4) + e and
 * columns 4*(cg + NCG*j4) + e of the GBM x GBN tile; A and B chunks are staged k-major.
 * Work-group dim 2 splits K into chunks of kchunk (gemm_splitk_reduce, epilogue.cl) when nsplit > 1. */
#define GNRG (GBM / GTM)
#define GNCG (GBN / GTN)
#define GNT (GNRG * GNCG)

inline float loadB(__global const void *b, long ldb, int k, int n, int K, int N)
{
    if (k >= K || n >= N) return 0.0f;
#if TRANS_B
    return LOAD(WDT, b, (long)n * ldb + k);
#else
    return LOAD(WDT, b, (long)k * ldb + n);
#endif
}

__kernel __attribute__((reqd_work_group_size(GNT, 1, 1))) void gemm(
    __global void *c, __global const void *a, __global const void *b, __global const float *bias,
    __global const void *res, int M, int N, int K, int lda, int ldb, int ldc, int flags, __global float *part,
    int kchunk)
{
    __local float4 As4[GKC * GBM / 4];
    __local float4 Bs4[GKC * GBN / 4];
    __local float *As = (__local float *)As4, *Bs = (__local float *)Bs4;
    const int tid = get_local_id(0);
    const int rg = tid / GNCG, cg = tid - (tid / GNCG) * GNCG;
    const int m0 = get_group_id(1) * GBM, n0 = get_group_id(0) * GBN;
    const int nsplit = get_num_groups(2), klo = get_group_id(2) * kchunk, khi = min(K, klo + kchunk);
    float acc[GTM][GTN];
UNROLL
    for (int i = 0; i < GTM; i++)
UNROLL
        for (int j = 0; j < GTN; j++) acc[i][j] = 0.0f;

    for (int k0 = klo; k0 < khi; k0 += GKC) {
        barrier(CLK_LOCAL_MEM_FENCE);
        /* A chunk: rows m0.., columns k0.. -> As[k][m] */
        for (int idx = tid; idx < GBM * GKC; idx += GNT) {
            int r = idx / GKC, kk = idx - (idx / GKC) * GKC;
            int m = m0 + r, k = k0 + kk;
            As[kk * GBM + r] = (m < M && k < khi) ? LOAD(ADT, a, (long)m * lda + k) : 0.0f;
        }
        /* B chunk -> Bs[k][n] */
#if TRANS_B
        for (int idx = tid; idx < GBN * GKC; idx += GNT) {
            int cc = idx / GKC, kk = idx - (idx / GKC) * GKC;
            Bs[kk * GBN + cc] = loadB(b, ldb, k0 + kk, n0 + cc, khi, N);
        }
#else
        for (int idx = tid; idx < GBN * GKC; idx += GNT) {
            int kk = idx / GBN, cc = idx - (idx / GBN) * GBN;
            Bs[kk * GBN + cc] = loadB(b, ldb, k0 + kk, n0 + cc, khi, N);
        }
#endif
        barrier(CLK_LOCAL_MEM_FENCE);
UNROLL_BY(4)
        for (int kk = 0; kk < GKC; kk++) {
            float4 av[GTM / 4], bv[GTN / 4];
UNROLL
            for (int i4 = 0; i4 < GTM / 4; i4++) av[i4] = As4[kk * (GBM / 4) + rg + GNRG * i4];
UNROLL
            for (int j4 = 0; j4 < GTN / 4; j4++) bv[j4] = Bs4[kk * (GBN / 4) + cg + GNCG * j4];
UNROLL
            for (int i4 = 0; i4 < GTM / 4; i4++)
UNROLL
                for (int j4 = 0; j4 < GTN / 4; j4++) {
                    float a4[4] = {av[i4].s0, av[i4].s1, av[i4].s2, av[i4].s3};
                    float b4[4] = {bv[j4].s0, bv[j4].s1, bv[j4].s2, bv[j4].s3};
UNROLL
                    for (int e = 0; e < 4; e++)
UNROLL
                        for (int f = 0; f < 4; f++) acc[4 * i4 + e][4 * j4 + f] = fma(a4[e], b4[f], acc[4 * i4 + e][4 * j4 + f]);
                }
        }
    }
    /* one chunk: the epilogue at once; else this chunk's raw sums to part */
    __global float *out = part + (long)get_group_id(2) * M * N;
UNROLL
    for (int i = 0; i < GTM; i++) {
        int m = m0 + 4 * (rg + GNRG * (i / 4)) + i % 4;
        if (m >= M) continue;
UNROLL
        for (int j = 0; j < GTN; j++) {
            int n = n0 + 4 * (cg + GNCG * (j / 4)) + j % 4;
            if (n >= N) continue;
            if (nsplit > 1) {
                out[(long)m * N + n] = acc[i][j];
            } else {
                long idx = (long)m * ldc + n;
                STORE(CDT, c, idx, epilogue(acc[i][j], flags, bias, n, res, idx));
            }
        }
    }
}

/* ---- GEMV for decode: C[m, n] for m < GV_M rows of A, B [K, N] not transposed ----
 * One launch.  Work-group (column block, K chunk) covers GV_COLS columns and k0 <= k < k1;
 * a work-item takes GV_VEC adjacent columns and the work-group splits the chunk into GV_KS
 * interleaved rows, so each weight row segment is read coalesced and once for all GV_M
 * rows.  Splitting K over work-groups as well is what keeps enough loads in flight for a
 * narrow layer (N = 768 is 12 column blocks).  Each work-group writes its partial sums to part [nchunks][GV_M][N]; the last of
 * a column block's work-groups to arrive (a counter per block, put back to 0 by that
 * work-group) sums the chunks and applies the epilogue.
 * GV_NORM: the rows of A are LayerNorm'ed (rms = 0) or RMSNorm'ed with gain nw and bias nb
 *   over all K columns first; every work-group computes the statistics of its rows itself.
 * GV_SCATTER (the QKV projection of a decode step): RoPE (cos_t != NULL) turns the head
 *   pairs of the views starting at rope_cols (-1: none) within the block (GV_COLS % d == 0),
 *   and the columns of the views at cache_cols (k, k2, v; -1: none) also go to the KV caches
 *   kc, k2c, vc: row m at [m * cache_ld + pos * C + column - view start], or with a row map
 *   at sequence rowmap[m].x and position rowmap[m].y (row_pos). */
#ifndef GV_COLS
#define GV_COLS 64
#endif
#ifndef GV_NORM
#define GV_NORM 0
#endif
#ifndef GV_SCATTER
#define GV_SCATTER 0
#endif
#ifndef GV_VEC
#define GV_VEC 1 /* columns per work-item: 8 (one 16-byte bf16 load, two for f32) where the
                    row stride and the offset of B are multiples of 8 */
#endif
#define GV_CG (GV_COLS / GV_VEC) /* column groups of a block */
#define GV_KS (GV_WG / GV_CG)    /* interleaved K rows of a work-group */
#define GV_MAX2(x, y) ((x) > (y) ? (x) : (y))
#define GV_LBUF GV_MAX2(GV_MAX2(GV_KS * GV_COLS, GV_M * GV_WG), GV_M * GV_COLS)

/* GV_VEC consecutive weights of row segment b[idx ..] as fp32; `avail` of them exist (the
 * rest read as 0: the last column group of a row whose length is not a multiple of 8) */
inline void load_wvec(__global const void *b, long idx, int avail, float *w)
{
    if (avail < GV_VEC) {
UNROLL
        for (int v = 0; v < GV_VEC; v++) w[v] = v < avail ? LOAD(WDT, b, idx + v) : 0.0f;
        return;
    }
#if GV_VEC == 8
    LOAD8(WDT, b, idx, w);
#else
UNROLL
    for (int v = 0; v < GV_VEC; v++) w[v] = LOAD(WDT, b, idx + v);
#endif
}

#if GV_NORM
#define A_AT(m, k) ((LOAD(ADT, a, (long)(m) * lda + (k)) - nmean[m]) * ninv[m] * nw[k] + (nb ? nb[k] : 0.0f))
#else
#define A_AT(m, k) LOAD(ADT, a, (long)(m) * lda + (k))
#endif

/* mean (LayerNorm) and 1 / rms of the deviations of the M rows, over K columns: the rows of
 * a (lda apart), or of the staged copy xl (xk apart) where it is not NULL */
inline void row_stats(__global const void *a, int lda, __local const float *xl, int xk, int M, int K, int rms,
                      float eps, __local float *red, float *nmean, float *ninv)
{
    const int tid = get_local_id(0);
    for (int pass = 0; pass < 2; pass++) {
        float acc[GV_M];
UNROLL
        for (int m = 0; m < GV_M; m++) {
            acc[m] = 0.0f;
            if (m < M && (pass || !rms))
                for (int k = tid; k < K; k += GV_WG) {
                    const float raw = xl ? xl[m * xk + k] : LOAD(ADT, a, (long)m * lda + k);
                    float x = raw - (pass ? nmean[m] : 0.0f);
                    acc[m] = pass ? fma(x, x, acc[m]) : acc[m] + x;
                }
            red[m * GV_WG + tid] = acc[m];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int s = GV_WG / 2; s > 0; s >>= 1) {
            if (tid < s)
UNROLL
                for (int m = 0; m < GV_M; m++) red[m * GV_WG + tid] += red[m * GV_WG + tid + s];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
UNROLL
        for (int m = 0; m < GV_M; m++) {
            if (pass) ninv[m] = rsqrt(red[m * GV_WG] / (float)K + eps);
            else nmean[m] = rms ? 0.0f : red[m * GV_WG] / (float)K;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* the view of column n among up to four views of width C starting at cols (-1: none) */
inline int view_of(int n, int4 cols, int C)
{
    return (cols.s0 >= 0 && n >= cols.s0 && n < cols.s0 + C) ? 0 : (cols.s1 >= 0 && n >= cols.s1 && n < cols.s1 + C) ? 1
         : (cols.s2 >= 0 && n >= cols.s2 && n < cols.s2 + C) ? 2 : (cols.s3 >= 0 && n >= cols.s3 && n < cols.s3 + C) ? 3
         : -1;
}

inline int col_of(int4 cols, int v) { return v == 0 ? cols.s0 : v == 1 ? cols.s1 : v == 2 ? cols.s2 : cols.s3; }

/* The fusions' arguments only where the options compile them in: on NVIDIA's OpenCL every
 * pointer argument, NULL or not, adds about 0.3 us to each launch's host time, and a decode
 * step is host-bound (bench/results/decode-floor-h200/probe-args.txt) */
__kernel __attribute__((reqd_work_group_size(GV_WG, 1, 1))) void gemv(
    __global void *c, __global const void *a, __global const void *b, __global const float *bias,
    __global const void *res, __global float *part, __global uint *arrivals, int M, int N, int K, int lda, int ldb,
    int ldc, int flags, int kchunk, int nchunks
#if GV_NORM
    , __global const float *nw, __global const float *nb, float eps, int rms
#endif
#if GV_SCATTER
    , __global void *kc, __global void *k2c, __global void *vc, long cache_ld, int pos, int C, int d,
    int4 rope_cols, int4 cache_cols, __global const float *cos_t, __global const float *sin_t,
    __global const int2 *rowmap
#endif
    )
{
    /* one buffer for the rows' statistics, the K lanes' sums (a row at a time) and the
     * outputs: 4 KB at most, so devices with 32 KB of local memory run it */
    __local float lbuf[GV_LBUF];
    __local int last;
    const int tid = get_local_id(0), cg = tid % GV_CG, ks = tid / GV_CG;
    const int cb = get_group_id(0), n = cb * GV_COLS + cg * GV_VEC, chunk = get_group_id(1);
    const int k0 = chunk * kchunk, k1 = min(K, k0 + kchunk);
#if GV_NORM
    float nmean[GV_M], ninv[GV_M];
    row_stats(a, lda, NULL, 0, M, K, rms, eps, lbuf, nmean, ninv);
#endif
    float acc[GV_M][GV_VEC];
UNROLL
    for (int m = 0; m < GV_M; m++)
UNROLL
        for (int v = 0; v < GV_VEC; v++) acc[m][v] = 0.0f;
    if (n < N) {
        int k = k0 + ks;
        /* four independent weight loads in flight per work-item */
        for (; k + 3 * GV_KS < k1; k += 4 * GV_KS) {
            float w[4][GV_VEC];
UNROLL
            for (int r = 0; r < 4; r++) load_wvec(b, (long)(k + r * GV_KS) * ldb + n, N - n, w[r]);
UNROLL
            for (int m = 0; m < GV_M; m++)
                if (m < M)
UNROLL
                    for (int r = 0; r < 4; r++) {
                        const float av = A_AT(m, k + r * GV_KS);
UNROLL
                        for (int v = 0; v < GV_VEC; v++) acc[m][v] = fma(av, w[r][v], acc[m][v]);
                    }
        }
        for (; k < k1; k += GV_KS) {
            float w[GV_VEC];
            load_wvec(b, (long)k * ldb + n, N - n, w);
UNROLL
            for (int m = 0; m < GV_M; m++)
                if (m < M) {
                    const float av = A_AT(m, k);
UNROLL
                    for (int v = 0; v < GV_VEC; v++) acc[m][v] = fma(av, w[v], acc[m][v]);
                }
        }
    }
    /* the K lanes' sums, one row of A at a time.  The loop holds barriers, which some
     * compilers will not duplicate (PoCL: no unrolling), so row m of acc is taken by
     * selection: a run-time index into a private array would put it in scratch memory. */
    for (int m = 0; m < GV_M; m++) {
        if (m >= M) break; /* uniform */
UNROLL
        for (int mm = 0; mm < GV_M; mm++)
            if (mm == m)
UNROLL
                for (int v = 0; v < GV_VEC; v++) lbuf[ks * GV_COLS + cg * GV_VEC + v] = acc[mm][v];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int cc = tid; cc < GV_COLS; cc += GV_WG) {
            const int nn = cb * GV_COLS + cc;
            if (nn < N) {
                float sum = 0.0f;
                for (int s2 = 0; s2 < GV_KS; s2++) sum += lbuf[s2 * GV_COLS + cc];
                part[((long)chunk * GV_M + m) * N + nn] = sum;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* the last chunk of this column block to arrive sums them all (see attention_decode.cl) */
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (tid == 0) last = atomic_inc(arrivals + cb) == (uint)(nchunks - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!last) return;
    if (tid == 0) arrivals[cb] = 0;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    __global volatile const float *vpart = part;
    __local float *outv = lbuf; /* [GV_M][GV_COLS] */
    for (int i = tid; i < GV_M * GV_COLS; i += GV_WG) {
        const int m = i / GV_COLS, cc = i % GV_COLS, nn = cb * GV_COLS + cc;
        if (m < M && nn < N) {
            const float sum = sum_volatile(vpart + (long)m * N + nn, (long)GV_M * N, nchunks);
            long idx = (long)m * ldc + nn;
            outv[i] = epilogue(sum, flags, bias, nn, res, idx);
        }
    }
#if GV_SCATTER
    barrier(CLK_LOCAL_MEM_FENCE);
    const int hd = d / 2;
    for (int i = tid; i < GV_M * GV_COLS; i += GV_WG) {
        const int m = i / GV_COLS, cc = i % GV_COLS, nn = cb * GV_COLS + cc;
        if (m >= M || nn >= N) continue;
        float val = outv[i];
        /* row m's sequence slot and position (row_pos) */
        const long seq = rowmap ? rowmap[m].x : m, at = row_pos(rowmap, m, 1, pos);
        const int rv = cos_t ? view_of(nn, rope_cols, C) : -1;
        if (rv >= 0) {
            /* rotate-half within the head: element j < d/2 pairs with j + d/2 (cl/layers.cl rope) */
            const int j = (nn - col_of(rope_cols, rv)) % d, jj = j < hd ? j : j - hd;
            const float x1 = outv[j < hd ? i : i - hd], x2 = outv[j < hd ? i + hd : i];
            const float cs = cos_t[at * hd + jj], sn = sin_t[at * hd + jj];
            val = j < hd ? x1 * cs - x2 * sn : x2 * cs + x1 * sn;
        }
        STORE(CDT, c, (long)m * ldc + nn, val);
        const int cv = view_of(nn, cache_cols, C);
        if (cv >= 0) {
            __global void *dst = cv == 0 ? kc : cv == 1 ? k2c : vc; /* caches in C's dtype */
            STORE(CDT, dst, seq * cache_ld + at * C + (nn - col_of(cache_cols, cv)), val);
        }
    }
#else
    for (int i = tid; i < GV_M * GV_COLS; i += GV_WG) {
        const int m = i / GV_COLS, cc = i % GV_COLS, nn = cb * GV_COLS + cc;
        if (m < M && nn < N) STORE(CDT, c, (long)m * ldc + nn, outv[i]);
    }
#endif
}

/* a ranks before b: larger logit, then smaller index */
inline int ranks_before(float la, int ia, float lb, int ib) { return la > lb || (la == lb && ia < ib); }

/* ---- GEMV with transposed B (the tied LM head: logits[m, n] = <a[m], wte[n]>) ----
 * GVT_LANES work-items per output column n (GV_WG / GVT_LANES columns a work-group) stride
 * over the contiguous row of B, GV_VEC elements a load (8: one 16-byte load of bf16/f16,
 * two of f32, where K, the row stride and the offset of B are multiples of 8).  Each
 * work-item issues its first GVT_BATCH loads before anything else; with GVT_STAGE, while they
 * are in flight, the work-group stages the rows of a in local memory as f32 (xs: xk >= K floats
 * a row, zero past K); without, a is read from global memory, an element a product (eight
 * scalar loads per 16-byte load of bf16 weights: a GPU's L1 is then the limit; a CPU's cache
 * is not, and there the barrier inside the K loop costs).  Then one barrier and each column's
 * GVT_LANES sums added by one work-item.
 * GV_NORM (the model's final norm): the rows of a are LayerNorm'ed (rms = 0) or RMSNorm'ed with
 *   gain nw and bias nb first, each work-group computing their statistics itself (from the
 *   staged copy, normalized there in place, or from a).
 * GV_ARGMAX (the greedy pick, fused): each work-group's first largest c value of each row
 *   among its columns goes to part[m * groups + group] as (value's bits, column); the last
 *   work-group to arrive at count (put back to 0 by it) writes each row's first largest of
 *   those to ids[m]: larger value, then lower column; NaN never wins; a row of nothing but
 *   NaN picks 0 (sample_greedy's rule; c is f32). */
#ifndef GVT_LANES
#define GVT_LANES 8 /* the host sizes the grid by it (src/ops/gemm.c) */
#endif
#define GVT_COLS (GV_WG / GVT_LANES)
#define GVT_STEP (GVT_LANES * GV_VEC)
#ifndef GVT_BATCH
#define GVT_BATCH 6 /* loads in flight a work-item (12, a whole 768-long row at 8 lanes, was 6 % slower on an H100); a device class may take fewer (src/runtime/program.c) */
#endif
#ifndef GVT_STAGE
#define GVT_STAGE 0 /* 1: a staged in local memory, xk floats a row (the host's choice: where local memory is the device's own) */
#endif

/* a weight chunk as loaded: bf16 stays raw (four registers for eight weights, widened where
 * used), other dtypes are widened at the load */
#if WDT == 1 && GV_VEC == 8
typedef uint4 gvt_chunk;
inline void gvt_load(__global const void *b, long idx, int avail, gvt_chunk *w)
{
    if (avail >= 8) {
        *w = *(__global const uint4 *)((__global const ushort *)b + idx);
        return;
    }
    uint e[8];
UNROLL
    for (int v = 0; v < 8; v++) e[v] = v < avail ? ((__global const ushort *)b)[idx + v] : 0u;
    *w = (uint4)(e[0] | e[1] << 16, e[2] | e[3] << 16, e[4] | e[5] << 16, e[6] | e[7] << 16);
}
inline float gvt_w(gvt_chunk w, int v)
{
    const uint u = v < 2 ? w.x : v < 4 ? w.y : v < 6 ? w.z : w.w;
    return as_float(v & 1 ? u & 0xffff0000u : u << 16);
}
#else
typedef struct {
    float x[GV_VEC];
} gvt_chunk;
inline void gvt_load(__global const void *b, long idx, int avail, gvt_chunk *w) { load_wvec(b, idx, avail, w->x); }
inline float gvt_w(gvt_chunk w, int v) { return w.x[v]; }
#endif

#ifndef GV_ARGMAX
#define GV_ARGMAX 0
#endif

#if GV_ARGMAX
/* GV_ARGMAX's picks; val[m][j] holds column group * GVT_COLS + j of row m (j < cols) */
inline void gvt_argmax(__local float (*val)[GVT_COLS], int M, int N, __global int2 *part,
                       __global uint *count, __global int *ids, __local float *fv, __local int *iv, __local int *last)
{
    const int tid = get_local_id(0), group = get_group_id(0), groups = get_num_groups(0), c0 = group * GVT_COLS;
    if (tid < M) {
        /* columns in rising order: `>` keeps the first of equal values, and the first -inf of
         * a row with nothing larger */
        float bv = -INFINITY;
        int bi = N;
        for (int j = 0; j < GVT_COLS && c0 + j < N; j++)
            if (val[tid][j] > bv || (val[tid][j] == bv && bi == N)) bv = val[tid][j], bi = c0 + j;
        part[(long)tid * groups + group] = (int2)(as_int(bv), bi);
    }
    /* the last work-group to arrive picks (as gemv's chunks, attention_decode.cl) */
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (tid == 0) *last = atomic_inc(count) == (uint)(groups - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!*last) return;
    if (tid == 0) *count = 0;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    __global volatile const int2 *vp = part;
    for (int m = 0; m < GV_M; m++) {
        if (m >= M) break; /* uniform */
        float bv = -INFINITY;
        int bi = N;
        /* eight loads in flight: volatile loads compared one by one wait a memory latency each
         * (GPT-2's vocabulary is 1571 groups) */
        for (int g0 = tid; g0 < groups; g0 += 8 * GV_WG) {
            int2 p[8];
UNROLL
            for (int r = 0; r < 8; r++) p[r] = g0 + r * GV_WG < groups ? vp[(long)m * groups + g0 + r * GV_WG] : (int2)(0, N);
UNROLL
            for (int r = 0; r < 8; r++)
                if (p[r].y < N && ranks_before(as_float(p[r].x), p[r].y, bv, bi)) bv = as_float(p[r].x), bi = p[r].y;
        }
        fv[tid] = bv, iv[tid] = bi;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int h = GV_WG / 2; h > 0; h >>= 1) {
            if (tid < h && ranks_before(fv[tid + h], iv[tid + h], fv[tid], iv[tid])) fv[tid] = fv[tid + h], iv[tid] = iv[tid + h];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (tid == 0) ids[m] = iv[0] < N ? iv[0] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}
#endif

__kernel __attribute__((reqd_work_group_size(GV_WG, 1, 1))) void gemv_t(
    __global void *c, __global const void *a, __global const void *b, __global const float *bias,
    __global const void *res, int M, int N, int K, int lda, int ldb, int ldc, int flags, __local float4 *xs, int xk
#if GV_NORM
    , __global const float *nw, __global const float *nb, float eps, int rms
#endif
#if GV_ARGMAX
    , __global int2 *part, __global uint *count, __global int *ids
#endif
    )
{
    __local float red[GV_M][GV_WG];
    const int tid = get_local_id(0), lane = tid % GVT_LANES, n = get_group_id(0) * GVT_COLS + tid / GVT_LANES;
    const int kend = n < N ? K : 0; /* a column past N reads nothing */
    __local float *xf = (__local float *)xs;
#if GV_NORM
    float nmean[GV_M], ninv[GV_M];
#if !GVT_STAGE
    row_stats(a, lda, NULL, 0, M, K, rms, eps, &red[0][0], nmean, ninv);
#endif
#define GVT_NORMED(m, k, x) (((x) - nmean[m]) * ninv[m] * nw[k] + (nb ? nb[k] : 0.0f))
#else
#define GVT_NORMED(m, k, x) (x)
#endif
    /* two sums a row (even and odd elements): half the dependent chain */
    float acc[GV_M][2];
UNROLL
    for (int m = 0; m < GV_M; m++) acc[m][0] = acc[m][1] = 0.0f;
    for (int kb = 0; kb < K; kb += GVT_BATCH * GVT_STEP) { /* uniform */
        gvt_chunk w[GVT_BATCH]; /* declared here, it stays in registers */
UNROLL
        for (int r = 0; r < GVT_BATCH; r++) {
            const int k = kb + lane * GV_VEC + r * GVT_STEP;
            gvt_load(b, (long)n * ldb + k, kend - k, &w[r]);
        }
#if GVT_STAGE
        if (kb == 0) { /* uniform; the first loads are in flight meanwhile */
            for (int i = tid; i < GV_M * xk; i += GV_WG) {
                const int m = i / xk, k = i - m * xk;
                xf[i] = m < M && k < K ? LOAD(ADT, a, (long)m * lda + k) : 0.0f;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
#if GV_NORM
            row_stats(a, lda, xf, xk, M, K, rms, eps, &red[0][0], nmean, ninv);
            for (int i = tid; i < GV_M * xk; i += GV_WG) {
                const int m = i / xk, k = i - m * xk;
                if (m < M && k < K) xf[i] = GVT_NORMED(m, k, xf[i]);
            }
            barrier(CLK_LOCAL_MEM_FENCE);
#endif
        }
#endif
UNROLL
        for (int r = 0; r < GVT_BATCH; r++) {
            const int k = kb + lane * GV_VEC + r * GVT_STEP;
            if (k < kend)
UNROLL
                for (int m = 0; m < GV_M; m++)
                    if (m < M) {
                        float x[GV_VEC];
#if GVT_STAGE && GV_VEC == 8
                        /* k and xk are multiples of 8: two aligned 16-byte loads */
                        const float4 lo = xs[(m * xk + k) / 4], hi = xs[(m * xk + k) / 4 + 1];
                        x[0] = lo.s0, x[1] = lo.s1, x[2] = lo.s2, x[3] = lo.s3, x[4] = hi.s0, x[5] = hi.s1,
                        x[6] = hi.s2, x[7] = hi.s3;
#else
UNROLL
                        for (int v = 0; v < GV_VEC; v++)
                            x[v] = GVT_STAGE   ? xf[m * xk + k + v]
                                   : k + v < K ? GVT_NORMED(m, k + v, LOAD(ADT, a, (long)m * lda + k + v))
                                               : 0.0f;
#endif
UNROLL
                        for (int v = 0; v < GV_VEC; v++) acc[m][v & 1] = fma(x[v], gvt_w(w[r], v), acc[m][v & 1]);
                    }
        }
    }
UNROLL
    for (int m = 0; m < GV_M; m++) red[m][tid] = acc[m][0] + acc[m][1];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* work-item `lane` of a column adds row lane's sums (GV_M <= 8 <= GVT_LANES rows) */
#if GV_ARGMAX
    __local float val[GV_M][GVT_COLS];
    __local int iv[GV_WG], last;
#endif
    if (lane < GV_M && lane < M && n < N) {
        float sum = 0.0f;
        for (int l = 0; l < GVT_LANES; l++) sum += red[lane][tid - lane + l];
        long idx = (long)lane * ldc + n;
        const float out = epilogue(sum, flags, bias, n, res, idx);
        STORE(CDT, c, idx, out);
#if GV_ARGMAX
        val[lane][tid / GVT_LANES] = out;
#endif
    }
#undef GVT_NORMED
#if GV_ARGMAX
    barrier(CLK_LOCAL_MEM_FENCE); /* red's sums are read: it holds the picks now */
    gvt_argmax(val, M, N, part, count, ids, &red[0][0], iv, &last);
#endif
}

/* ---- sampling on the device (tdacl_model_sample; docs/spec.md §4.2) ----
 * One work-group per sequence b draws from its row of logits (row0 + b * row_stride):
 * greedy (temperature 0 or k = 1): the first largest logit.  Otherwise p_i proportional to
 * exp((logit_i - max) / temperature) over the k largest logits (ties to the lower index),
 * taken best first, or over all V in index order (k >= V); the draw is the first i whose
 * running sum exceeds u = U x sum, U = the top 24 bits of splitmix64 at state seed +
 * (b + 1) x 0x9e3779b97f4a7c15, over 2^24.  k <= SAMPLE_KMAX or k >= V (the host checks). */
#define SAMPLE_WG 256 /* also the radix of the selection below */
#define SAMPLE_KMAX 256

/* arr[i] <- sum of arr[0 .. i-1] (one work-item), total <- the sum of all n */
#define SCAN_EXCLUSIVE(T, arr, n, total)                                                           \
    do {                                                                                           \
        T acc_ = 0;                                                                                \
        for (int t_ = 0; t_ < (n); t_++) {                                                         \
            T e_ = (arr)[t_];                                                                      \
            (arr)[t_] = acc_;                                                                      \
            acc_ += e_;                                                                            \
        }                                                                                          \
        (total) = acc_;                                                                            \
    } while (0)

inline uint ord_key(float x)
{
    uint u = as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* larger float, larger key */
}

inline float draw_u01(ulong seed, int b)
{
    ulong z = seed + (ulong)(b + 1) * 0x9e3779b97f4a7c15UL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
    z ^= z >> 31;
    return (float)(uint)(z >> 40) * 0x1p-24f;
}

#ifndef ARGMAX_LOADS
#define ARGMAX_LOADS 4
#endif
/* The first largest logit of a row of V (every work-item gets it). */
inline int row_argmax(__global const float *l, int V, __local float *fval, __local int *ival)
{
    /* work-item t reads t, t + WG, ... (each load of the work-group one run of the row),
     * ARGMAX_LOADS loads in flight; its indices rise, so `>` keeps the first of equal maxima,
     * and the first -inf of a row with nothing larger; NaN never wins.  (H200, GPT-2's 50257:
     * a contiguous chunk a work-item 16.7 us; this 11.4-12.0 us with 4, 16 or 32 loads, 14.7
     * with 8; an empty launch's own floor there is about 5 us.) */
    const int tid = get_local_id(0);
    float bv = -INFINITY;
    int bi = V;
    int j = tid;
    for (; j + (ARGMAX_LOADS - 1) * SAMPLE_WG < V; j += ARGMAX_LOADS * SAMPLE_WG) {
        float v[ARGMAX_LOADS];
UNROLL
        for (int r = 0; r < ARGMAX_LOADS; r++) v[r] = l[j + r * SAMPLE_WG];
UNROLL
        for (int r = 0; r < ARGMAX_LOADS; r++)
            if (v[r] > bv || (v[r] == bv && bi == V)) bv = v[r], bi = j + r * SAMPLE_WG;
    }
    for (; j < V; j += SAMPLE_WG)
        if (l[j] > bv || (l[j] == bv && bi == V)) bv = l[j], bi = j;
    fval[tid] = bv, ival[tid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = SAMPLE_WG / 2; s > 0; s >>= 1) {
        if (tid < s && ranks_before(fval[tid + s], ival[tid + s], fval[tid], ival[tid]))
            fval[tid] = fval[tid + s], ival[tid] = ival[tid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int best = ival[0] < V ? ival[0] : 0; /* none: every logit NaN */
    barrier(CLK_LOCAL_MEM_FENCE);
    return best;
}

/* Three kernels with the same arguments, one per rule (the host picks), so no barrier sits
 * behind a branch: PoCL's default work-group method miscompiles that. */
#define SAMPLE_ARGS                                                                                 \
    __global int *out, __global const float *logits, long row0, long row_stride, int V, float temperature, int k, \
        ulong seed

__kernel __attribute__((reqd_work_group_size(SAMPLE_WG, 1, 1))) void sample_greedy(SAMPLE_ARGS)
{
    __local float fval[SAMPLE_WG];
    __local int ival[SAMPLE_WG];
    const int b = get_group_id(1);
    const int best = row_argmax(logits + row0 + b * row_stride, V, fval, ival);
    if (get_local_id(0) == 0) out[b] = best;
}

/* all V in index order: chunk sums, their prefix, then the chunk holding u */
__kernel __attribute__((reqd_work_group_size(SAMPLE_WG, 1, 1))) void sample_all(SAMPLE_ARGS)
{
    __local float fval[SAMPLE_WG];
    __local int ival[SAMPLE_WG];
    __local float total;
    __local int pick;
    const int tid = get_local_id(0), b = get_group_id(1);
    __global const float *l = logits + row0 + b * row_stride;
    const int chunk = (V + SAMPLE_WG - 1) / SAMPLE_WG, lo = min(V, tid * chunk), hi = min(V, lo + chunk);
    const float mx = l[row_argmax(l, V, fval, ival)], U = draw_u01(seed, b);
    float sum = 0.0f;
    for (int j = lo; j < hi; j++) sum += exp((l[j] - mx) / temperature);
    fval[tid] = sum;
    if (tid == 0) pick = V - 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) SCAN_EXCLUSIVE(float, fval, SAMPLE_WG, total);
    barrier(CLK_LOCAL_MEM_FENCE);
    const float u = U * total, start = fval[tid];
    if (u >= start && u < start + sum) {
        float acc = start;
        int j = lo;
        for (; j < hi - 1; j++) {
            acc += exp((l[j] - mx) / temperature);
            if (u < acc) break;
        }
        pick = j;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) out[b] = pick;
}

/* the k largest (k <= SAMPLE_KMAX): the key of the k-th largest by radix selection, 8 bits a
 * round; the candidates; best first; the draw */
__kernel __attribute__((reqd_work_group_size(SAMPLE_WG, 1, 1))) void sample_topk(SAMPLE_ARGS)
{
    __local float fval[SAMPLE_WG];
    __local int ival[SAMPLE_WG];
    __local uint hist[SAMPLE_WG];
    __local float cand_l[SAMPLE_KMAX], sort_l[SAMPLE_KMAX];
    __local int cand_i[SAMPLE_KMAX], sort_i[SAMPLE_KMAX];
    __local uint sel_prefix, sel_need, ncand;
    const int tid = get_local_id(0), b = get_group_id(1);
    __global const float *l = logits + row0 + b * row_stride;
    const int chunk = (V + SAMPLE_WG - 1) / SAMPLE_WG, lo = min(V, tid * chunk), hi = min(V, lo + chunk);
    const float mx = l[row_argmax(l, V, fval, ival)], U = draw_u01(seed, b);
    uint prefix = 0, mask = 0, need = (uint)k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        hist[tid] = 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = tid; j < V; j += SAMPLE_WG) {
            uint key = ord_key(l[j]);
            if ((key & mask) == prefix) atomic_inc(&hist[(key >> shift) & 255u]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid == 0) {
            uint above = 0;
            for (int dg = 255; dg >= 0; dg--) {
                if (above + hist[dg] >= need) {
                    sel_prefix = prefix | ((uint)dg << shift);
                    sel_need = need - above;
                    break;
                }
                above += hist[dg];
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        prefix = sel_prefix, need = sel_need, mask |= 255u << shift;
    }
    /* the candidates: every key above it, and the `need` lowest-index ones equal to it */
    uint equal = 0;
    for (int j = lo; j < hi; j++) equal += ord_key(l[j]) == prefix;
    hist[tid] = equal;
    if (tid == 0) ncand = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) {
        uint total;
        SCAN_EXCLUSIVE(uint, hist, SAMPLE_WG, total);
        (void)total;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint rank = hist[tid];
    for (int j = lo; j < hi; j++) {
        uint key = ord_key(l[j]);
        int take = key > prefix;
        if (key == prefix) take = rank++ < need;
        if (take) {
            uint slot = atomic_inc(&ncand);
            cand_l[slot] = l[j], cand_i[slot] = j;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* best first: each candidate's place is the number ranking before it */
    for (int i = tid; i < k; i += SAMPLE_WG) {
        int place = 0;
        for (int j = 0; j < k; j++) place += ranks_before(cand_l[j], cand_i[j], cand_l[i], cand_i[i]);
        sort_l[place] = cand_l[i], sort_i[place] = cand_i[i];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid == 0) {
        float sum = 0.0f;
        for (int i = 0; i < k; i++) sum += exp((sort_l[i] - mx) / temperature);
        const float u = U * sum;
        float acc = 0.0f;
        int p = sort_i[k - 1];
        for (int i = 0; i < k; i++) {
            acc += exp((sort_l[i] - mx) / temperature);
            if (u < acc) {
                p = sort_i[i];
                break;
            }
        }
        out[b] = p;
    }
}
