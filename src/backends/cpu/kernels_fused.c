/* kernels_fused.c - reference CPU kernels of the fused ops and of the
 * inference batch norm.
 *
 * Fused kernels compute in f32 (GEMMs through BLAS, activations) or double
 * (statistics, 16-bit elementwise programs, and the whole of an f64 GEMM
 * with its epilogue): operands of other float dtypes are widened into
 * scratch first, and
 * results are narrowed once on store (elementwise chains compute every step
 * as the unfused node would and round it to the dtype, so rounding-sensitive
 * graphs give the same result).  They are
 * the reference other backends' fused kernels are tested
 * against; each one also has a decomposition into primitives (opt/lower.c)
 * that must agree with it. */

#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_matmul.h"

static size_t round64(size_t b) { return (b + 63) / 64 * 64; }
#define NODE_IN(g, n, i) (&(g)->nodes[(n)->in[i]])

/* A bump allocator over the thunk's scratch (sizes rounded to 64 bytes, in
 * the same order as the scratch callback counted them). */
typedef struct bump {
    char *p;
} bump;
static void *take(bump *b, size_t bytes)
{
    void *r = b->p;
    b->p += round64(bytes);
    return r;
}

/* Operand i as f32: the input itself when it is f32, else widened into
 * scratch. */
static const float *as_f32(const rlx_thunk *t, int i, bump *b)
{
    const rlx_node_data *n = t->in_node[i];
    if (n->dtype == RLX_F32)
        return t->in[i];
    int64_t cnt = rlx_shape_numel(&n->shape);
    float *dst = take(b, (size_t)cnt * sizeof(float));
    rlx_cpu_to_f32(dst, t->in[i], n->dtype, cnt);
    return dst;
}
static size_t f32_copy_bytes(const rlx_node_data *n)
{
    return n->dtype == RLX_F32 ? 0 : round64((size_t)rlx_shape_numel(&n->shape) * sizeof(float));
}

/* v rounded to what dtype t stores. */
static inline double round_to_dtype(rlx_dtype t, double v)
{
    switch (t) {
    case RLX_F32: return (float)v;
    case RLX_F16: return rlx_f16_to_f32(rlx_f32_to_f16((float)v));
    case RLX_BF16: return rlx_bf16_to_f32(rlx_f32_to_bf16((float)v));
    default: return v;
    }
}

/* c[j] = act(c[j] + bias[j]) over n f32 values (bias NULL: none), in f32
 * with vectorised math: GELU as 0.5 x erfc(-x / sqrt 2), which keeps its
 * relative accuracy where GELU is tiny (x < 0); the tanh GELU through
 * tanhf; SiLU with RLX_EXPF_VEC.  rlx_act_f64's double math costs about 20 ns
 * per element, more than the GEMM before it on the encoder's FFN. */
RLX_VEC_BEGIN
RLX_CLONES void rlx_cpu_act_f32(int act, float *restrict c, const float *restrict bias, int64_t n)
{
    if (bias) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            c[j] += bias[j];
    }
    switch (act) {
    case RLX_ACT_RELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            c[j] = rlx_relu_f(c[j]);
        break;
    case RLX_ACT_GELU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            c[j] = rlx_gelu_erf_f(c[j]);
        break;
    case RLX_ACT_GELU_TANH:
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            c[j] = rlx_gelu_tanh_f(c[j]);
        break;
    case RLX_ACT_SILU:
#pragma omp simd
        for (int64_t j = 0; j < n; j++) {
            float x = c[j], e; /* e = exp(-|x|): x sigmoid(x) without overflow */
            RLX_EXPF_VEC(e, x < 0 ? x : -x);
            c[j] = x >= 0 ? x / (1.0f + e) : x * e / (1.0f + e);
        }
        break;
    default: break;
    }
}
RLX_VEC_END

/* ------------------------------------------------------------ batch norm */

static void batch_norm_planes(void *arg, int64_t p0, int64_t p1, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    int64_t C = xn->shape.dims[1], planes = xn->shape.dims[0] * C;
    int64_t inner = planes ? rlx_shape_numel(&xn->shape) / planes : 0;
    double eps = t->node->attrs.batch_norm.eps;
    for (int64_t pl = p0; pl < p1; pl++) {
        int64_t c = pl % C;
        double s = rlx_load(t->in[1], dt, c) / sqrt(rlx_load(t->in[4], dt, c) + eps);
        double sh = rlx_load(t->in[2], dt, c) - rlx_load(t->in[3], dt, c) * s;
        int64_t base = pl * inner;
        if (dt == RLX_F32) {
            const float *x = (const float *)t->in[0] + base;
            float *y = (float *)t->out + base;
            for (int64_t i = 0; i < inner; i++)
                y[i] = (float)(x[i] * s + sh);
        } else {
            for (int64_t i = 0; i < inner; i++)
                rlx_store(t->out, dt, base + i, rlx_load(t->in[0], dt, base + i) * s + sh);
        }
    }
}

static rlx_status k_batch_norm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int64_t planes = xn->shape.dims[0] * xn->shape.dims[1];
    int threads = rlx_cpu_threads(ctx, rlx_shape_numel(&xn->shape) * 2);
    if (planes < threads)
        threads = 1;
    rlx_cpu_parallel(threads, planes, batch_norm_planes, (void *)t);
    return RLX_OK;
}

/* ------------------------------------------------ batched f32/f64 GEMM */

static void gemm_one(rlx_dtype dt, int ta, int tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                     const void *B, int64_t ldb, void *C, int64_t ldc, int threads, const rlx_backend_settings *set)
{
    if (dt == RLX_F64)
        rlx_dgemm(ta, tb, M, N, K, 1.0, A, lda, B, ldb, 0.0, C, ldc, threads, set);
    else
        rlx_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, threads, set);
}

/* C (dense, the matmul's output shape) = op(A) op(B) for A, B of any rank
 * >= 2 with broadcast batch dims, all three f32 or all three f64 (dt). */
static void gemm_batched(rlx_dtype dt, const void *A, const rlx_shape *as, const void *B, const rlx_shape *bs, int ta,
                         int tb, void *C, const rlx_shape *cs, int threads, const rlx_backend_settings *set)
{
    int ra = as->ndim, rb = bs->ndim, rc = cs->ndim;
    size_t es = rlx_dtype_size(dt);
    int64_t M = cs->dims[rc - 2], N = cs->dims[rc - 1];
    int64_t a_rows = as->dims[ra - 2], a_cols = as->dims[ra - 1];
    int64_t b_rows = bs->dims[rb - 2], b_cols = bs->dims[rb - 1];
    int64_t K = ta ? a_rows : a_cols;
    rlx_shape batch = *cs, ab = *as, bb = *bs;
    batch.ndim = rc - 2;
    ab.ndim = ra - 2;
    bb.ndim = rb - 2;
    int64_t nb = rlx_shape_numel(&batch);
    if (nb == 0 || M == 0 || N == 0)
        return;
    /* b shared by every batch and a contiguous rows: one GEMM */
    if (rb == 2 && !ta && rlx_shape_numel(&ab) == nb) {
        gemm_one(dt, 0, tb, nb * M, N, K, A, a_cols, B, b_cols, C, N, threads, set);
        return;
    }
    int64_t ast[RLX_MAX_DIMS], bst[RLX_MAX_DIMS];
    rlx_shape_broadcast_strides(&ab, &batch, ast);
    rlx_shape_broadcast_strides(&bb, &batch, bst);
    for (int64_t i = 0; i < nb; i++) {
        int64_t oa = rlx_bcast_offset(i, &batch, ast) * a_rows * a_cols;
        int64_t ob = rlx_bcast_offset(i, &batch, bst) * b_rows * b_cols;
        gemm_one(dt, ta, tb, M, N, K, (const char *)A + (size_t)oa * es, a_cols, (const char *)B + (size_t)ob * es,
                 b_cols, (char *)C + (size_t)(i * M * N) * es, N, threads, set);
    }
}

/* ------------------------------------------------------ matmul+bias+act */

