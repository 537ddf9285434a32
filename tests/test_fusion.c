/* test_fusion.c - each fusion pattern fires on the graph it should, not on
 * near misses (an intermediate with another consumer or that is an output,
 * mismatched shapes, wrong axes or permutations, unfoldable parameters), the
 * fused graph computes what the unfused one does on random inputs, and the
 * pass never emits a fused op the target does not claim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/ggml_type.h"
#include "opt_testutil.h"
#include "quant/quant.h"

#define SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

static uint64_t seed = 1;

/* g fused for the CPU (a graph that verifies), the pass's counts in *st. */
static rlx_graph *fused_with_stats(const rlx_graph *g, rlx_opt_stats *st)
{
    memset(st, 0, sizeof *st);
    rlx_pass_ctx c = ot_cpu_ctx(st);
    rlx_graph *f = rlx_pass_fuse(g, &c);
    assert_non_null(f);
    assert_int_equal(rlx_graph_verify(f), RLX_OK);
    return f;
}

static rlx_graph *fused_for_cpu(const rlx_graph *g)
{
    rlx_opt_stats st;
    return fused_with_stats(g, &st);
}

/* Fuses g for the CPU; returns how many nodes of `op` the result has. */
static int fused_count(const rlx_graph *g, rlx_op op)
{
    rlx_graph *f = fused_for_cpu(g);
    int n = ot_count(f, op);
    rlx_graph_free(f);
    return n;
}

/* The compiled graph with fusion on gives the output of the one with it off. */
static void assert_same_output(const rlx_graph *g, const char *out, double rtol)
{
    rlx_options on, off;
    rlx_options_init(&on);
    on.ignore_env = 1;
    off = on;
    off.no_fusion = 1;
    ot_result a, b;
    assert_int_equal(ot_run(g, &on, seed, 0.5, 8, NULL, out, &a), RLX_OK);
    assert_int_equal(ot_run(g, &off, seed, 0.5, 8, NULL, out, &b), RLX_OK);
    assert_int_equal(b.stats.nodes_after_fusion, b.stats.nodes_after_simplify);
    assert_true(ot_close(out, &a, &b, rtol, rtol / 10));
    ot_result_free(&a);
    ot_result_free(&b);
    seed++;
}

/* --------------------------------------------------------- matmul epilogue */

static rlx_graph *mm_graph(int act, int xrank, int bias_kind, int extra_use)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = xrank == 3 ? rlx_input(g, "x", RLX_F32, SHAPE(2, 3, 8)) : rlx_input(g, "x", RLX_F32, SHAPE(6, 8));
    rlx_node w = rlx_param(g, "w", RLX_F32, SHAPE(8, 5));
    rlx_node y = rlx_matmul(g, x, w, 0, 0);
    if (extra_use)
        rlx_output(g, "mm", y);
    if (bias_kind == 1)
        y = rlx_add(g, rlx_param(g, "b", RLX_F32, SHAPE(5)), y); /* bias first: either order fuses */
    else if (bias_kind == 2)
        y = rlx_add(g, y, rlx_param(g, "b", RLX_F32, SHAPE(6, 1))); /* not a bias over the last axis */
    switch (act) {
    case 1: y = rlx_relu(g, y); break;
    case 2: y = rlx_gelu(g, y); break;
    case 3: y = rlx_silu(g, y); break;
    case 4: y = rlx_gelu_tanh(g, y); break;
    default: break;
    }
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_matmul_bias_act(void **state)
{
    (void)state;
    for (int act = 0; act <= 4; act++)
        for (int rank = 2; rank <= 3; rank++) {
            rlx_graph *g = mm_graph(act, rank, 1, 0);
            assert_int_equal(fused_count(g, RLX_OP_MATMUL_BIAS_ACT), 1);
            assert_int_equal(fused_count(g, RLX_OP_MATMUL), 0);
            assert_same_output(g, "y", 1e-5);
            rlx_graph_free(g);
        }
    /* activation without bias */
    rlx_graph *g = mm_graph(2, 2, 0, 0);
    assert_int_equal(fused_count(g, RLX_OP_MATMUL_BIAS_ACT), 1);
    assert_same_output(g, "y", 1e-5);
    rlx_graph_free(g);
}

static void test_matmul_bias_act_near_misses(void **state)
{
    (void)state;
    /* plain matmul: nothing to fuse */
    rlx_graph *g = mm_graph(0, 2, 0, 0);
    assert_int_equal(fused_count(g, RLX_OP_MATMUL_BIAS_ACT), 0);
    rlx_graph_free(g);
    /* the matmul result is also an output */
    g = mm_graph(2, 2, 1, 1);
    assert_int_equal(fused_count(g, RLX_OP_MATMUL_BIAS_ACT), 0);
    assert_int_equal(fused_count(g, RLX_OP_MATMUL), 1);
    rlx_graph_free(g);
    /* bias [6, 1] broadcasts over rows, not a per-column bias */
    g = mm_graph(0, 2, 2, 0);
    assert_int_equal(fused_count(g, RLX_OP_MATMUL_BIAS_ACT), 0);
    rlx_graph_free(g);
    /* the biased sum is read twice */
    g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(4, 8));
    rlx_node s = rlx_add(g, rlx_matmul(g, x, rlx_param(g, "w", RLX_F32, SHAPE(8, 5)), 0, 0),
                         rlx_param(g, "b", RLX_F32, SHAPE(5)));
    rlx_output(g, "y", rlx_mul(g, rlx_relu(g, s), s));
    assert_int_equal(fused_count(g, RLX_OP_MATMUL_BIAS_ACT), 1); /* matmul + bias only */
    rlx_graph *f;
    {
        rlx_pass_ctx c = ot_cpu_ctx(NULL);
        f = rlx_pass_fuse(g, &c);
        assert_int_equal(ot_count(f, RLX_OP_ELEMENTWISE_CHAIN), 1); /* relu * s */
        for (int i = 0; i < f->n_nodes; i++)
            if (f->nodes[i].op == RLX_OP_MATMUL_BIAS_ACT)
                assert_int_equal(f->nodes[i].attrs.mm_act.act, RLX_ACT_NONE);
        rlx_graph_free(f);
    }
    assert_same_output(g, "y", 1e-5);
    rlx_graph_free(g);
}

