/* onnx_ops.c - ONNX operators mapped onto the RLX builder API: elementwise
 * math and logic, MatMul/Gemm, Conv and pooling, normalisations, the
 * shape and data-movement ops (folded on the host when their inputs are
 * constant), reductions.  Composite ops are decomposed into primitives. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"

/* out = the value of input i, as a host constant when it is one. */
static rlx_status pass_through(ox_node *n, int i, int o)
{
    if (n->in[i]->k)
        return ox_out_const(n, o, ox_tensor_clone(n->in[i]->k));
    return ox_out_node(n, o, oxo_in(n, i));
}

/* Reshape a value to dims, keeping it a host constant when it is one. */
static rlx_status out_reshaped(ox_node *n, int i, int nd, const int64_t *dims)
{
    if (n->in[i]->k) {
        ox_tensor *y = ox_tensor_clone(n->in[i]->k);
        if (!y)
            return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
        int64_t numel = 1;
        for (int d = 0; d < nd; d++)
            numel *= dims[d];
        if (numel != y->numel) {
            ox_tensor_free(y);
            return ox_fail(n, RLX_ERR_SHAPE, "cannot reshape %lld elements", (long long)numel);
        }
        y->ndim = nd;
        for (int d = 0; d < nd; d++)
            y->dims[d] = dims[d];
        return ox_out_const(n, 0, y);
    }
    for (int d = 0; d < nd; d++)
        if (dims[d] == 0) /* an empty result (RLX's reshape reads 0 as "keep this dim") */
            return ox_out_const(n, 0, oxo_tensor(oxo_in_dtype(n, i), nd, dims));
    return ox_out_node(n, 0, oxo_reshape(n, oxo_in(n, i), nd, dims));
}

/* ------------------------------------------------------------ elementwise */

typedef rlx_node (*unary_fn)(rlx_graph *, rlx_node);
typedef rlx_node (*binary_fn)(rlx_graph *, rlx_node, rlx_node);

/* One entry per ONNX unary op: its name and builder (ox_find_handler
 * dispatches these names to h_unary; the handler table does not repeat
 * them).  The same holds for binary_map below. */
static const struct {
    const char *name;
    unary_fn fn;
} unary_map[] = {
    {"Neg", rlx_neg},     {"Abs", rlx_abs},         {"Exp", rlx_exp},
    {"Log", rlx_log},     {"Sqrt", rlx_sqrt},       {"Reciprocal", rlx_reciprocal},
    {"Tanh", rlx_tanh},   {"Sigmoid", rlx_sigmoid}, {"Relu", rlx_relu},
    {"Erf", rlx_erf},     {"Sin", rlx_sin},         {"Cos", rlx_cos},
    {"Floor", rlx_floor}, {"Ceil", rlx_ceil},       {"Round", rlx_round},
    {"Sign", rlx_sign},   {"Not", rlx_not},
};

static unary_fn unary_of(const char *op_type)
{
    for (size_t i = 0; i < sizeof unary_map / sizeof unary_map[0]; i++)
        if (!strcmp(op_type, unary_map[i].name))
            return unary_map[i].fn;
    return NULL;
}

static rlx_status h_unary(ox_node *n)
{
    unary_fn fn = unary_of(n->p->op_type);
    if (!fn)
        return ox_fail(n, RLX_ERR_INTERNAL, "no unary mapping");
    return ox_out_node(n, 0, fn(n->c->g, oxo_in(n, 0)));
}

static rlx_node le(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_not(g, rlx_greater(g, a, b)); }
static rlx_node ge(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_not(g, rlx_less(g, a, b)); }

static const struct {
    const char *name;
    binary_fn fn;
} binary_map[] = {
    {"Add", rlx_add},   {"Sub", rlx_sub},         {"Mul", rlx_mul},    {"Div", rlx_div},       {"Equal", rlx_equal},
    {"Less", rlx_less}, {"Greater", rlx_greater}, {"LessOrEqual", le}, {"GreaterOrEqual", ge}, {"And", rlx_and},
    {"Or", rlx_or},     {"Xor", rlx_xor},         {"Max", rlx_max},    {"Min", rlx_min},       {"Sum", rlx_add},
};

static binary_fn binary_of(const char *op_type)
{
    binary_fn fn = NULL;
    for (size_t i = 0; i < sizeof binary_map / sizeof binary_map[0]; i++)
        if (!strcmp(op_type, binary_map[i].name))
            fn = binary_map[i].fn;
    return fn;
}

static rlx_status h_binary(ox_node *n)
{
    binary_fn fn = binary_of(n->p->op_type);
    if (!fn)
        return ox_fail(n, RLX_ERR_INTERNAL, "no binary mapping");
    if (n->n_in < 1)
        return ox_fail(n, RLX_ERR_FORMAT, "needs inputs");
    rlx_node acc = oxo_in(n, 0);
    for (int i = 1; i < n->n_in; i++)
        acc = fn(n->c->g, acc, oxo_in(n, i));
    if (n->n_in == 1)
        return pass_through(n, 0, 0);
    return ox_out_node(n, 0, acc);
}

static rlx_status h_mean(ox_node *n)
{
    rlx_node acc = oxo_in(n, 0);
    for (int i = 1; i < n->n_in; i++)
        acc = rlx_add(n->c->g, acc, oxo_in(n, i));
    if (n->n_in > 1)
        acc = rlx_div(n->c->g, acc, oxo_scalar(n, oxo_in_dtype(n, 0), n->n_in));
    return ox_out_node(n, 0, acc);
}

static rlx_status h_pow(ox_node *n)
{
    rlx_node a = oxo_in(n, 0), b = oxo_in(n, 1);
    rlx_dtype ta = oxo_in_dtype(n, 0), tb = oxo_in_dtype(n, 1);
    if (ta != tb) {
        if (ox_dtype_is_float(ta))
            b = rlx_cast(n->c->g, b, ta);
        else {
            /* integer base, float exponent: compute in the exponent's type */
            rlx_node y = rlx_pow(n->c->g, rlx_cast(n->c->g, a, tb), b);
            return ox_out_node(n, 0, rlx_cast(n->c->g, y, ta));
        }
    }
    return ox_out_node(n, 0, rlx_pow(n->c->g, a, b));
}

static rlx_status h_mod(ox_node *n)
{
    return ox_out_node(n, 0, rlx_mod(n->c->g, oxo_in(n, 0), oxo_in(n, 1), (int)ox_attr_i(n, "fmod", 0)));
}

static rlx_status h_where(ox_node *n)
{
    return ox_out_node(n, 0, rlx_where(n->c->g, oxo_in(n, 0), oxo_in(n, 1), oxo_in(n, 2)));
}

static rlx_status h_cast(ox_node *n)
{
    rlx_dtype to;
    if (!strcmp(n->p->op_type, "CastLike"))
        to = oxo_in_dtype(n, 1);
    else {
        int64_t ot = ox_attr_i(n, "to", 0);
        if (!ox_dtype_from_onnx((int)ot, &to))
            return ox_fail(n, RLX_ERR_UNSUPPORTED, "cast to %s is not supported", ox_onnx_type_name((int)ot));
    }
    if (n->in[0]->k && n->in[0]->k->numel <= OX_FOLD_MAX_NUMEL)
        return ox_out_const(n, 0, oxh_cast(n->in[0]->k, to));
    if (oxo_in_dtype(n, 0) == to)
        return pass_through(n, 0, 0);
    return ox_out_node(n, 0, rlx_cast(n->c->g, oxo_in(n, 0), to));
}

static rlx_status h_identity(ox_node *n) { return pass_through(n, 0, 0); }

static rlx_status h_dropout(ox_node *n)
{
    /* training mode (opset 12+: input 2; before: is_test=0 / opset < 7 defaults)
     * with a non-zero ratio drops at random; inference is the identity */
    double ratio = n->opset >= 12 ? 0.5 : ox_attr_f(n, "ratio", 0.5);
    bool training = false;
    if (n->opset >= 12) {
        if (n->n_in > 1 && n->in[1] && !oxo_const_scalar(n, 1, &ratio))
            return oxo_need_const(n, 1, "ratio");
        double tm = 0;
        if (n->n_in > 2 && n->in[2] && !oxo_const_scalar(n, 2, &tm))
            return oxo_need_const(n, 2, "training_mode");
        training = tm != 0;
    } else if (n->opset < 7)
        training = ox_attr_i(n, "is_test", 0) == 0 && ox_attr(n, "is_test") != NULL;
    if (training && ratio > 0) {
        rlx_node y = rlx_dropout(n->c->g, oxo_in(n, 0), ratio);
        rlx_status st = ox_out_node(n, 0, y);
        if (st == RLX_OK && n->n_out > 1)
            st = ox_out_node(n, 1, rlx_not(n->c->g, rlx_equal(n->c->g, y, oxo_scalar(n, oxo_in_dtype(n, 0), 0))));
        return st;
    }
    rlx_status st = pass_through(n, 0, 0);
    if (st != RLX_OK || n->n_out < 2)
        return st;
    int64_t dims[RLX_MAX_DIMS];
    int nd = oxo_in_shape(n, 0, dims);
    ox_tensor *m = oxo_tensor(RLX_BOOL, nd, dims);
    if (m)
        memset(m->data, 1, m->bytes);
    return ox_out_const(n, 1, m);
}

static rlx_status h_clip(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    rlx_dtype t = oxo_in_dtype(n, 0);
    if (n->opset < 11) {
        return ox_out_node(n, 0, rlx_clip(g, x, ox_attr_f(n, "min", -INFINITY), ox_attr_f(n, "max", INFINITY)));
    }
    double lo = -INFINITY, hi = INFINITY;
    bool klo = n->n_in < 2 || !n->in[1] || oxo_const_scalar(n, 1, &lo);
    bool khi = n->n_in < 3 || !n->in[2] || oxo_const_scalar(n, 2, &hi);
    if (klo && khi) {
        if (!ox_dtype_is_float(t)) {
            /* integer clip: bounds through max/min keep exact values */
            rlx_node y = x;
            if (n->n_in >= 2 && n->in[1])
                y = rlx_max(g, y, oxo_in(n, 1));
            if (n->n_in >= 3 && n->in[2])
                y = rlx_min(g, y, oxo_in(n, 2));
            if (y == x)
                return pass_through(n, 0, 0);
            return ox_out_node(n, 0, y);
        }
        return ox_out_node(n, 0, rlx_clip(g, x, lo, hi));
    }
    rlx_node y = x;
    if (n->n_in >= 2 && n->in[1])
        y = rlx_max(g, y, oxo_in(n, 1));
    if (n->n_in >= 3 && n->in[2])
        y = rlx_min(g, y, oxo_in(n, 2));
    return ox_out_node(n, 0, y);
}

