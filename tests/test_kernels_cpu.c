/* CPU kernel families beyond f32: reductions, norms, shape ops, attention,
 * convolution, pooling over every dtype their shape inference admits, with
 * empty tensors, size-1 dims and threads; exact integer reductions; NaN in
 * argmax; gather's range error; the random ops' determinism and moments.
 * Against the float64 reference of tests/support. */
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

static const rlx_dtype k_float_dts[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_F64};
static const rlx_dtype k_int_dts[] = {RLX_I64, RLX_I32, RLX_I8, RLX_U8};
#define NELEM(a) (int)(sizeof(a) / sizeof((a)[0]))

static int check1(rt_graph *rg, rlx_node y, rt_tensor *want, rlx_dtype dt, const char *what)
{
    rt_tensor *got = rt_run1(rg, y);
    int ok = got && rt_check(what, got, want, dt);
    if (!got)
        fprintf(stderr, "%s: no result\n", what);
    rt_free(got);
    return !ok;
}

/* ------------------------------------------------------------ reductions */

typedef rlx_node (*reduce_fn)(rlx_graph *, rlx_node, int, const int *, int);

static void test_reduce_dtypes(void **state)
{
    (void)state;
    static const struct {
        int ndim;
        int64_t dims[4];
        int naxes;
        int axes[3];
    } cases[] = {
        {3, {2, 3, 4}, 1, {1}},
        {3, {2, 3, 4}, 2, {0, 2}},
        {3, {2, 1, 4}, 1, {-1}},
        {2, {5, 7}, 0, {0}},
        {4, {2, 3, 1, 5}, 2, {1, 3}},
        {2, {0, 4}, 1, {1}},
        {2, {3, 0}, 1, {0}},
        {1, {1}, 1, {0}},
        /* innermost dim kept and long: whole-row accumulation, chunked */
        {2, {3, 40}, 1, {0}},
        {3, {4, 3, 17}, 1, {1}},
        {3, {2, 5, 20}, 2, {0, 1}},
        {2, {3, 300}, 1, {0}},
        {4, {2, 3, 2, 33}, 2, {0, 2}},
    };
    static const struct {
        const char *name;
        reduce_fn op;
        rt_reduce kind;
    } ops[] = {{"sum", rlx_reduce_sum, RT_SUM},
               {"mean", rlx_reduce_mean, RT_MEAN},
               {"max", rlx_reduce_max, RT_MAX},
               {"min", rlx_reduce_min, RT_MIN},
               {"prod", rlx_reduce_prod, RT_PROD}};
    int bad = 0;
    for (int o = 0; o < NELEM(ops); o++)
        for (int c = 0; c < NELEM(cases); c++)
            for (int keep = 0; keep < 2; keep++)
                for (int di = 0; di < NELEM(k_float_dts) + NELEM(k_int_dts); di++) {
                    int is_int = di >= NELEM(k_float_dts);
                    rlx_dtype dt = is_int ? k_int_dts[di - NELEM(k_float_dts)] : k_float_dts[di];
                    if (is_int && ops[o].kind == RT_MEAN)
                        continue;
                    int empty_red = 0;
                    for (int a = 0; a < cases[c].naxes; a++) {
                        int ax = cases[c].axes[a] < 0 ? cases[c].axes[a] + cases[c].ndim : cases[c].axes[a];
                        empty_red |= cases[c].dims[ax] == 0;
                    }
                    if (cases[c].naxes == 0)
                        empty_red = rt_numel(cases[c].ndim, cases[c].dims) == 0;
                    if (empty_red && (ops[o].kind == RT_MAX || ops[o].kind == RT_MIN))
                        continue;
                    rt_graph *rg = rt_graph_new();
                    rt_tensor *x;
                    if (is_int)
                        x = rt_randi(cases[c].ndim, cases[c].dims, dt == RLX_U8 ? 0 : -3, 4);
                    else if (ops[o].kind == RT_PROD)
                        x = rt_rand(cases[c].ndim, cases[c].dims, 0.7, 1.3);
                    else
                        x = rt_rand(cases[c].ndim, cases[c].dims, -2, 2);
                    rlx_node y = ops[o].op(rg->g, rt_input(rg, dt, x), cases[c].naxes, cases[c].axes, keep);
                    rt_tensor *want = rt_ref_reduce(x, ops[o].kind, cases[c].naxes, cases[c].axes, keep);
                    rt_quantize(want, dt);
                    char what[128];
                    snprintf(what, sizeof what, "reduce_%s %s %s keep %d", ops[o].name, rlx_dtype_name(dt),
                             rt_shape_str(cases[c].ndim, cases[c].dims), keep);
                    bad += check1(rg, y, want, dt, what);
                    rt_free(want);
                    rt_free(x);
                    rt_graph_free(rg);
                }
    assert_int_equal(bad, 0);
}

