/* test_concurrency.c - sessions compiled and run from several threads at
 * once: each thread compiles its own session of one graph (the compile path
 * must keep no unguarded process-wide state) and runs it; then threads share
 * one session behind a mutex (as the Python package does).  Every result
 * must equal the single-threaded run bit for bit.  Then 8 threads compile
 * the built-in workloads at once (two per workload): each compile must give
 * the single-threaded compile's graph, plan sizes and schedule (the
 * planner's sort and shape inference keep no shared state).
 * scripts/test.sh also runs this under ThreadSanitizer (its tsan
 * configuration). */
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

/* ------------------------------------------------ workloads, compiled at once */

#define COMPILERS 8
static const struct {
    const char *name;
    int batch, seq;
} workloads[] = {{"mlp", 1, 0}, {"encoder", 1, 16}, {"resnet50", 1, 0}, {"decoder-small", 1, 16}};
#define N_WORKLOADS (int)(sizeof workloads / sizeof workloads[0])

typedef struct compiled {
    rlx_compile_stats stats;
    char *dot;
} compiled;
static compiled reference[N_WORKLOADS];

static int compile_workload(int w, compiled *out)
{
    rlx_graph *g = NULL;
    if (rlx_workload_graph(workloads[w].name, workloads[w].batch, workloads[w].seq, &g) != RLX_OK)
        return 0;
    rlx_options o;
    rlx_options_init(&o);
    o.threads = 1;
    o.ignore_env = 1;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    rlx_graph_free(g);
    if (st != RLX_OK)
        return 0;
    memset(out, 0, sizeof *out);
    int ok =
        rlx_session_stats(s, &out->stats) == RLX_OK && rlx_session_to_dot(s, workloads[w].name, &out->dot) == RLX_OK;
    rlx_session_free(s);
    return ok;
}

static int same_compile(const compiled *a, const compiled *b)
{
    const rlx_compile_stats *x = &a->stats, *y = &b->stats;
    return x->nodes_in == y->nodes_in && x->nodes_after_simplify == y->nodes_after_simplify &&
           x->nodes_after_fusion == y->nodes_after_fusion && x->nodes_final == y->nodes_final &&
           x->arena_bytes == y->arena_bytes && x->persistent_bytes == y->persistent_bytes &&
           x->transient_bytes == y->transient_bytes && x->transient_lower_bound == y->transient_lower_bound &&
           x->scratch_bytes == y->scratch_bytes && x->buffers == y->buffers && x->thunks == y->thunks &&
           x->noop_thunks == y->noop_thunks && x->channels_last == y->channels_last && !strcmp(a->dot, b->dot);
}

static void *compile_at_once(void *arg)
{
    int t = (int)(intptr_t)arg, w = t % N_WORKLOADS;
    compiled c;
    if (!compile_workload(w, &c)) {
        fail(workloads[w].name, t);
        return NULL;
    }
    if (!same_compile(&c, &reference[w]))
        fail("compile differs from the single-threaded compile", t);
    rlx_free(c.dot);
    return NULL;
}

static int spawn_n(void *(*fn)(void *), int n)
{
    pthread_t th[COMPILERS];
    int started = 0;
    for (int t = 0; t < n; t++)
        if (pthread_create(&th[t], NULL, fn, (void *)(intptr_t)t) == 0)
            started++;
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    return started == n ? 0 : -1;
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
    for (int w = 0; w < N_WORKLOADS; w++)
        if (!compile_workload(w, &reference[w])) {
            fprintf(stderr, "compile %s: %s\n", workloads[w].name, rlx_last_error());
            return 1;
        }
    if (spawn_n(compile_at_once, COMPILERS) != 0) {
        fprintf(stderr, "cannot start threads\n");
        return 1;
    }
    for (int w = 0; w < N_WORKLOADS; w++)
        rlx_free(reference[w].dot);
    printf("%d threads compiling %d workloads at once: %d failures\n", COMPILERS, N_WORKLOADS, failures);
    return failures ? 1 : 0;
}
