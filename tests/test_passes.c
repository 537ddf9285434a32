/* test_passes.c - each simplify pass on its own: what it removes (or, for
 * canon, rewrites), what it keeps, and that the graph computes the same
 * values afterwards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/runtime.h"

static int count_op(const rlx_graph *g, rlx_op op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += g->nodes[i].op == op;
    return c;
}

/* Runs g on the CPU with the given options; x is the input "x" [n] f32. */
static void run(const rlx_graph *g, int no_simplify, const float *x, size_t n, float *y, size_t ny)
{
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.no_simplify = no_simplify;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "x", x, n * 4), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, ny * 4), RLX_OK);
    rlx_session_free(s);
}

/* g computes the same with and without simplification: |y1 - y2| <= atol +
 * rel * |y2| on every element (x: the input "x" [n], ny outputs). */
static void assert_simplify_keeps_values(const rlx_graph *g, const float *x, size_t n, size_t ny, double atol,
                                         double rel)
{
    float *y1 = malloc(ny * sizeof *y1), *y2 = malloc(ny * sizeof *y2);
    assert_non_null(y1);
    assert_non_null(y2);
    run(g, 0, x, n, y1, ny);
    run(g, 1, x, n, y2, ny);
    for (size_t k = 0; k < ny; k++)
        assert_float_equal(y1[k], y2[k], atol + rel * fabsf(y2[k]));
    free(y1);
    free(y2);
}

static void random_floats(float *v, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* g simplified with constants folded by the CPU kernels (never NULL). */
static rlx_graph *simplified(const rlx_graph *g)
{
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 20};
    rlx_graph *s = rlx_simplify(g, &ctx);
    assert_non_null(s);
    return s;
}

/* assert_simplify_keeps_values on n random inputs from seed. */
static void assert_keeps_values_on_random(const rlx_graph *g, size_t n, size_t ny, unsigned seed, double atol,
                                          double rel)
{
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    random_floats(x, n, seed);
    assert_simplify_keeps_values(g, x, n, ny, atol, rel);
    free(x);
}

static void test_dce_removes_dead_keeps_inputs_and_params(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){8});
    rlx_node unused = rlx_param(g, "unused", RLX_F32, 1, (int64_t[]){8});
    rlx_node dead = rlx_exp(g, rlx_add(g, x, unused)); /* no output reads it */
    (void)dead;
    rlx_output(g, "y", rlx_tanh(g, x));
    rlx_graph *d = rlx_pass_dce(g, NULL);
    assert_non_null(d);
    assert_int_equal(d->n_nodes, 3); /* x, unused (a param stays settable), tanh */
    assert_int_equal(count_op(d, RLX_OP_EXP), 0);
    assert_int_equal(count_op(d, RLX_OP_PARAM), 1);
    assert_int_equal(d->n_outputs, 1);
    assert_int_equal(d->nodes[d->outputs[0].node].op, RLX_OP_TANH);
    assert_int_equal(rlx_graph_verify(d), RLX_OK);
    rlx_graph_free(d);
    rlx_graph_free(g);
}

static void test_cse_merges_identical_not_different(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){16});
    rlx_node a = rlx_exp(g, x), b = rlx_exp(g, x);                   /* same: merged */
    rlx_node c = rlx_softmax(g, x, 0), d = rlx_log_softmax(g, x, 0); /* different ops: kept */
    rlx_node r1 = rlx_random_uniform(g, RLX_F32, 1, (int64_t[]){16}, 0, 1);
    rlx_node r2 = rlx_random_uniform(g, RLX_F32, 1, (int64_t[]){16}, 0, 1); /* random: never merged */
    rlx_node m1 = rlx_mod(g, x, a, 0), m2 = rlx_mod(g, x, a, 1);            /* attrs differ: kept */
    rlx_node sum =
        rlx_add(g, rlx_add(g, rlx_add(g, a, b), rlx_add(g, c, d)), rlx_add(g, rlx_add(g, r1, r2), rlx_add(g, m1, m2)));
    rlx_output(g, "y", sum);
    rlx_graph *e = rlx_pass_cse(g, NULL);
    assert_non_null(e);
    assert_int_equal(count_op(e, RLX_OP_EXP), 1);
    assert_int_equal(count_op(e, RLX_OP_SOFTMAX), 1);
    assert_int_equal(count_op(e, RLX_OP_LOG_SOFTMAX), 1);
    assert_int_equal(count_op(e, RLX_OP_RANDOM_UNIFORM), 2);
    assert_int_equal(count_op(e, RLX_OP_MOD), 2);
    assert_int_equal(e->n_nodes, g->n_nodes - 1);
    rlx_graph_free(e);
    rlx_graph_free(g);
}

static void test_cse_merges_equal_constants_only(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    float v1[4] = {1, 2, 3, 4}, v2[4] = {1, 2, 3, 5};
    rlx_node c1 = rlx_constant(g, RLX_F32, 1, (int64_t[]){4}, v1, sizeof v1);
    rlx_node c2 = rlx_constant(g, RLX_F32, 1, (int64_t[]){4}, v1, sizeof v1);
    rlx_node c3 = rlx_constant(g, RLX_F32, 1, (int64_t[]){4}, v2, sizeof v2);
    rlx_output(g, "y", rlx_add(g, rlx_add(g, rlx_mul(g, x, c1), rlx_mul(g, x, c2)), c3));
    rlx_graph *e = rlx_pass_cse(g, NULL);
    assert_int_equal(count_op(e, RLX_OP_CONSTANT), 2);
    assert_int_equal(count_op(e, RLX_OP_MUL), 1);
    rlx_graph_free(e);
    rlx_graph_free(g);
}

