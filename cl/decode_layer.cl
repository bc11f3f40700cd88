/* A whole decode layer in one launch (docs/spec.md §4.2): the five steps of the fused
 * decode layer (model.c decode_step) run as phases of one persistent kernel whose
 * DL_GROUPS work-groups are resident together and meet at grid barriers between phases:
 *
 *   1. qkv = LayerNorm1(x) @ W_attn + b_attn; k, v rows into the caches        | barrier
 *   2. att = softmax attention of q over the cached keys (key splits; the last
 *      split of a (row, head) to finish combines them)                         | barrier
 *   3. xmid = x + att @ W_proj + b_proj                                        | barrier
 *   4. hid = gelu(LayerNorm2(xmid) @ W_fc + b_fc)                              | barrier
 *   5. x = xmid + hid @ W_fcproj + b_fcproj
 *
 * Why: NVIDIA's OpenCL spends 4-16 us of host time on every enqueue (bench/results/
 * decode-floor-h200), so a batch-1 token of five launches a layer cannot go under about
 * 0.3 ms whatever the kernels do; one launch a layer takes that to a fifth.  A grid barrier
 * is only safe when every work-group runs at once: the host launches one work-group per
 * compute unit on NVIDIA GPUs and one work-group on CPU devices, and a barrier that waits
 * too long (DL_SPIN_LIMIT polls) sets the error word instead of hanging; every later
 * barrier then falls through, x becomes NaN, and the host reports the error.
 *
 * Within a launch no work-group reads an address that another wrote after this one read it
 * (the residual goes through xmid and back), so no stale cache line can be read; a write is
 * made visible by the release (or fence) of the barrier's arrival.
 *
 * Work is split in units each work-group takes in turn (unit u, u + G, ...): a GEMV unit is
 * 8 output columns over the whole K (no cross-group reduction, so the sums are
 * deterministic); an attention unit is a (row, head, key split). */

#ifndef DL_WG
#define DL_WG 256 /* work-items per work-group (a power of two >= 64) */
#endif
#ifndef DL_M
#define DL_M 1 /* decode rows, padded to 1, 2, 4 or 8 */
#endif
#ifndef D
#define D 64 /* head size, a multiple of 8 */
#endif
#ifndef DL_CGU_MAX
#define DL_CGU_MAX 8 /* column groups of 8 a GEMV unit takes at most */
#endif
#ifndef DL_CGU_MIN
#define DL_CGU_MIN 1 /* column groups of 8 a GEMV unit takes at least (wider rows read, fewer units) */
#endif
#ifndef DL_PREFETCH
/* NVIDIA: the layer's weights and visible KV rows into L2 at the start (measured: no gain;
 * nor, 4 us slower, each work-group's units of the next step before each barrier) */
#define DL_PREFETCH 0
#endif
#ifndef DL_BAR
#define DL_BAR 1 /* NVIDIA grid barrier: 0 membar.gl fences; 1 release add, acquire polls (0.8 us a launch faster) */
#endif
#ifndef DL_LOADS
#define DL_LOADS 4 /* weight loads (16 bytes of bf16) in flight per work-item (H200: 4 beat 8 and 12 with DL_PRELOAD) */
#endif
#ifndef DL_PHASE
/* 0: every step, grid barriers between them.  1-5: only that step, the launch's end taking
 * the barrier's place (decode_layer.phased: the same steps on devices and in tests where
 * work-groups need not be resident together; five short kernels also build in seconds on
 * PoCL, where the whole one takes its work-group compiler minutes) */
#define DL_PHASE 0
#endif
#define DL_RUN(step) (DL_PHASE == 0 || DL_PHASE == (step))
#if DL_PHASE
#define DL_GRID_SYNC(n) /* the launch boundary */
#define DL_FAILED 0
#else
#define DL_FAILED failed
#define DL_GRID_SYNC(n) grid_sync(bar, bar_base + (n) * (uint)G, &failed)
#endif
#ifndef DL_PRELOAD
/* 1: a work-group issues its next GEMV unit's first DL_LOADS weight loads before the barrier
 * (or the norm statistics) ahead of that step, so they arrive while it waits */
