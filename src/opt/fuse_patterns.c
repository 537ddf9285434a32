/* fuse_patterns.c - the structured fusion patterns.  Each is tried at a
 * root node; it checks ops, single use of every swallowed intermediate,
 * shapes, axes and dtypes, then hands a spec to fs_commit (which asks the
 * target's claim). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "opt/fuse_internal.h"

static bool is_vec(const fuse_state *s, rlx_node id, int64_t len, rlx_dtype t)
{
    const rlx_node_data *n = fs_node(s, id);
    return n->shape.ndim == 1 && n->shape.dims[0] == len && n->dtype == t;
}

static void spec_init(fuse_spec *sp, rlx_node root, rlx_op op)
{
    memset(sp, 0, sizeof *sp);
    sp->root = root;
    sp->node.op = op;
}

static void spec_in(fuse_spec *sp, rlx_node x) { sp->node.in[sp->node.n_in++] = x; }

static bool in_list_k(const rlx_node *l, int n, rlx_node x)
{
    for (int i = 0; i < n; i++)
        if (l[i] == x)
            return true;
    return false;
}

/* ------------------------------------------------------- attention block */

typedef struct proj_match {
    rlx_node x, w, bias, gamma; /* bias, gamma: -1 if absent */
    int heads, dim;
    double eps;
    int has_rope, interleaved;
    double theta;
    int64_t offset;
    rlx_node nodes[8];
    int n_nodes;
} proj_match;

static const int k_to_heads[4] = {0, 2, 1, 3};

static bool is_head_transpose(const rlx_node_data *n)
{
    return n->op == RLX_OP_TRANSPOSE && n->shape.ndim == 4 &&
           !memcmp(n->attrs.transpose.perm, k_to_heads, sizeof k_to_heads);
}

/* Walks back from attention operand `id`: [rope] <- transpose(0,2,1,3)
 * <- [rms_norm] <- reshape [B,S,h*d] -> [B,S,h,d] <- [add bias] <- x @ w.
 * The norm may also sit after the transpose (the same over the last axis). */
static bool match_proj(const fuse_state *s, rlx_node id, bool allow_rope_norm, proj_match *m)
{
    memset(m, 0, sizeof *m);
    m->bias = m->gamma = -1;
#define SWALLOW(x)                    \
    do {                              \
        if (!fs_inner(s, (x)))        \
            return false;             \
        m->nodes[m->n_nodes++] = (x); \
    } while (0)
    rlx_node cur = id;
    const rlx_node_data *n = fs_node(s, cur);
    if (allow_rope_norm && n->op == RLX_OP_ROPE) {
        if (n->n_in != 1)
            return false; /* the block computes its angles from theta */
        SWALLOW(cur);
        m->has_rope = 1;
        m->theta = n->attrs.rope.theta;
        m->offset = n->attrs.rope.offset;
        m->interleaved = n->attrs.rope.interleaved;
        cur = n->in[0];
        n = fs_node(s, cur);
    }
    if (allow_rope_norm && n->op == RLX_OP_RMS_NORM && n->attrs.norm.has_gamma) {
        SWALLOW(cur);
        m->gamma = n->in[1];
        m->eps = n->attrs.norm.eps;
        cur = n->in[0];
        n = fs_node(s, cur);
    }
    if (!is_head_transpose(n))
        return false;
    SWALLOW(cur);
    cur = n->in[0];
    n = fs_node(s, cur);
    if (allow_rope_norm && m->gamma < 0 && n->op == RLX_OP_RMS_NORM && n->attrs.norm.has_gamma) {
        SWALLOW(cur);
        m->gamma = n->in[1];
        m->eps = n->attrs.norm.eps;
        cur = n->in[0];
        n = fs_node(s, cur);
    }
    if (n->op != RLX_OP_RESHAPE || n->shape.ndim != 4)
        return false;
    SWALLOW(cur);
    const rlx_node_data *src = fs_node(s, n->in[0]);
    if (src->shape.ndim != 3 || src->shape.dims[0] != n->shape.dims[0] || src->shape.dims[1] != n->shape.dims[1] ||
        src->shape.dims[2] != n->shape.dims[2] * n->shape.dims[3])
        return false;
    m->heads = (int)n->shape.dims[2];
    m->dim = (int)n->shape.dims[3];
    if (m->gamma >= 0 && !is_vec(s, m->gamma, m->dim, n->dtype))
        return false;
    cur = n->in[0];
    n = fs_node(s, cur);
    if (n->op == RLX_OP_ADD) {
        int64_t width = n->shape.dims[n->shape.ndim - 1];
        for (int j = 0; j < 2; j++) {
            const rlx_node_data *o = fs_node(s, n->in[1 - j]);
            if (o->op == RLX_OP_MATMUL && is_vec(s, n->in[j], width, n->dtype) &&
                rlx_shape_equal(&o->shape, &n->shape)) {
                SWALLOW(cur);
                m->bias = n->in[j];
                cur = n->in[1 - j];
                n = fs_node(s, cur);
                break;
            }
        }
    }
    if (n->op != RLX_OP_MATMUL || n->attrs.matmul.trans_a || n->attrs.matmul.trans_b)
        return false;
    SWALLOW(cur);
    const rlx_node_data *x = fs_node(s, n->in[0]), *w = fs_node(s, n->in[1]);
    if (x->shape.ndim != 3 || w->shape.ndim != 2)
        return false;
    m->x = n->in[0];
    m->w = n->in[1];
    return true;
#undef SWALLOW
}

