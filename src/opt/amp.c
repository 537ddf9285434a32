/* amp.c - automatic mixed precision, run after fusion (so casts never sit
 * between the nodes a pattern must see).
 *
 * Policy, for nodes that compute in f32 (each op's class is in its op table
 * row, `amp`, RLX_AMP_*; there is no list here):
 *   low  (f16/bf16): matmul, conv, attention and their fused forms, rope,
 *                    pooling windows, cheap elementwise arithmetic, and
 *                    norms and softmax (fused or not): every backend's norm
 *                    and softmax kernels keep their statistics in f32 or
 *                    wider whatever the storage dtype, and their outputs
 *                    are O(1), so only storage narrows;
 *   f32:             reductions, log-softmax,
 *                    exp/log/pow/sqrt/rsqrt/reciprocal,
 *                    comparisons, arg-reductions, and the rest; an
 *                    elementwise chain is low unless one of its
 *                    instructions is range-sensitive (RLX_OPF_CHAIN_F32);
 *   follow:          data movement (reshape, transpose, slice, concat,
 *                    gather, expand, pad), where, clip, dropout, and the
 *                    cross-entropy (its kernels read low logits into f32
 *                    statistics): they run in the dtype their data
 *                    arrives in.
 * Inputs, params and graph outputs keep their dtypes: casts are inserted on
 * the edges where a consumer wants another dtype (one cast per source and
 * dtype; constants are converted at compile time instead), and a cast that
 * would undo an inserted cast is dropped, as is a cast to the same dtype.
 * A node the target does not claim in the low dtype stays f32, with a note
 * on stderr; so does the whole graph if the target has no low matmul. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"

/* The node's class: its op table row's (RLX_AMP_*), an elementwise
 * program's from its instructions. */
static rlx_amp_class amp_class(const rlx_node_data *n)
{
    rlx_amp_class c = rlx_op_info_of(n->op)->amp;
    if (c != RLX_AMP_CHAIN)
        return c;
    for (int k = 0; k < n->attrs.ew.n_ops; k++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)n->attrs.ew.code[3 * k]);
        if (i && (i->flags & RLX_OPF_CHAIN_F32))
            return RLX_AMP_F32;
    }
    return RLX_AMP_LOW;
}

typedef struct amp_state {
    const rlx_graph *g;
    rlx_graph *out;
    rlx_node *map;
    rlx_node *memo; /* [old id][dtype] -> converted node in out, or -1 */
    bool *amp_cast; /* per out node: a cast this pass inserted */
    int *uses;      /* per old node: its readers, graph outputs included */
    int amp_cast_cap;
    rlx_opt_stats *stats;
} amp_state;

static bool mark_cast(amp_state *st, rlx_node id)
{
    if (id >= st->amp_cast_cap) {
        int cap = st->amp_cast_cap * 2 > id + 1 ? st->amp_cast_cap * 2 : id + 64;
        bool *p = rlx_realloc_array(st->amp_cast, (size_t)cap, sizeof(bool));
        if (!p)
            return false;
        memset(p + st->amp_cast_cap, 0, (size_t)(cap - st->amp_cast_cap) * sizeof(bool));
        st->amp_cast = p;
        st->amp_cast_cap = cap;
    }
    st->amp_cast[id] = true;
    return true;
}

static double load_any(const void *p, rlx_dtype t, int64_t i)
{
    switch (t) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F64: return ((const double *)p)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    default: return 0;
    }
}

