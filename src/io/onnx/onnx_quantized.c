/* onnx_quantized.c - quantised ops: QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul and
 * QLinearConv.  MatMulInteger and QLinearMatMul with a matrix b run on the
 * exact integer product (matmul_integer), ConvInteger and QLinearConv on
 * the integer convolution (conv_integer); zero points or scales of shapes
 * those do not take fall back to float on dequantised values. */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "ir/ir.h"

#define G (n->c->g)

/* scale/zero point of per-axis quantisation reshaped to broadcast on axis. */
static rlx_node per_axis(onnx_node *n, rlx_node v, int r, int axis)
{
    int64_t d[RLX_MAX_DIMS];
    int vr = onnx_shape(n, v, d);
    if (vr != 1 || r <= 1)
        return v;
    int64_t nd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        nd[i] = i == axis ? d[0] : 1;
    return rlx_reshape(G, v, r, nd);
}

static rlx_node dequant(onnx_node *n, rlx_node x, rlx_node scale, rlx_node zp, int axis)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    rlx_node xf = rlx_cast(G, x, RLX_F32);
    if (zp >= 0)
        xf = rlx_sub(G, xf, per_axis(n, rlx_cast(G, zp, RLX_F32), r, axis));
    return rlx_mul(G, xf, per_axis(n, scale, r, axis));
}

static rlx_node quant(onnx_node *n, rlx_node x, rlx_node scale, rlx_node zp, rlx_dtype qt, int axis)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, xd);
    rlx_node y = rlx_round(G, rlx_div(G, x, per_axis(n, scale, r, axis)));
    if (zp >= 0)
        y = rlx_add(G, y, per_axis(n, rlx_cast(G, zp, RLX_F32), r, axis));
    y = qt == RLX_U8 ? rlx_clip(G, y, 0, 255) : (qt == RLX_I8 ? rlx_clip(G, y, -128, 127) : y);
    return rlx_cast(G, y, qt);
}

static rlx_status h_dequantize(onnx_node *n)
{
    int r = onnx_value_rank(n->c, n->in[0]);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 1), r);
    rlx_node zp = n->n_in > 2 && n->in[2] ? onnx_in(n, 2) : -1;
    return onnx_out_node(n, 0, dequant(n, onnx_in(n, 0), onnx_in(n, 1), zp, axis));
}

static int64_t in_numel(onnx_node *n, int i);

/* {scale, zero point} f32 [2] for quantize_u8 from one-element nodes. */
static rlx_node u8_range(onnx_node *n, rlx_node scale, rlx_node zpf)
{
    const int64_t one = 1;
    rlx_node parts[2] = {rlx_reshape(G, scale, 1, &one), rlx_reshape(G, zpf, 1, &one)};
    return rlx_concat(G, 2, parts, 0);
}

static rlx_status h_quantize(onnx_node *n)
{
    /* per-tensor f32 -> u8: one pass (quantize_u8 is this formula) */
    if (onnx_in_dtype(n, 0) == RLX_F32 && onnx_in_dtype(n, 1) == RLX_F32 && in_numel(n, 1) == 1 &&
        (n->n_in < 3 || !n->in[2] || (onnx_in_dtype(n, 2) == RLX_U8 && in_numel(n, 2) == 1))) {
        rlx_node zpf = n->n_in > 2 && n->in[2] ? rlx_cast(G, onnx_in(n, 2), RLX_F32) : onnx_scalar(n, RLX_F32, 0);
        return onnx_out_node(n, 0, rlx_quantize_u8(G, onnx_in(n, 0), u8_range(n, onnx_in(n, 1), zpf)));
    }
    int r = onnx_value_rank(n->c, n->in[0]);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 1), r);
    rlx_node zp = n->n_in > 2 && n->in[2] ? onnx_in(n, 2) : -1;
    rlx_dtype qt = zp >= 0 ? onnx_in_dtype(n, 2) : RLX_U8;
    return onnx_out_node(n, 0, quant(n, onnx_in(n, 0), onnx_in(n, 1), zp, qt, axis));
}

