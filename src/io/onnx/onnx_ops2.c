/* onnx_ops2.c - the larger composite ONNX operators: element gathers and
 * scatters (flat-index gathers and one-hot matmuls), losses, Trilu, CumSum,
 * OneHot, TopK, Resize/Upsample, Einsum, LRN, windows, quantisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"
#include "ir/ir.h" /* rlx_graph_fail: record a composite's failure in the graph */

#define G (n->c->g)

static rlx_node const_node(ox_node *n, ox_tensor *k)
{
    if (!k)
        return -1;
    rlx_node c = rlx_constant(G, k->dtype, k->ndim, k->dims, k->data, k->bytes);
    ox_tensor_free(k);
    return c;
}

static int64_t numel_of(int r, const int64_t *d)
{
    int64_t s = 1;
    for (int i = 0; i < r; i++)
        s *= d[i];
    return s;
}

static rlx_node to_i64(ox_node *n, rlx_node x) { return rlx_node_dtype(G, x) == RLX_I64 ? x : rlx_cast(G, x, RLX_I64); }

/* Negative indices wrap by dim. */
static rlx_node wrap_index(ox_node *n, rlx_node idx, int64_t dim)
{
    return rlx_where(G, rlx_less(G, idx, oxo_scalar(n, RLX_I64, 0)),
                     rlx_add(G, idx, oxo_scalar(n, RLX_I64, (double)dim)), idx);
}

/* out[i...] = data[..., idx[i...] on axis, ...]: a gather over the flattened data. */
rlx_node oxo_gather_elements(ox_node *n, rlx_node data, rlx_node idx, int axis)
{
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = oxo_shape(n, data, dd), ri = oxo_shape(n, idx, id);
    if (r != ri || axis < 0 || axis >= r)
        return rlx_graph_fail(G, RLX_ERR_SHAPE, "gather_elements: ranks differ");
    int64_t ds[RLX_MAX_DIMS], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        ds[i] = s;
        s *= dd[i];
    }
    ox_tensor *base = oxo_tensor(RLX_I64, ri, id);
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
    rlx_node ix = wrap_index(n, to_i64(n, idx), dd[axis]);
    rlx_node flat = rlx_add(G, rlx_mul(G, ix, oxo_scalar(n, RLX_I64, (double)ds[axis])), const_node(n, base));
    int64_t tot = numel_of(r, dd);
    return rlx_gather(G, rlx_reshape(G, data, 1, &tot), flat, 0);
}

static rlx_status h_gather_elements(ox_node *n)
{
    int r = ox_rank(n->c, n->in[0]);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 0), r);
    return ox_out_node(n, 0, oxo_gather_elements(n, oxo_in(n, 0), oxo_in(n, 1), axis));
}

/* Scatter by one-hot matmul: positions [U] (flat, i64) into rows of a [P, R]
 * view of the data; updates [U, R].  Fine for the sizes models scatter. */
static rlx_node scatter_rows(ox_node *n, rlx_node data2, rlx_node pos, rlx_node upd2, int64_t P, const char *red)
{
    int64_t pd[RLX_MAX_DIMS] = {0};
    if (pos < 0 || data2 < 0 || upd2 < 0)
        return -1; /* an operand already failed */
    oxo_shape(n, pos, pd);
    int64_t U = pd[0];
    /* checked by division: U and P come from the file and may be huge */
    if (U < 0 || P < 0 || (P > 0 && U > (INT64_C(1) << 26) / P))
        return rlx_graph_fail(G, RLX_ERR_UNSUPPORTED, "scatter too large for the one-hot form");
    rlx_dtype t = rlx_node_dtype(G, data2);
    rlx_dtype ct = (t == RLX_F32 || t == RLX_F64) ? t : RLX_F64;
    ox_tensor *rg = oxo_tensor(RLX_I64, 2, (int64_t[]){1, P});
    if (!rg)
        return -1;
    for (int64_t i = 0; i < P; i++)
        ((int64_t *)rg->data)[i] = i;
    rlx_node oh = rlx_equal(G, rlx_reshape(G, pos, 2, (int64_t[]){U, 1}), const_node(n, rg)); /* [U, P] */
    rlx_node ohf = rlx_cast(G, oh, ct);
    rlx_node d = ct == t ? data2 : rlx_cast(G, data2, ct);
    rlx_node u = ct == t ? upd2 : rlx_cast(G, upd2, ct);
    rlx_node y;
    if (!strcmp(red, "mul") || !strcmp(red, "max") || !strcmp(red, "min")) {
        int64_t ud[RLX_MAX_DIMS] = {0};
        oxo_shape(n, upd2, ud);
        int64_t R = ud[1];
        if (R < 0 || (R > 0 && U * P > (INT64_C(1) << 26) / R))
            return rlx_graph_fail(G, RLX_ERR_UNSUPPORTED, "scatter too large for the one-hot form");
        rlx_node oh3 = rlx_reshape(G, oh, 3, (int64_t[]){U, P, 1});
        rlx_node u3 = rlx_reshape(G, u, 3, (int64_t[]){U, 1, R});
        double fill = !strcmp(red, "mul") ? 1 : (!strcmp(red, "max") ? -INFINITY : INFINITY);
        rlx_node c = rlx_where(G, oh3, u3, oxo_scalar(n, ct, fill));
        int ax0 = 0;
        if (!strcmp(red, "mul"))
            y = rlx_mul(G, d, rlx_reduce_prod(G, c, 1, &ax0, 0));
        else {
            rlx_node hit = rlx_reshape(G, rlx_reduce_max(G, ohf, 1, &ax0, 0), 2, (int64_t[]){P, 1});
            rlx_node m = !strcmp(red, "max") ? rlx_max(G, d, rlx_reduce_max(G, c, 1, &ax0, 0))
                                             : rlx_min(G, d, rlx_reduce_min(G, c, 1, &ax0, 0));
            y = rlx_where(G, rlx_greater(G, hit, oxo_scalar(n, ct, 0)), m, d);
        }
        return ct == t ? y : rlx_cast(G, y, t);
    }
    rlx_node add = rlx_matmul(G, ohf, u, 1, 0); /* [P, R] */
    if (!strcmp(red, "add"))
        y = rlx_add(G, d, add);
    else {
        rlx_node hit = rlx_reduce_max(G, ohf, 1, (int[]){0}, 0); /* [P] */
        hit = rlx_reshape(G, hit, 2, (int64_t[]){P, 1});
        y = rlx_add(G, rlx_mul(G, d, rlx_sub(G, oxo_scalar(n, ct, 1), hit)), add);
    }
    return ct == t ? y : rlx_cast(G, y, t);
}

static rlx_status h_scatter_elements(ox_node *n)
{
    rlx_node data = oxo_in(n, 0), idx = oxo_in(n, 1), upd = oxo_in(n, 2);
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = oxo_shape(n, data, dd), ri = oxo_shape(n, idx, id);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 0), r);
    char buf[16];
    const char *red = ox_attr_s(n, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "reduction '%s'", red);
    if (r != ri || axis < 0 || axis >= r)
        return ox_fail(n, RLX_ERR_SHAPE, "ranks differ");
    int64_t ds[RLX_MAX_DIMS], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        ds[i] = s;
        s *= dd[i];
    }
    ox_tensor *base = oxo_tensor(RLX_I64, ri, id);
    if (!base)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
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
    int64_t U = numel_of(ri, id), P = numel_of(r, dd);
    rlx_node ix = wrap_index(n, to_i64(n, idx), dd[axis]);
    rlx_node flat = rlx_add(G, rlx_mul(G, ix, oxo_scalar(n, RLX_I64, (double)ds[axis])), const_node(n, base));
    flat = rlx_reshape(G, flat, 1, &U);
    rlx_node y = scatter_rows(n, rlx_reshape(G, data, 2, (int64_t[]){P, 1}), flat,
                              rlx_reshape(G, upd, 2, (int64_t[]){U, 1}), P, red);
    return ox_out_node(n, 0, rlx_reshape(G, y, r, dd));
}

/* Flat row index of the first k dims for an index tensor [..., k]; with b batch dims. */
static rlx_node nd_rows(ox_node *n, rlx_node idx, const int64_t *dd, int b, int k, int64_t *rows_per_batch)
{
    int64_t id[RLX_MAX_DIMS];
    int ri = oxo_shape(n, idx, id);
    int64_t st[RLX_MAX_DIMS], s = 1;
    for (int j = k - 1; j >= 0; j--) {
        st[j] = s;
        s *= dd[b + j];
    }
    *rows_per_batch = s;
    ox_tensor *strides = oxo_tensor(RLX_I64, 1, (int64_t[]){k});
    ox_tensor *dims = oxo_tensor(RLX_I64, 1, (int64_t[]){k});
    if (!strides || !dims)
        return -1;
    for (int j = 0; j < k; j++) {
        ((int64_t *)strides->data)[j] = st[j];
        ((int64_t *)dims->data)[j] = dd[b + j];
    }
    rlx_node ix = to_i64(n, idx);
    rlx_node dn = const_node(n, dims);
    ix = rlx_where(G, rlx_less(G, ix, oxo_scalar(n, RLX_I64, 0)), rlx_add(G, ix, dn), ix);
    rlx_node p = rlx_reduce_sum(G, rlx_mul(G, ix, const_node(n, strides)), 1, (int[]){ri - 1}, 0);
    if (b > 0) {
        /* add batch offsets: batch number (over the first b dims of idx) * rows */
        int64_t bd[RLX_MAX_DIMS];
        for (int i = 0; i < ri - 1; i++)
            bd[i] = id[i];
        ox_tensor *off = oxo_tensor(RLX_I64, ri - 1, bd);
        if (!off)
            return -1;
        int64_t inner = 1;
        for (int i = b; i < ri - 1; i++)
            inner *= id[i];
        for (int64_t f = 0; f < off->numel; f++)
            ((int64_t *)off->data)[f] = (f / inner) * s;
        p = rlx_add(G, p, const_node(n, off));
    }
    return p;
}

static rlx_status h_gather_nd(ox_node *n)
{
    rlx_node data = oxo_in(n, 0), idx = oxo_in(n, 1);
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = oxo_shape(n, data, dd), ri = oxo_shape(n, idx, id);
    int64_t b64 = ox_attr_i(n, "batch_dims", 0);
    if (ri < 1 || b64 < 0 || b64 >= ri || id[ri - 1] < 1 || id[ri - 1] > r)
        return ox_fail(n, RLX_ERR_SHAPE, "bad indices or batch_dims");
    int b = (int)b64, k = (int)id[ri - 1];
    if (ri < 1 || b < 0 || b + k > r || k < 1)
        return ox_fail(n, RLX_ERR_SHAPE, "bad index depth");
    int64_t rows;
    rlx_node p = nd_rows(n, idx, dd, b, k, &rows);
    int64_t d2[RLX_MAX_DIMS];
    int n2 = 0;
    int64_t B = 1;
    for (int i = 0; i < b; i++)
        B *= dd[i];
    d2[n2++] = B * rows;
    for (int i = b + k; i < r; i++)
        d2[n2++] = dd[i];
    rlx_node y = rlx_gather(G, rlx_reshape(G, data, n2, d2), p, 0);
    return ox_out_node(n, 0, y);
}

