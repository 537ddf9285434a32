/* backend.h - what a backend gives the compiler: a few numbers (alignment,
 * largest buffer), memory calls, a kernel claim per op, thunk preparation
 * and schedule execution.  Backends are siblings: none includes another. */
#ifndef RLX_BACKEND_H
#define RLX_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "ir/ir.h"

/* The backends' settings that are not options of the public API:
 * diagnostics, tuning switches and the user's configuration of the
 * libraries a backend loads.  The runtime fills them once per compile
 * (src/runtime/env.c: from the environment unless rlx_options.ignore_env;
 * docs/ENVIRONMENT_VARIABLES.md lists each variable) and hands them to the
 * backend: to `configure` before the optimizer asks its claim, and in every
 * run context.  A backend never reads the environment itself. */
enum { RLX_CPU_GEMM_AUTO = 0, RLX_CPU_GEMM_ONEDNN, RLX_CPU_GEMM_OPENBLAS, RLX_CPU_GEMM_BUILTIN };
enum { RLX_CPU_WINOGRAD_NONE = 0, RLX_CPU_WINOGRAD_ALL = 1, RLX_CPU_WINOGRAD_SMALL = 2 };
enum { RLX_CUDA_F32_GEMM_SGEMM = 0, RLX_CUDA_F32_GEMM_TUNED = 1, RLX_CUDA_F32_GEMM_SPLIT = 2 };
enum { RLX_CUDA_MM_AUTO = 0, RLX_CUDA_MM_CUBLASLT, RLX_CUDA_MM_CUDNN, RLX_CUDA_MM_WGMMA };
enum { RLX_CUDA_CONV_AUTO = 0, RLX_CUDA_CONV_GEMM, RLX_CUDA_CONV_GRAPH, RLX_CUDA_CONV_LEGACY };
typedef struct rlx_backend_settings {
    int verbose;             /* RLX_VERBOSE level (rlx_options.verbose): 1 report choices, 2 also each timing */
    int no_preencode;        /* rlx_options.no_preencode (RLX_DISABLE_CUDA_GRAPH) */
    size_t max_buffer_bytes; /* RLX_MAX_BUFFER_BYTES: plan as if the largest buffer were this; 0 = the device's */
    /* CPU */
    int no_blas;       /* RLX_NO_BLAS: GEMM by the built-in loop */
    int cpu_gemm;      /* RLX_CPU_GEMM: RLX_CPU_GEMM_* (auto: oneDNN where installed, else OpenBLAS) */
    int profile;       /* RLX_PROFILE: time per op kind per run */
    int cpu_no_avx512; /* RLX_CPU_NO_AVX512: kernels of our own keep to AVX2 where the processor has AVX-512 */
    int cpu_winograd; /* RLX_CPU_WINOGRAD: RLX_CPU_WINOGRAD_* (default: small-weight 3 x 3 convs by oneDNN's Winograd) */
    /* CUDA */
    int cuda_profile;        /* RLX_CUDA_PROFILE */
    long cuda_profile_run;   /* RLX_CUDA_PROFILE_RUN: the run bracketed for an external profiler; -1 none */
    int cuda_no_prologue;    /* RLX_CUDA_NO_PROLOGUE */
    int cuda_no_pdl;         /* RLX_CUDA_NO_PDL */
    int cuda_no_cudnn;       /* RLX_CUDA_NO_CUDNN (cuDNN is loaded once per process) */
    int cuda_no_cudnn_graph; /* RLX_CUDA_NO_CUDNN_GRAPH */
    int cuda_tf32;           /* RLX_CUDA_TF32 */
    int cuda_f32_gemm;       /* RLX_CUDA_F32_GEMM: RLX_CUDA_F32_GEMM_* */
    int cuda_autotune;       /* RLX_CUDA_AUTOTUNE (on by default) */
    int cuda_mm_path;        /* RLX_CUDA_MM_PATH: RLX_CUDA_MM_* */
    int cuda_wgmma;          /* RLX_CUDA_WGMMA */
    int cuda_wgmma_bn, cuda_wgmma_split, cuda_wgmma_stages; /* RLX_CUDA_WGMMA_BN/SPLIT/STAGES; -1 any */
    int cuda_ew_lin;                                        /* RLX_CUDA_EW_LIN (on by default) */
    int cuda_no_attn_block;                                 /* RLX_CUDA_NO_ATTN_BLOCK */
    int cuda_no_tc_attention;                               /* RLX_CUDA_NO_TC_ATTENTION */
    int cuda_decode_attention; /* RLX_CUDA_DECODE_ATTENTION: one-row attention by attn_decode (on by
                                 * default: faster at batch 1, 8 and 32) */
    int cuda_attn_split;       /* RLX_CUDA_ATTN_SPLIT; 0 automatic */
    int cuda_attn_warps;       /* RLX_CUDA_ATTN_WARPS: 2, 4 or 8; 0 automatic */
    int cuda_attn_lanes;       /* RLX_CUDA_ATTN_LANES: 4, 8 or 16; 0 automatic */
    int cuda_nhwc;             /* RLX_CUDA_NHWC (on by default) */
    int cuda_conv_path;        /* RLX_CUDA_CONV_PATH: RLX_CUDA_CONV_* */
    int cuda_conv_legacy;      /* RLX_CUDA_CONV_LEGACY (on by default) */
    int cuda_conv_rtc;         /* RLX_CUDA_CONV_RTC */
} rlx_backend_settings;

