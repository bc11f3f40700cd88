/* How fast is a plain wgmma GEMM through NVIDIA's OpenCL (probe_sm90a.h), on GPT-2's shapes?
 * c[M,N] = a[M,K] @ b[K,N], bf16 a, b (b as the checkpoint stores it, N contiguous, read
 * MN-major through wgmma's trans-b) and c, f32 accumulators.  A work-group of two warpgroups
 * owns a 128 x BN tile of c (each warpgroup 64 rows: one m64nBNk16 wgmma per 16 of K); a and
 * b come by cp.async into STAGES local stages of BK = 32 in the no-swizzle core-matrix layout
 * (8 rows of 16 bytes, PAD extra bytes between core matrices), STAGES - 1 steps ahead; each
 * step waits for its wgmma before the next (wait_group 0).  Checked against a double product at
 * 4096 sampled entries; B's two descriptor offsets tried both ways on the first shape.
 *   gcc -O2 -o /tmp/wgg bench/probes/wgmma_gemm_probe.c -lOpenCL -lm && /tmp/wgg */
#include <math.h>

#include "probe_sm90a.h"

static const char *body =
    "#define BM (64 * WGS)\n#define BK 32\n#define NT (128 * WGS)\n"
    /* copies run LOOK steps ahead; with WAIT1 a step leaves its wgmma in flight, so the slot it
     * may refill is two steps old */
    "#define LOOK (STAGES - 1 - WAIT1)\n"
    "#define A_CK (128 + PAD)        /* bytes between A's core matrices along K */\n"
    "#define A_CM ((BK / 8) * A_CK)  /* ... along M */\n"
    "#define A_ST ((BM / 8) * A_CM)  /* a stage of A */\n"
    "#define B_CK (128 + PAD)        /* bytes between B's core matrices along K */\n"
    "#define B_CN ((BK / 8) * B_CK)  /* ... along N */\n"
    "#define B_ST ((BN / 8) * B_CN)\n"
    /* SWZ: K-major tiles in wgmma's 64-byte swizzle: a row's 32 k (64 bytes) in one line, its
     * 16-byte chunk c at c ^ ((row / 2) % 4), so a row's global 64 bytes land in one local line */
    /* MN-major B (b [K, N]) in the same swizzle: atoms of 8 k-rows x 32 n (64 bytes), N-atoms
     * 512 bytes apart, K-atoms BN / 32 x 512 */
    "#if SWZ && (PAD || BK != 32)\n#error SWZ: no PAD, BK 32\n#endif\n"
    "#define SWZ_OFF(r, c) ((r) * 64 + (((c) ^ (((r) >> 1) & 3)) << 4))\n"
    "#define SWZ_MN_OFF(k, c) ((((k) / 8) * (BN / 32) + (c) / 4) * 512 + ((k) % 8) * 64 + ((((c) % 4) ^ ((((k) % 8) >> 1) & 3)) << 4))\n"
    "ulong desc_of(__local const void *p, int lead, int stride) {\n"
    "  return SWZ ? (wg_desc(p, lead, stride) | (2ul << 62)) : wg_desc(p, lead, stride);\n"
    "}\n"
    "#define NR (BN / 2)\n"
    "void cp16(uint dst, __global const ushort *src) {\n"
    "  __asm__ volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\" :: \"r\"(dst), \"l\"(src) : \"memory\");\n"
    "}\n"
    /* Each thread's chunks of a stage: global bases and local offsets formed once; a stage is then a
     * pointer offset and a cp.async a chunk.  B MN-major: BMAP 0 gives consecutive threads the
     * chunks of one row of b (coalesced reads, each chunk to another core matrix); BMAP 1 the eight
     * rows of one core matrix (its 128 bytes written at once, reads of 16 bytes a row). */
    "#define ACH (BM * BK / 8 / NT)\n#define BCH (BN * BK / 8 / NT)\n"
    "#define CHUNKS_SETUP() \\\n"
    "  __global const ushort *ga[ACH], *gb[BCH]; uint sa[ACH], sb[BCH]; \\\n"
    "  for (int j = 0; j < ACH; j++) { \\\n"
    "    const int i = tid + j * NT, r = i / (BK / 8), c = i % (BK / 8); \\\n"
    "    ga[j] = a + (long)(m0 + r) * K + c * 8; sa[j] = SWZ ? SWZ_OFF(r, c) : (r / 8) * A_CM + c * A_CK + (r % 8) * 16; \\\n"
    "  } \\\n"
    "  for (int j = 0; j < BCH; j++) { \\\n"
    "    const int i = tid + j * NT; \\\n"
    "    if (KMAJOR_B) { const int n = i / (BK / 8), c = i % (BK / 8); \\\n"
    "      gb[j] = b + (long)(n0 + n) * K + c * 8; sb[j] = SWZ ? SWZ_OFF(n, c) : (n / 8) * B_CN + c * B_CK + (n % 8) * 16; \\\n"
    "    } else { const int k = BMAP ? i % 8 + 8 * (i / BN) : i / (BN / 8), c = BMAP ? (i / 8) % (BN / 8) : i % (BN / 8); \\\n"
    "      gb[j] = b + (long)k * N + n0 + c * 8; sb[j] = SWZ ? SWZ_MN_OFF(k, c) : c * B_CN + (k / 8) * B_CK + (k % 8) * 16; } \\\n"
    "  }\n"
    "#define B_STEP (KMAJOR_B ? BK : (long)BK * N) /* elements between two steps' chunks of b */\n"
    "#define LOAD_STAGE(slot, kt) do { \\\n"
    "    const uint as_ = sbase + (slot) * A_ST, bs_ = sbase + STAGES * A_ST + (slot) * B_ST; \\\n"
    "    _Pragma(\"unroll\") for (int j = 0; j < ACH; j++) cp16(as_ + sa[j], ga[j] + (kt) * BK); \\\n"
    "    _Pragma(\"unroll\") for (int j = 0; j < BCH; j++) cp16(bs_ + sb[j], gb[j] + (kt) * B_STEP); \\\n"
    "  } while (0)\n"
    "#define COMMIT() __asm__ volatile(\"cp.async.commit_group;\" ::: \"memory\")\n"
    "#define STR_(x) #x\n#define STR(x) STR_(x)\n"
    "#define WAIT_STAGES() __asm__ volatile(\"cp.async.wait_group \" STR(LOOK_M1) \";\" ::: \"memory\")\n"
    "uint pack_bf16(float lo, float hi) {\n"
    "  uint r;\n"
    "  __asm__(\"cvt.rn.bf16x2.f32 %0, %1, %2;\" : \"=r\"(r) : \"f\"(hi), \"f\"(lo));\n"
    "  return r;\n"
    "}\n"
    "__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))\n"
    "void gemm_wgmma(__global const ushort *a, __global const ushort *b, __global uint *c, int M, int N, int K,\n"
    "                int b_lead, int b_stride) {\n"
    "  __local uchar smem[STAGES * (A_ST + B_ST)] __attribute__((aligned(1024)));\n"
    "  const int tid = get_local_id(0), wg = tid / 128, w = (tid / 32) % 4, lane = tid % 32;\n"
    "  const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM, KT = K / BK;\n"
    "  const uint sbase = (uint)(size_t)smem;\n"
    "  CHUNKS_SETUP();\n"
    "  for (int s = 0; s < LOOK; s++) {\n"
    "    if (s < KT) LOAD_STAGE(s, s);\n"
    "    COMMIT();\n"
    "  }\n"
    "  float d[NR];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NR; i++) d[i] = 0.0f;\n"
    "  for (int kt = 0; kt < KT; kt++) {\n"
    "    WAIT_STAGES();\n"
    "    if (!(SKIP & 1)) PROXY_FENCE();\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    const int nk = kt + LOOK, ns = nk % STAGES, slot = kt % STAGES;\n"
    "    if (nk < KT && !(SKIP & 4)) LOAD_STAGE(ns, nk);\n"
    "    COMMIT();\n"
    "    __local uchar *as = smem + slot * A_ST + wg * (64 / 8) * A_CM, *bs = smem + STAGES * A_ST + slot * B_ST;\n"
    "    WG_FENCE();\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < BK / 16; j++) if (!(SKIP & 2)) WGMMA(d, desc_of(as + j * (SWZ ? 32 : 2 * A_CK), SWZ ? 16 : A_CK, SWZ ? 512 : A_CM), desc_of(bs + j * (!SWZ ? 2 * B_CK : KMAJOR_B ? 32 : 2 * (BN / 32) * 512), b_lead, b_stride), 1);\n"
    "    WG_COMMIT();\n"
    "    if (WAIT1) WG_WAIT1(); else WG_WAIT0();\n"
    "  }\n"
    "  WG_WAIT0();\n"
    "  FENCE_D(d);\n"
    "  const int r = m0 + 64 * wg + 16 * w + lane / 4;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < BN / 8; j++) {\n"
    "    const int col = n0 + 8 * j + 2 * (lane % 4);\n"
    "    c[((long)r * N + col) / 2] = pack_bf16(d[4 * j], d[4 * j + 1]);\n"
    "    c[((long)(r + 8) * N + col) / 2] = pack_bf16(d[4 * j + 2], d[4 * j + 3]);\n"
    "  }\n"
    "}\n";

