/* Opening a checkpoint directory: config.json, then model.safetensors or the shards named
 * by model.safetensors.index.json, each memory-mapped read-only and validated, then the
 * whole tensor list checked against the config (docs/spec.md section 4) before anyone allocates
 * device memory for it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "base/fileio.h"
#include "base/jsonutil.h"

#define PREFIX "transformer."
#define MAX_JSON_FILE (64u << 20) /* config.json and the shard index are a few KB to a few MB */

typedef struct ckpt_file {
    char *path;
    unsigned char *map;
    size_t size;
    tdacl_ckpt_tensor *t;
    int n;
} ckpt_file;

struct tdacl_checkpoint {
    char *dir;
    tdacl_model_config cfg;
    ckpt_file *files;
    int nfiles;
    const tdacl_ckpt_tensor **sorted; /* every tensor of every file, by canonical name */
    int count;
    uint64_t parameters;
};

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static const char *canonical(const char *name)
{
    return strncmp(name, PREFIX, strlen(PREFIX)) ? name : name + strlen(PREFIX);
}

/* Whole small file, NUL-terminated.  A missing file is TDACL_ERR_IO. */
static tdacl_status read_text(const char *path, char **text, size_t *len)
{
    *len = 0;
    *text = tdacl__read_regular(path, MAX_JSON_FILE, len);
    if (*text) return TDACL_SUCCESS;
    if (errno == EFBIG)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: more than %llu bytes is implausibly large", path,
                           (unsigned long long)MAX_JSON_FILE);
    if (errno == ENOMEM) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    return tdacl__fail(NULL, TDACL_ERR_IO, "cannot open %s: %s", path, tdacl__file_error(errno));
}

/* Maps f->path read-only and validates its safetensors header. */
static tdacl_status map_file(ckpt_file *f)
{
    int fd = tdacl__open_regular(f->path);
    if (fd < 0) return tdacl__fail(NULL, TDACL_ERR_IO, "cannot open %s: %s", f->path, tdacl__file_error(errno));
    struct stat sb;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
        close(fd);
        return tdacl__fail(NULL, TDACL_ERR_IO, "cannot read %s: not a regular file", f->path);
    }
    f->size = (size_t)sb.st_size;
    if (f->size) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            f->size = 0;
            return tdacl__fail(NULL, TDACL_ERR_IO, "cannot map %s: %s", f->path, strerror(e));
        }
        f->map = m;
    }
    close(fd);
    static const unsigned char empty[1];
    return tdacl__safetensors_parse(f->map ? f->map : empty, f->size, f->path, &f->t, &f->n);
}

static int cmp_tensor_ptr(const void *a, const void *b)
{
    return strcmp((*(const tdacl_ckpt_tensor *const *)a)->name, (*(const tdacl_ckpt_tensor *const *)b)->name);
}

