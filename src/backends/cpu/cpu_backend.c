/* cpu_backend.c - the CPU reference backend: kernel table, claim, host
 * memory and the schedule loop.  Every other backend is tested against it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/cpu/cpu_conv.h"
#include "backends/cpu/cpu_kernels.h"

#define CPU_TABLE_SIZE 256
static rlx_cpu_kernel kernel_table[CPU_TABLE_SIZE];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    rlx_cpu_register_elementwise(kernel_table);
    rlx_cpu_register_matmul(kernel_table);
    rlx_cpu_register_reduce(kernel_table);
    rlx_cpu_register_norm(kernel_table);
    rlx_cpu_register_shape(kernel_table);
    rlx_cpu_register_nn(kernel_table);
    rlx_cpu_register_conv(kernel_table);
    rlx_cpu_register_random(kernel_table);
    rlx_cpu_register_fused(kernel_table);
    rlx_cpu_register_quant(kernel_table);
    rlx_cpu_register_int8(kernel_table);
    rlx_cpu_register_int8_conv(kernel_table);
    rlx_cpu_register_train(kernel_table);
}

static const rlx_cpu_kernel *kernel_of(rlx_op op)
{
    pthread_once(&table_once, build_table);
    if ((unsigned)op >= CPU_TABLE_SIZE || !kernel_table[op].fn)
        return NULL;
    return &kernel_table[op];
}

bool rlx_cpu_has_kernel(rlx_op op) { return kernel_of(op) != NULL; }

static size_t cpu_max_buffer(const rlx_backend *b)
{
    (void)b;
    return (size_t)1 << 46;
}

static bool cpu_supports(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    const rlx_op_info *info = rlx_op_info_of(n->op);
    if (info && (info->flags & RLX_OPF_LEAF) && !(info->flags & RLX_OPF_RANDOM))
        return true;
    /* channels-last f32 convs where oneDNN has one (conv_dnnl.c) and f32
     * pooling (kernels_nn.c); other channels-last convs and pools are
     * lowered to NCHW with transposes */
    if (rlx_node_layout(n) != RLX_LAYOUT_NCHW)
        return ((n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_BIAS_ACT) && rlx_cpu_conv_nhwc_claim(g, n)) ||
               rlx_cpu_pool_nhwc_claim(g, n);
    const rlx_cpu_kernel *k = kernel_of(n->op);
    return k && (!k->claims || k->claims(g, n));
}

static size_t cpu_scratch(const rlx_graph *g, rlx_node id, int threads)
{
    const rlx_cpu_kernel *k = kernel_of(g->nodes[id].op);
    return (k && k->scratch) ? k->scratch(g, &g->nodes[id], threads) : 0;
}

/* Arenas of at least 2 MiB (a model's weights, a long context's cache)
 * start on a 2 MiB boundary and ask for transparent huge pages, where
 * the system grants them on request (the usual `madvise` setting): a
 * decode step streams every weight once, and with 4 KiB pages the f32
 * matrix-vector products of decoder-small ran at 0.8 of their speed on
 * huge pages (1 thread).  Zeroing the arena then faults in 2 MiB at a
 * time. */
#define HUGE_PAGE ((size_t)2 << 20)

static rlx_status cpu_alloc(const rlx_backend *b, size_t bytes, void **ptr)
{
    (void)b;
    /* 64-byte aligned, zeroed so padding bytes are defined */
    size_t sz = (bytes + 63) / 64 * 64, align = 64;
#ifdef MADV_HUGEPAGE
    if (sz >= HUGE_PAGE) {
        align = HUGE_PAGE;
        sz = (sz + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    }
#endif
    void *p = NULL;
    if (rlx_alloc_injected_failure() || posix_memalign(&p, align, sz ? sz : 64) != 0 || !p)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "cannot allocate an arena of %zu bytes", bytes);
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE)
        (void)madvise(p, sz, MADV_HUGEPAGE); /* a request: refused, the pages stay small */
#endif
    memset(p, 0, sz ? sz : 64);
    *ptr = p;
    return RLX_OK;
}

static void cpu_free(const rlx_backend *b, void *p)
{
    (void)b;
    free(p);
}

static rlx_status cpu_copy(const rlx_backend *b, void *dst, const void *src, size_t bytes)
{
    (void)b;
    if (bytes)
        memmove(dst, src, bytes);
    return RLX_OK;
}

static rlx_status cpu_prepare(const rlx_backend *b, const rlx_graph *g, rlx_thunk *t)
{
    (void)b;
    const rlx_node_data *n = &g->nodes[t->id];
    const rlx_op_info *info = rlx_op_info_of(n->op);
    if (info && (info->flags & RLX_OPF_LEAF) && !(info->flags & RLX_OPF_RANDOM)) {
        t->fn = NULL;
        return RLX_OK;
    }
    const rlx_cpu_kernel *k = kernel_of(n->op);
    if (!k)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "cpu backend has no kernel for %s", rlx_op_name(n->op));
    t->fn = k->fn;
    return k->prepare ? k->prepare(g, t) : RLX_OK;
}

static void cpu_release(const rlx_backend *b, rlx_thunk *t)
{
    (void)b;
    const rlx_cpu_kernel *k = t->node ? kernel_of(t->node->op) : NULL;
    if (k && k->release && t->state)
        k->release(t);
    free(t->state);
    t->state = NULL;
}

/* Whether a thunk runs: it has a kernel, and its branch guard, if any, holds. */
static bool runs(const rlx_thunk *t) { return t->fn && (!t->guard || (*t->guard != 0) == t->guard_when); }

/* RLX_PROFILE=1 (the settings' profile): time per op kind for each run, on stderr. */
static rlx_status cpu_run_profiled(rlx_schedule *s, const rlx_run_ctx *ctx)
{
    double per_op[CPU_TABLE_SIZE] = {0};
    int calls[CPU_TABLE_SIZE] = {0};
    for (int i = 0; i < s->n_thunks; i++) {
        const rlx_thunk *t = &s->thunks[i];
        if (!runs(t))
            continue;
        double t0 = rlx_now_ms();
        rlx_status st = t->fn(t, ctx);
        per_op[t->node->op] += rlx_now_ms() - t0;
        calls[t->node->op]++;
        if (st != RLX_OK)
            return st;
    }
    fprintf(stderr, "[rlx cpu] profile (ms):");
    for (int op = 0; op < CPU_TABLE_SIZE; op++)
        if (calls[op])
            fprintf(stderr, " %s %.2f/%d", rlx_op_name((rlx_op)op), per_op[op], calls[op]);
    fprintf(stderr, "\n");
    return RLX_OK;
}

static rlx_status cpu_run(const rlx_backend *b, rlx_schedule *s, const rlx_run_ctx *ctx)
{
    (void)b;
    if (ctx->settings && ctx->settings->profile)
        return cpu_run_profiled(s, ctx);
    for (int i = 0; i < s->n_thunks; i++) {
        const rlx_thunk *t = &s->thunks[i];
        if (!runs(t))
            continue;
        rlx_status st = t->fn(t, ctx);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

static const rlx_backend cpu_backend = {
    .name = "cpu",
    .device = RLX_DEVICE_CPU,
    .alignment = 64,
    .max_buffer = cpu_max_buffer,
    .supports = cpu_supports,
    .inplace_elementwise = true,
    .scratch_bytes = cpu_scratch,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .prepare = cpu_prepare,
    .release = cpu_release,
    .finalize = NULL,
    .release_schedule = NULL,
    .run = cpu_run,
};

const rlx_backend *rlx_cpu_backend(void) { return &cpu_backend; }
