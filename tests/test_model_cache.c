/* test_model_cache.c - one model file run at several input shapes: each
 * shape compiles once and is reused; results follow the shape.  Likewise
 * for an input bound by value: each value compiles once.  rlx_model_run
 * runs models whose ops need run-time values at import (NonZero and
 * NonMaxSuppression on computed data) in stages. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* One f32 input through rlx_model_run; returns the outputs. */
static rlx_onnx_tensor *run_f32(rlx_model *m, int n, const char *const *names, float *const *data,
                                const int64_t (*dims)[3], const int *ndim, int *nout)
{
    rlx_onnx_tensor in[2];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n; i++) {
        in[i].dtype = RLX_F32;
        in[i].ndim = ndim[i];
        size_t cnt = 1;
        for (int d = 0; d < ndim[i]; d++)
            cnt *= (size_t)(in[i].dims[d] = dims[i][d]);
        in[i].data = data[i];
        in[i].bytes = cnt * sizeof(float);
    }
    rlx_onnx_tensor *out = NULL;
    assert_int_equal(rlx_model_run(m, n, names, in, &out, nout), RLX_OK);
    return out;
}

static float uniform(float lo, float hi) { return lo + (hi - lo) * (float)rand() / (float)RAND_MAX; }

/* staged_nonzero.onnx: y = 2 * r[r > 0.5], r = relu(x): NonZero on
 * computed data, so the model runs in stages; the output's length follows
 * the data. */
static void test_staged_nonzero(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/staged_nonzero.onnx", dir);
    rlx_model *m = NULL;
    assert_int_equal(rlx_model_load_onnx(path, NULL, &m), RLX_OK);
    const char *names[] = {"x"};
    const int64_t dims[1][3] = {{3, 4}};
    const int ndim[] = {2};
    int cached = 0;
    for (int round = 0; round < 5; round++) {
        float x[12], want[12];
        int k = 0;
        for (int i = 0; i < 12; i++) {
            x[i] = uniform(-1.0f, 1.5f);
            if (x[i] > 0.5f)
                want[k++] = 2 * x[i];
        }
        float *xp = x;
        for (int again = 0; again < 2; again++) { /* the same data again: nothing new compiles */
            int nout = 0;
            rlx_onnx_tensor *y = run_f32(m, 1, names, &xp, dims, ndim, &nout);
            assert_int_equal(nout, 1);
            assert_int_equal(y[0].dtype, RLX_F32);
            assert_int_equal(y[0].ndim, 1);
            assert_int_equal(y[0].dims[0], k);
            assert_int_equal(y[0].bytes, (size_t)k * sizeof(float));
            if (k)
                assert_memory_equal(y[0].data, want, (size_t)k * sizeof(float));
            rlx_onnx_tensors_free(y, nout);
            if (again)
                assert_int_equal(rlx_model_cached_windows(m), cached);
            cached = rlx_model_cached_windows(m);
        }
    }
    /* one window before NonZero, and one after it per count of kept values */
    assert_true(cached >= 2 && cached <= 6);
    rlx_model_free(m);
}

/* Greedy non-maximum suppression in double (the corner format): the kept
 * box indices, best score first. */
static int nms_ref(const float *boxes, const double *scores, int n, double iou_max, double score_min, int *kept)
{
    int order[8], nk = 0;
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 0; i < n; i++) /* by score, then index */
        for (int j = i + 1; j < n; j++)
            if (scores[order[j]] > scores[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    for (int a = 0; a < n; a++) {
        int i = order[a];
        if (!(scores[i] > score_min))
            continue;
        const float *bi = boxes + 4 * i;
        bool keep = true;
        for (int q = 0; q < nk && keep; q++) {
            const float *bj = boxes + 4 * kept[q];
            double h = fmin(bi[2], bj[2]) - fmax(bi[0], bj[0]), w = fmin(bi[3], bj[3]) - fmax(bi[1], bj[1]);
            double inter = h > 0 && w > 0 ? h * w : 0;
            double ai = (double)(bi[2] - bi[0]) * (bi[3] - bi[1]), aj = (double)(bj[2] - bj[0]) * (bj[3] - bj[1]);
            keep = !(inter / (ai + aj - inter) > iou_max);
        }
        if (keep)
            kept[nk++] = i;
    }
    return nk;
}

/* staged_nms.onnx: boxes = b + [0, 0, 1, 1], scores = sigmoid(s), NMS
 * (IoU 0.3, score 0.4), then 3 * the kept boxes: a detector's tail. */
static void test_staged_nms(void **state)
{
    (void)state;
    char path[512];
    snprintf(path, sizeof path, "%s/staged_nms.onnx", dir);
    rlx_model *m = NULL;
    assert_int_equal(rlx_model_load_onnx(path, NULL, &m), RLX_OK);
    const char *names[] = {"b", "s"};
    const int64_t dims[2][3] = {{1, 8, 4}, {1, 1, 8}};
    const int ndim[] = {3, 3};
    for (int round = 0; round < 4; round++) {
        float b[32], s[8], boxes[32];
        double score[8];
        for (int i = 0; i < 8; i++) {
            b[4 * i] = uniform(0, 3), b[4 * i + 1] = uniform(0, 3);
            b[4 * i + 2] = b[4 * i] + uniform(0, 1.5f), b[4 * i + 3] = b[4 * i + 1] + uniform(0, 1.5f);
            s[i] = uniform(-2, 2);
            score[i] = 1 / (1 + exp(-(double)s[i]));
            for (int c = 0; c < 4; c++)
                boxes[4 * i + c] = b[4 * i + c] + (c >= 2 ? 1.0f : 0.0f);
        }
        int kept[8];
        int nk = nms_ref(boxes, score, 8, 0.3, 0.4, kept);
        float *data[] = {b, s};
        int nout = 0;
        rlx_onnx_tensor *y = run_f32(m, 2, names, data, dims, ndim, &nout);
        assert_int_equal(nout, 1);
        assert_int_equal(y[0].ndim, 2);
        assert_int_equal(y[0].dims[0], nk);
        assert_int_equal(y[0].dims[1], 4);
        for (int q = 0; q < nk; q++)
            for (int c = 0; c < 4; c++)
                assert_true(((float *)y[0].data)[4 * q + c] == 3.0f * boxes[4 * kept[q] + c]);
        rlx_onnx_tensors_free(y, nout);
    }
    /* a missing input and a wrong dtype are refused, naming the input */
    int nout = 0;
    rlx_onnx_tensor *y = NULL, one = {.dtype = RLX_F32, .ndim = 3, .dims = {1, 8, 4}};
    float b[32] = {0};
    one.data = b;
    one.bytes = sizeof b;
    assert_int_not_equal(rlx_model_run(m, 1, names, &one, &y, &nout), RLX_OK);
    assert_non_null(strstr(rlx_last_error(), "'s'"));
    rlx_onnx_tensor two[2] = {one, one};
    two[1].dtype = RLX_I32;
    two[1].dims[1] = 1, two[1].dims[2] = 8;
    two[1].bytes = 8 * sizeof(int32_t);
    assert_int_not_equal(rlx_model_run(m, 2, names, two, &y, &nout), RLX_OK);
    assert_non_null(strstr(rlx_last_error(), "'s'"));
    assert_null(y);
    assert_int_equal(nout, 0);
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
        cmocka_unit_test(test_staged_nonzero),
        cmocka_unit_test(test_staged_nms),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
#endif
}