static int find(const tdacl_checkpoint *c, const char *name)
{
    int lo = 0, hi = c->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int r = strcmp(c->sorted[mid]->name, name);
        if (!r) return mid;
        if (r < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The name table over all files; a tensor in two shards is an error. */
static tdacl_status build_index(tdacl_checkpoint *c)
{
    int n = 0;
    for (int i = 0; i < c->nfiles; i++) n += c->files[i].n;
    c->sorted = malloc((n ? (size_t)n : 1) * sizeof *c->sorted);
    if (!c->sorted) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "checkpoint %s: out of memory", c->dir);
    for (int i = 0; i < c->nfiles; i++)
        for (int j = 0; j < c->files[i].n; j++) c->sorted[c->count++] = &c->files[i].t[j];
    qsort(c->sorted, (size_t)c->count, sizeof *c->sorted, cmp_tensor_ptr);
    for (int i = 1; i < c->count; i++)
        if (!strcmp(c->sorted[i - 1]->name, c->sorted[i]->name))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "checkpoint %s: tensor '%s' is in both %s and %s", c->dir,
                               c->sorted[i]->name, c->sorted[i - 1]->file, c->sorted[i]->file);
    return TDACL_SUCCESS;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* model.safetensors.index.json: {"weight_map": {tensor: shard file}}.  Every shard must
 * exist and hold the tensors the map assigns to it. */
static tdacl_status open_sharded(tdacl_checkpoint *c, const char *index_path)
{
    char *text = NULL;
    size_t len = 0;
    tdacl_status st = read_text(index_path, &text, &len);
    if (st) return st;
    cJSON *root = NULL;
    st = tdacl__json_parse(text, len, index_path, &root);
    free(text);
    if (st) return st;
    const char **shards = NULL;
    const cJSON *map = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
    int n = 0;
    if (!map || !cJSON_IsObject(map)) {
        st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
        goto done;
    }
    for (const cJSON *e = map->child; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: weight_map entry '%.128s' is not a file name", index_path, e->string);
            goto done;
        }
        const char *s = e->valuestring;
        /* shards live in the checkpoint directory: no paths out of it */
        if (!*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) {
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: weight_map entry '%.128s' names '%.128s', not a file in the directory",
                             index_path, e->string, s);
            goto done;
        }
        n++;
    }
    shards = malloc((n ? (size_t)n : 1) * sizeof *shards);
    if (!shards) {
        st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        goto done;
    }
    int k = 0;
    for (const cJSON *e = map->child; e; e = e->next) shards[k++] = e->valuestring;
    qsort(shards, (size_t)n, sizeof *shards, cmp_str);
    int unique = 0;
    for (int i = 0; i < n; i++)
        if (!unique || strcmp(shards[unique - 1], shards[i])) shards[unique++] = shards[i];
    if (!unique) {
        st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: weight_map is empty", index_path);
        goto done;
    }
    c->files = calloc((size_t)unique, sizeof *c->files);
    if (!c->files) {
        st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        goto done;
    }
    c->nfiles = unique;
    for (int i = 0; i < unique && !st; i++) {
        if (!(c->files[i].path = join(c->dir, shards[i])))
            st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        else if ((st = map_file(&c->files[i])) == TDACL_ERR_IO)
            st = tdacl__fail(NULL, TDACL_ERR_IO, "%s (shard named by %s)", tdacl_last_error(NULL), index_path);
    }
    if (!st) st = build_index(c);
    /* each mapping must agree with where the tensor is; tensors the map omits are used, as
       Hugging Face loads every tensor of every shard, but reported */
    char *listed = st ? NULL : calloc(c->count ? (size_t)c->count : 1, 1);
    if (!st && !listed) st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
    for (const cJSON *e = map->child; e && !st; e = e->next) {
        const char *name = canonical(e->string);
        int i = find(c, name);
        char *want = join(c->dir, e->valuestring);
        if (!want) st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", index_path);
        else if (i < 0)
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: maps tensor '%.128s' to %s, which does not contain it", index_path,
                             e->string, want);
        else if (strcmp(c->sorted[i]->file, want))
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: maps tensor '%.128s' to %s, but it is in %s", index_path, e->string,
                             want, c->sorted[i]->file);
        else if (listed[i])
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: tensor '%s' is mapped twice (names compare without the '" PREFIX
                             "' prefix)", index_path, name);
        else
            listed[i] = 1;
        free(want);
    }
    for (int i = 0; i < c->count && !st; i++)
        if (!listed[i])
            tdacl__log(NULL, TDACL_LOG_WARN, "%s: tensor '%s' of %s is missing from the weight_map (used anyway)", index_path,
                       c->sorted[i]->name, c->sorted[i]->file);
    free(listed);
done:
    free(shards);
    cJSON_Delete(root);
    return st;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

static int shape_ok(const tdacl_ckpt_spec *s, const tdacl_ckpt_tensor *t, int n_head)
{
    if (s->scalar) {
        if (t->ndim == 0) return 1;
        return t->ndim == 1 && (t->shape[0] == 1 || (s->scalar == 2 && t->shape[0] == n_head));
    }
    if (t->ndim != s->ndim) return 0;
    for (int i = 0; i < s->ndim; i++)
        if (t->shape[i] != s->shape[i]) return 0;
    return 1;
}

/* GPT-2's causal-mask buffers, which older transformers versions saved: h.N.attn.bias and
 * h.N.attn.masked_bias. */
static int is_gpt2_buffer(const char *name)
{
    if (strncmp(name, "h.", 2)) return 0;
    const char *p = name + 2;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    return !strcmp(p, ".attn.bias") || !strcmp(p, ".attn.masked_bias");
}

