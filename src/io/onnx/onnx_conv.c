/* onnx_conv.c - convolution and pooling: Conv, ConvTranspose, the max,
 * average and Lp pools (windowed and global), MaxUnpool and Col2Im.  Three spatial
 * dims go through onnx_conv3d.c. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

/* Spatial attributes of a conv/pool node, with auto_pad resolved. */
typedef struct spatial {
    int ns;
    int64_t in[3], k[3], stride[3], dil[3], pads[6];
} spatial;

static rlx_status get_spatial(onnx_node *n, rlx_node x, const int64_t *kernel, int ns, int ceil_mode, spatial *s)
{
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    memset(s, 0, sizeof *s);
    s->ns = ns;
    if (xr != ns + 2)
        return onnx_fail(n, RLX_ERR_SHAPE, "input rank %d does not fit %d spatial dims", xr, ns);
    int64_t tmp[8];
    for (int i = 0; i < ns; i++) {
        s->in[i] = xd[2 + i];
        s->k[i] = kernel[i];
        s->stride[i] = 1;
        s->dil[i] = 1;
    }
    int c = onnx_attr_ints(n, "strides", tmp, 8);
    if (c > 0) {
        if (c != ns)
            return onnx_fail(n, RLX_ERR_FORMAT, "strides has %d values for %d spatial dims", c, ns);
        for (int i = 0; i < ns; i++)
            s->stride[i] = tmp[i];
    }
    c = onnx_attr_ints(n, "dilations", tmp, 8);
    if (c > 0) {
        if (c != ns)
            return onnx_fail(n, RLX_ERR_FORMAT, "dilations has %d values", c);
        for (int i = 0; i < ns; i++)
            s->dil[i] = tmp[i];
    }
    c = onnx_attr_ints(n, "pads", tmp, 8);
    if (c > 0) {
        if (c != 2 * ns)
            return onnx_fail(n, RLX_ERR_FORMAT, "pads has %d values", c);
        for (int i = 0; i < 2 * ns; i++)
            s->pads[i] = tmp[i];
    }
    for (int i = 0; i < ns; i++) {
        if (s->stride[i] < 1 || s->dil[i] < 1 || s->k[i] < 1 || s->stride[i] > (1 << 20) || s->dil[i] > (1 << 20) ||
            s->k[i] > (1 << 20))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad kernel/stride/dilation");
        if (s->pads[i] < 0 || s->pads[ns + i] < 0 || s->pads[i] > (1 << 20) || s->pads[ns + i] > (1 << 20))
            return onnx_fail(n, RLX_ERR_FORMAT, "pads negative or too large");
    }
    char buf[32];
    const char *ap = onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
        for (int i = 0; i < ns; i++) {
            int64_t out = (s->in[i] + s->stride[i] - 1) / s->stride[i];
            int64_t ek = (s->k[i] - 1) * s->dil[i] + 1;
            int64_t total = (out - 1) * s->stride[i] + ek - s->in[i];
            if (total < 0)
                total = 0;
            int64_t small = total / 2, big = total - small;
            s->pads[i] = !strcmp(ap, "SAME_UPPER") ? small : big;
            s->pads[ns + i] = !strcmp(ap, "SAME_UPPER") ? big : small;
        }
    } else if (!strcmp(ap, "VALID")) {
        for (int i = 0; i < 2 * ns; i++)
            s->pads[i] = 0;
    }
    (void)ceil_mode;
    return RLX_OK;
}

