/* Warp-level matrix fragments: the m16n8k16 product D = A(16x16) B(16x8) + C with 16-bit
 * inputs (bf16 or f16, MMA_IN 1 or 2) or tf32 inputs (MMA_IN 3: f32 tiles, each operand
 * rounded to tf32 -- 10 mantissa bits, nearest, ties away -- as its fragment is formed) and
 * f32 accumulation, the loads that feed it, the quad/warp reductions and the asynchronous
 * global -> local copy a tiled kernel needs.
 *
 * Lanes: a warp is 32 consecutive work-items; lane l has g = l / 4 (its row group) and
 * t = l % 4 (its position in the quad).  Per-lane fragment contents (PTX ISA, mma.m16n8k16):
 *   A  a[0] = (g, 2t..2t+1)   a[1] = (g+8, 2t..)   a[2] = (g, 2t+8..)   a[3] = (g+8, 2t+8..)
 *   B  b[0] = (k 2t..2t+1, n g)                     b[1] = (k 2t+8.., n g)
 *   C  c[0..1] = (g, 2t..2t+1)                      c[2..3] = (g+8, 2t..2t+1)
 * (each A and B word packs two 16-bit values, the lower column/k in the low half).
 * tf32 (MMA_IN 3) keeps this m16n8k16 interface and runs it as two m16n8k8 tf32 products,
 * k 0..7 and 8..15, each operand word one value (PTX ISA, mma.m16n8k8 .tf32):
 *   A  a[0] = (g, t)  a[1] = (g+8, t)  a[2] = (g, t+4)  a[3] = (g+8, t+4)
 *   B  b[0] = (k t, n g)               b[1] = (k t+4, n g)
 * A weight tile re-packed from C fragments (mma_stage_a) holds columns 2t, 2t+1 where that
 * layout wants t, t+4: the weights' k8 step takes its keys in the order 0 2 4 6 1 3 5 7, and
 * mma_load_b_kn_w reads the V rows in the same order, so the product is unchanged.
 *
 * Bodies of one interface (MMA_NATIVE):
 *   1  inline PTX for NVIDIA sm_80+ (mma.sync, ldmatrix, cp.async, shfl, vote); fragments are
 *      registers.
 *   0  plain OpenCL C for any device (PoCL, Oclgrind in CI).  A and B fragments are
 *      references to the local-memory tile they come from, and each lane computes its own C
 *      elements from them, so every lane ends with exactly the values the hardware lane
 *      holds.  The only values that cross lanes -- weights turned into A operands, quad and
 *      warp reductions -- go through local memory with barriers, so in this body those calls
 *      must be reached by the whole work-group (the kernels call them unconditionally).
 *   2, 3, 4  Intel DPAS, AMD MFMA, AMD WMMA (cl/mma_units.cl): body 0 with its product done by
 *      the vendor's matrix instruction; MMA_EMULATE 1 replaces that instruction by plain C
 *      written from the vendor's documented lane layout (CI checks the layouts on PoCL).
 * MMA_GROUP_WARPS warps issue each matrix instruction together (2 on AMD's 64-lane CDNA
 * waves): the kernels make every branch around mma_acc agree across such a group.
 * Local tiles hold 16-bit values as ushort, rows of LD elements (LD a multiple of 8). */

#ifndef MMA_NATIVE
#define MMA_NATIVE 0
#endif
#ifndef MMA_IN
#define MMA_IN 1 /* 1 bf16, 2 f16, 3 tf32 */
#endif
#ifndef MMA_EMULATE
#define MMA_EMULATE 0
#endif
#define MMA_PTX (MMA_NATIVE == 1)                          /* fragments in registers */
#define MMA_HW (MMA_NATIVE >= 1 && !MMA_EMULATE)           /* the device's matrix units run */
#define MMA_GROUP_WARPS (MMA_NATIVE == 3 ? 2 : 1) /* also emulated: CI runs the grouped skips */
#define MMA_TF32 (MMA_IN == 3)
#if MMA_TF32 && MMA_NATIVE >= 2
#error "tf32 runs on mma.sync (MMA_NATIVE 1) and the portable body only"
#endif
/* the element type of local tiles, and their row padding: 16 bytes */
#if MMA_TF32
typedef float mma_t;
#else
typedef ushort mma_t;
#endif
#define MMA_PAD (16 / (int)sizeof(mma_t))
#define UNROLL_FRAG _Pragma("unroll")

