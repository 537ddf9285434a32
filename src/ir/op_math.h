/* op_math.h - the scalar math of the elementwise ops, written once for the
 * CPU kernels, the CUDA kernels (host and device) and the ONNX constant
 * folder.
 *
 * Plain C99 with `static inline` functions; under nvcc each function is
 * also a __device__ function (RLX_HD), so a CUDA kernel calls the very
 * formula the CPU reference computes.  Two precisions where the callers
 * need both: the _d / _f64 forms compute in double (the CPU reference for
 * f64 and non-f32 float dtypes, integer-to-float paths, the constant
 * folder), the _f / _f32 forms in float (the CPU's f32 loops and every
 * CUDA float kernel: f32, f16 and bf16 alike).  A kernel that must stay in
 * float calls the float form; nothing here widens or narrows behind its
 * back.  Fast intrinsics (__expf and the like) are not used here: kernels
 * that trade accuracy for speed keep their own expression next to the
 * kernel, and say so.
 *
 * Integer forms wrap around (no undefined overflow); conversions from
 * float to integer saturate (rlx_sat_i64). */
#ifndef RLX_OP_MATH_H
#define RLX_OP_MATH_H

#ifdef __CUDACC_RTC__
/* Compiled by NVRTC into a kernel generated at run time (the CUDA
 * backend's jit.cu): no C library headers there, and the source that
 * includes this defines the op and activation ids its float forms use.
 * Only the float and activation sections are read then. */
#else
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "ir/ir.h"
#ifdef __cplusplus
}
#endif
#endif

/* RLX_MATH: a function of this header.  The one-line formulas are
 * RLX_MATH_FORMULA: always inlined, also into the CPU's vectorised loops
 * that are built with other options or for other targets (cpu_expf.h:
 * RLX_VEC_BEGIN, RLX_CLONES), where GCC would otherwise call a plain
 * static inline function out of line and not vectorise the loop. */
#ifdef __CUDACC__
#define RLX_HD __host__ __device__
#define RLX_MATH static __forceinline__ __host__ __device__
#define RLX_MATH_FORMULA RLX_MATH
#elif defined(__GNUC__)
#define RLX_HD
#define RLX_MATH static inline
#define RLX_MATH_FORMULA static inline __attribute__((always_inline))
#else
#define RLX_HD
#define RLX_MATH static inline
#define RLX_MATH_FORMULA static inline
#endif

/* ------------------------------------------------------------- constants */

#define RLX_SQRT1_2 0.70710678118654752440        /* 1 / sqrt(2): GELU's erf argument */
#define RLX_SQRT_2_OVER_PI 0.79788456080286535588 /* sqrt(2 / pi): the tanh GELU's scale */
#define RLX_GELU_TANH_CUBIC 0.044715              /* the tanh GELU's cubic term */
#define RLX_SQRT1_2_F 0.70710678118654752440f
#define RLX_SQRT_2_OVER_PI_F 0.79788456080286535588f
#define RLX_GELU_TANH_CUBIC_F 0.044715f

/* A quiet NaN (0x7ff8... / 0x7fc00000), the same bits on host and device. */
RLX_MATH double rlx_nan_d(void)
{
#ifdef __CUDA_ARCH__
    return __longlong_as_double(0x7ff8000000000000LL);
#else
    return NAN;
#endif
}

RLX_MATH float rlx_nan_f(void)
{
#ifdef __CUDA_ARCH__
    return __int_as_float(0x7fc00000);
#else
    return NAN;
#endif
}

/* ------------------------------------------------- activations, in double */

/* NaN stays NaN (max(x, 0) would drop it). */
RLX_MATH_FORMULA double rlx_relu_d(double x) { return x > 0 ? x : (x != x ? x : 0.0); }
/* 0.5 x (1 + erf(x / sqrt 2)) through erfc: 1 + erf loses every digit
 * where GELU is tiny (x very negative). */
