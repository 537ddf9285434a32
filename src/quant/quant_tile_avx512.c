/* quant_tile_avx512.c - tiles of a quantized matrix product (quant_dot.h,
 * rlx_quant_tile) with AVX-512 VNNI: RLX_QUANT_TILE activation rows times
 * RLX_QUANT_TILE weight rows, each weight block unpacked once for all rows
 * and each activation block read once for all weight rows.
 *
 * Every output equals the AVX2 matrix-vector kernel's (quant_dot_avx2.c)
 * to the bit: a prompt's rows must equal a decode step's, and an 8-bit
 * activation level downstream flips on a one-ulp difference.  So each pair
 * keeps the AVX2 kernel's float accumulators lane for lane: lane l of a
 * block's int32 sums holds the products of bytes 4l..4l+3 (exact, however
 * they are computed), and the scale products, multiply-adds and final
 * horizontal sums are the same operations in the same order.  Only the
 * integer work differs: vpdpbusd (unsigned times signed bytes, no
 * saturation) takes signed weights as w + 128 against a -128 * sum(y)
 * start, and the sub-block scales of the K types multiply int16 pair sums
 * through vpdpwssd.
 *
 * Functions carry the target attribute, so the file builds for any x86-64;
 * quant_dot.c calls them only where the processor has these features. */
#include "quant/quant_dot_kernels.h"

#ifdef RLX_QUANT_HAVE_AVX2

#include <math.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "quant/quant_x86.h"

#define AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define INLINE AVX512 static inline __attribute__((always_inline))

enum { T = RLX_QUANT_TILE };
_Static_assert(RLX_QUANT_TILE == 4, "the Q4_K min terms are transposed four by four");

/* ------------------------------------------------------ 32-element types */

/* Two 32-byte runs, at p and p + step, as one vector; only the first
 * (upper half zero) when !two, so nothing past a row is read. */
INLINE __m512i join(const uint8_t *p, size_t step, bool two)
{
    __m512i lo = _mm512_zextsi256_si512(loadu(p));
    return two ? _mm512_inserti64x4(lo, loadu(p + step), 1) : lo;
}

/* The f16 scales at p and p + step, eight lanes each (the AVX2 kernel's
 * set1 of each), as f32. */
INLINE __m512 join_d(const uint8_t *p, size_t step, bool two)
{
    __m128i e = _mm_set1_epi16((short)rlx_q_u16(p));
    __m128i o = two ? _mm_set1_epi16((short)rlx_q_u16(p + step)) : _mm_setzero_si128();
    return _mm512_cvtph_ps(_mm256_set_m128i(o, e));
}

/* The levels of one block made unsigned: Q8_0's + 128, Q4_0's nibbles,
 * Q5_0's nibbles with their fifth bit (levels + 8 and + 16). */
INLINE __m256i levels32_one(const uint8_t *w, int t)
{
    switch (t) {
    case RLX_GGML_Q8_0: return _mm256_xor_si256(loadu(w + 2), _mm256_set1_epi8((char)0x80));
    case RLX_GGML_Q4_0: return nibbles(w + 2);
    default: return _mm256_or_si256(nibbles(w + 6), _mm256_and_si256(bit_bytes(w + 2), _mm256_set1_epi8(0x10)));
    }
}

/* Those of a block pair (the upper half zero when !two). */
INLINE __m512i levels32(const uint8_t *w, size_t bytes, bool two, int t)
{
    __m512i lo = _mm512_zextsi256_si512(levels32_one(w, t));
    return two ? _mm512_inserti64x4(lo, levels32_one(w + bytes, t), 1) : lo;
}

/* One block pair (the lower block alone when !two) for every pair of the
 * tile.  The AVX2 kernel sums even blocks into acc0 and odd ones into acc1:
 * here the lower and upper halves of acc. */
