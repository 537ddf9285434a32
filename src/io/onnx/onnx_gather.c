/* onnx_gather.c - ops that pick or place elements by index: Gather,
 * GatherElements, GatherND, the scatters (one-hot matmuls), Compress,
 * OneHot, ReverseSequence and Trilu. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

static rlx_status h_gather(onnx_node *n)
{
    int r = onnx_value_rank(n->c, n->in[0]);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    if (n->in[0]->k && n->in[1]->k && n->in[0]->k->numel <= ONNX_FOLD_MAX_NUMEL &&
        n->in[1]->k->numel <= ONNX_FOLD_MAX_NUMEL) {
        onnx_tensor *y = onnx_fold_gather(n->in[0]->k, n->in[1]->k, axis);
        if (!y)
            return onnx_fail(n, RLX_ERR_SHAPE, "index out of range");
        return onnx_out_const(n, 0, y);
    }
    rlx_node idx = onnx_in(n, 1);
    rlx_dtype it = onnx_in_dtype(n, 1);
    if (it != RLX_I64 && it != RLX_I32)
        idx = rlx_cast(n->c->g, idx, RLX_I64);
    return onnx_out_node(n, 0, rlx_gather(n->c->g, onnx_in(n, 0), idx, axis));
}

static rlx_status h_gather_elements(onnx_node *n)
{
    int r = onnx_value_rank(n->c, n->in[0]);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), r);
    return onnx_out_node(n, 0, onnx_gather_elements(n, onnx_in(n, 0), onnx_in(n, 1), axis));
}

static rlx_status h_scatter_elements(onnx_node *n)
{
    rlx_node data = onnx_in(n, 0), idx = onnx_in(n, 1), upd = onnx_in(n, 2);
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = onnx_shape(n, data, dd), ri = onnx_shape(n, idx, id);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), r);
    char buf[16];
    const char *red = onnx_attr_s(n, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "reduction '%s'", red);
    if (r != ri || axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "ranks differ");
    int64_t ds[RLX_MAX_DIMS], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        ds[i] = s;
        s *= dd[i];
    }
    onnx_tensor *base = onnx_tensor_derived(RLX_I64, ri, id);
    if (!base)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
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
    int64_t U = onnx_numel(ri, id), P = onnx_numel(r, dd);
    rlx_node ix = onnx_wrap_index(n, onnx_to_i64(n, idx), dd[axis]);
    rlx_node flat = rlx_add(G, rlx_mul(G, ix, onnx_scalar(n, RLX_I64, (double)ds[axis])), onnx_const_node(n, base));
    flat = rlx_reshape(G, flat, 1, &U);
    rlx_node y = onnx_scatter_rows(n, rlx_reshape(G, data, 2, (int64_t[]){P, 1}), flat,
                                   rlx_reshape(G, upd, 2, (int64_t[]){U, 1}), P, red);
    return onnx_out_node(n, 0, rlx_reshape(G, y, r, dd));
}

/* Flat row index of the first k dims for an index tensor [..., k]; with b batch dims. */
static rlx_node nd_rows(onnx_node *n, rlx_node idx, const int64_t *dd, int b, int k, int64_t *rows_per_batch)
{
    int64_t id[RLX_MAX_DIMS];
    int ri = onnx_shape(n, idx, id);
    int64_t st[RLX_MAX_DIMS], s = 1;
    for (int j = k - 1; j >= 0; j--) {
        st[j] = s;
        s *= dd[b + j];
    }
    *rows_per_batch = s;
    onnx_tensor *strides = onnx_tensor_derived(RLX_I64, 1, (int64_t[]){k});
    onnx_tensor *dims = onnx_tensor_derived(RLX_I64, 1, (int64_t[]){k});
    if (!strides || !dims)
        return -1;
    for (int j = 0; j < k; j++) {
        ((int64_t *)strides->data)[j] = st[j];
        ((int64_t *)dims->data)[j] = dd[b + j];
    }
    rlx_node ix = onnx_to_i64(n, idx);
    rlx_node dn = onnx_const_node(n, dims);
    ix = rlx_where(G, rlx_less(G, ix, onnx_scalar(n, RLX_I64, 0)), rlx_add(G, ix, dn), ix);
    rlx_node p = rlx_reduce_sum(G, rlx_mul(G, ix, onnx_const_node(n, strides)), 1, (int[]){ri - 1}, 0);
    if (b > 0) {
        /* add batch offsets: batch number (over the first b dims of idx) * rows */
        int64_t bd[RLX_MAX_DIMS];
        for (int i = 0; i < ri - 1; i++)
            bd[i] = id[i];
        onnx_tensor *off = onnx_tensor_derived(RLX_I64, ri - 1, bd);
        if (!off)
            return -1;
        int64_t inner = 1;
        for (int i = b; i < ri - 1; i++)
            inner *= id[i];
        for (int64_t f = 0; f < off->numel; f++)
            ((int64_t *)off->data)[f] = (f / inner) * s;
        p = rlx_add(G, p, onnx_const_node(n, off));
    }
    return p;
}

