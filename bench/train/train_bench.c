/* train_bench.c - training steps per second of the WORKLOADS.md models
 * through rlx_trainer (AdamW, torch.optim.AdamW's defaults: lr 1e-3,
 * betas 0.9/0.999, eps 1e-8, weight decay 0.01 on every param, no
 * clipping), one fixed random batch, seeded weights (std 0.02, biases 0,
 * norm gains 1).
 *
 *   mlp            batch 256: the 3-layer mlp, MSE against a random target
 *   encoder        batch 32, seq 128: the MiniLM-shaped encoder plus a
 *                  token-classification head (Linear 384 -> 9 labels,
 *                  params "head.w", "head.b") and cross-entropy over every
 *                  token (random labels)
 *   decoder-small  batch 8, seq 128: next-token cross-entropy over the
 *                  32000-token vocabulary (labels: the next id, -100 at each
 *                  sequence's last position)
 *   decoder        the same at the `decoder` shape (Qwen3-0.6B, vocab
 *                  151936), batch 8, seq 512: a GPU row
 *
 *   train_bench [--workload mlp,encoder,decoder-small,decoder] [--device cpu|cuda]
 *               [--precision f32|bf16|f16] [--warmup 3] [--steps 10]
 *               [--repeat 3] [--threads 2] [--batch B] [--seq S]
 *               [--peak-gflops G] [--recompute 0|1]
 *
 * Every step reads its loss back (so a step has finished when it is
 * timed; PyTorch's peer calls loss.item() each step likewise).  Prints per
 * workload the median steps/s over the repeats (each repeat: --steps timed
 * steps after the warm-up), tokens/s (batch x seq x steps/s; not for mlp),
 * the trainer session's arena (params, AdamW state, gradients and
 * activations), the process's peak RSS, the FLOPs of a step (matmuls and
 * attention products, 2 per multiply-add; 3x the forward's: the backward
 * computes two products per forward product) and, given --peak-gflops, the
 * floor (FLOPs / peak) against the measured step time.  The last line per
 * workload starts "RESULT " and is JSON, for bench/train/run.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ir/ir.h"
#include "models/workloads.h"
#include "rlx.h"

enum { ENC_LABELS = 9 };

typedef struct bench_opts {
    rlx_device device;
    rlx_precision precision;
    const char *prec_name;
    int warmup, steps, repeat, threads, batch, seq;
    double peak_gflops;
    int recompute; /* rlx_train_options.recompute: cheap activations computed again in the backward */
} bench_opts;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Makes `loss` the graph's only output, named "loss" (the forward's own
 * output would otherwise be kept alive to the end of the step). */
static void only_output(rlx_graph *g, rlx_node loss)
{
    for (int i = 0; i < g->n_outputs; i++)
        free(g->outputs[i].name);
    g->n_outputs = 0;
    rlx_output(g, "loss", loss);
}

typedef struct workload {
    rlx_graph *g;
    int64_t tokens; /* per step; 0: not a token model */
    double flops;   /* per training step */
    int vocab;      /* token ids drawn from [0, vocab) */
    int next_token; /* labels: the next id (else random in [0, ENC_LABELS)) */
} workload;

