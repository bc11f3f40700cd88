/* Helpers for tests that edit checkpoints: load every tensor of a safetensors file into
 * memory, change the list (drop, add, rename, reshape), write it back, and split a
 * checkpoint into shards with a model.safetensors.index.json.  Header-only like
 * testutil.h; include testutil.h first. */
#ifndef TDACL_CKPT_UTIL_H
#define TDACL_CKPT_UTIL_H

#include <cjson/cJSON.h>

#include "model/checkpoint.h"

typedef struct cu_tensor {
    char name[192];   /* as it will be written (may carry a "transformer." prefix) */
    char dtype[16];   /* safetensors dtype name: "F32", "I32", ... */
    int ndim;
    int64_t shape[8];
    unsigned char *data;
    size_t nbytes;
} cu_tensor;

typedef struct cu_file {
    cu_tensor *t;
    int n;
} cu_file;

/* Every tensor of the safetensors file at path (copied out), in offset order. */
static inline cu_file cu_load(const char *path)
{
    size_t len = 0;
    unsigned char *buf = tu_read_file(path, &len);
    if (!buf) fail_msg("cannot read %s", path);
    tdacl_ckpt_tensor *t = NULL;
    int n = 0;
    tdacl_status st = tdacl__safetensors_parse(buf, len, path, &t, &n);
    if (st) fail_msg("cu_load(%s): %s", path, tdacl_last_error(NULL));
    cu_file f = {calloc((size_t)n + 1, sizeof(cu_tensor)), n};
    assert_non_null(f.t);
    for (int i = 0; i < n; i++) {
        cu_tensor *c = &f.t[i];
        snprintf(c->name, sizeof c->name, "%s", t[i].name);
        snprintf(c->dtype, sizeof c->dtype, "%s", t[i].dtype_name);
        c->ndim = t[i].ndim;
        memcpy(c->shape, t[i].shape, sizeof t[i].shape);
        c->nbytes = t[i].nbytes;
        c->data = malloc(c->nbytes + 1);
        assert_non_null(c->data);
        memcpy(c->data, t[i].data, c->nbytes);
    }
    free(t);
    free(buf);
    return f;
}

static inline void cu_free(cu_file *f)
{
    for (int i = 0; i < f->n; i++) free(f->t[i].data);
    free(f->t);
    f->t = NULL;
    f->n = 0;
}

static inline cu_tensor *cu_find(cu_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

static inline void cu_remove(cu_file *f, const char *name)
{
    cu_tensor *c = cu_find(f, name);
    if (!c) fail_msg("cu_remove: no tensor %s", name);
    free(c->data);
    memmove(c, c + 1, (size_t)(f->t + f->n - (c + 1)) * sizeof *c);
    f->n--;
}

/* Appends a tensor; data NULL fills it with the byte pattern i * 7. */
static inline cu_tensor *cu_add(cu_file *f, const char *name, const char *dtype, int ndim, const int64_t *shape,
                                const void *data, size_t nbytes)
{
    cu_tensor *g = realloc(f->t, (size_t)(f->n + 2) * sizeof *g);
    assert_non_null(g);
    f->t = g;
    cu_tensor *c = &f->t[f->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->dtype, sizeof c->dtype, "%s", dtype);
    c->ndim = ndim;
    for (int i = 0; i < ndim; i++) c->shape[i] = shape[i];
    c->nbytes = nbytes;
    c->data = malloc(nbytes + 1);
    assert_non_null(c->data);
    for (size_t i = 0; i < nbytes; i++) c->data[i] = data ? ((const unsigned char *)data)[i] : (unsigned char)(i * 7);
    return c;
}

/* Writes tensors [from, to) of f as a safetensors file, data laid out in list order.
 * The header is padded to a multiple of 8 as Hugging Face does. */
static inline void cu_save_range(const char *path, const cu_file *f, int from, int to)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t at = 0;
    for (int i = from; i < to; i++) {
        const cu_tensor *c = &f->t[i];
        cJSON *e = cJSON_AddObjectToObject(root, c->name);
        cJSON_AddStringToObject(e, "dtype", c->dtype);
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < c->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)c->shape[d]));
        cJSON *o = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)at));
        cJSON_AddItemToArray(o, cJSON_CreateNumber((double)(at + c->nbytes)));
        at += c->nbytes;
    }
    char *hdr = cJSON_PrintUnformatted(root);
    assert_non_null(hdr);
    cJSON_Delete(root);
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    FILE *out = fopen(path, "wb");
    if (!out) fail_msg("cannot create %s", path);
    unsigned char pre[8];
    for (int i = 0; i < 8; i++) pre[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    assert_int_equal(fwrite(pre, 1, 8, out), 8);
    assert_int_equal(fwrite(hdr, 1, hl, out), hl);
    for (size_t i = hl; i < padded; i++) fputc(' ', out);
    for (int i = from; i < to; i++)
        if (f->t[i].nbytes) assert_int_equal(fwrite(f->t[i].data, 1, f->t[i].nbytes, out), f->t[i].nbytes);
    assert_int_equal(fclose(out), 0);
    cJSON_free(hdr);
}

static inline void cu_save(const char *path, const cu_file *f) { cu_save_range(path, f, 0, f->n); }

/* Splits dir/model.safetensors into `shards` files model-0000K-of-0000N.safetensors (about
 * equal tensor counts), names prefixed with `prefix` ("" or "transformer."), writes
 * model.safetensors.index.json mapping each name to its shard and deletes the single
 * file. */
static inline void cu_shard(const char *dir, int shards, const char *prefix)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    cu_file f = cu_load(path);
    for (int i = 0; i < f.n; i++) {
        char tmp[192];
        snprintf(tmp, sizeof tmp, "%s%s", prefix, f.t[i].name);
        memcpy(f.t[i].name, tmp, sizeof tmp);
    }
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", 0);
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    for (int s = 0; s < shards; s++) {
        int from = f.n * s / shards, to = f.n * (s + 1) / shards;
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        cu_save_range(path, &f, from, to);
        for (int i = from; i < to; i++) cJSON_AddStringToObject(map, f.t[i].name, name);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    tu_write_file(path, text, strlen(text));
    cJSON_free(text);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    assert_int_equal(unlink(path), 0);
    cu_free(&f);
}

#endif