INLINE void step32(__m512 acc[T][T], const uint8_t *w, size_t ws, const uint8_t *a, size_t as, size_t bytes, bool two,
                   int t)
{
    const __m512i zero_point = _mm512_set1_epi8(t == RLX_GGML_Q8_0 ? (char)0x80 : t == RLX_GGML_Q4_0 ? 8 : 16);
    const __mmask16 lanes = two ? 0xffff : 0x00ff;
    __m512i u[T];
    __m512 dw[T];
    for (int j = 0; j < T; j++) {
        u[j] = levels32(w + (size_t)j * ws, bytes, two, t);
        dw[j] = join_d(w + (size_t)j * ws, bytes, two);
    }
    for (int i = 0; i < T; i++) {
        const uint8_t *ai = a + (size_t)i * as;
        __m512i y = join(ai + 2, RLX_Q8_0_BYTES, two);
        __m512 da = join_d(ai, RLX_Q8_0_BYTES, two);
        /* (w + z) . y - z * sum(y) = w . y, per lane */
        __m512i start =
            _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), zero_point, y));
        for (int j = 0; j < T; j++) {
            __m512 p = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, u[j], y));
            acc[i][j] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(dw[j], da), p, acc[i][j], lanes);
        }
    }
}

INLINE void tile32(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y, int64_t ldy,
                   size_t bytes, int t)
{
    __m512 acc[T][T];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            acc[i][j] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < nb; b += 2)
        step32(acc, w + (size_t)b * bytes, ws, a + (size_t)b * RLX_Q8_0_BYTES, as, bytes, true, t);
    if (b < nb)
        step32(acc, w + (size_t)b * bytes, ws, a + (size_t)b * RLX_Q8_0_BYTES, as, bytes, false, t);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            y[i * ldy + j] =
                hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[i][j]), _mm512_extractf32x8_ps(acc[i][j], 1)));
}

AVX512 static void tile_q8_0(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                             int64_t ldy)
{
    tile32(nb, w, ws, a, as, y, ldy, RLX_Q8_0_BYTES, RLX_GGML_Q8_0);
}

AVX512 static void tile_q4_0(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                             int64_t ldy)
{
    tile32(nb, w, ws, a, as, y, ldy, RLX_Q4_0_BYTES, RLX_GGML_Q4_0);
}

AVX512 static void tile_q5_0(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                             int64_t ldy)
{
    tile32(nb, w, ws, a, as, y, ldy, RLX_Q5_0_BYTES, RLX_GGML_Q5_0);
}

/* ------------------------------------------- matrix-vector rows, 32 */

/* A decode step's rows (rlx_quant_dot_rows_avx512): one activation row
 * against many weight rows, a block pair per step as in the tiles above,
 * lane for lane the AVX2 kernel's sums.  The activation's part of a pair
 * (its levels, scales and zero-point start) is made once for all rows. */
typedef struct {
    __m512i y, start;
    __m512 da;
} act_pair;

enum { ROW_PAIRS = 64 }; /* pairs made ahead: rows of up to 4096 elements */

INLINE __m512i zero_point32(int t)
{
    return _mm512_set1_epi8(t == RLX_GGML_Q8_0 ? (char)0x80 : t == RLX_GGML_Q4_0 ? 8 : 16);
}

INLINE act_pair act_pair_of(const uint8_t *a, bool two, int t)
{
    act_pair p;
    p.y = join(a + 2, RLX_Q8_0_BYTES, two);
    p.da = join_d(a, RLX_Q8_0_BYTES, two);
    p.start =
        _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), zero_point32(t), p.y));
    return p;
}

INLINE __m512 row_step32(__m512 acc, const uint8_t *w, size_t bytes, act_pair p, bool two, int t)
{
    __m512 prod = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(p.start, levels32(w, bytes, two, t), p.y));
    return _mm512_mask3_fmadd_ps(_mm512_mul_ps(join_d(w, bytes, two), p.da), prod, acc, two ? 0xffff : 0x00ff);
}

