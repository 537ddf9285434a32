/* cuda_gemm.h - row-major GEMM through cuBLASLt, planned once per thunk:
 * C[b] (M x N) = op(A[b]) (M x K) * op(B[b]) (K x N) [+ bias[N]] [-> act],
 * batch strides in elements (0 = shared), f32 accumulation.  align: the
 * largest power of two (<= 256) dividing every byte address passed later. */
#ifndef RLX_CUDA_GEMM_H
#define RLX_CUDA_GEMM_H

#include <cublasLt.h>

#include "backends/cuda/cuda_common.h"

typedef enum cu_epi {
    CU_EPI_NONE = 0,
    CU_EPI_BIAS,
    CU_EPI_BIAS_RELU,
    CU_EPI_BIAS_GELU_TANH,
    CU_EPI_RELU,
    CU_EPI_GELU_TANH
} cu_epi;

#define CU_GEMM_HEURISTIC 16  /* algorithms asked of cuBLASLt's heuristic */
#define CU_GEMM_CANDIDATES 32 /* those plus split-K variants, all timed */

/* One cuBLASLt problem: its descriptors, the algorithm in use and the
 * heuristic's candidates for the tuner. */
typedef struct cu_lt_plan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int has_algo;
    size_t ws_bytes;
    cublasLtMatmulAlgo_t cand[CU_GEMM_CANDIDATES];
    size_t cand_ws[CU_GEMM_CANDIDATES];
    int n_cand;
} cu_lt_plan;

typedef struct cu_gemm {
    cu_lt_plan p; /* the product as asked */
    /* f32 only, see rlx_cu_gemm_plan_split: the same product as one TF32
     * tensor-core GEMM over 3K on operands split into high and low parts */
    cu_lt_plan s;
    int has_split, use_split;
    rlx_dtype dt;
    int trans_a, trans_b;
    int64_t M, N, K, lda, ldb, ldc, batch;
    cu_epi epi;
    size_t align; /* the caller's bound on C's address */
} cu_gemm;

#define CU_GEMM_WORKSPACE ((size_t)32 << 20)

rlx_status rlx_cu_gemm_plan(cu_gemm *g, rlx_dtype dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                            int64_t lda, int64_t ldb, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                            int64_t stride_c, cu_epi epi, size_t align);
/* bias may be NULL unless the epilogue takes one. */
rlx_status rlx_cu_gemm_run(const rlx_thunk *t, const cu_gemm *g, const void *A, const void *B, void *C,
                           const void *bias, void *ws);
void rlx_cu_gemm_free(cu_gemm *g);

/* f32 GEMMs on tensor cores at f32 accuracy ("3xTF32"): each operand is
 * split into x_hi = x rounded to TF32 and x_lo = x - x_hi, and
 * A_hi B_hi + A_lo B_hi + A_hi B_lo (the dropped A_lo B_lo is below f32's
 * rounding) runs as one TF32 GEMM over K' = 3K on [A_hi | A_lo | A_hi] and
 * [B_hi; B_hi; B_lo].  The split copies live in the workspace after the
 * cuBLASLt part, rlx_cu_gemm_split_bytes more than CU_GEMM_WORKSPACE.
 * Known difference: an infinite input can give NaN where plain f32 gives
 * an infinity (inf * 0 in a split term). */
size_t rlx_cu_gemm_split_bytes(rlx_dtype dt, int64_t M, int64_t N, int64_t K);
/* Plans the split form beside the plain one (f32, one batch, a workspace of
 * ws_bytes that holds it); the tuner then times both and keeps the faster.
 * RLX_CUDA_F32_GEMM=sgemm keeps f32 GEMMs plain, =split forces the split
 * form wherever it applies (tests). */
void rlx_cu_gemm_plan_split(cu_gemm *g, size_t ws_bytes);
/* Times the heuristic's candidates on these buffers (at compile time, not
 * under capture) and keeps the fastest.  RLX_CUDA_AUTOTUNE=0 turns it off. */
void rlx_cu_gemm_tune(cu_gemm *g, const void *A, const void *B, void *C, const void *bias, void *ws);

/* The epilogue cuBLASLt runs for bias + act, and whether an activation
 * pass (*post) must follow it (exact GELU, SiLU). */
cu_epi rlx_cu_gemm_epilogue(int has_bias, int act, int *post);
/* act over n elements of y (dtype dt) in place, on the stream. */
void rlx_cu_act_pass(rlx_dtype dt, void *y, int64_t n, int act);

/* ---- our Hopper GEMM (gemm_wgmma.cu): 16-bit, row-major A [M, K] and
 * B [K, N], C = A B (+ bias [N]) (-> act), f32 accumulation.  A plan:
 * tile width bn (64 or 128), K split over a cluster of `split` blocks,
 * `stages` shared-memory buffers, and the tensor maps of its A and B. */
typedef struct cu_wg_plan {
    int bn, split, stages;
    unsigned char maps[2][128]; /* CUtensorMaps of A and B (bytes: copied to aligned ones to use) */
} cu_wg_plan;

/* Whether this process's device runs it (sm_90, a build with sm_90a code). */
bool rlx_cu_wg_available(void);
/* Whether a problem (dtype, sizes, leading dims, addresses) suits it. */
bool rlx_cu_wg_fits(rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, const void *A,
                    const void *B, const void *C);
/* The plans worth timing for a problem on these operands (the tensor maps
 * hold their addresses); RLX_CUDA_WGMMA_BN, _SPLIT and _STAGES restrict
 * them.  Returns how many. */
int rlx_cu_wg_candidates(rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, const void *A,
                         const void *B, cu_wg_plan *out, int max);
/* Launches plan p (on its A and B) on the stream.  b_fixed: no kernel of
 * the run writes B, so its first stages may load before the kernel ahead
 * has finished. */
void rlx_cu_wg_launch(const cu_wg_plan *p, rlx_dtype dt, int64_t M, int64_t N, int64_t K, int64_t ldc, void *C,
                      const void *bias, int act, bool b_fixed);

#endif
