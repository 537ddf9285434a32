/* test_amp.c - automatic mixed precision: the policy (which ops compute in
 * f16/bf16, which stay f32), casts only where dtypes change, constants
 * converted at compile time, redundant cast pairs removed, graph outputs
 * keep their dtype, a precision or op the target lacks falls back to f32,
 * f16/bf16 results stay close to f32 ones, and training's edges (the
 * cross-entropy's logits, an optimizer step's gradient) take low values
 * without f32 copies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "opt_testutil.h"

#define SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

static uint64_t seed = 3;

static rlx_pass_ctx amp_ctx(rlx_precision p, rlx_opt_stats *st)
{
    rlx_pass_ctx c = ot_cpu_ctx(st);
    c.precision = p;
    memset(st, 0, sizeof *st);
    return c;
}

/* dtype of the first node of op in g (RLX_DTYPE_COUNT if none). */
static rlx_dtype dtype_of(const rlx_graph *g, rlx_op op)
{
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == op)
            return g->nodes[i].dtype;
    return RLX_DTYPE_COUNT;
}

/* x @ w + b -> layer norm -> softmax -> * 2 -> output */
static rlx_graph *policy_graph(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(4, 8));
    rlx_node y = rlx_add(g, rlx_matmul(g, x, rlx_param(g, "w", RLX_F32, SHAPE(8, 6)), 0, 0),
                         rlx_param(g, "b", RLX_F32, SHAPE(6)));
    y = rlx_layer_norm(g, y, rlx_param(g, "n.g", RLX_F32, SHAPE(6)), -1, 1e-5);
    y = rlx_softmax(g, y, 1);
    y = rlx_reshape(g, rlx_mul(g, y, rlx_scalar(g, RLX_F32, 2.0)), SHAPE(24));
    rlx_output(g, "y", y);
    rlx_output(g, "s", rlx_reduce_sum(g, x, 0, NULL, 0));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_policy(void **state)
{
    (void)state;
    for (int p = RLX_PRECISION_F16; p <= RLX_PRECISION_BF16; p++) {
        rlx_dtype low = p == RLX_PRECISION_F16 ? RLX_F16 : RLX_BF16;
        rlx_graph *g = policy_graph();
        rlx_opt_stats st;
        rlx_pass_ctx c = amp_ctx((rlx_precision)p, &st);
        rlx_graph *a = rlx_pass_amp(g, &c);
        assert_non_null(a);
        assert_int_equal(rlx_graph_verify(a), RLX_OK);
        assert_int_equal(dtype_of(a, RLX_OP_MATMUL), low);
        assert_int_equal(dtype_of(a, RLX_OP_ADD), low);
        assert_int_equal(dtype_of(a, RLX_OP_LAYER_NORM), low); /* f32 statistics inside */
        assert_int_equal(dtype_of(a, RLX_OP_SOFTMAX), low);
        assert_int_equal(dtype_of(a, RLX_OP_REDUCE_SUM), RLX_F32);
        assert_int_equal(dtype_of(a, RLX_OP_MUL), low);
        assert_int_equal(dtype_of(a, RLX_OP_RESHAPE), low); /* follows its input */
        for (int i = 0; i < a->n_outputs; i++)
            assert_int_equal(a->nodes[a->outputs[i].node].dtype, RLX_F32);
        /* x, w, b and the norm's gain to low; reshape's result up for the
         * output.  The scalar 2.0 is a constant: converted, not cast. */
        assert_int_equal(st.casts_inserted, ot_count(a, RLX_OP_CAST));
        assert_int_equal(ot_count(a, RLX_OP_CAST), 5);
        int low_consts = 0;
        for (int i = 0; i < a->n_nodes; i++)
            low_consts += a->nodes[i].op == RLX_OP_CONSTANT && a->nodes[i].dtype == low;
        assert_int_equal(low_consts, 1);
        rlx_graph_free(a);
        rlx_graph_free(g);
    }
}

