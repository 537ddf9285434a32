/* quant_dot.h - the CPU dot products of a quantized matrix-vector product:
 * one weight row (a quantized type of quant.h) against one activation row
 * quantized per block to 8 bits, the pairing llama.cpp uses:
 *   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 weights  <->  Q8_0 activations
 *   Q4_K, Q5_K, Q6_K, Q8_K weights        <->  Q8_K activations
 * so that the inner products are integer sums, exact, and only the
 * per-block scaling and the sum over blocks round (in f32).
 *
 * Each kernel has a portable scalar version and an AVX2 one (quant_dot_avx2.c,
 * compiled for AVX2+FMA+F16C by function attributes, so the library still
 * runs on any x86-64), Q8_0, Q4_0, Q5_0 and Q6_K also an AVX-512 VNNI one
 * (quant_tile_avx512.c); rlx_quant_vec_dot picks the best the processor has
 * at each call (the features are asked once; the check is a load and a
 * test). */
#ifndef RLX_QUANT_QUANT_DOT_H
#define RLX_QUANT_QUANT_DOT_H

#include "quant/quant.h"

typedef enum rlx_quant_isa {
    RLX_QUANT_SCALAR,
    RLX_QUANT_AVX2, /* AVX2, FMA and F16C */
    /* AVX2's and AVX-512 F, BW, VL, DQ and VNNI: Q8_0, Q4_0, Q5_0 and Q6_K
     * rows with vpdpbusd / vpdpwssd, the AVX2 kernels' results to the bit;
     * the other types run the AVX2 kernels */
    RLX_QUANT_AVX512,
    RLX_QUANT_ISA_COUNT
} rlx_quant_isa;

/* Whether this processor (and build) runs the kernels of isa; the best one. */
bool rlx_quant_isa_available(rlx_quant_isa isa);
rlx_quant_isa rlx_quant_isa_best(void);
const char *rlx_quant_isa_name(rlx_quant_isa isa); /* "scalar", "avx2", "avx512" */
/* Whether the processor has AVX-512 F, BW, VL, DQ and VNNI besides AVX2
 * (the tiles here and igemm.h's VNNI kernel use them). */
bool rlx_quant_avx512_vnni_available(void);

/* The activation type for a weight type (RLX_GGML_Q8_0 or RLX_GGML_Q8_K),
 * -1 when the weight type is unsupported; the bytes of n activations. */
int rlx_quant_act_type(int weight_type);
size_t rlx_quant_act_bytes(int weight_type, int64_t n);
/* Quantizes n activations (a multiple of the weight type's block size) into
 * act_q8 (rlx_quant_act_bytes of them).  Levels stay in [-127, 127], which
 * the kernels rely on. */
rlx_status rlx_quantize_act(int weight_type, const float *x, void *act_q8, int64_t n);

/* The dot product of n elements of w_row (weight_type) and act_q8 (as
 * rlx_quantize_act made it for that weight type).  The hot call of the
 * matrix-vector product: an unsupported type or an n that is not a multiple
 * of the block size sets an error and returns NaN. */
float rlx_quant_vec_dot(int weight_type, int64_t n, const void *w_row, const void *act_q8);
/* The same with the kernels of isa (which must be available). */
float rlx_quant_vec_dot_isa(rlx_quant_isa isa, int weight_type, int64_t n, const void *w_row, const void *act_q8);
/* y[j] = rlx_quant_vec_dot of weight row j (at w + j * w_stride) and act_q8,
 * for j < rows, to the bit: the arguments are checked and the kernel chosen
 * once for all rows (a decode step's rows are a few blocks each, where a
 * call per row costs as much as its dot).  The error cases set an error
 * and return it, leaving y alone. */
rlx_status rlx_quant_vec_dot_rows(int weight_type, int64_t n, const void *w, size_t w_stride, int64_t rows,
                                  const void *act_q8, float *y);

/* Tiles of a many-rows product (a prompt): RLX_QUANT_TILE activation rows
 * times RLX_QUANT_TILE weight rows, each weight block unpacked once for
 * every row of the tile.  y[i * ldy + j] is rlx_quant_vec_dot of weight row
 * j (at w + j * w_stride) and activation row i (at act + i * act_stride) to
 * the bit, so a prompt's rows equal a decode step's.  Available for the
 * types and processors that have such a kernel (AVX-512 VNNI: Q8_0, Q4_0,
 * Q5_0, Q4_K, Q5_K, Q6_K); where not, rlx_quant_tile returns false and leaves y alone. */
enum { RLX_QUANT_TILE = 4 };
bool rlx_quant_tile_available(int weight_type);
bool rlx_quant_tile(int weight_type, int64_t n, const void *w, size_t w_stride, const void *act, size_t act_stride,
                    float *y, int64_t ldy);
/* rlx_quant_tile over a grid, the arguments checked once (a prompt's
 * projection is thousands of tiles): activation rows i < m times weight
 * rows j < rows, both multiples of RLX_QUANT_TILE, into y[i * ldy + j];
 * false, y left alone, where rlx_quant_tile would refuse or a count is
 * not whole tiles. */
bool rlx_quant_tiles(int weight_type, int64_t n, const void *w, size_t w_stride, int64_t rows, const void *act,
                     size_t act_stride, int64_t m, float *y, int64_t ldy);

#endif
