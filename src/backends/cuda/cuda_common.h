/* cuda_common.h - shared pieces of the CUDA backend (CUDA C++, nvcc only).
 *
 * Every kernel family (one .cu file) registers entries into the backend's
 * table indexed by op; the claim (supports) is derived from that table and
 * each entry's dtype check.  A kernel entry launches its work on the
 * backend's one stream and never synchronizes, so the whole schedule can be
 * captured into a CUDA Graph. */
#ifndef RLX_CUDA_COMMON_H
#define RLX_CUDA_COMMON_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <utility>

extern "C" {
#include "backends/backend.h"
#include "core/error.h" /* host allocations through rlx_malloc/rlx_calloc, as the rest of the library */
}
#include "ir/op_math.h" /* the elementwise math (host and device), shared with the CPU backend */

#define CU_MAX_DIMS RLX_MAX_DIMS

typedef struct cu_kernel {
    rlx_kernel_fn fn;
    /* Workspace in bytes (from the arena's scratch tail); NULL = none. */
    size_t (*scratch)(const rlx_graph *g, const rlx_node_data *n);
    /* Dtype/shape check for the claim; NULL = any float dtype (f32/f16/bf16). */
    bool (*ok)(const rlx_graph *g, const rlx_node_data *n);
    /* Optional: prepared state (t->state) and its release. */
    rlx_status (*prepare)(const rlx_graph *g, rlx_thunk *t);
    void (*release)(rlx_thunk *t);
    /* Optional: copies param inputs into a packed form the kernel reads
     * instead (the attention block's q/k/v weights side by side), in
     * memory of the thunk's state; pack_inputs: the mask of input slots it
     * reads.  The backend runs it before the kernel whenever those inputs
     * may have changed: in the prologue (after an upload into a param they
     * come from) when they are params or prologue outputs, otherwise on
     * every launch. */
    rlx_status (*pack)(const rlx_thunk *t) = nullptr;
    uint32_t (*pack_inputs)(const rlx_thunk *t) = nullptr;
    /* Optional: bytes the kernel keeps across runs (what pack fills), at
     * the start of the thunk's keep region (t->keep) in the arena. */
    size_t (*keep)(const rlx_graph *g, const rlx_node_data *n) = nullptr;
} cu_kernel;

#define CU_TABLE_SIZE 256

extern "C" {
void rlx_cuda_register_elementwise(cu_kernel *tab);
void rlx_cuda_register_reduce(cu_kernel *tab);
void rlx_cuda_register_shape(cu_kernel *tab);
void rlx_cuda_register_matmul(cu_kernel *tab);
void rlx_cuda_register_conv(cu_kernel *tab);
void rlx_cuda_register_attention(cu_kernel *tab);
void rlx_cuda_register_fused(cu_kernel *tab);
void rlx_cuda_register_train(cu_kernel *tab);
void rlx_cuda_register_quant(cu_kernel *tab);
void rlx_cuda_register_proj(cu_kernel *tab);
}

/* Copies the run index (read by random kernels) to the device, on the
 * stream, before each run; src must be pinned. */
cudaError_t rlx_cu_set_run_index(const unsigned long long *src);

/* A kernel that meets bad data it cannot report through its output (an
 * index out of range) records the first such fault here: a word of mapped
 * pinned memory the device writes and the host reads after each run, which
 * then fails with a message naming the node.  rlx_cu_fault is the device
 * view; NULL until the device is initialised. */
typedef struct cu_fault {
    int code; /* 0 none, CU_FAULT_INDEX */
    int node;
    long long value, bound;
} cu_fault;
enum { CU_FAULT_INDEX = 1 };

/* Shape-keyed choices a compile-time tuner made (which GEMM plan won),
 * so sessions of the same shapes on the device skip the timing. */
typedef struct cu_memo {
    struct {
        int64_t key[10];
        int val[4];
    } e[64];
    int n;
    pthread_mutex_t lock;
} cu_memo;
bool rlx_cu_memo_find(cu_memo *m, const int64_t *key, int *val);
void rlx_cu_memo_add(cu_memo *m, const int64_t *key, const int *val);

#define CU_MAX_DEVICES 32
#define CU_PROF_OPS 256 /* = CU_TABLE_SIZE */

/* One GPU as the backend drives it: an instance per device ordinal
 * (cuda:N), made on first use by rlx_cuda_backend(N) and kept for the
 * process, owning everything that is per device: the stream, the copies'
 * pinned staging, the fault word, the library handles, the tuners' memos
 * and the prologues to refresh after an upload.  Sessions on different
 * devices share none of it. */
