/* rlx_gpu_bench.c - times one workload of WORKLOADS.md on the CUDA backend:
 * compile, set seeded weights and inputs once (they stay on the device),
 * warm up, then time each run (rlx_session_run returns when the device is
 * done) and print the median.
 *
 *   rlx_gpu_bench mlp|encoder|resnet50|decoder|decoder-small BATCH f32|f16|bf16 [RUNS]
 *
 * mlp, resnet50 and the decoders (prefills: `decoder` 512 tokens of the
 * Qwen3-0.6B shape, `decoder-small` 128 tokens) are built in the given dtype; the encoder is built in f32 and f16/bf16
 * runs it through the mixed-precision pass.  Prints
 * "RESULT <workload> <batch> <dtype> median_ms <x> min_ms <y> compile_ms <z>". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/workloads.h"
#include "rlx.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what)
{
    printf("ERROR %s: %s\n", what, rlx_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: rlx_gpu_bench mlp|encoder|resnet50|decoder|decoder-small BATCH f32|f16|bf16 [RUNS]\n");
        return 2;
    }
    const char *wl = argv[1], *dts = argv[3];
    int batch = atoi(argv[2]), runs = argc > 4 ? atoi(argv[4]) : 200;
    rlx_dtype dt = !strcmp(dts, "f16") ? RLX_F16 : !strcmp(dts, "bf16") ? RLX_BF16 : RLX_F32;
    rlx_options o;
    rlx_options_init(&o);
    o.device = RLX_DEVICE_CUDA;
    rlx_graph *g = NULL;
    if (!strcmp(wl, "mlp")) {
        g = rlx_workload_mlp(batch, dt);
    } else if (!strcmp(wl, "encoder")) {
        rlx_encoder_config c = rlx_encoder_minilm(batch, 128);
        g = rlx_workload_encoder(&c);
        o.precision = dt == RLX_F16 ? RLX_PRECISION_F16 : dt == RLX_BF16 ? RLX_PRECISION_BF16 : RLX_PRECISION_F32;
    } else if (!strcmp(wl, "resnet50")) {
        g = rlx_workload_resnet50(batch, dt);
    } else if (!strcmp(wl, "decoder") || !strcmp(wl, "decoder-small")) {
        /* prefills: 512 tokens of the Qwen3-0.6B shape, 128 of the small one */
        rlx_decoder_config c = !strcmp(wl, "decoder") ? rlx_decoder_qwen3_06b(512) : rlx_decoder_small(128);
        c.batch = batch;
        c.dtype = dt;
        g = rlx_workload_decoder(&c);
    }
    if (!g)
        return fail("building the workload");
    double t0 = now_ms();
    rlx_session *s = NULL;
    if (rlx_compile(g, &o, &s) != RLX_OK)
        return fail("compile");
    double compile_ms = now_ms() - t0;
    if (rlx_workload_init_params(s, 1) != RLX_OK)
        return fail("params");
    for (int i = 0; i < rlx_session_count(s, 0); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 0, i, &info);
        size_t n = info.bytes / rlx_dtype_size(info.dtype);
        void *buf = malloc(info.bytes);
        if (info.dtype == RLX_I64) {
            for (size_t k = 0; k < n; k++)
                ((int64_t *)buf)[k] = (int64_t)((k * 2654435761u) % 30000);
        } else {
            float *f = malloc(n * sizeof(float));
            rlx_fill_normal(f, (int64_t)n, 1.0, 42);
            for (size_t k = 0; k < n; k++) {
                if (info.dtype == RLX_F16)
                    ((uint16_t *)buf)[k] = rlx_f32_to_f16(f[k]);
                else if (info.dtype == RLX_BF16)
                    ((uint16_t *)buf)[k] = rlx_f32_to_bf16(f[k]);
                else
                    ((float *)buf)[k] = f[k];
            }
            free(f);
        }
        if (rlx_session_set_input(s, info.name, buf, info.bytes) != RLX_OK)
            return fail("input");
        free(buf);
    }
    for (int i = 0; i < 20; i++)
        if (rlx_session_run(s) != RLX_OK)
            return fail("run");
    double *t = malloc(sizeof(double) * (size_t)runs);
    for (int i = 0; i < runs; i++) {
        double a = now_ms();
        if (rlx_session_run(s) != RLX_OK)
            return fail("run");
        t[i] = now_ms() - a;
    }
    qsort(t, (size_t)runs, sizeof(double), cmp);
    /* a look at the output: finite and not all zero */
    rlx_tensor_info oi;
    rlx_session_info(s, 2, 0, &oi);
    void *out = malloc(oi.bytes);
    rlx_session_get_output(s, oi.name, out, oi.bytes);
    size_t n = oi.bytes / rlx_dtype_size(oi.dtype), nz = 0, bad = 0;
    for (size_t k = 0; k < n; k++) {
        float v = oi.dtype == RLX_F16    ? rlx_f16_to_f32(((uint16_t *)out)[k])
                  : oi.dtype == RLX_BF16 ? rlx_bf16_to_f32(((uint16_t *)out)[k])
                                         : ((float *)out)[k];
        nz += v != 0;
        bad += v != v;
    }
    rlx_compile_stats st;
    rlx_session_stats(s, &st);
    printf(
        "RESULT %s %d %s median_ms %.4f min_ms %.4f compile_ms %.1f nodes %d->%d arena_mb %.1f nonzero %.3f nan %zu\n",
        wl, batch, dts, t[runs / 2], t[0], compile_ms, st.nodes_in, st.nodes_final, st.arena_bytes / 1048576.0,
        n ? (double)nz / (double)n : 0.0, bad);
    free(out);
    free(t);
    rlx_session_free(s);
    rlx_graph_free(g);
    return 0;
}
