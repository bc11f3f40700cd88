/* Strided elementwise copy with dtype conversion: the mechanism behind upload/download of
 * views and tdacl_tensor_copy.  Shapes and strides have up to 6 dims, innermost last. */

#ifndef SRC_DT
#define SRC_DT 0 /* source storage dtype */
#endif
#ifndef DST_DT
#define DST_DT 0 /* destination storage dtype */
#endif

__kernel void tensor_copy(__global const void *src, long src_off, long8 src_strides,
                          __global void *dst, long dst_off, long8 dst_strides,
                          long8 shape, int ndim, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    long s = src_off, d = dst_off, rem = i;
    long sh[6] = {shape.s0, shape.s1, shape.s2, shape.s3, shape.s4, shape.s5};
    long ss[6] = {src_strides.s0, src_strides.s1, src_strides.s2, src_strides.s3, src_strides.s4, src_strides.s5};
    long ds[6] = {dst_strides.s0, dst_strides.s1, dst_strides.s2, dst_strides.s3, dst_strides.s4, dst_strides.s5};
    for (int k = ndim - 1; k >= 0; k--) {
        long c = rem % sh[k];
        rem /= sh[k];
        s += c * ss[k];
        d += c * ds[k];
    }
    STORE(DST_DT, dst, d, LOAD(SRC_DT, src, s));
}

/* Deterministic N(0,1) fill of a contiguous buffer (benchmarks and random weights):
 * a counter-based hash gives two uniforms per element, Box-Muller turns them normal. */
inline uint hash_u32(uint x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__kernel void tensor_fill_normal(__global void *dst, long off, long n, uint seed, float mean,
                                 float stddev)
{
    long i = get_global_id(0);
    if (i >= n) return;
    uint a = hash_u32((uint)i ^ hash_u32(seed ^ (uint)(i >> 32) * 0x9e3779b9u));
    uint b = hash_u32(a ^ 0x85ebca6bu);
    float u1 = ((float)(a >> 8) + 1.0f) * (1.0f / 16777217.0f); /* (0, 1] */
    float u2 = (float)(b >> 8) * (1.0f / 16777216.0f);
    float z = sqrt(-2.0f * log(u1)) * cos(6.28318530718f * u2);
    STORE(DST_DT, dst, off + i, mean + stddev * z);
}