RLX_MATH_FORMULA double rlx_gelu_erf_d(double x) { return 0.5 * x * erfc(x * -RLX_SQRT1_2); }
RLX_MATH_FORMULA double rlx_gelu_tanh_d(double x)
{
    return 0.5 * x * (1.0 + tanh(RLX_SQRT_2_OVER_PI * (x + RLX_GELU_TANH_CUBIC * x * x * x)));
}
/* Both sigmoid forms keep exp's argument non-positive (no overflow). */
RLX_MATH_FORMULA double rlx_sigmoid_d(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
RLX_MATH_FORMULA double rlx_silu_d(double x) { return x >= 0 ? x / (1.0 + exp(-x)) : x * exp(x) / (1.0 + exp(x)); }
/* -1, 1, or x itself for zeros (keeping their sign) and NaN. */
RLX_MATH_FORMULA double rlx_sign_d(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }

/* ------------------------------------------------- activations, in float */

RLX_MATH_FORMULA float rlx_relu_f(float x) { return x > 0 ? x : (x != x ? x : 0.0f); }
RLX_MATH_FORMULA float rlx_gelu_erf_f(float x) { return 0.5f * x * erfcf(x * -RLX_SQRT1_2_F); }
RLX_MATH_FORMULA float rlx_gelu_tanh_f(float x)
{
    return 0.5f * x * (1.0f + tanhf(RLX_SQRT_2_OVER_PI_F * (x + RLX_GELU_TANH_CUBIC_F * x * x * x)));
}
RLX_MATH_FORMULA float rlx_sigmoid_f(float x) { return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)); }
RLX_MATH_FORMULA float rlx_silu_f(float x) { return x >= 0 ? x / (1.0f + expf(-x)) : x * expf(x) / (1.0f + expf(x)); }
RLX_MATH_FORMULA float rlx_sign_f(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : x); }

#ifndef __CUDACC_RTC__
/* ------------------------------------------------- elementwise ops, double */

RLX_MATH double rlx_unary_f64(int op, double x)
{
    switch (op) {
    case RLX_OP_NEG: return -x;
    case RLX_OP_ABS: return fabs(x);
    case RLX_OP_EXP: return exp(x);
    case RLX_OP_LOG: return log(x);
    case RLX_OP_SQRT: return sqrt(x);
    case RLX_OP_RSQRT: return 1.0 / sqrt(x);
    case RLX_OP_RECIPROCAL: return 1.0 / x;
    case RLX_OP_TANH: return tanh(x);
    case RLX_OP_SIGMOID: return rlx_sigmoid_d(x);
    case RLX_OP_RELU: return rlx_relu_d(x);
    case RLX_OP_GELU: return rlx_gelu_erf_d(x);
    case RLX_OP_GELU_TANH: return rlx_gelu_tanh_d(x);
    case RLX_OP_SILU: return rlx_silu_d(x);
    case RLX_OP_ERF: return erf(x);
    case RLX_OP_SIN: return sin(x);
    case RLX_OP_COS: return cos(x);
    case RLX_OP_FLOOR: return floor(x);
    case RLX_OP_CEIL: return ceil(x);
    case RLX_OP_ROUND: return nearbyint(x); /* default rounding mode: half to even */
    case RLX_OP_SIGN: return rlx_sign_d(x);
    case RLX_OP_NOT: return x == 0;
    default: return 0;
    }
}

/* a mod b: fmod_mode 1 takes C's sign rule (the dividend's), 0 Python's
 * (the divisor's). */
