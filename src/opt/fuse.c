/* fuse.c - the fusion pass: target-aware pattern matching.
 *
 * Patterns are tried largest first (attention block, SwiGLU, conv,
 * projections with their norm or residual, matmul epilogues, residual
 * norms, softmax, then elementwise chains), each at
 * every candidate root from the last node back, so a match always starts
 * at the last node of its subgraph.  A node a pattern swallows must be read
 * only inside the pattern and must not be a graph output; nodes never join
 * two matches.  A match becomes a fused node only if the target claims it
 * (asked on a probe node), so fusion never emits an op the backend cannot
 * run.  The new graph keeps every other node and replaces each match's root
 * by its fused node. */
#include <stdlib.h>
#include <string.h>

#include "opt/fuse_internal.h"

typedef bool (*pattern_fn)(fuse_state *s, rlx_node root);

static const struct {
    const char *name;
    pattern_fn fn;
} patterns[] = {
    {"attention block", fuse_attention_block},
    {"swiglu", fuse_swiglu},
    {"conv", fuse_conv},
    {"quantized matmul requantization", fuse_qlinear_matmul},
    {"integer matmul epilogue", fuse_matmul_integer_scale},
    {"projection", fuse_projection},
    {"matmul epilogue", fuse_matmul_bias_act},
    {"residual norm", fuse_add_norm},
    {"softmax", fuse_softmax},
    {"elementwise chain", fuse_elementwise_chain},
};

rlx_graph *rlx_pass_fuse(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    int n = g->n_nodes;
    fuse_state s;
    memset(&s, 0, sizeof s);
    s.g = g;
    s.ctx = ctx;
    s.stats = ctx ? ctx->stats : NULL;
    s.uses = rlx_graph_use_counts(g);
    s.is_out = rlx_calloc((size_t)n + 1, sizeof(bool));
    s.taken = rlx_calloc((size_t)n + 1, sizeof(bool));
    s.spec_of = rlx_calloc((size_t)n + 1, sizeof(int));
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_graph *out = NULL;
    if (!s.uses || !s.is_out || !s.taken || !s.spec_of || !map)
        goto done;
    for (int i = 0; i < g->n_outputs; i++)
        s.is_out[g->outputs[i].node] = true;
    for (int i = 0; i < n; i++)
        s.spec_of[i] = -1;

    for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++)
        for (int i = n - 1; i >= 0; i--)
            if (!s.taken[i])
                patterns[p].fn(&s, i);

    if (!(out = rlx_graph_new()))
        goto done;
    for (int i = 0; i < n; i++) {
        map[i] = -1;
        if (s.spec_of[i] >= 0) {
            fuse_spec *sp = &s.specs[s.spec_of[i]];
            rlx_node consts[FUSE_MAX_CONSTS];
            for (int k = 0; k < sp->n_consts; k++)
                if ((consts[k] = rlx_graph_add(out, &sp->consts[k])) < 0)
                    goto fail;
            rlx_node_data nd = sp->node;
            for (int j = 0; j < nd.n_in; j++)
                nd.in[j] = nd.in[j] >= 0 ? map[nd.in[j]] : consts[-1 - nd.in[j]];
            if ((map[i] = rlx_graph_add(out, &nd)) < 0)
                goto fail;
            if (s.stats)
                s.stats->fused[nd.op]++;
            for (int k = 0; k < sp->n_views; k++) { /* views: slice k, without the leading axis */
                const rlx_node_data *old = &g->nodes[sp->views[k]];
                int axis0 = 0;
                int64_t lo = k, hi = k + 1, step = 1;
                rlx_node v = rlx_slice(out, map[i], 1, &axis0, &lo, &hi, &step);
                if ((v = rlx_reshape(out, v, old->shape.ndim, old->shape.dims)) < 0)
                    goto fail;
                if (old->name)
                    rlx_node_set_name(out, v, old->name);
                map[sp->views[k]] = v;
            }
        } else if (!s.taken[i]) {
            if ((map[i] = rlx_copy_node(out, g, i, map)) < 0)
                goto fail;
        }
    }
    if (rlx_copy_outputs(out, g, map) != RLX_OK)
        goto fail;
    if (s.n_specs) { /* folded weights leave their old constants unread */
        rlx_graph *live = rlx_pass_dce(out, ctx);
        rlx_graph_free(out);
        if (!(out = live))
            goto done;
    }
    if (s.stats) {
        s.stats->nodes_before_fusion = n;
        s.stats->nodes_after_fusion = out->n_nodes;
    }
    goto done;
fail:
    rlx_graph_free(out);
    out = NULL;
