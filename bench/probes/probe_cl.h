/* What the raw-OpenCL probes of bench/probes share: an error check that ends the probe, a
 * clock, the device (the first GPU; any device with PROBE_ANY set, to check a probe on a CPU),
 * a context and its queue, a program build that prints its log, and the mean device time of a list of events. */
#ifndef TDACL_PROBE_CL_H
#define TDACL_PROBE_CL_H

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(e)                                                  \
    do {                                                       \
        cl_int e_ = (e);                                       \
        if (e_) {                                              \
            printf("error %d at line %d\n", e_, __LINE__);     \
            exit(1);                                           \
        }                                                      \
    } while (0)

static inline double probe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The first GPU of any platform (with PROBE_ANY: the first device of any type); exits if none. */
static inline cl_device_id probe_device(void)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    CK(clGetPlatformIDs(8, plats, &np));
    const cl_device_type type = getenv("PROBE_ANY") ? CL_DEVICE_TYPE_ALL : CL_DEVICE_TYPE_GPU;
    cl_device_id dev = NULL;
    for (cl_uint i = 0; i < np && !dev; i++)
        if (clGetDeviceIDs(plats[i], type, 1, &dev, NULL)) dev = NULL;
    if (!dev) {
        printf("no %s\n", getenv("PROBE_ANY") ? "OpenCL device" : "GPU (PROBE_ANY=1 takes any device)");
        exit(1);
    }
    return dev;
}

/* dev's name (n bytes at most) and compute units */
static inline void probe_describe(cl_device_id dev, char *name, size_t n, cl_uint *cus)
{
    CK(clGetDeviceInfo(dev, CL_DEVICE_NAME, n, name, NULL));
    CK(clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof *cus, cus, NULL));
}

/* A context on dev and a queue on it (profiling: CL_QUEUE_PROFILING_ENABLE or 0). */
static inline cl_context probe_context(cl_device_id dev, cl_command_queue_properties profiling, cl_command_queue *q)
{
    cl_int err;
    cl_context cx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CK(err);
    *q = clCreateCommandQueue(cx, dev, profiling, &err);
    CK(err);
    return cx;
}

/* src built for dev with opts; exits printing the build log if that fails */
static inline cl_program probe_build(cl_context cx, cl_device_id dev, const char *src, const char *opts)
{
    cl_int err;
    cl_program p = clCreateProgramWithSource(cx, 1, &src, NULL, &err);
    CK(err);
    if (clBuildProgram(p, 1, &dev, opts, NULL, NULL)) {
        char log[8192] = "";
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        printf("build failed (%s):\n%s\n", opts, log);
        exit(1);
    }
    return p;
}

/* f rounded to bf16 (nearest even): its bits, and the rounded value in *rounded */
static inline unsigned short probe_to_bf16(float f, float *rounded)
{
    unsigned u;
    memcpy(&u, &f, 4);
    u += 0x7FFF + ((u >> 16) & 1);
    u &= 0xFFFF0000u;
    memcpy(rounded, &u, 4);
    return (unsigned short)(u >> 16);
}

/* a bf16 value's f32 */
static inline float probe_bf16_to_f32(unsigned short h)
{
    unsigned u = (unsigned)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The mean END - START of n profiled events in us; releases them. */
static inline double probe_event_us(cl_event *ev, int n)
{
    double ns = 0;
    for (int i = 0; i < n; i++) {
        cl_ulong a, b;
        CK(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_START, sizeof a, &a, NULL));
        CK(clGetEventProfilingInfo(ev[i], CL_PROFILING_COMMAND_END, sizeof b, &b, NULL));
        ns += (double)(b - a);
        clReleaseEvent(ev[i]);
    }
    return ns / n * 1e-3;
}

#endif
