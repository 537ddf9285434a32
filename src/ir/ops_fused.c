/* ops_fused.c - shape and dtype inference of the batch-norm primitive and of
 * the fused ops the optimizer produces.  Where a fused op contains a
 * primitive (matmul, norm, conv), its inference runs the primitive's row of
 * the op table on a probe node, so the two can never disagree. */
#include <string.h>

#include "core/ggml_type.h"
#include "ir/ir.h"

#define IN(i) (&g->nodes[n->in[i]])

/* a shape as text for a message, in a buffer of the call's own (a compound
 * literal lives to the end of the enclosing block): no shared state */
#define SHAPE_A(s) rlx_shape_str((s), (char[128]){0}, 128)
#define SHAPE_B(s) rlx_shape_str((s), (char[128]){0}, 128)

/* Runs op's inference on a copy of n with the given inputs and attributes. */
static rlx_status infer_as(const rlx_graph *g, const rlx_node_data *n, rlx_op op, int n_in, const rlx_node *in,
                           const rlx_attrs *attrs, rlx_node_data *res)
{
    rlx_node_data p = *n;
    p.op = op;
    p.n_in = n_in;
    for (int i = 0; i < n_in; i++)
        p.in[i] = in[i];
    if (attrs)
        p.attrs = *attrs;
    rlx_status s = rlx_op_info_of(op)->infer(g, &p);
    *res = p;
    return s;
}

static rlx_status check_vec(const rlx_graph *g, rlx_node id, int64_t len, rlx_dtype t, const char *what)
{
    const rlx_node_data *v = &g->nodes[id];
    if (v->shape.ndim != 1 || v->shape.dims[0] != len)
        return rlx_set_error(RLX_ERR_SHAPE, "%s must be [%lld], got %s", what, (long long)len, SHAPE_A(&v->shape));
    if (v->dtype != t)
        return rlx_set_error(RLX_ERR_DTYPE, "%s dtype %s differs from %s", what, rlx_dtype_name(v->dtype),
                             rlx_dtype_name(t));
    return RLX_OK;
}

rlx_status rlx_infer_batch_norm(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    if (x->shape.ndim < 2)
        return rlx_set_error(RLX_ERR_SHAPE, "batch_norm input must be [N, C, ...], got %s", SHAPE_A(&x->shape));
    if (!rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "batch_norm takes a float type, got %s", rlx_dtype_name(x->dtype));
    static const char *names[4] = {"scale", "bias", "mean", "var"};
    for (int i = 1; i < 5; i++) {
        rlx_status s = check_vec(g, n->in[i], x->shape.dims[1], x->dtype, names[i - 1]);
        if (s != RLX_OK)
            return s;
    }
    if (!(n->attrs.batch_norm.eps >= 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "eps must be >= 0");
    n->shape = x->shape;
    n->dtype = x->dtype;
    return RLX_OK;
}

static rlx_status check_act(int act)
{
    if (act < 0 || act >= RLX_ACT_COUNT)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "unknown activation %d", act);
    return RLX_OK;
}

rlx_status rlx_infer_matmul_bias_act(const rlx_graph *g, rlx_node_data *n)
{
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    a.matmul.trans_a = n->attrs.mm_act.trans_a;
    a.matmul.trans_b = n->attrs.mm_act.trans_b;
    rlx_node_data r;
    rlx_status s = infer_as(g, n, RLX_OP_MATMUL, 2, n->in, &a, &r);
    if (s != RLX_OK)
        return s;
    if ((s = check_act(n->attrs.mm_act.act)) != RLX_OK)
        return s;
    if (n->attrs.mm_act.has_bias != (n->n_in == 3))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "bias flag and input count disagree");
    if (n->n_in == 3 && (s = check_vec(g, n->in[2], r.shape.dims[r.shape.ndim - 1], r.dtype, "bias")) != RLX_OK)
        return s;
    n->shape = r.shape;
    n->dtype = r.dtype;
    return RLX_OK;
}