static rlx_status h_scatter_nd(ox_node *n)
{
    rlx_node data = oxo_in(n, 0), idx = oxo_in(n, 1), upd = oxo_in(n, 2);
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = oxo_shape(n, data, dd), ri = oxo_shape(n, idx, id);
    if (ri < 1 || id[ri - 1] < 1 || id[ri - 1] > r)
        return ox_fail(n, RLX_ERR_SHAPE, "bad index depth");
    int k = (int)id[ri - 1];
    char buf[16];
    const char *red = ox_attr_s(n, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "reduction '%s'", red);
    if (k < 1 || k > r)
        return ox_fail(n, RLX_ERR_SHAPE, "bad index depth");
    int64_t rows;
    rlx_node p = nd_rows(n, idx, dd, 0, k, &rows);
    int64_t U = numel_of(ri - 1, id), R = numel_of(r - k, dd + k);
    p = rlx_reshape(G, p, 1, &U);
    rlx_node y = scatter_rows(n, rlx_reshape(G, data, 2, (int64_t[]){rows, R}), p,
                              rlx_reshape(G, upd, 2, (int64_t[]){U, R}), rows, red);
    return ox_out_node(n, 0, rlx_reshape(G, y, r, dd));
}

/* NegativeLogLikelihoodLoss on log-probabilities [N, C, d...]. */
static rlx_node nll(ox_node *n, rlx_node x, rlx_node target, rlx_node weight, const char *red, bool has_ii, int64_t ii)
{
    int64_t xd[RLX_MAX_DIMS], td[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd), tr = oxo_shape(n, target, td);
    rlx_dtype ft = rlx_node_dtype(G, x);
    rlx_node t = to_i64(n, target);
    rlx_node mask = -1;
    if (has_ii) {
        mask = rlx_not(G, rlx_equal(G, t, oxo_scalar(n, RLX_I64, (double)ii)));
        t = rlx_where(G, mask, t, oxo_scalar(n, RLX_I64, 0));
    }
    int64_t ud[RLX_MAX_DIMS];
    ud[0] = td[0];
    ud[1] = 1;
    for (int i = 1; i < tr; i++)
        ud[i + 1] = td[i];
    if (xr != tr + 1)
        return rlx_graph_fail(G, RLX_ERR_SHAPE, "nll: target rank");
    rlx_node picked = rlx_reshape(G, oxo_gather_elements(n, x, rlx_reshape(G, t, tr + 1, ud), 1), tr, td);
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

static rlx_status h_nll(ox_node *n)
{
    char buf[16];
    const char *red = ox_attr_s(n, "reduction", "mean", buf, sizeof buf);
    const Onnx__AttributeProto *a = ox_attr(n, "ignore_index");
    rlx_node w = n->n_in > 2 && n->in[2] ? oxo_in(n, 2) : -1;
    return ox_out_node(n, 0, nll(n, oxo_in(n, 0), oxo_in(n, 1), w, red, a != NULL, a ? a->i : 0));
}

static rlx_status h_sce(ox_node *n)
{
    char buf[16];
    const char *red = ox_attr_s(n, "reduction", "mean", buf, sizeof buf);
    const Onnx__AttributeProto *a = ox_attr(n, "ignore_index");
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd);
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
    rlx_node w = n->n_in > 2 && n->in[2] ? oxo_in(n, 2) : -1;
    rlx_status st = ox_out_node(n, 0, nll(n, lp, oxo_in(n, 1), w, red, a != NULL, a ? a->i : 0));
    if (st == RLX_OK && n->n_out > 1)
        st = ox_out_node(n, 1, lp);
    return st;
}

static rlx_status h_trilu(ox_node *n)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, xd);
    if (r < 2)
        return ox_fail(n, RLX_ERR_SHAPE, "needs rank >= 2");
    int64_t k = 0;
    if (n->n_in > 1 && n->in[1]) {
        int c = oxo_const_ints(n, 1, &k, 1);
        if (c == -2)
            return oxo_need_const(n, 1, "k");
    }
    int upper = (int)ox_attr_i(n, "upper", 1);
    int64_t N = xd[r - 2], M = xd[r - 1];
    ox_tensor *m = oxo_tensor(RLX_BOOL, 2, (int64_t[]){N, M});
    if (!m)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++)
            ((uint8_t *)m->data)[i * M + j] = upper ? (j - i >= k) : (j - i <= k);
    rlx_dtype t = oxo_in_dtype(n, 0);
    return ox_out_node(n, 0, rlx_where(G, const_node(n, m), oxo_in(n, 0), oxo_scalar(n, t, 0)));
}

/* CumSum as a matmul with a triangular 0/1 matrix along the last axis. */
static rlx_status h_cumsum(ox_node *n)
{
    int64_t xd[RLX_MAX_DIMS], ax;
    int r = oxo_in_shape(n, 0, xd);
    int c = oxo_const_ints(n, 1, &ax, 1);
    if (c == -2)
        return oxo_need_const(n, 1, "axis");
    if (c != 1)
        return ox_fail(n, RLX_ERR_FORMAT, "axis must be a scalar");
    int axis = oxo_norm_axis(ax, r);
    if (axis < 0 || axis >= r)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int excl = (int)ox_attr_i(n, "exclusive", 0), rev = (int)ox_attr_i(n, "reverse", 0);
    rlx_dtype t = oxo_in_dtype(n, 0);
    rlx_dtype ct = t == RLX_F32 || t == RLX_F64 ? t : RLX_F64;
    int64_t L = xd[axis];
    ox_tensor *m = oxo_tensor(ct, 2, (int64_t[]){L, L});
    if (!m)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < L; i++)
        for (int64_t j = 0; j < L; j++) {
            bool on = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
            ox_set_f(m, i * L + j, on);
        }
    rlx_node x = oxo_in(n, 0);
    if (ct != t)
        x = rlx_cast(G, x, ct);
    int perm[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[axis] = r - 1;
    perm[r - 1] = axis;
    if (axis != r - 1)
        x = rlx_transpose(G, x, perm);
    rlx_node y = rlx_matmul(G, x, const_node(n, m), 0, 0);
    if (axis != r - 1)
        y = rlx_transpose(G, y, perm);
    if (ct != t)
        y = rlx_cast(G, y, t);
    return ox_out_node(n, 0, y);
}

static rlx_status h_onehot(ox_node *n)
{
    double depth;
    if (!oxo_const_scalar(n, 1, &depth))
        return oxo_need_const(n, 1, "depth");
    if (!n->in[2] || !n->in[2]->k || n->in[2]->k->numel != 2)
        return oxo_need_const(n, 2, "values");
    int64_t id[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, id);
    if (r + 1 > RLX_MAX_DIMS)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "rank");
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", -1), r + 1);
    if (!(depth >= 1 && depth <= (double)OX_FOLD_MAX_NUMEL))
        return ox_fail(n, RLX_ERR_SHAPE, "bad depth");
    int64_t D = (int64_t)depth;
    if (D < 1 || axis < 0 || axis > r)
        return ox_fail(n, RLX_ERR_SHAPE, "bad depth or axis");
    rlx_node idx = to_i64(n, oxo_in(n, 0));
    idx = wrap_index(n, idx, D);
    int64_t ud[RLX_MAX_DIMS], rd[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i <= r; i++) {
        ud[i] = i == axis ? 1 : id[k];
        rd[i] = i == axis ? D : 1;
        if (i != axis)
            k++;
    }
    ox_tensor *rg = oxo_tensor(RLX_I64, r + 1, rd);
    if (!rg)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < D; i++)
        ((int64_t *)rg->data)[i] = i;
    rlx_node eq = rlx_equal(G, rlx_reshape(G, idx, r + 1, ud), const_node(n, rg));
    const ox_tensor *v = n->in[2]->k;
    rlx_dtype t = v->dtype;
    rlx_node off = oxo_scalar(n, t, ox_get_f(v, 0)), on = oxo_scalar(n, t, ox_get_f(v, 1));
    return ox_out_node(n, 0, rlx_where(G, eq, on, off));
}

static rlx_status h_compress(ox_node *n)
{
    const ox_tensor *c = n->in[1] ? n->in[1]->k : NULL;
    if (!c)
        return oxo_need_const(n, 1, "condition");
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    const Onnx__AttributeProto *a = ox_attr(n, "axis");
    int axis = 0;
    if (a)
        axis = oxo_norm_axis(a->i, r);
    else {
        int64_t tot = numel_of(r, xd);
        x = rlx_reshape(G, x, 1, &tot);
        xd[0] = tot;
        r = 1;
    }
    if (axis < 0 || axis >= r)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int64_t cnt = 0;
    for (int64_t i = 0; i < c->numel && i < xd[axis]; i++)
        cnt += ox_get_i(c, i) != 0;
    ox_tensor *ix = oxo_tensor(RLX_I64, 1, &cnt);
    if (!ix)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    int64_t k = 0;
    for (int64_t i = 0; i < c->numel && i < xd[axis]; i++)
        if (ox_get_i(c, i))
            ((int64_t *)ix->data)[k++] = i;
    return ox_out_node(n, 0, rlx_gather(G, x, const_node(n, ix), axis));
}

/* TopK by k rounds of argmax + mask (k is small in the models that use it). */
static rlx_status h_topk(ox_node *n)
{
    int64_t K;
    int c;
    if (n->opset < 10)
        K = ox_attr_i(n, "k", 1), c = 1;
    else
        c = oxo_const_ints(n, 1, &K, 1);
    if (c == -2)
        return oxo_need_const(n, 1, "K");
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", -1), r);
    int largest = (int)ox_attr_i(n, "largest", 1);
    if (axis < 0 || axis >= r || K < 0 || K > xd[axis])
        return ox_fail(n, RLX_ERR_SHAPE, "bad k or axis");
    if (K > 256)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "k=%lld is too large for the unrolled TopK", (long long)K);
    rlx_dtype t = oxo_in_dtype(n, 0);
    double fill = largest ? -INFINITY : INFINITY;
    if (!ox_dtype_is_float(t))
        fill = largest ? -9.2e18 : 9.2e18;
    if (t == RLX_I32)
        fill = largest ? -2147483648.0 : 2147483647.0;
    int64_t rd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        rd[i] = i == axis ? xd[axis] : 1;
    ox_tensor *rg = oxo_tensor(RLX_I64, r, rd);
    if (!rg)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < xd[axis]; i++)
        ((int64_t *)rg->data)[i] = i;
    rlx_node range = const_node(n, rg);
    rlx_node work = x, vals[256], idxs[256];
    for (int64_t i = 0; i < K; i++) {
        rlx_node im = largest ? rlx_argmax(G, work, axis, 1) : rlx_argmin(G, work, axis, 1);
        idxs[i] = im;
        vals[i] = oxo_gather_elements(n, x, im, axis);
        if (i + 1 < K)
            work = rlx_where(G, rlx_equal(G, im, range), oxo_scalar(n, t, fill), work);
    }
    if (K == 0)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "k=0");
    rlx_status st = ox_out_node(n, 0, rlx_concat(G, (int)K, vals, axis));
    if (st == RLX_OK)
        st = ox_out_node(n, 1, rlx_concat(G, (int)K, idxs, axis));
    return st;
}

static rlx_status h_eyelike(ox_node *n)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_in_shape(n, 0, xd);
    if (r != 2)
        return ox_fail(n, RLX_ERR_SHAPE, "needs rank 2");
    rlx_dtype t = oxo_in_dtype(n, 0);
    const Onnx__AttributeProto *a = ox_attr(n, "dtype");
    if (a && !ox_dtype_from_onnx((int)a->i, &t))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    int64_t k = ox_attr_i(n, "k", 0);
    /* past either edge the diagonal is empty; clipped so i + k cannot overflow */
    if (k > xd[1])
        k = xd[1];
    if (k < -xd[0])
        k = -xd[0];
    ox_tensor *y = oxo_tensor(t, 2, xd);
    if (!y)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < xd[0]; i++)
        if (i + k >= 0 && i + k < xd[1])
            ox_set_f(y, i * xd[1] + i + k, 1);
    return ox_out_const(n, 0, y);
}

