/* libFuzzer target for the ONNX importer and everything behind it: any
 * byte string must give a graph or a clean error (no crash, no
 * out-of-bounds access, no leak); a graph that imports must go through
 * simplification (dce, cse, constant folding with the CPU kernels, the
 * canonical forms) and fusion the same way, and a small one through the
 * whole CPU compile (mixed precision on odd-sized inputs, layout,
 * lowering, planning, kernel preparation) and one run.  A model the
 * importer refuses only because an op needs values the model computes runs
 * in stages (rlx_model_run) on patterned inputs of its declared shapes. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Patterned bytes for each graph input of the model in data, shapes as
 * declared (a symbolic dim is 2); false when an input is not a tensor of a
 * known rank or all of them would pass 64 KiB.  The declarations are read
 * through a memory file: rlx_onnx_inputs takes a path. */
static bool staged_inputs(const uint8_t *data, size_t size, rlx_onnx_tensor **xs, char ***names, int *n)
{
    *xs = NULL;
    *names = NULL;
    *n = 0;
    int fd = memfd_create("rlx-fuzz-model", 0);
    if (fd < 0)
        return false;
    bool ok = write(fd, data, size) == (ssize_t)size;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rlx_onnx_input *ins = NULL;
    int nin = 0;
    ok = ok && rlx_onnx_inputs(path, &ins, &nin, NULL, NULL) == RLX_OK;
    close(fd);
    if (!ok)
        return false;
    *xs = calloc((size_t)nin + 1, sizeof **xs);
    *names = calloc((size_t)nin + 1, sizeof **names);
    size_t total = 0;
    ok = *xs && *names;
    for (int i = 0; ok && i < nin; i++) {
        rlx_onnx_tensor *x = &(*xs)[i];
        ok = ins[i].is_tensor && ins[i].ndim >= 0 && ins[i].dtype < RLX_DTYPE_COUNT;
        if (!ok)
            break;
        x->dtype = ins[i].dtype;
        x->ndim = ins[i].ndim;
        int64_t numel = 1;
        for (int d = 0; d < x->ndim; d++) {
            x->dims[d] = ins[i].dims[d] < 0 ? 2 : ins[i].dims[d];
            numel = x->dims[d] <= 65536 && numel <= 65536 ? numel * x->dims[d] : 65537;
        }
        x->bytes = (size_t)numel * rlx_dtype_size(x->dtype);
        total += x->bytes;
        ok = numel <= 65536 && total <= ((size_t)64 << 10);
        x->data = ok ? malloc(x->bytes ? x->bytes : 1) : NULL;
        (*names)[i] = ok ? strdup(ins[i].name) : NULL;
        ok = ok && x->data && (*names)[i];
        for (size_t k = 0; ok && k < x->bytes; k++)
            ((unsigned char *)x->data)[k] = (unsigned char)(k * 37 + 11);
        *n = i + 1;
    }
    rlx_onnx_inputs_free(ins, nin, NULL, 0);
    return ok;
}

static void run_staged(const uint8_t *data, size_t size)
{
    rlx_onnx_tensor *xs, *ys = NULL;
    char **names;
    int n, ny = 0;
    if (staged_inputs(data, size, &xs, &names, &n)) {
        rlx_options o;
        rlx_options_init(&o);
        o.ignore_env = 1;
        o.threads = 1;
        o.max_arena_bytes = (size_t)16 << 20;
        rlx_model *m = NULL;
        if (rlx_model_load_onnx_buffer(data, size, NULL, &o, &m) == RLX_OK &&
            rlx_model_run(m, n, (const char *const *)names, xs, &ys, &ny) == RLX_OK)
            rlx_onnx_tensors_free(ys, ny);
        rlx_model_free(m);
    }
    for (int i = 0; i < n; i++)
        free(names ? names[i] : NULL);
    free(names);
    rlx_onnx_tensors_free(xs, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.default_dim = 2;                        /* symbolic dims get a small value */
    o.initializers_as_params = size % 4 == 3; /* a quarter of the inputs: float initializers as params */
    rlx_graph *g = NULL;
    if (rlx_onnx_import_buffer(data, size, NULL, &o, &g) != RLX_OK) {
        if (strstr(rlx_last_error(), "must be known at import time"))
            run_staged(data, size);
        return 0;
    }
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