typedef struct {
    int bn, stages, pad, wgs, wait1, kmajor_b; /* wgs: warpgroups a work-group (BM = 64 wgs); kmajor_b: b given as bt[N][K] */
    int bmap; /* MN-major B: which chunks a thread copies (the kernel's BMAP) */
    int skip; /* timing only, results wrong: 1 no proxy fence, 2 no wgmma, 4 no copies after the first stages */
    int swz;  /* 64-byte swizzled K-major tiles */
    cl_program prog;
} config;

/* one launch's c against the double product at 4096 sampled entries: the worst error over
 * (0.01 |ref| + 0.02) (bf16 output rounding is 2^-9 relative) */
static double check(const float *fa, const float *fb, const unsigned short *hc, int M, int N, int K)
{
    double worst = 0;
    srand(11);
    for (int t = 0; t < 4096; t++) {
        const int i = rand() % M, j = rand() % N;
        double s = 0;
        for (int k = 0; k < K; k++) s += (double)fa[(long)i * K + k] * fb[(long)k * N + j];
        const double e = fabs(probe_bf16_to_f32(hc[(long)i * N + j]) - s) / (0.01 * fabs(s) + 0.02);
        if (e > worst) worst = e;
    }
    return worst;
}

int main(int argc, char **argv)
{
    const char *outdir = argc > 1 ? argv[1] : NULL;
    cl_device_id dev = probe_device();
    cl_command_queue q;
    cl_context cx = probe_context(dev, CL_QUEUE_PROFILING_ENABLE, &q);
    /* local memory: STAGES x (A + B stage) <= 48 KB */
    config cfg[] = {
        {.bn = 128, .stages = 3, .wgs = 2, .kmajor_b = 1, .swz = 1},
        {.bn = 128, .stages = 3, .wgs = 2, .kmajor_b = 0, .swz = 1},
        {.bn = 64, .stages = 4, .wgs = 2, .kmajor_b = 0, .swz = 1},
        {.bn = 128, .stages = 4, .wgs = 1, .kmajor_b = 0, .swz = 1},
        {.bn = 64, .stages = 4, .wgs = 2, .kmajor_b = 1, .swz = 1},
        {.bn = 128, .stages = 4, .wgs = 1, .kmajor_b = 1, .swz = 1},
    };
    const int ncfg = (int)(sizeof cfg / sizeof cfg[0]);
    for (int i = 0; i < ncfg; i++) {
        char *macros = probe_wgmma_macros(cfg[i].bn, !cfg[i].kmajor_b), head[512], what[80], path[512];
        snprintf(head, sizeof head, "#define BN %d\n#define STAGES %d\n#define PAD %d\n#define WGS %d\n#define WAIT1 %d\n#define LOOK_M1 %d\n"
                 "#define KMAJOR_B %d\n#define SKIP %d\n#define BMAP %d\n#define SWZ %d\n", cfg[i].bn, cfg[i].stages, cfg[i].pad, cfg[i].wgs, cfg[i].wait1,
                 cfg[i].stages - 2 - cfg[i].wait1, cfg[i].kmajor_b, cfg[i].skip, cfg[i].bmap, cfg[i].swz);
        char *src = malloc(strlen(head) + strlen(macros) + strlen(body) + 1);
        strcpy(src, head), strcat(src, macros), strcat(src, body), free(macros);
        snprintf(what, sizeof what, "BN=%d STAGES=%d PAD=%d WGS=%d WAIT1=%d KMAJOR_B=%d", cfg[i].bn, cfg[i].stages, cfg[i].pad,
                 cfg[i].wgs, cfg[i].wait1, cfg[i].kmajor_b);
        if (outdir)
            snprintf(path, sizeof path, "%s/gemm-bn%d-s%d-p%d-w%d%d-k%d-m%d-x%d-z%d.ptx", outdir, cfg[i].bn, cfg[i].stages,
                     cfg[i].pad, cfg[i].wgs, cfg[i].wait1, cfg[i].kmajor_b, cfg[i].bmap, cfg[i].skip, cfg[i].swz);
        cfg[i].prog = probe_build_sm90a(cx, dev, src, what, outdir ? path : NULL, "-cl-nv-verbose", 0);
        if (cfg[i].prog) {
            char log[8192] = "";
            clGetProgramBuildInfo(cfg[i].prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
            for (char *l = strtok(log, "\n"); l; l = strtok(NULL, "\n"))
                if (strstr(l, "Used") || strstr(l, "spill") || strstr(l, "C75")) printf("  %s\n", l);
        }
        free(src);
    }
    const int shapes[][3] = {{8192, 2304, 768}, {8192, 768, 768}, {8192, 3072, 768}, {8192, 768, 3072},
                             {1024, 2304, 768}, {1024, 768, 768}, {1024, 3072, 768}, {1024, 768, 3072}};
    const long maxm = 8192, maxk = 3072, maxn = 3072;
    unsigned short *ha = malloc(maxm * maxk * 2), *hb = malloc(maxk * maxn * 2), *hc = malloc(maxm * maxn * 2);
    float *fa = malloc(maxm * maxk * 4), *fb = malloc(maxk * maxn * 4);
    srand(5);
    for (long i = 0; i < maxm * maxk; i++) ha[i] = probe_to_bf16((float)rand() / RAND_MAX * 2 - 1, &fa[i]);
    for (long i = 0; i < maxk * maxn; i++) hb[i] = probe_to_bf16((float)rand() / RAND_MAX * 2 - 1, &fb[i]);
    cl_int err;
    cl_mem da = clCreateBuffer(cx, CL_MEM_READ_ONLY, maxm * maxk * 2, NULL, &err);
    CK(err);
    cl_mem db = clCreateBuffer(cx, CL_MEM_READ_ONLY, maxk * maxn * 2, NULL, &err);
    CK(err);
    cl_mem dbt = clCreateBuffer(cx, CL_MEM_READ_ONLY, maxk * maxn * 2, NULL, &err); /* the same b transposed */
    CK(err);
    cl_mem dc = clCreateBuffer(cx, CL_MEM_READ_WRITE, maxm * maxn * 2, NULL, &err);
    CK(err);
    int b_lead_of[4] = {-1, -1, -1, -1}; /* per B layout (MN-major, K-major) and swizzle */
    for (int si = 0; si < 8; si++) {
        const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
        /* a[M,K] and b[K,N] are the leading blocks of the host arrays, re-laid at these strides */
        unsigned short *pa = malloc((long)M * K * 2), *pb = malloc((long)K * N * 2), *pbt = malloc((long)K * N * 2);
        float *qa = malloc((long)M * K * 4), *qb = malloc((long)K * N * 4);
        for (long i = 0; i < (long)M * K; i++) pa[i] = ha[i], qa[i] = fa[i];
        for (long i = 0; i < (long)K * N; i++) pb[i] = hb[i], qb[i] = fb[i], pbt[(i % N) * K + i / N] = hb[i];
        CK(clEnqueueWriteBuffer(q, da, CL_TRUE, 0, (long)M * K * 2, pa, 0, NULL, NULL));
        CK(clEnqueueWriteBuffer(q, db, CL_TRUE, 0, (long)K * N * 2, pb, 0, NULL, NULL));
        CK(clEnqueueWriteBuffer(q, dbt, CL_TRUE, 0, (long)K * N * 2, pbt, 0, NULL, NULL));
        for (int ci = 0; ci < ncfg; ci++) {
            if (!cfg[ci].prog || N % cfg[ci].bn) continue;
            cl_kernel k = clCreateKernel(cfg[ci].prog, "gemm_wgmma", &err);
            CK(err);
            int ck = 128 + cfg[ci].pad, cn = 4 * ck;
            if (cfg[ci].swz) ck = cfg[ci].kmajor_b ? 16 : 512, cn = cfg[ci].kmajor_b ? 512 : cfg[ci].bn / 32 * 512;
            const size_t nt = 128 * (size_t)cfg[ci].wgs;
            size_t l[2] = {nt, 1}, g[2] = {(size_t)(N / cfg[ci].bn) * nt, (size_t)(M / (64 * cfg[ci].wgs))};
            /* B's offsets: (along K, along N) or the other way round; the first that matches stays */
            const int tries[2][2] = {{ck, cn}, {cn, ck}};
            double worst = 1e30;
            int chosen = -1, *b_lead = &b_lead_of[cfg[ci].kmajor_b + 2 * cfg[ci].swz];
            for (int t = 0; t < 2 && chosen < 0; t++) {
                if (*b_lead >= 0 && t != *b_lead) continue;
                CK(clSetKernelArg(k, 0, sizeof da, &da));
                CK(clSetKernelArg(k, 1, sizeof db, cfg[ci].kmajor_b ? &dbt : &db));
                CK(clSetKernelArg(k, 2, sizeof dc, &dc));
                CK(clSetKernelArg(k, 3, sizeof(int), &M));
                CK(clSetKernelArg(k, 4, sizeof(int), &N));
                CK(clSetKernelArg(k, 5, sizeof(int), &K));
                CK(clSetKernelArg(k, 6, sizeof(int), &tries[t][0]));
                CK(clSetKernelArg(k, 7, sizeof(int), &tries[t][1]));
                CK(clEnqueueFillBuffer(q, dc, (unsigned short[]){0}, 2, 0, (long)M * N * 2, 0, NULL, NULL));
                CK(clEnqueueNDRangeKernel(q, k, 2, NULL, g, l, 0, NULL, NULL));
                CK(clEnqueueReadBuffer(q, dc, CL_TRUE, 0, (long)M * N * 2, hc, 0, NULL, NULL));
                worst = check(qa, qb, hc, M, N, K);
                if (cfg[ci].skip) { chosen = t; break; } /* timing only */
                if (*b_lead < 0) printf("  B %s offsets %s: worst error / tolerance %.3g\n", cfg[ci].kmajor_b ? "K-major" : "MN-major", t ? "(N, K)" : "(K, N)", worst);
                if (worst <= 1) chosen = t, *b_lead = t;
            }
            if (chosen < 0) {
                printf("%dx%dx%d BN=%d: WRONG (worst error / tolerance %.3g)\n", M, N, K, cfg[ci].bn, worst);
                clReleaseKernel(k);
                continue;
            }
            enum { REPS = 20 };
            cl_event ev[REPS];
            for (int r = 0; r < 3; r++) CK(clEnqueueNDRangeKernel(q, k, 2, NULL, g, l, 0, NULL, NULL));
            for (int r = 0; r < REPS; r++) CK(clEnqueueNDRangeKernel(q, k, 2, NULL, g, l, 0, NULL, &ev[r]));
            CK(clFinish(q));
            const double us = probe_event_us(ev, REPS);
            printf("%5dx%4dx%4d SWZ=%d SKIP=%d BMAP=%d B %s BM=%3d BN=%3d STAGES=%d WAIT1=%d: %.4f ms, %.1f TFLOP/s (checked: worst %.3g of tolerance)\n",
                   M, N, K, cfg[ci].swz, cfg[ci].skip, cfg[ci].bmap, cfg[ci].kmajor_b ? "K-major " : "MN-major", 64 * cfg[ci].wgs, cfg[ci].bn, cfg[ci].stages, cfg[ci].wait1, us * 1e-3,
                   2.0 * M * N * K / (us * 1e-6) / 1e12, worst);
            clReleaseKernel(k);
        }
        free(pa), free(pb), free(pbt), free(qa), free(qb);
    }
    return 0;
}
