/* Gradients (rlx_gradients) of every differentiable op against central
 * finite differences in float64, on fresh random inputs: each case builds
 * y = op(params), loss = sum(y * R) with R random (so the incoming gradient
 * is not all ones), compiles the forward and the gradients as one graph on
 * the CPU, and compares each gradient element with
 * (loss(p + h) - loss(p - h)) / 2h.  Differences are relative, with a floor of 1e-3 (finite differences
 * of h = 1e-6 carry about 1e-8 of rounding).  Inputs of non-smooth ops are kept away
 * from their kinks.  Also: refusals name the op, operands used twice,
 * unused parameters, bad arguments. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/ir.h"
#include "rlx.h"

enum { ANY, POS, AWAY0, FRAC, DISTINCT };
#define MAXP 5

typedef struct grad_case {
    const char *name;
    int np;
    int ndim[MAXP];
    int64_t dims[MAXP][4];
    int domain[MAXP];
    rlx_node (*body)(rlx_graph *g, const rlx_node *p);
} grad_case;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static size_t gcd(size_t a, size_t b) { return b ? gcd(b, a % b) : a; }

/* element i of n; DISTINCT: a scrambled ramp, values at least 1.6/n apart
 * (no ties for max to break, none a finite difference step can swap) */
static double draw(int domain, size_t i, size_t n)
{
    double u = urand();
    switch (domain) {
    case DISTINCT: {
        size_t a = (size_t)(0.618034 * (double)n) | 1;
        while (gcd(a, n) != 1)
            a += 2;
        return -2 + 4 * ((double)(i * a % n) + 0.2 + 0.6 * u) / (double)n;
    }
    case POS: return 0.5 + 1.5 * u;
    case AWAY0: return (urand() < 0.5 ? -1 : 1) * (0.2 + 1.8 * u);
    case FRAC: return floor(-2 + 4 * urand()) + 0.2 + 0.6 * u;
    default: return -2 + 4 * u;
    }
}

static int64_t numel(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= d[i];
    return n;
}

static double run_loss(rlx_session *s)
{
    double l = NAN;
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "loss", &l, sizeof l), RLX_OK);
    return l;
}

static void check_case(const grad_case *c)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node p[MAXP];
    double *val[MAXP];
    char name[MAXP][8];
    for (int i = 0; i < c->np; i++) {
        snprintf(name[i], sizeof name[i], "p%d", i);
        p[i] = rlx_param(g, name[i], RLX_F64, c->ndim[i], c->dims[i]);
        int64_t n = numel(c->ndim[i], c->dims[i]);
        val[i] = malloc((size_t)n * sizeof(double));
        for (int64_t j = 0; j < n; j++)
            val[i][j] = draw(c->domain[i], (size_t)j, (size_t)n);
    }
    rlx_node y = c->body(g, p);
    if (y < 0)
        fail_msg("%s: building the forward failed: %s", c->name, rlx_last_error());
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    assert_int_equal(rlx_node_shape(g, y, &ndim, dims), RLX_OK);
    int64_t ny = numel(ndim, dims);
    double *r = malloc((size_t)ny * sizeof *r);
    for (int64_t j = 0; j < ny; j++)
        r[j] = -1 + 2 * urand();
    rlx_node rn = rlx_constant(g, RLX_F64, ndim, dims, r, (size_t)ny * sizeof *r);
    free(r);
    int all[RLX_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        all[i] = i;
    rlx_node loss = rlx_reduce_sum(g, rlx_mul(g, y, rn), ndim, all, 0);
    rlx_node grads[MAXP];
    if (rlx_gradients(g, loss, c->np, p, grads) != RLX_OK)
        fail_msg("%s: rlx_gradients: %s", c->name, rlx_last_error());
    assert_int_equal(rlx_output(g, "loss", loss), RLX_OK);
    for (int i = 0; i < c->np; i++) {
        char gname[16];
        snprintf(gname, sizeof gname, "g%d", i);
        assert_int_equal(rlx_output(g, gname, grads[i]), RLX_OK);
    }
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        fail_msg("%s: compile: %s", c->name, rlx_last_error());
    for (int i = 0; i < c->np; i++)
        assert_int_equal(rlx_session_set_param(s, name[i], val[i], (size_t)numel(c->ndim[i], c->dims[i]) * 8), RLX_OK);
    run_loss(s);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < c->np; i++) {
        int64_t n = numel(c->ndim[i], c->dims[i]);
        double *an = malloc((size_t)n * sizeof *an);
        char gname[16];
        snprintf(gname, sizeof gname, "g%d", i);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        assert_int_equal(rlx_session_get_output(s, gname, an, (size_t)n * 8), RLX_OK);
        for (int64_t j = 0; j < n; j++) {
            const double h = 1e-6, keep = val[i][j];
            val[i][j] = keep + h;
            rlx_session_set_param(s, name[i], val[i], (size_t)n * 8);
            double lp = run_loss(s);
            val[i][j] = keep - h;
            rlx_session_set_param(s, name[i], val[i], (size_t)n * 8);
            double lm = run_loss(s);
            val[i][j] = keep;
            rlx_session_set_param(s, name[i], val[i], (size_t)n * 8);
            double fd = (lp - lm) / (2 * h), err = fabs(an[j] - fd) / (1e-3 + fabs(fd));
            if (!(err < 1e-5) && bad++ < 4)
                fprintf(stderr, "%s: d loss / d p%d[%lld]: analytic %.10g, finite difference %.10g\n", c->name, i,
                        (long long)j, an[j], fd);
            if (!(err <= worst))
                worst = err;
        }
        free(an);
    }
    if (bad)
        fail_msg("%s: %d gradient elements off (worst relative error %.3g)", c->name, bad, worst);
    printf("  %-28s ok (worst relative error %.2g)\n", c->name, worst);
    rlx_session_free(s);
    rlx_graph_free(g);
    for (int i = 0; i < c->np; i++)
        free(val[i]);
}

