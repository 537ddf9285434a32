/* dtype.h - dtype helpers beyond the public ones in rlx.h (dtype.c). */
#ifndef RLX_CORE_DTYPE_H
#define RLX_CORE_DTYPE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rlx.h"

bool rlx_dtype_is_float(rlx_dtype t);
bool rlx_dtype_is_int(rlx_dtype t);

/* f16 bits -> f32, exact for every pattern: subnormals, -0, infinities,
 * and NaNs with their sign and payload (a signalling NaN stays signalling).
 * rlx_f16_to_f32 is this; it is inline here for the quantized kernels,
 * which convert a scale per block of 32 elements. */
static inline float rlx_f16_to_f32_inline(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
        float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24, exact */
        return sign ? -v : v;
    } else {
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

#endif
