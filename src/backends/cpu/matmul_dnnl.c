/* matmul_dnnl.c - f32 matmul_bias_act with a large constant weight through
 * oneDNN's matmul primitive.
 *
 * The weights are packed once (pack_weights) into the blocked layout the
 * primitive prefers, and the bias (and a ReLU) run inside it while each
 * block of C is still in cache; other activations run after it on each
 * slice, by rlx_cpu_act_f32 (oneDNN's GELU and SiLU lose the tails'
 * relative accuracy that RLX's keep: GELU(-8) is -5e-15, not 0).  On one
 * thread here, for a 128-row slice (mlp's at batch 256 over 2 threads), it
 * ran 3-9% faster than oneDNN's sgemm alone, before the separate bias and
 * activation pass that sgemm needs; at the encoder's 384 x 1536 it ran
 * slower.  So it takes the products whose weight has at least
 * RLX_CPU_MATMUL_PACK_MIN elements, and the rest stay with rlx_sgemm.
 *
 * As conv_dnnl.c does: each primitive is built for one thread (oneDNN
 * runs on OpenMP) and the rows of A are cut into one slice per session
 * thread, run on RLX's pool, sharing the packed weights. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_matmul.h"

#ifdef RLX_HAVE_DNNL_H

static _Atomic long matmul_parts;

/* One slice of A's rows with its primitive. */
typedef struct mm_part {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t a, c, scratch;
    int64_t r0, rows;
    size_t work_bytes;
} mm_part;

typedef struct mm_dnnl {
    mm_part *part;
    int nalloc;  /* parts allocated */
    int nparts;  /* parts built; 0: not built */
    int threads; /* the session threads it was built for */
    dnnl_memory_t w, bias;
    rlx_blob *wbuf; /* the packed weights (a blob: huge pages, zeroed by the system) */
    int64_t M, K, N;
} mm_dnnl;

/* The product's dims: A [M, K] (its leading dims flattened), C [M, N]. */
static void dims_of(const rlx_node_data *n, const rlx_node_data *a, int64_t *M, int64_t *K, int64_t *N)
{
    *K = a->shape.dims[a->shape.ndim - 1];
    *N = n->shape.dims[n->shape.ndim - 1];
    *M = *K && *N ? rlx_shape_numel(&n->shape) / *N : 0;
}

/* Whether node n (a matmul_bias_act of graph g) goes through the primitive:
 * f32, a 2-D constant weight of at least RLX_CPU_MATMUL_PACK_MIN elements,
 * at least RLX_CPU_MATMUL_PACK_MIN_ROWS rows, A not transposed, an f32
 * bias, oneDNN there. */
static bool wanted(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *a = &g->nodes[n->in[0]], *b = &g->nodes[n->in[1]];
    if (n->op != RLX_OP_MATMUL_BIAS_ACT || n->dtype != RLX_F32 || a->dtype != RLX_F32 || b->dtype != RLX_F32 ||
        b->op != RLX_OP_CONSTANT || !b->data || b->shape.ndim != 2 || a->shape.ndim < 2 || n->attrs.mm_act.trans_a)
        return false;
    if (n->attrs.mm_act.has_bias) {
        const rlx_node_data *bias = &g->nodes[n->in[2]];
        if (bias->dtype != RLX_F32 || bias->shape.ndim != 1)
            return false;
    }
    int64_t M, K, N;
    dims_of(n, a, &M, &K, &N);
    return M >= RLX_CPU_MATMUL_PACK_MIN_ROWS && K * N >= RLX_CPU_MATMUL_PACK_MIN && rlx_dnnl_available();
}

static void free_built(mm_dnnl *m)
{
    for (int i = 0; m->part && i < m->nalloc; i++) {
        mm_part *q = &m->part[i];
        if (q->prim)
            rlx_dnnl.dnnl_primitive_destroy(q->prim);
        dnnl_memory_t mems[3] = {q->a, q->c, q->scratch};
        for (int k = 0; k < 3; k++)
            if (mems[k])
                rlx_dnnl.dnnl_memory_destroy(mems[k]);
        if (q->stream)
            rlx_dnnl.dnnl_stream_destroy(q->stream);
    }
    free(m->part);
    if (m->w)
        rlx_dnnl.dnnl_memory_destroy(m->w);
    if (m->bias)
        rlx_dnnl.dnnl_memory_destroy(m->bias);
    if (m->wbuf)
        rlx_blob_unref(m->wbuf);
    int64_t M = m->M, K = m->K, N = m->N;
    memset(m, 0, sizeof *m);
    m->M = M, m->K = K, m->N = N;
}

