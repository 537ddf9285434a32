/* Matmul: plain, transposed operands, batched with broadcast batch dims,
 * numpy 1-d rules, one row times transposed weights (the matrix-vector
 * kernels), empty dims, weights as params, against the float64
 * reference on random inputs. */
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

/* Runs a @ b (trans flags) with both operands as inputs of dtype dt, or b
 * as a param when b_param. Returns 1 on mismatch. */
static int run_mm(const shape *sa, const shape *sb, int ta, int tb, rlx_dtype dt, int b_param)
{
    rt_graph *rg = rt_graph_new();
    rt_tensor *a = rt_rand(sa->ndim, sa->dims, -1, 1);
    rt_tensor *b = rt_rand(sb->ndim, sb->dims, -1, 1);
    rlx_node an = rt_input(rg, dt, a);
    rlx_node bn = b_param ? rt_param(rg, dt, b) : rt_input(rg, dt, b);
    rlx_node y = rlx_matmul(rg->g, an, bn, ta, tb);
    rt_tensor *got = rt_run1(rg, y), *want = rt_ref_matmul(a, b, ta, tb);
    char what[192];
    snprintf(what, sizeof what, "matmul %s %s%s x %s%s", rlx_dtype_name(dt), rt_shape_str(sa->ndim, sa->dims),
             ta ? "^T" : "", rt_shape_str(sb->ndim, sb->dims), tb ? "^T" : "");
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_free(a);
    rt_free(b);
    rt_graph_free(rg);
    return !ok;
}

/* Shapes of a and b for M, K, N under the transpose flags. */
static void mk(int64_t M, int64_t K, int64_t N, int ta, int tb, shape *a, shape *b)
{
    a->ndim = b->ndim = 2;
    a->dims[0] = ta ? K : M;
    a->dims[1] = ta ? M : K;
    b->dims[0] = tb ? N : K;
    b->dims[1] = tb ? K : N;
}

static void test_matmul_2d(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t mkn[][3] = {{1, 1, 1}, {3, 5, 4}, {1, 128, 1}, {17, 33, 9}, {64, 64, 64},
                              {2, 7, 1}, {1, 7, 5}, {31, 1, 29}, {5, 100, 67}};
    for (size_t i = 0; i < sizeof mkn / sizeof mkn[0]; i++) {
        shape a, b;
        mk(mkn[i][0], mkn[i][1], mkn[i][2], 0, 0, &a, &b);
        bad += run_mm(&a, &b, 0, 0, RLX_F32, 0);
    }
    assert_int_equal(bad, 0);
}

static void test_matmul_transposed(void **state)
{
    (void)state;
    int bad = 0;
    /* the last four: products small enough for the CPU's own loops, C
     * narrower than 8 columns (each value a dot product of A's row and
     * B's column, B gathered first unless stored transposed) */
    const int64_t mkn[][3] = {{3, 5, 4},   {1, 9, 6},  {8, 1, 3},  {19, 23, 17}, {16, 32, 8},
                              {64, 64, 1}, {9, 70, 2}, {5, 33, 7}, {40, 40, 5}};
    for (size_t i = 0; i < sizeof mkn / sizeof mkn[0]; i++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                shape a, b;
                mk(mkn[i][0], mkn[i][1], mkn[i][2], ta, tb, &a, &b);
                bad += run_mm(&a, &b, ta, tb, RLX_F32, 0);
            }
    assert_int_equal(bad, 0);
}

static void test_matmul_batched(void **state)
{
    (void)state;
    int bad = 0;
    const shape pairs[][2] = {
        {{3, {2, 3, 4}}, {3, {2, 4, 5}}},          /* same batch */
        {{3, {4, 3, 4}}, {2, {4, 5}}},             /* weight shared over the batch */
        {{2, {3, 4}}, {3, {6, 4, 5}}},             /* left shared */
        {{4, {2, 3, 4, 5}}, {4, {2, 3, 5, 6}}},    /* 2 batch dims */
        {{4, {3, 1, 4, 5}}, {3, {2, 5, 6}}},       /* broadcast batch dims */
        {{4, {2, 1, 4, 5}}, {4, {1, 3, 5, 2}}},    /* both stretch */
        {{3, {1, 7, 3}}, {3, {5, 3, 2}}},          /* size-1 batch */
        {{5, {2, 1, 2, 3, 4}}, {4, {3, 1, 4, 2}}}, /* rank 5 */
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        bad += run_mm(&pairs[i][0], &pairs[i][1], 0, 0, RLX_F32, 0);
        /* transposed versions of the same products */
        shape at = pairs[i][0], bt = pairs[i][1];
        int64_t t = at.dims[at.ndim - 1];
        at.dims[at.ndim - 1] = at.dims[at.ndim - 2];
        at.dims[at.ndim - 2] = t;
        t = bt.dims[bt.ndim - 1];
        bt.dims[bt.ndim - 1] = bt.dims[bt.ndim - 2];
        bt.dims[bt.ndim - 2] = t;
        bad += run_mm(&at, &bt, 1, 1, RLX_F32, 0);
        bad += run_mm(&pairs[i][0], &bt, 0, 1, RLX_F32, 0);
        bad += run_mm(&at, &pairs[i][1], 1, 0, RLX_F32, 0);
    }
    assert_int_equal(bad, 0);
}