static rlx_status h_dyn_quantize(onnx_node *n)
{
    rlx_node x = onnx_in(n, 0);
    if (onnx_in_dtype(n, 0) != RLX_F32)
        x = rlx_cast(G, x, RLX_F32);
    rlx_node range = rlx_dynamic_quantize_range(G, x), part[2];
    for (int i = 0; i < 2; i++)
        part[i] = rlx_reshape(G, rlx_slice(G, range, 1, (int[]){0}, (int64_t[]){i}, (int64_t[]){i + 1}, NULL), 0, NULL);
    rlx_status st = onnx_out_node(n, 0, rlx_quantize_u8(G, x, range));
    if (st == RLX_OK)
        st = onnx_out_node(n, 1, part[0]);
    if (st == RLX_OK)
        st = onnx_out_node(n, 2, rlx_cast(G, part[1], RLX_U8));
    return st;
}

static rlx_node int_minus_zp(onnx_node *n, int i, int zi, int axis_for_zp)
{
    rlx_node x = rlx_cast(G, onnx_in(n, i), RLX_F32);
    if (zi < n->n_in && n->in[zi]) {
        int r = onnx_value_rank(n->c, n->in[i]);
        rlx_node zp = rlx_cast(G, onnx_in(n, zi), RLX_F32);
        x = rlx_sub(G, x, axis_for_zp >= 0 ? per_axis(n, zp, r, axis_for_zp) : zp);
    }
    return x;
}

/* Elements of input i. */
static int64_t in_numel(onnx_node *n, int i)
{
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_shape(n, onnx_in(n, i), d);
    return onnx_numel(r, d);
}

/* (a - a_zp) @ (b - b_zp) as int32 on the integer kernel, zero points from
 * inputs za and zb (absent: 0); -1 where it does not apply (b not a
 * matrix, zero points per row), for the float form to take over. */
static rlx_node int_product(onnx_node *n, int ia, int ib, int za, int zb)
{
    int64_t ad[RLX_MAX_DIMS], bd[RLX_MAX_DIMS], zd[RLX_MAX_DIMS];
    int ra = onnx_shape(n, onnx_in(n, ia), ad), rb = onnx_shape(n, onnx_in(n, ib), bd);
    rlx_dtype at = onnx_in_dtype(n, ia), bt = onnx_in_dtype(n, ib);
    if (rb != 2 || ra < 1 || (at != RLX_U8 && at != RLX_I8) || (bt != RLX_U8 && bt != RLX_I8))
        return -1;
    rlx_node z[2] = {onnx_scalar(n, at, 0), onnx_scalar(n, bt, 0)};
    int zi[2] = {za, zb};
    for (int i = 0; i < 2; i++) {
        if (zi[i] >= n->n_in || !n->in[zi[i]])
            continue;
        int zr = onnx_shape(n, onnx_in(n, zi[i]), zd);
        int64_t cnt = in_numel(n, zi[i]);
        if (cnt == 1)
            z[i] = rlx_reshape(G, onnx_in(n, zi[i]), 0, NULL);
        else if (i == 1 && cnt == bd[1] && zd[zr - 1] == cnt)
            z[i] = rlx_reshape(G, onnx_in(n, zi[i]), 1, &cnt);
        else
            return -1;
    }
    return rlx_matmul_integer(G, onnx_in(n, ia), onnx_in(n, ib), z[0], z[1]);
}

static rlx_status h_matmul_integer(onnx_node *n)
{
    rlx_node y = int_product(n, 0, 1, 2, 3);
    if (y >= 0)
        return onnx_out_node(n, 0, y);
    int rb = onnx_value_rank(n->c, n->in[1]);
    rlx_node a = int_minus_zp(n, 0, 2, -1), b = int_minus_zp(n, 1, 3, rb >= 2 ? rb - 1 : -1);
    return onnx_out_node(n, 0, rlx_cast(G, rlx_matmul(G, a, b, 0, 0), RLX_I32));
}

