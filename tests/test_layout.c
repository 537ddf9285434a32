/* test_layout.c - channels-last conv and pooling, and the layout pass:
 * shape inference and its errors; the lowering of channels-last ops (the
 * CPU does not claim them) against the float64 NCHW reference; the pass,
 * for a target that claims channels-last convs, turns a small ResNet-like
 * graph channels-last with only the input's, the head's and the weights'
 * transposes left, and its outputs still equal the reference; near misses
 * (broadcasting add, a transpose read by a non-elementwise op) stay put. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backends/cpu/cpu_conv.h"
#include "opt_testutil.h"
#include "support/ref.h"

static const int to_nhwc[4] = {0, 2, 3, 1};

/* A conv node; res >= 0: a conv_bias_act's residual (its last input). */
static rlx_node conv_node_res(rlx_graph *g, rlx_op op, rlx_node x, rlx_node w, rlx_node b, const rlx_conv_params *p,
                              int act, int layout, rlx_node res)
{
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.n_in = 2;
    n.in[0] = x;
    n.in[1] = w;
    if (b >= 0)
        n.in[n.n_in++] = b;
    if (res >= 0)
        n.in[n.n_in++] = res;
    n.attrs.conv.p = *p;
    n.attrs.conv.has_bias = b >= 0;
    n.attrs.conv.has_residual = res >= 0;
    n.attrs.conv.act = act;
    n.attrs.conv.layout = layout;
    return rlx_graph_add(g, &n);
}

static rlx_node conv_node(rlx_graph *g, rlx_op op, rlx_node x, rlx_node w, rlx_node b, const rlx_conv_params *p,
                          int act, int layout)
{
    return conv_node_res(g, op, x, w, b, p, act, layout, -1);
}

static rlx_node pool_node(rlx_graph *g, rlx_op op, rlx_node x, const rlx_pool_params *p, int layout)
{
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = op;
    n.n_in = 1;
    n.in[0] = x;
    n.attrs.pool.p = *p;
    n.attrs.pool.layout = layout;
    return rlx_graph_add(g, &n);
}

static rlx_conv_params conv_p(int64_t stride, int64_t pad, int64_t groups)
{
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.stride[0] = p.stride[1] = stride;
    for (int i = 0; i < 4; i++)
        p.pads[i] = pad;
    p.groups = groups;
    return p;
}

/* Adds a node and expects it to fail with a message containing `want`. */
static void expect_error(rlx_graph *g, rlx_node id, const char *want)
{
    assert_true(id < 0);
    assert_int_not_equal(rlx_graph_verify(g), RLX_OK);
    if (!strstr(rlx_last_error(), want))
        fprintf(stderr, "error was: %s\n", rlx_last_error());
    assert_non_null(strstr(rlx_last_error(), want));
}

static void test_infer(void **state)
{
    (void)state;
    rlx_conv_params p = conv_p(2, 1, 2);
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){2, 9, 7, 4});
    rlx_node w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){6, 3, 3, 2});
    rlx_node b = rlx_param(g, "b", RLX_F32, 1, (int64_t[]){6});
    rlx_node y = conv_node(g, RLX_OP_CONV_BIAS_ACT, x, w, b, &p, RLX_ACT_RELU, RLX_LAYOUT_NHWC);
    assert_true(y >= 0);
    int nd;
    int64_t d[RLX_MAX_DIMS];
    assert_int_equal(rlx_node_shape(g, y, &nd, d), RLX_OK);
    assert_int_equal(nd, 4);
    assert_true(d[0] == 2 && d[1] == 5 && d[2] == 4 && d[3] == 6); /* [N, OH, OW, O] */
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, 3);
    pp.stride[0] = pp.stride[1] = 2;
    pp.pads[0] = pp.pads[1] = pp.pads[2] = pp.pads[3] = 1;
    rlx_node m = pool_node(g, RLX_OP_MAX_POOL, y, &pp, RLX_LAYOUT_NHWC);
    assert_int_equal(rlx_node_shape(g, m, &nd, d), RLX_OK);
    assert_true(nd == 4 && d[0] == 2 && d[1] == 3 && d[2] == 2 && d[3] == 6);
    assert_int_equal(rlx_output(g, "m", m), RLX_OK);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    /* default attributes still mean NCHW */
    rlx_conv_params p1 = conv_p(1, 0, 1);
    rlx_node xn = rlx_input(g, "xn", RLX_F32, 4, (int64_t[]){1, 4, 5, 5});
    rlx_node wn = rlx_param(g, "wn", RLX_F32, 4, (int64_t[]){3, 4, 1, 1});
    rlx_node yn = rlx_conv(g, xn, wn, -1, &p1);
    assert_int_equal(rlx_node_shape(g, yn, &nd, d), RLX_OK);
    assert_true(d[1] == 3 && d[2] == 5 && d[3] == 5);
    rlx_graph_free(g);

    /* errors: each in a fresh graph (the first failure sticks) */
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){2, 9, 7, 4});
    w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){6, 3, 3, 3}); /* 3 != 4 channels */
    expect_error(g, conv_node(g, RLX_OP_CONV, x, w, -1, &p1, 0, RLX_LAYOUT_NHWC), "channels-last");
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 9, 4});
    w = rlx_param(g, "w", RLX_F32, 3, (int64_t[]){6, 3, 4});
    expect_error(g, conv_node(g, RLX_OP_CONV, x, w, -1, &p1, 0, RLX_LAYOUT_NHWC), "[N, H, W, C]");
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){2, 9, 7, 4});
    w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){6, 3, 3, 4});
    expect_error(g, conv_node(g, RLX_OP_CONV, x, w, -1, &p1, 0, 2), "layout");
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){2, 2, 7, 4}); /* H 2 < kernel 3 */
    w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){6, 3, 3, 4});
    expect_error(g, conv_node(g, RLX_OP_CONV_BIAS_ACT, x, w, -1, &p1, RLX_ACT_RELU, RLX_LAYOUT_NHWC), "window");
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 9, 4});
    expect_error(g, pool_node(g, RLX_OP_AVG_POOL, x, &pp, RLX_LAYOUT_NHWC), "[N, H, W, C]");
    rlx_graph_free(g);
    /* a residual that is not the output's shape, or not its dtype */
    for (int k = 0; k < 2; k++) {
        g = rlx_graph_new();
        x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){2, 9, 7, 4});
        w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){6, 3, 3, 4});
        rlx_node r = k ? rlx_input(g, "r", RLX_F64, 4, (int64_t[]){2, 7, 5, 6})
                       : rlx_input(g, "r", RLX_F32, 4, (int64_t[]){2, 7, 5, 5});
        expect_error(g, conv_node_res(g, RLX_OP_CONV_BIAS_ACT, x, w, -1, &p1, RLX_ACT_RELU, RLX_LAYOUT_NHWC, r),
                     "residual must be [2, 7, 5, 6] of f32");
        rlx_graph_free(g);
    }
}

