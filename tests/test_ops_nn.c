/* Network ops: attention (causal, bool and float masks, grouped-query
 * heads, per-sequence positions), rotary embedding (both layouts, by theta
 * and by tables), convolution 1-d/2-d (stride,
 * padding, dilation, groups, bias; depthwise with channel multipliers and
 * fused activations), max/avg pooling (count_include_pad,
 * ceil_mode, dilation), global average pooling; against the float64
 * reference on random inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "support/ref.h"

/* ------------------------------------------------------------ attention */

enum { MASK_NONE, MASK_BOOL, MASK_FLOAT };

typedef struct attn_case {
    int64_t B, H, Hkv, S, T, D, Dv;
    int causal, mask;
    int64_t mask_dims[4]; /* rank 4 mask shape (broadcastable) */
    double scale;
} attn_case;

static int run_attention(const attn_case *c, rlx_dtype dt)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *q = rt_rand(RT_SHAPE(c->B, c->H, c->S, c->D), -1, 1);
    rt_tensor *k = rt_rand(RT_SHAPE(c->B, c->Hkv, c->T, c->D), -1, 1);
    rt_tensor *v = rt_rand(RT_SHAPE(c->B, c->Hkv, c->T, c->Dv), -1, 1);
    rt_tensor *m = NULL;
    rlx_node mn = -1;
    if (c->mask == MASK_BOOL) {
        m = rt_randb(4, c->mask_dims, 0.7);
        /* keep key 0 everywhere so no row is fully masked */
        int64_t idx[4];
        for (int64_t i = 0; i < m->n; i++) {
            rt_unravel(i, 4, m->dims, idx);
            if (idx[3] == 0)
                m->d[i] = 1;
        }
        mn = rt_input(rg, RLX_BOOL, m);
    } else if (c->mask == MASK_FLOAT) {
        m = rt_rand(4, c->mask_dims, -3, 1);
        mn = rt_input(rg, dt, m);
    }
    rlx_node y =
        rlx_attention(rg->g, rt_input(rg, dt, q), rt_input(rg, dt, k), rt_input(rg, dt, v), mn, c->causal, c->scale);
    rt_tensor *got = rt_run1(rg, y);
    rt_tensor *want = rt_ref_attention(q, k, v, m, c->mask == MASK_BOOL, c->causal, c->scale);
    char what[256];
    snprintf(what, sizeof what,
             "attention %s B%lld H%lld Hkv%lld S%lld T%lld D%lld Dv%lld causal %d mask %s%s scale %g",
             rlx_dtype_name(dt), (long long)c->B, (long long)c->H, (long long)c->Hkv, (long long)c->S, (long long)c->T,
             (long long)c->D, (long long)c->Dv, c->causal,
             c->mask == MASK_NONE   ? "none"
             : c->mask == MASK_BOOL ? "bool"
                                    : "float",
             m ? rt_shape_str(4, c->mask_dims) : "", c->scale);
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(q);
    rt_free(k);
    rt_free(v);
    rt_free(m);
    rt_graph_free(rg);
    return !ok;
}

static const attn_case k_attn[] = {
    /* B H Hkv S T D Dv causal mask mask_dims scale */
    {1, 1, 1, 1, 1, 4, 4, 0, MASK_NONE, {0}, 0},
    {2, 4, 4, 5, 5, 8, 8, 0, MASK_NONE, {0}, 0},
    {2, 4, 4, 5, 5, 8, 8, 1, MASK_NONE, {0}, 0},
    {1, 4, 2, 6, 6, 8, 8, 1, MASK_NONE, {0}, 0},           /* grouped-query */
    {2, 6, 1, 4, 4, 16, 16, 0, MASK_NONE, {0}, 0},         /* multi-query */
    {1, 2, 2, 3, 7, 8, 8, 1, MASK_NONE, {0}, 0},           /* S < T: cache of 4 earlier keys */
    {1, 4, 2, 1, 9, 8, 8, 1, MASK_NONE, {0}, 0},           /* one-token decode */
    {2, 2, 2, 4, 6, 8, 5, 0, MASK_NONE, {0}, 0},           /* Dv != D */
    {1, 2, 1, 5, 5, 8, 8, 0, MASK_NONE, {0}, 0.3},         /* explicit scale */
    {2, 2, 2, 4, 6, 8, 8, 0, MASK_BOOL, {2, 1, 1, 6}, 0},  /* padding mask */
    {2, 4, 2, 4, 4, 8, 8, 1, MASK_BOOL, {2, 1, 1, 4}, 0},  /* padding + causal + GQA */
    {1, 2, 2, 3, 5, 4, 4, 0, MASK_BOOL, {1, 2, 3, 5}, 0},  /* full bool mask */
    {1, 2, 2, 4, 4, 8, 8, 0, MASK_FLOAT, {1, 1, 4, 4}, 0}, /* additive bias */
    {2, 3, 3, 3, 6, 8, 8, 1, MASK_FLOAT, {2, 3, 3, 6}, 0}, /* full float mask + causal */
    {1, 2, 2, 2, 3, 8, 8, 0, MASK_FLOAT, {1, 1, 1, 3}, 0}, /* per-key bias */
    {1, 2, 1, 64, 64, 32, 32, 1, MASK_NONE, {0}, 0},       /* a longer sequence */
    {1, 1, 1, 33, 47, 16, 24, 0, MASK_NONE, {0}, 0},       /* odd lengths */
};

