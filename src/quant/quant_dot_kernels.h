/* quant_dot_kernels.h - the per-instruction-set kernel entry points behind
 * quant_dot.c.  Each takes nb blocks of the weight type (32 or 256
 * elements each, by type) and the matching activation blocks. */
#ifndef RLX_QUANT_QUANT_DOT_KERNELS_H
#define RLX_QUANT_QUANT_DOT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#define RLX_QUANT_HAVE_AVX2 1
/* The AVX2 kernels (quant_dot_avx2.c); call only where the processor has
 * AVX2, FMA and F16C.  false for a type without an AVX2 kernel. */
bool rlx_quant_dot_avx2(int weight_type, int64_t nb, const uint8_t *w, const uint8_t *a, float *out);
/* out[j] for weight rows j < rows at w + j * w_stride, the same kernel. */
bool rlx_quant_dot_rows_avx2(int weight_type, int64_t nb, const uint8_t *w, size_t w_stride, int64_t rows,
                             const uint8_t *a, float *out);
/* The AVX-512 VNNI matrix-vector rows (quant_tile_avx512.c): the AVX2
 * kernels' results to the bit, for Q8_0, Q4_0, Q5_0 and Q6_K (false for
 * other types); call only where rlx_quant_tile_avx512 may be called. */
bool rlx_quant_dot_rows_avx512(int weight_type, int64_t nb, const uint8_t *w, size_t w_stride, int64_t rows,
                               const uint8_t *a, float *out);
/* Q8_0 and Q8_K activations (quant_tile_avx512.c): quant_dot.c's, to the
 * bit, for n a multiple of 32 (Q8_K: of 256); call only where the above may
 * be called. */
void rlx_quant_act_q8_0_avx512(const float *x, uint8_t *b, int64_t n);
void rlx_quant_act_q8_k_avx512(const float *x, uint8_t *b, int64_t n);
/* The AVX-512 VNNI tiles (quant_tile_avx512.c; rlx_quant_tile's contract,
 * nb blocks); call only where the processor has AVX-512 F, BW, VL, DQ and
 * VNNI besides the above.  false for a type without a tiled kernel. */
bool rlx_quant_tile_avx512(int weight_type, int64_t nb, const uint8_t *w, size_t w_stride, const uint8_t *a,
                           size_t a_stride, float *y, int64_t ldy);
/* rlx_quant_tiles' grid with those tiles (the same results), nb blocks. */
bool rlx_quant_tiles_avx512(int weight_type, int64_t nb, const uint8_t *w, size_t w_stride, int64_t rows,
                            const uint8_t *a, size_t a_stride, int64_t m, float *y, int64_t ldy);
#endif

#endif
