/* The public API's error paths: NULL arguments, negative and unknown node
 * ids, shape mismatches, wrong dtypes, unknown names, wrong byte sizes, bad
 * axes, permutations and attributes, graphs without outputs, run-time index
 * errors.  Each must return the documented status with a message that
 * names the problem, and never crash (the suite also runs under ASan/UBSan). */
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

/* The last error is non-empty and contains every given word. */
static int msg_has(const char *w1, const char *w2)
{
    const char *m = rlx_last_error();
    if (!m || !*m) {
        fprintf(stderr, "error message is empty\n");
        return 0;
    }
    if ((w1 && !strstr(m, w1)) || (w2 && !strstr(m, w2))) {
        fprintf(stderr, "error message \"%s\" does not mention \"%s\"%s%s%s\n", m, w1 ? w1 : "", w2 ? " and \"" : "",
                w2 ? w2 : "", w2 ? "\"" : "");
        return 0;
    }
    return 1;
}

#define EXPECT_STATUS(expr, want)                                                                                     \
    do {                                                                                                              \
        rlx_status st_ = (expr);                                                                                      \
        if (st_ != (want))                                                                                            \
            fprintf(stderr, "%s:%d: %s gave %s (%s), expected %s\n", __FILE__, __LINE__, #expr, rlx_status_name(st_), \
                    rlx_last_error(), rlx_status_name(want));                                                         \
        assert_int_equal(st_, (want));                                                                                \
    } while (0)

/* A builder call that must fail: negative id, and the graph's verify gives
 * `want` (the first failure). */
