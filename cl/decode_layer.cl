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
/* NVIDIA grid barrier: 0 membar.gl fences; 1 release add, acquire polls (0.8 us a launch faster);
 * 2 the same, each poll reading the error word with the counter (one 8-byte acquire load: the
 * error word's own read after the wait was one more round trip at every barrier) */
#define DL_BAR 2
#endif
#ifndef DL_LOADS
/* weight loads (16 or 32 bytes) a work-item issues together, in whole rounds (H200, decode_layer
 * a launch: 4 35.2 us, 8 36.5, 12 37.7, bench/results/decode-trace-h200: more in flight at once
 * made the norms' and the activations' loads behind them wait) */
#define DL_LOADS 4
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
#define DL_GRID_ARRIVE(n) /* the launch boundary */
#define DL_GRID_WAIT(n)
#define DL_FAILED 0
#else
#define DL_FAILED failed
#define DL_GRID_ARRIVE(n) grid_arrive(bar)
/* barrier n of layer `layer`: 5 a layer, the fifth between it and the next */
#define DL_GRID_WAIT(n) grid_wait(bar, bar_base + ((uint)layer * 5u + (n)) * (uint)G, &failed)
#endif
#ifndef DL_PRELOAD
/* 1: a work-group issues its next GEMV unit's first DL_LOADS weight loads between its arrival
 * at the barrier ahead of that step and its wait there (step 1: after its norm's loads), so
 * they arrive while it waits */
#define DL_PRELOAD 1
#endif
#ifndef DL_SKIP
#define DL_SKIP 0 /* profiling only (wrong results): bit 0 prefetch, 1-5 steps 1-5, 6 grid barriers, 7 norms */
#endif
#ifndef DL_AST
/* fp32 elements of the GEMVs' activation rows staged in local memory, read there by every
 * work-item instead of through chains of global loads (a step whose M * K exceeds it reads them
 * from global memory; the host sets it from the device's local memory) */
#define DL_AST 4096
#endif
#ifndef DL_EMBED
#define DL_EMBED 0 /* 1 (a model's first layer): step 1 embeds the rows itself, x = wte[token] + wpe[position]
                      (the host passes it only where the rows are staged: M * C <= DL_AST) */
#endif
#ifndef DL_LAYERS
/* 1: the whole stack in the launch (a token's layers, a grid barrier between them): the
 * layers' weights packed in one buffer (warena) and their caches in another (carena), layer
 * l's tensors at l strides past layer 0's; lay holds the byte offsets (src/model/model_pack.c):
 * s0-sb the twelve weight tensors (ln1_w ... fcproj_b; -1: absent), sc the weights' layer
 * stride, sd and se the K and V caches, sf the caches' layer stride */
#define DL_LAYERS 0
#endif
#ifndef DL_STACK_PRELOAD
/* 1 (DL_LAYERS): a work-group issues the next layer's first W_attn loads between its arrival
 * at the barrier between two layers and its wait there, not after the norm's loads of x */
#define DL_STACK_PRELOAD DL_LAYERS
#endif
#if DL_LAYERS && DL_PHASE
#error "DL_LAYERS runs every step of every layer: DL_PHASE must be 0"
#endif
#ifndef DL_TRACE
/* profiling only (NVIDIA): at decode position DL_TRACE (> 0) every work-group prints
 * the SM clock at each phase's end, relative to the launch's start, and the global timer at
 * start and end (ns), to show where a launch's time goes */
#define DL_TRACE 0
#endif
#if DL_TRACE && TDACL_NVIDIA
inline ulong dl_clock(void)
{
    ulong c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
    return c;
}
inline ulong dl_globaltimer(void)
{
    ulong c;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(c)::"memory");
    return c;
}
#define DL_MARK(i) (tmark[i] = dl_clock())
#else
#define DL_MARK(i)
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

/* ---- 8 16-bit values (dtype dt: 1 bf16, 2 fp16) in one 16-byte load, and as fp32 ---- */
inline uint4 dl_u16x8_load(__global const void *p, long i) { return *(__global const uint4 *)((__global const ushort *)p + i); }
inline void dl_u16x8_cvt(uint4 u, int dt, float *w)
{
    if (dt == 1) {
        bf16x8_to_f32(u, w);
    } else {
        const float8 f = vload_half8(0, (const half *)&u);
        w[0] = f.s0, w[1] = f.s1, w[2] = f.s2, w[3] = f.s3, w[4] = f.s4, w[5] = f.s5, w[6] = f.s6, w[7] = f.s7;
    }
}

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
inline dl_raw dl_raw_load(__global const void *p, long i) { return dl_u16x8_load(p, i); }
inline void dl_raw_cvt(dl_raw u, float *w) { dl_u16x8_cvt(u, WDT, w); }
#endif

