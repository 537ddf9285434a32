/* builders.c - the public graph-building calls: each fills a node prototype
 * (normalising axes and such) and hands it to rlx_graph_add, which checks
 * operands and infers the shape. */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

static rlx_node_data proto(rlx_op op, int n_in, const rlx_node *in)
{
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.n_in = n_in;
    for (int i = 0; i < n_in; i++)
        p.in[i] = in[i];
    return p;
}

static rlx_node node1(rlx_graph *g, rlx_op op, rlx_node x)
{
    rlx_node_data p = proto(op, 1, &x);
    return rlx_graph_add(g, &p);
}
static rlx_node node2(rlx_graph *g, rlx_op op, rlx_node a, rlx_node b)
{
    rlx_node in[2] = {a, b};
    rlx_node_data p = proto(op, 2, in);
    return rlx_graph_add(g, &p);
}

/* Rank of an operand, or -1 (with the graph's error set) if it is invalid. */
static int rank_of(rlx_graph *g, rlx_node x, const char *what)
{
    if (!g) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: graph is NULL", what);
        return -1;
    }
    if (x < 0 && g->error != RLX_OK) {
        /* an earlier builder failed: its status and message carry on */
        rlx_set_error(g->error, "%s", g->error_msg);
        return -1;
    }
    if (x < 0 || x >= g->n_nodes) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: operand is not a valid node (id %d)", what, x);
        return -1;
    }
    return g->nodes[x].shape.ndim;
}

/* Normalises a possibly negative axis against rank r; -1 if out of range. */
static int norm_axis(rlx_graph *g, int axis, int r, const char *what)
{
    int a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r) {
        rlx_graph_fail(g, RLX_ERR_SHAPE, "%s: axis %d out of range for rank %d", what, axis, r);
        return -1;
    }
    return a;
}

static rlx_node leaf(rlx_graph *g, rlx_op op, const char *name, rlx_dtype t, int ndim, const int64_t *dims)
{
    if (!g) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: graph is NULL", rlx_op_name(op));
        return -1;
    }
    if (ndim > 0 && ndim <= RLX_MAX_DIMS && !dims)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s '%s': dims is NULL for rank %d", rlx_op_name(op),
                              name ? name : "", ndim);
    if (ndim < 0 || ndim > RLX_MAX_DIMS)
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "%s '%s': rank %d is outside 0..%d", rlx_op_name(op), name ? name : "",
                              ndim, RLX_MAX_DIMS);
    rlx_node_data p = proto(op, 0, NULL);
    p.dtype = t;
    p.shape.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        p.shape.dims[i] = dims[i];
    p.name = (char *)name;
    return rlx_graph_add(g, &p);
}

static rlx_node named_leaf(rlx_graph *g, rlx_op op, const char *name, rlx_dtype t, int ndim, const int64_t *dims)
{
    if (g && !name)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: name must not be NULL", rlx_op_name(op));
    if (g && name)
        for (int i = 0; i < g->n_nodes; i++)
            if ((g->nodes[i].op == RLX_OP_INPUT || g->nodes[i].op == RLX_OP_PARAM) && g->nodes[i].name &&
                strcmp(g->nodes[i].name, name) == 0)
                return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s '%s': the name is already used", rlx_op_name(op),
                                      name);
    return leaf(g, op, name, t, ndim, dims);
}

rlx_node rlx_input(rlx_graph *g, const char *name, rlx_dtype t, int ndim, const int64_t *dims)
{
    return named_leaf(g, RLX_OP_INPUT, name, t, ndim, dims);
}

rlx_node rlx_param(rlx_graph *g, const char *name, rlx_dtype t, int ndim, const int64_t *dims)
{
    return named_leaf(g, RLX_OP_PARAM, name, t, ndim, dims);
}

/* A constant node of data's first `bytes` bytes (held by blob b, or NULL:
 * rlx_graph_add copies them). */
static rlx_node constant_of(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, const void *data, size_t bytes,
                            rlx_blob *b)
{
    if (!g || ndim < 0 || ndim > RLX_MAX_DIMS || (ndim > 0 && !dims))
        return leaf(g, RLX_OP_CONSTANT, NULL, t, ndim, dims);
    rlx_node_data p = proto(RLX_OP_CONSTANT, 0, NULL);
    p.dtype = t;
    p.shape.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        p.shape.dims[i] = dims[i];
    p.data = (void *)data;
    p.data_bytes = bytes;
    p.blob = b; /* rlx_graph_add takes a reference */
    return rlx_graph_add(g, &p);
}

