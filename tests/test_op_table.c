/* test_op_table.c - every op of the IR has a complete row in the op table
 * and the pieces docs/ADDING_AN_OP.md lists: a name, its traits (kind,
 * mixed-precision class, flags that agree with them), shape inference, a
 * CPU kernel (the reference every backend is tested against), and, for a
 * fused op, a decomposition into primitives.  An op that may be an
 * instruction of an elementwise chain is run both ways (alone, and as a
 * one-instruction chain) and must agree, so the chain kernel knows it too.
 * A missing piece fails here instead of falling back quietly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backends/cpu/cpu_kernels.h"
#include "opt_testutil.h"

static void test_every_op_has_a_row(void **state)
{
    (void)state;
    int bad = 0;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)op);
        if (!i || !i->name || !i->name[0]) {
            fprintf(stderr, "op %d has no row or no name in src/ir/ops.c\n", op);
            bad++;
            continue;
        }
        for (int o = 0; o < op; o++)
            if (rlx_op_info_of((rlx_op)o) && !strcmp(rlx_op_name((rlx_op)o), i->name)) {
                fprintf(stderr, "ops %d and %d are both named %s\n", o, op, i->name);
                bad++;
            }
        if (!i->infer) {
            fprintf(stderr, "%s: no shape inference\n", i->name);
            bad++;
        }
        if (i->min_in < 0 || i->min_in > i->max_in || i->max_in > RLX_MAX_INPUTS) {
            fprintf(stderr, "%s: inputs %d..%d\n", i->name, i->min_in, i->max_in);
            bad++;
        }
    }
    assert_null(rlx_op_info_of(RLX_OP_COUNT));
    assert_int_equal(bad, 0);
}

/* The traits are set and agree with one another. */
static void test_traits(void **state)
{
    (void)state;
    int bad = 0, acts[RLX_ACT_COUNT] = {0};
#define CHECK(cond, ...)                      \
    do {                                      \
        if (!(cond)) {                        \
            fprintf(stderr, "%s: ", i->name); \
            fprintf(stderr, __VA_ARGS__);     \
            fprintf(stderr, "\n");            \
            bad++;                            \
        }                                     \
    } while (0)
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)op);
        if (!i)
            continue;
        unsigned f = i->flags;
        bool leaf = f & RLX_OPF_LEAF;
        CHECK(i->kind > RLX_KIND_UNSET && i->kind < RLX_KIND_COUNT, "kind not set (rlx_op_kind)");
        CHECK(i->amp > RLX_AMP_UNSET && i->amp < RLX_AMP_COUNT, "mixed-precision class not set (rlx_amp_class)");
        CHECK(leaf == (i->kind == RLX_KIND_LEAF), "RLX_OPF_LEAF and kind leaf disagree");
        CHECK(leaf == (i->amp == RLX_AMP_LEAF), "RLX_OPF_LEAF and class leaf disagree");
        CHECK(!!(f & RLX_OPF_FUSED) == (op >= RLX_OP_FIRST_FUSED), "fused flag and place in the enum disagree");
        CHECK(!!(f & RLX_OPF_VIEW) == (i->view != NULL), "RLX_OPF_VIEW without an alias rule, or the reverse");
        CHECK(!!(f & RLX_OPF_STATEFUL) == (i->amp == RLX_AMP_STATE), "stateful op without class state, or the reverse");
        CHECK((i->amp == RLX_AMP_CAST) == (op == RLX_OP_CAST), "class cast belongs to cast alone");
        CHECK((i->amp == RLX_AMP_CHAIN) == (op == RLX_OP_ELEMENTWISE_CHAIN),
              "class chain belongs to the elementwise program alone");
        /* the backends register their elementwise kernels by these ranges */
        CHECK((i->kind == RLX_KIND_UNARY) == (op >= RLX_OP_NEG && op <= RLX_OP_NOT),
              "unary ops sit between RLX_OP_NEG and RLX_OP_NOT in the enum, and only they");
        CHECK((i->kind == RLX_KIND_BINARY) == (op >= RLX_OP_ADD && op <= RLX_OP_XOR),
              "binary ops sit between RLX_OP_ADD and RLX_OP_XOR in the enum, and only they");
        if (i->kind == RLX_KIND_UNARY || i->kind == RLX_KIND_BINARY) {
            int n = i->kind == RLX_KIND_UNARY ? 1 : 2;
            CHECK(i->min_in == n && i->max_in == n, "a unary/binary op takes %d input(s)", n);
            CHECK(f & RLX_OPF_ELEMENTWISE, "unary/binary ops are elementwise");
        }
        CHECK(!(f & RLX_OPF_CHAIN) || i->kind == RLX_KIND_UNARY || i->kind == RLX_KIND_BINARY,
              "only unary/binary ops can be chain instructions");
        CHECK(!(f & RLX_OPF_CHAIN_F32) || (f & RLX_OPF_CHAIN), "RLX_OPF_CHAIN_F32 without RLX_OPF_CHAIN");
        CHECK(i->act == RLX_ACT_NONE || (i->kind == RLX_KIND_UNARY && i->amp == RLX_AMP_LOW),
              "a fused activation is a low-precision unary op");
        if (i->act > RLX_ACT_NONE && i->act < RLX_ACT_COUNT)
            acts[i->act]++;
        CHECK(i->layout == RLX_LAYOUT_ATTR_NONE || i->kind == RLX_KIND_CONV || i->kind == RLX_KIND_POOL,
              "a layout attribute on an op that is not conv or pooling");
        CHECK(!(f & RLX_OPF_AUX_KEEP_DTYPE) || i->max_in > 1, "aux inputs flagged on an op with one input");
    }
    for (int a = RLX_ACT_NONE + 1; a < RLX_ACT_COUNT; a++) {
        if (acts[a] != 1)
            fprintf(stderr, "activation %d is the act of %d ops (want 1)\n", a, acts[a]);
        bad += acts[a] != 1;
        assert_int_equal(rlx_op_info_of(rlx_act_op((rlx_act)a))->act, a);
    }
