/* decompose.c - the definitions of the fused ops, of batch_norm and of
 * channels-last conv and pooling, as primitives (each op table row points
 * at its function).  Lowering (src/opt/lower.c) uses them for nodes the
 * target does not claim; the CPU reference kernels must agree with them,
 * and tests check that they do. */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

static rlx_node op1(rlx_graph *g, rlx_op op, rlx_node x)
{
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.n_in = 1;
    p.in[0] = x;
    return rlx_graph_add(g, &p);
}

static rlx_node op2(rlx_graph *g, rlx_op op, rlx_node a, rlx_node b)
{
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = op;
    p.n_in = 2;
    p.in[0] = a;
    p.in[1] = b;
    return rlx_graph_add(g, &p);
}

/* The fused activation a (an op's row names the activation it is). */
static rlx_node act(rlx_graph *g, int a, rlx_node x)
{
    rlx_op op = rlx_act_op((rlx_act)a);
    return op == RLX_OP_COUNT ? x : op1(g, op, x);
}

static rlx_node dt_scalar(rlx_graph *g, rlx_node like, double v) { return rlx_scalar(g, g->nodes[like].dtype, v); }

/* x @ w (+ bias), reshaped to heads [B, S, h, d], optional RMS norm over d,
 * to [B, h, S, d], optional rope. */
static rlx_node heads_of(rlx_graph *g, const rlx_node_data *n, rlx_node x, rlx_node w, rlx_node bias, rlx_node gamma,
                         int64_t h, int64_t d, bool rope)
{
    static const int perm[4] = {0, 2, 1, 3};
    int64_t B = g->nodes[x].shape.dims[0], S = g->nodes[x].shape.dims[1];
    rlx_node y = rlx_matmul(g, x, w, 0, 0);
    if (bias >= 0)
        y = rlx_add(g, y, bias);
    y = rlx_reshape(g, y, 4, (int64_t[]){B, S, h, d});
    if (gamma >= 0)
        y = rlx_rms_norm(g, y, gamma, n->attrs.attn_block.norm_eps);
    y = rlx_transpose(g, y, perm);
    if (rope && n->attrs.attn_block.has_rope)
        y = rlx_rope(g, y, n->attrs.attn_block.rope_theta, n->attrs.attn_block.rope_offset,
                     n->attrs.attn_block.rope_interleaved);
    return y;
}

rlx_node rlx_decompose_attention_block(rlx_graph *g, const rlx_node_data *n)
{
    static const int perm[4] = {0, 2, 1, 3};
#define a (&n->attrs.attn_block)
    rlx_node opt[8];
    for (int i = 1; i <= 7; i++) {
        int k = rlx_attn_block_input(n, i);
        opt[i] = k >= 0 ? n->in[k] : -1;
    }
    rlx_node x = n->in[0];
    int64_t B = g->nodes[x].shape.dims[0], S = g->nodes[x].shape.dims[1];
    rlx_node q = heads_of(g, n, x, n->in[1], opt[1], opt[5], a->heads, a->head_dim, true);
    rlx_node k = heads_of(g, n, x, n->in[2], opt[2], opt[6], a->kv_heads, a->head_dim, true);
    rlx_node v = heads_of(g, n, x, n->in[3], opt[3], -1, a->kv_heads, a->v_head_dim, false);
    rlx_node o = rlx_attention(g, q, k, v, opt[7], a->causal, a->scale);
    o = rlx_reshape(g, rlx_transpose(g, o, perm), 3, (int64_t[]){B, S, (int64_t)a->heads * a->v_head_dim});
    o = rlx_matmul(g, o, n->in[4], 0, 0);
    if (opt[4] >= 0)
        o = rlx_add(g, o, opt[4]);
    return o;
#undef a
}

