/* Strict JSON input shared by the checkpoint readers.  cJSON alone accepts trailing data
 * after the value, invalid UTF-8 inside strings and duplicate keys; these helpers close
 * those gaps so that every malformed file is an error with a position. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/jsonutil.h"

int tdacl__utf8_valid(const unsigned char *s, size_t n, size_t *bad)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k; /* continuation bytes */
        unsigned cp, min;
        if (c >= 0xc2 && c <= 0xdf) k = 1, cp = c & 0x1f, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef) k = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4) k = 3, cp = c & 0x07, min = 0x10000;
        else goto fail; /* stray continuation byte, 0xc0/0xc1 overlong lead, or > 0xf4 */
        if (n - i <= k) goto fail;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) goto fail;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) goto fail;
        i += k + 1;
    }
    return 1;
fail:
    if (bad) *bad = i;
    return 0;
}

static int is_json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

tdacl_status tdacl__json_parse(const char *text, size_t len, const char *what, cJSON **out)
{
    *out = NULL;
    size_t bad = 0;
    if (!tdacl__utf8_valid((const unsigned char *)text, len, &bad))
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: not valid UTF-8 (byte %zu)", what, bad);
    /* A NUL would end cJSON's view of the text early and hide whatever follows it. */
    const char *nul = memchr(text, 0, len);
    if (nul) return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: NUL byte at offset %zu", what, (size_t)(nul - text));
    /* An escaped NUL (\u0000) would cut every C string cJSON hands out: "a\u0000evil" would
     * read as "a".  Escapes occur only inside strings, so a scan of the raw text finds
     * them all: a backslash that is not itself escaped, then u0000. */
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '\\') continue;
        if (i + 5 < len && text[i + 1] == 'u' && text[i + 2] == '0' && text[i + 3] == '0' && text[i + 4] == '0' &&
            text[i + 5] == '0')
            return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: escaped NUL (\\u0000) in a string at byte %zu", what, i);
        i++; /* skip the escaped character: an escaped backslash before u0000 is no NUL */
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 0);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: invalid JSON near byte %zu", what, at);
    }
    size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
    while (at < len && is_json_space(text[at])) at++;
    if (at < len) {
        cJSON_Delete(root);
        return tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: unexpected data after the JSON value at byte %zu", what, at);
    }
    *out = root;
    return TDACL_SUCCESS;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

tdacl_status tdacl__json_duplicate_key(const cJSON *obj, const char *what, const char **dup)
{
    *dup = NULL;
    size_t n = 0;
    for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next) n++;
    if (n < 2) return TDACL_SUCCESS;
    const char **keys = malloc(n * sizeof *keys);
    if (!keys) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory checking %zu keys", what, n);
    size_t i = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[i++] = c->string ? c->string : "";
    qsort(keys, n, sizeof *keys, cmp_str);
    for (i = 1; i < n && !*dup; i++)
        if (!strcmp(keys[i - 1], keys[i])) *dup = keys[i];
    free(keys);
    return TDACL_SUCCESS;
}

int tdacl__json_int(const cJSON *v, double lo, double hi, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double x = v->valuedouble;
    /* the range test comes first: it also rejects NaN and infinities before the cast */
    if (!(x >= lo && x <= hi) || x != floor(x)) return -2;
    *out = (int64_t)x;
    return 0;
}
