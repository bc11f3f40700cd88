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

