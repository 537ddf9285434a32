/* test_branch.c - nodes only one side of a one-element select needs
 * (src/runtime/branch.c): which nodes get a guard and which do not (a node
 * both sides read, an output, one decided by a condition computed after
 * it, a nested select), and that a compiled graph gives the selected
 * side's values whichever way the condition goes from run to run, on
 * fresh random inputs each run, against a float64 reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rlx.h"
#include "runtime/branch.h"

enum { N = 37 };

/* y = where(c, (e + x) * (e + x), where(d, tanh(e - x), -(e - x))), e = exp(x). */
typedef struct two_sides {
    rlx_graph *g;
    rlx_node c, d, e, t1, t2, u, p, q, inner, y;
} two_sides;

static void build(two_sides *b)
{
    rlx_graph *g = b->g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){N});
    b->c = rlx_input(g, "c", RLX_BOOL, 0, NULL);
    b->d = rlx_input(g, "d", RLX_BOOL, 0, NULL);
    b->e = rlx_exp(g, x);
    b->t1 = rlx_add(g, b->e, x);
    b->t2 = rlx_mul(g, b->t1, b->t1);
    b->u = rlx_sub(g, b->e, x);
    b->p = rlx_tanh(g, b->u);
    b->q = rlx_neg(g, b->u);
    b->inner = rlx_where(g, b->d, b->p, b->q);
    b->y = rlx_where(g, b->c, b->t2, b->inner);
    rlx_output(g, "y", b->y);
}

static void guards_of(const rlx_graph *g, rlx_node **cond, uint8_t **when)
{
    int n = rlx_graph_node_count(g);
    *cond = malloc((size_t)n * sizeof **cond);
    *when = malloc((size_t)n);
    assert_non_null(*cond);
    assert_non_null(*when);
    assert_int_equal(rlx_branch_guards(g, *cond, *when), RLX_OK);
}

static void test_guards(void **state)
{
    (void)state;
    two_sides b;
    build(&b);
    rlx_node *cond;
    uint8_t *when;
    guards_of(b.g, &cond, &when);
    /* the then side, only under c */
    assert_int_equal(cond[b.t1], b.c);
    assert_int_equal(when[b.t1], 1);
    assert_int_equal(cond[b.t2], b.c);
    /* the inner select and what it alone reads: under c false */
    assert_int_equal(cond[b.inner], b.c);
    assert_int_equal(when[b.inner], 0);
    /* each side of the inner select keeps its own guard only */
    assert_int_equal(cond[b.p], b.d);
    assert_int_equal(when[b.p], 1);
    assert_int_equal(cond[b.q], b.d);
    assert_int_equal(when[b.q], 0);
    /* read by both inner sides, which disagree: always run */
    assert_int_equal(cond[b.u], -1);
    /* read by both outer sides; the output itself */
    assert_int_equal(cond[b.e], -1);
    assert_int_equal(cond[b.y], -1);
    free(cond);
    free(when);
    rlx_graph_free(b.g);
}

/* A branch node that is also an output runs always; so does one whose
 * condition is computed after it. */
static void test_no_guard(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){N});
    rlx_node c = rlx_input(g, "c", RLX_BOOL, 0, NULL);
    rlx_node a = rlx_exp(g, x), b = rlx_neg(g, x), a2 = rlx_tanh(g, x);
    rlx_node late = rlx_less(g, rlx_reduce_sum(g, x, 1, (int[]){0}, 0), rlx_reduce_max(g, x, 1, (int[]){0}, 0));
    rlx_node y = rlx_where(g, c, a, b), z = rlx_where(g, late, a2, a);
    rlx_output(g, "y", y);
    rlx_output(g, "z", z);
    rlx_output(g, "b", b);
    rlx_node *cond;
    uint8_t *when;
    guards_of(g, &cond, &when);
    assert_int_equal(cond[b], -1);    /* an output */
    assert_int_equal(cond[a], -1);    /* y wants it under c, z under late: they disagree */
    assert_int_equal(cond[a2], -1);   /* only z's then side reads it, but late is computed after it */
    assert_int_equal(cond[late], -1); /* read by z, which always runs */
    free(cond);
    free(when);
    rlx_graph_free(g);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void test_runs(void **state)
{
    (void)state;
    two_sides b;
    build(&b);
    for (int threads = 1; threads <= 2; threads++) {
        rlx_options o;
        rlx_options_init(&o);
        o.threads = threads;
        o.no_fusion = 1; /* keep the select a node of its own */
        rlx_session *s = NULL;
        assert_int_equal(rlx_compile(b.g, &o, &s), RLX_OK);
        /* every pair of conditions, changing from run to run */
        static const uint8_t seq[][2] = {{1, 0}, {0, 1}, {0, 0}, {1, 1}, {0, 1}, {1, 0}, {0, 0}};
        for (size_t r = 0; r < sizeof seq / sizeof seq[0]; r++) {
            float x[N], y[N];
            for (int i = 0; i < N; i++)
                x[i] = (float)(uniform() * 4 - 2);
            assert_int_equal(rlx_session_set_input(s, "x", x, sizeof x), RLX_OK);
            assert_int_equal(rlx_session_set_input(s, "c", &seq[r][0], 1), RLX_OK);
            assert_int_equal(rlx_session_set_input(s, "d", &seq[r][1], 1), RLX_OK);
            assert_int_equal(rlx_session_run(s), RLX_OK);
            assert_int_equal(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
            for (int i = 0; i < N; i++) {
                double e = exp((double)x[i]), u = e - x[i];
                double want = seq[r][0] ? (e + x[i]) * (e + x[i]) : (seq[r][1] ? tanh(u) : -u);
                assert_true(fabs(y[i] - want) <= 1e-5 * (1 + fabs(want)));
            }
        }
        rlx_session_free(s);
    }
    rlx_graph_free(b.g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guards),
        cmocka_unit_test(test_no_guard),
        cmocka_unit_test(test_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
