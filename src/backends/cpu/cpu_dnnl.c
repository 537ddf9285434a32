/* cpu_dnnl.c - oneDNN opened for the CPU's kernels (cpu_dnnl.h). */
#include "backends/cpu/cpu_dnnl.h"

#ifdef RLX_HAVE_DNNL_H
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "backends/cpu/cpu_kernels.h"

rlx_dnnl_api rlx_dnnl;
dnnl_engine_t rlx_dnnl_engine;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;
static bool dnnl_ok;

static void load_dnnl(void)
{
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define DNNL_SYM(f)                                \
    if (!(*(void **)&rlx_dnnl.f = dlsym(h, #f))) { \
        dlclose(h);                                \
        return;                                    \
    }
    RLX_DNNL_FUNCS(DNNL_SYM)
#undef DNNL_SYM
    dnnl_ok = rlx_dnnl.dnnl_engine_create(&rlx_dnnl_engine, dnnl_cpu, 0) == dnnl_success;
}

bool rlx_dnnl_available(void)
{
    pthread_once(&dnnl_once, load_dnnl);
    return dnnl_ok;
}

/* oneDNN's eltwise post-op for an RLX activation; false for one it lacks. */
static bool dnnl_act_of(int act, dnnl_alg_kind_t *alg, float *alpha)
{
    *alpha = 0.0f;
    switch (act) {
    case RLX_ACT_RELU: *alg = dnnl_eltwise_relu; return true;
    case RLX_ACT_GELU: *alg = dnnl_eltwise_gelu_erf; return true;
    case RLX_ACT_GELU_TANH: *alg = dnnl_eltwise_gelu_tanh; return true;
    case RLX_ACT_SILU: *alg = dnnl_eltwise_swish, *alpha = 1.0f; return true;
    default: return false;
    }
}

dnnl_primitive_desc_t rlx_dnnl_pd(const_dnnl_op_desc_t desc, bool sum, int act)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_alg_kind_t alg;
    float alpha;
    if (rlx_dnnl.dnnl_primitive_attr_create(&attr) ||
        rlx_dnnl.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto out;
    if ((sum || act != RLX_ACT_NONE) &&
        (rlx_dnnl.dnnl_post_ops_create(&po) || (sum && rlx_dnnl.dnnl_post_ops_append_sum(po, 1.0f)) ||
         (act != RLX_ACT_NONE &&
          (!dnnl_act_of(act, &alg, &alpha) || rlx_dnnl.dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, 0.0f))) ||
         rlx_dnnl.dnnl_primitive_attr_set_post_ops(attr, po)))
        goto out;
    if (rlx_dnnl.dnnl_primitive_desc_create(&pd, desc, attr, rlx_dnnl_engine, NULL))
        pd = NULL;
out:
    if (po)
        rlx_dnnl.dnnl_post_ops_destroy(po);
    if (attr)
        rlx_dnnl.dnnl_primitive_attr_destroy(attr);
    return pd;
}

dnnl_primitive_t rlx_dnnl_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t r = NULL;
    if (rlx_dnnl.dnnl_reorder_primitive_desc_create(&rpd, from, rlx_dnnl_engine, to, rlx_dnnl_engine, NULL) ==
            dnnl_success &&
        rlx_dnnl.dnnl_primitive_create(&r, rpd) != dnnl_success)
        r = NULL;
    if (rpd)
        rlx_dnnl.dnnl_primitive_desc_destroy(rpd);
    return r;
}

size_t rlx_dnnl_round64(size_t bytes) { return (bytes + 63) / 64 * 64; }

void *rlx_dnnl_alloc64(size_t bytes) { return aligned_alloc(64, rlx_dnnl_round64(bytes) + 64); }

/* One buffer per thread, grown to the largest part it has run, so that a
 * model holds one part's worth per thread rather than the sum over its
 * nodes (ResNet-50 at batch 16: 630 MB of Winograd scratchpads). */
static pthread_key_t work_key;
static pthread_once_t work_once = PTHREAD_ONCE_INIT;
static bool work_key_ok;

typedef struct thread_work_buf {
    size_t bytes;
    char *data;
} thread_work_buf;

static void free_thread_work(void *p)
{
    thread_work_buf *b = p;
    free(b->data);
    free(b);
}

static void make_work_key(void) { work_key_ok = pthread_key_create(&work_key, free_thread_work) == 0; }

char *rlx_dnnl_thread_work(size_t bytes)
{
    pthread_once(&work_once, make_work_key);
    if (!work_key_ok)
        return NULL;
    thread_work_buf *b = pthread_getspecific(work_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b)) || pthread_setspecific(work_key, b)) {
            free(b);
            return NULL;
        }
    }
    if (b->bytes < bytes) {
        char *d = rlx_dnnl_alloc64(bytes);
        if (!d)
            return NULL;
        free(b->data);
        b->data = d;
        b->bytes = bytes;
    }
    return b->data;
}

#else
typedef int rlx_cpu_dnnl_unused; /* no oneDNN header at build time (or AddressSanitizer) */
#endif