void rlx_cpu_matmul_dnnl_release(rlx_thunk *t)
{
    if (t->state)
        free_built(t->state);
}

/* The primitive descriptor for `rows` rows; the weights' plain descriptor
 * in *wmd.  NULL where oneDNN has none. */
static dnnl_primitive_desc_t part_pd(const rlx_node_data *n, const mm_dnnl *m, int64_t rows, dnnl_memory_desc_t *wmd)
{
    dnnl_dims_t ad = {rows, m->K}, wd = {m->K, m->N}, cd = {rows, m->N}, bd = {1, m->N};
    dnnl_memory_desc_t amd, wany, cmd, bmd;
    if (rlx_dnnl.dnnl_memory_desc_init_by_tag(&amd, 2, ad, dnnl_f32, dnnl_ab) ||
        rlx_dnnl.dnnl_memory_desc_init_by_tag(wmd, 2, wd, dnnl_f32, n->attrs.mm_act.trans_b ? dnnl_ba : dnnl_ab) ||
        rlx_dnnl.dnnl_memory_desc_init_by_tag(&wany, 2, wd, dnnl_f32, dnnl_format_tag_any) ||
        rlx_dnnl.dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dnnl_f32, dnnl_ab) ||
        rlx_dnnl.dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_f32, dnnl_ab))
        return NULL;
    dnnl_matmul_desc_t md;
    if (rlx_dnnl.dnnl_matmul_desc_init(&md, &amd, &wany, n->attrs.mm_act.has_bias ? &bmd : NULL, &cmd))
        return NULL;
    return rlx_dnnl_pd(&md, false, n->attrs.mm_act.act == RLX_ACT_RELU ? RLX_ACT_RELU : RLX_ACT_NONE);
}

/* Packing by our own loop over the blocked layout's description, on the
 * pool, into a blob (mapped on huge pages where granted and zeroed by the
 * system): a fresh 64 MB heap buffer filled by oneDNN's reorder took 230 ms
 * here, most of it faulting in 4 KiB pages. */
typedef struct pack_job {
    const int64_t *n_off; /* each column's part of its offset */
    const dnnl_memory_desc_t *to;
    const float *w;
    float *dst;
    int64_t K, N;
    int tb;
} pack_job;

/* Index i of dim d's part of an element's offset in a blocked layout (the
 * parts of the two dims add up, with offset0): the index split over the
 * dim's inner blocks (the last listed innermost), the rest by its outer
 * stride. */
static int64_t blocked_part(const dnnl_memory_desc_t *md, int d, int64_t i)
{
    const dnnl_blocking_desc_t *bd = &md->format_desc.blocking;
    int64_t inner = 0, step = 1;
    for (int b = bd->inner_nblks - 1; b >= 0; b--) {
        if ((int)bd->inner_idxs[b] == d) {
            inner += i % bd->inner_blks[b] * step;
            i /= bd->inner_blks[b];
        }
        step *= bd->inner_blks[b];
    }
    return i * bd->strides[d] + inner;
}

static void pack_rows(void *arg, int64_t k0, int64_t k1, int worker)
{
    (void)worker;
    const pack_job *j = arg;
    for (int64_t k = k0; k < k1; k++) {
        float *dk = j->dst + j->to->offset0 + blocked_part(j->to, 0, k);
        if (j->tb)
            for (int64_t n = 0; n < j->N; n++)
                dk[j->n_off[n]] = j->w[n * j->K + k];
        else
            for (int64_t n = 0; n < j->N; n++)
                dk[j->n_off[n]] = j->w[k * j->N + n];
    }
}

/* The weights packed once into wpd's layout (zero in its padding) from the
 * constant's data, over `threads` threads. */
