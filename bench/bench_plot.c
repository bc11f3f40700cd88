/* tdacl-bench --plot: prefill attention latency against T through gnuplot.  One panel per
 * (device, dtype); colour by kind (anchors get their own), point shape by beta, min-max bars;
 * the --compare run dashed with hollow points.  The format follows the extension. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static const char *formats[3] = {".png", ".svg", ".pdf"};

int bench_plot_format(const char *path)
{
    const char *ext = strrchr(path, '.');
    if (strchr(path, '\'')) {
        fprintf(stderr, "tdacl-bench: --plot %s: the file name must not contain a single quote\n", path);
        return -1;
    }
    for (int i = 0; ext && i < 3; i++)
        if (!strcmp(ext, formats[i])) return i;
    fprintf(stderr, "tdacl-bench: --plot %s: unknown format '%s' (the extension picks it: .png, .svg or .pdf)\n", path,
            ext ? ext : "");
    return -1;
}

static int is_prefill(const bench_row *r) { return !strcmp(r->suite, "attention") && !strcmp(r->path, "prefill"); }

/* the implementation shown in a label: our variants are all "tdacl" */
static const char *anchor_of(const bench_row *r) { return strncmp(r->impl, "tdacl", 5) ? r->impl : ""; }

typedef struct panel {
    char device[128], dtype[8];
    const bench_row *first;
} panel;

typedef struct series {
    char name[32], impl[32];
    double beta;
    int old;
} series;

/* Distinct colours (colour-blind-safe first eight, then five more): kinds in table order,
 * then anchors in order of appearance. */
static const char *palette[] = {"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9",
                                "#000000", "#B8860B", "#8C564B", "#7F7F7F", "#17BECF", "#BCBD22", "#1F3A93"};
#define NCOLOURS ((int)(sizeof palette / sizeof palette[0]))

static int colour_of(const char *name, const char *impl, char keys[][64], int *nkeys)
{
    char key[64];
    snprintf(key, sizeof key, "%s/%s", name, impl);
    int kind = -1;
    for (int k = 0; !impl[0] && tdacl_attention_kind_name((tdacl_attention_kind)k); k++)
        if (!strcmp(tdacl_attention_kind_name((tdacl_attention_kind)k), name)) kind = k;
    if (kind >= 0) return kind % NCOLOURS;
    int nkinds = 0;
    while (tdacl_attention_kind_name((tdacl_attention_kind)nkinds)) nkinds++;
    for (int i = 0; i < *nkeys; i++)
        if (!strcmp(keys[i], key)) return (nkinds + i) % NCOLOURS;
    if (*nkeys < 64) snprintf(keys[(*nkeys)++], 64, "%s", key);
    return (nkinds + *nkeys - 1) % NCOLOURS;
}

/* filled point types of gnuplot's cairo/svg terminals; the hollow one is one less */
static int point_of(double beta)
{
    if (beta < 0 || fabs(beta - 1) < 1e-9) return 7; /* circle */
    if (fabs(beta - 0.5) < 1e-9) return 9;           /* triangle */
    if (fabs(beta - 0.25) < 1e-9) return 5;          /* square */
    if (beta == 0) return 13;                        /* diamond */
    return 11;                                       /* inverted triangle */
}

static void tick_label(int64_t T, char *buf, size_t n)
{
    if (T >= 1024 && T % 1024 == 0) snprintf(buf, n, "%lldk", (long long)(T / 1024));
    else snprintf(buf, n, "%lld", (long long)T);
}

static int in_panel(const bench_row *r, const panel *p, int any_device)
{
    return is_prefill(r) && !strcmp(r->dtype, p->dtype) && (any_device || !strcmp(r->device, p->device));
}

static int same_series(const bench_row *r, const series *s)
{
    return !strcmp(r->name, s->name) && !strcmp(anchor_of(r), s->impl) && fabs(r->beta - s->beta) < 1e-9;
}

/* Writes one panel: title, ticks at the measured T, and a data block plus plot clause per
 * series.  Old rows match the panel's device when the old run measured it, else any device. */
