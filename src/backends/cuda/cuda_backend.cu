/* cuda_backend.cu - the CUDA backend: device arena (one cudaMalloc per
 * compiled graph), pinned staging for host copies, the kernel table and
 * its claim, thunk preparation, CUDA Graph capture of the whole schedule
 * (pre-encoding) and replay per run.
 *
 * One instance per GPU (cuda:N) owns that device's state (cu_device).
 * Everything on a device runs on its one stream.  Kernels never
 * synchronize; run() waits for the stream at its end so a run's outputs
 * are ready when it returns. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_profiler_api.h>

#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_common.h"

extern "C" {
#include "core/error.h"
}

/* The kernel table, filled once per process (the same on every device). */
static cu_kernel table[CU_TABLE_SIZE];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    rlx_cuda_register_elementwise(table);
    rlx_cuda_register_reduce(table);
    rlx_cuda_register_shape(table);
    rlx_cuda_register_matmul(table);
    rlx_cuda_register_conv(table);
    rlx_cuda_register_attention(table);
    rlx_cuda_register_attn_block(table);
    rlx_cuda_register_fused(table);
    rlx_cuda_register_train(table);
    rlx_cuda_register_quant(table);
    rlx_cuda_register_proj(table);
}

#define STAGING_CHUNK ((size_t)64 << 20)

static void mark_dirty(cu_device *d, const void *dst, size_t bytes);

/* Every call into the backend works on its instance's device: made the
 * calling thread's (rlx_cu_dev) and CUDA's current device for the call,
 * both as they were again when it returns, so the caller's own CUDA work
 * (another library's current device) is left as it found it. */
struct cu_scope {
    cu_device *prev_dev;
    int prev_cuda;
    bool switched;
    explicit cu_scope(const rlx_backend *b) : prev_dev(rlx_cu_dev), prev_cuda(-1), switched(false)
    {
        cu_device *d = (cu_device *)b->self;
        if (cudaGetDevice(&prev_cuda) != cudaSuccess)
            prev_cuda = -1;
        if (prev_cuda != d->index) {
            cudaSetDevice(d->index);
            switched = true;
        }
        rlx_cu_dev = d;
    }
    ~cu_scope()
    {
        if (switched && prev_cuda >= 0)
            cudaSetDevice(prev_cuda);
        rlx_cu_dev = prev_dev;
    }
};

static int device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

/* Makes device `index` ready: its stream, pinned words, properties. */
static rlx_status init_device(cu_device *d, int index)
{
    d->index = index;
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->handles_lock, NULL);
    pthread_mutex_init(&d->mm_dnn.lock, NULL);
    pthread_mutex_init(&d->mm_wgmma.lock, NULL);
    int prev = -1;
    if (cudaGetDevice(&prev) != cudaSuccess)
        prev = -1;
    cudaError_t e;
    if ((e = cudaSetDevice(index)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaMallocHost((void **)&d->pinned_run_index, sizeof(unsigned long long))) != cudaSuccess ||
        (e = cudaHostAlloc((void **)&d->host_fault, sizeof(cu_fault), cudaHostAllocMapped)) != cudaSuccess ||
        (e = cudaHostGetDevicePointer((void **)&d->fault, d->host_fault, 0)) != cudaSuccess) {
        cudaGetLastError();
        if (prev >= 0)
            cudaSetDevice(prev);
        return rlx_set_error(RLX_ERR_DEVICE, "CUDA device %d could not be initialised: %s", index,
                             cudaGetErrorString(e));
    }
    memset(d->host_fault, 0, sizeof *d->host_fault);
    cudaDeviceGetAttribute(&d->major, cudaDevAttrComputeCapabilityMajor, index);
    cudaDeviceGetAttribute(&d->minor, cudaDevAttrComputeCapabilityMinor, index);
    if (cudaDeviceGetAttribute(&d->sms, cudaDevAttrMultiProcessorCount, index) != cudaSuccess || d->sms <= 0)
        d->sms = 132;
    d->pdl_hw = d->major >= 9;
#ifdef RLX_HAVE_SM90A
    d->wgmma = d->major == 9 && d->minor == 0;
#endif
    size_t free_b = 0;
    cudaMemGetInfo(&free_b, &d->total_mem);
    cudaGetLastError();
    if (prev >= 0)
        cudaSetDevice(prev);
    return RLX_OK;
}

static const cu_kernel *kernel_of(rlx_op op)
{
    if ((unsigned)op >= CU_TABLE_SIZE || !table[op].fn)
        return NULL;
    return &table[op];
}

/* ------------------------------------------------------------- vtable */

static size_t cuda_max_buffer(const rlx_backend *b)
{
    const cu_device *d = (const cu_device *)b->self;
    return d->total_mem ? d->total_mem / 10 * 9 : ((size_t)1 << 30);
}

static bool is_plain_leaf(rlx_op op)
{
    const rlx_op_info *info = rlx_op_info_of(op);
    return info && (info->flags & RLX_OPF_LEAF) && !(info->flags & RLX_OPF_RANDOM);
}

static bool cuda_supports(const rlx_graph *g, rlx_node id)
{
    if (!rlx_cu_dev)
        return false; /* asked outside a compile (configure binds the device) */
    const rlx_node_data *n = &g->nodes[id];
    if (is_plain_leaf(n->op))
        return true;
    const cu_kernel *k = kernel_of(n->op);
    if (!k)
        return false;
    return k->ok ? k->ok(g, n) : rlx_cu_float_ok(g, n);
}

