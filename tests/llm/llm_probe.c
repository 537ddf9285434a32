/* llm_probe.c - runs a decoder LLM through the public API for the parity
 * tests (tests/llm/check_models.py):
 *
 *   llm_probe MODEL --ids 1,2,3 [--greedy N] [--precision f32|f16|bf16] --out PREFIX
 *
 * writes PREFIX.npy, f32 [1 + N, vocab]: the logits after the prompt and
 * after each greedily chosen token (decoded one at a time through the KV
 * cache), and PREFIX.ids, the N chosen ids.  It also checks, and prints as
 * `kv-recompute` and `batch` lines, that
 *   - each decode step's logits equal those of a fresh prefill over the
 *     whole sequence so far (the KV cache against recomputing), and
 *   - three sequences of different lengths decoded together in one batch
 *     give each the logits it gets alone;
 * as the largest difference relative to the logits' rms. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx.h"

static int parse_ids(const char *s, int32_t *ids, int cap)
{
    int n = 0;
    while (*s && n < cap) {
        char *end;
        ids[n++] = (int32_t)strtol(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s)
            return -1;
    }
    return n;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

/* max |a - b| / rms(b) */
static double rel_diff(const float *a, const float *b, int n)
{
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        m = d > m ? d : m;
        ss += (double)b[i] * b[i];
    }
    return m / (sqrt(ss / n) + 1e-30);
}

