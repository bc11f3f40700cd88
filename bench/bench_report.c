/* Reports of tdacl-bench: aligned table, JSON (schema in docs/bench-json.md), CSV,
 * gnuplot plots and the comparison of two runs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"
#include "bench.h"

static void shape_text(const bench_row *r, char *buf, size_t n)
{
    if (!strcmp(r->suite, "attention"))
        snprintf(buf, n, "B%lld H%lld Tq%lld Tk%lld d%d", (long long)r->B, (long long)r->H, (long long)r->Tq,
                 (long long)r->Tk, r->d);
    else if (!strcmp(r->suite, "forward"))
        snprintf(buf, n, "B%lld T%lld ctx%lld", (long long)r->B, (long long)r->Tq, (long long)r->Tk);
    else if (!strcmp(r->suite, "gemm"))
        snprintf(buf, n, "%lldx%lldx%lld", (long long)r->M, (long long)r->N, (long long)r->K);
    else
        buf[0] = 0;
}

void bench_print_device(const bench_run *run, int i, FILE *f)
{
    const bench_device *d = &run->devices[i];
    fprintf(f, "device [%d] %s (%s)", i, d->info.name, d->info.arch);
    if (d->have_peak)
        fprintf(f, ": FP32 %.1f GFLOP/s, %.1f GB/s, launch %.1f us", d->peak.fp32_gflops, d->peak.bandwidth_gbs,
                d->peak.launch_us);
    if (d->have_peak && d->peak.enqueue_us > 0)
        fprintf(f, ", enqueue %.2f us + %.2f us a pointer argument", d->peak.enqueue_us, d->peak.enqueue_arg_us);
    if (d->have_peak && d->peak.mma_bf16_gflops > 0) fprintf(f, ", mma.sync bf16 %.1f GFLOP/s", d->peak.mma_bf16_gflops);
    if (d->have_peak && d->peak.mma_tf32_gflops > 0) fprintf(f, ", tf32 %.1f GFLOP/s", d->peak.mma_tf32_gflops);
    fprintf(f, "\n");
}

void bench_print_header(FILE *f)
{
    fprintf(f, "%-3s %-9s %-13s %-7s %-7s %-34s %5s %10s %10s %10s %8s %6s %8s %8s %8s  %s\n", "dev", "suite", "name",
            "dtype", "path", "shape", "beta", "median_ms", "min_ms", "max_ms", "TFLOP/s", "%peak", "GB/s", "sparsity",
            "bound_ms", "params");
}

void bench_print_row(const bench_row *r, FILE *f)
{
    char shape[64], beta[16] = "-", sp[16] = "-", bound[16] = "-";
    shape_text(r, shape, sizeof shape);
    if (!strcmp(r->suite, "peak")) {
        fprintf(f, "%-3d %-9s %-13s %.1f %s\n", r->device_index, r->suite, r->name, r->value, r->unit);
        return;
    }
    if (r->beta >= 0) snprintf(beta, sizeof beta, "%g", r->beta);
    if (r->alpha >= 0) snprintf(beta, sizeof beta, "a=%g", r->alpha);
    if (r->sparsity >= 0) snprintf(sp, sizeof sp, "%.6f", r->sparsity);
    if (r->bound_ms > 0) snprintf(bound, sizeof bound, "%.4f", r->bound_ms);
    fprintf(f, "%-3d %-9s %-13s %-7s %-7s %-34s %5s %10.4f %10.4f %10.4f %8.2f %6.1f %8.1f %8s %8s  %s%s%s [%s]%s%s%s\n",
            r->device_index, r->suite, r->name, r->dtype, r->path[0] ? r->path : "-", shape, beta, r->s.median,
            r->s.min, r->s.max, r->tflops, r->pct_peak_flops, r->gbs, sp, bound, r->variant, r->variant[0] ? " " : "",
            r->params, r->params_source[0] ? r->params_source : r->impl, r->s.noisy ? " NOISY" : "",
            r->note[0] ? " ; " : "", r->note);
}

void bench_print_table(const bench_run *run, FILE *f)
{
    for (int i = 0; i < run->ndevices; i++) bench_print_device(run, i, f);
    bench_print_header(f);
    for (int i = 0; i < run->nrows; i++) bench_print_row(&run->rows[i], f);
}

/* ---- JSON ---- */

