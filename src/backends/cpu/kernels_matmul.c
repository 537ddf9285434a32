/* kernels_matmul.c - batched matmul with broadcast batch dims.
 * f32 goes straight to BLAS per batch; f64 to dgemm; f16/bf16 are widened
 * to f32 in scratch, multiplied, and narrowed on store. */
#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"

typedef struct {
    int64_t batch, M, N, K;
    int64_t a_rows, a_cols, b_rows, b_cols;         /* stored (untransposed) dims */
    rlx_shape bshape;                               /* output batch shape */
    int64_t a_st[RLX_MAX_DIMS], b_st[RLX_MAX_DIMS]; /* batch strides in matrices */
} mm_dims;

static void mm_dims_of(const rlx_thunk *t, mm_dims *d)
{
    const rlx_node_data *n = t->node, *a = t->in_node[0], *b = t->in_node[1];
    int ra = a->shape.ndim, rb = b->shape.ndim, ro = n->shape.ndim;
    d->M = n->shape.dims[ro - 2];
    d->N = n->shape.dims[ro - 1];
    d->a_rows = a->shape.dims[ra - 2];
    d->a_cols = a->shape.dims[ra - 1];
    d->b_rows = b->shape.dims[rb - 2];
    d->b_cols = b->shape.dims[rb - 1];
    d->K = n->attrs.matmul.trans_a ? d->a_rows : d->a_cols;
    d->bshape = n->shape;
    d->bshape.ndim = ro - 2;
    d->batch = rlx_shape_numel(&d->bshape);
    rlx_shape ab = a->shape, bb = b->shape;
    ab.ndim = ra - 2;
    bb.ndim = rb - 2;
    rlx_shape_broadcast_strides(&ab, &d->bshape, d->a_st);
    rlx_shape_broadcast_strides(&bb, &d->bshape, d->b_st);
}

static size_t matmul_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    if (n->dtype != RLX_F16 && n->dtype != RLX_BF16)
        return 0;
    const rlx_node_data *a = &g->nodes[n->in[0]], *b = &g->nodes[n->in[1]];
    int ro = n->shape.ndim;
    size_t mat_a = (size_t)(a->shape.dims[a->shape.ndim - 2] * a->shape.dims[a->shape.ndim - 1]);
    size_t mat_b = (size_t)(b->shape.dims[b->shape.ndim - 2] * b->shape.dims[b->shape.ndim - 1]);
    size_t mat_c = (size_t)(n->shape.dims[ro - 2] * n->shape.dims[ro - 1]);
    return (mat_a + mat_b + mat_c) * sizeof(float);
}

/* y[j] = a . B[j, :] for rows j in [lo, hi): B stored [N, K] (trans_b).
 * One row at a time: four rows' sums at once measured slower (80 against
 * 103-120 decode tok/s on decoder-small f32, 1 thread).  The processors
 * without AVX-512 (matvec_rows_avx512 below for those with it). */
RLX_CLONES static void matvec_rows(const float *a, const float *B, int64_t ldb, int64_t K, float *y, int64_t lo,
                                   int64_t hi)
{
    for (int64_t j = lo; j < hi; j++) {
        const float *b = B + j * ldb;
        float acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t k = 0; k < K; k++)
            acc += a[k] * b[k];
        y[j] = acc;
    }
}

#ifdef RLX_HAVE_WIDE
#include <immintrin.h>

/* matvec_rows with four 16-lane sums per row: a decode step streams the
 * weights once, and one sum's chain of dependent multiply-adds (the
 * `omp simd` loop above) leaves the loads waiting on it.  Measured on
 * decoder-small f32, 1 thread: 1.2-1.5x the matrix-vector throughput of
 * matvec_rows.  Rows of a length not a multiple of 16 end in a masked
 * load (nothing past the row is read).  Software prefetch (T0/T1/NTA, 0.5
 * to 16 KiB ahead) and two rows at once measured no faster or slower. */
__attribute__((target("avx512f"))) static void matvec_rows_avx512(const float *a, const float *B, int64_t ldb,
                                                                  int64_t K, float *y, int64_t lo, int64_t hi)
{
    for (int64_t j = lo; j < hi; j++) {
        const float *b = B + j * ldb;
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        int64_t k = 0;
        for (; k + 64 <= K; k += 64) {
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
            s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(b + k + 16), s1);
            s2 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 32), _mm512_loadu_ps(b + k + 32), s2);
            s3 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k + 48), _mm512_loadu_ps(b + k + 48), s3);
        }
        for (; k + 16 <= K; k += 16)
            s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k), _mm512_loadu_ps(b + k), s0);
        if (k < K) {
            const __mmask16 m = (__mmask16)((1u << (K - k)) - 1);
            s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + k), _mm512_maskz_loadu_ps(m, b + k), s1);
        }
        y[j] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    }
}
#else
#define matvec_rows_avx512 matvec_rows
#endif

