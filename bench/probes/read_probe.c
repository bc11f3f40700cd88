/* Read bandwidth at the size of one buffer read once a launch: is 80 % of the device's measured
 * bandwidth (tdacl_measure_peak reads 1 GB) within reach of a kernel that reads 77 MB (the
 * GPT-2 LM head in bf16)?  A float4 grid-stride read of S bytes, one sum a work-item, launched
 * LAUNCHES times back to back from a drained queue; the wall clock and the mean event time a
 * launch, for S from 19 MB to 1 GB and grids of 8..64 work-groups of 256 a compute unit.
 * Build and run on the GPU host:
 *   gcc -O2 -o /tmp/read_probe bench/probes/read_probe.c -lOpenCL && /tmp/read_probe */
#include <string.h>

#include "probe_cl.h"

#define LAUNCHES 200
#define LOCAL 256

static const char *src =
    "__kernel __attribute__((reqd_work_group_size(256, 1, 1)))\n"
    "void read_sum(__global const float4 *in, long n4, __global float *out) {\n"
    "  const long stride = get_global_size(0);\n"
    "  float4 s = (float4)(0.0f);\n"
    "  for (long i = get_global_id(0); i < n4; i += stride) s += in[i];\n"
    "  const float t = s.x + s.y + s.z + s.w;\n"
    "  if (t == 12345.0f) out[get_global_id(0)] = t; /* never true for zeros; keeps the loads */\n"
    "}\n";

int main(void)
{
    cl_device_id dev = probe_device();
    char name[256];
    cl_uint cus = 0;
    probe_describe(dev, name, sizeof name, &cus);
    cl_int err;
    cl_command_queue q;
    cl_context cx = probe_context(dev, CL_QUEUE_PROFILING_ENABLE, &q);
    cl_program p = probe_build(cx, dev, src, "");
    cl_kernel k = clCreateKernel(p, "read_sum", &err);
    CK(err);

    const size_t most = (size_t)1 << 30;
    cl_mem in = clCreateBuffer(cx, CL_MEM_READ_ONLY, most, NULL, &err);
    CK(err);
    cl_mem out = clCreateBuffer(cx, CL_MEM_WRITE_ONLY, (size_t)cus * 64 * LOCAL * 4, NULL, &err);
    CK(err);
    const float zero = 0.0f;
    CK(clEnqueueFillBuffer(q, in, &zero, sizeof zero, 0, most, 0, NULL, NULL));
    CK(clFinish(q));

    /* the LM head's bytes (50257 x 768 bf16), a quarter, half and twice that, 256 MB, 1 GB */
    const size_t head = (size_t)50257 * 768 * 2;
    const size_t sizes[] = {head / 4, head / 2, head, 2 * head, (size_t)256 << 20, most};
    const int waves[] = {8, 16, 32, 64};
    printf("%s, %u compute units; %d launches back to back a row\n", name, cus, LAUNCHES);
    printf("%10s %6s %10s %10s %10s %10s\n", "MB", "wg/CU", "wall us", "event us", "wall GB/s", "event GB/s");
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const cl_long n4 = (cl_long)(sizes[si] / 16);
        for (size_t wi = 0; wi < sizeof waves / sizeof *waves; wi++) {
            const size_t global = (size_t)cus * (size_t)waves[wi] * LOCAL, local = LOCAL;
            CK(clSetKernelArg(k, 0, sizeof in, &in));
            CK(clSetKernelArg(k, 1, sizeof n4, &n4));
            CK(clSetKernelArg(k, 2, sizeof out, &out));
            for (int w = 0; w < 5; w++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, NULL));
            CK(clFinish(q));
            cl_event *ev = malloc(LAUNCHES * sizeof *ev);
            const double t0 = probe_now();
            for (int i = 0; i < LAUNCHES; i++) CK(clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &local, 0, NULL, &ev[i]));
            CK(clFinish(q));
            const double wall_us = (probe_now() - t0) / LAUNCHES * 1e6;
            const double event_us = probe_event_us(ev, LAUNCHES);
            free(ev);
            printf("%10.1f %6d %10.2f %10.2f %10.0f %10.0f\n", sizes[si] / 1e6, waves[wi], wall_us, event_us,
                   sizes[si] / (wall_us * 1e-6) * 1e-9, sizes[si] / (event_us * 1e-6) * 1e-9);
        }
    }
    clReleaseMemObject(in);
    clReleaseMemObject(out);
    clReleaseKernel(k);
    clReleaseProgram(p);
    clReleaseCommandQueue(q);
    clReleaseContext(cx);
    return 0;
}
