/* Command-line options of tdacl-bench.  Kept apart from main() so that the tests can
 * parse argument vectors without running a benchmark. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static void usage(FILE *f)
{
    char kinds[128] = "";
    for (int k = 0; tdacl_attention_kind_name((tdacl_attention_kind)k); k++)
        snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", k ? "," : "",
                 tdacl_attention_kind_name((tdacl_attention_kind)k));
    fprintf(f,
            "usage: tdacl-bench [options]\n"
            "  --suite LIST       peak,attention,gemm,forward or all (default all)\n"
            "  --device SEL       devices matching SEL (index or name substring); default: all\n"
            "  --quick            a representative subset (4 minutes on a 2-core CPU the first time, PoCL compiling; 25 s then)\n"
            "  --kinds LIST       attention kinds (%s)\n"
            "  --T LIST           sequence lengths (default 512..32768 on GPUs, 128..4096 on CPUs; forward: prefill lengths at batch 1)\n"
            "  --dtype LIST       f32,bf16 (default both; forward: f32 unless named, bf16 = bf16 weights at TDACL_PRECISION=bf16);\n"
            "                     attention also tf32: f32 storage at desc.precision tf32 (the tensor-core variant);\n"
            "                     forward also bf16act: bf16 weights, activations and KV cache\n"
            "  --beta LIST        density sweep for tra/tda (default 1,0.5,0.25,0)\n"
            "  --alpha LIST       density sweep for entmax, each in (1, 8] (default 1.5)\n"
            "  --B N --H N --d N  prefill shape (default 4, 8, 64)\n"
            "  --decode-B N --decode-H N --decode-Tk N   decode shape (default 8, 16, 32768|4096; forward: Tk is the context)\n"
            "  --decode-Tq N      query rows per decode step, 1..16 (default 1; 2..16 take the tensor-core decode)\n"
            "  --topk K           topk_theta: thresholds keeping K keys a row of N(0,1) scores (default 64)\n"
            "  --topk-post        topk_theta: post-softmax thresholds (on the weights) keeping as many\n"
            "  --no-decode        skip decode rows (attention and forward suites; forward: serving rows too)\n"
            "  --serving          forward: the serving rows with --quick too (their programs are its longest build on a CPU)\n"
            "  --no-prefill       skip prefill rows (attention and forward suites)\n"
            "  --vs-generic       also time the generic default parameters (tuning gain)\n"
            "  --min-samples N --min-ms X   sampling (default 10 samples and 100 ms per row)\n"
            "  --json FILE --csv FILE (rewritten after every row)  --plot FILE.png|.svg|.pdf\n"
            "  --compare OLD.json print new/old ratios and flag regressions beyond the noise band\n"
            "  --load RUN.json    report a saved run (table, --csv, --plot, --compare) without measuring\n"
            "  --progress | --no-progress   progress on stderr (default: when stderr is a TTY)\n"
            "  --version          print the version\n"
            "Options take --opt value or --opt=value.\n",
            kinds);
}

static int split_list(const char *s, char out[][16], int max, size_t width)
{
    int n = 0;
    while (*s && n < max) {
        size_t len = strcspn(s, ",");
        if (len == 0 || len >= width) return -1;
        memcpy(out[n], s, len);
        out[n][len] = 0;
        n++;
        s += len;
        if (*s == ',') s++;
    }
    return *s ? -1 : n;
}

static int split_numbers(const char *s, double *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        errno = 0;
        out[n++] = strtod(s, &end);
        if (end == s || errno || (*end && *end != ',')) return -1;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

int bench_parse_args(int argc, char **argv, bench_options *o)
{
    memset(o, 0, sizeof *o);
    o->B = 4, o->H = 8, o->d = 64, o->decode_B = 8, o->decode_H = 16, o->decode_Tq = 1, o->decode = 1, o->topk = 64;
    o->progress = isatty(2);
    tdacl__measure_opts_init(&o->measure);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        const char *v = has ? argv[i + 1] : NULL;
        double nums[BENCH_MAX_LIST];
        int n;
#define NEED_VALUE() do { if (!has) { fprintf(stderr, "tdacl-bench: %s needs a value\n", a); return 2; } i++; } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 1; }
        if (!strcmp(a, "--version")) {
            printf("tdacl-bench (libtdacl %s, git %s)\n", tdacl_version(), tdacl_git_revision());
            return 1;
        }
        else if (!strcmp(a, "--quick")) o->quick = 1;
        else if (!strcmp(a, "--no-decode")) o->decode = 0;
        else if (!strcmp(a, "--serving")) o->serving = 1;
        else if (!strcmp(a, "--topk-post")) o->topk_post = 1;
        else if (!strcmp(a, "--no-prefill")) o->no_prefill = 1;
        else if (!strcmp(a, "--vs-generic")) o->vs_generic = 1;
        else if (!strcmp(a, "--progress")) o->progress = 1;
        else if (!strcmp(a, "--no-progress")) o->progress = 0;
        else if (!strcmp(a, "--suite")) {
            NEED_VALUE();
            if ((o->nsuites = split_list(v, o->suites, BENCH_MAX_LIST, 16)) < 0) goto bad;
            for (int k = 0; k < o->nsuites; k++)
                if (strcmp(o->suites[k], "peak") && strcmp(o->suites[k], "attention") &&
                    strcmp(o->suites[k], "gemm") && strcmp(o->suites[k], "forward") && strcmp(o->suites[k], "all")) {
                    fprintf(stderr, "tdacl-bench: unknown suite '%s' (peak, attention, gemm, forward, all)\n", o->suites[k]);
                    return 2;
                }
        } else if (!strcmp(a, "--device")) { NEED_VALUE(); o->device = v; }
        else if (!strcmp(a, "--kinds")) {
            NEED_VALUE();
            if ((o->nkinds = split_list(v, o->kinds, BENCH_MAX_LIST, 16)) < 0) goto bad;
            for (int k = 0; k < o->nkinds; k++)
                if (tdacl_attention_kind_from_name(o->kinds[k], &(tdacl_attention_kind){0})) {
                    fprintf(stderr, "tdacl-bench: unknown attention kind '%s'\n", o->kinds[k]);
                    return 2;
                }
        } else if (!strcmp(a, "--dtype")) {
            NEED_VALUE();
            char tmp[BENCH_MAX_LIST][16];
            if ((o->ndtypes = split_list(v, tmp, BENCH_MAX_LIST, 8)) < 0) goto bad;
            for (int k = 0; k < o->ndtypes; k++) {
                /* attention: f32 storage at precision tf32; forward: bf16 weights and activations */
                if (!strcmp(tmp[k], "tf32") || !strcmp(tmp[k], "bf16act")) {
                    snprintf(o->dtypes[k], sizeof o->dtypes[k], "%s", tmp[k]);
                    continue;
                }
                if (tdacl__dtype_from_name(tmp[k]) < 0) {
                    fprintf(stderr, "tdacl-bench: unknown dtype '%s'\n", tmp[k]);
                    return 2;
                }
                snprintf(o->dtypes[k], sizeof o->dtypes[k], "%s", tdacl_dtype_name((tdacl_dtype)tdacl__dtype_from_name(tmp[k])));
            }
        } else if (!strcmp(a, "--T")) {
            NEED_VALUE();
            if ((n = split_numbers(v, nums, BENCH_MAX_LIST)) <= 0) goto bad;
            for (int k = 0; k < n; k++) {
                if (nums[k] < 1 || nums[k] > (1 << 24)) goto bad;
                o->T[k] = (int64_t)nums[k];
            }
            o->nT = n;
        } else if (!strcmp(a, "--beta")) {
            NEED_VALUE();
            if ((o->nbetas = split_numbers(v, o->betas, BENCH_MAX_LIST)) <= 0) goto bad;
            for (int k = 0; k < o->nbetas; k++) if (o->betas[k] < 0) goto bad;
        } else if (!strcmp(a, "--alpha")) {
            NEED_VALUE();
            if ((o->nalphas = split_numbers(v, o->alphas, BENCH_MAX_LIST)) <= 0) goto bad;
            for (int k = 0; k < o->nalphas; k++) if (!(o->alphas[k] > 1 && o->alphas[k] <= 8)) goto bad;
        } else if (!strcmp(a, "--B") || !strcmp(a, "--H") || !strcmp(a, "--d") || !strcmp(a, "--decode-B") ||
                   !strcmp(a, "--decode-H") || !strcmp(a, "--decode-Tk") || !strcmp(a, "--decode-Tq") ||
                   !strcmp(a, "--min-samples") || !strcmp(a, "--topk")) {
            NEED_VALUE();
            if (split_numbers(v, nums, 1) != 1 || nums[0] < 1 || nums[0] > (1 << 24)) goto bad;
            int64_t x = (int64_t)nums[0];
            if (!strcmp(a, "--B")) o->B = x;
            else if (!strcmp(a, "--H")) o->H = x;
            else if (!strcmp(a, "--d")) { if (x > 256) goto bad; o->d = (int)x; }
            else if (!strcmp(a, "--decode-B")) o->decode_B = x;
            else if (!strcmp(a, "--decode-H")) o->decode_H = x;
            else if (!strcmp(a, "--decode-Tk")) o->decode_Tk = x;
            else if (!strcmp(a, "--decode-Tq")) { if (x > 16) goto bad; o->decode_Tq = x; }
            else if (!strcmp(a, "--topk")) o->topk = x;
            else o->measure.min_samples = (int)x;
        } else if (!strcmp(a, "--min-ms")) {
            NEED_VALUE();
            if (split_numbers(v, nums, 1) != 1 || nums[0] < 0) goto bad;
            o->measure.min_ms = nums[0];
        } else if (!strcmp(a, "--json")) { NEED_VALUE(); o->json = v; }
        else if (!strcmp(a, "--csv")) { NEED_VALUE(); o->csv = v; }
        else if (!strcmp(a, "--plot")) { NEED_VALUE(); o->plot = v; }
        else if (!strcmp(a, "--compare")) { NEED_VALUE(); o->compare = v; }
        else if (!strcmp(a, "--load")) { NEED_VALUE(); o->load = v; }
        else {
            fprintf(stderr, "tdacl-bench: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "tdacl-bench: bad value '%s' for %s\n", v ? v : "", a);
        return 2;
#undef NEED_VALUE
    }
    if (o->nsuites == 0) {
        snprintf(o->suites[0], 16, "all");
        o->nsuites = 1;
    }
    return 0;
}
