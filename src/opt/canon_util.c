/* canon_util.c - what the canon families share (canon.h): scalar
 * constants, last-axis slices, readers of a node, a biased product.  Below
 * canon.c, which drives the pass, and the family files. */
#include <math.h>

#include "opt/canon.h"

bool canon_is_scalar(const rlx_graph *g, rlx_node id, double want, double rel)
{
    double v;
    return rlx_scalar_value(&g->nodes[id], &v) && fabs(v - want) <= rel * fabs(want);
}

/* x when id slices only x's last axis, with step 1, from *start for *len
 * elements; else -1. */
rlx_node canon_last_axis_slice(const rlx_graph *g, rlx_node id, int64_t *start, int64_t *len)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_SLICE)
        return -1;
    const rlx_shape *in = &g->nodes[n->in[0]].shape;
    int r = in->ndim;
    if (r < 1 || n->shape.ndim != r)
        return -1;
    for (int a = 0; a < r; a++) {
        if (n->attrs.slice.step[a] != 1)
            return -1;
        if (a < r - 1 && (n->attrs.slice.start[a] != 0 || n->shape.dims[a] != in->dims[a]))
            return -1;
    }
    *start = n->attrs.slice.start[r - 1];
    *len = n->shape.dims[r - 1];
    return n->in[0];
}

int canon_readers(const rlx_graph *g, rlx_node id, int *cuts)
{
    if (cuts)
        *cuts = 0;
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].node == id)
            return -1;
    int readers = 0;
    int64_t s, n;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (g->nodes[i].in[j] == id) {
                readers++;
                if (cuts)
                    *cuts += canon_last_axis_slice(g, i, &s, &n) == id;
            }
    return readers;
}

rlx_node canon_biased_product(const rlx_graph *g, rlx_node p, bool constant_vector, rlx_node *mm)
{
    const rlx_node_data *pn = &g->nodes[p];
    if (pn->op != RLX_OP_ADD || pn->shape.ndim < 1)
        return -1;
    int64_t n = pn->shape.dims[pn->shape.ndim - 1];
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *b = &g->nodes[pn->in[j]], *m = &g->nodes[pn->in[1 - j]];
        bool bias = b->shape.ndim >= 1 && b->shape.dims[b->shape.ndim - 1] == n;
        for (int a = 0; a + 1 < b->shape.ndim; a++)
            bias = bias && b->shape.dims[a] == 1;
        if (constant_vector)
            bias = bias && b->op == RLX_OP_CONSTANT && b->data && b->shape.ndim == 1;
        if (bias && m->op == RLX_OP_MATMUL && rlx_shape_equal(&m->shape, &pn->shape) &&
            canon_readers(g, pn->in[1 - j], NULL) == 1) {
            *mm = pn->in[1 - j];
            return pn->in[j];
        }
    }
    return -1;
}