rlx_node rlx_constant(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, const void *data, size_t bytes)
{
    if (g && !data && bytes)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "constant: data is NULL");
    static const char empty;
    return constant_of(g, t, ndim, dims, data ? data : &empty, bytes, NULL);
}

rlx_node rlx_constant_blob(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, rlx_blob *b, size_t bytes)
{
    if (g && (!b || bytes > rlx_blob_bytes(b)))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "constant: no blob of %zu bytes", bytes);
    return constant_of(g, t, ndim, dims, b ? rlx_blob_data(b) : NULL, bytes, b);
}

rlx_node rlx_scalar(rlx_graph *g, rlx_dtype t, double v)
{
    unsigned char buf[8];
    /* an integer scalar must be a value of its type (the cast below would
     * be undefined otherwise) */
    static const double lo[RLX_DTYPE_COUNT] = {
        [RLX_I64] = -9223372036854775808.0, [RLX_I32] = -2147483648.0, [RLX_I8] = -128.0, [RLX_U8] = 0.0};
    static const double hi[RLX_DTYPE_COUNT] = {
        [RLX_I64] = 9223372036854775808.0, [RLX_I32] = 2147483648.0, [RLX_I8] = 128.0, [RLX_U8] = 256.0};
    if ((t == RLX_I64 || t == RLX_I32 || t == RLX_I8 || t == RLX_U8) && !(v >= lo[t] && v < hi[t]))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "scalar: %g is not a value of %s", v, rlx_dtype_name(t));
    switch (t) {
    case RLX_F32: {
        float f = (float)v;
        memcpy(buf, &f, 4);
        break;
    }
    case RLX_F16: {
        uint16_t h = rlx_f32_to_f16((float)v);
        memcpy(buf, &h, 2);
        break;
    }
    case RLX_BF16: {
        uint16_t h = rlx_f32_to_bf16((float)v);
        memcpy(buf, &h, 2);
        break;
    }
    case RLX_F64: memcpy(buf, &v, 8); break;
    case RLX_I64: {
        int64_t i = (int64_t)v;
        memcpy(buf, &i, 8);
        break;
    }
    case RLX_I32: {
        int32_t i = (int32_t)v;
        memcpy(buf, &i, 4);
        break;
    }
    case RLX_I8: {
        int8_t i = (int8_t)v;
        memcpy(buf, &i, 1);
        break;
    }
    case RLX_U8: {
        uint8_t i = (uint8_t)v;
        memcpy(buf, &i, 1);
        break;
    }
    case RLX_BOOL: buf[0] = v != 0; break;
    default: return rlx_graph_fail(g, RLX_ERR_DTYPE, "scalar: unknown dtype %d", (int)t);
    }
    return rlx_constant(g, t, 0, NULL, buf, rlx_dtype_size(t));
}

#define UNARY_BUILDER(fn, OP) \
    rlx_node fn(rlx_graph *g, rlx_node x) { return node1(g, OP, x); }
UNARY_BUILDER(rlx_neg, RLX_OP_NEG)
UNARY_BUILDER(rlx_abs, RLX_OP_ABS)
UNARY_BUILDER(rlx_exp, RLX_OP_EXP)
UNARY_BUILDER(rlx_log, RLX_OP_LOG)
UNARY_BUILDER(rlx_sqrt, RLX_OP_SQRT)
UNARY_BUILDER(rlx_rsqrt, RLX_OP_RSQRT)
UNARY_BUILDER(rlx_reciprocal, RLX_OP_RECIPROCAL)
UNARY_BUILDER(rlx_tanh, RLX_OP_TANH)
UNARY_BUILDER(rlx_sigmoid, RLX_OP_SIGMOID)
UNARY_BUILDER(rlx_relu, RLX_OP_RELU)
UNARY_BUILDER(rlx_gelu, RLX_OP_GELU)
UNARY_BUILDER(rlx_gelu_tanh, RLX_OP_GELU_TANH)
UNARY_BUILDER(rlx_silu, RLX_OP_SILU)
UNARY_BUILDER(rlx_erf, RLX_OP_ERF)
UNARY_BUILDER(rlx_sin, RLX_OP_SIN)
UNARY_BUILDER(rlx_cos, RLX_OP_COS)
UNARY_BUILDER(rlx_floor, RLX_OP_FLOOR)
UNARY_BUILDER(rlx_ceil, RLX_OP_CEIL)
UNARY_BUILDER(rlx_round, RLX_OP_ROUND)
UNARY_BUILDER(rlx_sign, RLX_OP_SIGN)
UNARY_BUILDER(rlx_not, RLX_OP_NOT)

