/* quant.h - ggml's block-quantized weight types (the formats GGUF files
 * store): Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and Q8_K, named
 * by their ggml type ids (RLX_GGML_*, core/ggml_type.h).  The block layouts are
 * written out in quant_layout.h.
 *
 * A row of n elements is n / block-size blocks back to back; rows may start
 * at any byte.  Dequantization is bit-exact with the format's definition:
 * each element is computed with the same f32 operations in the same order
 * as ggml's reference dequantizers (quant.c is compiled without
 * floating-point contraction so that no multiply-add is fused), for any
 * bytes: f16 scales that are subnormal, -0, infinite or NaN give the IEEE
 * results of those operations.
 *
 * Quantization is a reference quantizer per type (quant.c says how it
 * chooses scales).  Non-finite inputs have a defined result: NaN is
 * quantized as 0, and +-inf as +-FLT_MAX.  Scales are f16 (Q8_K: f32) and
 * are clamped to the largest finite f16, so a block whose values lie
 * beyond what its largest scale times its largest level can express
 * saturates at that value instead of storing an infinite scale. */
#ifndef RLX_QUANT_QUANT_H
#define RLX_QUANT_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ggml_type.h"
#include "rlx.h"

/* Which types (rlx_qtype_supported) and their row size (rlx_quant_row_bytes,
 * rlx.h) come from src/core/ggml_type.h. */
/* Elements per block (32 or 256) and bytes per block; 0 when unsupported. */
int64_t rlx_quant_block_elems(int ggml_type);
size_t rlx_quant_block_bytes(int ggml_type);

/* n elements (a multiple of the block size) from blocks into out.
 * RLX_ERR_UNSUPPORTED for another type, RLX_ERR_INVALID_ARGUMENT for n. */
rlx_status rlx_dequantize_row(int ggml_type, const void *blocks, float *out, int64_t n);
/* n elements of in quantized into blocks (rlx_quant_row_bytes of them). */
rlx_status rlx_quantize_row(int ggml_type, const float *in, void *blocks, int64_t n);

#endif
