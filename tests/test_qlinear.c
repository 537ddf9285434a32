/* Static quantization's 8-bit ops on the integer kernels, on fresh random
 * data with nonzero zero points:
 *  - qlinear_matmul: the graph ONNX's QLinearMatMul, DequantizeLinear, Add,
 *    Relu and QuantizeLinear import to fuses into one compute thunk, and
 *    its results equal, to the bit, exact int64 sums followed by the f32
 *    steps the ONNX operators define (round half to even, saturation) and
 *    the unfused graph's; each u8 level also within one of the real-valued
 *    (float64) result;
 *  - conv_integer against an int64 reference: u8/s8 both ways, per-tensor
 *    and per-output-channel weight zero points, groups, stride, padding,
 *    dilation, 1-D, 1x1, constant (packed at prepare) and run-time weights,
 *    1 and 2 threads; its decomposition (lowering) gives the same;
 *  - bad operands refused with a message. */
#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backends/backend.h"
#include "opt/pass.h"
#include "rlx.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void fill(uint8_t *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = (uint8_t)rnd();
}

static int64_t val(const uint8_t *p, int64_t i, bool is_signed) { return is_signed ? (int8_t)p[i] : p[i]; }

static rlx_session *compile_threads(rlx_graph *g, int threads, bool fuse)
{
    rlx_options o;
    rlx_options_init(&o);
    o.threads = threads;
    o.no_fusion = !fuse;
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        fail_msg("compile: %s", rlx_last_error());
    return s;
}

/* QuantizeLinear's f32 steps: saturate(round_half_even(x / scale) + zp). */
static float level_u8(float x, float scale, float zp)
{
    volatile float d = x / scale, v = rintf(d) + zp;
    return v < 0 ? 0 : v > 255 ? 255 : v;
}

static rlx_node scalar_f32(rlx_graph *g, float v) { return rlx_constant(g, RLX_F32, 0, NULL, &v, 4); }

static rlx_node range_of(rlx_graph *g, float scale, float zp)
{
    float r[2] = {scale, zp};
    return rlx_constant(g, RLX_F32, 1, (int64_t[]){2}, r, sizeof r);
}

/* The stages as bits of v: 1 requantize + dequantize, 2 bias, 4 relu, 8
 * output quantization (at least one of 1 and 8); 16: the weights a
 * run-time input (packed at each run).  per_col: scales and weight zero
 * points per column. */