/* ------------------------------------------------------------ case bodies */

#define U(fn) \
    static rlx_node u_##fn(rlx_graph *g, const rlx_node *p) { return rlx_##fn(g, p[0]); }
U(neg)
U(abs)
U(exp)
U(log)
U(sqrt)
U(rsqrt)
U(reciprocal)
U(tanh)
U(sigmoid)
U(relu)
U(gelu)
U(gelu_tanh)
U(silu)
U(erf)
U(sin)
U(cos)
U(floor)
U(ceil)
U(round)
U(sign)
#define B2(fn) \
    static rlx_node b_##fn(rlx_graph *g, const rlx_node *p) { return rlx_##fn(g, p[0], p[1]); }
B2(add)
B2(sub)
B2(mul)
B2(div)
B2(pow)
B2(max)
B2(min)
static rlx_node b_fmod(rlx_graph *g, const rlx_node *p) { return rlx_mod(g, p[0], p[1], 1); }
static rlx_node b_mod(rlx_graph *g, const rlx_node *p) { return rlx_mod(g, p[0], p[1], 0); }
static rlx_node b_square(rlx_graph *g, const rlx_node *p) { return rlx_mul(g, p[0], p[0]); }
static rlx_node e_where(rlx_graph *g, const rlx_node *p)
{
    bool c[12] = {1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0};
    rlx_node cn = rlx_constant(g, RLX_BOOL, 2, (int64_t[]){3, 4}, c, sizeof c);
    return rlx_where(g, cn, p[0], p[1]);
}
static rlx_node e_clip(rlx_graph *g, const rlx_node *p) { return rlx_clip(g, p[0], -0.7, 0.9); }
static rlx_node e_chain(rlx_graph *g, const rlx_node *p)
{
    /* one value used by several consumers: contributions add up */
    rlx_node t = rlx_tanh(g, p[0]);
    return rlx_add(g, rlx_mul(g, t, p[1]), rlx_exp(g, rlx_mul(g, t, t)));
}
static rlx_node m_nn(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 0, 0); }
static rlx_node m_tn(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 1, 0); }
static rlx_node m_nt(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 0, 1); }
static rlx_node m_tt(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 1, 1); }
#define R(nm, fn, na, keep, ...) \
    static rlx_node r_##nm(rlx_graph *g, const rlx_node *p) { return fn(g, p[0], na, (int[]){__VA_ARGS__}, keep); }