/* After fusion: fused matmul epilogues and fused residual norms go low. */
static void test_policy_after_fusion(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 5, 16));
    rlx_node y = rlx_gelu(g, rlx_add(g, rlx_matmul(g, x, rlx_param(g, "w", RLX_F32, SHAPE(16, 16)), 0, 0),
                                     rlx_param(g, "b", RLX_F32, SHAPE(16))));
    y = rlx_layer_norm(g, rlx_add(g, x, y), rlx_param(g, "n.g", RLX_F32, SHAPE(16)), -1, 1e-5);
    rlx_output(g, "y", y);
    rlx_pass_ctx cpu = ot_cpu_ctx(NULL);
    rlx_graph *f = rlx_pass_fuse(g, &cpu);
    rlx_opt_stats st;
    rlx_pass_ctx c = amp_ctx(RLX_PRECISION_BF16, &st);
    rlx_graph *a = rlx_pass_amp(f, &c);
    assert_int_equal(dtype_of(a, RLX_OP_MATMUL_BIAS_ACT), RLX_BF16);
    assert_int_equal(dtype_of(a, RLX_OP_ADD_LAYER_NORM), RLX_BF16);
    assert_int_equal(st.amp_low, 2);
    rlx_graph_free(a);
    rlx_graph_free(f);
    rlx_graph_free(g);
}

/* cast(cast(x, f16), f32) and cast(x, f32) disappear. */
static void test_redundant_casts(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(3, 8));
    rlx_node y = rlx_cast(g, rlx_cast(g, x, RLX_F16), RLX_F32);
    y = rlx_exp(g, rlx_cast(g, y, RLX_F32)); /* exp computes in f32 */
    rlx_output(g, "y", y);
    rlx_opt_stats st;
    rlx_pass_ctx c = amp_ctx(RLX_PRECISION_F16, &st);
    rlx_graph *a = rlx_pass_amp(g, &c);
    assert_int_equal(ot_count(a, RLX_OP_CAST), 0);
    assert_true(st.casts_removed >= 1);
    assert_int_equal(a->nodes[a->outputs[0].node].dtype, RLX_F32);
    rlx_graph_free(a);
    rlx_graph_free(g);
}

/* An f32 value read in f16 by two matmuls, directly and through a
 * reshape, is cast once; the result matches the graph without the pass. */
static void test_cast_once_through_views(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 3, 8));
    rlx_node e = rlx_exp(g, x); /* f32 under the policy */
    rlx_node w1 = rlx_input(g, "w1", RLX_F32, SHAPE(8, 5)), w2 = rlx_input(g, "w2", RLX_F32, SHAPE(8, 4));
    rlx_node a = rlx_matmul(g, e, w1, 0, 0);
    rlx_node b = rlx_matmul(g, rlx_reshape(g, e, SHAPE(6, 8)), w2, 0, 0);
    rlx_output(g, "a", a);
    rlx_output(g, "b", b);
    rlx_opt_stats st;
    rlx_pass_ctx c = amp_ctx(RLX_PRECISION_F16, &st);
    rlx_graph *am = rlx_pass_amp(g, &c);
    assert_non_null(am);
    int casts_of_e = 0;
    for (int i = 0; i < am->n_nodes; i++) {
        const rlx_node_data *n = &am->nodes[i];
        if (n->op == RLX_OP_CAST && n->dtype == RLX_F16 && am->nodes[n->in[0]].op == RLX_OP_EXP)
            casts_of_e++;
        assert_false(n->op == RLX_OP_CAST && am->nodes[n->in[0]].op == RLX_OP_RESHAPE);
    }
    assert_int_equal(casts_of_e, 1);
    assert_int_equal(dtype_of(am, RLX_OP_MATMUL), RLX_F16);
    rlx_graph_free(am);
    rlx_graph_free(g);
}

static bool no_low_matmul(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_MATMUL && n->dtype != RLX_F32)
        return false;
    return rlx_cpu_backend()->supports(g, id);
}

static bool no_low_relu(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_RELU && n->dtype != RLX_F32)
        return false;
    return rlx_cpu_backend()->supports(g, id);
}

