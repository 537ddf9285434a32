/* grad.c - reverse-mode differentiation: rlx_gradients appends to a graph
 * the nodes computing the gradient of a scalar loss with respect to chosen
 * leaves, by one sweep over the nodes in reverse order applying each op's
 * rule (its row's `grad`, grad_rules.c).  Node ids are a topological order
 * (an operand always has a smaller id), so when the sweep reaches a node
 * every consumer has already added its share to that node's gradient. */
#include <stdlib.h>
#include <string.h>

#include "ir/grad.h"

/* Gradients along nodes [lo, hi): grad[i] holds the gradient of node i (-1:
 * none yet); active[i] says whether node i lies on a path that needs one.
 * Both arrays are indexed by node id and have hi entries. */
static rlx_status sweep(rlx_graph *g, rlx_node lo, rlx_node hi, const bool *active, rlx_node *grad)
{
    for (rlx_node i = hi - 1; i >= lo; i--) {
        if (!active[i] || grad[i] < 0)
            continue;
        rlx_node_data nd = g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(nd.op);
        if (info->flags & RLX_OPF_LEAF)
            continue;
        char lbl[160];
        if (!info->grad) {
            rlx_graph_fail(g, RLX_ERR_UNSUPPORTED, "gradient through %s: no gradient rule for %s",
                           rlx_node_label(g, i, lbl, sizeof lbl), info->name);
            return RLX_ERR_UNSUPPORTED;
        }
        bool need[RLX_MAX_INPUTS];
        rlx_node dx[RLX_MAX_INPUTS];
        for (int j = 0; j < nd.n_in; j++) {
            rlx_node in = nd.in[j];
            need[j] = active[in]; /* an operand used twice: one gradient per use, summed below */
            dx[j] = -1;
        }
        rlx_status s = info->grad(g, i, grad[i], need, dx);
        if (s == RLX_OK && g->error != RLX_OK)
            s = g->error;
        if (s != RLX_OK)
            return s;
        for (int j = 0; j < nd.n_in; j++) {
            if (!need[j] || dx[j] < 0)
                continue;
            rlx_node in = nd.in[j];
            grad[in] = grad[in] < 0 ? dx[j] : rlx_add(g, grad[in], dx[j]);
            if (grad[in] < 0)
                return g->error != RLX_OK ? g->error : RLX_ERR_INTERNAL;
        }
    }
    return RLX_OK;
}

static bool carries_gradient(const rlx_node_data *n) { return rlx_dtype_is_float(n->dtype); }

rlx_status rlx_grad_through(rlx_graph *g, rlx_node n, rlx_node lo, rlx_node root, rlx_node dy, const bool *need,
                            rlx_node *dx)
{
    rlx_node_data nd = g->nodes[n];
    return rlx_grad_through_inputs(g, nd.n_in, nd.in, lo, root, dy, need, dx);
}

rlx_status rlx_grad_through_inputs(rlx_graph *g, int n_in, const rlx_node *in, rlx_node lo, rlx_node root, rlx_node dy,
                                   const bool *need, rlx_node *dx)
{
    rlx_node hi = g->n_nodes;
    bool *active = calloc((size_t)hi, sizeof *active);
    rlx_node *grad = malloc((size_t)hi * sizeof *grad);
    if (!active || !grad) {
        free(active), free(grad);
        rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "gradient: out of memory");
        return RLX_ERR_OUT_OF_MEMORY;
    }
    for (int j = 0; j < n_in; j++)
        if (need[j])
            active[in[j]] = true;
    for (rlx_node i = lo; i < hi; i++) {
        const rlx_node_data *c = &g->nodes[i];
        for (int j = 0; j < c->n_in && !active[i]; j++)
            active[i] = active[c->in[j]] && carries_gradient(c);
    }
    for (rlx_node i = 0; i < hi; i++)
        grad[i] = -1;
    grad[root] = dy;
    rlx_status s = sweep(g, lo, hi, active, grad);
    for (int j = 0; j < n_in && s == RLX_OK; j++) {
        bool first = true; /* an operand used twice: its whole gradient goes to one use */
        for (int k = 0; k < j; k++)
            first &= in[k] != in[j];
        if (need[j] && first)
            dx[j] = grad[in[j]];
    }
    free(active);
    free(grad);
    return s;
}