/* Activations built from primitives. */
static rlx_status h_activation(ox_node *n)
{
    rlx_graph *g = n->c->g;
    const char *op = n->p->op_type;
    rlx_node x = oxo_in(n, 0);
    rlx_dtype t = oxo_in_dtype(n, 0);
#define S(v) oxo_scalar(n, t, (v))
    rlx_node y = -1;
    if (!strcmp(op, "LeakyRelu")) {
        double a = ox_attr_f(n, "alpha", 0.01);
        y = rlx_where(g, rlx_less(g, x, S(0)), rlx_mul(g, x, S(a)), x);
    } else if (!strcmp(op, "PRelu")) {
        rlx_node slope = oxo_in(n, 1);
        int64_t xd[RLX_MAX_DIMS], sd[RLX_MAX_DIMS];
        int xr = oxo_shape(n, x, xd), sr = oxo_shape(n, slope, sd);
        /* older models give a per-channel slope [C] for x [N, C, ...] */
        if (sr == 1 && xr > 2 && sd[0] == xd[1] && (n->opset < 7 || sd[0] != xd[xr - 1])) {
            int64_t nd[RLX_MAX_DIMS];
            for (int i = 0; i < xr - 1; i++)
                nd[i] = i == 0 ? sd[0] : 1;
            slope = rlx_reshape(g, slope, xr - 1, nd);
        }
        y = rlx_where(g, rlx_less(g, x, S(0)), rlx_mul(g, x, slope), x);
    } else if (!strcmp(op, "Elu")) {
        double a = ox_attr_f(n, "alpha", 1.0);
        y = rlx_where(g, rlx_greater(g, x, S(0)), x, rlx_mul(g, S(a), rlx_sub(g, rlx_exp(g, x), S(1))));
    } else if (!strcmp(op, "Selu")) {
        double a = ox_attr_f(n, "alpha", 1.67326319217681884765625),
               gm = ox_attr_f(n, "gamma", 1.05070102214813232421875);
        y = rlx_mul(g, S(gm),
                    rlx_where(g, rlx_greater(g, x, S(0)), x, rlx_mul(g, S(a), rlx_sub(g, rlx_exp(g, x), S(1)))));
    } else if (!strcmp(op, "Celu")) {
        double a = ox_attr_f(n, "alpha", 1.0);
        rlx_node e = rlx_mul(g, S(a), rlx_sub(g, rlx_exp(g, rlx_div(g, x, S(a))), S(1)));
        y = rlx_add(g, rlx_max(g, x, S(0)), rlx_min(g, e, S(0)));
    } else if (!strcmp(op, "ThresholdedRelu")) {
        double a = ox_attr_f(n, "alpha", 1.0);
        y = rlx_where(g, rlx_greater(g, x, S(a)), x, S(0));
    } else if (!strcmp(op, "HardSigmoid")) {
        double a = ox_attr_f(n, "alpha", 0.2), b = ox_attr_f(n, "beta", 0.5);
        y = rlx_clip(g, rlx_add(g, rlx_mul(g, x, S(a)), S(b)), 0, 1);
    } else if (!strcmp(op, "HardSwish")) {
        y = rlx_mul(g, x, rlx_clip(g, rlx_add(g, rlx_mul(g, x, S(1.0 / 6.0)), S(0.5)), 0, 1));
    } else if (!strcmp(op, "Softplus")) {
        /* max(x,0) + log(1 + exp(-|x|)), stable for large |x| */
        y = rlx_add(g, rlx_max(g, x, S(0)), rlx_log(g, rlx_add(g, S(1), rlx_exp(g, rlx_neg(g, rlx_abs(g, x))))));
    } else if (!strcmp(op, "Softsign")) {
        y = rlx_div(g, x, rlx_add(g, S(1), rlx_abs(g, x)));
    } else if (!strcmp(op, "Mish")) {
        rlx_node sp =
            rlx_add(g, rlx_max(g, x, S(0)), rlx_log(g, rlx_add(g, S(1), rlx_exp(g, rlx_neg(g, rlx_abs(g, x))))));
        y = rlx_mul(g, x, rlx_tanh(g, sp));
    } else if (!strcmp(op, "Tan")) {
        y = rlx_div(g, rlx_sin(g, x), rlx_cos(g, x));
    } else if (!strcmp(op, "Sinh")) {
        y = rlx_mul(g, S(0.5), rlx_sub(g, rlx_exp(g, x), rlx_exp(g, rlx_neg(g, x))));
    } else if (!strcmp(op, "Cosh")) {
        y = rlx_mul(g, S(0.5), rlx_add(g, rlx_exp(g, x), rlx_exp(g, rlx_neg(g, x))));
    } else if (!strcmp(op, "Asinh")) {
        y = rlx_log(g, rlx_add(g, x, rlx_sqrt(g, rlx_add(g, rlx_mul(g, x, x), S(1)))));
    } else if (!strcmp(op, "Acosh")) {
        y = rlx_log(g, rlx_add(g, x, rlx_sqrt(g, rlx_sub(g, rlx_mul(g, x, x), S(1)))));
    } else if (!strcmp(op, "Atanh")) {
        y = rlx_mul(g, S(0.5), rlx_log(g, rlx_div(g, rlx_add(g, S(1), x), rlx_sub(g, S(1), x))));
    } else if (!strcmp(op, "Atan") || !strcmp(op, "Asin") || !strcmp(op, "Acos")) {
        /* atan by range reduction (|x| > 1: pi/2 - atan(1/x); |x| > tan(pi/8):
         * pi/4 + atan((x-1)/(x+1))) and an odd series to t^15 */
        rlx_node v = x;
        if (strcmp(op, "Atan"))
            v = rlx_div(g, x, rlx_sqrt(g, rlx_sub(g, S(1), rlx_mul(g, x, x))));
        rlx_node a = rlx_abs(g, v);
        rlx_node big = rlx_greater(g, a, S(1));
        rlx_node u = rlx_where(g, big, rlx_reciprocal(g, a), a);
        rlx_node mid = rlx_greater(g, u, S(0.41421356237309503));
        rlx_node w = rlx_where(g, mid, rlx_div(g, rlx_sub(g, u, S(1)), rlx_add(g, u, S(1))), u);
        rlx_node w2 = rlx_mul(g, w, w), poly = S(-1.0 / 15);
        for (int k = 13; k >= 1; k -= 2)
            poly = rlx_add(g, rlx_mul(g, poly, w2), S(((k / 2) % 2 ? -1.0 : 1.0) / k));
        rlx_node at = rlx_mul(g, w, poly);
        at = rlx_where(g, mid, rlx_add(g, at, S(M_PI / 4)), at);
        at = rlx_where(g, big, rlx_sub(g, S(M_PI / 2), at), at);
        at = rlx_mul(g, at, rlx_sign(g, v));
        if (!strcmp(op, "Asin"))
            at = rlx_where(g, rlx_equal(g, rlx_abs(g, x), S(1)), rlx_mul(g, S(M_PI / 2), rlx_sign(g, x)), at);
        if (!strcmp(op, "Acos"))
            at = rlx_where(g, rlx_equal(g, rlx_abs(g, x), S(1)), rlx_mul(g, S(M_PI / 2), rlx_sign(g, x)), at),
            at = rlx_sub(g, S(M_PI / 2), at);
        y = at;
    } else if (!strcmp(op, "IsNaN")) {
        y = rlx_not(g, rlx_equal(g, x, x));
    } else if (!strcmp(op, "IsInf")) {
        int pos = (int)ox_attr_i(n, "detect_positive", 1), neg = (int)ox_attr_i(n, "detect_negative", 1);
        if (pos && neg)
            y = rlx_equal(g, rlx_abs(g, x), S(INFINITY));
        else if (pos)
            y = rlx_equal(g, x, S(INFINITY));
        else if (neg)
            y = rlx_equal(g, x, S(-INFINITY));
        else
            y = rlx_less(g, x, S(-INFINITY)); /* all false */
    } else if (!strcmp(op, "Shrink")) {
        double l = ox_attr_f(n, "lambd", 0.5), b = ox_attr_f(n, "bias", 0.0);
        y = rlx_where(g, rlx_less(g, x, S(-l)), rlx_add(g, x, S(b)),
                      rlx_where(g, rlx_greater(g, x, S(l)), rlx_sub(g, x, S(b)), S(0)));
    } else if (!strcmp(op, "Gelu")) {
        char buf[16];
        const char *ap = ox_attr_s(n, "approximate", "none", buf, sizeof buf);
        y = !strcmp(ap, "tanh") ? rlx_gelu_tanh(g, x) : rlx_gelu(g, x);
    }
#undef S
    return ox_out_node(n, 0, y);
}

/* ------------------------------------------------------------ matmul / gemm */

static rlx_status h_matmul(ox_node *n)
{
    return ox_out_node(n, 0, rlx_matmul(n->c->g, oxo_in(n, 0), oxo_in(n, 1), 0, 0));
}

static rlx_status h_gemm(ox_node *n)
{
    rlx_graph *g = n->c->g;
    double alpha = ox_attr_f(n, "alpha", 1.0), beta = ox_attr_f(n, "beta", 1.0);
    int ta = (int)ox_attr_i(n, "transA", 0), tb = (int)ox_attr_i(n, "transB", 0);
    rlx_dtype t = oxo_in_dtype(n, 0);
    rlx_node y = rlx_matmul(g, oxo_in(n, 0), oxo_in(n, 1), ta, tb);
    if (alpha != 1.0)
        y = rlx_mul(g, y, oxo_scalar(n, t, alpha));
    if (n->n_in >= 3 && n->in[2]) {
        rlx_node c = oxo_in(n, 2);
        if (beta != 1.0)
            c = rlx_mul(g, c, oxo_scalar(n, t, beta));
        y = rlx_add(g, y, c);
    }
    return ox_out_node(n, 0, y);
}

/* ------------------------------------------------------------ conv / pool */

/* Spatial attributes of a conv/pool node, with auto_pad resolved. */
typedef struct spatial {
    int ns;
    int64_t in[3], k[3], stride[3], dil[3], pads[6];
} spatial;

