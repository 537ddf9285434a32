#include <string.h>

#include "core/dtype.h"

size_t rlx_dtype_size(rlx_dtype t)
{
    static const size_t sizes[RLX_DTYPE_COUNT] = {4, 2, 2, 8, 8, 4, 1, 1, 1};
    return (unsigned)t < RLX_DTYPE_COUNT ? sizes[t] : 0;
}

const char *rlx_dtype_name(rlx_dtype t)
{
    static const char *names[RLX_DTYPE_COUNT] = {"f32", "f16", "bf16", "f64", "i64", "i32", "i8", "u8", "bool"};
    if (t == RLX_STRING)
        return "string";
    return (unsigned)t < RLX_DTYPE_COUNT ? names[t] : "?";
}

bool rlx_dtype_is_float(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64; }

bool rlx_dtype_is_int(rlx_dtype t) { return t == RLX_I64 || t == RLX_I32 || t == RLX_I8 || t == RLX_U8; }

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t rlx_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

float rlx_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t rlx_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00u);
    if (abs >= 0x477ff000u) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (abs < 0x38800000u) { /* below the smallest normal: subnormal or zero */
        if (abs < 0x33000000u)
            return (uint16_t)sign;
        uint32_t exp = abs >> 23;
        uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - exp; /* 14..24 */
        uint32_t half = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = ((abs - 0x38000000u) >> 13);
    uint32_t rem = abs & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

float rlx_f16_to_f32(uint16_t h) { return rlx_f16_to_f32_inline(h); }
