/* Reductions (sum, mean, max, min, prod over any axes, keepdims), argmax /
 * argmin, softmax and log-softmax on any axis, against the float64
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

typedef rlx_node (*reduce_fn)(rlx_graph *, rlx_node, int, const int *, int);

typedef struct reduce_case {
    int ndim;
    int64_t dims[RT_MAXD];
    int naxes;
    int axes[RT_MAXD];
} reduce_case;

static const reduce_case k_cases[] = {
    {1, {5}, 1, {0}},
    {1, {5}, 1, {-1}},
    {1, {1}, 1, {0}},
    {2, {3, 4}, 1, {0}},
    {2, {3, 4}, 1, {1}},
    {2, {3, 4}, 1, {-1}},
    {2, {3, 4}, 2, {0, 1}},
    {2, {3, 4}, 0, {0}}, /* every axis */
    {3, {2, 3, 4}, 1, {1}},
    {3, {2, 3, 4}, 2, {0, 2}},
    {3, {2, 3, 4}, 2, {-1, -3}},
    {3, {2, 3, 4}, 1, {-2}},
    {3, {2, 3, 4}, 2, {2, 1}}, /* axes out of order */
    {4, {2, 1, 3, 1}, 2, {1, 3}},
    {4, {2, 1, 3, 1}, 1, {0}},
    {4, {4, 5, 6, 7}, 2, {1, 2}},
    {4, {4, 5, 6, 7}, 2, {0, 3}},
    {4, {4, 5, 6, 7}, 3, {0, 1, 3}},
    {2, {1, 300}, 1, {1}}, /* long row */
    {2, {300, 3}, 1, {0}}, /* long column */
    {0, {0}, 0, {0}},      /* scalar: nothing to reduce */
    {2, {0, 3}, 1, {1}},   /* empty, reduce a non-empty axis */
    {3, {2, 0, 3}, 1, {-1}},
};
#define N_CASES (int)(sizeof k_cases / sizeof k_cases[0])

static const struct {
    const char *name;
    reduce_fn op;
    rt_reduce kind;
    double lo, hi;
} k_reduce[] = {
    {"sum", rlx_reduce_sum, RT_SUM, -1, 1},       {"mean", rlx_reduce_mean, RT_MEAN, -1, 1},
    {"max", rlx_reduce_max, RT_MAX, -10, 10},     {"min", rlx_reduce_min, RT_MIN, -10, 10},
    {"prod", rlx_reduce_prod, RT_PROD, 0.7, 1.4},
};
#define N_REDUCE (int)(sizeof k_reduce / sizeof k_reduce[0])

static int run_reduce(int r, const reduce_case *c, int keepdims, rlx_dtype dt)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(c->ndim, c->dims, k_reduce[r].lo, k_reduce[r].hi);
    rlx_node y = k_reduce[r].op(rg->g, rt_input(rg, dt, x), c->naxes, c->axes, keepdims);
    rt_tensor *got = rt_run1(rg, y);
    rt_tensor *want = rt_ref_reduce(x, k_reduce[r].kind, c->naxes, c->axes, keepdims);
    char what[160], ax[64] = "";
    for (int i = 0; i < c->naxes; i++)
        snprintf(ax + strlen(ax), sizeof ax - strlen(ax), "%s%d", i ? "," : "", c->axes[i]);
    snprintf(what, sizeof what, "reduce_%s %s %s axes {%s} keepdims %d", k_reduce[r].name, rlx_dtype_name(dt),
             rt_shape_str(c->ndim, c->dims), ax, keepdims);
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    return !ok;
}

static void test_reduce_f32(void **state)
{
    (void)state;
    int bad = 0;
    for (int r = 0; r < N_REDUCE; r++)
        for (int c = 0; c < N_CASES; c++)
            for (int k = 0; k < 2; k++)
                bad += run_reduce(r, &k_cases[c], k, RLX_F32);
    assert_int_equal(bad, 0);
}

