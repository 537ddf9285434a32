/* quant.c - dequantization and reference quantization of the block types
 * (quant.h; layouts in quant_layout.h).
 *
 * Built with -ffp-contract=off (CMakeLists.txt): the dequantizers must
 * round every product and sum the way the format's definition does, and a
 * fused multiply-add would round once instead.
 *
 * The quantizers, per type:
 *   Q8_0, Q4_0, Q5_0  symmetric: the block's element of largest magnitude
 *                     sets the scale (Q4_0/Q5_0 map it to the level -8/-16,
 *                     which has no positive twin, so the full range is used);
 *                     every element rounds to the nearest level of the
 *                     scale as stored (after rounding it to f16).
 *   Q4_1, Q5_1        min and max of the block span the 16/32 levels.
 *   Q8_K              absmax / 127, f32 scale.
 *   Q4_K, Q5_K        per sub-block of 32 a scale and min fitted by least
 *                     squares over a grid of candidate roundings, refined by
 *                     alternating rounding and refitting; the sub-block
 *                     scales and mins are then quantized to 6 bits against
 *                     the super-block's f16 d and dmin, and the elements
 *                     rounded again against the scales as stored.
 *   Q6_K              the same for a symmetric scale per sub-block of 16,
 *                     int8 sub-block scales.
 * The fits minimise the plain squared error (llama.cpp's reference
 * quantizers weight some errors more; without an importance matrix the
 * unweighted error is what is measured).  Fitting runs in double, so that
 * sums of squares of any finite float stay finite. */
#include <float.h>
#include <math.h>

#include "core/error.h"
#include "quant/quant.h"
#include "quant/quant_layout.h"

/* ---------------------------------------------------------------- table */

/* The geometry is the ggml type table's (src/core/ggml_type.c), for the
 * types computed with. */
int64_t rlx_quant_block_elems(int t)
{
    int64_t block = 0;
    return rlx_qtype_supported(t) && rlx_ggml_type_size(t, &block, NULL) ? block : 0;
}

size_t rlx_quant_block_bytes(int t)
{
    size_t bytes = 0;
    return rlx_qtype_supported(t) && rlx_ggml_type_size(t, NULL, &bytes) ? bytes : 0;
}

static rlx_status check_row(const char *what, int t, int64_t n)
{
    int64_t be = rlx_quant_block_elems(t);
    if (be == 0) {
        const char *name = rlx_ggml_type_name(t);
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "%s: ggml type %d (%s) is not a supported quantized type", what, t,
                             name ? name : "unknown");
    }
    if (n < 0 || n % be != 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: %s rows hold a multiple of %lld elements, not %lld", what,
                             rlx_ggml_type_name(t), (long long)be, (long long)n);
    return RLX_OK;
}

/* ---------------------------------------------------------- dequantize */

/* Every element below is computed exactly as the format defines it:
 * integer level converted to float, times the f32 scale (plus the min),
 * each operation rounded on its own. */

static void deq_q8_0(const uint8_t *b, float *y)
{
    const float d = rlx_q_f16(b);
    const int8_t *q = (const int8_t *)(b + 2);
    for (int j = 0; j < RLX_QB; j++)
        y[j] = (float)q[j] * d;
}

static void deq_q4_0(const uint8_t *b, float *y)
{
    const float d = rlx_q_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((qs[j] & 0x0f) - 8) * d;
        y[j + 16] = (float)((qs[j] >> 4) - 8) * d;
    }
}

static void deq_q4_1(const uint8_t *b, float *y)
{
    const float d = rlx_q_f16(b), m = rlx_q_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(qs[j] & 0x0f) * d + m;
        y[j + 16] = (float)(qs[j] >> 4) * d + m;
    }
}

static void deq_q5_0(const uint8_t *b, float *y)
{
    const float d = rlx_q_f16(b);
    const uint32_t qh = rlx_q_u32(b + 2);
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)(lo - 16) * d;
        y[j + 16] = (float)(hi - 16) * d;
    }
}

static void deq_q5_1(const uint8_t *b, float *y)
{
    const float d = rlx_q_f16(b), m = rlx_q_f16(b + 2);
    const uint32_t qh = rlx_q_u32(b + 4);
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
        int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
        y[j] = (float)lo * d + m;
        y[j + 16] = (float)hi * d + m;
    }
}

