/* k_quant.cu - the quantized ops on CUDA: dequantize, and qmatmul with the
 * weights kept in their GGUF blocks (src/quant/quant_layout.h gives the
 * byte layouts).  Every element is formed exactly as the CPU's dequantizer
 * forms it (each product and sum rounded on its own: no fused multiply-add),
 * so dequantize matches the CPU bit for bit.  Both kernels here read the
 * weights eight elements at a time (q_chunk: a few whole bytes and the
 * block's scales once).
 *
 * qmatmul has three paths, by the number of activation rows:
 * - up to 8 (decode steps): the few-row product of k_proj.cu, on the
 *   weights' 8-bit levels (quant/quant_units.h) and 16-bit activations
 *   rounded to 8 bits per 32 (f32 activations stay f32);
 * - up to 64 rows of 16-bit activations: 64 x 64 output tiles; each step
 *   dequantizes a 64 x 64 weight tile into shared memory beside the
 *   activations' tile and multiplies them on tensor cores (WMMA),
 *   accumulating in f32 (f32 activations stay on the kernel above);
 * - more rows (prefill): the weights dequantized whole into scratch in the
 *   activations' dtype, then cuBLASLt's GEMM.
 * The CPU quantizes the activations per block of up to 256 and takes
 * integer dots; here 16-bit activations are rounded to 8 bits per 32 for a
 * few rows and stay 16-bit on tensor cores for more, f32 ones stay f32
 * (tests/gpu/cuda_quant.c bounds each against float64). */
#include <mma.h>

#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_proj.h"
#include "backends/cuda/cuda_quant.h"

/* ------------------------------------------------------ one element */

__device__ __forceinline__ float q_f16(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)(p[0] | (p[1] << 8))));
}

__device__ __forceinline__ float q_f32(const uint8_t *p)
{
    return __uint_as_float((unsigned)p[0] | ((unsigned)p[1] << 8) | ((unsigned)p[2] << 16) | ((unsigned)p[3] << 24));
}

__device__ __forceinline__ uint32_t q_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Q4_K/Q5_K: the 6-bit scale and min of sub-block j (as rlx_q_k4_scale_min) */
__device__ __forceinline__ void q_k4_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Eight elements of a row at once, for the product kernels: chunk c of a
 * row lies in its 64-element window c / 8 (chunks 8w..8w+7 cover window w
 * exactly, in every type), as two runs of four elements at offsets o0 and
 * o1 inside the window; w[0..3] are the first run, w[4..7] the second.
 * The runs follow the byte layouts, so a chunk reads a few whole bytes and
 * its block's scales once. */