inline int mma_lane(void) { return (int)(get_local_id(0) & 31); }
inline int mma_warp(void) { return (int)(get_local_id(0) >> 5); }

/* f32 rounded to tf32: 10 mantissa bits, to nearest, ties away from zero (PTX cvt.rna);
 * infinities and NaN pass */
inline float mma_round_tf32(float f)
{
    const uint x = as_uint(f);
    if ((x & 0x7f800000u) == 0x7f800000u) return f;
    return as_float((x + 0x1000u) & 0xffffe000u);
}

/* A tile element -> the f32 value the matrix units take, and f32 -> a tile element (16-bit:
 * round to nearest even; tf32: as mma_round_tf32) */
inline float mma_to_f32(mma_t x)
{
#if MMA_TF32
    return mma_round_tf32(x);
#elif MMA_IN == 1
    return as_float((uint)x << 16);
#else
    uint s = (uint)(x & 0x8000u) << 16, e = (x >> 10) & 0x1fu, m = x & 0x3ffu;
    if (e == 0x1fu) return as_float(s | 0x7f800000u | (m << 13));
    if (e) return as_float(s | ((e + 112u) << 23) | (m << 13));
    const float sub = (float)m * 5.9604644775390625e-08f; /* subnormal: m * 2^-24 */
    return s ? -sub : sub;
#endif
}

inline mma_t mma_from_f32(float f)
{
#if MMA_TF32
    return mma_round_tf32(f);
#elif MMA_IN == 1
    return f32_to_bf16(f);
#else /* f16 bits, round to nearest even, without cl_khr_fp16 */
    const uint x = as_uint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (ushort)(sign | 0x7e00u);            /* NaN */
    if (ax >= 0x477ff000u) return (ushort)(sign | 0x7c00u);           /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) /* below 2^-14: a multiple of the subnormal quantum 2^-24 */
        return (ushort)(sign | (uint)rint(as_float(ax) * 16777216.0f));
    uint h = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
    const uint rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry moves into the exponent */
    return (ushort)(sign | h);
#endif
}

/* -x for a tile element (exact: the sign bit) */
inline mma_t mma_neg(mma_t x)
{
#if MMA_TF32
    return -x;
#else
    return (mma_t)(x ^ 0x8000u);
#endif
}

/* Row length of a warp's weight scratch (portable body; a staging area size elsewhere). */
#define MMA_SCRATCH_LD(bn) ((bn) + 8)

#if MMA_PTX
/* ---------------------------------------------------------------- NVIDIA inline PTX --- */

inline uint mma_saddr(__local const void *p) { return (uint)(size_t)p; }

#if MMA_TF32
/* ------------------------------------------- tf32: two m16n8k8 products per k16 step --- */
typedef struct { uint x[8]; } frag_a; /* x[0..3]: k 0..7, x[4..7]: k 8..15 */
typedef struct { uint x[4]; } frag_b;

inline uint mma_tf32(float f)
{
    uint r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
}

/* ldmatrix on f32 rows: an 8x8 b16 matrix is 8 rows of 4 floats, and lane l receives row
 * l / 4, float l % 4 -- the tf32 A and B layouts.  Four matrices; lanes 8i..8i+7 give the
 * row addresses of matrix i, which lands in x[i]. */
inline void mma_ldm4(uint x[4], __local const float *m)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                 : "r"(mma_saddr(m)));
}

/* A: the 16x16 tile at m (row-major, ld floats per row); matrices (rows 0-7 | 8-15) x
 * (floats 0-3 | 4-7) give a[0..3] of each k8 half */
inline void mma_load_a(frag_a *a, __local const mma_t *m, int ld)
{
    const int l = mma_lane(), mat = l >> 3;
    __local const float *p = m + ((l & 7) + (mat & 1) * 8) * ld + (mat >> 1) * 4;
    mma_ldm4(a->x, p);
    mma_ldm4(a->x + 4, p + 8);
    UNROLL_FRAG for (int i = 0; i < 8; i++) a->x[i] = mma_tf32(as_float(a->x[i]));
}

/* Two B fragments from a tile stored n-major (m[n * ld + k]): for n rows 0-7 (b0) and 8-15
 * (b1), matrices at floats 0, 4, 8, 12 give b[0..3] */
