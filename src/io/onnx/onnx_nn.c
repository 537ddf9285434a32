/* onnx_nn.c - neural-network layers other than conv and matmul: the
 * normalisations (batch, instance, layer, group, Lp, mean-variance, LRN),
 * Softmax/LogSoftmax/Hardmax, Dropout, and the NegativeLogLikelihood and
 * SoftmaxCrossEntropy losses. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "ir/ir.h" /* rlx_graph_fail: record a composite's failure in the graph */

#define G (n->c->g)

static rlx_status h_dropout(onnx_node *n)
{
    /* training mode (opset 12+: input 2; before: is_test=0 / opset < 7 defaults)
     * with a non-zero ratio drops at random; inference is the identity */
    double ratio = n->opset >= 12 ? 0.5 : onnx_attr_f(n, "ratio", 0.5);
    bool training = false;
    if (n->opset >= 12) {
        if (n->n_in > 1 && n->in[1] && !onnx_const_scalar(n, 1, &ratio))
            return onnx_need_const(n, 1, "ratio");
        double tm = 0;
        if (n->n_in > 2 && n->in[2] && !onnx_const_scalar(n, 2, &tm))
            return onnx_need_const(n, 2, "training_mode");
        training = tm != 0;
    } else if (n->opset < 7)
        training = onnx_attr_i(n, "is_test", 0) == 0 && onnx_attr(n, "is_test") != NULL;
    if (training && ratio > 0) {
        rlx_node y = rlx_dropout(n->c->g, onnx_in(n, 0), ratio);
        rlx_status st = onnx_out_node(n, 0, y);
        if (st == RLX_OK && n->n_out > 1)
            st = onnx_out_node(n, 1, rlx_not(n->c->g, rlx_equal(n->c->g, y, onnx_scalar(n, onnx_in_dtype(n, 0), 0))));
        return st;
    }
    rlx_status st = onnx_pass_through(n, 0, 0);
    if (st != RLX_OK || n->n_out < 2)
        return st;
    int64_t dims[RLX_MAX_DIMS];
    int nd = onnx_in_shape(n, 0, dims);
    onnx_tensor *m = onnx_tensor_derived(RLX_BOOL, nd, dims);
    if (m)
        memset(m->data, 1, m->bytes);
    return onnx_out_const(n, 1, m);
}

/* [C] -> [C, 1, 1, ...] to broadcast over x [N, C, spatial...] */
static rlx_node per_channel(onnx_node *n, rlx_node v, int xr)
{
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_shape(n, v, d);
    if (r != 1)
        return v;
    int64_t nd[RLX_MAX_DIMS];
    nd[0] = d[0];
    for (int i = 1; i < xr - 1; i++)
        nd[i] = 1;
    return onnx_reshape(n, v, xr - 1 > 0 ? xr - 1 : 1, nd);
}

