/* cuda_util.cu - what the CUDA backend's files share, below all of them:
 * the device a thread works on, the settings in force, the tuners' memos,
 * error messages naming a thunk, the strided-walk setup and the timing of a
 * captured launch sequence.  cuda_backend.cu (device, arena, graph) and
 * every k_*.cu call these; this file calls none of them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"

extern "C" {
#include "core/error.h"
}

thread_local cu_device *rlx_cu_dev;
thread_local bool rlx_cu_pdl;

static rlx_backend_settings default_settings(void)
{
    rlx_backend_settings s;
    rlx_backend_settings_init(&s);
    return s;
}
thread_local rlx_backend_settings rlx_cu_cfg = default_settings();

bool rlx_cu_first_on_device(unsigned *done)
{
    unsigned bit = 1u << (rlx_cu_dev->index % CU_MAX_DEVICES);
    return !(__atomic_fetch_or(done, bit, __ATOMIC_RELAXED) & bit);
}

bool rlx_cu_memo_find(cu_memo *m, const int64_t *key, int *val)
{
    bool found = false;
    pthread_mutex_lock(&m->lock);
    for (int i = 0; i < m->n && !found; i++)
        if (!memcmp(m->e[i].key, key, sizeof m->e[i].key)) {
            memcpy(val, m->e[i].val, sizeof m->e[i].val);
            found = true;
        }
    pthread_mutex_unlock(&m->lock);
    return found;
}

void rlx_cu_memo_add(cu_memo *m, const int64_t *key, const int *val)
{
    pthread_mutex_lock(&m->lock);
    if (m->n < (int)(sizeof m->e / sizeof m->e[0])) {
        memcpy(m->e[m->n].key, key, sizeof m->e[0].key);
        memcpy(m->e[m->n++].val, val, sizeof m->e[0].val);
    }
    pthread_mutex_unlock(&m->lock);
}

rlx_status rlx_cu_fail(const rlx_thunk *t, rlx_status s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!t)
        return rlx_set_error(s, "cuda: %s", msg);
    if (t->node->name)
        return rlx_set_error(s, "cuda: node %d (%s '%s'): %s", t->id, rlx_op_name(t->node->op), t->node->name, msg);
    return rlx_set_error(s, "cuda: node %d (%s): %s", t->id, rlx_op_name(t->node->op), msg);
}

rlx_status rlx_cu_error(const rlx_thunk *t, cudaError_t e, const char *what)
{
    return rlx_cu_fail(t, RLX_ERR_DEVICE, "%s: %s", what, cudaGetErrorString(e));
}

bool rlx_cu_float_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (!cu_is_f(n->dtype))
        return false;
    for (int i = 0; i < n->n_in; i++)
        if (!cu_is_f(g->nodes[n->in[i]].dtype))
            return false;
    return true;
}

void rlx_cu_walk_init(cu_walk *w, int ndim, const int64_t *dims, int nops, const int64_t (*strides)[CU_MAX_DIMS])
{
    memset(w, 0, sizeof *w);
    w->nops = nops;
    w->total = 1;
    int n = 0;
    for (int i = 0; i < ndim; i++) {
        w->total *= dims[i];
        if (dims[i] == 1)
            continue;
        bool merge = n > 0;
        for (int k = 0; k < nops && merge; k++)
            if (w->st[k][n - 1] != dims[i] * strides[k][i])
                merge = false;
        if (merge) {
            w->dims[n - 1] *= dims[i];
            for (int k = 0; k < nops; k++)
                w->st[k][n - 1] = strides[k][i];
            continue;
        }
        w->dims[n] = dims[i];
        for (int k = 0; k < nops; k++)
            w->st[k][n] = strides[k][i];
        n++;
    }
    w->nd = n;
}

bool rlx_cu_walk_divmod(const cu_walk *w, int vec_elems, cu_divmod *d)
{
    memset(d, 0, sizeof *d);
    d->total = w->total;
    d->vec = vec_elems > 1 && w->total % vec_elems == 0;
    for (int k = 0; k < w->nops; k++) {
        int lo = -1, hi = -1;
        for (int i = 0; i < w->nd; i++)
            if (w->st[k][i]) {
                if (hi >= 0 && hi != i - 1)
                    return false; /* two separate runs */
                lo = lo < 0 ? i : lo;
                hi = i;
            }
        int64_t div = 1, mod = 1;
        if (hi >= 0) {
            if (w->st[k][hi] != 1)
                return false;
            for (int i = lo; i < hi; i++)
                if (w->st[k][i] != w->st[k][i + 1] * w->dims[i + 1])
                    return false;
            for (int i = hi + 1; i < w->nd; i++)
                div *= w->dims[i];
            for (int i = lo; i <= hi; i++)
                mod *= w->dims[i];
        }
        d->div[k] = div;
        d->mod[k] = mod;
        if (!(mod == 1 || div % vec_elems == 0 || (div == 1 && mod % vec_elems == 0)))
            d->vec = 0;
    }
    return true;
}

/* Device time of one launch sequence: run once (warm-up, lazy module
 * loads), then `reps` launches captured into a CUDA graph and replayed
 * between events, so kernels shorter than a host launch are not timed by
 * it.  1e30 when anything fails or the stream is being captured. */
float rlx_cu_time_captured(bool (*launch)(void *), void *arg, int reps)
{
    cudaStreamCaptureStatus cs;
    if (cudaStreamIsCapturing(rlx_cu_stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
        return 1e30f;
    float ms = 1e30f;
    if (!launch(arg) || cudaStreamSynchronize(rlx_cu_stream) != cudaSuccess) {
        cudaGetLastError();
        return ms;
    }
    cudaEvent_t a = NULL, b = NULL;
    cudaGraph_t gr = NULL;
    cudaGraphExec_t ex = NULL;
    bool ok = cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess &&
              cudaStreamBeginCapture(rlx_cu_stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
        for (int r = 0; r < reps && ok; r++)
            ok = launch(arg);
        if (cudaStreamEndCapture(rlx_cu_stream, &gr) != cudaSuccess)
            ok = false;
    }
    float t = 0;
    if (ok && gr && cudaGraphInstantiate(&ex, gr, 0) == cudaSuccess &&
        cudaGraphLaunch(ex, rlx_cu_stream) == cudaSuccess && cudaEventRecord(a, rlx_cu_stream) == cudaSuccess &&
        cudaGraphLaunch(ex, rlx_cu_stream) == cudaSuccess && cudaEventRecord(b, rlx_cu_stream) == cudaSuccess &&
        cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&t, a, b) == cudaSuccess)
        ms = t / reps;
    if (ex)
        cudaGraphExecDestroy(ex);
    if (gr)
        cudaGraphDestroy(gr);
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    cudaStreamSynchronize(rlx_cu_stream);
    cudaGetLastError();
    rlx_clear_error();
    return ms;
}
