/* recompute.c - activation checkpointing: a cheap forward value that the
 * backward reads (an activation, a norm's output, a softmax's
 * probabilities) is computed again just before its first backward reader
 * instead of being kept from the forward, so it dies where the forward
 * stops using it.  Only values whose operands the backward keeps anyway
 * (or leaves) are taken, so recomputing never lengthens another lifetime.
 * The copies are marked so that CSE does not merge them back. */
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"
#include "train/train.h"

typedef struct recompute_ctx {
    rlx_node first_backward; /* ids from here on are the backward's */
    bool *take;              /* forward nodes to recompute */
    rlx_node *copy;          /* each one's copy in out, once made (-1 before) */
    int count;
    size_t bytes;
} recompute_ctx;

static bool cheap(const rlx_node_data *n)
{
    const rlx_op_info *i = rlx_op_info_of(n->op);
    if (!rlx_dtype_is_float(n->dtype) || (i->flags & (RLX_OPF_RANDOM | RLX_OPF_STATEFUL)))
        return false;
    return i->kind == RLX_KIND_UNARY || n->op == RLX_OP_SOFTMAX || n->op == RLX_OP_RMS_NORM ||
           n->op == RLX_OP_LAYER_NORM || n->op == RLX_OP_ROPE;
}

static rlx_node place(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    recompute_ctx *c = arg;
    if (id < c->first_backward)
        return RLX_REBUILD_COPY;
    rlx_node_data p = g->nodes[id];
    for (int j = 0; j < p.n_in; j++) {
        rlx_node v = p.in[j];
        if (!c->take[v]) {
            p.in[j] = map[v];
            continue;
        }
        if (c->copy[v] < 0) { /* made here, before its first backward reader */
            rlx_node_data q = g->nodes[v];
            for (int k = 0; k < q.n_in; k++)
                q.in[k] = map[q.in[k]];
            q.recompute = true;
            if ((c->copy[v] = rlx_graph_add(out, &q)) < 0)
                return RLX_REBUILD_FAIL;
            c->count++;
            c->bytes += rlx_node_bytes(&q);
        }
        p.in[j] = c->copy[v];
    }
    return rlx_graph_add(out, &p);
}

rlx_graph *rlx_recompute_activations(const rlx_graph *g, rlx_node first_backward, int *count, size_t *bytes)
{
    int n = g->n_nodes;
    bool *read_back = rlx_calloc((size_t)n + 1, sizeof(bool));
    recompute_ctx c = {first_backward, rlx_calloc((size_t)n + 1, sizeof(bool)),
                       rlx_calloc((size_t)n + 1, sizeof(rlx_node)), 0, 0};
    rlx_graph *out = NULL;
    if (!read_back || !c.take || !c.copy)
        goto done;
    for (rlx_node i = first_backward; i < n; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            read_back[g->nodes[i].in[j]] = true;
    for (rlx_node v = 0; v < first_backward && v < n; v++) {
        const rlx_node_data *nd = &g->nodes[v];
        bool ok = read_back[v] && cheap(nd) && !rlx_graph_is_output(g, v);
        for (int j = 0; ok && j < nd->n_in; j++) {
            const rlx_node_data *in = &g->nodes[nd->in[j]];
            ok = (rlx_op_info_of(in->op)->flags & RLX_OPF_LEAF) || read_back[nd->in[j]];
        }
        c.take[v] = ok;
        c.copy[v] = -1;
    }
    out = rlx_rebuild(g, place, &c);
    if (out) {
        rlx_bound_input *b = NULL;
        int nb = 0;
        if (rlx_bound_inputs_copy(g, &b, &nb) != RLX_OK) {
            rlx_graph_free(out);
            out = NULL;
        } else {
            out->bound = b;
            out->n_bound = nb;
        }
    }
done:
    if (out) {
        *count = c.count;
        *bytes = c.bytes;
    } else {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "recompute: out of memory");
    }
    free(read_back);
    free(c.take);
    free(c.copy);
    return out;
}
