/* igemm_x86.c - the AVX2 and AVX-512 VNNI kernels of igemm.h.
 *
 * VNNI: vpdpbusd adds four u8 x s8 products into each int32 lane without
 * saturating, so a panel's 16 columns of 4 bytes per k group are one
 * vector, and a row's 4 activation bytes are broadcast against it.  Tiles
 * of up to 6 rows by 2 panels (12 accumulators); K runs in chunks whose
 * panel slice stays in L1 while every row tile of the block reads it, the
 * partial sums kept in C between chunks.
 *
 * AVX2: vpmaddubsw would saturate int16 (255 * 127 * 2 > 32767), so bytes
 * are widened to int16 (activations zero-, weights sign-extended) and
 * vpmaddwd sums pairs of products into int32 (at most 2 * 255 * 128):
 * exact.  A lane then holds two of a column's four products; horizontal
 * adds finish the column.
 *
 * Functions carry the target attribute, so the file builds for any x86-64;
 * igemm.c calls them only where the processor has these features. */
#include "quant/igemm.h"

#ifdef RLX_IGEMM_HAVE_X86

#include <immintrin.h>
#include <string.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define VNNI __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define VINLINE VNNI static inline __attribute__((always_inline))
#define AINLINE AVX2 static inline __attribute__((always_inline))

enum { MR = 6, KC = 512 /* k per chunk: two panels' slice is 16 KiB */ };

/* The 4 activation bytes of k group q of a row, zeros past k (the packed
 * weights are zero there too, but reading past the row could fault). */
static inline int32_t a4(const uint8_t *row, int64_t q, int64_t k)
{
    uint8_t t[4] = {0, 0, 0, 0};
    int64_t left = k - 4 * q;
    memcpy(t, row + 4 * q, (size_t)(left < 4 ? left : 4));
    int32_t v;
    memcpy(&v, t, 4);
    return v;
}

static inline int32_t a4_full(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline const int32_t *colsums(const rlx_igemm_args *g)
{
    return (const int32_t *)((const int8_t *)g->packed + rlx_igemm_panels(g->n) * rlx_igemm_kp(g->k) * RLX_IGEMM_NR);
}

/* ---------------------------------------------------------------- VNNI */

/* Rows i..i+mr by panels p..p+np over k groups [q0, q1); first: start
 * from zero, else from C's partial sums; last: add the zero-point terms. */
VINLINE void vnni_tile(const rlx_igemm_args *g, int64_t i, int64_t p, int mr, int np, int64_t q0, int64_t q1,
                       bool first, bool last)
{
    const int64_t kp = rlx_igemm_kp(g->k), kq = g->k / 4, ps = kp * RLX_IGEMM_NR;
    const int8_t *b = (const int8_t *)g->packed + p * ps;
    const uint8_t *a = g->a + i * g->lda;
    __mmask16 mask[2] = {0, 0};
    for (int c = 0; c < np; c++) {
        int64_t left = g->n - (p + c) * RLX_IGEMM_NR;
        mask[c] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    }
    __m512i acc[MR][2];
    for (int r = 0; r < mr; r++)
        for (int c = 0; c < np; c++)
            acc[r][c] = first ? _mm512_setzero_si512()
                              : _mm512_maskz_loadu_epi32(mask[c], g->c + (i + r) * g->ldc + (p + c) * RLX_IGEMM_NR);
    int64_t qf = q1 < kq ? q1 : kq; /* whole groups; a last partial one after */
    for (int64_t q = q0; q < qf; q++) {
        __m512i b0 = _mm512_loadu_si512(b + q * 64), b1 = np > 1 ? _mm512_loadu_si512(b + ps + q * 64) : b0;
        for (int r = 0; r < mr; r++) {
            __m512i va = _mm512_set1_epi32(a4_full(a + r * g->lda + 4 * q));
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], va, b0);
            if (np > 1)
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], va, b1);
        }
    }
    if (q1 > kq) {
        __m512i b0 = _mm512_loadu_si512(b + kq * 64), b1 = np > 1 ? _mm512_loadu_si512(b + ps + kq * 64) : b0;
        for (int r = 0; r < mr; r++) {
            __m512i va = _mm512_set1_epi32(a4(a + r * g->lda, kq, g->k));
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], va, b0);
            if (np > 1)
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], va, b1);
        }
    }
    for (int c = 0; c < np; c++) {
        int64_t j0 = (p + c) * RLX_IGEMM_NR;
        __m512i colterm = _mm512_setzero_si512(), zb = _mm512_setzero_si512();
        if (last) {
            /* za (K zb - colsum): the terms of column j that do not depend on the row */
            zb = g->zb_per_col ? _mm512_maskz_loadu_epi32(mask[c], g->zb + j0) : _mm512_set1_epi32(g->zb[0]);
            __m512i cs = _mm512_maskz_loadu_epi32(mask[c], colsums(g) + j0);
            colterm =
                _mm512_mullo_epi32(_mm512_set1_epi32(g->za),
                                   _mm512_sub_epi32(_mm512_mullo_epi32(_mm512_set1_epi32((int32_t)g->k), zb), cs));
        }
        for (int r = 0; r < mr; r++) {
            __m512i s = acc[r][c];
            if (last) {
                __m512i rowterm = _mm512_mullo_epi32(zb, _mm512_set1_epi32(g->rowsum[i + r]));
                s = _mm512_sub_epi32(_mm512_add_epi32(s, colterm), rowterm);
            }
            _mm512_mask_storeu_epi32(g->c + (i + r) * g->ldc + j0, mask[c], s);
        }
    }
}