static void test_attention(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof k_attn / sizeof k_attn[0]; i++)
        bad += run_attention(&k_attn[i], RLX_F32);
    assert_int_equal(bad, 0);
}

static void test_attention_half(void **state)
{
    (void)state;
    int bad = 0;
    const rlx_dtype dts[] = {RLX_F16, RLX_BF16};
    for (int d = 0; d < 2; d++) {
        bad += run_attention(&k_attn[3], dts[d]);
        bad += run_attention(&k_attn[10], dts[d]);
        bad += run_attention(&k_attn[12], dts[d]);
    }
    assert_int_equal(bad, 0);
}

/* Causal attention at per-sequence positions (rlx_attention_at) against the
 * reference with the equivalent bool mask: key t visible to row s of
 * sequence b when t <= pos[b] + s. */
static int run_attention_at(int64_t B, int64_t H, int64_t Hkv, int64_t S, int64_t T, int64_t D, rlx_dtype dt,
                            rlx_dtype pos_dt, const int64_t *pos)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *q = rt_rand(RT_SHAPE(B, H, S, D), -1, 1);
    rt_tensor *k = rt_rand(RT_SHAPE(B, Hkv, T, D), -1, 1);
    rt_tensor *v = rt_rand(RT_SHAPE(B, Hkv, T, D), -1, 1);
    rt_tensor *p = rt_new(RT_SHAPE(B));
    rt_tensor *m = rt_new(RT_SHAPE(B, 1, S, T));
    for (int64_t b = 0; b < B; b++) {
        p->d[b] = (double)pos[b];
        for (int64_t s = 0; s < S; s++)
            for (int64_t t = 0; t < T; t++)
                m->d[(b * S + s) * T + t] = t <= pos[b] + s;
    }
    rlx_node y = rlx_attention_at(rg->g, rt_input(rg, dt, q), rt_input(rg, dt, k), rt_input(rg, dt, v),
                                  rt_input(rg, pos_dt, p), 0.0);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_attention(q, k, v, m, 1, 0, 0.0);
    char what[160];
    snprintf(what, sizeof what, "attention_at %s B%lld H%lld Hkv%lld S%lld T%lld pos[0] %lld (%s)", rlx_dtype_name(dt),
             (long long)B, (long long)H, (long long)Hkv, (long long)S, (long long)T, (long long)pos[0],
             rlx_dtype_name(pos_dt));
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(q);
    rt_free(k);
    rt_free(v);
    rt_free(p);
    rt_free(m);
    rt_graph_free(rg);
    return !ok;
}