static cJSON *device_json(const bench_device *d)
{
    const tdacl_device_info *i = &d->info;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "index", i->index);
    cJSON_AddStringToObject(j, "platform", i->platform_name);
    cJSON_AddStringToObject(j, "platform_version", i->platform_version);
    cJSON_AddStringToObject(j, "name", i->name);
    cJSON_AddStringToObject(j, "vendor", i->vendor);
    cJSON_AddNumberToObject(j, "vendor_id", i->vendor_id);
    cJSON_AddStringToObject(j, "driver_version", i->driver_version);
    cJSON_AddStringToObject(j, "device_version", i->device_version);
    cJSON_AddStringToObject(j, "opencl_c_version", i->opencl_c_version);
    cJSON_AddStringToObject(j, "type", i->type == TDACL_DEVICE_GPU ? "gpu" : i->type == TDACL_DEVICE_CPU ? "cpu" : "other");
    cJSON_AddStringToObject(j, "class", i->arch);
    cJSON_AddNumberToObject(j, "compute_units", i->compute_units);
    cJSON_AddNumberToObject(j, "clock_mhz", i->clock_mhz);
    cJSON_AddNumberToObject(j, "global_mem_bytes", (double)i->global_mem_bytes);
    cJSON_AddNumberToObject(j, "local_mem_bytes", (double)i->local_mem_bytes);
    cJSON_AddNumberToObject(j, "max_work_group_size", (double)i->max_work_group_size);
    cJSON_AddBoolToObject(j, "fp16", i->has_fp16);
    cJSON_AddBoolToObject(j, "fp64", i->has_fp64);
    cJSON_AddBoolToObject(j, "subgroups", i->has_subgroups);
    if (i->nv_cc_major) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", i->nv_cc_major, i->nv_cc_minor);
        cJSON_AddStringToObject(j, "compute_capability", cc);
    }
    cJSON_AddStringToObject(j, "extensions", i->extensions);
    if (d->have_peak) {
        cJSON *p = cJSON_AddObjectToObject(j, "peak");
        cJSON_AddNumberToObject(p, "fp32_gflops", d->peak.fp32_gflops);
        cJSON_AddNumberToObject(p, "bandwidth_gbs", d->peak.bandwidth_gbs);
        cJSON_AddNumberToObject(p, "launch_us", d->peak.launch_us);
        if (d->peak.enqueue_us > 0) cJSON_AddNumberToObject(p, "enqueue_us", d->peak.enqueue_us);
        if (d->peak.enqueue_us > 0) cJSON_AddNumberToObject(p, "enqueue_arg_us", d->peak.enqueue_arg_us);
        if (d->peak.mma_bf16_gflops > 0) cJSON_AddNumberToObject(p, "mma_bf16_gflops", d->peak.mma_bf16_gflops);
        if (d->peak.mma_tf32_gflops > 0) cJSON_AddNumberToObject(p, "mma_tf32_gflops", d->peak.mma_tf32_gflops);
    }
    return j;
}

static cJSON *row_json(const bench_row *r)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "suite", r->suite);
    cJSON_AddStringToObject(j, "name", r->name);
    cJSON_AddStringToObject(j, "impl", r->impl);
    if (r->variant[0]) cJSON_AddStringToObject(j, "variant", r->variant);
    cJSON_AddStringToObject(j, "device", r->device);
    cJSON_AddNumberToObject(j, "device_index", r->device_index);
    if (!strcmp(r->suite, "peak")) {
        cJSON_AddNumberToObject(j, "value", r->value);
        cJSON_AddStringToObject(j, "unit", r->unit);
        return j;
    }
    cJSON_AddStringToObject(j, "dtype", r->dtype);
    if (r->path[0]) cJSON_AddStringToObject(j, "path", r->path);
    cJSON *shape = cJSON_AddObjectToObject(j, "shape");