/* Sum and prod over an empty axis are 0 and 1 (the identity). */
static void test_reduce_empty_axis(void **state)
{
    (void)state;
    int bad = 0;
    const reduce_case cases[] = {
        {2, {0, 3}, 1, {0}},
        {3, {2, 0, 3}, 1, {1}},
        {1, {0}, 0, {0}},
    };
    for (int r = 0; r < N_REDUCE; r++) {
        if (k_reduce[r].kind != RT_SUM && k_reduce[r].kind != RT_PROD)
            continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int k = 0; k < 2; k++)
                bad += run_reduce(r, &cases[c], k, RLX_F32);
    }
    assert_int_equal(bad, 0);
}

/* The reduced result feeds another op (the reduced buffer is read again). */
static void test_reduce_then_broadcast(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(4, 9), -2, 2);
    rlx_node xn = rt_input(rg, RLX_F32, x);
    rlx_node m = rlx_reduce_mean(rg->g, xn, 1, (int[]){-1}, 1);
    rlx_node y = rlx_sub(rg->g, xn, m);
    rt_tensor *got = rt_run1(rg, y);
    rt_tensor *mr = rt_ref_reduce(x, RT_MEAN, 1, (int[]){-1}, 1), *want = rt_zip(x, mr, rt_f_sub);
    int ok = rt_check("x - mean(x, -1)", got, want, RLX_F32);
    rt_free(got);
    rt_free(want);
    rt_free(mr);
    rt_free(x);
    rt_graph_free(rg);
    assert_true(ok);
}

/* ------------------------------------------------------------ arg */

static int run_arg(int is_max, const rt_tensor *x0, int axis, int keepdims, rlx_dtype dt)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_clone(x0);
    rlx_node xn = rt_input(rg, dt, x);
    rlx_node y = is_max ? rlx_argmax(rg->g, xn, axis, keepdims) : rlx_argmin(rg->g, xn, axis, keepdims);
    int bad = 0;
    if (y >= 0 && rlx_node_dtype(rg->g, y) != RLX_I64) {
        fprintf(stderr, "arg%s result dtype %s, expected i64\n", is_max ? "max" : "min",
                rlx_dtype_name(rlx_node_dtype(rg->g, y)));
        bad++;
    }
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_arg(x, axis, keepdims, is_max);
    char what[160];
    snprintf(what, sizeof what, "arg%s %s %s axis %d keepdims %d", is_max ? "max" : "min", rlx_dtype_name(dt),
             rt_shape_str(x->ndim, x->dims), axis, keepdims);
    bad += !rt_check(what, got, want, RLX_I64);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    return bad;
}

static void test_argmax_argmin(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t dims[4];
        int axis;
    } cases[] = {
        {1, {7}, 0},        {1, {7}, -1},       {2, {3, 4}, 0}, {2, {3, 4}, 1}, {2, {3, 4}, -1},  {3, {2, 3, 4}, 1},
        {3, {2, 3, 4}, -1}, {3, {2, 3, 4}, -3}, {2, {1, 5}, 0}, {2, {5, 1}, 1}, {2, {2, 257}, 1}, {3, {0, 3, 2}, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int k = 0; k < 2; k++)
            for (int is_max = 0; is_max < 2; is_max++) {
                /* continuous values: a unique extreme */
                rt_tensor *x = rt_rand(cases[c].ndim, cases[c].dims, -5, 5);
                bad += run_arg(is_max, x, cases[c].axis, k, RLX_F32);
                rt_free(x);
                /* few distinct values: ties, the first index wins */
                x = rt_randi(cases[c].ndim, cases[c].dims, -2, 2);
                bad += run_arg(is_max, x, cases[c].axis, k, RLX_F32);
                rt_free(x);
            }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ softmax */

static int run_softmax(int log_, int ndim, const int64_t *dims, int axis, double lo, double hi, rlx_dtype dt)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(ndim, dims, lo, hi);
    rlx_node xn = rt_input(rg, dt, x);
    rlx_node y = log_ ? rlx_log_softmax(rg->g, xn, axis) : rlx_softmax(rg->g, xn, axis);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_softmax(x, axis, log_);
    char what[160];
    snprintf(what, sizeof what, "%s %s %s axis %d, inputs in [%g, %g)", log_ ? "log_softmax" : "softmax",
             rlx_dtype_name(dt), rt_shape_str(ndim, dims), axis, lo, hi);
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_graph_free(rg);
    return !ok;
}