R(sum01, rlx_reduce_sum, 2, 0, 0, 2)
R(sum1k, rlx_reduce_sum, 1, 1, 1)
R(mean2, rlx_reduce_mean, 1, 0, -1)
R(max1, rlx_reduce_max, 1, 1, 1)
R(min0, rlx_reduce_min, 1, 0, 0)
R(prod2, rlx_reduce_prod, 1, 1, 2)
static rlx_node n_softmax(rlx_graph *g, const rlx_node *p) { return rlx_softmax(g, p[0], 1); }
static rlx_node n_log_softmax(rlx_graph *g, const rlx_node *p) { return rlx_log_softmax(g, p[0], -1); }
static rlx_node n_layer_norm(rlx_graph *g, const rlx_node *p) { return rlx_layer_norm(g, p[0], p[1], p[2], 1e-5); }
static rlx_node n_layer_norm_plain(rlx_graph *g, const rlx_node *p) { return rlx_layer_norm(g, p[0], -1, -1, 1e-3); }
static rlx_node n_rms_norm(rlx_graph *g, const rlx_node *p) { return rlx_rms_norm(g, p[0], p[1], 1e-6); }
static rlx_node s_reshape(rlx_graph *g, const rlx_node *p) { return rlx_reshape(g, p[0], 2, (int64_t[]){4, 6}); }
static rlx_node s_transpose(rlx_graph *g, const rlx_node *p) { return rlx_transpose(g, p[0], (int[]){2, 0, 1}); }
static rlx_node s_slice(rlx_graph *g, const rlx_node *p)
{
    return rlx_slice(g, p[0], 2, (int[]){0, 2}, (int64_t[]){1, 1}, (int64_t[]){3, 3}, NULL);
}
static rlx_node s_slice_strided(rlx_graph *g, const rlx_node *p)
{
    return rlx_slice(g, p[0], 2, (int[]){0, 2}, (int64_t[]){3, 0}, (int64_t[]){-6, 7}, (int64_t[]){-2, 3});
}
static rlx_node s_slice_reversed(rlx_graph *g, const rlx_node *p)
{
    return rlx_slice(g, p[0], 1, (int[]){1}, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-1});
}
static rlx_node s_concat(rlx_graph *g, const rlx_node *p) { return rlx_concat(g, 2, p, 1); }
static rlx_node s_gather0(rlx_graph *g, const rlx_node *p)
{
    int64_t idx[5] = {2, 0, 4, 2, -1};
    rlx_node in = rlx_constant(g, RLX_I64, 1, (int64_t[]){5}, idx, sizeof idx);
    return rlx_gather(g, p[0], in, 0);
}
static rlx_node s_gather1(rlx_graph *g, const rlx_node *p)
{
    int32_t idx[4] = {1, 1, 0, 2};
    rlx_node in = rlx_constant(g, RLX_I32, 2, (int64_t[]){2, 2}, idx, sizeof idx);
    return rlx_gather(g, p[0], in, 1);
}
static rlx_node s_scatter_add(rlx_graph *g, const rlx_node *p)
{
    int64_t idx[4] = {3, 0, 3, -2};
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = RLX_OP_SCATTER_ADD;
    n.n_in = 2;
    n.in[0] = p[0];
    n.in[1] = rlx_constant(g, RLX_I64, 1, (int64_t[]){4}, idx, sizeof idx);
    n.attrs.gather.axis = 1;
    n.shape = (rlx_shape){3, {2, 5, 3}};
    return rlx_graph_add(g, &n);
}
static rlx_node s_expand(rlx_graph *g, const rlx_node *p) { return rlx_expand(g, p[0], 3, (int64_t[]){2, 3, 4}); }
static rlx_node s_pad(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){1, 0, 2, 1}, RLX_PAD_CONSTANT, 0.5);
}
static rlx_node a_rope(rlx_graph *g, const rlx_node *p) { return rlx_rope(g, p[0], 10000.0, 3, 0); }
static rlx_node a_rope_il(rlx_graph *g, const rlx_node *p) { return rlx_rope(g, p[0], 500.0, 0, 1); }
static rlx_node a_attn(rlx_graph *g, const rlx_node *p) { return rlx_attention(g, p[0], p[1], p[2], -1, 0, 0); }
static rlx_node a_attn_causal(rlx_graph *g, const rlx_node *p)
{
    return rlx_attention(g, p[0], p[1], p[2], -1, 1, 0.4);
}
static rlx_node a_attn_bool(rlx_graph *g, const rlx_node *p)
{
    bool m[12] = {1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0, 1};
    rlx_node mn = rlx_constant(g, RLX_BOOL, 4, (int64_t[]){1, 1, 3, 4}, m, sizeof m);
    return rlx_attention(g, p[0], p[1], p[2], mn, 1, 0);
}
static rlx_node a_attn_float(rlx_graph *g, const rlx_node *p) { return rlx_attention(g, p[0], p[1], p[2], p[3], 0, 0); }
static rlx_node c_conv(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.pads[0] = cp.pads[1] = cp.pads[2] = cp.pads[3] = 1;
    return rlx_conv(g, p[0], p[1], p[2], &cp);
}
static rlx_node c_conv_s2(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.stride[0] = 2, cp.stride[1] = 2, cp.pads[0] = 1, cp.pads[2] = 0, cp.pads[1] = 1;
    return rlx_conv(g, p[0], p[1], -1, &cp);
}
static rlx_node c_conv_dil(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.dilation[0] = 2, cp.stride[0] = 2, cp.pads[0] = 2, cp.pads[1] = 1;
    return rlx_conv(g, p[0], p[1], p[2], &cp);
}
static rlx_node c_conv_g2(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.groups = 2, cp.stride[0] = cp.stride[1] = 2, cp.pads[0] = cp.pads[1] = cp.pads[2] = cp.pads[3] = 1;
    return rlx_conv(g, p[0], p[1], p[2], &cp);
}
static rlx_node c_conv_dw(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.groups = 3, cp.dilation[0] = 2, cp.pads[0] = 2, cp.pads[1] = 1, cp.pads[2] = 2, cp.pads[3] = 1;
    return rlx_conv(g, p[0], p[1], -1, &cp);
}
static rlx_node c_conv1d_g3(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.groups = 3, cp.stride[0] = 2, cp.dilation[0] = 2, cp.pads[0] = 3;
    return rlx_conv(g, p[0], p[1], p[2], &cp);
}
static rlx_node c_conv_wide_pad(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.pads[0] = 2, cp.pads[1] = 1, cp.pads[2] = 1, cp.pads[3] = 3;
    return rlx_conv(g, p[0], p[1], -1, &cp);
}
static rlx_node pool(rlx_graph *g, rlx_node x, bool max, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
                     int64_t dw, const int64_t *pads, int include_pad, int ceil_mode)
{
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, kh);
    pp.kernel[1] = kw, pp.stride[0] = sh, pp.stride[1] = sw, pp.dilation[0] = dh, pp.dilation[1] = dw;
    memcpy(pp.pads, pads, sizeof pp.pads);
    pp.count_include_pad = include_pad, pp.ceil_mode = ceil_mode;
    return max ? rlx_max_pool(g, x, &pp) : rlx_avg_pool(g, x, &pp);
}
static rlx_node p_max2(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], true, 2, 2, 2, 2, 1, 1, (int64_t[4]){0}, 0, 0);
}
static rlx_node p_max3s2p1(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], true, 3, 3, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 1}, 0, 0);
}
static rlx_node p_max_dil_ceil(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], true, 2, 3, 2, 1, 2, 1, (int64_t[4]){1, 0, 0, 1}, 0, 1);
}
static rlx_node p_max1d(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], true, 3, 3, 2, 2, 2, 2, (int64_t[4]){2, 1}, 0, 1);
}
static rlx_node p_avg3s2p1(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], false, 3, 3, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 1}, 0, 0);
}
static rlx_node p_avg3s2p1_incl(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], false, 3, 3, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 1}, 1, 0);
}
static rlx_node p_avg_ceil(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], false, 3, 2, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 0}, 0, 1);
}
static rlx_node p_avg_ceil_incl(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], false, 3, 2, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 0}, 1, 1);
}
static rlx_node p_avg1d(rlx_graph *g, const rlx_node *p)
{
    return pool(g, p[0], false, 2, 2, 1, 1, 3, 3, (int64_t[4]){1, 1}, 1, 0);
}
static rlx_node s_pad_reflect(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){2, 1, 1, 3}, RLX_PAD_REFLECT, 0);
}
static rlx_node s_pad_reflect3(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 0, 3, 0, 2, 1}, RLX_PAD_REFLECT, 0);
}
static rlx_node s_pad_edge(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){1, 5, 4, 0}, RLX_PAD_EDGE, 0);
}
static rlx_node s_pad_edge3(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 2, 1, 0, 3, 2}, RLX_PAD_EDGE, 0);
}
static rlx_node l_xent(rlx_graph *g, const rlx_node *p)
{
    int64_t lab[6] = {0, 3, -100, 2, 1, 3};
    rlx_node y = rlx_constant(g, RLX_I64, 2, (int64_t[]){2, 3}, lab, sizeof lab);
    return rlx_cross_entropy(g, p[0], y, -100, 0.1);
}
static rlx_node l_mse(rlx_graph *g, const rlx_node *p) { return rlx_mse_loss(g, p[0], p[1]); }
static rlx_node c_gap(rlx_graph *g, const rlx_node *p) { return rlx_global_avg_pool(g, p[0]); }
static rlx_node c_batch_norm(rlx_graph *g, const rlx_node *p)
{
    return rlx_batch_norm(g, p[0], p[1], p[2], p[3], p[4], 1e-5);
}

