/* The quantized types (src/quant): f16 conversion exact for every bit
 * pattern; dequantization against a float64 reading of each block written
 * here from the format (fields decoded bit by bit, element by element), on
 * random blocks and on crafted ones (extreme, -0, subnormal, infinite and
 * NaN scales, all-min and all-max levels), where every element must be the
 * f32 nearest to the float64 value (each element is one rounding of an
 * exact product or sum, see check_block); quantization round trips against
 * a float64 bound per type; non-finite inputs; the dot products, scalar and
 * AVX2, against the float64 dot of the dequantized weights and activations,
 * on many lengths and misaligned rows.  The bit-exact comparison with
 * ggml's own dequantizers and the error against ggml's quantizers are in
 * tests/quant/quant_ggml.c. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/dtype.h"
#include "core/error.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "quant/quant_units.h"
#include "quant_testutil.h"

/* ------------------------------------------------ float64 reading */

/* f16 bits -> double, from the IEEE definition (NaN: a NaN of that sign). */
static double ref_f16(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 31)
        v = mant ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp(mant, -24);
    else
        v = ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static int bit(const uint8_t *p, int i) { return (p[i / 8] >> (i % 8)) & 1; }

/* Q4_K/Q5_K scale and min of sub-block j, from the format's packing. */
static void ref_k4(const uint8_t *s, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Element e of one block: its value, split as dpart - mpart (scale times
 * level, and the min or offset), in the format's order of operations. */
static double ref_elem(int t, const uint8_t *b, int e, double *dpart, double *mpart)
{
    double d, m = 0, dp;
    int q;
    switch (t) {
    case RLX_GGML_Q8_0: dp = (double)(int8_t)b[2 + e] * ref_f16(get16(b)); break;
    case RLX_GGML_Q4_0:
    case RLX_GGML_Q4_1: {
        const uint8_t *qs = b + (t == RLX_GGML_Q4_0 ? 2 : 4);
        q = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
        d = ref_f16(get16(b));
        if (t == RLX_GGML_Q4_0) {
            dp = (double)(q - 8) * d;
        } else {
            dp = (double)q * d;
            m = -ref_f16(get16(b + 2));
        }
        break;
    }
    case RLX_GGML_Q5_0:
    case RLX_GGML_Q5_1: {
        int at = t == RLX_GGML_Q5_0 ? 2 : 4;
        const uint8_t *qs = b + at + 4;
        q = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | bit(b + at, e) << 4;
        d = ref_f16(get16(b));
        if (t == RLX_GGML_Q5_0) {
            dp = (double)(q - 16) * d;
        } else {
            dp = (double)q * d;
            m = -ref_f16(get16(b + 2));
        }
        break;
    }
    case RLX_GGML_Q4_K:
    case RLX_GGML_Q5_K: {
        bool five = t == RLX_GGML_Q5_K;
        const uint8_t *qs = b + (five ? 48 : 16);
        int c = e / 64, r = e % 64, sc, mn;
        q = r < 32 ? qs[32 * c + r] & 15 : qs[32 * c + r - 32] >> 4;
        if (five)
            q |= ((b[16 + r % 32] >> (2 * c + (r >= 32))) & 1) << 4;
        ref_k4(b + 4, e / 32, &sc, &mn);
        dp = (ref_f16(get16(b)) * sc) * q;
        m = ref_f16(get16(b + 2)) * mn;
        break;
    }
    case RLX_GGML_Q6_K: {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        int byte = b[64 * h + l + (k & 1) * 32];
        q = (k < 2 ? byte & 15 : byte >> 4) | ((b[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
        dp = (ref_f16(get16(b + 208)) * (int8_t)b[192 + e / 16]) * (q - 32);
        break;
    }
    case RLX_GGML_Q8_K: {
        float df;
        memcpy(&df, b, 4);
        dp = (double)df * (int8_t)b[4 + e];
        break;
    }
    default: fail_msg("type %d", t); return 0;
    }
    if (dpart)
        *dpart = dp;
    if (mpart)
        *mpart = m;
    return dp - m;
}

static int64_t belems(int t) { return rlx_quant_block_elems(t); }
static size_t bbytes(int t) { return rlx_quant_block_bytes(t); }

static void random_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)qt_u64();
}

/* Every element e of the block at b against the float64 reading: the f32
 * the library returns must be (float) of the float64 value, bit for bit
 * (NaN: both NaN).  The float64 value is exact (levels have at most 8 bits,
 * f16 scales 11, so products and the one sum of a min fit in 53 bits), and
 * each library element is one rounded f32 operation on exact operands. */
static void check_block(int t, const uint8_t *b, const char *what)
{
    float out[256];
    assert_int_equal(rlx_dequantize_row(t, b, out, belems(t)), RLX_OK);
    for (int e = 0; e < belems(t); e++) {
        double want = ref_elem(t, b, e, NULL, NULL);
        float wf = (float)want;
        if (isnan(want) && isnan(out[e]))
            continue;
        uint32_t gb, wb;
        memcpy(&gb, &out[e], 4);
        memcpy(&wb, &wf, 4);
        if (gb != wb)
            fail_msg("%s %s element %d: %a (0x%08x), float64 reading %a (0x%08x)", rlx_ggml_type_name(t), what, e,
                     (double)out[e], gb, want, wb);
    }
}

/* ---------------------------------------------------------------- f16 */

static void test_f16_every_pattern(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = rlx_f16_to_f32((uint16_t)h);
        assert_true(rlx_f16_to_f32_inline((uint16_t)h) == f || isnan(f));
        double want = ref_f16((uint16_t)h);
        uint32_t bits;
        memcpy(&bits, &f, 4);
        assert_int_equal(bits >> 31, h >> 15); /* sign, also of -0 and NaN */
        if (isnan(want)) {
            assert_true(isnan(f));
            assert_int_equal((bits >> 13) & 1023, h & 1023); /* payload kept */
            continue;
        }
        if ((double)f != want)
            fail_msg("f16 0x%04x: %a, want %a", h, (double)f, want);
        /* back to f16: every f16 value is a fixed point */
        if (rlx_f32_to_f16(f) != h)
            fail_msg("f16 0x%04x -> %a -> 0x%04x", h, (double)f, rlx_f32_to_f16(f));
    }
    /* halfway between neighbouring finite f16 values: to the even one */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double lo = ref_f16((uint16_t)h), hi = ref_f16((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact in f32 */
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(rlx_f32_to_f16(mid), want);
        assert_int_equal(rlx_f32_to_f16(-mid), want | 0x8000);
    }
}

/* ------------------------------------------------------------- sizes */

static void test_sizes(void **state)
{
    (void)state;
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        int64_t be;
        size_t bb;
        assert_true(rlx_qtype_supported(t));
        assert_true(rlx_ggml_type_size(t, &be, &bb)); /* the GGUF reader's table */
        assert_int_equal(be, belems(t));
        assert_int_equal(bb, bbytes(t));
        assert_int_equal(rlx_quant_row_bytes(t, 4 * be), 4 * bb);
        assert_int_equal(rlx_quant_row_bytes(t, be + 1), 0);
    }
    int unsupported[] = {RLX_GGML_F32, RLX_GGML_F16, RLX_GGML_Q8_1, RLX_GGML_Q2_K, RLX_GGML_IQ4_NL, -1, 1000};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        int t = unsupported[i];
        float x[256] = {0};
        uint8_t b[512];
        assert_false(rlx_qtype_supported(t));
        assert_int_equal(rlx_quant_row_bytes(t, 256), 0);
        assert_int_equal(rlx_quant_act_type(t), -1);
        assert_int_equal(rlx_dequantize_row(t, b, x, 256), RLX_ERR_UNSUPPORTED);
        assert_non_null(strstr(rlx_last_error(), "not a supported quantized type"));
        assert_int_equal(rlx_quantize_row(t, x, b, 256), RLX_ERR_UNSUPPORTED);
        assert_int_equal(rlx_quantize_act(t, x, b, 256), RLX_ERR_UNSUPPORTED);
        assert_true(isnan(rlx_quant_vec_dot(t, 256, b, b)));
    }
    float x[300] = {0};
    uint8_t b[1024] = {0};
    assert_int_equal(rlx_quantize_row(RLX_GGML_Q4_K, x, b, 288), RLX_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(rlx_last_error(), "multiple of 256"));
    assert_int_equal(rlx_dequantize_row(RLX_GGML_Q4_0, b, x, 33), RLX_ERR_INVALID_ARGUMENT);
    assert_true(isnan(rlx_quant_vec_dot(RLX_GGML_Q4_0, 48, b, b)));
    assert_int_equal(rlx_quant_act_type(RLX_GGML_Q5_1), RLX_GGML_Q8_0);
    assert_int_equal(rlx_quant_act_type(RLX_GGML_Q6_K), RLX_GGML_Q8_K);
    assert_int_equal(rlx_quant_act_bytes(RLX_GGML_Q4_0, 64), 2 * 34);
    assert_int_equal(rlx_quant_act_bytes(RLX_GGML_Q4_K, 512), 2 * 292);
}