/* matmul_integer_scale(a, b, a_zp, b_zp, scale[, bias]): scale one
 * element or [N], bias [N], both f32. */
rlx_status rlx_infer_matmul_integer_scale(const rlx_graph *g, rlx_node_data *n)
{
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    rlx_node_data r;
    rlx_status s = infer_as(g, n, RLX_OP_MATMUL_INTEGER, 4, n->in, &a, &r);
    if (s != RLX_OK)
        return s;
    if ((s = check_act(n->attrs.mm_act.act)) != RLX_OK)
        return s;
    if (n->attrs.mm_act.has_bias != (n->n_in == 6))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "bias flag and input count disagree");
    int64_t cols = r.shape.dims[r.shape.ndim - 1];
    const rlx_node_data *sc = IN(4);
    if (!(sc->dtype == RLX_F32 && rlx_shape_numel(&sc->shape) == 1 && sc->shape.ndim <= r.shape.ndim) &&
        (s = check_vec(g, n->in[4], cols, RLX_F32, "scale")) != RLX_OK)
        return s;
    if (n->n_in == 6 && (s = check_vec(g, n->in[5], cols, RLX_F32, "bias")) != RLX_OK)
        return s;
    n->shape = r.shape;
    n->dtype = RLX_F32;
    return RLX_OK;
}

/* One f32 element (a scalar, or a tensor of one element no wider than the
 * result). */
static rlx_status check_one(const rlx_graph *g, rlx_node id, int rank, const char *what)
{
    const rlx_node_data *v = &g->nodes[id];
    if (v->dtype != RLX_F32 || rlx_shape_numel(&v->shape) != 1 || v->shape.ndim > rank)
        return rlx_set_error(RLX_ERR_SHAPE, "%s must be one f32 element, got %s %s", what, rlx_dtype_name(v->dtype),
                             SHAPE_A(&v->shape));
    return RLX_OK;
}

static rlx_status check_range(const rlx_graph *g, rlx_node id, const char *what)
{
    const rlx_node_data *v = &g->nodes[id];
    if (v->dtype != RLX_F32 || v->shape.ndim != 1 || v->shape.dims[0] != 2)
        return rlx_set_error(RLX_ERR_SHAPE, "%s must be f32 [2] (scale, zero point), got %s %s", what,
                             rlx_dtype_name(v->dtype), SHAPE_A(&v->shape));
    return RLX_OK;
}

/* qlinear_matmul(a, b, a_zp, b_zp, scale, [rq_range, dq_zp, dq_scale],
 * [bias], [out_range]): the inputs its attributes name, in this order. */
rlx_status rlx_infer_qlinear_matmul(const rlx_graph *g, rlx_node_data *n)
{
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    rlx_node_data r;
    rlx_status s = infer_as(g, n, RLX_OP_MATMUL_INTEGER, 4, n->in, &a, &r);
    if (s != RLX_OK)
        return s;
    if ((s = check_act(n->attrs.qmm.act)) != RLX_OK)
        return s;
    int rq = n->attrs.qmm.requant != 0, bias = n->attrs.qmm.has_bias != 0, out = n->attrs.qmm.out_u8 != 0;
    if (n->n_in != 5 + 3 * rq + bias + out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "qlinear_matmul's flags and input count disagree");
    int64_t cols = r.shape.dims[r.shape.ndim - 1];
    int k = 4, rank = r.shape.ndim;
    const rlx_node_data *sc = IN(k);
    if (!(sc->dtype == RLX_F32 && rlx_shape_numel(&sc->shape) == 1 && sc->shape.ndim <= rank) &&
        (s = check_vec(g, n->in[k], cols, RLX_F32, "scale")) != RLX_OK)
        return s;
    k++;
    if (rq && ((s = check_range(g, n->in[k], "requantization range")) != RLX_OK ||
               (s = check_one(g, n->in[k + 1], rank, "dequantization zero point")) != RLX_OK ||
               (s = check_one(g, n->in[k + 2], rank, "dequantization scale")) != RLX_OK))
        return s;
    k += 3 * rq;
    if (bias && (s = check_vec(g, n->in[k++], cols, RLX_F32, "bias")) != RLX_OK)
        return s;
    if (out && (s = check_range(g, n->in[k], "output range")) != RLX_OK)
        return s;
    n->shape = r.shape;
    n->dtype = out ? RLX_U8 : RLX_F32;
    return RLX_OK;
}

