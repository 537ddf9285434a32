/* The ONNX importer on small models written at test time by
 * tests/onnx/make_models.py (Debian's python3-onnx), checked against numpy
 * outputs: initializers from raw_data and typed fields, external data,
 * shape chains folded with a symbolic batch, unsorted nodes, If, per-opset
 * Softmax; and the error paths: cycles, dangling names, unsupported ops
 * (one message for all), external data that leaves the folder or the
 * file, wrong raw sizes, huge dims, graphs nested thousands deep,
 * truncated and garbage files; a Llama-style attention layer fused whole;
 * sequences and optionals (malformed ones, inputs, outputs, value files).
 * Also the .npy reader/writer. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlx.h"

#ifdef RLX_HAVE_ONNX

static char dir[512];
static int have_models;

static int setup(void **state)
{
    (void)state;
    const char *src = getenv("RLX_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/onnx_unit_models", getenv("RLX_BINARY_DIR") ? getenv("RLX_BINARY_DIR") : "/tmp");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/onnx/make_models.py %s >/dev/null 2>&1", src ? src : ".", dir);
    have_models = system(cmd) == 0;
    if (!have_models)
        fprintf(stderr, "skipping model tests: /usr/bin/python3 with the onnx module is needed to write them\n");
    return 0;
}

#define NEED_MODELS()     \
    do {                  \
        if (!have_models) \
            skip();       \
    } while (0)

static const char *path(const char *name)
{
    static char p[4][700];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static rlx_status import(const char *name, const rlx_onnx_binding *b, int nb, rlx_graph **g)
{
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.bindings = b;
    o.n_bindings = nb;
    *g = NULL;
    return rlx_onnx_import(path(name), &o, g);
}

static void *npy(const char *name, size_t *bytes, int *ndim, int64_t *dims)
{
    rlx_dtype t;
    void *d = NULL;
    assert_int_equal(rlx_npy_read(path(name), &t, ndim, dims, &d, bytes), RLX_OK);
    assert_int_equal(t, RLX_F32);
    return d;
}

/* Compiles g, feeds inputs, returns the named output (malloc'd); the
 * compile's stats in *st where st is not NULL. */
static float *run1_stats(rlx_graph *g, int nin, const char **names, void **data, size_t *bytes, const char *out,
                         size_t *obytes, rlx_compile_stats *st)
{
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        fprintf(stderr, "compile: %s\n", rlx_last_error());
    assert_non_null(s);
    if (st)
        assert_int_equal(rlx_session_stats(s, st), RLX_OK);
    for (int i = 0; i < nin; i++)
        assert_int_equal(rlx_session_set_input(s, names[i], data[i], bytes[i]), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    rlx_tensor_info info;
    assert_int_equal(rlx_session_find(s, 2, out, &info), RLX_OK);
    float *y = malloc(info.bytes);
    assert_int_equal(rlx_session_get_output(s, out, y, info.bytes), RLX_OK);
    *obytes = info.bytes;
    rlx_session_free(s);
    return y;
}

static float *run1(rlx_graph *g, int nin, const char **names, void **data, size_t *bytes, const char *out,
                   size_t *obytes)
{
    return run1_stats(g, nin, names, data, bytes, out, obytes, NULL);
}

static void assert_close(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (fabsf(a[i] - b[i]) > 1e-5f + 1e-4f * fabsf(b[i]))
            fprintf(stderr, "[%zu] got %g expected %g\n", i, a[i], b[i]);
        assert_true(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]));
    }
}

static int msg_has(const char *w)
{
    const char *m = rlx_last_error();
    if (!strstr(m, w))
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", m, w);
    return strstr(m, w) != NULL;
}

/* STEM.onnx run on STEM_x.npy (input "x") matches STEM_y.npy (output "y");
 * the compile's stats in *st where st is not NULL. */
static void check_x_y(const char *stem, rlx_compile_stats *st)
{
    char name[3][128];
    snprintf(name[0], sizeof name[0], "%s.onnx", stem);
    snprintf(name[1], sizeof name[1], "%s_x.npy", stem);
    snprintf(name[2], sizeof name[2], "%s_y.npy", stem);
    rlx_graph *g;
    assert_int_equal(import(name[0], NULL, 0, &g), RLX_OK);
    size_t xb, yb, ob;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *x = npy(name[1], &xb, &nd, d);
    float *want = npy(name[2], &yb, &nd, d);
    const char *names[] = {"x"};
    float *y = run1_stats(g, 1, names, &x, &xb, "y", &ob, st);
    assert_int_equal(ob, yb);
    assert_close(y, want, yb / 4);
    free(x);
    free(want);
    free(y);
    rlx_graph_free(g);
}

static void test_mlp(void **state)
{
    (void)state;
    NEED_MODELS();
    check_x_y("mlp", NULL);
}

/* mlp.onnx imported from its file (the initializers' raw_data read from
 * the mapped file, not copied by protobuf-c), from a caller's buffer (read
 * in place, left as it was), and whole (a second, empty graph field, which
 * protobuf merges, makes the split refuse): the same outputs, bit for bit. */