static rlx_status h_window(ox_node *n)
{
    double size;
    if (!oxo_const_scalar(n, 0, &size))
        return oxo_need_const(n, 0, "size");
    if (!(size >= 0 && size <= (double)(1 << 24)))
        return ox_fail(n, RLX_ERR_SHAPE, "bad size");
    int64_t N = (int64_t)size;
    if (N < 0 || N > (1 << 24))
        return ox_fail(n, RLX_ERR_SHAPE, "bad size");
    rlx_dtype t = RLX_F32;
    if (!ox_dtype_from_onnx((int)ox_attr_i(n, "output_datatype", 1), &t))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    int periodic = (int)ox_attr_i(n, "periodic", 1);
    double den = periodic ? (double)N : (double)(N - 1);
    ox_tensor *y = oxo_tensor(t, 1, &N);
    if (!y)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    const char *op = n->p->op_type;
    for (int64_t i = 0; i < N; i++) {
        double a = den > 0 ? 2 * M_PI * (double)i / den : 0, v;
        if (!strcmp(op, "HannWindow"))
            v = 0.5 - 0.5 * cos(a);
        else if (!strcmp(op, "HammingWindow"))
            v = 25.0 / 46.0 - 21.0 / 46.0 * cos(a);
        else
            v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
        ox_set_f(y, i, v);
    }
    return ox_out_const(n, 0, y);
}

static rlx_status h_lrn(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    int64_t size = ox_attr_i(n, "size", 1);
    double alpha = ox_attr_f(n, "alpha", 1e-4), beta = ox_attr_f(n, "beta", 0.75), bias = ox_attr_f(n, "bias", 1.0);
    if (r < 3 || size < 1)
        return ox_fail(n, RLX_ERR_SHAPE, "bad input or size");
    rlx_dtype t = oxo_in_dtype(n, 0);
    /* the window reaches lo channels back and hi ahead; past C - 1 either
     * way it only adds zeros, so it is clipped there (the scale keeps size) */
    int64_t C = xd[1], lo = (size - 1) / 2, hi = size - 1 - lo;
    if (lo > C - 1)
        lo = C - 1;
    if (hi > C - 1)
        hi = C - 1;
    if (C < 1 || lo + hi + 1 > 4096)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "window of %lld over %lld channels: %lld taps, too many to expand",
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
        rlx_pow(G, rlx_add(G, oxo_scalar(n, t, bias), rlx_mul(G, sum, oxo_scalar(n, t, alpha / (double)size))),
                oxo_scalar(n, t, beta));
    return ox_out_node(n, 0, rlx_div(G, x, den));
}

/* ------------------------------------------------------------ Resize */

static double cubic_w(double A, double x)
{
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2)
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

static rlx_status resize_axis(ox_node *n, rlx_node *x, int axis, int64_t in, int64_t out, double out_f, double scale,
                              const char *mode, const char *ctm, const char *nm, double A, int excl, double roi_s,
                              double roi_e, double extrap)
{
    int taps = !strcmp(mode, "nearest") ? 1 : (!strcmp(mode, "linear") ? 2 : 4);
    ox_tensor *idx[4] = {0}, *w[4] = {0};
    ox_tensor *valid = NULL;
    bool crop = !strcmp(ctm, "tf_crop_and_resize");
    for (int t = 0; t < taps; t++) {
        idx[t] = oxo_tensor(RLX_I64, 1, &out);
        w[t] = oxo_tensor(RLX_F32, 1, &out);
        if (!idx[t] || !w[t])
            return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    }
    if (crop)
        valid = oxo_tensor(RLX_F32, 1, &out);
    for (int64_t o = 0; o < out; o++) {
        double xo;
        if (!strcmp(ctm, "half_pixel"))
            xo = ((double)o + 0.5) / scale - 0.5;
        else if (!strcmp(ctm, "pytorch_half_pixel"))
            xo = out_f > 1 ? ((double)o + 0.5) / scale - 0.5 : 0;
        else if (!strcmp(ctm, "align_corners"))
            xo = out_f == 1 ? 0 : (double)o * (double)(in - 1) / (out_f - 1);
        else if (!strcmp(ctm, "asymmetric"))
            xo = (double)o / scale;
        else if (!strcmp(ctm, "tf_half_pixel_for_nn"))
            xo = ((double)o + 0.5) / scale;
        else if (crop) {
            xo = out > 1 ? roi_s * (double)(in - 1) + (double)o * (roi_e - roi_s) * (double)(in - 1) / (double)(out - 1)
                         : 0.5 * (roi_s + roi_e) * (double)(in - 1);
            ((float *)valid->data)[o] = (xo < 0 || xo > (double)(in - 1)) ? 0.0f : 1.0f;
        } else
            return ox_fail(n, RLX_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", ctm);
        if (!(xo > -1e9 && xo < 1e9))
            xo = 0; /* NaN or absurd roi/scale: keep the casts defined */
        if (taps == 1) {
            double f = floor(xo), fr = xo - f;
            int64_t k;
            if (!strcmp(nm, "floor"))
                k = (int64_t)f;
            else if (!strcmp(nm, "ceil"))
                k = (int64_t)ceil(xo);
            else if (!strcmp(nm, "round_prefer_ceil"))
                k = fr >= 0.5 ? (int64_t)f + 1 : (int64_t)f;
            else
                k = fr > 0.5 ? (int64_t)f + 1 : (int64_t)f; /* round_prefer_floor */
            if (k < 0)
                k = 0;
            if (k > in - 1)
                k = in - 1;
            ((int64_t *)idx[0]->data)[o] = k;
            ((float *)w[0]->data)[o] = 1;
        } else if (taps == 2) {
            double xc = xo;
            if (xc < 0)
                xc = 0;
            if (xc > (double)(in - 1))
                xc = (double)(in - 1);
            double f = floor(xc), fr = xc - f;
            int64_t k0 = (int64_t)f, k1 = k0 + 1 > in - 1 ? in - 1 : k0 + 1;
            ((int64_t *)idx[0]->data)[o] = k0;
            ((int64_t *)idx[1]->data)[o] = k1;
            ((float *)w[0]->data)[o] = (float)(1 - fr);
            ((float *)w[1]->data)[o] = (float)fr;
        } else {
            double f = floor(xo), fr = xo - f;
            double ws[4], tot = 0;
            for (int t = 0; t < 4; t++) {
                int64_t k = (int64_t)f - 1 + t;
                ws[t] = cubic_w(A, fr + 1 - t);
                if (excl && (k < 0 || k >= in))
                    ws[t] = 0;
                tot += ws[t];
                if (k < 0)
                    k = 0;
                if (k > in - 1)
                    k = in - 1;
                ((int64_t *)idx[t]->data)[o] = k;
            }
            for (int t = 0; t < 4; t++)
                ((float *)w[t]->data)[o] = (float)(excl && tot != 0 ? ws[t] / tot : ws[t]);
        }
    }
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, *x, xd);
    int64_t wd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        wd[i] = i == axis ? out : 1;
    rlx_dtype dt = rlx_node_dtype(G, *x);
    rlx_node acc = -1;
    for (int t = 0; t < taps; t++) {
        rlx_node gt = rlx_gather(G, *x, const_node(n, idx[t]), axis);
        if (taps == 1) {
            ox_tensor_free(w[t]);
            acc = gt;
            continue;
        }
        rlx_node wn = rlx_reshape(G, const_node(n, w[t]), r, wd);
        if (dt != RLX_F32)
            wn = rlx_cast(G, wn, dt);
        rlx_node term = rlx_mul(G, gt, wn);
        acc = acc < 0 ? term : rlx_add(G, acc, term);
    }
    if (valid) {
        rlx_node vn = rlx_reshape(G, const_node(n, valid), r, wd);
        if (dt != RLX_F32)
            vn = rlx_cast(G, vn, dt);
        acc = rlx_add(G, rlx_mul(G, acc, vn),
                      rlx_mul(G, rlx_sub(G, oxo_scalar(n, dt, 1), vn), oxo_scalar(n, dt, extrap)));
    }
    *x = acc;
    return RLX_OK;
}

static rlx_status h_resize(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    char b1[32], b2[48], b3[32];
    const char *mode = ox_attr_s(n, "mode", "nearest", b1, sizeof b1);
    const char *ctm = ox_attr_s(n, "coordinate_transformation_mode", "half_pixel", b2, sizeof b2);
    const char *nm = ox_attr_s(n, "nearest_mode", "round_prefer_floor", b3, sizeof b3);
    bool upsample = !strcmp(n->p->op_type, "Upsample");
    if (upsample || n->opset < 11) {
        ctm = "asymmetric";
        if (!strcmp(mode, "nearest"))
            nm = "floor";
    }
    if (!strcmp(mode, "bilinear"))
        mode = "linear";
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "mode '%s'", mode);
    if (ox_attr_i(n, "antialias", 0))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "antialias");
    double A = ox_attr_f(n, "cubic_coeff_a", -0.75), extrap = ox_attr_f(n, "extrapolation_value", 0.0);
    int excl = (int)ox_attr_i(n, "exclude_outside", 0);
    double scales[RLX_MAX_DIMS];
    int64_t sizes[RLX_MAX_DIMS];
    double roi[2 * RLX_MAX_DIMS];
    for (int i = 0; i < r; i++) {
        scales[i] = 1;
        sizes[i] = xd[i];
        roi[i] = 0;
        roi[r + i] = 1;
    }
    int si = -1, zi = -1, ri = -1;
    if (upsample && n->opset < 9) {
        float f[RLX_MAX_DIMS];
        int c = ox_attr_floats(n, "scales", f, RLX_MAX_DIMS);
        if (c != r)
            return ox_fail(n, RLX_ERR_FORMAT, "scales");
        for (int i = 0; i < r; i++)
            scales[i] = f[i];
    } else if (upsample || n->opset < 11)
        si = 1;
    else {
        ri = 1;
        si = 2;
        zi = 3;
    }
    bool have_sizes = false;
    if (zi >= 0 && zi < n->n_in && n->in[zi] && (!n->in[zi]->k || n->in[zi]->k->numel > 0)) {
        int c = oxo_const_ints(n, zi, sizes, RLX_MAX_DIMS);
        if (c == -2)
            return oxo_need_const(n, zi, "sizes");
        if (c != r)
            return ox_fail(n, RLX_ERR_FORMAT, "sizes has %d values for rank %d", c, r);
        have_sizes = true;
        for (int i = 0; i < r; i++)
            scales[i] = (double)sizes[i] / (double)xd[i];
    } else if (si >= 0 && si < n->n_in && n->in[si]) {
        const ox_tensor *k = n->in[si]->k;
        if (!k)
            return oxo_need_const(n, si, "scales");
        if (k->numel != r)
            return ox_fail(n, RLX_ERR_FORMAT, "scales has %lld values for rank %d", (long long)k->numel, r);
        for (int i = 0; i < r; i++)
            scales[i] = ox_get_f(k, i);
    }
    if (ri >= 0 && ri < n->n_in && n->in[ri] && n->in[ri]->k && n->in[ri]->k->numel == 2 * r)
        for (int i = 0; i < 2 * r; i++)
            roi[i] = ox_get_f(n->in[ri]->k, i);
    for (int i = 0; i < r; i++) {
        if (!(scales[i] > 0))
            return ox_fail(n, RLX_ERR_FORMAT, "scale %g", scales[i]);
        if (!have_sizes) {
            double sz = floor((double)xd[i] * scales[i] + 1e-9);
            if (!(sz >= 1 && sz <= (double)(INT64_C(1) << 24)))
                return ox_fail(n, RLX_ERR_SHAPE, "output size out of range");
            sizes[i] = (int64_t)sz;
        }
        if (sizes[i] < 1 || sizes[i] > (INT64_C(1) << 24))
            return ox_fail(n, RLX_ERR_SHAPE, "output size %lld", (long long)sizes[i]);
    }
    bool crop = !strcmp(ctm, "tf_crop_and_resize");
    for (int i = 0; i < r; i++) {
        if (sizes[i] == xd[i] && scales[i] == 1 && !crop)
            continue;
        double out_f = have_sizes ? (double)sizes[i] : (double)xd[i] * scales[i];
        rlx_status st = resize_axis(n, &x, i, xd[i], sizes[i], out_f, scales[i], mode, ctm, nm, A, excl, roi[i],
                                    roi[r + i], extrap);
        if (st != RLX_OK)
            return st;
    }
    if (x == oxo_in(n, 0))
        return ox_out_node(n, 0, rlx_reshape(G, x, r, xd));
    return ox_out_node(n, 0, x);
}

