/* onnx_image.c - image resampling at computed coordinates: Resize and
 * Upsample (nearest, linear, cubic; separable, one axis at a time;
 * antialiased downscaling as a weight matrix per axis),
 * GridSample and RoiAlign (taps gathered at run-time indices), AffineGrid
 * (a constant base grid times theta). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

static double cubic_w(double A, double x)
{
    x = fabs(x);
    if (x <= 1)
        return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2)
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0;
}

/* The input coordinate of output index o along an axis (false: an unknown
 * coordinate_transformation_mode, whatever the other arguments). */
static bool resize_coord(const char *ctm, int64_t o, int64_t in, int64_t out, double out_f, double scale, double roi_s,
                         double roi_e, double *x)
{
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
    else if (!strcmp(ctm, "tf_crop_and_resize"))
        xo = out > 1 ? roi_s * (double)(in - 1) + (double)o * (roi_e - roi_s) * (double)(in - 1) / (double)(out - 1)
                     : 0.5 * (roi_s + roi_e) * (double)(in - 1);
    else
        return false;
    *x = xo > -1e9 && xo < 1e9 ? xo : 0; /* NaN or absurd roi/scale: keep the casts defined */
    return true;
}

/* tf_crop_and_resize: extrapolation_value where the coordinate left the
 * input (valid 0; wd: valid's shape broadcast along the axis); takes valid. */
static rlx_node extrapolate(onnx_node *n, rlx_node acc, onnx_tensor *valid, int r, const int64_t *wd, double extrap)
{
    if (!valid)
        return acc;
    rlx_dtype dt = rlx_node_dtype(G, acc);
    rlx_node vn = rlx_reshape(G, onnx_const_node(n, valid), r, wd);
    if (dt != RLX_F32)
        vn = rlx_cast(G, vn, dt);
    return rlx_add(G, rlx_mul(G, acc, vn),
                   rlx_mul(G, rlx_sub(G, onnx_scalar(n, dt, 1), vn), onnx_scalar(n, dt, extrap)));
}

static rlx_status resize_axis(onnx_node *n, rlx_node *x, int axis, int64_t in, int64_t out, double out_f, double scale,
                              const char *mode, const char *ctm, const char *nm, double A, int excl, double roi_s,
                              double roi_e, double extrap)
{
    int taps = !strcmp(mode, "nearest") ? 1 : (!strcmp(mode, "linear") ? 2 : 4);
    onnx_tensor *idx[4] = {0}, *w[4] = {0};
    onnx_tensor *valid = NULL;
    bool crop = !strcmp(ctm, "tf_crop_and_resize");
    bool ok = true;
    for (int t = 0; t < taps; t++) {
        idx[t] = onnx_tensor_derived(RLX_I64, 1, &out);
        w[t] = onnx_tensor_derived(RLX_F32, 1, &out);
        ok &= idx[t] && w[t];
    }
    if (crop)
        ok &= (valid = onnx_tensor_derived(RLX_F32, 1, &out)) != NULL;
    if (!ok) {
        for (int t = 0; t < taps; t++) {
            onnx_tensor_free(idx[t]);
            onnx_tensor_free(w[t]);
        }
        onnx_tensor_free(valid);
        return onnx_fail(n, rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY), "resize tables: %s", rlx_last_error());
    }
    for (int64_t o = 0; o < out; o++) {
        double xo;
        resize_coord(ctm, o, in, out, out_f, scale, roi_s, roi_e, &xo); /* ctm checked by h_resize */
        if (crop)
            ((float *)valid->data)[o] = (xo < 0 || xo > (double)(in - 1)) ? 0.0f : 1.0f;
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
    int r = onnx_shape(n, *x, xd);
    int64_t wd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        wd[i] = i == axis ? out : 1;
    rlx_dtype dt = rlx_node_dtype(G, *x);
    rlx_node acc = -1;
    for (int t = 0; t < taps; t++) {
        rlx_node gt = rlx_gather(G, *x, onnx_const_node(n, idx[t]), axis);
        if (taps == 1) {
            onnx_tensor_free(w[t]);
            acc = gt;
            continue;
        }
        rlx_node wn = rlx_reshape(G, onnx_const_node(n, w[t]), r, wd);
        if (dt != RLX_F32)
            wn = rlx_cast(G, wn, dt);
        rlx_node term = rlx_mul(G, gt, wn);
        acc = acc < 0 ? term : rlx_add(G, acc, term);
    }
    *x = extrapolate(n, acc, valid, r, wd, extrap);
    return RLX_OK;
}

