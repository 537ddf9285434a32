/* onnx_ops_util.c - what the op handler files share (onnx_ops.h): a
 * node's inputs as nodes, shapes and dtypes, constant inputs, scalars,
 * axes and reshapes.  Below onnx_ops.c, which dispatches, and the handler
 * files it dispatches to (onnx_ops2.c, onnx_ops3d.c). */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

rlx_node oxo_in(ox_node *n, int i)
{
    if (i >= n->n_in || !n->in[i])
        return -1;
    return ox_node_of(n->c, n->in[i]);
}

int oxo_shape(ox_node *n, rlx_node x, int64_t *dims)
{
    int nd = 0;
    if (rlx_node_shape(n->c->g, x, &nd, dims) != RLX_OK)
        return 0;
    return nd;
}

int oxo_in_shape(ox_node *n, int i, int64_t *dims)
{
    int nd = 0;
    if (i >= n->n_in || !n->in[i])
        return 0;
    ox_shape(n->c, n->in[i], &nd, dims);
    return nd;
}

rlx_dtype oxo_in_dtype(ox_node *n, int i) { return i < n->n_in && n->in[i] ? ox_dtype(n->c, n->in[i]) : RLX_F32; }

/* A 0-d constant; integer values are saturated to the type first (casting
 * an out-of-range double to an integer type is undefined in C). */
rlx_node oxo_scalar(ox_node *n, rlx_dtype t, double v)
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

int oxo_const_ints(ox_node *n, int i, int64_t *out, int max)
{
    if (i >= n->n_in || !n->in[i])
        return -1;
    const ox_tensor *k = n->in[i]->k;
    if (!k)
        return -2;
    if (k->numel > max)
        return -3;
    for (int64_t j = 0; j < k->numel; j++)
        out[j] = ox_get_i(k, j);
    return (int)k->numel;
}

bool oxo_const_scalar(ox_node *n, int i, double *v)
{
    if (i >= n->n_in || !n->in[i] || !n->in[i]->k || n->in[i]->k->numel != 1)
        return false;
    *v = ox_get_f(n->in[i]->k, 0);
    return true;
}

/* A normalised axis, or a large negative value (rejected everywhere) when
 * a is outside [-r, r). */
int oxo_norm_axis(int64_t a, int r)
{
    if (a < -(int64_t)r || a >= (int64_t)r)
        return -(1 << 20);
    return (int)(a < 0 ? a + r : a);
}

rlx_status oxo_need_const(ox_node *n, int i, const char *what)
{
    return ox_fail(n, RLX_ERR_UNSUPPORTED,
                   "input %d (%s) must be known at import time (a constant or a shape computation)", i, what);
}

bool oxo_dims_ok(int nd, const int64_t *dims) { return ox_dims_fit(nd, dims, NULL); }

rlx_node oxo_reshape(ox_node *n, rlx_node x, int nd, const int64_t *dims)
{
    int64_t cur[RLX_MAX_DIMS];
    int cn = oxo_shape(n, x, cur);
    if (cn == nd) {
        bool same = true;
        for (int i = 0; i < nd; i++)
            same &= cur[i] == dims[i];
        if (same)
            return x;
    }
    return rlx_reshape(n->c->g, x, nd, dims);
}

bool oxo_onnx_dtype(int64_t ot, rlx_dtype *t) { return ox_dtype_from_onnx((int)ot, t); }
