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