static void test_matmul_vectors(void **state)
{
    (void)state;
    int bad = 0;
    const shape pairs[][2] = {
        {{1, {7}}, {2, {7, 5}}},    /* [K] x [K, N] -> [N] */
        {{2, {4, 7}}, {1, {7}}},    /* [M, K] x [K] -> [M] */
        {{1, {9}}, {1, {9}}},       /* dot -> [] */
        {{1, {1}}, {1, {1}}},       /* dot of length 1 */
        {{1, {6}}, {3, {3, 6, 2}}}, /* [K] x [B, K, N] -> [B, N] */
        {{3, {2, 3, 6}}, {1, {6}}}, /* [B, M, K] x [K] -> [B, M] */
        {{1, {1}}, {2, {1, 8}}},    /* K = 1 */
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        bad += run_mm(&pairs[i][0], &pairs[i][1], 0, 0, RLX_F32, 0);
    /* trans flags on a 2-d operand next to a vector */
    shape a = {1, {7}}, b = {2, {5, 7}};
    bad += run_mm(&a, &b, 0, 1, RLX_F32, 0);
    shape c = {2, {7, 4}}, d = {1, {7}};
    bad += run_mm(&c, &d, 1, 0, RLX_F32, 0);
    assert_int_equal(bad, 0);
}

/* M = 0 or N = 0 give empty results; K = 0 gives zeros. */
/* One row times weights stored [N, K] (trans_b): a decode step's
 * matrix-vector product, which has kernels of its own (AVX-512 where the
 * processor has it: 64 elements a step, then 16, then a masked tail).
 * Every K up to 70 and longer rows around those widths, weights as inputs
 * and as params, a batch of rows over a batch of weights, and rows long
 * enough to be shared among threads. */
static void test_matmul_matvec(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t ks[] = {127, 128, 129, 191, 512, 1000, 1536};
    const int64_t ns[] = {1, 3, 48};
    for (int64_t k = 1; k <= 70 + (int64_t)(sizeof ks / sizeof ks[0]); k++) {
        int64_t K = k <= 70 ? k : ks[k - 71];
        for (size_t n = 0; n < sizeof ns / sizeof ns[0]; n++) {
            shape a = {2, {1, K}}, b = {2, {ns[n], K}};
            bad += run_mm(&a, &b, 0, 1, RLX_F32, (int)(k & 1));
        }
    }
    shape a = {3, {3, 1, 100}}, b = {3, {3, 7, 100}};
    bad += run_mm(&a, &b, 0, 1, RLX_F32, 0);
    shape c = {3, {2, 1, 33}}, d = {2, {5, 33}};
    bad += run_mm(&c, &d, 0, 1, RLX_F32, 1);
    assert_int_equal(bad, 0);
}

static void test_matmul_empty(void **state)
{
    (void)state;
    int bad = 0;
    const shape pairs[][2] = {
        {{2, {0, 4}}, {2, {4, 3}}},
        {{2, {3, 4}}, {2, {4, 0}}},
        {{2, {3, 0}}, {2, {0, 5}}},
        {{3, {0, 2, 3}}, {2, {3, 4}}},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        bad += run_mm(&pairs[i][0], &pairs[i][1], 0, 0, RLX_F32, 0);
    assert_int_equal(bad, 0);
}

/* Weights bound as params, as in a model. */
static void test_matmul_param(void **state)
{
    (void)state;
    int bad = 0;
    const shape pairs[][2] = {
        {{2, {8, 16}}, {2, {16, 12}}},
        {{3, {2, 5, 16}}, {2, {16, 3}}},
        {{2, {1, 32}}, {2, {32, 32}}},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        bad += run_mm(&pairs[i][0], &pairs[i][1], 0, 0, RLX_F32, 1);
        shape bt = pairs[i][1];
        int64_t t = bt.dims[0];
        bt.dims[0] = bt.dims[1];
        bt.dims[1] = t;
        bad += run_mm(&pairs[i][0], &bt, 0, 1, RLX_F32, 1);
    }
    assert_int_equal(bad, 0);
}

/* Storage dtypes: f16/bf16 (f32 compute) and f64. */
static void test_matmul_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    const rlx_dtype dts[] = {RLX_F16, RLX_BF16, RLX_F64};
    const shape pairs[][2] = {
        {{2, {5, 16}}, {2, {16, 7}}},
        {{3, {2, 3, 8}}, {3, {2, 8, 4}}},
        {{1, {9}}, {2, {9, 3}}},
    };
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
            bad += run_mm(&pairs[i][0], &pairs[i][1], 0, 0, dts[d], 0);
            if (pairs[i][0].ndim > 1) {
                shape bt = pairs[i][1];
                int64_t t = bt.dims[bt.ndim - 1];
                bt.dims[bt.ndim - 1] = bt.dims[bt.ndim - 2];
                bt.dims[bt.ndim - 2] = t;
                bad += run_mm(&pairs[i][0], &bt, 0, 1, dts[d], 0);
            }
        }
    assert_int_equal(bad, 0);
}