/* The parts of a dequantization as dequant() builds it (cast to f32, [sub
 * of the cast zero point], mul by the scale; zero point and scale maybe
 * reshaped to broadcast): the levels, the zero point (-1 if absent) and
 * scale as they were before the reshapes, and the broadcast forms. */
typedef struct dq_parts {
    rlx_node q, zp, scale, zp_b, scale_b;
} dq_parts;

static rlx_node before_reshapes(const rlx_graph *g, rlx_node v)
{
    while (g->nodes[v].op == RLX_OP_RESHAPE)
        v = g->nodes[v].in[0];
    return v;
}

static bool dq_parts_of(const rlx_graph *g, rlx_node v, dq_parts *p)
{
    const rlx_node_data *m = &g->nodes[v];
    if (m->op != RLX_OP_MUL || m->dtype != RLX_F32)
        return false;
    rlx_node x = m->in[0];
    p->scale_b = m->in[1];
    p->scale = before_reshapes(g, p->scale_b);
    p->zp = p->zp_b = -1;
    if (g->nodes[x].op == RLX_OP_SUB) {
        p->zp_b = g->nodes[x].in[1];
        rlx_node z = before_reshapes(g, p->zp_b);
        if (g->nodes[z].op != RLX_OP_CAST)
            return false;
        p->zp = g->nodes[z].in[0];
        x = g->nodes[x].in[0];
    }
    if (g->nodes[x].op != RLX_OP_CAST)
        return false;
    p->q = g->nodes[x].in[0];
    rlx_dtype t = g->nodes[p->q].dtype;
    return (t == RLX_U8 || t == RLX_I8) && g->nodes[p->scale].dtype == RLX_F32 &&
           (p->zp < 0 || g->nodes[p->zp].dtype == t);
}

/* One element, or [1, cols] (per column of a matrix). */
static bool one_or_cols(const rlx_graph *g, rlx_node v, int64_t cols)
{
    const rlx_shape *s = &g->nodes[v].shape;
    return rlx_shape_numel(s) == 1 || (s->ndim == 2 && s->dims[0] == 1 && s->dims[1] == cols);
}

/* v (one element or cols of them) as a scalar or [cols]. */
static rlx_node scalar_or_vec(onnx_node *n, rlx_node v, int64_t cols)
{
    return rlx_shape_numel(&G->nodes[v].shape) == 1 ? rlx_reshape(G, v, 0, NULL) : rlx_reshape(G, v, 1, &cols);
}

/* A MatMul of two DequantizeLinear results (QDQ form: activations per
 * tensor, a weight matrix per tensor or per column) as the exact integer
 * product times the two scales, as ONNX Runtime runs it; a QuantizeLinear
 * after it then fuses into the product's kernel (qlinear_matmul).  -1 where
 * a or b is not such a dequantization. */
rlx_node onnx_qdq_matmul(onnx_node *n, rlx_node a, rlx_node b)
{
    const rlx_graph *g = G;
    dq_parts pa, pb;
    if (a < 0 || b < 0 || !dq_parts_of(g, a, &pa) || !dq_parts_of(g, b, &pb))
        return -1;
    const rlx_node_data *qa = &g->nodes[pa.q], *qb = &g->nodes[pb.q];
    if (qb->shape.ndim != 2 || qa->shape.ndim < 1 || qa->shape.dims[qa->shape.ndim - 1] != qb->shape.dims[0])
        return -1;
    int64_t cols = qb->shape.dims[1];
    if (rlx_shape_numel(&g->nodes[pa.scale_b].shape) != 1 ||
        (pa.zp >= 0 && rlx_shape_numel(&g->nodes[pa.zp_b].shape) != 1) || !one_or_cols(g, pb.scale_b, cols) ||
        (pb.zp >= 0 && !one_or_cols(g, pb.zp_b, cols)))
        return -1;
    rlx_node za = pa.zp >= 0 ? rlx_reshape(G, pa.zp, 0, NULL) : onnx_scalar(n, qa->dtype, 0);
    rlx_node zb = pb.zp >= 0 ? scalar_or_vec(n, pb.zp, cols) : onnx_scalar(n, qb->dtype, 0);
    rlx_node mult = rlx_mul(G, rlx_reshape(G, pa.scale, 0, NULL), scalar_or_vec(n, pb.scale, cols));
    rlx_node acc = rlx_matmul_integer(G, pa.q, pb.q, za, zb);
    return rlx_mul(G, rlx_cast(G, acc, RLX_F32), mult);
}

