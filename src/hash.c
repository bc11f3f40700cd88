/* 64-bit FNV-1a: names cache entries and checksums their payloads.  Not cryptographic:
 * the cache stores the full key beside the payload, so a collision is detected. */
#include "internal.h"

uint64_t tdacl__fnv1a64(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}