#define EXPECT_BUILD_FAIL(g, expr, want)                                                       \
    do {                                                                                       \
        rlx_node n_ = (expr);                                                                  \
        if (n_ >= 0)                                                                           \
            fprintf(stderr, "%s:%d: %s succeeded (node %d)\n", __FILE__, __LINE__, #expr, n_); \
        assert_true(n_ < 0);                                                                   \
        EXPECT_STATUS(rlx_graph_verify(g), want);                                              \
    } while (0)

static rlx_graph *graph_with_output(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node w = rlx_param(g, "w", RLX_F32, 1, (int64_t[]){3});
    assert_int_equal(rlx_output(g, "y", rlx_mul(g, x, w)), RLX_OK);
    return g;
}

static rlx_session *compile_ok(const rlx_graph *g)
{
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    EXPECT_STATUS(rlx_compile(g, &o, &s), RLX_OK);
    assert_non_null(s);
    return s;
}

/* ------------------------------------------------------------ NULLs */

static void test_null_arguments(void **state)
{
    (void)state;
    int64_t d[2] = {2, 3};
    assert_true(rlx_input(NULL, "x", RLX_F32, 2, d) < 0);
    assert_true(msg_has(NULL, NULL));
    assert_true(rlx_param(NULL, "w", RLX_F32, 2, d) < 0);
    assert_true(rlx_neg(NULL, 0) < 0);
    assert_true(rlx_add(NULL, 0, 1) < 0);
    assert_true(rlx_scalar(NULL, RLX_F32, 1.0) < 0);
    EXPECT_STATUS(rlx_graph_verify(NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_output(NULL, "y", 0), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_graph_print(NULL, stderr), RLX_ERR_INVALID_ARGUMENT);
    assert_true(rlx_graph_node_count(NULL) <= 0);
    rlx_graph_free(NULL);
    rlx_session_free(NULL);

    rlx_graph *g = rlx_graph_new();
    assert_non_null(g);
    /* a NULL name or dims */
    EXPECT_BUILD_FAIL(g, rlx_input(g, NULL, RLX_F32, 2, d), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    EXPECT_BUILD_FAIL(g, rlx_input(g, "x", RLX_F32, 2, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    EXPECT_BUILD_FAIL(g, rlx_constant(g, RLX_F32, 2, d, NULL, 24), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);

    g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, d);
    assert_true(x >= 0);
    EXPECT_STATUS(rlx_output(g, NULL, x), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_node_shape(g, x, NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_node_set_name(g, x, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);

    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, d);
    EXPECT_BUILD_FAIL(g, rlx_concat(g, 0, NULL, 0), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, d);
    EXPECT_BUILD_FAIL(g, rlx_transpose(g, x, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 2, 4, 4});
    rlx_node w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){3, 2, 3, 3});
    EXPECT_BUILD_FAIL(g, rlx_conv(g, x, w, -1, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 2, 4, 4});
    EXPECT_BUILD_FAIL(g, rlx_max_pool(g, x, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, d);
    EXPECT_STATUS(rlx_split(g, x, 1, 2, (int64_t[]){1, 2}, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);

    /* compile */
    g = graph_with_output();
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = (rlx_session *)(uintptr_t)1; /* must be overwritten or left alone, never used */
    EXPECT_STATUS(rlx_compile(NULL, &o, &s), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_compile(g, &o, NULL), RLX_ERR_INVALID_ARGUMENT);

    /* session calls */
    s = compile_ok(g);
    float buf[6] = {1, 2, 3, 4, 5, 6};
    EXPECT_STATUS(rlx_session_set_input(NULL, "x", buf, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_set_input(s, NULL, buf, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_set_input(s, "x", NULL, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_set_param(s, "w", NULL, 12), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_run(NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_get_output(NULL, "y", buf, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_get_output(s, NULL, buf, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_get_output(s, "y", NULL, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_info(NULL, 0, 0, NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_info(s, 0, 0, NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_find(s, 0, NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_stats(NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_stats(s, NULL), RLX_ERR_INVALID_ARGUMENT);
    assert_true(rlx_session_count(NULL, 0) <= 0);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Names of statuses and dtypes, also for values outside the enums. */
static void test_names(void **state)
{
    (void)state;
    for (int s = RLX_OK; s <= RLX_ERR_INTERNAL; s++) {
        const char *n = rlx_status_name((rlx_status)s);
        assert_non_null(n);
        assert_true(strlen(n) > 0);
    }
    assert_non_null(rlx_status_name((rlx_status)999));
    assert_non_null(rlx_status_name((rlx_status)-1));
    assert_non_null(rlx_dtype_name((rlx_dtype)99));
    assert_int_equal(rlx_dtype_size((rlx_dtype)99), 0);
    assert_non_null(rlx_last_error());
    assert_non_null(rlx_version());
    /* the GEMM library named, whatever is installed ("builtin loops" without one) */
    assert_true(strlen(rlx_cpu_gemm_info()) > 0);
}

/* ------------------------------------------------------------ node ids */

static void test_bad_node_ids(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    /* a negative id passes through a chain of builders; verify reports it */
    rlx_node y = rlx_neg(g, -1);
    assert_true(y < 0);
    assert_true(rlx_exp(g, y) < 0);
    assert_true(rlx_add(g, x, rlx_exp(g, y)) < 0);
    rlx_status st = rlx_graph_verify(g);
    assert_int_not_equal(st, RLX_OK);
    assert_true(msg_has(NULL, NULL));
    EXPECT_STATUS(rlx_output(g, "y", -3), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);

    /* ids that do not exist (yet) */
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    EXPECT_BUILD_FAIL(g, rlx_add(g, x, 12345), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("12345", NULL));
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    EXPECT_STATUS(rlx_output(g, "y", 777), RLX_ERR_INVALID_ARGUMENT);
    int nd;
    int64_t dims[RLX_MAX_DIMS];
    EXPECT_STATUS(rlx_node_shape(g, 777, &nd, dims), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_node_shape(g, -1, &nd, dims), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_node_set_name(g, 777, "n"), RLX_ERR_INVALID_ARGUMENT);
    (void)rlx_node_dtype(g, 777); /* any value, no crash */
    (void)rlx_node_dtype(g, -5);
    rlx_graph_free(g);
}

/* ------------------------------------------------------------ shapes */

static void test_shape_mismatches(void **state)
{
    (void)state;
    rlx_graph *g;
    rlx_node a, b;

#define FRESH() (g = rlx_graph_new())
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_F32, 2, (int64_t[]){4, 3});
    EXPECT_BUILD_FAIL(g, rlx_add(g, a, b), RLX_ERR_SHAPE);
    assert_true(msg_has("[2, 3]", "[4, 3]"));
    /* the graph keeps its first failure */
    assert_true(rlx_mul(g, a, a) >= 0);
    EXPECT_STATUS(rlx_graph_verify(g), RLX_ERR_SHAPE);
    assert_true(msg_has("add", NULL));
    /* and does not compile */
    rlx_output(g, "y", a);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    EXPECT_STATUS(rlx_compile(g, &o, &s), RLX_ERR_SHAPE);
    assert_null(s);
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_F32, 2, (int64_t[]){4, 5});
    EXPECT_BUILD_FAIL(g, rlx_matmul(g, a, b, 0, 0), RLX_ERR_SHAPE);
    assert_true(msg_has("matmul", NULL));
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 3, (int64_t[]){2, 2, 3});
    b = rlx_input(g, "b", RLX_F32, 3, (int64_t[]){3, 3, 4});
    EXPECT_BUILD_FAIL(g, rlx_matmul(g, a, b, 0, 0), RLX_ERR_SHAPE); /* batch 2 vs 3 */
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_F32, 2, (int64_t[]){3, 4});
    EXPECT_BUILD_FAIL(g, rlx_concat(g, 2, (rlx_node[]){a, b}, 0), RLX_ERR_SHAPE);
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_F32, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_concat(g, 2, (rlx_node[]){a, b}, 0), RLX_ERR_SHAPE); /* ranks differ */
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    EXPECT_BUILD_FAIL(g, rlx_reshape(g, a, 2, (int64_t[]){4, 2}), RLX_ERR_SHAPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    EXPECT_BUILD_FAIL(g, rlx_reshape(g, a, 2, (int64_t[]){-1, -1}), RLX_ERR_SHAPE); /* two inferred dims */
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    EXPECT_BUILD_FAIL(g, rlx_reshape(g, a, 2, (int64_t[]){-1, 4}), RLX_ERR_SHAPE); /* 6 not divisible by 4 */
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    EXPECT_BUILD_FAIL(g, rlx_expand(g, a, 2, (int64_t[]){2, 4}), RLX_ERR_SHAPE);
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_F32, 2, (int64_t[]){2, 4});
    rlx_node c = rlx_input(g, "c", RLX_BOOL, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_where(g, c, a, b), RLX_ERR_SHAPE);
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 10});
    rlx_node outs[2];
    EXPECT_STATUS(rlx_split(g, a, 1, 2, (int64_t[]){3, 4}, outs), RLX_ERR_SHAPE); /* 3 + 4 != 10 */
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    b = rlx_param(g, "g", RLX_F32, 1, (int64_t[]){7});
    EXPECT_BUILD_FAIL(g, rlx_layer_norm(g, a, b, -1, 1e-5), RLX_ERR_SHAPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    b = rlx_param(g, "g", RLX_F32, 1, (int64_t[]){4});
    EXPECT_BUILD_FAIL(g, rlx_rms_norm(g, a, b, 1e-5), RLX_ERR_SHAPE);
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 7});
    EXPECT_BUILD_FAIL(g, rlx_rope(g, a, 10000, 0, 0), RLX_ERR_SHAPE); /* odd D */
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "q", RLX_F32, 4, (int64_t[]){1, 3, 4, 8});
    b = rlx_input(g, "k", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    c = rlx_input(g, "v", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    EXPECT_BUILD_FAIL(g, rlx_attention(g, a, b, c, -1, 0, 0), RLX_ERR_SHAPE); /* 3 heads over 2 */
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "q", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    b = rlx_input(g, "k", RLX_F32, 4, (int64_t[]){1, 2, 4, 6});
    c = rlx_input(g, "v", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    EXPECT_BUILD_FAIL(g, rlx_attention(g, a, b, c, -1, 0, 0), RLX_ERR_SHAPE); /* D of k differs */
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "q", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    b = rlx_input(g, "k", RLX_F32, 4, (int64_t[]){1, 2, 5, 8});
    c = rlx_input(g, "v", RLX_F32, 4, (int64_t[]){1, 2, 5, 8});
    rlx_node m = rlx_input(g, "m", RLX_BOOL, 2, (int64_t[]){4, 4}); /* T is 5 */
    EXPECT_BUILD_FAIL(g, rlx_attention(g, a, b, c, m, 0, 0), RLX_ERR_SHAPE);
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 3, 8, 8});
    b = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){4, 2, 3, 3}); /* 2 channels, x has 3 */
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    EXPECT_BUILD_FAIL(g, rlx_conv(g, a, b, -1, &cp), RLX_ERR_SHAPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 3, 2, 2});
    b = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){4, 3, 3, 3}); /* kernel larger than input */
    EXPECT_BUILD_FAIL(g, rlx_conv(g, a, b, -1, &cp), RLX_ERR_SHAPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){3, 8}); /* not [N, C, ...] */
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, 2);
    EXPECT_BUILD_FAIL(g, rlx_max_pool(g, a, &pp), RLX_ERR_SHAPE);
    rlx_graph_free(g);

    /* ranks and dims */
    FRESH();
    EXPECT_BUILD_FAIL(g, rlx_input(g, "x", RLX_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}), RLX_ERR_SHAPE);
    rlx_graph_free(g);
    FRESH();
    EXPECT_BUILD_FAIL(g, rlx_input(g, "x", RLX_F32, -1, (int64_t[]){1}), RLX_ERR_SHAPE);
    rlx_graph_free(g);
    FRESH();
    EXPECT_BUILD_FAIL(g, rlx_input(g, "x", RLX_F32, 2, (int64_t[]){3, -2}), RLX_ERR_SHAPE);
    assert_true(msg_has("-2", NULL));
    rlx_graph_free(g);
    FRESH();
    float data[6] = {0};
    EXPECT_BUILD_FAIL(g, rlx_constant(g, RLX_F32, 2, (int64_t[]){2, 3}, data, 20), RLX_ERR_SHAPE); /* 24 needed */
    rlx_graph_free(g);
#undef FRESH
}

/* ------------------------------------------------------------ dtypes */

static void test_wrong_dtypes(void **state)
{
    (void)state;
    rlx_graph *g;
    rlx_node a, b, c;
#define FRESH() (g = rlx_graph_new())
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 1, (int64_t[]){3});
    b = rlx_input(g, "b", RLX_I64, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_add(g, a, b), RLX_ERR_DTYPE);
    assert_true(msg_has("f32", "i64"));
    rlx_graph_free(g);

    FRESH();
    a = rlx_input(g, "a", RLX_F32, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_not(g, a), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_and(g, a, a), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_I32, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_exp(g, a), RLX_ERR_DTYPE);
    assert_true(msg_has("i32", NULL));
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_BOOL, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_add(g, a, a), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 1, (int64_t[]){3});
    c = rlx_input(g, "c", RLX_F32, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_where(g, c, a, a), RLX_ERR_DTYPE); /* condition must be bool */
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 1, (int64_t[]){3});
    b = rlx_input(g, "b", RLX_F16, 1, (int64_t[]){3});
    c = rlx_input(g, "c", RLX_BOOL, 1, (int64_t[]){3});
    EXPECT_BUILD_FAIL(g, rlx_where(g, c, a, b), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){5, 3});
    b = rlx_input(g, "i", RLX_F32, 1, (int64_t[]){2});
    EXPECT_BUILD_FAIL(g, rlx_gather(g, a, b, 0), RLX_ERR_DTYPE); /* float indices */
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_F16, 2, (int64_t[]){3, 2});
    EXPECT_BUILD_FAIL(g, rlx_matmul(g, a, b, 0, 0), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    b = rlx_input(g, "b", RLX_I32, 2, (int64_t[]){2, 3});
    EXPECT_BUILD_FAIL(g, rlx_concat(g, 2, (rlx_node[]){a, b}, 0), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    b = rlx_param(g, "g", RLX_F16, 1, (int64_t[]){8});
    EXPECT_BUILD_FAIL(g, rlx_layer_norm(g, a, b, -1, 1e-5), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    a = rlx_input(g, "q", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    b = rlx_input(g, "k", RLX_F32, 4, (int64_t[]){1, 2, 4, 8});
    rlx_node m = rlx_input(g, "m", RLX_I32, 4, (int64_t[]){1, 1, 4, 4});
    EXPECT_BUILD_FAIL(g, rlx_attention(g, a, b, b, m, 0, 0), RLX_ERR_DTYPE); /* int mask */
    rlx_graph_free(g);
    FRESH();
    EXPECT_BUILD_FAIL(g, rlx_random_uniform(g, RLX_I32, 1, (int64_t[]){4}, 0, 1), RLX_ERR_DTYPE);
    rlx_graph_free(g);
    /* an unknown dtype value is a bad enum */
    FRESH();
    rlx_node x = rlx_input(g, "x", (rlx_dtype)42, 1, (int64_t[]){4});
    assert_true(x < 0);
    rlx_status st = rlx_graph_verify(g);
    assert_true(st == RLX_ERR_INVALID_ARGUMENT || st == RLX_ERR_DTYPE);
    rlx_graph_free(g);
    FRESH();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    assert_true(rlx_cast(g, x, (rlx_dtype)-3) < 0);
    st = rlx_graph_verify(g);
    assert_true(st == RLX_ERR_INVALID_ARGUMENT || st == RLX_ERR_DTYPE);
    rlx_graph_free(g);
#undef FRESH
}

/* ------------------------------------------------------------ names and sizes */

static void test_unknown_names(void **state)
{
    (void)state;
    rlx_graph *g = graph_with_output();
    rlx_session *s = compile_ok(g);
    float buf[6] = {1, 2, 3, 4, 5, 6};
    EXPECT_STATUS(rlx_session_set_input(s, "nope", buf, sizeof buf), RLX_ERR_NOT_FOUND);
    assert_true(msg_has("nope", NULL));
    EXPECT_STATUS(rlx_session_set_param(s, "wrong_param", buf, 12), RLX_ERR_NOT_FOUND);
    assert_true(msg_has("wrong_param", NULL));
    EXPECT_STATUS(rlx_session_get_output(s, "missing_out", buf, sizeof buf), RLX_ERR_NOT_FOUND);
    assert_true(msg_has("missing_out", NULL));
    /* right name, wrong kind */
    EXPECT_STATUS(rlx_session_set_input(s, "w", buf, 12), RLX_ERR_NOT_FOUND);
    EXPECT_STATUS(rlx_session_set_param(s, "x", buf, sizeof buf), RLX_ERR_NOT_FOUND);
    EXPECT_STATUS(rlx_session_get_output(s, "x", buf, sizeof buf), RLX_ERR_NOT_FOUND);
    rlx_tensor_info info;
    EXPECT_STATUS(rlx_session_find(s, 0, "nope", &info), RLX_ERR_NOT_FOUND);
    EXPECT_STATUS(rlx_session_find(s, 7, "x", &info), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_info(s, 0, 5, &info), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_info(s, 2, -1, &info), RLX_ERR_INVALID_ARGUMENT);
    /* an empty name is a name nobody has */
    EXPECT_STATUS(rlx_session_set_input(s, "", buf, sizeof buf), RLX_ERR_NOT_FOUND);
    /* the session still works afterwards */
    EXPECT_STATUS(rlx_session_set_input(s, "x", buf, sizeof buf), RLX_OK);
    EXPECT_STATUS(rlx_session_set_param(s, "w", buf, 12), RLX_OK);
    EXPECT_STATUS(rlx_session_run(s), RLX_OK);
    float out[6];
    EXPECT_STATUS(rlx_session_get_output(s, "y", out, sizeof out), RLX_OK);
    for (int i = 0; i < 6; i++)
        assert_true(fabsf(out[i] - buf[i] * buf[i % 3]) < 1e-6f);
    rlx_session_free(s);
    rlx_graph_free(g);
}

static void test_duplicate_names(void **state)
{
    (void)state;
    /* two inputs of one name cannot both be fed: an error at build or compile */
    rlx_graph *g = rlx_graph_new();
    rlx_node a = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){3});
    rlx_node b = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){3});
    rlx_status st = RLX_OK;
    if (a >= 0 && b >= 0)
        st = rlx_output(g, "y", rlx_add(g, a, b));
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    if (st == RLX_OK && a >= 0 && b >= 0)
        st = rlx_compile(g, &o, &s);
    else
        st = RLX_ERR_INVALID_ARGUMENT;
    if (st == RLX_OK)
        fprintf(stderr, "two inputs named 'x' compiled\n");
    assert_int_not_equal(st, RLX_OK);
    assert_true(msg_has("x", NULL));
    rlx_session_free(s);
    rlx_graph_free(g);

    /* two outputs of one name */
    g = rlx_graph_new();
    a = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){3});
    assert_int_equal(rlx_output(g, "y", a), RLX_OK);
    st = rlx_output(g, "y", rlx_neg(g, a));
    if (st == RLX_OK) {
        s = NULL;
        st = rlx_compile(g, &o, &s);
        rlx_session_free(s);
    }
    assert_int_not_equal(st, RLX_OK);
    rlx_graph_free(g);
}

