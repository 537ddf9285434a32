/* llamacpp_run.c - runs a GGUF decoder with llama.cpp itself (the prebuilt
 * libllama of node-llama-cpp, tests/llm/fetch_llamacpp.sh), for the parity
 * test tests/llm/check_llamacpp.py:
 *
 *   llamacpp_run MODEL --ids 1,2,3 [--greedy N] [--all] [--threads T]
 *                [--backends DIR] --out PREFIX
 *
 * The prompt ids go to llama_decode as they are (no tokenizer).  Writes
 * PREFIX.npy, f32 [1 + N, vocab]: the logits at the last prompt position,
 * then after each greedily chosen token (argmax, decoded one at a time
 * through llama.cpp's KV cache), and PREFIX.ids, the N chosen ids; with
 * --all also PREFIX.all.npy, f32 [prompt length, vocab], every prompt
 * position's logits.  The layout matches tests/llm/llm_probe.c's.
 *
 * The KV cache is f32 and flash attention is off, so that llama.cpp
 * computes the whole forward in f32 (its defaults are an f16 cache and
 * flash attention where the backend has it).
 *
 * Built by check_llamacpp.py as
 *   cc -O2 -I CACHE/include llamacpp_run.c -L CACHE/lib -l:libllama.v*.so
 *      -l:libggml.v*.so -lggml-base -Wl,-rpath,CACHE/lib
 * The CPU backend (one of the libggml-cpu-*.so, the best the machine runs)
 * is loaded from --backends DIR (default: the folder given by the
 * LLAMACPP_LIB environment variable). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h"

static int verbose;
static char backend[256] = "?"; /* the file of the CPU backend ggml picked */