typedef struct cu_device {
    int index;
    cudaStream_t stream; /* all work, copies and captures of the device */
    int major, minor, sms;
    bool pdl_hw; /* can launch dependent grids (sm_90+) */
    bool wgmma;  /* sm_90a machine code in the build and an sm_90 device */
    size_t total_mem;
    pthread_mutex_t lock; /* runs, copies and the registry below */
    void *staging;        /* pinned host staging for uploads and downloads */
    size_t staging_bytes;
    unsigned long long *pinned_run_index; /* the run index, carried to the device */
    cu_fault *host_fault, *fault;         /* the fault word: host view, device view */
    struct cu_graph_state *registry;      /* every captured schedule with a prologue */
    void *gemm_lt;                        /* cuBLASLt handle (gemm.cu), made on first use */
    void *dnn;                            /* cuDNN handle (dnn.cu), made on first use */
    pthread_mutex_t handles_lock;         /* making those two */
    cu_memo mm_dnn, mm_wgmma;             /* the matmul tuners' choices (k_matmul.cu) */
    struct cu_rope_table *rope_tables;    /* RoPE angle tables shared by rope nodes (k_shape.cu; handles_lock) */
    /* RLX_CUDA_PROFILE: device ms per op kind and per thunk of one schedule */
    bool profiled;
    double prof_ms[CU_PROF_OPS];
    long prof_n[CU_PROF_OPS];
    double *prof_thunk_ms;
    const struct rlx_schedule *prof_sched;
} cu_device;

/* The device the calling thread is working on: set at every entry into
 * the backend (and by configure, for the claim that follows), with that
 * device made CUDA's current one for the call.  Kernels, tuners and
 * libraries reach the device's stream and state through it. */
extern thread_local cu_device *rlx_cu_dev;
#define rlx_cu_stream (rlx_cu_dev->stream)
#define rlx_cu_fault (rlx_cu_dev->fault)
/* Whether a kernel's one-time setting (cudaFuncSetAttribute, which CUDA
 * keeps per device) is still to be made on the current device: claims the
 * device's bit in *done and says whether it was clear. */
bool rlx_cu_first_on_device(unsigned *done);

#ifdef __CUDACC__
__device__ __forceinline__ void cu_report_index(cu_fault *f, int node, long long value, long long bound)
{
    if (f && atomicCAS(&f->code, 0, CU_FAULT_INDEX) == 0) {
        f->node = node;
        f->value = value;
        f->bound = bound;
    }
}
#endif

/* Device time (ms) of one call of `launch`, measured as `reps` calls
 * captured into a CUDA graph and replayed between events (after one
 * warm-up call); 1e30 when anything fails.  For compile-time choices and
 * the profiler: kernels shorter than a host launch would otherwise be
 * timed by the host. */
float rlx_cu_time_captured(bool (*launch)(void *), void *arg, int reps);

/* Turns a CUDA error into a status naming the node. */
rlx_status rlx_cu_error(const rlx_thunk *t, cudaError_t e, const char *what);
rlx_status rlx_cu_fail(const rlx_thunk *t, rlx_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Checks the last launch. */
static inline rlx_status rlx_cu_check(const rlx_thunk *t, const char *what)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? RLX_OK : rlx_cu_error(t, e, what);
}

static inline bool cu_is_f(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16; }
bool rlx_cu_float_ok(const rlx_graph *g, const rlx_node_data *n); /* node and every input float */

static inline size_t cu_round256(size_t b) { return (b + 255) / 256 * 256; }

/* The backend settings (backend.h; read by the runtime in env.c, never
 * from the environment here) of the compile or run in progress on this
 * thread: set by the backend's configure at the start of each compile and
 * by each run (to its session's), read by the claim, prepare and the
 * launches.  Per thread, so sessions compiled at once with different
 * settings never see each other's. */
extern thread_local rlx_backend_settings rlx_cu_cfg;

/* The largest power of two (<= 16) dividing an address. */
static inline int64_t cu_ptr_align(const void *p)
{
    int64_t a = 16;
    while (a > 1 && (uintptr_t)p % (uintptr_t)a)
        a /= 2;
    return a;
}

static inline int cu_blocks(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    if (b > (1 << 20))
        b = 1 << 20; /* grid-stride loops cover the rest */
    return b < 1 ? 1 : (int)b;
}

