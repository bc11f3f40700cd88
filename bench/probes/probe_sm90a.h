/* Hopper's warpgroup MMA (wgmma) from NVIDIA's OpenCL, for the probes (wgmma_probe.c,
 * wgmma_gemm_probe.c).  NVIDIA's OpenCL compiles for sm_90, where ptxas refuses wgmma (an
 * sm_90a instruction).  Each sm_90a-only instruction is written as an inline-asm line that
 * starts with PROBE_MARK, a PTX comment, so the sm_90 build passes it through with its operands
 * substituted; probe_build_sm90a then takes that build's PTX (CL_PROGRAM_BINARIES), retargets
 * it to sm_90a, removes the markers and loads the result with clCreateProgramWithBinary. */
#ifndef TDACL_PROBE_SM90A_H
#define TDACL_PROBE_SM90A_H

#include <string.h>

#include "probe_cl.h"

#define PROBE_MARK "//@SM90A@ "

/* OpenCL C for a program that uses wgmma m64n<n>k16 (bf16 in, f32 accumulators; B K-major, or
 * MN-major with trans_b): WGMMA(d, da, db, scale_d) (scale_d 0: d = A B, 1: d += A B) on
 * float d[n / 2], WG_FENCE / WG_COMMIT / WG_WAIT0 / WG_WAIT1 / PROXY_FENCE, FENCE_D(d) (keeps the
 * accumulators' reads after the wait) and wg_desc(p, lead, stride), the descriptor of a
 * no-swizzle tile at local pointer p (byte offsets between core matrices along K and along M or N).
 * The caller frees the string. */
static inline char *probe_wgmma_macros(int n, int trans_b)
{
    const int nr = n / 2;
    size_t cap = 8192 + (size_t)nr * 64;
    char *s = malloc(cap);
    int o = snprintf(s, cap,
                     "#define WG_N %d\n#define WGMMA(d, da, db, sd) __asm__ volatile(\"" PROBE_MARK
                     "{ .reg .pred p; setp.ne.b32 p, %%%d, 0; wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16 {",
                     n, nr + 2, n);
    for (int i = 0; i < nr; i++) o += snprintf(s + o, cap - o, "%s%%%d", i ? ", " : "", i);
    o += snprintf(s + o, cap - o, "}, %%%d, %%%d, p, 1, 1, 0, %d; }\" : ", nr, nr + 1, trans_b ? 1 : 0);
    for (int i = 0; i < nr; i++) o += snprintf(s + o, cap - o, "%s\"+f\"(d[%d])", i ? ", " : "", i);
    o += snprintf(s + o, cap - o, " : \"l\"(da), \"l\"(db), \"r\"(sd) : \"memory\")\n#define FENCE_D(d) do { ");
    for (int i = 0; i < nr; i++) o += snprintf(s + o, cap - o, "__asm__ volatile(\"\" : \"+f\"(d[%d]) :: \"memory\"); ", i);
    snprintf(s + o, cap - o,
             "} while (0)\n"
             "#define WG_FENCE() __asm__ volatile(\"" PROBE_MARK "wgmma.fence.sync.aligned;\" ::: \"memory\")\n"
             "#define WG_COMMIT() __asm__ volatile(\"" PROBE_MARK "wgmma.commit_group.sync.aligned;\" ::: \"memory\")\n"
             "#define WG_WAIT0() __asm__ volatile(\"" PROBE_MARK "wgmma.wait_group.sync.aligned 0;\" ::: \"memory\")\n"
             "#define WG_WAIT1() __asm__ volatile(\"" PROBE_MARK "wgmma.wait_group.sync.aligned 1;\" ::: \"memory\")\n"
             "#define PROXY_FENCE() __asm__ volatile(\"" PROBE_MARK "fence.proxy.async.shared::cta;\" ::: \"memory\")\n"
             "ulong wg_desc(__local const void *p, int lead, int stride) {\n"
             "  const uint a = (uint)(size_t)p; /* a __local pointer is a shared-window address */\n"
             "  return (ulong)((a & 0x3FFFFu) >> 4) | ((ulong)((lead >> 4) & 0x3FFF) << 16) |\n"
             "         ((ulong)((stride >> 4) & 0x3FFF) << 32);\n"
             "}\n");
    return s;
}

static inline void probe_print_log(cl_program p, cl_device_id dev, const char *what)
{
    char log[4096] = "";
    clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    printf("%s: build log: %.1500s\n", what, log[0] ? log : "(empty)");
}

/* src built for sm_90 (markers as comments), its PTX retargeted to sm_90a without the markers
 * (saved at save_path unless NULL) and built as a binary with opts (printing the log when
 * verbose); NULL, having said why, if any step fails. */
static inline cl_program probe_build_sm90a(cl_context cx, cl_device_id dev, const char *src, const char *what,
                                           const char *save_path, const char *opts, int verbose)
{
    cl_int err;
    cl_program p = clCreateProgramWithSource(cx, 1, &src, NULL, &err);
    CK(err);
    if (clBuildProgram(p, 1, &dev, "", NULL, NULL)) {
        probe_print_log(p, dev, what);
        return NULL;
    }
    size_t len = 0;
    CK(clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof len, &len, NULL));
    char *ptx = calloc(len + 64, 1), *bins[1] = {ptx};
    CK(clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL));
    clReleaseProgram(p);
    char *tgt = strstr(ptx, ".target sm_90");
    if (!tgt || tgt[13] == 'a') {
        printf("%s: no '.target sm_90' to retarget\n", what);
        free(ptx);
        return NULL;
    }
    size_t n = 0;
    char *fixed = malloc(len + 64);
    for (char *c = ptx; *c;) {
        if (c == tgt + 13) fixed[n++] = 'a';
        if (!strncmp(c, PROBE_MARK, strlen(PROBE_MARK))) {
            c += strlen(PROBE_MARK);
            continue;
        }
        fixed[n++] = *c++;
    }
    fixed[n] = 0;
    free(ptx);
    if (save_path) {
        FILE *f = fopen(save_path, "w");
        if (f) fputs(fixed, f), fclose(f);
    }
    const unsigned char *bin = (const unsigned char *)fixed;
    cl_int bst;
    size_t blen = n + 1;
    p = clCreateProgramWithBinary(cx, 1, &dev, &blen, &bin, &bst, &err);
    free(fixed);
    if (err || bst) {
        printf("%s: clCreateProgramWithBinary: %d / %d\n", what, err, bst);
        return NULL;
    }
    if (clBuildProgram(p, 1, &dev, opts, NULL, NULL)) {
        probe_print_log(p, dev, what);
        return NULL;
    }
    printf("%s: sm_90a PTX loaded and built\n", what);
    if (verbose) probe_print_log(p, dev, what);
    return p;
}

#endif
