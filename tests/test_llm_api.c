/* test_llm_api.c - the decoder-LLM C API's contracts: cache_write against
 * a direct loop, params shared between sessions, the built-in model's
 * prefill/decode/generate, and every refusal with its message.  (Parity
 * with float64 references and llama.cpp: tests/llm.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rlx.h"

#define HAS(msg) assert_non_null(strstr(rlx_last_error(), (msg)))

/* cache_write: rows land at pos[b] + s, others keep the cache's values,
 * rows outside the cache are skipped, and the param keeps them across runs. */
static void test_cache_write(void **state)
{
    (void)state;
    enum { B = 2, H = 3, T = 6, S = 2, D = 5 };
    rlx_graph *g = rlx_graph_new();
    rlx_node cache = rlx_param(g, "cache", RLX_F32, 4, (int64_t[]){B, H, T, D});
    rlx_node upd = rlx_input(g, "u", RLX_F32, 4, (int64_t[]){B, H, S, D});
    rlx_node pos = rlx_input(g, "pos", RLX_I64, 1, (int64_t[]){B});
    rlx_output(g, "y", rlx_mul(g, rlx_cache_write(g, cache, upd, pos), rlx_scalar(g, RLX_F32, 1.0)));
    rlx_session *s;
    assert_int_equal(rlx_compile(g, NULL, &s), RLX_OK);
    static float c0[B * H * T * D], u[B * H * S * D], y[B * H * T * D];
    double want[B * H * T * D];
    for (int i = 0; i < B * H * T * D; i++)
        c0[i] = (float)(i % 17) - 8.5f;
    assert_int_equal(rlx_session_set_param(s, "cache", c0, sizeof c0), RLX_OK);
    for (int i = 0; i < B * H * T * D; i++)
        want[i] = c0[i];
    int64_t runs[2][B] = {{1, 5}, {3, -1}}; /* 5 + 1 and -1 fall outside: skipped */
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < B * H * S * D; i++)
            u[i] = (float)(r * 100 + i) * 0.25f;
        assert_int_equal(rlx_session_set_input(s, "u", u, sizeof u), RLX_OK);
        assert_int_equal(rlx_session_set_input(s, "pos", runs[r], sizeof runs[r]), RLX_OK);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < S; t++) {
                    int64_t p = runs[r][b] + t;
                    if (p < 0 || p >= T)
                        continue;
                    for (int d = 0; d < D; d++)
                        want[((b * H + h) * T + p) * D + d] = u[((b * H + h) * S + t) * D + d];
                }
        assert_int_equal(rlx_session_get_output(s, "y", y, sizeof y), RLX_OK);
        for (int i = 0; i < B * H * T * D; i++)
            assert_float_equal(y[i], want[i], 0.0);
    }
    rlx_session_free(s);
    rlx_graph_free(g);
    /* shapes that do not fit */
    g = rlx_graph_new();
    cache = rlx_param(g, "cache", RLX_F32, 4, (int64_t[]){B, H, T, D});
    pos = rlx_input(g, "pos", RLX_I64, 1, (int64_t[]){B});
    assert_true(rlx_cache_write(g, cache, rlx_input(g, "u", RLX_F16, 4, (int64_t[]){B, H, S, D}), pos) < 0);
    HAS("cache_write: update is f16, the cache f32");
    rlx_graph_free(g);
    g = rlx_graph_new();
    cache = rlx_param(g, "cache", RLX_F32, 4, (int64_t[]){B, H, T, D});
    pos = rlx_input(g, "pos", RLX_I64, 1, (int64_t[]){B});
    assert_true(rlx_cache_write(g, cache, rlx_input(g, "u", RLX_F32, 4, (int64_t[]){B, H, T + 1, D}), pos) < 0);
    HAS("does not fit the cache");
    rlx_graph_free(g);
}

