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
#ifndef COMBINE_NT
#define COMBINE_NT RED_NT /* work-items combining a row (attention_decode.cl: fewer when NTD is) */
#endif

/* Combines the nsplit splits of query row i of (b, h), applies the Norm and the output scale,
 * and stores the row.  Work-items 0 .. COMBINE_NT-1 do the work; the others of a larger
 * work-group only pass the barriers.  The partials may come from other work-groups of the
 * same launch (the last split of attention_decode_part combines): read as volatile, so no
 * copy cached before they were written is used. */
void combine_row(__global volatile const float *opart,
                                              __global volatile const float *mlpart,
                 __global const void *gain, __global void *out, long4 os, long o_off, int b, int h, int bh, int i,
                 int nsplit, int dv, float lambda, int norm, float norm_eps, float out_scale, __local float *red)
{
    const int tid = get_local_id(0), act = tid < COMBINE_NT;
    float y[(DV + COMBINE_NT - 1) / COMBINE_NT];
    float ss = 0.0f;
    for (int e = 0; e < (DV + COMBINE_NT - 1) / COMBINE_NT; e++) {
        int c = tid + e * COMBINE_NT;
        float val = 0.0f;
        if (act && c < DV) {
#if SOFTMAX
            /* four splits' loads at a time (volatile loads one by one would each wait) */
            for (int t = 0; t < NW; t++) {
                __global volatile const float *ml = mlpart + (((long)bh * nsplit * NV + t) * TQP + i) * 2;
                __global volatile const float *op = opart + (((long)bh * nsplit * NW + t) * TQP + i) * DV + c;
                const long mls = (long)NV * TQP * 2, ops = (long)NW * TQP * DV; /* from one split to the next */
                float M = -INFINITY;
                for (int s = 0; s < nsplit; s += 4) {
                    float m4[4];
UNROLL
                    for (int u = 0; u < 4; u++) m4[u] = s + u < nsplit ? ml[(s + u) * mls] : -INFINITY;
                    M = fmax(M, fmax(fmax(m4[0], m4[1]), fmax(m4[2], m4[3])));
                }
                float o = 0.0f, L = 0.0f;
                for (int s = 0; s < nsplit; s += 4) {
                    float m4[4], l4[4], o4[4];
UNROLL
                    for (int u = 0; u < 4; u++) {
                        const int in = s + u < nsplit;
                        m4[u] = in ? ml[(s + u) * mls] : -INFINITY;
                        l4[u] = in ? ml[(s + u) * mls + 1] : 0.0f;
                        o4[u] = in ? op[(s + u) * ops] : 0.0f;
                    }
UNROLL
                    for (int u = 0; u < 4; u++) {
                        float f = m4[u] == -INFINITY ? 0.0f : native_exp2(m4[u] - M);
                        L += f * l4[u];
                        o += f * o4[u];
                    }
                }
                /* L is 0 only without visible keys; a NaN L (NaN scores) must stay NaN */
                float r = L != 0.0f ? o / L : 0.0f;
                val += t ? -lambda * r : r;
            }
#else
            val = sum_volatile(opart + ((long)bh * nsplit * TQP + i) * DV + c, (long)TQP * DV, nsplit);
#endif
        }
        y[e] = val;
        ss += val * val;
    }
    if (norm) {
        barrier(CLK_LOCAL_MEM_FENCE); /* red free (a previous row's reduction read) */
        if (act) red[tid] = ss;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int stride = COMBINE_NT / 2; stride > 0; stride >>= 1) {
            if (tid < stride) red[tid] += red[tid + stride];
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        float inv = rsqrt(red[0] / (float)dv + norm_eps);
        for (int e = 0; e < (DV + COMBINE_NT - 1) / COMBINE_NT; e++) y[e] *= inv;
    }
    const long ob = o_off + b * os.s0 + h * os.s1 + (long)i * os.s2;
    for (int e = 0; act && e < (DV + COMBINE_NT - 1) / COMBINE_NT; e++) {
        int c = tid + e * COMBINE_NT;
        if (c >= dv) continue;
        float val = y[e] * out_scale;
        if (norm && gain) val *= LOAD(GDT, gain, c);
        STORE(ODT, out, ob + c * os.s3, val);
    }
}

/* One work-group per (batch*head, query row): combine the splits, Norm, scale, store. */
__kernel __attribute__((reqd_work_group_size(RED_NT, 1, 1))) void attention_decode_reduce(
    __global const float *opart, __global const float *mlpart, __global const void *gain,
    __global const float *lambdas, __global void *out, long4 os, long o_off, int H, int nsplit, int dv, float lambda,
    int norm, float norm_eps, float out_scale)
{
    __local float red[RED_NT];
    ATTENTION_HEAD(H, lambdas, lambda);
    combine_row(opart, mlpart, gain, out, os, o_off, b, h, bh, get_group_id(2), nsplit, dv, lambda, norm, norm_eps,
                out_scale, red);
}
