/* Strict JSON input for the checkpoint files (config.json, safetensors headers, shard
 * indexes): UTF-8 validation, cJSON parsing that rejects trailing garbage, duplicate keys
 * and typed field access whose errors name the key. */
#ifndef TDACL_JSONUTIL_H
#define TDACL_JSONUTIL_H

#include <cjson/cJSON.h>

#include "base/base.h"

/* Largest integer a JSON number (an IEEE double in cJSON) holds exactly: 2^53. */
#define TDACL_JSON_MAX_INT 9007199254740992.0

/* 1 when s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF); *bad receives the offset of the first bad byte otherwise. */
int tdacl__utf8_valid(const unsigned char *s, size_t n, size_t *bad);

/* Parses text[0..len) (text[len] must be 0) as one JSON value followed only by whitespace.
 * Non-UTF-8, NUL bytes, syntax errors and trailing data are TDACL_ERR_FORMAT naming `what`
 * and the byte offset.  Free *out with cJSON_Delete. */
tdacl_status tdacl__json_parse(const char *text, size_t len, const char *what, cJSON **out);

/* The first key that occurs twice in object `obj` (cJSON keeps duplicates), or NULL.
 * Returns TDACL_ERR_OUT_OF_MEMORY (message recorded) if the check cannot allocate. */
tdacl_status tdacl__json_duplicate_key(const cJSON *obj, const char *what, const char **dup);

/* A JSON number that is a whole value in [lo, hi] (hi <= 2^53), or -1 when it is not a
 * number, -2 when not whole or out of range. */
int tdacl__json_int(const cJSON *v, double lo, double hi, int64_t *out);

#endif
