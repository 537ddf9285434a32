/* canon.c - canonical forms: a decomposition of an op RLX has natively is
 * rewritten into that op, so that fusion and the backends see it.  The
 * forms are those exporters write for ONNX opsets without the op:
 *
 *   GELU       x * 0.5 * (1 + erf(x / sqrt 2))
 *              (PyTorch: (x * (erf(x / sqrt 2) + 1)) * 0.5)
 *   GELU tanh  0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))
 *              with x^3 as x * (x * x), (x * x) * x or pow(x, 3)
 *   SiLU       x * sigmoid(x)
 *   LayerNorm  d / sqrt(mean(d^2) + eps) with d = x - mean(x)
 *              [* gamma] [+ beta]   (PyTorch before opset 17)
 *   RMSNorm    x / sqrt(mean(x^2) + eps) [* gamma]
 *   attention  softmax(q k^T * c [+ mask]) v   (the scale as a product
 *              with c or a division by 1 / c, or split as (q * a) (k^T *
 *              b); k^T a transpose of a [B, H, T, D] tensor or of one RLX
 *              transposes to it; the mask added to the scaled scores, of
 *              q's dtype; a constant causal mask, or a where() that
 *              fills the keys after the causal ones with -inf, becomes
 *              the causal flag)
 *
 * in any grouping of the three GELU factors, either operand order of every
 * product and sum, and x * (1 / sqrt 2) for the division.  In the norms the
 * means are over the last axis with the axis kept, a square is pow(v, 2) or
 * v * v, eps is a scalar constant >= 0, and the division may be a product
 * with rsqrt(...), 1 / sqrt(...) or reciprocal(sqrt(...)); gamma and beta
 * are vectors the size of the last axis.  The rewritten node must keep x's
 * shape and dtype (a constant that broadcasts x is not a scalar factor).
 * What the rewrite leaves unused, the next dce removes.  One difference
 * is accepted: a query row whose scores the mask makes all -inf gives
 * zeros in RLX's attention where the softmax gives NaN. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"

/* A one-element constant equal to want within rel (relative). */
static bool is_scalar(const rlx_graph *g, rlx_node id, double want, double rel)
{
    double v;
    return rlx_scalar_value(&g->nodes[id], &v) && fabs(v - want) <= rel * fabs(want);
}

/* Irrational constants (sqrt 2, sqrt(2 / pi)) stored as 16-bit floats are
 * off by up to 2e-4, relative. */
#define CONST_REL 1e-3

/* x when id is x / sqrt 2 or x * (1 / sqrt 2); else -1. */
static rlx_node erf_arg(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_DIV && is_scalar(g, n->in[1], M_SQRT2, CONST_REL))
        return n->in[0];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (is_scalar(g, n->in[j], M_SQRT1_2, CONST_REL))
                return n->in[1 - j];
    return -1;
}

/* x when id is x * (x * x), (x * x) * x or pow(x, 3); else -1. */
static rlx_node cube_of(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_POW)
        return is_scalar(g, n->in[1], 3.0, 0) ? n->in[0] : -1;
    if (n->op != RLX_OP_MUL)
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *sq = &g->nodes[n->in[j]];
        if (sq->op == RLX_OP_MUL && sq->in[0] == sq->in[1] && sq->in[0] == n->in[1 - j])
            return n->in[1 - j];
    }
    return -1;
}

/* The other operand of a product with the scalar c (relative tolerance
 * rel); -1 if id is no such product. */
static rlx_node times_scalar(const rlx_graph *g, rlx_node id, double c, double rel)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (is_scalar(g, n->in[j], c, rel))
                return n->in[1 - j];
    return -1;
}

/* x when id is sqrt(2 / pi) * (x + 0.044715 * x^3); else -1. */
static rlx_node tanh_arg(const rlx_graph *g, rlx_node id)
{
    rlx_node sum = times_scalar(g, id, 0.79788456080286535588, CONST_REL);
    const rlx_node_data *n = sum >= 0 ? &g->nodes[sum] : NULL;
    if (!n || n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        rlx_node cube = times_scalar(g, n->in[1 - j], 0.044715, 1e-3);
        if (cube >= 0 && cube_of(g, cube) == n->in[j])
            return n->in[j];
    }
    return -1;
}