/* A second session reads the first's params in place; a mismatch is refused. */
static void test_shared_params(void **state)
{
    (void)state;
    rlx_graph *g1 = rlx_graph_new(), *g2 = rlx_graph_new(), *g3 = rlx_graph_new();
    rlx_output(
        g1, "y",
        rlx_add(g1, rlx_param(g1, "w", RLX_F32, 1, (int64_t[]){4}), rlx_input(g1, "x", RLX_F32, 1, (int64_t[]){4})));
    rlx_output(
        g2, "y",
        rlx_mul(g2, rlx_param(g2, "w", RLX_F32, 1, (int64_t[]){4}), rlx_input(g2, "x", RLX_F32, 1, (int64_t[]){4})));
    rlx_output(
        g3, "y",
        rlx_mul(g3, rlx_param(g3, "w", RLX_F32, 1, (int64_t[]){5}), rlx_input(g3, "x", RLX_F32, 1, (int64_t[]){5})));
    rlx_session *a, *b, *c = NULL;
    assert_int_equal(rlx_compile(g1, NULL, &a), RLX_OK);
    assert_int_equal(rlx_compile_shared(g2, NULL, a, &b), RLX_OK);
    float w[4] = {1, 2, 3, 4}, x[4] = {2, 2, 2, 2}, y[4];
    assert_int_equal(rlx_session_set_param(a, "w", w, sizeof w), RLX_OK);
    assert_int_equal(rlx_session_set_input(b, "x", x, sizeof x), RLX_OK);
    assert_int_equal(rlx_session_run(b), RLX_OK); /* w was set through a */
    assert_int_equal(rlx_session_get_output(b, "y", y, sizeof y), RLX_OK);
    for (int i = 0; i < 4; i++)
        assert_float_equal(y[i], 2 * w[i], 0.0);
    w[0] = 10;
    assert_int_equal(rlx_session_set_param(b, "w", w, sizeof w), RLX_OK); /* and through b, for both */
    assert_int_equal(rlx_session_set_input(a, "x", x, sizeof x), RLX_OK);
    assert_int_equal(rlx_session_run(a), RLX_OK);
    assert_int_equal(rlx_session_get_output(a, "y", y, sizeof y), RLX_OK);
    assert_float_equal(y[0], 12.0, 0.0);
    assert_int_equal(rlx_compile_shared(g3, NULL, a, &c), RLX_ERR_SHAPE);
    HAS("shared param 'w' is f32[5] here and f32[4] in the other session");
    assert_null(c);
    rlx_session_free(b);
    rlx_session_free(a);
    rlx_graph_free(g1), rlx_graph_free(g2), rlx_graph_free(g3);
}

static int count_pieces(void *user, int32_t id, const char *text, size_t len)
{
    (void)id, (void)text;
    *(size_t *)user += len;
    return 0;
}