static int build(const char *name, int batch, int seq, workload *w)
{
    memset(w, 0, sizeof *w);
    if (!strcmp(name, "mlp")) {
        int B = batch ? batch : 256;
        w->g = rlx_workload_mlp(B, RLX_F32);
        if (!w->g)
            return -1;
        rlx_node y = w->g->outputs[0].node;
        rlx_node t = rlx_input(w->g, "target", RLX_F32, 2, (int64_t[]){B, 1024});
        only_output(w->g, rlx_mse_loss(w->g, y, t));
        w->flops = 3.0 * 2.0 * B * (1024.0 * 4096 + 4096.0 * 4096 + 4096.0 * 1024);
        return rlx_graph_verify(w->g) == RLX_OK ? 0 : -1;
    }
    if (!strcmp(name, "encoder")) {
        rlx_encoder_config c = rlx_encoder_minilm(batch ? batch : 32, seq ? seq : 128);
        w->g = rlx_workload_encoder(&c);
        if (!w->g)
            return -1;
        rlx_graph *g = w->g;
        rlx_node h = g->outputs[0].node;
        rlx_node hw = rlx_param(g, "head.w", RLX_F32, 2, (int64_t[]){c.hidden, ENC_LABELS});
        rlx_node hb = rlx_param(g, "head.b", RLX_F32, 1, (int64_t[]){ENC_LABELS});
        rlx_node logits = rlx_add(g, rlx_matmul(g, h, hw, 0, 0), hb);
        rlx_node labels = rlx_input(g, "labels", RLX_I64, 2, (int64_t[]){c.batch, c.seq});
        only_output(g, rlx_cross_entropy(g, logits, labels, -100, 0));
        double T = (double)c.batch * c.seq, H = c.hidden;
        double per_layer = 4 * 2 * T * H * H + 2 * 2 * T * H * c.ffn + 2 * 2 * (double)c.batch * c.seq * c.seq * H;
        w->flops = 3.0 * (c.layers * per_layer + 2 * T * H * ENC_LABELS);
        w->tokens = (int64_t)T;
        w->vocab = c.vocab;
        return rlx_graph_verify(g) == RLX_OK ? 0 : -1;
    }
    if (!strcmp(name, "decoder-small") || !strcmp(name, "decoder")) {
        int full = !strcmp(name, "decoder");
        rlx_decoder_config c = full ? rlx_decoder_qwen3_06b(seq ? seq : 512) : rlx_decoder_small(seq ? seq : 128);
        c.batch = batch ? batch : 8;
        c.dtype = RLX_F32; /* f32 master weights; --precision picks the compute type */
        w->g = rlx_workload_decoder(&c);
        if (!w->g)
            return -1;
        rlx_graph *g = w->g;
        rlx_node logits = g->outputs[0].node;
        rlx_node labels = rlx_input(g, "labels", RLX_I64, 2, (int64_t[]){c.batch, c.seq});
        only_output(g, rlx_cross_entropy(g, logits, labels, -100, 0));
        double T = (double)c.batch * c.seq, H = c.hidden, Q = (double)c.heads * c.head_dim,
               KV = (double)c.kv_heads * c.head_dim;
        /* attention products counted over every (query, key) pair, the
         * masked half of the causal square included */
        double per_layer = 2 * T * H * (Q + 2 * KV) + 2 * T * Q * H + 3 * 2 * T * H * c.ffn +
                           2 * 2 * (double)c.batch * c.heads * c.seq * c.seq * c.head_dim;
        w->flops = 3.0 * (c.layers * per_layer + 2 * T * H * c.vocab);
        w->tokens = (int64_t)T;
        w->vocab = c.vocab;
        w->next_token = 1;
        return rlx_graph_verify(g) == RLX_OK ? 0 : -1;
    }
    fprintf(stderr, "unknown workload '%s' (mlp, encoder, decoder-small, decoder)\n", name);
    return -1;
}

/* inputs: token ids uniform over the vocabulary, labels likewise (encoder)
 * or the next id (decoder), the mlp's x and target normal(0, 1) */
static rlx_status set_batch(rlx_trainer *tr, const workload *w)
{
    const rlx_graph *g = w->g;
    rlx_status s = RLX_OK;
    int64_t *ids = NULL, S = 1;
    for (int i = 0; s == RLX_OK && i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op != RLX_OP_INPUT)
            continue;
        size_t cnt = (size_t)rlx_shape_numel(&n->shape);
        if (!strcmp(n->name, "input_ids")) {
            S = n->shape.dims[1];
            ids = malloc(cnt * sizeof *ids);
            for (size_t k = 0; k < cnt; k++)
                ids[k] = (int64_t)(mix(11 + k) % (uint64_t)w->vocab);
            s = rlx_trainer_set_input(tr, n->name, ids, cnt * sizeof *ids);
        } else if (n->dtype == RLX_F32) {
            float *v = malloc(cnt * sizeof *v + 1);
            rlx_fill_normal(v, (int64_t)cnt, 1.0, 1000 + (uint64_t)i);
            s = rlx_trainer_set_input(tr, n->name, v, cnt * sizeof *v);
            free(v);
        }
    }
    for (int i = 0; s == RLX_OK && i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op != RLX_OP_INPUT || strcmp(n->name, "labels"))
            continue;
        size_t cnt = (size_t)rlx_shape_numel(&n->shape);
        int64_t *lab = malloc(cnt * sizeof *lab);
        for (size_t k = 0; k < cnt; k++) {
            if (w->next_token)
                lab[k] = ids && (int64_t)(k % (size_t)S) + 1 < S ? ids[k + 1] : -100;
            else
                lab[k] = (int64_t)(mix(77 + k) % ENC_LABELS);
        }
        s = rlx_trainer_set_input(tr, n->name, lab, cnt * sizeof *lab);
        free(lab);
    }
    free(ids);
    return s;
}