static rt_tensor *apply_act(rt_tensor *y, int act)
{
    if (act == RLX_ACT_NONE)
        return y;
    rt_tensor *r = rt_map(y, act == RLX_ACT_RELU ? rt_f_relu : act == RLX_ACT_GELU ? rt_f_gelu : rt_f_silu);
    rt_free(y);
    return r;
}

/* Whether check_conv_p's weights are a constant (reordered once, when the
 * conv is built) rather than a parameter (reordered at every run). */
static int const_weights;

/* check_conv_p's conv_bias_act residual: 0 none; 1 an input (its memory
 * stays the input's: copied into the output first); 2 a relu of an input,
 * computed in the graph (the planner gives its buffer to the conv's
 * output, which starts from it in place). */
static int residual_mode;

/* A channels-last conv (lowered on the CPU, on `threads` threads; 0: the
 * default) equals the float64 NCHW reference, transposed. */
static void check_conv_p(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, const rlx_conv_params *pp,
                         int bias, rlx_op op, int act, int threads)
{
    rlx_conv_params p = *pp;
    int64_t groups = p.groups, stride = p.stride[0];
    int res_mode = op == RLX_OP_CONV_BIAS_ACT ? residual_mode : 0;
    rt_tensor *x = rt_rand_away(RT_SHAPE(N, C, H, W), -1, 1, 0.05);
    rt_tensor *w = rt_rand_away(RT_SHAPE(O, C / groups, k, k), -0.5, 0.5, 0.02);
    rt_tensor *b = bias ? rt_rand_away(RT_SHAPE(O), -0.5, 0.5, 0.02) : NULL;
    rt_tensor *ref = rt_ref_conv(x, w, b, &p), *r = NULL, *rt = NULL;
    rt_tensor *xt = rt_ref_transpose(x, to_nhwc), *wt = rt_ref_transpose(w, to_nhwc);
    rt_graph *rg = rt_graph_new();
    rlx_node xn = rt_input(rg, RLX_F32, xt), wn = const_weights ? rt_const(rg, RLX_F32, wt) : rt_param(rg, RLX_F32, wt);
    rlx_node bn = b ? rt_param(rg, RLX_F32, b) : -1, rn = -1;
    if (res_mode) {
        r = rt_rand_away(ref->ndim, ref->dims, -1, 1, 0.05);
        rt = rt_ref_transpose(r, to_nhwc);
        rn = rt_input(rg, RLX_F32, rt);
        if (res_mode == 2) {
            rn = rlx_relu(rg->g, rn);
            rt_tensor *rr = rt_map(r, rt_f_relu);
            rt_free(r);
            r = rr;
        }
        rt_tensor *sum = rt_zip(ref, r, rt_f_add);
        rt_free(ref);
        ref = sum;
    }
    rlx_node y = conv_node_res(rg->g, op, xn, wn, bn, &p, act, RLX_LAYOUT_NHWC, rn);
    rg->opts.threads = threads;
    rt_tensor *got = rt_run1(rg, y);
    assert_non_null(got);
    ref = apply_act(ref, op == RLX_OP_CONV_BIAS_ACT ? act : RLX_ACT_NONE);
    rt_tensor *want = rt_ref_transpose(ref, to_nhwc);
    char what[200];
    snprintf(what, sizeof what,
             "nhwc %s n%lld h%lld o%lld k%lld s%lld d%lld pad%lld g%lld bias %d act %d threads %d const %d residual %d",
             rlx_op_name(op), (long long)N, (long long)H, (long long)O, (long long)k, (long long)stride,
             (long long)p.dilation[0], (long long)p.pads[0], (long long)groups, bias, act, threads, const_weights,
             res_mode);
    assert_true(rt_check(what, got, want, RLX_F32));
    rt_free(got);
    rt_free(ref);
    rt_free(want);
    rt_free(x);
    rt_free(w);
    rt_free(b);
    rt_free(xt);
    rt_free(wt);
    rt_free(r);
    rt_free(rt);
    rt_graph_free(rg);
}

