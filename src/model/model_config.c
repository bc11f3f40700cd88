/* config.json of a GPT-family checkpoint (docs/spec.md section 4): the GPT-2 keys with their
 * Hugging Face aliases plus the threshold-attention extensions, each checked for type and
 * range so that every shape product derived from them fits in 64 bits; and the list of
 * tensors such a config requires. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"
#include "base/kinds.h"
#include "model/checkpoint.h"

/* Bounds that keep V*C, P*C and 4*C*C far below 2^63 and head dims within the kernels. */
#define MAX_LAYERS 1024
#define MAX_HEADS 4096
#define MAX_EMBD 65536
#define MAX_VOCAB 10000000
#define MAX_POSITIONS (16 * 1024 * 1024)
#define MAX_HEAD_DIM 256
#define MAX_CONFIG_BYTES (16u << 20) /* real configs are a few KB */

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "boolean";
    if (cJSON_IsNumber(v)) return "number";
    if (cJSON_IsString(v)) return "string";
    if (cJSON_IsArray(v)) return "array";
    if (cJSON_IsObject(v)) return "object";
    return "invalid value";
}

/* Present and not null (Hugging Face writes null for unset optional keys). */
static const cJSON *get(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* A required integer under `key` or its Hugging Face `alias` (both present: must agree). */
static tdacl_status get_int(const char *file, const cJSON *root, const char *key, const char *alias,
                            int64_t lo, int64_t hi, int *out)
{
    const char *keys[2] = {key, alias};
    int64_t got[2];
    int have[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (!keys[i]) continue;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[i]);
        if (!v) continue;
        int r = tdacl__json_int(v, (double)lo, (double)hi, &got[i]);
        if (r == -1)
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s' must be an integer, found %s", file, keys[i], type_name(v));
        if (r == -2)
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s' = %g is not an integer in [%lld, %lld]", file,
                               keys[i], v->valuedouble, (long long)lo, (long long)hi);
        have[i] = 1;
    }
    if (!have[0] && !have[1]) {
        if (alias) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: missing key '%s' (or '%s')", file, key, alias);
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: missing key '%s'", file, key);
    }
    if (have[0] && have[1] && got[0] != got[1])
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: '%s' = %lld and its alias '%s' = %lld disagree", file, key,
                           (long long)got[0], alias, (long long)got[1]);
    *out = (int)(have[0] ? got[0] : got[1]);
    return TDACL_SUCCESS;
}

/* An optional finite number in [lo, hi] (lo excluded when lo_open). */
static tdacl_status get_real(const char *file, const cJSON *obj, const char *prefix, const char *key, double lo,
                             int lo_open, double hi, float *out)
{
    const cJSON *v = get(obj, key);
    if (!v) return TDACL_SUCCESS;
    if (!cJSON_IsNumber(v))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s%s' must be a number, found %s", file, prefix, key, type_name(v));
    double x = v->valuedouble;
    /* the float the model keeps must be in range too: 1e-128 passes as a double but is 0 */
    float f = (float)(x > hi ? hi : x < -1e30 ? -1e30 : x);
    if (!(lo_open ? x > lo && f > lo : x >= lo) || !(x <= hi))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s%s' = %g is out of range %s%g, %g]", file, prefix, key, x,
                           lo_open ? "(" : "[", lo, hi);
    *out = f;
    return TDACL_SUCCESS;
}

/* An optional string that must be one of names[0..n); *out receives its index. */
static tdacl_status get_enum(const char *file, const cJSON *obj, const char *prefix, const char *key,
                             const char *const *names, int n, int *out)
{
    const cJSON *v = get(obj, key);
    if (!v) return TDACL_SUCCESS;
    if (!cJSON_IsString(v))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s%s' must be a string, found %s", file, prefix, key, type_name(v));
    for (int i = 0; i < n; i++)
        if (!strcmp(v->valuestring, names[i])) {
            *out = i;
            return TDACL_SUCCESS;
        }
    char list[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", i ? ", " : "", names[i]);
    return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: unknown %s%s '%.64s' (expected one of %s)", file, prefix, key,
                       v->valuestring, list);
}

static tdacl_status no_duplicates(const char *file, const cJSON *obj, const char *prefix)
{
    const char *dup = NULL;
    tdacl_status st = tdacl__json_duplicate_key(obj, file, &dup);
    if (st) return st;
    if (dup) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s%.64s' appears twice", file, prefix, dup);
    return TDACL_SUCCESS;
}

