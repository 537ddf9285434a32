/* onnx_shape.c - ops that move data without computing on it: Shape, Size,
 * Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Slice, Concat, Split,
 * Expand, Pad, CenterCropPad, Tile, DepthToSpace/SpaceToDepth.  A constant input gives a
 * constant output, folded on the host. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"

/* Reshape a value to dims, keeping it a host constant when it is one. */
static rlx_status out_reshaped(onnx_node *n, int i, int nd, const int64_t *dims)
{
    if (n->in[i]->k) {
        onnx_tensor *y = onnx_tensor_clone(n->in[i]->k);
        if (!y)
            return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
        int64_t numel = 1;
        for (int d = 0; d < nd; d++)
            numel *= dims[d];
        if (numel != y->numel) {
            onnx_tensor_free(y);
            return onnx_fail(n, RLX_ERR_SHAPE, "cannot reshape %lld elements", (long long)numel);
        }
        y->ndim = nd;
        for (int d = 0; d < nd; d++)
            y->dims[d] = dims[d];
        return onnx_out_const(n, 0, y);
    }
    for (int d = 0; d < nd; d++)
        if (dims[d] == 0) /* an empty result (RLX's reshape reads 0 as "keep this dim") */
            return onnx_out_const(n, 0, onnx_tensor_derived(onnx_in_dtype(n, i), nd, dims));
    return onnx_out_node(n, 0, onnx_reshape(n, onnx_in(n, i), nd, dims));
}

static rlx_status h_shape(onnx_node *n)
{
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, d);
    int64_t start = onnx_attr_i(n, "start", 0), end = onnx_attr_i(n, "end", r);
    if (start < 0)
        start += r;
    if (end < 0)
        end += r;
    if (start < 0)
        start = 0;
    if (end > r)
        end = r;
    int64_t len = end > start ? end - start : 0;
    onnx_tensor *k = onnx_tensor_derived(RLX_I64, 1, &len);
    if (k)
        for (int64_t i = 0; i < len; i++)
            ((int64_t *)k->data)[i] = d[start + i];
    return onnx_out_const(n, 0, k);
}

static rlx_status h_size(onnx_node *n)
{
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, d);
    int64_t s = 1;
    for (int i = 0; i < r; i++)
        s *= d[i];
    onnx_tensor *k = onnx_tensor_derived(RLX_I64, 0, NULL);
    if (k)
        *(int64_t *)k->data = s;
    return onnx_out_const(n, 0, k);
}

static rlx_status h_reshape(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS], sh[RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    int ns;
    if (n->opset < 5) {
        ns = onnx_attr_ints(n, "shape", sh, RLX_MAX_DIMS + 1);
        if (ns < 0)
            return onnx_fail(n, RLX_ERR_FORMAT, "no shape");
    } else {
        ns = onnx_const_ints(n, 1, sh, RLX_MAX_DIMS + 1);
        if (ns == -2)
            return onnx_need_const(n, 1, "shape");
        if (ns < 0)
            return onnx_fail(n, RLX_ERR_FORMAT, "missing shape");
    }
    if (ns > RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "rank above %d", RLX_MAX_DIMS);
    int allowzero = (int)onnx_attr_i(n, "allowzero", 0);
    for (int i = 0; i < ns; i++)
        if (sh[i] < -1 || sh[i] > ONNX_MAX_NUMEL)
            return onnx_fail(n, RLX_ERR_SHAPE, "bad dim %lld", (long long)sh[i]);
    int64_t total = 1, known = 1;
    for (int i = 0; i < r; i++)
        total *= in[i];
    int infer = -1;
    for (int i = 0; i < ns; i++) {
        if (sh[i] == 0 && !allowzero) {
            if (i >= r)
                return onnx_fail(n, RLX_ERR_SHAPE, "0 in shape at %d beyond the input's rank", i);
            sh[i] = in[i];
        }
        if (sh[i] == -1) {
            if (infer >= 0)
                return onnx_fail(n, RLX_ERR_SHAPE, "two -1 in shape");
            infer = i;
        } else if (sh[i] < 0)
            return onnx_fail(n, RLX_ERR_SHAPE, "bad dim %lld", (long long)sh[i]);
        else {
            if (sh[i] && known > ONNX_MAX_NUMEL / sh[i])
                return onnx_fail(n, RLX_ERR_SHAPE, "shape too large");
            known *= sh[i];
        }
    }
    if (infer >= 0) {
        if (known == 0 || total % known)
            return onnx_fail(n, RLX_ERR_SHAPE, "cannot infer -1");
        sh[infer] = total / known;
    } else if (known != total)
        return onnx_fail(n, RLX_ERR_SHAPE, "shape has %lld elements, input %lld", (long long)known, (long long)total);
    return out_reshaped(n, 0, ns, sh);
}

