/* Can NVIDIA's OpenCL run Hopper's warpgroup MMA (wgmma), which its compiler refuses because it
 * targets sm_90, not sm_90a?  The OpenCL C source carries each sm_90a-only instruction as an
 * inline-asm line that starts with a marker comment (so the sm_90 build passes it through as a
 * comment, operands substituted); the probe takes the PTX of that build (CL_PROGRAM_BINARIES),
 * retargets it to sm_90a, removes the markers and loads the result with
 * clCreateProgramWithBinary.  Then:
 *   1. one wgmma.m64n16k16 bf16 from local memory in the no-swizzle layout of 8 x 16-byte core
 *      matrices, for both readings of the descriptor's two offsets, against a double product;
 *   2. the rate of back-to-back m64nNk16 wgmma (N = 64, 128, 256) from local memory, and of a
 *      register-only mma.sync m16n8k16 loop, in one process.
 * Build and run on the GPU host (gpu-env.sh sourced):
 *   gcc -O2 -o /tmp/wgp bench/probes/wgmma_probe.c -lOpenCL -lm && /tmp/wgp [OUTDIR] */
#include <math.h>

#include "probe_sm90a.h"

static const char *body =
    "#define NR (WG_N / 2)\n#define WN WG_N\n"
    /* element (r, k) of a K-major r x 16 tile: core matrix (r / 8, k / 8) at (r / 8) * 256 + (k / 8) * 128 bytes */
    "int core_off(int r, int k) { return ((r / 8) * 256 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2) / 2; }\n"
    "__kernel __attribute__((reqd_work_group_size(128, 1, 1)))\n"
    "void wg_one(__global const ushort *A, __global const ushort *Bt, __global float *out, int la, int sa, int lb, int sb) {\n"
    "  __local ushort As[64 * 16] __attribute__((aligned(128)));\n"
    "  __local ushort Bs[WN * 16] __attribute__((aligned(128)));\n"
    "  const int tid = get_local_id(0);\n"
    "  for (int i = tid; i < 64 * 16; i += 128) As[core_off(i / 16, i % 16)] = A[i];\n"
    "  for (int i = tid; i < WN * 16; i += 128) Bs[core_off(i / 16, i % 16)] = Bt[i];\n"
    "  PROXY_FENCE();\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  const ulong da = wg_desc(As, la, sa), db = wg_desc(Bs, lb, sb);\n"
    "  float d[NR];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NR; i++) d[i] = 0.0f;\n"
    "  WG_FENCE();\n"
    "  WGMMA(d, da, db, 0);\n"
    "  WG_COMMIT();\n"
    "  WG_WAIT0();\n"
    "  FENCE_D(d);\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NR; i++) out[tid * NR + i] = d[i];\n"
    "}\n"
    "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n"
    "void wg_peak(__global float *out, int iters) {\n"
    "  __local ushort As[2 * 64 * 16] __attribute__((aligned(128)));\n"
    "  __local ushort Bs[WN * 16] __attribute__((aligned(128)));\n"
    "  const int tid = get_local_id(0), wg = tid / 128;\n"
    "  for (int i = tid; i < 2 * 64 * 16; i += 256) As[i] = (ushort)(0x3C00 + (i & 7));\n"
    "  for (int i = tid; i < WN * 16; i += 256) Bs[i] = (ushort)(0x3C00 + (i & 3));\n"
    "  PROXY_FENCE();\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  const ulong da = wg_desc(As + wg * 64 * 16, 128, 256), db = wg_desc(Bs, 128, 256);\n"
    "  float d[NR];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NR; i++) d[i] = 0.0f;\n"
    "  WG_FENCE();\n"
    "  for (int it = 0; it < iters; it++) {\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 16; j++) WGMMA(d, da, db, 1);\n"
    "    WG_COMMIT();\n"
    "    WG_WAIT0();\n"
    "  }\n"
    "  FENCE_D(d);\n"
    "  float s = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < NR; i++) s += d[i];\n"
    "  out[get_global_id(0)] = s;\n"
    "}\n"
    /* the same loop shape on mma.sync m16n8k16 (registers only): 8 independent accumulators a warp */
    "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n"
    "void mma_peak(__global float *out, int iters) {\n"
    "  const uint t = get_local_id(0);\n"
    "  const uint a0 = 0x3C003C00u + t, a1 = a0 ^ 1u, a2 = a0 ^ 2u, a3 = a0 ^ 3u, b0 = 0x3C003C00u ^ t, b1 = b0 ^ 5u;\n"
    "  float c[8][4];\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < 8; j++)\n#pragma unroll\n  for (int e = 0; e < 4; e++) c[j][e] = 0.0f;\n"
    "  for (int it = 0; it < iters; it++) {\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < 2; r++)\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 8; j++)\n"
    "      __asm__ volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
    "                   : \"+f\"(c[j][0]), \"+f\"(c[j][1]), \"+f\"(c[j][2]), \"+f\"(c[j][3])\n"
    "                   : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
    "  }\n"
    "  float s = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int j = 0; j < 8; j++)\n#pragma unroll\n  for (int e = 0; e < 4; e++) s += c[j][e];\n"
    "  out[get_global_id(0)] = s;\n"
    "}\n";