static void test_split_weights(void **state)
{
    (void)state;
    NEED_MODELS();
    FILE *f = fopen(path("mlp.onnx"), "rb");
    assert_non_null(f);
    static unsigned char buf[1 << 16], keep[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 2, f);
    fclose(f);
    assert_true(n > 0 && n < sizeof buf - 2);
    memcpy(keep, buf, n);
    buf[n] = 0x3a; /* field 7 (graph), length 0 */
    buf[n + 1] = 0x00;
    rlx_graph *g[3];
    assert_int_equal(import("mlp.onnx", NULL, 0, &g[0]), RLX_OK);
    assert_int_equal(rlx_onnx_import_buffer(buf, n, dir, NULL, &g[1]), RLX_OK);
    assert_int_equal(rlx_onnx_import_buffer(buf, n + 2, dir, NULL, &g[2]), RLX_OK);
    assert_memory_equal(buf, keep, n);
    size_t xb, yb;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *x = npy("mlp_x.npy", &xb, &nd, d);
    const char *names[] = {"x"};
    float *y[3];
    for (int i = 0; i < 3; i++) {
        y[i] = run1(g[i], 1, names, &x, &xb, "y", &yb);
        rlx_graph_free(g[i]);
    }
    assert_memory_equal(y[0], y[1], yb);
    assert_memory_equal(y[0], y[2], yb);
    for (int i = 0; i < 3; i++)
        free(y[i]);
    free(x);
}

/* A Llama/Qwen3-style attention layer as exporters write it (q/k RMSNorm,
 * RoPE with rotate_half and folded tables, repeat_kv, a causal mask):
 * matches numpy and compiles to one attention block beside its leaves
 * (x, four weights, two gammas); also with q, k and v from one fused
 * projection. */
static void test_llama_attention(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_compile_stats st;
    check_x_y("llama_attention", &st);
    assert_int_equal(st.nodes_final, 8);
    /* q, k and v from one projection cut by Split: the same block */
    check_x_y("fused_qkv_attention", &st);
    assert_int_equal(st.nodes_final, 8);
    /* GPT-2's Conv1D projections (Gemm on flattened rows, reshaped back),
     * qkv cut by Split, a bool causal mask: the whole layer is one block
     * and its leaves (23 nodes without the unflatten rule) */
    check_x_y("gpt2_attention", &st);
    assert_int_equal(st.nodes_final, 10);
}

static void check_shape_chain(const char *model)
{
    rlx_graph *g;
    /* unbound symbolic dim: a clear error naming it */
    assert_int_equal(import(model, NULL, 0, &g), RLX_ERR_SHAPE);
    assert_true(msg_has("'N'"));
    rlx_onnx_binding b = {.name = "N", .ndim = -1, .dims = {5}};
    assert_int_equal(import(model, &b, 1, &g), RLX_OK);
    float x[60];
    for (int i = 0; i < 60; i++)
        x[i] = (float)i;
    const char *names[] = {"x"};
    void *data[] = {x};
    size_t bytes[] = {sizeof x}, ob;
    float *y = run1(g, 1, names, data, bytes, "y", &ob);
    assert_int_equal(ob, sizeof x);
    assert_close(y, x, 60);
    free(y);
    rlx_graph_free(g);
}

static void test_shape_chain(void **state)
{
    (void)state;
    NEED_MODELS();
    check_shape_chain("shape_chain.onnx");
}

static void test_unsorted(void **state)
{
    (void)state;
    NEED_MODELS();
    check_shape_chain("unsorted.onnx");
}