rlx_node rlx_decompose_batch_norm(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node x = n->in[0];
    int r = g->nodes[x].shape.ndim;
    int64_t dims[RLX_MAX_DIMS];
    dims[0] = g->nodes[x].shape.dims[1];
    for (int i = 1; i < r - 1; i++)
        dims[i] = 1;
    rlx_node p[4];
    for (int i = 0; i < 4; i++)
        p[i] = rlx_reshape(g, n->in[1 + i], r - 1, dims); /* [C, 1, ...] against [N, C, ...] */
    rlx_node k = rlx_mul(g, p[0], rlx_rsqrt(g, rlx_add(g, p[3], dt_scalar(g, x, n->attrs.batch_norm.eps))));
    return rlx_add(g, rlx_mul(g, rlx_sub(g, x, p[2]), k), p[1]);
}

/* In f32, as backends without an integer kernel compute it: exact while
 * every partial sum stays below 2^24. */
rlx_node rlx_decompose_matmul_integer(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node d[2];
    for (int i = 0; i < 2; i++) {
        rlx_node z = rlx_cast(g, n->in[2 + i], RLX_F32);
        if (i == 1 && rlx_shape_numel(&g->nodes[n->in[3]].shape) > 1)
            z = rlx_reshape(g, z, 1, &g->nodes[n->in[1]].shape.dims[1]);
        d[i] = rlx_sub(g, rlx_cast(g, n->in[i], RLX_F32), z);
    }
    return rlx_cast(g, rlx_matmul(g, d[0], d[1], 0, 0), RLX_I32);
}

/* As matmul_integer's: the differences in f32 (exact), an f32 conv, i32;
 * the conv pads the differences with zeros, as if x were padded with x_zp. */
rlx_node rlx_decompose_conv_integer(rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *w = &g->nodes[n->in[1]];
    int r = w->shape.ndim;
    rlx_node x = rlx_cast(g, n->in[0], RLX_F32), zx = rlx_cast(g, n->in[2], RLX_F32);
    rlx_node zw = rlx_cast(g, n->in[3], RLX_F32);
    if (rlx_shape_numel(&g->nodes[n->in[3]].shape) > 1) {
        int64_t d[RLX_MAX_DIMS];
        for (int i = 0; i < r; i++)
            d[i] = i ? 1 : w->shape.dims[0];
        zw = rlx_reshape(g, zw, r, d);
    }
    x = rlx_sub(g, x, zx);
    rlx_node wf = rlx_sub(g, rlx_cast(g, n->in[1], RLX_F32), zw);
    rlx_conv_params p = n->attrs.conv.p;
    return rlx_cast(g, rlx_conv(g, x, wf, -1, &p), RLX_I32);
}

/* ONNX's DynamicQuantizeLinear, op by op as the specification writes it. */
rlx_node rlx_decompose_dynamic_quantize_range(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node x = n->in[0], zero = dt_scalar(g, x, 0);
    rlx_node mx = rlx_max(g, rlx_reduce_max(g, x, 0, NULL, 0), zero);
    rlx_node mn = rlx_min(g, rlx_reduce_min(g, x, 0, NULL, 0), zero);
    rlx_node scale = rlx_div(g, rlx_sub(g, mx, mn), dt_scalar(g, x, 255));
    rlx_node zp = rlx_clip(g, rlx_round(g, rlx_sub(g, zero, rlx_div(g, mn, scale))), 0, 255);
    const int64_t one = 1;
    rlx_node parts[2] = {rlx_reshape(g, scale, 1, &one), rlx_reshape(g, zp, 1, &one)};
    return rlx_concat(g, 2, parts, 0);
}

rlx_node rlx_decompose_quantize_u8(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node r = n->in[1], p[2];
    for (int i = 0; i < 2; i++)
        p[i] = rlx_reshape(g, rlx_slice(g, r, 1, (int[]){0}, (int64_t[]){i}, (int64_t[]){i + 1}, NULL), 0, NULL);
    rlx_node y = rlx_add(g, rlx_round(g, rlx_div(g, n->in[0], p[0])), p[1]);
    return rlx_cast(g, rlx_clip(g, y, 0, 255), RLX_U8);
}