static void on_log(enum ggml_log_level level, const char *text, void *ud)
{
    (void)ud;
    const char *p = strstr(text, "loaded CPU backend from ");
    if (p) {
        p += strlen("loaded CPU backend from ");
        const char *slash = strrchr(p, '/');
        snprintf(backend, sizeof backend, "%s", slash ? slash + 1 : p);
        backend[strcspn(backend, "\n")] = 0;
    }
    if (verbose || level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int parse_ids(const char *s, llama_token *ids, int cap)
{
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || n >= cap)
            return -1;
        ids[n++] = (llama_token)v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return n;
}

/* a little-endian f32 .npy of shape [rows, cols] */
static int write_npy(const char *path, const float *x, int rows, int cols)
{
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    unsigned hl = (unsigned)(n + pad + 1);
    pre[8] = (unsigned char)(hl & 0xff);
    pre[9] = (unsigned char)(hl >> 8);
    fwrite(pre, 1, 10, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    size_t want = (size_t)rows * (size_t)cols;
    int bad = fwrite(x, sizeof(float), want, f) != want;
    return (fclose(f) != 0 || bad) ? -1 : 0;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static int usage(void)
{
    fprintf(stderr, "usage: llamacpp_run MODEL --ids 1,2,3 [--greedy N] [--all] [--threads T] "
                    "[--backends DIR] [--verbose] --out PREFIX\n"
                    "       llamacpp_run MODEL --ids ... --greedy N --time R [--threads T]   (timing: R repeats\n"
                    "                    of the prompt and N decode steps, llama.cpp's default cache and attention)\n"
                    "       llamacpp_run MODEL --quantize FTYPE OUT   (llama.cpp's quantizer: FTYPE is a\n"
                    "                                                llama_ftype number, e.g. 7 Q8_0, 15 Q4_K_M)\n");
    return 2;
}

/* MODEL written to OUT in llama.cpp's file type `ftype` (its own choice of
 * type per tensor for the mixed presets). */
static int quantize(const char *model_path, int ftype, const char *out)
{
    llama_log_set(on_log, NULL);
    llama_backend_init();
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 1;
    qp.ftype = (enum llama_ftype)ftype;
    uint32_t rc = llama_model_quantize(model_path, out, &qp);
    llama_backend_free();
    if (rc) {
        fprintf(stderr, "llamacpp_run: llama_model_quantize of %s to type %d returned %u\n", model_path, ftype, rc);
        return 1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* One warm-up, then `reps` times: the prompt (batch, as filled) and
 * `steps` greedy decode steps from a cleared cache; prints each. */
static int time_runs(struct llama_context *ctx, struct llama_batch *batch, int n_prompt, int steps, int n_vocab,
                     int reps)
{
    struct llama_batch one = llama_batch_init(1, 0, 1);
    for (int r = 0; r <= reps; r++) {
        llama_memory_clear(llama_get_memory(ctx), true);
        batch->n_tokens = n_prompt;
        double t0 = now_ms();
        if (llama_decode(ctx, *batch) != 0)
            return fprintf(stderr, "llamacpp_run: llama_decode of the prompt failed\n"), 1;
        double t1 = now_ms();
        llama_token t = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        for (int s = 0; s < steps; s++) {
            one.token[0] = t;
            one.pos[0] = n_prompt + s;
            one.n_seq_id[0] = 1;
            one.seq_id[0][0] = 0;
            one.logits[0] = 1;
            one.n_tokens = 1;
            if (llama_decode(ctx, one) != 0)
                return fprintf(stderr, "llamacpp_run: llama_decode of step %d failed\n", s), 1;
            t = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
        }
        double t2 = now_ms();
        if (r > 0)
            printf("prefill %.3f ms (%.1f tok/s), decode %.3f ms (%.1f tok/s)\n", t1 - t0, n_prompt / (t1 - t0) * 1e3,
                   t2 - t1, steps / (t2 - t1) * 1e3);
    }
    llama_batch_free(one);
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *ids_s = NULL, *out = NULL, *backends = getenv("LLAMACPP_LIB");
    int greedy = 0, all = 0, threads = 1, ftype = -1, time_reps = 0;
    const char *quant_out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--quantize") && i + 2 < argc) {
            ftype = atoi(argv[++i]);
            quant_out = argv[++i];
        } else if (!strcmp(a, "--time") && i + 1 < argc)
            time_reps = atoi(argv[++i]);
        else if (!strcmp(a, "--ids") && i + 1 < argc)
            ids_s = argv[++i];
        else if (!strcmp(a, "--greedy") && i + 1 < argc)
            greedy = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(a, "--backends") && i + 1 < argc)
            backends = argv[++i];
        else if (!strcmp(a, "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(a, "--all"))
            all = 1;
        else if (!strcmp(a, "--verbose"))
            verbose = 1;
        else if (a[0] != '-' && !model_path)
            model_path = a;
        else
            return usage();
    }
    if (model_path && quant_out && ftype >= 0)
        return quantize(model_path, ftype, quant_out);
    if (!model_path || !ids_s || (!out && !time_reps) || greedy < 0 || threads < 1)
        return usage();
    static llama_token ids[1 << 16];
    int n_prompt = parse_ids(ids_s, ids, (int)(sizeof ids / sizeof ids[0]));
    if (n_prompt <= 0) {
        fprintf(stderr, "llamacpp_run: bad --ids %s\n", ids_s);
        return 2;
    }

    llama_log_set(on_log, NULL);
    if (backends && *backends)
        ggml_backend_load_all_from_path(backends);
    else
        ggml_backend_load_all();
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.use_extra_bufts = false; /* no repacking of weights into other layouts */
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "llamacpp_run: llama.cpp could not load %s\n", model_path);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    for (int i = 0; i < n_prompt; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            fprintf(stderr, "llamacpp_run: id %d is outside the vocabulary (%d)\n", ids[i], n_vocab);
            return 2;
        }

    struct llama_context_params cp = llama_context_default_params();
    int n_total = n_prompt + greedy;
    cp.n_ctx = (uint32_t)((n_total + 255) / 256 * 256);
    cp.n_batch = cp.n_ubatch = (uint32_t)n_prompt;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    if (!time_reps) { /* parity: exact f32 attention; timing keeps llama.cpp's defaults */
        cp.type_k = cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llamacpp_run: llama.cpp could not make a context for %s\n", model_path);
        return 1;
    }

    float *rows = malloc((size_t)(1 + greedy) * (size_t)n_vocab * sizeof(float));
    float *prompt_rows = all ? malloc((size_t)n_prompt * (size_t)n_vocab * sizeof(float)) : NULL;
    llama_token *gen = malloc((size_t)(greedy + 1) * sizeof(llama_token));
    struct llama_batch batch = llama_batch_init(n_prompt, 0, 1);
    if (!rows || (all && !prompt_rows) || !gen) {
        fprintf(stderr, "llamacpp_run: out of memory\n");
        return 1;
    }
    for (int i = 0; i < n_prompt; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = (int8_t)(all || i == n_prompt - 1);
    }
    batch.n_tokens = n_prompt;
    if (time_reps)
        return time_runs(ctx, &batch, n_prompt, greedy, n_vocab, time_reps);
    int rc = llama_decode(ctx, batch);
    if (rc != 0) {
        fprintf(stderr, "llamacpp_run: llama_decode of the prompt returned %d\n", rc);
        return 1;
    }
    if (all)
        for (int i = 0; i < n_prompt; i++)
            memcpy(prompt_rows + (size_t)i * n_vocab, llama_get_logits_ith(ctx, i), (size_t)n_vocab * sizeof(float));
    memcpy(rows, llama_get_logits_ith(ctx, -1), (size_t)n_vocab * sizeof(float));
    for (int s = 0; s < greedy; s++) {
        llama_token t = argmax(rows + (size_t)s * n_vocab, n_vocab);
        gen[s] = t;
        batch.token[0] = t;
        batch.pos[0] = n_prompt + s;
        batch.n_seq_id[0] = 1;
        batch.seq_id[0][0] = 0;
        batch.logits[0] = 1;
        batch.n_tokens = 1;
        rc = llama_decode(ctx, batch);
        if (rc != 0) {
            fprintf(stderr, "llamacpp_run: llama_decode of step %d returned %d\n", s, rc);
            return 1;
        }
        memcpy(rows + (size_t)(s + 1) * n_vocab, llama_get_logits_ith(ctx, -1), (size_t)n_vocab * sizeof(float));
    }

    size_t plen = strlen(out) + 16;
    char *path = malloc(plen);
    snprintf(path, plen, "%s.npy", out);
    if (write_npy(path, rows, 1 + greedy, n_vocab) != 0) {
        fprintf(stderr, "llamacpp_run: cannot write %s\n", path);
        return 1;
    }
    if (all) {
        snprintf(path, plen, "%s.all.npy", out);
        if (write_npy(path, prompt_rows, n_prompt, n_vocab) != 0) {
            fprintf(stderr, "llamacpp_run: cannot write %s\n", path);
            return 1;
        }
    }
    snprintf(path, plen, "%s.ids", out);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "llamacpp_run: cannot write %s\n", path);
        return 1;
    }
    for (int s = 0; s < greedy; s++)
        fprintf(f, s ? ",%d" : "%d", gen[s]);
    fputc('\n', f);
    fclose(f);
    printf("llama.cpp CPU backend %s, %d thread(s); %d prompt ids, vocab %d, %d greedy tokens\n", backend, threads,
           n_prompt, n_vocab, greedy);

    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(rows);
    free(prompt_rows);
    free(gen);
    free(path);
    return 0;
}
