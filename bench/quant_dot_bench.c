/* quant_dot_bench.c - the quantized dot products (src/quant/quant_dot.h) as
 * a matrix-vector product on one thread: every row of a ROWS x COLS weight
 * matrix against one quantized activation row, per type and per kernel
 * set (scalar, and AVX2 where the processor has it).
 *
 *   quant_dot_bench [--rows 4096] [--cols 4096] [--repeat 9] [--types q4_0,q4_k,...] [--prompt M]
 *
 * Prints per type and kernel set the median time of --repeat products
 * after one warm-up and the weight bytes streamed per second (GB/s, 1e9);
 * with --prompt, also M activation rows against the matrix (a prompt's
 * product, one thread) one dot at a time and in rlx_quant_tile's tiles,
 * median and best time and multiply-adds per second (GMAC/s, 1e9), the two
 * checked equal to the bit;
 * the weights are random levels with finite scales (the kernels' speed
 * does not depend on the values). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/dtype.h"
#include "core/error.h"
#include "quant/quant_dot.h"

static int cmp_d(const void *a, const void *b);

/* y[M, rows] = M activation rows (act, ab bytes each) against the weights,
 * in 16-row column blocks as the CPU qmatmul walks them: one dot at a time,
 * or tiles (rows and M multiples of RLX_QUANT_TILE). */
static void prompt_product(int t, int64_t rows, int64_t cols, const uint8_t *w, size_t rb, const uint8_t *act,
                           size_t ab, int64_t M, float *y, bool tiled)
{
    const int64_t T = RLX_QUANT_TILE;
    for (int64_t j0 = 0; j0 < rows; j0 += 16) {
        int64_t j1 = j0 + 16 < rows ? j0 + 16 : rows;
        for (int64_t i = 0; i < M; i += tiled ? T : 1)
            for (int64_t j = j0; j < j1; j += tiled ? T : 1)
                if (tiled)
                    rlx_quant_tile(t, cols, w + j * rb, rb, act + i * ab, ab, y + i * rows + j, rows);
                else
                    y[i * rows + j] = rlx_quant_vec_dot(t, cols, w + j * rb, act + i * ab);
    }
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* byte offsets of a type's f16 scale fields (Q8_K: its f32 d at 0) */
static int scale_offsets(int t, int off[2])
{
    switch (t) {
    case RLX_GGML_Q4_1:
    case RLX_GGML_Q5_1:
    case RLX_GGML_Q4_K:
    case RLX_GGML_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case RLX_GGML_Q6_K: off[0] = 208; return 1;
    default: off[0] = 0; return 1;
    }
}

/* The prompt's product one dot at a time and tiled; nonzero when they differ. */
static int prompt_bench(int t, int64_t rows, int64_t cols, const uint8_t *w, size_t rb, const float *x, int64_t M,
                        int repeat)
{
    size_t ab = rlx_quant_act_bytes(t, cols);
    uint8_t *act = malloc(ab * M);
    float *xr = malloc(cols * sizeof *xr), *y[2] = {malloc(sizeof(float) * M * rows), malloc(sizeof(float) * M * rows)};
    double *times = malloc(repeat * sizeof *times);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t e = 0; e < cols; e++)
            xr[e] = x[(e + i * 7) % cols] * (float)(1 + i % 3);
        rlx_quantize_act(t, xr, act + i * ab, cols);
    }
    int status = 0;
    for (int tiled = 0; tiled < 2 && (!tiled || rlx_quant_tile_available(t)); tiled++) {
        for (int r = -1; r < repeat; r++) {
            double t0 = rlx_now_ms();
            prompt_product(t, rows, cols, w, rb, act, ab, M, y[tiled], tiled);
            if (r >= 0)
                times[r] = rlx_now_ms() - t0;
        }
        qsort(times, (size_t)repeat, sizeof *times, cmp_d);
        printf("%-6s %-7s %10.3f %9.2f  (%d prompt rows, best %.3f ms)\n", rlx_ggml_type_name(t),
               tiled ? "tiles" : "dots", times[repeat / 2], (double)M * rows * cols / (times[0] * 1e6), (int)M,
               times[0]);
        if (tiled && memcmp(y[0], y[1], sizeof(float) * M * rows)) {
            fprintf(stderr, "quant_dot_bench: %s: the tiles differ from the dots\n", rlx_ggml_type_name(t));
            status = 1;
        }
    }
    free(act), free(xr), free(y[0]), free(y[1]), free(times);
    return status;
}