template <int QT>
__device__ __forceinline__ void q_chunk(const uint8_t *__restrict__ row, int64_t c, float w[8], int *o0, int *o1)
{
    if (QT == RLX_GGML_Q8_0 || QT == RLX_GGML_Q4_0 || QT == RLX_GGML_Q4_1 || QT == RLX_GGML_Q5_0 ||
        QT == RLX_GGML_Q5_1) {
        /* block c / 4: elements 4t..4t+3 and 16+4t..16+4t+3 */
        const int64_t blk = c >> 2;
        const int t = (int)(c & 3);
        *o0 = 32 * (int)(blk & 1) + 4 * t;
        *o1 = *o0 + 16;
        if (QT == RLX_GGML_Q8_0) {
            const uint8_t *b = row + blk * RLX_Q8_0_BYTES;
            const float d = q_f16(b);
#pragma unroll
            for (int j = 0; j < 4; j++) {
                w[j] = __fmul_rn((float)(int8_t)b[2 + 4 * t + j], d);
                w[4 + j] = __fmul_rn((float)(int8_t)b[18 + 4 * t + j], d);
            }
            return;
        }
        const int qs = QT == RLX_GGML_Q4_0 ? 2 : QT == RLX_GGML_Q4_1 ? 4 : QT == RLX_GGML_Q5_0 ? 6 : 8;
        const size_t bb = QT == RLX_GGML_Q4_0   ? RLX_Q4_0_BYTES
                          : QT == RLX_GGML_Q4_1 ? RLX_Q4_1_BYTES
                          : QT == RLX_GGML_Q5_0 ? RLX_Q5_0_BYTES
                                                : RLX_Q5_1_BYTES;
        const uint8_t *b = row + blk * bb;
        const float d = q_f16(b);
        const bool has_min = QT == RLX_GGML_Q4_1 || QT == RLX_GGML_Q5_1;
        const bool five = QT == RLX_GGML_Q5_0 || QT == RLX_GGML_Q5_1;
        const float mn = has_min ? q_f16(b + 2) : 0.0f;
        const uint32_t qh = five ? q_u32(b + (has_min ? 4 : 2)) : 0;
        const int off = has_min ? 0 : (five ? 16 : 8); /* the levels' bias */
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int e = 4 * t + j, byte = b[qs + e];
            int lo = byte & 0x0f, hi = byte >> 4;
            if (five) {
                lo |= (int)(((qh >> e) & 1u) << 4);
                hi |= (int)(((qh >> (e + 16)) & 1u) << 4);
            }
            if (has_min) {
                w[j] = __fadd_rn(__fmul_rn((float)lo, d), mn);
                w[4 + j] = __fadd_rn(__fmul_rn((float)hi, d), mn);
            } else {
                w[j] = __fmul_rn((float)(lo - off), d);
                w[4 + j] = __fmul_rn((float)(hi - off), d);
            }
        }
        return;
    }
    const int64_t blk = c >> 5;
    const int t = (int)(c & 31), lq = t & 7;
    if (QT == RLX_GGML_Q4_K || QT == RLX_GGML_Q5_K) {
        /* window c4 = t / 8 of the block: the low nibbles of qs[32 c4 + 4 lq ..] (sub-block 2 c4), then the high ones */
        const bool five = QT == RLX_GGML_Q5_K;
        const uint8_t *b = row + blk * (five ? RLX_Q5_K_BYTES : RLX_Q4_K_BYTES);
        const int c4 = t >> 3;
        *o0 = 4 * lq;
        *o1 = 32 + 4 * lq;
        int sc1, m1, sc2, m2;
        q_k4_scale_min(b + 4, 2 * c4, &sc1, &m1);
        q_k4_scale_min(b + 4, 2 * c4 + 1, &sc2, &m2);
        const float d = q_f16(b), dmin = q_f16(b + 2);
        const float d1 = __fmul_rn(d, (float)sc1), n1 = __fmul_rn(dmin, (float)m1);
        const float d2 = __fmul_rn(d, (float)sc2), n2 = __fmul_rn(dmin, (float)m2);
        const uint8_t *qs = b + (five ? 48 : 16) + 32 * c4 + 4 * lq;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int lo = qs[j] & 0x0f, hi = qs[j] >> 4;
            if (five) {
                const int h = b[16 + 4 * lq + j];
                lo |= ((h >> (2 * c4)) & 1) << 4;
                hi |= ((h >> (2 * c4 + 1)) & 1) << 4;
            }
            w[j] = __fsub_rn(__fmul_rn(d1, (float)lo), n1);
            w[4 + j] = __fsub_rn(__fmul_rn(d2, (float)hi), n2);
        }
        return;
    }
    if (QT == RLX_GGML_Q6_K) {
        /* half h = t / 16, rows k = 2 kp and 2 kp + 1 of it, elements 4 lq.. */
        const uint8_t *b = row + blk * RLX_Q6_K_BYTES;
        const int h = t >> 4, kp = (t >> 3) & 1, l0 = 4 * lq;
        *o0 = 4 * lq;
        *o1 = 32 + 4 * lq;
        const float d = q_f16(b + RLX_Q6_K_D);
        const uint8_t *ql = b + 64 * h, *qh = b + RLX_Q6_K_QH + 32 * h;
        const int8_t *sc = (const int8_t *)(b + RLX_Q6_K_SCALES + 8 * h + l0 / 16);
        const float s1 = __fmul_rn(d, (float)sc[4 * kp]), s2 = __fmul_rn(d, (float)sc[4 * kp + 2]);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int l = l0 + j, hb = qh[l];
            const int a = kp ? ql[l] >> 4 : ql[l] & 0x0f, bq = kp ? ql[l + 32] >> 4 : ql[l + 32] & 0x0f;
            const int q1 = (a | (((hb >> (4 * kp)) & 3) << 4)) - 32;
            const int q2 = (bq | (((hb >> (4 * kp + 2)) & 3) << 4)) - 32;
            w[j] = __fmul_rn(s1, (float)q1);
            w[4 + j] = __fmul_rn(s2, (float)q2);
        }
        return;
    }
    /* Q8_K: elements 8t..8t+7 of the block, one window per 8 chunks */
    const uint8_t *b = row + blk * RLX_Q8_K_BYTES;
    const float d = q_f32(b);
    *o0 = 8 * lq;
    *o1 = 8 * lq + 4;