/* ---- the grid barrier ----
 * bar[0] counts arrivals over the model's life (wrapping); barrier number `target` is passed
 * when it reaches target.  bar[1] is the error word. */
/* dl_poll: the counter (low half) and, with DL_BAR 2 or off NVIDIA, the error word (high half) */
#if TDACL_NVIDIA && DL_BAR >= 1
/* the release makes the work-group's stores (ordered before it by the work-group barrier)
 * visible with the arrival; the acquire that sees the last arrival makes every other
 * group's visible to the loads after it (the pattern of CUDA's cooperative grid sync) */
inline void dl_arrive(__global volatile uint *p) { asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(p) : "memory"); }
inline ulong dl_poll(__global volatile uint *p)
{
#if DL_BAR == 2
    ulong v; /* p is the sync buffer's start: 8-byte aligned */
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    uint v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#endif
}
#define DL_ARRIVE_FENCE()
#define DL_POLL_ERR (DL_BAR == 2)
#else
inline void dl_arrive(__global volatile uint *p) { atomic_inc(p); }
inline ulong dl_poll(__global volatile uint *p)
{
    const uint count = p[0];
    return (ulong)p[1] << 32 | count;
}
#define DL_ARRIVE_FENCE() DL_FENCE()
#define DL_POLL_ERR 1
#endif

/* A grid barrier in two halves: grid_arrive (after the step's last write), then work that
 * needs no other group's results (the next step's first weight loads), then grid_wait: the
 * arrival's release then orders only the step's own accesses, not loads that stream for a
 * microsecond (bench/results/decode-trace-h200 has each barrier's share of a launch). */
inline void grid_arrive(__global volatile uint *bar)
{
    if (DL_SKIP & 64) return;
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        DL_ARRIVE_FENCE();
        dl_arrive(bar);
    }
}

inline void grid_wait(__global volatile uint *bar, uint target, __local int *failed)
{
    if (DL_SKIP & 64) return;
    if (get_local_id(0) == 0) {
        int spins = 0, gave_up = 0;
        ulong v;
        /* the error word with every poll where it comes in the same read, else now and then */
        while (v = dl_poll(bar), (int)((uint)v - target) < 0) {
            ++spins;
            const int err = DL_POLL_ERR ? (uint)(v >> 32) != 0 : (spins & 255) == 0 && bar[1] != 0;
            if (err || spins > DL_SPIN_LIMIT) {
                atomic_or(bar + 1, 1u);
                gave_up = 1;
                break;
            }
        }
        DL_ARRIVE_FENCE();
        *failed = gave_up || (DL_POLL_ERR ? (uint)(v >> 32) != 0 : bar[1] != 0);
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
}

#if TDACL_NVIDIA
inline float dl_shfl_xor(float v, int lanes)
{
    float r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(lanes));
    return r;
}
#endif
#define DL_WARPS (DL_WG / 32)

/* Each of the DL_M sums v[m] over the work-group, to every work-item: within each 32 work-items
 * (a warp: shuffles on NVIDIA, local memory elsewhere), then the DL_WARPS partials.  red holds
 * DL_M * (DL_WG + DL_WARPS) floats; every work-item calls it. */
inline void dl_sum_rows(float *v, __local float *red)
{
    const int tid = get_local_id(0);
    __local float *part = red + DL_M * DL_WG;
#if TDACL_NVIDIA
UNROLL
    for (int m = 0; m < DL_M; m++) {
UNROLL
        for (int o = 16; o > 0; o >>= 1) v[m] += dl_shfl_xor(v[m], o);
        if (tid % 32 == 0) part[m * DL_WARPS + tid / 32] = v[m];
    }
#else
UNROLL
    for (int m = 0; m < DL_M; m++) red[m * DL_WG + tid] = v[m];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid % 32 == 0)
        for (int m = 0; m < DL_M; m++) {
            float acc = 0.0f;
            for (int i = 0; i < 32; i++) acc += red[m * DL_WG + tid + i];
            part[m * DL_WARPS + tid / 32] = acc;
        }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
