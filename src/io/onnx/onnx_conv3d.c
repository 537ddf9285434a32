/* onnx_conv3d.c - convolution and pooling over 3 spatial dims, built from the
 * 2-d primitives: the depth axis becomes a sum (conv) or a max/mean (pool)
 * over strided depth slices of 2-d results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "ir/ir.h" /* rlx_graph_fail */

#define G (n->c->g)

/* Reads strides/dilations/pads/auto_pad for 3 spatial dims of x [N,C,D,H,W]. */
static rlx_status attrs3(onnx_node *n, const int64_t *xd, const int64_t *k, int64_t *st, int64_t *dl, int64_t *pd,
                         int ceil_mode)
{
    int64_t tmp[8];
    for (int i = 0; i < 3; i++)
        st[i] = dl[i] = 1;
    for (int i = 0; i < 6; i++)
        pd[i] = 0;
    if (onnx_attr_ints(n, "strides", tmp, 8) == 3)
        memcpy(st, tmp, 3 * sizeof *st);
    if (onnx_attr_ints(n, "dilations", tmp, 8) == 3)
        memcpy(dl, tmp, 3 * sizeof *dl);
    if (onnx_attr_ints(n, "pads", tmp, 8) == 6)
        memcpy(pd, tmp, 6 * sizeof *pd);
    for (int i = 0; i < 3; i++)
        if (st[i] < 1 || dl[i] < 1 || k[i] < 1 || pd[i] < 0 || pd[3 + i] < 0 || k[i] > (1 << 20) || st[i] > (1 << 20) ||
            dl[i] > (1 << 20) || pd[i] > (1 << 20) || pd[3 + i] > (1 << 20))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad kernel, stride, dilation or pads");
    char buf[32];
    const char *ap = onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < 3; i++) {
            int64_t in = xd[2 + i], out = (in + st[i] - 1) / st[i];
            int64_t total = (out - 1) * st[i] + (k[i] - 1) * dl[i] + 1 - in;
            if (total < 0)
                total = 0;
            pd[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            pd[3 + i] = total - pd[i];
        }
    } else if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < 6; i++)
            pd[i] = 0;
    }
    (void)ceil_mode;
    return RLX_OK;
}

/* Depth slice kz of a depth-padded x: start kz*dil, step stride, `cnt` planes. */
static rlx_node depth_tap(onnx_node *n, rlx_node x, int64_t kz, int64_t dil, int64_t stride, int64_t cnt)
{
    int ax = 2;
    int64_t s = kz * dil, e = s + (cnt - 1) * stride + 1, step = stride;
    return rlx_slice(G, x, 1, &ax, &s, &e, &step);
}