/* fused ops, made as the optimizer makes them: through their decomposition */
static rlx_node f_matmul_bias_gelu(rlx_graph *g, const rlx_node *p)
{
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = RLX_OP_MATMUL_BIAS_ACT;
    n.n_in = 3;
    n.in[0] = p[0], n.in[1] = p[1], n.in[2] = p[2];
    n.attrs.mm_act.act = RLX_ACT_GELU;
    n.attrs.mm_act.has_bias = 1;
    return rlx_graph_add(g, &n);
}
static rlx_node f_add_rms_norm(rlx_graph *g, const rlx_node *p)
{
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = RLX_OP_ADD_RMS_NORM;
    n.n_in = 3;
    n.in[0] = p[0], n.in[1] = p[1], n.in[2] = p[2];
    n.attrs.norm.eps = 1e-5;
    n.attrs.norm.has_gamma = 1;
    return rlx_graph_add(g, &n);
}

#define S1(a) \
    1,        \
    {         \
        {     \
            a \
        }     \
    }
#define S2(a, b) \
    2,           \
    {            \
        {        \
            a, b \
        }        \
    }
#define P1(nd, ...)     \
    1, {nd},            \
    {                   \
        {               \
            __VA_ARGS__ \
        }               \
    }
static const grad_case cases[] = {
    {"neg", P1(2, 3, 4), {ANY}, u_neg},
    {"abs", P1(2, 3, 4), {AWAY0}, u_abs},
    {"exp", P1(2, 3, 4), {ANY}, u_exp},
    {"log", P1(2, 3, 4), {POS}, u_log},
    {"sqrt", P1(2, 3, 4), {POS}, u_sqrt},
    {"rsqrt", P1(2, 3, 4), {POS}, u_rsqrt},
    {"reciprocal", P1(2, 3, 4), {POS}, u_reciprocal},
    {"tanh", P1(2, 3, 4), {ANY}, u_tanh},
    {"sigmoid", P1(2, 3, 4), {ANY}, u_sigmoid},
    {"relu", P1(2, 3, 4), {AWAY0}, u_relu},
    {"gelu", P1(2, 3, 4), {ANY}, u_gelu},
    {"gelu_tanh", P1(2, 3, 4), {ANY}, u_gelu_tanh},
    {"silu", P1(2, 3, 4), {ANY}, u_silu},
    {"erf", P1(2, 3, 4), {ANY}, u_erf},
    {"sin", P1(2, 3, 4), {ANY}, u_sin},
    {"cos", P1(2, 3, 4), {ANY}, u_cos},
    {"floor", P1(2, 3, 4), {FRAC}, u_floor},
    {"ceil", P1(2, 3, 4), {FRAC}, u_ceil},
    {"round", P1(2, 3, 4), {FRAC}, u_round},
    {"sign", P1(2, 3, 4), {AWAY0}, u_sign},
    {"add broadcast", 2, {2, 1}, {{3, 4}, {4}}, {ANY, ANY}, b_add},
    {"sub broadcast", 2, {2, 2}, {{3, 1}, {1, 4}}, {ANY, ANY}, b_sub},
    {"mul broadcast", 2, {3, 2}, {{2, 3, 4}, {3, 1}}, {ANY, ANY}, b_mul},
    {"div", 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, POS}, b_div},
    {"pow", 2, {2, 2}, {{3, 4}, {1, 4}}, {POS, ANY}, b_pow},
    {"max", 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, ANY}, b_max},
    {"min broadcast", 2, {2, 1}, {{3, 4}, {4}}, {ANY, ANY}, b_min},
    {"fmod", 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, POS}, b_fmod},
    {"mod", 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, POS}, b_mod},
    {"x * x (operand twice)", P1(2, 3, 4), {ANY}, b_square},
    {"where", 2, {2, 1}, {{3, 4}, {4}}, {ANY, ANY}, e_where},
    {"clip", P1(2, 4, 5), {ANY}, e_clip},
    {"shared value", 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, ANY}, e_chain},
    {"matmul", 2, {2, 2}, {{3, 4}, {4, 5}}, {ANY, ANY}, m_nn},
    {"matmul a^T", 2, {2, 2}, {{4, 3}, {4, 5}}, {ANY, ANY}, m_tn},
    {"matmul b^T", 2, {3, 2}, {{2, 3, 4}, {5, 4}}, {ANY, ANY}, m_nt},
    {"matmul a^T b^T", 2, {3, 3}, {{2, 4, 3}, {2, 5, 4}}, {ANY, ANY}, m_tt},
    {"matmul batch broadcast", 2, {3, 2}, {{2, 3, 4}, {4, 5}}, {ANY, ANY}, m_nn},
    {"matmul batch 4-d", 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, {ANY, ANY}, m_nn},
    {"reduce_sum axes 0,2", P1(3, 2, 3, 4), {ANY}, r_sum01},
    {"reduce_sum keepdims", P1(3, 2, 3, 4), {ANY}, r_sum1k},
    {"reduce_mean", P1(3, 2, 3, 4), {ANY}, r_mean2},
    {"reduce_max", P1(3, 2, 3, 4), {ANY}, r_max1},
    {"reduce_min", P1(3, 2, 3, 4), {ANY}, r_min0},
    {"reduce_prod", P1(3, 2, 3, 4), {POS}, r_prod2},
    {"softmax", P1(3, 2, 5, 3), {ANY}, n_softmax},
    {"log_softmax", P1(2, 3, 6), {ANY}, n_log_softmax},
    {"layer_norm", 3, {2, 1, 1}, {{3, 6}, {6}, {6}}, {ANY, ANY, ANY}, n_layer_norm},
    {"layer_norm plain", P1(3, 2, 2, 5), {ANY}, n_layer_norm_plain},
    {"rms_norm", 2, {2, 1}, {{3, 6}, {6}}, {ANY, ANY}, n_rms_norm},
    {"reshape", P1(3, 2, 3, 4), {ANY}, s_reshape},
    {"transpose", P1(3, 2, 3, 4), {ANY}, s_transpose},
    {"slice", P1(3, 4, 2, 5), {ANY}, s_slice},
    {"slice steps -2 and 3", P1(3, 5, 2, 8), {ANY}, s_slice_strided},
    {"slice reversed", P1(2, 3, 4), {ANY}, s_slice_reversed},
    {"concat", 2, {2, 2}, {{3, 2}, {3, 4}}, {ANY, ANY}, s_concat},
    {"gather axis 0", P1(2, 5, 3), {ANY}, s_gather0},
    {"gather axis 1", P1(3, 2, 3, 2), {ANY}, s_gather1},
    {"expand", P1(3, 2, 1, 4), {ANY}, s_expand},
    {"scatter_add (gather's gradient)", P1(3, 2, 4, 3), {ANY}, s_scatter_add},
    {"pad", P1(2, 3, 4), {ANY}, s_pad},
    {"pad reflect", P1(2, 3, 5), {ANY}, s_pad_reflect},
    {"pad reflect 3-d", P1(3, 2, 3, 4), {ANY}, s_pad_reflect3},
    {"pad edge", P1(2, 3, 4), {ANY}, s_pad_edge},
    {"pad edge, an axis of 1", P1(3, 2, 1, 3), {ANY}, s_pad_edge3},
    {"rope", P1(4, 1, 2, 3, 8), {ANY}, a_rope},
    {"rope interleaved", P1(3, 2, 4, 6), {ANY}, a_rope_il},
    {"attention", 3, {4, 4, 4}, {{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}}, {ANY, ANY, ANY}, a_attn},
    {"attention causal gqa", 3, {4, 4, 4}, {{2, 4, 3, 4}, {2, 2, 4, 4}, {2, 2, 4, 2}}, {ANY, ANY, ANY}, a_attn_causal},
    {"attention bool mask", 3, {4, 4, 4}, {{1, 2, 3, 2}, {1, 1, 4, 2}, {1, 1, 4, 3}}, {ANY, ANY, ANY}, a_attn_bool},
    {"attention float mask",
     4,
     {4, 4, 4, 4},
     {{1, 2, 3, 4}, {1, 2, 4, 4}, {1, 2, 4, 4}, {1, 1, 3, 4}},
     {ANY, ANY, ANY, ANY},
     a_attn_float},
    {"conv 3x3 pad 1 bias", 3, {4, 4, 1}, {{2, 3, 5, 4}, {4, 3, 3, 3}, {4}}, {ANY, ANY, ANY}, c_conv},
    {"conv stride 2", 2, {4, 4}, {{1, 2, 6, 5}, {3, 2, 3, 2}}, {ANY, ANY}, c_conv_s2},
    {"conv 1-d dilated strided", 3, {3, 3, 1}, {{2, 2, 9}, {3, 2, 3}, {3}}, {ANY, ANY, ANY}, c_conv_dil},
    {"conv groups 2 stride 2 bias", 3, {4, 4, 1}, {{2, 4, 7, 6}, {6, 2, 3, 3}, {6}}, {ANY, ANY, ANY}, c_conv_g2},
    {"conv depthwise x2 dilated", 2, {4, 4}, {{2, 3, 5, 5}, {6, 1, 3, 3}}, {ANY, ANY}, c_conv_dw},
    {"conv 1-d groups 3 dilated strided", 3, {3, 3, 1}, {{2, 6, 11}, {3, 2, 3}, {3}}, {ANY, ANY, ANY}, c_conv1d_g3},
    {"conv pads past the kernel", 2, {4, 4}, {{1, 2, 4, 5}, {3, 2, 1, 2}}, {ANY, ANY}, c_conv_wide_pad},
    {"max_pool 2x2", P1(4, 2, 3, 4, 6), {DISTINCT}, p_max2},
    {"max_pool 3x3 stride 2 pad 1", P1(4, 2, 2, 7, 6), {DISTINCT}, p_max3s2p1},
    {"max_pool dilated ceil", P1(4, 1, 2, 7, 6), {DISTINCT}, p_max_dil_ceil},
    {"max_pool 1-d dilated ceil", P1(3, 2, 3, 9), {DISTINCT}, p_max1d},
    {"avg_pool 3x3 stride 2 pad 1", P1(4, 2, 2, 7, 6), {ANY}, p_avg3s2p1},
    {"avg_pool counting pads", P1(4, 2, 2, 7, 6), {ANY}, p_avg3s2p1_incl},
    {"avg_pool ceil", P1(4, 1, 2, 6, 5), {ANY}, p_avg_ceil},
    {"avg_pool ceil counting pads", P1(4, 1, 2, 6, 5), {ANY}, p_avg_ceil_incl},
    {"avg_pool 1-d dilated", P1(3, 2, 2, 8), {ANY}, p_avg1d},
    {"cross_entropy, smoothing, ignored row", P1(3, 2, 3, 4), {ANY}, l_xent},
    {"mse_loss broadcast", 2, {2, 1}, {{3, 4}, {4}}, {ANY, ANY}, l_mse},
    {"global_avg_pool", P1(4, 2, 3, 2, 3), {ANY}, c_gap},
    {"batch_norm", 5, {4, 1, 1, 1, 1}, {{2, 3, 2, 2}, {3}, {3}, {3}, {3}}, {ANY, ANY, ANY, ANY, POS}, c_batch_norm},
    {"fused matmul_bias_act", 3, {2, 2, 1}, {{3, 4}, {4, 5}, {5}}, {ANY, ANY, ANY}, f_matmul_bias_gelu},
    {"fused add_rms_norm", 3, {2, 2, 1}, {{3, 6}, {3, 6}, {6}}, {ANY, ANY, ANY}, f_add_rms_norm},
};

