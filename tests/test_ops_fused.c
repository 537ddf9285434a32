/* Op patterns the optimizer fuses (matmul + bias + activation, residual add
 * + norm, softmax of scaled and masked scores, SwiGLU, conv + batch norm +
 * activation, elementwise chains, the whole attention block), each run with
 * fusion on and off against the float64 reference composed from the
 * primitives, plus variants that must not fuse (an intermediate that is also
 * an output). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backends/cpu/cpu_matmul.h"
#include "support/ref.h"

/* Frees n tensors. */
static void free_all(rt_tensor **ts, int n)
{
    for (int i = 0; i < n; i++)
        rt_free(ts[i]);
}

/* Runs rg (outputs in outs) with fusion on or off and checks each output;
 * with RLX_TEST_VERBOSE set, reports how many nodes fusion removed. */
static int run_check(rt_graph *rg, int nout, const rlx_node *outs, rt_tensor **want, const char *what, int fuse)
{
    rg->opts.no_fusion = !fuse;
    rg->opts.ignore_env = 1;
    rt_tensor *got[8] = {0};
    rlx_status st = rt_run(rg, nout, outs, got);
    int bad = 0;
    for (int i = 0; i < nout; i++) {
        char w[192];
        snprintf(w, sizeof w, "%s (fusion %s) output %d", what, fuse ? "on" : "off", i);
        bad += !rt_check(w, st == RLX_OK ? got[i] : NULL, want[i], RLX_F32);
        rt_free(got[i]);
    }
    if (st == RLX_OK && fuse && getenv("RLX_TEST_VERBOSE")) {
        rlx_session *s = NULL;
        if (rlx_compile(rg->g, &rg->opts, &s) == RLX_OK) {
            rlx_compile_stats cs;
            if (rlx_session_stats(s, &cs) == RLX_OK)
                fprintf(stderr, "[fused] %s: %d -> %d nodes\n", what, cs.nodes_after_simplify, cs.nodes_after_fusion);
            rlx_session_free(s);
        }
    }
    return bad;
}

static rt_tensor *act_ref(const rt_tensor *x, int act)
{
    const rt_fn1 f[] = {NULL, rt_f_relu, rt_f_gelu, rt_f_gelu_tanh, rt_f_silu, rt_f_sigmoid, rt_f_tanh};
    return act ? rt_map(x, f[act]) : rt_clone(x);
}

static rlx_node act_node(rlx_graph *g, rlx_node x, int act)
{
    switch (act) {
    case 1: return rlx_relu(g, x);
    case 2: return rlx_gelu(g, x);
    case 3: return rlx_gelu_tanh(g, x);
    case 4: return rlx_silu(g, x);
    case 5: return rlx_sigmoid(g, x);
    case 6: return rlx_tanh(g, x);
    default: return x;
    }
}

/* ------------------------------------------------------------ matmul + bias + act */

static void test_matmul_bias_act(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t xd[3];
        int64_t K, N;
    } shapes[] = {{2, {7, 16}, 16, 12}, {3, {2, 5, 32}, 32, 24}, {2, {1, 8}, 8, 1}, {2, {130, 64}, 64, 96}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int act = 0; act < 7; act++)
            for (int variant = 0; variant < 4; variant++) {
                /* variant 0: act(x@w + b); 1: act(b + x@w^T); 2: act(x@w) no bias; 3: x@w + b, x@w also an output */
                if (variant == 2 && act == 0)
                    continue;
                rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].xd, -1, 1);
                int tb = variant == 1;
                rt_tensor *w = tb ? rt_rand(RT_SHAPE(shapes[s].N, shapes[s].K), -0.5, 0.5)
                                  : rt_rand(RT_SHAPE(shapes[s].K, shapes[s].N), -0.5, 0.5);
                rt_tensor *b = rt_rand(RT_SHAPE(shapes[s].N), -1, 1);
                for (int fuse = 1; fuse >= 0; fuse--) {
                    rt_graph *rg = rt_graph_new();
                    rlx_node xn = rt_input(rg, RLX_F32, x), wn = rt_param(rg, RLX_F32, w),
                             bn = rt_param(rg, RLX_F32, b);
                    rlx_node mm = rlx_matmul(rg->g, xn, wn, 0, tb);
                    rlx_node pre = variant == 2 ? mm : variant == 1 ? rlx_add(rg->g, bn, mm) : rlx_add(rg->g, mm, bn);
                    rlx_node outs[2] = {act_node(rg->g, pre, act), mm};
                    rt_tensor *mr = rt_ref_matmul(x, w, 0, tb);
                    rt_tensor *pr = variant == 2 ? rt_clone(mr) : rt_zip(mr, b, rt_f_add);
                    rt_tensor *want[2] = {act_ref(pr, act), mr};
                    char what[128];
                    snprintf(what, sizeof what, "matmul+bias+act x %s act %d variant %d",
                             rt_shape_str(x->ndim, x->dims), act, variant);
                    bad += run_check(rg, variant == 3 ? 2 : 1, outs, want, what, fuse);
                    rt_free(pr);
                    free_all(want, 2);
                    rt_graph_free(rg);
                }
                rt_free(x);
                rt_free(w);
                rt_free(b);
            }
    assert_int_equal(bad, 0);
}

/* matmul + bias + act with a large constant weight (RLX_CPU_MATMUL_PACK_MIN
 * elements and more: packed for oneDNN's matmul primitive, the rows cut
 * over the threads), the weight as stored and transposed, with and without
 * a bias, each activation, on 1-3 threads, against float64; the packed
 * slices counted where oneDNN is there.  A weight below the bound, a param
 * one and too few rows go through sgemm. */
