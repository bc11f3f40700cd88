/* The product of mma.cl on AMD and Intel matrix units (MMA_NATIVE 2..4).  Fragments stay what
 * the portable body makes them (references to their local tiles), and so do staging,
 * reductions and copies; only mma_acc changes.  Each lane loads, straight from the tile, the
 * operand registers the vendor's instruction expects of it; the instruction runs; the lane
 * keeps the results that sit where mma.cl's C layout wants them (row g or g + 8, column
 * 2t or 2t + 1).  The row and column maps below are chosen so that no value crosses lanes.
 * The price: a lane holds one column of an instruction's result and C wants two, so each
 * product takes two passes (x = 0: even columns, x = 1: odd), and part of each instruction's
 * rows or columns repeats others -- a 2x (DPAS on Xe-HPG, MFMA) to 4x (DPAS on Xe-HPC, WMMA)
 * overhead against the unit's peak, accepted until these bodies can be measured on hardware.
 *   2  Intel DPAS (cl_intel_subgroup_matrix_multiply_accumulate), sub-group MMA_SG = 8
 *      (Xe-HPG, M = 4) or 16 (Xe-HPC, Xe2, M = 8).  A warp is 32 / MMA_SG sub-groups (the
 *      kernels are built with that required sub-group size); each computes its own lanes' rows.
 *   3  AMD CDNA MFMA 4x4x4, 16 blocks (gfx90a, gfx94x): the block of quad g holds rows g and
 *      g + 8 (its rows 2 and 3 are zero), K in four steps.  A 64-lane wave is two warps.
 *   4  AMD RDNA3 WMMA 16x16x16 (wave32): a wave is a warp.
 * MMA_EMULATE 1 replaces each instruction by plain C written from the vendor's documented lane
 * layout: lane L's registers come from the same loaders the hardware path calls, with L in
 * place of the own lane, so a loader that puts an element in the wrong register or lane gives
 * a wrong product on PoCL (test_attention part mma-units, test_matmul). */

#if MMA_NATIVE >= 2

inline ushort frag_a_at(const frag_a *a, int r, int k) { return a->p[r * a->ld + k]; }
inline ushort frag_b_at(const frag_b *b, int k, int n) { return b->p[n * b->sn + k * b->sk]; }
inline uint pack_k2(ushort lo, ushort hi) { return (uint)lo | ((uint)hi << 16); }
/* the fragment column an instruction column n stands for in pass x */
inline int unit_col(int n, int x) { return 2 * (n & 3) + x; }
/* the 16-bit element h (0 low, 1 high) of a packed register, as f32 */
inline float unit_f32(uint r, int h) { return mma_to_f32((ushort)(r >> (16 * h))); }

#if MMA_HW && MMA_IN == 2 && MMA_NATIVE >= 3
#pragma OPENCL EXTENSION cl_khr_fp16 : enable /* AMD's f16 builtins take half vectors */
#endif

#if MMA_NATIVE == 2
/* ------------------------------------------------------------------- Intel DPAS --- */
#ifndef MMA_SG
#error "the DPAS body needs MMA_SG (8 or 16)"
#endif
#define DPAS_M (MMA_SG / 2) /* rows per sub-group: g and g + 8 of its MMA_SG / 4 row groups */
#define DPAS_Q (MMA_SG / 4)
#if MMA_IN == 1
#define DPAS_MAD intel_sub_group_bf16_bf16_matrix_mad_k16
#else
#define DPAS_MAD intel_sub_group_f16_f16_matrix_mad_k16
#endif
#if MMA_HW && !defined(cl_intel_subgroup_matrix_multiply_accumulate)
/* drivers whose headers leave the extension's macro undefined (Debian 12's IGC for DG2 and
 * PVC) still lower these builtins to DPAS: declare the overloads used here */
#if MMA_SG == 16
float8 __attribute__((overloadable)) DPAS_MAD(short8 a, int8 b, float8 acc);
#else
float4 __attribute__((overloadable)) DPAS_MAD(int4 a, int8 b, float4 acc);
#endif
#endif

/* the fragment row of instruction row i in sub-group s of the warp */
inline int dpas_row(int s, int i) { return DPAS_Q * s + i % DPAS_Q + 8 * (i / DPAS_Q); }
/* lane L's A register of row i: sub-group 16 holds element k = L, sub-group 8 holds k = 2L
 * (low half) and 2L + 1 */
