/* Layer norm and RMS norm (with and without scale/bias, several eps) against
 * the float64 reference on random inputs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "support/ref.h"

typedef struct shape {
    int ndim;
    int64_t dims[RT_MAXD];
} shape;

static const shape k_shapes[] = {
    {2, {4, 8}},    {1, {16}},   {2, {1, 1}},       {3, {2, 3, 16}}, {2, {5, 1}},
    {2, {1, 1000}}, {2, {0, 8}}, {4, {2, 1, 3, 7}}, {2, {64, 33}},
};
#define N_SHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

/* rms=0: layer norm; rms=1: RMS norm.  has_gamma/has_beta pick the optional
 * operands; offset shifts the inputs (variance of data far from 0). */
static int run_norm(int rms, const shape *s, int has_gamma, int has_beta, double eps, double offset, rlx_dtype dt)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(s->ndim, s->dims, offset - 2, offset + 2);
    int64_t d = s->dims[s->ndim - 1];
    rt_tensor *gm = has_gamma ? rt_rand(1, &d, 0.5, 2) : NULL;
    rt_tensor *bt = has_beta ? rt_rand(1, &d, -1, 1) : NULL;
    rlx_node xn = rt_input(rg, dt, x);
    rlx_node gn = gm ? rt_param(rg, dt, gm) : -1;
    rlx_node bn = bt ? rt_param(rg, dt, bt) : -1;
    rlx_node y = rms ? rlx_rms_norm(rg->g, xn, gn, eps) : rlx_layer_norm(rg->g, xn, gn, bn, eps);
    rt_tensor *got = rt_run1(rg, y);
    rt_tensor *want = rms ? rt_ref_rms_norm(x, gm, eps) : rt_ref_layer_norm(x, gm, bt, eps);
    char what[192];
    snprintf(what, sizeof what, "%s %s %s gamma %d beta %d eps %g offset %g", rms ? "rms_norm" : "layer_norm",
             rlx_dtype_name(dt), rt_shape_str(s->ndim, s->dims), has_gamma, has_beta, eps, offset);
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_free(gm);
    rt_free(bt);
    rt_graph_free(rg);
    return !ok;
}

static void test_layer_norm(void **state)
{
    (void)state;
    int bad = 0;
    const double eps[] = {1e-5, 1e-6, 0.1};
    for (int s = 0; s < N_SHAPES; s++)
        for (int gb = 0; gb < 4; gb++)
            for (int e = 0; e < 3; e++)
                bad += run_norm(0, &k_shapes[s], gb & 1, (gb >> 1) & 1, eps[e], 0, RLX_F32);
    assert_int_equal(bad, 0);
}

static void test_rms_norm(void **state)
{
    (void)state;
    int bad = 0;
    const double eps[] = {1e-5, 1e-6, 0.1};
    for (int s = 0; s < N_SHAPES; s++)
        for (int g = 0; g < 2; g++)
            for (int e = 0; e < 3; e++)
                bad += run_norm(1, &k_shapes[s], g, 0, eps[e], 0, RLX_F32);
    assert_int_equal(bad, 0);
}

/* Data far from zero: the variance must not be computed as E[x^2] - E[x]^2
 * in single precision, nor x - mean with the mean rounded to a float (at
 * 1e4, a float's step is 1e-3 of a spread of 4). */
static void test_layer_norm_offset(void **state)
{
    (void)state;
    int bad = 0;
    const shape shapes[] = {{2, {4, 64}}, {2, {3, 1000}}, {2, {5, 37}}};
    const double offsets[] = {50, 1e4, 1e6};
    for (size_t s = 0; s < 3; s++)
        for (size_t o = 0; o < 3; o++) {
            bad += run_norm(0, &shapes[s], 1, 1, 1e-5, offsets[o], RLX_F32);
            bad += run_norm(0, &shapes[s], 0, 0, 1e-5, offsets[o], RLX_F32);
            bad += run_norm(1, &shapes[s], 1, 0, 1e-5, offsets[o], RLX_F32);
        }
    assert_int_equal(bad, 0);
}

