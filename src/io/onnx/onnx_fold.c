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

bool onnx_fold_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out)
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
static int64_t bcast_offset(const onnx_tensor *t, int n, const int64_t *idx)
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
static int ir_op(onnx_fold_op op)
{
    switch (op) {
    case ONNX_FOLD_ADD: return RLX_OP_ADD;
    case ONNX_FOLD_SUB: return RLX_OP_SUB;
    case ONNX_FOLD_MUL: return RLX_OP_MUL;
    case ONNX_FOLD_DIV: return RLX_OP_DIV;
    case ONNX_FOLD_POW: return RLX_OP_POW;
    case ONNX_FOLD_MOD: return RLX_OP_MOD;
    case ONNX_FOLD_MAX: return RLX_OP_MAX;
    case ONNX_FOLD_MIN: return RLX_OP_MIN;
    case ONNX_FOLD_EQ: return RLX_OP_EQUAL;
    case ONNX_FOLD_LT: return RLX_OP_LESS;
    case ONNX_FOLD_GT: return RLX_OP_GREATER;
    case ONNX_FOLD_AND: return RLX_OP_AND;
    case ONNX_FOLD_OR: return RLX_OP_OR;
    case ONNX_FOLD_XOR: return RLX_OP_XOR;
    case ONNX_FOLD_NEG: return RLX_OP_NEG;
    case ONNX_FOLD_ABS: return RLX_OP_ABS;
    case ONNX_FOLD_SQRT: return RLX_OP_SQRT;
    case ONNX_FOLD_FLOOR: return RLX_OP_FLOOR;
    case ONNX_FOLD_CEIL: return RLX_OP_CEIL;
    case ONNX_FOLD_SIGN: return RLX_OP_SIGN;
    case ONNX_FOLD_NOT: return RLX_OP_NOT;
    case ONNX_FOLD_RELU: return RLX_OP_RELU;
    case ONNX_FOLD_EXP: return RLX_OP_EXP;
    case ONNX_FOLD_LOG: return RLX_OP_LOG;
    case ONNX_FOLD_RECIP: return RLX_OP_RECIPROCAL;
    default: return -1;
    }
}

onnx_tensor *onnx_fold_binary(onnx_fold_op op, const onnx_tensor *a, const onnx_tensor *b, int fmod_flag)
{
    int n;
    int64_t dims[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0};
    if (!onnx_fold_broadcast(a->ndim, a->dims, b->ndim, b->dims, &n, dims))
        return NULL;
    bool cmp =
        op == ONNX_FOLD_EQ || op == ONNX_FOLD_LT || op == ONNX_FOLD_GT || op == ONNX_FOLD_LE || op == ONNX_FOLD_GE;
    rlx_dtype ot = cmp ? RLX_BOOL : a->dtype;
    onnx_tensor *y = onnx_tensor_new(ot, n, dims);
    if (!y)
        return NULL;
    bool fl = onnx_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, dims, idx)) {
        int64_t ia = bcast_offset(a, n, idx), ib = bcast_offset(b, n, idx);
        if (fl) {
            double x = onnx_get_f(a, ia), z = onnx_get_f(b, ib), r = 0;
            switch (op) {
            case ONNX_FOLD_LE: r = x <= z; break;
            case ONNX_FOLD_GE: r = x >= z; break;
            case ONNX_FOLD_AND:
            case ONNX_FOLD_OR:
            case ONNX_FOLD_XOR: r = 0; break; /* bool only */
            default: r = rlx_binary_f64(ir_op(op), x, z, fmod_flag); break;
            }
            onnx_set_f(y, i, r);
        } else {
            int64_t x = onnx_get_i(a, ia), z = onnx_get_i(b, ib), r = 0;
            if ((op == ONNX_FOLD_DIV || op == ONNX_FOLD_MOD) && (z == 0 || (z == -1 && x == INT64_MIN)))
                r = 0;
            else if (op == ONNX_FOLD_LE)
                r = x <= z;
            else if (op == ONNX_FOLD_GE)
                r = x >= z;
            else
                rlx_binary_i64(ir_op(op), x, z, fmod_flag, &r);
            onnx_set_i(y, i, r);
        }
    }
    return y;
}