static void test_fallback(void **state)
{
    (void)state;
    rlx_graph *g = policy_graph();
    /* no low matmul at all: the precision is not available, the graph stays f32 */
    rlx_opt_stats st;
    rlx_pass_ctx c = amp_ctx(RLX_PRECISION_BF16, &st);
    c.supports = no_low_matmul;
    rlx_graph *a = rlx_pass_amp(g, &c);
    assert_int_equal(a->n_nodes, g->n_nodes);
    assert_int_equal(ot_count(a, RLX_OP_CAST), 0);
    assert_int_equal(st.amp_fallback, 1);
    rlx_graph_free(a);
    rlx_graph_free(g);
    /* one op without a low kernel stays f32, the rest goes low */
    g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(4, 8));
    rlx_node y = rlx_relu(g, rlx_matmul(g, x, rlx_param(g, "w", RLX_F32, SHAPE(8, 8)), 0, 0));
    rlx_output(g, "y", rlx_matmul(g, y, rlx_param(g, "w2", RLX_F32, SHAPE(8, 3)), 0, 0));
    c = amp_ctx(RLX_PRECISION_F16, &st);
    c.supports = no_low_relu;
    a = rlx_pass_amp(g, &c);
    assert_int_equal(dtype_of(a, RLX_OP_RELU), RLX_F32);
    assert_int_equal(dtype_of(a, RLX_OP_MATMUL), RLX_F16);
    assert_int_equal(st.amp_fallback, 1);
    for (int i = 0; i < a->n_nodes; i++)
        assert_true(no_low_relu(a, i));
    rlx_graph_free(a);
    rlx_graph_free(g);
}

/* A small transformer-ish graph: f16/bf16 results near f32; no_amp gives f32. */
static rlx_graph *numeric_graph(void)
{
    static const int perm[4] = {0, 2, 1, 3};
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(1, 6, 32));
    rlx_node h[3];
    for (int i = 0; i < 3; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "w%d", i);
        rlx_node y = rlx_matmul(g, x, rlx_param(g, nm, RLX_F32, SHAPE(32, 32)), 0, 0);
        h[i] = rlx_transpose(g, rlx_reshape(g, y, SHAPE(1, 6, 4, 8)), perm);
    }
    rlx_node a = rlx_attention(g, h[0], h[1], h[2], -1, 1, 0.0);
    a = rlx_reshape(g, rlx_transpose(g, a, perm), SHAPE(1, 6, 32));
    a = rlx_matmul(g, a, rlx_param(g, "wo", RLX_F32, SHAPE(32, 32)), 0, 0);
    rlx_node y = rlx_rms_norm(g, rlx_add(g, x, a), rlx_param(g, "n.g", RLX_F32, SHAPE(32)), 1e-6);
    rlx_node f = rlx_mul(g, rlx_silu(g, rlx_matmul(g, y, rlx_param(g, "wg", RLX_F32, SHAPE(32, 48)), 0, 0)),
                         rlx_matmul(g, y, rlx_param(g, "wu", RLX_F32, SHAPE(32, 48)), 0, 0));
    f = rlx_matmul(g, f, rlx_param(g, "wd", RLX_F32, SHAPE(48, 32)), 0, 0);
    rlx_output(g, "y", rlx_softmax(g, rlx_add(g, y, f), 2));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_numerics(void **state)
{
    (void)state;
    rlx_graph *g = numeric_graph();
    for (int fusion = 0; fusion < 2; fusion++) {
        rlx_options o;
        rlx_options_init(&o);
        o.ignore_env = 1;
        o.no_fusion = !fusion;
        ot_result ref, got, off;
        assert_int_equal(ot_run(g, &o, seed, 0.3, 8, NULL, "y", &ref), RLX_OK);
        for (int p = RLX_PRECISION_F16; p <= RLX_PRECISION_BF16; p++) {
            o.precision = (rlx_precision)p;
            o.no_amp = 0;
            assert_int_equal(ot_run(g, &o, seed, 0.3, 8, NULL, "y", &got), RLX_OK);
            assert_int_equal(got.dtype, RLX_F32);
            assert_true(ot_close(p == RLX_PRECISION_F16 ? "f16" : "bf16", &got, &ref,
                                 p == RLX_PRECISION_F16 ? 1e-2 : 6e-2, p == RLX_PRECISION_F16 ? 2e-3 : 1e-2));
            /* the switch: no mixed precision is exactly f32 */
            o.no_amp = 1;
            assert_int_equal(ot_run(g, &o, seed, 0.3, 8, NULL, "y", &off), RLX_OK);
            assert_true(ot_close("no_amp", &off, &ref, 0, 0));
            ot_result_free(&got);
            ot_result_free(&off);
            o.precision = RLX_PRECISION_F32;
        }
        ot_result_free(&ref);
    }
    rlx_graph_free(g);
}

