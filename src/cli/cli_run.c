/* tdacl forward / tdacl generate: run a checkpoint. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model.h"
#include "npy.h"
#include "tuning.h"

/* "15,42,7" -> tokens (malloc'ed). */
static int parse_tokens(const char *s, int32_t **out, int *n)
{
    int cap = 16, k = 0;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return -1;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > 0x7fffffff || (*end && *end != ',')) {
            free(t);
            return -1;
        }
        if (k == cap) {
            int32_t *g = realloc(t, (size_t)(cap *= 2) * sizeof *t);
            if (!g) {
                free(t);
                return -1;
            }
            t = g;
        }
        t[k++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    *out = t;
    *n = k;
    return k > 0 ? 0 : -1;
}

typedef struct run_opts {
    const char *model, *tokens, *prompt, *out, *device;
    tdacl_dtype dtype;
    long long max_new, top_k, seed, context;
    double temperature;
} run_opts;

static int parse(int argc, char **argv, run_opts *o, const char *cmd)
{
    memset(o, 0, sizeof *o);
    o->dtype = TDACL_F32;
    o->max_new = 32;
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) {
            fprintf(stderr, "tdacl %s: option %s needs a value\n", cmd, a);
            return 2;
        }
        const char *v = argv[++i];
        int bad = 0;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--prompt")) o->prompt = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--dtype")) {
            int dt = tdacl__dtype_from_name(v);
            bad = dt != TDACL_F32 && dt != TDACL_BF16;
            o->dtype = (tdacl_dtype)dt;
        } else if (!strcmp(a, "--max-new")) bad = cli_long(v, &o->max_new) || o->max_new < 0;
        else if (!strcmp(a, "--top-k")) bad = cli_long(v, &o->top_k) || o->top_k < 0;
        else if (!strcmp(a, "--seed")) bad = cli_long(v, &o->seed) || o->seed < 0;
        else if (!strcmp(a, "--context")) bad = cli_long(v, &o->context) || o->context < 0;
        else if (!strcmp(a, "--temperature")) bad = cli_double(v, &o->temperature) || o->temperature < 0;
        else {
            fprintf(stderr, "tdacl %s: unknown option '%s'\n", cmd, a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "tdacl %s: bad value '%s' for %s\n", cmd, v, a);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "tdacl %s: --model DIR is required\n", cmd);
        return 2;
    }
    return 0;
}

static int open_model(const run_opts *o, int context, tdacl_context **ctx, tdacl_model **m)
{
    if (cli_open(o->device, ctx)) return 1;
    tdacl_model_desc desc;
    tdacl_model_desc_init(&desc);
    desc.path = o->model;
    desc.weight_dtype = o->dtype;
    desc.max_context = context;
    tdacl_status st = tdacl_model_load(*ctx, &desc, m);
    if (st) return cli_report(*ctx, st);
    return 0;
}

int cmd_forward(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--help")) {
        printf("usage: tdacl forward --model DIR --tokens 15,42,7,... --out logits.npy [--dtype f32|bf16] [--device SEL]\n"
               "Writes float32 logits [T, vocab] for every position of one sequence.\n");
        return 0;
    }
    run_opts o;
    int rc = parse(argc, argv, &o, "forward");
    if (rc) return rc;
    if (!o.tokens || !o.out) {
        fprintf(stderr, "tdacl forward: --tokens and --out are required\n");
        return 2;
    }
    int32_t *tokens;
    int n;
    if (parse_tokens(o.tokens, &tokens, &n)) {
        fprintf(stderr, "tdacl forward: --tokens must be a comma-separated list of token ids\n");
        return 2;
    }
    tdacl_context *ctx = NULL;
    tdacl_model *m = NULL;
    float *logits = NULL;
    rc = 1;
    if (open_model(&o, 0, &ctx, &m)) goto done;
    tdacl_model_info info;
    tdacl_model_get_info(m, &info);
    tdacl_status st = tdacl_model_prefill(m, 1, n, tokens);
    if (st) {
        cli_report(ctx, st);
        goto done;
    }
    int64_t count = (int64_t)n * info.vocab_size;
    logits = malloc((size_t)count * sizeof *logits);
    if (!logits) {
        fprintf(stderr, "tdacl forward: out of memory\n");
        goto done;
    }
    if ((st = tdacl_model_logits(m, logits, count, NULL))) {
        cli_report(ctx, st);
        goto done;
    }
    int64_t shape[2] = {n, info.vocab_size};
    if ((st = tdacl__npy_write(o.out, 2, shape, logits))) {
        cli_report(NULL, st);
        goto done;
    }
    printf("logits [%d, %d] written to %s\n", n, info.vocab_size, o.out);
    rc = 0;
