/* kernels_nn.c - neural-network kernels: rotary position embedding,
 * scaled-dot-product attention, max/average pooling and global average
 * pooling (convolution: kernels_conv.c).
 *
 * Workspace comes from t->scratch, sized by each kernel's scratch callback
 * for the run's thread count; the RoPE table is made once at prepare
 * (t->state); nothing is allocated while running. */
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_window.h"

#ifdef RLX_HAVE_WIDE
#include <immintrin.h>
#endif

static size_t round64(size_t b) { return (b + 63) / 64 * 64; }

/* ------------------------------------------------------------------ rope */

rlx_status rlx_cpu_rope_state(rlx_thunk *t, int64_t S, int64_t D, double theta, int64_t offset)
{
    size_t bytes = (size_t)(S * (D / 2)) * 2 * sizeof(double);
    if (!bytes)
        return RLX_OK;
    double *tab = rlx_malloc(bytes);
    if (!tab)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "no memory for a RoPE table of %zu bytes", bytes);
    rlx_rope_table(tab, S, D, theta, offset);
    t->state = tab;
    return RLX_OK;
}

static rlx_status rope_prepare(const rlx_graph *g, rlx_thunk *t)
{
    if (t->node->n_in == 3)
        return RLX_OK; /* the tables are inputs */
    const rlx_shape *s = &IN_NODE(g, t->node, 0)->shape;
    return rlx_cpu_rope_state(t, s->dims[s->ndim - 2], s->dims[s->ndim - 1], t->node->attrs.rope.theta,
                              t->node->attrs.rope.offset);
}

/* RoPE with cos and sin tables as inputs: each row of x (all axes but the
 * last) reads the table row its indices broadcast to. */
static void rope_tables_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    int r = xn->shape.ndim;
    int64_t D = xn->shape.dims[r - 1], half = D / 2, rows = rlx_shape_numel(&xn->shape) / (D ? D : 1);
    if (!rows || !D)
        return;
    rlx_shape want = xn->shape;
    want.dims[r - 1] = half;
    int64_t cst[RLX_MAX_DIMS], sst[RLX_MAX_DIMS];
    rlx_shape_broadcast_strides(&t->in_node[1]->shape, &want, cst);
    rlx_shape_broadcast_strides(&t->in_node[2]->shape, &want, sst);
    rlx_dtype ct = t->in_node[1]->dtype, stt = t->in_node[2]->dtype;
    int inter = t->node->attrs.rope.interleaved;
    int64_t stride_a = inter ? 2 : 1, off_b = inter ? 1 : half;
    for (int64_t row = begin; row < end; row++) {
        int64_t co = 0, so = 0, rem = row;
        for (int d = r - 2; d >= 0; d--) {
            int64_t i = rem % xn->shape.dims[d];
            rem /= xn->shape.dims[d];
            co += i * cst[d];
            so += i * sst[d];
        }
        for (int64_t i = 0; i < half; i++) {
            int64_t ia = row * D + i * stride_a, ib = ia + off_b;
            double x1 = rlx_load(t->in[0], dt, ia), x2 = rlx_load(t->in[0], dt, ib);
            double c = rlx_load(t->in[1], ct, co + i), sn = rlx_load(t->in[2], stt, so + i);
            rlx_store(t->out, dt, ia, x1 * c - x2 * sn);
            rlx_store(t->out, dt, ib, x2 * c + x1 * sn);
        }
    }
}

static rlx_status k_rope_tables(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int r = xn->shape.ndim;
    int64_t D = xn->shape.dims[r - 1], rows = rlx_shape_numel(&xn->shape) / (D ? D : 1);
    if (!rows || !D)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, rows * D * 4);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, rope_tables_rows, (void *)t);
    return RLX_OK;
}

static void rope_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    int r = xn->shape.ndim;
    int64_t S = xn->shape.dims[r - 2], D = xn->shape.dims[r - 1], half = D / 2;
    int64_t total = rlx_shape_numel(&xn->shape);
    if (total == 0)
        return;
    int inter = t->node->attrs.rope.interleaved;
    const double *tab = (const double *)t->state; /* [S][half][cos, sin], from rope_prepare */

    /* element offsets of the two members of pair i */
    int64_t stride_a = inter ? 2 : 1, off_b = inter ? 1 : half;
    for (int64_t rs = begin; rs < end; rs++) {
        int64_t s = rs % S, base = rs * D;
        const double *cs = tab + s * half * 2;
        if (dt == RLX_F32) {
            const float *x = (const float *)t->in[0] + base;
            float *y = (float *)t->out + base;
            for (int64_t i = 0; i < half; i++) {
                int64_t ia = i * stride_a, ib = ia + off_b;
                double x1 = x[ia], x2 = x[ib], c = cs[2 * i], sn = cs[2 * i + 1];
                y[ia] = (float)(x1 * c - x2 * sn);
                y[ib] = (float)(x2 * c + x1 * sn);
            }
        } else {
            for (int64_t i = 0; i < half; i++) {
                int64_t ia = base + i * stride_a, ib = ia + off_b;
                double x1 = rlx_load(t->in[0], dt, ia), x2 = rlx_load(t->in[0], dt, ib);
                double c = cs[2 * i], sn = cs[2 * i + 1];
                rlx_store(t->out, dt, ia, x1 * c - x2 * sn);
                rlx_store(t->out, dt, ib, x2 * c + x1 * sn);
            }
        }
    }
}

static rlx_status k_rope(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    if (t->node->n_in == 3)
        return k_rope_tables(t, ctx);
    const rlx_node_data *xn = t->in_node[0];
    int r = xn->shape.ndim;
    int64_t S = xn->shape.dims[r - 2], D = xn->shape.dims[r - 1];
    int64_t total = rlx_shape_numel(&xn->shape);
    if (total == 0)
        return RLX_OK;
    int64_t rows = total / (S * D);
    int threads = rlx_cpu_threads(ctx, total * 4);
    if (rows * S < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows * S, rope_rows, (void *)t);
    return RLX_OK;
}

/* ------------------------------------------------------------- attention */