/* ---------------------------------------------------- launching our kernels
 * Programmatic dependent launch (sm_90 and later): each of our kernels is
 * launched so that its blocks may start while the kernel before it drains,
 * and each begins with cu_grid_wait(), which holds every thread until that
 * kernel has finished and its writes are visible, before the kernel reads
 * or writes anything.  The overlap is the launch, the block start-up and
 * whatever a kernel reads before it waits (cu_prefetch_then_wait).
 * Library kernels are launched by their libraries: cuDNN asks for the same
 * overlap where its kernels wait; cuBLASLt's do not wait, so nothing is
 * ever made to overlap into them.  RLX_CUDA_NO_PDL=1 turns it off. */
extern thread_local bool rlx_cu_pdl; /* the device can and the settings let it */

__device__ __forceinline__ void cu_grid_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* The next kernel may start launching now, before this one's wait: its
     * own wait returns only once this kernel has finished, which is after
     * ours returned, so the order holds along the whole chain, and its
     * loads of fixed memory (cu_prefetch_then_wait) overlap ours. */
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* The one exception to "wait first": a kernel may, before it waits, set
 * up its shared memory and read memory no kernel of the run writes (a
 * param, a constant, a value the prologue caches; rlx_thunk.in_fixed says
 * which inputs are), to overlap its loads with the kernel ahead.  before
 * does that, in every thread; then the wait. */
template <typename F> __device__ __forceinline__ void cu_prefetch_then_wait(F &&before)
{
    before();
    cu_grid_wait();
}

/* Starts bringing bytes [lo, hi) of the buffer at base (total bytes long)
 * into the L2 cache without waiting for them (sm_90 and later; elsewhere
 * nothing), in whole 16-byte words inside the buffer: a kernel's weights,
 * asked for before its cu_grid_wait, arrive while the kernel ahead runs. */
__device__ __forceinline__ void cu_prefetch_l2(const void *base, int64_t lo, int64_t hi, int64_t total)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uintptr_t b = (uintptr_t)base, first = (b + 15) & ~(uintptr_t)15,
                    last = (b + (uintptr_t)total) & ~(uintptr_t)15;
    uintptr_t p = (b + (uintptr_t)lo) & ~(uintptr_t)15, e = (b + (uintptr_t)hi + 15) & ~(uintptr_t)15;
    p = p < first ? first : p;
    e = e > last ? last : e;
    for (; p < e; p += 1u << 20) { /* the instruction's size is 32-bit: in pieces of 1 MiB */
        const uint32_t n = (uint32_t)(e - p < (1u << 20) ? e - p : 1u << 20);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
    }
#else
    (void)base;
    (void)lo;
    (void)hi;
    (void)total;
#endif
}

/* The configuration of a launch of ours (at holds its two attributes):
 * the backend's stream, programmatic dependent launch where the settings
 * let it, blocks grouped into clusters of cluster_z along z (blocks of one
 * cluster run at once and share their shared memory; 1: no clusters). */
static inline cudaLaunchConfig_t cu_launch_config(dim3 grid, dim3 block, size_t smem, int cluster_z,
                                                  cudaLaunchAttribute at[2])
{
    at[0] = at[1] = cudaLaunchAttribute{};
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = rlx_cu_pdl;
    at[1].id = cudaLaunchAttributeClusterDimension;
    at[1].val.clusterDim.x = 1;
    at[1].val.clusterDim.y = 1;
    at[1].val.clusterDim.z = (unsigned)cluster_z;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = rlx_cu_stream;
    cfg.attrs = at;
    cfg.numAttrs = cluster_z > 1 ? 2 : 1;
    return cfg;
}

/* Launches kernel so configured; errors surface through cudaGetLastError
 * like those of a <<<>>> launch.  Every kernel launched here must begin
 * with cu_grid_wait() (tests/gpu/lint_kernels.py checks). */