/* ------------------------------------------------------- dequantize */

/* byte offsets of a type's scale fields (f16, Q8_K: f32) */
static int scale_fields(int t, int off[2])
{
    switch (t) {
    case RLX_GGML_Q8_0:
    case RLX_GGML_Q4_0:
    case RLX_GGML_Q5_0: off[0] = 0; return 1;
    case RLX_GGML_Q6_K: off[0] = 208; return 1;
    case RLX_GGML_Q8_K: off[0] = 0; return 1;
    default: off[0] = 0, off[1] = 2; return 2; /* d and m/dmin */
    }
}

static void test_dequantize_random(void **state)
{
    (void)state;
    qt_seed(1);
    uint8_t b[292 + 1];
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        for (int rep = 0; rep < 2000; rep++) {
            random_bytes(b, sizeof b);
            /* every byte random, so also f16 scales of any class; from an
             * odd address (rows may start anywhere) */
            check_block(t, b + 1, "random block");
        }
    }
}

static void test_dequantize_crafted(void **state)
{
    (void)state;
    static const uint16_t h16[] = {
        0x0000, 0x8000,                         /* +-0 */
        0x0001, 0x8001, 0x03ff, 0x83ff,         /* subnormal */
        0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff, /* normal, max */
        0x7c00, 0xfc00,                         /* inf */
        0x7e00, 0xfe00, 0x7c01, 0x7dff          /* NaN: quiet, negative, signalling */
    };
    static const float f32s[] = {0.0f,  -0.0f,   1e-45f,   -1e-45f,  FLT_MIN,   1.0f,
                                 -3.5f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN};
    enum { NH = sizeof h16 / sizeof h16[0], NF = sizeof f32s / sizeof f32s[0] };
    qt_seed(2);
    uint8_t b[292];
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        int off[2];
        int nf = scale_fields(t, off);
        for (int fill = 0; fill < 3; fill++) { /* levels: all 0x00, all 0xff, random */
            for (int a = 0; a < (t == RLX_GGML_Q8_K ? NF : NH); a++)
                for (int c = 0; c < (nf == 2 ? NH : 1); c++) {
                    if (fill == 2)
                        random_bytes(b, sizeof b);
                    else
                        memset(b, fill ? 0xff : 0x00, sizeof b);
                    if (t == RLX_GGML_Q8_K) {
                        memcpy(b, &f32s[a], 4);
                    } else {
                        memcpy(b + off[0], &h16[a], 2);
                        if (nf == 2)
                            memcpy(b + off[1], &h16[c], 2);
                    }
                    check_block(t, b, fill == 0 ? "all-zero levels" : fill == 1 ? "all-max levels" : "crafted");
                }
        }
    }
    /* a whole row: blocks independent of each other */
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        size_t nb = 7;
        uint8_t *row = malloc(nb * bbytes(t));
        float *out = malloc(nb * belems(t) * sizeof *out);
        random_bytes(row, nb * bbytes(t));
        assert_int_equal(rlx_dequantize_row(t, row, out, (int64_t)nb * belems(t)), RLX_OK);
        for (size_t k = 0; k < nb; k++) {
            float one[256];
            assert_int_equal(rlx_dequantize_row(t, row + k * bbytes(t), one, belems(t)), RLX_OK);
            assert_memory_equal(one, out + k * belems(t), belems(t) * sizeof *out);
        }
        free(row);
        free(out);
    }
}