/* softmax(scale * q k^T + mask) v per (batch, head, query), keys causal-cut
 * at s + (T - S).  A query whose keys are all masked (bool false, -inf, or
 * the causal cut before key 0) gets zeros, not 0/0.  The softmax sum runs
 * in double.
 *
 * f32 runs a tile of up to RLX_ATTN_TILE query rows of a head at a time
 * (rlx_cpu_attn_tile_f32, which the attention block runs too): the scores
 * and the weighted sum as two register-blocked products (AVX-512 builds
 * where the processor has it), queries and values read where they lie,
 * the head's keys transposed once for all its tiles on a thread.  Other
 * types run row by row in their compute type T (double for f64, float for
 * f16/bf16), per head in one block of scratch:
 *   kT [D][T]  keys transposed (so the score loop runs over t, vectorised)
 *   vb [T][Dv] values
 *   qr [D], sc [T], acc [Dv] */
static size_t attn_block_elems(int64_t T, int64_t D, int64_t Dv) { return (size_t)(D * T + T * Dv + D + T + Dv); }

static size_t attn_block_bytes(const rlx_shape *k, const rlx_shape *v, rlx_dtype dt)
{
    if (dt == RLX_F32) /* one tile's scores and keys (a block even without keys) */
        return round64(rlx_cpu_attn_tile_floats(k->dims[2] > 0 ? k->dims[2] : 1, k->dims[3]) * sizeof(float));
    size_t es = dt == RLX_F64 ? sizeof(double) : sizeof(float);
    return round64(attn_block_elems(k->dims[2], k->dims[3], v->dims[3]) * es);
}

static size_t attention_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    const rlx_node_data *q = IN_NODE(g, n, 0);
    /* one block per thread, at most one per work item: at most one per 32
     * rows of a head (see k_attention; an f32 tile is 64 rows) */
    int64_t items = q->shape.dims[0] * q->shape.dims[1] * ((q->shape.dims[2] + 31) / 32);
    int64_t th = threads < 1 ? 1 : threads;
    if (items < th)
        th = items > 0 ? items : 1;
    return (size_t)th * attn_block_bytes(&IN_NODE(g, n, 1)->shape, &IN_NODE(g, n, 2)->shape, q->dtype);
}

typedef struct attn_args {
    const rlx_thunk *t;
    int64_t B, H, S, D, Hk, T, Dv;
    double scale;
    int causal;
    const void *mask;
    rlx_dtype mask_dt;
    int64_t mstr[RLX_MAX_DIMS];
    const void *pos; /* [B]: row s of sequence b at position pos[b] + s (NULL: T - S + s) */
    rlx_dtype pos_dt;
} attn_args;

/* Keys visible to rows up to `last` of sequence b: the causal cut at the
 * row's position, all T without causal. */
static int64_t attn_shift(const attn_args *a, int64_t b)
{
    return a->pos ? rlx_load_i(a->pos, a->pos_dt, b) : a->T - a->S;
}

static int64_t attn_keys(const attn_args *a, int64_t shift, int64_t last)
{
    if (!a->causal)
        return a->T;
    int64_t lim = last + shift;
    return lim < 0 ? 0 : lim + 1 < a->T ? lim + 1 : a->T;
}

/* Keys (or value columns) per register block. */
#define ATTN_JB 16
#define EXP_F64(y, x) ((y) = exp(x))

/* softmax of sc in place, unnormalised; returns the sum of the p_j (in
 * double), 0 with the row zeroed when every key is masked */
#define ATTN_SOFTMAX(NAME, CT, EXPSTMT, ATTR)                                                              \
    ATTR static double NAME(CT *restrict sc, int64_t Te)                                                   \
    {                                                                                                      \
        CT m = -INFINITY; /* a NaN score never wins; it makes the sum NaN */                               \
        _Pragma("omp simd reduction(max : m)") for (int64_t j = 0; j < Te; j++) m = sc[j] > m ? sc[j] : m; \
        if (m == -INFINITY) {                                                                              \
            memset(sc, 0, (size_t)Te * sizeof *sc);                                                        \
            return 0.0;                                                                                    \
        }                                                                                                  \
        double sum = 0;                                                                                    \
        _Pragma("omp simd reduction(+ : sum)") for (int64_t j = 0; j < Te; j++)                            \
        {                                                                                                  \
            CT p;                                                                                          \
            EXPSTMT(p, sc[j] - m);                                                                         \
            sc[j] = p;                                                                                     \
            sum += p;                                                                                      \
        }                                                                                                  \
        return sum;                                                                                        \
    }