static rlx_status get_spatial(ox_node *n, rlx_node x, const int64_t *kernel, int ns, int ceil_mode, spatial *s)
{
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    memset(s, 0, sizeof *s);
    s->ns = ns;
    if (xr != ns + 2)
        return ox_fail(n, RLX_ERR_SHAPE, "input rank %d does not fit %d spatial dims", xr, ns);
    int64_t tmp[8];
    for (int i = 0; i < ns; i++) {
        s->in[i] = xd[2 + i];
        s->k[i] = kernel[i];
        s->stride[i] = 1;
        s->dil[i] = 1;
    }
    int c = ox_attr_ints(n, "strides", tmp, 8);
    if (c > 0) {
        if (c != ns)
            return ox_fail(n, RLX_ERR_FORMAT, "strides has %d values for %d spatial dims", c, ns);
        for (int i = 0; i < ns; i++)
            s->stride[i] = tmp[i];
    }
    c = ox_attr_ints(n, "dilations", tmp, 8);
    if (c > 0) {
        if (c != ns)
            return ox_fail(n, RLX_ERR_FORMAT, "dilations has %d values", c);
        for (int i = 0; i < ns; i++)
            s->dil[i] = tmp[i];
    }
    c = ox_attr_ints(n, "pads", tmp, 8);
    if (c > 0) {
        if (c != 2 * ns)
            return ox_fail(n, RLX_ERR_FORMAT, "pads has %d values", c);
        for (int i = 0; i < 2 * ns; i++)
            s->pads[i] = tmp[i];
    }
    for (int i = 0; i < ns; i++) {
        if (s->stride[i] < 1 || s->dil[i] < 1 || s->k[i] < 1 || s->stride[i] > (1 << 20) || s->dil[i] > (1 << 20) ||
            s->k[i] > (1 << 20))
            return ox_fail(n, RLX_ERR_FORMAT, "bad kernel/stride/dilation");
        if (s->pads[i] < 0 || s->pads[ns + i] < 0 || s->pads[i] > (1 << 20) || s->pads[ns + i] > (1 << 20))
            return ox_fail(n, RLX_ERR_FORMAT, "pads negative or too large");
    }
    char buf[32];
    const char *ap = ox_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < ns; i++) {
            int64_t out = (s->in[i] + s->stride[i] - 1) / s->stride[i];
            int64_t ek = (s->k[i] - 1) * s->dil[i] + 1;
            int64_t total = (out - 1) * s->stride[i] + ek - s->in[i];
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            s->pads[i] = !strcmp(ap, "SAME_UPPER") ? small : big;
            s->pads[ns + i] = !strcmp(ap, "SAME_UPPER") ? big : small;
        }
    } else if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < 2 * ns; i++)
            s->pads[i] = 0;
    }
    (void)ceil_mode;
    return RLX_OK;
}

/* Conv over 3 spatial dims is not in RLX: folded 1-d/2-d only. */
static rlx_status h_conv(ox_node *n)
{
    rlx_node x = oxo_in(n, 0), w = oxo_in(n, 1);
    int64_t wd[RLX_MAX_DIMS];
    int wr = oxo_shape(n, w, wd);
    int ns = wr - 2;
    if (ns == 3)
        return oxo_conv3d(n, x, w, n->n_in >= 3 && n->in[2] ? oxo_in(n, 2) : -1);
    if (ns < 1 || ns > 2)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "convolution over %d spatial dims (RLX has 1 and 2)", ns);
    int64_t k[3] = {wd[2], ns > 1 ? wd[3] : 1, 1};
    int64_t tmp[8];
    int c = ox_attr_ints(n, "kernel_shape", tmp, 8);
    if (c == ns)
        for (int i = 0; i < ns; i++)
            if (tmp[i] != k[i])
                return ox_fail(n, RLX_ERR_SHAPE, "kernel_shape does not match the weights");
    spatial s;
    rlx_status st = get_spatial(n, x, k, ns, 0, &s);
    if (st != RLX_OK)
        return st;
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    for (int i = 0; i < ns; i++) {
        p.stride[i] = s.stride[i];
        p.dilation[i] = s.dil[i];
        p.pads[i] = s.pads[i];
        p.pads[ns + i] = s.pads[ns + i];
    }
    p.groups = ox_attr_i(n, "group", 1);
    rlx_node b = n->n_in >= 3 && n->in[2] ? oxo_in(n, 2) : -1;
    return ox_out_node(n, 0, rlx_conv(n->c->g, x, w, b, &p));
}

static rlx_status h_conv_transpose(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0), w = oxo_in(n, 1);
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd), wr = oxo_shape(n, w, wd);
    int ns = wr - 2;
    if (ns < 1 || ns > 3 || xr != wr)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "transposed convolution over %d spatial dims", ns);
    int64_t grp = ox_attr_i(n, "group", 1);
    if (grp < 1 || wd[0] % grp || xd[1] != wd[0])
        return ox_fail(n, RLX_ERR_SHAPE, "channels do not match the weights");
    int64_t tmp[8], stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pads[6] = {0}, opad[3] = {0}, oshape[3] = {-1, -1, -1};
    int c;
    if ((c = ox_attr_ints(n, "strides", tmp, 8)) == ns)
        memcpy(stride, tmp, sizeof(int64_t) * (size_t)ns);
    if ((c = ox_attr_ints(n, "dilations", tmp, 8)) == ns)
        memcpy(dil, tmp, sizeof(int64_t) * (size_t)ns);
    if ((c = ox_attr_ints(n, "pads", tmp, 8)) == 2 * ns)
        memcpy(pads, tmp, sizeof(int64_t) * (size_t)(2 * ns));
    if ((c = ox_attr_ints(n, "output_padding", tmp, 8)) == ns)
        memcpy(opad, tmp, sizeof(int64_t) * (size_t)ns);
    int has_os = ox_attr_ints(n, "output_shape", tmp, 8);
    if (has_os >= ns)
        for (int i = 0; i < ns; i++)
            oshape[i] = tmp[has_os - ns + i];
    char buf[32];
    const char *ap = ox_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    for (int i = 0; i < ns; i++) {
        if (stride[i] < 1 || dil[i] < 1 || stride[i] > 4096 || dil[i] > 4096 || pads[i] < 0 || pads[ns + i] < 0 ||
            pads[i] > (1 << 20) || pads[ns + i] > (1 << 20) || opad[i] < 0 || opad[i] > (1 << 20) ||
            oshape[i] > (1 << 24) || wd[2 + i] > 4096 || xd[2 + i] > (1 << 24))
            return ox_fail(n, RLX_ERR_FORMAT, "bad stride, dilation, pads or output shape");
        int64_t k = wd[2 + i], ek = (k - 1) * dil[i] + 1;
        if (same && oshape[i] < 0)
            oshape[i] = xd[2 + i] * stride[i];
        if (oshape[i] >= 0) {
            int64_t total = stride[i] * (xd[2 + i] - 1) + opad[i] + ek - oshape[i];
            if (total < 0) { /* a larger output than the natural size: extra zeros at the end */
                opad[i] -= total;
                total = 0;
            }
            if (!strcmp(ap, "SAME_UPPER")) {
                pads[i] = total / 2;
                pads[ns + i] = total - total / 2;
            } else {
                pads[i] = total - total / 2;
                pads[ns + i] = total / 2;
            }
        } else if (!strcmp(ap, "VALID")) {
            pads[i] = pads[ns + i] = 0;
        }
    }
    /* 1. insert stride-1 zeros between input pixels */
    rlx_node z = x;
    for (int i = 0; i < ns; i++) {
        if (stride[i] == 1)
            continue;
        int ax = 2 + i;
        int64_t cur[RLX_MAX_DIMS];
        int cr = oxo_shape(n, z, cur);
        int64_t rd[RLX_MAX_DIMS];
        int k2 = 0;
        for (int d = 0; d < cr; d++) {
            rd[k2++] = cur[d];
            if (d == ax)
                rd[k2++] = 1;
        }
        rlx_node r = rlx_reshape(g, z, cr + 1, rd);
        int64_t pp[2 * RLX_MAX_DIMS] = {0};
        pp[(cr + 1) + ax + 1] = stride[i] - 1;
        r = rlx_pad(g, r, pp, RLX_PAD_CONSTANT, 0);
        int64_t md[RLX_MAX_DIMS];
        for (int d = 0; d < cr; d++)
            md[d] = cur[d];
        md[ax] = cur[ax] * stride[i];
        r = rlx_reshape(g, r, cr, md);
        int axi = ax;
        int64_t s0 = 0, e0 = (cur[ax] - 1) * stride[i] + 1;
        z = rlx_slice(g, r, 1, &axi, &s0, &e0, NULL);
    }
    /* 2. pad by dilation*(k-1) - pad (negative: crop) and output_padding */
    int64_t pp[2 * RLX_MAX_DIMS] = {0};
    int64_t crop_b[3] = {0}, crop_e[3] = {0};
    bool need_pad = false, need_crop = false;
    for (int i = 0; i < ns; i++) {
        int64_t k = wd[2 + i];
        int64_t b = dil[i] * (k - 1) - pads[i], e = dil[i] * (k - 1) - pads[ns + i] + opad[i];
        if (b >= 0)
            pp[2 + i] = b;
        else
            crop_b[i] = -b;
        if (e >= 0)
            pp[xr + 2 + i] = e;
        else
            crop_e[i] = -e;
        need_pad |= b > 0 || e > 0;
        need_crop |= b < 0 || e < 0;
    }
    if (need_pad)
        z = rlx_pad(g, z, pp, RLX_PAD_CONSTANT, 0);
    if (need_crop) {
        int64_t cur[RLX_MAX_DIMS];
        oxo_shape(n, z, cur);
        int axes[3];
        int64_t st[3], en[3];
        for (int i = 0; i < ns; i++) {
            axes[i] = 2 + i;
            st[i] = crop_b[i];
            en[i] = cur[2 + i] - crop_e[i];
        }
        z = rlx_slice(g, z, ns, axes, st, en, NULL);
    }
    /* 3. weights [Cin, Cout/g, k..] -> [Cout, Cin/g, k..], flipped */
    int64_t cin = wd[0], coutg = wd[1];
    int64_t r5[RLX_MAX_DIMS] = {grp, cin / grp, coutg};
    for (int i = 0; i < ns; i++)
        r5[3 + i] = wd[2 + i];
    rlx_node wt = rlx_reshape(g, w, 3 + ns, r5);
    int perm[RLX_MAX_DIMS] = {0, 2, 1, 3, 4, 5};
    wt = rlx_transpose(g, wt, perm);
    int64_t r4[RLX_MAX_DIMS] = {grp * coutg, cin / grp};
    for (int i = 0; i < ns; i++)
        r4[2 + i] = wd[2 + i];
    wt = rlx_reshape(g, wt, 2 + ns, r4);
    int faxes[3];
    int64_t fs[3], fe[3], fst[3];
    for (int i = 0; i < ns; i++) {
        faxes[i] = 2 + i;
        fs[i] = -1;
        fe[i] = INT64_MIN;
        fst[i] = -1;
    }
    wt = rlx_slice(g, wt, ns, faxes, fs, fe, fst);
    rlx_node b = n->n_in >= 3 && n->in[2] ? oxo_in(n, 2) : -1;
    if (ns == 3) {
        int64_t one[3] = {1, 1, 1}, zero[6] = {0};
        return ox_out_node(n, 0, oxo_conv3d_p(n, z, wt, b, one, dil, zero, grp));
    }
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    for (int i = 0; i < ns; i++)
        p.dilation[i] = dil[i];
    p.groups = grp;
    return ox_out_node(n, 0, rlx_conv(g, z, wt, b, &p));
}

