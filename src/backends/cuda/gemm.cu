/* gemm.cu - row-major GEMMs through cuBLASLt (cuda_gemm.h): planning,
 * candidates timed at compile time, f32 as 3xTF32 where it measures
 * faster, and the activation pass for the epilogues cuBLASLt lacks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_gemm.h"

/* The current device's cuBLASLt handle (made by the first plan on it). */
static cublasLtHandle_t device_lt(void) { return (cublasLtHandle_t)rlx_cu_dev->gemm_lt; }

static cudaDataType_t cuda_type(rlx_dtype dt)
{
    return dt == RLX_F16 ? CUDA_R_16F : dt == RLX_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static rlx_status lt_fail(const char *what, cublasStatus_t s)
{
    return rlx_set_error(RLX_ERR_DEVICE, "cuda: cuBLASLt %s failed (status %d)", what, (int)s);
}

static rlx_status make_layout(cublasLtMatrixLayout_t *l, cudaDataType_t ty, int64_t rows, int64_t cols, int64_t ld,
                              int64_t batch, int64_t stride)
{
    cublasStatus_t s = cublasLtMatrixLayoutCreate(l, ty, (uint64_t)rows, (uint64_t)cols, ld);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail("layout", s);
    if (batch > 1) {
        int32_t b32 = (int32_t)batch;
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b32, sizeof b32);
        cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    }
    return RLX_OK;
}

/* Split-K variants of the heuristic's first algorithms, for GEMMs whose
 * output tiles cannot fill the GPU (a long K over a small M x N): K is cut
 * into parts computed in parallel and summed.  Added as candidates only;
 * the tuner keeps one where it measures faster. */
static void add_splitk(cu_lt_plan *g, const cublasLtMatmulHeuristicResult_t *res, int found, int64_t M, int64_t N,
                       int64_t K)
{
    if (K < 256 || M * N > ((int64_t)4 << 20))
        return;
    static const int32_t splits[] = {2, 4, 8, 16};
    for (int i = 0; i < found && i < 4; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
        int32_t sup = 0;
        uint32_t mask = 0;
        size_t w = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &sup, sizeof sup, &w) !=
                CUBLAS_STATUS_SUCCESS ||
            !sup ||
            cublasLtMatmulAlgoCapGetAttribute(&res[i].algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &mask, sizeof mask,
                                              &w) != CUBLAS_STATUS_SUCCESS)
            continue;
        uint32_t scheme = (mask & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)  ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
                          : (mask & CUBLASLT_REDUCTION_SCHEME_INPLACE)     ? CUBLASLT_REDUCTION_SCHEME_INPLACE
                          : (mask & CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE) ? CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE
                                                                           : 0;
        if (!scheme)
            continue;
        for (size_t k = 0; k < sizeof splits / sizeof splits[0] && K / splits[k] >= 64; k++) {
            if (g->n_cand >= CU_GEMM_CANDIDATES)
                return;
            cublasLtMatmulAlgo_t a = res[i].algo;
            cublasLtMatmulHeuristicResult_t chk;
            memset(&chk, 0, sizeof chk);
            if (cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits[k],
                                                     sizeof splits[k]) != CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                     sizeof scheme) != CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoCheck(device_lt(), g->op, g->la, g->lb, g->lc, g->lc, &a, &chk) !=
                    CUBLAS_STATUS_SUCCESS ||
                chk.workspaceSize > CU_GEMM_WORKSPACE)
                continue;
            g->cand[g->n_cand] = a;
            g->cand_ws[g->n_cand++] = chk.workspaceSize;
        }
    }
}

static void lt_plan_free(cu_lt_plan *g)
{
    if (g->op)
        cublasLtMatmulDescDestroy(g->op);
    if (g->la)
        cublasLtMatrixLayoutDestroy(g->la);
    if (g->lb)
        cublasLtMatrixLayoutDestroy(g->lb);
    if (g->lc)
        cublasLtMatrixLayoutDestroy(g->lc);
    memset(g, 0, sizeof *g);
}

/* Descriptors, layouts and the heuristic's candidates for row-major
 * C = op(A) op(B) with A, B of type `ty` and compute type `ct`.  al: the
 * largest power of two (<= 256) dividing every byte address and stride.
 * Returns the heuristic's status (found == 0 counts as a failure). */
