/* Transformer layers around attention: embedding, LayerNorm/RMSNorm, RoPE, and the matmuls
 * (a tiled GEMM for prefill and a GEMV for decode) with bias, GELU and residual fused into
 * their epilogues.  Activations are fp32; weights are stored as WDT (fp32 or bf16). */

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
#ifndef NORM_WG
#define NORM_WG 128 /* work-items per row in the norm kernel */
#endif
#ifndef GV_WG
#define GV_WG 128 /* work-items per work-group of the GEMV kernels */
#endif
#ifndef GV_M
#define GV_M 1 /* rows of A handled together by the GEMV kernels (decode batch) */
#endif

/* ---- embedding: x[row] = wte[token] (+ wpe[pos]) ---- */

__kernel void embed(__global float *x, __global const int *tokens, __global const void *wte,
                    __global const void *wpe, int C, int T, int pos0, int rows)
{
    int c = get_global_id(0), row = get_global_id(1);
    if (c >= C || row >= rows) return;
    int tok = tokens[row];
    float v = LOAD(WDT, wte, (long)tok * C + c);
    if (wpe) v += LOAD(WDT, wpe, (long)(pos0 + row % T) * C + c);
    x[(long)row * C + c] = v;
}

/* ---- LayerNorm (rms = 0: (x - mean) / sqrt(var + eps) * w + b) or RMSNorm (rms = 1) ---- */