static void test_wrong_byte_sizes(void **state)
{
    (void)state;
    rlx_graph *g = graph_with_output();
    rlx_session *s = compile_ok(g);
    float buf[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    EXPECT_STATUS(rlx_session_set_input(s, "x", buf, 6 * 4 - 1), RLX_ERR_SHAPE);
    assert_true(msg_has("x", "23"));
    EXPECT_STATUS(rlx_session_set_input(s, "x", buf, 8 * 4), RLX_ERR_SHAPE);
    EXPECT_STATUS(rlx_session_set_input(s, "x", buf, 0), RLX_ERR_SHAPE);
    EXPECT_STATUS(rlx_session_set_param(s, "w", buf, 6 * 4), RLX_ERR_SHAPE);
    assert_true(msg_has("w", NULL));
    EXPECT_STATUS(rlx_session_set_input(s, "x", buf, 6 * 4), RLX_OK);
    EXPECT_STATUS(rlx_session_set_param(s, "w", buf, 3 * 4), RLX_OK);
    EXPECT_STATUS(rlx_session_run(s), RLX_OK);
    EXPECT_STATUS(rlx_session_get_output(s, "y", buf, 5 * 4), RLX_ERR_SHAPE);
    assert_true(msg_has("y", NULL));
    EXPECT_STATUS(rlx_session_get_output(s, "y", buf, 7 * 4), RLX_ERR_SHAPE);
    EXPECT_STATUS(rlx_session_get_output(s, "y", buf, 6 * 4), RLX_OK);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Running before every input and param is set fails and names the missing one. */
static void test_run_unset_inputs(void **state)
{
    (void)state;
    rlx_graph *g = graph_with_output();
    rlx_session *s = compile_ok(g);
    float buf[6] = {1, 2, 3, 4, 5, 6};
    rlx_status st = rlx_session_run(s);
    assert_int_not_equal(st, RLX_OK);
    assert_true(msg_has(NULL, NULL));
    EXPECT_STATUS(rlx_session_set_input(s, "x", buf, sizeof buf), RLX_OK);
    st = rlx_session_run(s);
    assert_int_not_equal(st, RLX_OK);
    assert_true(msg_has("w", NULL));
    EXPECT_STATUS(rlx_session_set_param(s, "w", buf, 12), RLX_OK);
    EXPECT_STATUS(rlx_session_run(s), RLX_OK);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* ------------------------------------------------------------ axes, perms, attributes */

static void test_bad_axes(void **state)
{
    (void)state;
    rlx_graph *g;
    rlx_node x;
    rlx_node outs[2];
#define FRESH() (g = rlx_graph_new(), x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){3, 4}))
#define AXIS_FAIL(expr)                                                                                \
    do {                                                                                               \
        rlx_node n_ = (expr);                                                                          \
        if (n_ >= 0)                                                                                   \
            fprintf(stderr, "%s:%d: %s succeeded\n", __FILE__, __LINE__, #expr);                       \
        assert_true(n_ < 0);                                                                           \
        rlx_status s_ = rlx_graph_verify(g);                                                           \
        if (s_ != RLX_ERR_SHAPE && s_ != RLX_ERR_INVALID_ARGUMENT)                                     \
            fprintf(stderr, "%s:%d: %s: status %s\n", __FILE__, __LINE__, #expr, rlx_status_name(s_)); \
        assert_true(s_ == RLX_ERR_SHAPE || s_ == RLX_ERR_INVALID_ARGUMENT);                            \
        assert_true(msg_has("axis", NULL));                                                            \
        rlx_graph_free(g);                                                                             \
    } while (0)
    FRESH();
    AXIS_FAIL(rlx_reduce_sum(g, x, 1, (int[]){2}, 0));
    FRESH();
    AXIS_FAIL(rlx_reduce_max(g, x, 1, (int[]){-3}, 1));
    FRESH();
    AXIS_FAIL(rlx_reduce_mean(g, x, 2, (int[]){0, 7}, 0));
    FRESH();
    AXIS_FAIL(rlx_argmax(g, x, 2, 0));
    FRESH();
    AXIS_FAIL(rlx_argmin(g, x, -3, 0));
    FRESH();
    AXIS_FAIL(rlx_softmax(g, x, 2));
    FRESH();
    AXIS_FAIL(rlx_log_softmax(g, x, -3));
    FRESH();
    AXIS_FAIL(rlx_concat(g, 2, (rlx_node[]){x, x}, 2));
    FRESH();
    AXIS_FAIL(rlx_concat(g, 2, (rlx_node[]){x, x}, -3));
    FRESH();
    AXIS_FAIL(rlx_gather(g, x, rlx_input(g, "i", RLX_I64, 1, (int64_t[]){2}), 5));
    FRESH();
    AXIS_FAIL(rlx_slice(g, x, 1, (int[]){4}, (int64_t[]){0}, (int64_t[]){1}, (int64_t[]){1}));
    FRESH();
    rlx_status st = rlx_split(g, x, 3, 2, (int64_t[]){2, 2}, outs);
    assert_true(st == RLX_ERR_SHAPE || st == RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("axis", NULL));
    rlx_graph_free(g);
    /* a scalar has no axis 0 */
    g = rlx_graph_new();
    x = rlx_input(g, "s", RLX_F32, 0, NULL);
    AXIS_FAIL(rlx_softmax(g, x, 0));
#undef AXIS_FAIL
#undef FRESH
}

static void test_bad_perms(void **state)
{
    (void)state;
    const int perms[][3] = {{0, 0, 1}, {0, 1, 3}, {-1, 2, 0}, {2, 2, 2}, {1, 2, 99}, {-4, 0, 1}};
    for (size_t i = 0; i < sizeof perms / sizeof perms[0]; i++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", RLX_F32, 3, (int64_t[]){2, 3, 4});
        EXPECT_BUILD_FAIL(g, rlx_transpose(g, x, perms[i]), RLX_ERR_INVALID_ARGUMENT);
        assert_true(msg_has("perm", NULL));
        rlx_graph_free(g);
    }
}

static void test_bad_attributes(void **state)
{
    (void)state;
    rlx_graph *g;
    rlx_node x;
#define FRESH(nd, ...) (g = rlx_graph_new(), x = rlx_input(g, "x", RLX_F32, nd, (int64_t[]){__VA_ARGS__}))
    FRESH(1, 10);
    EXPECT_BUILD_FAIL(g, rlx_slice(g, x, 1, (int[]){0}, (int64_t[]){0}, (int64_t[]){5}, (int64_t[]){0}),
                      RLX_ERR_INVALID_ARGUMENT); /* step 0 */
    assert_true(msg_has("step", NULL));
    rlx_graph_free(g);
    FRESH(2, 3, 4);
    EXPECT_BUILD_FAIL(g, rlx_pad(g, x, (int64_t[]){0, -1, 0, 0}, RLX_PAD_CONSTANT, 0), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(2, 3, 4);
    EXPECT_BUILD_FAIL(g, rlx_pad(g, x, (int64_t[]){0, 1, 0, 0}, (rlx_pad_mode)9, 0), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(2, 3, 4);
    rlx_node n = rlx_pad(g, x, (int64_t[]){0, 4, 0, 0}, RLX_PAD_REFLECT, 0); /* reflect needs pad < dim */
    assert_true(n < 0);
    assert_int_not_equal(rlx_graph_verify(g), RLX_OK);
    rlx_graph_free(g);
    FRESH(1, 10);
    EXPECT_BUILD_FAIL(g, rlx_dropout(g, x, 1.5), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(1, 10);
    EXPECT_BUILD_FAIL(g, rlx_dropout(g, x, -0.1), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(1, 10);
    EXPECT_BUILD_FAIL(g, rlx_dropout(g, x, NAN), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(2, 4, 8);
    EXPECT_BUILD_FAIL(g, rlx_rope(g, x, -1.0, 0, 0), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(2, 4, 8);
    EXPECT_BUILD_FAIL(g, rlx_layer_norm(g, x, -1, -1, -1e-5), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);

    /* conv / pool parameters */
    rlx_conv_params cp;
    FRESH(4, 1, 4, 8, 8);
    rlx_node w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){4, 4, 3, 3});
    rlx_conv_params_init(&cp);
    cp.groups = 0;
    n = rlx_conv(g, x, w, -1, &cp);
    assert_true(n < 0);
    assert_int_not_equal(rlx_graph_verify(g), RLX_OK);
    rlx_graph_free(g);
    FRESH(4, 1, 4, 8, 8);
    w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){4, 4, 3, 3});
    rlx_conv_params_init(&cp);
    cp.stride[0] = 0;
    EXPECT_BUILD_FAIL(g, rlx_conv(g, x, w, -1, &cp), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(4, 1, 4, 8, 8);
    w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){4, 4, 3, 3});
    rlx_conv_params_init(&cp);
    cp.dilation[1] = -1;
    EXPECT_BUILD_FAIL(g, rlx_conv(g, x, w, -1, &cp), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(4, 1, 4, 8, 8);
    w = rlx_param(g, "w", RLX_F32, 4, (int64_t[]){4, 4, 3, 3});
    rlx_conv_params_init(&cp);
    cp.pads[2] = -1;
    EXPECT_BUILD_FAIL(g, rlx_conv(g, x, w, -1, &cp), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    rlx_pool_params pp;
    FRESH(4, 1, 4, 8, 8);
    rlx_pool_params_init(&pp, 0);
    EXPECT_BUILD_FAIL(g, rlx_max_pool(g, x, &pp), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    FRESH(4, 1, 4, 8, 8);
    rlx_pool_params_init(&pp, 2);
    pp.stride[1] = 0;
    EXPECT_BUILD_FAIL(g, rlx_avg_pool(g, x, &pp), RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);

    /* compile options */
    rlx_graph *g2 = graph_with_output();
    rlx_options o;
    rlx_options_init(&o);
    o.device = (rlx_device)17;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g2, &o, &s);
    assert_true(st == RLX_ERR_INVALID_ARGUMENT || st == RLX_ERR_UNSUPPORTED);
    assert_null(s);
    rlx_options_init(&o);
    o.precision = (rlx_precision)9;
    st = rlx_compile(g2, &o, &s);
    assert_true(st == RLX_ERR_INVALID_ARGUMENT || st == RLX_ERR_UNSUPPORTED);
    assert_null(s);
    rlx_options_init(&o);
    o.threads = -4; /* taken as "all cores" or refused, never a crash */
    st = rlx_compile(g2, &o, &s);
    assert_true(st == RLX_OK || st == RLX_ERR_INVALID_ARGUMENT);
    rlx_session_free(s);
    s = NULL;
    rlx_graph_free(g2);
#undef FRESH
}

/* ------------------------------------------------------------ verify and compile */

static void test_verify_no_outputs(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    EXPECT_STATUS(rlx_graph_verify(g), RLX_ERR_INVALID_ARGUMENT); /* empty graph */
    assert_true(msg_has("output", NULL));
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){3});
    rlx_neg(g, x);
    EXPECT_STATUS(rlx_graph_verify(g), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("output", NULL));
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    EXPECT_STATUS(rlx_compile(g, &o, &s), RLX_ERR_INVALID_ARGUMENT);
    assert_null(s);
    /* with an output it verifies */
    assert_int_equal(rlx_output(g, "y", x), RLX_OK);
    EXPECT_STATUS(rlx_graph_verify(g), RLX_OK);
    rlx_graph_free(g);
}

/* The graph is copied at compile: freeing or changing it afterwards does
 * not affect the session. */
static void test_graph_freed_after_compile(void **state)
{
    (void)state;
    rlx_graph *g = graph_with_output();
    rlx_session *s = compile_ok(g);
    rlx_neg(g, 0); /* a change after compile */
    rlx_graph_free(g);
    float x[6] = {1, -2, 3, -4, 5, -6}, w[3] = {2, 3, 4}, y[6];
    EXPECT_STATUS(rlx_session_set_input(s, "x", x, sizeof x), RLX_OK);
    EXPECT_STATUS(rlx_session_set_param(s, "w", w, sizeof w), RLX_OK);
    EXPECT_STATUS(rlx_session_run(s), RLX_OK);
    EXPECT_STATUS(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
    for (int i = 0; i < 6; i++)
        assert_true(y[i] == x[i] * w[i % 3]);
    rlx_session_free(s);
}

/* An index out of range is a run error, and the session stays usable. */
static void test_gather_out_of_range(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node d = rlx_input(g, "d", RLX_F32, 2, (int64_t[]){5, 3});
    rlx_node i = rlx_input(g, "i", RLX_I64, 1, (int64_t[]){4});
    assert_int_equal(rlx_output(g, "y", rlx_gather(g, d, i, 0)), RLX_OK);
    rlx_session *s = compile_ok(g);
    float data[15];
    for (int k = 0; k < 15; k++)
        data[k] = (float)k;
    EXPECT_STATUS(rlx_session_set_input(s, "d", data, sizeof data), RLX_OK);
    const int64_t bad_sets[][4] = {{0, 1, 5, 2}, {0, -6, 1, 1}, {INT64_MAX, 0, 0, 0}, {INT64_MIN, 0, 0, 0}};
    for (size_t b = 0; b < sizeof bad_sets / sizeof bad_sets[0]; b++) {
        EXPECT_STATUS(rlx_session_set_input(s, "i", bad_sets[b], sizeof bad_sets[b]), RLX_OK);
        EXPECT_STATUS(rlx_session_run(s), RLX_ERR_RUNTIME);
        assert_true(msg_has("index", NULL));
    }
    const int64_t good[4] = {4, -5, 0, -1};
    EXPECT_STATUS(rlx_session_set_input(s, "i", good, sizeof good), RLX_OK);
    EXPECT_STATUS(rlx_session_run(s), RLX_OK);
    float y[12];
    EXPECT_STATUS(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
    const int rows[4] = {4, 0, 0, 4};
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++)
            assert_true(y[r * 3 + c] == data[rows[r] * 3 + c]);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* A CUDA compile on a machine without it is refused cleanly (or works). */
static void test_unavailable_device(void **state)
{
    (void)state;
    rlx_graph *g = graph_with_output();
    rlx_options o;
    rlx_options_init(&o);
    o.device = RLX_DEVICE_CUDA;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    if (st != RLX_OK) {
        assert_true(st == RLX_ERR_UNSUPPORTED || st == RLX_ERR_DEVICE);
        assert_null(s);
        assert_true(msg_has(NULL, NULL));
    }
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Device names: cpu, cuda, cuda:N; anything else is refused naming it. */
static void test_device_names(void **state)
{
    (void)state;
    rlx_device d = RLX_DEVICE_CPU;
    int i = -1;
    assert_int_equal(rlx_device_parse("cpu", &d, &i), RLX_OK);
    assert_true(d == RLX_DEVICE_CPU && i == 0);
    assert_int_equal(rlx_device_parse("cuda", &d, &i), RLX_OK);
    assert_true(d == RLX_DEVICE_CUDA && i == 0);
    assert_int_equal(rlx_device_parse("cuda:3", &d, &i), RLX_OK);
    assert_true(d == RLX_DEVICE_CUDA && i == 3);
    assert_int_equal(rlx_device_parse("cpu:0", &d, &i), RLX_OK);
    assert_true(d == RLX_DEVICE_CPU && i == 0);
    const char *bad[] = {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "cuda:99999", "cpu:1", "", "cudax", "cuda: 1"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        d = RLX_DEVICE_CUDA;
        i = 7;
        EXPECT_STATUS(rlx_device_parse(bad[k], &d, &i), RLX_ERR_INVALID_ARGUMENT);
        assert_true(d == RLX_DEVICE_CUDA && i == 7); /* untouched */
        assert_true(msg_has(bad[k], NULL));
    }
    EXPECT_STATUS(rlx_device_parse(NULL, &d, &i), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_device_count(RLX_DEVICE_CPU), 1);
    assert_true(rlx_device_count(RLX_DEVICE_CUDA) >= 0);

    /* a compile on a device index the machine lacks names it */
    rlx_graph *g = graph_with_output();
    rlx_options o;
    rlx_options_init(&o);
    o.device_index = 1;
    rlx_session *s = NULL;
    EXPECT_STATUS(rlx_compile(g, &o, &s), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("cpu:1", NULL) && !s);
    o.device = RLX_DEVICE_CUDA;
    o.device_index = rlx_device_count(RLX_DEVICE_CUDA);
    rlx_status st = rlx_compile(g, &o, &s);
    assert_true((st == RLX_ERR_UNSUPPORTED || st == RLX_ERR_DEVICE) && !s);
    char want[32];
    snprintf(want, sizeof want, "cuda:%d", o.device_index);
    assert_true(msg_has(st == RLX_ERR_UNSUPPORTED ? "no backend" : want, NULL));
    rlx_graph_free(g);
}

/* Device pointers: a CPU session's tensors are host memory, so the device
 * calls say so; device memory for the CPU is refused, and for CUDA it is
 * given only where a GPU is. */
static void test_device_pointers(void **state)
{
    (void)state;
    rlx_graph *g = graph_with_output();
    rlx_session *s = compile_ok(g);
    float buf[6] = {0};
    EXPECT_STATUS(rlx_session_set_input_device(s, "x", buf, sizeof buf), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("host memory", "'x'"));
    EXPECT_STATUS(rlx_session_get_output_device(s, "y", buf, sizeof buf), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("host memory", "'y'"));
    EXPECT_STATUS(rlx_session_set_input_device(NULL, "x", buf, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    EXPECT_STATUS(rlx_session_get_output_device(s, NULL, buf, sizeof buf), RLX_ERR_INVALID_ARGUMENT);
    void *p = buf;
    EXPECT_STATUS(rlx_device_alloc(RLX_DEVICE_CPU, 0, 16, &p), RLX_ERR_UNSUPPORTED);
    assert_null(p);
    EXPECT_STATUS(rlx_device_alloc(RLX_DEVICE_CUDA, 0, 16, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_status st = rlx_device_alloc(RLX_DEVICE_CUDA, 0, 16, &p);
    if (st == RLX_OK)
        assert_non_null(p);
    else
        assert_true((st == RLX_ERR_UNSUPPORTED || st == RLX_ERR_DEVICE) && !p && msg_has(NULL, NULL));
    rlx_device_free(RLX_DEVICE_CUDA, 0, p);
    rlx_device_free(RLX_DEVICE_CPU, 0, NULL);
    /* a device the machine does not have: refused, naming it */
    int n = rlx_device_count(RLX_DEVICE_CUDA);
    p = buf;
    st = rlx_device_alloc(RLX_DEVICE_CUDA, n, 16, &p);
    assert_true((st == RLX_ERR_UNSUPPORTED || st == RLX_ERR_DEVICE) && !p);
    char want[32];
    snprintf(want, sizeof want, "cuda:%d", n);
    assert_true(st == RLX_ERR_UNSUPPORTED ? msg_has("no backend", NULL) : msg_has(want, NULL));
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Extreme attribute and shape values: huge dims, element counts that
 * overflow, extreme slice bounds and steps, huge pads.  Each is either
 * refused with a shape or argument error or computes the right thing;
 * nothing overflows (UBSan) or tries a giant allocation. */
static void test_extreme_values(void **state)
{
    (void)state;
    rlx_graph *g;
    rlx_node x, y;
    rlx_status st;
#define REFUSED(expr)                                                                                               \
    do {                                                                                                            \
        rlx_node n_ = (expr);                                                                                       \
        st = rlx_graph_verify(g);                                                                                   \
        if (n_ >= 0 || (st != RLX_ERR_SHAPE && st != RLX_ERR_INVALID_ARGUMENT))                                     \
            fprintf(stderr, "%s:%d: %s: node %d, verify %s\n", __FILE__, __LINE__, #expr, n_, rlx_status_name(st)); \
        assert_true(n_ < 0);                                                                                        \
        assert_true(st == RLX_ERR_SHAPE || st == RLX_ERR_INVALID_ARGUMENT);                                         \
        assert_true(msg_has(NULL, NULL));                                                                           \
        rlx_graph_free(g);                                                                                          \
    } while (0)
    g = rlx_graph_new();
    REFUSED(rlx_input(g, "x", RLX_F32, 1, (int64_t[]){INT64_MAX}));
    g = rlx_graph_new();
    REFUSED(rlx_input(g, "x", RLX_F32, 2, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40})); /* count overflows */
    g = rlx_graph_new();
    REFUSED(rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1 << 20, 1 << 20, 1 << 20, 0})); /* empty, but absurd */
    g = rlx_graph_new();
    REFUSED(rlx_random_uniform(g, RLX_F32, 2, (int64_t[]){(int64_t)1 << 62, 4}, 0, 1));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){6});
    REFUSED(rlx_reshape(g, x, 3, (int64_t[]){(int64_t)1 << 62, 4, 0}));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){6});
    REFUSED(rlx_reshape(g, x, 2, (int64_t[]){-7, 3}));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){1, 6});
    REFUSED(rlx_expand(g, x, 2, (int64_t[]){INT64_MAX, 6}));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 6});
    REFUSED(rlx_pad(g, x, (int64_t[]){0, INT64_MAX, 0, 1}, RLX_PAD_CONSTANT, 0));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 6});
    REFUSED(rlx_pad(g, x, (int64_t[]){(int64_t)1 << 40, 0, (int64_t)1 << 40, 0}, RLX_PAD_CONSTANT, 0));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 1, 8, 8});
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.pads[0] = cp.pads[2] = INT64_MAX / 2;
    REFUSED(rlx_conv(g, x, rlx_param(g, "w", RLX_F32, 4, (int64_t[]){1, 1, 3, 3}), -1, &cp));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 1, 8, 8});
    rlx_conv_params_init(&cp);
    cp.dilation[0] = INT64_MAX / 2;
    REFUSED(rlx_conv(g, x, rlx_param(g, "w", RLX_F32, 4, (int64_t[]){1, 1, 3, 3}), -1, &cp));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 1, 8, 8});
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, INT64_MAX);
    REFUSED(rlx_max_pool(g, x, &pp));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node parts[2];
    st = rlx_split(g, x, 1, 2, (int64_t[]){INT64_MAX, INT64_MIN + 3}, parts); /* sums to 2 with overflow */
    assert_true(st == RLX_ERR_SHAPE || st == RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    st = rlx_split(g, x, 1, 2, (int64_t[]){-1, 4}, parts);
    assert_true(st == RLX_ERR_SHAPE || st == RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){2, 3});
    st = rlx_split(g, x, 1, -1, (int64_t[]){3}, parts);
    assert_true(st == RLX_ERR_SHAPE || st == RLX_ERR_INVALID_ARGUMENT);
    rlx_graph_free(g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    REFUSED(rlx_reduce_sum(g, x, -1, (int[]){0}, 0));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    REFUSED(rlx_reduce_sum(g, x, 1, (int[]){INT32_MIN}, 0));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    REFUSED(rlx_softmax(g, x, INT32_MIN));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    REFUSED(rlx_concat(g, -2, (rlx_node[]){x, x}, 0));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    REFUSED(rlx_rope(g, x, 10000.0, INT64_MAX, 0)); /* positions would overflow */
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    REFUSED(rlx_rope(g, x, NAN, 0, 0));
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
    REFUSED(rlx_layer_norm(g, x, -1, -1, NAN));
    g = rlx_graph_new();
    REFUSED(rlx_random_normal(g, RLX_F32, 1, (int64_t[]){8}, 0, -1));
    g = rlx_graph_new();
    REFUSED(rlx_random_uniform(g, RLX_F32, 1, (int64_t[]){8}, 2, 1));
#undef REFUSED

    /* extreme but legal slice bounds and steps */
    const int64_t steps[] = {INT64_MAX, INT64_MIN + 1, INT64_MIN, 7, -7};
    const int64_t bounds[][2] = {{INT64_MIN, INT64_MAX}, {INT64_MAX, INT64_MIN}, {-1, INT64_MIN}, {0, INT64_MAX}};
    for (size_t si = 0; si < sizeof steps / sizeof steps[0]; si++)
        for (size_t bi = 0; bi < sizeof bounds / sizeof bounds[0]; bi++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *t = rt_rand(RT_SHAPE(10), -1, 1);
            x = rt_input(rg, RLX_F32, t);
            y = rlx_slice(rg->g, x, 1, (int[]){0}, &bounds[bi][0], &bounds[bi][1], &steps[si]);
            rt_tensor *want = rt_ref_slice(t, 1, (int[]){0}, &bounds[bi][0], &bounds[bi][1], &steps[si]);
            if (y < 0) { /* refusing INT64_MIN as a step is fair: its magnitude does not fit */
                assert_true(steps[si] == INT64_MIN);
                assert_int_not_equal(rlx_graph_verify(rg->g), RLX_OK);
            } else {
                rt_tensor *got = rt_run1(rg, y);
                char what[96];
                snprintf(what, sizeof what, "slice bounds case %zu step %lld", bi, (long long)steps[si]);
                assert_true(rt_check_tol(what, got, want, 0, 0));
                rt_free(got);
            }
            rt_free(want);
            rt_free(t);
            rt_graph_free(rg);
        }
}

