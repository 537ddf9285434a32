/* cuda_proj.h - the few-row product kernel (k_proj.cu): a decode step's
 * projections, fused (the `projection` op) or plain (k_matmul.cu's matmuls
 * of up to CU_PROJ_MAX_ROWS rows by a weight read transposed). */
#ifndef RLX_CUDA_PROJ_H
#define RLX_CUDA_PROJ_H

#include "backends/cuda/cuda_common.h"

#define CU_PROJ_MAX_ROWS RLX_PROJ_FEW_ROWS /* the kernel has templates for 1 to 8 */
/* The most rows a product by float weights runs with on the kernel by
 * default; more go to the GEMM libraries (tensor cores).  At 8 rows the
 * kernel's 8 dot products a weight element on CUDA cores lost to cuBLASLt:
 * bf16 decode of the `decoder` workload at batch 8 on an H100, 3,502 tok/s
 * with 8 against 4,919 with 4 and 4,923 with 1 (alternating, one call). */
#define CU_PROJ_FLOAT_ROWS 4
/* RLX_CUDA_PROJ_ROWS sets it (1 to 8).  Quantized weights keep
 * CU_PROJ_MAX_ROWS: their other path dequantizes. */
static inline int64_t cu_proj_float_rows(void)
{
    return rlx_cu_cfg.cuda_proj_rows ? rlx_cu_cfg.cuda_proj_rows : CU_PROJ_FLOAT_ROWS;
}
/* Shared memory the normalised rows may take (M * K elements). */
#define CU_PROJ_MAX_SMEM (96 * 1024)

/* y [M, N'] = epilogue(pre(x) [M, K] . w[n, :]) for w [N, K], all of the
 * launch's dtype (or quantized: quant), rows contiguous:
 *   pre_rms: x's rows RMS-normalised (eps) and times gamma first;
 *   glu: column n is act(gate n) * up n, gate and up the weight's rows n
 *        and n + N / 2 (N' = N / 2); else act(. + bias[n]) (N' = N);
 *   res: then + res[m, n] (shaped like y);
 *   w_fixed: no kernel of the run writes w (its rows are asked into L2
 *            before the wait on the kernel ahead);
 *   quant: w's ggml block type, rows of rb bytes (K a multiple of 32,
 *          w 16-byte aligned); 0 (F32's id, never a block type): w is of
 *          the launch's dtype.  16-bit activations are then rounded to 8
 *          bits per 32 elements and multiplied on the weights' levels as
 *          integers; f32 ones stay f32. */
typedef struct cu_proj_args {
    const void *x, *w, *gamma, *bias, *res;
    void *y;
    int64_t M, N, K;
    float eps;
    int pre_rms, glu, act, w_fixed;
    int quant;
    int64_t rb;
    int vec; /* set by the launch: x, w and gamma 16-byte aligned */
} cu_proj_args;

/* Launches the kernel on the backend's stream (M <= CU_PROJ_MAX_ROWS, K %
 * 8 == 0; with pre_rms, rlx_cu_rows_smem within CU_PROJ_MAX_SMEM); false,
 * launching nothing, for a quantized weight that is not 16-byte aligned. */
bool rlx_cu_rows_launch(rlx_dtype dt, cu_proj_args a);

/* The shared memory the kernel stages x's rows in (M rows of K). */
size_t rlx_cu_rows_smem(rlx_dtype dt, int64_t M, int64_t K, bool pre_rms, bool quant);

#endif
