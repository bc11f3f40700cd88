/* tdacl-bench: measures every kernel on every selected device against the device's
 * measured peak; writes a table, JSON, CSV and plots, and compares runs. */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli/cli_parse.h"

/* Refuses an output that cannot be written, without creating or truncating it (a failed run
 * must not leave an empty file behind). */
static int check_writable(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0) {
        if (S_ISDIR(sb.st_mode)) errno = EISDIR;
        else if (access(path, W_OK) == 0) return 0;
    } else {
        char copy[1024];
        snprintf(copy, sizeof copy, "%s", path);
        if (access(dirname(copy), W_OK) == 0) return 0;
    }
    fprintf(stderr, "tdacl-bench: cannot write %s: %s\n", path, strerror(errno));
    return 1;
}

static int wants(const bench_options *o, const char *suite)
{
    for (int i = 0; i < o->nsuites; i++)
        if (!strcmp(o->suites[i], suite) || !strcmp(o->suites[i], "all")) return 1;
    return 0;
}

/* Counts the timed rows the options select on the chosen devices (the suites in planning
 * mode), for "i/N" and the warning before a long run. */
static void plan(bench_run *run, const int *chosen, int nchosen)
{
    run->planning = 1;
    for (int c = 0; c < nchosen; c++) {
        int dev = run->ndevices;
        tdacl_device_get_info(chosen[c], &run->devices[dev].info);
        if (wants(&run->opt, "attention")) bench_suite_attention(run, NULL, dev);
        if (wants(&run->opt, "gemm")) bench_suite_gemm(run, NULL, dev);
        if (wants(&run->opt, "forward")) bench_suite_forward(run, NULL, dev);
    }
    run->planning = 0;
}

static int bench_main(int argc, char **argv)
{
    bench_run run;
    memset(&run, 0, sizeof run);
    int rc = bench_parse_args(argc, argv, &run.opt);
    if (rc) return rc == 1 ? 0 : rc;
    run.started = tdacl__now();
    time_t now = time(NULL);
    strftime(run.created, sizeof run.created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));

    /* refuse bad inputs and unwritable outputs before spending minutes measuring */
    bench_run old;
    memset(&old, 0, sizeof old);
    if (run.opt.compare && bench_load_json(run.opt.compare, &old)) return 2;
    const char *outs[3] = {run.opt.json, run.opt.csv, run.opt.plot};
    for (int i = 0; i < 3; i++)
        if (outs[i] && check_writable(outs[i])) {
            bench_free(&old);
            return 2;
        }
    if (run.opt.plot && bench_plot_format(run.opt.plot) < 0) {
        bench_free(&old);
        return 2;
    }

    if (run.opt.load) {
        bench_options keep = run.opt;
        if (bench_load_json(run.opt.load, &run)) return 2;
        run.opt = keep;
        if (!run.complete)
            fprintf(stderr, "tdacl-bench: %s holds an unfinished run (%s)\n", run.opt.load,
                    run.interrupted ? "interrupted" : "still being written, or stopped by a kill");
        bench_print_table(&run, stdout);
        int bad = 0;
        if (run.opt.json && bench_write_json(&run, run.opt.json)) bad = 1;
        if (run.opt.csv && bench_write_csv(&run, run.opt.csv)) bad = 1;
        if (run.opt.plot && bench_plot(&run, run.opt.compare ? &old : NULL, run.opt.plot)) bad = 1;
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
    if (run.opt.device && tdacl_device_select(run.opt.device, &only)) {
        fprintf(stderr, "tdacl-bench: %s\n", tdacl_last_error(NULL));
        return 2;
    }
    int chosen[BENCH_MAX_DEVICES], nchosen = 0;
    for (int i = 0; i < ndev && nchosen < BENCH_MAX_DEVICES; i++)
        if (only < 0 || i == only) chosen[nchosen++] = i;
    plan(&run, chosen, nchosen);
    /* a bare run measures everything on every device: say how much before starting */
    if (!run.opt.quick && run.total_planned > 60) {
        fprintf(stderr,
                "tdacl-bench: %d timed rows on %d device(s)%s: expect %s.  --quick measures a representative "
                "subset in about 2 minutes; --suite, --kinds, --T, --dtype and --device narrow the run.%s\n",
                run.total_planned, nchosen, only < 0 && nchosen > 1 ? " (every device: --device picks one)" : "",
                run.total_planned > 400 ? "an hour or more on a CPU, tens of minutes on a GPU" : "several minutes or more",
                isatty(2) ? "  Starting in 5 s (Ctrl-C to stop)." : "");
        if (isatty(2)) {
            struct timespec ts = {5, 0};
            while (nanosleep(&ts, &ts) && !bench_stop_requested()) {}
            if (bench_stop_requested()) return 130;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = bench_on_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    run.measuring_since = tdacl__now();
    int failures = 0;
    for (int c = 0; c < nchosen && !bench_stop_requested(); c++) {
        int i = chosen[c];
        bench_device *bd = &run.devices[run.ndevices];
        int dev = run.ndevices++;
        tdacl_device_get_info(i, &bd->info);
        tdacl_context_desc desc;
        tdacl_context_desc_init(&desc);
        char idx[16];
        snprintf(idx, sizeof idx, "%d", i);
        desc.device = idx;
        tdacl_context *ctx;
        if (tdacl_context_create(&desc, &ctx)) {
            fprintf(stderr, "tdacl-bench: device %d: %s\n", i, tdacl_last_error(NULL));
            failures++;
            continue;
        }
        bench_progress(&run, "%s: measuring peak", bd->info.name);
        if (tdacl_measure_peak(ctx, &bd->peak) == 0) bd->have_peak = 1;
        else fprintf(stderr, "tdacl-bench: peak probe failed on %s: %s\n", bd->info.name, tdacl_last_error(ctx));
        if (run.opt.progress) fprintf(stderr, "\r\033[K");
        bench_print_device(&run, dev, stdout);
        fflush(stdout);
        if (wants(&run.opt, "peak")) failures += bench_suite_peak(&run, ctx, dev);
        if (wants(&run.opt, "attention")) failures += bench_suite_attention(&run, ctx, dev);
        if (wants(&run.opt, "gemm")) failures += bench_suite_gemm(&run, ctx, dev);
        if (wants(&run.opt, "forward")) failures += bench_suite_forward(&run, ctx, dev);
        tdacl_context_destroy(ctx);
    }
    if (run.opt.progress) fprintf(stderr, "\r\033[K");
    run.interrupted = bench_stop_requested();
    run.complete = !run.interrupted;
    printf("total time %.1f s%s\n", tdacl__now() - run.started,
           run.interrupted ? "; interrupted: the rows above are in the --json/--csv files" : "");
    int unwritten = run.opt.json && bench_write_json(&run, run.opt.json);
    if (run.opt.csv && bench_write_csv(&run, run.opt.csv)) unwritten++;
    if (run.opt.plot && bench_plot(&run, run.opt.compare ? &old : NULL, run.opt.plot)) unwritten++;
    int regressions = 0;
    if (run.opt.compare) regressions = bench_compare(&run, &old, stdout);
    bench_free(&run);
    bench_free(&old);
    if (failures) fprintf(stderr, "tdacl-bench: %d measurement(s) failed\n", failures);
    if (bench_stop_requested()) return 128 + bench_stop_requested();
    return failures || unwritten ? 1 : regressions ? 3 : 0;
}

int main(int argc, char **argv)
{
    /* --opt=value as --opt value, like the tdacl commands */
    return cli_run_split(argc, argv, "tdacl-bench", bench_main);
}