static void test_attention_at(void **state)
{
    (void)state;
    int bad = 0;
    /* decode (S = 1) and prefill chunks, sequences at different positions,
     * one past the cache (every key visible) */
    bad += run_attention_at(3, 4, 2, 1, 40, 16, RLX_F32, RLX_I64, (int64_t[]){0, 17, 39});
    bad += run_attention_at(2, 2, 1, 5, 37, 8, RLX_F32, RLX_I32, (int64_t[]){0, 9});
    bad += run_attention_at(2, 4, 4, 8, 24, 32, RLX_F32, RLX_I64, (int64_t[]){16, 24});
    bad += run_attention_at(1, 2, 2, 3, 70, 8, RLX_F32, RLX_I64, (int64_t[]){rt_randint(0, 67)});
    bad += run_attention_at(2, 4, 2, 1, 33, 16, RLX_BF16, RLX_I64, (int64_t[]){5, 32});
    bad += run_attention_at(2, 4, 2, 4, 33, 16, RLX_F16, RLX_I64, (int64_t[]){0, 20});
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ rope */

/* RoPE by tables: x [B, H, S, D] with cos/sin [Bt, 1, S, D/2] of random
 * angles, against the rotation in double. */
static void test_rope_tables(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t shapes[][4] = {{2, 3, 4, 8}, {1, 2, 1, 16}, {3, 1, 5, 4}, {2, 4, 1, 128}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        for (int shared = 0; shared < 2; shared++)
            for (int il = 0; il < 2; il++) {
                const int64_t *d = shapes[c];
                int64_t B = d[0], H = d[1], S = d[2], D = d[3], half = D / 2, Bt = shared ? 1 : B;
                rt_tensor *x = rt_rand(RT_SHAPE(B, H, S, D), -2, 2);
                rt_tensor *cs = rt_new(RT_SHAPE(Bt, 1, S, half)), *sn = rt_new(RT_SHAPE(Bt, 1, S, half));
                for (int64_t i = 0; i < cs->n; i++) {
                    double a = rt_uniform(-40, 40);
                    cs->d[i] = (double)(float)cos(a);
                    sn->d[i] = (double)(float)sin(a);
                }
                rt_tensor *want = rt_new(x->ndim, x->dims);
                for (int64_t row = 0; row < B * H * S; row++) {
                    int64_t b = row / (H * S), s = row % S, to = ((shared ? 0 : b) * S + s) * half;
                    for (int64_t i = 0; i < half; i++) {
                        int64_t ia = row * D + (il ? 2 * i : i), ib = ia + (il ? 1 : half);
                        double c = cs->d[to + i], si = sn->d[to + i];
                        want->d[ia] = x->d[ia] * c - x->d[ib] * si;
                        want->d[ib] = x->d[ib] * c + x->d[ia] * si;
                    }
                }
                rt_graph *rg = rt_graph_new();
                rlx_node y = rlx_rope_tables(rg->g, rt_input(rg, RLX_F32, x), rt_input(rg, RLX_F32, cs),
                                             rt_input(rg, RLX_F32, sn), il);
                rt_tensor *got = rt_run1(rg, y);
                char what[160];
                snprintf(what, sizeof what, "rope_tables %s tables [%lld, 1, %lld, %lld] %s",
                         rt_shape_str(x->ndim, x->dims), (long long)Bt, (long long)S, (long long)half,
                         il ? "interleaved" : "halves");
                bad += !rt_check(what, got, want, RLX_F32);
                rt_free(got);
                rt_free(want);
                rt_free(x);
                rt_free(cs);
                rt_free(sn);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

static void test_rope(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t dims[4];
    } shapes[] = {
        {4, {1, 1, 4, 8}}, {4, {2, 3, 5, 16}}, {2, {7, 2}}, {3, {2, 1, 6}}, {4, {1, 2, 9, 64}}, {3, {2, 0, 8}},
    };
    const double thetas[] = {10000.0, 500000.0, 10.0};
    const int64_t offsets[] = {0, 3, 37};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 3; t++)
            for (int o = 0; o < 3; o++)
                for (int il = 0; il < 2; il++) {
                    rt_graph *rg = rt_graph_new();
                    rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].dims, -2, 2);
                    rlx_node y = rlx_rope(rg->g, rt_input(rg, RLX_F32, x), thetas[t], offsets[o], il);
                    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_rope(x, thetas[t], offsets[o], il);
                    char what[160];
                    snprintf(what, sizeof what, "rope %s theta %g offset %lld %s", rt_shape_str(x->ndim, x->dims),
                             thetas[t], (long long)offsets[o], il ? "interleaved" : "halves");
                    bad += !rt_check(what, got, want, RLX_F32);
                    rt_free(got);
                    rt_free(want);
                    rt_free(x);
                    rt_graph_free(rg);
                }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ conv */

typedef struct conv_case {
    int sp;
    int64_t N, C, in[2], O, k[2];
    rlx_conv_params p;
    int bias;
} conv_case;

static rlx_conv_params cp(int64_t s0, int64_t s1, int64_t d0, int64_t d1, int64_t p0, int64_t p1, int64_t p2,
                          int64_t p3, int64_t g)
{
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.stride[0] = s0;
    p.stride[1] = s1;
    p.dilation[0] = d0;
    p.dilation[1] = d1;
    p.pads[0] = p0;
    p.pads[1] = p1;
    p.pads[2] = p2;
    p.pads[3] = p3;
    p.groups = g;
    return p;
}

/* no_layout: NCHW kernels only (2-D f32 convs otherwise run channels-last
 * through oneDNN where it is installed). */
static int run_conv_dt(const conv_case *c, rlx_dtype dt, int no_layout)
{
    rt_graph *rg = rt_graph_new();
    rg->opts.no_layout = no_layout;
    int64_t xd[4] = {c->N, c->C, c->in[0], c->in[1]};
    int64_t wd[4] = {c->O, c->C / c->p.groups, c->k[0], c->k[1]};
    rt_tensor *x = rt_rand(2 + c->sp, xd, -1, 1);
    rt_tensor *w = rt_rand(2 + c->sp, wd, -1, 1);
    rt_tensor *b = c->bias ? rt_rand(1, &c->O, -1, 1) : NULL;
    rlx_node bn = b ? rt_param(rg, dt, b) : -1;
    rlx_node y = rlx_conv(rg->g, rt_input(rg, dt, x), rt_param(rg, dt, w), bn, &c->p);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_conv(x, w, b, &c->p);
    char what[256];
    snprintf(what, sizeof what,
             "conv%dd %s%s x %s w %s stride %lld,%lld dil %lld,%lld pads %lld,%lld,%lld,%lld groups %lld bias %d",
             c->sp, rlx_dtype_name(dt), no_layout ? " nchw" : "", rt_shape_str(x->ndim, x->dims),
             rt_shape_str(w->ndim, w->dims), (long long)c->p.stride[0], (long long)c->p.stride[1],
             (long long)c->p.dilation[0], (long long)c->p.dilation[1], (long long)c->p.pads[0], (long long)c->p.pads[1],
             (long long)c->p.pads[2], (long long)c->p.pads[3], (long long)c->p.groups, c->bias);
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_free(w);
    rt_free(b);
    rt_graph_free(rg);
    return !ok;
}

/* f32, both ways. */
static int run_conv(const conv_case *c) { return run_conv_dt(c, RLX_F32, 0) + run_conv_dt(c, RLX_F32, 1); }

static void test_conv1d(void **state)
{
    (void)state;
    int bad = 0;
    /* 1-d: pads are {begin, end} in p0, p1 */
    const conv_case cases[] = {
        {1, 2, 3, {10, 0}, 4, {3, 0}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},
        {1, 2, 3, {10, 0}, 4, {3, 0}, cp(2, 1, 1, 1, 1, 1, 0, 0, 1), 0},
        {1, 1, 3, {11, 0}, 5, {3, 0}, cp(1, 1, 2, 1, 2, 2, 0, 0, 1), 1}, /* dilation */
        {1, 2, 3, {9, 0}, 3, {3, 0}, cp(1, 1, 1, 1, 1, 1, 0, 0, 3), 1},  /* depthwise */
        {1, 1, 4, {8, 0}, 6, {3, 0}, cp(1, 1, 1, 1, 0, 2, 0, 0, 2), 1},  /* groups 2, pad at the end only */
        {1, 1, 5, {7, 0}, 2, {1, 0}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 0},  /* 1-wide kernel */
        {1, 1, 2, {5, 0}, 3, {5, 0}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},  /* kernel = input: one output */
        {1, 3, 2, {16, 0}, 4, {4, 0}, cp(3, 1, 1, 1, 2, 1, 0, 0, 1), 1},
        /* one input channel: one GEMM (Silero's STFT, 64-tap windows at stride 16) or,
         * few outputs and taps, the direct kernel */
        {1, 1, 1, {300, 0}, 24, {64, 0}, cp(16, 1, 1, 1, 0, 0, 0, 0, 1), 0},
        {1, 2, 1, {40, 0}, 4, {5, 0}, cp(2, 1, 1, 1, 2, 2, 0, 0, 1), 1},
        /* one or two time steps: products narrower than 8 columns */
        {1, 1, 64, {1, 0}, 64, {1, 0}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},
        {1, 1, 32, {2, 0}, 48, {1, 0}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad += run_conv(&cases[i]);
    assert_int_equal(bad, 0);
}

static int run_conv_act(const conv_case *c, int act, int no_layout)
{
    rt_graph *rg = rt_graph_new();
    rg->opts.no_layout = no_layout;
    int64_t xd[4] = {c->N, c->C, c->in[0], c->in[1]};
    int64_t wd[4] = {c->O, c->C / c->p.groups, c->k[0], c->k[1]};
    rt_tensor *x = rt_rand(2 + c->sp, xd, -1, 1), *w = rt_rand(2 + c->sp, wd, -1, 1);
    rt_tensor *b = rt_rand(1, &c->O, -1, 1);
    rlx_node y = rlx_conv(rg->g, rt_input(rg, RLX_F32, x), rt_param(rg, RLX_F32, w), rt_param(rg, RLX_F32, b), &c->p);
    y = act == 1 ? rlx_relu(rg->g, y) : act == 2 ? rlx_silu(rg->g, y) : rlx_gelu(rg->g, y);
    rt_tensor *conv = rt_ref_conv(x, w, b, &c->p);
    rt_tensor *got = rt_run1(rg, y), *want = rt_map(conv, act == 1 ? rt_f_relu : act == 2 ? rt_f_silu : rt_f_gelu);
    char what[128];
    snprintf(what, sizeof what, "depthwise conv%dd %s + %s", c->sp, rt_shape_str(x->ndim, x->dims),
             act == 1   ? "relu"
             : act == 2 ? "silu"
                        : "gelu");
    int ok = rt_check(what, got, want, RLX_F32);
    rt_free(got);
    rt_free(want);
    rt_free(conv);
    rt_free(x);
    rt_free(w);
    rt_free(b);
    rt_graph_free(rg);
    return !ok;
}

/* conv + bias + activation (fused into the conv's epilogue) on regular and
 * grouped convs, channels-last and NCHW. */
static void test_conv_fused(void **state)
{
    (void)state;
    int bad = 0;
    const conv_case cases[] = {
        {2, 2, 8, {11, 9}, 16, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 1), 1},
        {2, 1, 16, {12, 12}, 24, {1, 1}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},
        {2, 1, 12, {10, 13}, 18, {3, 3}, cp(2, 2, 1, 1, 1, 1, 1, 0, 3), 1}, /* grouped, asymmetric pads */
        {2, 1, 8, {15, 15}, 8, {3, 5}, cp(1, 2, 2, 1, 2, 2, 2, 2, 2), 1},   /* dilation, groups 2 */
        {1, 2, 6, {30, 0}, 9, {3, 0}, cp(2, 1, 1, 1, 1, 0, 0, 0, 3), 1},    /* 1-d grouped */
        {2, 1, 3, {23, 23}, 16, {7, 7}, cp(2, 2, 1, 1, 3, 3, 3, 3, 1), 1},  /* a stem conv */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int act = 1; act <= 3; act++)
            bad += run_conv_act(&cases[i], act, 0) + run_conv_act(&cases[i], act, 1);
    assert_int_equal(bad, 0);
}

static void test_conv2d(void **state)
{
    (void)state;
    int bad = 0;
    /* 2-d: pads {h_begin, w_begin, h_end, w_end} */
    const conv_case cases[] = {
        {2, 1, 3, {8, 8}, 5, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 1), 1},
        {2, 2, 3, {9, 7}, 4, {3, 3}, cp(2, 2, 1, 1, 1, 1, 1, 1, 1), 1},
        {2, 1, 2, {10, 9}, 3, {3, 2}, cp(1, 2, 2, 1, 2, 0, 2, 1, 1), 0},  /* dilation, asymmetric */
        {2, 2, 4, {6, 6}, 6, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 2), 1},   /* groups 2 */
        {2, 1, 4, {7, 7}, 4, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 4), 1},   /* depthwise */
        {2, 2, 8, {5, 5}, 3, {1, 1}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},   /* 1x1 */
        {2, 1, 3, {8, 8}, 2, {2, 3}, cp(1, 2, 1, 1, 1, 0, 0, 2, 1), 1},   /* non-square, asymmetric pads */
        {2, 1, 2, {1, 1}, 3, {1, 1}, cp(1, 1, 1, 1, 0, 0, 0, 0, 1), 1},   /* 1x1 image */
        {2, 1, 3, {16, 16}, 8, {7, 7}, cp(2, 2, 1, 1, 3, 3, 3, 3, 1), 1}, /* a stem conv */
        {2, 1, 6, {5, 6}, 6, {3, 3}, cp(2, 1, 2, 2, 2, 2, 2, 2, 3), 0},   /* everything at once */
        {2, 1, 2, {3, 2}, 3, {3, 3}, cp(1, 3, 1, 1, 4, 4, 4, 4, 1), 1},   /* pads wider than the image */
        {2, 1, 2, {3, 1}, 3, {3, 3}, cp(1, 1, 1, 1, 1, 4, 1, 0, 1), 1},   /* columns all on the padding */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        bad += run_conv(&cases[i]);
    assert_int_equal(bad, 0);
}

