/* cpu_dnnl.h - oneDNN for the CPU's kernels (conv_dnnl.c, matmul_dnnl.c):
 * libdnnl.so.2 opened at first use (no link dependency; the build needs
 * only its header, Debian's libdnnl-dev), its entry points, one engine,
 * and each thread's working memory for the primitives' scratchpads.
 *
 * Not under AddressSanitizer: at exit, LeakSanitizer's scan of the threads
 * crashes ("Tracer caught signal 11") once a oneDNN primitive has run in
 * the process; the paths pass ASan and UBSan with detect_leaks=0.  Without
 * the header (or under ASan) RLX_HAVE_DNNL_H stays undefined and the CPU
 * claims nothing of oneDNN's. */
#ifndef RLX_CPU_DNNL_H
#define RLX_CPU_DNNL_H

#if defined(__has_include) && !defined(__SANITIZE_ADDRESS__)
#if __has_include(<oneapi/dnnl/dnnl.h>)
#define RLX_HAVE_DNNL_H 1
#endif
#endif

#ifdef RLX_HAVE_DNNL_H
#include <stdbool.h>
#include <stddef.h>

#include <oneapi/dnnl/dnnl.h>

/* The entry points used, resolved with dlsym. */
#define RLX_DNNL_FUNCS(X)                         \
    X(dnnl_engine_create)                         \
    X(dnnl_stream_create)                         \
    X(dnnl_stream_wait)                           \
    X(dnnl_stream_destroy)                        \
    X(dnnl_memory_desc_init_by_tag)               \
    X(dnnl_memory_desc_init_by_strides)           \
    X(dnnl_memory_desc_get_size)                  \
    X(dnnl_memory_desc_equal)                     \
    X(dnnl_dilated_convolution_forward_desc_init) \
    X(dnnl_matmul_desc_init)                      \
    X(dnnl_post_ops_create)                       \
    X(dnnl_post_ops_append_eltwise)               \
    X(dnnl_post_ops_append_sum)                   \
    X(dnnl_post_ops_destroy)                      \
    X(dnnl_primitive_attr_create)                 \
    X(dnnl_primitive_attr_set_post_ops)           \
    X(dnnl_primitive_attr_set_scratchpad_mode)    \
    X(dnnl_primitive_attr_destroy)                \
    X(dnnl_primitive_desc_create)                 \
    X(dnnl_primitive_desc_query_md)               \
    X(dnnl_primitive_desc_destroy)                \
    X(dnnl_reorder_primitive_desc_create)         \
    X(dnnl_primitive_create)                      \
    X(dnnl_primitive_execute)                     \
    X(dnnl_primitive_destroy)                     \
    X(dnnl_memory_create)                         \
    X(dnnl_memory_set_data_handle)                \
    X(dnnl_memory_destroy)

#define RLX_DNNL_PTR(f) __typeof__(f) *f;
typedef struct rlx_dnnl_api {
    RLX_DNNL_FUNCS(RLX_DNNL_PTR)
} rlx_dnnl_api;
#undef RLX_DNNL_PTR

/* The entry points and the engine; valid once rlx_dnnl_available() is true. */
extern rlx_dnnl_api rlx_dnnl;
extern dnnl_engine_t rlx_dnnl_engine;

/* Opens the library once per process; false where it is not there. */
bool rlx_dnnl_available(void);

/* The primitive descriptor of an op descriptor (a convolution's, a
 * matmul's) for the calling thread's OpenMP team, its scratchpad the
 * caller's, with post-ops where asked: with `sum`, the output's starting
 * value added; then act's eltwise (RLX_ACT_NONE: none).  NULL where oneDNN
 * has no such primitive (or no such activation). */
dnnl_primitive_desc_t rlx_dnnl_pd(const_dnnl_op_desc_t desc, bool sum, int act);

/* A reorder primitive from one memory's layout to another's, or NULL. */
dnnl_primitive_t rlx_dnnl_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to);

/* Bytes rounded up to 64, and a 64-byte aligned buffer of at least that
 * (free with free). */
size_t rlx_dnnl_round64(size_t bytes);
void *rlx_dnnl_alloc64(size_t bytes);

/* The calling thread's working memory, at least `bytes`, shared by every
 * primitive the thread runs (grown to the largest asked, freed with the
 * thread); NULL if out of memory. */
char *rlx_dnnl_thread_work(size_t bytes);

#endif /* RLX_HAVE_DNNL_H */
#endif
