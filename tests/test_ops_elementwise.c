/* Elementwise ops (unary, binary with broadcasting, comparisons, logic,
 * where, clip) against the float64 reference on random inputs. */
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

typedef rlx_node (*unary_fn)(rlx_graph *, rlx_node);
typedef rlx_node (*binary_fn)(rlx_graph *, rlx_node, rlx_node);

typedef struct shape {
    int ndim;
    int64_t dims[RT_MAXD];
} shape;

/* Shapes every unary op runs on: scalar, size-1 dims, odd lengths (vector
 * tails), a larger tensor, empty tensors. */
static const shape k_shapes[] = {
    {0, {0}},    {1, {1}},       {1, {7}},    {2, {3, 5}}, {3, {3, 1, 5}}, {4, {2, 3, 4, 5}},
    {1, {1037}}, {3, {1, 1, 1}}, {2, {0, 3}}, {1, {0}},    {2, {17, 33}},
};
#define N_SHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

static int run_unary(const char *name, unary_fn op, rt_fn1 f, rlx_dtype dt, const shape *s, double lo, double hi,
                     double gap)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = gap > 0 ? rt_rand_away(s->ndim, s->dims, lo, hi, gap) : rt_rand(s->ndim, s->dims, lo, hi);
    rlx_node y = op(rg->g, rt_input(rg, dt, x));
    rt_tensor *got = rt_run1(rg, y);
    rt_tensor *want = rt_map(x, f);
    char what[128];
    snprintf(what, sizeof what, "%s %s %s", name, rlx_dtype_name(dt), rt_shape_str(s->ndim, s->dims));
    /* each element against its own size (f32: 1e-5 relative, 1e-6 absolute near zero) */
    int ok = dt == RLX_F32 ? rt_check_abs(what, got, want, 1e-5, 1e-6) : rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    return ok ? 0 : 1;
}

typedef struct unary_case {
    const char *name;
    unary_fn op;
    rt_fn1 f;
    double lo, hi, gap;
} unary_case;

static const unary_case k_unary[] = {
    {"neg", rlx_neg, rt_f_neg, -5, 5, 0},
    {"abs", rlx_abs, rt_f_abs, -5, 5, 0},
    {"exp", rlx_exp, rt_f_exp, -8, 8, 0},
    {"log", rlx_log, rt_f_log, 0.01, 50, 0},
    {"sqrt", rlx_sqrt, rt_f_sqrt, 0, 50, 0},
    {"rsqrt", rlx_rsqrt, rt_f_rsqrt, 0.01, 50, 0},
    {"reciprocal", rlx_reciprocal, rt_f_reciprocal, -4, 4, 0.05},
    {"tanh", rlx_tanh, rt_f_tanh, -6, 6, 0},
    {"sigmoid", rlx_sigmoid, rt_f_sigmoid, -12, 12, 0},
    {"relu", rlx_relu, rt_f_relu, -3, 3, 0},
    {"gelu", rlx_gelu, rt_f_gelu, -6, 6, 0},
    {"gelu_tanh", rlx_gelu_tanh, rt_f_gelu_tanh, -6, 6, 0},
    {"silu", rlx_silu, rt_f_silu, -10, 10, 0},
    {"erf", rlx_erf, rt_f_erf, -3, 3, 0},
    {"sin", rlx_sin, rt_f_sin, -10, 10, 0},
    {"cos", rlx_cos, rt_f_cos, -10, 10, 0},
    {"floor", rlx_floor, rt_f_floor, -10, 10, 0},
    {"ceil", rlx_ceil, rt_f_ceil, -10, 10, 0},
    {"round", rlx_round, rt_f_round, -10, 10, 0},
    {"sign", rlx_sign, rt_f_sign, -2, 2, 0},
};
#define N_UNARY (int)(sizeof k_unary / sizeof k_unary[0])

static void test_unary_f32(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < N_UNARY; i++)
        for (int s = 0; s < N_SHAPES; s++)
            bad += run_unary(k_unary[i].name, k_unary[i].op, k_unary[i].f, RLX_F32, &k_shapes[s], k_unary[i].lo,
                             k_unary[i].hi, k_unary[i].gap);
    assert_int_equal(bad, 0);
}

