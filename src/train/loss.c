/* loss.c - the losses a training graph ends in, built from primitives so
 * that autodiff, fusion and the backends need nothing new for them. */
#include <stdlib.h>

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
    int64_t C = sl.dims[sl.ndim - 1];
    int last = sl.ndim - 1;
    int64_t *iota = malloc((size_t)(C ? C : 1) * sizeof *iota);
    if (!iota)
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "cross_entropy: out of memory");
    for (int64_t c = 0; c < C; c++)
        iota[c] = c;
    rlx_node classes = rlx_constant(g, RLX_I64, 1, &C, iota, (size_t)C * sizeof *iota);
    free(iota);
    if (it != RLX_I64)
        classes = rlx_cast(g, classes, it);
    rlx_shape col = sy;
    col.dims[col.ndim++] = 1;
    rlx_node lab = rlx_reshape(g, labels, col.ndim, col.dims);
    rlx_node logp = rlx_log_softmax(g, logits, last);
    rlx_node onehot = rlx_cast(g, rlx_equal(g, lab, classes), t);
    rlx_node per = rlx_neg(g, rlx_reduce_sum(g, rlx_mul(g, onehot, logp), 1, &last, 0));
    if (label_smoothing > 0) {
        rlx_node smooth = rlx_neg(g, rlx_reduce_mean(g, logp, 1, &last, 0));
        per = rlx_add(g, rlx_mul(g, per, rlx_scalar(g, t, 1 - label_smoothing)),
                      rlx_mul(g, smooth, rlx_scalar(g, t, label_smoothing)));
    }
    rlx_node keep = rlx_not(g, rlx_equal(g, labels, rlx_scalar(g, it, (double)ignore_index)));
    rlx_node w = rlx_cast(g, keep, t);
    int axes[RLX_MAX_DIMS];
    for (int i = 0; i < sy.ndim; i++)
        axes[i] = i;
    rlx_node total = rlx_reduce_sum(g, rlx_mul(g, per, w), sy.ndim, axes, 0);
    rlx_node count = rlx_reduce_sum(g, w, sy.ndim, axes, 0);
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
