/* libFuzzer entry for the .npy reader.  An accepted array has 0..8 dims, a count equal to
 * the product of its shape, and that many floats readable (ASan sees any overread). */
#include <stdlib.h>

#include "tools/npy.h"

static void check(int ok)
{
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tdacl_npy a;
    tdacl_status st = tdacl__npy_parse(data, size, "fuzz.npy", &a);
    if (st) {
        check(tdacl_last_error(NULL)[0] != 0);
        return 0;
    }
    check(a.ndim >= 0 && a.ndim <= TDACL_NPY_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < a.ndim; i++) {
        check(a.shape[i] >= 0);
        n *= a.shape[i];
    }
    check(n == a.count);
    float sum = 0;
    for (int64_t i = 0; i < a.count; i++) sum += a.data[i];
    check(sum == sum || sum != sum); /* reads every element; the value does not matter */
    tdacl__npy_free(&a);
    return 0;
}