#define BINARY_BUILDER(fn, OP) \
    rlx_node fn(rlx_graph *g, rlx_node a, rlx_node b) { return node2(g, OP, a, b); }
BINARY_BUILDER(rlx_add, RLX_OP_ADD)
BINARY_BUILDER(rlx_sub, RLX_OP_SUB)
BINARY_BUILDER(rlx_mul, RLX_OP_MUL)
BINARY_BUILDER(rlx_div, RLX_OP_DIV)
BINARY_BUILDER(rlx_pow, RLX_OP_POW)
BINARY_BUILDER(rlx_max, RLX_OP_MAX)
BINARY_BUILDER(rlx_min, RLX_OP_MIN)
BINARY_BUILDER(rlx_equal, RLX_OP_EQUAL)
BINARY_BUILDER(rlx_less, RLX_OP_LESS)
BINARY_BUILDER(rlx_greater, RLX_OP_GREATER)
BINARY_BUILDER(rlx_and, RLX_OP_AND)
BINARY_BUILDER(rlx_or, RLX_OP_OR)
BINARY_BUILDER(rlx_xor, RLX_OP_XOR)

rlx_node rlx_mod(rlx_graph *g, rlx_node a, rlx_node b, int fmod)
{
    rlx_node in[2] = {a, b};
    rlx_node_data p = proto(RLX_OP_MOD, 2, in);
    p.attrs.mod.fmod = fmod != 0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_where(rlx_graph *g, rlx_node c, rlx_node a, rlx_node b)
{
    rlx_node in[3] = {c, a, b};
    rlx_node_data p = proto(RLX_OP_WHERE, 3, in);
    return rlx_graph_add(g, &p);
}

rlx_node rlx_cast(rlx_graph *g, rlx_node x, rlx_dtype to)
{
    rlx_node_data p = proto(RLX_OP_CAST, 1, &x);
    p.attrs.cast.to = to;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_clip(rlx_graph *g, rlx_node x, double lo, double hi)
{
    if (g && (isnan(lo) || isnan(hi)))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "clip: bounds must not be NaN");
    rlx_node_data p = proto(RLX_OP_CLIP, 1, &x);
    p.attrs.clip.lo = lo;
    p.attrs.clip.hi = hi;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_matmul(rlx_graph *g, rlx_node a, rlx_node b, int trans_a, int trans_b)
{
    int ra = rank_of(g, a, "matmul"), rb = rank_of(g, b, "matmul");
    if (ra < 0 || rb < 0)
        return -1;
    if (ra == 0 || rb == 0)
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "matmul: operands must have rank >= 1");
    /* numpy vector rules: promote, multiply, drop the promoted dim */
    rlx_node a2 = a, b2 = b;
    if (ra == 1)
        a2 = rlx_reshape(g, a, 2, (int64_t[]){1, g->nodes[a].shape.dims[0]});
    if (rb == 1)
        b2 = rlx_reshape(g, b, 2, (int64_t[]){g->nodes[b].shape.dims[0], 1});
    rlx_node in[2] = {a2, b2};
    rlx_node_data p = proto(RLX_OP_MATMUL, 2, in);
    p.attrs.matmul.trans_a = ra > 1 && trans_a;
    p.attrs.matmul.trans_b = rb > 1 && trans_b;
    rlx_node y = rlx_graph_add(g, &p);
    if (y < 0 || (ra > 1 && rb > 1))
        return y;
    rlx_shape s = g->nodes[y].shape;
    if (ra == 1 && rb == 1) {
        s.ndim = 0;
    } else if (rb == 1) {
        s.ndim--; /* drop the trailing 1 */
    } else {
        s.dims[s.ndim - 2] = s.dims[s.ndim - 1]; /* drop the promoted 1 before N */
        s.ndim--;
    }
    return rlx_reshape(g, y, s.ndim, s.dims);
}

rlx_node rlx_qmatmul(rlx_graph *g, rlx_node x, rlx_node w, int qtype, int64_t k)
{
    rlx_node in[2] = {x, w};
    rlx_node_data p = proto(RLX_OP_QMATMUL, 2, in);
    p.attrs.quant.qtype = qtype;
    p.attrs.quant.k = k;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_matmul_integer(rlx_graph *g, rlx_node a, rlx_node b, rlx_node a_zp, rlx_node b_zp)
{
    rlx_node in[4] = {a, b, a_zp, b_zp};
    rlx_node_data p = proto(RLX_OP_MATMUL_INTEGER, 4, in);
    return rlx_graph_add(g, &p);
}

rlx_node rlx_conv_integer(rlx_graph *g, rlx_node x, rlx_node w, rlx_node x_zp, rlx_node w_zp, const rlx_conv_params *cp)
{
    if (g && !cp)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "conv_integer: params are NULL");
    rlx_node in[4] = {x, w, x_zp, w_zp};
    rlx_node_data p = proto(RLX_OP_CONV_INTEGER, 4, in);
    if (cp)
        p.attrs.conv.p = *cp;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_dynamic_quantize_range(rlx_graph *g, rlx_node x)
{
    rlx_node_data p = proto(RLX_OP_DYNAMIC_QUANTIZE_RANGE, 1, &x);
    return rlx_graph_add(g, &p);
}

rlx_node rlx_quantize_u8(rlx_graph *g, rlx_node x, rlx_node range)
{
    rlx_node in[2] = {x, range};
    rlx_node_data p = proto(RLX_OP_QUANTIZE_U8, 2, in);
    return rlx_graph_add(g, &p);
}

rlx_node rlx_dequantize(rlx_graph *g, rlx_node w, int qtype, int64_t k, rlx_dtype to)
{
    rlx_node_data p = proto(RLX_OP_DEQUANTIZE, 1, &w);
    p.attrs.quant.qtype = qtype;
    p.attrs.quant.k = k;
    p.attrs.quant.to = to;
    return rlx_graph_add(g, &p);
}

static rlx_node reduce(rlx_graph *g, rlx_op op, rlx_node x, int naxes, const int *axes, int keepdims)
{
    int r = rank_of(g, x, rlx_op_name(op));
    if (r < 0)
        return -1;
    if (naxes < 0 || (naxes > 0 && !axes))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: bad axes list", rlx_op_name(op));
    uint32_t mask = 0;
    if (naxes == 0)
        mask = r ? (uint32_t)((1u << r) - 1u) : 0;
    for (int i = 0; i < naxes; i++) {
        int a = norm_axis(g, axes[i], r, rlx_op_name(op));
        if (a < 0)
            return -1;
        if (mask & (1u << a))
            return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: axis %d listed twice", rlx_op_name(op), axes[i]);
        mask |= 1u << a;
    }
    rlx_node_data p = proto(op, 1, &x);
    p.attrs.reduce.axes = mask;
    p.attrs.reduce.keepdims = keepdims != 0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_reduce_sum(rlx_graph *g, rlx_node x, int n, const int *a, int k)
{
    return reduce(g, RLX_OP_REDUCE_SUM, x, n, a, k);
}
rlx_node rlx_reduce_mean(rlx_graph *g, rlx_node x, int n, const int *a, int k)
{
    return reduce(g, RLX_OP_REDUCE_MEAN, x, n, a, k);
}
rlx_node rlx_reduce_max(rlx_graph *g, rlx_node x, int n, const int *a, int k)
{
    return reduce(g, RLX_OP_REDUCE_MAX, x, n, a, k);
}
rlx_node rlx_reduce_min(rlx_graph *g, rlx_node x, int n, const int *a, int k)
{
    return reduce(g, RLX_OP_REDUCE_MIN, x, n, a, k);
}
rlx_node rlx_reduce_prod(rlx_graph *g, rlx_node x, int n, const int *a, int k)
{
    return reduce(g, RLX_OP_REDUCE_PROD, x, n, a, k);
}

static rlx_node arg(rlx_graph *g, rlx_op op, rlx_node x, int axis, int keepdims)
{
    int r = rank_of(g, x, rlx_op_name(op));
    if (r < 0)
        return -1;
    int a = norm_axis(g, axis, r, rlx_op_name(op));
    if (a < 0)
        return -1;
    rlx_node_data p = proto(op, 1, &x);
    p.attrs.arg.axis = a;
    p.attrs.arg.keepdims = keepdims != 0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_argmax(rlx_graph *g, rlx_node x, int axis, int keepdims)
{
    return arg(g, RLX_OP_ARGMAX, x, axis, keepdims);
}
rlx_node rlx_argmin(rlx_graph *g, rlx_node x, int axis, int keepdims)
{
    return arg(g, RLX_OP_ARGMIN, x, axis, keepdims);
}

static rlx_node softmax(rlx_graph *g, rlx_op op, rlx_node x, int axis)
{
    int r = rank_of(g, x, rlx_op_name(op));
    if (r < 0)
        return -1;
    int a = norm_axis(g, axis, r, rlx_op_name(op));
    if (a < 0)
        return -1;
    rlx_node_data p = proto(op, 1, &x);
    p.attrs.softmax.axis = a;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_softmax(rlx_graph *g, rlx_node x, int axis) { return softmax(g, RLX_OP_SOFTMAX, x, axis); }
rlx_node rlx_log_softmax(rlx_graph *g, rlx_node x, int axis) { return softmax(g, RLX_OP_LOG_SOFTMAX, x, axis); }

static rlx_node norm(rlx_graph *g, rlx_op op, rlx_node x, rlx_node gamma, rlx_node beta, double eps)
{
    rlx_node in[3];
    int n = 0;
    in[n++] = x;
    rlx_node_data p = proto(op, 0, NULL);
    if (gamma >= 0) {
        in[n++] = gamma;
        p.attrs.norm.has_gamma = 1;
    }
    if (beta >= 0) {
        in[n++] = beta;
        p.attrs.norm.has_beta = 1;
    }
    p.n_in = n;
    memcpy(p.in, in, sizeof(rlx_node) * (size_t)n);
    p.attrs.norm.eps = eps;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_layer_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, double eps)
{
    return norm(g, RLX_OP_LAYER_NORM, x, gamma, beta, eps);
}

rlx_node rlx_rms_norm(rlx_graph *g, rlx_node x, rlx_node gamma, double eps)
{
    return norm(g, RLX_OP_RMS_NORM, x, gamma, -1, eps);
}

rlx_node rlx_batch_norm(rlx_graph *g, rlx_node x, rlx_node scale, rlx_node bias, rlx_node mean, rlx_node var,
                        double eps)
{
    rlx_node in[5] = {x, scale, bias, mean, var};
    rlx_node_data p = proto(RLX_OP_BATCH_NORM, 5, in);
    p.attrs.batch_norm.eps = eps;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_reshape(rlx_graph *g, rlx_node x, int ndim, const int64_t *dims)
{
    int r = rank_of(g, x, "reshape");
    if (r < 0)
        return -1;
    if (ndim < 0 || ndim > RLX_MAX_DIMS || (ndim > 0 && !dims))
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "reshape: rank %d is outside 0..%d", ndim, RLX_MAX_DIMS);
    const rlx_shape *in = &g->nodes[x].shape;
    rlx_node_data p = proto(RLX_OP_RESHAPE, 1, &x);
    p.shape.ndim = ndim;
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        int64_t d = dims[i];
        if (d == 0 && i < r)
            d = in->dims[i];
        if (d == -1) {
            if (infer >= 0)
                return rlx_graph_fail(g, RLX_ERR_SHAPE, "reshape: more than one -1");
            infer = i;
            d = 1;
        } else if (d < 0) {
            return rlx_graph_fail(g, RLX_ERR_SHAPE, "reshape: bad dimension %lld", (long long)d);
        }
        p.shape.dims[i] = d;
        if (__builtin_mul_overflow(known, d, &known))
            return rlx_graph_fail(g, RLX_ERR_SHAPE, "reshape: the element count of the target overflows");
    }
    if (infer >= 0) {
        int64_t total = rlx_shape_numel(in);
        if (known == 0 || total % known)
            return rlx_graph_fail(g, RLX_ERR_SHAPE, "reshape: cannot infer -1 from %lld elements", (long long)total);
        p.shape.dims[infer] = total / known;
    }
    return rlx_graph_add(g, &p);
}

rlx_node rlx_transpose(rlx_graph *g, rlx_node x, const int *perm)
{
    int r = rank_of(g, x, "transpose");
    if (r < 0)
        return -1;
    if (!perm && r > 0)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "transpose: perm is NULL");
    rlx_node_data p = proto(RLX_OP_TRANSPOSE, 1, &x);
    for (int i = 0; i < r; i++)
        p.attrs.transpose.perm[i] = perm[i] < 0 ? perm[i] + r : perm[i];
    return rlx_graph_add(g, &p);
}

/* Clamps a python-style slice bound for a dim of size n and step sign. */
static int64_t clamp_bound(int64_t v, int64_t n, int64_t step, int is_start)
{
    if (v < 0)
        v += n;
    if (step > 0)
        return v < 0 ? 0 : (v > n ? n : v);
    (void)is_start;
    return v < -1 ? -1 : (v > n - 1 ? n - 1 : v);
}

rlx_node rlx_slice(rlx_graph *g, rlx_node x, int naxes, const int *axes, const int64_t *starts, const int64_t *ends,
                   const int64_t *steps)
{
    int r = rank_of(g, x, "slice");
    if (r < 0)
        return -1;
    if (naxes < 0 || naxes > r || (naxes > 0 && (!axes || !starts || !ends)))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "slice: bad axes/starts/ends arrays");
    const rlx_shape *in = &g->nodes[x].shape;
    rlx_node_data p = proto(RLX_OP_SLICE, 1, &x);
    p.shape = *in;
    for (int i = 0; i < r; i++) {
        p.attrs.slice.start[i] = 0;
        p.attrs.slice.step[i] = 1;
    }
    unsigned seen = 0;
    for (int i = 0; i < naxes; i++) {
        int a = norm_axis(g, axes[i], r, "slice");
        if (a < 0)
            return -1;
        if (seen & (1u << a))
            return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "slice: axis %d listed twice", axes[i]);
        seen |= 1u << a;
        int64_t step = steps ? steps[i] : 1, n = in->dims[a];
        if (step == 0 || step == INT64_MIN)
            return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "slice: step %lld on axis %d is 0 or out of range",
                                  (long long)step, axes[i]);
        int64_t s = clamp_bound(starts[i], n, step, 1), e = clamp_bound(ends[i], n, step, 0);
        /* (distance - 1) / |step| + 1: no overflow for any step */
        int64_t cnt = step > 0 ? (e > s ? (e - s - 1) / step + 1 : 0) : (s > e ? (s - e - 1) / (-step) + 1 : 0);
        p.shape.dims[a] = cnt;
        p.attrs.slice.start[a] = cnt ? s : 0;
        p.attrs.slice.step[a] = step;
    }
    return rlx_graph_add(g, &p);
}