/* Q4_K and Q5_K (qh NULL for Q4_K). */
static void deq_q45_k(const uint8_t *b, float *y, bool five)
{
    const float d = rlx_q_f16(b), dmin = rlx_q_f16(b + 2);
    const uint8_t *scales = b + 4;
    const uint8_t *qh = five ? b + 16 : NULL;
    const uint8_t *qs = five ? b + 48 : b + 16;
    for (int c = 0; c < 4; c++) {
        uint8_t sc, m;
        rlx_q_k4_scale_min(scales, 2 * c, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        rlx_q_k4_scale_min(scales, 2 * c + 1, &sc, &m);
        const float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int q = qs[32 * c + l] & 0x0f;
            if (qh)
                q |= ((qh[l] >> (2 * c)) & 1) << 4;
            y[64 * c + l] = d1 * (float)q - m1;
        }
        for (int l = 0; l < 32; l++) {
            int q = qs[32 * c + l] >> 4;
            if (qh)
                q |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
            y[64 * c + 32 + l] = d2 * (float)q - m2;
        }
    }
}

static void deq_q6_k(const uint8_t *b, float *y)
{
    const float d = rlx_q_f16(b + RLX_Q6_K_D);
    const int8_t *sc = (const int8_t *)(b + RLX_Q6_K_SCALES);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b + 64 * h, *qh = b + RLX_Q6_K_QH + 32 * h;
        float *yh = y + 128 * h;
        for (int l = 0; l < 32; l++) {
            int q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            /* sub-block of element 32k + l in this half: 8h + 2k + l / 16 */
            const int8_t *s = sc + 8 * h + l / 16;
            yh[l] = d * (float)s[0] * (float)q1;
            yh[l + 32] = d * (float)s[2] * (float)q2;
            yh[l + 64] = d * (float)s[4] * (float)q3;
            yh[l + 96] = d * (float)s[6] * (float)q4;
        }
    }
}

static void deq_q8_k(const uint8_t *b, float *y)
{
    const float d = rlx_q_f32(b);
    const int8_t *q = (const int8_t *)(b + RLX_Q8_K_QS);
    for (int j = 0; j < RLX_QK; j++)
        y[j] = d * (float)q[j];
}

rlx_status rlx_dequantize_row(int t, const void *blocks, float *out, int64_t n)
{
    rlx_status s = check_row("rlx_dequantize_row", t, n);
    if (s != RLX_OK)
        return s;
    const int64_t be = rlx_quant_block_elems(t);
    const size_t bb = rlx_quant_block_bytes(t);
    const uint8_t *b = blocks;
    for (int64_t i = 0; i < n / be; i++, b += bb) {
        float *y = out + i * be;
        switch (t) {
        case RLX_GGML_Q8_0: deq_q8_0(b, y); break;
        case RLX_GGML_Q4_0: deq_q4_0(b, y); break;
        case RLX_GGML_Q4_1: deq_q4_1(b, y); break;
        case RLX_GGML_Q5_0: deq_q5_0(b, y); break;
        case RLX_GGML_Q5_1: deq_q5_1(b, y); break;
        case RLX_GGML_Q4_K: deq_q45_k(b, y, false); break;
        case RLX_GGML_Q5_K: deq_q45_k(b, y, true); break;
        case RLX_GGML_Q6_K: deq_q6_k(b, y); break;
        case RLX_GGML_Q8_K: deq_q8_k(b, y); break;
        }
    }
    return RLX_OK;
}

/* ------------------------------------------------------------ quantize */

/* NaN -> 0, +-inf -> +-FLT_MAX (quant.h). */
static void sanitize(const float *in, double *v, int n)
{
    for (int i = 0; i < n; i++) {
        float x = in[i];
        v[i] = isnan(x) ? 0.0 : (double)fminf(fmaxf(x, -FLT_MAX), FLT_MAX);
    }
}

/* The nearest level in [lo, hi]; values outside (and NaN) are clamped
 * before the conversion, which is then always defined. */
