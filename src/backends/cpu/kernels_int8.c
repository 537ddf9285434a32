/* kernels_int8.c - ONNX's 8-bit integer ops on src/quant/igemm.h's kernels:
 * matmul_integer, matmul_integer_scale (its int32 sums made f32, times
 * a scale, plus a bias, an activation: the dequantization after it, done
 * on each block while it is in cache) and qlinear_matmul (the same with
 * static quantization's requantization to u8 and back, and the next
 * product's quantization, in that epilogue); dynamic_quantize_range and
 * quantize_u8 (DynamicQuantizeLinear in two passes).  Constant weights are
 * packed once, at prepare; others at each run into the scratch.  Built
 * without FP contraction: each epilogue step rounds as its unfused node. */

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

/* int32 sums of one task's block when the result is u8 (not wide enough to
 * hold them in place): rows of a row block by a panel block's columns. */
enum { TILE_W = PANEL_BLOCK * RLX_IGEMM_NR };

static int64_t block_rows(int64_t m)
{
    int64_t rb = (m + ROW_BLOCK - 1) / ROW_BLOCK;
    return rb ? ((m + rb - 1) / rb + 5) / 6 * 6 : 0;
}

static size_t tile_bytes(int64_t m) { return up64((size_t)(block_rows(m) * TILE_W) * sizeof(int32_t)); }

static bool out_u8(const rlx_node_data *n) { return n->op == RLX_OP_QLINEAR_MATMUL && n->attrs.qmm.out_u8; }

static size_t mmi_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    const rlx_node_data *a = &g->nodes[n->in[0]], *b = &g->nodes[n->in[1]];
    mmi_shape s = shape_of(a, b);
    size_t bytes = up64((size_t)(s.m + 1) * sizeof(int32_t)) + up64((size_t)(s.n + 1) * sizeof(int32_t));
    if (out_u8(n))
        bytes += (size_t)(threads > 1 ? threads : 1) * tile_bytes(s.m);
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

/* The epilogue of the fused ops, read from the node once per run. */
typedef struct epilogue {
    const float *scale, *bias;
    bool per_col, requant, out_u8;
    int act;
    float rq_s, rq_z, dq_z, dq_s, out_s, out_z;
} epilogue;

static epilogue epilogue_of(const rlx_thunk *t)
{
    const rlx_node_data *nd = t->node;
    epilogue e = {.scale = t->in[4], .per_col = rlx_shape_numel(&t->in_node[4]->shape) > 1};
    int k = 5;
    if (nd->op == RLX_OP_MATMUL_INTEGER_SCALE) {
        e.act = nd->attrs.mm_act.act;
        e.bias = nd->attrs.mm_act.has_bias ? t->in[5] : NULL;
        return e;
    }
    e.act = nd->attrs.qmm.act;
    if ((e.requant = nd->attrs.qmm.requant)) {
        const float *r = t->in[k];
        e.rq_s = r[0];
        e.rq_z = r[1];
        e.dq_z = *(const float *)t->in[k + 1];
        e.dq_s = *(const float *)t->in[k + 2];
        k += 3;
    }
    e.bias = nd->attrs.qmm.has_bias ? t->in[k++] : NULL;
    if ((e.out_u8 = nd->attrs.qmm.out_u8)) {
        const float *r = t->in[k];
        e.out_s = r[0];
        e.out_z = r[1];
    }
    return e;
}

/* quantize_u8's formula: round(x / scale) + zp clipped to [0, 255] (NaN to
 * 0, as the cast does). */
static inline float level_u8(float x, float scale, float zp)
{
    float v = rintf(x / scale) + zp;
    v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
    return v != v ? 0.0f : v;
}

/* One row's columns [0, n): the int32 sums c become y (f32, in place over
 * c where y_f32 is c) or y_u8, each step rounded as its unfused node. */
RLX_CLONES static void epilogue_row(const epilogue *e, const int32_t *c, float *y, uint8_t *y_u8, int64_t j0, int64_t n)
{
    const float *sc = e->scale + (e->per_col ? j0 : 0);
    if (e->per_col) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)c[j] * sc[j];
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            y[j] = (float)c[j] * sc[0];
    }
    if (e->requant) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            y[j] = (level_u8(y[j], e->rq_s, e->rq_z) - e->dq_z) * e->dq_s;
    }
    rlx_cpu_act_f32(e->act, y, e->bias ? e->bias + j0 : NULL, n);
    if (y_u8) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            y_u8[j] = (uint8_t)(int)level_u8(y[j], e->out_s, e->out_z);
    }
}

/* Rows [i0, i1), columns [j0, j1) of the result from their sums c0 (those
 * of row i0, column j0; row stride ldc): in place for f32, else into the
 * u8 result. */