INLINE void rows32(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out, size_t bytes,
                   int t)
{
    const int64_t np = nb / 2;
    act_pair pre[ROW_PAIRS];
    const bool ahead = np <= ROW_PAIRS && rows > 1;
    for (int64_t p = 0; ahead && p < np; p++)
        pre[p] = act_pair_of(a + (size_t)(2 * p) * RLX_Q8_0_BYTES, true, t);
    /* the odd block's pair, made only where there is one: past an even row
     * it would read beyond the activations */
    act_pair last = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_ps()};
    if (nb % 2)
        last = act_pair_of(a + (size_t)(2 * np) * RLX_Q8_0_BYTES, false, t);
    for (int64_t j = 0; j < rows; j++, w += ws) {
        __m512 acc = _mm512_setzero_ps();
        if (ahead)
            for (int64_t p = 0; p < np; p++)
                acc = row_step32(acc, w + (size_t)(2 * p) * bytes, bytes, pre[p], true, t);
        else
            for (int64_t p = 0; p < np; p++)
                acc = row_step32(acc, w + (size_t)(2 * p) * bytes, bytes,
                                 act_pair_of(a + (size_t)(2 * p) * RLX_Q8_0_BYTES, true, t), true, t);
        if (nb % 2)
            acc = row_step32(acc, w + (size_t)(2 * np) * bytes, bytes, last, false, t);
        out[j] = hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
    }
}

AVX512 static void rows_q8_0(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out)
{
    rows32(nb, w, ws, rows, a, out, RLX_Q8_0_BYTES, RLX_GGML_Q8_0);
}

AVX512 static void rows_q4_0(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out)
{
    rows32(nb, w, ws, rows, a, out, RLX_Q4_0_BYTES, RLX_GGML_Q4_0);
}

AVX512 static void rows_q5_0(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out)
{
    rows32(nb, w, ws, rows, a, out, RLX_Q5_0_BYTES, RLX_GGML_Q5_0);
}

/* A grid of tiles (rlx_quant_tiles_avx512) of the 32-element types: the
 * activation pairs of a tile's rows made once for all its weight tiles,
 * the products then as step32's, operation for operation. */
enum { GRID_PAIRS = 48 }; /* pairs made ahead: rows of up to 3072 elements */

INLINE void grid32(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, size_t as, int64_t m,
                   float *y, int64_t ldy, size_t bytes, int t)
{
    act_pair pk[T][GRID_PAIRS];
    const int64_t np = nb / 2;
    for (int64_t i0 = 0; i0 < m; i0 += T) {
        const uint8_t *ai = a + (size_t)i0 * as;
        for (int i = 0; i < T; i++)
            for (int64_t p = 0; p < np; p++)
                pk[i][p] = act_pair_of(ai + (size_t)i * as + (size_t)(2 * p) * RLX_Q8_0_BYTES, true, t);
        for (int64_t j0 = 0; j0 < rows; j0 += T) {
            const uint8_t *wj = w + (size_t)j0 * ws;
            __m512 acc[T][T];
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    acc[i][j] = _mm512_setzero_ps();
            for (int64_t p = 0; p < np; p++) {
                __m512i u[T];
                __m512 dw[T];
                for (int j = 0; j < T; j++) {
                    u[j] = levels32(wj + (size_t)j * ws + (size_t)(2 * p) * bytes, bytes, true, t);
                    dw[j] = join_d(wj + (size_t)j * ws + (size_t)(2 * p) * bytes, bytes, true);
                }
                for (int i = 0; i < T; i++)
                    for (int j = 0; j < T; j++) {
                        __m512 prod = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(pk[i][p].start, u[j], pk[i][p].y));
                        acc[i][j] = _mm512_mask3_fmadd_ps(_mm512_mul_ps(dw[j], pk[i][p].da), prod, acc[i][j], 0xffff);
                    }
            }
            if (nb % 2)
                step32(acc, wj + (size_t)(2 * np) * bytes, ws, ai + (size_t)(2 * np) * RLX_Q8_0_BYTES, as, bytes, false,
                       t);
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    y[(i0 + i) * ldy + j0 + j] =
                        hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[i][j]), _mm512_extractf32x8_ps(acc[i][j], 1)));
        }
    }
}

AVX512 static void grid_q8_0(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, size_t as,
                             int64_t m, float *y, int64_t ldy)
{
    grid32(nb, w, ws, rows, a, as, m, y, ldy, RLX_Q8_0_BYTES, RLX_GGML_Q8_0);
}

