/* tdacl forward / tdacl generate: run a checkpoint. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "model/model.h"
#include "tools/npy.h"
#include "runtime/tuning.h"

typedef struct run_opts {
    const char *model, *tokens, *prompt, *out, *device, *text, *ids, *thresholds;
    tdacl_dtype dtype, activations;
    int sdc, vmc; /* -1: the config's */
    long long max_new, top_k, seed, context;
    double temperature;
} run_opts;

/* The options each command takes; any other is an error, not silently ignored. */
enum {
    OPT_MODEL = 1 << 0, OPT_TOKENS = 1 << 1, OPT_PROMPT = 1 << 2, OPT_OUT = 1 << 3, OPT_DEVICE = 1 << 4,
    OPT_DTYPE = 1 << 5, OPT_MAX_NEW = 1 << 6, OPT_TOP_K = 1 << 7, OPT_SEED = 1 << 8, OPT_CONTEXT = 1 << 9,
    OPT_TEMPERATURE = 1 << 10, OPT_TEXT = 1 << 11, OPT_IDS = 1 << 12, OPT_ACTIVATIONS = 1 << 13,
    OPT_THRESHOLDS = 1 << 14, OPT_SDC = 1 << 15, OPT_VMC = 1 << 16
};
#define TOPK_OPTS (OPT_THRESHOLDS | OPT_SDC | OPT_VMC)
#define FORWARD_OPTS (OPT_MODEL | OPT_TOKENS | OPT_OUT | OPT_DEVICE | OPT_DTYPE | OPT_ACTIVATIONS | OPT_CONTEXT | TOPK_OPTS)
#define GENERATE_OPTS (OPT_MODEL | OPT_TOKENS | OPT_PROMPT | OPT_DEVICE | OPT_DTYPE | OPT_ACTIVATIONS | OPT_MAX_NEW | \
                       OPT_TOP_K | OPT_SEED | OPT_CONTEXT | OPT_TEMPERATURE | TOPK_OPTS)
#define TOKENIZE_OPTS (OPT_MODEL | OPT_TEXT | OPT_IDS)

static const struct { const char *name; int bit; } run_options[] = {
    {"--model", OPT_MODEL}, {"--tokens", OPT_TOKENS}, {"--prompt", OPT_PROMPT}, {"--out", OPT_OUT},
    {"--device", OPT_DEVICE}, {"--dtype", OPT_DTYPE}, {"--max-new", OPT_MAX_NEW}, {"--top-k", OPT_TOP_K},
    {"--seed", OPT_SEED}, {"--context", OPT_CONTEXT}, {"--temperature", OPT_TEMPERATURE},
    {"--text", OPT_TEXT}, {"--ids", OPT_IDS}, {"--activations", OPT_ACTIVATIONS},
    {"--thresholds", OPT_THRESHOLDS}, {"--sdc", OPT_SDC}, {"--vmc", OPT_VMC},
};

