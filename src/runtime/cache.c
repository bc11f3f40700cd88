/* On-disk program binary cache.
 *
 * One file per entry, named by the FNV-1a hash of its key (platform, device, driver
 * version, source hash, build options).  Layout, little-endian:
 *   "TDACLPB2" | u32 format | u32 key_len | u64 payload_len | sha256(key | payload) | key | payload
 * The file size must match exactly, the stored key must equal the wanted key and the digest
 * must match; anything else is discarded (and logged), never trusted.  Writers write a
 * unique temp file and rename() it into place, so readers never see a partial entry and
 * concurrent writers of the same key simply replace each other.
 *
 * Trust: the driver deserialises whatever payload it is handed, and a self-consistent
 * entry (right key, recomputed digest) cannot be told from a genuine one.  So, as ccache
 * does, the cache trusts only what its own user could have written: the directory is
 * created 0700, and a directory or entry owned by another user, or writable by group or
 * others, is refused (the cache is then off, with one warning, or the entry discarded). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "base/fileio.h"
#include "runtime/runtime.h"

#define MAGIC "TDACLPB2"
#define FORMAT 2u
#define DIGEST_BYTES 32
#define HEADER_BYTES (8 + 4 + 4 + 8 + DIGEST_BYTES)
#define MAX_KEY (1u << 16)
#define MAX_PAYLOAD ((uint64_t)1 << 30)

static void put_u32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t get_u32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get_u64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static void digest(const char *key, size_t klen, const unsigned char *payload, size_t plen,
                   unsigned char out[DIGEST_BYTES])
{
    tdacl_sha256 h;
    tdacl__sha256_init(&h);
    tdacl__sha256_update(&h, key, klen);
    tdacl__sha256_update(&h, payload, plen);
    tdacl__sha256_final(&h, out);
}

/* NULL when the file may be trusted: ours, and no one else can write it. */
static const char *untrusted(const struct stat *sb)
{
    if (sb->st_uid != geteuid()) return "owned by another user";
    if (sb->st_mode & (S_IWGRP | S_IWOTH)) return "writable by group or others";
    return NULL;
}

void tdacl__cache_init(tdacl_context *ctx, const tdacl_context_desc *desc)
{
    tdacl_cache *c = &ctx->cache;
    memset(c, 0, sizeof *c);
    int on = desc->cache;
    if (on < 0) {
        const char *e = getenv("TDACL_CACHE");
        on = !(e && (!strcasecmp(e, "off") || !strcmp(e, "0") || !strcasecmp(e, "no")));
    }
    const char *dir = desc->cache_dir;
    char buf[512];
    if (!dir || !*dir) dir = getenv("TDACL_CACHE_DIR");
    if (!dir || !*dir) {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg) snprintf(buf, sizeof buf, "%s/tdacl", xdg);
        else if (home && *home) snprintf(buf, sizeof buf, "%s/.cache/tdacl", home);
        else buf[0] = 0;
        dir = buf;
    }
    /* room for the entry name and the atomic writer's temporary suffix after the directory:
     * never truncate a path */
    if (strlen(dir) + 64 >= sizeof c->dir) {
        if (on)
            tdacl__log(ctx, TDACL_LOG_WARN, "program cache disabled: the directory path is %zu characters; at most %zu",
                       strlen(dir), sizeof c->dir - 65);
        on = 0;
        dir = "";
    }
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    if (on && !c->dir[0]) {
        tdacl__log(ctx, TDACL_LOG_WARN, "program cache disabled: no cache directory ($HOME unset)");
        on = 0;
    }
    if (on && tdacl__mkdir_p(c->dir, 0700)) {
        tdacl__log(ctx, TDACL_LOG_WARN, "program cache disabled: cannot create %s: %s", c->dir,
                   strerror(errno));
        on = 0;
    }
    struct stat sb;
    const char *why = NULL;
    if (on && (stat(c->dir, &sb) || (why = untrusted(&sb)))) {
        tdacl__log(ctx, TDACL_LOG_WARN, "program cache disabled: %s is %s", c->dir, why ? why : strerror(errno));
        on = 0;
    }
    c->enabled = on;
    c->stats.enabled = on;
    snprintf(c->stats.dir, sizeof c->stats.dir, "%s", c->dir);
    tdacl__log(ctx, TDACL_LOG_DEBUG, "program cache %s (%s)", on ? "on" : "off", c->dir);
}

void tdacl__cache_entry_path(const tdacl_context *ctx, const char *key, char *path, size_t n)
{
    uint64_t h = tdacl__fnv1a64(key, strlen(key), TDACL_FNV_SEED);
    snprintf(path, n, "%s/%016llx.bin", ctx->cache.dir, (unsigned long long)h);
}

