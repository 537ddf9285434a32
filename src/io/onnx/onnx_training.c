/* onnx_training.c - the ai.onnx.preview.training domain: the optimizer
 * steps Adagrad, Adam and Momentum as elementwise graph ops (RLX's fused
 * optimizer ops follow other conventions: AdamW's decoupled decay, no
 * Adagrad, no first-step beta rule), and Gradient through RLX's
 * reverse-mode differentiation (rlx_gradients).  Each optimizer node
 * updates N tensors at once: inputs R, T, then N of each per-tensor group
 * (X, G, then the states), outputs N of each (X_new, then the new states);
 * formulas from the operator specification. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

/* The rows of this file are looked up as DOMAIN.OpType. */
#define TRAINING(op) "ai.onnx.preview.training." op

/* Per-tensor groups of an optimizer node with `states` state inputs per
 * tensor: N, after checking the counts of inputs and outputs. */
static rlx_status optimizer_groups(onnx_node *n, int states, int *N)
{
    int per = 2 + states;
    if (n->n_in < 2 + per || (n->n_in - 2) % per)
        return onnx_fail(n, RLX_ERR_FORMAT, "takes R, T and %d inputs per tensor (X, G, states); %d inputs given", per,
                         n->n_in);
    *N = (n->n_in - 2) / per;
    if (n->n_out > (1 + states) * *N)
        return onnx_fail(n, RLX_ERR_FORMAT, "has %d outputs, at most %d for %d tensors", n->n_out, (1 + states) * *N,
                         *N);
    for (int i = 0; i < n->n_in; i++)
        if (!n->in[i])
            return onnx_fail(n, RLX_ERR_FORMAT, "input %d is missing", i);
    rlx_dtype t = onnx_in_dtype(n, 2);
    if (!onnx_dtype_is_float(t) || onnx_in_dtype(n, 1) != RLX_I64)
        return onnx_fail(n, RLX_ERR_DTYPE, "X must be a float tensor and T an int64 (got %s and %s)", rlx_dtype_name(t),
                         rlx_dtype_name(onnx_in_dtype(n, 1)));
    int64_t d[RLX_MAX_DIMS];
    if (onnx_in_shape(n, 0, d) != 0 || onnx_in_shape(n, 1, d) != 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "R and T must be scalars");
    return RLX_OK;
}

/* A scalar in X's dtype, and an input cast to it. */
static rlx_node num(onnx_node *n, rlx_dtype t, double v) { return onnx_scalar(n, t, v); }
static rlx_node in_as(onnx_node *n, int i, rlx_dtype t)
{
    rlx_node x = onnx_in(n, i);
    return onnx_in_dtype(n, i) == t ? x : rlx_cast(n->c->g, x, t);
}

/* norm_coefficient * X + G */
static rlx_node regularized(onnx_node *n, rlx_node x, rlx_node gr, double norm, rlx_dtype t)
{
    return norm == 0 ? gr : rlx_add(n->c->g, rlx_mul(n->c->g, num(n, t, norm), x), gr);
}

static rlx_status h_adagrad(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int N;
    rlx_status st = optimizer_groups(n, 1, &N);
    if (st != RLX_OK)
        return st;
    double decay = onnx_attr_f(n, "decay_factor", 0), eps = onnx_attr_f(n, "epsilon", 1e-6),
           norm = onnx_attr_f(n, "norm_coefficient", 0);
    rlx_dtype t = onnx_in_dtype(n, 2);
    /* r = R / (1 + T * decay_factor) */
    rlx_node r = rlx_div(g, in_as(n, 0, t), rlx_add(g, num(n, t, 1), rlx_mul(g, in_as(n, 1, t), num(n, t, decay))));
    for (int i = 0; i < N && st == RLX_OK; i++) {
        rlx_node x = onnx_in(n, 2 + i), gr = regularized(n, x, in_as(n, 2 + N + i, t), norm, t);
        rlx_node h = rlx_add(g, in_as(n, 2 + 2 * N + i, t), rlx_mul(g, gr, gr));
        rlx_node adapt = rlx_add(g, rlx_sqrt(g, h), num(n, t, eps));
        st = onnx_out_node(n, i, rlx_sub(g, x, rlx_div(g, rlx_mul(g, r, gr), adapt)));
        if (st == RLX_OK)
            st = onnx_out_node(n, N + i, h);
    }
    return st;
}