rlx_status rlx_infer_add_norm(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *r = IN(1);
    if (!rlx_shape_equal(&x->shape, &r->shape) || x->dtype != r->dtype)
        return rlx_set_error(RLX_ERR_SHAPE, "residual %s %s must match input %s %s", SHAPE_A(&r->shape),
                             rlx_dtype_name(r->dtype), SHAPE_B(&x->shape), rlx_dtype_name(x->dtype));
    bool rms = n->op != RLX_OP_ADD_LAYER_NORM, keep = n->op == RLX_OP_ADD_RMS_NORM_KEEP;
    if (rms && n->attrs.norm.has_beta)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rms norm has no bias");
    if (keep && x->shape.ndim >= RLX_MAX_DIMS)
        return rlx_set_error(RLX_ERR_SHAPE, "rank %d leaves no room for the [2, ...] result", x->shape.ndim);
    rlx_node in[3] = {n->in[0], n->in[2], n->in[3]};
    rlx_node_data res;
    rlx_status s = infer_as(g, n, rms ? RLX_OP_RMS_NORM : RLX_OP_LAYER_NORM, n->n_in - 1, in, NULL, &res);
    if (s != RLX_OK)
        return s;
    n->shape = res.shape;
    n->dtype = res.dtype;
    if (keep) { /* the sum and the norm, stacked on a new leading axis */
        for (int i = n->shape.ndim; i > 0; i--)
            n->shape.dims[i] = n->shape.dims[i - 1];
        n->shape.dims[0] = 2;
        n->shape.ndim++;
    }
    return RLX_OK;
}

rlx_status rlx_infer_swiglu(const rlx_graph *g, rlx_node_data *n)
{
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    rlx_node_data r1, r2;
    rlx_node gate[2] = {n->in[0], n->in[1]}, up[2] = {n->in[0], n->in[2]};
    rlx_status s = infer_as(g, n, RLX_OP_MATMUL, 2, gate, &a, &r1);
    if (s == RLX_OK)
        s = infer_as(g, n, RLX_OP_MATMUL, 2, up, &a, &r2);
    if (s != RLX_OK)
        return s;
    if (!rlx_shape_equal(&r1.shape, &r2.shape))
        return rlx_set_error(RLX_ERR_SHAPE, "gate %s and up %s projections differ", SHAPE_A(&r1.shape),
                             SHAPE_B(&r2.shape));
    n->shape = r1.shape;
    n->dtype = r1.dtype;
    return RLX_OK;
}

int rlx_attn_block_input(const rlx_node_data *n, int which)
{
    int k = 5;
    for (int i = 1; i <= 7; i++) {
        int present = i <= 4   ? (n->attrs.attn_block.has_bias >> (i - 1)) & 1
                      : i == 5 ? n->attrs.attn_block.has_qnorm
                      : i == 6 ? n->attrs.attn_block.has_knorm
                               : n->attrs.attn_block.has_mask;
        if (i == which)
            return present ? k : -1;
        k += present != 0;
    }
    return -1;
}

int rlx_qkv_heads_input(const rlx_node_data *n, int which)
{
    const int present[5] = {0, n->attrs.qkv.has_rope, n->attrs.qkv.has_rope, n->attrs.qkv.has_qnorm,
                            n->attrs.qkv.has_knorm};
    if (which < 1 || which > 4 || !present[which])
        return -1;
    int k = 1;
    for (int i = 1; i < which; i++)
        k += present[i] != 0;
    return k;
}

