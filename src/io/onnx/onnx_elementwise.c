/* onnx_elementwise.c - elementwise ONNX ops: the unary and binary ops that
 * map one-to-one onto a builder (the builder sits in the op's row), the
 * variadic ones (Sum, Max, Min, Mean), Pow, Mod, Where, Cast/CastLike,
 * Identity, Clip, BitShift, the Bitwise ops, and the activations and math functions RLX
 * has no primitive for, built from primitives. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"
#include "io/onnx/onnx_string.h"

#define G (n->c->g)

/* Ops that map one-to-one onto a builder: the builder is in their row. */
static rlx_status h_unary(onnx_node *n) { return onnx_out_node(n, 0, n->op->unary(n->c->g, onnx_in(n, 0))); }

static rlx_status h_binary(onnx_node *n)
{
    if (n->n_in < 1)
        return onnx_fail(n, RLX_ERR_FORMAT, "needs inputs");
    if (onnx_value_is_string(n->in[0]) || (n->n_in > 1 && onnx_value_is_string(n->in[1])))
        return onnx_string_equal(n); /* only Equal's row takes strings */
    rlx_node acc = onnx_in(n, 0);
    for (int i = 1; i < n->n_in; i++)
        acc = n->op->binary(n->c->g, acc, onnx_in(n, i));
    if (n->n_in == 1)
        return onnx_pass_through(n, 0, 0);
    return onnx_out_node(n, 0, acc);
}

static rlx_node le(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_not(g, rlx_greater(g, a, b)); }

static rlx_node ge(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_not(g, rlx_less(g, a, b)); }

static rlx_status h_mean(onnx_node *n)
{
    rlx_node acc = onnx_in(n, 0);
    for (int i = 1; i < n->n_in; i++)
        acc = rlx_add(n->c->g, acc, onnx_in(n, i));
    if (n->n_in > 1)
        acc = rlx_div(n->c->g, acc, onnx_scalar(n, onnx_in_dtype(n, 0), n->n_in));
    return onnx_out_node(n, 0, acc);
}

static rlx_status h_pow(onnx_node *n)
{
    rlx_node a = onnx_in(n, 0), b = onnx_in(n, 1);
    rlx_dtype ta = onnx_in_dtype(n, 0), tb = onnx_in_dtype(n, 1);
    if (ta != tb) {
        if (onnx_dtype_is_float(ta))
            b = rlx_cast(n->c->g, b, ta);
        else {
            /* integer base, float exponent: compute in the exponent's type */
            rlx_node y = rlx_pow(n->c->g, rlx_cast(n->c->g, a, tb), b);
            return onnx_out_node(n, 0, rlx_cast(n->c->g, y, ta));
        }
    }
    return onnx_out_node(n, 0, rlx_pow(n->c->g, a, b));
}

static rlx_status h_mod(onnx_node *n)
{
    return onnx_out_node(n, 0, rlx_mod(n->c->g, onnx_in(n, 0), onnx_in(n, 1), (int)onnx_attr_i(n, "fmod", 0)));
}

static rlx_status h_where(onnx_node *n)
{
    return onnx_out_node(n, 0, rlx_where(n->c->g, onnx_in(n, 0), onnx_in(n, 1), onnx_in(n, 2)));
}

static rlx_status h_cast(onnx_node *n)
{
    rlx_dtype to = RLX_F32;
    bool to_string;
    if (!strcmp(n->p->op_type, "CastLike")) {
        to_string = onnx_value_is_string(n->in[1]);
        if (!to_string)
            to = onnx_in_dtype(n, 1);
    } else {
        int64_t ot = onnx_attr_i(n, "to", 0);
        to_string = ot == ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
        if (!to_string && !onnx_dtype_from_onnx((int)ot, &to))
            return onnx_fail(n, RLX_ERR_UNSUPPORTED, "cast to %s is not supported", onnx_type_name((int)ot));
    }
    if (to_string || onnx_value_is_string(n->in[0]))
        return onnx_string_cast(n, to_string, to);
    if (n->in[0]->k && n->in[0]->k->numel <= ONNX_FOLD_MAX_NUMEL)
        return onnx_out_const(n, 0, onnx_fold_cast(n->in[0]->k, to));
    if (onnx_in_dtype(n, 0) == to)
        return onnx_pass_through(n, 0, 0);
    return onnx_out_node(n, 0, rlx_cast(n->c->g, onnx_in(n, 0), to));
}