static size_t mm_act_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    if (n->dtype == RLX_F64)
        return 0;
    size_t b = f32_copy_bytes(NODE_IN(g, n, 0)) + f32_copy_bytes(NODE_IN(g, n, 1));
    if (n->dtype != RLX_F32)
        b += round64((size_t)rlx_shape_numel(&n->shape) * sizeof(float));
    return b;
}

/* f64 in f64 throughout (a gradient check's finite differences need it);
 * other dtypes through f32 */
/* The epilogue's rows: act(C + bias), stored in the node's dtype. */
typedef struct mm_act_job {
    const rlx_thunk *t;
    void *C;
    int64_t N;
} mm_act_job;

static void mm_act_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const mm_act_job *j = arg;
    const rlx_thunk *t = j->t;
    const rlx_node_data *n = t->node;
    bool f64 = n->dtype == RLX_F64;
    int64_t N = j->N;
    const void *bias = n->attrs.mm_act.has_bias ? t->in[2] : NULL;
    rlx_dtype bt = n->attrs.mm_act.has_bias ? t->in_node[2]->dtype : RLX_F32;
    int act = n->attrs.mm_act.act;
    for (int64_t r = r0; r < r1; r++) {
        if (f64) {
            double *c = (double *)j->C + r * N;
            for (int64_t k = 0; k < N; k++)
                c[k] = rlx_act_f64(act, c[k] + (bias ? rlx_load(bias, bt, k) : 0.0));
            continue;
        }
        float *c = (float *)j->C + r * N;
        if (n->dtype == RLX_F32) {
            if (!bias || bt == RLX_F32) {
                rlx_cpu_act_f32(act, c, bias, N);
                continue;
            }
            for (int64_t k = 0; k < N; k++)
                c[k] = (float)rlx_act_f64(act, (double)c[k] + rlx_load(bias, bt, k));
        } else {
            for (int64_t k = 0; k < N; k++)
                rlx_store(t->out, n->dtype, r * N + k,
                          rlx_act_f64(act, (double)c[k] + (bias ? rlx_load(bias, bt, k) : 0.0)));
        }
    }
}

static rlx_status k_matmul_bias_act(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    if (t->state && rlx_cpu_matmul_dnnl_ready(t, ctx)) /* a large constant weight, packed for oneDNN */
        return rlx_cpu_matmul_dnnl(t, ctx);
    const rlx_node_data *n = t->node;
    bool f64 = n->dtype == RLX_F64;
    bump b = {t->scratch};
    const void *A = f64 ? t->in[0] : as_f32(t, 0, &b), *B = f64 ? t->in[1] : as_f32(t, 1, &b);
    int64_t total = rlx_shape_numel(&n->shape);
    void *C = f64 || n->dtype == RLX_F32 ? t->out : take(&b, (size_t)total * sizeof(float));
    gemm_batched(f64 ? RLX_F64 : RLX_F32, A, &t->in_node[0]->shape, B, &t->in_node[1]->shape, n->attrs.mm_act.trans_a,
                 n->attrs.mm_act.trans_b, C, &n->shape, ctx->threads, ctx->settings);
    int64_t N = n->shape.dims[n->shape.ndim - 1];
    int64_t rows = N ? total / N : 0;
    int threads = rlx_cpu_threads(ctx, total * (n->attrs.mm_act.act ? 8 : 1));
    if (rows < threads)
        threads = 1;
    mm_act_job j = {.t = t, .C = C, .N = N};
    rlx_cpu_parallel(threads, rows, mm_act_rows, &j);
    return RLX_OK;
}

/* ------------------------------------------------ residual add + norm */

/* The sum is rounded to the dtype first, as the unfused add would store it;
 * add_rms_norm_keep also writes that sum (first half of its [2, ...] output). */
static void add_norm_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *n = t->node, *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    int is_layer = n->op == RLX_OP_ADD_LAYER_NORM, keep = n->op == RLX_OP_ADD_RMS_NORM_KEEP;
    double eps = n->attrs.norm.eps;
    int64_t d = xn->shape.dims[xn->shape.ndim - 1];
    int64_t total = rlx_shape_numel(&xn->shape), rows = d ? total / d : 0;
    int64_t yoff = keep ? total : 0; /* where the normalised half starts */
    int k = 2;
    const void *gamma = n->attrs.norm.has_gamma ? t->in[k++] : NULL;
    const void *beta = (is_layer && n->attrs.norm.has_beta) ? t->in[k++] : NULL;
    (void)rows;
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = r * d;
        double mean = 0, var = 0;
        if (dt == RLX_F32) {
            /* the sum where the add would store it (this row of y, or the
             * kept half), then the norm kernel's row */
            const float *x = (const float *)t->in[0] + base, *res = (const float *)t->in[1] + base;
            float *y = (float *)t->out + yoff + base, *sum = keep ? (float *)t->out + base : y;
            for (int64_t i = 0; i < d; i++)
                sum[i] = x[i] + res[i];
            rlx_cpu_norm_row_f32(sum, y, gamma, beta, d, is_layer, eps);
        } else {
#define SUM(i) round_to_dtype(dt, rlx_load(t->in[0], dt, base + (i)) + rlx_load(t->in[1], dt, base + (i)))
            if (keep)
                for (int64_t i = 0; i < d; i++)
                    rlx_store(t->out, dt, base + i, SUM(i));
            if (is_layer) {
                for (int64_t i = 0; i < d; i++)
                    mean += SUM(i);
                mean /= (double)d;
            }
            for (int64_t i = 0; i < d; i++) {
                double v = SUM(i) - mean;
                var += v * v;
            }
            double inv = 1.0 / sqrt(var / (double)d + eps);
            for (int64_t i = 0; i < d; i++) {
                double v = (SUM(i) - mean) * inv;
                if (gamma)
                    v *= rlx_load(gamma, dt, i);
                if (beta)
                    v += rlx_load(beta, dt, i);
                rlx_store(t->out, dt, yoff + base + i, v);
            }
#undef SUM
        }
    }
}

static rlx_status k_add_norm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int64_t d = xn->shape.dims[xn->shape.ndim - 1];
    int64_t total = rlx_shape_numel(&xn->shape), rows = d ? total / d : 0;
    int threads = rlx_cpu_threads(ctx, rows * d * 4);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, add_norm_rows, (void *)t);
    return RLX_OK;
}

/* ---------------------------------------------------------------- SwiGLU */

static size_t swiglu_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    return f32_copy_bytes(NODE_IN(g, n, 0)) + f32_copy_bytes(NODE_IN(g, n, 1)) + f32_copy_bytes(NODE_IN(g, n, 2)) +
           2 * round64((size_t)rlx_shape_numel(&n->shape) * sizeof(float));
}

typedef struct swiglu_job {
    const rlx_thunk *t;
    const float *G, *U;
} swiglu_job;

static void swiglu_values(void *arg, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const swiglu_job *j = arg;
    const rlx_node_data *n = j->t->node;
    for (int64_t i = i0; i < i1; i++) {
        double v = rlx_act_f64(RLX_ACT_SILU, j->G[i]) * j->U[i];
        if (n->dtype == RLX_F32)
            ((float *)j->t->out)[i] = (float)v;
        else
            rlx_store(j->t->out, n->dtype, i, v);
    }
}

static rlx_status k_swiglu(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    bump b = {t->scratch};
    const float *X = as_f32(t, 0, &b), *Wg = as_f32(t, 1, &b), *Wu = as_f32(t, 2, &b);
    int64_t total = rlx_shape_numel(&n->shape);
    float *G = take(&b, (size_t)total * sizeof(float)), *U = take(&b, (size_t)total * sizeof(float));
    gemm_batched(RLX_F32, X, &t->in_node[0]->shape, Wg, &t->in_node[1]->shape, 0, 0, G, &n->shape, ctx->threads,
                 ctx->settings);
    gemm_batched(RLX_F32, X, &t->in_node[0]->shape, Wu, &t->in_node[2]->shape, 0, 0, U, &n->shape, ctx->threads,
                 ctx->settings);
    swiglu_job j = {.t = t, .G = G, .U = U};
    rlx_cpu_parallel(rlx_cpu_threads(ctx, total * 8), total, swiglu_values, &j);
    return RLX_OK;
}