#define NUM(o, k, v) cJSON_AddNumberToObject(o, k, (double)(v))
    if (!strcmp(r->suite, "attention") || !strcmp(r->suite, "forward")) {
        NUM(shape, "B", r->B), NUM(shape, "H", r->H), NUM(shape, "Tq", r->Tq), NUM(shape, "Tk", r->Tk);
        NUM(shape, "d", r->d), NUM(shape, "dv", r->dv);
    } else {
        NUM(shape, "M", r->M), NUM(shape, "N", r->N), NUM(shape, "K", r->K);
    }
    if (r->beta >= 0) NUM(j, "beta", r->beta);
    if (r->alpha >= 0) NUM(j, "alpha", r->alpha);
    if (r->params[0]) {
        cJSON *t = cJSON_AddObjectToObject(j, "tuning");
        cJSON_AddStringToObject(t, "params", r->params);
        cJSON_AddStringToObject(t, "source", r->params_source);
        cJSON_AddStringToObject(t, "origin", r->params_origin);
    }
    cJSON *s = cJSON_AddObjectToObject(j, "time_ms");
    NUM(s, "min", r->s.min), NUM(s, "median", r->s.median), NUM(s, "max", r->s.max), NUM(s, "mean", r->s.mean);
    NUM(s, "spread", r->s.spread);
    cJSON_AddBoolToObject(s, "noisy", r->s.noisy);
    cJSON *samples = cJSON_AddArrayToObject(s, "samples");
    for (int i = 0; i < r->s.n; i++) cJSON_AddItemToArray(samples, cJSON_CreateNumber(r->s.ms[i]));
    NUM(j, "flops", r->flops), NUM(j, "bytes", r->bytes), NUM(j, "tflops", r->tflops), NUM(j, "gbs", r->gbs);
    NUM(j, "pct_peak_flops", r->pct_peak_flops), NUM(j, "pct_peak_bw", r->pct_peak_bw);
    if (r->bound_ms > 0) NUM(j, "bound_ms", r->bound_ms);
    if (r->sparsity >= 0) NUM(j, "sparsity", r->sparsity);
    if (r->unit[0]) NUM(j, "value", r->value), cJSON_AddStringToObject(j, "unit", r->unit);
    if (r->note[0]) cJSON_AddStringToObject(j, "note", r->note);
#undef NUM
    return j;
}

int bench_write_json(const bench_run *run, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "schema", BENCH_SCHEMA);
    cJSON_AddStringToObject(root, "created", run->created);
    cJSON *lib = cJSON_AddObjectToObject(root, "library");
    cJSON_AddStringToObject(lib, "version", tdacl_version());
    cJSON_AddStringToObject(lib, "git", tdacl_git_revision());
    /* false while measuring (the file is rewritten after each row) and after an interruption */
    cJSON_AddBoolToObject(root, "complete", run->complete);
    if (run->interrupted) cJSON_AddBoolToObject(root, "interrupted", 1);
    cJSON *opt = cJSON_AddObjectToObject(root, "options");
    cJSON_AddBoolToObject(opt, "quick", run->opt.quick);
    cJSON_AddNumberToObject(opt, "min_samples", run->opt.measure.min_samples);
    cJSON_AddNumberToObject(opt, "min_ms", run->opt.measure.min_ms);
    cJSON *devs = cJSON_AddArrayToObject(root, "devices");
    for (int i = 0; i < run->ndevices; i++) cJSON_AddItemToArray(devs, device_json(&run->devices[i]));
    cJSON *rows = cJSON_AddArrayToObject(root, "rows");
    for (int i = 0; i < run->nrows; i++) cJSON_AddItemToArray(rows, row_json(&run->rows[i]));
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    /* replaced atomically: the file is rewritten after every row, and a reader (or a kill
     * between rows) sees the previous complete file or the new one */
    tdacl_atomic_file af;
    FILE *f = text ? tdacl__atomic_open(&af, path, 0644) : NULL;
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    int err = f ? tdacl__atomic_commit(&af, ok) : errno;
    free(text);
    if (!f || err) fprintf(stderr, "tdacl-bench: cannot write %s: %s\n", path, strerror(f ? err : errno ? errno : ENOMEM));
    return !f || err;
}