/* y[j] = sum_k a[k] B[k, j] for columns j in [lo, hi): B stored [K, N]. */
RLX_CLONES static void matvec_cols(const float *a, const float *B, int64_t ldb, int64_t K, float *y, int64_t lo,
                                   int64_t hi)
{
    for (int64_t j = lo; j < hi; j++)
        y[j] = 0;
    for (int64_t k = 0; k < K; k++) {
        const float *b = B + k * ldb, ak = a[k];
#pragma omp simd
        for (int64_t j = lo; j < hi; j++)
            y[j] += ak * b[j];
    }
}

/* One row times a matrix (decode steps, batch-1 projections): a matrix-vector
 * product reads the weights once at memory speed, where a GEMM library's
 * M = 1 path does not; the columns are shared among the threads. */
typedef struct matvec_job {
    int tb, parts;
    bool wide;
    int64_t N, K, ldb;
    const float *a, *B;
    float *y;
} matvec_job;

/* Part p of `parts` column ranges (fixed by the thread count, so each
 * column's vector/tail split is the same whoever runs it). */
static void matvec_parts(void *arg, int64_t p0, int64_t p1, int worker)
{
    (void)worker;
    const matvec_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        int64_t lo = j->N * p / j->parts, hi = j->N * (p + 1) / j->parts;
        if (j->wide)
            matvec_rows_avx512(j->a, j->B, j->ldb, j->K, j->y, lo, hi);
        else if (j->tb)
            matvec_rows(j->a, j->B, j->ldb, j->K, j->y, lo, hi);
        else
            matvec_cols(j->a, j->B, j->ldb, j->K, j->y, lo, hi);
    }
}

static void matvec_f32(int tb, int64_t N, int64_t K, const float *a, const float *B, int64_t ldb, float *y, int threads,
                       const rlx_backend_settings *set)
{
    matvec_job j = {.tb = tb,
                    .parts = N * K >= (int64_t)1 << 16 && threads > 1 ? threads : 1,
                    .wide = tb && rlx_cpu_avx512(set),
                    .N = N,
                    .K = K,
                    .ldb = ldb,
                    .a = a,
                    .B = B,
                    .y = y};
    /* one share a thread, sleeping workers woken before the caller's own:
     * as chunks, the caller judged the pace only after its half, then took
     * the other half too (a decode step ran on one thread) */
    rlx_cpu_parallel_shares(j.parts, matvec_parts, &j);
}

void rlx_cpu_product_f32(int tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, int64_t ldb, float *C,
                         int threads, const rlx_backend_settings *set)
{
    if (M == 1)
        matvec_f32(tb, N, K, A, B, ldb, C, threads, set);
    else
        rlx_sgemm(0, tb, M, N, K, 1.0f, A, K, B, ldb, 0.0f, C, N, threads, set);
}

static rlx_status matmul_kernel(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    mm_dims d;
    mm_dims_of(t, &d);
    int ta = n->attrs.matmul.trans_a, tb = n->attrs.matmul.trans_b;
    int64_t mat_a = d.a_rows * d.a_cols, mat_b = d.b_rows * d.b_cols, mat_c = d.M * d.N;
    rlx_dtype dt = n->dtype;
    for (int64_t i = 0; i < d.batch; i++) {
        int64_t oa = rlx_bcast_offset(i, &d.bshape, d.a_st) * mat_a;
        int64_t ob = rlx_bcast_offset(i, &d.bshape, d.b_st) * mat_b;
        if (dt == RLX_F32 && !ta) {
            rlx_cpu_product_f32(tb, d.M, d.N, d.K, (const float *)t->in[0] + oa, (const float *)t->in[1] + ob, d.b_cols,
                                (float *)t->out + i * mat_c, ctx->threads, ctx->settings);
        } else if (dt == RLX_F32) {
            rlx_sgemm(ta, tb, d.M, d.N, d.K, 1.0f, (const float *)t->in[0] + oa, d.a_cols, (const float *)t->in[1] + ob,
                      d.b_cols, 0.0f, (float *)t->out + i * mat_c, d.N, ctx->threads, ctx->settings);
        } else if (dt == RLX_F64) {
            rlx_dgemm(ta, tb, d.M, d.N, d.K, 1.0, (const double *)t->in[0] + oa, d.a_cols,
                      (const double *)t->in[1] + ob, d.b_cols, 0.0, (double *)t->out + i * mat_c, d.N, ctx->threads,
                      ctx->settings);
        } else {
            float *fa = t->scratch, *fb = fa + mat_a, *fc = fb + mat_b;
            size_t es = rlx_dtype_size(dt);
            rlx_cpu_to_f32(fa, (const char *)t->in[0] + oa * es, dt, mat_a);
            rlx_cpu_to_f32(fb, (const char *)t->in[1] + ob * es, dt, mat_b);
            rlx_sgemm(ta, tb, d.M, d.N, d.K, 1.0f, fa, d.a_cols, fb, d.b_cols, 0.0f, fc, d.N, ctx->threads,
                      ctx->settings);
            rlx_cpu_from_f32((char *)t->out + i * mat_c * es, dt, fc, mat_c);
        }
    }
    return RLX_OK;
}

void rlx_cpu_register_matmul(rlx_cpu_kernel *table)
{
    table[RLX_OP_MATMUL].fn = matmul_kernel;
    table[RLX_OP_MATMUL].scratch = matmul_scratch;
}
