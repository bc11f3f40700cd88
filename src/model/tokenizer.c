/* GPT-2 byte-level BPE (docs/spec.md §4.4): the text is split into pre-tokens by GPT-2's
 * rules (contractions, letter runs, number runs, other runs, each with one optional leading
 * space, and whitespace runs), each pre-token's bytes become one symbol per byte, and the
 * merges of the model join adjacent symbols, lowest rank first (leftmost on a tie), until
 * no listed pair is left.  Added tokens (<|endoftext|>) are cut out of the text first and
 * map to their own ids.  Decoding maps each token's characters back to bytes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/jsonutil.h"
#include "model/hub.h"
#include "model/unicode_tables.h"

#define MAX_FILE_BYTES ((size_t)256 << 20)

/* string -> id, open addressing */
typedef struct vocab_slot {
    const char *s; /* NUL-terminated, owned by tok->strings */
    uint32_t len;
    int32_t id;
} vocab_slot;

/* (left id, right id) -> merge rank and the merged id */
typedef struct merge_slot {
    uint64_t key; /* 0 = empty; (left + 1) << 32 | (right + 1) */
    int32_t rank, merged;
} merge_slot;

struct tdacl_tokenizer {
    vocab_slot *vocab;
    size_t vocab_cap;
    merge_slot *merges;
    size_t merge_cap;
    char **id_str; /* id -> token string (NULL for ids the vocabulary skips) */
    uint32_t *id_len;
    int32_t n_ids;
    int32_t byte_id[256]; /* the one-character symbol of each byte, -1 if absent */
    int16_t char_byte[0x144]; /* the byte a character U+0000..U+0143 stands for, or -1 */
    int32_t unk_id;       /* -1: unknown symbols are dropped */
    int ignore_merges;    /* a pre-token that is itself in the vocabulary is taken whole */
    int32_t *added;       /* ids of added tokens, longest content first */
    int n_added;
};

/* ---- byte <-> character map of byte-level BPE: printable Latin-1 bytes stand for
 * themselves, the other 68 bytes for U+0100.. in byte order ---- */
static uint32_t byte_char(int b)
{
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) return (uint32_t)b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) n++;
    return 0x100u + (uint32_t)n;
}

static size_t utf8_put(uint32_t c, char *out)
{
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xc0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3f)), 2;
    if (c < 0x10000)
        return out[0] = (char)(0xe0 | c >> 12), out[1] = (char)(0x80 | (c >> 6 & 0x3f)), out[2] = (char)(0x80 | (c & 0x3f)), 3;
    out[0] = (char)(0xf0 | c >> 18), out[1] = (char)(0x80 | (c >> 12 & 0x3f));
    out[2] = (char)(0x80 | (c >> 6 & 0x3f)), out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* Code point at s[*i] of valid UTF-8; advances *i. */
static uint32_t utf8_next(const unsigned char *s, size_t *i)
{
    uint32_t c = s[*i];
    int n = c < 0x80 ? 0 : c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
    c = n == 0 ? c : n == 1 ? c & 0x1f : n == 2 ? c & 0x0f : c & 0x07;
    (*i)++;
    for (int k = 0; k < n; k++) c = c << 6 | (s[(*i)++] & 0x3fu);
    return c;
}

/* ---- hash tables ---- */
static size_t str_hash(const char *s, size_t n) { return (size_t)tdacl__fnv1a64(s, n, TDACL_FNV_SEED); }

static int32_t vocab_find(const tdacl_tokenizer *t, const char *s, size_t n)
{
    for (size_t i = str_hash(s, n) & (t->vocab_cap - 1);; i = (i + 1) & (t->vocab_cap - 1)) {
        const vocab_slot *v = &t->vocab[i];
        if (!v->s) return -1;
        if (v->len == n && !memcmp(v->s, s, n)) return v->id;
    }
}

static const merge_slot *merge_find(const tdacl_tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = ((uint64_t)(uint32_t)(a + 1) << 32) | (uint32_t)(b + 1);
    for (size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & (t->merge_cap - 1);; i = (i + 1) & (t->merge_cap - 1)) {
        if (!t->merges[i].key) return NULL;
        if (t->merges[i].key == key) return &t->merges[i];
    }
}

