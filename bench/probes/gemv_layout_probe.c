/* Does the decode GEMV's weight layout bound it?  The one-launch decode layer (cl/decode_layer.cl)
 * reads W[K][N] (Hugging Face's Conv1D layout) in units of 8 columns x all K: a work-item loads 16
 * bytes of one row, the next work-item 16 bytes of the next row, N * 2 bytes further on.  This
 * probe times that pattern against the same GEMV on W^T[N][K] (each column's K weights
 * contiguous: a warp reads 512 contiguous bytes) and a plain contiguous read of the same bytes,
 * for GPT-2 small's four decode GEMVs (bf16 weights, one fp32 activation row staged in local
 * memory, one work-group of 256 a compute unit; a launch runs the GEMV on 12 copies of its weight
 * in turn with a grid barrier after each, as the decode layer's steps are, so that every GEMV
 * reads from HBM and the launch's own cost is shared), rounds of 4 and 8 loads a work-item.  Each kernel's
 * result is checked against a double-precision sum on the host.
 *   gcc -O2 -o /tmp/gemv_layout_probe bench/probes/gemv_layout_probe.c -lOpenCL -lm && /tmp/gemv_layout_probe
 * (PROBE_ANY=1 PROBE_GROUPS=132 checks its results on a CPU, without grid barriers) */
#include <math.h>
#include <string.h>

#include "probe_cl.h"

#define COPIES 12
#define LAUNCHES 100