/* ------------------------------------------------------- attention block */

typedef struct ab_dims {
    int64_t B, S, hid, H, Hk, D, Dv, out, rows;
} ab_dims;

static ab_dims ab_dims_of(const rlx_node_data *x, const rlx_node_data *n)
{
    ab_dims d;
    d.B = x->shape.dims[0];
    d.S = x->shape.dims[1];
    d.hid = x->shape.dims[2];
    d.H = n->attrs.attn_block.heads;
    d.Hk = n->attrs.attn_block.kv_heads;
    d.D = n->attrs.attn_block.head_dim;
    d.Dv = n->attrs.attn_block.v_head_dim;
    d.out = n->shape.dims[2];
    d.rows = d.B * d.S;
    return d;
}

/* Attention threads: at most one per (batch, head, tile). */
static int ab_threads(int threads, const ab_dims *d)
{
    int64_t th = threads < 1 ? 1 : threads, items = d->B * d->H * ((d->S + RLX_ATTN_TILE - 1) / RLX_ATTN_TILE);
    if (items < th)
        th = items > 0 ? items : 1;
    return (int)th;
}

/* Per attention thread: one tile's scores and keys. */
static size_t ab_block_bytes(const ab_dims *d) { return round64(rlx_cpu_attn_tile_floats(d->S, d->D) * sizeof(float)); }

static rlx_status attn_block_prepare(const rlx_graph *g, rlx_thunk *t)
{
    const rlx_node_data *n = t->node;
    if (!n->attrs.attn_block.has_rope)
        return RLX_OK;
    ab_dims d = ab_dims_of(NODE_IN(g, n, 0), n);
    return rlx_cpu_rope_state(t, d.S, d.D, n->attrs.attn_block.rope_theta, n->attrs.attn_block.rope_offset);
}

static size_t attn_block_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    ab_dims d = ab_dims_of(NODE_IN(g, n, 0), n);
    size_t b = 0;
    for (int i = 0; i < 5; i++)
        b += f32_copy_bytes(NODE_IN(g, n, i));
    b += round64((size_t)(d.rows * d.H * d.D) * 4) + round64((size_t)(d.rows * d.Hk * d.D) * 4) +
         round64((size_t)(d.rows * d.Hk * d.Dv) * 4) + round64((size_t)(d.rows * d.H * d.Dv) * 4);
    if (n->dtype != RLX_F32)
        b += round64((size_t)(d.rows * d.out) * 4);
    b += (size_t)ab_threads(threads, &d) * ab_block_bytes(&d);
    return b;
}

/* rows x width matrix: adds bias (any dtype), or nothing if bias is NULL. */
typedef struct bias_rows_job {
    float *m;
    int64_t width;
    const void *bias;
    rlx_dtype bt;
} bias_rows_job;

static void bias_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const bias_rows_job *jb = arg;
    float *m = jb->m;
    int64_t width = jb->width;
    const void *bias = jb->bias;
    rlx_dtype bt = jb->bt;
    for (int64_t r = r0; r < r1; r++) {
        float *row = m + r * width;
        if (bt == RLX_F32) {
            const float *b = bias;
#pragma omp simd
            for (int64_t j = 0; j < width; j++)
                row[j] += b[j];
        } else {
            for (int64_t j = 0; j < width; j++)
                row[j] = (float)((double)row[j] + rlx_load(bias, bt, j));
        }
    }
}

static void add_bias_rows(float *m, int64_t rows, int64_t width, const void *bias, rlx_dtype bt, int threads)
{
    if (!bias)
        return;
    if (rows < threads)
        threads = 1;
    bias_rows_job j = {.m = m, .width = width, .bias = bias, .bt = bt};
    rlx_cpu_parallel(threads, rows, bias_rows, &j);
}

/* RMS norm over each head vector of D elements, then rotary embedding with
 * the cos/sin table rope_tab [S][D/2][2] (NULL: no rope). */
typedef struct norm_rope_job {
    float *m;
    int64_t S, heads, D;
    const void *gamma;
    rlx_dtype gt;
    double eps;
    const double *rope_tab;
    int inter;
} norm_rope_job;

static void norm_rope_heads(void *arg, int64_t h0, int64_t h1, int worker)
{
    (void)worker;
    const norm_rope_job *j = arg;
    float *m = j->m;
    int64_t S = j->S, heads = j->heads, D = j->D;
    const void *gamma = j->gamma;
    rlx_dtype gt = j->gt;
    double eps = j->eps;
    const double *rope_tab = j->rope_tab;
    int64_t half = D / 2, stride_a = j->inter ? 2 : 1, off_b = j->inter ? 1 : half;
    for (int64_t rh = h0; rh < h1; rh++) {
        float *v = m + rh * D;
        if (gamma && gt == RLX_F32) { /* the norm kernel's row: the unfused rms_norm gives the same bits */
            rlx_cpu_norm_row_f32(v, v, gamma, NULL, D, 0, eps);
        } else if (gamma) {
            double ss = 0;
            for (int64_t i = 0; i < D; i++)
                ss += (double)v[i] * v[i];
            double inv = 1.0 / sqrt(ss / (double)D + eps);
            for (int64_t i = 0; i < D; i++)
                v[i] = (float)(v[i] * inv * rlx_load(gamma, gt, i));
        }
        if (rope_tab) {
            const double *cs = rope_tab + ((rh / heads) % S) * half * 2;
            for (int64_t i = 0; i < half; i++) {
                int64_t ia = i * stride_a, ib = ia + off_b;
                double x1 = v[ia], x2 = v[ib], c = cs[2 * i], sn = cs[2 * i + 1];
                v[ia] = (float)(x1 * c - x2 * sn);
                v[ib] = (float)(x2 * c + x1 * sn);
            }
        }
    }
}

static void ab_norm_rope(float *m, int64_t rows, int64_t S, int64_t heads, int64_t D, const void *gamma, rlx_dtype gt,
                         double eps, const double *rope_tab, int inter, int threads)
{
    if (!gamma && !rope_tab)
        return;
    norm_rope_job j = {.m = m,
                       .S = S,
                       .heads = heads,
                       .D = D,
                       .gamma = gamma,
                       .gt = gt,
                       .eps = eps,
                       .rope_tab = rope_tab,
                       .inter = inter};
    rlx_cpu_parallel(threads, rows * heads, norm_rope_heads, &j);
}

/* The attention of each (batch, head, tile of RLX_ATTN_TILE query rows),
 * cut as the attention op cuts it, on the worker's block of scratch. */
typedef struct ab_heads_job {
    const ab_dims *d;
    const float *Q, *K, *V;
    float *O;
    char *blocks;
    size_t blk;
    float scale;
    int causal;
    const void *mask;
    rlx_dtype mask_dt;
    const int64_t *mst;
    bool wide;
    int64_t per_item; /* tiles per item */
} ab_heads_job;

static void ab_heads(void *arg, int64_t it0, int64_t it1, int worker)
{
    const ab_heads_job *jb = arg;
    const ab_dims *d = jb->d;
    const int64_t S = d->S, D = d->D, Dv = d->Dv, tiles = (S + RLX_ATTN_TILE - 1) / RLX_ATTN_TILE;
    const int64_t items_per_head = tiles / jb->per_item;
    float *sc = (float *)(jb->blocks + (size_t)worker * jb->blk);
    int64_t key_head = -1, keys_done = 0; /* the key head whose keys sc holds transposed */
    for (int64_t it = it0; it < it1; it++) {
        const int64_t bh = it / items_per_head, tile0 = it % items_per_head * jb->per_item;
        const int64_t bb = bh / d->H, h = bh % d->H, hk = h / (d->H / d->Hk);
        rlx_attn_head head = {.q = jb->Q + bb * S * d->H * D + h * D,
                              .k = jb->K + bb * S * d->Hk * D + hk * D,
                              .v = jb->V + bb * S * d->Hk * Dv + hk * Dv,
                              .o = jb->O + bb * S * d->H * Dv + h * Dv,
                              .ldq = d->H * D,
                              .ldk = d->Hk * D,
                              .ldv = d->Hk * Dv,
                              .ldo = d->H * Dv,
                              .D = D,
                              .Dv = Dv,
                              .T = S,
                              .scale = jb->scale,
                              .causal = jb->causal,
                              .shift = 0,
                              .mask = jb->mask,
                              .mask_dt = jb->mask_dt,
                              .mbase = bb * jb->mst[0] + h * jb->mst[1],
                              .mrow = jb->mst[2],
                              .mcol = jb->mst[3],
                              .wide = jb->wide};
        if (bb * d->Hk + hk != key_head)
            key_head = bb * d->Hk + hk, keys_done = 0;
        for (int64_t s0 = tile0 * RLX_ATTN_TILE; s0 < S && s0 < (tile0 + jb->per_item) * RLX_ATTN_TILE;
             s0 += RLX_ATTN_TILE)
            rlx_cpu_attn_tile_f32(&head, s0, S - s0 < RLX_ATTN_TILE ? S - s0 : RLX_ATTN_TILE, sc, &keys_done);
    }
}

