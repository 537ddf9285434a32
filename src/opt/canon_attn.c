/* canon_attn.c - attention written out becomes the one op (see canon.c
 * for the forms taken). */
#include <string.h>

#include "opt/canon.h"

static const int no_perm[4] = {0, 1, 2, 3};

typedef struct attn_form {
    rlx_node q, k, v, mask; /* k: the transpose's input; mask -1 for none */
    int k_perm[4];          /* k's transpose to [B, H, T, D] (identity: none) */
    double scale;
    rlx_node select; /* where(select, scores, fill) or where(select, fill, scores); -1 for none */
    int keep;        /* the select's true entries keep their score */
    int causal;      /* the mask or the select was the causal one, taken as the flag */
    int mask_not;    /* the mask is the select's negation (its true entries drop their key) */
} attn_form;

/* The lowest value a mask may hold to take a key out whatever its score:
 * -inf, or the dtype's lowest finite value (below -1e30 in f32); 0 for a
 * dtype that has none. */
static double masked_below(rlx_dtype t)
{
    return t == RLX_F32 ? -1e30 : t == RLX_F16 ? -65504.0 : t == RLX_BF16 ? -3.38e38 : 0;
}

/* m's data when m is a constant [S, T] (leading dims 1, at most 2^24
 * elements); else NULL. */
static const void *score_plane(const rlx_node_data *m, int64_t S, int64_t T)
{
    int r = m->shape.ndim;
    if (m->op != RLX_OP_CONSTANT || !m->data || r < 2 || S * T > ((int64_t)1 << 24) || m->shape.dims[r - 2] != S ||
        m->shape.dims[r - 1] != T)
        return NULL;
    for (int i = 0; i < r - 2; i++)
        if (m->shape.dims[i] != 1)
            return NULL;
    return m->data;
}

/* Whether the mask m, added to [.., S, T] scores, is the causal one: 0
 * where key t <= s + (T - S), masked_below() or less above. */
static bool causal_mask(const rlx_node_data *m, int64_t S, int64_t T)
{
    const void *d = score_plane(m, S, T);
    double low = masked_below(m->dtype);
    if (!d || low == 0 || T < S)
        return false;
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < T; t++) {
            double v;
            if (!rlx_const_element(m, s * T + t, &v) || (t <= s + (T - S) ? v != 0 : !(v <= low)))
                return false;
        }
    return true;
}

/* Whether the bool constant c selects the causal keys: true exactly where
 * key t <= s + (T - S) (keep), or exactly where it is not (!keep). */
static bool causal_select(const rlx_node_data *c, int64_t S, int64_t T, bool keep)
{
    const unsigned char *d = c->dtype == RLX_BOOL ? (const unsigned char *)score_plane(c, S, T) : NULL;
    if (!d || T < S)
        return false;
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < T; t++)
            if ((d[s * T + t] != 0) != ((t <= s + (T - S)) == keep))
                return false;
    return true;
}

static bool same_dims(const rlx_node_data *a, const rlx_node_data *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a->shape.dims[i] != b->shape.dims[i])
            return false;
    return true;
}

/* c when id is x * c or c * x with c a scalar constant > 0 (*x set);
 * else 0. */
static double positive_factor(const rlx_graph *g, rlx_node id, rlx_node *x)
{
    const rlx_node_data *n = &g->nodes[id];
    double c;
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (rlx_scalar_value(&g->nodes[n->in[j]], &c) && c > 0) {
                *x = n->in[1 - j];
                return c;
            }
    return 0;
}

/* q k^T scaled by c > 0 (or not at all), the scale on the product or split
 * between q and k^T (PyTorch's export of scaled_dot_product_attention:
 * (q * sqrt c) (k^T * sqrt c)): sets f->q, f->k, f->k_perm and f->scale. */