static void check_conv(int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t k, int64_t stride, int64_t groups,
                       int bias, rlx_op op, int act)
{
    rlx_conv_params p = conv_p(stride, k / 2, groups);
    check_conv_p(N, C, H, W, O, k, &p, bias, op, act, 0);
}

static void test_lowering(void **state)
{
    (void)state;
    check_conv(2, 4, 9, 7, 6, 3, 1, 1, 1, RLX_OP_CONV, 0);
    check_conv(2, 4, 9, 7, 6, 3, 2, 2, 0, RLX_OP_CONV, 0);
    check_conv(1, 3, 15, 13, 8, 7, 2, 1, 1, RLX_OP_CONV_BIAS_ACT, RLX_ACT_RELU);
    check_conv(3, 8, 5, 6, 16, 1, 1, 1, 1, RLX_OP_CONV_BIAS_ACT, RLX_ACT_NONE);
    check_conv(2, 8, 6, 6, 8, 1, 2, 1, 0, RLX_OP_CONV_BIAS_ACT, RLX_ACT_GELU);
    check_conv(2, 6, 8, 8, 6, 3, 1, 6, 1, RLX_OP_CONV_BIAS_ACT, RLX_ACT_SILU); /* depthwise */
    /* pooling (the CPU's channels-last kernel): padded, 2x2 stride 2 as
     * PaddleOCR's classifier pools, count_include_pad, dilation, more
     * channels than one block of 256, a NaN that max pooling must keep */
    const struct {
        int64_t C, H, W, k, s, d, pad;
        int include_pad, nan;
    } pools[] = {
        {5, 9, 8, 3, 2, 1, 1, 0, 0},   {200, 2, 96, 2, 2, 1, 0, 0, 0}, {7, 10, 9, 3, 2, 1, 1, 1, 0},
        {4, 11, 12, 3, 1, 2, 2, 0, 0}, {300, 5, 4, 2, 1, 1, 1, 1, 1},
    };
    for (size_t c = 0; c < sizeof pools / sizeof pools[0]; c++)
        for (int is_max = 0; is_max < 2; is_max++) {
            rlx_pool_params pp;
            rlx_pool_params_init(&pp, pools[c].k);
            pp.stride[0] = pp.stride[1] = pools[c].s;
            pp.dilation[0] = pp.dilation[1] = pools[c].d;
            pp.pads[0] = pp.pads[1] = pp.pads[2] = pp.pads[3] = pools[c].pad;
            pp.count_include_pad = pools[c].include_pad;
            rt_tensor *x = rt_rand_away(RT_SHAPE(2, pools[c].C, pools[c].H, pools[c].W), -1, 1, 0.05);
            if (pools[c].nan)
                x->d[x->n / 3] = NAN;
            rt_tensor *xt = rt_ref_transpose(x, to_nhwc);
            rt_graph *rg = rt_graph_new();
            rlx_node y = pool_node(rg->g, is_max ? RLX_OP_MAX_POOL : RLX_OP_AVG_POOL, rt_input(rg, RLX_F32, xt), &pp,
                                   RLX_LAYOUT_NHWC);
            rt_tensor *got = rt_run1(rg, y), *ref = rt_ref_pool(x, &pp, is_max);
            rt_tensor *want = rt_ref_transpose(ref, to_nhwc);
            assert_non_null(got);
            char what[96];
            snprintf(what, sizeof what, "nhwc %s case %zu", is_max ? "max_pool" : "avg_pool", c);
            assert_true(rt_check(what, got, want, RLX_F32));
            rt_free(got);
            rt_free(ref);
            rt_free(want);
            rt_free(x);
            rt_free(xt);
            rt_graph_free(rg);
        }
}

/* A target that runs everything the CPU runs plus channels-last conv /
 * conv_bias_act (and, when claim_pool, pooling) over 4-D inputs. */
static int claim_pool;
static bool nhwc_target(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if ((n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_BIAS_ACT) && n->attrs.conv.layout == RLX_LAYOUT_NHWC)
        return g->nodes[n->in[0]].shape.ndim == 4;
    if ((n->op == RLX_OP_MAX_POOL || n->op == RLX_OP_AVG_POOL) && n->attrs.pool.layout == RLX_LAYOUT_NHWC)
        return claim_pool;
    return rlx_cpu_backend()->supports(g, id);
}

/* A target that claims no channels-last op (the CPU claims f32 convs where
 * oneDNN builds them). */
static bool nchw_target(const rlx_graph *g, rlx_node id)
{
    return rlx_node_layout(&g->nodes[id]) == RLX_LAYOUT_NCHW && rlx_cpu_backend()->supports(g, id);
}

/* Compiles g for the CPU (which lowers its channels-last ops), binds rg's
 * tensors, runs, and reads out0.. */
static void run_graph(rt_graph *rg, const rlx_graph *g, int nout, rt_tensor **res)
{
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    for (int i = 0; i < rg->n_bind; i++) {
        size_t bytes;
        void *buf = rt_pack(rg->bind[i].t, rg->bind[i].dt, &bytes);
        rlx_status st = rg->bind[i].kind ? rlx_session_set_param(s, rg->bind[i].name, buf, bytes)
                                         : rlx_session_set_input(s, rg->bind[i].name, buf, bytes);
        free(buf);
        assert_int_equal(st, RLX_OK);
    }
    assert_int_equal(rlx_session_run(s), RLX_OK);
    for (int i = 0; i < nout; i++) {
        char name[16];
        snprintf(name, sizeof name, "out%d", i);
        rlx_tensor_info info;
        assert_int_equal(rlx_session_find(s, 2, name, &info), RLX_OK);
        void *buf = malloc(info.bytes + 8);
        assert_int_equal(rlx_session_get_output(s, name, buf, info.bytes), RLX_OK);
        res[i] = rt_unpack(info.dtype, info.ndim, info.dims, buf);
        free(buf);
    }
    rlx_session_free(s);
}