__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1))) void norm_rows(
    __global float *out, __global const float *x, __global const float *w, __global const float *b, int C,
    float eps, int rms)
{
    __local float red[NORM_WG];
    const int tid = get_local_id(0);
    const long row = get_group_id(1);
    __global const float *xr = x + row * C;
    float sum = 0.0f;
    if (!rms)
        for (int c = tid; c < C; c += NORM_WG) sum += xr[c];
    red[tid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = NORM_WG / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float mean = rms ? 0.0f : red[0] / (float)C;
    barrier(CLK_LOCAL_MEM_FENCE);
    float sq = 0.0f;
    for (int c = tid; c < C; c += NORM_WG) {
        float v = xr[c] - mean;
        sq = fma(v, v, sq);
    }
    red[tid] = sq;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = NORM_WG / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float inv = rsqrt(red[0] / (float)C + eps);
    for (int c = tid; c < C; c += NORM_WG) {
        float v = (xr[c] - mean) * inv * w[c];
        if (b) v += b[c];
        out[row * C + c] = v;
    }
}

/* ---- RoPE, rotate-half, in place on the q/k views of the QKV rows ----
 * Row r of qkv (width ld) is token t = r % T of its sequence at position pos0 + t.  View v
 * (q1, k1[, q2, k2]) starts at column view_cols[v]; head h at + h*d.  Element m < d/2 pairs
 * with m + d/2 and turns by angle pos * theta^(-2m/d), read from the host's cos/sin table
 * [pos][d/2] (computed in double so long positions keep their precision). */
__kernel void rope(__global float *qkv, int ld, int T, int pos0, int rows, int H, int d, int4 view_cols,
                   int nviews, __global const float *cos_t, __global const float *sin_t)
{
    const int m = get_global_id(0), hv = get_global_id(1), row = get_global_id(2);
    const int hd = d / 2;
    if (m >= hd || hv >= H * nviews || row >= rows) return;
    const int v = hv / H, h = hv - (hv / H) * H;
    const int col = (v == 0 ? view_cols.s0 : v == 1 ? view_cols.s1 : v == 2 ? view_cols.s2 : view_cols.s3) + h * d;
    const long pos = pos0 + row % T;
    __global float *p = qkv + (long)row * ld + col;
    const float c = cos_t[pos * hd + m], s = sin_t[pos * hd + m];
    const float x1 = p[m], x2 = p[m + hd];
    p[m] = x1 * c - x2 * s;
    p[m + hd] = x2 * c + x1 * s;
}

/* ---- GEMM: C[M,N] = epilogue(A[M,K] B[K,N]) ----
 * A fp32 with row stride lda; B in WDT (row stride ldb, or transposed when TRANS_B); C and
 * the residual R with row stride ldc.  Work-item (rg, cg) owns rows 4*(rg + NRG*i4) + e and
 * columns 4*(cg + NCG*j4) + e of the GBM x GBN tile; A and B chunks are staged k-major. */
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
    __global float *c, __global const float *a, __global const void *b, __global const float *bias,
    __global const float *res, int M, int N, int K, int lda, int ldb, int ldc, int flags)
{
    __local float4 As4[GKC * GBM / 4];
    __local float4 Bs4[GKC * GBN / 4];
    __local float *As = (__local float *)As4, *Bs = (__local float *)Bs4;
    const int tid = get_local_id(0);
    const int rg = tid / GNCG, cg = tid - (tid / GNCG) * GNCG;
    const int m0 = get_group_id(1) * GBM, n0 = get_group_id(0) * GBN;
    float acc[GTM][GTN];
UNROLL
    for (int i = 0; i < GTM; i++)
UNROLL
        for (int j = 0; j < GTN; j++) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += GKC) {
        barrier(CLK_LOCAL_MEM_FENCE);
        /* A chunk: rows m0.., columns k0.. -> As[k][m] */
        for (int idx = tid; idx < GBM * GKC; idx += GNT) {
            int r = idx / GKC, kk = idx - (idx / GKC) * GKC;
            int m = m0 + r, k = k0 + kk;
            As[kk * GBM + r] = (m < M && k < K) ? a[(long)m * lda + k] : 0.0f;
        }
        /* B chunk -> Bs[k][n] */
#if TRANS_B
        for (int idx = tid; idx < GBN * GKC; idx += GNT) {
            int cc = idx / GKC, kk = idx - (idx / GKC) * GKC;
            Bs[kk * GBN + cc] = loadB(b, ldb, k0 + kk, n0 + cc, K, N);
        }
#else
        for (int idx = tid; idx < GBN * GKC; idx += GNT) {
            int kk = idx / GBN, cc = idx - (idx / GBN) * GBN;
            Bs[kk * GBN + cc] = loadB(b, ldb, k0 + kk, n0 + cc, K, N);
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
UNROLL
    for (int i = 0; i < GTM; i++) {
        int m = m0 + 4 * (rg + GNRG * (i / 4)) + i % 4;
        if (m >= M) continue;
UNROLL
        for (int j = 0; j < GTN; j++) {
            int n = n0 + 4 * (cg + GNCG * (j / 4)) + j % 4;
            if (n >= N) continue;
            long idx = (long)m * ldc + n;
            c[idx] = epilogue(acc[i][j], flags, bias, n, res, idx);
        }
    }
}

/* ---- GEMV for decode: C[m, n] for m < GV_M rows of A, B [K, N] not transposed ----
 * Two passes.  gemv_part: work-group (column block, K chunk) covers GV_COLS columns and
 * k0 <= k < k1; its work-items split the chunk into GV_WG / GV_COLS interleaved rows, so
 * each weight row segment is read coalesced and once for all GV_M rows.  Splitting K over
 * work-groups as well is what keeps enough loads in flight for a narrow layer (N = 768 is
 * 12 column blocks).  gemv_reduce sums the chunks' partials [KSPLIT][GV_M][N] and applies
 * the epilogue. */
#define GV_COLS 64
#define GV_KS (GV_WG / GV_COLS)

__kernel __attribute__((reqd_work_group_size(GV_WG, 1, 1))) void gemv_part(
    __global float *part, __global const float *a, __global const void *b, int M, int N, int K, int lda, int ldb,
    int kchunk)
{
    __local float red[GV_KS][GV_M][GV_COLS];
    const int tid = get_local_id(0), col = tid % GV_COLS, ks = tid / GV_COLS;
    const int n = get_group_id(0) * GV_COLS + col, chunk = get_group_id(1);
    const int k0 = chunk * kchunk, k1 = min(K, k0 + kchunk);
    float acc[GV_M];
UNROLL
    for (int m = 0; m < GV_M; m++) acc[m] = 0.0f;
    if (n < N) {
        int k = k0 + ks;
        /* four independent weight loads in flight per work-item */
        for (; k + 3 * GV_KS < k1; k += 4 * GV_KS) {
            float w0 = LOAD(WDT, b, (long)k * ldb + n), w1 = LOAD(WDT, b, (long)(k + GV_KS) * ldb + n);
            float w2 = LOAD(WDT, b, (long)(k + 2 * GV_KS) * ldb + n), w3 = LOAD(WDT, b, (long)(k + 3 * GV_KS) * ldb + n);
UNROLL
            for (int m = 0; m < GV_M; m++)
                if (m < M) {
                    __global const float *am = a + (long)m * lda + k;
                    acc[m] = fma(am[0], w0, acc[m]);
                    acc[m] = fma(am[GV_KS], w1, acc[m]);
                    acc[m] = fma(am[2 * GV_KS], w2, acc[m]);
                    acc[m] = fma(am[3 * GV_KS], w3, acc[m]);
                }
        }
        for (; k < k1; k += GV_KS) {
            float w = LOAD(WDT, b, (long)k * ldb + n);
UNROLL
            for (int m = 0; m < GV_M; m++)
                if (m < M) acc[m] = fma(a[(long)m * lda + k], w, acc[m]);
        }
    }
UNROLL
    for (int m = 0; m < GV_M; m++) red[ks][m][col] = acc[m];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int i = tid; i < GV_M * GV_COLS; i += GV_WG) {
        const int m = i / GV_COLS, cc = i % GV_COLS, nn = get_group_id(0) * GV_COLS + cc;
        if (m < M && nn < N) {
            float sum = 0.0f;
            for (int s2 = 0; s2 < GV_KS; s2++) sum += red[s2][m][cc];
            part[((long)chunk * GV_M + m) * N + nn] = sum;
        }
    }
}