rlx_node rlx_concat(rlx_graph *g, int n, const rlx_node *xs, int axis)
{
    if (!g) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "concat: graph is NULL");
        return -1;
    }
    if (n < 1 || !xs)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "concat: needs at least one operand");
    int r = rank_of(g, xs[0], "concat");
    if (r < 0)
        return -1;
    int a = norm_axis(g, axis, r, "concat");
    if (a < 0)
        return -1;
    if (n == 1)
        return xs[0];
    /* More operands than a node holds: concatenate in chunks. */
    if (n > RLX_MAX_INPUTS) {
        rlx_node head = rlx_concat(g, RLX_MAX_INPUTS, xs, a);
        rlx_node rest[RLX_MAX_INPUTS];
        int done = RLX_MAX_INPUTS;
        rest[0] = head;
        while (done < n) {
            int take = n - done < RLX_MAX_INPUTS - 1 ? n - done : RLX_MAX_INPUTS - 1;
            memcpy(rest + 1, xs + done, sizeof(rlx_node) * (size_t)take);
            rest[0] = rlx_concat(g, take + 1, rest, a);
            done += take;
        }
        return rest[0];
    }
    rlx_node_data p = proto(RLX_OP_CONCAT, n, xs);
    p.attrs.concat.axis = a;
    return rlx_graph_add(g, &p);
}

