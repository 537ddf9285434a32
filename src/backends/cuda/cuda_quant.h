/* cuda_quant.h - the quantized weight types on CUDA: the dispatch over
 * them that k_quant.cu (dequantize, qmatmul) and k_proj.cu (the few-row
 * product on 8-bit levels, quant/quant_units.h) share. */
#ifndef RLX_CUDA_QUANT_H
#define RLX_CUDA_QUANT_H

#include "backends/cuda/cuda_common.h"

extern "C" {
#include "core/ggml_type.h"
#include "quant/quant_layout.h"
}

/* Calls F<QT> for the type (one of rlx_qtype_supported's). */
#define Q_TYPE_DISPATCH(qt, QT, ...)          \
    do {                                      \
        switch (qt) {                         \
        case RLX_GGML_Q8_0: {                 \
            constexpr int QT = RLX_GGML_Q8_0; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q4_0: {                 \
            constexpr int QT = RLX_GGML_Q4_0; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q4_1: {                 \
            constexpr int QT = RLX_GGML_Q4_1; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q5_0: {                 \
            constexpr int QT = RLX_GGML_Q5_0; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q5_1: {                 \
            constexpr int QT = RLX_GGML_Q5_1; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q4_K: {                 \
            constexpr int QT = RLX_GGML_Q4_K; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q5_K: {                 \
            constexpr int QT = RLX_GGML_Q5_K; \
            __VA_ARGS__;                      \
        } break;                              \
        case RLX_GGML_Q6_K: {                 \
            constexpr int QT = RLX_GGML_Q6_K; \
            __VA_ARGS__;                      \
        } break;                              \
        default: {                            \
            constexpr int QT = RLX_GGML_Q8_K; \
            __VA_ARGS__;                      \
        } break;                              \
        }                                     \
    } while (0)

/* A block's bytes, as a constant of the type. */
__host__ __device__ constexpr int cu_q_block_bytes(int qt)
{
    return qt == RLX_GGML_Q8_0   ? RLX_Q8_0_BYTES
           : qt == RLX_GGML_Q4_0 ? RLX_Q4_0_BYTES
           : qt == RLX_GGML_Q4_1 ? RLX_Q4_1_BYTES
           : qt == RLX_GGML_Q5_0 ? RLX_Q5_0_BYTES
           : qt == RLX_GGML_Q5_1 ? RLX_Q5_1_BYTES
           : qt == RLX_GGML_Q4_K ? RLX_Q4_K_BYTES
           : qt == RLX_GGML_Q5_K ? RLX_Q5_K_BYTES
           : qt == RLX_GGML_Q6_K ? RLX_Q6_K_BYTES
                                 : RLX_Q8_K_BYTES;
}

#endif