inline uint dpas_a_reg(const frag_a *a, int s, int L, int i)
{
#if MMA_SG == 16
    return frag_a_at(a, dpas_row(s, i), L);
#else
    return pack_k2(frag_a_at(a, dpas_row(s, i), 2 * L), frag_a_at(a, dpas_row(s, i), 2 * L + 1));
#endif
}
/* lane L's B register j (k = 2j low, 2j + 1 high) of its column in pass x */
inline uint dpas_b_reg(const frag_b *b, int x, int L, int j)
{
    return pack_k2(frag_b_at(b, 2 * j, unit_col(L, x)), frag_b_at(b, 2 * j + 1, unit_col(L, x)));
}

/* d[i] = lane L's result of row i in pass x */
inline void dpas_pass(float d[DPAS_M], const frag_a *a, const frag_b *b, int x, int s, int L)
{
#if MMA_HW
    int bv[8];
    for (int j = 0; j < 8; j++) bv[j] = (int)dpas_b_reg(b, x, L, j);
#if MMA_SG == 16
    short av[8];
    for (int i = 0; i < 8; i++) av[i] = (short)dpas_a_reg(a, s, L, i);
    vstore8(DPAS_MAD(vload8(0, av), vload8(0, bv), (float8)0.0f), 0, d);
#else
    int av[4];
    for (int i = 0; i < 4; i++) av[i] = (int)dpas_a_reg(a, s, L, i);
    vstore4(DPAS_MAD(vload4(0, av), vload8(0, bv), (float4)0.0f), 0, d);
#endif
#else
    /* the extension's definition: row i of A is spread over the sub-group (lane k holds
     * element k; with sub-group 8, lane k / 2 holds it in half k % 2), and lane L's B
     * register k / 2 holds element k of its column */
    for (int i = 0; i < DPAS_M; i++) {
        float sum = 0.0f;
        for (int k = 0; k < 16; k++) {
#if MMA_SG == 16
            const float av = unit_f32(dpas_a_reg(a, s, k, i), 0);
#else
            const float av = unit_f32(dpas_a_reg(a, s, k / 2, i), k & 1);
#endif
            sum = fma(av, unit_f32(dpas_b_reg(b, x, L, k / 2), k & 1), sum);
        }
        d[i] = sum;
    }
#endif
}

inline void mma_acc(float c[4], const frag_a *a, const frag_b *b)
{
    /* lane L of sub-group s: rows g = DPAS_Q s + q and g + 8 are its instruction rows q and
     * q + DPAS_Q; its instruction column is 2t + x */
    const int l = mma_lane(), s = l / MMA_SG, L = l % MMA_SG, q = L >> 2;
    float d0[DPAS_M], d1[DPAS_M];
    dpas_pass(d0, a, b, 0, s, L);
    dpas_pass(d1, a, b, 1, s, L);
#if MMA_SG == 16
    c[0] += q == 0 ? d0[0] : q == 1 ? d0[1] : q == 2 ? d0[2] : d0[3];
    c[1] += q == 0 ? d1[0] : q == 1 ? d1[1] : q == 2 ? d1[2] : d1[3];
    c[2] += q == 0 ? d0[4] : q == 1 ? d0[5] : q == 2 ? d0[6] : d0[7];
    c[3] += q == 0 ? d1[4] : q == 1 ? d1[5] : q == 2 ? d1[6] : d1[7];
#else
    c[0] += q ? d0[1] : d0[0];
    c[1] += q ? d1[1] : d1[0];
    c[2] += q ? d0[3] : d0[2];
    c[3] += q ? d1[3] : d1[2];
#endif
}

#elif MMA_NATIVE == 3
/* ---------------------------------------------------------------- AMD CDNA MFMA --- */

/* lane i of block g: A element k of block row i (fragment rows g, g + 8; rows 2, 3 zero) and
 * B element k of block column i (fragment column 2i + x) */
inline ushort mfma_a_el(const frag_a *a, int g, int i, int k) { return i < 2 ? frag_a_at(a, g + 8 * i, k) : 0; }
inline ushort mfma_b_el(const frag_b *b, int x, int i, int k) { return frag_b_at(b, k, unit_col(i, x)); }