static rlx_status h_adam(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int N;
    rlx_status st = optimizer_groups(n, 2, &N);
    if (st != RLX_OK)
        return st;
    double alpha = onnx_attr_f(n, "alpha", 0.9), beta = onnx_attr_f(n, "beta", 0.999),
           eps = onnx_attr_f(n, "epsilon", 1e-6), norm = onnx_attr_f(n, "norm_coefficient", 0),
           post = onnx_attr_f(n, "norm_coefficient_post", 0);
    if (alpha == 1 || beta == 1)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "alpha and beta must not be 1 (alpha %g, beta %g)", alpha, beta);
    rlx_dtype t = onnx_in_dtype(n, 2);
    /* R_adjusted = R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0, else R */
    rlx_node R = in_as(n, 0, t), T = in_as(n, 1, t);
    rlx_node bias = rlx_div(g, rlx_sqrt(g, rlx_sub(g, num(n, t, 1), rlx_pow(g, num(n, t, beta), T))),
                            rlx_sub(g, num(n, t, 1), rlx_pow(g, num(n, t, alpha), T)));
    rlx_node radj = rlx_where(g, rlx_greater(g, T, num(n, t, 0)), rlx_mul(g, R, bias), R);
    for (int i = 0; i < N && st == RLX_OK; i++) {
        rlx_node x = onnx_in(n, 2 + i), gr = regularized(n, x, in_as(n, 2 + N + i, t), norm, t);
        rlx_node v =
            rlx_add(g, rlx_mul(g, num(n, t, alpha), in_as(n, 2 + 2 * N + i, t)), rlx_mul(g, num(n, t, 1 - alpha), gr));
        rlx_node h = rlx_add(g, rlx_mul(g, num(n, t, beta), in_as(n, 2 + 3 * N + i, t)),
                             rlx_mul(g, num(n, t, 1 - beta), rlx_mul(g, gr, gr)));
        rlx_node hs = rlx_add(g, rlx_sqrt(g, h), num(n, t, eps));
        rlx_node xn = rlx_sub(g, x, rlx_mul(g, radj, rlx_div(g, v, hs)));
        st = onnx_out_node(n, i, post == 0 ? xn : rlx_mul(g, num(n, t, 1 - post), xn));
        if (st == RLX_OK)
            st = onnx_out_node(n, N + i, v);
        if (st == RLX_OK)
            st = onnx_out_node(n, 2 * N + i, h);
    }
    return st;
}