/* The program's source for wgmma m64n<n>k16 (B K-major) */
static char *make_source(int n)
{
    char *macros = probe_wgmma_macros(n, 0), *s = malloc(strlen(macros) + strlen(body) + 1);
    strcpy(s, macros), strcat(s, body), free(macros);
    return s;
}

static cl_program build_sm90a(cl_context cx, cl_device_id dev, int n, const char *outdir)
{
    char *src = make_source(n), what[64], path[512];
    snprintf(what, sizeof what, "wgmma n%d", n);
    if (outdir) snprintf(path, sizeof path, "%s/wgmma-n%d.ptx", outdir, n);
    cl_program p = probe_build_sm90a(cx, dev, src, what, outdir ? path : NULL, "-cl-nv-verbose", 1);
    free(src);
    return p;
}

/* The same source without the markers, built directly with -cl-nv-arch sm_90a: does the
 * compiler itself then target sm_90a?  NULL if the build fails. */
static cl_program build_direct(cl_context cx, cl_device_id dev, int n)
{
    char *src = make_source(n), *w = src;
    for (char *r = src; *r;) {
        if (!strncmp(r, PROBE_MARK, strlen(PROBE_MARK))) r += strlen(PROBE_MARK);
        else *w++ = *r++;
    }
    *w = 0;
    cl_int err;
    cl_program p = clCreateProgramWithSource(cx, 1, (const char **)&src, NULL, &err);
    CK(err);
    free(src);
    if (clBuildProgram(p, 1, &dev, "-cl-nv-arch sm_90a", NULL, NULL)) {
        probe_print_log(p, dev, "direct -cl-nv-arch sm_90a");
        return NULL;
    }
    size_t len = 0;
    CK(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL));
    char *ptx = calloc(len + 1, 1), *bins[1] = {ptx};
    CK(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL));
    const char *t = strstr(ptx, ".target");
    printf("direct -cl-nv-arch sm_90a: built, %.16s\n", t ? t : "(no .target)");
    free(ptx);
    return p;
}

/* 1: one m64n16k16 product, both readings of the descriptor's offsets for A and B */
static int check_one(cl_context cx, cl_command_queue q, cl_program p)
{
    enum { M = 64, N = 16, K = 16 };
    unsigned short ha[M * K], hb[N * K];
    float fa[M * K], fb[N * K], hout[128 * N / 2];
    double ref[M][N];
    srand(7);
    for (int i = 0; i < M * K; i++) ha[i] = probe_to_bf16((float)rand() / RAND_MAX * 2 - 1, &fa[i]);
    for (int i = 0; i < N * K; i++) hb[i] = probe_to_bf16((float)rand() / RAND_MAX * 2 - 1, &fb[i]);
    for (int r = 0; r < M; r++)
        for (int c = 0; c < N; c++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)fa[r * K + k] * fb[c * K + k];
            ref[r][c] = s;
        }
    cl_int err;
    cl_mem a = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof ha, ha, &err);
    CK(err);
    cl_mem b = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof hb, hb, &err);
    CK(err);
    cl_mem o = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, sizeof hout, NULL, &err);
    CK(err);
    cl_kernel k = clCreateKernel(p, "wg_one", &err);
    CK(err);
    int good = 0;
    const int offs[2][2] = {{128, 256}, {256, 128}}; /* (leading, stride) byte offsets */
    for (int va = 0; va < 2; va++)
        for (int vb = 0; vb < 2; vb++) {
            CK(clSetKernelArg(k, 0, sizeof a, &a));
            CK(clSetKernelArg(k, 1, sizeof b, &b));
            CK(clSetKernelArg(k, 2, sizeof o, &o));
            CK(clSetKernelArg(k, 3, sizeof(int), &offs[va][0]));
            CK(clSetKernelArg(k, 4, sizeof(int), &offs[va][1]));
            CK(clSetKernelArg(k, 5, sizeof(int), &offs[vb][0]));
            CK(clSetKernelArg(k, 6, sizeof(int), &offs[vb][1]));
            size_t g = 128, l = 128;
            CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL));
            CK(clEnqueueReadBuffer(q, o, CL_TRUE, 0, sizeof hout, hout, 0, NULL, NULL));
            /* the accumulator layout assumed: warp w rows 16w + lane / 4 (+ 8), columns 8j + 2 (lane % 4) (+ 1) */
            double worst = 0;
            int bad_t = -1, bad_i = -1;
            for (int t = 0; t < 128; t++)
                for (int i = 0; i < N / 2; i++) {
                    const int w = t / 32, lane = t % 32, j = i / 4, e = i % 4;
                    const int r = 16 * w + lane / 4 + (e >= 2 ? 8 : 0), c = 8 * j + 2 * (lane % 4) + (e & 1);
                    const double diff = fabs(hout[t * N / 2 + i] - ref[r][c]);
                    if (diff > worst) worst = diff, bad_t = t, bad_i = i;
                }
            printf("wg_one m64n16k16: A offsets (lead %d, stride %d), B (lead %d, stride %d): max |d - ref| %.3g%s\n",
                   offs[va][0], offs[va][1], offs[vb][0], offs[vb][1], worst, worst < 1e-4 ? "  MATCH" : "");
            if (worst < 1e-4) good = 1;
            else if (bad_t >= 0) {
                /* where the worst value sits in the reference, to read the layout off */
                const float v = hout[bad_t * N / 2 + bad_i];
                for (int r = 0; r < M; r++)
                    for (int c = 0; c < N; c++)
                        if (fabs(ref[r][c] - v) < 1e-5) printf("  thread %d value %d (%.6f) is ref[%d][%d]\n", bad_t, bad_i, v, r, c);
            }
        }
    clReleaseKernel(k), clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(o);
    return good;
}

