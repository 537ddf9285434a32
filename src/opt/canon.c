/* canon.c - canonical forms: a decomposition of an op RLX has natively is
 * rewritten into that op, so that fusion and the backends see it.
 *
 * GELU spelled out with Erf, as exporters write it for ONNX opsets without
 * a Gelu op (PyTorch: (x * (erf(x / sqrt 2) + 1)) * 0.5; Hugging Face
 * models: x * 0.5 * (1 + erf(x / sqrt 2))): any grouping of the three
 * factors x, 0.5 and 1 + erf(.), either operand order of every product
 * and sum, and x * (1 / sqrt 2) for the division.  The rewritten product
 * must keep x's shape and dtype (a constant that broadcasts x is not a
 * scalar factor).  What the rewrite leaves unused, the next dce removes. */
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

/* sqrt 2 and its inverse as 16-bit floats are off by up to 2e-4. */
#define SQRT2_REL 1e-3

/* x when id is x / sqrt 2 or x * (1 / sqrt 2); else -1. */
static rlx_node erf_arg(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_DIV && is_scalar(g, n->in[1], M_SQRT2, SQRT2_REL))
        return n->in[0];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (is_scalar(g, n->in[j], M_SQRT1_2, SQRT2_REL))
                return n->in[1 - j];
    return -1;
}

/* x when id is 1 + erf(x / sqrt 2); else -1. */
static rlx_node one_plus_erf(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *e = &g->nodes[n->in[1 - j]];
        if (is_scalar(g, n->in[j], 1.0, 0) && e->op == RLX_OP_ERF)
            return erf_arg(g, e->in[0]);
    }
    return -1;
}

/* Whether the three factors are x, 0.5 and 1 + erf(x / sqrt 2), in any
 * order; *x set. */
static bool gelu_factors(const rlx_graph *g, const rlx_node f[3], rlx_node *x)
{
    for (int h = 0; h < 3; h++) {
        if (!is_scalar(g, f[h], 0.5, 0))
            continue;
        for (int e = 0; e < 3; e++) {
            if (e == h)
                continue;
            rlx_node v = f[3 - h - e];
            if (one_plus_erf(g, f[e]) == v) {
                *x = v;
                return true;
            }
        }
    }
    return false;
}

/* x when node id is a GELU of x written out; else -1. */
static rlx_node match_gelu(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *r = &g->nodes[id];
    if (r->op != RLX_OP_MUL)
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *inner = &g->nodes[r->in[j]];
        if (inner->op != RLX_OP_MUL)
            continue;
        rlx_node f[3] = {inner->in[0], inner->in[1], r->in[1 - j]}, x;
        if (!gelu_factors(g, f, &x))
            continue;
        const rlx_node_data *xn = &g->nodes[x];
        if (rlx_dtype_is_float(xn->dtype) && xn->dtype == r->dtype && rlx_shape_equal(&xn->shape, &r->shape))
            return x;
    }
    return -1;
}

rlx_graph *rlx_pass_canon(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    int n = g->n_nodes, rewritten = 0;
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_graph *out = rlx_graph_new();
    if (!map || !out)
        goto fail;
    for (int i = 0; i < n; i++) {
        rlx_node x = match_gelu(g, i);
        if (x >= 0) {
            map[i] = rlx_gelu(out, map[x]);
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
        fprintf(stderr, "[rlx canon] %d GELU%s written out with Erf rewritten as GELU\n", rewritten,
                rewritten == 1 ? "" : "s");
    free(map);
    return out;
fail:
    free(map);
    rlx_graph_free(out);
    return NULL;
}
