/* test_switches.c - every optional compile stage can be turned off, by
 * compile option and by environment variable, and the workloads (mlp at a
 * small batch, encoder at a short sequence, decoder-small) give the same
 * outputs with each stage off as with everything on; mixed precision on
 * stays within bf16 tolerance of f32.  Prints the node counts before and
 * after fusion of each workload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "models/workloads.h"
#include "opt_testutil.h"

typedef struct workload {
    const char *name, *out;
    rlx_graph *(*build)(void);
} workload;

static rlx_graph *build_mlp(void) { return rlx_workload_mlp(2, RLX_F32); }
static rlx_graph *build_encoder(void)
{
    rlx_encoder_config c = rlx_encoder_minilm(1, 8);
    return rlx_workload_encoder(&c);
}
static rlx_graph *build_decoder(void)
{
    rlx_decoder_config c = rlx_decoder_small(8);
    return rlx_workload_decoder(&c);
}

static const workload workloads[] = {
    {"mlp", "y", build_mlp},
    {"encoder", "hidden", build_encoder},
    {"decoder-small", "logits", build_decoder},
};

enum { SW_FUSION, SW_INPLACE, SW_PREENCODE, SW_SIMPLIFY, SW_REUSE, SW_LAYOUT, SW_COUNT };
static const char *sw_env[SW_COUNT] = {"RLX_DISABLE_FUSION",   "RLX_DISABLE_INPLACE", "RLX_DISABLE_CUDA_GRAPH",
                                       "RLX_DISABLE_SIMPLIFY", "RLX_ARENA_NO_REUSE",  "RLX_DISABLE_LAYOUT"};

static void set_switch(rlx_options *o, int sw)
{
    switch (sw) {
    case SW_FUSION: o->no_fusion = 1; break;
    case SW_INPLACE: o->no_inplace = 1; break;
    case SW_PREENCODE: o->no_preencode = 1; break;
    case SW_SIMPLIFY: o->no_simplify = 1; break;
    case SW_REUSE: o->no_reuse = 1; break;
    case SW_LAYOUT: o->no_layout = 1; break;
    }
}

/* The workloads' seeded weights, made once per workload and copied into
 * each session (making them is most of this test's time). */
typedef struct cached_param {
    char *name;
    void *data;
    size_t bytes;
} cached_param;
static cached_param cache[512];
static int n_cache;

static void cache_clear(void)
{
    for (int i = 0; i < n_cache; i++) {
        free(cache[i].name);
        free(cache[i].data);
    }
    n_cache = 0;
}