/* --------------------------------------------------------- quantize */

static void fill_normal(float *x, int64_t n, double scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(scale * qt_normal());
}

/* The float64 RMS error of an ideal uniform quantizer with the type's
 * levels over each (sub-)block's own range, its scales kept exact: steps of
 * range / (levels - 1) (min types; the K types' ranges start at 0 or below),
 * or amax / (levels / 2) (symmetric types, whose largest element sits at
 * the level without a positive twin; Q8: amax / 127), error step^2 / 12. */
static double ideal_rms(int t, const float *x, int64_t n)
{
    int sub, levels;
    bool sym;
    switch (t) {
    case RLX_GGML_Q8_0: sub = 32, levels = 255, sym = true; break;
    case RLX_GGML_Q4_0: sub = 32, levels = 16, sym = true; break;
    case RLX_GGML_Q5_0: sub = 32, levels = 32, sym = true; break;
    case RLX_GGML_Q4_1: sub = 32, levels = 16, sym = false; break;
    case RLX_GGML_Q5_1: sub = 32, levels = 32, sym = false; break;
    case RLX_GGML_Q4_K: sub = 32, levels = 16, sym = false; break;
    case RLX_GGML_Q5_K: sub = 32, levels = 32, sym = false; break;
    case RLX_GGML_Q6_K: sub = 16, levels = 64, sym = true; break;
    default: sub = 256, levels = 255, sym = true; break; /* Q8_K */
    }
    double sum = 0;
    for (int64_t i = 0; i < n; i += sub) {
        double lo = t == RLX_GGML_Q4_1 || t == RLX_GGML_Q5_1 ? x[i] : 0, hi = x[i], amax = 0;
        for (int j = 0; j < sub; j++) {
            lo = fmin(lo, x[i + j]);
            hi = fmax(hi, x[i + j]);
            amax = fmax(amax, fabs(x[i + j]));
        }
        double step = sym ? amax / (levels == 255 ? 127 : levels / 2) : (hi - lo) / (levels - 1);
        sum += sub * step * step / 12;
    }
    return sqrt(sum / n);
}

static double rms_error(int t, const float *x, int64_t n, float *y)
{
    uint8_t *q = malloc(rlx_quant_row_bytes(t, n));
    assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
    assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
    free(q);
    return sqrt(s / n);
}

/* The RMS error of each type on normal data, against the ideal quantizer
 * of ideal_rms: within 10% of it (the stored scales are rounded to f16,
 * the K types' sub-block scales to 6 or 8 bits, which the fits must win
 * back); and for the 32-element types every element within its bound. */
static void test_quantize_round_trip(void **state)
{
    (void)state;
    enum { N = 64 * 256 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        for (int s = 0; s < 3; s++) {
            qt_seed(10 + s);
            double scale = s == 0 ? 1.0 : s == 1 ? 3e-3 : 250.0;
            fill_normal(x, N, scale);
            double rms = rms_error(t, x, N, y), ideal = ideal_rms(t, x, N);
            print_message("%-5s scale %-6g rms error %.4g, ideal uniform quantizer %.4g (ratio %.3f)\n",
                          rlx_ggml_type_name(t), scale, rms, ideal, rms / ideal);
            assert_true(rms <= 1.10 * ideal);
            if (belems(t) != 32)
                continue;
            for (int64_t b = 0; b < N; b += 32) {
                double lo = x[b], hi = x[b], amax = 0;
                for (int j = 0; j < 32; j++) {
                    lo = fmin(lo, x[b + j]);
                    hi = fmax(hi, x[b + j]);
                    amax = fmax(amax, fabs(x[b + j]));
                }
                /* half a step; a whole step at the symmetric types' top level
                 * (the positive twin of the anchor is missing); plus the f16
                 * rounding of the scale and min (2^-11 relative each) */
                double bound;
                switch (t) {
                case RLX_GGML_Q8_0: bound = 0.5 * amax / 127; break;
                case RLX_GGML_Q4_0: bound = amax / 8; break;
                case RLX_GGML_Q5_0: bound = amax / 16; break;
                case RLX_GGML_Q4_1: bound = 0.5 * (hi - lo) / 15; break;
                default: bound = 0.5 * (hi - lo) / 31; break;
                }
                bound += 0x1p-10 * (amax + fabs(lo));
                for (int j = 0; j < 32; j++)
                    if (fabs((double)y[b + j] - x[b + j]) > bound)
                        fail_msg("%s element %lld: %g -> %g, error above %g", rlx_ggml_type_name(t), (long long)(b + j),
                                 x[b + j], y[b + j], bound);
            }
        }
    }
    free(x);
    free(y);
}

