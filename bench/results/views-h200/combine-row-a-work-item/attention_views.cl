/* The last launch of a two-view kind run one view a launch (attention.mma_views,
 * src/ops/attention_mma.c): each view ran as its one-view kind (tda's as tra, diff_softmax's as
 * softmax) into an f32 buffer o1, o2 of [B * H][Tq][dv], its weights already normalised; here
 * out = o1 - lambda o2 (lambda clamped to [0, 1] where VIEWS_CLAMP), then the Norm, its gain and
 * the output scale, as the prefill kernels' epilogue applies them.  A work-item a query row;
 * the output's dtype is VIEWS_ODT (ODT is the views' f32). */

__kernel void attention_views_combine(__global const float *o1, __global const float *o2, __global const void *gain,
                                      __global const float *lambdas, __global void *out, long4 os, long o_off, int H,
                                      long Tq, int dv, float lambda, int norm, float norm_eps, float out_scale)
{
    ATTENTION_HEAD(H, lambdas, lambda);
    const long i = get_global_id(0);
    if (i >= Tq) return;
    const float lc = VIEWS_CLAMP ? clamp(lambda, 0.0f, 1.0f) : lambda;
    __global const float *r1 = o1 + ((long)bh * Tq + i) * dv, *r2 = o2 + ((long)bh * Tq + i) * dv;
    float ss = 0.0f;
    for (int c = 0; c < dv; c++) {
        const float y = fma(-lc, r2[c], r1[c]);
        ss = fma(y, y, ss);
    }
    const float rn = (norm ? rsqrt(ss / (float)dv + norm_eps) : 1.0f) * out_scale;
    const long ob = o_off + b * os.s0 + h * os.s1 + i * os.s2;
    for (int c = 0; c < dv; c++) {
        float y = fma(-lc, r2[c], r1[c]) * rn;
        if (norm && gain) y *= LOAD(GDT, gain, c);
        STORE(VIEWS_ODT, out, ob + c * os.s3, y);
    }
}