/* Conv over 3 spatial dims is not in RLX: folded 1-d/2-d only. */
static rlx_status h_conv(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0), w = onnx_in(n, 1);
    int64_t wd[RLX_MAX_DIMS];
    int wr = onnx_shape(n, w, wd);
    int ns = wr - 2;
    if (ns == 3)
        return onnx_conv3d(n, x, w, n->n_in >= 3 && n->in[2] ? onnx_in(n, 2) : -1);
    if (ns < 1 || ns > 2)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "convolution over %d spatial dims (RLX has 1 and 2)", ns);
    int64_t k[3] = {wd[2], ns > 1 ? wd[3] : 1, 1};
    int64_t tmp[8];
    int c = onnx_attr_ints(n, "kernel_shape", tmp, 8);
    if (c == ns)
        for (int i = 0; i < ns; i++)
            if (tmp[i] != k[i])
                return onnx_fail(n, RLX_ERR_SHAPE, "kernel_shape does not match the weights");
    spatial s;
    rlx_status st = get_spatial(n, x, k, ns, 0, &s);
    if (st != RLX_OK)
        return st;
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    for (int i = 0; i < ns; i++) {
        p.stride[i] = s.stride[i];
        p.dilation[i] = s.dil[i];
        p.pads[i] = s.pads[i];
        p.pads[ns + i] = s.pads[ns + i];
    }
    p.groups = onnx_attr_i(n, "group", 1);
    rlx_node b = n->n_in >= 3 && n->in[2] ? onnx_in(n, 2) : -1;
    return onnx_out_node(n, 0, rlx_conv(n->c->g, x, w, b, &p));
}

/* A transposed conv whose stride equals its kernel (no pads, no dilation,
 * one group: the 2x upsampling of segmentation heads) writes each input
 * pixel's own KHxKW tile: one product x [N*H*W, C] @ w [C, O*KH*KW] and a
 * reshuffle, instead of a conv over an input with zeros inserted (which
 * spends KH*KW times the multiplies on zeros). */
static rlx_node conv_transpose_tiles(onnx_node *n, rlx_node x, rlx_node w, const int64_t *xd, const int64_t *wd)
{
    rlx_graph *g = n->c->g;
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], O = wd[1], KH = wd[2], KW = wd[3];
    rlx_node xt = rlx_transpose(g, x, (int[]){0, 2, 3, 1});
    rlx_node xm = rlx_reshape(g, xt, 2, (int64_t[]){N * H * W, C});
    rlx_node wm = rlx_reshape(g, w, 2, (int64_t[]){C, O * KH * KW});
    rlx_node y = rlx_matmul(g, xm, wm, 0, 0);
    y = rlx_reshape(g, y, 6, (int64_t[]){N, H, W, O, KH, KW});
    y = rlx_transpose(g, y, (int[]){0, 3, 1, 4, 2, 5}); /* [N, O, H, KH, W, KW] */
    y = rlx_reshape(g, y, 4, (int64_t[]){N, O, H * KH, W * KW});
    if (n->n_in >= 3 && n->in[2])
        y = rlx_add(g, y, rlx_reshape(g, onnx_in(n, 2), 3, (int64_t[]){O, 1, 1}));
    return y;
}