static bool no_low_grad_step(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (n->op == RLX_OP_OPTIMIZER_STEP && g->nodes[n->in[1]].dtype != RLX_F32)
        return false;
    return rlx_cpu_backend()->supports(g, id);
}

/* Training's edges: the cross-entropy reads bf16 logits as they arrive
 * (its loss f32), and an optimizer step reads the bf16 gradient without
 * an f32 copy, unless the target declines it. */
static void test_training_edges(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(6, 8));
    rlx_node w = rlx_param(g, "w", RLX_F32, SHAPE(8, 5));
    int64_t lab[6] = {0, 1, 2, 3, 4, 0};
    rlx_node labels = rlx_constant(g, RLX_I64, SHAPE(6), lab, sizeof lab);
    rlx_node loss = rlx_cross_entropy(g, rlx_matmul(g, x, w, 0, 0), labels, -100, 0.0);
    rlx_node gw;
    assert_int_equal(rlx_gradients(g, loss, 1, &w, &gw), RLX_OK);
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = RLX_OP_OPTIMIZER_STEP;
    p.n_in = 5;
    p.in[0] = w, p.in[1] = gw, p.in[2] = rlx_input(g, "hyper", RLX_F32, SHAPE(4));
    p.in[3] = rlx_scalar(g, RLX_F32, 1.0), p.in[4] = loss;
    p.attrs.optim.kind = RLX_OPTIM_SGD;
    rlx_output(g, "w.new", rlx_graph_add(g, &p));
    rlx_output(g, "loss", loss);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    for (int declines = 0; declines < 2; declines++) {
        rlx_opt_stats st;
        rlx_pass_ctx c = amp_ctx(RLX_PRECISION_BF16, &st);
        if (declines)
            c.supports = no_low_grad_step;
        rlx_graph *am = rlx_pass_amp(g, &c);
        assert_non_null(am);
        assert_int_equal(rlx_graph_verify(am), RLX_OK);
        int xent = 0, steps = 0;
        for (int i = 0; i < am->n_nodes; i++) {
            const rlx_node_data *n = &am->nodes[i];
            if (n->op == RLX_OP_CROSS_ENTROPY) {
                assert_int_equal(am->nodes[n->in[0]].op, RLX_OP_MATMUL);
                assert_int_equal(am->nodes[n->in[0]].dtype, RLX_BF16);
                assert_int_equal(n->dtype, RLX_F32);
                xent++;
            }
            if (n->op == RLX_OP_OPTIMIZER_STEP) {
                assert_int_equal(am->nodes[n->in[1]].dtype, declines ? RLX_F32 : RLX_BF16);
                assert_int_equal(n->dtype, RLX_F32);
                steps++;
            }
        }
        assert_int_equal(xent, 1);
        assert_int_equal(steps, 1);
        rlx_graph_free(am);
    }
    rlx_graph_free(g);
}

int main(void)
{
    const char *s = getenv("RLX_TEST_SEED");
    seed = s ? strtoull(s, NULL, 10) : 333;
    printf("test_amp: seed %llu (set RLX_TEST_SEED to repeat)\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy),          cmocka_unit_test(test_policy_after_fusion),
        cmocka_unit_test(test_redundant_casts), cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_numerics),        cmocka_unit_test(test_cast_once_through_views),
        cmocka_unit_test(test_training_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