static size_t pow2_above(size_t n)
{
    size_t c = 16;
    while (c < 2 * n + 16) c *= 2;
    return c;
}

static tdacl_status oom(void) { return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "tokenizer: out of memory"); }

/* Adds token s (len n) with id; the id table grows to hold it. */
static tdacl_status vocab_add(tdacl_tokenizer *t, const char *s, size_t n, int32_t id, const char *what)
{
    if (id < 0 || id >= t->n_ids)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: token id %d out of range [0, %d)", what, id, t->n_ids);
    if (t->id_str[id]) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: id %d is given to two tokens", what, id);
    char *copy = malloc(n + 1);
    if (!copy) return oom();
    memcpy(copy, s, n), copy[n] = 0;
    t->id_str[id] = copy, t->id_len[id] = (uint32_t)n;
    size_t i = str_hash(s, n) & (t->vocab_cap - 1);
    while (t->vocab[i].s) {
        if (t->vocab[i].len == n && !memcmp(t->vocab[i].s, s, n))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: token \"%s\" appears twice", what, copy);
        i = (i + 1) & (t->vocab_cap - 1);
    }
    t->vocab[i] = (vocab_slot){copy, (uint32_t)n, id};
    return TDACL_SUCCESS;
}

/* "left right" (one space) -> rank */
static tdacl_status merge_add(tdacl_tokenizer *t, const char *left, size_t ln, const char *right, size_t rn, int32_t rank,
                              const char *what)
{
    int32_t a = vocab_find(t, left, ln), b = vocab_find(t, right, rn);
    char joined[1024];
    if (ln + rn >= sizeof joined) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: merge %d is too long", what, rank);
    memcpy(joined, left, ln), memcpy(joined + ln, right, rn);
    int32_t m = vocab_find(t, joined, ln + rn);
    if (a < 0 || b < 0 || m < 0)
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: merge %d (\"%.*s\" \"%.*s\") names a token missing from the vocabulary",
                           what, rank, (int)ln, left, (int)rn, right);
    uint64_t key = ((uint64_t)(uint32_t)(a + 1) << 32) | (uint32_t)(b + 1);
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull >> 20) & (t->merge_cap - 1);
    while (t->merges[i].key) {
        if (t->merges[i].key == key) return TDACL_SUCCESS; /* a repeated merge keeps its first rank */
        i = (i + 1) & (t->merge_cap - 1);
    }
    t->merges[i] = (merge_slot){key, rank, m};
    return TDACL_SUCCESS;
}

static tdacl_status alloc_tables(tdacl_tokenizer *t, int32_t n_ids, size_t n_merges)
{
    t->n_ids = n_ids;
    t->vocab_cap = pow2_above((size_t)n_ids);
    t->merge_cap = pow2_above(n_merges);
    t->vocab = calloc(t->vocab_cap, sizeof *t->vocab);
    t->merges = calloc(t->merge_cap, sizeof *t->merges);
    t->id_str = calloc((size_t)n_ids + 1, sizeof *t->id_str);
    t->id_len = calloc((size_t)n_ids + 1, sizeof *t->id_len);
    return t->vocab && t->merges && t->id_str && t->id_len ? TDACL_SUCCESS : oom();
}

/* The vocabulary object {"token": id, ...}: ids must be whole numbers below 2^31. */
static tdacl_status load_vocab(tdacl_tokenizer *t, const cJSON *vocab, const cJSON *added, size_t n_merges,
                               const char *what)
{
    if (!cJSON_IsObject(vocab)) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: the vocabulary is not a JSON object", what);
    int64_t max_id = -1;
    const cJSON *e;
    const cJSON *lists[2] = {vocab, added};
    for (int l = 0; l < 2; l++)
        cJSON_ArrayForEach(e, lists[l])
        {
            const cJSON *idv = l ? cJSON_GetObjectItemCaseSensitive(e, "id") : e;
            int64_t id;
            if (tdacl__json_int(idv, 0, 2147483646.0, &id))
                return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: a token id is not a whole number in [0, 2^31)", what);
            if (id > max_id) max_id = id;
        }
    if (max_id < 0) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: the vocabulary is empty", what);
    tdacl_status st = alloc_tables(t, (int32_t)(max_id + 1), n_merges);
    cJSON_ArrayForEach(e, vocab)
    {
        if (st) break;
        st = vocab_add(t, e->string, strlen(e->string), (int32_t)e->valuedouble, what);
    }
    return st;
}

