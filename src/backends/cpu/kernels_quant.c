/* kernels_quant.c - the quantized ops: qmatmul (activations quantized per
 * block, then integer dots against the weight rows: src/quant's kernels,
 * picked for the processor; a prompt's rows in tiles that reuse each
 * weight block across several rows) and dequantize.  The weights are never
 * expanded. */
#include <stdatomic.h>

#include "backends/cpu/cpu_kernels.h"
#include "core/ggml_type.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"

/* Rows of x, and the bytes of one quantized activation row. */
static int64_t rows_of(const rlx_node_data *x, int64_t k) { return k ? rlx_shape_numel(&x->shape) / k : 0; }

/* Weight rows per task: a block of them stays in cache while every
 * activation row is multiplied with it. */
#define QMM_ROWS 16

static size_t qmatmul_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    const rlx_node_data *x = &g->nodes[n->in[0]];
    int qt = n->attrs.quant.qtype;
    int64_t k = n->attrs.quant.k, m = rows_of(x, k), cols = g->nodes[n->in[1]].shape.dims[0];
    size_t act = (size_t)m * rlx_quant_act_bytes(qt, k);
    size_t xf = x->dtype == RLX_F32 ? 0 : (size_t)(m * k) * sizeof(float);
    size_t yf = n->dtype == RLX_F32 ? 0 : (size_t)(m * cols) * sizeof(float);
    return act + xf + yf + 64;
}

/* A quantized product's pieces for the pool: activation rows, then
 * blocks of QMM_ROWS weight rows against every activation row. */
typedef struct qmm_job {
    int qt;
    int64_t k, m, cols, mt;
    size_t rb, ab;
    const float *X;
    uint8_t *act;
    const uint8_t *W;
    float *Y;
    atomic_int failed;
} qmm_job;

static void qmm_quantize_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    qmm_job *j = arg;
    for (int64_t i = begin; i < end; i++)
        if (rlx_quantize_act(j->qt, j->X + i * j->k, j->act + (size_t)i * j->ab, j->k) != RLX_OK)
            atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
}

static void qmm_blocks(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const qmm_job *j = arg;
    const int64_t T = RLX_QUANT_TILE, cols = j->cols, mt = j->mt;
    for (int64_t b = begin; b < end; b++) {
        int64_t j0 = b * QMM_ROWS, j1 = j0 + QMM_ROWS < cols ? j0 + QMM_ROWS : cols;
        int64_t jt = j0 + (j1 - j0) / T * T;
        if (mt && jt > j0)
            rlx_quant_tiles(j->qt, j->k, j->W + (size_t)j0 * j->rb, j->rb, jt - j0, j->act, j->ab, mt, j->Y + j0, cols);
        for (int64_t i = 0; i < j->m; i++) {
            int64_t js = i < mt ? jt : j0;
            if (j1 > js)
                rlx_quant_vec_dot_rows(j->qt, j->k, j->W + (size_t)js * j->rb, j->rb, j1 - js,
                                       j->act + (size_t)i * j->ab, j->Y + i * cols + js);
        }
    }
}

static rlx_status k_qmatmul(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    int qt = n->attrs.quant.qtype;
    int64_t k = n->attrs.quant.k, m = rows_of(x, k), cols = t->in_node[1]->shape.dims[0];
    if (m == 0 || cols == 0)
        return RLX_OK;
    size_t rb = rlx_quant_row_bytes(qt, k), ab = rlx_quant_act_bytes(qt, k);
    char *scratch = t->scratch;
    uint8_t *act = (uint8_t *)scratch;
    scratch += (size_t)m * ab;
    const float *X = t->in[0];
    if (x->dtype != RLX_F32) {
        float *xf = (float *)scratch;
        scratch += (size_t)(m * k) * sizeof(float);
        rlx_cpu_to_f32(xf, t->in[0], x->dtype, m * k);
        X = xf;
    }
    float *Y = n->dtype == RLX_F32 ? (float *)t->out : (float *)scratch;
    qmm_job j = {.qt = qt, .k = k, .m = m, .cols = cols, .rb = rb, .ab = ab, .X = X, .act = act, .W = t->in[1], .Y = Y};
    atomic_init(&j.failed, 0);
    rlx_cpu_parallel(m > 1 ? rlx_cpu_threads(ctx, m * k * 8) : 1, m, qmm_quantize_rows, &j);
    if (atomic_load_explicit(&j.failed, memory_order_relaxed))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "qmatmul: the activations could not be quantized for %s",
                             rlx_ggml_type_name(qt));
    /* whole tiles of rows where a tiled kernel exists; the rest one dot
     * at a time (the same results to the bit) */
    const int64_t T = RLX_QUANT_TILE;
    j.mt = m >= T && rlx_quant_tile_available(qt) ? m - m % T : 0;
    rlx_cpu_parallel(rlx_cpu_threads(ctx, m * cols * k / 8), (cols + QMM_ROWS - 1) / QMM_ROWS, qmm_blocks, &j);
    if (n->dtype != RLX_F32)
        rlx_cpu_from_f32(t->out, n->dtype, Y, m * cols);
    return RLX_OK;
}

static size_t dequantize_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)g;
    return n->dtype == RLX_F32 ? 0 : (size_t)threads * (size_t)n->attrs.quant.k * sizeof(float) + 64;
}

typedef struct dequant_job {
    const rlx_thunk *t;
    atomic_int failed;
} dequant_job;

/* Rows of a quantized matrix; a narrower dtype goes through the worker's
 * f32 row of scratch. */
static void dequantize_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    dequant_job *j = arg;
    const rlx_thunk *t = j->t;
    const rlx_node_data *n = t->node;
    int qt = n->attrs.quant.qtype;
    int64_t k = n->attrs.quant.k;
    size_t rb = rlx_quant_row_bytes(qt, k);
    const uint8_t *W = t->in[0];
    for (int64_t r = begin; r < end; r++) {
        float *row = n->dtype == RLX_F32 ? (float *)t->out + r * k : (float *)t->scratch + worker * k;
        if (rlx_dequantize_row(qt, W + (size_t)r * rb, row, k) != RLX_OK)
            atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        else if (n->dtype != RLX_F32)
            rlx_cpu_from_f32((char *)t->out + (size_t)(r * k) * rlx_dtype_size(n->dtype), n->dtype, row, k);
    }
}

static rlx_status k_dequantize(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    int qt = n->attrs.quant.qtype;
    int64_t k = n->attrs.quant.k, rows = n->shape.dims[0];
    dequant_job j = {.t = t};
    atomic_init(&j.failed, 0);
    rlx_cpu_parallel(rlx_cpu_threads(ctx, rows * k), rows, dequantize_rows, &j);
    rlx_status st = atomic_load_explicit(&j.failed, memory_order_relaxed) ? RLX_ERR_INVALID_ARGUMENT : RLX_OK;
    return st == RLX_OK ? RLX_OK : rlx_set_error(st, "dequantize: %s rows could not be read", rlx_ggml_type_name(qt));
}

void rlx_cpu_register_quant(rlx_cpu_kernel *table)
{
    table[RLX_OP_QMATMUL].fn = k_qmatmul;
    table[RLX_OP_QMATMUL].scratch = qmatmul_scratch;
    table[RLX_OP_DEQUANTIZE].fn = k_dequantize;
    table[RLX_OP_DEQUANTIZE].scratch = dequantize_scratch;
}
