/* tdacl-bench's host code, no device needed: the JSON and CSV schema round trip, the
 * nominal FLOP count against docs/spec.md section 5, the sample statistics of src/tools/measure.c,
 * --compare's regression rule and the option parser.  The measured run and the CLI's
 * error exits are driven by tests/bench_cli.cmake. */
#include <float.h>
#include <math.h>

#include "common/testutil.h"
#include "bench.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = tu_mkdtemp("bench");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tu_rm_rf(dir);
    free(dir);
    return 0;
}

#define assert_near(x, want, tol)                                                            \
    do {                                                                                     \
        double x_ = (x), w_ = (want);                                                        \
        if (!(fabs(x_ - w_) <= (tol))) fail_msg("%s = %.17g, wanted %.17g", #x, x_, w_);    \
    } while (0)
/* cJSON prints 15 significant digits when they read back within one ulp (its
 * compare_double), so a JSON round trip may move a double by that much. */
#define assert_json_double(x, want) assert_near(x, want, 2.0 * DBL_EPSILON * fabs(want))

static void set_samples(bench_row *r, const double *ms, int n)
{
    r->s.n = n;
    memcpy(r->s.ms, ms, (size_t)n * sizeof *ms);
    tdacl__samples_summarise(&r->s, 0.10);
}

static bench_row *row(bench_run *run, const char *suite, const char *name, const char *impl, const char *dtype,
                      const char *path)
{
    bench_row *r = bench_add_row(run);
    assert_non_null(r);
    snprintf(r->suite, sizeof r->suite, "%s", suite);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->impl, sizeof r->impl, "%s", impl);
    snprintf(r->device, sizeof r->device, "%s", run->devices[0].info.name);
    snprintf(r->dtype, sizeof r->dtype, "%s", dtype);
    snprintf(r->path, sizeof r->path, "%s", path);
    return r;
}

/* One device with a peak; peak rows, attention rows (prefill with tuning parameters,
 * a noisy one, decode), a GEMM row and a forward row: every optional JSON member. */