onnx_tensor *onnx_fold_unary(onnx_fold_op op, const onnx_tensor *a)
{
    onnx_tensor *y = onnx_tensor_new(a->dtype, a->ndim, a->dims);
    if (!y)
        return NULL;
    bool fl = onnx_dtype_is_float(a->dtype);
    for (int64_t i = 0; i < a->numel; i++) {
        if (fl) {
            double x = onnx_get_f(a, i), r = x;
            if (ir_op(op) >= 0)
                r = rlx_unary_f64(ir_op(op), x);
            onnx_set_f(y, i, r);
        } else {
            int64_t x = onnx_get_i(a, i), r = x;
            switch (op) {
            case ONNX_FOLD_NEG:
            case ONNX_FOLD_ABS:
            case ONNX_FOLD_SIGN:
            case ONNX_FOLD_NOT:
            case ONNX_FOLD_RELU: r = rlx_unary_i64(ir_op(op), x); break;
            case ONNX_FOLD_SQRT: r = x > 0 ? (int64_t)sqrt((double)x) : 0; break;
            default: break;
            }
            onnx_set_i(y, i, r);
        }
    }
    return y;
}

onnx_tensor *onnx_fold_cast(const onnx_tensor *a, rlx_dtype to)
{
    onnx_tensor *y = onnx_tensor_new(to, a->ndim, a->dims);
    if (!y)
        return NULL;
    bool from_f = onnx_dtype_is_float(a->dtype), to_f = onnx_dtype_is_float(to);
    for (int64_t i = 0; i < a->numel; i++) {
        if (from_f || to_f)
            onnx_set_f(y, i, onnx_get_f(a, i));
        else
            onnx_set_i(y, i, onnx_get_i(a, i));
    }
    return y;
}

onnx_tensor *onnx_fold_where(const onnx_tensor *c, const onnx_tensor *a, const onnx_tensor *b)
{
    int n1, n;
    int64_t d1[RLX_MAX_DIMS], dims[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0};
    if (!onnx_fold_broadcast(c->ndim, c->dims, a->ndim, a->dims, &n1, d1))
        return NULL;
    if (!onnx_fold_broadcast(n1, d1, b->ndim, b->dims, &n, dims))
        return NULL;
    if (a->dtype != b->dtype)
        return NULL;
    onnx_tensor *y = onnx_tensor_new(a->dtype, n, dims);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, dims, idx)) {
        bool t = onnx_get_i(c, bcast_offset(c, n, idx)) != 0;
        const onnx_tensor *s = t ? a : b;
        memcpy((char *)y->data + (size_t)i * es, (const char *)s->data + (size_t)bcast_offset(s, n, idx) * es, es);
    }
    return y;
}

onnx_tensor *onnx_fold_expand(const onnx_tensor *a, int nd, const int64_t *dims)
{
    int n;
    int64_t od[RLX_MAX_DIMS], idx[RLX_MAX_DIMS] = {0};
    if (!onnx_fold_broadcast(a->ndim, a->dims, nd, dims, &n, od))
        return NULL;
    onnx_tensor *y = onnx_tensor_new(a->dtype, n, od);
    if (!y)
        return NULL;
    size_t es = rlx_dtype_size(a->dtype);
    for (int64_t i = 0; i < y->numel; i++, next_index(n, od, idx))
        memcpy((char *)y->data + (size_t)i * es, (const char *)a->data + (size_t)bcast_offset(a, n, idx) * es, es);
    return y;
}