/* 3-d convolution with explicit parameters; pd: 3 begins then 3 ends. */
rlx_node onnx_conv3d_p(onnx_node *n, rlx_node x, rlx_node w, rlx_node b, const int64_t *st, const int64_t *dl,
                       const int64_t *pd, int64_t groups)
{
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    if (onnx_shape(n, x, xd) != 5 || onnx_shape(n, w, wd) != 5)
        return rlx_graph_fail(G, RLX_ERR_SHAPE, "conv3d: needs 5-d input and weights");
    int64_t N = xd[0], C = xd[1], O = wd[0], Dp = xd[2] + pd[0] + pd[3];
    int64_t ekd = (wd[2] - 1) * dl[0] + 1;
    if (Dp < ekd)
        return rlx_graph_fail(G, RLX_ERR_SHAPE, "conv3d: kernel deeper than the padded input");
    if (wd[2] > 256)
        return rlx_graph_fail(G, RLX_ERR_UNSUPPORTED, "conv3d: kernel depth %lld", (long long)wd[2]);
    int64_t Do = (Dp - ekd) / st[0] + 1;
    rlx_node xp = x;
    if (pd[0] || pd[3]) {
        int64_t pads[10] = {0};
        pads[2] = pd[0];
        pads[5 + 2] = pd[3];
        xp = rlx_pad(G, x, pads, RLX_PAD_CONSTANT, 0);
    }
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.stride[0] = st[1];
    p.stride[1] = st[2];
    p.dilation[0] = dl[1];
    p.dilation[1] = dl[2];
    p.pads[0] = pd[1];
    p.pads[1] = pd[2];
    p.pads[2] = pd[4];
    p.pads[3] = pd[5];
    p.groups = groups;
    rlx_node acc = -1;
    for (int64_t kz = 0; kz < wd[2]; kz++) {
        rlx_node xs = depth_tap(n, xp, kz, dl[0], st[0], Do); /* [N, C, Do, H, W] */
        xs = rlx_transpose(G, xs, (int[]){0, 2, 1, 3, 4});    /* [N, Do, C, H, W] */
        xs = rlx_reshape(G, xs, 4, (int64_t[]){N * Do, C, xd[3], xd[4]});
        int ax = 2;
        int64_t s0 = kz, e0 = kz + 1;
        rlx_node wz = rlx_reshape(G, rlx_slice(G, w, 1, &ax, &s0, &e0, NULL), 4, (int64_t[]){O, wd[1], wd[3], wd[4]});
        rlx_node y = rlx_conv(G, xs, wz, kz == 0 ? b : -1, &p); /* [N*Do, O, Ho, Wo] */
        acc = acc < 0 ? y : rlx_add(G, acc, y);
    }
    int64_t yd[RLX_MAX_DIMS];
    onnx_shape(n, acc, yd);
    acc = rlx_reshape(G, acc, 5, (int64_t[]){N, Do, O, yd[2], yd[3]});
    return rlx_transpose(G, acc, (int[]){0, 2, 1, 3, 4});
}

rlx_status onnx_conv3d(onnx_node *n, rlx_node x, rlx_node w, rlx_node b)
{
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    if (onnx_shape(n, x, xd) != 5 || onnx_shape(n, w, wd) != 5)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs 5-d input and weights");
    int64_t st[3], dl[3], pd[6];
    rlx_status s = attrs3(n, xd, wd + 2, st, dl, pd, 0);
    if (s != RLX_OK)
        return s;
    return onnx_out_node(n, 0, onnx_conv3d_p(n, x, w, b, st, dl, pd, onnx_attr_i(n, "group", 1)));
}