static void make_run(bench_run *run)
{
    memset(run, 0, sizeof *run);
    bench_device *d = &run->devices[run->ndevices++];
    snprintf(d->info.name, sizeof d->info.name, "Test Device, rev 2"); /* a comma: quoted in CSV */
    snprintf(d->info.arch, sizeof d->info.arch, "cpu-test");
    d->info.type = TDACL_DEVICE_CPU;
    d->have_peak = 1;
    d->peak.fp32_gflops = 123.456789012345, d->peak.bandwidth_gbs = 45.25, d->peak.launch_us = 7.1;
    d->peak.enqueue_us = 4.25, d->peak.enqueue_arg_us = 0.3125;
    snprintf(run->created, sizeof run->created, "2026-11-22T01:02:03Z");

    static const char *peaks[3][2] = {{"fp32_fma", "GFLOP/s"}, {"read_bandwidth", "GB/s"}, {"launch_latency", "us"}};
    double vals[3] = {d->peak.fp32_gflops, d->peak.bandwidth_gbs, d->peak.launch_us};
    for (int i = 0; i < 3; i++) {
        bench_row *r = row(run, "peak", peaks[i][0], "tdacl", "", "");
        r->value = vals[i];
        snprintf(r->unit, sizeof r->unit, "%s", peaks[i][1]);
    }

    bench_row *r = row(run, "attention", "tra", "tdacl", "f32", "prefill");
    r->B = 2, r->H = 3, r->Tq = 256, r->Tk = 256, r->d = 64, r->dv = 64, r->beta = 0.5;
    set_samples(r, (const double[]){0.1234567890123, 0.125, 0.1199999, 0.13, 0.124}, 5);
    snprintf(r->params, sizeof r->params, "TQ=32,TK=64,VEC=4");
    snprintf(r->params_source, sizeof r->params_source, "database");
    snprintf(r->variant, sizeof r->variant, "attention.simt");
    snprintf(r->params_origin, sizeof r->params_origin, "tuning/pocl.json: cpu-test");
    r->flops = tdacl_attention_flops(TDACL_ATTN_TRA, 6, 256, 256, 0, 64, 64);
    r->bytes = 1234567.0, r->sparsity = 0.987654321;
    snprintf(r->note, sizeof r->note, "effective rate above the \"FP32\" peak");
    bench_finish_row(run, r);

    r = row(run, "attention", "tda", "tdacl", "bf16", "prefill");
    r->B = 1, r->H = 8, r->Tq = 1024, r->Tk = 1024, r->d = 128, r->dv = 128, r->beta = 0;
    set_samples(r, (const double[]){1.0, 1.0, 1.0, 2.5, 1.1, 1.0}, 6);
    assert_true(r->s.noisy);
    r->flops = 3e9, r->bytes = 2e6, r->sparsity = 0.5;
    bench_finish_row(run, r);

    r = row(run, "attention", "softmax", "tdacl", "f32", "decode");
    r->B = 8, r->H = 16, r->Tq = 1, r->Tk = 2048, r->d = 64, r->dv = 64;
    set_samples(r, (const double[]){0.5, 0.51, 0.49}, 3);
    r->flops = 1e8, r->bytes = 3e7, r->bound_ms = 0.0123, r->sparsity = 0;
    bench_finish_row(run, r);

    r = row(run, "gemm", "sgemm", "clblast", "f32", "");
    r->M = 256, r->N = 2304, r->K = 768;
    set_samples(r, (const double[]){4.0, 4.2, 3.9, 4.1}, 4);
    r->flops = 2.0 * 256 * 2304 * 768, r->bytes = 9e6;
    bench_finish_row(run, r);

    r = row(run, "forward", "tda-decode", "tdacl", "f32", "decode");
    r->B = 4, r->Tq = 1, r->Tk = 512;
    set_samples(r, (const double[]){10, 11, 12}, 3);
    r->value = 4 / 11e-3;
    snprintf(r->unit, sizeof r->unit, "tokens/s");
}

static void assert_row_equal(const bench_row *a, const bench_row *b)
{
    assert_string_equal(a->suite, b->suite);
    assert_string_equal(a->name, b->name);
    assert_string_equal(a->impl, b->impl);
    assert_string_equal(a->variant, b->variant);
    assert_string_equal(a->device, b->device);
    assert_int_equal(a->device_index, b->device_index);
    assert_string_equal(a->dtype, b->dtype);
    assert_string_equal(a->path, b->path);
    const int64_t ia[] = {a->B, a->H, a->Tq, a->Tk, a->M, a->N, a->K, a->d, a->dv};
    const int64_t ib[] = {b->B, b->H, b->Tq, b->Tk, b->M, b->N, b->K, b->d, b->dv};
    for (int i = 0; i < 9; i++) assert_int_equal(ia[i], ib[i]);
    assert_string_equal(a->params, b->params);
    assert_string_equal(a->params_source, b->params_source);
    assert_string_equal(a->params_origin, b->params_origin);
    assert_int_equal(a->s.n, b->s.n);
    for (int i = 0; i < a->s.n; i++) assert_json_double(a->s.ms[i], b->s.ms[i]);
    const double da[] = {a->beta, a->s.min, a->s.median, a->s.max, a->s.mean, a->s.spread, a->flops, a->bytes,
                         a->tflops, a->gbs, a->pct_peak_flops, a->pct_peak_bw, a->bound_ms, a->sparsity, a->value};
    const double db[] = {b->beta, b->s.min, b->s.median, b->s.max, b->s.mean, b->s.spread, b->flops, b->bytes,
                         b->tflops, b->gbs, b->pct_peak_flops, b->pct_peak_bw, b->bound_ms, b->sparsity, b->value};
    for (int i = 0; i < 15; i++) {
        if (fabs(da[i] - db[i]) > 2.0 * DBL_EPSILON * fabs(db[i]))
            fail_msg("row %s/%s: double field #%d is %.17g, wanted %.17g", a->suite, a->name, i, da[i], db[i]);
    }
    assert_int_equal(a->s.noisy, b->s.noisy);
    assert_string_equal(a->unit, b->unit);
    assert_string_equal(a->note, b->note);
}

