/* quant_testutil.h - what the quantization tests share (tests/test_quant.c,
 * tests/quant/quant_ggml.c): a seeded generator, normal draws, the nine
 * types in one list. */
#ifndef RLX_TESTS_QUANT_TESTUTIL_H
#define RLX_TESTS_QUANT_TESTUTIL_H

#include <math.h>
#include <stdint.h>

#include "io/gguf.h"

static const int qt_types[] = {RLX_GGML_Q8_0, RLX_GGML_Q4_0, RLX_GGML_Q4_1, RLX_GGML_Q5_0, RLX_GGML_Q5_1,
                               RLX_GGML_Q4_K, RLX_GGML_Q5_K, RLX_GGML_Q6_K, RLX_GGML_Q8_K};
enum { QT_NTYPES = sizeof qt_types / sizeof qt_types[0] };

static uint64_t qt_state = 0x9e3779b97f4a7c15ull;

static inline void qt_seed(uint64_t s) { qt_state = s * 0x9e3779b97f4a7c15ull + 1; }

/* splitmix64 */
static inline uint64_t qt_u64(void)
{
    uint64_t z = (qt_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double qt_unit(void) { return (double)(qt_u64() >> 11) * 0x1.0p-53; } /* [0, 1) */

/* standard normal (Box-Muller) */
static inline double qt_normal(void)
{
    double u = qt_unit(), v = qt_unit();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

#endif
