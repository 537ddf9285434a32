/* kernels_int8.c - ONNX's 8-bit integer ops on src/quant/igemm.h's kernels:
 * matmul_integer, and matmul_integer_scale (its int32 sums made f32, times
 * a scale, plus a bias, an activation: the dequantization after it, done
 * on each block while it is in cache); dynamic_quantize_range and
 * quantize_u8 (DynamicQuantizeLinear in two passes).  Constant weights are packed once,
 * at prepare; others at each run into the scratch. */
#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"
#include "core/error.h"
#include "quant/igemm.h"

/* Row and panel blocks handed to threads: a block of weight panels stays
 * in cache while the block's rows stream past it. */
enum { ROW_BLOCK = 96, PANEL_BLOCK = 8 };

static size_t up64(size_t b) { return (b + 63) / 64 * 64; }

typedef struct mmi_shape {
    int64_t m, k, n;
} mmi_shape;

static mmi_shape shape_of(const rlx_node_data *a, const rlx_node_data *b)
{
    mmi_shape s = {0, b->shape.dims[0], b->shape.dims[1]};
    s.m = s.k ? rlx_shape_numel(&a->shape) / s.k : 0;
    return s;
}

static size_t mmi_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    const rlx_node_data *a = &g->nodes[n->in[0]], *b = &g->nodes[n->in[1]];
    mmi_shape s = shape_of(a, b);
    size_t bytes = up64((size_t)(s.m + 1) * sizeof(int32_t)) + up64((size_t)(s.n + 1) * sizeof(int32_t));
    if (a->dtype == RLX_I8)
        bytes += up64((size_t)(s.m * s.k));
    if (b->op != RLX_OP_CONSTANT)
        bytes += up64(rlx_igemm_packed_bytes(s.k, s.n));
    return bytes + 64;
}

static rlx_status mmi_prepare(const rlx_graph *g, rlx_thunk *t)
{
    const rlx_node_data *b = &g->nodes[t->node->in[1]];
    if (b->op != RLX_OP_CONSTANT || !t->in[1])
        return RLX_OK;
    mmi_shape s = shape_of(&g->nodes[t->node->in[0]], b);
    void *packed = rlx_malloc(rlx_igemm_packed_bytes(s.k, s.n));
    if (!packed)
        return rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY);
    rlx_igemm_pack_b(t->in[1], b->dtype == RLX_I8, s.k, s.n, s.n, packed);
    t->state = packed;
    return RLX_OK;
}

/* The fused op's epilogue over rows [i0, i1), columns [j0, j1) of C, in
 * place: the int32 sums become act(sum * scale + bias) in f32. */
static void rescale(const rlx_thunk *t, int32_t *C, int64_t n, int64_t i0, int64_t i1, int64_t j0, int64_t j1)
{
    const rlx_node_data *nd = t->node;
    const float *sc = t->in[4], *bias = nd->attrs.mm_act.has_bias ? (const float *)t->in[5] + j0 : NULL;
    bool per_col = rlx_shape_numel(&t->in_node[4]->shape) > 1;
    for (int64_t i = i0; i < i1; i++) {
        float *y = (float *)(C + i * n);
        const int32_t *c = C + i * n;
        if (per_col)
            for (int64_t j = j0; j < j1; j++)
                y[j] = (float)c[j] * sc[j];
        else
            for (int64_t j = j0; j < j1; j++)
                y[j] = (float)c[j] * sc[0];
        rlx_cpu_act_f32(nd->attrs.mm_act.act, y + j0, bias, j1 - j0);
    }
}

/* One integer product's pieces for the pool: the s8 -> u8 flip and row
 * sums by rows, the product (and its rescale) by row and panel blocks. */
typedef struct mmi_job {
    const rlx_thunk *t;
    mmi_shape s;
    const uint8_t *src;
    uint8_t *au;
    int32_t *rowsum, *C;
    const rlx_igemm_args *g;
    rlx_igemm_isa isa;
    int64_t rb, rows, np;
} mmi_job;

