/* test_planner.c - the memory planner on thousands of random graphs:
 *  - no two tensors live at the same step share bytes (unless one is a view
 *    of the other or was written in place over it),
 *  - every tensor lies inside the arena and its buffer,
 *  - outputs equal those of the no-reuse plan, bit for bit,
 *  - the arena is never below the lower bound, and views/in-place happen. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "runtime/runtime.h"

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rint_(int n) { return (int)(rnd() % (uint64_t)n); }

/* A random graph over f32 tensors of shape [R, C] (R, C from a few sizes),
 * with elementwise, broadcasting, view, matmul, reduction and concat nodes. */
static rlx_graph *random_graph(int *n_inputs)
{
    static const int64_t sizes[] = {1, 2, 3, 4, 8, 16};
    rlx_graph *g = rlx_graph_new();
    rlx_node pool[64];
    int n = 0;
    int ins = 1 + rint_(3);
    for (int i = 0; i < ins; i++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", i);
        int64_t dims[2] = {sizes[rint_(6)], sizes[rint_(6)]};
        pool[n++] = rlx_input(g, name, RLX_F32, 2, dims);
    }
    *n_inputs = ins;
    int steps = 4 + rint_(40);
    for (int s = 0; s < steps && n < 64; s++) {
        rlx_node a = pool[rint_(n)];
        int r;
        int64_t dims[RLX_MAX_DIMS];
        rlx_node_shape(g, a, &r, dims);
        rlx_node y = -1;
        switch (rint_(10)) {
        case 0: y = rlx_tanh(g, a); break;
        case 1: y = rlx_mul(g, a, a); break;
        case 2: { /* binary with a same-shaped or broadcast partner */
            rlx_node b = pool[rint_(n)];
            int rb;
            int64_t db[RLX_MAX_DIMS];
            rlx_node_shape(g, b, &rb, db);
            if (rb == r && (r == 0 || (db[0] == dims[0] && db[r - 1] == dims[r - 1])))
                y = rlx_add(g, a, b);
            else
                y = rlx_sub(g, a, rlx_reduce_sum(g, a, 0, NULL, 0));
            break;
        }
        case 3: { /* reshape to flat and back (views) */
            int64_t total = 1;
            for (int d = 0; d < r; d++)
                total *= dims[d];
            y = rlx_reshape(g, rlx_reshape(g, a, 1, &total), r, dims);
            break;
        }
        case 4: /* contiguous row slice (view) */
            if (r == 2 && dims[0] > 1) {
                int ax = 0;
                int64_t st = rint_((int)dims[0]), en = dims[0];
                y = rlx_slice(g, a, 1, &ax, &st, &en, NULL);
            } else {
                y = rlx_exp(g, rlx_neg(g, a));
            }
            break;
        case 5:
            if (r == 2)
                y = rlx_transpose(g, a, (int[]){1, 0});
            break;
        case 6:
            if (r == 2)
                y = rlx_matmul(g, a, a, 1, 0); /* a^T a: [C, C] */
            break;
        case 7:
            if (r == 2)
                y = rlx_concat(g, 2, (rlx_node[]){a, a}, 0);
            break;
        case 8:
            if (r == 2)
                y = rlx_softmax(g, a, -1);
            break;
        default: y = rlx_sigmoid(g, a);
        }
        if (y >= 0)
            pool[n++] = y;
    }
    int outs = 1 + rint_(3);
    for (int i = 0; i < outs; i++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", i);
        rlx_output(g, name, pool[n - 1 - rint_(n < 4 ? n : 4)]);
    }
    return g;
}