bool fuse_attention_block(fuse_state *s, rlx_node root)
{
    rlx_node nodes[40];
    int nn = 0;
    const rlx_node_data *r = fs_node(s, root);
    rlx_node mm = root, bo = -1;
    if (r->op == RLX_OP_ADD) {
        int64_t width = r->shape.dims[r->shape.ndim > 0 ? r->shape.ndim - 1 : 0];
        for (int j = 0; j < 2 && bo < 0; j++)
            if (r->shape.ndim == 3 && fs_node(s, r->in[1 - j])->op == RLX_OP_MATMUL && fs_inner(s, r->in[1 - j]) &&
                is_vec(s, r->in[j], width, r->dtype) && rlx_shape_equal(&fs_node(s, r->in[1 - j])->shape, &r->shape)) {
                bo = r->in[j];
                mm = r->in[1 - j];
                nodes[nn++] = mm;
            }
        if (bo < 0)
            return false;
    }
    const rlx_node_data *m = fs_node(s, mm);
    if (m->op != RLX_OP_MATMUL || m->attrs.matmul.trans_a || m->attrs.matmul.trans_b || m->shape.ndim != 3 ||
        !fs_fusable_dtype(m->dtype) || fs_node(s, m->in[1])->shape.ndim != 2)
        return false;
    /* reshape [B,S,H,Dv] -> [B,S,H*Dv] <- transpose(0,2,1,3) <- attention */
    rlx_node rs = m->in[0];
    const rlx_node_data *rsn = fs_node(s, rs);
    if (rsn->op != RLX_OP_RESHAPE || !fs_inner(s, rs) || rsn->shape.ndim != 3)
        return false;
    rlx_node tr = rsn->in[0];
    const rlx_node_data *trn = fs_node(s, tr);
    if (!is_head_transpose(trn) || !fs_inner(s, tr) || trn->shape.dims[0] != rsn->shape.dims[0] ||
        trn->shape.dims[1] != rsn->shape.dims[1] || trn->shape.dims[2] * trn->shape.dims[3] != rsn->shape.dims[2])
        return false;
    rlx_node at = trn->in[0];
    const rlx_node_data *atn = fs_node(s, at);
    if (atn->op != RLX_OP_ATTENTION || atn->attrs.attention.has_pos || !fs_inner(s, at))
        return false; /* the block has no per-sequence positions */
    nodes[nn++] = rs;
    nodes[nn++] = tr;
    nodes[nn++] = at;
    proj_match q, k, v;
    if (!match_proj(s, atn->in[0], true, &q) || !match_proj(s, atn->in[1], true, &k) ||
        !match_proj(s, atn->in[2], false, &v))
        return false;
    if (q.x != k.x || q.x != v.x || q.has_rope != k.has_rope || k.heads != v.heads || q.dim != k.dim)
        return false;
    if (q.has_rope && (q.theta != k.theta || q.offset != k.offset || q.interleaved != k.interleaved))
        return false;
    if (q.gamma >= 0 && k.gamma >= 0 && q.eps != k.eps)
        return false;
    /* the three projections must be distinct nodes (no shared subgraph) */
    for (int i = 0; i < q.n_nodes; i++)
        if (in_list_k(k.nodes, k.n_nodes, q.nodes[i]) || in_list_k(v.nodes, v.n_nodes, q.nodes[i]))
            return false;
    for (int i = 0; i < k.n_nodes; i++)
        if (in_list_k(v.nodes, v.n_nodes, k.nodes[i]))
            return false;
    const proj_match *pm[3] = {&q, &k, &v};
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < pm[p]->n_nodes; i++)
            nodes[nn++] = pm[p]->nodes[i];
    if (!fs_fusable_dtype(fs_node(s, q.x)->dtype))
        return false;
    fuse_spec sp;
    spec_init(&sp, root, RLX_OP_ATTENTION_BLOCK);
#define a (&sp.node.attrs.attn_block)
    a->heads = q.heads;
    a->kv_heads = k.heads;
    a->head_dim = q.dim;
    a->v_head_dim = v.dim;
    a->has_bias = (q.bias >= 0) | (k.bias >= 0) << 1 | (v.bias >= 0) << 2 | (bo >= 0) << 3;
    a->has_qnorm = q.gamma >= 0;
    a->has_knorm = k.gamma >= 0;
    a->norm_eps = q.gamma >= 0 ? q.eps : k.eps;
    a->has_rope = q.has_rope;
    a->rope_theta = q.theta;
    a->rope_offset = q.offset;
    a->rope_interleaved = q.interleaved;
    a->causal = atn->attrs.attention.causal;
    a->has_mask = atn->attrs.attention.has_mask;
    a->scale = atn->attrs.attention.scale;
    spec_in(&sp, q.x);
    spec_in(&sp, q.w);
    spec_in(&sp, k.w);
    spec_in(&sp, v.w);
    spec_in(&sp, m->in[1]);
    const rlx_node opt[7] = {q.bias, k.bias, v.bias, bo, q.gamma, k.gamma, a->has_mask ? atn->in[3] : -1};
    for (int i = 0; i < 7; i++)
        if (opt[i] >= 0)
            spec_in(&sp, opt[i]);
#undef a
    return fs_commit(s, &sp, nodes, nn);
}

/* ---------------------------------------------------------------- SwiGLU */

bool fuse_swiglu(fuse_state *s, rlx_node root)
{
    const rlx_node_data *r = fs_node(s, root);
    if (r->op != RLX_OP_MUL || !fs_fusable_dtype(r->dtype))
        return false;
    for (int j = 0; j < 2; j++) {
        rlx_node si = r->in[j], up = r->in[1 - j];
        const rlx_node_data *sn = fs_node(s, si), *un = fs_node(s, up);
        if (sn->op != RLX_OP_SILU || !fs_inner(s, si) || un->op != RLX_OP_MATMUL || !fs_inner(s, up))
            continue;
        rlx_node gate = sn->in[0];
        const rlx_node_data *gn = fs_node(s, gate);
        if (gn->op != RLX_OP_MATMUL || !fs_inner(s, gate) || gn->in[0] != un->in[0] || gn->attrs.matmul.trans_a ||
            gn->attrs.matmul.trans_b || un->attrs.matmul.trans_a || un->attrs.matmul.trans_b ||
            !rlx_shape_equal(&gn->shape, &un->shape) || !rlx_shape_equal(&gn->shape, &r->shape))
            continue;
        fuse_spec sp;
        spec_init(&sp, root, RLX_OP_SWIGLU);
        spec_in(&sp, gn->in[0]);
        spec_in(&sp, gn->in[1]);
        spec_in(&sp, un->in[1]);
        rlx_node nodes[3] = {si, up, gate};
        return fs_commit(s, &sp, nodes, 3);
    }
    return false;
}