/* A conv with constant weights, then per-channel steps that fusion folds
 * into its weights and bias: the ONNX importer's batch norm ((y - mean) *
 * a + b, operands [O, 1, 1]), and k - y, y / k, a one-element operand,
 * [1, O, 1, 1]; with a relu after (the fused epilogue) or not, grouped or
 * not, channels-last or NCHW, against the float64 reference. */
static int run_conv_affine(int variant, int64_t groups, int relu, int no_layout)
{
    const int64_t N = 2, C = 4, O = 8;
    rt_tensor *x = rt_rand(RT_SHAPE(N, C, 9, 7), -1, 1), *w = rt_rand(RT_SHAPE(O, C / groups, 3, 3), -1, 1);
    rt_tensor *b = rt_rand(RT_SHAPE(O), -1, 1), *k0 = rt_rand(RT_SHAPE(O, 1, 1), -1, 1);
    rt_tensor *k1 = rt_rand_away(RT_SHAPE(1, O, 1, 1), -2, 2, 0.25), *k2 = rt_rand(RT_SHAPE(O, 1, 1), -1, 1);
    rt_tensor *k3 = rt_rand(RT_SHAPE(1), -1, 1);
    rt_graph *rg = rt_graph_new();
    rg->opts.no_layout = no_layout;
    rlx_graph *g = rg->g;
    rlx_conv_params p = cp(1, 1, 1, 1, 1, 1, 1, 1, groups);
    rlx_node y = rlx_conv(g, rt_input(rg, RLX_F32, x), rt_const(rg, RLX_F32, w), rt_const(rg, RLX_F32, b), &p);
    rlx_node c0 = rt_const(rg, RLX_F32, k0), c1 = rt_const(rg, RLX_F32, k1), c2 = rt_const(rg, RLX_F32, k2);
    if (variant == 0)
        y = rlx_add(g, rlx_mul(g, rlx_sub(g, y, c0), c1), c2);
    else
        y = rlx_add(g, rlx_div(g, rlx_sub(g, c0, y), c1), rt_const(rg, RLX_F32, k3));
    if (relu)
        y = rlx_relu(g, y);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_conv(x, w, b, &p);
    int64_t plane = want->n / (N * O);
    for (int64_t i = 0; i < want->n; i++) {
        int64_t o = i / plane % O;
        double v = want->d[i];
        v = variant == 0 ? (v - k0->d[o]) * k1->d[o] + k2->d[o] : (k0->d[o] - v) / k1->d[o] + k3->d[0];
        want->d[i] = relu && v < 0 ? 0 : v;
    }
    char what[128];
    snprintf(what, sizeof what, "conv + per-channel steps, variant %d groups %lld relu %d%s", variant,
             (long long)groups, relu, no_layout ? " nchw" : "");
    int ok = rt_check(what, got, want, RLX_F32);
    rt_tensor *all[] = {x, w, b, k0, k1, k2, k3, got, want};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_free(all[i]);
    rt_graph_free(rg);
    return !ok;
}

