/* quant_layout.h - the byte layouts of ggml's block-quantized types, as
 * GGUF stores them (little-endian), and the field readers that the
 * quantizers, dequantizers and dot products share.
 *
 * Blocks are read and written through byte pointers and memcpy, never
 * through struct pointers: a row inside a file or an arena may start at any
 * byte, and a misaligned struct access would be undefined.
 *
 * 32-element types (QB = 32; "lo"/"hi" are the low/high nibble of qs[j],
 * elements j and j + 16):
 *   Q8_0  34 B  f16 d | i8 q[32]                    x = q * d
 *   Q4_0  18 B  f16 d | u8 qs[16]                   x = (nib - 8) * d
 *   Q4_1  20 B  f16 d | f16 m | u8 qs[16]           x = nib * d + m
 *   Q5_0  22 B  f16 d | u8 qh[4] | u8 qs[16]        x = ((nib | b4) - 16) * d
 *   Q5_1  24 B  f16 d | f16 m | u8 qh[4] | u8 qs[16]  x = (nib | b4) * d + m
 *   (qh read as a little-endian u32: bit e is bit 4 of element e.)
 * 256-element super-blocks (QK = 256):
 *   Q4_K  144 B  f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
 *   Q5_K  176 B  f16 d | f16 dmin | u8 scales[12] | u8 qh[32] | u8 qs[128]
 *         eight sub-blocks of 32, each with a 6-bit scale sc and min m packed
 *         in scales[12] (rlx_q_k4_scale_min); x = (d * sc) * q - (dmin * m).
 *         qs[32c + l] holds element 64c + l (low nibble) and 64c + 32 + l
 *         (high nibble); Q5_K's bit 4 of those is bit 2c (2c + 1) of qh[l].
 *   Q6_K  210 B  u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
 *         sixteen sub-blocks of 16 with int8 scales; x = (d * sc) * (q - 32),
 *         q 6 bits: in each half h of 128 elements (ql += 64h, qh += 32h),
 *         element l, 32 + l, 64 + l, 96 + l (l < 32) take the low nibble of
 *         ql[l], low of ql[32 + l], high of ql[l], high of ql[32 + l], and
 *         bits 0-1, 2-3, 4-5, 6-7 of qh[l] as their bits 4-5.
 *   Q8_K  292 B  f32 d | i8 q[256] | i16 bsums[16]  x = d * q; bsums[g] is
 *         the sum of q over elements 16g..16g+15 (for the dot products). */
#ifndef RLX_QUANT_LAYOUT_H
#define RLX_QUANT_LAYOUT_H

#include <stdint.h>
#include <string.h>

#include "core/dtype.h"

enum { RLX_QB = 32, RLX_QK = 256 };

enum {
    RLX_Q8_0_BYTES = 34,
    RLX_Q4_0_BYTES = 18,
    RLX_Q4_1_BYTES = 20,
    RLX_Q5_0_BYTES = 22,
    RLX_Q5_1_BYTES = 24,
    RLX_Q4_K_BYTES = 144,
    RLX_Q5_K_BYTES = 176,
    RLX_Q6_K_BYTES = 210,
    RLX_Q8_K_BYTES = 292,
};

/* Q6_K field offsets (d comes last there) */
enum { RLX_Q6_K_QH = 128, RLX_Q6_K_SCALES = 192, RLX_Q6_K_D = 208 };
/* Q8_K field offsets */
enum { RLX_Q8_K_QS = 4, RLX_Q8_K_BSUMS = 260 };

static inline uint16_t rlx_q_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline uint32_t rlx_q_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline float rlx_q_f16(const uint8_t *p) { return rlx_f16_to_f32_inline(rlx_q_u16(p)); }

static inline float rlx_q_f32(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7).  Sub-blocks
 * 0-3 keep theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4-7
 * in the nibbles of byte j + 4 with their top two bits in the spare top
 * bits of bytes j - 4 and j. */
static inline void rlx_q_k4_scale_min(const uint8_t *s, int j, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* All eight at once: sc[0..7] and m[0..7] through 32-bit words (the same
 * bit moves as above, four bytes at a time). */
static inline void rlx_q_k4_scales_mins(const uint8_t *s, uint8_t sc[8], uint8_t m[8])
{
    uint32_t w0 = rlx_q_u32(s), w1 = rlx_q_u32(s + 4), w2 = rlx_q_u32(s + 8);
    uint32_t sc_lo = w0 & 0x3f3f3f3fu;
    uint32_t m_lo = w1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
    uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
    memcpy(sc, &sc_lo, 4);
    memcpy(sc + 4, &sc_hi, 4);
    memcpy(m, &m_lo, 4);
    memcpy(m + 4, &m_hi, 4);
}

#endif