/* Transposes of g: those of a param (weights) and the others. */
static void count_transposes(const rlx_graph *g, int *weights, int *others)
{
    *weights = *others = 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == RLX_OP_TRANSPOSE)
            (*(g->nodes[g->nodes[i].in[0]].op == RLX_OP_PARAM ? weights : others))++;
}

static rt_tensor *ref_add(const rt_tensor *a, const rt_tensor *b) { return rt_zip(a, b, rt_f_add); }

/* stem conv (stride 2, relu) -> max pool -> block: conv_bias_act relu ->
 * conv_bias_act none -> add residual -> relu -> conv stride 2 (bias) ->
 * conv 1x1 + relu as primitives -> global average pool. */
static void test_pass_resnet_like(void **state)
{
    (void)state;
    for (claim_pool = 0; claim_pool < 2; claim_pool++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand_away(RT_SHAPE(2, 3, 18, 18), -1, 1, 0.05);
        rt_tensor *w0 = rt_rand_away(RT_SHAPE(8, 3, 3, 3), -0.4, 0.4, 0.02),
                  *b0 = rt_rand_away(RT_SHAPE(8), -.2, .2, .01);
        rt_tensor *w1 = rt_rand_away(RT_SHAPE(8, 8, 3, 3), -0.3, 0.3, 0.02),
                  *b1 = rt_rand_away(RT_SHAPE(8), -.2, .2, .01);
        rt_tensor *w2 = rt_rand_away(RT_SHAPE(8, 8, 3, 3), -0.3, 0.3, 0.02),
                  *b2 = rt_rand_away(RT_SHAPE(8), -.2, .2, .01);
        rt_tensor *w3 = rt_rand_away(RT_SHAPE(16, 8, 3, 3), -0.3, 0.3, 0.02),
                  *b3 = rt_rand_away(RT_SHAPE(16), -.2, .2, .01);
        rt_tensor *w4 = rt_rand_away(RT_SHAPE(16, 16, 1, 1), -0.3, 0.3, 0.02);
        rlx_graph *g = rg->g;
        rlx_conv_params s2 = conv_p(2, 1, 1), s1 = conv_p(1, 1, 1), pw = conv_p(1, 0, 1);
        rlx_node h = conv_node(g, RLX_OP_CONV_BIAS_ACT, rt_input(rg, RLX_F32, x), rt_param(rg, RLX_F32, w0),
                               rt_param(rg, RLX_F32, b0), &s2, RLX_ACT_RELU, 0); /* [2, 8, 9, 9] */
        rlx_pool_params pp;
        rlx_pool_params_init(&pp, 3);
        pp.stride[0] = pp.stride[1] = 1;
        pp.pads[0] = pp.pads[1] = pp.pads[2] = pp.pads[3] = 1;
        h = rlx_max_pool(g, h, &pp);
        rlx_node a = conv_node(g, RLX_OP_CONV_BIAS_ACT, h, rt_param(rg, RLX_F32, w1), rt_param(rg, RLX_F32, b1), &s1,
                               RLX_ACT_RELU, 0);
        a = conv_node(g, RLX_OP_CONV_BIAS_ACT, a, rt_param(rg, RLX_F32, w2), rt_param(rg, RLX_F32, b2), &s1,
                      RLX_ACT_NONE, 0);
        rlx_node r = rlx_relu(g, rlx_add(g, a, h));
        rlx_node c = rlx_conv(g, r, rt_param(rg, RLX_F32, w3), rt_param(rg, RLX_F32, b3), &s2); /* [2, 16, 5, 5] */
        c = rlx_relu(g, rlx_conv(g, c, rt_param(rg, RLX_F32, w4), -1, &pw));
        rlx_node y = rlx_global_avg_pool(g, c);
        rt_tensor *orig[2];
        rlx_node outs[2] = {y, r};
        assert_int_equal(rt_run(rg, 2, outs, orig), RLX_OK);

        rlx_opt_stats st;
        memset(&st, 0, sizeof st);
        rlx_pass_ctx ctx = ot_cpu_ctx(&st);
        ctx.supports = nhwc_target;
        rlx_graph *l = rlx_pass_layout(g, &ctx);
        assert_non_null(l);
        assert_int_equal(rlx_graph_verify(l), RLX_OK);
        int wt, ot;
        count_transposes(l, &wt, &ot);
        /* weights: 5.  Others, with channels-last pooling: the input's, the
         * one before the head's global pool and the one of the second
         * output r.  With NCHW pooling three more: around the max pool,
         * and before the residual add, whose other input (the pool's) is
         * NCHW */
        assert_int_equal(st.layout_convs, 5);
        assert_int_equal(st.layout_pools, claim_pool);
        assert_int_equal(wt, 5);
        assert_int_equal(ot, claim_pool ? 3 : 6);
        assert_int_equal(st.layout_transposes_left, wt + ot);
        for (int i = 0; i < l->n_nodes && claim_pool; i++) {
            const rlx_node_data *n = &l->nodes[i];
            if (n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_BIAS_ACT)
                assert_int_equal(n->attrs.conv.layout, RLX_LAYOUT_NHWC);
            if (n->op == RLX_OP_MAX_POOL)
                assert_int_equal(n->attrs.pool.layout, RLX_LAYOUT_NHWC);
            if (n->op == RLX_OP_ADD || n->op == RLX_OP_RELU) /* channels-last: [2, 9, 9, 8] or [2, 5, 5, 16] */
                assert_true(n->shape.dims[3] == 8 || n->shape.dims[3] == 16);
            if (n->op == RLX_OP_TRANSPOSE && l->nodes[n->in[0]].op != RLX_OP_PARAM) {
                /* each activation transpose sits at a boundary: after the
                 * input, before the head's pool, or on an output */
                rlx_op src = l->nodes[n->in[0]].op;
                bool ok = src == RLX_OP_INPUT || rlx_graph_is_output(l, i);
                for (int j = 0; j < l->n_nodes; j++)
                    for (int k = 0; k < l->nodes[j].n_in; k++)
                        if (l->nodes[j].in[k] == i && l->nodes[j].op == RLX_OP_GLOBAL_AVG_POOL)
                            ok = true;
                assert_true(ok);
            }
        }
        /* lowered on the CPU, the rewritten graph computes the same */
        rt_tensor *got[2];
        run_graph(rg, l, 2, got);
        assert_true(rt_check("layout pass: pooled head", got[0], orig[0], RLX_F32));
        assert_true(rt_check("layout pass: block output", got[1], orig[1], RLX_F32));
        /* and both equal the float64 reference */
        rt_tensor *t0 = rt_ref_conv(x, w0, b0, &s2), *t1 = rt_map(t0, rt_f_relu), *hp = rt_ref_pool(t1, &pp, 1), *t3;
        rt_free(t0);
        t0 = rt_ref_conv(hp, w1, b1, &s1);
        t3 = rt_map(t0, rt_f_relu);
        rt_free(t0);
        t0 = rt_ref_conv(t3, w2, b2, &s1);
        rt_free(t3);
        t3 = ref_add(t0, hp);
        rt_free(t0);
        rt_tensor *rr = rt_map(t3, rt_f_relu);
        rt_free(t3);
        assert_true(rt_check("layout pass vs float64: block output", got[1], rr, RLX_F32));
        t0 = rt_ref_conv(rr, w3, b3, &s2);
        t3 = rt_ref_conv(t0, w4, NULL, &pw);
        rt_free(t0);
        t0 = rt_map(t3, rt_f_relu);
        rt_free(t3);
        rt_tensor *yy = rt_ref_global_avg_pool(t0);
        rt_free(t0);
        assert_true(rt_check("layout pass vs float64: pooled head", got[0], yy, RLX_F32));
        rt_free(yy);
        rt_free(rr);
        rt_free(t1);
        rt_free(hp);
        for (int i = 0; i < 2; i++) {
            rt_free(got[i]);
            rt_free(orig[i]);
        }
        rlx_graph_free(l);
        rt_tensor *all[] = {x, w0, b0, w1, b1, w2, b2, w3, b3, w4};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            rt_free(all[i]);
        rt_graph_free(rg);
    }
    claim_pool = 0;
}

