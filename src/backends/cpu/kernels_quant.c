/* kernels_quant.c - the quantized ops: qmatmul (activations quantized per
 * block, then integer dots against the weight rows: src/quant's kernels,
 * picked for the processor; a prompt's rows in tiles that reuse each
 * weight block across several rows) and dequantize.  The weights are never
 * expanded. */
#include <omp.h>

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
    int qth = rlx_cpu_threads(ctx, m * k * 8);
    rlx_status st = RLX_OK;
#pragma omp parallel for num_threads(qth) if (m > 1)
    for (int64_t i = 0; i < m; i++)
        if (rlx_quantize_act(qt, X + i * k, act + (size_t)i * ab, k) != RLX_OK)
            st = RLX_ERR_INVALID_ARGUMENT;
    if (st != RLX_OK)
        return rlx_set_error(st, "qmatmul: the activations could not be quantized for %s", rlx_ggml_type_name(qt));
    const uint8_t *W = t->in[1];
    int th = rlx_cpu_threads(ctx, m * cols * k / 8);
    int64_t tasks = (cols + QMM_ROWS - 1) / QMM_ROWS;
    /* whole tiles of rows where a tiled kernel exists; the rest one dot
     * at a time (the same results to the bit) */
    const int64_t T = RLX_QUANT_TILE, mt = m >= T && rlx_quant_tile_available(qt) ? m - m % T : 0;
#pragma omp parallel for num_threads(th) schedule(static)
    for (int64_t b = 0; b < tasks; b++) {
        int64_t j0 = b * QMM_ROWS, j1 = j0 + QMM_ROWS < cols ? j0 + QMM_ROWS : cols;
        int64_t jt = j0 + (j1 - j0) / T * T;
        if (mt && jt > j0)
            rlx_quant_tiles(qt, k, W + (size_t)j0 * rb, rb, jt - j0, act, ab, mt, Y + j0, cols);
        for (int64_t i = 0; i < m; i++) {
            int64_t js = i < mt ? jt : j0;
            if (j1 > js)
                rlx_quant_vec_dot_rows(qt, k, W + (size_t)js * rb, rb, j1 - js, act + (size_t)i * ab,
                                       Y + i * cols + js);
        }
    }
    if (n->dtype != RLX_F32)
        rlx_cpu_from_f32(t->out, n->dtype, Y, m * cols);
    return RLX_OK;
}

static size_t dequantize_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)g;
    return n->dtype == RLX_F32 ? 0 : (size_t)threads * (size_t)n->attrs.quant.k * sizeof(float) + 64;
}

static rlx_status k_dequantize(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    int qt = n->attrs.quant.qtype;
    int64_t k = n->attrs.quant.k, rows = n->shape.dims[0];
    size_t rb = rlx_quant_row_bytes(qt, k);
    const uint8_t *W = t->in[0];
    int th = rlx_cpu_threads(ctx, rows * k);
    rlx_status st = RLX_OK;
#pragma omp parallel for num_threads(th) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        float *row = n->dtype == RLX_F32 ? (float *)t->out + r * k : (float *)t->scratch + omp_get_thread_num() * k;
        if (rlx_dequantize_row(qt, W + (size_t)r * rb, row, k) != RLX_OK)
            st = RLX_ERR_INVALID_ARGUMENT;
        else if (n->dtype != RLX_F32)
            rlx_cpu_from_f32((char *)t->out + (size_t)(r * k) * rlx_dtype_size(n->dtype), n->dtype, row, k);
    }
    return st == RLX_OK ? RLX_OK : rlx_set_error(st, "dequantize: %s rows could not be read", rlx_ggml_type_name(qt));
}

void rlx_cpu_register_quant(rlx_cpu_kernel *table)
{
    table[RLX_OP_QMATMUL].fn = k_qmatmul;
    table[RLX_OP_QMATMUL].scratch = qmatmul_scratch;
    table[RLX_OP_DEQUANTIZE].fn = k_dequantize;
    table[RLX_OP_DEQUANTIZE].scratch = dequantize_scratch;
}