static rlx_status h_qlinear_matmul(onnx_node *n)
{
    if (n->n_in < 8)
        return onnx_fail(n, RLX_ERR_FORMAT, "needs 8 inputs");
    /* per-row a or y scales (1-D over a's rows) stay on the float form */
    rlx_node acc = in_numel(n, 1) == 1 && in_numel(n, 6) == 1 ? int_product(n, 0, 3, 2, 5) : -1;
    if (acc >= 0) {
        /* requantized as ONNX Runtime does: acc * (a_scale * b_scale / y_scale), rounded, + y_zp */
        int64_t bd[RLX_MAX_DIMS], sd[RLX_MAX_DIMS];
        onnx_shape(n, onnx_in(n, 3), bd);
        rlx_node sb = onnx_in(n, 4);
        int sr = onnx_shape(n, sb, sd);
        if (sr == 2 && sd[0] == 1) /* [1, N]: per column */
            sb = rlx_reshape(G, sb, 1, &sd[1]);
        rlx_node mult = rlx_div(G, rlx_mul(G, onnx_in(n, 1), sb), onnx_in(n, 6));
        rlx_node yf = rlx_mul(G, rlx_cast(G, acc, RLX_F32), mult);
        rlx_dtype qt = onnx_in_dtype(n, 7);
        if (qt == RLX_U8) /* round(y / 1) + y_zp, saturated: quantize_u8's formula, one pass */
            return onnx_out_node(
                n, 0,
                rlx_quantize_u8(G, yf, u8_range(n, onnx_scalar(n, RLX_F32, 1), rlx_cast(G, onnx_in(n, 7), RLX_F32))));
        rlx_node y = rlx_round(G, yf);
        y = rlx_add(G, y, rlx_cast(G, onnx_in(n, 7), RLX_F32));
        y = qt == RLX_U8 ? rlx_clip(G, y, 0, 255) : rlx_clip(G, y, -128, 127);
        return onnx_out_node(n, 0, rlx_cast(G, y, qt));
    }
    int rb = onnx_value_rank(n->c, n->in[3]);
    rlx_node a = dequant(n, onnx_in(n, 0), onnx_in(n, 1), onnx_in(n, 2), 1);
    rlx_node b = dequant(n, onnx_in(n, 3), onnx_in(n, 4), onnx_in(n, 5), rb - 1);
    rlx_node y = rlx_matmul(G, a, b, 0, 0);
    return onnx_out_node(n, 0, quant(n, y, onnx_in(n, 6), onnx_in(n, 7), onnx_in_dtype(n, 7), 1));
}