/* ------------------------------------------------- matmul + bias + act */

/* An activation at `root` over an inner node: the activation (its operand
 * becomes *cur and joins nodes[]); otherwise RLX_ACT_NONE with *cur = root.
 * -1 when the activation's operand is used elsewhere. */
static int peel_act(fuse_state *s, rlx_node root, rlx_node *cur, rlx_node *nodes, int *nn)
{
    const rlx_node_data *r = fs_node(s, root);
    int act = fs_act_of(r->op);
    *cur = root;
    if (act < 0)
        return RLX_ACT_NONE;
    if (!fs_inner(s, r->in[0]))
        return -1;
    *cur = r->in[0];
    nodes[(*nn)++] = *cur;
    return act;
}

bool fuse_matmul_bias_act(fuse_state *s, rlx_node root)
{
    rlx_node nodes[2], cur;
    int nn = 0;
    int act = peel_act(s, root, &cur, nodes, &nn);
    if (act < 0)
        return false;
    const rlx_node_data *c = fs_node(s, cur);
    rlx_node mm = -1, bias = -1;
    if (c->op == RLX_OP_ADD && c->shape.ndim >= 2) {
        int64_t width = c->shape.dims[c->shape.ndim - 1];
        for (int j = 0; j < 2 && mm < 0; j++) {
            const rlx_node_data *o = fs_node(s, c->in[1 - j]);
            if (o->op == RLX_OP_MATMUL && fs_inner(s, c->in[1 - j]) && is_vec(s, c->in[j], width, c->dtype) &&
                rlx_shape_equal(&o->shape, &c->shape)) {
                mm = c->in[1 - j];
                bias = c->in[j];
            }
        }
        if (mm < 0)
            return false;
        nodes[nn++] = mm;
    } else if (c->op == RLX_OP_MATMUL && act != RLX_ACT_NONE) {
        mm = cur;
    } else {
        return false;
    }
    const rlx_node_data *m = fs_node(s, mm);
    if (!fs_fusable_dtype(m->dtype))
        return false;
    fuse_spec sp;
    spec_init(&sp, root, RLX_OP_MATMUL_BIAS_ACT);
    sp.node.attrs.mm_act.trans_a = m->attrs.matmul.trans_a;
    sp.node.attrs.mm_act.trans_b = m->attrs.matmul.trans_b;
    sp.node.attrs.mm_act.act = act;
    sp.node.attrs.mm_act.has_bias = bias >= 0;
    spec_in(&sp, m->in[0]);
    spec_in(&sp, m->in[1]);
    if (bias >= 0)
        spec_in(&sp, bias);
    return fs_commit(s, &sp, nodes, nn);
}

/* ------------------------------------------------------- projection */

/* A product a projection takes: a matmul by a 2-D weight read transposed,
 * or a qmatmul. */
static bool is_projection_product(fuse_state *s, rlx_node id)
{
    const rlx_node_data *m = fs_node(s, id);
    if (m->op == RLX_OP_QMATMUL)
        return true;
    return m->op == RLX_OP_MATMUL && !m->attrs.matmul.trans_a && m->attrs.matmul.trans_b &&
           fs_node(s, m->in[1])->shape.ndim == 2;
}

/* pre(x) @ w^T for a 2-D weight read transposed (or a quantized one),
 * then a gated unit or a residual add (RLX_OP_PROJECTION): the product
 * with the RMS norm before it and what follows it in a decoder.  Only a
 * target that runs it better than its parts claims it (for a decode
 * step's rows). */
bool fuse_projection(fuse_state *s, rlx_node root)
{
    const rlx_node_data *r = fs_node(s, root);
    rlx_node nodes[3], mm = -1, res = -1;
    int nn = 0, glu = RLX_ACT_NONE;
    if (r->op == RLX_OP_ADD) {
        for (int j = 0; j < 2 && mm < 0; j++) {
            const rlx_node_data *o = fs_node(s, r->in[1 - j]);
            if (is_projection_product(s, r->in[1 - j]) && fs_inner(s, r->in[1 - j]) &&
                rlx_shape_equal(&o->shape, &r->shape) && rlx_shape_equal(&fs_node(s, r->in[j])->shape, &r->shape)) {
                mm = r->in[1 - j];
                res = r->in[j];
            }
        }
    } else if (r->op == RLX_OP_GLU && is_projection_product(s, r->in[0]) && fs_inner(s, r->in[0])) {
        mm = r->in[0];
        glu = r->attrs.glu.act;
    } else if (is_projection_product(s, root)) {
        mm = root;
    }
    if (mm < 0)
        return false;
    if (mm != root)
        nodes[nn++] = mm;
    const rlx_node_data *m = fs_node(s, mm);
    if (!fs_fusable_dtype(m->dtype))
        return false;
    rlx_node x = m->in[0], gamma = -1;
    const rlx_node_data *xn = fs_node(s, x);
    double eps = 0.0;
    if (xn->op == RLX_OP_RMS_NORM && xn->attrs.norm.has_gamma && fs_inner(s, x)) {
        gamma = xn->in[1];
        eps = xn->attrs.norm.eps;
        nodes[nn++] = x;
        x = xn->in[0];
    } else if (res < 0 && glu == RLX_ACT_NONE) {
        return false; /* a plain product stays a matmul */
    }
    fuse_spec sp;
    spec_init(&sp, root, RLX_OP_PROJECTION);
    sp.node.attrs.proj.pre = gamma >= 0 ? RLX_PROJ_RMS_NORM : RLX_PROJ_PLAIN;
    sp.node.attrs.proj.glu = glu;
    sp.node.attrs.proj.has_res = res >= 0;
    sp.node.attrs.proj.eps = eps;
    sp.node.attrs.proj.quant = m->op == RLX_OP_QMATMUL ? m->attrs.quant.qtype : 0;
    spec_in(&sp, x);
    spec_in(&sp, m->in[1]);
    if (gamma >= 0)
        spec_in(&sp, gamma);
    if (res >= 0)
        spec_in(&sp, res);
    return fs_commit(s, &sp, nodes, nn);
}