static rlx_status cached_init(rlx_session *s, uint64_t seed)
{
    if (!n_cache) /* f32 workloads: the values rlx_workload_init_params gives */
        for (int i = 0; i < rlx_session_count(s, 1) && n_cache < 512; i++) {
            rlx_tensor_info info;
            rlx_session_info(s, 1, i, &info);
            cached_param *c = &cache[n_cache++];
            c->name = strdup(info.name);
            c->bytes = info.bytes;
            c->data = malloc(info.bytes + 1);
            rlx_workload_param_f32(info.name, i, info.bytes / sizeof(float), seed, c->data);
        }
    for (int i = 0; i < n_cache; i++) {
        rlx_status st = rlx_session_set_param(s, cache[i].name, cache[i].data, cache[i].bytes);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

static void run_workload(const workload *w)
{
    cache_clear();
    rlx_graph *g = w->build();
    assert_non_null(g);
    rlx_options base;
    rlx_options_init(&base);
    base.ignore_env = 1;
    ot_result ref;
    assert_int_equal(ot_run(g, &base, 5, 0, 1000, cached_init, w->out, &ref), RLX_OK);
    printf("%s: %d nodes; after simplify %d; after fusion %d; final %d\n", w->name, ref.stats.nodes_in,
           ref.stats.nodes_after_simplify, ref.stats.nodes_after_fusion, ref.stats.nodes_final);
    assert_true(ref.stats.nodes_after_fusion < ref.stats.nodes_after_simplify);
    for (int sw = 0; sw < SW_COUNT; sw++)
        for (int by_env = 0; by_env < 2; by_env++) {
            rlx_options o = base;
            if (by_env) {
                o.ignore_env = 0;
                setenv(sw_env[sw], "1", 1);
            } else {
                set_switch(&o, sw);
            }
            ot_result got;
            rlx_status st = ot_run(g, &o, 5, 0, 1000, cached_init, w->out, &got);
            if (by_env)
                unsetenv(sw_env[sw]);
            assert_int_equal(st, RLX_OK);
            char what[128];
            snprintf(what, sizeof what, "%s with %s off (%s)", w->name, sw_env[sw], by_env ? "env" : "option");
            assert_true(ot_close(what, &got, &ref, 1e-4, 1e-5));
            if (sw == SW_FUSION) {
                assert_int_equal(got.stats.nodes_after_fusion, got.stats.nodes_after_simplify);
                assert_int_equal(got.stats.nodes_after_simplify, ref.stats.nodes_after_simplify);
            }
            if (sw == SW_SIMPLIFY)
                assert_int_equal(got.stats.nodes_after_simplify, got.stats.nodes_in);
            ot_result_free(&got);
        }
    /* mixed precision: on (bf16) is near f32; off (option or env) is f32 */
    rlx_options o = base;
    o.precision = RLX_PRECISION_BF16;
    ot_result got;
    assert_int_equal(ot_run(g, &o, 5, 0, 1000, cached_init, w->out, &got), RLX_OK);
    char what[128];
    snprintf(what, sizeof what, "%s in bf16", w->name);
    assert_true(ot_close(what, &got, &ref, 5e-2, 3e-2));
    ot_result_free(&got);
    o.no_amp = 1;
    assert_int_equal(ot_run(g, &o, 5, 0, 1000, cached_init, w->out, &got), RLX_OK);
    assert_true(ot_close("no_amp", &got, &ref, 0, 0));
    ot_result_free(&got);
    o.no_amp = 0;
    o.ignore_env = 0;
    setenv("RLX_DISABLE_AMP", "1", 1);
    rlx_status st = ot_run(g, &o, 5, 0, 1000, cached_init, w->out, &got);
    unsetenv("RLX_DISABLE_AMP");
    assert_int_equal(st, RLX_OK);
    assert_true(ot_close("RLX_DISABLE_AMP", &got, &ref, 0, 0));
    ot_result_free(&got);
    ot_result_free(&ref);
    rlx_graph_free(g);
    cache_clear();
}

static void test_mlp(void **state)
{
    (void)state;
    run_workload(&workloads[0]);
}
static void test_encoder(void **state)
{
    (void)state;
    run_workload(&workloads[1]);
}
static void test_decoder_small(void **state)
{
    (void)state;
    run_workload(&workloads[2]);
}

/* The GPU-sized decoder (Qwen3-0.6B shape, bf16) builds, and fuses into one
 * attention block and one SwiGLU per layer (graph only: nothing is run). */
static void test_decoder_config(void **state)
{
    (void)state;
    rlx_decoder_config c = rlx_decoder_qwen3_06b(16);
    rlx_graph *g = rlx_workload_decoder(&c);
    assert_non_null(g);
    rlx_opt_stats st;
    memset(&st, 0, sizeof st);
    rlx_pass_ctx ctx = ot_cpu_ctx(&st);
    rlx_graph *f = rlx_pass_fuse(g, &ctx);
    assert_non_null(f);
    assert_int_equal(ot_count(f, RLX_OP_ATTENTION_BLOCK), 28);
    assert_int_equal(ot_count(f, RLX_OP_SWIGLU), 28);
    for (int i = 0; i < f->n_nodes; i++)
        if (f->nodes[i].op == RLX_OP_ATTENTION_BLOCK) {
            assert_int_equal(f->nodes[i].attrs.attn_block.heads, 16);
            assert_int_equal(f->nodes[i].attrs.attn_block.kv_heads, 8);
            assert_int_equal(f->nodes[i].attrs.attn_block.head_dim, 128);
            assert_int_equal(f->nodes[i].dtype, RLX_BF16);
        }
    printf("decoder (Qwen3-0.6B shape): %d nodes; after fusion %d\n", g->n_nodes, f->n_nodes);
    rlx_graph_free(f);
    rlx_graph_free(g);
}

/* `rlx run --report` prints the dispatch report for a workload, and
 * `rlx dump --dot` shows the fused graph. */
static void test_cli_report(void **state)
{
    (void)state;
    const char *cli = getenv("RLX_CLI");
    if (!cli) {
        skip();
        return;
    }
    char cmd[1024], line[512];
    snprintf(cmd, sizeof cmd, "'%s' run decoder-small --seq 4 --report 2>&1", cli);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int saw_report = 0, saw_block = 0, saw_fusion = 0;
    while (fgets(line, sizeof line, p)) {
        saw_report |= strstr(line, "dispatch report") != NULL;
        saw_block |= strstr(line, "attention_block") != NULL;
        saw_fusion |= strstr(line, "fusion: 302 -> 194 nodes") != NULL;
    }
    assert_int_equal(pclose(p), 0);
    assert_true(saw_report && saw_block && saw_fusion);
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(cmd, sizeof cmd, "'%s' dump --dot decoder-small --seq 4 --force -o '%s/rlx-opt-dot' >/dev/null 2>&1", cli,
             tmp);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "grep -q attention_block '%s/rlx-opt-dot.after.dot' && ! grep -q attention_block "
             "'%s/rlx-opt-dot.before.dot'",
             tmp, tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    /* start from a clean environment for the switches under test */
    for (int sw = 0; sw < SW_COUNT; sw++)
        unsetenv(sw_env[sw]);
    unsetenv("RLX_DISABLE_AMP");
    unsetenv("RLX_NO_LAYOUT");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),           cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_decoder_small), cmocka_unit_test(test_decoder_config),
        cmocka_unit_test(test_cli_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
