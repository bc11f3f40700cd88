/* Helpers shared by the foundation tests (device, cache, tensor, errors, npy, tuning):
 * temporary directories, whole-file I/O and a log sink that records messages.
 * Header-only so every test stays a single translation unit. */
#ifndef TDACL_TESTUTIL_H
#define TDACL_TESTUTIL_H

#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h> /* cmocka needs these four before cmocka.h */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tdacl.h"
#include "base/fileio.h"

/* Asserts a status and prints the library's message when it differs, so a failure
 * says why instead of just "1 != 0". */
#define assert_status(ctx, call, want)                                                       \
    do {                                                                                     \
        tdacl_status st_ = (call);                                                           \
        if (st_ != (want))                                                                   \
            fail_msg("%s returned %d (%s), wanted %d; last error: %s", #call, (int)st_,      \
                     tdacl_status_str(st_), (int)(want), tdacl_last_error(ctx));             \
    } while (0)
#define assert_ok(ctx, call) assert_status(ctx, call, TDACL_SUCCESS)

/* Asserts that `hay` contains `needle`, printing both otherwise. */
#define assert_contains(hay, needle)                                                         \
    do {                                                                                     \
        const char *h_ = (hay), *n_ = (needle);                                              \
        if (!h_ || !strstr(h_, n_)) fail_msg("expected \"%s\" in \"%s\"", n_, h_ ? h_ : "(null)"); \
    } while (0)

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string after rm_rf. */
static inline char *tu_mkdtemp(const char *tag)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t n = strlen(base) + strlen(tag) + 32;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/tdacl-%s-XXXXXX", base, tag);
    if (!mkdtemp(p)) fail_msg("mkdtemp(%s) failed", p);
    return p;
}

/* Removes a directory tree (files and subdirectories; no symlink following needed). */
static inline void tu_rm_rf(const char *path)
{
    struct stat st;
    if (lstat(path, &st)) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                char child[1024];
                snprintf(child, sizeof child, "%s/%s", path, e->d_name);
                tu_rm_rf(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Number of directory entries whose name ends in `suffix` (or contains it when
 * `contains` is set); names the first match in `first` when given. */
static inline int tu_count_files(const char *dir, const char *pattern, int contains, char *first,
                                 size_t first_n)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    size_t pl = strlen(pattern);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        int match = contains ? strstr(e->d_name, pattern) != NULL
                             : (l >= pl && !strcmp(e->d_name + l - pl, pattern));
        if (!match) continue;
        if (n == 0 && first) snprintf(first, first_n, "%s/%s", dir, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

/* Whole file into a malloc'ed buffer (NUL-terminated for convenience); NULL on error.
 * The library's own reader (regular files only). */
static inline unsigned char *tu_read_file(const char *path, size_t *len)
{
    return (unsigned char *)tdacl__read_regular(path, (size_t)1 << 34, len);
}

static inline void tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot create %s", path);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static inline int tu_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- a log sink that keeps every message ---- */

#define TU_LOG_MAX 256
typedef struct tu_log {
    int count;
    tdacl_log_level level[TU_LOG_MAX];
    char *msg[TU_LOG_MAX];
} tu_log;

static inline void tu_log_fn(tdacl_log_level level, const char *message, void *user)
{
    tu_log *l = user;
    if (l->count >= TU_LOG_MAX) return;
    size_t n = strlen(message) + 1;
    char *copy = malloc(n);
    if (!copy) return;
    memcpy(copy, message, n);
    l->level[l->count] = level;
    l->msg[l->count++] = copy;
}

static inline void tu_log_clear(tu_log *l)
{
    for (int i = 0; i < l->count; i++) free(l->msg[i]);
    l->count = 0;
}

/* Index of the first message at `level` (or any level when level < 0) containing every
 * one of the NULL-terminated needles; -1 when none. */
static inline int tu_log_find(const tu_log *l, int level, ...)
{
    for (int i = 0; i < l->count; i++) {
        if (level >= 0 && (int)l->level[i] != level) continue;
        va_list ap;
        va_start(ap, level);
        int all = 1;
        for (const char *s; (s = va_arg(ap, const char *));)
            if (!strstr(l->msg[i], s)) all = 0;
        va_end(ap);
        if (all) return i;
    }
    return -1;
}

static inline void tu_log_dump(const tu_log *l)
{
    for (int i = 0; i < l->count; i++) print_message("  log[%d] level %d: %s\n", i, (int)l->level[i], l->msg[i]);
}

#endif