static int level(double v, int lo, int hi)
{
    if (!(v >= lo)) /* also NaN */
        return lo;
    if (v > hi)
        return hi;
    return (int)lround(v);
}

/* A scale stored as f16, clamped to the finite range (quant.h);
 * *stored is its value as stored. */
static uint16_t f16_scale(double d, double *stored)
{
    float f = (float)fmin(fmax(d, -65504.0), 65504.0);
    uint16_t h = rlx_f32_to_f16(f);
    *stored = rlx_f16_to_f32_inline(h);
    return h;
}

static void put_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* The element of largest magnitude (with its sign), and that magnitude. */
static double signed_absmax(const double *v, int n, double *amax)
{
    double best = 0, a = 0;
    for (int i = 0; i < n; i++)
        if (fabs(v[i]) > a) {
            a = fabs(v[i]);
            best = v[i];
        }
    *amax = a;
    return best;
}

/* Levels q = round(v / d) in [lo, hi]; all lo..hi map to 0 when d is 0. */
static void levels(const double *v, int n, double d, int lo, int hi, int *q)
{
    for (int i = 0; i < n; i++)
        q[i] = d != 0 ? level(v[i] / d, lo, hi) : level(0, lo, hi);
}

static void quant_q8_0(const double *v, uint8_t *b)
{
    double amax, d;
    signed_absmax(v, RLX_QB, &amax);
    put_u16(b, f16_scale(amax / 127, &d));
    int q[RLX_QB];
    levels(v, RLX_QB, d, -127, 127, q);
    for (int j = 0; j < RLX_QB; j++)
        b[2 + j] = (uint8_t)(int8_t)q[j];
}

/* Q4_0 (bits 4) and Q5_0 (bits 5): levels -2^(bits-1) .. 2^(bits-1) - 1. */
static void quant_sym(const double *v, uint8_t *b, int bits)
{
    const int half = 1 << (bits - 1);
    double amax, d;
    double mx = signed_absmax(v, RLX_QB, &amax);
    put_u16(b, f16_scale(mx / -half, &d));
    int q[RLX_QB];
    levels(v, RLX_QB, d, -half, half - 1, q);
    uint8_t *qs = b + (bits == 4 ? 2 : 6);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int lo = q[j] + half, hi = q[j + 16] + half;
        qs[j] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
        qh |= (uint32_t)(lo >> 4) << j | (uint32_t)(hi >> 4) << (j + 16);
    }
    if (bits == 5)
        memcpy(b + 2, &qh, 4);
}

/* Q4_1 (bits 4) and Q5_1 (bits 5): x = q * d + m, q in 0 .. 2^bits - 1. */
static void quant_min(const double *v, uint8_t *b, int bits)
{
    const int top = (1 << bits) - 1;
    double lo = v[0], hi = v[0];
    for (int j = 1; j < RLX_QB; j++) {
        lo = fmin(lo, v[j]);
        hi = fmax(hi, v[j]);
    }
    double d, m;
    put_u16(b, f16_scale((hi - lo) / top, &d));
    put_u16(b + 2, f16_scale(lo, &m));
    int q[RLX_QB];
    for (int j = 0; j < RLX_QB; j++)
        q[j] = d != 0 ? level((v[j] - m) / d, 0, top) : 0;
    uint8_t *qs = b + (bits == 4 ? 4 : 8);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
        qh |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    if (bits == 5)
        memcpy(b + 4, &qh, 4);
}

static void quant_q8_k(const double *v, uint8_t *b)
{
    double amax;
    signed_absmax(v, RLX_QK, &amax);
    float d = (float)(amax / 127);
    while ((double)d * 127 > FLT_MAX) /* d * 127 must not overflow when read back */
        d = nextafterf(d, 0);
    memcpy(b, &d, 4);
    int q[RLX_QK];
    levels(v, RLX_QK, d, -127, 127, q);
    int16_t bsums[16] = {0};
    for (int j = 0; j < RLX_QK; j++) {
        b[RLX_Q8_K_QS + j] = (uint8_t)(int8_t)q[j];
        bsums[j / 16] = (int16_t)(bsums[j / 16] + q[j]);
    }
    memcpy(b + RLX_Q8_K_BSUMS, bsums, sizeof bsums);
}

/* ----------------------------------------------- K-type sub-block fits */