/* ------------------------------------------------------ residual + norm */

static rlx_graph *add_norm_graph(int rms, int broadcast, int sum_is_output, int gamma, int beta)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(3, 4, 16));
    rlx_node r = broadcast ? rlx_input(g, "r", RLX_F32, SHAPE(16)) : rlx_input(g, "r", RLX_F32, SHAPE(3, 4, 16));
    rlx_node s = rlx_add(g, x, r);
    if (sum_is_output)
        rlx_output(g, "sum", s);
    rlx_node gm = gamma ? rlx_param(g, "n.g", RLX_F32, SHAPE(16)) : -1;
    rlx_node bt = beta ? rlx_param(g, "n.b", RLX_F32, SHAPE(16)) : -1;
    rlx_output(g, "y", rms ? rlx_rms_norm(g, s, gm, 1e-6) : rlx_layer_norm(g, s, gm, bt, 1e-5));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_add_norm(void **state)
{
    (void)state;
    for (int rms = 0; rms < 2; rms++)
        for (int gb = 0; gb < 4; gb++) {
            if (rms && (gb & 2))
                continue;
            rlx_graph *g = add_norm_graph(rms, 0, 0, gb & 1, gb & 2);
            assert_int_equal(fused_count(g, rms ? RLX_OP_ADD_RMS_NORM : RLX_OP_ADD_LAYER_NORM), 1);
            assert_same_output(g, "y", 1e-5);
            rlx_graph_free(g);
        }
    /* near misses: a broadcasting add; a sum that is also an output (layer
     * norm: no fusion; RMS norm: the fused op that keeps the sum) */
    for (int rms = 0; rms < 2; rms++) {
        rlx_graph *g = add_norm_graph(rms, 1, 0, 1, 0);
        assert_int_equal(fused_count(g, rms ? RLX_OP_ADD_RMS_NORM : RLX_OP_ADD_LAYER_NORM), 0);
        assert_int_equal(fused_count(g, RLX_OP_ADD_RMS_NORM_KEEP), 0);
        rlx_graph_free(g);
        g = add_norm_graph(rms, 0, 1, 1, 0);
        assert_int_equal(fused_count(g, rms ? RLX_OP_ADD_RMS_NORM : RLX_OP_ADD_LAYER_NORM), 0);
        assert_int_equal(fused_count(g, RLX_OP_ADD_RMS_NORM_KEEP), rms);
        if (rms) {
            assert_same_output(g, "y", 1e-6);
            assert_same_output(g, "sum", 0);
        }
        rlx_graph_free(g);
    }
    /* pre-norm residual stream: the sum feeds the norm and a later add */
    for (int early = 0; early < 2; early++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 5, 16)), r = rlx_input(g, "r", RLX_F32, SHAPE(2, 5, 16));
        rlx_node s = rlx_add(g, x, r);
        rlx_node e = early ? rlx_mul(g, s, s) : -1; /* a reader before the norm: no fusion */
        rlx_node h = rlx_rms_norm(g, s, rlx_param(g, "n.g", RLX_F32, SHAPE(16)), 1e-6);
        h = rlx_matmul(g, h, rlx_param(g, "w", RLX_F32, SHAPE(16, 16)), 0, 0);
        rlx_node y = rlx_add(g, s, h);
        rlx_output(g, "y", early ? rlx_add(g, y, e) : y);
        assert_int_equal(fused_count(g, RLX_OP_ADD_RMS_NORM_KEEP), !early);
        assert_same_output(g, "y", 1e-5);
        rlx_graph_free(g);
    }
}

/* ---------------------------------------------------------------- SwiGLU */

static void test_swiglu(void **state)
{
    (void)state;
    for (int variant = 0; variant < 4; variant++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(1, 5, 16));
        rlx_node x2 = rlx_input(g, "x2", RLX_F32, SHAPE(1, 5, 16));
        rlx_node gate = rlx_matmul(g, x, rlx_param(g, "wg", RLX_F32, SHAPE(16, 24)), 0, 0);
        rlx_node up = rlx_matmul(g, variant == 2 ? x2 : x, rlx_param(g, "wu", RLX_F32, SHAPE(16, 24)), 0, 0);
        rlx_node sg = rlx_silu(g, gate);
        rlx_node y = variant == 1 ? rlx_mul(g, up, sg) : rlx_mul(g, sg, up);
        if (variant == 3)
            rlx_output(g, "gate", sg); /* the activation has another reader */
        rlx_output(g, "y", y);
        int fires = variant < 2;
        assert_int_equal(fused_count(g, RLX_OP_SWIGLU), fires);
        if (fires)
            assert_same_output(g, "y", 1e-5);
        rlx_graph_free(g);
    }
}

/* ------------------------------------------------------- attention block */

typedef struct attn_cfg {
    int B, S, hid, H, Hk, D, out;
    int bias, qnorm, knorm, rope, causal;
    int bad_perm;    /* transpose k with a wrong permutation */
    int k_is_output; /* the k projection has another reader */
    int mask;        /* 1: an additive f32 mask input [B, 1, 1, S]; 2: a bool one [B, 1, S, S] */
} attn_cfg;