#define ATTN_CORE(SFX, CT, EXPSTMT)                                                                                       \
    /* out[jj] = sum_i w[i] base[i * stride + jj] for one register block of                                             \
     * ATTN_JB columns, with two accumulators (even and odd i): twice the                                               \
     * independent multiply-adds in flight of one chain through every i */ \
    RLX_CLONES static void attn_block_##SFX(const CT *restrict w, int64_t n, const CT *restrict base, int64_t stride,     \
                                            CT *restrict out)                                                             \
    {                                                                                                                     \
        CT r[ATTN_JB] = {0}, r2[ATTN_JB] = {0};                                                                           \
        int64_t i = 0;                                                                                                    \
        for (; i + 1 < n; i += 2) {                                                                                       \
            CT wi = w[i], wk = w[i + 1];                                                                                  \
            const CT *restrict bi = base + i * stride, *restrict bk = bi + stride;                                        \
            _Pragma("omp simd") for (int jj = 0; jj < ATTN_JB; jj++)                                                      \
            {                                                                                                             \
                r[jj] += wi * bi[jj];                                                                                     \
                r2[jj] += wk * bk[jj];                                                                                    \
            }                                                                                                             \
        }                                                                                                                 \
        if (i < n) {                                                                                                      \
            CT wi = w[i];                                                                                                 \
            const CT *restrict bi = base + i * stride;                                                                    \
            _Pragma("omp simd") for (int jj = 0; jj < ATTN_JB; jj++) r[jj] += wi * bi[jj];                                \
        }                                                                                                                 \
        for (int jj = 0; jj < ATTN_JB; jj++)                                                                              \
            out[jj] = r[jj] + r2[jj];                                                                                     \
    }                                                                                                                     \
    /* sc[j] = q . k_j for the first Te keys, ATTN_JB keys per register block */                                          \
    RLX_CLONES static void attn_scores_##SFX(const CT *restrict qr, const CT *restrict kT, CT *restrict sc,               \
                                             int64_t Te, int64_t T, int64_t D)                                            \
    {                                                                                                                     \
        int64_t j0 = 0;                                                                                                   \
        for (; j0 + ATTN_JB <= Te; j0 += ATTN_JB)                                                                         \
            attn_block_##SFX(qr, D, kT + j0, T, sc + j0);                                                                 \
        for (int64_t j = j0; j < Te; j++) {                                                                               \
            CT r = 0;                                                                                                     \
            for (int64_t d = 0; d < D; d++)                                                                               \
                r += qr[d] * kT[d * T + j];                                                                               \
            sc[j] = r;                                                                                                    \
        }                                                                                                                 \
    }                                                                                                                     \
    ATTN_SOFTMAX(attn_softmax_##SFX, CT, EXPSTMT, RLX_CLONES)                                                             \
    /* acc [Dv] = sum_j p_j v_j over value rows vb + j * ldv */                                                           \
    RLX_CLONES static void attn_pv_##SFX(const CT *restrict p, int64_t Te, const CT *restrict vb, int64_t ldv,            \
                                         CT *restrict acc, int64_t Dv)                                                    \
    {                                                                                                                     \
        int64_t e0 = 0;                                                                                                   \
        for (; e0 + ATTN_JB <= Dv; e0 += ATTN_JB)                                                                         \
            attn_block_##SFX(p, Te, vb + e0, ldv, acc + e0);                                                              \
        for (int64_t e = e0; e < Dv; e++) {                                                                               \
            CT r = 0;                                                                                                     \
            for (int64_t j = 0; j < Te; j++)                                                                              \
                r += p[j] * vb[j * ldv + e];                                                                              \
            acc[e] = r;                                                                                                   \
        }                                                                                                                 \
    }

/* f64, f16 and bf16: queries [s0, s1) of head bh, row by row; keys and
 * values converted into the compute type in blk first (only the keys some
 * row of the part sees). */
#define ATTN_HEAD(SFX, CT)                                                                       \
    static void attn_head_##SFX(const attn_args *a, int64_t bh, int64_t s0, int64_t s1, CT *blk) \
    {                                                                                            \
        const rlx_thunk *t = a->t;                                                               \
        rlx_dtype dt = t->node->dtype;                                                           \
        int64_t T = a->T, D = a->D, Dv = a->Dv, S = a->S;                                        \
        int64_t b = bh / a->H, h = bh % a->H, hk = h / (a->H / a->Hk);                           \
        CT *kT = blk, *vb = kT + D * T, *qr = vb + T * Dv, *sc = qr + D, *acc = sc + T;          \
        int64_t kbase = (b * a->Hk + hk) * T * D, vbase = (b * a->Hk + hk) * T * Dv;             \
        const int64_t shift = attn_shift(a, b), Tb = attn_keys(a, shift, s1 - 1);                \
        for (int64_t j = 0; j < Tb; j++)                                                         \
            for (int64_t d = 0; d < D; d++)                                                      \
                kT[d * T + j] = (CT)rlx_load(t->in[1], dt, kbase + j * D + d);                   \
        for (int64_t j = 0; j < Tb * Dv; j++)                                                    \
            vb[j] = (CT)rlx_load(t->in[2], dt, vbase + j);                                       \
        for (int64_t s = s0; s < s1; s++) {                                                      \
            int64_t qbase = (bh * S + s) * D, obase = (bh * S + s) * Dv;                         \
            int64_t Te = attn_keys(a, shift, s);                                                 \
            for (int64_t d = 0; d < D; d++)                                                      \
                qr[d] = (CT)(rlx_load(t->in[0], dt, qbase + d) * a->scale);                      \
            attn_scores_##SFX(qr, kT, sc, Te, T, D);                                             \
            /* mask: bool (false drops the key) or float (added) */                              \
            if (a->mask) {                                                                       \
                int64_t mb = b * a->mstr[0] + h * a->mstr[1] + s * a->mstr[2];                   \
                if (a->mask_dt == RLX_BOOL) {                                                    \
                    const uint8_t *mk = (const uint8_t *)a->mask;                                \
                    for (int64_t j = 0; j < Te; j++)                                             \
                        if (!mk[mb + j * a->mstr[3]])                                            \
                            sc[j] = -INFINITY;                                                   \
                } else {                                                                         \
                    for (int64_t j = 0; j < Te; j++)                                             \
                        sc[j] += (CT)rlx_load(a->mask, a->mask_dt, mb + j * a->mstr[3]);         \
                }                                                                                \
            }                                                                                    \
            double sum = attn_softmax_##SFX(sc, Te);                                             \
            attn_pv_##SFX(sc, Te, vb, Dv, acc, Dv);                                              \
            double inv = sum == 0 ? 0.0 : 1.0 / sum; /* every key masked: zeros */               \
            for (int64_t e = 0; e < Dv; e++)                                                     \
                rlx_store(t->out, dt, obase + e, acc[e] * inv);                                  \
        }                                                                                        \
    }

RLX_VEC_BEGIN
ATTN_CORE(f32, float, RLX_EXPF_VEC)
ATTN_CORE(f64, double, EXP_F64)

/* sc[j] = scale (q . k_j) over each key's own row k + j * ldk: for one or
 * two query rows, where a product's call costs more than the scores */
RLX_CLONES static void attn_scores_rows_f32(const float *restrict qr, const float *restrict k, int64_t ldk,
                                            float *restrict sc, int64_t Te, int64_t D, float scale)
{
    for (int64_t j = 0; j < Te; j++) {
        const float *restrict kj = k + j * ldk;
        float r = 0;
        _Pragma("omp simd reduction(+ : r)") for (int64_t d = 0; d < D; d++) r += qr[d] * kj[d];
        sc[j] = scale * r;
    }
}