static void test_conv_affine_fold(void **state)
{
    (void)state;
    int bad = 0;
    for (int variant = 0; variant < 2; variant++)
        for (int relu = 0; relu < 2; relu++)
            for (int no_layout = 0; no_layout < 2; no_layout++) {
                bad += run_conv_affine(variant, 1, relu, no_layout);
                bad += run_conv_affine(variant, 4, relu, no_layout); /* depthwise, multiplier 2 */
            }
    assert_int_equal(bad, 0);
}

/* Depthwise convs (groups == channels; a channel multiplier when O is a
 * multiple of C), which the CPU runs with a direct kernel: the tap layouts
 * it unrolls (3 and 5 wide, stride 1 and 2) and the general one, borders
 * and rows on the padding, then with an activation after it, which fusion
 * makes the kernel's epilogue. */

static void test_conv_depthwise(void **state)
{
    (void)state;
    int bad = 0;
    const conv_case cases[] = {
        {2, 2, 8, {13, 17}, 8, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 8), 1},
        {2, 1, 8, {14, 19}, 8, {3, 3}, cp(2, 2, 1, 1, 1, 1, 1, 1, 8), 1},
        {2, 1, 6, {12, 21}, 6, {5, 5}, cp(1, 1, 1, 1, 2, 2, 2, 2, 6), 0},
        {2, 2, 6, {15, 20}, 6, {5, 5}, cp(2, 2, 1, 1, 2, 2, 2, 2, 6), 1},
        {2, 1, 4, {9, 11}, 12, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 4), 1},    /* channel multiplier 3 */
        {2, 1, 3, {10, 12}, 6, {5, 3}, cp(2, 1, 1, 1, 2, 1, 2, 1, 3), 1},    /* multiplier 2, stride (2, 1) */
        {2, 1, 4, {12, 16}, 4, {3, 3}, cp(1, 1, 2, 3, 2, 3, 2, 3, 4), 1},    /* dilation */
        {2, 1, 5, {9, 10}, 5, {3, 5}, cp(1, 2, 1, 1, 0, 1, 2, 3, 5), 1},     /* asymmetric pads */
        {2, 1, 4, {11, 13}, 4, {7, 7}, cp(3, 3, 1, 1, 3, 3, 3, 3, 4), 1},    /* 7 wide, stride 3: the general row */
        {2, 1, 3, {4, 3}, 3, {5, 5}, cp(1, 1, 1, 1, 3, 3, 3, 3, 3), 1},      /* pads wider than the image */
        {2, 1, 2, {6, 2}, 2, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 2), 0},      /* no interior column */
        {2, 1, 3, {7, 40}, 3, {1, 1}, cp(1, 2, 1, 1, 0, 0, 0, 0, 3), 1},     /* 1x1, strided */
        {1, 2, 5, {37, 0}, 5, {3, 0}, cp(1, 1, 1, 1, 1, 1, 0, 0, 5), 1},     /* 1-d */
        {1, 1, 4, {50, 0}, 8, {5, 0}, cp(2, 1, 2, 1, 4, 3, 0, 0, 4), 1},     /* 1-d, multiplier 2, dilation */
        {2, 1, 24, {48, 80}, 24, {3, 3}, cp(2, 2, 1, 1, 1, 1, 1, 1, 24), 1}, /* threaded */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bad += run_conv(&cases[i]);
        bad += run_conv_act(&cases[i], 1 + (int)(i % 3), 0);
        bad += run_conv_act(&cases[i], 1 + (int)(i % 3), 1);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ pooling */

