/* cpu_expf.h - an expf that compilers can vectorise (no calls, no
 * branches), for softmax and attention, where exp dominates.
 *
 * exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln2 / 2; exp(r)
 * by a degree-6 minimax polynomial (the classic Cephes coefficients), 2^n by
 * building the float's exponent bits.  Within 2 ulp of expf on [-87, 88];
 * below -87 it returns 0 (expf would give a value under 1.7e-38), above 88
 * it saturates at exp(88) (softmax and attention only pass x <= 0).  NaN in
 * gives NaN out. */
#ifndef RLX_CPU_EXPF_H
#define RLX_CPU_EXPF_H

#include <stdint.h>

static inline float rlx_expf_vec(float x)
{
    float xc = x < -87.0f ? -87.0f : x;
    xc = xc > 88.0f ? 88.0f : xc;
    /* round to nearest through the 1.5 * 2^23 trick (no call to rintf) */
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    n = n == n ? n : 0.0f; /* NaN: keep the integer conversion defined */
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        uint32_t u;
        float f;
    } s;
    s.u = (uint32_t)((int32_t)n + 127) << 23;
    float y = p * s.f;
    return x < -87.0f ? 0.0f : y;
}

#endif
