/* test_ops_quant.c - the quantized ops through the public API against
 * float64: qmatmul (weights of every type, activations f32/f16/bf16, one
 * row and many) within the bound the activations' 8-bit quantization
 * allows, dequantize exact; bad weights refused with messages. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "quant_testutil.h"
#include "rlx.h"

/* Quantized weights of n rows of k elements from normal draws, and their
 * float64 reading through the dequantizer (tested bit-exact elsewhere). */
static uint8_t *make_weights(int qt, int64_t n, int64_t k, double **deq)
{
    size_t rb = rlx_quant_row_bytes(qt, k);
    uint8_t *w = malloc(rb * (size_t)n);
    float *row = malloc(sizeof(float) * (size_t)k);
    *deq = malloc(sizeof(double) * (size_t)(n * k));
    assert_true(w && row && *deq);
    for (int64_t j = 0; j < n; j++) {
        for (int64_t i = 0; i < k; i++)
            row[i] = (float)(0.05 * qt_normal());
        assert_int_equal(rlx_quantize_row(qt, row, w + (size_t)j * rb, k), RLX_OK);
        assert_int_equal(rlx_dequantize_row(qt, w + (size_t)j * rb, row, k), RLX_OK);
        for (int64_t i = 0; i < k; i++)
            (*deq)[j * k + i] = row[i];
    }
    free(row);
    return w;
}

/* Runs y = qmatmul(x, w) for x [m, k] of dtype xt on `threads` threads. */
static void run_qmatmul_on(int qt, rlx_dtype xt, int64_t m, int64_t n, int64_t k, const void *x, const uint8_t *w,
                           float *y, int threads)
{
    size_t rb = rlx_quant_row_bytes(qt, k);
    rlx_graph *g = rlx_graph_new();
    rlx_node xi = rlx_input(g, "x", xt, 2, (int64_t[]){m, k});
    rlx_node wi = rlx_param(g, "w", RLX_U8, 2, (int64_t[]){n, (int64_t)rb});
    rlx_node q = rlx_qmatmul(g, xi, wi, qt, k);
    assert_true(q >= 0);
    assert_int_equal(rlx_output(g, "y", xt == RLX_F32 ? q : rlx_cast(g, q, RLX_F32)), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    o.threads = threads;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(rlx_session_set_param(s, "w", w, rb * (size_t)n), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "x", x, (size_t)(m * k) * rlx_dtype_size(xt)), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, sizeof(float) * (size_t)(m * n)), RLX_OK);
    rlx_session_free(s);
    rlx_graph_free(g);
}

static void run_qmatmul(int qt, rlx_dtype xt, int64_t m, int64_t n, int64_t k, const void *x, const uint8_t *w,
                        float *y)
{
    run_qmatmul_on(qt, xt, m, n, k, x, w, y, 2);
}

/* The activations are quantized in blocks of 32 (256 for the _K types) to
 * levels of max|x| / 127: each moves by at most half a level, so
 * |y - x.w| <= sum_k |w_k| * step(block of k) / 2, plus f32 rounding. */
static double bound_for(int qt, const double *xv, const double *wrow, int64_t k)
{
    int64_t blk = rlx_quant_block_elems(rlx_quant_act_type(qt));
    double b = 0, mag = 0;
    for (int64_t s = 0; s < k; s += blk) {
        double amax = 0;
        for (int64_t i = s; i < s + blk; i++)
            amax = fmax(amax, fabs(xv[i]));
        for (int64_t i = s; i < s + blk; i++) {
            b += fabs(wrow[i]) * amax / 127.0 * 0.5;
            mag += fabs(wrow[i] * xv[i]);
        }
    }
    return b * 1.0001 + mag * 1e-5 + 1e-7;
}