#pragma unroll
    for (int j = 0; j < 8; j++)
        w[j] = __fmul_rn(d, (float)(int8_t)b[RLX_Q8_K_QS + 8 * t + j]);
}

/* ------------------------------------------------------------ dequantize */

/* rows x k elements of type QT into y (row-major, dtype T): a thread per
 * chunk of eight. */
template <typename T, int QT>
__global__ void dequantize_rows(const uint8_t *__restrict__ w, T *__restrict__ y, int64_t rows, int64_t k, size_t rb)
{
    cu_grid_wait();
    const int64_t per_row = k / 8, n = rows * per_row;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / per_row, c = i - r * per_row;
        float v[8];
        int o0, o1;
        q_chunk<QT>(w + (size_t)r * rb, c, v, &o0, &o1);
        T *yr = y + r * k + (c >> 3) * 64;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            yr[o0 + e] = cu_fromf<T>(v[e]);
            yr[o1 + e] = cu_fromf<T>(v[4 + e]);
        }
    }
}

static void launch_dequantize(rlx_dtype dt, int qt, const void *w, void *y, int64_t rows, int64_t k, size_t rb)
{
    const int grid = cu_blocks(rows * (k / 8), 256);
    CU_FLOAT_DISPATCH(
        dt, T,
        Q_TYPE_DISPATCH(qt, QT,
                        cu_launch(dequantize_rows<T, QT>, grid, 256, 0, (const uint8_t *)w, (T *)y, rows, k, rb)));
}

static rlx_status k_dequantize(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node;
    const int qt = n->attrs.quant.qtype;
    const int64_t k = n->attrs.quant.k, rows = n->shape.dims[0];
    if (rows == 0 || k == 0)
        return RLX_OK;
    launch_dequantize(n->dtype, qt, t->in[0], t->out, rows, k, rlx_quant_row_bytes(qt, k));
    return rlx_cu_check(t, "dequantize launch");
}

/* ------------------------------------------------ qmatmul, many rows */

#define QMM_TILE 64 /* output rows and columns per block */
#define QMM_K 64    /* depth per step: one window of eight chunks */
#define QMM_LD (QMM_K + 8)

/* The tensor-core input type: the activations' own (bf16 for f32, whose
 * range it keeps, should f32 ever come here). */
template <typename T> struct qmm_in {
    typedef __nv_bfloat16 type;
};
template <> struct qmm_in<__half> {
    typedef __half type;
};

