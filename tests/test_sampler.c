/* Token sampler (src/llm/sampler.c) and stop checks: greedy is the argmax
 * (lowest id on ties), top_k = 1 is greedy, draws repeat for a seed, the
 * empirical distribution of 200000 draws matches a float64 softmax of the
 * filtered logits computed here independently (full sort, no heap), the
 * repetition penalty's exact values, NaN/inf logits, stop strings split
 * across tokens.  Statistical bounds are several standard errors wide and
 * the seeds are fixed, so the outcomes do not vary between runs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "llm/sampler.h"

/* ------------------------------------------------------------ helpers */

static uint64_t lcg_state;
static double lcg_unit(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg_state >> 11) * 0x1.0p-53;
}
/* Roughly normal (sum of 4 uniforms, centred, unit variance). */
static float lcg_normal(void)
{
    double s = lcg_unit() + lcg_unit() + lcg_unit() + lcg_unit() - 2.0;
    return (float)(s * sqrt(3.0));
}

static rlx_sampler *make(float temp, int top_k, float top_p, float min_p, uint64_t seed, int n_vocab)
{
    rlx_sampler_params p;
    rlx_sampler_params_init(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    rlx_sampler *s = NULL;
    assert_int_equal(rlx_sampler_new(&p, n_vocab, &s), RLX_OK);
    assert_non_null(s);
    return s;
}

static const double *sort_vals;
static int cmp_rank(const void *a, const void *b)
{
    int i = *(const int *)a, j = *(const int *)b;
    if (sort_vals[i] != sort_vals[j])
        return sort_vals[i] > sort_vals[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

/* The filtered distribution in float64, the way Hugging Face orders the
 * warpers: temperature, top-k, top-p, min-p.  Returns the smallest
 * distance of a filter's quantity from its threshold (so a test can make
 * sure float rounding cannot flip a token in or out). */
static double ref_probs(const float *logits, int n, float temp, int top_k, float top_p, float min_p, double *out)
{
    double *l = malloc((size_t)n * sizeof *l), *p = malloc((size_t)n * sizeof *p);
    int *ord = malloc((size_t)n * sizeof *ord);
    assert_non_null(l);
    assert_non_null(p);
    assert_non_null(ord);
    double mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        l[i] = (double)logits[i] / temp;
        ord[i] = i;
        if (l[i] > mx)
            mx = l[i];
    }
    double z = 0.0;
    for (int i = 0; i < n; i++)
        z += p[i] = exp(l[i] - mx);
    for (int i = 0; i < n; i++)
        p[i] /= z;
    sort_vals = l;
    qsort(ord, (size_t)n, sizeof *ord, cmp_rank);
    int keep = n;
    double margin = INFINITY;
    if (top_k > 0 && top_k < keep)
        keep = top_k;
    if (top_p < 1.0f) {
        double zk = 0.0, c = 0.0;
        for (int j = 0; j < keep; j++)
            zk += p[ord[j]];
        int k = 0;
        while (k < keep) {
            c += p[ord[k]] / zk;
            k++;
            if (fabs(c - top_p) < margin)
                margin = fabs(c - top_p);
            if (c >= top_p)
                break;
        }
        keep = k;
    }
    if (min_p > 0.0f) {
        double pmax = p[ord[0]];
        int k = 1;
        for (int j = 1; j < keep; j++) {
            double r = p[ord[j]] / pmax;
            if (fabs(r - min_p) < margin)
                margin = fabs(r - min_p);
            if (r >= min_p)
                k = j + 1;
        }
        keep = k;
    }
    double zs = 0.0;
    for (int j = 0; j < keep; j++)
        zs += p[ord[j]];
    for (int i = 0; i < n; i++)
        out[i] = 0.0;
    for (int j = 0; j < keep; j++)
        out[ord[j]] = p[ord[j]] / zs;
    free(l);
    free(p);
    free(ord);
    return margin;
}

/* ------------------------------------------------------------ tests */

static void test_greedy_argmax_ties(void **state)
{
    (void)state;
    float l[8] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f, -7.0f, 1.0f};
    rlx_sampler *s = make(0.0f, 0, 1.0f, 0.0f, 1, 8);
    for (int r = 0; r < 10; r++)
        assert_int_equal(rlx_sampler_sample(s, l, NULL, 0), 1);
    float pr[8];
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    for (int i = 0; i < 8; i++)
        assert_true(pr[i] == (i == 1 ? 1.0f : 0.0f));
    /* a negative temperature is greedy too; NaN is never the argmax */
    rlx_sampler_free(s);
    s = make(-1.0f, 0, 1.0f, 0.0f, 1, 8);
    l[0] = NAN;
    l[1] = NAN;
    assert_int_equal(rlx_sampler_sample(s, l, NULL, 0), 3);
    rlx_sampler_free(s);
}

static void test_top_k1_is_greedy(void **state)
{
    (void)state;
    enum { V = 1000 };
    static float l[V];
    rlx_sampler *g = make(0.0f, 0, 1.0f, 0.0f, 5, V);
    rlx_sampler *k = make(1.5f, 1, 0.5f, 0.2f, 6, V);
    lcg_state = 11;
    for (int r = 0; r < 200; r++) {
        for (int i = 0; i < V; i++)
            l[i] = lcg_normal() * 3.0f;
        if (r % 7 == 0) /* a tie for the top */
            l[(r * 13) % V] = l[(r * 31 + 1) % V] = 20.0f;
        int32_t a = rlx_sampler_sample(g, l, NULL, 0), b = rlx_sampler_sample(k, l, NULL, 0);
        assert_int_equal(a, b);
        int32_t best = 0;
        for (int i = 1; i < V; i++)
            if (l[i] > l[best])
                best = i;
        assert_int_equal(a, best);
    }
    rlx_sampler_free(g);
    rlx_sampler_free(k);
}

/* Equal logits at a top-k or top-p cut: the lower ids stay. */
static void test_ties_at_cut(void **state)
{
    (void)state;
    const float l[6] = {1.0f, 3.0f, 2.0f, 3.0f, 3.0f, 0.0f};
    float pr[6];
    rlx_sampler *s = make(1.0f, 2, 1.0f, 0.0f, 1, 6);
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    assert_true(pr[1] == 0.5f && pr[3] == 0.5f && pr[4] == 0.0f);
    for (int r = 0; r < 100; r++) {
        int32_t t = rlx_sampler_sample(s, l, NULL, 0);
        assert_true(t == 1 || t == 3);
    }
    rlx_sampler_free(s);
    const float u[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    s = make(1.0f, 0, 0.4f, 0.0f, 1, 4);
    assert_int_equal(rlx_sampler_probs(s, u, NULL, 0, pr), RLX_OK);
    assert_true(pr[0] == 0.5f && pr[1] == 0.5f && pr[2] == 0.0f && pr[3] == 0.0f);
    rlx_sampler_free(s);
}

static void test_determinism(void **state)
{
    (void)state;
    enum { V = 50, N = 2000 };
    float l[V];
    lcg_state = 3;
    for (int i = 0; i < V; i++)
        l[i] = lcg_normal();
    static int32_t a[N], b[N], c[N];
    rlx_sampler *s1 = make(1.0f, 20, 0.95f, 0.01f, 42, V), *s2 = make(1.0f, 20, 0.95f, 0.01f, 42, V);
    rlx_sampler *s3 = make(1.0f, 20, 0.95f, 0.01f, 43, V);
    for (int i = 0; i < N; i++) {
        a[i] = rlx_sampler_sample(s1, l, NULL, 0);
        b[i] = rlx_sampler_sample(s2, l, NULL, 0);
        c[i] = rlx_sampler_sample(s3, l, NULL, 0);
    }
    assert_memory_equal(a, b, sizeof a);
    int differ = 0;
    for (int i = 0; i < N; i++)
        differ += a[i] != c[i];
    assert_true(differ > N / 4);
    /* set_seed restarts the stream */
    rlx_sampler_set_seed(s3, 42);
    for (int i = 0; i < N; i++)
        assert_int_equal(rlx_sampler_sample(s3, l, NULL, 0), a[i]);
    rlx_sampler_free(s1);
    rlx_sampler_free(s2);
    rlx_sampler_free(s3);
}

struct dist_case {
    float temp;
    int top_k;
    float top_p, min_p;
};

/* 200000 draws against the float64 reference: every dropped token never
 * drawn, each kept one within 5 standard errors, and chi-square below a
 * bound far in its tail. */
static void check_distribution(const float *l, int n, struct dist_case c, uint64_t seed)
{
    enum { N = 200000 };
    double *ref = malloc((size_t)n * sizeof *ref);
    long *cnt = calloc((size_t)n, sizeof *cnt);
    float *pr = malloc((size_t)n * sizeof *pr);
    assert_non_null(ref);
    assert_non_null(cnt);
    assert_non_null(pr);
    double margin = ref_probs(l, n, c.temp, c.top_k, c.top_p, c.min_p, ref);
    assert_true(margin > 1e-4); /* the logits keep clear of the thresholds */
    rlx_sampler *s = make(c.temp, c.top_k, c.top_p, c.min_p, seed, n);
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    for (int i = 0; i < n; i++) {
        assert_true((ref[i] == 0.0) == (pr[i] == 0.0f));
        assert_true(fabs(pr[i] - ref[i]) < 2e-6);
    }
    for (int r = 0; r < N; r++) {
        int32_t t = rlx_sampler_sample(s, l, NULL, 0);
        assert_true(t >= 0 && t < n);
        cnt[t]++;
    }
    double chi2 = 0.0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        if (ref[i] == 0.0) {
            assert_int_equal(cnt[i], 0);
            continue;
        }
        double e = ref[i] * N, f = (double)cnt[i] / N;
        double se = sqrt(ref[i] * (1.0 - ref[i]) / N);
        if (fabs(f - ref[i]) > 5.0 * se + 1e-9) {
            fprintf(stderr, "token %d: drawn %.5f, expected %.5f (5 se %.5f)\n", i, f, ref[i], 5 * se);
            fail();
        }
        chi2 += (cnt[i] - e) * (cnt[i] - e) / e;
        df++;
    }
    if (df > 0) {
        double bound = df + 6.0 * sqrt(2.0 * df) + 10.0;
        if (chi2 > bound) {
            fprintf(stderr, "chi-square %.1f over %d degrees of freedom (bound %.1f)\n", chi2, df, bound);
            fail();
        }
    }
    rlx_sampler_free(s);
    free(ref);
    free(cnt);
    free(pr);
}

static void test_distribution(void **state)
{
    (void)state;
    enum { V = 24 };
    float l[V];
    lcg_state = 2024;
    for (int i = 0; i < V; i++)
        l[i] = lcg_normal() * 1.5f;
    l[5] = l[9]; /* a tie, so the ranking's id order matters at a cut */
    static const struct dist_case cases[] = {
        {1.0f, 0, 1.0f, 0.0f},  {0.7f, 0, 1.0f, 0.0f},  {2.5f, 0, 1.0f, 0.0f}, {1.0f, 5, 1.0f, 0.0f},
        {1.0f, 0, 0.8f, 0.0f},  {1.0f, 0, 1.0f, 0.12f}, {0.8f, 8, 0.9f, 0.0f}, {1.3f, 12, 0.93f, 0.07f},
        {1.0f, 0, 0.55f, 0.3f}, {1.0f, 30, 1.0f, 0.0f}, {0.5f, 3, 1.0f, 0.5f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_distribution(l, V, cases[i], 100 + i);
}

/* A vocabulary of Qwen's size: the heap path against the full sort. */
static void test_large_vocab(void **state)
{
    (void)state;
    enum { V = 151936 };
    float *l = malloc(V * sizeof *l), *pr = malloc(V * sizeof *pr);
    double *ref = malloc(V * sizeof *ref);
    assert_non_null(l);
    assert_non_null(pr);
    assert_non_null(ref);
    lcg_state = 99;
    for (int i = 0; i < V; i++)
        l[i] = lcg_normal() * 2.0f;
    static const struct dist_case cases[] = {
        {1.0f, 40, 1.0f, 0.0f}, {0.8f, 40, 0.9f, 0.05f}, {0.6f, 0, 0.9f, 0.0f}, {1.0f, 0, 1.0f, 0.02f}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct dist_case d = cases[c];
        double margin = ref_probs(l, V, d.temp, d.top_k, d.top_p, d.min_p, ref);
        rlx_sampler *s = make(d.temp, d.top_k, d.top_p, d.min_p, 7, V);
        assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
        int kept = 0;
        for (int i = 0; i < V; i++) {
            if (margin > 1e-6)
                assert_true((ref[i] == 0.0) == (pr[i] == 0.0f));
            assert_true(fabs(pr[i] - ref[i]) < 1e-6);
            kept += pr[i] > 0.0f;
        }
        assert_true(kept > 0);
        for (int r = 0; r < 200; r++) {
            int32_t t = rlx_sampler_sample(s, l, NULL, 0);
            assert_true(t >= 0 && t < V && pr[t] > 0.0f);
        }
        rlx_sampler_free(s);
    }
    free(l);
    free(pr);
    free(ref);
}

static void test_repeat_penalty(void **state)
{
    (void)state;
    enum { V = 8 };
    const float l[V] = {2.0f, -2.0f, 0.0f, 3.0f, 1.5f, -0.5f, 4.0f, 0.25f};
    rlx_sampler_params p;
    rlx_sampler_params_init(&p);
    p.repeat_penalty = 1.3f;
    p.repeat_last_n = 4;
    rlx_sampler *s = NULL;
    assert_int_equal(rlx_sampler_new(&p, V, &s), RLX_OK);
    /* window = the last 4: {3, 5, 3, 99}; 0 and 6 are older; 99 and -1 out of range */
    const int32_t hist[] = {0, 6, -1, 3, 5, 3, 99};
    float out[V];
    assert_int_equal(rlx_sampler_penalize(s, l, hist, 7, out), RLX_OK);
    for (int i = 0; i < V; i++) {
        float want = l[i];
        if (i == 3)
            want = 3.0f / 1.3f; /* once, though it occurs twice */
        if (i == 5)
            want = -0.5f * 1.3f;
        assert_true(out[i] == want);
    }
    rlx_sampler_free(s);
    /* the whole history (-1), in place; zero stays zero */
    p.repeat_last_n = -1;
    p.temperature = 0.0f;
    assert_int_equal(rlx_sampler_new(&p, V, &s), RLX_OK);
    memcpy(out, l, sizeof out);
    const int32_t hist2[] = {0, 1, 2, 6, 6};
    assert_int_equal(rlx_sampler_penalize(s, out, hist2, 5, out), RLX_OK);
    assert_true(out[0] == 2.0f / 1.3f && out[1] == -2.0f * 1.3f && out[2] == 0.0f && out[6] == 4.0f / 1.3f);
    assert_true(out[3] == 3.0f && out[4] == 1.5f && out[7] == 0.25f);
    /* greedy sees the penalised logits: 6 (4 / 1.3 = 3.08) still beats 3 (3.0) */
    assert_int_equal(rlx_sampler_sample(s, l, hist2, 5), 6);
    const int32_t hist3[] = {6, 6, 6};
    rlx_sampler_free(s);
    p.repeat_penalty = 1.5f; /* 4 / 1.5 = 2.67 < 3 */
    assert_int_equal(rlx_sampler_new(&p, V, &s), RLX_OK);
    assert_int_equal(rlx_sampler_sample(s, l, hist3, 3), 3);
    assert_int_equal(rlx_sampler_sample(s, l, NULL, 0), 6);
    rlx_sampler_free(s);
    /* repeat_last_n 0: no penalty */
    p.repeat_last_n = 0;
    assert_int_equal(rlx_sampler_new(&p, V, &s), RLX_OK);
    assert_int_equal(rlx_sampler_sample(s, l, hist3, 3), 6);
    rlx_sampler_free(s);
}

static void test_nonfinite(void **state)
{
    (void)state;
    enum { V = 6 };
    rlx_sampler *s = make(1.0f, 0, 1.0f, 0.0f, 9, V);
    float l[V] = {NAN, -INFINITY, NAN, NAN, -INFINITY, NAN};
    float pr[V];
    assert_int_equal(rlx_sampler_sample(s, l, NULL, 0), -1);
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_ERR_RUNTIME);
    /* NaN and -inf are never drawn */
    l[3] = 0.0f;
    l[4] = 1.0f;
    for (int r = 0; r < 1000; r++) {
        int32_t t = rlx_sampler_sample(s, l, NULL, 0);
        assert_true(t == 3 || t == 4);
    }
    /* +inf: those alone, equally */
    l[0] = INFINITY;
    l[5] = INFINITY;
    int c0 = 0, c5 = 0;
    for (int r = 0; r < 20000; r++) {
        int32_t t = rlx_sampler_sample(s, l, NULL, 0);
        assert_true(t == 0 || t == 5);
        c0 += t == 0;
        c5 += t == 5;
    }
    assert_true(abs(c0 - c5) < 1000); /* 7 standard errors */
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    assert_true(pr[0] == 0.5f && pr[5] == 0.5f && pr[3] == 0.0f && pr[4] == 0.0f);
    rlx_sampler_free(s);
    /* top_k 1 among +inf: the lowest id; top_p 0.5 of two: the lower id;
     * top_k 3 over two +inf: those two; temperature +inf: uniform over the finite */
    s = make(1.0f, 1, 1.0f, 0.0f, 9, V);
    assert_int_equal(rlx_sampler_sample(s, l, NULL, 0), 0);
    rlx_sampler_free(s);
    s = make(1.0f, 0, 0.5f, 0.0f, 9, V);
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    assert_true(pr[0] == 1.0f && pr[5] == 0.0f);
    rlx_sampler_free(s);
    s = make(1.0f, 3, 1.0f, 0.0f, 9, V);
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    assert_true(pr[0] == 0.5f && pr[5] == 0.5f && pr[3] == 0.0f && pr[4] == 0.0f);
    rlx_sampler_free(s);
    s = make(INFINITY, 0, 1.0f, 0.0f, 9, V);
    l[0] = l[5] = 7.0f;
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    assert_true(pr[0] == 0.25f && pr[3] == 0.25f && pr[4] == 0.25f && pr[5] == 0.25f && pr[1] == 0.0f);
    /* a tiny temperature is greedy in effect, without NaN */
    rlx_sampler_free(s);
    s = make(1e-30f, 0, 1.0f, 0.0f, 9, V);
    assert_int_equal(rlx_sampler_probs(s, l, NULL, 0, pr), RLX_OK);
    assert_true(pr[0] == 0.5f && pr[5] == 0.5f && pr[3] == 0.0f);
    rlx_sampler_free(s);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    rlx_sampler_params p;
    rlx_sampler *s = (rlx_sampler *)&p;
    rlx_sampler_params_init(&p);
    assert_int_equal(rlx_sampler_new(&p, 0, &s), RLX_ERR_INVALID_ARGUMENT);
    assert_null(s);
    assert_int_equal(rlx_sampler_new(NULL, 4, &s), RLX_ERR_INVALID_ARGUMENT);
    p.top_p = 1.5f;
    assert_int_equal(rlx_sampler_new(&p, 4, &s), RLX_ERR_INVALID_ARGUMENT);
    rlx_sampler_params_init(&p);
    p.min_p = NAN;
    assert_int_equal(rlx_sampler_new(&p, 4, &s), RLX_ERR_INVALID_ARGUMENT);
    rlx_sampler_params_init(&p);
    p.repeat_penalty = 0.0f;
    assert_int_equal(rlx_sampler_new(&p, 4, &s), RLX_ERR_INVALID_ARGUMENT);
    rlx_sampler_params_init(&p);
    p.temperature = NAN;
    assert_int_equal(rlx_sampler_new(&p, 4, &s), RLX_ERR_INVALID_ARGUMENT);
    rlx_sampler_params_init(&p);
    p.repeat_last_n = -2;
    assert_int_equal(rlx_sampler_new(&p, 4, &s), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_sampler_sample(NULL, NULL, NULL, 0), -1);
    assert_true(strlen(rlx_last_error()) > 0);
    rlx_sampler_free(NULL);
}

static void test_stop_strings(void **state)
{
    (void)state;
    rlx_stop st;
    rlx_stop_init(&st);
    assert_int_equal(rlx_stop_add_eos(&st, 2), RLX_OK);
    assert_int_equal(rlx_stop_add_eos(&st, 151645), RLX_OK);
    assert_true(rlx_stop_is_eos(&st, 2) && rlx_stop_is_eos(&st, 151645) && !rlx_stop_is_eos(&st, 3));
    assert_int_equal(rlx_stop_add_string(&st, ""), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_stop_add_string(&st, "\n\nUser:"), RLX_OK);
    assert_int_equal(rlx_stop_add_string(&st, "</s>"), RLX_OK);

    /* "\n\nUser:" arrives over three tokens */
    const char *pieces[] = {"Hello", " world.\n", "\nUs", "er:", " more"};
    char text[128] = "";
    size_t len = 0, checked = 0, mlen = 0;
    ptrdiff_t at = -1;
    int stopped_at = -1;
    for (int i = 0; i < 5 && at < 0; i++) {
        size_t n = strlen(pieces[i]);
        memcpy(text + len, pieces[i], n);
        len += n;
        at = rlx_stop_find(&st, text, len, checked, &mlen);
        if (at >= 0)
            stopped_at = i;
        else if (i == 1)
            assert_int_equal(rlx_stop_holdback(&st, text, len), 1); /* "\n" */
        else if (i == 2)
            assert_int_equal(rlx_stop_holdback(&st, text, len), 4); /* "\n\nUs" */
        checked = len;
    }
    assert_int_equal(stopped_at, 3);
    assert_int_equal(at, 12); /* "Hello world." */
    assert_int_equal(mlen, 7);

    /* a match already inside the searched part is not found again; the
     * earliest new one wins; no stop string at all */
    const char *t2 = "ab</s>cd</s>";
    assert_int_equal(rlx_stop_find(&st, t2, strlen(t2), 0, &mlen), 2);
    assert_int_equal(rlx_stop_find(&st, t2, strlen(t2), 6, &mlen), 8);
    assert_int_equal(rlx_stop_find(&st, t2, 5, 0, &mlen), -1);
    assert_int_equal(rlx_stop_holdback(&st, t2, 5), 3);
    assert_int_equal(rlx_stop_holdback(&st, "xyz", 3), 0);
    assert_int_equal(rlx_stop_holdback(&st, "<", 1), 1);
    rlx_stop empty;
    rlx_stop_init(&empty);
    assert_int_equal(rlx_stop_find(&empty, t2, strlen(t2), 0, NULL), -1);
    assert_int_equal(rlx_stop_holdback(&empty, t2, strlen(t2)), 0);
    /* capacity */
    for (int i = 0; i < RLX_STOP_MAX_EOS; i++)
        rlx_stop_add_eos(&empty, 1000 + i);
    assert_int_equal(rlx_stop_add_eos(&empty, 5), RLX_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_argmax_ties), cmocka_unit_test(test_top_k1_is_greedy),
        cmocka_unit_test(test_ties_at_cut),        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_distribution),       cmocka_unit_test(test_large_vocab),
        cmocka_unit_test(test_repeat_penalty),     cmocka_unit_test(test_nonfinite),
        cmocka_unit_test(test_bad_arguments),      cmocka_unit_test(test_stop_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
