/* Allocation failures: every heap allocation of the library goes through
 * one place (src/core/error.c), which a test can make fail.  For each
 * workload below (mlp, the encoder, a small decoder and a small conv net
 * through the C API, an ONNX model through the importer) the test counts the allocations of one whole pass (build,
 * compile, set, run, read, free), then repeats the pass once for every N,
 * failing the Nth allocation.  Each pass must either succeed with the same
 * outputs as the unfailed one, or fail with an out-of-memory status and a
 * message; never crash.  Under AddressSanitizer (the CI's second build) the
 * leak check at exit proves each failed pass freed everything.
 *
 * RLX_ALLOC_STRIDE=K tries every Kth N only (1 = every N, the default);
 * RLX_ALLOC_MAX=M stops after M passes per workload; RLX_ALLOC_ONLY=N tries
 * that N alone (break on rlx_alloc_failure_point in a debugger);
 * RLX_ALLOC_ONNX=MODEL.onnx:X.npy another ONNX model (input x, output y). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/error.h"
#include "models/workloads.h"
#include "rlx.h"

/* One pass: the outputs (malloc'd by the test, not counted) or a status. */
typedef rlx_status (*pass_fn)(float **out, size_t *n);

static rlx_options quiet_options(void)
{
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    o.threads = 1;
    return o;
}

/* Compiles g, sets params (seeded) and every input, runs, copies the first
 * output out; frees the session and the graph. */
static rlx_status compile_and_run(rlx_graph *g, int init_params, float **out, size_t *n)
{
    if (!g)
        return RLX_ERR_OUT_OF_MEMORY;
    rlx_options o = quiet_options();
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    rlx_graph_free(g);
    if (st != RLX_OK)
        return st;
    if (init_params && (st = rlx_workload_init_params(s, 3)) != RLX_OK)
        goto done;
    for (int i = 0; !init_params && i < rlx_session_count(s, 1); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 1, i, &info);
        float *buf = malloc(info.bytes + 4);
        assert_non_null(buf);
        for (size_t k = 0; k < info.bytes / 4; k++)
            buf[k] = (float)((int)(k % 13) - 6) * 0.01f;
        st = rlx_session_set_param(s, info.name, buf, info.bytes);
        free(buf);
        if (st != RLX_OK)
            goto done;
    }
    for (int i = 0; i < rlx_session_count(s, 0); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 0, i, &info);
        unsigned char *buf = calloc(1, info.bytes + 1);
        assert_non_null(buf);
        for (size_t k = 0; k < info.bytes; k++)
            buf[k] = info.dtype == RLX_I64 ? (k % 8 == 0 ? (unsigned char)(k / 8 % 50) : 0)
                                           : (unsigned char)(k % 7 == 3 ? 0x3f : 0);
        st = rlx_session_set_input(s, info.name, buf, info.bytes);
        free(buf);
        if (st != RLX_OK)
            goto done;
    }
    if ((st = rlx_session_run(s)) != RLX_OK)
        goto done;
    rlx_tensor_info info;
    rlx_session_info(s, 2, 0, &info);
    *n = info.bytes / sizeof(float);
    *out = malloc(info.bytes + 1);
    assert_non_null(*out);
    st = rlx_session_get_output(s, info.name, *out, info.bytes);
done:
    rlx_session_free(s);
    return st;
}

static rlx_status pass_mlp(float **out, size_t *n)
{
    /* weights from a cheap pattern: 64 MiB of seeded normal values per pass
     * would make hundreds of passes slow (the encoder takes that path) */
    return compile_and_run(rlx_workload_mlp(2, RLX_F32), 0, out, n);
}

static rlx_status pass_encoder(float **out, size_t *n)
{
    rlx_encoder_config c = rlx_encoder_minilm(1, 8); /* all six layers, narrower */
    c.hidden = 64;
    c.heads = 4;
    c.ffn = 128;
    c.vocab = 100;
    c.max_pos = 16;
    return compile_and_run(rlx_workload_encoder(&c), 1, out, n);
}

static rlx_status pass_decoder(float **out, size_t *n)
{
    rlx_decoder_config c = rlx_decoder_small(8);
    c.layers = 2;
    c.hidden = 64;
    c.heads = 4;
    c.kv_heads = 2;
    c.head_dim = 16;
    c.ffn = 128;
    c.vocab = 100;
    return compile_and_run(rlx_workload_decoder(&c), 1, out, n);
}

/* A small convolution net with constant weights: conv + batch norm (folded
 * at compile time), ReLU, max pool, conv, global pooling. */