static rlx_status h_identity(onnx_node *n)
{
    if (n->in[0]->kind == ONNX_KIND_TENSOR)
        return onnx_pass_through(n, 0, 0);
    onnx_value r = {.node = -1}; /* a sequence or an optional, as it is */
    rlx_status st = onnx_value_copy(n->c, &r, n->in[0]);
    return st == RLX_OK ? onnx_out_value(n, 0, &r) : onnx_fail(n, st, "cannot copy the input");
}

static rlx_status h_clip(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    rlx_dtype t = onnx_in_dtype(n, 0);
    if (n->opset < 11) {
        return onnx_out_node(n, 0, rlx_clip(g, x, onnx_attr_f(n, "min", -INFINITY), onnx_attr_f(n, "max", INFINITY)));
    }
    double lo = -INFINITY, hi = INFINITY;
    bool klo = n->n_in < 2 || !n->in[1] || onnx_const_scalar(n, 1, &lo);
    bool khi = n->n_in < 3 || !n->in[2] || onnx_const_scalar(n, 2, &hi);
    if (klo && khi) {
        if (!onnx_dtype_is_float(t)) {
            /* integer clip: bounds through max/min keep exact values */
            rlx_node y = x;
            if (n->n_in >= 2 && n->in[1])
                y = rlx_max(g, y, onnx_in(n, 1));
            if (n->n_in >= 3 && n->in[2])
                y = rlx_min(g, y, onnx_in(n, 2));
            if (y == x)
                return onnx_pass_through(n, 0, 0);
            return onnx_out_node(n, 0, y);
        }
        return onnx_out_node(n, 0, rlx_clip(g, x, lo, hi));
    }
    rlx_node y = x;
    if (n->n_in >= 2 && n->in[1])
        y = rlx_max(g, y, onnx_in(n, 1));
    if (n->n_in >= 3 && n->in[2])
        y = rlx_min(g, y, onnx_in(n, 2));
    return onnx_out_node(n, 0, y);
}

