/* grad_rules.c - the gradient rule of each op family, built from the same
 * public builders a user calls (so the backward is ordinary graph that the
 * optimizer fuses and plans like the forward).  The rules follow PyTorch's
 * conventions where a derivative is a choice: ties of max/min split the
 * gradient, floor/round/sign have a zero gradient, the exponent of pow at a
 * zero base gets zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/grad.h"
#include "ir/op_math.h"

/* A copy of node id: rules append nodes, which may move g->nodes. */
static rlx_node_data node_copy(const rlx_graph *g, rlx_node id) { return g->nodes[id]; }
static rlx_shape shape_of(const rlx_graph *g, rlx_node id) { return g->nodes[id].shape; }
static rlx_dtype dtype_of(const rlx_graph *g, rlx_node id) { return g->nodes[id].dtype; }

static rlx_node scalar_like(rlx_graph *g, rlx_node like, double v) { return rlx_scalar(g, dtype_of(g, like), v); }

static rlx_node zeros_shaped(rlx_graph *g, rlx_dtype t, const rlx_shape *s)
{
    return rlx_expand(g, rlx_scalar(g, t, 0.0), s->ndim, s->dims);
}

/* The gradient d of a broadcast result, summed back to an operand's shape. */
static rlx_node sum_to(rlx_graph *g, rlx_node d, const rlx_shape *to)
{
    if (d < 0)
        return d;
    rlx_shape s = shape_of(g, d);
    if (rlx_shape_equal(&s, to))
        return d;
    int axes[RLX_MAX_DIMS], n = 0, lead = s.ndim - to->ndim;
    for (int i = 0; i < s.ndim; i++)
        if (i < lead || (to->dims[i - lead] == 1 && s.dims[i] != 1))
            axes[n++] = i;
    rlx_node r = n ? rlx_reduce_sum(g, d, n, axes, 1) : d;
    return rlx_reshape(g, r, to->ndim, to->dims);
}

/* A node of an op with no public builder (shape NULL: inferred). */
static rlx_node add_node(rlx_graph *g, rlx_op op, int n_in, const rlx_node *in, const rlx_attrs *attrs,
                         const rlx_shape *shape)
{
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.n_in = n_in;
    memcpy(p.in, in, (size_t)n_in * sizeof *in);
    p.attrs = *attrs;
    if (shape)
        p.shape = *shape;
    return rlx_graph_add(g, &p);
}

static rlx_status status_of(const rlx_graph *g, const rlx_node *dx, int n)
{
    for (int i = 0; i < n; i++)
        if (dx[i] < 0 && dx[i] != -1)
            return g->error != RLX_OK ? g->error : RLX_ERR_INTERNAL;
    return g->error;
}

static rlx_status refuse(rlx_graph *g, rlx_node n, const char *why)
{
    char lbl[160];
    rlx_graph_fail(g, RLX_ERR_UNSUPPORTED, "gradient through %s: %s", rlx_node_label(g, n, lbl, sizeof lbl), why);
    return RLX_ERR_UNSUPPORTED;
}

rlx_status rlx_grad_refuse(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    (void)dy, (void)need, (void)dx;
    const char *why = "the op is not differentiable";
    if (g->nodes[n].op == RLX_OP_DROPOUT)
        why = "dropout's mask is not reproducible in the backward; build it as x * (rlx_random_uniform(..) >= p) / (1 "
              "- p), which differentiates";
    else if (g->nodes[n].op == RLX_OP_CACHE_WRITE)
        why = "a KV-cache write is inference state";
    else if (g->nodes[n].op == RLX_OP_CROSS_ENTROPY_GRAD)
        why = "second derivatives of the cross-entropy are not built";
    else if (g->nodes[n].op == RLX_OP_OPTIMIZER_STEP)
        why = "an optimizer step is the end of a training step";
    return refuse(g, n, why);
}

/* ------------------------------------------------------------ elementwise */

