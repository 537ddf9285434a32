/* cpu_pool.c - the CPU backend's persistent thread pool (cpu_pool.h).
 *
 * One job at a time, owned by the thread that set `busy`.  The job's
 * chunk counter packs the participant count, the chunk count and the next
 * chunk into one 64-bit word, so a claim is one compare-and-swap that
 * fails for anyone who read an older job: a worker that slept through a
 * job and wakes during the next simply joins the next.  A job's fields
 * (fn, arg, sizes) are written before its counter is published and
 * rewritten only after every chunk is done, so whoever holds a chunk reads
 * them safely.  Waits spin for a short while (a loop's next job usually
 * comes within microseconds) and then sleep on a futex, so that idle
 * workers leave a loaded machine's cores to others. */
#define _GNU_SOURCE
#include "backends/cpu/cpu_pool.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum { CHUNKS_PER_THREAD = 8, MAX_WORKERS = 1023 };
/* How long a waiting thread spins before it sleeps. */
#define SPIN_NS 50000
/* The least work left, in nanoseconds at the caller's pace, worth waking a
 * sleeping worker for (caller_work). */
#define WAKE_WORTH_NS 100000

#define IDX_BITS 24
#define IDX_MASK ((UINT64_C(1) << IDX_BITS) - 1)

static atomic_uint busy;           /* 1 while a job owns the pool */
static atomic_uint gen;            /* bumped per job: the workers' futex word */
static atomic_uint sleepers;       /* workers asleep (or about to be) on gen */
static _Atomic uint64_t counter;   /* participants << 48 | chunks << 24 | next chunk */
static atomic_uint done;           /* chunks finished: the caller's futex word */
static atomic_uint caller_waiting; /* the caller sleeps (or is about to) on done */
static atomic_int n_workers;

/* The job; see the file comment for why plain fields are safe. */
static rlx_cpu_chunk_fn job_fn;
static void *job_arg;
static int64_t job_n, job_chunks;

static void futex_wait(atomic_uint *word, unsigned expected)
{
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
#else
    (void)word, (void)expected;
    sched_yield();
#endif
}

static void futex_wake(atomic_uint *word, int count)
{
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)word, (void)count;
#endif
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Spins until *word != value or SPIN_NS pass; returns whether it changed. */
static bool spin_until_change(atomic_uint *word, unsigned value)
{
    int64_t start = 0;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(word, memory_order_acquire) != value)
            return true;
        cpu_relax();
        if ((i & 63) == 0) {
            int64_t t = now_ns();
            if (!start)
                start = t;
            else if (t - start > SPIN_NS)
                return false;
        }
    }
}

static void chunk_range(int64_t n, int64_t chunks, int64_t k, int64_t *lo, int64_t *hi)
{
    int64_t base = n / chunks, extra = n % chunks;
    *lo = k * base + (k < extra ? k : extra);
    *hi = *lo + base + (k < extra);
}

/* Claims the next chunk of the current job for participant id. */
static bool claim(int id, int64_t *k)
{
    uint64_t v = atomic_load_explicit(&counter, memory_order_acquire);
    for (;;) {
        uint64_t next = v & IDX_MASK, chunks = (v >> IDX_BITS) & IDX_MASK, parts = v >> (2 * IDX_BITS);
        if (next >= chunks || (uint64_t)id >= parts)
            return false;
        if (atomic_compare_exchange_weak_explicit(&counter, &v, v + 1, memory_order_acq_rel, memory_order_acquire)) {
            *k = (int64_t)next;
            return true;
        }
    }
}

/* Runs chunk k of the current job, claimed by participant id. */
static void run_chunk(int id, int64_t k)
{
    rlx_cpu_chunk_fn fn = job_fn;
    void *arg = job_arg;
    int64_t n = job_n, chunks = job_chunks, lo, hi;
    chunk_range(n, chunks, k, &lo, &hi);
    fn(arg, lo, hi, id);
    /* the job may be replaced as soon as done reaches chunks */
    unsigned d = atomic_fetch_add_explicit(&done, 1, memory_order_seq_cst) + 1;
    if (d == (unsigned)chunks && atomic_load_explicit(&caller_waiting, memory_order_seq_cst))
        futex_wake(&done, 1);
}

/* A worker's share: chunks of the current job until none is left. */
static void work(int id)
{
    int64_t k;
    while (claim(id, &k))
        run_chunk(id, k);
}

/* The caller's share.  Workers still spinning join at once; sleeping ones
 * are woken only when the chunks left, at the pace of the caller's so far,
 * would take longer than WAKE_WORTH_NS: waking a sleeping thread cost the
 * caller tens of microseconds on the virtual machines measured (a system
 * call and an interrupt to another processor), more than a small loop's
 * whole work.  A job of shares (wake_now) wakes them before its first
 * chunk: with one chunk each, the pace is known only when the caller's
 * share is done, and by then it would take the next share itself. */
