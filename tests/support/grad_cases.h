/* grad_cases.h - the cases of the gradient checks, written once for both:
 * tests/test_grad.c (float64 finite differences on the CPU) and
 * tests/gpu/cuda_train.c (CUDA against the CPU in f32).  A case is
 * y = body(params) for params of the given shapes, drawn from a domain
 * that keeps non-smooth ops away from their kinks.  `runs` says which
 * checks take it: shapes too large for finite differences element by
 * element, and the bf16 round trip (whose finite differences see only
 * rounding steps), are the device check's alone. */
#ifndef RLX_TESTS_GRAD_CASES_H
#define RLX_TESTS_GRAD_CASES_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "rlx.h"

/* value domains: anything in [-2, 2), positive, away from 0, away from
 * integers, and distinct (no ties for a max to break) */
enum { ANY, POS, AWAY0, FRAC, DISTINCT };
/* which checks run a case */
enum { GC_FD = 1, GC_DEVICE = 2, GC_BOTH = GC_FD | GC_DEVICE };
#define GC_MAXP 5

typedef struct grad_case {
    const char *name;
    int runs;
    int np;
    int ndim[GC_MAXP];
    int64_t dims[GC_MAXP][4];
    int domain[GC_MAXP];
    rlx_node (*body)(rlx_graph *g, const rlx_node *p);
} grad_case;

static inline size_t gc_gcd(size_t a, size_t b)
{
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Element i of n in a domain, from two uniform draws u, v in [0, 1).
 * DISTINCT is a scrambled ramp: values at least 1.6/n apart, so neither a
 * finite difference step nor f32 rounding can make two of them equal. */
static inline double grad_case_value(int domain, double u, double v, size_t i, size_t n)
{
    switch (domain) {
    case POS: return 0.5 + 1.5 * u;
    case AWAY0: return (v < 0.5 ? -1 : 1) * (0.2 + 1.8 * u);
    case FRAC: return floor(-2 + 4 * v) + 0.2 + 0.6 * u;
    case DISTINCT: {
        size_t a = (size_t)(0.618034 * (double)n) | 1;
        while (gc_gcd(a, n) != 1)
            a += 2;
        return -2 + 4 * ((double)(i * a % n) + 0.2 + 0.6 * u) / (double)n;
    }
    default: return -2 + 4 * u;
    }
}

static inline uint64_t gc_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A node of an op with no public builder (fused ops, scatter_add). */
static inline rlx_node gc_node(rlx_graph *g, rlx_op op, int n_in, const rlx_node *in, const rlx_attrs *attrs,
                               const rlx_shape *shape)
{
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.n_in = n_in;
    memcpy(n.in, in, (size_t)n_in * sizeof *in);
    n.attrs = *attrs;
    if (shape)
        n.shape = *shape;
    return rlx_graph_add(g, &n);
}

/* ------------------------------------------------------------ elementwise */

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
#undef U
#define B2(fn) \
    static rlx_node b_##fn(rlx_graph *g, const rlx_node *p) { return rlx_##fn(g, p[0], p[1]); }
B2(add)
B2(sub)
B2(mul)
B2(div)
B2(pow)
B2(max)
B2(min)
#undef B2
static rlx_node b_fmod(rlx_graph *g, const rlx_node *p) { return rlx_mod(g, p[0], p[1], 1); }
static rlx_node b_mod(rlx_graph *g, const rlx_node *p) { return rlx_mod(g, p[0], p[1], 0); }
static rlx_node b_square(rlx_graph *g, const rlx_node *p) { return rlx_mul(g, p[0], p[0]); }
static rlx_node e_where(rlx_graph *g, const rlx_node *p)
{
    bool c[12] = {1, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0};
    return rlx_where(g, rlx_constant(g, RLX_BOOL, 2, (int64_t[]){3, 4}, c, sizeof c), p[0], p[1]);
}
static rlx_node e_clip(rlx_graph *g, const rlx_node *p) { return rlx_clip(g, p[0], -0.7, 0.9); }
static rlx_node e_cast(rlx_graph *g, const rlx_node *p)
{
    return rlx_cast(g, rlx_mul(g, rlx_cast(g, p[0], RLX_BF16), rlx_cast(g, p[1], RLX_BF16)), RLX_F32);
}
/* one value used by several consumers: contributions add up */
static rlx_node e_chain(rlx_graph *g, const rlx_node *p)
{
    rlx_node t = rlx_tanh(g, p[0]);
    return rlx_add(g, rlx_mul(g, t, p[1]), rlx_exp(g, rlx_mul(g, t, t)));
}

/* ------------------------------------------------------------ matmul, reductions, norms */

static rlx_node m_nn(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 0, 0); }
static rlx_node m_tn(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 1, 0); }
static rlx_node m_nt(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 0, 1); }
static rlx_node m_tt(rlx_graph *g, const rlx_node *p) { return rlx_matmul(g, p[0], p[1], 1, 1); }
#define R(nm, fn, na, keep, ...) \
    static rlx_node r_##nm(rlx_graph *g, const rlx_node *p) { return fn(g, p[0], na, (int[]){__VA_ARGS__}, keep); }
