/* The host's time for a decode step and its device draw (tdacl_model_decode with the drawn ids,
 * tdacl_model_sample), real and with the driver's enqueue and argument calls stubbed out
 * (bench/probes/host_shim.c): what the library's own code costs a step.  Build beside libshim.so:
 *   gcc -O2 -o host_overhead host_overhead.c -I include -L. -lshim -L build -ltdacl -Wl,-rpath,.:build
 *   TDACL_DEVICE=pocl ./host_overhead MODEL_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <tdacl.h>
void shim_enable(int on);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv)
{
    tdacl_context_desc cd; tdacl_context_desc_init(&cd);
    tdacl_context *ctx; if (tdacl_context_create(&cd, &ctx)) { printf("ctx: %s\n", tdacl_last_error(NULL)); return 1; }
    tdacl_model_desc md; tdacl_model_desc_init(&md);
    md.path = argv[1]; tdacl_model *m; if (tdacl_model_load(ctx, &md, &m)) { printf("load: %s\n", tdacl_last_error(ctx)); return 1; }
    int32_t tok[3] = {1, 2, 3};
    tdacl_model_prefill(m, 1, 3, tok);
    for (int i = 0; i < 20; i++) tdacl_model_decode(m, 1, tok);
    tdacl_finish(ctx);
    for (int on = 0; on < 2; on++) {
        tdacl_model_prefill(m, 1, 3, tok); tdacl_finish(ctx);
        shim_enable(on);
        const int n = 1000;
        double t = 0;
        uint64_t seed = 1;
        tdacl_model_sample(m, 0.0f, 1, &seed);
        tdacl_finish(ctx);
        for (int i = 0; i < n; i++) {
            double t0 = now();
            tdacl_status st = tdacl_model_decode(m, 1, NULL);
            if (!st) st = tdacl_model_sample(m, 0.0f, 1, &seed);
            t += now() - t0;
            if (st) { printf("step %d: %s\n", i, tdacl_last_error(ctx)); return 1; }
            if (!on) tdacl_finish(ctx);
        }
        shim_enable(0);
        tdacl_finish(ctx);
        printf("%s: host time a decode step and its device draw %.1f us\n", on ? "enqueue and set-arg stubbed (our code alone)" : "real", t / n * 1e6);
    }
    return 0;
}