#define DL_PRELOAD 1
#endif
#ifndef DL_SKIP
#define DL_SKIP 0 /* profiling only (wrong results): bit 0 prefetch, 1-5 steps 1-5, 6 grid barriers, 7 norms */
#endif
#ifndef DL_SPIN_LIMIT
#define DL_SPIN_LIMIT (1 << 23) /* polls before a grid barrier gives up (tests set fewer) */
#endif
#define DL_VW (ADT == 0 ? 4 : 8) /* cache elements per vector load in the attention */
#define DL_DG (D / DL_VW)        /* vector groups of a head row */
#define DL_KP (DL_WG / DL_DG)    /* key partitions of the W.V accumulation */
#define DL_LBUF (DL_WG * 8 > DL_M * (DL_WG + 32) ? DL_WG * 8 : DL_M * (DL_WG + 32))
#define DL_XPT 8 /* row elements a work-item holds for the norms: C <= DL_XPT * DL_WG */

#if TDACL_NVIDIA
/* membar.gl orders this work-item's global accesses device-wide and, after a barrier's
 * wait, keeps stale L1 lines from being read (the same pattern as CUDA's grid sync) */
#define DL_FENCE() asm volatile("membar.gl;")
#define DL_PREFETCH_L2(p) asm volatile("prefetch.global.L2 [%0];" ::"l"(p))
#else
#define DL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#define DL_PREFETCH_L2(p)
#endif

/* ---- 8 weights as loaded (dl_raw) and as fp32: a load issued ahead of its use ---- */
#if WDT == 0
typedef float8 dl_raw;
inline dl_raw dl_raw_load(__global const void *p, long i) { return vload8(0, (__global const float *)p + i); }
inline void dl_raw_cvt(dl_raw r, float *w)
{
    w[0] = r.s0, w[1] = r.s1, w[2] = r.s2, w[3] = r.s3, w[4] = r.s4, w[5] = r.s5, w[6] = r.s6, w[7] = r.s7;
}
#else
typedef uint4 dl_raw;
inline dl_raw dl_raw_load(__global const void *p, long i) { return *(__global const uint4 *)((__global const ushort *)p + i); }
inline void dl_raw_cvt(dl_raw u, float *w)
{
#if WDT == 1
    bf16x8_to_f32(u, w);
#else
    const float8 f = vload_half8(0, (const half *)&u);
    w[0] = f.s0, w[1] = f.s1, w[2] = f.s2, w[3] = f.s3, w[4] = f.s4, w[5] = f.s5, w[6] = f.s6, w[7] = f.s7;
#endif
}
#endif

/* ---- the grid barrier ----
 * bar[0] counts arrivals over the model's life (wrapping); barrier number `target` is passed
 * when it reaches target.  bar[1] is the error word. */
#if TDACL_NVIDIA && DL_BAR == 1
/* the release makes the work-group's stores (ordered before it by the work-group barrier)
 * visible with the arrival; the acquire that sees the last arrival makes every other
 * group's visible to the loads after it (the pattern of CUDA's cooperative grid sync) */