R(sum02, rlx_reduce_sum, 2, 0, 0, 2)
R(sum1k, rlx_reduce_sum, 1, 1, 1)
R(mean2, rlx_reduce_mean, 1, 0, -1)
R(meanall, rlx_reduce_mean, 0, 0, 0)
R(max1, rlx_reduce_max, 1, 1, 1)
R(min0, rlx_reduce_min, 1, 0, 0)
R(prod2, rlx_reduce_prod, 1, 1, 2)
#undef R
static rlx_node n_softmax(rlx_graph *g, const rlx_node *p) { return rlx_softmax(g, p[0], 1); }
static rlx_node n_softmax_last(rlx_graph *g, const rlx_node *p) { return rlx_softmax(g, p[0], -1); }
static rlx_node n_log_softmax(rlx_graph *g, const rlx_node *p) { return rlx_log_softmax(g, p[0], -1); }
static rlx_node n_layer_norm(rlx_graph *g, const rlx_node *p) { return rlx_layer_norm(g, p[0], p[1], p[2], 1e-5); }
static rlx_node n_layer_norm_plain(rlx_graph *g, const rlx_node *p) { return rlx_layer_norm(g, p[0], -1, -1, 1e-3); }
static rlx_node n_rms_norm(rlx_graph *g, const rlx_node *p) { return rlx_rms_norm(g, p[0], p[1], 1e-6); }
static rlx_node n_batch_norm(rlx_graph *g, const rlx_node *p)
{
    return rlx_batch_norm(g, p[0], p[1], p[2], p[3], p[4], 1e-5);
}

/* ------------------------------------------------------------ data movement */

static rlx_node s_reshape(rlx_graph *g, const rlx_node *p) { return rlx_reshape(g, p[0], 2, (int64_t[]){4, 6}); }
static rlx_node s_transpose(rlx_graph *g, const rlx_node *p) { return rlx_transpose(g, p[0], (int[]){2, 0, 1}); }
static rlx_node s_transpose4(rlx_graph *g, const rlx_node *p) { return rlx_transpose(g, p[0], (int[]){0, 2, 1, 3}); }
static rlx_node s_slice(rlx_graph *g, const rlx_node *p)
{
    return rlx_slice(g, p[0], 2, (int[]){0, 2}, (int64_t[]){1, 1}, (int64_t[]){3, 3}, NULL);
}
static rlx_node s_slice_neg(rlx_graph *g, const rlx_node *p)
{
    return rlx_slice(g, p[0], 2, (int[]){1, 2}, (int64_t[]){-7, 2}, (int64_t[]){-1, 100}, NULL);
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
static rlx_node s_concat3(rlx_graph *g, const rlx_node *p) { return rlx_concat(g, 3, p, -1); }
static rlx_node s_split(rlx_graph *g, const rlx_node *p)
{
    rlx_node o[3];
    if (rlx_split(g, p[0], 1, 3, (int64_t[]){2, 3, 1}, o) != RLX_OK)
        return -1;
    return rlx_add(g, rlx_mul(g, o[0], rlx_slice(g, o[1], 1, (int[]){1}, (int64_t[]){0}, (int64_t[]){2}, NULL)),
                   rlx_expand(g, o[2], 2, (int64_t[]){4, 2}));
}
static rlx_node s_gather0(rlx_graph *g, const rlx_node *p)
{
    int64_t idx[5] = {2, 0, 4, 2, -1};
    return rlx_gather(g, p[0], rlx_constant(g, RLX_I64, 1, (int64_t[]){5}, idx, sizeof idx), 0);
}
static rlx_node s_gather1(rlx_graph *g, const rlx_node *p)
{
    int32_t idx[4] = {1, 1, 0, 2};
    return rlx_gather(g, p[0], rlx_constant(g, RLX_I32, 2, (int64_t[]){2, 2}, idx, sizeof idx), 1);
}
/* an embedding lookup: many repeated rows, gradients summed into each */
static rlx_node s_embedding(rlx_graph *g, const rlx_node *p)
{
    int64_t idx[4 * 64];
    for (int i = 0; i < 4 * 64; i++)
        idx[i] = (int64_t)(gc_mix((uint64_t)i) % 50);
    return rlx_gather(g, p[0], rlx_constant(g, RLX_I64, 2, (int64_t[]){4, 64}, idx, sizeof idx), 0);
}
static rlx_node s_scatter_add(rlx_graph *g, const rlx_node *p)
{
    int64_t idx[4] = {3, 0, 3, -2};
    rlx_node in[2] = {p[0], rlx_constant(g, RLX_I64, 1, (int64_t[]){4}, idx, sizeof idx)};
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    a.gather.axis = 1;
    return gc_node(g, RLX_OP_SCATTER_ADD, 2, in, &a, &(rlx_shape){3, {2, 5, 3}});
}
static rlx_node s_expand(rlx_graph *g, const rlx_node *p) { return rlx_expand(g, p[0], 3, (int64_t[]){2, 3, 4}); }
static rlx_node s_expand_big(rlx_graph *g, const rlx_node *p)
{
    return rlx_expand(g, p[0], 4, (int64_t[]){4, 8, 16, 32});
}
static rlx_node s_pad(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){1, 0, 2, 1}, RLX_PAD_CONSTANT, 0.5);
}
static rlx_node s_pad4(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 1, 2, 1, 1, 0, 1, 3}, RLX_PAD_CONSTANT, -1);
}
static rlx_node s_pad_reflect(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){2, 1, 1, 3}, RLX_PAD_REFLECT, 0);
}
static rlx_node s_pad_reflect3(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 0, 3, 0, 2, 1}, RLX_PAD_REFLECT, 0);
}
static rlx_node s_pad_reflect4(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 0, 3, 2, 0, 0, 1, 4}, RLX_PAD_REFLECT, 0);
}
static rlx_node s_pad_edge(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){1, 5, 4, 0}, RLX_PAD_EDGE, 0);
}
static rlx_node s_pad_edge3(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 2, 1, 0, 3, 2}, RLX_PAD_EDGE, 0);
}
static rlx_node s_pad_edge4(rlx_graph *g, const rlx_node *p)
{
    return rlx_pad(g, p[0], (int64_t[]){0, 0, 2, 7, 0, 0, 5, 1}, RLX_PAD_EDGE, 0);
}

