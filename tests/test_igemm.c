/* The 8-bit integer products (src/quant/igemm.h) and the matmul_integer op
 * against an int64 reference on fresh random data: every kernel the
 * processor has (scalar, AVX2, AVX-512 VNNI), u8/s8 operands both ways,
 * zero points at the range's ends and middle (0, 128, 255; -128, 0, 127),
 * per-tensor and per-column, operands at their extremes, odd K, K past
 * the kernels' chunk, one-row products, ragged columns, blocks split as
 * threads split them; then the op through a compiled graph with constant
 * (packed at prepare) and run-time weights, on 1 and 2 threads, and a bad
 * operand refused with a message.  Results must be equal to the bit;
 * the fused rescale (matmul_integer_scale) within 1e-5 of a float64
 * reference on the exact sums; dynamic quantization's two ops to the bit
 * against the specification's f32 arithmetic. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "quant/igemm.h"
#include "rlx.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Random bytes; with `extreme`, each row (of len bytes) may be all one end
 * of the range, so the sums reach their largest magnitudes. */
static void fill(uint8_t *p, int64_t rows, int64_t len, bool is_signed)
{
    for (int64_t r = 0; r < rows; r++) {
        int mode = rnd() % 6;
        for (int64_t i = 0; i < len; i++) {
            uint8_t v = (uint8_t)rnd();
            if (mode == 0)
                v = is_signed ? 0x80 : 0xff; /* -128 or 255 */
            else if (mode == 1)
                v = is_signed ? 0x7f : 0x00; /* 127 or 0 */
            p[r * len + i] = v;
        }
    }
}

static int64_t val(const uint8_t *p, int64_t i, bool is_signed) { return is_signed ? (int8_t)p[i] : p[i]; }

/* int64 sums, wrapped to int32 as the op's int32 result does. */
static void reference(const uint8_t *a, bool as, const uint8_t *b, bool bs, int64_t m, int64_t k, int64_t n, int64_t za,
                      const int64_t *zb, bool per_col, int32_t *c)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t s = 0, z = zb[per_col ? j : 0];
            for (int64_t q = 0; q < k; q++)
                s += (val(a, i * k + q, as) - za) * (val(b, q * n + j, bs) - z);
            c[i * n + j] = (int32_t)(uint32_t)(uint64_t)s;
        }
}

/* The graph compiled for the CPU with `threads` threads; fails the test if it does not compile. */
static rlx_session *compile_threads(rlx_graph *g, int threads)
{
    rlx_options o;
    rlx_options_init(&o);
    o.threads = threads;
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        fail_msg("compile: %s", rlx_last_error());
    return s;
}

static const int64_t shapes[][3] = {
    {1, 1, 1},   {1, 64, 16},   {1, 3, 17},    {2, 5, 33},     {7, 17, 15}, {6, 64, 32}, {13, 63, 47},
    {5, 100, 1}, {9, 1029, 40}, {1, 2051, 70}, {25, 257, 129}, {12, 4, 16}, {3, 2, 31},  {64, 96, 64},
};
static const int za_u8[] = {0, 128, 255}, za_s8[] = {-128, 0, 127};

/* One case on one kernel: igemm.h's u8 x s8 form made from the operands as
 * the CPU kernel makes it, blocks split in two along rows and panels. */