static rlx_status pack_weights(mm_dnnl *m, const dnnl_memory_desc_t *wpd, const float *w, int tb, int threads)
{
    if (wpd->format_kind != dnnl_blocked || wpd->ndims != 2 || wpd->data_type != dnnl_f32)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "oneDNN: a matmul wants its weights in a layout RLX cannot pack");
    size_t bytes = rlx_dnnl.dnnl_memory_desc_get_size(wpd);
    if (!(m->wbuf = rlx_blob_new(bytes)))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "matmul: no memory for its packed weights");
    float *dst = rlx_blob_data(m->wbuf);
    int64_t *n_off = malloc((size_t)m->N * sizeof *n_off);
    if (!n_off)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "matmul: no memory to pack its weights");
    for (int64_t n = 0; n < m->N; n++)
        n_off[n] = blocked_part(wpd, 1, n);
    pack_job j = {n_off, wpd, w, dst, m->K, m->N, tb};
    rlx_cpu_parallel(threads, m->K, pack_rows, &j);
    free(n_off);
    if (rlx_dnnl.dnnl_memory_create(&m->w, wpd, rlx_dnnl_engine, dst))
        return rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a matmul's weights");
    return RLX_OK;
}

/* The slices for `threads` session threads, on one OpenMP thread: each
 * its own primitive, all sharing one packed copy of the weights (where
 * the slices would want different layouts: one slice). */
static rlx_status build(mm_dnnl *m, const rlx_thunk *t, int threads)
{
    const rlx_node_data *n = t->node;
    int parts = m->M < threads ? (int)m->M : threads;
    m->threads = threads;
    if (!(m->part = calloc((size_t)parts, sizeof *m->part)))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "matmul: no memory for its oneDNN state");
    m->nalloc = parts;
    dnnl_memory_desc_t wmd, wpd, bmd;
    for (int i = 0; i < parts; i++) {
        mm_part *q = &m->part[i];
        q->r0 = m->M * i / parts;
        q->rows = m->M * (i + 1) / parts - q->r0;
        dnnl_primitive_desc_t pd = part_pd(n, m, q->rows, &wmd);
        if (!pd)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "oneDNN has no matmul of this shape");
        const dnnl_memory_desc_t *w_i = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
        bool same = i == 0 || rlx_dnnl.dnnl_memory_desc_equal(&wpd, w_i);
        if (i == 0) {
            wpd = *w_i;
            if (n->attrs.mm_act.has_bias)
                bmd = *rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
        }
        const dnnl_memory_desc_t *amd = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
        const dnnl_memory_desc_t *cmd = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
        const dnnl_memory_desc_t *spd = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        q->work_bytes = spd ? rlx_dnnl.dnnl_memory_desc_get_size(spd) : 0;
        dnnl_status_t s = same ? rlx_dnnl.dnnl_primitive_create(&q->prim, pd) : dnnl_unimplemented;
        if (s == dnnl_success)
            s = rlx_dnnl.dnnl_stream_create(&q->stream, rlx_dnnl_engine, dnnl_stream_default_flags);
        if (s == dnnl_success)
            s = rlx_dnnl.dnnl_memory_create(&q->a, amd, rlx_dnnl_engine, DNNL_MEMORY_NONE);
        if (s == dnnl_success)
            s = rlx_dnnl.dnnl_memory_create(&q->c, cmd, rlx_dnnl_engine, DNNL_MEMORY_NONE);
        if (s == dnnl_success && q->work_bytes)
            s = rlx_dnnl.dnnl_memory_create(&q->scratch, spd, rlx_dnnl_engine, DNNL_MEMORY_NONE);
        rlx_dnnl.dnnl_primitive_desc_destroy(pd);
        if (!same) { /* the slices want other layouts: one slice instead */
            free_built(m);
            rlx_status st = build(m, t, 1);
            m->threads = threads;
            return st;
        }
        if (s != dnnl_success)
            return rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a matmul primitive");
    }
    m->nparts = parts;
    if (n->attrs.mm_act.has_bias && rlx_dnnl.dnnl_memory_create(&m->bias, &bmd, rlx_dnnl_engine, DNNL_MEMORY_NONE))
        return rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a matmul's bias");
    rlx_status st = pack_weights(m, &wpd, t->in[1], n->attrs.mm_act.trans_b, threads);
    if (st == RLX_OK)
        matmul_parts += parts;
    return st;
}