/* x when id is 1 + erf(x / sqrt 2) (*op GELU) or 1 + tanh(tanh_arg)
 * (*op GELU_TANH); else -1. */
static rlx_node one_plus(const rlx_graph *g, rlx_node id, rlx_op *op)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        const rlx_node_data *e = &g->nodes[n->in[1 - j]];
        if (!is_scalar(g, n->in[j], 1.0, 0))
            continue;
        *op = e->op == RLX_OP_ERF ? RLX_OP_GELU : RLX_OP_GELU_TANH;
        if (e->op == RLX_OP_ERF)
            return erf_arg(g, e->in[0]);
        if (e->op == RLX_OP_TANH)
            return tanh_arg(g, e->in[0]);
    }
    return -1;
}

/* Whether the three factors are x, 0.5 and one_plus(x), in any order; *x
 * and *op set. */
static bool gelu_factors(const rlx_graph *g, const rlx_node f[3], rlx_node *x, rlx_op *op)
{
    for (int h = 0; h < 3; h++) {
        if (!is_scalar(g, f[h], 0.5, 0))
            continue;
        for (int e = 0; e < 3; e++) {
            if (e == h)
                continue;
            rlx_node v = f[3 - h - e];
            if (one_plus(g, f[e], op) == v) {
                *x = v;
                return true;
            }
        }
    }
    return false;
}

/* x when node id is a GELU (either form) or SiLU of x written out, *op the
 * native op; else -1. */
static rlx_node match(const rlx_graph *g, rlx_node id, rlx_op *op)
{
    const rlx_node_data *r = &g->nodes[id];
    if (r->op != RLX_OP_MUL)
        return -1;
    rlx_node x = -1;
    for (int j = 0; j < 2 && x < 0; j++) {
        const rlx_node_data *inner = &g->nodes[r->in[j]];
        if (inner->op == RLX_OP_SIGMOID && inner->in[0] == r->in[1 - j]) {
            x = r->in[1 - j];
            *op = RLX_OP_SILU;
        } else if (inner->op == RLX_OP_MUL) {
            rlx_node f[3] = {inner->in[0], inner->in[1], r->in[1 - j]};
            if (!gelu_factors(g, f, &x, op))
                x = -1;
        }
    }
    if (x < 0)
        return -1;
    const rlx_node_data *xn = &g->nodes[x];
    bool keeps = rlx_dtype_is_float(xn->dtype) && xn->dtype == r->dtype && rlx_shape_equal(&xn->shape, &r->shape);
    return keeps ? x : -1;
}

/* ---- normalisations */

typedef struct norm_form {
    rlx_op op; /* RLX_OP_LAYER_NORM or RLX_OP_RMS_NORM */
    rlx_node x, gamma, beta;
    double eps;
} norm_form;

/* v when id is the mean of v over its last axis, kept; else -1. */
static rlx_node mean_last(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_REDUCE_MEAN || !n->attrs.reduce.keepdims)
        return -1;
    int r = g->nodes[n->in[0]].shape.ndim;
    return r >= 1 && n->attrs.reduce.axes == 1u << (r - 1) ? n->in[0] : -1;
}

/* v when id is pow(v, 2) or v * v; else -1. */
static rlx_node square_of(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_POW)
        return is_scalar(g, n->in[1], 2.0, 0) ? n->in[0] : -1;
    return n->op == RLX_OP_MUL && n->in[0] == n->in[1] ? n->in[0] : -1;
}

/* v when id is mean(v^2) + eps (*eps set); else -1. */
static rlx_node mean_square_eps(const rlx_graph *g, rlx_node id, double *eps)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_ADD)
        return -1;
    for (int j = 0; j < 2; j++) {
        rlx_node m = mean_last(g, n->in[1 - j]);
        if (m >= 0 && rlx_scalar_value(&g->nodes[n->in[j]], eps) && *eps >= 0)
            return square_of(g, m);
    }
    return -1;
}

/* v when id is sqrt(mean(v^2) + eps) (inverse false) or its reciprocal,
 * written as rsqrt(...), 1 / sqrt(...) or reciprocal(sqrt(...)) (inverse
 * true); else -1. */