rlx_status rlx_infer_qkv_heads(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
#define a (&n->attrs.qkv)
    if (x->shape.ndim != 3 || !rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_SHAPE, "qkv_heads takes a float [B, S, (H + 2 Hk) D], got %s %s",
                             rlx_dtype_name(x->dtype), SHAPE_A(&x->shape));
    const int64_t H = a->heads, Hk = a->kv_heads, D = a->head_dim, B = x->shape.dims[0], S = x->shape.dims[1];
    if (H < 1 || Hk < 1 || D < 1 || (a->has_rope && D % 2) || x->shape.dims[2] != (H + 2 * Hk) * D)
        return rlx_set_error(RLX_ERR_SHAPE,
                             "qkv_heads: %lld heads, %lld kv heads of %lld (even with rope) do not fit %s",
                             (long long)H, (long long)Hk, (long long)D, SHAPE_A(&x->shape));
    int expected = 1 + 2 * (a->has_rope != 0) + (a->has_qnorm != 0) + (a->has_knorm != 0);
    if (n->n_in != expected)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "qkv_heads expects %d inputs, got %d", expected, n->n_in);
    rlx_shape table = {4, {B, 1, S, D / 2}}; /* or [1, 1, S, D/2] */
    for (int i = 1; i <= 4; i++) {
        int k = rlx_qkv_heads_input(n, i);
        if (k < 0)
            continue;
        const rlx_node_data *t = IN(k);
        if (!rlx_dtype_is_float(t->dtype))
            return rlx_set_error(RLX_ERR_DTYPE, "qkv_heads: input %d is %s, not a float type", k,
                                 rlx_dtype_name(t->dtype));
        bool fits = i <= 2 ? t->shape.ndim == 4 && (t->shape.dims[0] == B || t->shape.dims[0] == 1) &&
                                 t->shape.dims[1] == 1 && t->shape.dims[2] == S && t->shape.dims[3] == D / 2
                           : t->shape.ndim == 1 && t->shape.dims[0] == D;
        if (!fits)
            return rlx_set_error(RLX_ERR_SHAPE, "qkv_heads: %s %s must be %s", i <= 2 ? "rope table" : "norm gamma",
                                 SHAPE_A(&t->shape), i <= 2 ? SHAPE_B(&table) : "[head_dim]");
    }
    n->shape.ndim = 1;
    n->shape.dims[0] = B * S * (H + 2 * Hk) * D;
    n->dtype = x->dtype;
    return RLX_OK;
#undef a
}

rlx_status rlx_infer_glu(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    const int r = x->shape.ndim;
    if (r < 1 || x->shape.dims[r - 1] % 2 || !rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_SHAPE, "glu takes a float x whose last axis is even, got %s %s",
                             rlx_dtype_name(x->dtype), SHAPE_A(&x->shape));
    if (n->attrs.glu.act <= RLX_ACT_NONE || n->attrs.glu.act >= RLX_ACT_COUNT)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "glu: activation %d is not one of rlx_act's", n->attrs.glu.act);
    n->shape = x->shape;
    n->shape.dims[r - 1] /= 2;
    n->dtype = x->dtype;
    return RLX_OK;
}

int64_t rlx_projection_rows(const rlx_node_data *x)
{
    const int64_t width = x->shape.ndim ? x->shape.dims[x->shape.ndim - 1] : 0;
    return width ? rlx_shape_numel(&x->shape) / width : 0;
}

