/* tdacl tune: search block sizes of the attention kernels on one device and store the
 * winners in a tuning database (the user's by default).  Ctrl-C keeps the best so far. */
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "base/kinds.h"
#include "cli/cli.h"
#include "tools/tuner.h"


static volatile int stop_flag;
static void on_sigint(int sig) { (void)sig, stop_flag = 1; }

extern char **environ;

/* job->prebuild: re-runs this executable as `tdacl __prebuild DEV DIR VARIANT OPTS...`, one
 * process per share of the option strings, and waits for all of them (or kills them at the
 * deadline or on Ctrl-C).  Returns how many were killed. */
static int spawn_prebuild(int device_index, const char *cache_dir, const char *variant, char *const *options,
                          int n, int jobs, double deadline, volatile int *stop)
{
    pid_t pids[64];
    int started = 0;
    char dev[16];
    snprintf(dev, sizeof dev, "%d", device_index);
    if (jobs > 64) jobs = 64;
    for (int j = 0; j < jobs && j < n; j++) {
        int count = 0;
        for (int i = j; i < n; i += jobs) count++;
        char **argv = calloc((size_t)count + 6, sizeof *argv);
        if (!argv) break;
        int a = 0;
        argv[a++] = "tdacl";
        argv[a++] = "__prebuild";
        argv[a++] = dev;
        argv[a++] = (char *)cache_dir;
        argv[a++] = (char *)variant;
        for (int i = j; i < n; i += jobs) argv[a++] = options[i];
        argv[a] = NULL;
        pid_t pid;
        if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) == 0) pids[started++] = pid;
        free(argv);
    }
    /* wait, but not past the deadline: a builder still compiling then is stopped */
    int left = started, killed = 0;
    while (left > 0) {
        for (int j = 0; j < started; j++)
            if (pids[j] > 0 && waitpid(pids[j], NULL, WNOHANG) == pids[j]) pids[j] = 0, left--;
        if (left == 0) break;
        if (tdacl__now() > deadline || (stop && *stop)) {
            for (int j = 0; j < started; j++)
                if (pids[j] > 0) kill(pids[j], SIGKILL), waitpid(pids[j], NULL, 0), killed++;
            break;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return killed;
}

/* tdacl __prebuild DEV DIR VARIANT OPTS...: build the variant's program into the cache and
 * exit (internal). */
int cmd_prebuild(int argc, char **argv)
{
    if (argc < 4) return 2;
    const tdacl_variant_def *row = tdacl__variant(argv[3]);
    if (!row) return 2;
    tdacl_context_desc desc;
    tdacl_context_desc_init(&desc);
    desc.device = argv[1];
    desc.cache = 1;
    desc.cache_dir = argv[2];
    desc.log_level = TDACL_LOG_OFF;
    tdacl_context *ctx;
    if (tdacl_context_create(&desc, &ctx)) return 1;
    for (int i = 4; i < argc; i++) {
        cl_program prog;
        tdacl__program_get(ctx, &row->program, argv[i], &prog);
    }
    tdacl_context_destroy(ctx);
    return 0;
}

/* What the search did, in words: the space, what was tried and why it stopped, the winner. */
static void report(const tdacl_tune_result *res, double budget)
{
    int timed = res->tried - res->rejected_reference - res->failed;
    printf("  %d combinations: %d break the constraints, %d valid; %d tried", res->combinations,
           res->rejected_constraint, res->candidates, res->tried);
    if (res->interrupted) printf(" before Ctrl-C (%d not tried)", res->candidates - res->tried);
    else if (res->budget_spent) printf(" before the %g s budget ran out (%d not tried)", budget, res->candidates - res->tried);
    else printf(" (all)");
    printf(": %d timed, %d wrong against the reference, %d failed to build or run\n", timed, res->rejected_reference,
           res->failed);
    if (!memcmp(&res->best, &res->generic, sizeof res->best))
        printf("  the generic default won (%.4f ms): no candidate tried was faster; the entry records it\n",
               res->best_ms);
    else
        printf("  best %.4f ms, %.2fx faster than the generic default (%.4f ms)\n", res->best_ms,
               res->best_ms > 0 ? res->generic_ms / res->best_ms : 0.0, res->generic_ms);
}

static void usage(FILE *f)
{
    char kernels[160] = "", kinds[128];
    for (int i = 0; tdacl__variant_at(i); i++)
        if (tdacl__variant_at(i)->space)
            snprintf(kernels + strlen(kernels), sizeof kernels - strlen(kernels), "%s|", tdacl__variant_at(i)->space->kernel);
    tdacl__kind_names(kinds, sizeof kinds);
    fprintf(f,
            "usage: tdacl tune [--kernel %sall] [--kinds LIST] [--dtype LIST]\n"
            "                  [--d N] [--T N] [--B N] [--H N] [--N N --K N] [--budget SECONDS]\n"
            "                  [--strategy exhaustive|random|anneal] [--device SEL] [--out FILE]\n"
            "                  [--class-only] [--seed N] [--jobs N] [--quiet]\n"
            "       tdacl tune --import-clblast clblast_xgemm_1_32.json [--out FILE] [--device SEL]\n"
            "Tunes each (kernel, kind, dtype, d) at a short and a long T (or only --T), checking every\n"
            "candidate against the double-precision reference before timing it.  Entries go to\n"
            "--out or the user database ($TDACL_TUNING_FILE, $XDG_CONFIG_HOME/tdacl/tuning.tdb).\n"
            "--budget is per tuned problem (default 120 s) and holds: candidates compile in child\n"
            "processes, and one still compiling when it runs out is stopped.  --jobs N compiles N at once\n"
            "(timing stays sequential).  Ctrl-C stops at once and keeps the best found.  --import-clblast\n"
            "stores a CLBlast tuner result (clblast-utils) as a clblast_* entry, which contexts then\n"
            "apply through CLBlastOverrideParameters.  Kinds: %s.  attention_mma tunes the tensor-core\n"
            "variant (bf16/f16, and tf32: f32 storage at precision tf32, entries keyed dtype=tf32; NVIDIA\n"
            "sm_80+, or its portable body with TDACL_MMA_EMULATE=1).  --B and --H set the timing shape\n"
            "(default: B 4, H 8; decode kernels B 8, H 16); decode entries are keyed on its batch x heads\n"
            "(bh=few up to 32, as in a model's batch-1 step, else bh=many).\n",
            kernels, kinds);
}

static int split(const char *s, char out[][16], int max)
{
    int n = 0;
    while (*s && n < max) {
        size_t len = strcspn(s, ",");
        if (!len || len >= 16) return -1;
        memcpy(out[n], s, len);
        out[n++][len] = 0;
        s += len;
        if (*s == ',') s++;
    }
    return *s ? -1 : n;
}

int cmd_tune(int argc, char **argv)
{
    char kernels[8][24], kinds[8][16], dtypes[4][16];
    int nkernels = 0, nkinds = 0, ndtypes = 0, d = 64, quiet = 0, class_only = 0;
    long long T = 0, B = 0, H = 0, seed = 1, jobs = 1, N = 3072, K = 768;
    double budget = 120;
    tdacl_tune_strategy strategy = TDACL_TUNE_EXHAUSTIVE;
    const char *device = NULL, *out = NULL, *import_clblast = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help")) { usage(stdout); return 0; }
        if (!strcmp(o, "--quiet")) { quiet = 1; continue; }
        if (!strcmp(o, "--class-only")) { class_only = 1; continue; }
        if (!cli_known(o, "--kernel --kinds --dtype --d --T --B --N --K --H --seed --jobs --budget --strategy "
                          "--device --out --import-clblast")) {
            fprintf(stderr, "tdacl tune: unknown option '%s' (see tdacl tune --help)\n", o);
            return 2;
        }
        if (i + 1 >= argc) { fprintf(stderr, "tdacl tune: option %s needs a value\n", o); return 2; }
        const char *v = argv[++i];
        long long n;
        double x;
        int bad = 0;
        if (!strcmp(o, "--kernel")) {
            if (!strcmp(v, "all")) nkernels = 0;
            else if (tdacl__variant_of_space(v)) snprintf(kernels[0], sizeof kernels[0], "%s", v), nkernels = 1;
            else { fprintf(stderr, "tdacl tune: unknown kernel '%s' (see --help)\n", v); return 2; }
        } else if (!strcmp(o, "--kinds")) {
            bad = (nkinds = split(v, kinds, 8)) < 0;
            for (int k = 0; !bad && k < nkinds; k++) bad = tdacl__kind_from_name(kinds[k]) < 0;
        } else if (!strcmp(o, "--dtype")) {
            bad = (ndtypes = split(v, dtypes, 4)) < 0;
            for (int k = 0; !bad && k < ndtypes; k++) bad = strcmp(dtypes[k], "tf32") && tdacl__dtype_from_name(dtypes[k]) < 0;
        } else if (!strcmp(o, "--d")) bad = cli_long(v, &n) || n < 1 || n > 256, d = (int)n;
        else if (!strcmp(o, "--T")) bad = cli_long(v, &T) || T < 1;
        else if (!strcmp(o, "--B")) bad = cli_long(v, &B) || B < 1;
        else if (!strcmp(o, "--N")) bad = cli_long(v, &N) || N < 1;
        else if (!strcmp(o, "--K")) bad = cli_long(v, &K) || K < 1;
        else if (!strcmp(o, "--H")) bad = cli_long(v, &H) || H < 1;
        else if (!strcmp(o, "--seed")) bad = cli_long(v, &seed) || seed < 0;
        else if (!strcmp(o, "--jobs")) bad = cli_long(v, &jobs) || jobs < 1 || jobs > 64;
        else if (!strcmp(o, "--budget")) bad = cli_double(v, &x) || x < 0, budget = x;
        else if (!strcmp(o, "--strategy")) {
            if (!strcmp(v, "exhaustive")) strategy = TDACL_TUNE_EXHAUSTIVE;
            else if (!strcmp(v, "random")) strategy = TDACL_TUNE_RANDOM;
            else if (!strcmp(v, "anneal")) strategy = TDACL_TUNE_ANNEAL;
            else bad = 1;
        } else if (!strcmp(o, "--device")) device = v;
        else if (!strcmp(o, "--out")) out = v;
        else if (!strcmp(o, "--import-clblast")) import_clblast = v;
        else { fprintf(stderr, "tdacl tune: unknown option '%s'\n", o); usage(stderr); return 2; }
        if (bad) { fprintf(stderr, "tdacl tune: bad value '%s' for %s\n", v, o); return 2; }
    }
    if (!nkinds) /* every kind of the table */
        while (nkinds < 8 && tdacl__kind(nkinds)) snprintf(kinds[nkinds], 16, "%s", tdacl__kind_name(nkinds)), nkinds++;
    if (!nkernels) /* every tuned variant but the tensor-core one, which needs --kernel attention_mma */
        for (int i = 0; tdacl__variant_at(i) && nkernels < 8; i++) {
            const tdacl_variant_def *r = tdacl__variant_at(i);
            if (r->space && !r->matrix_units) snprintf(kernels[nkernels++], sizeof kernels[0], "%s", r->space->kernel);
        }
    if (!ndtypes) snprintf(dtypes[0], 16, "f32"), ndtypes = 1;
    tdacl_context *ctx;
    if (cli_open(device, &ctx)) return 1;
    char path[512];
    if (out) snprintf(path, sizeof path, "%s", out);
    else tdacl__tdb_user_path(NULL, path, sizeof path);
    if (!path[0]) {
        fprintf(stderr, "tdacl tune: no database path (set --out or TDACL_TUNING_FILE)\n");
        tdacl_context_destroy(ctx);
        return 2;
    }
    if (import_clblast) {
        tdacl_status ist = tdacl__clblast_import(ctx, import_clblast, path);
        if (ist) cli_report(ctx, ist);
        else printf("imported %s into %s\n", import_clblast, path);
        tdacl_context_destroy(ctx);
        return ist ? 1 : 0;
    }
    signal(SIGINT, on_sigint);
    int gpu = ctx->info.type == TDACL_DEVICE_GPU, rc = 0;
    printf("tuning on %s (%s) -> %s\n", ctx->info.name, ctx->info.arch, path);
    for (int ki = 0; ki < nkernels && !stop_flag; ki++) {
        int decode = !strncmp(kernels[ki], "attention_decode", 16), gemm = !strncmp(kernels[ki], "gemm", 4);
        /* a short and a long representative length per problem (gemm: rows = tokens) */
        long long lengths[2] = {decode ? 2048 : 1024, decode ? (gpu ? 32768 : 8192) : (gpu ? 8192 : 2048)};
        int nlen = T ? 1 : 2;
        if (T) lengths[0] = T;
        for (int di = 0; di < ndtypes && !stop_flag; di++)
            for (int kk = 0; kk < (gemm ? 1 : nkinds) && !stop_flag; kk++)
                for (int li = 0; li < nlen && !stop_flag; li++) {
                    tdacl_tune_job job;
                    memset(&job, 0, sizeof job);
                    job.kernel = kernels[ki];
                    job.kind = gemm ? -1 : tdacl__kind_from_name(kinds[kk]);
                    job.N = N;
                    job.K = K;
                    /* tf32: f32 storage on the matrix units as tf32 (attention_mma) */
                    const int tf32 = !strcmp(dtypes[di], "tf32");
                    job.dtype = tf32 ? TDACL_F32 : (tdacl_dtype)tdacl__dtype_from_name(dtypes[di]);
                    job.precision = tf32 ? TDACL_PRECISION_TF32 : TDACL_PRECISION_EXACT;
                    job.d = d;
                    /* the tensor-core decode serves 2..16 query rows: tuned at 8 */
                    job.tq = !strcmp(kernels[ki], "attention_decode_mma") ? 8 : 1;
                    /* not given: prefill B4 H8, decode B8 H16 (entries keyed bh=many) */
                    job.B = B ? B : decode ? 8 : 4;
                    job.H = H ? H : decode ? 16 : 8;
                    job.T = lengths[li];
                    job.strategy = strategy;
                    job.budget_s = budget;
                    job.seed = (unsigned)seed;
                    job.stop = &stop_flag;
                    job.reference = tdacl__reference_attention;
                    job.verbose = !quiet;
                    job.jobs = (int)jobs;
                    job.prebuild = spawn_prebuild; /* compiles stay stoppable: budget and Ctrl-C */
                    tdacl__measure_opts_init(&job.measure);
                    job.measure.min_samples = 5;
                    job.measure.min_ms = 30;
                    job.measure.warmup = 1;
                    if (gemm)
                        fprintf(stderr, "gemm %s M=%lld N=%lld K=%lld\n", dtypes[di], (long long)job.T, N, K);
                    else
                        fprintf(stderr, "%s %s %s d=%d T=%lld (B=%lld H=%lld)\n", job.kernel, kinds[kk], dtypes[di], d,
                                (long long)job.T, (long long)job.B, (long long)job.H);
                    tdacl_tune_result res;
                    tdacl_status st = tdacl__tune(&ctx, &job, &res);
                    if (!ctx) return cli_report(NULL, st);
                    if (st && res.interrupted) {
                        printf("  interrupted before any candidate was timed: no entry written\n");
                        break;
                    }
                    if (st) {
                        cli_report(ctx, st);
                        rc = 1;
                        continue;
                    }
                    tdacl_tdb_entry e;
                    tdacl__tune_entry(ctx, &job, &res, !class_only, &e);
                    char line[1024];
                    tdacl__tdb_format(&e, line, sizeof line);
                    printf("%s\n", line);
                    report(&res, budget);
                    if ((st = tdacl__tdb_upsert_file(ctx, path, &e))) rc = cli_report(ctx, st);
                    fflush(stdout);
                }
    }
    signal(SIGINT, SIG_DFL);
    tdacl_context_destroy(ctx);
    return rc;
}
