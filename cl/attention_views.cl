/* The last launch of a two-view kind run one view a launch (attention.mma_views,
 * src/ops/attention_mma.c): each view ran as its one-view kind (tda's as tra, diff_softmax's as
 * softmax) into an f32 buffer o1, o2 of [B * H][Tq][dv], its weights already normalised; here
 * out = o1 - lambda o2 (lambda clamped to [0, 1] where VIEWS_CLAMP), then the Norm, its gain and
 * the output scale, as the prefill kernels' epilogue applies them.  The output's dtype is
 * VIEWS_ODT (ODT is the views' f32).  VC_LANES work-items share a row, VIEWS_VEC (4 where dv is
 * a multiple of 4, else 1) adjacent columns each, so that rows are read in contiguous runs; a
 * work-group takes VC_ROWS rows of one (batch, head). */

#define VC_LANES (DV / VIEWS_VEC)
#define VC_ROWS (128 / VC_LANES)

__kernel __attribute__((reqd_work_group_size(VC_LANES, 1, VC_ROWS))) void attention_views_combine(
    __global const float *o1, __global const float *o2, __global const void *gain, __global const float *lambdas,
    __global void *out, long4 os, long o_off, int H, long Tq, int dv, float lambda, int norm, float norm_eps,
    float out_scale)
{
    __local float red[VC_ROWS][VC_LANES];
    ATTENTION_HEAD(H, lambdas, lambda);
    const int lane = get_local_id(0), rl = get_local_id(2), c0 = VIEWS_VEC * lane;
    const long i = get_global_id(2);
    const float lc = VIEWS_CLAMP ? clamp(lambda, 0.0f, 1.0f) : lambda;
    const int live = i < Tq && c0 < dv; /* dv % VIEWS_VEC == 0: a lane's columns are all in or all out */
    const long at = ((long)bh * Tq + min(i, Tq - 1)) * dv + (live ? c0 : 0);
    float y[VIEWS_VEC], ss = 0.0f;
#if VIEWS_VEC == 4
    const float4 a = live ? vload4(0, o1 + at) : (float4)(0.0f), w = live ? vload4(0, o2 + at) : (float4)(0.0f);
    y[0] = fma(-lc, w.x, a.x), y[1] = fma(-lc, w.y, a.y), y[2] = fma(-lc, w.z, a.z), y[3] = fma(-lc, w.w, a.w);
#else
    y[0] = live ? fma(-lc, o2[at], o1[at]) : 0.0f;
#endif
    UNROLL for (int e = 0; e < VIEWS_VEC; e++) ss = fma(y[e], y[e], ss);
    /* the row's sum of squares: each lane adds up its row's partials */
    red[rl][lane] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!live) return;
    float rs = 0.0f;
    for (int j = 0; j < VC_LANES; j++) rs += red[rl][j];
    const float rn = (norm ? rsqrt(rs / (float)dv + norm_eps) : 1.0f) * out_scale;
    const long ob = o_off + b * os.s0 + h * os.s1 + i * os.s2;
    UNROLL for (int e = 0; e < VIEWS_VEC; e++) {
        float v = y[e] * rn;
        if (norm && gain) v *= LOAD(GDT, gain, c0 + e);
        STORE(VIEWS_ODT, out, ob + (c0 + e) * os.s3, v);
    }
}