/* Constant blocks, zeros, one spike, sub-blocks of very different sizes:
 * finite scales, exact zeros, and exact constants where the format can
 * hold them. */
static void test_quantize_shapes(void **state)
{
    (void)state;
    float x[512], y[512];
    uint8_t q[2 * 292];
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        int n = (int)belems(t) * 2;
        memset(x, 0, sizeof x);
        assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
        assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
        for (int j = 0; j < n; j++)
            assert_true(y[j] == 0.0f);
        /* -1.5 everywhere: within the f16 rounding of the scale (or min) */
        for (int j = 0; j < n; j++)
            x[j] = -1.5f;
        assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
        assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
        for (int j = 0; j < n; j++)
            if (!(fabsf(y[j] + 1.5f) <= 1.5f * 0x1p-10f))
                fail_msg("%s constant -1.5 -> %a at %d", rlx_ggml_type_name(t), (double)y[j], j);
        /* sub-blocks from 1e-3 to 1e3: finite, and the largest kept within
         * the format's resolution of the block */
        qt_seed(3);
        double amax = 0;
        for (int j = 0; j < n; j++) {
            x[j] = (float)(qt_normal() * pow(10.0, (j / 16) % 7 - 3));
            amax = fmax(amax, fabs(x[j]));
        }
        assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
        assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
        for (int j = 0; j < n; j++) {
            assert_true(isfinite(y[j]));
            assert_true(fabs((double)y[j] - x[j]) <= amax / 4);
        }
    }
}

/* NaN quantizes as 0 and +-inf as +-FLT_MAX (quant.h): the blocks are the
 * same bytes as for those values, and every value read back is finite;
 * values beyond the f16 scale range saturate to finite values. */
static void test_quantize_nonfinite(void **state)
{
    (void)state;
    float x[512], x2[512], y[512];
    uint8_t q[2 * 292], q2[2 * 292];
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        int n = (int)belems(t) * 2;
        size_t bytes = rlx_quant_row_bytes(t, n);
        qt_seed(4);
        fill_normal(x, n, 1.0);
        memcpy(x2, x, sizeof x);
        x[3] = NAN, x2[3] = 0;
        x[n - 1] = -NAN, x2[n - 1] = 0;
        x[n / 2 + 5] = INFINITY, x2[n / 2 + 5] = FLT_MAX;
        x[n / 2 + 6] = -INFINITY, x2[n / 2 + 6] = -FLT_MAX;
        assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
        assert_int_equal(rlx_quantize_row(t, x2, q2, n), RLX_OK);
        assert_memory_equal(q, q2, bytes);
        assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
        for (int j = 0; j < n; j++)
            assert_true(isfinite(y[j]));
        /* the spikes saturate at the largest magnitude the block can take */
        assert_true(y[n / 2 + 5] > 1e4f);
        assert_true(y[n / 2 + 6] < -1e4f);
        /* all NaN: zeros */
        for (int j = 0; j < n; j++)
            x[j] = NAN;
        assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
        assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
        for (int j = 0; j < n; j++)
            assert_true(y[j] == 0.0f);
        /* huge and tiny finite values */
        for (int j = 0; j < n; j++)
            x[j] = (j % 2 ? 1e30f : -1e-40f) * (float)(1 + j % 5);
        assert_int_equal(rlx_quantize_row(t, x, q, n), RLX_OK);
        assert_int_equal(rlx_dequantize_row(t, q, y, n), RLX_OK);
        for (int j = 0; j < n; j++)
            assert_true(isfinite(y[j]));
    }
}

/* --------------------------------------------------------- dot products */

/* Weights for the dot tests: quantized normal data of a random magnitude,
 * or random bytes (every level pattern, Q8 levels of -128 included) with
 * finite scales. */
static void make_weights(int t, uint8_t *w, int64_t nb, bool raw)
{
    int64_t n = nb * belems(t);
    if (!raw) {
        float *x = malloc(n * sizeof *x);
        fill_normal(x, n, pow(10.0, 4 * qt_unit() - 2));
        for (int64_t i = 0; i < n; i += 97) /* outliers */
            x[i] *= 8;
        assert_int_equal(rlx_quantize_row(t, x, w, n), RLX_OK);
        free(x);
        return;
    }
    random_bytes(w, nb * bbytes(t));
    int off[2];
    int nf = scale_fields(t, off);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * bbytes(t);
        if (t == RLX_GGML_Q8_K) {
            float d = (float)(qt_normal() * 1e-2);
            memcpy(p, &d, 4);
            continue;
        }
        for (int f = 0; f < nf; f++) {
            uint16_t h = rlx_f32_to_f16((float)(qt_normal() * 1e-2));
            memcpy(p + off[f], &h, 2);
        }
    }
}