rlx_status rlx_infer_projection(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0), *w = IN(1);
    const int pre = n->attrs.proj.pre, glu = n->attrs.proj.glu, r = x->shape.ndim;
    if (pre != RLX_PROJ_PLAIN && pre != RLX_PROJ_RMS_NORM)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "projection: pre %d is not one of rlx_proj_pre's", pre);
    if (glu < RLX_ACT_NONE || glu >= RLX_ACT_COUNT)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "projection: glu activation %d is not one of rlx_act's", glu);
    const int expected = 2 + (pre == RLX_PROJ_RMS_NORM) + (n->attrs.proj.has_res != 0);
    if (n->n_in != expected)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "projection expects %d inputs, got %d", expected, n->n_in);
    const int quant = n->attrs.proj.quant;
    if (quant) {
        /* the weight as qmatmul takes it (k = 0 for a scalar x: refused) */
        rlx_status st = rlx_check_quant_weight(quant, r ? x->shape.dims[r - 1] : 0, w);
        if (st != RLX_OK)
            return st;
        if (!rlx_dtype_is_float(x->dtype) || x->dtype == RLX_F64)
            return rlx_set_error(RLX_ERR_DTYPE, "projection by a %s weight takes f32, f16 or bf16 x, got %s",
                                 rlx_ggml_type_name(quant), rlx_dtype_name(x->dtype));
    } else if (r < 1 || w->shape.ndim != 2 || !rlx_dtype_is_float(x->dtype) || w->dtype != x->dtype) {
        return rlx_set_error(
            RLX_ERR_SHAPE, "projection takes a float x and a weight [N, K] of its dtype, got %s %s and %s %s",
            rlx_dtype_name(x->dtype), SHAPE_A(&x->shape), rlx_dtype_name(w->dtype), SHAPE_B(&w->shape));
    }
    const int64_t N = w->shape.dims[0], K = quant ? x->shape.dims[r - 1] : w->shape.dims[1];
    if (x->shape.dims[r - 1] != K || (glu != RLX_ACT_NONE && N % 2))
        return rlx_set_error(RLX_ERR_SHAPE, "projection: x %s does not fit the weight %s%s", SHAPE_A(&x->shape),
                             SHAPE_B(&w->shape), glu != RLX_ACT_NONE ? " (a gated unit needs an even N)" : "");
    n->shape = x->shape;
    n->shape.dims[r - 1] = glu != RLX_ACT_NONE ? N / 2 : N;
    n->dtype = x->dtype;
    int k = 2;
    if (pre == RLX_PROJ_RMS_NORM) {
        const rlx_node_data *gm = IN(k++);
        if (gm->shape.ndim != 1 || gm->shape.dims[0] != K || gm->dtype != x->dtype)
            return rlx_set_error(RLX_ERR_SHAPE, "projection: norm gamma %s %s must be [%lld] %s", SHAPE_A(&gm->shape),
                                 rlx_dtype_name(gm->dtype), (long long)K, rlx_dtype_name(x->dtype));
    }
    if (n->attrs.proj.has_res) {
        const rlx_node_data *res = IN(k);
        if (!rlx_shape_equal(&res->shape, &n->shape) || res->dtype != n->dtype)
            return rlx_set_error(RLX_ERR_SHAPE, "projection: residual %s %s must match the result %s %s",
                                 SHAPE_A(&res->shape), rlx_dtype_name(res->dtype), SHAPE_B(&n->shape),
                                 rlx_dtype_name(n->dtype));
    }
    return RLX_OK;
}

static rlx_status check_mat(const rlx_graph *g, rlx_node id, int64_t rows, int64_t cols, rlx_dtype t, const char *what)
{
    const rlx_node_data *w = &g->nodes[id];
    if (w->shape.ndim != 2 || w->shape.dims[0] != rows || w->shape.dims[1] != cols)
        return rlx_set_error(RLX_ERR_SHAPE, "%s must be [%lld, %lld], got %s", what, (long long)rows, (long long)cols,
                             SHAPE_A(&w->shape));
    if (w->dtype != t)
        return rlx_set_error(RLX_ERR_DTYPE, "%s dtype %s differs from %s", what, rlx_dtype_name(w->dtype),
                             rlx_dtype_name(t));
    return RLX_OK;
}

