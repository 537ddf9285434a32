/* The same ops under every compile option that changes how they run (no
 * buffer reuse, no in-place, no simplify, no fusion, pinned ancestors, 1 or
 * 2 threads, mixed precision), repeated runs of one session, and outputs
 * that alias inputs, views or each other; all against the float64
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

/* A small transformer-ish block: y = softmax(gelu(ln(x) @ w1 + b1) @ w2 + x),
 * plus a reduction and an elementwise output that reads x again. */
typedef struct block {
    rt_tensor *x, *w1, *b1, *w2, *g;
    rt_tensor *want[3];
} block;

/* The block's three outputs for input x (the block's weights). */
static void block_ref(const block *b, const rt_tensor *x, rt_tensor *want[3])
{
    rt_tensor *ln = rt_ref_layer_norm(x, b->g, NULL, 1e-5);
    rt_tensor *h = rt_ref_matmul(ln, b->w1, 0, 0), *hb = rt_zip(h, b->b1, rt_f_add), *ge = rt_map(hb, rt_f_gelu);
    rt_tensor *o = rt_ref_matmul(ge, b->w2, 0, 0), *r = rt_zip(o, x, rt_f_add);
    want[0] = rt_ref_softmax(r, -1, 0);
    want[1] = rt_ref_reduce(r, RT_MEAN, 1, (int[]){0}, 0);
    want[2] = rt_map(x, rt_f_exp);
    rt_tensor *tmp[] = {ln, h, hb, ge, o, r};
    for (size_t i = 0; i < sizeof tmp / sizeof tmp[0]; i++)
        rt_free(tmp[i]);
}

static void block_init(block *b, int64_t M, int64_t E, int64_t F)
{
    b->x = rt_rand(RT_SHAPE(M, E), -2, 2);
    b->w1 = rt_rand(RT_SHAPE(E, F), -0.3, 0.3);
    b->b1 = rt_rand(RT_SHAPE(F), -0.5, 0.5);
    b->w2 = rt_rand(RT_SHAPE(F, E), -0.3, 0.3);
    b->g = rt_rand(RT_SHAPE(E), 0.5, 1.5);
    rt_quantize(b->x, RLX_F32);
    rt_quantize(b->w1, RLX_F32);
    rt_quantize(b->b1, RLX_F32);
    rt_quantize(b->w2, RLX_F32);
    rt_quantize(b->g, RLX_F32);
    block_ref(b, b->x, b->want);
}

static void block_free(block *b)
{
    rt_tensor *all[] = {b->x, b->w1, b->b1, b->w2, b->g, b->want[0], b->want[1], b->want[2]};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_free(all[i]);
}

static void block_build(rt_graph *rg, block *b, rlx_node outs[3])
{
    rlx_graph *g = rg->g;
    rlx_node x = rt_input(rg, RLX_F32, b->x);
    rlx_node ln = rlx_layer_norm(g, x, rt_param(rg, RLX_F32, b->g), -1, 1e-5);
    rlx_node h =
        rlx_gelu(g, rlx_add(g, rlx_matmul(g, ln, rt_param(rg, RLX_F32, b->w1), 0, 0), rt_param(rg, RLX_F32, b->b1)));
    rlx_node r = rlx_add(g, rlx_matmul(g, h, rt_param(rg, RLX_F32, b->w2), 0, 0), x);
    outs[0] = rlx_softmax(g, r, -1);
    outs[1] = rlx_reduce_mean(g, r, 1, (int[]){0}, 0);
    outs[2] = rlx_exp(g, x); /* x dies here: a candidate for in-place */
}

static int check_block(rt_graph *rg, block *b, const char *what, double rtol, double atol)
{
    rlx_node outs[3];
    block_build(rg, b, outs);
    rt_tensor *got[3] = {0};
    rlx_status st = rt_run(rg, 3, outs, got);
    int bad = st != RLX_OK;
    for (int i = 0; i < 3; i++) {
        char w[128];
        snprintf(w, sizeof w, "%s output %d", what, i);
        bad += !rt_check_tol(w, st == RLX_OK ? got[i] : NULL, b->want[i], rtol, atol);
        rt_free(got[i]);
    }
    return bad;
}