/* ------------------------------------------------------------ attention family */

static rlx_node a_rope(rlx_graph *g, const rlx_node *p) { return rlx_rope(g, p[0], 10000.0, 3, 0); }
static rlx_node a_rope_il(rlx_graph *g, const rlx_node *p) { return rlx_rope(g, p[0], 500.0, 0, 1); }
static rlx_node a_attn(rlx_graph *g, const rlx_node *p) { return rlx_attention(g, p[0], p[1], p[2], -1, 0, 0); }
static rlx_node a_attn_causal(rlx_graph *g, const rlx_node *p)
{
    return rlx_attention(g, p[0], p[1], p[2], -1, 1, 0.4);
}
static rlx_node a_attn_causal_default(rlx_graph *g, const rlx_node *p)
{
    return rlx_attention(g, p[0], p[1], p[2], -1, 1, 0);
}
static rlx_node a_attn_bool(rlx_graph *g, const rlx_node *p)
{
    bool m[12] = {1, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0, 1};
    rlx_node mn = rlx_constant(g, RLX_BOOL, 4, (int64_t[]){1, 1, 3, 4}, m, sizeof m);
    return rlx_attention(g, p[0], p[1], p[2], mn, 1, 0);
}
static rlx_node a_attn_float(rlx_graph *g, const rlx_node *p) { return rlx_attention(g, p[0], p[1], p[2], p[3], 0, 0); }
static rlx_node a_attn_self(rlx_graph *g, const rlx_node *p) { return rlx_attention(g, p[0], p[0], p[1], -1, 1, 0); }
/* a padding mask [B, 1, 1, T]: sequence b hides its last 7 * (b + 1) keys */
static rlx_node a_attn_pad(rlx_graph *g, const rlx_node *p)
{
    rlx_shape ks = g->nodes[p[1]].shape;
    int64_t B = ks.dims[0], T = ks.dims[2];
    bool m[4 * 256];
    if (B * T > 4 * 256)
        return -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            m[b * T + t] = t < T - 7 * (b + 1);
    rlx_node mn = rlx_constant(g, RLX_BOOL, 4, (int64_t[]){B, 1, 1, T}, m, (size_t)(B * T));
    return rlx_attention(g, p[0], p[1], p[2], mn, 0, 0);
}
/* an additive mask, a constant [1, H, S, T] of values in [-2, 0] */
static rlx_node a_attn_bias(rlx_graph *g, const rlx_node *p)
{
    rlx_shape qs = g->nodes[p[0]].shape, ks = g->nodes[p[1]].shape;
    int64_t H = qs.dims[1], S = qs.dims[2], T = ks.dims[2], n = H * S * T;
    float *m = malloc((size_t)n * sizeof *m + 1);
    if (!m)
        return -1;
    for (int64_t i = 0; i < n; i++)
        m[i] = -2.0f * (float)(gc_mix((uint64_t)i + 3) % 1000) / 1000.0f;
    rlx_node mn = rlx_constant(g, RLX_F32, 4, (int64_t[]){1, H, S, T}, m, (size_t)n * sizeof *m);
    free(m);
    return rlx_attention(g, p[0], p[1], p[2], mn, 1, 0);
}