static rlx_node proj(rlx_graph *g, const attn_cfg *c, rlx_node x, const char *name, int h, int norm, int rope,
                     int bad_perm)
{
    static const int perm[4] = {0, 2, 1, 3}, wrong[4] = {0, 2, 3, 1};
    char nm[32];
    snprintf(nm, sizeof nm, "%s.w", name);
    rlx_node y = rlx_matmul(g, x, rlx_param(g, nm, RLX_F32, SHAPE(c->hid, (int64_t)h * c->D)), 0, 0);
    if (c->bias) {
        snprintf(nm, sizeof nm, "%s.b", name);
        y = rlx_add(g, y, rlx_param(g, nm, RLX_F32, SHAPE((int64_t)h * c->D)));
    }
    y = rlx_reshape(g, y, SHAPE(c->B, c->S, h, c->D));
    if (norm) {
        snprintf(nm, sizeof nm, "%s_norm.g", name);
        y = rlx_rms_norm(g, y, rlx_param(g, nm, RLX_F32, SHAPE(c->D)), 1e-6);
    }
    y = rlx_transpose(g, y, bad_perm ? wrong : perm);
    if (bad_perm) /* back to [B, h, S, D] so the graph still type-checks, by another route */
        y = rlx_transpose(g, y, (const int[]){0, 1, 3, 2});
    return rope ? rlx_rope(g, y, 10000.0, 0, 0) : y;
}

static rlx_graph *attn_graph(const attn_cfg *c)
{
    static const int perm[4] = {0, 2, 1, 3};
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(c->B, c->S, c->hid));
    rlx_node q = proj(g, c, x, "q", c->H, c->qnorm, c->rope, 0);
    rlx_node k = proj(g, c, x, "k", c->Hk, c->knorm, c->rope, c->bad_perm);
    rlx_node v = proj(g, c, x, "v", c->Hk, 0, 0, 0);
    if (c->k_is_output)
        rlx_output(g, "k", k);
    rlx_node m = c->mask == 1   ? rlx_input(g, "m", RLX_F32, SHAPE(c->B, 1, 1, c->S))
                 : c->mask == 2 ? rlx_input(g, "m", RLX_BOOL, SHAPE(c->B, 1, c->S, c->S))
                                : -1;
    rlx_node a = rlx_attention(g, q, k, v, m, c->causal, 0.0);
    a = rlx_reshape(g, rlx_transpose(g, a, perm), SHAPE(c->B, c->S, (int64_t)c->H * c->D));
    a = rlx_matmul(g, a, rlx_param(g, "o.w", RLX_F32, SHAPE((int64_t)c->H * c->D, c->out)), 0, 0);
    if (c->bias)
        a = rlx_add(g, a, rlx_param(g, "o.b", RLX_F32, SHAPE(c->out)));
    rlx_output(g, "y", a);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_attention_block(void **state)
{
    (void)state;
    const attn_cfg cfgs[] = {
        /* encoder-like: biases, no norms, no rope, full attention */
        {2, 5, 24, 4, 4, 6, 24, 1, 0, 0, 0, 0, 0, 0, 0},
        /* decoder-like: grouped heads, q/k norm, rope, causal */
        {1, 7, 32, 4, 2, 8, 32, 0, 1, 1, 1, 1, 0, 0, 0},
        /* q norm only, rope, biases, output width differs */
        {2, 3, 16, 2, 1, 4, 12, 1, 1, 0, 1, 0, 0, 0, 0},
        /* an additive padding mask; a bool mask with grouped heads and causal */
        {2, 5, 24, 4, 4, 6, 24, 1, 0, 0, 0, 0, 0, 0, 1},
        {2, 6, 32, 4, 2, 8, 32, 0, 0, 0, 0, 1, 0, 0, 2},
    };
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
        rlx_graph *g = attn_graph(&cfgs[i]);
        assert_int_equal(fused_count(g, RLX_OP_ATTENTION_BLOCK), 1);
        assert_int_equal(fused_count(g, RLX_OP_ATTENTION), 0);
        assert_same_output(g, "y", 1e-4);
        rlx_graph_free(g);
    }
    /* near misses: a projection with another reader, a wrong permutation */
    attn_cfg c = cfgs[1];
    c.k_is_output = 1;
    rlx_graph *g = attn_graph(&c);
    assert_int_equal(fused_count(g, RLX_OP_ATTENTION_BLOCK), 0);
    rlx_graph_free(g);
    c = cfgs[1];
    c.bad_perm = 1;
    g = attn_graph(&c);
    assert_int_equal(fused_count(g, RLX_OP_ATTENTION_BLOCK), 0);
    assert_same_output(g, "y", 1e-4); /* other patterns may still fire */
    rlx_graph_free(g);
}

/* ----------------------------------------------------- elementwise chain */