AVX512 static void grid_q4_0(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, size_t as,
                             int64_t m, float *y, int64_t ldy)
{
    grid32(nb, w, ws, rows, a, as, m, y, ldy, RLX_Q4_0_BYTES, RLX_GGML_Q4_0);
}

AVX512 static void grid_q5_0(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, size_t as,
                             int64_t m, float *y, int64_t ldy)
{
    grid32(nb, w, ws, rows, a, as, m, y, ldy, RLX_Q5_0_BYTES, RLX_GGML_Q5_0);
}

bool rlx_quant_tiles_avx512(int t, int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, size_t as,
                            int64_t m, float *y, int64_t ldy)
{
    if (nb / 2 <= GRID_PAIRS)
        switch (t) {
        case RLX_GGML_Q8_0: grid_q8_0(nb, w, ws, rows, a, as, m, y, ldy); return true;
        case RLX_GGML_Q4_0: grid_q4_0(nb, w, ws, rows, a, as, m, y, ldy); return true;
        case RLX_GGML_Q5_0: grid_q5_0(nb, w, ws, rows, a, as, m, y, ldy); return true;
        default: break;
        }
    for (int64_t i = 0; i < m; i += T)
        for (int64_t j = 0; j < rows; j += T)
            if (!rlx_quant_tile_avx512(t, nb, w + (size_t)j * ws, ws, a + (size_t)i * as, as, y + i * ldy + j, ldy))
                return false;
    return true;
}

AVX512 static void rows_q6_k(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out);

bool rlx_quant_dot_rows_avx512(int t, int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a,
                               float *out)
{
    switch (t) {
    case RLX_GGML_Q8_0: rows_q8_0(nb, w, ws, rows, a, out); return true;
    case RLX_GGML_Q4_0: rows_q4_0(nb, w, ws, rows, a, out); return true;
    case RLX_GGML_Q5_0: rows_q5_0(nb, w, ws, rows, a, out); return true;
    case RLX_GGML_Q6_K: rows_q6_k(nb, w, ws, rows, a, out); return true;
    default: return false;
    }
}

/* ------------------------------------------------- Q8_0 activations */

/* quant_dot.c's act_q8_0, 32 elements at a time, to the bit: the largest
 * |x| of a block over its non-NaN elements (as the scalar loop's "NaN never
 * wins"), the same f32 products with the reciprocal step, NaN levels 0,
 * clamped to [-127, 127] and rounded to nearest even. */
AVX512 void rlx_quant_act_q8_0_avx512(const float *x, uint8_t *b, int64_t n)
{
    for (int64_t s = 0; s < n; s += 32, b += RLX_Q8_0_BYTES) {
        __m512 x0 = _mm512_loadu_ps(x + s), x1 = _mm512_loadu_ps(x + s + 16);
        __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
        a0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a0, a0, _CMP_ORD_Q), a0);
        a1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a1, a1, _CMP_ORD_Q), a1);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
        const float id = amax != 0 && isfinite(amax) ? 127.0f / amax : 0.0f;
        const uint16_t d = rlx_f32_to_f16(isfinite(amax) ? amax / 127.0f : 0.0f);
        memcpy(b, &d, 2);
        const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f), vid = _mm512_set1_ps(id);
        __m512 v0 = _mm512_mul_ps(x0, vid), v1 = _mm512_mul_ps(x1, vid);
        v0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v0, v0, _CMP_ORD_Q), v0);
        v1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v1, v1, _CMP_ORD_Q), v1);
        v0 = _mm512_roundscale_ps(_mm512_min_ps(_mm512_max_ps(v0, lo), hi),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v1 = _mm512_roundscale_ps(_mm512_min_ps(_mm512_max_ps(v1, lo), hi),
                                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(b + 2), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v0)));
        _mm_storeu_si128((__m128i *)(b + 18), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v1)));
    }
}

/* rlx_quantize_act's Q8_K, the same bytes as act_q8_k: the scale from the
 * first element of largest magnitude (with its sign), levels rounded to
 * nearest even, block sums of 16; a block with a non-finite element is
 * all zeros with scale 0.  A Q4_K_M decode step spent 6% in the scalar
 * form. */
