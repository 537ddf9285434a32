/* onnx_signal.c - signal processing: the Hann, Hamming and Blackman windows,
 * MelWeightMatrix (built on the host), DFT and STFT (matmuls with cosine and
 * sine tables). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "ir/ir.h" /* rlx_graph_fail: record a composite's failure in the graph */

#define G (n->c->g)

static rlx_status h_window(onnx_node *n)
{
    double size;
    if (!onnx_const_scalar(n, 0, &size))
        return onnx_need_const(n, 0, "size");
    if (!(size >= 0 && size <= (double)(1 << 24)))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad size");
    int64_t N = (int64_t)size;
    if (N < 0 || N > (1 << 24))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad size");
    rlx_dtype t = RLX_F32;
    if (!onnx_dtype_from_onnx((int)onnx_attr_i(n, "output_datatype", 1), &t))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    int periodic = (int)onnx_attr_i(n, "periodic", 1);
    double den = periodic ? (double)N : (double)(N - 1);
    onnx_tensor *y = onnx_tensor_derived(t, 1, &N);
    if (!y)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    const char *op = n->p->op_type;
    for (int64_t i = 0; i < N; i++) {
        double a = den > 0 ? 2 * M_PI * (double)i / den : 0, v;
        if (!strcmp(op, "HannWindow"))
            v = 0.5 - 0.5 * cos(a);
        else if (!strcmp(op, "HammingWindow"))
            v = 25.0 / 46.0 - 21.0 / 46.0 * cos(a);
        else
            v = 0.42 - 0.5 * cos(a) + 0.08 * cos(2 * a);
        onnx_set_f(y, i, v);
    }
    return onnx_out_const(n, 0, y);
}

/* MelWeightMatrix from its (import-time) scalar inputs: triangular filters
 * on bins spaced evenly in mel. */
static rlx_status h_mel(onnx_node *n)
{
    double nm, dl, sr, lo, hi;
    if (!onnx_const_scalar(n, 0, &nm) || !onnx_const_scalar(n, 1, &dl) || !onnx_const_scalar(n, 2, &sr) ||
        !onnx_const_scalar(n, 3, &lo) || !onnx_const_scalar(n, 4, &hi))
        return onnx_need_const(n, 0, "all inputs");
    if (!(nm >= 1 && nm <= 4096 && dl >= 1 && dl <= (1 << 20)))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad sizes");
    int64_t M = (int64_t)nm, DL = (int64_t)dl, S = DL / 2 + 1;
    if (M < 1 || DL < 1 || sr <= 0 || M > 4096 || DL > (1 << 20))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad sizes");
    rlx_dtype t = RLX_F32;
    if (!onnx_dtype_from_onnx((int)onnx_attr_i(n, "output_datatype", 1), &t))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    int64_t *bins = rlx_malloc(sizeof(int64_t) * (size_t)(M + 2));
    onnx_tensor *y = onnx_tensor_derived(t, 2, (int64_t[]){S, M});
    if (!bins || !y) {
        free(bins);
        onnx_tensor_free(y);
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
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
            st = onnx_fail(n, RLX_ERR_SHAPE, "mel bins outside the spectrum");
            break;
        }
        if (c == l)
            onnx_set_f(y, c * M + i, 1);
        else
            for (int64_t j = l; j <= c; j++)
                onnx_set_f(y, j * M + i, (double)(j - l) / (double)(c - l));
        if (h > c)
            for (int64_t j = c; j < h; j++)
                onnx_set_f(y, j * M + i, (double)(h - j) / (double)(h - c));
    }
    free(bins);
    if (st != RLX_OK) {
        onnx_tensor_free(y);
        return st;
    }
    return onnx_out_const(n, 0, y);
}

/* Real/imaginary DFT along the last axis of xr/xi [..., L] with constant
 * cos/sin matrices [L, K]; returns [..., K, 2]. */
static rlx_node dft_last(onnx_node *n, rlx_node xr, rlx_node xi, int64_t L, int64_t K, bool inverse)
{
    rlx_dtype t = rlx_node_dtype(G, xr);
    onnx_tensor *cm = onnx_tensor_derived(t, 2, (int64_t[]){L, K}), *sm = onnx_tensor_derived(t, 2, (int64_t[]){L, K});
    if (!cm || !sm) {
        onnx_tensor_free(cm);
        onnx_tensor_free(sm);
        return rlx_graph_fail(G, RLX_ERR_OUT_OF_MEMORY, "dft: out of memory");
    }
    for (int64_t i = 0; i < L; i++)
        for (int64_t k = 0; k < K; k++) {
            double a = 2 * M_PI * (double)((i * k) % L) / (double)L;
            onnx_set_f(cm, i * K + k, cos(a));
            onnx_set_f(sm, i * K + k, sin(a));
        }
    rlx_node C = onnx_const_node(n, cm), S = onnx_const_node(n, sm);
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
        re = rlx_div(G, re, onnx_scalar(n, t, (double)L));
        im = rlx_div(G, im, onnx_scalar(n, t, (double)L));
    }
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_shape(n, re, d);
    d[r] = 1;
    rlx_node parts[2] = {rlx_reshape(G, re, r + 1, d), rlx_reshape(G, im, r + 1, d)};
    return rlx_concat(G, 2, parts, r);
}