static void test_elementwise_chain(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(4, 6));
    rlx_node a = rlx_input(g, "a", RLX_F32, SHAPE(6));
    rlx_node b = rlx_input(g, "b", RLX_F32, SHAPE(4, 1));
    rlx_node y = rlx_tanh(g, rlx_add(g, rlx_mul(g, x, a), b));
    y = rlx_mul(g, rlx_sigmoid(g, y), rlx_scalar(g, RLX_F32, 0.5));
    rlx_output(g, "y", rlx_max(g, y, rlx_neg(g, x)));
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    assert_int_equal(fused_count(g, RLX_OP_ELEMENTWISE_CHAIN), 1);
    assert_int_equal(fused_count(g, RLX_OP_TANH), 0);
    assert_same_output(g, "y", 1e-6);
    rlx_graph_free(g);
    /* an intermediate that is an output splits the chain */
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_F32, SHAPE(8));
    rlx_node t = rlx_exp(g, rlx_neg(g, x));
    rlx_output(g, "t", t);
    rlx_output(g, "y", rlx_sqrt(g, rlx_add(g, t, rlx_scalar(g, RLX_F32, 1.0))));
    rlx_pass_ctx c = ot_cpu_ctx(NULL);
    rlx_graph *f = rlx_pass_fuse(g, &c);
    assert_int_equal(ot_count(f, RLX_OP_ELEMENTWISE_CHAIN), 2);
    for (int i = 0; i < f->n_outputs; i++)
        assert_int_equal(f->nodes[f->outputs[i].node].op, RLX_OP_ELEMENTWISE_CHAIN);
    rlx_graph_free(f);
    rlx_graph_free(g);
    /* hard-swish (x read twice inside) after an affine: one chain, the clip
     * taken as max/min */
    g = rlx_graph_new();
    x = rlx_add(g, rlx_mul(g, rlx_input(g, "x", RLX_F32, SHAPE(2, 8)), rlx_scalar(g, RLX_F32, 0.5)),
                rlx_scalar(g, RLX_F32, 0.1));
    y = rlx_clip(g, rlx_add(g, x, rlx_scalar(g, RLX_F32, 3)), 0, 6);
    rlx_output(g, "y", rlx_div(g, rlx_mul(g, x, y), rlx_scalar(g, RLX_F32, 6)));
    rlx_graph *cg = rlx_pass_canon(g, &c);
    assert_non_null(cg);
    assert_int_equal(ot_count(cg, RLX_OP_CLIP), 0);
    assert_int_equal(fused_count(cg, RLX_OP_ELEMENTWISE_CHAIN), 1);
    assert_int_equal(fused_count(cg, RLX_OP_ADD), 0);
    assert_same_output(g, "y", 1e-6);
    rlx_graph_free(cg);
    rlx_graph_free(g);
    /* one op alone is not a chain; integers never fuse */
    g = rlx_graph_new();
    x = rlx_input(g, "x", RLX_I32, SHAPE(8));
    rlx_output(g, "y", rlx_abs(g, rlx_neg(g, x)));
    rlx_output(g, "z", rlx_relu(g, rlx_input(g, "f", RLX_F32, SHAPE(8))));
    assert_int_equal(fused_count(g, RLX_OP_ELEMENTWISE_CHAIN), 0);
    rlx_graph_free(g);
}

/* ------------------------------------------------ softmax(x*scale + mask) */

static void test_softmax_scale_mask(void **state)
{
    (void)state;
    for (int variant = 0; variant < 6; variant++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 3, 7));
        rlx_node m = rlx_input(g, "m", RLX_F32, SHAPE(3, 7));
        rlx_node s = x;
        int axis = 2;
        switch (variant) {
        case 0: s = rlx_add(g, rlx_mul(g, x, rlx_scalar(g, RLX_F32, 0.25)), m); break;
        case 1: s = rlx_add(g, m, rlx_div(g, x, rlx_scalar(g, RLX_F32, 3.0))); break;
        case 2:
            s = rlx_mul(g, rlx_scalar(g, RLX_F32, 2.0), x);
            axis = 1;
            break;
        case 3: s = rlx_add(g, x, m); break;
        case 4: /* scaled by a value known only at run time: nothing to fold */
            s = rlx_mul(g, x, rlx_input(g, "k", RLX_F32, SHAPE(1)));
            break;
        case 5: /* a full-size mask first, scaled scores second: the scale still fuses */
            s = rlx_add(g, rlx_input(g, "m5", RLX_F32, SHAPE(2, 3, 7)), rlx_mul(g, x, rlx_scalar(g, RLX_F32, 0.5)));
            break;
        }
        rlx_output(g, "y", rlx_softmax(g, s, axis));
        assert_int_equal(rlx_graph_verify(g), RLX_OK);
        int fires = variant != 4;
        assert_int_equal(fused_count(g, RLX_OP_SOFTMAX_SCALE_MASK), fires);
        if (fires)
            assert_same_output(g, "y", 1e-5);
        if (variant != 4)
            assert_int_equal(fused_count(g, RLX_OP_MUL) + fused_count(g, RLX_OP_DIV) + fused_count(g, RLX_OP_ADD), 0);
        rlx_graph_free(g);
    }
}

/* ------------------------------------------- conv + batch norm + act */

static rlx_node const_rand(rlx_graph *g, int ndim, const int64_t *dims, double lo, double hi, uint64_t salt)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(lo + (hi - lo) * 0.5 * (ot_uniform(seed + salt, "c", i) + 1));
    rlx_node c = rlx_constant(g, RLX_F32, ndim, dims, v, (size_t)n * sizeof(float));
    free(v);
    return c;
}

static rlx_graph *conv_graph(int bn, int const_bn, int act, int conv_bias)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 3, 6, 6));
    rlx_node w = const_rand(g, SHAPE(4, 3, 3, 3), -0.5, 0.5, 1);
    rlx_node b = conv_bias ? const_rand(g, SHAPE(4), -0.5, 0.5, 2) : -1;
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = 1;
    rlx_node y = rlx_conv(g, x, w, b, &p);
    if (bn) {
        rlx_node prm[4];
        for (int i = 0; i < 4; i++)
            prm[i] = const_bn ? const_rand(g, SHAPE(4), i == 3 ? 0.5 : -1, 1.5, 10 + (uint64_t)i)
                              : rlx_param(g, (const char *[]){"s", "sh", "mu", "var.g"}[i], RLX_F32, SHAPE(4));
        y = rlx_batch_norm(g, y, prm[0], prm[1], prm[2], prm[3], 1e-5);
    }
    if (act)
        y = rlx_relu(g, y);
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

/* [2, 4, 6, 6]: x [2, 3, 6, 6] through a padded 3 x 3 conv with a bias,
 * both constants. */
