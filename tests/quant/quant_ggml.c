/* quant_ggml.c - the quantized types (src/quant) against ggml itself: the
 * prebuilt libggml-base.so of node-llama-cpp (tests/llm/fetch_llamacpp.sh),
 * loaded with dlopen here only; RLX never links it.
 *
 *   quant_ggml PATH/libggml-base.so
 *
 * Checks, per type:
 *   - ggml_fp16_to_fp32 and rlx_f16_to_f32 agree on all 65536 patterns
 *     (NaN: the same sign and payload; a signalling NaN may come back quiet);
 *   - ggml's to_float and rlx_dequantize_row give the same bits on random
 *     blocks (every byte random, so scales of every class) and on crafted
 *     ones (+-0, subnormal, largest, infinite and NaN scales; all-zero and
 *     all-0xff levels); NaN results compared as NaN (where a NaN scale meets
 *     a NaN min, which of the two propagates is left open by IEEE 754);
 *   - on seeded normal data, the RMS error of rlx_quantize_row is at most
 *     1.05 times that of ggml_quantize_chunk (Q8_K: ggml's from_float_ref),
 *     both read back by ggml's to_float; and ggml reads RLX's blocks as RLX
 *     does.
 * Exit 0 when all hold, 1 otherwise, 77 (with the reason) when the library
 * cannot be loaded. */
#include <dlfcn.h>
#include <stdarg.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "quant/quant.h"
#include "quant_testutil.h"

/* ggml.h's struct ggml_type_traits (public ABI), mirrored so that this
 * builds without llama.cpp's headers; its block sizes are checked against
 * RLX's before anything else is trusted. */
struct ggml_traits {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    void (*to_float)(const void *x, float *y, int64_t k);
    void (*from_float_ref)(const float *x, void *y, int64_t k);
};

static const struct ggml_traits *(*get_traits)(int type);
static size_t (*quantize_chunk)(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row,
                                const float *imatrix);
static float (*fp16_to_fp32)(uint16_t h);

static int failures;
/* NaN results of different bits (sign or payload): where two NaN operands
 * meet (a NaN scale and a NaN min), IEEE 754 leaves open which propagates,
 * and compilers order the operands of a sum freely. */
static long nan_bits_differ;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    failures++;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void check_f16(void)
{
    int nan_quieted = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint32_t g = bits_of(fp16_to_fp32((uint16_t)h)), r = bits_of(rlx_f16_to_f32((uint16_t)h));
        if (g == r)
            continue;
        if ((r & 0x7fffffffu) > 0x7f800000u && (g | 0x400000u) == (r | 0x400000u)) {
            nan_quieted++; /* the same NaN, one of them quiet */
            continue;
        }
        fail("f16 0x%04x: ggml 0x%08x, rlx 0x%08x", h, g, r);
    }
    printf("f16 -> f32: 65536 patterns agree (%d signalling NaNs come back quiet from ggml)\n", nan_quieted);
}

/* Both rows read back by ggml and by RLX: the same bits, NaN as NaN. */
static long compare_reads(int t, const struct ggml_traits *tr, const uint8_t *blocks, int64_t n, const char *what)
{
    float *g = malloc(n * sizeof *g), *r = malloc(n * sizeof *r);
    tr->to_float(blocks, g, n);
    if (rlx_dequantize_row(t, blocks, r, n) != RLX_OK)
        fail("%s: rlx_dequantize_row failed", tr->type_name);
    long bad = 0;
    for (int64_t i = 0; i < n; i++) {
        if (bits_of(g[i]) == bits_of(r[i]))
            continue;
        if (isnan(g[i]) && isnan(r[i])) {
            nan_bits_differ++;
            continue;
        }
        if (bad++ < 5)
            fail("%s %s element %lld: ggml %a (0x%08x), rlx %a (0x%08x)", tr->type_name, what, (long long)i,
                 (double)g[i], bits_of(g[i]), (double)r[i], bits_of(r[i]));
    }
    free(g);
    free(r);
    return bad;
}

static void scale_offsets(int t, int *off, int *nf)
{
    switch (t) {
    case RLX_GGML_Q4_1:
    case RLX_GGML_Q5_1:
    case RLX_GGML_Q4_K:
    case RLX_GGML_Q5_K: off[0] = 0, off[1] = 2, *nf = 2; break;
    case RLX_GGML_Q6_K: off[0] = 208, *nf = 1; break;
    default: off[0] = 0, *nf = 1; break;
    }
}

