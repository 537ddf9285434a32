/* libFuzzer target for the ONNX importer and everything behind it: any
 * byte string must give a graph or a clean error (no crash, no
 * out-of-bounds access, no leak); a graph that imports must go through
 * simplification (dce, cse, constant folding with the CPU kernels, the
 * canonical forms) and fusion the same way, and a small one through the
 * whole CPU compile (mixed precision on odd-sized inputs, layout,
 * lowering, planning, kernel preparation) and one run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "rlx.h"
#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes of every node's value: a bound on what compiling the graph can
 * allocate (folding and planning only shrink it). */
static size_t graph_bytes(const rlx_graph *g)
{
    size_t total = 0;
    for (int i = 0; i < g->n_nodes; i++)
        total += (size_t)rlx_shape_numel(&g->nodes[i].shape) * rlx_dtype_size(g->nodes[i].dtype);
    return total;
}

/* Multiply-adds of g's convolutions and products, from their shapes (a
 * convolution's output element costs its weight's size over the output
 * channels, a product's its inner dim).  Kernels run about 100 times
 * slower under the fuzzer's instrumentation. */
static double product_work(const rlx_graph *g)
{
    double work = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        bool conv = n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_BIAS_ACT;
        if (!conv && n->op != RLX_OP_MATMUL && n->op != RLX_OP_MATMUL_BIAS_ACT)
            continue;
        const rlx_shape *w = &g->nodes[n->in[1]].shape;
        int64_t split = w->ndim < 1 ? 1 : conv ? w->dims[0] : w->dims[w->ndim - 1];
        work += (double)rlx_shape_numel(&n->shape) * (double)rlx_shape_numel(w) / (double)(split > 0 ? split : 1);
    }
    return work;
}

/* Compiles g for the CPU and, when its arena is small and its products
 * cheap, runs it once on patterned inputs; failures must be clean errors. */
static void compile_and_run(const rlx_graph *g, int half_precision)
{
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.threads = 1;
    o.precision = half_precision ? RLX_PRECISION_F16 : RLX_PRECISION_F32;
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        return;
    rlx_compile_stats st;
    /* kernels cost time in proportion to what they touch: run small graphs only */
    if (rlx_session_stats(s, &st) == RLX_OK && st.arena_bytes <= ((size_t)1 << 20) && product_work(g) <= 4e6) {
        int ok = 1;
        for (int i = 0; ok && i < rlx_session_count(s, 0); i++) {
            rlx_tensor_info info;
            unsigned char *buf = NULL;
            ok = rlx_session_info(s, 0, i, &info) == RLX_OK && (buf = malloc(info.bytes ? info.bytes : 1)) != NULL;
            for (size_t k = 0; ok && k < info.bytes; k++)
                buf[k] = (unsigned char)(k * 37 + 11); /* small ints, ordinary floats */
            ok = ok && rlx_session_set_input(s, info.name, buf, info.bytes) == RLX_OK;
            free(buf);
        }
        if (ok)
            rlx_session_run(s);
    }
    rlx_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.default_dim = 2;                        /* symbolic dims get a small value */
    o.initializers_as_params = size % 4 == 3; /* a quarter of the inputs: float initializers as params */
    rlx_graph *g = NULL;
    if (rlx_onnx_import_buffer(data, size, NULL, &o, &g) != RLX_OK)
        return 0;
    if (rlx_graph_verify(g) == RLX_OK) {
        /* folding kept small: the importer's own limits allow tensors far
         * larger than a fuzz input should spend time on */
        rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 16};
        rlx_graph *s = rlx_simplify(g, &ctx);
        rlx_graph *f = s ? rlx_pass_fuse(s, &ctx) : NULL;
        if (f)
            rlx_graph_verify(f);
        rlx_graph_free(f);
        rlx_graph_free(s);
        if (graph_bytes(g) <= ((size_t)16 << 20))
            compile_and_run(g, (int)(size & 1));
    }
    rlx_graph_free(g);
    return 0;
}