static void test_fold_evaluates_constant_subgraphs(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){6});
    float cv[6] = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.75f};
    rlx_node c = rlx_constant(g, RLX_F32, 1, (int64_t[]){6}, cv, sizeof cv);
    rlx_node folded = rlx_tanh(g, rlx_mul(g, rlx_exp(g, c), c)); /* all constant */
    rlx_node noise = rlx_random_normal(g, RLX_F32, 1, (int64_t[]){6}, 0, 1);
    rlx_node not_folded = rlx_mul(g, noise, c); /* random: stays */
    rlx_output(g, "y", rlx_add(g, rlx_mul(g, x, folded), rlx_mul(g, not_folded, rlx_scalar(g, RLX_F32, 0))));
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 20};
    rlx_graph *f = rlx_pass_fold(g, &ctx);
    assert_non_null(f);
    rlx_graph *d = rlx_pass_dce(f, NULL);
    assert_int_equal(count_op(d, RLX_OP_EXP), 0);
    assert_int_equal(count_op(d, RLX_OP_TANH), 0);
    assert_int_equal(count_op(d, RLX_OP_RANDOM_NORMAL), 1);
    /* the folded constant holds tanh(exp(c) * c) */
    bool found = false;
    for (int i = 0; i < d->n_nodes; i++) {
        if (d->nodes[i].op != RLX_OP_CONSTANT || d->nodes[i].data_bytes != sizeof cv)
            continue;
        const float *v = d->nodes[i].data;
        bool match = true;
        for (int k = 0; k < 6; k++)
            match &= fabs(v[k] - tanh(exp(cv[k]) * cv[k])) < 1e-6;
        found |= match;
    }
    assert_true(found);
    rlx_graph_free(d);
    rlx_graph_free(f);
    /* and the program computes the same with and without simplification */
    float xv[6];
    random_floats(xv, 6, 3);
    assert_simplify_keeps_values(g, xv, 6, 6, 1e-6, 0);
    rlx_graph_free(g);
}

static void test_fold_respects_size_limit(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    float one = 1.0f;
    rlx_node c = rlx_constant(g, RLX_F32, 0, NULL, &one, 4);
    rlx_node big = rlx_expand(g, c, 1, (int64_t[]){1 << 16}); /* 256 KiB */
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){1 << 16});
    rlx_output(g, "y", rlx_add(g, x, big));
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1024};
    rlx_graph *f = rlx_pass_fold(g, &ctx);
    assert_int_equal(count_op(f, RLX_OP_EXPAND), 1); /* too large to fold */
    rlx_graph_free(f);
    ctx.fold_limit = 1 << 20;
    f = rlx_pass_fold(g, &ctx);
    assert_int_equal(count_op(f, RLX_OP_EXPAND), 0);
    rlx_graph_free(f);
    rlx_graph_free(g);
}

static void test_simplify_pipeline_same_results(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    float wv[64];
    random_floats(wv, 64, 9);
    rlx_node w = rlx_constant(g, RLX_F32, 2, (int64_t[]){8, 8}, wv, sizeof wv);
    rlx_node wt = rlx_transpose(g, rlx_transpose(g, w, (int[]){1, 0}), (int[]){1, 0}); /* folds */
    rlx_node h1 = rlx_gelu(g, rlx_matmul(g, x, wt, 0, 0));
    rlx_node h2 = rlx_gelu(g, rlx_matmul(g, x, wt, 0, 0)); /* duplicate of h1 */
    rlx_output(g, "y", rlx_reshape(g, rlx_add(g, h1, h2), 1, (int64_t[]){32}));
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 20};
    rlx_graph *s = rlx_simplify(g, &ctx);
    assert_non_null(s);
    assert_int_equal(count_op(s, RLX_OP_TRANSPOSE), 0);
    assert_int_equal(count_op(s, RLX_OP_MATMUL), 1);
    assert_int_equal(count_op(s, RLX_OP_GELU), 1);
    rlx_graph_free(s);
    float xv[32];
    random_floats(xv, 32, 5);
    assert_simplify_keeps_values(g, xv, 32, 32, 1e-5, 0);
    rlx_graph_free(g);
}

/* Activations written out, in the groupings exporters emit, and near
 * misses that must stay as they are. */
enum {
    GELU_TORCH,
    GELU_HF,
    GELU_MUL_INV,
    TANH_TORCH,
    TANH_POW,
    SILU,
    SILU_SWAPPED, /* rewritten */
    GELU_OTHER_ARG,
    GELU_NOT_HALF,
    GELU_BROADCAST,
    TANH_BAD_KAPPA,
    SILU_OTHER_ARG,
    N_FORMS
};
static const rlx_op form_op[N_FORMS] = {RLX_OP_GELU,      RLX_OP_GELU, RLX_OP_GELU, RLX_OP_GELU_TANH,
                                        RLX_OP_GELU_TANH, RLX_OP_SILU, RLX_OP_SILU};