static rlx_status k_attention_block(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    ab_dims d = ab_dims_of(t->in_node[0], n);
    if (d.rows == 0 || d.out == 0)
        return RLX_OK;
    int th = ctx->threads;
    bump b = {t->scratch};
    const float *X = as_f32(t, 0, &b), *Wq = as_f32(t, 1, &b), *Wk = as_f32(t, 2, &b), *Wv = as_f32(t, 3, &b),
                *Wo = as_f32(t, 4, &b);
    float *Q = take(&b, (size_t)(d.rows * d.H * d.D) * 4), *K = take(&b, (size_t)(d.rows * d.Hk * d.D) * 4);
    float *V = take(&b, (size_t)(d.rows * d.Hk * d.Dv) * 4), *O = take(&b, (size_t)(d.rows * d.H * d.Dv) * 4);
    float *Y = n->dtype == RLX_F32 ? t->out : take(&b, (size_t)(d.rows * d.out) * 4);
    int64_t S = d.S, D = d.D, Dv = d.Dv;
    const double *rope_tab = n->attrs.attn_block.has_rope ? (const double *)t->state : NULL; /* attn_block_prepare */
    int nth = ab_threads(th, &d);
    char *blocks = take(&b, 0);
    size_t blk = ab_block_bytes(&d);

    rlx_sgemm(0, 0, d.rows, d.H * D, d.hid, 1.0f, X, d.hid, Wq, d.H * D, 0.0f, Q, d.H * D, th, ctx->settings);
    rlx_sgemm(0, 0, d.rows, d.Hk * D, d.hid, 1.0f, X, d.hid, Wk, d.Hk * D, 0.0f, K, d.Hk * D, th, ctx->settings);
    rlx_sgemm(0, 0, d.rows, d.Hk * Dv, d.hid, 1.0f, X, d.hid, Wv, d.Hk * Dv, 0.0f, V, d.Hk * Dv, th, ctx->settings);
    int ib[8];
    for (int i = 1; i <= 7; i++)
        ib[i] = rlx_attn_block_input(n, i);
#define OPT_IN(i) (ib[i] >= 0 ? t->in[ib[i]] : NULL)
#define OPT_DT(i) (ib[i] >= 0 ? t->in_node[ib[i]]->dtype : RLX_F32)
    int bt = rlx_cpu_threads(ctx, d.rows * (d.H + 2 * d.Hk) * D);
    add_bias_rows(Q, d.rows, d.H * D, OPT_IN(1), OPT_DT(1), bt);
    add_bias_rows(K, d.rows, d.Hk * D, OPT_IN(2), OPT_DT(2), bt);
    add_bias_rows(V, d.rows, d.Hk * Dv, OPT_IN(3), OPT_DT(3), bt);
    double eps = n->attrs.attn_block.norm_eps;
    int inter = n->attrs.attn_block.rope_interleaved;
    int nt = rlx_cpu_threads(ctx, d.rows * d.H * D * 8);
    ab_norm_rope(Q, d.rows, S, d.H, D, OPT_IN(5), OPT_DT(5), eps, rope_tab, inter, nt);
    ab_norm_rope(K, d.rows, S, d.Hk, D, OPT_IN(6), OPT_DT(6), eps, rope_tab, inter, nt);

    float scale = (float)n->attrs.attn_block.scale;
    int causal = n->attrs.attn_block.causal;
    /* mask: bool (false drops the key) or added to the scores, broadcast over [B, H, S, S] */
    const void *mask = OPT_IN(7);
    rlx_dtype mask_dt = OPT_DT(7);
    int64_t mst[RLX_MAX_DIMS] = {0};
    if (mask) {
        rlx_shape full = {4, {d.B, d.H, S, S}};
        rlx_shape_broadcast_strides(&t->in_node[ib[7]]->shape, &full, mst);
    }
    int64_t ow = d.H * Dv;
    int at = rlx_cpu_threads(ctx, d.B * d.H * S * S * (D + Dv));
    if (at > nth)
        at = nth;
    const int64_t per_item = rlx_attn_tiles_per_item(d.B * d.H, S, at);
    const int64_t items = d.B * d.H * ((S + RLX_ATTN_TILE - 1) / RLX_ATTN_TILE) / per_item;
    ab_heads_job j = {.d = &d,
                      .Q = Q,
                      .K = K,
                      .V = V,
                      .O = O,
                      .blocks = blocks,
                      .blk = blk,
                      .scale = scale,
                      .causal = causal,
                      .mask = mask,
                      .mask_dt = mask_dt,
                      .mst = mst,
                      .wide = rlx_cpu_avx512(ctx->settings),
                      .per_item = per_item};
    rlx_cpu_parallel(at, items, ab_heads, &j);
    rlx_sgemm(0, 0, d.rows, d.out, ow, 1.0f, O, ow, Wo, d.out, 0.0f, Y, d.out, th, ctx->settings);
    add_bias_rows(Y, d.rows, d.out, OPT_IN(4), OPT_DT(4), bt);
    if (n->dtype != RLX_F32)
        rlx_cpu_from_f32(t->out, n->dtype, Y, d.rows * d.out);
#undef OPT_IN
#undef OPT_DT
    return RLX_OK;
}

/* ----------------------------------------------------- elementwise chain */

/* f32 chains run a block of columns at a time: each instruction over the
 * whole block, its op dispatched once, so the loops vectorise (element by
 * element through double, a residual add + ReLU took 14 ns per value).
 * Each step computes what the unfused f32 node would: the binary ops below
 * in f32 (one correctly rounded operation, the same as the binary kernel's
 * double-then-round), other binary ops through the same double math, and
 * unary ops through the unary kernel's f32 math. */
#define EW_BLOCK 256

/* pow(a, 2), as the double math gives it: the product of two floats is
 * exact in double, so one rounding of it is a * a in f32.  (Norms written
 * out square through pow; libm's double pow took most of such a chain.) */
static bool all_two(const float *b, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        if (b[j] != 2.0f)
            return false;
    return true;
}

/* Built for AVX2 too and without trapping math, so that the NaN tests of
 * max/min vectorise. */
RLX_VEC_BEGIN
RLX_CLONES static void ew_step_f32(rlx_op op, const float *restrict a, const float *restrict b, float *restrict y,
                                   int64_t n)
{
    switch (op) {
    case RLX_OP_ADD:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j] + b[j];
        break;
    case RLX_OP_SUB:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j] - b[j];
        break;
    case RLX_OP_MUL:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j] * b[j];
        break;
    case RLX_OP_DIV:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j] / b[j];
        break;
    case RLX_OP_MAX:
        for (int64_t j = 0; j < n; j++)
            y[j] = ((a[j] != a[j]) | (b[j] != b[j])) ? NAN : (a[j] > b[j] ? a[j] : b[j]);
        break;
    case RLX_OP_MIN:
        for (int64_t j = 0; j < n; j++)
            y[j] = ((a[j] != a[j]) | (b[j] != b[j])) ? NAN : (a[j] < b[j] ? a[j] : b[j]);
        break;
    case RLX_OP_RELU:
        for (int64_t j = 0; j < n; j++)
            y[j] = a[j] > 0 ? a[j] : (a[j] != a[j] ? a[j] : 0.0f);
        break;
    case RLX_OP_NEG:
        for (int64_t j = 0; j < n; j++)
            y[j] = -a[j];
        break;
    case RLX_OP_ABS:
        for (int64_t j = 0; j < n; j++)
            y[j] = fabsf(a[j]);
        break;
    case RLX_OP_POW:
        if (all_two(b, n)) {
            for (int64_t j = 0; j < n; j++)
                y[j] = a[j] * a[j];
            break;
        }
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)rlx_binary_f64(op, a[j], b[j], 0);
        break;
    default:
        if (rlx_op_is_unary(op))
            rlx_cpu_unary_f32(op, a, y, n);
        else
            for (int64_t j = 0; j < n; j++)
                y[j] = (float)rlx_binary_f64(op, a[j], b[j], 0);
    }
}
RLX_VEC_END