/* The dot of n elements in float64 from the float64 readings of both rows,
 * and the magnitude that bounds the f32 rounding: sum over elements of
 * (|scale * level| + |min|) * |activation|. */
static double ref_dot(int t, int64_t n, const uint8_t *w, const uint8_t *a, double *mag)
{
    int at = rlx_quant_act_type(t);
    double sum = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t wb = i / belems(t), ab = i / belems(at);
        double dp, mp;
        ref_elem(t, w + wb * bbytes(t), (int)(i % belems(t)), &dp, &mp);
        double av = ref_elem(at, a + ab * bbytes(at), (int)(i % belems(at)), NULL, NULL);
        sum += (dp - mp) * av;
        m += (fabs(dp) + fabs(mp)) * fabs(av);
    }
    *mag = m;
    return sum;
}

static void check_dots(rlx_quant_isa isa)
{
    qt_seed(5 + isa);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        int64_t be = belems(t);
        const int64_t blocks32[] = {1, 2, 3, 5, 8, 17, 128, 344}, blocksk[] = {1, 2, 3, 5, 16, 43};
        const int64_t *nbs = be == 32 ? blocks32 : blocksk;
        int count = be == 32 ? 8 : 6;
        for (int k = 0; k < count; k++) {
            int64_t nb = nbs[k], n = nb * be;
            for (int raw = 0; raw < 2; raw++)
                for (int rep = 0; rep < 3; rep++) {
                    /* misaligned: one byte past an allocation's start */
                    uint8_t *wbuf = malloc(nb * bbytes(t) + 1), *abuf = malloc(rlx_quant_act_bytes(t, n) + 1);
                    uint8_t *w = wbuf + 1, *a = abuf + 1;
                    make_weights(t, w, nb, raw);
                    float *x = malloc(n * sizeof *x);
                    fill_normal(x, n, pow(10.0, 2 * qt_unit() - 1));
                    assert_int_equal(rlx_quantize_act(t, x, a, n), RLX_OK);
                    double mag, want = ref_dot(t, n, w, a, &mag);
                    float got = rlx_quant_vec_dot_isa(isa, t, n, w, a);
                    double tol = 2.0 * (double)(n / 32 + 8) * FLT_EPSILON * mag;
                    if (!(fabs(got - want) <= tol))
                        fail_msg("%s %s n=%lld %s: %.9g, float64 %.9g (tolerance %.3g)", rlx_quant_isa_name(isa),
                                 rlx_ggml_type_name(t), (long long)n, raw ? "random bytes" : "quantized", got, want,
                                 tol);
                    assert_true(mag > 0);            /* the inputs are never all zero */
                    if (isa == rlx_quant_isa_best()) /* the dispatcher picks this one */
                        assert_true(rlx_quant_vec_dot(t, n, w, a) == got);
                    free(x);
                    free(wbuf);
                    free(abuf);
                }
        }
    }
}

static void test_dot_scalar(void **state)
{
    (void)state;
    check_dots(RLX_QUANT_SCALAR);
}

static void test_dot_avx2(void **state)
{
    (void)state;
    if (!rlx_quant_isa_available(RLX_QUANT_AVX2)) {
        print_message("skipped: %s\n",
#if defined(__x86_64__) || defined(__i386__)
                      "this processor lacks AVX2, FMA or F16C"
#else
                      "not an x86 build (no AVX2 kernels)"
#endif
        );
        skip();
    }
    check_dots(RLX_QUANT_AVX2);
}

/* The AVX-512 VNNI rows (Q8_0, Q4_0, Q5_0, Q6_K; the other types fall back
 * to AVX2): against float64 as above, and equal to the AVX2 kernels to the
 * bit (the prompt's tiles equal both), one row and many, on rows short
 * and long (the activation's pairs made ahead up to 64 pairs, made per row
 * past that), odd and even block counts, misaligned, at a stride that is
 * not the row's. */
static void test_dot_avx512(void **state)
{
    (void)state;
    if (!rlx_quant_isa_available(RLX_QUANT_AVX512)) {
        print_message("skipped: %s\n",
#if defined(__x86_64__) || defined(__i386__)
                      "this processor lacks AVX-512 F, BW, VL, DQ or VNNI"
#else
                      "not an x86 build (no AVX-512 kernels)"
#endif
        );
        skip();
    }
    assert_int_equal(rlx_quant_isa_best(), RLX_QUANT_AVX512);
    check_dots(RLX_QUANT_AVX512);
    qt_seed(12);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        const int64_t blocks32[] = {1, 2, 3, 16, 17, 48, 128, 129, 130, 131}, blocksk[] = {1, 2, 3, 6};
        const int64_t *nbs = belems(t) == 32 ? blocks32 : blocksk;
        int count = belems(t) == 32 ? 10 : 4;
        for (int c = 0; c < count; c++)
            for (int raw = 0; raw < 2; raw++) {
                enum { R = 7 };
                int64_t nb = nbs[c], n = nb * belems(t);
                size_t ws = (size_t)nb * bbytes(t) + 5;
                uint8_t *wbuf = malloc(ws * R + 1), *abuf = malloc(rlx_quant_act_bytes(t, n) + 1);
                uint8_t *w = wbuf + 1, *a = abuf + 1;
                float *x = malloc(n * sizeof *x), y[R];
                for (int r = 0; r < R; r++)
                    make_weights(t, w + r * ws, nb, raw);
                fill_normal(x, n, pow(10.0, 2 * qt_unit() - 1));
                assert_int_equal(rlx_quantize_act(t, x, a, n), RLX_OK);
                for (int rows = 1; rows <= R; rows += R - 1) {
                    assert_int_equal(rlx_quant_vec_dot_rows(t, n, w, ws, rows, a, y), RLX_OK);
                    for (int r = 0; r < rows; r++) {
                        float want = rlx_quant_vec_dot_isa(RLX_QUANT_AVX2, t, n, w + r * ws, a);
                        if (memcmp(&y[r], &want, sizeof want))
                            fail_msg("%s, %lld blocks, %s, row %d of %d: avx512 %.9g, avx2 %.9g", rlx_ggml_type_name(t),
                                     (long long)nb, raw ? "random bytes" : "quantized", r, rows, y[r], want);
                    }
                }
                free(x);
                free(wbuf);
                free(abuf);
            }
    }
}