static rlx_graph *act_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){16});
    rlx_node h = rlx_mul(g, x, rlx_scalar(g, RLX_F32, 1.5)); /* x is computed, not a leaf */
    rlx_node one = rlx_scalar(g, RLX_F32, 1);
    /* one element, but rank 2 in GELU_BROADCAST: the product becomes [1, 16] */
    rlx_node half = form == GELU_BROADCAST ? rlx_constant(g, RLX_F32, 2, (int64_t[]){1, 1}, (float[]){0.5f}, 4)
                                           : rlx_scalar(g, RLX_F32, form == GELU_NOT_HALF ? 0.4 : 0.5);
    rlx_node y;
    if (form == SILU || form == SILU_SWAPPED || form == SILU_OTHER_ARG) {
        rlx_node sg = rlx_sigmoid(g, form == SILU_OTHER_ARG ? x : h);
        y = form == SILU_SWAPPED ? rlx_mul(g, sg, h) : rlx_mul(g, h, sg);
    } else if (form == TANH_TORCH || form == TANH_POW || form == TANH_BAD_KAPPA) {
        /* 0.5 * (x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))) */
        rlx_node cube = form == TANH_POW ? rlx_pow(g, h, rlx_scalar(g, RLX_F32, 3)) : rlx_mul(g, h, rlx_mul(g, h, h));
        rlx_node inner =
            rlx_add(g, h, rlx_mul(g, rlx_scalar(g, RLX_F32, form == TANH_BAD_KAPPA ? 0.05 : 0.044715), cube));
        rlx_node t = rlx_tanh(g, rlx_mul(g, rlx_scalar(g, RLX_F32, 0.7978845608028654), inner));
        y = form == TANH_POW ? rlx_mul(g, rlx_mul(g, half, h), rlx_add(g, one, t))
                             : rlx_mul(g, half, rlx_mul(g, h, rlx_add(g, one, t)));
    } else {
        rlx_node arg = form == GELU_MUL_INV     ? rlx_mul(g, rlx_scalar(g, RLX_F32, 0.70710678118654752), h)
                       : form == GELU_OTHER_ARG ? rlx_div(g, x, rlx_scalar(g, RLX_F32, 1.4142135623730951))
                                                : rlx_div(g, h, rlx_scalar(g, RLX_F32, 1.4142135623730951));
        rlx_node erf = rlx_erf(g, arg);
        if (form == GELU_HF) /* x * 0.5 * (1 + erf(x / sqrt 2)) */
            y = rlx_mul(g, rlx_mul(g, h, half), rlx_add(g, one, erf));
        else /* (x * (erf(x / sqrt 2) + 1)) * 0.5 */
            y = rlx_mul(g, rlx_mul(g, h, rlx_add(g, erf, one)), half);
    }
    rlx_output(g, "y", rlx_reshape(g, y, 1, (int64_t[]){16}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_rewrites_written_out_activations(void **state)
{
    (void)state;
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 20};
    static const rlx_op parts[4] = {RLX_OP_ERF, RLX_OP_TANH, RLX_OP_SIGMOID, RLX_OP_POW};
    for (int form = 0; form < N_FORMS; form++) {
        rlx_graph *g = act_graph(form);
        rlx_graph *s = rlx_simplify(g, &ctx);
        assert_non_null(s);
        bool rewritten = form <= SILU_SWAPPED;
        rlx_op want = form_op[form];
        assert_int_equal(count_op(s, RLX_OP_GELU) + count_op(s, RLX_OP_GELU_TANH) + count_op(s, RLX_OP_SILU),
                         rewritten ? 1 : 0);
        if (rewritten) {
            assert_int_equal(count_op(s, want), 1);
            for (int p = 0; p < 4; p++)
                assert_int_equal(count_op(s, parts[p]), 0);
        }
        rlx_graph_free(s);
        /* the same values either way (against the graph as written) */
        float xv[16];
        random_floats(xv, 16, 11 + (unsigned)form);
        for (int k = 0; k < 16; k++)
            xv[k] *= 3.0f;
        assert_simplify_keeps_values(g, xv, 16, 16, 2e-6, 2e-6);
        rlx_graph_free(g);
    }
}

/* After the rewrite, a matmul + bias + GELU written out fuses into one node. */
static void test_canon_gelu_then_fuses(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    float wv[40], bv[5];
    random_floats(wv, 40, 21);
    random_floats(bv, 5, 22);
    rlx_node w = rlx_constant(g, RLX_F32, 2, (int64_t[]){8, 5}, wv, sizeof wv);
    rlx_node h = rlx_add(g, rlx_matmul(g, x, w, 0, 0), rlx_constant(g, RLX_F32, 1, (int64_t[]){5}, bv, sizeof bv));
    rlx_node erf = rlx_erf(g, rlx_div(g, h, rlx_scalar(g, RLX_F32, 1.4142135623730951)));
    rlx_node y = rlx_mul(g, rlx_mul(g, h, rlx_add(g, erf, rlx_scalar(g, RLX_F32, 1))), rlx_scalar(g, RLX_F32, 0.5));
    rlx_output(g, "y", rlx_reshape(g, y, 1, (int64_t[]){20}));
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 20};
    rlx_graph *s = rlx_simplify(g, &ctx);
    assert_non_null(s);
    rlx_graph *f = rlx_pass_fuse(s, &ctx);
    assert_non_null(f);
    assert_int_equal(count_op(f, RLX_OP_MATMUL_BIAS_ACT), 1);
    assert_int_equal(count_op(f, RLX_OP_ERF) + count_op(f, RLX_OP_ELEMENTWISE_CHAIN), 0);
    for (int i = 0; i < f->n_nodes; i++)
        if (f->nodes[i].op == RLX_OP_MATMUL_BIAS_ACT)
            assert_int_equal(f->nodes[i].attrs.mm_act.act, RLX_ACT_GELU);
    rlx_graph_free(f);
    rlx_graph_free(s);
    float xv[32];
    random_floats(xv, 32, 23);
    assert_simplify_keeps_values(g, xv, 32, 20, 1e-6, 1e-6);
    rlx_graph_free(g);
}

/* Normalisations written out, and near misses. */
enum {
    LN_TORCH,
    LN_BARE,
    LN_RSQRT_GAMMA,
    LN_BETA_ONLY,
    RMS_GAMMA,
    RMS_RECIP,
    RMS_ONE_OVER, /* rewritten */
    RMS_OF_SHIFTED,
    RMS_WITH_BETA,
    LN_FULL_GAMMA, /* partly */
    NORM_FIRST_AXIS,
    NORM_CUBE,
    NORM_NEG_EPS,
    N_NORMS
};

