/* igemm.c - packing, the portable scalar kernel and the choice of kernels
 * of the 8-bit integer products (igemm.h). */
#include "quant/igemm.h"

#include <string.h>

#include "quant/quant_dot.h"

bool rlx_igemm_isa_available(rlx_igemm_isa isa)
{
    switch (isa) {
    case RLX_IGEMM_SCALAR: return true;
#ifdef RLX_IGEMM_HAVE_X86
    case RLX_IGEMM_AVX2: return rlx_quant_isa_available(RLX_QUANT_AVX2);
    case RLX_IGEMM_AVX512_VNNI: return rlx_quant_avx512_vnni_available();
#endif
    default: return false;
    }
}

rlx_igemm_isa rlx_igemm_isa_best(void)
{
    for (int i = RLX_IGEMM_ISA_COUNT - 1; i > 0; i--)
        if (rlx_igemm_isa_available((rlx_igemm_isa)i))
            return (rlx_igemm_isa)i;
    return RLX_IGEMM_SCALAR;
}

const char *rlx_igemm_isa_name(rlx_igemm_isa isa)
{
    switch (isa) {
    case RLX_IGEMM_SCALAR: return "scalar";
    case RLX_IGEMM_AVX2: return "avx2";
    case RLX_IGEMM_AVX512_VNNI: return "avx512-vnni";
    default: return "?";
    }
}

void rlx_igemm_pack_b(const void *b, bool b_signed, int64_t k, int64_t n, int64_t ldb, void *packed)
{
    const int64_t kp = rlx_igemm_kp(k), np = rlx_igemm_panels(n);
    int8_t *dst = packed;
    int32_t *colsum = (int32_t *)(dst + np * kp * RLX_IGEMM_NR);
    const uint8_t *bu = b;
    memset(colsum, 0, (size_t)n * sizeof *colsum);
    for (int64_t p = 0; p < np; p++) {
        int8_t *panel = dst + p * kp * RLX_IGEMM_NR;
        for (int64_t g = 0; g < kp; g += 4)
            for (int64_t c = 0; c < RLX_IGEMM_NR; c++) {
                int64_t j = p * RLX_IGEMM_NR + c;
                for (int64_t q = 0; q < 4; q++) {
                    int v = 0;
                    if (j < n && g + q < k) {
                        uint8_t raw = bu[(g + q) * ldb + j];
                        v = b_signed ? (int8_t)raw : raw - 128; /* u8 weights as s8 */
                        colsum[j] += v;
                    }
                    panel[g * RLX_IGEMM_NR + c * 4 + q] = (int8_t)v;
                }
            }
    }
}

void rlx_igemm_row_sums(const uint8_t *a, int64_t lda, int64_t m, int64_t k, int32_t *rowsum)
{
    for (int64_t i = 0; i < m; i++) {
        uint32_t s = 0;
        for (int64_t q = 0; q < k; q++)
            s += a[i * lda + q];
        rowsum[i] = (int32_t)s;
    }
}

static void block_scalar(const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1)
{
    const int64_t kp = rlx_igemm_kp(g->k);
    for (int64_t p = p0; p < p1; p++) {
        const int8_t *panel = (const int8_t *)g->packed + p * kp * RLX_IGEMM_NR;
        for (int64_t i = i0; i < i1; i++)
            for (int64_t c = 0; c < RLX_IGEMM_NR; c++) {
                int64_t j = p * RLX_IGEMM_NR + c;
                if (j >= g->n)
                    break;
                uint32_t s = 0;
                for (int64_t q = 0; q < g->k; q++)
                    s += (uint32_t)((int32_t)g->a[i * g->lda + q] * panel[(q & ~3) * RLX_IGEMM_NR + c * 4 + (q & 3)]);
                g->c[i * g->ldc + j] = rlx_igemm_fix(g, i, j, s);
            }
    }
}

void rlx_igemm_block(rlx_igemm_isa isa, const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1)
{
    if (i0 >= i1 || p0 >= p1)
        return;
    switch (isa) {
#ifdef RLX_IGEMM_HAVE_X86
    case RLX_IGEMM_AVX2: rlx_igemm_block_avx2(g, i0, i1, p0, p1); return;
    case RLX_IGEMM_AVX512_VNNI: rlx_igemm_block_vnni(g, i0, i1, p0, p1); return;
#endif
    default: block_scalar(g, i0, i1, p0, p1); return;
    }
}
