/* loss.c - the losses a training graph ends in: cross-entropy as its fused
 * row op (the [rows, classes] probabilities are never stored; the gradient
 * is one pass over the logits) and a mean over the rows, MSE in primitives. */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* Cross-entropy as torch.nn.functional.cross_entropy computes it for class
 * indices: per row -(1 - s) log p[label] - s/C sum_c log p[c], averaged over
 * the rows whose label is not ignore_index (NaN when every row is). */
rlx_node rlx_cross_entropy(rlx_graph *g, rlx_node logits, rlx_node labels, int64_t ignore_index, double label_smoothing)
{
    if (!g)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "cross_entropy: graph is NULL"), -1;
    if (logits < 0 || logits >= g->n_nodes || labels < 0 || labels >= g->n_nodes)
        return rlx_graph_fail(g, g->error != RLX_OK ? g->error : RLX_ERR_INVALID_ARGUMENT,
                              "cross_entropy: logits or labels is not a node");
    rlx_shape sl = g->nodes[logits].shape, sy = g->nodes[labels].shape;
    rlx_dtype t = g->nodes[logits].dtype, it = g->nodes[labels].dtype;
    if (!rlx_dtype_is_float(t) || (it != RLX_I64 && it != RLX_I32))
        return rlx_graph_fail(g, RLX_ERR_DTYPE,
                              "cross_entropy: logits must be float and labels i64 or i32 (got %s, %s)",
                              rlx_dtype_name(t), rlx_dtype_name(it));
    bool fits = sl.ndim == sy.ndim + 1;
    for (int i = 0; fits && i < sy.ndim; i++)
        fits = sl.dims[i] == sy.dims[i];
    if (!fits)
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "cross_entropy: logits must be labels' shape plus a class axis");
    if (!(label_smoothing >= 0 && label_smoothing <= 1))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "cross_entropy: label smoothing %g is outside [0, 1]",
                              label_smoothing);
    /* one fused op per row (its gradient is one pass too), then the mean
     * over the rows not ignored */
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = RLX_OP_CROSS_ENTROPY;
    p.n_in = 2;
    p.in[0] = logits, p.in[1] = labels;
    p.attrs.xent.ignore_index = ignore_index;
    p.attrs.xent.smoothing = label_smoothing;
    rlx_node per = rlx_graph_add(g, &p);
    rlx_node keep = rlx_not(g, rlx_equal(g, labels, rlx_scalar(g, it, (double)ignore_index)));
    rlx_node w = rlx_cast(g, keep, rlx_cross_entropy_loss_dtype(t));
    int axes[RLX_MAX_DIMS];
    for (int i = 0; i < sy.ndim; i++)
        axes[i] = i;
    rlx_node total = sy.ndim ? rlx_reduce_sum(g, per, sy.ndim, axes, 0) : per;
    rlx_node count = sy.ndim ? rlx_reduce_sum(g, w, sy.ndim, axes, 0) : w;
    return rlx_div(g, total, count);
}

rlx_node rlx_mse_loss(rlx_graph *g, rlx_node pred, rlx_node target)
{
    rlx_node d = rlx_sub(g, pred, target);
    if (d < 0)
        return -1;
    int axes[RLX_MAX_DIMS], r = g->nodes[d].shape.ndim;
    for (int i = 0; i < r; i++)
        axes[i] = i;
    return rlx_reduce_mean(g, rlx_mul(g, d, d), r, axes, 0);
}