/* Runs a one-input graph through the raw API (exact bytes in and out). */
static rlx_status run_raw(rlx_graph *g, const char *in, const void *x, size_t xb, void *y, size_t yb, int threads)
{
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.threads = threads;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    if (st == RLX_OK && in)
        st = rlx_session_set_input(s, in, x, xb);
    if (st == RLX_OK)
        st = rlx_session_run(s);
    if (st == RLX_OK)
        st = rlx_session_get_output(s, "y", y, yb);
    rlx_session_free(s);
    return st;
}

static void test_reduce_i64_exact(void **state)
{
    (void)state;
    int64_t x[4] = {(INT64_C(1) << 60) + 1, (INT64_C(1) << 60) + 3, -(INT64_C(1) << 61), 7};
    int64_t sum = 0, mx, mn, prod;
    rlx_graph *g = rlx_graph_new();
    rlx_node xi = rlx_input(g, "x", RLX_I64, 1, (int64_t[]){4});
    rlx_output(g, "y", rlx_reduce_sum(g, xi, 0, NULL, 0));
    assert_int_equal(run_raw(g, "x", x, sizeof x, &sum, 8, 1), RLX_OK);
    assert_true(sum == 11);
    rlx_graph_free(g);
    g = rlx_graph_new();
    xi = rlx_input(g, "x", RLX_I64, 1, (int64_t[]){4});
    rlx_output(g, "y", rlx_reduce_max(g, xi, 0, NULL, 0));
    assert_int_equal(run_raw(g, "x", x, sizeof x, &mx, 8, 1), RLX_OK);
    assert_true(mx == (INT64_C(1) << 60) + 3);
    rlx_graph_free(g);
    g = rlx_graph_new();
    xi = rlx_input(g, "x", RLX_I64, 1, (int64_t[]){4});
    rlx_output(g, "y", rlx_reduce_min(g, xi, 0, NULL, 0));
    assert_int_equal(run_raw(g, "x", x, sizeof x, &mn, 8, 1), RLX_OK);
    assert_true(mn == -(INT64_C(1) << 61));
    rlx_graph_free(g);
    int64_t p[3] = {(INT64_C(1) << 40) + 1, 3, -5};
    g = rlx_graph_new();
    xi = rlx_input(g, "x", RLX_I64, 1, (int64_t[]){3});
    rlx_output(g, "y", rlx_reduce_prod(g, xi, 0, NULL, 0));
    assert_int_equal(run_raw(g, "x", p, sizeof p, &prod, 8, 1), RLX_OK);
    assert_true(prod == ((INT64_C(1) << 40) + 1) * -15);
    rlx_graph_free(g);
}

