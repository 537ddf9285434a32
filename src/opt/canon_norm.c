/* canon_norm.c - LayerNorm and RMSNorm written out become the one op (see
 * canon.c for the forms taken). */
#include "opt/canon.h"

typedef struct norm_form {
    rlx_op op; /* RLX_OP_LAYER_NORM or RLX_OP_RMS_NORM */
    rlx_node x, gamma, beta;
    double eps;
} norm_form;

/* v when id is the mean of v over its last axis, kept; else -1. */
static rlx_node mean_last(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_REDUCE_MEAN || !n->attrs.reduce.keepdims)
        return -1;
    int r = g->nodes[n->in[0]].shape.ndim;
    return r >= 1 && n->attrs.reduce.axes == 1u << (r - 1) ? n->in[0] : -1;
}

/* v when id is pow(v, 2) or v * v; else -1. */
static rlx_node square_of(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_POW)
        return canon_is_scalar(g, n->in[1], 2.0, 0) ? n->in[0] : -1;
    return n->op == RLX_OP_MUL && n->in[0] == n->in[1] ? n->in[0] : -1;
}

/* v when id is mean(v^2) + eps (*eps set); else -1. */
static rlx_node mean_square_eps(const rlx_graph *g, rlx_node id, double *eps)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        rlx_node m = mean_last(g, n->in[1 - j]);
        if (m >= 0 && rlx_scalar_value(&g->nodes[n->in[j]], eps) && *eps >= 0)
            return square_of(g, m);
    }
    return -1;
}

/* v when id is sqrt(mean(v^2) + eps) (inverse false) or its reciprocal,
 * written as rsqrt(...), 1 / sqrt(...) or reciprocal(sqrt(...)) (inverse
 * true); else -1. */
static rlx_node root_mean_square(const rlx_graph *g, rlx_node id, bool inverse, double *eps)
{
    const rlx_node_data *n = &g->nodes[id];
    if (!inverse)
        return n->op == RLX_OP_SQRT ? mean_square_eps(g, n->in[0], eps) : -1;
    if (n->op == RLX_OP_RSQRT)
        return mean_square_eps(g, n->in[0], eps);
    if (n->op == RLX_OP_RECIPROCAL)
        return root_mean_square(g, n->in[0], false, eps);
    if (n->op == RLX_OP_DIV && canon_is_scalar(g, n->in[0], 1.0, 0))
        return root_mean_square(g, n->in[1], false, eps);
    return -1;
}

/* v when id is v divided by its own root mean square; else -1. */
static rlx_node over_rms(const rlx_graph *g, rlx_node id, double *eps)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_DIV && root_mean_square(g, n->in[1], false, eps) == n->in[0])
        return n->in[0];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (root_mean_square(g, n->in[1 - j], true, eps) == n->in[j])
                return n->in[j];
    return -1;
}

/* Whether id is a normalisation without gamma or beta: d / rms(d) with
 * d = x - mean(x) is LayerNorm of x, v / rms(v) otherwise RMSNorm of v. */
static bool norm_core(const rlx_graph *g, rlx_node id, norm_form *f)
{
    rlx_node v = over_rms(g, id, &f->eps);
    if (v < 0)
        return false;
    const rlx_node_data *d = &g->nodes[v];
    bool centred = d->op == RLX_OP_SUB && mean_last(g, d->in[1]) == d->in[0];
    f->op = centred ? RLX_OP_LAYER_NORM : RLX_OP_RMS_NORM;
    f->x = centred ? d->in[0] : v;
    f->gamma = f->beta = -1;
    return true;
}

/* x when id is x cast to f32 from f16 or bf16; else -1. */
static rlx_node widened(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_CAST || n->dtype != RLX_F32)
        return -1;
    rlx_dtype from = g->nodes[n->in[0]].dtype;
    return from == RLX_F16 || from == RLX_BF16 ? n->in[0] : -1;
}

/* norm_core, or a 16-bit tensor's normalisation computed in f32 between
 * casts, cast(core(cast(x, f32)), x's dtype), as Hugging Face's RMSNorm
 * writes it for f16 and bf16 models: then f->x is x, and the one op
 * computes in f32 inside as the casts did. */
static bool norm_core_any(const rlx_graph *g, rlx_node id, norm_form *f)
{
    if (norm_core(g, id, f))
        return true;
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_CAST || !norm_core(g, n->in[0], f))
        return false;
    rlx_node x = widened(g, f->x);
    if (x < 0 || g->nodes[x].dtype != n->dtype)
        return false;
    f->x = x;
    return true;
}

/* Whether id is a vector for x's last axis, of x's dtype. */
static bool last_axis_vector(const rlx_graph *g, rlx_node id, rlx_node x)
{
    const rlx_node_data *v = &g->nodes[id], *xn = &g->nodes[x];
    return v->shape.ndim == 1 && xn->shape.ndim >= 1 && v->shape.dims[0] == xn->shape.dims[xn->shape.ndim - 1] &&
           v->dtype == xn->dtype;
}

/* One of the operands of the product or sum id is a normalisation (with
 * what it absorbed so far, found by inner) and the other a last-axis
 * vector: that vector, f filled; else -1. */
static rlx_node around_norm(const rlx_graph *g, rlx_node id, rlx_op op,
                            bool (*inner)(const rlx_graph *, rlx_node, norm_form *), norm_form *f)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != op)
        return -1;
    for (int j = 0; j < 2; j++)
        if (inner(g, n->in[j], f) && last_axis_vector(g, n->in[1 - j], f->x))
            return n->in[1 - j];
    return -1;
}

/* A normalisation with or without gamma. */
static bool norm_scaled(const rlx_graph *g, rlx_node id, norm_form *f)
{
    if (norm_core_any(g, id, f))
        return true;
    rlx_node gamma = around_norm(g, id, RLX_OP_MUL, norm_core_any, f);
    if (gamma < 0)
        return false;
    f->gamma = gamma;
    return true;
}

/* id as a normalisation with what it absorbs (gamma, then beta for
 * LayerNorm), keeping x's shape and dtype. */
static bool norm_match(const rlx_graph *g, rlx_node id, norm_form *f)
{
    bool found = norm_scaled(g, id, f);
    if (!found) {
        rlx_node beta = around_norm(g, id, RLX_OP_ADD, norm_scaled, f);
        found = beta >= 0 && f->op == RLX_OP_LAYER_NORM;
        f->beta = beta;
    }
    if (!found)
        return false;
    const rlx_node_data *xn = &g->nodes[f->x], *r = &g->nodes[id];
    return rlx_dtype_is_float(xn->dtype) && xn->dtype == r->dtype && rlx_shape_equal(&xn->shape, &r->shape);
}

bool canon_norm(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    norm_form f;
    if (!norm_match(g, id, &f))
        return false;
    rlx_node gamma = f.gamma >= 0 ? map[f.gamma] : -1;
    *y = f.op == RLX_OP_RMS_NORM ? rlx_rms_norm(out, map[f.x], gamma, f.eps)
                                 : rlx_layer_norm(out, map[f.x], gamma, f.beta >= 0 ? map[f.beta] : -1, f.eps);
    return true;
}