/* The old node j's value in dtype t, as a node of out. */
static rlx_node to_dtype(amp_state *st, rlx_node j, rlx_dtype t)
{
    rlx_node x = st->map[j];
    const rlx_node_data *xn = &st->out->nodes[x];
    if (xn->dtype == t)
        return x;
    rlx_node *slot = &st->memo[(size_t)j * RLX_DTYPE_COUNT + t];
    if (*slot >= 0)
        return *slot;
    if (xn->op == RLX_OP_CAST && x < st->amp_cast_cap && st->amp_cast[x] && st->out->nodes[xn->in[0]].dtype == t) {
        if (st->stats)
            st->stats->casts_removed++;
        return *slot = xn->in[0];
    }
    if (xn->op == RLX_OP_CONSTANT && rlx_dtype_is_float(xn->dtype) && rlx_dtype_is_float(t)) {
        int64_t cnt = rlx_shape_numel(&xn->shape);
        size_t bytes = (size_t)cnt * rlx_dtype_size(t);
        void *buf = rlx_malloc(bytes + 1);
        if (!buf)
            return -1;
        for (int64_t i = 0; i < cnt; i++) {
            double v = load_any(xn->data, xn->dtype, i);
            switch (t) {
            case RLX_F32: ((float *)buf)[i] = (float)v; break;
            case RLX_F64: ((double *)buf)[i] = v; break;
            case RLX_F16: ((uint16_t *)buf)[i] = rlx_f32_to_f16((float)v); break;
            default: ((uint16_t *)buf)[i] = rlx_f32_to_bf16((float)v); break;
            }
        }
        rlx_node c = rlx_constant(st->out, t, xn->shape.ndim, xn->shape.dims, buf, bytes);
        free(buf);
        return *slot = c;
    }
    /* a reshape of a value other nodes read too: the reshape of that
     * value's cast, so a value read in t directly and through a view (the
     * logits' gradient by two products) is cast once */
    const rlx_node_data *jn = &st->g->nodes[j];
    if (jn->op == RLX_OP_RESHAPE && xn->op == RLX_OP_RESHAPE && st->map[jn->in[0]] == xn->in[0] &&
        st->uses[jn->in[0]] > 1) {
        rlx_shape s = xn->shape;
        rlx_node c = to_dtype(st, jn->in[0], t);
        return c < 0 ? -1 : (*slot = rlx_reshape(st->out, c, s.ndim, s.dims));
    }
    rlx_node c = rlx_cast(st->out, x, t);
    if (c >= 0 && !mark_cast(st, c))
        return -1;
    if (st->stats)
        st->stats->casts_inserted++;
    return *slot = c;
}

static rlx_dtype low_dtype(rlx_precision p) { return p == RLX_PRECISION_BF16 ? RLX_BF16 : RLX_F16; }

/* Whether the target runs src with its f32 inputs in dtype t (only < 0;
 * AUX_KEEP_DTYPE ops: input 0 alone), or with input `only` in t and every
 * other input as declared. */
static bool claims_in(const rlx_pass_ctx *ctx, const rlx_graph *g, const rlx_node_data *src, rlx_dtype t, int only)
{
    rlx_dtype dt[RLX_MAX_INPUTS];
    rlx_shape sh[RLX_MAX_INPUTS];
    bool keep_aux = rlx_op_info_of(src->op)->flags & RLX_OPF_AUX_KEEP_DTYPE;
    for (int j = 0; j < src->n_in; j++) {
        const rlx_node_data *in = &g->nodes[src->in[j]];
        bool to_t = only >= 0 ? j == only : in->dtype == RLX_F32 && !(keep_aux && j > 0);
        dt[j] = to_t ? t : in->dtype;
        sh[j] = in->shape;
    }
    return rlx_probe_claim(ctx, src, dt, sh);
}

