/* onnx_fold.c - the import-time constant evaluator.  Shape computations in
 * ONNX models (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, and the
 * arithmetic between them) work on small integer tensors whose values are
 * known once the input shapes are bound; evaluating them here turns
 * Reshape/Expand/Slice targets into static attributes.  Host code for the
 * elementwise ops and the data-movement ops the handlers fold. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "ir/op_math.h" /* the kernels' scalar math: a folded value is what the op computes at run time */

bool oxh_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out)
{
    int n = na > nb ? na : nb;
    if (n > RLX_MAX_DIMS)
        return false;
    for (int i = 0; i < n; i++) {
        int64_t da = i - (n - na) >= 0 ? a[i - (n - na)] : 1;
        int64_t db = i - (n - nb) >= 0 ? b[i - (n - nb)] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return true;
}

/* Element offset in t for the output index `idx` (rank n) under broadcasting. */
static int64_t bcast_offset(const ox_tensor *t, int n, const int64_t *idx)
{
    int64_t off = 0, stride = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        int oi = i + (n - t->ndim);
        int64_t v = t->dims[i] == 1 ? 0 : idx[oi];
        off += v * stride;
        stride *= t->dims[i];
    }
    return off;
}

static void next_index(int n, const int64_t *dims, int64_t *idx)
{
    for (int i = n - 1; i >= 0; i--) {
        if (++idx[i] < dims[i])
            return;
        idx[i] = 0;
    }
}

/* The IR op that computes a fold op (the same scalar math as the kernels);
 * -1 for LessOrEqual and GreaterOrEqual, which the IR writes otherwise. */
static int ir_op(oxh_op op)
{
    switch (op) {
    case OXH_ADD: return RLX_OP_ADD;
    case OXH_SUB: return RLX_OP_SUB;
    case OXH_MUL: return RLX_OP_MUL;
    case OXH_DIV: return RLX_OP_DIV;
    case OXH_POW: return RLX_OP_POW;
    case OXH_MOD: return RLX_OP_MOD;
    case OXH_MAX: return RLX_OP_MAX;
    case OXH_MIN: return RLX_OP_MIN;
    case OXH_EQ: return RLX_OP_EQUAL;
    case OXH_LT: return RLX_OP_LESS;
    case OXH_GT: return RLX_OP_GREATER;
    case OXH_AND: return RLX_OP_AND;
    case OXH_OR: return RLX_OP_OR;
    case OXH_XOR: return RLX_OP_XOR;
    case OXH_NEG: return RLX_OP_NEG;
    case OXH_ABS: return RLX_OP_ABS;
    case OXH_SQRT: return RLX_OP_SQRT;
    case OXH_FLOOR: return RLX_OP_FLOOR;
    case OXH_CEIL: return RLX_OP_CEIL;
    case OXH_SIGN: return RLX_OP_SIGN;
    case OXH_NOT: return RLX_OP_NOT;
    case OXH_RELU: return RLX_OP_RELU;
    case OXH_EXP: return RLX_OP_EXP;
    case OXH_LOG: return RLX_OP_LOG;
    case OXH_RECIP: return RLX_OP_RECIPROCAL;
    default: return -1;
    }
}

ox_tensor *oxh_binary(oxh_op op, const ox_tensor *a, const ox_tensor *b, int fmod_flag)
{
    int n;
    int64_t dims[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0};
    if (!oxh_broadcast(a->ndim, a->dims, b->ndim, b->dims, &n, dims))
        return NULL;
    bool cmp = op == OXH_EQ || op == OXH_LT || op == OXH_GT || op == OXH_LE || op == OXH_GE;
    rlx_dtype ot = cmp ? RLX_BOOL : a->dtype;
    ox_tensor *y = ox_tensor_new(ot, n, dims);
    if (!y)
        return NULL;
    bool fl = ox_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, dims, idx)) {
        int64_t ia = bcast_offset(a, n, idx), ib = bcast_offset(b, n, idx);
        if (fl) {
            double x = ox_get_f(a, ia), z = ox_get_f(b, ib), r = 0;
            switch (op) {
            case OXH_LE: r = x <= z; break;
            case OXH_GE: r = x >= z; break;
            case OXH_AND:
            case OXH_OR:
            case OXH_XOR: r = 0; break; /* bool only */
            default: r = rlx_binary_f64(ir_op(op), x, z, fmod_flag); break;
            }
            ox_set_f(y, i, r);
        } else {
            int64_t x = ox_get_i(a, ia), z = ox_get_i(b, ib), r = 0;
            if ((op == OXH_DIV || op == OXH_MOD) && (z == 0 || (z == -1 && x == INT64_MIN)))
                r = 0;
            else if (op == OXH_LE)
                r = x <= z;
            else if (op == OXH_GE)
                r = x >= z;
            else
                rlx_binary_i64(ir_op(op), x, z, fmod_flag, &r);
            ox_set_i(y, i, r);
        }
    }
    return y;
}

