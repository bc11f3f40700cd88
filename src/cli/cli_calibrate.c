/* tdacl calibrate: Top-theta thresholds of a model (docs/spec.md section 4.7). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "cli/cli.h"

static const char calibrate_help[] =
    "usage: tdacl calibrate --model DIR (--tokens FILE | --text FILE) --k K --out thresholds.json\n"
    "                       [--k-per-layer K0,K1,...] [--offset-std A] [--seq-len N] [--post 0|1]\n"
    "                       [--fit D] [--dtype f32|bf16] [--activations f32|bf16] [--device SEL]\n"
    "Runs the model's softmax attention over calibration sequences (the token stream cut into\n"
    "sequences of N tokens, default the model's n_positions) and writes the Top-theta threshold\n"
    "of every (layer, head, row id) keeping about K keys a row: the mean over the sequences of\n"
    "each row's K-th/K+1-th largest score midpoint, plus A standard deviations (the Top-theta\n"
    "paper's Algorithm 1, with top-K applied in every layer while later ones are measured).\n"
    "--tokens FILE: token ids separated by commas or blanks.  --text FILE: UTF-8 text through\n"
    "DIR's tokenizer (one id a byte for a vocabulary-256 model without one).  --post 1:\n"
    "thresholds on the softmax weights.  --fit D: per head a polynomial of degree D (0..3) in\n"
    "ln(row id + 1) instead of a table.  Pre-softmax files also hold the offline SDC table.\n"
    "Run the result with tdacl generate --thresholds FILE (docs/spec.md section 4.7).\n";

#define MAX_INPUT_BYTES (1u << 30)

/* Token ids of a file: digits separated by commas and blanks. */
static int read_ids(const char *path, int32_t **ids, int64_t *n)
{
    size_t len = 0;
    char *text = tdacl__read_regular(path, MAX_INPUT_BYTES, &len);
    if (!text) {
        fprintf(stderr, "tdacl calibrate: cannot read --tokens %s: %s\n", path, tdacl__file_error(errno));
        return 2;
    }
    int64_t cap = (int64_t)len / 2 + 1, count = 0;
    *ids = malloc((size_t)cap * sizeof **ids);
    int rc = *ids ? 0 : 1;
    for (size_t i = 0; !rc && i < len;) {
        if (text[i] == ',' || text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r') {
            i++;
            continue;
        }
        long long v = 0;
        size_t j = i;
        while (j < len && text[j] >= '0' && text[j] <= '9' && v <= INT32_MAX) v = v * 10 + (text[j++] - '0');
        if (j == i || v > INT32_MAX || count >= cap) {
            fprintf(stderr, "tdacl calibrate: --tokens %s: byte %zu is not part of a token id 0..%d\n", path, i, INT32_MAX);
            rc = 2;
            break;
        }
        (*ids)[count++] = (int32_t)v;
        i = j;
    }
    free(text);
    if (rc) free(*ids), *ids = NULL;
    *n = count;
    return rc;
}

/* Token ids of a text file through the model directory's tokenizer, or one id a byte
 * (*bytes = 1) when the directory has none. */
static int read_text(const char *model, const char *path, int32_t **ids, int64_t *n, int *bytes)
{
    size_t len = 0;
    char *text = tdacl__read_regular(path, MAX_INPUT_BYTES, &len);
    if (!text) {
        fprintf(stderr, "tdacl calibrate: cannot read --text %s: %s\n", path, tdacl__file_error(errno));
        return 2;
    }
    tdacl_tokenizer *tok = NULL;
    tdacl_status st = tdacl_tokenizer_load(model, &tok);
    *bytes = st == TDACL_ERR_IO;
    if (*bytes) {
        st = TDACL_SUCCESS;
        *n = (int64_t)len;
        if ((*ids = malloc((len ? len : 1) * sizeof **ids)))
            for (size_t i = 0; i < len; i++) (*ids)[i] = (unsigned char)text[i];
        else st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "out of memory");
    } else if (!st) {
        st = tdacl_tokenizer_encode(tok, text, len, NULL, 0, n);
        if (!st && !(*ids = malloc((size_t)(*n ? *n : 1) * sizeof **ids)))
            st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "out of memory");
        if (!st) st = tdacl_tokenizer_encode(tok, text, len, *ids, *n, n);
    }
    tdacl_tokenizer_destroy(tok);
    free(text);
    return st ? cli_report(NULL, st) : 0;
}

/* "8,8,16" -> n_layer values, checked against the model once it is loaded. */
static int parse_list(const char *s, int **out, int *n)
{
    int32_t *ids;
    if (cli_parse_ids(s, &ids, n)) return -1;
    *out = (int *)ids; /* int32_t and int agree on every platform tdacl builds for */
    return 0;
}

/* Redrawn when the whole percentage moves (user: the last one drawn). */
static void progress_bar(void *user, int64_t done, int64_t total)
{
    int *last = user, pct = (int)(100 * done / (total ? total : 1));
    if (pct == *last && done < total) return;
    *last = pct;
    const int width = 40, fill = (int)(width * done / (total ? total : 1));
    fprintf(stderr, "\rcalibrating [%.*s%*s] %lld/%lld tokens", fill, "########################################",
            width - fill, "", (long long)done, (long long)total);
    if (done >= total) fputc('\n', stderr);
    fflush(stderr);
}

typedef struct calib_opts {
    const char *model, *tokens, *text, *out, *device, *k_list;
    tdacl_dtype dtype, activations;
    tdacl_calibrate_desc desc;
} calib_opts;