done:
    for (int i = 0; i < s.n_specs; i++)
        fs_spec_free(&s.specs[i]);
    free(s.specs);
    free(s.uses);
    free(s.is_out);
    free(s.taken);
    free(s.spec_of);
    free(map);
    return out;
}

/* The runtime's fusion stage. */
rlx_graph *rlx_opt_fuse(const rlx_graph *g, const rlx_pass_ctx *ctx) { return rlx_pass_fuse(g, ctx); }

/* ------------------------------------------------------ elementwise chain */

static bool ew_eligible(const fuse_state *s, rlx_node id)
{
    const rlx_node_data *n = fs_node(s, id);
    if (s->taken[id] || !rlx_dtype_is_float(n->dtype))
        return false;
    if (!(rlx_op_info_of(n->op)->flags & RLX_OPF_CHAIN))
        return false;
    return !rlx_op_is_binary(n->op) || fs_node(s, n->in[0])->dtype == n->dtype;
}

static bool in_list(const rlx_node *l, int n, rlx_node x)
{
    for (int i = 0; i < n; i++)
        if (l[i] == x)
            return true;
    return false;
}

/* Distinct operands of the region that are outside it. */
static int region_leaves(const fuse_state *s, const rlx_node *reg, int nreg, rlx_node *leaves, int cap)
{
    int nl = 0;
    for (int i = 0; i < nreg; i++) {
        const rlx_node_data *n = fs_node(s, reg[i]);
        for (int j = 0; j < n->n_in; j++) {
            rlx_node x = n->in[j];
            if (in_list(reg, nreg, x) || in_list(leaves, nl, x))
                continue;
            if (nl == cap)
                return cap + 1;
            leaves[nl++] = x;
        }
    }
    return nl;
}

/* Whether every read of x is by a node of the region (a value read twice
 * inside, as hard-swish reads x, may join it; one read outside may not). */
static bool read_only_by(const fuse_state *s, const rlx_node *reg, int nreg, rlx_node x)
{
    if (s->is_out[x])
        return false;
    int reads = 0;
    for (int i = 0; i < nreg; i++) {
        const rlx_node_data *n = fs_node(s, reg[i]);
        for (int j = 0; j < n->n_in; j++)
            reads += n->in[j] == x;
    }
    return reads == s->uses[x];
}

static int cmp_node(const void *a, const void *b) { return *(const rlx_node *)a - *(const rlx_node *)b; }

bool fuse_elementwise_chain(fuse_state *s, rlx_node root)
{
    if (!ew_eligible(s, root))
        return false;
    rlx_dtype t = fs_node(s, root)->dtype;
    rlx_node reg[RLX_EW_MAX_OPS], leaves[RLX_MAX_INPUTS + 1];
    int nreg = 0;
    reg[nreg++] = root;
    /* grow backwards through operands read only by the region (an operand
     * with a reader not yet in it is looked at again from that reader) */
    for (int k = 0; k < nreg && nreg < RLX_EW_MAX_OPS; k++) {
        const rlx_node_data *n = fs_node(s, reg[k]);
        for (int j = 0; j < n->n_in && nreg < RLX_EW_MAX_OPS; j++) {
            rlx_node x = n->in[j];
            if (in_list(reg, nreg, x) || !read_only_by(s, reg, nreg, x) || !ew_eligible(s, x) ||
                fs_node(s, x)->dtype != t)
                continue;
            reg[nreg++] = x;
            if (region_leaves(s, reg, nreg, leaves, RLX_MAX_INPUTS) > RLX_MAX_INPUTS)
                nreg--; /* too many inputs with it: leave it outside */
        }
    }
    if (nreg < 2)
        return false;
    qsort(reg, (size_t)nreg, sizeof reg[0], cmp_node);
    int nl = region_leaves(s, reg, nreg, leaves, RLX_MAX_INPUTS);
    fuse_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.root = root;
    sp.node.op = RLX_OP_ELEMENTWISE_CHAIN;
    sp.node.n_in = nl;
    for (int i = 0; i < nl; i++)
        sp.node.in[i] = leaves[i];
    sp.node.attrs.ew.n_ops = nreg;
    for (int k = 0; k < nreg; k++) {
        const rlx_node_data *n = fs_node(s, reg[k]);
        uint8_t *c = &sp.node.attrs.ew.code[3 * k];
        c[0] = (uint8_t)n->op;
        for (int j = 0; j < n->n_in; j++) {
            int r = -1;
            for (int q = 0; q < nl; q++)
                if (leaves[q] == n->in[j])
                    r = q;
            for (int q = 0; q < k && r < 0; q++)
                if (reg[q] == n->in[j])
                    r = nl + q;
            c[1 + j] = (uint8_t)r;
        }
    }
    return fs_commit(s, &sp, reg, nreg);
}
