/* Gradients (rlx_gradients) of every differentiable op against central
 * finite differences in float64, on fresh random inputs: each case builds
 * y = op(params), loss = sum(y * R) with R random (so the incoming gradient
 * is not all ones), compiles the forward and the gradients as one graph on
 * the CPU, and compares each gradient element with
 * (loss(p + h) - loss(p - h)) / 2h, the change of the loss summed from
 * the changes of y (so the rounding of a large loss's sum stays out).
 * Differences are relative, with a floor of 1e-3 (finite differences of
 * h = 1e-6 carry about 1e-8 of rounding).  The cases are
 * tests/support/grad_cases.h's (shared with tests/gpu/cuda_train.c), their
 * inputs kept away from the kinks of non-smooth ops.  Also: refusals name
 * the op, ties of max_pool, operands used twice, unused parameters, bad
 * arguments. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ir/ir.h"
#include "rlx.h"
#include "support/grad_cases.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static int64_t numel(int nd, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= d[i];
    return n;
}

static void run_y(rlx_session *s, double *y, int64_t ny)
{
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, (size_t)ny * sizeof *y), RLX_OK);
}

static void check_case(const grad_case *c)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node p[GC_MAXP];
    double *val[GC_MAXP];
    char name[GC_MAXP][16];
    for (int i = 0; i < c->np; i++) {
        snprintf(name[i], sizeof name[i], "p%d", i);
        p[i] = rlx_param(g, name[i], RLX_F64, c->ndim[i], c->dims[i]);
        int64_t n = numel(c->ndim[i], c->dims[i]);
        val[i] = malloc((size_t)n * sizeof(double));
        for (int64_t j = 0; j < n; j++)
            val[i][j] = grad_case_value(c->domain[i], urand(), urand(), (size_t)j, (size_t)n);
    }
    rlx_node y = c->body(g, p);
    if (y < 0)
        fail_msg("%s: building the forward failed: %s", c->name, rlx_last_error());
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    assert_int_equal(rlx_node_shape(g, y, &ndim, dims), RLX_OK);
    int64_t ny = numel(ndim, dims);
    double *r = malloc((size_t)ny * sizeof *r);
    for (int64_t j = 0; j < ny; j++)
        r[j] = -1 + 2 * urand();
    rlx_node rn = rlx_constant(g, RLX_F64, ndim, dims, r, (size_t)ny * sizeof *r);
    int all[RLX_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        all[i] = i;
    rlx_node loss = rlx_reduce_sum(g, rlx_mul(g, y, rn), ndim, all, 0);
    rlx_node grads[GC_MAXP];
    if (rlx_gradients(g, loss, c->np, p, grads) != RLX_OK)
        fail_msg("%s: rlx_gradients: %s", c->name, rlx_last_error());
    assert_int_equal(rlx_output(g, "y", y), RLX_OK);
    for (int i = 0; i < c->np; i++) {
        char gname[16];
        snprintf(gname, sizeof gname, "g%d", i);
        assert_int_equal(rlx_output(g, gname, grads[i]), RLX_OK);
    }
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        fail_msg("%s: compile: %s", c->name, rlx_last_error());
    for (int i = 0; i < c->np; i++)
        assert_int_equal(rlx_session_set_param(s, name[i], val[i], (size_t)numel(c->ndim[i], c->dims[i]) * 8), RLX_OK);
    double *yp = malloc((size_t)ny * sizeof *yp), *ym = malloc((size_t)ny * sizeof *ym);
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < c->np; i++) {
        int64_t n = numel(c->ndim[i], c->dims[i]);
        double *an = malloc((size_t)n * sizeof *an);
        char gname[16];
        snprintf(gname, sizeof gname, "g%d", i);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        assert_int_equal(rlx_session_get_output(s, gname, an, (size_t)n * 8), RLX_OK);
        for (int64_t j = 0; j < n; j++) {
            const double h = 1e-6, keep = val[i][j];
            val[i][j] = keep + h;
            rlx_session_set_param(s, name[i], val[i], (size_t)n * 8);
            run_y(s, yp, ny);
            val[i][j] = keep - h;
            rlx_session_set_param(s, name[i], val[i], (size_t)n * 8);
            run_y(s, ym, ny);
            val[i][j] = keep;
            rlx_session_set_param(s, name[i], val[i], (size_t)n * 8);
            /* the loss's change summed from y's changes: most are exactly
             * zero, so the rounding of the loss's own sum stays out */
            double dl = 0;
            for (int64_t k = 0; k < ny; k++)
                dl += r[k] * (yp[k] - ym[k]);
            double fd = dl / (2 * h), err = fabs(an[j] - fd) / (1e-3 + fabs(fd));
            if (!(err < 1e-5) && bad++ < 4)
                fprintf(stderr, "%s: d loss / d p%d[%lld]: analytic %.10g, finite difference %.10g\n", c->name, i,
                        (long long)j, an[j], fd);
            if (!(err <= worst))
                worst = err;
        }
        free(an);
    }
    if (bad)
        fail_msg("%s: %d gradient elements off (worst relative error %.3g)", c->name, bad, worst);
    printf("  %-28s ok (worst relative error %.2g)\n", c->name, worst);
    rlx_session_free(s);
    rlx_graph_free(g);
    free(r), free(yp), free(ym);
    for (int i = 0; i < c->np; i++)
        free(val[i]);
}

