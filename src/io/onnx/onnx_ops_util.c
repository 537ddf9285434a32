/* onnx_ops_util.c - what the op handler files share (onnx_ops.h): a
 * node's inputs as nodes, shapes and dtypes, constant inputs, scalars,
 * axes and reshapes, host tables as constants, and the element gather and
 * one-hot scatter several topics build on.  Below every topic file
 * (onnx_<topic>.c) and the registry that lists their tables. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "ir/ir.h" /* rlx_graph_fail: record a composite's failure in the graph */

rlx_node onnx_in(onnx_node *n, int i)
{
    if (i >= n->n_in || !n->in[i])
        return -1;
    return onnx_node_of(n->c, n->in[i]);
}

int onnx_shape(onnx_node *n, rlx_node x, int64_t *dims)
{
    int nd = 0;
    if (rlx_node_shape(n->c->g, x, &nd, dims) != RLX_OK)
        return 0;
    return nd;
}

int onnx_in_shape(onnx_node *n, int i, int64_t *dims)
{
    int nd = 0;
    if (i >= n->n_in || !n->in[i])
        return 0;
    onnx_value_shape(n->c, n->in[i], &nd, dims);
    return nd;
}

rlx_dtype onnx_in_dtype(onnx_node *n, int i)
{
    return i < n->n_in && n->in[i] ? onnx_value_dtype(n->c, n->in[i]) : RLX_F32;
}

/* A 0-d constant; integer values are saturated to the type first (casting
 * an out-of-range double to an integer type is undefined in C). */
rlx_node onnx_scalar(onnx_node *n, rlx_dtype t, double v)
{
    double lo = 0, hi = 0;
    switch (t) {
    case RLX_I8: lo = -128, hi = 127; break;
    case RLX_U8: lo = 0, hi = 255; break;
    case RLX_BOOL: lo = 0, hi = 1; break;
    case RLX_I32: lo = -2147483648.0, hi = 2147483647.0; break;
    case RLX_I64: lo = -9.2e18, hi = 9.2e18; break;
    default: return rlx_scalar(n->c->g, t, v);
    }
    if (t == RLX_BOOL)
        v = v != 0;
    if (isnan(v))
        v = 0;
    v = v < lo ? lo : (v > hi ? hi : v);
    return rlx_scalar(n->c->g, t, v);
}

const onnx_tensor *onnx_in_const(onnx_node *n, int i)
{
    if (i >= n->n_in || !n->in[i])
        return NULL;
    return n->in[i]->k ? n->in[i]->k : n->in[i]->init;
}

int onnx_const_ints(onnx_node *n, int i, int64_t *out, int max)
{
    if (i >= n->n_in || !n->in[i])
        return -1;
    const onnx_tensor *k = onnx_in_const(n, i);
    if (!k)
        return -2;
    if (k->numel > max)
        return -3;
    for (int64_t j = 0; j < k->numel; j++)
        out[j] = onnx_get_i(k, j);
    return (int)k->numel;
}

bool onnx_const_scalar(onnx_node *n, int i, double *v)
{
    const onnx_tensor *k = onnx_in_const(n, i);
    if (!k || k->numel != 1)
        return false;
    *v = onnx_get_f(k, 0);
    return true;
}

/* A normalised axis, or a large negative value (rejected everywhere) when
 * a is outside [-r, r). */
int onnx_norm_axis(int64_t a, int r)
{
    if (a < -(int64_t)r || a >= (int64_t)r)
        return -(1 << 20);
    return (int)(a < 0 ? a + r : a);
}

void onnx_note_need(onnx_node *n, int i)
{
    bool param = i < n->n_in && n->in[i] && n->in[i]->init;
    n->c->need_name = !param && i < n->n_in && n->in[i] ? n->p->input[i] : NULL;
    n->c->need_depth = n->c->depth;
}

rlx_status onnx_need_const(onnx_node *n, int i, const char *what)
{
    bool param = i < n->n_in && n->in[i] && n->in[i]->init;
    onnx_note_need(n, i);
    if (param)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED,
                         "input %d (%s) must be known at import time, but initializer '%s' is a param "
                         "(initializers_as_params)",
                         i, what, n->in[i]->name);
    return onnx_fail(n, RLX_ERR_UNSUPPORTED,
                     "input %d (%s) must be known at import time (a constant or a shape computation)", i, what);
}

