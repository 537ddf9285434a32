/* ggml_type.c - the table of ggml tensor types (ggml_type.h). */
#include "core/ggml_type.h"

static const struct {
    const char *name;
    int64_t block;   /* elements per block; 0: retired id */
    size_t bytes;    /* bytes per block */
    rlx_dtype dtype; /* RLX_DTYPE_COUNT when none */
} ggml_types[RLX_GGML_TYPE_COUNT] = {
    [RLX_GGML_F32] = {"F32", 1, 4, RLX_F32},
    [RLX_GGML_F16] = {"F16", 1, 2, RLX_F16},
    [RLX_GGML_Q4_0] = {"Q4_0", 32, 18, RLX_DTYPE_COUNT},
    [RLX_GGML_Q4_1] = {"Q4_1", 32, 20, RLX_DTYPE_COUNT},
    [4] = {"Q4_2 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [5] = {"Q4_3 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [RLX_GGML_Q5_0] = {"Q5_0", 32, 22, RLX_DTYPE_COUNT},
    [RLX_GGML_Q5_1] = {"Q5_1", 32, 24, RLX_DTYPE_COUNT},
    [RLX_GGML_Q8_0] = {"Q8_0", 32, 34, RLX_DTYPE_COUNT},
    [RLX_GGML_Q8_1] = {"Q8_1", 32, 36, RLX_DTYPE_COUNT},
    [RLX_GGML_Q2_K] = {"Q2_K", 256, 84, RLX_DTYPE_COUNT},
    [RLX_GGML_Q3_K] = {"Q3_K", 256, 110, RLX_DTYPE_COUNT},
    [RLX_GGML_Q4_K] = {"Q4_K", 256, 144, RLX_DTYPE_COUNT},
    [RLX_GGML_Q5_K] = {"Q5_K", 256, 176, RLX_DTYPE_COUNT},
    [RLX_GGML_Q6_K] = {"Q6_K", 256, 210, RLX_DTYPE_COUNT},
    [RLX_GGML_Q8_K] = {"Q8_K", 256, 292, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ2_XS] = {"IQ2_XS", 256, 74, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ1_S] = {"IQ1_S", 256, 50, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ4_NL] = {"IQ4_NL", 32, 18, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ3_S] = {"IQ3_S", 256, 110, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ2_S] = {"IQ2_S", 256, 82, RLX_DTYPE_COUNT},
    [RLX_GGML_IQ4_XS] = {"IQ4_XS", 256, 136, RLX_DTYPE_COUNT},
    [RLX_GGML_I8] = {"I8", 1, 1, RLX_I8},
    [RLX_GGML_I16] = {"I16", 1, 2, RLX_DTYPE_COUNT},
    [RLX_GGML_I32] = {"I32", 1, 4, RLX_I32},
    [RLX_GGML_I64] = {"I64", 1, 8, RLX_I64},
    [RLX_GGML_F64] = {"F64", 1, 8, RLX_F64},
    [RLX_GGML_IQ1_M] = {"IQ1_M", 256, 56, RLX_DTYPE_COUNT},
    [RLX_GGML_BF16] = {"BF16", 1, 2, RLX_BF16},
    [31] = {"Q4_0_4_4 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [32] = {"Q4_0_4_8 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [33] = {"Q4_0_8_8 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [RLX_GGML_TQ1_0] = {"TQ1_0", 256, 54, RLX_DTYPE_COUNT},
    [RLX_GGML_TQ2_0] = {"TQ2_0", 256, 66, RLX_DTYPE_COUNT},
    [36] = {"IQ4_NL_4_4 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [37] = {"IQ4_NL_4_8 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [38] = {"IQ4_NL_8_8 (removed)", 0, 0, RLX_DTYPE_COUNT},
    [RLX_GGML_MXFP4] = {"MXFP4", 32, 17, RLX_DTYPE_COUNT},
};

const char *rlx_ggml_type_name(int type)
{
    return type >= 0 && type < RLX_GGML_TYPE_COUNT ? ggml_types[type].name : NULL;
}

bool rlx_ggml_type_size(int type, int64_t *block_elems, size_t *block_bytes)
{
    if (type < 0 || type >= RLX_GGML_TYPE_COUNT || ggml_types[type].block == 0)
        return false;
    if (block_elems)
        *block_elems = ggml_types[type].block;
    if (block_bytes)
        *block_bytes = ggml_types[type].bytes;
    return true;
}

bool rlx_qtype_supported(int type)
{
    switch (type) {
    case RLX_Q4_0:
    case RLX_Q4_1:
    case RLX_Q5_0:
    case RLX_Q5_1:
    case RLX_Q8_0:
    case RLX_Q4_K:
    case RLX_Q5_K:
    case RLX_Q6_K:
    case RLX_Q8_K: return true;
    default: return false;
    }
}

size_t rlx_quant_row_bytes(int qtype, int64_t k)
{
    int64_t block;
    size_t bytes;
    if (!rlx_qtype_supported(qtype) || !rlx_ggml_type_size(qtype, &block, &bytes) || k <= 0 || k % block)
        return 0;
    return (size_t)(k / block) * bytes;
}

rlx_dtype rlx_ggml_type_dtype(int type)
{
    return type >= 0 && type < RLX_GGML_TYPE_COUNT && ggml_types[type].block ? ggml_types[type].dtype : RLX_DTYPE_COUNT;
}
