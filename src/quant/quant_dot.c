/* quant_dot.c - activation quantization, the portable scalar dot products
 * and the choice of kernels (quant_dot.h).  Each block's integer inner
 * product is exact in int; it is scaled and summed in f32. */
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "quant/quant_dot.h"
#include "quant/quant_dot_kernels.h"
#include "quant/quant_layout.h"

/* ------------------------------------------------------------- choice */

#ifdef RLX_QUANT_HAVE_AVX2
#include <cpuid.h>

/* AVX2 and FMA as the compiler's runtime knows them (which includes the
 * operating system saving the AVX registers); F16C from cpuid, which not
 * every compiler's __builtin_cpu_supports names.  Asked once (cpuid can
 * trap to a hypervisor), kept in an atomic: -1 not yet asked. */
static int avx2_state = -1;

static bool avx2_usable(void)
{
    int s = __atomic_load_n(&avx2_state, __ATOMIC_RELAXED);
    if (s < 0) {
        unsigned a, b, c, d;
        bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
        s = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
        __atomic_store_n(&avx2_state, s, __ATOMIC_RELAXED);
    }
    return s;
}

/* The AVX-512 subsets the tiled kernels use, on top of AVX2 (the tiles
 * must equal the AVX2 kernels' results, so they run only where those do). */
static int avx512_state = -1;

static bool avx512_vnni_usable(void)
{
    int s = __atomic_load_n(&avx512_state, __ATOMIC_RELAXED);
    if (s < 0) {
        s = avx2_usable() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vnni");
        __atomic_store_n(&avx512_state, s, __ATOMIC_RELAXED);
    }
    return s;
}
#endif

bool rlx_quant_isa_available(rlx_quant_isa isa)
{
    switch (isa) {
    case RLX_QUANT_SCALAR: return true;
    case RLX_QUANT_AVX2:
#ifdef RLX_QUANT_HAVE_AVX2
        return avx2_usable();
#else
        return false;
#endif
    case RLX_QUANT_AVX512:
#ifdef RLX_QUANT_HAVE_AVX2
        return avx512_vnni_usable();
#else
        return false;
#endif
    default: return false;
    }
}

bool rlx_quant_avx512_vnni_available(void)
{
#ifdef RLX_QUANT_HAVE_AVX2
    return avx512_vnni_usable();
#else
    return false;
#endif
}

rlx_quant_isa rlx_quant_isa_best(void)
{
    return rlx_quant_isa_available(RLX_QUANT_AVX512) ? RLX_QUANT_AVX512
           : rlx_quant_isa_available(RLX_QUANT_AVX2) ? RLX_QUANT_AVX2
                                                     : RLX_QUANT_SCALAR;
}

const char *rlx_quant_isa_name(rlx_quant_isa isa)
{
    switch (isa) {
    case RLX_QUANT_SCALAR: return "scalar";
    case RLX_QUANT_AVX2: return "avx2";
    case RLX_QUANT_AVX512: return "avx512";
    default: return "?";
    }
}

/* --------------------------------------------------------- activations */

int rlx_quant_act_type(int weight_type)
{
    switch (weight_type) {
    case RLX_GGML_Q8_0:
    case RLX_GGML_Q4_0:
    case RLX_GGML_Q4_1:
    case RLX_GGML_Q5_0:
    case RLX_GGML_Q5_1: return RLX_GGML_Q8_0;
    case RLX_GGML_Q4_K:
    case RLX_GGML_Q5_K:
    case RLX_GGML_Q6_K:
    case RLX_GGML_Q8_K: return RLX_GGML_Q8_K;
    default: return -1;
    }
}

size_t rlx_quant_act_bytes(int weight_type, int64_t n)
{
    int at = rlx_quant_act_type(weight_type);
    return at < 0 ? 0 : rlx_quant_row_bytes(at, n);
}

/* v rounded to the nearest integer, ties to even, for |v| < 2^22: adding
 * 1.5 * 2^23 leaves no fraction bits (as ggml's nearest_int does), and the
 * loops around it vectorise where nearbyintf is a libm call. */
