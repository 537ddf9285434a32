/* quant_units.h - a quantized row read 32 weights at a time as signed
 * 8-bit levels with a scale and a min, the form an integer dot product on
 * 8-bit activations takes (the CUDA few-row product, k_proj.cu).  Shared by
 * host and device code so that the host tests check every type's reading
 * against the dequantizer (tests/test_quant.c).
 *
 * A unit is 32 weights in two halves of 16 elements, each half with its own
 * element offset e (a multiple of 16 from the block's first element), its
 * levels q (four words of four signed bytes, element e + 4 i + k in byte k
 * of word i) and w = d * q - m.  Units of 32-element types are whole
 * blocks; 256-element types have eight units a block (unit j):
 *   Q4_K/Q5_K  the 16 bytes qs[32 (j / 2) + 16 (j % 2) ..]: low nibbles
 *              sub-block 2 (j / 2), high nibbles sub-block 2 (j / 2) + 1;
 *   Q6_K       half h = j / 4 of the block, ql group g = (j / 2) % 2 and
 *              elements 16 (j % 2) .. of its 32: the low nibbles take
 *              element 32 g + l of the half, the high ones 64 + 32 g + l;
 *   Q8_K       elements 32 j .. 32 j + 31.
 * d and m are formed as the dequantizer forms them, so d * q - m, rounded
 * once each, is the dequantized weight to the bit.
 *
 * Fields are read as 16-bit words where the layout aligns them to 2 bytes
 * (Q8_0, Q4_0, Q5_0, Q6_K) and 32-bit words where it aligns them to 4; the
 * block must start at an address with that alignment (rows of every type
 * are a whole number of such words). */
#ifndef RLX_QUANT_UNITS_H
#define RLX_QUANT_UNITS_H

#include <stdint.h>

#include "core/ggml_type.h"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define RLX_QU_FN static __host__ __device__ __forceinline__
#else
#include <string.h>
#include "core/dtype.h"
#define RLX_QU_FN static inline
#endif

typedef struct rlx_qunit {
    uint32_t q[2][4]; /* levels of half 0 and half 1 */
    float d[2], m[2];
    int e[2]; /* each half's first element, from the block's */
} rlx_qunit;

/* Units a block holds and the block's bytes. */
#define RLX_QU_PER_BLOCK(qt) \
    ((qt) == RLX_GGML_Q4_K || (qt) == RLX_GGML_Q5_K || (qt) == RLX_GGML_Q6_K || (qt) == RLX_GGML_Q8_K ? 8 : 1)
/* Whether the type's weights have a min (w = d q - m with m not 0). */
#define RLX_QU_HAS_MIN(qt) \
    ((qt) == RLX_GGML_Q4_1 || (qt) == RLX_GGML_Q5_1 || (qt) == RLX_GGML_Q4_K || (qt) == RLX_GGML_Q5_K)

RLX_QU_FN uint32_t rlx_qu_u16(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return *(const uint16_t *)p;
#else
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
#endif
}

RLX_QU_FN uint32_t rlx_qu_u32(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return *(const uint32_t *)p;
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}

/* Four bytes at a 2-byte aligned address. */
RLX_QU_FN uint32_t rlx_qu_u32_2(const uint8_t *p) { return rlx_qu_u16(p) | (rlx_qu_u16(p + 2) << 16); }

RLX_QU_FN float rlx_qu_half(uint32_t bits)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half((unsigned short)bits));
#else
    return rlx_f16_to_f32_inline((uint16_t)bits);
#endif
}

RLX_QU_FN float rlx_qu_f32(uint32_t bits)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(bits);
#else
    float v;
    memcpy(&v, &bits, 4);
    return v;
#endif
}

/* Each byte of v (in [0, 2 half)) minus half, as a signed byte: flipping
 * the bit of half gives v - half for bytes at or above it and v + half
 * below, where the top bits must then be set. */
RLX_QU_FN uint32_t rlx_qu_center(uint32_t v, uint32_t half)
{
    const uint32_t t = v ^ (half * 0x01010101u);
    return t | ((t & (half * 0x01010101u)) * ((256u - 2u * half) / half));
}

/* Bit 4 for the four bytes from four bits (h < 16): bit k of h to byte k. */
RLX_QU_FN uint32_t rlx_qu_spread4(uint32_t h) { return ((h * 0x00204081u) & 0x01010101u) << 4; }

/* 32-element types: the block at b. */
RLX_QU_FN void rlx_qu_block32(int qt, const uint8_t *b, rlx_qunit *o)
{
    o->e[0] = 0;
    o->e[1] = 16;
    if (qt == RLX_GGML_Q8_0) {
        o->d[0] = o->d[1] = rlx_qu_half(rlx_qu_u16(b));
        o->m[0] = o->m[1] = 0.0f;
        for (int i = 0; i < 4; i++) {
            o->q[0][i] = rlx_qu_u32_2(b + 2 + 4 * i);
            o->q[1][i] = rlx_qu_u32_2(b + 18 + 4 * i);
        }
        return;
    }
    const int has_min = qt == RLX_GGML_Q4_1 || qt == RLX_GGML_Q5_1, five = qt == RLX_GGML_Q5_0 || qt == RLX_GGML_Q5_1;
    const float d = rlx_qu_half(rlx_qu_u16(b));
    o->d[0] = o->d[1] = d;
    /* w = nib d + m: the min subtracted is -m */
    o->m[0] = o->m[1] = has_min ? -rlx_qu_half(rlx_qu_u16(b + 2)) : 0.0f;
    const int qs = qt == RLX_GGML_Q4_0 ? 2 : qt == RLX_GGML_Q4_1 ? 4 : qt == RLX_GGML_Q5_0 ? 6 : 8;
    const uint32_t qh = five ? (has_min ? rlx_qu_u32(b + 4) : rlx_qu_u32_2(b + 2)) : 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t v = has_min ? rlx_qu_u32(b + qs + 4 * i) : rlx_qu_u32_2(b + qs + 4 * i);
        uint32_t lo = v & 0x0f0f0f0fu, hi = (v >> 4) & 0x0f0f0f0fu;
        if (five) {
            lo |= rlx_qu_spread4((qh >> (4 * i)) & 15u);
            hi |= rlx_qu_spread4((qh >> (16 + 4 * i)) & 15u);
        }
        if (!has_min) {
            lo = rlx_qu_center(lo, five ? 16 : 8);
            hi = rlx_qu_center(hi, five ? 16 : 8);
        }
        o->q[0][i] = lo;
        o->q[1][i] = hi;
    }
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block s from the 12 scale
 * bytes read as three words (as rlx_q_k4_scale_min). */
