/* onnx_reduce.c - reductions along axes: the Reduce* family, ArgMax/ArgMin,
 * CumSum (a matmul with a triangular matrix) and TopK (rounds of argmax). */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

static rlx_status h_reduce(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    const char *op = n->p->op_type;
    rlx_node x = onnx_in(n, 0);
    int r = onnx_value_rank(n->c, n->in[0]);
    int64_t ax[RLX_MAX_DIMS + 1];
    int na;
    bool axes_input = (!strcmp(op, "ReduceSum") && n->opset >= 13) || n->opset >= 18;
    if (axes_input) {
        na = n->n_in >= 2 && n->in[1] ? onnx_const_ints(n, 1, ax, RLX_MAX_DIMS + 1) : 0;
        if (na == -2)
            return onnx_need_const(n, 1, "axes");
    } else {
        na = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
        if (na < 0)
            na = 0;
    }
    if (na > r)
        return onnx_fail(n, RLX_ERR_SHAPE, "too many axes");
    int keep = (int)onnx_attr_i(n, "keepdims", 1);
    if (na == 0 && onnx_attr_i(n, "noop_with_empty_axes", 0))
        return onnx_pass_through(n, 0, 0);
    int axes[RLX_MAX_DIMS];
    for (int i = 0; i < na; i++) {
        axes[i] = onnx_norm_axis(ax[i], r);
        if (axes[i] < 0)
            return onnx_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)ax[i], r);
    }
    if (r == 0)
        return onnx_pass_through(n, 0, 0);
    rlx_dtype t = onnx_in_dtype(n, 0);
    rlx_node y;
    if (t == RLX_BOOL && (!strcmp(op, "ReduceMax") || !strcmp(op, "ReduceMin"))) {
        /* opset 20: any / all, through u8 */
        rlx_node xu = rlx_cast(g, x, RLX_U8);
        y = !strcmp(op, "ReduceMax") ? rlx_reduce_max(g, xu, na, axes, keep) : rlx_reduce_min(g, xu, na, axes, keep);
        return onnx_out_node(n, 0, rlx_cast(g, y, RLX_BOOL));
    }
    if (t == RLX_BOOL)
        return onnx_fail(n, RLX_ERR_DTYPE, "%s of bool (only ReduceMax and ReduceMin take bool)", op);
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
        if (!onnx_dtype_is_float(t)) {
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
            int yr = onnx_shape(n, y, yd), k = 0;
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
        return onnx_fail(n, RLX_ERR_INTERNAL, "no reduction mapping");
    return onnx_out_node(n, 0, y);
}

static rlx_status h_argminmax(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    bool is_max = !strcmp(n->p->op_type, "ArgMax");
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), xr);
    int keep = (int)onnx_attr_i(n, "keepdims", 1);
    if (axis < 0 || axis >= xr)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    if (onnx_attr_i(n, "select_last_index", 0)) {
        int64_t s = -1, e = INT64_MIN, st = -1;
        rlx_node f = rlx_slice(g, x, 1, &axis, &s, &e, &st);
        rlx_node i = is_max ? rlx_argmax(g, f, axis, keep) : rlx_argmin(g, f, axis, keep);
        return onnx_out_node(n, 0, rlx_sub(g, onnx_scalar(n, RLX_I64, (double)(xd[axis] - 1)), i));
    }
    return onnx_out_node(n, 0, is_max ? rlx_argmax(g, x, axis, keep) : rlx_argmin(g, x, axis, keep));
}