/* ------------------------------------------- integer matmul rescale */

/* act(f32(matmul_integer) * scale [+ bias]): the dequantization that
 * follows an 8-bit product (ONNX's MatMulInteger, Cast, Mul), applied by
 * the product's kernel as it stores each block. */
bool fuse_matmul_integer_scale(fuse_state *s, rlx_node root)
{
    rlx_node nodes[4], cur, bias = -1;
    int nn = 0;
    int act = peel_act(s, root, &cur, nodes, &nn);
    if (act < 0)
        return false;
    const rlx_node_data *c = fs_node(s, cur);
    if (c->op != RLX_OP_MUL && c->op != RLX_OP_ADD)
        return false;
    if (c->dtype != RLX_F32 || c->shape.ndim < 1)
        return false;
    int64_t width = c->shape.dims[c->shape.ndim - 1];
    if (c->op == RLX_OP_ADD) {
        for (int j = 0; j < 2 && bias < 0; j++)
            if (fs_node(s, c->in[1 - j])->op == RLX_OP_MUL && fs_inner(s, c->in[1 - j]) &&
                is_vec(s, c->in[j], width, RLX_F32) && rlx_shape_equal(&fs_node(s, c->in[1 - j])->shape, &c->shape)) {
                bias = c->in[j];
                cur = c->in[1 - j];
            }
        if (bias < 0)
            return false;
        nodes[nn++] = cur;
        c = fs_node(s, cur);
    }
    for (int j = 0; j < 2; j++) {
        rlx_node cast = c->in[j], scale = c->in[1 - j];
        const rlx_node_data *cn = fs_node(s, cast), *sn = fs_node(s, scale);
        if (cn->op != RLX_OP_CAST || !fs_inner(s, cast) || !rlx_shape_equal(&cn->shape, &c->shape))
            continue;
        rlx_node mm = cn->in[0];
        const rlx_node_data *m = fs_node(s, mm);
        if (m->op != RLX_OP_MATMUL_INTEGER || !fs_inner(s, mm))
            continue;
        bool one = sn->dtype == RLX_F32 && rlx_shape_numel(&sn->shape) == 1 && sn->shape.ndim <= c->shape.ndim;
        if (!one && !is_vec(s, scale, width, RLX_F32))
            continue;
        nodes[nn++] = cast;
        nodes[nn++] = mm;
        fuse_spec sp;
        spec_init(&sp, root, RLX_OP_MATMUL_INTEGER_SCALE);
        sp.node.attrs.mm_act.act = act;
        sp.node.attrs.mm_act.has_bias = bias >= 0;
        for (int i = 0; i < 4; i++)
            spec_in(&sp, m->in[i]);
        spec_in(&sp, scale);
        if (bias >= 0)
            spec_in(&sp, bias);
        return fs_commit(s, &sp, nodes, nn);
    }
    return false;
}

/* ------------------------------------ quantized product with requantization */

static bool is_one_f32(const fuse_state *s, rlx_node id, int rank)
{
    const rlx_node_data *n = fs_node(s, id);
    return n->dtype == RLX_F32 && rlx_shape_numel(&n->shape) == 1 && n->shape.ndim <= rank;
}

/* One operand of the binary node `id` that is an inner `op` node of the
 * node's shape; the other operand into *other. */
static rlx_node inner_operand(const fuse_state *s, rlx_node id, rlx_op op, rlx_node *other)
{
    const rlx_node_data *c = fs_node(s, id);
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *o = fs_node(s, c->in[j]);
        if (o->op == op && fs_inner(s, c->in[j]) && rlx_shape_equal(&o->shape, &c->shape)) {
            *other = c->in[1 - j];
            return c->in[j];
        }
    }
    return -1;
}

/* mul(cast(matmul_integer) to f32, scale one element or [N]) at id: the
 * product and its scale; swallowed nodes join nodes[]. */
static bool match_int_product(fuse_state *s, rlx_node id, rlx_node *mm, rlx_node *scale, rlx_node *nodes, int *nn)
{
    const rlx_node_data *c = fs_node(s, id);
    if (c->op != RLX_OP_MUL || c->dtype != RLX_F32 || c->shape.ndim < 1)
        return false;
    rlx_node cast = inner_operand(s, id, RLX_OP_CAST, scale);
    if (cast < 0 || fs_node(s, fs_node(s, cast)->in[0])->op != RLX_OP_MATMUL_INTEGER ||
        !fs_inner(s, fs_node(s, cast)->in[0]))
        return false;
    if (!is_one_f32(s, *scale, c->shape.ndim) && !is_vec(s, *scale, c->shape.dims[c->shape.ndim - 1], RLX_F32))
        return false;
    *mm = fs_node(s, cast)->in[0];
    nodes[(*nn)++] = cast;
    nodes[(*nn)++] = *mm;
    return true;
}

/* [quantize_u8 of] act([dequantized requantization of] an integer product
 * [+ bias]), as ONNX's QuantizeLinear, QLinearMatMul (matmul_integer, cast,
 * mul, quantize_u8 at import) and DequantizeLinear (cast, sub, mul) leave
 * it: one product whose kernel requantizes each block while it is in
 * cache, where these were three or four passes over the result.  At least
 * one of the requantization and the output quantization must be there
 * (without either it is matmul_integer_scale). */