AVX512 void rlx_quant_act_q8_k_avx512(const float *x, uint8_t *b, int64_t n)
{
    const __m512 inf = _mm512_set1_ps(INFINITY), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    for (int64_t s = 0; s < n; s += RLX_QK, b += RLX_Q8_K_BYTES) {
        const float *xb = x + s;
        __m512 amax = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int j = 0; j < RLX_QK; j += 16) {
            __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + j));
            bad |= _mm512_cmp_ps_mask(a, inf, _CMP_NLT_UQ); /* infinite or NaN */
            amax = _mm512_max_ps(amax, a);
        }
        int8_t *q = (int8_t *)(b + RLX_Q8_K_QS);
        int16_t bsums[16] = {0};
        float d = 0;
        const float m = _mm512_reduce_max_ps(amax);
        if (!bad && m != 0) {
            float max = m;
            const __m512 vm = _mm512_set1_ps(m);
            for (int j = 0; j < RLX_QK; j += 16) {
                __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + j)), vm, _CMP_EQ_OQ);
                if (hit) {
                    max = xb[j + __builtin_ctz(hit)];
                    break;
                }
            }
            const float iscale = -127.0f / max;
            const __m512 vs = _mm512_set1_ps(iscale);
            for (int j = 0; j < RLX_QK; j += 16) {
                __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(xb + j), vs),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                __m512i iv = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo), hi));
                _mm_storeu_si128((__m128i *)(q + j), _mm512_cvtepi32_epi8(iv));
                bsums[j / 16] = (int16_t)_mm512_reduce_add_epi32(iv);
            }
            d = 1.0f / iscale;
        } else {
            memset(q, 0, RLX_QK);
        }
        memcpy(b, &d, 4);
        memcpy(b + RLX_Q8_K_BSUMS, bsums, sizeof bsums);
    }
}

/* ----------------------------------------------------------- K types */

/* Sixteen int16 lanes of s0, then sixteen of s1. */
INLINE __m512i two_scales(int s0, int s1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)s0)), _mm256_set1_epi16((short)s1), 1);
}

/* The 8 lanes of a pair's block: lanes l and l + 8 of its int32 sums hold
 * the same bytes of two sub-blocks. */
INLINE __m256i fold(__m512i v) { return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)); }

/* The Q4_K min terms of a tile's 16 pairs, lane 4j + i: sum over s of
 * m_j[s] * (bsums_i[2s] + bsums_i[2s + 1]), as the AVX2 kernel's
 * k4_min_sum (exact integers). */
