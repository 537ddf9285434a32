/* canon.c - canonical forms: a decomposition of an op RLX has natively is
 * rewritten into that op, so that fusion and the backends see it.  The
 * forms are those exporters write for ONNX opsets without the op:
 *
 *   GELU       x * 0.5 * (1 + erf(x / sqrt 2))
 *              (PyTorch: (x * (erf(x / sqrt 2) + 1)) * 0.5)
 *   GELU tanh  0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
 *              with x^3 as x * (x * x), (x * x) * x or pow(x, 3)
 *   SiLU       x * sigmoid(x)
 *
 * in any grouping of the three GELU factors, either operand order of every
 * product and sum, and x * (1 / sqrt 2) for the division.  The rewritten
 * product must keep x's shape and dtype (a constant that broadcasts x is
 * not a scalar factor).  What the rewrite leaves unused, the next dce
 * removes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "opt/pass.h"

/* A one-element constant equal to want within rel (relative). */
static bool is_scalar(const rlx_graph *g, rlx_node id, double want, double rel)
{
    double v;
    return rlx_scalar_value(&g->nodes[id], &v) && fabs(v - want) <= rel * fabs(want);
}

/* Irrational constants (sqrt 2, sqrt(2 / pi)) stored as 16-bit floats are
 * off by up to 2e-4, relative. */
#define CONST_REL 1e-3

/* x when id is x / sqrt 2 or x * (1 / sqrt 2); else -1. */
static rlx_node erf_arg(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_DIV && is_scalar(g, n->in[1], M_SQRT2, CONST_REL))
        return n->in[0];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (is_scalar(g, n->in[j], M_SQRT1_2, CONST_REL))
                return n->in[1 - j];
    return -1;
}

/* x when id is x * (x * x), (x * x) * x or pow(x, 3); else -1. */
static rlx_node cube_of(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_POW)
        return is_scalar(g, n->in[1], 3.0, 0) ? n->in[0] : -1;
    if (n->op != RLX_OP_MUL)
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *sq = &g->nodes[n->in[j]];
        if (sq->op == RLX_OP_MUL && sq->in[0] == sq->in[1] && sq->in[0] == n->in[1 - j])
            return n->in[1 - j];
    }
    return -1;
}

/* The other operand of a product with the scalar c (relative tolerance
 * rel); -1 if id is no such product. */
static rlx_node times_scalar(const rlx_graph *g, rlx_node id, double c, double rel)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (is_scalar(g, n->in[j], c, rel))
                return n->in[1 - j];
    return -1;
}

/* x when id is sqrt(2 / pi) * (x + 0.044715 * x^3); else -1. */
static rlx_node tanh_arg(const rlx_graph *g, rlx_node id)
{
    rlx_node sum = times_scalar(g, id, 0.79788456080286535588, CONST_REL);
    const rlx_node_data *n = sum >= 0 ? &g->nodes[sum] : NULL;
    if (!n || n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        rlx_node cube = times_scalar(g, n->in[1 - j], 0.044715, 1e-3);
        if (cube >= 0 && cube_of(g, cube) == n->in[j])
            return n->in[j];
    }
    return -1;
}

/* x when id is 1 + erf(x / sqrt 2) (*op GELU) or 1 + tanh(tanh_arg)
 * (*op GELU_TANH); else -1. */
static rlx_node one_plus(const rlx_graph *g, rlx_node id, rlx_op *op)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *e = &g->nodes[n->in[1 - j]];
        if (!is_scalar(g, n->in[j], 1.0, 0))
            continue;
        *op = e->op == RLX_OP_ERF ? RLX_OP_GELU : RLX_OP_GELU_TANH;
        if (e->op == RLX_OP_ERF)
            return erf_arg(g, e->in[0]);
        if (e->op == RLX_OP_TANH)
            return tanh_arg(g, e->in[0]);
    }
    return -1;
}

/* Whether the three factors are x, 0.5 and one_plus(x), in any order; *x
 * and *op set. */
static bool gelu_factors(const rlx_graph *g, const rlx_node f[3], rlx_node *x, rlx_op *op)
{
    for (int h = 0; h < 3; h++) {
        if (!is_scalar(g, f[h], 0.5, 0))
            continue;
        for (int e = 0; e < 3; e++) {
            if (e == h)
                continue;
            rlx_node v = f[3 - h - e];
            if (one_plus(g, f[e], op) == v) {
                *x = v;
                return true;
            }
        }
    }
    return false;
}

/* x when node id is a GELU (either form) or SiLU of x written out, *op the
 * native op; else -1. */
static rlx_node match(const rlx_graph *g, rlx_node id, rlx_op *op)
{
    const rlx_node_data *r = &g->nodes[id];
    if (r->op != RLX_OP_MUL)
        return -1;
    rlx_node x = -1;
    for (int j = 0; j < 2 && x < 0; j++) {
        const rlx_node_data *inner = &g->nodes[r->in[j]];
        if (inner->op == RLX_OP_SIGMOID && inner->in[0] == r->in[1 - j]) {
            x = r->in[1 - j];
            *op = RLX_OP_SILU;
        } else if (inner->op == RLX_OP_MUL) {
            rlx_node f[3] = {inner->in[0], inner->in[1], r->in[1 - j]};
            if (!gelu_factors(g, f, &x, op))
                x = -1;
        }
    }
    if (x < 0)
        return -1;
    const rlx_node_data *xn = &g->nodes[x];
    bool keeps = rlx_dtype_is_float(xn->dtype) && xn->dtype == r->dtype && rlx_shape_equal(&xn->shape, &r->shape);
    return keeps ? x : -1;
}

rlx_graph *rlx_pass_canon(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    int n = g->n_nodes, rewritten = 0;
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_graph *out = rlx_graph_new();
    if (!map || !out)
        goto fail;
    for (int i = 0; i < n; i++) {
        rlx_op op;
        rlx_node x = match(g, i, &op);
        if (x >= 0) {
            map[i] = op == RLX_OP_SILU ? rlx_silu(out, map[x])
                     : op == RLX_OP_GELU_TANH ? rlx_gelu_tanh(out, map[x]) : rlx_gelu(out, map[x]);
            rewritten++;
        } else {
            map[i] = rlx_copy_node(out, g, i, map);
        }
        if (map[i] < 0)
            goto fail;
    }
    if (rlx_copy_outputs(out, g, map) != RLX_OK)
        goto fail;
    if (rewritten && ctx && ctx->verbose)
        fprintf(stderr, "[rlx canon] %d activation%s written out (GELU, GELU tanh, SiLU) rewritten as one op\n",
                rewritten, rewritten == 1 ? "" : "s");
    free(map);
    return out;
fail:
    free(map);
    rlx_graph_free(out);
    return NULL;
}