static rlx_status set_params(rlx_trainer *tr, const rlx_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op != RLX_OP_PARAM || n->dtype != RLX_F32)
            continue;
        size_t cnt = (size_t)rlx_shape_numel(&n->shape);
        float *f = malloc(cnt * sizeof *f + 1);
        rlx_workload_param_f32(n->name, i, cnt, 7, f);
        rlx_status s = rlx_trainer_set_param(tr, n->name, f, cnt * sizeof *f);
        free(f);
        if (s != RLX_OK)
            return s;
    }
    return RLX_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double max_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int run_one(const char *name, const bench_opts *b)
{
    workload w;
    if (build(name, b->batch, b->seq, &w) != 0) {
        fprintf(stderr, "%s: building the graph failed: %s\n", name, rlx_last_error());
        printf("RESULT {\"impl\": \"rlx\", \"workload\": \"%s\", \"error\": \"build\"}\n", name);
        rlx_graph_free(w.g);
        return 1;
    }
    rlx_train_options t;
    rlx_train_options_init(&t); /* AdamW, lr 1e-3, 0.9/0.999, eps 1e-8, weight decay 0.01 */
    t.recompute = b->recompute;
    rlx_options o;
    rlx_options_init(&o);
    o.device = b->device;
    o.precision = b->precision;
    o.threads = b->device == RLX_DEVICE_CPU ? b->threads : 0;
    double t0 = now_s();
    rlx_trainer *tr = NULL;
    rlx_status s = rlx_trainer_new(w.g, "loss", &t, &o, &tr);
    double compile_s = now_s() - t0;
    if (s == RLX_OK)
        s = set_params(tr, w.g);
    if (s == RLX_OK)
        s = set_batch(tr, &w);
    if (s != RLX_OK) {
        const char *e = rlx_last_error();
        fprintf(stderr, "%s: %s\n", name, e);
        printf("RESULT {\"impl\": \"rlx\", \"workload\": \"%s\", \"error\": \"", name);
        for (const char *c = e; *c && c - e < 200; c++)
            putchar(*c == '"' || *c == '\\' || *c == '\n' ? ' ' : *c);
        printf("\"}\n");
        rlx_trainer_free(tr);
        rlx_graph_free(w.g);
        return 1;
    }
    double first = NAN, loss = NAN;
    for (int i = 0; s == RLX_OK && i < b->warmup; i++)
        s = rlx_trainer_step(tr, i ? &loss : &first);
    double *rates = calloc((size_t)b->repeat + 1, sizeof *rates);
    for (int r = 0; s == RLX_OK && r < b->repeat; r++) {
        double a = now_s();
        for (int i = 0; s == RLX_OK && i < b->steps; i++)
            s = rlx_trainer_step(tr, &loss);
        rates[r] = b->steps / (now_s() - a);
        printf("  %s repeat %d: %.3f steps/s (loss %.4f)\n", name, r + 1, rates[r], loss);
    }
    if (s != RLX_OK) {
        fprintf(stderr, "%s: step: %s\n", name, rlx_last_error());
        printf("RESULT {\"impl\": \"rlx\", \"workload\": \"%s\", \"error\": \"step\"}\n", name);
        free(rates);
        rlx_trainer_free(tr);
        rlx_graph_free(w.g);
        return 1;
    }
    qsort(rates, (size_t)b->repeat, sizeof *rates, cmp_double);
    double med = b->repeat % 2 ? rates[b->repeat / 2] : 0.5 * (rates[b->repeat / 2 - 1] + rates[b->repeat / 2]);
    rlx_compile_stats st;
    memset(&st, 0, sizeof st);
    rlx_trainer_stats(tr, &st);
    double arena = (double)st.arena_bytes / 1048576.0, rss = max_rss_mib();
    double gflops = w.flops * med / 1e9;
    printf("%s  device %s  precision %s  compile %.1f s\n", name, b->device == RLX_DEVICE_CUDA ? "cuda" : "cpu",
           b->prec_name, compile_s);
    printf("  steps/s %.3f (median of %d x %d steps)", med, b->repeat, b->steps);
    if (w.tokens)
        printf("  tokens/s %.0f", med * (double)w.tokens);
    printf("\n  loss %.4f after warm-up step 1, %.4f after %d steps\n", first, loss, b->warmup + b->repeat * b->steps);
    printf("  arena %.1f MiB (params %.1f, planned transient %.1f)  peak RSS %.1f MiB\n", arena,
           (double)st.persistent_bytes / 1048576.0, (double)st.transient_bytes / 1048576.0, rss);
    if (b->recompute) {
        int count = 0;
        size_t bytes = 0;
        rlx_trainer_recomputed(tr, &count, &bytes);
        printf("  recompute: %d forward values computed again in the backward (%.1f MiB not kept)\n", count,
               (double)bytes / 1048576.0);
    }
    printf("  %.2f GFLOP per step, %.1f GFLOP/s", w.flops / 1e9, gflops);
    if (b->peak_gflops > 0)
        printf("; floor %.2f ms against %.2f ms measured: %.1f%% of the %.0f GFLOP/s peak",
               1e3 * w.flops / (b->peak_gflops * 1e9), 1e3 / med, 100.0 * gflops / b->peak_gflops, b->peak_gflops);
    printf("\n");
    printf("RESULT {\"impl\": \"rlx\", \"workload\": \"%s\", \"device\": \"%s\", \"precision\": \"%s\", "
           "\"steps_per_s\": %.6g, \"tokens_per_s\": %.6g, \"arena_mib\": %.2f, \"rss_mib\": %.2f, "
           "\"gflop_per_step\": %.6g, \"first_loss\": %.6g, \"last_loss\": %.6g, \"compile_s\": %.3f}\n",
           name, b->device == RLX_DEVICE_CUDA ? "cuda" : "cpu", b->prec_name, med, med * (double)w.tokens, arena, rss,
           w.flops / 1e9, first, loss, compile_s);
    fflush(stdout);
    free(rates);
    rlx_trainer_free(tr);
    rlx_graph_free(w.g);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: train_bench [--workload mlp,encoder,decoder-small,decoder] [--device cpu|cuda] "
                    "[--precision f32|bf16|f16] [--warmup N] [--steps N] [--repeat N] [--threads N] "
                    "[--batch B] [--seq S] [--peak-gflops G] [--recompute 0|1]\n");
}