static void test_matmul_packed(void **state)
{
    (void)state;
    const struct {
        int64_t M, K, N;
        int tb, packed;
    } cases[] = {
        {64, 1024, 1024, 0, 1},  {130, 512, 2048, 1, 1},
        {257, 1024, 1024, 0, 1}, {100, 512, 1000, 0, 0}, /* 512 000 weights: below the bound */
        {40, 1024, 1024, 0, 0},                          /* 40 rows: below the bound */
    };
    long before = rlx_cpu_matmul_dnnl_parts();
    if (before < 0)
        print_message("packed matmuls not counted: no oneDNN\n");
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t M = cases[c].M, K = cases[c].K, N = cases[c].N;
        rt_tensor *x = rt_rand(RT_SHAPE(M, K), -1, 1);
        rt_tensor *w = cases[c].tb ? rt_rand(RT_SHAPE(N, K), -0.1, 0.1) : rt_rand(RT_SHAPE(K, N), -0.1, 0.1);
        rt_tensor *b = rt_rand(RT_SHAPE(N), -1, 1);
        rt_tensor *mr = NULL; /* x @ w, once the inputs are rounded to f32 (rt_input does that) */
        for (int act = 0; act < 5; act++)
            for (int bias = 0; bias < 2; bias++)
                for (int threads = 1; threads <= 3; threads++) {
                    rt_graph *rg = rt_graph_new();
                    rg->opts.threads = threads;
                    rg->opts.ignore_env = 1;
                    rlx_node xn = rt_input(rg, RLX_F32, x), wn = rt_const(rg, RLX_F32, w);
                    rlx_node y = rlx_matmul(rg->g, xn, wn, 0, cases[c].tb);
                    if (bias)
                        y = rlx_add(rg->g, y, rt_param(rg, RLX_F32, b));
                    y = act_node(rg->g, y, act);
                    if (!mr)
                        mr = rt_ref_matmul(x, w, 0, cases[c].tb);
                    rt_tensor *pre = bias ? rt_zip(mr, b, rt_f_add) : rt_clone(mr), *want = act_ref(pre, act);
                    long n0 = rlx_cpu_matmul_dnnl_parts();
                    rt_tensor *got = rt_run1(rg, y);
                    char what[160];
                    snprintf(what, sizeof what, "packed matmul M%lld K%lld N%lld tb %d act %d bias %d threads %d",
                             (long long)M, (long long)K, (long long)N, cases[c].tb, act, bias, threads);
                    bad += !rt_check(what, got, want, RLX_F32);
                    /* a bias and an activation fuse into one matmul_bias_act; a plain product stays a matmul */
                    bool fused = bias || act;
                    long built = rlx_cpu_matmul_dnnl_parts() - n0;
                    if (before >= 0 && (cases[c].packed && fused ? built != threads : built != 0)) {
                        print_message("%s: %ld slices packed\n", what, built);
                        bad++;
                    }
                    rt_free(got);
                    rt_free(pre);
                    rt_free(want);
                    rt_graph_free(rg);
                }
        /* the same weight as a param (set at run time): not packed */
        rt_graph *rg = rt_graph_new();
        rlx_node y =
            rlx_relu(rg->g, rlx_matmul(rg->g, rt_input(rg, RLX_F32, x), rt_param(rg, RLX_F32, w), 0, cases[c].tb));
        long n0 = rlx_cpu_matmul_dnnl_parts();
        rt_tensor *got = rt_run1(rg, y), *want = act_ref(mr, 1);
        bad += !rt_check("matmul + relu, param weight", got, want, RLX_F32);
        bad += rlx_cpu_matmul_dnnl_parts() != n0;
        rt_free(got);
        rt_free(want);
        rt_graph_free(rg);
        rt_free(mr);
        rt_free(x);
        rt_free(w);
        rt_free(b);
    }
    assert_int_equal(bad, 0);
}

/* GELU and SiLU down to x = -8, where they are tiny, as the fused matmul
 * epilogue (x times an identity, so the product is exact) and the unary op
 * compute them in f32: checked relative to each value, with no absolute
 * slack.  GELU as 1 + erf(x / sqrt 2) in f32 would lose every digit there
 * (0 at x = -8, where GELU is -5e-15). */