/* Antialiased linear or cubic resampling along one axis (opset 18): when
 * downscaling, the filter is stretched by 1 / scale, so each output reads
 * 2 * ceil(support / scale) taps around its coordinate, weights
 * normalised to sum 1 (then, with exclude_outside, those of taps outside
 * the input dropped and the rest normalised again); taps beyond an edge
 * read the edge.  The taps' weights form a dense [out, in] matrix, applied
 * as a matmul over the axis. */
static rlx_status resize_axis_antialias(onnx_node *n, rlx_node *x, int axis, int64_t in, int64_t out, double out_f,
                                        double scale, bool linear, const char *ctm, double A, int excl, double roi_s,
                                        double roi_e, double extrap)
{
    int64_t wdims[2] = {out, in};
    onnx_tensor *W = onnx_tensor_derived(RLX_F32, 2, wdims);
    bool crop = !strcmp(ctm, "tf_crop_and_resize");
    onnx_tensor *valid = crop ? onnx_tensor_derived(RLX_F32, 1, &out) : NULL;
    double s = scale < 1 ? scale : 1, support = linear ? 1 : 2;
    int64_t start = (int64_t)floor(-support / s) + 1, taps = 2 - 2 * start;
    double *ws = W ? rlx_malloc(sizeof *ws * (size_t)taps) : NULL;
    if (!W || (crop && !valid) || !ws) {
        onnx_tensor_free(W);
        onnx_tensor_free(valid);
        return onnx_fail(n, rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY), "antialias weights: %s", rlx_last_error());
    }
    float *wm = W->data;
    for (int64_t o = 0; o < out; o++) {
        double xo;
        resize_coord(ctm, o, in, out, out_f, scale, roi_s, roi_e, &xo); /* ctm checked by h_resize */
        if (crop)
            ((float *)valid->data)[o] = (xo < 0 || xo > (double)(in - 1)) ? 0.0f : 1.0f;
        /* ratio in (0, 1]: on an integer coordinate the tap left of it leads */
        double ratio = xo - floor(xo);
        if (ratio == 0)
            ratio = 1;
        int64_t base = (int64_t)(xo - ratio);
        double tot = 0, kept = 0;
        for (int64_t i = 0; i < taps; i++) {
            double t = ((double)(start + i) - ratio) * s;
            ws[i] = linear ? fmax(0, 1 - fabs(t)) : cubic_w(A, t);
            tot += ws[i];
        }
        for (int64_t i = 0; i < taps; i++) {
            int64_t k = base + start + i;
            ws[i] = tot != 0 ? ws[i] / tot : 0;
            if (excl && (k < 0 || k >= in))
                ws[i] = 0;
            kept += ws[i];
        }
        for (int64_t i = 0; i < taps; i++) {
            int64_t k = base + start + i;
            k = k < 0 ? 0 : k > in - 1 ? in - 1 : k;
            wm[o * in + k] += (float)(excl && kept != 0 ? ws[i] / kept : ws[i]);
        }
    }
    free(ws);
    /* the axis last, times W^T, and back */
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    int r = onnx_shape(n, *x, xd);
    if (r < 1 || axis < 0 || axis >= r) { /* a crafted rank the sizes did not catch */
        onnx_tensor_free(W);
        return onnx_fail(n, RLX_ERR_SHAPE, "antialias: axis %d of a rank-%d input", axis, r);
    }
    int perm[RLX_MAX_DIMS];
    for (int i = 0, j = 0; i < r; i++)
        if (i != axis)
            perm[j++] = i;
    perm[r - 1] = axis;
    int inv[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        inv[perm[i]] = i;
    for (int i = 0; i < r; i++)
        wd[i] = i == axis ? out : 1;
    rlx_dtype dt = rlx_node_dtype(G, *x);
    rlx_node wn = onnx_const_node(n, W);
    if (dt != RLX_F32)
        wn = rlx_cast(G, wn, dt);
    rlx_node y = rlx_matmul(G, rlx_transpose(G, *x, perm), wn, 0, 1);
    *x = extrapolate(n, rlx_transpose(G, y, inv), valid, r, wd, extrap);
    return RLX_OK;
}