/* Every value is checked here, before any model is loaded or any kernel runs. */
static int parse(int argc, char **argv, run_opts *o, const char *cmd, int allowed)
{
    memset(o, 0, sizeof *o);
    o->dtype = o->activations = TDACL_F32;
    o->max_new = 32;
    o->seed = 1;
    o->sdc = o->vmc = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int bit = 0;
        for (size_t k = 0; k < sizeof run_options / sizeof run_options[0]; k++)
            if (!strcmp(a, run_options[k].name)) bit = run_options[k].bit;
        if (!bit) {
            fprintf(stderr, "tdacl %s: unknown option '%s' (see tdacl %s --help)\n", cmd, a, cmd);
            return 2;
        }
        if (!(bit & allowed)) {
            fprintf(stderr, "tdacl %s: option %s does not apply to this command\n", cmd, a);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "tdacl %s: option %s needs a value\n", cmd, a);
            return 2;
        }
        const char *v = argv[++i];
        const char *why = NULL;
        switch (bit) {
        case OPT_MODEL: o->model = v; break;
        case OPT_TOKENS: o->tokens = v; break;
        case OPT_PROMPT: o->prompt = v; break;
        case OPT_OUT: o->out = v; break;
        case OPT_TEXT: o->text = v; break;
        case OPT_IDS: o->ids = v; break;
        case OPT_THRESHOLDS: o->thresholds = v; break;
        case OPT_SDC: {
            static const char *const modes[] = {"none", "exact", "exp_threshold", "offline"};
            o->sdc = -1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, modes[k])) o->sdc = k;
            if (o->sdc < 0) why = "expected none, exact, exp_threshold or offline";
            break;
        }
        case OPT_VMC:
            if (strcmp(v, "0") && strcmp(v, "1")) why = "expected 0 or 1";
            else o->vmc = v[0] == '1';
            break;
        case OPT_DEVICE: o->device = v; break;
        case OPT_DTYPE:
        case OPT_ACTIVATIONS: {
            int dt = tdacl__dtype_from_name(v);
            if (dt != TDACL_F32 && dt != TDACL_BF16) why = "expected f32 or bf16";
            else *(bit == OPT_DTYPE ? &o->dtype : &o->activations) = (tdacl_dtype)dt;
            break;
        }
        case OPT_MAX_NEW:
            if (cli_long(v, &o->max_new) || o->max_new < 0 || o->max_new > INT_MAX) why = "expected an integer 0..2147483647";
            break;
        case OPT_TOP_K:
            if (cli_long(v, &o->top_k) || o->top_k < 0 || o->top_k > INT_MAX)
                why = "expected an integer 0..2147483647 (0 = no top-k cut)";
            break;
        case OPT_SEED:
            if (cli_long(v, &o->seed) || o->seed < 0) why = "expected a non-negative integer";
            break;
        case OPT_CONTEXT:
            if (cli_long(v, &o->context) || o->context < 1 || o->context > INT_MAX) why = "expected an integer 1..2147483647";
            break;
        case OPT_TEMPERATURE:
            /* the sampler computes in float: a value that overflows float is refused too */
            if (cli_double(v, &o->temperature) || o->temperature < 0 || !isfinite((float)o->temperature))
                why = "expected a finite number >= 0 (0 = greedy)";
            break;
        }
        if (why) {
            fprintf(stderr, "tdacl %s: bad value '%s' for %s: %s\n", cmd, v, a, why);
            return 2;
        }
    }
    if (!o->model) {
        fprintf(stderr, "tdacl %s: --model DIR is required\n", cmd);
        return 2;
    }
    return 0;
}

/* Loads the model with a KV cache of `need` positions (what this run uses) or of --context
 * when given, so a model with a huge n_positions costs only what the run needs. */
static int open_model(const run_opts *o, long long need, const char *cmd, tdacl_context **ctx, tdacl_model **m)
{
    if (o->context && o->context < need) {
        fprintf(stderr, "tdacl %s: --context %lld is smaller than the %lld positions this run needs\n", cmd,
                o->context, need);
        return 2;
    }
    long long context = o->context ? o->context : need;
    if (context > INT_MAX) {
        fprintf(stderr, "tdacl %s: this run needs %lld positions; at most %d are possible\n", cmd, context, INT_MAX);
        return 2;
    }
    if (cli_open(o->device, ctx)) return 1;
    tdacl_model_desc desc;
    tdacl_model_desc_init(&desc);
    desc.path = o->model;
    desc.weight_dtype = o->dtype;
    desc.activation_dtype = o->activations;
    desc.max_context = (int)context;
    desc.thresholds = o->thresholds;
    desc.topk_sdc = o->sdc;
    desc.topk_vmc = o->vmc;
    tdacl_status st = tdacl_model_load(*ctx, &desc, m);
    if (st) {
        fprintf(stderr, "tdacl %s: this run needs a context of %lld positions\n", cmd, context);
        return cli_report(*ctx, st);
    }
    return 0;
}