/* An add that broadcasts a [C, 1, 1] tensor moves channels-last (the
 * tensor reshaped to [1, 1, 1, C]); a near miss, a relu whose transposed
 * input is also read by a reduction that drops its axes, stays NCHW behind
 * its transpose; outputs still agree.  A target claiming nothing
 * channels-last leaves the graph alone. */
static void test_near_miss(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand_away(RT_SHAPE(2, 4, 6, 6), -1, 1, 0.05);
    rt_tensor *w = rt_rand_away(RT_SHAPE(8, 4, 3, 3), -0.4, 0.4, 0.02);
    rt_tensor *w2 = rt_rand_away(RT_SHAPE(8, 4, 3, 3), -0.4, 0.4, 0.02);
    rt_tensor *cb = rt_rand_away(RT_SHAPE(8, 1, 1), -1, 1, 0.05);
    rlx_graph *g = rg->g;
    rlx_conv_params p = conv_p(1, 1, 1);
    rlx_node xn = rt_input(rg, RLX_F32, x);
    rlx_node c1 = rlx_conv(g, xn, rt_param(rg, RLX_F32, w), -1, &p);
    rlx_node y0 = rlx_add(g, c1, rt_param(rg, RLX_F32, cb)); /* broadcasting */
    rlx_node c2 = rlx_conv(g, xn, rt_param(rg, RLX_F32, w2), -1, &p);
    rlx_node y1 = rlx_relu(g, c2);
    rlx_node y2 = rlx_reduce_sum(g, c2, 1, (int[]){1}, 0);
    rt_tensor *orig[3];
    rlx_node outs[3] = {y0, y1, y2};
    assert_int_equal(rt_run(rg, 3, outs, orig), RLX_OK);

    rlx_opt_stats st;
    memset(&st, 0, sizeof st);
    rlx_pass_ctx ctx = ot_cpu_ctx(&st);
    ctx.supports = nchw_target;
    rlx_graph *same = rlx_pass_layout(g, &ctx); /* a target with no channels-last op */
    assert_non_null(same);
    assert_int_equal(same->n_nodes, g->n_nodes);
    assert_int_equal(ot_count(same, RLX_OP_TRANSPOSE), 0);
    assert_int_equal(st.layout_convs, 0);
    rlx_graph_free(same);

    ctx.supports = nhwc_target;
    rlx_graph *l = rlx_pass_layout(g, &ctx);
    assert_non_null(l);
    assert_int_equal(st.layout_convs, 2);
    for (int i = 0; i < l->n_nodes; i++) {
        const rlx_node_data *n = &l->nodes[i];
        if (n->op == RLX_OP_ADD) {
            assert_int_equal(n->shape.dims[3], 8); /* channels-last */
            assert_int_equal(l->nodes[n->in[1]].op, RLX_OP_RESHAPE);
        }
        if (n->op == RLX_OP_RELU) {
            assert_int_equal(n->shape.dims[1], 8); /* still NCHW */
            assert_int_equal(l->nodes[n->in[0]].op, RLX_OP_TRANSPOSE);
        }
        if (n->op == RLX_OP_REDUCE_SUM)
            assert_int_equal(l->nodes[n->in[0]].op, RLX_OP_TRANSPOSE);
    }
    /* one transpose of x is shared by both convs (CSE is not the pass's
     * job: two), plus one after each conv (the first after its add), plus
     * the weights */
    int wt, ot;
    count_transposes(l, &wt, &ot);
    assert_int_equal(wt, 2);
    assert_int_equal(ot, 4);
    rt_tensor *got[3];
    run_graph(rg, l, 3, got);
    assert_true(rt_check("broadcast add", got[0], orig[0], RLX_F32));
    assert_true(rt_check("near miss: relu", got[1], orig[1], RLX_F32));
    assert_true(rt_check("near miss: reduction", got[2], orig[2], RLX_F32));
    for (int i = 0; i < 3; i++) {
        rt_free(got[i]);
        rt_free(orig[i]);
    }
    rlx_graph_free(l);
    rt_free(x);
    rt_free(w);
    rt_free(w2);
    rt_free(cb);
    rt_graph_free(rg);
}