/* x * clamp(x + c0, c1, c2) / c3, the ONNX importer's hard-swish, in one
 * pass (five passes over a block took 2 ns per value on PaddleOCR's
 * classifier); each step rounds as the chain's own step would, and max and
 * min give NaN as ew_step_f32's do, so the values are the same bits. */
RLX_VEC_BEGIN
RLX_CLONES static void ew_hard_swish_f32(const float *x, const float *c, float *y, int64_t n)
{
    const float c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
    if (c1 != c1 || c2 != c2) { /* the clamp gives NaN (tested apart: the loop below then vectorises) */
        for (int64_t j = 0; j < n; j++)
            y[j] = x[j] * NAN / c3;
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        float v = x[j] + c0;
        v = v != v ? NAN : (v > c1 ? v : c1);
        v = v != v ? NAN : (v < c2 ? v : c2);
        y[j] = x[j] * v / c3;
    }
}
RLX_VEC_END

/* A chain's program decoded once per run: each instruction's op and
 * operand registers (a unary op reads a twice); hswish_x >= 0: the
 * program is hard-swish of that input, hswish_c[] its four constants'
 * registers. */
typedef struct ew_prog {
    int nin, nops;
    rlx_op op[RLX_EW_MAX_OPS];
    uint8_t a[RLX_EW_MAX_OPS], b[RLX_EW_MAX_OPS];
    int hswish_x, hswish_c[4];
} ew_prog;

/* Register r names one value for every element: a one-element input. */
static bool ew_is_scalar(const rlx_thunk *t, const ew_prog *p, int r)
{
    return r < p->nin && rlx_shape_numel(&t->in_node[r]->shape) == 1;
}

/* The other operand of instruction i when one of them is register r. */
static int ew_other(const ew_prog *p, int i, int r) { return p->a[i] == r ? p->b[i] : p->b[i] == r ? p->a[i] : -1; }

/* Whether the program is add(x, c0), max(., c1), min(., c2), mul(x, .),
 * div(., c3) with x a full input and c0..c3 one-element inputs. */
static void ew_match_hard_swish(const rlx_thunk *t, ew_prog *p)
{
    static const rlx_op ops[5] = {RLX_OP_ADD, RLX_OP_MAX, RLX_OP_MIN, RLX_OP_MUL, RLX_OP_DIV};
    p->hswish_x = -1;
    if (p->nops != 5)
        return;
    for (int i = 0; i < 5; i++)
        if (p->op[i] != ops[i])
            return;
    int x = ew_is_scalar(t, p, p->a[0]) ? p->b[0] : p->a[0], r = p->nin;
    if (x >= p->nin || ew_is_scalar(t, p, x) || !rlx_shape_equal(&t->in_node[x]->shape, &t->node->shape))
        return;
    int c[4] = {ew_other(p, 0, x), p->a[1] == r ? p->b[1] : -1, p->a[2] == r + 1 ? p->b[2] : -1,
                p->a[4] == r + 3 ? p->b[4] : -1};
    if (ew_other(p, 3, r + 2) != x)
        return;
    for (int k = 0; k < 4; k++)
        if (c[k] < 0 || !ew_is_scalar(t, p, c[k]))
            return;
    p->hswish_x = x;
    memcpy(p->hswish_c, c, sizeof c);
}

static void ew_decode(const rlx_thunk *t, ew_prog *p)
{
    const rlx_node_data *n = t->node;
    p->nin = n->n_in;
    p->nops = n->attrs.ew.n_ops;
    for (int i = 0; i < p->nops; i++) {
        const uint8_t *c = &n->attrs.ew.code[3 * i];
        p->op[i] = (rlx_op)c[0];
        p->a[i] = c[1];
        p->b[i] = rlx_op_is_unary(p->op[i]) ? c[1] : c[2];
    }
    ew_match_hard_swish(t, p);
}

/* One worker's registers.  A broadcast input's register is filled once and
 * kept while the value it repeats stays the same (filled[k]): refilled for
 * every block, the fills of a chain's scalars took most of its time.  The
 * last block's inputs and length (last[], last_n; -1: none yet): an
 * instruction whose operands are the same as then still holds its values
 * (an SE gate's hard-sigmoid of a per-channel operand ran for every row). */
typedef struct ew_regs {
    float v[RLX_MAX_INPUTS + RLX_EW_MAX_OPS][EW_BLOCK];
    const float *filled[RLX_MAX_INPUTS];
    const float *last[RLX_MAX_INPUTS];
    int64_t last_n;
} ew_regs;

static void ew_regs_init(ew_regs *rg)
{
    memset(rg->filled, 0, sizeof rg->filled);
    rg->last_n = -1;
}

/* n values of the chain into out: src[k] points at input k's values
 * (stride inner[k]: 1, 0 for a broadcast value, or a transposed stride);
 * bit k of `moved`: input k's values changed though src[k] did not. */
static void ew_block_f32(const ew_prog *p, const float *const *src, const int64_t *inner, int64_t n, float *out,
                         ew_regs *rg, uint32_t moved)
{
    const float *r[RLX_MAX_INPUTS + RLX_EW_MAX_OPS];
    if (p->hswish_x >= 0 && inner[p->hswish_x] == 1) {
        float c[4];
        for (int k = 0; k < 4; k++)
            c[k] = src[p->hswish_c[k]][0];
        ew_hard_swish_f32(src[p->hswish_x], c, out, n);
        return;
    }
    for (int k = 0; k < p->nin; k++) {
        r[k] = rg->v[k];
        if (inner[k] == 1) {
            r[k] = src[k];
        } else if (inner[k] == 0) {
            if (rg->filled[k] != src[k])
                for (int64_t j = 0; j < EW_BLOCK; j++)
                    rg->v[k][j] = src[k][0];
            rg->filled[k] = src[k];
        } else {
            for (int64_t j = 0; j < n; j++)
                rg->v[k][j] = src[k][j * inner[k]];
        }
    }
    bool same[RLX_MAX_INPUTS + RLX_EW_MAX_OPS];
    for (int k = 0; k < p->nin; k++) {
        same[k] = n == rg->last_n && src[k] == rg->last[k] && !(moved >> k & 1);
        rg->last[k] = src[k];
    }
    rg->last_n = n;
    int last = p->nin + p->nops - 1;
    for (int i = 0; i < p->nops; i++) {
        same[p->nin + i] = same[p->a[i]] && same[p->b[i]];
        if (!same[p->nin + i])
            ew_step_f32(p->op[i], r[p->a[i]], r[p->b[i]], rg->v[p->nin + i], n);
        r[p->nin + i] = rg->v[p->nin + i];
    }
    /* through a register, not into out directly: out may be an input's buffer */
    memcpy(out, r[last], (size_t)n * sizeof(float));
}

/* Rows shorter than half a block (channels-last chains with a per-channel
 * operand: rows of C values) go several rows to a block; per row, the
 * block's overhead took most of the chain.  An input is dense across rows,
 * the same for every row (its block tiled once), or gathered row by row. */
enum { EW_DENSE, EW_FIXED, EW_GATHER };