/* pass x: (*cg, *cg8) += rows g and g + 8 of column 2t + x, four K steps of 4 */
inline void mfma_pass(float *cg, float *cg8, const frag_a *a, const frag_b *b, int x, int g, int t)
{
    float4 acc = (float4)(*cg, *cg8, 0.0f, 0.0f);
    for (int kq = 0; kq < 16; kq += 4) {
#if MMA_HW
        const short4 av = (short4)((short)mfma_a_el(a, g, t, kq), (short)mfma_a_el(a, g, t, kq + 1),
                                   (short)mfma_a_el(a, g, t, kq + 2), (short)mfma_a_el(a, g, t, kq + 3));
        const short4 bv = (short4)((short)mfma_b_el(b, x, t, kq), (short)mfma_b_el(b, x, t, kq + 1),
                                   (short)mfma_b_el(b, x, t, kq + 2), (short)mfma_b_el(b, x, t, kq + 3));
#if MMA_IN == 1
        acc = __builtin_amdgcn_mfma_f32_4x4x4bf16_1k(av, bv, acc, 0, 0, 0);
#else
        acc = __builtin_amdgcn_mfma_f32_4x4x4f16(as_half4(av), as_half4(bv), acc, 0, 0, 0);
#endif
#else
        /* the instruction: lane i of a block holds block row i of A and block column i of B,
         * K elements in order; result register r of lane t is block row r, column t */
        float r[4] = {acc.s0, acc.s1, acc.s2, acc.s3};
        for (int i = 0; i < 4; i++)
            for (int k = kq; k < kq + 4; k++)
                r[i] = fma(mma_to_f32(mfma_a_el(a, g, i, k)), mma_to_f32(mfma_b_el(b, x, t, k)), r[i]);
        acc = (float4)(r[0], r[1], r[2], r[3]);
#endif
    }
    *cg = acc.s0, *cg8 = acc.s1;
}

inline void mma_acc(float c[4], const frag_a *a, const frag_b *b)
{
    const int l = mma_lane(), g = l >> 2, t = l & 3;
    mfma_pass(&c[0], &c[2], a, b, 0, g, t);
    mfma_pass(&c[1], &c[3], a, b, 1, g, t);
}

#elif MMA_NATIVE == 4
/* ---------------------------------------------------------------- AMD RDNA3 WMMA --- */

/* the fragment row of instruction row r: lanes with r's parity hold rows 2v + parity, and
 * this order puts rows g and g + 8 of a lane at its registers (g & 3) and (g & 3) + 4 */
inline int wmma_row(int r) { return 4 * (r & 1) + ((r >> 1) & 3) + 8 * (r >> 3); }
/* lane L's 16 A elements (row L % 16; lanes L and L + 16 hold the same) and its 16 B elements
 * of pass x (column L % 16), k in order */
inline ushort16 wmma_a_regs(const frag_a *a, int L)
{
    return vload16(0, a->p + wmma_row(L & 15) * a->ld); /* a tile row: k contiguous */
}
inline ushort16 wmma_b_regs(const frag_b *b, int x, int L)
{
    const int n = unit_col(L & 15, x);
    if (b->sk == 1) return vload16(0, b->p + n * b->sn); /* a K tile: k contiguous */
    ushort r[16];
    for (int k = 0; k < 16; k++) r[k] = frag_b_at(b, k, n);
    return vload16(0, r);
}

/* lane L's result registers v = q and q + 4 of pass x (rows g and g + 8 of mma.cl's layout) */
inline float2 wmma_pass(const frag_a *a, const frag_b *b, int x, int L, int q)
{
    float d[8];
#if MMA_HW
    __builtin_amdgcn_sched_barrier(0); /* loads stay by their WMMA */
    const short16 av = as_short16(wmma_a_regs(a, L)), bv = as_short16(wmma_b_regs(b, x, L));
#if MMA_IN == 1
    vstore8(__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(av, bv, (float8)0.0f), 0, d);
#else
    vstore8(__builtin_amdgcn_wmma_f32_16x16x16_f16_w32(as_half16(av), as_half16(bv), (float8)0.0f), 0, d);
#endif
#else
    /* the instruction: register v of lane L is row 2v + L / 16, column L % 16; lane r
     * (and r + 16) holds row r of A, lane n column n of B, element k in register half k */
    ushort bk[16];
    vstore16(wmma_b_regs(b, x, L & 15), 0, bk);
    for (int v = 0; v < 8; v++) {
        ushort ak[16];
        vstore16(wmma_a_regs(a, 2 * v + (L >> 4)), 0, ak);
        float sum = 0.0f;
        for (int k = 0; k < 16; k++) sum = fma(mma_to_f32(ak[k]), mma_to_f32(bk[k]), sum);
        d[v] = sum;
    }
#endif
    return (float2)(q == 0 ? d[0] : q == 1 ? d[1] : q == 2 ? d[2] : d[3], q == 0 ? d[4] : q == 1 ? d[5] : q == 2 ? d[6] : d[7]);
}

inline void mma_acc(float c[4], const frag_a *a, const frag_b *b)
{
    const int l = mma_lane(), q = (l >> 2) & 3;
    const float2 d0 = wmma_pass(a, b, 0, l, q);
    c[0] += d0.s0, c[2] += d0.s1;
    const float2 d1 = wmma_pass(a, b, 1, l, q);
    c[1] += d1.s0, c[3] += d1.s1;
}

#else
#error "MMA_NATIVE must be 0..4"
#endif
#endif /* MMA_NATIVE >= 2 */