/* ------------------------------------------------------------ Einsum */

static rlx_status h_einsum(ox_node *n)
{
    char eq[256];
    const char *e = ox_attr_s(n, "equation", "", eq, sizeof eq);
    char terms[3][64];
    int nt = 0;
    char out[64] = "";
    bool has_arrow = false;
    /* strip spaces, split on ',' and "->" */
    char s[256];
    int l = 0;
    for (const char *p = e; *p && l < 255; p++)
        if (*p != ' ')
            s[l++] = *p;
    s[l] = 0;
    char *arrow = strstr(s, "->");
    if (arrow) {
        has_arrow = true;
        snprintf(out, sizeof out, "%s", arrow + 2);
        *arrow = 0;
    }
    for (const char *q = s; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '.' || *q == ','))
            return ox_fail(n, RLX_ERR_FORMAT, "bad character in einsum equation");
    for (const char *q = out; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || *q == '.'))
            return ox_fail(n, RLX_ERR_FORMAT, "bad character in einsum output");
    for (char *tok = strtok(s, ","); tok && nt < 3; tok = strtok(NULL, ","))
        snprintf(terms[nt++], 64, "%s", tok);
    if (nt != n->n_in || nt < 1 || nt > 2)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "einsum with %d operands", nt);
    /* expand "..." into digit labels */
    char lab[2][RLX_MAX_DIMS + 1];
    int ell_rank = 0;
    for (int t = 0; t < nt; t++) {
        int64_t d[RLX_MAX_DIMS];
        int r = oxo_in_shape(n, t, d);
        char *dots = strstr(terms[t], "...");
        int letters = (int)strlen(terms[t]) - (dots ? 3 : 0);
        int er = dots ? r - letters : 0;
        if (er < 0 || (!dots && letters != r))
            return ox_fail(n, RLX_ERR_SHAPE, "equation does not fit operand %d", t);
        if (er > ell_rank)
            ell_rank = er;
        int k = 0;
        for (const char *p = terms[t]; *p && k < RLX_MAX_DIMS;) {
            if (!strncmp(p, "...", 3)) {
                for (int i = 0; i < er && k < RLX_MAX_DIMS; i++)
                    lab[t][k++] = (char)('0' + (ell_rank - er) + i);
                p += 3;
            } else
                lab[t][k++] = *p++;
        }
        lab[t][k] = 0;
    }
    char ol[RLX_MAX_DIMS + 1];
    int ko = 0;
    if (has_arrow) {
        for (const char *p = out; *p && ko < RLX_MAX_DIMS;) {
            if (!strncmp(p, "...", 3)) {
                for (int i = 0; i < ell_rank && ko < RLX_MAX_DIMS; i++)
                    ol[ko++] = (char)('0' + i);
                p += 3;
            } else
                ol[ko++] = *p++;
        }
    } else {
        for (int i = 0; i < ell_rank; i++)
            ol[ko++] = (char)('0' + i);
        for (char c = 'A'; c <= 'z'; c++) {
            if (c > 'Z' && c < 'a')
                continue;
            int dup = 0;
            for (int t = 0; t < nt; t++)
                for (const char *p = lab[t]; *p; p++)
                    dup += *p == c;
            if (dup == 1 && ko < RLX_MAX_DIMS)
                ol[ko++] = c;
        }
    }
    ol[ko] = 0;
    rlx_node ops[2];
    int64_t dim_of[128];
    for (int i = 0; i < 128; i++)
        dim_of[i] = -1;
    for (int t = 0; t < nt; t++) {
        ops[t] = oxo_in(n, t);
        int64_t d[RLX_MAX_DIMS];
        int r = oxo_in_shape(n, t, d);
        if ((int)strlen(lab[t]) != r)
            return ox_fail(n, RLX_ERR_SHAPE, "equation does not fit operand %d", t);
        /* a label repeated in one operand takes the diagonal: move the pair
         * last, flatten it and gather every (n+1)-th element */
        for (bool again = true; again;) {
            again = false;
            for (int i = 0; i < r && !again; i++)
                for (int j = i + 1; j < r && !again; j++) {
                    if (lab[t][i] != lab[t][j])
                        continue;
                    if (d[i] != d[j])
                        return ox_fail(n, RLX_ERR_SHAPE, "diagonal of unequal dims");
                    int perm[RLX_MAX_DIMS], k = 0;
                    char nl[RLX_MAX_DIMS + 1];
                    int64_t nd[RLX_MAX_DIMS];
                    for (int q = 0; q < r; q++)
                        if (q != i && q != j) {
                            nl[k] = lab[t][q];
                            nd[k] = d[q];
                            perm[k++] = q;
                        }
                    perm[k] = i;
                    perm[k + 1] = j;
                    rlx_node v = rlx_transpose(G, ops[t], perm);
                    nd[k] = d[i] * d[i];
                    v = rlx_reshape(G, v, k + 1, nd);
                    ox_tensor *ix = oxo_tensor(RLX_I64, 1, &d[i]);
                    if (!ix)
                        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
                    for (int64_t q = 0; q < d[i]; q++)
                        ((int64_t *)ix->data)[q] = q * (d[i] + 1);
                    ops[t] = rlx_gather(G, v, const_node(n, ix), k);
                    nl[k] = lab[t][i];
                    nd[k] = d[i];
                    nl[k + 1] = 0;
                    memcpy(lab[t], nl, (size_t)k + 2);
                    for (int q = 0; q <= k; q++)
                        d[q] = nd[q];
                    r = k + 1;
                    again = true;
                }
        }
        for (int i = 0; i < r; i++) {
            int c = (unsigned char)lab[t][i];
            if (dim_of[c] < 0 || dim_of[c] == 1)
                dim_of[c] = d[i];
        }
        /* sum out labels seen only here and not in the output */
        int axes[RLX_MAX_DIMS], na = 0;
        char keep[RLX_MAX_DIMS + 1];
        int kk = 0;
        for (int i = 0; i < r; i++) {
            char c = lab[t][i];
            bool other = nt == 2 && strchr(lab[1 - t], c);
            if (!strchr(ol, c) && !other)
                axes[na++] = i;
            else
                keep[kk++] = c;
        }
        keep[kk] = 0;
        if (na) {
            ops[t] = rlx_reduce_sum(G, ops[t], na, axes, 0);
            memcpy(lab[t], keep, (size_t)kk + 1);
        }
    }
    rlx_node y;
    char yl[32];
    if (nt == 1) {
        y = ops[0];
        snprintf(yl, sizeof yl, "%s", lab[0]);
    } else {
        /* batch (both, out), contracted (both, not out), a-only, b-only */
        char bl[9] = "", cl[9] = "", al[9] = "", bo[9] = "";
        int nb = 0, nc = 0, na = 0, nbo = 0;
        for (const char *p = lab[0]; *p; p++) {
            bool inb = strchr(lab[1], *p), ino = strchr(ol, *p);
            if (inb && ino)
                bl[nb++] = *p;
            else if (inb)
                cl[nc++] = *p;
            else
                al[na++] = *p;
        }
        for (const char *p = lab[1]; *p; p++)
            if (!strchr(lab[0], *p))
                bo[nbo++] = *p;
        bl[nb] = cl[nc] = al[na] = bo[nbo] = 0;
        int64_t Bs = 1, M = 1, K = 1, N = 1;
        for (int i = 0; i < nb; i++)
            Bs *= dim_of[(unsigned char)bl[i]];
        for (int i = 0; i < na; i++)
            M *= dim_of[(unsigned char)al[i]];
        for (int i = 0; i < nc; i++)
            K *= dim_of[(unsigned char)cl[i]];
        for (int i = 0; i < nbo; i++)
            N *= dim_of[(unsigned char)bo[i]];
        char ta[32], tb[32];
        snprintf(ta, sizeof ta, "%s%s%s", bl, al, cl);
        snprintf(tb, sizeof tb, "%s%s%s", bl, cl, bo);
        rlx_node xs[2];
        const char *want[2] = {ta, tb};
        for (int t = 0; t < 2; t++) {
            int r = (int)strlen(lab[t]);
            int perm[RLX_MAX_DIMS];
            bool id = true;
            for (int i = 0; i < r; i++) {
                perm[i] = (int)(strchr(lab[t], want[t][i]) - lab[t]);
                id &= perm[i] == i;
            }
            /* broadcast dims of size 1 against the other operand's */
            xs[t] = id ? ops[t] : rlx_transpose(G, ops[t], perm);
            int64_t cur[RLX_MAX_DIMS], full[RLX_MAX_DIMS];
            int cr = oxo_shape(n, xs[t], cur);
            bool need = false;
            for (int i = 0; i < cr; i++) {
                full[i] = dim_of[(unsigned char)want[t][i]];
                need |= full[i] != cur[i];
            }
            if (need)
                xs[t] = rlx_expand(G, xs[t], cr, full);
        }
        rlx_node a3 = rlx_reshape(G, xs[0], 3, (int64_t[]){Bs, M, K});
        rlx_node b3 = rlx_reshape(G, xs[1], 3, (int64_t[]){Bs, K, N});
        y = rlx_matmul(G, a3, b3, 0, 0);
        int64_t yd[RLX_MAX_DIMS];
        int k = 0;
        snprintf(yl, sizeof yl, "%s%s%s", bl, al, bo);
        for (const char *p = yl; *p; p++)
            yd[k++] = dim_of[(unsigned char)*p];
        y = rlx_reshape(G, y, k, yd);
    }
    int r = (int)strlen(yl);
    if (r != ko)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "einsum output labels");
    int perm[RLX_MAX_DIMS];
    bool id = true;
    for (int i = 0; i < ko; i++) {
        const char *p = strchr(yl, ol[i]);
        if (!p)
            return ox_fail(n, RLX_ERR_SHAPE, "output label '%c' not in the operands", ol[i]);
        perm[i] = (int)(p - yl);
        id &= perm[i] == i;
    }
    if (!id)
        y = rlx_transpose(G, y, perm);
    return ox_out_node(n, 0, y);
}

/* ------------------------------------------------------------ quantisation */

/* scale/zero point of per-axis quantisation reshaped to broadcast on axis. */
static rlx_node per_axis(ox_node *n, rlx_node v, int r, int axis)
{
    int64_t d[RLX_MAX_DIMS];
    int vr = oxo_shape(n, v, d);
    if (vr != 1 || r <= 1)
        return v;
    int64_t nd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        nd[i] = i == axis ? d[0] : 1;
    return rlx_reshape(G, v, r, nd);
}

static rlx_node dequant(ox_node *n, rlx_node x, rlx_node scale, rlx_node zp, int axis)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    rlx_node xf = rlx_cast(G, x, RLX_F32);
    if (zp >= 0)
        xf = rlx_sub(G, xf, per_axis(n, rlx_cast(G, zp, RLX_F32), r, axis));
    return rlx_mul(G, xf, per_axis(n, scale, r, axis));
}