bool fuse_qlinear_matmul(fuse_state *s, rlx_node root)
{
    rlx_node nodes[12], cur = root, out_range = -1, bias = -1, mm = -1, scale = -1, rq[3] = {-1, -1, -1};
    int nn = 0;
    const rlx_node_data *r = fs_node(s, root);
    if (r->op == RLX_OP_QUANTIZE_U8) {
        if (!fs_inner(s, r->in[0]))
            return false;
        out_range = r->in[1];
        cur = r->in[0];
        nodes[nn++] = cur;
    }
    int act = peel_act(s, cur, &cur, nodes, &nn);
    if (act < 0)
        return false;
    const rlx_node_data *c = fs_node(s, cur);
    if (c->dtype != RLX_F32 || c->shape.ndim < 1)
        return false;
    int rank = c->shape.ndim;
    int64_t width = c->shape.dims[rank - 1];
    if (c->op == RLX_OP_ADD) {
        rlx_node mul = inner_operand(s, cur, RLX_OP_MUL, &bias);
        if (mul < 0 || !is_vec(s, bias, width, RLX_F32))
            return false;
        cur = mul;
        nodes[nn++] = cur;
    }
    if (!match_int_product(s, cur, &mm, &scale, nodes, &nn)) {
        /* DequantizeLinear of the requantized product: mul(sub(cast(q), zp), scale) */
        if (fs_node(s, cur)->op != RLX_OP_MUL)
            return false;
        rlx_node sub = inner_operand(s, cur, RLX_OP_SUB, &rq[2]), cast, q;
        if (sub < 0 || !is_one_f32(s, rq[2], rank))
            return false;
        nodes[nn++] = sub;
        const rlx_node_data *sn = fs_node(s, sub);
        cast = sn->in[0];
        rq[1] = sn->in[1];
        if (fs_node(s, cast)->op != RLX_OP_CAST || !fs_inner(s, cast) || !is_one_f32(s, rq[1], rank) ||
            !rlx_shape_equal(&fs_node(s, cast)->shape, &sn->shape))
            return false;
        nodes[nn++] = cast;
        q = fs_node(s, cast)->in[0];
        if (fs_node(s, q)->op != RLX_OP_QUANTIZE_U8 || !fs_inner(s, q))
            return false;
        nodes[nn++] = q;
        rq[0] = fs_node(s, q)->in[1];
        if (!match_int_product(s, fs_node(s, q)->in[0], &mm, &scale, nodes, &nn))
            return false;
        nodes[nn++] = fs_node(s, q)->in[0];
        if (!fs_inner(s, fs_node(s, q)->in[0]))
            return false;
    } else if (out_range < 0) {
        return false;
    }
    const rlx_node_data *m = fs_node(s, mm);
    fuse_spec sp;
    spec_init(&sp, root, RLX_OP_QLINEAR_MATMUL);
    sp.node.attrs.qmm.act = act;
    sp.node.attrs.qmm.has_bias = bias >= 0;
    sp.node.attrs.qmm.requant = rq[0] >= 0;
    sp.node.attrs.qmm.out_u8 = out_range >= 0;
    for (int i = 0; i < 4; i++)
        spec_in(&sp, m->in[i]);
    spec_in(&sp, scale);
    for (int i = 0; i < 3 && rq[0] >= 0; i++)
        spec_in(&sp, rq[i]);
    if (bias >= 0)
        spec_in(&sp, bias);
    if (out_range >= 0)
        spec_in(&sp, out_range);
    return fs_commit(s, &sp, nodes, nn);
}

/* ------------------------------------------------ residual add + norm */

bool fuse_add_norm(fuse_state *s, rlx_node root)
{
    const rlx_node_data *r = fs_node(s, root);
    if (r->op != RLX_OP_LAYER_NORM && r->op != RLX_OP_RMS_NORM)
        return false;
    rlx_node add = r->in[0];
    const rlx_node_data *an = fs_node(s, add);
    if (an->op != RLX_OP_ADD || s->taken[add] || !fs_fusable_dtype(an->dtype))
        return false;
    const rlx_node_data *x = fs_node(s, an->in[0]), *y = fs_node(s, an->in[1]);
    if (!rlx_shape_equal(&x->shape, &an->shape) || !rlx_shape_equal(&y->shape, &an->shape))
        return false; /* a broadcasting add is not a residual */
    /* A sum read elsewhere too (the residual stream of a pre-norm block):
     * RMS norm only, and only if no other reader comes before the norm;
     * the fused node then gives both the sum and the norm. */
    bool keep = !fs_inner(s, add);
    if (keep) {
        if (r->op != RLX_OP_RMS_NORM || an->shape.ndim >= RLX_MAX_DIMS || rlx_shape_numel(&an->shape) == 0)
            return false;
        for (rlx_node i = add + 1; i < root; i++)
            for (int j = 0; j < s->g->nodes[i].n_in; j++)
                if (s->g->nodes[i].in[j] == add)
                    return false;
        /* Where a training step's backward computes this norm again
         * (activation checkpointing), the forward's norm dies in the
         * forward while the sum lives into the backward: one buffer for
         * both would keep the norm's half as long. */
        for (rlx_node i = root + 1; i < s->g->n_nodes; i++) {
            const rlx_node_data *c = &s->g->nodes[i];
            if (c->recompute && c->op == r->op && c->in[0] == add)
                return false;
        }
    }
    fuse_spec sp;
    spec_init(&sp, root,
              keep ? RLX_OP_ADD_RMS_NORM_KEEP
                   : (r->op == RLX_OP_LAYER_NORM ? RLX_OP_ADD_LAYER_NORM : RLX_OP_ADD_RMS_NORM));
    if (keep) {
        sp.n_views = 2;
        sp.views[0] = add;
        sp.views[1] = root;
    }
    sp.node.attrs.norm = r->attrs.norm;
    spec_in(&sp, an->in[0]);
    spec_in(&sp, an->in[1]);
    for (int i = 1; i < r->n_in; i++)
        spec_in(&sp, r->in[i]);
    return fs_commit(s, &sp, &add, 1);
}

/* ------------------------------------------- softmax(x * scale + mask) */

/* x * c, c * x or x / c with c a one-element constant, shaped like x. */
static bool match_scale(const fuse_state *s, rlx_node id, rlx_node *x, double *scale)
{
    const rlx_node_data *n = fs_node(s, id);
    if ((n->op != RLX_OP_MUL && n->op != RLX_OP_DIV) || !fs_inner(s, id))
        return false;
    for (int j = 0; j < 2; j++) {
        if (n->op == RLX_OP_DIV && j == 0)
            continue;
        double c;
        if (!rlx_scalar_value(fs_node(s, n->in[j]), &c))
            continue;
        const rlx_node_data *o = fs_node(s, n->in[1 - j]);
        if (!rlx_shape_equal(&o->shape, &n->shape))
            continue;
        if (n->op == RLX_OP_DIV) {
            if (c == 0)
                return false;
            c = 1.0 / c;
        }
        *x = n->in[1 - j];
        *scale = c;
        return true;
    }
    return false;
}

