/* Top-theta threshold files (docs/spec.md section 4.7), checked key by key: every error
 * names the file and the key, and nothing is allocated from a size the file claims
 * without the data to back it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/jsonutil.h"
#include "model/thresholds.h"

#define MAX_FILE_BYTES (1u << 30)

typedef struct reader {
    const char *file;
    int n_head, max_rows;
} reader;

static tdacl_status bad(const reader *r, const char *fmt, const char *key, int layer, const char *what)
{
    char where[96];
    if (layer >= 0) snprintf(where, sizeof where, "layers[%d]%s%s", layer, *key ? "." : "", key);
    else snprintf(where, sizeof where, "%s", key);
    char msg[256];
    snprintf(msg, sizeof msg, fmt, where, what);
    return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: %s", r->file, msg);
}

/* An integer key in [lo, hi]; absent: *out keeps its value unless required. */
static tdacl_status get_int(const reader *r, const cJSON *o, const char *key, int layer, int required, int lo, int hi,
                            int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return required ? bad(r, "missing key '%s'%s", key, layer, "") : TDACL_SUCCESS;
    int64_t x;
    if (tdacl__json_int(v, lo, hi, &x)) {
        char range[64];
        snprintf(range, sizeof range, " must be an integer in [%d, %d]", lo, hi);
        return bad(r, "key '%s'%s", key, layer, range);
    }
    *out = (int)x;
    return TDACL_SUCCESS;
}

/* `key` of layer `layer`: n_head arrays of numbers, each of the same length (>= 1, at most
 * max_len when max_len > 0); values copied into a new [n_head, len] double array. */
static tdacl_status get_rows(const reader *r, const cJSON *o, const char *key, int layer, int max_len, double **vals,
                             int *len)
{
    *vals = NULL;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a)) return bad(r, "key '%s' must be an array of one array a head%s", key, layer, "");
    if (cJSON_GetArraySize(a) != r->n_head) {
        char n[64];
        snprintf(n, sizeof n, " has %d arrays, the model %d heads", cJSON_GetArraySize(a), r->n_head);
        return bad(r, "key '%s'%s", key, layer, n);
    }
    int n = -1, h = 0;
    char at[96];
    for (const cJSON *row = a->child; row; row = row->next, h++) {
        int m = cJSON_IsArray(row) ? cJSON_GetArraySize(row) : -1;
        if (m < 1 || (n >= 0 && m != n) || (max_len > 0 && m > max_len)) {
            char why[96];
            if (m < 1) snprintf(why, sizeof why, "must be a non-empty array of numbers");
            else if (max_len > 0 && m > max_len) snprintf(why, sizeof why, "has %d values, at most %d", m, max_len);
            else snprintf(why, sizeof why, "has %d values, head 0 has %d (heads share a length)", m, n);
            snprintf(at, sizeof at, "%s[%d]", key, h);
            return bad(r, "key '%s' %s", at, layer, why);
        }
        n = m;
    }
    if (n < 1) return bad(r, "key '%s' must be an array of one array a head%s", key, layer, ""); /* (no heads) */
    double *v = malloc((size_t)r->n_head * (size_t)n * sizeof *v);
    if (!v) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", r->file);
    h = 0;
    for (const cJSON *row = a->child; row; row = row->next, h++) {
        int i = 0;
        for (const cJSON *x = row->child; x; x = x->next, i++) {
            /* a float must hold it: the kernels compare in fp32 */
            if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || fabs(x->valuedouble) > 3.0e38) {
                free(v);
                snprintf(at, sizeof at, "%s[%d][%d]", key, h, i);
                return bad(r, "key '%s' %s", at, layer, "must be a finite number of fp32 range");
            }
            v[(size_t)h * n + i] = x->valuedouble;
        }
    }
    *vals = v;
    *len = n;
    return TDACL_SUCCESS;
}

double tdacl__threshold_fit_eval(const double *coef, int n, int64_t r)
{
    const double x = log((double)r + 1.0);
    double y = 0.0;
    for (int i = n - 1; i >= 0; i--) y = y * x + coef[i];
    return y;
}

