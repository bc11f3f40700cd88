/* Tensor-core GEMM: c[M,N] = epilogue(a[M,K] @ B) on the m16n8k16 fragments of mma.cl, for
 * 16-bit weights B (bf16, MMA_IN 1) with a (ADT) rounded to the weights' type as it is
 * staged, or fp32 weights as tf32 (MMA_IN 3: a and B staged as they are, both rounded to
 * tf32 as fragments are formed) -- as the caller's precision allows; products accumulate in
 * fp32; c and the residual are CDT.  B is b[K,N] or,
 * with TRANS_B, b[N,K] (the tied LM head).  A work-group of GMM_WM x GMM_WN warps owns a
 * GMM_BM x GMM_BN tile of c; per GMM_BK-wide K step, B (and a, where it is stored as the
 * fragments' type: A_DIRECT) is copied by cp.async into a ring of GMM_STAGES local stages, up
 * to GMM_STAGES - 1 steps ahead; an a that needs rounding is read into registers one step
 * ahead and stored rounded (two stages); so the loads overlap the products.  The same argument list as gemm
 * (cl/layers.cl), so the host launches either; work-group dim 2 splits K into chunks of
 * kchunk (a multiple of GMM_BK) when nsplit > 1 (gemm_splitk_reduce, epilogue.cl).
 * With GMM_WG (the gemm.wgmma row, NVIDIA sm_90): the same copies and epilogue, the tiles in
 * wgmma's 64-byte swizzle and each step's products by warpgroup (cl/wgmma.cl), bf16 a and b. */

#ifndef GMM_WG
#define GMM_WG 0 /* 1: Hopper's warpgroup products (cl/wgmma.cl): the gemm.wgmma row */
#endif
#ifndef GWG_BM
#define GWG_BM 128 /* gemm.wgmma: rows of c per work-group, 64 a warpgroup */
#endif
#ifndef GWG_BN
#define GWG_BN 128 /* gemm.wgmma: columns of c per work-group (each warpgroup's width) */
#endif
#ifndef GWG_STAGES
#define GWG_STAGES 3 /* gemm.wgmma: local stages */
#endif
#if GMM_WG /* warps stacked along M, 16 rows each (the warpgroup's accumulator rows); 32-k steps (a 64-byte line a row) */
#define GMM_BM GWG_BM
#define GMM_BN GWG_BN
#define GMM_WM (GWG_BM / 16)
#define GMM_WN 1
#define GMM_BK 32
#define GMM_STAGES GWG_STAGES
#endif
#ifndef GMM_BM
#define GMM_BM 128 /* rows of c per work-group */
#endif
#ifndef GMM_BN
#define GMM_BN 128 /* columns of c per work-group */
#endif
#ifndef GMM_WM
#define GMM_WM 2 /* warps along M */
#endif
#ifndef GMM_WN
#define GMM_WN 2 /* warps along N */
#endif
#ifndef GMM_BK
#define GMM_BK 32 /* K per step (a multiple of 16) */
#endif
#ifndef GMM_STAGES
#define GMM_STAGES 2 /* local stages of the copy pipeline (A_DIRECT; otherwise 2) */
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif

#define GMM_NT (32 * GMM_WM * GMM_WN)
/* a stored as the fragments' type is copied as it is */
#define A_DIRECT ((ADT == 0 && MMA_IN == 3) || (ADT == 1 && MMA_IN == 1) || (ADT == 2 && MMA_IN == 2))
/* Copies of steps kt + 1 .. kt + NSTAGE - 1 are in flight while step kt computes; an a read
 * into registers for rounding is one step ahead, so that path keeps two stages. */
#if A_DIRECT
#define NSTAGE GMM_STAGES
#else
#define NSTAGE 2
#endif
#ifdef ALIGNED_A
#define ALIGNED_A_ 1
#else
#define ALIGNED_A_ 0
#endif
#ifdef ALIGNED_B
#define ALIGNED_B_ 1
#else
#define ALIGNED_B_ 0
#endif
#define WTM (GMM_BM / GMM_WM) /* a warp's rows */
#define WTN (GMM_BN / GMM_WN) /* a warp's columns */
#define MTI (WTM / 16)   /* its m-tiles */
#define NBI (WTN / 8)    /* its n-blocks */
#define LDAS (GMM_BK + MMA_PAD) /* rows padded by 16 bytes: ldmatrix row addresses fall in distinct banks */
#if TRANS_B
#define LDBS (GMM_BK + MMA_PAD) /* B staged n-major: Bs[n][k] */
#define B_STAGE (GMM_BN * LDBS)
#else
#define LDBS (GMM_BN + 8) /* B staged k-major: Bs[k][n]; 8 elements of padding also put tf32's
                             one-value B reads (rows t, t + 4) in distinct banks */
