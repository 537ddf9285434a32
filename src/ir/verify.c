/* verify.c - whole-graph checks: every node's operands precede it, its
 * shape and dtype agree with inference, and the graph has outputs. */
#include <string.h>

#include "ir/ir.h"

rlx_status rlx_graph_verify(const rlx_graph *g)
{
    if (!g)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "verify: graph is NULL");
    if (g->error != RLX_OK)
        return rlx_set_error(g->error, "graph construction failed: %s", g->error_msg);
    char label[160];
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(n->op);
        if (!info)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "node %d: unknown op %d", i, (int)n->op);
        if (n->n_in < info->min_in || n->n_in > info->max_in)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: has %d inputs, takes %d to %d",
                                 rlx_node_label(g, i, label, sizeof label), n->n_in, info->min_in, info->max_in);
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] < 0 || n->in[j] >= i)
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                     "%s: operand %d (id %d) does not come before the node (cycle or dangling)",
                                     rlx_node_label(g, i, label, sizeof label), j, n->in[j]);
        rlx_node_data check = *n;
        if (info->infer) {
            rlx_status s = info->infer(g, &check);
            if (s != RLX_OK) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", rlx_last_error());
                return rlx_set_error(s, "%s: %s", rlx_node_label(g, i, label, sizeof label), msg);
            }
            if (check.dtype != n->dtype || !rlx_shape_equal(&check.shape, &n->shape))
                return rlx_set_error(RLX_ERR_INTERNAL, "%s: recorded shape/dtype disagree with inference",
                                     rlx_node_label(g, i, label, sizeof label));
        }
    }
    if (g->n_outputs == 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "graph has no outputs (call rlx_output)");
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].node < 0 || g->outputs[i].node >= g->n_nodes)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "output '%s' refers to a missing node", g->outputs[i].name);
    return RLX_OK;
}