static void check_no_overlap(const rlx_session *s)
{
    const rlx_graph *g = s->graph;
    const rlx_plan *p = &s->plan;
    int n = g->n_nodes;
    int *last = calloc((size_t)n, sizeof(int));
    assert_non_null(last);
    for (int i = 0; i < n; i++) {
        last[i] = i;
        for (int j = 0; j < g->nodes[i].n_in; j++)
            last[g->nodes[i].in[j]] = i;
    }
    for (int k = 0; k < g->n_outputs; k++)
        last[g->outputs[k].node] = n;
    for (int i = 0; i < n; i++) {
        const rlx_tensor_slot *a = &p->slots[i];
        if (!a->bytes)
            continue;
        assert_true(a->offset + a->bytes <= p->arena_bytes);
        const rlx_buffer *b = &p->buffers[a->buffer];
        assert_true(a->offset >= b->offset && a->offset + a->bytes <= b->offset + b->size);
        if (a->region == RLX_REGION_PERSISTENT)
            continue;
        for (int j = i + 1; j < n; j++) {
            const rlx_tensor_slot *c = &p->slots[j];
            if (!c->bytes || c->region != RLX_REGION_TRANSIENT || j > last[i])
                continue; /* j is defined after i died */
            if (a->buffer == c->buffer)
                continue; /* a view of i or written in place over it: planned sharing */
            bool disjoint = a->offset + a->bytes <= c->offset || c->offset + c->bytes <= a->offset;
            if (!disjoint)
                fail_msg("nodes %d and %d are live together and overlap: [%zu,+%zu) vs [%zu,+%zu)", i, j, a->offset,
                         a->bytes, c->offset, c->bytes);
        }
    }
    assert_true(p->transient_bytes >= p->lower_bound);
    free(last);
}

static float *run_collect(rlx_session *s, float **inputs, size_t *out_bytes)
{
    for (int i = 0; i < rlx_session_count(s, 0); i++) {
        rlx_tensor_info info;
        assert_int_equal(rlx_session_info(s, 0, i, &info), RLX_OK);
        int idx = atoi(info.name + 1);
        assert_int_equal(rlx_session_set_input(s, info.name, inputs[idx], info.bytes), RLX_OK);
    }
    assert_int_equal(rlx_session_run(s), RLX_OK);
    size_t total = 0;
    for (int i = 0; i < rlx_session_count(s, 2); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 2, i, &info);
        total += info.bytes;
    }
    float *all = malloc(total + 1);
    size_t at = 0;
    for (int i = 0; i < rlx_session_count(s, 2); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 2, i, &info);
        assert_int_equal(rlx_session_get_output(s, info.name, (char *)all + at, info.bytes), RLX_OK);
        at += info.bytes;
    }
    *out_bytes = total;
    return all;
}