static rlx_status pass_convnet(float **out, size_t *n)
{
    rlx_graph *g = rlx_graph_new();
    if (!g)
        return RLX_ERR_OUT_OF_MEMORY;
    static float w1[8 * 3 * 3 * 3], w2[4 * 8 * 3 * 3], gamma[8], beta[8], mean[8], var[8];
    for (size_t i = 0; i < sizeof w1 / sizeof w1[0]; i++)
        w1[i] = (float)((int)(i % 7) - 3) * 0.1f;
    for (size_t i = 0; i < sizeof w2 / sizeof w2[0]; i++)
        w2[i] = (float)((int)(i % 5) - 2) * 0.1f;
    for (int i = 0; i < 8; i++) {
        gamma[i] = 1.0f + 0.1f * (float)i;
        beta[i] = 0.05f * (float)i;
        mean[i] = 0.01f * (float)i;
        var[i] = 1.0f + 0.2f * (float)i;
    }
    rlx_conv_params cp;
    rlx_conv_params_init(&cp);
    cp.pads[0] = cp.pads[1] = cp.pads[2] = cp.pads[3] = 1;
    rlx_pool_params pp;
    rlx_pool_params_init(&pp, 2);
    int64_t c8[1] = {8};
    rlx_node x = rlx_input(g, "x", RLX_F32, 4, (int64_t[]){1, 3, 8, 8});
    rlx_node h = rlx_conv(g, x, rlx_constant(g, RLX_F32, 4, (int64_t[]){8, 3, 3, 3}, w1, sizeof w1), -1, &cp);
    h = rlx_batch_norm(
        g, h, rlx_constant(g, RLX_F32, 1, c8, gamma, sizeof gamma), rlx_constant(g, RLX_F32, 1, c8, beta, sizeof beta),
        rlx_constant(g, RLX_F32, 1, c8, mean, sizeof mean), rlx_constant(g, RLX_F32, 1, c8, var, sizeof var), 1e-5);
    h = rlx_max_pool(g, rlx_relu(g, h), &pp);
    h = rlx_conv(g, h, rlx_constant(g, RLX_F32, 4, (int64_t[]){4, 8, 3, 3}, w2, sizeof w2), -1, &cp);
    rlx_output(g, "y", rlx_global_avg_pool(g, rlx_relu(g, h)));
    return compile_and_run(g, 0, out, n);
}

static char model_path[1024], input_path[1024], out_dir[1024];

/* An ONNX model through the importer, the .npy reader and writer, and the
 * shape-keyed model cache. */
static rlx_status pass_onnx(float **out, size_t *n)
{
    rlx_dtype t;
    int nd;
    int64_t dims[RLX_MAX_DIMS];
    void *x = NULL;
    size_t xb;
    rlx_status st = rlx_npy_read(input_path, &t, &nd, dims, &x, &xb);
    if (st != RLX_OK)
        return st;
    rlx_options o = quiet_options();
    rlx_model *m = NULL;
    rlx_session *s = NULL;
    rlx_onnx_binding b;
    memset(&b, 0, sizeof b);
    b.name = "x";
    b.ndim = nd;
    memcpy(b.dims, dims, sizeof dims);
    if ((st = rlx_model_load_onnx(model_path, &o, &m)) != RLX_OK || (st = rlx_model_session(m, &b, 1, &s)) != RLX_OK ||
        (st = rlx_session_set_input(s, "x", x, xb)) != RLX_OK || (st = rlx_session_run(s)) != RLX_OK)
        goto done;
    rlx_tensor_info info;
    if ((st = rlx_session_find(s, 2, "y", &info)) != RLX_OK)
        goto done;
    *n = info.bytes / sizeof(float);
    *out = malloc(info.bytes + 1);
    assert_non_null(*out);
    if ((st = rlx_session_get_output(s, "y", *out, info.bytes)) != RLX_OK)
        goto done;
    char path[1100];
    snprintf(path, sizeof path, "%s/y.npy", out_dir);
    unlink(path);
    st = rlx_npy_write(path, info.dtype, info.ndim, info.dims, *out, info.bytes);
    /* written whole or not at all: no file and no temporary left on failure */
    if (st != RLX_OK)
        assert_int_not_equal(access(path, F_OK), 0);
    unlink(path);
    /* and the importer alone, by path */
    if (st == RLX_OK) {
        rlx_onnx_options oo;
        rlx_onnx_options_init(&oo);
        oo.default_dim = 2;
        rlx_graph *g = NULL;
        st = rlx_onnx_import(model_path, &oo, &g);
        rlx_graph_free(g);
    }
done:
    rlx_model_free(m);
    free(x);
    return st;
}

static long env_long(const char *name, long def)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : def;
}

static void leftover_check(void)
{
    /* no temporary file of the writer is left in out_dir */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A '%s')\"", out_dir);
    assert_int_equal(system(cmd), 0);
}