/* What a session reports about its inputs, params and outputs. */
static void test_session_info(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node a = rlx_input(g, "tokens", RLX_I64, 2, (int64_t[]){2, 5});
    rlx_node e = rlx_param(g, "embed", RLX_F16, 2, (int64_t[]){11, 4});
    rlx_node m = rlx_input(g, "mask", RLX_BOOL, 1, (int64_t[]){5});
    rlx_node h = rlx_gather(g, e, a, 0);
    assert_int_equal(rlx_output(g, "hidden", rlx_cast(g, h, RLX_F32)), RLX_OK);
    assert_int_equal(rlx_output(g, "keep", rlx_not(g, m)), RLX_OK);
    assert_int_equal(rlx_graph_node_count(g) >= 5, 1);
    assert_int_equal(rlx_node_set_name(g, h, "embedding lookup"), RLX_OK);
    FILE *devnull = fopen("/dev/null", "w");
    assert_int_equal(rlx_graph_print(g, devnull), RLX_OK);
    fclose(devnull);
    rlx_session *s = compile_ok(g);
    assert_int_equal(rlx_session_count(s, 0), 2);
    assert_int_equal(rlx_session_count(s, 1), 1);
    assert_int_equal(rlx_session_count(s, 2), 2);
    assert_true(rlx_session_count(s, 5) <= 0);
    const struct {
        int kind;
        const char *name;
        rlx_dtype dt;
        int ndim;
        int64_t dims[2];
        size_t bytes;
    } want[] = {{0, "tokens", RLX_I64, 2, {2, 5}, 80},
                {0, "mask", RLX_BOOL, 1, {5}, 5},
                {1, "embed", RLX_F16, 2, {11, 4}, 88},
                {2, "hidden", RLX_F32, 3, {2, 5}, 160},
                {2, "keep", RLX_BOOL, 1, {5}, 5}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        rlx_tensor_info info;
        EXPECT_STATUS(rlx_session_find(s, want[i].kind, want[i].name, &info), RLX_OK);
        assert_string_equal(info.name, want[i].name);
        assert_int_equal(info.dtype, want[i].dt);
        assert_int_equal(info.ndim, want[i].ndim);
        for (int d = 0; d < 2 && d < info.ndim; d++)
            assert_int_equal(info.dims[d], want[i].dims[d]);
        assert_int_equal(info.bytes, want[i].bytes);
    }
    /* info by index lists each name once */
    for (int kind = 0; kind < 3; kind++)
        for (int i = 0; i < rlx_session_count(s, kind); i++) {
            rlx_tensor_info info;
            EXPECT_STATUS(rlx_session_info(s, kind, i, &info), RLX_OK);
            assert_non_null(info.name);
            rlx_tensor_info again;
            EXPECT_STATUS(rlx_session_find(s, kind, info.name, &again), RLX_OK);
            assert_int_equal(again.bytes, info.bytes);
        }
    rlx_compile_stats st;
    EXPECT_STATUS(rlx_session_stats(s, &st), RLX_OK);
    assert_true(st.thunks > 0);
    assert_true(st.nodes_in >= 5);
    rlx_session_free(s);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_arguments),      cmocka_unit_test(test_names),
        cmocka_unit_test(test_bad_node_ids),        cmocka_unit_test(test_shape_mismatches),
        cmocka_unit_test(test_wrong_dtypes),        cmocka_unit_test(test_unknown_names),
        cmocka_unit_test(test_duplicate_names),     cmocka_unit_test(test_wrong_byte_sizes),
        cmocka_unit_test(test_run_unset_inputs),    cmocka_unit_test(test_bad_axes),
        cmocka_unit_test(test_bad_perms),           cmocka_unit_test(test_bad_attributes),
        cmocka_unit_test(test_verify_no_outputs),   cmocka_unit_test(test_graph_freed_after_compile),
        cmocka_unit_test(test_gather_out_of_range), cmocka_unit_test(test_unavailable_device),
        cmocka_unit_test(test_device_names),        cmocka_unit_test(test_device_pointers),
        cmocka_unit_test(test_extreme_values),      cmocka_unit_test(test_session_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