/* Least squares of v ~ s * q + c (c fixed at 0 when !with_offset, and
 * limited to c <= 0 when with_offset: the K formats store -c as an
 * unsigned min).  Returns the squared error, or INFINITY when q is
 * degenerate (all levels equal). */
static double lsq(const double *v, const int *q, int n, bool with_offset, double *s, double *c)
{
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < n; i++) {
        sq += q[i];
        sqq += (double)q[i] * q[i];
        sx += v[i];
        sqx += q[i] * v[i];
    }
    double ss = 0, cc = 0;
    if (with_offset) {
        double det = n * sqq - sq * sq;
        if (det > 0) {
            ss = (n * sqx - sq * sx) / det;
            cc = (sqq * sx - sq * sqx) / det;
        }
        if (det <= 0 || cc > 0) { /* no offset allowed above 0 */
            cc = 0;
            if (sqq == 0)
                return INFINITY;
            ss = sqx / sqq;
        }
    } else {
        if (sqq == 0)
            return INFINITY;
        ss = sqx / sqq;
    }
    if (with_offset && ss < 0)
        return INFINITY;
    double err = 0;
    for (int i = 0; i < n; i++) {
        double e = ss * q[i] + cc - v[i];
        err += e * e;
    }
    *s = ss;
    *c = cc;
    return err;
}

/* Rounds v against (s, c) into q (lo..hi). */
static void round_against(const double *v, int n, double s, double c, int lo, int hi, int *q)
{
    for (int i = 0; i < n; i++)
        q[i] = s != 0 ? level((v[i] - c) / s, lo, hi) : lo;
}

/* The best (s, c) for levels lo..hi: a grid of candidate scales around the
 * one that maps the extremes to the end levels, each rounded and refitted,
 * then the best refined by alternating rounding and refitting until it
 * stops improving.  Symmetric fits (!with_offset) anchor the element of
 * largest magnitude at the level lo, which has no positive twin. */
static void fit(const double *v, int n, int lo, int hi, bool with_offset, double *s_out, double *c_out)
{
    double amax;
    double anchor = signed_absmax(v, n, &amax);
    double vmin = 0, vmax = v[0]; /* the offset's range starts at 0 or below */
    for (int i = 0; i < n; i++) {
        vmin = fmin(vmin, v[i]);
        vmax = fmax(vmax, v[i]);
    }
    *s_out = 0;
    *c_out = with_offset ? vmin : 0;
    if (amax == 0 || (with_offset && vmax == vmin))
        return;
    double best = INFINITY;
    int q[RLX_QK];
    for (int k = -10; k <= 10; k++) {
        double s, c;
        if (with_offset) {
            s = (vmax - vmin) / (hi + 0.1 * k);
            c = vmin;
        } else {
            s = anchor / (lo - 0.1 * k);
            c = 0;
        }
        round_against(v, n, s, c, lo, hi, q);
        double err = lsq(v, q, n, with_offset, &s, &c);
        if (err < best) {
            best = err;
            *s_out = s;
            *c_out = c;
        }
    }
    for (int it = 0; it < 4 && *s_out != 0; it++) {
        double s, c;
        round_against(v, n, *s_out, *c_out, lo, hi, q);
        double err = lsq(v, q, n, with_offset, &s, &c);
        if (!(err < best))
            break;
        best = err;
        *s_out = s;
        *c_out = c;
    }
}