static void epilogue_block(const rlx_thunk *t, const epilogue *e, int32_t *c0, int64_t ldc, int64_t n, int64_t i0,
                           int64_t i1, int64_t j0, int64_t j1)
{
    float row[TILE_W];
    for (int64_t i = i0; i < i1; i++) {
        int32_t *c = c0 + (i - i0) * ldc;
        if (e->out_u8)
            epilogue_row(e, c, row, (uint8_t *)t->out + i * n + j0, j0, j1 - j0);
        else
            epilogue_row(e, c, (float *)c, NULL, j0, j1 - j0);
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
    const epilogue *e; /* scaled: the rescale (and requantization) of each block */
    int32_t *tiles;    /* a u8 result: each worker's block of sums, tile_elems apart */
    size_t tile_elems;
    bool scaled, to_u8;
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
    const mmi_job *j = arg;
    mmi_shape s = j->s;
    for (int64_t task = task0; task < task1; task++) {
        int64_t r = task % j->rb, p = task / j->rb;
        int64_t i0 = r * j->rows, i1 = i0 + j->rows < s.m ? i0 + j->rows : s.m;
        int64_t p1 = (p + 1) * PANEL_BLOCK < j->np ? (p + 1) * PANEL_BLOCK : j->np;
        int64_t j0 = p * TILE_W, j1 = p1 * RLX_IGEMM_NR < s.n ? p1 * RLX_IGEMM_NR : s.n;
        if (j->to_u8) {
            /* the kernel writes C[i][j] at c + i * ldc + j: a tile based at (i0, j0) */
            int32_t *tile = j->tiles + (size_t)worker * j->tile_elems;
            rlx_igemm_args gt = *j->g;
            gt.ldc = TILE_W;
            gt.c = (int32_t *)((uintptr_t)tile - (uintptr_t)((i0 * TILE_W + j0) * (int64_t)sizeof(int32_t)));
            rlx_igemm_block(j->isa, &gt, i0, i1, p * PANEL_BLOCK, p1);
            epilogue_block(j->t, j->e, tile, TILE_W, s.n, i0, i1, j0, j1);
        } else {
            rlx_igemm_block(j->isa, j->g, i0, i1, p * PANEL_BLOCK, p1);
            if (j->scaled)
                epilogue_block(j->t, j->e, j->C + i0 * s.n + j0, s.n, s.n, i0, i1, j0, j1);
        }
    }
}

static rlx_status k_matmul_integer(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *a = t->in_node[0], *b = t->in_node[1];
    mmi_shape s = shape_of(a, b);
    int32_t *C = t->out;
    if (s.m == 0 || s.n == 0)
        return RLX_OK;
    bool scaled = t->node->op != RLX_OP_MATMUL_INTEGER, to_u8 = out_u8(t->node);
    epilogue e = scaled ? epilogue_of(t) : (epilogue){0};
    char *sp = (char *)(((uintptr_t)t->scratch + 63) & ~(uintptr_t)63);
    int32_t *rowsum = (int32_t *)sp, *zb = (int32_t *)(sp + up64((size_t)(s.m + 1) * sizeof(int32_t)));
    sp = (char *)zb + up64((size_t)(s.n + 1) * sizeof(int32_t));
    int32_t *tiles = NULL; /* a u8 result's per-thread blocks of sums */
    if (to_u8) {
        tiles = (int32_t *)sp;
        sp += (size_t)(ctx->threads > 1 ? ctx->threads : 1) * tile_bytes(s.m);
    }
    if (s.k == 0) { /* no products: every sum is 0 */
        if (to_u8)
            memset(tiles, 0, TILE_W * sizeof *tiles);
        else
            memset(C, 0, (size_t)(s.m * s.n) * sizeof *C);
        for (int64_t j0 = 0; scaled && j0 < s.n; j0 += TILE_W)
            epilogue_block(t, &e, to_u8 ? tiles : C + j0, to_u8 ? 0 : s.n, s.n, 0, s.m, j0,
                           j0 + TILE_W < s.n ? j0 + TILE_W : s.n);
        return RLX_OK;
    }
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
    int64_t rows = block_rows(s.m), rb = (s.m + rows - 1) / rows;
    int64_t np = rlx_igemm_panels(s.n), pb = (np + PANEL_BLOCK - 1) / PANEL_BLOCK;
    int gth = rlx_cpu_threads(ctx, s.m * s.n * s.k / 8);
    if (gth > ctx->threads)
        gth = ctx->threads > 1 ? ctx->threads : 1; /* one tile per thread of the scratch */
    job.g = &g;
    job.isa = isa;
    job.rb = rb;
    job.rows = rows;
    job.np = np;
    job.e = &e;
    job.tiles = tiles;
    job.tile_elems = tile_bytes(s.m) / sizeof(int32_t);
    job.scaled = scaled;
    job.to_u8 = to_u8;
    rlx_cpu_parallel(gth, rb * pb, mmi_blocks, &job);
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
    table[RLX_OP_QLINEAR_MATMUL] = table[RLX_OP_MATMUL_INTEGER];
}
