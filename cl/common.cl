/* Helpers shared by every kernel program: storage types and their fp32 conversions.
 * Storage dtypes (tdacl_dtype): 0 = fp32, 1 = bf16 (a 16-bit pattern, any device),
 * 2 = fp16 (vload_half/vstore_half, core OpenCL, no cl_khr_fp16 needed). */

/* Loop unrolling hints: `#pragma unroll` is not OpenCL C 1.2, so the kernels write UNROLL and
 * UNROLL_BY(n), which become the pragma (through C99's _Pragma) where the compiler takes it:
 * clang-based ones (PoCL, AMD, Intel) and NVIDIA's (cl_nv_pragma_unroll); nothing elsewhere. */
#if defined(__clang__) || defined(cl_nv_pragma_unroll) || TDACL_NVIDIA
#define TDACL_PRAGMA(x) _Pragma(#x)
#define UNROLL TDACL_PRAGMA(unroll)
#define UNROLL_BY(n) TDACL_PRAGMA(unroll n)
#else
#define UNROLL
#define UNROLL_BY(n)
#endif

/* Sub-group (SIMD) width the big kernels ask for where the class options name one
 * (-DTDACL_SUBGROUP=n, src/runtime/context.c): Intel's compiler otherwise picks SIMD32 on
 * Xe-HPC, which leaves a quarter of SIMD8's registers per work-item and spills. */
#if defined(TDACL_SUBGROUP) && defined(cl_intel_required_subgroup_size)
#define TDACL_SUBGROUP_ATTR __attribute__((intel_reqd_sub_group_size(TDACL_SUBGROUP)))
#else
#define TDACL_SUBGROUP_ATTR
#endif

inline float bf16_to_f32(ushort x) { return as_float((uint)x << 16); }

/* Round to nearest even; NaN stays NaN (quiet bit set). */
inline ushort f32_to_bf16(float f)
{
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (ushort)(u >> 16);
}

/* ld_<dtype>(p, i) and st_<dtype>(p, i, v) over a byte-typed view of the buffer. */
inline float ld_0(__global const void *p, long i) { return ((__global const float *)p)[i]; }
inline float ld_1(__global const void *p, long i) { return bf16_to_f32(((__global const ushort *)p)[i]); }
inline float ld_2(__global const void *p, long i) { return vload_half((size_t)i, (__global const half *)p); }
inline void st_0(__global void *p, long i, float v) { ((__global float *)p)[i] = v; }
inline void st_1(__global void *p, long i, float v) { ((__global ushort *)p)[i] = f32_to_bf16(v); }
inline void st_2(__global void *p, long i, float v) { vstore_half_rte(v, (size_t)i, (__global half *)p); }

#define TDACL_CAT_(a, b) a##b
#define TDACL_CAT(a, b) TDACL_CAT_(a, b)
/* LOAD(dtype, p, i) with a compile-time dtype macro. */
#define LOAD(dt, p, i) TDACL_CAT(ld_, dt)(p, i)
#define STORE(dt, p, i, v) TDACL_CAT(st_, dt)(p, i, v)

/* Eight bf16 of one 16-byte load as fp32. */
inline void bf16x8_to_f32(uint4 u, float *w)
{
    w[0] = as_float(u.x << 16), w[1] = as_float(u.x & 0xffff0000u), w[2] = as_float(u.y << 16);
    w[3] = as_float(u.y & 0xffff0000u), w[4] = as_float(u.z << 16), w[5] = as_float(u.z & 0xffff0000u);
    w[6] = as_float(u.w << 16), w[7] = as_float(u.w & 0xffff0000u);
}

/* ld8_<dtype>(p, i, w): the 8 elements from index i (a multiple of 8, so 16-bit types are
 * one aligned 16-byte load) as fp32. */
inline void ld8_0(__global const void *p, long i, float *w)
{
    const float4 lo = vload4(0, (__global const float *)p + i), hi = vload4(1, (__global const float *)p + i);
    w[0] = lo.s0, w[1] = lo.s1, w[2] = lo.s2, w[3] = lo.s3, w[4] = hi.s0, w[5] = hi.s1, w[6] = hi.s2, w[7] = hi.s3;
}
inline void ld8_1(__global const void *p, long i, float *w)
{
    bf16x8_to_f32(*(__global const uint4 *)((__global const ushort *)p + i), w);
}
inline void ld8_2(__global const void *p, long i, float *w)
{
    const float8 f = vload_half8(0, (__global const half *)p + i);
    w[0] = f.s0, w[1] = f.s1, w[2] = f.s2, w[3] = f.s3, w[4] = f.s4, w[5] = f.s5, w[6] = f.s6, w[7] = f.s7;
}
#define LOAD8(dt, p, i, w) TDACL_CAT(ld8_, dt)(p, i, w)

/* sum_{i < n} p[i * stride], read as volatile (partials other work-groups of the same launch
 * wrote: the one-launch split reductions) eight loads at a time: a volatile load is not
 * moved past the previous one's use, so one at a time would wait out n memory round trips. */
inline float sum_volatile(__global volatile const float *p, long stride, int n)
{
    float sum = 0.0f;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        float x0 = p[i * stride], x1 = p[(i + 1) * stride], x2 = p[(i + 2) * stride], x3 = p[(i + 3) * stride];
        float x4 = p[(i + 4) * stride], x5 = p[(i + 5) * stride], x6 = p[(i + 6) * stride], x7 = p[(i + 7) * stride];
        sum += ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    }
    for (; i < n; i++) sum += p[i * stride];
    return sum;
}