/* Q4_K (bits 4) and Q5_K (bits 5). */
static void quant_q45_k(const double *v, uint8_t *b, int bits)
{
    const int top = (1 << bits) - 1;
    double s[8], m[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        double c;
        fit(v + 32 * j, 32, 0, top, true, &s[j], &c);
        m[j] = -c;
        smax = fmax(smax, s[j]);
        mmax = fmax(mmax, m[j]);
    }
    double d, dmin;
    put_u16(b, f16_scale(smax / 63, &d));
    put_u16(b + 2, f16_scale(mmax / 63, &dmin));
    uint8_t sc[8], mq[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? level(s[j] / d, 0, 63) : 0);
        mq[j] = (uint8_t)(dmin > 0 ? level(m[j] / dmin, 0, 63) : 0);
    }
    uint8_t *scales = b + 4;
    for (int j = 0; j < 4; j++) {
        scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = (uint8_t)(mq[j] | ((mq[j + 4] >> 4) << 6));
        scales[j + 8] = (uint8_t)((sc[j + 4] & 0x0f) | ((mq[j + 4] & 0x0f) << 4));
    }
    /* the elements against the sub-block scales as stored (the f32
     * products the dequantizer forms) */
    int q[RLX_QK];
    for (int j = 0; j < 8; j++) {
        double ds = (float)d * (float)sc[j], dm = (float)dmin * (float)mq[j];
        round_against(v + 32 * j, 32, ds, -dm, 0, top, q + 32 * j);
    }
    uint8_t *qh = bits == 5 ? b + 16 : NULL;
    uint8_t *qs = bits == 5 ? b + 48 : b + 16;
    if (qh)
        memset(qh, 0, 32);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int a = q[64 * c + l], z = q[64 * c + 32 + l];
            qs[32 * c + l] = (uint8_t)((a & 0x0f) | ((z & 0x0f) << 4));
            if (qh)
                qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((z >> 4) << (2 * c + 1)));
        }
}

static void quant_q6_k(const double *v, uint8_t *b)
{
    double s[16], amax = 0, smax = 0;
    for (int g = 0; g < 16; g++) {
        double c;
        fit(v + 16 * g, 16, -32, 31, false, &s[g], &c);
        if (fabs(s[g]) > amax) {
            amax = fabs(s[g]);
            smax = s[g];
        }
    }
    double d;
    put_u16(b + RLX_Q6_K_D, f16_scale(smax / -128, &d));
    int8_t sc[16];
    for (int g = 0; g < 16; g++)
        sc[g] = (int8_t)(d != 0 ? level(s[g] / d, -128, 127) : 0);
    memcpy(b + RLX_Q6_K_SCALES, sc, 16);
    int q[RLX_QK];
    for (int g = 0; g < 16; g++) {
        double ds = (float)d * (float)sc[g];
        if (ds != 0)
            round_against(v + 16 * g, 16, ds, 0, -32, 31, q + 16 * g);
        else
            memset(q + 16 * g, 0, 16 * sizeof *q);
    }
    for (int h = 0; h < 2; h++) {
        uint8_t *ql = b + 64 * h, *qh = b + RLX_Q6_K_QH + 32 * h;
        const int *qq = q + 128 * h;
        for (int l = 0; l < 32; l++) {
            int q1 = qq[l] + 32, q2 = qq[l + 32] + 32, q3 = qq[l + 64] + 32, q4 = qq[l + 96] + 32;
            ql[l] = (uint8_t)((q1 & 0x0f) | ((q3 & 0x0f) << 4));
            ql[l + 32] = (uint8_t)((q2 & 0x0f) | ((q4 & 0x0f) << 4));
            qh[l] = (uint8_t)((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

rlx_status rlx_quantize_row(int t, const float *in, void *blocks, int64_t n)
{
    rlx_status st = check_row("rlx_quantize_row", t, n);
    if (st != RLX_OK)
        return st;
    const int be = (int)rlx_quant_block_elems(t);
    const size_t bb = rlx_quant_block_bytes(t);
    uint8_t *b = blocks;
    double v[RLX_QK];
    for (int64_t i = 0; i < n / be; i++, b += bb) {
        sanitize(in + i * be, v, be);
        switch (t) {
        case RLX_GGML_Q8_0: quant_q8_0(v, b); break;
        case RLX_GGML_Q4_0: quant_sym(v, b, 4); break;
        case RLX_GGML_Q5_0: quant_sym(v, b, 5); break;
        case RLX_GGML_Q4_1: quant_min(v, b, 4); break;
        case RLX_GGML_Q5_1: quant_min(v, b, 5); break;
        case RLX_GGML_Q4_K: quant_q45_k(v, b, 4); break;
        case RLX_GGML_Q5_K: quant_q45_k(v, b, 5); break;
        case RLX_GGML_Q6_K: quant_q6_k(v, b); break;
        case RLX_GGML_Q8_K: quant_q8_k(v, b); break;
        }
    }
    return RLX_OK;
}