static rlx_status h_conv_transpose(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0), w = onnx_in(n, 1);
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd), wr = onnx_shape(n, w, wd);
    int ns = wr - 2;
    if (ns < 1 || ns > 3 || xr != wr)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "transposed convolution over %d spatial dims", ns);
    int64_t grp = onnx_attr_i(n, "group", 1);
    if (grp < 1 || wd[0] % grp || xd[1] != wd[0])
        return onnx_fail(n, RLX_ERR_SHAPE, "channels do not match the weights");
    int64_t tmp[8], stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pads[6] = {0}, opad[3] = {0}, oshape[3] = {-1, -1, -1};
    int c;
    if ((c = onnx_attr_ints(n, "strides", tmp, 8)) == ns)
        memcpy(stride, tmp, sizeof(int64_t) * (size_t)ns);
    if ((c = onnx_attr_ints(n, "dilations", tmp, 8)) == ns)
        memcpy(dil, tmp, sizeof(int64_t) * (size_t)ns);
    if ((c = onnx_attr_ints(n, "pads", tmp, 8)) == 2 * ns)
        memcpy(pads, tmp, sizeof(int64_t) * (size_t)(2 * ns));
    if ((c = onnx_attr_ints(n, "output_padding", tmp, 8)) == ns)
        memcpy(opad, tmp, sizeof(int64_t) * (size_t)ns);
    int has_os = onnx_attr_ints(n, "output_shape", tmp, 8);
    if (has_os >= ns)
        for (int i = 0; i < ns; i++)
            oshape[i] = tmp[has_os - ns + i];
    char buf[32];
    const char *ap = onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
    bool same = !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER");
    for (int i = 0; i < ns; i++) {
        if (stride[i] < 1 || dil[i] < 1 || stride[i] > 4096 || dil[i] > 4096 || pads[i] < 0 || pads[ns + i] < 0 ||
            pads[i] > (1 << 20) || pads[ns + i] > (1 << 20) || opad[i] < 0 || opad[i] > (1 << 20) ||
            oshape[i] > (1 << 24) || wd[2 + i] > 4096 || xd[2 + i] > (1 << 24))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad stride, dilation, pads or output shape");
        int64_t k = wd[2 + i], ek = (k - 1) * dil[i] + 1;
        if (same && oshape[i] < 0)
            oshape[i] = xd[2 + i] * stride[i];
        if (oshape[i] >= 0) {
            int64_t total = stride[i] * (xd[2 + i] - 1) + opad[i] + ek - oshape[i];
            if (total < 0) { /* a larger output than the natural size: extra zeros at the end */
                opad[i] -= total;
                total = 0;
            }
            if (!strcmp(ap, "SAME_UPPER")) {
                pads[i] = total / 2;
                pads[ns + i] = total - total / 2;
            } else {
                pads[i] = total - total / 2;
                pads[ns + i] = total / 2;
            }
        } else if (!strcmp(ap, "VALID")) {
            pads[i] = pads[ns + i] = 0;
        }
    }
    if (ns == 2 && grp == 1 && !opad[0] && !opad[1] && !pads[0] && !pads[1] && !pads[2] && !pads[3] && dil[0] == 1 &&
        dil[1] == 1 && stride[0] == wd[2] && stride[1] == wd[3])
        return onnx_out_node(n, 0, conv_transpose_tiles(n, x, w, xd, wd));
    /* 1. insert stride-1 zeros between input pixels */
    rlx_node z = x;
    for (int i = 0; i < ns; i++) {
        if (stride[i] == 1)
            continue;
        int ax = 2 + i;
        int64_t cur[RLX_MAX_DIMS];
        int cr = onnx_shape(n, z, cur);
        int64_t rd[RLX_MAX_DIMS];
        int k2 = 0;
        for (int d = 0; d < cr; d++) {
            rd[k2++] = cur[d];
            if (d == ax)
                rd[k2++] = 1;
        }
        rlx_node r = rlx_reshape(g, z, cr + 1, rd);
        int64_t pp[2 * RLX_MAX_DIMS] = {0};
        pp[(cr + 1) + ax + 1] = stride[i] - 1;
        r = rlx_pad(g, r, pp, RLX_PAD_CONSTANT, 0);
        int64_t md[RLX_MAX_DIMS];
        for (int d = 0; d < cr; d++)
            md[d] = cur[d];
        md[ax] = cur[ax] * stride[i];
        r = rlx_reshape(g, r, cr, md);
        int axi = ax;
        int64_t s0 = 0, e0 = (cur[ax] - 1) * stride[i] + 1;
        z = rlx_slice(g, r, 1, &axi, &s0, &e0, NULL);
    }
    /* 2. pad by dilation*(k-1) - pad (negative: crop) and output_padding */
    int64_t pp[2 * RLX_MAX_DIMS] = {0};
    int64_t crop_b[3] = {0}, crop_e[3] = {0};
    bool need_pad = false, need_crop = false;
    for (int i = 0; i < ns; i++) {
        int64_t k = wd[2 + i];
        int64_t b = dil[i] * (k - 1) - pads[i], e = dil[i] * (k - 1) - pads[ns + i] + opad[i];
        if (b >= 0)
            pp[2 + i] = b;
        else
            crop_b[i] = -b;
        if (e >= 0)
            pp[xr + 2 + i] = e;
        else
            crop_e[i] = -e;
        need_pad |= b > 0 || e > 0;
        need_crop |= b < 0 || e < 0;
    }
    if (need_pad)
        z = rlx_pad(g, z, pp, RLX_PAD_CONSTANT, 0);
    if (need_crop) {
        int64_t cur[RLX_MAX_DIMS];
        onnx_shape(n, z, cur);
        int axes[3];
        int64_t st[3], en[3];
        for (int i = 0; i < ns; i++) {
            axes[i] = 2 + i;
            st[i] = crop_b[i];
            en[i] = cur[2 + i] - crop_e[i];
        }
        z = rlx_slice(g, z, ns, axes, st, en, NULL);
    }
    /* 3. weights [Cin, Cout/g, k..] -> [Cout, Cin/g, k..], flipped */
    int64_t cin = wd[0], coutg = wd[1];
    int64_t r5[RLX_MAX_DIMS] = {grp, cin / grp, coutg};
    for (int i = 0; i < ns; i++)
        r5[3 + i] = wd[2 + i];
    rlx_node wt = rlx_reshape(g, w, 3 + ns, r5);
    int perm[RLX_MAX_DIMS] = {0, 2, 1, 3, 4, 5};
    wt = rlx_transpose(g, wt, perm);
    int64_t r4[RLX_MAX_DIMS] = {grp * coutg, cin / grp};
    for (int i = 0; i < ns; i++)
        r4[2 + i] = wd[2 + i];
    wt = rlx_reshape(g, wt, 2 + ns, r4);
    int faxes[3];
    int64_t fs[3], fe[3], fst[3];
    for (int i = 0; i < ns; i++) {
        faxes[i] = 2 + i;
        fs[i] = -1;
        fe[i] = INT64_MIN;
        fst[i] = -1;
    }
    wt = rlx_slice(g, wt, ns, faxes, fs, fe, fst);
    rlx_node b = n->n_in >= 3 && n->in[2] ? onnx_in(n, 2) : -1;
    if (ns == 3) {
        int64_t one[3] = {1, 1, 1}, zero[6] = {0};
        return onnx_out_node(n, 0, onnx_conv3d_p(n, z, wt, b, one, dil, zero, grp));
    }
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    for (int i = 0; i < ns; i++)
        p.dilation[i] = dil[i];
    p.groups = grp;
    return onnx_out_node(n, 0, rlx_conv(g, z, wt, b, &p));
}