static rlx_node quant(ox_node *n, rlx_node x, rlx_node scale, rlx_node zp, rlx_dtype qt, int axis)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    rlx_node y = rlx_round(G, rlx_div(G, x, per_axis(n, scale, r, axis)));
    if (zp >= 0)
        y = rlx_add(G, y, per_axis(n, rlx_cast(G, zp, RLX_F32), r, axis));
    y = qt == RLX_U8 ? rlx_clip(G, y, 0, 255) : (qt == RLX_I8 ? rlx_clip(G, y, -128, 127) : y);
    return rlx_cast(G, y, qt);
}

static rlx_status h_dequantize(ox_node *n)
{
    int r = ox_rank(n->c, n->in[0]);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 1), r);
    rlx_node zp = n->n_in > 2 && n->in[2] ? oxo_in(n, 2) : -1;
    return ox_out_node(n, 0, dequant(n, oxo_in(n, 0), oxo_in(n, 1), zp, axis));
}

static rlx_status h_quantize(ox_node *n)
{
    int r = ox_rank(n->c, n->in[0]);
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 1), r);
    rlx_node zp = n->n_in > 2 && n->in[2] ? oxo_in(n, 2) : -1;
    rlx_dtype qt = zp >= 0 ? oxo_in_dtype(n, 2) : RLX_U8;
    return ox_out_node(n, 0, quant(n, oxo_in(n, 0), oxo_in(n, 1), zp, qt, axis));
}

static rlx_status h_dyn_quantize(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    rlx_node mx = rlx_max(G, rlx_reduce_max(G, x, 0, NULL, 0), oxo_scalar(n, RLX_F32, 0));
    rlx_node mn = rlx_min(G, rlx_reduce_min(G, x, 0, NULL, 0), oxo_scalar(n, RLX_F32, 0));
    rlx_node scale = rlx_div(G, rlx_sub(G, mx, mn), oxo_scalar(n, RLX_F32, 255));
    rlx_node zpf = rlx_clip(G, rlx_round(G, rlx_sub(G, oxo_scalar(n, RLX_F32, 0), rlx_div(G, mn, scale))), 0, 255);
    rlx_node zp = rlx_cast(G, zpf, RLX_U8);
    rlx_node y = rlx_cast(G, rlx_clip(G, rlx_add(G, rlx_round(G, rlx_div(G, x, scale)), zpf), 0, 255), RLX_U8);
    rlx_status st = ox_out_node(n, 0, y);
    if (st == RLX_OK)
        st = ox_out_node(n, 1, scale);
    if (st == RLX_OK)
        st = ox_out_node(n, 2, zp);
    return st;
}

static rlx_node int_minus_zp(ox_node *n, int i, int zi, int axis_for_zp)
{
    rlx_node x = rlx_cast(G, oxo_in(n, i), RLX_F32);
    if (zi < n->n_in && n->in[zi]) {
        int r = ox_rank(n->c, n->in[i]);
        rlx_node zp = rlx_cast(G, oxo_in(n, zi), RLX_F32);
        x = rlx_sub(G, x, axis_for_zp >= 0 ? per_axis(n, zp, r, axis_for_zp) : zp);
    }
    return x;
}

static rlx_status h_matmul_integer(ox_node *n)
{
    int rb = ox_rank(n->c, n->in[1]);
    rlx_node a = int_minus_zp(n, 0, 2, -1), b = int_minus_zp(n, 1, 3, rb >= 2 ? rb - 1 : -1);
    return ox_out_node(n, 0, rlx_cast(G, rlx_matmul(G, a, b, 0, 0), RLX_I32));
}

static rlx_status h_qlinear_matmul(ox_node *n)
{
    if (n->n_in < 8)
        return ox_fail(n, RLX_ERR_FORMAT, "needs 8 inputs");
    int rb = ox_rank(n->c, n->in[3]);
    rlx_node a = dequant(n, oxo_in(n, 0), oxo_in(n, 1), oxo_in(n, 2), 1);
    rlx_node b = dequant(n, oxo_in(n, 3), oxo_in(n, 4), oxo_in(n, 5), rb - 1);
    rlx_node y = rlx_matmul(G, a, b, 0, 0);
    return ox_out_node(n, 0, quant(n, y, oxo_in(n, 6), oxo_in(n, 7), oxo_in_dtype(n, 7), 1));
}

static rlx_status conv_params(ox_node *n, rlx_node x, rlx_node w, rlx_conv_params *p)
{
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    int xr = oxo_shape(n, x, xd), wr = oxo_shape(n, w, wd);
    int ns = wr - 2;
    if (ns < 1 || ns > 2 || xr != wr)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "convolution over %d spatial dims", ns);
    rlx_conv_params_init(p);
    int64_t tmp[8];
    if (ox_attr_ints(n, "strides", tmp, 8) == ns)
        for (int i = 0; i < ns; i++)
            p->stride[i] = tmp[i];
    if (ox_attr_ints(n, "dilations", tmp, 8) == ns)
        for (int i = 0; i < ns; i++)
            p->dilation[i] = tmp[i];
    if (ox_attr_ints(n, "pads", tmp, 8) == 2 * ns)
        for (int i = 0; i < 2 * ns; i++)
            p->pads[i] = tmp[i];
    for (int i = 0; i < ns; i++)
        if (p->stride[i] < 1 || p->dilation[i] < 1 || p->stride[i] > (1 << 20) || p->dilation[i] > (1 << 20) ||
            wd[2 + i] > (1 << 20))
            return ox_fail(n, RLX_ERR_FORMAT, "bad kernel, stride or dilation");
    char buf[32];
    const char *ap = ox_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < ns; i++) {
            int64_t in = xd[2 + i], s = p->stride[i], outd = (in + s - 1) / s;
            int64_t total = (outd - 1) * s + (wd[2 + i] - 1) * p->dilation[i] + 1 - in;
            if (total < 0)
                total = 0;
            p->pads[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            p->pads[ns + i] = total - p->pads[i];
        }
    }
    p->groups = ox_attr_i(n, "group", 1);
    return RLX_OK;
}

static rlx_status h_conv_integer(ox_node *n)
{
    rlx_node x = int_minus_zp(n, 0, 2, -1), w = int_minus_zp(n, 1, 3, 0);
    rlx_conv_params p;
    rlx_status st = conv_params(n, x, w, &p);
    if (st != RLX_OK)
        return st;
    return ox_out_node(n, 0, rlx_cast(G, rlx_conv(G, x, w, -1, &p), RLX_I32));
}

static rlx_status h_qlinear_conv(ox_node *n)
{
    if (n->n_in < 8)
        return ox_fail(n, RLX_ERR_FORMAT, "needs 8 inputs");
    rlx_node x = dequant(n, oxo_in(n, 0), oxo_in(n, 1), oxo_in(n, 2), 1);
    rlx_node w = dequant(n, oxo_in(n, 3), oxo_in(n, 4), oxo_in(n, 5), 0);
    rlx_node b = -1;
    if (n->n_in > 8 && n->in[8]) {
        /* int32 bias in units of x_scale * w_scale */
        rlx_node sc = rlx_reshape(G, rlx_mul(G, oxo_in(n, 1), oxo_in(n, 4)), 1, (int64_t[]){-1});
        b = rlx_mul(G, rlx_cast(G, oxo_in(n, 8), RLX_F32), sc);
        int64_t bd[RLX_MAX_DIMS];
        oxo_shape(n, oxo_in(n, 8), bd);
        int64_t bdim = bd[0];
        b = rlx_expand(G, b, 1, &bdim);
    }
    rlx_conv_params p;
    rlx_status st = conv_params(n, x, w, &p);
    if (st != RLX_OK)
        return st;
    rlx_node y = rlx_conv(G, x, w, b, &p);
    return ox_out_node(n, 0, quant(n, y, oxo_in(n, 6), oxo_in(n, 7), oxo_in_dtype(n, 7), 1));
}

static rlx_status h_nonzero(ox_node *n)
{
    const ox_tensor *x = n->in[0]->k;
    if (!x)
        return oxo_need_const(n, 0, "X (NonZero has a data-dependent shape)");
    int64_t cnt = 0;
    for (int64_t i = 0; i < x->numel; i++)
        cnt += ox_get_f(x, i) != 0;
    int64_t d[2] = {x->ndim, cnt};
    ox_tensor *y = oxo_tensor(RLX_I64, 2, d);
    if (!y)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    int64_t k = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        if (ox_get_f(x, i) == 0)
            continue;
        int64_t rem = i;
        for (int a = x->ndim - 1; a >= 0; a--) {
            ((int64_t *)y->data)[a * cnt + k] = rem % x->dims[a];
            rem /= x->dims[a];
        }
        k++;
    }
    return ox_out_const(n, 0, y);
}

/* BitShift on unsigned types (held widened): multiply or divide by 2^s. */
static rlx_status h_bitshift(ox_node *n)
{
    char buf[16];
    const char *dir = ox_attr_s(n, "direction", "", buf, sizeof buf);
    rlx_dtype t = oxo_in_dtype(n, 0);
    if (ox_dtype_is_float(t))
        return ox_fail(n, RLX_ERR_DTYPE, "BitShift on floats");
    rlx_node x = rlx_cast(G, oxo_in(n, 0), RLX_I64), s = rlx_cast(G, oxo_in(n, 1), RLX_F64);
    rlx_node p = rlx_cast(G, rlx_pow(G, oxo_scalar(n, RLX_F64, 2), s), RLX_I64);
    rlx_node y;
    if (!strcmp(dir, "LEFT")) {
        y = rlx_mul(G, x, p);
        double m = t == RLX_U8 ? 256 : (t == RLX_I32 ? 65536 : 0);
        if (m > 0)
            y = rlx_mod(G, y, oxo_scalar(n, RLX_I64, m), 0);
    } else if (!strcmp(dir, "RIGHT"))
        y = rlx_div(G, x, p);
    else
        return ox_fail(n, RLX_ERR_FORMAT, "direction must be LEFT or RIGHT");
    return ox_out_node(n, 0, rlx_cast(G, y, t));
}

/* ReverseSequence with lengths known at import: a GatherElements along the
 * time axis with constant indices. */
static rlx_status h_reverse_sequence(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    const ox_tensor *lens = n->in[1]->k;
    if (!lens)
        return oxo_need_const(n, 1, "sequence_lens");
    int ta = (int)ox_attr_i(n, "time_axis", 0), ba = (int)ox_attr_i(n, "batch_axis", 1);
    if (r < 2 || ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba || lens->numel != xd[ba])
        return ox_fail(n, RLX_ERR_SHAPE, "bad axes or sequence_lens");
    if (numel_of(r, xd) > OX_FOLD_MAX_NUMEL * 16)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "input too large");
    ox_tensor *idx = oxo_tensor(RLX_I64, r, xd);
    if (!idx)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    int64_t inner = numel_of(r - 2, xd + 2);
    for (int64_t f = 0; f < idx->numel; f++) {
        int64_t a0 = f / (xd[1] * inner), a1 = (f / inner) % xd[1];
        int64_t t = ta == 0 ? a0 : a1, b = ta == 0 ? a1 : a0;
        int64_t L = ox_get_i(lens, b);
        if (L < 0 || L > xd[ta]) {
            ox_tensor_free(idx);
            return ox_fail(n, RLX_ERR_SHAPE, "sequence length %lld out of range", (long long)L);
        }
        ((int64_t *)idx->data)[f] = t < L ? L - 1 - t : t;
    }
    return ox_out_node(n, 0, oxo_gather_elements(n, x, const_node(n, idx), ta));
}

/* GridSample (4-d): per output pixel, taps gathered at run-time indices
 * computed from the grid, weighted and summed. */