/* An object with no key given twice; `what` names it in the message. */
static tdacl_status checked_object(const char *file, const cJSON *o, const char *prefix, const char *what)
{
    if (!cJSON_IsObject(o))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: %s must be a%s object, found %s", file, what, *prefix ? "n" : " JSON",
                           type_name(o));
    return no_duplicates(file, o, prefix);
}

static tdacl_status parse_attention(const char *file, const cJSON *a, tdacl_model_config *cfg)
{
    tdacl_status st = checked_object(file, a, "attention.", "key 'attention'");
    if (st) return st;
    static const char *const norms[] = {"none", "rms"};
    if (!get(a, "kind")) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: missing key 'attention.kind'", file);
    int kind = 0, norm = 0;
    const char *kinds[16]; /* the kind table's names, in the order of tdacl_attention_kind */
    int nkinds = 0;
    while (nkinds < 16 && tdacl__kind(nkinds)) kinds[nkinds] = tdacl__kind(nkinds)->name, nkinds++;
    if ((st = get_enum(file, a, "attention.", "kind", kinds, nkinds, &kind))) return st;
    if ((st = get_enum(file, a, "attention.", "head_norm", norms, 2, &norm))) return st;
    if ((st = get_real(file, a, "attention.", "beta", 0, 0, 1e6, &cfg->beta))) return st;
    if ((st = get_real(file, a, "attention.", "kappa", 0, 1, 1e12, &cfg->kappa))) return st;
    if ((st = get_real(file, a, "attention.", "power", 1, 0, 64, &cfg->power))) return st;
    /* topk_theta */
    static const char *const sdcs[] = {"none", "exact", "exp_threshold", "offline"};
    if ((st = get_enum(file, a, "attention.", "sdc", sdcs, 4, &cfg->sdc))) return st;
    if ((st = get_real(file, a, "attention.", "sdc_gamma", 0, 0, 1e6, &cfg->sdc_gamma))) return st;
    const cJSON *vmc = get(a, "vmc"), *th = get(a, "thresholds");
    if (vmc && !cJSON_IsBool(vmc))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key 'attention.vmc' must be true or false, found %s", file,
                           type_name(vmc));
    cfg->vmc = vmc && cJSON_IsTrue(vmc);
    if (th && (!cJSON_IsString(th) || !th->valuestring[0] || strlen(th->valuestring) >= sizeof cfg->thresholds))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key 'attention.thresholds' must be a file name of 1 to %zu bytes",
                           file, sizeof cfg->thresholds - 1);
    if (th) snprintf(cfg->thresholds, sizeof cfg->thresholds, "%s", th->valuestring);
    /* entmax */
    if ((st = get_real(file, a, "attention.", "alpha", 1, 1, 8, &cfg->alpha))) return st;
    if ((st = get_real(file, a, "attention.", "temp_delta", -1e6, 0, 1e6, &cfg->temp_delta))) return st;
    if ((st = get_real(file, a, "attention.", "temp_beta", -1e6, 0, 1e6, &cfg->temp_beta))) return st;
    if ((st = get_real(file, a, "attention.", "temp_gamma", -64, 0, 64, &cfg->temp_gamma))) return st;
    cfg->attn_kind = (tdacl_attention_kind)kind;
    cfg->head_norm = (tdacl_head_norm)norm;
    static const char *const known[] = {"kind", "head_norm", "beta", "kappa", "power", "thresholds", "sdc",
                                        "sdc_gamma", "vmc", "alpha", "temp_delta", "temp_beta", "temp_gamma"};
    for (const cJSON *c = a->child; c; c = c->next) {
        int k = 0;
        for (size_t i = 0; i < TDACL_ARRAY_LEN(known); i++) k |= !strcmp(c->string, known[i]);
        if (!k) tdacl__log(NULL, TDACL_LOG_WARN, "%s: unknown key 'attention.%.64s' ignored", file, c->string);
    }
    return TDACL_SUCCESS;
}

