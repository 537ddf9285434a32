/* cmd_generate.c - `rlx generate`: text from a decoder LLM (a GGUF file, a
 * Hugging Face safetensors folder, or the embedded default), streamed as
 * it is produced, with prefill and decode speeds on the last line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "rlx.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: rlx generate [MODEL] [options]\n"
               "\n"
               "MODEL is a .gguf file or a folder with config.json, safetensors and tokenizer.json,\n"
               "or a built-in shape: decoder-small (the default) or decoder (Qwen3-0.6B), with\n"
               "seeded weights and a byte tokenizer (their text is noise, their speed is real).\n"
               "\n"
               "options:\n"
               "  --prompt TEXT              the prompt (default: \"Once upon a time\")\n"
               "  --prompt-tokens ID,ID,...  the prompt as token ids (no tokenizer involved)\n"
               "  -n, --max-tokens N         tokens to generate (default 64)\n"
               "  --device cpu|cuda|cuda:N   (default cpu; cuda is cuda:0)\n"
               "  --precision f32|f16|bf16   compute precision (default f32)\n"
               "  --threads N                CPU threads (default: all cores)\n"
               "  --ctx N                    context length (default: prompt + N, rounded up to 64)\n"
               "  --temp T                   temperature; 0 = greedy (default 0.8)\n"
               "  --top-k K                  (default 40; 0 = off)\n"
               "  --top-p P                  (default 0.95; 1 = off)\n"
               "  --min-p P                  (default 0.05; 0 = off)\n"
               "  --repeat-penalty R         (default 1 = off)\n"
               "  --seed S                   sampling seed (default 0)\n"
               "  --stop TEXT                stop at this string (may repeat, up to 8)\n"
               "  --ignore-eos               keep going past end-of-sequence tokens\n"
               "  --logits FILE              write the last prompt position's logits as .npy\n"
               "  --force                    let --logits replace an existing file\n"
               "  --verbose                  compile stages on stderr\n");
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    return cli_parse_long("generate", flag, v, lo, hi, out);
}

static int parse_float(const char *flag, const char *v, double lo, double hi, float *out)
{
    double x = 0;
    int bad = cli_parse_double("generate", flag, v, lo, hi, &x);
    if (!bad)
        *out = (float)x;
    return bad;
}

/* "1,2,3" -> ids; returns the count or -1. */
static int parse_ids(const char *s, int32_t **out)
{
    int cap = 16, n = 0;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    while (ids && *s) {
        char *end = NULL;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "rlx generate: --prompt-tokens wants ids like 1,2,3; '%s' is not\n", s);
            free(ids);
            return -1;
        }
        if (n == cap) {
            int32_t *p = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
            if (!p)
                break;
            ids = p;
        }
        ids[n++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    if (!ids || n == 0) {
        fprintf(stderr, "rlx generate: --prompt-tokens has no ids\n");
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

static int print_piece(void *user, int32_t id, const char *text, size_t len)
{
    (void)user, (void)id;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    return 0;
}

static int write_logits(const float *l, int vocab, const char *path, int force)
{
    rlx_file *f = NULL;
    int64_t dims[1] = {vocab};
    rlx_status st = rlx_file_open(path, force ? RLX_FILE_FORCE : 0, &f);
    if (st == RLX_OK && (st = rlx_npy_write_file(f, RLX_F32, 1, dims, l, (size_t)vocab * sizeof(float))) != RLX_OK)
        rlx_file_discard(f);
    else if (st == RLX_OK)
        st = rlx_file_commit(f);
    if (st != RLX_OK) {
        fprintf(stderr, "rlx generate: --logits: %s\n", rlx_last_error());
        return 1;
    }
    fprintf(stderr, "wrote %s (%d logits of the last prompt position)\n", path, vocab);
    return 0;
}

int rlx_cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *prompt = "Once upon a time", *prompt_ids = NULL, *logits_path = NULL;
    const char *stops[8];
    int force = 0;
    long n_predict = 64, ctx = 0;
    rlx_llm_options lo;
    rlx_llm_options_init(&lo);
    rlx_generate_params gp;
    rlx_generate_params_init(&gp);
    gp.stop = stops;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        int bad = 0;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--prompt") && v) {
            prompt = v, i++;
        } else if (!strcmp(f, "--prompt-tokens") && v) {
            prompt_ids = v, i++;
        } else if ((!strcmp(f, "-n") || !strcmp(f, "--max-tokens")) && v) {
            bad = parse_long(f, v, 0, 1 << 20, &n_predict), i++;
        } else if (!strcmp(f, "--device") && v) {
            i++;
            if (rlx_device_parse(v, &lo.device, &lo.device_index) != RLX_OK)
                bad = fprintf(stderr, "rlx generate: --device: %s\n", rlx_last_error()) > 0;
        } else if (!strcmp(f, "--precision") && v) {
            i++;
            if (!strcmp(v, "f32"))
                lo.precision = RLX_PRECISION_F32;
            else if (!strcmp(v, "f16"))
                lo.precision = RLX_PRECISION_F16;
            else if (!strcmp(v, "bf16"))
                lo.precision = RLX_PRECISION_BF16;
            else
                bad = fprintf(stderr, "rlx generate: --precision is f32, f16 or bf16, not '%s'\n", v) > 0;
        } else if (!strcmp(f, "--threads") && v) {
            bad = parse_long(f, v, 1, 1024, &x), lo.threads = (int)x, i++;
        } else if (!strcmp(f, "--ctx") && v) {
            bad = parse_long(f, v, 1, 1 << 22, &ctx), i++;
        } else if (!strcmp(f, "--temp") && v) {
            bad = parse_float(f, v, 0, 100, &gp.temperature), i++;
        } else if (!strcmp(f, "--top-k") && v) {
            bad = parse_long(f, v, 0, 1 << 24, &x), gp.top_k = (int)x, i++;
        } else if (!strcmp(f, "--top-p") && v) {
            bad = parse_float(f, v, 0, 1, &gp.top_p), i++;
        } else if (!strcmp(f, "--min-p") && v) {
            bad = parse_float(f, v, 0, 1, &gp.min_p), i++;
        } else if (!strcmp(f, "--repeat-penalty") && v) {
            bad = parse_float(f, v, 1e-3, 100, &gp.repeat_penalty), i++;
        } else if (!strcmp(f, "--seed") && v) {
            char *end = NULL;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (!*v || *end || errno)
                bad = fprintf(stderr, "rlx generate: --seed needs a non-negative integer, got '%s'\n", v) > 0;
            gp.seed = s, i++;
        } else if (!strcmp(f, "--stop") && v) {
            if (gp.n_stop == 8)
                bad = fprintf(stderr, "rlx generate: at most 8 --stop strings\n") > 0;
            else
                stops[gp.n_stop++] = v;
            i++;
        } else if (!strcmp(f, "--ignore-eos")) {
            gp.ignore_eos = 1;
        } else if (!strcmp(f, "--logits") && v) {
            logits_path = v, i++;
        } else if (!strcmp(f, "--force")) {
            force = 1;
        } else if (!strcmp(f, "--verbose")) {
            lo.verbose = 1;
        } else if (f[0] != '-' && !model) {
            model = f;
        } else {
            fprintf(stderr, "rlx generate: unknown option or missing value: %s\n", f);
            usage(stderr);
            return 2;
        }
        if (bad)
            return 2;
    }
    /* refuse an unwritable or existing --logits file before any work */
    if (logits_path && rlx_file_check_target(logits_path, force ? RLX_FILE_FORCE : 0) != RLX_OK) {
        fprintf(stderr, "rlx generate: --logits: %s\n", rlx_last_error());
        return 1;
    }
    rlx_llm *m = NULL;
    if (rlx_llm_load(model, &m) != RLX_OK) {
        fprintf(stderr, "rlx generate: %s\n", rlx_last_error());
        return 1;
    }
    rlx_llm_info info;
    rlx_llm_get_info(m, &info);
    int32_t *ids = NULL;
    int n = 0;
    if (prompt_ids) {
        n = parse_ids(prompt_ids, &ids);
    } else {
        n = rlx_llm_tokenize(m, prompt, strlen(prompt), 1, NULL, 0);
        if (n > 0 && (ids = malloc((size_t)n * sizeof *ids)))
            n = rlx_llm_tokenize(m, prompt, strlen(prompt), 1, ids, n);
        if (n < 0)
            fprintf(stderr, "rlx generate: cannot tokenize the prompt: %s\n", rlx_last_error());
        else if (n == 0)
            fprintf(stderr, "rlx generate: the prompt gives no tokens\n");
        if (n <= 0)
            n = -1;
    }
    int rc = 1;
    rlx_llm_context *c = NULL;
    if (n > 0 && logits_path && !(gp.prompt_logits = malloc((size_t)info.vocab * sizeof(float)))) {
        fprintf(stderr, "rlx generate: no memory for the logits\n");
        n = -1;
    }
    if (n > 0) {
        if (!ctx)
            ctx = ((n + n_predict) + 63) / 64 * 64;
        lo.ctx = (int)ctx;
        lo.prefill_chunk = n < lo.ctx ? n : lo.ctx; /* the whole prompt in one run */
        gp.max_tokens = (int)n_predict;
        fprintf(stderr, "model: %s, %d layers, hidden %d, vocab %d; prompt %d tokens, context %ld\n", info.arch,
                info.layers, info.hidden, info.vocab, n, ctx);
        if (rlx_llm_context_new(m, &lo, &c) != RLX_OK) {
            fprintf(stderr, "rlx generate: %s\n", rlx_last_error());
        } else {
            rlx_generate_stats st;
            if (!prompt_ids)
                fputs(prompt, stdout);
            if (rlx_llm_generate(c, ids, n, &gp, print_piece, NULL, &st) != RLX_OK) {
                fprintf(stderr, "\nrlx generate: %s\n", rlx_last_error());
            } else {
                printf("\n");
                rc = logits_path ? write_logits(gp.prompt_logits, info.vocab, logits_path, force) : 0;
                double pf = st.prefill_ms > 0 ? st.prompt_tokens / (st.prefill_ms / 1e3) : 0;
                /* the first generated token comes from the prefill's logits: decode made the rest */
                int decoded = st.generated_tokens > 1 ? st.generated_tokens - 1 : 0;
                double dc = st.decode_ms > 0 && decoded ? decoded / (st.decode_ms / 1e3) : 0;
                printf("prefill: %.1f tok/s, decode: %.1f tok/s\n", pf, dc);
            }
        }
    }
    rlx_llm_context_free(c);
    rlx_llm_free(m);
    free(ids);
    free(gp.prompt_logits);
    return rc;
}