/* The defaults: what a compile with ignore_env gets. */
static inline void rlx_backend_settings_init(rlx_backend_settings *s)
{
    memset(s, 0, sizeof *s);
    s->cuda_profile_run = -1;
    s->cpu_winograd = RLX_CPU_WINOGRAD_SMALL;
    s->cuda_f32_gemm = RLX_CUDA_F32_GEMM_TUNED;
    s->cuda_autotune = 1;
    s->cuda_wgmma_bn = s->cuda_wgmma_split = s->cuda_wgmma_stages = -1;
    s->cuda_ew_lin = 1;
    s->cuda_decode_attention = 1;
    s->cuda_nhwc = 1;
    s->cuda_conv_legacy = 1;
}

typedef struct rlx_run_ctx {
    uint64_t seed;      /* compile seed (random ops) */
    uint64_t run_index; /* 0 for the first run of a session, then 1, 2, ... */
    int threads;
    const rlx_backend_settings *settings; /* the session's; NULL: the defaults */
} rlx_run_ctx;

struct rlx_thunk;
typedef rlx_status (*rlx_kernel_fn)(const struct rlx_thunk *t, const rlx_run_ctx *ctx);

/* One scheduled node with every pointer resolved at compile time. */
typedef struct rlx_thunk {
    rlx_node id;
    const rlx_node_data *node; /* in the compiled graph */
    const rlx_node_data *in_node[RLX_MAX_INPUTS];
    void *out; /* device address */
    const void *in[RLX_MAX_INPUTS];
    void *scratch; /* NULL if the op needs none */
    size_t scratch_bytes;
    rlx_kernel_fn fn; /* NULL: no-op (leaf or view) */
    void *state;      /* backend's prepared state */
    void *keep;       /* the node's keep region (see keep_bytes); NULL if none */
    size_t keep_bytes;
    /* Bit k: input k is fixed for a run, written by no kernel of it (a
     * param, a constant, a value the backend caches across runs), so a
     * kernel may read it before the kernel ahead has finished. */
    uint32_t in_fixed;
    /* Set: the result is needed only when the one-byte bool at guard (a
     * select's condition, computed by an earlier thunk) equals guard_when
     * (src/runtime/branch.h); the backend may skip the thunk otherwise, or
     * run it anyway. */
    const uint8_t *guard;
    uint8_t guard_when;
} rlx_thunk;

typedef struct rlx_schedule {
    const struct rlx_graph *graph; /* the compiled graph; thunk i computes its node i */
    rlx_thunk *thunks;
    int n_thunks;
    int n_noop;
    int n_guarded;       /* thunks with a guard */
    void *backend_state; /* e.g. a captured CUDA graph */
} rlx_schedule;