RLX_QU_FN void rlx_qu_k4_scale_min(const uint32_t w[3], int s, int *sc, int *m)
{
    const int k = s & 3, sh = 8 * k;
    const int b0 = (int)((w[0] >> sh) & 255u), b1 = (int)((w[1] >> sh) & 255u), b2 = (int)((w[2] >> sh) & 255u);
    if (s < 4) {
        *sc = b0 & 63;
        *m = b1 & 63;
    } else {
        *sc = (b2 & 15) | ((b0 >> 6) << 4);
        *m = (b2 >> 4) | ((b1 >> 6) << 4);
    }
}

/* 256-element types: unit j (0..7) of the block at b. */
RLX_QU_FN void rlx_qu_block256(int qt, const uint8_t *b, int j, rlx_qunit *o)
{
    if (qt == RLX_GGML_Q8_K) {
        o->d[0] = o->d[1] = rlx_qu_f32(rlx_qu_u32(b));
        o->m[0] = o->m[1] = 0.0f;
        o->e[0] = 32 * j;
        o->e[1] = 32 * j + 16;
        for (int i = 0; i < 4; i++) {
            o->q[0][i] = rlx_qu_u32(b + 4 + 32 * j + 4 * i);
            o->q[1][i] = rlx_qu_u32(b + 20 + 32 * j + 4 * i);
        }
        return;
    }
    if (qt == RLX_GGML_Q6_K) {
        const int h = j >> 2, g = (j >> 1) & 1, s = j & 1;
        const float d = rlx_qu_half(rlx_qu_u16(b + 208));
        const int8_t *sc = (const int8_t *)(b + 192 + 8 * h + s);
        /* elements 32 g + l and 64 + 32 g + l of half h: sub-blocks of 16 */
        o->d[0] = d * (float)sc[2 * g];
        o->d[1] = d * (float)sc[2 * g + 4];
        o->m[0] = o->m[1] = 0.0f;
        o->e[0] = 128 * h + 32 * g + 16 * s;
        o->e[1] = o->e[0] + 64;
        const uint8_t *ql = b + 64 * h + 32 * g + 16 * s, *qh = b + 128 + 32 * h + 16 * s;
        for (int i = 0; i < 4; i++) {
            const uint32_t v = rlx_qu_u32_2(ql + 4 * i), hb = rlx_qu_u32_2(qh + 4 * i);
            o->q[0][i] = rlx_qu_center((v & 0x0f0f0f0fu) | (((hb >> (2 * g)) & 0x03030303u) << 4), 32);
            o->q[1][i] = rlx_qu_center(((v >> 4) & 0x0f0f0f0fu) | (((hb >> (2 * g + 4)) & 0x03030303u) << 4), 32);
        }
        return;
    }
    /* Q4_K, Q5_K */
    const int five = qt == RLX_GGML_Q5_K, c = j >> 1, hf = j & 1;
    const uint32_t dd = rlx_qu_u32(b);
    const float d = rlx_qu_half(dd & 0xffffu), dmin = rlx_qu_half(dd >> 16);
    const uint32_t w[3] = {rlx_qu_u32(b + 4), rlx_qu_u32(b + 8), rlx_qu_u32(b + 12)};
    int sc, m;
    rlx_qu_k4_scale_min(w, 2 * c, &sc, &m);
    o->d[0] = d * (float)sc;
    o->m[0] = dmin * (float)m;
    rlx_qu_k4_scale_min(w, 2 * c + 1, &sc, &m);
    o->d[1] = d * (float)sc;
    o->m[1] = dmin * (float)m;
    o->e[0] = 64 * c + 16 * hf;
    o->e[1] = o->e[0] + 32;
    const uint8_t *qs = b + (five ? 48 : 16) + 32 * c + 16 * hf, *qh = b + 16 + 16 * hf;
    for (int i = 0; i < 4; i++) {
        const uint32_t v = rlx_qu_u32(qs + 4 * i);
        uint32_t lo = v & 0x0f0f0f0fu, hi = (v >> 4) & 0x0f0f0f0fu;
        if (five) {
            const uint32_t hb = rlx_qu_u32(qh + 4 * i);
            lo |= ((hb >> (2 * c)) & 0x01010101u) << 4;
            hi |= ((hb >> (2 * c + 1)) & 0x01010101u) << 4;
        }
        o->q[0][i] = lo;
        o->q[1][i] = hi;
    }
}

/* Unit j of the block at b (j = 0 for 32-element types). */
RLX_QU_FN void rlx_qunit_read(int qt, const uint8_t *b, int j, rlx_qunit *o)
{
    if (RLX_QU_PER_BLOCK(qt) == 1)
        rlx_qu_block32(qt, b, o);
    else
        rlx_qu_block256(qt, b, j, o);
}

#endif
