/* Pre-pass of prefill attention: inverse L2 norms 1 / max(||x_t||, 1e-12) of every row of
 * a [B,H,T,d] view, so the main kernel normalises q and k tiles as it loads them.  RN_LANES
 * work-items share a row, each taking every RN_LANES-th element, so that a warp's loads cover
 * a few whole rows at a time (one work-item per row read each row's elements 32 rows apart:
 * about 6x slower than the bandwidth on an H100); their partial sums meet in local memory. */

#ifndef DT
#define DT 0 /* storage dtype of x */
#endif
#define RN_LANES 8 /* work-items per row */
#define RN_NT 64   /* work-items per work-group: RN_NT / RN_LANES rows */

__kernel __attribute__((reqd_work_group_size(RN_NT, 1, 1))) void row_inv_norm(
    __global const void *x, long4 xs, long x_off, int H, long T, int d, __global float *out)
{
    __local float part[RN_NT];
    const int lid = get_local_id(0), lane = lid % RN_LANES;
    const long t = (long)get_group_id(0) * (RN_NT / RN_LANES) + lid / RN_LANES;
    const int bh = get_global_id(1);
    float ss = 0.0f;
    if (t < T) {
        const int b = bh / H, h = bh - (bh / H) * H;
        const long p = x_off + b * xs.s0 + h * xs.s1 + t * xs.s2;
        for (int c = lane; c < d; c += RN_LANES) {
            const float v = LOAD(DT, x, p + c * xs.s3);
            ss = fma(v, v, ss);
        }
    }
    part[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && t < T) {
        float s = 0.0f;
        for (int i = 0; i < RN_LANES; i++) s += part[lid + i];
        out[(long)bh * T + t] = 1.0f / fmax(sqrt(s), 1e-12f);
    }
}