/* The tile for mr, np known at compile time (the accumulators stay in registers). */
#define VNNI_CASE(R, P) \
    case (R)*2 + (P)-1: vnni_tile(g, i, p, R, P, q0, q1, first, last); break;

VNNI static void vnni_tile_any(const rlx_igemm_args *g, int64_t i, int64_t p, int mr, int np, int64_t q0, int64_t q1,
                               bool first, bool last)
{
    switch (mr * 2 + np - 1) {
        VNNI_CASE(1, 1)
        VNNI_CASE(1, 2)
        VNNI_CASE(2, 1)
        VNNI_CASE(2, 2)
        VNNI_CASE(3, 1)
        VNNI_CASE(3, 2)
        VNNI_CASE(4, 1)
        VNNI_CASE(4, 2)
        VNNI_CASE(5, 1)
        VNNI_CASE(5, 2)
        VNNI_CASE(6, 1)
        VNNI_CASE(6, 2)
    default: break;
    }
}

VNNI void rlx_igemm_block_vnni(const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1)
{
    const int64_t nq = rlx_igemm_kp(g->k) / 4;
    if (nq == 0) { /* k = 0: only the zero-point terms, which are 0 */
        for (int64_t i = i0; i < i1; i++)
            for (int64_t j = p0 * RLX_IGEMM_NR; j < g->n && j < p1 * RLX_IGEMM_NR; j++)
                g->c[i * g->ldc + j] = 0;
        return;
    }
    for (int64_t q0 = 0; q0 < nq; q0 += KC / 4) {
        int64_t q1 = q0 + KC / 4 < nq ? q0 + KC / 4 : nq;
        for (int64_t p = p0; p < p1; p += 2) {
            int np = p + 1 < p1 ? 2 : 1;
            for (int64_t i = i0; i < i1; i += MR) {
                int mr = i1 - i < MR ? (int)(i1 - i) : MR;
                vnni_tile_any(g, i, p, mr, np, q0, q1, q0 == 0, q1 == nq);
            }
        }
    }
}

/* ---------------------------------------------------------------- AVX2 */

/* One row by one panel: 16 sums, each lane of acc[x] two products of
 * column 4x + lane / 2. */
AINLINE void avx2_row(const rlx_igemm_args *g, int64_t i, int64_t p)
{
    const int64_t kp = rlx_igemm_kp(g->k), kq = g->k / 4;
    const int8_t *b = (const int8_t *)g->packed + p * kp * RLX_IGEMM_NR;
    const uint8_t *a = g->a + i * g->lda;
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t q = 0; q < kp / 4; q++) {
        int32_t av = q < kq ? a4_full(a + 4 * q) : a4(a, q, g->k);
        /* a0 a1 a2 a3 as int16, four times: one column's four k's each */
        __m256i va = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(av)));
        for (int x = 0; x < 4; x++) {
            __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + q * 64 + 16 * x)));
            acc[x] = _mm256_add_epi32(acc[x], _mm256_madd_epi16(va, vb));
        }
    }
    int32_t s[16];
    for (int h = 0; h < 2; h++) {
        __m256i sum = _mm256_hadd_epi32(acc[2 * h], acc[2 * h + 1]);
        _mm256_storeu_si256((__m256i *)(s + 8 * h), _mm256_permute4x64_epi64(sum, 0xD8));
    }
    for (int c = 0; c < RLX_IGEMM_NR; c++) {
        int64_t j = p * RLX_IGEMM_NR + c;
        if (j >= g->n)
            break;
        g->c[i * g->ldc + j] = rlx_igemm_fix(g, i, j, (uint32_t)s[c]);
    }
}

AVX2 void rlx_igemm_block_avx2(const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1)
{
    for (int64_t p = p0; p < p1; p++)
        for (int64_t i = i0; i < i1; i++)
            avx2_row(g, i, p);
}

#endif