static char *path_in_dir(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void test_json_roundtrip(void **state)
{
    (void)state;
    bench_run run, back;
    make_run(&run);
    const char *json = path_in_dir("run.json");
    assert_int_equal(bench_write_json(&run, json), 0);
    assert_int_equal(bench_load_json(json, &back), 0);

    assert_int_equal(back.ndevices, 1);
    const bench_device *d = &back.devices[0];
    assert_string_equal(d->info.name, run.devices[0].info.name);
    assert_string_equal(d->info.arch, "cpu-test");
    assert_int_equal(d->info.type, TDACL_DEVICE_CPU);
    assert_true(d->have_peak);
    assert_json_double(d->peak.fp32_gflops, run.devices[0].peak.fp32_gflops);
    assert_json_double(d->peak.bandwidth_gbs, run.devices[0].peak.bandwidth_gbs);
    assert_json_double(d->peak.launch_us, run.devices[0].peak.launch_us);
    assert_json_double(d->peak.enqueue_us, run.devices[0].peak.enqueue_us);
    assert_json_double(d->peak.enqueue_arg_us, run.devices[0].peak.enqueue_arg_us);
    assert_int_equal(back.nrows, run.nrows);
    for (int i = 0; i < run.nrows; i++) assert_row_equal(&back.rows[i], &run.rows[i]);

    /* the schema tag is what bench_load_json keys on; a file without it is refused */
    size_t n;
    char *text = (char *)tu_read_file(json, &n);
    assert_non_null(text);
    assert_contains(text, "\"schema\":\t\"" BENCH_SCHEMA "\"");
    char *other = strstr(text, BENCH_SCHEMA);
    other[strlen(BENCH_SCHEMA) - 1] = '9';
    tu_write_file(path_in_dir("other.json"), text, n);
    free(text);
    bench_run bad;
    assert_int_not_equal(bench_load_json(path_in_dir("other.json"), &bad), 0);
    assert_int_equal(bad.nrows, 0);
    bench_free(&run);
    bench_free(&back);
}

/* Splits one CSV line in place (double-quoted fields may hold commas). */
static int csv_split(char *line, char **field, int max)
{
    int n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            field[n++] = ++p;
            p = strchr(p, '"');
            assert_non_null(p);
            *p++ = 0;
        } else {
            field[n++] = p;
            p += strcspn(p, ",\n");
        }
        if (*p != ',') break;
        *p++ = 0;
    }
    *p = 0;
    return n;
}