static void run_case(rlx_igemm_isa isa, int64_t m, int64_t k, int64_t n, bool as, bool bs, int zsel, bool per_col)
{
    uint8_t *a = malloc((size_t)(m * k) + 1), *b = malloc((size_t)(k * n) + 1), *au = malloc((size_t)(m * k) + 1);
    int32_t *c = malloc((size_t)(m * n) * 4), *ref = malloc((size_t)(m * n) * 4), *rowsum = malloc((size_t)m * 4);
    int64_t *zb = malloc((size_t)n * 8);
    int32_t *zb32 = malloc((size_t)n * 4);
    void *packed = malloc(rlx_igemm_packed_bytes(k, n));
    assert_non_null(packed);
    fill(a, m, k, as);
    fill(b, k, n, bs);
    int64_t za = as ? za_s8[zsel] : za_u8[zsel];
    for (int64_t j = 0; j < n; j++)
        zb[j] = per_col ? (bs ? (int8_t)rnd() : (uint8_t)rnd()) : (bs ? za_s8[(zsel + 1) % 3] : za_u8[(zsel + 1) % 3]);
    if (per_col && n > 2) { /* the ends of the range too */
        zb[0] = bs ? -128 : 0;
        zb[1] = bs ? 127 : 255;
    }
    reference(a, as, b, bs, m, k, n, za, zb, per_col, ref);
    for (int64_t i = 0; i < m * k; i++)
        au[i] = as ? a[i] ^ 0x80 : a[i];
    for (int64_t j = 0; j < n; j++)
        zb32[j] = (int32_t)zb[j] - (bs ? 0 : 128);
    rlx_igemm_pack_b(b, bs, k, n, n, packed);
    rlx_igemm_row_sums(au, k, m, k, rowsum);
    rlx_igemm_args g = {.m = m,
                        .k = k,
                        .n = n,
                        .a = au,
                        .lda = k,
                        .packed = packed,
                        .za = (int32_t)za + (as ? 128 : 0),
                        .zb = zb32,
                        .zb_per_col = per_col,
                        .rowsum = rowsum,
                        .c = c,
                        .ldc = n};
    memset(c, 0x5a, (size_t)(m * n) * 4);
    int64_t np = rlx_igemm_panels(n), mi = m / 2, pi = np / 2;
    rlx_igemm_block(isa, &g, 0, mi, 0, pi);
    rlx_igemm_block(isa, &g, mi, m, 0, pi);
    rlx_igemm_block(isa, &g, 0, mi, pi, np);
    rlx_igemm_block(isa, &g, mi, m, pi, np);
    for (int64_t i = 0; i < m * n; i++)
        if (c[i] != ref[i]) {
            fail_msg("%s: m %lld k %lld n %lld a %s b %s za %lld zb%s: C[%lld] = %d, reference %d",
                     rlx_igemm_isa_name(isa), (long long)m, (long long)k, (long long)n, as ? "s8" : "u8",
                     bs ? "s8" : "u8", (long long)za, per_col ? " per column" : "", (long long)i, c[i], ref[i]);
        }
    free(a), free(b), free(au), free(c), free(ref), free(rowsum), free(zb), free(zb32), free(packed);
}

static void test_kernels(void **state)
{
    (void)state;
    int tried = 0;
    for (int isa = 0; isa < RLX_IGEMM_ISA_COUNT; isa++) {
        if (!rlx_igemm_isa_available((rlx_igemm_isa)isa)) {
            printf("igemm: no %s on this processor, not tested\n", rlx_igemm_isa_name((rlx_igemm_isa)isa));
            continue;
        }
        tried++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int ty = 0; ty < 4; ty++)
                for (int z = 0; z < 3; z++)
                    run_case((rlx_igemm_isa)isa, shapes[s][0], shapes[s][1], shapes[s][2], ty & 1, ty & 2, z, z == 2);
    }
    assert_true(tried >= 1);
}

/* --------------------------------------------------------- the op */

static void graph_case(int64_t m, int64_t k, int64_t n, bool as, bool bs, bool constant_b, int threads)
{
    rlx_dtype at = as ? RLX_I8 : RLX_U8, bt = bs ? RLX_I8 : RLX_U8;
    uint8_t *a = malloc((size_t)(2 * m * k)), *b = malloc((size_t)(k * n)), za = as ? 0x80 : 255,
            *zb = malloc((size_t)n);
    int32_t *c = malloc((size_t)(2 * m * n) * 4), *ref = malloc((size_t)(2 * m * n) * 4);
    int64_t *zb64 = malloc((size_t)n * 8);
    fill(a, 2 * m, k, as);
    fill(b, k, n, bs);
    for (int64_t j = 0; j < n; j++) {
        zb[j] = (uint8_t)rnd();
        zb64[j] = bs ? (int8_t)zb[j] : zb[j];
    }
    reference(a, as, b, bs, 2 * m, k, n, as ? -128 : 255, zb64, true, ref);
    rlx_graph *gr = rlx_graph_new();
    rlx_node x = rlx_input(gr, "a", at, 3, (int64_t[]){2, m, k});
    rlx_node w = constant_b ? rlx_constant(gr, bt, 2, (int64_t[]){k, n}, b, (size_t)(k * n))
                            : rlx_param(gr, "b", bt, 2, (int64_t[]){k, n});
    rlx_node y =
        rlx_matmul_integer(gr, x, w, rlx_constant(gr, at, 0, NULL, &za, 1), rlx_constant(gr, bt, 1, &n, zb, (size_t)n));
    assert_int_equal(rlx_output(gr, "y", y), RLX_OK);
    rlx_session *s = compile_threads(gr, threads);
    if (!constant_b)
        assert_int_equal(rlx_session_set_param(s, "b", b, (size_t)(k * n)), RLX_OK);
    assert_int_equal(rlx_session_set_input(s, "a", a, (size_t)(2 * m * k)), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", c, (size_t)(2 * m * n) * 4), RLX_OK);
    for (int64_t i = 0; i < 2 * m * n; i++)
        if (c[i] != ref[i])
            fail_msg("op: m %lld k %lld n %lld %s b, %d threads: y[%lld] = %d, reference %d", (long long)m,
                     (long long)k, (long long)n, constant_b ? "constant" : "run-time", threads, (long long)i, c[i],
                     ref[i]);
    rlx_session_free(s);
    rlx_graph_free(gr);
    free(a), free(b), free(zb), free(c), free(ref), free(zb64);
}

static void test_op(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 2; threads++)
        for (int ty = 0; ty < 4; ty++) {
            graph_case(1, 7, 5, ty & 1, ty & 2, true, threads);
            graph_case(100, 333, 200, ty & 1, ty & 2, ty & 1, threads);
            graph_case(130, 1030, 70, ty & 1, ty & 2, !(ty & 1), threads);
        }
}