static void test_option_matrix(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t sizes[][3] = {{8, 32, 64}, {130, 64, 256}};
    for (int sz = 0; sz < 2; sz++) {
        block b;
        block_init(&b, sizes[sz][0], sizes[sz][1], sizes[sz][2]);
        for (int v = 0; v < 10; v++) {
            rt_graph *rg = rt_graph_new();
            rlx_options *o = &rg->opts;
            o->ignore_env = 1;
            const char *name = "default";
            switch (v) {
            case 1:
                o->no_reuse = 1;
                name = "no_reuse";
                break;
            case 2:
                o->no_inplace = 1;
                name = "no_inplace";
                break;
            case 3:
                o->no_simplify = 1;
                name = "no_simplify";
                break;
            case 4:
                o->no_fusion = 1;
                name = "no_fusion";
                break;
            case 5:
                o->pin_output_ancestors = 1;
                name = "pin_output_ancestors";
                break;
            case 6:
                o->threads = 1;
                name = "threads 1";
                break;
            case 7:
                o->threads = 2;
                name = "threads 2";
                break;
            case 8:
                o->threads = 3;
                name = "threads 3";
                break;
            case 9:
                o->no_reuse = o->no_inplace = o->no_simplify = o->no_fusion = 1;
                name = "everything off";
                break;
            default: break;
            }
            char what[96];
            snprintf(what, sizeof what, "block %lldx%lld, %s", (long long)sizes[sz][0], (long long)sizes[sz][1], name);
            bad += check_block(rg, &b, what, 1e-5, 1e-5);
            rt_graph_free(rg);
        }
        block_free(&b);
    }
    assert_int_equal(bad, 0);
}

/* Mixed precision: the result of a 16-bit compile is close to the f32 one
 * (tolerance of the storage type, five ops deep). */
static void test_precision(void **state)
{
    (void)state;
    int bad = 0;
    block b;
    block_init(&b, 16, 32, 64);
    const rlx_precision pr[] = {RLX_PRECISION_F16, RLX_PRECISION_BF16};
    for (int p = 0; p < 2; p++) {
        rt_graph *rg = rt_graph_new();
        rg->opts.precision = pr[p];
        rg->opts.ignore_env = 1;
        double tol = p == 0 ? 5e-3 : 5e-2;
        bad += check_block(rg, &b, p == 0 ? "block, precision f16" : "block, precision bf16", tol, tol);
        rt_graph_free(rg);
    }
    block_free(&b);
    assert_int_equal(bad, 0);
}

/* One session run several times: inputs and params must survive the runs
 * (no kernel may write into them), new inputs give new results. */
static void test_repeated_runs(void **state)
{
    (void)state;
    block b;
    block_init(&b, 8, 32, 64);
    rt_tensor *x1 = rt_rand(RT_SHAPE(8, 32), -2, 2);
    rt_quantize(x1, RLX_F32);
    rt_tensor *want1[3];
    block_ref(&b, x1, want1);

    rt_graph *rg = rt_graph_new();
    rlx_node outs[3];
    block_build(rg, &b, outs);
    const char *names[3] = {"y", "m", "e"};
    for (int i = 0; i < 3; i++)
        assert_int_equal(rlx_output(rg->g, names[i], outs[i]), RLX_OK);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(rg->g, &rg->opts, &s), RLX_OK);
    for (int i = 0; i < rg->n_bind; i++) {
        size_t bytes;
        void *buf = rt_pack(rg->bind[i].t, RLX_F32, &bytes);
        if (rg->bind[i].kind)
            assert_int_equal(rlx_session_set_param(s, rg->bind[i].name, buf, bytes), RLX_OK);
        else
            assert_int_equal(rlx_session_set_input(s, rg->bind[i].name, buf, bytes), RLX_OK);
        free(buf);
    }
    int bad = 0;
    for (int run = 0; run < 5; run++) {
        /* runs 0-2 with the first x (set once), run 3 with another x, run 4 with the first again */
        int second = run == 3;
        if (run >= 3) {
            size_t bytes;
            void *buf = rt_pack(second ? x1 : b.x, RLX_F32, &bytes);
            assert_int_equal(rlx_session_set_input(s, rg->bind[0].name, buf, bytes), RLX_OK);
            free(buf);
        }
        assert_int_equal(rlx_session_run(s), RLX_OK);
        for (int i = 0; i < 3; i++) {
            rlx_tensor_info info;
            assert_int_equal(rlx_session_find(s, 2, names[i], &info), RLX_OK);
            float *buf = malloc(info.bytes + 4);
            assert_int_equal(rlx_session_get_output(s, names[i], buf, info.bytes), RLX_OK);
            rt_tensor *got = rt_unpack(RLX_F32, info.ndim, info.dims, buf);
            char what[64];
            snprintf(what, sizeof what, "run %d output %s", run, names[i]);
            bad += !rt_check(what, got, second ? want1[i] : b.want[i], RLX_F32);
            rt_free(got);
            free(buf);
        }
    }
    for (int i = 0; i < 3; i++)
        rt_free(want1[i]);
    rt_free(x1);
    rlx_session_free(s);
    rt_graph_free(rg);
    block_free(&b);
    assert_int_equal(bad, 0);
}