int main(int argc, char **argv)
{
    bench_opts b = {RLX_DEVICE_CPU, RLX_PRECISION_F32, "f32", 3, 10, 3, 2, 0, 0, 0, 0};
    const char *list = "mlp,encoder,decoder-small";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        }
        if (!v) {
            usage();
            return 2;
        }
        i++;
        if (!strcmp(a, "--workload"))
            list = v;
        else if (!strcmp(a, "--device")) {
            int idx = 0;
            if (rlx_device_parse(v, &b.device, &idx) != RLX_OK) {
                fprintf(stderr, "%s\n", rlx_last_error());
                return 2;
            }
        } else if (!strcmp(a, "--precision")) {
            b.prec_name = v;
            if (!strcmp(v, "f32"))
                b.precision = RLX_PRECISION_F32;
            else if (!strcmp(v, "bf16"))
                b.precision = RLX_PRECISION_BF16;
            else if (!strcmp(v, "f16"))
                b.precision = RLX_PRECISION_F16;
            else {
                usage();
                return 2;
            }
        } else if (!strcmp(a, "--warmup"))
            b.warmup = atoi(v);
        else if (!strcmp(a, "--steps"))
            b.steps = atoi(v);
        else if (!strcmp(a, "--repeat"))
            b.repeat = atoi(v);
        else if (!strcmp(a, "--threads"))
            b.threads = atoi(v);
        else if (!strcmp(a, "--batch"))
            b.batch = atoi(v);
        else if (!strcmp(a, "--seq"))
            b.seq = atoi(v);
        else if (!strcmp(a, "--peak-gflops"))
            b.peak_gflops = atof(v);
        else if (!strcmp(a, "--recompute"))
            b.recompute = atoi(v) != 0;
        else {
            usage();
            return 2;
        }
    }
    if (b.warmup < 1 || b.steps < 1 || b.repeat < 1 || b.batch < 0 || b.seq < 0) {
        fprintf(stderr, "warm-up, steps and repeat must be >= 1\n");
        return 2;
    }
    printf("rlx %s  cpu gemm: %s\n", rlx_version(), rlx_cpu_gemm_info());
    int bad = 0;
    char *names = strdup(list);
    for (char *save = NULL, *w = strtok_r(names, ",", &save); w; w = strtok_r(NULL, ",", &save))
        bad |= run_one(w, &b);
    free(names);
    return bad;
}