static size_t cuda_scratch(const rlx_graph *g, rlx_node id, int threads)
{
    (void)threads;
    const cu_kernel *k = kernel_of(g->nodes[id].op);
    return (k && k->scratch) ? k->scratch(g, &g->nodes[id]) : 0;
}

static bool param_leaf(const rlx_node_data *n) { return n->op == RLX_OP_PARAM || n->op == RLX_OP_CONSTANT; }

/* A param or constant that keeps its value through a run: not one a node
 * of the graph writes (an optimizer step, a cache write). */
static bool fixed_leaf(const rlx_graph *g, rlx_node id)
{
    return param_leaf(&g->nodes[id]) && !rlx_leaf_is_written(g, id);
}

static bool is_graph_output(const rlx_graph *g, rlx_node id)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].node == id)
            return true;
    return false;
}

/* The planner's no-ops: aliases of their operand, and empty nodes (the
 * one alias rule, in the op table). */
static bool no_op(const rlx_graph *g, rlx_node id) { return rlx_node_is_no_op(g, id); }

/* Marks ok[i] for every node the prologue (build_prologue) may cache: the
 * graph-level form of param_only below, so the arena holds a region for
 * every node the prologue can take (and for few it then does not). */
static void may_prologue(const rlx_graph *g, unsigned char *ok)
{
    /* params written during a run change: nothing computed from them is cached */
    unsigned char *written = (unsigned char *)rlx_calloc((size_t)g->n_nodes + 1, 1);
    if (!written) {
        memset(ok, 0, (size_t)g->n_nodes);
        return;
    }
    for (rlx_node i = 0; i < g->n_nodes; i++)
        for (int k = 0; k < g->nodes[i].n_in; k++)
            if (rlx_node_writes_input(&g->nodes[i], k))
                written[g->nodes[i].in[k]] = 1;
    for (rlx_node i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        bool yes = !param_leaf(n) && n->op != RLX_OP_INPUT && n->n_in > 0 && !no_op(g, i) &&
                   !(rlx_op_info_of(n->op)->flags & (RLX_OPF_RANDOM | RLX_OPF_STATEFUL)) && !is_graph_output(g, i);
        for (int k = 0; yes && k < n->n_in; k++)
            yes = n->in[k] < i && (written[n->in[k]] ? false : param_leaf(&g->nodes[n->in[k]]) || ok[n->in[k]]);
        ok[i] = yes;
    }
    /* every consumer reads it through its input pointer (no view of it),
     * and there is one */
    unsigned char *read = (unsigned char *)rlx_calloc((size_t)g->n_nodes + 1, 1);
    for (rlx_node j = 0; j < g->n_nodes; j++)
        for (int k = 0; k < g->nodes[j].n_in; k++) {
            rlx_node in = g->nodes[j].in[k];
            if (no_op(g, j))
                ok[in] = 0;
            else if (read)
                read[in] = 1;
        }
    for (rlx_node i = 0; i < g->n_nodes; i++)
        ok[i] = ok[i] && read && read[i];
    free(read);
    free(written);
}

/* A thunk's keep region: the kernel's own bytes first, then room for the
 * node's value when the prologue may cache it. */
static size_t kernel_keep(const rlx_graph *g, rlx_node id)
{
    const cu_kernel *k = kernel_of(g->nodes[id].op);
    size_t b = (k && k->keep) ? k->keep(g, &g->nodes[id]) : 0;
    return (b + 255) / 256 * 256;
}

static void cuda_keep_bytes(const rlx_graph *g, size_t *bytes)
{
    unsigned char *ok = (unsigned char *)rlx_calloc((size_t)g->n_nodes + 1, 1);
    if (ok)
        may_prologue(g, ok);
    for (rlx_node i = 0; i < g->n_nodes; i++)
        bytes[i] = kernel_keep(g, i) + (ok && ok[i] ? rlx_node_bytes(&g->nodes[i]) : 0);
    free(ok);
}

static rlx_status cuda_alloc(const rlx_backend *b, size_t bytes, void **ptr)
{
    cu_scope on(b);
    void *p = NULL;
    /* refused up front, naming the sizes, when the device has not the room */
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && bytes > free_b)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY,
                             "cuda: the arena needs %zu bytes (%.2f GiB); the device has %zu bytes (%.2f GiB) free "
                             "of %zu (%.2f GiB)",
                             bytes, (double)bytes / 1073741824.0, free_b, (double)free_b / 1073741824.0, total_b,
                             (double)total_b / 1073741824.0);
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 256);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it for later calls */
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cuda: cannot allocate a device arena of %zu bytes (%.2f GiB): %s",
                             bytes, (double)bytes / 1073741824.0, cudaGetErrorString(e));
    }
    /* zeroed so padding and never-written bytes are defined */
    if ((e = cudaMemsetAsync(p, 0, bytes ? bytes : 256, rlx_cu_stream)) != cudaSuccess ||
        (e = cudaStreamSynchronize(rlx_cu_stream)) != cudaSuccess) {
        cudaFree(p);
        return rlx_set_error(RLX_ERR_DEVICE, "cuda: clearing the arena failed: %s", cudaGetErrorString(e));
    }
    *ptr = p;
    return RLX_OK;
}

static void cuda_free(const rlx_backend *b, void *p)
{
    cu_scope on(b);
    if (p)
        cudaFree(p);
}

static rlx_status ensure_staging(cu_device *d)
{
    if (d->staging)
        return RLX_OK;
    cudaError_t e = cudaMallocHost(&d->staging, STAGING_CHUNK);
    if (e != cudaSuccess) {
        d->staging = NULL;
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cuda: no pinned staging buffer: %s", cudaGetErrorString(e));
    }
    d->staging_bytes = STAGING_CHUNK;
    return RLX_OK;
}