static void test_external(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_graph *g;
    assert_int_equal(import("external.onnx", NULL, 0, &g), RLX_OK);
    size_t xb, yb, ob;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *x = npy("mlp_x.npy", &xb, &nd, d);
    float *want = npy("external_y.npy", &yb, &nd, d);
    const char *names[] = {"x"};
    float *y = run1(g, 1, names, &x, &xb, "y", &ob);
    assert_close(y, want, yb / 4);
    free(x);
    free(want);
    free(y);
    rlx_graph_free(g);
    assert_int_equal(import("external_escape.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("leaves the model's folder"));
    assert_null(g);
    assert_int_equal(import("external_oob.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("beyond the end"));
}

static void test_errors(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_graph *g;
    assert_int_equal(import("cycle.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("cycle"));
    assert_int_equal(import("dangling.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("'nowhere'"));
    assert_int_equal(import("unsupported.onnx", NULL, 0, &g), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("FooOp") && msg_has("BarOp") && msg_has("'foo1'") && msg_has("'foo2'") && msg_has("'bar1'"));
    assert_true(msg_has("2 unsupported op types"));
    assert_int_equal(import("bad_raw.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("raw_data"));
    assert_int_equal(import("huge.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_null(g);
    assert_int_equal(import("no_such_file.onnx", NULL, 0, &g), RLX_ERR_IO);
    assert_int_equal(import("deep.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("nests messages"));
}

static void test_truncated(void **state)
{
    (void)state;
    NEED_MODELS();
    FILE *f = fopen(path("mlp.onnx"), "rb");
    assert_non_null(f);
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    /* every prefix: an error or (rarely) a smaller valid model, never a crash */
    int errors = 0;
    for (size_t k = 0; k < n; k += 7) {
        rlx_graph *g = NULL;
        if (rlx_onnx_import_buffer(buf, k, NULL, &o, &g) != RLX_OK) {
            errors++;
            assert_null(g);
            assert_true(strlen(rlx_last_error()) > 0);
        }
        rlx_graph_free(g);
    }
    assert_true(errors > 0);
    /* garbage bytes */
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    rlx_graph *g = NULL;
    assert_int_not_equal(rlx_onnx_import_buffer(buf, n, NULL, &o, &g), RLX_OK);
}

/* Inputs the fuzzer once crashed the importer with (tests/fuzz/regressions):
 * each must now import or fail cleanly. */
static void test_fuzz_regressions(void **state)
{
    (void)state;
    const char *src = getenv("RLX_SOURCE_DIR");
    if (!src)
        skip();
    char d[700];
    snprintf(d, sizeof d, "%s/tests/fuzz/regressions", src);
    DIR *dh = opendir(d);
    assert_non_null(dh);
    struct dirent *e;
    int n = 0;
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.default_dim = 2;
    while ((e = readdir(dh))) {
        if (e->d_name[0] == '.')
            continue;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", d, e->d_name);
        rlx_graph *g = NULL;
        rlx_status st = rlx_onnx_import(p, &o, &g);
        if (st != RLX_OK) {
            assert_null(g);
            assert_true(strlen(rlx_last_error()) > 0);
        }
        rlx_graph_free(g);
        n++;
    }
    closedir(dh);
    assert_true(n > 0);
}

static void test_if(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_graph *g;
    float x[3] = {1, -2, 3}, y[3];
    for (int c = 0; c < 2; c++) {
        /* the condition bound by value: the branch is inlined */
        uint8_t cv = (uint8_t)c;
        rlx_onnx_binding b = {.name = "c", .ndim = 0, .value = &cv, .bytes = 1};
        assert_int_equal(import("if.onnx", &b, 1, &g), RLX_OK);
        const char *names[] = {"x"};
        void *data[] = {x};
        size_t bytes[] = {sizeof x}, ob;
        float *out = run1(g, 1, names, data, bytes, "y", &ob);
        for (int i = 0; i < 3; i++)
            y[i] = c ? x[i] * x[i] : -x[i];
        assert_close(out, y, 3);
        free(out);
        rlx_graph_free(g);
        /* the condition as a run-time input: both branches and a select */
        assert_int_equal(import("if.onnx", NULL, 0, &g), RLX_OK);
        const char *names2[] = {"c", "x"};
        void *data2[] = {&cv, x};
        size_t bytes2[] = {1, sizeof x};
        out = run1(g, 2, names2, data2, bytes2, "y", &ob);
        assert_close(out, y, 3);
        free(out);
        rlx_graph_free(g);
    }
}

/* A branch that cannot be built for the inputs at hand (the one not taken)
 * asks for the condition's value instead of failing the import; bound by
 * value, the other branch is inlined. */
static void test_if_unfit_branch(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_graph *g;
    assert_int_equal(import("if_unfit.onnx", NULL, 0, &g), RLX_ERR_UNSUPPORTED);
    assert_non_null(strstr(rlx_last_error(), "must be known at import time"));
    assert_non_null(strstr(rlx_last_error(), "Reshape"));
    uint8_t cv = 1;
    rlx_onnx_binding b = {.name = "c", .ndim = 0, .value = &cv, .bytes = 1};
    assert_int_equal(import("if_unfit.onnx", &b, 1, &g), RLX_OK);
    float x[3] = {1, -2, 3}, y[3] = {1, 4, 9};
    const char *names[] = {"x"};
    void *data[] = {x};
    size_t bytes[] = {sizeof x}, ob;
    float *out = run1(g, 1, names, data, bytes, "y", &ob);
    assert_close(out, y, 3);
    free(out);
    rlx_graph_free(g);
}

/* An If with more outputs than a node used to hold (20; moonshine's merged
 * decoder has 33), the condition known at run time. */
static void test_if_many_outputs(void **state)
{
    (void)state;
    NEED_MODELS();
    float x[3] = {1, -2, 3}, y[3];
    for (int c = 0; c < 2; c++) {
        rlx_graph *g;
        assert_int_equal(import("if_many.onnx", NULL, 0, &g), RLX_OK);
        uint8_t cv = (uint8_t)c;
        const char *names[] = {"c", "x"};
        void *data[] = {&cv, x};
        size_t bytes[] = {1, sizeof x}, ob;
        for (int k = 0; k < 20; k += 19) {
            char out_name[16];
            snprintf(out_name, sizeof out_name, "y%d", k);
            float *out = run1(g, 2, names, data, bytes, out_name, &ob);
            for (int i = 0; i < 3; i++)
                y[i] = (c ? 1.0f : -1.0f) * x[i] * (float)k;
            assert_close(out, y, 3);
            free(out);
        }
        rlx_graph_free(g);
    }
}

static void test_loop_runtime_cond(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_graph *g;
    assert_int_equal(import("loop_cond.onnx", NULL, 0, &g), RLX_OK);
    const float starts[4] = {1, 3, 11, 0.25f};
    for (int k = 0; k < 4; k++)
        for (int c = 0; c < 2; c++) {
            float v = starts[k], want = v;
            for (int it = 0, go = c; it < 5 && go; it++) {
                want *= 2;
                go = want < 10;
            }
            uint8_t cv = (uint8_t)c;
            const char *names[] = {"c", "v0"};
            void *data[] = {&cv, &v};
            size_t bytes[] = {1, 4}, ob;
            float *out = run1(g, 2, names, data, bytes, "v", &ob);
            assert_close(out, &want, 1);
            free(out);
        }
    rlx_graph_free(g);
}

/* The conformance runner on cases with numpy references: all pass, and the
 * summary line has the documented form. */
static void test_runner(void **state)
{
    (void)state;
    NEED_MODELS();
    const char *cli = getenv("RLX_CLI");
    if (!cli)
        skip();
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "%s onnx-test %s/cases 2>&1", cli, dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[512], last[512] = "";
    int pass_lines = 0;
    while (fgets(line, sizeof line, p)) {
        fputs(line, stderr);
        if (!strncmp(line, "PASS ", 5))
            pass_lines++;
        snprintf(last, sizeof last, "%s", line);
    }
    int rc = pclose(p);
    assert_int_equal(rc, 0);
    assert_int_equal(pass_lines, 6);
    assert_string_equal(last, "6 passed, 0 failed, 0 skipped\n");
}

/* reshape_by_value.onnx: y = transpose(reshape(x [2, 6], s)).flatten(). */
static void reshape_by_value_ref(const float *x, int64_t a, int64_t b, float *y)
{
    for (int64_t i = 0; i < a; i++)
        for (int64_t j = 0; j < b; j++)
            y[j * a + i] = x[i * b + j];
}

/* An input bound by value at import: the session accepts that value (and
 * computes with it), refuses another with an error naming the input and
 * the value it was compiled for, and keeps working for the first value. */
static void test_bound_by_value(void **state)
{
    (void)state;
    NEED_MODELS();
    float x[12], y[12], want[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)i;
    int64_t s34[2] = {3, 4}, s43[2] = {4, 3}, s26[2] = {2, 6};
    rlx_onnx_binding b[2];
    memset(b, 0, sizeof b);
    b[0].name = "x";
    b[0].ndim = 2, b[0].dims[0] = 2, b[0].dims[1] = 6;
    b[1].name = "s";
    b[1].ndim = 1, b[1].dims[0] = 2;
    b[1].value = s34, b[1].bytes = sizeof s34;
    rlx_graph *g;
    assert_int_equal(import("reshape_by_value.onnx", b, 2, &g), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_graph_free(g);
    rlx_tensor_info ti;
    assert_int_not_equal(rlx_session_find(s, 0, "s", &ti), RLX_OK); /* a constant, not an input slot */
    for (int round = 0; round < 2; round++) {
        /* the value compiled for: accepted, and the result follows it */
        assert_int_equal(rlx_session_set_input(s, "x", x, sizeof x), RLX_OK);
        assert_int_equal(rlx_session_set_input(s, "s", s34, sizeof s34), RLX_OK);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        assert_int_equal(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
        reshape_by_value_ref(x, 3, 4, want);
        assert_memory_equal(y, want, sizeof y);
        /* another value of the same size: refused, naming the input and
         * the value it was compiled for */
        assert_int_equal(rlx_session_set_input(s, "s", s43, sizeof s43), RLX_ERR_INVALID_ARGUMENT);
        assert_true(msg_has("'s'"));
        assert_true(msg_has("bound by value"));
        assert_true(msg_has("3, 4"));
        assert_true(msg_has("got 4, 3"));
        assert_int_equal(rlx_session_set_input(s, "s", s26, sizeof s26), RLX_ERR_INVALID_ARGUMENT);
        /* another size: refused too */
        int64_t s3[3] = {2, 3, 2};
        assert_int_equal(rlx_session_set_input(s, "s", s3, sizeof s3), RLX_ERR_SHAPE);
        assert_true(msg_has("'s'"));
        x[0] += 100.0f; /* the next round runs on other data */
    }
    rlx_session_free(s);
    /* a plain input of the same model is still checked as before */
    b[1].value = NULL, b[1].bytes = 0;
    assert_int_not_equal(import("reshape_by_value.onnx", b, 2, &g), RLX_OK);
    assert_true(msg_has("must be known at import time"));

    /* NonMaxSuppression on graph inputs: refused naming the op and the
     * input; bound by value, it selects at import (the second box overlaps
     * the first by IoU 0.82 > 0.5, the third none) */
    assert_int_not_equal(import("nms_input.onnx", NULL, 0, &g), RLX_OK);
    assert_true(msg_has("NonMaxSuppression"));
    assert_true(msg_has("boxes"));
    float boxes[12] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3}, scores[3] = {0.9f, 0.8f, 0.7f};
    rlx_onnx_binding nb[3];
    memset(nb, 0, sizeof nb);
    nb[0] = (rlx_onnx_binding){.name = "boxes", .ndim = 3, .dims = {1, 3, 4}, .value = boxes, .bytes = sizeof boxes};
    nb[1] = (rlx_onnx_binding){.name = "scores", .ndim = 3, .dims = {1, 1, 3}, .value = scores, .bytes = sizeof scores};
    nb[2] = (rlx_onnx_binding){.name = "x", .ndim = 1, .dims = {1}};
    assert_int_equal(import("nms_input.onnx", nb, 3, &g), RLX_OK);
    float one = 1, *z;
    void *zp = &one;
    size_t zin = sizeof one, zsz;
    const char *zn[] = {"x"};
    z = run1(g, 1, zn, &zp, &zin, "z", &zsz);
    assert_int_equal(zsz, 6 * sizeof(float));
    const float want_sel[6] = {1, 1, 1, 1, 1, 3}; /* (0, 0, 0) and (0, 0, 2), plus 1 */
    assert_memory_equal(z, want_sel, sizeof want_sel);
    free(z);
    rlx_graph_free(g);
}

static void test_softmax_opsets(void **state)
{
    (void)state;
    NEED_MODELS();
    size_t xb, yb, ob;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *x = npy("sm_x.npy", &xb, &nd, d);
    const char *models[] = {"softmax11.onnx", "softmax13.onnx"}, *refs[] = {"sm11_y.npy", "sm13_y.npy"};
    for (int k = 0; k < 2; k++) {
        rlx_graph *g;
        assert_int_equal(import(models[k], NULL, 0, &g), RLX_OK);
        float *want = npy(refs[k], &yb, &nd, d);
        const char *names[] = {"x"};
        float *y = run1(g, 1, names, &x, &xb, "y", &ob);
        assert_close(y, want, yb / 4);
        free(want);
        free(y);
        rlx_graph_free(g);
    }
    free(x);
}

static void test_npy_roundtrip(void **state)
{
    (void)state;
    char p[600];
    snprintf(p, sizeof p, "%s/rt.npy", getenv("RLX_BINARY_DIR") ? getenv("RLX_BINARY_DIR") : "/tmp");
    int64_t dims[3] = {2, 3, 1};
    int32_t v[6] = {1, -2, 3, -4, 5, 6};
    unlink(p); /* rlx_npy_write never replaces a file */
    assert_int_equal(rlx_npy_write(p, RLX_I32, 3, dims, v, sizeof v), RLX_OK);
    rlx_dtype t;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *data;
    size_t bytes;
    assert_int_equal(rlx_npy_read(p, &t, &nd, d, &data, &bytes), RLX_OK);
    assert_int_equal(t, RLX_I32);
    assert_int_equal(nd, 3);
    assert_int_equal(d[0], 2);
    assert_int_equal(d[1], 3);
    assert_int_equal(d[2], 1);
    assert_int_equal(bytes, sizeof v);
    assert_memory_equal(data, v, sizeof v);
    free(data);
    /* numpy itself reads what we write */
    char cmd[800];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import numpy as n,sys; a=n.load('%s'); sys.exit(0 if a.shape==(2,3,1) and "
             "a.sum()==9 else 1)\" 2>/dev/null",
             p);
    int rc = system(cmd);
    if (rc != 0 && have_models)
        fail_msg("numpy could not read %s", p);
    /* a truncated file is an error */
    FILE *f = fopen(p, "r+b");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), 100), 0);
    fclose(f);
    assert_int_equal(rlx_npy_read(p, &t, &nd, d, &data, &bytes), RLX_ERR_FORMAT);
}

/* initializers_as_params: the float initializers of rank >= 1 of
 * train_mlp.onnx are params (the scalar and the int64 shape stay
 * constants); rlx_onnx_load_params hands exactly those; the first step's
 * loss is numpy's at the model's weights and training makes it fall.
 * Without the option the model has no param at all (today's constants). */
typedef struct loaded {
    rlx_trainer *tr;
    char names[8][16];
    int n;
} loaded;

static rlx_status load_into_trainer(void *user, const char *name, rlx_dtype t, int ndim, const int64_t *dims,
                                    const void *data, size_t bytes)
{
    loaded *l = user;
    assert_int_equal(t, RLX_F32);
    assert_true(ndim >= 1 && dims[0] > 0);
    if (l->n < 8)
        snprintf(l->names[l->n], sizeof l->names[0], "%s", name);
    l->n++;
    return rlx_trainer_set_param(l->tr, name, data, bytes);
}

static rlx_status refuse(void *user, const char *name, rlx_dtype t, int ndim, const int64_t *dims, const void *data,
                         size_t bytes)
{
    (void)user, (void)name, (void)t, (void)ndim, (void)dims, (void)data, (void)bytes;
    return RLX_ERR_NOT_FOUND;
}

static void test_initializers_as_params(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    assert_int_equal(o.initializers_as_params, 0);
    rlx_graph *g = NULL;
    /* off: constants, nothing to train */
    assert_int_equal(rlx_onnx_import(path("train_mlp.onnx"), &o, &g), RLX_OK);
    rlx_options co;
    rlx_options_init(&co);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &co, &s), RLX_OK);
    assert_int_equal(rlx_session_count(s, 1), 0);
    rlx_session_free(s);
    rlx_trainer *tr = NULL;
    assert_int_equal(rlx_trainer_new(g, "loss", NULL, NULL, &tr), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("no float param"));
    rlx_graph_free(g);

    /* on: four params, named as in the model */
    o.initializers_as_params = 1;
    assert_int_equal(rlx_onnx_import(path("train_mlp.onnx"), &o, &g), RLX_OK);
    assert_int_equal(rlx_compile(g, &co, &s), RLX_OK);
    assert_int_equal(rlx_session_count(s, 1), 4);
    rlx_tensor_info info;
    const char *want[] = {"w1", "b1", "w2", "b2"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(rlx_session_find(s, 1, want[i], &info), RLX_OK);
    assert_int_equal(rlx_session_find(s, 1, "half", &info), RLX_ERR_NOT_FOUND);
    rlx_session_free(s);

    rlx_train_options t;
    rlx_train_options_init(&t);
    t.optimizer = RLX_OPTIM_ADAM;
    t.lr = 1e-2;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_OK);
    rlx_graph_free(g);
    loaded l = {.tr = tr};
    assert_int_equal(rlx_onnx_load_params(path("train_mlp.onnx"), load_into_trainer, &l), RLX_OK);
    assert_int_equal(l.n, 4);
    for (int i = 0; i < 4; i++)
        assert_string_equal(l.names[i], want[i]);
    size_t xb, tb, lb;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *x = npy("train_mlp_x.npy", &xb, &nd, d), *tt = npy("train_mlp_t.npy", &tb, &nd, d);
    float *loss0 = npy("train_mlp_loss.npy", &lb, &nd, d);
    assert_int_equal(rlx_trainer_set_input(tr, "x", x, xb), RLX_OK);
    assert_int_equal(rlx_trainer_set_input(tr, "t", tt, tb), RLX_OK);
    double first = 0, loss = 0;
    for (int i = 0; i < 60; i++) {
        assert_int_equal(rlx_trainer_step(tr, &loss), RLX_OK);
        if (i == 0)
            first = loss;
    }
    assert_true(fabs(first - loss0[0]) <= 1e-5 * fabs(loss0[0]) + 1e-7);
    assert_true(loss < 0.5 * first);
    fprintf(stderr, "train_mlp.onnx: loss %g -> %g after 60 Adam steps\n", first, loss);
    /* the callback's error stops the walk and is returned */
    assert_int_equal(rlx_onnx_load_params(path("train_mlp.onnx"), refuse, NULL), RLX_ERR_NOT_FOUND);
    assert_int_equal(rlx_onnx_load_params(path("no_such.onnx"), refuse, NULL), RLX_ERR_IO);
    assert_int_equal(rlx_onnx_load_params(path("train_mlp.onnx"), NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
    free(x), free(tt), free(loss0);
    rlx_trainer_free(tr);

    /* an op reading a param initializer's value at import gets the model's */
    assert_int_equal(rlx_onnx_import(path("param_resize.onnx"), &o, &g), RLX_OK);
    float xin[4] = {1, 2, 3, 4}, *y;
    void *xp = xin;
    size_t xsz = sizeof xin, ysz;
    const char *xn[] = {"x"};
    y = run1(g, 1, xn, &xp, &xsz, "y", &ysz);
    assert_int_equal(ysz, 16 * sizeof(float));
    for (int i = 0; i < 16; i++)
        assert_true(y[i] == xin[(i / 8) * 2 + (i % 4) / 2]);
    free(y);
    rlx_graph_free(g);
    /* ... and one that cannot says which op and initializer */
    assert_int_equal(rlx_onnx_import(path("param_nonzero.onnx"), &o, &g), RLX_ERR_UNSUPPORTED);
    assert_null(g);
    assert_true(msg_has("NonZero"));
    assert_true(msg_has("initializer 'nzw' is a param"));
    o.initializers_as_params = 0;
    assert_int_equal(rlx_onnx_import(path("param_nonzero.onnx"), &o, &g), RLX_OK);
    rlx_graph_free(g);
}

/* Sequences and optionals: malformed ones fail naming the node; a sequence
 * input is one input per element, a sequence output one output per
 * element; an optional input can be bound empty; the suite's sequence and
 * optional files read back. */
static void test_sequences(void **state)
{
    (void)state;
    NEED_MODELS();
    static const struct {
        const char *model;
        rlx_status st;
        const char *words[2];
    } bad[] = {
        {"seq_bad_dtype.onnx", RLX_ERR_DTYPE, {"'mix'", "of type i64 in a sequence of f32"}},
        {"seq_insert_bad_dtype.onnx", RLX_ERR_DTYPE, {"'ins'", "of type f32 in a sequence of i64"}},
        {"seq_at_out_of_range.onnx", RLX_ERR_SHAPE, {"'at5'", "position 5 is outside [-2, 1]"}},
        {"seq_insert_out_of_range.onnx", RLX_ERR_SHAPE, {"'insm3'", "position -3 is outside [-1, 1]"}},
        {"seq_at_empty.onnx", RLX_ERR_SHAPE, {"'at_empty'", "empty"}},
        {"seq_erase_empty.onnx", RLX_ERR_SHAPE, {"'erase_empty'", "empty sequence"}},
        {"concat_from_empty.onnx", RLX_ERR_SHAPE, {"'cat_empty'", "empty"}},
        {"optional_get_empty.onnx", RLX_ERR_INVALID_ARGUMENT, {"'get_empty'", "empty optional"}},
        {"seq_into_tensor_op.onnx", RLX_ERR_UNSUPPORTED, {"'relu_seq'", "is a sequence; this op takes tensors"}},
        {"split_to_seq_bad_sizes.onnx", RLX_ERR_SHAPE, {"'split_bad'", "exceed the axis"}},
        {"seq_only_empty_output.onnx", RLX_ERR_UNSUPPORTED, {"empty sequences", "outputs"}},
        {"seq_io.onnx", RLX_ERR_SHAPE, {"'xs'", "bind its length"}},
    };
    rlx_graph *g = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(import(bad[i].model, NULL, 0, &g), bad[i].st);
        assert_null(g);
        assert_true(msg_has(bad[i].words[0]));
        assert_true(msg_has(bad[i].words[1]));
    }

    /* SequenceAt at a run-time position: a gather over elements of one
     * shape (a position out of range fails the run); over elements of two
     * shapes the position must be bound by value */
    float a[2] = {1, 2}, b[3] = {3, 4, 5}, y[3];
    int64_t pos = -1;
    assert_int_equal(import("seq_at_runtime_same.onnx", NULL, 0, &g), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_graph_free(g);
    assert_int_equal(rlx_session_set_input(s, "a", a, sizeof a), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "b", b, 2 * sizeof(float)), RLX_OK);
    for (pos = -2; pos < 2; pos++) {
        assert_int_equal(rlx_session_set_input(s, "pos", &pos, sizeof pos), RLX_OK);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        assert_int_equal(rlx_session_get_output(s, "y", y, 2 * sizeof(float)), RLX_OK);
        const float *want = (pos + 2) % 2 == 0 ? a : b;
        assert_true(y[0] == want[0] && y[1] == want[1]);
    }
    pos = 2;
    assert_int_equal(rlx_session_set_input(s, "pos", &pos, sizeof pos), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_ERR_RUNTIME);
    rlx_session_free(s);
    assert_int_equal(import("seq_at_runtime_mixed.onnx", NULL, 0, &g), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("'at_pos'"));
    assert_true(msg_has("must be known at import time"));
    rlx_onnx_binding pb = {.name = "pos", .ndim = 0, .value = &pos, .bytes = sizeof pos};
    pos = 1;
    assert_int_equal(import("seq_at_runtime_mixed.onnx", &pb, 1, &g), RLX_OK);
    const char *abn[] = {"a", "b"};
    void *abd[] = {a, b};
    size_t abb[] = {sizeof a, sizeof b}, yb;
    float *got = run1(g, 2, abn, abd, abb, "y", &yb);
    assert_int_equal(yb, sizeof b);
    assert_close(got, b, 3);
    free(got);
    rlx_graph_free(g);

    /* a sequence input of two [N, 2] elements (length by a dim binding,
     * shapes by element bindings); the output sequence is one output per
     * [1, 2] piece */
    rlx_onnx_binding sb[3] = {{.name = "xs", .ndim = -1, .dims = {2}},
                              {.name = "xs[0]", .ndim = 2, .dims = {1, 2}},
                              {.name = "xs[1]", .ndim = 2, .dims = {2, 2}}};
    assert_int_equal(import("seq_io.onnx", sb, 3, &g), RLX_OK);
    s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_graph_free(g);
    float x0[2] = {-1, 2}, x1[4] = {3, -4, 5, 6}, want[6] = {0, 2, 3, 0, 5, 6}, part[2];
    assert_int_equal(rlx_session_set_input(s, "xs[0]", x0, sizeof x0), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "xs[1]", x1, sizeof x1), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    for (int i = 0; i < 3; i++) {
        char nm[24];
        snprintf(nm, sizeof nm, "parts[%d]", i);
        rlx_tensor_info ti;
        assert_int_equal(rlx_session_find(s, 2, nm, &ti), RLX_OK);
        assert_true(ti.ndim == 2 && ti.dims[0] == 1 && ti.dims[1] == 2);
        assert_int_equal(rlx_session_get_output(s, nm, part, sizeof part), RLX_OK);
        assert_true(part[0] == want[2 * i] && part[1] == want[2 * i + 1]);
    }
    rlx_tensor_info ti;
    assert_int_not_equal(rlx_session_find(s, 2, "parts[3]", &ti), RLX_OK);
    assert_int_not_equal(rlx_session_find(s, 2, "parts", &ti), RLX_OK);
    rlx_session_free(s);
    /* the length from the element bindings alone; a length the bindings do
     * not fill needs the element shapes (N is symbolic) */
    assert_int_equal(import("seq_io.onnx", sb + 1, 2, &g), RLX_OK);
    rlx_graph_free(g);
    sb[0].dims[0] = 3;
    assert_int_equal(import("seq_io.onnx", sb, 3, &g), RLX_ERR_SHAPE);
    assert_true(msg_has("'xs[2]'"));

    /* an optional input: present, or bound empty */
    uint8_t has = 2;
    float o2[2] = {1, 2};
    assert_int_equal(import("optional_input.onnx", NULL, 0, &g), RLX_OK);
    rlx_graph_free(g);
    rlx_onnx_binding eb = {.name = "o", .ndim = RLX_ONNX_EMPTY};
    assert_int_equal(import("optional_input.onnx", &eb, 1, &g), RLX_OK);
    s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "o", o2, sizeof o2), RLX_ERR_NOT_FOUND);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "has", &has, 1), RLX_OK);
    assert_int_equal(has, 0);
    rlx_session_free(s);
    rlx_graph_free(g);

    /* what the model declares, and the value files */
    rlx_onnx_input *outs = NULL;
    int n = 0;
    assert_int_equal(rlx_onnx_outputs(path("seq_io.onnx"), &outs, &n), RLX_OK);
    assert_int_equal(n, 2);
    assert_int_equal(outs[0].kind, RLX_ONNX_SEQUENCE);
    assert_int_equal(outs[0].dtype, RLX_F32);
    assert_int_equal(outs[1].kind, RLX_ONNX_TENSOR);
    rlx_onnx_inputs_free(outs, n, NULL, 0);
    rlx_onnx_input *ins = NULL;
    assert_int_equal(rlx_onnx_inputs(path("optional_input.onnx"), &ins, &n, NULL, NULL), RLX_OK);
    assert_int_equal(n, 1);
    assert_int_equal(ins[0].kind, RLX_ONNX_OPTIONAL);
    assert_int_equal(ins[0].is_tensor, 0);
    assert_true(ins[0].ndim == 1 && ins[0].dims[0] == 2);
    rlx_onnx_inputs_free(ins, n, NULL, 0);
    rlx_onnx_kind held;
    rlx_onnx_tensor *ts = NULL;
    rlx_status st = rlx_onnx_read_value(path("seq_value.pb"), RLX_ONNX_SEQUENCE, &held, &ts, &n);
    if (st == RLX_ERR_UNSUPPORTED) { /* a library built without onnx-data.proto */
        assert_true(msg_has("onnx-data.proto"));
        return;
    }
    assert_int_equal(st, RLX_OK);
    assert_int_equal(held, RLX_ONNX_SEQUENCE);
    assert_int_equal(n, 2);
    assert_true(ts[0].dtype == RLX_F32 && ts[0].ndim == 1 && ts[0].dims[0] == 3);
    assert_true(ts[1].ndim == 2 && ts[1].bytes == 16 && ((float *)ts[1].data)[3] == 1);
    assert_true(((float *)ts[0].data)[2] == 2);
    rlx_onnx_tensors_free(ts, n);
    assert_int_equal(rlx_onnx_read_value(path("empty_optional.pb"), RLX_ONNX_OPTIONAL, &held, &ts, &n), RLX_OK);
    assert_int_equal(held, RLX_ONNX_NONE);
    assert_int_equal(n, 0);
    assert_null(ts);
    /* a file that is no such message, and a kind with no file form */
    assert_int_equal(rlx_onnx_read_value(path("seq_io.onnx"), RLX_ONNX_SEQUENCE, &held, &ts, &n), RLX_ERR_FORMAT);
    assert_null(ts);
    assert_int_equal(rlx_onnx_read_value(path("seq_value.pb"), RLX_ONNX_OTHER, &held, &ts, &n),
                     RLX_ERR_INVALID_ARGUMENT);
}

/* Strings: computed at import, an output read back as RLX_STRING; a string
 * input not bound by value, an op that takes no strings and malformed
 * nodes (string ops, training ops, Resize's antialias) fail naming what is
 * wrong. */
static void test_strings(void **state)
{
    (void)state;
    NEED_MODELS();
    rlx_graph *g;
    rlx_onnx_input *ins = NULL;
    int nin = 0;
    assert_int_equal(rlx_onnx_inputs(path("str_norm.onnx"), &ins, &nin, NULL, NULL), RLX_OK);
    assert_int_equal(nin, 1);
    assert_int_equal(ins[0].dtype, RLX_STRING);
    rlx_onnx_inputs_free(ins, nin, NULL, 0);
    assert_int_equal(import("str_norm.onnx", NULL, 0, &g), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("StringNormalizer") && msg_has("must be known at import time"));
    static const char x[] = "a\0b\0\xc3\xa9t\xc3\xa9";
    rlx_onnx_binding b = {.name = "x", .ndim = 1, .dims = {3}, .value = x, .bytes = sizeof x};
    assert_int_equal(import("str_norm.onnx", &b, 1, &g), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    rlx_tensor_info info;
    assert_int_equal(rlx_session_find(s, 2, "y", &info), RLX_OK);
    assert_int_equal(info.dtype, RLX_STRING);
    assert_int_equal(info.ndim, 1);
    assert_int_equal(info.dims[0], 2);
    static const char want[] = "A\0\xc3\x89T\xc3\x89"; /* "b" dropped, é upper-cased */
    char got[sizeof want];
    assert_int_equal(info.bytes, sizeof want);
    assert_int_equal(rlx_session_get_output(s, "y", got, sizeof got), RLX_OK);
    assert_memory_equal(got, want, sizeof want);
    rlx_session_free(s);
    rlx_graph_free(g);
    /* a staged run takes and returns strings too */
    rlx_options_init(&o);
    rlx_model *m;
    assert_int_equal(rlx_model_load_onnx(path("str_norm.onnx"), &o, &m), RLX_OK);
    rlx_onnx_tensor xin = {.dtype = RLX_STRING, .ndim = 1, .dims = {3}, .data = (void *)x, .bytes = sizeof x}, *ys;
    const char *xname = "x";
    int ny;
    assert_int_equal(rlx_model_run(m, 1, &xname, &xin, &ys, &ny), RLX_OK);
    assert_int_equal(ny, 1);
    assert_int_equal(ys[0].dtype, RLX_STRING);
    assert_int_equal(ys[0].dims[0], 2);
    assert_int_equal(ys[0].bytes, sizeof want);
    assert_memory_equal(ys[0].data, want, sizeof want);
    rlx_onnx_tensors_free(ys, ny);
    xin.bytes = 4; /* the strings' bytes must be whole */
    assert_int_equal(rlx_model_run(m, 1, &xname, &xin, &ys, &ny), RLX_ERR_INVALID_ARGUMENT);
    rlx_model_free(m);
    b.bytes = 3; /* two strings where the shape says three */
    assert_int_equal(import("str_norm.onnx", &b, 1, &g), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("NUL-ended"));
    assert_int_equal(import("str_norm_bad.onnx", NULL, 0, &g), RLX_ERR_UNSUPPORTED); /* the input first */
    b.bytes = sizeof x;
    assert_int_equal(import("str_norm_bad.onnx", &b, 1, &g), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("SIDEWAYS"));
    assert_int_equal(import("str_cast_bad.onnx", NULL, 0, &g), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("\"abc\""));
    assert_int_equal(import("str_concat.onnx", NULL, 0, &g), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("Concat") && msg_has("strings"));
    assert_int_equal(import("momentum_bad_mode.onnx", NULL, 0, &g), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("sideways"));
    assert_int_equal(import("adam_bad_inputs.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("per tensor"));
    assert_int_equal(import("gradient_no_y.onnx", NULL, 0, &g), RLX_ERR_FORMAT);
    assert_true(msg_has("'y'"));
    assert_int_equal(import("resize_antialias_bad.onnx", NULL, 0, &g), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("antialias"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp),
        cmocka_unit_test(test_split_weights),
        cmocka_unit_test(test_llama_attention),
        cmocka_unit_test(test_shape_chain),
        cmocka_unit_test(test_unsorted),
        cmocka_unit_test(test_external),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_if),
        cmocka_unit_test(test_if_unfit_branch),
        cmocka_unit_test(test_if_many_outputs),
        cmocka_unit_test(test_softmax_opsets),
        cmocka_unit_test(test_bound_by_value),
        cmocka_unit_test(test_npy_roundtrip),
        cmocka_unit_test(test_loop_runtime_cond),
        cmocka_unit_test(test_runner),
        cmocka_unit_test(test_fuzz_regressions),
        cmocka_unit_test(test_initializers_as_params),
        cmocka_unit_test(test_sequences),
        cmocka_unit_test(test_strings),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

#else

int main(void)
{
    printf("ONNX importer not built (needs protobuf-c and libonnx-dev): skipped\n");
    return 77;
}

#endif