static rlx_status lt_plan(cu_lt_plan *g, cudaDataType_t ty, cublasComputeType_t ct, int trans_a, int trans_b, int64_t M,
                          int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc, int64_t batch, int64_t stride_a,
                          int64_t stride_b, int64_t stride_c, cu_epi epi, uint32_t al, cublasStatus_t *heur)
{
    *heur = CUBLAS_STATUS_NOT_SUPPORTED;
    cublasStatus_t s = cublasLtMatmulDescCreate(&g->op, ct, CUDA_R_32F);
    if (s != CUBLAS_STATUS_SUCCESS)
        return lt_fail("descriptor", s);
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
     * cuBLASLt's first operand is our B, its second our A. */
    cublasOperation_t opa = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, opb = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa);
    cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb);
    if (epi != CU_EPI_NONE) {
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_DEFAULT;
        switch (epi) {
        case CU_EPI_BIAS: e = CUBLASLT_EPILOGUE_BIAS; break;
        case CU_EPI_BIAS_RELU: e = CUBLASLT_EPILOGUE_RELU_BIAS; break;
        case CU_EPI_BIAS_GELU_TANH: e = CUBLASLT_EPILOGUE_GELU_BIAS; break;
        case CU_EPI_RELU: e = CUBLASLT_EPILOGUE_RELU; break;
        case CU_EPI_GELU_TANH: e = CUBLASLT_EPILOGUE_GELU; break;
        default: break;
        }
        cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        if (epi == CU_EPI_BIAS || epi == CU_EPI_BIAS_RELU || epi == CU_EPI_BIAS_GELU_TANH) {
            cudaDataType_t bt = ty;
            cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        }
    }
    /* stored dims of A: trans_a ? [K, M] : [M, K]; column-major view swaps them */
    int64_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
    int64_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
    rlx_status st;
    if ((st = make_layout(&g->la, ty, b_cols, b_rows, ldb, batch, stride_b)) != RLX_OK ||
        (st = make_layout(&g->lb, ty, a_cols, a_rows, lda, batch, stride_a)) != RLX_OK ||
        (st = make_layout(&g->lc, ty, N, M, ldc, batch, stride_c)) != RLX_OK)
        return st;
    cublasLtMatmulPreference_t pref;
    if ((s = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS)
        return lt_fail("preference", s);
    size_t ws = CU_GEMM_WORKSPACE;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res[CU_GEMM_HEURISTIC];
    int found = 0;
    s = cublasLtMatmulAlgoGetHeuristic(device_lt(), g->op, g->la, g->lb, g->lc, g->lc, pref, CU_GEMM_HEURISTIC, res,
                                       &found);
    cublasLtMatmulPreferenceDestroy(pref);
    *heur = s == CUBLAS_STATUS_SUCCESS && found <= 0 ? CUBLAS_STATUS_NOT_SUPPORTED : s;
    if (*heur != CUBLAS_STATUS_SUCCESS)
        return RLX_OK;
    g->algo = res[0].algo;
    g->has_algo = 1;
    g->ws_bytes = res[0].workspaceSize;
    for (int i = 0; i < found && i < CU_GEMM_HEURISTIC; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS)
            continue;
        g->cand[g->n_cand] = res[i].algo;
        g->cand_ws[g->n_cand++] = res[i].workspaceSize;
    }
    add_splitk(g, res, found, M, N, K);
    return RLX_OK;
}

/* Largest power of two (<= 256) dividing every value given. */
static uint32_t pow2_dividing(const size_t *v, int n)
{
    uint32_t al = 256;
    for (int i = 0; i < n; i++)
        while (al > 1 && v[i] % al)
            al /= 2;
    return al;
}

rlx_status rlx_cu_gemm_plan(cu_gemm *g, rlx_dtype dt, int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                            int64_t lda, int64_t ldb, int64_t ldc, int64_t batch, int64_t stride_a, int64_t stride_b,
                            int64_t stride_c, cu_epi epi, size_t align)
{
    memset(g, 0, sizeof *g);
    cu_device *d = rlx_cu_dev;
    pthread_mutex_lock(&d->handles_lock);
    cublasStatus_t made = CUBLAS_STATUS_SUCCESS;
    if (!d->gemm_lt) {
        cublasLtHandle_t h = NULL;
        if ((made = cublasLtCreate(&h)) == CUBLAS_STATUS_SUCCESS)
            d->gemm_lt = h;
    }
    pthread_mutex_unlock(&d->handles_lock);
    if (made != CUBLAS_STATUS_SUCCESS)
        return lt_fail("create", made);
    g->dt = dt, g->trans_a = trans_a, g->trans_b = trans_b;
    g->M = M, g->N = N, g->K = K, g->lda = lda, g->ldb = ldb, g->ldc = ldc, g->batch = batch, g->epi = epi;
    cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
    if (dt == RLX_F32 && rlx_cu_cfg.cuda_tf32)
        ct = CUBLAS_COMPUTE_32F_FAST_TF32;
    /* strided batches move every pointer: their byte strides bound the alignment too */
    size_t es = rlx_dtype_size(dt);
    size_t bounds[4] = {align, batch > 1 ? (size_t)stride_a * es : 0, batch > 1 ? (size_t)stride_b * es : 0,
                        batch > 1 ? (size_t)stride_c * es : 0};
    cublasStatus_t heur;
    rlx_status st = lt_plan(&g->p, cuda_type(dt), ct, trans_a, trans_b, M, N, K, lda, ldb, ldc, batch, stride_a,
                            stride_b, stride_c, epi, pow2_dividing(bounds, 4), &heur);
    if (st == RLX_OK && heur != CUBLAS_STATUS_SUCCESS)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "cuda: cuBLASLt has no algorithm for a %s GEMM %lldx%lldx%lld (batch %lld, status %d)",
                             rlx_dtype_name(dt), (long long)M, (long long)N, (long long)K, (long long)batch, (int)heur);
    g->align = align;
    return st;
}