static rlx_status h_pool(ox_node *n)
{
    const char *op = n->p->op_type;
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS], k[8];
    int xr = oxo_shape(n, x, xd);
    int ns = ox_attr_ints(n, "kernel_shape", k, 8);
    if (ns < 1 || ns != xr - 2)
        return ox_fail(n, RLX_ERR_FORMAT, "kernel_shape must list every spatial dim");
    if (n->n_out > 1 && n->p->output[1] && *n->p->output[1]) {
        if (!strcmp(op, "MaxPool") && ns == 2)
            return oxo_maxpool_indices(n, x, k);
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "the Indices output of MaxPool over %d spatial dims", ns);
    }
    if (ns == 3 && (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")))
        return oxo_pool3d(n, x, k, !strcmp(op, "MaxPool"));
    if (ns > 2)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "pooling over %d spatial dims (RLX has 1 to 3)", ns);
    spatial s;
    int ceil_mode = (int)ox_attr_i(n, "ceil_mode", 0);
    rlx_status st = get_spatial(n, x, k, ns, ceil_mode, &s);
    if (st != RLX_OK)
        return st;
    rlx_pool_params p;
    rlx_pool_params_init(&p, k[0]);
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = i < ns ? s.k[i] : 1;
        p.stride[i] = i < ns ? s.stride[i] : 1;
        p.dilation[i] = i < ns ? s.dil[i] : 1;
    }
    for (int i = 0; i < 2 * ns; i++)
        p.pads[i] = s.pads[i];
    p.ceil_mode = ceil_mode;
    p.count_include_pad = (int)ox_attr_i(n, "count_include_pad", 0);
    if (!strcmp(op, "MaxPool")) {
        rlx_dtype t = oxo_in_dtype(n, 0);
        if (!ox_dtype_is_float(t)) /* exact through f32 for 8-bit types */
            return ox_out_node(n, 0, rlx_cast(n->c->g, rlx_max_pool(n->c->g, rlx_cast(n->c->g, x, RLX_F32), &p), t));
        return ox_out_node(n, 0, rlx_max_pool(n->c->g, x, &p));
    }
    if (!strcmp(op, "AveragePool"))
        return ox_out_node(n, 0, rlx_avg_pool(n->c->g, x, &p));
    /* LpPool: (sum over the window of |x|^p)^(1/p), the sum as an average
     * that counts the padding, times the window size */
    double pw = (double)ox_attr_i(n, "p", 2);
    rlx_graph *g = n->c->g;
    rlx_dtype t = oxo_in_dtype(n, 0);
    p.count_include_pad = 1;
    int64_t win = 1;
    for (int i = 0; i < ns; i++)
        win *= s.k[i];
    rlx_node xp = pw == 2 ? rlx_mul(g, x, x) : rlx_pow(g, rlx_abs(g, x), oxo_scalar(n, t, pw));
    rlx_node sum = rlx_mul(g, rlx_avg_pool(g, xp, &p), oxo_scalar(n, t, (double)win));
    return ox_out_node(n, 0, pw == 2 ? rlx_sqrt(g, sum) : rlx_pow(g, sum, oxo_scalar(n, t, 1.0 / pw)));
}

static rlx_status h_global_pool(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    if (xr < 3)
        return ox_fail(n, RLX_ERR_SHAPE, "needs [N, C, spatial...]");
    int axes[RLX_MAX_DIMS];
    for (int i = 2; i < xr; i++)
        axes[i - 2] = i;
    const char *op = n->p->op_type;
    if (!strcmp(op, "GlobalAveragePool"))
        return ox_out_node(n, 0, rlx_reduce_mean(g, x, xr - 2, axes, 1));
    if (!strcmp(op, "GlobalMaxPool"))
        return ox_out_node(n, 0, rlx_reduce_max(g, x, xr - 2, axes, 1));
    double pw = (double)ox_attr_i(n, "p", 2);
    rlx_dtype t = oxo_in_dtype(n, 0);
    rlx_node xp = pw == 2 ? rlx_mul(g, x, x) : rlx_pow(g, rlx_abs(g, x), oxo_scalar(n, t, pw));
    rlx_node s = rlx_reduce_sum(g, xp, xr - 2, axes, 1);
    return ox_out_node(n, 0, pw == 2 ? rlx_sqrt(g, s) : rlx_pow(g, s, oxo_scalar(n, t, 1.0 / pw)));
}

/* ------------------------------------------------------------ normalisation */

/* [C] -> [C, 1, 1, ...] to broadcast over x [N, C, spatial...] */
static rlx_node per_channel(ox_node *n, rlx_node v, int xr)
{
    int64_t d[RLX_MAX_DIMS];
    int r = oxo_shape(n, v, d);
    if (r != 1)
        return v;
    int64_t nd[RLX_MAX_DIMS];
    nd[0] = d[0];
    for (int i = 1; i < xr - 1; i++)
        nd[i] = 1;
    return oxo_reshape(n, v, xr - 1 > 0 ? xr - 1 : 1, nd);
}

static rlx_status h_batchnorm(ox_node *n)
{
    rlx_graph *g = n->c->g;
    if (n->n_in < 5)
        return ox_fail(n, RLX_ERR_FORMAT, "needs 5 inputs");
    if (ox_attr_i(n, "training_mode", 0)) {
        /* batch statistics; running stats updated with momentum */
        rlx_node x = oxo_in(n, 0);
        int64_t xd[RLX_MAX_DIMS];
        int xr = oxo_shape(n, x, xd);
        rlx_dtype t = oxo_in_dtype(n, 0);
        double eps = ox_attr_f(n, "epsilon", 1e-5), mom = ox_attr_f(n, "momentum", 0.9);
        int axes[RLX_MAX_DIMS], na = 0;
        for (int i = 0; i < xr; i++)
            if (i != 1)
                axes[na++] = i;
        rlx_node mean = rlx_reduce_mean(g, x, na, axes, 1);
        rlx_node d = rlx_sub(g, x, mean);
        rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), na, axes, 1);
        rlx_node y = rlx_mul(g, d, rlx_rsqrt(g, rlx_add(g, var, oxo_scalar(n, t, eps))));
        y = rlx_add(g, rlx_mul(g, y, per_channel(n, oxo_in(n, 1), xr)), per_channel(n, oxo_in(n, 2), xr));
        rlx_status st = ox_out_node(n, 0, y);
        int64_t c = xd[1];
        rlx_node m1 = rlx_reshape(g, mean, 1, &c), v1 = rlx_reshape(g, var, 1, &c);
        if (st == RLX_OK && n->n_out > 1)
            st = ox_out_node(
                n, 1,
                rlx_add(g, rlx_mul(g, oxo_in(n, 3), oxo_scalar(n, t, mom)), rlx_mul(g, m1, oxo_scalar(n, t, 1 - mom))));
        if (st == RLX_OK && n->n_out > 2)
            st = ox_out_node(
                n, 2,
                rlx_add(g, rlx_mul(g, oxo_in(n, 4), oxo_scalar(n, t, mom)), rlx_mul(g, v1, oxo_scalar(n, t, 1 - mom))));
        return st;
    }
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    rlx_dtype t = oxo_in_dtype(n, 0);
    double eps = ox_attr_f(n, "epsilon", 1e-5);
    rlx_node sc = per_channel(n, oxo_in(n, 1), xr), b = per_channel(n, oxo_in(n, 2), xr);
    rlx_node mean = per_channel(n, oxo_in(n, 3), xr), var = per_channel(n, oxo_in(n, 4), xr);
    rlx_node a = rlx_mul(g, sc, rlx_rsqrt(g, rlx_add(g, var, oxo_scalar(n, t, eps))));
    rlx_node y = rlx_add(g, rlx_mul(g, rlx_sub(g, x, mean), a), b);
    rlx_status st = ox_out_node(n, 0, y);
    for (int i = 1; st == RLX_OK && i < n->n_out; i++)
        if (n->p->output[i] && *n->p->output[i])
            st = ox_out_node(n, i, oxo_in(n, i == 1 ? 3 : 4));
    return st;
}

static rlx_status h_instancenorm(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    rlx_dtype t = oxo_in_dtype(n, 0);
    double eps = ox_attr_f(n, "epsilon", 1e-5);
    int axes[RLX_MAX_DIMS];
    for (int i = 2; i < xr; i++)
        axes[i - 2] = i;
    rlx_node mean = rlx_reduce_mean(g, x, xr - 2, axes, 1);
    rlx_node d = rlx_sub(g, x, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), xr - 2, axes, 1);
    rlx_node y = rlx_mul(g, d, rlx_rsqrt(g, rlx_add(g, var, oxo_scalar(n, t, eps))));
    y = rlx_add(g, rlx_mul(g, y, per_channel(n, oxo_in(n, 1), xr)), per_channel(n, oxo_in(n, 2), xr));
    return ox_out_node(n, 0, y);
}

static rlx_status h_layernorm(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    rlx_dtype t = oxo_in_dtype(n, 0);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", -1), xr);
    double eps = ox_attr_f(n, "epsilon", 1e-5);
    if (axis < 0 || axis >= xr)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    rlx_node scale = oxo_in(n, 1), bias = n->n_in >= 3 && n->in[2] ? oxo_in(n, 2) : -1;
    bool extra = (n->n_out > 1 && *n->p->output[1]) || (n->n_out > 2 && *n->p->output[2]);
    int64_t sd[RLX_MAX_DIMS];
    int sr = oxo_shape(n, scale, sd);
    bool simple = axis == xr - 1 && sr == 1 && sd[0] == xd[xr - 1] && !extra && ox_dtype_is_float(t);
    if (bias >= 0) {
        int64_t bd[RLX_MAX_DIMS];
        int br = oxo_shape(n, bias, bd);
        simple &= br == 1 && bd[0] == xd[xr - 1];
    }
    if (simple)
        return ox_out_node(n, 0, rlx_layer_norm(g, x, scale, bias, eps));
    int axes[RLX_MAX_DIMS];
    for (int i = axis; i < xr; i++)
        axes[i - axis] = i;
    int na = xr - axis;
    rlx_node mean = rlx_reduce_mean(g, x, na, axes, 1);
    rlx_node d = rlx_sub(g, x, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), na, axes, 1);
    rlx_node inv = rlx_rsqrt(g, rlx_add(g, var, oxo_scalar(n, t, eps)));
    rlx_node y = rlx_mul(g, rlx_mul(g, d, inv), scale);
    if (bias >= 0)
        y = rlx_add(g, y, bias);
    rlx_status st = ox_out_node(n, 0, y);
    if (st == RLX_OK && n->n_out > 1)
        st = ox_out_node(n, 1, mean);
    if (st == RLX_OK && n->n_out > 2)
        st = ox_out_node(n, 2, inv);
    return st;
}

