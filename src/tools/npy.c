/* .npy files: version 1.0/2.0/3.0 headers, dtype '<f4' only, C order.  Every malformed
 * input is an error naming the problem; no read goes past the buffer. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "tools/npy.h"

#define FAIL(...) return tdacl__fail(NULL, TDACL_ERR_FORMAT, __VA_ARGS__)

/* Finds the value text after 'key': in the header dict. */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(hdr, pat);
    }
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

tdacl_status tdacl__npy_parse(const unsigned char *buf, size_t len, const char *name, tdacl_npy *out)
{
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) FAIL("%s: not a .npy file (bad magic)", name);
    int major = buf[6];
    size_t hlen, start;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        start = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) FAIL("%s: truncated .npy header", name);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        start = 12;
    } else {
        FAIL("%s: unsupported .npy version %d.%d", name, major, buf[7]);
    }
    if (hlen > len - start) FAIL("%s: header length %zu runs past the end of the file (%zu bytes)", name, hlen, len);
    if (hlen > 65536) FAIL("%s: header of %zu bytes is implausibly long", name, hlen);
    char *hdr = malloc(hlen + 1);
    if (!hdr) return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    memcpy(hdr, buf + start, hlen);
    hdr[hlen] = 0;
    tdacl_status st = TDACL_SUCCESS;
    if (strlen(hdr) != hlen) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: NUL byte in the header", name); goto done; }
    const char *d = dict_value(hdr, "descr");
    if (!d || (*d != '\'' && *d != '"')) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: header has no 'descr'", name); goto done; }
    char descr[16] = "";
    size_t k = 0;
    char q = *d++;
    while (*d && *d != q && k < sizeof descr - 1) descr[k++] = *d++;
    descr[k] = 0;
    if (*d != q) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: malformed 'descr'", name); goto done; }
    if (strcmp(descr, "<f4")) {
        st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: dtype '%s' is not little-endian float32 ('<f4')", name, descr);
        goto done;
    }
    const char *f = dict_value(hdr, "fortran_order");
    if (!f) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: header has no 'fortran_order'", name); goto done; }
    if (!strncmp(f, "True", 4)) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: fortran_order arrays are not supported (save in C order)", name); goto done; }
    if (strncmp(f, "False", 5)) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: malformed 'fortran_order'", name); goto done; }
    const char *s = dict_value(hdr, "shape");
    if (!s || *s != '(') { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: header has no 'shape' tuple", name); goto done; }
    s++;
    int64_t count = 1;
    for (;;) {
        while (*s == ' ') s++;
        if (*s == ')') break;
        if (!isdigit((unsigned char)*s)) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: malformed 'shape'", name); goto done; }
        if (out->ndim == TDACL_NPY_MAX_DIMS) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: more than %d dims", name, TDACL_NPY_MAX_DIMS); goto done; }
        errno = 0;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (errno || v < 0) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: shape entry out of range", name); goto done; }
        if (v && count > INT64_MAX / 4 / v) { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: shape product overflows", name); goto done; }
        count *= v;
        out->shape[out->ndim++] = v;
        s = end;
        while (*s == ' ') s++;
        if (*s == ',') s++;
        else if (*s != ')') { st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: malformed 'shape'", name); goto done; }
    }
    size_t data_bytes = len - start - hlen;
    if ((uint64_t)count * 4 != data_bytes) {
        st = tdacl__fail(NULL, TDACL_ERR_FORMAT, "%s: shape holds %lld floats (%lld bytes) but the file has %zu data bytes",
                         name, (long long)count, (long long)count * 4, data_bytes);
        goto done;
    }
    out->count = count;
    out->data = malloc(count ? (size_t)count * 4 : 4);
    if (!out->data) { st = tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory", name); goto done; }
    memcpy(out->data, buf + start + hlen, (size_t)count * 4); /* x86/arm hosts are little-endian */
done:
    free(hdr);
    if (st) {
        free(out->data);
        memset(out, 0, sizeof *out);
    }
    return st;
}

tdacl_status tdacl__npy_read(const char *path, tdacl_npy *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = tdacl__fopen_regular(path);
    if (!f) return tdacl__fail(NULL, TDACL_ERR_IO, "cannot open %s: %s", path, tdacl__file_error(errno));
    /* a directory opens and seeks to LONG_MAX on Linux: refuse before sizing a buffer */
    struct stat sb;
    if (fstat(fileno(f), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return tdacl__fail(NULL, TDACL_ERR_IO, "cannot read %s: not a regular file", path);
    }
    if (fseek(f, 0, SEEK_END)) { fclose(f); return tdacl__fail(NULL, TDACL_ERR_IO, "cannot seek %s", path); }
    long n = ftell(f);
    rewind(f);
    if (n < 0) { fclose(f); return tdacl__fail(NULL, TDACL_ERR_IO, "cannot size %s", path); }
    unsigned char *buf = malloc(n ? (size_t)n : 1);
    if (!buf) { fclose(f); return tdacl__fail(NULL, TDACL_ERR_OUT_OF_MEMORY, "%s: out of memory (%ld bytes)", path, n); }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    tdacl_status st = got == (size_t)n ? tdacl__npy_parse(buf, (size_t)n, path, out)
                                       : tdacl__fail(NULL, TDACL_ERR_IO, "short read on %s", path);
    free(buf);
    return st;
}

tdacl_status tdacl__npy_write(const char *path, int ndim, const int64_t *shape, const float *data)
{
    if (ndim < 0 || ndim > TDACL_NPY_MAX_DIMS) return tdacl__fail(NULL, TDACL_ERR_INVALID_ARGUMENT, "npy: bad ndim %d", ndim);
    char dict[256];
    size_t off = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        off += (size_t)snprintf(dict + off, sizeof dict - off, "%lld%s", (long long)shape[i], ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        count *= shape[i];
    }
    off += (size_t)snprintf(dict + off, sizeof dict - off, "), }");
    size_t total = 10 + off + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = off + pad + 1;
    FILE *f = fopen(path, "wb");
    if (!f) return tdacl__fail(NULL, TDACL_ERR_IO, "cannot create %s: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, off, f) == off;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (count == 0 || fwrite(data, 4, (size_t)count, f) == (size_t)count);
    if (fclose(f) || !ok) return tdacl__fail(NULL, TDACL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return TDACL_SUCCESS;
}

void tdacl__npy_free(tdacl_npy *a)
{
    free(a->data);
    memset(a, 0, sizeof *a);
}