static rlx_status h_gather_nd(onnx_node *n)
{
    rlx_node data = onnx_in(n, 0), idx = onnx_in(n, 1);
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = onnx_shape(n, data, dd), ri = onnx_shape(n, idx, id);
    int64_t b64 = onnx_attr_i(n, "batch_dims", 0);
    if (ri < 1 || b64 < 0 || b64 >= ri || id[ri - 1] < 1 || id[ri - 1] > r)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad indices or batch_dims");
    int b = (int)b64, k = (int)id[ri - 1];
    if (ri < 1 || b < 0 || b + k > r || k < 1)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad index depth");
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
    return onnx_out_node(n, 0, y);
}

static rlx_status h_scatter_nd(onnx_node *n)
{
    rlx_node data = onnx_in(n, 0), idx = onnx_in(n, 1), upd = onnx_in(n, 2);
    int64_t dd[RLX_MAX_DIMS], id[RLX_MAX_DIMS];
    int r = onnx_shape(n, data, dd), ri = onnx_shape(n, idx, id);
    if (ri < 1 || id[ri - 1] < 1 || id[ri - 1] > r)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad index depth");
    int k = (int)id[ri - 1];
    char buf[16];
    const char *red = onnx_attr_s(n, "reduction", "none", buf, sizeof buf);
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") && strcmp(red, "min"))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "reduction '%s'", red);
    if (k < 1 || k > r)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad index depth");
    int64_t rows;
    rlx_node p = nd_rows(n, idx, dd, 0, k, &rows);
    int64_t U = onnx_numel(ri - 1, id), R = onnx_numel(r - k, dd + k);
    p = rlx_reshape(G, p, 1, &U);
    rlx_node y = onnx_scatter_rows(n, rlx_reshape(G, data, 2, (int64_t[]){rows, R}), p,
                                   rlx_reshape(G, upd, 2, (int64_t[]){U, R}), rows, red);
    return onnx_out_node(n, 0, rlx_reshape(G, y, r, dd));
}

static rlx_status h_compress(onnx_node *n)
{
    const onnx_tensor *c = n->in[1] ? n->in[1]->k : NULL;
    if (!c)
        return onnx_need_const(n, 1, "condition");
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    const Onnx__AttributeProto *a = onnx_attr(n, "axis");
    int axis = 0;
    if (a)
        axis = onnx_norm_axis(a->i, r);
    else {
        int64_t tot = onnx_numel(r, xd);
        x = rlx_reshape(G, x, 1, &tot);
        xd[0] = tot;
        r = 1;
    }
    if (axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int64_t cnt = 0;
    for (int64_t i = 0; i < c->numel && i < xd[axis]; i++)
        cnt += onnx_get_i(c, i) != 0;
    onnx_tensor *ix = onnx_tensor_derived(RLX_I64, 1, &cnt);
    if (!ix)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    int64_t k = 0;
    for (int64_t i = 0; i < c->numel && i < xd[axis]; i++)
        if (onnx_get_i(c, i))
            ((int64_t *)ix->data)[k++] = i;
    return onnx_out_node(n, 0, rlx_gather(G, x, onnx_const_node(n, ix), axis));
}

static rlx_status h_onehot(onnx_node *n)
{
    double depth;
    if (!onnx_const_scalar(n, 1, &depth))
        return onnx_need_const(n, 1, "depth");
    const onnx_tensor *v = onnx_in_const(n, 2);
    if (!v || v->numel != 2)
        return onnx_need_const(n, 2, "values");
    int64_t id[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, id);
    if (r + 1 > RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "rank");
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", -1), r + 1);
    if (!(depth >= 1 && depth <= (double)ONNX_FOLD_MAX_NUMEL))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad depth");
    int64_t D = (int64_t)depth;
    if (D < 1 || axis < 0 || axis > r)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad depth or axis");
    rlx_node idx = onnx_to_i64(n, onnx_in(n, 0));
    idx = onnx_wrap_index(n, idx, D);
    int64_t ud[RLX_MAX_DIMS], rd[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i <= r; i++) {
        ud[i] = i == axis ? 1 : id[k];
        rd[i] = i == axis ? D : 1;
        if (i != axis)
            k++;
    }
    onnx_tensor *rg = onnx_tensor_derived(RLX_I64, r + 1, rd);
    if (!rg)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < D; i++)
        ((int64_t *)rg->data)[i] = i;
    rlx_node eq = rlx_equal(G, rlx_reshape(G, idx, r + 1, ud), onnx_const_node(n, rg));
    rlx_dtype t = v->dtype;
    rlx_node off = onnx_scalar(n, t, onnx_get_f(v, 0)), on = onnx_scalar(n, t, onnx_get_f(v, 1));
    if (n->in[2]->init) { /* a param: read from the graph, so that it trains */
        rlx_node vn = onnx_in(n, 2);
        off = rlx_reshape(G, rlx_slice(G, vn, 1, (int[]){0}, (int64_t[]){0}, (int64_t[]){1}, (int64_t[]){1}), 0, NULL);
        on = rlx_reshape(G, rlx_slice(G, vn, 1, (int[]){0}, (int64_t[]){1}, (int64_t[]){2}, (int64_t[]){1}), 0, NULL);
    }
    return onnx_out_node(n, 0, rlx_where(G, eq, on, off));
}