/* ------------------------------------------------ f32 GEMMs as 3xTF32 */

size_t rlx_cu_gemm_split_bytes(rlx_dtype dt, int64_t M, int64_t N, int64_t K)
{
    if (dt != RLX_F32 || M <= 0 || N <= 0 || K <= 0)
        return 0;
    return cu_round256((size_t)(M * 3 * K) * 4) + cu_round256((size_t)(3 * K * N) * 4);
}

/* x rounded to the nearest TF32 value (10 mantissa bits), ties away from
 * zero; non-finite values, and finite ones that would round to infinity,
 * are returned truncated. */
__device__ __forceinline__ float tf32_hi(float x)
{
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return x;
    uint32_t r = (u + 0x1000u) & 0xffffe000u;
    if ((r & 0x7f800000u) == 0x7f800000u)
        r = u & 0xffffe000u;
    return __uint_as_float(r);
}

/* x = hi + lo exactly: hi rounded to TF32, lo the rest (0 when x is not finite). */
__device__ __forceinline__ void tf32_split(float x, float &hi, float &lo)
{
    hi = tf32_hi(x);
    lo = (hi == x || !isfinite(x)) ? 0.0f : x - hi;
}
__device__ __forceinline__ void tf32_split(float4 x, float4 &hi, float4 &lo)
{
    tf32_split(x.x, hi.x, lo.x);
    tf32_split(x.y, hi.y, lo.y);
    tf32_split(x.z, hi.z, lo.z);
    tf32_split(x.w, hi.w, lo.w);
}

/* Source rows x cols (row pitch ld; counted in V, a float or four) into
 * three copies concatenated along the columns (dst rows of 3 * cols) or
 * along the rows (3 * rows rows of cols); copy c holds the high part when
 * (lo_mask >> c & 1) == 0, else the low part. */
template <typename V>
__global__ void split3(const V *src, int64_t rows, int64_t cols, int64_t ld, V *dst, int along_cols, int lo_mask)
{
    cu_grid_wait();
    int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / cols, c = i % cols;
        V hi, lo;
        tf32_split(src[r * ld + c], hi, lo);
#pragma unroll
        for (int k = 0; k < 3; k++) {
            V v = (lo_mask >> k) & 1 ? lo : hi;
            if (along_cols)
                dst[r * 3 * cols + k * cols + c] = v;
            else
                dst[(k * rows + r) * cols + c] = v;
        }
    }
}

static void launch_split3(const float *src, int64_t rows, int64_t cols, int64_t ld, float *dst, int along_cols,
                          int lo_mask)
{
    if (cols % 4 == 0 && ld % 4 == 0 && (uintptr_t)src % 16 == 0) /* four columns at a time */
        cu_launch(split3<float4>, cu_blocks(rows * cols / 4, 256), 256, 0, (const float4 *)src, rows, cols / 4, ld / 4,
                  (float4 *)dst, along_cols, lo_mask);
    else
        cu_launch(split3<float>, cu_blocks(rows * cols, 256), 256, 0, src, rows, cols, ld, dst, along_cols, lo_mask);
}

/* Writes [A_hi | A_lo | A_hi] and [B_hi; B_hi; B_lo] (along K, whichever
 * way each operand is stored) into ws past the cuBLASLt workspace. */