/* Outputs that are inputs, views of inputs, constants, the same node twice,
 * or also read by later nodes. */
static void test_output_aliases(void **state)
{
    (void)state;
    int bad = 0;
    for (int opt = 0; opt < 2; opt++) {
        rt_graph *rg = rt_graph_new();
        rg->opts.no_simplify = opt;
        rt_tensor *x = rt_rand(RT_SHAPE(3, 4), -2, 2), *c = rt_rand(RT_SHAPE(2, 2), -1, 1);
        rlx_node xn = rt_input(rg, RLX_F32, x), cn = rt_const(rg, RLX_F32, c);
        rlx_node view = rlx_reshape(rg->g, xn, 2, (int64_t[]){4, 3});
        rlx_node sl = rlx_slice(rg->g, xn, 1, (int[]){0}, (int64_t[]){1}, (int64_t[]){3}, (int64_t[]){1});
        rlx_node e = rlx_exp(rg->g, xn);
        rlx_node later = rlx_mul(rg->g, e, e);
        rlx_node outs[7] = {xn, view, cn, e, e, later, sl};
        rt_tensor *got[7] = {0};
        rlx_status st = rt_run(rg, 7, outs, got);
        rt_tensor *er = rt_map(x, rt_f_exp);
        rt_tensor *want[7] = {rt_clone(x),
                              rt_ref_reshape(x, 2, (int64_t[]){4, 3}),
                              rt_clone(c),
                              rt_clone(er),
                              rt_clone(er),
                              rt_zip(er, er, rt_f_mul),
                              rt_ref_slice(x, 1, (int[]){0}, (int64_t[]){1}, (int64_t[]){3}, (int64_t[]){1})};
        const char *names[7] = {
            "input as output", "reshape view as output", "constant as output", "exp", "exp again (same node twice)",
            "exp read later",  "slice view as output"};
        for (int i = 0; i < 7; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s%s", names[i], opt ? " (no simplify)" : "");
            bad += !rt_check(what, st == RLX_OK ? got[i] : NULL, want[i], RLX_F32);
            rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_free(er);
        rt_free(x);
        rt_free(c);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* Ops whose operands are all constants: the compile folds them (the
 * simplify pass evaluates them once); the folded values must equal the
 * reference, with folding on and off. */
static void test_folded_ops(void **state)
{
    (void)state;
    int bad = 0;
    for (int nofold = 0; nofold < 2; nofold++) {
        rt_graph *rg = rt_graph_new();
        rg->opts.no_simplify = nofold;
        rg->opts.ignore_env = 1;
        rlx_graph *g = rg->g;
        rt_tensor *a = rt_rand(RT_SHAPE(3, 4, 5), -2, 2), *b = rt_rand(RT_SHAPE(5, 6), -1, 1);
        rt_tensor *idx = rt_randi(RT_SHAPE(2, 2), -3, 3), *img = rt_rand(RT_SHAPE(1, 2, 6, 6), -1, 1);
        rt_tensor *w = rt_rand(RT_SHAPE(3, 2, 3, 3), -1, 1);
        rt_tensor *ib = rt_randi(RT_SHAPE(3, 4), -50, 50), *jb = rt_randi(RT_SHAPE(4), 1, 9);
        rlx_node an = rt_const(rg, RLX_F32, a), bnode = rt_const(rg, RLX_F32, b), in = rt_const(rg, RLX_I64, idx);
        rlx_node imn = rt_const(rg, RLX_F32, img), wn = rt_const(rg, RLX_F32, w);
        rlx_node ibn = rt_const(rg, RLX_I32, ib), jbn = rt_const(rg, RLX_I32, jb);
        rlx_conv_params cp;
        rlx_conv_params_init(&cp);
        cp.pads[0] = cp.pads[1] = cp.pads[2] = cp.pads[3] = 1;
        rlx_pool_params pp;
        rlx_pool_params_init(&pp, 2);
        const int perm[3] = {2, 0, 1};
        rlx_node outs[12] = {
            rlx_matmul(g, an, bnode, 0, 0),
            rlx_reduce_sum(g, an, 2, (int[]){0, -1}, 1),
            rlx_softmax(g, an, 1),
            rlx_transpose(g, an, perm),
            rlx_gather(g, an, in, 1),
            rlx_slice(g, an, 1, (int[]){2}, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-2}),
            rlx_conv(g, imn, wn, -1, &cp),
            rlx_max_pool(g, imn, &pp),
            rlx_layer_norm(g, an, -1, -1, 1e-5),
            rlx_div(g, ibn, jbn),
            rlx_mod(g, ibn, jbn, 0),
            rlx_argmax(g, an, -1, 0),
        };
        rt_tensor *got[12] = {0};
        rlx_status st = rt_run(rg, 12, outs, got);
        rt_tensor *want[12] = {
            rt_ref_matmul(a, b, 0, 0),
            rt_ref_reduce(a, RT_SUM, 2, (int[]){0, -1}, 1),
            rt_ref_softmax(a, 1, 0),
            rt_ref_transpose(a, perm),
            rt_ref_gather(a, idx, 1),
            rt_ref_slice(a, 1, (int[]){2}, (int64_t[]){-1}, (int64_t[]){INT64_MIN}, (int64_t[]){-2}),
            rt_ref_conv(img, w, NULL, &cp),
            rt_ref_pool(img, &pp, 1),
            rt_ref_layer_norm(a, NULL, NULL, 1e-5),
            rt_zip(ib, jb, rt_f_idiv),
            rt_zip(ib, jb, rt_f_mod_py),
            rt_ref_arg(a, -1, 0, 1),
        };
        const char *names[12] = {"matmul", "reduce_sum", "softmax",    "transpose", "gather",  "slice",
                                 "conv",   "max_pool",   "layer_norm", "i32 div",   "i32 mod", "argmax"};
        const rlx_dtype dts[12] = {RLX_F32, RLX_F32, RLX_F32, RLX_F32, RLX_F32, RLX_F32,
                                   RLX_F32, RLX_F32, RLX_F32, RLX_I32, RLX_I32, RLX_I64};
        for (int i = 0; i < 12; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s of constants (%s)", names[i], nofold ? "no simplify" : "folded");
            bad += !rt_check(what, st == RLX_OK ? got[i] : NULL, want[i], dts[i]);
            rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_tensor *all[] = {a, b, idx, img, w, ib, jb};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            rt_free(all[i]);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* Constants and scalars of every dtype come back exactly. */
static void test_constants_all_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    for (int dt = 0; dt < RLX_DTYPE_COUNT; dt++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *c =
            dt == RLX_BOOL ? rt_randb(RT_SHAPE(2, 3), 0.5) : rt_randi(RT_SHAPE(2, 3), dt == RLX_U8 ? 0 : -100, 100);
        rlx_node cn = rt_const(rg, (rlx_dtype)dt, c);
        double sv = dt == RLX_BOOL ? 1 : dt == RLX_U8 ? 7 : -7;
        rlx_node sn = rlx_scalar(rg->g, (rlx_dtype)dt, sv);
        rlx_node outs[2] = {cn, rlx_expand(rg->g, sn, 2, (int64_t[]){2, 2})};
        rt_tensor *got[2] = {0};
        rlx_status st = rt_run(rg, 2, outs, got);
        rt_tensor *sw = rt_new(2, (int64_t[]){2, 2});
        for (int i = 0; i < 4; i++)
            sw->d[i] = sv;
        char what[64];
        snprintf(what, sizeof what, "constant %s", rlx_dtype_name((rlx_dtype)dt));
        bad += !rt_check_tol(what, st == RLX_OK ? got[0] : NULL, c, 0, 0);
        snprintf(what, sizeof what, "scalar %s", rlx_dtype_name((rlx_dtype)dt));
        bad += !rt_check_tol(what, st == RLX_OK ? got[1] : NULL, sw, 0, 0);
        rt_free(got[0]);
        rt_free(got[1]);
        rt_free(sw);
        rt_free(c);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_option_matrix, rt_setup),
        cmocka_unit_test_setup(test_precision, rt_setup),
        cmocka_unit_test_setup(test_repeated_runs, rt_setup),
        cmocka_unit_test_setup(test_output_aliases, rt_setup),
        cmocka_unit_test_setup(test_folded_ops, rt_setup),
        cmocka_unit_test_setup(test_constants_all_dtypes, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
