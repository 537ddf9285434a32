/* lower.c - lowering: a node the target does not claim (a fused op it has
 * no kernel for, or a shape its kernel declines) is rewritten into the
 * primitives of its decomposition (the op table row's, src/ir/decompose.c:
 * the definitions of the fused ops, which the CPU reference kernels must
 * agree with).  Whatever is still unclaimed after lowering is reported by
 * the compile's claim check, node by node. */
#include <stdio.h>

#include "opt/pass.h"

/* Node id as its decomposition into primitives when the target does not
 * claim it (and it has one, or is a channels-last node). */
static rlx_node lower_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    const rlx_pass_ctx *ctx = (const rlx_pass_ctx *)arg;
    const rlx_node_data *src = &g->nodes[id];
    bool claimed = !ctx || !ctx->supports || ctx->supports(g, id);
    if (claimed || !rlx_node_has_decomposition(src))
        return RLX_REBUILD_COPY;
    rlx_node_data m = *src;
    for (int j = 0; j < m.n_in; j++)
        m.in[j] = map[m.in[j]];
    int before = out->n_nodes;
    rlx_node y = rlx_decompose(out, &m);
    if (y < 0 || out->error != RLX_OK) {
        char label[160];
        rlx_set_error(out->error ? out->error : RLX_ERR_INTERNAL, "lowering %s: %s",
                      rlx_node_label(g, id, label, sizeof label), out->error_msg);
        return RLX_REBUILD_FAIL;
    }
    if (src->name && y >= before)
        rlx_node_set_name(out, y, src->name);
    if (ctx && ctx->stats)
        ctx->stats->lowered[src->op]++;
    if (ctx && ctx->verbose)
        fprintf(stderr, "[rlx] lower: %s -> %d primitive nodes\n", rlx_op_name(src->op), out->n_nodes - before);
    return y;
}

rlx_graph *rlx_pass_lower(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    return rlx_rebuild(g, lower_node, (void *)ctx);
}

/* The runtime's lowering stage. */
rlx_graph *rlx_opt_lower(const rlx_graph *g, const rlx_pass_ctx *ctx) { return rlx_pass_lower(g, ctx); }
