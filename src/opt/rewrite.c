/* rewrite.c - helpers shared by passes that rebuild a graph. */
#include <string.h>

#include "opt/pass.h"

rlx_node rlx_copy_node(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *map)
{
    rlx_node_data p = src->nodes[id];
    for (int i = 0; i < p.n_in; i++)
        p.in[i] = map[p.in[i]];
    return rlx_graph_add(dst, &p);
}

rlx_status rlx_copy_outputs(rlx_graph *dst, const rlx_graph *src, const rlx_node *map)
{
    for (int i = 0; i < src->n_outputs; i++) {
        rlx_status s = rlx_output(dst, src->outputs[i].name, map[src->outputs[i].node]);
        if (s != RLX_OK)
            return s;
    }
    return RLX_OK;
}