#define B_STAGE (GMM_BK * LDBS)
#endif
#if GMM_WG /* tiles in wgmma's swizzle (cl/wgmma.cl): 32-element rows, no padding; LDAS / LDBS are
             * the offsets a tile row (K-major) or a k-row (MN-major) advances by, every 8 rows */
#undef LDAS
#undef LDBS
#undef B_STAGE
#define LDAS GMM_BK
#define LDBS (TRANS_B ? GMM_BK : GMM_BN)
#define B_STAGE (GMM_BN * GMM_BK)
#define A_OFF(r, c) WG_K_OFF(r, c)
#define B_OFF(r, c) (TRANS_B ? WG_K_OFF(r, c) : WG_MN_OFF(r, c))
#if !A_DIRECT || MMA_IN != 1 || !MMA_PTX && MMA_NATIVE != 0
#error "gemm.wgmma: bf16 a and b, on the PTX or the portable body"
#endif
#else
#define A_OFF(r, c) ((r) * LDAS + (c))
#define B_OFF(r, c) ((r) * LDBS + (c))
#endif
#define GVEC (MMA_TF32 ? 4 : 8) /* elements per 16-byte chunk (f32 or 16-bit); the preprocessor reads it */
#define A_STAGE (GMM_BM * LDAS)
#define A_CHUNKS (GMM_BM * GMM_BK / 4 / GMM_NT) /* float4 chunks of a step per thread */
/* Whole-tile copies.  A step's tile wholly inside its matrix (every tile but those of the last
 * row or column of work-groups and a short last K step) needs no bounds tests: each thread
 * copies the 16-byte chunks at fixed offsets from a base it computes once -- a pointer
 * addition and a cp.async apiece, where gmm_stage spends about 25 integer instructions a
 * chunk, more than the products of the step.  Threads cover CPR chunks a row and RPP rows a
 * pass; the forms exist where the work-group's threads tile the stage exactly. */
#define A_CPR (GMM_BK / GVEC)
#define A_RPP (GMM_NT / A_CPR)
#define A_WHOLE (A_DIRECT && ALIGNED_A_ && GMM_NT % A_CPR == 0 && A_RPP > 0 && GMM_BM % A_RPP == 0)
#if TRANS_B
#define B_ROWS GMM_BN /* Bs[n][k] */
#define B_COLS GMM_BK
#else
#define B_ROWS GMM_BK /* Bs[k][n] */
#define B_COLS GMM_BN
#endif
#define B_CPR (B_COLS / GVEC)
#define B_RPP (GMM_NT / B_CPR)
#define B_WHOLE (ALIGNED_B_ && GMM_NT % B_CPR == 0 && B_RPP > 0 && B_ROWS % B_RPP == 0)
#if GMM_WG && ((A_WHOLE && A_RPP % 8) || (B_WHOLE && B_RPP % 8))
#error "gemm.wgmma: a whole-tile pass must cover whole 8-row groups of the swizzle"
#endif
/* the epilogue's paired stores; not on Intel's DPAS body, where the second unrolled epilogue
 * makes IGC spill 4.8 KB a thread for pvc (tools/offline-compile.sh) */
#define GMM_PAIRS (MMA_NATIVE != 2)
#if MMA_HW
#undef UNROLL
#define UNROLL _Pragma("unroll") /* register arrays stay registers only when fully unrolled */
#else
#undef UNROLL
#define UNROLL /* the portable body keeps its loops: unrolled, PoCL takes minutes to compile it */
#endif

/* This thread's part of A rows m0.., columns k0..k0+GMM_BK into registers (zero outside). */
inline void gmm_load_a(float4 ar[A_CHUNKS], __global const void *a, int M, int K, int lda, int m0, int k0, int tid)
{
    UNROLL for (int i = 0; i < A_CHUNKS; i++) {
        const int idx = tid + i * GMM_NT, r = idx / (GMM_BK / 4), c = (idx % (GMM_BK / 4)) * 4;
        const int m = m0 + r, k = k0 + c;
        const long at = (long)m * lda + k;
#if defined(ALIGNED_A) && ADT == 0
        if (m < M && k + 4 <= K) {
            ar[i] = vload4(0, (__global const float *)a + at);
            continue;
        }
#endif
        float4 x = (float4)(0.0f);
        if (m < M) {
            if (k < K) x.s0 = LOAD(ADT, a, at);
            if (k + 1 < K) x.s1 = LOAD(ADT, a, at + 1);
            if (k + 2 < K) x.s2 = LOAD(ADT, a, at + 2);
            if (k + 3 < K) x.s3 = LOAD(ADT, a, at + 3);
        }
        ar[i] = x;
    }
}