bool onnx_dims_ok(int nd, const int64_t *dims) { return onnx_dims_fit(nd, dims, NULL); }

rlx_node onnx_reshape(onnx_node *n, rlx_node x, int nd, const int64_t *dims)
{
    int64_t cur[RLX_MAX_DIMS];
    int cn = onnx_shape(n, x, cur);
    if (cn == nd) {
        bool same = true;
        for (int i = 0; i < nd; i++)
            same &= cur[i] == dims[i];
        if (same)
            return x;
    }
    return rlx_reshape(n->c->g, x, nd, dims);
}

/* out = the value of input i, as a host constant when it is one. */
rlx_status onnx_pass_through(onnx_node *n, int i, int o)
{
    if (n->in[i]->k)
        return onnx_out_const(n, o, onnx_tensor_clone(n->in[i]->k));
    return onnx_out_node(n, o, onnx_in(n, i));
}

rlx_node onnx_const_node(onnx_node *n, onnx_tensor *k)
{
    if (!k)
        return -1;
    rlx_node c = k->blob ? rlx_constant_blob(n->c->g, k->dtype, k->ndim, k->dims, k->blob, k->bytes)
                         : rlx_constant(n->c->g, k->dtype, k->ndim, k->dims, k->data, k->bytes);
    onnx_tensor_free(k);
    return c;
}

int64_t onnx_numel(int r, const int64_t *d)
{
    int64_t s = 1;
    for (int i = 0; i < r; i++)
        s *= d[i];
    return s;
}

rlx_node onnx_to_i64(onnx_node *n, rlx_node x)
{
    return rlx_node_dtype(n->c->g, x) == RLX_I64 ? x : rlx_cast(n->c->g, x, RLX_I64);
}

/* Negative indices wrap by dim. */
rlx_node onnx_wrap_index(onnx_node *n, rlx_node idx, int64_t dim)
{
    return rlx_where(n->c->g, rlx_less(n->c->g, idx, onnx_scalar(n, RLX_I64, 0)),
                     rlx_add(n->c->g, idx, onnx_scalar(n, RLX_I64, (double)dim)), idx);
}

/* out[i...] = data[..., idx[i...] on axis, ...]: a gather over the flattened data. */
rlx_node onnx_gather_elements(onnx_node *n, rlx_node data, rlx_node idx, int axis)
{
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = onnx_shape(n, data, dd), ri = onnx_shape(n, idx, id);
    if (r != ri || axis < 0 || axis >= r)
        return rlx_graph_fail(n->c->g, RLX_ERR_SHAPE, "gather_elements: ranks differ");
    int64_t ds[RLX_MAX_DIMS], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        ds[i] = s;
        s *= dd[i];
    }
    onnx_tensor *base = onnx_tensor_derived(RLX_I64, ri, id);
    if (!base)
        return -1;
    int64_t pos[RLX_MAX_DIMS] = {0};
    for (int64_t f = 0; f < base->numel; f++) {
        int64_t b = 0;
        for (int k = 0; k < r; k++)
            if (k != axis)
                b += pos[k] * ds[k];
        ((int64_t *)base->data)[f] = b;
        for (int k = r - 1; k >= 0; k--) {
            if (++pos[k] < id[k])
                break;
            pos[k] = 0;
        }
    }
    rlx_node ix = onnx_wrap_index(n, onnx_to_i64(n, idx), dd[axis]);
    rlx_node flat =
        rlx_add(n->c->g, rlx_mul(n->c->g, ix, onnx_scalar(n, RLX_I64, (double)ds[axis])), onnx_const_node(n, base));
    int64_t tot = onnx_numel(r, dd);
    return rlx_gather(n->c->g, rlx_reshape(n->c->g, data, 1, &tot), flat, 0);
}

/* Scatter by one-hot matmul: positions [U] (flat, i64) into rows of a [P, R]
 * view of the data; updates [U, R].  Fine for the sizes models scatter. */