static rlx_node const_conv3x3(rlx_graph *g, rlx_node x)
{
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = 1;
    return rlx_conv(g, x, const_rand(g, SHAPE(4, 3, 3, 3), -0.5, 0.5, 1), const_rand(g, SHAPE(4), -0.5, 0.5, 2), &p);
}

/* conv then: 0 ((y - k) * k + k) and a relu; 1 (k - y) / k + k0 (k0 one
 * value); 2 y * k with k along W; 3 y + a param; 4 y / k with a zero in k. */
static rlx_graph *conv_affine_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 3, 6, 6));
    rlx_node y = const_conv3x3(g, x);
    rlx_node k0 = const_rand(g, SHAPE(4, 1, 1), -1, 1, 3), k1 = const_rand(g, SHAPE(1, 4, 1, 1), 0.5, 1.5, 4);
    switch (form) {
    case 0: y = rlx_relu(g, rlx_add(g, rlx_mul(g, rlx_sub(g, y, k0), k1), k0)); break;
    case 1: y = rlx_add(g, rlx_div(g, rlx_sub(g, k0, y), k1), const_rand(g, SHAPE(1), -1, 1, 5)); break;
    case 2: y = rlx_mul(g, y, const_rand(g, SHAPE(1, 1, 1, 6), -1, 1, 6)); break;
    case 3: y = rlx_add(g, y, rlx_param(g, "k", RLX_F32, SHAPE(4, 1, 1))); break;
    default: {
        const float k[4] = {1.5f, 0.0f, -2.0f, 0.5f};
        y = rlx_div(g, y, rlx_constant(g, RLX_F32, SHAPE(4, 1, 1), k, sizeof k));
        break;
    }
    }
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_conv_bn_act(void **state)
{
    (void)state;
    /* conv + relu */
    rlx_graph *g = conv_graph(0, 0, 1, 1);
    assert_int_equal(fused_count(g, RLX_OP_CONV_BIAS_ACT), 1);
    assert_same_output(g, "y", 1e-5);
    rlx_graph_free(g);
    /* conv + constant batch norm (+ relu), with and without conv bias: folded */
    for (int act = 0; act < 2; act++)
        for (int cb = 0; cb < 2; cb++) {
            g = conv_graph(1, 1, act, cb);
            rlx_opt_stats st;
            memset(&st, 0, sizeof st);
            rlx_pass_ctx c = ot_cpu_ctx(&st);
            rlx_graph *f = rlx_pass_fuse(g, &c);
            assert_int_equal(ot_count(f, RLX_OP_CONV_BIAS_ACT), 1);
            assert_int_equal(ot_count(f, RLX_OP_BATCH_NORM), 0);
            assert_int_equal(st.bn_folded, 1);
            rlx_graph_free(f);
            assert_same_output(g, "y", 1e-5);
            rlx_graph_free(g);
        }
    /* per-channel steps after the conv (the ONNX importer's batch norm, then
     * k - y and y / k, a one-element operand): folded into the weights */
    for (int form = 0; form < 2; form++) {
        g = conv_affine_graph(form);
        rlx_opt_stats st;
        memset(&st, 0, sizeof st);
        rlx_pass_ctx c = ot_cpu_ctx(&st);
        rlx_graph *f = rlx_pass_fuse(g, &c);
        assert_int_equal(ot_count(f, RLX_OP_CONV_BIAS_ACT) + ot_count(f, RLX_OP_CONV), 1);
        assert_int_equal(
            ot_count(f, RLX_OP_ADD) + ot_count(f, RLX_OP_SUB) + ot_count(f, RLX_OP_MUL) + ot_count(f, RLX_OP_DIV), 0);
        assert_int_equal(st.affine_folded, 3);
        rlx_graph_free(f);
        assert_same_output(g, "y", 1e-5);
        rlx_graph_free(g);
    }
    /* an operand varying along another axis, set at run time, or a
     * divisor with a zero: not folded */
    for (int form = 2; form < 5; form++) {
        g = conv_affine_graph(form);
        rlx_opt_stats st;
        memset(&st, 0, sizeof st);
        rlx_pass_ctx c = ot_cpu_ctx(&st);
        rlx_graph *f = rlx_pass_fuse(g, &c);
        assert_int_equal(st.affine_folded, 0);
        assert_int_equal(ot_count(f, RLX_OP_CONV), 1);
        rlx_graph_free(f);
        if (form < 4)
            assert_same_output(g, "y", 1e-5);
        rlx_graph_free(g);
    }
    /* batch norm with params set at run time: not folded (conv stays, bn stays) */
    g = conv_graph(1, 0, 0, 1);
    assert_int_equal(fused_count(g, RLX_OP_CONV_BIAS_ACT), 0);
    assert_int_equal(fused_count(g, RLX_OP_BATCH_NORM), 1);
    rlx_graph_free(g);
    /* plain conv: nothing */
    g = conv_graph(0, 0, 0, 1);
    assert_int_equal(fused_count(g, RLX_OP_CONV_BIAS_ACT), 0);
    rlx_graph_free(g);
}

/* ------------------------------------------- conv + residual add + act */

/* f, a fusion of g, lowered for a target whose claims are `supports` (the
 * fused nodes it refuses decomposed in parts): "y" matches g's unfused
 * result within rtol, atol.  Returns the lowered graph. */
static rlx_graph *lowered_matches(const rlx_graph *f, const rlx_graph *g, bool (*supports)(const rlx_graph *, rlx_node),
                                  double rtol, double atol)
{
    rlx_pass_ctx lc = ot_cpu_ctx(NULL);
    lc.supports = supports;
    rlx_graph *l = rlx_pass_lower(f, &lc);
    assert_non_null(l);
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.no_fusion = 1;
    ot_result a, b;
    assert_int_equal(ot_run(l, &o, seed, 0.5, 8, NULL, "y", &a), RLX_OK);
    assert_int_equal(ot_run(g, &o, seed, 0.5, 8, NULL, "y", &b), RLX_OK);
    assert_true(ot_close("y", &a, &b, rtol, atol));
    ot_result_free(&a);
    ot_result_free(&b);
    return l;
}