static const char *src =
    "#define WG 256\n"
    "inline void cvt8(uint4 u, float *w) {\n"
    "  uint v[4] = {u.x, u.y, u.z, u.w};\n"
    "  for (int i = 0; i < 4; i++) { w[2*i] = as_float(v[i] << 16); w[2*i+1] = as_float(v[i] & 0xffff0000u); }\n"
    "}\n"
    /* every work-group resident (one a compute unit): arrive, then wait for all G */
    "inline void grid_barrier(__global volatile uint *bar, uint target) {\n"
    "  if (NOBAR) return;\n"
    "  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);\n"
    "  if (get_local_id(0) == 0) { mem_fence(CLK_GLOBAL_MEM_FENCE); atomic_inc(bar); while (*bar < target) {} mem_fence(CLK_GLOBAL_MEM_FENCE); }\n"
    "  barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);\n"
    "}\n"
    "#if NV\n"
    "inline float warp_sum(float v) { for (int o = 16; o > 0; o >>= 1) { float r; asm volatile(\"shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(r) : \"f\"(v), \"r\"(o)); v += r; } return v; }\n"
    "#endif\n"
    "inline void stage(__global const float *a, int K, __local float *as) {\n"
    "  for (int k = get_local_id(0); k < K; k += WG) as[k] = a[k];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "}\n"
    /* rows: W[K][N]; a unit is cgu groups of 8 columns over all K; work-item t: group t % cgu,
     * rows t / cgu + i * rp (rp = WG / cgu), LOADS rows a round */
    "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
    "void gemv_rows(__global const ushort *w0, int K, int N, int cgu, __global const float *a, __global float *y, int copies, __global volatile uint *bar) {\n"
    "  __local float as[3072]; __local float red[WG * 8];\n"
    "  const int tid = get_local_id(0), G = get_num_groups(0);\n"
    "  stage(a, K, as);\n"
    "  const int rp = WG / cgu, cg = tid % cgu, units = N / (8 * cgu);\n"
    "  for (int copy = 0; copy < copies; copy++) {\n"
    "  __global const ushort *w = w0 + (long)copy * K * N;\n"
    "  for (int u = get_group_id(0); u < units; u += G) {\n"
    "    const int n = u * 8 * cgu + 8 * cg;\n"
    "    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};\n"
    "    for (int k = tid < rp * cgu ? tid / cgu : K; k < K; k += LOADS * rp) {\n"
    "      uint4 raw[LOADS];\n"
    "      for (int r = 0; r < LOADS; r++) raw[r] = k + r * rp < K ? *(__global const uint4 *)(w + (long)(k + r * rp) * N + n) : (uint4)(0);\n"
    "      for (int r = 0; r < LOADS; r++) { float wv[8]; cvt8(raw[r], wv); const float av = k + r * rp < K ? as[k + r * rp] : 0.0f;\n"
    "        for (int c = 0; c < 8; c++) acc[c] = fma(av, wv[c], acc[c]); }\n"
    "    }\n"
    "    for (int c = 0; c < 8; c++) red[tid * 8 + c] = acc[c];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    int p2 = 1; while (p2 < rp) p2 *= 2;\n"
    "    for (int s = p2 / 2; s > 0; s /= 2) {\n"
    "      const int r = tid / cgu;\n"
    "      if (tid < rp * cgu && r < s && r + s < rp) for (int c = 0; c < 8; c++) red[tid * 8 + c] += red[(tid + s * cgu) * 8 + c];\n"
    "      barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (tid < 8 * cgu) y[u * 8 * cgu + tid] = red[tid];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  grid_barrier(bar, (uint)(copy + 1) * G);\n"
    "  }\n"
    "}\n"
    /* cols: Wt[N][K]; a unit is ncol consecutive columns (one contiguous block); warp w takes
     * columns w, w + 8, ...; lane l chunks l, l + 32, ... of each (16 bytes: 8 k), LOADS a round */
    "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
    "void gemv_cols(__global const ushort *w0, int K, int N, int ncol, __global const float *a, __global float *y, int copies, __global volatile uint *bar) {\n"
    "  __local float as[3072]; __local float red[WG * 4];\n"
    "  const int tid = get_local_id(0), G = get_num_groups(0), lane = tid % 32, warp = tid / 32;\n"
    "  stage(a, K, as);\n"
    "  const int per_col = K / 256, units = (N + ncol - 1) / ncol;\n"
    "  for (int copy = 0; copy < copies; copy++) {\n"
    "  __global const ushort *w = w0 + (long)copy * K * N;\n"
    "  for (int u = get_group_id(0); u < units; u += G) {\n"
    "    const int c0 = u * ncol, cw = (min(ncol, N - c0) - warp + 7) / 8, total = cw * per_col;\n"
    "    float acc[4] = {0, 0, 0, 0};\n"
    "    for (int i0 = 0; i0 < total; i0 += LOADS) {\n"
    "      uint4 raw[LOADS];\n"
    "      for (int r = 0; r < LOADS; r++) { const int i = i0 + r, col = c0 + warp + 8 * (i / per_col), kc = lane + 32 * (i % per_col);\n"
    "        raw[r] = i < total ? *(__global const uint4 *)(w + (long)col * K + 8 * kc) : (uint4)(0); }\n"
    "      for (int r = 0; r < LOADS; r++) { const int i = i0 + r, kc = lane + 32 * (i % per_col); float wv[8], s = 0.0f; cvt8(raw[r], wv);\n"
    "        if (i < total) { for (int c = 0; c < 8; c++) s = fma(as[8 * kc + c], wv[c], s); }\n"
    "        for (int j = 0; j < 4; j++) if (j == i / per_col) acc[j] += s; }\n"
    "    }\n"
    "    for (int j = 0; j < 4; j++) red[j * WG + tid] = acc[j];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = 16; s > 0; s /= 2) {\n"
    "      if (lane < s) for (int j = 0; j < 4; j++) red[j * WG + tid] += red[j * WG + tid + s];\n"
    "      barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    }\n"
    "    if (lane == 0) for (int j = 0; j < cw && j < 4; j++) y[c0 + warp + 8 * j] = red[j * WG + tid];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  grid_barrier(bar, (uint)(copy + 1) * G);\n"
    "  }\n"
    "}\n"
    /* flat: Wt[N][K]; a unit's ncol columns are one contiguous block read as a plain read is
     * (work-item t: 16-byte chunks t, t + 256, ..., all issued at once, at most 12); every 32
     * consecutive chunks lie in one column (K a multiple of 256), so each warp's dot products
     * are summed across the warp, then a column's K / 256 such sums */
    "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
    "void gemv_flat(__global const ushort *w0, int K, int N, int ncol, __global const float *a, __global float *y, int copies, __global volatile uint *bar) {\n"
    "  __local float as[3072]; __local float red[12 * WG / 32], tmp[WG];\n"
    "  const int tid = get_local_id(0), G = get_num_groups(0), lane = tid % 32, warp = tid / 32;\n"
    "  stage(a, K, as);\n"
    "  const int per_col = K / 8, units = (N + ncol - 1) / ncol;\n"
    "  for (int copy = 0; copy < copies; copy++) {\n"
    "  __global const ushort *w = w0 + (long)copy * K * N;\n"
    "  for (int u = get_group_id(0); u < units; u += G) {\n"
    "    const int c0 = u * ncol, nc = min(ncol, N - c0), total = nc * per_col;\n"
    "    __global const uint4 *b = (__global const uint4 *)(w + (long)c0 * K);\n"
    "    uint4 raw[12];\n"
    "    for (int i = 0; i < 12; i++) raw[i] = tid + i * WG < total ? b[tid + i * WG] : (uint4)(0);\n"
    "    for (int i = 0; i < 12; i++) {\n"
    "      const int q = tid + i * WG; float wv[8], s = 0.0f; cvt8(raw[i], wv);\n"
    "      if (q < total) { const int k = 8 * (q % per_col); for (int c = 0; c < 8; c++) s = fma(as[k + c], wv[c], s); }\n"
    "#if NV\n"
    "      s = warp_sum(s);\n"
    "      if (lane == 0) red[i * (WG / 32) + warp] = s;\n"
    "#else\n"
    "      tmp[tid] = s; barrier(CLK_LOCAL_MEM_FENCE);\n"
    "      if (lane == 0) { float t = 0.0f; for (int j = 0; j < 32; j++) t += tmp[tid + j]; red[i * (WG / 32) + warp] = t; }\n"
    "      barrier(CLK_LOCAL_MEM_FENCE);\n"
    "#endif\n"
    "    }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    if (tid < nc) { float t = 0.0f; for (int j = tid * per_col / 32; j < (tid + 1) * per_col / 32; j++) t += red[j]; y[c0 + tid] = t; }\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  }\n"
    "  grid_barrier(bar, (uint)(copy + 1) * G);\n"
    "  }\n"
    "}\n"
    /* the same bytes read contiguously, each work-group its share, summed (no GEMV) */
    "__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))\n"
    "void read_plain(__global const uint4 *w, long n16, __global float *y, int copies, __global volatile uint *bar) {\n"
    "  uint s = 0;\n"
    "  for (int copy = 0; copy < copies; copy++) {\n"
    "    for (long i = get_global_id(0); i < n16; i += get_global_size(0)) { const uint4 v = w[copy * n16 + i]; s += v.x ^ v.y ^ v.z ^ v.w; }\n"
    "    grid_barrier(bar, (uint)(copy + 1) * get_num_groups(0));\n"
    "  }\n"
    "  if (s == 0x12345u) y[get_global_id(0)] = (float)s;\n"
    "}\n";

