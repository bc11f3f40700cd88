/* Host-side dtype names, sizes and conversions (round to nearest even). */
#include <string.h>

#include "base/base.h"

const char *tdacl_dtype_name(tdacl_dtype dtype)
{
    switch (dtype) {
    case TDACL_F32: return "f32";
    case TDACL_BF16: return "bf16";
    case TDACL_F16: return "f16";
    }
    return "invalid";
}

size_t tdacl_dtype_size(tdacl_dtype dtype)
{
    switch (dtype) {
    case TDACL_F32: return 4;
    case TDACL_BF16:
    case TDACL_F16: return 2;
    }
    return 0;
}

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t tdacl_f32_to_bf16(float x)
{
    uint32_t u = bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float tdacl_bf16_to_f32(uint16_t x) { return from_bits((uint32_t)x << 16); }

uint16_t tdacl_f32_to_f16(float x)
{
    uint32_t u = bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: Inf */
    if (a < 0x38800000u) { /* subnormal or zero in half */
        if (a < 0x33000000u) return (uint16_t)sign; /* below half of the smallest subnormal */
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); /* 14..24 */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = ((a >> 13) - (112u << 10));
    uint32_t rem = a & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}

float tdacl_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (!m) return from_bits(sign);
        float f = (float)m * (1.0f / 16777216.0f); /* m * 2^-24 */
        return sign ? -f : f;
    }
    if (e == 31) return from_bits(sign | 0x7f800000u | (m << 13));
    return from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

int tdacl__dtype_from_name(const char *s)
{
    if (!strcmp(s, "f32") || !strcmp(s, "fp32")) return TDACL_F32;
    if (!strcmp(s, "bf16")) return TDACL_BF16;
    if (!strcmp(s, "f16") || !strcmp(s, "fp16")) return TDACL_F16;
    return -2;
}