static rlx_status conv_params(onnx_node *n, rlx_node x, rlx_node w, rlx_conv_params *p)
{
    int64_t xd[RLX_MAX_DIMS], wd[RLX_MAX_DIMS];
    int xr = onnx_shape(n, x, xd), wr = onnx_shape(n, w, wd);
    int ns = wr - 2;
    if (ns < 1 || ns > 2 || xr != wr)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "convolution over %d spatial dims", ns);
    rlx_conv_params_init(p);
    int64_t tmp[8];
    if (onnx_attr_ints(n, "strides", tmp, 8) == ns)
        for (int i = 0; i < ns; i++)
            p->stride[i] = tmp[i];
    if (onnx_attr_ints(n, "dilations", tmp, 8) == ns)
        for (int i = 0; i < ns; i++)
            p->dilation[i] = tmp[i];
    if (onnx_attr_ints(n, "pads", tmp, 8) == 2 * ns)
        for (int i = 0; i < 2 * ns; i++)
            p->pads[i] = tmp[i];
    for (int i = 0; i < ns; i++)
        if (p->stride[i] < 1 || p->dilation[i] < 1 || p->stride[i] > (1 << 20) || p->dilation[i] > (1 << 20) ||
            wd[2 + i] > (1 << 20))
            return onnx_fail(n, RLX_ERR_FORMAT, "bad kernel, stride or dilation");
    char buf[32];
    const char *ap = onnx_attr_s(n, "auto_pad", "NOTSET", buf, sizeof buf);
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
    p->groups = onnx_attr_i(n, "group", 1);
    return RLX_OK;
}

/* Zero point input i as conv_integer takes it (one element; for the
 * weights also one per output channel), absent: 0 of dtype t; -1 where it
 * is neither, for the float form to take over. */
static rlx_node conv_zp(onnx_node *n, int i, rlx_dtype t, int64_t per)
{
    if (i >= n->n_in || !n->in[i])
        return onnx_scalar(n, t, 0);
    int64_t cnt = in_numel(n, i);
    if (onnx_in_dtype(n, i) != t || (cnt != 1 && cnt != per))
        return -1;
    return cnt == 1 ? rlx_reshape(G, onnx_in(n, i), 0, NULL) : rlx_reshape(G, onnx_in(n, i), 1, &cnt);
}

/* (x - x_zp) conv (w - w_zp) as int32 on the integer kernel (zero points
 * from inputs zx and zw), or -1 where it does not apply. */
static rlx_node int_conv(onnx_node *n, int ix, int iw, int zx, int zw, const rlx_conv_params *p)
{
    rlx_dtype xt = onnx_in_dtype(n, ix), wt = onnx_in_dtype(n, iw);
    int64_t wd[RLX_MAX_DIMS];
    onnx_shape(n, onnx_in(n, iw), wd);
    if ((xt != RLX_U8 && xt != RLX_I8) || (wt != RLX_U8 && wt != RLX_I8))
        return -1;
    rlx_node za = conv_zp(n, zx, xt, 1), zb = conv_zp(n, zw, wt, wd[0]);
    if (za < 0 || zb < 0)
        return -1;
    return rlx_conv_integer(G, onnx_in(n, ix), onnx_in(n, iw), za, zb, p);
}

static rlx_status h_conv_integer(onnx_node *n)
{
    rlx_conv_params p;
    rlx_status st = conv_params(n, onnx_in(n, 0), onnx_in(n, 1), &p);
    if (st != RLX_OK)
        return st;
    rlx_node y = int_conv(n, 0, 1, 2, 3, &p);
    if (y >= 0)
        return onnx_out_node(n, 0, y);
    rlx_node x = int_minus_zp(n, 0, 2, -1), w = int_minus_zp(n, 1, 3, 0);
    return onnx_out_node(n, 0, rlx_cast(G, rlx_conv(G, x, w, -1, &p), RLX_I32));
}

/* A per-output-channel vector v (one element or [O]) shaped to broadcast
 * over y [N, O, ..] of rank r. */
static rlx_node per_channel(onnx_node *n, rlx_node v, int r)
{
    int64_t d[RLX_MAX_DIMS];
    int vr = onnx_shape(n, v, d);
    if (onnx_numel(vr, d) == 1)
        return rlx_reshape(G, v, 0, NULL);
    int64_t nd[RLX_MAX_DIMS];
    for (int i = 0; i < r; i++)
        nd[i] = i == 1 ? onnx_numel(vr, d) : 1;
    return rlx_reshape(G, v, r, nd);
}