static void test_csv(void **state)
{
    (void)state;
    static const char *cols[] = {"device", "suite", "name", "impl", "dtype", "path", "B", "H", "Tq", "Tk", "d",
                                 "dv", "M", "N", "K", "beta", "median_ms", "min_ms", "max_ms", "spread", "noisy",
                                 "tflops", "gbs", "pct_peak_flops", "pct_peak_bw", "bound_ms", "sparsity", "value",
                                 "unit", "params", "params_source", "variant"};
    enum { NC = sizeof cols / sizeof *cols };
    bench_run run;
    make_run(&run);
    const char *csv = path_in_dir("run.csv");
    assert_int_equal(bench_write_csv(&run, csv), 0);
    size_t n;
    char *text = (char *)tu_read_file(csv, &n);
    assert_non_null(text);
    char *f[NC + 4], *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    assert_int_equal(csv_split(line, f, NC + 4), NC);
    for (int i = 0; i < NC; i++) assert_string_equal(f[i], cols[i]);

    int lines = 0;
    for (; (line = strtok_r(NULL, "\n", &save)); lines++) {
        assert_int_equal(csv_split(line, f, NC + 4), NC);
        const bench_row *r = &run.rows[lines];
        assert_string_equal(f[0], r->device);
        assert_string_equal(f[1], r->suite);
        assert_string_equal(f[2], r->name);
        assert_string_equal(f[3], r->impl);
        assert_string_equal(f[29], r->params);
        assert_string_equal(f[31], r->variant);
        if (lines != 3) continue;
        /* the tra prefill row, value by value at the precision the writer prints */
        assert_string_equal(f[4], "f32");
        assert_string_equal(f[5], "prefill");
        const long long ints[] = {2, 3, 256, 256, 64, 64, 0, 0, 0};
        for (int i = 0; i < 9; i++) assert_int_equal(strtoll(f[6 + i], NULL, 10), ints[i]);
        assert_near(strtod(f[15], NULL), 0.5, 0);
        assert_near(strtod(f[16], NULL), r->s.median, 6e-7);
        assert_near(strtod(f[17], NULL), r->s.min, 6e-7);
        assert_near(strtod(f[18], NULL), r->s.max, 6e-7);
        assert_near(strtod(f[19], NULL), r->s.spread, 6e-5);
        assert_int_equal(atoi(f[20]), r->s.noisy);
        assert_near(strtod(f[21], NULL), r->tflops, 6e-5);
        assert_near(strtod(f[22], NULL), r->gbs, 6e-3);
        assert_near(strtod(f[23], NULL), r->pct_peak_flops, 6e-3);
        assert_near(strtod(f[24], NULL), r->pct_peak_bw, 6e-3);
        assert_near(strtod(f[26], NULL), 0.987654321, 6e-9);
        assert_string_equal(f[29], "TQ=32,TK=64,VEC=4");
        assert_string_equal(f[30], "database");
    }
    assert_int_equal(lines, run.nrows);
    free(text);
    bench_free(&run);
}

/* ---- FLOPs (docs/spec.md section 5) ---- */

/* Counted pair by pair: query i sits at position offset + i and sees keys
 * 0..min(offset + i, Tk - 1).  Each visible pair costs one q.k product per view (2*d
 * FLOPs) and one weight x v product (2*dv FLOPs): softmax/tra/rela do 2 products,
 * tda/diff_softmax 3 (two views share the weight x v product). */
static double spec_flops(int kind, int64_t bh, int64_t tq, int64_t tk, int64_t offset, int64_t d, int64_t dv)
{
    int views = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX ? 2 : 1;
    double pairs = 0;
    for (int64_t i = 0; i < tq; i++) pairs += (double)(offset + i + 1 < tk ? offset + i + 1 : tk);
    return (double)bh * pairs * (views * 2.0 * (double)d + 2.0 * (double)dv);
}