static rlx_status h_batchnorm(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    if (n->n_in < 5)
        return onnx_fail(n, RLX_ERR_FORMAT, "needs 5 inputs");
    if (onnx_attr_i(n, "training_mode", 0)) {
        /* batch statistics; running stats updated with momentum */
        rlx_node x = onnx_in(n, 0);
        int64_t xd[RLX_MAX_DIMS];
        int xr = onnx_shape(n, x, xd);
        rlx_dtype t = onnx_in_dtype(n, 0);
        double eps = onnx_attr_f(n, "epsilon", 1e-5), mom = onnx_attr_f(n, "momentum", 0.9);
        int axes[RLX_MAX_DIMS], na = 0;
        for (int i = 0; i < xr; i++)
            if (i != 1)
                axes[na++] = i;
        rlx_node mean = rlx_reduce_mean(g, x, na, axes, 1);
        rlx_node d = rlx_sub(g, x, mean);
        rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), na, axes, 1);
        rlx_node y = rlx_mul(g, d, rlx_rsqrt(g, rlx_add(g, var, onnx_scalar(n, t, eps))));
        y = rlx_add(g, rlx_mul(g, y, per_channel(n, onnx_in(n, 1), xr)), per_channel(n, onnx_in(n, 2), xr));
        rlx_status st = onnx_out_node(n, 0, y);
        int64_t c = xd[1];
        rlx_node m1 = rlx_reshape(g, mean, 1, &c), v1 = rlx_reshape(g, var, 1, &c);
        if (st == RLX_OK && n->n_out > 1)
            st = onnx_out_node(n, 1,
                               rlx_add(g, rlx_mul(g, onnx_in(n, 3), onnx_scalar(n, t, mom)),
                                       rlx_mul(g, m1, onnx_scalar(n, t, 1 - mom))));
        if (st == RLX_OK && n->n_out > 2)
            st = onnx_out_node(n, 2,
                               rlx_add(g, rlx_mul(g, onnx_in(n, 4), onnx_scalar(n, t, mom)),
                                       rlx_mul(g, v1, onnx_scalar(n, t, 1 - mom))));
        return st;
    }
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    rlx_dtype t = onnx_in_dtype(n, 0);
    double eps = onnx_attr_f(n, "epsilon", 1e-5);
    rlx_node sc = per_channel(n, onnx_in(n, 1), xr), b = per_channel(n, onnx_in(n, 2), xr);
    rlx_node mean = per_channel(n, onnx_in(n, 3), xr), var = per_channel(n, onnx_in(n, 4), xr);
    rlx_node a = rlx_mul(g, sc, rlx_rsqrt(g, rlx_add(g, var, onnx_scalar(n, t, eps))));
    rlx_node y = rlx_add(g, rlx_mul(g, rlx_sub(g, x, mean), a), b);
    rlx_status st = onnx_out_node(n, 0, y);
    for (int i = 1; st == RLX_OK && i < n->n_out; i++)
        if (n->p->output[i] && *n->p->output[i])
            st = onnx_out_node(n, i, onnx_in(n, i == 1 ? 3 : 4));
    return st;
}

static rlx_status h_instancenorm(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    rlx_dtype t = onnx_in_dtype(n, 0);
    double eps = onnx_attr_f(n, "epsilon", 1e-5);
    int axes[RLX_MAX_DIMS];
    for (int i = 2; i < xr; i++)
        axes[i - 2] = i;
    rlx_node mean = rlx_reduce_mean(g, x, xr - 2, axes, 1);
    rlx_node d = rlx_sub(g, x, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), xr - 2, axes, 1);
    rlx_node y = rlx_mul(g, d, rlx_rsqrt(g, rlx_add(g, var, onnx_scalar(n, t, eps))));
    y = rlx_add(g, rlx_mul(g, y, per_channel(n, onnx_in(n, 1), xr)), per_channel(n, onnx_in(n, 2), xr));
    return onnx_out_node(n, 0, y);
}

static rlx_status h_layernorm(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    rlx_dtype t = onnx_in_dtype(n, 0);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", -1), xr);
    double eps = onnx_attr_f(n, "epsilon", 1e-5);
    if (axis < 0 || axis >= xr)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    rlx_node scale = onnx_in(n, 1), bias = n->n_in >= 3 && n->in[2] ? onnx_in(n, 2) : -1;
    bool extra = (n->n_out > 1 && *n->p->output[1]) || (n->n_out > 2 && *n->p->output[2]);
    int64_t sd[RLX_MAX_DIMS];
    int sr = onnx_shape(n, scale, sd);
    bool simple = axis == xr - 1 && sr == 1 && sd[0] == xd[xr - 1] && !extra && onnx_dtype_is_float(t);
    if (bias >= 0) {
        int64_t bd[RLX_MAX_DIMS];
        int br = onnx_shape(n, bias, bd);
        simple &= br == 1 && bd[0] == xd[xr - 1];
    }
    if (simple)
        return onnx_out_node(n, 0, rlx_layer_norm(g, x, scale, bias, eps));
    int axes[RLX_MAX_DIMS];
    for (int i = axis; i < xr; i++)
        axes[i - axis] = i;
    int na = xr - axis;
    rlx_node mean = rlx_reduce_mean(g, x, na, axes, 1);
    rlx_node d = rlx_sub(g, x, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), na, axes, 1);
    rlx_node inv = rlx_rsqrt(g, rlx_add(g, var, onnx_scalar(n, t, eps)));
    rlx_node y = rlx_mul(g, rlx_mul(g, d, inv), scale);
    if (bias >= 0)
        y = rlx_add(g, y, bias);
    rlx_status st = onnx_out_node(n, 0, y);
    if (st == RLX_OK && n->n_out > 1)
        st = onnx_out_node(n, 1, mean);
    if (st == RLX_OK && n->n_out > 2)
        st = onnx_out_node(n, 2, inv);
    return st;
}