bool fuse_softmax(fuse_state *s, rlx_node root)
{
    const rlx_node_data *r = fs_node(s, root);
    if (r->op != RLX_OP_SOFTMAX || !fs_fusable_dtype(r->dtype))
        return false;
    rlx_node nodes[2];
    int nn = 0;
    rlx_node cur = r->in[0], x = -1, mask = -1;
    double scale = 1.0;
    const rlx_node_data *c = fs_node(s, cur);
    if (c->op == RLX_OP_ADD && fs_inner(s, cur)) {
        /* one side is the (maybe scaled) scores, the other the mask */
        for (int j = 0; j < 2 && mask < 0; j++) {
            const rlx_node_data *m = fs_node(s, c->in[1 - j]), *sc = fs_node(s, c->in[j]);
            rlx_shape b;
            if (!rlx_shape_equal(&sc->shape, &c->shape) || m->dtype != c->dtype ||
                !rlx_shape_broadcast(&m->shape, &c->shape, &b) || !rlx_shape_equal(&b, &c->shape))
                continue;
            rlx_node xs;
            double sv;
            if (j == 0 && !match_scale(s, c->in[0], &xs, &sv) && match_scale(s, c->in[1], &xs, &sv))
                continue; /* the other side is the scaled scores: take it as x */
            mask = c->in[1 - j];
            cur = c->in[j];
        }
        if (mask < 0)
            return false;
        nodes[nn++] = r->in[0];
    }
    if (match_scale(s, cur, &x, &scale))
        nodes[nn++] = cur;
    else
        x = cur;
    if (nn == 0)
        return false;
    fuse_spec sp;
    spec_init(&sp, root, RLX_OP_SOFTMAX_SCALE_MASK);
    sp.node.attrs.sm.axis = r->attrs.softmax.axis;
    sp.node.attrs.sm.scale = scale;
    sp.node.attrs.sm.has_mask = mask >= 0;
    spec_in(&sp, x);
    if (mask >= 0)
        spec_in(&sp, mask);
    return fs_commit(s, &sp, nodes, nn);
}

/* ------------------------------------------- conv (+ batch norm) + act */

static double load_f(const rlx_node_data *n, int64_t i)
{
    const void *p = n->data;
    switch (n->dtype) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F64: return ((const double *)p)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

static void store_f(void *p, rlx_dtype t, int64_t i, double v)
{
    switch (t) {
    case RLX_F32: ((float *)p)[i] = (float)v; break;
    case RLX_F64: ((double *)p)[i] = v; break;
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)v); break;
    case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)v); break;
    default: break;
    }
}

static bool is_const(const fuse_state *s, rlx_node id) { return fs_node(s, id)->op == RLX_OP_CONSTANT; }

/* A per-output-channel scale and shift to fold into a conv:
 * conv'(x) = conv(x) * scale[o] + shift[o]. */
typedef struct conv_fold {
    int64_t O;
    double *scale, *shift;
} conv_fold;

static void fold_free(conv_fold *f)
{
    free(f->scale);
    free(f->shift);
    f->scale = f->shift = NULL;
}

/* scale 1, shift 0 over O channels; false when out of memory (the compile
 * then fails rather than leave the fold undone). */
static bool fold_init(const fuse_state *s, conv_fold *f, int64_t O)
{
    f->O = O;
    f->scale = rlx_malloc((size_t)O * sizeof(double) + 1);
    f->shift = rlx_malloc((size_t)O * sizeof(double) + 1);
    if (!f->scale || !f->shift) {
        fold_free(f);
        if (s->ctx && s->ctx->failure)
            *s->ctx->failure = RLX_ERR_OUT_OF_MEMORY;
        return false;
    }
    for (int64_t o = 0; o < O; o++)
        f->scale[o] = 1, f->shift[o] = 0;
    return true;
}

/* conv weights and bias with the fold applied: w'[o] = w[o] * scale[o],
 * b'[o] = b[o] * scale[o] + shift[o]. */
static bool fold_into_conv(const fuse_state *s, const rlx_node_data *conv, const conv_fold *f, fuse_spec *sp)
{
    const rlx_node_data *w = fs_node(s, conv->in[1]);
    const rlx_node_data *b = conv->attrs.conv.has_bias ? fs_node(s, conv->in[2]) : NULL;
    int64_t O = w->shape.dims[0], per = O ? rlx_shape_numel(&w->shape) / O : 0;
    rlx_dtype t = w->dtype;
    size_t es = rlx_dtype_size(t);
    void *wd = rlx_malloc((size_t)(O * per) * es + 1), *bd = rlx_malloc((size_t)O * es + 1);
    if (!wd || !bd) {
        free(wd);
        free(bd);
        if (s->ctx && s->ctx->failure) /* fail the compile rather than leave the fold undone */
            *s->ctx->failure = RLX_ERR_OUT_OF_MEMORY;
        return false;
    }
    for (int64_t o = 0; o < O; o++) {
        for (int64_t i = 0; i < per; i++)
            store_f(wd, t, o * per + i, load_f(w, o * per + i) * f->scale[o]);
        store_f(bd, t, o, (b ? load_f(b, o) : 0.0) * f->scale[o] + f->shift[o]);
    }
    rlx_node_data *cw = &sp->consts[0], *cb = &sp->consts[1];
    memset(cw, 0, sizeof *cw);
    cw->op = RLX_OP_CONSTANT;
    cw->dtype = t;
    cw->shape = w->shape;
    cw->data = wd;
    cw->data_bytes = (size_t)(O * per) * es;
    memset(cb, 0, sizeof *cb);
    cb->op = RLX_OP_CONSTANT;
    cb->dtype = t;
    cb->shape.ndim = 1;
    cb->shape.dims[0] = O;
    cb->data = bd;
    cb->data_bytes = (size_t)O * es;
    sp->n_consts = 2;
    return true;
}