static double num(const cJSON *o, const char *k, double def)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : def;
}

static void str(const cJSON *o, const char *k, char *buf, size_t n)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    snprintf(buf, n, "%s", cJSON_IsString(x) ? x->valuestring : "");
}

int bench_load_json(const char *path, bench_run *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tdacl-bench: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = n > 0 && n < (1L << 30) ? malloc((size_t)n + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!text || got != (size_t)n) {
        free(text);
        fprintf(stderr, "tdacl-bench: cannot read %s\n", path);
        return 1;
    }
    text[n] = 0;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *schema = root ? cJSON_GetObjectItemCaseSensitive(root, "schema") : NULL;
    if (!root || !cJSON_IsString(schema) || strcmp(schema->valuestring, BENCH_SCHEMA)) {
        fprintf(stderr, "tdacl-bench: %s is not a %s JSON file\n", path, BENCH_SCHEMA);
        cJSON_Delete(root);
        return 1;
    }
    str(root, "created", out->created, sizeof out->created);
    /* files written before the flag existed were written only when complete */
    const cJSON *complete = cJSON_GetObjectItemCaseSensitive(root, "complete");
    out->complete = !complete || cJSON_IsTrue(complete);
    out->interrupted = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "interrupted"));
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(root, "devices"), *d;
    cJSON_ArrayForEach(d, devs)
    {
        if (out->ndevices == BENCH_MAX_DEVICES) break;
        bench_device *bd = &out->devices[out->ndevices++];
        str(d, "name", bd->info.name, sizeof bd->info.name);
        str(d, "class", bd->info.arch, sizeof bd->info.arch);
        /* the rest of the capability record, so --load A --json B keeps it */
        str(d, "platform", bd->info.platform_name, sizeof bd->info.platform_name);
        str(d, "platform_version", bd->info.platform_version, sizeof bd->info.platform_version);
        str(d, "vendor", bd->info.vendor, sizeof bd->info.vendor);
        str(d, "driver_version", bd->info.driver_version, sizeof bd->info.driver_version);
        str(d, "device_version", bd->info.device_version, sizeof bd->info.device_version);
        str(d, "opencl_c_version", bd->info.opencl_c_version, sizeof bd->info.opencl_c_version);
        str(d, "extensions", bd->info.extensions, sizeof bd->info.extensions);
        bd->info.vendor_id = (uint32_t)num(d, "vendor_id", 0);
        bd->info.compute_units = (uint32_t)num(d, "compute_units", 0);
        bd->info.clock_mhz = (uint32_t)num(d, "clock_mhz", 0);
        bd->info.global_mem_bytes = (uint64_t)num(d, "global_mem_bytes", 0);
        bd->info.local_mem_bytes = (uint64_t)num(d, "local_mem_bytes", 0);
        bd->info.max_work_group_size = (size_t)num(d, "max_work_group_size", 0);
        bd->info.has_fp16 = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "fp16"));
        bd->info.has_fp64 = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "fp64"));
        bd->info.has_subgroups = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(d, "subgroups"));
        char cc[16] = "";
        str(d, "compute_capability", cc, sizeof cc);
        if (cc[0]) sscanf(cc, "%d.%d", &bd->info.nv_cc_major, &bd->info.nv_cc_minor);
        bd->info.index = (int)num(d, "index", 0);
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(d, "type");
        bd->info.type = cJSON_IsString(type) && !strcmp(type->valuestring, "gpu") ? TDACL_DEVICE_GPU : TDACL_DEVICE_CPU;
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(d, "peak");
        if (pk) {
            bd->have_peak = 1;
            bd->peak.fp32_gflops = num(pk, "fp32_gflops", 0);
            bd->peak.bandwidth_gbs = num(pk, "bandwidth_gbs", 0);
            bd->peak.launch_us = num(pk, "launch_us", 0);
            bd->peak.enqueue_us = num(pk, "enqueue_us", 0); /* absent before 2026-11-27 */
            bd->peak.enqueue_arg_us = num(pk, "enqueue_arg_us", 0);
            bd->peak.mma_bf16_gflops = num(pk, "mma_bf16_gflops", 0);
            bd->peak.mma_tf32_gflops = num(pk, "mma_tf32_gflops", 0);
        }
    }
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(root, "rows"), *r;
    cJSON_ArrayForEach(r, rows)
    {
        bench_row *x = bench_add_row(out);
        if (!x) break;
        str(r, "suite", x->suite, sizeof x->suite);
        str(r, "name", x->name, sizeof x->name);
        str(r, "impl", x->impl, sizeof x->impl);
        str(r, "variant", x->variant, sizeof x->variant);
        str(r, "device", x->device, sizeof x->device);
        str(r, "dtype", x->dtype, sizeof x->dtype);
        str(r, "path", x->path, sizeof x->path);
        x->device_index = (int)num(r, "device_index", 0);
        x->value = num(r, "value", 0);
        str(r, "unit", x->unit, sizeof x->unit);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "shape");
        x->B = (int64_t)num(s, "B", 0), x->H = (int64_t)num(s, "H", 0), x->Tq = (int64_t)num(s, "Tq", 0);
        x->Tk = (int64_t)num(s, "Tk", 0), x->d = (int)num(s, "d", 0), x->dv = (int)num(s, "dv", 0);
        x->M = (int64_t)num(s, "M", 0), x->N = (int64_t)num(s, "N", 0), x->K = (int64_t)num(s, "K", 0);
        x->beta = num(r, "beta", -1);
        x->alpha = num(r, "alpha", -1);
        x->sparsity = num(r, "sparsity", -1);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(r, "time_ms");
        x->s.min = num(t, "min", 0), x->s.median = num(t, "median", 0), x->s.max = num(t, "max", 0);
        x->s.mean = num(t, "mean", 0), x->s.spread = num(t, "spread", 0);
        const cJSON *samples = cJSON_GetObjectItemCaseSensitive(t, "samples"), *v;
        cJSON_ArrayForEach(v, samples)
        {
            if (x->s.n < TDACL_MAX_SAMPLES && cJSON_IsNumber(v)) x->s.ms[x->s.n++] = v->valuedouble;
        }
        x->flops = num(r, "flops", 0), x->tflops = num(r, "tflops", 0), x->gbs = num(r, "gbs", 0);
        x->bytes = num(r, "bytes", 0), x->pct_peak_flops = num(r, "pct_peak_flops", 0);
        x->pct_peak_bw = num(r, "pct_peak_bw", 0), x->bound_ms = num(r, "bound_ms", 0);
        x->s.noisy = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "noisy"));
        const cJSON *tu = cJSON_GetObjectItemCaseSensitive(r, "tuning");
        if (tu) {
            str(tu, "params", x->params, sizeof x->params);
            str(tu, "source", x->params_source, sizeof x->params_source);
            str(tu, "origin", x->params_origin, sizeof x->params_origin);
        }
        str(r, "note", x->note, sizeof x->note);
    }
    cJSON_Delete(root);
    return 0;
}