static rlx_status h_pool(onnx_node *n)
{
    const char *op = n->p->op_type;
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS], k[8];
    int xr = onnx_shape(n, x, xd);
    int ns = onnx_attr_ints(n, "kernel_shape", k, 8);
    if (ns < 1 || ns != xr - 2)
        return onnx_fail(n, RLX_ERR_FORMAT, "kernel_shape must list every spatial dim");
    if (n->n_out > 1 && n->p->output[1] && *n->p->output[1]) {
        if (!strcmp(op, "MaxPool") && ns == 2)
            return onnx_maxpool_indices(n, x, k);
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "the Indices output of MaxPool over %d spatial dims", ns);
    }
    if (ns == 3 && (!strcmp(op, "MaxPool") || !strcmp(op, "AveragePool")))
        return onnx_pool3d(n, x, k, !strcmp(op, "MaxPool"));
    if (ns > 2)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "pooling over %d spatial dims (RLX has 1 to 3)", ns);
    spatial s;
    int ceil_mode = (int)onnx_attr_i(n, "ceil_mode", 0);
    rlx_status st = get_spatial(n, x, k, ns, ceil_mode, &s);
    if (st != RLX_OK)
        return st;
    rlx_pool_params p;
    rlx_pool_params_init(&p, k[0]);
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = i < ns ? s.k[i] : 1;
        p.stride[i] = i < ns ? s.stride[i] : 1;
        p.dilation[i] = i < ns ? s.dil[i] : 1;
    }
    for (int i = 0; i < 2 * ns; i++)
        p.pads[i] = s.pads[i];
    p.ceil_mode = ceil_mode;
    p.count_include_pad = (int)onnx_attr_i(n, "count_include_pad", 0);
    if (!strcmp(op, "MaxPool")) {
        rlx_dtype t = onnx_in_dtype(n, 0);
        if (!onnx_dtype_is_float(t)) /* exact through f32 for 8-bit types */
            return onnx_out_node(n, 0, rlx_cast(n->c->g, rlx_max_pool(n->c->g, rlx_cast(n->c->g, x, RLX_F32), &p), t));
        return onnx_out_node(n, 0, rlx_max_pool(n->c->g, x, &p));
    }
    if (!strcmp(op, "AveragePool"))
        return onnx_out_node(n, 0, rlx_avg_pool(n->c->g, x, &p));
    /* LpPool: (sum over the window of |x|^p)^(1/p), the sum as an average
     * that counts the padding, times the window size */
    double pw = (double)onnx_attr_i(n, "p", 2);
    rlx_graph *g = n->c->g;
    rlx_dtype t = onnx_in_dtype(n, 0);
    p.count_include_pad = 1;
    int64_t win = 1;
    for (int i = 0; i < ns; i++)
        win *= s.k[i];
    rlx_node xp = pw == 2 ? rlx_mul(g, x, x) : rlx_pow(g, rlx_abs(g, x), onnx_scalar(n, t, pw));
    rlx_node sum = rlx_mul(g, rlx_avg_pool(g, xp, &p), onnx_scalar(n, t, (double)win));
    return onnx_out_node(n, 0, pw == 2 ? rlx_sqrt(g, sum) : rlx_pow(g, sum, onnx_scalar(n, t, 1.0 / pw)));
}

