/* libFuzzer entry for the program-cache entry check.  An accepted entry carries exactly the
 * wanted key, and its payload lies inside the buffer and ends at its end. */
#include <string.h>

#include "runtime/runtime.h"

static void check(int ok)
{
    if (!ok) __builtin_trap();
}

/* the key of the seed entries in fuzz/corpus/cache_entry */
static const char KEY[] = "tdacl-program v1\nplatform: fuzz\ndevice: fuzz\noptions: -DX=1\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t at = 0, len = 0;
    const char *why = tdacl__cache_entry_check(data, size, KEY, &at, &len);
    if (why) {
        check(why[0] != 0);
        return 0;
    }
    check(at >= strlen(KEY) && at <= size && len == size - at);
    check(!memcmp(data + at - strlen(KEY), KEY, strlen(KEY)));
    return 0;
}