static void test_every_rule(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        check_case(&cases[i]);
}

/* Every op but the leaves names a gradient rule in its row. */
static void test_every_op_has_a_rule(void **state)
{
    (void)state;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)op);
        if (!(i->flags & RLX_OPF_LEAF) && !i->grad)
            fail_msg("op %s has no gradient rule in its row (src/ir/ops.c)", i->name);
    }
}

static void test_refusals_and_arguments(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_param(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node unused = rlx_param(g, "unused", RLX_F32, 1, (int64_t[]){3});
    rlx_node d = rlx_dropout(g, x, 0.5);
    rlx_node loss = rlx_reduce_sum(g, d, 2, (int[]){0, 1}, 0);
    rlx_node gr[2];
    assert_int_equal(rlx_gradients(g, loss, 1, &x, gr), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_last_error(), "dropout"));
    rlx_graph_free(g);

    g = rlx_graph_new();
    x = rlx_param(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    unused = rlx_param(g, "unused", RLX_F32, 1, (int64_t[]){3});
    rlx_node idx = rlx_param(g, "idx", RLX_I64, 1, (int64_t[]){2});
    rlx_node sq = rlx_mul(g, x, x);
    /* not a scalar */
    assert_int_equal(rlx_gradients(g, sq, 1, &x, gr), RLX_ERR_SHAPE);
    assert_non_null(strstr(rlx_last_error(), "one element"));
    loss = rlx_reduce_sum(g, sq, 2, (int[]){0, 1}, 0);
    /* an integer parameter */
    assert_int_equal(rlx_gradients(g, loss, 1, &idx, gr), RLX_ERR_DTYPE);
    assert_non_null(strstr(rlx_last_error(), "only float"));
    /* a parameter the loss does not use gets zeros */
    rlx_node both[2] = {x, unused};
    assert_int_equal(rlx_gradients(g, loss, 2, both, gr), RLX_OK);
    rlx_output(g, "gu", gr[1]);
    rlx_output(g, "gx", gr[0]);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    float xv[6] = {1, -2, 3, 0.5f, 4, -1}, gx[6], gu[3] = {7, 7, 7};
    rlx_session_set_param(s, "x", xv, sizeof xv);
    rlx_session_set_param(s, "unused", gu, sizeof gu);
    rlx_session_set_param(s, "idx", (int64_t[]){0, 1}, 16);
    if (rlx_session_run(s) != RLX_OK)
        fail_msg("run: %s", rlx_last_error());
    assert_int_equal(rlx_session_get_output(s, "gu", gu, sizeof gu), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "gx", gx, sizeof gx), RLX_OK);
    for (int i = 0; i < 3; i++)
        assert_true(gu[i] == 0.0f);
    for (int i = 0; i < 6; i++)
        assert_true(gx[i] == 2 * xv[i]);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Ties of max_pool share the window's gradient evenly, as reduce_max's do:
 * a constant input gives every cell of a 2x2 window a quarter. */
static void test_max_pool_ties_share(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_param(g, "x", RLX_F64, 4, (int64_t[]){1, 1, 2, 4});
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, 2);
    double w[2] = {1, 2};
    rlx_node y = rlx_mul(g, rlx_max_pool(g, x, &pp), rlx_constant(g, RLX_F64, 4, (int64_t[]){1, 1, 1, 2}, w, sizeof w));
    rlx_node loss = rlx_reduce_sum(g, y, 4, (int[]){0, 1, 2, 3}, 0), gx;
    assert_int_equal(rlx_gradients(g, loss, 1, &x, &gx), RLX_OK);
    assert_int_equal(rlx_output(g, "gx", gx), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    double xv[8] = {3, 3, 3, 3, 3, 3, 3, 3}, gv[8];
    assert_int_equal(rlx_session_set_param(s, "x", xv, sizeof xv), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "gx", gv, sizeof gv), RLX_OK);
    for (int i = 0; i < 8; i++)
        assert_true(gv[i] == (i % 4 < 2 ? 0.25 : 0.5));
    rlx_session_free(s);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_has_a_rule),
        cmocka_unit_test(test_refusals_and_arguments),
        cmocka_unit_test(test_max_pool_ties_share),
        cmocka_unit_test(test_every_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
