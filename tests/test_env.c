/* test_env.c - settings through one door (src/runtime/env.c): the one
 * boolean parser, rlx_options.ignore_env keeping every RLX_* variable out,
 * a variable set in the environment reaching the options, the backend
 * settings and a compiled session, and the library leaving the process's
 * environment as it found it.  setenv here changes this test's own
 * environment only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rlx.h"
#include "runtime/runtime.h"

/* Every RLX_* variable the tests below set, cleared before each test. */
static const char *const vars[] = {
    "RLX_VERBOSE",          "RLX_DISPATCH_REPORT",    "RLX_DISABLE_FUSION",  "RLX_DISABLE_AMP",
    "RLX_DISABLE_SIMPLIFY", "RLX_DISABLE_CUDA_GRAPH", "RLX_ARENA_NO_REUSE",  "RLX_THREADS",
    "RLX_MAX_ARENA",        "RLX_MAX_BUFFER_BYTES",   "RLX_NO_BLAS",         "RLX_PROFILE",
    "RLX_CUDA_TF32",        "RLX_CUDA_F32_GEMM",      "RLX_CUDA_MM_PATH",    "RLX_CUDA_EW_LIN",
    "RLX_CUDA_JIT",         "RLX_CUDA_AUTOTUNE",      "RLX_CUDA_WGMMA_BN",   "RLX_CUDA_PROFILE_RUN",
    "RLX_CUDA_NHWC",        "RLX_CUDA_CONV_PATH",     "RLX_CUDA_ATTN_WARPS", "RLX_CUDA_NO_CUDNN",
    "RLX_CUDA_NO_PROLOGUE", "RLX_CPU_GEMM",           "RLX_CPU_NO_AVX512",
};