static rlx_graph *norm_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 16});
    rlx_node h = rlx_mul(g, x, rlx_scalar(g, RLX_F32, 1.5)); /* x is computed, not a leaf */
    float gv[64], bv[16];
    random_floats(gv, 64, 31);
    random_floats(bv, 16, 32);
    rlx_node gamma = form == LN_FULL_GAMMA ? rlx_constant(g, RLX_F32, 2, (int64_t[]){4, 16}, gv, sizeof gv)
                                           : rlx_constant(g, RLX_F32, 1, (int64_t[]){16}, gv, 16 * sizeof(float));
    rlx_node beta = rlx_constant(g, RLX_F32, 1, (int64_t[]){16}, bv, sizeof bv);
    int last = form == NORM_FIRST_AXIS ? 0 : 1;
    rlx_node eps = rlx_scalar(g, RLX_F32, form == NORM_NEG_EPS ? -1e-5 : 1e-5);
    bool centred = form <= LN_BETA_ONLY || form == LN_FULL_GAMMA || form == NORM_FIRST_AXIS || form == NORM_CUBE ||
                   form == NORM_NEG_EPS;
    rlx_node v = h;
    if (centred) /* d = h - mean(h) */
        v = rlx_sub(g, h, rlx_reduce_mean(g, h, 1, &last, 1));
    else if (form == RMS_OF_SHIFTED) /* the mean of another tensor: not a LayerNorm */
        v = rlx_sub(g, h, rlx_reduce_mean(g, x, 1, &last, 1));
    rlx_node sq = form == NORM_CUBE                             ? rlx_pow(g, v, rlx_scalar(g, RLX_F32, 3))
                  : form == LN_RSQRT_GAMMA || form == RMS_RECIP ? rlx_mul(g, v, v)
                                                                : rlx_pow(g, v, rlx_scalar(g, RLX_F32, 2));
    rlx_node ms = rlx_reduce_mean(g, sq, 1, &last, 1);
    rlx_node var = form == LN_RSQRT_GAMMA ? rlx_add(g, eps, ms) : rlx_add(g, ms, eps);
    rlx_node y;
    if (form == LN_RSQRT_GAMMA || form == RMS_GAMMA)
        y = rlx_mul(g, rlx_rsqrt(g, var), v);
    else if (form == RMS_RECIP)
        y = rlx_mul(g, v, rlx_reciprocal(g, rlx_sqrt(g, var)));
    else if (form == RMS_ONE_OVER)
        y = rlx_mul(g, v, rlx_div(g, rlx_scalar(g, RLX_F32, 1), rlx_sqrt(g, var)));
    else
        y = rlx_div(g, v, rlx_sqrt(g, var));
    if (form == LN_TORCH || form == LN_RSQRT_GAMMA || form == RMS_GAMMA || form == RMS_WITH_BETA ||
        form == LN_FULL_GAMMA)
        y = form == LN_RSQRT_GAMMA ? rlx_mul(g, gamma, y) : rlx_mul(g, y, gamma);
    if (form == LN_TORCH || form == LN_BETA_ONLY || form == RMS_WITH_BETA)
        y = rlx_add(g, y, beta);
    rlx_output(g, "y", rlx_reshape(g, y, 1, (int64_t[]){64}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_rewrites_written_out_norms(void **state)
{
    (void)state;
    /* per form: layer_norm and rms_norm nodes after simplify, their gamma
     * and beta, and the products and sums left beside them */
    static const struct {
        int ln, rms, has_gamma, has_beta, muls, adds;
    } want[N_NORMS] = {
        [LN_TORCH] = {1, 0, 1, 1, 1, 0},       [LN_BARE] = {1, 0, 0, 0, 1, 0},
        [LN_RSQRT_GAMMA] = {1, 0, 1, 0, 1, 0}, [LN_BETA_ONLY] = {1, 0, 0, 1, 1, 0},
        [RMS_GAMMA] = {0, 1, 1, 0, 1, 0},      [RMS_RECIP] = {0, 1, 0, 0, 1, 0},
        [RMS_ONE_OVER] = {0, 1, 0, 0, 1, 0},   [RMS_OF_SHIFTED] = {0, 1, 0, 0, 1, 0},
        [RMS_WITH_BETA] = {0, 1, 1, 0, 1, 1},  [LN_FULL_GAMMA] = {1, 0, 0, 0, 2, 0},
    };
    for (int form = 0; form < N_NORMS; form++) {
        rlx_graph *g = norm_graph(form);
        rlx_graph *s = simplified(g);
        print_message("norm form %d\n", form);
        assert_int_equal(count_op(s, RLX_OP_LAYER_NORM), want[form].ln);
        assert_int_equal(count_op(s, RLX_OP_RMS_NORM), want[form].rms);
        if (want[form].ln || want[form].rms) {
            /* nothing of the decomposition is left; the products left are
             * the scale of h (and a gamma not absorbed) */
            assert_int_equal(count_op(s, RLX_OP_REDUCE_MEAN), form == RMS_OF_SHIFTED);
            assert_int_equal(count_op(s, RLX_OP_SQRT) + count_op(s, RLX_OP_RSQRT) + count_op(s, RLX_OP_POW) +
                                 count_op(s, RLX_OP_DIV) + count_op(s, RLX_OP_RECIPROCAL),
                             0);
            assert_int_equal(count_op(s, RLX_OP_MUL), want[form].muls);
            assert_int_equal(count_op(s, RLX_OP_ADD), want[form].adds);
            for (int i = 0; i < s->n_nodes; i++)
                if (s->nodes[i].op == RLX_OP_LAYER_NORM || s->nodes[i].op == RLX_OP_RMS_NORM) {
                    assert_int_equal(s->nodes[i].attrs.norm.has_gamma, want[form].has_gamma);
                    assert_int_equal(s->nodes[i].attrs.norm.has_beta, want[form].has_beta);
                    assert_float_equal(s->nodes[i].attrs.norm.eps, 1e-5, 1e-9);
                }
        }
        rlx_graph_free(s);
        assert_keeps_values_on_random(g, 64, 64, 41 + (unsigned)form, 2e-5, 2e-5);
        rlx_graph_free(g);
    }
}

/* A 16-bit tensor's normalisation computed in f32 between casts (Hugging
 * Face's RMSNorm in f16/bf16 models), and a near miss. */
enum { CAST_RMS_GAMMA, CAST_RMS_BARE, CAST_LN_GAMMA, CAST_BACK_TO_OTHER, N_CAST_NORMS };

static rlx_graph *cast_norm_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 16});
    rlx_node h = rlx_cast(g, rlx_mul(g, x, rlx_scalar(g, RLX_F32, 1.5)), RLX_F16);
    rlx_dtype back = form == CAST_BACK_TO_OTHER ? RLX_BF16 : RLX_F16;
    float gv[16];
    random_floats(gv, 16, 51);
    rlx_node gamma = rlx_cast(g, rlx_constant(g, RLX_F32, 1, (int64_t[]){16}, gv, sizeof gv), back);
    int last = 1;
    rlx_node hf = rlx_cast(g, h, RLX_F32), v = hf;
    if (form == CAST_LN_GAMMA)
        v = rlx_sub(g, hf, rlx_reduce_mean(g, hf, 1, &last, 1));
    rlx_node ms = rlx_reduce_mean(g, rlx_pow(g, v, rlx_scalar(g, RLX_F32, 2)), 1, &last, 1);
    rlx_node n = rlx_mul(g, v, rlx_rsqrt(g, rlx_add(g, ms, rlx_scalar(g, RLX_F32, 1e-6))));
    rlx_node y = rlx_cast(g, n, back);
    if (form != CAST_RMS_BARE)
        y = rlx_mul(g, gamma, y);
    rlx_output(g, "y", rlx_reshape(g, rlx_cast(g, y, RLX_F32), 1, (int64_t[]){64}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_norm_between_casts(void **state)
{
    (void)state;
    rlx_pass_ctx ctx = {.evaluate = rlx_cpu_evaluate, .fold_limit = 1 << 20};
    /* per form: norm nodes, their dtype and gamma, and the casts left */
    static const struct {
        int ln, rms, has_gamma, casts;
        rlx_dtype dt;
    } want[N_CAST_NORMS] = {
        [CAST_RMS_GAMMA] = {0, 1, 1, 2, RLX_F16},
        [CAST_RMS_BARE] = {0, 1, 0, 2, RLX_F16},
        [CAST_LN_GAMMA] = {1, 0, 1, 2, RLX_F16},
        /* cast back to another dtype: only the f32 core is taken, its casts stay */
        [CAST_BACK_TO_OTHER] = {0, 1, 0, 4, RLX_F32},
    };
    for (int form = 0; form < N_CAST_NORMS; form++) {
        rlx_graph *g = cast_norm_graph(form);
        rlx_graph *s = rlx_simplify(g, &ctx);
        assert_non_null(s);
        print_message("cast norm form %d\n", form);
        assert_int_equal(count_op(s, RLX_OP_LAYER_NORM), want[form].ln);
        assert_int_equal(count_op(s, RLX_OP_RMS_NORM), want[form].rms);
        /* the input's and output's casts, the gamma's folded; the product
         * left is the scale of x (and, on the near miss, gamma's) */
        assert_int_equal(count_op(s, RLX_OP_CAST), want[form].casts);
        assert_int_equal(count_op(s, RLX_OP_MUL), form == CAST_BACK_TO_OTHER ? 2 : 1);
        for (int i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].op == RLX_OP_LAYER_NORM || s->nodes[i].op == RLX_OP_RMS_NORM) {
                assert_int_equal(s->nodes[i].dtype, want[form].dt);
                assert_int_equal(s->nodes[i].attrs.norm.has_gamma, want[form].has_gamma);
                assert_float_equal(s->nodes[i].attrs.norm.eps, 1e-6, 1e-10);
            }
        rlx_graph_free(s);
        float xv[64];
        random_floats(xv, 64, 61 + (unsigned)form);
        /* one rounding to 16 bits instead of two */
        double tol = form == CAST_BACK_TO_OTHER ? 1e-2 : 2e-3;
        assert_simplify_keeps_values(g, xv, 64, 64, tol, tol);
        rlx_graph_free(g);
    }
}

/* Attention written out, and near misses. */
enum {
    ATT_TORCH,
    ATT_MERGED_T,
    ATT_MUL_MASK,
    ATT_MASK_FIRST,
    ATT_UNSCALED,
    ATT_SPLIT_SCALE,
    ATT_SPLIT_NEG, /* rewritten (a negative factor on q stays on q) */
    ATT_CAUSAL,
    ATT_CAUSAL_FINITE,
    ATT_CAUSAL_WRONG, /* rewritten: the first with the causal flag, the
                                                        others keep their mask */
    ATT_WHERE_KEEP,
    ATT_WHERE_FILL, /* masked_fill: rewritten with the causal flag */
    ATT_WHERE_OTHER,
    ATT_WHERE_OTHER_FILL, /* another select: rewritten with it as a bool mask
                                                        (negated when its true entries are filled) */
    ATT_WHERE_NOT_INPUT,  /* masked_fill(~keep, -inf) on a computed keep: the
                                                        mask is keep, no negation left */
    ATT_AXIS2,
    ATT_MASK_SCALED,
    ATT_K_NOT_TRANSPOSED,
    ATT_NEG_SCALE,
    ATT_KT_TIMES_TENSOR,
    ATT_WHERE_SMALL_FILL,
    N_ATTS
};

static rlx_graph *attn_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 8, 8});
    const int64_t bshd[4] = {2, 8, 2, 4};
    const int to_heads[4] = {0, 2, 1, 3}, swap_last[4] = {0, 1, 3, 2}, merged[4] = {0, 2, 3, 1};
    rlx_node q = rlx_transpose(g, rlx_reshape(g, rlx_mul(g, x, rlx_scalar(g, RLX_F32, 1.5)), 4, bshd), to_heads);
    rlx_node kr = rlx_reshape(g, rlx_mul(g, x, rlx_scalar(g, RLX_F32, -0.7)), 4, bshd);
    rlx_node v = rlx_transpose(g, rlx_reshape(g, rlx_tanh(g, x), 4, bshd), to_heads);
    rlx_node kt;
    if (form == ATT_MERGED_T) {
        kt = rlx_transpose(g, kr, merged);
    } else if (form == ATT_K_NOT_TRANSPOSED) {
        float kv[2 * 2 * 4 * 8];
        random_floats(kv, 128, 51);
        kt = rlx_constant(g, RLX_F32, 4, (int64_t[]){2, 2, 4, 8}, kv, sizeof kv);
    } else {
        kt = rlx_transpose(g, rlx_transpose(g, kr, to_heads), swap_last);
    }
    if (form == ATT_SPLIT_SCALE || form == ATT_SPLIT_NEG) { /* (q * sqrt c) (k^T * sqrt c), c = 0.5 */
        q = rlx_mul(g, q, rlx_scalar(g, RLX_F32, form == ATT_SPLIT_NEG ? -0.70710678118654752 : 0.70710678118654752));
        kt = rlx_mul(g, rlx_scalar(g, RLX_F32, 0.70710678118654752), kt);
    } else if (form == ATT_KT_TIMES_TENSOR) { /* a factor per key: not a scale */
        float fv[8] = {0.5f, 1, 1.5f, 2, 0.25f, 1, 3, 0.75f};
        kt = rlx_mul(g, kt, rlx_constant(g, RLX_F32, 4, (int64_t[]){1, 1, 1, 8}, fv, sizeof fv));
    }
    rlx_node sc = rlx_matmul(g, q, kt, 0, 0);
    float mv[8] = {0, 0, -1e4f, 0, 0, -1e4f, 0, 0};
    rlx_node mask = rlx_constant(g, RLX_F32, 4, (int64_t[]){1, 1, 1, 8}, mv, sizeof mv);
    if (form == ATT_CAUSAL || form == ATT_CAUSAL_FINITE || form == ATT_CAUSAL_WRONG) {
        float cm[64]; /* 0 where key t <= query s, else masked */
        for (int i = 0; i < 64; i++)
            cm[i] = i % 8 <= i / 8 ? 0.0f : form == ATT_CAUSAL_FINITE ? -1e4f : -INFINITY;
        if (form == ATT_CAUSAL_WRONG)
            cm[8 * 5 + 2] = -INFINITY; /* query 5 may not see key 2 */
        mask = rlx_constant(g, RLX_F32, 4, (int64_t[]){1, 1, 8, 8}, cm, sizeof cm);
    }
    switch (form) {
    case ATT_MUL_MASK: sc = rlx_add(g, rlx_mul(g, sc, rlx_scalar(g, RLX_F32, 0.5)), mask); break;
    case ATT_MASK_FIRST: sc = rlx_add(g, mask, rlx_div(g, sc, rlx_scalar(g, RLX_F32, 2))); break;
    case ATT_MASK_SCALED: sc = rlx_div(g, rlx_add(g, sc, mask), rlx_scalar(g, RLX_F32, 2)); break;
    case ATT_NEG_SCALE: sc = rlx_mul(g, rlx_scalar(g, RLX_F32, -0.5), sc); break;
    case ATT_UNSCALED: break;
    case ATT_SPLIT_SCALE:
    case ATT_SPLIT_NEG: sc = rlx_add(g, sc, mask); break;
    case ATT_CAUSAL:
    case ATT_CAUSAL_FINITE:
    case ATT_CAUSAL_WRONG: sc = rlx_add(g, rlx_div(g, sc, rlx_scalar(g, RLX_F32, 2)), mask); break;
    case ATT_WHERE_NOT_INPUT: { /* keys kept where x[0] > -0.9 (about 95% of them) */
        rlx_node x0 = rlx_slice(g, x, 1, (int[]){0}, (int64_t[]){0}, (int64_t[]){1}, (int64_t[]){1});
        rlx_node keep = rlx_greater(g, x0, rlx_scalar(g, RLX_F32, -0.9));
        rlx_node sel = rlx_reshape(g, rlx_not(g, keep), 4, (int64_t[]){1, 1, 8, 8});
        sc = rlx_where(g, sel, rlx_scalar(g, RLX_F32, -INFINITY), rlx_div(g, sc, rlx_scalar(g, RLX_F32, 2)));
        break;
    }
    case ATT_WHERE_KEEP:
    case ATT_WHERE_FILL:
    case ATT_WHERE_OTHER:
    case ATT_WHERE_OTHER_FILL:
    case ATT_WHERE_SMALL_FILL: {
        /* where(keys up to the query, scores, -inf), or where(the keys after it, -inf, scores) */
        unsigned char sel[64];
        bool fill_true = form == ATT_WHERE_FILL || form == ATT_WHERE_OTHER_FILL;
        for (int i = 0; i < 64; i++)
            sel[i] = (i % 8 <= i / 8) != fill_true;
        if (form == ATT_WHERE_OTHER || form == ATT_WHERE_OTHER_FILL)
            sel[8 * 6 + 1] = fill_true; /* query 6 may not see key 1 either */
        rlx_node c = rlx_constant(g, RLX_BOOL, 2, (int64_t[]){8, 8}, sel, sizeof sel);
        rlx_node fill = rlx_scalar(g, RLX_F32, form == ATT_WHERE_SMALL_FILL ? -100.0 : -INFINITY);
        sc = rlx_div(g, sc, rlx_scalar(g, RLX_F32, 2));
        sc = fill_true ? rlx_where(g, c, fill, sc) : rlx_where(g, c, sc, fill);
        break;
    }
    default: sc = rlx_div(g, sc, rlx_scalar(g, RLX_F32, 2)); break;
    }
    rlx_node p = rlx_softmax(g, sc, form == ATT_AXIS2 ? 2 : -1);
    rlx_node o = rlx_transpose(g, rlx_matmul(g, p, v, 0, 0), to_heads);
    rlx_output(g, "y", rlx_reshape(g, o, 1, (int64_t[]){128}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_rewrites_written_out_attention(void **state)
{
    (void)state;
    static const double scale[N_ATTS] = {0.5, 0.5, 0.5, 0.5, 1.0, 0.5, 0.70710678118654752, 0.5, 0.5,
                                         0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    for (int form = 0; form < N_ATTS; form++) {
        rlx_graph *g = attn_graph(form);
        rlx_graph *s = simplified(g);
        print_message("attention form %d\n", form);
        bool rewritten = form <= ATT_WHERE_NOT_INPUT;
        assert_int_equal(count_op(s, RLX_OP_ATTENTION), rewritten);
        assert_int_equal(count_op(s, RLX_OP_SOFTMAX), !rewritten);
        for (int i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].op == RLX_OP_ATTENTION) {
                assert_int_equal(count_op(s, RLX_OP_MATMUL), 0);
                /* the products left: the scales of q, k (and q's negative factor) */
                assert_int_equal(count_op(s, RLX_OP_MUL), form == ATT_SPLIT_NEG ? 3 : 2);
                assert_float_equal(s->nodes[i].attrs.attention.scale, scale[form], 1e-7);
                bool bool_mask = form == ATT_WHERE_OTHER || form == ATT_WHERE_OTHER_FILL || form == ATT_WHERE_NOT_INPUT;
                assert_int_equal(s->nodes[i].attrs.attention.has_mask,
                                 form == ATT_MUL_MASK || form == ATT_MASK_FIRST || form == ATT_SPLIT_SCALE ||
                                     form == ATT_SPLIT_NEG || form == ATT_CAUSAL_FINITE || form == ATT_CAUSAL_WRONG ||
                                     bool_mask);
                if (bool_mask)
                    assert_int_equal(s->nodes[s->nodes[i].in[3]].dtype, RLX_BOOL);
                assert_int_equal(count_op(s, RLX_OP_NOT), form == ATT_WHERE_OTHER_FILL);
                assert_int_equal(s->nodes[i].attrs.attention.causal,
                                 form == ATT_CAUSAL || form == ATT_WHERE_KEEP || form == ATT_WHERE_FILL);
            }
        rlx_graph_free(s);
        assert_keeps_values_on_random(g, 128, 128, 61 + (unsigned)form, 2e-6, 2e-6);
        rlx_graph_free(g);
    }
}

/* Grouped-query heads written out as Hugging Face's repeat_kv does (each
 * of k's and v's 2 heads repeated twice in a row for 4 query heads), and
 * the repeat the other way round (heads tiled), which attention's grouping
 * does not match. */
static rlx_graph *gqa_graph(bool tiled)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 8, 16});
    const int to_heads[4] = {0, 2, 1, 3}, swap_last[4] = {0, 1, 3, 2};
    rlx_node q = rlx_transpose(
        g, rlx_reshape(g, rlx_mul(g, x, rlx_scalar(g, RLX_F32, 1.5)), 4, (int64_t[]){2, 8, 4, 4}), to_heads);
    rlx_node halves[2];
    assert_int_equal(rlx_split(g, x, 2, 2, (int64_t[]){8, 8}, halves), RLX_OK);
    rlx_node kv[2] = {rlx_mul(g, halves[0], rlx_scalar(g, RLX_F32, -0.7)), rlx_tanh(g, halves[1])};
    for (int j = 0; j < 2; j++) { /* [2, 8, 8] -> heads [2, 2, 8, 4] -> repeated [2, 4, 8, 4] */
        rlx_node h = rlx_transpose(g, rlx_reshape(g, kv[j], 4, (int64_t[]){2, 8, 2, 4}), to_heads);
        rlx_node u =
            tiled ? rlx_reshape(g, h, 5, (int64_t[]){2, 1, 2, 8, 4}) : rlx_reshape(g, h, 5, (int64_t[]){2, 2, 1, 8, 4});
        rlx_node e = rlx_expand(g, u, 5, (int64_t[]){2, 2, 2, 8, 4});
        kv[j] = rlx_reshape(g, e, 4, (int64_t[]){2, 4, 8, 4});
    }
    rlx_node sc = rlx_div(g, rlx_matmul(g, q, rlx_transpose(g, kv[0], swap_last), 0, 0), rlx_scalar(g, RLX_F32, 2));
    rlx_node o = rlx_transpose(g, rlx_matmul(g, rlx_softmax(g, sc, -1), kv[1], 0, 0), to_heads);
    rlx_output(g, "y", rlx_reshape(g, o, 1, (int64_t[]){256}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_attention_grouped_heads(void **state)
{
    (void)state;
    for (int tiled = 0; tiled < 2; tiled++) {
        rlx_graph *g = gqa_graph(tiled);
        rlx_graph *s = simplified(g);
        assert_int_equal(count_op(s, RLX_OP_ATTENTION), 1);
        /* the repeats are gone where attention's grouping reads the same heads */
        assert_int_equal(count_op(s, RLX_OP_EXPAND), tiled ? 2 : 0);
        for (int i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].op == RLX_OP_ATTENTION) {
                assert_int_equal(s->nodes[s->nodes[i].in[1]].shape.dims[1], tiled ? 4 : 2);
                assert_int_equal(s->nodes[s->nodes[i].in[2]].shape.dims[1], tiled ? 4 : 2);
            }
        rlx_graph_free(s);
        assert_keeps_values_on_random(g, 256, 256, 71 + (unsigned)tiled, 2e-6, 2e-6);
        rlx_graph_free(g);
    }
}

/* Rotary embedding written out as Hugging Face's Llama code does, x * cos
 * + rotate_half(x) * sin on x [1, 2, S, 8], with the tables computed in
 * f32 as an export folds them.  form 0: theta 10000 from position 0,
 * tables [1, 1, S, 8]; 1: every product and the sum the other way round,
 * theta 1e6 from position 5, tables [S, 8]; then forms the rope op is not:
 * 2 frequencies i / D instead of theta^(-2i/D), 3 positions 0, 2, 4, ...,
 * 4 the halves rotated the other way (cat(x1, -x2)). */
static rlx_graph *rope_graph(int form, int64_t S)
{
    enum { D = 8, H = D / 2 };
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_mul(g, rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 2, S, D}), rlx_scalar(g, RLX_F32, 1.5));
    float *c = malloc((size_t)(S * D) * sizeof *c), *sn = malloc((size_t)(S * D) * sizeof *sn);
    assert_non_null(c);
    assert_non_null(sn);
    const float theta = form == 1 ? 1e6f : 1e4f;
    for (int64_t p = 0; p < S; p++)
        for (int i = 0; i < D; i++) {
            float freq = form == 2 ? (float)(i % H) / D : 1.0f / powf(theta, (float)(2 * (i % H)) / D);
            float pos = form == 1 ? (float)(p + 5) : form == 3 ? (float)(2 * p) : (float)p;
            c[p * D + i] = cosf(pos * freq);
            sn[p * D + i] = sinf(pos * freq);
        }
    const int64_t *tdims = form == 1 ? (int64_t[]){S, D} : (int64_t[]){1, 1, S, D};
    int tr = form == 1 ? 2 : 4;
    size_t tb = (size_t)(S * D) * sizeof(float);
    rlx_node ct = rlx_constant(g, RLX_F32, tr, tdims, c, tb), st = rlx_constant(g, RLX_F32, tr, tdims, sn, tb);
    free(c);
    free(sn);
    const int last[1] = {3};
    rlx_node lo = rlx_slice(g, x, 1, last, (int64_t[]){0}, (int64_t[]){H}, (int64_t[]){1});
    rlx_node hi = rlx_slice(g, x, 1, last, (int64_t[]){H}, (int64_t[]){D}, (int64_t[]){1});
    rlx_node halves[2] = {rlx_neg(g, hi), lo}, other_way[2] = {lo, rlx_neg(g, hi)};
    rlx_node rot = rlx_concat(g, 2, form == 4 ? other_way : halves, 3);
    rlx_node y = form == 1 ? rlx_add(g, rlx_mul(g, st, rot), rlx_mul(g, ct, x))
                           : rlx_add(g, rlx_mul(g, x, ct), rlx_mul(g, rot, st));
    rlx_output(g, "y", rlx_reshape(g, y, 1, (int64_t[]){2 * S * D}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_rope(void **state)
{
    (void)state;
    const int64_t S = 40;
    for (int form = 0; form < 5; form++) {
        rlx_graph *g = rope_graph(form, S);
        rlx_graph *s = simplified(g);
        assert_int_equal(count_op(s, RLX_OP_ROPE), form < 2);
        assert_int_equal(count_op(s, RLX_OP_CONCAT), form >= 2);
        for (int i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].op == RLX_OP_ROPE) {
                assert_true(fabs(s->nodes[i].attrs.rope.theta / (form == 1 ? 1e6 : 1e4) - 1) < 1e-5);
                assert_int_equal(s->nodes[i].attrs.rope.offset, form == 1 ? 5 : 0);
                assert_int_equal(s->nodes[i].attrs.rope.interleaved, 0);
            }
        rlx_graph_free(s);
        assert_keeps_values_on_random(g, 2 * S * 8, 2 * S * 8, 81 + (unsigned)form, 2e-5, 2e-5);
        rlx_graph_free(g);
    }
}

/* One projection cut three ways along its last axis, as a fused qkv
 * projection exports (x [2, 5, 16] @ W, 24 columns, slices of 8).  form 0:
 * W [16, 24] and a bias; 1: W [24, 16] read transposed, and a bias; 2: no
 * bias; 3: the product also read whole (a sum over it), which stays one
 * product. */
static rlx_graph *cut_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 5, 16});
    float w[16 * 24], b[24];
    random_floats(w, 16 * 24, 91 + (unsigned)form);
    random_floats(b, 24, 97);
    rlx_node wc = form == 1 ? rlx_constant(g, RLX_F32, 2, (int64_t[]){24, 16}, w, sizeof w)
                            : rlx_constant(g, RLX_F32, 2, (int64_t[]){16, 24}, w, sizeof w);
    rlx_node p = rlx_matmul(g, x, wc, 0, form == 1);
    if (form != 2)
        p = form == 1 ? rlx_add(g, rlx_constant(g, RLX_F32, 1, (int64_t[]){24}, b, sizeof b), p)
                      : rlx_add(g, p, rlx_constant(g, RLX_F32, 1, (int64_t[]){24}, b, sizeof b));
    rlx_node cut[3];
    const int last[1] = {2};
    for (int i = 0; i < 3; i++)
        cut[i] = rlx_slice(g, p, 1, last, (int64_t[]){8 * i}, (int64_t[]){8 * i + 8}, (int64_t[]){1});
    rlx_node y = rlx_add(g, rlx_tanh(g, cut[0]), rlx_mul(g, cut[1], cut[2]));
    if (form == 3)
        y = rlx_add(g, y, rlx_reduce_sum(g, p, 1, last, 1));
    rlx_output(g, "y", rlx_reshape(g, y, 1, (int64_t[]){80}));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_cut_projection(void **state)
{
    (void)state;
    for (int form = 0; form < 4; form++) {
        rlx_graph *g = cut_graph(form);
        rlx_graph *s = simplified(g);
        assert_int_equal(count_op(s, RLX_OP_MATMUL), form < 3 ? 3 : 1);
        assert_int_equal(count_op(s, RLX_OP_SLICE), form < 3 ? 0 : 3);
        rlx_graph_free(s);
        assert_keeps_values_on_random(g, 160, 80, 101 + (unsigned)form, 2e-6, 2e-6);
        rlx_graph_free(g);
    }
}