/* GroupNormalization: statistics over each group of channels; scale and
 * bias per group (opset 18) or per channel (later opsets). */
static rlx_status h_groupnorm(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS], sd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    int64_t G = ox_attr_i(n, "num_groups", 0);
    if (xr < 2 || G < 1 || xd[1] % G)
        return ox_fail(n, RLX_ERR_SHAPE, "channels not divisible into %lld groups", (long long)G);
    rlx_dtype t = oxo_in_dtype(n, 0);
    double eps = ox_attr_f(n, "epsilon", 1e-5);
    int64_t N = xd[0], C = xd[1], rest = 1;
    for (int i = 2; i < xr; i++)
        rest *= xd[i];
    rlx_node v = rlx_reshape(g, x, 3, (int64_t[]){N, G, C / G * rest});
    int ax = 2;
    rlx_node mean = rlx_reduce_mean(g, v, 1, &ax, 1);
    rlx_node d = rlx_sub(g, v, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), 1, &ax, 1);
    rlx_node y = rlx_mul(g, d, rlx_rsqrt(g, rlx_add(g, var, oxo_scalar(n, t, eps))));
    y = rlx_reshape(g, y, 3, (int64_t[]){N, C, rest});
    rlx_node sb[2] = {oxo_in(n, 1), oxo_in(n, 2)};
    for (int k = 0; k < 2; k++) {
        int sr = oxo_shape(n, sb[k], sd);
        if (sr != 1 || (sd[0] != G && sd[0] != C))
            return ox_fail(n, RLX_ERR_SHAPE, "scale/bias must have num_groups or C values");
        rlx_node p = sb[k];
        if (sd[0] == G && G != C) /* per group -> per channel */
            p = rlx_reshape(g, rlx_expand(g, rlx_reshape(g, p, 2, (int64_t[]){G, 1}), 2, (int64_t[]){G, C / G}), 1, &C);
        p = rlx_reshape(g, p, 2, (int64_t[]){C, 1});
        y = k == 0 ? rlx_mul(g, y, p) : rlx_add(g, y, p);
    }
    return ox_out_node(n, 0, rlx_reshape(g, y, xr, xd));
}

static rlx_status h_lpnorm(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    int r = ox_rank(n->c, n->in[0]);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", -1), r);
    int64_t p = ox_attr_i(n, "p", 2);
    rlx_node s = p == 1 ? rlx_reduce_sum(g, rlx_abs(g, x), 1, &axis, 1)
                        : rlx_sqrt(g, rlx_reduce_sum(g, rlx_mul(g, x, x), 1, &axis, 1));
    return ox_out_node(n, 0, rlx_div(g, x, s));
}

static rlx_status h_mvn(ox_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = oxo_in(n, 0);
    int r = ox_rank(n->c, n->in[0]);
    int64_t ax[RLX_MAX_DIMS] = {0, 2, 3};
    int na = ox_attr_ints(n, "axes", ax, RLX_MAX_DIMS);
    if (na < 0)
        na = 3;
    int axes[RLX_MAX_DIMS];
    for (int i = 0; i < na; i++)
        axes[i] = oxo_norm_axis(ax[i], r);
    rlx_node mean = rlx_reduce_mean(g, x, na, axes, 1);
    rlx_node d = rlx_sub(g, x, mean);
    rlx_node var = rlx_reduce_mean(g, rlx_mul(g, d, d), na, axes, 1);
    return ox_out_node(n, 0, rlx_div(g, d, rlx_add(g, rlx_sqrt(g, var), oxo_scalar(n, oxo_in_dtype(n, 0), 1e-9))));
}

/* Softmax family; before opset 13 the input is seen as 2-d [prod(:axis), prod(axis:)]. */
static rlx_status h_softmax(ox_node *n)
{
    rlx_graph *g = n->c->g;
    const char *op = n->p->op_type;
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    bool old = n->opset < 13;
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", old ? 1 : -1), xr);
    if (xr == 0)
        return ox_fail(n, RLX_ERR_SHAPE, "scalar input");
    if (axis < 0 || axis >= xr)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
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
        int vr = oxo_shape(n, v, vd);
        rlx_node am = rlx_argmax(g, v, ax, 1);
        ox_tensor *rg = oxo_tensor(RLX_I64, 1, &vd[ax]);
        if (!rg)
            return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        for (int64_t i = 0; i < vd[ax]; i++)
            ((int64_t *)rg->data)[i] = i;
        int64_t rs[RLX_MAX_DIMS];
        for (int i = 0; i < vr; i++)
            rs[i] = i == ax ? vd[ax] : 1;
        rlx_node rn = rlx_constant(g, RLX_I64, vr, rs, rg->data, rg->bytes);
        ox_tensor_free(rg);
        y = rlx_cast(g, rlx_equal(g, am, rn), oxo_in_dtype(n, 0));
    }
    if (v != x)
        y = rlx_reshape(g, y, xr, xd);
    return ox_out_node(n, 0, y);
}

/* ------------------------------------------------------------ reductions */

static rlx_status h_reduce(ox_node *n)
{
    rlx_graph *g = n->c->g;
    const char *op = n->p->op_type;
    rlx_node x = oxo_in(n, 0);
    int r = ox_rank(n->c, n->in[0]);
    int64_t ax[RLX_MAX_DIMS + 1];
    int na;
    bool axes_input = (!strcmp(op, "ReduceSum") && n->opset >= 13) || n->opset >= 18;
    if (axes_input) {
        na = n->n_in >= 2 && n->in[1] ? oxo_const_ints(n, 1, ax, RLX_MAX_DIMS + 1) : 0;
        if (na == -2)
            return oxo_need_const(n, 1, "axes");
    } else {
        na = ox_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
        if (na < 0)
            na = 0;
    }
    if (na > r)
        return ox_fail(n, RLX_ERR_SHAPE, "too many axes");
    int keep = (int)ox_attr_i(n, "keepdims", 1);
    if (na == 0 && ox_attr_i(n, "noop_with_empty_axes", 0))
        return pass_through(n, 0, 0);
    int axes[RLX_MAX_DIMS];
    for (int i = 0; i < na; i++) {
        axes[i] = oxo_norm_axis(ax[i], r);
        if (axes[i] < 0)
            return ox_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)ax[i], r);
    }
    if (r == 0)
        return pass_through(n, 0, 0);
    rlx_dtype t = oxo_in_dtype(n, 0);
    rlx_node y;
    if (!strcmp(op, "ReduceSum"))
        y = rlx_reduce_sum(g, x, na, axes, keep);
    else if (!strcmp(op, "ReduceMean"))
        y = rlx_reduce_mean(g, x, na, axes, keep);
    else if (!strcmp(op, "ReduceMax"))
        y = rlx_reduce_max(g, x, na, axes, keep);
    else if (!strcmp(op, "ReduceMin"))
        y = rlx_reduce_min(g, x, na, axes, keep);
    else if (!strcmp(op, "ReduceProd"))
        y = rlx_reduce_prod(g, x, na, axes, keep);
    else if (!strcmp(op, "ReduceL1"))
        y = rlx_reduce_sum(g, rlx_abs(g, x), na, axes, keep);
    else if (!strcmp(op, "ReduceL2")) {
        if (!ox_dtype_is_float(t)) {
            rlx_node xf = rlx_cast(g, x, RLX_F32);
            y = rlx_cast(g, rlx_sqrt(g, rlx_reduce_sum(g, rlx_mul(g, xf, xf), na, axes, keep)), t);
        } else
            y = rlx_sqrt(g, rlx_reduce_sum(g, rlx_mul(g, x, x), na, axes, keep));
    } else if (!strcmp(op, "ReduceSumSquare"))
        y = rlx_reduce_sum(g, rlx_mul(g, x, x), na, axes, keep);
    else if (!strcmp(op, "ReduceLogSum"))
        y = rlx_log(g, rlx_reduce_sum(g, x, na, axes, keep));
    else if (!strcmp(op, "ReduceLogSumExp")) {
        rlx_node m = rlx_reduce_max(g, x, na, axes, 1);
        rlx_node s = rlx_log(g, rlx_reduce_sum(g, rlx_exp(g, rlx_sub(g, x, m)), na, axes, 1));
        y = rlx_add(g, s, m);
        if (!keep) {
            int64_t yd[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
            int yr = oxo_shape(n, y, yd), k = 0;
            uint32_t mask = 0;
            for (int i = 0; i < na; i++)
                mask |= 1u << axes[i];
            if (!na)
                mask = 0xffffffffu;
            for (int i = 0; i < yr; i++)
                if (!(mask & (1u << i)))
                    od[k++] = yd[i];
            y = rlx_reshape(g, y, k, od);
        }
    } else
        return ox_fail(n, RLX_ERR_INTERNAL, "no reduction mapping");
    return ox_out_node(n, 0, y);
}

static rlx_status h_argminmax(ox_node *n)
{
    rlx_graph *g = n->c->g;
    bool is_max = !strcmp(n->p->op_type, "ArgMax");
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 0), xr);
    int keep = (int)ox_attr_i(n, "keepdims", 1);
    if (axis < 0 || axis >= xr)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    if (ox_attr_i(n, "select_last_index", 0)) {
        int64_t s = -1, e = INT64_MIN, st = -1;
        rlx_node f = rlx_slice(g, x, 1, &axis, &s, &e, &st);
        rlx_node i = is_max ? rlx_argmax(g, f, axis, keep) : rlx_argmin(g, f, axis, keep);
        return ox_out_node(n, 0, rlx_sub(g, oxo_scalar(n, RLX_I64, (double)(xd[axis] - 1)), i));
    }
    return ox_out_node(n, 0, is_max ? rlx_argmax(g, x, axis, keep) : rlx_argmin(g, x, axis, keep));
}

/* ------------------------------------------------------------ shape ops */

static rlx_status h_shape(ox_node *n)
{
    int64_t d[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, d);
    int64_t start = ox_attr_i(n, "start", 0), end = ox_attr_i(n, "end", r);
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    if (start < 0)
        start = 0;
    if (end > r)
        end = r;
    int64_t len = end > start ? end - start : 0;
    ox_tensor *k = oxo_tensor(RLX_I64, 1, &len);
    if (k)
        for (int64_t i = 0; i < len; i++)
            ((int64_t *)k->data)[i] = d[start + i];
    return ox_out_const(n, 0, k);
}