rlx_status rlx_split(rlx_graph *g, rlx_node x, int axis, int n, const int64_t *sizes, rlx_node *outs)
{
    int r = rank_of(g, x, "split");
    if (r < 0)
        return g ? g->error : RLX_ERR_INVALID_ARGUMENT;
    if (n < 1 || !sizes || !outs)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "split: needs n >= 1 sizes and an output array"),
               RLX_ERR_INVALID_ARGUMENT;
    int a = norm_axis(g, axis, r, "split");
    if (a < 0)
        return RLX_ERR_SHAPE;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (sizes[i] < 0)
            return rlx_graph_fail(g, RLX_ERR_SHAPE, "split: negative size"), RLX_ERR_SHAPE;
        total += sizes[i];
    }
    if (total != g->nodes[x].shape.dims[a])
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "split: sizes add up to %lld, axis %d has %lld", (long long)total, axis,
                              (long long)g->nodes[x].shape.dims[a]),
               RLX_ERR_SHAPE;
    /* A split is a set of slices: each part is a view of x. */
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        int64_t end = start + sizes[i];
        outs[i] = rlx_slice(g, x, 1, &a, &start, &end, NULL);
        if (outs[i] < 0)
            return g->error;
        start = end;
    }
    return RLX_OK;
}

rlx_node rlx_gather(rlx_graph *g, rlx_node data, rlx_node indices, int axis)
{
    int r = rank_of(g, data, "gather");
    if (r < 0 || rank_of(g, indices, "gather") < 0)
        return -1;
    int a = norm_axis(g, axis, r, "gather");
    if (a < 0)
        return -1;
    rlx_node in[2] = {data, indices};
    rlx_node_data p = proto(RLX_OP_GATHER, 2, in);
    p.attrs.gather.axis = a;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_expand(rlx_graph *g, rlx_node x, int ndim, const int64_t *dims)
{
    int r = rank_of(g, x, "expand");
    if (r < 0)
        return -1;
    if (ndim < 0 || ndim > RLX_MAX_DIMS || (ndim > 0 && !dims))
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "expand: rank %d is outside 0..%d", ndim, RLX_MAX_DIMS);
    rlx_shape want = {0}, out;
    want.ndim = ndim;
    for (int i = 0; i < ndim; i++)
        want.dims[i] = dims[i];
    if (!rlx_shape_broadcast(&g->nodes[x].shape, &want, &out))
        return rlx_graph_fail(g, RLX_ERR_SHAPE, "expand: shapes do not broadcast");
    rlx_node_data p = proto(RLX_OP_EXPAND, 1, &x);
    p.shape = out;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_pad(rlx_graph *g, rlx_node x, const int64_t *pads, rlx_pad_mode mode, double value)
{
    int r = rank_of(g, x, "pad");
    if (r < 0)
        return -1;
    if (!pads && r > 0)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "pad: pads is NULL");
    rlx_node_data p = proto(RLX_OP_PAD, 1, &x);
    for (int i = 0; i < 2 * r; i++)
        p.attrs.pad.pads[i] = pads[i];
    p.attrs.pad.mode = (int)mode;
    p.attrs.pad.value = value;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_rope(rlx_graph *g, rlx_node x, double theta, int64_t offset, int interleaved)
{
    rlx_node_data p = proto(RLX_OP_ROPE, 1, &x);
    p.attrs.rope.theta = theta;
    p.attrs.rope.offset = offset;
    p.attrs.rope.interleaved = interleaved != 0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_rope_tables(rlx_graph *g, rlx_node x, rlx_node cos_table, rlx_node sin_table, int interleaved)
{
    rlx_node in[3] = {x, cos_table, sin_table};
    rlx_node_data p = proto(RLX_OP_ROPE, 3, in);
    p.attrs.rope.interleaved = interleaved != 0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_qkv_heads(rlx_graph *g, rlx_node x, rlx_node cos_table, rlx_node sin_table, rlx_node gq, rlx_node gk,
                       int heads, int kv_heads, double eps, int interleaved)
{
    rlx_node in[5] = {x};
    int n = 1;
    bool rope = cos_table >= 0 || sin_table >= 0;
    if (rope)
        in[n++] = cos_table, in[n++] = sin_table;
    if (gq >= 0)
        in[n++] = gq;
    if (gk >= 0)
        in[n++] = gk;
    rlx_node_data p = proto(RLX_OP_QKV_HEADS, n, in);
    p.attrs.qkv.heads = heads;
    p.attrs.qkv.kv_heads = kv_heads;
    if (x >= 0 && x < g->n_nodes && g->nodes[x].shape.ndim == 3 && heads + 2 * kv_heads > 0)
        p.attrs.qkv.head_dim = (int)(g->nodes[x].shape.dims[2] / (heads + 2 * kv_heads));
    p.attrs.qkv.has_rope = rope;
    p.attrs.qkv.rope_interleaved = interleaved != 0;
    p.attrs.qkv.has_qnorm = gq >= 0;
    p.attrs.qkv.has_knorm = gk >= 0;
    p.attrs.qkv.norm_eps = eps;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_glu(rlx_graph *g, rlx_node x, rlx_act act)
{
    rlx_node_data p = proto(RLX_OP_GLU, 1, &x);
    p.attrs.glu.act = act;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_projection(rlx_graph *g, rlx_node x, rlx_node w, rlx_proj_pre pre, rlx_node gamma, double eps, rlx_act glu,
                        rlx_node r)
{
    rlx_node in[4] = {x, w};
    int n = 2;
    if (pre == RLX_PROJ_RMS_NORM)
        in[n++] = gamma;
    if (r >= 0)
        in[n++] = r;
    rlx_node_data p = proto(RLX_OP_PROJECTION, n, in);
    p.attrs.proj.pre = pre;
    p.attrs.proj.glu = glu;
    p.attrs.proj.has_res = r >= 0;
    p.attrs.proj.eps = pre == RLX_PROJ_RMS_NORM ? eps : 0.0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_cache_write(rlx_graph *g, rlx_node cache, rlx_node update, rlx_node pos)
{
    rlx_node in[3] = {cache, update, pos};
    rlx_node_data p = proto(RLX_OP_CACHE_WRITE, 3, in);
    return rlx_graph_add(g, &p);
}

rlx_node rlx_attention(rlx_graph *g, rlx_node q, rlx_node k, rlx_node v, rlx_node mask, int causal, double scale)
{
    rlx_node in[4] = {q, k, v, mask};
    rlx_node_data p = proto(RLX_OP_ATTENTION, mask >= 0 ? 4 : 3, in);
    p.attrs.attention.causal = causal != 0;
    p.attrs.attention.has_mask = mask >= 0;
    p.attrs.attention.scale = scale;
    rlx_node y = rlx_graph_add(g, &p);
    if (y >= 0 && !(scale > 0))
        g->nodes[y].attrs.attention.scale = 1.0 / sqrt((double)g->nodes[q].shape.dims[3]);
    return y;
}

rlx_node rlx_attention_at(rlx_graph *g, rlx_node q, rlx_node k, rlx_node v, rlx_node pos, double scale)
{
    rlx_node in[4] = {q, k, v, pos};
    rlx_node_data p = proto(RLX_OP_ATTENTION, 4, in);
    p.attrs.attention.causal = 1;
    p.attrs.attention.has_pos = 1;
    p.attrs.attention.scale = scale;
    rlx_node y = rlx_graph_add(g, &p);
    if (y >= 0 && !(scale > 0))
        g->nodes[y].attrs.attention.scale = 1.0 / sqrt((double)g->nodes[q].shape.dims[3]);
    return y;
}

void rlx_conv_params_init(rlx_conv_params *p)
{
    memset(p, 0, sizeof *p);
    p->stride[0] = p->stride[1] = 1;
    p->dilation[0] = p->dilation[1] = 1;
    p->groups = 1;
}

void rlx_pool_params_init(rlx_pool_params *p, int64_t kernel)
{
    memset(p, 0, sizeof *p);
    p->kernel[0] = p->kernel[1] = kernel;
    p->stride[0] = p->stride[1] = kernel;
    p->dilation[0] = p->dilation[1] = 1;
}

rlx_node rlx_conv(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias, const rlx_conv_params *cp)
{
    if (g && !cp)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "conv: params are NULL");
    rlx_node in[3] = {x, w, bias};
    rlx_node_data p = proto(RLX_OP_CONV, bias >= 0 ? 3 : 2, in);
    if (cp)
        p.attrs.conv.p = *cp;
    p.attrs.conv.has_bias = bias >= 0;
    return rlx_graph_add(g, &p);
}

static rlx_node pool(rlx_graph *g, rlx_op op, rlx_node x, const rlx_pool_params *pp)
{
    if (g && !pp)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: params are NULL", rlx_op_name(op));
    rlx_node_data p = proto(op, 1, &x);
    if (pp)
        p.attrs.pool.p = *pp;
    p.attrs.pool.p.count_include_pad = pp && pp->count_include_pad != 0;
    p.attrs.pool.p.ceil_mode = pp && pp->ceil_mode != 0;
    return rlx_graph_add(g, &p);
}

rlx_node rlx_max_pool(rlx_graph *g, rlx_node x, const rlx_pool_params *p) { return pool(g, RLX_OP_MAX_POOL, x, p); }
rlx_node rlx_avg_pool(rlx_graph *g, rlx_node x, const rlx_pool_params *p) { return pool(g, RLX_OP_AVG_POOL, x, p); }
rlx_node rlx_global_avg_pool(rlx_graph *g, rlx_node x) { return node1(g, RLX_OP_GLOBAL_AVG_POOL, x); }

static rlx_node random_leaf(rlx_graph *g, rlx_op op, rlx_dtype t, int ndim, const int64_t *dims, double a, double b)
{
    if (g && (isnan(a) || isnan(b) || (op == RLX_OP_RANDOM_NORMAL && b < 0) || (op == RLX_OP_RANDOM_UNIFORM && b < a)))
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: bad distribution parameters (%g, %g)", rlx_op_name(op),
                              a, b);
    rlx_node id = leaf(g, op, NULL, t, ndim, dims);
    if (id >= 0) {
        g->nodes[id].attrs.random.a = a;
        g->nodes[id].attrs.random.b = b;
    }
    return id;
}

rlx_node rlx_random_uniform(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, double lo, double hi)
{
    return random_leaf(g, RLX_OP_RANDOM_UNIFORM, t, ndim, dims, lo, hi);
}

rlx_node rlx_random_normal(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, double mean, double std)
{
    return random_leaf(g, RLX_OP_RANDOM_NORMAL, t, ndim, dims, mean, std);
}

rlx_node rlx_dropout(rlx_graph *g, rlx_node x, double prob)
{
    rlx_node_data p = proto(RLX_OP_DROPOUT, 1, &x);
    p.attrs.dropout.p = prob;
    return rlx_graph_add(g, &p);
}
