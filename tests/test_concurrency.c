/* test_concurrency.c - sessions compiled and run from several threads at
 * once: each thread compiles its own session of one graph (the compile path
 * must keep no unguarded process-wide state) and runs it; then threads share
 * one session behind a mutex (as the Python package does).  Every result
 * must equal the single-threaded run bit for bit.  scripts/test.sh also
 * runs this under ThreadSanitizer (its tsan configuration). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx.h"

#define THREADS 4
#define RUNS 40
#define N_INPUTS 8
#define ROWS 16
#define COLS 32

static float inputs[N_INPUTS][ROWS * COLS];
static float expected[N_INPUTS][ROWS * COLS];
static float weights[COLS * COLS], bias[COLS];
static rlx_session *shared;
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, int t)
{
    pthread_mutex_lock(&fail_lock);
    failures++;
    fprintf(stderr, "thread %d: %s: %s\n", t, what, rlx_last_error());
    pthread_mutex_unlock(&fail_lock);
}

static rlx_graph *build(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){ROWS, COLS});
    rlx_node w = rlx_constant(g, RLX_F32, 2, (int64_t[]){COLS, COLS}, weights, sizeof weights);
    rlx_node b = rlx_constant(g, RLX_F32, 1, (int64_t[]){COLS}, bias, sizeof bias);
    rlx_node h = rlx_gelu(g, rlx_add(g, rlx_matmul(g, x, w, 0, 0), b));
    rlx_node y = rlx_layer_norm(g, rlx_add(g, rlx_softmax(g, h, -1), x), -1, -1, 1e-5);
    rlx_output(g, "y", y);
    return g;
}

static rlx_session *compile_one(void)
{
    rlx_graph *g = build();
    rlx_options o;
    rlx_options_init(&o);
    o.threads = 1;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    rlx_graph_free(g);
    return st == RLX_OK ? s : NULL;
}

static int run_one(rlx_session *s, int k, float *out)
{
    return rlx_session_set_input(s, "x", inputs[k], sizeof inputs[k]) == RLX_OK && rlx_session_run(s) == RLX_OK &&
           rlx_session_get_output(s, "y", out, sizeof expected[k]) == RLX_OK;
}

static void *own_session(void *arg)
{
    int t = (int)(intptr_t)arg;
    rlx_session *s = compile_one();
    if (!s) {
        fail("compile", t);
        return NULL;
    }
    float out[ROWS * COLS];
    for (int r = 0; r < RUNS; r++) {
        int k = (t * 7 + r) % N_INPUTS;
        if (!run_one(s, k, out))
            fail("run", t);
        else if (memcmp(out, expected[k], sizeof out))
            fail("result differs from the single-threaded run", t);
    }
    rlx_session_free(s);
    return NULL;
}

static void *shared_session(void *arg)
{
    int t = (int)(intptr_t)arg;
    float out[ROWS * COLS];
    for (int r = 0; r < RUNS; r++) {
        int k = (t * 3 + r) % N_INPUTS;
        pthread_mutex_lock(&shared_lock);
        int ok = run_one(shared, k, out);
        pthread_mutex_unlock(&shared_lock);
        if (!ok)
            fail("shared run", t);
        else if (memcmp(out, expected[k], sizeof out))
            fail("shared result differs from the single-threaded run", t);
    }
    return NULL;
}

static int spawn(void *(*fn)(void *))
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t) != 0)
            return -1;
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    return 0;
}

int main(void)
{
    unsigned seed = 12345;
    for (size_t i = 0; i < COLS * COLS; i++)
        weights[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 32768.0f - 0.5f;
    for (int i = 0; i < COLS; i++)
        bias[i] = 0.01f * (float)i;
    for (int k = 0; k < N_INPUTS; k++)
        for (int i = 0; i < ROWS * COLS; i++)
            inputs[k][i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 0x7fff) / 8192.0f - 2.0f;
    shared = compile_one();
    if (!shared) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    for (int k = 0; k < N_INPUTS; k++)
        if (!run_one(shared, k, expected[k])) {
            fprintf(stderr, "reference run: %s\n", rlx_last_error());
            return 1;
        }
    if (spawn(own_session) != 0 || spawn(shared_session) != 0) {
        fprintf(stderr, "cannot start threads\n");
        return 1;
    }
    rlx_session_free(shared);
    printf("%d threads x %d runs, own sessions then one shared: %d failures\n", THREADS, RUNS, failures);
    return failures ? 1 : 0;
}