static void test_qmatmul_every_type(void **state)
{
    (void)state;
    const rlx_dtype xts[] = {RLX_F32, RLX_F16, RLX_BF16};
    const int64_t shapes[][3] = {{1, 37, 256}, {5, 64, 512}, {3, 9, 1024}, {40, 300, 512}};
    qt_seed(11);
    for (int ti = 0; ti < QT_NTYPES; ti++) {
        int qt = qt_types[ti];
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t m = shapes[si][0], n = shapes[si][1], k = shapes[si][2];
            double *deq;
            uint8_t *w = make_weights(qt, n, k, &deq);
            for (size_t xi = 0; xi < sizeof xts / sizeof xts[0]; xi++) {
                rlx_dtype xt = xts[xi];
                size_t es = rlx_dtype_size(xt);
                void *x = malloc(es * (size_t)(m * k));
                double *xv = malloc(sizeof(double) * (size_t)(m * k));
                float *y = malloc(sizeof(float) * (size_t)(m * n));
                for (int64_t i = 0; i < m * k; i++) {
                    float v = (float)qt_normal();
                    if (xt == RLX_F16) {
                        ((uint16_t *)x)[i] = rlx_f32_to_f16(v);
                        xv[i] = rlx_f16_to_f32(((uint16_t *)x)[i]);
                    } else if (xt == RLX_BF16) {
                        ((uint16_t *)x)[i] = rlx_f32_to_bf16(v);
                        xv[i] = rlx_bf16_to_f32(((uint16_t *)x)[i]);
                    } else {
                        ((float *)x)[i] = v;
                        xv[i] = v;
                    }
                }
                run_qmatmul(qt, xt, m, n, k, x, w, y);
                double worst = 0;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double ref = 0;
                        for (int64_t e = 0; e < k; e++)
                            ref += xv[i * k + e] * deq[j * k + e];
                        double got = y[i * n + j];
                        double tol = bound_for(qt, xv + i * k, deq + j * k, k);
                        if (xt != RLX_F32) /* the output is stored in the activations' dtype */
                            tol += fabs(ref) * (xt == RLX_BF16 ? 0x1p-8 : 0x1p-11);
                        double err = fabs(got - ref);
                        if (err > tol)
                            fail_msg("%s x %s [%lld, %lld] row %lld col %lld: %.9g vs %.9g (err %.3g > bound %.3g)",
                                     rlx_ggml_type_name(qt), rlx_dtype_name(xt), (long long)m, (long long)k,
                                     (long long)i, (long long)j, got, ref, err, tol);
                        worst = fmax(worst, tol > 0 ? err / tol : 0);
                    }
                assert_true(worst < 1.0);
                free(x);
                free(xv);
                free(y);
            }
            free(w);
            free(deq);
        }
    }
}

/* dequantize gives the dequantizer's floats (and their f16/bf16 rounding). */
/* A prompt's rows against the same rows one at a time, as a decode step
 * runs them: equal to the bit.  Near is not enough: the next layer rounds
 * these values to 8-bit levels again, and an f32-rounding difference that
 * flips a level moved an LLM's prompt logits by 5% of their rms (a prompt
 * path through f32 GEMMs over dequantized weights, taken out again). */
static void test_prompt_rows_match_single_rows(void **state)
{
    (void)state;
    /* rows and weight rows that are not multiples of the tiles (RLX_QUANT_TILE,
     * 16 weight rows per task), an odd count of blocks, one and two threads */
    const int64_t m = 41, n = 302;
    qt_seed(23);
    for (int ti = 0; ti < QT_NTYPES; ti++) {
        int qt = qt_types[ti];
        const int64_t be = rlx_quant_block_elems(qt), ks[] = {be == 32 ? 512 : 1024, be == 32 ? 480 : 768};
        for (int ki = 0; ki < 2; ki++) {
            const int64_t k = ks[ki];
            double *deq;
            uint8_t *w = make_weights(qt, n, k, &deq);
            float *x = malloc(sizeof(float) * (size_t)(m * k)), *y = malloc(sizeof(float) * (size_t)(m * n));
            float *y1 = malloc(sizeof(float) * (size_t)n);
            for (int64_t i = 0; i < m * k; i++)
                x[i] = (float)qt_normal();
            for (int threads = 1; threads <= 2; threads++) {
                run_qmatmul_on(qt, RLX_F32, m, n, k, x, w, y, threads);
                const int64_t rows[] = {0, 1, 3, 17, 38, m - 1};
                for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
                    int64_t i = rows[r];
                    run_qmatmul_on(qt, RLX_F32, 1, n, k, x + i * k, w, y1, 3 - threads);
                    for (int64_t j = 0; j < n; j++)
                        if (memcmp(&y[i * n + j], &y1[j], sizeof(float)))
                            fail_msg("%s k %lld, %d threads, row %lld col %lld: %.9g in a prompt, %.9g alone",
                                     rlx_ggml_type_name(qt), (long long)k, threads, (long long)i, (long long)j,
                                     y[i * n + j], y1[j]);
                }
            }
            free(x), free(y), free(y1), free(w), free(deq);
        }
    }
}