static void test_random_graphs(void **state)
{
    (void)state;
    const char *env = getenv("RLX_TEST_SEED");
    rng_state = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    print_message("planner property test seed %llu (RLX_TEST_SEED to repeat)\n", (unsigned long long)rng_state);
    int graphs = 2000, views = 0, inplace = 0, reused = 0;
    for (int it = 0; it < graphs; it++) {
        int n_in = 0;
        rlx_graph *g = random_graph(&n_in);
        assert_int_equal(rlx_graph_verify(g), RLX_OK);
        rlx_options o;
        rlx_options_init(&o);
        o.ignore_env = 1;
        o.threads = 1;
        o.no_simplify = it % 2;    /* keep duplicate subgraphs alive half the time */
        o.no_fusion = it % 3 == 0; /* and unfused elementwise chains a third of it */
        rlx_session *reuse = NULL, *plain = NULL;
        assert_int_equal(rlx_compile(g, &o, &reuse), RLX_OK);
        o.no_reuse = 1;
        assert_int_equal(rlx_compile(g, &o, &plain), RLX_OK);
        check_no_overlap(reuse);
        check_no_overlap(plain);
        views += reuse->plan.n_views;
        inplace += reuse->plan.n_inplace;
        reused += reuse->plan.transient_bytes < plain->plan.transient_bytes;

        float *inputs[3] = {0};
        for (int i = 0; i < rlx_session_count(reuse, 0); i++) {
            rlx_tensor_info info;
            rlx_session_info(reuse, 0, i, &info);
            int idx = atoi(info.name + 1);
            size_t cnt = info.bytes / 4;
            inputs[idx] = malloc(info.bytes + 4);
            for (size_t k = 0; k < cnt; k++)
                inputs[idx][k] = (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        }
        size_t ba, bb;
        float *ya = run_collect(reuse, inputs, &ba);
        float *yb = run_collect(plain, inputs, &bb);
        assert_int_equal(ba, bb);
        if (memcmp(ya, yb, ba) != 0)
            fail_msg("graph %d: outputs differ between the reuse plan and the no-reuse plan", it);
        free(ya);
        free(yb);
        for (int i = 0; i < 3; i++)
            free(inputs[i]);
        rlx_session_free(reuse);
        rlx_session_free(plain);
        rlx_graph_free(g);
    }
    print_message("%d graphs: %d views, %d in-place writes, %d arenas smaller than no-reuse\n", graphs, views, inplace,
                  reused);
    /* the generator must exercise what it claims to test */
    assert_true(views > 0);
    assert_true(inplace > 0);
    assert_true(reused > graphs / 4);
}

/* A chain whose tensors die one after another needs only two slots. */
static void test_chain_reuses_slots(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){1024});
    rlx_node y = x;
    for (int i = 0; i < 10; i++)
        y = rlx_matmul(g, rlx_reshape(g, rlx_tanh(g, y), 2, (int64_t[]){32, 32}),
                       rlx_reshape(g, y, 2, (int64_t[]){32, 32}), 0, 0),
        y = rlx_reshape(g, y, 1, (int64_t[]){1024});
    rlx_output(g, "y", y);
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    /* tanh(y) and y are both live at each matmul: two 4 KiB slots plus the result */
    assert_true(s->plan.transient_bytes <= 3 * 4096);
    assert_true(s->plan.transient_bytes >= s->plan.lower_bound);
    rlx_session_free(s);
    o.no_reuse = 1;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_true(s->plan.transient_bytes >= 20 * 4096);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* A transpose that moves only axes of length 1 keeps the element order: it
 * is a view (no copy) and gives the right values; one that swaps two longer
 * axes is not. */
static void test_unit_axis_transpose_is_view(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){2, 1, 3, 4});
    rlx_node t = rlx_transpose(g, rlx_tanh(g, x), (int[]){1, 0, 2, 3}); /* [1, 2, 3, 4]: a view */
    rlx_node u = rlx_transpose(g, rlx_tanh(g, x), (int[]){0, 1, 3, 2}); /* [2, 1, 4, 3]: a copy */
    rlx_output(g, "t", t);
    rlx_output(g, "u", u);
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    int views = 0, copies = 0;
    for (int i = 0; i < s->graph->n_nodes; i++)
        if (s->graph->nodes[i].op == RLX_OP_TRANSPOSE) {
            views += s->plan.slots[i].view;
            copies += !s->plan.slots[i].view;
        }
    assert_int_equal(views, 1);
    assert_int_equal(copies, 1);
    float in[24], ot[24], ou[24];
    for (int i = 0; i < 24; i++)
        in[i] = (float)(i * 0.37 - 4.0);
    assert_int_equal(rlx_session_set_input(s, "x", in, sizeof in), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "t", ot, sizeof ot), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "u", ou, sizeof ou), RLX_OK);
    for (int i = 0; i < 24; i++) {
        int b = i / 12, r = i % 12 / 4, c = i % 4; /* x [b, 0, r, c] */
        assert_float_equal(ot[i], tanhf(in[i]), 1e-6);
        assert_float_equal(ou[b * 12 + c * 3 + r], tanhf(in[i]), 1e-6);
    }
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* cross_entropy_grad writes the logits' gradient over the logits where
 * they die there (the largest tensor of an LLM's training step), and the
 * gradient is the one a plan without in-place writes gives. */
static void test_cross_entropy_grad_in_place(void **state)
{
    (void)state;
    enum { R = 6, C = 40, K = 16 };
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){R, K});
    rlx_node lab = rlx_input(g, "y", RLX_I64, 1, (int64_t[]){R});
    rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){K, C});
    rlx_node loss = rlx_cross_entropy(g, rlx_matmul(g, x, w, 0, 0), lab, -100, 0.1);
    rlx_node gw;
    assert_int_equal(rlx_gradients(g, loss, 1, &w, &gw), RLX_OK);
    rlx_output(g, "gw", gw);
    float xv[R * K], wv[K * C], got[2][K * C];
    int64_t yv[R] = {3, 0, 39, -100, 17, 8};
    for (int i = 0; i < R * K; i++)
        xv[i] = (float)sin(0.7 * i + 0.2);
    for (int i = 0; i < K * C; i++)
        wv[i] = (float)cos(1.3 * i) * 0.8f;
    for (int pass = 0; pass < 2; pass++) {
        rlx_options o;
        rlx_options_init(&o);
        o.ignore_env = 1;
        o.no_inplace = pass == 1;
        rlx_session *s = NULL;
        assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
        int found = 0;
        for (int i = 0; i < s->graph->n_nodes; i++)
            if (s->graph->nodes[i].op == RLX_OP_CROSS_ENTROPY_GRAD) {
                found++;
                assert_int_equal(s->plan.slots[i].inplace, pass == 0);
            }
        assert_int_equal(found, 1);
        assert_int_equal(rlx_session_set_input(s, "x", xv, sizeof xv), RLX_OK);
        assert_int_equal(rlx_session_set_input(s, "y", yv, sizeof yv), RLX_OK);
        assert_int_equal(rlx_session_set_param(s, "w", wv, sizeof wv), RLX_OK);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        assert_int_equal(rlx_session_get_output(s, "gw", got[pass], sizeof got[pass]), RLX_OK);
        rlx_session_free(s);
    }
    double norm = 0;
    for (int i = 0; i < K * C; i++) {
        assert_true(got[0][i] == got[1][i]);
        norm += fabs(got[0][i]);
    }
    assert_true(norm > 0.1); /* a real gradient, not zeros */
    rlx_graph_free(g);
}

