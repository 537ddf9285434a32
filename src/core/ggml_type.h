/* ggml_type.h - ggml's tensor types, as GGUF files number them: the name,
 * the block geometry (elements and bytes per block) and the plain dtype
 * where a type has one.  One table for the GGUF reader, the quantized ops
 * of the IR and the quantization kernels. */
#ifndef RLX_CORE_GGML_TYPE_H
#define RLX_CORE_GGML_TYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"

enum {
    RLX_GGML_F32 = 0,
    RLX_GGML_F16 = 1,
    RLX_GGML_Q4_0 = 2,
    RLX_GGML_Q4_1 = 3,
    RLX_GGML_Q5_0 = 6,
    RLX_GGML_Q5_1 = 7,
    RLX_GGML_Q8_0 = 8,
    RLX_GGML_Q8_1 = 9,
    RLX_GGML_Q2_K = 10,
    RLX_GGML_Q3_K = 11,
    RLX_GGML_Q4_K = 12,
    RLX_GGML_Q5_K = 13,
    RLX_GGML_Q6_K = 14,
    RLX_GGML_Q8_K = 15,
    RLX_GGML_IQ2_XXS = 16,
    RLX_GGML_IQ2_XS = 17,
    RLX_GGML_IQ3_XXS = 18,
    RLX_GGML_IQ1_S = 19,
    RLX_GGML_IQ4_NL = 20,
    RLX_GGML_IQ3_S = 21,
    RLX_GGML_IQ2_S = 22,
    RLX_GGML_IQ4_XS = 23,
    RLX_GGML_I8 = 24,
    RLX_GGML_I16 = 25,
    RLX_GGML_I32 = 26,
    RLX_GGML_I64 = 27,
    RLX_GGML_F64 = 28,
    RLX_GGML_IQ1_M = 29,
    RLX_GGML_BF16 = 30,
    RLX_GGML_TQ1_0 = 34,
    RLX_GGML_TQ2_0 = 35,
    RLX_GGML_MXFP4 = 39,
    RLX_GGML_TYPE_COUNT = 40
};
/* Name of a ggml type id ("Q4_K"; ids ggml has retired are named too,
 * e.g. "Q4_2 (removed)"), or NULL when unknown. */
const char *rlx_ggml_type_name(int type);
/* Elements per block and bytes per block (1 and the element size for the
 * plain types); false for an unknown or retired id. */
bool rlx_ggml_type_size(int type, int64_t *block_elems, size_t *block_bytes);
/* Whether the quantized ops compute with a type (the rlx_qtype values of
 * rlx.h); rlx_quant_row_bytes (rlx.h) sizes their rows. */
bool rlx_qtype_supported(int type);
/* The plain dtype a type stores (F32 -> RLX_F32, ...); RLX_DTYPE_COUNT for
 * block-quantized, retired and unknown ids. */
rlx_dtype rlx_ggml_type_dtype(int type);

#endif