RLX_MATH double rlx_mod_d(double a, double b, int fmod_mode)
{
    double r = fmod(a, b);
    if (!fmod_mode && r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}

RLX_MATH double rlx_binary_f64(int op, double a, double b, int fmod_mode)
{
    switch (op) {
    case RLX_OP_ADD: return a + b;
    case RLX_OP_SUB: return a - b;
    case RLX_OP_MUL: return a * b;
    case RLX_OP_DIV: return a / b;
    case RLX_OP_POW: return pow(a, b);
    case RLX_OP_MAX: return (a != a || b != b) ? rlx_nan_d() : (a > b ? a : b);
    case RLX_OP_MIN: return (a != a || b != b) ? rlx_nan_d() : (a < b ? a : b);
    case RLX_OP_MOD: return rlx_mod_d(a, b, fmod_mode);
    case RLX_OP_EQUAL: return a == b;
    case RLX_OP_LESS: return a < b;
    case RLX_OP_GREATER: return a > b;
    case RLX_OP_AND: return (a != 0) && (b != 0);
    case RLX_OP_OR: return (a != 0) || (b != 0);
    case RLX_OP_XOR: return (a != 0) != (b != 0);
    default: return 0;
    }
}

/* The activations fused ops carry (RLX_ACT_*). */
RLX_MATH double rlx_act_f64(int act, double x)
{
    switch (act) {
    case RLX_ACT_RELU: return rlx_relu_d(x);
    case RLX_ACT_GELU: return rlx_gelu_erf_d(x);
    case RLX_ACT_GELU_TANH: return rlx_gelu_tanh_d(x);
    case RLX_ACT_SILU: return rlx_silu_d(x);
    default: return x;
    }
}

#endif /* !__CUDACC_RTC__ */

/* -------------------------------------------------- elementwise ops, float
 * The float ops of rlx_unary_f32 and rlx_binary_f32 (NOT and the
 * comparisons are not float ops: they give NaN), as X-macro lists for
 * kernels that dispatch once per vector of values. */
// clang-format off
#define RLX_FLOAT_UNARY_OPS(X) \
    X(RLX_OP_NEG) \
    X(RLX_OP_ABS) \
    X(RLX_OP_EXP) \
    X(RLX_OP_LOG) \
    X(RLX_OP_SQRT) \
    X(RLX_OP_RSQRT) \
    X(RLX_OP_RECIPROCAL) \
    X(RLX_OP_TANH) \
    X(RLX_OP_SIGMOID) \
    X(RLX_OP_RELU) \
    X(RLX_OP_GELU) \
    X(RLX_OP_GELU_TANH) \
    X(RLX_OP_SILU) \
    X(RLX_OP_ERF) \
    X(RLX_OP_SIN) \
    X(RLX_OP_COS) \
    X(RLX_OP_FLOOR) \
    X(RLX_OP_CEIL) \
    X(RLX_OP_ROUND) \
    X(RLX_OP_SIGN)
#define RLX_FLOAT_BINARY_OPS(X) \
    X(RLX_OP_ADD) \
    X(RLX_OP_SUB) \
    X(RLX_OP_MUL) \
    X(RLX_OP_DIV) \
    X(RLX_OP_POW) \
    X(RLX_OP_MAX) \
    X(RLX_OP_MIN) \
    X(RLX_OP_MOD)
// clang-format on

RLX_MATH float rlx_unary_f32(int op, float x)
{
    switch (op) {
    case RLX_OP_NEG: return -x;
    case RLX_OP_ABS: return fabsf(x);
    case RLX_OP_EXP: return expf(x);
    case RLX_OP_LOG: return logf(x);
    case RLX_OP_SQRT: return sqrtf(x);
    case RLX_OP_RSQRT: return 1.0f / sqrtf(x);
    case RLX_OP_RECIPROCAL: return 1.0f / x;
    case RLX_OP_TANH: return tanhf(x);
    case RLX_OP_SIGMOID: return rlx_sigmoid_f(x);
    case RLX_OP_RELU: return rlx_relu_f(x);
    case RLX_OP_GELU: return rlx_gelu_erf_f(x);
    case RLX_OP_GELU_TANH: return rlx_gelu_tanh_f(x);
    case RLX_OP_SILU: return rlx_silu_f(x);
    case RLX_OP_ERF: return erff(x);
    case RLX_OP_SIN: return sinf(x);
    case RLX_OP_COS: return cosf(x);
    case RLX_OP_FLOOR: return floorf(x);
    case RLX_OP_CEIL: return ceilf(x);
    case RLX_OP_ROUND: return rintf(x);
    case RLX_OP_SIGN: return rlx_sign_f(x);
    default: return rlx_nan_f();
    }
}

RLX_MATH float rlx_binary_f32(int op, float a, float b, int fmod_mode)
{
    switch (op) {
    case RLX_OP_ADD: return a + b;
    case RLX_OP_SUB: return a - b;
    case RLX_OP_MUL: return a * b;
    case RLX_OP_DIV: return a / b;
    case RLX_OP_POW: return powf(a, b);
    case RLX_OP_MAX: return (a != a || b != b) ? rlx_nan_f() : (a > b ? a : b);
    case RLX_OP_MIN: return (a != a || b != b) ? rlx_nan_f() : (a < b ? a : b);
    case RLX_OP_MOD: {
        float r = fmodf(a, b);
        if (!fmod_mode && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        return r;
    }
    default: return rlx_nan_f();
    }
}

RLX_MATH float rlx_act_f32(int act, float x)
{
    switch (act) {
    case RLX_ACT_RELU: return rlx_relu_f(x);
    case RLX_ACT_GELU: return rlx_gelu_erf_f(x);
    case RLX_ACT_GELU_TANH: return rlx_gelu_tanh_f(x);
    case RLX_ACT_SILU: return rlx_silu_f(x);
    default: return x;
    }
}

#ifndef __CUDACC_RTC__
/* ------------------------------------------------------- integer forms */

/* base^e in wrap-around arithmetic; a negative exponent gives the integer
 * part of the reciprocal (1, -1 or 0). */
RLX_MATH int64_t rlx_ipow(int64_t base, int64_t e)
{
    if (e < 0)
        return base == 1 ? 1 : (base == -1 ? ((e & 1) ? -1 : 1) : 0);
    uint64_t r = 1, b = (uint64_t)base;
    while (e) {
        if (e & 1)
            r *= b;
        b *= b;
        e >>= 1;
    }
    return (int64_t)r;
}

RLX_MATH int64_t rlx_unary_i64(int op, int64_t x)
{
    switch (op) {
    case RLX_OP_NEG: return (int64_t)(0 - (uint64_t)x);
    case RLX_OP_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case RLX_OP_SIGN: return (x > 0) - (x < 0);
    case RLX_OP_RELU: return x > 0 ? x : 0;
    case RLX_OP_NOT: return x == 0;
    default: return 0;
    }
}

/* a op b in wrap-around arithmetic (INT64_MIN / -1 is INT64_MIN, its
 * remainder 0).  Division or remainder by zero: *out = 0 and false. */
RLX_MATH bool rlx_binary_i64(int op, int64_t a, int64_t b, int fmod_mode, int64_t *out)
{
    switch (op) {
    case RLX_OP_ADD: *out = (int64_t)((uint64_t)a + (uint64_t)b); return true;
    case RLX_OP_SUB: *out = (int64_t)((uint64_t)a - (uint64_t)b); return true;
    case RLX_OP_MUL: *out = (int64_t)((uint64_t)a * (uint64_t)b); return true;
    case RLX_OP_DIV:
        if (b == 0) {
            *out = 0;
            return false;
        }
        *out = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
        return true;
    case RLX_OP_POW: *out = rlx_ipow(a, b); return true;
    case RLX_OP_MAX: *out = a > b ? a : b; return true;
    case RLX_OP_MIN: *out = a < b ? a : b; return true;
    case RLX_OP_MOD: {
        if (b == 0) {
            *out = 0;
            return false;
        }
        int64_t r = (a == INT64_MIN && b == -1) ? 0 : a % b;
        if (!fmod_mode && r != 0 && ((r < 0) != (b < 0)))
            r += b;
        *out = r;
        return true;
    }
    case RLX_OP_EQUAL: *out = a == b; return true;
    case RLX_OP_LESS: *out = a < b; return true;
    case RLX_OP_GREATER: *out = a > b; return true;
    case RLX_OP_AND: *out = a && b; return true;
    case RLX_OP_OR: *out = a || b; return true;
    case RLX_OP_XOR: *out = (a != 0) != (b != 0); return true;
    default: *out = 0; return true;
    }
}

/* Float to integer with saturation (no undefined behaviour on NaN or
 * range): NaN gives 0, values at or past a bound the bound. */
RLX_MATH int64_t rlx_sat_i64(double v, double lo, double hi)
{
    if (v != v)
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return (int64_t)hi;
    return (int64_t)v;
}

/* Clip of an integer tensor: a bound that clipped a value (ceil of lo or
 * floor of hi, whole but maybe beyond the dtype or infinite), saturated to
 * dtype dt's range, so that no conversion is out of range whatever the
 * model's bounds. */
RLX_MATH int64_t rlx_clip_bound_i(double c, int dt)
{
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    if (dt == RLX_I32)
        lo = INT32_MIN, hi = INT32_MAX;
    else if (dt == RLX_I8)
        lo = INT8_MIN, hi = INT8_MAX;
    else if (dt == RLX_U8)
        lo = 0, hi = UINT8_MAX;
    return c <= (double)lo ? lo : c >= (double)hi ? hi : (int64_t)c;
}

/* ------------------------------------------------------ random numbers
 * Counter-based: the same (seed, stream, index) always gives the same
 * value, so results depend neither on threading nor on the device. */
RLX_MATH uint64_t rlx_mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Uniform in (0, 1), from 53 random bits. */
RLX_MATH double rlx_uniform01(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t h = rlx_mix64(seed ^ rlx_mix64(stream ^ rlx_mix64(index + 0x9e3779b97f4a7c15ULL)));
    return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* ------------------------------------------------------ optimizer steps
 * One element of optimizer_step, as torch.optim computes it (single-tensor
 * form, the order of its roundings): the CPU and CUDA kernels both call
 * these.  hyper[4] is what the trainer sets per step (trainer.c, hyper_of):
 * SGD {lr, first step?, 0, 0}; Adam/AdamW {lr, lr / (1 - beta1^t),
 * sqrt(1 - beta2^t), 1 - lr * weight_decay}.  A non-finite gradient scale
 * (the trainer's sign of an overflow under loss scaling) leaves everything
 * as it was. */
typedef struct rlx_optim_coef {
    int kind, nesterov, n_states;
    double beta1, beta2, eps, weight_decay, momentum, dampening;
} rlx_optim_coef;

#define RLX_OPTIM_STEP(T, NAME, SQRT)                                                                  \
    RLX_MATH void NAME(const rlx_optim_coef *c, const float *hyper, T gscale, T *p, T g, T *s1, T *s2) \
    {                                                                                                  \
        if (!(gscale - gscale == (T)0)) /* non-finite: the step is skipped (loss scaling) */           \
            return;                                                                                    \
        g = g * gscale;                                                                                \
        T w = *p, lr = (T)hyper[0];                                                                    \
        if (c->kind == 0) { /* SGD */                                                                  \
            if (c->weight_decay != 0)                                                                  \
                g = g + (T)c->weight_decay * w;                                                        \
            if (c->n_states) {                                                                         \
                T b = hyper[1] != 0 ? g : (T)c->momentum * *s1 + (T)(1 - c->dampening) * g;            \
                *s1 = b;                                                                               \
                g = c->nesterov ? g + (T)c->momentum * b : b;                                          \
            }                                                                                          \
            *p = w - lr * g;                                                                           \
            return;                                                                                    \
        }                                                                                              \
        if (c->kind == 1 && c->weight_decay != 0) /* Adam: L2 in the gradient */                       \
            g = g + (T)c->weight_decay * w;                                                            \
        if (c->kind == 2) /* AdamW: decoupled decay */                                                 \
            w = w * (T)hyper[3];                                                                       \
        T m = *s1 + (T)(1 - c->beta1) * (g - *s1);                                                     \
        T v = *s2 * (T)c->beta2 + (T)(1 - c->beta2) * g * g;                                           \
        *s1 = m;                                                                                       \
        *s2 = v;                                                                                       \
        T denom = SQRT(v) / (T)hyper[2] + (T)c->eps;                                                   \
        *p = w - (T)hyper[1] * (m / denom);                                                            \
    }
RLX_OPTIM_STEP(float, rlx_optim_step_f32, sqrtf)
RLX_OPTIM_STEP(double, rlx_optim_step_f64, sqrt)
#endif /* !__CUDACC_RTC__ */

#endif