/* act(f32(matmul_integer) * scale + bias) fuses into one node (one
 * compute thunk) whose results match a float64 reference on the exact
 * sums; scale per column or one element, with and without bias and GELU. */
static void scaled_case(int64_t m, int64_t k, int64_t n, bool per_col, bool bias, bool gelu, int threads)
{
    uint8_t *a = malloc((size_t)(m * k)), *b = malloc((size_t)(k * n)), za = 77, zb = 0;
    float *sc = malloc((size_t)n * 4), *bb = malloc((size_t)n * 4), *y = malloc((size_t)(m * n) * 4);
    int32_t *acc = malloc((size_t)(m * n) * 4);
    int64_t zb64 = 0;
    fill(a, m, k, false);
    fill(b, k, n, true);
    for (int64_t j = 0; j < n; j++) {
        sc[j] = 1e-4f * (float)(1 + rnd() % 1000);
        bb[j] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
    }
    reference(a, false, b, true, m, k, n, za, &zb64, false, acc);
    rlx_graph *gr = rlx_graph_new();
    rlx_node x = rlx_input(gr, "a", RLX_U8, 2, (int64_t[]){m, k});
    rlx_node w = rlx_constant(gr, RLX_I8, 2, (int64_t[]){k, n}, b, (size_t)(k * n));
    rlx_node yi = rlx_matmul_integer(gr, x, w, rlx_constant(gr, RLX_U8, 0, NULL, &za, 1),
                                     rlx_constant(gr, RLX_I8, 0, NULL, &zb, 1));
    rlx_node s =
        per_col ? rlx_constant(gr, RLX_F32, 1, &n, sc, (size_t)n * 4) : rlx_constant(gr, RLX_F32, 0, NULL, sc, 4);
    rlx_node out = rlx_mul(gr, rlx_cast(gr, yi, RLX_F32), s);
    if (bias)
        out = rlx_add(gr, out, rlx_constant(gr, RLX_F32, 1, &n, bb, (size_t)n * 4));
    if (gelu)
        out = rlx_gelu(gr, out);
    assert_int_equal(rlx_output(gr, "y", out), RLX_OK);
    rlx_session *ss = compile_threads(gr, threads);
    rlx_compile_stats st;
    assert_int_equal(rlx_session_stats(ss, &st), RLX_OK);
    assert_int_equal(st.thunks - st.noop_thunks, 1);
    assert_int_equal(rlx_session_set_input(ss, "a", a, (size_t)(m * k)), RLX_OK);
    assert_int_equal(rlx_session_run(ss), RLX_OK);
    assert_int_equal(rlx_session_get_output(ss, "y", y, (size_t)(m * n) * 4), RLX_OK);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double v = (double)acc[i * n + j] * sc[per_col ? j : 0] + (bias ? bb[j] : 0);
            if (gelu)
                v = 0.5 * v * (1 + erf(v / sqrt(2.0)));
            double got = y[i * n + j];
            if (fabs(got - v) > 1e-5 * fabs(v) + 1e-5)
                fail_msg("scaled: m %lld n %lld: y[%lld][%lld] = %.9g, reference %.9g", (long long)m, (long long)n,
                         (long long)i, (long long)j, got, v);
        }
    rlx_session_free(ss);
    rlx_graph_free(gr);
    free(a), free(b), free(sc), free(bb), free(y), free(acc);
}