static rlx_status h_resize(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    char b1[32], b2[48], b3[32];
    const char *mode = onnx_attr_s(n, "mode", "nearest", b1, sizeof b1);
    const char *ctm = onnx_attr_s(n, "coordinate_transformation_mode", "half_pixel", b2, sizeof b2);
    const char *nm = onnx_attr_s(n, "nearest_mode", "round_prefer_floor", b3, sizeof b3);
    bool upsample = !strcmp(n->p->op_type, "Upsample");
    if (upsample || n->opset < 11) {
        ctm = "asymmetric";
        if (!strcmp(mode, "nearest"))
            nm = "floor";
    }
    if (!strcmp(mode, "bilinear"))
        mode = "linear";
    if (strcmp(mode, "nearest") && strcmp(mode, "linear") && strcmp(mode, "cubic"))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "mode '%s'", mode);
    double x0;
    if (!resize_coord(ctm, 0, 1, 1, 1, 1, 0, 1, &x0))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "coordinate_transformation_mode '%s'", ctm);
    int64_t antialias = n->opset >= 18 ? onnx_attr_i(n, "antialias", 0) : 0;
    if (antialias != 0 && antialias != 1)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "antialias must be 0 or 1, not %lld", (long long)antialias);
    if (strcmp(mode, "linear") && strcmp(mode, "cubic"))
        antialias = 0; /* the spec's filter stretch applies to linear and cubic only */
    double A = onnx_attr_f(n, "cubic_coeff_a", -0.75), extrap = onnx_attr_f(n, "extrapolation_value", 0.0);
    int excl = (int)onnx_attr_i(n, "exclude_outside", 0);
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
        int c = onnx_attr_floats(n, "scales", f, RLX_MAX_DIMS);
        if (c != r)
            return onnx_fail(n, RLX_ERR_FORMAT, "scales");
        for (int i = 0; i < r; i++)
            scales[i] = f[i];
    } else if (upsample || n->opset < 11)
        si = 1;
    else {
        ri = 1;
        si = 2;
        zi = 3;
    }
    /* opset 18: sizes, scales and roi may list only the axes of `axes` */
    int nax = r, axmap[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        axmap[i] = i;
    if (n->opset >= 18 && onnx_attr(n, "axes")) {
        int64_t ax[RLX_MAX_DIMS + 1];
        nax = onnx_attr_ints(n, "axes", ax, RLX_MAX_DIMS + 1);
        if (nax < 1 || nax > r)
            return onnx_fail(n, RLX_ERR_FORMAT, "axes has %d values for rank %d", nax, r);
        for (int i = 0; i < nax; i++) {
            axmap[i] = onnx_norm_axis(ax[i], r);
            if (axmap[i] < 0 || axmap[i] >= r)
                return onnx_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)ax[i], r);
        }
    }
    bool have_sizes = false;
    if (zi >= 0 && zi < n->n_in && n->in[zi] && (!onnx_in_const(n, zi) || onnx_in_const(n, zi)->numel > 0)) {
        int64_t given[RLX_MAX_DIMS];
        int c = onnx_const_ints(n, zi, given, RLX_MAX_DIMS);
        if (c == -2)
            return onnx_need_const(n, zi, "sizes");
        if (c != nax)
            return onnx_fail(n, RLX_ERR_FORMAT, "sizes has %d values for %d axes", c, nax);
        have_sizes = true;
        for (int i = 0; i < nax; i++)
            sizes[axmap[i]] = given[i];
        for (int i = 0; i < r; i++)
            scales[i] = (double)sizes[i] / (double)xd[i];
        /* opset 18: one scale for the listed axes, the smallest or largest */
        char b4[32];
        const char *pol =
            n->opset >= 18 ? onnx_attr_s(n, "keep_aspect_ratio_policy", "stretch", b4, sizeof b4) : "stretch";
        if (strcmp(pol, "stretch")) {
            bool larger = !strcmp(pol, "not_smaller");
            if (!larger && strcmp(pol, "not_larger"))
                return onnx_fail(n, RLX_ERR_UNSUPPORTED, "keep_aspect_ratio_policy '%s'", pol);
            double sc = scales[axmap[0]];
            for (int i = 1; i < nax; i++)
                sc = larger ? fmax(sc, scales[axmap[i]]) : fmin(sc, scales[axmap[i]]);
            for (int i = 0; i < nax; i++) {
                double sz = floor(sc * (double)xd[axmap[i]] + 0.5);
                if (!(sz >= 0 && sz <= (double)(INT64_C(1) << 24))) /* the cast of a larger one is undefined */
                    return onnx_fail(n, RLX_ERR_SHAPE, "output size %g out of range", sz);
                scales[axmap[i]] = sc;
                sizes[axmap[i]] = (int64_t)sz;
            }
        }
    } else if (si >= 0 && si < n->n_in && n->in[si]) {
        const onnx_tensor *k = onnx_in_const(n, si);
        if (!k)
            return onnx_need_const(n, si, "scales");
        if (k->numel != nax)
            return onnx_fail(n, RLX_ERR_FORMAT, "scales has %lld values for %d axes", (long long)k->numel, nax);
        for (int i = 0; i < nax; i++)
            scales[axmap[i]] = onnx_get_f(k, i);
    }
    const onnx_tensor *rk = ri >= 0 ? onnx_in_const(n, ri) : NULL;
    /* only tf_crop_and_resize reads the roi */
    if (!rk && ri >= 0 && ri < n->n_in && n->in[ri] && !strcmp(ctm, "tf_crop_and_resize"))
        return onnx_need_const(n, ri, "roi");
    if (rk && rk->numel == 2 * nax)
        for (int i = 0; i < nax; i++) {
            roi[axmap[i]] = onnx_get_f(rk, i);
            roi[r + axmap[i]] = onnx_get_f(rk, nax + i);
        }
    for (int i = 0; i < r; i++) {
        if (!(scales[i] > 0))
            return onnx_fail(n, RLX_ERR_FORMAT, "scale %g", scales[i]);
        if (!have_sizes) {
            double sz = floor((double)xd[i] * scales[i] + 1e-9);
            if (!(sz >= 1 && sz <= (double)(INT64_C(1) << 24)))
                return onnx_fail(n, RLX_ERR_SHAPE, "output size out of range");
            sizes[i] = (int64_t)sz;
        }
        if (sizes[i] < 1 || sizes[i] > (INT64_C(1) << 24))
            return onnx_fail(n, RLX_ERR_SHAPE, "output size %lld", (long long)sizes[i]);
    }
    bool crop = !strcmp(ctm, "tf_crop_and_resize");
    for (int i = 0; i < r; i++) {
        if (sizes[i] == xd[i] && scales[i] == 1 && !crop)
            continue;
        double out_f = have_sizes ? (double)sizes[i] : (double)xd[i] * scales[i];
        rlx_status st = antialias && scales[i] < 1
                            ? resize_axis_antialias(n, &x, i, xd[i], sizes[i], out_f, scales[i],
                                                    !strcmp(mode, "linear"), ctm, A, excl, roi[i], roi[r + i], extrap)
                            : resize_axis(n, &x, i, xd[i], sizes[i], out_f, scales[i], mode, ctm, nm, A, excl, roi[i],
                                          roi[r + i], extrap);
        if (st != RLX_OK)
            return st;
    }
    if (x == onnx_in(n, 0))
        return onnx_out_node(n, 0, rlx_reshape(G, x, r, xd));
    return onnx_out_node(n, 0, x);
}

