/* canon_split.c - one projection computed for several consumers and then
 * cut along its last axis (a fused qkv_proj or gate_up_proj: one Linear,
 * then Split or slices) becomes one projection per cut:
 *
 *   slice(x @ W [+ b], last axis, a..c)  ->  x @ W[:, a..c] [+ b[a..c]]
 *
 * when W (either orientation) and b are constants and every reader of the
 * product is such a slice, so that the whole product goes away.  Fusion
 * then sees separate q, k and v projections (an attention block) or gate
 * and up (SwiGLU).  The cut weights are new constants; the whole ones are
 * left to dce. */
#include <stdlib.h>
#include <string.h>

#include "opt/canon.h"

/* Rows r0..r0+nr of a constant [R, C] (rows of bytes es * C), or, by_cols,
 * its columns c0..c0+nc of every row, as a new constant in out. */
static rlx_node cut_constant(rlx_graph *out, const rlx_node_data *w, bool by_cols, int64_t from, int64_t count)
{
    size_t es = rlx_dtype_size(w->dtype);
    int64_t R = w->shape.ndim == 2 ? w->shape.dims[0] : 1, C = w->shape.dims[w->shape.ndim - 1];
    int64_t rows = by_cols ? R : count, cols = by_cols ? count : C;
    size_t bytes = (size_t)(rows * cols) * es;
    char *buf = rlx_calloc(bytes ? bytes : 1, 1);
    if (!buf)
        return -1; /* rlx_calloc set the error */
    const char *src = w->data;
    for (int64_t r = 0; r < rows; r++) {
        int64_t sr = by_cols ? r : from + r, sc = by_cols ? from : 0;
        memcpy(buf + (size_t)(r * cols) * es, src + (size_t)(sr * C + sc) * es, (size_t)cols * es);
    }
    int64_t dims[2] = {rows, cols};
    rlx_node y = w->shape.ndim == 2 ? rlx_constant(out, w->dtype, 2, dims, buf, bytes)
                                    : rlx_constant(out, w->dtype, 1, &dims[1], buf, bytes);
    free(buf);
    return y;
}

static bool is_constant(const rlx_graph *g, rlx_node id)
{
    return g->nodes[id].op == RLX_OP_CONSTANT && g->nodes[id].data;
}

bool canon_split_projection(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    int64_t from, count;
    rlx_node p = canon_last_axis_slice(g, id, &from, &count);
    if (p < 0)
        return false;
    /* p: x @ W, or (x @ W) + b with b a vector of the last axis */
    rlx_node mm = p, bias = -1;
    if (g->nodes[p].op == RLX_OP_ADD && (bias = canon_biased_product(g, p, true, &mm)) < 0)
        return false;
    const rlx_node_data *m = &g->nodes[mm];
    int cuts;
    if (m->op != RLX_OP_MATMUL || m->attrs.matmul.trans_a || !is_constant(g, m->in[1]) ||
        g->nodes[m->in[1]].shape.ndim != 2 || canon_readers(g, p, &cuts) != cuts)
        return false; /* the whole product must go: every reader a cut */
    /* W is [K, N], or [N, K] read transposed: the cut is its columns or its rows */
    bool by_cols = !m->attrs.matmul.trans_b;
    rlx_node w = cut_constant(out, &g->nodes[m->in[1]], by_cols, from, count);
    if (w < 0) {
        *y = -1;
        return true;
    }
    *y = rlx_matmul(out, map[m->in[0]], w, 0, m->attrs.matmul.trans_b);
    if (*y >= 0 && bias >= 0) {
        rlx_node b = cut_constant(out, &g->nodes[bias], true, from, count);
        *y = b < 0 ? -1 : rlx_add(out, *y, b);
    }
    return true;
}