/* ---- CSV ---- */

/* RFC 4180 field: quoted, a quote inside doubled */
static void csv_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int bench_write_csv(const bench_run *run, const char *path)
{
    tdacl_atomic_file af;
    FILE *f = tdacl__atomic_open(&af, path, 0644);
    if (!f) {
        fprintf(stderr, "tdacl-bench: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(f, "device,suite,name,impl,dtype,path,B,H,Tq,Tk,d,dv,M,N,K,beta,median_ms,min_ms,max_ms,spread,noisy,"
               "tflops,gbs,pct_peak_flops,pct_peak_bw,bound_ms,sparsity,value,unit,params,params_source,variant\n");
    for (int i = 0; i < run->nrows; i++) {
        const bench_row *r = &run->rows[i];
        csv_quoted(f, r->device);
        fprintf(f, ",%s,%s,%s,%s,%s,%lld,%lld,%lld,%lld,%d,%d,%lld,%lld,%lld,%g,%.6f,%.6f,%.6f,%.4f,%d,"
                   "%.4f,%.2f,%.2f,%.2f,%.6f,%.8f,%g,%s,",
                r->suite, r->name, r->impl, r->dtype, r->path, (long long)r->B, (long long)r->H,
                (long long)r->Tq, (long long)r->Tk, r->d, r->dv, (long long)r->M, (long long)r->N, (long long)r->K,
                r->beta, r->s.median, r->s.min, r->s.max, r->s.spread, r->s.noisy, r->tflops, r->gbs,
                r->pct_peak_flops, r->pct_peak_bw, r->bound_ms, r->sparsity, r->value, r->unit);
        csv_quoted(f, r->params);
        fprintf(f, ",%s,%s\n", r->params_source, r->variant);
    }
    int err = tdacl__atomic_commit(&af, !ferror(f));
    if (err) fprintf(stderr, "tdacl-bench: cannot write %s: %s\n", path, strerror(err));
    return err != 0;
}

/* ---- compare ---- */

int bench_same_key(const bench_row *a, const bench_row *b, int loose)
{
    if (strcmp(a->suite, b->suite) || strcmp(a->name, b->name) || strcmp(a->dtype, b->dtype) ||
        strcmp(a->path, b->path))
        return 0;
    if (!loose && (strcmp(a->impl, b->impl) || strcmp(a->device, b->device))) return 0;
    /* a forward row is keyed by batch, new tokens and context (the model is in the name) */
    if (!strcmp(a->suite, "forward")) return a->B == b->B && a->Tq == b->Tq && a->Tk == b->Tk;
    if (a->B != b->B || a->H != b->H || a->Tq != b->Tq || a->Tk != b->Tk || a->d != b->d) return 0;
    if (a->M != b->M || a->N != b->N || a->K != b->K) return 0;
    if (fabs(a->beta - b->beta) > 1e-9) return 0;
    if (a->alpha >= 0 && b->alpha >= 0 && fabs(a->alpha - b->alpha) > 1e-9) return 0; /* an anchor may not say */
    return 1;
}

int bench_compare(const bench_run *now, const bench_run *old, FILE *f)
{
    int regressions = 0, matched = 0;
    fprintf(f, "\ncompare: new / old median time (>1 is slower); regression = beyond max(5%%, 2 x noise band)\n");
    fprintf(f, "%-13s %-7s %-7s %-34s %5s %-16s %10s %10s %7s\n", "name", "dtype", "path", "shape", "beta", "old impl",
            "new_ms", "old_ms", "ratio");
    for (int i = 0; i < now->nrows; i++) {
        const bench_row *n = &now->rows[i];
        if (!strcmp(n->suite, "peak")) continue;
        for (int pass = 0; pass < 2; pass++) {
            /* exact matches first (same impl and device), then other implementations of the
             * same row on any device (anchors) */
            for (int k = 0; k < old->nrows; k++) {
                const bench_row *o = &old->rows[k];
                int exact = bench_same_key(n, o, 0);
                if (pass == 0 ? !exact : (exact || !bench_same_key(n, o, 1) || !strcmp(o->impl, n->impl))) continue;
                if (o->s.median <= 0) continue;
                double ratio = n->s.median / o->s.median;
                double band = fmax(0.05, 2.0 * fmax(n->s.spread, o->s.spread));
                const char *mark = "";
                if (pass == 0 && ratio > 1.0 + band) mark = "REGRESSION", regressions++;
                else if (pass == 0 && ratio < 1.0 / (1.0 + band)) mark = "faster";
                char shape[64], beta[16] = "-";
                shape_text(n, shape, sizeof shape);
                if (n->beta >= 0) snprintf(beta, sizeof beta, "%g", n->beta);
                if (n->alpha >= 0) snprintf(beta, sizeof beta, "a=%g", n->alpha);
                fprintf(f, "%-13s %-7s %-7s %-34s %5s %-16s %10.4f %10.4f %7.3f %s\n", n->name, n->dtype,
                        n->path[0] ? n->path : "-", shape, beta, o->impl, n->s.median, o->s.median, ratio, mark);
                matched++;
            }
        }
    }
    fprintf(f, "%d row(s) compared, %d regression(s)\n", matched, regressions);
    return regressions;
}