/* CumSum as a matmul with a triangular 0/1 matrix along the last axis. */
static rlx_status h_cumsum(onnx_node *n)
{
    int64_t xd[RLX_MAX_DIMS], ax;
    int r = onnx_in_shape(n, 0, xd);
    int c = onnx_const_ints(n, 1, &ax, 1);
    if (c == -2)
        return onnx_need_const(n, 1, "axis");
    if (c != 1)
        return onnx_fail(n, RLX_ERR_FORMAT, "axis must be a scalar");
    int axis = onnx_norm_axis(ax, r);
    if (axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int excl = (int)onnx_attr_i(n, "exclusive", 0), rev = (int)onnx_attr_i(n, "reverse", 0);
    rlx_dtype t = onnx_in_dtype(n, 0);
    rlx_dtype ct = t == RLX_F32 || t == RLX_F64 ? t : RLX_F64;
    int64_t L = xd[axis];
    onnx_tensor *m = onnx_tensor_derived(ct, 2, (int64_t[]){L, L});
    if (!m)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < L; j++) {
            bool on = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
            onnx_set_f(m, i * L + j, on);
        }
    rlx_node x = onnx_in(n, 0);
    if (ct != t)
        x = rlx_cast(G, x, ct);
    int perm[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[axis] = r - 1;
    perm[r - 1] = axis;
    if (axis != r - 1)
        x = rlx_transpose(G, x, perm);
    rlx_node y = rlx_matmul(G, x, onnx_const_node(n, m), 0, 0);
    if (axis != r - 1)
        y = rlx_transpose(G, y, perm);
    if (ct != t)
        y = rlx_cast(G, y, t);
    return onnx_out_node(n, 0, y);
}

/* TopK by k rounds of argmax + mask (k is small in the models that use it). */
static rlx_status h_topk(onnx_node *n)
{
    int64_t K;
    int c;
    if (n->opset < 10)
        K = onnx_attr_i(n, "k", 1), c = 1;
    else
        c = onnx_const_ints(n, 1, &K, 1);
    if (c == -2)
        return onnx_need_const(n, 1, "K");
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", -1), r);
    int largest = (int)onnx_attr_i(n, "largest", 1);
    if (axis < 0 || axis >= r || K < 0 || K > xd[axis])
        return onnx_fail(n, RLX_ERR_SHAPE, "bad k or axis");
    if (K > 256)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "k=%lld is too large for the unrolled TopK", (long long)K);
    rlx_dtype t = onnx_in_dtype(n, 0);
    double fill = largest ? -INFINITY : INFINITY;
    if (!onnx_dtype_is_float(t))
        fill = largest ? -9.2e18 : 9.2e18;
    if (t == RLX_I32)
        fill = largest ? -2147483648.0 : 2147483647.0;
    int64_t rd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        rd[i] = i == axis ? xd[axis] : 1;
    onnx_tensor *rg = onnx_tensor_derived(RLX_I64, r, rd);
    if (!rg)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < xd[axis]; i++)
        ((int64_t *)rg->data)[i] = i;
    rlx_node range = onnx_const_node(n, rg);
    rlx_node work = x, vals[256], idxs[256];
    for (int64_t i = 0; i < K; i++) {
        rlx_node im = largest ? rlx_argmax(G, work, axis, 1) : rlx_argmin(G, work, axis, 1);
        idxs[i] = im;
        vals[i] = onnx_gather_elements(n, x, im, axis);
        if (i + 1 < K)
            work = rlx_where(G, rlx_equal(G, im, range), onnx_scalar(n, t, fill), work);
    }
    if (K == 0)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "k=0");
    rlx_status st = onnx_out_node(n, 0, rlx_concat(G, (int)K, vals, axis));
    if (st == RLX_OK)
        st = onnx_out_node(n, 1, rlx_concat(G, (int)K, idxs, axis));
    return st;
}

const onnx_op onnx_reduce_ops[] = {
    ONNX_OP("ReduceSum", h_reduce, 1),
    ONNX_OP("ReduceMean", h_reduce, 1),
    ONNX_OP("ReduceMax", h_reduce, 1),
    ONNX_OP("ReduceMin", h_reduce, 1),
    ONNX_OP("ReduceProd", h_reduce, 1),
    ONNX_OP("ReduceL1", h_reduce, 1),
    ONNX_OP("ReduceL2", h_reduce, 1),
    ONNX_OP("ReduceSumSquare", h_reduce, 1),
    ONNX_OP("ReduceLogSum", h_reduce, 1),
    ONNX_OP("ReduceLogSumExp", h_reduce, 1),
    ONNX_OP("ArgMax", h_argminmax, 1),
    ONNX_OP("ArgMin", h_argminmax, 1),
    ONNX_OP("CumSum", h_cumsum, 2),
    ONNX_OP_SINCE("TopK", h_topk, 1, 10, 2),
    ONNX_OP_END,
};