static void mmi_flip_rows(void *arg, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const mmi_job *j = arg;
    int64_t k = j->s.k;
    for (int64_t i = i0 * k; i < i1 * k; i++)
        j->au[i] = j->src[i] ^ 0x80;
}

static void mmi_sum_rows(void *arg, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const mmi_job *j = arg;
    for (int64_t i = i0; i < i1; i++)
        rlx_igemm_row_sums(j->src + i * j->s.k, j->s.k, 1, j->s.k, j->rowsum + i);
}

static void mmi_blocks(void *arg, int64_t task0, int64_t task1, int worker)
{
    (void)worker;
    const mmi_job *j = arg;
    mmi_shape s = j->s;
    bool scaled = j->t->node->op == RLX_OP_MATMUL_INTEGER_SCALE;
    for (int64_t task = task0; task < task1; task++) {
        int64_t r = task % j->rb, p = task / j->rb;
        int64_t i0 = r * j->rows, i1 = i0 + j->rows < s.m ? i0 + j->rows : s.m;
        int64_t p1 = (p + 1) * PANEL_BLOCK < j->np ? (p + 1) * PANEL_BLOCK : j->np;
        rlx_igemm_block(j->isa, j->g, i0, i1, p * PANEL_BLOCK, p1);
        if (scaled)
            rescale(j->t, j->C, s.n, i0, i1, p * PANEL_BLOCK * RLX_IGEMM_NR,
                    p1 * RLX_IGEMM_NR < s.n ? p1 * RLX_IGEMM_NR : s.n);
    }
}

static rlx_status k_matmul_integer(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *a = t->in_node[0], *b = t->in_node[1];
    mmi_shape s = shape_of(a, b);
    int32_t *C = t->out;
    bool scaled = t->node->op == RLX_OP_MATMUL_INTEGER_SCALE;
    if (s.k == 0) { /* no products: every sum is 0 */
        memset(C, 0, (size_t)rlx_shape_numel(&t->node->shape) * sizeof *C);
        if (scaled)
            rescale(t, C, s.n, 0, s.m, 0, s.n);
        return RLX_OK;
    }
    char *sp = (char *)(((uintptr_t)t->scratch + 63) & ~(uintptr_t)63);
    int32_t *rowsum = (int32_t *)sp, *zb = (int32_t *)(sp + up64((size_t)(s.m + 1) * sizeof(int32_t)));
    sp = (char *)zb + up64((size_t)(s.n + 1) * sizeof(int32_t));
    /* everything as u8 x s8: s8 activations + 128, u8 weights - 128 (igemm.h) */
    const uint8_t *A = t->in[0];
    int32_t za = (int32_t)rlx_load_i(t->in[2], a->dtype, 0);
    int th = rlx_cpu_threads(ctx, s.m * s.k);
    mmi_job job = {.t = t, .s = s, .src = t->in[0], .rowsum = rowsum, .C = C};
    if (a->dtype == RLX_I8) {
        job.au = (uint8_t *)sp;
        sp += up64((size_t)(s.m * s.k));
        rlx_cpu_parallel(th, s.m, mmi_flip_rows, &job);
        A = job.au;
        za += 128;
    }
    const void *packed = t->state;
    if (!packed) {
        rlx_igemm_pack_b(t->in[1], b->dtype == RLX_I8, s.k, s.n, s.n, sp);
        packed = sp;
    }
    int64_t nzb = rlx_shape_numel(&t->in_node[3]->shape);
    for (int64_t j = 0; j < nzb; j++)
        zb[j] = (int32_t)rlx_load_i(t->in[3], b->dtype, j) - (b->dtype == RLX_U8 ? 128 : 0);
    job.src = A;
    rlx_cpu_parallel(th, s.m, mmi_sum_rows, &job);
    rlx_igemm_args g = {.m = s.m,
                        .k = s.k,
                        .n = s.n,
                        .a = A,
                        .lda = s.k,
                        .packed = packed,
                        .za = za,
                        .zb = zb,
                        .zb_per_col = nzb > 1,
                        .rowsum = rowsum,
                        .c = C,
                        .ldc = s.n};
    rlx_igemm_isa isa = rlx_igemm_isa_best();
    /* row blocks of equal size (a multiple of the kernel's 6-row tile) */
    int64_t rb = (s.m + ROW_BLOCK - 1) / ROW_BLOCK, rows = ((s.m + rb - 1) / rb + 5) / 6 * 6;
    int64_t np = rlx_igemm_panels(s.n), pb = (np + PANEL_BLOCK - 1) / PANEL_BLOCK;
    job.g = &g;
    job.isa = isa;
    job.rb = rb;
    job.rows = rows;
    job.np = np;
    rlx_cpu_parallel(rlx_cpu_threads(ctx, s.m * s.n * s.k / 8), rb * pb, mmi_blocks, &job);
    return RLX_OK;
}