/* 2: the rate of a kernel that does flop_per_wg a work-group and iteration */
static void rate(cl_context cx, cl_command_queue q, cl_program p, const char *kname, double flop_per_wg_it, cl_uint cus,
                 const char *label)
{
    cl_int err;
    cl_kernel k = clCreateKernel(p, kname, &err);
    CK(err);
    const int groups = (int)cus * 2;
    cl_mem o = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, (size_t)groups * 256 * 4, NULL, &err);
    CK(err);
    size_t l = 256, g = (size_t)groups * 256;
    int iters = 256;
    double best = 0;
    for (int rep = 0; rep < 4; rep++) {
        CK(clSetKernelArg(k, 0, sizeof o, &o));
        CK(clSetKernelArg(k, 1, sizeof(int), &iters));
        cl_event ev;
        CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &ev));
        CK(clFinish(q));
        const double us = probe_event_us(&ev, 1);
        const double tf = flop_per_wg_it * groups * iters / (us * 1e-6) / 1e12;
        if (rep > 0 && tf > best) best = tf;
        if (us < 20000 && iters < (1 << 20)) iters *= 4;
    }
    printf("%s: %.1f TFLOP/s (%d work-groups of 256, %d iterations)\n", label, best, groups, iters);
    clReleaseKernel(k), clReleaseMemObject(o);
}

int main(int argc, char **argv)
{
    const char *outdir = argc > 1 ? argv[1] : NULL;
    cl_device_id dev = probe_device();
    char name[256], drv[64];
    cl_uint cus = 0;
    probe_describe(dev, name, sizeof name, &cus);
    CK(clGetDeviceInfo(dev, CL_DRIVER_VERSION, sizeof drv, drv, NULL));
    printf("%s, driver %s, %u compute units\n", name, drv, cus);
    cl_command_queue q;
    cl_context cx = probe_context(dev, CL_QUEUE_PROFILING_ENABLE, &q);

    /* does the compiler take an architecture option at all? */
    const char *archs[] = {"-cl-nv-arch sm_90a", "-cl-nv-arch=sm_90a"};
    for (int i = 0; i < 2; i++) {
        const char *s = "__kernel void k(__global int *x) { x[0] = 1; }";
        cl_int err;
        cl_program p = clCreateProgramWithSource(cx, 1, &s, NULL, &err);
        CK(err);
        const cl_int st = clBuildProgram(p, 1, &dev, archs[i], NULL, NULL);
        printf("option '%s': build status %d\n", archs[i], st);
        if (st) probe_print_log(p, dev, archs[i]);
        clReleaseProgram(p);
    }

    cl_program pd = build_direct(cx, dev, 16);
    if (pd) {
        printf("direct build: wgmma result %s the double product\n", check_one(cx, q, pd) ? "matches" : "does NOT match");
        clReleaseProgram(pd);
    }
    cl_program p16 = build_sm90a(cx, dev, 16, outdir);
    if (!p16) return 1;
    const int ok = check_one(cx, q, p16);
    printf("wgmma result %s the double product\n", ok ? "matches" : "does NOT match");
    rate(cx, q, p16, "mma_peak", (256 / 32) * (2 * 8) * (2.0 * 16 * 8 * 16), cus, "mma.sync m16n8k16 bf16, registers only");
    const int ns[] = {64, 128, 256};
    for (int i = 0; i < 3; i++) {
        cl_program p = build_sm90a(cx, dev, ns[i], outdir);
        if (!p) continue;
        char label[96];
        snprintf(label, sizeof label, "wgmma m64n%dk16 bf16, A and B from local memory", ns[i]);
        rate(cx, q, p, "wg_peak", 2.0 * 16 * 2.0 * 64 * ns[i] * 16, cus, label);
        clReleaseProgram(p);
    }
    return 0;
}