static void qmm_case(int64_t m, int64_t k, int64_t n, bool per_col, int v, int threads)
{
    bool rq = v & 1, bias = v & 2, relu = v & 4, out = v & 8, run_w = v & 16;
    uint8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(k * n)), za = (uint8_t)(100 + rnd() % 60);
    int8_t *zb = malloc((size_t)n);
    for (int64_t j = 0; j < n; j++)
        zb[j] = (int8_t)(1 + rnd() % 5);
    float *mult = malloc((size_t)n * 4), *bb = malloc((size_t)n * 4);
    float yz = (float)(90 + rnd() % 70), ys = 0.01f + 1e-4f * (float)(rnd() % 100);
    float os = 0.02f + 1e-4f * (float)(rnd() % 100), oz = (float)(rnd() % 256);
    fill(a, m * k);
    fill(b, k * n);
    for (int64_t j = 0; j < n; j++) {
        mult[j] = 3e-4f * (float)(1 + rnd() % 16) / sqrtf((float)k);
        bb[j] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    }
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "a", RLX_U8, 2, (int64_t[]){m, k});
    rlx_node w = run_w ? rlx_input(g, "w", RLX_I8, 2, (int64_t[]){k, n})
                       : rlx_constant(g, RLX_I8, 2, (int64_t[]){k, n}, b, (size_t)(k * n));
    rlx_node zbn = per_col ? rlx_constant(g, RLX_I8, 1, &n, zb, (size_t)n) : rlx_constant(g, RLX_I8, 0, NULL, zb, 1);
    rlx_node acc = rlx_matmul_integer(g, x, w, rlx_constant(g, RLX_U8, 0, NULL, &za, 1), zbn);
    rlx_node sc = per_col ? rlx_constant(g, RLX_F32, 1, &n, mult, (size_t)n * 4) : scalar_f32(g, mult[0]);
    rlx_node y = rlx_mul(g, rlx_cast(g, acc, RLX_F32), sc);
    if (rq) {
        y = rlx_cast(g, rlx_quantize_u8(g, y, range_of(g, 1.0f, yz)), RLX_F32);
        y = rlx_mul(g, rlx_sub(g, y, scalar_f32(g, yz)), scalar_f32(g, ys));
    }
    if (bias)
        y = rlx_add(g, y, rlx_constant(g, RLX_F32, 1, &n, bb, (size_t)n * 4));
    if (relu)
        y = rlx_relu(g, y);
    if (out)
        y = rlx_quantize_u8(g, y, range_of(g, os, oz));
    assert_int_equal(rlx_output(g, "y", y), RLX_OK);
    rlx_session *s = compile_threads(g, threads, true);
    rlx_compile_stats st;
    assert_int_equal(rlx_session_stats(s, &st), RLX_OK);
    assert_int_equal(st.thunks - st.noop_thunks, 1);
    size_t es = out ? 1 : 4;
    void *got = malloc((size_t)(m * n) * es);
    assert_int_equal(rlx_session_set_input(s, "a", a, (size_t)(m * k)), RLX_OK);
    if (run_w)
        assert_int_equal(rlx_session_set_input(s, "w", b, (size_t)(k * n)), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", got, (size_t)(m * n) * es), RLX_OK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t sum = 0;
            for (int64_t q = 0; q < k; q++)
                sum += (val(a, i * k + q, false) - za) * (val(b, q * n + j, true) - zb[per_col ? j : 0]);
            float mj = mult[per_col ? j : 0];
            volatile float e = (float)sum * mj;
            double real = (double)sum * mj;
            if (rq) {
                volatile float d = level_u8(e, 1.0f, yz) - yz;
                e = d * ys;
                real = (fmin(fmax(real + yz, 0), 255) - yz) * ys;
            }
            if (bias) {
                e = e + bb[j];
                real += bb[j];
            }
            if (relu) {
                e = e > 0 ? e : 0;
                real = real > 0 ? real : 0;
            }
            if (out) {
                float want = level_u8(e, os, oz);
                uint8_t have = ((uint8_t *)got)[i * n + j];
                if (have != (uint8_t)want)
                    fail_msg("qlinear_matmul v%d: y[%lld][%lld] = %d, reference %d", v, (long long)i, (long long)j,
                             have, (int)want);
                double lv = fmin(fmax(real / os + oz, 0), 255);
                assert_true(fabs(have - lv) <= 1.0 + (rq ? ys / os : 0));
            } else {
                float have = ((float *)got)[i * n + j];
                if (memcmp(&have, (const void *)&e, 4) != 0)
                    fail_msg("qlinear_matmul v%d: y[%lld][%lld] = %.9g, reference %.9g", v, (long long)i, (long long)j,
                             have, (double)e);
                assert_true(fabs(have - real) <= (rq ? ys : 0) + 1e-5 * (1 + fabs(real)));
            }
        }
    /* the unfused graph (the decomposition, op by op) gives the same bits */
    rlx_session *u = compile_threads(g, threads, false);
    void *unfused = malloc((size_t)(m * n) * es);
    assert_int_equal(rlx_session_set_input(u, "a", a, (size_t)(m * k)), RLX_OK);
    if (run_w)
        assert_int_equal(rlx_session_set_input(u, "w", b, (size_t)(k * n)), RLX_OK);
    assert_int_equal(rlx_session_run(u), RLX_OK);
    assert_int_equal(rlx_session_get_output(u, "y", unfused, (size_t)(m * n) * es), RLX_OK);
    assert_memory_equal(got, unfused, (size_t)(m * n) * es);
    rlx_session_free(u);
    rlx_session_free(s);
    rlx_graph_free(g);
    free(a), free(b), free(zb), free(mult), free(bb), free(got), free(unfused);
}

static void test_qlinear_matmul(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 2; threads++)
        for (int v = 1; v < 32; v++) {
            if (!(v & 9))
                continue;
            qmm_case(1, 19, 33, v & 2, v, threads);
            qmm_case(150, 260, 300, !(v & 2), v, threads);
        }
}

static bool refuse_conv_integer(const rlx_graph *g, rlx_node id)
{
    return g->nodes[id].op != RLX_OP_CONV_INTEGER && rlx_cpu_backend()->supports(g, id);
}

