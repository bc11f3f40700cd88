/* safetensors images: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
 * the data buffer the offsets index.  The checks follow the reference implementation
 * (huggingface/safetensors): the tensors must tile the data buffer exactly, in any header
 * order.  Header values never size an allocation: N is checked against the image length
 * before the header is copied, and offsets and shapes are only compared. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "base/jsonutil.h"

#define FAIL(...) return tdacl__fail(NULL, TDACL_ERR_FORMAT, __VA_ARGS__)
#define MAX_HEADER 100000000u /* the reference implementation's limit */
#define PREFIX "transformer."

/* Every dtype of the format, so that byte counts are checked even for tensors tdacl does
 * not read.  Sub-byte types (F4, F6) have no whole-byte size and count as unknown. */
static const struct { const char *name; int size; int ok; tdacl_dtype dtype; } dtypes[] = {
    {"F32", 4, 1, TDACL_F32},     {"BF16", 2, 1, TDACL_BF16},   {"F16", 2, 1, TDACL_F16},
    {"F64", 8, 0, TDACL_F32},     {"I64", 8, 0, TDACL_F32},     {"U64", 8, 0, TDACL_F32},
    {"I32", 4, 0, TDACL_F32},     {"U32", 4, 0, TDACL_F32},     {"I16", 2, 0, TDACL_F32},
    {"U16", 2, 0, TDACL_F32},     {"I8", 1, 0, TDACL_F32},      {"U8", 1, 0, TDACL_F32},
    {"BOOL", 1, 0, TDACL_F32},    {"F8_E5M2", 1, 0, TDACL_F32}, {"F8_E4M3", 1, 0, TDACL_F32},
    {"F8_E8M0", 1, 0, TDACL_F32},
};

typedef struct entry {
    tdacl_ckpt_tensor t;
    uint64_t begin, end;
} entry;

static int cmp_offsets(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((*(const entry *const *)a)->t.name, (*(const entry *const *)b)->t.name);
}

static tdacl_status check_metadata(const char *file, const cJSON *m)
{
    if (!cJSON_IsObject(m)) FAIL("%s: '__metadata__' must be an object of strings", file);
    for (const cJSON *c = m->child; c; c = c->next)
        if (!cJSON_IsString(c)) FAIL("%s: '__metadata__' value of '%.64s' is not a string", file, c->string);
    return TDACL_SUCCESS;
}