/* d/dx of the unary op at x (y its value), times dy */
rlx_status rlx_grad_unary(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    rlx_node x = nd.in[0], y = n, d;
#define C(v) scalar_like(g, x, (v))
    switch (nd.op) {
    case RLX_OP_NEG: d = rlx_neg(g, dy); break;
    case RLX_OP_ABS: d = rlx_mul(g, dy, rlx_sign(g, x)); break;
    case RLX_OP_EXP: d = rlx_mul(g, dy, y); break;
    case RLX_OP_LOG: d = rlx_div(g, dy, x); break;
    case RLX_OP_SQRT: d = rlx_div(g, rlx_mul(g, dy, C(0.5)), y); break;
    case RLX_OP_RSQRT: d = rlx_mul(g, dy, rlx_mul(g, C(-0.5), rlx_mul(g, y, rlx_mul(g, y, y)))); break;
    case RLX_OP_RECIPROCAL: d = rlx_neg(g, rlx_mul(g, dy, rlx_mul(g, y, y))); break;
    case RLX_OP_TANH: d = rlx_mul(g, dy, rlx_sub(g, C(1), rlx_mul(g, y, y))); break;
    case RLX_OP_SIGMOID: d = rlx_mul(g, dy, rlx_mul(g, y, rlx_sub(g, C(1), y))); break;
    case RLX_OP_RELU: d = rlx_where(g, rlx_greater(g, x, C(0)), dy, C(0)); break;
    case RLX_OP_GELU: {
        /* Phi(x) + x phi(x) */
        rlx_node cdf = rlx_mul(g, C(0.5), rlx_add(g, C(1), rlx_erf(g, rlx_mul(g, x, C(RLX_SQRT1_2)))));
        rlx_node pdf = rlx_mul(g, C(0.39894228040143267794), rlx_exp(g, rlx_mul(g, C(-0.5), rlx_mul(g, x, x))));
        d = rlx_mul(g, dy, rlx_add(g, cdf, rlx_mul(g, x, pdf)));
        break;
    }
    case RLX_OP_GELU_TANH: {
        /* 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 c x^2) */
        rlx_node x2 = rlx_mul(g, x, x);
        rlx_node u =
            rlx_mul(g, C(RLX_SQRT_2_OVER_PI), rlx_add(g, x, rlx_mul(g, C(RLX_GELU_TANH_CUBIC), rlx_mul(g, x2, x))));
        rlx_node t = rlx_tanh(g, u);
        rlx_node du = rlx_mul(g, C(RLX_SQRT_2_OVER_PI), rlx_add(g, C(1), rlx_mul(g, C(3 * RLX_GELU_TANH_CUBIC), x2)));
        rlx_node a = rlx_mul(g, C(0.5), rlx_add(g, C(1), t));
        rlx_node b = rlx_mul(g, rlx_mul(g, C(0.5), x), rlx_mul(g, rlx_sub(g, C(1), rlx_mul(g, t, t)), du));
        d = rlx_mul(g, dy, rlx_add(g, a, b));
        break;
    }
    case RLX_OP_SILU: {
        rlx_node s = rlx_sigmoid(g, x);
        d = rlx_mul(g, dy, rlx_mul(g, s, rlx_add(g, C(1), rlx_mul(g, x, rlx_sub(g, C(1), s)))));
        break;
    }
    case RLX_OP_ERF:
        d = rlx_mul(g, dy, rlx_mul(g, C(1.12837916709551257390), rlx_exp(g, rlx_neg(g, rlx_mul(g, x, x)))));
        break;
    case RLX_OP_SIN: d = rlx_mul(g, dy, rlx_cos(g, x)); break;
    case RLX_OP_COS: d = rlx_neg(g, rlx_mul(g, dy, rlx_sin(g, x))); break;
    case RLX_OP_FLOOR:
    case RLX_OP_CEIL:
    case RLX_OP_ROUND:
    case RLX_OP_SIGN: {
        rlx_shape s = shape_of(g, x);
        d = zeros_shaped(g, dtype_of(g, x), &s);
        break;
    }
    default: return refuse(g, n, "no derivative for this unary op");
    }
#undef C
    dx[0] = d;
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_binary(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    rlx_node a = nd.in[0], b = nd.in[1], y = n;
    rlx_shape sa = shape_of(g, a), sb = shape_of(g, b);
    rlx_node da = -1, db = -1;
#define C(v) scalar_like(g, a, (v))
    switch (nd.op) {
    case RLX_OP_ADD:
        da = dy;
        db = dy;
        break;
    case RLX_OP_SUB:
        da = dy;
        db = need[1] ? rlx_neg(g, dy) : -1;
        break;
    case RLX_OP_MUL:
        da = need[0] ? rlx_mul(g, dy, b) : -1;
        db = need[1] ? rlx_mul(g, dy, a) : -1;
        break;
    case RLX_OP_DIV:
        da = need[0] ? rlx_div(g, dy, b) : -1;
        db = need[1] ? rlx_neg(g, rlx_div(g, rlx_mul(g, dy, y), b)) : -1;
        break;
    case RLX_OP_POW:
        if (need[0])
            da = rlx_mul(g, dy, rlx_mul(g, b, rlx_pow(g, a, rlx_sub(g, b, C(1)))));
        if (need[1]) {
            rlx_node t = rlx_mul(g, y, rlx_log(g, a));
            db = rlx_mul(g, dy, rlx_where(g, rlx_equal(g, a, C(0)), C(0), t));
        }
        break;
    case RLX_OP_MAX:
    case RLX_OP_MIN: {
        /* the larger (smaller) operand takes the gradient; ties split it */
        rlx_node half = rlx_mul(g, dy, C(0.5)), eq = rlx_equal(g, a, b);
        rlx_node a_wins = nd.op == RLX_OP_MAX ? rlx_greater(g, a, b) : rlx_less(g, a, b);
        rlx_node b_wins = nd.op == RLX_OP_MAX ? rlx_less(g, a, b) : rlx_greater(g, a, b);
        if (need[0])
            da = rlx_where(g, eq, half, rlx_where(g, a_wins, dy, C(0)));
        if (need[1])
            db = rlx_where(g, eq, half, rlx_where(g, b_wins, dy, C(0)));
        break;
    }
    case RLX_OP_MOD:
        /* a - b * q with q = trunc(a / b) (fmod) or floor(a / b) */
        da = dy;
        if (need[1]) {
            rlx_node q = rlx_div(g, a, b);
            q = nd.attrs.mod.fmod ? rlx_mul(g, rlx_sign(g, q), rlx_floor(g, rlx_abs(g, q))) : rlx_floor(g, q);
            db = rlx_neg(g, rlx_mul(g, dy, q));
        }
        break;
    default: return refuse(g, n, "no derivative for this binary op");
    }
#undef C
    dx[0] = need[0] ? sum_to(g, da, &sa) : -1;
    dx[1] = need[1] ? sum_to(g, db, &sb) : -1;
    return status_of(g, dx, 2);
}

rlx_status rlx_grad_where(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    rlx_shape sa = shape_of(g, nd.in[1]), sb = shape_of(g, nd.in[2]);
    rlx_node zero = scalar_like(g, dy, 0);
    dx[1] = need[1] ? sum_to(g, rlx_where(g, nd.in[0], dy, zero), &sa) : -1;
    dx[2] = need[2] ? sum_to(g, rlx_where(g, nd.in[0], zero, dy), &sb) : -1;
    return status_of(g, dx, 3);
}

rlx_status rlx_grad_cast(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (need[0])
        dx[0] = rlx_cast(g, dy, dtype_of(g, g->nodes[n].in[0]));
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_clip(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    rlx_node x = nd.in[0];
    rlx_node inside = rlx_and(g, rlx_not(g, rlx_less(g, x, scalar_like(g, x, nd.attrs.clip.lo))),
                              rlx_not(g, rlx_greater(g, x, scalar_like(g, x, nd.attrs.clip.hi))));
    dx[0] = rlx_where(g, inside, dy, scalar_like(g, x, 0));
    return status_of(g, dx, 1);
}

/* ------------------------------------------------------------ matmul */

/* a [.., M, K] of rank > 2 against a 2-D b: the weight's gradient is one
 * GEMM over the flattened rows, not a batch of them summed after */
static rlx_node flatten_rows(rlx_graph *g, rlx_node x)
{
    rlx_shape s = shape_of(g, x);
    int64_t rows = rlx_shape_numel(&s) / (s.dims[s.ndim - 1] ? s.dims[s.ndim - 1] : 1);
    return rlx_reshape(g, x, 2, (int64_t[]){rows, s.dims[s.ndim - 1]});
}

rlx_status rlx_grad_matmul(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    rlx_node a = nd.in[0], b = nd.in[1];
    int ta = nd.attrs.matmul.trans_a, tb = nd.attrs.matmul.trans_b;
    rlx_shape sa = shape_of(g, a), sb = shape_of(g, b);
    if (need[0]) {
        rlx_node d = !ta ? rlx_matmul(g, dy, b, 0, !tb) : rlx_matmul(g, b, dy, tb, 1);
        dx[0] = sum_to(g, d, &sa);
    }
    if (need[1]) {
        rlx_node d;
        if (!ta && sb.ndim == 2 && sa.ndim > 2) {
            rlx_node af = flatten_rows(g, a), df = flatten_rows(g, dy);
            d = !tb ? rlx_matmul(g, af, df, 1, 0) : rlx_matmul(g, df, af, 1, 0);
        } else {
            d = !tb ? rlx_matmul(g, a, dy, !ta, 0) : rlx_matmul(g, dy, a, 1, ta);
        }
        dx[1] = sum_to(g, d, &sb);
    }
    return status_of(g, dx, 2);
}

/* qmatmul(x, w) = x @ dequantize(w)^T: the activations' gradient only (the
 * quantized weight is frozen; train an adapter beside it) */
rlx_status rlx_grad_qmatmul(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    if (need[0]) {
        rlx_node w = rlx_dequantize(g, nd.in[1], nd.attrs.quant.qtype, nd.attrs.quant.k, dtype_of(g, dy));
        dx[0] = rlx_matmul(g, dy, w, 0, 0);
    }
    return status_of(g, dx, 2);
}

/* ------------------------------------------------------------ reductions, norms */

/* dy of a reduction, reshaped to keep the reduced axes as 1 and expanded back */
static rlx_node unreduce(rlx_graph *g, rlx_node d, uint32_t axes, const rlx_shape *in)
{
    rlx_shape k = *in;
    for (int i = 0; i < in->ndim; i++)
        if (axes & (1u << i))
            k.dims[i] = 1;
    return rlx_expand(g, rlx_reshape(g, d, k.ndim, k.dims), in->ndim, in->dims);
}

rlx_status rlx_grad_reduce(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    rlx_node x = nd.in[0];
    rlx_shape sx = shape_of(g, x);
    uint32_t axes = nd.attrs.reduce.axes;
    int64_t count = 1;
    for (int i = 0; i < sx.ndim; i++)
        if (axes & (1u << i))
            count *= sx.dims[i];
    rlx_node d = unreduce(g, dy, axes, &sx);
    switch (nd.op) {
    case RLX_OP_REDUCE_SUM: break;
    case RLX_OP_REDUCE_MEAN: d = rlx_mul(g, d, scalar_like(g, x, count ? 1.0 / (double)count : 0.0)); break;
    case RLX_OP_REDUCE_MAX:
    case RLX_OP_REDUCE_MIN: {
        /* the positions that hold the extreme share the gradient evenly */
        rlx_node hit = rlx_equal(g, x, unreduce(g, n, axes, &sx));
        rlx_node hits = rlx_cast(g, hit, dtype_of(g, x));
        int ax[RLX_MAX_DIMS], na = 0;
        for (int i = 0; i < sx.ndim; i++)
            if (axes & (1u << i))
                ax[na++] = i;
        rlx_node cnt = rlx_reduce_sum(g, hits, na, ax, 1);
        d = rlx_where(g, hit, rlx_div(g, d, cnt), scalar_like(g, x, 0));
        break;
    }
    case RLX_OP_REDUCE_PROD: d = rlx_div(g, rlx_mul(g, d, unreduce(g, n, axes, &sx)), x); break;
    default: return refuse(g, n, "not differentiable");
    }
    dx[0] = d;
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_softmax(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    int axis = nd.attrs.softmax.axis;
    if (nd.op == RLX_OP_SOFTMAX) {
        rlx_node s = rlx_reduce_sum(g, rlx_mul(g, dy, n), 1, &axis, 1);
        dx[0] = rlx_mul(g, n, rlx_sub(g, dy, s));
    } else {
        rlx_node s = rlx_reduce_sum(g, dy, 1, &axis, 1);
        dx[0] = rlx_sub(g, dy, rlx_mul(g, rlx_exp(g, n), s));
    }
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_cross_entropy(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    dx[0] = add_node(g, RLX_OP_CROSS_ENTROPY_GRAD, 3, (rlx_node[]){nd.in[0], nd.in[1], dy}, &nd.attrs, NULL);
    return status_of(g, dx, 2);
}

/* layer_norm's or rms_norm's x-hat over the last axis (x centred first for
 * layer_norm) and its reciprocal standard deviation, in primitives: the
 * statistics are recomputed (cheaper than keeping them alive from the
 * forward) */
static rlx_node norm_xhat(rlx_graph *g, rlx_node x, bool layer, double eps, rlx_node *rstd)
{
    int last = shape_of(g, x).ndim - 1;
    rlx_node xc = layer ? rlx_sub(g, x, rlx_reduce_mean(g, x, 1, &last, 1)) : x;
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, xc, xc), 1, &last, 1);
    *rstd = rlx_rsqrt(g, rlx_add(g, var, scalar_like(g, x, eps)));
    return rlx_mul(g, xc, *rstd);
}

/* d/dx of the norm given dy, with gd = dy * gamma:
 * rstd (gd - mean(gd xhat) xhat [- mean(gd) for layer_norm]) */
static rlx_node norm_dx(rlx_graph *g, rlx_node gd, rlx_node xhat, rlx_node rstd, bool layer)
{
    int last = shape_of(g, gd).ndim - 1;
    rlx_node t = rlx_sub(g, gd, rlx_mul(g, xhat, rlx_reduce_mean(g, rlx_mul(g, gd, xhat), 1, &last, 1)));
    if (layer)
        t = rlx_sub(g, t, rlx_reduce_mean(g, gd, 1, &last, 1));
    return rlx_mul(g, rstd, t);
}

/* layer_norm and rms_norm over the last axis: x's gradient and dy * xhat
 * from one norm_grad node (a pass per row), gamma's as the sums of the
 * latter over the rows, beta's as dy's */
rlx_status rlx_grad_norm(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    rlx_node x = nd.in[0];
    rlx_shape xs = shape_of(g, x);
    bool layer = nd.op == RLX_OP_LAYER_NORM;
    int ig = nd.attrs.norm.has_gamma ? 1 : -1, ib = nd.attrs.norm.has_beta ? 1 + (ig > 0) : -1;
    if (ib > 0 && need[ib]) {
        rlx_shape s = shape_of(g, nd.in[ib]);
        dx[ib] = sum_to(g, dy, &s);
    }
    rlx_node dyx; /* dy * xhat */
    if (need[0]) {
        rlx_attrs a = nd.attrs;
        a.norm.has_beta = 0;
        a.norm.rms = !layer;
        rlx_node in[3] = {x, dy, ig > 0 ? nd.in[ig] : -1};
        rlx_node all = add_node(g, RLX_OP_NORM_GRAD, ig > 0 ? 3 : 2, in, &a, NULL);
        if (all < 0)
            return g->error;
        int64_t st[1] = {0}, en[1] = {1};
        dx[0] = rlx_reshape(g, rlx_slice(g, all, 1, (int[]){0}, st, en, NULL), xs.ndim, xs.dims);
        st[0] = 1, en[0] = 2;
        dyx = rlx_reshape(g, rlx_slice(g, all, 1, (int[]){0}, st, en, NULL), xs.ndim, xs.dims);
    } else {
        rlx_node rstd;
        dyx = rlx_mul(g, dy, norm_xhat(g, x, layer, nd.attrs.norm.eps, &rstd));
    }
    if (ig > 0 && need[ig]) {
        rlx_shape s = shape_of(g, nd.in[ig]);
        dx[ig] = sum_to(g, dyx, &s);
    }
    return status_of(g, dx, nd.n_in);
}

/* norm_grad's definition in primitives: x's gradient and dy * xhat, stacked */
rlx_node rlx_decompose_norm_grad(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node x = n->in[0], dy = n->in[1], rstd;
    bool layer = !n->attrs.norm.rms;
    rlx_node xhat = norm_xhat(g, x, layer, n->attrs.norm.eps, &rstd);
    rlx_node gd = n->attrs.norm.has_gamma ? rlx_mul(g, dy, n->in[2]) : dy;
    rlx_shape one = shape_of(g, x);
    memmove(one.dims + 1, one.dims, (size_t)one.ndim * sizeof *one.dims);
    one.dims[0] = 1;
    one.ndim++;
    rlx_node parts[2] = {rlx_reshape(g, norm_dx(g, gd, xhat, rstd, layer), one.ndim, one.dims),
                         rlx_reshape(g, rlx_mul(g, dy, xhat), one.ndim, one.dims)};
    return rlx_concat(g, 2, parts, 0);
}

/* ------------------------------------------------------------ data movement */

rlx_status rlx_grad_reshape(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    (void)n;
    if (need[0]) {
        rlx_shape s = shape_of(g, g->nodes[n].in[0]);
        dx[0] = rlx_reshape(g, dy, s.ndim, s.dims);
    }
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_transpose(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    int inv[RLX_MAX_DIMS];
    for (int i = 0; i < nd.shape.ndim; i++)
        inv[nd.attrs.transpose.perm[i]] = i;
    dx[0] = rlx_transpose(g, dy, inv);
    return status_of(g, dx, 1);
}

/* Zeros between the elements of d along axis: stride - 1 after each but
 * the last (a strided slice's, or a strided convolution's, gradient) */
static rlx_node spread(rlx_graph *g, rlx_node d, int axis, int64_t stride)
{
    if (stride == 1 || d < 0)
        return d;
    rlx_shape s = shape_of(g, d);
    rlx_shape r = {s.ndim + 1, {0}};
    for (int i = 0, j = 0; i < s.ndim; i++) {
        r.dims[j++] = s.dims[i];
        if (i == axis)
            r.dims[j++] = 1;
    }
    int64_t pads[2 * RLX_MAX_DIMS] = {0};
    pads[r.ndim + axis + 1] = stride - 1;
    rlx_node t = rlx_pad(g, rlx_reshape(g, d, r.ndim, r.dims), pads, RLX_PAD_CONSTANT, 0.0);
    rlx_shape m = s;
    m.dims[axis] = s.dims[axis] * stride;
    t = rlx_reshape(g, t, m.ndim, m.dims);
    int64_t len = (s.dims[axis] - 1) * stride + 1;
    return rlx_slice(g, t, 1, &axis, (int64_t[]){0}, (int64_t[]){len}, NULL);
}

/* The slice's elements go back where they were read, zeros elsewhere: a
 * negative step reads them in reverse, a step of k leaves k - 1 between */
rlx_status rlx_grad_slice(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    rlx_shape in = shape_of(g, nd.in[0]);
    int r = in.ndim;
    int64_t pads[2 * RLX_MAX_DIMS];
    rlx_node d = dy;
    for (int i = 0; i < r; i++) {
        int64_t cnt = nd.shape.dims[i], step = nd.attrs.slice.step[i], first = nd.attrs.slice.start[i], len = cnt;
        if (cnt > 1 && step != 1) {
            if (r == RLX_MAX_DIMS)
                return refuse(g, n, "a strided slice of a rank-8 tensor has no gradient rule");
            if (step < 0) { /* the lowest index read is the last one */
                d = rlx_slice(g, d, 1, &i, (int64_t[]){-1}, (int64_t[]){INT64_MIN + 1}, (int64_t[]){-1});
                first += (cnt - 1) * step;
                step = -step;
            }
            d = spread(g, d, i, step);
            len = (cnt - 1) * step + 1;
        }
        pads[i] = cnt ? first : 0;
        pads[r + i] = in.dims[i] - pads[i] - len;
    }
    dx[0] = rlx_pad(g, d, pads, RLX_PAD_CONSTANT, 0.0);
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_concat(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    int axis = nd.attrs.concat.axis;
    int64_t at = 0;
    for (int j = 0; j < nd.n_in; j++) {
        int64_t len = shape_of(g, nd.in[j]).dims[axis];
        if (need[j])
            dx[j] = rlx_slice(g, dy, 1, &axis, (int64_t[]){at}, (int64_t[]){at + len}, NULL);
        at += len;
    }
    return status_of(g, dx, nd.n_in);
}

/* gather(data, idx, axis): the data's gradient adds each slice of dy into
 * the slice it was read from (scatter_add, the op's own kernel) */
rlx_status rlx_grad_gather(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    rlx_shape s = shape_of(g, nd.in[0]);
    dx[0] = add_node(g, RLX_OP_SCATTER_ADD, 2, (rlx_node[]){dy, nd.in[1]}, &nd.attrs, &s);
    return status_of(g, dx, 2);
}

/* and scatter_add's gradient reads back where it added */
rlx_status rlx_grad_scatter_add(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (need[0]) {
        rlx_node_data nd = node_copy(g, n);
        dx[0] = rlx_gather(g, dy, nd.in[1], nd.attrs.gather.axis);
    }
    return status_of(g, dx, 2);
}

rlx_status rlx_grad_expand(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (need[0]) {
        rlx_shape s = shape_of(g, g->nodes[n].in[0]);
        dx[0] = sum_to(g, dy, &s);
    }
    return status_of(g, dx, 1);
}

/* A slice of d along one axis, [start, end) by step. */
static rlx_node slice_axis(rlx_graph *g, rlx_node d, int axis, int64_t start, int64_t end, int64_t step)
{
    return rlx_slice(g, d, 1, &axis, &start, &end, &step);
}

/* d with b zeros before and e after along one axis */
static rlx_node zero_pad_axis(rlx_graph *g, rlx_node d, int axis, int64_t b, int64_t e)
{
    int r = shape_of(g, d).ndim;
    int64_t pads[2 * RLX_MAX_DIMS] = {0};
    pads[axis] = b;
    pads[r + axis] = e;
    return rlx_pad(g, d, pads, RLX_PAD_CONSTANT, 0.0);
}

/* The gradient of a reflect or edge pad along one axis (x's length L there,
 * b before and e after): the middle, plus each padded cell's gradient added
 * to the cell it copied.  Edge: the pads all copy the end cells, so their
 * sums go there.  Reflect: cell i < b copied x[b - i] and cell b + L + j
 * copied x[L - 2 - j], so the pads reversed land on x[1..b] and
 * x[L-1-e..L-2]. */
static rlx_node unpad_axis(rlx_graph *g, rlx_node d, int axis, int64_t L, int64_t b, int64_t e, int mode)
{
    rlx_node r = slice_axis(g, d, axis, b, b + L, 1);
    if (mode == RLX_PAD_EDGE) {
        if (b > 0)
            r = rlx_add(
                g, r,
                zero_pad_axis(g, rlx_reduce_sum(g, slice_axis(g, d, axis, 0, b, 1), 1, &axis, 1), axis, 0, L - 1));
        if (e > 0)
            r = rlx_add(g, r,
                        zero_pad_axis(g, rlx_reduce_sum(g, slice_axis(g, d, axis, b + L, b + L + e, 1), 1, &axis, 1),
                                      axis, L - 1, 0));
    } else {
        if (b > 0)
            r = rlx_add(g, r, zero_pad_axis(g, slice_axis(g, d, axis, b - 1, INT64_MIN + 1, -1), axis, 1, L - 1 - b));
        if (e > 0)
            r = rlx_add(g, r,
                        zero_pad_axis(g, slice_axis(g, d, axis, b + L + e - 1, b + L - 1, -1), axis, L - 1 - e, 1));
    }
    return r;
}

/* Constant padding: the middle.  Reflect and edge: one axis at a time (the
 * pad is one per axis, so its gradient is their gradients in turn). */
rlx_status rlx_grad_pad(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    rlx_shape in = shape_of(g, nd.in[0]);
    const int64_t *pads = nd.attrs.pad.pads;
    if (nd.attrs.pad.mode != RLX_PAD_CONSTANT) {
        rlx_node d = dy;
        for (int i = 0; i < in.ndim; i++)
            if (pads[i] > 0 || pads[in.ndim + i] > 0)
                d = unpad_axis(g, d, i, in.dims[i], pads[i], pads[in.ndim + i], nd.attrs.pad.mode);
        dx[0] = d;
        return status_of(g, dx, 1);
    }
    int axes[RLX_MAX_DIMS];
    int64_t st[RLX_MAX_DIMS], en[RLX_MAX_DIMS];
    for (int i = 0; i < in.ndim; i++) {
        axes[i] = i;
        st[i] = pads[i];
        en[i] = st[i] + in.dims[i];
    }
    dx[0] = rlx_slice(g, dy, in.ndim, axes, st, en, NULL);
    return status_of(g, dx, 1);
}

/* RoPE is a rotation per pair: its gradient is the inverse rotation, the
 * same tables with the sines negated */
rlx_status rlx_grad_rope(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    if (nd.n_in == 3 && (need[1] || need[2]))
        return refuse(g, n, "the cos/sin tables take no gradient (make them constants or inputs)");
    if (!need[0])
        return RLX_OK;
    int interleaved = nd.attrs.rope.interleaved;
    if (nd.n_in == 3) {
        dx[0] = rlx_rope_tables(g, dy, nd.in[1], rlx_neg(g, nd.in[2]), interleaved);
        return status_of(g, dx, 3);
    }
    int64_t S = nd.shape.dims[nd.shape.ndim - 2], D = nd.shape.dims[nd.shape.ndim - 1], H = D / 2;
    double *tab = malloc((size_t)(S * D > 0 ? S * D : 1) * sizeof *tab);
    float *cs = malloc((size_t)(S * H > 0 ? S * H : 1) * 2 * sizeof *cs);
    if (!tab || !cs) {
        free(tab), free(cs);
        rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "rope gradient: out of memory");
        return RLX_ERR_OUT_OF_MEMORY;
    }
    rlx_rope_table(tab, S, D, nd.attrs.rope.theta, nd.attrs.rope.offset);
    for (int64_t i = 0; i < S * H; i++) {
        cs[i] = (float)tab[2 * i];
        cs[S * H + i] = (float)-tab[2 * i + 1];
    }
    free(tab);
    rlx_shape ts = {nd.shape.ndim, {0}};
    for (int i = 0; i < ts.ndim; i++)
        ts.dims[i] = 1;
    ts.dims[ts.ndim - 2] = S;
    ts.dims[ts.ndim - 1] = H;
    size_t bytes = (size_t)(S * H) * sizeof *cs;
    rlx_node c = rlx_constant(g, RLX_F32, ts.ndim, ts.dims, cs, bytes);
    rlx_node s = rlx_constant(g, RLX_F32, ts.ndim, ts.dims, cs + S * H, bytes);
    free(cs);
    dx[0] = rlx_rope_tables(g, dy, c, s, interleaved);
    return status_of(g, dx, 1);
}

/* ------------------------------------------------------------ attention */

/* Attention in primitives, recomputing the probabilities: grouped heads as
 * [B, Hkv, G*S, D] against [B, Hkv, T, D], the masks as `where`s. */
static rlx_node attention_primitives(rlx_graph *g, const rlx_node_data *nd)
{
    rlx_node q = nd->in[0], k = nd->in[1], v = nd->in[2];
    rlx_shape sq = shape_of(g, q), sk = shape_of(g, k), sv = shape_of(g, v);
    int64_t B = sq.dims[0], H = sq.dims[1], S = sq.dims[2], D = sq.dims[3], Hk = sk.dims[1], T = sk.dims[2];
    int64_t Dv = sv.dims[3], G = H / Hk;
    double scale = nd->attrs.attention.scale > 0 ? nd->attrs.attention.scale : 1.0 / sqrt((double)D);
    rlx_dtype t = dtype_of(g, q);
    rlx_node qg = rlx_reshape(g, q, 4, (int64_t[]){B, Hk, G * S, D});
    rlx_node s = rlx_matmul(g, qg, k, 0, 1);
    s = rlx_reshape(g, s, 4, (int64_t[]){B, H, S, T});
    s = rlx_mul(g, s, rlx_scalar(g, t, scale));
    /* a row can lose every key to a mask, or to the causal one when there
     * are fewer keys than queries */
    bool may_empty_rows = false;
    if (nd->attrs.attention.has_mask) {
        rlx_node m = nd->in[3];
        if (dtype_of(g, m) == RLX_BOOL)
            s = rlx_where(g, m, s, rlx_scalar(g, t, -INFINITY));
        else
            s = rlx_add(g, s, m);
        may_empty_rows = true;
    }
    if (nd->attrs.attention.causal) {
        bool *keep = malloc((size_t)(S * T > 0 ? S * T : 1));
        if (!keep)
            return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "attention gradient: out of memory");
        for (int64_t i = 0; i < S; i++)
            for (int64_t j = 0; j < T; j++)
                keep[i * T + j] = j <= i + (T - S);
        rlx_node c = rlx_constant(g, RLX_BOOL, 2, (int64_t[]){S, T}, keep, (size_t)(S * T));
        free(keep);
        s = rlx_where(g, c, s, rlx_scalar(g, t, -INFINITY));
        may_empty_rows = may_empty_rows || T < S;
    }
    rlx_node p = rlx_softmax(g, s, 3);
    if (may_empty_rows) /* a row with every key masked gives zeros, as the op does */
        p = rlx_where(g, rlx_equal(g, p, p), p, rlx_scalar(g, t, 0));
    rlx_node pg = rlx_reshape(g, p, 4, (int64_t[]){B, Hk, G * S, T});
    rlx_node o = rlx_matmul(g, pg, v, 0, 0);
    return rlx_reshape(g, o, 4, (int64_t[]){B, H, S, Dv});
}

/* q, k and v's gradients as one attention_grad node (its value holds the
 * three one after another; each is a view of it).  A float mask that wants
 * a gradient goes through the primitives instead. */
rlx_status rlx_grad_attention(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    if (nd.attrs.attention.has_pos)
        return refuse(g, n, "attention at run-time positions is for decoding; a training graph uses rlx_attention");
    if (!(nd.attrs.attention.has_mask && need[3])) {
        rlx_node in[6] = {nd.in[0], nd.in[1], nd.in[2], n, dy, nd.attrs.attention.has_mask ? nd.in[3] : -1};
        rlx_node all = add_node(g, RLX_OP_ATTENTION_GRAD, nd.attrs.attention.has_mask ? 6 : 5, in, &nd.attrs, NULL);
        if (all < 0)
            return g->error;
        int64_t at = 0;
        for (int j = 0; j < 3; j++) {
            rlx_shape s = shape_of(g, nd.in[j]);
            int64_t len = rlx_shape_numel(&s), end = at + len;
            if (need[j])
                dx[j] = rlx_reshape(g, rlx_slice(g, all, 1, (int[]){0}, &at, &end, NULL), s.ndim, s.dims);
            at = end;
        }
        return status_of(g, dx, 3);
    }
    rlx_node lo = g->n_nodes;
    rlx_node root = attention_primitives(g, &nd);
    if (root < 0)
        return g->error;
    return rlx_grad_through(g, n, lo, root, dy, need, dx);
}

/* attention_grad's definition: the gradients of attention in primitives
 * (the probabilities recomputed), flattened side by side.  An operand
 * given twice (q also as k) gets the gradient of each place apart, as a
 * kernel computes them; the gradient sweep sums them. */
rlx_node rlx_decompose_attention_grad(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node_data a = *n;
    a.op = RLX_OP_ATTENTION;
    a.n_in = 3;
    for (int j = 1; j < 3; j++) /* a second place of an operand: a node of its own */
        if (a.in[j] == a.in[0] || a.in[j] == a.in[j - 1]) {
            rlx_shape s = shape_of(g, a.in[j]);
            a.in[j] = rlx_reshape(g, a.in[j], s.ndim, s.dims);
        }
    if (n->attrs.attention.has_mask)
        a.in[a.n_in++] = n->in[5];
    rlx_node lo = g->n_nodes;
    rlx_node root = attention_primitives(g, &a);
    if (root < 0)
        return -1;
    bool need[3] = {true, true, true};
    rlx_node dx[3] = {-1, -1, -1}, flat[3];
    if (rlx_grad_through_inputs(g, 3, a.in, lo, root, n->in[4], need, dx) != RLX_OK)
        return -1;
    for (int j = 0; j < 3; j++) {
        rlx_shape s = shape_of(g, a.in[j]);
        rlx_node d = dx[j] >= 0 ? dx[j] : zeros_shaped(g, dtype_of(g, a.in[j]), &s);
        flat[j] = rlx_reshape(g, d, 1, (int64_t[]){rlx_shape_numel(&s)});
    }
    return rlx_concat(g, 3, flat, 0);
}

rlx_status rlx_grad_decomposed(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    rlx_node lo = g->n_nodes;
    rlx_node root = rlx_decompose(g, &nd);
    if (root == RLX_NO_DECOMPOSITION)
        return refuse(g, n, "the op has no decomposition to differentiate");
    if (root < 0)
        return g->error;
    return rlx_grad_through(g, n, lo, root, dy, need, dx);
}

/* ------------------------------------------------------------ convolution, pooling */

/* dy [N, O, *out] with stride s: zeros between its elements, so the input's
 * gradient becomes a stride-1 convolution */
static rlx_node dilate(rlx_graph *g, rlx_node d, int sp, const int64_t *stride)
{
    for (int a = 0; a < sp; a++)
        d = spread(g, d, 2 + a, stride[a]);
    return d;
}

/* axes 0 and 1 swapped, the rest in place */
static void swap01(int r, int *perm)
{
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[0] = 1;
    perm[1] = 0;
}

/* The gradient of a convolution's input (shape sx) from dy [N, O, *out]:
 * dx = conv(dilate(dy), w') at stride 1 and the forward's dilation, w' the
 * kernel [O, C/G, *k] flipped with each group's in and out channels swapped
 * ([C, O/G, *k], G groups), padded so that output i reads the taps that
 * wrote x[i]; a forward pad wider than the kernel's reach is cut off the
 * front instead. */
static rlx_node conv_input_grad(rlx_graph *g, rlx_node dy, rlx_node w, const rlx_shape *sx, const rlx_conv_params *p,
                                int sp)
{
    rlx_shape sw = shape_of(g, w), sy = shape_of(g, dy);
    int64_t G = p->groups, O = sw.dims[0], Cg = sw.dims[1];
    int axes[2] = {0}, perm[RLX_MAX_DIMS] = {0, 2, 1};
    int64_t st[2] = {0}, en[2] = {0}, steps[2] = {0};
    rlx_shape s5 = {sw.ndim + 1, {G, O / G, Cg}};
    for (int a = 0; a < sp; a++) {
        axes[a] = 2 + a;
        st[a] = -1;
        en[a] = INT64_MIN + 1;
        steps[a] = -1;
        s5.dims[3 + a] = sw.dims[2 + a];
        perm[3 + a] = 3 + a;
    }
    rlx_node wf = rlx_slice(g, w, sp, axes, st, en, steps);
    wf = rlx_transpose(g, rlx_reshape(g, wf, s5.ndim, s5.dims), perm);
    rlx_shape sr = sw;
    sr.dims[0] = G * Cg;
    sr.dims[1] = O / G;
    wf = rlx_reshape(g, wf, sr.ndim, sr.dims);
    rlx_conv_params q;
    rlx_conv_params_init(&q);
    q.groups = G;
    bool cut = false;
    for (int a = 0; a < sp; a++) {
        int64_t span = p->dilation[a] * (sw.dims[2 + a] - 1);
        int64_t pb = span - p->pads[a];
        int64_t len = (sy.dims[2 + a] - 1) * p->stride[a] + 1;
        int64_t pe = sx->dims[2 + a] - len - pb + span;
        q.dilation[a] = p->dilation[a];
        q.pads[a] = pb > 0 ? pb : 0;
        q.pads[sp + a] = pe > 0 ? pe : 0;
        st[a] = q.pads[a] - pb;
        en[a] = st[a] + sx->dims[2 + a];
        cut |= pb < 0 || pe < 0;
    }
    rlx_node c = rlx_conv(g, dilate(g, dy, sp, p->stride), wf, -1, &q);
    return cut ? rlx_slice(g, c, sp, axes, st, en, NULL) : c;
}

/* dW[o, c, k] = sum_{n, j} dy[n, o, j] x[n, gC/G + c, j*s + k*d - p] (g the
 * group of o): a convolution of x regrouped as [C/G, G*N, *in] (batch C/G,
 * channels each group's images) with dy^T [O, N, *out] as a weight of G
 * groups, strides and dilations swapped, cut to the kernel's size */
static rlx_node conv_weight_grad(rlx_graph *g, rlx_node x, rlx_node dy, const rlx_shape *sw, const rlx_conv_params *p,
                                 int sp)
{
    rlx_shape sx = shape_of(g, x);
    int64_t G = p->groups, N = sx.dims[0], Cg = sx.dims[1] / G;
    int r = sx.ndim, perm[RLX_MAX_DIMS] = {2, 1, 0}, swap[RLX_MAX_DIMS];
    rlx_shape s5 = {r + 1, {N, G, Cg}};
    for (int a = 0; a < sp; a++) {
        s5.dims[3 + a] = sx.dims[2 + a];
        perm[3 + a] = 3 + a;
    }
    rlx_shape st = sx;
    st.dims[0] = Cg;
    st.dims[1] = G * N;
    rlx_node xt = rlx_reshape(g, rlx_transpose(g, rlx_reshape(g, x, s5.ndim, s5.dims), perm), st.ndim, st.dims);
    swap01(r, swap);
    rlx_conv_params q = *p;
    for (int a = 0; a < sp; a++) {
        q.stride[a] = p->dilation[a];
        q.dilation[a] = p->stride[a];
    }
    rlx_node c = rlx_conv(g, xt, rlx_transpose(g, dy, swap), -1, &q); /* [C/G, O, *k'] */
    int axes[2];
    int64_t from[2] = {0, 0}, to[2];
    for (int a = 0; a < sp; a++) {
        axes[a] = 2 + a;
        to[a] = sw->dims[2 + a];
    }
    return rlx_transpose(g, rlx_slice(g, c, sp, axes, from, to, NULL), swap);
}

rlx_status rlx_grad_conv(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    rlx_node_data nd = node_copy(g, n);
    const rlx_conv_params *p = &nd.attrs.conv.p;
    int sp = nd.attrs.conv.spatial;
    if (nd.attrs.conv.layout != RLX_LAYOUT_NCHW)
        return refuse(g, n, "only NCHW convolutions have a gradient rule");
    rlx_shape sx = shape_of(g, nd.in[0]), sw = shape_of(g, nd.in[1]);
    if (nd.attrs.conv.has_bias && need[2]) {
        int axes[RLX_MAX_DIMS], na = 0;
        for (int i = 0; i < sx.ndim; i++)
            if (i != 1)
                axes[na++] = i;
        dx[2] = rlx_reduce_sum(g, dy, na, axes, 0);
    }
    if (need[1])
        dx[1] = conv_weight_grad(g, nd.in[0], dy, &sw, p, sp);
    if (need[0])
        dx[0] = conv_input_grad(g, dy, nd.in[1], &sx, p, sp);
    return status_of(g, dx, nd.n_in);
}

/* The taps k in [0, K) of a window starting at `start` (dilation d) whose
 * position lies in [lo, hi). */
static int64_t taps_within(int64_t start, int64_t lo, int64_t hi, int64_t d, int64_t K)
{
    int64_t a = start >= lo ? 0 : (lo - start + d - 1) / d;
    int64_t b = start >= hi ? 0 : (hi - start + d - 1) / d;
    b = b < K ? b : K;
    return b > a ? b - a : 0;
}

/* A constant of dtype t from f32 values (exact in every float dtype for the
 * small integers the pooling rules hold). */
static rlx_node constant_as(rlx_graph *g, rlx_dtype t, const rlx_shape *s, const float *v)
{
    rlx_node c = rlx_constant(g, RLX_F32, s->ndim, s->dims, v, (size_t)rlx_shape_numel(s) * sizeof *v);
    return t == RLX_F32 ? c : rlx_cast(g, c, t);
}

/* A pool's window as the params of a one-group convolution. */
static rlx_conv_params pool_as_conv(const rlx_pool_params *p, int sp)
{
    rlx_conv_params q;
    rlx_conv_params_init(&q);
    for (int a = 0; a < sp; a++) {
        q.stride[a] = p->stride[a];
        q.dilation[a] = p->dilation[a];
        q.pads[a] = p->pads[a];
        q.pads[sp + a] = p->pads[sp + a];
    }
    return q;
}

/* avg_pool: dy over each window's divisor (the count of cells the kernel
 * divided by), spread back over the window: the input gradient of a
 * one-channel convolution with a kernel of ones, the planes as its batch.
 * Cells a ceil-mode window reaches past the end pad fall outside x. */
static rlx_node grad_avg_pool(rlx_graph *g, const rlx_node_data *nd, rlx_node dy)
{
    const rlx_pool_params *p = &nd->attrs.pool.p;
    int sp = nd->attrs.pool.spatial;
    rlx_shape sx = shape_of(g, nd->in[0]), sy = nd->shape;
    rlx_dtype t = dtype_of(g, dy);
    int64_t OH = sp == 2 ? sy.dims[2] : 1, OW = sy.dims[sx.ndim - 1], K = 1;
    rlx_shape ks = {sx.ndim, {1, 1}}, s1 = sy, sx1 = sx;
    for (int a = 0; a < sp; a++) {
        ks.dims[2 + a] = p->kernel[a];
        K *= p->kernel[a];
    }
    float *cnt = rlx_malloc((size_t)(OH * OW > 0 ? OH * OW : 1) * sizeof *cnt);
    float *ones = rlx_malloc((size_t)K * sizeof *ones);
    if (!cnt || !ones) {
        free(cnt), free(ones);
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "avg_pool gradient: out of memory");
    }
    bool uniform = true;
    for (int64_t o = 0; o < OH * OW; o++) {
        int64_t c = 1, at[2] = {o / OW, o % OW};
        for (int a = 0; a < sp; a++) {
            int64_t L = sx.dims[2 + a], pb = p->pads[a], start = at[2 - sp + a] * p->stride[a] - pb;
            int64_t lo = p->count_include_pad ? -pb : 0, hi = p->count_include_pad ? L + p->pads[sp + a] : L;
            c *= taps_within(start, lo, hi, p->dilation[a], p->kernel[a]);
        }
        cnt[o] = c > 0 ? (float)c : 1.0f; /* no cell of x: its share lands outside x */
        uniform &= cnt[o] == cnt[0];
    }
    rlx_node d;
    if (uniform) {
        d = rlx_div(g, dy, scalar_like(g, dy, OH * OW > 0 ? cnt[0] : 1.0));
    } else {
        rlx_shape cs = {sp, {sp == 2 ? OH : OW, OW}};
        d = rlx_div(g, dy, constant_as(g, t, &cs, cnt));
    }
    for (int64_t i = 0; i < K; i++)
        ones[i] = 1.0f;
    s1.dims[0] = sx1.dims[0] = sx.dims[0] * sx.dims[1];
    s1.dims[1] = sx1.dims[1] = 1;
    rlx_conv_params q = pool_as_conv(p, sp);
    rlx_node r = conv_input_grad(g, rlx_reshape(g, d, s1.ndim, s1.dims), constant_as(g, t, &ks, ones), &sx1, &q, sp);
    free(cnt), free(ones);
    return rlx_reshape(g, r, sx.ndim, sx.dims);
}

/* max_pool: each window's dy goes to the cells holding its maximum, shared
 * evenly among ties (as reduce_max's rule shares it).  The window's K taps
 * are strided slices of x padded with -inf (padded cells never win),
 * stacked as [N, C, K, *out]; the shares go back through the input gradient
 * of the convolution whose K output channels each pick one tap (one-hot
 * kernels), so one convolution sums the overlapping windows. */
static rlx_node grad_max_pool(rlx_graph *g, rlx_node n, const rlx_node_data *nd, rlx_node dy)
{
    const rlx_pool_params *p = &nd->attrs.pool.p;
    int sp = nd->attrs.pool.spatial;
    rlx_node x = nd->in[0];
    rlx_shape sx = shape_of(g, x), sy = nd->shape;
    rlx_dtype t = dtype_of(g, dy);
    int r = sx.ndim;
    int64_t pads[2 * RLX_MAX_DIMS] = {0}, K = 1;
    bool padded = false;
    for (int a = 0; a < sp; a++) {
        int64_t reach = (p->kernel[a] - 1) * p->dilation[a] + (sy.dims[2 + a] - 1) * p->stride[a] + 1;
        int64_t pe = reach - sx.dims[2 + a] - p->pads[a]; /* a ceil-mode window may pass the end pad */
        pads[2 + a] = p->pads[a];
        pads[r + 2 + a] = pe > p->pads[sp + a] ? pe : p->pads[sp + a];
        padded |= pads[2 + a] > 0 || pads[r + 2 + a] > 0;
        K *= p->kernel[a];
    }
    rlx_node xp = padded ? rlx_pad(g, x, pads, RLX_PAD_CONSTANT, -INFINITY) : x;
    rlx_node *taps = rlx_malloc((size_t)K * sizeof *taps);
    float *onehot = rlx_calloc((size_t)(K * K), sizeof *onehot);
    if (!taps || !onehot) {
        free(taps), free(onehot);
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "max_pool gradient: out of memory");
    }
    rlx_shape s1 = sy; /* [N, C, 1, *out] */
    s1.ndim = r + 1;
    s1.dims[2] = 1;
    for (int a = 0; a < sp; a++)
        s1.dims[3 + a] = sy.dims[2 + a];
    int axes[2];
    int64_t st[2], en[2];
    for (int64_t k = 0; k < K; k++) {
        int64_t at[2] = {k / p->kernel[sp - 1], k % p->kernel[sp - 1]}; /* 1-d: at[1] */
        for (int a = 0; a < sp; a++) {
            axes[a] = 2 + a;
            st[a] = at[2 - sp + a] * p->dilation[a];
            en[a] = st[a] + (sy.dims[2 + a] - 1) * p->stride[a] + 1;
        }
        taps[k] = rlx_reshape(g, rlx_slice(g, xp, sp, axes, st, en, p->stride), s1.ndim, s1.dims);
        onehot[k * K + k] = 1.0f;
    }
    rlx_node tv = rlx_concat(g, (int)K, taps, 2);
    rlx_node hit = rlx_equal(g, tv, rlx_reshape(g, n, s1.ndim, s1.dims));
    int ax2 = 2;
    rlx_node cnt = rlx_reduce_sum(g, rlx_cast(g, hit, t), 1, &ax2, 1);
    rlx_node d = rlx_where(g, hit, rlx_div(g, rlx_reshape(g, dy, s1.ndim, s1.dims), cnt), scalar_like(g, dy, 0));
    rlx_shape sd = sy, ks = {r, {K, 1}}, sx1 = sx;
    sd.dims[0] = sx1.dims[0] = sx.dims[0] * sx.dims[1];
    sd.dims[1] = K;
    sx1.dims[1] = 1;
    for (int a = 0; a < sp; a++)
        ks.dims[2 + a] = p->kernel[a];
    rlx_conv_params q = pool_as_conv(p, sp);
    rlx_node e = constant_as(g, t, &ks, onehot);
    free(taps), free(onehot);
    rlx_node res = conv_input_grad(g, rlx_reshape(g, d, sd.ndim, sd.dims), e, &sx1, &q, sp);
    return rlx_reshape(g, res, sx.ndim, sx.dims);
}

rlx_status rlx_grad_pool(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_node_data nd = node_copy(g, n);
    if (nd.attrs.pool.layout != RLX_LAYOUT_NCHW)
        return refuse(g, n, "only NCHW pooling has a gradient rule");
    dx[0] = nd.op == RLX_OP_MAX_POOL ? grad_max_pool(g, n, &nd, dy) : grad_avg_pool(g, &nd, dy);
    return status_of(g, dx, 1);
}

rlx_status rlx_grad_global_pool(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx)
{
    if (!need[0])
        return RLX_OK;
    rlx_shape sx = shape_of(g, g->nodes[n].in[0]);
    int64_t area = 1;
    for (int i = 2; i < sx.ndim; i++)
        area *= sx.dims[i];
    rlx_node d = rlx_expand(g, dy, sx.ndim, sx.dims);
    dx[0] = rlx_mul(g, d, scalar_like(g, dy, area ? 1.0 / (double)area : 0.0));
    return status_of(g, dx, 1);
}
