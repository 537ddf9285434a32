/* layout.c - layout assignment.  Tensor cores want channels-last, so a
 * conv / conv_bias_act (and max/avg pool) over [N, C, H, W] whose
 * channels-last form the target claims is rewritten as
 *
 *   transpose(x, [0,2,3,1]) -> channels-last op (weight transposed too)
 *   -> transpose(y, [0,3,1,2])
 *
 * and the transposes are then pushed down through elementwise ops (their
 * per-channel operands reshaped or, constants, transposed to match),
 * reductions that keep their axes (global average pooling), gathers along
 * one axis (nearest Resize), concats and pools, and cancelled against each
 * other until nothing changes, so a chain of convolutions with residual
 * adds, activations, squeeze-excitation gates and upsampling between them
 * stays channels-last: only the transposes at the chain's ends and those
 * of the weights remain (param-only: the backend can cache them; constant
 * weights are transposed here, at compile time). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"

static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};

/* ops with a layout attribute (their op table rows say where it is) */
static bool is_conv(rlx_op op) { return rlx_op_info_of(op)->layout == RLX_LAYOUT_ATTR_CONV; }
static bool is_pool(rlx_op op) { return rlx_op_info_of(op)->layout == RLX_LAYOUT_ATTR_POOL; }

static rlx_shape permuted(const rlx_shape *s, const int *perm)
{
    rlx_shape r = *s;
    for (int i = 0; i < s->ndim; i++)
        r.dims[i] = s->dims[perm[i]];
    return r;
}

/* Would the target run node n of g channels-last? */
static bool claims_nhwc(const rlx_graph *g, const rlx_node_data *n, const rlx_pass_ctx *ctx)
{
    if (!(is_conv(n->op) ? n->attrs.conv.layout == RLX_LAYOUT_NCHW
                         : is_pool(n->op) && n->attrs.pool.layout == RLX_LAYOUT_NCHW))
        return false;
    if (g->nodes[n->in[0]].shape.ndim != 4)
        return false;
    rlx_node_data p = *n;
    rlx_dtype dt[RLX_MAX_INPUTS];
    rlx_shape sh[RLX_MAX_INPUTS];
    int ri = rlx_conv_residual_input(n);
    for (int i = 0; i < n->n_in; i++) {
        const rlx_node_data *in = &g->nodes[n->in[i]];
        dt[i] = in->dtype;
        /* x, weight and a residual channels-last; the bias as is */
        sh[i] = i < 2 || i == ri ? permuted(&in->shape, to_nhwc) : in->shape;
    }
    if (is_conv(n->op))
        p.attrs.conv.layout = RLX_LAYOUT_NHWC;
    else
        p.attrs.pool.layout = RLX_LAYOUT_NHWC;
    return rlx_probe_claim(ctx, &p, dt, sh);
}

/* A 4-D constant with its data permuted by perm (weights: no runtime
 * transpose at all). */
static rlx_node permute_constant(rlx_graph *g, const rlx_node_data *c, const int *perm)
{
    rlx_shape s = permuted(&c->shape, perm);
    size_t es = rlx_dtype_size(c->dtype), n = (size_t)rlx_shape_numel(&c->shape);
    unsigned char *buf = rlx_malloc(n * es + 1);
    if (!buf)
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "layout: no memory to transpose a constant");
    int64_t st[RLX_MAX_DIMS];
    rlx_shape_strides(&c->shape, st);
    const unsigned char *src = c->data;
    size_t k = 0;
    for (int64_t a = 0; a < s.dims[0]; a++)
        for (int64_t b = 0; b < s.dims[1]; b++)
            for (int64_t d = 0; d < s.dims[2]; d++)
                for (int64_t e = 0; e < s.dims[3]; e++, k++) {
                    int64_t idx[4] = {a, b, d, e}, off = 0;
                    for (int i = 0; i < 4; i++)
                        off += idx[i] * st[perm[i]];
                    memcpy(buf + k * es, src + (size_t)off * es, es);
                }
    rlx_node r = rlx_constant(g, c->dtype, 4, s.dims, buf, n * es);
    free(buf);
    return r;
}

static rlx_node transpose_of(rlx_graph *g, rlx_node x, const int *perm)
{
    if (g->nodes[x].op == RLX_OP_CONSTANT && g->nodes[x].data && g->nodes[x].shape.ndim == 4)
        return permute_constant(g, &g->nodes[x], perm);
    return rlx_transpose(g, x, perm);
}