UNROLL
    for (int m = 0; m < DL_M; m++) {
        float acc = 0.0f;
UNROLL
        for (int w = 0; w < DL_WARPS; w++) acc += part[m * DL_WARPS + w];
        v[m] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* ---- the norm of rows x (C elements each), every work-group for itself (cheaper than another
 * grid barrier): mean (LayerNorm; 0 for RMSNorm) and 1 / rms of the deviations into stats, and
 * with stage the normalized rows ((x - mean) / rms * gain + bias) into as[m * C + k] for the
 * GEMV that follows.  The rows' elements (and gain and bias) stay in registers (C <= DL_XPT *
 * DL_WG), loaded at once by dl_norm_load (issued before the step's first weight loads, which
 * would otherwise delay them); with tokens (DL_EMBED), the rows are the embeddings
 * wte[tokens[m]] + wpe[position of row m] instead of x.  No barrier under a condition: PoCL's
 * work-group functions grow exponentially with them. ---- */
inline void dl_norm_load(__global const float *x, int M, int C, __global const float *gain, __global const float *nbias,
                         int stage, float (*xv)[DL_XPT], float *gv, float *bv, __global const int *tokens,
                         __global const void *wte, __global const void *wpe, __global const int2 *rowmap, int pos)
{
    const int tid = get_local_id(0);
    long tok[DL_M], at[DL_M];
UNROLL
    for (int m = 0; m < DL_M; m++) {
        tok[m] = tokens && m < M ? tokens[m] : 0;
        at[m] = rowmap && m < M ? rowmap[m].y : pos;
    }
UNROLL
    for (int i = 0; i < DL_XPT; i++) {
        const int k = tid + i * DL_WG, in = k < C;
UNROLL
        for (int m = 0; m < DL_M; m++)
            xv[m][i] = !(m < M && in) ? 0.0f
                       : !tokens    ? x[(long)m * C + k]
                                    : LOAD(WDT, wte, tok[m] * C + k) + (wpe ? LOAD(WDT, wpe, at[m] * C + k) : 0.0f);
        gv[i] = stage && in ? gain[k] : 0.0f;
        bv[i] = stage && in && nbias ? nbias[k] : 0.0f;
    }
}