static tdacl_status parse_rope_scaling(const char *file, const cJSON *r, tdacl_model_config *cfg)
{
    if (!cJSON_IsObject(r))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key 'rope_scaling' must be an object or null, found %s", file,
                           type_name(r));
    tdacl_status st = no_duplicates(file, r, "rope_scaling.");
    if (st) return st;
    /* Hugging Face wrote "type" first and "rope_type" later; accept either. */
    const cJSON *t = get(r, "type");
    const char *key = "type";
    if (!t) t = get(r, "rope_type"), key = "rope_type";
    if (!t) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: missing key 'rope_scaling.type'", file);
    if (!cJSON_IsString(t))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key 'rope_scaling.%s' must be a string, found %s", file, key,
                           type_name(t));
    if (strcmp(t->valuestring, "ntk"))
        return tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED, "%s: rope_scaling type '%.64s' is not supported (only 'ntk')",
                           file, t->valuestring);
    if (!get(r, "factor")) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: missing key 'rope_scaling.factor'", file);
    return get_real(file, r, "rope_scaling.", "factor", 1, 0, 1e6, &cfg->rope_ntk_factor);
}

/* GPT-2 options that change the forward pass in ways tdacl does not implement. */
static tdacl_status check_gpt2_options(const char *file, const cJSON *root, const tdacl_model_config *cfg)
{
    const cJSON *act = get(root, "activation_function");
    if (act) {
        if (!cJSON_IsString(act))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key 'activation_function' must be a string, found %s", file,
                               type_name(act));
        if (strcmp(act->valuestring, "gelu_new") && strcmp(act->valuestring, "gelu_pytorch_tanh"))
            return tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED,
                               "%s: activation_function '%.64s' is not supported (the MLP uses gelu_new)", file,
                               act->valuestring);
    }
    const cJSON *inner = get(root, "n_inner");
    if (inner) {
        int64_t v = 0;
        if (tdacl__json_int(inner, 1, TDACL_JSON_MAX_INT, &v))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key 'n_inner' must be a positive integer or null", file);
        if (v != 4 * (int64_t)cfg->n_embd)
            return tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED, "%s: n_inner = %lld is not supported (only 4 * n_embd = %d)",
                               file, (long long)v, 4 * cfg->n_embd);
    }
    static const struct { const char *key; int unsupported_when; } flags[] = {
        {"scale_attn_by_inverse_layer_idx", 1}, {"scale_attn_weights", 0}, {"tie_word_embeddings", -1}};
    for (size_t i = 0; i < TDACL_ARRAY_LEN(flags); i++) {
        const cJSON *v = get(root, flags[i].key);
        if (!v) continue;
        if (!cJSON_IsBool(v))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: key '%s' must be true or false, found %s", file, flags[i].key,
                               type_name(v));
        if (cJSON_IsTrue(v) == flags[i].unsupported_when)
            return tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED, "%s: %s = %s is not supported", file, flags[i].key,
                               cJSON_IsTrue(v) ? "true" : "false");
    }
    return TDACL_SUCCESS;
}

static tdacl_status parse_root(const char *file, const cJSON *root, tdacl_model_config *cfg)
{
    tdacl_status st = checked_object(file, root, "", "top level");
    if (st) return st;
    if ((st = get_int(file, root, "n_layer", "num_hidden_layers", 1, MAX_LAYERS, &cfg->n_layer))) return st;
    if ((st = get_int(file, root, "n_head", "num_attention_heads", 1, MAX_HEADS, &cfg->n_head))) return st;
    if ((st = get_int(file, root, "n_embd", "hidden_size", 1, MAX_EMBD, &cfg->n_embd))) return st;
    if ((st = get_int(file, root, "vocab_size", NULL, 1, MAX_VOCAB, &cfg->vocab_size))) return st;
    if ((st = get_int(file, root, "n_positions", "max_position_embeddings", 1, MAX_POSITIONS, &cfg->n_positions)))
        return st;
    if (cfg->n_embd % cfg->n_head)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: n_embd = %d is not a multiple of n_head = %d", file, cfg->n_embd,
                           cfg->n_head);
    cfg->head_dim = cfg->n_embd / cfg->n_head;
    if (cfg->head_dim > MAX_HEAD_DIM)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: head dim n_embd / n_head = %d exceeds %d", file, cfg->head_dim,
                           MAX_HEAD_DIM);
    if ((st = get_real(file, root, "", "layer_norm_epsilon", 0, 1, 1, &cfg->layer_norm_epsilon))) return st;

    static const char *const norm_types[] = {"layernorm", "rmsnorm"};
    if ((st = get_enum(file, root, "", "norm_type", norm_types, 2, &cfg->norm_type))) return st;

    const cJSON *attn = get(root, "attention");
    if (attn) {
        if ((st = parse_attention(file, attn, cfg))) return st;
        cfg->has_attention = 1;
    }

    static const char *const positions[] = {"learned", "rope"};
    int pos = 0;
    if ((st = get_enum(file, root, "", "position", positions, 2, &pos))) return st;
    cfg->position = (tdacl_position_kind)pos;
    if ((st = get_real(file, root, "", "rope_theta", 0, 1, 1e12, &cfg->rope_theta))) return st;
    const cJSON *rs = get(root, "rope_scaling");
    if (rs) {
        if (cfg->position != TDACL_POSITION_ROPE)
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: 'rope_scaling' needs \"position\": \"rope\"", file);
        if ((st = parse_rope_scaling(file, rs, cfg))) return st;
    }
    /* rotate-half pairs element m with m + d/2 */
    if (cfg->position == TDACL_POSITION_ROPE && cfg->head_dim % 2)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: rope needs an even head dim, n_embd / n_head = %d", file,
                           cfg->head_dim);

    if ((st = check_gpt2_options(file, root, cfg))) return st;
    const cJSON *tie = get(root, "tie_word_embeddings");
    cfg->tie_word_embeddings = tie ? cJSON_IsTrue(tie) : -1;
    return TDACL_SUCCESS;
}