__kernel void gemv_reduce(__global float *c, __global const float *part, __global const float *bias,
                          __global const float *res, int M, int N, int ldc, int flags, int nchunks)
{
    const int n = get_global_id(0), m = get_global_id(1);
    if (n >= N || m >= M) return;
    float sum = 0.0f;
    for (int s = 0; s < nchunks; s++) sum += part[((long)s * GV_M + m) * N + n];
    long idx = (long)m * ldc + n;
    c[idx] = epilogue(sum, flags, bias, n, res, idx);
}

/* ---- GEMV with transposed B (the tied LM head: logits[m, n] = <a[m], wte[n]>) ----
 * One work-group per output column n: the work-items stride over the contiguous row of B,
 * then reduce. */
__kernel __attribute__((reqd_work_group_size(GV_WG, 1, 1))) void gemv_t(
    __global float *c, __global const float *a, __global const void *b, __global const float *bias,
    __global const float *res, int M, int N, int K, int lda, int ldb, int ldc, int flags)
{
    __local float red[GV_M][GV_WG];
    const int tid = get_local_id(0), n = get_group_id(0);
    float acc[GV_M];
UNROLL
    for (int m = 0; m < GV_M; m++) acc[m] = 0.0f;
    for (int k = tid; k < K; k += GV_WG) {
        float w = LOAD(WDT, b, (long)n * ldb + k);
UNROLL
        for (int m = 0; m < GV_M; m++)
            if (m < M) acc[m] = fma(a[(long)m * lda + k], w, acc[m]);
    }
UNROLL
    for (int m = 0; m < GV_M; m++) red[m][tid] = acc[m];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = GV_WG / 2; s > 0; s >>= 1) {
        if (tid < s)
UNROLL
            for (int m = 0; m < GV_M; m++) red[m][tid] += red[m][tid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (tid < GV_M && tid < M) {
        long idx = (long)tid * ldc + n;
        c[idx] = epilogue(red[tid][0], flags, bias, n, res, idx);
    }
}