inline void gmm_store_a(__local mma_t *As, const float4 ar[A_CHUNKS], int tid)
{
    UNROLL for (int i = 0; i < A_CHUNKS; i++) {
        const int idx = tid + i * GMM_NT, r = idx / (GMM_BK / 4), c = (idx % (GMM_BK / 4)) * 4;
#if MMA_TF32
        vstore4(ar[i], 0, As + r * LDAS + c); /* rounded to tf32 by the fragment loads */
#else
        /* two packed roundings and one 8-byte store per chunk */
        *(__local uint2 *)(As + r * LDAS + c) = (uint2)(mma_pack2(ar[i].s0, ar[i].s1), mma_pack2(ar[i].s2, ar[i].s3));
#endif
    }
}

/* Rows r0.. (nrows exist) and columns c0.. (ncols exist) of the row-major src (row stride
 * ld) into a local stage of `rows` x `cols` laid out as A's or B's (is_b): 16-byte copies (cp.async on
 * NVIDIA) when rows are 16-byte aligned, zero-filled outside; element copies otherwise. */
inline void gmm_stage(__local mma_t *S, int is_b, int rows, int cols, __global const mma_t *src, int ld, int r0,
                      int c0, int nrows, int ncols, int aligned, int tid)
{
    const int chunks = cols / GVEC;
    for (int idx = tid; idx < rows * chunks; idx += GMM_NT) {
        const int r = idx / chunks, c = (idx % chunks) * GVEC, row = r0 + r, col = c0 + c;
        __local mma_t *to = S + (is_b ? B_OFF(r, c) : A_OFF(r, c));
        __global const mma_t *from = src + (long)row * ld + col;
        if (aligned) {
            const int bytes = row < nrows ? (int)sizeof(mma_t) * clamp(ncols - col, 0, GVEC) : 0;
            mma_copy16(to, bytes ? from : src, bytes);
        } else {
            for (int e = 0; e < GVEC; e++) to[e] = (row < nrows && col + e < ncols) ? from[e] : (mma_t)0;
        }
    }
}

/* A whole tile (see A_WHOLE): this thread's chunks, `passes` of them rpp rows apart, from src
 * (its first chunk in global memory, row stride ld) to dst (the same in the stage, lds) */
inline void gmm_stage_whole(__local mma_t *dst, int lds, __global const mma_t *src, int ld, int passes, int rpp)
{
    UNROLL for (int p = 0; p < passes; p++) mma_copy16(dst + p * rpp * lds, src + (long)p * rpp * ld, 16);
}

/* B's step k0 into a local stage: Bs[n][k] (TRANS_B) or Bs[k][n]; whole: the tile lies inside
 * B, bsrc the thread's first chunk of it, bdst the thread's place in the stage */
inline void gmm_load_b(__local mma_t *Bs, __global const mma_t *b, int N, int K, int ldb, int n0, int k0, int tid,
                       int whole, __global const mma_t *bsrc, int bdst)
{
#if B_WHOLE
    if (whole) {
        gmm_stage_whole(Bs + bdst, LDBS, bsrc, ldb, B_ROWS / B_RPP, B_RPP);
        return;
    }
#endif
#if TRANS_B
    gmm_stage(Bs, 1, GMM_BN, GMM_BK, b, ldb, n0, k0, N, K, ALIGNED_B_, tid);
#else
    gmm_stage(Bs, 1, GMM_BK, GMM_BN, b, ldb, k0, n0, K, N, ALIGNED_B_, tid);
#endif
}

/* A's step k0: copied into a local stage (A_DIRECT), or read into registers for
 * gmm_store_a; whole, asrc, adst as for gmm_load_b */
inline void gmm_fetch_a(__local mma_t *As, float4 ar[A_CHUNKS], __global const void *a, int M, int K, int lda, int m0,
                        int k0, int tid, int whole, __global const mma_t *asrc, int adst)
{
#if A_WHOLE
    if (whole) {
        gmm_stage_whole(As + adst, LDAS, asrc, lda, GMM_BM / A_RPP, A_RPP);
        return;
    }
#endif
#if A_DIRECT
    gmm_stage(As, 0, GMM_BM, GMM_BK, (__global const mma_t *)a, lda, m0, k0, M, K, ALIGNED_A_, tid);
#else
    gmm_load_a(ar, a, M, K, lda, m0, k0, tid);
#endif
}