static void test_act_tails(void **state)
{
    (void)state;
    int bad = 0;
    const int acts[2] = {2, 4}; /* gelu, silu */
    rt_tensor *eye = rt_new(RT_SHAPE(64, 64));
    for (int i = 0; i < 64; i++)
        eye->d[i * 64 + i] = 1.0;
    for (int a = 0; a < 2; a++)
        for (int fused = 0; fused < 2; fused++) {
            rt_tensor *x = rt_rand(RT_SHAPE(4, 64), -8, 8);
            rt_graph *rg = rt_graph_new();
            rg->opts.ignore_env = 1;
            rlx_node xn = rt_input(rg, RLX_F32, x);
            rlx_node pre = fused ? rlx_matmul(rg->g, xn, rt_const(rg, RLX_F32, eye), 0, 0) : xn;
            rt_tensor *got = rt_run1(rg, act_node(rg->g, pre, acts[a])), *want = act_ref(x, acts[a]);
            char what[96];
            snprintf(what, sizeof what, "%s tails (%s)", acts[a] == 2 ? "gelu" : "silu",
                     fused ? "matmul epilogue" : "unary op");
            bad += !rt_check_tol(what, got, want, 1e-5, 0);
            rt_free(got);
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
    rt_free(eye);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ add + norm */

static void test_add_norm(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t d[3];
    } shapes[] = {{2, {6, 32}}, {3, {2, 5, 64}}, {2, {1, 7}}, {2, {300, 128}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kind = 0; kind < 3; kind++)       /* layer norm with beta, layer norm bare, rms norm */
            for (int keep = 0; keep < 2; keep++) { /* keep: the sum is also an output (a residual stream) */
                int64_t D = shapes[s].d[shapes[s].ndim - 1];
                rt_tensor *a = rt_rand(shapes[s].ndim, shapes[s].d, -2, 2),
                          *b = rt_rand(shapes[s].ndim, shapes[s].d, -2, 2);
                rt_tensor *gm = rt_rand(1, &D, 0.5, 1.5), *bt = rt_rand(1, &D, -0.5, 0.5);
                for (int fuse = 1; fuse >= 0; fuse--) {
                    rt_graph *rg = rt_graph_new();
                    rlx_node an = rt_input(rg, RLX_F32, a), bn = rt_input(rg, RLX_F32, b);
                    rlx_node gn = kind == 1 ? -1 : rt_param(rg, RLX_F32, gm);
                    rlx_node btn = kind == 0 ? rt_param(rg, RLX_F32, bt) : -1;
                    rlx_node sum = rlx_add(rg->g, an, bn);
                    rlx_node y =
                        kind == 2 ? rlx_rms_norm(rg->g, sum, gn, 1e-6) : rlx_layer_norm(rg->g, sum, gn, btn, 1e-5);
                    rlx_node outs[2] = {y, sum};
                    rt_tensor *sr = rt_zip(a, b, rt_f_add);
                    rt_tensor *want[2] = {kind == 2   ? rt_ref_rms_norm(sr, gm, 1e-6)
                                          : kind == 1 ? rt_ref_layer_norm(sr, NULL, NULL, 1e-5)
                                                      : rt_ref_layer_norm(sr, gm, bt, 1e-5),
                                          sr};
                    char what[128];
                    snprintf(what, sizeof what, "add+%s %s%s", kind == 2 ? "rms_norm" : "layer_norm",
                             rt_shape_str(a->ndim, a->dims), keep ? " (sum kept)" : "");
                    bad += run_check(rg, keep ? 2 : 1, outs, want, what, fuse);
                    free_all(want, 2);
                    rt_graph_free(rg);
                }
                rt_tensor *all[] = {a, b, gm, bt};
                free_all(all, 4);
            }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ softmax(x*c + mask) */

static void test_softmax_scale_mask(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int xn;
        int64_t xd[4];
        int mn;
        int64_t md[4];
        int axis;
    } cases[] = {
        {4, {2, 3, 5, 7}, 4, {1, 1, 5, 7}, -1}, {4, {2, 3, 5, 7}, 2, {5, 7}, -1},
        {4, {2, 3, 5, 7}, 4, {2, 1, 1, 7}, 3},  {2, {4, 9}, 2, {4, 9}, -1},
        {3, {3, 6, 4}, 3, {1, 6, 1}, 1},        {4, {1, 8, 64, 64}, 2, {64, 64}, -1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int form = 0; form < 5; form++) {
            /* 0: x*c + m; 1: m + c*x; 2: x/c + m; 3: x*c (no mask); 4: x + m (no scale) */
            rt_tensor *x = rt_rand(cases[c].xn, cases[c].xd, -4, 4), *m = rt_rand(cases[c].mn, cases[c].md, -3, 0);
            double sc = form == 2 ? 8.0 : 0.125;
            for (int fuse = 1; fuse >= 0; fuse--) {
                rt_graph *rg = rt_graph_new();
                rlx_node xn = rt_input(rg, RLX_F32, x), mn = rt_input(rg, RLX_F32, m);
                rlx_node cn = rlx_scalar(rg->g, RLX_F32, sc);
                rlx_node t;
                switch (form) {
                case 0: t = rlx_add(rg->g, rlx_mul(rg->g, xn, cn), mn); break;
                case 1: t = rlx_add(rg->g, mn, rlx_mul(rg->g, cn, xn)); break;
                case 2: t = rlx_add(rg->g, rlx_div(rg->g, xn, cn), mn); break;
                case 3: t = rlx_mul(rg->g, xn, cn); break;
                default: t = rlx_add(rg->g, xn, mn); break;
                }
                rlx_node y = rlx_softmax(rg->g, t, cases[c].axis);
                rt_tensor *xs = rt_clone(x);
                for (int64_t i = 0; i < xs->n; i++)
                    xs->d[i] = form == 2 ? xs->d[i] / sc : form == 4 ? xs->d[i] : xs->d[i] * sc;
                rt_tensor *tr = form == 3 ? rt_clone(xs) : rt_zip(xs, m, rt_f_add);
                rt_tensor *want[1] = {rt_ref_softmax(tr, cases[c].axis, 0)};
                char what[128];
                snprintf(what, sizeof what, "softmax(scale/mask form %d) %s mask %s axis %d", form,
                         rt_shape_str(x->ndim, x->dims), rt_shape_str(m->ndim, m->dims), cases[c].axis);
                bad += run_check(rg, 1, &y, want, what, fuse);
                rt_free(xs);
                rt_free(tr);
                rt_free(want[0]);
                rt_graph_free(rg);
            }
            rt_free(x);
            rt_free(m);
        }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ SwiGLU */

static void test_swiglu(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t xd[3];
        int64_t E, F;
    } shapes[] = {{2, {5, 16}, 16, 24}, {3, {2, 7, 32}, 32, 64}, {2, {1, 8}, 8, 8}, {3, {1, 100, 64}, 64, 172}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int order = 0; order < 3; order++) { /* 2: the gate matmul is also an output */
            rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].xd, -1, 1);
            rt_tensor *wg = rt_rand(RT_SHAPE(shapes[s].E, shapes[s].F), -0.4, 0.4);
            rt_tensor *wu = rt_rand(RT_SHAPE(shapes[s].E, shapes[s].F), -0.4, 0.4);
            for (int fuse = 1; fuse >= 0; fuse--) {
                rt_graph *rg = rt_graph_new();
                rlx_node xn = rt_input(rg, RLX_F32, x), gn = rt_param(rg, RLX_F32, wg), un = rt_param(rg, RLX_F32, wu);
                rlx_node gate = rlx_matmul(rg->g, xn, gn, 0, 0), up = rlx_matmul(rg->g, xn, un, 0, 0);
                rlx_node sg = rlx_silu(rg->g, gate);
                rlx_node outs[2] = {order == 1 ? rlx_mul(rg->g, up, sg) : rlx_mul(rg->g, sg, up), gate};
                rt_tensor *gr = rt_ref_matmul(x, wg, 0, 0), *ur = rt_ref_matmul(x, wu, 0, 0);
                rt_tensor *sr = rt_map(gr, rt_f_silu);
                rt_tensor *want[2] = {rt_zip(sr, ur, rt_f_mul), gr};
                char what[128];
                snprintf(what, sizeof what, "swiglu x %s F %lld order %d", rt_shape_str(x->ndim, x->dims),
                         (long long)shapes[s].F, order);
                bad += run_check(rg, order == 2 ? 2 : 1, outs, want, what, fuse);
                rt_free(ur);
                rt_free(sr);
                free_all(want, 2);
                rt_graph_free(rg);
            }
            rt_free(x);
            rt_free(wg);
            rt_free(wu);
        }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ conv + bn + act */

static void test_conv_bn_act(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int sp;
        int64_t xd[4], wd[4];
        int64_t stride, pad, groups;
    } cases[] = {
        {2, {2, 3, 9, 9}, {8, 3, 3, 3}, 1, 1, 1},      {2, {1, 8, 12, 10}, {8, 1, 3, 3}, 2, 1, 8},
        {2, {2, 4, 6, 6}, {6, 2, 1, 1}, 1, 0, 2},      {1, {2, 4, 20}, {5, 4, 3}, 2, 1, 1},
        {2, {1, 16, 28, 28}, {32, 16, 3, 3}, 1, 1, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int form = 0; form < 5; form++) {
            /* 0: relu(conv + bias); 1: relu(bn(conv)) with constant bn; 2: silu(bn(conv + bias)) constant bn;
             * 3: bn(conv) with bound (param) bn; 4: conv + bias, no act */
            int nd = cases[c].sp + 2;
            int64_t O = cases[c].wd[0];
            rt_tensor *x = rt_rand(nd, cases[c].xd, -1, 1), *w = rt_rand(nd, cases[c].wd, -0.5, 0.5);
            rt_tensor *bias = rt_rand(1, &O, -0.5, 0.5);
            rt_tensor *sc = rt_rand(1, &O, 0.5, 2), *bb = rt_rand(1, &O, -1, 1);
            rt_tensor *mu = rt_rand(1, &O, -0.5, 0.5), *va = rt_rand(1, &O, 0.2, 2);
            rlx_conv_params p;
            rlx_conv_params_init(&p);
            for (int i = 0; i < 2; i++)
                p.stride[i] = cases[c].stride;
            for (int i = 0; i < 4; i++)
                p.pads[i] = cases[c].pad;
            p.groups = cases[c].groups;
            for (int fuse = 1; fuse >= 0; fuse--) {
                rt_graph *rg = rt_graph_new();
                rlx_node xn = rt_input(rg, RLX_F32, x);
                rlx_node wn = form == 3 ? rt_param(rg, RLX_F32, w) : rt_const(rg, RLX_F32, w);
                int has_bias = form == 0 || form == 2 || form == 4;
                rlx_node bn = has_bias ? rt_const(rg, RLX_F32, bias) : -1;
                rlx_node y = rlx_conv(rg->g, xn, wn, bn, &p);
                if (form >= 1 && form <= 3) {
                    rlx_node (*leaf)(rt_graph *, rlx_dtype, rt_tensor *) = form == 3 ? rt_param : rt_const;
                    y = rlx_batch_norm(rg->g, y, leaf(rg, RLX_F32, sc), leaf(rg, RLX_F32, bb), leaf(rg, RLX_F32, mu),
                                       leaf(rg, RLX_F32, va), 1e-5);
                }
                if (form == 0 || form == 1)
                    y = rlx_relu(rg->g, y);
                if (form == 2)
                    y = rlx_silu(rg->g, y);
                rt_tensor *r = rt_ref_conv(x, w, has_bias ? bias : NULL, &p);
                if (form >= 1 && form <= 3) {
                    rt_tensor *t = rt_ref_batch_norm(r, sc, bb, mu, va, 1e-5);
                    rt_free(r);
                    r = t;
                }
                rt_tensor *want[1] = {act_ref(r, form == 0 || form == 1 ? 1 : form == 2 ? 4 : 0)};
                char what[160];
                snprintf(what, sizeof what, "conv+bn+act form %d x %s w %s", form, rt_shape_str(x->ndim, x->dims),
                         rt_shape_str(w->ndim, w->dims));
                bad += run_check(rg, 1, &y, want, what, fuse);
                rt_free(r);
                rt_free(want[0]);
                rt_graph_free(rg);
            }
            rt_tensor *all[] = {x, w, bias, sc, bb, mu, va};
            free_all(all, 7);
        }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ elementwise chains */

static void test_elementwise_chains(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t d[3];
    } shapes[] = {{2, {7, 9}}, {1, {1}}, {3, {4, 50, 33}}, {1, {70001}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int keep = 0; keep < 2; keep++) {
            int64_t last = shapes[s].d[shapes[s].ndim - 1];
            rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].d, -2, 2),
                      *y = rt_rand(shapes[s].ndim, shapes[s].d, -2, 2);
            rt_tensor *row = rt_rand(1, &last, 0.5, 1.5);
            for (int fuse = 1; fuse >= 0; fuse--) {
                rt_graph *rg = rt_graph_new();
                rlx_node xn = rt_input(rg, RLX_F32, x), yn = rt_input(rg, RLX_F32, y), rn = rt_param(rg, RLX_F32, row);
                rlx_node half = rlx_scalar(rg->g, RLX_F32, 0.5);
                /* ((tanh(x) * row + y) * 0.5 - sigmoid(y)) -> exp(-|.|), then max with x */
                rlx_node a = rlx_mul(rg->g, rlx_tanh(rg->g, xn), rn);
                rlx_node b = rlx_add(rg->g, a, yn);
                rlx_node c = rlx_sub(rg->g, rlx_mul(rg->g, b, half), rlx_sigmoid(rg->g, yn));
                rlx_node d = rlx_exp(rg->g, rlx_neg(rg->g, rlx_abs(rg->g, c)));
                rlx_node e = rlx_max(rg->g, d, xn);
                rlx_node outs[2] = {e, b};
                rt_tensor *t1 = rt_map(x, rt_f_tanh), *ar = rt_zip(t1, row, rt_f_mul), *br = rt_zip(ar, y, rt_f_add);
                rt_tensor *hb = rt_clone(br);
                for (int64_t i = 0; i < hb->n; i++)
                    hb->d[i] *= 0.5;
                rt_tensor *sy = rt_map(y, rt_f_sigmoid), *cr = rt_zip(hb, sy, rt_f_sub);
                rt_tensor *dr = rt_clone(cr);
                for (int64_t i = 0; i < dr->n; i++)
                    dr->d[i] = exp(-fabs(dr->d[i]));
                rt_tensor *want[2] = {rt_zip(dr, x, rt_f_max), br};
                char what[96];
                snprintf(what, sizeof what, "elementwise chain %s%s", rt_shape_str(x->ndim, x->dims),
                         keep ? " (inner value kept)" : "");
                bad += run_check(rg, keep ? 2 : 1, outs, want, what, fuse);
                rt_tensor *tmp[] = {t1, ar, hb, sy, cr, dr};
                free_all(tmp, 6);
                free_all(want, 2);
                rt_graph_free(rg);
            }
            rt_free(x);
            rt_free(y);
            rt_free(row);
        }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ attention block */

typedef struct block_case {
    int64_t B, S, E, H, Hkv, d;
    int bias, qk_norm, rope, causal;
} block_case;

/* An f32 chain of the ops the CPU computes in f32 blocks (add, sub, mul,
 * div, max, min, relu, neg, abs) and a transcendental one (exp, through
 * the unary kernel's f32 math), a row vector and a scalar, rows of 300 (a
 * block of 256 and a tail): bit for bit what the unfused nodes give. */
static void test_chain_f32_exact(void **state)
{
    (void)state;
    rt_tensor *x = rt_rand(RT_SHAPE(3, 300), -3, 3), *y = rt_rand(RT_SHAPE(3, 300), 0.5, 2);
    rt_tensor *row = rt_rand(RT_SHAPE(300), -1, 1), *got[2] = {0};
    for (int fuse = 1; fuse >= 0; fuse--) {
        rt_graph *rg = rt_graph_new();
        rg->opts.no_fusion = !fuse;
        rg->opts.ignore_env = 1;
        rlx_graph *g = rg->g;
        rlx_node xn = rt_input(rg, RLX_F32, x), yn = rt_input(rg, RLX_F32, y), rn = rt_param(rg, RLX_F32, row);
        rlx_node a = rlx_div(g, rlx_sub(g, rlx_mul(g, xn, rn), rlx_scalar(g, RLX_F32, 0.3)), yn);
        rlx_node b = rlx_max(g, rlx_relu(g, a), rlx_neg(g, rlx_abs(g, rn)));
        rlx_node c = rlx_min(g, rlx_add(g, b, rlx_exp(g, rlx_neg(g, yn))), xn);
        assert_int_equal(rt_run(rg, 1, &c, &got[fuse]), RLX_OK);
        rt_graph_free(rg);
    }
    assert_true(rt_check_tol("f32 chain, fused against unfused", got[1], got[0], 0, 0));
    rt_free(got[0]);
    rt_free(got[1]);
    rt_free(x);
    rt_free(y);
    rt_free(row);
}

/* Hard-swish as PaddleOCR's exporter writes it, between scalar affines
 * (x * clip(x + 3, 0, 6) / 6 with x = s * v + t, then * s2 + t2; x read
 * twice inside the chain, the clip as max/min), and a square through
 * pow(., 2): one chain, rows of 300 (a block and a tail), against the
 * float64 reference and bit for bit against the unfused nodes. */
static void test_chain_hardswish_pow(void **state)
{
    (void)state;
    rt_tensor *v = rt_rand(RT_SHAPE(5, 300), -6, 6), *got[2] = {0};
    const double s = 0.8, t = 0.3, s2 = 1.1, t2 = -0.2;
    rt_tensor *want = rt_clone(v);
    for (int64_t i = 0; i < want->n; i++) {
        double x = (double)(float)(s * (double)v->d[i]);
        x = (double)(float)(x + t);
        double c = fmin(fmax((double)(float)(x + 3), 0), 6);
        double h = (double)(float)((double)(float)(x * c) / 6);
        double a = (double)(float)((double)(float)(h * s2) + t2);
        want->d[i] = a * a;
    }
    for (int fuse = 1; fuse >= 0; fuse--) {
        rt_graph *rg = rt_graph_new();
        rg->opts.no_fusion = !fuse;
        rg->opts.ignore_env = 1;
        rlx_graph *g = rg->g;
#define SC(c) rlx_scalar(g, RLX_F32, (c))
        rlx_node x = rlx_add(g, rlx_mul(g, SC(s), rt_input(rg, RLX_F32, v)), SC(t));
        rlx_node h = rlx_div(g, rlx_mul(g, x, rlx_clip(g, rlx_add(g, x, SC(3)), 0, 6)), SC(6));
        rlx_node y = rlx_pow(g, rlx_add(g, rlx_mul(g, h, SC(s2)), SC(t2)), SC(2));
#undef SC
        assert_int_equal(rt_run(rg, 1, &y, &got[fuse]), RLX_OK);
        rt_graph_free(rg);
    }
    assert_true(rt_check("hard-swish chain", got[1], want, RLX_F32));
    assert_true(rt_check_tol("hard-swish chain, fused against unfused", got[1], got[0], 0, 0));
    rt_tensor *tmp[] = {v, want, got[0], got[1]};
    free_all(tmp, 4);
}

/* Hard-swish alone, x * clip(x + 3, 0, 6) / 6 (the CPU runs it as one
 * pass): rows of 300, values around the clip's corners, a NaN and both
 * infinities; and written with max/min, a NaN bound, whose clip is NaN
 * throughout.  Against the float64 reference, and the unfused nodes bit
 * for bit. */
static void test_chain_hardswish_alone(void **state)
{
    (void)state;
    for (int nan_bound = 0; nan_bound < 2; nan_bound++) {
        rt_tensor *v = rt_rand(RT_SHAPE(5, 300), -7, 7), *got[2] = {0};
        v->d[7] = NAN, v->d[301] = INFINITY, v->d[602] = -INFINITY;
        for (int fuse = 1; fuse >= 0; fuse--) {
            rt_graph *rg = rt_graph_new();
            rg->opts.no_fusion = !fuse;
            rg->opts.ignore_env = 1;
            rlx_graph *g = rg->g;
            rlx_node x = rt_input(rg, RLX_F32, v), a = rlx_add(g, x, rlx_scalar(g, RLX_F32, 3)), c;
            if (nan_bound)
                c = rlx_min(g, rlx_max(g, a, rlx_scalar(g, RLX_F32, NAN)), rlx_scalar(g, RLX_F32, 6));
            else
                c = rlx_clip(g, a, 0, 6);
            rlx_node y = rlx_div(g, rlx_mul(g, x, c), rlx_scalar(g, RLX_F32, 6));
            assert_int_equal(rt_run(rg, 1, &y, &got[fuse]), RLX_OK);
            rt_graph_free(rg);
        }
        rt_tensor *want = rt_clone(v); /* v as f32, once bound */
        for (int64_t i = 0; i < want->n; i++) {
            double x = v->d[i], c = (double)(float)(x + 3);
            c = nan_bound || isnan(c) ? NAN : fmin(fmax(c, 0), 6);
            want->d[i] = (double)(float)((double)(float)(x * c) / 6);
        }
        assert_true(rt_check("hard-swish alone", got[1], want, RLX_F32));
        assert_true(rt_check_tol("hard-swish alone, fused against unfused", got[1], got[0], 0, 0));
        rt_tensor *tmp[] = {v, want, got[0], got[1]};
        free_all(tmp, 4);
    }
}

/* An SE gate's chain, x * clip(g + 3, 0, 6) / 6 + 2 * m with g per channel
 * [1, 1, 1, C] and m per (batch, channel) [N, 1, 1, C]: the CPU computes
 * the steps on g once per worker (their operands repeat block after
 * block) and the steps on m again wherever m's values change.  Rows of 200
 * (a block per row) and of 24 (several rows per block, a block across the
 * batch boundary); against the float64 reference and the unfused nodes
 * bit for bit. */
static void test_chain_repeated_operands(void **state)
{
    (void)state;
    const int64_t widths[] = {200, 24};
    for (int c = 0; c < 2; c++) {
        const int64_t C = widths[c];
        rt_tensor *x = rt_rand(RT_SHAPE(2, 5, 7, C), -2, 2), *gt = rt_rand(RT_SHAPE(1, 1, 1, C), -5, 5);
        rt_tensor *m = rt_rand(RT_SHAPE(2, 1, 1, C), -1, 1), *got[2] = {0};
        for (int fuse = 1; fuse >= 0; fuse--) {
            rt_graph *rg = rt_graph_new();
            rg->opts.no_fusion = !fuse;
            rg->opts.ignore_env = 1;
            rlx_graph *g = rg->g;
#define SC(v) rlx_scalar(g, RLX_F32, (v))
            rlx_node xn = rt_input(rg, RLX_F32, x), gn = rt_input(rg, RLX_F32, gt), mn = rt_input(rg, RLX_F32, m);
            rlx_node gate = rlx_div(g, rlx_min(g, rlx_max(g, rlx_add(g, gn, SC(3)), SC(0)), SC(6)), SC(6));
            rlx_node y = rlx_add(g, rlx_mul(g, xn, gate), rlx_mul(g, mn, SC(2)));
#undef SC
            assert_int_equal(rt_run(rg, 1, &y, &got[fuse]), RLX_OK);
            rt_graph_free(rg);
        }
        rt_tensor *want = rt_clone(x);
        for (int64_t i = 0; i < want->n; i++) {
            int64_t ch = i % C, b = i / (want->n / 2);
            double gv = fmin(fmax(gt->d[ch] + 3, 0), 6) / 6;
            want->d[i] = x->d[i] * gv + 2 * m->d[b * C + ch];
        }
        char what[96];
        snprintf(what, sizeof what, "gate chain, rows of %lld", (long long)C);
        assert_true(rt_check(what, got[1], want, RLX_F32));
        assert_true(rt_check_tol(what, got[1], got[0], 0, 0));
        rt_tensor *tmp[] = {x, gt, m, want, got[0], got[1]};
        free_all(tmp, 6);
    }
}

/* Chains whose operands broadcast along other dims than the last (a
 * per-channel [C, 1, 1] operand, a middle broadcast, two operands each
 * smaller than the result, dims of 1): the CPU merges dims where every
 * operand allows, and each form must match the float64 reference, and the
 * unfused nodes bit for bit. */
static void test_chain_broadcasts(void **state)
{
    (void)state;
    const struct {
        int nd[4];
        int64_t d[4][4]; /* x, c, m, y */
    } cases[] = {
        {{4, 3, 2, 4}, {{2, 4, 5, 3}, {4, 1, 1}, {5, 1}, {2, 4, 5, 3}}},
        {{4, 4, 1, 4}, {{2, 4, 5, 3}, {2, 1, 5, 3}, {3}, {2, 4, 5, 3}}},
        {{4, 4, 1, 4}, {{1, 4, 1, 3}, {2, 1, 5, 1}, {1}, {1, 1, 5, 3}}},
        {{4, 4, 4, 4}, {{2, 4, 1, 1}, {2, 4, 1, 1}, {1, 4, 1, 1}, {2, 1, 1, 1}}},
        {{4, 1, 1, 4}, {{1, 64, 7, 7}, {1}, {1}, {1, 64, 7, 7}}},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rt_tensor *in[4];
        for (int k = 0; k < 4; k++)
            in[k] = rt_rand(cases[i].nd[k], cases[i].d[k], -2, 2);
        /* (relu(x + c) * m - y) then exp(-|.|) */
        rt_tensor *a = rt_zip(in[0], in[1], rt_f_add), *b = rt_map(a, rt_f_relu), *d = rt_zip(b, in[2], rt_f_mul);
        rt_tensor *want = rt_zip(d, in[3], rt_f_sub);
        for (int64_t j = 0; j < want->n; j++)
            want->d[j] = exp(-fabs(want->d[j]));
        rt_tensor *got[2] = {0};
        for (int fuse = 1; fuse >= 0; fuse--) {
            rt_graph *rg = rt_graph_new();
            rlx_graph *g = rg->g;
            rlx_node n[4];
            for (int k = 0; k < 4; k++)
                n[k] = k % 2 ? rt_param(rg, RLX_F32, in[k]) : rt_input(rg, RLX_F32, in[k]);
            rlx_node e = rlx_sub(g, rlx_mul(g, rlx_relu(g, rlx_add(g, n[0], n[1])), n[2]), n[3]);
            e = rlx_exp(g, rlx_neg(g, rlx_abs(g, e)));
            char what[96];
            snprintf(what, sizeof what, "broadcast chain %s + %s (fusion %s)", rt_shape_str(in[0]->ndim, in[0]->dims),
                     rt_shape_str(in[1]->ndim, in[1]->dims), fuse ? "on" : "off");
            rg->opts.no_fusion = !fuse;
            rg->opts.ignore_env = 1;
            rlx_status st = rt_run(rg, 1, &e, &got[fuse]);
            bad += !rt_check(what, st == RLX_OK ? got[fuse] : NULL, want, RLX_F32);
            rt_graph_free(rg);
        }
        if (got[0] && got[1])
            bad += !rt_check_tol("broadcast chain, fused against unfused", got[1], got[0], 0, 0);
        rt_tensor *tmp[] = {a, b, d, want, got[0], got[1], in[0], in[1], in[2], in[3]};
        free_all(tmp, 10);
    }
    assert_int_equal(bad, 0);
}

/* Projection: x [B,S,E] @ w [E, h*d] (+ b) -> [B,S,h,d] -> [rms norm over d] -> [B,h,S,d] -> [rope]. */
static rlx_node proj_node(rlx_graph *g, rlx_node x, rlx_node w, rlx_node b, rlx_node gamma, const block_case *c,
                          int64_t heads, int rope)
{
    rlx_node t = rlx_matmul(g, x, w, 0, 0);
    if (b >= 0)
        t = rlx_add(g, t, b);
    t = rlx_reshape(g, t, 4, (int64_t[]){c->B, c->S, heads, c->d});
    if (gamma >= 0)
        t = rlx_rms_norm(g, t, gamma, 1e-6);
    t = rlx_transpose(g, t, (int[]){0, 2, 1, 3});
    if (rope)
        t = rlx_rope(g, t, 10000.0, 0, 0);
    return t;
}

static rt_tensor *proj_ref(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b, const rt_tensor *gamma,
                           const block_case *c, int64_t heads, int rope)
{
    rt_tensor *t = rt_ref_matmul(x, w, 0, 0);
    if (b) {
        rt_tensor *u = rt_zip(t, b, rt_f_add);
        rt_free(t);
        t = u;
    }
    rt_tensor *u = rt_ref_reshape(t, 4, (int64_t[]){c->B, c->S, heads, c->d});
    rt_free(t);
    t = u;
    if (gamma) {
        u = rt_ref_rms_norm(t, gamma, 1e-6);
        rt_free(t);
        t = u;
    }
    u = rt_ref_transpose(t, (int[]){0, 2, 1, 3});
    rt_free(t);
    t = u;
    if (rope) {
        u = rt_ref_rope(t, 10000.0, 0, 0);
        rt_free(t);
        t = u;
    }
    return t;
}

static void test_attention_block(void **state)
{
    (void)state;
    int bad = 0;
    const block_case cases[] = {
        {1, 4, 16, 2, 2, 8, 0, 0, 0, 0},
        {2, 5, 32, 4, 2, 8, 1, 0, 1, 1}, /* GQA, biases, rope, causal */
        {1, 6, 32, 4, 4, 8, 0, 1, 1, 1}, /* q/k norm */
        {2, 3, 24, 3, 1, 8, 1, 1, 0, 0}, /* MQA */
        {1, 33, 64, 4, 2, 16, 1, 0, 1, 1},
        {2, 150, 64, 8, 4, 8, 1, 0, 1, 1}, /* f32: 16 heads of three tiles, keys transposed once per key head */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const block_case *c = &cases[ci];
        double ws = 1.0 / sqrt((double)c->E);
        rt_tensor *x = rt_rand(RT_SHAPE(c->B, c->S, c->E), -1, 1);
        rt_tensor *wq = rt_rand(RT_SHAPE(c->E, c->H * c->d), -ws, ws);
        rt_tensor *wk = rt_rand(RT_SHAPE(c->E, c->Hkv * c->d), -ws, ws);
        rt_tensor *wv = rt_rand(RT_SHAPE(c->E, c->Hkv * c->d), -ws, ws);
        rt_tensor *wo = rt_rand(RT_SHAPE(c->H * c->d, c->E), -ws, ws);
        rt_tensor *bq = rt_rand(RT_SHAPE(c->H * c->d), -0.2, 0.2), *bk = rt_rand(RT_SHAPE(c->Hkv * c->d), -0.2, 0.2);
        rt_tensor *bv = rt_rand(RT_SHAPE(c->Hkv * c->d), -0.2, 0.2), *bo = rt_rand(RT_SHAPE(c->E), -0.2, 0.2);
        rt_tensor *gq = rt_rand(RT_SHAPE(c->d), 0.5, 1.5), *gk = rt_rand(RT_SHAPE(c->d), 0.5, 1.5);
        for (int fuse = 1; fuse >= 0; fuse--) {
            rt_graph *rg = rt_graph_new();
            rlx_graph *g = rg->g;
            rlx_node xn = rt_input(rg, RLX_F32, x);
            rlx_node wqn = rt_param(rg, RLX_F32, wq), wkn = rt_param(rg, RLX_F32, wk), wvn = rt_param(rg, RLX_F32, wv);
            rlx_node won = rt_param(rg, RLX_F32, wo);
            rlx_node bqn = c->bias ? rt_param(rg, RLX_F32, bq) : -1, bkn = c->bias ? rt_param(rg, RLX_F32, bk) : -1;
            rlx_node bvn = c->bias ? rt_param(rg, RLX_F32, bv) : -1, bon = c->bias ? rt_param(rg, RLX_F32, bo) : -1;
            rlx_node gqn = c->qk_norm ? rt_param(rg, RLX_F32, gq) : -1,
                     gkn = c->qk_norm ? rt_param(rg, RLX_F32, gk) : -1;
            rlx_node q = proj_node(g, xn, wqn, bqn, gqn, c, c->H, c->rope);
            rlx_node k = proj_node(g, xn, wkn, bkn, gkn, c, c->Hkv, c->rope);
            rlx_node v = proj_node(g, xn, wvn, bvn, -1, c, c->Hkv, 0);
            rlx_node a = rlx_attention(g, q, k, v, -1, c->causal, 0);
            a = rlx_reshape(g, rlx_transpose(g, a, (int[]){0, 2, 1, 3}), 3, (int64_t[]){c->B, c->S, c->H * c->d});
            rlx_node y = rlx_matmul(g, a, won, 0, 0);
            if (c->bias)
                y = rlx_add(g, y, bon);

            rt_tensor *qr = proj_ref(x, wq, c->bias ? bq : NULL, c->qk_norm ? gq : NULL, c, c->H, c->rope);
            rt_tensor *kr = proj_ref(x, wk, c->bias ? bk : NULL, c->qk_norm ? gk : NULL, c, c->Hkv, c->rope);
            rt_tensor *vr = proj_ref(x, wv, c->bias ? bv : NULL, NULL, c, c->Hkv, 0);
            rt_tensor *ar = rt_ref_attention(qr, kr, vr, NULL, 0, c->causal, 0);
            rt_tensor *tr = rt_ref_transpose(ar, (int[]){0, 2, 1, 3});
            rt_tensor *rr = rt_ref_reshape(tr, 3, (int64_t[]){c->B, c->S, c->H * c->d});
            rt_tensor *yr = rt_ref_matmul(rr, wo, 0, 0);
            rt_tensor *want[1] = {c->bias ? rt_zip(yr, bo, rt_f_add) : rt_clone(yr)};
            char what[160];
            snprintf(what, sizeof what,
                     "attention block B%lld S%lld E%lld H%lld Hkv%lld bias %d qk_norm %d rope %d causal %d",
                     (long long)c->B, (long long)c->S, (long long)c->E, (long long)c->H, (long long)c->Hkv, c->bias,
                     c->qk_norm, c->rope, c->causal);
            bad += run_check(rg, 1, &y, want, what, fuse);
            rt_tensor *tmp[] = {qr, kr, vr, ar, tr, rr, yr, want[0]};
            free_all(tmp, 8);
            rt_graph_free(rg);
        }
        rt_tensor *all[] = {x, wq, wk, wv, wo, bq, bk, bv, bo, gq, gk};
        free_all(all, 11);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_matmul_bias_act, rt_setup),
        cmocka_unit_test_setup(test_matmul_packed, rt_setup),
        cmocka_unit_test_setup(test_act_tails, rt_setup),
        cmocka_unit_test_setup(test_add_norm, rt_setup),
        cmocka_unit_test_setup(test_softmax_scale_mask, rt_setup),
        cmocka_unit_test_setup(test_swiglu, rt_setup),
        cmocka_unit_test_setup(test_conv_bn_act, rt_setup),
        cmocka_unit_test_setup(test_elementwise_chains, rt_setup),
        cmocka_unit_test_setup(test_chain_f32_exact, rt_setup),
        cmocka_unit_test_setup(test_chain_hardswish_pow, rt_setup),
        cmocka_unit_test_setup(test_chain_hardswish_alone, rt_setup),
        cmocka_unit_test_setup(test_chain_repeated_operands, rt_setup),
        cmocka_unit_test_setup(test_chain_broadcasts, rt_setup),
        cmocka_unit_test_setup(test_attention_block, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