inline void mma_load_b_nk(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    const int l = mma_lane(), mat = l >> 3;
    __local const float *p = m + (l & 7) * ld + mat * 4;
    mma_ldm4(b0->x, p);
    mma_ldm4(b1->x, p + 8 * ld);
    UNROLL_FRAG for (int i = 0; i < 4; i++) b0->x[i] = mma_tf32(as_float(b0->x[i])), b1->x[i] = mma_tf32(as_float(b1->x[i]));
}

/* Two B fragments from a tile stored k-major (m[k * ld + n]), one float per register (no
 * transposing load for 32-bit elements): the rows k0, k1, 8 + k0, 8 + k1 stand for k = t,
 * t + 4, 8 + t, 12 + t.  With ld % 16 == 4 the lanes of each load hit distinct banks. */
inline void mma_load_b_kn_rows(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld, int k0, int k1)
{
    const int l = mma_lane(), g = l >> 2;
    const int k[4] = {k0, k1, 8 + k0, 8 + k1};
    UNROLL_FRAG for (int i = 0; i < 4; i++) {
        b0->x[i] = mma_tf32(m[k[i] * ld + g]);
        b1->x[i] = mma_tf32(m[k[i] * ld + 8 + g]);
    }
}
/* natural k order (B against A fragments of mma_load_a) */
inline void mma_load_b_kn(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    const int t = mma_lane() & 3;
    mma_load_b_kn_rows(b0, b1, m, ld, t, t + 4);
}
/* the key order of mma_stage_a's weights: k = t is row 2t, k = t + 4 is row 2t + 1 */
inline void mma_load_b_kn_w(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    const int t = mma_lane() & 3;
    mma_load_b_kn_rows(b0, b1, m, ld, 2 * t, 2 * t + 1);
}

#define MMA_TF32_K8(c_, a0_, a1_, a2_, a3_, b0_, b1_, C_)                                                    \
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, " \
                 "{%8, %9}, {%10, %11, %12, %13};"                                                          \
                 : "=f"((c_)[0]), "=f"((c_)[1]), "=f"((c_)[2]), "=f"((c_)[3])                              \
                 : "r"(a0_), "r"(a1_), "r"(a2_), "r"(a3_), "r"(b0_), "r"(b1_), "f"((C_)[0]), "f"((C_)[1]),  \
                   "f"((C_)[2]), "f"((C_)[3]))

inline void mma_acc(float c[4], const frag_a *a, const frag_b *b)
{
    MMA_TF32_K8(c, a->x[0], a->x[1], a->x[2], a->x[3], b->x[0], b->x[1], c);
    MMA_TF32_K8(c, a->x[4], a->x[5], a->x[6], a->x[7], b->x[2], b->x[3], c);
}

inline void mma_mul(float c[4], const frag_a *a, const frag_b *b)
{
    const float z[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    MMA_TF32_K8(c, a->x[0], a->x[1], a->x[2], a->x[3], b->x[0], b->x[1], z);
    MMA_TF32_K8(c, a->x[4], a->x[5], a->x[6], a->x[7], b->x[2], b->x[3], c);
}

/* The A operand of keys [16kk, 16kk+16) from two C tiles of weights: C holds columns 2t,
 * 2t + 1 of rows g, g + 8; they become k = t, t + 4 (see the key order at the top) */
inline void mma_stage_a(frag_a *a, const float c0[4], const float c1[4], __local mma_t *scratch, int kk)
{
    a->x[0] = mma_tf32(c0[0]), a->x[1] = mma_tf32(c0[2]), a->x[2] = mma_tf32(c0[1]), a->x[3] = mma_tf32(c0[3]);
    a->x[4] = mma_tf32(c1[0]), a->x[5] = mma_tf32(c1[2]), a->x[6] = mma_tf32(c1[1]), a->x[7] = mma_tf32(c1[3]);
}

#else
/* ------------------------------------------------------- 16-bit: m16n8k16 directly --- */
typedef struct { uint x[4]; } frag_a;
typedef struct { uint x[2]; } frag_b;

/* A: the 16x16 tile at m (row-major, ld elements per row). */
inline void mma_load_a(frag_a *a, __local const mma_t *m, int ld)
{
    const int l = mma_lane(), mat = l >> 3;
    uint addr = mma_saddr(m + ((l & 7) + (mat & 1) * 8) * ld + (mat >> 1) * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a->x[0]), "=r"(a->x[1]), "=r"(a->x[2]), "=r"(a->x[3])
                 : "r"(addr));
}