static void check_dequantize(int t, const struct ggml_traits *tr)
{
    const size_t bb = rlx_quant_block_bytes(t);
    const int64_t be = rlx_quant_block_elems(t);
    enum { NB = 4096 };
    nan_bits_differ = 0;
    uint8_t *row = malloc(NB * bb);
    for (size_t i = 0; i < NB * bb; i++)
        row[i] = (uint8_t)qt_u64();
    long bad = compare_reads(t, tr, row, NB * be, "random blocks");
    static const uint16_t h16[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00,
                                   0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01};
    static const float f32s[] = {0.0f, -0.0f, 1e-45f, FLT_MIN, -2.5f, FLT_MAX, INFINITY, -INFINITY, NAN};
    enum { NH = sizeof h16 / sizeof h16[0], NF = sizeof f32s / sizeof f32s[0] };
    int off[2], nf;
    scale_offsets(t, off, &nf);
    int64_t k = 0;
    for (int fill = 0; fill < 3; fill++)
        for (int a = 0; a < (t == RLX_GGML_Q8_K ? NF : NH); a++)
            for (int c = 0; c < (nf == 2 ? NH : 1); c++, k++) {
                uint8_t *b = row + k * bb;
                if (fill < 2)
                    memset(b, fill ? 0xff : 0, bb);
                if (t == RLX_GGML_Q8_K) {
                    memcpy(b, &f32s[a], 4);
                } else {
                    memcpy(b + off[0], &h16[a], 2);
                    if (nf == 2)
                        memcpy(b + off[1], &h16[c], 2);
                }
            }
    bad += compare_reads(t, tr, row, k * be, "crafted blocks");
    printf("%-5s dequantize: %lld random and %lld crafted blocks, %ld elements differ from ggml's to_float "
           "(NaN results: %ld of other bits)\n",
           tr->type_name, (long long)NB, (long long)k, bad, nan_bits_differ);
    free(row);
}

static double rms_read_back(const struct ggml_traits *tr, const uint8_t *q, const float *x, int64_t n)
{
    float *y = malloc(n * sizeof *y);
    tr->to_float(q, y, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
    free(y);
    return sqrt(s / n);
}

static void check_quantize(int t, const struct ggml_traits *tr)
{
    enum { ROWS = 64, COLS = 4096 };
    const int64_t n = (int64_t)ROWS * COLS;
    float *x = malloc(n * sizeof *x);
    qt_seed(100 + t);
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)qt_normal();
    size_t bytes = rlx_quant_row_bytes(t, n);
    uint8_t *qg = malloc(bytes), *qr = malloc(bytes);
    if (t == RLX_GGML_Q8_K)
        tr->from_float_ref(x, qg, n); /* not one of ggml_quantize_chunk's types */
    else if (quantize_chunk(t, x, qg, 0, ROWS, COLS, NULL) != bytes)
        fail("%s: ggml_quantize_chunk wrote an unexpected size", tr->type_name);
    if (rlx_quantize_row(t, x, qr, n) != RLX_OK)
        fail("%s: rlx_quantize_row failed", tr->type_name);
    double eg = rms_read_back(tr, qg, x, n), er = rms_read_back(tr, qr, x, n);
    printf("%-5s quantize: rms error rlx %.6g, ggml %.6g, ratio %.4f\n", tr->type_name, er, eg, er / eg);
    if (!(er <= 1.05 * eg))
        fail("%s: rms error %.6g is above 1.05 x ggml's %.6g", tr->type_name, er, eg);
    if (compare_reads(t, tr, qr, n, "rlx-quantized blocks"))
        fail("%s: ggml reads rlx's blocks differently", tr->type_name);
    free(x);
    free(qg);
    free(qr);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: quant_ggml PATH/libggml-base.so\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("skipped: cannot load %s: %s\n", argv[1], dlerror());
        return 77;
    }
    *(void **)&get_traits = dlsym(lib, "ggml_get_type_traits");
    *(void **)&quantize_chunk = dlsym(lib, "ggml_quantize_chunk");
    *(void **)&fp16_to_fp32 = dlsym(lib, "ggml_fp16_to_fp32");
    if (!get_traits || !quantize_chunk || !fp16_to_fp32) {
        printf("skipped: %s lacks ggml_get_type_traits, ggml_quantize_chunk or ggml_fp16_to_fp32\n", argv[1]);
        return 77;
    }
    check_f16();
    qt_seed(7);
    for (int i = 0; i < QT_NTYPES; i++) {
        int t = qt_types[i];
        const struct ggml_traits *tr = get_traits(t);
        if (!tr || tr->blck_size != rlx_quant_block_elems(t) || tr->type_size != rlx_quant_block_bytes(t)) {
            fail("ggml type %d: traits do not match RLX's block layout", t);
            continue;
        }
        if (!tr->to_float || !tr->from_float_ref) { /* Q8_K: ggml-base has neither */
            printf("%-5s not compared: ggml-base has no to_float or from_float_ref for it (test_quant checks it)\n",
                   tr->type_name);
            continue;
        }
        check_dequantize(t, tr);
        check_quantize(t, tr);
    }
    printf("%s\n", failures ? "FAILED" : "all checks pass");
    return failures ? 1 : 0;
}