rlx_node rlx_decompose_elementwise_chain(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node reg[RLX_MAX_INPUTS + RLX_EW_MAX_OPS];
    for (int i = 0; i < n->n_in; i++)
        reg[i] = n->in[i];
    int nops = n->attrs.ew.n_ops;
    for (int k = 0; k < nops; k++) {
        const uint8_t *c = &n->attrs.ew.code[3 * k];
        rlx_op op = (rlx_op)c[0];
        reg[n->n_in + k] = rlx_op_is_unary(op) ? op1(g, op, reg[c[1]]) : op2(g, op, reg[c[1]], reg[c[2]]);
    }
    return reg[n->n_in + nops - 1];
}

rlx_node rlx_decompose_softmax_scale_mask(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node x = n->in[0];
    if (n->attrs.sm.scale != 1.0)
        x = rlx_mul(g, x, dt_scalar(g, x, n->attrs.sm.scale));
    if (n->attrs.sm.has_mask) {
        rlx_node m = n->in[1];
        x = g->nodes[m].dtype == RLX_BOOL ? rlx_where(g, m, x, dt_scalar(g, x, -INFINITY)) : rlx_add(g, x, m);
    }
    return rlx_softmax(g, x, n->attrs.sm.axis);
}

/* Channels-last conv / pool = transpose to NCHW, the NCHW op, transpose
 * back: the definition the channels-last kernels are tested against. */
rlx_node rlx_decompose_channels_last(rlx_graph *g, const rlx_node_data *n)
{
    if (rlx_node_layout(n) != RLX_LAYOUT_NHWC)
        return RLX_NO_DECOMPOSITION;
    static const int to_nchw[4] = {0, 3, 1, 2}, to_nhwc[4] = {0, 2, 3, 1};
    rlx_node x = rlx_transpose(g, n->in[0], to_nchw), y;
    if (n->op == RLX_OP_MAX_POOL || n->op == RLX_OP_AVG_POOL) {
        rlx_pool_params p = n->attrs.pool.p;
        y = n->op == RLX_OP_MAX_POOL ? rlx_max_pool(g, x, &p) : rlx_avg_pool(g, x, &p);
    } else {
        rlx_conv_params p = n->attrs.conv.p;
        y = rlx_conv(g, x, rlx_transpose(g, n->in[1], to_nchw), n->attrs.conv.has_bias ? n->in[2] : -1, &p);
        y = rlx_transpose(g, y, to_nhwc);
        int ri = rlx_conv_residual_input(n);
        if (ri >= 0)
            y = rlx_add(g, y, n->in[ri]);
        if (n->op == RLX_OP_CONV_BIAS_ACT)
            y = act(g, n->attrs.conv.act, y);
        return y;
    }
    return rlx_transpose(g, y, to_nhwc);
}

rlx_node rlx_decompose_matmul_bias_act(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node y = rlx_matmul(g, n->in[0], n->in[1], n->attrs.mm_act.trans_a, n->attrs.mm_act.trans_b);
    if (n->attrs.mm_act.has_bias)
        y = rlx_add(g, y, n->in[2]);
    return act(g, n->attrs.mm_act.act, y);
}

rlx_node rlx_decompose_matmul_integer_scale(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node y = rlx_matmul_integer(g, n->in[0], n->in[1], n->in[2], n->in[3]);
    y = rlx_mul(g, rlx_cast(g, y, RLX_F32), n->in[4]);
    if (n->attrs.mm_act.has_bias)
        y = rlx_add(g, y, n->in[5]);
    return act(g, n->attrs.mm_act.act, y);
}

