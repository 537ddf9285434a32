/* ops.c - the op table: one row per op with its arity, flags and shape/dtype
 * inference.  Inference functions fill n->shape and n->dtype, or return an
 * error whose message says what does not fit. */
#include <math.h>
#include <string.h>

#include "core/ggml_type.h"
#include "ir/grad.h"
#include "ir/ir.h"

#define IN(i) (&g->nodes[n->in[i]])

/* a shape as text for a message, in a buffer of the call's own (a compound
 * literal lives to the end of the enclosing block): no shared state */
#define SHAPE_A(s) rlx_shape_str((s), (char[128]){0}, 128)
#define SHAPE_B(s) rlx_shape_str((s), (char[128]){0}, 128)

static rlx_status check_shape_arg(const rlx_shape *s)
{
    if (s->ndim < 0 || s->ndim > RLX_MAX_DIMS)
        return rlx_set_error(RLX_ERR_SHAPE, "rank %d is outside 0..%d", s->ndim, RLX_MAX_DIMS);
    int64_t total = 1;
    for (int i = 0; i < s->ndim; i++) {
        if (s->dims[i] < 0)
            return rlx_set_error(RLX_ERR_SHAPE, "dimension %d is negative (%lld)", i, (long long)s->dims[i]);
        if (s->dims[i] > 0 && total > (INT64_C(1) << 40) / s->dims[i])
            return rlx_set_error(RLX_ERR_SHAPE, "tensor of more than 2^40 elements");
        total *= s->dims[i];
    }
    return RLX_OK;
}