/* C [M x N] = alpha A [M x K] B [K x N], f32, one thread, rows of A and
 * B and C lda, ldb, ldc apart: ROWS rows of C by two vectors of W columns
 * held in registers at a time, each vector of B read feeding ROWS rows;
 * the rows past a multiple of ROWS one at a time, the columns past a
 * multiple of 2 W one element at a time.  Every element is the same chain
 * of multiply-adds over k in order, whichever part computes it.  The
 * attention tiles' products: too small for a library call's fixed cost
 * (oneDNN's sgemm spent tens of milliseconds in its first calls of a
 * process).  The accumulators are indexed by unrolled constants only and
 * stored by value (a memcpy from their address kept them on the stack),
 * so that they stay in registers. */
#define TILE_PRODUCT(NAME, W, ROWS, ATTR)                                                                    \
    typedef float NAME##_v __attribute__((vector_size(W * 4)));                                              \
    typedef float NAME##_vu __attribute__((vector_size(W * 4), aligned(4))); /* at any float's address */    \
    ATTR static void NAME(int64_t M, int64_t N, int64_t K, const float *restrict A, int64_t lda,             \
                          const float *restrict B, int64_t ldb, float *restrict C, int64_t ldc, float alpha) \
    {                                                                                                        \
        int64_t i = 0;                                                                                       \
        for (; i + ROWS <= M; i += ROWS) {                                                                   \
            const float *restrict a = A + i * lda;                                                           \
            int64_t j = 0;                                                                                   \
            for (; j + 2 * W <= N; j += 2 * W) {                                                             \
                NAME##_v c0[ROWS], c1[ROWS];                                                                 \
                _Pragma("GCC unroll 16") for (int r = 0; r < ROWS; r++) c0[r] = c1[r] = (NAME##_v){0};       \
                for (int64_t k = 0; k < K; k++) {                                                            \
                    const NAME##_v b0 = *(const NAME##_vu *)(B + k * ldb + j);                               \
                    const NAME##_v b1 = *(const NAME##_vu *)(B + k * ldb + j + W);                           \
                    _Pragma("GCC unroll 16") for (int r = 0; r < ROWS; r++)                                  \
                    {                                                                                        \
                        const float x = a[r * lda + k];                                                      \
                        c0[r] += x * b0;                                                                     \
                        c1[r] += x * b1;                                                                     \
                    }                                                                                        \
                }                                                                                            \
                _Pragma("GCC unroll 16") for (int r = 0; r < ROWS; r++)                                      \
                {                                                                                            \
                    *(NAME##_vu *)(C + (i + r) * ldc + j) = c0[r] * alpha;                                   \
                    *(NAME##_vu *)(C + (i + r) * ldc + j + W) = c1[r] * alpha;                               \
                }                                                                                            \
            }                                                                                                \
            for (; j < N; j++)                                                                               \
                for (int64_t r = 0; r < ROWS; r++) {                                                         \
                    float c = 0;                                                                             \
                    for (int64_t k = 0; k < K; k++)                                                          \
                        c += a[r * lda + k] * B[k * ldb + j];                                                \
                    C[(i + r) * ldc + j] = c * alpha;                                                        \
                }                                                                                            \
        }                                                                                                    \
        for (; i < M; i++) {                                                                                 \
            const float *restrict a = A + i * lda;                                                           \
            int64_t j = 0;                                                                                   \
            for (; j + 2 * W <= N; j += 2 * W) {                                                             \
                NAME##_v c0 = {0}, c1 = {0};                                                                 \
                for (int64_t k = 0; k < K; k++) {                                                            \
                    c0 += a[k] * *(const NAME##_vu *)(B + k * ldb + j);                                      \
                    c1 += a[k] * *(const NAME##_vu *)(B + k * ldb + j + W);                                  \
                }                                                                                            \
                *(NAME##_vu *)(C + i * ldc + j) = c0 * alpha;                                                \
                *(NAME##_vu *)(C + i * ldc + j + W) = c1 * alpha;                                            \
            }                                                                                                \
            for (; j < N; j++) {                                                                             \
                float c = 0;                                                                                 \
                for (int64_t k = 0; k < K; k++)                                                              \
                    c += a[k] * B[k * ldb + j];                                                              \
                C[i * ldc + j] = c * alpha;                                                                  \
            }                                                                                                \
        }                                                                                                    \
    }

/* Four rows by 16 columns (eight accumulators of 8 floats); with AVX-512,
 * eight rows by 32 (sixteen of 16 floats): twice the multiply-adds a cycle
 * of the AVX2 build, and each B vector feeds twice the rows. */
TILE_PRODUCT(tile_product_f32, 8, 4, RLX_CLONES)
#ifdef RLX_HAVE_WIDE
TILE_PRODUCT(tile_product_f32_wide, 16, 8, RLX_WIDE)

/* RLX_EXPF_VEC's steps on 16 floats (its constants and operations; a NaN
 * stays NaN through the clamps, which return their second operand when
 * one is NaN, and below RLX_EXPF_LO the result is 0, as there). */
RLX_WIDE static inline __m512 expf_x16(__m512 x)
{
    const __m512 big = _mm512_set1_ps(RLX_EXPF_ROUND), lo = _mm512_set1_ps(RLX_EXPF_LO);
    __m512 xc = _mm512_min_ps(_mm512_set1_ps(RLX_EXPF_HI), _mm512_max_ps(lo, x));
    __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(RLX_EXPF_LOG2E), big), big);
    n = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(n, n, _CMP_ORD_Q), n); /* NaN: keep the conversion defined */
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(RLX_EXPF_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(RLX_EXPF_LN2_LO), r);
    __m512 p = _mm512_set1_ps(RLX_EXPF_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(RLX_EXPF_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(RLX_EXPF_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(RLX_EXPF_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(RLX_EXPF_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(RLX_EXPF_P5));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127)), 23);
    /* x below the range (a hidden key's -inf score): 0, not exp(RLX_EXPF_LO) */
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}

/* attn_softmax_f32 on 16-float vectors, the row's end by a masked load:
 * the loop of the `omp simd` form ran masked and its sum ended in 16
 * scalar adds, a cost on every row of a tile. */
RLX_WIDE static double attn_softmax_f32_wide(float *restrict sc, int64_t Te)
{
    const int64_t full = Te / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (Te - full)) - 1);
    __m512 mv = _mm512_set1_ps(-INFINITY), mv2 = mv; /* two chains: the row is short, latency bounds it */
    int64_t j = 0;
    for (; j + 32 <= full; j += 32) {
        mv = _mm512_max_ps(_mm512_loadu_ps(sc + j), mv); /* a NaN score never wins; it makes the sum NaN */
        mv2 = _mm512_max_ps(_mm512_loadu_ps(sc + j + 16), mv2);
    }
    if (j < full)
        mv = _mm512_max_ps(_mm512_loadu_ps(sc + j), mv);
    if (tail)
        mv2 = _mm512_max_ps(_mm512_mask_loadu_ps(mv2, tail, sc + full), mv2);
    const float m = _mm512_reduce_max_ps(_mm512_max_ps(mv, mv2));
    if (m == -INFINITY) {
        memset(sc, 0, (size_t)Te * sizeof *sc);
        return 0.0;
    }
    const __m512 mb = _mm512_set1_ps(m);
    __m512d s0 = _mm512_setzero_pd(), s1 = s0;
    for (int64_t j = 0; j < Te; j += 16) {
        const __mmask16 k = j < full ? (__mmask16)0xffff : tail;
        __m512 p = _mm512_maskz_mov_ps(k, expf_x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, sc + j), mb)));
        _mm512_mask_storeu_ps(sc + j, k, p);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}
#else
#define tile_product_f32_wide tile_product_f32
#define attn_softmax_f32_wide attn_softmax_f32
#endif
RLX_VEC_END
ATTN_HEAD(f32, float)
ATTN_HEAD(f64, double)

/* Keys row s of the head sees: all T, or up to its position s + shift. */
static int64_t tile_keys(const rlx_attn_head *h, int64_t s)
{
    if (!h->causal)
        return h->T;
    int64_t lim = s + h->shift;
    return lim < 0 ? 0 : lim + 1 < h->T ? lim + 1 : h->T;
}

/* Row s's n scores: the keys past its own hidden, then its mask (bool:
 * false hides the key; otherwise added). */
static void tile_mask_row(const rlx_attn_head *h, int64_t s, float *sc, int64_t n)
{
    const int64_t nr = tile_keys(h, s);
    for (int64_t j = nr; j < n; j++)
        sc[j] = -INFINITY;
    if (!h->mask)
        return;
    const int64_t mb = h->mbase + s * h->mrow;
    if (h->mask_dt == RLX_BOOL) {
        const uint8_t *mk = h->mask;
        for (int64_t j = 0; j < nr; j++)
            if (!mk[mb + j * h->mcol])
                sc[j] = -INFINITY;
    } else {
        for (int64_t j = 0; j < nr; j++)
            sc[j] += (float)rlx_load(h->mask, h->mask_dt, mb + j * h->mcol);
    }
}

/* kT[d][j] = k[j][d] for keys [j0, j1), by blocks of 16 keys: each store
 * of a block fills one run of 16 floats (key by key, the D stores of a key
 * go to D lines T floats apart, and stalled the loop). */
static void transpose_keys(const float *restrict k, int64_t ldk, int64_t j0, int64_t j1, int64_t D, float *restrict kT,
                           int64_t T)
{
    int64_t j = j0;
    for (; j + 16 <= j1; j += 16)
        for (int64_t d = 0; d < D; d++)
            for (int64_t jj = 0; jj < 16; jj++)
                kT[d * T + j + jj] = k[(j + jj) * ldk + d];
    for (; j < j1; j++)
        for (int64_t d = 0; d < D; d++)
            kT[d * T + j] = k[j * ldk + d];
}

void rlx_cpu_attn_tile_f32(const rlx_attn_head *h, int64_t s0, int64_t rows, float *sc, int64_t *keys_done)
{
    const int64_t n = tile_keys(h, s0 + rows - 1), ldo = h->ldo, D = h->D, T = h->T; /* n: the tile's widest row */
    float *o = h->o + s0 * ldo;
    double (*softmax)(float *, int64_t) = h->wide ? attn_softmax_f32_wide : attn_softmax_f32;
    double sum[RLX_ATTN_TILE];
    if (rows <= 2) { /* a decode step's rows: products of key rows (transposing the keys would cost as much) */
        for (int64_t r = 0; r < rows; r++) {
            const int64_t s = s0 + r;
            attn_scores_rows_f32(h->q + s * h->ldq, h->k, h->ldk, sc, n, D, h->scale);
            tile_mask_row(h, s, sc, n);
            sum[r] = softmax(sc, n);
            attn_pv_f32(sc, n, h->v, h->ldv, o + r * ldo, h->Dv);
        }
    } else if (n > 0) {
        /* the head's keys transposed, [D][T]: the first *keys_done are there from an earlier tile */
        float *kT = sc + RLX_ATTN_TILE * T;
        transpose_keys(h->k, h->ldk, *keys_done, n, D, kT, T);
        *keys_done = n > *keys_done ? n : *keys_done;
        void (*product)(int64_t, int64_t, int64_t, const float *, int64_t, const float *, int64_t, float *, int64_t,
                        float) = h->wide ? tile_product_f32_wide : tile_product_f32;
        product(rows, n, D, h->q + s0 * h->ldq, h->ldq, kT, T, sc, n, h->scale);
        for (int64_t r = 0; r < rows; r++) {
            float *pr = sc + r * n;
            tile_mask_row(h, s0 + r, pr, n);
            sum[r] = softmax(pr, n);
        }
        product(rows, h->Dv, n, sc, n, h->v, h->ldv, o, ldo, 1.0f);
    } else {
        for (int64_t r = 0; r < rows; r++)
            sum[r] = 0;
    }
    for (int64_t r = 0; r < rows; r++) {
        double inv = sum[r] == 0 ? 0.0 : 1.0 / sum[r]; /* every key masked: its row is zeros */
        float *orow = o + r * ldo;
        for (int64_t e = 0; e < h->Dv; e++)
            orow[e] = (float)(orow[e] * inv);
    }
}

/* Item it: queries [s0, s1) of head bh (f32: a tile); each worker has its
 * own block of scratch. */
typedef struct attn_job {
    const rlx_thunk *t;
    const attn_args *a;
    int64_t parts, chunk;
    size_t blk;
    bool wide;
} attn_job;

static void attn_items(void *arg, int64_t begin, int64_t end, int worker)
{
    const attn_job *j = arg;
    const attn_args *a = j->a;
    rlx_dtype dt = j->t->node->dtype;
    int64_t key_head = -1, keys_done = 0; /* f32: the key head whose keys the scratch holds transposed */
    for (int64_t it = begin; it < end; it++) {
        int64_t bh = it / j->parts, s0 = it % j->parts * j->chunk;
        int64_t s1 = s0 + j->chunk < a->S ? s0 + j->chunk : a->S;
        if (s0 >= s1)
            continue;
        char *mine = (char *)j->t->scratch + (size_t)worker * j->blk;
        if (dt == RLX_F32) {
            int64_t b = bh / a->H, h = bh % a->H, hk = h / (a->H / a->Hk);
            rlx_attn_head head = {.q = (const float *)j->t->in[0] + bh * a->S * a->D,
                                  .k = (const float *)j->t->in[1] + (b * a->Hk + hk) * a->T * a->D,
                                  .v = (const float *)j->t->in[2] + (b * a->Hk + hk) * a->T * a->Dv,
                                  .o = (float *)j->t->out + bh * a->S * a->Dv,
                                  .ldq = a->D,
                                  .ldk = a->D,
                                  .ldv = a->Dv,
                                  .ldo = a->Dv,
                                  .D = a->D,
                                  .Dv = a->Dv,
                                  .T = a->T,
                                  .scale = (float)a->scale,
                                  .causal = a->causal,
                                  .shift = attn_shift(a, b),
                                  .mask = a->mask,
                                  .mask_dt = a->mask_dt,
                                  .mbase = b * a->mstr[0] + h * a->mstr[1],
                                  .mrow = a->mstr[2],
                                  .mcol = a->mstr[3],
                                  .wide = j->wide};
            if (b * a->Hk + hk != key_head)
                key_head = b * a->Hk + hk, keys_done = 0;
            for (int64_t r0 = s0; r0 < s1; r0 += RLX_ATTN_TILE)
                rlx_cpu_attn_tile_f32(&head, r0, s1 - r0 < RLX_ATTN_TILE ? s1 - r0 : RLX_ATTN_TILE, (float *)mine,
                                      &keys_done);
        } else if (dt == RLX_F64) {
            attn_head_f64(a, bh, s0, s1, (double *)mine);
        } else {
            attn_head_f32(a, bh, s0, s1, (float *)mine);
        }
    }
}

static rlx_status k_attention(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *q = t->in_node[0], *k = t->in_node[1], *v = t->in_node[2];
    attn_args a = {0};
    a.t = t;
    a.B = q->shape.dims[0];
    a.H = q->shape.dims[1];
    a.S = q->shape.dims[2];
    a.D = q->shape.dims[3];
    a.Hk = k->shape.dims[1];
    a.T = k->shape.dims[2];
    a.Dv = v->shape.dims[3];
    a.scale = t->node->attrs.attention.scale;
    a.causal = t->node->attrs.attention.causal;
    if (t->node->attrs.attention.has_mask) {
        const rlx_node_data *m = t->in_node[3];
        rlx_shape full = {4, {a.B, a.H, a.S, a.T}};
        a.mask = t->in[3];
        a.mask_dt = m->dtype;
        rlx_shape_broadcast_strides(&m->shape, &full, a.mstr);
    }
    if (t->node->attrs.attention.has_pos) {
        a.pos = t->in[t->node->n_in - 1];
        a.pos_dt = t->in_node[t->node->n_in - 1]->dtype;
    }
    int64_t BH = a.B * a.H;
    if (BH == 0 || a.S == 0 || a.Dv == 0)
        return RLX_OK;
    size_t blk = attn_block_bytes(&k->shape, &v->shape, q->dtype);
    int64_t slots = blk ? (int64_t)(t->scratch_bytes / blk) : 0;
    if (slots < 1)
        return rlx_cpu_kernel_error(t, "attention scratch of %zu bytes is too small", t->scratch_bytes);
    /* f32: one item per head or per tile of a head's rows (the tiles are
     * the same either way, and the attention block cuts the same ones, so
     * the two give the same bits).
     * Other types: with fewer heads than threads, the queries of a head are
     * split too (each part converts that head's keys and values again:
     * cheap while a part has a few dozen queries). */
    int64_t parts = 1, chunk, want = rlx_cpu_threads(ctx, BH * a.S * a.T * (a.D + a.Dv));
    if (q->dtype == RLX_F32) {
        parts = (a.S + RLX_ATTN_TILE - 1) / RLX_ATTN_TILE / rlx_attn_tiles_per_item(BH, a.S, (int)want);
        chunk = parts > 1 ? RLX_ATTN_TILE : a.S;
    } else {
        if (BH < want) {
            parts = (2 * want + BH - 1) / BH;
            int64_t max_parts = (a.S + 31) / 32;
            parts = parts < max_parts ? parts : max_parts;
            parts = parts < 1 ? 1 : parts;
        }
        chunk = (a.S + parts - 1) / parts;
    }
    int64_t items = BH * parts;
    int64_t threads = want < slots ? want : slots;
    if (threads > items)
        threads = items;
    attn_job j = {.t = t, .a = &a, .parts = parts, .chunk = chunk, .blk = blk, .wide = rlx_cpu_avx512(ctx->settings)};
    rlx_cpu_parallel((int)threads, items, attn_items, &j);
    return RLX_OK;
}

/* ---------------------------------------------------------------- pooling */

/* Max pool: padded cells never win; a window with no cell inside the input
 * (possible only at odd pad/dilation corners) gives -inf.  Average pool
 * divides by the number of cells inside the input, or with
 * count_include_pad by the cells inside the padded extent (cells a ceil-mode
 * window reaches beyond the end pad never count). */
static void pool_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    const rlx_shape *xs = &xn->shape;
    const rlx_pool_params *p = &t->node->attrs.pool.p;
    rlx_dtype dt = xn->dtype;
    int is_max = t->node->op == RLX_OP_MAX_POOL;
    int sp = xs->ndim - 2;
    window2d w = conv_window(xs, &t->node->shape, sp == 2 ? p->kernel[0] : 1, p->kernel[sp - 1], p->stride, p->dilation,
                             p->pads);
    /* end pads (for count_include_pad) */
    int64_t ph_end = sp == 2 ? p->pads[2] : 0, pw_end = sp == 2 ? p->pads[3] : p->pads[1];
    int64_t planes = xs->dims[0] * xs->dims[1], HW = w.H * w.W, rows = planes * w.OH;
    if (rows == 0 || w.OW == 0)
        return;
    for (int64_t row = begin; row < end; row++) {
        int64_t pl = row / w.OH, oh = row % w.OH;
        int64_t h0 = oh * w.sh - w.ph;
        int64_t kh0 = tap_lo(h0, 0, w.dh), kh1 = tap_hi(h0, w.H, w.dh, w.KH);
        int64_t ch = 0;
        if (!is_max && p->count_include_pad)
            ch = tap_hi(h0, w.H + ph_end, w.dh, w.KH) - tap_lo(h0, -w.ph, w.dh);
        for (int64_t ow = 0; ow < w.OW; ow++) {
            int64_t w0 = ow * w.sw - w.pw, kw0 = 0, kw1 = w.KW;
            if (w0 < 0 || w0 + (w.KW - 1) * w.dw >= w.W) { /* window crosses an edge */
                kw0 = tap_lo(w0, 0, w.dw);
                kw1 = tap_hi(w0, w.W, w.dw, w.KW);
            }
            double r;
            if (dt == RLX_F32) {
                const float *x = (const float *)t->in[0];
                int64_t base = pl * HW + w0; /* may be < 0; taps kw0.. are inside */
                if (is_max) {
                    float m = -INFINITY;
                    int nan = 0;
                    for (int64_t kh = kh0; kh < kh1; kh++) {
                        int64_t rb = base + (h0 + kh * w.dh) * w.W;
                        for (int64_t kw = kw0; kw < kw1; kw++) {
                            float v = x[rb + kw * w.dw];
                            nan |= v != v;
                            m = v > m ? v : m;
                        }
                    }
                    r = nan ? NAN : m;
                } else {
                    double acc = 0;
                    for (int64_t kh = kh0; kh < kh1; kh++) {
                        int64_t rb = base + (h0 + kh * w.dh) * w.W;
                        for (int64_t kw = kw0; kw < kw1; kw++)
                            acc += x[rb + kw * w.dw];
                    }
                    r = acc;
                }
            } else {
                double acc = is_max ? -INFINITY : 0.0;
                int nan = 0;
                for (int64_t kh = kh0; kh < kh1; kh++) {
                    int64_t rb = pl * HW + (h0 + kh * w.dh) * w.W + w0;
                    for (int64_t kw = kw0; kw < kw1; kw++) {
                        double v = rlx_load(t->in[0], dt, rb + kw * w.dw);
                        if (is_max) {
                            nan |= v != v;
                            acc = v > acc ? v : acc;
                        } else {
                            acc += v;
                        }
                    }
                }
                r = is_max && nan ? NAN : acc;
            }
            if (!is_max) {
                int64_t count;
                if (p->count_include_pad) {
                    int64_t cw = tap_hi(w0, w.W + pw_end, w.dw, w.KW) - tap_lo(w0, -w.pw, w.dw);
                    count = ch > 0 && cw > 0 ? ch * cw : 0;
                } else {
                    count = (kh1 > kh0 && kw1 > kw0) ? (kh1 - kh0) * (kw1 - kw0) : 0;
                }
                r = count > 0 ? r / (double)count : 0.0;
            }
            int64_t o = row * w.OW + ow;
            if (dt == RLX_F32)
                ((float *)t->out)[o] = (float)r;
            else
                rlx_store(t->out, dt, o, r);
        }
    }
}