/* GridSample (4-d): per output pixel, taps gathered at run-time indices
 * computed from the grid, weighted and summed. */
static rlx_node gs_reflect(onnx_node *n, rlx_node x, double lo, double hi)
{
    rlx_dtype t = RLX_F32;
    double span = hi - lo;
    if (span <= 0)
        return rlx_mul(G, x, onnx_scalar(n, t, 0));
    rlx_node d = rlx_abs(G, rlx_sub(G, x, onnx_scalar(n, t, lo)));
    rlx_node flips = rlx_floor(G, rlx_div(G, d, onnx_scalar(n, t, span)));
    rlx_node extra = rlx_sub(G, d, rlx_mul(G, flips, onnx_scalar(n, t, span)));
    rlx_node even = rlx_equal(G, rlx_mod(G, flips, onnx_scalar(n, t, 2), 1), onnx_scalar(n, t, 0));
    return rlx_where(G, even, rlx_add(G, extra, onnx_scalar(n, t, lo)), rlx_sub(G, onnx_scalar(n, t, hi), extra));
}

static rlx_node cubic_coef(onnx_node *n, rlx_node t, int k)
{
    /* A = -0.75; distance of tap k (0..3) from the point at fraction t */
    double A = -0.75;
    rlx_dtype ft = RLX_F32;
#define S(v) onnx_scalar(n, ft, (v))
    rlx_node x = k == 0 ? rlx_add(G, t, S(1)) : k == 1 ? t : k == 2 ? rlx_sub(G, S(1), t) : rlx_sub(G, S(2), t);
    if (k == 1 || k == 2) /* ((A+2)x - (A+3)) x^2 + 1 */
        return rlx_add(G, rlx_mul(G, rlx_sub(G, rlx_mul(G, x, S(A + 2)), S(A + 3)), rlx_mul(G, x, x)), S(1));
    /* ((A x - 5A) x + 8A) x - 4A */
    return rlx_sub(G, rlx_mul(G, rlx_add(G, rlx_mul(G, rlx_sub(G, rlx_mul(G, x, S(A)), S(5 * A)), x), S(8 * A)), x),
                   S(4 * A));
#undef S
}