static rlx_status h_flatten(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, in);
    int64_t a = onnx_attr_i(n, "axis", 1);
    int axis = a == r ? r : onnx_norm_axis(a, r);
    if (axis < 0 || axis > r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int64_t d[2] = {1, 1};
    for (int i = 0; i < r; i++)
        d[i < axis ? 0 : 1] *= in[i];
    return out_reshaped(n, 0, 2, d);
}

static rlx_status h_squeeze(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS], ax[RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    int na;
    if (n->opset >= 13) {
        na = n->n_in >= 2 && n->in[1] ? onnx_const_ints(n, 1, ax, RLX_MAX_DIMS + 1) : -1;
        if (na == -2)
            return onnx_need_const(n, 1, "axes");
    } else
        na = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    uint32_t mask = 0;
    if (na < 0) {
        for (int i = 0; i < r; i++)
            if (in[i] == 1)
                mask |= 1u << i;
    } else
        for (int i = 0; i < na; i++) {
            int a = onnx_norm_axis(ax[i], r);
            if (a < 0 || a >= r || in[a] != 1)
                return onnx_fail(n, RLX_ERR_SHAPE, "cannot squeeze axis %lld", (long long)ax[i]);
            mask |= 1u << a;
        }
    int64_t d[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < r; i++)
        if (!(mask & (1u << i)))
            d[k++] = in[i];
    return out_reshaped(n, 0, k, d);
}

static rlx_status h_unsqueeze(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS], ax[RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    int na;
    if (n->opset >= 13) {
        na = onnx_const_ints(n, 1, ax, RLX_MAX_DIMS + 1);
        if (na == -2)
            return onnx_need_const(n, 1, "axes");
    } else
        na = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    if (na < 0)
        return onnx_fail(n, RLX_ERR_FORMAT, "no axes");
    int orank = r + na;
    if (orank > RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "rank above %d", RLX_MAX_DIMS);
    uint32_t mask = 0;
    for (int i = 0; i < na; i++) {
        int a = onnx_norm_axis(ax[i], orank);
        if (a < 0 || a >= orank || (mask & (1u << a)))
            return onnx_fail(n, RLX_ERR_SHAPE, "bad axis %lld", (long long)ax[i]);
        mask |= 1u << a;
    }
    int64_t d[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < orank; i++)
        d[i] = (mask & (1u << i)) ? 1 : in[k++];
    return out_reshaped(n, 0, orank, d);
}

static rlx_status h_transpose(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS], pv[RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    int perm[RLX_MAX_DIMS];
    int np = onnx_attr_ints(n, "perm", pv, RLX_MAX_DIMS + 1);
    if (np < 0) {
        for (int i = 0; i < r; i++)
            perm[i] = r - 1 - i;
    } else {
        if (np != r)
            return onnx_fail(n, RLX_ERR_SHAPE, "perm has %d entries for rank %d", np, r);
        uint32_t seen = 0;
        for (int i = 0; i < r; i++) {
            int a = onnx_norm_axis(pv[i], r);
            if (a < 0 || a >= r || (seen & (1u << a)))
                return onnx_fail(n, RLX_ERR_SHAPE, "bad perm");
            seen |= 1u << a;
            perm[i] = a;
        }
    }
    if (n->in[0]->k && n->in[0]->k->numel <= ONNX_FOLD_MAX_NUMEL)
        return onnx_out_const(n, 0, onnx_fold_transpose(n->in[0]->k, perm));
    return onnx_out_node(n, 0, rlx_transpose(n->c->g, onnx_in(n, 0), perm));
}

static int64_t clamp_b(int64_t v, int64_t n, int64_t step)
{
    if (v < 0)
        v += n;
    if (step > 0)
        return v < 0 ? 0 : (v > n ? n : v);
    return v < -1 ? -1 : (v > n - 1 ? n - 1 : v);
}