/* ReverseSequence with lengths known at import: a GatherElements along the
 * time axis with constant indices. */
static rlx_status h_reverse_sequence(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    const onnx_tensor *lens = n->in[1]->k;
    if (!lens)
        return onnx_need_const(n, 1, "sequence_lens");
    int ta = (int)onnx_attr_i(n, "time_axis", 0), ba = (int)onnx_attr_i(n, "batch_axis", 1);
    if (r < 2 || ta < 0 || ta > 1 || ba < 0 || ba > 1 || ta == ba || lens->numel != xd[ba])
        return onnx_fail(n, RLX_ERR_SHAPE, "bad axes or sequence_lens");
    if (onnx_numel(r, xd) > ONNX_FOLD_MAX_NUMEL * 16)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "input too large");
    onnx_tensor *idx = onnx_tensor_derived(RLX_I64, r, xd);
    if (!idx)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    int64_t inner = onnx_numel(r - 2, xd + 2);
    for (int64_t f = 0; f < idx->numel; f++) {
        int64_t a0 = f / (xd[1] * inner), a1 = (f / inner) % xd[1];
        int64_t t = ta == 0 ? a0 : a1, b = ta == 0 ? a1 : a0;
        int64_t L = onnx_get_i(lens, b);
        if (L < 0 || L > xd[ta]) {
            onnx_tensor_free(idx);
            return onnx_fail(n, RLX_ERR_SHAPE, "sequence length %lld out of range", (long long)L);
        }
        ((int64_t *)idx->data)[f] = t < L ? L - 1 - t : t;
    }
    return onnx_out_node(n, 0, onnx_gather_elements(n, x, onnx_const_node(n, idx), ta));
}

static rlx_status h_trilu(onnx_node *n)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, xd);
    if (r < 2)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs rank >= 2");
    int64_t k = 0;
    if (n->n_in > 1 && n->in[1]) {
        int c = onnx_const_ints(n, 1, &k, 1);
        if (c == -2)
            return onnx_need_const(n, 1, "k");
    }
    int upper = (int)onnx_attr_i(n, "upper", 1);
    int64_t N = xd[r - 2], M = xd[r - 1];
    onnx_tensor *m = onnx_tensor_derived(RLX_BOOL, 2, (int64_t[]){N, M});
    if (!m)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < M; j++)
            ((uint8_t *)m->data)[i * M + j] = upper ? (j - i >= k) : (j - i <= k);
    rlx_dtype t = onnx_in_dtype(n, 0);
    return onnx_out_node(n, 0, rlx_where(G, onnx_const_node(n, m), onnx_in(n, 0), onnx_scalar(n, t, 0)));
}

const onnx_op onnx_gather_ops[] = {
    ONNX_OP("Gather", h_gather, 2),
    ONNX_OP("GatherElements", h_gather_elements, 2),
    ONNX_OP("ScatterElements", h_scatter_elements, 3),
    ONNX_OP("Scatter", h_scatter_elements, 3),
    ONNX_OP("GatherND", h_gather_nd, 2),
    ONNX_OP("ScatterND", h_scatter_nd, 3),
    ONNX_OP("Trilu", h_trilu, 1),
    ONNX_OP("OneHot", h_onehot, 3),
    ONNX_OP("Compress", h_compress, 2),
    ONNX_OP("ReverseSequence", h_reverse_sequence, 2),
    ONNX_OP_END,
};