static rlx_node gs_reflect(ox_node *n, rlx_node x, double lo, double hi)
{
    rlx_dtype t = RLX_F32;
    double span = hi - lo;
    if (span <= 0)
        return rlx_mul(G, x, oxo_scalar(n, t, 0));
    rlx_node d = rlx_abs(G, rlx_sub(G, x, oxo_scalar(n, t, lo)));
    rlx_node flips = rlx_floor(G, rlx_div(G, d, oxo_scalar(n, t, span)));
    rlx_node extra = rlx_sub(G, d, rlx_mul(G, flips, oxo_scalar(n, t, span)));
    rlx_node even = rlx_equal(G, rlx_mod(G, flips, oxo_scalar(n, t, 2), 1), oxo_scalar(n, t, 0));
    return rlx_where(G, even, rlx_add(G, extra, oxo_scalar(n, t, lo)), rlx_sub(G, oxo_scalar(n, t, hi), extra));
}

static rlx_node cubic_coef(ox_node *n, rlx_node t, int k)
{
    /* A = -0.75; distance of tap k (0..3) from the point at fraction t */
    double A = -0.75;
    rlx_dtype ft = RLX_F32;
#define S(v) oxo_scalar(n, ft, (v))
    rlx_node x = k == 0 ? rlx_add(G, t, S(1)) : k == 1 ? t : k == 2 ? rlx_sub(G, S(1), t) : rlx_sub(G, S(2), t);
    if (k == 1 || k == 2) /* ((A+2)x - (A+3)) x^2 + 1 */
        return rlx_add(G, rlx_mul(G, rlx_sub(G, rlx_mul(G, x, S(A + 2)), S(A + 3)), rlx_mul(G, x, x)), S(1));
    /* ((A x - 5A) x + 8A) x - 4A */
    return rlx_sub(G, rlx_mul(G, rlx_add(G, rlx_mul(G, rlx_sub(G, rlx_mul(G, x, S(A)), S(5 * A)), x), S(8 * A)), x),
                   S(4 * A));
#undef S
}

static rlx_status h_grid_sample(ox_node *n)
{
    rlx_node X = oxo_in(n, 0), grid = oxo_in(n, 1);
    int64_t xd[RLX_MAX_DIMS], gd[RLX_MAX_DIMS];
    if (oxo_shape(n, X, xd) != 4 || oxo_shape(n, grid, gd) != 4 || gd[3] != 2 || gd[0] != xd[0])
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "GridSample needs X [N,C,H,W] and grid [N,Ho,Wo,2]");
    if (oxo_in_dtype(n, 0) != RLX_F32 || oxo_in_dtype(n, 1) != RLX_F32)
        return ox_fail(n, RLX_ERR_DTYPE, "float32 only");
    char b1[16], b2[16];
    const char *mode = ox_attr_s(n, "mode", "bilinear", b1, sizeof b1);
    const char *pad = ox_attr_s(n, "padding_mode", "zeros", b2, sizeof b2);
    int ac = (int)ox_attr_i(n, "align_corners", 0);
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], Ho = gd[1], Wo = gd[2];
    rlx_dtype t = RLX_F32;
#define S(v) oxo_scalar(n, t, (v))
    int ax = 3;
    int64_t z0 = 0, z1 = 1, z2 = 2;
    rlx_node gx = rlx_reshape(G, rlx_slice(G, grid, 1, &ax, &z0, &z1, NULL), 3, (int64_t[]){N, Ho, Wo});
    rlx_node gy = rlx_reshape(G, rlx_slice(G, grid, 1, &ax, &z1, &z2, NULL), 3, (int64_t[]){N, Ho, Wo});
    rlx_node c[2];
    int64_t size[2] = {W, H};
    rlx_node gg[2] = {gx, gy};
    for (int i = 0; i < 2; i++) {
        double L = (double)size[i];
        c[i] = ac ? rlx_mul(G, rlx_add(G, gg[i], S(1)), S((L - 1) / 2))
                  : rlx_div(G, rlx_sub(G, rlx_mul(G, rlx_add(G, gg[i], S(1)), S(L)), S(1)), S(2));
        if (!strcmp(pad, "border"))
            c[i] = rlx_clip(G, c[i], 0, L - 1);
        else if (!strcmp(pad, "reflection")) {
            c[i] = ac ? gs_reflect(n, c[i], 0, L - 1) : gs_reflect(n, c[i], -0.5, L - 0.5);
            c[i] = rlx_clip(G, c[i], 0, L - 1);
        } else if (strcmp(pad, "zeros"))
            return ox_fail(n, RLX_ERR_UNSUPPORTED, "padding_mode '%s'", pad);
    }
    /* the data as rows [N*H*W, C] */
    rlx_node rows = rlx_reshape(G, rlx_transpose(G, rlx_reshape(G, X, 3, (int64_t[]){N, C, H * W}), (int[]){0, 2, 1}),
                                2, (int64_t[]){N * H * W, C});
    ox_tensor *base = oxo_tensor(RLX_F32, 3, (int64_t[]){N, 1, 1});
    if (!base)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < N; i++)
        ((float *)base->data)[i] = (float)(i * H * W);
    rlx_node basen = const_node(n, base);
    int taps;
    rlx_node fx = -1, fy = -1, tx = -1, ty = -1;
    if (!strcmp(mode, "nearest")) {
        taps = 1;
        fx = rlx_round(G, c[0]);
        fy = rlx_round(G, c[1]);
    } else if (!strcmp(mode, "bilinear")) {
        taps = 2;
        fx = rlx_floor(G, c[0]);
        fy = rlx_floor(G, c[1]);
    } else if (!strcmp(mode, "bicubic")) {
        taps = 4;
        fx = rlx_sub(G, rlx_floor(G, c[0]), S(1));
        fy = rlx_sub(G, rlx_floor(G, c[1]), S(1));
    } else
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "mode '%s'", mode);
    if (taps > 1) {
        tx = rlx_sub(G, c[0], rlx_floor(G, c[0]));
        ty = rlx_sub(G, c[1], rlx_floor(G, c[1]));
    }
    rlx_node acc = -1;
    for (int jy = 0; jy < taps; jy++)
        for (int jx = 0; jx < taps; jx++) {
            rlx_node px = rlx_add(G, fx, S(jx)), py = rlx_add(G, fy, S(jy));
            rlx_node w = -1;
            if (taps == 2) {
                rlx_node wx = jx ? tx : rlx_sub(G, S(1), tx), wy = jy ? ty : rlx_sub(G, S(1), ty);
                w = rlx_mul(G, wx, wy);
            } else if (taps == 4)
                w = rlx_mul(G, cubic_coef(n, tx, jx), cubic_coef(n, ty, jy));
            /* zeros padding: taps outside contribute nothing; others read clamped */
            rlx_node inside = rlx_and(G, rlx_and(G, rlx_not(G, rlx_less(G, px, S(0))), rlx_less(G, px, S((double)W))),
                                      rlx_and(G, rlx_not(G, rlx_less(G, py, S(0))), rlx_less(G, py, S((double)H))));
            rlx_node cx = rlx_clip(G, px, 0, (double)(W - 1)), cy = rlx_clip(G, py, 0, (double)(H - 1));
            rlx_node idx = rlx_cast(G, rlx_add(G, rlx_add(G, rlx_mul(G, cy, S((double)W)), cx), basen), RLX_I64);
            rlx_node v = rlx_gather(G, rows, idx, 0); /* [N, Ho, Wo, C] */
            rlx_node m = rlx_cast(G, inside, t);
            if (!strcmp(pad, "zeros"))
                w = w >= 0 ? rlx_mul(G, w, m) : m;
            if (w >= 0)
                v = rlx_mul(G, v, rlx_reshape(G, w, 4, (int64_t[]){N, Ho, Wo, 1}));
            acc = acc < 0 ? v : rlx_add(G, acc, v);
        }
#undef S
    return ox_out_node(n, 0, rlx_transpose(G, acc, (int[]){0, 3, 1, 2}));
}

/* Det of [..., n, n] for n <= 3 by cofactor expansion. */
static rlx_status h_det(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    if (r < 2 || xd[r - 1] != xd[r - 2])
        return ox_fail(n, RLX_ERR_SHAPE, "needs square matrices");
    int64_t m = xd[r - 1];
    if (m < 1 || m > 3)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "Det of %lldx%lld matrices (up to 3x3)", (long long)m, (long long)m);
    int64_t B = numel_of(r - 2, xd);
    rlx_node f = rlx_reshape(G, x, 2, (int64_t[]){B, m * m});
    rlx_node e[9];
    int ax = 1;
    for (int64_t i = 0; i < m * m; i++) {
        int64_t s0 = i, e0 = i + 1;
        e[i] = rlx_reshape(G, rlx_slice(G, f, 1, &ax, &s0, &e0, NULL), 1, &B);
    }
    rlx_node d;
    if (m == 1)
        d = e[0];
    else if (m == 2)
        d = rlx_sub(G, rlx_mul(G, e[0], e[3]), rlx_mul(G, e[1], e[2]));
    else {
        rlx_node c0 = rlx_sub(G, rlx_mul(G, e[4], e[8]), rlx_mul(G, e[5], e[7]));
        rlx_node c1 = rlx_sub(G, rlx_mul(G, e[3], e[8]), rlx_mul(G, e[5], e[6]));
        rlx_node c2 = rlx_sub(G, rlx_mul(G, e[3], e[7]), rlx_mul(G, e[4], e[6]));
        d = rlx_add(G, rlx_sub(G, rlx_mul(G, e[0], c0), rlx_mul(G, e[1], c1)), rlx_mul(G, e[2], c2));
    }
    return ox_out_node(n, 0, rlx_reshape(G, d, r - 2, xd));
}

/* MelWeightMatrix from its (import-time) scalar inputs: triangular filters
 * on bins spaced evenly in mel. */
static rlx_status h_mel(ox_node *n)
{
    double nm, dl, sr, lo, hi;
    if (!oxo_const_scalar(n, 0, &nm) || !oxo_const_scalar(n, 1, &dl) || !oxo_const_scalar(n, 2, &sr) ||
        !oxo_const_scalar(n, 3, &lo) || !oxo_const_scalar(n, 4, &hi))
        return oxo_need_const(n, 0, "all inputs");
    if (!(nm >= 1 && nm <= 4096 && dl >= 1 && dl <= (1 << 20)))
        return ox_fail(n, RLX_ERR_SHAPE, "bad sizes");
    int64_t M = (int64_t)nm, DL = (int64_t)dl, S = DL / 2 + 1;
    if (M < 1 || DL < 1 || sr <= 0 || M > 4096 || DL > (1 << 20))
        return ox_fail(n, RLX_ERR_SHAPE, "bad sizes");
    rlx_dtype t = RLX_F32;
    if (!ox_dtype_from_onnx((int)ox_attr_i(n, "output_datatype", 1), &t))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    int64_t *bins = rlx_malloc(sizeof(int64_t) * (size_t)(M + 2));
    ox_tensor *y = oxo_tensor(t, 2, (int64_t[]){S, M});
    if (!bins || !y) {
        free(bins);
        ox_tensor_free(y);
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    }
    double lm = 2595 * log10(1 + lo / 700), hm = 2595 * log10(1 + hi / 700), step = (hm - lm) / (double)(M + 2);
    for (int64_t i = 0; i < M + 2; i++) {
        double hz = 700 * (pow(10, ((double)i * step + lm) / 2595) - 1);
        double bin = floor((double)(DL + 1) * hz / sr);
        bins[i] = bin >= -1 && bin <= (double)S ? (int64_t)bin : -1; /* out of range: rejected below */
    }
    rlx_status st = RLX_OK;
    for (int64_t i = 0; i < M && st == RLX_OK; i++) {
        int64_t l = bins[i], c = bins[i + 1], h = bins[i + 2];
        if (l < 0 || h >= S || c < l || h < c) {
            st = ox_fail(n, RLX_ERR_SHAPE, "mel bins outside the spectrum");
            break;
        }
        if (c == l)
            ox_set_f(y, c * M + i, 1);
        else
            for (int64_t j = l; j <= c; j++)
                ox_set_f(y, j * M + i, (double)(j - l) / (double)(c - l));
        if (h > c)
            for (int64_t j = c; j < h; j++)
                ox_set_f(y, j * M + i, (double)(h - j) / (double)(h - c));
    }
    free(bins);
    if (st != RLX_OK) {
        ox_tensor_free(y);
        return st;
    }
    return ox_out_const(n, 0, y);
}

