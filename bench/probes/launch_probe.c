/* Launch-floor and plain-GEMV probe for NVIDIA's OpenCL (decode is ~60 small kernels a token):
 * per-launch wall time of back-to-back kernels in one in-order queue, with and without
 * CL_QUEUE_PROFILING_ENABLE, and each kernel's own event time.  Build on the GPU host:
 *   gcc -O2 -o /tmp/launch_probe bench/probes/launch_probe.c -lOpenCL && /tmp/launch_probe */
#include <string.h>

#include "probe_cl.h"

static const char *src =
    "__kernel void empty(__global float *o) { if (get_global_id(0) == 0x7fffffff) o[0] = 1.0f; }\n"
    /* as many arguments as the decode step's GEMV: 14 buffers, 19 scalars */
    "__kernel void many_args(__global float *o, __global float *b1, __global float *b2, __global float *b3,\n"
    "    __global float *b4, __global float *b5, __global float *b6, __global float *b7, __global float *b8,\n"
    "    __global float *b9, __global float *b10, __global float *b11, __global float *b12, __global float *b13,\n"
    "    int i1, int i2, int i3, int i4, int i5, int i6, int i7, int i8, int i9, int i10, int i11, int i12,\n"
    "    int i13, int i14, int i15, int i16, int i17, int i18, int i19) {\n"
    "  if (get_global_id(0) == 0x7fffffff) o[0] = b1[i1] + b13[i19]; }\n"
    /* the same, the 19 scalars in one struct passed by value */
    "typedef struct { int v[19]; } scalars19;\n"
    "__kernel void struct_args(__global float *o, __global float *b1, __global float *b2, __global float *b3,\n"
    "    __global float *b4, __global float *b5, __global float *b6, __global float *b7, __global float *b8,\n"
    "    __global float *b9, __global float *b10, __global float *b11, __global float *b12, __global float *b13,\n"
    "    scalars19 sc) {\n"
    "  if (get_global_id(0) == 0x7fffffff) o[0] = b1[sc.v[0]] + b13[sc.v[18]]; }\n"
    /* four buffers and the struct */
    "__kernel void few_args(__global float *o, __global float *b1, __global float *b2, __global float *b3,\n"
    "    scalars19 sc) {\n"
    "  if (get_global_id(0) == 0x7fffffff) o[0] = b1[sc.v[0]] + b3[sc.v[18]]; }\n"
    /* weights [K, N] bf16 (N contiguous), x [K] f32 -> y [N]; a work-group of 256 takes COLS
     * columns over all K: CG = COLS/8 column groups of 8 (one 16-byte load), KR = 256/CG rows */
    "#define CG (COLS / 8)\n#define KR (256 / CG)\n"
    "__kernel __attribute__((reqd_work_group_size(256,1,1))) void gemv_plain(__global const ushort *w,\n"
    "    __global const float *x, __global float *y, int K, int N) {\n"
    "  __local float red[256 * 8];\n"
    "  const int t = get_local_id(0), cg = t % CG, kr = t / CG, n = get_group_id(0) * COLS + cg * 8;\n"
    "  float acc[8] = {0,0,0,0,0,0,0,0};\n"
    "  #pragma unroll 8\n"
    "  for (int k = kr; k < K; k += KR) {\n"
    "    uint4 u = *(__global const uint4 *)(w + (long)k * N + n); float a = x[k];\n"
    "    acc[0] += a * as_float(u.x << 16); acc[1] += a * as_float(u.x & 0xffff0000u);\n"
    "    acc[2] += a * as_float(u.y << 16); acc[3] += a * as_float(u.y & 0xffff0000u);\n"
    "    acc[4] += a * as_float(u.z << 16); acc[5] += a * as_float(u.z & 0xffff0000u);\n"
    "    acc[6] += a * as_float(u.w << 16); acc[7] += a * as_float(u.w & 0xffff0000u); }\n"
    "  for (int v = 0; v < 8; v++) red[kr * COLS + cg * 8 + v] = acc[v];\n"
    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
    "  for (int s = KR / 2; s > 0; s >>= 1) {\n"
    "    for (int i = t; i < s * COLS; i += 256) red[i] += red[i + s * COLS];\n"
    "    barrier(CLK_LOCAL_MEM_FENCE); }\n"
    "  if (t < COLS) y[get_group_id(0) * COLS + t] = red[t]; }\n";

