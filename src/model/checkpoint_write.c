/* Checkpoints with seeded random weights (tdacl make-model, the model tests): the tensors
 * tdacl__config_tensors lists, N(0, 0.02) for embeddings and linear weights, ones for norm
 * gains, zeros for biases.  Each tensor draws from its own splitmix64 stream seeded by the
 * seed and its name, so a tensor's values do not depend on which others the config asks
 * for.  Files are written to a temporary name and renamed, so a crash never leaves a
 * half-written checkpoint behind. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model/checkpoint.h"
#include "base/fileio.h"

#define CHUNK 8192
#define MAX_DATA_BYTES 1e15 /* cJSON prints integers exactly below this */

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct normal_rng {
    uint64_t state;
    int have_spare;
    double spare;
} normal_rng;

/* Box-Muller on two 53-bit uniforms; u1 lies in (0, 1] so the log is finite. */
static double next_normal(normal_rng *r)
{
    if (r->have_spare) {
        r->have_spare = 0;
        return r->spare;
    }
    double u1 = (double)((splitmix64(&r->state) >> 11) + 1) * 0x1.0p-53;
    double u2 = (double)(splitmix64(&r->state) >> 11) * 0x1.0p-53;
    double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
    r->spare = rad * sin(ang);
    r->have_spare = 1;
    return rad * cos(ang);
}


/* Renames the temporary file over path (or removes it when !ok) through base/fileio. */
static tdacl_status commit(tdacl_atomic_file *a, int ok)
{
    int e = tdacl__atomic_commit(a, ok);
    return e ? tdacl__fail(NULL, TDACL_ERR_IO, "cannot write %s: %s", a->path, strerror(e)) : TDACL_SUCCESS;
}

static uint64_t spec_numel(const tdacl_ckpt_spec *s)
{
    uint64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= (uint64_t)s->shape[i];
    return n;
}

static int write_tensor(FILE *f, const tdacl_ckpt_spec *s, const tdacl_model_config *cfg, uint64_t seed,
                        tdacl_dtype dtype, float *vals, unsigned char *bytes)
{
    normal_rng rng = {seed ^ tdacl__fnv1a64(s->name, strlen(s->name), TDACL_FNV_SEED), 0, 0};
    const size_t es = tdacl_dtype_size(dtype);
    for (uint64_t done = 0, total = spec_numel(s); done < total;) {
        size_t m = total - done < CHUNK ? (size_t)(total - done) : CHUNK;
        for (size_t i = 0; i < m; i++) {
            switch (s->init) {
            case TDACL_INIT_NORMAL: vals[i] = (float)(0.02 * next_normal(&rng)); break;
            case TDACL_INIT_ONES: vals[i] = 1.0f; break;
            case TDACL_INIT_ZEROS: vals[i] = 0.0f; break;
            case TDACL_INIT_BETA: vals[i] = cfg->beta; break;
            case TDACL_INIT_LAMBDA: vals[i] = 0.5f; break;
            case TDACL_INIT_ALPHA: vals[i] = cfg->alpha; break;
            case TDACL_INIT_TEMP_DELTA: vals[i] = cfg->temp_delta; break;
            case TDACL_INIT_TEMP_BETA: vals[i] = cfg->temp_beta; break;
            case TDACL_INIT_TEMP_GAMMA: vals[i] = cfg->temp_gamma; break;
            }
        }
        for (size_t i = 0; i < m; i++) { /* little-endian host, as the .npy code assumes */
            uint16_t h = dtype == TDACL_BF16 ? tdacl_f32_to_bf16(vals[i]) : tdacl_f32_to_f16(vals[i]);
            if (dtype == TDACL_F32) memcpy(bytes + 4 * i, &vals[i], 4);
            else memcpy(bytes + 2 * i, &h, 2);
        }
        if (fwrite(bytes, es, m, f) != m) return 0;
        done += m;
    }
    return 1;
}

/* The safetensors header of specs[0..n) (optional ones skipped unless written: optional 2), padded with spaces to a
 * multiple of 8 bytes so that the data buffer starts aligned. */
static char *build_header(const tdacl_ckpt_spec *specs, int n, tdacl_dtype dtype, uint64_t seed, size_t *len)
{
    static const char *const st_names[] = {"F32", "BF16", "F16"};
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    int ok = root && meta && cJSON_AddItemToObject(root, "__metadata__", meta);
    if (!ok) cJSON_Delete(meta);
    char seed_text[32];
    snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
    ok = ok && cJSON_AddStringToObject(meta, "format", "pt") && cJSON_AddStringToObject(meta, "tdacl_seed", seed_text);
    uint64_t at = 0;
    const uint64_t es = tdacl_dtype_size(dtype);
    for (int k = 0; k < n && ok; k++) {
        if (specs[k].optional == 1) continue;
        cJSON *e = cJSON_AddObjectToObject(root, specs[k].name);
        cJSON *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *offs = shape && cJSON_AddStringToObject(e, "dtype", st_names[dtype]) ? cJSON_AddArrayToObject(e, "data_offsets")
                                                                                    : NULL;
        ok = offs != NULL;
        for (int d = 0; d < specs[k].ndim && ok; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)specs[k].shape[d]));
        uint64_t end = at + spec_numel(&specs[k]) * es;
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)at)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)end));
        at = end;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) return NULL;
    size_t n0 = strlen(text), padded = (n0 + 7) / 8 * 8;
    char *out = malloc(padded + 1);
    if (out) {
        memcpy(out, text, n0);
        memset(out + n0, ' ', padded - n0);
        out[padded] = 0;
        *len = padded;
    }
    cJSON_free(text);
    return out;
}