rlx_status onnx_pool3d(onnx_node *n, rlx_node x, const int64_t *k, bool is_max)
{
    int64_t xd[RLX_MAX_DIMS];
    if (onnx_shape(n, x, xd) != 5)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs a 5-d input");
    int ceil_mode = (int)onnx_attr_i(n, "ceil_mode", 0);
    int cip = (int)onnx_attr_i(n, "count_include_pad", 0);
    int64_t st[3], dl[3], pd[6];
    rlx_status s = attrs3(n, xd, k, st, dl, pd, ceil_mode);
    if (s != RLX_OK)
        return s;
    if (k[0] > 256)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "kernel depth %lld", (long long)k[0]);
    int64_t N = xd[0], C = xd[1], D = xd[2];
    /* 2-d pooling of every depth plane */
    rlx_pool_params p;
    rlx_pool_params_init(&p, k[1]);
    p.kernel[0] = k[1];
    p.kernel[1] = k[2];
    p.stride[0] = st[1];
    p.stride[1] = st[2];
    p.dilation[0] = dl[1];
    p.dilation[1] = dl[2];
    p.pads[0] = pd[1];
    p.pads[1] = pd[2];
    p.pads[2] = pd[4];
    p.pads[3] = pd[5];
    p.ceil_mode = ceil_mode;
    p.count_include_pad = cip;
    rlx_node planes = rlx_reshape(G, x, 4, (int64_t[]){N, C * D, xd[3], xd[4]});
    planes = is_max ? rlx_max_pool(G, planes, &p) : rlx_avg_pool(G, planes, &p);
    int64_t pdim[RLX_MAX_DIMS];
    onnx_shape(n, planes, pdim);
    rlx_node y = rlx_reshape(G, planes, 5, (int64_t[]){N, C, D, pdim[2], pdim[3]});
    /* then the depth window */
    int64_t ek = (k[0] - 1) * dl[0] + 1, span = D + pd[0] + pd[3] - ek;
    if (span < 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "kernel deeper than the padded input");
    int64_t Do = (ceil_mode ? (span + st[0] - 1) / st[0] : span / st[0]) + 1;
    if (ceil_mode && (Do - 1) * st[0] >= D + pd[0])
        Do--;
    int64_t extra = (Do - 1) * st[0] + ek - (D + pd[0] + pd[3]);
    if (extra < 0)
        extra = 0;
    rlx_dtype t = rlx_node_dtype(G, y);
    int64_t pads[10] = {0};
    pads[2] = pd[0];
    pads[5 + 2] = pd[3] + extra;
    rlx_node yp = pads[2] || pads[7] ? rlx_pad(G, y, pads, RLX_PAD_CONSTANT, is_max ? -INFINITY : 0) : y;
    rlx_node acc = -1;
    for (int64_t kz = 0; kz < k[0]; kz++) {
        rlx_node tap = depth_tap(n, yp, kz, dl[0], st[0], Do);
        acc = acc < 0 ? tap : (is_max ? rlx_max(G, acc, tap) : rlx_add(G, acc, tap));
    }
    if (!is_max) {
        /* divide by the window's depth count: all of it, or the non-pad part */
        onnx_tensor *cnt = onnx_tensor_derived(t == RLX_F64 ? RLX_F64 : RLX_F32, 5, (int64_t[]){1, 1, Do, 1, 1});
        if (!cnt)
            return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        for (int64_t o = 0; o < Do; o++) {
            int64_t c = 0;
            for (int64_t kz = 0; kz < k[0]; kz++) {
                int64_t z = o * st[0] + kz * dl[0] - pd[0];
                if (cip ? (z < D + pd[3]) : (z >= 0 && z < D))
                    c++;
            }
            onnx_set_f(cnt, o, c ? 1.0 / (double)c : 0);
        }
        rlx_node cn = rlx_constant(G, cnt->dtype, 5, cnt->dims, cnt->data, cnt->bytes);
        onnx_tensor_free(cnt);
        if (rlx_node_dtype(G, cn) != t)
            cn = rlx_cast(G, cn, t);
        acc = rlx_mul(G, acc, cn);
    }
    return onnx_out_node(n, 0, acc);
}

/* MaxPool with its Indices output (2-d): a running max over the window taps,
 * each a strided slice of the -inf padded input, keeping the first
 * maximum's flat index (row-major, or column-major for storage_order 1). */