/* Two B fragments (n 0..7 and 8..15, k 0..15) from a tile stored n-major: m[n * ld + k]
 * (a K tile: one key per row). */
inline void mma_load_b_nk(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    const int l = mma_lane(), mat = l >> 3;
    uint addr = mma_saddr(m + ((l & 7) + (mat >> 1) * 8) * ld + (mat & 1) * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(b0->x[0]), "=r"(b0->x[1]), "=r"(b1->x[0]), "=r"(b1->x[1])
                 : "r"(addr));
}

/* Two B fragments (n 0..7 and 8..15, k 0..15) from a tile stored k-major: m[k * ld + n]
 * (a V tile: one key per row), transposed by ldmatrix. */
inline void mma_load_b_kn(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    const int l = mma_lane(), mat = l >> 3;
    uint addr = mma_saddr(m + ((l & 7) + (mat & 1) * 8) * ld + (mat >> 1) * 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(b0->x[0]), "=r"(b0->x[1]), "=r"(b1->x[0]), "=r"(b1->x[1])
                 : "r"(addr));
}

inline void mma_acc(float c[4], const frag_a *a, const frag_b *b)
{
#if MMA_IN == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a->x[0]), "r"(a->x[1]), "r"(a->x[2]), "r"(a->x[3]), "r"(b->x[0]), "r"(b->x[1]));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a->x[0]), "r"(a->x[1]), "r"(a->x[2]), "r"(a->x[3]), "r"(b->x[0]), "r"(b->x[1]));
#endif
}

/* c = A B, no accumulator to read (the first k-step of a product: no zeroing) */
inline void mma_mul(float c[4], const frag_a *a, const frag_b *b)
{
#if MMA_IN == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%10, %10, %10, %10};"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                 : "r"(a->x[0]), "r"(a->x[1]), "r"(a->x[2]), "r"(a->x[3]), "r"(b->x[0]), "r"(b->x[1]), "f"(0.0f));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%10, %10, %10, %10};"
                 : "=f"(c[0]), "=f"(c[1]), "=f"(c[2]), "=f"(c[3])
                 : "r"(a->x[0]), "r"(a->x[1]), "r"(a->x[2]), "r"(a->x[3]), "r"(b->x[0]), "r"(b->x[1]), "f"(0.0f));
#endif
}

inline uint mma_pack2(float lo, float hi)
{
    uint r;
#if MMA_IN == 1
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

/* The A operand of keys [16kk, 16kk+16) from two C tiles of weights (keys 16kk..+7 and
 * 16kk+8..+15): the C layout of two adjacent n-blocks is the A layout of one k-step. */
inline void mma_stage_a(frag_a *a, const float c0[4], const float c1[4], __local mma_t *scratch, int kk)
{
    a->x[0] = mma_pack2(c0[0], c0[1]);
    a->x[1] = mma_pack2(c0[2], c0[3]);
    a->x[2] = mma_pack2(c1[0], c1[1]);
    a->x[3] = mma_pack2(c1[2], c1[3]);
}
#define mma_load_b_kn_w mma_load_b_kn /* the weights' keys are in natural order */
#endif /* MMA_TF32 */
#define MMA_STAGE_SYNC() ((void)0)
inline void mma_staged_a(frag_a *a, __local mma_t *scratch, int kk) {}

/* max(x, 0) with NaN passed through (one instruction) */
inline float mma_relu(float x)
{
    float r;
    asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(r) : "f"(x));
    return r;
}