typedef struct pool_case {
    int sp;
    int64_t N, C, in[2];
    int64_t k[2], s[2], d[2], pads[4];
    int count_include_pad, ceil_mode;
} pool_case;

static int run_pool_dt(const pool_case *c, int is_max, rlx_dtype dt)
{
    rt_graph *rg = rt_graph_new();
    int64_t xd[4] = {c->N, c->C, c->in[0], c->in[1]};
    rt_tensor *x = rt_rand(2 + c->sp, xd, -5, 5);
    rlx_pool_params p;
    rlx_pool_params_init(&p, c->k[0]);
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = c->k[i];
        p.stride[i] = c->s[i];
        p.dilation[i] = c->d[i];
    }
    for (int i = 0; i < 4; i++)
        p.pads[i] = c->pads[i];
    p.count_include_pad = c->count_include_pad;
    p.ceil_mode = c->ceil_mode;
    rlx_node xn = rt_input(rg, dt, x);
    rlx_node y = is_max ? rlx_max_pool(rg->g, xn, &p) : rlx_avg_pool(rg->g, xn, &p);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_pool(x, &p, is_max);
    char what[256];
    snprintf(
        what, sizeof what,
        "%s_pool%dd %s %s kernel %lld,%lld stride %lld,%lld dil %lld,%lld pads %lld,%lld,%lld,%lld incl_pad %d ceil %d",
        is_max ? "max" : "avg", c->sp, rlx_dtype_name(dt), rt_shape_str(x->ndim, x->dims), (long long)c->k[0],
        (long long)c->k[1], (long long)c->s[0], (long long)c->s[1], (long long)c->d[0], (long long)c->d[1],
        (long long)c->pads[0], (long long)c->pads[1], (long long)c->pads[2], (long long)c->pads[3],
        c->count_include_pad, c->ceil_mode);
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    return !ok;
}

static int run_pool(const pool_case *c, int is_max) { return run_pool_dt(c, is_max, RLX_F32); }