static void test_flops(void **state)
{
    (void)state;
    static const tdacl_attention_kind kinds[] = {TDACL_ATTN_SOFTMAX, TDACL_ATTN_RELA, TDACL_ATTN_TRA, TDACL_ATTN_TDA,
                                                 TDACL_ATTN_DIFF_SOFTMAX};
    for (int k = 0; k < 5; k++) {
        tdacl_attention_kind kind = kinds[k];
        int two = kind == TDACL_ATTN_TDA || kind == TDACL_ATTN_DIFF_SOFTMAX;
        /* by hand: T = 4, d = dv = 1 has 10 visible pairs, 2 FLOPs per product */
        assert_near(tdacl_attention_flops(kind, 1, 4, 4, 0, 1, 1), two ? 60 : 40, 0);
        /* SPEC's closed form for causal prefill: each product costs 2*d*T*(T+1)/2 */
        double product = 2.0 * 64 * 1024 * 1025 / 2;
        double prefill = tdacl_attention_flops(kind, 32, 1024, 1024, 0, 64, 64);
        assert_near(prefill, 32 * (two ? 3 : 2) * product, 0);
        assert_near(prefill, spec_flops(kind, 32, 1024, 1024, 0, 64, 64), 0);
        /* offset -1 means Tk - Tq: prefill and KV-cache decode of one or a few tokens */
        assert_near(tdacl_attention_flops(kind, 32, 1024, 1024, -1, 64, 64), prefill, 0);
        assert_near(tdacl_attention_flops(kind, 128, 1, 4096, -1, 64, 64), spec_flops(kind, 128, 1, 4096, 4095, 64, 64), 0);
        assert_near(tdacl_attention_flops(kind, 1, 1, 4096, -1, 64, 64), 4096.0 * (two ? 6 : 4) * 64, 0);
        assert_near(tdacl_attention_flops(kind, 6, 16, 100, -1, 64, 64), spec_flops(kind, 6, 16, 100, 84, 64, 64), 0);
        /* a chunk whose last rows do not reach Tk (rows see 3, 4, 5, 6 keys) and d != dv:
         * the second view adds a q.k product (d), not a weight x v product (dv) */
        assert_near(tdacl_attention_flops(kind, 1, 4, 10, 2, 64, 32), 18.0 * ((two ? 2 : 1) * 128 + 64), 0);
        assert_near(tdacl_attention_flops(kind, 3, 4, 10, 2, 64, 32), spec_flops(kind, 3, 4, 10, 2, 64, 32), 0);
    }
    /* two-view kinds cost 3/2 of one view when d == dv (3 products against 2), not twice */
    assert_near(tdacl_attention_flops(TDACL_ATTN_TDA, 4, 512, 512, 0, 64, 64) /
                    tdacl_attention_flops(TDACL_ATTN_TRA, 4, 512, 512, 0, 64, 64), 1.5, 1e-15);
}

/* ---- sample statistics ---- */

static tdacl_samples *summarise(const double *ms, int n, double noisy_spread)
{
    static tdacl_samples s;
    memset(&s, 0, sizeof s);
    s.n = n;
    memcpy(s.ms, ms, (size_t)n * sizeof *ms);
    tdacl__samples_summarise(&s, noisy_spread);
    for (int i = 0; i < n; i++) assert_true(s.ms[i] == ms[i]); /* samples keep their order */
    return &s;
}

static void test_statistics(void **state)
{
    (void)state;
    /* odd count: median is the middle sample; spread = (p90 - p10) / median with linear
     * interpolation: p90 = 3 + 0.8 * 2, p10 = 1 + 0.2 * 2 */
    tdacl_samples *s = summarise((const double[]){5, 1, 3}, 3, 0.10);
    assert_near(s->min, 1, 0); assert_near(s->max, 5, 0); assert_near(s->median, 3, 0); assert_near(s->mean, 3, 0);
    assert_near(s->spread, (4.6 - 1.4) / 3, 1e-12);
    assert_true(s->noisy);
    /* even count: median between the middle two; p90 = 3.7, p10 = 1.3 */
    s = summarise((const double[]){4, 1, 3, 2}, 4, 0.10);
    assert_near(s->median, 2.5, 0); assert_near(s->mean, 2.5, 0); assert_near(s->min, 1, 0); assert_near(s->max, 4, 0);
    assert_near(s->spread, 2.4 / 2.5, 1e-12);
    /* a tight set is not noisy: sorted .98 .99 .99 1 1 1 1 1.01 1.01 1.02, p90 = 1.011,
     * p10 = 0.989 */
    static const double tight[] = {1.00, 1.01, 0.99, 1.02, 1.00, 0.98, 1.01, 1.00, 0.99, 1.00};
    s = summarise(tight, 10, 0.10);
    assert_near(s->median, 1.0, 1e-12); assert_near(s->min, 0.98, 0); assert_near(s->max, 1.02, 0);
    assert_near(s->spread, 0.022, 1e-12);
    assert_false(s->noisy);
    assert_true(summarise(tight, 10, 0.02)->noisy); /* the threshold is the caller's */
    /* two slow outliers in ten: the median ignores them, the spread flags them */
    s = summarise((const double[]){1, 1, 2, 1, 1, 1, 1, 2, 1, 1}, 10, 0.10);
    assert_near(s->median, 1, 0); assert_near(s->mean, 1.2, 1e-12); assert_near(s->spread, 1.0, 1e-12);
    assert_true(s->noisy);
    s = summarise((const double[]){0.25}, 1, 0.10);
    assert_near(s->min, 0.25, 0); assert_near(s->median, 0.25, 0); assert_near(s->max, 0.25, 0);
    assert_near(s->spread, 0, 0); assert_false(s->noisy);
    s = summarise((const double[]){7}, 0, 0.10);
    assert_near(s->median, 0, 0); assert_false(s->noisy);
}

