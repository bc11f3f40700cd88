/* The matmuls' fused epilogue (cl/layers.cl, cl/gemm_mma.cl): bias, GELU, residual. */

#ifndef ADT
#define ADT 0 /* storage dtype of A (the activations a matmul reads) */
#endif
#ifndef CDT
#define CDT 0 /* storage dtype of C and of the residual added to it */
#endif

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

inline float epilogue(float acc, int flags, __global const float *bias, int n, __global const void *res,
                      long ridx)
{
    if (flags & EPI_BIAS) acc += bias[n];
    if (flags & EPI_GELU) acc = gelu_tanh(acc);
    if (flags & EPI_RESIDUAL) acc += LOAD(CDT, res, ridx);
    return acc;
}

/* Split K (the tiled GEMMs when their tiles alone would leave compute units idle): work-group
 * (tile, z) stores the raw sums of K chunk z to part[z][m][n] (M x N per chunk); this kernel
 * then adds the chunks in order and applies the epilogue, one work-item per element. */
__kernel void gemm_splitk_reduce(__global void *c, __global const float *part, int nsplit, int M, int N, int ldc,
                                 int flags, __global const float *bias, __global const void *res)
{
    const int n = get_global_id(0), m = get_global_id(1);
    if (m >= M || n >= N) return;
    const long mn = (long)M * N;
    __global const float *p = part + (long)m * N + n;
    float sum = 0.0f;
    int z = 0;
    for (; z + 4 <= nsplit; z += 4) sum += ((p[z * mn] + p[(z + 1) * mn]) + (p[(z + 2) * mn] + p[(z + 3) * mn]));
    for (; z < nsplit; z++) sum += p[z * mn];
    const long idx = (long)m * ldc + n;
    STORE(CDT, c, idx, epilogue(sum, flags, bias, n, res, idx));
}