static rlx_status h_global_pool(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd);
    if (xr < 3)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs [N, C, spatial...]");
    int axes[RLX_MAX_DIMS];
    for (int i = 2; i < xr; i++)
        axes[i - 2] = i;
    const char *op = n->p->op_type;
    if (!strcmp(op, "GlobalAveragePool"))
        return onnx_out_node(n, 0, rlx_reduce_mean(g, x, xr - 2, axes, 1));
    if (!strcmp(op, "GlobalMaxPool"))
        return onnx_out_node(n, 0, rlx_reduce_max(g, x, xr - 2, axes, 1));
    double pw = (double)onnx_attr_i(n, "p", 2);
    rlx_dtype t = onnx_in_dtype(n, 0);
    rlx_node xp = pw == 2 ? rlx_mul(g, x, x) : rlx_pow(g, rlx_abs(g, x), onnx_scalar(n, t, pw));
    rlx_node s = rlx_reduce_sum(g, xp, xr - 2, axes, 1);
    return onnx_out_node(n, 0, pw == 2 ? rlx_sqrt(g, s) : rlx_pow(g, s, onnx_scalar(n, t, 1.0 / pw)));
}

/* MaxUnpool: values scattered to their (flat, whole-tensor) indices in a
 * zero tensor, by a one-hot matmul. */