/* A chain's blocks for the pool; each chunk keeps its own registers. */
typedef struct ew_job {
    const rlx_thunk *t;
    const rlx_row_walk *w;
    const ew_prog *p;
    int64_t rpb, per_row;
    int kind[RLX_MAX_INPUTS];
} ew_job;

static void ew_row_blocks(void *arg, int64_t b0, int64_t b1, int worker)
{
    (void)worker;
    const ew_job *j = arg;
    const rlx_thunk *t = j->t;
    const rlx_row_walk *w = j->w;
    const ew_prog *p = j->p;
    const int64_t rows = w->rows, cols = w->cols, rpb = j->rpb;
    int64_t ones[RLX_MAX_INPUTS];
    for (int k = 0; k < p->nin; k++)
        ones[k] = 1;
    ew_regs rg;
    ew_regs_init(&rg);
    uint32_t gathered = 0; /* registers refilled for every block */
    for (int k = 0; k < p->nin; k++)
        gathered |= (uint32_t)(j->kind[k] == EW_GATHER) << k;
    for (int64_t bl = b0; bl < b1; bl++) {
        int64_t r0 = bl * rpb, nr = rows - r0 < rpb ? rows - r0 : rpb;
        const float *src[RLX_MAX_INPUTS];
        for (int k = 0; k < p->nin; k++) {
            const float *in = (const float *)t->in[k];
            float *v = rg.v[k];
            src[k] = v;
            if (j->kind[k] == EW_DENSE) {
                src[k] = in + r0 * cols;
            } else if (j->kind[k] == EW_FIXED) {
                if (rg.filled[k] != in) { /* one row gathered, then copied: once per chunk */
                    for (int64_t c = 0; c < cols; c++)
                        v[c] = in[c * w->inner[k]];
                    for (int64_t i = 1; i < rpb; i++)
                        memcpy(v + i * cols, v, (size_t)cols * sizeof(float));
                }
                rg.filled[k] = in;
            } else {
                for (int64_t i = 0; i < nr; i++) {
                    const float *row = in + rlx_row_start(w, k, r0 + i);
                    for (int64_t c = 0; c < cols; c++)
                        v[i * cols + c] = row[c * w->inner[k]];
                }
            }
        }
        ew_block_f32(p, src, ones, nr * cols, (float *)t->out + r0 * cols, &rg, gathered);
    }
}

static void ew_rows_f32(const rlx_thunk *t, const rlx_row_walk *w, const ew_prog *p, int threads)
{
    ew_job j = {.t = t, .w = w, .p = p};
    const int64_t rows = w->rows, cols = w->cols, rpb = EW_BLOCK / cols, blocks = (rows + rpb - 1) / rpb;
    for (int k = 0; k < p->nin; k++) {
        bool dense = w->inner[k] == 1, fixed = true;
        int64_t want = cols;
        for (int d = w->outer.ndim - 1; d >= 0; d--) {
            if (w->outer.dims[d] == 1)
                continue;
            dense = dense && w->st[k][d] == want;
            fixed = fixed && w->st[k][d] == 0;
            want *= w->outer.dims[d];
        }
        j.kind[k] = dense ? EW_DENSE : fixed ? EW_FIXED : EW_GATHER;
    }
    j.rpb = rpb;
    if (blocks < threads)
        threads = 1;
    rlx_cpu_parallel(threads, blocks, ew_row_blocks, &j);
}

/* Blocks of EW_BLOCK columns of long rows. */
static void ew_col_blocks(void *arg, int64_t b0, int64_t b1, int worker)
{
    (void)worker;
    const ew_job *j = arg;
    const rlx_thunk *t = j->t;
    const rlx_row_walk *w = j->w;
    int64_t cols = w->cols, per_row = j->per_row;
    ew_regs rg;
    ew_regs_init(&rg);
    for (int64_t bl = b0; bl < b1; bl++) {
        int64_t r = bl / per_row, c0 = bl % per_row * EW_BLOCK;
        int64_t len = cols - c0 < EW_BLOCK ? cols - c0 : EW_BLOCK;
        const float *src[RLX_MAX_INPUTS];
        for (int k = 0; k < j->p->nin; k++)
            src[k] = (const float *)t->in[k] + rlx_row_start(w, k, r) + c0 * w->inner[k];
        ew_block_f32(j->p, src, w->inner, len, (float *)t->out + r * cols + c0, &rg, 0);
    }
}

/* Other dtypes: element by element through double, each step rounded. */
static void ew_any_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const ew_job *j = arg;
    const rlx_thunk *t = j->t;
    const rlx_row_walk *w = j->w;
    const rlx_node_data *n = t->node;
    rlx_dtype dt = n->dtype;
    int nin = n->n_in, nops = n->attrs.ew.n_ops;
    const uint8_t *code = n->attrs.ew.code;
    for (int64_t r = r0; r < r1; r++) {
        int64_t start[RLX_MAX_INPUTS];
        double reg[RLX_MAX_INPUTS + RLX_EW_MAX_OPS];
        for (int k = 0; k < nin; k++)
            start[k] = rlx_row_start(w, k, r);
        for (int64_t c = 0; c < w->cols; c++) {
            for (int k = 0; k < nin; k++) {
                int64_t off = start[k] + c * w->inner[k];
                reg[k] = rlx_load(t->in[k], dt, off);
            }
            for (int i = 0; i < nops; i++) {
                const uint8_t *ins = code + 3 * i;
                rlx_op op = (rlx_op)ins[0];
                double v = rlx_op_is_unary(op) ? rlx_unary_f64(op, reg[ins[1]])
                                               : rlx_binary_f64(op, reg[ins[1]], reg[ins[2]], 0);
                /* each step rounds to the dtype, as the unfused node's store would */
                reg[nin + i] = round_to_dtype(dt, v);
            }
            rlx_store(t->out, dt, r * w->cols + c, reg[nin + nops - 1]);
        }
    }
}

static rlx_status k_elementwise_chain(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    rlx_dtype dt = n->dtype;
    int nin = n->n_in, nops = n->attrs.ew.n_ops;
    const rlx_shape *shapes[RLX_MAX_INPUTS];
    for (int k = 0; k < nin; k++)
        shapes[k] = &t->in_node[k]->shape;
    rlx_row_walk w; /* uncut: the f32 path below spreads blocks of a row over the threads */
    rlx_row_walk_init(&w, &n->shape, nin, shapes, false);
    const int64_t rows = w.rows, cols = w.cols;
    int threads = rlx_cpu_threads(ctx, rows * cols * nops * 4);
    if (dt == RLX_F32) { /* blocks of a row spread over the threads */
        ew_prog prog;
        ew_decode(t, &prog);
        if (cols > 0 && cols < EW_BLOCK / 2 && rows > 1) {
            ew_rows_f32(t, &w, &prog, threads);
            return RLX_OK;
        }
        int64_t per_row = (cols + EW_BLOCK - 1) / EW_BLOCK, blocks = rows * per_row;
        if (blocks < threads)
            threads = 1;
        ew_job j = {.t = t, .w = &w, .p = &prog, .per_row = per_row};
        rlx_cpu_parallel(threads, blocks, ew_col_blocks, &j);
        return RLX_OK;
    }
    if (rows < threads)
        threads = 1;
    ew_job j = {.t = t, .w = &w};
    rlx_cpu_parallel(threads, rows, ew_any_rows, &j);
    return RLX_OK;
}

/* ---------------------------------------------- softmax(x * scale + mask) */

/* x[o] * scale + mask (bool false: -inf), the mask read through broadcast strides. */
static inline double sm_value(const rlx_thunk *t, int64_t o, double scale, const void *mask, rlx_dtype mt,
                              const int64_t *mst)
{
    double v = rlx_load(t->in[0], t->in_node[0]->dtype, o) * scale;
    if (mask) {
        int64_t mo = rlx_bcast_offset(o, &t->in_node[0]->shape, mst);
        if (mt == RLX_BOOL)
            v = ((const uint8_t *)mask)[mo] ? v : -INFINITY;
        else
            v += rlx_load(mask, mt, mo);
    }
    return v;
}

typedef struct sm_job {
    const rlx_thunk *t;
    int64_t len, inner;
    double scale;
    const void *mask;
    rlx_dtype mt;
    int64_t mst[RLX_MAX_DIMS];
} sm_job;

