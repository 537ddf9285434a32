/* igemm.h - 8-bit integer matrix products with int32 results, as ONNX's
 * MatMulInteger and QLinearMatMul define them:
 *   C[i][j] = sum_k (A[i][k] - za) * (B[k][j] - zb[j])
 * A u8 or s8 activations, B s8 or u8 weights.  Every case runs as u8 x s8
 * (vpdpbusd's operands): s8 activations become u8 by + 128 with za + 128,
 * u8 weights s8 by - 128 with zb - 128; the differences are the same.
 * The sums are exact (wrapping mod 2^32 as int32 does), computed as
 *   A.B - za colsum(B) - zb[j] rowsum(A) + K za zb[j].
 *
 * B is packed once (per constant weight, at compile time) into panels of
 * RLX_IGEMM_NR columns; within a panel each group of 4 k's holds 4 bytes
 * per column (K padded with zeros to a multiple of 4), then the column
 * sums.  Kernels: portable scalar, AVX2 (bytes widened to int16 and summed
 * in pairs by vpmaddwd: exact, unlike vpmaddubsw's saturating int16), and
 * AVX-512 VNNI; the best the processor has is chosen at run time. */
#ifndef RLX_QUANT_IGEMM_H
#define RLX_QUANT_IGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { RLX_IGEMM_NR = 16 };

typedef enum rlx_igemm_isa {
    RLX_IGEMM_SCALAR,
    RLX_IGEMM_AVX2,
    RLX_IGEMM_AVX512_VNNI, /* AVX-512 F, BW, VL, DQ and VNNI */
    RLX_IGEMM_ISA_COUNT
} rlx_igemm_isa;

bool rlx_igemm_isa_available(rlx_igemm_isa isa);
rlx_igemm_isa rlx_igemm_isa_best(void);
const char *rlx_igemm_isa_name(rlx_igemm_isa isa);

/* Column panels of n columns, and the bytes of B packed (panels, then n
 * int32 column sums). */
static inline int64_t rlx_igemm_panels(int64_t n) { return (n + RLX_IGEMM_NR - 1) / RLX_IGEMM_NR; }
static inline int64_t rlx_igemm_kp(int64_t k) { return (k + 3) / 4 * 4; }
static inline size_t rlx_igemm_packed_bytes(int64_t k, int64_t n)
{
    return (size_t)(rlx_igemm_panels(n) * rlx_igemm_kp(k) * RLX_IGEMM_NR) + (size_t)n * sizeof(int32_t);
}

/* Packs B [k][n] (row stride ldb elements; b_signed: s8, else u8) into
 * packed (rlx_igemm_packed_bytes). */
void rlx_igemm_pack_b(const void *b, bool b_signed, int64_t k, int64_t n, int64_t ldb, void *packed);

/* One product: A u8 [m][k] (row stride lda), packed B, zero points in the
 * u8 x s8 form (za in [0, 255]: the activations' zero point, + 128 for s8
 * activations; zb[0] for every column when zb_per_col is false, else
 * zb[j], each in [-128, 127]: the weights' zero point, - 128 for u8
 * weights), rowsum[i] = sum_k A[i][k] (rlx_igemm_row_sums). */
typedef struct rlx_igemm_args {
    int64_t m, k, n;
    const uint8_t *a;
    int64_t lda;
    const void *packed;
    int32_t za;
    const int32_t *zb;
    bool zb_per_col;
    const int32_t *rowsum;
    int32_t *c;
    int64_t ldc;
} rlx_igemm_args;

/* The zero-point terms added to a raw sum s = sum_k A[i][k] B[k][j]
 * (unsigned: int32's wrapping, without overflow's undefined behaviour). */
static inline int32_t rlx_igemm_fix(const rlx_igemm_args *g, int64_t i, int64_t j, uint32_t s)
{
    const int32_t *colsum =
        (const int32_t *)((const int8_t *)g->packed + rlx_igemm_panels(g->n) * rlx_igemm_kp(g->k) * RLX_IGEMM_NR);
    uint32_t za = (uint32_t)g->za, zb = (uint32_t)g->zb[g->zb_per_col ? j : 0];
    s -= za * (uint32_t)colsum[j] + zb * (uint32_t)g->rowsum[i];
    s += (uint32_t)g->k * za * zb;
    return (int32_t)s;
}

void rlx_igemm_row_sums(const uint8_t *a, int64_t lda, int64_t m, int64_t k, int32_t *rowsum);

/* C rows [i0, i1) by column panels [p0, p1), with the kernels of isa (which
 * must be available).  Disjoint blocks may run on different threads. */
void rlx_igemm_block(rlx_igemm_isa isa, const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1);

/* The per-instruction-set blocks (igemm_x86.c), rlx_igemm_block's contract. */
#if defined(__x86_64__) || defined(__i386__)
#define RLX_IGEMM_HAVE_X86 1
void rlx_igemm_block_avx2(const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1);
void rlx_igemm_block_vnni(const rlx_igemm_args *g, int64_t i0, int64_t i1, int64_t p0, int64_t p1);
#endif

#endif