/* Fills e from the header entry `v` of tensor `key`; data_len is the data buffer's size. */
static tdacl_status parse_entry(const char *file, const char *key, const cJSON *v, uint64_t data_len, entry *e)
{
    const size_t plen = strlen(PREFIX);
    const char *canon = strncmp(key, PREFIX, plen) ? key : key + plen;
    if (strlen(canon) >= sizeof e->t.name) FAIL("%s: tensor name '%.64s...' is longer than %zu bytes", file, key, sizeof e->t.name - 1);
    memcpy(e->t.name, canon, strlen(canon) + 1);
    e->t.file = file;
    if (!cJSON_IsObject(v)) FAIL("%s: tensor '%s': entry must be an object", file, key);
    static const char *const fields[] = {"dtype", "shape", "data_offsets"};
    const cJSON *f[3];
    for (int i = 0; i < 3; i++)
        if (!(f[i] = cJSON_GetObjectItemCaseSensitive(v, fields[i]))) FAIL("%s: tensor '%s': missing '%s'", file, key, fields[i]);
    const char *dup = NULL;
    tdacl_status st = tdacl__json_duplicate_key(v, file, &dup);
    if (st) return st;
    if (dup) FAIL("%s: tensor '%s': key '%.32s' appears twice", file, key, dup);

    if (!cJSON_IsString(f[0])) FAIL("%s: tensor '%s': 'dtype' must be a string", file, key);
    int size = 0;
    for (size_t i = 0; i < TDACL_ARRAY_LEN(dtypes) && !size; i++)
        if (!strcmp(f[0]->valuestring, dtypes[i].name)) {
            size = dtypes[i].size;
            e->t.dtype = dtypes[i].dtype;
            e->t.dtype_ok = dtypes[i].ok;
            snprintf(e->t.dtype_name, sizeof e->t.dtype_name, "%s", dtypes[i].name);
        }
    if (!size) FAIL("%s: tensor '%s': unknown dtype '%.32s' (tdacl reads F32, BF16 and F16)", file, key, f[0]->valuestring);

    if (!cJSON_IsArray(f[1])) FAIL("%s: tensor '%s': 'shape' must be an array", file, key);
    int ndim = cJSON_GetArraySize(f[1]);
    if (ndim > 4) FAIL("%s: tensor '%s': %d dimensions (at most 4 are supported)", file, key, ndim);
    uint64_t numel = 1;
    int overflow = 0;
    int i = 0;
    for (const cJSON *d = f[1]->child; d; d = d->next, i++) {
        int64_t x;
        if (tdacl__json_int(d, 0, TDACL_JSON_MAX_INT, &x))
            FAIL("%s: tensor '%s': shape entry %d is not an integer in [0, 2^53]", file, key, i);
        e->t.shape[i] = x;
        /* products past 2^62 cannot describe a file; keep going to validate later entries */
        if (x && numel > (UINT64_C(1) << 62) / (uint64_t)x) overflow = 1;
        else numel *= (uint64_t)x;
    }
    e->t.ndim = ndim;
    for (int j = 0; j < ndim && overflow; j++)
        if (e->t.shape[j] == 0) overflow = 0, numel = 0; /* a zero dim makes the product 0 */
    if (overflow) FAIL("%s: tensor '%s': shape product overflows", file, key);

    if (!cJSON_IsArray(f[2]) || cJSON_GetArraySize(f[2]) != 2)
        FAIL("%s: tensor '%s': 'data_offsets' must be an array [begin, end]", file, key);
    int64_t be[2];
    for (int j = 0; j < 2; j++)
        if (tdacl__json_int(cJSON_GetArrayItem(f[2], j), 0, TDACL_JSON_MAX_INT, &be[j]))
            FAIL("%s: tensor '%s': data_offsets[%d] is not an integer in [0, 2^53]", file, key, j);
    e->begin = (uint64_t)be[0];
    e->end = (uint64_t)be[1];
    if (e->begin > e->end) FAIL("%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", file, key,
                                (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end > data_len)
        FAIL("%s: tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%llu bytes)", file, key,
             (unsigned long long)e->begin, (unsigned long long)e->end, (unsigned long long)data_len);
    if (numel > (UINT64_C(1) << 62) / (uint64_t)size) FAIL("%s: tensor '%s': shape product overflows", file, key);
    uint64_t want = numel * (uint64_t)size;
    if (want != e->end - e->begin)
        FAIL("%s: tensor '%s': %llu bytes at data_offsets [%llu, %llu], but shape and dtype %s need %llu", file, key,
             (unsigned long long)(e->end - e->begin), (unsigned long long)e->begin, (unsigned long long)e->end,
             e->t.dtype_name, (unsigned long long)want);
    e->t.nbytes = (size_t)(e->end - e->begin);
    return TDACL_SUCCESS;
}

/* The tensors must cover the data buffer exactly: sorted by offset, each begins where the
 * previous one ended, the first at 0 and the last at the end. */
static tdacl_status check_tiling(const char *file, entry *e, int n, uint64_t data_len)
{
    qsort(e, (size_t)n, sizeof *e, cmp_offsets);
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (e[i].begin < at)
            FAIL("%s: tensor '%s' (data_offsets [%llu, %llu]) overlaps tensor '%s'", file, e[i].t.name,
                 (unsigned long long)e[i].begin, (unsigned long long)e[i].end, e[i - 1].t.name);
        if (e[i].begin > at) {
            if (i == 0) FAIL("%s: %llu unused bytes before the first tensor '%s'", file, (unsigned long long)e[i].begin, e[i].t.name);
            FAIL("%s: gap of %llu bytes between tensor '%s' and tensor '%s'", file, (unsigned long long)(e[i].begin - at),
                 e[i - 1].t.name, e[i].t.name);
        }
        at = e[i].end;
    }
    if (at != data_len)
        FAIL("%s: %llu trailing bytes after the last tensor%s%s%s", file, (unsigned long long)(data_len - at),
             n ? " '" : "", n ? e[n - 1].t.name : "", n ? "'" : "");
    return TDACL_SUCCESS;
}