static const char forward_help[] =
    "usage: tdacl forward --model DIR --tokens 15,42,7,... --out logits.npy [--dtype f32|bf16]\n"
    "                     [--activations f32|bf16] [--context N] [--device SEL]\n"
    "                     [--thresholds FILE] [--sdc MODE] [--vmc 0|1]\n"
    "Writes float32 logits [T, vocab] for every position of one sequence.  The KV cache\n"
    "holds T positions, or N with --context (N >= T).  --dtype: the weights on the device;\n"
    "--activations: the activations between kernels and the KV cache (docs/spec.md 4.6).\n"
    "Top-theta (docs/spec.md 4.7): --thresholds FILE runs a softmax model's attention as\n"
    "topk_theta with a threshold file of tdacl calibrate; --sdc none|exact|exp_threshold|offline\n"
    "and --vmc 0|1 replace the config's attention.sdc and attention.vmc.\n";

static const char generate_help[] =
    "usage: tdacl generate --model DIR (--prompt TEXT | --tokens ids) [--max-new N]\n"
    "                      [--temperature T] [--top-k K] [--seed S] [--dtype f32|bf16]\n"
    "                      [--activations f32|bf16] [--context N] [--device SEL]\n"
    "                      [--thresholds FILE] [--sdc MODE] [--vmc 0|1]\n"
    "--prompt: text in, the prompt and its continuation out, through the model directory's\n"
    "tokenizer (tokenizer.json, or vocab.json + merges.txt), or as bytes for a vocabulary-256\n"
    "model without one.  --tokens: token ids in, the prompt ids and then the generated ids\n"
    "out, comma-separated.  DIR may be a Hugging Face repo id found in the local hub cache.\n"
    "The KV cache holds prompt + N positions, or --context positions.  Prints prefill time,\n"
    "decode tokens/s and per-token latency on stderr.  --thresholds FILE [--sdc MODE]\n"
    "[--vmc 0|1]: Top-theta attention as for tdacl forward.\n";

static const char tokenize_help[] =
    "usage: tdacl tokenize --model DIR (--text TEXT | --ids 15,42,7)\n"
    "--text: prints the token ids of TEXT, comma-separated.  --ids: prints the text of the ids.\n"
    "Uses DIR's tokenizer.json (or vocab.json + merges.txt): GPT-2 byte-level BPE.  DIR may be a\n"
    "Hugging Face repo id found in the local hub cache.  No device is opened.\n";

/* Releases what a command made (any may be NULL) and passes its exit code on. */
static int finish(int rc, int32_t *tokens, float *logits, tdacl_model *m, tdacl_context *ctx)
{
    free(tokens);
    free(logits);
    tdacl_model_destroy(m);
    tdacl_context_destroy(ctx);
    return rc;
}

/* --help (prints `help`, exit code 0) and option parsing: -1 to go on, else the exit code. */
static int begin(int argc, char **argv, run_opts *o, const char *cmd, int allowed, const char *help)
{
    if (argc > 1 && !strcmp(argv[1], "--help")) {
        fputs(help, stdout);
        return 0;
    }
    int rc = parse(argc, argv, o, cmd, allowed);
    return rc ? rc : -1;
}

/* The ids of text through the tokenizer, in a malloc'd array (*count of them). */
static tdacl_status encode_text(const tdacl_tokenizer *tok, const char *text, int32_t **ids, int64_t *count)
{
    size_t len = strlen(text);
    tdacl_status st = tdacl_tokenizer_encode(tok, text, len, NULL, 0, count);
    if (st) return st;
    *ids = malloc((size_t)(*count ? *count : 1) * sizeof **ids);
    if (!*ids) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "out of memory");
    return tdacl_tokenizer_encode(tok, text, len, *ids, *count, count);
}

/* The prompt's ids: through the tokenizer, or one id per byte without one. */
static int prompt_tokens(const tdacl_tokenizer *tok, const char *prompt, int32_t **tokens, int *n)
{
    int64_t count = (int64_t)strlen(prompt);
    *tokens = NULL;
    tdacl_status st = TDACL_SUCCESS;
    if (tok) st = encode_text(tok, prompt, tokens, &count);
    else if ((*tokens = malloc((size_t)count * sizeof **tokens)))
        for (int64_t i = 0; i < count; i++) (*tokens)[i] = (unsigned char)prompt[i];
    else st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st && (count < 1 || count > INT_MAX - 1)) {
        fprintf(stderr, "tdacl generate: the prompt gives %lld tokens; 1..%d are possible\n", (long long)count, INT_MAX - 1);
        free(*tokens), *tokens = NULL;
        return 2;
    }
    if (st) {
        free(*tokens), *tokens = NULL;
        return cli_report(NULL, st);
    }
    *n = (int)count;
    return 0;
}