template <typename T, int QT>
__global__ void __launch_bounds__(128) qmatmul_tiles(const T *__restrict__ x, const uint8_t *__restrict__ w,
                                                     T *__restrict__ y, int64_t m, int64_t k, int64_t n, size_t rb)
{
    cu_grid_wait();
    using namespace nvcuda;
    typedef typename qmm_in<T>::type H;
    __shared__ __align__(32) H xs[QMM_TILE * QMM_LD];
    __shared__ __align__(32) H ws[QMM_TILE * QMM_LD];
    __shared__ __align__(32) float cs[QMM_TILE * QMM_TILE];
    const int warp = threadIdx.x >> 5;
    const int wm = warp >> 1, wn = warp & 1; /* this warp's 32 x 32 quarter */
    const int64_t row0 = (int64_t)blockIdx.y * QMM_TILE, col0 = (int64_t)blockIdx.x * QMM_TILE, chunks = k / 8;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::fill_fragment(acc[i][j], 0.0f);
    for (int64_t k0 = 0; k0 < k; k0 += QMM_K) {
        /* 64 x 64 of each; rows past the ends and depth past k (a 32-element
         * type's odd last block) read as 0 */
        for (int i = threadIdx.x; i < QMM_TILE * QMM_K; i += blockDim.x) {
            const int r = i / QMM_K, e = i % QMM_K;
            const int64_t xr = row0 + r;
            xs[r * QMM_LD + e] = cu_fromf<H>(xr < m && k0 + e < k ? cu_tof<T>(x[xr * k + k0 + e]) : 0.0f);
        }
        for (int i = threadIdx.x; i < QMM_TILE * 8; i += blockDim.x) {
            const int r = i / 8, j = i % 8;
            const int64_t wr = col0 + r, c = k0 / 8 + j;
            float wv[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            /* no chunk: zeros at 8j.. (for a 32-element type's odd last block,
             * the half its four chunks leave) */
            int o0 = 8 * j, o1 = 8 * j + 4;
            if (wr < n && c < chunks)
                q_chunk<QT>(w + (size_t)wr * rb, c, wv, &o0, &o1);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                ws[r * QMM_LD + o0 + e] = cu_fromf<H>(wv[e]);
                ws[r * QMM_LD + o1 + e] = cu_fromf<H>(wv[4 + e]);
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < QMM_K; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, H, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, H, wmma::col_major> b[2];
#pragma unroll
            for (int i = 0; i < 2; i++)
                wmma::load_matrix_sync(a[i], xs + (wm * 32 + i * 16) * QMM_LD + kk, QMM_LD);
#pragma unroll
            for (int j = 0; j < 2; j++)
                wmma::load_matrix_sync(b[j], ws + (wn * 32 + j * 16) * QMM_LD + kk, QMM_LD);
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 2; j++)
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 2; j++)
            wmma::store_matrix_sync(cs + (wm * 32 + i * 16) * QMM_TILE + wn * 32 + j * 16, acc[i][j], QMM_TILE,
                                    wmma::mem_row_major);
    __syncthreads();
    for (int i = threadIdx.x; i < QMM_TILE * QMM_TILE; i += blockDim.x) {
        const int r = i / QMM_TILE, c = i % QMM_TILE;
        if (row0 + r < m && col0 + c < n)
            y[(row0 + r) * n + col0 + c] = cu_fromf<T>(cs[i]);
    }
}

/* ------------------------------------------------------ qmatmul's choice */

/* Past this many activation rows the weights are dequantized whole into
 * scratch (in the activations' dtype) and multiplied by cuBLASLt: each
 * weight is then expanded once however many rows there are, where the
 * tiles expand it once per 64 rows and multiply at a fraction of the
 * library's speed. */
#define QMM_GEMM_ROWS 64

static int64_t qmm_rows(const rlx_node_data *x, int64_t k) { return k ? rlx_shape_numel(&x->shape) / k : 0; }

/* The scratch layout of the library path: the dequantized weights, then
 * cuBLASLt's workspace. */
static size_t qmm_deq_bytes(const rlx_graph *g, const rlx_node_data *n)
{
    const int64_t cols = g->nodes[n->in[1]].shape.dims[0], k = n->attrs.quant.k;
    const size_t b = (size_t)(cols * k) * rlx_dtype_size(n->dtype);
    return (b + 255) & ~(size_t)255;
}

static size_t qmatmul_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    if (qmm_rows(&g->nodes[n->in[0]], n->attrs.quant.k) <= QMM_GEMM_ROWS)
        return 0;
    return qmm_deq_bytes(g, n) + CU_GEMM_WORKSPACE;
}

typedef struct qmm_state {
    cu_gemm gemm;
    size_t deq_bytes;
} qmm_state;