/* A batch norm as a fold: scale k = gamma / sqrt(var + eps), shift
 * beta - mean * k. */
static bool fold_bn(const fuse_state *s, const rlx_node_data *bn, int64_t O, conv_fold *f)
{
    if (!fold_init(s, f, O))
        return false;
    const rlx_node_data *ga = fs_node(s, bn->in[1]), *be = fs_node(s, bn->in[2]), *mu = fs_node(s, bn->in[3]),
                        *va = fs_node(s, bn->in[4]);
    for (int64_t o = 0; o < O; o++) {
        double k = load_f(ga, o) / sqrt(load_f(va, o) + bn->attrs.batch_norm.eps);
        f->scale[o] = k;
        f->shift[o] = load_f(be, o) - load_f(mu, o) * k;
    }
    return true;
}

/* Whether constant k broadcasts against a conv output `y` (rank R, O
 * channels) along the channel axis only: one value, or O values on axis 1
 * with every other axis 1. */
static bool per_channel_const(const fuse_state *s, rlx_node k, const rlx_shape *y)
{
    const rlx_node_data *c = fs_node(s, k);
    if (!is_const(s, k) || !rlx_dtype_is_float(c->dtype) || c->shape.ndim > y->ndim)
        return false;
    int lead = y->ndim - c->shape.ndim;
    for (int i = 0; i < c->shape.ndim; i++) {
        int64_t d = c->shape.dims[i];
        if (d != 1 && !(i + lead == 1 && d == y->dims[1]))
            return false;
    }
    return true;
}

/* Whether every value of constant k is finite (and, for a divisor, not
 * zero): a fold would otherwise spread an infinity or NaN over the whole
 * product instead of the values it reaches. */
static bool const_finite(const fuse_state *s, rlx_node k, bool divisor)
{
    const rlx_node_data *c = fs_node(s, k);
    for (int64_t i = 0, n = rlx_shape_numel(&c->shape); i < n; i++) {
        double v = load_f(c, i);
        if (!isfinite(v) || (divisor && v == 0))
            return false;
    }
    return true;
}

/* One affine step z op k (or k op z) on a conv's output z, k per channel:
 * add, sub, mul, and div by k (the ONNX importer's batch norm is
 * (z - mean) * a + b).  Its operand z in *z; false if not such a step. */
static bool affine_step(const fuse_state *s, rlx_node id, const rlx_shape *y, rlx_node *z, rlx_node *k, bool *k_first)
{
    const rlx_node_data *n = fs_node(s, id);
    if (n->op != RLX_OP_ADD && n->op != RLX_OP_SUB && n->op != RLX_OP_MUL && n->op != RLX_OP_DIV)
        return false;
    if (s->taken[id] || !rlx_shape_equal(&n->shape, y))
        return false;
    for (int side = 0; side < 2; side++) { /* side 0: z op k; 1: k op z */
        rlx_node a = n->in[side], c = n->in[1 - side];
        if (side == 1 && n->op == RLX_OP_DIV)
            continue; /* k / z is not affine */
        if (per_channel_const(s, c, y) && rlx_shape_equal(&fs_node(s, a)->shape, y) &&
            const_finite(s, c, n->op == RLX_OP_DIV)) {
            *z = a, *k = c, *k_first = side == 1;
            return true;
        }
    }
    return false;
}

/* Composes step z op k after the fold so far (z = conv * scale + shift). */
static void fold_step(const fuse_state *s, conv_fold *f, rlx_op op, rlx_node k, bool k_first)
{
    const rlx_node_data *c = fs_node(s, k);
    bool one = rlx_shape_numel(&c->shape) == 1;
    for (int64_t o = 0; o < f->O; o++) {
        double v = load_f(c, one ? 0 : o);
        switch (op) {
        case RLX_OP_ADD: f->shift[o] += v; break;
        case RLX_OP_SUB:
            if (k_first)
                f->scale[o] = -f->scale[o], f->shift[o] = v - f->shift[o];
            else
                f->shift[o] -= v;
            break;
        case RLX_OP_MUL: f->scale[o] *= v, f->shift[o] *= v; break;
        default: f->scale[o] /= v, f->shift[o] /= v; break; /* div by k */
        }
    }
}

/* The longest run of affine steps from `top` down to a conv with constant
 * weights (and bias) that only the run reads: the steps, top first, in
 * steps[] (the conv last), or 0 when there is none. */
enum { MAX_AFFINE = 8 };

static int affine_run(const fuse_state *s, rlx_node top, rlx_node *steps, rlx_node *ks, bool *k_first)
{
    const rlx_shape *y = &fs_node(s, top)->shape;
    int n = 0;
    rlx_node cur = top;
    while (n < MAX_AFFINE && (cur == top || fs_inner(s, cur))) {
        rlx_node z;
        if (!affine_step(s, cur, y, &z, &ks[n], &k_first[n]))
            break;
        steps[n++] = cur;
        cur = z;
    }
    const rlx_node_data *cv = fs_node(s, cur);
    if (n == 0 || cv->op != RLX_OP_CONV || !fs_inner(s, cur) || !is_const(s, cv->in[1]) ||
        (cv->attrs.conv.has_bias && !is_const(s, cv->in[2])) || !rlx_dtype_is_float(cv->dtype) ||
        !rlx_shape_equal(&cv->shape, y))
        return 0;
    steps[n] = cur;
    return n;
}

/* residual: a node added to the conv's result before the activation, or -1. */
static bool try_conv(fuse_state *s, rlx_node root, rlx_node conv, const conv_fold *fold, int act, rlx_node residual,
                     const rlx_node *inner, int n_inner)
{
    const rlx_node_data *cn = fs_node(s, conv);
    for (int attempt = 0; attempt < 2; attempt++) {
        /* attempt 1 (no activation fused): plain conv with folded weights */
        if (attempt == 1 && (!fold || act != RLX_ACT_NONE || residual >= 0))
            return false;
        fuse_spec sp;
        spec_init(&sp, root, attempt ? RLX_OP_CONV : RLX_OP_CONV_BIAS_ACT);
        sp.node.attrs.conv = cn->attrs.conv;
        sp.node.attrs.conv.act = attempt ? 0 : act;
        spec_in(&sp, cn->in[0]);
        if (fold) {
            if (!fold_into_conv(s, cn, fold, &sp))
                return false;
            spec_in(&sp, -1);
            spec_in(&sp, -2);
            sp.node.attrs.conv.has_bias = 1;
        } else {
            for (int i = 1; i < cn->n_in; i++)
                spec_in(&sp, cn->in[i]);
        }
        if (residual >= 0) {
            spec_in(&sp, residual);
            sp.node.attrs.conv.has_residual = 1;
        }
        if (fs_commit(s, &sp, inner, n_inner))
            return true;
    }
    return false;
}