static inline float round_even(float v)
{
    const float big = 12582912.0f; /* IEEE arithmetic: not folded away without -ffast-math */
    return (v + big) - big;
}

/* Activations to Q8_0 the way llama.cpp's CPU backend rounds them (f32
 * scale 127 / max|x|, levels to nearest even; the stored scale is the f16
 * of max|x| / 127), so that a dot over the same weights gives its result:
 * the reference quantizer would use the f16 scale for the levels too. */
static rlx_status act_q8_0(const float *x, uint8_t *b, int64_t n)
{
    if (n < 0 || n % 32)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_quantize_act: Q8_0 rows hold whole blocks of 32, not %lld",
                             (long long)n);
#ifdef RLX_QUANT_HAVE_AVX2
    if (avx512_vnni_usable()) { /* the same bytes; a prompt's rows spent 9% of a Q8_0 prefill here */
        rlx_quant_act_q8_0_avx512(x, b, n);
        return RLX_OK;
    }
#endif
    for (int64_t s = 0; s < n; s += 32, b += 34) {
        float amax = 0;
        for (int j = 0; j < 32; j++) {
            float a = fabsf(x[s + j]);
            amax = a > amax ? a : amax; /* NaN never wins */
        }
        float id = amax != 0 && isfinite(amax) ? 127.0f / amax : 0.0f;
        uint16_t d = rlx_f32_to_f16(isfinite(amax) ? amax / 127.0f : 0.0f);
        memcpy(b, &d, 2);
        for (int j = 0; j < 32; j++) {
            float v = x[s + j] * id;
            v = v != v ? 0.0f : v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
            b[2 + j] = (uint8_t)(int8_t)round_even(v);
        }
    }
    return RLX_OK;
}

/* Activations to Q8_K as llama.cpp's CPU backend makes them (its
 * quantize_row_q8_K: the scale -127 / (the element of largest magnitude,
 * with its sign), levels rounded to nearest even in f32, the stored scale
 * its reciprocal), in f32 as the kernels read them; the reference
 * quantizer's double arithmetic costs a decode step several percent.  A
 * block with a non-finite element is all zeros (scale 0). */
static rlx_status act_q8_k(const float *x, uint8_t *b, int64_t n)
{
    if (n < 0 || n % RLX_QK)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_quantize_act: Q8_K rows hold whole blocks of %d, not %lld",
                             RLX_QK, (long long)n);
#ifdef RLX_QUANT_HAVE_AVX2
    if (avx512_vnni_usable()) { /* the same bytes */
        rlx_quant_act_q8_k_avx512(x, b, n);
        return RLX_OK;
    }
#endif
    for (int64_t s = 0; s < n; s += RLX_QK, b += RLX_Q8_K_BYTES) {
        float amax = 0, max = 0;
        for (int j = 0; j < RLX_QK; j++) {
            float a = fabsf(x[s + j]);
            if (a > amax || a != a) { /* a NaN is kept, and ends the block */
                amax = a;
                max = x[s + j];
            }
        }
        int8_t *q = (int8_t *)(b + RLX_Q8_K_QS);
        int16_t bsums[16] = {0};
        float d = 0;
        if (amax != 0 && isfinite(amax)) {
            const float iscale = -127.0f / max;
            for (int j = 0; j < RLX_QK; j++) {
                float v = round_even(iscale * x[s + j]);
                q[j] = (int8_t)(v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v);
                bsums[j / 16] = (int16_t)(bsums[j / 16] + q[j]);
            }
            d = 1.0f / iscale;
        } else {
            memset(q, 0, RLX_QK);
        }
        memcpy(b, &d, 4);
        memcpy(b + RLX_Q8_K_BSUMS, bsums, sizeof bsums);
    }
    return RLX_OK;
}