/* Values sitting exactly on half-way points, zeros and negative zeros:
 * round goes half to even, sign(0) is 0, relu/abs keep exact values. */
static void test_unary_special_values(void **state)
{
    (void)state;
    int bad = 0;
    int64_t n = 64;
    rt_tensor *x = rt_new(1, &n);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = rt_randint(-20, 20);
        switch (i % 4) {
        case 0: x->d[i] = (double)k + 0.5; break; /* tie */
        case 1: x->d[i] = (double)k; break;       /* integral */
        case 2: x->d[i] = (i & 8) ? -0.0 : 0.0; break;
        default: x->d[i] = rt_uniform(-3, 3); break;
        }
    }
    const unary_case *cases[] = {&k_unary[18], &k_unary[16], &k_unary[17], &k_unary[19], &k_unary[9], &k_unary[1]};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *xc = rt_clone(x);
        rlx_node y = cases[c]->op(rg->g, rt_input(rg, RLX_F32, xc));
        rt_tensor *got = rt_run1(rg, y), *want = rt_map(xc, cases[c]->f);
        bad += !rt_check_tol(cases[c]->name, got, want, 0, 0);
        rt_free(got);
        rt_free(want);
        rt_free(xc);
        rt_graph_free(rg);
    }
    rt_free(x);
    assert_int_equal(bad, 0);
}