inline void dl_arrive(__global volatile uint *p) { asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory"); }
inline uint dl_poll(__global volatile uint *p)
{
    uint v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
#define DL_ARRIVE_FENCE()
#else
inline void dl_arrive(__global volatile uint *p) { atomic_inc(p); }
inline uint dl_poll(__global volatile uint *p) { return *p; }
#define DL_ARRIVE_FENCE() DL_FENCE()
#endif

inline void grid_sync(__global volatile uint *bar, uint target, __local int *failed)
{
    if (DL_SKIP & 64) return;
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        DL_ARRIVE_FENCE();
        dl_arrive(bar);
        int spins = 0;
        while ((int)(dl_poll(bar) - target) < 0)
            if ((++spins & 255) == 0 && (bar[1] || spins > DL_SPIN_LIMIT)) { /* the error word, now and then */
                atomic_or(bar + 1, 1u);
                break;
            }
        DL_ARRIVE_FENCE();
        *failed = bar[1] != 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}

/* ---- row statistics of x for the norms: mean (LayerNorm) and 1 / rms of the deviations,
 * every work-group for itself (C elements a row: cheaper than another barrier) ---- */
inline void dl_row_stats(__global const float *x, int M, int C, int rms, float eps, __local float *red,
                         __local float *stats)
{
    const int tid = get_local_id(0);
    if (DL_SKIP & 128) return;
    /* the rows' elements stay in registers for both passes (C <= DL_XPT * DL_WG); each sum
     * goes 256 -> 32 -> 1 (two barriers, where a tree takes eight).  No barrier under a
     * condition: PoCL's work-group functions grow exponentially with them. */
    float xv[DL_M][DL_XPT];
UNROLL
    for (int m = 0; m < DL_M; m++)
UNROLL
        for (int i = 0; i < DL_XPT; i++) {
            const int k = tid + i * DL_WG;
            xv[m][i] = m < M && k < C ? x[(long)m * C + k] : 0.0f;
        }
    for (int pass = 0; pass < 2; pass++) {
UNROLL
        for (int m = 0; m < DL_M; m++) {
            float acc = 0.0f;
UNROLL
            for (int i = 0; i < DL_XPT; i++) {
                const float v = tid + i * DL_WG < C ? xv[m][i] - (pass ? stats[m] : 0.0f) : 0.0f;
                acc = pass ? fma(v, v, acc) : acc + v;
            }
            red[m * DL_WG + tid] = acc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid < 32 * DL_M) {
            const int m = tid / 32, l = tid % 32;
            float acc = 0.0f;
            for (int i = l; i < DL_WG; i += 32) acc += red[m * DL_WG + i];
            red[DL_M * DL_WG + tid] = acc;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid < DL_M) {
            float sum = 0.0f;
            for (int i = 0; i < 32; i++) sum += red[DL_M * DL_WG + tid * 32 + i];
            const float mean = sum / (float)C;
            if (pass) stats[DL_M + tid] = rsqrt(mean + eps);
            else stats[tid] = rms ? 0.0f : mean; /* RMSNorm: deviations from 0 */
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* The first DL_LOADS weight loads of dl_gemv_unit's work-item (rows k0, k0 + rp, ...) into
 * pre; 0 where its first round does not take them (a short K, an idle work-item). */
inline int dl_gemv_preload(__global const void *w, int N, int K, int n0, int cgu, dl_raw *pre)
{
    const int tid = get_local_id(0), rp = DL_WG / cgu, n = n0 + 8 * (tid % cgu);
    const int k = tid < rp * cgu && n < N ? tid / cgu : K;
    if (k + (DL_LOADS - 1) * rp >= K) return 0;
UNROLL
    for (int r = 0; r < DL_LOADS; r++) pre[r] = dl_raw_load(w, (long)(k + r * rp) * N + n);
    return 1;
}

/* ---- one GEMV unit: out[m][j] = sum_k A(m, k) W[k][n0 + j], j < 8 cgu, for m < M ----
 * cgu groups of 8 columns (cgu <= DL_CGU_MAX): work-item t takes column group t % cgu and
 * rows k = t / cgu, + rp, ... (rp = DL_WG / cgu rows a pass; DL_LOADS weight loads in flight),
 * then the work-group adds the rp partial sums of each column in two steps.  A(m, k) is
 * the normalized x (norm != 0: (x - mean) / rms * gain + bias) or an activation row of
 * dtype ADT.  preloaded: the first round's weights are in pre (dl_gemv_preload). */
inline void dl_gemv_unit(__global const void *w, int N, int K, int n0, int cgu, int M, __global const void *a, int lda,
                         int norm, __global const float *x, __global const float *gain, __global const float *nbias,
                         __local const float *stats, __local float *red, __local float *out, const dl_raw *pre,
                         int preloaded)
{
    const int tid = get_local_id(0), rp = DL_WG / cgu, cg = tid % cgu, n = n0 + 8 * cg;
    const int active = tid < rp * cgu && n < N;
    float acc[DL_M][8];
UNROLL
    for (int m = 0; m < DL_M; m++)
UNROLL
        for (int c = 0; c < 8; c++) acc[m][c] = 0.0f;
#define DL_A(m, k) (norm ? ((x[(long)(m) * lda + (k)] - stats[m]) * stats[DL_M + (m)] * gain[k] + (nbias ? nbias[k] : 0.0f)) \
                         : LOAD(ADT, a, (long)(m) * lda + (k)))
    int k = active ? tid / cgu : K, first = preloaded;
    for (; k + (DL_LOADS - 1) * rp < K; k += DL_LOADS * rp) {
        float wv[DL_LOADS][8];
        if (first) {
UNROLL
            for (int r = 0; r < DL_LOADS; r++) dl_raw_cvt(pre[r], wv[r]);
            first = 0;
        } else {
UNROLL
            for (int r = 0; r < DL_LOADS; r++) LOAD8(WDT, w, (long)(k + r * rp) * N + n, wv[r]);
        }
UNROLL
        for (int m = 0; m < DL_M; m++)
            if (m < M)
UNROLL
                for (int r = 0; r < DL_LOADS; r++) {
                    const float av = DL_A(m, k + r * rp);
UNROLL
                    for (int c = 0; c < 8; c++) acc[m][c] = fma(av, wv[r][c], acc[m][c]);
                }
    }
    for (; k < K; k += rp) {
        float wv[8];
        LOAD8(WDT, w, (long)k * N + n, wv);
UNROLL
        for (int m = 0; m < DL_M; m++)
            if (m < M) {
                const float av = DL_A(m, k);
UNROLL
                for (int c = 0; c < 8; c++) acc[m][c] = fma(av, wv[c], acc[m][c]);
            }
    }
#undef DL_A
    /* column j's rp partials (work-item r * cgu + j / 8, element j % 8): `slices` slices of
     * them, then the slices */
    const int cols = 8 * cgu, slices = DL_WG / cols, j = tid % cols, slice = tid / cols;
    for (int m = 0; m < DL_M; m++) {
        if (m >= M) break; /* uniform */
UNROLL
        for (int c = 0; c < 8; c++) red[tid * 8 + c] = acc[m][c];
        barrier(CLK_LOCAL_MEM_FENCE);
        float s = 0.0f;
        if (slice < slices)
            for (int r = slice; r < rp; r += slices) s += red[(r * cgu + j / 8) * 8 + j % 8];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (slice < slices) red[slice * cols + j] = s;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (tid < cols) {
            float t = 0.0f;
            for (int r = 0; r < slices; r++) t += red[r * cols + tid];
            out[m * 8 * DL_CGU_MAX + tid] = t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

/* Column groups of a unit for N columns over G work-groups: one round of units where the
 * columns allow it. */
inline int dl_cgu(int N, int G)
{
    const int groups8 = N / 8, c = max((groups8 + G - 1) / G, DL_CGU_MIN);
    return c < DL_CGU_MAX ? c : DL_CGU_MAX;
}

/* A GEMV step over N columns of K rows, in the kernel: the column groups of its units (cgu,
 * cols) and, with DL_PRELOAD, the first weight loads of this work-group's first unit (pre,
 * pre_ok), issued before the barrier or norm statistics ahead of the step */
#define DL_GEMV_STEP(w, N, K)                                                                      \
    (cgu = dl_cgu(N, G), cols = 8 * cgu,                                                           \
     pre_ok = DL_PRELOAD && group < ((N) + cols - 1) / cols && dl_gemv_preload(w, N, K, group * cols, cgu, pre))

/* the max or sum over the work-group (every work-item gets it): 256 -> 32 -> 1 */
inline float dl_reduce(float v, int is_max, __local float *red)
{
    const int tid = get_local_id(0);
    red[tid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid < 32) {
        float r = red[tid];
        for (int i = tid + 32; i < DL_WG; i += 32) r = is_max ? fmax(r, red[i]) : r + red[i];
        red[DL_WG + tid] = r;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = red[DL_WG];
    for (int i = 1; i < 32; i++) r = is_max ? fmax(r, red[DL_WG + i]) : r + red[DL_WG + i];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline void load_head_vec(__global const void *p, long i, float *v)
{
#if ADT == 0
    const float4 f = vload4(0, (__global const float *)p + i);
    v[0] = f.s0, v[1] = f.s1, v[2] = f.s2, v[3] = f.s3;
#else
    LOAD8(ADT, p, i, v);
#endif
}

/* ---- one attention unit: row m, head h, keys [j0, j1) of its visible 0..p ----
 * Chunks of DL_WG keys: one key a work-item for the scores, then DL_KP key partitions of
 * DL_DG work-items (DL_VW dims each) for weights x V, with the running max and sum of the
 * split (flash-decoding).  Writes the split's o (unnormalised), max and sum. */
inline void dl_attention_unit(__global const void *qkv, int ldq, __global const void *kc, __global const void *vc,
                              long kbase, int C, int m, int h, int j0, int j1, float scale, __global float *opart,
                              __global float *mlpart, __local float *lq, __local float *lp, __local float *red,
                              __local float *lo)
{
    const int tid = get_local_id(0), g = tid % DL_DG, part = tid / DL_DG;
    for (int e = tid; e < D; e += DL_WG) lq[e] = LOAD(ADT, qkv, (long)m * ldq + h * D + e) * scale;
    barrier(CLK_LOCAL_MEM_FENCE);
    float mrun = -INFINITY, lrun = 0.0f, o[DL_VW];
UNROLL
    for (int v = 0; v < DL_VW; v++) o[v] = 0.0f;
    for (int c0 = j0; c0 < j1; c0 += DL_WG) {
        const int n = min(DL_WG, j1 - c0);
        float s = -INFINITY;
        if (tid < n) {
            const long row = kbase + (long)(c0 + tid) * C + h * D;
            s = 0.0f;
UNROLL
            for (int e = 0; e < D; e += DL_VW) {
                float kv[DL_VW];
                load_head_vec(kc, row + e, kv);
UNROLL
                for (int v = 0; v < DL_VW; v++) s = fma(lq[e + v], kv[v], s);
            }
        }
        const float cmax = dl_reduce(s, 1, red), mnew = fmax(mrun, cmax);
        const float p = tid < n ? exp(s - mnew) : 0.0f;
        lp[tid] = p;
        const float csum = dl_reduce(p, 0, red), corr = exp(mrun - mnew);
        lrun = lrun * corr + csum;
        mrun = mnew;
UNROLL
        for (int v = 0; v < DL_VW; v++) o[v] *= corr;
        for (int jj = part; jj < n; jj += DL_KP) {
            float vv[DL_VW];
            load_head_vec(vc, kbase + (long)(c0 + jj) * C + h * D + g * DL_VW, vv);
            const float pj = lp[jj];
UNROLL
            for (int v = 0; v < DL_VW; v++) o[v] = fma(pj, vv[v], o[v]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
UNROLL
    for (int v = 0; v < DL_VW; v++) lo[part * D + g * DL_VW + v] = o[v];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = tid; e < D; e += DL_WG) {
        float sum = 0.0f;
        for (int r = 0; r < DL_KP; r++) sum += lo[r * D + e];
        opart[e] = sum;
    }
    if (tid == 0) mlpart[0] = mrun, mlpart[1] = lrun;
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(DL_WG, 1, 1))) void decode_layer(
    __global float *x, __global float *xmid, __global void *qkv, __global void *att, __global void *hid, __global float *scratch,
    __global uint *sync, __global const float *ln1_w, __global const float *ln1_b, __global const void *attn_w,
    __global const float *attn_b, __global const void *proj_w, __global const float *proj_b,
    __global const float *ln2_w, __global const float *ln2_b, __global const void *fc_w, __global const float *fc_b,
    __global const void *fcproj_w, __global const float *fcproj_b, __global void *kc, __global void *vc,
    __global const int2 *rowmap, int M, int C, int H, int pos, long cache_ld, float eps, int rms, float scale,
    int nsplit, int split_len, uint bar_base)
{
    __local float lbuf[DL_LBUF];
    __local float stats[2 * DL_M], out[DL_M * 8 * DL_CGU_MAX], lq[D], lp[DL_WG], red[DL_WG + 32];
    __local int failed, last;
    const int tid = get_local_id(0), group = get_group_id(0), G = get_num_groups(0);
    const int C3 = 3 * C, C4 = 4 * C;
    __global volatile uint *bar = (__global volatile uint *)sync;
    __global uint *arrivals = sync + 2;
    __global float *mlpart = scratch, *opart = scratch + 2 * (long)M * H * nsplit;
    int cgu, cols, pre_ok = 0;
    dl_raw pre[DL_LOADS]; /* the next GEMV unit's first weights (DL_PRELOAD) */
    if (tid == 0) failed = 0;

#if TDACL_NVIDIA && DL_PREFETCH && !(DL_SKIP & 1) && DL_PHASE == 0
    /* the layer's weights and the rows' visible K and V into L2, spread over the grid */
    {
        const long wb = WDT == 0 ? 4 : 2, ab = ADT == 0 ? 4 : 2, stride = (long)G * DL_WG * 128;
        const long first = ((long)group * DL_WG + tid) * 128;
        for (long o = first; o < 3L * C * C * wb; o += stride) DL_PREFETCH_L2((__global const char *)attn_w + o);
        for (long o = first; o < 1L * C * C * wb; o += stride) DL_PREFETCH_L2((__global const char *)proj_w + o);
        for (long o = first; o < 4L * C * C * wb; o += stride) DL_PREFETCH_L2((__global const char *)fc_w + o);
        for (long o = first; o < 4L * C * C * wb; o += stride) DL_PREFETCH_L2((__global const char *)fcproj_w + o);
        for (int m = 0; m < M; m++) {
            const long seq = rowmap ? rowmap[m].x : m, p = rowmap ? rowmap[m].y : pos;
            const long base = seq * cache_ld * ab, bytes = p * C * ab; /* row p is written below */
            for (long o = first; o < bytes; o += stride) {
                DL_PREFETCH_L2((__global const char *)kc + base + o);
                DL_PREFETCH_L2((__global const char *)vc + base + o);
            }
        }
    }
#endif

#if DL_RUN(1)
    /* 1. qkv = Norm1(x) @ W_attn + b_attn; k and v also into the caches */
    DL_GEMV_STEP(attn_w, C3, C);
    dl_row_stats(x, M, C, rms, eps, lbuf, stats);
    for (int u = group; u < ((DL_SKIP & 2) ? 0 : (C3 + cols - 1) / cols); u += G) {
        dl_gemv_unit(attn_w, C3, C, u * cols, cgu, M, NULL, C, 1, x, ln1_w, ln1_b, stats, lbuf, out, pre, u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n >= C3) continue;
            const float val = out[m * 8 * DL_CGU_MAX + i % cols] + attn_b[n];
            const long seq = rowmap ? rowmap[m].x : m, p = rowmap ? rowmap[m].y : pos;
            if (n < C) STORE(ADT, qkv, (long)m * C3 + n, val);
            else STORE(ADT, n < 2 * C ? kc : vc, seq * cache_ld + p * C + (n < 2 * C ? n - C : n - 2 * C), val);
        }
    }
#endif
    DL_GRID_SYNC(1u);

#if DL_RUN(2)
    /* 2. attention: (row, head, split) units; the last split of a (row, head) combines */
    const int units = M * H * nsplit;
    const int units2 = (DL_SKIP & 4) || DL_FAILED ? 0 : units;
    for (int u = group; u < units2; u += G) {
        const int m = u / (H * nsplit), h = (u / nsplit) % H, s = u % nsplit;
        const long seq = rowmap ? rowmap[m].x : m;
        const int p = rowmap ? rowmap[m].y : pos, j0 = s * split_len, j1 = min(j0 + split_len, p + 1);
        dl_attention_unit(qkv, C3, kc, vc, seq * cache_ld, C, m, h, j0, j1, scale, opart + (long)u * D,
                          mlpart + 2L * u, lq, lp, red, lbuf);
        DL_FENCE();
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        if (tid == 0) last = atomic_inc(arrivals + m * H + h) == (uint)(nsplit - 1);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (last) {
            if (tid == 0) arrivals[m * H + h] = 0;
            DL_FENCE();
            const int u0 = u - s;
            __global volatile const float *vml = mlpart + 2L * u0, *vo = opart + (long)u0 * D;
            for (int e = tid; e < D; e += DL_WG) {
                float mx = -INFINITY;
                for (int t = 0; t < nsplit; t++) mx = fmax(mx, vml[2 * t]);
                float num = 0.0f, den = 0.0f;
                for (int t = 0; t < nsplit; t++) {
                    const float f = exp(vml[2 * t] - mx);
                    den = fma(vml[2 * t + 1], f, den);
                    num = fma(vo[(long)t * D + e], f, num);
                }
                STORE(ADT, att, (long)m * C + h * D + e, num / den);
            }
        }
    }
#endif
#if DL_RUN(3)
    DL_GEMV_STEP(proj_w, C, C);
#endif
    DL_GRID_SYNC(2u);

#if DL_RUN(3)
    /* 3. xmid = x + att @ W_proj + b_proj */
    const int units3 = (DL_SKIP & 8) || DL_FAILED ? 0 : (C + cols - 1) / cols;
    for (int u = group; u < units3; u += G) {
        dl_gemv_unit(proj_w, C, C, u * cols, cgu, M, att, C, 0, NULL, NULL, NULL, stats, lbuf, out, pre, u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n < C) xmid[(long)m * C + n] = x[(long)m * C + n] + out[m * 8 * DL_CGU_MAX + i % cols] + proj_b[n];
        }
    }
#endif
#if DL_RUN(4)
    DL_GEMV_STEP(fc_w, C4, C);
#endif
    DL_GRID_SYNC(3u);

#if DL_RUN(4)
    /* 4. hid = gelu(Norm2(xmid) @ W_fc + b_fc) */
    dl_row_stats(xmid, M, C, rms, eps, lbuf, stats);
    const int units4 = (DL_SKIP & 16) || DL_FAILED ? 0 : (C4 + cols - 1) / cols;
    for (int u = group; u < units4; u += G) {
        dl_gemv_unit(fc_w, C4, C, u * cols, cgu, M, NULL, C, 1, xmid, ln2_w, ln2_b, stats, lbuf, out, pre, u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n < C4) STORE(ADT, hid, (long)m * C4 + n, gelu_tanh(out[m * 8 * DL_CGU_MAX + i % cols] + fc_b[n]));
        }
    }
#endif
#if DL_RUN(5)
    DL_GEMV_STEP(fcproj_w, C, C4);
#endif
    DL_GRID_SYNC(4u);

#if DL_RUN(5)
    /* 5. x = xmid + hid @ W_fcproj + b_fcproj (unit u's columns: written in step 3 by
     * this work-group) */
    const int units5 = (DL_SKIP & 32) || DL_FAILED ? 0 : (C + cols - 1) / cols;
    for (int u = group; u < units5; u += G) {
        dl_gemv_unit(fcproj_w, C, C4, u * cols, cgu, M, hid, C4, 0, NULL, NULL, NULL, stats, lbuf, out, pre, u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n < C) x[(long)m * C + n] = xmid[(long)m * C + n] + out[m * 8 * DL_CGU_MAX + i % cols] + fcproj_b[n];
        }
    }
#endif
    /* a failed barrier leaves nothing trustworthy: x becomes NaN (the host also reads bar[1]) */
    if (DL_FAILED)
        for (long i = (long)group * DL_WG + tid; i < (long)M * C; i += (long)G * DL_WG) x[i] = NAN;
}
