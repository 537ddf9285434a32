/* libFuzzer target for the ONNX importer and the optimizer behind it: any
 * byte string must give a graph or a clean error (no crash, no
 * out-of-bounds access, no leak), and a graph that imports must go through
 * simplification (dce, cse, constant folding with the CPU kernels, the
 * canonical forms) and fusion the same way. */
#include <stddef.h>
#include <stdint.h>

#include "rlx.h"
#include "runtime/runtime.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.default_dim = 2; /* symbolic dims get a small value */
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
    }
    rlx_graph_free(g);
    return 0;
}