static void sm_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const sm_job *j = arg;
    const rlx_thunk *t = j->t;
    rlx_dtype dt = t->in_node[0]->dtype, mt = j->mt;
    int64_t len = j->len, inner = j->inner;
    double scale = j->scale;
    const void *mask = j->mask;
    const int64_t *mst = j->mst;
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = (r / inner) * len * inner + (r % inner);
        double m = -INFINITY, sum = 0;
        int nan = 0;
        for (int64_t i = 0; i < len; i++) {
            double v = sm_value(t, base + i * inner, scale, mask, mt, mst);
            nan |= v != v;
            m = v > m ? v : m;
        }
        if (nan)
            m = NAN;
        for (int64_t i = 0; i < len; i++)
            sum += exp(sm_value(t, base + i * inner, scale, mask, mt, mst) - m);
        double inv = 1.0 / sum;
        for (int64_t i = 0; i < len; i++)
            rlx_store(t->out, dt, base + i * inner, exp(sm_value(t, base + i * inner, scale, mask, mt, mst) - m) * inv);
    }
}

static rlx_status k_softmax_scale_mask(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node, *xn = t->in_node[0];
    int axis = n->attrs.sm.axis;
    double scale = n->attrs.sm.scale;
    int64_t outer = 1, len = xn->shape.dims[axis], inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= xn->shape.dims[d];
    for (int d = axis + 1; d < xn->shape.ndim; d++)
        inner *= xn->shape.dims[d];
    int64_t rows = outer * inner;
    if (rows == 0 || len == 0)
        return RLX_OK;
    const void *mask = n->attrs.sm.has_mask ? t->in[1] : NULL;
    sm_job j = {
        .t = t, .len = len, .inner = inner, .scale = scale, .mask = mask, .mt = mask ? t->in_node[1]->dtype : RLX_F32};
    if (mask)
        rlx_shape_broadcast_strides(&t->in_node[1]->shape, &xn->shape, j.mst);
    int threads = rlx_cpu_threads(ctx, rows * len * 8);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, sm_rows, &j);
    return RLX_OK;
}

/* qkv_heads: each head vector of the projection rows, normalised and
 * rotated in double (rounded once, at the store), written to its place in
 * the q, k or v part of the output. */
typedef struct qkv_job {
    const rlx_thunk *t;
    int64_t B, S, H, Hk, D;
    const void *aux[5]; /* by rlx_qkv_heads_input's numbering; NULL: absent */
    rlx_dtype aux_dt[5];
    int64_t table_b[3]; /* cos's and sin's stride between sequences: 0 when shared */
} qkv_job;

static void qkv_vectors(void *arg, int64_t v0, int64_t v1, int worker)
{
    (void)worker;
    const qkv_job *j = arg;
    const rlx_attrs *a = &j->t->node->attrs;
    const rlx_dtype dt = j->t->node->dtype;
    const int64_t S = j->S, H = j->H, Hk = j->Hk, D = j->D, half = D / 2, heads = H + 2 * Hk;
    const int64_t stride_a = a->qkv.rope_interleaved ? 2 : 1, off_b = a->qkv.rope_interleaved ? 1 : half;
    double v[512];
    float f[512];
    const size_t es = rlx_dtype_size(dt);
    for (int64_t w = v0; w < v1; w++) {
        const int64_t row = w / heads, hh = w % heads, b = row / S, s = row % S;
        const int part = hh < H ? 0 : hh < H + Hk ? 1 : 2;
        const int64_t j0 = part == 0 ? hh : part == 1 ? hh - H : hh - H - Hk, nh = part == 0 ? H : Hk;
        const int64_t base = (part == 0 ? 0 : j->B * H * S * D) + (part == 2 ? j->B * Hk * S * D : 0);
        const int64_t out = base + ((b * nh + j0) * S + s) * D, in = w * D;
        if (dt == RLX_F64) {
            memcpy(v, (const double *)j->t->in[0] + in, (size_t)D * sizeof *v);
        } else { /* through the vectorised conversions, then widened */
            rlx_cpu_to_f32(f, (const char *)j->t->in[0] + in * (int64_t)es, dt, D);
            for (int64_t i = 0; i < D; i++)
                v[i] = f[i];
        }
        const void *gamma = part < 2 ? j->aux[3 + part] : NULL;
        if (gamma) {
            double ss = 0;
            for (int64_t i = 0; i < D; i++)
                ss += v[i] * v[i];
            const double inv = 1.0 / sqrt(ss / (double)D + a->qkv.norm_eps);
            for (int64_t i = 0; i < D; i++)
                v[i] = v[i] * inv * rlx_load(gamma, j->aux_dt[3 + part], i);
        }
        if (part < 2 && j->aux[1]) {
            const int64_t ac = (b * j->table_b[1] + s) * half, as = (b * j->table_b[2] + s) * half;
            for (int64_t i = 0; i < half; i++) {
                const int64_t ia = i * stride_a, ib = ia + off_b;
                const double c = rlx_load(j->aux[1], j->aux_dt[1], ac + i),
                             sn = rlx_load(j->aux[2], j->aux_dt[2], as + i);
                const double x1 = v[ia], x2 = v[ib];
                v[ia] = x1 * c - x2 * sn;
                v[ib] = x2 * c + x1 * sn;
            }
        }
        if (dt == RLX_F64) {
            memcpy((double *)j->t->out + out, v, (size_t)D * sizeof *v);
        } else {
            for (int64_t i = 0; i < D; i++)
                f[i] = (float)v[i];
            rlx_cpu_from_f32((char *)j->t->out + out * (int64_t)es, dt, f, D);
        }
    }
}

static rlx_status k_qkv_heads(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    qkv_job j = {.t = t,
                 .B = x->shape.dims[0],
                 .S = x->shape.dims[1],
                 .H = n->attrs.qkv.heads,
                 .Hk = n->attrs.qkv.kv_heads,
                 .D = n->attrs.qkv.head_dim};
    if (j.D > 512)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "qkv_heads: head dim %lld is over 512", (long long)j.D);
    for (int i = 1; i <= 4; i++) {
        int k = rlx_qkv_heads_input(n, i);
        j.aux[i] = k >= 0 ? t->in[k] : NULL;
        j.aux_dt[i] = k >= 0 ? t->in_node[k]->dtype : RLX_F32;
        if (i <= 2 && k >= 0)
            j.table_b[i] = t->in_node[k]->shape.dims[0] == 1 ? 0 : j.S;
    }
    const int64_t vectors = j.B * j.S * (j.H + 2 * j.Hk);
    if (!vectors)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, vectors * j.D * 8);
    if (vectors < threads)
        threads = 1;
    rlx_cpu_parallel(threads, vectors, qkv_vectors, &j);
    return RLX_OK;
}

/* glu: act(gate) * up per element of each row [gate | up]; in double for
 * f64, else in f32 through the vectorised activations, in pieces of 256. */
typedef struct glu_job {
    const rlx_thunk *t;
    int64_t F;
    int op;
} glu_job;

static void glu_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const glu_job *j = arg;
    const rlx_dtype dt = j->t->node->dtype;
    const void *x = j->t->in[0];
    void *y = j->t->out;
    const int64_t F = j->F;
    float g[256], u[256];
    for (int64_t r = r0; r < r1; r++)
        for (int64_t c0 = 0; c0 < F; c0 += 256) {
            const int64_t n = F - c0 < 256 ? F - c0 : 256, at = r * 2 * F + c0;
            if (dt == RLX_F64) {
                const double *xd = x;
                for (int64_t c = 0; c < n; c++)
                    ((double *)y)[r * F + c0 + c] = rlx_unary_f64(j->op, xd[at + c]) * xd[at + F + c];
                continue;
            }
            rlx_cpu_to_f32(g, (const char *)x + at * (int64_t)rlx_dtype_size(dt), dt, n);
            rlx_cpu_to_f32(u, (const char *)x + (at + F) * (int64_t)rlx_dtype_size(dt), dt, n);
            rlx_cpu_unary_f32((rlx_op)j->op, g, g, n);
            for (int64_t c = 0; c < n; c++)
                g[c] *= u[c];
            rlx_cpu_from_f32((char *)y + (r * F + c0) * (int64_t)rlx_dtype_size(dt), dt, g, n);
        }
}