/* The graph lowered for a target without conv_integer (its decomposition:
 * an f32 conv of the differences, exact at these sizes) gives `want`. */
static void check_decomposition(rlx_graph *g, const uint8_t *x, size_t nx, const uint8_t *w, size_t nw,
                                const int32_t *want, size_t ny)
{
    rlx_pass_ctx pc;
    memset(&pc, 0, sizeof pc);
    pc.supports = refuse_conv_integer;
    pc.precision = RLX_PRECISION_F32;
    rlx_graph *low = rlx_pass_lower(g, &pc);
    assert_non_null(low);
    for (int i = 0; i < low->n_nodes; i++)
        assert_int_not_equal(low->nodes[i].op, RLX_OP_CONV_INTEGER);
    rlx_session *s = compile_threads(low, 1, true);
    int32_t *y = malloc(ny * 4);
    assert_int_equal(rlx_session_set_input(s, "x", x, nx), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "w", w, nw), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", y, ny * 4), RLX_OK);
    assert_memory_equal(y, want, ny * 4);
    rlx_session_free(s);
    rlx_graph_free(low);
    free(y);
}

typedef struct conv_cfg {
    int64_t N, C, H, W, O, KH, KW, G, sh, sw, ph, pw, dh, dw;
    bool one_d, x_signed, w_signed, per_ch, const_w;
} conv_cfg;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d)
{
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

static void conv_case(conv_cfg c, int threads)
{
    int64_t Cg = c.C / c.G, Og = c.O / c.G;
    int64_t OH = out_dim(c.H, c.KH, c.sh, c.ph, c.dh), OW = out_dim(c.W, c.KW, c.sw, c.pw, c.dw);
    int64_t nx = c.N * c.C * c.H * c.W, nw = c.O * Cg * c.KH * c.KW, ny = c.N * c.O * OH * OW;
    uint8_t *x = malloc((size_t)nx), *w = malloc((size_t)nw), zx = (uint8_t)(rnd() % 200 + 20),
            *zw = malloc((size_t)c.O);
    fill(x, nx);
    fill(w, nw);
    for (int64_t o = 0; o < c.O; o++)
        zw[o] = (uint8_t)(c.w_signed ? rnd() % 21 - 10 : 118 + rnd() % 21);
    rlx_dtype xt = c.x_signed ? RLX_I8 : RLX_U8, wt = c.w_signed ? RLX_I8 : RLX_U8;
    rlx_graph *g = rlx_graph_new();
    int r = c.one_d ? 3 : 4;
    int64_t xd[4] = {c.N, c.C, c.H, c.W}, wd[4] = {c.O, Cg, c.KH, c.KW};
    if (c.one_d)
        xd[2] = c.W, wd[2] = c.KW;
    rlx_node xn = rlx_input(g, "x", xt, r, xd);
    rlx_node wn = c.const_w ? rlx_constant(g, wt, r, wd, w, (size_t)nw) : rlx_input(g, "w", wt, r, wd);
    rlx_node zxn = rlx_constant(g, xt, 0, NULL, &zx, 1);
    rlx_node zwn = c.per_ch ? rlx_constant(g, wt, 1, &c.O, zw, (size_t)c.O) : rlx_constant(g, wt, 0, NULL, zw, 1);
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    p.groups = c.G;
    if (c.one_d) {
        p.stride[0] = c.sw, p.dilation[0] = c.dw, p.pads[0] = p.pads[1] = c.pw;
    } else {
        p.stride[0] = c.sh, p.stride[1] = c.sw, p.dilation[0] = c.dh, p.dilation[1] = c.dw;
        p.pads[0] = p.pads[2] = c.ph, p.pads[1] = p.pads[3] = c.pw;
    }
    rlx_node y = rlx_conv_integer(g, xn, wn, zxn, zwn, &p);
    if (y < 0)
        fail_msg("conv_integer: %s", rlx_last_error());
    assert_int_equal(rlx_output(g, "y", y), RLX_OK);
    rlx_session *s = compile_threads(g, threads, true);
    int32_t *got = malloc((size_t)ny * 4);
    assert_int_equal(rlx_session_set_input(s, "x", x, (size_t)nx), RLX_OK);
    if (!c.const_w)
        assert_int_equal(rlx_session_set_input(s, "w", w, (size_t)nw), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", got, (size_t)ny * 4), RLX_OK);
    for (int64_t b = 0; b < c.N; b++)
        for (int64_t o = 0; o < c.O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    int64_t sum = 0, gi = o / Og, z = val(zw, c.per_ch ? o : 0, c.w_signed);
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < c.KH; kh++)
                            for (int64_t kw = 0; kw < c.KW; kw++) {
                                int64_t ih = oh * c.sh - c.ph + kh * c.dh, iw = ow * c.sw - c.pw + kw * c.dw;
                                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W)
                                    continue;
                                int64_t xi = ((b * c.C + gi * Cg + ci) * c.H + ih) * c.W + iw;
                                int64_t wi = ((o * Cg + ci) * c.KH + kh) * c.KW + kw;
                                sum +=
                                    (val(x, xi, c.x_signed) - val(&zx, 0, c.x_signed)) * (val(w, wi, c.w_signed) - z);
                            }
                    int64_t yi = ((b * c.O + o) * OH + oh) * OW + ow;
                    if (got[yi] != (int32_t)sum)
                        fail_msg("conv_integer: y[%lld][%lld][%lld][%lld] = %d, reference %lld", (long long)b,
                                 (long long)o, (long long)oh, (long long)ow, got[yi], (long long)sum);
                }
    if (!c.const_w && threads == 1)
        check_decomposition(g, x, (size_t)nx, w, (size_t)nw, got, (size_t)ny);
    rlx_session_free(s);
    rlx_graph_free(g);
    free(x), free(w), free(zw), free(got);
}