/* Activations built from primitives. */
static rlx_status h_activation(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    const char *op = n->p->op_type;
    rlx_node x = onnx_in(n, 0);
    rlx_dtype t = onnx_in_dtype(n, 0);
#define S(v) onnx_scalar(n, t, (v))
    rlx_node y = -1;
    if (!strcmp(op, "LeakyRelu")) {
        double a = onnx_attr_f(n, "alpha", 0.01);
        y = rlx_where(g, rlx_less(g, x, S(0)), rlx_mul(g, x, S(a)), x);
    } else if (!strcmp(op, "PRelu")) {
        rlx_node slope = onnx_in(n, 1);
        int64_t xd[RLX_MAX_DIMS], sd[RLX_MAX_DIMS];
        int xr = onnx_shape(n, x, xd), sr = onnx_shape(n, slope, sd);
        /* older models give a per-channel slope [C] for x [N, C, ...] */
        if (sr == 1 && xr > 2 && sd[0] == xd[1] && (n->opset < 7 || sd[0] != xd[xr - 1])) {
            int64_t nd[RLX_MAX_DIMS];
            for (int i = 0; i < xr - 1; i++)
                nd[i] = i == 0 ? sd[0] : 1;
            slope = rlx_reshape(g, slope, xr - 1, nd);
        }
        y = rlx_where(g, rlx_less(g, x, S(0)), rlx_mul(g, x, slope), x);
    } else if (!strcmp(op, "Elu")) {
        double a = onnx_attr_f(n, "alpha", 1.0);
        y = rlx_where(g, rlx_greater(g, x, S(0)), x, rlx_mul(g, S(a), rlx_sub(g, rlx_exp(g, x), S(1))));
    } else if (!strcmp(op, "Selu")) {
        double a = onnx_attr_f(n, "alpha", 1.67326319217681884765625),
               gm = onnx_attr_f(n, "gamma", 1.05070102214813232421875);
        y = rlx_mul(g, S(gm),
                    rlx_where(g, rlx_greater(g, x, S(0)), x, rlx_mul(g, S(a), rlx_sub(g, rlx_exp(g, x), S(1)))));
    } else if (!strcmp(op, "Celu")) {
        double a = onnx_attr_f(n, "alpha", 1.0);
        rlx_node e = rlx_mul(g, S(a), rlx_sub(g, rlx_exp(g, rlx_div(g, x, S(a))), S(1)));
        y = rlx_add(g, rlx_max(g, x, S(0)), rlx_min(g, e, S(0)));
    } else if (!strcmp(op, "ThresholdedRelu")) {
        double a = onnx_attr_f(n, "alpha", 1.0);
        y = rlx_where(g, rlx_greater(g, x, S(a)), x, S(0));
    } else if (!strcmp(op, "HardSigmoid")) {
        double a = onnx_attr_f(n, "alpha", 0.2), b = onnx_attr_f(n, "beta", 0.5);
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
        int pos = (int)onnx_attr_i(n, "detect_positive", 1), neg = (int)onnx_attr_i(n, "detect_negative", 1);
        if (pos && neg)
            y = rlx_equal(g, rlx_abs(g, x), S(INFINITY));
        else if (pos)
            y = rlx_equal(g, x, S(INFINITY));
        else if (neg)
            y = rlx_equal(g, x, S(-INFINITY));
        else
            y = rlx_less(g, x, S(-INFINITY)); /* all false */
    } else if (!strcmp(op, "Shrink")) {
        double l = onnx_attr_f(n, "lambd", 0.5), b = onnx_attr_f(n, "bias", 0.0);
        y = rlx_where(g, rlx_less(g, x, S(-l)), rlx_add(g, x, S(b)),
                      rlx_where(g, rlx_greater(g, x, S(l)), rlx_sub(g, x, S(b)), S(0)));
    } else if (!strcmp(op, "Gelu")) {
        char buf[16];
        const char *ap = onnx_attr_s(n, "approximate", "none", buf, sizeof buf);
        y = !strcmp(ap, "tanh") ? rlx_gelu_tanh(g, x) : rlx_gelu(g, x);
    }
#undef S
    return onnx_out_node(n, 0, y);
}

/* BitShift on unsigned types (held widened): multiply or divide by 2^s. */
static rlx_status h_bitshift(onnx_node *n)
{
    char buf[16];
    const char *dir = onnx_attr_s(n, "direction", "", buf, sizeof buf);
    rlx_dtype t = onnx_in_dtype(n, 0);
    if (onnx_dtype_is_float(t))
        return onnx_fail(n, RLX_ERR_DTYPE, "BitShift on floats");
    rlx_node x = rlx_cast(G, onnx_in(n, 0), RLX_I64), s = rlx_cast(G, onnx_in(n, 1), RLX_F64);
    rlx_node p = rlx_cast(G, rlx_pow(G, onnx_scalar(n, RLX_F64, 2), s), RLX_I64);
    rlx_node y;
    if (!strcmp(dir, "LEFT")) {
        y = rlx_mul(G, x, p);
        double m = t == RLX_U8 ? 256 : (t == RLX_I32 ? 65536 : 0);
        if (m > 0)
            y = rlx_mod(G, y, onnx_scalar(n, RLX_I64, m), 0);
    } else if (!strcmp(dir, "RIGHT"))
        y = rlx_div(G, x, p);
    else
        return onnx_fail(n, RLX_ERR_FORMAT, "direction must be LEFT or RIGHT");
    return onnx_out_node(n, 0, rlx_cast(G, y, t));
}

/* A 256 x 256 table of op(a, b) over bytes, indexed a * 256 + b: unsigned
 * bytes (u8), or signed (i8, both offset by 128). */