/* A batch norm node under `cur` whose conv and statistics are constant:
 * its conv, else -1. */
static rlx_node foldable_bn(const fuse_state *s, rlx_node cur)
{
    const rlx_node_data *c = fs_node(s, cur);
    bool consts = true;
    for (int i = 1; i < 5; i++)
        consts = consts && is_const(s, c->in[i]);
    rlx_node conv = c->in[0];
    const rlx_node_data *cv = fs_node(s, conv);
    if (cv->op != RLX_OP_CONV || !fs_inner(s, conv) || !consts || !is_const(s, cv->in[1]) ||
        (cv->attrs.conv.has_bias && !is_const(s, cv->in[2])))
        return -1;
    return conv;
}

/* Node `add` (an add of two operands of its own shape and dtype) as a
 * conv's result plus a residual: operand `pick` (0: the later one, whose
 * residual is then already computed and can lend the conv its buffer; 1:
 * the earlier) where it can be a conv's end (a conv, or a batch norm or
 * affine step over one, read only here); its other operand in *residual.
 * -1 if not. */
static rlx_node residual_branch(const fuse_state *s, rlx_node add, int pick, rlx_node *residual)
{
    const rlx_node_data *a = fs_node(s, add);
    if (a->op != RLX_OP_ADD || a->n_in != 2 || !fs_fusable_dtype(a->dtype))
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *o = fs_node(s, a->in[j]);
        if (!rlx_shape_equal(&o->shape, &a->shape) || o->dtype != a->dtype)
            return -1;
    }
    int later = a->in[1] > a->in[0] ? 1 : 0, j = pick ? 1 - later : later;
    rlx_node b = a->in[j];
    rlx_op op = fs_node(s, b)->op;
    if (b == a->in[1 - j] || !fs_inner(s, b) ||
        !(op == RLX_OP_CONV || op == RLX_OP_BATCH_NORM || op == RLX_OP_ADD || op == RLX_OP_SUB || op == RLX_OP_MUL ||
          op == RLX_OP_DIV))
        return -1;
    *residual = a->in[1 - j];
    return b;
}

/* conv, then a batch norm or a run of per-channel affine steps (folded
 * into the weights), then a residual added (residual_branch's `pick`; -1:
 * none), then an activation (the fused epilogue); at least one of them
 * after the conv. */
static bool fuse_conv_from(fuse_state *s, rlx_node root, int pick)
{
    const rlx_node_data *r = fs_node(s, root);
    int act = fs_act_of(r->op);
    rlx_node inner[MAX_AFFINE + 3];
    int ni = 0;
    rlx_node cur = root, residual = -1;
    if (act >= 0) {
        if (!fs_inner(s, r->in[0]))
            return false;
        cur = r->in[0];
        inner[ni++] = cur;
    } else {
        act = RLX_ACT_NONE;
    }
    if (pick >= 0) {
        if ((cur = residual_branch(s, cur, pick, &residual)) < 0)
            return false;
        inner[ni++] = cur;
    }
    const rlx_node_data *c = fs_node(s, cur);
    if (act != RLX_ACT_NONE && !fs_fusable_dtype(c->dtype))
        return false;
    rlx_node conv = cur, bn_root = -1;
    conv_fold fold = {0};
    bool folded = false;
    rlx_node steps[MAX_AFFINE + 1], ks[MAX_AFFINE];
    bool k_first[MAX_AFFINE];
    int n_steps = 0;
    if (c->op == RLX_OP_BATCH_NORM) {
        if ((conv = foldable_bn(s, cur)) < 0)
            return false; /* not foldable: maybe still conv + act below */
        inner[ni++] = conv;
        if (!fold_bn(s, c, fs_node(s, fs_node(s, conv)->in[1])->shape.dims[0], &fold))
            return false;
        folded = true, bn_root = cur;
    } else if ((n_steps = affine_run(s, cur, steps, ks, k_first)) > 0) {
        conv = steps[n_steps];
        if (!fold_init(s, &fold, fs_node(s, fs_node(s, conv)->in[1])->shape.dims[0]))
            return false;
        for (int i = n_steps - 1; i >= 0; i--) /* innermost step first */
            fold_step(s, &fold, fs_node(s, steps[i])->op, ks[i], k_first[i]);
        for (int i = 1; i <= n_steps; i++) /* steps[0] is the root, or inner[0] under an act */
            inner[ni++] = steps[i];
        folded = true;
    } else if (c->op != RLX_OP_CONV || (act == RLX_ACT_NONE && residual < 0)) {
        return false;
    }
    bool ok = try_conv(s, root, conv, folded ? &fold : NULL, act, residual, inner, ni);
    /* the target refused conv + act: fold the batch norm or the steps alone
     * at least (with a residual, the caller tries the form without it) */
    if (!ok && folded && act != RLX_ACT_NONE && residual < 0) {
        rlx_node top = bn_root >= 0 ? bn_root : steps[0];
        ok = try_conv(s, top, conv, &fold, RLX_ACT_NONE, -1, inner + 1, ni - 1);
    }
    if (ok && s->stats) {
        if (bn_root >= 0)
            s->stats->bn_folded++;
        else if (n_steps > 0)
            s->stats->affine_folded += n_steps;
    }
    fold_free(&fold);
    return ok;
}

bool fuse_conv(fuse_state *s, rlx_node root)
{
    return fuse_conv_from(s, root, 0) || fuse_conv_from(s, root, 1) || fuse_conv_from(s, root, -1);
}
