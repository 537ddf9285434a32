/* pass.h - optimizer passes.  A pass is a named function graph -> graph: it
 * reads its input and returns a new graph (or NULL with the error set), so
 * passes can be listed, reordered and tested one at a time.  Passes learn
 * what the target runs only through the claim callback in the context. */
#ifndef RLX_OPT_PASS_H
#define RLX_OPT_PASS_H

#include "ir/ir.h"

typedef struct rlx_pass_ctx {
    /* The target's claim: can node `id` of g run natively? NULL = anything. */
    bool (*supports)(const rlx_graph *g, rlx_node id);
    /* Evaluates node `id` (all operands constant) into `out` (node bytes);
     * supplied by the runtime for constant folding.  NULL = no folding. */
    rlx_status (*evaluate)(const rlx_graph *g, rlx_node id, void *out);
    rlx_precision precision;
    /* Largest constant folding may create, in bytes. */
    size_t fold_limit;
    int verbose;
} rlx_pass_ctx;

typedef rlx_graph *(*rlx_pass_fn)(const rlx_graph *g, const rlx_pass_ctx *ctx);

typedef struct rlx_pass {
    const char *name;
    rlx_pass_fn run;
} rlx_pass;

rlx_graph *rlx_pass_dce(const rlx_graph *g, const rlx_pass_ctx *ctx);
rlx_graph *rlx_pass_cse(const rlx_graph *g, const rlx_pass_ctx *ctx);
rlx_graph *rlx_pass_fold(const rlx_graph *g, const rlx_pass_ctx *ctx);

/* Copies node `id` of src into dst with operands renamed through map
 * (old id -> new id); shape inference runs again.  Returns the new id. */
rlx_node rlx_copy_node(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *map);
/* Declares src's outputs on dst through map. */
rlx_status rlx_copy_outputs(rlx_graph *dst, const rlx_graph *src, const rlx_node *map);

#endif