static cl_context cx;
static cl_device_id dev;

static cl_program build(const char *opts) { return probe_build(cx, dev, src, opts); }

/* wall us per launch over n back-to-back launches; event us (median-ish: mean of END-START) */
static void time_kernel(const char *name, cl_command_queue q, int prof, cl_kernel k, size_t g, size_t l, int n)
{
    for (int i = 0; i < 50; i++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL));
    CK(clFinish(q));
    double t0 = probe_now();
    for (int i = 0; i < n; i++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, NULL));
    double enq = (probe_now() - t0) / n * 1e6; /* the host's own time a launch */
    CK(clFinish(q));
    double wall = (probe_now() - t0) / n * 1e6, ev = 0;
    if (prof) {
        cl_event e[64];
        for (int i = 0; i < 64; i++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &g, &l, 0, NULL, &e[i]));
        CK(clFinish(q));
        ev = probe_event_us(e, 64);
    }
    printf("%-40s %s  wall %7.2f us/launch  enqueue %7.2f us  event %7.2f us\n", name, prof ? "prof  " : "noprof", wall,
           enq, ev);
}

int main(void)
{
    dev = probe_device();
    char name[256];
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name, name, NULL);
    printf("device %s\n", name);
    cl_int err;
    cl_command_queue qp;
    cx = probe_context(dev, CL_QUEUE_PROFILING_ENABLE, &qp);
    cl_command_queue qn = clCreateCommandQueue(cx, dev, 0, &err);
    CK(err);
    size_t wbytes = (size_t)3072 * 3072 * 2;
    cl_mem w = clCreateBuffer(cx, CL_MEM_READ_WRITE, wbytes, NULL, &err);
    cl_mem x = clCreateBuffer(cx, CL_MEM_READ_WRITE, 3072 * 4, NULL, &err);
    cl_mem y = clCreateBuffer(cx, CL_MEM_READ_WRITE, 3072 * 4 * 4, NULL, &err);
    float zero = 0;
    CK(clEnqueueFillBuffer(qp, w, &zero, 4, 0, wbytes, 0, NULL, NULL));
    CK(clEnqueueFillBuffer(qp, x, &zero, 4, 0, 3072 * 4, 0, NULL, NULL));
    CK(clFinish(qp));
    cl_program p = build("-DCOLS=16");
    cl_kernel ke = clCreateKernel(p, "empty", &err);
    CK(clSetKernelArg(ke, 0, sizeof y, &y));
    for (int prof = 1; prof >= 0; prof--) {
        cl_command_queue q = prof ? qp : qn;
        time_kernel("empty 1 x 32", q, prof, ke, 32, 32, 2000);
        time_kernel("empty 528 x 128", q, prof, ke, 528 * 128, 128, 2000);
        time_kernel("empty 1056 x 256", q, prof, ke, 1056 * 256, 256, 2000);
    }
    /* a launch's host cost with the decode GEMV's argument count: enqueue alone, and each of
     * the 33 arguments set again before every enqueue (as a kernel shared by many call sites) */
    cl_kernel km = clCreateKernel(p, "many_args", &err);
    CK(err);
    for (int i = 0; i < 14; i++) CK(clSetKernelArg(km, i, sizeof y, &y));
    for (int i = 14; i < 33; i++) CK(clSetKernelArg(km, i, sizeof(cl_int), &(cl_int){0}));
    time_kernel("many_args 528 x 128 (args set once)", qp, 1, km, 528 * 128, 128, 2000);
    {
        size_t g = 528 * 128, l = 128;
        const int n = 2000;
        CK(clFinish(qp));
        double t0 = probe_now();
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < 14; i++) CK(clSetKernelArg(km, i, sizeof y, &y));
            for (int i = 14; i < 33; i++) CK(clSetKernelArg(km, i, sizeof(cl_int), &(cl_int){r}));
            CK(clEnqueueNDRangeKernel(qp, km, 1, NULL, &g, &l, 0, NULL, NULL));
        }
        double enq = (probe_now() - t0) / n * 1e6;
        CK(clFinish(qp));
        printf("%-40s prof    wall %7.2f us/launch  enqueue %7.2f us\n", "many_args, 33 args set every launch",
               (probe_now() - t0) / n * 1e6, enq);
    }
    {
        cl_kernel ks = clCreateKernel(p, "struct_args", &err), kf = clCreateKernel(p, "few_args", &err);
        CK(err);
        struct { cl_int v[19]; } sc = {{0}};
        for (int i = 0; i < 14; i++) CK(clSetKernelArg(ks, i, sizeof y, &y));
        CK(clSetKernelArg(ks, 14, sizeof sc, &sc));
        for (int i = 0; i < 4; i++) CK(clSetKernelArg(kf, i, sizeof y, &y));
        CK(clSetKernelArg(kf, 4, sizeof sc, &sc));
        time_kernel("struct_args: 14 buffers + 1 struct", qp, 1, ks, 528 * 128, 128, 2000);
        time_kernel("few_args: 4 buffers + 1 struct", qp, 1, kf, 528 * 128, 128, 2000);
        /* buffer arguments left NULL (a GEMV without the decode fusions leaves 8 of 15 so) */
        cl_mem none = NULL;
        for (int i = 4; i < 14; i++) CK(clSetKernelArg(ks, i, sizeof none, &none));
        time_kernel("struct_args: 4 buffers + 10 NULL + struct", qp, 1, ks, 528 * 128, 128, 2000);
        size_t g = 528 * 128, l = 128;
        const int n = 2000;
        CK(clFinish(qp));
        double t0 = probe_now();
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < 14; i++) CK(clSetKernelArg(ks, i, sizeof y, &y));
            sc.v[0] = r & 1;
            CK(clSetKernelArg(ks, 14, sizeof sc, &sc));
            CK(clEnqueueNDRangeKernel(qp, ks, 1, NULL, &g, &l, 0, NULL, NULL));
        }
        double enq = (probe_now() - t0) / n * 1e6;
        CK(clFinish(qp));
        printf("%-40s prof    wall %7.2f us/launch  enqueue %7.2f us\n", "struct_args, 15 args set every launch",
               (probe_now() - t0) / n * 1e6, enq);
    }
    {
        /* two kernel objects in turn (a decode step alternates programs), args set once */
        size_t g = 528 * 128, l = 128;
        const int n = 2000;
        CK(clFinish(qp));
        double t0 = probe_now();
        for (int r = 0; r < n; r++) CK(clEnqueueNDRangeKernel(qp, r & 1 ? km : ke, 1, NULL, &g, &l, 0, NULL, NULL));
        double enq = (probe_now() - t0) / n * 1e6;
        CK(clFinish(qp));
        printf("%-40s prof    wall %7.2f us/launch  enqueue %7.2f us\n", "empty and many_args in turn", (probe_now() - t0) / n * 1e6,
               enq);
    }
    const int shapes[5][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50304}};
    for (int cols = 8; cols <= 64; cols *= 2) {
        char o[64];
        snprintf(o, sizeof o, "-DCOLS=%d", cols);
        cl_program pg = build(o);
        cl_kernel kg = clCreateKernel(pg, "gemv_plain", &err);
        CK(err);
        for (int s = 0; s < 4; s++) {
            cl_int K = shapes[s][0], N = shapes[s][1];
            CK(clSetKernelArg(kg, 0, sizeof w, &w));
            CK(clSetKernelArg(kg, 1, sizeof x, &x));
            CK(clSetKernelArg(kg, 2, sizeof y, &y));
            CK(clSetKernelArg(kg, 3, 4, &K));
            CK(clSetKernelArg(kg, 4, 4, &N));
            char label[96];
            snprintf(label, sizeof label, "gemv_plain COLS=%d K=%d N=%d (%d WGs)", cols, K, N, N / cols);
            for (int prof = 1; prof >= 0; prof--)
                time_kernel(label, prof ? qp : qn, prof, kg, (size_t)N / cols * 256, 256, 1000);
        }
        clReleaseKernel(kg);
        clReleaseProgram(pg);
    }
    /* a decode-like chain: 4 GEMVs of a layer, 12 layers, back to back (COLS 16) */
    return 0;
}