#undef CHECK
    assert_int_equal(bad, 0);
    assert_true(rlx_op_is_unary(RLX_OP_NEG) && rlx_op_is_unary(RLX_OP_NOT) && !rlx_op_is_unary(RLX_OP_ADD));
    assert_true(rlx_op_is_binary(RLX_OP_XOR) && !rlx_op_is_binary(RLX_OP_WHERE) && !rlx_op_is_binary(RLX_OP_COUNT));
}

/* A CPU kernel for every op that computes (the reference), and a
 * decomposition for every fused op. */
static void test_kernel_and_definition(void **state)
{
    (void)state;
    int bad = 0;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)op);
        if (!i)
            continue;
        if (!(i->flags & RLX_OPF_LEAF) && !rlx_cpu_has_kernel((rlx_op)op)) {
            fprintf(stderr, "%s: no CPU kernel (src/backends/cpu/kernels_*.c registration)\n", i->name);
            bad++;
        }
        if ((i->flags & RLX_OPF_FUSED) && (!i->decompose || !rlx_has_decomposition((rlx_op)op))) {
            fprintf(stderr, "%s: a fused op without a decomposition (src/ir/decompose.c)\n", i->name);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Every chain instruction, alone and as a one-instruction elementwise
 * chain, computes the same on the CPU. */
static void test_chain_ops_run_in_a_chain(void **state)
{
    (void)state;
    int bad = 0, tried = 0;
    for (int op = 0; op < RLX_OP_COUNT; op++) {
        const rlx_op_info *i = rlx_op_info_of((rlx_op)op);
        if (!i || !(i->flags & RLX_OPF_CHAIN))
            continue;
        int n_in = i->kind == RLX_KIND_BINARY ? 2 : 1;
        ot_result res[2];
        for (int form = 0; form < 2; form++) {
            rlx_graph *g = rlx_graph_new();
            rlx_node_data p;
            memset(&p, 0, sizeof p);
            p.n_in = n_in;
            for (int k = 0; k < n_in; k++)
                p.in[k] = rlx_input(g, k ? "b" : "a", RLX_F32, 2, (int64_t[]){3, 5});
            if (form == 0) {
                p.op = (rlx_op)op;
            } else {
                p.op = RLX_OP_ELEMENTWISE_CHAIN;
                p.attrs.ew.n_ops = 1;
                p.attrs.ew.code[0] = (uint8_t)op;
                p.attrs.ew.code[1] = 0;
                p.attrs.ew.code[2] = (uint8_t)(n_in - 1);
            }
            rlx_node y = rlx_graph_add(g, &p);
            assert_true(y >= 0);
            assert_int_equal(rlx_output(g, "y", y), RLX_OK);
            rlx_options o;
            rlx_options_init(&o);
            o.ignore_env = 1;
            o.no_fusion = 1;
            o.threads = 1;
            assert_int_equal(ot_run(g, &o, 11, 1.0, 4, NULL, "y", &res[form]), RLX_OK);
            rlx_graph_free(g);
        }
        char what[96];
        snprintf(what, sizeof what, "%s alone vs in a chain", i->name);
        if (!ot_close(what, &res[1], &res[0], 1e-5, 1e-6))
            bad++;
        tried++;
        ot_result_free(&res[0]);
        ot_result_free(&res[1]);
    }
    assert_true(tried > 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_has_a_row),
        cmocka_unit_test(test_traits),
        cmocka_unit_test(test_kernel_and_definition),
        cmocka_unit_test(test_chain_ops_run_in_a_chain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