rlx_status rlx_gradients(rlx_graph *g, rlx_node loss, int n, const rlx_node *wrt, rlx_node *grads)
{
    if (!g)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gradients: graph is NULL");
    if (g->error != RLX_OK)
        return rlx_set_error(g->error, "%s", g->error_msg);
    if (n < 0 || (n > 0 && (!wrt || !grads)))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gradients: bad parameter list");
    if (loss < 0 || loss >= g->n_nodes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gradients: the loss is not a node of the graph (id %d)", loss);
    char lbl[160];
    const rlx_node_data *ln = &g->nodes[loss];
    if (!rlx_dtype_is_float(ln->dtype) || rlx_shape_numel(&ln->shape) != 1)
        return rlx_set_error(RLX_ERR_SHAPE, "gradients: the loss %s must be a float tensor of one element",
                             rlx_node_label(g, loss, lbl, sizeof lbl));
    for (int i = 0; i < n; i++) {
        if (wrt[i] < 0 || wrt[i] >= g->n_nodes)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gradients: parameter %d is not a node (id %d)", i, wrt[i]);
        const rlx_node_data *p = &g->nodes[wrt[i]];
        if (!rlx_dtype_is_float(p->dtype))
            return rlx_set_error(RLX_ERR_DTYPE, "gradients: %s is %s; only float tensors have gradients",
                                 rlx_node_label(g, wrt[i], lbl, sizeof lbl), rlx_dtype_name(p->dtype));
    }
    rlx_node hi = loss + 1;
    bool *reach = calloc((size_t)hi, sizeof *reach), *useful = calloc((size_t)hi, sizeof *useful);
    rlx_node *grad = malloc((size_t)hi * sizeof *grad);
    if (!reach || !useful || !grad) {
        free(reach), free(useful), free(grad);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gradients: out of memory");
    }
    /* active: depends on a parameter (forward) and feeds the loss (backward) */
    for (int i = 0; i < n; i++)
        if (wrt[i] < hi)
            reach[wrt[i]] = true;
    for (rlx_node i = 0; i < hi; i++) {
        const rlx_node_data *c = &g->nodes[i];
        for (int j = 0; j < c->n_in && !reach[i]; j++)
            reach[i] = reach[c->in[j]] && carries_gradient(c);
    }
    useful[loss] = true;
    for (rlx_node i = hi - 1; i >= 0; i--) {
        grad[i] = -1;
        if (!useful[i])
            continue;
        const rlx_node_data *c = &g->nodes[i];
        for (int j = 0; j < c->n_in; j++)
            useful[c->in[j]] = true;
    }
    for (rlx_node i = 0; i < hi; i++)
        reach[i] = reach[i] && useful[i];
    rlx_status s = RLX_OK;
    if (reach[loss]) {
        grad[loss] = rlx_expand(g, rlx_scalar(g, ln->dtype, 1.0), ln->shape.ndim, ln->shape.dims);
        s = grad[loss] < 0 ? g->error : sweep(g, 0, hi, reach, grad);
    }
    for (int i = 0; i < n && s == RLX_OK; i++) {
        rlx_node p = wrt[i];
        rlx_node d = p < hi ? grad[p] : -1;
        if (d < 0) { /* the loss does not depend on it: a zero gradient */
            rlx_node_data pd = g->nodes[p];
            d = rlx_expand(g, rlx_scalar(g, pd.dtype, 0.0), pd.shape.ndim, pd.shape.dims);
        }
        if (d < 0) {
            s = g->error;
            break;
        }
        grads[i] = d;
    }
    free(reach), free(useful), free(grad);
    if (s != RLX_OK)
        return rlx_set_error(s, "%s", g->error_msg[0] ? g->error_msg : "gradients: a builder failed");
    return RLX_OK;
}