static rlx_status h_maxunpool(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0), ind = onnx_in(n, 1);
    int64_t xd[RLX_MAX_DIMS], k[8], st[8], pd[8] = {0}, od[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd), ns = r - 2;
    if (ns < 1 || ns > 3 || onnx_attr_ints(n, "kernel_shape", k, 8) != ns)
        return onnx_fail(n, RLX_ERR_FORMAT, "kernel_shape");
    for (int i = 0; i < ns; i++)
        st[i] = 1;
    if (onnx_attr_ints(n, "strides", st, 8) < 0)
        for (int i = 0; i < ns; i++)
            st[i] = 1;
    onnx_attr_ints(n, "pads", pd, 8);
    /* scatter into the shape the pooling came from; an explicit output_shape
     * (at least as large) adds zeros at the end of each spatial dim */
    od[0] = xd[0];
    od[1] = xd[1];
    for (int i = 0; i < ns; i++) {
        if (st[i] < 1 || k[i] < 1 || st[i] > (1 << 20) || k[i] > (1 << 20) || pd[i] < 0 || pd[ns + i] < 0 ||
            pd[i] > (1 << 20) || pd[ns + i] > (1 << 20) || xd[2 + i] > ONNX_MAX_NUMEL)
            return onnx_fail(n, RLX_ERR_FORMAT, "bad kernel, stride or pads");
        od[2 + i] = (xd[2 + i] - 1) * st[i] + k[i] - pd[i] - pd[ns + i];
    }
    if (!onnx_dims_ok(r, od))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad output shape");
    int64_t want[RLX_MAX_DIMS];
    memcpy(want, od, sizeof want);
    if (n->n_in > 2 && n->in[2]) {
        int c = onnx_const_ints(n, 2, want, RLX_MAX_DIMS);
        if (c == -2)
            return onnx_need_const(n, 2, "output_shape");
        if (c != r)
            return onnx_fail(n, RLX_ERR_SHAPE, "output_shape rank");
        for (int i = 0; i < r; i++)
            if (want[i] < od[i] || (i < 2 && want[i] != od[i]) || want[i] > ONNX_MAX_NUMEL)
                return onnx_fail(n, RLX_ERR_SHAPE, "output_shape smaller than the unpooled shape");
    }
    int64_t U = onnx_numel(r, xd), P = onnx_numel(r, od);
    rlx_dtype t = onnx_in_dtype(n, 0);
    rlx_node zeros = rlx_expand(G, onnx_scalar(n, t, 0), 2, (int64_t[]){P, 1});
    rlx_node y = onnx_scatter_rows(n, zeros, rlx_reshape(G, onnx_to_i64(n, ind), 1, &U),
                                   rlx_reshape(G, x, 2, (int64_t[]){U, 1}), P, "none");
    y = rlx_reshape(G, y, r, od);
    int64_t pads[2 * RLX_MAX_DIMS] = {0};
    bool padded = false;
    for (int i = 0; i < r; i++) {
        pads[r + i] = want[i] - od[i];
        padded |= pads[r + i] != 0;
    }
    if (padded)
        y = rlx_pad(G, y, pads, RLX_PAD_CONSTANT, 0);
    return onnx_out_node(n, 0, y);
}

/* Col2Im (opset 18, 2-d): the columns [N, C*kh*kw, L] as [N, C, kh, kw,
 * oh, ow]; each kernel tap (i, j) spreads its [oh, ow] block over the
 * padded image at stride (a pad after each element, then a reshape) and
 * offset (i*dh, j*dw) (a pad around it); the taps add up, and the image
 * is cut out of the padding. */