static void caller_work(int64_t chunks, bool wake_now)
{
    int64_t k, start = now_ns(), mine = 0;
    bool woken = false;
    if (wake_now && atomic_load_explicit(&sleepers, memory_order_seq_cst)) {
        futex_wake(&gen, INT_MAX);
        woken = true;
    }
    while (claim(0, &k)) {
        run_chunk(0, k);
        mine++;
        if (woken || !atomic_load_explicit(&sleepers, memory_order_seq_cst))
            continue;
        int64_t next = (int64_t)(atomic_load_explicit(&counter, memory_order_relaxed) & IDX_MASK);
        if (next < chunks && (now_ns() - start) / mine * (chunks - next) > WAKE_WORTH_NS) {
            futex_wake(&gen, INT_MAX);
            woken = true;
        }
    }
}

static void *worker_main(void *p)
{
    int id = (int)(intptr_t)p;
    unsigned seen = atomic_load_explicit(&gen, memory_order_acquire);
    for (;;) {
        work(id);
        if (!spin_until_change(&gen, seen)) {
            atomic_fetch_add_explicit(&sleepers, 1, memory_order_seq_cst);
            while (atomic_load_explicit(&gen, memory_order_seq_cst) == seen)
                futex_wait(&gen, seen);
            atomic_fetch_sub_explicit(&sleepers, 1, memory_order_seq_cst);
        }
        seen = atomic_load_explicit(&gen, memory_order_acquire);
    }
    return NULL;
}

/* Starts workers up to `want` (only the pool's owner calls this); a failed
 * start leaves the pool smaller. */
static int grow(int want)
{
    int have = atomic_load_explicit(&n_workers, memory_order_relaxed);
    if (want > MAX_WORKERS)
        want = MAX_WORKERS;
    while (have < want) {
        pthread_t th;
        pthread_attr_t attr;
        if (pthread_attr_init(&attr))
            break;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, worker_main, (void *)(intptr_t)(have + 1));
        pthread_attr_destroy(&attr);
        if (rc)
            break;
        atomic_store_explicit(&n_workers, ++have, memory_order_relaxed);
    }
    return have;
}

static void parallel(int threads, int64_t n, rlx_cpu_chunk_fn fn, void *arg, bool wake_now)
{
    if (n <= 0)
        return;
    if (threads <= 1 || n == 1 || atomic_exchange_explicit(&busy, 1, memory_order_acquire)) {
        fn(arg, 0, n, 0);
        return;
    }
    int parts = grow(threads - 1) + 1;
    if (parts > threads)
        parts = threads;
    int64_t chunks = (int64_t)parts * CHUNKS_PER_THREAD;
    if (chunks > n)
        chunks = n;
    if (parts <= 1) {
        atomic_store_explicit(&busy, 0, memory_order_release);
        fn(arg, 0, n, 0);
        return;
    }
    job_fn = fn;
    job_arg = arg;
    job_n = n;
    job_chunks = chunks;
    atomic_store_explicit(&done, 0, memory_order_relaxed);
    atomic_store_explicit(&counter, (uint64_t)parts << (2 * IDX_BITS) | (uint64_t)chunks << IDX_BITS,
                          memory_order_release);
    atomic_fetch_add_explicit(&gen, 1, memory_order_seq_cst);
    caller_work(chunks, wake_now);
    /* the caller has no chunk left: wait for those others hold */
    unsigned want = (unsigned)chunks, d;
    int64_t start = 0;
    for (unsigned i = 1; (d = atomic_load_explicit(&done, memory_order_acquire)) != want; i++) {
        cpu_relax();
        if ((i & 63) != 0)
            continue;
        int64_t t = now_ns();
        if (!start) {
            start = t;
            continue;
        }
        if (t - start < SPIN_NS)
            continue;
        atomic_store_explicit(&caller_waiting, 1, memory_order_seq_cst);
        while ((d = atomic_load_explicit(&done, memory_order_seq_cst)) != want)
            futex_wait(&done, d);
        atomic_store_explicit(&caller_waiting, 0, memory_order_relaxed);
        break;
    }
    atomic_store_explicit(&busy, 0, memory_order_release);
}

void rlx_cpu_parallel(int threads, int64_t n, rlx_cpu_chunk_fn fn, void *arg) { parallel(threads, n, fn, arg, false); }

void rlx_cpu_parallel_shares(int threads, rlx_cpu_chunk_fn fn, void *arg) { parallel(threads, threads, fn, arg, true); }

int rlx_cpu_pool_workers(void) { return atomic_load_explicit(&n_workers, memory_order_relaxed); }