static int fail(const char *what)
{
    fprintf(stderr, "llm_probe: %s: %s\n", what, rlx_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *out = NULL, *ids_arg = NULL, *ref = NULL, *expect = NULL;
    int greedy = 0;
    rlx_llm_options o;
    rlx_llm_options_init(&o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ids") && i + 1 < argc)
            ids_arg = argv[++i];
        else if (!strcmp(argv[i], "--greedy") && i + 1 < argc)
            greedy = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ref") && i + 1 < argc)
            ref = argv[++i];
        else if (!strcmp(argv[i], "--expect-ids") && i + 1 < argc)
            expect = argv[++i];
        else if (!strcmp(argv[i], "--out") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            const char *p = argv[++i];
            o.precision = !strcmp(p, "bf16")  ? RLX_PRECISION_BF16
                          : !strcmp(p, "f16") ? RLX_PRECISION_F16
                                              : RLX_PRECISION_F32;
        } else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            o.device = !strcmp(argv[++i], "cuda") ? RLX_DEVICE_CUDA : RLX_DEVICE_CPU;
        else
            model = argv[i];
    }
    int32_t prompt[512];
    int n = ids_arg ? parse_ids(ids_arg, prompt, 512) : -1;
    if (!model || !out || n < 3) {
        fprintf(stderr, "usage: llm_probe MODEL --ids 1,2,3 [--greedy N] [--precision P] --out PREFIX\n");
        return 2;
    }
    rlx_llm *m;
    if (rlx_llm_load(model, &m) != RLX_OK)
        return fail("load");
    rlx_llm_info info;
    rlx_llm_get_info(m, &info);
    int V = info.vocab, total = n + greedy;
    o.ctx = total + 8;
    rlx_llm_context *c, *whole;
    if (rlx_llm_context_new(m, &o, &c) != RLX_OK)
        return fail("context");
    float *rows = malloc((size_t)(greedy + 1) * (size_t)V * sizeof(float));
    int32_t *seq = malloc((size_t)total * sizeof(int32_t));
    memcpy(seq, prompt, (size_t)n * sizeof(int32_t));
    const int32_t *p = prompt;
    if (rlx_llm_prefill(c, 1, &p, &n) != RLX_OK)
        return fail("prefill");
    memcpy(rows, rlx_llm_logits(c, 0), (size_t)V * sizeof(float));
    for (int k = 0; k < greedy; k++) {
        int32_t t = argmax(rows + (size_t)k * V, V);
        seq[n + k] = t;
        if (rlx_llm_decode(c, &t) != RLX_OK)
            return fail("decode");
        memcpy(rows + (size_t)(k + 1) * V, rlx_llm_logits(c, 0), (size_t)V * sizeof(float));
    }
    /* the KV cache against a fresh prefill of the whole sequence */
    rlx_llm_options ow = o;
    ow.prefill_chunk = 0;
    if (rlx_llm_context_new(m, &ow, &whole) != RLX_OK)
        return fail("context (recompute)");
    double kv_worst = 0;
    for (int k = 1; k <= greedy; k += greedy > 16 ? 7 : 1) {
        int len = n + k;
        const int32_t *s = seq;
        if (rlx_llm_prefill(whole, 1, &s, &len) != RLX_OK)
            return fail("prefill (recompute)");
        double d = rel_diff(rows + (size_t)k * V, rlx_llm_logits(whole, 0), V);
        kv_worst = d > kv_worst ? d : kv_worst;
    }
    printf("kv-recompute: max diff %.3g of the logits' rms over %d steps\n", kv_worst, greedy);
    /* a batch of three sequences of different prompt lengths, decoded together */
    double batch_worst = 0;
    if (greedy >= 2) {
        rlx_llm_options ob = o;
        ob.batch = 3;
        rlx_llm_context *cb;
        if (rlx_llm_context_new(m, &ob, &cb) != RLX_OK)
            return fail("context (batch)");
        int lens[3] = {n, n - 1, n - 2};
        const int32_t *ps[3] = {prompt, prompt, prompt};
        if (rlx_llm_prefill(cb, 3, ps, lens) != RLX_OK)
            return fail("prefill (batch)");
        /* sequence 0 must follow the batch-1 run exactly; 1 and 2 are
         * compared against their own batch-1 runs */
        int32_t toks[3];
        for (int k = 0; k < greedy; k++) {
            for (int b = 0; b < 3; b++)
                toks[b] = b == 0 ? seq[n + k] : argmax(rlx_llm_logits(cb, b), V);
            if (k == 0) {
                for (int b = 1; b < 3; b++) { /* each prefilled alone */
                    const int32_t *s = prompt;
                    if (rlx_llm_prefill(whole, 1, &s, &lens[b]) != RLX_OK)
                        return fail("prefill (solo)");
                    batch_worst = fmax(batch_worst, rel_diff(rlx_llm_logits(cb, b), rlx_llm_logits(whole, 0), V));
                }
            }
            if (rlx_llm_decode(cb, toks) != RLX_OK)
                return fail("decode (batch)");
            batch_worst = fmax(batch_worst, rel_diff(rlx_llm_logits(cb, 0), rows + (size_t)(k + 1) * V, V));
        }
        printf("batch: max diff %.3g of the logits' rms (3 sequences of %d, %d, %d tokens, %d steps)\n", batch_worst, n,
               n - 1, n - 2, greedy);
        rlx_llm_context_free(cb);
    }
    /* --ref: float64 reference logits [prompt + greedy, vocab] over the same
     * ids (another device's run checked against it here) */
    if (ref) {
        rlx_dtype rt;
        int rnd;
        int64_t rd[8];
        void *rv = NULL;
        size_t rb;
        if (rlx_npy_read(ref, &rt, &rnd, rd, &rv, &rb) != RLX_OK || rt != RLX_F64 || rd[rnd - 1] != V)
            return fail("--ref");
        const double *r = rv;
        int64_t rows_in_ref = (int64_t)(rb / sizeof(double)) / V;
        /* rows after this run's tokens leave the expected ones compare other
         * sequences: only rows up to the first divergence count */
        int valid = greedy;
        if (expect) {
            int32_t want[4096];
            int nw = parse_ids(expect, want, 4096);
            for (valid = 0; valid < greedy && valid < nw && want[valid] == seq[n + valid]; valid++)
                ;
        }
        double worst = 0;
        for (int k = 0; k <= valid && n - 1 + k < rows_in_ref; k++) {
            const double *rr = r + (size_t)(n - 1 + k) * V;
            double m = 0, ss = 0;
            for (int j = 0; j < V; j++) {
                double d = fabs(rows[(size_t)k * V + j] - rr[j]);
                m = d > m ? d : m;
                ss += rr[j] * rr[j];
            }
            double e = m / sqrt(ss / V);
            worst = e > worst ? e : worst;
        }
        printf("reference: max diff %.3g of the logits' rms (%d of %d steps on the expected tokens)\n", worst, valid,
               greedy);
        free(rv);
    }
    if (expect) {
        int32_t want[4096];
        int nw = parse_ids(expect, want, 4096), same = nw == greedy;
        for (int k = 0; same && k < greedy; k++)
            same = want[k] == seq[n + k];
        printf("greedy: %s\n", same ? "same tokens" : "tokens differ");
    }
    char path[1024];
    snprintf(path, sizeof path, "%s.npy", out);
    int64_t dims[2] = {greedy + 1, V};
    rlx_file *f;
    if (rlx_file_open(path, RLX_FILE_FORCE, &f) != RLX_OK ||
        rlx_npy_write_file(f, RLX_F32, 2, dims, rows, (size_t)(greedy + 1) * (size_t)V * sizeof(float)) != RLX_OK ||
        rlx_file_commit(f) != RLX_OK)
        return fail("write logits");
    snprintf(path, sizeof path, "%s.ids", out);
    FILE *fi = fopen(path, "w");
    for (int k = 0; fi && k < greedy; k++)
        fprintf(fi, "%s%d", k ? "," : "", seq[n + k]);
    if (fi)
        fclose(fi);
    rlx_llm_context_free(whole);
    rlx_llm_context_free(c);
    rlx_llm_free(m);
    free(rows);
    free(seq);
    return 0;
}
