/* Pre-pass of prefill attention: inverse L2 norms 1 / max(||x_t||, 1e-12) of every row of
 * a [B,H,T,d] view, so the main kernel normalises q and k tiles as it loads them.  One
 * work-item per row: the pass reads each row once and is a small fraction of the kernel. */

#ifndef DT
#define DT 0 /* storage dtype of x */
#endif

__kernel void row_inv_norm(__global const void *x, long4 xs, long x_off, int H, long T, int d,
                           __global float *out)
{
    long t = get_global_id(0);
    int bh = get_global_id(1);
    if (t >= T) return;
    int b = bh / H, h = bh - (bh / H) * H;
    long p = x_off + b * xs.s0 + h * xs.s1 + t * xs.s2;
    float ss = 0.0f;
    for (int c = 0; c < d; c++) {
        float v = LOAD(DT, x, p + c * xs.s3);
        ss = fma(v, v, ss);
    }
    out[(long)bh * T + t] = 1.0f / fmax(sqrt(ss), 1e-12f);
}