static rlx_node root_mean_square(const rlx_graph *g, rlx_node id, bool inverse, double *eps)
{
    const rlx_node_data *n = &g->nodes[id];
    if (!inverse)
        return n->op == RLX_OP_SQRT ? mean_square_eps(g, n->in[0], eps) : -1;
    if (n->op == RLX_OP_RSQRT)
        return mean_square_eps(g, n->in[0], eps);
    if (n->op == RLX_OP_RECIPROCAL)
        return root_mean_square(g, n->in[0], false, eps);
    if (n->op == RLX_OP_DIV && is_scalar(g, n->in[0], 1.0, 0))
        return root_mean_square(g, n->in[1], false, eps);
    return -1;
}

/* v when id is v divided by its own root mean square; else -1. */
static rlx_node over_rms(const rlx_graph *g, rlx_node id, double *eps)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_DIV && root_mean_square(g, n->in[1], false, eps) == n->in[0])
        return n->in[0];
    if (n->op == RLX_OP_MUL)
        for (int j = 0; j < 2; j++)
            if (root_mean_square(g, n->in[1 - j], true, eps) == n->in[j])
                return n->in[j];
    return -1;
}

/* Whether id is a normalisation without gamma or beta: d / rms(d) with
 * d = x - mean(x) is LayerNorm of x, v / rms(v) otherwise RMSNorm of v. */
static bool norm_core(const rlx_graph *g, rlx_node id, norm_form *f)
{
    rlx_node v = over_rms(g, id, &f->eps);
    if (v < 0)
        return false;
    const rlx_node_data *d = &g->nodes[v];
    bool centred = d->op == RLX_OP_SUB && mean_last(g, d->in[1]) == d->in[0];
    f->op = centred ? RLX_OP_LAYER_NORM : RLX_OP_RMS_NORM;
    f->x = centred ? d->in[0] : v;
    f->gamma = f->beta = -1;
    return true;
}

/* x when id is x cast to f32 from f16 or bf16; else -1. */
static rlx_node widened(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_CAST || n->dtype != RLX_F32)
        return -1;
    rlx_dtype from = g->nodes[n->in[0]].dtype;
    return from == RLX_F16 || from == RLX_BF16 ? n->in[0] : -1;
}

/* norm_core, or a 16-bit tensor's normalisation computed in f32 between
 * casts, cast(core(cast(x, f32)), x's dtype), as Hugging Face's RMSNorm
 * writes it for f16 and bf16 models: then f->x is x, and the one op
 * computes in f32 inside as the casts did. */
static bool norm_core_any(const rlx_graph *g, rlx_node id, norm_form *f)
{
    if (norm_core(g, id, f))
        return true;
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_CAST || !norm_core(g, n->in[0], f))
        return false;
    rlx_node x = widened(g, f->x);
    if (x < 0 || g->nodes[x].dtype != n->dtype)
        return false;
    f->x = x;
    return true;
}

/* Whether id is a vector for x's last axis, of x's dtype. */
static bool last_axis_vector(const rlx_graph *g, rlx_node id, rlx_node x)
{
    const rlx_node_data *v = &g->nodes[id], *xn = &g->nodes[x];
    return v->shape.ndim == 1 && xn->shape.ndim >= 1 && v->shape.dims[0] == xn->shape.dims[xn->shape.ndim - 1] &&
           v->dtype == xn->dtype;
}

/* One of the operands of the product or sum id is a normalisation (with
 * what it absorbed so far, found by inner) and the other a last-axis
 * vector: that vector, f filled; else -1. */
static rlx_node around_norm(const rlx_graph *g, rlx_node id, rlx_op op,
                            bool (*inner)(const rlx_graph *, rlx_node, norm_form *), norm_form *f)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != op)
        return -1;
    for (int j = 0; j < 2; j++)
        if (inner(g, n->in[j], f) && last_axis_vector(g, n->in[1 - j], f->x))
            return n->in[1 - j];
    return -1;
}

/* A normalisation with or without gamma. */
static bool norm_scaled(const rlx_graph *g, rlx_node id, norm_form *f)
{
    if (norm_core_any(g, id, f))
        return true;
    rlx_node gamma = around_norm(g, id, RLX_OP_MUL, norm_core_any, f);
    if (gamma < 0)
        return false;
    f->gamma = gamma;
    return true;
}