static rlx_node byte_table(onnx_node *n, char op, bool is_signed)
{
    int64_t len = 65536;
    onnx_tensor *k = onnx_tensor_new(is_signed ? RLX_I8 : RLX_U8, 1, &len);
    if (!k)
        return -1;
    for (int i = 0; i < 256; i++)
        for (int j = 0; j < 256; j++) {
            int a = is_signed ? i - 128 : i, b = is_signed ? j - 128 : j;
            int v = op == '&' ? (a & b) : op == '|' ? (a | b) : (a ^ b);
            if (is_signed)
                ((int8_t *)k->data)[i * 256 + j] = (int8_t)v;
            else
                ((uint8_t *)k->data)[i * 256 + j] = (uint8_t)v;
        }
    return onnx_const_node(n, k);
}

/* BitwiseAnd/Or/Xor/Not (opset 18) from arithmetic: Not is -1 - x (255 - x
 * for u8); the others split both operands (as i64) into bytes, low first
 * (x mod 256, then the exact quotient), look each pair up in a byte table
 * and add the results times their place values.  The top byte of a signed
 * type stays signed, so no sum overflows.  uint16/uint32/uint64, held
 * widened, are right for And/Or/Xor but not for Not. */
static rlx_status h_bitwise(onnx_node *n)
{
    const char *op = n->p->op_type;
    rlx_dtype t = onnx_in_dtype(n, 0);
    int nbytes = t == RLX_I64 ? 8 : t == RLX_I32 ? 4 : (t == RLX_I8 || t == RLX_U8) ? 1 : 0;
    if (!nbytes)
        return onnx_fail(n, RLX_ERR_DTYPE, "%s takes integers, got %s", op, rlx_dtype_name(t));
    if (!strcmp(op, "BitwiseNot"))
        return onnx_out_node(n, 0, rlx_sub(G, onnx_scalar(n, t, t == RLX_U8 ? 255 : -1), onnx_in(n, 0)));
    if (onnx_in_dtype(n, 1) != t)
        return onnx_fail(n, RLX_ERR_DTYPE, "operands of different types (%s and %s)", rlx_dtype_name(t),
                         rlx_dtype_name(onnx_in_dtype(n, 1)));
    char c = !strcmp(op, "BitwiseAnd") ? '&' : !strcmp(op, "BitwiseOr") ? '|' : '^';
    rlx_node a = rlx_cast(G, onnx_in(n, 0), RLX_I64), b = rlx_cast(G, onnx_in(n, 1), RLX_I64);
    rlx_node b256 = onnx_scalar(n, RLX_I64, 256), y = -1;
    for (int j = 0; j < nbytes; j++) {
        bool top_signed = j == nbytes - 1 && t != RLX_U8;
        rlx_node ca = a, cb = b;
        if (!top_signed) {
            ca = rlx_mod(G, a, b256, 0);
            cb = rlx_mod(G, b, b256, 0);
            a = rlx_div(G, rlx_sub(G, a, ca), b256);
            b = rlx_div(G, rlx_sub(G, b, cb), b256);
        } else {
            ca = rlx_add(G, ca, onnx_scalar(n, RLX_I64, 128));
            cb = rlx_add(G, cb, onnx_scalar(n, RLX_I64, 128));
        }
        rlx_node idx = rlx_add(G, rlx_mul(G, ca, b256), cb);
        rlx_node r = rlx_cast(G, rlx_gather(G, byte_table(n, c, top_signed), idx, 0), RLX_I64);
        if (j)
            r = rlx_mul(G, r, onnx_scalar(n, RLX_I64, ldexp(1.0, 8 * j)));
        y = j ? rlx_add(G, y, r) : r;
    }
    return onnx_out_node(n, 0, rlx_cast(G, y, t));
}

/* Rows of the ops that map one-to-one onto a builder (binary: at least min inputs). */
#define UNARY(name, builder)                                    \
    {                                                           \
        (name), h_unary, 1, 0, 0, (builder), NULL, false, false \
    }
#define BINARY(name, builder, min)                                   \
    {                                                                \
        (name), h_binary, (min), 0, 0, NULL, (builder), false, false \
    }