static rlx_status h_slice(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, in);
    int64_t st[RLX_MAX_DIMS + 1], en[RLX_MAX_DIMS + 1], ax[RLX_MAX_DIMS + 1], sp[RLX_MAX_DIMS + 1];
    int ns, ne, na, nsp = -1;
    if (n->opset < 10) {
        ns = onnx_attr_ints(n, "starts", st, RLX_MAX_DIMS + 1);
        ne = onnx_attr_ints(n, "ends", en, RLX_MAX_DIMS + 1);
        na = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    } else {
        ns = onnx_const_ints(n, 1, st, RLX_MAX_DIMS + 1);
        ne = onnx_const_ints(n, 2, en, RLX_MAX_DIMS + 1);
        na = n->n_in > 3 && n->in[3] ? onnx_const_ints(n, 3, ax, RLX_MAX_DIMS + 1) : -1;
        nsp = n->n_in > 4 && n->in[4] ? onnx_const_ints(n, 4, sp, RLX_MAX_DIMS + 1) : -1;
        if (ns == -2 || ne == -2 || na == -2 || nsp == -2)
            return onnx_need_const(n, 1, "starts/ends/axes/steps");
    }
    if (ns < 0 || ne != ns || ns > r)
        return onnx_fail(n, RLX_ERR_FORMAT, "starts and ends must have one value per axis");
    if (na < 0) {
        na = ns;
        for (int i = 0; i < ns; i++)
            ax[i] = i;
    }
    if (na != ns || (nsp >= 0 && nsp != ns))
        return onnx_fail(n, RLX_ERR_FORMAT, "axes/steps length mismatch");
    if (nsp < 0)
        for (int i = 0; i < ns; i++)
            sp[i] = 1;
    int64_t start[RLX_MAX_DIMS], step[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++) {
        start[i] = 0;
        step[i] = 1;
        od[i] = in[i];
    }
    int axes[RLX_MAX_DIMS];
    uint32_t seen = 0;
    for (int i = 0; i < ns; i++) {
        int a = onnx_norm_axis(ax[i], r);
        if (a < 0 || a >= r || (seen & (1u << a)))
            return onnx_fail(n, RLX_ERR_SHAPE, "bad axis %lld", (long long)ax[i]);
        seen |= 1u << a;
        if (sp[i] == 0 || sp[i] == INT64_MIN)
            return onnx_fail(n, RLX_ERR_FORMAT, "step %lld", (long long)sp[i]);
        axes[i] = a;
        int64_t s = clamp_b(st[i], in[a], sp[i]), e = clamp_b(en[i], in[a], sp[i]);
        /* (distance - 1) / |step| + 1: no overflow for any step */
        int64_t cnt = sp[i] > 0 ? (e > s ? (e - s - 1) / sp[i] + 1 : 0) : (s > e ? (s - e - 1) / (-sp[i]) + 1 : 0);
        od[a] = cnt;
        start[a] = cnt ? s : 0;
        step[a] = sp[i];
    }
    if (n->in[0]->k && n->in[0]->k->numel <= ONNX_FOLD_MAX_NUMEL)
        return onnx_out_const(n, 0, onnx_fold_slice(n->in[0]->k, start, step, od));
    return onnx_out_node(n, 0, rlx_slice(n->c->g, onnx_in(n, 0), ns, axes, st, en, sp));
}

static rlx_status h_concat(onnx_node *n)
{
    if (n->n_in < 1)
        return onnx_fail(n, RLX_ERR_FORMAT, "no inputs");
    int r = onnx_value_rank(n->c, n->in[0]);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    bool allk = true;
    int64_t tot = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i])
            return onnx_fail(n, RLX_ERR_FORMAT, "empty input");
        if (!n->in[i]->k)
            allk = false;
        else
            tot += n->in[i]->k->numel;
    }
    if (allk && tot <= ONNX_FOLD_MAX_NUMEL) {
        onnx_tensor *ks[64];
        for (int i = 0; i < n->n_in; i++)
            ks[i] = n->in[i]->k;
        onnx_tensor *y = onnx_fold_concat(ks, n->n_in, axis);
        if (!y)
            return onnx_fail(n, RLX_ERR_SHAPE, "inputs do not concatenate");
        return onnx_out_const(n, 0, y);
    }
    rlx_node xs[64];
    int k = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t d[RLX_MAX_DIMS];
        int dr = onnx_in_shape(n, i, d);
        if (dr == r && d[axis] == 0)
            continue; /* empty parts add nothing */
        xs[k++] = onnx_in(n, i);
    }
    if (k == 0)
        return onnx_pass_through(n, 0, 0);
    return onnx_out_node(n, 0, rlx_concat(n->c->g, k, xs, axis));
}