rlx_node rlx_decompose_qlinear_matmul(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node y = rlx_matmul_integer(g, n->in[0], n->in[1], n->in[2], n->in[3]);
    y = rlx_mul(g, rlx_cast(g, y, RLX_F32), n->in[4]);
    int k = 5;
    if (n->attrs.qmm.requant) {
        y = rlx_cast(g, rlx_quantize_u8(g, y, n->in[k]), RLX_F32);
        y = rlx_mul(g, rlx_sub(g, y, n->in[k + 1]), n->in[k + 2]);
        k += 3;
    }
    if (n->attrs.qmm.has_bias)
        y = rlx_add(g, y, n->in[k++]);
    y = act(g, n->attrs.qmm.act, y);
    return n->attrs.qmm.out_u8 ? rlx_quantize_u8(g, y, n->in[k]) : y;
}

/* add_layer_norm, add_rms_norm */
rlx_node rlx_decompose_add_norm(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node s = rlx_add(g, n->in[0], n->in[1]);
    int k = 2;
    rlx_node gamma = n->attrs.norm.has_gamma ? n->in[k++] : -1;
    if (n->op == RLX_OP_ADD_RMS_NORM)
        return rlx_rms_norm(g, s, gamma, n->attrs.norm.eps);
    rlx_node beta = n->attrs.norm.has_beta ? n->in[k++] : -1;
    return rlx_layer_norm(g, s, gamma, beta, n->attrs.norm.eps);
}

rlx_node rlx_decompose_add_rms_norm_keep(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node s = rlx_add(g, n->in[0], n->in[1]);
    rlx_node y = rlx_rms_norm(g, s, n->attrs.norm.has_gamma ? n->in[2] : -1, n->attrs.norm.eps);
    rlx_shape one = g->nodes[s].shape; /* [1, ...] */
    for (int i = one.ndim; i > 0; i--)
        one.dims[i] = one.dims[i - 1];
    one.dims[0] = 1;
    one.ndim++;
    rlx_node parts[2] = {rlx_reshape(g, s, one.ndim, one.dims), rlx_reshape(g, y, one.ndim, one.dims)};
    return rlx_concat(g, 2, parts, 0);
}

rlx_node rlx_decompose_swiglu(rlx_graph *g, const rlx_node_data *n)
{
    return rlx_mul(g, rlx_silu(g, rlx_matmul(g, n->in[0], n->in[1], 0, 0)), rlx_matmul(g, n->in[0], n->in[2], 0, 0));
}

rlx_node rlx_decompose_conv_bias_act(rlx_graph *g, const rlx_node_data *n)
{
    if (rlx_node_layout(n) == RLX_LAYOUT_NHWC)
        return rlx_decompose_channels_last(g, n);
    rlx_conv_params p = n->attrs.conv.p;
    rlx_node y = rlx_conv(g, n->in[0], n->in[1], n->attrs.conv.has_bias ? n->in[2] : -1, &p);
    int ri = rlx_conv_residual_input(n);
    return act(g, n->attrs.conv.act, ri >= 0 ? rlx_add(g, y, n->in[ri]) : y);
}

/* The projection cut into q, k and v heads [B, h, S, D]; q's and k's
 * normalised and rotated; the three flattened one after another. */