static void test_dequantize_op(void **state)
{
    (void)state;
    qt_seed(12);
    for (int ti = 0; ti < QT_NTYPES; ti++) {
        int qt = qt_types[ti];
        int64_t n = 6, k = 512;
        double *deq;
        uint8_t *w = make_weights(qt, n, k, &deq);
        size_t rb = rlx_quant_row_bytes(qt, k);
        for (int to = 0; to < 3; to++) {
            rlx_dtype dt = to == 0 ? RLX_F32 : to == 1 ? RLX_F16 : RLX_BF16;
            rlx_graph *g = rlx_graph_new();
            rlx_node wi = rlx_param(g, "w", RLX_U8, 2, (int64_t[]){n, (int64_t)rb});
            rlx_node d = rlx_dequantize(g, wi, qt, k, dt);
            assert_int_equal(rlx_output(g, "y", d), RLX_OK);
            rlx_options o;
            rlx_options_init(&o);
            rlx_session *s = NULL;
            assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
            assert_int_equal(rlx_session_set_param(s, "w", w, rb * (size_t)n), RLX_OK);
            assert_int_equal(rlx_session_run(s), RLX_OK);
            size_t es = rlx_dtype_size(dt);
            void *y = malloc(es * (size_t)(n * k));
            assert_int_equal(rlx_session_get_output(s, "y", y, es * (size_t)(n * k)), RLX_OK);
            for (int64_t i = 0; i < n * k; i++) {
                float want = (float)deq[i], got;
                if (dt == RLX_F32) {
                    got = ((float *)y)[i];
                } else {
                    uint16_t h = ((uint16_t *)y)[i];
                    got = dt == RLX_F16 ? rlx_f16_to_f32(h) : rlx_bf16_to_f32(h);
                    want =
                        dt == RLX_F16 ? rlx_f16_to_f32(rlx_f32_to_f16(want)) : rlx_bf16_to_f32(rlx_f32_to_bf16(want));
                }
                if (memcmp(&got, &want, sizeof got))
                    fail_msg("%s -> %s element %lld: %.9g, want %.9g", rlx_ggml_type_name(qt), rlx_dtype_name(dt),
                             (long long)i, got, want);
            }
            free(y);
            rlx_session_free(s);
            rlx_graph_free(g);
        }
        free(w);
        free(deq);
    }
}

static void expect_bad(rlx_node (*build)(rlx_graph *), rlx_status want, const char *text)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node y = build(g);
    assert_true(y < 0);
    (void)want;
    if (!strstr(rlx_last_error(), text))
        fail_msg("message '%s' lacks '%s'", rlx_last_error(), text);
    rlx_graph_free(g);
}

static rlx_node bad_type(rlx_graph *g)
{
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){1, 64});
    rlx_node w = rlx_param(g, "w", RLX_U8, 2, (int64_t[]){4, 36});
    return rlx_qmatmul(g, x, w, 10 /* Q2_K */, 64);
}

static rlx_node bad_k(rlx_graph *g)
{
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){1, 48});
    rlx_node w = rlx_param(g, "w", RLX_U8, 2, (int64_t[]){4, 51});
    return rlx_qmatmul(g, x, w, RLX_Q8_0, 48);
}

static rlx_node bad_row_bytes(rlx_graph *g)
{
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){1, 64});
    rlx_node w = rlx_param(g, "w", RLX_U8, 2, (int64_t[]){4, 60});
    return rlx_qmatmul(g, x, w, RLX_Q8_0, 64);
}

static rlx_node bad_x(rlx_graph *g)
{
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){1, 32});
    rlx_node w = rlx_param(g, "w", RLX_U8, 2, (int64_t[]){4, 68});
    return rlx_qmatmul(g, x, w, RLX_Q8_0, 64);
}

static rlx_node bad_weight_dtype(rlx_graph *g)
{
    rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){4, 68});
    return rlx_dequantize(g, w, RLX_Q8_0, 64, RLX_F32);
}

static void test_bad_weights(void **state)
{
    (void)state;
    assert_int_equal(rlx_quant_row_bytes(RLX_Q4_K, 256), 144);
    assert_int_equal(rlx_quant_row_bytes(RLX_Q4_K, 255), 0);
    assert_int_equal(rlx_quant_row_bytes(10, 256), 0);
    expect_bad(bad_type, RLX_ERR_UNSUPPORTED, "Q2_K");
    expect_bad(bad_k, RLX_ERR_SHAPE, "whole blocks of 32");
    expect_bad(bad_row_bytes, RLX_ERR_SHAPE, "u8 [N, 68]");
    expect_bad(bad_x, RLX_ERR_SHAPE, "k = 64");
    expect_bad(bad_weight_dtype, RLX_ERR_SHAPE, "u8 [N, 68]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qmatmul_every_type),
        cmocka_unit_test(test_prompt_rows_match_single_rows),
        cmocka_unit_test(test_dequantize_op),
        cmocka_unit_test(test_bad_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
