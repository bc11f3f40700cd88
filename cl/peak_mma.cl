/* The matrix units' rate: independent chains of m16n8k16 products (bf16, or tf32 with
 * MMA_IN 3) on register fragments, no memory traffic in the loop (NVIDIA sm_80+ through
 * cl/mma.cl's native body).  The denominator of the tensor-core rows' percent of peak.  Each
 * warp runs MMA_ITERS trips of 8 chains, 16 x 8 x 16 x 2 = 4096 FLOPs per product. */

#ifndef MMA_ITERS
#define MMA_ITERS 1024
#endif

__kernel void mma_peak(__global float *out, uint seed)
{
#if MMA_PTX
    frag_a a;
    frag_b b;
    /* small values (bf16 pairs, or one f32 ~0.008, exponent well below 1) so the sums stay
     * finite */
    for (int i = 0; i < (int)(sizeof a.x / sizeof a.x[0]); i++) a.x[i] = 0x3c003c00u ^ (seed * (uint)(i + 1) & 0x00ff00ffu);
    for (int i = 0; i < (int)(sizeof b.x / sizeof b.x[0]); i++) b.x[i] = 0x3c003c00u ^ (seed * (uint)(i + 7) & 0x00ff00ffu);
    float c[8][4];
    for (int j = 0; j < 8; j++) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.0f;
    for (int it = 0; it < MMA_ITERS; it++)
        for (int j = 0; j < 8; j++) mma_acc(c[j], &a, &b);
    float s = 0.0f;
    for (int j = 0; j < 8; j++) s += (c[j][0] + c[j][1]) + (c[j][2] + c[j][3]);
    out[get_global_id(0)] = s;
#else
    out[get_global_id(0)] = (float)seed; /* no matrix units: the host never times this body */
#endif
}