int main(void)
{
    cl_device_id dev = probe_device();
    char name[256];
    cl_uint cus = 0;
    probe_describe(dev, name, sizeof name, &cus);
    if (getenv("PROBE_GROUPS")) cus = (cl_uint)atoi(getenv("PROBE_GROUPS")); /* a check on a CPU */
    cl_int err;
    cl_command_queue q;
    cl_context cx = probe_context(dev, CL_QUEUE_PROFILING_ENABLE, &q);
    const int loads_list[] = {4, 8};
    cl_program prog[2];
    for (int li = 0; li < 2; li++) {
        char opt[128];
        /* PROBE_GROUPS more than the device holds at once: no grid barrier (a check of the results only) */
        snprintf(opt, sizeof opt, "-DLOADS=%d -DNV=%d -DNOBAR=%d", loads_list[li], strstr(name, "NVIDIA") != NULL,
                 getenv("PROBE_GROUPS") != NULL);
        prog[li] = probe_build(cx, dev, src, opt);
    }
    printf("%s, %u compute units, one work-group of 256 each; a launch runs the GEMV on %d copies of its weight in turn, a grid barrier after each; %d launches a row, us a GEMV\n", name, cus,
           COPIES, LAUNCHES);
    printf("%-22s %5s %-24s %9s %9s %10s\n", "shape K x N", "loads", "pattern", "event us", "GB/s", "max err");

    const int shapes[4][3] = {{768, 2304, 0}, {768, 768, 0}, {768, 3072, 0}, {3072, 768, 0}};
    const char *names[4] = {"qkv 768x2304", "proj 768x768", "fc 768x3072", "fcproj 3072x768"};
    for (int s = 0; s < 4; s++) {
        const int K = shapes[s][0], N = shapes[s][1];
        const size_t elems = (size_t)K * N, bytes = elems * 2;
        unsigned short *w = malloc(bytes), *wt = malloc(bytes);
        float *a = malloc((size_t)K * 4), *y = malloc((size_t)N * 4);
        double *ref = calloc((size_t)N, sizeof *ref);
        for (size_t i = 0; i < elems; i++) {
            const float v = (float)((long)((i * 7919) % 2001) - 1000) * 1e-3f;
            unsigned u;
            memcpy(&u, &v, 4);
            w[i] = (unsigned short)(u >> 16);
        }
        for (int k = 0; k < K; k++) a[k] = (float)((k * 31) % 17 - 8) * 0.125f;
        for (int k = 0; k < K; k++)
            for (int n = 0; n < N; n++) {
                wt[(size_t)n * K + k] = w[(size_t)k * N + n];
                ref[n] += (double)a[k] * probe_bf16_to_f32(w[(size_t)k * N + n]);
            }
        /* COPIES copies back to back, as a model's layers lie in its packed weights */
        cl_mem bw = clCreateBuffer(cx, CL_MEM_READ_ONLY, bytes * COPIES, NULL, &err);
        CK(err);
        cl_mem bwt = clCreateBuffer(cx, CL_MEM_READ_ONLY, bytes * COPIES, NULL, &err);
        CK(err);
        for (int c = 0; c < COPIES; c++) {
            CK(clEnqueueWriteBuffer(q, bw, CL_TRUE, bytes * c, bytes, w, 0, NULL, NULL));
            CK(clEnqueueWriteBuffer(q, bwt, CL_TRUE, bytes * c, bytes, wt, 0, NULL, NULL));
        }
        cl_mem bbar = clCreateBuffer(cx, CL_MEM_READ_WRITE, 4, NULL, &err);
        CK(err);
        const cl_int copies = COPIES;
        const cl_uint zero = 0;
        cl_mem ba = clCreateBuffer(cx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)K * 4, a, &err);
        CK(err);
        cl_mem by = clCreateBuffer(cx, CL_MEM_READ_WRITE, (size_t)cus * 256 * 4 + (size_t)N * 4, NULL, &err);
        CK(err);
        const int groups8 = N / 8;
        int cgu = (groups8 + (int)cus - 1) / (int)cus;
        if (cgu < 1) cgu = 1;
        if (cgu > 8) cgu = 8;
        const int ncol_wide = (N + (int)cus - 1) / (int)cus; /* one unit a work-group */
        for (int li = 0; li < 2; li++) {
            /* pattern 0: rows (cgu); 1: cols, 8 cgu columns a unit; 2: cols, ceil(N / CUs) a unit;
             * 3: plain read */
            for (int pat = 0; pat < 5; pat++) {
                if ((pat == 3 || pat == 4) && li) continue;
                if (pat == 4 && ncol_wide * (K / 8) > 12 * 256) continue;
                const int ncol = pat == 1 ? 8 * cgu : ncol_wide; /* (pattern 4 too) */
                if (pat >= 1 && pat <= 2 && (ncol > 32 || K % 256)) continue;
                cl_kernel k = clCreateKernel(prog[li], pat == 0 ? "gemv_rows" : pat == 3 ? "read_plain" : pat == 4 ? "gemv_flat" : "gemv_cols", &err);
                CK(err);
                const size_t local = 256, global = (size_t)cus * 256;
                cl_event ev[LAUNCHES];
                for (int i = -8; i < LAUNCHES; i++) {
                    cl_mem wb = pat == 0 || pat == 3 ? bw : bwt;
                    CK(clEnqueueFillBuffer(q, bbar, &zero, 4, 0, 4, 0, NULL, NULL));
                    CK(clSetKernelArg(k, pat == 3 ? 3 : 6, sizeof copies, &copies));
                    CK(clSetKernelArg(k, pat == 3 ? 4 : 7, sizeof bbar, &bbar));
                    if (pat == 3) {
                        const cl_long n16 = (cl_long)(bytes / 16);
                        CK(clSetKernelArg(k, 0, sizeof wb, &wb));
                        CK(clSetKernelArg(k, 1, sizeof n16, &n16));
                        CK(clSetKernelArg(k, 2, sizeof by, &by));
                    } else {
                        const int p4 = pat == 0 ? cgu : ncol;
                        CK(clSetKernelArg(k, 0, sizeof wb, &wb));
                        CK(clSetKernelArg(k, 1, sizeof K, &K));
                        CK(clSetKernelArg(k, 2, sizeof N, &N));
                        CK(clSetKernelArg(k, 3, sizeof p4, &p4));
                        CK(clSetKernelArg(k, 4, sizeof ba, &ba));
                        CK(clSetKernelArg(k, 5, sizeof by, &by));
                    }
                    CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, i < 0 ? NULL : &ev[i]));
                }
                CK(clFinish(q));
                const double us = probe_event_us(ev, LAUNCHES) / COPIES;
                double maxerr = 0;
                if (pat != 3) {
                    CK(clEnqueueReadBuffer(q, by, CL_TRUE, 0, (size_t)N * 4, y, 0, NULL, NULL));
                    for (int n = 0; n < N; n++) maxerr = fmax(maxerr, fabs(y[n] - ref[n]) / (1.0 + fabs(ref[n])));
                }
                char pattern[64];
                if (pat == 0) snprintf(pattern, sizeof pattern, "W[K][N], %d cols a unit", 8 * cgu);
                else if (pat == 3) snprintf(pattern, sizeof pattern, "plain read");
                else if (pat == 4) snprintf(pattern, sizeof pattern, "W^T flat, %d cols a unit", ncol);
                else snprintf(pattern, sizeof pattern, "W^T[N][K], %d cols a unit", ncol);
                printf("%-22s %5d %-24s %9.2f %9.0f %10.2e\n", names[s], pat == 3 ? 0 : pat == 4 ? 12 : loads_list[li], pattern, us,
                       bytes / (us * 1e-6) * 1e-9, maxerr);
                clReleaseKernel(k);
            }
        }
        clReleaseMemObject(bw), clReleaseMemObject(bwt), clReleaseMemObject(bbar);
        clReleaseMemObject(ba);
        clReleaseMemObject(by);
        free(w), free(wt), free(a), free(y), free(ref);
    }
    return 0;
}
