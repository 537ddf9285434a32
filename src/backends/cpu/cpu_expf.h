/* cpu_expf.h - an expf that compilers can vectorise (no calls), for softmax
 * and attention, where exp dominates.
 *
 * exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln2 / 2; exp(r)
 * by a degree-6 minimax polynomial (the classic Cephes coefficients), 2^n by
 * building the float's exponent bits.  Within 2 ulp of expf on [-87, 88];
 * below -87 it gives 0 (expf would give a value under 1.7e-38), above 88 it
 * saturates at exp(88) (softmax and attention only pass x <= 0).  NaN in
 * gives NaN out.
 *
 * It is a statement macro rather than an inline function so that it also
 * lands inside functions built for another target (target_clones) or with
 * other options, which GCC will not inline into.  GCC vectorises its
 * selects only without -ftrapping-math (FP flags are never inspected here),
 * so the loops that use it sit between RLX_VEC_BEGIN and RLX_VEC_END, and
 * must call no inline helper (those would not be inlined there). */
#ifndef RLX_CPU_EXPF_H
#define RLX_CPU_EXPF_H

#include <math.h>
#include <stdint.h>

/* glibc's vector math library (libmvec) has SIMD variants of erfcf and
 * tanhf, 4, 8 and 16 wide, within 4 ulp; declared so, a loop that calls
 * them under `omp simd` vectorises into calls of the variant for the loop's
 * target.  Without libmvec the calls stay scalar. */
#ifdef RLX_HAVE_LIBMVEC
#pragma omp declare simd notinbranch
float erfcf(float);
#pragma omp declare simd notinbranch
float tanhf(float);
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define RLX_VEC_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"no-trapping-math\")")
#define RLX_VEC_END _Pragma("GCC pop_options")
#else
#define RLX_VEC_BEGIN
#define RLX_VEC_END
#endif

/* `omp simd` is a request: clang warns where it cannot honour one (a loop
 * calling libm, f16 conversions); those loops are correct either way. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* AVX2/FMA builds of hot loops picked at load time where the CPU has them.
 * Not under ThreadSanitizer: the ifunc resolvers would be instrumented and
 * run while the loader relocates the library, before TSan is set up. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define RLX_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RLX_CLONES
#endif

/* AVX-512 builds (16 floats a vector, 32 vector registers) of the few
 * kernels of our own that gain from them, called only where
 * rlx_cpu_avx512() says the processor has them.  A plain target attribute,
 * not an ifunc, so it is built under the sanitizers too. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RLX_HAVE_WIDE 1
#define RLX_WIDE __attribute__((target("arch=x86-64-v4,prefer-vector-width=512")))
#endif

/* Its constants, shared with the AVX-512 form (kernels_nn.c expf_x16). */
#define RLX_EXPF_LO (-87.0f)                /* below: 0 */
#define RLX_EXPF_HI 88.0f                   /* above: exp(88) */
#define RLX_EXPF_LOG2E 1.44269504088896341f /* n = round(x / ln 2) */
#define RLX_EXPF_ROUND 12582912.0f          /* 1.5 * 2^23: adding and subtracting it rounds to nearest */
#define RLX_EXPF_LN2_HI 0.693359375f        /* ln 2 in two parts, r = x - n ln 2 */
#define RLX_EXPF_LN2_LO (-2.12194440e-4f)
#define RLX_EXPF_P0 1.9875691500e-4f /* exp(r) ~ 1 + r + r^2 (P5 + r (P4 + ... r P0)) */
#define RLX_EXPF_P1 1.3981999507e-3f
#define RLX_EXPF_P2 8.3334519073e-3f
#define RLX_EXPF_P3 4.1665795894e-2f
#define RLX_EXPF_P4 1.6666665459e-1f
#define RLX_EXPF_P5 5.0000001201e-1f

/* y = exp(x) for float lvalue y and float expression x (evaluated once). */
#define RLX_EXPF_VEC(y, x)                                                   \
    do {                                                                     \
        float x_ = (x);                                                      \
        float xc_ = x_ < RLX_EXPF_LO ? RLX_EXPF_LO : x_;                     \
        xc_ = xc_ > RLX_EXPF_HI ? RLX_EXPF_HI : xc_;                         \
        float n_ = (xc_ * RLX_EXPF_LOG2E + RLX_EXPF_ROUND) - RLX_EXPF_ROUND; \
        n_ = n_ == n_ ? n_ : 0.0f; /* NaN: keep the conversion defined */    \
        float r_ = xc_ - n_ * RLX_EXPF_LN2_HI;                               \
        r_ = r_ - n_ * RLX_EXPF_LN2_LO;                                      \
        float p_ = RLX_EXPF_P0;                                              \
        p_ = p_ * r_ + RLX_EXPF_P1;                                          \
        p_ = p_ * r_ + RLX_EXPF_P2;                                          \
        p_ = p_ * r_ + RLX_EXPF_P3;                                          \
        p_ = p_ * r_ + RLX_EXPF_P4;                                          \
        p_ = p_ * r_ + RLX_EXPF_P5;                                          \
        p_ = p_ * r_ * r_ + r_ + 1.0f;                                       \
        union {                                                              \
            uint32_t u;                                                      \
            float f;                                                         \
        } s_;                                                                \
        s_.u = (uint32_t)((int32_t)n_ + 127) << 23;                          \
        (y) = x_ < RLX_EXPF_LO ? 0.0f : p_ * s_.f;                           \
    } while (0)

#endif