/* Channels-last f32 pooling, x [N, H, W, C] -> [N, OH, OW, C]: each output
 * pixel combines its window's pixels as rows of C values (the NCHW kernel's
 * taps per output, 6 ns an output on PaddleOCR's classifier's pool, and the
 * transposes around it, cost more than the convs beside it).  The same
 * values as pool_rows: max gives NaN where a tap is NaN, and average sums
 * in double. */
enum { POOL_CBLK = 256 };

typedef struct pool_nhwc_job {
    const rlx_thunk *t;
    window2d w;
    int64_t C, ph_end, pw_end;
} pool_nhwc_job;

/* Window cells of output pixel (oh, ow) that average pool divides by. */
static int64_t pool_count(const pool_nhwc_job *j, int64_t h0, int64_t w0, int64_t kh0, int64_t kh1, int64_t kw0,
                          int64_t kw1)
{
    const window2d *w = &j->w;
    if (j->t->node->attrs.pool.p.count_include_pad) {
        int64_t ch = tap_hi(h0, w->H + j->ph_end, w->dh, w->KH) - tap_lo(h0, -w->ph, w->dh);
        int64_t cw = tap_hi(w0, w->W + j->pw_end, w->dw, w->KW) - tap_lo(w0, -w->pw, w->dw);
        return ch > 0 && cw > 0 ? ch * cw : 0;
    }
    return (kh1 > kh0 && kw1 > kw0) ? (kh1 - kh0) * (kw1 - kw0) : 0;
}