/* A [H, R] table: -inf below first_row, then vals[h] (len values; past them the last). */
static float *expand(const reader *r, const double *vals, int len, int first_row, int R, int fit)
{
    float *t = malloc((size_t)r->n_head * (size_t)R * sizeof *t);
    if (!t) return NULL;
    for (int h = 0; h < r->n_head; h++)
        for (int c = 0; c < R; c++) {
            const double *row = vals + (size_t)h * len;
            double y = c < first_row ? -INFINITY
                       : fit        ? tdacl__threshold_fit_eval(row, len, c)
                                    : row[c - first_row < len ? c - first_row : len - 1];
            /* a fitted value past fp32 range keeps (or drops) every key, as its sign says */
            t[(size_t)h * R + c] = (float)(y > 3.0e38 ? INFINITY : y < -3.0e38 ? -INFINITY : y);
        }
    return t;
}

static tdacl_status parse_layer(const reader *r, const cJSON *o, int l, tdacl_threshold_layer *L)
{
    if (!cJSON_IsObject(o)) return bad(r, "'%s' must be an object%s", "", l, "");
    const char *dup = NULL;
    tdacl_status st = tdacl__json_duplicate_key(o, r->file, &dup);
    if (st) return st;
    if (dup) return bad(r, "key '%s' appears twice%s", dup, l, "");
    if ((st = get_int(r, o, "k", l, 1, 1, 1 << 30, &L->k))) return st;
    L->first_row = L->k;
    if ((st = get_int(r, o, "first_row", l, 0, 0, 1 << 30, &L->first_row))) return st;
    const int table = cJSON_HasObjectItem(o, "thresholds"), fit = cJSON_HasObjectItem(o, "fit");
    if (table == fit)
        return bad(r, "'%s' needs exactly one of 'thresholds' (a table) and 'fit' (a function)%s", "", l, "");
    double *vals = NULL, *mass = NULL;
    int len = 0, mlen = 0;
    st = get_rows(r, o, table ? "thresholds" : "fit", l, table ? 0 : TDACL_THRESHOLDS_MAX_FIT, &vals, &len);
    if (!st && cJSON_HasObjectItem(o, "sdc_log_mass")) st = get_rows(r, o, "sdc_log_mass", l, 0, &mass, &mlen);
    if (!st) {
        /* columns: the table's rows (a function: every row the model holds), within max_rows */
        int64_t R = fit ? r->max_rows : (int64_t)L->first_row + len;
        if (mass && (int64_t)L->first_row + mlen > R) R = (int64_t)L->first_row + mlen;
        if (R > r->max_rows) R = r->max_rows;
        if (R < 1) R = 1;
        L->rows = (int)R;
        L->theta = expand(r, vals, len, L->first_row, L->rows, fit);
        if (mass) L->log_mass = expand(r, mass, mlen, L->first_row, L->rows, 0);
        if (!L->theta || (mass && !L->log_mass)) st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", r->file);
    }
    static const char *const known[] = {"k", "first_row", "thresholds", "fit", "sdc_log_mass"};
    for (const cJSON *c = o->child; !st && c; c = c->next) {
        int k = 0;
        for (size_t i = 0; i < TDACL_ARRAY_LEN(known); i++) k |= !strcmp(c->string, known[i]);
        if (!k) tdacl__log(NULL, TDACL_LOG_WARN, "%s: unknown key 'layers[%d].%.64s' ignored", r->file, l, c->string);
    }
    free(vals), free(mass);
    return st;
}