/* Splits [..., N, C] (C = 1 real, 2 complex) into xr, xi [..., N]. */
static void split_complex(onnx_node *n, rlx_node x, rlx_node *xr, rlx_node *xi)
{
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, d);
    int ax = r - 1;
    int64_t s0 = 0, e0 = 1, s1 = 1, e1 = 2;
    *xr = rlx_reshape(G, rlx_slice(G, x, 1, &ax, &s0, &e0, NULL), r - 1, d);
    *xi = d[r - 1] == 2 ? rlx_reshape(G, rlx_slice(G, x, 1, &ax, &s1, &e1, NULL), r - 1, d) : -1;
}

static rlx_status h_dft(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    if (r < 3 || (xd[r - 1] != 1 && xd[r - 1] != 2))
        return onnx_fail(n, RLX_ERR_SHAPE, "needs [batch, ..., 1 or 2]");
    if (!onnx_dtype_is_float(onnx_in_dtype(n, 0)))
        return onnx_fail(n, RLX_ERR_DTYPE, "float input");
    /* opset 20: the axis is input 2 (default -2, the last signal axis) and
     * may be 0; before, an attribute (default 1, after the batch axis) */
    int64_t a64 = n->opset >= 20 ? -2 : onnx_attr_i(n, "axis", 1);
    if (n->opset >= 20 && n->n_in > 2 && n->in[2] && onnx_const_ints(n, 2, &a64, 1) != 1)
        return onnx_need_const(n, 2, "axis");
    int axis = onnx_norm_axis(a64, r);
    if (axis < (n->opset >= 20 ? 0 : 1) || axis > r - 2)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)a64, r);
    int inverse = (int)onnx_attr_i(n, "inverse", 0), onesided = (int)onnx_attr_i(n, "onesided", 0);
    int64_t N = xd[axis], L = N;
    if (n->n_in > 1 && n->in[1]) {
        if (onnx_const_ints(n, 1, &L, 1) != 1)
            return onnx_need_const(n, 1, "dft_length");
    }
    if (L < 1 || L > 65536)
        return onnx_fail(n, RLX_ERR_SHAPE, "dft_length %lld", (long long)L);
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
        int rr = onnx_shape(n, xr, d);
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
    return onnx_out_node(n, 0, y);
}

static rlx_status h_stft(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    int64_t xd[RLX_MAX_DIMS], step = 0, L = -1;
    if (onnx_shape(n, x, xd) != 3 || (xd[2] != 1 && xd[2] != 2))
        return onnx_fail(n, RLX_ERR_SHAPE, "needs signal [batch, length, 1 or 2]");
    if (onnx_const_ints(n, 1, &step, 1) != 1)
        return onnx_need_const(n, 1, "frame_step");
    rlx_node win = n->n_in > 2 && n->in[2] ? onnx_in(n, 2) : -1;
    if (win >= 0) {
        int64_t wd[RLX_MAX_DIMS];
        if (onnx_shape(n, win, wd) != 1)
            return onnx_fail(n, RLX_ERR_SHAPE, "window must be 1-d");
        L = wd[0];
    }
    if (n->n_in > 3 && n->in[3] && onnx_const_ints(n, 3, &L, 1) != 1)
        return onnx_need_const(n, 3, "frame_length");
    int64_t B = xd[0], S = xd[1];
    if (L < 1 || L > S || step < 1 || L > 65536)
        return onnx_fail(n, RLX_ERR_SHAPE, "bad frame length or step");
    int64_t F = (S - L) / step + 1;
    if (F * L > ONNX_FOLD_MAX_NUMEL * 4)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "too many frames");
    int onesided = (int)onnx_attr_i(n, "onesided", 1);
    onnx_tensor *idx = onnx_tensor_derived(RLX_I64, 2, (int64_t[]){F, L});
    if (!idx)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t f = 0; f < F; f++)
        for (int64_t j = 0; j < L; j++)
            ((int64_t *)idx->data)[f * L + j] = f * step + j;
    rlx_node ix = onnx_const_node(n, idx);
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
    return onnx_out_node(n, 0, dft_last(n, xr, xi, L, onesided ? L / 2 + 1 : L, false));
}

const onnx_op onnx_signal_ops[] = {
    ONNX_OP("MelWeightMatrix", h_mel, 5),
    ONNX_OP("DFT", h_dft, 1),
    ONNX_OP("STFT", h_stft, 2),
    ONNX_OP("HannWindow", h_window, 1),
    ONNX_OP("HammingWindow", h_window, 1),
    ONNX_OP("BlackmanWindow", h_window, 1),
    ONNX_OP_END,
};
