/* The matmuls' fused epilogue (cl/layers.cl, cl/gemm_mma.cl): bias, GELU, residual. */

/* Epilogue flags (run-time, uniform): */
#define EPI_BIAS 1
#define EPI_GELU 2
#define EPI_RESIDUAL 4

inline float gelu_tanh(float x)
{
    /* GPT-2's gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanh(u));
}

inline float epilogue(float acc, int flags, __global const float *bias, int n, __global const float *res,
                      long ridx)
{
    if (flags & EPI_BIAS) acc += bias[n];
    if (flags & EPI_GELU) acc = gelu_tanh(acc);
    if (flags & EPI_RESIDUAL) acc += res[ridx];
    return acc;
}

/* Split K (the tiled GEMMs when their tiles alone would leave compute units idle): work-group
 * (tile, z) sums the products of K chunk z and stores them raw to part[z][m][n] (M x N per
 * chunk); the last chunk of the tile to arrive (a counter per tile, put back to 0 by that
 * work-group: the pattern of the decode GEMV, docs/spec.md section 4.2) adds the chunks in
 * order and applies the epilogue.  Returns whether this work-group is that last one. */
inline int splitk_last(__global uint *arrivals, int tile, int nsplit, __local int *last)
{
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (get_local_id(0) == 0) *last = atomic_inc(arrivals + tile) == (uint)(nsplit - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!*last) return 0;
    if (get_local_id(0) == 0) arrivals[tile] = 0;
    mem_fence(CLK_GLOBAL_MEM_FENCE);
    return 1;
}

/* The last work-group of a tile: c[m][n] = epilogue(sum over the chunks) for the bm x bn tile
 * at (m0, n0), its nt work-items striding over it. */
inline void splitk_finish(__global float *c, __global volatile const float *part, int nsplit, int m0, int n0, int bm,
                          int bn, int nt, int M, int N, int ldc, int flags, __global const float *bias,
                          __global const float *res)
{
    for (int i = get_local_id(0); i < bm * bn; i += nt) {
        const int m = m0 + i / bn, n = n0 + i % bn;
        if (m >= M || n >= N) continue;
        const long idx = (long)m * ldc + n;
        c[idx] = epilogue(sum_volatile(part + (long)m * N + n, (long)M * N, nsplit), flags, bias, n, res, idx);
    }
}