rlx_status rlx_infer_attention_block(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
#define a (&n->attrs.attn_block)
    if (x->shape.ndim != 3)
        return rlx_set_error(RLX_ERR_SHAPE, "attention block input must be [B, S, hidden], got %s", SHAPE_A(&x->shape));
    if (!rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "attention block takes a float type, got %s", rlx_dtype_name(x->dtype));
    int64_t hid = x->shape.dims[2], H = a->heads, Hk = a->kv_heads, D = a->head_dim, Dv = a->v_head_dim;
    if (H < 1 || Hk < 1 || D < 1 || Dv < 1 || H % Hk)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "bad heads %lld / kv heads %lld / dims %lld, %lld", (long long)H,
                             (long long)Hk, (long long)D, (long long)Dv);
    if (a->has_rope && (D % 2 || !(a->rope_theta > 0)))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rope needs an even head dim and theta > 0");
    int expected = 5 + (a->has_qnorm != 0) + (a->has_knorm != 0) + (a->has_mask != 0);
    for (int i = 0; i < 4; i++)
        expected += (a->has_bias >> i) & 1;
    if (n->n_in != expected || (a->has_bias & ~15))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "attention block expects %d inputs, got %d", expected, n->n_in);
    rlx_dtype t = x->dtype;
    const rlx_node_data *wo = IN(4);
    if (wo->shape.ndim != 2)
        return rlx_set_error(RLX_ERR_SHAPE, "output projection must be 2-d, got %s", SHAPE_A(&wo->shape));
    int64_t out_dim = wo->shape.dims[1];
    rlx_status s;
    if ((s = check_mat(g, n->in[1], hid, H * D, t, "q projection")) != RLX_OK ||
        (s = check_mat(g, n->in[2], hid, Hk * D, t, "k projection")) != RLX_OK ||
        (s = check_mat(g, n->in[3], hid, Hk * Dv, t, "v projection")) != RLX_OK ||
        (s = check_mat(g, n->in[4], H * Dv, out_dim, t, "output projection")) != RLX_OK)
        return s;
    const int64_t blen[4] = {H * D, Hk * D, Hk * Dv, out_dim};
    for (int i = 1; i <= 6; i++) {
        int k = rlx_attn_block_input(n, i);
        if (k >= 0 &&
            (s = check_vec(g, n->in[k], i <= 4 ? blen[i - 1] : D, t, i <= 4 ? "bias" : "norm gamma")) != RLX_OK)
            return s;
    }
    int km = rlx_attn_block_input(n, 7);
    if (km >= 0) {
        const rlx_node_data *m = IN(km);
        int64_t S = x->shape.dims[1];
        rlx_shape full = {4, {x->shape.dims[0], H, S, S}};
        if (m->dtype != RLX_BOOL && m->dtype != t)
            return rlx_set_error(RLX_ERR_DTYPE, "attention block mask must be bool or %s, got %s", rlx_dtype_name(t),
                                 rlx_dtype_name(m->dtype));
        if (!rlx_shape_broadcasts_to(&m->shape, &full))
            return rlx_set_error(RLX_ERR_SHAPE, "attention block mask %s does not broadcast to [B, H, S, S] = %s",
                                 SHAPE_A(&m->shape), SHAPE_B(&full));
    }
    n->shape.ndim = 3;
    n->shape.dims[0] = x->shape.dims[0];
    n->shape.dims[1] = x->shape.dims[1];
    n->shape.dims[2] = out_dim;
    n->dtype = t;
    return RLX_OK;
#undef a
}

