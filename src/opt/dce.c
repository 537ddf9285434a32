/* dce.c - dead-code elimination: keeps what an output depends on, plus every
 * input and param (so they can still be set by name). */
#include <stdlib.h>

#include "opt/pass.h"

rlx_graph *rlx_pass_dce(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    (void)ctx;
    int n = g->n_nodes;
    bool *live = rlx_calloc((size_t)n + 1, sizeof(bool));
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_graph *out = rlx_graph_new();
    if (!live || !map || !out)
        goto fail;
    for (int i = 0; i < g->n_outputs; i++)
        live[g->outputs[i].node] = true;
    for (int i = n - 1; i >= 0; i--) {
        rlx_op op = g->nodes[i].op;
        if (op == RLX_OP_INPUT || op == RLX_OP_PARAM)
            live[i] = true;
        if (live[i])
            for (int j = 0; j < g->nodes[i].n_in; j++)
                live[g->nodes[i].in[j]] = true;
    }
    for (int i = 0; i < n; i++) {
        map[i] = -1;
        if (live[i] && (map[i] = rlx_copy_node(out, g, i, map)) < 0)
            goto fail;
    }
    if (rlx_copy_outputs(out, g, map) != RLX_OK)
        goto fail;
    free(live);
    free(map);
    return out;
fail:
    free(live);
    free(map);
    rlx_graph_free(out);
    return NULL;
}