INLINE __m512i k4_min_sums(const uint8_t m[T][8], const uint8_t *a, size_t as)
{
    __m128i mj[T];
    for (int j = 0; j < T; j++)
        mj[j] = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)m[j]));
    __m512i mw =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(mj[1], mj[0])), _mm256_set_m128i(mj[3], mj[2]), 1);
    __m512i d[T]; /* lane 4j + t: the terms 2t and 2t + 1 of pair (i, j) */
    for (int i = 0; i < T; i++) {
        __m256i pairs = _mm256_madd_epi16(loadu(a + (size_t)i * as + RLX_Q8_K_BSUMS), _mm256_set1_epi16(1));
        __m512i bs = _mm512_broadcast_i32x4(_mm256_cvtepi32_epi16(pairs));
        d[i] = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mw, bs);
    }
    __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[0], d[1]), _mm512_unpackhi_epi32(d[0], d[1]));
    __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(d[2], d[3]), _mm512_unpackhi_epi32(d[2], d[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
}

/* Q4_K and Q5_K (five: the fifth bits of chunk c are bits 2c and 2c + 1 of qh) */
INLINE void tile_q45_k(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y, int64_t ldy,
                       bool five)
{
    const size_t bytes = five ? RLX_Q5_K_BYTES : RLX_Q4_K_BYTES, qs_at = five ? 48 : 16;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bit4 = _mm256_set1_epi8(0x10);
    __m256 acc[T][T];
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            acc[i][j] = _mm256_setzero_ps();
    __m512 mins = _mm512_setzero_ps(); /* lane 4j + i */
    for (int64_t b = 0; b < nb; b++, w += bytes, a += RLX_Q8_K_BYTES) {
        uint8_t sc[T][8], m[T][8];
        for (int j = 0; j < T; j++)
            rlx_q_k4_scales_mins(w + (size_t)j * ws + 4, sc[j], m[j]);
        __m512i isum[T][T];
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                isum[i][j] = _mm512_setzero_si512();
        for (int c = 0; c < 4; c++) {
            __m512i yv[T];
            for (int i = 0; i < T; i++)
                yv[i] = _mm512_loadu_si512(a + (size_t)i * as + RLX_Q8_K_QS + 64 * c);
            for (int j = 0; j < T; j++) {
                __m256i q = loadu(w + (size_t)j * ws + qs_at + 32 * c);
                __m256i lo = _mm256_and_si256(q, low4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
                if (five) {
                    __m256i qh = loadu(w + (size_t)j * ws + 16);
                    lo =
                        _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * c), 4), bit4));
                    hi = _mm256_or_si256(
                        hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * c + 1), 4), bit4));
                }
                __m512i u = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                __m512i s = two_scales(sc[j][2 * c], sc[j][2 * c + 1]);
                for (int i = 0; i < T; i++)
                    isum[i][j] = _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(u, yv[i]), s);
            }
        }
        float d[T], dmin[T], da[T];
        for (int j = 0; j < T; j++)
            d[j] = f16(w + (size_t)j * ws), dmin[j] = f16(w + (size_t)j * ws + 2);
        for (int i = 0; i < T; i++) {
            da[i] = rlx_q_f32(a + (size_t)i * as);
            for (int j = 0; j < T; j++)
                acc[i][j] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d[j] * da[i]), _mm256_cvtepi32_ps(fold(isum[i][j])), acc[i][j]);
        }
        const __m512i by_j = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        __m512 dm = _mm512_permutexvar_ps(by_j, _mm512_castps128_ps512(_mm_loadu_ps(dmin)));
        __m512 dai = _mm512_broadcast_f32x4(_mm_loadu_ps(da));
        mins = _mm512_fmadd_ps(_mm512_mul_ps(dm, dai), _mm512_cvtepi32_ps(k4_min_sums(m, a, as)), mins);
    }
    float mn[T * T];
    _mm512_storeu_ps(mn, mins);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            y[i * ldy + j] = hsum_ps(acc[i][j]) - mn[4 * j + i];
}

AVX512 static void tile_q4_k(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                             int64_t ldy)
{
    tile_q45_k(nb, w, ws, a, as, y, ldy, false);
}

AVX512 static void tile_q5_k(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                             int64_t ldy)
{
    tile_q45_k(nb, w, ws, a, as, y, ldy, true);
}

