/* cpu_pool.h - the CPU backend's one thread pool for parallel loops.
 *
 * Workers are created once per process, on the first loop that asks for
 * more threads than there are, and live until the process exits.  A loop
 * over [0, n) is cut into chunks (a few per thread); the calling thread
 * works too, and every participant claims chunks from one atomic counter,
 * so a worker the system has descheduled delays only the chunk it holds,
 * never a fixed share of the loop, and a worker that has not woken yet
 * delays nothing.  Idle workers spin briefly, then sleep on a futex.
 *
 * Each index's work must not depend on which participant runs it or on how
 * [0, n) is chunked (results are then the same for any thread count and
 * any schedule); `worker` (0 = the caller, < threads) only picks per-thread
 * scratch.  A loop started while the pool is busy (from inside a chunk, or
 * by another thread's session) runs on its caller alone. */
#ifndef RLX_CPU_POOL_H
#define RLX_CPU_POOL_H

#include <stdint.h>

/* Runs fn(arg, lo, hi, worker) over disjoint [lo, hi) covering [0, n). */
typedef void (*rlx_cpu_chunk_fn)(void *arg, int64_t lo, int64_t hi, int worker);

/* [0, n) over up to `threads` threads (<= 1, or n <= 1: one call on the
 * caller); returns when every chunk is done. */
void rlx_cpu_parallel(int threads, int64_t n, rlx_cpu_chunk_fn fn, void *arg);

/* [0, threads) where each index is one thread's share of a large job (a
 * GEMM's block of C, a conv's slice): sleeping workers are woken at once,
 * not when the caller's pace shows the work is worth it. */
void rlx_cpu_parallel_shares(int threads, rlx_cpu_chunk_fn fn, void *arg);

/* Workers started so far (for tests and reports). */
int rlx_cpu_pool_workers(void);

#endif