static const pool_case k_pool[] = {
    /* sp N C in k s d pads incl ceil */
    {2, 1, 2, {8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0},
    {2, 2, 3, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, 0},
    {2, 2, 3, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, 0},
    {2, 1, 2, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 1},  /* ceil mode */
    {2, 1, 2, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, 1},  /* ceil + include pad */
    {2, 1, 2, {6, 6}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 1},  /* ceil, exact fit */
    {2, 1, 2, {5, 5}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 1},  /* ceil adds a partial window */
    {2, 1, 1, {9, 10}, {2, 3}, {1, 2}, {1, 1}, {1, 0, 0, 1}, 0, 0}, /* non-square, asymmetric pads */
    {2, 1, 1, {9, 10}, {2, 3}, {1, 2}, {1, 1}, {1, 0, 0, 1}, 1, 0},
    {2, 1, 2, {9, 9}, {3, 3}, {1, 1}, {2, 2}, {0, 0, 0, 0}, 0, 0},  /* dilation */
    {2, 1, 2, {10, 9}, {3, 2}, {2, 1}, {2, 3}, {1, 1, 1, 1}, 0, 1}, /* dilation + pads + ceil */
    {2, 1, 1, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 0, 0},  /* 1x1 */
    {1, 2, 3, {10, 0}, {3, 0}, {2, 0}, {1, 0}, {1, 1, 0, 0}, 0, 0}, /* 1-d */
    {1, 2, 3, {10, 0}, {3, 0}, {2, 0}, {1, 0}, {1, 1, 0, 0}, 1, 1},
    {1, 1, 2, {11, 0}, {4, 0}, {3, 0}, {1, 0}, {2, 0, 0, 0}, 0, 1}, /* begin pad only, ceil */
};

static void test_max_pool(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof k_pool / sizeof k_pool[0]; i++)
        bad += run_pool(&k_pool[i], 1);
    assert_int_equal(bad, 0);
}

static void test_avg_pool(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof k_pool / sizeof k_pool[0]; i++)
        bad += run_pool(&k_pool[i], 0);
    assert_int_equal(bad, 0);
}

/* max pool of all-negative data: padding must not contribute zeros */
static void test_max_pool_negative(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(1, 2, 5, 5), -9, -1);
    rlx_pool_params p;
    rlx_pool_params_init(&p, 3);
    p.stride[0] = p.stride[1] = 2;
    p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = 1;
    rlx_node y = rlx_max_pool(rg->g, rt_input(rg, RLX_F32, x), &p);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_pool(x, &p, 1);
    int ok = rt_check("max_pool of negative data with padding", got, want, RLX_F32);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    assert_true(ok);
}

static void test_global_avg_pool(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t dims[4];
    } shapes[] = {{4, {2, 3, 5, 7}}, {3, {1, 4, 9}}, {4, {2, 3, 1, 1}}, {4, {1, 1, 32, 32}}, {4, {0, 3, 2, 2}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].dims, -3, 3);
        rlx_node y = rlx_global_avg_pool(rg->g, rt_input(rg, RLX_F32, x));
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_global_avg_pool(x);
        char what[96];
        snprintf(what, sizeof what, "global_avg_pool %s", rt_shape_str(x->ndim, x->dims));
        bad += !rt_check(what, got, want, RLX_F32);
        rt_free(got);
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* Sizes large enough for the kernels' multi-threaded and blocked paths. */
static void test_nn_large(void **state)
{
    (void)state;
    int bad = 0;
    const attn_case attn[] = {
        {2, 8, 8, 128, 128, 64, 64, 1, MASK_NONE, {0}, 0},
        {1, 8, 2, 96, 160, 32, 32, 1, MASK_BOOL, {1, 1, 1, 160}, 0},
        {2, 4, 4, 64, 64, 32, 32, 0, MASK_FLOAT, {2, 1, 64, 64}, 0},
    };
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++)
        bad += run_attention(&attn[i], RLX_F32);
    const conv_case conv[] = {
        {2, 2, 16, {32, 32}, 32, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 1), 1},
        {2, 1, 32, {28, 28}, 32, {3, 3}, cp(2, 2, 1, 1, 1, 1, 1, 1, 32), 1},
        {1, 4, 16, {500, 0}, 24, {5, 0}, cp(2, 1, 1, 1, 2, 2, 0, 0, 4), 1},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++)
        bad += run_conv(&conv[i]);
    const pool_case pool[] = {
        {2, 2, 16, {64, 64}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 0, 1},
        {2, 2, 16, {64, 64}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 1, 0},
    };
    for (size_t i = 0; i < 2; i++) {
        bad += run_pool(&pool[i], 1);
        bad += run_pool(&pool[i], 0);
    }
    for (int il = 0; il < 2; il++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(RT_SHAPE(2, 8, 128, 64), -2, 2);
        rlx_node y = rlx_rope(rg->g, rt_input(rg, RLX_F32, x), 10000.0, 5, il);
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_rope(x, 10000.0, 5, il);
        bad += !rt_check(il ? "rope [2, 8, 128, 64] interleaved" : "rope [2, 8, 128, 64]", got, want, RLX_F32);
        rt_free(got);
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
    }
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(4, 64, 24, 24), -3, 3);
    rlx_node y = rlx_global_avg_pool(rg->g, rt_input(rg, RLX_F32, x));
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_global_avg_pool(x);
    bad += !rt_check("global_avg_pool [4, 64, 24, 24]", got, want, RLX_F32);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    assert_int_equal(bad, 0);
}