onnx_tensor *onnx_fold_transpose(const onnx_tensor *a, const int *perm)
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
    onnx_tensor *y = onnx_tensor_new(a->dtype, n, od);
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
onnx_tensor *onnx_fold_slice(const onnx_tensor *a, const int64_t *start, const int64_t *step, const int64_t *odims)
{
    int n = a->ndim;
    int64_t idx[RLX_MAX_DIMS] = {0}, st[RLX_MAX_DIMS];
    int64_t s = 1;
    for (int i = n - 1; i >= 0; i--) {
        st[i] = s;
        s *= a->dims[i];
    }
    onnx_tensor *y = onnx_tensor_new(a->dtype, n, odims);
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

onnx_tensor *onnx_fold_concat(onnx_tensor *const *xs, int n, int axis)
{
    int64_t od[RLX_MAX_DIMS];
    const onnx_tensor *a = xs[0];
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
    onnx_tensor *y = onnx_tensor_new(a->dtype, a->ndim, od);
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
onnx_tensor *onnx_fold_gather(const onnx_tensor *a, const onnx_tensor *ind, int axis)
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
    onnx_tensor *y = onnx_tensor_new(a->dtype, n, od);
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
            int64_t k = onnx_get_i(ind, j);
            if (k < 0)
                k += d;
            if (k < 0 || k >= d) {
                onnx_tensor_free(y);
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
    onnx_fold_op op;
    int arity;
} fold_ops[] = {
    {"Add", ONNX_FOLD_ADD, 2},
    {"Sub", ONNX_FOLD_SUB, 2},
    {"Mul", ONNX_FOLD_MUL, 2},
    {"Div", ONNX_FOLD_DIV, 2},
    {"Pow", ONNX_FOLD_POW, 2},
    {"Mod", ONNX_FOLD_MOD, 2},
    {"Equal", ONNX_FOLD_EQ, 2},
    {"Less", ONNX_FOLD_LT, 2},
    {"Greater", ONNX_FOLD_GT, 2},
    {"LessOrEqual", ONNX_FOLD_LE, 2},
    {"GreaterOrEqual", ONNX_FOLD_GE, 2},
    {"And", ONNX_FOLD_AND, 2},
    {"Or", ONNX_FOLD_OR, 2},
    {"Xor", ONNX_FOLD_XOR, 2},
    {"Neg", ONNX_FOLD_NEG, 1},
    {"Abs", ONNX_FOLD_ABS, 1},
    {"Floor", ONNX_FOLD_FLOOR, 1},
    {"Ceil", ONNX_FOLD_CEIL, 1},
    {"Sign", ONNX_FOLD_SIGN, 1},
    {"Not", ONNX_FOLD_NOT, 1},
    {"Relu", ONNX_FOLD_RELU, 1},
    {"Sqrt", ONNX_FOLD_SQRT, 1},
    {"Exp", ONNX_FOLD_EXP, 1},
    {"Log", ONNX_FOLD_LOG, 1},
    {"Reciprocal", ONNX_FOLD_RECIP, 1},
    {"Max", ONNX_FOLD_MAX, -1},
    {"Min", ONNX_FOLD_MIN, -1},
    {"Sum", ONNX_FOLD_ADD, -1},
};

rlx_status onnx_try_fold(onnx_node *n)
{
    const char *op = n->p->op_type;
    if (n->n_in < 1 || n->n_out < 1)
        return RLX_ERR_UNSUPPORTED;
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i] || !n->in[i]->k)
            return RLX_ERR_UNSUPPORTED;
        if (n->in[i]->k->numel > ONNX_FOLD_MAX_NUMEL)
            return RLX_ERR_UNSUPPORTED;
    }
    for (size_t k = 0; k < sizeof fold_ops / sizeof fold_ops[0]; k++) {
        if (strcmp(op, fold_ops[k].name))
            continue;
        int ar = fold_ops[k].arity;
        if (ar > 0 && n->n_in != ar)
            return RLX_ERR_UNSUPPORTED;
        onnx_tensor *y;
        if (ar == 1) {
            y = onnx_fold_unary(fold_ops[k].op, n->in[0]->k);
        } else {
            if (n->in[0]->k->dtype != n->in[n->n_in - 1]->k->dtype && fold_ops[k].op != ONNX_FOLD_POW)
                return RLX_ERR_UNSUPPORTED;
            y = onnx_tensor_clone(n->in[0]->k);
            for (int i = 1; y && i < n->n_in; i++) {
                onnx_tensor *z = onnx_fold_binary(fold_ops[k].op, y, n->in[i]->k, (int)onnx_attr_i(n, "fmod", 0));
                onnx_tensor_free(y);
                y = z;
            }
        }
        if (!y)
            return RLX_ERR_UNSUPPORTED;
        return onnx_out_const(n, 0, y);
    }
    if (!strcmp(op, "Where") && n->n_in == 3) {
        onnx_tensor *y = onnx_fold_where(n->in[0]->k, n->in[1]->k, n->in[2]->k);
        if (!y)
            return RLX_ERR_UNSUPPORTED;
        return onnx_out_const(n, 0, y);
    }
    return RLX_ERR_UNSUPPORTED;
}
