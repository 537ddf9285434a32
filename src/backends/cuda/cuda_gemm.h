/* cuda_gemm.h - row-major GEMM through cuBLASLt, planned once per thunk:
 * C[b] (M x N) = op(A[b]) (M x K) * op(B[b]) (K x N) [+ bias[N]] [-> act],
 * batch strides in elements (0 = shared), f32 accumulation.  align: the
 * largest power of two (<= 256) dividing every byte address passed later. */
#ifndef RLX_CUDA_GEMM_H
#define RLX_CUDA_GEMM_H

#include <cublasLt.h>

#include "backends/cuda/cuda_common.h"

typedef enum cu_epi { CU_EPI_NONE = 0, CU_EPI_BIAS, CU_EPI_BIAS_RELU, CU_EPI_BIAS_GELU_TANH, CU_EPI_RELU,
                      CU_EPI_GELU_TANH } cu_epi;

#define CU_GEMM_HEURISTIC 16  /* algorithms asked of cuBLASLt's heuristic */
#define CU_GEMM_CANDIDATES 32 /* those plus split-K variants, all timed */

typedef struct cu_gemm {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int has_algo;
    size_t ws_bytes;
    /* the heuristic's candidates, for rlx_cu_gemm_tune */
    cublasLtMatmulAlgo_t cand[CU_GEMM_CANDIDATES];
    size_t cand_ws[CU_GEMM_CANDIDATES];
    int n_cand;
} cu_gemm;

#define CU_GEMM_WORKSPACE ((size_t)32 << 20)

rlx_status rlx_cu_gemm_plan(cu_gemm *g, rlx_dtype dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                            int64_t lda, int64_t ldb, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                            int64_t stride_c, cu_epi epi, size_t align);
/* bias may be NULL unless the epilogue takes one. */
rlx_status rlx_cu_gemm_run(const rlx_thunk *t, const cu_gemm *g, const void *A, const void *B, void *C,
                           const void *bias, void *ws);
void rlx_cu_gemm_free(cu_gemm *g);
/* Times the heuristic's candidates on these buffers (at compile time, not
 * under capture) and keeps the fastest.  RLX_CUDA_AUTOTUNE=0 turns it off. */
void rlx_cu_gemm_tune(cu_gemm *g, const void *A, const void *B, void *C, const void *bias, void *ws);

#endif