static bool scaled_qk(const rlx_graph *g, rlx_node id, attn_form *f)
{
    const rlx_node_data *n = &g->nodes[id];
    double c;
    rlx_node x;
    f->scale = 1.0;
    if (n->op == RLX_OP_DIV && rlx_scalar_value(&g->nodes[n->in[1]], &c) && c > 0) {
        f->scale = 1.0 / c;
        n = &g->nodes[n->in[0]];
    } else if ((c = positive_factor(g, id, &x)) > 0) {
        f->scale = c;
        n = &g->nodes[x];
    }
    if (n->op != RLX_OP_MATMUL || n->attrs.matmul.trans_a || n->attrs.matmul.trans_b)
        return false;
    rlx_node q = n->in[0], ktid = n->in[1];
    if ((c = positive_factor(g, q, &x)) > 0) {
        f->scale *= c;
        q = x;
    }
    if ((c = positive_factor(g, ktid, &x)) > 0) {
        f->scale *= c;
        ktid = x;
    }
    const rlx_node_data *kt = &g->nodes[ktid];
    if (kt->op != RLX_OP_TRANSPOSE || kt->shape.ndim != 4)
        return false;
    /* k^T = transpose(src, perm): k = transpose(src, perm with its last
     * two entries swapped) */
    memcpy(f->k_perm, kt->attrs.transpose.perm, sizeof f->k_perm);
    int t = f->k_perm[2];
    f->k_perm[2] = f->k_perm[3];
    f->k_perm[3] = t;
    f->q = q;
    f->k = kt->in[0];
    return true;
}

/* The scores before the softmax: scaled_qk, or scaled_qk + mask. */
static bool attention_scores(const rlx_graph *g, rlx_node id, attn_form *f)
{
    const rlx_node_data *n = &g->nodes[id];
    f->mask = f->select = -1;
    if (n->op == RLX_OP_WHERE) { /* masked_fill: the scores where a select keeps them, else a fill no score offsets */
        double fill, low = masked_below(n->dtype);
        for (int j = 1; j <= 2; j++)
            if (low != 0 && rlx_scalar_value(&g->nodes[n->in[3 - j]], &fill) && fill <= low &&
                scaled_qk(g, n->in[j], f)) {
                f->select = n->in[0];
                f->keep = j == 1;
                return true;
            }
        return false;
    }
    if (n->op == RLX_OP_ADD)
        for (int j = 0; j < 2; j++)
            if (scaled_qk(g, n->in[1 - j], f)) {
                f->mask = n->in[j];
                return true;
            }
    return scaled_qk(g, id, f);
}

/* k0 when id repeats each head of k0 [B, Hk, T, D] n times in a row, as
 * Hugging Face's repeat_kv writes grouped-query heads out (reshape to
 * [B, Hk, 1, T, D], expand to [B, Hk, n, T, D], reshape to [B, Hk n, T,
 * D]): query head h then reads head h / n, as attention's grouped heads
 * do.  Else -1. */
static rlx_node repeated_heads(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *r = &g->nodes[id];
    if (r->op != RLX_OP_RESHAPE || r->shape.ndim != 4)
        return -1;
    const rlx_node_data *e = &g->nodes[r->in[0]];
    if (e->op != RLX_OP_EXPAND || e->shape.ndim != 5)
        return -1;
    const rlx_node_data *u = &g->nodes[e->in[0]];
    rlx_node k0 = u->in[0];
    if (u->op != RLX_OP_RESHAPE || u->shape.ndim != 5 || g->nodes[k0].shape.ndim != 4)
        return -1;
    const int64_t *kd = g->nodes[k0].shape.dims, *ud = u->shape.dims, *ed = e->shape.dims, *rd = r->shape.dims;
    bool ok = ud[0] == kd[0] && ud[1] == kd[1] && ud[2] == 1 && ud[3] == kd[2] && ud[4] == kd[3] && ed[0] == kd[0] &&
              ed[1] == kd[1] && ed[3] == kd[2] && ed[4] == kd[3] && rd[0] == kd[0] && rd[1] == kd[1] * ed[2] &&
              rd[2] == kd[2] && rd[3] == kd[3];
    return ok ? k0 : -1;
}

/* The select as attention's bool mask (true keeps the key; mask_not when
 * its true entries drop the key instead), if it is bool and broadcasts to
 * the scores [B, H, S, T]. */
static bool select_as_mask(const rlx_graph *g, attn_form *f, const rlx_shape *full)
{
    const rlx_node_data *c = &g->nodes[f->select];
    if (c->dtype != RLX_BOOL || !rlx_shape_broadcasts_to(&c->shape, full))
        return false;
    f->mask = f->select;
    f->mask_not = !f->keep;
    return true;
}