/* Out-of-domain inputs give the IEEE answers (NaN, inf), not a crash. */
static void test_unary_ieee_edges(void **state)
{
    (void)state;
    int bad = 0;
    double vals[] = {-1.0, 0.0, -0.0, INFINITY, -INFINITY, 100.0, -100.0};
    int64_t n = (int64_t)(sizeof vals / sizeof vals[0]);
    const unary_case *cases[] = {&k_unary[3], &k_unary[4], &k_unary[5], &k_unary[6],
                                 &k_unary[2], &k_unary[8], &k_unary[7]};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_from(1, &n, vals);
        rlx_node y = cases[c]->op(rg->g, rt_input(rg, RLX_F32, x));
        rt_tensor *got = rt_run1(rg, y), *want = rt_map(x, cases[c]->f);
        rt_quantize(want, RLX_F32); /* exp(100) overflows f32 to inf */
        char what[64];
        snprintf(what, sizeof what, "%s on IEEE edge values", cases[c]->name);
        bad += !rt_check(what, got, want, RLX_F32);
        rt_free(got);
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ binary */

typedef struct shape_pair {
    shape a, b;
} shape_pair;

static const shape_pair k_pairs[] = {
    {{2, {3, 4}}, {2, {3, 4}}},             /* same shape */
    {{2, {3, 4}}, {1, {4}}},                /* row vector */
    {{2, {3, 1}}, {2, {1, 4}}},             /* outer */
    {{3, {2, 1, 4}}, {2, {3, 1}}},          /* both sides stretch, rank differs */
    {{0, {0}}, {2, {2, 3}}},                /* scalar left */
    {{1, {5}}, {0, {0}}},                   /* scalar right */
    {{0, {0}}, {0, {0}}},                   /* scalar both */
    {{1, {1}}, {3, {2, 3, 4}}},             /* size-1 vector */
    {{4, {2, 3, 1, 5}}, {3, {3, 4, 1}}},    /* 4-d */
    {{4, {4, 1, 1, 1}}, {4, {1, 6, 1, 7}}}, /* many size-1 dims */
    {{2, {0, 3}}, {2, {1, 3}}},             /* empty */
    {{1, {0}}, {0, {0}}},                   /* empty with scalar */
    {{2, {33, 65}}, {2, {33, 65}}},         /* odd lengths */
    {{2, {65, 1}}, {1, {129}}},             /* larger broadcast */
    {{2, {3, 12288}}, {0, {0}}},            /* one long run, cut into rows for the threads */
    {{3, {2, 5, 9001}}, {3, {2, 5, 9001}}}, /* one long run with no cut of 1024-8192 */
    {{4, {2, 3, 40, 50}}, {3, {3, 1, 1}}},  /* per-channel, NCHW */
};
#define N_PAIRS (int)(sizeof k_pairs / sizeof k_pairs[0])

typedef struct binary_case {
    const char *name;
    binary_fn op;
    rt_fn2 f;
    double alo, ahi, blo, bhi, bgap;
} binary_case;

static rlx_node mod_py(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_mod(g, a, b, 0); }
static rlx_node mod_c(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_mod(g, a, b, 1); }

static const binary_case k_binary[] = {
    {"add", rlx_add, rt_f_add, -5, 5, -5, 5, 0},
    {"sub", rlx_sub, rt_f_sub, -5, 5, -5, 5, 0},
    {"mul", rlx_mul, rt_f_mul, -5, 5, -5, 5, 0},
    {"div", rlx_div, rt_f_div, -5, 5, -5, 5, 0.1},
    {"pow", rlx_pow, rt_f_pow, 0.1, 4, -3, 3, 0},
    {"max", rlx_max, rt_f_max, -5, 5, -5, 5, 0},
    {"min", rlx_min, rt_f_min, -5, 5, -5, 5, 0},
    {"mod(python)", mod_py, rt_f_mod_py, -10, 10, -3, 3, 0.25},
    {"mod(fmod)", mod_c, rt_f_mod_c, -10, 10, -3, 3, 0.25},
};
#define N_BINARY (int)(sizeof k_binary / sizeof k_binary[0])

static int run_binary(const binary_case *c, rlx_dtype dt, const shape_pair *p)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *a = rt_rand(p->a.ndim, p->a.dims, c->alo, c->ahi);
    rt_tensor *b = c->bgap > 0 ? rt_rand_away(p->b.ndim, p->b.dims, c->blo, c->bhi, c->bgap)
                               : rt_rand(p->b.ndim, p->b.dims, c->blo, c->bhi);
    rlx_node y = c->op(rg->g, rt_input(rg, dt, a), rt_input(rg, dt, b));
    rt_tensor *got = rt_run1(rg, y), *want = rt_zip(a, b, c->f);
    char what[160];
    snprintf(what, sizeof what, "%s %s %s x %s", c->name, rlx_dtype_name(dt), rt_shape_str(p->a.ndim, p->a.dims),
             rt_shape_str(p->b.ndim, p->b.dims));
    int ok = dt == RLX_F32 ? rt_check_abs(what, got, want, 1e-5, 1e-6) : rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(a);
    rt_free(b);
    rt_graph_free(rg);
    return !ok;
}

static void test_binary_broadcast_f32(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < N_BINARY; i++)
        for (int p = 0; p < N_PAIRS; p++) {
            bad += run_binary(&k_binary[i], RLX_F32, &k_pairs[p]);
            /* the same pair the other way round */
            shape_pair q = {k_pairs[p].b, k_pairs[p].a};
            bad += run_binary(&k_binary[i], RLX_F32, &q);
        }
    assert_int_equal(bad, 0);
}