static rlx_status h_size(ox_node *n)
{
    int64_t d[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, d);
    int64_t s = 1;
    for (int i = 0; i < r; i++)
        s *= d[i];
    ox_tensor *k = oxo_tensor(RLX_I64, 0, NULL);
    if (k)
        *(int64_t *)k->data = s;
    return ox_out_const(n, 0, k);
}

static rlx_status h_reshape(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS], sh[RLX_MAX_DIMS + 1];
    int r = oxo_in_shape(n, 0, in);
    int ns;
    if (n->opset < 5) {
        ns = ox_attr_ints(n, "shape", sh, RLX_MAX_DIMS + 1);
        if (ns < 0)
            return ox_fail(n, RLX_ERR_FORMAT, "no shape");
    } else {
        ns = oxo_const_ints(n, 1, sh, RLX_MAX_DIMS + 1);
        if (ns == -2)
            return oxo_need_const(n, 1, "shape");
        if (ns < 0)
            return ox_fail(n, RLX_ERR_FORMAT, "missing shape");
    }
    if (ns > RLX_MAX_DIMS)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "rank above %d", RLX_MAX_DIMS);
    int allowzero = (int)ox_attr_i(n, "allowzero", 0);
    for (int i = 0; i < ns; i++)
        if (sh[i] < -1 || sh[i] > OX_MAX_NUMEL)
            return ox_fail(n, RLX_ERR_SHAPE, "bad dim %lld", (long long)sh[i]);
    int64_t total = 1, known = 1;
    for (int i = 0; i < r; i++)
        total *= in[i];
    int infer = -1;
    for (int i = 0; i < ns; i++) {
        if (sh[i] == 0 && !allowzero) {
            if (i >= r)
                return ox_fail(n, RLX_ERR_SHAPE, "0 in shape at %d beyond the input's rank", i);
            sh[i] = in[i];
        }
        if (sh[i] == -1) {
            if (infer >= 0)
                return ox_fail(n, RLX_ERR_SHAPE, "two -1 in shape");
            infer = i;
        } else if (sh[i] < 0)
            return ox_fail(n, RLX_ERR_SHAPE, "bad dim %lld", (long long)sh[i]);
        else {
            if (sh[i] && known > OX_MAX_NUMEL / sh[i])
                return ox_fail(n, RLX_ERR_SHAPE, "shape too large");
            known *= sh[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return ox_fail(n, RLX_ERR_SHAPE, "cannot infer -1");
        sh[infer] = total / known;
    } else if (known != total)
        return ox_fail(n, RLX_ERR_SHAPE, "shape has %lld elements, input %lld", (long long)known, (long long)total);
    return out_reshaped(n, 0, ns, sh);
}

static rlx_status h_flatten(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, in);
    int64_t a = ox_attr_i(n, "axis", 1);
    int axis = a == r ? r : oxo_norm_axis(a, r);
    if (axis < 0 || axis > r)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int64_t d[2] = {1, 1};
    for (int i = 0; i < r; i++)
        d[i < axis ? 0 : 1] *= in[i];
    return out_reshaped(n, 0, 2, d);
}

static rlx_status h_squeeze(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS], ax[RLX_MAX_DIMS + 1];
    int r = oxo_in_shape(n, 0, in);
    int na;
    if (n->opset >= 13) {
        na = n->n_in >= 2 && n->in[1] ? oxo_const_ints(n, 1, ax, RLX_MAX_DIMS + 1) : -1;
        if (na == -2)
            return oxo_need_const(n, 1, "axes");
    } else
        na = ox_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    uint32_t mask = 0;
    if (na < 0) {
        for (int i = 0; i < r; i++)
            if (in[i] == 1)
                mask |= 1u << i;
    } else
        for (int i = 0; i < na; i++) {
            int a = oxo_norm_axis(ax[i], r);
            if (a < 0 || a >= r || in[a] != 1)
                return ox_fail(n, RLX_ERR_SHAPE, "cannot squeeze axis %lld", (long long)ax[i]);
            mask |= 1u << a;
        }
    int64_t d[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < r; i++)
        if (!(mask & (1u << i)))
            d[k++] = in[i];
    return out_reshaped(n, 0, k, d);
}

static rlx_status h_unsqueeze(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS], ax[RLX_MAX_DIMS + 1];
    int r = oxo_in_shape(n, 0, in);
    int na;
    if (n->opset >= 13) {
        na = oxo_const_ints(n, 1, ax, RLX_MAX_DIMS + 1);
        if (na == -2)
            return oxo_need_const(n, 1, "axes");
    } else
        na = ox_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    if (na < 0)
        return ox_fail(n, RLX_ERR_FORMAT, "no axes");
    int orank = r + na;
    if (orank > RLX_MAX_DIMS)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "rank above %d", RLX_MAX_DIMS);
    uint32_t mask = 0;
    for (int i = 0; i < na; i++) {
        int a = oxo_norm_axis(ax[i], orank);
        if (a < 0 || a >= orank || (mask & (1u << a)))
            return ox_fail(n, RLX_ERR_SHAPE, "bad axis %lld", (long long)ax[i]);
        mask |= 1u << a;
    }
    int64_t d[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < orank; i++)
        d[i] = (mask & (1u << i)) ? 1 : in[k++];
    return out_reshaped(n, 0, orank, d);
}

static rlx_status h_transpose(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS], pv[RLX_MAX_DIMS + 1];
    int r = oxo_in_shape(n, 0, in);
    int perm[RLX_MAX_DIMS];
    int np = ox_attr_ints(n, "perm", pv, RLX_MAX_DIMS + 1);
    if (np < 0) {
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    } else {
        if (np != r)
            return ox_fail(n, RLX_ERR_SHAPE, "perm has %d entries for rank %d", np, r);
        uint32_t seen = 0;
        for (int i = 0; i < r; i++) {
            int a = oxo_norm_axis(pv[i], r);
            if (a < 0 || a >= r || (seen & (1u << a)))
                return ox_fail(n, RLX_ERR_SHAPE, "bad perm");
            seen |= 1u << a;
            perm[i] = a;
        }
    }
    if (n->in[0]->k && n->in[0]->k->numel <= OX_FOLD_MAX_NUMEL)
        return ox_out_const(n, 0, oxh_transpose(n->in[0]->k, perm));
    return ox_out_node(n, 0, rlx_transpose(n->c->g, oxo_in(n, 0), perm));
}

static int64_t clamp_b(int64_t v, int64_t n, int64_t step)
{
    if (v < 0)
        v += n;
    if (step > 0)
        return v < 0 ? 0 : (v > n ? n : v);
    return v < -1 ? -1 : (v > n - 1 ? n - 1 : v);
}

static rlx_status h_slice(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, in);
    int64_t st[RLX_MAX_DIMS + 1], en[RLX_MAX_DIMS + 1], ax[RLX_MAX_DIMS + 1], sp[RLX_MAX_DIMS + 1];
    int ns, ne, na, nsp = -1;
    if (n->opset < 10) {
        ns = ox_attr_ints(n, "starts", st, RLX_MAX_DIMS + 1);
        ne = ox_attr_ints(n, "ends", en, RLX_MAX_DIMS + 1);
        na = ox_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    } else {
        ns = oxo_const_ints(n, 1, st, RLX_MAX_DIMS + 1);
        ne = oxo_const_ints(n, 2, en, RLX_MAX_DIMS + 1);
        na = n->n_in > 3 && n->in[3] ? oxo_const_ints(n, 3, ax, RLX_MAX_DIMS + 1) : -1;
        nsp = n->n_in > 4 && n->in[4] ? oxo_const_ints(n, 4, sp, RLX_MAX_DIMS + 1) : -1;
        if (ns == -2 || ne == -2 || na == -2 || nsp == -2)
            return oxo_need_const(n, 1, "starts/ends/axes/steps");
    }
    if (ns < 0 || ne != ns || ns > r)
        return ox_fail(n, RLX_ERR_FORMAT, "starts and ends must have one value per axis");
    if (na < 0) {
        na = ns;
        for (int i = 0; i < ns; i++)
            ax[i] = i;
    }
    if (na != ns || (nsp >= 0 && nsp != ns))
        return ox_fail(n, RLX_ERR_FORMAT, "axes/steps length mismatch");
    if (nsp < 0)
        for (int i = 0; i < ns; i++)
            sp[i] = 1;
    int64_t start[RLX_MAX_DIMS], step[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++) {
        start[i] = 0;
        step[i] = 1;
        od[i] = in[i];
    }
    int axes[RLX_MAX_DIMS];
    uint32_t seen = 0;
    for (int i = 0; i < ns; i++) {
        int a = oxo_norm_axis(ax[i], r);
        if (a < 0 || a >= r || (seen & (1u << a)))
            return ox_fail(n, RLX_ERR_SHAPE, "bad axis %lld", (long long)ax[i]);
        seen |= 1u << a;
        if (sp[i] == 0 || sp[i] == INT64_MIN)
            return ox_fail(n, RLX_ERR_FORMAT, "step %lld", (long long)sp[i]);
        axes[i] = a;
        int64_t s = clamp_b(st[i], in[a], sp[i]), e = clamp_b(en[i], in[a], sp[i]);
        /* (distance - 1) / |step| + 1: no overflow for any step */
        int64_t cnt = sp[i] > 0 ? (e > s ? (e - s - 1) / sp[i] + 1 : 0) : (s > e ? (s - e - 1) / (-sp[i]) + 1 : 0);
        od[a] = cnt;
        start[a] = cnt ? s : 0;
        step[a] = sp[i];
    }
    if (n->in[0]->k && n->in[0]->k->numel <= OX_FOLD_MAX_NUMEL)
        return ox_out_const(n, 0, oxh_slice(n->in[0]->k, start, step, od));
    return ox_out_node(n, 0, rlx_slice(n->c->g, oxo_in(n, 0), ns, axes, st, en, sp));
}

static rlx_status h_concat(ox_node *n)
{
    if (n->n_in < 1)
        return ox_fail(n, RLX_ERR_FORMAT, "no inputs");
    int r = ox_rank(n->c, n->in[0]);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    bool allk = true;
    int64_t tot = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i])
            return ox_fail(n, RLX_ERR_FORMAT, "empty input");
        if (!n->in[i]->k)
            allk = false;
        else
            tot += n->in[i]->k->numel;
    }
    if (allk && tot <= OX_FOLD_MAX_NUMEL) {
        ox_tensor *ks[64];
        for (int i = 0; i < n->n_in; i++)
            ks[i] = n->in[i]->k;
        ox_tensor *y = oxh_concat(ks, n->n_in, axis);
        if (!y)
            return ox_fail(n, RLX_ERR_SHAPE, "inputs do not concatenate");
        return ox_out_const(n, 0, y);
    }
    rlx_node xs[64];
    int k = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t d[RLX_MAX_DIMS];
        int dr = oxo_in_shape(n, i, d);
        if (dr == r && d[axis] == 0)
            continue; /* empty parts add nothing */
        xs[k++] = oxo_in(n, i);
    }
    if (k == 0)
        return pass_through(n, 0, 0);
    return ox_out_node(n, 0, rlx_concat(n->c->g, k, xs, axis));
}

