/* dce.c - dead-code elimination: keeps what an output depends on, every
 * input and param (so they can still be set by name), and every write into
 * a param's memory (an optimizer step, a cache write: their effect is the
 * state the next run reads). */
#include <stdlib.h>

#include "opt/pass.h"

static rlx_node keep_live(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *live)
{
    (void)out, (void)g, (void)map;
    return ((const bool *)live)[id] ? RLX_REBUILD_COPY : RLX_REBUILD_DROP;
}

rlx_graph *rlx_pass_dce(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    (void)ctx;
    int n = g->n_nodes;
    bool *live = rlx_calloc((size_t)n + 1, sizeof(bool));
    if (!live)
        return NULL;
    for (int i = 0; i < g->n_outputs; i++)
        live[g->outputs[i].node] = true;
    for (int i = n - 1; i >= 0; i--) {
        rlx_op op = g->nodes[i].op;
        if (op == RLX_OP_INPUT || op == RLX_OP_PARAM)
            live[i] = true;
        if ((rlx_op_info_of(op)->flags & RLX_OPF_STATEFUL) && g->nodes[g->nodes[i].in[0]].op == RLX_OP_PARAM)
            live[i] = true;
        if (live[i])
            for (int j = 0; j < g->nodes[i].n_in; j++)
                live[g->nodes[i].in[j]] = true;
    }
    rlx_graph *out = rlx_rebuild(g, keep_live, live);
    free(live);
    return out;
}