typedef struct fake_timer {
    int calls;
    double step; /* the k-th call takes k * step ms */
} fake_timer;

static tdacl_status fake_run(void *user, double *ms)
{
    fake_timer *t = user;
    *ms = ++t->calls * t->step;
    return t->calls > 50 ? TDACL_ERR_OPENCL : TDACL_SUCCESS;
}

/* tdacl__measure: warm-up runs are not sampled; sampling stops once both min_samples
 * and min_ms are reached, or at max_samples; a failing run stops it. */
static void test_measure(void **state)
{
    (void)state;
    static tdacl_samples s;
    tdacl_measure_opts o;
    tdacl__measure_opts_init(&o);
    o.warmup = 2, o.min_samples = 5, o.min_ms = 0;
    fake_timer t = {0, 1.0};
    assert_int_equal(tdacl__measure(fake_run, &t, &o, &s), TDACL_SUCCESS);
    assert_int_equal(t.calls, 7);
    assert_int_equal(s.n, 5);
    assert_near(s.ms[0], 3, 0); assert_near(s.ms[4], 7, 0); assert_near(s.median, 5, 0);
    o.min_ms = 100; /* samples 3, 4, ... ms: 3 + ... + 12 = 75, + 13 = 88, + 14 = 102 */
    t = (fake_timer){0, 1.0};
    assert_int_equal(tdacl__measure(fake_run, &t, &o, &s), TDACL_SUCCESS);
    assert_int_equal(s.n, 12);
    o.max_samples = 4;
    t = (fake_timer){0, 1.0};
    assert_int_equal(tdacl__measure(fake_run, &t, &o, &s), TDACL_SUCCESS);
    assert_int_equal(s.n, 4);
    o.max_samples = 200, o.min_ms = 1e9;
    t = (fake_timer){0, 1e-3};
    assert_int_equal(tdacl__measure(fake_run, &t, &o, &s), TDACL_ERR_OPENCL);
}

/* ---- --compare ---- */

static char *compare_text(const bench_run *now, const bench_run *old, int *regressions)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    *regressions = bench_compare(now, old, f);
    fclose(f);
    return text;
}

/* The line of `text` that starts with `name` and contains `also`; "" if none. */
static const char *line_of(const char *text, const char *name, const char *also)
{
    static char line[512];
    for (const char *p = text; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {
        size_t n = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), p);
        if (!strncmp(line, name, strlen(name)) && line[strlen(name)] == ' ' && strstr(line, also)) return line;
    }
    return "";
}

static void scale_median(bench_run *run, const char *suite, const char *name, double factor)
{
    for (int i = 0; i < run->nrows; i++) {
        bench_row *r = &run->rows[i];
        if (strcmp(r->suite, suite) || strcmp(r->name, name)) continue;
        r->s.median *= factor;
        r->s.spread = 0.001; /* tight: the 5% floor is the band */
        return;
    }
    fail_msg("no %s row %s", suite, name);
}