static rlx_status h_split(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS], sz[17];
    int r = onnx_in_shape(n, 0, in);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis out of range");
    int ns;
    if (n->opset >= 13) {
        ns = n->n_in >= 2 && n->in[1] ? onnx_const_ints(n, 1, sz, 17) : -1;
        if (ns == -2)
            return onnx_need_const(n, 1, "split");
    } else
        ns = onnx_attr_ints(n, "split", sz, 17);
    int no = n->n_out;
    if (ns < 0) {
        int64_t num = onnx_attr_i(n, "num_outputs", no);
        if (num < 1 || num > 16)
            return onnx_fail(n, RLX_ERR_FORMAT, "bad number of outputs");
        int64_t each = (in[axis] + num - 1) / num;
        for (int i = 0; i < num; i++) {
            int64_t left = in[axis] - each * i;
            sz[i] = left < each ? (left > 0 ? left : 0) : each;
        }
        ns = (int)num;
    }
    if (ns != no)
        return onnx_fail(n, RLX_ERR_FORMAT, "%d split sizes for %d outputs", ns, no);
    int64_t start = 0;
    for (int i = 0; i < ns; i++) {
        int64_t end = start + sz[i];
        if (sz[i] < 0 || end > in[axis])
            return onnx_fail(n, RLX_ERR_SHAPE, "split sizes exceed the axis");
        rlx_status st;
        if (n->in[0]->k && n->in[0]->k->numel <= ONNX_FOLD_MAX_NUMEL) {
            int64_t s0[RLX_MAX_DIMS] = {0}, sp[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
            for (int d = 0; d < r; d++) {
                sp[d] = 1;
                od[d] = in[d];
            }
            s0[axis] = start;
            od[axis] = sz[i];
            st = onnx_out_const(n, i, onnx_fold_slice(n->in[0]->k, s0, sp, od));
        } else
            st = onnx_out_node(n, i, rlx_slice(n->c->g, onnx_in(n, 0), 1, &axis, &start, &end, NULL));
        if (st != RLX_OK)
            return st;
        start = end;
    }
    if (start != in[axis])
        return onnx_fail(n, RLX_ERR_SHAPE, "split sizes do not cover the axis");
    return RLX_OK;
}

static rlx_status h_expand(onnx_node *n)
{
    int64_t sh[RLX_MAX_DIMS + 1];
    int ns = onnx_const_ints(n, 1, sh, RLX_MAX_DIMS + 1);
    if (ns == -2)
        return onnx_need_const(n, 1, "shape");
    if (ns < 0 || ns > RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad shape");
    if (!onnx_dims_ok(ns, sh))
        return onnx_fail(n, RLX_ERR_SHAPE, "shape negative or too large");
    int64_t in[RLX_MAX_DIMS], od[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, in), orank;
    if (!onnx_fold_broadcast(r, in, ns, sh, &orank, od))
        return onnx_fail(n, RLX_ERR_SHAPE, "shapes do not broadcast");
    if (!onnx_dims_ok(orank, od))
        return onnx_fail(n, RLX_ERR_SHAPE, "result too large");
    if (n->in[0]->k) {
        int64_t numel = 1;
        for (int i = 0; i < orank; i++)
            numel *= od[i];
        if (numel <= ONNX_FOLD_MAX_NUMEL)
            return onnx_out_const(n, 0, onnx_fold_expand(n->in[0]->k, ns, sh));
    }
    bool same = orank == r;
    for (int i = 0; same && i < r; i++)
        same = od[i] == in[i];
    if (same)
        return onnx_pass_through(n, 0, 0);
    return onnx_out_node(n, 0, rlx_expand(n->c->g, onnx_in(n, 0), ns, sh));
}

/* Pad mode "wrap" (opset 19): per padded axis a gather of the indices
 * (j - begin) mod dim, so pads longer than the axis wrap around again. */
static rlx_node pad_wrap(onnx_node *n, rlx_node x, const int64_t *pads)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    for (int a = 0; a < r && x >= 0; a++) {
        int64_t b = pads[a], e = pads[r + a], len = xd[a] + b + e;
        if (!b && !e)
            continue;
        if (xd[a] == 0) {
            rlx_set_error(RLX_ERR_SHAPE, "wrap padding of an empty axis %d", a);
            return -1;
        }
        onnx_tensor *k = onnx_tensor_derived(RLX_I64, 1, &len); /* an index table: capped */
        if (!k)
            return -1;
        for (int64_t j = 0; j < len; j++)
            ((int64_t *)k->data)[j] = (((j - b) % xd[a]) + xd[a]) % xd[a];
        x = rlx_gather(n->c->g, x, onnx_const_node(n, k), a);
    }
    return x;
}