static void reject(tdacl_context *ctx, const char *path, const char *why)
{
    ctx->cache.stats.rejected++;
    tdacl__log(ctx, TDACL_LOG_WARN, "program cache: discarding %s (%s); rebuilding", path, why);
    unlink(path);
}

const char *tdacl__cache_entry_check(const unsigned char *buf, size_t len, const char *key, size_t *payload_at,
                                     size_t *payload_len)
{
    if (len < HEADER_BYTES) return "truncated header";
    if (memcmp(buf, MAGIC, 8) || get_u32(buf + 8) != FORMAT) return "not a tdacl cache entry of this format";
    uint32_t klen = get_u32(buf + 12);
    uint64_t plen = get_u64(buf + 16);
    if (klen > MAX_KEY || plen > MAX_PAYLOAD || (uint64_t)len != HEADER_BYTES + (uint64_t)klen + plen)
        return "size does not match its header (truncated or trailing bytes)";
    if (klen != strlen(key) || memcmp(buf + HEADER_BYTES, key, klen))
        return "entry belongs to another device, driver, source or option set";
    unsigned char sum[DIGEST_BYTES];
    digest(key, klen, buf + HEADER_BYTES + klen, (size_t)plen, sum);
    if (memcmp(sum, buf + 24, DIGEST_BYTES)) return "digest mismatch (corrupted)";
    *payload_at = HEADER_BYTES + klen;
    *payload_len = (size_t)plen;
    return NULL;
}

int tdacl__cache_load(tdacl_context *ctx, const char *key, unsigned char **bin, size_t *size)
{
    *bin = NULL;
    *size = 0;
    if (!ctx->cache.enabled) return 0;
    char path[640];
    tdacl__cache_entry_path(ctx, key, path, sizeof path);
    int fd = tdacl__open_regular(path);
    if (fd < 0) {
        if (errno == EINVAL) reject(ctx, path, "not a regular file");
        ctx->cache.stats.misses++;
        return 0;
    }
    struct stat st;
    const char *why = NULL;
    unsigned char *buf = NULL;
    size_t at = 0, n = 0;
    if (fstat(fd, &st)) why = "cannot stat";
    else if (!(why = untrusted(&st)) &&
             (uint64_t)st.st_size > HEADER_BYTES + (uint64_t)MAX_KEY + MAX_PAYLOAD)
        why = "size does not match its header (truncated or trailing bytes)";
    if (!why) {
        n = (size_t)st.st_size;
        buf = malloc(n ? n : 1);
        if (!buf) {
            tdacl__log(ctx, TDACL_LOG_WARN, "program cache: out of memory reading %s", path);
            close(fd);
            ctx->cache.stats.misses++;
            return 0;
        }
        size_t got = 0;
        while (got < n) {
            ssize_t r = read(fd, buf + got, n - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        n = got; /* a file that shrank meanwhile fails the size check below */
        why = tdacl__cache_entry_check(buf, n, key, &at, size);
    }
    close(fd);
    if (why) {
        reject(ctx, path, why);
        free(buf);
        *size = 0;
        ctx->cache.stats.misses++;
        return 0;
    }
    memmove(buf, buf + at, *size);
    *bin = buf;
    ctx->cache.stats.hits++;
    return 1;
}

void tdacl__cache_store(tdacl_context *ctx, const char *key, const unsigned char *bin, size_t size)
{
    if (!ctx->cache.enabled) return;
    char path[640];
    tdacl__cache_entry_path(ctx, key, path, sizeof path);
    tdacl_atomic_file af;
    FILE *f = tdacl__atomic_open(&af, path, 0600);
    if (!f) goto fail;
    size_t klen = strlen(key);
    unsigned char hdr[HEADER_BYTES];
    memcpy(hdr, MAGIC, 8);
    put_u32(hdr + 8, FORMAT);
    put_u32(hdr + 12, (uint32_t)klen);
    put_u64(hdr + 16, size);
    digest(key, klen, bin, size, hdr + 24);
    errno = 0;
    int ok = fwrite(hdr, 1, HEADER_BYTES, f) == HEADER_BYTES && fwrite(key, 1, klen, f) == klen &&
             fwrite(bin, 1, size, f) == size;
    int e = tdacl__atomic_commit(&af, ok);
    if (e) {
        errno = e;
        goto fail;
    }
    ctx->cache.stats.writes++;
    return;
fail:
    ctx->cache.stats.write_failures++;
    tdacl__log(ctx, TDACL_LOG_WARN, "program cache: cannot write %s: %s", path, strerror(errno));
}

void tdacl__cache_discard(tdacl_context *ctx, const char *key)
{
    char path[640];
    tdacl__cache_entry_path(ctx, key, path, sizeof path);
    reject(ctx, path, "the driver refused the cached binary");
}
