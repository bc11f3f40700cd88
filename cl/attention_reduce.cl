/* The split-key reduction of the decode variants (attention_decode.cl on the FP32 lanes, the
 * split mode of attention_mma.cl on the matrix units).  Each split s of a (batch*head) wrote,
 * per query row i < TQP: the weighted sum of its V rows, DV floats at
 * opart[((slot * NW + set) * TQP + i) * DV] (slot = bh * nsplit + s); softmax kinds also the
 * row's maximum score (log2 units) and the sum of exp2(score - maximum) at
 * mlpart[((slot * NV + view) * TQP + i) * 2 + {0, 1}], the sum relative to that maximum.
 * Included after the kernel that defines KIND, NV, NW, SOFTMAX, DV and TQP. */

#ifndef RED_NT
#define RED_NT 64 /* work-items per row */
#endif

/* One work-group per (batch*head, query row): combine the splits, Norm, scale, store. */
__kernel __attribute__((reqd_work_group_size(RED_NT, 1, 1))) void attention_decode_reduce(
    __global const float *opart, __global const float *mlpart, __global const void *gain,
    __global const float *lambdas, __global void *out, long4 os, long o_off, int H, int nsplit, int dv, float lambda,
    int norm, float norm_eps, float out_scale)
{
    __local float red[RED_NT];
    const int tid = get_local_id(0);
    ATTENTION_HEAD(H, lambdas, lambda);
    const int i = get_group_id(2);
    float y[(DV + RED_NT - 1) / RED_NT];
    float ss = 0.0f;
    for (int e = 0; e < (DV + RED_NT - 1) / RED_NT; e++) {
        int c = tid + e * RED_NT;
        float val = 0.0f;
        if (c < DV) {
#if SOFTMAX
            for (int t = 0; t < NW; t++) {
                float M = -INFINITY;
                for (int s = 0; s < nsplit; s++)
                    M = fmax(M, mlpart[((((long)bh * nsplit + s) * NV + t) * TQP + i) * 2]);
                float o = 0.0f, L = 0.0f;
                for (int s = 0; s < nsplit; s++) {
                    long slot = (long)bh * nsplit + s;
                    float ms = mlpart[((slot * NV + t) * TQP + i) * 2];
                    float f = ms == -INFINITY ? 0.0f : native_exp2(ms - M);
                    L += f * mlpart[((slot * NV + t) * TQP + i) * 2 + 1];
                    o += f * opart[((slot * NW + t) * TQP + i) * DV + c];
                }
                /* L is 0 only without visible keys; a NaN L (NaN scores) must stay NaN */
                float r = L != 0.0f ? o / L : 0.0f;
                val += t ? -lambda * r : r;
            }
#else
            for (int s = 0; s < nsplit; s++) val += opart[(((long)bh * nsplit + s) * TQP + i) * DV + c];
#endif
        }
        y[e] = val;
        ss += val * val;
    }
    if (norm) {
        red[tid] = ss;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int stride = RED_NT / 2; stride > 0; stride >>= 1) {
            if (tid < stride) red[tid] += red[tid + stride];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        float inv = rsqrt(red[0] / (float)dv + norm_eps);
        for (int e = 0; e < (DV + RED_NT - 1) / RED_NT; e++) y[e] *= inv;
    }
    const long ob = o_off + b * os.s0 + h * os.s1 + (long)i * os.s2;
    for (int e = 0; e < (DV + RED_NT - 1) / RED_NT; e++) {
        int c = tid + e * RED_NT;
        if (c >= dv) continue;
        float val = y[e] * out_scale;
        if (norm && gain) val *= LOAD(GDT, gain, c);
        STORE(ODT, out, ob + c * os.s3, val);
    }
}
