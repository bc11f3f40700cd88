/* On-disk program binary cache.
 *
 * One file per entry, named by the FNV-1a hash of its key (platform, device, driver
 * version, source hash, build options).  Layout, little-endian:
 *   "TDACLPB1" | u32 format | u32 key_len | u64 payload_len | u64 payload_fnv | key | payload
 * The file size must match exactly, the stored key must equal the wanted key and the
 * checksum must match; anything else is discarded (and logged), never trusted.  Writers
 * write a unique temp file and rename() it into place, so readers never see a partial
 * entry and concurrent writers of the same key simply replace each other. */
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

#include "internal.h"

#define MAGIC "TDACLPB1"
#define FORMAT 1u
#define HEADER_BYTES (8 + 4 + 4 + 8 + 8)
#define MAX_KEY (1u << 16)
#define MAX_PAYLOAD ((uint64_t)1 << 30)

static void put_u32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t get_u32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get_u64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static int mkdir_p(const char *dir)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return (mkdir(tmp, 0755) && errno != EEXIST) ? -1 : 0;
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
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    if (on && !c->dir[0]) {
        tdacl__log(ctx, TDACL_LOG_WARN, "program cache disabled: no cache directory ($HOME unset)");
        on = 0;
    }
    if (on && mkdir_p(c->dir)) {
        tdacl__log(ctx, TDACL_LOG_WARN, "program cache disabled: cannot create %s: %s", c->dir,
                   strerror(errno));
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

int tdacl__cache_load(tdacl_context *ctx, const char *key, unsigned char **bin, size_t *size)
{
    *bin = NULL;
    *size = 0;
    if (!ctx->cache.enabled) return 0;
    char path[640];
    tdacl__cache_entry_path(ctx, key, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        ctx->cache.stats.misses++;
        return 0;
    }
    int ok = 0;
    unsigned char hdr[HEADER_BYTES];
    unsigned char *keybuf = NULL, *payload = NULL;
    struct stat st;
    size_t key_len_want = strlen(key);
    if (fstat(fileno(f), &st) || fread(hdr, 1, HEADER_BYTES, f) != HEADER_BYTES) {
        reject(ctx, path, "truncated header");
        goto done;
    }
    if (memcmp(hdr, MAGIC, 8) || get_u32(hdr + 8) != FORMAT) {
        reject(ctx, path, "not a tdacl cache entry of this format");
        goto done;
    }
    uint32_t klen = get_u32(hdr + 12);
    uint64_t plen = get_u64(hdr + 16), sum = get_u64(hdr + 24);
    if (klen > MAX_KEY || plen > MAX_PAYLOAD ||
        (uint64_t)st.st_size != HEADER_BYTES + (uint64_t)klen + plen) {
        reject(ctx, path, "size does not match its header (truncated or trailing bytes)");
        goto done;
    }
    keybuf = malloc(klen + 1u);
    payload = malloc(plen ? plen : 1);
    if (!keybuf || !payload) {
        tdacl__log(ctx, TDACL_LOG_WARN, "program cache: out of memory reading %s", path);
        goto done;
    }
    if (fread(keybuf, 1, klen, f) != klen || fread(payload, 1, plen, f) != plen) {
        reject(ctx, path, "short read");
        goto done;
    }
    if (klen != key_len_want || memcmp(keybuf, key, klen)) {
        reject(ctx, path, "entry belongs to another device, driver, source or option set");
        goto done;
    }
    if (tdacl__fnv1a64(payload, plen, TDACL_FNV_SEED) != sum) {
        reject(ctx, path, "checksum mismatch (corrupted)");
        goto done;
    }
    ok = 1;
    *bin = payload;
    *size = (size_t)plen;
    payload = NULL;
    ctx->cache.stats.hits++;
done:
    if (!ok && !*bin) ctx->cache.stats.misses++;
    free(keybuf);
    free(payload);
    fclose(f);
    return ok;
}

void tdacl__cache_store(tdacl_context *ctx, const char *key, const unsigned char *bin, size_t size)
{
    if (!ctx->cache.enabled) return;
    char path[640], tmp[720];
    tdacl__cache_entry_path(ctx, key, path, sizeof path);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%ld", path, (long)getpid(), (long)ts.tv_nsec);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) goto fail;
    size_t klen = strlen(key);
    unsigned char hdr[HEADER_BYTES];
    memcpy(hdr, MAGIC, 8);
    put_u32(hdr + 8, FORMAT);
    put_u32(hdr + 12, (uint32_t)klen);
    put_u64(hdr + 16, size);
    put_u64(hdr + 24, tdacl__fnv1a64(bin, size, TDACL_FNV_SEED));
    const void *parts[3] = {hdr, key, bin};
    size_t lens[3] = {HEADER_BYTES, klen, size};
    for (int i = 0; i < 3; i++) {
        const unsigned char *p = parts[i];
        size_t left = lens[i];
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w <= 0) {
                if (w < 0 && errno == EINTR) continue;
                close(fd);
                unlink(tmp);
                goto fail;
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (close(fd) || rename(tmp, path)) {
        unlink(tmp);
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