rlx_status rlx_quantize_act(int weight_type, const float *x, void *act_q8, int64_t n)
{
    int at = rlx_quant_act_type(weight_type);
    if (at < 0)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_quantize_act: ggml type %d has no quantized dot product",
                             weight_type);
    return at == RLX_GGML_Q8_0 ? act_q8_0(x, act_q8, n) : act_q8_k(x, act_q8, n);
}

/* -------------------------------------------------------------- scalar */

static float dot_q8_0(int64_t nb, const uint8_t *w, const uint8_t *a)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++, w += RLX_Q8_0_BYTES, a += RLX_Q8_0_BYTES) {
        const int8_t *x = (const int8_t *)(w + 2), *y = (const int8_t *)(a + 2);
        int s = 0;
        for (int j = 0; j < 32; j++)
            s += x[j] * y[j];
        sum += rlx_q_f16(w) * rlx_q_f16(a) * (float)s;
    }
    return sum;
}

/* The 32 levels of a Q4/Q5 block (qh_at 0: no fifth bit) less `zero`,
 * unpacked first so that the dot loops after it vectorise. */
static inline void unpack32(const uint8_t *qs, const uint8_t *w, int qh_at, int zero, int8_t q[32])
{
    const uint32_t qh = qh_at ? rlx_q_u32(w + qh_at) : 0;
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(((qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4)) - zero);
        q[j + 16] = (int8_t)(((qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4)) - zero);
    }
}

/* Q4_0 and Q5_0, levels centred by `zero`. */
static float dot_sym(int64_t nb, const uint8_t *w, const uint8_t *a, size_t bytes, int qh_at, int zero)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++, w += bytes, a += RLX_Q8_0_BYTES) {
        int8_t q[32];
        unpack32(w + (qh_at ? qh_at + 4 : 2), w, qh_at, zero, q);
        const int8_t *y = (const int8_t *)(a + 2);
        int s = 0;
        for (int j = 0; j < 32; j++)
            s += q[j] * y[j];
        sum += rlx_q_f16(w) * rlx_q_f16(a) * (float)s;
    }
    return sum;
}

/* Q4_1 and Q5_1: x = q * d + m, so x . y = d * (q . y) + m * sum(y). */
static float dot_min(int64_t nb, const uint8_t *w, const uint8_t *a, size_t bytes, int qh_at)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++, w += bytes, a += RLX_Q8_0_BYTES) {
        int8_t q[32];
        unpack32(w + (qh_at ? qh_at + 4 : 4), w, qh_at, 0, q);
        const int8_t *y = (const int8_t *)(a + 2);
        int s = 0, ys = 0;
        for (int j = 0; j < 32; j++) {
            s += q[j] * y[j];
            ys += y[j];
        }
        const float da = rlx_q_f16(a);
        sum += rlx_q_f16(w) * da * (float)s + rlx_q_f16(w + 2) * da * (float)ys;
    }
    return sum;
}

/* Q4_K and Q5_K: x = (d * sc) * q - dmin * m per sub-block of 32; the
 * mins meet the activations' 16-element sums (bsums). */
static float dot_q45_k(int64_t nb, const uint8_t *w, const uint8_t *a, bool five)
{
    const size_t bytes = five ? RLX_Q5_K_BYTES : RLX_Q4_K_BYTES;
    float sum = 0;
    for (int64_t i = 0; i < nb; i++, w += bytes, a += RLX_Q8_K_BYTES) {
        uint8_t sc[8], m[8];
        rlx_q_k4_scales_mins(w + 4, sc, m);
        const uint8_t *qh = five ? w + 16 : NULL;
        const uint8_t *qs = five ? w + 48 : w + 16;
        const int8_t *y = (const int8_t *)(a + RLX_Q8_K_QS);
        int16_t bs[16];
        memcpy(bs, a + RLX_Q8_K_BSUMS, sizeof bs);
        int8_t q[RLX_QK];
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int lo = qs[32 * c + l] & 0x0f, hi = qs[32 * c + l] >> 4;
                if (qh) {
                    lo |= ((qh[l] >> (2 * c)) & 1) << 4;
                    hi |= ((qh[l] >> (2 * c + 1)) & 1) << 4;
                }
                q[64 * c + l] = (int8_t)lo;
                q[64 * c + 32 + l] = (int8_t)hi;
            }
        int isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            int s = 0;
            for (int l = 0; l < 32; l++)
                s += q[32 * j + l] * y[32 * j + l];
            isum += sc[j] * s;
        }
        for (int j = 0; j < 8; j++)
            msum += m[j] * (bs[2 * j] + bs[2 * j + 1]);
        const float da = rlx_q_f32(a);
        sum += rlx_q_f16(w) * da * (float)isum - rlx_q_f16(w + 2) * da * (float)msum;
    }
    return sum;
}

