/* canon_flat.c - a projection of tokens flattened to rows and reshaped
 * back (GPT-2's Conv1D, exported as Reshape -> Gemm -> Reshape) becomes
 * the projection of the tokens themselves:
 *
 *   reshape(reshape(x, [M, K]) @ W [+ b], x's leading dims + [N])
 *     ->  x @ W [+ b]
 *
 * where x is [..., K] with at least three axes, M the product of its
 * leading dims, W 2-d (either orientation) and b a vector of the last
 * axis.  The same arithmetic, one row at a time; what the rewrite buys is
 * the shape: the cut rule (canon_split.c) and fusion look for products of
 * the tokens, so GPT-2's qkv split and attention become one attention
 * block.  The product and the sum must have no reader but the reshape
 * back, so nothing is computed twice. */
#include "opt/canon.h"

bool canon_unflatten_projection(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    const rlx_node_data *r = &g->nodes[id];
    if (r->op != RLX_OP_RESHAPE)
        return false;
    /* r's input: x2 @ W, or (x2 @ W) + b, read by r alone */
    rlx_node p = r->in[0], mm = p, bias = -1;
    const rlx_node_data *pn = &g->nodes[p];
    if (pn->op == RLX_OP_ADD && (pn->shape.ndim != 2 || (bias = canon_biased_product(g, p, false, &mm)) < 0))
        return false;
    const rlx_node_data *m = &g->nodes[mm];
    if (m->op != RLX_OP_MATMUL || m->attrs.matmul.trans_a || m->shape.ndim != 2 || g->nodes[m->in[1]].shape.ndim != 2 ||
        canon_readers(g, p, NULL) != 1)
        return false;
    /* x2 = reshape(x, [M, K]) with x [..., K] of rank >= 3 */
    const rlx_node_data *f = &g->nodes[m->in[0]];
    if (f->op != RLX_OP_RESHAPE)
        return false;
    rlx_node x = f->in[0];
    const rlx_shape *xs = &g->nodes[x].shape;
    int rank = xs->ndim;
    if (rank < 3 || xs->dims[rank - 1] != f->shape.dims[1] || g->nodes[x].dtype != f->dtype)
        return false;
    /* r must restore x's leading dims around the N columns */
    if (r->shape.ndim != rank || r->shape.dims[rank - 1] != m->shape.dims[1])
        return false;
    for (int a = 0; a + 1 < rank; a++)
        if (r->shape.dims[a] != xs->dims[a])
            return false;
    *y = rlx_matmul(out, map[x], map[m->in[1]], 0, m->attrs.matmul.trans_b);
    if (*y >= 0 && bias >= 0)
        *y = pn->in[0] == mm ? rlx_add(out, *y, map[bias]) : rlx_add(out, map[bias], *y);
    return true;
}