static tdacl_status validate(tdacl_checkpoint *c)
{
    tdacl_model_config *cfg = &c->cfg;
    tdacl_ckpt_spec *specs = NULL;
    int ns = 0;
    tdacl_status st = tdacl__config_tensors(cfg, &specs, &ns);
    if (st) return st;
    char *used = calloc(c->count ? (size_t)c->count : 1, 1);
    if (!used) {
        free(specs);
        return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "checkpoint %s: out of memory", c->dir);
    }
    c->parameters = 0;
    for (int k = 0; k < ns && !st; k++) {
        const tdacl_ckpt_spec *s = &specs[k];
        int i = find(c, s->name);
        if (i < 0) {
            if (s->optional) continue;
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "checkpoint %s: tensor '%s' is missing%s%s%s", c->dir, s->name,
                             s->why[0] ? " (required by " : "", s->why, s->why[0] ? ")" : "");
            break;
        }
        const tdacl_ckpt_tensor *t = c->sorted[i];
        if (!t->dtype_ok) {
            st = tdacl__fail(NULL, TDACL_ERR_DTYPE, "%s: tensor '%s' has dtype %s; expected F32, BF16 or F16", t->file,
                             s->name, t->dtype_name);
            break;
        }
        if (!shape_ok(s, t, cfg->n_head)) {
            char want[96], got[96];
            if (s->scalar == 1) snprintf(want, sizeof want, "[] or [1]");
            else if (s->scalar == 2) snprintf(want, sizeof want, "[], [1] or [%d] (n_head)", cfg->n_head);
            else shape_str(want, sizeof want, s->ndim, s->shape);
            shape_str(got, sizeof got, t->ndim, t->shape);
            st = tdacl__fail(NULL, TDACL_ERR_SHAPE, "%s: tensor '%s' has shape %s; expected %s%s%s%s", t->file, s->name, got,
                             want, s->why[0] ? " (" : "", s->why, s->why[0] ? ")" : "");
            break;
        }
        used[i] = 1;
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        c->parameters += numel;
    }
    if (!st) {
        int lm = find(c, "lm_head.weight");
        if (cfg->tie_word_embeddings < 0) cfg->tie_word_embeddings = lm < 0;
        for (int i = 0; i < c->count; i++) {
            if (used[i]) continue;
            const tdacl_ckpt_tensor *t = c->sorted[i];
            if (i == lm)
                tdacl__log(NULL, TDACL_LOG_INFO, "%s: tensor 'lm_head.weight' ignored: config.json sets tie_word_embeddings",
                           t->file);
            else if (!strcmp(t->name, "wpe.weight"))
                tdacl__log(NULL, TDACL_LOG_INFO, "%s: tensor 'wpe.weight' ignored: the config uses rope positions", t->file);
            else if (is_gpt2_buffer(t->name))
                tdacl__log(NULL, TDACL_LOG_DEBUG, "%s: GPT-2 mask buffer '%s' ignored", t->file, t->name);
            else
                tdacl__log(NULL, TDACL_LOG_WARN, "%s: unknown tensor '%s' ignored", t->file, t->name);
        }
    }
    free(used);
    free(specs);
    return st;
}

tdacl_status tdacl__checkpoint_open(const char *dir, tdacl_checkpoint **out)
{
    if (!out) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__checkpoint_open: out is NULL");
    *out = NULL;
    if (!dir || !*dir) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__checkpoint_open: no directory given");
    tdacl_checkpoint *c = calloc(1, sizeof *c);
    char *cfg_path = join(dir, "config.json");
    char *single = join(dir, "model.safetensors");
    char *index = join(dir, "model.safetensors.index.json");
    tdacl_status st = TDACL_SUCCESS;
    if (!c || !cfg_path || !single || !index || !(c->dir = malloc(strlen(dir) + 1))) {
        st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "checkpoint %s: out of memory", dir);
        goto done;
    }
    memcpy(c->dir, dir, strlen(dir) + 1);
    char *text = NULL;
    size_t len = 0;
    if ((st = read_text(cfg_path, &text, &len))) goto done;
    st = tdacl__config_parse(text, len, cfg_path, &c->cfg);
    free(text);
    if (st) goto done;

    /* model.safetensors wins; anything but "absent" (a permission error, say) is reported
       by trying to open it */
    struct stat sb;
    int use_single = stat(single, &sb) == 0 || errno != ENOENT;
    if (!use_single && stat(index, &sb) != 0 && errno == ENOENT) {
        st = tdacl__fail(NULL, TDACL_ERR_IO, "checkpoint %s: neither model.safetensors nor model.safetensors.index.json exists",
                         dir);
        goto done;
    }
    if (use_single) {
        if (!(c->files = calloc(1, sizeof *c->files))) {
            st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "checkpoint %s: out of memory", dir);
            goto done;
        }
        c->nfiles = 1;
        c->files[0].path = single;
        single = NULL;
        if ((st = map_file(&c->files[0]))) goto done;
        st = build_index(c);
    } else {
        st = open_sharded(c, index);
    }
    if (!st) st = validate(c);
done:
    free(cfg_path);
    free(single);
    free(index);
    if (st) {
        tdacl__checkpoint_close(c);
        return st;
    }
    *out = c;
    return TDACL_SUCCESS;
}

const tdacl_model_config *tdacl__checkpoint_config(const tdacl_checkpoint *c) { return c ? &c->cfg : NULL; }

const char *tdacl__checkpoint_dir(const tdacl_checkpoint *c) { return c ? c->dir : NULL; }

uint64_t tdacl__checkpoint_parameters(const tdacl_checkpoint *c) { return c ? c->parameters : 0; }

const tdacl_ckpt_tensor *tdacl__checkpoint_get(const tdacl_checkpoint *c, const char *name)
{
    if (!c || !name) return NULL;
    int i = find(c, canonical(name));
    return i < 0 ? NULL : c->sorted[i];
}

void tdacl__checkpoint_close(tdacl_checkpoint *c)
{
    if (!c) return;
    for (int i = 0; i < c->nfiles; i++) {
        if (c->files[i].map) munmap(c->files[i].map, c->files[i].size);
        free(c->files[i].t);
        free(c->files[i].path);
    }
    free(c->files);
    free(c->sorted);
    free(c->dir);
    free(c);
}
