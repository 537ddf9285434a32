/* quant_dot_avx2.c - the AVX2 dot products (quant_dot.h).
 *
 * Every function carries target("avx2,fma,f16c"), so the file builds for
 * any x86-64 and runs only where quant_dot.c found those features.
 *
 * The integer core is vpmaddubsw: unsigned bytes times signed bytes, pairs
 * summed to int16, then vpmaddwd against ones (or the sub-block scales) to
 * int32.  Signed weights are made unsigned by moving their sign onto the
 * activation (|w| * (sign(w) * y)); activations are in [-127, 127], so the
 * negation never overflows and no int16 pair sum saturates (at most
 * 2 * 128 * 127).  4-bit levels are split from their bytes with a shift and
 * a mask; the fifth bit of Q5 types comes from a 32-bit mask spread to one
 * byte per element; Q6_K's two high bits are masked into place from qh. */
#include "quant/quant_dot_kernels.h"

#ifdef RLX_QUANT_HAVE_AVX2

#include "quant/quant.h"
#include "quant/quant_x86.h"

#define AVX2 RLX_AVX2

/* Eight int32 sums of four products of unsigned u (<= 128) and signed y. */
AVX2 static inline __m256i dot_u8(__m256i u, __m256i y)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1));
}

/* The same for signed x (any int8) and y in [-127, 127]. */
AVX2 static inline __m256i dot_s8(__m256i x, __m256i y)
{
    return dot_u8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* Eight int32 sums of four y each (for the min terms). */
AVX2 static inline __m256i sum_s8(__m256i y) { return dot_u8(_mm256_set1_epi8(1), y); }

/* ------------------------------------------------------ 32-element types */

AVX2 static float dot_q8_0(int64_t nb, const uint8_t *w, const uint8_t *a)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2, w += 2 * RLX_Q8_0_BYTES, a += 2 * RLX_Q8_0_BYTES) {
        __m256i p0 = dot_s8(loadu(w + 2), loadu(a + 2));
        __m256i p1 = dot_s8(loadu(w + RLX_Q8_0_BYTES + 2), loadu(a + RLX_Q8_0_BYTES + 2));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(w) * f16(a)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(w + RLX_Q8_0_BYTES) * f16(a + RLX_Q8_0_BYTES)),
                               _mm256_cvtepi32_ps(p1), acc1);
    }
    if (i < nb) {
        __m256i p = dot_s8(loadu(w + 2), loadu(a + 2));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(w) * f16(a)), _mm256_cvtepi32_ps(p), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q4_0 (qh_at 0) and Q5_0 (qh_at 2): signed levels, nibble - 8 or
 * (nibble | bit4) - 16; the latter as nibble | 0xf0 where bit 4 is clear
 * (that byte, read as int8, is nibble - 16). */
AVX2 static inline __m256i sym_levels(const uint8_t *w, int qh_at)
{
    if (!qh_at)
        return _mm256_sub_epi8(nibbles(w + 2), _mm256_set1_epi8(8));
    __m256i lo = nibbles(w + qh_at + 4);
    return _mm256_or_si256(lo, _mm256_andnot_si256(bit_bytes(w + qh_at), _mm256_set1_epi8((char)0xf0)));
}

AVX2 static float dot_sym(int64_t nb, const uint8_t *w, const uint8_t *a, size_t bytes, int qh_at)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2, w += 2 * bytes, a += 2 * RLX_Q8_0_BYTES) {
        __m256i p0 = dot_s8(sym_levels(w, qh_at), loadu(a + 2));
        __m256i p1 = dot_s8(sym_levels(w + bytes, qh_at), loadu(a + RLX_Q8_0_BYTES + 2));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(w) * f16(a)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(f16(w + bytes) * f16(a + RLX_Q8_0_BYTES)), _mm256_cvtepi32_ps(p1), acc1);
    }
    if (i < nb) {
        __m256i p = dot_s8(sym_levels(w, qh_at), loadu(a + 2));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(f16(w) * f16(a)), _mm256_cvtepi32_ps(p), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* Q4_1 (qh_at 0) and Q5_1 (qh_at 4): x = q * d + m, unsigned levels;
 * x . y = d * (q . y) + m * sum(y). */
AVX2 static float dot_min(int64_t nb, const uint8_t *w, const uint8_t *a, size_t bytes, int qh_at)
{
    __m256 acc = _mm256_setzero_ps(), macc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, w += bytes, a += RLX_Q8_0_BYTES) {
        __m256i q = nibbles(w + (qh_at ? qh_at + 4 : 4));
        if (qh_at)
            q = _mm256_or_si256(q, _mm256_and_si256(bit_bytes(w + qh_at), _mm256_set1_epi8(0x10)));
        __m256i y = loadu(a + 2);
        const float da = f16(a);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w) * da), _mm256_cvtepi32_ps(dot_u8(q, y)), acc);
        macc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w + 2) * da), _mm256_cvtepi32_ps(sum_s8(y)), macc);
    }
    return hsum_ps(_mm256_add_ps(acc, macc));
}

/* ----------------------------------------------------------- K types */

/* sum over sub-blocks j of m[j] * (bsums[2j] + bsums[2j + 1]) */
AVX2 static inline int k4_min_sum(const uint8_t m[8], const uint8_t *a)
{
    __m128i m16 = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)m));
    __m256i mm = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    return hsum_epi32(_mm256_madd_epi16(loadu(a + RLX_Q8_K_BSUMS), mm));
}