tdacl_status tdacl__config_parse(const char *text, size_t len, const char *name, tdacl_model_config *cfg)
{
    const char *file = name ? name : "config.json";
    if (!cfg) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__config_parse: cfg is NULL");
    memset(cfg, 0, sizeof *cfg);
    if (!text && len) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__config_parse: text is NULL");
    if (len > MAX_CONFIG_BYTES)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: %zu bytes is implausibly large for a config", file, len);
    cfg->layer_norm_epsilon = 1e-5f;
    cfg->attn_kind = TDACL_ATTN_SOFTMAX;
    cfg->beta = 1.0f;
    cfg->kappa = 1.0f;
    cfg->power = 2.0f;
    cfg->head_norm = TDACL_NORM_NONE;
    cfg->position = TDACL_POSITION_LEARNED;
    cfg->rope_theta = 10000.0f;
    cfg->rope_ntk_factor = 1.0f;
    cfg->tie_word_embeddings = -1;
    cfg->sdc_gamma = 0.05f;
    cfg->alpha = 1.5f;
    cfg->temp_delta = 1.0f;
    cfg->temp_gamma = 1.0f;

    /* the JSON parser wants a terminating NUL that the caller's text need not have */
    char *copy = malloc(len + 1);
    if (!copy) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", file);
    if (len) memcpy(copy, text, len);
    copy[len] = 0;
    cJSON *root = NULL;
    tdacl_status st = tdacl__json_parse(copy, len, file, &root);
    free(copy);
    if (!st) st = parse_root(file, root, cfg);
    cJSON_Delete(root);
    if (st) {
        memset(cfg, 0, sizeof *cfg);
        cfg->tie_word_embeddings = -1;
    }
    return st;
}

int tdacl__config_qkv_blocks(const tdacl_model_config *cfg)
{
    /* q, k, v, and q2, k2 for two-view kinds */
    return 1 + 2 * tdacl__kind_views(cfg->attn_kind);
}

static void add(tdacl_ckpt_spec *s, int *n, tdacl_ckpt_init init, const char *why, int ndim, int64_t d0, int64_t d1,
                const char *fmt, int layer)
{
    tdacl_ckpt_spec *e = &s[(*n)++];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, fmt, layer);
    e->ndim = ndim;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->init = init;
    snprintf(e->why, sizeof e->why, "%s", why ? why : "");
}

