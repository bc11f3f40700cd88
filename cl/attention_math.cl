/* Scalar math shared by every attention kernel (prefill, decode, tensor-core prefill).
 * docs/spec.md states the formulas. */

/* Float <-> int mapping that preserves order, for local atomic_max on scores. */
inline int ord_int(float f)
{
    int i = as_int(f);
    return i >= 0 ? i : i ^ 0x7fffffff;
}
inline float ord_float(int i) { return as_float(i >= 0 ? i : i ^ 0x7fffffff); }

/* Threshold tau(p) = beta * sqrt(max(0, 2 ln((p+1)/kappa)) / d). */
inline float tau_of(long pos, float beta, float kappa, int d)
{
    float l = 2.0f * log(((float)pos + 1.0f) / kappa);
    return beta * sqrt(fmax(l, 0.0f) / (float)d);
}

/* Rectified power with fast paths: pmode 1 -> x, 2 -> x*x, else pow(x, p).  NaN is the
 * caller's to pass through (x <= 0 is false for NaN, so NaN reaches pow or the product). */
inline float rect_pow(float x, int pmode, float p)
{
    if (x <= 0.0f) return 0.0f;
    return pmode == 2 ? x * x : pmode == 1 ? x : pow(x, p);
}