/* CenterCropPad (opset 18): per axis, a centred slice where the target is
 * smaller, zeros around where it is larger (the extra element after). */
static rlx_status h_center_crop_pad(onnx_node *n)
{
    int64_t in[RLX_MAX_DIMS], sh[RLX_MAX_DIMS + 1], ax[RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    int ns = onnx_const_ints(n, 1, sh, RLX_MAX_DIMS + 1);
    if (ns == -2)
        return onnx_need_const(n, 1, "shape");
    int na = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
    if (na < 0) {
        na = r;
        for (int i = 0; i < r; i++)
            ax[i] = i;
    }
    if (ns != na)
        return onnx_fail(n, RLX_ERR_FORMAT, "shape has %d values for %d axes", ns, na);
    rlx_node x = onnx_in(n, 0);
    int64_t pads[2 * RLX_MAX_DIMS] = {0};
    int sl_axes[RLX_MAX_DIMS], nsl = 0;
    int64_t st[RLX_MAX_DIMS], en[RLX_MAX_DIMS];
    bool pad = false;
    for (int i = 0; i < na; i++) {
        int a = onnx_norm_axis(ax[i], r);
        if (a < 0 || a >= r)
            return onnx_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)ax[i], r);
        if (sh[i] < 0)
            return onnx_fail(n, RLX_ERR_SHAPE, "negative target size %lld", (long long)sh[i]);
        if (sh[i] < in[a]) {
            sl_axes[nsl] = a;
            st[nsl] = (in[a] - sh[i]) / 2;
            en[nsl] = st[nsl] + sh[i];
            nsl++;
        } else if (sh[i] > in[a]) {
            pads[a] = (sh[i] - in[a]) / 2;
            pads[r + a] = sh[i] - in[a] - pads[a];
            pad = true;
        }
    }
    if (nsl)
        x = rlx_slice(n->c->g, x, nsl, sl_axes, st, en, NULL);
    if (pad)
        x = rlx_pad(n->c->g, x, pads, RLX_PAD_CONSTANT, 0);
    if (!nsl && !pad)
        return onnx_pass_through(n, 0, 0);
    return onnx_out_node(n, 0, x);
}