/* Real/imaginary DFT along the last axis of xr/xi [..., L] with constant
 * cos/sin matrices [L, K]; returns [..., K, 2]. */
static rlx_node dft_last(ox_node *n, rlx_node xr, rlx_node xi, int64_t L, int64_t K, bool inverse)
{
    rlx_dtype t = rlx_node_dtype(G, xr);
    ox_tensor *cm = oxo_tensor(t, 2, (int64_t[]){L, K}), *sm = oxo_tensor(t, 2, (int64_t[]){L, K});
    if (!cm || !sm) {
        ox_tensor_free(cm);
        ox_tensor_free(sm);
        return rlx_graph_fail(G, RLX_ERR_OUT_OF_MEMORY, "dft: out of memory");
    }
    for (int64_t i = 0; i < L; i++)
        for (int64_t k = 0; k < K; k++) {
            double a = 2 * M_PI * (double)((i * k) % L) / (double)L;
            ox_set_f(cm, i * K + k, cos(a));
            ox_set_f(sm, i * K + k, sin(a));
        }
    rlx_node C = const_node(n, cm), S = const_node(n, sm);
    /* forward: e^{-i a}; inverse: e^{+i a} / L */
    rlx_node re = rlx_matmul(G, xr, C, 0, 0), im = rlx_matmul(G, xr, S, 0, 0);
    if (!inverse)
        im = rlx_neg(G, im);
    if (xi >= 0) {
        rlx_node xs = rlx_matmul(G, xi, S, 0, 0);
        re = inverse ? rlx_sub(G, re, xs) : rlx_add(G, re, xs);
        im = rlx_add(G, im, rlx_matmul(G, xi, C, 0, 0));
    }
    if (inverse) {
        re = rlx_div(G, re, oxo_scalar(n, t, (double)L));
        im = rlx_div(G, im, oxo_scalar(n, t, (double)L));
    }
    int64_t d[RLX_MAX_DIMS];
    int r = oxo_shape(n, re, d);
    d[r] = 1;
    rlx_node parts[2] = {rlx_reshape(G, re, r + 1, d), rlx_reshape(G, im, r + 1, d)};
    return rlx_concat(G, 2, parts, r);
}

/* Splits [..., N, C] (C = 1 real, 2 complex) into xr, xi [..., N]. */
static void split_complex(ox_node *n, rlx_node x, rlx_node *xr, rlx_node *xi)
{
    int64_t d[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, d);
    int ax = r - 1;
    int64_t s0 = 0, e0 = 1, s1 = 1, e1 = 2;
    *xr = rlx_reshape(G, rlx_slice(G, x, 1, &ax, &s0, &e0, NULL), r - 1, d);
    *xi = d[r - 1] == 2 ? rlx_reshape(G, rlx_slice(G, x, 1, &ax, &s1, &e1, NULL), r - 1, d) : -1;
}

static rlx_status h_dft(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd);
    if (r < 3 || (xd[r - 1] != 1 && xd[r - 1] != 2))
        return ox_fail(n, RLX_ERR_SHAPE, "needs [batch, ..., 1 or 2]");
    if (!ox_dtype_is_float(oxo_in_dtype(n, 0)))
        return ox_fail(n, RLX_ERR_DTYPE, "float input");
    int axis = oxo_norm_axis(ox_attr_i(n, "axis", 1), r);
    if (axis < 1 || axis > r - 2)
        return ox_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int inverse = (int)ox_attr_i(n, "inverse", 0), onesided = (int)ox_attr_i(n, "onesided", 0);
    int64_t N = xd[axis], L = N;
    if (n->n_in > 1 && n->in[1]) {
        if (oxo_const_ints(n, 1, &L, 1) != 1)
            return oxo_need_const(n, 1, "dft_length");
    }
    if (L < 1 || L > 65536)
        return ox_fail(n, RLX_ERR_SHAPE, "dft_length %lld", (long long)L);
    int perm[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        perm[i] = i;
    perm[axis] = r - 2;
    perm[r - 2] = axis;
    rlx_node v = axis == r - 2 ? x : rlx_transpose(G, x, perm);
    rlx_node xr, xi;
    split_complex(n, v, &xr, &xi);
    /* pad or cut the signal to L */
    if (L != N) {
        int64_t d[RLX_MAX_DIMS];
        int rr = oxo_shape(n, xr, d);
        int ax = rr - 1;
        if (L < N) {
            int64_t s0 = 0;
            xr = rlx_slice(G, xr, 1, &ax, &s0, &L, NULL);
            if (xi >= 0)
                xi = rlx_slice(G, xi, 1, &ax, &s0, &L, NULL);
        } else {
            int64_t pads[2 * RLX_MAX_DIMS] = {0};
            pads[rr + ax] = L - N;
            xr = rlx_pad(G, xr, pads, RLX_PAD_CONSTANT, 0);
            if (xi >= 0)
                xi = rlx_pad(G, xi, pads, RLX_PAD_CONSTANT, 0);
        }
    }
    int64_t K = onesided ? L / 2 + 1 : L;
    rlx_node y = dft_last(n, xr, xi, L, K, inverse != 0);
    if (axis != r - 2)
        y = rlx_transpose(G, y, perm);
    return ox_out_node(n, 0, y);
}

static rlx_status h_stft(ox_node *n)
{
    rlx_node x = oxo_in(n, 0);
    int64_t xd[RLX_MAX_DIMS], step = 0, L = -1;
    if (oxo_shape(n, x, xd) != 3 || (xd[2] != 1 && xd[2] != 2))
        return ox_fail(n, RLX_ERR_SHAPE, "needs signal [batch, length, 1 or 2]");
    if (oxo_const_ints(n, 1, &step, 1) != 1)
        return oxo_need_const(n, 1, "frame_step");
    rlx_node win = n->n_in > 2 && n->in[2] ? oxo_in(n, 2) : -1;
    if (win >= 0) {
        int64_t wd[RLX_MAX_DIMS];
        if (oxo_shape(n, win, wd) != 1)
            return ox_fail(n, RLX_ERR_SHAPE, "window must be 1-d");
        L = wd[0];
    }
    if (n->n_in > 3 && n->in[3] && oxo_const_ints(n, 3, &L, 1) != 1)
        return oxo_need_const(n, 3, "frame_length");
    int64_t B = xd[0], S = xd[1];
    if (L < 1 || L > S || step < 1 || L > 65536)
        return ox_fail(n, RLX_ERR_SHAPE, "bad frame length or step");
    int64_t F = (S - L) / step + 1;
    if (F * L > OX_FOLD_MAX_NUMEL * 4)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "too many frames");
    int onesided = (int)ox_attr_i(n, "onesided", 1);
    ox_tensor *idx = oxo_tensor(RLX_I64, 2, (int64_t[]){F, L});
    if (!idx)
        return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t f = 0; f < F; f++)
        for (int64_t j = 0; j < L; j++)
            ((int64_t *)idx->data)[f * L + j] = f * step + j;
    rlx_node ix = const_node(n, idx);
    rlx_node xr, xi;
    split_complex(n, x, &xr, &xi); /* [B, S] */
    xr = rlx_gather(G, xr, ix, 1); /* [B, F, L] */
    if (xi >= 0)
        xi = rlx_gather(G, xi, ix, 1);
    if (win >= 0) {
        xr = rlx_mul(G, xr, win);
        if (xi >= 0)
            xi = rlx_mul(G, xi, win);
    }
    (void)B;
    return ox_out_node(n, 0, dft_last(n, xr, xi, L, onesided ? L / 2 + 1 : L, false));
}

/* MaxUnpool: values scattered to their (flat, whole-tensor) indices in a
 * zero tensor, by a one-hot matmul. */
static rlx_status h_maxunpool(ox_node *n)
{
    rlx_node x = oxo_in(n, 0), ind = oxo_in(n, 1);
    int64_t xd[RLX_MAX_DIMS], k[8], st[8], pd[8] = {0}, od[RLX_MAX_DIMS];
    int r = oxo_shape(n, x, xd), ns = r - 2;
    if (ns < 1 || ns > 3 || ox_attr_ints(n, "kernel_shape", k, 8) != ns)
        return ox_fail(n, RLX_ERR_FORMAT, "kernel_shape");
    for (int i = 0; i < ns; i++)
        st[i] = 1;
    if (ox_attr_ints(n, "strides", st, 8) < 0)
        for (int i = 0; i < ns; i++)
            st[i] = 1;
    ox_attr_ints(n, "pads", pd, 8);
    /* scatter into the shape the pooling came from; an explicit output_shape
     * (at least as large) adds zeros at the end of each spatial dim */
    od[0] = xd[0];
    od[1] = xd[1];
    for (int i = 0; i < ns; i++) {
        if (st[i] < 1 || k[i] < 1 || st[i] > (1 << 20) || k[i] > (1 << 20) || pd[i] < 0 || pd[ns + i] < 0 ||
            pd[i] > (1 << 20) || pd[ns + i] > (1 << 20) || xd[2 + i] > OX_MAX_NUMEL)
            return ox_fail(n, RLX_ERR_FORMAT, "bad kernel, stride or pads");
        od[2 + i] = (xd[2 + i] - 1) * st[i] + k[i] - pd[i] - pd[ns + i];
    }
    if (!oxo_dims_ok(r, od))
        return ox_fail(n, RLX_ERR_SHAPE, "bad output shape");
    int64_t want[RLX_MAX_DIMS];
    memcpy(want, od, sizeof want);
    if (n->n_in > 2 && n->in[2]) {
        int c = oxo_const_ints(n, 2, want, RLX_MAX_DIMS);
        if (c == -2)
            return oxo_need_const(n, 2, "output_shape");
        if (c != r)
            return ox_fail(n, RLX_ERR_SHAPE, "output_shape rank");
        for (int i = 0; i < r; i++)
            if (want[i] < od[i] || (i < 2 && want[i] != od[i]) || want[i] > OX_MAX_NUMEL)
                return ox_fail(n, RLX_ERR_SHAPE, "output_shape smaller than the unpooled shape");
    }
    int64_t U = numel_of(r, xd), P = numel_of(r, od);
    rlx_dtype t = oxo_in_dtype(n, 0);
    rlx_node zeros = rlx_expand(G, oxo_scalar(n, t, 0), 2, (int64_t[]){P, 1});
    rlx_node y = scatter_rows(n, zeros, rlx_reshape(G, to_i64(n, ind), 1, &U), rlx_reshape(G, x, 2, (int64_t[]){U, 1}),
                              P, "none");
    y = rlx_reshape(G, y, r, od);
    int64_t pads[2 * RLX_MAX_DIMS] = {0};
    bool padded = false;
    for (int i = 0; i < r; i++) {
        pads[r + i] = want[i] - od[i];
        padded |= pads[r + i] != 0;
    }
    if (padded)
        y = rlx_pad(G, y, pads, RLX_PAD_CONSTANT, 0);
    return ox_out_node(n, 0, y);
}