/* Added tokens [{"id": n, "content": "..."}]: their ids, longest content first, so the
 * longest one matching at a position is cut out. */
static tdacl_status load_added(tdacl_tokenizer *t, const cJSON *added, const char *what)
{
    int n = cJSON_GetArraySize(added);
    if (!n) return TDACL_SUCCESS;
    t->added = calloc((size_t)n, sizeof *t->added);
    if (!t->added) return oom();
    const cJSON *e;
    cJSON_ArrayForEach(e, added)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        if (!cJSON_IsString(c) || !c->valuestring[0])
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: added token %d has no \"content\" string", what, id);
        if (!t->id_str[id]) {
            tdacl_status st = vocab_add(t, c->valuestring, strlen(c->valuestring), id, what);
            if (st) return st;
        } else if (strcmp(t->id_str[id], c->valuestring))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: added token %d is \"%s\" but the vocabulary's id %d is \"%s\"",
                               what, id, c->valuestring, id, t->id_str[id]);
        int k = t->n_added++;
        while (k > 0 && t->id_len[t->added[k - 1]] < t->id_len[id]) t->added[k] = t->added[k - 1], k--;
        t->added[k] = id;
    }
    return TDACL_SUCCESS;
}

/* A merge as "a b" or ["a", "b"] (newer tokenizers). */
static tdacl_status load_merge(tdacl_tokenizer *t, const cJSON *m, int32_t rank, const char *what)
{
    if (cJSON_IsString(m)) {
        const char *s = m->valuestring, *sp = strchr(s, ' ');
        if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: merge %d \"%s\" is not two tokens separated by one space", what, rank, s);
        return merge_add(t, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), rank, what);
    }
    if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next))
        return merge_add(t, m->child->valuestring, strlen(m->child->valuestring), m->child->next->valuestring,
                         strlen(m->child->next->valuestring), rank, what);
    return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: merge %d is neither \"a b\" nor [\"a\", \"b\"]", what, rank);
}

static tdacl_status read_json(const char *path, cJSON **out)
{
    size_t len;
    char *text = tdacl__read_regular(path, MAX_FILE_BYTES, &len);
    if (!text) return tdacl__fail(NULL, TDACL_ERR_IO, "tokenizer: cannot read %s: %s", path, tdacl__file_error(errno));
    tdacl_status st = tdacl__json_parse(text, len, path, out);
    free(text);
    return st;
}

static tdacl_status load_tokenizer_json(tdacl_tokenizer *t, const char *path)
{
    cJSON *root;
    tdacl_status st = read_json(path, &root);
    if (st) return st;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *pre_type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
        st = tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED, "%s: model.type is %s; only \"BPE\" is supported", path,
                         cJSON_IsString(type) ? type->valuestring : "missing");
    else if (!cJSON_IsString(pre_type) || strcmp(pre_type->valuestring, "ByteLevel"))
        st = tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED, "%s: pre_tokenizer.type is %s; only GPT-2's \"ByteLevel\" is supported",
                         path, cJSON_IsString(pre_type) ? pre_type->valuestring : "missing");
    else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space")))
        st = tdacl__fail(NULL, TDACL_ERR_UNSUPPORTED, "%s: pre_tokenizer.add_prefix_space true is not supported", path);
    else if (!cJSON_IsArray(merges))
        st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: model.merges is not an array", path);
    else if (added && !cJSON_IsArray(added))
        st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: added_tokens is not an array", path);
    if (!st) st = load_vocab(t, vocab, added, (size_t)cJSON_GetArraySize(merges), path);
    if (!st) st = load_added(t, added, path);
    int32_t rank = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges)
    {
        if (st) break;
        st = load_merge(t, m, rank++, path);
    }
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    t->unk_id = -1;
    if (!st && cJSON_IsString(unk)) {
        t->unk_id = vocab_find(t, unk->valuestring, strlen(unk->valuestring));
        if (t->unk_id < 0) st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: unk_token \"%s\" is not in the vocabulary", path, unk->valuestring);
    }
    t->ignore_merges = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges"));
    cJSON_Delete(root);
    return st;
}