static void check_compare(const bench_run *now, const bench_run *old)
{
    int regressions;
    char *text = compare_text(now, old, &regressions);
    assert_int_equal(regressions, 1);
    assert_contains(line_of(text, "tra", "256"), "REGRESSION");
    assert_contains(line_of(text, "tra", "256"), "2.000");
    assert_contains(line_of(text, "softmax", "tdacl"), "1.020");
    assert_null(strstr(line_of(text, "softmax", "tdacl"), "REGRESSION"));
    assert_contains(line_of(text, "sgemm", "256x2304x768"), "0.500 faster");
    assert_contains(line_of(text, "tda-decode", "decode"), "1.500");
    assert_null(strstr(line_of(text, "tda-decode", "decode"), "REGRESSION"));
    /* another implementation of a row (an anchor) is shown, never counted */
    assert_contains(line_of(text, "softmax", "pytorch-sdpa"), "4.080");
    assert_null(strstr(line_of(text, "softmax", "pytorch-sdpa"), "REGRESSION"));
    assert_contains(text, "6 row(s) compared, 1 regression(s)");
    free(text);
}

static void test_compare(void **state)
{
    (void)state;
    bench_run old, now;
    make_run(&old);
    make_run(&now);
    for (int i = 0; i < old.nrows; i++) old.rows[i].s.spread = 0.001;
    int regressions;
    char *text = compare_text(&now, &old, &regressions);
    assert_int_equal(regressions, 0);
    assert_contains(text, "5 row(s) compared, 0 regression(s)"); /* every row but the peaks */
    free(text);

    scale_median(&now, "attention", "tra", 2.0);      /* planted 2x slowdown */
    scale_median(&now, "attention", "softmax", 1.02); /* a 2% wiggle */
    scale_median(&now, "gemm", "sgemm", 0.5);         /* 2x faster */
    /* a 1.5x slowdown inside a 30% noise band is not beyond 2 x the band */
    scale_median(&now, "forward", "tda-decode", 1.5);
    now.rows[now.nrows - 1].s.spread = 0.3;
    bench_row *anchor = bench_add_row(&old);
    *anchor = old.rows[5]; /* the softmax decode row, at a quarter of the time elsewhere */
    snprintf(anchor->impl, sizeof anchor->impl, "pytorch-sdpa");
    snprintf(anchor->device, sizeof anchor->device, "another GPU");
    anchor->s.median = old.rows[5].s.median / 4;
    check_compare(&now, &old);

    /* the same through JSON files, as --compare reads them */
    bench_run now2, old2;
    assert_int_equal(bench_write_json(&now, path_in_dir("now.json")), 0);
    assert_int_equal(bench_write_json(&old, path_in_dir("old.json")), 0);
    assert_int_equal(bench_load_json(path_in_dir("now.json"), &now2), 0);
    assert_int_equal(bench_load_json(path_in_dir("old.json"), &old2), 0);
    check_compare(&now2, &old2);
    bench_free(&now), bench_free(&old), bench_free(&now2), bench_free(&old2);
}

/* ---- options ---- */

/* Runs bench_parse_args with stdout and stderr captured into err (both). */
static int parse(bench_options *o, char *err, size_t n, int argc, const char **argv)
{
    char *log = path_in_dir("parse.log");
    fflush(stdout), fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    FILE *f = fopen(log, "w");
    assert_non_null(f);
    dup2(fileno(f), 1), dup2(fileno(f), 2);
    int rc = bench_parse_args(argc, (char **)argv, o);
    fflush(stdout), fflush(stderr);
    dup2(saved_out, 1), dup2(saved_err, 2);
    close(saved_out), close(saved_err);
    fclose(f);
    size_t len;
    char *text = (char *)tu_read_file(log, &len);
    assert_non_null(text);
    snprintf(err, n, "%s", text);
    free(text);
    return rc;
}
#define PARSE(o, err, ...) \
    parse(o, err, sizeof err, (int)(sizeof((const char *[]){"tdacl-bench", __VA_ARGS__}) / sizeof(char *)), \
          (const char *[]){"tdacl-bench", __VA_ARGS__})