/* GroupNormalization: statistics over each group of channels; scale and
 * bias per group (opset 18) or per channel (later opsets). */
static rlx_status h_groupnorm(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS], sd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    int64_t groups = onnx_attr_i(n, "num_groups", 0);
    if (xr < 2 || groups < 1 || xd[1] % groups)
        return onnx_fail(n, RLX_ERR_SHAPE, "channels not divisible into %lld groups", (long long)groups);
    rlx_dtype t = onnx_in_dtype(n, 0);
    double eps = onnx_attr_f(n, "epsilon", 1e-5);
    int64_t N = xd[0], C = xd[1], rest = 1;
    for (int i = 2; i < xr; i++)
        rest *= xd[i];
    rlx_node v = rlx_reshape(g, x, 3, (int64_t[]){N, groups, C / groups * rest});
    int ax = 2;
    rlx_node mean = rlx_reduce_mean(g, v, 1, &ax, 1);
    rlx_node d = rlx_sub(g, v, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), 1, &ax, 1);
    rlx_node y = rlx_mul(g, d, rlx_rsqrt(g, rlx_add(g, var, onnx_scalar(n, t, eps))));
    y = rlx_reshape(g, y, 3, (int64_t[]){N, C, rest});
    rlx_node sb[2] = {onnx_in(n, 1), onnx_in(n, 2)};
    for (int k = 0; k < 2; k++) {
        int sr = onnx_shape(n, sb[k], sd);
        if (sr != 1 || (sd[0] != groups && sd[0] != C))
            return onnx_fail(n, RLX_ERR_SHAPE, "scale/bias must have num_groups or C values");
        rlx_node p = sb[k];
        if (sd[0] == groups && groups != C) /* per group -> per channel */
            p = rlx_reshape(
                g, rlx_expand(g, rlx_reshape(g, p, 2, (int64_t[]){groups, 1}), 2, (int64_t[]){groups, C / groups}), 1,
                &C);
        p = rlx_reshape(g, p, 2, (int64_t[]){C, 1});
        y = k == 0 ? rlx_mul(g, y, p) : rlx_add(g, y, p);
    }
    return onnx_out_node(n, 0, rlx_reshape(g, y, xr, xd));
}

static rlx_status h_lpnorm(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    int r = onnx_value_rank(n->c, n->in[0]);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", -1), r);
    int64_t p = onnx_attr_i(n, "p", 2);
    rlx_node s = p == 1 ? rlx_reduce_sum(g, rlx_abs(g, x), 1, &axis, 1)
                        : rlx_sqrt(g, rlx_reduce_sum(g, rlx_mul(g, x, x), 1, &axis, 1));
    return onnx_out_node(n, 0, rlx_div(g, x, s));
}

static rlx_status h_mvn(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    int r = onnx_value_rank(n->c, n->in[0]);
    int64_t ax[RLX_MAX_DIMS] = {0, 2, 3};
    int na = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS);
    if (na < 0)
        na = 3;
    int axes[RLX_MAX_DIMS];
    for (int i = 0; i < na; i++)
        axes[i] = onnx_norm_axis(ax[i], r);
    rlx_node mean = rlx_reduce_mean(g, x, na, axes, 1);
    rlx_node d = rlx_sub(g, x, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), na, axes, 1);
    return onnx_out_node(n, 0, rlx_div(g, d, rlx_add(g, rlx_sqrt(g, var), onnx_scalar(n, onnx_in_dtype(n, 0), 1e-9))));
}