static tdacl_status write_model(const char *path, const tdacl_ckpt_spec *specs, int n, const tdacl_model_config *cfg,
                                uint64_t seed, tdacl_dtype dtype)
{
    size_t hlen = 0;
    char *hdr = build_header(specs, n, dtype, seed, &hlen);
    float *vals = malloc(CHUNK * sizeof *vals);
    unsigned char *bytes = malloc(CHUNK * 4);
    tdacl_atomic_file af;
    FILE *f = hdr && vals && bytes ? tdacl__atomic_open(&af, path, 0644) : NULL;
    tdacl_status st = TDACL_SUCCESS;
    if (!hdr || !vals || !bytes) st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    else if (!f) st = tdacl__fail(NULL, TDACL_ERR_IO, "cannot create a temporary file for %s: %s", path, strerror(errno));
    if (st) {
        if (f) tdacl__atomic_commit(&af, 0);
        free(hdr);
        free(vals);
        free(bytes);
        return st;
    }
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    errno = 0;
    int ok = fwrite(prefix, 1, 8, f) == 8 && fwrite(hdr, 1, hlen, f) == hlen;
    for (int k = 0; k < n && ok; k++)
        if (specs[k].optional != 1) ok = write_tensor(f, &specs[k], cfg, seed, dtype, vals, bytes);
    free(hdr);
    free(vals);
    free(bytes);
    return commit(&af, ok);
}

static tdacl_status write_text(const char *path, const char *text)
{
    tdacl_atomic_file af;
    FILE *f = tdacl__atomic_open(&af, path, 0644);
    if (!f) {
        return tdacl__fail(NULL, TDACL_ERR_IO, "cannot create a temporary file for %s: %s", path, strerror(errno));
    }
    errno = 0;
    size_t n = strlen(text);
    return commit(&af, fwrite(text, 1, n, f) == n);
}

/* A topk_theta config's threshold file, when the directory has none: first_row =
 * n_positions, so every row keeps every key until tdacl calibrate writes real thresholds. */
static tdacl_status placeholder_thresholds(const char *dir, const tdacl_model_config *cfg)
{
    if (cfg->attn_kind != TDACL_ATTN_TOPK_THETA || !cfg->thresholds[0] || cfg->thresholds[0] == '/') return TDACL_SUCCESS;
    char path[TDACL_PATH_LIMIT + 300];
    snprintf(path, sizeof path, "%s/%s", dir, cfg->thresholds);
    if (!access(path, F_OK)) return TDACL_SUCCESS;
    size_t cap = 256 + (size_t)cfg->n_layer * (64 + 8 * (size_t)cfg->n_head), at = 0;
    char *text = malloc(cap);
    if (!text) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    at += (size_t)snprintf(text + at, cap - at, "{\"format\": \"tdacl-thresholds\", \"version\": 1, \"mode\": \"pre\", "
                           "\"n_layer\": %d, \"n_head\": %d,\n \"layers\": [", cfg->n_layer, cfg->n_head);
    for (int l = 0; l < cfg->n_layer; l++) {
        at += (size_t)snprintf(text + at, cap - at, "%s\n  {\"k\": 1, \"first_row\": %d, \"thresholds\": [", l ? "," : "",
                               cfg->n_positions);
        for (int h = 0; h < cfg->n_head; h++) at += (size_t)snprintf(text + at, cap - at, "%s[0]", h ? ", " : "");
        at += (size_t)snprintf(text + at, cap - at, "]}");
    }
    snprintf(text + at, cap - at, "]}\n");
    tdacl_status st = write_text(path, text);
    free(text);
    return st;
}

tdacl_status tdacl__checkpoint_write_random(const char *dir, const char *config_json, uint64_t seed, tdacl_dtype dtype)
{
    if (!dir || !*dir || !config_json)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__checkpoint_write_random: dir and config_json are required");
    if (dtype != TDACL_F32 && dtype != TDACL_BF16 && dtype != TDACL_F16)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__checkpoint_write_random: invalid dtype %d", (int)dtype);
    size_t dl = strlen(dir);
    char *cfg_path = malloc(dl + 32), *model_path = malloc(dl + 32);
    tdacl_ckpt_spec *specs = NULL;
    int n = 0;
    tdacl_status st = TDACL_SUCCESS;
    if (!cfg_path || !model_path) {
        st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "checkpoint %s: out of memory", dir);
        goto done;
    }
    snprintf(cfg_path, dl + 32, "%s/config.json", dir);
    snprintf(model_path, dl + 32, "%s/model.safetensors", dir);
    tdacl_model_config cfg;
    if ((st = tdacl__config_parse(config_json, strlen(config_json), cfg_path, &cfg))) goto done;
    if ((st = tdacl__config_tensors(&cfg, &specs, &n))) goto done;
    double bytes = 0;
    for (int k = 0; k < n; k++) bytes += (double)spec_numel(&specs[k]) * (double)tdacl_dtype_size(dtype);
    if (bytes >= MAX_DATA_BYTES) {
        st = tdacl__fail(NULL, TDACL_ERR_TOO_LARGE, "%s: %.3g bytes of weights is too large to write", model_path, bytes);
        goto done;
    }
    if (tdacl__mkdir_p(dir, 0777)) {
        st = tdacl__fail(NULL, TDACL_ERR_IO, "cannot create directory %s: %s", dir, strerror(errno));
        goto done;
    }
    if ((st = write_model(model_path, specs, n, &cfg, seed, dtype))) goto done;
    if ((st = write_text(cfg_path, config_json))) goto done;
    st = placeholder_thresholds(dir, &cfg);
done:
    free(specs);
    free(cfg_path);
    free(model_path);
    return st;
}