ox_tensor *oxh_unary(oxh_op op, const ox_tensor *a)
{
    ox_tensor *y = ox_tensor_new(a->dtype, a->ndim, a->dims);
    if (!y)
        return NULL;
    bool fl = ox_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < a->numel; i++) {
        if (fl) {
            double x = ox_get_f(a, i), r = x;
            if (ir_op(op) >= 0)
                r = rlx_unary_f64(ir_op(op), x);
            ox_set_f(y, i, r);
        } else {
            int64_t x = ox_get_i(a, i), r = x;
            switch (op) {
            case OXH_NEG:
            case OXH_ABS:
            case OXH_SIGN:
            case OXH_NOT:
            case OXH_RELU: r = rlx_unary_i64(ir_op(op), x); break;
            case OXH_SQRT: r = x > 0 ? (int64_t)sqrt((double)x) : 0; break;
            default: break;
            }
            ox_set_i(y, i, r);
        }
    }
    return y;
}

ox_tensor *oxh_cast(const ox_tensor *a, rlx_dtype to)
{
    ox_tensor *y = ox_tensor_new(to, a->ndim, a->dims);
    if (!y)
        return NULL;
    bool from_f = ox_dtype_is_float(a->dtype), to_f = ox_dtype_is_float(to);
    for (int64_t i = 0; i < a->numel; i++) {
        if (from_f || to_f)
            ox_set_f(y, i, ox_get_f(a, i));
        else
            ox_set_i(y, i, ox_get_i(a, i));
    }
    return y;
}

ox_tensor *oxh_where(const ox_tensor *c, const ox_tensor *a, const ox_tensor *b)
{
    int n1, n;
    int64_t d1[RLX_MAX_DIMS], dims[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0};
    if (!oxh_broadcast(c->ndim, c->dims, a->ndim, a->dims, &n1, d1))
        return NULL;
    if (!oxh_broadcast(n1, d1, b->ndim, b->dims, &n, dims))
        return NULL;
    if (a->dtype != b->dtype)
        return NULL;
    ox_tensor *y = ox_tensor_new(a->dtype, n, dims);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, dims, idx)) {
        bool t = ox_get_i(c, bcast_offset(c, n, idx)) != 0;
        const ox_tensor *s = t ? a : b;
        memcpy((char *)y->data + (size_t)i * es, (const char *)s->data + (size_t)bcast_offset(s, n, idx) * es, es);
    }
    return y;
}

ox_tensor *oxh_expand(const ox_tensor *a, int nd, const int64_t *dims)
{
    int n;
    int64_t od[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0};
    if (!oxh_broadcast(a->ndim, a->dims, nd, dims, &n, od))
        return NULL;
    ox_tensor *y = ox_tensor_new(a->dtype, n, od);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, od, idx))
        memcpy((char *)y->data + (size_t)i * es, (const char *)a->data + (size_t)bcast_offset(a, n, idx) * es, es);
    return y;
}

ox_tensor *oxh_transpose(const ox_tensor *a, const int *perm)
{
    int64_t od[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0}, st[RLX_MAX_DIMS];
    int n = a->ndim;
    int64_t s = 1;
    for (int i = n - 1; i >= 0; i--) {
        st[i] = s;
        s *= a->dims[i];
    }
    for (int i = 0; i < n; i++)
        od[i] = a->dims[perm[i]];
    ox_tensor *y = ox_tensor_new(a->dtype, n, od);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, od, idx)) {
        int64_t off = 0;
        for (int k = 0; k < n; k++)
            off += idx[k] * st[perm[k]];
        memcpy((char *)y->data + (size_t)i * es, (const char *)a->data + (size_t)off * es, es);
    }
    return y;
}

/* starts/steps per axis, already clamped; out dims given. */
ox_tensor *oxh_slice(const ox_tensor *a, const int64_t *start, const int64_t *step, const int64_t *odims)
{
    int n = a->ndim;
    int64_t idx[RLX_MAX_DIMS] = {0}, st[RLX_MAX_DIMS];
    int64_t s = 1;
    for (int i = n - 1; i >= 0; i--) {
        st[i] = s;
        s *= a->dims[i];
    }
    ox_tensor *y = ox_tensor_new(a->dtype, n, odims);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, odims, idx)) {
        int64_t off = 0;
        for (int k = 0; k < n; k++)
            off += (start[k] + idx[k] * step[k]) * st[k];
        memcpy((char *)y->data + (size_t)i * es, (const char *)a->data + (size_t)off * es, es);
    }
    return y;
}

ox_tensor *oxh_concat(ox_tensor *const *xs, int n, int axis)
{
    int64_t od[RLX_MAX_DIMS];
    const ox_tensor *a = xs[0];
    for (int i = 0; i < a->ndim; i++)
        od[i] = a->dims[i];
    od[axis] = 0;
    for (int k = 0; k < n; k++) {
        if (xs[k]->ndim != a->ndim || xs[k]->dtype != a->dtype)
            return NULL;
        for (int i = 0; i < a->ndim; i++)
            if (i != axis && xs[k]->dims[i] != a->dims[i])
                return NULL;
        od[axis] += xs[k]->dims[axis];
    }
    ox_tensor *y = ox_tensor_new(a->dtype, a->ndim, od);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= od[i];
    for (int i = axis + 1; i < a->ndim; i++)
        inner *= od[i];
    char *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int k = 0; k < n; k++) {
            size_t chunk = (size_t)(xs[k]->dims[axis] * inner) * es;
            memcpy(dst, (const char *)xs[k]->data + (size_t)o * chunk, chunk);
            dst += chunk;
        }
    return y;
}