/* Q4_K and Q5_K */
AVX2 static float dot_q45_k(int64_t nb, const uint8_t *w, const uint8_t *a, bool five)
{
    const size_t bytes = five ? RLX_Q5_K_BYTES : RLX_Q4_K_BYTES;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bit0 = _mm256_set1_epi8(1), bit1 = _mm256_set1_epi8(2);
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    for (int64_t i = 0; i < nb; i++, w += bytes, a += RLX_Q8_K_BYTES) {
        uint8_t sc[8], m[8];
        rlx_q_k4_scales_mins(w + 4, sc, m);
        const uint8_t *qs = five ? w + 48 : w + 16;
        const int8_t *y = (const int8_t *)(a + RLX_Q8_K_QS);
        __m256i qh = five ? loadu(w + 16) : _mm256_setzero_si256();
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = loadu(qs + 32 * c);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (five) { /* bits 2c and 2c + 1 of qh, after c shifts by 2 */
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, bit0), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(qh, bit1), 3));
                qh = _mm256_srli_epi16(qh, 2);
            }
            __m256i p0 = _mm256_maddubs_epi16(lo, loadu(y + 64 * c));
            __m256i p1 = _mm256_maddubs_epi16(hi, loadu(y + 64 * c + 32));
            p0 = _mm256_madd_epi16(p0, _mm256_set1_epi16(sc[2 * c]));
            p1 = _mm256_madd_epi16(p1, _mm256_set1_epi16(sc[2 * c + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
        }
        const float da = rlx_q_f32(a);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w) * da), _mm256_cvtepi32_ps(isum), acc);
        /* one rounding, written out: the tiled kernels repeat it lane by lane */
        mins = _mm_cvtss_f32(
            _mm_fmadd_ss(_mm_set_ss(f16(w + 2) * da), _mm_set_ss((float)k4_min_sum(m, a)), _mm_set_ss(mins)));
    }
    return hsum_ps(acc) - mins;
}

AVX2 static float dot_q6_k(int64_t nb, const uint8_t *w, const uint8_t *a)
{
    const __m256i low4 = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x30);
    /* bytes [2p x8, 2p+1 x8]: the scales of the sub-block pair p */
    const __m128i pair = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, w += RLX_Q6_K_BYTES, a += RLX_Q8_K_BYTES) {
        const __m128i sc = _mm_loadu_si128((const __m128i *)(w + RLX_Q6_K_SCALES));
        const int8_t *y = (const int8_t *)(a + RLX_Q8_K_QS);
        /* the -32 of every level: 32 * sum over sub-blocks g of sc[g] * bsums[g] */
        __m256i off = _mm256_madd_epi16(loadu(a + RLX_Q8_K_BSUMS), _mm256_cvtepi8_epi16(sc));
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
        for (int h = 0; h < 2; h++) {
            __m256i ql0 = loadu(w + 64 * h), ql1 = loadu(w + 64 * h + 32);
            __m256i qh = loadu(w + RLX_Q6_K_QH + 32 * h);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), two));
            q[1] = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), two));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, two));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), two));
            for (int k = 0; k < 4; k++) {
                __m128i sel = _mm_add_epi8(pair, _mm_set1_epi8((char)(8 * h + 2 * k)));
                __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, sel));
                __m256i p = _mm256_maddubs_epi16(q[k], loadu(y + 128 * h + 32 * k));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s16));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(w + RLX_Q6_K_D) * rlx_q_f32(a)), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc);
}

AVX2 static float dot_q8_k(int64_t nb, const uint8_t *w, const uint8_t *a)
{
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++, w += RLX_Q8_K_BYTES, a += RLX_Q8_K_BYTES) {
        __m256i isum = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++)
            isum = _mm256_add_epi32(isum, dot_s8(loadu(w + RLX_Q8_K_QS + 32 * k), loadu(a + RLX_Q8_K_QS + 32 * k)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(rlx_q_f32(w) * rlx_q_f32(a)), _mm256_cvtepi32_ps(isum), acc);
    }
    return hsum_ps(acc);
}

/* The type's switch outside the loop over rows, so each kernel inlines
 * into a loop of its own. */
#define DOT_ROWS(CALL)                          \
    for (int64_t j = 0; j < rows; j++, w += ws) \
        out[j] = CALL;                          \
    return true

bool rlx_quant_dot_rows_avx2(int t, int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out)
{
    switch (t) {
    case RLX_GGML_Q8_0: DOT_ROWS(dot_q8_0(nb, w, a));
    case RLX_GGML_Q4_0: DOT_ROWS(dot_sym(nb, w, a, RLX_Q4_0_BYTES, 0));
    case RLX_GGML_Q5_0: DOT_ROWS(dot_sym(nb, w, a, RLX_Q5_0_BYTES, 2));
    case RLX_GGML_Q4_1: DOT_ROWS(dot_min(nb, w, a, RLX_Q4_1_BYTES, 0));
    case RLX_GGML_Q5_1: DOT_ROWS(dot_min(nb, w, a, RLX_Q5_1_BYTES, 4));
    case RLX_GGML_Q4_K: DOT_ROWS(dot_q45_k(nb, w, a, false));
    case RLX_GGML_Q5_K: DOT_ROWS(dot_q45_k(nb, w, a, true));
    case RLX_GGML_Q6_K: DOT_ROWS(dot_q6_k(nb, w, a));
    case RLX_GGML_Q8_K: DOT_ROWS(dot_q8_k(nb, w, a));
    default: return false;
    }
}

bool rlx_quant_dot_avx2(int t, int64_t nb, const uint8_t *w, const uint8_t *a, float *out)
{
    return rlx_quant_dot_rows_avx2(t, nb, w, 0, 1, a, out);
}

#else
typedef int rlx_quant_dot_avx2_unused; /* not x86: no AVX2 kernels */
#endif