/* The same operand on both sides (x + x, x * x): one buffer read twice. */
static void test_binary_same_operand(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < N_BINARY; i++) {
        if (k_binary[i].bgap > 0)
            continue;
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(RT_SHAPE(4, 9), 0.2, 3);
        rlx_node xn = rt_input(rg, RLX_F32, x);
        rlx_node y = k_binary[i].op(rg->g, xn, xn);
        rt_tensor *got = rt_run1(rg, y), *want = rt_zip(x, x, k_binary[i].f);
        bad += !rt_check(k_binary[i].name, got, want, RLX_F32);
        rt_free(got);
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* Comparisons: operands drawn from a few integers (as floats) so that
 * equal cases really occur. */
static void test_compare(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        const char *name;
        binary_fn op;
        rt_fn2 f;
    } cases[] = {
        {"equal", rlx_equal, rt_f_equal}, {"less", rlx_less, rt_f_less}, {"greater", rlx_greater, rt_f_greater}};
    for (size_t c = 0; c < 3; c++)
        for (int p = 0; p < N_PAIRS; p++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *a = rt_randi(k_pairs[p].a.ndim, k_pairs[p].a.dims, -2, 3);
            rt_tensor *b = rt_randi(k_pairs[p].b.ndim, k_pairs[p].b.dims, -2, 3);
            for (int64_t i = 0; i < a->n; i++)
                a->d[i] *= 0.5;
            for (int64_t i = 0; i < b->n; i++)
                b->d[i] *= 0.5;
            rlx_node y = cases[c].op(rg->g, rt_input(rg, RLX_F32, a), rt_input(rg, RLX_F32, b));
            if (y >= 0)
                assert_int_equal(rlx_node_dtype(rg->g, y), RLX_BOOL);
            rt_tensor *got = rt_run1(rg, y), *want = rt_zip(a, b, cases[c].f);
            char what[128];
            snprintf(what, sizeof what, "%s %s x %s", cases[c].name, rt_shape_str(a->ndim, a->dims),
                     rt_shape_str(b->ndim, b->dims));
            bad += !rt_check(what, got, want, RLX_BOOL);
            rt_free(got);
            rt_free(want);
            rt_free(a);
            rt_free(b);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

static void test_logic(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        const char *name;
        binary_fn op;
        rt_fn2 f;
    } cases[] = {{"and", rlx_and, rt_f_and}, {"or", rlx_or, rt_f_or}, {"xor", rlx_xor, rt_f_xor}};
    for (size_t c = 0; c < 3; c++)
        for (int p = 0; p < N_PAIRS; p++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *a = rt_randb(k_pairs[p].a.ndim, k_pairs[p].a.dims, 0.5);
            rt_tensor *b = rt_randb(k_pairs[p].b.ndim, k_pairs[p].b.dims, 0.5);
            rlx_node y = cases[c].op(rg->g, rt_input(rg, RLX_BOOL, a), rt_input(rg, RLX_BOOL, b));
            rt_tensor *got = rt_run1(rg, y), *want = rt_zip(a, b, cases[c].f);
            char what[128];
            snprintf(what, sizeof what, "%s %s x %s", cases[c].name, rt_shape_str(a->ndim, a->dims),
                     rt_shape_str(b->ndim, b->dims));
            bad += !rt_check(what, got, want, RLX_BOOL);
            rt_free(got);
            rt_free(want);
            rt_free(a);
            rt_free(b);
            rt_graph_free(rg);
        }
    for (int s = 0; s < N_SHAPES; s++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *a = rt_randb(k_shapes[s].ndim, k_shapes[s].dims, 0.5);
        rlx_node y = rlx_not(rg->g, rt_input(rg, RLX_BOOL, a));
        rt_tensor *got = rt_run1(rg, y), *want = rt_map(a, rt_f_not);
        bad += !rt_check("not", got, want, RLX_BOOL);
        rt_free(got);
        rt_free(want);
        rt_free(a);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

static void test_where(void **state)
{
    (void)state;
    int bad = 0;
    static const shape triples[][3] = {
        {{2, {3, 4}}, {2, {3, 4}}, {2, {3, 4}}},
        {{2, {3, 1}}, {1, {4}}, {0, {0}}},
        {{1, {4}}, {2, {3, 1}}, {3, {2, 1, 1}}},
        {{0, {0}}, {2, {2, 5}}, {2, {2, 5}}},
        {{3, {2, 3, 4}}, {0, {0}}, {1, {1}}},
        {{2, {0, 4}}, {1, {4}}, {1, {4}}},
        {{4, {1, 3, 1, 5}}, {4, {2, 1, 4, 1}}, {1, {5}}},
    };
    for (size_t t = 0; t < sizeof triples / sizeof triples[0]; t++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *c = rt_randb(triples[t][0].ndim, triples[t][0].dims, 0.5);
        rt_tensor *a = rt_rand(triples[t][1].ndim, triples[t][1].dims, -3, 3);
        rt_tensor *b = rt_rand(triples[t][2].ndim, triples[t][2].dims, -3, 3);
        rlx_node y = rlx_where(rg->g, rt_input(rg, RLX_BOOL, c), rt_input(rg, RLX_F32, a), rt_input(rg, RLX_F32, b));
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_where(c, a, b);
        char what[160];
        snprintf(what, sizeof what, "where %s ? %s : %s", rt_shape_str(c->ndim, c->dims),
                 rt_shape_str(a->ndim, a->dims), rt_shape_str(b->ndim, b->dims));
        bad += !rt_check(what, got, want, RLX_F32);
        rt_free(got);
        rt_free(want);
        rt_free(a);
        rt_free(b);
        rt_free(c);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

static void test_clip(void **state)
{
    (void)state;
    int bad = 0;
    const double bounds[][2] = {{-1, 1}, {0, 6}, {-0.5, -0.25}, {2, 2}, {-INFINITY, 0.5}, {-0.5, INFINITY}};
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++)
        for (int s = 0; s < N_SHAPES; s++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rt_rand(k_shapes[s].ndim, k_shapes[s].dims, -4, 8);
            rlx_node y = rlx_clip(rg->g, rt_input(rg, RLX_F32, x), bounds[b][0], bounds[b][1]);
            rt_tensor *got = rt_run1(rg, y), *want = rt_ref_clip(x, bounds[b][0], bounds[b][1]);
            char what[128];
            snprintf(what, sizeof what, "clip [%g, %g] %s", bounds[b][0], bounds[b][1], rt_shape_str(x->ndim, x->dims));
            bad += !rt_check(what, got, want, RLX_F32);
            rt_free(got);
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

/* Clip of integer tensors with bounds past the dtype's range, infinite, or
 * crossed (an ONNX file may carry any; the fuzzer found one): the result
 * saturates to the dtype, with no out-of-range conversion on the way (the
 * sanitizer build checks that). */
static int clip_int_case(rlx_dtype dt, const void *x, const void *want, size_t es, double lo, double hi)
{
    rlx_graph *g = rlx_graph_new();
    rlx_output(g, "y", rlx_clip(g, rlx_input(g, "x", dt, 1, (int64_t[]){5}), lo, hi));
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *sess = NULL;
    unsigned char got[5 * 8] = {0};
    int ok = rlx_compile(g, &o, &sess) == RLX_OK && rlx_session_set_input(sess, "x", x, 5 * es) == RLX_OK &&
             rlx_session_run(sess) == RLX_OK && rlx_session_get_output(sess, "y", got, 5 * es) == RLX_OK &&
             memcmp(got, want, 5 * es) == 0;
    if (!ok)
        printf("clip %s [%g, %g]: wrong or failed (%s)\n", rlx_dtype_name(dt), lo, hi, rlx_last_error());
    rlx_session_free(sess);
    rlx_graph_free(g);
    return !ok;
}

static void test_clip_int_bounds(void **state)
{
    (void)state;
    const double bounds[][2] = {{-1e30, 1e30}, {1e30, 2e30}, {-2e30, -1e30}, {4.25e37, 0.5}, {INFINITY, INFINITY}};
    const int8_t x8[5] = {-128, -5, 0, 7, 127};
    const int8_t w8[][5] = {{-128, -5, 0, 7, 127},
                            {127, 127, 127, 127, 127},
                            {-128, -128, -128, -128, -128},
                            {0, 0, 0, 0, 0},
                            {127, 127, 127, 127, 127}};
    const int64_t x64[5] = {INT64_MIN, -5, 0, 7, INT64_MAX};
    const int64_t w64[][5] = {{INT64_MIN, -5, 0, 7, INT64_MAX},
                              {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX},
                              {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN},
                              {0, 0, 0, 0, 0},
                              {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX}};
    int bad = 0;
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        bad += clip_int_case(RLX_I8, x8, w8[b], 1, bounds[b][0], bounds[b][1]);
        bad += clip_int_case(RLX_I64, x64, w64[b], 8, bounds[b][0], bounds[b][1]);
    }
    assert_int_equal(bad, 0);
}

/* A chain of elementwise ops whose intermediates die early (in-place reuse
 * by the planner) plus a value read again at the end. */
static void test_elementwise_chain(void **state)
{
    (void)state;
    int bad = 0;
    const shape shapes[] = {{2, {5, 7}}, {1, {1}}, {3, {2, 1, 9}}, {1, {0}}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].dims, -2, 2);
        rt_tensor *w = rt_rand(1, &shapes[s].dims[shapes[s].ndim - 1], 0.5, 1.5);
        rlx_node xn = rt_input(rg, RLX_F32, x), wn = rt_input(rg, RLX_F32, w);
        rlx_node t = rlx_exp(rg->g, rlx_neg(rg->g, xn));
        t = rlx_mul(rg->g, rlx_tanh(rg->g, t), wn);
        t = rlx_sub(rg->g, t, rlx_sigmoid(rg->g, xn));
        rlx_node y = rlx_add(rg->g, rlx_abs(rg->g, t), xn);
        rt_tensor *got = rt_run1(rg, y);
        rt_tensor *a = rt_map(x, rt_f_neg), *b = rt_map(a, rt_f_exp), *c = rt_map(b, rt_f_tanh);
        rt_tensor *d = rt_zip(c, w, rt_f_mul), *e = rt_map(x, rt_f_sigmoid), *f = rt_zip(d, e, rt_f_sub);
        rt_tensor *h = rt_map(f, rt_f_abs), *want = rt_zip(h, x, rt_f_add);
        bad += !rt_check("elementwise chain", got, want, RLX_F32);
        rt_tensor *all[] = {got, a, b, c, d, e, f, h, want, x, w};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            rt_free(all[i]);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* Binary ops on constants only: the compile may fold them; the folded value
 * must equal the computed one. */
static void test_binary_constants(void **state)
{
    (void)state;
    int bad = 0;
    for (int i = 0; i < N_BINARY; i++) {
        for (int p = 0; p < 4; p++) {
            const binary_case *c = &k_binary[i];
            rt_graph *rg = rt_graph_new();
            rt_tensor *a = rt_rand(k_pairs[p].a.ndim, k_pairs[p].a.dims, c->alo, c->ahi);
            rt_tensor *b = c->bgap > 0 ? rt_rand_away(k_pairs[p].b.ndim, k_pairs[p].b.dims, c->blo, c->bhi, c->bgap)
                                       : rt_rand(k_pairs[p].b.ndim, k_pairs[p].b.dims, c->blo, c->bhi);
            rt_tensor *x = rt_rand(RT_SHAPE(1), -1, 1);
            /* one real input so the graph has something to run */
            rlx_node y = c->op(rg->g, rt_const(rg, RLX_F32, a), rt_const(rg, RLX_F32, b));
            rlx_node z = rlx_add(rg->g, rt_input(rg, RLX_F32, x), rlx_mul(rg->g, y, rlx_scalar(rg->g, RLX_F32, 1.0)));
            rt_tensor *got = rt_run1(rg, z);
            rt_tensor *r = rt_zip(a, b, c->f), *want = rt_zip(x, r, rt_f_add);
            char what[96];
            snprintf(what, sizeof what, "%s on constants", c->name);
            bad += !rt_check(what, got, want, RLX_F32);
            rt_free(got);
            rt_free(want);
            rt_free(r);
            rt_free(a);
            rt_free(b);
            rt_free(x);
            rt_graph_free(rg);
        }
    }
    assert_int_equal(bad, 0);
}

/* Tensors large enough for the kernels' multi-threaded paths. */
static void test_elementwise_large(void **state)
{
    (void)state;
    int bad = 0;
    const shape big[] = {{1, {70001}}, {2, {300, 257}}};
    for (int i = 0; i < N_UNARY; i++)
        for (int s = 0; s < 2; s++)
            bad += run_unary(k_unary[i].name, k_unary[i].op, k_unary[i].f, RLX_F32, &big[s], k_unary[i].lo,
                             k_unary[i].hi, k_unary[i].gap);
    const shape_pair pairs[] = {
        {{2, {300, 257}}, {2, {300, 257}}},   {{2, {300, 257}}, {1, {257}}}, {{2, {300, 1}}, {2, {1, 257}}},
        {{3, {4, 100, 97}}, {3, {4, 1, 97}}}, {{1, {70001}}, {0, {0}}},
    };
    for (int i = 0; i < N_BINARY; i++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
            bad += run_binary(&k_binary[i], RLX_F32, &pairs[p]);
    assert_int_equal(bad, 0);
}

/* pow beyond positive bases: negative bases with integral exponents,
 * zero bases, zero exponents (C pow / numpy float semantics). */
static void test_pow_special(void **state)
{
    (void)state;
    int bad = 0;
    int64_t n = 200;
    rt_tensor *a = rt_new(1, &n), *b = rt_new(1, &n);
    for (int64_t i = 0; i < n; i++) {
        switch (i % 4) {
        case 0:
            a->d[i] = rt_uniform(-3, -0.2);
            b->d[i] = (double)rt_randint(-3, 4);
            break; /* negative base */
        case 1:
            a->d[i] = 0.0;
            b->d[i] = (double)rt_randint(0, 3);
            break; /* 0^0 = 1, 0^k = 0 */
        case 2:
            a->d[i] = rt_uniform(-3, 3);
            b->d[i] = 0.0;
            break; /* x^0 = 1 */
        default:
            a->d[i] = rt_uniform(0.1, 3);
            b->d[i] = rt_uniform(-2, 2);
            break;
        }
    }
    rt_graph *rg = rt_graph_new();
    rlx_node y = rlx_pow(rg->g, rt_input(rg, RLX_F32, a), rt_input(rg, RLX_F32, b));
    rt_tensor *got = rt_run1(rg, y), *want = rt_zip(a, b, rt_f_pow);
    bad += !rt_check("pow with negative and zero bases", got, want, RLX_F32);
    rt_free(got);
    rt_free(want);
    rt_graph_free(rg);
    /* integer pow: small non-negative exponents, exact */
    const rlx_dtype its[] = {RLX_I64, RLX_I32};
    for (int t = 0; t < 2; t++) {
        rt_tensor *ia = rt_randi(1, &n, -9, 10), *ib = rt_randi(1, &n, 0, 6);
        rg = rt_graph_new();
        y = rlx_pow(rg->g, rt_input(rg, its[t], ia), rt_input(rg, its[t], ib));
        got = rt_run1(rg, y);
        want = rt_zip(ia, ib, rt_f_pow);
        char what[64];
        snprintf(what, sizeof what, "pow %s", rlx_dtype_name(its[t]));
        bad += !rt_check(what, got, want, its[t]);
        rt_free(got);
        rt_free(want);
        rt_free(ia);
        rt_free(ib);
        rt_graph_free(rg);
    }
    rt_free(a);
    rt_free(b);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_unary_f32, rt_setup),
        cmocka_unit_test_setup(test_unary_special_values, rt_setup),
        cmocka_unit_test_setup(test_unary_ieee_edges, rt_setup),
        cmocka_unit_test_setup(test_binary_broadcast_f32, rt_setup),
        cmocka_unit_test_setup(test_binary_same_operand, rt_setup),
        cmocka_unit_test_setup(test_compare, rt_setup),
        cmocka_unit_test_setup(test_logic, rt_setup),
        cmocka_unit_test_setup(test_where, rt_setup),
        cmocka_unit_test_setup(test_clip, rt_setup),
        cmocka_unit_test_setup(test_clip_int_bounds, rt_setup),
        cmocka_unit_test_setup(test_elementwise_chain, rt_setup),
        cmocka_unit_test_setup(test_binary_constants, rt_setup),
        cmocka_unit_test_setup(test_elementwise_large, rt_setup),
        cmocka_unit_test_setup(test_pow_special, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