inline void dl_norm_rows(int M, int C, int rms, float eps, int stage, float (*xv)[DL_XPT], const float *gv,
                         const float *bv, __local float *as, __local float *red, __local float *stats)
{
    const int tid = get_local_id(0);
    if (DL_SKIP & 128) return;
    float mean[DL_M], rstd[DL_M];
    for (int pass = 0; pass < 2; pass++) {
        float acc[DL_M];
UNROLL
        for (int m = 0; m < DL_M; m++) {
            acc[m] = 0.0f;
UNROLL
            for (int i = 0; i < DL_XPT; i++) {
                const float v = tid + i * DL_WG < C ? xv[m][i] - (pass ? mean[m] : 0.0f) : 0.0f;
                acc[m] = pass ? fma(v, v, acc[m]) : acc[m] + v;
            }
        }
        dl_sum_rows(acc, red);
UNROLL
        for (int m = 0; m < DL_M; m++) {
            if (pass) rstd[m] = rsqrt(acc[m] / (float)C + eps);
            else mean[m] = rms ? 0.0f : acc[m] / (float)C; /* RMSNorm: deviations from 0 */
        }
    }
    if (tid < DL_M) stats[tid] = mean[tid], stats[DL_M + tid] = rstd[tid];
UNROLL
    for (int m = 0; m < DL_M; m++)
UNROLL
        for (int i = 0; i < DL_XPT; i++) {
            const int k = tid + i * DL_WG;
            if (stage && m < M && k < C) as[m * C + k] = (xv[m][i] - mean[m]) * rstd[m] * gv[i] + bv[i];
        }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* M activation rows of a (K elements, row stride lda, dtype ADT) into as[m * K + k] as fp32 */
inline void dl_stage_rows(__global const void *a, int lda, int M, int K, __local float *as)
{
    const int vecs = K / 8;
    for (int i = get_local_id(0); i < M * vecs; i += DL_WG) {
        const int m = i / vecs, k = (i % vecs) * 8;
        float v[8];
        LOAD8(ADT, a, (long)m * lda + k, v);
UNROLL
        for (int c = 0; c < 8; c++) as[m * K + k + c] = v[c];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* One round of dl_gemv_unit's weight loads for the work-item at row k: rows k, k + rp, ...,
 * k + (DL_LOADS - 1) rp of its 8 columns n..n+7, issued together; a row at or past K is not
 * read (0).  Rounds are whole: a short K costs no extra round of single loads, each of which
 * waited a full memory latency (GPT-2 small's [768, 768] projection took three). */
inline void dl_gemv_round(__global const void *w, int N, int K, int k, int rp, int n, dl_raw *raw)
{
UNROLL
    for (int r = 0; r < DL_LOADS; r++) raw[r] = k + r * rp < K ? dl_raw_load(w, (long)(k + r * rp) * N + n) : (dl_raw)(0);
}

/* dl_gemv_unit's first round for the unit of columns n0.. (issued ahead of the barrier or the
 * norm statistics before its step) */
inline void dl_gemv_preload(__global const void *w, int N, int K, int n0, int cgu, dl_raw *pre)
{
    const int tid = get_local_id(0), rp = DL_WG / cgu, n = n0 + 8 * (tid % cgu);
    dl_gemv_round(w, N, K, tid < rp * cgu && n < N ? tid / cgu : K, rp, n, pre);
}

/* ---- one GEMV unit: out[m][j] = sum_k A(m, k) W[k][n0 + j], j < 8 cgu, for m < M ----
 * cgu groups of 8 columns (cgu <= DL_CGU_MAX): work-item t takes column group t % cgu and
 * rows k = t / cgu, + rp, ... (rp = DL_WG / cgu rows a pass), DL_LOADS rows a round, then the
 * work-group adds the rp partial sums of each column in two steps.  A(m, k) is as[m * K + k]
 * (staged: the rows in local memory, dl_norm_rows or dl_stage_rows) or else read here: the
 * normalized x (norm != 0: (x - mean) / rms * gain + bias) or an activation row of dtype ADT.
 * preloaded: the first round's weights are in pre (dl_gemv_preload). */
inline void dl_gemv_unit(__global const void *w, int N, int K, int n0, int cgu, int M, __global const void *a, int lda,
                         int norm, __global const float *x, __global const float *gain, __global const float *nbias,
                         __local const float *stats, __local const float *as, int staged, __local float *red,
                         __local float *out, const dl_raw *pre, int preloaded)
{
    const int tid = get_local_id(0), rp = DL_WG / cgu, cg = tid % cgu, n = n0 + 8 * cg;
    const int active = tid < rp * cgu && n < N;
    float acc[DL_M][8];
UNROLL
    for (int m = 0; m < DL_M; m++)
UNROLL
        for (int c = 0; c < 8; c++) acc[m][c] = 0.0f;
#define DL_A(m, k)                                                                                             \
    (staged ? as[(m) * K + (k)]                                                                                \
     : norm ? ((x[(long)(m) * lda + (k)] - stats[m]) * stats[DL_M + (m)] * gain[k] + (nbias ? nbias[k] : 0.0f)) \
            : LOAD(ADT, a, (long)(m) * lda + (k)))
    for (int k = active ? tid / cgu : K, first = preloaded; k < K; k += DL_LOADS * rp, first = 0) {
        dl_raw raw[DL_LOADS];
        if (first) {
UNROLL
            for (int r = 0; r < DL_LOADS; r++) raw[r] = pre[r];
        } else {
            dl_gemv_round(w, N, K, k, rp, n, raw);
        }
UNROLL
        for (int r = 0; r < DL_LOADS; r++)
            if (k + r * rp < K) {
                float wv[8];
                dl_raw_cvt(raw[r], wv);
UNROLL
                for (int m = 0; m < DL_M; m++)
                    if (m < M) {
                        const float av = DL_A(m, k + r * rp);
UNROLL
                        for (int c = 0; c < 8; c++) acc[m][c] = fma(av, wv[c], acc[m][c]);
                    }
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
    (cgu = dl_cgu(N, G), cols = 8 * cgu, pre_ok = DL_PRELOAD && group < ((N) + cols - 1) / cols,               \
     pre_ok ? dl_gemv_preload(w, N, K, group * cols, cgu, pre) : (void)0)

/* the max or sum over the work-group, to every work-item: within each warp (shuffles on
 * NVIDIA, local memory elsewhere), then the DL_WARPS partials; red holds DL_WG + DL_WARPS */
inline float dl_reduce(float v, int is_max, __local float *red)
{
    const int tid = get_local_id(0);
#if TDACL_NVIDIA
UNROLL
    for (int o = 16; o > 0; o >>= 1) {
        const float w = dl_shfl_xor(v, o);
        v = is_max ? fmax(v, w) : v + w;
    }
    if (tid % 32 == 0) red[DL_WG + tid / 32] = v;
#else
    red[tid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (tid % 32 == 0) {
        float r = red[tid];
        for (int i = 1; i < 32; i++) r = is_max ? fmax(r, red[tid + i]) : r + red[tid + i];
        red[DL_WG + tid / 32] = r;
    }
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = red[DL_WG];
UNROLL
    for (int i = 1; i < DL_WARPS; i++) r = is_max ? fmax(r, red[DL_WG + i]) : r + red[DL_WG + i];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* DL_VW elements of a head row as loaded (dl_hraw, 16 bytes) and as fp32 */
#if ADT == 0
typedef float4 dl_hraw;
inline dl_hraw dl_hraw_load(__global const void *p, long i) { return vload4(0, (__global const float *)p + i); }
inline void dl_hraw_cvt(dl_hraw f, float *v) { v[0] = f.s0, v[1] = f.s1, v[2] = f.s2, v[3] = f.s3; }
#else
typedef uint4 dl_hraw;
inline dl_hraw dl_hraw_load(__global const void *p, long i) { return dl_u16x8_load(p, i); }
inline void dl_hraw_cvt(dl_hraw u, float *v) { dl_u16x8_cvt(u, ADT, v); }
#endif
inline void load_head_vec(__global const void *p, long i, float *v) { dl_hraw_cvt(dl_hraw_load(p, i), v); }

#ifndef DL_VPRE
/* V rows a work-item loads with the chunk's K rows, before the scores' reductions (the rest, if
 * a chunk has more than DL_VPRE * DL_KP keys, after them) */
#define DL_VPRE (DL_DG < 8 ? DL_DG : 8)
#endif

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
    /* q goes to local memory after the first chunk's K and V loads are issued (its own load
     * then waits alongside theirs) */
    const float qv = tid < D ? LOAD(ADT, qkv, (long)m * ldq + h * D + tid) * scale : 0.0f;
    float mrun = -INFINITY, lrun = 0.0f, o[DL_VW];
UNROLL
    for (int v = 0; v < DL_VW; v++) o[v] = 0.0f;
    for (int c0 = j0; c0 < j1; c0 += DL_WG) {
        const int n = min(DL_WG, j1 - c0);
        dl_hraw vpre[DL_VPRE]; /* V rows part, part + DL_KP, ... of the chunk: in flight with K's */
UNROLL
        for (int i = 0; i < DL_VPRE; i++)
            vpre[i] = part + i * DL_KP < n ? dl_hraw_load(vc, kbase + (long)(c0 + part + i * DL_KP) * C + h * D + g * DL_VW)
                                           : (dl_hraw)(0);
        dl_hraw kraw[DL_DG]; /* this work-item's key row */
        const long row = kbase + (long)(c0 + tid) * C + h * D;
UNROLL
        for (int i = 0; i < DL_DG; i++) kraw[i] = tid < n ? dl_hraw_load(kc, row + i * DL_VW) : (dl_hraw)(0);
        if (c0 == j0 && tid < D) lq[tid] = qv;
        barrier(CLK_LOCAL_MEM_FENCE);
        float s = -INFINITY;
        if (tid < n) {
            s = 0.0f;
UNROLL
            for (int i = 0; i < DL_DG; i++) {
                float kv[DL_VW];
                dl_hraw_cvt(kraw[i], kv);
UNROLL
                for (int v = 0; v < DL_VW; v++) s = fma(lq[i * DL_VW + v], kv[v], s);
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
UNROLL
        for (int i = 0; i < DL_VPRE; i++)
            if (part + i * DL_KP < n) {
                float vv[DL_VW];
                dl_hraw_cvt(vpre[i], vv);
                const float pj = lp[part + i * DL_KP];
UNROLL
                for (int v = 0; v < DL_VW; v++) o[v] = fma(pj, vv[v], o[v]);
            }
        for (int jj = part + DL_VPRE * DL_KP; jj < n; jj += DL_KP) {
            float vv[DL_VW];
            load_head_vec(vc, kbase + (long)(c0 + jj) * C + h * D + g * DL_VW, vv);
            const float pj = lp[jj];
UNROLL
            for (int v = 0; v < DL_VW; v++) o[v] = fma(pj, vv[v], o[v]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    /* the DL_KP partitions' o: on NVIDIA first summed within each warp by shuffles (where a
     * warp holds several), leaving DL_LO_ROWS rows for the final sums */
#if TDACL_NVIDIA && DL_DG < 32
UNROLL
    for (int v = 0; v < DL_VW; v++) {
UNROLL
        for (int sh = DL_DG; sh < 32; sh <<= 1) o[v] += dl_shfl_xor(o[v], sh);
        if (tid % 32 < DL_DG) lo[(tid / 32) * D + g * DL_VW + v] = o[v];
    }
#define DL_LO_ROWS DL_WARPS
#else
UNROLL
    for (int v = 0; v < DL_VW; v++) lo[part * D + g * DL_VW + v] = o[v];
#define DL_LO_ROWS DL_KP
#endif
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int e = tid; e < D; e += DL_WG) {
        float sum = 0.0f;
        for (int r = 0; r < DL_LO_ROWS; r++) sum += lo[r * D + e];
        opart[e] = sum;
    }
    if (tid == 0) mlpart[0] = mrun, mlpart[1] = lrun;
    barrier(CLK_LOCAL_MEM_FENCE);
}

__kernel __attribute__((reqd_work_group_size(DL_WG, 1, 1))) void decode_layer(
    __global float *x, __global float *xmid, __global void *qkv, __global void *att, __global void *hid, __global float *scratch,
    __global uint *sync,
#if DL_LAYERS
    __global const uchar *warena, __global uchar *carena, long16 lay, int n_layer,
#else
    __global const float *ln1_w, __global const float *ln1_b, __global const void *attn_w,
    __global const float *attn_b, __global const void *proj_w, __global const float *proj_b,
    __global const float *ln2_w, __global const float *ln2_b, __global const void *fc_w, __global const float *fc_b,
    __global const void *fcproj_w, __global const float *fcproj_b, __global void *kc, __global void *vc,
#endif
    __global const int2 *rowmap, int M, int C, int H, int pos, long cache_ld, float eps, int rms, float scale,
    int nsplit, int split_len, uint bar_base
#if DL_EMBED
    , __global const int *tokens, __global const void *wte, __global const void *wpe
#endif
    )
{
    __local float lbuf[DL_LBUF], astage[DL_AST > 0 ? DL_AST : 1];
    __local float stats[2 * DL_M], out[DL_M * 8 * DL_CGU_MAX], lq[D], lp[DL_WG], red[DL_WG + 32];
    __local int failed, last;
    const int tid = get_local_id(0), group = get_group_id(0), G = get_num_groups(0);
    const int C3 = 3 * C, C4 = 4 * C;
    __global volatile uint *bar = (__global volatile uint *)sync;
    __global uint *arrivals = sync + 2;
    __global float *mlpart = scratch, *opart = scratch + 2 * (long)M * H * nsplit;
    int cgu, cols, pre_ok = 0;
    dl_raw pre[DL_LOADS]; /* the next GEMV unit's first weights (DL_PRELOAD) */
    float nx[DL_M][DL_XPT], ng[DL_XPT], nb[DL_XPT]; /* a norm's rows, gain and bias (dl_norm_load) */
    if (tid == 0) failed = 0;
#if DL_TRACE && TDACL_NVIDIA
    ulong tmark[13];
    for (int i = 0; i < 13; i++) tmark[i] = 0;
    const ulong gt0 = dl_globaltimer();
    DL_MARK(0);
#endif

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

#if DL_LAYERS
    for (int layer = 0; layer < n_layer; layer++) {
#define DL_AT_OF(type, i, l) ((type)(lay.s##i < 0 ? 0 : warena + lay.s##i + (long)(l) * lay.sc))
#define DL_AT(type, i) DL_AT_OF(type, i, layer)
    __global const float *ln1_w = DL_AT(__global const float *, 0), *ln1_b = DL_AT(__global const float *, 1);
    __global const void *attn_w = DL_AT(__global const void *, 2), *proj_w = DL_AT(__global const void *, 4);
    __global const float *attn_b = DL_AT(__global const float *, 3), *proj_b = DL_AT(__global const float *, 5);
    __global const float *ln2_w = DL_AT(__global const float *, 6), *ln2_b = DL_AT(__global const float *, 7);
    __global const void *fc_w = DL_AT(__global const void *, 8), *fcproj_w = DL_AT(__global const void *, a);
    __global const float *fc_b = DL_AT(__global const float *, 9), *fcproj_b = DL_AT(__global const float *, b);
    __global void *kc = carena + lay.sd + (long)layer * lay.sf, *vc = carena + lay.se + (long)layer * lay.sf;
#else
    { /* (the body is not indented for the loop) */
    int layer = 0; /* not const: as a constant, `layer == 0` in && and || draws compiler warnings */
    (void)layer;
#endif
#if DL_RUN(1)
    /* 1. qkv = Norm1(x) @ W_attn + b_attn; k and v also into the caches */
    const int staged1 = M * C <= DL_AST;
#if DL_EMBED
    dl_norm_load(x, M, C, ln1_w, ln1_b, staged1, nx, ng, nb, layer == 0 ? tokens : NULL, wte, wpe, rowmap, pos);
    /* x itself (the residual, read in step 3 after two grid barriers) from group 0 */
    if (group == 0 && layer == 0)
UNROLL
        for (int i = 0; i < DL_XPT; i++)
UNROLL
            for (int m = 0; m < DL_M; m++)
                if (m < M && tid + i * DL_WG < C) x[(long)m * C + tid + i * DL_WG] = nx[m][i];
#else
    dl_norm_load(x, M, C, ln1_w, ln1_b, staged1, nx, ng, nb, NULL, NULL, NULL, NULL, 0);
#endif
    if (!DL_STACK_PRELOAD || layer == 0) DL_GEMV_STEP(attn_w, C3, C); /* (later layers: at the barrier before) */
    DL_MARK(1);
    dl_norm_rows(M, C, rms, eps, staged1, nx, ng, nb, astage, lbuf, stats);
    DL_MARK(2);
    for (int u = group; u < ((DL_SKIP & 2) ? 0 : (C3 + cols - 1) / cols); u += G) {
        dl_gemv_unit(attn_w, C3, C, u * cols, cgu, M, NULL, C, 1, x, ln1_w, ln1_b, stats, astage, staged1, lbuf, out, pre,
                     u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n >= C3) continue;
            const float val = out[m * 8 * DL_CGU_MAX + i % cols] + attn_b[n];
            const long seq = rowmap ? rowmap[m].x : m, p = rowmap ? rowmap[m].y : pos;
            if (n < C) STORE(ADT, qkv, (long)m * C3 + n, val);
            else STORE(ADT, n < 2 * C ? kc : vc, seq * cache_ld + p * C + (n < 2 * C ? n - C : n - 2 * C), val);
        }
    }
    DL_MARK(3);
#endif
    DL_GRID_ARRIVE(1u);
    DL_GRID_WAIT(1u);
    DL_MARK(4);

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
        /* the last split of (m, h) to finish combines the splits: their maxima and sums read by
         * the work-items together, each output element summed over the splits in DL_WG / D parts
         * (every work-item runs it, to keep the barriers unconditional; the others take no split) */
        const int ncomb = last ? nsplit : 0, parts = DL_WG / D, e = tid % D, tp = tid / D;
        __global volatile const float *vml = mlpart + 2L * (u - s), *vo = opart + (long)(u - s) * D;
        if (last) {
            if (tid == 0) arrivals[m * H + h] = 0;
            DL_FENCE();
        }
        float mx = -INFINITY, den = 0.0f, num = 0.0f;
        for (int t = tid; t < ncomb; t += DL_WG) mx = fmax(mx, vml[2 * t]);
        mx = dl_reduce(mx, 1, red);
        for (int t = tid; t < ncomb; t += DL_WG) den = fma(vml[2 * t + 1], exp(vml[2 * t] - mx), den);
        den = dl_reduce(den, 0, red);
        for (int t = tp; t < ncomb; t += parts) num = fma(vo[(long)t * D + e], exp(vml[2 * t] - mx), num);
        lbuf[tp * D + e] = num;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (last && tid < D) {
            float sum = 0.0f;
            for (int r = 0; r < parts; r++) sum += lbuf[r * D + tid];
            STORE(ADT, att, (long)m * C + h * D + tid, sum / den);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
    DL_MARK(5);
    DL_GRID_ARRIVE(2u);
#if DL_RUN(3)
    DL_GEMV_STEP(proj_w, C, C);
#endif
    DL_GRID_WAIT(2u);
    DL_MARK(6);

#if DL_RUN(3)
    /* 3. xmid = x + att @ W_proj + b_proj */
    const int units3 = (DL_SKIP & 8) || DL_FAILED ? 0 : (C + cols - 1) / cols, staged3 = M * C <= DL_AST;
    dl_stage_rows(att, C, staged3 && group < units3 ? M : 0, C, astage);
    for (int u = group; u < units3; u += G) {
        dl_gemv_unit(proj_w, C, C, u * cols, cgu, M, att, C, 0, NULL, NULL, NULL, stats, astage, staged3, lbuf, out, pre,
                     u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n < C) xmid[(long)m * C + n] = x[(long)m * C + n] + out[m * 8 * DL_CGU_MAX + i % cols] + proj_b[n];
        }
    }
#endif
    DL_MARK(7);
    DL_GRID_ARRIVE(3u);
#if DL_RUN(4)
    DL_GEMV_STEP(fc_w, C4, C);
#endif
    DL_GRID_WAIT(3u);
    DL_MARK(8);

#if DL_RUN(4)
    /* 4. hid = gelu(Norm2(xmid) @ W_fc + b_fc) */
    const int staged4 = M * C <= DL_AST;
    dl_norm_load(xmid, M, C, ln2_w, ln2_b, staged4, nx, ng, nb, NULL, NULL, NULL, NULL, 0);
    dl_norm_rows(M, C, rms, eps, staged4, nx, ng, nb, astage, lbuf, stats);
    DL_MARK(9);
    const int units4 = (DL_SKIP & 16) || DL_FAILED ? 0 : (C4 + cols - 1) / cols;
    for (int u = group; u < units4; u += G) {
        dl_gemv_unit(fc_w, C4, C, u * cols, cgu, M, NULL, C, 1, xmid, ln2_w, ln2_b, stats, astage, staged4, lbuf, out, pre,
                     u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n < C4) STORE(ADT, hid, (long)m * C4 + n, gelu_tanh(out[m * 8 * DL_CGU_MAX + i % cols] + fc_b[n]));
        }
    }
#endif
    DL_MARK(10);
    DL_GRID_ARRIVE(4u);
#if DL_RUN(5)
    DL_GEMV_STEP(fcproj_w, C, C4);
#endif
    DL_GRID_WAIT(4u);
    DL_MARK(11);

#if DL_RUN(5)
    /* 5. x = xmid + hid @ W_fcproj + b_fcproj (unit u's columns: written in step 3 by
     * this work-group) */
    const int units5 = (DL_SKIP & 32) || DL_FAILED ? 0 : (C + cols - 1) / cols, staged5 = M * C4 <= DL_AST;
    dl_stage_rows(hid, C4, staged5 && group < units5 ? M : 0, C4, astage);
    for (int u = group; u < units5; u += G) {
        dl_gemv_unit(fcproj_w, C, C4, u * cols, cgu, M, hid, C4, 0, NULL, NULL, NULL, stats, astage, staged5, lbuf, out,
                     pre, u == group && pre_ok);
        for (int i = tid; i < M * cols; i += DL_WG) {
            const int m = i / cols, n = u * cols + i % cols;
            if (n < C) x[(long)m * C + n] = xmid[(long)m * C + n] + out[m * 8 * DL_CGU_MAX + i % cols] + fcproj_b[n];
        }
    }
#endif
    DL_MARK(12);
#if DL_LAYERS
    /* the next layer's norms read all of x */
    if (layer + 1 < n_layer) {
        DL_GRID_ARRIVE(5u);
#if DL_STACK_PRELOAD
        DL_GEMV_STEP(DL_AT_OF(__global const void *, 2, layer + 1), C3, C);
#endif
        DL_GRID_WAIT(5u);
    }
#endif
    } /* the layer */
#if DL_TRACE && TDACL_NVIDIA
    if (pos == DL_TRACE && tid == 0)
        printf("dl_trace g%d gt %lu %lu: %lu %lu %lu %lu %lu %lu %lu %lu %lu %lu %lu %lu\n", group, gt0,
               dl_globaltimer() - gt0, tmark[1] - tmark[0], tmark[2] - tmark[0], tmark[3] - tmark[0], tmark[4] - tmark[0],
               tmark[5] - tmark[0], tmark[6] - tmark[0], tmark[7] - tmark[0], tmark[8] - tmark[0], tmark[9] - tmark[0],
               tmark[10] - tmark[0], tmark[11] - tmark[0], tmark[12] - tmark[0]);
#endif
    /* a failed barrier leaves nothing trustworthy: x becomes NaN (the host also reads bar[1]) */
    if (DL_FAILED)
        for (long i = (long)group * DL_WG + tid; i < (long)M * C; i += (long)G * DL_WG) x[i] = NAN;
}