/* vocab.json + merges.txt (a "#version" first line, then "a b" per line) */
static tdacl_status load_vocab_merges(tdacl_tokenizer *t, const char *vocab_path, const char *merges_path)
{
    cJSON *vocab;
    tdacl_status st = read_json(vocab_path, &vocab);
    if (st) return st;
    size_t len;
    char *text = tdacl__read_regular(merges_path, MAX_FILE_BYTES, &len);
    if (!text) {
        cJSON_Delete(vocab);
        return tdacl__fail(NULL, TDACL_ERR_IO, "tokenizer: cannot read %s: %s", merges_path, tdacl__file_error(errno));
    }
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
    st = load_vocab(t, vocab, NULL, lines, vocab_path);
    cJSON_Delete(vocab);
    int32_t rank = 0;
    size_t lineno = 0;
    for (char *line = text; !st && line && *line; lineno++) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r') line[--n] = 0;
        if (n && !(lineno == 0 && !strncmp(line, "#version", 8))) {
            char *sp = strchr(line, ' ');
            if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' '))
                st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s:%zu: \"%s\" is not two tokens separated by one space", merges_path,
                                 lineno + 1, line);
            else st = merge_add(t, line, (size_t)(sp - line), sp + 1, strlen(sp + 1), rank++, merges_path);
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    t->unk_id = -1;
    return st;
}

static int file_exists(const char *path)
{
    FILE *f = tdacl__fopen_regular(path);
    if (f) fclose(f);
    return f != NULL;
}