/* The blocks of PaddleOCR's networks around their convs: a
 * squeeze-excitation gate (global mean keeping its axes, a 1x1 conv, a
 * product with the [N, C, 1, 1] gate), a per-channel constant, a 4-D
 * constant of the full shape, a nearest 2x upsample as two gathers, and a
 * concat over channels all move channels-last: only the input's transpose
 * and the output's remain besides the weights'; outputs agree. */
static void test_paddle_blocks(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand_away(RT_SHAPE(1, 4, 6, 5), -1, 1, 0.05);
    rt_tensor *w = rt_rand_away(RT_SHAPE(8, 4, 3, 3), -0.4, 0.4, 0.02);
    rt_tensor *wse = rt_rand_away(RT_SHAPE(8, 8, 1, 1), -0.4, 0.4, 0.02);
    rt_tensor *wo = rt_rand_away(RT_SHAPE(3, 16, 1, 1), -0.4, 0.4, 0.02);
    rt_tensor *k = rt_rand_away(RT_SHAPE(8, 1, 1), -1, 1, 0.05),
              *full = rt_rand_away(RT_SHAPE(1, 8, 6, 5), -1, 1, 0.05);
    rlx_graph *g = rg->g;
    rlx_conv_params p = conv_p(1, 1, 1), pw = conv_p(1, 0, 1);
    rlx_node c = rlx_conv(g, rt_input(rg, RLX_F32, x), rt_param(rg, RLX_F32, w), -1, &p);
    c = rlx_mul(g, c, rt_const(rg, RLX_F32, k));
    rlx_node gate = rlx_reduce_mean(g, c, 2, (int[]){2, 3}, 1);
    gate = rlx_sigmoid(g, rlx_conv(g, gate, rt_param(rg, RLX_F32, wse), -1, &pw));
    rlx_node sc = rlx_add(g, rlx_mul(g, c, gate), rt_const(rg, RLX_F32, full));
    const int64_t ih[12] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}, iw[10] = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
    rlx_node up = rlx_gather(g, sc, rlx_constant(g, RLX_I64, 1, (int64_t[]){12}, ih, sizeof ih), 2);
    up = rlx_gather(g, up, rlx_constant(g, RLX_I64, 1, (int64_t[]){10}, iw, sizeof iw), 3);
    rlx_node cat = rlx_concat(g, 2, (rlx_node[]){up, rlx_relu(g, up)}, 1);
    rlx_node y = rlx_conv(g, cat, rt_param(rg, RLX_F32, wo), -1, &pw);
    rt_tensor *orig, *got;
    assert_int_equal(rt_run(rg, 1, &y, &orig), RLX_OK);

    rlx_opt_stats st;
    memset(&st, 0, sizeof st);
    rlx_pass_ctx ctx = ot_cpu_ctx(&st);
    ctx.supports = nhwc_target;
    rlx_graph *l = rlx_pass_layout(g, &ctx);
    assert_non_null(l);
    assert_int_equal(st.layout_convs, 3);
    int wt, ot;
    count_transposes(l, &wt, &ot);
    assert_int_equal(wt, 3);
    assert_int_equal(ot, 2);
    run_graph(rg, l, 1, &got);
    assert_true(rt_check("paddle blocks channels-last", got, orig, RLX_F32));
    rlx_graph_free(l);
    rt_tensor *tmp[] = {x, w, wse, wo, k, full, orig, got};
    for (int i = 0; i < 8; i++)
        rt_free(tmp[i]);
    rt_graph_free(rg);
}