static rlx_status h_grid_sample(onnx_node *n)
{
    rlx_node X = onnx_in(n, 0), grid = onnx_in(n, 1);
    int64_t xd[RLX_MAX_DIMS], gd[RLX_MAX_DIMS];
    if (onnx_shape(n, X, xd) != 4 || onnx_shape(n, grid, gd) != 4 || gd[3] != 2 || gd[0] != xd[0])
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "GridSample needs X [N,C,H,W] and grid [N,Ho,Wo,2]");
    if (onnx_in_dtype(n, 0) != RLX_F32 || onnx_in_dtype(n, 1) != RLX_F32)
        return onnx_fail(n, RLX_ERR_DTYPE, "float32 only");
    char b1[16], b2[16];
    const char *mode = onnx_attr_s(n, "mode", "bilinear", b1, sizeof b1);
    const char *pad = onnx_attr_s(n, "padding_mode", "zeros", b2, sizeof b2);
    int ac = (int)onnx_attr_i(n, "align_corners", 0);
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], Ho = gd[1], Wo = gd[2];
    rlx_dtype t = RLX_F32;
#define S(v) onnx_scalar(n, t, (v))
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
            return onnx_fail(n, RLX_ERR_UNSUPPORTED, "padding_mode '%s'", pad);
    }
    /* the data as rows [N*H*W, C] */
    rlx_node rows = rlx_reshape(G, rlx_transpose(G, rlx_reshape(G, X, 3, (int64_t[]){N, C, H * W}), (int[]){0, 2, 1}),
                                2, (int64_t[]){N * H * W, C});
    onnx_tensor *base = onnx_tensor_derived(RLX_F32, 3, (int64_t[]){N, 1, 1});
    if (!base)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < N; i++)
        ((float *)base->data)[i] = (float)(i * H * W);
    rlx_node basen = onnx_const_node(n, base);
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
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "mode '%s'", mode);
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
    return onnx_out_node(n, 0, rlx_transpose(G, acc, (int[]){0, 3, 1, 2}));
}

/* RoiAlign (avg/max, fixed sampling_ratio): sample points computed from the
 * run-time rois, bilinear taps gathered from [N*H*W, C] rows. */
static rlx_status h_roi_align(onnx_node *n)
{
    rlx_node X = onnx_in(n, 0), rois = onnx_in(n, 1), bidx = onnx_in(n, 2);
    int64_t xd[RLX_MAX_DIMS], rd[RLX_MAX_DIMS];
    if (onnx_shape(n, X, xd) != 4 || onnx_shape(n, rois, rd) != 2 || rd[1] != 4)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs X [N,C,H,W] and rois [R,4]");
    if (onnx_in_dtype(n, 0) != RLX_F32)
        return onnx_fail(n, RLX_ERR_DTYPE, "float32 only");
    char b1[32], b2[8];
    const char *ctm = onnx_attr_s(n, "coordinate_transformation_mode",
                                  n->opset >= 16 ? "half_pixel" : "output_half_pixel", b1, sizeof b1);
    const char *mode = onnx_attr_s(n, "mode", "avg", b2, sizeof b2);
    int64_t OH = onnx_attr_i(n, "output_height", 1), OW = onnx_attr_i(n, "output_width", 1),
            SR = onnx_attr_i(n, "sampling_ratio", 0);
    double scale = onnx_attr_f(n, "spatial_scale", 1.0);
    if (SR < 1)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "sampling_ratio 0 (adaptive, data-dependent)");
    /* each factor bounded first: the products must not overflow */
    if (OH < 1 || OW < 1 || OH > 4096 || OW > 4096 || SR > 4096 || OH * SR > 4096 || OW * SR > 4096)
        return onnx_fail(n, RLX_ERR_SHAPE, "output %lld x %lld with sampling ratio %lld: more than 4096 samples a side",
                         (long long)OH, (long long)OW, (long long)SR);
    bool is_max = !strcmp(mode, "max");
    int64_t N = xd[0], C = xd[1], H = xd[2], W = xd[3], R = rd[0];
    rlx_dtype t = RLX_F32;