static tdacl_status parse_root(const reader *r, const cJSON *root, int n_layer, tdacl_thresholds *out)
{
    if (!cJSON_IsObject(root)) return bad(r, "the top level%s%s must be a JSON object", "", -1, "");
    const char *dup = NULL;
    tdacl_status st = tdacl__json_duplicate_key(root, r->file, &dup);
    if (st) return st;
    if (dup) return bad(r, "key '%s' appears twice%s", dup, -1, "");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(f) || strcmp(f->valuestring, TDACL_THRESHOLDS_FORMAT))
        return bad(r, "key '%s' must be \"" TDACL_THRESHOLDS_FORMAT "\"%s", "format", -1, " (not a threshold file)");
    int version = 0, L = 0, H = 0;
    if ((st = get_int(r, root, "version", -1, 1, 1, 1 << 30, &version))) return st;
    if (version != 1) return bad(r, "key '%s'%s", "version", -1, " is not 1, the only version this library reads");
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "mode");
    if (!cJSON_IsString(mode) || (strcmp(mode->valuestring, "pre") && strcmp(mode->valuestring, "post")))
        return bad(r, "key '%s' must be \"pre\" (scores) or \"post\" (softmax weights)%s", "mode", -1, "");
    out->post = !strcmp(mode->valuestring, "post");
    if ((st = get_int(r, root, "n_layer", -1, 1, 1, 1 << 20, &L))) return st;
    if ((st = get_int(r, root, "n_head", -1, 1, 1, 1 << 20, &H))) return st;
    if (L != n_layer || H != r->n_head) {
        char why[128];
        snprintf(why, sizeof why, " (%d layers, %d heads) does not match the model (%d layers, %d heads)", L, H, n_layer,
                 r->n_head);
        return bad(r, "%s%s", "n_layer/n_head", -1, why);
    }
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) != n_layer)
        return bad(r, "key '%s' must be an array of one object a layer%s", "layers", -1, "");
    out->layers = calloc((size_t)n_layer, sizeof *out->layers);
    if (!out->layers) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", r->file);
    out->n_layer = n_layer, out->n_head = H;
    int l = 0;
    for (const cJSON *o = layers->child; !st && o; o = o->next, l++) st = parse_layer(r, o, l, &out->layers[l]);
    static const char *const known[] = {"format", "version", "mode", "n_layer", "n_head", "layers", "calibration"};
    for (const cJSON *c = root->child; !st && c; c = c->next) {
        int k = 0;
        for (size_t i = 0; i < TDACL_ARRAY_LEN(known); i++) k |= !strcmp(c->string, known[i]);
        if (!k) tdacl__log(NULL, TDACL_LOG_WARN, "%s: unknown key '%.64s' ignored", r->file, c->string);
    }
    return st;
}

tdacl_status tdacl__thresholds_parse(const char *text, size_t len, const char *name, int n_layer, int n_head,
                                     int max_rows, tdacl_thresholds *out)
{
    const char *file = name ? name : "thresholds";
    if (!out || (!text && len) || n_layer < 1 || n_head < 1 || max_rows < 1)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl__thresholds_parse: bad argument");
    memset(out, 0, sizeof *out);
    cJSON *root = NULL;
    tdacl_status st = tdacl__json_parse(text, len, file, &root);
    const reader r = {file, n_head, max_rows};
    if (!st) st = parse_root(&r, root, n_layer, out);
    cJSON_Delete(root);
    if (st) tdacl__thresholds_free(out);
    return st;
}

tdacl_status tdacl__thresholds_read(const char *path, int n_layer, int n_head, int max_rows, tdacl_thresholds *out)
{
    size_t len = 0;
    char *text = tdacl__read_regular(path, MAX_FILE_BYTES, &len);
    if (!text) return tdacl__fail(NULL, TDACL_ERR_IO, "cannot read threshold file %s: %s", path, tdacl__file_error(errno));
    tdacl_status st = tdacl__thresholds_parse(text, len, path, n_layer, n_head, max_rows, out);
    free(text);
    return st;
}

void tdacl__thresholds_free(tdacl_thresholds *t)
{
    if (!t) return;
    for (int l = 0; t->layers && l < t->n_layer; l++) free(t->layers[l].theta), free(t->layers[l].log_mass);
    free(t->layers);
    memset(t, 0, sizeof *t);
}