/* rlx_quant_vec_dot_rows against rlx_quant_vec_dot row by row, to the
 * bit: weight rows at a stride that is not the row's, misaligned; a length
 * that is not whole blocks is an error that leaves y alone. */
static void test_dot_rows(void **state)
{
    (void)state;
    qt_seed(9);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        enum { R = 5 };
        int64_t nb = 3, n = nb * belems(t);
        size_t ws = (size_t)nb * bbytes(t) + 7;
        uint8_t *wbuf = malloc(ws * R + 1), *abuf = malloc(rlx_quant_act_bytes(t, n) + 1);
        uint8_t *w = wbuf + 1, *a = abuf + 1;
        float *x = malloc(n * sizeof *x), y[R];
        for (int r = 0; r < R; r++)
            make_weights(t, w + r * ws, nb, r & 1);
        fill_normal(x, n, 2.0);
        assert_int_equal(rlx_quantize_act(t, x, a, n), RLX_OK);
        assert_int_equal(rlx_quant_vec_dot_rows(t, n, w, ws, R, a, y), RLX_OK);
        for (int r = 0; r < R; r++) {
            float want = rlx_quant_vec_dot(t, n, w + r * ws, a);
            assert_memory_equal(&y[r], &want, sizeof want);
        }
        y[0] = 42.0f;
        assert_int_not_equal(rlx_quant_vec_dot_rows(t, n + 16, w, ws, R, a, y), RLX_OK);
        assert_true(y[0] == 42.0f);
        free(x);
        free(wbuf);
        free(abuf);
    }
}

/* rlx_quant_tile against rlx_quant_vec_dot, to the bit: a tile of weight
 * rows (quantized data or random bytes) and of activation rows, misaligned
 * and at a stride that is not the row's, block counts odd and even. */
static void test_tile(void **state)
{
    (void)state;
    int any = 0;
    qt_seed(8);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        if (!rlx_quant_tile_available(t))
            continue;
        any++;
        int64_t be = belems(t);
        const int64_t blocks32[] = {1, 2, 3, 5, 16, 17}, blocksk[] = {1, 2, 3, 6};
        const int64_t *nbs = be == 32 ? blocks32 : blocksk;
        int count = be == 32 ? 6 : 4;
        for (int c = 0; c < count; c++)
            for (int raw = 0; raw < 2; raw++) {
                enum { T = RLX_QUANT_TILE };
                int64_t nb = nbs[c], n = nb * be;
                size_t ws = (size_t)nb * bbytes(t) + 3, as = rlx_quant_act_bytes(t, n) + 5;
                uint8_t *wbuf = malloc(ws * T + 1), *abuf = malloc(as * T + 1);
                uint8_t *w = wbuf + 1, *a = abuf + 1;
                float *x = malloc(n * sizeof *x), y[T * 6];
                for (int r = 0; r < T; r++) {
                    make_weights(t, w + r * ws, nb, raw);
                    fill_normal(x, n, pow(10.0, 2 * qt_unit() - 1));
                    assert_int_equal(rlx_quantize_act(t, x, a + r * as, n), RLX_OK);
                }
                assert_true(rlx_quant_tile(t, n, w, ws, a, as, y, 6));
                for (int r = 0; r < T; r++)
                    for (int j = 0; j < T; j++) {
                        float want = rlx_quant_vec_dot(t, n, w + j * ws, a + r * as);
                        if (memcmp(&y[r * 6 + j], &want, sizeof want))
                            fail_msg("%s, %lld blocks, %s: tile (%d, %d) %.9g, matrix-vector %.9g",
                                     rlx_ggml_type_name(t), (long long)nb, raw ? "random bytes" : "quantized", r, j,
                                     y[r * 6 + j], want);
                    }
                free(x);
                free(wbuf);
                free(abuf);
            }
    }
    if (!any) {
        print_message("skipped: no tiled kernel on this processor\n");
        skip();
    }
}

/* rlx_quant_tiles: a grid of tiles equal to rlx_quant_vec_dot to the bit,
 * at an output stride wider than the grid (the cells past it untouched);
 * counts that are not whole tiles refused, y left alone. */
