/* libFuzzer target for the ONNX importer: any byte string must give a graph
 * or a clean error (no crash, no out-of-bounds access, no leak). */
#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.default_dim = 2; /* symbolic dims get a small value */
    rlx_graph *g = NULL;
    if (rlx_onnx_import_buffer(data, size, NULL, &o, &g) == RLX_OK) {
        rlx_graph_verify(g);
        rlx_graph_free(g);
    }
    return 0;
}
