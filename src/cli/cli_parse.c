/* Strict number and id-list parsing for the command line (also fuzzed: fuzz/fuzz_cli.c). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_parse.h"

/* strtod/strtoll skip leading blanks and take a '+': a number here starts with a digit,
 * '-' or '.', so " 5" and "+5" are refused like any other stray character. */
static int starts_like_number(const char *s)
{
    return s && ((*s >= '0' && *s <= '9') || *s == '-' || *s == '.');
}

int cli_double(const char *s, double *out)
{
    if (!starts_like_number(s)) return -1;
    char *end;
    errno = 0;
    *out = strtod(s, &end);
    return (*end || errno || !isfinite(*out)) ? -1 : 0;
}

int cli_long(const char *s, long long *out)
{
    if (!starts_like_number(s) || *s == '.') return -1;
    char *end;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return (*end || errno) ? -1 : 0;
}

int cli_parse_ids(const char *s, int32_t **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!s || !*s) return -1;
    int cap = 16, k = 0;
    int32_t *t = malloc((size_t)cap * sizeof *t);
    if (!t) return -1;
    for (;;) {
        /* one id: digits only, at most 10 of them, <= INT32_MAX */
        long long v = 0;
        int digits = 0;
        while (*s >= '0' && *s <= '9' && digits < 11) v = v * 10 + (*s++ - '0'), digits++;
        if (!digits || digits > 10 || v > 0x7fffffff || (*s && *s != ',')) break;
        if (k == cap) {
            int32_t *g = cap < (1 << 24) ? realloc(t, (size_t)(cap *= 2) * sizeof *t) : NULL;
            if (!g) break;
            t = g;
        }
        t[k++] = (int32_t)v;
        if (!*s) {
            *out = t;
            *n = k;
            return 0;
        }
        s++; /* the comma: another id must follow */
    }
    free(t);
    return -1;
}

char **cli_split_assignments(int argc, char **argv, int *out_argc, char **names)
{
    size_t bytes = 1;
    for (int i = 1; i < argc; i++) bytes += strlen(argv[i]) + 1;
    char **v = calloc((size_t)(2 * argc + 1), sizeof *v);
    char *block = malloc(bytes), *at = block;
    if (!v || !block) {
        free(v), free(block);
        return NULL;
    }
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *eq = i == 0 || strncmp(argv[i], "--", 2) ? NULL : strchr(argv[i], '=');
        if (!eq) {
            v[n++] = argv[i];
            continue;
        }
        size_t len = (size_t)(eq - argv[i]);
        memcpy(at, argv[i], len);
        at[len] = 0;
        v[n++] = at;
        at += len + 1;
        v[n++] = (char *)eq + 1;
    }
    *out_argc = n;
    *names = block;
    return v;
}

int cli_known(const char *opt, const char *names)
{
    size_t n = strlen(opt);
    for (const char *at = names; *at;) {
        size_t len = strcspn(at, " ");
        if (len == n && !strncmp(at, opt, n)) return 1;
        at += len;
        while (*at == ' ') at++;
    }
    return 0;
}

int cli_run_split(int argc, char **argv, const char *prog, int (*run)(int, char **))
{
    char *names = NULL;
    int n = 0;
    char **args = cli_split_assignments(argc, argv, &n, &names);
    if (!args) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    int rc = run(n, args);
    free(args);
    free(names);
    return rc;
}