static void split_operands(const cu_gemm *g, const void *A, const void *B, void *ws, float **a3, float **b3)
{
    *a3 = (float *)((char *)ws + CU_GEMM_WORKSPACE);
    *b3 = (float *)((char *)*a3 + cu_round256((size_t)(g->M * 3 * g->K) * 4));
    /* A stored [M, K] (K along columns) or [K, M] (K along rows); B [K, N] or [N, K] */
    if (g->trans_a)
        launch_split3((const float *)A, g->K, g->M, g->lda, *a3, 0, 2);
    else
        launch_split3((const float *)A, g->M, g->K, g->lda, *a3, 1, 2);
    if (g->trans_b)
        launch_split3((const float *)B, g->N, g->K, g->ldb, *b3, 1, 4);
    else
        launch_split3((const float *)B, g->K, g->N, g->ldb, *b3, 0, 4);
}

/* RLX_CUDA_F32_GEMM: 0 sgemm only, 2 split only, 1 both planned and the
 * tuner picks (the default). */
static int f32_gemm_mode(void) { return rlx_cu_cfg.cuda_f32_gemm; }

void rlx_cu_gemm_plan_split(cu_gemm *g, size_t ws_bytes)
{
    if (g->dt != RLX_F32 || g->batch != 1 || !g->p.has_algo || !f32_gemm_mode() ||
        ws_bytes < CU_GEMM_WORKSPACE + rlx_cu_gemm_split_bytes(g->dt, g->M, g->N, g->K))
        return;
    int64_t K3 = 3 * g->K;
    int64_t lda3 = g->trans_a ? g->M : K3, ldb3 = g->trans_b ? K3 : g->N;
    /* the split copies sit at 256-byte offsets; C's address keeps the caller's bound */
    size_t bounds[4] = {g->align, (size_t)lda3 * 4, (size_t)ldb3 * 4, (size_t)g->ldc * 4};
    uint32_t al = pow2_dividing(bounds, 4);
    cublasStatus_t heur;
    /* the same epilogue and C as the plain plan */
    if (lt_plan(&g->s, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, g->trans_a, g->trans_b, g->M, g->N, K3, lda3, ldb3,
                g->ldc, 1, 0, 0, 0, g->epi, al, &heur) != RLX_OK ||
        heur != CUBLAS_STATUS_SUCCESS) {
        lt_plan_free(&g->s);
        rlx_clear_error();
        return;
    }
    g->has_split = 1;
    g->use_split = f32_gemm_mode() == 2;
}

static cublasStatus_t lt_matmul(const cu_lt_plan *g, const cublasLtMatmulAlgo_t *algo, size_t ws_bytes, const void *A,
                                const void *B, void *C, void *ws)
{
    float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(device_lt(), g->op, &alpha, B, g->la, A, g->lb, &beta, C, g->lc, C, g->lc, algo, ws,
                          ws ? ws_bytes : 0, rlx_cu_stream);
}

rlx_status rlx_cu_gemm_run(const rlx_thunk *t, const cu_gemm *g, const void *A, const void *B, void *C,
                           const void *bias, void *ws)
{
    const cu_lt_plan *p = g->use_split ? &g->s : &g->p;
    if (bias)
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    if (g->use_split) {
        float *a3, *b3;
        split_operands(g, A, B, ws, &a3, &b3);
        A = a3, B = b3;
    }
    cublasStatus_t s = lt_matmul(p, p->has_algo ? &p->algo : NULL, p->ws_bytes, A, B, C, ws);
    if (s != CUBLAS_STATUS_SUCCESS)
        return rlx_cu_fail(t, RLX_ERR_DEVICE, "cublasLtMatmul failed (status %d)", (int)s);
    return RLX_OK;
}

/* One tuning candidate: candidate i of the plain plan, or of the split one
 * (its operand splitting included in what is timed). */
typedef struct gemm_try {
    const cu_gemm *g;
    const void *A, *B;
    void *C, *ws;
    int split, i;
} gemm_try;

static bool launch_candidate(void *arg)
{
    const gemm_try *c = (const gemm_try *)arg;
    const cu_lt_plan *p = c->split ? &c->g->s : &c->g->p;
    const void *A = c->A, *B = c->B;
    if (c->split) {
        float *a3, *b3;
        split_operands(c->g, A, B, c->ws, &a3, &b3);
        A = a3, B = b3;
    }
    return lt_matmul(p, &p->cand[c->i], p->cand_ws[c->i], A, B, c->C, c->ws) == CUBLAS_STATUS_SUCCESS;
}