RLX_VEC_BEGIN
RLX_CLONES static void pool_max_cells(float *restrict m, const float *restrict x, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        m[c] = ((x[c] > m[c]) | (x[c] != x[c])) ? x[c] : m[c]; /* a NaN, once in, stays */
}

RLX_CLONES static void pool_add_cells(double *restrict acc, const float *restrict x, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        acc[c] += x[c];
}
RLX_VEC_END

/* Output rows (n, oh) of a channels-last pool. */
static void pool_nhwc_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const pool_nhwc_job *j = arg;
    const window2d *w = &j->w;
    const int64_t C = j->C;
    const bool is_max = j->t->node->op == RLX_OP_MAX_POOL;
    const float *x = j->t->in[0];
    float *y = j->t->out;
    double acc[POOL_CBLK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t n = r / w->OH, oh = r % w->OH, h0 = oh * w->sh - w->ph;
        int64_t kh0 = tap_lo(h0, 0, w->dh), kh1 = tap_hi(h0, w->H, w->dh, w->KH);
        for (int64_t ow = 0; ow < w->OW; ow++) {
            int64_t w0 = ow * w->sw - w->pw;
            int64_t kw0 = tap_lo(w0, 0, w->dw), kw1 = tap_hi(w0, w->W, w->dw, w->KW);
            float *yp = y + (r * w->OW + ow) * C;
            int64_t count = is_max ? 0 : pool_count(j, h0, w0, kh0, kh1, kw0, kw1);
            for (int64_t c0 = 0; c0 < C; c0 += POOL_CBLK) {
                int64_t nc = C - c0 < POOL_CBLK ? C - c0 : POOL_CBLK;
                if (is_max)
                    for (int64_t c = 0; c < nc; c++)
                        yp[c0 + c] = -INFINITY;
                else
                    memset(acc, 0, sizeof acc);
                for (int64_t kh = kh0; kh < kh1; kh++)
                    for (int64_t kw = kw0; kw < kw1; kw++) {
                        const float *xp = x + ((n * w->H + h0 + kh * w->dh) * w->W + w0 + kw * w->dw) * C + c0;
                        if (is_max)
                            pool_max_cells(yp + c0, xp, nc);
                        else
                            pool_add_cells(acc, xp, nc);
                    }
                for (int64_t c = 0; c < nc; c++)
                    if (is_max)
                        yp[c0 + c] = yp[c0 + c] != yp[c0 + c] ? NAN : yp[c0 + c];
                    else
                        yp[c0 + c] = (float)(count > 0 ? acc[c] / (double)count : 0.0);
            }
        }
    }
}

