/* quant_x86.h - the vector pieces the x86 kernels share (quant_dot_avx2.c,
 * quant_tile_avx512.c): the horizontal sums that end a dot product and the
 * field loads.  The tiled kernels must end each dot exactly as the
 * matrix-vector ones do, so both include these. */
#ifndef RLX_QUANT_QUANT_X86_H
#define RLX_QUANT_QUANT_X86_H

#include <immintrin.h>

#include "quant/quant_layout.h"

#define RLX_AVX2 __attribute__((target("avx2,fma,f16c")))

RLX_AVX2 static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

RLX_AVX2 static inline int hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

RLX_AVX2 static inline float f16(const uint8_t *p) { return _cvtsh_ss(rlx_q_u16(p)); }

RLX_AVX2 static inline __m256i loadu(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 16 bytes of packed nibbles -> 32 bytes 0..15: the low nibbles (elements
 * 0-15), then the high ones (elements 16-31). */
RLX_AVX2 static inline __m256i nibbles(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* Byte e = 0xff where bit e of the little-endian u32 at p is set, else 0. */
RLX_AVX2 static inline __m256i bit_bytes(const uint8_t *p)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)rlx_q_u32(p)), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

#endif