/* id as softmax(scores) v with shapes attention takes as they are. */
static bool attention_match(const rlx_graph *g, rlx_node id, attn_form *f)
{
    const rlx_node_data *o = &g->nodes[id];
    if (o->op != RLX_OP_MATMUL || o->attrs.matmul.trans_a || o->attrs.matmul.trans_b)
        return false;
    const rlx_node_data *p = &g->nodes[o->in[0]];
    if (p->op != RLX_OP_SOFTMAX || p->shape.ndim != 4 || p->attrs.softmax.axis != 3 ||
        !attention_scores(g, p->in[0], f))
        return false;
    f->v = o->in[1];
    const rlx_node_data *q = &g->nodes[f->q], *v = &g->nodes[f->v], *s = &g->nodes[p->in[0]];
    if (q->shape.ndim != 4 || v->shape.ndim != 4 || !rlx_dtype_is_float(q->dtype) || v->dtype != q->dtype ||
        o->dtype != q->dtype)
        return false;
    /* the scores [B, H, S, T] and the output [B, H, S, Dv] exactly as the
     * products make them (no broadcast of q or v), key heads H or 1 */
    int64_t B = q->shape.dims[0], H = q->shape.dims[1], S = q->shape.dims[2], T = s->shape.dims[3];
    int64_t Hv = v->shape.dims[1];
    if (s->shape.dims[0] != B || s->shape.dims[1] != H || s->shape.dims[2] != S || v->shape.dims[0] != B ||
        v->shape.dims[2] != T || (Hv != H && Hv != 1) || !same_dims(o, q, 3) || o->shape.dims[3] != v->shape.dims[3])
        return false;
    const rlx_node_data *k = &g->nodes[f->k];
    int64_t kd[4];
    for (int i = 0; i < 4; i++)
        kd[i] = k->shape.dims[f->k_perm[i]];
    if (k->shape.ndim != 4 || k->dtype != q->dtype || kd[0] != B || kd[1] != Hv || kd[2] != T ||
        kd[3] != q->shape.dims[3])
        return false;
    f->causal = f->mask_not = 0;
    rlx_shape full = {4, {B, H, S, T}};
    if (f->mask >= 0) {
        const rlx_node_data *m = &g->nodes[f->mask];
        if (m->dtype != q->dtype || !rlx_shape_broadcasts_to(&m->shape, &full))
            return false;
        if (causal_mask(m, S, T)) {
            f->causal = 1;
            f->mask = -1;
        }
    }
    if (f->select >= 0) { /* the causal select becomes the flag, another bool one the mask */
        if (causal_select(&g->nodes[f->select], S, T, f->keep))
            f->causal = 1;
        else if (!select_as_mask(g, f, &full))
            return false;
    }
    /* grouped-query heads written out as repeats of k and v: the heads before */
    rlx_node k0 = memcmp(f->k_perm, no_perm, sizeof no_perm) ? -1 : repeated_heads(g, f->k),
             v0 = repeated_heads(g, f->v);
    if (k0 >= 0 && v0 >= 0 && g->nodes[k0].shape.dims[1] == g->nodes[v0].shape.dims[1]) {
        f->k = k0;
        f->v = v0;
    }
    return true;
}

/* The mask for a select whose true entries drop their key: its negation,
 * with a negation the select already holds undone (masked_fill(~m, -inf)
 * exports as where(reshape(not(m)), -inf, scores); the mask is then
 * reshape(m)). */
static rlx_node negated(rlx_graph *out, const rlx_graph *g, rlx_node sel, const rlx_node *map)
{
    const rlx_node_data *n = &g->nodes[sel];
    if (n->op == RLX_OP_NOT)
        return map[n->in[0]];
    if (n->op == RLX_OP_RESHAPE && g->nodes[n->in[0]].op == RLX_OP_NOT)
        return rlx_reshape(out, map[g->nodes[n->in[0]].in[0]], n->shape.ndim, n->shape.dims);
    return rlx_not(out, map[sel]);
}

bool canon_attention(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    attn_form a;
    if (!attention_match(g, id, &a))
        return false;
    rlx_node k = memcmp(a.k_perm, no_perm, sizeof no_perm) ? rlx_transpose(out, map[a.k], a.k_perm) : map[a.k];
    rlx_node m = a.mask < 0 ? -1 : a.mask_not ? negated(out, g, a.mask, map) : map[a.mask];
    *y = k < 0 || (a.mask >= 0 && m < 0) ? -1 : rlx_attention(out, map[a.q], k, map[a.v], m, a.causal, a.scale);
    return true;
}
