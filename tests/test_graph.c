/* test_graph.c - graph-level behaviour: sticky builder errors, size limits,
 * the verifier's messages, cloning, and errors kept per thread. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/ir.h"

static void test_failed_builder_poisons_chain(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node b = rlx_input(g, "b", RLX_F32, 2, (int64_t[]){4, 5});
    rlx_node bad = rlx_add(g, a, b); /* does not broadcast */
    assert_true(bad < 0);
    assert_non_null(strstr(rlx_last_error(), "[2, 3] and [4, 5] do not broadcast"));
    rlx_node next = rlx_tanh(g, rlx_exp(g, bad)); /* keeps failing, no crash */
    assert_true(next < 0);
    rlx_output(g, "y", a);
    /* verify reports the first failure, not the later ones */
    assert_int_equal(rlx_graph_verify(g), RLX_ERR_SHAPE);
    assert_non_null(strstr(rlx_last_error(), "do not broadcast"));
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = (rlx_session *)&o; /* must be reset to NULL on failure */
    assert_int_equal(rlx_compile(g, &o, &s), RLX_ERR_SHAPE);
    assert_null(s);
    rlx_graph_free(g);
}

static void test_huge_results_refused(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){INT64_C(1) << 39, 1});
    rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){1, INT64_C(1) << 39});
    assert_true(x >= 0 && w >= 0);
    assert_true(rlx_matmul(g, x, w, 0, 0) < 0);
    assert_non_null(strstr(rlx_last_error(), "more than 2^40 elements"));
    assert_true(rlx_input(g, "y", RLX_F32, 3, (int64_t[]){INT64_C(1) << 30, INT64_C(1) << 30, 4}) < 0);
    assert_true(rlx_input(g, "z", RLX_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}) < 0);
    assert_true(rlx_input(g, "n", RLX_F32, 1, (int64_t[]){-3}) < 0);
    /* integer scalars must be values of their type */
    assert_true(rlx_scalar(g, RLX_I8, 300) < 0);
    assert_non_null(strstr(rlx_last_error(), "300 is not a value of i8"));
    assert_true(rlx_scalar(g, RLX_U8, -1) < 0);
    assert_true(rlx_scalar(g, RLX_I64, 1e19) < 0);
    assert_true(rlx_scalar(g, RLX_I32, 0.0 / 0.0) < 0);
    assert_true(rlx_scalar(g, RLX_I8, -128) >= 0);
    rlx_graph_free(g);
}

static void test_clone_is_equal_and_independent(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    float c[3] = {1, 2, 3};
    rlx_node k = rlx_constant(g, RLX_F32, 1, (int64_t[]){3}, c, sizeof c);
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){3});
    rlx_node y = rlx_mul(g, x, k);
    rlx_node_set_name(g, y, "scaled");
    rlx_output(g, "y", y);
    rlx_graph *h = rlx_graph_clone(g);
    assert_non_null(h);
    assert_int_equal(h->n_nodes, g->n_nodes);
    assert_int_equal(h->n_outputs, 1);
    assert_string_equal(h->outputs[0].name, "y");
    assert_string_equal(h->nodes[y].name, "scaled");
    assert_ptr_not_equal(h->nodes[y].name, g->nodes[y].name);
    /* constant bytes are never written once held: the clone shares them */
    assert_ptr_equal(h->nodes[k].data, g->nodes[k].data);
    assert_memory_equal(h->nodes[k].data, c, sizeof c);
    rlx_graph_free(g); /* the clone outlives the original */
    assert_memory_equal(h->nodes[k].data, c, sizeof c);
    assert_int_equal(rlx_graph_verify(h), RLX_OK);
    rlx_graph_free(h);
}

static void test_verify_names_the_node(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    rlx_node y = rlx_exp(g, x);
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    /* corrupt the graph the way a bad importer might: an operand after its user */
    g->nodes[y].in[0] = y;
    assert_int_equal(rlx_graph_verify(g), RLX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(rlx_last_error(), "node 1 (exp)"));
    g->nodes[y].in[0] = x;
    g->nodes[y].shape.dims[0] = 5; /* recorded shape disagrees */
    assert_int_equal(rlx_graph_verify(g), RLX_ERR_INTERNAL);
    assert_non_null(strstr(rlx_last_error(), "node 1 (exp)"));
    rlx_graph_free(g);
    rlx_graph *empty = rlx_graph_new();
    assert_int_equal(rlx_graph_verify(empty), RLX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(rlx_last_error(), "no outputs"));
    rlx_graph_free(empty);
}

static void *fail_in_thread(void *arg)
{
    (void)arg;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    rlx_transpose(g, x, (int[]){3});
    rlx_graph_free(g);
    return NULL;
}

static void test_errors_are_per_thread(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){4});
    assert_true(rlx_softmax(g, x, 5) < 0);
    char mine[256];
    snprintf(mine, sizeof mine, "%s", rlx_last_error());
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
    pthread_join(t, NULL);
    assert_string_equal(rlx_last_error(), mine); /* the other thread's error stayed there */
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_builder_poisons_chain),   cmocka_unit_test(test_huge_results_refused),
        cmocka_unit_test(test_clone_is_equal_and_independent), cmocka_unit_test(test_verify_names_the_node),
        cmocka_unit_test(test_errors_are_per_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
