/* tdacl-bench: measures every kernel on every selected device against the device's
 * measured peak; writes a table, JSON, CSV and plots, and compares runs. */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static int wants(const bench_options *o, const char *suite)
{
    for (int i = 0; i < o->nsuites; i++)
        if (!strcmp(o->suites[i], suite) || !strcmp(o->suites[i], "all")) return 1;
    return 0;
}

int main(int argc, char **argv)
{
    bench_run run;
    memset(&run, 0, sizeof run);
    int rc = bench_parse_args(argc, argv, &run.opt);
    if (rc) return rc == 1 ? 0 : rc;
    run.started = tdacl__now();
    time_t now = time(NULL);
    strftime(run.created, sizeof run.created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    /* refuse unwritable outputs before spending minutes measuring */
    const char *outs[3] = {run.opt.json, run.opt.csv, run.opt.plot};
    for (int i = 0; i < 3; i++) {
        if (!outs[i]) continue;
        FILE *f = fopen(outs[i], "a");
        if (!f) {
            fprintf(stderr, "tdacl-bench: cannot write %s: %s\n", outs[i], strerror(errno));
            return 2;
        }
        fclose(f);
    }
    bench_run old;
    memset(&old, 0, sizeof old);
    if (run.opt.compare && bench_load_json(run.opt.compare, &old)) return 2;

    if (run.opt.load) {
        bench_options keep = run.opt;
        if (bench_load_json(run.opt.load, &run)) return 2;
        run.opt = keep;
        bench_print_table(&run, stdout);
        int bad = 0;
        if (run.opt.json && bench_write_json(&run, run.opt.json)) bad = 1;
        if (run.opt.csv && bench_write_csv(&run, run.opt.csv)) bad = 1;
        if (run.opt.plot && bench_plot(&run, run.opt.plot)) bad = 1;
        int regressions = run.opt.compare ? bench_compare(&run, &old, stdout) : 0;
        bench_free(&run);
        bench_free(&old);
        return bad ? 1 : regressions ? 3 : 0;
    }
    int ndev = 0;
    tdacl_status st = tdacl_device_count(&ndev);
    if (st || ndev == 0) {
        fprintf(stderr, "tdacl-bench: no OpenCL device (%s)\n", st ? tdacl_last_error(NULL) : "none found");
        return 1;
    }
    int only = -1;
    if (run.opt.device && (st = tdacl_device_select(run.opt.device, &only))) {
        fprintf(stderr, "tdacl-bench: %s\n", tdacl_last_error(NULL));
        return 2;
    }
    int failures = 0;
    for (int i = 0; i < ndev && run.ndevices < BENCH_MAX_DEVICES; i++) {
        if (only >= 0 && i != only) continue;
        bench_device *bd = &run.devices[run.ndevices];
        int dev = run.ndevices++;
        tdacl_device_get_info(i, &bd->info);
        tdacl_context_desc desc;
        tdacl_context_desc_init(&desc);
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        desc.device = idx;
        tdacl_context *ctx;
        if ((st = tdacl_context_create(&desc, &ctx))) {
            fprintf(stderr, "tdacl-bench: device %d: %s\n", i, tdacl_last_error(NULL));
            failures++;
            continue;
        }
        bench_progress(&run, "%s: measuring peak", bd->info.name);
        if ((st = tdacl_measure_peak(ctx, &bd->peak)) == 0) bd->have_peak = 1;
        else fprintf(stderr, "tdacl-bench: peak probe failed on %s: %s\n", bd->info.name, tdacl_last_error(ctx));
        if (wants(&run.opt, "peak")) failures += bench_suite_peak(&run, ctx, dev);
        if (wants(&run.opt, "attention")) failures += bench_suite_attention(&run, ctx, dev);
        if (wants(&run.opt, "gemm")) failures += bench_suite_gemm(&run, ctx, dev);
        if (wants(&run.opt, "forward")) failures += bench_suite_forward(&run, ctx, dev);
        tdacl_context_destroy(ctx);
    }
    if (run.opt.progress) fprintf(stderr, "\r\033[K");
    bench_print_table(&run, stdout);
    printf("total time %.1f s\n", tdacl__now() - run.started);
    if (run.opt.json && bench_write_json(&run, run.opt.json)) failures++;
    if (run.opt.csv && bench_write_csv(&run, run.opt.csv)) failures++;
    if (run.opt.plot) bench_plot(&run, run.opt.plot);
    int regressions = 0;
    if (run.opt.compare) regressions = bench_compare(&run, &old, stdout);
    bench_free(&run);
    bench_free(&old);
    if (failures) fprintf(stderr, "tdacl-bench: %d measurement(s) failed\n", failures);
    return failures ? 1 : regressions ? 3 : 0;
}
