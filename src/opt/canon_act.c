/* canon_act.c - GELU (erf and tanh forms) and SiLU written out become the
 * one op (see canon.c for the forms taken); a float clip beside other
 * elementwise ops becomes max/min, which elementwise chains take. */
#include <math.h>

#include "opt/canon.h"

/* Irrational constants (sqrt 2, sqrt(2 / pi)) stored as 16-bit floats are
 * off by up to 2e-4, relative. */
#define CONST_REL 1e-3

/* x when id is x / sqrt 2 or x * (1 / sqrt 2); else -1. */
static rlx_node erf_arg(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_DIV && canon_is_scalar(g, n->in[1], M_SQRT2, CONST_REL))
        return n->in[0];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (canon_is_scalar(g, n->in[j], M_SQRT1_2, CONST_REL))
                return n->in[1 - j];
    return -1;
}

/* x when id is x * (x * x), (x * x) * x or pow(x, 3); else -1. */
static rlx_node cube_of(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_POW)
        return canon_is_scalar(g, n->in[1], 3.0, 0) ? n->in[0] : -1;
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
            if (canon_is_scalar(g, n->in[j], c, rel))
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
        if (!canon_is_scalar(g, n->in[j], 1.0, 0))
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
        if (!canon_is_scalar(g, f[h], 0.5, 0))
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

/* Whether node id may be an elementwise-chain instruction of dtype t. */
static bool chain_op(const rlx_graph *g, rlx_node id, rlx_dtype t)
{
    const rlx_node_data *n = &g->nodes[id];
    const rlx_op_info *i = rlx_op_info_of(n->op);
    return i && (i->flags & RLX_OPF_CHAIN) && n->dtype == t;
}

/* A float clip whose operand or one of whose readers is a chain op: as
 * min(max(x, lo), hi) it fuses into that chain (hard-swish and
 * hard-sigmoid are such clips between adds and products; alone, each took
 * a pass over memory of its own). */
static bool clip_as_max_min(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_CLIP || !rlx_dtype_is_float(n->dtype))
        return false;
    double lo = n->attrs.clip.lo, hi = n->attrs.clip.hi;
    if (!(lo > -INFINITY) && !(hi < INFINITY))
        return false;
    bool near = chain_op(g, n->in[0], n->dtype);
    for (int i = id + 1; i < g->n_nodes && !near; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            near = near || (g->nodes[i].in[j] == id && chain_op(g, i, n->dtype));
    if (!near)
        return false;
    rlx_node v = map[n->in[0]];
    if (lo > -INFINITY)
        v = rlx_max(out, v, rlx_scalar(out, n->dtype, lo));
    if (hi < INFINITY)
        v = rlx_min(out, v, rlx_scalar(out, n->dtype, hi));
    *y = v;
    return true;
}

bool canon_activation(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    if (clip_as_max_min(out, g, id, map, y))
        return true;
    rlx_op op = RLX_OP_GELU; /* set by match whenever it finds x (a compiler that cannot see so warns) */
    rlx_node x = match(g, id, &op);
    if (x < 0)
        return false;
    *y = op == RLX_OP_SILU        ? rlx_silu(out, map[x])
         : op == RLX_OP_GELU_TANH ? rlx_gelu_tanh(out, map[x])
                                  : rlx_gelu(out, map[x]);
    return true;
}