const onnx_op onnx_elementwise_ops[] = {
    UNARY("Neg", rlx_neg),
    UNARY("Abs", rlx_abs),
    UNARY("Exp", rlx_exp),
    UNARY("Log", rlx_log),
    UNARY("Sqrt", rlx_sqrt),
    UNARY("Reciprocal", rlx_reciprocal),
    UNARY("Tanh", rlx_tanh),
    UNARY("Sigmoid", rlx_sigmoid),
    UNARY("Relu", rlx_relu),
    UNARY("Erf", rlx_erf),
    UNARY("Sin", rlx_sin),
    UNARY("Cos", rlx_cos),
    UNARY("Floor", rlx_floor),
    UNARY("Ceil", rlx_ceil),
    UNARY("Round", rlx_round),
    UNARY("Sign", rlx_sign),
    UNARY("Not", rlx_not),
    BINARY("Add", rlx_add, 2),
    BINARY("Sub", rlx_sub, 2),
    BINARY("Mul", rlx_mul, 2),
    BINARY("Div", rlx_div, 2),
    /* Equal takes strings too (opset 19): onnx_string_equal */
    {"Equal", h_binary, 2, 0, 0, NULL, rlx_equal, false, true},
    BINARY("Less", rlx_less, 2),
    BINARY("Greater", rlx_greater, 2),
    BINARY("LessOrEqual", le, 2),
    BINARY("GreaterOrEqual", ge, 2),
    BINARY("And", rlx_and, 2),
    BINARY("Or", rlx_or, 2),
    BINARY("Xor", rlx_xor, 2),
    BINARY("Max", rlx_max, 1),
    BINARY("Min", rlx_min, 1),
    BINARY("Sum", rlx_add, 1),
    ONNX_OP("Mean", h_mean, 1),
    ONNX_OP("Pow", h_pow, 2),
    ONNX_OP("Mod", h_mod, 2),
    ONNX_OP("Where", h_where, 3),
    ONNX_OP_STR("Cast", h_cast, 1),
    ONNX_OP_STR("CastLike", h_cast, 2),
    /* sequences, optionals and strings as they are */
    {"Identity", h_identity, 1, 0, 0, NULL, NULL, true, true},
    ONNX_OP("Clip", h_clip, 1),
    ONNX_OP("LeakyRelu", h_activation, 1),
    ONNX_OP("PRelu", h_activation, 2),
    ONNX_OP("Elu", h_activation, 1),
    ONNX_OP("Selu", h_activation, 1),
    ONNX_OP("Celu", h_activation, 1),
    ONNX_OP("ThresholdedRelu", h_activation, 1),
    ONNX_OP("HardSigmoid", h_activation, 1),
    ONNX_OP("HardSwish", h_activation, 1),
    ONNX_OP("Softplus", h_activation, 1),
    ONNX_OP("Softsign", h_activation, 1),
    ONNX_OP("Mish", h_activation, 1),
    ONNX_OP("Tan", h_activation, 1),
    ONNX_OP("Sinh", h_activation, 1),
    ONNX_OP("Cosh", h_activation, 1),
    ONNX_OP("Asinh", h_activation, 1),
    ONNX_OP("Acosh", h_activation, 1),
    ONNX_OP("Atanh", h_activation, 1),
    ONNX_OP("IsNaN", h_activation, 1),
    ONNX_OP("IsInf", h_activation, 1),
    ONNX_OP("Shrink", h_activation, 1),
    ONNX_OP("Gelu", h_activation, 1),
    ONNX_OP("Atan", h_activation, 1),
    ONNX_OP("Asin", h_activation, 1),
    ONNX_OP("Acos", h_activation, 1),
    ONNX_OP("BitShift", h_bitshift, 1),
    ONNX_OP("BitwiseAnd", h_bitwise, 2),
    ONNX_OP("BitwiseOr", h_bitwise, 2),
    ONNX_OP("BitwiseXor", h_bitwise, 2),
    ONNX_OP("BitwiseNot", h_bitwise, 1),
    ONNX_OP_END,
};