/* Nodes of f that are conv_bias_act with a residual. */
static int residual_convs(const rlx_graph *f)
{
    int n = 0;
    for (int i = 0; i < f->n_nodes; i++)
        n += rlx_conv_residual_input(&f->nodes[i]) >= 0;
    return n;
}

/* A target whose convs take no residual: the add stays its own node. */
static bool no_residual_claim(const rlx_graph *g, rlx_node id)
{
    return rlx_conv_residual_input(&g->nodes[id]) < 0 && rlx_cpu_backend()->supports(g, id);
}

/* [2, 4, 6, 6] = conv(x) (3 x 3, bias), then by form: 0 relu(y + r);
 * 1 r + y, no activation; 2 a constant batch norm, + r, relu; 3 the
 * downsample form, relu(y + conv1x1(x)); 4 r broadcast ([1, 4, 6, 6]);
 * 5 y also an output; 6 relu(y + y). */
static rlx_graph *conv_residual_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 3, 6, 6));
    rlx_node y = const_conv3x3(g, x);
    rlx_node r =
        form == 4 ? rlx_input(g, "r", RLX_F32, SHAPE(1, 4, 6, 6)) : rlx_input(g, "r", RLX_F32, SHAPE(2, 4, 6, 6));
    switch (form) {
    case 1: y = rlx_add(g, r, y); break;
    case 2: {
        rlx_node prm[4];
        for (int i = 0; i < 4; i++)
            prm[i] = const_rand(g, SHAPE(4), i == 3 ? 0.5 : -1, 1.5, 10 + (uint64_t)i);
        y = rlx_relu(g, rlx_add(g, rlx_batch_norm(g, y, prm[0], prm[1], prm[2], prm[3], 1e-5), r));
        break;
    }
    case 3: {
        rlx_conv_params q;
        rlx_conv_params_init(&q);
        rlx_node d = rlx_conv(g, x, const_rand(g, SHAPE(4, 3, 1, 1), -0.5, 0.5, 3), -1, &q);
        y = rlx_relu(g, rlx_add(g, y, d));
        break;
    }
    case 5:
        rlx_output(g, "conv", y);
        y = rlx_relu(g, rlx_add(g, y, r));
        break;
    case 6: y = rlx_relu(g, rlx_add(g, y, y)); break;
    default: y = rlx_relu(g, rlx_add(g, y, r)); break;
    }
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

static void test_conv_residual(void **state)
{
    (void)state;
    for (int form = 0; form < 7; form++) {
        rlx_graph *g = conv_residual_graph(form);
        rlx_opt_stats st;
        rlx_graph *f = fused_with_stats(g, &st);
        bool fires = form < 4;
        if (residual_convs(f) != (int)fires)
            fail_msg("form %d: %d convs with a residual", form, residual_convs(f));
        if (fires) {
            /* the add and relu gone; the batch norm folded; in the
             * downsample form the later conv takes the earlier as its residual */
            assert_int_equal(ot_count(f, RLX_OP_ADD) + ot_count(f, RLX_OP_RELU) + ot_count(f, RLX_OP_BATCH_NORM), 0);
            assert_int_equal(st.bn_folded, form == 2);
            assert_int_equal(ot_count(f, RLX_OP_CONV), form == 3);
            for (int i = 0; i < f->n_nodes; i++) {
                int ri = rlx_conv_residual_input(&f->nodes[i]);
                if (ri >= 0)
                    assert_int_equal(f->nodes[i].attrs.conv.act, form == 1 ? RLX_ACT_NONE : RLX_ACT_RELU);
                if (ri >= 0 && form == 3)
                    assert_int_equal(f->nodes[f->nodes[i].in[ri]].op, RLX_OP_CONV);
            }
            /* a target without the residual form runs the decomposition */
            rlx_graph *l = lowered_matches(f, g, no_residual_claim, 1e-5, 1e-6);
            assert_int_equal(residual_convs(l), 0);
            rlx_graph_free(l);
        }
        rlx_graph_free(f);
        /* and a target that refuses it keeps the add */
        rlx_pass_ctx c = ot_cpu_ctx(NULL);
        c.supports = no_residual_claim;
        f = rlx_pass_fuse(g, &c);
        assert_non_null(f);
        assert_int_equal(residual_convs(f), 0);
        assert_int_equal(ot_count(f, RLX_OP_ADD) + ot_count(f, RLX_OP_ELEMENTWISE_CHAIN) > 0, 1);
        rlx_graph_free(f);
        /* compiled whole (fusion, channels-last, the in-place plan), as unfused */
        if (form != 6)
            assert_same_output(g, "y", 1e-5);
        rlx_graph_free(g);
    }
}

/* ------------------------------------------------------------ projection */

/* A target without the projection kernel: its parts run. */
static bool no_projection_claim(const rlx_graph *g, rlx_node id)
{
    return g->nodes[id].op != RLX_OP_PROJECTION && rlx_cpu_backend()->supports(g, id);
}

/* form 0: rms_norm(x) @ w^T; 1: glu(rms_norm(x) @ w^T); 2: glu(x @ w^T);
 * 3: r + x @ w^T; 4: x @ w^T + r; 5: x @ w^T alone; 6: rms_norm read twice;
 * 7: the weight not read transposed */