/* c[idx], c[idx + 1] (idx even, c's rows of even length, so the pair is aligned) in one store */
inline void gmm_store2(__global void *c, long idx, float v0, float v1)
{
#if CDT == 0
    vstore2((float2)(v0, v1), 0, (__global float *)c + idx);
#elif CDT == 1
    ((__global uint *)c)[idx >> 1] = mma_bf16x2(v0, v1);
#else
    vstore_half2_rte((float2)(v0, v1), (size_t)(idx >> 1), (__global half *)c);
#endif
}

__kernel __attribute__((reqd_work_group_size(GMM_NT, 1, 1))) TDACL_SUBGROUP_ATTR void gemm_mma(
    __global void *c, __global const void *a, __global const void *bv, __global const float *bias,
    __global const void *res, int M, int N, int K, int lda, int ldb, int ldc, int flags, __global float *part,
    int kchunk)
{
#if GMM_WG /* one array: tiles on 512-byte boundaries, and a size the space counts exactly */
    __local mma_t tiles[NSTAGE * (A_STAGE + B_STAGE)] __attribute__((aligned(1024)));
    __local mma_t *As = tiles, *Bs = tiles + NSTAGE * A_STAGE;
#else
    __local mma_t As[NSTAGE * A_STAGE] __attribute__((aligned(16)));
    __local mma_t Bs[NSTAGE * B_STAGE] __attribute__((aligned(16)));
#endif
    __global const mma_t *b = (__global const mma_t *)bv;
    const int tid = get_local_id(0), warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int wm = warp / GMM_WN, wn = warp % GMM_WN;
    const int m0 = get_group_id(1) * GMM_BM, n0 = get_group_id(0) * GMM_BN;
    /* this work-group's K chunk [klo, khi): the loads zero-fill past khi as past K */
    const int nsplit = get_num_groups(2), klo = get_group_id(2) * kchunk, khi = min(K, klo + kchunk);
    const int nk = (khi - klo + GMM_BK - 1) / GMM_BK;

    float acc[MTI][NBI][4];
    UNROLL for (int i = 0; i < MTI; i++)
        UNROLL for (int j = 0; j < NBI; j++)
            UNROLL for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    float4 ar[A_CHUNKS]; /* unused (and dropped) when A_DIRECT */
    /* whole-tile copies: each thread's first chunk of step 0, in global memory and in a stage
     * (pointers formed only; read only for tiles inside the matrices) */
    const int ar0 = tid / A_CPR, ac0 = (tid % A_CPR) * GVEC, br0 = tid / B_CPR, bc0 = (tid % B_CPR) * GVEC;
    __global const mma_t *asrc = (__global const mma_t *)a + (long)(m0 + ar0) * lda + klo + ac0;
#if TRANS_B
    __global const mma_t *bsrc = b + (long)(n0 + br0) * ldb + klo + bc0;
    const long bstep = GMM_BK; /* a step's advance in B */
#else
    __global const mma_t *bsrc = b + (long)(klo + br0) * ldb + n0 + bc0;
    const long bstep = (long)GMM_BK * ldb;
#endif
    const int adst = A_OFF(ar0, ac0), bdst = B_OFF(br0, bc0);
    const int a_rows_in = m0 + GMM_BM <= M, b_cols_in = n0 + GMM_BN <= N;
    /* steps 0 .. NSTAGE - 2 into their stages, one copy group each (empty past the last step,
     * so that the count of groups in flight stays NSTAGE - 1 at every wait) */
    for (int s = 0; s < NSTAGE - 1; s++) {
        if (s < nk) {
            const int k0 = klo + s * GMM_BK, k_in = k0 + GMM_BK <= khi;
            gmm_fetch_a(As + s * A_STAGE, ar, a, M, khi, lda, m0, k0, tid, a_rows_in && k_in, asrc + s * GMM_BK, adst);
            gmm_load_b(Bs + s * B_STAGE, b, N, khi, ldb, n0, k0, tid, b_cols_in && k_in, bsrc + s * bstep, bdst);
        }
        mma_copy_commit();
    }
    if (!A_DIRECT) gmm_store_a(As, ar, tid);

    for (int kt = 0; kt < nk; kt++) {
        const int cur = kt % NSTAGE, next = kt + NSTAGE - 1;
        MMA_COPY_WAIT(NSTAGE - 2);
#if GMM_WG
        wg_tiles_ready();
#endif
        barrier(CLK_LOCAL_MEM_FENCE); /* step kt staged; stage next % NSTAGE was last read in kt-1 */
        if (next < nk) {
            const int k0 = klo + next * GMM_BK, k_in = k0 + GMM_BK <= khi;
            gmm_fetch_a(As + (next % NSTAGE) * A_STAGE, ar, a, M, khi, lda, m0, k0, tid, a_rows_in && k_in,
                        asrc + next * GMM_BK, adst);
            gmm_load_b(Bs + (next % NSTAGE) * B_STAGE, b, N, khi, ldb, n0, k0, tid, b_cols_in && k_in,
                       bsrc + next * bstep, bdst);
        }
        mma_copy_commit();
#if GMM_WG
        /* this warpgroup's 64 rows of A, all of B: the products waited for within the step */
        __local const mma_t *Aw = As + cur * A_STAGE + (warp >> 2) * 64 * GMM_BK, *Bw = Bs + cur * B_STAGE;
        wg_begin();
        UNROLL for (int kk = 0; kk < GMM_BK / 16; kk++) wg_mma_k16(acc, Aw, Bw, kk);
        wg_end(acc);
#else
        __local const mma_t *At = As + cur * A_STAGE + wm * WTM * LDAS;
#if TRANS_B
        __local const mma_t *Bt = Bs + cur * B_STAGE + wn * WTN * LDBS;
#else
        __local const mma_t *Bt = Bs + cur * B_STAGE + wn * WTN;
#endif
        UNROLL for (int kk = 0; kk < GMM_BK / 16; kk++) {
            frag_a af[MTI];
            UNROLL for (int mt = 0; mt < MTI; mt++) mma_load_a(&af[mt], At + 16 * mt * LDAS + 16 * kk, LDAS);
            UNROLL for (int n2 = 0; n2 < NBI / 2; n2++) {
                frag_b b0, b1;
#if TRANS_B
                mma_load_b_nk(&b0, &b1, Bt + 16 * n2 * LDBS + 16 * kk, LDBS);
#else
                mma_load_b_kn(&b0, &b1, Bt + 16 * kk * LDBS + 16 * n2, LDBS);
#endif
                UNROLL for (int mt = 0; mt < MTI; mt++) {
                    mma_acc(acc[mt][2 * n2], &af[mt], &b0);
                    mma_acc(acc[mt][2 * n2 + 1], &af[mt], &b1);
                }
            }
        }
        /* the other stage is free: every warp passed this step's barrier after reading it */
        if (!A_DIRECT && kt + 1 < nk) gmm_store_a(As + ((kt + 1) % NSTAGE) * A_STAGE, ar, tid);
#endif
    }
    MMA_COPY_WAIT(0);

    /* lane (g, t) holds rows g and g + 8 of each m-tile, columns 2t and 2t + 1 of each n-block;
     * one chunk: the epilogue at once, else this chunk's raw sums to part */
    __global float *out = part + (long)get_group_id(2) * M * N;
    if (GMM_PAIRS && nsplit == 1 && a_rows_in && b_cols_in && !(ldc & 1)) {
        /* a tile inside c with aligned pairs: no bounds tests, one store per pair (one loop for
         * both forms cost the f32-a rows 7-10 % on the H100: bench/results/gemm-forward-h100/final/) */
        UNROLL for (int mt = 0; mt < MTI; mt++)
            UNROLL for (int nb = 0; nb < NBI; nb++)
                UNROLL for (int h = 0; h < 2; h++) {
                    const int m = m0 + wm * WTM + 16 * mt + g + 8 * h, n = n0 + wn * WTN + 8 * nb + 2 * t;
                    const long idx = (long)m * ldc + n;
                    gmm_store2(c, idx, epilogue(acc[mt][nb][2 * h], flags, bias, n, res, idx),
                               epilogue(acc[mt][nb][2 * h + 1], flags, bias, n + 1, res, idx + 1));
                }
        return;
    }
    UNROLL for (int mt = 0; mt < MTI; mt++)
        UNROLL for (int nb = 0; nb < NBI; nb++)
            UNROLL for (int e = 0; e < 4; e++) {
                const int m = m0 + wm * WTM + 16 * mt + g + 8 * (e >> 1);
                const int n = n0 + wn * WTN + 8 * nb + 2 * t + (e & 1);
                if (m < M && n < N) {
                    if (nsplit > 1) {
                        out[(long)m * N + n] = acc[mt][nb][e];
                    } else {
                        const long idx = (long)m * ldc + n;
                        STORE(CDT, c, idx, epilogue(acc[mt][nb][e], flags, bias, n, res, idx));
                    }
                }
            }
}
