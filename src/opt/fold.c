/* fold.c - constant folding: a pure node whose operands are all constants
 * is evaluated at compile time (by the evaluator the runtime supplies) and
 * becomes a constant, if the result is not larger than ctx->fold_limit. */
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"

/* Node id as a constant evaluated from its already folded operands, when it
 * is pure, not too large and all of them are constants. */
static rlx_node fold_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    const rlx_pass_ctx *ctx = (const rlx_pass_ctx *)arg;
    const rlx_node_data *src = &g->nodes[id];
    const rlx_op_info *info = rlx_op_info_of(src->op);
    bool foldable = ctx && ctx->evaluate && src->n_in > 0 &&
                    !(info->flags & (RLX_OPF_LEAF | RLX_OPF_RANDOM | RLX_OPF_STATEFUL)) &&
                    rlx_node_bytes(src) <= ctx->fold_limit;
    for (int j = 0; foldable && j < src->n_in; j++)
        if (out->nodes[map[src->in[j]]].op != RLX_OP_CONSTANT)
            foldable = false;
    if (!foldable)
        return RLX_REBUILD_COPY;
    /* evaluate against the already-folded operands in `out` */
    rlx_node tmp = rlx_copy_node(out, g, id, map);
    if (tmp < 0)
        return RLX_REBUILD_FAIL;
    size_t bytes = rlx_node_bytes(&out->nodes[tmp]);
    rlx_blob *blob = rlx_blob_new(bytes);
    if (!blob) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "fold: out of memory");
        return RLX_REBUILD_FAIL;
    }
    void *buf = rlx_blob_data(blob);
    rlx_status est = ctx->evaluate(out, tmp, buf, ctx->evaluate_arg);
    if (est == RLX_ERR_OUT_OF_MEMORY) {
        rlx_blob_unref(blob);
        return RLX_REBUILD_FAIL;
    }
    if (est != RLX_OK) { /* leave it to run time, where the error names the node */
        rlx_blob_unref(blob);
        return tmp;
    }
    rlx_node_data c = out->nodes[tmp];
    c.op = RLX_OP_CONSTANT;
    c.n_in = 0;
    memset(&c.attrs, 0, sizeof c.attrs);
    c.data = buf;
    c.data_bytes = bytes;
    c.blob = blob;
    /* replace the evaluated node in place: it is the last one */
    free(out->nodes[tmp].name);
    out->nodes[tmp].name = NULL;
    c.name = src->name ? rlx_strdup(src->name) : NULL;
    out->nodes[tmp] = c;
    return tmp;
}

rlx_graph *rlx_pass_fold(const rlx_graph *g, const rlx_pass_ctx *ctx) { return rlx_rebuild(g, fold_node, (void *)ctx); }
