/* llm_bench.c - decoder-LLM speed through the public API: prefill of a
 * prompt and decode (one token per sequence per step, greedy on the host)
 * at several batch sizes.
 *
 *   llm_bench [MODEL] [--device cpu|cuda] [--precision f32|f16|bf16] [--threads N]
 *             [--prompt 512] [--decode 128] [--batches 1,8,32] [--repeat 3]
 *
 * MODEL as for `rlx generate` (default: the built-in `decoder`).  Prints one
 * line per batch size and a table last: prefill ms and tokens/s (batch 1),
 * decode tokens/s over all sequences, medians of --repeat runs after one
 * warm-up, and the weight bytes read per decode step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv)
{
    const char *model = "decoder";
    int prompt = 512, decode = 128, repeat = 3, batches[8] = {1, 8, 32}, nb = 3;
    rlx_llm_options o;
    rlx_llm_options_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(f, "--device"))
            o.device = !strcmp(v, "cuda") ? RLX_DEVICE_CUDA : RLX_DEVICE_CPU, i++;
        else if (!strcmp(f, "--precision"))
            o.precision = !strcmp(v, "bf16")  ? RLX_PRECISION_BF16
                          : !strcmp(v, "f16") ? RLX_PRECISION_F16
                                              : RLX_PRECISION_F32,
            i++;
        else if (!strcmp(f, "--threads"))
            o.threads = atoi(v), i++;
        else if (!strcmp(f, "--prompt"))
            prompt = atoi(v), i++;
        else if (!strcmp(f, "--decode"))
            decode = atoi(v), i++;
        else if (!strcmp(f, "--repeat"))
            repeat = atoi(v), i++;
        else if (!strcmp(f, "--batches")) {
            nb = 0;
            for (const char *p = v; *p && nb < 8; p = strchr(p, ',') ? strchr(p, ',') + 1 : p + strlen(p))
                batches[nb++] = atoi(p);
            i++;
        } else if (f[0] != '-')
            model = f;
        else {
            fprintf(stderr, "llm_bench: unknown option %s\n", f);
            return 2;
        }
    }
    if (prompt < 1 || decode < 1 || repeat < 1 || nb < 1) {
        fprintf(stderr, "llm_bench: prompt, decode, repeat and batches must be >= 1\n");
        return 2;
    }
    rlx_llm *m;
    if (rlx_llm_load(model, &m) != RLX_OK) {
        fprintf(stderr, "llm_bench: %s\n", rlx_last_error());
        return 1;
    }
    rlx_llm_info info;
    rlx_llm_get_info(m, &info);
    double wbytes = (double)info.vocab * info.hidden +
                    (double)info.layers * ((double)info.hidden * info.head_dim * (info.heads * 2 + info.kv_heads * 2) +
                                           3.0 * info.hidden * info.ffn + 2.0 * info.hidden + 2.0 * info.head_dim);
    wbytes *= o.precision == RLX_PRECISION_F32 ? 4 : 2;
    int32_t *ids = malloc((size_t)prompt * sizeof *ids);
    for (int i = 0; i < prompt; i++)
        ids[i] = (int32_t)((i * 7919u + 13u) % (unsigned)info.vocab);
    double pre_ms[64], dec[8];
    double prefill_ms = 0;
    for (int k = 0; k < nb; k++) {
        int B = batches[k];
        o.batch = B;
        o.ctx = prompt + decode;
        o.prefill_chunk = prompt;
        rlx_llm_context *c;
        double t0 = now_ms();
        if (rlx_llm_context_new(m, &o, &c) != RLX_OK) {
            fprintf(stderr, "llm_bench: batch %d: %s\n", B, rlx_last_error());
            return 1;
        }
        double compile_ms = now_ms() - t0;
        const int32_t **ps = malloc((size_t)B * sizeof *ps);
        int *ns = malloc((size_t)B * sizeof *ns);
        int32_t *toks = malloc((size_t)B * sizeof *toks);
        for (int b = 0; b < B; b++)
            ps[b] = ids, ns[b] = prompt;
        double runs[64], step_ms[64], pick_ms[64];
        int reps = repeat < 64 ? repeat : 64;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
            double t = now_ms();
            if (rlx_llm_prefill(c, B, ps, ns) != RLX_OK) {
                fprintf(stderr, "llm_bench: prefill: %s\n", rlx_last_error());
                return 1;
            }
            if (B == 1 && r >= 0)
                pre_ms[r] = now_ms() - t;
            t = now_ms();
            double in_pick = 0; /* picking the greedy tokens (rlx_llm_argmax) */
            for (int s = 0; s < decode; s++) {
                double tp = now_ms();
                if (rlx_llm_argmax(c, toks) != RLX_OK) {
                    fprintf(stderr, "llm_bench: argmax: %s\n", rlx_last_error());
                    return 1;
                }
                in_pick += now_ms() - tp;
                if (rlx_llm_decode(c, toks) != RLX_OK) {
                    fprintf(stderr, "llm_bench: decode: %s\n", rlx_last_error());
                    return 1;
                }
            }
            if (r >= 0) {
                runs[r] = now_ms() - t;
                pick_ms[r] = in_pick / decode;
                step_ms[r] = (runs[r] - in_pick) / decode;
            }
        }
        if (B == 1)
            prefill_ms = median(pre_ms, reps);
        dec[k] = B * decode / (median(runs, reps) / 1e3);
        fprintf(stderr,
                "batch %d: compile %.0f ms, decode %.1f tok/s (a step: %.3f ms in rlx_llm_decode, %.3f ms in "
                "rlx_llm_argmax)\n",
                B, compile_ms, dec[k], median(step_ms, reps), median(pick_ms, reps));
        free(ps), free(ns), free(toks);
        rlx_llm_context_free(c);
    }
    printf("model %s (%s), %s, %s; prompt %d, decode %d; weights %.1f MB per decode step at the compute precision (a "
           "quantized file reads fewer)\n",
           model, info.arch, o.device == RLX_DEVICE_CUDA ? "cuda" : "cpu",
           o.precision == RLX_PRECISION_BF16  ? "bf16"
           : o.precision == RLX_PRECISION_F16 ? "f16"
                                              : "f32",
           prompt, decode, wbytes / 1e6);
    printf("| batch | prefill ms | prefill tok/s | decode tok/s |\n|---|---|---|---|\n");
    for (int k = 0; k < nb; k++) {
        if (batches[k] == 1 && prefill_ms > 0)
            printf("| %d | %.2f | %.0f | %.1f |\n", batches[k], prefill_ms, prompt / (prefill_ms / 1e3), dec[k]);
        else
            printf("| %d | | | %.1f |\n", batches[k], dec[k]);
    }
    free(ids);
    rlx_llm_free(m);
    return 0;
}