template <typename K, typename... A>
static inline void cu_launch_cluster(K kernel, dim3 grid, dim3 block, size_t smem, int cluster_z, A &&...args)
{
    cudaLaunchAttribute at[2];
    const cudaLaunchConfig_t cfg = cu_launch_config(grid, block, smem, cluster_z, at);
    cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

/* The same without clusters: how most of our kernels are launched. */
template <typename K, typename... A>
static inline void cu_launch(K kernel, dim3 grid, dim3 block, size_t smem, A &&...args)
{
    cu_launch_cluster(kernel, grid, block, smem, 1, std::forward<A>(args)...);
}

/* ---------------------------------------------------------- device helpers */

template <typename T> __device__ __forceinline__ float cu_tof(T v);
template <> __device__ __forceinline__ float cu_tof<float>(float v) { return v; }
template <> __device__ __forceinline__ float cu_tof<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float cu_tof<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T cu_fromf(float v);
template <> __device__ __forceinline__ float cu_fromf<float>(float v) { return v; }
template <> __device__ __forceinline__ __half cu_fromf<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 cu_fromf<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* Any dtype, as double (like the CPU's rlx_load). */
__device__ __forceinline__ double cu_ld(const void *p, int t, int64_t i)
{
    switch (t) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F16: return __half2float(((const __half *)p)[i]);
    case RLX_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case RLX_F64: return ((const double *)p)[i];
    case RLX_I64: return (double)((const long long *)p)[i];
    case RLX_I32: return ((const int *)p)[i];
    case RLX_I8: return ((const signed char *)p)[i];
    case RLX_U8: return ((const unsigned char *)p)[i];
    case RLX_BOOL: return ((const unsigned char *)p)[i] != 0;
    default: return 0;
    }
}

__device__ __forceinline__ int64_t cu_ldi(const void *p, int t, int64_t i)
{
    switch (t) {
    case RLX_I64: return ((const long long *)p)[i];
    case RLX_I32: return ((const int *)p)[i];
    case RLX_I8: return ((const signed char *)p)[i];
    case RLX_U8: return ((const unsigned char *)p)[i];
    case RLX_BOOL: return ((const unsigned char *)p)[i] != 0;
    default: return (int64_t)cu_ld(p, t, i);
    }
}

__device__ __forceinline__ void cu_st(void *p, int t, int64_t i, double v)
{
    switch (t) {
    case RLX_F32: ((float *)p)[i] = (float)v; break;
    case RLX_F16: ((__half *)p)[i] = __float2half_rn((float)v); break;
    case RLX_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    case RLX_F64: ((double *)p)[i] = v; break;
    case RLX_I64: ((long long *)p)[i] = rlx_sat_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case RLX_I32: ((int *)p)[i] = (int)rlx_sat_i64(v, -2147483648.0, 2147483647.0); break;
    case RLX_I8: ((signed char *)p)[i] = (signed char)rlx_sat_i64(v, -128, 127); break;
    case RLX_U8: ((unsigned char *)p)[i] = (unsigned char)rlx_sat_i64(v, 0, 255); break;
    case RLX_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    default: break;
    }
}

__device__ __forceinline__ void cu_sti(void *p, int t, int64_t i, int64_t v)
{
    switch (t) {
    case RLX_I64: ((long long *)p)[i] = v; break;
    case RLX_I32: ((int *)p)[i] = (int)v; break;
    case RLX_I8: ((signed char *)p)[i] = (signed char)v; break;
    case RLX_U8: ((unsigned char *)p)[i] = (unsigned char)v; break;
    case RLX_BOOL: ((unsigned char *)p)[i] = v != 0; break;
    default: cu_st(p, t, i, (double)v); break;
    }
}

/* A dense index space walked through per-operand strides (broadcast,
 * transpose, slice).  Dims are collapsed on the host where every operand
 * is contiguous across them. */
#define CU_MAX_OPS 3
typedef struct cu_walk {
    int nd;
    int nops;
    int64_t total;
    int64_t dims[CU_MAX_DIMS];
    int64_t st[CU_MAX_OPS][CU_MAX_DIMS];
} cu_walk;

/* Builds a walk over out dims with per-operand strides (in elements). */
void rlx_cu_walk_init(cu_walk *w, int ndim, const int64_t *dims, int nops, const int64_t (*strides)[CU_MAX_DIMS]);

/* A walk whose every operand reads element (i / div) % mod of its buffer
 * at flat output index i: each is contiguous over one run of dims and
 * broadcast over the rest (a row of the output, a column, a block of
 * rows, a scalar: mod 1).  One division and one remainder per operand
 * instead of one of each per dim; `vec` when 16-byte vectors apply (every
 * operand's div or mod a multiple of the vector's elements). */
typedef struct cu_divmod {
    int64_t total;
    int64_t div[CU_MAX_OPS], mod[CU_MAX_OPS];
    int vec;
} cu_divmod;

/* Fills d from w; false when an operand is not of that form. */
bool rlx_cu_walk_divmod(const cu_walk *w, int vec_elems, cu_divmod *d);

/* Operand k of vector v (elements v*V .. v*V+V-1): its offset, and
 * whether the V elements are one broadcast value (else V consecutive) */
template <typename I, int V> __device__ __forceinline__ I cu_dm_offset(const cu_divmod &d, int k, I v, bool *same)
{
    I i = v * (I)V, dv = (I)d.div[k], md = (I)d.mod[k];
    *same = V == 1 || md == 1 || dv % V == 0;
    return (i / dv) % md;
}

__device__ __forceinline__ void cu_walk_offsets(const cu_walk &w, int64_t flat, int64_t *off)
{
    for (int k = 0; k < w.nops; k++)
        off[k] = 0;
    for (int d = w.nd - 1; d >= 0; d--) {
        int64_t dim = w.dims[d];
        int64_t i = flat % dim;
        flat /= dim;
        for (int k = 0; k < w.nops; k++)
            off[k] += i * w.st[k][d];
    }
}

/* The float math of the elementwise ops (rlx_unary_f32, rlx_binary_f32 in
 * ir/op_math.h) is computed in f32 for f32, f16 and bf16 alike: one
 * definition for the single-op kernels and the fused chains.  The helpers
 * below dispatch it once for a vector of values. */

/* y[e] = op(x[e]) for V values, dispatched once on op for all V (y may be
 * x).  A switch per element, unrolled over a vector, puts V copies of the
 * dispatch into the kernel; the code one launch runs is then spread over
 * the whole kernel, and fetching it cost about 1 us per launch on an H200
 * (bench/gpu/launch_floor.cu). */
template <int V> __device__ __forceinline__ void cu_unary_fv(int op, const float *x, float *y)
{
    switch (op) {
#define CU_UNARY_CASE(o) \
    case o: _Pragma("unroll") for (int e = 0; e < V; e++) y[e] = rlx_unary_f32(o, x[e]); return;
        RLX_FLOAT_UNARY_OPS(CU_UNARY_CASE)
#undef CU_UNARY_CASE
    default:
        for (int e = 0; e < V; e++)
            y[e] = rlx_nan_f();
    }
}

/* y[e] = a[e] op b[e] for V values, dispatched once (y may be a or b). */
template <int V> __device__ __forceinline__ void cu_binary_fv(int op, const float *a, const float *b, float *y, int fm)
{
    switch (op) {
#define CU_BINARY_CASE(o) \
    case o: _Pragma("unroll") for (int e = 0; e < V; e++) y[e] = rlx_binary_f32(o, a[e], b[e], fm); return;
        RLX_FLOAT_BINARY_OPS(CU_BINARY_CASE)
#undef CU_BINARY_CASE
    default:
        for (int e = 0; e < V; e++)
            y[e] = rlx_nan_f();
    }
}

/* Rotary embedding, for the rope op and the attention block's prologue
 * alike.  Pair i of a D-vector: elements 2i and 2i + 1 (interleaved) or i
 * and i + D/2. */
__device__ __forceinline__ void cu_rope_pair(int64_t i, int64_t D, int inter, int64_t *ia, int64_t *ib)
{
    *ia = inter ? 2 * i : i;
    *ib = *ia + (inter ? 1 : D / 2);
}

/* Rotates a pair by the angle whose cosine and sine are c and sn, in
 * double as the CPU reference does. */
__device__ __forceinline__ void cu_rope_apply(double c, double sn, float *x1, float *x2)
{
    const float a = *x1, b = *x2;
    *x1 = (float)(a * c - b * sn);
    *x2 = (float)(b * c + a * sn);
}

/* Warp reductions. */
__device__ __forceinline__ float cu_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
/* The M row sums of a matrix-vector kernel whose WPC warps share an output
 * column: each warp's lanes by shuffles, then the WPC warps through part
 * (shared, [warps][M]).  Every thread of the block must call it; true in
 * the warp that then holds the totals (its lane 0 writes them). */
template <int M, int WPC>
__device__ __forceinline__ bool cu_mv_reduce(float (&acc)[M], float (*part)[M], int warp, int lane, int sub)
{
#pragma unroll
    for (int m = 0; m < M; m++)
        acc[m] = cu_warp_sum(acc[m]);
    if (WPC > 1) {
        if (lane == 0)
#pragma unroll
            for (int m = 0; m < M; m++)
                part[warp][m] = acc[m];
        __syncthreads();
        if (sub != 0)
            return false;
#pragma unroll
        for (int m = 0; m < M; m++)
            for (int j = 1; j < WPC; j++)
                acc[m] += part[warp + j][m];
    }
    return true;
}
__device__ __forceinline__ float cu_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Dispatch a templated launcher over the float dtypes. */
#define CU_FLOAT_DISPATCH(dt, T, ...) \
    do {                              \
        if ((dt) == RLX_F32) {        \
            typedef float T;          \
            __VA_ARGS__;              \
        } else if ((dt) == RLX_F16) { \
            typedef __half T;         \
            __VA_ARGS__;              \
        } else {                      \
            typedef __nv_bfloat16 T;  \
            __VA_ARGS__;              \
        }                             \
    } while (0)

#endif