static void write_panel(FILE *f, const bench_run *run, const bench_run *old, const panel *p, int pi,
                        char keys[][64], int *nkeys)
{
    int old_any = 1;
    for (int i = 0; old && i < old->nrows; i++)
        if (in_panel(&old->rows[i], p, 0)) old_any = 0;
    /* x ticks: every T measured in the panel */
    int64_t Ts[64] = {0};
    int nT = 0;
    for (int pass = 0; pass < 2; pass++) {
        const bench_run *src = pass ? old : run;
        for (int i = 0; src && i < src->nrows; i++) {
            const bench_row *r = &src->rows[i];
            if (!in_panel(r, p, pass ? old_any : 0)) continue;
            int seen = 0;
            for (int k = 0; k < nT; k++) seen |= Ts[k] == r->Tk;
            if (!seen && nT < 64) Ts[nT++] = r->Tk;
        }
    }
    fprintf(f, "set title \"%s  ·  %s  ·  B%lld H%lld d%d causal prefill\"\nset xtics (", p->device, p->dtype,
            (long long)p->first->B, (long long)p->first->H, p->first->d);
    for (int k = 0; k < nT; k++) {
        char lab[16];
        tick_label(Ts[k], lab, sizeof lab);
        fprintf(f, "%s\"%s\" %lld", k ? ", " : "", lab, (long long)Ts[k]);
    }
    fprintf(f, ")\n");
    int64_t lo = nT ? Ts[0] : 1, hi = nT ? Ts[0] : 1;
    for (int k = 1; k < nT; k++) lo = Ts[k] < lo ? Ts[k] : lo, hi = Ts[k] > hi ? Ts[k] : hi;
    fprintf(f, "set xrange [%g:%g]\n", (double)lo / 1.25, (double)hi * 1.25);
    series list[128];
    int ns = 0;
    for (int pass = 0; pass < 2; pass++) {
        const bench_run *src = pass ? old : run;
        for (int i = 0; src && i < src->nrows && ns < 128; i++) {
            const bench_row *r = &src->rows[i];
            if (!in_panel(r, p, pass ? old_any : 0) || r->s.median <= 0) continue;
            int found = 0;
            for (int k = 0; k < ns; k++) found |= list[k].old == pass && same_series(r, &list[k]);
            if (found) continue;
            series *s = &list[ns++];
            snprintf(s->name, sizeof s->name, "%s", r->name);
            snprintf(s->impl, sizeof s->impl, "%s", anchor_of(r));
            s->beta = r->beta;
            s->old = pass;
        }
    }
    for (int k = 0; k < ns; k++) {
        const bench_run *src = list[k].old ? old : run;
        fprintf(f, "$p%ds%d << EOD\n", pi, k);
        for (int i = 0; i < src->nrows; i++) {
            const bench_row *r = &src->rows[i];
            if (in_panel(r, p, list[k].old ? old_any : 0) && r->s.median > 0 && same_series(r, &list[k]))
                fprintf(f, "%lld %g %g %g\n", (long long)r->Tk, r->s.median, r->s.min > 0 ? r->s.min : r->s.median,
                        r->s.max > 0 ? r->s.max : r->s.median);
        }
        fprintf(f, "EOD\n");
    }
    fprintf(f, "plot ");
    for (int k = 0; k < ns; k++) {
        const series *s = &list[k];
        char label[96];
        /* an anchor is named by its implementation; an old run of ours is "old" */
        snprintf(label, sizeof label, "%s%s%s%s%s", s->old && !s->impl[0] ? "old " : "", s->name, s->impl[0] ? " (" : "", s->impl,
                 s->impl[0] ? ")" : "");
        if (s->beta >= 0) snprintf(label + strlen(label), sizeof label - strlen(label), " β=%g", s->beta);
        int pt = point_of(s->beta) - (s->old ? 1 : 0);
        fprintf(f, "%s$p%ds%d using 1:2:3:4 with yerrorlines lc rgb \"%s\" pt %d ps 0.9 lw %s dt %d title \"%s\"",
                k ? ", \\\n     " : "", pi, k, palette[colour_of(s->name, s->impl, keys, nkeys)], pt,
                s->old ? "1" : "1.6", s->old ? 2 : 1, label);
    }
    fprintf(f, "\n");
}

int bench_plot(const bench_run *run, const bench_run *old, const char *path)
{
    int format = bench_plot_format(path);
    if (format < 0) return 1;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "tdacl-bench: gnuplot is not installed, so %s was not drawn; install it "
                        "(apt-get install --no-install-recommends gnuplot-nox fonts-liberation) or plot the --csv "
                        "output (median_ms against Tk)\n", path);
        return 1;
    }
    panel panels[16];
    int np = 0;
    for (int i = 0; i < run->nrows; i++) {
        const bench_row *r = &run->rows[i];
        if (!is_prefill(r) || r->s.median <= 0) continue;
        int found = 0;
        for (int k = 0; k < np; k++) found |= !strcmp(panels[k].device, r->device) && !strcmp(panels[k].dtype, r->dtype);
        if (found || np == 16) continue;
        snprintf(panels[np].device, sizeof panels[np].device, "%s", r->device);
        snprintf(panels[np].dtype, sizeof panels[np].dtype, "%s", r->dtype);
        panels[np++].first = r;
    }
    if (!np) {
        fprintf(stderr, "tdacl-bench: nothing to plot in %s (no prefill attention rows)\n", path);
        return 1;
    }
    char script[] = "/tmp/tdacl-plot-XXXXXX";
    int fd = mkstemp(script);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        fprintf(stderr, "tdacl-bench: cannot write a gnuplot script: %s\n", strerror(errno));
        if (fd >= 0) close(fd), unlink(script);
        return 1;
    }
    int cols = np > 1 ? 2 : 1, rows = (np + cols - 1) / cols;
    static const char *terminals[3] = {"pngcairo", "svg dynamic", "pdfcairo"};
    if (format == 2) fprintf(f, "set terminal pdfcairo size %.1fin,%.1fin font \"Liberation Sans,9\"\n", cols * 9.0, rows * 6.5);
    else fprintf(f, "set terminal %s size %d,%d font \"Liberation Sans,%d\"\n", terminals[format], cols * 900, rows * 650,
                 format == 0 ? 11 : 12);
    fprintf(f, "set encoding utf8\nset termoption noenhanced\nset output '%s'\n"
               "set logscale xy\nset grid xtics ytics mytics lc rgb \"#dddddd\"\nset border 3\nset tics nomirror\n"
               "set xlabel \"T (tokens)\"\nset ylabel \"median latency (ms); bars: min to max\"\n"
               "set key below horizontal maxrows 4 samplen 2.5 width 1\nset bars small\n",
            path);
    if (np > 1) fprintf(f, "set multiplot layout %d,%d\n", rows, cols);
    char keys[64][64];
    int nkeys = 0;
    for (int pi = 0; pi < np; pi++) write_panel(f, run, old, &panels[pi], pi, keys, &nkeys);
    if (np > 1) fprintf(f, "unset multiplot\n");
    int ok = !ferror(f);
    fclose(f);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", script);
    int rc = !ok || system(cmd) != 0;
    if (rc) fprintf(stderr, "tdacl-bench: gnuplot failed drawing %s (script kept in %s)\n", path, script);
    else unlink(script);
    return rc;
}