/* ------------------------------------------------------------ convolution, pooling */

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
/* one group per input channel (the weight's output channels a multiple) */
static rlx_node c_conv_dw(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.groups = g->nodes[p[0]].shape.dims[1];
    cp.dilation[0] = 2, cp.pads[0] = 2, cp.pads[1] = 1, cp.pads[2] = 2, cp.pads[3] = 1;
    return rlx_conv(g, p[0], p[1], -1, &cp);
}
static rlx_node c_conv1d_g3(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.groups = 3, cp.stride[0] = 2, cp.dilation[0] = 2, cp.pads[0] = 3;
    return rlx_conv(g, p[0], p[1], p[2], &cp);
}
/* pads beyond the kernel's reach: windows that see only padding */
static rlx_node c_conv_wide_pad(rlx_graph *g, const rlx_node *p)
{
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.pads[0] = 2, cp.pads[1] = 1, cp.pads[2] = 1, cp.pads[3] = 3;
    return rlx_conv(g, p[0], p[1], -1, &cp);
}
static rlx_node gc_pool(rlx_graph *g, rlx_node x, bool max, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh,
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
    return gc_pool(g, p[0], true, 2, 2, 2, 2, 1, 1, (int64_t[4]){0}, 0, 0);
}
static rlx_node p_max3s2p1(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], true, 3, 3, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 1}, 0, 0);
}
static rlx_node p_max_dil_ceil(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], true, 2, 3, 2, 1, 2, 1, (int64_t[4]){1, 0, 0, 1}, 0, 1);
}
static rlx_node p_max1d(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], true, 3, 3, 2, 2, 2, 2, (int64_t[4]){2, 1}, 0, 1);
}
static rlx_node p_avg3s2p1(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], false, 3, 3, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 1}, 0, 0);
}
static rlx_node p_avg3s2p1_incl(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], false, 3, 3, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 1}, 1, 0);
}
static rlx_node p_avg_ceil(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], false, 3, 2, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 0}, 0, 1);
}
static rlx_node p_avg_ceil_incl(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], false, 3, 2, 2, 2, 1, 1, (int64_t[4]){1, 1, 1, 0}, 1, 1);
}
static rlx_node p_avg1d(rlx_graph *g, const rlx_node *p)
{
    return gc_pool(g, p[0], false, 2, 2, 1, 1, 3, 3, (int64_t[4]){1, 1}, 1, 0);
}
static rlx_node c_gap(rlx_graph *g, const rlx_node *p) { return rlx_global_avg_pool(g, p[0]); }

/* ------------------------------------------------------------ fused ops, losses */

/* what the optimizer fuses, differentiated as written */
static rlx_node f_mlp(rlx_graph *g, const rlx_node *p)
{
    return rlx_gelu(g, rlx_add(g, rlx_matmul(g, p[0], p[1], 0, 0), p[2]));
}
static rlx_node f_add_rms(rlx_graph *g, const rlx_node *p)
{
    return rlx_rms_norm(g, rlx_add(g, p[0], p[1]), p[2], 1e-5);
}
static rlx_node f_swiglu(rlx_graph *g, const rlx_node *p)
{
    rlx_node a = rlx_matmul(g, p[0], p[1], 0, 0), b = rlx_matmul(g, p[0], p[2], 0, 0);
    return rlx_mul(g, rlx_silu(g, a), b);
}
/* fused ops built as the optimizer builds them: through their decomposition */
static rlx_node f_matmul_bias_gelu(rlx_graph *g, const rlx_node *p)
{
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    a.mm_act.act = RLX_ACT_GELU;
    a.mm_act.has_bias = 1;
    return gc_node(g, RLX_OP_MATMUL_BIAS_ACT, 3, p, &a, NULL);
}
static rlx_node f_add_rms_norm(rlx_graph *g, const rlx_node *p)
{
    rlx_attrs a;
    memset(&a, 0, sizeof a);
    a.norm.eps = 1e-5;
    a.norm.has_gamma = 1;
    return gc_node(g, RLX_OP_ADD_RMS_NORM, 3, p, &a, NULL);
}
/* labels for x's rows: every fifth from the third ignored (-100), the
 * others hashed over the classes */
static rlx_node x_cross_entropy(rlx_graph *g, const rlx_node *p)
{
    rlx_shape s = g->nodes[p[0]].shape;
    int64_t lab[64], rows = 1, C = s.dims[s.ndim - 1];
    for (int i = 0; i < s.ndim - 1; i++)
        rows *= s.dims[i];
    if (rows > 64)
        return -1;
    for (int64_t i = 0; i < rows; i++)
        lab[i] = i % 5 == 2 ? -100 : (int64_t)(gc_mix((uint64_t)i + 9) % (uint64_t)C);
    rlx_node l = rlx_constant(g, RLX_I64, s.ndim - 1, s.dims, lab, (size_t)rows * sizeof *lab);
    return rlx_cross_entropy(g, p[0], l, -100, 0.1);
}
/* the same of logits made by a product (in low precision under mixed
 * precision, so the cross-entropy reads them as they arrive) */
static rlx_node x_cross_entropy_mm(rlx_graph *g, const rlx_node *p)
{
    rlx_node logits = rlx_matmul(g, p[0], p[1], 0, 0);
    return logits < 0 ? -1 : x_cross_entropy(g, &logits);
}
static rlx_node x_mse(rlx_graph *g, const rlx_node *p) { return rlx_mse_loss(g, p[0], p[1]); }

/* ------------------------------------------------------------ the cases */

#define P1(nd, ...)     \
    1, {nd},            \
    {                   \
        {               \
            __VA_ARGS__ \
        }               \
    }