static rlx_status h_split(ox_node *n)
{
    int64_t in[RLX_MAX_DIMS], sz[17];
    int r = oxo_in_shape(n, 0, in);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int ns;
    if (n->opset >= 13) {
        ns = n->n_in >= 2 && n->in[1] ? oxo_const_ints(n, 1, sz, 17) : -1;
        if (ns == -2)
            return oxo_need_const(n, 1, "split");
    } else
        ns = ox_attr_ints(n, "split", sz, 17);
    int no = n->n_out;
    if (ns < 0) {
        int64_t num = ox_attr_i(n, "num_outputs", no);
        if (num < 1 || num > 16)
            return ox_fail(n, RLX_ERR_FORMAT, "bad number of outputs");
        int64_t each = (in[axis] + num - 1) / num;
        for (int i = 0; i < num; i++) {
            int64_t left = in[axis] - each * i;
            sz[i] = left < each ? (left > 0 ? left : 0) : each;
        }
        ns = (int)num;
    }
    if (ns != no)
        return ox_fail(n, RLX_ERR_FORMAT, "%d split sizes for %d outputs", ns, no);
    int64_t start = 0;
    for (int i = 0; i < ns; i++) {
        int64_t end = start + sz[i];
        if (sz[i] < 0 || end > in[axis])
            return ox_fail(n, RLX_ERR_SHAPE, "split sizes exceed the axis");
        rlx_status st;
        if (n->in[0]->k && n->in[0]->k->numel <= OX_FOLD_MAX_NUMEL) {
            int64_t s0[RLX_MAX_DIMS] = {0}, sp[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
            for (int d = 0; d < r; d++) {
                sp[d] = 1;
                od[d] = in[d];
            }
            s0[axis] = start;
            od[axis] = sz[i];
            st = ox_out_const(n, i, oxh_slice(n->in[0]->k, s0, sp, od));
        } else
            st = ox_out_node(n, i, rlx_slice(n->c->g, oxo_in(n, 0), 1, &axis, &start, &end, NULL));
        if (st != RLX_OK)
            return st;
        start = end;
    }
    if (start != in[axis])
        return ox_fail(n, RLX_ERR_SHAPE, "split sizes do not cover the axis");
    return RLX_OK;
}

static rlx_status h_gather(ox_node *n)
{
    int r = ox_rank(n->c, n->in[0]);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    if (n->in[0]->k && n->in[1]->k && n->in[0]->k->numel <= OX_FOLD_MAX_NUMEL &&
        n->in[1]->k->numel <= OX_FOLD_MAX_NUMEL) {
        ox_tensor *y = oxh_gather(n->in[0]->k, n->in[1]->k, axis);
        if (!y)
            return ox_fail(n, RLX_ERR_SHAPE, "index out of range");
        return ox_out_const(n, 0, y);
    }
    rlx_node idx = oxo_in(n, 1);
    rlx_dtype it = oxo_in_dtype(n, 1);
    if (it != RLX_I64 && it != RLX_I32)
        idx = rlx_cast(n->c->g, idx, RLX_I64);
    return ox_out_node(n, 0, rlx_gather(n->c->g, oxo_in(n, 0), idx, axis));
}

static rlx_status h_expand(ox_node *n)
{
    int64_t sh[RLX_MAX_DIMS + 1];
    int ns = oxo_const_ints(n, 1, sh, RLX_MAX_DIMS + 1);
    if (ns == -2)
        return oxo_need_const(n, 1, "shape");
    if (ns < 0 || ns > RLX_MAX_DIMS)
        return ox_fail(n, RLX_ERR_SHAPE, "bad shape");
    if (!oxo_dims_ok(ns, sh))
        return ox_fail(n, RLX_ERR_SHAPE, "shape negative or too large");
    int64_t in[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, in), orank;
    if (!oxh_broadcast(r, in, ns, sh, &orank, od))
        return ox_fail(n, RLX_ERR_SHAPE, "shapes do not broadcast");
    if (!oxo_dims_ok(orank, od))
        return ox_fail(n, RLX_ERR_SHAPE, "result too large");
    if (n->in[0]->k) {
        int64_t numel = 1;
        for (int i = 0; i < orank; i++)
            numel *= od[i];
        if (numel <= OX_FOLD_MAX_NUMEL)
            return ox_out_const(n, 0, oxh_expand(n->in[0]->k, ns, sh));
    }
    bool same = orank == r;
    for (int i = 0; same && i < r; i++)
        same = od[i] == in[i];
    if (same)
        return pass_through(n, 0, 0);
    return ox_out_node(n, 0, rlx_expand(n->c->g, oxo_in(n, 0), ns, sh));
}

static rlx_status h_constant_of_shape(ox_node *n)
{
    int64_t sh[RLX_MAX_DIMS + 1];
    int ns = oxo_const_ints(n, 0, sh, RLX_MAX_DIMS + 1);
    if (ns == -2)
        return oxo_need_const(n, 0, "shape");
    if (ns < 0 || ns > RLX_MAX_DIMS || !oxo_dims_ok(ns, sh))
        return ox_fail(n, RLX_ERR_SHAPE, "bad shape");
    rlx_dtype t = RLX_F32;
    double v = 0;
    const Onnx__AttributeProto *a = ox_attr(n, "value");
    if (a && a->t) {
        ox_tensor *vt;
        if (ox_tensor_from_proto(a->t, NULL, &vt) != RLX_OK)
            return ox_fail(n, RLX_ERR_FORMAT, "%s", rlx_last_error());
        t = vt->dtype;
        v = vt->numel ? ox_get_f(vt, 0) : 0;
        int64_t iv = vt->numel ? ox_get_i(vt, 0) : 0;
        ox_tensor_free(vt);
        int64_t numel = 1;
        for (int i = 0; i < ns; i++) {
            if (sh[i] < 0)
                return ox_fail(n, RLX_ERR_SHAPE, "negative dim");
            numel *= sh[i];
        }
        if (numel <= OX_FOLD_MAX_NUMEL) {
            ox_tensor *y = oxo_tensor(t, ns, sh);
            if (y)
                for (int64_t i = 0; i < y->numel; i++) {
                    if (ox_dtype_is_float(t))
                        ox_set_f(y, i, v);
                    else
                        ox_set_i(y, i, iv);
                }
            return ox_out_const(n, 0, y);
        }
    } else {
        int64_t numel = 1;
        for (int i = 0; i < ns; i++) {
            if (sh[i] < 0)
                return ox_fail(n, RLX_ERR_SHAPE, "negative dim");
            numel *= sh[i];
        }
        if (numel <= OX_FOLD_MAX_NUMEL)
            return ox_out_const(n, 0, oxo_tensor(RLX_F32, ns, sh));
    }
    return ox_out_node(n, 0, rlx_expand(n->c->g, oxo_scalar(n, t, v), ns, sh));
}

static rlx_status h_constant(ox_node *n)
{
    const Onnx__AttributeProto *a = NULL;
    for (size_t i = 0; i < n->p->n_attribute; i++)
        if (n->p->attribute[i])
            a = n->p->attribute[i];
    if (!a || !a->name)
        return ox_fail(n, RLX_ERR_FORMAT, "Constant without a value");
    ox_tensor *k = NULL;
    if (!strcmp(a->name, "value") && a->t) {
        if (ox_tensor_from_proto(a->t, n->c->base_dir, &k) != RLX_OK)
            return ox_fail(n, RLX_ERR_FORMAT, "%s", rlx_last_error());
    } else if (!strcmp(a->name, "value_float")) {
        k = oxo_tensor(RLX_F32, 0, NULL);
        if (k)
            ((float *)k->data)[0] = a->f;
    } else if (!strcmp(a->name, "value_int")) {
        k = oxo_tensor(RLX_I64, 0, NULL);
        if (k)
            ((int64_t *)k->data)[0] = a->i;
    } else if (!strcmp(a->name, "value_floats")) {
        int64_t d = (int64_t)a->n_floats;
        k = oxo_tensor(RLX_F32, 1, &d);
        if (k && d)
            memcpy(k->data, a->floats, sizeof(float) * (size_t)d);
    } else if (!strcmp(a->name, "value_ints")) {
        int64_t d = (int64_t)a->n_ints;
        k = oxo_tensor(RLX_I64, 1, &d);
        if (k && d)
            memcpy(k->data, a->ints, sizeof(int64_t) * (size_t)d);
    } else
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "Constant with attribute '%s'", a->name);
    return ox_out_const(n, 0, k);
}

static rlx_status h_range(ox_node *n)
{
    double s, l, d;
    if (!oxo_const_scalar(n, 0, &s) || !oxo_const_scalar(n, 1, &l) || !oxo_const_scalar(n, 2, &d))
        return oxo_need_const(n, 0, "start/limit/delta");
    if (d == 0)
        return ox_fail(n, RLX_ERR_FORMAT, "delta is 0");
    double cnt = ceil((l - s) / d);
    if (cnt < 0)
        cnt = 0;
    if (!(cnt <= (double)OX_FOLD_MAX_NUMEL * 8))
        return ox_fail(n, RLX_ERR_SHAPE, "range too long (or not a number)");
    int64_t len = (int64_t)cnt;
    rlx_dtype t = oxo_in_dtype(n, 0);
    ox_tensor *y = oxo_tensor(t, 1, &len);
    if (y) {
        if (ox_dtype_is_float(t))
            for (int64_t i = 0; i < len; i++)
                ox_set_f(y, i, s + (double)i * d);
        else {
            int64_t si = ox_get_i(n->in[0]->k, 0), di = ox_get_i(n->in[2]->k, 0);
            for (int64_t i = 0; i < len; i++)
                ox_set_i(y, i, si + i * di);
        }
    }
    return ox_out_const(n, 0, y);
}

