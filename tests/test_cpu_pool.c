/* test_cpu_pool.c - the CPU backend's thread pool (cpu_pool.h): every index
 * of a loop runs exactly once, on a participant below the thread count, for
 * any size and thread count; many small jobs in a row (workers that slept
 * through one join the next); loops started from inside a chunk and from
 * several threads at once run on their caller; a job of shares runs its
 * shares at once even when the workers were asleep; and a session's
 * results are the same bits at 1, 2 and 3 threads.  scripts/test.sh also runs this
 * under ThreadSanitizer. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backends/cpu/cpu_pool.h"
#include "rlx.h"

#define MAX_N 5000

typedef struct count_job {
    atomic_int hits[MAX_N];
    atomic_int bad_worker;
    int threads;
} count_job;

static void count_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    count_job *j = arg;
    if (worker < 0 || worker >= j->threads || lo > hi)
        atomic_store(&j->bad_worker, 1);
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&j->hits[i], 1);
}

static void check_once(count_job *j, int threads, int64_t n)
{
    memset(j, 0, sizeof *j);
    j->threads = threads;
    rlx_cpu_parallel(threads, n, count_chunk, j);
    assert_int_equal(atomic_load(&j->bad_worker), 0);
    for (int64_t i = 0; i < n; i++)
        assert_int_equal(atomic_load(&j->hits[i]), 1);
    for (int64_t i = n; i < MAX_N; i++)
        assert_int_equal(atomic_load(&j->hits[i]), 0);
}

static void test_every_index_once(void **state)
{
    (void)state;
    static count_job j;
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 16, 17, 100, 1000, MAX_N};
    for (int threads = 1; threads <= 4; threads++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            check_once(&j, threads, sizes[k]);
    assert_true(rlx_cpu_pool_workers() >= 1);
}

/* Two shares that each wait (up to 2 s) until the other has started: they
 * meet only if a worker runs one while the caller runs the other. */
typedef struct meet_job {
    atomic_int started, met;
} meet_job;

static void meet_share(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    meet_job *j = arg;
    for (int64_t i = lo; i < hi; i++) {
        atomic_fetch_add(&j->started, 1);
        for (int spin = 0; spin < 2000 && atomic_load(&j->started) < 2; spin++)
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        if (atomic_load(&j->started) >= 2)
            atomic_fetch_add(&j->met, 1);
    }
}

/* A job of shares wakes sleeping workers before its caller's share: each
 * share runs once, and both run at the same time although the workers had
 * slept (50 ms after a job, far past their spin). */
static void test_shares_wake_sleepers(void **state)
{
    (void)state;
    static count_job warm;
    check_once(&warm, 2, 100); /* the worker exists */
    for (int round = 0; round < 3; round++) {
        nanosleep(&(struct timespec){0, 50000000}, NULL);
        meet_job j;
        memset(&j, 0, sizeof j);
        rlx_cpu_parallel_shares(2, meet_share, &j);
        assert_int_equal(atomic_load(&j.started), 2);
        assert_int_equal(atomic_load(&j.met), 2);
    }
}

/* Jobs back to back: a worker still looking at one job must not run a
 * chunk of it after it is done, nor miss the next. */
static void test_many_small_jobs(void **state)
{
    (void)state;
    static count_job j;
    for (int r = 0; r < 3000; r++)
        check_once(&j, 2 + r % 3, 1 + r % 40);
}

typedef struct nest_job {
    atomic_long sum;
} nest_job;

static void inner_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    nest_job *j = arg;
    for (int64_t i = lo; i < hi; i++)
        atomic_fetch_add(&j->sum, (long)i);
}

static void outer_chunk(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    for (int64_t i = lo; i < hi; i++)
        rlx_cpu_parallel(2, 100, inner_chunk, arg); /* the pool is busy: runs here */
}

static void test_nested_loops(void **state)
{
    (void)state;
    nest_job j;
    atomic_init(&j.sum, 0);
    rlx_cpu_parallel(2, 50, outer_chunk, &j);
    assert_int_equal(atomic_load(&j.sum), 50L * 4950);
}

static void *caller_thread(void *arg)
{
    (void)arg;
    count_job *j = malloc(sizeof *j);
    int ok = 1;
    for (int r = 0; r < 300 && ok; r++) {
        int64_t n = 1 + (r * 37) % 500;
        memset(j, 0, sizeof *j);
        j->threads = 3;
        rlx_cpu_parallel(3, n, count_chunk, j);
        ok = !atomic_load(&j->bad_worker);
        for (int64_t i = 0; i < n && ok; i++)
            ok = atomic_load(&j->hits[i]) == 1;
    }
    free(j);
    return (void *)(intptr_t)ok;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, caller_thread, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *ok;
        pthread_join(th[i], &ok);
        assert_true((intptr_t)ok);
    }
}

/* A chain of elementwise ops, a softmax and a reduction over enough values
 * that every kernel splits its loop, run at 1, 2 and 3 threads. */
static void run_graph(int threads, float *out, int64_t rows, int64_t cols, const float *in)
{
    int64_t dims[2] = {rows, cols};
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, dims);
    rlx_node y = rlx_mul(g, rlx_add(g, x, x), x);
    y = rlx_sub(g, rlx_max(g, y, x), x);
    y = rlx_softmax(g, y, 1);
    rlx_output(g, "y", y);
    rlx_options o;
    rlx_options_init(&o);
    o.threads = threads;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_graph_free(g);
    size_t bytes = (size_t)(rows * cols) * sizeof(float);
    assert_int_equal(rlx_session_set_input(s, "x", in, bytes), RLX_OK);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    assert_int_equal(rlx_session_get_output(s, "y", out, bytes), RLX_OK);
    rlx_session_free(s);
}

static void test_same_bits_any_threads(void **state)
{
    (void)state;
    const int64_t rows = 300, cols = 500;
    size_t n = (size_t)(rows * cols);
    float *in = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    assert_non_null(in);
    assert_non_null(ref);
    assert_non_null(got);
    uint32_t seed = 12345;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        in[i] = (float)(seed >> 8) / (float)(1u << 24) * 4.0f - 2.0f;
    }
    run_graph(1, ref, rows, cols, in);
    for (int threads = 2; threads <= 3; threads++) {
        run_graph(threads, got, rows, cols, in);
        assert_memory_equal(ref, got, n * sizeof(float));
    }
    free(in);
    free(ref);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_index_once),      cmocka_unit_test(test_many_small_jobs),
        cmocka_unit_test(test_nested_loops),          cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_same_bits_any_threads), cmocka_unit_test(test_shares_wake_sleepers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