static rlx_status infer_leaf(const rlx_graph *g, rlx_node_data *n)
{
    (void)g;
    if ((unsigned)n->dtype >= RLX_DTYPE_COUNT)
        return rlx_set_error(RLX_ERR_DTYPE, "unknown dtype %d", (int)n->dtype);
    rlx_status s = check_shape_arg(&n->shape);
    if (s != RLX_OK)
        return s;
    if (n->op == RLX_OP_CONSTANT && n->data_bytes != rlx_node_bytes(n))
        return rlx_set_error(RLX_ERR_SHAPE, "constant data has %zu bytes, shape %s of %s needs %zu", n->data_bytes,
                             SHAPE_A(&n->shape), rlx_dtype_name(n->dtype), rlx_node_bytes(n));
    if ((n->op == RLX_OP_RANDOM_UNIFORM || n->op == RLX_OP_RANDOM_NORMAL) && !rlx_dtype_is_float(n->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "random values need a float dtype, not %s", rlx_dtype_name(n->dtype));
    return RLX_OK;
}

static rlx_status infer_unary(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    rlx_dtype t = x->dtype;
    switch (n->op) {
    case RLX_OP_NOT:
        if (t != RLX_BOOL)
            return rlx_set_error(RLX_ERR_DTYPE, "not takes bool, got %s", rlx_dtype_name(t));
        break;
    case RLX_OP_NEG:
    case RLX_OP_ABS:
    case RLX_OP_SIGN:
    case RLX_OP_RELU:
        if (t == RLX_BOOL)
            return rlx_set_error(RLX_ERR_DTYPE, "%s takes a number type, got bool", rlx_op_name(n->op));
        break;
    default:
        if (!rlx_dtype_is_float(t))
            return rlx_set_error(RLX_ERR_DTYPE, "%s takes a float type, got %s", rlx_op_name(n->op), rlx_dtype_name(t));
    }
    n->dtype = t;
    n->shape = x->shape;
    return RLX_OK;
}

static rlx_status infer_binary(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *a = IN(0), *b = IN(1);
    if (a->dtype != b->dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "operands have different dtypes (%s and %s)", rlx_dtype_name(a->dtype),
                             rlx_dtype_name(b->dtype));
    if (!rlx_shape_broadcast(&a->shape, &b->shape, &n->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "shapes %s and %s do not broadcast", SHAPE_A(&a->shape),
                             SHAPE_B(&b->shape));
    switch (n->op) {
    case RLX_OP_AND:
    case RLX_OP_OR:
    case RLX_OP_XOR:
        if (a->dtype != RLX_BOOL)
            return rlx_set_error(RLX_ERR_DTYPE, "%s takes bool, got %s", rlx_op_name(n->op), rlx_dtype_name(a->dtype));
        n->dtype = RLX_BOOL;
        break;
    case RLX_OP_EQUAL: n->dtype = RLX_BOOL; break;
    case RLX_OP_LESS:
    case RLX_OP_GREATER:
        if (a->dtype == RLX_BOOL)
            return rlx_set_error(RLX_ERR_DTYPE, "%s takes numbers, got bool", rlx_op_name(n->op));
        n->dtype = RLX_BOOL;
        break;
    default:
        if (a->dtype == RLX_BOOL)
            return rlx_set_error(RLX_ERR_DTYPE, "%s takes numbers, got bool", rlx_op_name(n->op));
        n->dtype = a->dtype;
    }
    return RLX_OK;
}

static rlx_status infer_where(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *c = IN(0), *a = IN(1), *b = IN(2);
    if (c->dtype != RLX_BOOL)
        return rlx_set_error(RLX_ERR_DTYPE, "condition must be bool, got %s", rlx_dtype_name(c->dtype));
    if (a->dtype != b->dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "branches have different dtypes (%s and %s)", rlx_dtype_name(a->dtype),
                             rlx_dtype_name(b->dtype));
    rlx_shape ab;
    if (!rlx_shape_broadcast(&a->shape, &b->shape, &ab) || !rlx_shape_broadcast(&c->shape, &ab, &n->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "condition %s and branches %s, %s do not broadcast", SHAPE_A(&c->shape),
                             SHAPE_B(&a->shape), rlx_shape_str(&b->shape, (char[128]){0}, 128));
    n->dtype = a->dtype;
    return RLX_OK;
}

static rlx_status infer_cast(const rlx_graph *g, rlx_node_data *n)
{
    if ((unsigned)n->attrs.cast.to >= RLX_DTYPE_COUNT)
        return rlx_set_error(RLX_ERR_DTYPE, "unknown target dtype %d", (int)n->attrs.cast.to);
    n->shape = IN(0)->shape;
    n->dtype = n->attrs.cast.to;
    return RLX_OK;
}

static rlx_status infer_same_numeric(const rlx_graph *g, rlx_node_data *n)
{
    if (IN(0)->dtype == RLX_BOOL)
        return rlx_set_error(RLX_ERR_DTYPE, "%s takes numbers, got bool", rlx_op_name(n->op));
    n->shape = IN(0)->shape;
    n->dtype = IN(0)->dtype;
    return RLX_OK;
}

static rlx_status infer_same_float(const rlx_graph *g, rlx_node_data *n)
{
    if (!rlx_dtype_is_float(IN(0)->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "%s takes a float type, got %s", rlx_op_name(n->op),
                             rlx_dtype_name(IN(0)->dtype));
    n->shape = IN(0)->shape;
    n->dtype = IN(0)->dtype;
    return RLX_OK;
}

static rlx_status infer_matmul(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *a = IN(0), *b = IN(1);
    if (a->dtype != b->dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "operands have different dtypes (%s and %s)", rlx_dtype_name(a->dtype),
                             rlx_dtype_name(b->dtype));
    if (!rlx_dtype_is_float(a->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "matmul takes float types, got %s", rlx_dtype_name(a->dtype));
    if (a->shape.ndim < 2 || b->shape.ndim < 2)
        return rlx_set_error(RLX_ERR_SHAPE, "operands need rank >= 2 (got %s and %s)", SHAPE_A(&a->shape),
                             SHAPE_B(&b->shape));
    int ra = a->shape.ndim, rb = b->shape.ndim;
    int64_t m = n->attrs.matmul.trans_a ? a->shape.dims[ra - 1] : a->shape.dims[ra - 2];
    int64_t ka = n->attrs.matmul.trans_a ? a->shape.dims[ra - 2] : a->shape.dims[ra - 1];
    int64_t kb = n->attrs.matmul.trans_b ? b->shape.dims[rb - 1] : b->shape.dims[rb - 2];
    int64_t nn = n->attrs.matmul.trans_b ? b->shape.dims[rb - 2] : b->shape.dims[rb - 1];
    if (ka != kb)
        return rlx_set_error(RLX_ERR_SHAPE, "inner dimensions differ: %s x %s (K %lld vs %lld)", SHAPE_A(&a->shape),
                             SHAPE_B(&b->shape), (long long)ka, (long long)kb);
    rlx_shape ba = a->shape, bb = b->shape, batch;
    ba.ndim -= 2;
    bb.ndim -= 2;
    if (!rlx_shape_broadcast(&ba, &bb, &batch))
        return rlx_set_error(RLX_ERR_SHAPE, "batch dimensions of %s and %s do not broadcast", SHAPE_A(&a->shape),
                             SHAPE_B(&b->shape));
    n->shape = batch;
    n->shape.dims[n->shape.ndim++] = m;
    n->shape.dims[n->shape.ndim++] = nn;
    n->dtype = a->dtype;
    return RLX_OK;
}

/* The quantized weight w of a qmatmul, dequantize or quantized projection:
 * u8 [N, row bytes]. */
rlx_status rlx_check_quant_weight(int qt, int64_t k, const rlx_node_data *w)
{
    const char *name = rlx_ggml_type_name(qt);
    if (!rlx_qtype_supported(qt))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "quantized type %d (%s) is not one RLX computes with", qt,
                             name ? name : "unknown");
    size_t rb = rlx_quant_row_bytes(qt, k);
    if (!rb) {
        int64_t block = 0;
        rlx_ggml_type_size(qt, &block, NULL);
        return rlx_set_error(RLX_ERR_SHAPE, "%s rows hold whole blocks of %lld elements; k = %lld", name,
                             (long long)block, (long long)k);
    }
    if (w->dtype != RLX_U8 || w->shape.ndim != 2 || w->shape.dims[1] != (int64_t)rb)
        return rlx_set_error(RLX_ERR_SHAPE, "a %s weight of rows of %lld elements is u8 [N, %zu]; got %s %s", name,
                             (long long)k, rb, rlx_dtype_name(w->dtype), SHAPE_A(&w->shape));
    return RLX_OK;
}

static rlx_status infer_qmatmul(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *w = IN(1);
    rlx_status st = rlx_check_quant_weight(n->attrs.quant.qtype, n->attrs.quant.k, w);
    if (st != RLX_OK)
        return st;
    if (!rlx_dtype_is_float(x->dtype) || x->dtype == RLX_F64)
        return rlx_set_error(RLX_ERR_DTYPE, "qmatmul takes f32, f16 or bf16 activations, got %s",
                             rlx_dtype_name(x->dtype));
    if (x->shape.ndim < 1 || x->shape.dims[x->shape.ndim - 1] != n->attrs.quant.k)
        return rlx_set_error(RLX_ERR_SHAPE, "activations %s do not end in k = %lld", SHAPE_A(&x->shape),
                             (long long)n->attrs.quant.k);
    n->shape = x->shape;
    n->shape.dims[n->shape.ndim - 1] = w->shape.dims[0];
    n->dtype = x->dtype;
    return RLX_OK;
}

static bool is_byte(rlx_dtype t) { return t == RLX_U8 || t == RLX_I8; }

static rlx_status infer_matmul_integer(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *a = IN(0), *b = IN(1), *za = IN(2), *zb = IN(3);
    if (!is_byte(a->dtype) || !is_byte(b->dtype) || za->dtype != a->dtype || zb->dtype != b->dtype)
        return rlx_set_error(
            RLX_ERR_DTYPE, "matmul_integer takes u8/i8 operands and zero points of their dtypes, got %s, %s, %s, %s",
            rlx_dtype_name(a->dtype), rlx_dtype_name(b->dtype), rlx_dtype_name(za->dtype), rlx_dtype_name(zb->dtype));
    if (a->shape.ndim < 1 || b->shape.ndim != 2 || a->shape.dims[a->shape.ndim - 1] != b->shape.dims[0])
        return rlx_set_error(RLX_ERR_SHAPE, "matmul_integer takes a [.., K] and b [K, N], got %s and %s",
                             SHAPE_A(&a->shape), SHAPE_B(&b->shape));
    int64_t nzb = rlx_shape_numel(&zb->shape);
    if (rlx_shape_numel(&za->shape) != 1 || (nzb != 1 && nzb != b->shape.dims[1]) || (nzb != 1 && zb->shape.ndim != 1))
        return rlx_set_error(RLX_ERR_SHAPE,
                             "matmul_integer's zero points are one element and one or [N], got %s and %s",
                             SHAPE_A(&za->shape), SHAPE_B(&zb->shape));
    n->shape = a->shape;
    n->shape.dims[n->shape.ndim - 1] = b->shape.dims[1];
    n->dtype = RLX_I32;
    return RLX_OK;
}

static rlx_status infer_dq_range(const rlx_graph *g, rlx_node_data *n)
{
    if (IN(0)->dtype != RLX_F32)
        return rlx_set_error(RLX_ERR_DTYPE, "dynamic_quantize_range takes f32, got %s", rlx_dtype_name(IN(0)->dtype));
    n->shape.ndim = 1;
    n->shape.dims[0] = 2;
    n->dtype = RLX_F32;
    return RLX_OK;
}

static rlx_status infer_quantize_u8(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *r = IN(1);
    if (x->dtype != RLX_F32 || r->dtype != RLX_F32 || r->shape.ndim != 1 || r->shape.dims[0] != 2)
        return rlx_set_error(RLX_ERR_DTYPE, "quantize_u8 takes f32 values and an f32 [2] range, got %s and %s %s",
                             rlx_dtype_name(x->dtype), rlx_dtype_name(r->dtype), SHAPE_A(&r->shape));
    n->shape = x->shape;
    n->dtype = RLX_U8;
    return RLX_OK;
}

static rlx_status infer_dequantize(const rlx_graph *g, rlx_node_data *n)
{
    rlx_status st = rlx_check_quant_weight(n->attrs.quant.qtype, n->attrs.quant.k, IN(0));
    if (st != RLX_OK)
        return st;
    rlx_dtype to = n->attrs.quant.to;
    if (to != RLX_F32 && to != RLX_F16 && to != RLX_BF16)
        return rlx_set_error(RLX_ERR_DTYPE, "dequantize gives f32, f16 or bf16, not %s", rlx_dtype_name(to));
    n->shape.ndim = 2;
    n->shape.dims[0] = IN(0)->shape.dims[0];
    n->shape.dims[1] = n->attrs.quant.k;
    n->dtype = to;
    return RLX_OK;
}

static rlx_status infer_reduce(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    uint32_t axes = n->attrs.reduce.axes;
    if (x->shape.ndim < 32 && (axes >> x->shape.ndim) != 0)
        return rlx_set_error(RLX_ERR_SHAPE, "reduction axis out of range for rank %d", x->shape.ndim);
    if (x->dtype == RLX_BOOL)
        return rlx_set_error(RLX_ERR_DTYPE, "%s takes numbers, got bool", rlx_op_name(n->op));
    if (n->op == RLX_OP_REDUCE_MEAN && !rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "mean takes a float type, got %s", rlx_dtype_name(x->dtype));
    rlx_shape out = {0};
    for (int i = 0; i < x->shape.ndim; i++) {
        if (axes & (1u << i)) {
            if ((n->op == RLX_OP_REDUCE_MAX || n->op == RLX_OP_REDUCE_MIN) && x->shape.dims[i] == 0)
                return rlx_set_error(RLX_ERR_SHAPE, "%s over an empty axis %d has no value", rlx_op_name(n->op), i);
            if (n->attrs.reduce.keepdims)
                out.dims[out.ndim++] = 1;
        } else {
            out.dims[out.ndim++] = x->shape.dims[i];
        }
    }
    n->shape = out;
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status infer_arg(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    int axis = n->attrs.arg.axis;
    if (axis < 0 || axis >= x->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "axis %d out of range for rank %d", axis, x->shape.ndim);
    if (x->shape.dims[axis] == 0)
        return rlx_set_error(RLX_ERR_SHAPE, "%s over an empty axis", rlx_op_name(n->op));
    if (x->dtype == RLX_BOOL)
        return rlx_set_error(RLX_ERR_DTYPE, "%s takes numbers, got bool", rlx_op_name(n->op));
    rlx_shape out = {0};
    for (int i = 0; i < x->shape.ndim; i++) {
        if (i == axis) {
            if (n->attrs.arg.keepdims)
                out.dims[out.ndim++] = 1;
        } else {
            out.dims[out.ndim++] = x->shape.dims[i];
        }
    }
    n->shape = out;
    n->dtype = RLX_I64;
    return RLX_OK;
}

static rlx_status infer_softmax(const rlx_graph *g, rlx_node_data *n)
{
    int axis = n->attrs.softmax.axis;
    if (axis < 0 || axis >= IN(0)->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "axis %d out of range for rank %d", axis, IN(0)->shape.ndim);
    return infer_same_float(g, n);
}

static rlx_status infer_norm(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    if (x->shape.ndim < 1)
        return rlx_set_error(RLX_ERR_SHAPE, "normalisation needs rank >= 1");
    int64_t last = x->shape.dims[x->shape.ndim - 1];
    int expected = 1 + n->attrs.norm.has_gamma + n->attrs.norm.has_beta;
    if (n->n_in != expected)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "expected %d inputs, got %d", expected, n->n_in);
    for (int i = 1; i < n->n_in; i++) {
        const rlx_node_data *p = IN(i);
        if (p->dtype != x->dtype)
            return rlx_set_error(RLX_ERR_DTYPE, "scale/bias dtype %s differs from input %s", rlx_dtype_name(p->dtype),
                                 rlx_dtype_name(x->dtype));
        if (p->shape.ndim != 1 || p->shape.dims[0] != last)
            return rlx_set_error(RLX_ERR_SHAPE, "scale/bias must be [%lld], got %s", (long long)last,
                                 SHAPE_A(&p->shape));
    }
    if (!(n->attrs.norm.eps >= 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "eps must be >= 0");
    return infer_same_float(g, n);
}

/* norm_grad: x and dy of one shape, gamma as the norm takes it; [2, ...x] */
static rlx_status infer_norm_grad(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *dy = IN(1);
    if (n->attrs.norm.has_beta || n->n_in != 2 + (n->attrs.norm.has_gamma != 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "norm_grad takes x, dy and gamma if flagged, no beta");
    if (!rlx_dtype_is_float(x->dtype) || dy->dtype != x->dtype || !rlx_shape_equal(&dy->shape, &x->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "norm_grad: dy must be x's %s %s", rlx_dtype_name(x->dtype),
                             SHAPE_A(&x->shape));
    if (x->shape.ndim < 1 || x->shape.ndim >= RLX_MAX_DIMS)
        return rlx_set_error(RLX_ERR_SHAPE, "norm_grad: x %s must have rank 1 to %d", SHAPE_A(&x->shape),
                             RLX_MAX_DIMS - 1);
    if (n->attrs.norm.has_gamma) {
        const rlx_node_data *gm = IN(2);
        if (gm->dtype != x->dtype || gm->shape.ndim != 1 || gm->shape.dims[0] != x->shape.dims[x->shape.ndim - 1])
            return rlx_set_error(RLX_ERR_SHAPE, "norm_grad: gamma must be %s [%lld]", rlx_dtype_name(x->dtype),
                                 (long long)x->shape.dims[x->shape.ndim - 1]);
    }
    if (!(n->attrs.norm.eps >= 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "eps must be >= 0");
    n->shape.ndim = x->shape.ndim + 1;
    n->shape.dims[0] = 2;
    memcpy(n->shape.dims + 1, x->shape.dims, (size_t)x->shape.ndim * sizeof *x->shape.dims);
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status infer_reshape(const rlx_graph *g, rlx_node_data *n)
{
    rlx_status s = check_shape_arg(&n->shape);
    if (s != RLX_OK)
        return s;
    if (rlx_shape_numel(&n->shape) != rlx_shape_numel(&IN(0)->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "cannot reshape %s into %s (element counts differ)", SHAPE_A(&IN(0)->shape),
                             SHAPE_B(&n->shape));
    n->dtype = IN(0)->dtype;
    return RLX_OK;
}

static rlx_status infer_transpose(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    unsigned seen = 0;
    n->shape.ndim = x->shape.ndim;
    for (int i = 0; i < x->shape.ndim; i++) {
        int p = n->attrs.transpose.perm[i];
        if (p < 0 || p >= x->shape.ndim || (seen & (1u << p)))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "perm is not a permutation of 0..%d", x->shape.ndim - 1);
        seen |= 1u << p;
        n->shape.dims[i] = x->shape.dims[p];
    }
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status infer_slice(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    if (n->shape.ndim != x->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "slice result rank %d differs from input rank %d", n->shape.ndim,
                             x->shape.ndim);
    for (int i = 0; i < x->shape.ndim; i++) {
        int64_t cnt = n->shape.dims[i], st = n->attrs.slice.start[i], step = n->attrs.slice.step[i];
        if (step == 0)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "slice step is 0 on axis %d", i);
        if (cnt < 0)
            return rlx_set_error(RLX_ERR_SHAPE, "negative slice length on axis %d", i);
        if (cnt > 0) {
            int64_t last = st + (cnt - 1) * step;
            if (st < 0 || st >= x->shape.dims[i] || last < 0 || last >= x->shape.dims[i])
                return rlx_set_error(RLX_ERR_SHAPE, "slice on axis %d reads outside 0..%lld", i,
                                     (long long)x->shape.dims[i] - 1);
        }
    }
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status infer_concat(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x0 = IN(0);
    int axis = n->attrs.concat.axis;
    if (axis < 0 || axis >= x0->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "axis %d out of range for rank %d", axis, x0->shape.ndim);
    n->shape = x0->shape;
    n->shape.dims[axis] = 0;
    for (int i = 0; i < n->n_in; i++) {
        const rlx_node_data *x = IN(i);
        if (x->dtype != x0->dtype)
            return rlx_set_error(RLX_ERR_DTYPE, "operand %d has dtype %s, operand 0 %s", i, rlx_dtype_name(x->dtype),
                                 rlx_dtype_name(x0->dtype));
        if (x->shape.ndim != x0->shape.ndim)
            return rlx_set_error(RLX_ERR_SHAPE, "operand %d has rank %d, operand 0 rank %d", i, x->shape.ndim,
                                 x0->shape.ndim);
        for (int d = 0; d < x0->shape.ndim; d++)
            if (d != axis && x->shape.dims[d] != x0->shape.dims[d])
                return rlx_set_error(RLX_ERR_SHAPE, "operand %d shape %s does not match %s off axis %d", i,
                                     SHAPE_A(&x->shape), SHAPE_B(&x0->shape), axis);
        n->shape.dims[axis] += x->shape.dims[axis];
    }
    n->dtype = x0->dtype;
    return RLX_OK;
}

static rlx_status infer_gather(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *d = IN(0), *idx = IN(1);
    int axis = n->attrs.gather.axis;
    if (axis < 0 || axis >= d->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "axis %d out of range for rank %d", axis, d->shape.ndim);
    if (idx->dtype != RLX_I64 && idx->dtype != RLX_I32)
        return rlx_set_error(RLX_ERR_DTYPE, "indices must be i32 or i64, got %s", rlx_dtype_name(idx->dtype));
    if (d->shape.ndim - 1 + idx->shape.ndim > RLX_MAX_DIMS)
        return rlx_set_error(RLX_ERR_SHAPE, "result rank exceeds %d", RLX_MAX_DIMS);
    if (d->shape.dims[axis] == 0 && rlx_shape_numel(&idx->shape) > 0)
        return rlx_set_error(RLX_ERR_SHAPE, "gather from an empty axis");
    rlx_shape out = {0};
    for (int i = 0; i < axis; i++)
        out.dims[out.ndim++] = d->shape.dims[i];
    for (int i = 0; i < idx->shape.ndim; i++)
        out.dims[out.ndim++] = idx->shape.dims[i];
    for (int i = axis + 1; i < d->shape.ndim; i++)
        out.dims[out.ndim++] = d->shape.dims[i];
    n->shape = out;
    n->dtype = d->dtype;
    return RLX_OK;
}

static rlx_status infer_scatter_add(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *d = IN(0), *idx = IN(1);
    int axis = n->attrs.gather.axis;
    rlx_status s = check_shape_arg(&n->shape);
    if (s != RLX_OK)
        return s;
    if (axis < 0 || axis >= n->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "axis %d out of range for rank %d", axis, n->shape.ndim);
    if (idx->dtype != RLX_I64 && idx->dtype != RLX_I32)
        return rlx_set_error(RLX_ERR_DTYPE, "indices must be i32 or i64, got %s", rlx_dtype_name(idx->dtype));
    if (!rlx_dtype_is_float(d->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "scatter_add adds floats, got %s", rlx_dtype_name(d->dtype));
    rlx_shape want = {0};
    for (int i = 0; i < axis; i++)
        want.dims[want.ndim++] = n->shape.dims[i];
    for (int i = 0; i < idx->shape.ndim && want.ndim < RLX_MAX_DIMS; i++)
        want.dims[want.ndim++] = idx->shape.dims[i];
    for (int i = axis + 1; i < n->shape.ndim && want.ndim < RLX_MAX_DIMS; i++)
        want.dims[want.ndim++] = n->shape.dims[i];
    if (axis + idx->shape.ndim + (n->shape.ndim - axis - 1) > RLX_MAX_DIMS || !rlx_shape_equal(&want, &d->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "updates %s do not fit indices %s into %s on axis %d", SHAPE_A(&d->shape),
                             SHAPE_B(&idx->shape), rlx_shape_str(&n->shape, (char[128]){0}, 128), axis);
    n->dtype = d->dtype;
    return RLX_OK;
}

static rlx_status infer_expand(const rlx_graph *g, rlx_node_data *n)
{
    rlx_shape b;
    rlx_status s = check_shape_arg(&n->shape);
    if (s != RLX_OK)
        return s;
    if (!rlx_shape_broadcast(&IN(0)->shape, &n->shape, &b) || !rlx_shape_equal(&b, &n->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "cannot expand %s to %s", SHAPE_A(&IN(0)->shape), SHAPE_B(&n->shape));
    n->dtype = IN(0)->dtype;
    return RLX_OK;
}

static rlx_status infer_pad(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    int r = x->shape.ndim;
    if (n->attrs.pad.mode < RLX_PAD_CONSTANT || n->attrs.pad.mode > RLX_PAD_EDGE)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "unknown pad mode %d", n->attrs.pad.mode);
    n->shape = x->shape;
    for (int i = 0; i < r; i++) {
        int64_t b = n->attrs.pad.pads[i], e = n->attrs.pad.pads[r + i];
        if (b < 0 || e < 0 || b > (INT64_C(1) << 32) || e > (INT64_C(1) << 32))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "pads on axis %d must be in 0..2^32 (got %lld, %lld)", i,
                                 (long long)b, (long long)e);
        if (n->attrs.pad.mode == RLX_PAD_REFLECT && (b >= x->shape.dims[i] || e >= x->shape.dims[i]) && (b || e))
            return rlx_set_error(RLX_ERR_SHAPE, "reflect pad on axis %d needs pads < dim %lld", i,
                                 (long long)x->shape.dims[i]);
        if (n->attrs.pad.mode == RLX_PAD_EDGE && x->shape.dims[i] == 0 && (b || e))
            return rlx_set_error(RLX_ERR_SHAPE, "edge pad of an empty axis %d", i);
        n->shape.dims[i] += b + e;
    }
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status infer_rope(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    if (x->shape.ndim < 2 || x->shape.dims[x->shape.ndim - 1] % 2)
        return rlx_set_error(RLX_ERR_SHAPE, "rope needs [..., S, D] with D even, got %s", SHAPE_A(&x->shape));
    if (n->n_in == 3) { /* cos and sin tables: [..., S, D/2] broadcast to x with its last axis halved */
        rlx_shape want = x->shape;
        want.dims[want.ndim - 1] /= 2;
        for (int j = 1; j < 3; j++) {
            const rlx_node_data *c = IN(j);
            if (!rlx_dtype_is_float(c->dtype))
                return rlx_set_error(RLX_ERR_DTYPE, "rope %s table must be float, got %s", j == 1 ? "cos" : "sin",
                                     rlx_dtype_name(c->dtype));
            if (c->shape.ndim != x->shape.ndim || !rlx_shape_broadcasts_to(&c->shape, &want) ||
                c->shape.dims[c->shape.ndim - 1] != want.dims[want.ndim - 1])
                return rlx_set_error(RLX_ERR_SHAPE, "rope %s table %s does not broadcast to %s", j == 1 ? "cos" : "sin",
                                     SHAPE_A(&c->shape), SHAPE_B(&want));
        }
        n->shape = x->shape;
        n->dtype = x->dtype;
        return rlx_dtype_is_float(x->dtype)
                   ? RLX_OK
                   : rlx_set_error(RLX_ERR_DTYPE, "rope needs a float x, got %s", rlx_dtype_name(x->dtype));
    }
    if (n->n_in != 1)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rope takes x alone or x, cos and sin");
    if (!(n->attrs.rope.theta > 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rope theta must be > 0");
    if (n->attrs.rope.offset > ((int64_t)1 << 53) || n->attrs.rope.offset < -((int64_t)1 << 53))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rope offset %lld is outside +-2^53",
                             (long long)n->attrs.rope.offset);
    return infer_same_float(g, n);
}

static rlx_status infer_attention(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *q = IN(0), *k = IN(1), *v = IN(2);
    if (q->shape.ndim != 4 || k->shape.ndim != 4 || v->shape.ndim != 4)
        return rlx_set_error(RLX_ERR_SHAPE, "q, k, v must be rank 4 [B, H, S, D]");
    if (!rlx_dtype_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "q, k, v must share one float dtype");
    int64_t B = q->shape.dims[0], H = q->shape.dims[1], S = q->shape.dims[2], D = q->shape.dims[3];
    int64_t Hk = k->shape.dims[1], T = k->shape.dims[2];
    if (k->shape.dims[0] != B || v->shape.dims[0] != B || k->shape.dims[3] != D || v->shape.dims[1] != Hk ||
        v->shape.dims[2] != T)
        return rlx_set_error(RLX_ERR_SHAPE, "k %s / v %s do not fit q %s", SHAPE_A(&k->shape), SHAPE_B(&v->shape),
                             rlx_shape_str(&q->shape, (char[128]){0}, 128));
    if (Hk == 0 || H % Hk)
        return rlx_set_error(RLX_ERR_SHAPE, "query heads %lld are not a multiple of key heads %lld", (long long)H,
                             (long long)Hk);
    if (n->attrs.attention.has_mask) {
        if (n->n_in < 4)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "mask flag set but no mask input");
        const rlx_node_data *m = IN(3);
        rlx_shape full = {4, {B, H, S, T}};
        if (m->dtype != RLX_BOOL && m->dtype != q->dtype)
            return rlx_set_error(RLX_ERR_DTYPE, "mask must be bool or %s, got %s", rlx_dtype_name(q->dtype),
                                 rlx_dtype_name(m->dtype));
        if (!rlx_shape_broadcasts_to(&m->shape, &full))
            return rlx_set_error(RLX_ERR_SHAPE, "mask %s does not broadcast to [B, H, S, T] = %s", SHAPE_A(&m->shape),
                                 SHAPE_B(&full));
    }
    if (n->n_in != 3 + (n->attrs.attention.has_mask != 0) + (n->attrs.attention.has_pos != 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "attention has %d inputs; its flags want %d", n->n_in,
                             3 + (n->attrs.attention.has_mask != 0) + (n->attrs.attention.has_pos != 0));
    if (n->attrs.attention.has_pos) {
        const rlx_node_data *p = IN(n->n_in - 1);
        if (p->dtype != RLX_I64 && p->dtype != RLX_I32)
            return rlx_set_error(RLX_ERR_DTYPE, "attention positions must be i64 or i32, got %s",
                                 rlx_dtype_name(p->dtype));
        if (p->shape.ndim != 1 || p->shape.dims[0] != B)
            return rlx_set_error(RLX_ERR_SHAPE, "attention positions %s must be [B] = [%lld]", SHAPE_A(&p->shape),
                                 (long long)B);
    }
    n->shape = q->shape;
    n->shape.dims[3] = v->shape.dims[3];
    n->dtype = q->dtype;
    return RLX_OK;
}

/* attention_grad: q, k, v[, mask] as attention takes them, o and dy of
 * attention's shape */
static rlx_status infer_attention_grad(const rlx_graph *g, rlx_node_data *n)
{
    if (n->attrs.attention.has_pos)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "attention_grad takes no run-time positions");
    if (n->n_in != 5 + (n->attrs.attention.has_mask != 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "attention_grad has %d inputs; its flags want %d", n->n_in,
                             5 + (n->attrs.attention.has_mask != 0));
    rlx_node_data a = *n;
    a.op = RLX_OP_ATTENTION;
    a.n_in = 3;
    if (n->attrs.attention.has_mask)
        a.in[a.n_in++] = n->in[5];
    rlx_status st = infer_attention(g, &a);
    if (st != RLX_OK)
        return st;
    for (int j = 3; j < 5; j++)
        if (IN(j)->dtype != a.dtype || !rlx_shape_equal(&IN(j)->shape, &a.shape))
            return rlx_set_error(RLX_ERR_SHAPE, "attention_grad: %s must be %s %s", j == 3 ? "o" : "dy",
                                 rlx_dtype_name(a.dtype), SHAPE_A(&a.shape));
    n->shape.ndim = 1;
    n->shape.dims[0] = rlx_shape_numel(&IN(0)->shape) + rlx_shape_numel(&IN(1)->shape) + rlx_shape_numel(&IN(2)->shape);
    n->dtype = a.dtype;
    return RLX_OK;
}

static rlx_status infer_cache_write(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *c = IN(0), *u = IN(1), *p = IN(2);
    if (c->shape.ndim != 4 || u->shape.ndim != 4)
        return rlx_set_error(RLX_ERR_SHAPE, "cache and update must be rank 4 [B, H, T, D] and [B, H, S, D]");
    if (u->dtype != c->dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "update is %s, the cache %s", rlx_dtype_name(u->dtype),
                             rlx_dtype_name(c->dtype));
    if (u->shape.dims[0] != c->shape.dims[0] || u->shape.dims[1] != c->shape.dims[1] ||
        u->shape.dims[3] != c->shape.dims[3] || u->shape.dims[2] > c->shape.dims[2])
        return rlx_set_error(RLX_ERR_SHAPE, "update %s does not fit the cache %s", SHAPE_A(&u->shape),
                             SHAPE_B(&c->shape));
    if ((p->dtype != RLX_I64 && p->dtype != RLX_I32) || p->shape.ndim != 1 || p->shape.dims[0] != c->shape.dims[0])
        return rlx_set_error(RLX_ERR_SHAPE, "positions must be i64 or i32 [B] with B = %lld",
                             (long long)c->shape.dims[0]);
    n->shape = c->shape;
    n->dtype = c->dtype;
    return RLX_OK;
}

static rlx_status infer_cross_entropy(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *y = IN(1);
    if (!rlx_dtype_is_float(x->dtype) || (y->dtype != RLX_I64 && y->dtype != RLX_I32))
        return rlx_set_error(RLX_ERR_DTYPE, "cross-entropy takes float logits and i64/i32 labels, got %s and %s",
                             rlx_dtype_name(x->dtype), rlx_dtype_name(y->dtype));
    bool fits = x->shape.ndim == y->shape.ndim + 1 && x->shape.dims[x->shape.ndim - 1] > 0;
    for (int i = 0; fits && i < y->shape.ndim; i++)
        fits = x->shape.dims[i] == y->shape.dims[i];
    if (!fits)
        return rlx_set_error(RLX_ERR_SHAPE, "logits %s must be labels %s plus a class axis of at least one class",
                             SHAPE_A(&x->shape), SHAPE_B(&y->shape));
    if (!(n->attrs.xent.smoothing >= 0 && n->attrs.xent.smoothing <= 1))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "label smoothing %g is outside [0, 1]", n->attrs.xent.smoothing);
    rlx_dtype loss_t = rlx_cross_entropy_loss_dtype(x->dtype);
    if (n->op == RLX_OP_CROSS_ENTROPY_GRAD) {
        const rlx_node_data *dy = IN(2);
        if (dy->dtype != loss_t || !rlx_shape_equal(&dy->shape, &y->shape))
            return rlx_set_error(RLX_ERR_SHAPE, "cross-entropy gradient dy must be %s %s", rlx_dtype_name(loss_t),
                                 SHAPE_A(&y->shape));
        n->shape = x->shape;
        n->dtype = x->dtype;
    } else {
        n->shape = y->shape;
        n->dtype = loss_t;
    }
    return RLX_OK;
}

/* The optimizer state inputs each kind keeps (after param, grad, hyper,
 * gscale, after): SGD's momentum buffer (with momentum only), Adam's two
 * moments. */
static int optim_states(const rlx_node_data *n)
{
    if (n->attrs.optim.kind == RLX_OPTIM_SGD)
        return n->attrs.optim.momentum != 0 ? 1 : 0;
    return 2;
}

static rlx_status infer_optimizer_step(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *p = IN(0), *gr = IN(1), *h = IN(2), *sc = IN(3);
    int kind = n->attrs.optim.kind;
    if (kind < RLX_OPTIM_SGD || kind > RLX_OPTIM_ADAMW)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "unknown optimizer kind %d", kind);
    if (n->n_in != 5 + optim_states(n))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "optimizer step of kind %d takes %d inputs, got %d", kind,
                             5 + optim_states(n), n->n_in);
    if (!rlx_dtype_is_float(p->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "a trained param must be float, got %s", rlx_dtype_name(p->dtype));
    /* an f32 param (mixed precision's master copy) takes its gradient in f16
     * or bf16 as the backward made it: widened as it is read */
    bool low_grad = p->dtype == RLX_F32 && (gr->dtype == RLX_F16 || gr->dtype == RLX_BF16);
    if ((gr->dtype != p->dtype && !low_grad) || !rlx_shape_equal(&gr->shape, &p->shape))
        return rlx_set_error(RLX_ERR_SHAPE, "gradient %s %s does not match param %s %s", rlx_dtype_name(gr->dtype),
                             SHAPE_A(&gr->shape), rlx_dtype_name(p->dtype), SHAPE_B(&p->shape));
    if (h->dtype != RLX_F32 || rlx_shape_numel(&h->shape) != 4)
        return rlx_set_error(RLX_ERR_SHAPE, "optimizer hyper-parameters must be f32 [4]");
    if (sc->dtype != RLX_F32 || rlx_shape_numel(&sc->shape) != 1)
        return rlx_set_error(RLX_ERR_SHAPE, "gradient scale must be one f32");
    for (int k = 5; k < n->n_in; k++)
        if (IN(k)->dtype != p->dtype || !rlx_shape_equal(&IN(k)->shape, &p->shape))
            return rlx_set_error(RLX_ERR_SHAPE, "optimizer state %d must match the param's %s %s", k - 5,
                                 rlx_dtype_name(p->dtype), SHAPE_A(&p->shape));
    n->shape = p->shape;
    n->dtype = p->dtype;
    return RLX_OK;
}

bool rlx_node_writes_input(const rlx_node_data *n, int k)
{
    if (!(rlx_op_info_of(n->op)->flags & RLX_OPF_STATEFUL) || k < 0 || k >= n->n_in)
        return false;
    return k == 0 || (n->op == RLX_OP_OPTIMIZER_STEP && k >= 5);
}

bool rlx_leaf_is_written(const rlx_graph *g, rlx_node id)
{
    for (rlx_node i = id + 1; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (!(rlx_op_info_of(n->op)->flags & RLX_OPF_STATEFUL))
            continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == id && rlx_node_writes_input(n, k))
                return true;
    }
    return false;
}

static rlx_status window_out(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pb, int64_t pe, int ceil_mode,
                             int64_t *out)
{
    if (k < 1 || stride < 1 || dil < 1 || pb < 0 || pe < 0 || k > (1 << 20) || stride > (1 << 20) || dil > (1 << 20) ||
        pb > (1 << 20) || pe > (1 << 20))
        return rlx_set_error(
            RLX_ERR_INVALID_ARGUMENT,
            "window needs kernel, stride, dilation >= 1 and pads >= 0 (got %lld, %lld, %lld, %lld/%lld)", (long long)k,
            (long long)stride, (long long)dil, (long long)pb, (long long)pe);
    int64_t span = dil * (k - 1) + 1, avail = in + pb + pe - span;
    if (avail < 0)
        return rlx_set_error(RLX_ERR_SHAPE, "window of span %lld is larger than padded input %lld", (long long)span,
                             (long long)(in + pb + pe));
    int64_t o = (ceil_mode ? (avail + stride - 1) / stride : avail / stride) + 1;
    /* with ceil mode, the last window must start inside the input or left pad */
    if (ceil_mode && (o - 1) * stride >= in + pb)
        o--;
    *out = o;
    return RLX_OK;
}

static rlx_status infer_conv_shape(const rlx_graph *g, rlx_node_data *n);

static rlx_status infer_conv(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *w = IN(1);
    if (!rlx_dtype_is_float(x->dtype) || w->dtype != x->dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "conv input and weight must share one float dtype");
    rlx_status s = infer_conv_shape(g, n);
    n->dtype = x->dtype;
    return s;
}

/* conv_integer: NCHW, zero points as matmul_integer's with w_zp per output
 * channel. */
static rlx_status infer_conv_integer(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *w = IN(1), *zx = IN(2), *zw = IN(3);
    if (!is_byte(x->dtype) || !is_byte(w->dtype) || zx->dtype != x->dtype || zw->dtype != w->dtype)
        return rlx_set_error(
            RLX_ERR_DTYPE, "conv_integer takes u8/i8 operands and zero points of their dtypes, got %s, %s, %s, %s",
            rlx_dtype_name(x->dtype), rlx_dtype_name(w->dtype), rlx_dtype_name(zx->dtype), rlx_dtype_name(zw->dtype));
    if (n->attrs.conv.layout != RLX_LAYOUT_NCHW || n->attrs.conv.has_bias || n->attrs.conv.act)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "conv_integer is NCHW without bias or activation");
    int64_t nzw = rlx_shape_numel(&zw->shape);
    if (rlx_shape_numel(&zx->shape) != 1 ||
        (nzw != 1 && (zw->shape.ndim != 1 || w->shape.ndim < 1 || nzw != w->shape.dims[0])))
        return rlx_set_error(RLX_ERR_SHAPE, "conv_integer's zero points are one element and one or [O], got %s and %s",
                             SHAPE_A(&zx->shape), SHAPE_B(&zw->shape));
    rlx_status s = infer_conv_shape(g, n);
    n->dtype = RLX_I32;
    return s;
}

static rlx_status infer_conv_shape(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *w = IN(1);
    int sp = x->shape.ndim - 2, lay = n->attrs.conv.layout;
    const rlx_conv_params *p = &n->attrs.conv.p;
    if (lay != RLX_LAYOUT_NCHW && lay != RLX_LAYOUT_NHWC)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "conv layout must be 0 (NCHW) or 1 (NHWC), got %d", lay);
    if (lay == RLX_LAYOUT_NHWC && sp != 2)
        return rlx_set_error(RLX_ERR_SHAPE, "channels-last conv input must be [N, H, W, C], got %s",
                             SHAPE_A(&x->shape));
    if (sp < 1 || sp > 2)
        return rlx_set_error(RLX_ERR_SHAPE, "conv input must be [N, C, L] or [N, C, H, W], got %s", SHAPE_A(&x->shape));
    if (w->shape.ndim != x->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "weight rank %d differs from input rank %d", w->shape.ndim, x->shape.ndim);
    /* channel and spatial axes of x and w in this layout */
    int cx = lay ? 3 : 1, cw = lay ? 3 : 1, s0 = lay ? 1 : 2;
    int64_t C = x->shape.dims[cx], O = w->shape.dims[0], G = p->groups;
    if (G < 1 || C % G || O % G || w->shape.dims[cw] * G != C)
        return rlx_set_error(RLX_ERR_SHAPE, "groups %lld do not fit input channels %lld, weight %s%s", (long long)G,
                             (long long)C, SHAPE_A(&w->shape), lay ? " (channels-last: [O, KH, KW, C/groups])" : "");
    if (n->attrs.conv.has_bias) {
        const rlx_node_data *b = IN(2);
        if (n->n_in != 3 || b->shape.ndim != 1 || b->shape.dims[0] != O || b->dtype != x->dtype)
            return rlx_set_error(RLX_ERR_SHAPE, "bias must be [%lld] of %s", (long long)O, rlx_dtype_name(x->dtype));
    }
    n->attrs.conv.spatial = sp;
    n->shape.ndim = x->shape.ndim;
    n->shape.dims[0] = x->shape.dims[0];
    n->shape.dims[cx] = O;
    for (int i = 0; i < sp; i++) {
        rlx_status s = window_out(x->shape.dims[s0 + i], w->shape.dims[s0 + i], p->stride[i], p->dilation[i],
                                  p->pads[i], p->pads[sp + i], 0, &n->shape.dims[s0 + i]);
        if (s != RLX_OK)
            return s;
    }
    return RLX_OK;
}

static rlx_status infer_pool(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    int sp = x->shape.ndim - 2, lay = n->attrs.pool.layout;
    const rlx_pool_params *p = &n->attrs.pool.p;
    if (lay != RLX_LAYOUT_NCHW && lay != RLX_LAYOUT_NHWC)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "pool layout must be 0 (NCHW) or 1 (NHWC), got %d", lay);
    if (lay == RLX_LAYOUT_NHWC && sp != 2)
        return rlx_set_error(RLX_ERR_SHAPE, "channels-last pool input must be [N, H, W, C], got %s",
                             SHAPE_A(&x->shape));
    if (sp < 1 || sp > 2)
        return rlx_set_error(RLX_ERR_SHAPE, "pool input must be [N, C, L] or [N, C, H, W], got %s", SHAPE_A(&x->shape));
    if (!rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "pooling takes a float type, got %s", rlx_dtype_name(x->dtype));
    int s0 = lay ? 1 : 2; /* first spatial axis */
    n->attrs.pool.spatial = sp;
    n->shape = x->shape;
    for (int i = 0; i < sp; i++) {
        if (p->pads[i] >= p->kernel[i] || p->pads[sp + i] >= p->kernel[i])
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "pads must be smaller than the kernel on axis %d", i);
        rlx_status s = window_out(x->shape.dims[s0 + i], p->kernel[i], p->stride[i], p->dilation[i], p->pads[i],
                                  p->pads[sp + i], p->ceil_mode, &n->shape.dims[s0 + i]);
        if (s != RLX_OK)
            return s;
    }
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status infer_global_pool(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    if (x->shape.ndim < 3)
        return rlx_set_error(RLX_ERR_SHAPE, "global pool input must be [N, C, ...], got %s", SHAPE_A(&x->shape));
    rlx_status s = infer_same_float(g, n);
    for (int i = 2; i < x->shape.ndim; i++)
        n->shape.dims[i] = 1;
    return s;
}

static rlx_status infer_dropout(const rlx_graph *g, rlx_node_data *n)
{
    if (!(n->attrs.dropout.p >= 0 && n->attrs.dropout.p < 1))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "dropout probability must be in [0, 1), got %g",
                             n->attrs.dropout.p);
    return infer_same_float(g, n);
}

/* The alias rules of the view ops (the planner's, and every backend's
 * through rlx_node_is_view). */
bool rlx_slice_is_contiguous(const rlx_graph *g, rlx_node id, size_t *byte_offset)
{
    const rlx_node_data *n = &g->nodes[id];
    const rlx_node_data *x = &g->nodes[n->in[0]];
    if (n->op != RLX_OP_SLICE)
        return false;
    int r = x->shape.ndim;
    /* Contiguous when the outer axes are cut to length 1, the first longer
     * axis is cut with step 1 and every axis inside it is kept whole. */
    int k = 0;
    while (k < r && n->shape.dims[k] == 1)
        k++;
    if (k < r && n->attrs.slice.step[k] != 1)
        return false;
    for (int i = k + 1; i < r; i++)
        if (n->shape.dims[i] != x->shape.dims[i] || (n->attrs.slice.step[i] != 1 && n->shape.dims[i] > 1))
            return false;
    int64_t strides[RLX_MAX_DIMS];
    rlx_shape_strides(&x->shape, strides);
    int64_t off = 0;
    for (int i = 0; i < r; i++)
        off += n->attrs.slice.start[i] * strides[i];
    if (byte_offset)
        *byte_offset = (size_t)off * rlx_dtype_size(x->dtype);
    return true;
}

static bool view_always(const rlx_graph *g, const rlx_node_data *n, size_t *byte_offset)
{
    (void)g, (void)n, (void)byte_offset;
    return true;
}

static bool view_slice(const rlx_graph *g, const rlx_node_data *n, size_t *byte_offset)
{
    return rlx_slice_is_contiguous(g, (rlx_node)(n - g->nodes), byte_offset);
}

/* The perm keeps the axes longer than 1 in their order. */
static bool view_transpose(const rlx_graph *g, const rlx_node_data *n, size_t *byte_offset)
{
    (void)byte_offset;
    const rlx_shape *in = &g->nodes[n->in[0]].shape;
    int last = -1;
    for (int i = 0; i < n->shape.ndim; i++) {
        int a = n->attrs.transpose.perm[i];
        if (in->dims[a] == 1)
            continue;
        if (a < last)
            return false;
        last = a;
    }
    return true;
}

/* Rows, by family.  Columns: name, inputs min..max, flags, kind, mixed
 * precision class, fused activation, layout attribute, inference, alias
 * rule, decomposition (ops_fused.c and decompose.c hold the fused ops'). */
#define ROW(nm, lo, hi, fl, kind, amp, infer, grad)                                            \
    {                                                                                          \
        nm, lo, hi, fl, kind, amp, RLX_ACT_NONE, RLX_LAYOUT_ATTR_NONE, infer, NULL, NULL, grad \
    }
#define LEAF(nm) ROW(nm, 0, 0, RLX_OPF_LEAF, RLX_KIND_LEAF, RLX_AMP_LEAF, infer_leaf, NULL)
#define UNARY(nm, amp, fl) ROW(nm, 1, 1, RLX_OPF_ELEMENTWISE | (fl), RLX_KIND_UNARY, amp, infer_unary, rlx_grad_unary)
#define ACT(nm, act)                                                                                                   \
    {                                                                                                                  \
        nm, 1, 1, RLX_OPF_ELEMENTWISE | CH, RLX_KIND_UNARY, RLX_AMP_LOW, act, RLX_LAYOUT_ATTR_NONE, infer_unary, NULL, \
            NULL, rlx_grad_unary                                                                                       \
    }
#define BINARY(nm, amp, fl, grad) ROW(nm, 2, 2, RLX_OPF_ELEMENTWISE | (fl), RLX_KIND_BINARY, amp, infer_binary, grad)
#define VIEW(nm, fl, infer, view, grad)                                                                           \
    {                                                                                                             \
        nm, 1, 1, RLX_OPF_VIEW | (fl), RLX_KIND_SHAPE, RLX_AMP_FOLLOW, RLX_ACT_NONE, RLX_LAYOUT_ATTR_NONE, infer, \
            view, NULL, grad                                                                                      \
    }
#define DECOMP(nm, lo, hi, fl, kind, amp, lay, infer, dec, grad)             \
    {                                                                        \
        nm, lo, hi, fl, kind, amp, RLX_ACT_NONE, lay, infer, NULL, dec, grad \
    }
#define FUSED(nm, lo, hi, fl, kind, amp, lay, infer, dec) \
    DECOMP(nm, lo, hi, RLX_OPF_FUSED | (fl), kind, amp, lay, infer, dec, rlx_grad_decomposed)
/* gradient rules: every non-leaf row names one (src/ir/grad_rules.c) */
#define NOGRAD rlx_grad_refuse
#define DIFF rlx_grad_binary
#define CH RLX_OPF_CHAIN
#define CH32 (RLX_OPF_CHAIN | RLX_OPF_CHAIN_F32)
#define LOW RLX_AMP_LOW
#define F32 RLX_AMP_F32
#define FOLLOW RLX_AMP_FOLLOW

static const rlx_op_info op_table[RLX_OP_COUNT] = {
    [RLX_OP_INPUT] = LEAF("input"),
    [RLX_OP_PARAM] = LEAF("param"),
    [RLX_OP_CONSTANT] = LEAF("constant"),
    [RLX_OP_NEG] = UNARY("neg", LOW, CH),
    [RLX_OP_ABS] = UNARY("abs", LOW, CH),
    [RLX_OP_EXP] = UNARY("exp", F32, CH32),
    [RLX_OP_LOG] = UNARY("log", F32, CH32),
    [RLX_OP_SQRT] = UNARY("sqrt", F32, CH32),
    [RLX_OP_RSQRT] = UNARY("rsqrt", F32, CH32),
    [RLX_OP_RECIPROCAL] = UNARY("reciprocal", F32, CH32),
    [RLX_OP_TANH] = UNARY("tanh", LOW, CH),
    [RLX_OP_SIGMOID] = UNARY("sigmoid", LOW, CH),
    [RLX_OP_RELU] = ACT("relu", RLX_ACT_RELU),
    [RLX_OP_GELU] = ACT("gelu", RLX_ACT_GELU),
    [RLX_OP_GELU_TANH] = ACT("gelu_tanh", RLX_ACT_GELU_TANH),
    [RLX_OP_SILU] = ACT("silu", RLX_ACT_SILU),
    [RLX_OP_ERF] = UNARY("erf", LOW, CH),
    [RLX_OP_SIN] = UNARY("sin", F32, CH),
    [RLX_OP_COS] = UNARY("cos", F32, CH),
    [RLX_OP_FLOOR] = UNARY("floor", F32, CH),
    [RLX_OP_CEIL] = UNARY("ceil", F32, CH),
    [RLX_OP_ROUND] = UNARY("round", F32, CH),
    [RLX_OP_SIGN] = UNARY("sign", F32, CH),
    [RLX_OP_NOT] = UNARY("not", F32, 0),
    [RLX_OP_ADD] = BINARY("add", LOW, CH, DIFF),
    [RLX_OP_SUB] = BINARY("sub", LOW, CH, DIFF),
    [RLX_OP_MUL] = BINARY("mul", LOW, CH, DIFF),
    [RLX_OP_DIV] = BINARY("div", LOW, CH, DIFF),
    [RLX_OP_POW] = BINARY("pow", F32, CH32, DIFF),
    [RLX_OP_MAX] = BINARY("max", LOW, CH, DIFF),
    [RLX_OP_MIN] = BINARY("min", LOW, CH, DIFF),
    [RLX_OP_MOD] = BINARY("mod", F32, 0, DIFF),
    [RLX_OP_EQUAL] = BINARY("equal", F32, 0, NOGRAD),
    [RLX_OP_LESS] = BINARY("less", F32, 0, NOGRAD),
    [RLX_OP_GREATER] = BINARY("greater", F32, 0, NOGRAD),
    [RLX_OP_AND] = BINARY("and", F32, 0, NOGRAD),
    [RLX_OP_OR] = BINARY("or", F32, 0, NOGRAD),
    [RLX_OP_XOR] = BINARY("xor", F32, 0, NOGRAD),
    [RLX_OP_WHERE] = ROW("where", 3, 3, RLX_OPF_ELEMENTWISE, RLX_KIND_ELEMENTWISE, FOLLOW, infer_where, rlx_grad_where),
    [RLX_OP_CAST] =
        ROW("cast", 1, 1, RLX_OPF_ELEMENTWISE, RLX_KIND_ELEMENTWISE, RLX_AMP_CAST, infer_cast, rlx_grad_cast),
    [RLX_OP_CLIP] =
        ROW("clip", 1, 1, RLX_OPF_ELEMENTWISE, RLX_KIND_ELEMENTWISE, FOLLOW, infer_same_numeric, rlx_grad_clip),
    [RLX_OP_MATMUL] = ROW("matmul", 2, 2, 0, RLX_KIND_MATMUL, LOW, infer_matmul, rlx_grad_matmul),
    [RLX_OP_QMATMUL] =
        ROW("qmatmul", 2, 2, RLX_OPF_AUX_KEEP_DTYPE, RLX_KIND_MATMUL, FOLLOW, infer_qmatmul, rlx_grad_qmatmul),
    [RLX_OP_DEQUANTIZE] = ROW("dequantize", 1, 1, 0, RLX_KIND_ELEMENTWISE, FOLLOW, infer_dequantize, NOGRAD),
    [RLX_OP_MATMUL_INTEGER] = DECOMP("matmul_integer", 4, 4, 0, RLX_KIND_MATMUL, RLX_AMP_FOLLOW, RLX_LAYOUT_ATTR_NONE,
                                     infer_matmul_integer, rlx_decompose_matmul_integer, NOGRAD),
    [RLX_OP_CONV_INTEGER] = DECOMP("conv_integer", 4, 4, 0, RLX_KIND_CONV, RLX_AMP_FOLLOW, RLX_LAYOUT_ATTR_NONE,
                                   infer_conv_integer, rlx_decompose_conv_integer, NOGRAD),
    [RLX_OP_DYNAMIC_QUANTIZE_RANGE] =
        DECOMP("dynamic_quantize_range", 1, 1, 0, RLX_KIND_REDUCTION, RLX_AMP_F32, RLX_LAYOUT_ATTR_NONE, infer_dq_range,
               rlx_decompose_dynamic_quantize_range, NOGRAD),
    [RLX_OP_QUANTIZE_U8] = DECOMP("quantize_u8", 2, 2, 0, RLX_KIND_ELEMENTWISE, RLX_AMP_F32, RLX_LAYOUT_ATTR_NONE,
                                  infer_quantize_u8, rlx_decompose_quantize_u8, NOGRAD),
    [RLX_OP_REDUCE_SUM] = ROW("reduce_sum", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_reduce, rlx_grad_reduce),
    [RLX_OP_REDUCE_MEAN] = ROW("reduce_mean", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_reduce, rlx_grad_reduce),
    [RLX_OP_REDUCE_MAX] = ROW("reduce_max", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_reduce, rlx_grad_reduce),
    [RLX_OP_REDUCE_MIN] = ROW("reduce_min", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_reduce, rlx_grad_reduce),
    [RLX_OP_REDUCE_PROD] = ROW("reduce_prod", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_reduce, rlx_grad_reduce),
    [RLX_OP_ARGMAX] = ROW("argmax", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_arg, NOGRAD),
    [RLX_OP_ARGMIN] = ROW("argmin", 1, 1, 0, RLX_KIND_REDUCTION, F32, infer_arg, NOGRAD),
    [RLX_OP_SOFTMAX] = ROW("softmax", 1, 1, 0, RLX_KIND_NORM, LOW, infer_softmax, rlx_grad_softmax),
    [RLX_OP_LOG_SOFTMAX] = ROW("log_softmax", 1, 1, 0, RLX_KIND_NORM, F32, infer_softmax, rlx_grad_softmax),
    [RLX_OP_LAYER_NORM] = ROW("layer_norm", 1, 3, 0, RLX_KIND_NORM, LOW, infer_norm, rlx_grad_norm),
    [RLX_OP_RMS_NORM] = ROW("rms_norm", 1, 2, 0, RLX_KIND_NORM, LOW, infer_norm, rlx_grad_norm),
    /* the logits stay in the dtype they arrive in (statistics in f32 or
     * wider, the loss f32 or wider); dy is the loss's dtype */
    [RLX_OP_CROSS_ENTROPY] = ROW("cross_entropy", 2, 2, RLX_OPF_AUX_KEEP_DTYPE, RLX_KIND_NORM, FOLLOW,
                                 infer_cross_entropy, rlx_grad_cross_entropy),
    [RLX_OP_CROSS_ENTROPY_GRAD] =
        ROW("cross_entropy_grad", 3, 3, RLX_OPF_AUX_KEEP_DTYPE, RLX_KIND_NORM, FOLLOW, infer_cross_entropy, NOGRAD),
    [RLX_OP_RESHAPE] = VIEW("reshape", 0, infer_reshape, view_always, rlx_grad_reshape),
    [RLX_OP_TRANSPOSE] = VIEW("transpose", 0, infer_transpose, view_transpose, rlx_grad_transpose),
    [RLX_OP_SLICE] = VIEW("slice", 0, infer_slice, view_slice, rlx_grad_slice),
    [RLX_OP_CONCAT] = ROW("concat", 1, RLX_MAX_INPUTS, 0, RLX_KIND_SHAPE, FOLLOW, infer_concat, rlx_grad_concat),
    [RLX_OP_GATHER] = ROW("gather", 2, 2, 0, RLX_KIND_SHAPE, FOLLOW, infer_gather, rlx_grad_gather),
    [RLX_OP_SCATTER_ADD] =
        ROW("scatter_add", 2, 2, RLX_OPF_AUX_KEEP_DTYPE, RLX_KIND_SHAPE, F32, infer_scatter_add, rlx_grad_scatter_add),
    [RLX_OP_EXPAND] = ROW("expand", 1, 1, 0, RLX_KIND_SHAPE, FOLLOW, infer_expand, rlx_grad_expand),
    [RLX_OP_PAD] = ROW("pad", 1, 1, 0, RLX_KIND_SHAPE, FOLLOW, infer_pad, rlx_grad_pad),
    [RLX_OP_ROPE] = ROW("rope", 1, 3, RLX_OPF_AUX_KEEP_DTYPE, RLX_KIND_ATTENTION, LOW, infer_rope, rlx_grad_rope),
    [RLX_OP_ATTENTION] = ROW("attention", 3, 5, 0, RLX_KIND_ATTENTION, LOW, infer_attention, rlx_grad_attention),
    [RLX_OP_CONV] = DECOMP("conv", 2, 3, 0, RLX_KIND_CONV, LOW, RLX_LAYOUT_ATTR_CONV, infer_conv,
                           rlx_decompose_channels_last, rlx_grad_conv),
    [RLX_OP_MAX_POOL] = DECOMP("max_pool", 1, 1, 0, RLX_KIND_POOL, LOW, RLX_LAYOUT_ATTR_POOL, infer_pool,
                               rlx_decompose_channels_last, rlx_grad_pool),
    [RLX_OP_AVG_POOL] = DECOMP("avg_pool", 1, 1, 0, RLX_KIND_POOL, LOW, RLX_LAYOUT_ATTR_POOL, infer_pool,
                               rlx_decompose_channels_last, rlx_grad_pool),
    [RLX_OP_GLOBAL_AVG_POOL] =
        ROW("global_avg_pool", 1, 1, 0, RLX_KIND_POOL, F32, infer_global_pool, rlx_grad_global_pool),
    [RLX_OP_RANDOM_UNIFORM] = ROW("random_uniform", 0, 0, RLX_OPF_RANDOM, RLX_KIND_RANDOM, F32, infer_leaf, NOGRAD),
    [RLX_OP_RANDOM_NORMAL] = ROW("random_normal", 0, 0, RLX_OPF_RANDOM, RLX_KIND_RANDOM, F32, infer_leaf, NOGRAD),
    [RLX_OP_DROPOUT] = ROW("dropout", 1, 1, RLX_OPF_RANDOM, RLX_KIND_RANDOM, FOLLOW, infer_dropout, NOGRAD),
    [RLX_OP_BATCH_NORM] = DECOMP("batch_norm", 5, 5, 0, RLX_KIND_NORM, LOW, RLX_LAYOUT_ATTR_NONE, rlx_infer_batch_norm,
                                 rlx_decompose_batch_norm, rlx_grad_decomposed),
    [RLX_OP_CACHE_WRITE] =
        ROW("cache_write", 3, 3, RLX_OPF_STATEFUL, RLX_KIND_STATE, RLX_AMP_STATE, infer_cache_write, NOGRAD),
    [RLX_OP_OPTIMIZER_STEP] =
        ROW("optimizer_step", 5, 7, RLX_OPF_STATEFUL, RLX_KIND_STATE, RLX_AMP_STATE, infer_optimizer_step, NOGRAD),
    /* fused ops (inference in ops_fused.c, decompositions in decompose.c) */
    [RLX_OP_MATMUL_BIAS_ACT] = FUSED("matmul_bias_act", 2, 3, 0, RLX_KIND_MATMUL, LOW, RLX_LAYOUT_ATTR_NONE,
                                     rlx_infer_matmul_bias_act, rlx_decompose_matmul_bias_act),
    [RLX_OP_ADD_LAYER_NORM] = FUSED("add_layer_norm", 2, 4, 0, RLX_KIND_NORM, LOW, RLX_LAYOUT_ATTR_NONE,
                                    rlx_infer_add_norm, rlx_decompose_add_norm),
    [RLX_OP_ADD_RMS_NORM] = FUSED("add_rms_norm", 2, 3, 0, RLX_KIND_NORM, LOW, RLX_LAYOUT_ATTR_NONE, rlx_infer_add_norm,
                                  rlx_decompose_add_norm),
    [RLX_OP_SWIGLU] =
        FUSED("swiglu", 3, 3, 0, RLX_KIND_MATMUL, LOW, RLX_LAYOUT_ATTR_NONE, rlx_infer_swiglu, rlx_decompose_swiglu),
    [RLX_OP_ATTENTION_BLOCK] = FUSED("attention_block", 5, 12, 0, RLX_KIND_ATTENTION, LOW, RLX_LAYOUT_ATTR_NONE,
                                     rlx_infer_attention_block, rlx_decompose_attention_block),
    [RLX_OP_ELEMENTWISE_CHAIN] =
        FUSED("elementwise_chain", 1, RLX_MAX_INPUTS, RLX_OPF_ELEMENTWISE, RLX_KIND_ELEMENTWISE, RLX_AMP_CHAIN,
              RLX_LAYOUT_ATTR_NONE, rlx_infer_elementwise_chain, rlx_decompose_elementwise_chain),
    [RLX_OP_SOFTMAX_SCALE_MASK] = FUSED("softmax_scale_mask", 1, 2, 0, RLX_KIND_NORM, LOW, RLX_LAYOUT_ATTR_NONE,
                                        rlx_infer_softmax_scale_mask, rlx_decompose_softmax_scale_mask),
    [RLX_OP_CONV_BIAS_ACT] = FUSED("conv_bias_act", 2, 4, 0, RLX_KIND_CONV, LOW, RLX_LAYOUT_ATTR_CONV,
                                   rlx_infer_conv_bias_act, rlx_decompose_conv_bias_act),
    [RLX_OP_ADD_RMS_NORM_KEEP] = FUSED("add_rms_norm_keep", 2, 3, 0, RLX_KIND_NORM, LOW, RLX_LAYOUT_ATTR_NONE,
                                       rlx_infer_add_norm, rlx_decompose_add_rms_norm_keep),
    [RLX_OP_MATMUL_INTEGER_SCALE] =
        FUSED("matmul_integer_scale", 5, 6, 0, RLX_KIND_MATMUL, RLX_AMP_F32, RLX_LAYOUT_ATTR_NONE,
              rlx_infer_matmul_integer_scale, rlx_decompose_matmul_integer_scale),
    [RLX_OP_ATTENTION_GRAD] = FUSED("attention_grad", 5, 6, 0, RLX_KIND_ATTENTION, LOW, RLX_LAYOUT_ATTR_NONE,
                                    infer_attention_grad, rlx_decompose_attention_grad),
    [RLX_OP_NORM_GRAD] =
        FUSED("norm_grad", 2, 3, 0, RLX_KIND_NORM, LOW, RLX_LAYOUT_ATTR_NONE, infer_norm_grad, rlx_decompose_norm_grad),
    [RLX_OP_QLINEAR_MATMUL] = FUSED("qlinear_matmul", 5, 10, 0, RLX_KIND_MATMUL, RLX_AMP_F32, RLX_LAYOUT_ATTR_NONE,
                                    rlx_infer_qlinear_matmul, rlx_decompose_qlinear_matmul),
    [RLX_OP_QKV_HEADS] = FUSED("qkv_heads", 1, 5, RLX_OPF_AUX_KEEP_DTYPE, RLX_KIND_ATTENTION, LOW, RLX_LAYOUT_ATTR_NONE,
                               rlx_infer_qkv_heads, rlx_decompose_qkv_heads),
    [RLX_OP_GLU] =
        FUSED("glu", 1, 1, 0, RLX_KIND_ELEMENTWISE, LOW, RLX_LAYOUT_ATTR_NONE, rlx_infer_glu, rlx_decompose_glu),
    [RLX_OP_PROJECTION] = FUSED("projection", 2, 4, 0, RLX_KIND_MATMUL, LOW, RLX_LAYOUT_ATTR_NONE, rlx_infer_projection,
                                rlx_decompose_projection),
};

const rlx_op_info *rlx_op_info_of(rlx_op op)
{
    if ((unsigned)op >= RLX_OP_COUNT || !op_table[op].name)
        return NULL;
    return &op_table[op];
}

const char *rlx_op_name(rlx_op op)
{
    const rlx_op_info *i = rlx_op_info_of(op);
    return i ? i->name : "?";
}

static rlx_op_kind kind_of(rlx_op op)
{
    const rlx_op_info *i = rlx_op_info_of(op);
    return i ? i->kind : RLX_KIND_UNSET;
}

bool rlx_op_is_unary(rlx_op op) { return kind_of(op) == RLX_KIND_UNARY; }
bool rlx_op_is_binary(rlx_op op) { return kind_of(op) == RLX_KIND_BINARY; }

rlx_op rlx_act_op(rlx_act a)
{
    for (int op = 0; a != RLX_ACT_NONE && op < RLX_OP_COUNT; op++)
        if (op_table[op].act == a)
            return (rlx_op)op;
    return RLX_OP_COUNT;
}

int rlx_node_layout(const rlx_node_data *n)
{
    const rlx_op_info *i = rlx_op_info_of(n->op);
    switch (i ? i->layout : RLX_LAYOUT_ATTR_NONE) {
    case RLX_LAYOUT_ATTR_CONV: return n->attrs.conv.layout;
    case RLX_LAYOUT_ATTR_POOL: return n->attrs.pool.layout;
    default: return RLX_LAYOUT_NCHW;
    }
}

int rlx_conv_residual_input(const rlx_node_data *n)
{
    return n->op == RLX_OP_CONV_BIAS_ACT && n->attrs.conv.has_residual ? 2 + (n->attrs.conv.has_bias != 0) : -1;
}

int rlx_node_inplace_input(const rlx_node_data *n)
{
    return n->op == RLX_OP_CROSS_ENTROPY_GRAD ? 0 : rlx_conv_residual_input(n);
}

bool rlx_node_is_view(const rlx_graph *g, rlx_node id, size_t *byte_offset)
{
    const rlx_node_data *n = &g->nodes[id];
    const rlx_op_info *i = rlx_op_info_of(n->op);
    if (byte_offset)
        *byte_offset = 0;
    if (n->n_in < 1 || !i || !(i->flags & RLX_OPF_VIEW) || !i->view)
        return false;
    return i->view(g, n, byte_offset);
}

bool rlx_node_is_no_op(const rlx_graph *g, rlx_node id)
{
    size_t off;
    return rlx_node_bytes(&g->nodes[id]) == 0 || rlx_node_is_view(g, id, &off);
}

void rlx_rope_table(double *tab, int64_t S, int64_t D, double theta, int64_t offset)
{
    int64_t half = D / 2;
    for (int64_t s = 0; s < S; s++)
        for (int64_t i = 0; i < half; i++) {
            double a = (double)(offset + s) * pow(theta, -2.0 * (double)i / (double)D);
            tab[(s * half + i) * 2] = cos(a);
            tab[(s * half + i) * 2 + 1] = sin(a);
        }
}