static void test_every_rule(void **state)
{
    (void)state;
    int n = 0;
    for (size_t i = 0; i < sizeof GRAD_CASES / sizeof *GRAD_CASES; i++)
        if (GRAD_CASES[i].runs & GC_FD) {
            check_case(&GRAD_CASES[i]);
            n++;
        }
    printf("  %d cases\n", n);
}

/* Every op but the leaves names a gradient rule in its row. */
static void test_every_op_has_a_rule(void **state)
{
    (void)state;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)op);
        if (!(i->flags & RLX_OPF_LEAF) && !i->grad)
            fail_msg("op %s has no gradient rule in its row (src/ir/ops.c)", i->name);
    }
}

static void test_refusals_and_arguments(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_param(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node unused = rlx_param(g, "unused", RLX_F32, 1, (int64_t[]){3});
    rlx_node d = rlx_dropout(g, x, 0.5);
    rlx_node loss = rlx_reduce_sum(g, d, 2, (int[]){0, 1}, 0);
    rlx_node gr[2];
    assert_int_equal(rlx_gradients(g, loss, 1, &x, gr), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_last_error(), "dropout"));
    rlx_graph_free(g);

    g = rlx_graph_new();
    x = rlx_param(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    unused = rlx_param(g, "unused", RLX_F32, 1, (int64_t[]){3});
    rlx_node idx = rlx_param(g, "idx", RLX_I64, 1, (int64_t[]){2});
    rlx_node sq = rlx_mul(g, x, x);
    /* not a scalar */
    assert_int_equal(rlx_gradients(g, sq, 1, &x, gr), RLX_ERR_SHAPE);
    assert_non_null(strstr(rlx_last_error(), "one element"));
    loss = rlx_reduce_sum(g, sq, 2, (int[]){0, 1}, 0);
    /* an integer parameter */
    assert_int_equal(rlx_gradients(g, loss, 1, &idx, gr), RLX_ERR_DTYPE);
    assert_non_null(strstr(rlx_last_error(), "only float"));
    /* a parameter the loss does not use gets zeros */
    rlx_node both[2] = {x, unused};
    assert_int_equal(rlx_gradients(g, loss, 2, both, gr), RLX_OK);
    rlx_output(g, "gu", gr[1]);
    rlx_output(g, "gx", gr[0]);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    float xv[6] = {1, -2, 3, 0.5f, 4, -1}, gx[6], gu[3] = {7, 7, 7};
    rlx_session_set_param(s, "x", xv, sizeof xv);
    rlx_session_set_param(s, "unused", gu, sizeof gu);
    rlx_session_set_param(s, "idx", (int64_t[]){0, 1}, 16);
    if (rlx_session_run(s) != RLX_OK)
        fail_msg("run: %s", rlx_last_error());
    assert_int_equal(rlx_session_get_output(s, "gu", gu, sizeof gu), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "gx", gx, sizeof gx), RLX_OK);
    for (int i = 0; i < 3; i++)
        assert_true(gu[i] == 0.0f);
    for (int i = 0; i < 6; i++)
        assert_true(gx[i] == 2 * xv[i]);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Ties of max_pool share the window's gradient evenly, as reduce_max's do:
 * a constant input gives every cell of a 2x2 window a quarter. */
static void test_max_pool_ties_share(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_param(g, "x", RLX_F64, 4, (int64_t[]){1, 1, 2, 4});
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, 2);
    double w[2] = {1, 2};
    rlx_node y = rlx_mul(g, rlx_max_pool(g, x, &pp), rlx_constant(g, RLX_F64, 4, (int64_t[]){1, 1, 1, 2}, w, sizeof w));
    rlx_node loss = rlx_reduce_sum(g, y, 4, (int[]){0, 1, 2, 3}, 0), gx;
    assert_int_equal(rlx_gradients(g, loss, 1, &x, &gx), RLX_OK);
    assert_int_equal(rlx_output(g, "gx", gx), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    double xv[8] = {3, 3, 3, 3, 3, 3, 3, 3}, gv[8];
    assert_int_equal(rlx_session_set_param(s, "x", xv, sizeof xv), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "gx", gv, sizeof gv), RLX_OK);
    for (int i = 0; i < 8; i++)
        assert_true(gv[i] == (i % 4 < 2 ? 0.25 : 0.5));
    rlx_session_free(s);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_has_a_rule),
        cmocka_unit_test(test_refusals_and_arguments),
        cmocka_unit_test(test_max_pool_ties_share),
        cmocka_unit_test(test_every_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