static void test_options(void **state)
{
    (void)state;
    static bench_options o;
    char err[2048];
    const char *none[] = {"tdacl-bench"};
    assert_int_equal(parse(&o, err, sizeof err, 1, none), 0);
    assert_int_equal(o.nsuites, 1); assert_string_equal(o.suites[0], "all");
    assert_int_equal(o.B, 4); assert_int_equal(o.H, 8); assert_int_equal(o.d, 64); assert_true(o.decode);
    assert_int_equal(o.measure.min_samples, 10); assert_near(o.measure.min_ms, 100, 0);

    assert_int_equal(PARSE(&o, err, "--suite", "peak,gemm", "--kinds", "tra,diff_softmax", "--T", "128,4096",
                           "--dtype", "bf16,f32", "--beta", "1,0.25", "--quick", "--no-decode", "--min-ms", "5",
                           "--min-samples", "3", "--json", "a.json", "--compare", "b.json", "--d", "128"), 0);
    assert_int_equal(o.nsuites, 2); assert_string_equal(o.suites[1], "gemm");
    assert_int_equal(o.nkinds, 2); assert_string_equal(o.kinds[1], "diff_softmax");
    assert_int_equal(o.nT, 2); assert_int_equal(o.T[1], 4096);
    assert_int_equal(o.ndtypes, 2); assert_string_equal(o.dtypes[0], "bf16");
    assert_int_equal(o.nbetas, 2); assert_near(o.betas[1], 0.25, 0);
    assert_true(o.quick); assert_false(o.decode); assert_int_equal(o.d, 128);
    assert_near(o.measure.min_ms, 5, 0); assert_int_equal(o.measure.min_samples, 3);
    assert_string_equal(o.json, "a.json"); assert_string_equal(o.compare, "b.json");

    /* tf32 attention rows, decode steps of several query rows, decode rows only */
    assert_int_equal(PARSE(&o, err, "--dtype", "tf32,f32", "--decode-Tq", "8", "--no-prefill"), 0);
    assert_int_equal(o.ndtypes, 2); assert_string_equal(o.dtypes[0], "tf32");
    assert_int_equal(o.decode_Tq, 8); assert_true(o.no_prefill);
    assert_false(o.serving);
    assert_int_equal(PARSE(&o, err, "--quick", "--serving"), 0); /* --quick's serving rows back */
    assert_true(o.quick); assert_true(o.serving);
    assert_int_equal(PARSE(&o, err, "--decode-Tq", "17"), 2);
    assert_contains(err, "bad value '17' for --decode-Tq");

    assert_int_equal(PARSE(&o, err, "--help"), 1);
    assert_contains(err, "usage: tdacl-bench");
    assert_int_equal(PARSE(&o, err, "--suite", "peak,bogus"), 2);
    assert_contains(err, "unknown suite 'bogus'");
    assert_int_equal(PARSE(&o, err, "--kinds", "tra,nope"), 2);
    assert_contains(err, "unknown attention kind 'nope'");
    assert_int_equal(PARSE(&o, err, "--dtype", "f64"), 2);
    assert_contains(err, "unknown dtype 'f64'");
    assert_int_equal(PARSE(&o, err, "--T", "0"), 2);
    assert_contains(err, "bad value '0' for --T");
    assert_int_equal(PARSE(&o, err, "--d", "512"), 2);
    assert_contains(err, "bad value '512' for --d");
    assert_int_equal(PARSE(&o, err, "--beta", "1,x"), 2);
    assert_contains(err, "bad value '1,x' for --beta");
    assert_int_equal(PARSE(&o, err, "--quick", "--json"), 2);
    assert_contains(err, "--json needs a value");
    assert_int_equal(PARSE(&o, err, "--fast"), 2);
    assert_contains(err, "unknown option '--fast'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_roundtrip),
        cmocka_unit_test(test_csv),
        cmocka_unit_test(test_flops),
        cmocka_unit_test(test_statistics),
        cmocka_unit_test(test_measure),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