/* A projection of x [2, 5, 16] flattened to rows [10, 16] and reshaped
 * back to [2, 5, 24] (GPT-2's Conv1D).  form 0: W [16, 24] and a bias [24];
 * 1: W [24, 16] read transposed, a bias [1, 24] added on the left; 2: no
 * bias, the result cut three ways (the cut rule then takes it, a round
 * later); 3: reshaped back to [5, 2, 24], not x's leading dims; 4: the
 * flat product also read by a sum.  Forms 0-2 become products of x
 * itself; 3 and 4 keep their reshapes. */
static rlx_graph *flat_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 5, 16});
    float w[16 * 24], b[24];
    random_floats(w, 16 * 24, 111 + (unsigned)form);
    random_floats(b, 24, 113);
    rlx_node rows = rlx_reshape(g, x, 2, (int64_t[]){10, 16});
    rlx_node wc = form == 1 ? rlx_constant(g, RLX_F32, 2, (int64_t[]){24, 16}, w, sizeof w)
                            : rlx_constant(g, RLX_F32, 2, (int64_t[]){16, 24}, w, sizeof w);
    rlx_node p = rlx_matmul(g, rows, wc, 0, form == 1), flat = p;
    if (form == 0 || form >= 3)
        p = rlx_add(g, p, rlx_constant(g, RLX_F32, 1, (int64_t[]){24}, b, sizeof b));
    else if (form == 1)
        p = rlx_add(g, rlx_constant(g, RLX_F32, 2, (int64_t[]){1, 24}, b, sizeof b), p);
    rlx_node r = rlx_reshape(g, p, 3, form == 3 ? (int64_t[]){5, 2, 24} : (int64_t[]){2, 5, 24});
    rlx_node y;
    if (form == 2) {
        const int last[1] = {2};
        rlx_node cut[3];
        for (int i = 0; i < 3; i++)
            cut[i] = rlx_slice(g, r, 1, last, (int64_t[]){8 * i}, (int64_t[]){8 * i + 8}, (int64_t[]){1});
        y = rlx_concat(g, 3, (rlx_node[]){rlx_tanh(g, cut[0]), rlx_mul(g, cut[1], cut[2]), rlx_exp(g, cut[2])}, 2);
    } else {
        y = rlx_tanh(g, r);
    }
    if (form == 4)
        y = rlx_add(g, y, rlx_reduce_sum(g, flat, 1, (int[]){0}, 0));
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_canon_unflatten_projection(void **state)
{
    (void)state;
    for (int form = 0; form < 5; form++) {
        rlx_graph *g = flat_graph(form);
        rlx_graph *s = simplified(g);
        bool taken = form < 3;
        assert_int_equal(count_op(s, RLX_OP_RESHAPE), taken ? 0 : 2);
        assert_int_equal(count_op(s, RLX_OP_MATMUL), form == 2 ? 3 : 1);
        assert_int_equal(count_op(s, RLX_OP_SLICE), 0);
        for (int i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].op == RLX_OP_MATMUL) /* a product of x [2, 5, 16] itself, or of its rows */
                assert_int_equal(s->nodes[s->nodes[i].in[0]].shape.ndim, taken ? 3 : 2);
        rlx_graph_free(s);
        assert_keeps_values_on_random(g, 160, 240, 121 + (unsigned)form, 2e-6, 2e-6);
        rlx_graph_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dce_removes_dead_keeps_inputs_and_params),
        cmocka_unit_test(test_cse_merges_identical_not_different),
        cmocka_unit_test(test_cse_merges_equal_constants_only),
        cmocka_unit_test(test_fold_evaluates_constant_subgraphs),
        cmocka_unit_test(test_fold_respects_size_limit),
        cmocka_unit_test(test_simplify_pipeline_same_results),
        cmocka_unit_test(test_canon_rewrites_written_out_activations),
        cmocka_unit_test(test_canon_gelu_then_fuses),
        cmocka_unit_test(test_canon_rewrites_written_out_norms),
        cmocka_unit_test(test_canon_norm_between_casts),
        cmocka_unit_test(test_canon_rewrites_written_out_attention),
        cmocka_unit_test(test_canon_attention_grouped_heads),
        cmocka_unit_test(test_canon_rope),
        cmocka_unit_test(test_canon_cut_projection),
        cmocka_unit_test(test_canon_unflatten_projection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