#define S(v) onnx_scalar(n, t, (v))
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
        onnx_tensor *f = onnx_tensor_derived(RLX_F32, 2, (int64_t[]){1, M});
        if (!f)
            return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
        for (int64_t p = 0; p < cnt[d]; p++)
            for (int64_t q = 0; q < SR; q++)
                ((float *)f->data)[p * SR + q] = (float)(((double)p + ((double)q + 0.5) / (double)SR) / (double)cnt[d]);
        coord[d] = rlx_add(G, rlx_reshape(G, start[d], 2, (int64_t[]){R, 1}),
                           rlx_mul(G, onnx_const_node(n, f), rlx_reshape(G, len[d], 2, (int64_t[]){R, 1})));
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
    return onnx_out_node(n, 0, rlx_transpose(G, y, (int[]){0, 3, 1, 2}));
}

/* AffineGrid (opset 20): the normalized base grid [P, nd + 1] (x first,
 * then y (, z), then 1) is a constant of the size input; grid = base times
 * theta [N, nd, nd + 1] transposed, as [N, (D,) H, W, nd]. */
static rlx_status h_affine_grid(onnx_node *n)
{
    int64_t td[RLX_MAX_DIMS], sz[6];
    int tr = onnx_in_shape(n, 0, td);
    int ns = onnx_const_ints(n, 1, sz, 6);
    if (ns == -2)
        return onnx_need_const(n, 1, "size");
    if (ns != 4 && ns != 5)
        return onnx_fail(n, RLX_ERR_FORMAT, "size has %d values; it takes [N, C, H, W] or [N, C, D, H, W]", ns);
    int nd = ns - 2;
    if (tr != 3 || td[0] != sz[0] || td[1] != nd || td[2] != nd + 1)
        return onnx_fail(n, RLX_ERR_SHAPE, "theta must be [N, %d, %d] for a size of %d values", nd, nd + 1, ns);
    int align = (int)onnx_attr_i(n, "align_corners", 0);
    int64_t P = 1;
    for (int i = 0; i < nd; i++) {
        if (sz[2 + i] < 1)
            return onnx_fail(n, RLX_ERR_SHAPE, "size %d is %lld", 2 + i, (long long)sz[2 + i]);
        if (sz[2 + i] > ONNX_FOLD_MAX_NUMEL / P) /* checked before the product, which could overflow */
            return onnx_fail(n, RLX_ERR_UNSUPPORTED, "a grid of more than %lld points", (long long)ONNX_FOLD_MAX_NUMEL);
        P *= sz[2 + i];
    }
    int64_t bd[2] = {P, nd + 1};
    onnx_tensor *k = onnx_tensor_new(onnx_in_dtype(n, 0), 2, bd);
    if (!k)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t p = 0; p < P; p++) {
        int64_t rest = p;
        for (int i = nd - 1; i >= 0; i--) { /* spatial dim i; the last (W) is x, column 0 */
            int64_t len = sz[2 + i], idx = rest % len;
            rest /= len;
            double v = align ? (len > 1 ? -1.0 + 2.0 * (double)idx / (double)(len - 1) : 0.0)
                             : (2.0 * (double)idx + 1.0) / (double)len - 1.0;
            onnx_set_f(k, p * (nd + 1) + (nd - 1 - i), v);
        }
        onnx_set_f(k, p * (nd + 1) + nd, 1.0);
    }
    rlx_graph *g = n->c->g;
    rlx_node y = rlx_matmul(g, onnx_const_node(n, k), onnx_in(n, 0), 0, 1); /* [N, P, nd] */
    int64_t od[RLX_MAX_DIMS];
    od[0] = sz[0];
    for (int i = 0; i < nd; i++)
        od[1 + i] = sz[2 + i];
    od[1 + nd] = nd;
    return onnx_out_node(n, 0, rlx_reshape(g, y, nd + 2, od));
}

const onnx_op onnx_image_ops[] = {
    ONNX_OP("AffineGrid", h_affine_grid, 2),      ONNX_OP("GridSample", h_grid_sample, 2),
    ONNX_OP("RoiAlign", h_roi_align, 3),          ONNX_OP("Resize", h_resize, 1),
    ONNX_OP_SINCE("Upsample", h_resize, 1, 9, 2), ONNX_OP_END,
};