/* Constant rows: variance 0, the result is beta (eps keeps it finite). */
static void test_layer_norm_constant_rows(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    /* 8 per row: the mean is exact however it is computed */
    rt_tensor *x = rt_new(RT_SHAPE(3, 8));
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 8; i++)
            x->d[r * 8 + i] = (double)(r + 1) * 0.75;
    rt_tensor *gm = rt_rand(RT_SHAPE(8), 0.5, 2), *bt = rt_rand(RT_SHAPE(8), -1, 1);
    rlx_node y =
        rlx_layer_norm(rg->g, rt_input(rg, RLX_F32, x), rt_param(rg, RLX_F32, gm), rt_param(rg, RLX_F32, bt), 1e-5);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_layer_norm(x, gm, bt, 1e-5);
    int ok = rt_check("layer_norm of constant rows", got, want, RLX_F32);
    rt_free(got);
    rt_free(want);
    rt_free(x);
    rt_free(gm);
    rt_free(bt);
    rt_graph_free(rg);
    assert_true(ok);
}

static void test_norm_half_types(void **state)
{
    (void)state;
    int bad = 0;
    const rlx_dtype dts[] = {RLX_F16, RLX_BF16, RLX_F64};
    const shape shapes[] = {{2, {4, 32}}, {3, {2, 1, 7}}};
    for (int d = 0; d < 3; d++)
        for (int s = 0; s < 2; s++) {
            bad += run_norm(0, &shapes[s], 1, 1, 1e-5, 0, dts[d]);
            bad += run_norm(1, &shapes[s], 1, 0, 1e-6, 0, dts[d]);
        }
    assert_int_equal(bad, 0);
}

/* Tensors large enough for the kernels' multi-threaded paths. */
static void test_norm_large(void **state)
{
    (void)state;
    int bad = 0;
    const shape shapes[] = {{2, {512, 768}}, {3, {3, 129, 100}}};
    for (int s = 0; s < 2; s++) {
        bad += run_norm(0, &shapes[s], 1, 1, 1e-5, 0, RLX_F32);
        bad += run_norm(0, &shapes[s], 0, 0, 1e-6, 0, RLX_F32);
        bad += run_norm(1, &shapes[s], 1, 0, 1e-6, 0, RLX_F32);
        bad += run_norm(1, &shapes[s], 0, 0, 1e-5, 0, RLX_F32);
    }
    assert_int_equal(bad, 0);
}

/* Inference batch norm over axis 1, parameters as inputs (no folding). */
static void test_batch_norm(void **state)
{
    (void)state;
    int bad = 0;
    const shape shapes[] = {{4, {2, 3, 5, 7}}, {3, {4, 6, 9}},    {2, {5, 4}},
                            {4, {1, 1, 1, 1}}, {4, {0, 3, 2, 2}}, {4, {2, 64, 24, 24}}};
    const double eps[] = {1e-5, 1e-3};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int e = 0; e < 2; e++)
            for (int as_const = 0; as_const < 2; as_const++) {
                rt_graph *rg = rt_graph_new();
                int64_t C = shapes[s].dims[1];
                rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].dims, -3, 3);
                rt_tensor *sc = rt_rand(1, &C, 0.5, 2), *bi = rt_rand(1, &C, -1, 1);
                rt_tensor *mu = rt_rand(1, &C, -1, 1), *va = rt_rand(1, &C, 0.1, 3);
                rlx_node (*leaf)(rt_graph *, rlx_dtype, rt_tensor *) = as_const ? rt_const : rt_param;
                rlx_node y =
                    rlx_batch_norm(rg->g, rt_input(rg, RLX_F32, x), leaf(rg, RLX_F32, sc), leaf(rg, RLX_F32, bi),
                                   leaf(rg, RLX_F32, mu), leaf(rg, RLX_F32, va), eps[e]);
                rt_tensor *got = rt_run1(rg, y), *want = rt_ref_batch_norm(x, sc, bi, mu, va, eps[e]);
                char what[128];
                snprintf(what, sizeof what, "batch_norm %s eps %g params %s", rt_shape_str(x->ndim, x->dims), eps[e],
                         as_const ? "constant" : "bound");
                bad += !rt_check(what, got, want, RLX_F32);
                rt_tensor *all[] = {got, want, x, sc, bi, mu, va};
                for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                    rt_free(all[i]);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_layer_norm, rt_setup),
        cmocka_unit_test_setup(test_rms_norm, rt_setup),
        cmocka_unit_test_setup(test_layer_norm_offset, rt_setup),
        cmocka_unit_test_setup(test_layer_norm_constant_rows, rt_setup),
        cmocka_unit_test_setup(test_norm_half_types, rt_setup),
        cmocka_unit_test_setup(test_norm_large, rt_setup),
        cmocka_unit_test_setup(test_batch_norm, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