static void test_builtin_model(void **state)
{
    (void)state;
    rlx_llm *m;
    assert_int_equal(rlx_llm_load(NULL, &m), RLX_OK);
    rlx_llm_info info;
    assert_int_equal(rlx_llm_get_info(m, &info), RLX_OK);
    assert_int_equal(info.vocab, 32000);
    int32_t ids[16];
    assert_int_equal(rlx_llm_tokenize(m, "hi!", 3, 1, ids, 16), 3);
    char text[16];
    assert_int_equal(rlx_llm_detokenize(m, ids, 3, text, sizeof text), 3);
    assert_memory_equal(text, "hi!", 3);
    rlx_llm_options o;
    rlx_llm_options_init(&o);
    o.ctx = 24;
    o.prefill_chunk = 4; /* a prompt of 6 in two runs */
    o.threads = 1;
    rlx_llm_context *c;
    assert_int_equal(rlx_llm_context_new(m, &o, &c), RLX_OK);
    int32_t prompt[6] = {1, 2, 3, 4, 5, 6};
    const int32_t *p = prompt;
    int n = 6;
    assert_int_equal(rlx_llm_prefill(c, 1, &p, &n), RLX_OK);
    assert_int_equal(rlx_llm_position(c, 0), 6);
    assert_non_null(rlx_llm_logits(c, 0));
    assert_null(rlx_llm_logits(c, 1));
    /* refusals */
    int32_t bad = 32000;
    assert_int_equal(rlx_llm_decode(c, &bad), RLX_ERR_INVALID_ARGUMENT);
    HAS("outside the vocabulary of 32000");
    int big = 25;
    int32_t many[25] = {0};
    const int32_t *pm = many;
    assert_int_equal(rlx_llm_prefill(c, 1, &pm, &big), RLX_ERR_INVALID_ARGUMENT);
    HAS("1 to 24 fit the context");
    assert_int_equal(rlx_llm_prefill(c, 2, &p, &n), RLX_ERR_INVALID_ARGUMENT);
    HAS("2 sequences asked, the context has 1");
    rlx_generate_params gp;
    rlx_generate_params_init(&gp);
    gp.max_tokens = 19;
    assert_int_equal(rlx_llm_generate(c, prompt, 6, &gp, NULL, NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
    HAS("6 prompt tokens + 19 new ones exceed the context of 24");
    /* generation: greedy is deterministic, and the text comes piece by piece */
    gp.max_tokens = 8;
    gp.temperature = 0;
    gp.ignore_eos = 1;
    rlx_generate_stats st1, st2;
    size_t bytes = 0;
    assert_int_equal(rlx_llm_generate(c, prompt, 6, &gp, count_pieces, &bytes, &st1), RLX_OK);
    assert_int_equal(st1.generated_tokens, 8);
    assert_true(bytes > 0);
    float first[32000];
    memcpy(first, rlx_llm_logits(c, 0), sizeof first);
    assert_int_equal(rlx_llm_generate(c, prompt, 6, &gp, NULL, NULL, &st2), RLX_OK);
    assert_memory_equal(first, rlx_llm_logits(c, 0), sizeof first);
    rlx_llm_context_free(c);
    rlx_llm_free(m);
}

/* The greedy token from the device equals the first largest logit, and
 * logits left on the device after a decode step (fetched only when asked
 * for) equal logits copied after every step, also for a sequence that sat
 * idle in a later step. */
static void test_argmax_and_deferred_logits(void **state)
{
    (void)state;
    enum { B = 3, V = 32000 };
    rlx_llm *m;
    assert_int_equal(rlx_llm_load(NULL, &m), RLX_OK);
    rlx_llm_options o;
    rlx_llm_options_init(&o);
    o.batch = B;
    o.ctx = 16;
    o.threads = 1;
    rlx_llm_context *eager, *lazy;
    assert_int_equal(rlx_llm_context_new(m, &o, &eager), RLX_OK);
    assert_int_equal(rlx_llm_context_new(m, &o, &lazy), RLX_OK);
    int32_t p0[3] = {5, 9, 2}, p1[2] = {7, 7}, p2[4] = {1, 3, 3, 8};
    const int32_t *ps[B] = {p0, p1, p2};
    int ns[B] = {3, 2, 4};
    assert_int_equal(rlx_llm_prefill(eager, B, ps, ns), RLX_OK);
    assert_int_equal(rlx_llm_prefill(lazy, B, ps, ns), RLX_OK);
    static float seen[B][V];
    int32_t steps[3][B] = {{11, 12, 13}, {21, -1, 23}, {-1, 32, -1}};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(rlx_llm_decode(eager, steps[k]), RLX_OK);
        assert_int_equal(rlx_llm_decode(lazy, steps[k]), RLX_OK);
        for (int b = 0; b < B; b++) {
            const float *l = rlx_llm_logits(eager, b);
            assert_non_null(l);
            memcpy(seen[b], l, sizeof seen[b]);
        }
        int32_t best[B];
        assert_int_equal(rlx_llm_argmax(lazy, best), RLX_OK);
        for (int b = 0; b < B; b++) {
            int want = 0;
            for (int i = 1; i < V; i++)
                if (seen[b][i] > seen[b][want])
                    want = i;
            assert_int_equal(best[b], want);
        }
    }
    /* the lazy context never copied logits until now; each row must be the
     * one of its last step (sequence 0 and 2 decoded last at step 2) */
    for (int b = 0; b < B; b++) {
        const float *l = rlx_llm_logits(lazy, b);
        assert_non_null(l);
        assert_memory_equal(l, seen[b], sizeof seen[b]);
    }
    assert_int_equal(rlx_llm_argmax(NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
    rlx_llm_context_free(eager);
    rlx_llm_context_free(lazy);
    rlx_llm_free(m);
}

static void test_load_errors(void **state)
{
    (void)state;
    rlx_llm *m = NULL;
    assert_int_not_equal(rlx_llm_load("/nonexistent/model.gguf", &m), RLX_OK);
    assert_null(m);
    assert_true(strlen(rlx_last_error()) > 0);
    assert_non_null(strstr(rlx_last_error(), "/nonexistent/model.gguf"));
    assert_int_equal(rlx_llm_load("decoder-tiny", &m), RLX_ERR_IO);
    assert_int_equal(rlx_llm_context_new(NULL, NULL, NULL), RLX_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_write),   cmocka_unit_test(test_shared_params),
        cmocka_unit_test(test_builtin_model), cmocka_unit_test(test_argmax_and_deferred_logits),
        cmocka_unit_test(test_load_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