static void run_all(const char *what, pass_fn pass)
{
    float *ref = NULL;
    size_t ref_n = 0;
    rlx_alloc_fail_nth(0);
    rlx_status st0 = pass(&ref, &ref_n);
    if (st0 != RLX_OK)
        fail_msg("%s: the pass without failures: %s", what, rlx_last_error());
    long total = rlx_alloc_count();
    long stride = env_long("RLX_ALLOC_STRIDE", 1), max = env_long("RLX_ALLOC_MAX", 0);
    if (stride < 1)
        stride = 1;
    int failed = 0, ok = 0, tried = 0;
    long only = env_long("RLX_ALLOC_ONLY", 0); /* one N, to debug */
    for (long nth = only ? only : 1; nth <= (only ? only : total); nth += stride) {
        if (max && tried >= max)
            break;
        tried++;
        float *out = NULL;
        size_t n = 0;
        rlx_clear_error();
        rlx_alloc_fail_nth(nth);
        rlx_status st = pass(&out, &n);
        int reached = rlx_alloc_count() >= nth;
        rlx_alloc_fail_nth(0);
        if (st == RLX_OK) {
            /* the failure was absorbed (an optional buffer): same results */
            ok++;
            assert_int_equal(n, ref_n);
            if (memcmp(out, ref, n * sizeof(float)) != 0)
                fail_msg("%s: allocation %ld of %ld failed, the pass succeeded with other results", what, nth, total);
        } else {
            failed++;
            if (st != RLX_ERR_OUT_OF_MEMORY || !rlx_last_error()[0])
                fail_msg("%s: allocation %ld of %ld: status %s, message '%s'", what, nth, total, rlx_status_name(st),
                         rlx_last_error());
            assert_true(reached);
        }
        free(out);
    }
    printf("%s: %ld allocations per pass; %d passes with a failed allocation: %d failed cleanly, %d recovered\n", what,
           total, tried, failed, ok);
    free(ref);
}

static void test_mlp(void **state)
{
    (void)state;
    run_all("mlp", pass_mlp);
}

static void test_encoder(void **state)
{
    (void)state;
    run_all("encoder", pass_encoder);
}

static void test_decoder(void **state)
{
    (void)state;
    run_all("decoder", pass_decoder);
}

static void test_convnet(void **state)
{
    (void)state;
    run_all("convnet", pass_convnet);
}

static void test_onnx(void **state)
{
    (void)state;
    rlx_options o = quiet_options();
    rlx_model *m = NULL;
    if (rlx_model_load_onnx(model_path, &o, &m) == RLX_ERR_UNSUPPORTED) {
        skip();
        return;
    }
    rlx_model_free(m);
    run_all("onnx", pass_onnx);
    leftover_check();
}

/* The Llama-style attention layer that tests/onnx/make_models.py writes for
 * test_onnx_import (run before this one): the importer's folding and the
 * attention rewrites under failure.  Skipped when it is not there. */
static void test_onnx_attention(void **state)
{
    (void)state;
    char keep_model[1024], keep_input[1024];
    const char *bin = getenv("RLX_BINARY_DIR");
    snprintf(keep_model, sizeof keep_model, "%s", model_path);
    snprintf(keep_input, sizeof keep_input, "%s", input_path);
    snprintf(model_path, sizeof model_path, "%s/onnx_unit_models/llama_attention.onnx", bin ? bin : ".");
    snprintf(input_path, sizeof input_path, "%s/onnx_unit_models/llama_attention_x.npy", bin ? bin : ".");
    int have = access(model_path, R_OK) == 0 && access(input_path, R_OK) == 0;
#ifndef RLX_HAVE_ONNX
    have = 0;
#endif
    if (have)
        run_all("onnx attention", pass_onnx);
    else
        print_message("skipped: %s not found (test_onnx_import writes it)\n", model_path);
    snprintf(model_path, sizeof model_path, "%s", keep_model);
    snprintf(input_path, sizeof input_path, "%s", keep_input);
    if (!have)
        skip();
}

int main(void)
{
    const char *src = getenv("RLX_SOURCE_DIR") ? getenv("RLX_SOURCE_DIR") : ".";
    snprintf(model_path, sizeof model_path, "%s/tests/cli/data/tiny.onnx", src);
    snprintf(input_path, sizeof input_path, "%s/tests/cli/data/x.npy", src);
    /* RLX_ALLOC_ONNX=MODEL.onnx:X.npy tries another model (input x, output y) */
    const char *other = getenv("RLX_ALLOC_ONNX");
    if (other && strchr(other, ':')) {
        snprintf(model_path, sizeof model_path, "%.*s", (int)(strchr(other, ':') - other), other);
        snprintf(input_path, sizeof input_path, "%s", strchr(other, ':') + 1);
    }
    snprintf(out_dir, sizeof out_dir, "%s/rlx-alloc-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(out_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_onnx),    cmocka_unit_test(test_onnx_attention), cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_encoder), cmocka_unit_test(test_decoder),        cmocka_unit_test(test_convnet),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(out_dir);
    return rc;
}