static void test_softmax(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int ndim;
        int64_t dims[4];
        int axis;
    } cases[] = {
        {1, {7}, 0},        {1, {7}, -1},       {2, {3, 5}, 1},    {2, {3, 5}, 0},       {2, {3, 5}, -2},
        {3, {2, 3, 4}, 1},  {3, {2, 3, 4}, -1}, {3, {2, 3, 4}, 0}, {4, {2, 3, 4, 5}, 2}, {2, {4, 1}, 1},
        {2, {1, 1000}, -1}, {2, {0, 5}, -1},    {3, {2, 0, 3}, 2}, {2, {33, 65}, -1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int log_ = 0; log_ < 2; log_++) {
            bad += run_softmax(log_, cases[c].ndim, cases[c].dims, cases[c].axis, -4, 4, RLX_F32);
            /* large values: must subtract the max first */
            bad += run_softmax(log_, cases[c].ndim, cases[c].dims, cases[c].axis, 900, 1000, RLX_F32);
            bad += run_softmax(log_, cases[c].ndim, cases[c].dims, cases[c].axis, -1000, -990, RLX_F32);
        }
    assert_int_equal(bad, 0);
}

/* -inf entries (a masked score) get probability 0 / log-probability -inf. */
static void test_softmax_neg_inf(void **state)
{
    (void)state;
    int bad = 0;
    for (int log_ = 0; log_ < 2; log_++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(RT_SHAPE(4, 6), -3, 3);
        for (int r = 0; r < 4; r++)
            for (int j = 0; j <= r; j++)
                x->d[r * 6 + 5 - j] = -INFINITY;
        rlx_node xn = rt_input(rg, RLX_F32, x);
        rlx_node y = log_ ? rlx_log_softmax(rg->g, xn, -1) : rlx_softmax(rg->g, xn, -1);
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_softmax(x, -1, log_);
        bad += !rt_check(log_ ? "log_softmax with -inf" : "softmax with -inf", got, want, RLX_F32);
        rt_free(got);
        rt_free(want);
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* Tensors large enough for the kernels' multi-threaded paths. */
static void test_reduce_large(void **state)
{
    (void)state;
    int bad = 0;
    const reduce_case cases[] = {
        {2, {512, 300}, 1, {0}},      {2, {512, 300}, 1, {-1}},  {2, {300, 512}, 0, {0}},
        {3, {64, 40, 33}, 2, {0, 2}}, {3, {64, 40, 33}, 1, {1}},
    };
    for (int r = 0; r < N_REDUCE; r++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (k_reduce[r].kind == RT_PROD && cases[c].naxes != 1)
                continue; /* products of 150000 values under- or overflow */
            bad += run_reduce(r, &cases[c], c & 1, RLX_F32);
        }
    for (int is_max = 0; is_max < 2; is_max++) {
        rt_tensor *x = rt_rand(RT_SHAPE(300, 400), -5, 5);
        bad += run_arg(is_max, x, 0, 0, RLX_F32);
        bad += run_arg(is_max, x, -1, 1, RLX_F32);
        rt_free(x);
    }
    for (int log_ = 0; log_ < 2; log_++) {
        bad += run_softmax(log_, RT_SHAPE(256, 513), -1, -8, 8, RLX_F32);
        bad += run_softmax(log_, RT_SHAPE(256, 513), 0, -8, 8, RLX_F32);
        bad += run_softmax(log_, RT_SHAPE(4, 300, 60), 1, -8, 8, RLX_F32);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reduce_f32, rt_setup),
        cmocka_unit_test_setup(test_reduce_empty_axis, rt_setup),
        cmocka_unit_test_setup(test_reduce_then_broadcast, rt_setup),
        cmocka_unit_test_setup(test_argmax_argmin, rt_setup),
        cmocka_unit_test_setup(test_softmax, rt_setup),
        cmocka_unit_test_setup(test_softmax_neg_inf, rt_setup),
        cmocka_unit_test_setup(test_reduce_large, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