/* Two matmuls sharing an operand, and a matmul of a matmul. */
static void test_matmul_chain(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(6, 10), -1, 1);
    rt_tensor *w1 = rt_rand(RT_SHAPE(10, 8), -1, 1);
    rt_tensor *w2 = rt_rand(RT_SHAPE(8, 3), -1, 1);
    rlx_node xn = rt_input(rg, RLX_F32, x), w1n = rt_param(rg, RLX_F32, w1), w2n = rt_param(rg, RLX_F32, w2);
    rlx_node h = rlx_matmul(rg->g, xn, w1n, 0, 0);
    rlx_node y = rlx_matmul(rg->g, h, w2n, 0, 0);
    rlx_node z = rlx_matmul(rg->g, h, h, 1, 0); /* h^T h: [8, 8] */
    rlx_node outs[2] = {y, z};
    rt_tensor *got[2];
    rlx_status st = rt_run(rg, 2, outs, got);
    rt_tensor *hr = rt_ref_matmul(x, w1, 0, 0);
    rt_tensor *yr = rt_ref_matmul(hr, w2, 0, 0), *zr = rt_ref_matmul(hr, hr, 1, 0);
    int bad = st != RLX_OK;
    if (st == RLX_OK) {
        bad += !rt_check("x w1 w2", got[0], yr, RLX_F32);
        bad += !rt_check("h^T h", got[1], zr, RLX_F32);
        rt_free(got[0]);
        rt_free(got[1]);
    }
    rt_free(hr);
    rt_free(yr);
    rt_free(zr);
    rt_free(x);
    rt_free(w1);
    rt_free(w2);
    rt_graph_free(rg);
    assert_int_equal(bad, 0);
}

/* Products large enough for blocked / threaded GEMM paths. */
static void test_matmul_large(void **state)
{
    (void)state;
    int bad = 0;
    const int64_t mkn[][3] = {{256, 128, 192}, {129, 257, 65}, {1, 1024, 512}, {512, 64, 1}};
    for (size_t i = 0; i < sizeof mkn / sizeof mkn[0]; i++)
        for (int t = 0; t < 4; t++) {
            shape a, b;
            mk(mkn[i][0], mkn[i][1], mkn[i][2], t & 1, t >> 1, &a, &b);
            bad += run_mm(&a, &b, t & 1, t >> 1, RLX_F32, t == 3);
        }
    const shape pairs[][2] = {
        {{3, {8, 64, 64}}, {3, {8, 64, 64}}},
        {{4, {2, 4, 33, 64}}, {2, {64, 48}}},
        {{4, {2, 1, 64, 32}}, {4, {1, 6, 32, 40}}},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        bad += run_mm(&pairs[i][0], &pairs[i][1], 0, 0, RLX_F32, 0);
    shape a = {2, {200, 96}}, b = {2, {96, 150}};
    bad += run_mm(&a, &b, 0, 0, RLX_F16, 0);
    bad += run_mm(&a, &b, 0, 0, RLX_BF16, 0);
    bad += run_mm(&a, &b, 0, 0, RLX_F64, 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_matmul_2d, rt_setup),      cmocka_unit_test_setup(test_matmul_transposed, rt_setup),
        cmocka_unit_test_setup(test_matmul_batched, rt_setup), cmocka_unit_test_setup(test_matmul_vectors, rt_setup),
        cmocka_unit_test_setup(test_matmul_matvec, rt_setup),  cmocka_unit_test_setup(test_matmul_empty, rt_setup),
        cmocka_unit_test_setup(test_matmul_param, rt_setup),   cmocka_unit_test_setup(test_matmul_dtypes, rt_setup),
        cmocka_unit_test_setup(test_matmul_chain, rt_setup),   cmocka_unit_test_setup(test_matmul_large, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