static rlx_status h_momentum(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int N;
    rlx_status st = optimizer_groups(n, 1, &N);
    if (st != RLX_OK)
        return st;
    const char *req[] = {"alpha", "beta", "norm_coefficient", "mode"};
    for (int i = 0; i < 4; i++)
        if (!onnx_attr(n, req[i]))
            return onnx_fail(n, RLX_ERR_FORMAT, "attribute '%s' is required", req[i]);
    double alpha = onnx_attr_f(n, "alpha", 0), beta = onnx_attr_f(n, "beta", 0),
           norm = onnx_attr_f(n, "norm_coefficient", 0);
    char mode[32];
    onnx_attr_s(n, "mode", "", mode, sizeof mode);
    bool nesterov = !strcmp(mode, "nesterov");
    if (!nesterov && strcmp(mode, "standard"))
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "mode \"%s\" (standard or nesterov)", mode);
    rlx_dtype t = onnx_in_dtype(n, 2);
    rlx_node R = in_as(n, 0, t), T = in_as(n, 1, t);
    /* the first step (T == 0) takes the whole gradient: beta is 1 there */
    rlx_node b = rlx_where(g, rlx_greater(g, T, num(n, t, 0)), num(n, t, beta), num(n, t, 1));
    for (int i = 0; i < N && st == RLX_OK; i++) {
        rlx_node x = onnx_in(n, 2 + i), gr = regularized(n, x, in_as(n, 2 + N + i, t), norm, t);
        rlx_node v = rlx_add(g, rlx_mul(g, num(n, t, alpha), in_as(n, 2 + 2 * N + i, t)), rlx_mul(g, b, gr));
        rlx_node step = nesterov ? rlx_add(g, gr, rlx_mul(g, num(n, t, alpha), v)) : v;
        st = onnx_out_node(n, i, rlx_sub(g, x, rlx_mul(g, R, step)));
        if (st == RLX_OK)
            st = onnx_out_node(n, N + i, v);
    }
    return st;
}

/* Gradient: d y / d x for each name in xs, where y and the xs are values
 * of the graph so far (ONNX's Gradient differentiates the graph that
 * computes y).  A y of several elements is summed first (a seed of ones). */
static rlx_status h_gradient(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    const Onnx__AttributeProto *xs = onnx_attr(n, "xs");
    char yname[512];
    if (!xs || !xs->n_strings || !onnx_attr_s(n, "y", NULL, yname, sizeof yname))
        return onnx_fail(n, RLX_ERR_FORMAT, "attributes 'xs' (strings) and 'y' (a string) are required");
    if ((int)xs->n_strings != n->n_out)
        return onnx_fail(n, RLX_ERR_FORMAT, "%zu names in xs for %d outputs", xs->n_strings, n->n_out);
    if (xs->n_strings > 64)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "more than 64 names in xs");
    onnx_value *yv = onnx_lookup(n->c, yname);
    rlx_node y = yv ? onnx_node_of(n->c, yv) : -1;
    if (y < 0)
        return onnx_fail(n, RLX_ERR_FORMAT, "y '%s' is no tensor computed before this node", yname);
    rlx_node wrt[64], grads[64];
    for (size_t i = 0; i < xs->n_strings; i++) {
        char xn[512];
        size_t l = xs->strings[i].len < sizeof xn - 1 ? xs->strings[i].len : sizeof xn - 1;
        if (l)
            memcpy(xn, xs->strings[i].data, l);
        xn[l] = 0;
        onnx_value *xv = onnx_lookup(n->c, xn);
        if (!xv || (wrt[i] = onnx_node_of(n->c, xv)) < 0)
            return onnx_fail(n, RLX_ERR_FORMAT, "xs[%zu] '%s' is no tensor of the graph", i, xn);
    }
    int64_t d[RLX_MAX_DIMS];
    int nd = onnx_shape(n, y, d);
    if (onnx_numel(nd, d) != 1)
        y = rlx_reduce_sum(g, y, 0, NULL, 0);
    if (rlx_gradients(g, y, (int)xs->n_strings, wrt, grads) != RLX_OK) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
        return onnx_fail(n, rlx_last_status_or(RLX_ERR_UNSUPPORTED), "%s", msg);
    }
    rlx_status st = RLX_OK;
    for (int i = 0; i < n->n_out && st == RLX_OK; i++)
        st = onnx_out_node(n, i, grads[i]);
    return st;
}

const onnx_op onnx_training_ops[] = {
    ONNX_OP(TRAINING("Adagrad"), h_adagrad, 5),
    ONNX_OP(TRAINING("Adam"), h_adam, 6),
    ONNX_OP(TRAINING("Momentum"), h_momentum, 5),
    ONNX_OP(TRAINING("Gradient"), h_gradient, 0),
    ONNX_OP_END,
};