done:
    free(tokens);
    free(logits);
    tdacl_model_destroy(m);
    tdacl_context_destroy(ctx);
    return rc;
}

int cmd_generate(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--help")) {
        printf("usage: tdacl generate --model DIR (--prompt TEXT | --tokens ids) [--max-new N]\n"
               "                      [--temperature T] [--top-k K] [--seed S] [--dtype f32|bf16]\n"
               "Byte-level text for vocabulary-256 models, token ids otherwise.  Prints prefill time,\n"
               "decode tokens/s and per-token latency on stderr.\n");
        return 0;
    }
    run_opts o;
    int rc = parse(argc, argv, &o, "generate");
    if (rc) return rc;
    if (!!o.prompt == !!o.tokens) {
        fprintf(stderr, "tdacl generate: give exactly one of --prompt and --tokens\n");
        return 2;
    }
    int32_t *tokens = NULL;
    int n = 0;
    tdacl_context *ctx = NULL;
    tdacl_model *m = NULL;
    float *logits = NULL;
    rc = 1;
    if (o.tokens && parse_tokens(o.tokens, &tokens, &n)) {
        fprintf(stderr, "tdacl generate: --tokens must be a comma-separated list of token ids\n");
        return 2;
    }
    if (open_model(&o, 0, &ctx, &m)) goto done;
    tdacl_model_info info;
    tdacl_model_get_info(m, &info);
    const int bytes = info.vocab_size == 256;
    if (o.prompt) {
        if (!bytes) {
            fprintf(stderr, "tdacl generate: --prompt needs a byte-level (vocab 256) model; use --tokens\n");
            goto done;
        }
        n = (int)strlen(o.prompt);
        tokens = malloc((size_t)(n ? n : 1) * sizeof *tokens);
        if (!tokens || n == 0) {
            fprintf(stderr, "tdacl generate: empty prompt\n");
            goto done;
        }
        for (int i = 0; i < n; i++) tokens[i] = (unsigned char)o.prompt[i];
    }
    if (n + o.max_new > info.max_context) {
        fprintf(stderr, "tdacl generate: prompt (%d) + --max-new (%lld) exceed the context of %d\n", n, o.max_new,
                info.max_context);
        goto done;
    }
    logits = malloc((size_t)info.vocab_size * sizeof *logits);
    if (!logits) goto done;
    double t0 = tdacl__now();
    tdacl_status st = tdacl__model_prefill(m, 1, n, tokens, 1);
    if (!st) st = tdacl_model_logits(m, logits, info.vocab_size, NULL);
    double prefill_ms = (tdacl__now() - t0) * 1e3;
    if (st) {
        cli_report(ctx, st);
        goto done;
    }
    if (bytes) fwrite(o.prompt, 1, (size_t)n, stdout);
    uint64_t seed = (uint64_t)o.seed;
    double t1 = tdacl__now();
    for (long long i = 0; i < o.max_new; i++) {
        int32_t next;
        if ((st = tdacl_sample(logits, info.vocab_size, (float)o.temperature, (int)o.top_k, &seed, &next))) break;
        if (bytes) putchar(next);
        else printf("%s%d", i || n ? "," : "", next);
        fflush(stdout);
        if (i + 1 == o.max_new) break;
        if ((st = tdacl_model_decode(m, 1, &next)) || (st = tdacl_model_logits(m, logits, info.vocab_size, NULL)))
            break;
    }
    double decode_s = tdacl__now() - t1;
    printf("\n");
    if (st) {
        cli_report(ctx, st);
        goto done;
    }
    long long steps = o.max_new > 1 ? o.max_new - 1 : 0;
    fprintf(stderr, "prefill %d tokens: %.2f ms; decode %lld tokens: %.1f tokens/s, %.3f ms/token\n", n, prefill_ms,
            steps, steps && decode_s > 0 ? (double)steps / decode_s : 0.0, steps ? decode_s * 1e3 / (double)steps : 0.0);
    rc = 0;
done:
    free(tokens);
    free(logits);
    tdacl_model_destroy(m);
    tdacl_context_destroy(ctx);
    return rc;
}