/* Times plan p's candidates; returns the best time and sets *best_i. */
static float tune_plan(const cu_gemm *g, int split, const void *A, const void *B, void *C, void *ws, int *best_i)
{
    const cu_lt_plan *p = split ? &g->s : &g->p;
    /* Each candidate is timed as launches captured into a graph: small GEMMs
     * take less device time than the host takes to launch them, so timing
     * plain launches would measure the host and pick at random. */
    gemm_try tr = {g, A, B, C, ws, split, 0};
    float best = 1e30f;
    *best_i = -1;
    for (int i = 0; i < p->n_cand; i++) {
        tr.i = i;
        float ms = rlx_cu_time_captured(launch_candidate, &tr, 8);
        if (ms < best) {
            best = ms;
            *best_i = i;
        }
    }
    return best;
}

void rlx_cu_gemm_tune(cu_gemm *g, const void *A, const void *B, void *C, const void *bias, void *ws)
{
    if (!rlx_cu_cfg.cuda_autotune || !ws)
        return;
    cudaStreamCaptureStatus cs;
    if (cudaStreamIsCapturing(rlx_cu_stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
        return;
    if (bias) {
        cublasLtMatmulDescSetAttribute(g->p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (g->has_split)
            cublasLtMatmulDescSetAttribute(g->s.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    int forced = g->has_split && f32_gemm_mode() == 2;
    int bp = -1, bs = -1;
    float tp = forced || g->p.n_cand < 2 ? 1e30f : tune_plan(g, 0, A, B, C, ws, &bp);
    float ts = g->has_split ? tune_plan(g, 1, A, B, C, ws, &bs) : 1e30f;
    if (bp >= 0) {
        g->p.algo = g->p.cand[bp];
        g->p.ws_bytes = g->p.cand_ws[bp];
    }
    if (bs >= 0) {
        g->s.algo = g->s.cand[bs];
        g->s.ws_bytes = g->s.cand_ws[bs];
    }
    /* the plain f32 GEMM unless the split form measured faster (or is forced) */
    g->use_split = g->has_split && bs >= 0 && (forced || ts < tp);
}

void rlx_cu_gemm_free(cu_gemm *g)
{
    lt_plan_free(&g->p);
    lt_plan_free(&g->s);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------ epilogues */

/* The epilogue cuBLASLt runs, and whether an activation pass follows. */
cu_epi rlx_cu_gemm_epilogue(int has_bias, int act, int *post)
{
    *post = 0;
    if (act == RLX_ACT_RELU)
        return has_bias ? CU_EPI_BIAS_RELU : CU_EPI_RELU;
    if (act == RLX_ACT_GELU_TANH)
        return has_bias ? CU_EPI_BIAS_GELU_TANH : CU_EPI_GELU_TANH;
    *post = act != RLX_ACT_NONE;
    return has_bias ? CU_EPI_BIAS : CU_EPI_NONE;
}

/* The activation pass: activations no cuBLASLt epilogue computes exactly,
 * in place. */
template <typename T> __global__ void act_inplace(T *y, int64_t n, int act)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = cu_fromf<T>(rlx_act_f32(act, cu_tof<T>(y[i])));
}

/* The same on 16-byte vectors (n a multiple of 16 / sizeof(T), y aligned):
 * one load and one store per 8 halves, the activation a template
 * argument so no dispatch sits in the loop. */
template <typename T, int ACT> __global__ void act_inplace_vec(T *y, int64_t nvec)
{
    cu_grid_wait();
    constexpr int V = 16 / sizeof(T);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
        union {
            uint4 u;
            T t[V];
        } b;
        b.u = ((const uint4 *)y)[i];
#pragma unroll
        for (int e = 0; e < V; e++)
            b.t[e] = cu_fromf<T>(rlx_act_f32(ACT, cu_tof<T>(b.t[e])));
        ((uint4 *)y)[i] = b.u;
    }
}

/* act over n elements of y in place. */
template <typename T> static void launch_act(T *y, int64_t n, int act)
{
    constexpr int V = 16 / sizeof(T);
    if (n % V == 0 && (uintptr_t)y % 16 == 0 && (act == RLX_ACT_GELU || act == RLX_ACT_SILU)) {
        int64_t nvec = n / V;
        if (act == RLX_ACT_GELU)
            cu_launch(act_inplace_vec<T, RLX_ACT_GELU>, cu_blocks(nvec, 256), 256, 0, y, nvec);
        else
            cu_launch(act_inplace_vec<T, RLX_ACT_SILU>, cu_blocks(nvec, 256), 256, 0, y, nvec);
        return;
    }
    cu_launch(act_inplace<T>, cu_blocks(n, 256), 256, 0, y, n, act);
}

void rlx_cu_act_pass(rlx_dtype dt, void *y, int64_t n, int act)
{
    if (n > 0)
        CU_FLOAT_DISPATCH(dt, T, launch_act<T>((T *)y, n, act));
}