static void test_tiles(void **state)
{
    (void)state;
    int any = 0;
    qt_seed(13);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        if (!rlx_quant_tile_available(t))
            continue;
        any++;
        /* 32-element types: pairs made ahead for the grid (odd and even
         * counts) and past what it makes ahead (tile by tile) */
        const int64_t blocks32[] = {5, 16, 99}, blocksk[] = {2};
        for (int c = 0; c < (belems(t) == 32 ? 3 : 1); c++) {
            enum { M = 2 * RLX_QUANT_TILE, N = 3 * RLX_QUANT_TILE, LDY = N + 3 };
            int64_t nb = belems(t) == 32 ? blocks32[c] : blocksk[c], n = nb * belems(t);
            size_t ws = (size_t)nb * bbytes(t) + 1, as = rlx_quant_act_bytes(t, n) + 3;
            uint8_t *wbuf = malloc(ws * N + 1), *abuf = malloc(as * M + 1);
            uint8_t *w = wbuf + 1, *a = abuf + 1;
            float *x = malloc(n * sizeof *x), y[M * LDY];
            for (int j = 0; j < N; j++)
                make_weights(t, w + j * ws, nb, j & 1);
            for (int r = 0; r < M; r++) {
                fill_normal(x, n, 1.0);
                assert_int_equal(rlx_quantize_act(t, x, a + r * as, n), RLX_OK);
            }
            for (int c = 0; c < M * LDY; c++)
                y[c] = 42.0f;
            assert_true(rlx_quant_tiles(t, n, w, ws, N, a, as, M, y, LDY));
            for (int r = 0; r < M; r++)
                for (int j = 0; j < LDY; j++) {
                    float want = j < N ? rlx_quant_vec_dot(t, n, w + j * ws, a + r * as) : 42.0f;
                    if (memcmp(&y[r * LDY + j], &want, sizeof want))
                        fail_msg("%s, %lld blocks: tiles (%d, %d) %.9g, want %.9g", rlx_ggml_type_name(t),
                                 (long long)nb, r, j, y[r * LDY + j], want);
                }
            y[0] = 7.0f;
            assert_false(rlx_quant_tiles(t, n, w, ws, N - 1, a, as, M, y, LDY));
            assert_false(rlx_quant_tiles(t, n, w, ws, N, a, as, M + 2, y, LDY));
            assert_false(rlx_quant_tiles(t, n + 1, w, ws, N, a, as, M, y, LDY));
            assert_true(y[0] == 7.0f);
            free(x);
            free(wbuf);
            free(abuf);
        }
    }
    if (!any) {
        print_message("skipped: no tiled kernel on this processor\n");
        skip();
    }
}

/* Activations: levels within [-127, 127] (the kernels' precondition),
 * rounded as llama.cpp's CPU backend rounds them: Q8_0 with the step
 * max|x| / 127, Q8_K with the scale -127 / (the signed element of largest
 * magnitude) and its reciprocal stored, block sums consistent. */
static void test_quantize_act(void **state)
{
    (void)state;
    qt_seed(6);
    float x[1024];
    uint8_t a[4 * 292];
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i], at = rlx_quant_act_type(t);
        fill_normal(x, 1024, 5.0);
        x[17] = -1e3f; /* a block whose largest element is negative */
        assert_int_equal(rlx_quantize_act(t, x, a, 1024), RLX_OK);
        for (int64_t b = 0; b < 1024 / belems(at); b++) {
            const uint8_t *p = a + b * bbytes(at);
            const int8_t *q = (const int8_t *)(p + (at == RLX_GGML_Q8_K ? 4 : 2));
            double amax = 0;
            for (int j = 0; j < belems(at); j++) {
                assert_true(q[j] >= -127);
                amax = fmax(amax, fabs((double)x[b * belems(at) + j]));
            }
            /* Q8_0: levels of max|x| / 127 in f32, nearest (as llama.cpp's CPU
             * backend rounds them), the f16 of that step stored */
            for (int j = 0; at == RLX_GGML_Q8_0 && j < belems(at); j++) {
                float id = amax ? 127.0f / (float)amax : 0.0f;
                assert_int_equal(q[j], (int)nearbyintf(x[b * belems(at) + j] * id));
            }
            if (at == RLX_GGML_Q8_0) {
                uint16_t d;
                memcpy(&d, p, 2);
                assert_int_equal(d, rlx_f32_to_f16((float)amax / 127.0f));
            }
            if (at == RLX_GGML_Q8_K) {
                const float *xb = x + b * belems(at);
                float mx = 0;
                for (int j = 0; j < belems(at); j++)
                    if (fabsf(xb[j]) > fabsf(mx))
                        mx = xb[j];
                float iscale = -127.0f / mx, d;
                for (int j = 0; j < belems(at); j++)
                    assert_int_equal(q[j], (int)nearbyintf(iscale * xb[j]));
                memcpy(&d, p, 4);
                assert_true(d == 1.0f / iscale);
            }
            if (at == RLX_GGML_Q8_K)
                for (int g = 0; g < 16; g++) {
                    int16_t bs;
                    memcpy(&bs, p + 260 + 2 * g, 2);
                    int s = 0;
                    for (int j = 0; j < 16; j++)
                        s += q[16 * g + j];
                    assert_int_equal(bs, s);
                }
        }
    }
    /* Q8_0 (AVX-512 where the processor has it): a NaN element is level 0
     * and its block's step comes from the others; an infinite one makes its
     * block zeros with step 0 */
    fill_normal(x, 128, 3.0);
    x[40] = NAN;
    x[57] = -NAN;
    x[70] = INFINITY;
    x[101] = -INFINITY;
    assert_int_equal(rlx_quantize_act(RLX_GGML_Q4_0, x, a, 128), RLX_OK);
    float amax1 = 0;
    for (int j = 32; j < 64; j++)
        if (j != 40 && j != 57)
            amax1 = fmaxf(amax1, fabsf(x[j]));
    for (int b = 0; b < 4; b++) {
        const uint8_t *p = a + 34 * b;
        uint16_t d;
        memcpy(&d, p, 2);
        for (int j = 0; j < 32; j++) {
            int e = 32 * b + j, q = (int8_t)p[2 + j];
            if (b == 1)
                assert_int_equal(q, e == 40 || e == 57 ? 0 : (int)nearbyintf(x[e] * (127.0f / amax1)));
            if (b >= 2)
                assert_int_equal(q, 0);
        }
        if (b == 1)
            assert_int_equal(d, rlx_f32_to_f16(amax1 / 127.0f));
        if (b >= 2)
            assert_int_equal(d, 0);
    }
    /* a non-finite activation: its block is zeros with scale 0, the others
     * as before */
    const float bad[] = {INFINITY, -INFINITY, NAN};
    for (int k = 0; k < 3; k++) {
        fill_normal(x, 512, 1.0);
        x[300] = bad[k];
        assert_int_equal(rlx_quantize_act(RLX_GGML_Q4_K, x, a, 512), RLX_OK);
        float d0, d1;
        memcpy(&d0, a, 4);
        memcpy(&d1, a + 292, 4);
        assert_true(d0 != 0 && d1 == 0);
        for (int j = 0; j < 256 + 32; j++)
            assert_int_equal(a[292 + 4 + j], 0);
    }
    /* Q8_K: of two elements of the largest magnitude the first gives the
     * scale (with its sign); an all-zero block is zeros with scale 0 */
    for (int k = 0; k < 2; k++) {
        fill_normal(x, 512, 1.0);
        for (int j = 0; j < 512; j++)
            x[j] = fmaxf(fminf(x[j], 6.0f), -6.0f);
        x[37] = k ? -7.5f : 7.5f;
        x[200] = -x[37];
        memset(x + 256, 0, 256 * sizeof *x);
        assert_int_equal(rlx_quantize_act(RLX_GGML_Q4_K, x, a, 512), RLX_OK);
        float d0, d1, iscale = -127.0f / x[37];
        memcpy(&d0, a, 4);
        memcpy(&d1, a + 292, 4);
        assert_true(d0 == 1.0f / iscale && d1 == 0);
        for (int j = 0; j < 256; j++) {
            assert_int_equal((int8_t)a[4 + j], (int)nearbyintf(iscale * x[j]));
            assert_int_equal(a[292 + 4 + j], 0);
        }
    }
}