int main(int argc, char **argv)
{
    int64_t rows = 4096, cols = 4096;
    int repeat = 9;
    int64_t prompt = 0;
    const char *types = "q8_0,q4_0,q4_1,q5_0,q5_1,q4_k,q5_k,q6_k";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--rows"))
            rows = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--cols"))
            cols = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--repeat"))
            repeat = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--prompt"))
            prompt = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--types"))
            types = argv[++i];
        else {
            fprintf(stderr,
                    "usage: quant_dot_bench [--rows N] [--cols N] [--repeat N] [--types q4_0,q4_k,...] [--prompt M]\n");
            return 2;
        }
    }
    if (rows < 1 || cols < 256 || cols % 256 || repeat < 1 || prompt < 0 ||
        (prompt && (prompt % RLX_QUANT_TILE || rows % RLX_QUANT_TILE))) {
        fprintf(stderr,
                "quant_dot_bench: rows >= 1, cols a multiple of 256, repeat >= 1, prompt and rows multiples "
                "of %d with --prompt\n",
                RLX_QUANT_TILE);
        return 2;
    }
    printf("%lld x %lld matrix-vector product, one thread, median of %d\n", (long long)rows, (long long)cols, repeat);
    printf("%-6s %-7s %10s %9s\n", "type", "kernels", "ms", "GB/s");
    float *x = malloc(cols * sizeof *x), *y = malloc(rows * sizeof *y);
    double *times = malloc(repeat * sizeof *times);
    for (int64_t i = 0; i < cols; i++)
        x[i] = (float)((int64_t)(next() % 2001) - 1000) / 500.0f;
    int status = 0;
    for (int t = 0; t < RLX_GGML_TYPE_COUNT; t++) {
        const char *name = rlx_ggml_type_name(t);
        char lower[16];
        if (!rlx_qtype_supported(t) || !name || strlen(name) >= sizeof lower)
            continue;
        for (size_t k = 0; k <= strlen(name); k++)
            lower[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] + 32 : name[k]);
        const char *hit = strstr(types, lower);
        size_t ln = strlen(lower);
        if (!hit || (hit[ln] != 0 && hit[ln] != ','))
            continue;
        size_t row_bytes = rlx_quant_row_bytes(t, cols);
        uint8_t *w = malloc(row_bytes * rows), *act = malloc(rlx_quant_act_bytes(t, cols));
        for (size_t i = 0; i < row_bytes * rows; i++)
            w[i] = (uint8_t)next();
        int off[2], nf = scale_offsets(t, off);
        size_t bb = rlx_quant_block_bytes(t);
        for (size_t b = 0; b < row_bytes * rows / bb; b++)
            for (int f = 0; f < nf; f++) {
                if (t == RLX_GGML_Q8_K) {
                    float d = 1e-3f;
                    memcpy(w + b * bb, &d, 4);
                } else {
                    uint16_t h = rlx_f32_to_f16(1e-3f * (float)(1 + next() % 8));
                    memcpy(w + b * bb + off[f], &h, 2);
                }
            }
        if (rlx_quantize_act(t, x, act, cols) != RLX_OK) {
            fprintf(stderr, "quant_dot_bench: %s\n", rlx_last_error());
            return 1;
        }
        float first = 0;
        for (int isa = 0; isa < RLX_QUANT_ISA_COUNT; isa++) {
            if (!rlx_quant_isa_available((rlx_quant_isa)isa))
                continue;
            for (int r = -1; r < repeat; r++) { /* r = -1: warm-up */
                double t0 = rlx_now_ms();
                for (int64_t i = 0; i < rows; i++)
                    y[i] = rlx_quant_vec_dot_isa((rlx_quant_isa)isa, t, cols, w + i * row_bytes, act);
                if (r >= 0)
                    times[r] = rlx_now_ms() - t0;
            }
            qsort(times, (size_t)repeat, sizeof *times, cmp_d);
            double ms = times[repeat / 2];
            printf("%-6s %-7s %10.3f %9.2f\n", name, rlx_quant_isa_name((rlx_quant_isa)isa), ms,
                   (double)row_bytes * rows / (ms * 1e6));
            /* the kernel sets agree (a bench that computes nonsense is no bench) */
            if (isa == 0)
                first = y[0];
            else if (!(fabsf(y[0] - first) <= 1e-3f * (fabsf(first) + 1.0f))) {
                fprintf(stderr, "quant_dot_bench: %s row 0: %s %g, scalar %g\n", name,
                        rlx_quant_isa_name((rlx_quant_isa)isa), y[0], first);
                status = 1;
            }
        }
        if (prompt && prompt_bench(t, rows, cols, w, row_bytes, x, prompt, repeat))
            status = 1;
        free(w);
        free(act);
    }
    free(x);
    free(y);
    free(times);
    return status;
}
