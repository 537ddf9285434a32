/* cuda_proj.h - the few-row product kernel (k_proj.cu): a decode step's
 * projections, fused (the `projection` op) or plain (k_matmul.cu's matmuls
 * of up to CU_PROJ_MAX_ROWS rows by a weight read transposed). */
#ifndef RLX_CUDA_PROJ_H
#define RLX_CUDA_PROJ_H

#include "backends/cuda/cuda_common.h"

#define CU_PROJ_MAX_ROWS RLX_PROJ_FEW_ROWS /* the kernel has templates for 1 to 8 */
/* Shared memory the normalised rows may take (M * K elements). */
#define CU_PROJ_MAX_SMEM (96 * 1024)

/* y [M, N'] = epilogue(pre(x) [M, K] . w[n, :]) for w [N, K], all of the
 * launch's dtype, rows contiguous:
 *   pre_rms: x's rows RMS-normalised (eps) and times gamma first;
 *   glu: column n is act(gate n) * up n, gate and up the weight's rows n
 *        and n + N / 2 (N' = N / 2); else act(. + bias[n]) (N' = N);
 *   res: then + res[m, n] (shaped like y);
 *   w_fixed: no kernel of the run writes w (its rows are asked into L2
 *            before the wait on the kernel ahead). */
typedef struct cu_proj_args {
    const void *x, *w, *gamma, *bias, *res;
    void *y;
    int64_t M, N, K;
    float eps;
    int pre_rms, glu, act, w_fixed;
    int vec; /* set by the launch: x, w and gamma 16-byte aligned */
} cu_proj_args;

/* Launches the kernel on the backend's stream (M <= CU_PROJ_MAX_ROWS, K %
 * 8 == 0; with pre_rms, M * K elements within CU_PROJ_MAX_SMEM). */
void rlx_cu_rows_launch(rlx_dtype dt, cu_proj_args a);

#endif