static void pool_nhwc(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_shape *xs = &t->in_node[0]->shape, *ys = &t->node->shape;
    const rlx_pool_params *p = &t->node->attrs.pool.p;
    /* the NCHW window over [N, C, H, W] views of x and y */
    rlx_shape xc = *xs, yc = *ys;
    xc.dims[1] = xs->dims[3], xc.dims[2] = xs->dims[1], xc.dims[3] = xs->dims[2];
    yc.dims[1] = ys->dims[3], yc.dims[2] = ys->dims[1], yc.dims[3] = ys->dims[2];
    pool_nhwc_job j = {.t = t, .C = xs->dims[3], .ph_end = p->pads[2], .pw_end = p->pads[3]};
    j.w = conv_window(&xc, &yc, p->kernel[0], p->kernel[1], p->stride, p->dilation, p->pads);
    int64_t rows = ys->dims[0] * ys->dims[1];
    if (rows == 0 || j.w.OW == 0 || j.C == 0)
        return;
    int threads = rlx_cpu_threads(ctx, rlx_shape_numel(ys) * j.w.KH * j.w.KW);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, pool_nhwc_rows, &j);
}

/* The pools the CPU runs channels-last: f32, 2 spatial dims. */
bool rlx_cpu_pool_nhwc_claim(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    return (n->op == RLX_OP_MAX_POOL || n->op == RLX_OP_AVG_POOL) && n->dtype == RLX_F32 && n->shape.ndim == 4;
}