/* ------------------------------------------------------------ units */

/* Every unit of a block (quant_units.h) rebuilds the dequantizer's
 * elements to the bit: d q - m, one rounding each, and the units' halves
 * cover the block's elements once each.  Random bytes give scales of
 * every class (NaN: any NaN). */
static void check_units(int t, const uint8_t *b, const char *what)
{
    const int64_t n = rlx_quant_block_elems(t);
    float ref[256];
    int seen[256] = {0};
    assert_int_equal(rlx_dequantize_row(t, b, ref, n), RLX_OK);
    for (int j = 0; j < RLX_QU_PER_BLOCK(t); j++) {
        rlx_qunit u;
        rlx_qunit_read(t, b, j, &u);
        for (int h = 0; h < 2; h++) {
            if (!RLX_QU_HAS_MIN(t) && u.m[h] != 0.0f)
                fail_msg("%s %s unit %d: a min %g in a type without one", rlx_ggml_type_name(t), what, j, u.m[h]);
            for (int e = 0; e < 16; e++) {
                const int el = u.e[h] + e;
                assert_true(el >= 0 && el < n);
                seen[el]++;
                const float p = u.d[h] * (float)(int8_t)(u.q[h][e / 4] >> (8 * (e % 4)));
                const float w = p - u.m[h];
                uint32_t wb, rb;
                memcpy(&wb, &w, 4);
                memcpy(&rb, &ref[el], 4);
                if (wb != rb && !(isnan(w) && isnan(ref[el])))
                    fail_msg("%s %s unit %d element %d: %.9g, the dequantizer %.9g", rlx_ggml_type_name(t), what, j, el,
                             w, ref[el]);
            }
        }
    }
    for (int e = 0; e < n; e++)
        if (seen[e] != 1)
            fail_msg("%s: element %d read by %d units", rlx_ggml_type_name(t), e, seen[e]);
}

static void test_units(void **state)
{
    (void)state;
    qt_seed(11);
    /* 4-byte aligned, as the units read their fields */
    _Alignas(16) uint8_t b[304];
    float src[256];
    for (int i = 0; i < QT_NTYPES; i++) {
        const int t = qt_types[i];
        const int64_t n = rlx_quant_block_elems(t);
        for (int rep = 0; rep < 500; rep++) {
            random_bytes(b, sizeof b);
            check_units(t, b, "random block");
            for (int64_t e = 0; e < n; e++)
                src[e] = (float)(qt_normal() * (rep % 2 ? 0.05 : 30.0));
            assert_int_equal(rlx_quantize_row(t, src, b, n), RLX_OK);
            check_units(t, b, "quantized block");
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_every_pattern),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_dequantize_random),
        cmocka_unit_test(test_dequantize_crafted),
        cmocka_unit_test(test_units),
        cmocka_unit_test(test_quantize_round_trip),
        cmocka_unit_test(test_quantize_shapes),
        cmocka_unit_test(test_quantize_nonfinite),
        cmocka_unit_test(test_dot_rows),
        cmocka_unit_test(test_quantize_act),
        cmocka_unit_test(test_dot_scalar),
        cmocka_unit_test(test_dot_avx2),
        cmocka_unit_test(test_dot_avx512),
        cmocka_unit_test(test_tile),
        cmocka_unit_test(test_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