/* A backend instance: the table of one device's calls, with the state of
 * that device (the CUDA backend makes one per GPU, cuda:N, on first use;
 * the CPU has one).  Calls that touch the device take the instance first;
 * the claim and the size queries depend only on the graph and the
 * settings configure handed over, and are asked on the compiling thread
 * after configure. */
typedef struct rlx_backend rlx_backend;
struct rlx_backend {
    const char *name;
    rlx_device device;
    int index;  /* the device's ordinal among those of its kind */
    void *self; /* the instance's own state */
    size_t alignment;
    size_t (*max_buffer)(const rlx_backend *b);
    /* The claim: can this node run natively (op and dtypes)?  Derived from
     * the backend's kernel table; the optimizer consults it. */
    bool (*supports)(const rlx_graph *g, rlx_node id);
    /* Whether elementwise kernels accept out == an input of the same shape,
     * and accumulating ones out == the input they start from
     * (rlx_node_accumulate_input: a conv's residual) wherever they claim. */
    bool inplace_elementwise;
    /* Workspace a node needs while it runs (0 for most). */
    size_t (*scratch_bytes)(const rlx_graph *g, rlx_node id, int threads);
    rlx_status (*alloc)(const rlx_backend *b, size_t bytes, void **ptr);
    void (*free)(const rlx_backend *b, void *ptr);
    rlx_status (*upload)(const rlx_backend *b, void *dst, const void *src, size_t bytes);   /* host -> device */
    rlx_status (*download)(const rlx_backend *b, void *dst, const void *src, size_t bytes); /* device -> host */
    /* Fills t->fn and t->state for a node (pointers already resolved). */
    rlx_status (*prepare)(const rlx_backend *b, const rlx_graph *g, rlx_thunk *t);
    void (*release)(const rlx_backend *b, rlx_thunk *t);
    /* Optional: record the schedule for replay (graph capture). */
    rlx_status (*finalize)(const rlx_backend *b, rlx_schedule *s, const rlx_run_ctx *ctx);
    void (*release_schedule)(const rlx_backend *b, rlx_schedule *s);
    rlx_status (*run)(const rlx_backend *b, rlx_schedule *s, const rlx_run_ctx *ctx);
    /* Optional: arena bytes each node keeps across runs (what the backend
     * derives from params once, such as packed weights or a cached cast),
     * written to bytes[0..n_nodes) (0 = none); one region per node after
     * the scratch.  NULL = none anywhere. */
    void (*keep_bytes)(const rlx_graph *g, size_t *bytes);
    /* Optional: device -> device copy between device pointers (the arena and
     * memory the caller lent, on this instance's device), finished when it
     * returns; NULL where tensors are host memory
     * (rlx_session_set_input_device: unsupported). */
    rlx_status (*copy_device)(const rlx_backend *b, void *dst, const void *src, size_t bytes);
    /* Optional: the session's settings, at the start of each compile
     * (before the claim is asked); a backend that needs them outside a run
     * context keeps a copy for the compiling thread. */
    void (*configure)(const rlx_backend *b, const rlx_backend_settings *s);
};

/* The instance serving device `index` of kind d, made and checked on first
 * use; an error naming the device and why it cannot be used otherwise (no
 * backend for it in this build, no such device, the driver's failure). */
rlx_status rlx_backend_get(rlx_device d, int index, const rlx_backend **out);
/* Devices of kind d this process can use (0 where none or no backend). */
int rlx_backend_device_count(rlx_device d);
const rlx_backend *rlx_cpu_backend(void);
/* The CUDA backend's instance for device `index` and its device count
 * (weak: absent without CUDA). */
rlx_status rlx_cuda_backend(int index, const rlx_backend **out);
int rlx_cuda_device_count(void);
/* The CPU backend's GEMM library under these settings (rlx_cpu_gemm_info). */
const char *rlx_cpu_gemm_describe(const rlx_backend_settings *s);

#endif