tdacl_status tdacl__config_tensors(const tdacl_model_config *cfg, tdacl_ckpt_spec **specs, int *count)
{
    *specs = NULL;
    *count = 0;
    const int64_t C = cfg->n_embd, V = cfg->vocab_size, P = cfg->n_positions, L = cfg->n_layer;
    const int ln = cfg->norm_type == 0, k = tdacl__config_qkv_blocks(cfg);
    const int thresh = tdacl__kind_threshold(cfg->attn_kind);
    const int two_view = k == 5;
    char why[48];
    snprintf(why, sizeof why, "attention kind %s", tdacl__kind_name(cfg->attn_kind));
    tdacl_ckpt_spec *s = malloc((size_t)(20 * L + 8) * sizeof *s);
    if (!s) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "checkpoint: out of memory listing %lld layers", (long long)L);
    int n = 0;
    add(s, &n, TDACL_INIT_NORMAL, NULL, 2, V, C, "wte.weight", 0);
    if (cfg->position == TDACL_POSITION_LEARNED) add(s, &n, TDACL_INIT_NORMAL, "position learned", 2, P, C, "wpe.weight", 0);
    for (int l = 0; l < L; l++) {
        add(s, &n, TDACL_INIT_ONES, NULL, 1, C, 0, "h.%d.ln_1.weight", l);
        if (ln) add(s, &n, TDACL_INIT_ZEROS, "norm_type layernorm", 1, C, 0, "h.%d.ln_1.bias", l);
        add(s, &n, TDACL_INIT_NORMAL, two_view ? why : NULL, 2, C, k * C, "h.%d.attn.c_attn.weight", l);
        add(s, &n, TDACL_INIT_ZEROS, two_view ? why : NULL, 1, k * C, 0, "h.%d.attn.c_attn.bias", l);
        add(s, &n, TDACL_INIT_NORMAL, NULL, 2, C, C, "h.%d.attn.c_proj.weight", l);
        add(s, &n, TDACL_INIT_ZEROS, NULL, 1, C, 0, "h.%d.attn.c_proj.bias", l);
        if (thresh) {
            add(s, &n, TDACL_INIT_BETA, why, 0, 0, 0, "h.%d.attn.beta", l);
            s[n - 1].scalar = 1;
        }
        if (two_view) {
            add(s, &n, TDACL_INIT_LAMBDA, why, 0, 0, 0, "h.%d.attn.lambda", l);
            s[n - 1].scalar = 2;
        }
        if (cfg->attn_kind == TDACL_ATTN_ENTMAX) { /* optional: the config's values when absent */
            static const struct { tdacl_ckpt_init init; const char *fmt; int scalar; } ent[] = {
                {TDACL_INIT_ALPHA, "h.%d.attn.entmax_alpha", 1}, {TDACL_INIT_TEMP_DELTA, "h.%d.attn.entmax_delta", 2},
                {TDACL_INIT_TEMP_BETA, "h.%d.attn.entmax_beta", 2}, {TDACL_INIT_TEMP_GAMMA, "h.%d.attn.entmax_gamma", 2}};
            for (size_t e = 0; e < TDACL_ARRAY_LEN(ent); e++) {
                add(s, &n, ent[e].init, why, 0, 0, 0, ent[e].fmt, l);
                s[n - 1].scalar = ent[e].scalar;
                s[n - 1].optional = 2;
            }
        }
        if (cfg->head_norm == TDACL_NORM_RMS)
            add(s, &n, TDACL_INIT_ONES, "head_norm rms", 1, cfg->head_dim, 0, "h.%d.attn.head_norm.weight", l);
        add(s, &n, TDACL_INIT_ONES, NULL, 1, C, 0, "h.%d.ln_2.weight", l);
        if (ln) add(s, &n, TDACL_INIT_ZEROS, "norm_type layernorm", 1, C, 0, "h.%d.ln_2.bias", l);
        add(s, &n, TDACL_INIT_NORMAL, NULL, 2, C, 4 * C, "h.%d.mlp.c_fc.weight", l);
        add(s, &n, TDACL_INIT_ZEROS, NULL, 1, 4 * C, 0, "h.%d.mlp.c_fc.bias", l);
        add(s, &n, TDACL_INIT_NORMAL, NULL, 2, 4 * C, C, "h.%d.mlp.c_proj.weight", l);
        add(s, &n, TDACL_INIT_ZEROS, NULL, 1, C, 0, "h.%d.mlp.c_proj.bias", l);
    }
    add(s, &n, TDACL_INIT_ONES, NULL, 1, C, 0, "ln_f.weight", 0);
    if (ln) add(s, &n, TDACL_INIT_ZEROS, "norm_type layernorm", 1, C, 0, "ln_f.bias", 0);
    if (cfg->tie_word_embeddings != 1) {
        add(s, &n, TDACL_INIT_NORMAL, cfg->tie_word_embeddings == 0 ? "tie_word_embeddings false" : NULL, 2, V, C,
            "lm_head.weight", 0);
        s[n - 1].optional = cfg->tie_word_embeddings != 0;
    }
    *specs = s;
    *count = n;
    return TDACL_SUCCESS;
}