/* Softmax family; before opset 13 the input is seen as 2-d [prod(:axis), prod(axis:)]. */
static rlx_status h_softmax(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    const char *op = n->p->op_type;
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    bool old = n->opset < 13;
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", old ? 1 : -1), xr);
    if (xr == 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "scalar input");
    if (axis < 0 || axis >= xr)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    rlx_node v = x;
    int ax = axis;
    if (old && axis != xr - 1) {
        int64_t a = 1, b = 1;
        for (int i = 0; i < axis; i++)
            a *= xd[i];
        for (int i = axis; i < xr; i++)
            b *= xd[i];
        v = rlx_reshape(g, x, 2, (int64_t[]){a, b});
        ax = 1;
    }
    rlx_node y;
    if (!strcmp(op, "Softmax"))
        y = rlx_softmax(g, v, ax);
    else if (!strcmp(op, "LogSoftmax"))
        y = rlx_log_softmax(g, v, ax);
    else {
        /* Hardmax: one-hot of the first maximum */
        int64_t vd[RLX_MAX_DIMS];
        int vr = onnx_shape(n, v, vd);
        rlx_node am = rlx_argmax(g, v, ax, 1);
        onnx_tensor *rg = onnx_tensor_derived(RLX_I64, 1, &vd[ax]);
        if (!rg)
            return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        for (int64_t i = 0; i < vd[ax]; i++)
            ((int64_t *)rg->data)[i] = i;
        int64_t rs[RLX_MAX_DIMS];
        for (int i = 0; i < vr; i++)
            rs[i] = i == ax ? vd[ax] : 1;
        rlx_node rn = rlx_constant(g, RLX_I64, vr, rs, rg->data, rg->bytes);
        onnx_tensor_free(rg);
        y = rlx_cast(g, rlx_equal(g, am, rn), onnx_in_dtype(n, 0));
    }
    if (v != x)
        y = rlx_reshape(g, y, xr, xd);
    return onnx_out_node(n, 0, y);
}

static rlx_status h_lrn(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    int64_t size = onnx_attr_i(n, "size", 1);
    double alpha = onnx_attr_f(n, "alpha", 1e-4), beta = onnx_attr_f(n, "beta", 0.75),
           bias = onnx_attr_f(n, "bias", 1.0);
    if (r < 3 || size < 1)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad input or size");
    rlx_dtype t = onnx_in_dtype(n, 0);
    /* the window reaches lo channels back and hi ahead; past C - 1 either
     * way it only adds zeros, so it is clipped there (the scale keeps size) */
    int64_t C = xd[1], lo = (size - 1) / 2, hi = size - 1 - lo;
    if (lo > C - 1)
        lo = C - 1;
    if (hi > C - 1)
        hi = C - 1;
    if (C < 1 || lo + hi + 1 > 4096)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "window of %lld over %lld channels: %lld taps, too many to expand",
                         (long long)size, (long long)C, (long long)(lo + hi + 1));
    int64_t pads[2 * RLX_MAX_DIMS] = {0};
    pads[1] = lo;
    pads[r + 1] = hi;
    rlx_node sq = rlx_pad(G, rlx_mul(G, x, x), pads, RLX_PAD_CONSTANT, 0);
    rlx_node sum = -1;
    int ax = 1;
    for (int64_t i = 0; i < lo + hi + 1; i++) {
        int64_t s = i, e = i + xd[1];
        rlx_node sl = rlx_slice(G, sq, 1, &ax, &s, &e, NULL);
        sum = sum < 0 ? sl : rlx_add(G, sum, sl);
    }
    rlx_node den =
        rlx_pow(G, rlx_add(G, onnx_scalar(n, t, bias), rlx_mul(G, sum, onnx_scalar(n, t, alpha / (double)size))),
                onnx_scalar(n, t, beta));
    return onnx_out_node(n, 0, rlx_div(G, x, den));
}

