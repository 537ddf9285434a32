/* rlx_ew_bench.c - times one binary elementwise op on the CUDA backend, in
 * f16 and f32: mul of two [8192, 4096] tensors, then of one [8192, 4096]
 * and a [4096] row vector; median of 200 runs after 20 warm-up runs, and
 * the bandwidth that implies (operands read once, output written once).
 *
 *   cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L bench/gpu/rlx_ew_bench.c -Iinclude \
 *      -LBUILD -Wl,-rpath,$PWD/BUILD -lrlx -lm -o rlx_ew_bench && ./rlx_ew_bench */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rlx.h"

#define ROWS 8192
#define COLS 4096
#define RUNS 200

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what)
{
    printf("ERROR %s: %s\n", what, rlx_last_error());
    return 1;
}

int main(void)
{
    for (int c = 0; c < 4; c++) {
        int row_vector = c & 1;
        rlx_dtype dt = c < 2 ? RLX_F16 : RLX_F32;
        size_t es = rlx_dtype_size(dt);
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", dt, 2, (int64_t[]){ROWS, COLS});
        rlx_node y = row_vector ? rlx_input(g, "y", dt, 1, (int64_t[]){COLS})
                                : rlx_input(g, "y", dt, 2, (int64_t[]){ROWS, COLS});
        rlx_output(g, "z", rlx_mul(g, x, y));
        rlx_options o;
        rlx_options_init(&o);
        o.device = RLX_DEVICE_CUDA;
        rlx_session *s = NULL;
        if (rlx_compile(g, &o, &s) != RLX_OK)
            return fail("compile");
        for (int i = 0; i < 2; i++) {
            rlx_tensor_info info;
            rlx_session_info(s, 0, i, &info);
            void *b = malloc(info.bytes);
            if (!b)
                return 1;
            for (size_t k = 0; k < info.bytes / es; k++) { /* values in [-1, 1), never zero throughout */
                float v = (float)((k * 7919) % 1000) / 500.0f - 1.0f;
                if (dt == RLX_F16)
                    ((unsigned short *)b)[k] = rlx_f32_to_f16(v);
                else
                    ((float *)b)[k] = v;
            }
            if (rlx_session_set_input(s, info.name, b, info.bytes) != RLX_OK)
                return fail("input");
            free(b);
        }
        double t[RUNS];
        for (int i = 0; i < 20; i++)
            if (rlx_session_run(s) != RLX_OK)
                return fail("run");
        for (int i = 0; i < RUNS; i++) {
            double a = now_ms();
            if (rlx_session_run(s) != RLX_OK)
                return fail("run");
            t[i] = now_ms() - a;
        }
        qsort(t, RUNS, sizeof t[0], cmp);
        double bytes = (double)ROWS * COLS * (double)es * (row_vector ? 2 : 3);
        printf("mul %s %dx%d %s: median %.4f ms, %.2f TB/s\n", dt == RLX_F16 ? "f16" : "f32", ROWS, COLS,
               row_vector ? "row vector" : "same shape", t[RUNS / 2], bytes / t[RUNS / 2] / 1e9);
        rlx_session_free(s);
        rlx_graph_free(g);
    }
    return 0;
}
