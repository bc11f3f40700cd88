/* The transposed GEMV of the tied LM head (c[1, N] = a[1, K] @ b[N, K]^T, b bf16, a f32 or bf16),
 * N = 50257, K = 768 unless given: LAUNCHES launches back to back from a drained queue, the wall
 * clock a launch, and the bytes of b read a launch over it, against the device's measured read
 * bandwidth (tdacl_measure_peak).  With TDACL_PROFILE=1 the context's report at exit gives the
 * kernels' own device time a launch (gemv_t), which leaves out the gaps between launches.
 *   cc -O2 -o gemv_probe bench/probes/gemv_probe.c -Iinclude -Lbuild -ltdacl
 *   TDACL_PROFILE=1 ./gemv_probe [N K [a-dtype f32|bf16]] */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tdacl.h>

#define LAUNCHES 200

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int check(tdacl_context *ctx, tdacl_status st, const char *what)
{
    if (!st) return 0;
    fprintf(stderr, "%s: %s\n", what, ctx ? tdacl_last_error(ctx) : "failed");
    return 1;
}

static tdacl_tensor *filled(tdacl_context *ctx, tdacl_dtype dt, int64_t rows, int64_t cols)
{
    const int64_t shape[2] = {rows, cols};
    tdacl_tensor *t = NULL;
    if (check(ctx, tdacl_tensor_create(ctx, dt, 2, shape, &t), "tdacl_tensor_create")) return NULL;
    float *h = malloc((size_t)(rows * cols) * sizeof *h);
    if (!h) return t;
    for (int64_t i = 0; i < rows * cols; i++) h[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
    check(ctx, tdacl_tensor_upload(t, h, TDACL_F32, rows * cols), "tdacl_tensor_upload");
    free(h);
    return t;
}

int main(int argc, char **argv)
{
    const int N = argc > 2 ? atoi(argv[1]) : 50257, K = argc > 2 ? atoi(argv[2]) : 768;
    const tdacl_dtype adt = argc > 3 && !strcmp(argv[3], "bf16") ? TDACL_BF16 : TDACL_F32;
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    tdacl_context *ctx = NULL;
    if (check(NULL, tdacl_context_create(&desc, &ctx), "tdacl_context_create")) return 1;
    tdacl_peak peak;
    if (check(ctx, tdacl_measure_peak(ctx, &peak), "tdacl_measure_peak")) return 1;
    tdacl_tensor *a = filled(ctx, adt, 1, K), *b = filled(ctx, TDACL_BF16, N, K), *c = filled(ctx, TDACL_F32, 1, N);
    if (!a || !b || !c) return 1;
    tdacl_matmul_desc md;
    tdacl_matmul_desc_init(&md);
    md.transpose_b = 1;
    const tdacl_matmul_tensors t = {a, b, NULL, NULL, c};
    for (int i = 0; i < 10; i++) /* build and warm up */
        if (check(ctx, tdacl_matmul(ctx, &md, &t), "tdacl_matmul")) return 1;
    if (check(ctx, tdacl_finish(ctx), "tdacl_finish")) return 1;
    const double t0 = now_s();
    for (int i = 0; i < LAUNCHES; i++)
        if (check(ctx, tdacl_matmul(ctx, &md, &t), "tdacl_matmul")) return 1;
    if (check(ctx, tdacl_finish(ctx), "tdacl_finish")) return 1;
    const double us = (now_s() - t0) * 1e6 / LAUNCHES, bytes = 2.0 * N * K;
    printf("gemv_t 1x%dx%d, b bf16, a %s: %.2f us a launch back to back, %.0f GB/s of b = %.1f %% of the measured %.0f GB/s "
           "(launches %d; TDACL_PROFILE=1 gives the kernel's own time)\n",
           N, K, adt == TDACL_BF16 ? "bf16" : "f32", us, bytes / us * 1e-3, 100.0 * bytes / us * 1e-3 / peak.bandwidth_gbs,
           peak.bandwidth_gbs, LAUNCHES);
    tdacl_tensor_destroy(a), tdacl_tensor_destroy(b), tdacl_tensor_destroy(c);
    tdacl_context_destroy(ctx);
    return 0;
}