static float dot_q6_k(int64_t nb, const uint8_t *w, const uint8_t *a)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++, w += RLX_Q6_K_BYTES, a += RLX_Q8_K_BYTES) {
        const int8_t *sc = (const int8_t *)(w + RLX_Q6_K_SCALES);
        const int8_t *y = (const int8_t *)(a + RLX_Q8_K_QS);
        /* the levels unpacked first, then plain loops compilers vectorise */
        int8_t q[RLX_QK];
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w + 64 * h, *qh = w + RLX_Q6_K_QH + 32 * h;
            int8_t *qq = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                qq[l] = (int8_t)(((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32);
                qq[l + 32] = (int8_t)(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
                qq[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                qq[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += q[16 * g + j] * y[16 * g + j];
            isum += sc[g] * s;
        }
        sum += rlx_q_f16(w + RLX_Q6_K_D) * rlx_q_f32(a) * (float)isum;
    }
    return sum;
}

static float dot_q8_k(int64_t nb, const uint8_t *w, const uint8_t *a)
{
    float sum = 0;
    for (int64_t i = 0; i < nb; i++, w += RLX_Q8_K_BYTES, a += RLX_Q8_K_BYTES) {
        const int8_t *x = (const int8_t *)(w + RLX_Q8_K_QS), *y = (const int8_t *)(a + RLX_Q8_K_QS);
        int s = 0;
        for (int j = 0; j < RLX_QK; j++)
            s += x[j] * y[j];
        sum += rlx_q_f32(w) * rlx_q_f32(a) * (float)s;
    }
    return sum;
}

static float dot_scalar(int t, int64_t nb, const uint8_t *w, const uint8_t *a)
{
    switch (t) {
    case RLX_GGML_Q8_0: return dot_q8_0(nb, w, a);
    case RLX_GGML_Q4_0: return dot_sym(nb, w, a, RLX_Q4_0_BYTES, 0, 8);
    case RLX_GGML_Q5_0: return dot_sym(nb, w, a, RLX_Q5_0_BYTES, 2, 16);
    case RLX_GGML_Q4_1: return dot_min(nb, w, a, RLX_Q4_1_BYTES, 0);
    case RLX_GGML_Q5_1: return dot_min(nb, w, a, RLX_Q5_1_BYTES, 4);
    case RLX_GGML_Q4_K: return dot_q45_k(nb, w, a, false);
    case RLX_GGML_Q5_K: return dot_q45_k(nb, w, a, true);
    case RLX_GGML_Q6_K: return dot_q6_k(nb, w, a);
    case RLX_GGML_Q8_K: return dot_q8_k(nb, w, a);
    default: return NAN;
    }
}

/* ---------------------------------------------------------------- entry */

/* The block count of n elements of t, or -1 with the error set. */
static int64_t dot_blocks(int t, int64_t n)
{
    int64_t be = rlx_quant_block_elems(t);
    if (be == 0 || n < 0 || n % be != 0) {
        rlx_set_error(be == 0 ? RLX_ERR_UNSUPPORTED : RLX_ERR_INVALID_ARGUMENT,
                      "rlx_quant_vec_dot: %lld elements of ggml type %d (%s), not a multiple of its block",
                      (long long)n, t, rlx_ggml_type_name(t) ? rlx_ggml_type_name(t) : "unknown");
        return -1;
    }
    return n / be;
}

static void dot_rows_isa(rlx_quant_isa isa, int t, int64_t nb, const uint8_t *w, size_t ws, int64_t rows,
                         const uint8_t *a, float *y)
{
#ifdef RLX_QUANT_HAVE_AVX2
    if (isa == RLX_QUANT_AVX512 && rlx_quant_dot_rows_avx512(t, nb, w, ws, rows, a, y))
        return;
    if (isa >= RLX_QUANT_AVX2 && rlx_quant_dot_rows_avx2(t, nb, w, ws, rows, a, y))
        return;
#else
    (void)isa;
#endif
    for (int64_t j = 0; j < rows; j++)
        y[j] = dot_scalar(t, nb, w + (size_t)j * ws, a);
}

float rlx_quant_vec_dot_isa(rlx_quant_isa isa, int t, int64_t n, const void *w_row, const void *act_q8)
{
    int64_t nb = dot_blocks(t, n);
    if (nb < 0)
        return NAN;
    float r;
    dot_rows_isa(isa, t, nb, w_row, 0, 1, act_q8, &r);
    return r;
}

rlx_status rlx_quant_vec_dot_rows(int t, int64_t n, const void *w, size_t w_stride, int64_t rows, const void *act_q8,
                                  float *y)
{
    int64_t nb = dot_blocks(t, n);
    if (nb < 0)
        return rlx_last_status_or(RLX_ERR_INVALID_ARGUMENT);
    if (rows > 0)
        dot_rows_isa(rlx_quant_isa_best(), t, nb, w, w_stride, rows, act_q8, y);
    return RLX_OK;
}

float rlx_quant_vec_dot(int t, int64_t n, const void *w_row, const void *act_q8)
{
    return rlx_quant_vec_dot_isa(rlx_quant_isa_best(), t, n, w_row, act_q8);
}

/* ---------------------------------------------------------------- tiles */

bool rlx_quant_tile_available(int t)
{
#ifdef RLX_QUANT_HAVE_AVX2
    /* equal to rlx_quant_vec_dot only while that runs the AVX2 kernels or
     * the AVX-512 rows (which equal them) */
    if (rlx_quant_isa_best() != RLX_QUANT_AVX512)
        return false;
    switch (t) {
    case RLX_GGML_Q8_0:
    case RLX_GGML_Q4_0:
    case RLX_GGML_Q5_0:
    case RLX_GGML_Q4_K:
    case RLX_GGML_Q5_K:
    case RLX_GGML_Q6_K: return true;
    default: return false;
    }
#else
    (void)t;
    return false;
#endif
}

bool rlx_quant_tile(int t, int64_t n, const void *w, size_t w_stride, const void *act, size_t act_stride, float *y,
                    int64_t ldy)
{
    int64_t be = rlx_quant_block_elems(t);
    if (be == 0 || n <= 0 || n % be != 0 || !rlx_quant_tile_available(t))
        return false;
#ifdef RLX_QUANT_HAVE_AVX2
    return rlx_quant_tile_avx512(t, n / be, w, w_stride, act, act_stride, y, ldy);
#else
    (void)w, (void)w_stride, (void)act, (void)act_stride, (void)y, (void)ldy;
    return false;
#endif
}

bool rlx_quant_tiles(int t, int64_t n, const void *w, size_t w_stride, int64_t rows, const void *act, size_t act_stride,
                     int64_t m, float *y, int64_t ldy)
{
    int64_t be = rlx_quant_block_elems(t);
    if (be == 0 || n <= 0 || n % be != 0 || rows < 0 || m < 0 || rows % RLX_QUANT_TILE || m % RLX_QUANT_TILE ||
        !rlx_quant_tile_available(t))
        return false;
#ifdef RLX_QUANT_HAVE_AVX2
    return rlx_quant_tiles_avx512(t, n / be, w, w_stride, rows, act, act_stride, m, y, ldy);
#else
    (void)w, (void)w_stride, (void)act, (void)act_stride, (void)y, (void)ldy;
    return false;
#endif
}