/* Writes a generated token's bytes (one byte per id without a tokenizer). */
static tdacl_status print_token(const tdacl_tokenizer *tok, int32_t id)
{
    if (!tok) return putchar(id), TDACL_SUCCESS;
    char buf[256], *text = buf;
    size_t len;
    tdacl_status st = tdacl_tokenizer_decode(tok, &id, 1, buf, sizeof buf, &len);
    if (!st && len >= sizeof buf) { /* a long token: its whole text */
        text = malloc(len + 1);
        st = text ? tdacl_tokenizer_decode(tok, &id, 1, text, len + 1, &len)
                  : tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (!st) fwrite(text, 1, len, stdout);
    if (text != buf) free(text);
    return st;
}

int cmd_forward(int argc, char **argv)
{
    run_opts o;
    int rc = begin(argc, argv, &o, "forward", FORWARD_OPTS, forward_help);
    if (rc >= 0) return rc;
    if (!o.tokens || !o.out) {
        fprintf(stderr, "tdacl forward: --tokens and --out are required\n");
        return 2;
    }
    int32_t *tokens;
    int n;
    if (cli_parse_ids(o.tokens, &tokens, &n)) {
        fprintf(stderr, "tdacl forward: bad value '%s' for --tokens: expected token ids like 15,42,7\n", o.tokens);
        return 2;
    }
    tdacl_context *ctx = NULL;
    tdacl_model *m = NULL;
    float *logits = NULL;
    if ((rc = open_model(&o, n, "forward", &ctx, &m))) goto done;
    rc = 1;
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
    return finish(rc, tokens, logits, m, ctx);
}

int cmd_generate(int argc, char **argv)
{
    run_opts o;
    int rc = begin(argc, argv, &o, "generate", GENERATE_OPTS, generate_help);
    if (rc >= 0) return rc;
    if (!!o.prompt == !!o.tokens) {
        fprintf(stderr, "tdacl generate: give exactly one of --prompt and --tokens\n");
        return 2;
    }
    int32_t *tokens = NULL;
    int n = 0;
    tdacl_context *ctx = NULL;
    tdacl_model *m = NULL;
    float *logits = NULL;
    if (o.tokens && cli_parse_ids(o.tokens, &tokens, &n)) {
        fprintf(stderr, "tdacl generate: bad value '%s' for --tokens: expected token ids like 15,42,7\n", o.tokens);
        return 2;
    }
    tdacl_tokenizer *tok = NULL;
    if (o.prompt) {
        if (!o.prompt[0]) {
            fprintf(stderr, "tdacl generate: empty prompt\n");
            return 2;
        }
        /* the directory's tokenizer, else bytes (checked against the vocabulary below) */
        tdacl_status st = tdacl_tokenizer_load(o.model, &tok);
        if (st && st != TDACL_ERR_IO) return cli_report(NULL, st);
        if ((rc = prompt_tokens(tok, o.prompt, &tokens, &n))) {
            tdacl_tokenizer_destroy(tok);
            return rc;
        }
    }
    /* the prompt and every generated token but the last enter the KV cache */
    long long need = (long long)n + (o.max_new > 0 ? o.max_new - 1 : 0);
    if ((rc = open_model(&o, need, "generate", &ctx, &m))) goto done;
    rc = 1;
    tdacl_model_info info;
    tdacl_model_get_info(m, &info);
    const int text = o.prompt != NULL; /* text in, text out */
    if (text && !tok && info.vocab_size != 256) {
        fprintf(stderr, "tdacl generate: %s has no tokenizer (tokenizer.json, or vocab.json + merges.txt) and its "
                        "vocabulary is not bytes (256); give one or use --tokens\n", o.model);
        goto done;
    }
    /* Draws on the device (ids only cross to the host, step n + 1 is enqueued before token n
     * is read) unless top_k asks for more candidates than the device's rule takes. */
    const int greedy = o.temperature == 0 || o.top_k == 1;
    const int on_device = greedy || o.top_k <= 256 || o.top_k >= info.vocab_size;
    if (!on_device) {
        fprintf(stderr, "tdacl generate: --top-k %lld: drawing on the host (the device draws from up to 256 tokens or "
                        "all of them)\n", (long long)o.top_k);
        logits = malloc((size_t)info.vocab_size * sizeof *logits);
        if (!logits) goto done;
    }
    uint64_t seed = (uint64_t)o.seed;
    int32_t next = 0;
    double t0 = tdacl__now();
    tdacl_status st = tdacl__model_prefill(m, 1, n, tokens, 1);
    if (!st && on_device && o.max_new > 0) {
        st = tdacl_model_sample(m, (float)o.temperature, (int)o.top_k, &seed);
        if (!st) st = tdacl_model_sampled(m, &next, 1);
    }
    if (!st && !on_device) st = tdacl_model_logits(m, logits, info.vocab_size, NULL);
    if (!st) st = tdacl_finish(ctx);
    double prefill_ms = (tdacl__now() - t0) * 1e3;
    if (st) {
        cli_report(ctx, st);
        goto done;
    }
    if (text) fputs(o.prompt, stdout);
    else
        for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", tokens[i]);
    double t1 = tdacl__now();
    for (long long i = 0; i < o.max_new; i++) {
        const int more = i + 1 < o.max_new;
        if (on_device) {
            /* step i + 1 (its input, token i, is on the device) is enqueued before token i is
             * waited for, so the device has work while the host prints */
            if (more && (st = tdacl_model_decode(m, 1, NULL))) break;
            if (i > 0 && (st = tdacl_model_sampled(m, &next, 1))) break;
            if (more && (st = tdacl_model_sample(m, (float)o.temperature, (int)o.top_k, &seed))) break;
        } else if ((st = tdacl_sample(logits, info.vocab_size, (float)o.temperature, (int)o.top_k, &seed, &next))) {
            break;
        }
        if (text && (st = print_token(tok, next))) break;
        if (!text) printf(",%d", next);
        fflush(stdout);
        if (!more || on_device) continue;
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
    tdacl_tokenizer_destroy(tok);
    return finish(rc, tokens, logits, m, ctx);
}

int cmd_tokenize(int argc, char **argv)
{
    run_opts o;
    int rc = begin(argc, argv, &o, "tokenize", TOKENIZE_OPTS, tokenize_help);
    if (rc >= 0) return rc;
    if (!!o.text == !!o.ids) {
        fprintf(stderr, "tdacl tokenize: give exactly one of --text and --ids\n");
        return 2;
    }
    int32_t *ids = NULL;
    int n = 0;
    if (o.ids && cli_parse_ids(o.ids, &ids, &n)) {
        fprintf(stderr, "tdacl tokenize: bad value '%s' for --ids: expected token ids like 15,42,7\n", o.ids);
        return 2;
    }
    tdacl_tokenizer *tok;
    tdacl_status st = tdacl_tokenizer_load(o.model, &tok);
    if (st) {
        free(ids);
        return cli_report(NULL, st);
    }
    rc = 0;
    if (o.text) {
        int64_t count;
        st = encode_text(tok, o.text, &ids, &count);
        for (int64_t i = 0; !st && i < count; i++) printf("%s%d", i ? "," : "", ids[i]);
        if (!st) printf("\n");
    } else {
        size_t len;
        st = tdacl_tokenizer_decode(tok, ids, n, NULL, 0, &len);
        char *text = st ? NULL : malloc(len + 1);
        if (!st && !text) st = TDACL_ERR_OUT_OF_MEMORY;
        if (!st) st = tdacl_tokenizer_decode(tok, ids, n, text, len + 1, &len);
        if (!st) fwrite(text, 1, len, stdout), printf("\n");
        free(text);
    }
    if (st) rc = cli_report(NULL, st);
    free(ids);
    tdacl_tokenizer_destroy(tok);
    return rc;
}