typedef struct layout_step {
    const rlx_pass_ctx *ctx;
    const bool *ok; /* sink: nodes whose readers all take a sunk transpose */
    int convs, pools, changed;
} layout_step;

/* Step 1: every claimed conv becomes its channels-last form between two
 * transposes.  (Pooling changes layout only in step 2, where its input
 * already comes channels-last: a lone pool gains nothing.) */
static rlx_node convert_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    layout_step *st = (layout_step *)arg;
    const rlx_node_data *n = &g->nodes[id];
    if (!is_conv(n->op) || !claims_nhwc(g, n, st->ctx))
        return RLX_REBUILD_COPY;
    rlx_node_data p = *n;
    for (int j = 0; j < p.n_in; j++)
        p.in[j] = map[p.in[j]];
    p.in[0] = rlx_transpose(out, p.in[0], to_nhwc);
    p.in[1] = transpose_of(out, p.in[1], to_nhwc);
    int ri = rlx_conv_residual_input(n);
    if (ri >= 0)
        p.in[ri] = transpose_of(out, p.in[ri], to_nhwc);
    p.attrs.conv.layout = RLX_LAYOUT_NHWC;
    st->convs++;
    rlx_node y = rlx_graph_add(out, &p);
    return y < 0 ? RLX_REBUILD_FAIL : rlx_transpose(out, y, to_nchw);
}

static bool elementwise(const rlx_node_data *n)
{
    const rlx_op_info *info = rlx_op_info_of(n->op);
    if (n->op == RLX_OP_ELEMENTWISE_CHAIN)
        return true;
    return info && (info->flags & RLX_OPF_ELEMENTWISE) && !(info->flags & RLX_OPF_RANDOM);
}

/* A reduction keeping its axes, a gather along one axis by a vector of
 * indices, or a concat: ops a transpose moves below by renaming axes. */
static bool moves_axes(const rlx_graph *g, const rlx_node_data *n)
{
    switch (n->op) {
    case RLX_OP_REDUCE_SUM:
    case RLX_OP_REDUCE_MEAN:
    case RLX_OP_REDUCE_MAX:
    case RLX_OP_REDUCE_MIN: return n->attrs.reduce.keepdims;
    case RLX_OP_GATHER: return g->nodes[n->in[1]].shape.ndim == 1;
    case RLX_OP_CONCAT: return true;
    default: return false;
    }
}

/* Per node of g: is every reader a transpose, an elementwise op, one that
 * moves_axes or a pool
 * the target runs channels-last (so a transpose of it can move below its
 * readers without leaving a copy behind), and is it no graph output? */
static bool *sinkable_readers(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    bool *ok = rlx_calloc((size_t)g->n_nodes + 1, sizeof(bool));
    if (!ok)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        ok[i] = true;
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op == RLX_OP_TRANSPOSE || elementwise(n) || moves_axes(g, n) ||
            (is_pool(n->op) && claims_nhwc(g, n, ctx)))
            continue;
        for (int j = 0; j < n->n_in; j++)
            ok[n->in[j]] = false;
    }
    for (int i = 0; i < g->n_outputs; i++)
        ok[g->outputs[i].node] = false;
    return ok;
}

/* a as an operand of an op moved below transpose(., perm) of rank r:
 * a's dims (padded with leading 1s) permuted by perm's inverse.  A
 * reshape where at most one of its dims is not 1 (a per-channel scale, a
 * squeeze-excitation gate), the constant's data permuted where it is 4-D;
 * -1 for anything else (it would need a transpose at run time). */
static rlx_node operand_for(rlx_graph *out, rlx_node a, const int *perm, int r)
{
    const rlx_node_data *an = &out->nodes[a];
    if (rlx_shape_numel(&an->shape) == 1)
        return a;
    if (an->shape.ndim > r)
        return -1;
    int64_t pad[RLX_MAX_DIMS], dims[RLX_MAX_DIMS];
    int lead = r - an->shape.ndim, big = 0;
    for (int i = 0; i < r; i++) {
        pad[i] = i < lead ? 1 : an->shape.dims[i - lead];
        big += pad[i] != 1;
    }
    for (int i = 0; i < r; i++)
        dims[perm[i]] = pad[i]; /* dims[k] = pad[inverse[k]] */
    if (big <= 1)
        return rlx_reshape(out, a, r, dims);
    if (an->op == RLX_OP_CONSTANT && an->data && r == 4 && lead == 0) {
        int inv[4];
        for (int i = 0; i < 4; i++)
            inv[perm[i]] = i;
        return permute_constant(out, an, inv);
    }
    return -1;
}