static tdacl_status check_unique(const char *file, entry *e, int n)
{
    if (n < 2) return TDACL_SUCCESS;
    entry **p = malloc((size_t)n * sizeof *p);
    if (!p) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", file);
    for (int i = 0; i < n; i++) p[i] = &e[i];
    qsort(p, (size_t)n, sizeof *p, cmp_names);
    tdacl_status st = TDACL_SUCCESS;
    for (int i = 1; i < n && !st; i++)
        if (!strcmp(p[i - 1]->t.name, p[i]->t.name))
            st = tdacl__fail(NULL, TDACL_ERR_FORMAT,
                             "%s: tensor '%s' appears twice (names compare without the '" PREFIX "' prefix)", file,
                             p[i]->t.name);
    free(p);
    return st;
}

static tdacl_status parse_header(const char *file, const cJSON *root, const unsigned char *data, uint64_t data_len,
                                 tdacl_ckpt_tensor **tensors, int *count)
{
    if (!cJSON_IsObject(root)) FAIL("%s: header must be a JSON object", file);
    size_t count_all = 0;
    int meta = 0;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (!strcmp(c->string, "__metadata__")) {
            if (meta++) FAIL("%s: '__metadata__' appears twice", file);
            tdacl_status st = check_metadata(file, c);
            if (st) return st;
        } else {
            count_all++;
        }
    }
    /* (a bound the compiler sees too: GCC 13 otherwise warns that the sizes below may wrap) */
    if (count_all > INT_MAX / 2) FAIL("%s: %zu tensors in the header, more than a checkpoint can hold", file, count_all);
    const int n = (int)count_all;
    entry *e = calloc(count_all ? count_all : 1, sizeof *e);
    if (!e) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory listing %d tensors", file, n);
    tdacl_status st = TDACL_SUCCESS;
    int i = 0;
    for (const cJSON *c = root->child; c && !st; c = c->next)
        if (strcmp(c->string, "__metadata__")) st = parse_entry(file, c->string, c, data_len, &e[i++]);
    if (!st) st = check_unique(file, e, n);
    if (!st) st = check_tiling(file, e, n, data_len);
    if (st) {
        free(e);
        return st;
    }
    /* compact to the public struct, in offset order */
    tdacl_ckpt_tensor *t = malloc(count_all ? count_all * sizeof *t : 1);
    if (!t) {
        free(e);
        return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", file);
    }
    for (i = 0; i < n; i++) {
        t[i] = e[i].t;
        t[i].data = data + e[i].begin;
    }
    free(e);
    *tensors = t;
    *count = n;
    return TDACL_SUCCESS;
}

tdacl_status tdacl__safetensors_parse(const unsigned char *buf, size_t len, const char *name,
                                      tdacl_ckpt_tensor **tensors, int *count)
{
    const char *file = name ? name : "safetensors";
    if (!tensors || !count || (!buf && len))
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__safetensors_parse: NULL argument");
    *tensors = NULL;
    *count = 0;
    if (len < 8) FAIL("%s: file of %zu bytes is too short for the 8-byte header length", file, len);
    uint64_t n = 0;
    for (int i = 0; i < 8; i++) n |= (uint64_t)buf[i] << (8 * i);
    if (n < 2) FAIL("%s: header length %llu is too small for a JSON object", file, (unsigned long long)n);
    if (n > MAX_HEADER)
        FAIL("%s: header length %llu exceeds the %u-byte limit", file, (unsigned long long)n, MAX_HEADER);
    if (n > len - 8)
        FAIL("%s: header length %llu runs past the end of the file (%zu bytes)", file, (unsigned long long)n, len);
    char *hdr = malloc((size_t)n + 1);
    if (!hdr) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory for a %llu-byte header", file,
                                 (unsigned long long)n);
    memcpy(hdr, buf + 8, (size_t)n);
    hdr[n] = 0;
    char what[600];
    snprintf(what, sizeof what, "%s: header", file);
    cJSON *root = NULL;
    tdacl_status st = tdacl__json_parse(hdr, (size_t)n, what, &root);
    free(hdr);
    if (!st) st = parse_header(file, root, buf + 8 + n, (uint64_t)(len - 8 - n), tensors, count);
    cJSON_Delete(root);
    return st;
}