static rlx_status k_glu(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_shape *xs = &t->in_node[0]->shape;
    glu_job j = {.t = t, .F = xs->dims[xs->ndim - 1] / 2, .op = rlx_act_op((rlx_act)t->node->attrs.glu.act)};
    const int64_t rows = j.F ? rlx_shape_numel(xs) / (2 * j.F) : 0;
    if (!rows)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, rows * j.F * 8);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, glu_rows, &j);
    return RLX_OK;
}

/* ------------------------------------------------------------ projection */

/* pre(x) @ w^T, then glu, then + r (ir.h): the rows (normalised) and the
 * product in f32 (f64 for f64), each stage rounded to the node's dtype
 * where the unfused ops would store it, so the CPU's fused and unfused
 * graphs agree. */
static size_t proj_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    const rlx_node_data *w = NODE_IN(g, n, 1);
    const int64_t K = w->shape.dims[1], M = rlx_projection_rows(NODE_IN(g, n, 0));
    const size_t es = n->dtype == RLX_F64 ? sizeof(double) : sizeof(float);
    return round64((size_t)(M * K) * es) + round64((size_t)(M * w->shape.dims[0]) * es) +
           (n->dtype == RLX_F64 ? 0 : f32_copy_bytes(w));
}

/* x's rows into A as f32 (f64), RMS-normalised as rms_norm stores them
 * when gamma is given. */
static void proj_rows(const rlx_thunk *t, const void *gamma, int64_t M, int64_t K, void *A)
{
    const rlx_dtype dt = t->node->dtype;
    const bool f64 = dt == RLX_F64;
    for (int64_t r = 0; r < M; r++) {
        if (f64)
            memcpy((double *)A + r * K, (const double *)t->in[0] + r * K, (size_t)K * sizeof(double));
        else
            rlx_cpu_to_f32((float *)A + r * K, (const char *)t->in[0] + (size_t)(r * K) * rlx_dtype_size(dt), dt, K);
        if (!gamma)
            continue;
        if (dt == RLX_F32) { /* the norm kernel's own row, so that the unfused rms_norm gives the same bits */
            rlx_cpu_norm_row_f32((float *)A + r * K, (float *)A + r * K, gamma, NULL, K, 0, t->node->attrs.proj.eps);
            continue;
        }
        double ss = 0;
        for (int64_t i = 0; i < K; i++) {
            const double v = f64 ? ((double *)A)[r * K + i] : ((float *)A)[r * K + i];
            ss += v * v;
        }
        const double inv = 1.0 / sqrt(ss / (double)K + t->node->attrs.proj.eps);
        for (int64_t i = 0; i < K; i++) {
            if (f64)
                ((double *)A)[r * K + i] *= inv * ((const double *)gamma)[i];
            else
                ((float *)A)[r * K + i] =
                    (float)round_to_dtype(dt, ((float *)A)[r * K + i] * inv * rlx_load(gamma, dt, i));
        }
    }
}

/* Claimed for a decode step's few rows, where it saves the norm's and the
 * add's passes over the activations; a prompt's many rows keep their
 * threaded norm kernels (add_rms_norm_keep) and the product alone.  A
 * quantized weight keeps its qmatmul (the integer dot kernels). */
static bool proj_claims(const rlx_graph *g, const rlx_node_data *n)
{
    return !n->attrs.proj.quant && rlx_projection_rows(NODE_IN(g, n, 0)) <= RLX_PROJ_FEW_ROWS;
}

static rlx_status k_projection(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    const rlx_dtype dt = n->dtype;
    const bool f64 = dt == RLX_F64, f32 = dt == RLX_F32, glu = n->attrs.proj.glu != RLX_ACT_NONE;
    const size_t es = f64 ? sizeof(double) : sizeof(float);
    const int64_t Nw = t->in_node[1]->shape.dims[0], K = t->in_node[1]->shape.dims[1];
    const int64_t M = rlx_projection_rows(t->in_node[0]), N = glu ? Nw / 2 : Nw;
    if (!M || !Nw)
        return RLX_OK;
    int k = 2;
    const void *gamma = n->attrs.proj.pre == RLX_PROJ_RMS_NORM ? t->in[k++] : NULL;
    const void *res = n->attrs.proj.has_res ? t->in[k] : NULL;
    bump b = {t->scratch};
    void *A = take(&b, (size_t)(M * K) * es), *C = take(&b, (size_t)(M * Nw) * es);
    if ((f32 || f64) && !glu)
        C = t->out; /* the product is the result (then + r) */
    proj_rows(t, gamma, M, K, A);
    if (f64)
        rlx_dgemm(0, 1, M, Nw, K, 1.0, A, K, t->in[1], K, 0.0, C, Nw, ctx->threads, ctx->settings);
    else
        rlx_cpu_product_f32(1, M, Nw, K, A, as_f32(t, 1, &b), K, C, ctx->threads, ctx->settings);
    if (f32) { /* the gated unit through the vectorised activations */
        float *c = C, *y = t->out;
        for (int64_t r = 0; r < M && glu; r++) {
            float *cr = c + r * Nw;
            rlx_cpu_unary_f32(rlx_act_op((rlx_act)n->attrs.proj.glu), cr, cr, N);
            for (int64_t j = 0; j < N; j++)
                y[r * N + j] = cr[j] * cr[N + j];
        }
        for (int64_t i = 0; res && i < M * N; i++)
            y[i] += ((const float *)res)[i];
        return RLX_OK;
    }
    /* other dtypes: the product as stored, the gated unit, the residual */
    for (int64_t r = 0; r < M; r++)
        for (int64_t j = 0; j < N; j++) {
            const int64_t at = r * Nw + j;
            double v = round_to_dtype(dt, f64 ? ((double *)C)[at] : ((float *)C)[at]);
            if (glu) {
                const double up = round_to_dtype(dt, f64 ? ((double *)C)[at + N] : ((float *)C)[at + N]);
                v = round_to_dtype(dt, round_to_dtype(dt, rlx_act_f64(n->attrs.proj.glu, v)) * up);
            }
            if (res)
                v += rlx_load(res, dt, r * N + j);
            if (f64)
                ((double *)t->out)[r * N + j] = v;
            else
                rlx_store(t->out, dt, r * N + j, v);
        }
    return RLX_OK;
}

void rlx_cpu_register_fused(rlx_cpu_kernel *table)
{
    table[RLX_OP_BATCH_NORM].fn = k_batch_norm;
    table[RLX_OP_MATMUL_BIAS_ACT] = (rlx_cpu_kernel){.fn = k_matmul_bias_act,
                                                     .scratch = mm_act_scratch,
                                                     .prepare = rlx_cpu_matmul_dnnl_prepare,
                                                     .release = rlx_cpu_matmul_dnnl_release};
    table[RLX_OP_ADD_LAYER_NORM].fn = k_add_norm;
    table[RLX_OP_ADD_RMS_NORM].fn = k_add_norm;
    table[RLX_OP_ADD_RMS_NORM_KEEP].fn = k_add_norm;
    table[RLX_OP_SWIGLU] = (rlx_cpu_kernel){.fn = k_swiglu, .scratch = swiglu_scratch};
    table[RLX_OP_ATTENTION_BLOCK] =
        (rlx_cpu_kernel){.fn = k_attention_block, .scratch = attn_block_scratch, .prepare = attn_block_prepare};
    table[RLX_OP_ELEMENTWISE_CHAIN].fn = k_elementwise_chain;
    table[RLX_OP_SOFTMAX_SCALE_MASK].fn = k_softmax_scale_mask;
    table[RLX_OP_QKV_HEADS].fn = k_qkv_heads;
    table[RLX_OP_GLU].fn = k_glu;
    table[RLX_OP_PROJECTION] = (rlx_cpu_kernel){.fn = k_projection, .scratch = proj_scratch, .claims = proj_claims};
}
