/* Minimal .npy reader/writer for little-endian float32 C-order arrays (the interop format
 * of `tdacl attention`, the tests and the bench). */
#ifndef TDACL_NPY_H
#define TDACL_NPY_H

#include "runtime/runtime.h"

#define TDACL_NPY_MAX_DIMS 8

typedef struct tdacl_npy {
    int ndim;
    int64_t shape[TDACL_NPY_MAX_DIMS];
    int64_t count;
    float *data;
} tdacl_npy;

/* Parses an in-memory .npy file.  Errors (TDACL_ERR_FORMAT) name what is wrong. */
tdacl_status tdacl__npy_parse(const unsigned char *buf, size_t len, const char *name, tdacl_npy *out);
tdacl_status tdacl__npy_read(const char *path, tdacl_npy *out);
tdacl_status tdacl__npy_write(const char *path, int ndim, const int64_t *shape, const float *data);
void tdacl__npy_free(tdacl_npy *a);

#endif