rlx_status onnx_maxpool_indices(onnx_node *n, rlx_node x, const int64_t *k)
{
    int64_t xd[RLX_MAX_DIMS];
    if (onnx_shape(n, x, xd) != 4)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "MaxPool indices for 2-d pooling only");
    int ceil_mode = (int)onnx_attr_i(n, "ceil_mode", 0), order = (int)onnx_attr_i(n, "storage_order", 0);
    int64_t st[2] = {1, 1}, dl[2] = {1, 1}, pd[4] = {0, 0, 0, 0}, tmp[8];
    if (onnx_attr_ints(n, "strides", tmp, 8) == 2)
        memcpy(st, tmp, sizeof st);
    if (onnx_attr_ints(n, "dilations", tmp, 8) == 2)
        memcpy(dl, tmp, sizeof dl);
    if (onnx_attr_ints(n, "pads", tmp, 8) == 4)
        memcpy(pd, tmp, sizeof pd);
    char buf[32];
    const char *ap = onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], in[2] = {H, W}, out[2];
    for (int i = 0; i < 2; i++) {
        if (st[i] < 1 || dl[i] < 1 || k[i] < 1 || k[i] > 64 || pd[i] < 0 || pd[2 + i] < 0 || st[i] > (1 << 20) ||
            dl[i] > (1 << 20) || pd[i] > (1 << 20) || pd[2 + i] > (1 << 20))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad kernel, stride, dilation or pads");
        int64_t ek = (k[i] - 1) * dl[i] + 1;
        if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
            int64_t o = (in[i] + st[i] - 1) / st[i], total = (o - 1) * st[i] + ek - in[i];
            if (total < 0)
                total = 0;
            pd[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
            pd[2 + i] = total - pd[i];
        } else if (!strcmp(ap, "VALID"))
            pd[i] = pd[2 + i] = 0;
        int64_t span = in[i] + pd[i] + pd[2 + i] - ek;
        if (span < 0)
            return onnx_fail(n, RLX_ERR_SHAPE, "window larger than the padded input");
        out[i] = (ceil_mode ? (span + st[i] - 1) / st[i] : span / st[i]) + 1;
        if (ceil_mode && (out[i] - 1) * st[i] >= in[i] + pd[i])
            out[i]--;
    }
    int64_t pads[8] = {0};
    for (int i = 0; i < 2; i++) {
        int64_t need = (out[i] - 1) * st[i] + (k[i] - 1) * dl[i] + 1 - (in[i] + pd[i]);
        pads[2 + i] = pd[i];
        pads[4 + 2 + i] = need > 0 ? need : 0;
    }
    if (!onnx_dims_ok(4, (int64_t[]){N, C, out[0], out[1]}) || N * C * out[0] * out[1] > ONNX_FOLD_MAX_NUMEL * 16)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "output too large");
    /* one [Ho, Wo] index constant per window tap (N * C may be 0) */
    int64_t cap = ONNX_FOLD_MAX_NUMEL * 16, taps = k[0] * k[1];
    if (out[0] > 0 && out[1] > 0 && (out[0] > cap / out[1] || out[0] * out[1] > cap / taps))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED,
                         "MaxPool indices: %lld window taps of %lld x %lld indices each, too many to expand",
                         (long long)taps, (long long)out[0], (long long)out[1]);
    rlx_node xp = rlx_pad(G, x, pads, RLX_PAD_CONSTANT, -INFINITY);
    onnx_tensor *bt = onnx_tensor_derived(RLX_I64, 4, (int64_t[]){N, C, 1, 1});
    if (!bt)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < N * C; i++)
        ((int64_t *)bt->data)[i] = i * H * W;
    rlx_node base = rlx_constant(G, RLX_I64, 4, bt->dims, bt->data, bt->bytes);
    onnx_tensor_free(bt);
    rlx_node best = -1, bi = -1;
    for (int64_t ky = 0; ky < k[0]; ky++)
        for (int64_t kx = 0; kx < k[1]; kx++) {
            int axes[2] = {2, 3};
            int64_t s0[2] = {ky * dl[0], kx * dl[1]}, e0[2], sp[2] = {st[0], st[1]};
            e0[0] = s0[0] + (out[0] - 1) * st[0] + 1;
            e0[1] = s0[1] + (out[1] - 1) * st[1] + 1;
            rlx_node v = rlx_slice(G, xp, 2, axes, s0, e0, sp);
            /* index = (n*C + c)*H*W + offset of (h, w): a [N, C, 1, 1] base
             * plus a [1, 1, Ho, Wo] offset per tap */
            onnx_tensor *idx = onnx_tensor_derived(RLX_I64, 4, (int64_t[]){1, 1, out[0], out[1]});
            if (!idx)
                return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
            for (int64_t f = 0; f < idx->numel; f++) {
                int64_t ox = f % out[1], oy = f / out[1];
                int64_t h = oy * st[0] + ky * dl[0] - pd[0], w = ox * st[1] + kx * dl[1] - pd[1];
                if (h < 0)
                    h = 0;
                if (h >= H)
                    h = H - 1;
                if (w < 0)
                    w = 0;
                if (w >= W)
                    w = W - 1;
                ((int64_t *)idx->data)[f] = order ? w * H + h : h * W + w;
            }
            rlx_node in_idx = rlx_add(G, base, rlx_constant(G, RLX_I64, 4, idx->dims, idx->data, idx->bytes));
            onnx_tensor_free(idx);
            if (best < 0) {
                best = v;
                bi = in_idx;
            } else {
                rlx_node better = rlx_greater(G, v, best);
                best = rlx_where(G, better, v, best);
                bi = rlx_where(G, better, in_idx, bi);
            }
        }
    rlx_status s = onnx_out_node(n, 0, best);
    if (s == RLX_OK)
        s = onnx_out_node(n, 1, bi);
    return s;
}