/* The CPU cuts a channels-last conv into one slice per thread: runs of
 * images, of one image's output rows (each reading its rows of the input,
 * the image's edge as padding), or of a small image's output channels
 * (each with its own weights and bias, its output copied into place).
 * Every cut equals the reference: uneven runs of images, fewer images than
 * threads, strides, dilation, a kernel taller than the image, fewer output
 * rows than threads, pads wide enough that a slice would read only padding
 * (not cut), depthwise, channel slices (7 x 7 by 128 channels on 2 and 4
 * threads, 5 x 5 by 192 with a bias on 2; other thread counts cut rows),
 * weights a parameter or a constant. */
static void test_conv_slices(void **state)
{
    (void)state;
    const struct {
        int64_t N, C, H, W, O, k, stride, dil, pad, groups;
    } cases[] = {
        {1, 8, 13, 9, 16, 3, 1, 1, 1, 1},   {3, 4, 7, 6, 8, 3, 2, 1, 1, 1},  {2, 5, 11, 7, 6, 3, 2, 2, 2, 1},
        {1, 3, 15, 12, 8, 7, 2, 1, 3, 1},   {1, 4, 2, 5, 4, 7, 1, 1, 3, 1},  {1, 6, 3, 4, 6, 1, 1, 1, 2, 1},
        {1, 8, 10, 10, 8, 3, 1, 1, 1, 8},   {5, 8, 4, 4, 16, 1, 1, 1, 0, 1}, {1, 128, 7, 7, 128, 3, 1, 1, 1, 1},
        {1, 512, 9, 9, 192, 1, 2, 1, 0, 1},
    };
    for (const_weights = 0; const_weights < 2; const_weights++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int threads = 1; threads <= 4; threads++) {
                rlx_conv_params p = conv_p(cases[c].stride, cases[c].pad, cases[c].groups);
                p.dilation[0] = p.dilation[1] = cases[c].dil;
                check_conv_p(cases[c].N, cases[c].C, cases[c].H, cases[c].W, cases[c].O, cases[c].k, &p, (int)(c & 1),
                             c % 3 ? RLX_OP_CONV_BIAS_ACT : RLX_OP_CONV, RLX_ACT_RELU, threads);
            }
    const_weights = 0;
}

/* A residual added before the activation (conv_bias_act's last input):
 * test_conv_slices' cuts, the residual an input (copied into the output
 * first, slice by slice) or computed in the graph (the output written over
 * it in place), with and without a bias, a relu or no activation; and the
 * NCHW kernels (im2col + GEMM in f32, f64 and f16; depthwise) with it,
 * against the float64 reference. */
static void test_conv_residual(void **state)
{
    (void)state;
    const struct {
        int64_t N, C, H, W, O, k, stride, groups;
    } cases[] = {
        {1, 8, 13, 9, 16, 3, 1, 1},  {3, 4, 7, 6, 8, 3, 2, 1},     {5, 8, 4, 4, 16, 1, 1, 1},
        {1, 64, 7, 7, 128, 1, 1, 1}, {1, 128, 7, 7, 128, 3, 1, 1}, {1, 8, 10, 10, 8, 3, 1, 8},
    };
    for (residual_mode = 1; residual_mode <= 2; residual_mode++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int threads = 1; threads <= 4; threads++) {
                rlx_conv_params p = conv_p(cases[c].stride, cases[c].k / 2, cases[c].groups);
                const_weights = (int)(c & 1);
                check_conv_p(cases[c].N, cases[c].C, cases[c].H, cases[c].W, cases[c].O, cases[c].k, &p,
                             (int)(c % 3 != 1), RLX_OP_CONV_BIAS_ACT, threads % 2 ? RLX_ACT_RELU : RLX_ACT_NONE,
                             threads);
            }
    residual_mode = 0;
    const_weights = 0;
    /* NCHW, the layout stage off so the CPU's own kernels run */
    const struct {
        rlx_dtype dt;
        int64_t C, O, groups;
    } nchw[] = {{RLX_F32, 6, 8, 1}, {RLX_F64, 6, 8, 1}, {RLX_F16, 6, 8, 1}, {RLX_F32, 6, 6, 6}, {RLX_F32, 6, 12, 3}};
    for (size_t c = 0; c < sizeof nchw / sizeof nchw[0]; c++)
        for (int mode = 1; mode <= 2; mode++) {
            rlx_conv_params p = conv_p(1, 1, nchw[c].groups);
            rt_tensor *x = rt_rand_away(RT_SHAPE(2, nchw[c].C, 7, 5), -1, 1, 0.05);
            rt_tensor *w = rt_rand_away(RT_SHAPE(nchw[c].O, nchw[c].C / nchw[c].groups, 3, 3), -0.5, 0.5, 0.02);
            rt_tensor *b = rt_rand_away(RT_SHAPE(nchw[c].O), -0.5, 0.5, 0.02);
            rt_tensor *r = rt_rand_away(RT_SHAPE(2, nchw[c].O, 7, 5), -1, 1, 0.05);
            rt_graph *rg = rt_graph_new();
            rg->opts.no_layout = 1;
            rlx_dtype dt = nchw[c].dt;
            rlx_node rn = rt_input(rg, dt, r);
            if (mode == 2)
                rn = rlx_relu(rg->g, rn);
            rlx_node y = conv_node_res(rg->g, RLX_OP_CONV_BIAS_ACT, rt_input(rg, dt, x), rt_param(rg, dt, w),
                                       rt_param(rg, dt, b), &p, RLX_ACT_RELU, RLX_LAYOUT_NCHW, rn);
            rt_tensor *got = rt_run1(rg, y);
            assert_non_null(got);
            rt_tensor *conv = rt_ref_conv(x, w, b, &p), *rr = mode == 2 ? rt_map(r, rt_f_relu) : NULL;
            rt_tensor *sum = rt_zip(conv, rr ? rr : r, rt_f_add), *want = rt_map(sum, rt_f_relu);
            char what[96];
            snprintf(what, sizeof what, "nchw residual %s groups %lld mode %d", rlx_dtype_name(dt),
                     (long long)nchw[c].groups, mode);
            assert_true(rt_check(what, got, want, dt));
            rt_tensor *all[] = {x, w, b, r, got, conv, rr, sum, want};
            for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                rt_free(all[i]);
            rt_graph_free(rg);
        }
}