static void test_argmax_nan_ties_ints(void **state)
{
    (void)state;
    int bad = 0;
    /* ties: first occurrence; NaN: the first NaN for both */
    double vals[12] = {1, 3, 3, 0, NAN, 2, NAN, 5, -1, -1, 4, -1};
    rt_tensor *x = rt_from(RT_SHAPE(3, 4), vals);
    for (int is_max = 0; is_max < 2; is_max++)
        for (int axis = 0; axis < 2; axis++) {
            rt_graph *rg = rt_graph_new();
            rlx_node xn = rt_input(rg, RLX_F32, x);
            rlx_node y = is_max ? rlx_argmax(rg->g, xn, axis, 0) : rlx_argmin(rg->g, xn, axis, 0);
            rt_tensor *got = rt_run1(rg, y);
            /* expected by hand */
            double want_r[2][2][4] = {
                /* argmin */ {{2, 1, 1, 0}, {3, 0, 0, 0}},
                /* argmax */ {{1, 1, 1, 1}, {1, 0, 3, 0}},
            };
            int n = axis == 0 ? 4 : 3;
            rt_tensor *want = rt_from(1, (int64_t[]){n}, want_r[is_max][axis]);
            /* NaN rows/cols: numpy picks the first NaN */
            if (axis == 0) { /* columns: col0 {1,NaN,-1}, col1 {3,2,-1}, col2 {3,NaN,4}, col3 {0,5,-1} */
                double wmin[4] = {1, 2, 1, 2}, wmax[4] = {1, 0, 1, 1};
                memcpy(want->d, is_max ? wmax : wmin, sizeof wmin);
            } else { /* rows: {1,3,3,0}, {NaN,2,NaN,5}, {-1,-1,4,-1} */
                double wmin[3] = {3, 0, 0}, wmax[3] = {1, 0, 2};
                memcpy(want->d, is_max ? wmax : wmin, sizeof wmin);
            }
            bad += !rt_check(is_max ? "argmax nan/ties" : "argmin nan/ties", got, want, RLX_I64);
            rt_free(got);
            rt_free(want);
            rt_graph_free(rg);
        }
    rt_free(x);
    for (int di = 0; di < NELEM(k_int_dts); di++)
        for (int is_max = 0; is_max < 2; is_max++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *xi = rt_randi(RT_SHAPE(3, 5, 4), 0, 6);
            rlx_node xn = rt_input(rg, k_int_dts[di], xi);
            rlx_node y = is_max ? rlx_argmax(rg->g, xn, 1, 1) : rlx_argmin(rg->g, xn, 1, 1);
            rt_tensor *want = rt_ref_arg(xi, 1, 1, is_max);
            bad += check1(rg, y, want, RLX_I64, "argmax/argmin ints");
            rt_free(want);
            rt_free(xi);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

/* ----------------------------------------------------------------- norms */

static void test_softmax_dtypes_axes(void **state)
{
    (void)state;
    int bad = 0;
    for (int di = 0; di < NELEM(k_float_dts); di++)
        for (int axis = -3; axis < 3; axis++)
            for (int lg = 0; lg < 2; lg++) {
                rlx_dtype dt = k_float_dts[di];
                rt_graph *rg = rt_graph_new();
                rt_tensor *x = rt_rand(RT_SHAPE(3, 1, 6), -4, 4);
                rlx_node xn = rt_input(rg, dt, x);
                rlx_node y = lg ? rlx_log_softmax(rg->g, xn, axis) : rlx_softmax(rg->g, xn, axis);
                rt_tensor *want = rt_ref_softmax(x, axis, lg);
                rt_quantize(want, dt);
                bad += check1(rg, y, want, dt, lg ? "log_softmax" : "softmax");
                rt_free(want);
                rt_free(x);
                rt_graph_free(rg);
            }
    /* empty */
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(0, 5), -1, 1);
    rlx_node y = rlx_softmax(rg->g, rt_input(rg, RLX_F32, x), 1);
    rt_tensor *want = rt_ref_softmax(x, 1, 0);
    bad += check1(rg, y, want, RLX_F32, "softmax empty");
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    assert_int_equal(bad, 0);
}

static void test_norms_big_threads(void **state)
{
    (void)state;
    int bad = 0;
    for (int threads = 1; threads <= 3; threads += 2) {
        rt_graph *rg = rt_graph_new();
        rg->opts.threads = threads;
        rt_tensor *x = rt_rand(RT_SHAPE(64, 40, 33), -3, 3);
        rt_tensor *gm = rt_rand(RT_SHAPE(33), 0.5, 1.5), *bt = rt_rand(RT_SHAPE(33), -1, 1);
        rlx_node xn = rt_input(rg, RLX_F32, x);
        rlx_node outs[4] = {rlx_layer_norm(rg->g, xn, rt_param(rg, RLX_F32, gm), rt_param(rg, RLX_F32, bt), 1e-5),
                            rlx_rms_norm(rg->g, xn, -1, 1e-6), rlx_softmax(rg->g, xn, 1),
                            rlx_reduce_sum(rg->g, xn, 2, (int[]){0, 2}, 0)};
        rt_tensor *got[4] = {0};
        assert_int_equal(rt_run(rg, 4, outs, got), RLX_OK);
        rt_tensor *want[4] = {rt_ref_layer_norm(x, gm, bt, 1e-5), rt_ref_rms_norm(x, NULL, 1e-6),
                              rt_ref_softmax(x, 1, 0), rt_ref_reduce(x, RT_SUM, 2, (int[]){0, 2}, 0)};
        for (int i = 0; i < 4; i++) {
            bad += !rt_check("norms/threads", got[i], want[i], RLX_F32);
            rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_free(x);
        rt_free(gm);
        rt_free(bt);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------- shape ops */

static const rlx_dtype k_all_dts[] = {RLX_F32, RLX_F16, RLX_BF16, RLX_F64, RLX_I64, RLX_I32, RLX_I8, RLX_U8, RLX_BOOL};

static rt_tensor *rand_for(rlx_dtype dt, int ndim, const int64_t *dims)
{
    if (dt == RLX_BOOL)
        return rt_randb(ndim, dims, 0.5);
    if (dt == RLX_U8)
        return rt_randi(ndim, dims, 0, 200);
    if (dt == RLX_I8 || dt == RLX_I32 || dt == RLX_I64)
        return rt_randi(ndim, dims, -100, 100);
    return rt_rand(ndim, dims, -2, 2);
}

static void test_shape_ops_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    for (int di = 0; di < NELEM(k_all_dts); di++) {
        rlx_dtype dt = k_all_dts[di];
        rt_tensor *x = rand_for(dt, RT_SHAPE(2, 3, 1, 4, 5));
        rt_tensor *x2 = rand_for(dt, RT_SHAPE(2, 3, 1, 2, 5));
        rt_tensor *idx = rt_randi(RT_SHAPE(2, 3), -4, 4);
        rt_graph *rg = rt_graph_new();
        rlx_node xn = rt_input(rg, dt, x), x2n = rt_input(rg, dt, x2), in = rt_input(rg, RLX_I32, idx);
        const int perm[5] = {4, 0, 3, 2, 1};
        const int sax[3] = {0, 3, 4};
        const int64_t st[3] = {-1, 3, 0}, en[3] = {-3, -5, 5}, sp[3] = {-1, -2, 2};
        const int64_t pads[10] = {1, 0, 0, 2, 1, 0, 2, 1, 1, 3};
        const int64_t pads_r[10] = {1, 2, 0, 3, 4, 0, 1, 0, 2, 1};
        rlx_node outs[8] = {
            rlx_transpose(rg->g, xn, perm),
            rlx_slice(rg->g, xn, 3, sax, st, en, sp),
            rlx_concat(rg->g, 2, (rlx_node[]){xn, x2n}, 3),
            rlx_gather(rg->g, xn, in, 3),
            rlx_expand(rg->g, x2n, 6, (int64_t[]){2, 2, 3, 4, 2, 5}),
            rlx_pad(rg->g, xn, pads, RLX_PAD_CONSTANT, 1.0),
            rlx_pad(rg->g, xn, pads_r, RLX_PAD_REFLECT, 0),
            rlx_pad(rg->g, xn, pads, RLX_PAD_EDGE, 0),
        };
        rt_tensor *got[8] = {0};
        if (rt_run(rg, 8, outs, got) != RLX_OK) {
            bad++;
        } else {
            const rt_tensor *cx[2] = {x, x2};
            rt_tensor *want[8] = {rt_ref_transpose(x, perm),
                                  rt_ref_slice(x, 3, sax, st, en, sp),
                                  rt_ref_concat(2, cx, 3),
                                  rt_ref_gather(x, idx, 3),
                                  rt_ref_expand(x2, 6, (int64_t[]){2, 2, 3, 4, 2, 5}),
                                  rt_ref_pad(x, pads, RLX_PAD_CONSTANT, 1.0),
                                  rt_ref_pad(x, pads_r, RLX_PAD_REFLECT, 0),
                                  rt_ref_pad(x, pads, RLX_PAD_EDGE, 0)};
            static const char *names[8] = {"transpose", "slice", "concat", "gather",
                                           "expand",    "pad c", "pad r",  "pad e"};
            for (int i = 0; i < 8; i++) {
                char what[64];
                snprintf(what, sizeof what, "%s %s", names[i], rlx_dtype_name(dt));
                bad += !rt_check(what, got[i], want[i], dt);
                rt_free(want[i]);
            }
        }
        for (int i = 0; i < 8; i++)
            rt_free(got[i]);
        rt_free(x);
        rt_free(x2);
        rt_free(idx);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* transposes that take the tiled path (the source's unit-stride dim moves
 * outward), every element size */
static void test_transpose_tiled(void **state)
{
    (void)state;
    int bad = 0;
    static const struct {
        int ndim;
        int64_t dims[4];
        int perm[4];
    } cases[] = {
        {3, {3, 20, 37}, {2, 0, 1}},
        {4, {2, 9, 5, 11}, {0, 3, 2, 1}},
        {2, {70, 45}, {1, 0}},
        {3, {8, 1, 8}, {2, 1, 0}},
    };
    for (int c = 0; c < NELEM(cases); c++)
        for (int di = 0; di < NELEM(k_all_dts); di++) {
            rlx_dtype dt = k_all_dts[di];
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rand_for(dt, cases[c].ndim, cases[c].dims);
            rlx_node y = rlx_transpose(rg->g, rt_input(rg, dt, x), cases[c].perm);
            rt_tensor *want = rt_ref_transpose(x, cases[c].perm);
            char what[64];
            snprintf(what, sizeof what, "transpose tiled case %d %s", c, rlx_dtype_name(dt));
            bad += check1(rg, y, want, dt, what);
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

static void test_shape_ops_empty(void **state)
{
    (void)state;
    int bad = 0;
    rt_tensor *x = rt_rand(RT_SHAPE(3, 0, 2), -1, 1);
    rt_tensor *e = rt_rand(RT_SHAPE(0, 4), -1, 1);
    rt_tensor *ids = rt_randi(RT_SHAPE(0), 0, 1);
    rt_graph *rg = rt_graph_new();
    rlx_node xn = rt_input(rg, RLX_F32, x), en = rt_input(rg, RLX_F32, e);
    const int64_t pads[6] = {0, 1, 2, 1, 2, 0};
    rlx_node outs[5] = {
        rlx_transpose(rg->g, xn, (int[]){2, 1, 0}),           rlx_pad(rg->g, xn, pads, RLX_PAD_CONSTANT, 7.0),
        rlx_gather(rg->g, en, rt_input(rg, RLX_I64, ids), 0), rlx_concat(rg->g, 2, (rlx_node[]){xn, xn}, 1),
        rlx_expand(rg->g, en, 3, (int64_t[]){2, 0, 4}),
    };
    rt_tensor *got[5] = {0};
    assert_int_equal(rt_run(rg, 5, outs, got), RLX_OK);
    const rt_tensor *cx[2] = {x, x};
    rt_tensor *want[5] = {rt_ref_transpose(x, (int[]){2, 1, 0}), rt_ref_pad(x, pads, RLX_PAD_CONSTANT, 7.0),
                          rt_ref_gather(e, ids, 0), rt_ref_concat(2, cx, 1), rt_ref_expand(e, 3, (int64_t[]){2, 0, 4})};
    for (int i = 0; i < 5; i++) {
        bad += !rt_check("empty shape op", got[i], want[i], RLX_F32);
        rt_free(got[i]);
        rt_free(want[i]);
    }
    rt_free(x);
    rt_free(e);
    rt_free(ids);
    rt_graph_free(rg);
    assert_int_equal(bad, 0);
}

static void test_gather_out_of_range(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node d = rlx_input(g, "d", RLX_F32, 2, (int64_t[]){5, 3});
    rlx_node i = rlx_constant(g, RLX_I64, 1, (int64_t[]){2}, (int64_t[]){1, 5}, 16);
    rlx_output(g, "y", rlx_gather(g, d, i, 0));
    float dv[15] = {0}, y[6];
    rlx_status st = run_raw(g, "d", dv, sizeof dv, y, sizeof y, 1);
    assert_int_equal(st, RLX_ERR_RUNTIME);
    assert_non_null(strstr(rlx_last_error(), "index 5 out of range [0, 5)"));
    rlx_graph_free(g);
}

/* ---------------------------------------------------------------- nn ops */

static void test_attention_edges(void **state)
{
    (void)state;
    int bad = 0;
    static const struct {
        int64_t B, H, Hk, S, T, D, Dv;
        int causal, mask; /* 0 none, 1 bool, 2 float */
        int64_t md[4];
    } cases[] = {
        {1, 4, 2, 5, 3, 8, 6, 1, 0, {0}},                   /* S > T causal: first rows fully masked */
        {2, 6, 3, 3, 7, 4, 4, 1, 1, {2, 1, 3, 7}},          /* decode-like with bool padding mask */
        {2, 2, 1, 4, 4, 16, 8, 0, 2, {1, 1, 1, 4}},         /* float mask over keys */
        {1, 3, 3, 1, 9, 5, 5, 0, 1, {1, 3, 1, 1}},          /* bool mask per head */
        {1, 2, 2, 3, 0, 4, 4, 0, 0, {0}},                   /* no keys: zeros */
        {1, 1, 1, 100, 120, 16, 8, 1, 1, {1, 1, 100, 120}}, /* one head: queries split over threads */
        {1, 2, 1, 66, 70, 8, 40, 1, 2, {1, 2, 66, 70}},     /* f32: a 64-row tile, then 2 rows scored key by key */
        /* f32: 16 heads, an item each (4 threads), of three tiles (64, 64, 23
         * rows: blocks of 8 and 4 rows and single rows; 151 keys, the head's
         * keys transposed tile by tile as the causal cut widens), two query
         * heads on each key head */
        {2, 8, 4, 151, 151, 24, 40, 1, 0, {0}},
        {2, 3, 1, 45, 53, 32, 17, 0, 2, {2, 1, 45, 53}}, /* f32: one tile of 45 rows, 53 keys, a float mask */
    };
    /* f32 runs the AVX-512 build of the tile kernels where the processor has
     * it; the second pass keeps to the AVX2 build */
    for (int isa = 0; isa < 2; isa++)
        for (int c = 0; c < NELEM(cases); c++)
            for (int di = 0; di < NELEM(k_float_dts); di++) {
                rlx_dtype dt = k_float_dts[di];
                if (isa == 1 && dt != RLX_F32)
                    continue;
                if (isa == 1)
                    setenv("RLX_CPU_NO_AVX512", "1", 1);
                rt_graph *rg = rt_graph_new();
                rg->opts.threads = 4;
                rt_tensor *q = rt_rand(RT_SHAPE(cases[c].B, cases[c].H, cases[c].S, cases[c].D), -1, 1);
                rt_tensor *k = rt_rand(RT_SHAPE(cases[c].B, cases[c].Hk, cases[c].T, cases[c].D), -1, 1);
                rt_tensor *v = rt_rand(RT_SHAPE(cases[c].B, cases[c].Hk, cases[c].T, cases[c].Dv), -1, 1);
                rt_tensor *m = NULL;
                rlx_node mn = -1;
                if (cases[c].mask == 1) {
                    m = rt_randb(4, cases[c].md, 0.6);
                    mn = rt_input(rg, RLX_BOOL, m);
                } else if (cases[c].mask == 2) {
                    m = rt_rand(4, cases[c].md, -2, 1);
                    mn = rt_input(rg, dt, m);
                }
                rlx_node y = rlx_attention(rg->g, rt_input(rg, dt, q), rt_input(rg, dt, k), rt_input(rg, dt, v), mn,
                                           cases[c].causal, 0);
                rt_tensor *want =
                    rt_ref_attention(q, k, v, m, cases[c].mask == 1, cases[c].causal, 1.0 / sqrt((double)cases[c].D));
                /* a row with every key masked gives zeros (the reference's 0/0) */
                for (int64_t i = 0; i < want->n; i++)
                    if (isnan(want->d[i]))
                        want->d[i] = 0;
                rt_quantize(want, dt);
                char what[64];
                snprintf(what, sizeof what, "attention case %d %s%s", c, rlx_dtype_name(dt), isa ? " (AVX2)" : "");
                bad += check1(rg, y, want, dt, what);
                unsetenv("RLX_CPU_NO_AVX512");
                rt_free(want);
                rt_free(q);
                rt_free(k);
                rt_free(v);
                rt_free(m);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

/* f32: a key the bool mask hides weighs exactly 0, whatever its value
 * (here 1e37: a weight of exp(-87) instead of 0 would add about 0.16),
 * in the tile path (70 rows) and the key-row path, with and without
 * AVX-512 */
static void test_attention_hidden_huge_values(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t T = 40;
    for (int isa = 0; isa < 2; isa++)
        for (int64_t S = 1; S <= 70; S += 69) {
            if (isa == 1)
                setenv("RLX_CPU_NO_AVX512", "1", 1);
            rt_graph *rg = rt_graph_new();
            rt_tensor *q = rt_rand(RT_SHAPE(1, 2, S, 16), -1, 1), *k = rt_rand(RT_SHAPE(1, 2, T, 16), -1, 1);
            rt_tensor *v = rt_rand(RT_SHAPE(1, 2, T, 16), -1, 1), *m = rt_new(RT_SHAPE(1, 1, 1, T));
            for (int64_t j = 0; j < T; j++)
                m->d[j] = j < 5 || j > 9; /* keys 5..9 hidden */
            for (int64_t h = 0; h < 2; h++)
                for (int64_t j = 5; j <= 9; j++)
                    for (int64_t e = 0; e < 16; e++)
                        v->d[(h * T + j) * 16 + e] = 1e37;
            rlx_node y = rlx_attention(rg->g, rt_input(rg, RLX_F32, q), rt_input(rg, RLX_F32, k),
                                       rt_input(rg, RLX_F32, v), rt_input(rg, RLX_BOOL, m), 0, 0);
            rt_tensor *want = rt_ref_attention(q, k, v, m, 1, 0, 0.25);
            char what[64];
            snprintf(what, sizeof what, "attention hidden keys of 1e37, %lld rows%s", (long long)S,
                     isa ? " (AVX2)" : "");
            bad += check1(rg, y, want, RLX_F32, what);
            unsetenv("RLX_CPU_NO_AVX512");
            rt_tensor *all[] = {q, k, v, m, want};
            for (int i = 0; i < 5; i++)
                rt_free(all[i]);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

/* masks of rank < 4 broadcast from the right: [T], [S, T], [1, S, T] */
static void test_attention_low_rank_mask(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t B = 2, H = 4, Hk = 2, S = 3, T = 6, D = 8;
    const int ranks[3] = {1, 2, 3};
    for (int r = 0; r < 3; r++)
        for (int is_bool = 0; is_bool < 2; is_bool++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *q = rt_rand(RT_SHAPE(B, H, S, D), -1, 1);
            rt_tensor *k = rt_rand(RT_SHAPE(B, Hk, T, D), -1, 1);
            rt_tensor *v = rt_rand(RT_SHAPE(B, Hk, T, D), -1, 1);
            int64_t md[3];
            int nd = ranks[r];
            for (int i = 0; i < nd; i++)
                md[i] = i == nd - 1 ? T : i == nd - 2 ? S : 1;
            rt_tensor *m = is_bool ? rt_randb(nd, md, 0.6) : rt_rand(nd, md, -2, 1);
            rlx_node mn = rt_input(rg, is_bool ? RLX_BOOL : RLX_F32, m);
            rlx_node y = rlx_attention(rg->g, rt_input(rg, RLX_F32, q), rt_input(rg, RLX_F32, k),
                                       rt_input(rg, RLX_F32, v), mn, 1, 0.3);
            /* the reference takes a rank-4 mask: reshape ours to it */
            rt_tensor *m4 = rt_clone(m);
            m4->ndim = 4;
            m4->dims[3] = T;
            m4->dims[2] = nd >= 2 ? S : 1;
            m4->dims[1] = 1;
            m4->dims[0] = 1;
            rt_tensor *want = rt_ref_attention(q, k, v, m4, is_bool, 1, 0.3);
            for (int64_t i = 0; i < want->n; i++)
                if (isnan(want->d[i]))
                    want->d[i] = 0;
            char what[64];
            snprintf(what, sizeof what, "attention mask rank %d %s", nd, is_bool ? "bool" : "float");
            bad += check1(rg, y, want, RLX_F32, what);
            rt_free(want);
            rt_free(m4);
            rt_free(m);
            rt_free(q);
            rt_free(k);
            rt_free(v);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

static void test_rope_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    for (int di = 0; di < NELEM(k_float_dts); di++)
        for (int inter = 0; inter < 2; inter++) {
            rlx_dtype dt = k_float_dts[di];
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rt_rand(RT_SHAPE(2, 3, 5, 8), -1, 1);
            rlx_node y = rlx_rope(rg->g, rt_input(rg, dt, x), 10000.0, 7, inter);
            rt_tensor *want = rt_ref_rope(x, 10000.0, 7, inter);
            rt_quantize(want, dt);
            bad += check1(rg, y, want, dt, "rope dtypes");
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

static void test_conv_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    static const struct {
        int sp;
        int64_t N, C, O, G, H, W, kh, kw, s0, s1, d0, d1, p[4];
        int bias;
    } cases[] = {
        {2, 2, 4, 6, 2, 7, 6, 3, 2, 2, 1, 1, 2, {1, 0, 2, 1}, 1},
        {2, 1, 3, 3, 3, 5, 5, 3, 3, 1, 1, 1, 1, {1, 1, 1, 1}, 0}, /* depthwise */
        {2, 2, 5, 4, 1, 4, 3, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 1}, /* pointwise */
        {1, 2, 4, 4, 2, 1, 9, 1, 3, 2, 1, 2, 1, {2, 1, 0, 0}, 1},
        {2, 1, 2, 2, 1, 2, 2, 3, 3, 1, 1, 1, 1, {2, 2, 2, 2}, 0}, /* pads larger than input */
    };
    for (int c = 0; c < NELEM(cases); c++)
        for (int di = 0; di < NELEM(k_float_dts); di++) {
            rlx_dtype dt = k_float_dts[di];
            rt_graph *rg = rt_graph_new();
            rt_tensor *x, *w;
            rlx_conv_params p;
            rlx_conv_params_init(&p);
            p.groups = cases[c].G;
            if (cases[c].sp == 2) {
                x = rt_rand(RT_SHAPE(cases[c].N, cases[c].C, cases[c].H, cases[c].W), -1, 1);
                w = rt_rand(RT_SHAPE(cases[c].O, cases[c].C / cases[c].G, cases[c].kh, cases[c].kw), -1, 1);
                p.stride[0] = cases[c].s0;
                p.stride[1] = cases[c].s1;
                p.dilation[0] = cases[c].d0;
                p.dilation[1] = cases[c].d1;
                memcpy(p.pads, cases[c].p, sizeof p.pads);
            } else {
                x = rt_rand(RT_SHAPE(cases[c].N, cases[c].C, cases[c].W), -1, 1);
                w = rt_rand(RT_SHAPE(cases[c].O, cases[c].C / cases[c].G, cases[c].kw), -1, 1);
                p.stride[0] = cases[c].s0;
                p.dilation[0] = cases[c].d0;
                p.pads[0] = cases[c].p[0];
                p.pads[1] = cases[c].p[1];
            }
            rt_tensor *b = cases[c].bias ? rt_rand(RT_SHAPE(cases[c].O), -1, 1) : NULL;
            rlx_node y = rlx_conv(rg->g, rt_input(rg, dt, x), rt_param(rg, dt, w), b ? rt_param(rg, dt, b) : -1, &p);
            rt_tensor *want = rt_ref_conv(x, w, b, &p);
            rt_quantize(want, dt);
            char what[64];
            snprintf(what, sizeof what, "conv case %d %s", c, rlx_dtype_name(dt));
            rt_tensor *got = rt_run1(rg, y);
            double rtol, atol;
            rt_default_tol(dt, &rtol, &atol);
            /* f16/bf16 inputs are summed in f32: allow the sum's rounding */
            int ok = got && rt_check_tol(what, got, want, rtol * 2, atol * 4);
            bad += !ok;
            rt_free(got);
            rt_free(want);
            rt_free(x);
            rt_free(w);
            rt_free(b);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

static void test_pool_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    for (int di = 0; di < NELEM(k_float_dts); di++)
        for (int is_max = 0; is_max < 2; is_max++)
            for (int variant = 0; variant < 4; variant++) {
                rlx_dtype dt = k_float_dts[di];
                rt_graph *rg = rt_graph_new();
                rlx_pool_params p;
                rlx_pool_params_init(&p, 3);
                p.stride[0] = 2;
                p.stride[1] = variant & 1 ? 1 : 2;
                p.pads[0] = p.pads[1] = 1;
                p.pads[2] = variant & 2 ? 1 : 0;
                p.pads[3] = 2;
                p.ceil_mode = variant >> 1;
                p.count_include_pad = variant & 1;
                rt_tensor *x = rt_rand(RT_SHAPE(2, 3, 8, 7), -5, 5);
                rlx_node xn = rt_input(rg, dt, x);
                rlx_node y = is_max ? rlx_max_pool(rg->g, xn, &p) : rlx_avg_pool(rg->g, xn, &p);
                rt_tensor *want = rt_ref_pool(x, &p, is_max);
                rt_quantize(want, dt);
                char what[64];
                snprintf(what, sizeof what, "%s_pool variant %d %s", is_max ? "max" : "avg", variant,
                         rlx_dtype_name(dt));
                bad += check1(rg, y, want, dt, what);
                rt_free(want);
                rt_free(x);
                rt_graph_free(rg);
            }
    for (int di = 0; di < NELEM(k_float_dts); di++) {
        rlx_dtype dt = k_float_dts[di];
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(RT_SHAPE(2, 3, 17), -5, 5);
        rlx_node y = rlx_global_avg_pool(rg->g, rt_input(rg, dt, x));
        rt_tensor *want = rt_ref_global_avg_pool(x);
        rt_quantize(want, dt);
        bad += check1(rg, y, want, dt, "global_avg_pool 1d");
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* ---------------------------------------------------------------- random */

static void run_random(uint64_t seed, int threads, int runs, float *out, int64_t n)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node u = rlx_random_uniform(g, RLX_F32, 1, (int64_t[]){n}, -2, 6);
    rlx_node z = rlx_random_normal(g, RLX_F32, 1, (int64_t[]){n}, 1.5, 3.0);
    rlx_node ones = rlx_expand(g, rlx_scalar(g, RLX_F32, 1.0), 1, (int64_t[]){n});
    rlx_node d = rlx_dropout(g, ones, 0.25);
    rlx_output(g, "u", u);
    rlx_output(g, "z", z);
    rlx_output(g, "d", d);
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.threads = threads;
    o.seed = seed;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    for (int r = 0; r < runs; r++)
        assert_int_equal(rlx_session_run(s), RLX_OK);
    size_t b = (size_t)n * sizeof(float);
    assert_int_equal(rlx_session_get_output(s, "u", out, b), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "z", out + n, b), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "d", out + 2 * n, b), RLX_OK);
    rlx_session_free(s);
    rlx_graph_free(g);
}

static void test_random_ops(void **state)
{
    (void)state;
    const int64_t n = 100000;
    float *a = malloc(sizeof(float) * 3 * n), *b = malloc(sizeof(float) * 3 * n);
    assert_non_null(a);
    assert_non_null(b);
    run_random(42, 1, 1, a, n);
    run_random(42, 3, 1, b, n);
    assert_memory_equal(a, b, sizeof(float) * 3 * n); /* threads do not matter */
    run_random(42, 1, 2, b, n);
    int same = 0;
    for (int64_t i = 0; i < n; i++)
        same += a[i] == b[i];
    assert_true(same < 10); /* a second run draws new numbers */
    run_random(43, 1, 1, b, n);
    same = 0;
    for (int64_t i = 0; i < n; i++)
        same += a[i] == b[i];
    assert_true(same < 10); /* another seed too */

    double su = 0, su2 = 0, sz = 0, sz2 = 0, lo = 1e9, hi = -1e9;
    int64_t kept = 0, badval = 0;
    for (int64_t i = 0; i < n; i++) {
        su += a[i];
        su2 += (double)a[i] * a[i];
        lo = a[i] < lo ? a[i] : lo;
        hi = a[i] > hi ? a[i] : hi;
        sz += a[n + i];
        sz2 += (double)a[n + i] * a[n + i];
        float d = a[2 * n + i];
        if (d != 0)
            kept++;
        if (d != 0 && fabsf(d - 1.0f / 0.75f) > 1e-6f)
            badval++;
    }
    double mu = su / n, vu = su2 / n - mu * mu, mz = sz / n, vz = sz2 / n - mz * mz;
    assert_true(lo >= -2 && hi <= 6);
    assert_true(fabs(mu - 2.0) < 0.05);
    assert_true(fabs(vu - 64.0 / 12.0) < 0.1);
    assert_true(fabs(mz - 1.5) < 0.05);
    assert_true(fabs(sqrt(vz) - 3.0) < 0.05);
    assert_true(fabs((double)kept / n - 0.75) < 0.01);
    assert_int_equal(badval, 0);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reduce_dtypes, rt_setup),
        cmocka_unit_test_setup(test_reduce_i64_exact, rt_setup),
        cmocka_unit_test_setup(test_argmax_nan_ties_ints, rt_setup),
        cmocka_unit_test_setup(test_softmax_dtypes_axes, rt_setup),
        cmocka_unit_test_setup(test_norms_big_threads, rt_setup),
        cmocka_unit_test_setup(test_shape_ops_dtypes, rt_setup),
        cmocka_unit_test_setup(test_transpose_tiled, rt_setup),
        cmocka_unit_test_setup(test_shape_ops_empty, rt_setup),
        cmocka_unit_test_setup(test_gather_out_of_range, rt_setup),
        cmocka_unit_test_setup(test_attention_edges, rt_setup),
        cmocka_unit_test_setup(test_attention_hidden_huge_values, rt_setup),
        cmocka_unit_test_setup(test_attention_low_rank_mask, rt_setup),
        cmocka_unit_test_setup(test_rope_dtypes, rt_setup),
        cmocka_unit_test_setup(test_conv_dtypes, rt_setup),
        cmocka_unit_test_setup(test_pool_dtypes, rt_setup),
        cmocka_unit_test_setup(test_random_ops, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
