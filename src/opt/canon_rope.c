/* canon_rope.c - rotary position embedding written out becomes the rope op
 * (see canon.c for the form taken):
 *
 *   x * cos + cat(-x[..., D/2:], x[..., :D/2]) * sin
 *
 * with cos and sin constant tables over x's last two axes [S, D] (leading
 * axes of size 1), as Hugging Face's Llama, Qwen and Mistral code writes it
 * and as an export with its positions known folds them.  The tables are
 * checked entry by entry against cos and sin of (offset + s) *
 * theta^(-2 (i mod D/2) / D), with theta and offset read off the tables
 * themselves; a table that is not that (another frequency law, positions
 * that are not consecutive) leaves the form as it is. */
#include <math.h>

#include "opt/canon.h"

/* x when id is cat(-x[..., h:], x[..., :h]) along the last axis with
 * D = 2h the size of x's last axis; else -1. */
static rlx_node rotate_half_of(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_CONCAT || n->n_in != 2 || n->shape.ndim < 2 || n->attrs.concat.axis != n->shape.ndim - 1)
        return -1;
    const rlx_node_data *neg = &g->nodes[n->in[0]];
    if (neg->op != RLX_OP_NEG)
        return -1;
    int64_t s_hi, n_hi, s_lo, n_lo;
    rlx_node x = canon_last_axis_slice(g, neg->in[0], &s_hi, &n_hi);
    if (x < 0 || canon_last_axis_slice(g, n->in[1], &s_lo, &n_lo) != x)
        return -1;
    int64_t D = g->nodes[x].shape.dims[g->nodes[x].shape.ndim - 1];
    return D % 2 == 0 && s_lo == 0 && n_lo == D / 2 && s_hi == D / 2 && n_hi == D / 2 ? x : -1;
}

/* The constant factor of the product id whose other factor is want (or,
 * want < 0, any node: *other gets it); else -1. */
static rlx_node times_constant(const rlx_graph *g, rlx_node id, rlx_node want, rlx_node *other)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_MUL)
        return -1;
    for (int j = 0; j < 2; j++)
        if (g->nodes[n->in[j]].op == RLX_OP_CONSTANT && (want < 0 || n->in[1 - j] == want)) {
            *other = n->in[1 - j];
            return n->in[j];
        }
    return -1;
}

/* Whether table t is [..., S, D] with every leading axis 1, for x [..., S, D]. */
static bool table_fits(const rlx_graph *g, rlx_node t, rlx_node x)
{
    const rlx_shape *ts = &g->nodes[t].shape, *xs = &g->nodes[x].shape;
    int r = ts->ndim, xr = xs->ndim;
    if (r < 2 || r > xr || ts->dims[r - 1] != xs->dims[xr - 1] || ts->dims[r - 2] != xs->dims[xr - 2])
        return false;
    for (int a = 0; a < r - 2; a++)
        if (ts->dims[a] != 1)
            return false;
    return true;
}

/* How far a table entry of dtype dt may sit from the exact cos or sin of
 * an angle of size up to amax: its rounding, and the f32 arithmetic that
 * exporters build the angles with (about 1e-7 of the angle). */
static double table_tolerance(rlx_dtype dt, double amax)
{
    double round = dt == RLX_BF16 ? 1.0 / 128 : dt == RLX_F16 ? 1.0 / 1024 : 1e-6;
    return round + 4e-7 * amax;
}

/* theta and offset for which the tables c and s ([S, D] as read in order)
 * hold cos and sin of (offset + s) * theta^(-2 (i mod D/2) / D); false
 * when no such pair fits them. */
static bool rope_tables(const rlx_node_data *c, const rlx_node_data *s, int64_t S, int64_t D, double *theta,
                        int64_t *offset)
{
    int64_t h = D / 2;
    if (S < 2 || h < 2)
        return false; /* theta and the positions cannot both be read off */
    /* frequency 1: the angle's step from one position to the next (below
     * pi, so each wrapped difference is exact), averaged over the table */
    double sum = 0, cl, sl;
    for (int64_t p = 0; p + 1 < S; p++) {
        double c0, s0, c1, s1;
        if (!rlx_const_element(c, p * D + 1, &c0) || !rlx_const_element(s, p * D + 1, &s0) ||
            !rlx_const_element(c, (p + 1) * D + 1, &c1) || !rlx_const_element(s, (p + 1) * D + 1, &s1))
            return false;
        sum += remainder(atan2(s1, c1) - atan2(s0, c0), 2 * M_PI);
    }
    double step = sum / (double)(S - 1);
    if (!(step > 0 && step < 1) || !rlx_const_element(c, h - 1, &cl) || !rlx_const_element(s, h - 1, &sl))
        return false;
    *theta = pow(step, -(double)D / 2.0);
    if (!isfinite(*theta) || !(*theta > 1))
        return false;
    /* the first position from the slowest frequency, whose angle has not wrapped */
    double slowest = pow(*theta, -2.0 * (double)(h - 1) / (double)D);
    double p0 = atan2(sl, cl) / slowest;
    if (!(fabs(p0) < 9e15))
        return false;
    *offset = (int64_t)llround(p0);
    double amax = fabs((double)*offset) + (double)S;
    double tol = table_tolerance(c->dtype, amax);
    for (int64_t i = 0; i < D; i++) {
        double freq = pow(*theta, -2.0 * (double)(i % h) / (double)D);
        for (int64_t p = 0; p < S; p++) {
            double a = (double)(*offset + p) * freq, cv, sv;
            if (!rlx_const_element(c, p * D + i, &cv) || !rlx_const_element(s, p * D + i, &sv) ||
                !(fabs(cv - cos(a)) <= tol) || !(fabs(sv - sin(a)) <= tol))
                return false;
        }
    }
    return true;
}

bool canon_rope(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op != RLX_OP_ADD || !rlx_dtype_is_float(n->dtype) || n->shape.ndim < 2)
        return false;
    for (int j = 0; j < 2; j++) {
        rlx_node rot, x;
        rlx_node sn = times_constant(g, n->in[1 - j], -1, &rot);
        if (sn < 0 || (x = rotate_half_of(g, rot)) < 0)
            continue;
        rlx_node cs = times_constant(g, n->in[j], x, &(rlx_node){0});
        if (cs < 0 || !rlx_shape_equal(&g->nodes[x].shape, &n->shape) || !table_fits(g, cs, x) ||
            !table_fits(g, sn, x) || g->nodes[cs].dtype != g->nodes[sn].dtype)
            continue;
        int64_t S = n->shape.dims[n->shape.ndim - 2], D = n->shape.dims[n->shape.ndim - 1], offset;
        double theta;
        if (!rope_tables(&g->nodes[cs], &g->nodes[sn], S, D, &theta, &offset))
            continue;
        *y = rlx_rope(out, map[x], theta, offset, 0);
        return true;
    }
    return false;
}