/* f16 / bf16 storage and f64 through conv, pooling, rope, global pooling. */
static void test_nn_storage_types(void **state)
{
    (void)state;
    int bad = 0;
    const rlx_dtype dts[] = {RLX_F16, RLX_BF16, RLX_F64};
    const conv_case conv[] = {
        {2, 2, 3, {9, 7}, 4, {3, 3}, cp(2, 2, 1, 1, 1, 1, 1, 1, 1), 1},
        {2, 1, 4, {7, 7}, 4, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 4), 1},
        {1, 2, 3, {10, 0}, 4, {3, 0}, cp(2, 1, 1, 1, 1, 1, 0, 0, 1), 0},
    };
    for (int d = 0; d < 3; d++) {
        for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++)
            bad += run_conv_dt(&conv[i], dts[d], 0);
        for (size_t i = 0; i < 5; i++) {
            bad += run_pool_dt(&k_pool[i * 3], 1, dts[d]);
            bad += run_pool_dt(&k_pool[i * 3], 0, dts[d]);
        }
        for (int il = 0; il < 2; il++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rt_rand(RT_SHAPE(2, 3, 5, 16), -2, 2);
            rlx_node y = rlx_rope(rg->g, rt_input(rg, dts[d], x), 10000.0, 3, il);
            rt_tensor *got = rt_run1(rg, y), *want = rt_ref_rope(x, 10000.0, 3, il);
            char what[64];
            snprintf(what, sizeof what, "rope %s %s", rlx_dtype_name(dts[d]), il ? "interleaved" : "halves");
            bad += !rt_check(what, got, want, dts[d]);
            rt_free(got);
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(RT_SHAPE(2, 3, 5, 7), -2, 2);
        rlx_node y = rlx_global_avg_pool(rg->g, rt_input(rg, dts[d], x));
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_global_avg_pool(x);
        char what[64];
        snprintf(what, sizeof what, "global_avg_pool %s", rlx_dtype_name(dts[d]));
        bad += !rt_check(what, got, want, dts[d]);
        rt_free(got);
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
        bad += run_attention(&k_attn[13], dts[d]);
    }
    assert_int_equal(bad, 0);
}

/* Empty batches (and an empty query length) flow through as empty results. */
static void test_nn_empty(void **state)
{
    (void)state;
    int bad = 0;
    const attn_case attn[] = {
        {0, 2, 2, 4, 4, 8, 8, 0, MASK_NONE, {0}, 0},
        {1, 2, 1, 0, 5, 8, 8, 1, MASK_NONE, {0}, 0},
        {0, 2, 2, 3, 3, 8, 8, 0, MASK_BOOL, {0, 1, 1, 3}, 0},
    };
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++)
        bad += run_attention(&attn[i], RLX_F32);
    const conv_case conv[] = {
        {2, 0, 3, {8, 8}, 4, {3, 3}, cp(1, 1, 1, 1, 1, 1, 1, 1, 1), 1},
        {1, 0, 2, {9, 0}, 3, {3, 0}, cp(2, 1, 1, 1, 0, 0, 0, 0, 1), 0},
    };
    for (size_t i = 0; i < sizeof conv / sizeof conv[0]; i++)
        bad += run_conv(&conv[i]);
    const pool_case pool = {2, 0, 2, {6, 6}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0};
    bad += run_pool(&pool, 1);
    bad += run_pool(&pool, 0);
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(0, 8), -1, 1);
    rlx_node y = rlx_rope(rg->g, rt_input(rg, RLX_F32, x), 10000.0, 0, 1);
    rt_tensor *got = rt_run1(rg, y);
    bad += !rt_check("rope [0, 8]", got, x, RLX_F32);
    rt_free(got);
    rt_graph_free(rg);
    rt_free(x);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_attention, rt_setup),
        cmocka_unit_test_setup(test_attention_half, rt_setup),
        cmocka_unit_test_setup(test_attention_at, rt_setup),
        cmocka_unit_test_setup(test_rope, rt_setup),
        cmocka_unit_test_setup(test_rope_tables, rt_setup),
        cmocka_unit_test_setup(test_conv1d, rt_setup),
        cmocka_unit_test_setup(test_conv2d, rt_setup),
        cmocka_unit_test_setup(test_conv_depthwise, rt_setup),
        cmocka_unit_test_setup(test_conv_affine_fold, rt_setup),
        cmocka_unit_test_setup(test_conv_fused, rt_setup),
        cmocka_unit_test_setup(test_max_pool, rt_setup),
        cmocka_unit_test_setup(test_avg_pool, rt_setup),
        cmocka_unit_test_setup(test_max_pool_negative, rt_setup),
        cmocka_unit_test_setup(test_global_avg_pool, rt_setup),
        cmocka_unit_test_setup(test_nn_large, rt_setup),
        cmocka_unit_test_setup(test_nn_storage_types, rt_setup),
        cmocka_unit_test_setup(test_nn_empty, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