static rlx_status k_pool(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    if (t->node->attrs.pool.layout == RLX_LAYOUT_NHWC) {
        pool_nhwc(t, ctx);
        return RLX_OK;
    }
    const rlx_shape *xs = &t->in_node[0]->shape;
    const rlx_pool_params *p = &t->node->attrs.pool.p;
    int sp = xs->ndim - 2;
    window2d w = conv_window(xs, &t->node->shape, sp == 2 ? p->kernel[0] : 1, p->kernel[sp - 1], p->stride, p->dilation,
                             p->pads);
    int64_t rows = xs->dims[0] * xs->dims[1] * w.OH;
    if (rows == 0 || w.OW == 0)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, rows * w.OW * w.KH * w.KW);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, pool_rows, (void *)t);
    return RLX_OK;
}

static void global_avg_planes(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    int64_t planes = xn->shape.dims[0] * xn->shape.dims[1];
    int64_t n = planes ? rlx_shape_numel(&xn->shape) / planes : 0;
    if (planes == 0)
        return;
    for (int64_t pl = begin; pl < end; pl++) {
        double acc = 0;
        if (dt == RLX_F32) {
            const float *x = (const float *)t->in[0] + pl * n;
            for (int64_t i = 0; i < n; i++)
                acc += x[i];
        } else {
            for (int64_t i = 0; i < n; i++)
                acc += rlx_load(t->in[0], dt, pl * n + i);
        }
        rlx_store(t->out, dt, pl, n ? acc / (double)n : NAN);
    }
}

static rlx_status k_global_avg_pool(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int64_t planes = xn->shape.dims[0] * xn->shape.dims[1];
    int64_t n = planes ? rlx_shape_numel(&xn->shape) / planes : 0;
    if (planes == 0)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, planes * n);
    if (planes < threads)
        threads = 1;
    rlx_cpu_parallel(threads, planes, global_avg_planes, (void *)t);
    return RLX_OK;
}

void rlx_cpu_register_nn(rlx_cpu_kernel *table)
{
    table[RLX_OP_ROPE] = (rlx_cpu_kernel){.fn = k_rope, .prepare = rope_prepare};
    table[RLX_OP_ATTENTION] = (rlx_cpu_kernel){.fn = k_attention, .scratch = attention_scratch};
    table[RLX_OP_MAX_POOL].fn = k_pool;
    table[RLX_OP_AVG_POOL].fn = k_pool;
    table[RLX_OP_GLOBAL_AVG_POOL].fn = k_global_avg_pool;
}