/* RoiAlign (avg/max, fixed sampling_ratio): sample points computed from the
 * run-time rois, bilinear taps gathered from [N*H*W, C] rows. */
static rlx_status h_roi_align(ox_node *n)
{
    rlx_node X = oxo_in(n, 0), rois = oxo_in(n, 1), bidx = oxo_in(n, 2);
    int64_t xd[RLX_MAX_DIMS], rd[RLX_MAX_DIMS];
    if (oxo_shape(n, X, xd) != 4 || oxo_shape(n, rois, rd) != 2 || rd[1] != 4)
        return ox_fail(n, RLX_ERR_SHAPE, "needs X [N,C,H,W] and rois [R,4]");
    if (oxo_in_dtype(n, 0) != RLX_F32)
        return ox_fail(n, RLX_ERR_DTYPE, "float32 only");
    char b1[32], b2[8];
    const char *ctm = ox_attr_s(n, "coordinate_transformation_mode",
                                n->opset >= 16 ? "half_pixel" : "output_half_pixel", b1, sizeof b1);
    const char *mode = ox_attr_s(n, "mode", "avg", b2, sizeof b2);
    int64_t OH = ox_attr_i(n, "output_height", 1), OW = ox_attr_i(n, "output_width", 1),
            SR = ox_attr_i(n, "sampling_ratio", 0);
    double scale = ox_attr_f(n, "spatial_scale", 1.0);
    if (SR < 1)
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "sampling_ratio 0 (adaptive, data-dependent)");
    /* each factor bounded first: the products must not overflow */
    if (OH < 1 || OW < 1 || OH > 4096 || OW > 4096 || SR > 4096 || OH * SR > 4096 || OW * SR > 4096)
        return ox_fail(n, RLX_ERR_SHAPE, "output %lld x %lld with sampling ratio %lld: more than 4096 samples a side",
                       (long long)OH, (long long)OW, (long long)SR);
    bool is_max = !strcmp(mode, "max");
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], R = rd[0];
    rlx_dtype t = RLX_F32;
#define S(v) oxo_scalar(n, t, (v))
    double off = !strcmp(ctm, "half_pixel") ? 0.5 : 0;
    rlx_node rc[4];
    int ax = 1;
    for (int64_t i = 0; i < 4; i++) {
        int64_t s0 = i, e0 = i + 1;
        rc[i] =
            rlx_sub(G, rlx_mul(G, rlx_reshape(G, rlx_slice(G, rois, 1, &ax, &s0, &e0, NULL), 1, &R), S(scale)), S(off));
    }
    rlx_node rw = rlx_sub(G, rc[2], rc[0]), rh = rlx_sub(G, rc[3], rc[1]);
    if (off == 0) {
        rw = rlx_max(G, rw, S(1));
        rh = rlx_max(G, rh, S(1));
    }
    /* sample coordinates: y [R, OH*SR], x [R, OW*SR] */
    rlx_node coord[2];
    int64_t cnt[2] = {OH, OW};
    rlx_node start[2] = {rc[1], rc[0]}, len[2] = {rh, rw};
    for (int d = 0; d < 2; d++) {
        int64_t M = cnt[d] * SR;
        ox_tensor *f = oxo_tensor(RLX_F32, 2, (int64_t[]){1, M});
        if (!f)
            return ox_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        for (int64_t p = 0; p < cnt[d]; p++)
            for (int64_t q = 0; q < SR; q++)
                ((float *)f->data)[p * SR + q] = (float)(((double)p + ((double)q + 0.5) / (double)SR) / (double)cnt[d]);
        coord[d] = rlx_add(G, rlx_reshape(G, start[d], 2, (int64_t[]){R, 1}),
                           rlx_mul(G, const_node(n, f), rlx_reshape(G, len[d], 2, (int64_t[]){R, 1})));
    }
    int64_t MY = OH * SR, MX = OW * SR;
    rlx_node lo[2], hi[2], frac[2], ok[2];
    int64_t lim[2] = {H, W};
    for (int d = 0; d < 2; d++) {
        rlx_node v = coord[d];
        ok[d] = rlx_and(G, rlx_not(G, rlx_less(G, v, S(-1))), rlx_not(G, rlx_greater(G, v, S((double)lim[d]))));
        v = rlx_max(G, v, S(0));
        rlx_node l = rlx_floor(G, v);
        rlx_node edge = rlx_not(G, rlx_less(G, l, S((double)(lim[d] - 1))));
        l = rlx_where(G, edge, S((double)(lim[d] - 1)), l);
        v = rlx_where(G, edge, l, v);
        lo[d] = l;
        hi[d] = rlx_where(G, edge, l, rlx_add(G, l, S(1)));
        frac[d] = rlx_sub(G, v, l);
    }
    /* broadcast shapes: y terms [R, MY, 1], x terms [R, 1, MX] */
    for (int d = 0; d < 2; d++) {
        int64_t shp[3] = {R, d == 0 ? MY : 1, d == 0 ? 1 : MX};
        lo[d] = rlx_reshape(G, lo[d], 3, shp);
        hi[d] = rlx_reshape(G, hi[d], 3, shp);
        frac[d] = rlx_reshape(G, frac[d], 3, shp);
        ok[d] = rlx_reshape(G, ok[d], 3, shp);
    }
    rlx_node valid = rlx_cast(G, rlx_and(G, ok[0], ok[1]), t); /* [R, MY, MX] */
    rlx_node rows = rlx_reshape(G, rlx_transpose(G, rlx_reshape(G, X, 3, (int64_t[]){N, C, H * W}), (int[]){0, 2, 1}),
                                2, (int64_t[]){N * H * W, C});
    rlx_node base = rlx_mul(G, rlx_reshape(G, rlx_cast(G, bidx, t), 3, (int64_t[]){R, 1, 1}), S((double)(H * W)));
    rlx_node acc = -1;
    for (int ty = 0; ty < 2; ty++)
        for (int tx = 0; tx < 2; tx++) {
            rlx_node yy = ty ? hi[0] : lo[0], xx = tx ? hi[1] : lo[1];
            rlx_node wy = ty ? frac[0] : rlx_sub(G, S(1), frac[0]), wx = tx ? frac[1] : rlx_sub(G, S(1), frac[1]);
            rlx_node idx = rlx_cast(G, rlx_add(G, rlx_add(G, rlx_mul(G, yy, S((double)W)), xx), base), RLX_I64);
            rlx_node v = rlx_gather(G, rows, idx, 0); /* [R, MY, MX, C] */
            rlx_node w = rlx_reshape(G, rlx_mul(G, rlx_mul(G, wy, wx), valid), 4, (int64_t[]){R, MY, MX, 1});
            rlx_node term = rlx_mul(G, v, w);
            acc = acc < 0 ? term : (is_max ? rlx_max(G, acc, term) : rlx_add(G, acc, term));
        }
#undef S
    /* pool SR x SR samples per bin */
    rlx_node a6 = rlx_reshape(G, acc, 6, (int64_t[]){R, OH, SR, OW, SR, C});
    int axes[2] = {2, 4};
    rlx_node y = is_max ? rlx_reduce_max(G, a6, 2, axes, 0) : rlx_reduce_mean(G, a6, 2, axes, 0); /* [R, OH, OW, C] */
    return ox_out_node(n, 0, rlx_transpose(G, y, (int[]){0, 3, 1, 2}));
}

/* Random ops (RLX's generator: deterministic per compile seed, not numpy's). */
static rlx_status h_random(ox_node *n)
{
    const char *op = n->p->op_type;
    bool like = strstr(op, "Like") != NULL, bern = !strcmp(op, "Bernoulli");
    int64_t d[RLX_MAX_DIMS];
    int r;
    rlx_dtype t = RLX_F32;
    if (like || bern) {
        if (n->n_in < 1 || !n->in[0])
            return ox_fail(n, RLX_ERR_FORMAT, "needs an input");
        r = oxo_in_shape(n, 0, d);
        t = oxo_in_dtype(n, 0);
    } else {
        r = ox_attr_ints(n, "shape", d, RLX_MAX_DIMS + 1);
        if (r < 0 || r > RLX_MAX_DIMS || !oxo_dims_ok(r, d))
            return ox_fail(n, RLX_ERR_SHAPE, "bad shape");
    }
    const Onnx__AttributeProto *a = ox_attr(n, "dtype");
    if (a && !ox_dtype_from_onnx((int)a->i, &t))
        return ox_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    if (bern) {
        rlx_dtype pt = oxo_in_dtype(n, 0);
        rlx_node u = rlx_random_uniform(G, pt, r, d, 0, 1);
        return ox_out_node(n, 0, rlx_cast(G, rlx_less(G, u, oxo_in(n, 0)), t));
    }
    if (!ox_dtype_is_float(t))
        return ox_fail(n, RLX_ERR_DTYPE, "random values of a non-float type");
    if (strstr(op, "Uniform"))
        return ox_out_node(n, 0, rlx_random_uniform(G, t, r, d, ox_attr_f(n, "low", 0), ox_attr_f(n, "high", 1)));
    return ox_out_node(n, 0, rlx_random_normal(G, t, r, d, ox_attr_f(n, "mean", 0), ox_attr_f(n, "scale", 1)));
}

/* ------------------------------------------------------------ table */

rlx_status oxo_h_rnn(ox_node *n);
rlx_status oxo_h_if(ox_node *n);
rlx_status oxo_h_loop(ox_node *n);
rlx_status oxo_h_scan(ox_node *n);

static const struct {
    const char *name;
    ox_handler h;
} handlers[] = {
    {"GatherElements", h_gather_elements},
    {"ScatterElements", h_scatter_elements},
    {"Scatter", h_scatter_elements},
    {"GatherND", h_gather_nd},
    {"ScatterND", h_scatter_nd},
    {"NegativeLogLikelihoodLoss", h_nll},
    {"SoftmaxCrossEntropyLoss", h_sce},
    {"Trilu", h_trilu},
    {"CumSum", h_cumsum},
    {"OneHot", h_onehot},
    {"Compress", h_compress},
    {"TopK", h_topk},
    {"EyeLike", h_eyelike},
    {"NonZero", h_nonzero},
    {"BitShift", h_bitshift},
    {"ReverseSequence", h_reverse_sequence},
    {"GridSample", h_grid_sample},
    {"Det", h_det},
    {"MelWeightMatrix", h_mel},
    {"DFT", h_dft},
    {"STFT", h_stft},
    {"MaxUnpool", h_maxunpool},
    {"RoiAlign", h_roi_align},
    {"RandomUniform", h_random},
    {"RandomNormal", h_random},
    {"RandomUniformLike", h_random},
    {"RandomNormalLike", h_random},
    {"Bernoulli", h_random},
    {"HannWindow", h_window},
    {"HammingWindow", h_window},
    {"BlackmanWindow", h_window},
    {"LRN", h_lrn},
    {"Resize", h_resize},
    {"Upsample", h_resize},
    {"Einsum", h_einsum},
    {"DequantizeLinear", h_dequantize},
    {"QuantizeLinear", h_quantize},
    {"DynamicQuantizeLinear", h_dyn_quantize},
    {"MatMulInteger", h_matmul_integer},
    {"QLinearMatMul", h_qlinear_matmul},
    {"ConvInteger", h_conv_integer},
    {"QLinearConv", h_qlinear_conv},
    {"LSTM", oxo_h_rnn},
    {"GRU", oxo_h_rnn},
    {"RNN", oxo_h_rnn},
    {"If", oxo_h_if},
    {"Loop", oxo_h_loop},
    {"Scan", oxo_h_scan},
};

ox_handler oxo_find_more(const char *op_type)
{
    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (handlers[i].h && !strcmp(handlers[i].name, op_type))
            return handlers[i].h;
    return NULL;
}
