/* test_model_cache.c - one model file run at several input shapes: each
 * shape compiles once and is reused; results follow the shape.  Likewise
 * for an input bound by value: each value compiles once. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rlx.h"

#ifdef RLX_HAVE_ONNX
static char dir[256];

/* shape_chain.onnx from tests/onnx/make_models.py: x [N, 3, 4] -> y [N, 12]. */
static void run_batch(rlx_model *m, int64_t batch, rlx_session **got)
{
    rlx_onnx_binding b;
    memset(&b, 0, sizeof b);
    b.name = "N"; /* bind the symbolic dim by its name */
    b.ndim = -1;
    b.dims[0] = batch;
    assert_int_equal(rlx_model_session(m, &b, 1, got), RLX_OK);
    size_t n = (size_t)batch * 12;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    rlx_tensor_info info;
    assert_int_equal(rlx_session_find(*got, 2, "y", &info), RLX_OK);
    assert_int_equal(info.ndim, 2);
    assert_int_equal(info.dims[0], batch);
    assert_int_equal(rlx_session_set_input(*got, "x", x, n * sizeof(float)), RLX_OK);
    assert_int_equal(rlx_session_run(*got), RLX_OK);
    assert_int_equal(rlx_session_get_output(*got, "y", y, n * sizeof(float)), RLX_OK);
    assert_memory_equal(x, y, n * sizeof(float)); /* a reshape keeps the values */
    free(x);
    free(y);
}

static void test_one_compile_per_shape(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/shape_chain.onnx", dir);
    rlx_model *m = NULL;
    assert_int_equal(rlx_model_load_onnx(path, NULL, &m), RLX_OK);
    rlx_session *a = NULL, *b = NULL, *c = NULL;
    run_batch(m, 2, &a);
    run_batch(m, 5, &b);
    assert_ptr_not_equal(a, b);
    assert_int_equal(rlx_model_cached_sessions(m), 2);
    run_batch(m, 2, &c);
    assert_ptr_equal(a, c); /* same shape: the cached session */
    assert_int_equal(rlx_model_cached_sessions(m), 2);
    rlx_model_free(m);
}

/* reshape_by_value.onnx (make_models.py): y = transpose(reshape(x [2, 6],
 * s)).flatten(), s bound by value: each value of s is its own session,
 * and a session refuses a value it was not compiled for. */
static rlx_session *run_target(rlx_model *m, int64_t a, int64_t b)
{
    int64_t sv[2] = {a, b};
    rlx_onnx_binding bind[2];
    memset(bind, 0, sizeof bind);
    bind[0].name = "x";
    bind[0].ndim = 2, bind[0].dims[0] = 2, bind[0].dims[1] = 6;
    bind[1].name = "s";
    bind[1].ndim = 1, bind[1].dims[0] = 2;
    bind[1].value = sv, bind[1].bytes = sizeof sv;
    rlx_session *s = NULL;
    assert_int_equal(rlx_model_session(m, bind, 2, &s), RLX_OK);
    float x[12], y[12], want[12];
    for (int i = 0; i < 12; i++)
        x[i] = (float)(i * i) - 7.0f;
    for (int64_t i = 0; i < a; i++)
        for (int64_t j = 0; j < b; j++)
            want[j * a + i] = x[i * b + j];
    assert_int_equal(rlx_session_set_input(s, "x", x, sizeof x), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "s", sv, sizeof sv), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
    assert_memory_equal(y, want, sizeof y);
    return s;
}

static void test_one_compile_per_value(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/reshape_by_value.onnx", dir);
    rlx_model *m = NULL;
    assert_int_equal(rlx_model_load_onnx(path, NULL, &m), RLX_OK);
    rlx_session *a = run_target(m, 3, 4);
    rlx_session *b = run_target(m, 4, 3); /* same shapes, another value: recompiled */
    assert_ptr_not_equal(a, b);
    assert_int_equal(rlx_model_cached_sessions(m), 2);
    assert_ptr_equal(run_target(m, 3, 4), a); /* the first value: its cached session */
    run_target(m, 6, 2);
    assert_int_equal(rlx_model_cached_sessions(m), 3);
    /* a session handed another value than its own refuses it */
    int64_t other[2] = {4, 3};
    assert_int_equal(rlx_session_set_input(a, "s", other, sizeof other), RLX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(rlx_last_error(), "'s'"));
    assert_non_null(strstr(rlx_last_error(), "3, 4"));
    rlx_model_free(m);
}

static void test_bad_requests(void **state)
{
    (void)state;
    rlx_model *m = NULL;
    assert_int_equal(rlx_model_load_onnx("/nonexistent/model.onnx", NULL, &m), RLX_ERR_IO);
    assert_null(m);
    char path[512];
    snprintf(path, sizeof path, "%s/shape_chain.onnx", dir);
    assert_int_equal(rlx_model_load_onnx(path, NULL, &m), RLX_OK);
    rlx_session *s = NULL;
    rlx_onnx_binding b;
    memset(&b, 0, sizeof b);
    b.name = "x";
    b.ndim = 3;
    b.dims[0] = 2, b.dims[1] = 7, b.dims[2] = 4; /* the model says [N, 3, 4] */
    assert_int_not_equal(rlx_model_session(m, &b, 1, &s), RLX_OK);
    assert_null(s);
    assert_true(strlen(rlx_last_error()) > 0);
    assert_int_equal(rlx_model_cached_sessions(m), 0); /* nothing half-built is kept */
    assert_int_equal(rlx_model_session(m, NULL, 1, &s), RLX_ERR_INVALID_ARGUMENT);
    rlx_model_free(m);
}
#endif

int main(void)
{
#ifndef RLX_HAVE_ONNX
    printf("skipped: this build has no ONNX importer\n");
    return 77;
#else
    snprintf(dir, sizeof dir, "%s/rlx-model-cache-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return 1;
    const char *src = getenv("RLX_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/onnx/make_models.py %s >/dev/null 2>&1", src ? src : ".", dir);
    if (system(cmd) != 0) {
        printf("skipped: /usr/bin/python3 with the onnx module is needed to write the test model\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_compile_per_shape),
        cmocka_unit_test(test_one_compile_per_value),
        cmocka_unit_test(test_bad_requests),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
#endif
}