rlx_status rlx_cpu_matmul_dnnl_prepare(const rlx_graph *g, rlx_thunk *t)
{
    if (!wanted(g, t->node))
        return RLX_OK; /* t->state stays NULL: rlx_sgemm runs it */
    mm_dnnl *m = calloc(1, sizeof *m);
    if (!m)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "matmul: no memory for its oneDNN state");
    dims_of(t->node, t->in_node[0], &m->M, &m->K, &m->N);
    t->state = m;
    return RLX_OK;
}

typedef struct mm_run {
    mm_dnnl *m;
    const float *a;
    float *c;
    int act;            /* run after the primitive (not RLX_ACT_RELU: inside it) */
    _Atomic int failed; /* a oneDNN status, 0 while every part succeeded; -1: no working memory */
} mm_run;

static void run_parts(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    mm_run *r = arg;
    int saved = omp_get_max_threads();
    omp_set_num_threads(1); /* oneDNN's OpenMP regions take the calling thread's team size */
    for (int64_t i = lo; i < hi; i++) {
        mm_part *q = &r->m->part[i];
        char *work = q->work_bytes ? rlx_dnnl_thread_work(q->work_bytes) : NULL;
        if (q->work_bytes && !work) {
            r->failed = -1;
            continue;
        }
        rlx_dnnl.dnnl_memory_set_data_handle(q->a, (void *)(r->a + q->r0 * r->m->K));
        rlx_dnnl.dnnl_memory_set_data_handle(q->c, r->c + q->r0 * r->m->N);
        dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, q->a}, {DNNL_ARG_WEIGHTS, r->m->w}, {DNNL_ARG_DST, q->c}};
        int na = 3;
        if (r->m->bias)
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, r->m->bias};
        if (q->scratch) {
            rlx_dnnl.dnnl_memory_set_data_handle(q->scratch, work);
            args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, q->scratch};
        }
        dnnl_status_t s = rlx_dnnl.dnnl_primitive_execute(q->prim, q->stream, na, args);
        if (s == dnnl_success)
            s = rlx_dnnl.dnnl_stream_wait(q->stream);
        if (s != dnnl_success)
            r->failed = (int)s;
        else if (r->act != RLX_ACT_NONE && r->act != RLX_ACT_RELU)
            rlx_cpu_act_f32(r->act, r->c + q->r0 * r->m->N, NULL, q->rows * r->m->N);
    }
    omp_set_num_threads(saved);
}

bool rlx_cpu_matmul_dnnl_ready(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    mm_dnnl *m = t->state;
    int threads = ctx->threads > 0 ? ctx->threads : 1;
    if (m->threads == threads)
        return m->nparts > 0;
    free_built(m);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1); /* oneDNN sizes a primitive by the calling thread's team */
    rlx_status st = build(m, t, threads);
    omp_set_num_threads(saved);
    if (st == RLX_OK)
        return true;
    /* declined for this thread count: sgemm runs it, with no error left behind */
    free_built(m);
    m->threads = threads;
    rlx_clear_error();
    return false;
}

rlx_status rlx_cpu_matmul_dnnl(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    mm_dnnl *m = t->state;
    (void)ctx;
    if (m->bias)
        rlx_dnnl.dnnl_memory_set_data_handle(m->bias, (void *)t->in[2]);
    mm_run r = {m, t->in[0], t->out, t->node->attrs.mm_act.act, 0};
    rlx_cpu_parallel_shares(m->nparts, run_parts, &r);
    if (r.failed == -1)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "matmul: no memory for a thread's scratchpad");
    return r.failed == 0 ? RLX_OK : rlx_cpu_kernel_error(t, "oneDNN matmul failed (%d)", r.failed);
}

long rlx_cpu_matmul_dnnl_parts(void) { return rlx_dnnl_available() ? matmul_parts : -1; }

#else /* no oneDNN header at build time (or AddressSanitizer) */

rlx_status rlx_cpu_matmul_dnnl_prepare(const rlx_graph *g, rlx_thunk *t)
{
    (void)g, (void)t;
    return RLX_OK;
}

void rlx_cpu_matmul_dnnl_release(rlx_thunk *t) { (void)t; }

bool rlx_cpu_matmul_dnnl_ready(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)t, (void)ctx;
    return false;
}

rlx_status rlx_cpu_matmul_dnnl(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    return rlx_cpu_kernel_error(t, "matmul through oneDNN without oneDNN");
}

long rlx_cpu_matmul_dnnl_parts(void) { return -1; }

#endif
