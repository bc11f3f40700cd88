/* libFuzzer entry for the safetensors header validator.  Besides the sanitizers' checks,
 * every accepted image must satisfy what the loader relies on: each tensor lies inside the
 * image after the header, its byte count matches shape and dtype, and the tensors tile the
 * data buffer without overlap. */
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"

static void check(int ok)
{
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdacl_ckpt_tensor *t = NULL;
    int n = -1;
    tdacl_status st = tdacl__safetensors_parse(data, size, "fuzz.safetensors", &t, &n);
    if (st) {
        check(t == NULL && n == 0);
        check(tdacl_last_error(NULL)[0] != 0);
        return 0;
    }
    check(size >= 8 && n >= 0);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)data[i] << (8 * i);
    const uint8_t *lo = data + 8 + hlen, *hi = data + size;
    const uint8_t *expect = lo; /* tensors come back in offset order */
    for (int i = 0; i < n; i++) {
        const uint8_t *p = t[i].data;
        check(p == expect && p >= lo && p <= hi && t[i].nbytes <= (size_t)(hi - p));
        uint64_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) numel *= (uint64_t)t[i].shape[d];
        size_t es = 0;
        if (t[i].dtype_ok) es = tdacl_dtype_size(t[i].dtype);
        check(!t[i].dtype_ok || numel * es == t[i].nbytes);
        check(t[i].ndim >= 0 && t[i].ndim <= 4 && memchr(t[i].name, 0, sizeof t[i].name));
        /* touch every byte so that ASan sees any read outside the input */
        volatile uint8_t sink = 0;
        for (size_t b = 0; b < t[i].nbytes; b++) sink ^= p[b];
        (void)sink;
        expect = p + t[i].nbytes;
    }
    check(expect == hi);
    free(t);
    return 0;
}