rlx_status rlx_infer_elementwise_chain(const rlx_graph *g, rlx_node_data *n)
{
    int nops = n->attrs.ew.n_ops;
    if (nops < 1 || nops > RLX_EW_MAX_OPS)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "elementwise program has %d instructions (1..%d)", nops,
                             RLX_EW_MAX_OPS);
    rlx_dtype t = IN(0)->dtype;
    if (!rlx_dtype_is_float(t))
        return rlx_set_error(RLX_ERR_DTYPE, "elementwise chain takes a float type, got %s", rlx_dtype_name(t));
    rlx_shape out = IN(0)->shape;
    for (int i = 1; i < n->n_in; i++) {
        if (IN(i)->dtype != t)
            return rlx_set_error(RLX_ERR_DTYPE, "operand %d has dtype %s, operand 0 %s", i,
                                 rlx_dtype_name(IN(i)->dtype), rlx_dtype_name(t));
        if (!rlx_shape_broadcast(&out, &IN(i)->shape, &out))
            return rlx_set_error(RLX_ERR_SHAPE, "operand %d shape %s does not broadcast", i, SHAPE_A(&IN(i)->shape));
    }
    for (int k = 0; k < nops; k++) {
        const uint8_t *c = &n->attrs.ew.code[3 * k];
        rlx_op op = (rlx_op)c[0];
        int regs = n->n_in + k;
        const rlx_op_info *info = rlx_op_info_of(op);
        bool chain = info && (info->flags & RLX_OPF_CHAIN);
        bool binary = chain && info->kind == RLX_KIND_BINARY;
        if (!chain)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "instruction %d: %s is not a float elementwise op", k,
                                 rlx_op_name(op));
        if (c[1] >= regs || (binary && c[2] >= regs))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "instruction %d reads a register not yet written", k);
    }
    n->shape = out;
    n->dtype = t;
    return RLX_OK;
}

rlx_status rlx_infer_softmax_scale_mask(const rlx_graph *g, rlx_node_data *n)
{
    const rlx_node_data *x = IN(0);
    if (!rlx_dtype_is_float(x->dtype))
        return rlx_set_error(RLX_ERR_DTYPE, "softmax takes a float type, got %s", rlx_dtype_name(x->dtype));
    int axis = n->attrs.sm.axis;
    if (axis < 0 || axis >= x->shape.ndim)
        return rlx_set_error(RLX_ERR_SHAPE, "axis %d out of range for rank %d", axis, x->shape.ndim);
    if (n->attrs.sm.has_mask != (n->n_in == 2))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "mask flag and input count disagree");
    if (n->n_in == 2) {
        const rlx_node_data *m = IN(1);
        if (m->dtype != RLX_BOOL && m->dtype != x->dtype)
            return rlx_set_error(RLX_ERR_DTYPE, "mask must be bool or %s, got %s", rlx_dtype_name(x->dtype),
                                 rlx_dtype_name(m->dtype));
        if (!rlx_shape_broadcasts_to(&m->shape, &x->shape))
            return rlx_set_error(RLX_ERR_SHAPE, "mask %s does not broadcast to %s", SHAPE_A(&m->shape),
                                 SHAPE_B(&x->shape));
    }
    n->shape = x->shape;
    n->dtype = x->dtype;
    return RLX_OK;
}

rlx_status rlx_infer_conv_bias_act(const rlx_graph *g, rlx_node_data *n)
{
    rlx_status s = check_act(n->attrs.conv.act);
    if (s != RLX_OK)
        return s;
    rlx_node_data r;
    int ri = rlx_conv_residual_input(n);
    if (ri >= 0 && n->n_in != ri + 1)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "conv_bias_act with a residual takes %d inputs, got %d", ri + 1,
                             n->n_in);
    if ((s = infer_as(g, n, RLX_OP_CONV, ri >= 0 ? ri : n->n_in, n->in, NULL, &r)) != RLX_OK)
        return s;
    if (ri >= 0) {
        const rlx_node_data *res = IN(ri);
        if (!rlx_shape_equal(&res->shape, &r.shape) || res->dtype != r.dtype)
            return rlx_set_error(RLX_ERR_SHAPE, "conv_bias_act's residual must be %s of %s (its output), got %s of %s",
                                 SHAPE_A(&r.shape), rlx_dtype_name(r.dtype), SHAPE_B(&res->shape),
                                 rlx_dtype_name(res->dtype));
    }
    n->attrs.conv.spatial = r.attrs.conv.spatial;
    n->shape = r.shape;
    n->dtype = r.dtype;
    return RLX_OK;
}