/* 3 x 3 stride-1 convs with 16-blocks of channels go by oneDNN's Winograd
 * (its 2 x 3 and 4 x 3 tiles) where the processor has AVX-512: cut into
 * rows, channels (up to 32 x 32 pixels) or images, weights a parameter or
 * a constant, with and without a bias and activation.  Each equals the
 * float64 reference within f32's bound with RLX_CPU_WINOGRAD=1 (every
 * case's slices counted as built that way on 1 and 2 threads; a cut into 3
 * or 4 slices whose edges ask oneDNN for different weight layouts goes
 * direct), unset (the same for weights of at most 2.5 MiB, none for the
 * 384-channel case's 5.3 MB) and 0 (none). */
static void test_conv_winograd(void **state)
{
    (void)state;
    const struct {
        int64_t N, C, H, W, O;
    } cases[] = {
        {1, 32, 24, 18, 32}, {1, 64, 12, 12, 64}, {3, 16, 9, 11, 48},
        {2, 128, 7, 7, 128}, {1, 16, 30, 31, 16}, {1, 384, 5, 4, 384},
    };
    long before = rlx_cpu_conv_winograd_parts();
    bool counted = before >= 0 && __builtin_cpu_supports("avx512f");
    if (!counted)
        print_message("Winograd convs not counted: %s\n", before < 0 ? "no oneDNN" : "no AVX-512 (oneDNN's needs it)");
    const char *modes[3] = {"1", NULL, "0"};
    for (int m = 0; m < 3; m++) {
        if (modes[m])
            setenv("RLX_CPU_WINOGRAD", modes[m], 1);
        else
            unsetenv("RLX_CPU_WINOGRAD");
        for (const_weights = 0; const_weights < 2; const_weights++)
            for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
                for (int threads = 1; threads <= 4; threads *= 2) {
                    rlx_conv_params p = conv_p(1, 1, 1);
                    long n0 = rlx_cpu_conv_winograd_parts();
                    check_conv_p(cases[c].N, cases[c].C, cases[c].H, cases[c].W, cases[c].O, 3, &p, (int)(c & 1),
                                 c % 2 ? RLX_OP_CONV_BIAS_ACT : RLX_OP_CONV, RLX_ACT_RELU, threads);
                    bool small = cases[c].C * cases[c].O * 9 * (int64_t)sizeof(float) <= RLX_CPU_WINOGRAD_SMALL_BYTES;
                    bool want = m == 0 || (m == 1 && small), used = rlx_cpu_conv_winograd_parts() > n0;
                    if (counted && (want ? !used && threads <= 2 : used))
                        fail_msg("case %zu threads %d, RLX_CPU_WINOGRAD %s: Winograd %s", c, threads,
                                 modes[m] ? modes[m] : "unset", want ? "not used" : "used");
                }
    }
    unsetenv("RLX_CPU_WINOGRAD");
    const_weights = 0;
}

/* Constant weights are transposed at compile time: no transpose node. */
static void test_constant_weights(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand_away(RT_SHAPE(1, 5, 7, 6), -1, 1, 0.05);
    rt_tensor *w = rt_rand_away(RT_SHAPE(4, 5, 3, 2), -0.4, 0.4, 0.02);
    rlx_conv_params p = conv_p(1, 0, 1);
    rlx_node y = rlx_relu(rg->g, rlx_conv(rg->g, rt_input(rg, RLX_F32, x), rt_const(rg, RLX_F32, w), -1, &p));
    rt_tensor *orig;
    assert_int_equal(rt_run(rg, 1, &y, &orig), RLX_OK);
    rlx_pass_ctx ctx = ot_cpu_ctx(NULL);
    ctx.supports = nhwc_target;
    rlx_graph *l = rlx_pass_layout(rg->g, &ctx);
    assert_non_null(l);
    int wt, ot;
    count_transposes(l, &wt, &ot);
    assert_int_equal(wt, 0);
    assert_int_equal(ot, 2); /* input and output */
    rt_tensor *got;
    run_graph(rg, l, 1, &got);
    assert_true(rt_check("constant weights", got, orig, RLX_F32));
    rt_free(got);
    rt_free(orig);
    rlx_graph_free(l);
    rt_free(x);
    rt_free(w);
    rt_graph_free(rg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_infer, rt_setup),
        cmocka_unit_test_setup(test_lowering, rt_setup),
        cmocka_unit_test_setup(test_pass_resnet_like, rt_setup),
        cmocka_unit_test_setup(test_near_miss, rt_setup),
        cmocka_unit_test_setup(test_paddle_blocks, rt_setup),
        cmocka_unit_test_setup(test_constant_weights, rt_setup),
        cmocka_unit_test_setup(test_conv_slices, rt_setup),
        cmocka_unit_test_setup(test_conv_winograd, rt_setup),
        cmocka_unit_test_setup(test_conv_residual, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
