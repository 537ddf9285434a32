/* test_no_alloc.c - a run does no heap allocation: malloc and friends are
 * counted around rlx_session_run (after a warm-up run, which lets OpenMP and
 * BLAS set up their threads).  With the GEMMs on OpenBLAS, RLX's whole run
 * path; oneDNN's sgemm (the default where it is installed) allocates its
 * packing buffers inside each call, one allocation per GEMM, which is
 * printed but not RLX's to remove. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "models/workloads.h"
#include "rlx.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#ifndef UNDER_ASAN
/* glibc's own entry points, so the wrappers below can count and forward. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static volatile int counting;
static volatile long allocations;

void *malloc(size_t n)
{
    if (counting)
        __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t s)
{
    if (counting)
        __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_calloc(n, s);
}
void *realloc(void *p, size_t n)
{
    if (counting)
        __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_realloc(p, n);
}
int posix_memalign(void **p, size_t a, size_t n)
{
    if (counting)
        __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    *p = __libc_memalign(a, n);
    return *p ? 0 : 12;
}
void *aligned_alloc(size_t a, size_t n)
{
    if (counting)
        __atomic_add_fetch(&allocations, 1, __ATOMIC_RELAXED);
    return __libc_memalign(a, n);
}
void free(void *p) { __libc_free(p); }

static long count_run_with(rlx_graph *g, int threads, const char *gemm)
{
    setenv("RLX_CPU_GEMM", gemm, 1); /* the one setting read from the environment here */
    rlx_options o;
    rlx_options_init(&o);
    o.threads = threads;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(rlx_workload_init_params(s, 3), RLX_OK);
    for (int i = 0; i < rlx_session_count(s, 0); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 0, i, &info);
        unsigned char *buf = calloc(1, info.bytes + 1);
        size_t n = info.bytes / rlx_dtype_size(info.dtype);
        for (size_t k = 0; k < n; k++) {
            if (info.dtype == RLX_I64)
                ((int64_t *)buf)[k] = (int64_t)(k * 7919 % 30000); /* token ids */
            else
                ((float *)buf)[k] = (float)(k % 13) * 0.1f - 0.6f;
        }
        assert_int_equal(rlx_session_set_input(s, info.name, buf, info.bytes), RLX_OK);
        free(buf);
    }
    assert_int_equal(rlx_session_run(s), RLX_OK); /* warm-up */
    allocations = 0;
    counting = 1;
    rlx_status st = rlx_session_run(s);
    st = st == RLX_OK ? rlx_session_run(s) : st;
    counting = 0;
    assert_int_equal(st, RLX_OK);
    print_message("%d threads, GEMMs on %s: %ld allocations in two runs\n", threads, gemm, allocations);
    rlx_session_free(s);
    unsetenv("RLX_CPU_GEMM");
    return allocations;
}

static void count_run(rlx_graph *g, int threads)
{
    assert_int_equal(count_run_with(g, threads, "openblas"), 0);
    count_run_with(g, threads, "onednn");
}

static void test_encoder_runs_without_allocating(void **state)
{
    (void)state;
    rlx_encoder_config c = rlx_encoder_minilm(1, 32);
    rlx_graph *g = rlx_workload_encoder(&c);
    assert_non_null(g);
    count_run(g, 1);
    count_run(g, 2);
    rlx_graph_free(g);
}

static void test_mlp_runs_without_allocating(void **state)
{
    (void)state;
    rlx_graph *g = rlx_workload_mlp(8, RLX_F32);
    assert_non_null(g);
    count_run(g, 1);
    count_run(g, 2);
    rlx_graph_free(g);
}
#endif

int main(void)
{
#ifdef UNDER_ASAN
    printf("skipped: AddressSanitizer replaces the allocator, so allocations cannot be counted here\n");
    return 77;
#else
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_runs_without_allocating),
        cmocka_unit_test(test_encoder_runs_without_allocating),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