static rlx_status h_pad(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t in[RLX_MAX_DIMS], pads[2 * RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    char buf[32];
    const char *mode = onnx_attr_s(n, "mode", "constant", buf, sizeof buf);
    double value = 0;
    int np;
    if (n->opset < 11) {
        np = onnx_attr_ints(n, "pads", pads, 2 * RLX_MAX_DIMS + 1);
        value = onnx_attr_f(n, "value", 0.0);
    } else {
        np = onnx_const_ints(n, 1, pads, 2 * RLX_MAX_DIMS + 1);
        if (np == -2)
            return onnx_need_const(n, 1, "pads");
        if (n->n_in > 2 && n->in[2]) {
            if (!onnx_const_scalar(n, 2, &value))
                return onnx_need_const(n, 2, "constant_value");
        }
        if (n->n_in > 3 && n->in[3]) {
            int64_t ax[RLX_MAX_DIMS + 1];
            int na = onnx_const_ints(n, 3, ax, RLX_MAX_DIMS + 1);
            if (na < 0 || np != 2 * na)
                return onnx_fail(n, RLX_ERR_FORMAT, "bad axes");
            int64_t full[2 * RLX_MAX_DIMS] = {0};
            for (int i = 0; i < na; i++) {
                int a = onnx_norm_axis(ax[i], r);
                if (a < 0 || a >= r)
                    return onnx_fail(n, RLX_ERR_SHAPE, "bad axis");
                full[a] = pads[i];
                full[r + a] = pads[na + i];
            }
            memcpy(pads, full, sizeof full);
            np = 2 * r;
        }
    }
    if (np != 2 * r)
        return onnx_fail(n, RLX_ERR_FORMAT, "pads has %d values for rank %d", np, r);
    for (int i = 0; i < 2 * r; i++)
        if (pads[i] > (INT64_C(1) << 31) || pads[i] < -(INT64_C(1) << 31))
            return onnx_fail(n, RLX_ERR_SHAPE, "pad too large");
    rlx_pad_mode m = RLX_PAD_CONSTANT;
    bool wrap = !strcmp(mode, "wrap");
    if (wrap)
        ; /* opset 19: gathers below */
    else if (!strcmp(mode, "constant"))
        m = RLX_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect"))
        m = RLX_PAD_REFLECT;
    else if (!strcmp(mode, "edge"))
        m = RLX_PAD_EDGE;
    else
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "pad mode '%s'", mode);
    rlx_node x = onnx_in(n, 0);
    /* negative pads crop */
    int axes[RLX_MAX_DIMS], na = 0;
    int64_t st[RLX_MAX_DIMS], en[RLX_MAX_DIMS];
    bool any = false;
    for (int i = 0; i < r; i++) {
        if (pads[i] < 0 || pads[r + i] < 0) {
            axes[na] = i;
            st[na] = pads[i] < 0 ? -pads[i] : 0;
            en[na] = in[i] - (pads[r + i] < 0 ? -pads[r + i] : 0);
            na++;
            if (pads[i] < 0)
                pads[i] = 0;
            if (pads[r + i] < 0)
                pads[r + i] = 0;
        }
        if (pads[i] || pads[r + i])
            any = true;
    }
    if (na)
        x = rlx_slice(g, x, na, axes, st, en, NULL);
    if (!any) {
        if (!na)
            return onnx_pass_through(n, 0, 0);
        return onnx_out_node(n, 0, x);
    }
    if (wrap) {
        int64_t xd[RLX_MAX_DIMS];
        onnx_shape(n, x, xd);
        for (int i = 0; i < r; i++)
            if ((pads[i] || pads[r + i]) && xd[i] <= 0)
                return onnx_fail(n, RLX_ERR_SHAPE, "wrap padding of axis %d, which is empty", i);
        return onnx_out_node(n, 0, pad_wrap(n, x, pads));
    }
    return onnx_out_node(n, 0, rlx_pad(g, x, pads, m, value));
}

/* Tile: reshape to [1, d0, 1, d1, ...], expand to [r0, d0, r1, d1, ...], reshape. */
static rlx_status h_tile(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t in[RLX_MAX_DIMS], rep[RLX_MAX_DIMS + 1];
    int r = onnx_in_shape(n, 0, in);
    int nr = onnx_const_ints(n, 1, rep, RLX_MAX_DIMS + 1);
    if (nr == -2)
        return onnx_need_const(n, 1, "repeats");
    if (nr != r)
        return onnx_fail(n, RLX_ERR_SHAPE, "repeats has %d values for rank %d", nr, r);
    rlx_node x = onnx_in(n, 0);
    bool trivial = true;
    for (int i = 0; i < r; i++) {
        if (rep[i] < 0 || rep[i] > ONNX_MAX_NUMEL)
            return onnx_fail(n, RLX_ERR_SHAPE, "bad repeat %lld", (long long)rep[i]);
        trivial &= rep[i] == 1;
    }
    if (trivial)
        return onnx_pass_through(n, 0, 0);
    {
        int64_t od[RLX_MAX_DIMS];
        for (int i = 0; i < r; i++) {
            if (rep[i] && in[i] > ONNX_MAX_NUMEL / rep[i])
                return onnx_fail(n, RLX_ERR_SHAPE, "result too large");
            od[i] = in[i] * rep[i];
        }
        if (!onnx_dims_ok(r, od))
            return onnx_fail(n, RLX_ERR_SHAPE, "result too large");
    }
    /* one axis at a time keeps the rank within RLX_MAX_DIMS */
    for (int a = 0; a < r; a++) {
        if (rep[a] == 1)
            continue;
        int64_t cur[RLX_MAX_DIMS], d1[RLX_MAX_DIMS], d2[RLX_MAX_DIMS];
        int cr = onnx_shape(n, x, cur);
        if (cr + 1 > RLX_MAX_DIMS)
            return onnx_fail(n, RLX_ERR_UNSUPPORTED, "rank too high for Tile");
        int k = 0;
        for (int i = 0; i < cr; i++) {
            if (i == a) {
                d1[k] = 1;
                d2[k++] = rep[a];
            }
            d1[k] = cur[i];
            d2[k++] = cur[i];
        }
        x = rlx_expand(g, rlx_reshape(g, x, cr + 1, d1), cr + 1, d2);
        cur[a] *= rep[a];
        x = rlx_reshape(g, x, cr, cur);
    }
    return onnx_out_node(n, 0, x);
}