/* Pinning output ancestors keeps every ancestor of an output alive. */
static void test_pin_output_ancestors(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){256});
    rlx_node a = rlx_exp(g, x), b = rlx_tanh(g, a), c = rlx_sin(g, b);
    rlx_output(g, "y", c);
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.no_fusion = 1; /* keep the three elementwise nodes apart */
    o.pin_output_ancestors = 1;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(s->plan.n_inplace, 0);
    assert_int_equal(s->plan.transient_bytes, 3 * 1024);
    rlx_session_free(s);
    o.pin_output_ancestors = 0;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(s->plan.transient_bytes, 1024); /* all in place */
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* Over the device's largest buffer, the plan is redone without pinning;
 * when even that does not fit, compile fails with a clear message. */
static void test_replan_when_over_largest_buffer(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){1024});
    rlx_node y = x;
    for (int i = 0; i < 8; i++)
        y = rlx_exp(g, rlx_sin(g, y));
    rlx_output(g, "y", y);
    rlx_options o;
    rlx_options_init(&o);
    o.no_fusion = 1;
    o.no_inplace = 1;
    o.pin_output_ancestors = 1; /* 16 pinned 4 KiB tensors: 64 KiB + the input */
    rlx_session *s = NULL;
    setenv("RLX_MAX_BUFFER_BYTES", "32768", 1);
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_true(s->plan.arena_bytes <= 32768);
    assert_true(s->plan.transient_bytes <= 2 * 4096);
    rlx_session_free(s);
    setenv("RLX_MAX_BUFFER_BYTES", "4096", 1); /* below the input alone */
    assert_int_equal(rlx_compile(g, &o, &s), RLX_ERR_OUT_OF_MEMORY);
    assert_null(s);
    assert_non_null(strstr(rlx_last_error(), "largest buffer"));
    unsetenv("RLX_MAX_BUFFER_BYTES");
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_reuses_slots),   cmocka_unit_test(test_unit_axis_transpose_is_view),
        cmocka_unit_test(test_pin_output_ancestors), cmocka_unit_test(test_replan_when_over_largest_buffer),
        cmocka_unit_test(test_random_graphs),        cmocka_unit_test(test_cross_entropy_grad_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