tdacl_status tdacl_tokenizer_load(const char *dir, tdacl_tokenizer **out)
{
    tdacl__clear_error(NULL);
    if (!out) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_load: tok is NULL");
    *out = NULL;
    if (!dir) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_load: dir is NULL");
    char a[TDACL_PATH_LIMIT], b[TDACL_PATH_LIMIT], resolved[TDACL_PATH_LIMIT];
    tdacl_status st = tdacl__resolve_model_dir(dir, resolved, sizeof resolved);
    if (st) return st;
    dir = resolved;
    if ((size_t)snprintf(a, sizeof a, "%s/tokenizer.json", dir) >= sizeof a ||
        (size_t)snprintf(b, sizeof b, "%s/merges.txt", dir) >= sizeof b)
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_load: directory path too long");
    tdacl_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return oom();
    if (file_exists(a)) st = load_tokenizer_json(t, a);
    else {
        snprintf(a, sizeof a, "%s/vocab.json", dir);
        if (file_exists(a) && file_exists(b)) st = load_vocab_merges(t, a, b);
        else
            st = tdacl__fail(NULL, TDACL_ERR_IO,
                             "tdacl_tokenizer_load: %s has no tokenizer.json and no vocab.json + merges.txt", dir);
    }
    if (!st) {
        char one[4];
        for (int c = 0; c < 0x144; c++) t->char_byte[c] = -1;
        for (int c = 0; c < 256; c++) {
            t->byte_id[c] = vocab_find(t, one, utf8_put(byte_char(c), one));
            t->char_byte[byte_char(c)] = (int16_t)c;
        }
    }
    if (st) {
        tdacl_tokenizer_destroy(t);
        return st;
    }
    *out = t;
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tokenizer_destroy(tdacl_tokenizer *t)
{
    if (!t) return TDACL_SUCCESS;
    if (t->id_str)
        for (int32_t i = 0; i < t->n_ids; i++) free(t->id_str[i]);
    free(t->id_str), free(t->id_len), free(t->vocab), free(t->merges), free(t->added);
    free(t);
    return TDACL_SUCCESS;
}

tdacl_status tdacl_tokenizer_vocab_size(const tdacl_tokenizer *t, int32_t *size)
{
    if (!t || !size) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_vocab_size: NULL argument");
    *size = t->n_ids;
    return TDACL_SUCCESS;
}

/* ---- encoding ---- */

/* Output ids: stored while they fit, always counted. */
typedef struct id_sink {
    int32_t *ids;
    int64_t cap, n;
} id_sink;

static void emit(id_sink *o, int32_t id)
{
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* Byte-pair merging of one pre-token: symbols in a linked list, candidate pairs in a
 * binary heap by (rank, position), stale entries skipped when popped. */
typedef struct pair_entry {
    int32_t rank, pos, left, right; /* the ids the pair had when pushed */
} pair_entry;

static int pair_less(const pair_entry *a, const pair_entry *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void heap_push(pair_entry *h, int *n, pair_entry e)
{
    int i = (*n)++;
    while (i > 0 && pair_less(&e, &h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = e;
}

static pair_entry heap_pop(pair_entry *h, int *n)
{
    pair_entry top = h[0], last = h[--(*n)];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && pair_less(&h[c + 1], &h[c])) c++;
        if (!pair_less(&h[c], &last)) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void push_pair(const tdacl_tokenizer *t, pair_entry *h, int *nh, const int32_t *id, int a, int b)
{
    const merge_slot *m = merge_find(t, id[a], id[b]);
    if (m) heap_push(h, nh, (pair_entry){m->rank, a, id[a], id[b]});
}

static tdacl_status bpe_word(const tdacl_tokenizer *t, const unsigned char *s, size_t n, id_sink *o)
{
    if (t->ignore_merges) {
        char buf[4 * 64];
        if (n <= 64) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++) m += utf8_put(byte_char(s[i]), buf + m);
            int32_t whole = vocab_find(t, buf, m);
            if (whole >= 0) return emit(o, whole), TDACL_SUCCESS;
        }
    }
    int32_t *id = malloc(n * sizeof *id);
    int *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
    pair_entry *heap = malloc((2 * n + 1) * sizeof *heap);
    if (!id || !next || !prev || !heap) {
        free(id), free(next), free(prev), free(heap);
        return oom();
    }
    /* symbols missing from the vocabulary become the unknown token, or are dropped */
    int count = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t b = t->byte_id[s[i]];
        if (b < 0) b = t->unk_id;
        if (b < 0) continue;
        id[count++] = b;
    }
    for (int i = 0; i < count; i++) next[i] = i + 1 < count ? i + 1 : -1, prev[i] = i - 1;
    int nh = 0;
    for (int i = 0; i + 1 < count; i++) push_pair(t, heap, &nh, id, i, i + 1);
    while (nh) {
        pair_entry e = heap_pop(heap, &nh);
        int a = e.pos, b = next[a];
        if (id[a] != e.left || b < 0 || id[b] != e.right) continue; /* stale */
        id[a] = merge_find(t, id[a], id[b])->merged;
        next[a] = next[b];
        if (next[b] >= 0) prev[next[b]] = a;
        id[b] = -1;
        if (prev[a] >= 0) push_pair(t, heap, &nh, id, prev[a], a);
        if (next[a] >= 0) push_pair(t, heap, &nh, id, a, next[a]);
    }
    for (int i = count ? 0 : -1; i >= 0; i = next[i]) emit(o, id[i]);
    free(id), free(next), free(prev), free(heap);
    return TDACL_SUCCESS;
}

/* Unicode White_Space */
static int is_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || c == 0x20 || c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* cp within one of the n sorted ranges */
static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

enum { C_SPACE, C_LETTER, C_NUMBER, C_OTHER };

static int char_class(uint32_t c)
{
    return is_space(c)                                                         ? C_SPACE
           : in_ranges(tdacl__letter_ranges, tdacl__letter_range_count, c) ? C_LETTER
           : in_ranges(tdacl__number_ranges, tdacl__number_range_count, c) ? C_NUMBER
                                                                            : C_OTHER;
}

/* Length in code points of the pre-token at cp[i] (n code points in all): GPT-2's rules
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+, the first
 * alternative that matches winning. */
static size_t pretoken_len(const uint32_t *cp, const unsigned char *cls, size_t i, size_t n)
{
    if (cp[i] == '\'' && i + 1 < n) {
        static const char *const tails[] = {"s", "t", "re", "ve", "m", "ll", "d"};
        for (int k = 0; k < 7; k++) {
            size_t m = strlen(tails[k]), j = 0;
            while (j < m && i + 1 + j < n && cp[i + 1 + j] == (uint32_t)tails[k][j]) j++;
            if (j == m) return 1 + m;
        }
    }
    size_t s = i + (cp[i] == ' ' && i + 1 < n && cls[i + 1] != C_SPACE);
    if (cls[s] != C_SPACE) { /* ' ?' then a run of one class */
        size_t j = s + 1;
        while (j < n && cls[j] == cls[s]) j++;
        return j - i;
    }
    size_t j = i;
    while (j < n && cls[j] == C_SPACE) j++;
    /* \s+(?!\S): the run, less its last character when a non-space follows */
    if (j < n && j - i >= 2) return j - i - 1;
    return j - i;
}

/* Encodes the added-token-free text s[0..n), valid UTF-8. */
static tdacl_status encode_plain(const tdacl_tokenizer *t, const unsigned char *s, size_t n, id_sink *o)
{
    if (!n) return TDACL_SUCCESS;
    uint32_t *cp = malloc(n * sizeof *cp);
    size_t *at = malloc((n + 1) * sizeof *at);
    unsigned char *cls = malloc(n);
    if (!cp || !at || !cls) {
        free(cp), free(at), free(cls);
        return oom();
    }
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        at[m] = i;
        cp[m] = utf8_next(s, &i);
        cls[m] = (unsigned char)char_class(cp[m]);
        m++;
    }
    at[m] = n;
    tdacl_status st = TDACL_SUCCESS;
    for (size_t i = 0; i < m && !st;) {
        size_t len = pretoken_len(cp, cls, i, m);
        st = bpe_word(t, s + at[i], at[i + len] - at[i], o);
        i += len;
    }
    free(cp), free(at), free(cls);
    return st;
}

tdacl_status tdacl_tokenizer_encode(const tdacl_tokenizer *t, const char *text, size_t len, int32_t *ids, int64_t capacity,
                                    int64_t *count)
{
    tdacl__clear_error(NULL);
    if (!t || (!text && len) || !count || capacity < 0 || (!ids && capacity))
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_encode: NULL argument or negative capacity");
    size_t bad;
    if (!tdacl__utf8_valid((const unsigned char *)text, len, &bad))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "tdacl_tokenizer_encode: the text is not valid UTF-8 (byte %zu)", bad);
    id_sink o = {ids, capacity, 0};
    const unsigned char *s = (const unsigned char *)text;
    size_t start = 0;
    tdacl_status st = TDACL_SUCCESS;
    for (size_t i = 0; i < len && !st;) {
        int hit = -1;
        for (int k = 0; k < t->n_added && hit < 0; k++) {
            int32_t id = t->added[k];
            if (t->id_len[id] <= len - i && !memcmp(s + i, t->id_str[id], t->id_len[id])) hit = id;
        }
        if (hit < 0) {
            i++;
            continue;
        }
        st = encode_plain(t, s + start, i - start, &o);
        emit(&o, hit);
        i += t->id_len[hit];
        start = i;
    }
    if (!st) st = encode_plain(t, s + start, len - start, &o);
    *count = o.n;
    return st;
}