rlx_node rlx_decompose_qkv_heads(rlx_graph *g, const rlx_node_data *n)
{
    static const int perm[4] = {0, 2, 1, 3};
    const rlx_node x = n->in[0];
    const rlx_dtype dt = g->nodes[x].dtype;
    const int64_t B = g->nodes[x].shape.dims[0], S = g->nodes[x].shape.dims[1], D = n->attrs.qkv.head_dim;
    const int64_t heads[3] = {n->attrs.qkv.heads, n->attrs.qkv.kv_heads, n->attrs.qkv.kv_heads};
    rlx_node parts[3], aux[5];
    for (int i = 1; i <= 4; i++) {
        int k = rlx_qkv_heads_input(n, i);
        aux[i] = k >= 0 ? n->in[k] : -1;
        /* the primitives take gammas in x's dtype, tables in f32 or x's */
        rlx_dtype want = i <= 2 && aux[i] >= 0 && g->nodes[aux[i]].dtype == RLX_F32 ? RLX_F32 : dt;
        if (aux[i] >= 0 && g->nodes[aux[i]].dtype != want)
            aux[i] = rlx_cast(g, aux[i], want);
    }
    rlx_split(g, x, 2, 3, (int64_t[]){heads[0] * D, heads[1] * D, heads[2] * D}, parts);
    for (int i = 0; i < 3; i++) {
        rlx_node y = rlx_reshape(g, parts[i], 4, (int64_t[]){B, S, heads[i], D});
        if (i < 2 && aux[3 + i] >= 0)
            y = rlx_rms_norm(g, y, aux[3 + i], n->attrs.qkv.norm_eps);
        y = rlx_transpose(g, y, perm);
        if (i < 2 && n->attrs.qkv.has_rope)
            y = rlx_rope_tables(g, y, aux[1], aux[2], n->attrs.qkv.rope_interleaved);
        parts[i] = rlx_reshape(g, y, 1, (int64_t[]){B * heads[i] * S * D});
    }
    return rlx_concat(g, 3, parts, 0);
}

/* act(x[..., :F]) * x[..., F:] in primitives */
static rlx_node glu_primitives(rlx_graph *g, rlx_node x, int act_kind)
{
    const rlx_node_data *xn = &g->nodes[x];
    const int64_t F = xn->shape.dims[xn->shape.ndim - 1] / 2;
    rlx_node half[2];
    rlx_split(g, x, xn->shape.ndim - 1, 2, (int64_t[]){F, F}, half);
    return rlx_mul(g, act(g, act_kind, half[0]), half[1]);
}

rlx_node rlx_decompose_glu(rlx_graph *g, const rlx_node_data *n)
{
    return glu_primitives(g, n->in[0], n->attrs.glu.act);
}

rlx_node rlx_decompose_projection(rlx_graph *g, const rlx_node_data *n)
{
    rlx_node x = n->in[0];
    int k = 2;
    if (n->attrs.proj.pre == RLX_PROJ_RMS_NORM)
        x = rlx_rms_norm(g, x, n->in[k++], n->attrs.proj.eps);
    if (x < 0)
        return x;
    const rlx_node_data *xn = &g->nodes[x];
    rlx_node y = n->attrs.proj.quant
                     ? rlx_qmatmul(g, x, n->in[1], n->attrs.proj.quant, xn->shape.dims[xn->shape.ndim - 1])
                     : rlx_matmul(g, x, n->in[1], 0, 1);
    if (n->attrs.proj.glu != RLX_ACT_NONE)
        y = glu_primitives(g, y, n->attrs.proj.glu);
    return n->attrs.proj.has_res ? rlx_add(g, y, n->in[k]) : y;
}

rlx_node rlx_decompose(rlx_graph *g, const rlx_node_data *n)
{
    const rlx_op_info *i = rlx_op_info_of(n->op);
    return i && i->decompose ? i->decompose(g, n) : RLX_NO_DECOMPOSITION;
}

bool rlx_node_has_decomposition(const rlx_node_data *n)
{
    const rlx_op_info *i = rlx_op_info_of(n->op);
    if (!i || !i->decompose)
        return false;
    /* a primitive with a layout attribute (conv, pooling) is defined by its
     * NCHW form: only its channels-last form decomposes */
    return (i->flags & RLX_OPF_FUSED) || i->layout == RLX_LAYOUT_ATTR_NONE || rlx_node_layout(n) == RLX_LAYOUT_NHWC;
}

bool rlx_has_decomposition(rlx_op op)
{
    const rlx_op_info *i = rlx_op_info_of(op);
    return i && i->decompose && ((i->flags & RLX_OPF_FUSED) || i->layout == RLX_LAYOUT_ATTR_NONE);
}