/* NegativeLogLikelihoodLoss on log-probabilities [N, C, d...]. */
static rlx_node nll(onnx_node *n, rlx_node x, rlx_node target, rlx_node weight, const char *red, bool has_ii,
                    int64_t ii)
{
    int64_t xd[RLX_MAX_DIMS], td[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd), tr = onnx_shape(n, target, td);
    rlx_dtype ft = rlx_node_dtype(G, x);
    rlx_node t = onnx_to_i64(n, target);
    rlx_node mask = -1;
    if (has_ii) {
        mask = rlx_not(G, rlx_equal(G, t, onnx_scalar(n, RLX_I64, (double)ii)));
        t = rlx_where(G, mask, t, onnx_scalar(n, RLX_I64, 0));
    }
    int64_t ud[RLX_MAX_DIMS];
    ud[0] = td[0];
    ud[1] = 1;
    for (int i = 1; i < tr; i++)
        ud[i + 1] = td[i];
    if (xr != tr + 1)
        return rlx_graph_fail(G, RLX_ERR_SHAPE, "nll: target rank");
    rlx_node picked = rlx_reshape(G, onnx_gather_elements(n, x, rlx_reshape(G, t, tr + 1, ud), 1), tr, td);
    rlx_node loss = rlx_neg(G, picked);
    rlx_node w = -1;
    if (weight >= 0)
        w = rlx_gather(G, weight, t, 0);
    if (mask >= 0) {
        rlx_node mf = rlx_cast(G, mask, ft);
        w = w >= 0 ? rlx_mul(G, w, mf) : mf;
    }
    if (w >= 0)
        loss = rlx_mul(G, loss, w);
    if (!strcmp(red, "none"))
        return loss;
    rlx_node s = rlx_reduce_sum(G, loss, 0, NULL, 0);
    if (!strcmp(red, "sum"))
        return s;
    if (w >= 0)
        return rlx_div(G, s, rlx_reduce_sum(G, w, 0, NULL, 0));
    return rlx_reduce_mean(G, loss, 0, NULL, 0);
}

static rlx_status h_nll(onnx_node *n)
{
    char buf[16];
    const char *red = onnx_attr_s(n, "reduction", "mean", buf, sizeof buf);
    const Onnx__AttributeProto *a = onnx_attr(n, "ignore_index");
    rlx_node w = n->n_in > 2 && n->in[2] ? onnx_in(n, 2) : -1;
    return onnx_out_node(n, 0, nll(n, onnx_in(n, 0), onnx_in(n, 1), w, red, a != NULL, a ? a->i : 0));
}

static rlx_status h_sce(onnx_node *n)
{
    char buf[16];
    const char *red = onnx_attr_s(n, "reduction", "mean", buf, sizeof buf);
    const Onnx__AttributeProto *a = onnx_attr(n, "ignore_index");
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    rlx_node lp;
    if (xr == 2)
        lp = rlx_log_softmax(G, x, 1);
    else {
        /* log-softmax over axis 1 of [N, C, d...] */
        int perm[RLX_MAX_DIMS], inv[RLX_MAX_DIMS];
        int k = 0;
        perm[k++] = 0;
        for (int i = 2; i < xr; i++)
            perm[k++] = i;
        perm[k++] = 1;
        for (int i = 0; i < xr; i++)
            inv[perm[i]] = i;
        lp = rlx_transpose(G, rlx_log_softmax(G, rlx_transpose(G, x, perm), xr - 1), inv);
    }
    rlx_node w = n->n_in > 2 && n->in[2] ? onnx_in(n, 2) : -1;
    rlx_status st = onnx_out_node(n, 0, nll(n, lp, onnx_in(n, 1), w, red, a != NULL, a ? a->i : 0));
    if (st == RLX_OK && n->n_out > 1)
        st = onnx_out_node(n, 1, lp);
    return st;
}

const onnx_op onnx_nn_ops[] = {
    ONNX_OP("Dropout", h_dropout, 1),
    ONNX_OP("BatchNormalization", h_batchnorm, 5),
    ONNX_OP("InstanceNormalization", h_instancenorm, 3),
    ONNX_OP("LayerNormalization", h_layernorm, 2),
    ONNX_OP("LpNormalization", h_lpnorm, 1),
    ONNX_OP("GroupNormalization", h_groupnorm, 3),
    ONNX_OP("MeanVarianceNormalization", h_mvn, 1),
    ONNX_OP("Softmax", h_softmax, 1),
    ONNX_OP("LogSoftmax", h_softmax, 1),
    ONNX_OP("Hardmax", h_softmax, 1),
    ONNX_OP("NegativeLogLikelihoodLoss", h_nll, 2),
    ONNX_OP("SoftmaxCrossEntropyLoss", h_sce, 2),
    ONNX_OP("LRN", h_lrn, 1),
    ONNX_OP_END,
};