rlx_node onnx_scatter_rows(onnx_node *n, rlx_node data2, rlx_node pos, rlx_node upd2, int64_t P, const char *red)
{
    int64_t pd[RLX_MAX_DIMS] = {0};
    if (pos < 0 || data2 < 0 || upd2 < 0)
        return -1; /* an operand already failed */
    onnx_shape(n, pos, pd);
    int64_t U = pd[0];
    /* checked by division: U and P come from the file and may be huge */
    if (U < 0 || P < 0 || (P > 0 && U > (INT64_C(1) << 26) / P))
        return rlx_graph_fail(n->c->g, RLX_ERR_UNSUPPORTED, "scatter too large for the one-hot form");
    rlx_dtype t = rlx_node_dtype(n->c->g, data2);
    rlx_dtype ct = (t == RLX_F32 || t == RLX_F64) ? t : RLX_F64;
    onnx_tensor *rg = onnx_tensor_derived(RLX_I64, 2, (int64_t[]){1, P});
    if (!rg)
        return -1;
    for (int64_t i = 0; i < P; i++)
        ((int64_t *)rg->data)[i] = i;
    rlx_node oh =
        rlx_equal(n->c->g, rlx_reshape(n->c->g, pos, 2, (int64_t[]){U, 1}), onnx_const_node(n, rg)); /* [U, P] */
    rlx_node ohf = rlx_cast(n->c->g, oh, ct);
    rlx_node d = ct == t ? data2 : rlx_cast(n->c->g, data2, ct);
    rlx_node u = ct == t ? upd2 : rlx_cast(n->c->g, upd2, ct);
    rlx_node y;
    if (!strcmp(red, "mul") || !strcmp(red, "max") || !strcmp(red, "min")) {
        int64_t ud[RLX_MAX_DIMS] = {0};
        onnx_shape(n, upd2, ud);
        int64_t R = ud[1];
        if (R < 0 || (R > 0 && U * P > (INT64_C(1) << 26) / R))
            return rlx_graph_fail(n->c->g, RLX_ERR_UNSUPPORTED, "scatter too large for the one-hot form");
        rlx_node oh3 = rlx_reshape(n->c->g, oh, 3, (int64_t[]){U, P, 1});
        rlx_node u3 = rlx_reshape(n->c->g, u, 3, (int64_t[]){U, 1, R});
        double fill = !strcmp(red, "mul") ? 1 : (!strcmp(red, "max") ? -INFINITY : INFINITY);
        rlx_node c = rlx_where(n->c->g, oh3, u3, onnx_scalar(n, ct, fill));
        int ax0 = 0;
        if (!strcmp(red, "mul"))
            y = rlx_mul(n->c->g, d, rlx_reduce_prod(n->c->g, c, 1, &ax0, 0));
        else {
            rlx_node hit = rlx_reshape(n->c->g, rlx_reduce_max(n->c->g, ohf, 1, &ax0, 0), 2, (int64_t[]){P, 1});
            rlx_node m = !strcmp(red, "max") ? rlx_max(n->c->g, d, rlx_reduce_max(n->c->g, c, 1, &ax0, 0))
                                             : rlx_min(n->c->g, d, rlx_reduce_min(n->c->g, c, 1, &ax0, 0));
            y = rlx_where(n->c->g, rlx_greater(n->c->g, hit, onnx_scalar(n, ct, 0)), m, d);
        }
        return ct == t ? y : rlx_cast(n->c->g, y, t);
    }
    rlx_node add = rlx_matmul(n->c->g, ohf, u, 1, 0); /* [P, R] */
    if (!strcmp(red, "add"))
        y = rlx_add(n->c->g, d, add);
    else {
        rlx_node hit = rlx_reduce_max(n->c->g, ohf, 1, (int[]){0}, 0); /* [P] */
        hit = rlx_reshape(n->c->g, hit, 2, (int64_t[]){P, 1});
        y = rlx_add(n->c->g, rlx_mul(n->c->g, d, rlx_sub(n->c->g, onnx_scalar(n, ct, 1), hit)), add);
    }
    return ct == t ? y : rlx_cast(n->c->g, y, t);
}