/* Q6_K, ti activation rows times tj weight rows (at most T each) */
INLINE void tile_q6_k_n(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y, int64_t ldy,
                        const int ti, const int tj)
{
    const __m256i low4 = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x30);
    __m256 acc[T][T];
    for (int i = 0; i < ti; i++)
        for (int j = 0; j < tj; j++)
            acc[i][j] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, w += RLX_Q6_K_BYTES, a += RLX_Q8_K_BYTES) {
        __m256i sc16[T];
        for (int j = 0; j < tj; j++)
            sc16[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + (size_t)j * ws + RLX_Q6_K_SCALES)));
        __m512i isum[T][T];
        for (int i = 0; i < ti; i++)
            for (int j = 0; j < tj; j++)
                isum[i][j] = _mm512_setzero_si512();
        /* z = 2h + half: the chunks 2 half, 2 half + 1 of the 128-element half h */
        for (int z = 0; z < 4; z++) {
            const int h = z >> 1, half = z & 1;
            __m512i yv[T];
            for (int i = 0; i < ti; i++)
                yv[i] = _mm512_loadu_si512(a + (size_t)i * as + RLX_Q8_K_QS + 64 * z);
            /* sub-blocks 4z .. 4z + 3, eight int16 lanes each */
            const __m512i pick =
                _mm512_add_epi16(_mm512_srli_epi16(_mm512_setr_epi32(0x00010000, 0x00030002, 0x00050004, 0x00070006,
                                                                     0x00090008, 0x000b000a, 0x000d000c, 0x000f000e,
                                                                     0x00110010, 0x00130012, 0x00150014, 0x00170016,
                                                                     0x00190018, 0x001b001a, 0x001d001c, 0x001f001e),
                                                   3),
                                 _mm512_set1_epi16((short)(4 * z)));
            for (int j = 0; j < tj; j++) {
                const uint8_t *wj = w + (size_t)j * ws;
                __m256i ql0 = loadu(wj + 64 * h), ql1 = loadu(wj + 64 * h + 32), qh = loadu(wj + RLX_Q6_K_QH + 32 * h);
                __m256i q0, q1;
                if (!half) {
                    q0 = _mm256_or_si256(_mm256_and_si256(ql0, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), two));
                    q1 = _mm256_or_si256(_mm256_and_si256(ql1, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), two));
                } else {
                    q0 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4), _mm256_and_si256(qh, two));
                    q1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
                                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), two));
                }
                __m512i u = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
                __m512i s = _mm512_permutexvar_epi16(pick, _mm512_castsi256_si512(sc16[j]));
                for (int i = 0; i < ti; i++)
                    isum[i][j] = _mm512_dpwssd_epi32(isum[i][j], _mm512_maddubs_epi16(u, yv[i]), s);
            }
        }
        for (int i = 0; i < ti; i++) {
            const uint8_t *ai = a + (size_t)i * as;
            const float da = rlx_q_f32(ai);
            const __m256i bs = loadu(ai + RLX_Q8_K_BSUMS);
            for (int j = 0; j < tj; j++) {
                /* the -32 of every level, grouped by sub-block pair as the AVX2 kernel groups it */
                __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(bs, sc16[j]), 5);
                __m256i s = _mm256_sub_epi32(fold(isum[i][j]), off);
                acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(f16(w + (size_t)j * ws + RLX_Q6_K_D) * da),
                                            _mm256_cvtepi32_ps(s), acc[i][j]);
            }
        }
    }
    for (int i = 0; i < ti; i++)
        for (int j = 0; j < tj; j++)
            y[i * ldy + j] = hsum_ps(acc[i][j]);
}

AVX512 static void tile_q6_k(int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                             int64_t ldy)
{
    tile_q6_k_n(nb, w, ws, a, as, y, ldy, T, T);
}

/* A decode step's Q6_K rows (the output projection of Q4_0 and Q4_K_M
 * files): the tile's arithmetic for one pair at a time. */
AVX512 static void rows_q6_k(int64_t nb, const uint8_t *w, size_t ws, int64_t rows, const uint8_t *a, float *out)
{
    for (int64_t j = 0; j < rows; j++)
        tile_q6_k_n(nb, w + (size_t)j * ws, 0, a, 0, out + j, 1, 1, 1);
}

bool rlx_quant_tile_avx512(int t, int64_t nb, const uint8_t *w, size_t ws, const uint8_t *a, size_t as, float *y,
                           int64_t ldy)
{
    switch (t) {
    case RLX_GGML_Q8_0: tile_q8_0(nb, w, ws, a, as, y, ldy); return true;
    case RLX_GGML_Q4_0: tile_q4_0(nb, w, ws, a, as, y, ldy); return true;
    case RLX_GGML_Q5_0: tile_q5_0(nb, w, ws, a, as, y, ldy); return true;
    case RLX_GGML_Q4_K: tile_q4_k(nb, w, ws, a, as, y, ldy); return true;
    case RLX_GGML_Q5_K: tile_q5_k(nb, w, ws, a, as, y, ldy); return true;
    case RLX_GGML_Q6_K: tile_q6_k(nb, w, ws, a, as, y, ldy); return true;
    default: return false;
    }
}

#else
typedef int rlx_quant_tile_avx512_unused; /* not x86: no AVX-512 kernels */
#endif