static rlx_status h_col2im(onnx_node *n)
{
    rlx_graph *g = n->c->g;
    int64_t xd[RLX_MAX_DIMS], im[3], bl[3], dl[2] = {1, 1}, st[2] = {1, 1}, pd[4] = {0, 0, 0, 0};
    int r = onnx_in_shape(n, 0, xd);
    int ni = onnx_const_ints(n, 1, im, 3), nb = onnx_const_ints(n, 2, bl, 3);
    if (ni == -2)
        return onnx_need_const(n, 1, "image_shape");
    if (nb == -2)
        return onnx_need_const(n, 2, "block_shape");
    if (ni != 2 || nb != 2)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "only 2-d images (image_shape has %d values, block_shape %d)", ni, nb);
    if ((onnx_attr_ints(n, "dilations", dl, 2) != 2 && onnx_attr(n, "dilations")) ||
        (onnx_attr_ints(n, "strides", st, 2) != 2 && onnx_attr(n, "strides")) ||
        (onnx_attr_ints(n, "pads", pd, 4) != 4 && onnx_attr(n, "pads")))
        return onnx_fail(n, RLX_ERR_FORMAT, "dilations and strides take 2 values, pads 4");
    int64_t kh = bl[0], kw = bl[1], H = im[0], W = im[1];
    if (kh < 1 || kw < 1 || H < 1 || W < 1 || dl[0] < 1 || dl[1] < 1 || st[0] < 1 || st[1] < 1 || pd[0] < 0 ||
        pd[1] < 0 || pd[2] < 0 || pd[3] < 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad image, block, dilations, strides or pads");
    /* bounded first, so that the products below cannot overflow */
    if (kh > 1024 || kw > 1024 || kh * kw > 1024)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "a block of %lld x %lld taps", (long long)kh, (long long)kw);
    for (int i = 0; i < 4; i++)
        if ((i < 2 && (dl[i] > ONNX_MAX_NUMEL || st[i] > ONNX_MAX_NUMEL || im[i] > ONNX_MAX_NUMEL)) ||
            pd[i] > ONNX_MAX_NUMEL)
            return onnx_fail(n, RLX_ERR_SHAPE, "image, dilations, strides or pads beyond %lld",
                             (long long)ONNX_MAX_NUMEL);
    int64_t Hp = H + pd[0] + pd[2], Wp = W + pd[1] + pd[3];
    int64_t oh = (Hp - dl[0] * (kh - 1) - 1) / st[0] + 1, ow = (Wp - dl[1] * (kw - 1) - 1) / st[1] + 1;
    if (r != 3 || oh < 1 || ow < 1 || oh > ONNX_MAX_NUMEL / ow || xd[1] % (kh * kw) || xd[2] != oh * ow)
        return onnx_fail(n, RLX_ERR_SHAPE, "input must be [N, C*%lld, %lld] for this image and block",
                         (long long)(kh * kw), (long long)(oh > 0 && ow > 0 ? oh * ow : 0));
    int64_t N = xd[0], C = xd[1] / (kh * kw);
    rlx_node x6 = rlx_reshape(g, onnx_in(n, 0), 6, (int64_t[]){N, C, kh, kw, oh, ow}), sum = -1;
    for (int64_t i = 0; i < kh; i++)
        for (int64_t j = 0; j < kw; j++) {
            int ax[2] = {2, 3};
            int64_t s0[2] = {i, j}, e0[2] = {i + 1, j + 1};
            rlx_node b = rlx_reshape(g, rlx_slice(g, x6, 2, ax, s0, e0, NULL), 6, (int64_t[]){N, C, oh, 1, ow, 1});
            int64_t sp[12] = {0};
            sp[6 + 3] = st[0] - 1;
            sp[6 + 5] = st[1] - 1;
            if (st[0] > 1 || st[1] > 1)
                b = rlx_pad(g, b, sp, RLX_PAD_CONSTANT, 0);
            b = rlx_reshape(g, b, 4, (int64_t[]){N, C, oh * st[0], ow * st[1]});
            /* rows from i*dh: oh*sh of them, cut to the padded image */
            int64_t r0 = i * dl[0], c0 = j * dl[1];
            int64_t nr = oh * st[0] < Hp - r0 ? oh * st[0] : Hp - r0, nc = ow * st[1] < Wp - c0 ? ow * st[1] : Wp - c0;
            int ax2[2] = {2, 3};
            int64_t z[2] = {0, 0}, en[2] = {nr, nc};
            if (nr != oh * st[0] || nc != ow * st[1])
                b = rlx_slice(g, b, 2, ax2, z, en, NULL);
            int64_t pp[8] = {0, 0, r0, c0, 0, 0, Hp - r0 - nr, Wp - c0 - nc};
            b = rlx_pad(g, b, pp, RLX_PAD_CONSTANT, 0);
            sum = sum < 0 ? b : rlx_add(g, sum, b);
        }
    if (pd[0] || pd[1] || pd[2] || pd[3]) {
        int ax[2] = {2, 3};
        int64_t s0[2] = {pd[0], pd[1]}, e0[2] = {pd[0] + H, pd[1] + W};
        sum = rlx_slice(g, sum, 2, ax, s0, e0, NULL);
    }
    return onnx_out_node(n, 0, sum);
}

const onnx_op onnx_conv_ops[] = {
    ONNX_OP("Col2Im", h_col2im, 3),
    ONNX_OP("Conv", h_conv, 2),
    ONNX_OP("ConvTranspose", h_conv_transpose, 2),
    ONNX_OP("MaxPool", h_pool, 1),
    ONNX_OP("AveragePool", h_pool, 1),
    ONNX_OP("LpPool", h_pool, 1),
    ONNX_OP("GlobalAveragePool", h_global_pool, 1),
    ONNX_OP("GlobalMaxPool", h_global_pool, 1),
    ONNX_OP("GlobalLpPool", h_global_pool, 1),
    ONNX_OP("MaxUnpool", h_maxunpool, 2),
    ONNX_OP_END,
};