/* id as a normalisation with what it absorbs (gamma, then beta for
 * LayerNorm), keeping x's shape and dtype. */
static bool norm_match(const rlx_graph *g, rlx_node id, norm_form *f)
{
    bool found = norm_scaled(g, id, f);
    if (!found) {
        rlx_node beta = around_norm(g, id, RLX_OP_ADD, norm_scaled, f);
        found = beta >= 0 && f->op == RLX_OP_LAYER_NORM;
        f->beta = beta;
    }
    if (!found)
        return false;
    const rlx_node_data *xn = &g->nodes[f->x], *r = &g->nodes[id];
    return rlx_dtype_is_float(xn->dtype) && xn->dtype == r->dtype && rlx_shape_equal(&xn->shape, &r->shape);
}

/* ---- attention */

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
    bool ok = ud[0] == kd[0] && ud[1] == kd[1] && ud[2] == 1 && ud[3] == kd[2] && ud[4] == kd[3] &&
              ed[0] == kd[0] && ed[1] == kd[1] && ed[3] == kd[2] && ed[4] == kd[3] && rd[0] == kd[0] &&
              rd[1] == kd[1] * ed[2] && rd[2] == kd[2] && rd[3] == kd[3];
    return ok ? k0 : -1;
}

/* The select as attention's bool mask (true keeps the key; mask_not when
 * its true entries drop the key instead), if it is bool and broadcasts to
 * the scores [B, H, S, T]. */
static bool select_as_mask(const rlx_graph *g, attn_form *f, const rlx_shape *full)
{
    const rlx_node_data *c = &g->nodes[f->select];
    rlx_shape b;
    if (c->dtype != RLX_BOOL || c->shape.ndim > 4 || !rlx_shape_broadcast(&c->shape, full, &b) ||
        !rlx_shape_equal(&b, full))
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
        rlx_shape b;
        if (m->dtype != q->dtype || m->shape.ndim > 4 || !rlx_shape_broadcast(&m->shape, &full, &b) ||
            !rlx_shape_equal(&b, &full))
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
    rlx_node k0 = memcmp(f->k_perm, no_perm, sizeof no_perm) ? -1 : repeated_heads(g, f->k), v0 = repeated_heads(g, f->v);
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

/* Node id as the one op it writes out, or a copy; *arg counts rewrites. */
static rlx_node canon_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    rlx_op op;
    norm_form f;
    attn_form a;
    rlx_node x = match(g, id, &op), y;
    if (x >= 0) {
        y = op == RLX_OP_SILU        ? rlx_silu(out, map[x])
            : op == RLX_OP_GELU_TANH ? rlx_gelu_tanh(out, map[x])
                                     : rlx_gelu(out, map[x]);
    } else if (norm_match(g, id, &f)) {
        rlx_node gamma = f.gamma >= 0 ? map[f.gamma] : -1;
        y = f.op == RLX_OP_RMS_NORM ? rlx_rms_norm(out, map[f.x], gamma, f.eps)
                                    : rlx_layer_norm(out, map[f.x], gamma, f.beta >= 0 ? map[f.beta] : -1, f.eps);
    } else if (attention_match(g, id, &a)) {
        rlx_node k = memcmp(a.k_perm, no_perm, sizeof no_perm) ? rlx_transpose(out, map[a.k], a.k_perm) : map[a.k];
        rlx_node m = a.mask < 0 ? -1 : a.mask_not ? negated(out, g, a.mask, map) : map[a.mask];
        y = k < 0 || (a.mask >= 0 && m < 0) ? -1 : rlx_attention(out, map[a.q], k, map[a.v], m, a.causal, a.scale);
    } else {
        return RLX_REBUILD_COPY;
    }
    (*(int *)arg)++;
    return y < 0 ? RLX_REBUILD_FAIL : y;
}

rlx_graph *rlx_pass_canon(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    int rewritten = 0;
    rlx_graph *out = rlx_rebuild(g, canon_node, &rewritten);
    if (out && rewritten && ctx && ctx->verbose)
        fprintf(stderr, "[rlx canon] %d activation%s, norm%s or attention%s written out rewritten as one op\n",
                rewritten, rewritten == 1 ? "" : "s", rewritten == 1 ? "" : "s", rewritten == 1 ? "" : "s");
    return out;
}