tdacl_status tdacl_tokenizer_decode(const tdacl_tokenizer *t, const int32_t *ids, int64_t n, char *text, size_t capacity,
                                    size_t *len)
{
    tdacl__clear_error(NULL);
    if (!t || (!ids && n) || n < 0 || !len || (!text && capacity))
        return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_decode: NULL argument or negative count");
    size_t out = 0;
    for (int64_t k = 0; k < n; k++) {
        if (ids[k] < 0 || ids[k] >= t->n_ids || !t->id_str[ids[k]])
            return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "tdacl_tokenizer_decode: ids[%lld] = %d is not a token id",
                               (long long)k, ids[k]);
        const unsigned char *s = (const unsigned char *)t->id_str[ids[k]];
        size_t m = t->id_len[ids[k]];
        /* each character of a byte-level token stands for one byte; others are copied */
        for (size_t i = 0; i < m;) {
            size_t from = i;
            uint32_t c = utf8_next(s, &i);
            int b = c < 0x144 ? t->char_byte[c] : -1;
            if (b >= 0) {
                if (out < capacity) text[out] = (char)b;
                out++;
            } else
                for (size_t j = from; j < i; j++, out++)
                    if (out < capacity) text[out] = (char)s[j];
        }
    }
    if (out < capacity) text[out] = 0;
    *len = out;
    return TDACL_SUCCESS;
}