/* Node n (operands already renamed into out) is elementwise over inputs
 * that are transposes by one perm, each of n's rank, or operands
 * operand_for can match to them: returns how
 * many are transposes (0 if the pattern does not hold) and fills perm. */
static int transposed_inputs(rlx_graph *out, const rlx_node_data *n, const rlx_node *in, int *perm)
{
    int count = 0;
    bool other = false;
    for (int j = 0; j < n->n_in; j++) {
        const rlx_node_data *a = &out->nodes[in[j]];
        if (a->op != RLX_OP_TRANSPOSE) {
            other = other || rlx_shape_numel(&a->shape) != 1;
            continue;
        }
        if (a->shape.ndim != n->shape.ndim) /* of n's rank: it broadcasts the same way untransposed */
            return 0;
        if (!count)
            memcpy(perm, a->attrs.transpose.perm, sizeof(int) * RLX_MAX_DIMS);
        else if (memcmp(perm, a->attrs.transpose.perm, sizeof(int) * (size_t)a->shape.ndim) != 0)
            return 0;
        count++;
    }
    /* the other operands must fit without a transpose of their own (only
     * checked here; sink_node builds them) */
    for (int j = 0; j < n->n_in && count && other; j++) {
        const rlx_node_data *a = &out->nodes[in[j]];
        if (a->op == RLX_OP_TRANSPOSE || rlx_shape_numel(&a->shape) == 1)
            continue;
        int big = 0;
        for (int i = 0; i < a->shape.ndim; i++)
            big += a->shape.dims[i] != 1;
        if (a->shape.ndim > n->shape.ndim ||
            (big > 1 && !(a->op == RLX_OP_CONSTANT && a->data && a->shape.ndim == 4 && n->shape.ndim == 4)))
            return 0;
    }
    return count;
}

/* Node n reads transposes only where moves_axes allows, each by one perm
 * and with no reader that would keep it: the same op over the transposes'
 * inputs, its axes renamed, then transposed by perm.  -2: not this case. */
static rlx_node sink_axes(rlx_graph *out, const rlx_graph *g, const rlx_node_data *n, const rlx_node *in,
                          layout_step *st)
{
    if (!moves_axes(g, n))
        return -2;
    int n_moved = n->op == RLX_OP_CONCAT ? n->n_in : 1;
    const int *perm = NULL;
    for (int j = 0; j < n_moved; j++) {
        const rlx_node_data *a = &out->nodes[in[j]];
        if (a->op != RLX_OP_TRANSPOSE || !st->ok[n->in[j]] ||
            (perm && memcmp(perm, a->attrs.transpose.perm, sizeof(int) * (size_t)a->shape.ndim) != 0))
            return -2;
        perm = a->attrs.transpose.perm;
    }
    int p_[RLX_MAX_DIMS];
    memcpy(p_, perm, sizeof p_);
    rlx_node_data p = *n;
    for (int j = 0; j < n->n_in; j++)
        p.in[j] = j < n_moved ? out->nodes[in[j]].in[0] : in[j];
    if (n->op == RLX_OP_CONCAT) {
        p.attrs.concat.axis = p_[n->attrs.concat.axis];
    } else if (n->op == RLX_OP_GATHER) {
        p.attrs.gather.axis = p_[n->attrs.gather.axis];
    } else {
        p.attrs.reduce.axes = 0;
        for (int i = 0; i < n->shape.ndim; i++)
            if (n->attrs.reduce.axes & (1u << i))
                p.attrs.reduce.axes |= 1u << p_[i];
    }
    st->changed++;
    rlx_node y = rlx_graph_add(out, &p);
    return y < 0 ? RLX_REBUILD_FAIL : rlx_transpose(out, y, p_);
}

/* Step 2, one sweep: transpose(transpose(x)) composes, an elementwise op
 * of transposed inputs becomes a transpose of the op, and a pool of a
 * channels-last tensor made NCHW becomes a channels-last pool where the
 * target claims it.  Counts what changed in st. */