static rlx_status h_depth_space(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t in[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, in);
    if (r != 4)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs rank 4");
    int64_t b = onnx_attr_i(n, "blocksize", 0);
    if (b < 1 || b > (1 << 20))
        return onnx_fail(n, RLX_ERR_FORMAT, "bad blocksize %lld", (long long)b);
    int64_t N = in[0], C = in[1], H = in[2], W = in[3];
    rlx_node x = onnx_in(n, 0), y;
    if (!strcmp(n->p->op_type, "DepthToSpace")) {
        if (C % (b * b))
            return onnx_fail(n, RLX_ERR_SHAPE, "channels not divisible");
        char buf[16];
        const char *mode = onnx_attr_s(n, "mode", "DCR", buf, sizeof buf);
        int64_t c2 = C / (b * b);
        if (!strcmp(mode, "CRD")) {
            y = rlx_reshape(g, x, 6, (int64_t[]){N, c2, b, b, H, W});
            y = rlx_transpose(g, y, (int[]){0, 1, 4, 2, 5, 3});
        } else {
            y = rlx_reshape(g, x, 6, (int64_t[]){N, b, b, c2, H, W});
            y = rlx_transpose(g, y, (int[]){0, 3, 4, 1, 5, 2});
        }
        y = rlx_reshape(g, y, 4, (int64_t[]){N, c2, H * b, W * b});
    } else {
        if (H % b || W % b)
            return onnx_fail(n, RLX_ERR_SHAPE, "spatial dims not divisible");
        y = rlx_reshape(g, x, 6, (int64_t[]){N, C, H / b, b, W / b, b});
        y = rlx_transpose(g, y, (int[]){0, 3, 5, 1, 2, 4});
        y = rlx_reshape(g, y, 4, (int64_t[]){N, C * b * b, H / b, W / b});
    }
    return onnx_out_node(n, 0, y);
}

const onnx_op onnx_shape_ops[] = {
    ONNX_OP("Shape", h_shape, 1),
    ONNX_OP("Size", h_size, 1),
    ONNX_OP_SINCE("Reshape", h_reshape, 1, 5, 2),
    ONNX_OP("Flatten", h_flatten, 1),
    ONNX_OP("Squeeze", h_squeeze, 1),
    ONNX_OP_SINCE("Unsqueeze", h_unsqueeze, 1, 13, 2),
    ONNX_OP("Transpose", h_transpose, 1),
    ONNX_OP_SINCE("Slice", h_slice, 1, 10, 3),
    ONNX_OP("Concat", h_concat, 1),
    ONNX_OP("Split", h_split, 1),
    ONNX_OP("Expand", h_expand, 2),
    ONNX_OP_SINCE("Pad", h_pad, 1, 11, 2),
    ONNX_OP("Tile", h_tile, 2),
    ONNX_OP("CenterCropPad", h_center_crop_pad, 2),
    ONNX_OP("DepthToSpace", h_depth_space, 1),
    ONNX_OP("SpaceToDepth", h_depth_space, 1),
    ONNX_OP_END,
};