static int clear_vars(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

static void test_bool_parser(void **state)
{
    (void)state;
    const char *on[] = {"1", "true", "TRUE", "True", "yes", "YES", "on", "On", "2", "-1", "10"};
    const char *off[] = {"0", "false", "FALSE", "no", "No", "off", "OFF", "00"};
    const char *bad[] = {"maybe", "abc", "1x", "x1", " ", "yes please", "0.5", "t", "y", "enable"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++)
        assert_int_equal(rlx_parse_bool(on[i]), 1);
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        assert_int_equal(rlx_parse_bool(off[i]), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(rlx_parse_bool(bad[i]), -2);
    assert_int_equal(rlx_parse_bool(NULL), -1);
    assert_int_equal(rlx_parse_bool(""), -1);
}

/* A switch set to a false word turns the behaviour off (RLX_NO_BLAS=0 used
 * to mean "set, so on"); a true word turns it on; garbage keeps the
 * option's value. */
static void test_switch_values(void **state)
{
    (void)state;
    rlx_options o;
    rlx_backend_settings s;
    const char *off[] = {"0", "false", "no", "off", "OFF"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++) {
        setenv("RLX_NO_BLAS", off[i], 1);
        setenv("RLX_DISABLE_FUSION", off[i], 1);
        rlx_options_init(&o);
        o.no_fusion = 1; /* a set variable overrides the option either way */
        rlx_options_apply_env(&o);
        rlx_backend_settings_from_env(&s, &o);
        assert_int_equal(s.no_blas, 0);
        assert_int_equal(o.no_fusion, 0);
    }
    const char *on[] = {"1", "true", "yes", "on", "ON"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        setenv("RLX_NO_BLAS", on[i], 1);
        setenv("RLX_DISABLE_FUSION", on[i], 1);
        rlx_options_init(&o);
        rlx_options_apply_env(&o);
        rlx_backend_settings_from_env(&s, &o);
        assert_int_equal(s.no_blas, 1);
        assert_int_equal(o.no_fusion, 1);
    }
    /* garbage: the default (or the option as given) stays, with a note */
    setenv("RLX_NO_BLAS", "maybe", 1);
    setenv("RLX_DISABLE_FUSION", "perhaps", 1);
    rlx_options_init(&o);
    rlx_options_apply_env(&o);
    rlx_backend_settings_from_env(&s, &o);
    assert_int_equal(s.no_blas, 0);
    assert_int_equal(o.no_fusion, 0);
    rlx_options_init(&o);
    o.no_fusion = 1;
    rlx_options_apply_env(&o);
    assert_int_equal(o.no_fusion, 1);
    /* RLX_VERBOSE is a level: 2 stays 2 */
    setenv("RLX_VERBOSE", "2", 1);
    rlx_options_init(&o);
    rlx_options_apply_env(&o);
    assert_int_equal(o.verbose, 2);
    setenv("RLX_VERBOSE", "off", 1);
    rlx_options_init(&o);
    o.verbose = 1;
    rlx_options_apply_env(&o);
    assert_int_equal(o.verbose, 0);
    unsetenv("RLX_VERBOSE");
}

/* Every variable set; each reaches its option or backend setting. */
static void set_everything(void)
{
    setenv("RLX_DISABLE_FUSION", "1", 1);
    setenv("RLX_DISABLE_AMP", "yes", 1);
    setenv("RLX_DISABLE_SIMPLIFY", "on", 1);
    setenv("RLX_DISABLE_CUDA_GRAPH", "true", 1);
    setenv("RLX_ARENA_NO_REUSE", "1", 1);
    setenv("RLX_THREADS", "3", 1);
    setenv("RLX_MAX_ARENA", "2G", 1);
    setenv("RLX_MAX_BUFFER_BYTES", "123456", 1);
    setenv("RLX_NO_BLAS", "1", 1);
    setenv("RLX_CPU_GEMM", "openblas", 1);
    setenv("RLX_PROFILE", "0", 1);
    setenv("RLX_CPU_NO_AVX512", "1", 1);
    setenv("RLX_CUDA_TF32", "1", 1);
    setenv("RLX_CUDA_F32_GEMM", "split", 1);
    setenv("RLX_CUDA_MM_PATH", "wgmma", 1);
    setenv("RLX_CUDA_EW_LIN", "0", 1);
    setenv("RLX_CUDA_JIT", "0", 1);
    setenv("RLX_CUDA_AUTOTUNE", "off", 1);
    setenv("RLX_CUDA_WGMMA_BN", "128", 1);
    setenv("RLX_CUDA_PROFILE_RUN", "25", 1);
    setenv("RLX_CUDA_NHWC", "0", 1);
    setenv("RLX_CUDA_CONV_PATH", "graph", 1);
    setenv("RLX_CUDA_ATTN_WARPS", "8", 1);
    setenv("RLX_CUDA_NO_CUDNN", "1", 1);
    setenv("RLX_CUDA_NO_PROLOGUE", "yes", 1);
}

static void test_env_reaches_options(void **state)
{
    (void)state;
    set_everything();
    rlx_options o;
    rlx_options_init(&o);
    rlx_options_apply_env(&o);
    assert_int_equal(o.no_fusion, 1);
    assert_int_equal(o.no_amp, 1);
    assert_int_equal(o.no_simplify, 1);
    assert_int_equal(o.no_preencode, 1);
    assert_int_equal(o.no_reuse, 1);
    assert_int_equal(o.threads, 3);
    assert_true(o.max_arena_bytes == (size_t)2 << 30);
    rlx_backend_settings s;
    rlx_backend_settings_from_env(&s, &o);
    assert_int_equal(s.no_preencode, 1);
    assert_true(s.max_buffer_bytes == 123456);
    assert_int_equal(s.no_blas, 1);
    assert_int_equal(s.cpu_gemm, RLX_CPU_GEMM_OPENBLAS);
    assert_int_equal(s.profile, 0);
    assert_int_equal(s.cpu_no_avx512, 1);
    assert_int_equal(s.cuda_tf32, 1);
    assert_int_equal(s.cuda_f32_gemm, RLX_CUDA_F32_GEMM_SPLIT);
    assert_int_equal(s.cuda_mm_path, RLX_CUDA_MM_WGMMA);
    assert_int_equal(s.cuda_ew_lin, 0);
    assert_int_equal(s.cuda_jit, 0);
    assert_int_equal(s.cuda_autotune, 0);
    assert_int_equal(s.cuda_wgmma_bn, 128);
    assert_int_equal(s.cuda_wgmma_split, -1);
    assert_true(s.cuda_profile_run == 25);
    assert_int_equal(s.cuda_nhwc, 0);
    assert_int_equal(s.cuda_conv_path, RLX_CUDA_CONV_GRAPH);
    assert_int_equal(s.cuda_attn_warps, 8);
    assert_int_equal(s.cuda_no_cudnn, 1);
    assert_int_equal(s.cuda_no_prologue, 1);
}

static void test_ignore_env(void **state)
{
    (void)state;
    set_everything();
    rlx_options o, before;
    rlx_options_init(&o);
    o.ignore_env = 1;
    before = o;
    rlx_options_apply_env(&o);
    assert_memory_equal(&o, &before, sizeof o);
    rlx_backend_settings s, defaults;
    rlx_backend_settings_from_env(&s, &o);
    rlx_backend_settings_init(&defaults);
    assert_memory_equal(&s, &defaults, sizeof s);
}

/* A small matmul graph, compiled on the CPU. */
static rlx_session *compile_matmul(int ignore_env)
{
    rlx_graph *g = rlx_graph_new();
    int64_t da[2] = {64, 64};
    rlx_node a = rlx_input(g, "a", RLX_F32, 2, da), b = rlx_input(g, "b", RLX_F32, 2, da);
    rlx_output(g, "y", rlx_relu(g, rlx_matmul(g, a, b, 0, 0)));
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = ignore_env;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_graph_free(g);
    return s;
}

static void run_matmul(rlx_session *s)
{
    static float a[64 * 64], b[64 * 64], y[64 * 64];
    for (int i = 0; i < 64 * 64; i++) {
        a[i] = (float)(i % 7) - 3.0f;
        b[i] = (float)(i % 5) * 0.25f;
    }
    assert_int_equal(rlx_session_set_input(s, "a", a, sizeof a), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "b", b, sizeof b), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
}

/* Through rlx_compile: the session's options and settings (and the run
 * context its kernels see) follow the environment, or ignore it. */
static void test_compile(void **state)
{
    (void)state;
    setenv("RLX_DISABLE_FUSION", "1", 1);
    setenv("RLX_NO_BLAS", "1", 1);
    setenv("RLX_THREADS", "1", 1);
    rlx_session *s = compile_matmul(0);
    assert_int_equal(s->opts.no_fusion, 1);
    assert_int_equal(s->opts.threads, 1);
    assert_int_equal(s->settings.no_blas, 1);
    assert_ptr_equal(s->run_ctx.settings, &s->settings);
    run_matmul(s);
    rlx_session_free(s);

    setenv("RLX_THREADS", "1000", 1);
    s = compile_matmul(1);
    assert_int_equal(s->opts.no_fusion, 0);
    assert_true(s->opts.threads != 1000);
    assert_int_equal(s->settings.no_blas, 0);
    run_matmul(s);
    rlx_session_free(s);

    setenv("RLX_NO_BLAS", "0", 1);
    unsetenv("RLX_THREADS");
    s = compile_matmul(0);
    assert_int_equal(s->settings.no_blas, 0);
    rlx_session_free(s);
}

/* Loading OpenBLAS (a GEMM large enough to go to BLAS) leaves the
 * process's environment as it was: OPENBLAS_CORETYPE unset stays unset,
 * a user's value stays the user's. */
static void test_environment_untouched(void **state)
{
    (void)state;
    char *user = getenv("OPENBLAS_CORETYPE") ? strdup(getenv("OPENBLAS_CORETYPE")) : NULL;
    unsetenv("OPENBLAS_CORETYPE");
    rlx_graph *g = rlx_graph_new();
    int64_t d[2] = {256, 256};
    rlx_output(g, "y", rlx_matmul(g, rlx_input(g, "a", RLX_F32, 2, d), rlx_input(g, "b", RLX_F32, 2, d), 0, 0));
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    float *a = calloc(256 * 256, sizeof(float)), *y = calloc(256 * 256, sizeof(float));
    assert_non_null(a);
    assert_non_null(y);
    assert_int_equal(rlx_session_set_input(s, "a", a, 256 * 256 * sizeof(float)), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "b", a, 256 * 256 * sizeof(float)), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, 256 * 256 * sizeof(float)), RLX_OK);
    assert_null(getenv("OPENBLAS_CORETYPE"));
    assert_true(strlen(rlx_cpu_gemm_info()) > 0);
    assert_null(getenv("OPENBLAS_CORETYPE"));
    rlx_session_free(s);
    rlx_graph_free(g);
    free(a);
    free(y);
    if (user) {
        setenv("OPENBLAS_CORETYPE", user, 1);
        free(user);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        /* first: OpenBLAS loads once per process, here */
        cmocka_unit_test_setup(test_environment_untouched, clear_vars),
        cmocka_unit_test_setup(test_bool_parser, clear_vars),
        cmocka_unit_test_setup(test_switch_values, clear_vars),
        cmocka_unit_test_setup(test_env_reaches_options, clear_vars),
        cmocka_unit_test_setup(test_ignore_env, clear_vars),
        cmocka_unit_test_setup(test_compile, clear_vars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