static rlx_status h_qlinear_conv(onnx_node *n)
{
    if (n->n_in < 8)
        return onnx_fail(n, RLX_ERR_FORMAT, "needs 8 inputs");
    rlx_conv_params p;
    rlx_status st = conv_params(n, onnx_in(n, 0), onnx_in(n, 3), &p);
    if (st != RLX_OK)
        return st;
    bool has_b = n->n_in > 8 && n->in[8];
    /* per-channel x or y scales stay on the float form */
    rlx_node acc =
        in_numel(n, 1) == 1 && in_numel(n, 6) == 1 && in_numel(n, 7) == 1 && (!has_b || onnx_in_dtype(n, 8) == RLX_I32)
            ? int_conv(n, 0, 3, 2, 5, &p)
            : -1;
    if (acc >= 0) {
        /* as ONNX Runtime: (acc + bias) * (x_scale * w_scale / y_scale), rounded, + y_zp, saturated */
        int r = onnx_value_rank(n->c, n->in[0]);
        if (has_b)
            acc = rlx_add(G, acc, per_channel(n, onnx_in(n, 8), r));
        rlx_node mult = rlx_div(G, rlx_mul(G, onnx_in(n, 1), onnx_in(n, 4)), onnx_in(n, 6));
        rlx_node yf = rlx_mul(G, rlx_cast(G, acc, RLX_F32), per_channel(n, mult, r));
        rlx_dtype qt = onnx_in_dtype(n, 7);
        rlx_node yzf = rlx_reshape(G, rlx_cast(G, onnx_in(n, 7), RLX_F32), 0, NULL);
        if (qt == RLX_U8) /* round(y / 1) + y_zp, saturated: quantize_u8's formula, one pass */
            return onnx_out_node(n, 0, rlx_quantize_u8(G, yf, u8_range(n, onnx_scalar(n, RLX_F32, 1), yzf)));
        rlx_node y = rlx_add(G, rlx_round(G, yf), yzf);
        return onnx_out_node(n, 0, rlx_cast(G, rlx_clip(G, y, -128, 127), qt));
    }
    rlx_node x = dequant(n, onnx_in(n, 0), onnx_in(n, 1), onnx_in(n, 2), 1);
    rlx_node w = dequant(n, onnx_in(n, 3), onnx_in(n, 4), onnx_in(n, 5), 0);
    rlx_node b = -1;
    if (has_b) {
        /* int32 bias in units of x_scale * w_scale */
        rlx_node sc = rlx_reshape(G, rlx_mul(G, onnx_in(n, 1), onnx_in(n, 4)), 1, (int64_t[]){-1});
        b = rlx_mul(G, rlx_cast(G, onnx_in(n, 8), RLX_F32), sc);
        int64_t bd[RLX_MAX_DIMS];
        onnx_shape(n, onnx_in(n, 8), bd);
        int64_t bdim = bd[0];
        b = rlx_expand(G, b, 1, &bdim);
    }
    rlx_node y = rlx_conv(G, x, w, b, &p);
    return onnx_out_node(n, 0, quant(n, y, onnx_in(n, 6), onnx_in(n, 7), onnx_in_dtype(n, 7), 1));
}

const onnx_op onnx_quantized_ops[] = {
    ONNX_OP("DequantizeLinear", h_dequantize, 2),        ONNX_OP("QuantizeLinear", h_quantize, 2),
    ONNX_OP("DynamicQuantizeLinear", h_dyn_quantize, 1), ONNX_OP("MatMulInteger", h_matmul_integer, 2),
    ONNX_OP("QLinearMatMul", h_qlinear_matmul, 8),       ONNX_OP("ConvInteger", h_conv_integer, 2),
    ONNX_OP("QLinearConv", h_qlinear_conv, 8),           ONNX_OP_END,
};
