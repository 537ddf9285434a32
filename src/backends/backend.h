/* backend.h - what a backend gives the compiler: a few numbers (alignment,
 * largest buffer), memory calls, a kernel claim per op, thunk preparation
 * and schedule execution.  Backends are siblings: none includes another. */
#ifndef RLX_BACKEND_H
#define RLX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

typedef struct rlx_run_ctx {
    uint64_t seed;      /* compile seed (random ops) */
    uint64_t run_index; /* 0 for the first run of a session, then 1, 2, ... */
    int threads;
} rlx_run_ctx;

struct rlx_thunk;
typedef rlx_status (*rlx_kernel_fn)(const struct rlx_thunk *t, const rlx_run_ctx *ctx);

/* One scheduled node with every pointer resolved at compile time. */
typedef struct rlx_thunk {
    rlx_node id;
    const rlx_node_data *node;                  /* in the compiled graph */
    const rlx_node_data *in_node[RLX_MAX_INPUTS];
    void *out;                                  /* device address */
    const void *in[RLX_MAX_INPUTS];
    void *scratch;                              /* NULL if the op needs none */
    size_t scratch_bytes;
    rlx_kernel_fn fn;                           /* NULL: no-op (leaf or view) */
    void *state;                                /* backend's prepared state */
    void *keep;                                 /* the node's keep region (see keep_bytes); NULL if none */
    size_t keep_bytes;
    /* Bit k: input k is fixed for a run, written by no kernel of it (a
     * param, a constant, a value the backend caches across runs), so a
     * kernel may read it before the kernel ahead has finished. */
    uint32_t in_fixed;
} rlx_thunk;

typedef struct rlx_schedule {
    const struct rlx_graph *graph; /* the compiled graph; thunk i computes its node i */
    rlx_thunk *thunks;
    int n_thunks;
    int n_noop;
    void *backend_state; /* e.g. a captured CUDA graph */
} rlx_schedule;

typedef struct rlx_backend {
    const char *name;
    rlx_device device;
    /* RLX_OK if the device can be used here; else a message saying why not. */
    rlx_status (*available)(void);
    size_t alignment;
    size_t (*max_buffer)(void);
    /* The claim: can this node run natively (op and dtypes)?  Derived from
     * the backend's kernel table; the optimizer consults it. */
    bool (*supports)(const rlx_graph *g, rlx_node id);
    /* Whether elementwise kernels accept out == an input of the same shape. */
    bool inplace_elementwise;
    /* Workspace a node needs while it runs (0 for most). */
    size_t (*scratch_bytes)(const rlx_graph *g, rlx_node id, int threads);
    rlx_status (*alloc)(size_t bytes, void **ptr);
    void (*free)(void *ptr);
    rlx_status (*upload)(void *dst, const void *src, size_t bytes);   /* host -> device */
    rlx_status (*download)(void *dst, const void *src, size_t bytes); /* device -> host */
    /* Fills t->fn and t->state for a node (pointers already resolved). */
    rlx_status (*prepare)(const rlx_graph *g, rlx_thunk *t);
    void (*release)(rlx_thunk *t);
    /* Optional: record the schedule for replay (graph capture). */
    rlx_status (*finalize)(rlx_schedule *s, const rlx_run_ctx *ctx);
    void (*release_schedule)(rlx_schedule *s);
    rlx_status (*run)(rlx_schedule *s, const rlx_run_ctx *ctx);
    /* Optional: arena bytes each node keeps across runs (what the backend
     * derives from params once, such as packed weights or a cached cast),
     * written to bytes[0..n_nodes) (0 = none); one region per node after
     * the scratch.  NULL = none anywhere. */
    void (*keep_bytes)(const rlx_graph *g, size_t *bytes);
    /* Optional: device -> device copy between device pointers (the arena and
     * memory the caller lent), finished when it returns; NULL where tensors
     * are host memory (rlx_session_set_input_device: unsupported). */
    rlx_status (*copy_device)(void *dst, const void *src, size_t bytes);
} rlx_backend;

/* The backends built into this library; NULL if that device's backend was
 * not compiled in. */
const rlx_backend *rlx_backend_for(rlx_device d);
const rlx_backend *rlx_cpu_backend(void);
const rlx_backend *rlx_cuda_backend(void); /* weak: NULL without CUDA */

#endif
