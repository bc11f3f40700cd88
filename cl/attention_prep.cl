/* Pre-pass of prefill attention: inverse L2 norms 1 / max(||x_t||, 1e-12) of every row of
 * up to four [B,H,T_v,d] views (q, k, q2, k2: dimension 2 of the launch picks the view), so
 * the main kernel normalises q and k tiles as it loads them.  One launch for all views: at
 * batch 1 these launches were about as long as their launch latency.  RN_LANES work-items
 * share a row, so that a warp's loads cover a few whole rows at a time (one work-item per
 * row read each row's elements 32 rows apart: about 6x slower than the bandwidth on an
 * H100); their partial sums meet in local memory.  Views whose rows are contiguous and start
 * at multiples of 8 elements (bit v of `wide`, checked by the host) are read 8 elements a
 * load (16 bytes for 16-bit storage). */

#ifndef DT
#define DT 0 /* storage dtype of x */
#endif
#define RN_LANES 8 /* work-items per row */
#define RN_NT 256  /* work-items per work-group: RN_NT / RN_LANES rows */

#define RN_PICK(v_, a_, b_, c_, d_) ((v_) == 0 ? (a_) : (v_) == 1 ? (b_) : (v_) == 2 ? (c_) : (d_))

__kernel __attribute__((reqd_work_group_size(RN_NT, 1, 1))) void row_inv_norm(
    __global const void *x0, __global const void *x1, __global const void *x2, __global const void *x3,
    long4 xs0, long4 xs1, long4 xs2, long4 xs3, long4 x_off, long4 rows, int wide, int H, int d,
    __global float *out0, __global float *out1, __global float *out2, __global float *out3)
{
    __local float part[RN_NT];
    const int lid = get_local_id(0), lane = lid % RN_LANES, v = get_global_id(2);
    __global const void *x = RN_PICK(v, x0, x1, x2, x3);
    const long4 xs = RN_PICK(v, xs0, xs1, xs2, xs3);
    const long T = RN_PICK(v, rows.s0, rows.s1, rows.s2, rows.s3);
    const long t = (long)get_group_id(0) * (RN_NT / RN_LANES) + lid / RN_LANES;
    const int bh = get_global_id(1);
    float ss = 0.0f;
    if (t < T) {
        const int b = bh / H, h = bh - (bh / H) * H;
        const long p = RN_PICK(v, x_off.s0, x_off.s1, x_off.s2, x_off.s3) + b * xs.s0 + h * xs.s1 + t * xs.s2;
        if ((wide >> v) & 1) {
            for (int c = 8 * lane; c < d; c += 8 * RN_LANES) {
                float w[8];
                LOAD8(DT, x, p + c, w);
                for (int i = 0; i < 8; i++) ss = fma(w[i], w[i], ss);
            }
        } else {
            for (int c = lane; c < d; c += RN_LANES) {
                const float e = LOAD(DT, x, p + c * xs.s3);
                ss = fma(e, e, ss);
            }
        }
    }
    part[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0 && t < T) {
        float s = 0.0f;
        for (int i = 0; i < RN_LANES; i++) s += part[lid + i];
        RN_PICK(v, out0, out1, out2, out3)[(long)bh * T + t] = 1.0f / fmax(sqrt(s), 1e-12f);
    }
}