static rlx_status prep_qmatmul(const rlx_graph *g, rlx_thunk *t)
{
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    const int64_t k = n->attrs.quant.k, m = qmm_rows(x, k), cols = t->in_node[1]->shape.dims[0];
    if (m <= QMM_GEMM_ROWS || cols == 0)
        return RLX_OK;
    qmm_state *s = (qmm_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    t->state = s;
    s->deq_bytes = qmm_deq_bytes(g, n);
    /* y [m, cols] = x [m, k] . w [cols, k]^T */
    rlx_status st = rlx_cu_gemm_plan(&s->gemm, n->dtype, 0, 1, m, cols, k, k, k, cols, 1, 0, 0, 0, CU_EPI_NONE, 256);
    if (st == RLX_OK && s->gemm.p.has_algo) {
        const int qt = n->attrs.quant.qtype;
        launch_dequantize(n->dtype, qt, t->in[1], t->scratch, cols, k, rlx_quant_row_bytes(qt, k));
        rlx_cu_gemm_tune(&s->gemm, t->in[0], t->scratch, t->out, NULL, (char *)t->scratch + s->deq_bytes);
    }
    return st;
}

static void release_qmatmul(rlx_thunk *t)
{
    qmm_state *s = (qmm_state *)t->state;
    if (!s)
        return;
    rlx_cu_gemm_free(&s->gemm);
    free(s);
    t->state = NULL;
}

static rlx_status k_qmatmul(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    const int qt = n->attrs.quant.qtype;
    const int64_t k = n->attrs.quant.k, cols = t->in_node[1]->shape.dims[0], m = qmm_rows(x, k);
    if (m == 0 || cols == 0)
        return RLX_OK;
    const size_t rb = rlx_quant_row_bytes(qt, k);
    const uint8_t *w = (const uint8_t *)t->in[1];
    if (m > QMM_GEMM_ROWS) {
        const qmm_state *s = (const qmm_state *)t->state;
        launch_dequantize(n->dtype, qt, w, t->scratch, cols, k, rb);
        rlx_status st = rlx_cu_check(t, "qmatmul (dequantize) launch");
        return st == RLX_OK
                   ? rlx_cu_gemm_run(t, &s->gemm, t->in[0], t->scratch, t->out, NULL, (char *)t->scratch + s->deq_bytes)
                   : st;
    }
    if (m > CU_PROJ_MAX_ROWS && x->dtype != RLX_F32) {
        const int64_t gy = (m + QMM_TILE - 1) / QMM_TILE, gx = (cols + QMM_TILE - 1) / QMM_TILE;
        if (gx > INT_MAX)
            return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "qmatmul grid of %lld tiles is too large", (long long)gx);
        const dim3 grid((unsigned)gx, (unsigned)gy);
        CU_FLOAT_DISPATCH(x->dtype, T,
                          Q_TYPE_DISPATCH(qt, QT,
                                          cu_launch(qmatmul_tiles<T, QT>, grid, 128, 0, (const T *)t->in[0], w,
                                                    (T *)t->out, m, k, cols, rb)));
        return rlx_cu_check(t, "qmatmul (tensor cores) launch");
    }
    /* a few rows, and f32 activations up to QMM_GEMM_ROWS in groups of a
     * few: the few-row product (k_proj.cu) on the weights' 8-bit levels.
     * f32 activations stay f32 there rather than going to the tiles, which
     * would round them to bf16: each row's sum is then the same however
     * many rows run, so a prompt's logits match a decode step's. */
    const size_t es = rlx_dtype_size(x->dtype);
    cu_proj_args a;
    memset(&a, 0, sizeof a);
    a.w = w;
    a.N = cols;
    a.K = k;
    a.quant = qt;
    a.rb = (int64_t)rb;
    a.w_fixed = (t->in_fixed >> 1) & 1;
    /* rows a launch, as many as the staged activations let */
    int64_t per = CU_PROJ_MAX_ROWS;
    while (per > 1 && rlx_cu_rows_smem(x->dtype, per, k, false, true) > CU_PROJ_MAX_SMEM)
        per /= 2;
    if (rlx_cu_rows_smem(x->dtype, per, k, false, true) > CU_PROJ_MAX_SMEM)
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "qmatmul: rows of %lld elements do not fit in shared memory",
                           (long long)k);
    for (int64_t done = 0; done < m; done += per) {
        a.x = (const char *)t->in[0] + (size_t)(done * k) * es;
        a.y = (char *)t->out + (size_t)(done * cols) * es;
        a.M = m - done < per ? m - done : per;
        if (!rlx_cu_rows_launch(x->dtype, a))
            return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "qmatmul: the weight at %p is not 16-byte aligned", a.w);
    }
    return rlx_cu_check(t, "qmatmul (few rows) launch");
}

/* Claimed for the types the CPU computes with and float activations. */
static bool quant_ok(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    return rlx_qtype_supported(n->attrs.quant.qtype) &&
           (n->dtype == RLX_F32 || n->dtype == RLX_F16 || n->dtype == RLX_BF16);
}

extern "C" void rlx_cuda_register_quant(cu_kernel *tab)
{
    tab[RLX_OP_QMATMUL] = (cu_kernel){k_qmatmul, qmatmul_scratch, quant_ok, prep_qmatmul, release_qmatmul};
    tab[RLX_OP_DEQUANTIZE] = (cu_kernel){k_dequantize, NULL, quant_ok, NULL, NULL};
}