/* numpy take; false on an out-of-range index. */
ox_tensor *oxh_gather(const ox_tensor *a, const ox_tensor *ind, int axis)
{
    int64_t od[RLX_MAX_DIMS];
    int n = 0;
    if (a->ndim + ind->ndim - 1 > RLX_MAX_DIMS)
        return NULL;
    for (int i = 0; i < axis; i++)
        od[n++] = a->dims[i];
    for (int i = 0; i < ind->ndim; i++)
        od[n++] = ind->dims[i];
    for (int i = axis + 1; i < a->ndim; i++)
        od[n++] = a->dims[i];
    ox_tensor *y = ox_tensor_new(a->dtype, n, od);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    int64_t outer = 1, inner = 1, d = a->dims[axis];
    for (int i = 0; i < axis; i++)
        outer *= a->dims[i];
    for (int i = axis + 1; i < a->ndim; i++)
        inner *= a->dims[i];
    char *dst = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ind->numel; j++) {
            int64_t k = ox_get_i(ind, j);
            if (k < 0)
                k += d;
            if (k < 0 || k >= d) {
                ox_tensor_free(y);
                return NULL;
            }
            memcpy(dst, (const char *)a->data + (size_t)((o * d + k) * inner) * es, (size_t)inner * es);
            dst += (size_t)inner * es;
        }
    return y;
}

/* -------------------------------------------------------- fold dispatch */

static const struct {
    const char *name;
    oxh_op op;
    int arity;
} fold_ops[] = {
    {"Add", OXH_ADD, 2},
    {"Sub", OXH_SUB, 2},
    {"Mul", OXH_MUL, 2},
    {"Div", OXH_DIV, 2},
    {"Pow", OXH_POW, 2},
    {"Mod", OXH_MOD, 2},
    {"Equal", OXH_EQ, 2},
    {"Less", OXH_LT, 2},
    {"Greater", OXH_GT, 2},
    {"LessOrEqual", OXH_LE, 2},
    {"GreaterOrEqual", OXH_GE, 2},
    {"And", OXH_AND, 2},
    {"Or", OXH_OR, 2},
    {"Xor", OXH_XOR, 2},
    {"Neg", OXH_NEG, 1},
    {"Abs", OXH_ABS, 1},
    {"Floor", OXH_FLOOR, 1},
    {"Ceil", OXH_CEIL, 1},
    {"Sign", OXH_SIGN, 1},
    {"Not", OXH_NOT, 1},
    {"Relu", OXH_RELU, 1},
    {"Sqrt", OXH_SQRT, 1},
    {"Exp", OXH_EXP, 1},
    {"Log", OXH_LOG, 1},
    {"Reciprocal", OXH_RECIP, 1},
    {"Max", OXH_MAX, -1},
    {"Min", OXH_MIN, -1},
    {"Sum", OXH_ADD, -1},
};

rlx_status ox_try_fold(ox_node *n)
{
    const char *op = n->p->op_type;
    if (n->n_in < 1 || n->n_out < 1)
        return RLX_ERR_UNSUPPORTED;
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i] || !n->in[i]->k)
            return RLX_ERR_UNSUPPORTED;
        if (n->in[i]->k->numel > OX_FOLD_MAX_NUMEL)
            return RLX_ERR_UNSUPPORTED;
    }
    for (size_t k = 0; k < sizeof fold_ops / sizeof fold_ops[0]; k++) {
        if (strcmp(op, fold_ops[k].name))
            continue;
        int ar = fold_ops[k].arity;
        if (ar > 0 && n->n_in != ar)
            return RLX_ERR_UNSUPPORTED;
        ox_tensor *y;
        if (ar == 1) {
            y = oxh_unary(fold_ops[k].op, n->in[0]->k);
        } else {
            if (n->in[0]->k->dtype != n->in[n->n_in - 1]->k->dtype && fold_ops[k].op != OXH_POW)
                return RLX_ERR_UNSUPPORTED;
            y = ox_tensor_clone(n->in[0]->k);
            for (int i = 1; y && i < n->n_in; i++) {
                ox_tensor *z = oxh_binary(fold_ops[k].op, y, n->in[i]->k, (int)ox_attr_i(n, "fmod", 0));
                ox_tensor_free(y);
                y = z;
            }
        }
        if (!y)
            return RLX_ERR_UNSUPPORTED;
        return ox_out_const(n, 0, y);
    }
    if (!strcmp(op, "Where") && n->n_in == 3) {
        ox_tensor *y = oxh_where(n->in[0]->k, n->in[1]->k, n->in[2]->k);
        if (!y)
            return RLX_ERR_UNSUPPORTED;
        return ox_out_const(n, 0, y);
    }
    return RLX_ERR_UNSUPPORTED;
}
