/* recompute.c - activation checkpointing: a cheap forward value that the
 * backward reads (an activation, an elementwise product, a norm's output,
 * a softmax's probabilities, a rotated or transposed copy) is computed
 * again just before its first backward reader instead of being kept from
 * the forward, so it dies where the forward stops using it.  A value is
 * taken when every operand is there in the backward anyway: a leaf, a
 * value the backward keeps, or one that can itself be computed again (a
 * chain, such as SwiGLU's silu(gate) * up from the kept gate and up, or a
 * head's norm, transpose and rotation from its kept projection), so
 * recomputing never lengthens another lifetime.  The copies are marked so
 * that CSE does not merge them back. */
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"
#include "train/train.h"

/* The longest chain of copies one kept value leads to: bounds the extra
 * work and copy_of's recursion, whatever the graph. */
#define RECOMPUTE_MAX_CHAIN 8

typedef struct recompute_ctx {
    const rlx_graph *g;
    rlx_graph *out;
    const rlx_node *map;     /* the rebuild's map of nodes placed so far */
    rlx_node first_backward; /* ids from here on are the backward's */
    bool *can;               /* forward nodes that can be computed again */
    bool *take;              /* those the backward reads: computed again for it */
    rlx_node *copy;          /* each one's copy in out, once made (-1 before) */
    int count;
    size_t bytes;
} recompute_ctx;

/* An op cheap to run again: elementwise, a norm, softmax, rope, or data
 * movement that only reorders (a transpose; a reshape is a view). */
static bool cheap(const rlx_node_data *n)
{
    const rlx_op_info *i = rlx_op_info_of(n->op);
    if (!rlx_dtype_is_float(n->dtype) || (i->flags & (RLX_OPF_RANDOM | RLX_OPF_STATEFUL)))
        return false;
    return i->kind == RLX_KIND_UNARY || i->kind == RLX_KIND_BINARY || n->op == RLX_OP_SOFTMAX ||
           n->op == RLX_OP_RMS_NORM || n->op == RLX_OP_LAYER_NORM || n->op == RLX_OP_ROPE ||
           n->op == RLX_OP_TRANSPOSE || n->op == RLX_OP_RESHAPE;
}

/* v's copy in out, its recomputable operands' copies made first. */
static rlx_node copy_of(recompute_ctx *c, rlx_node v)
{
    if (c->copy[v] >= 0)
        return c->copy[v];
    rlx_node_data q = c->g->nodes[v];
    for (int k = 0; k < q.n_in; k++) {
        rlx_node u = q.in[k];
        q.in[k] = c->can[u] ? copy_of(c, u) : c->map[u];
        if (q.in[k] < 0)
            return -1;
    }
    q.recompute = true;
    if ((c->copy[v] = rlx_graph_add(c->out, &q)) < 0)
        return -1;
    if (!rlx_node_is_view(c->out, c->copy[v], NULL)) {
        c->count++;
        c->bytes += rlx_node_bytes(&q);
    }
    return c->copy[v];
}

static rlx_node place(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    recompute_ctx *c = arg;
    if (id < c->first_backward)
        return RLX_REBUILD_COPY;
    c->out = out;
    c->map = map;
    rlx_node_data p = g->nodes[id];
    for (int j = 0; j < p.n_in; j++) {
        rlx_node v = p.in[j];
        if (!c->take[v]) {
            p.in[j] = map[v];
            continue;
        }
        if ((p.in[j] = copy_of(c, v)) < 0) /* made here, before its first backward reader */
            return RLX_REBUILD_FAIL;
    }
    return rlx_graph_add(out, &p);
}

rlx_graph *rlx_recompute_activations(const rlx_graph *g, rlx_node first_backward, int *count, size_t *bytes)
{
    int n = g->n_nodes;
    bool *read_back = rlx_calloc((size_t)n + 1, sizeof(bool));
    recompute_ctx c = {g,
                       NULL,
                       NULL,
                       first_backward,
                       rlx_calloc((size_t)n + 1, sizeof(bool)),
                       rlx_calloc((size_t)n + 1, sizeof(bool)),
                       rlx_calloc((size_t)n + 1, sizeof(rlx_node)),
                       0,
                       0};
    unsigned char *chain = rlx_calloc((size_t)n + 1, 1); /* a copy's length of chain, 0: none */
    rlx_graph *out = NULL;
    if (!read_back || !chain || !c.can || !c.take || !c.copy)
        goto done;
    for (rlx_node i = first_backward; i < n; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            read_back[g->nodes[i].in[j]] = true;
    /* in forward order, so an operand's answer is known: it is there in
     * the backward as a leaf, as a value the backward reads (kept, or
     * itself computed again), or as a copy made on the way */
    for (rlx_node v = 0; v < first_backward && v < n; v++) {
        const rlx_node_data *nd = &g->nodes[v];
        bool ok = cheap(nd) && !rlx_graph_is_output(g, v);
        int len = 1;
        for (int j = 0; ok && j < nd->n_in; j++) {
            rlx_node u = nd->in[j];
            ok = (rlx_op_info_of(g->nodes[u].op)->flags & RLX_OPF_LEAF) || read_back[u] || c.can[u];
            if (c.can[u] && chain[u] + 1 > len)
                len = chain[u] + 1;
        }
        ok = ok && len <= RECOMPUTE_MAX_CHAIN;
        chain[v] = ok ? (unsigned char)len : 0;
        c.can[v] = ok;
        c.take[v] = ok && read_back[v];
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
    free(chain);
    free(c.can);
    free(c.take);
    free(c.copy);
    return out;
}