static rlx_status h_pad(ox_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t in[RLX_MAX_DIMS], pads[2 * RLX_MAX_DIMS + 1];
    int r = oxo_in_shape(n, 0, in);
    char buf[32];
    const char *mode = ox_attr_s(n, "mode", "constant", buf, sizeof buf);
    double value = 0;
    int np;
    if (n->opset < 11) {
        np = ox_attr_ints(n, "pads", pads, 2 * RLX_MAX_DIMS + 1);
        value = ox_attr_f(n, "value", 0.0);
    } else {
        np = oxo_const_ints(n, 1, pads, 2 * RLX_MAX_DIMS + 1);
        if (np == -2)
            return oxo_need_const(n, 1, "pads");
        if (n->n_in > 2 && n->in[2]) {
            if (!oxo_const_scalar(n, 2, &value))
                return oxo_need_const(n, 2, "constant_value");
        }
        if (n->n_in > 3 && n->in[3]) {
            int64_t ax[RLX_MAX_DIMS + 1];
            int na = oxo_const_ints(n, 3, ax, RLX_MAX_DIMS + 1);
            if (na < 0 || np != 2 * na)
                return ox_fail(n, RLX_ERR_FORMAT, "bad axes");
            int64_t full[2 * RLX_MAX_DIMS] = {0};
            for (int i = 0; i < na; i++) {
                int a = oxo_norm_axis(ax[i], r);
                if (a < 0 || a >= r)
                    return ox_fail(n, RLX_ERR_SHAPE, "bad axis");
                full[a] = pads[i];
                full[r + a] = pads[na + i];
            }
            memcpy(pads, full, sizeof full);
            np = 2 * r;
        }
    }
    if (np != 2 * r)
        return ox_fail(n, RLX_ERR_FORMAT, "pads has %d values for rank %d", np, r);
    for (int i = 0; i < 2 * r; i++)
        if (pads[i] > (INT64_C(1) << 31) || pads[i] < -(INT64_C(1) << 31))
            return ox_fail(n, RLX_ERR_SHAPE, "pad too large");
    rlx_pad_mode m;
    if (!strcmp(mode, "constant"))
        m = RLX_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect"))
        m = RLX_PAD_REFLECT;
    else if (!strcmp(mode, "edge"))
        m = RLX_PAD_EDGE;
    else
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "pad mode '%s'", mode);
    rlx_node x = oxo_in(n, 0);
    /* negative pads crop */
    int axes[RLX_MAX_DIMS], na = 0;
    int64_t st[RLX_MAX_DIMS], en[RLX_MAX_DIMS];
    bool any = false;
    for (int i = 0; i < r; i++) {
        if (pads[i] < 0 || pads[r + i] < 0) {
            axes[na] = i;
            st[na] = pads[i] < 0 ? -pads[i] : 0;
            en[na] = in[i] - (pads[r + i] < 0 ? -pads[r + i] : 0);
            na++;
            if (pads[i] < 0)
                pads[i] = 0;
            if (pads[r + i] < 0)
                pads[r + i] = 0;
        }
        if (pads[i] || pads[r + i])
            any = true;
    }
    if (na)
        x = rlx_slice(g, x, na, axes, st, en, NULL);
    if (!any) {
        if (!na)
            return pass_through(n, 0, 0);
        return ox_out_node(n, 0, x);
    }
    return ox_out_node(n, 0, rlx_pad(g, x, pads, m, value));
}

/* Tile: reshape to [1, d0, 1, d1, ...], expand to [r0, d0, r1, d1, ...], reshape. */
static rlx_status h_tile(ox_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t in[RLX_MAX_DIMS], rep[RLX_MAX_DIMS + 1];
    int r = oxo_in_shape(n, 0, in);
    int nr = oxo_const_ints(n, 1, rep, RLX_MAX_DIMS + 1);
    if (nr == -2)
        return oxo_need_const(n, 1, "repeats");
    if (nr != r)
        return ox_fail(n, RLX_ERR_SHAPE, "repeats has %d values for rank %d", nr, r);
    rlx_node x = oxo_in(n, 0);
    bool trivial = true;
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0 || rep[i] > OX_MAX_NUMEL)
            return ox_fail(n, RLX_ERR_SHAPE, "bad repeat %lld", (long long)rep[i]);
        trivial &= rep[i] == 1;
    }
    if (trivial)
        return pass_through(n, 0, 0);
    {
        int64_t od[RLX_MAX_DIMS];
        for (int i = 0; i < r; i++) {
            if (rep[i] && in[i] > OX_MAX_NUMEL / rep[i])
                return ox_fail(n, RLX_ERR_SHAPE, "result too large");
            od[i] = in[i] * rep[i];
        }
        if (!oxo_dims_ok(r, od))
            return ox_fail(n, RLX_ERR_SHAPE, "result too large");
    }
    /* one axis at a time keeps the rank within RLX_MAX_DIMS */
    for (int a = 0; a < r; a++) {
        if (rep[a] == 1)
            continue;
        int64_t cur[RLX_MAX_DIMS], d1[RLX_MAX_DIMS], d2[RLX_MAX_DIMS];
        int cr = oxo_shape(n, x, cur);
        if (cr + 1 > RLX_MAX_DIMS)
            return ox_fail(n, RLX_ERR_UNSUPPORTED, "rank too high for Tile");
        int k = 0;
        for (int i = 0; i < cr; i++) {
            if (i == a) {
                d1[k] = 1;
                d2[k++] = rep[a];
            }
            d1[k] = cur[i];
            d2[k++] = cur[i];
        }
        x = rlx_expand(g, rlx_reshape(g, x, cr + 1, d1), cr + 1, d2);
        cur[a] *= rep[a];
        x = rlx_reshape(g, x, cr, cur);
    }
    return ox_out_node(n, 0, x);
}

static rlx_status h_depth_space(ox_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t in[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, in);
    if (r != 4)
        return ox_fail(n, RLX_ERR_SHAPE, "needs rank 4");
    int64_t b = ox_attr_i(n, "blocksize", 0);
    if (b < 1 || b > (1 << 20))
        return ox_fail(n, RLX_ERR_FORMAT, "bad blocksize %lld", (long long)b);
    int64_t N = in[0], C = in[1], H = in[2], W = in[3];
    rlx_node x = oxo_in(n, 0), y;
    if (!strcmp(n->p->op_type, "DepthToSpace")) {
        if (C % (b * b))
            return ox_fail(n, RLX_ERR_SHAPE, "channels not divisible");
        char buf[16];
        const char *mode = ox_attr_s(n, "mode", "DCR", buf, sizeof buf);
        int64_t c2 = C / (b * b);
        if (!strcmp(mode, "CRD")) {
            y = rlx_reshape(g, x, 6, (int64_t[]){N, c2, b, b, H, W});
            y = rlx_transpose(g, y, (int[]){0, 1, 4, 2, 5, 3});
        } else {
            y = rlx_reshape(g, x, 6, (int64_t[]){N, b, b, c2, H, W});
            y = rlx_transpose(g, y, (int[]){0, 3, 4, 1, 5, 2});
        }
        y = rlx_reshape(g, y, 4, (int64_t[]){N, c2, H * b, W * b});
    } else {
        if (H % b || W % b)
            return ox_fail(n, RLX_ERR_SHAPE, "spatial dims not divisible");
        y = rlx_reshape(g, x, 6, (int64_t[]){N, C, H / b, b, W / b, b});
        y = rlx_transpose(g, y, (int[]){0, 3, 5, 1, 2, 4});
        y = rlx_reshape(g, y, 4, (int64_t[]){N, C * b * b, H / b, W / b});
    }
    return ox_out_node(n, 0, y);
}

/* ------------------------------------------------------------ table */

static const struct {
    const char *name;
    ox_handler h;
} handlers[] = {
    /* unary and binary ops: unary_map and binary_map above */
    {"Mean", h_mean},
    {"Pow", h_pow},
    {"Mod", h_mod},
    {"Where", h_where},
    {"Cast", h_cast},
    {"CastLike", h_cast},
    {"Identity", h_identity},
    {"Dropout", h_dropout},
    {"Clip", h_clip},
    {"LeakyRelu", h_activation},
    {"PRelu", h_activation},
    {"Elu", h_activation},
    {"Selu", h_activation},
    {"Celu", h_activation},
    {"ThresholdedRelu", h_activation},
    {"HardSigmoid", h_activation},
    {"HardSwish", h_activation},
    {"Softplus", h_activation},
    {"Softsign", h_activation},
    {"Mish", h_activation},
    {"Tan", h_activation},
    {"Sinh", h_activation},
    {"Cosh", h_activation},
    {"Asinh", h_activation},
    {"Acosh", h_activation},
    {"Atanh", h_activation},
    {"IsNaN", h_activation},
    {"IsInf", h_activation},
    {"Shrink", h_activation},
    {"Gelu", h_activation},
    {"Atan", h_activation},
    {"Asin", h_activation},
    {"Acos", h_activation},
    {"MatMul", h_matmul},
    {"Gemm", h_gemm},
    {"Conv", h_conv},
    {"ConvTranspose", h_conv_transpose},
    {"MaxPool", h_pool},
    {"AveragePool", h_pool},
    {"LpPool", h_pool},
    {"GlobalAveragePool", h_global_pool},
    {"GlobalMaxPool", h_global_pool},
    {"GlobalLpPool", h_global_pool},
    {"BatchNormalization", h_batchnorm},
    {"InstanceNormalization", h_instancenorm},
    {"LayerNormalization", h_layernorm},
    {"LpNormalization", h_lpnorm},
    {"GroupNormalization", h_groupnorm},
    {"MeanVarianceNormalization", h_mvn},
    {"Softmax", h_softmax},
    {"LogSoftmax", h_softmax},
    {"Hardmax", h_softmax},
    {"ReduceSum", h_reduce},
    {"ReduceMean", h_reduce},
    {"ReduceMax", h_reduce},
    {"ReduceMin", h_reduce},
    {"ReduceProd", h_reduce},
    {"ReduceL1", h_reduce},
    {"ReduceL2", h_reduce},
    {"ReduceSumSquare", h_reduce},
    {"ReduceLogSum", h_reduce},
    {"ReduceLogSumExp", h_reduce},
    {"ArgMax", h_argminmax},
    {"ArgMin", h_argminmax},
    {"Shape", h_shape},
    {"Size", h_size},
    {"Reshape", h_reshape},
    {"Flatten", h_flatten},
    {"Squeeze", h_squeeze},
    {"Unsqueeze", h_unsqueeze},
    {"Transpose", h_transpose},
    {"Slice", h_slice},
    {"Concat", h_concat},
    {"Split", h_split},
    {"Gather", h_gather},
    {"Expand", h_expand},
    {"ConstantOfShape", h_constant_of_shape},
    {"Constant", h_constant},
    {"Range", h_range},
    {"Pad", h_pad},
    {"Tile", h_tile},
    {"DepthToSpace", h_depth_space},
    {"SpaceToDepth", h_depth_space},
};

ox_handler ox_find_handler(const char *op_type)
{
    if (!op_type)
        return NULL;
    if (unary_of(op_type))
        return h_unary;
    if (binary_of(op_type))
        return h_binary;
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (!strcmp(handlers[i].name, op_type))
            return handlers[i].h;
    return oxo_find_more(op_type);
}