static rlx_node sink_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    layout_step *st = (layout_step *)arg;
    const rlx_node_data *n = &g->nodes[id];
    rlx_node in[RLX_MAX_INPUTS], y;
    for (int j = 0; j < n->n_in; j++)
        in[j] = map[n->in[j]];
    if (n->op == RLX_OP_TRANSPOSE && out->nodes[in[0]].op == RLX_OP_TRANSPOSE) {
        const rlx_node_data *inner = &out->nodes[in[0]];
        int r[RLX_MAX_DIMS];
        bool ident = true;
        for (int k = 0; k < n->shape.ndim; k++) {
            r[k] = inner->attrs.transpose.perm[n->attrs.transpose.perm[k]];
            ident &= r[k] == k;
        }
        st->changed++;
        return ident ? inner->in[0] : rlx_transpose(out, inner->in[0], r);
    }
    if (is_pool(n->op) && out->nodes[in[0]].op == RLX_OP_TRANSPOSE && n->shape.ndim == 4 &&
        !memcmp(out->nodes[in[0]].attrs.transpose.perm, to_nchw, sizeof to_nchw) && st->ok[n->in[0]] &&
        claims_nhwc(g, n, st->ctx)) {
        rlx_node_data p = *n;
        p.in[0] = out->nodes[in[0]].in[0];
        p.attrs.pool.layout = RLX_LAYOUT_NHWC;
        st->changed++;
        st->pools++;
        y = rlx_graph_add(out, &p);
        return y < 0 ? RLX_REBUILD_FAIL : rlx_transpose(out, y, to_nchw);
    }
    if ((y = sink_axes(out, g, n, in, st)) != -2)
        return y;
    if (!elementwise(n) || n->n_in == 0)
        return RLX_REBUILD_COPY;
    int perm[RLX_MAX_DIMS];
    int count = transposed_inputs(out, n, in, perm);
    /* one transposed input: move the op only if the transpose then goes
     * away, not stays behind for another reader */
    bool single_ok = true;
    for (int j = 0; j < n->n_in && count == 1; j++)
        if (out->nodes[in[j]].op == RLX_OP_TRANSPOSE)
            single_ok = st->ok[n->in[j]];
    if (!count || (count == 1 && !single_ok))
        return RLX_REBUILD_COPY;
    rlx_node_data p = *n;
    for (int j = 0; j < n->n_in; j++) {
        const rlx_node_data *a = &out->nodes[in[j]];
        p.in[j] = a->op == RLX_OP_TRANSPOSE ? a->in[0] : operand_for(out, in[j], perm, n->shape.ndim);
        if (p.in[j] < 0)
            return RLX_REBUILD_FAIL;
    }
    st->changed++;
    y = rlx_graph_add(out, &p);
    return y < 0 ? RLX_REBUILD_FAIL : rlx_transpose(out, y, perm);
}

static int count_op(const rlx_graph *g, rlx_op op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += g->nodes[i].op == op;
    return c;
}

rlx_graph *rlx_pass_layout(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    /* without a target to ask there is nothing to gain */
    if (!ctx || !ctx->supports)
        return rlx_graph_clone(g);
    layout_step st = {ctx, NULL, 0, 0, 0};
    rlx_graph *cur = rlx_rebuild(g, convert_node, &st);
    if (!cur || st.convs == 0)
        return cur;
    int before = count_op(cur, RLX_OP_TRANSPOSE) - count_op(g, RLX_OP_TRANSPOSE);
    for (int iter = 0; iter < 64; iter++) {
        bool *ok = sinkable_readers(cur, ctx);
        st.ok = ok;
        st.changed = 0;
        rlx_graph *next = ok ? rlx_rebuild(cur, sink_node, &st) : NULL;
        free(ok);
        rlx_graph_free(cur);
        if (!next)
            return NULL;
        cur = next;
        if (!st.changed)
            break;
    }
    rlx_graph *next = rlx_pass_dce(cur, ctx);
    rlx_graph_free(cur);
    if (!next)
        return NULL;
    int left = count_op(next, RLX_OP_TRANSPOSE) - count_op(g, RLX_OP_TRANSPOSE);
    if (ctx->stats) {
        ctx->stats->layout_convs += st.convs;
        ctx->stats->layout_pools += st.pools;
        ctx->stats->layout_transposes_removed += before - left;
        ctx->stats->layout_transposes_left += left;
    }
    if (ctx->verbose)
        fprintf(stderr,
                "[rlx] layout: %d conv(s), %d pool(s) channels-last; %d transposes inserted, %d cancelled, %d left\n",
                st.convs, st.pools, before, before - left, left);
    return next;
}