static rlx_graph *proj_graph(int form)
{
    rlx_graph *g = rlx_graph_new();
    const int64_t K = 16, N = form == 7 ? 16 : 12;
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 1, K));
    rlx_node w = rlx_param(g, "w", RLX_F32, SHAPE(N, K));
    rlx_node h = x;
    if (form <= 1 || form == 6) {
        h = rlx_rms_norm(g, x, rlx_param(g, "g", RLX_F32, SHAPE(K)), 1e-6);
        if (form == 6)
            rlx_output(g, "h", h);
    }
    rlx_node y = rlx_matmul(g, h, w, 0, form != 7);
    if (form == 1 || form == 2)
        y = rlx_glu(g, y, form == 1 ? RLX_ACT_SILU : RLX_ACT_GELU);
    rlx_node r = rlx_input(g, "r", RLX_F32, SHAPE(2, 1, N));
    if (form == 3)
        y = rlx_add(g, r, y);
    else if (form == 4 || form == 6)
        y = rlx_add(g, y, r);
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

/* What fusion should make of a projection graph: how many projections,
 * and their pre, glu and has_res attributes. */
typedef struct proj_want {
    int fused, pre, glu, res;
} proj_want;

/* f holds want.fused projections, each with want's attributes and quant. */
static void assert_projections(const rlx_graph *f, proj_want want, int quant)
{
    assert_int_equal(ot_count(f, RLX_OP_PROJECTION), want.fused);
    for (int i = 0; i < f->n_nodes; i++)
        if (f->nodes[i].op == RLX_OP_PROJECTION) {
            assert_int_equal(f->nodes[i].attrs.proj.pre, want.pre);
            assert_int_equal(f->nodes[i].attrs.proj.glu, want.glu);
            assert_int_equal(f->nodes[i].attrs.proj.has_res, want.res);
            assert_int_equal(f->nodes[i].attrs.proj.quant, quant);
        }
}

static void test_projection(void **state)
{
    (void)state;
    static const proj_want want[8] = {
        {1, RLX_PROJ_RMS_NORM, RLX_ACT_NONE, 0},
        {1, RLX_PROJ_RMS_NORM, RLX_ACT_SILU, 0},
        {1, RLX_PROJ_PLAIN, RLX_ACT_GELU, 0},
        {1, RLX_PROJ_PLAIN, RLX_ACT_NONE, 1},
        {1, RLX_PROJ_PLAIN, RLX_ACT_NONE, 1},
        {0, 0, 0, 0},
        {1, RLX_PROJ_PLAIN, RLX_ACT_NONE, 1}, /* the norm is an output: only the add joins */
        {0, 0, 0, 0}};
    for (int form = 0; form < 8; form++) {
        rlx_graph *g = proj_graph(form), *f = fused_for_cpu(g);
        assert_projections(f, want[form], 0);
        if (want[form].fused) {
            /* the CPU kernel computes what the unfused graph does */
            assert_same_output(g, "y", 1e-5);
            /* lowered for a target without it (its definition in
             * primitives), the fused graph does too */
            rlx_graph *l = lowered_matches(f, g, no_projection_claim, 1e-6, 1e-7);
            assert_int_equal(ot_count(l, RLX_OP_PROJECTION), 0);
            rlx_graph_free(l);
        }
        rlx_graph_free(f);
        rlx_graph_free(g);
    }
    seed++;
}

/* A target that claims projections of every kind (as CUDA does for a
 * decode step's rows). */
static bool any_projection_claim(const rlx_graph *g, rlx_node id)
{
    return g->nodes[id].op == RLX_OP_PROJECTION || rlx_cpu_backend()->supports(g, id);
}

/* form 0: glu(qmatmul(rms_norm(x))); 1: qmatmul(rms_norm(x)); 2: r +
 * qmatmul(x); 3: glu(qmatmul(x)); 4: qmatmul(x) alone (stays). */
static rlx_graph *qproj_graph(int form, int qt)
{
    rlx_graph *g = rlx_graph_new();
    const int64_t K = 256, N = 8;
    const size_t rb = rlx_quant_row_bytes(qt, K);
    uint8_t *wq = malloc(N * rb);
    float row[256];
    assert_non_null(wq);
    for (int64_t r = 0; r < N; r++) {
        for (int64_t e = 0; e < K; e++)
            row[e] = (float)(0.1 * ot_uniform(seed, "wq", r * K + e) - 0.05);
        assert_int_equal(rlx_quantize_row(qt, row, wq + r * rb, K), RLX_OK);
    }
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(2, 1, K));
    rlx_node w = rlx_constant(g, RLX_U8, 2, (int64_t[]){N, (int64_t)rb}, wq, N * rb);
    free(wq);
    rlx_node h = form <= 1 ? rlx_rms_norm(g, x, rlx_param(g, "g", RLX_F32, SHAPE(K)), 1e-6) : x;
    rlx_node y = rlx_qmatmul(g, h, w, qt, K);
    if (form == 0 || form == 3)
        y = rlx_glu(g, y, RLX_ACT_SILU);
    if (form == 2)
        y = rlx_add(g, rlx_input(g, "r", RLX_F32, SHAPE(2, 1, N)), y);
    rlx_output(g, "y", y);
    assert_int_equal(rlx_graph_verify(g), RLX_OK);
    return g;
}

/* A qmatmul fuses into a projection with a quantized weight where the
 * target claims it (not on the CPU, whose integer dot kernels run the
 * qmatmul); lowered again, it computes what the unfused graph does. */