static void test_scaled(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 2; threads++)
        for (int v = 0; v < 8; v++) {
            scaled_case(1, 19, 33, v & 1, v & 2, v & 4, threads);
            scaled_case(150, 260, 100, v & 1, v & 2, v & 4, threads);
        }
}

/* dynamic_quantize_range + quantize_u8 (DynamicQuantizeLinear) against
 * the specification's f32 arithmetic written out here, equal to the bit,
 * and each level within half a level (plus rounding) of the real-valued
 * x / scale + zero point; all-positive, all-negative and mixed inputs. */
static void dq_case(int64_t n, float lo, float hi, int threads)
{
    float *x = malloc((size_t)n * 4), range[2];
    uint8_t *y = malloc((size_t)n);
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (float)(rnd() % 1000001) / 1e6f;
    rlx_graph *gr = rlx_graph_new();
    rlx_node in = rlx_input(gr, "x", RLX_F32, 1, &n), r = rlx_dynamic_quantize_range(gr, in);
    assert_int_equal(rlx_output(gr, "r", r), RLX_OK);
    assert_int_equal(rlx_output(gr, "y", rlx_quantize_u8(gr, in, r)), RLX_OK);
    rlx_session *ss = compile_threads(gr, threads);
    assert_int_equal(rlx_session_set_input(ss, "x", x, (size_t)n * 4), RLX_OK);
    assert_int_equal(rlx_session_run(ss), RLX_OK);
    assert_int_equal(rlx_session_get_output(ss, "r", range, sizeof range), RLX_OK);
    assert_int_equal(rlx_session_get_output(ss, "y", y, (size_t)n), RLX_OK);
    float mx = 0, mn = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = x[i] > mx ? x[i] : mx;
        mn = x[i] < mn ? x[i] : mn;
    }
    volatile float diff = mx - mn, scale = diff / 255.0f, q = mn / scale, zp = rintf(0.0f - q);
    zp = zp < 0 ? 0 : zp > 255 ? 255 : zp;
    assert_true(range[0] == scale && range[1] == zp);
    for (int64_t i = 0; i < n; i++) {
        volatile float d = x[i] / scale, v = rintf(d) + zp;
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        if (y[i] != (uint8_t)v)
            fail_msg("quantize_u8: x[%lld] = %.9g: %d, reference %d", (long long)i, x[i], y[i], (int)v);
        double real = (double)x[i] / (double)scale + zp;
        if (real >= 0 && real <= 255)
            assert_true(fabs(y[i] - real) <= 0.5 + 1e-4);
    }
    rlx_session_free(ss);
    rlx_graph_free(gr);
    free(x), free(y);
}

static void test_dynamic_quantize(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        dq_case(1, 0.5f, 2.0f, threads);
        dq_case(1000, -3.0f, 7.0f, threads);
        dq_case(70001, 0.1f, 4.0f, threads);
        dq_case(4099, -9.0f, -0.01f, threads);
        dq_case(50000, -1e-3f, 2e-3f, threads);
    }
}

static void test_bad_operands(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node a = rlx_input(g, "a", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node b = rlx_input(g, "b", RLX_I8, 2, (int64_t[]){3, 4});
    uint8_t z = 0;
    rlx_node y =
        rlx_matmul_integer(g, a, b, rlx_constant(g, RLX_U8, 0, NULL, &z, 1), rlx_constant(g, RLX_I8, 0, NULL, &z, 1));
    assert_true(y < 0);
    assert_non_null(strstr(rlx_last_error(), "u8/i8"));
    rlx_node a8 = rlx_input(g, "a8", RLX_U8, 2, (int64_t[]){2, 5});
    y = rlx_matmul_integer(g, a8, b, rlx_constant(g, RLX_U8, 0, NULL, &z, 1), rlx_constant(g, RLX_I8, 0, NULL, &z, 1));
    assert_true(y < 0);
    assert_non_null(strstr(rlx_last_error(), "[K, N]"));
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels),          cmocka_unit_test(test_op),           cmocka_unit_test(test_scaled),
        cmocka_unit_test(test_dynamic_quantize), cmocka_unit_test(test_bad_operands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