static void test_conv_integer(void **state)
{
    (void)state;
    /* N C H W O KH KW G sh sw ph pw dh dw; one_d x_signed w_signed per_ch const_w */
    static const conv_cfg cfgs[] = {
        {2, 3, 9, 11, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, true, true, true},
        {1, 16, 7, 7, 24, 1, 1, 1, 1, 1, 0, 0, 1, 1, false, false, true, false, true}, /* 1x1 */
        {1, 8, 12, 10, 8, 3, 3, 4, 2, 2, 1, 1, 1, 1, false, true, false, true, false}, /* groups, stride 2 */
        {1, 6, 10, 13, 6, 3, 3, 6, 1, 1, 2, 2, 2, 2, false, true, true, true, true},   /* depthwise, dilation */
        {2, 5, 1, 40, 7, 1, 5, 1, 1, 3, 0, 2, 1, 1, true, false, false, false, false}, /* 1-D */
        {1, 4, 50, 60, 33, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, false, true, true, true}, /* many pixels, ragged O */
    };
    for (int threads = 1; threads <= 2; threads++)
        for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++)
            conv_case(cfgs[i], threads);
}

static void test_bad_operands(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_conv_params p;
    rlx_conv_params_init(&p);
    uint8_t z[3] = {0, 0, 0};
    rlx_node xf = rlx_input(g, "xf", RLX_F32, 4, (int64_t[]){1, 2, 5, 5});
    rlx_node x = rlx_input(g, "x", RLX_U8, 4, (int64_t[]){1, 2, 5, 5});
    rlx_node w = rlx_input(g, "w", RLX_I8, 4, (int64_t[]){4, 2, 3, 3});
    rlx_node zu = rlx_constant(g, RLX_U8, 0, NULL, z, 1), zs = rlx_constant(g, RLX_I8, 0, NULL, z, 1);
    assert_true(rlx_conv_integer(g, xf, w, zu, zs, &p) < 0);
    assert_non_null(strstr(rlx_last_error(), "u8/i8"));
    rlx_node z3 = rlx_constant(g, RLX_I8, 1, (int64_t[]){3}, z, 3);
    assert_true(rlx_conv_integer(g, x, w, zu, z3, &p) < 0);
    assert_non_null(strstr(rlx_last_error(), "[O]"));
    rlx_node w5 = rlx_input(g, "w5", RLX_I8, 4, (int64_t[]){4, 3, 3, 3});
    assert_true(rlx_conv_integer(g, x, w5, zu, zs, &p) < 0);
    assert_true(rlx_conv_integer(g, x, w, zu, zs, NULL) < 0);
    assert_non_null(strstr(rlx_last_error(), "params"));
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qlinear_matmul),
        cmocka_unit_test(test_conv_integer),
        cmocka_unit_test(test_bad_operands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