/* max(a, b), a NaN operand giving NaN (fmax would drop it) */
inline float mma_max_nan(float a, float b)
{
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

/* 2^x with results below 2^-126 flushed to zero: one MUFU.EX2.  native_exp2 compiles to
 * ex2.approx.f32, whose subnormal results cost ptxas a compare and two predicated multiplies
 * around every exponent of a softmax tile. */
inline float mma_exp2(float x)
{
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

/* log2(x), subnormal x flushed to zero (-inf): one MUFU.LG2 */
inline float mma_log2(float x)
{
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

inline float mma_quad_max(float x)
{
    float y;
    asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    x = fmax(x, y);
    asm volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    return fmax(x, y);
}

inline float mma_quad_sum(float x)
{
    float y;
    asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    x += y;
    asm volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
    return x + y;
}

inline int mma_warp_any(int x)
{
    uint r;
    asm volatile("{ .reg .pred p, q; setp.ne.s32 p, %1, 0; vote.sync.any.pred q, p, 0xffffffff; "
                 "selp.u32 %0, 1, 0, q; }"
                 : "=r"(r) : "r"(x));
    return (int)r;
}

/* 16 bytes global -> local without a register round trip; `bytes` < 16 zero-fills the rest
 * (0 reads nothing).  Both addresses 16-byte aligned. */
inline void mma_copy16(__local void *dst, __global const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(mma_saddr(dst)), "l"(src), "r"(bytes));
}
/* 4 bytes (one float) the same way; `bytes` 0 zero-fills. */
inline void mma_copy4(__local float *dst, __global const float *src, int bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(mma_saddr(dst)), "l"(src), "r"(bytes));
}
inline void mma_copy_commit(void) { asm volatile("cp.async.commit_group;"); }
/* two f32 as packed bf16 (lo in the low half), each rounded to nearest even */
inline uint mma_bf16x2(float lo, float hi)
{
    uint r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
#define MMA_COPY_WAIT(n) asm volatile("cp.async.wait_group %0;" ::"n"(n))

#else
/* ------------------------------------------------------------- portable OpenCL C body --- */

/* A fragment: the 16x16 tile at p, row r / column k at p[r * ld + k].  B fragment: the
 * 16(k)x8(n) tile at p, element (k, n) at p[n * sn + k * sk]. */
typedef struct { __local const mma_t *p; int ld; } frag_a;
typedef struct { __local const mma_t *p; int sn, sk; } frag_b;

inline void mma_load_a(frag_a *a, __local const mma_t *m, int ld) { a->p = m, a->ld = ld; }

inline void mma_load_b_nk(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    b0->p = m, b0->sn = ld, b0->sk = 1;
    b1->p = m + 8 * ld, b1->sn = ld, b1->sk = 1;
}

inline void mma_load_b_kn(frag_b *b0, frag_b *b1, __local const mma_t *m, int ld)
{
    b0->p = m, b0->sn = 1, b0->sk = ld;
    b1->p = m + 8, b1->sn = 1, b1->sk = ld;
}
/* the weights of mma_stage_a are in natural key order here */
#define mma_load_b_kn_w mma_load_b_kn

#if MMA_NATIVE == 0
/* This lane's four C elements, each a 16-term f32 sum of exact products (16-bit and tf32
 * inputs multiply exactly in f32); only the summation order may differ from the hardware. */
inline void mma_acc(float c[4], const frag_a *a, const frag_b *b)
{
    const int l = mma_lane(), g = l >> 2, t = l & 3;
    for (int e = 0; e < 4; e++) {
        const int r = g + (e >> 1) * 8, n = 2 * t + (e & 1);
        float s = 0.0f;
        for (int k = 0; k < 16; k++)
            s = fma(mma_to_f32(a->p[r * a->ld + k]), mma_to_f32(b->p[n * b->sn + k * b->sk]), s);
        c[e] += s;
    }
}
#endif /* bodies 2..4 define mma_acc in mma_units.cl */

/* c = A B (a macro: mma_acc may be defined after this file) */
#define mma_mul(c_, a_, b_) ((c_)[0] = (c_)[1] = (c_)[2] = (c_)[3] = 0.0f, mma_acc((c_), (a_), (b_)))

#ifdef BN /* kernels that re-pack C tiles as A operands define their key tile BN */
/* Weights become A operands through this warp's scratch: every lane writes its C elements
 * (rounded to the input type, as the native body's cvt does), MMA_STAGE_SYNC() makes them
 * visible, then mma_staged_a points at them.  scratch: 16 rows x ld columns per warp. */
inline void mma_stage_a(frag_a *a, const float c0[4], const float c1[4], __local mma_t *scratch, int kk)
{
    const int l = mma_lane(), g = l >> 2, t = l & 3, ld = MMA_SCRATCH_LD(BN);
    __local mma_t *s = scratch + 16 * kk;
    s[g * ld + 2 * t] = mma_from_f32(c0[0]);
    s[g * ld + 2 * t + 1] = mma_from_f32(c0[1]);
    s[(g + 8) * ld + 2 * t] = mma_from_f32(c0[2]);
    s[(g + 8) * ld + 2 * t + 1] = mma_from_f32(c0[3]);
    s[g * ld + 2 * t + 8] = mma_from_f32(c1[0]);
    s[g * ld + 2 * t + 9] = mma_from_f32(c1[1]);
    s[(g + 8) * ld + 2 * t + 8] = mma_from_f32(c1[2]);
    s[(g + 8) * ld + 2 * t + 9] = mma_from_f32(c1[3]);
}
#define MMA_STAGE_SYNC() barrier(CLK_LOCAL_MEM_FENCE)
inline void mma_staged_a(frag_a *a, __local mma_t *scratch, int kk)
{
    a->p = scratch + 16 * kk, a->ld = MMA_SCRATCH_LD(BN);
}

#endif

inline float mma_relu(float x) { return isnan(x) ? x : fmax(x, 0.0f); }
inline float mma_max_nan(float a, float b) { return isnan(a) ? a : isnan(b) ? b : fmax(a, b); }

/* as the native body: results below 2^-126 are zero (NaN passes) */
inline float mma_exp2(float x)
{
    const float r = native_exp2(x);
    return r < 0x1p-126f ? 0.0f : r;
}
inline float mma_log2(float x) { return log2(x); }

/* two values rounded to the input type, lo in the low half (the native body's cvt) */
inline uint mma_pack2(float lo, float hi) { return (uint)mma_from_f32(lo) | ((uint)mma_from_f32(hi) << 16); }

/* Reductions through a per-warp exchange area (32 floats per warp, `mma_xchg`, declared
 * by the kernel); two barriers each.  mma_quad_x returns the four values of the caller's
 * quad. */
inline float4 mma_quad_x(float x, __local float *xchg)
{
    const int l = mma_lane();
    __local float *w = xchg + 32 * mma_warp();
    barrier(CLK_LOCAL_MEM_FENCE);
    w[l] = x;
    barrier(CLK_LOCAL_MEM_FENCE);
    return vload4(0, w + (l & ~3));
}

inline float mma_quad_max_x(float x, __local float *xchg)
{
    const float4 q = mma_quad_x(x, xchg);
    return fmax(fmax(q.s0, q.s1), fmax(q.s2, q.s3));
}

inline float mma_quad_sum_x(float x, __local float *xchg)
{
    const float4 q = mma_quad_x(x, xchg);
    return (q.s0 + q.s1) + (q.s2 + q.s3);
}

/* any over the warp's group (MMA_GROUP_WARPS), so that branches on it agree where warps
 * share their matrix instructions */
inline int mma_warp_any_x(int x, __local float *xchg)
{
    const int w0 = mma_warp() - mma_warp() % MMA_GROUP_WARPS;
    const int nw = min(MMA_GROUP_WARPS, (int)(get_local_size(0) >> 5) - w0);
    __local float *w = xchg + 32 * mma_warp();
    barrier(CLK_LOCAL_MEM_FENCE);
    w[mma_lane()] = x ? 1.0f : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    float any = 0.0f;
    for (int i = 0; i < 32 * nw; i++) any += xchg[32 * w0 + i];
    return any != 0.0f;
}
#define mma_quad_max(x) mma_quad_max_x((x), mma_xchg)
#define mma_quad_sum(x) mma_quad_sum_x((x), mma_xchg)
#define mma_warp_any(x) mma_warp_any_x((x), mma_xchg)

/* A synchronous copy with the same zero-fill contract. */
inline void mma_copy16(__local void *dst, __global const void *src, int bytes)
{
    __local ushort *d = dst;
    __global const ushort *s = src;
    for (int i = 0; i < 8; i++) d[i] = 2 * i < bytes ? s[i] : (ushort)0;
}
inline void mma_copy4(__local float *dst, __global const float *src, int bytes) { *dst = bytes ? *src : 0.0f; }
inline void mma_copy_commit(void) {}
inline uint mma_bf16x2(float lo, float hi) { return (uint)f32_to_bf16(lo) | ((uint)f32_to_bf16(hi) << 16); }
#define MMA_COPY_WAIT(n) ((void)0)
#endif
