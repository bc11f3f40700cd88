/* tdacl make-model: a checkpoint with seeded random weights for a config.json, for tests,
 * benchmarks and demos without downloading one.  The result is opened again before the
 * command reports success, so what it writes is known to load. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "cli/cli.h"
#include "base/fileio.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tdacl make-model --config config.json --out DIR [--seed S] [--dtype f32|bf16|f16] [--force]\n"
            "Writes DIR/config.json (a copy) and DIR/model.safetensors with every tensor the config\n"
            "requires: N(0, 0.02) weights, unit norm gains, zero biases, beta from the config,\n"
            "lambda 0.5, tied lm_head.  The same seed gives the same bytes.  Default seed 0, f32.\n"
            "Example configs: examples/models/*.json.\n");
}

/* Whole text file (NUL-terminated); NULL with a message on failure. */
static char *slurp(const char *path)
{
    FILE *f = tdacl__fopen_regular(path);
    if (!f) {
        fprintf(stderr, "tdacl make-model: cannot open --config %s: %s\n", path, tdacl__file_error(errno));
        return NULL;
    }
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        if (cap >= (64u << 20)) { /* no config is this large */
            free(buf);
            buf = NULL;
            fprintf(stderr, "tdacl make-model: %s is too large for a config\n", path);
            break;
        }
        char *g = realloc(buf, cap * 2);
        if (!g) free(buf);
        buf = g;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (buf && err) {
        fprintf(stderr, "tdacl make-model: cannot read %s\n", path);
        free(buf);
        return NULL;
    }
    if (buf) buf[n] = 0;
    return buf;
}

int cmd_make_model(int argc, char **argv)
{
    const char *config = NULL, *out = NULL;
    unsigned long long seed = 0;
    tdacl_dtype dtype = TDACL_F32;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(o, "--force")) {
            force = 1;
            continue;
        }
        if (!cli_known(o, "--config --out --seed --dtype")) {
            fprintf(stderr, "tdacl make-model: unknown option '%s' (see tdacl make-model --help)\n", o);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tdacl make-model: option %s needs a value\n", o);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(o, "--config")) config = val;
        else if (!strcmp(o, "--out")) out = val;
        else if (!strcmp(o, "--seed")) {
            long long s;
            if (cli_long(val, &s) || s < 0) {
                fprintf(stderr, "tdacl make-model: --seed must be a non-negative integer, got '%s'\n", val);
                return 2;
            }
            seed = (unsigned long long)s;
        } else if (!strcmp(o, "--dtype")) {
            const int dt = tdacl__dtype_from_name(val);
            if (dt >= 0) dtype = (tdacl_dtype)dt;
            else {
                fprintf(stderr, "tdacl make-model: unknown --dtype '%s' (f32, bf16 or f16)\n", val);
                return 2;
            }
        } else {
            fprintf(stderr, "tdacl make-model: unknown option %s\n", o);
            usage(stderr);
            return 2;
        }
    }
    if (!config || !out) {
        fprintf(stderr, "tdacl make-model: --config and --out are required\n");
        usage(stderr);
        return 2;
    }
    /* an existing checkpoint is replaced only on request */
    char probe[TDACL_PATH_LIMIT + 32];
    snprintf(probe, sizeof probe, "%s/config.json", out);
    if (!force && access(probe, F_OK) == 0) {
        fprintf(stderr, "tdacl make-model: %s already holds a checkpoint; --force replaces it\n", out);
        return 2;
    }
    char *text = slurp(config);
    if (!text) return 1;
    /* checked under its own name first, so a bad file is blamed, not the copy in --out */
    tdacl_model_config parsed;
    tdacl_status st = tdacl__config_parse(text, strlen(text), config, &parsed);
    if (!st) st = tdacl__checkpoint_write_random(out, text, seed, dtype);
    free(text);
    if (st) return cli_report(NULL, st);
    tdacl_checkpoint *c = NULL;
    if ((st = tdacl__checkpoint_open(out, &c))) return cli_report(NULL, st);
    const tdacl_model_config *cfg = tdacl__checkpoint_config(c);
    printf("wrote %s: %d layers, %d heads, n_embd %d, vocab %d, %llu parameters (%s), seed %llu\n", out, cfg->n_layer,
           cfg->n_head, cfg->n_embd, cfg->vocab_size, (unsigned long long)tdacl__checkpoint_parameters(c),
           tdacl_dtype_name(dtype), seed);
    tdacl__checkpoint_close(c);
    return 0;
}