/* Host -> device through the pinned staging buffer, async on the stream. */
static rlx_status cuda_upload(const rlx_backend *b, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return RLX_OK;
    cu_scope on(b);
    cu_device *d = rlx_cu_dev;
    void *staging = NULL;
    size_t staging_bytes = 0;
    pthread_mutex_lock(&d->lock);
    mark_dirty(d, dst, bytes);
    rlx_status st = ensure_staging(d);
    staging = d->staging, staging_bytes = d->staging_bytes;
    for (size_t at = 0; st == RLX_OK && at < bytes; at += staging_bytes) {
        size_t n = bytes - at < staging_bytes ? bytes - at : staging_bytes;
        memcpy(staging, (const char *)src + at, n);
        cudaError_t e = cudaMemcpyAsync((char *)dst + at, staging, n, cudaMemcpyHostToDevice, rlx_cu_stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(rlx_cu_stream);
        if (e != cudaSuccess)
            st = rlx_set_error(RLX_ERR_DEVICE, "cuda: upload of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

static rlx_status cuda_download(const rlx_backend *b, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return RLX_OK;
    cu_scope on(b);
    cu_device *d = rlx_cu_dev;
    pthread_mutex_lock(&d->lock);
    rlx_status st = ensure_staging(d);
    void *staging = d->staging;
    size_t staging_bytes = d->staging_bytes;
    for (size_t at = 0; st == RLX_OK && at < bytes; at += staging_bytes) {
        size_t n = bytes - at < staging_bytes ? bytes - at : staging_bytes;
        cudaError_t e = cudaMemcpyAsync(staging, (const char *)src + at, n, cudaMemcpyDeviceToHost, rlx_cu_stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(rlx_cu_stream);
        if (e != cudaSuccess)
            st = rlx_set_error(RLX_ERR_DEVICE, "cuda: download of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
        else
            memcpy((char *)dst + at, staging, n);
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* A pointer the caller lent for a device copy: device (or managed) memory
 * of the instance's device, where the arena is. */
static rlx_status check_device_ptr(const cu_device *d, const void *p, const char *what)
{
    cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "cuda: the %s %p is not CUDA memory: %s", what, p,
                             cudaGetErrorString(e));
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "cuda: the %s %p is %s memory, not device memory", what, p,
                             a.type == cudaMemoryTypeHost ? "pinned host" : "host");
    if (a.device != d->index)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "cuda: the %s %p is on CUDA device %d; the session runs on cuda:%d", what, p, a.device,
                             d->index);
    return RLX_OK;
}

/* Device -> device between the arena and memory the caller lent, after the
 * work queued on the legacy default stream (DLPack's stream 1: a producer
 * asked for that stream orders its own work before it), synchronised. */
static rlx_status cuda_copy_device(const rlx_backend *b, void *dst, const void *src, size_t bytes)
{
    if (!bytes)
        return RLX_OK;
    cu_scope on(b);
    cu_device *d = rlx_cu_dev;
    rlx_status st;
    if ((st = check_device_ptr(d, dst, "destination")) != RLX_OK || (st = check_device_ptr(d, src, "source")) != RLX_OK)
        return st;
    pthread_mutex_lock(&d->lock);
    mark_dirty(d, dst, bytes);
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(cudaStreamLegacy);
    pthread_mutex_unlock(&d->lock);
    if (e != cudaSuccess)
        return rlx_set_error(RLX_ERR_DEVICE, "cuda: device copy of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
    return RLX_OK;
}

/* The thunk's kernel state on the current device (rlx_cu_dev). */
static rlx_status prepare_thunk(const rlx_graph *g, rlx_thunk *t)
{
    const rlx_node_data *n = &g->nodes[t->id];
    if (is_plain_leaf(n->op)) {
        t->fn = NULL;
        return RLX_OK;
    }
    const cu_kernel *k = kernel_of(n->op);
    if (!k)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "cuda backend has no kernel for %s", rlx_op_name(n->op));
    t->fn = k->fn;
    t->state = NULL;
    /* a param some node writes (this one, an optimizer step) is not fixed */
    for (int i = 0; i < n->n_in; i++)
        if (fixed_leaf(g, n->in[i]))
            t->in_fixed |= 1u << i;
    if (k->prepare)
        return k->prepare(g, t);
    return RLX_OK;
}

static void release_thunk(rlx_thunk *t)
{
    if (!t->node)
        return;
    const cu_kernel *k = kernel_of(t->node->op);
    if (k && k->release && t->state)
        k->release(t);
    t->state = NULL;
}

static rlx_status cuda_prepare(const rlx_backend *b, const rlx_graph *g, rlx_thunk *t)
{
    cu_scope on(b);
    return prepare_thunk(g, t);
}

static void cuda_release(const rlx_backend *b, rlx_thunk *t)
{
    cu_scope on(b);
    release_thunk(t);
}

/* What finalize builds: the captured graph of the schedule, and a prologue
 * of parameter-only work (casts that mixed precision inserts, the weight
 * transposes of the layout pass, any node computed from params and
 * constants alone) whose outputs live in a cache buffer of their own: the
 * prologue runs only when a param it reads was uploaded since the last
 * run, not every run. */
typedef struct cu_range {
    const char *p;
    size_t n;
} cu_range;

typedef struct cu_graph_state {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    /* per thunk: CU_IN_GRAPH, CU_IN_PROLOGUE, or CU_PACK_IN_PROLOGUE (in the
     * graph, its pack hook in the prologue) */
    unsigned char *skip;
    int n_pre;
    int n_pack;
    int dirty;
    cu_range *ranges;
    int n_ranges;
    bool random; /* a random op reads the run index */
    struct cu_graph_state *next;
} cu_graph_state;

enum { CU_IN_GRAPH = 0, CU_IN_PROLOGUE = 1, CU_PACK_IN_PROLOGUE = 2 };

/* Whether a random op of the schedule reads the run index. */
static bool has_random(const rlx_schedule *s)
{
    for (int i = 0; i < s->n_thunks; i++) {
        const rlx_op_info *info = s->thunks[i].node ? rlx_op_info_of(s->thunks[i].node->op) : NULL;
        if (info && (info->flags & RLX_OPF_RANDOM))
            return true;
    }
    return false;
}

/* Called with the device's lock held: an upload into a param a prologue
 * reads. */
static void mark_dirty(cu_device *d, const void *dst, size_t bytes)
{
    const char *a = (const char *)dst;
    for (cu_graph_state *g = d->registry; g; g = g->next)
        for (int i = 0; i < g->n_ranges && !g->dirty; i++)
            if (a < g->ranges[i].p + g->ranges[i].n && g->ranges[i].p < a + bytes)
                g->dirty = 1;
}

/* One thunk, its pack hook first when `pack` (and it has one). */
static rlx_status launch_one(const rlx_thunk *t, const rlx_run_ctx *ctx, bool pack)
{
    const cu_kernel *k = pack ? kernel_of(t->node->op) : NULL;
    if (k && k->pack) {
        rlx_status st = k->pack(t);
        if (st != RLX_OK)
            return st;
    }
    return t->fn(t, ctx);
}

/* RLX_CUDA_PROFILE=1 (with RLX_DISABLE_CUDA_GRAPH=1): device time per op
 * kind and the costliest nodes, summed over runs, printed when the
 * schedule is released.  Each thunk runs once as usual, then is timed
 * with rlx_cu_time_captured (PROF_REPS launches replayed in a graph), so
 * what is measured is its time inside a CUDA graph, without the host's
 * launch gaps.  The repeats rerun in-place kernels: a profiled run's
 * outputs are not meaningful. */
#define PROF_REPS 10

/* A thunk and its run context, for rlx_cu_time_captured. */
typedef struct thunk_run {
    const rlx_thunk *t;
    const rlx_run_ctx *ctx;
} thunk_run;

static bool launch_thunk(void *arg)
{
    const thunk_run *r = (const thunk_run *)arg;
    return r->t->fn(r->t, r->ctx) == RLX_OK;
}

static rlx_status launch_profiled(rlx_schedule *s, const rlx_run_ctx *ctx)
{
    cu_device *d = rlx_cu_dev;
    d->profiled = true;
    if (d->prof_sched != s) {
        free(d->prof_thunk_ms);
        d->prof_thunk_ms = (double *)rlx_calloc((size_t)s->n_thunks + 1, sizeof(double));
        d->prof_sched = s;
    }
    rlx_status st = RLX_OK;
    for (int i = 0; i < s->n_thunks && st == RLX_OK; i++) {
        const rlx_thunk *t = &s->thunks[i];
        if (!t->fn)
            continue;
        st = launch_one(t, ctx, true);
        thunk_run r = {t, ctx};
        float ms = st == RLX_OK ? rlx_cu_time_captured(launch_thunk, &r, PROF_REPS) : -1;
        if (ms >= 1e29f)
            ms = -1;
        unsigned op = (unsigned)t->node->op;
        if (ms >= 0 && op < CU_PROF_OPS) {
            d->prof_ms[op] += ms;
            d->prof_n[op]++;
            if (d->prof_thunk_ms)
                d->prof_thunk_ms[i] += ms;
        }
    }
    return st;
}

/* "2x3x4" */
static void shape_text(const rlx_node_data *n, char *buf, size_t cap)
{
    int at = 0;
    buf[0] = 0;
    for (int ax = 0; ax < n->shape.ndim && at < (int)cap - 24; ax++)
        at += snprintf(buf + at, cap - (size_t)at, ax ? "x%lld" : "%lld", (long long)n->shape.dims[ax]);
}

static void profile_report(cu_device *d, const rlx_schedule *s)
{
    double *prof_ms = d->prof_ms;
    long *prof_n = d->prof_n;
    double total = 0;
    for (int i = 0; i < CU_PROF_OPS; i++)
        total += prof_ms[i];
    if (total <= 0)
        return;
    fprintf(stderr, "[rlx cuda profile] device ms per op kind (all runs, as inside a CUDA graph), total %.3f ms:\n",
            total);
    for (;;) {
        int best = -1;
        for (int i = 0; i < CU_PROF_OPS; i++)
            if (prof_n[i] && (best < 0 || prof_ms[i] > prof_ms[best]))
                best = i;
        if (best < 0)
            break;
        fprintf(stderr, "  %-22s %10.3f ms %6.1f%%  %ld launches\n", rlx_op_name((rlx_op)best), prof_ms[best],
                100.0 * prof_ms[best] / total, prof_n[best]);
        prof_n[best] = 0;
        prof_ms[best] = 0;
    }
    if (d->prof_sched != s || !d->prof_thunk_ms)
        return;
    fprintf(stderr, "[rlx cuda profile] costliest nodes, at most 4 of an op kind (<- their inputs):\n");
    int shown[CU_PROF_OPS] = {0};
    for (int k = 0; k < 30;) {
        int best = -1;
        for (int i = 0; i < s->n_thunks; i++)
            if (d->prof_thunk_ms[i] > 0 && (best < 0 || d->prof_thunk_ms[i] > d->prof_thunk_ms[best]))
                best = i;
        if (best < 0)
            break;
        const rlx_node_data *n = s->thunks[best].node;
        if (n->op < CU_PROF_OPS && shown[n->op]++ >= 4) { /* the rest of this kind: a line per other kind */
            d->prof_thunk_ms[best] = 0;
            continue;
        }
        k++;
        char dims[96], ins[256];
        shape_text(n, dims, sizeof dims);
        int at = 0;
        ins[0] = 0;
        for (int j = 0; j < n->n_in && at < (int)sizeof ins - 64; j++) {
            char one[96];
            const rlx_node_data *in = s->thunks[best].in_node[j];
            shape_text(in, one, sizeof one);
            at += snprintf(ins + at, sizeof ins - (size_t)at, " %s[%s]", rlx_dtype_name(in->dtype), one);
        }
        fprintf(stderr, "  %8.3f ms %5.1f%%  node %d %s %s [%s]%s%s <-%s\n", d->prof_thunk_ms[best],
                100.0 * d->prof_thunk_ms[best] / total, s->thunks[best].id, rlx_op_name(n->op),
                rlx_dtype_name(n->dtype), dims, n->name ? " " : "", n->name ? n->name : "", ins);
        d->prof_thunk_ms[best] = 0;
    }
    free(d->prof_thunk_ms);
    d->prof_thunk_ms = NULL;
    d->prof_sched = NULL;
}

/* The graph part (prologue = 0): every thunk not in the prologue, packing
 * inline those whose packs are not there; or the prologue part (1): its
 * thunks in order, then the packs it holds. */
static rlx_status launch_some(rlx_schedule *s, const rlx_run_ctx *ctx, const unsigned char *skip, int prologue)
{
    for (int i = 0; i < s->n_thunks; i++) {
        const rlx_thunk *t = &s->thunks[i];
        if (!t->fn || (skip[i] == CU_IN_PROLOGUE) != (prologue != 0))
            continue;
        rlx_status st = launch_one(t, ctx, skip[i] == CU_IN_GRAPH);
        if (st != RLX_OK)
            return st;
    }
    for (int i = 0; prologue && i < s->n_thunks; i++) {
        const rlx_thunk *t = &s->thunks[i];
        if (t->fn && skip[i] == CU_PACK_IN_PROLOGUE) {
            rlx_status st = kernel_of(t->node->op)->pack(t);
            if (st != RLX_OK)
                return st;
        }
    }
    return RLX_OK;
}

static rlx_status launch_all(rlx_schedule *s, const rlx_run_ctx *ctx)
{
    if (ctx->settings && ctx->settings->cuda_profile && !s->backend_state) {
        cudaStreamCaptureStatus cs;
        if (cudaStreamIsCapturing(rlx_cu_stream, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone)
            return launch_profiled(s, ctx);
    }
    for (int i = 0; i < s->n_thunks; i++) {
        const rlx_thunk *t = &s->thunks[i];
        if (!t->fn)
            continue;
        rlx_status st = launch_one(t, ctx, true);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

/* Whether thunk i computes from params, constants and earlier prologue
 * thunks alone, so its value changes only when a param is uploaded. */
static bool param_only(const rlx_schedule *s, const unsigned char *pre, int i)
{
    const rlx_thunk *t = &s->thunks[i];
    const rlx_op_info *info = rlx_op_info_of(t->node->op);
    if (!t->fn || t->node->n_in == 0 || (info->flags & (RLX_OPF_RANDOM | RLX_OPF_STATEFUL)) ||
        is_graph_output(s->graph, t->id))
        return false;
    for (int k = 0; k < t->node->n_in; k++) {
        rlx_node in = t->node->in[k];
        if (!param_leaf(t->in_node[k]) && pre[in] != CU_IN_PROLOGUE)
            return false;
    }
    /* every consumer must read it through its input pointer: a view
     * aliasing it would keep pointing into the arena */
    int consumers = 0;
    for (int j = i + 1; j < s->n_thunks; j++)
        for (int k = 0; k < s->thunks[j].node->n_in; k++)
            if (s->thunks[j].node->in[k] == t->id) {
                if (!s->thunks[j].fn)
                    return false;
                consumers++;
            }
    return consumers > 0;
}

/* Whether thunk i's pack hook reads only params and prologue outputs, so
 * it can run in the prologue; counts the params it reads. */
static bool pack_in_prologue(const rlx_schedule *s, const unsigned char *skip, int i, int *leaf_reads)
{
    const rlx_thunk *t = &s->thunks[i];
    const cu_kernel *k = t->fn && skip[i] == CU_IN_GRAPH ? kernel_of(t->node->op) : NULL;
    if (!k || !k->pack)
        return false;
    uint32_t mask = k->pack_inputs(t);
    int leaves = 0;
    for (int j = 0; j < t->node->n_in; j++) {
        if (!(mask >> j & 1))
            continue;
        if (param_leaf(t->in_node[j]))
            leaves++;
        else if (skip[t->node->in[j]] != CU_IN_PROLOGUE)
            return false;
    }
    *leaf_reads += leaves;
    return true;
}

/* Whether thunk i's keep region has room for its value after what the
 * kernel keeps itself. */
static bool cache_room(const rlx_schedule *s, int i)
{
    const rlx_thunk *t = &s->thunks[i];
    return t->keep && t->keep_bytes >= kernel_keep(s->graph, t->id) + rlx_node_bytes(t->node);
}

/* Picks the prologue, moves its outputs into their keep regions in the
 * arena and points their consumers there (re-preparing them); then moves
 * into it the pack hooks that read nothing else. */
static rlx_status build_prologue(rlx_schedule *s, cu_graph_state *gs, const rlx_backend_settings *set)
{
    int n = s->n_thunks;
    gs->skip = (unsigned char *)rlx_calloc((size_t)n + 1, 1);
    if (!gs->skip)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cuda: out of memory");
    if (set->cuda_no_prologue || !s->graph)
        return RLX_OK;
    size_t total = 0;
    int n_leaf_reads = 0;
    for (int i = 0; i < n; i++) {
        if (!param_only(s, gs->skip, i) || !cache_room(s, i))
            continue;
        gs->skip[i] = CU_IN_PROLOGUE;
        gs->n_pre++;
        total += (rlx_node_bytes(s->thunks[i].node) + 255) / 256 * 256;
        for (int k = 0; k < s->thunks[i].node->n_in; k++)
            n_leaf_reads += param_leaf(s->thunks[i].in_node[k]);
    }
    for (int i = 0; i < n; i++)
        if (pack_in_prologue(s, gs->skip, i, &n_leaf_reads)) {
            gs->skip[i] = CU_PACK_IN_PROLOGUE;
            gs->n_pack++;
        }
    if (!gs->n_pre && !gs->n_pack)
        return RLX_OK;
    gs->ranges = (cu_range *)rlx_calloc((size_t)n_leaf_reads + 1, sizeof *gs->ranges);
    unsigned char *redo = (unsigned char *)rlx_calloc((size_t)n + 1, 1);
    if (!gs->ranges || !redo) {
        free(redo);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cuda: out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (gs->skip[i] == CU_IN_GRAPH)
            continue;
        rlx_thunk *t = &s->thunks[i];
        uint32_t mask = gs->skip[i] == CU_IN_PROLOGUE ? ~0u : kernel_of(t->node->op)->pack_inputs(t);
        for (int k = 0; k < t->node->n_in; k++)
            if ((mask >> k & 1) && param_leaf(t->in_node[k])) {
                gs->ranges[gs->n_ranges].p = (const char *)t->in[k];
                gs->ranges[gs->n_ranges++].n = rlx_node_bytes(t->in_node[k]);
            }
        if (gs->skip[i] != CU_IN_PROLOGUE)
            continue;
        t->out = (char *)t->keep + kernel_keep(s->graph, t->id);
        redo[i] = 1;
        for (int j = i + 1; j < n; j++)
            for (int k = 0; k < s->thunks[j].node->n_in; k++)
                if (s->thunks[j].node->in[k] == t->id) {
                    s->thunks[j].in[k] = t->out;
                    s->thunks[j].in_fixed |= 1u << k; /* the prologue's value: fixed during a run */
                    redo[j] = 1;
                }
    }
    rlx_status st = RLX_OK;
    for (int j = 0; j < n && st == RLX_OK; j++) {
        if (!redo[j])
            continue;
        release_thunk(&s->thunks[j]);
        st = prepare_thunk(s->graph, &s->thunks[j]);
    }
    free(redo);
    if (set->verbose)
        fprintf(stderr,
                "[rlx cuda] prologue: %d param-only nodes and %d weight packs run once per param upload (%zu B "
                "kept in the arena)\n",
                gs->n_pre, gs->n_pack, total);
    gs->dirty = 1;
    gs->next = rlx_cu_dev->registry;
    rlx_cu_dev->registry = gs;
    return st;
}

static void free_state(cu_graph_state *gs)
{
    for (cu_graph_state **p = &rlx_cu_dev->registry; *p; p = &(*p)->next)
        if (*p == gs) {
            *p = gs->next;
            break;
        }
    if (gs->exec)
        cudaGraphExecDestroy(gs->exec);
    if (gs->graph)
        cudaGraphDestroy(gs->graph);
    free(gs->ranges);
    free(gs->skip);
    free(gs);
}

/* ---- what the captured graph holds (RLX_VERBOSE): how many of its
 * kernel-to-kernel edges let a kernel start while the one before drains
 * (cu_launch; cuDNN's own launches), and with RLX_VERBOSE=2 every such
 * edge with the kernels' names and launch shapes. */
typedef CUresult (*cu_node_params_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
typedef CUresult (*cu_func_name_fn)(const char **, CUfunction);
typedef CUresult (*cu_kern_name_fn)(const char **, CUkernel);

/* The kernel a graph node launches, with its launch shape; library kernels
 * are named through the driver. */
static void *driver_entry(const char *name, int version)
{
    void *p = NULL;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        p = NULL;
    cudaGetLastError();
    return p;
}

static void describe_kernel_node(cudaGraphNode_t nd, char *buf, size_t cap)
{
    /* looked up once (thread-safe initialisation) */
    static const cu_node_params_fn node_params = (cu_node_params_fn)driver_entry("cuGraphKernelNodeGetParams", 12000);
    static const cu_func_name_fn func_name = (cu_func_name_fn)driver_entry("cuFuncGetName", 12030);
    static const cu_kern_name_fn kern_name = (cu_kern_name_fn)driver_entry("cuKernelGetName", 12030);
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    const char *name = NULL;
    if (!node_params || node_params((CUgraphNode)nd, &p) != CUDA_SUCCESS) {
        snprintf(buf, cap, "?");
        return;
    }
    if (p.func && func_name)
        func_name(&name, p.func);
    if (!name && p.kern && kern_name)
        kern_name(&name, p.kern);
    snprintf(buf, cap, "%.90s grid %ux%ux%u block %u smem %u", name ? name : "?", p.gridDimX, p.gridDimY, p.gridDimZ,
             p.blockDimX * p.blockDimY * p.blockDimZ, p.sharedMemBytes);
}

static void report_graph(cudaGraph_t g, bool each)
{
    size_t ne = 0;
    if (cudaGraphGetEdges(g, NULL, NULL, NULL, &ne) != cudaSuccess || ne == 0) {
        cudaGetLastError();
        return;
    }
    cudaGraphNode_t *from = (cudaGraphNode_t *)rlx_malloc(ne * sizeof *from),
                    *to = (cudaGraphNode_t *)rlx_malloc(ne * sizeof *to);
    cudaGraphEdgeData *data = (cudaGraphEdgeData *)rlx_calloc(ne, sizeof *data);
    if (from && to && data && cudaGraphGetEdges(g, from, to, data, &ne) == cudaSuccess) {
        int kk = 0, prog = 0;
        for (size_t i = 0; i < ne; i++) {
            cudaGraphNodeType a, b;
            if (cudaGraphNodeGetType(from[i], &a) != cudaSuccess || cudaGraphNodeGetType(to[i], &b) != cudaSuccess ||
                a != cudaGraphNodeTypeKernel || b != cudaGraphNodeTypeKernel)
                continue;
            kk++;
            prog += data[i].type == cudaGraphDependencyTypeProgrammatic;
            if (!each)
                continue;
            char x[160], y[160];
            describe_kernel_node(from[i], x, sizeof x);
            describe_kernel_node(to[i], y, sizeof y);
            fprintf(stderr, "[rlx cuda] %s -> %s%s\n", x, y,
                    data[i].type == cudaGraphDependencyTypeProgrammatic ? " (starts early)" : "");
        }
        fprintf(stderr, "[rlx cuda] graph: %zu edges, %d from kernel to kernel, %d of them starting early\n", ne, kk,
                prog);
    }
    cudaGetLastError();
    free(from);
    free(to);
    free(data);
}

static rlx_status cuda_finalize(const rlx_backend *b, rlx_schedule *s, const rlx_run_ctx *ctx)
{
    cu_scope on(b);
    cu_device *d = rlx_cu_dev;
    const rlx_backend_settings *set = ctx && ctx->settings ? ctx->settings : &rlx_cu_cfg;
    if (set->no_preencode || s->n_thunks == 0)
        return RLX_OK;
    cu_graph_state *gs = (cu_graph_state *)rlx_calloc(1, sizeof *gs);
    if (!gs)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cuda: out of memory");
    gs->random = has_random(s);
    pthread_mutex_lock(&d->lock);
    rlx_status st = build_prologue(s, gs, set);
    cudaError_t e = cudaSuccess;
    if (st == RLX_OK && (e = cudaStreamBeginCapture(rlx_cu_stream, cudaStreamCaptureModeThreadLocal)) != cudaSuccess) {
        st = rlx_set_error(RLX_ERR_DEVICE, "cuda: stream capture failed to begin: %s", cudaGetErrorString(e));
    } else if (st == RLX_OK) {
        st = launch_some(s, ctx, gs->skip, 0);
        e = cudaStreamEndCapture(rlx_cu_stream, &gs->graph);
        if (st == RLX_OK && e != cudaSuccess)
            st = rlx_set_error(RLX_ERR_DEVICE, "cuda: graph capture failed: %s", cudaGetErrorString(e));
        if (st == RLX_OK && set->verbose)
            report_graph(gs->graph, set->verbose >= 2);
        if (st == RLX_OK && (e = cudaGraphInstantiate(&gs->exec, gs->graph, 0)) != cudaSuccess)
            st = rlx_set_error(RLX_ERR_DEVICE, "cuda: graph instantiation failed: %s", cudaGetErrorString(e));
    }
    if (st != RLX_OK) {
        free_state(gs);
        cudaGetLastError();
        pthread_mutex_unlock(&d->lock);
        return st;
    }
    pthread_mutex_unlock(&d->lock);
    s->backend_state = gs;
    return RLX_OK;
}

static void cuda_release_schedule(const rlx_backend *b, rlx_schedule *s)
{
    cu_scope on(b);
    cu_device *d = rlx_cu_dev;
    pthread_mutex_lock(&d->lock);
    if (d->profiled)
        profile_report(d, s);
    cu_graph_state *gs = (cu_graph_state *)s->backend_state;
    if (gs)
        free_state(gs);
    pthread_mutex_unlock(&d->lock);
    s->backend_state = NULL;
}

/* RLX_CUDA_PROFILE_RUN=k (the settings' cuda_profile_run): run k of every
 * session is bracketed by cudaProfilerStart/Stop, for an external profiler
 * started with its capture off (ncu --profile-from-start off). */

/* The session's settings and device for the compile that begins on this
 * thread: kept for the claim and prepare (rlx_cu_cfg, rlx_cu_dev). */
static void cuda_configure(const rlx_backend *b, const rlx_backend_settings *set)
{
    rlx_cu_dev = (cu_device *)b->self;
    rlx_cu_cfg = *set;
    rlx_cu_pdl = rlx_cu_dev->pdl_hw && !set->cuda_no_pdl;
}

static rlx_status cuda_run(const rlx_backend *b, rlx_schedule *s, const rlx_run_ctx *ctx)
{
    cu_scope on(b);
    cu_device *d = rlx_cu_dev;
    pthread_mutex_lock(&d->lock);
    rlx_status st = RLX_OK;
    /* the running session's settings for the kernels it launches: what a launch
     * reads (the attention's split and warps, which also sized its scratch
     * at compile, PDL) must be what its compile read, whichever session
     * was compiled last */
    const rlx_backend_settings *set = ctx->settings ? ctx->settings : &rlx_cu_cfg;
    rlx_cu_cfg = *set;
    rlx_cu_pdl = d->pdl_hw && !set->cuda_no_pdl;
    bool bracket = set->cuda_profile_run >= 0 && (long)ctx->run_index == set->cuda_profile_run;
    if (bracket)
        cudaProfilerStart();
    cu_graph_state *gs = (cu_graph_state *)s->backend_state;
    cudaError_t e = cudaSuccess;
    if (gs ? gs->random : has_random(s)) {
        *d->pinned_run_index = ctx->run_index;
        e = rlx_cu_set_run_index(d->pinned_run_index);
    }
    if (e != cudaSuccess) {
        st = rlx_set_error(RLX_ERR_DEVICE, "cuda: setting the run index failed: %s", cudaGetErrorString(e));
    } else {
        if (gs && (gs->n_pre || gs->n_pack) && gs->dirty) {
            st = launch_some(s, ctx, gs->skip, 1);
            gs->dirty = st != RLX_OK;
        }
        if (st != RLX_OK) {
            /* reported below */
        } else if (gs) {
            if ((e = cudaGraphLaunch(gs->exec, rlx_cu_stream)) != cudaSuccess)
                st = rlx_set_error(RLX_ERR_DEVICE, "cuda: graph launch failed: %s", cudaGetErrorString(e));
        } else {
            st = launch_all(s, ctx);
        }
    }
    e = cudaStreamSynchronize(rlx_cu_stream);
    if (bracket)
        cudaProfilerStop();
    if (st == RLX_OK && e != cudaSuccess)
        st = rlx_set_error(RLX_ERR_DEVICE, "cuda: run failed: %s", cudaGetErrorString(e));
    if (d->host_fault->code) {
        const rlx_graph *g = s->graph;
        int id = d->host_fault->node;
        const rlx_node_data *n = g && id >= 0 && id < g->n_nodes ? &g->nodes[id] : NULL;
        if (st == RLX_OK)
            st = rlx_set_error(RLX_ERR_RUNTIME, "cuda: node %d (%s%s%s%s): index %lld out of range [0, %lld)", id,
                               n ? rlx_op_name(n->op) : "?", n && n->name ? " '" : "", n && n->name ? n->name : "",
                               n && n->name ? "'" : "", d->host_fault->value, d->host_fault->bound);
        memset(d->host_fault, 0, sizeof *d->host_fault);
    }
    pthread_mutex_unlock(&d->lock);
    return st;
}

/* The instances, one per device ordinal, made on first use under the lock
 * and kept for the process (a CUDA context lives as long). */
static pthread_mutex_t instances_lock = PTHREAD_MUTEX_INITIALIZER;
static rlx_backend instances[CU_MAX_DEVICES];
static cu_device *devices[CU_MAX_DEVICES];

static rlx_backend instance_table(cu_device *d)
{
    rlx_backend b;
    memset(&b, 0, sizeof b);
    b.name = "cuda";
    b.device = RLX_DEVICE_CUDA;
    b.index = d->index;
    b.self = d;
    b.alignment = 256;
    b.max_buffer = cuda_max_buffer;
    b.supports = cuda_supports;
    b.inplace_elementwise = true;
    b.scratch_bytes = cuda_scratch;
    b.alloc = cuda_alloc;
    b.free = cuda_free;
    b.upload = cuda_upload;
    b.download = cuda_download;
    b.prepare = cuda_prepare;
    b.release = cuda_release;
    b.finalize = cuda_finalize;
    b.release_schedule = cuda_release_schedule;
    b.run = cuda_run;
    b.keep_bytes = cuda_keep_bytes;
    b.copy_device = cuda_copy_device;
    b.configure = cuda_configure;
    return b;
}

extern "C" int rlx_cuda_device_count(void) { return device_count(); }

extern "C" rlx_status rlx_cuda_backend(int index, const rlx_backend **out)
{
    *out = NULL;
    int n = device_count();
    if (n == 0) {
        int drv = 0;
        cudaError_t e = cudaGetDeviceCount(&drv);
        cudaGetLastError();
        return rlx_set_error(RLX_ERR_DEVICE, "cuda:%d: no CUDA device: cudaGetDeviceCount says %s", index,
                             e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    }
    if (index < 0 || index >= n || index >= CU_MAX_DEVICES) {
        if (n == 1)
            return rlx_set_error(RLX_ERR_DEVICE, "cuda:%d: no such device: this machine has 1 CUDA device (cuda:0)",
                                 index);
        return rlx_set_error(RLX_ERR_DEVICE,
                             "cuda:%d: no such device: this machine has %d CUDA devices (cuda:0 to cuda:%d)", index, n,
                             n - 1);
    }
    pthread_once(&table_once, build_table);
    rlx_status st = RLX_OK;
    pthread_mutex_lock(&instances_lock);
    if (!devices[index]) {
        cu_device *d = (cu_device *)rlx_calloc(1, sizeof *d);
        if (!d)
            st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cuda:%d: out of memory", index);
        else if ((st = init_device(d, index)) != RLX_OK)
            free(d);
        else {
            instances[index] = instance_table(d);
            devices[index] = d;
        }
    }
    if (st == RLX_OK)
        *out = &instances[index];
    pthread_mutex_unlock(&instances_lock);
    return st;
}