#define BOTH GC_BOTH
#define DEV GC_DEVICE
static const grad_case GRAD_CASES[] = {
    /* elementwise unary */
    {"neg", BOTH, P1(2, 3, 4), {ANY}, u_neg},
    {"abs", BOTH, P1(2, 33, 40), {AWAY0}, u_abs},
    {"exp", BOTH, P1(2, 33, 40), {ANY}, u_exp},
    {"log", BOTH, P1(2, 33, 40), {POS}, u_log},
    {"sqrt", BOTH, P1(2, 33, 40), {POS}, u_sqrt},
    {"rsqrt", BOTH, P1(2, 33, 40), {POS}, u_rsqrt},
    {"reciprocal", BOTH, P1(2, 33, 40), {POS}, u_reciprocal},
    {"tanh", BOTH, P1(2, 33, 40), {ANY}, u_tanh},
    {"sigmoid", BOTH, P1(2, 33, 40), {ANY}, u_sigmoid},
    {"relu", BOTH, P1(2, 33, 40), {AWAY0}, u_relu},
    {"gelu", BOTH, P1(2, 33, 40), {ANY}, u_gelu},
    {"gelu_tanh", BOTH, P1(2, 33, 40), {ANY}, u_gelu_tanh},
    {"silu", BOTH, P1(2, 33, 40), {ANY}, u_silu},
    {"erf", BOTH, P1(2, 33, 40), {ANY}, u_erf},
    {"sin", BOTH, P1(2, 33, 40), {ANY}, u_sin},
    {"cos", BOTH, P1(2, 33, 40), {ANY}, u_cos},
    {"floor", BOTH, P1(2, 3, 4), {FRAC}, u_floor},
    {"ceil", BOTH, P1(2, 3, 4), {FRAC}, u_ceil},
    {"round", BOTH, P1(2, 3, 4), {FRAC}, u_round},
    {"sign", BOTH, P1(2, 3, 4), {AWAY0}, u_sign},
    /* elementwise binary, broadcasting */
    {"add broadcast", BOTH, 2, {2, 1}, {{3, 4}, {4}}, {ANY, ANY}, b_add},
    {"add broadcast large", DEV, 2, {3, 2}, {{16, 64, 96}, {64, 1}}, {ANY, ANY}, b_add},
    {"sub broadcast", BOTH, 2, {2, 2}, {{3, 1}, {1, 4}}, {ANY, ANY}, b_sub},
    {"mul broadcast", BOTH, 2, {3, 2}, {{2, 3, 4}, {3, 1}}, {ANY, ANY}, b_mul},
    {"mul broadcast large", DEV, 2, {3, 1}, {{8, 100, 256}, {256}}, {ANY, ANY}, b_mul},
    {"div", BOTH, 2, {2, 2}, {{30, 40}, {30, 40}}, {ANY, POS}, b_div},
    {"div broadcast", BOTH, 2, {3, 3}, {{5, 1, 40}, {1, 30, 1}}, {ANY, POS}, b_div},
    {"pow", BOTH, 2, {2, 2}, {{30, 40}, {1, 40}}, {POS, ANY}, b_pow},
    {"max", BOTH, 2, {2, 2}, {{30, 40}, {30, 40}}, {ANY, ANY}, b_max},
    {"min broadcast", BOTH, 2, {2, 1}, {{30, 40}, {40}}, {ANY, ANY}, b_min},
    {"fmod", BOTH, 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, POS}, b_fmod},
    {"mod", BOTH, 2, {2, 2}, {{3, 4}, {3, 4}}, {ANY, POS}, b_mod},
    {"x * x (operand twice)", BOTH, P1(2, 30, 40), {ANY}, b_square},
    {"where", BOTH, 2, {2, 1}, {{3, 4}, {4}}, {ANY, ANY}, e_where},
    {"clip", BOTH, P1(2, 40, 50), {ANY}, e_clip},
    {"cast bf16 and back", DEV, 2, {2, 2}, {{6, 7}, {6, 7}}, {ANY, ANY}, e_cast},
    {"shared value", BOTH, 2, {2, 2}, {{30, 40}, {30, 40}}, {ANY, ANY}, e_chain},
    /* matmul */
    {"matmul", BOTH, 2, {2, 2}, {{3, 4}, {4, 5}}, {ANY, ANY}, m_nn},
    {"matmul large", DEV, 2, {2, 2}, {{96, 160}, {160, 72}}, {ANY, ANY}, m_nn},
    {"matmul a^T", BOTH, 2, {2, 2}, {{4, 3}, {4, 5}}, {ANY, ANY}, m_tn},
    {"matmul a^T large", DEV, 2, {2, 2}, {{64, 48}, {64, 80}}, {ANY, ANY}, m_tn},
    {"matmul b^T", BOTH, 2, {3, 2}, {{2, 3, 4}, {5, 4}}, {ANY, ANY}, m_nt},
    {"matmul b^T large", DEV, 2, {3, 2}, {{2, 33, 64}, {80, 64}}, {ANY, ANY}, m_nt},
    {"matmul a^T b^T", BOTH, 2, {3, 3}, {{2, 4, 3}, {2, 5, 4}}, {ANY, ANY}, m_tt},
    {"matmul a^T b^T large", DEV, 2, {3, 3}, {{2, 40, 31}, {2, 50, 40}}, {ANY, ANY}, m_tt},
    {"matmul batch broadcast", BOTH, 2, {3, 2}, {{2, 3, 4}, {4, 5}}, {ANY, ANY}, m_nn},
    {"matmul batch broadcast large", DEV, 2, {3, 2}, {{4, 37, 64}, {64, 48}}, {ANY, ANY}, m_nn},
    {"matmul batch 4-d", BOTH, 2, {4, 3}, {{2, 1, 3, 4}, {3, 4, 2}}, {ANY, ANY}, m_nn},
    {"matmul batch 4-d large", DEV, 2, {4, 3}, {{2, 1, 17, 32}, {3, 32, 24}}, {ANY, ANY}, m_nn},
    {"matmul vector", BOTH, 2, {2, 1}, {{40, 64}, {64}}, {ANY, ANY}, m_nn},
    /* reductions */
    {"reduce_sum axes 0,2", BOTH, P1(3, 2, 3, 4), {ANY}, r_sum02},
    {"reduce_sum axes 0,2 large", DEV, P1(3, 8, 30, 40), {ANY}, r_sum02},
    {"reduce_sum keepdims", BOTH, P1(3, 2, 3, 4), {ANY}, r_sum1k},
    {"reduce_sum keepdims large", DEV, P1(3, 8, 30, 40), {ANY}, r_sum1k},
    {"reduce_mean", BOTH, P1(3, 2, 3, 4), {ANY}, r_mean2},
    {"reduce_mean large", DEV, P1(3, 8, 30, 40), {ANY}, r_mean2},
    {"reduce_mean all", DEV, P1(2, 300, 70), {ANY}, r_meanall},
    {"reduce_max", BOTH, P1(3, 2, 30, 4), {DISTINCT}, r_max1},
    {"reduce_min", BOTH, P1(3, 20, 3, 4), {DISTINCT}, r_min0},
    {"reduce_prod", BOTH, P1(3, 2, 3, 4), {POS}, r_prod2},
    /* softmax, norms */
    {"softmax axis 1", BOTH, P1(3, 2, 5, 3), {ANY}, n_softmax},
    {"softmax last large", DEV, P1(2, 64, 1000), {ANY}, n_softmax_last},
    {"log_softmax", BOTH, P1(2, 3, 6), {ANY}, n_log_softmax},
    {"log_softmax large", DEV, P1(3, 4, 16, 3000), {ANY}, n_log_softmax},
    {"layer_norm", BOTH, 3, {2, 1, 1}, {{3, 6}, {6}, {6}}, {ANY, ANY, ANY}, n_layer_norm},
    {"layer_norm large", DEV, 3, {3, 1, 1}, {{4, 64, 384}, {384}, {384}}, {ANY, ANY, ANY}, n_layer_norm},
    {"layer_norm plain", BOTH, P1(3, 2, 2, 5), {ANY}, n_layer_norm_plain},
    {"rms_norm", BOTH, 2, {2, 1}, {{3, 6}, {6}}, {ANY, ANY}, n_rms_norm},
    {"rms_norm large", DEV, 2, {3, 1}, {{4, 64, 512}, {512}}, {ANY, ANY}, n_rms_norm},
    {"batch_norm",
     BOTH,
     5,
     {4, 1, 1, 1, 1},
     {{2, 3, 2, 2}, {3}, {3}, {3}, {3}},
     {ANY, ANY, ANY, ANY, POS},
     n_batch_norm},
    /* data movement */
    {"reshape", BOTH, P1(3, 2, 3, 4), {ANY}, s_reshape},
    {"transpose", BOTH, P1(3, 2, 3, 4), {ANY}, s_transpose},
    {"transpose heads", DEV, P1(4, 2, 64, 8, 32), {ANY}, s_transpose4},
    {"slice", BOTH, P1(3, 4, 2, 5), {ANY}, s_slice},
    {"slice negative starts", BOTH, P1(3, 3, 8, 10), {ANY}, s_slice_neg},
    {"slice steps -2 and 3", BOTH, P1(3, 5, 2, 8), {ANY}, s_slice_strided},
    {"slice reversed", BOTH, P1(2, 3, 4), {ANY}, s_slice_reversed},
    {"concat", BOTH, 2, {2, 2}, {{3, 2}, {3, 4}}, {ANY, ANY}, s_concat},
    {"concat 3 last axis", BOTH, 3, {3, 3, 3}, {{4, 8, 32}, {4, 8, 16}, {4, 8, 48}}, {ANY, ANY, ANY}, s_concat3},
    {"split", BOTH, P1(2, 4, 6), {ANY}, s_split},
    {"gather axis 0", BOTH, P1(2, 5, 3), {ANY}, s_gather0},
    {"gather axis 1", BOTH, P1(3, 2, 3, 2), {ANY}, s_gather1},
    {"gather embedding rows repeated", DEV, P1(2, 50, 96), {ANY}, s_embedding},
    {"scatter_add (gather's gradient)", BOTH, P1(3, 2, 4, 3), {ANY}, s_scatter_add},
    {"expand", BOTH, P1(3, 2, 1, 4), {ANY}, s_expand},
    {"expand large", DEV, P1(4, 4, 1, 16, 1), {ANY}, s_expand_big},
    {"pad constant", BOTH, P1(2, 3, 4), {ANY}, s_pad},
    {"pad constant large", DEV, P1(4, 2, 8, 30, 30), {ANY}, s_pad4},
    {"pad reflect", BOTH, P1(2, 3, 5), {ANY}, s_pad_reflect},
    {"pad reflect 3-d", BOTH, P1(3, 2, 3, 4), {ANY}, s_pad_reflect3},
    {"pad reflect large", DEV, P1(4, 2, 8, 30, 30), {ANY}, s_pad_reflect4},
    {"pad edge", BOTH, P1(2, 3, 4), {ANY}, s_pad_edge},
    {"pad edge, an axis of 1", BOTH, P1(3, 2, 1, 3), {ANY}, s_pad_edge3},
    {"pad edge large", DEV, P1(4, 2, 8, 30, 30), {ANY}, s_pad_edge4},
    /* attention family */
    {"rope", BOTH, P1(4, 1, 2, 3, 8), {ANY}, a_rope},
    {"rope large", DEV, P1(4, 2, 4, 64, 64), {ANY}, a_rope},
    {"rope interleaved", BOTH, P1(3, 2, 4, 6), {ANY}, a_rope_il},
    {"attention", BOTH, 3, {4, 4, 4}, {{1, 2, 3, 4}, {1, 2, 5, 4}, {1, 2, 5, 3}}, {ANY, ANY, ANY}, a_attn},
    {"attention causal gqa",
     BOTH,
     3,
     {4, 4, 4},
     {{2, 4, 3, 4}, {2, 2, 4, 4}, {2, 2, 4, 2}},
     {ANY, ANY, ANY},
     a_attn_causal},
    {"attention causal, fewer keys than queries (an empty first row)",
     BOTH,
     3,
     {4, 4, 4},
     {{1, 2, 4, 4}, {1, 2, 3, 4}, {1, 2, 3, 4}},
     {ANY, ANY, ANY},
     a_attn_causal},
    {"attention causal gqa large",
     DEV,
     3,
     {4, 4, 4},
     {{2, 8, 64, 64}, {2, 4, 64, 64}, {2, 4, 64, 64}},
     {ANY, ANY, ANY},
     a_attn_causal_default},
    {"attention long keys",
     DEV,
     3,
     {4, 4, 4},
     {{1, 4, 16, 32}, {1, 4, 200, 32}, {1, 4, 200, 32}},
     {ANY, ANY, ANY},
     a_attn},
    {"attention bool mask",
     BOTH,
     3,
     {4, 4, 4},
     {{1, 2, 3, 2}, {1, 1, 4, 2}, {1, 1, 4, 3}},
     {ANY, ANY, ANY},
     a_attn_bool},
    {"attention, q also as k", BOTH, 2, {4, 4}, {{1, 2, 4, 4}, {1, 2, 4, 3}}, {ANY, ANY}, a_attn_self},
    /* head dims the tensor-core gradient kernel takes (32, 64, 128), sizes
     * that are not multiples of its tiles */
    {"attention d128 causal gqa",
     DEV,
     3,
     {4, 4, 4},
     {{2, 8, 100, 128}, {2, 2, 100, 128}, {2, 2, 100, 128}},
     {ANY, ANY, ANY},
     a_attn_causal_default},
    {"attention d32 causal, fewer keys than queries",
     DEV,
     3,
     {4, 4, 4},
     {{1, 2, 70, 32}, {1, 2, 40, 32}, {1, 2, 40, 32}},
     {ANY, ANY, ANY},
     a_attn_causal},
    {"attention d64 padding mask",
     DEV,
     3,
     {4, 4, 4},
     {{2, 4, 80, 64}, {2, 4, 80, 64}, {2, 4, 80, 64}},
     {ANY, ANY, ANY},
     a_attn_pad},
    {"attention d64 causal additive mask",
     DEV,
     3,
     {4, 4, 4},
     {{1, 4, 96, 64}, {1, 2, 96, 64}, {1, 2, 96, 64}},
     {ANY, ANY, ANY},
     a_attn_bias},
    {"attention float mask",
     BOTH,
     4,
     {4, 4, 4, 4},
     {{1, 2, 3, 4}, {1, 2, 4, 4}, {1, 2, 4, 4}, {1, 1, 3, 4}},
     {ANY, ANY, ANY, ANY},
     a_attn_float},
    /* convolution, pooling */
    {"conv 3x3 pad 1 bias", BOTH, 3, {4, 4, 1}, {{2, 3, 5, 4}, {4, 3, 3, 3}, {4}}, {ANY, ANY, ANY}, c_conv},
    {"conv 3x3 large", DEV, 3, {4, 4, 1}, {{4, 16, 16, 16}, {32, 16, 3, 3}, {32}}, {ANY, ANY, ANY}, c_conv},
    {"conv stride 2", BOTH, 2, {4, 4}, {{1, 2, 6, 5}, {3, 2, 3, 2}}, {ANY, ANY}, c_conv_s2},
    {"conv 1-d dilated strided", BOTH, 3, {3, 3, 1}, {{2, 2, 9}, {3, 2, 3}, {3}}, {ANY, ANY, ANY}, c_conv_dil},
    {"conv groups 2 stride 2 bias", BOTH, 3, {4, 4, 1}, {{2, 4, 7, 6}, {6, 2, 3, 3}, {6}}, {ANY, ANY, ANY}, c_conv_g2},
    {"conv groups 2 large", DEV, 3, {4, 4, 1}, {{4, 32, 16, 16}, {64, 16, 3, 3}, {64}}, {ANY, ANY, ANY}, c_conv_g2},
    {"conv depthwise x2 dilated", BOTH, 2, {4, 4}, {{2, 3, 5, 5}, {6, 1, 3, 3}}, {ANY, ANY}, c_conv_dw},
    {"conv depthwise large", DEV, 2, {4, 4}, {{4, 32, 24, 24}, {32, 1, 3, 3}}, {ANY, ANY}, c_conv_dw},
    {"conv 1-d groups 3 dilated strided",
     BOTH,
     3,
     {3, 3, 1},
     {{2, 6, 11}, {3, 2, 3}, {3}},
     {ANY, ANY, ANY},
     c_conv1d_g3},
    {"conv pads past the kernel", BOTH, 2, {4, 4}, {{1, 2, 4, 5}, {3, 2, 1, 2}}, {ANY, ANY}, c_conv_wide_pad},
    {"max_pool 2x2", BOTH, P1(4, 2, 3, 4, 6), {DISTINCT}, p_max2},
    {"max_pool 3x3 stride 2 pad 1", BOTH, P1(4, 2, 2, 7, 6), {DISTINCT}, p_max3s2p1},
    {"max_pool 3x3 stride 2 pad 1 large", DEV, P1(4, 4, 32, 32, 32), {DISTINCT}, p_max3s2p1},
    {"max_pool dilated ceil", BOTH, P1(4, 1, 2, 7, 6), {DISTINCT}, p_max_dil_ceil},
    {"max_pool 1-d dilated ceil", BOTH, P1(3, 2, 3, 9), {DISTINCT}, p_max1d},
    {"avg_pool 3x3 stride 2 pad 1", BOTH, P1(4, 2, 2, 7, 6), {ANY}, p_avg3s2p1},
    {"avg_pool 3x3 stride 2 pad 1 large", DEV, P1(4, 4, 32, 32, 32), {ANY}, p_avg3s2p1},
    {"avg_pool counting pads", BOTH, P1(4, 2, 2, 7, 6), {ANY}, p_avg3s2p1_incl},
    {"avg_pool ceil", BOTH, P1(4, 1, 2, 6, 5), {ANY}, p_avg_ceil},
    {"avg_pool ceil counting pads", BOTH, P1(4, 1, 2, 6, 5), {ANY}, p_avg_ceil_incl},
    {"avg_pool 1-d dilated", BOTH, P1(3, 2, 2, 8), {ANY}, p_avg1d},
    {"global_avg_pool", BOTH, P1(4, 2, 3, 2, 3), {ANY}, c_gap},
    {"global_avg_pool large", DEV, P1(4, 4, 64, 14, 14), {ANY}, c_gap},
    /* patterns the optimizer fuses, fused ops, losses */
    {"matmul + bias + gelu", BOTH, 3, {2, 2, 1}, {{3, 4}, {4, 5}, {5}}, {ANY, ANY, ANY}, f_mlp},
    {"matmul + bias + gelu large", DEV, 3, {2, 2, 1}, {{64, 128}, {128, 96}, {96}}, {ANY, ANY, ANY}, f_mlp},
    {"add + rms_norm", BOTH, 3, {2, 2, 1}, {{3, 6}, {3, 6}, {6}}, {ANY, ANY, ANY}, f_add_rms},
    {"add + rms_norm large", DEV, 3, {2, 2, 1}, {{32, 256}, {32, 256}, {256}}, {ANY, ANY, ANY}, f_add_rms},
    {"swiglu", BOTH, 3, {2, 2, 2}, {{3, 4}, {4, 5}, {4, 5}}, {ANY, ANY, ANY}, f_swiglu},
    {"swiglu large", DEV, 3, {2, 2, 2}, {{32, 64}, {64, 96}, {64, 96}}, {ANY, ANY, ANY}, f_swiglu},
    {"fused matmul_bias_act", BOTH, 3, {2, 2, 1}, {{3, 4}, {4, 5}, {5}}, {ANY, ANY, ANY}, f_matmul_bias_gelu},
    {"fused add_rms_norm", BOTH, 3, {2, 2, 1}, {{3, 6}, {3, 6}, {6}}, {ANY, ANY, ANY}, f_add_rms_norm},
    {"cross_entropy, smoothing, ignored row", BOTH, P1(3, 2, 3, 4), {ANY}, x_cross_entropy},
    {"cross_entropy 300 classes", BOTH, P1(3, 3, 4, 300), {ANY}, x_cross_entropy},
    {"cross_entropy of a product", BOTH, 2, {3, 2}, {{3, 4, 16}, {16, 300}}, {ANY, ANY}, x_cross_entropy_mm},
    {"cross_entropy of a product, wide rows", DEV, 2, {3, 2}, {{4, 8, 64}, {64, 5000}}, {ANY, ANY}, x_cross_entropy_mm},
    {"mse_loss broadcast", BOTH, 2, {2, 1}, {{16, 24}, {24}}, {ANY, ANY}, x_mse},
};
#undef P1
#undef BOTH
#undef DEV

#endif