/* Scalars in the same f32 operations, in the same order, as the op's
 * decomposition. */
static rlx_status k_dq_range(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    int64_t n = rlx_shape_numel(&t->in_node[0]->shape);
    float mx = rlx_cpu_minmax_f32(t->in[0], n, true), mn = rlx_cpu_minmax_f32(t->in[0], n, false);
    mx = rlx_binary_f32(RLX_OP_MAX, mx, 0.0f, 0);
    mn = rlx_binary_f32(RLX_OP_MIN, mn, 0.0f, 0);
    float scale = rlx_binary_f32(RLX_OP_DIV, rlx_binary_f32(RLX_OP_SUB, mx, mn, 0), 255.0f, 0);
    float zp =
        rlx_unary_f32(RLX_OP_ROUND, rlx_binary_f32(RLX_OP_SUB, 0.0f, rlx_binary_f32(RLX_OP_DIV, mn, scale, 0), 0));
    float *y = t->out;
    y[0] = scale;
    y[1] = (double)zp < 0 ? 0.0f : (double)zp > 255 ? 255.0f : zp; /* clip keeps NaN */
    return RLX_OK;
}

/* round(x / scale) + zp clipped to [0, 255] (NaN to 0, as the cast does). */
RLX_CLONES static void quantize_u8_run(const float *x, uint8_t *y, int64_t n, float scale, float zp)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float v = rintf(x[i] / scale) + zp;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        y[i] = v != v ? 0 : (uint8_t)(int)v;
    }
}

static void quantize_u8_blocks(void *arg, int64_t b0, int64_t b1, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    int64_t n = rlx_shape_numel(&t->node->shape);
    const float *x = t->in[0], *r = t->in[1];
    uint8_t *y = t->out;
    for (int64_t b = b0; b < b1; b++)
        quantize_u8_run(x + b * 4096, y + b * 4096, n - b * 4096 < 4096 ? n - b * 4096 : 4096, r[0], r[1]);
}

static rlx_status k_quantize_u8(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    int64_t n = rlx_shape_numel(&t->node->shape);
    rlx_cpu_parallel(rlx_cpu_threads(ctx, n), (n + 4095) / 4096, quantize_u8_blocks, (void *)t);
    return RLX_OK;
}

void rlx_cpu_register_int8(rlx_cpu_kernel *table)
{
    table[RLX_OP_DYNAMIC_QUANTIZE_RANGE].fn = k_dq_range;
    table[RLX_OP_QUANTIZE_U8].fn = k_quantize_u8;
    table[RLX_OP_MATMUL_INTEGER].fn = k_matmul_integer;
    table[RLX_OP_MATMUL_INTEGER].scratch = mmi_scratch;
    table[RLX_OP_MATMUL_INTEGER].prepare = mmi_prepare;
    table[RLX_OP_MATMUL_INTEGER_SCALE] = table[RLX_OP_MATMUL_INTEGER];
}