rlx_graph *rlx_pass_amp(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    if (!ctx || ctx->precision == RLX_PRECISION_F32)
        return rlx_graph_clone(g);
    rlx_dtype low = low_dtype(ctx->precision);
    const char *lname = rlx_dtype_name(low);
    /* the whole precision first: no low matmul, no mixed precision */
    {
        rlx_node_data mm;
        memset(&mm, 0, sizeof mm);
        mm.op = RLX_OP_MATMUL;
        mm.n_in = 2;
        rlx_dtype dt[2] = {low, low};
        rlx_shape sh[2] = {{2, {4, 4}}, {2, {4, 4}}};
        if (!rlx_probe_claim(ctx, &mm, dt, sh)) {
            fprintf(stderr, "[rlx] note: precision %s is not available on this backend (no %s matmul); running f32\n",
                    lname, lname);
            if (ctx->stats)
                ctx->stats->amp_fallback++;
            return rlx_graph_clone(g);
        }
    }
    int n = g->n_nodes;
    amp_state st;
    memset(&st, 0, sizeof st);
    st.g = g;
    st.stats = ctx->stats;
    st.map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    st.memo = rlx_calloc((size_t)n * RLX_DTYPE_COUNT + 1, sizeof(rlx_node));
    st.out = rlx_graph_new();
    st.uses = rlx_graph_use_counts(g);
    bool noted[RLX_OP_COUNT] = {0};
    if (!st.map || !st.memo || !st.out || !st.uses)
        goto fail;
    for (int i = 0; i < g->n_outputs; i++)
        st.uses[g->outputs[i].node]++;
    for (size_t i = 0; i < (size_t)n * RLX_DTYPE_COUNT; i++)
        st.memo[i] = -1;
    for (int i = 0; i < n; i++) {
        const rlx_node_data *src = &g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(src->op);
        rlx_amp_class cls = amp_class(src);
        if (cls == RLX_AMP_LEAF) {
            if ((st.map[i] = rlx_copy_node(st.out, g, i, st.map)) < 0)
                goto fail;
            continue;
        }
        if (cls == RLX_AMP_CAST) {
            rlx_node y = to_dtype(&st, src->in[0], src->attrs.cast.to);
            if (y < 0)
                goto fail;
            st.map[i] = y;
            continue;
        }
        /* a cache is written in its own dtype: the update is converted, the
         * cache never (a cast would write into a copy of it) */
        if (cls == RLX_AMP_STATE) {
            rlx_node_data p = *src;
            for (int j = 0; j < p.n_in; j++)
                p.in[j] = st.map[src->in[j]];
            /* an optimizer step reads a low gradient as it arrives where the
             * target takes it (no f32 copy of every gradient) */
            rlx_dtype want = st.out->nodes[p.in[0]].dtype, got = st.out->nodes[p.in[1]].dtype;
            if (src->op == RLX_OP_OPTIMIZER_STEP && got == low && want == RLX_F32 && claims_in(ctx, g, src, low, 1))
                want = low;
            p.in[1] = to_dtype(&st, src->in[1], want);
            if (p.in[1] < 0)
                goto fail;
            /* the rest arrive as the op was given them (an optimizer's
             * hyper-parameters, gradient scale and state stay f32) */
            for (int j = 2; j < p.n_in; j++)
                if (rlx_dtype_is_float(g->nodes[src->in[j]].dtype) &&
                    (p.in[j] = to_dtype(&st, src->in[j], g->nodes[src->in[j]].dtype)) < 0)
                    goto fail;
            if ((st.map[i] = rlx_graph_add(st.out, &p)) < 0)
                goto fail;
            continue;
        }
        /* the dtype this node's f32 operands should arrive in */
        rlx_dtype t = RLX_F32;
        if (cls == RLX_AMP_LOW && src->dtype == RLX_F32) {
            t = low;
        } else if (cls == RLX_AMP_FOLLOW) {
            /* (where's condition is bool: only its branches can be f32) */
            for (int j = 0; j < src->n_in; j++)
                if (g->nodes[src->in[j]].dtype == RLX_F32) {
                    t = st.out->nodes[st.map[src->in[j]]].dtype;
                    break;
                }
        }
        if (t != RLX_F32 && !claims_in(ctx, g, src, t, -1)) {
            if (!noted[src->op] && cls == RLX_AMP_LOW)
                fprintf(stderr, "[rlx] note: %s has no %s kernel on this backend; it computes in f32\n",
                        rlx_op_name(src->op), lname);
            noted[src->op] = true;
            if (ctx->stats && cls == RLX_AMP_LOW)
                ctx->stats->amp_fallback++;
            t = RLX_F32;
        }
        rlx_node_data p = *src;
        bool keep_aux = info->flags & RLX_OPF_AUX_KEEP_DTYPE;
        for (int j = 0; j < p.n_in; j++) {
            rlx_node in = src->in[j];
            rlx_dtype want = g->nodes[in].dtype; /* keep_aux: the operand's declared dtype */
            if (want == RLX_F32 && !(keep_aux && j > 0))
                want = t;
            p.in[j] = rlx_dtype_is_float(want) ? to_dtype(&st, in, want) : st.map[in];
            if (p.in[j] < 0)
                goto fail;
        }
        if ((st.map[i] = rlx_graph_add(st.out, &p)) < 0)
            goto fail;
        if (t == low && cls == RLX_AMP_LOW && ctx->stats)
            ctx->stats->amp_low++;
    }
    /* outputs keep the dtypes the graph declared */
    for (int i = 0; i < g->n_outputs; i++) {
        rlx_node o = g->outputs[i].node;
        rlx_node y = to_dtype(&st, o, g->nodes[o].dtype);
        if (y < 0 || rlx_output(st.out, g->outputs[i].name, y) != RLX_OK)
            goto fail;
    }
    if (ctx->verbose && ctx->stats)
        fprintf(stderr, "[rlx] amp: %d nodes in %s, %d casts inserted, %d redundant casts removed\n",
                ctx->stats->amp_low, lname, ctx->stats->casts_inserted, ctx->stats->casts_removed);
    free(st.map);
    free(st.memo);
    free(st.amp_cast);
    free(st.uses);
    /* casts made redundant by a later cast are no longer read */
    rlx_graph *live = rlx_pass_dce(st.out, ctx);
    rlx_graph_free(st.out);
    return live;
fail:
    free(st.map);
    free(st.memo);
    free(st.amp_cast);
    free(st.uses);
    rlx_graph_free(st.out);
    return NULL;
}

/* The runtime's mixed-precision stage. */
rlx_graph *rlx_opt_amp(const rlx_graph *g, const rlx_pass_ctx *ctx) { return rlx_pass_amp(g, ctx); }
