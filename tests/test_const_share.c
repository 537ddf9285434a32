/* test_const_share.c - constant data is held once (ir.h, rlx_blob):
 *  - a clone reads its source's bytes, which stay valid once the source
 *    is freed,
 *  - a CPU session reads its constants from its graph, not from a copy in
 *    its arena, and runs the same with the graph it came from freed,
 *  - a constant that a stateful op writes into keeps its own slot, so the
 *    graph's bytes do not change. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/runtime.h"

enum { K = 64, N = 48 };

static float w_host[K * N], b_host[N], x_host[4 * K];

static void fill(void)
{
    for (int i = 0; i < K * N; i++)
        w_host[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < N; i++)
        b_host[i] = (float)i / 7.0f;
    for (int i = 0; i < 4 * K; i++)
        x_host[i] = (float)((i * 13) % 29) / 10.0f - 1.4f;
}

/* y = tanh(x @ w + b), w read through a reshape (a view of the constant) */
static rlx_graph *small_model(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node w = rlx_constant(g, RLX_F32, 1, (int64_t[]){K * N}, w_host, sizeof w_host);
    rlx_node w2 = rlx_reshape(g, w, 2, (int64_t[]){K, N});
    rlx_node b = rlx_constant(g, RLX_F32, 1, (int64_t[]){N}, b_host, sizeof b_host);
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, K});
    assert_int_equal(rlx_output(g, "y", rlx_tanh(g, rlx_add(g, rlx_matmul(g, x, w2, 0, 0), b))), RLX_OK);
    return g;
}

static void run(rlx_session *s, float *y)
{
    assert_int_equal(rlx_session_set_input(s, "x", x_host, sizeof x_host), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, sizeof(float) * 4 * N), RLX_OK);
}

static void test_clone_shares_bytes(void **state)
{
    (void)state;
    fill();
    rlx_graph *g = small_model();
    rlx_graph *c = rlx_graph_clone(g);
    assert_non_null(c);
    const void *held = NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].op != RLX_OP_CONSTANT)
            continue;
        assert_ptr_equal(c->nodes[i].data, g->nodes[i].data);
        assert_int_equal((uintptr_t)c->nodes[i].data % 64, 0);
        if (g->nodes[i].data_bytes == sizeof w_host)
            held = c->nodes[i].data;
    }
    assert_non_null(held);
    rlx_graph_free(g);
    assert_memory_equal(held, w_host, sizeof w_host); /* still the clone's */
    rlx_graph_free(c);
}

static void test_session_outlives_graph(void **state)
{
    (void)state;
    fill();
    rlx_options o;
    rlx_options_init(&o);
    o.threads = 1;
    rlx_graph *kept = small_model(), *dropped = small_model();
    rlx_session *a, *b;
    assert_int_equal(rlx_compile(kept, &o, &a), RLX_OK);
    assert_int_equal(rlx_compile(dropped, &o, &b), RLX_OK);
    rlx_graph_free(dropped);
    float ya[4 * N], yb[4 * N];
    run(a, ya);
    run(b, yb);
    assert_memory_equal(ya, yb, sizeof ya);
    /* against the product by hand */
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int k = 0; k < K; k++)
                acc += x_host[r * K + k] * w_host[k * N + j];
            assert_float_equal(yb[r * N + j], tanhf(acc + b_host[j]), 1e-5);
        }
    /* the weights are not in the arena a second time */
    rlx_compile_stats st;
    assert_int_equal(rlx_session_stats(b, &st), RLX_OK);
    assert_true(st.persistent_bytes < sizeof w_host);
    rlx_session_free(a);
    rlx_session_free(b);
    rlx_graph_free(kept);
}

static void test_written_constant_keeps_slot(void **state)
{
    (void)state;
    enum { B = 1, H = 1, T = 4, S = 1, D = 2 };
    static const float c0[B * H * T * D] = {1, 2, 3, 4, 5, 6, 7, 8};
    rlx_graph *g = rlx_graph_new();
    rlx_node cache = rlx_constant(g, RLX_F32, 4, (int64_t[]){B, H, T, D}, c0, sizeof c0);
    rlx_node upd = rlx_input(g, "u", RLX_F32, 4, (int64_t[]){B, H, S, D});
    rlx_node pos = rlx_input(g, "pos", RLX_I64, 1, (int64_t[]){B});
    assert_int_equal(rlx_output(g, "y", rlx_cache_write(g, cache, upd, pos)), RLX_OK);
    rlx_session *s;
    assert_int_equal(rlx_compile(g, NULL, &s), RLX_OK);
    const float u[2] = {-1, -2};
    const int64_t p = 2;
    float y[B * H * T * D];
    assert_int_equal(rlx_session_set_input(s, "u", u, sizeof u), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "pos", &p, sizeof p), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
    assert_true(y[4] == -1.0f && y[5] == -2.0f && y[0] == 1.0f && y[7] == 8.0f);
    assert_memory_equal(g->nodes[cache].data, c0, sizeof c0); /* the graph's bytes untouched */
    rlx_session_free(s);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clone_shares_bytes),
        cmocka_unit_test(test_session_outlives_graph),
        cmocka_unit_test(test_written_constant_keeps_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