static int parse(int argc, char **argv, calib_opts *o)
{
    static const char names[] = "--model --tokens --text --k --out --k-per-layer --offset-std --seq-len --post --fit "
                                "--dtype --activations --device";
    memset(o, 0, sizeof *o);
    tdacl_calibrate_desc_init(&o->desc);
    o->desc.k = 0;
    o->dtype = o->activations = TDACL_F32;
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL, *why = NULL;
        if (!cli_known(a, names)) {
            fprintf(stderr, "tdacl calibrate: unknown option '%s' (see tdacl calibrate --help)\n", a);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "tdacl calibrate: option %s needs a value\n", a);
            return 2;
        }
        long long x = 0;
        double f = 0;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--tokens")) o->tokens = v;
        else if (!strcmp(a, "--text")) o->text = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--device")) o->device = v;
        else if (!strcmp(a, "--k-per-layer")) o->k_list = v;
        else if (!strcmp(a, "--k")) {
            if (cli_long(v, &x) || x < 1 || x > INT_MAX) why = "expected an integer >= 1";
            o->desc.k = (int)x;
        } else if (!strcmp(a, "--seq-len")) {
            if (cli_long(v, &x) || x < 2 || x > INT_MAX) why = "expected an integer >= 2";
            o->desc.seq_len = (int)x;
        } else if (!strcmp(a, "--fit")) {
            if (cli_long(v, &x) || x < 0 || x > 3) why = "expected a degree 0..3";
            o->desc.fit_degree = (int)x;
        } else if (!strcmp(a, "--post")) {
            if (strcmp(v, "0") && strcmp(v, "1")) why = "expected 0 or 1";
            o->desc.theta_post = v[0] == '1';
        } else if (!strcmp(a, "--offset-std")) {
            if (cli_double(v, &f) || !(fabs(f) < 1e6)) why = "expected a finite number";
            o->desc.offset_std = (float)f;
        } else {
            int dt = tdacl__dtype_from_name(v);
            if (dt != TDACL_F32 && dt != TDACL_BF16) why = "expected f32 or bf16";
            else *(!strcmp(a, "--dtype") ? &o->dtype : &o->activations) = (tdacl_dtype)dt;
        }
        if (why) {
            fprintf(stderr, "tdacl calibrate: bad value '%s' for %s: %s\n", v, a, why);
            return 2;
        }
    }
    const char *missing = !o->model ? "--model DIR" : !o->out ? "--out FILE" : !o->desc.k && !o->k_list ? "--k K" : NULL;
    if (missing) {
        fprintf(stderr, "tdacl calibrate: %s is required\n", missing);
        return 2;
    }
    if (!!o->tokens == !!o->text) {
        fprintf(stderr, "tdacl calibrate: give exactly one of --tokens FILE and --text FILE\n");
        return 2;
    }
    return 0;
}

int cmd_calibrate(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--help")) {
        fputs(calibrate_help, stdout);
        return 0;
    }
    calib_opts o;
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    int32_t *ids = NULL;
    int *klist = NULL, nk = 0;
    int64_t n = 0;
    if (o.k_list && parse_list(o.k_list, &klist, &nk)) {
        fprintf(stderr, "tdacl calibrate: bad value '%s' for --k-per-layer: expected integers like 64,64,32\n", o.k_list);
        return 2;
    }
    int bytes = 0;
    rc = o.tokens ? read_ids(o.tokens, &ids, &n) : read_text(o.model, o.text, &ids, &n, &bytes);
    tdacl_context *ctx = NULL;
    tdacl_model *m = NULL;
    if (rc) goto done;
    rc = 1;
    if (cli_open(o.device, &ctx)) goto done;
    tdacl_model_desc desc;
    tdacl_model_desc_init(&desc);
    desc.path = o.model;
    desc.weight_dtype = o.dtype;
    desc.activation_dtype = o.activations;
    desc.max_context = o.desc.seq_len; /* the KV cache a sequence needs (0: n_positions) */
    tdacl_status st = tdacl_model_load(ctx, &desc, &m);
    if (st) {
        cli_report(ctx, st);
        goto done;
    }
    tdacl_model_info info;
    tdacl_model_get_info(m, &info);
    if (bytes && info.vocab_size != 256) {
        fprintf(stderr, "tdacl calibrate: %s has no tokenizer (tokenizer.json, or vocab.json + merges.txt) and its "
                        "vocabulary is not bytes (256); give one or use --tokens\n", o.model);
        goto done;
    }
    if (klist && nk != info.n_layer) {
        fprintf(stderr, "tdacl calibrate: --k-per-layer gives %d values for %d layers\n", nk, info.n_layer);
        rc = 2;
        goto done;
    }
    o.desc.k_per_layer = klist;
    if (!o.desc.k) o.desc.k = 1; /* unused: every layer has its own */
    if (o.desc.seq_len > info.max_context) {
        fprintf(stderr, "tdacl calibrate: --seq-len %d exceeds the model's context %d\n", o.desc.seq_len, info.max_context);
        rc = 2;
        goto done;
    }
    int last_pct = -1;
    o.desc.progress = progress_bar, o.desc.progress_user = &last_pct;
    if ((st = tdacl_model_calibrate(m, &o.desc, ids, n, o.out))) {
        cli_report(ctx, st);
        goto done;
    }
    printf("thresholds of %d layers x %d heads (%lld tokens) written to %s\n", info.n_layer, info.n_head, (long long)n,
           o.out);
    rc = 0;
done:
    free(ids);
    free(klist);
    tdacl_model_destroy(m);
    tdacl_context_destroy(ctx);
    return rc;
}