static void test_projection_quantized(void **state)
{
    (void)state;
    static const int types[] = {RLX_GGML_Q8_0, RLX_GGML_Q4_K, RLX_GGML_Q6_K};
    static const proj_want want[5] = {{1, RLX_PROJ_RMS_NORM, RLX_ACT_SILU, 0},
                                      {1, RLX_PROJ_RMS_NORM, RLX_ACT_NONE, 0},
                                      {1, RLX_PROJ_PLAIN, RLX_ACT_NONE, 1},
                                      {1, RLX_PROJ_PLAIN, RLX_ACT_SILU, 0},
                                      {0, 0, 0, 0}};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int form = 0; form < 5; form++) {
            rlx_graph *g = qproj_graph(form, types[t]);
            rlx_graph *cpu = fused_for_cpu(g);
            assert_int_equal(ot_count(cpu, RLX_OP_PROJECTION), 0);
            rlx_graph_free(cpu);
            rlx_pass_ctx c = ot_cpu_ctx(NULL);
            c.supports = any_projection_claim;
            rlx_graph *f = rlx_pass_fuse(g, &c);
            assert_non_null(f);
            assert_int_equal(rlx_graph_verify(f), RLX_OK);
            assert_projections(f, want[form], types[t]);
            if (want[form].fused)
                assert_int_equal(ot_count(f, RLX_OP_QMATMUL), 0);
            if (want[form].fused) {
                /* its decomposition (qmatmul and the parts) gives the
                 * unfused graph's result to the bit */
                rlx_graph *l = lowered_matches(f, g, no_projection_claim, 0.0, 0.0);
                assert_int_equal(ot_count(l, RLX_OP_PROJECTION), 0);
                assert_int_equal(ot_count(l, RLX_OP_QMATMUL), 1);
                rlx_graph_free(l);
            }
            rlx_graph_free(f);
            rlx_graph_free(g);
        }
    seed++;
}

/* A quantized projection's weight must be a qmatmul's: u8 rows of whole
 * blocks of the type, of the row bytes x's width gives. */
static void test_projection_quantized_refusals(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    const int64_t K = 64;
    rlx_node x = rlx_input(g, "x", RLX_F32, SHAPE(1, K));
    rlx_node bad_rows = rlx_param(g, "w1", RLX_U8, SHAPE(4, 60));
    rlx_node f32_w = rlx_param(g, "w2", RLX_F32, SHAPE(4, 68));
    rlx_node good = rlx_param(g, "w3", RLX_U8, SHAPE(4, 68));
    rlx_node_data p;
    memset(&p, 0, sizeof p);
    p.op = RLX_OP_PROJECTION;
    p.n_in = 2;
    p.in[0] = x;
    p.attrs.proj.quant = RLX_GGML_Q8_0;
    p.in[1] = bad_rows;
    assert_true(rlx_graph_add(g, &p) < 0);
    assert_non_null(strstr(rlx_last_error(), "Q8_0"));
    p.in[1] = f32_w;
    assert_true(rlx_graph_add(g, &p) < 0);
    p.in[1] = good;
    p.attrs.proj.quant = 99; /* not a block type */
    assert_true(rlx_graph_add(g, &p) < 0);
    assert_non_null(strstr(rlx_last_error(), "99"));
    p.attrs.proj.quant = RLX_GGML_Q8_0;
    rlx_node y = rlx_graph_add(g, &p);
    assert_true(y >= 0);
    assert_int_equal(g->nodes[y].shape.dims[1], 4);
    rlx_graph_free(g);
}

/* ------------------------------------------------------ target awareness */

static bool no_fused_claim(const rlx_graph *g, rlx_node id)
{
    return !(rlx_op_info_of(g->nodes[id].op)->flags & RLX_OPF_FUSED) && rlx_cpu_backend()->supports(g, id);
}

static bool no_attn_block_claim(const rlx_graph *g, rlx_node id)
{
    return g->nodes[id].op != RLX_OP_ATTENTION_BLOCK && rlx_cpu_backend()->supports(g, id);
}

static void test_target_claim(void **state)
{
    (void)state;
    attn_cfg cfg = {1, 6, 32, 4, 2, 8, 32, 0, 1, 1, 1, 1, 0, 0, 0};
    rlx_graph *g = attn_graph(&cfg);
    rlx_opt_stats st;
    memset(&st, 0, sizeof st);
    rlx_pass_ctx c = ot_cpu_ctx(&st);
    c.supports = no_fused_claim;
    rlx_graph *f = rlx_pass_fuse(g, &c);
    assert_non_null(f);
    assert_int_equal(ot_count_fused(f), 0);
    assert_true(st.fusion_refused > 0);
    assert_int_equal(f->n_nodes, g->n_nodes);
    rlx_graph_free(f);
    /* without the block, the projections still get what the target claims */
    c.supports = no_attn_block_claim;
    f = rlx_pass_fuse(g, &c);
    assert_int_equal(ot_count(f, RLX_OP_ATTENTION_BLOCK), 0);
    assert_int_equal(ot_count(f, RLX_OP_ATTENTION), 1);
    for (int i = 0; i < f->n_nodes; i++)
        assert_true(no_attn_block_claim(f, i));
    rlx_graph_free(f);
    rlx_graph_free(g);
}

int main(void)
{
    const char *s = getenv("RLX_TEST_SEED");
    seed = s ? strtoull(s, NULL, 10) : 12345;
    printf("test_fusion: seed %llu (set RLX_TEST_SEED to repeat)\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_bias_act),
        cmocka_unit_test(test_matmul_bias_act_near_misses),
        cmocka_unit_test(test_add_norm),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_attention_block),
        cmocka_unit_test(test_elementwise_chain),
        cmocka_unit_test(test_softmax_scale_mask),
        cmocka_unit_test(test_conv_bn_act),
        cmocka_unit_test(test_conv_residual),
        cmocka_unit_test(test_target_claim),
        cmocka_unit_test(test_projection),
        cmocka_unit_test(test_projection_quantized),
        cmocka_unit_test(test_projection_quantized_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
