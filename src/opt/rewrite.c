/* rewrite.c - helpers shared by passes that rebuild a graph. */
#include <stdlib.h>
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

rlx_graph *rlx_rebuild(const rlx_graph *g, rlx_rebuild_fn fn, void *arg)
{
    int n = g->n_nodes;
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_graph *out = rlx_graph_new();
    if (!map || !out)
        goto fail;
    for (int i = 0; i < n; i++) {
        rlx_node y = fn(out, g, i, map, arg);
        if (y == RLX_REBUILD_DROP) {
            map[i] = -1;
            continue;
        }
        if (y == RLX_REBUILD_COPY)
            y = rlx_copy_node(out, g, i, map);
        if (y < 0)
            goto fail;
        map[i] = y;
    }
    if (rlx_copy_outputs(out, g, map) != RLX_OK)
        goto fail;
    free(map);
    return out;
fail:
    free(map);
    rlx_graph_free(out);
    return NULL;
}
