/* conv_dnnl.c - channels-last f32 convolutions through oneDNN's primitives.
 *
 * oneDNN's convolutions for plain NCHW tensors are im2col + GEMM, no faster
 * than RLX's own; its channels-last (NHWC) kernels (brgconv, brdgmm for
 * depthwise) ran 1.2-2.5x faster than either on ResNet-50's and PaddleOCR's
 * shapes here.  So the CPU claims a channels-last f32 2-D conv where
 * oneDNN can build one, the layout stage turns those convs (and the
 * elementwise ops between them) channels-last, and each claimed node gets
 * its primitive once, at prepare: weights in the layout the primitive
 * prefers (reordered once when they are a constant, at every run
 * otherwise), bias and activation as its epilogue, its own scratchpad.
 *
 * libdnnl.so.2 is opened at first use, as gemm.c does (no link
 * dependency); the build needs only its header (Debian: libdnnl-dev).
 * Without either, nothing is claimed channels-last and convs stay NCHW. */
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_conv.h"
#include "backends/cpu/cpu_window.h"

/* Not under AddressSanitizer: at exit, LeakSanitizer's scan of the threads
 * crashes ("Tracer caught signal 11") once a oneDNN primitive has run here;
 * the path passes ASan and UBSan with detect_leaks=0. */
#if defined(__has_include) && !defined(__SANITIZE_ADDRESS__)
#if __has_include(<oneapi/dnnl/dnnl.h>)
#define RLX_HAVE_DNNL_H 1
#endif
#endif

#ifdef RLX_HAVE_DNNL_H
#include <oneapi/dnnl/dnnl.h>

/* The entry points used, resolved with dlsym. */
#define DNNL_FUNCS(X)                             \
    X(dnnl_engine_create)                         \
    X(dnnl_stream_create)                         \
    X(dnnl_stream_wait)                           \
    X(dnnl_stream_destroy)                        \
    X(dnnl_memory_desc_init_by_tag)               \
    X(dnnl_memory_desc_get_size)                  \
    X(dnnl_memory_desc_equal)                     \
    X(dnnl_dilated_convolution_forward_desc_init) \
    X(dnnl_post_ops_create)                       \
    X(dnnl_post_ops_append_eltwise)               \
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

#define DNNL_PTR(f) __typeof__(f) *f;
static struct {
    DNNL_FUNCS(DNNL_PTR)
} D;
#undef DNNL_PTR

static dnnl_engine_t engine;
static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;
static bool dnnl_ok;

static void load_dnnl_conv(void)
{
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define DNNL_SYM(f)                         \
    if (!(*(void **)&D.f = dlsym(h, #f))) { \
        dlclose(h);                         \
        return;                             \
    }
    DNNL_FUNCS(DNNL_SYM)
#undef DNNL_SYM
    dnnl_ok = D.dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
}

static bool dnnl_available(void)
{
    pthread_once(&dnnl_once, load_dnnl_conv);
    return dnnl_ok;
}

/* Everything one node's primitive needs, built at prepare (t->state). */
typedef struct conv_dnnl {
    dnnl_primitive_t prim, wreorder; /* wreorder: plain -> preferred weights; NULL if the same */
    dnnl_stream_t stream;
    dnnl_memory_t src, wplain, wprim, bias, dst, scratch;
    void *wbuf, *sbuf; /* the preferred weights, the scratchpad */
    bool wconst;       /* weights reordered once, when built */
    int threads;       /* the team size it was built for (0: not built) */
} conv_dnnl;

static bool act_alg(int act, dnnl_alg_kind_t *alg, float *alpha)
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

/* The primitive descriptor of a channels-last conv node with inputs of
 * shapes xs (x [N, H, W, C]) and ws (weight [O, KH, KW, C/G]); the plain
 * weights' descriptor in *wmd.  NULL where oneDNN has no such conv. */
static dnnl_primitive_desc_t conv_pd(const rlx_node_data *n, const rlx_shape *xs, const rlx_shape *ws,
                                     dnnl_memory_desc_t *wmd)
{
    const rlx_conv_params *p = &n->attrs.conv.p;
    int64_t N = xs->dims[0], H = xs->dims[1], W = xs->dims[2], C = xs->dims[3];
    int64_t O = ws->dims[0], KH = ws->dims[1], KW = ws->dims[2], G = p->groups;
    int64_t OH = n->shape.dims[1], OW = n->shape.dims[2];
    dnnl_dims_t sd = {N, C, H, W}, dd = {N, O, OH, OW}, bd = {O};
    dnnl_dims_t st = {p->stride[0], p->stride[1]}, dl = {p->dilation[0] - 1, p->dilation[1] - 1};
    /* the end pads that give the node's output size */
    dnnl_dims_t pl = {p->pads[0], p->pads[1]};
    dnnl_dims_t pr = {(OH - 1) * p->stride[0] + (KH - 1) * p->dilation[0] + 1 - H - pl[0],
                      (OW - 1) * p->stride[1] + (KW - 1) * p->dilation[1] + 1 - W - pl[1]};
    dnnl_memory_desc_t smd, dmd, bmd, wany;
    if (G == 1) {
        dnnl_dims_t wd = {O, C, KH, KW};
        if (D.dnnl_memory_desc_init_by_tag(wmd, 4, wd, dnnl_f32, dnnl_ohwi) ||
            D.dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_f32, dnnl_format_tag_any))
            return NULL;
    } else {
        dnnl_dims_t wd = {G, O / G, C / G, KH, KW};
        if (D.dnnl_memory_desc_init_by_tag(wmd, 5, wd, dnnl_f32, dnnl_gohwi) ||
            D.dnnl_memory_desc_init_by_tag(&wany, 5, wd, dnnl_f32, dnnl_format_tag_any))
            return NULL;
    }
    if (D.dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, dnnl_nhwc) ||
        D.dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, dnnl_nhwc) ||
        D.dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x))
        return NULL;
    dnnl_convolution_desc_t cd;
    if (D.dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct, &smd, &wany,
                                                     n->attrs.conv.has_bias ? &bmd : NULL, &dmd, st, dl, pl, pr))
        return NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    int act = n->op == RLX_OP_CONV_BIAS_ACT ? n->attrs.conv.act : RLX_ACT_NONE;
    dnnl_alg_kind_t alg;
    float alpha;
    if (D.dnnl_primitive_attr_create(&attr) ||
        D.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user))
        goto out;
    if (act != RLX_ACT_NONE) {
        if (!act_alg(act, &alg, &alpha) || D.dnnl_post_ops_create(&po) ||
            D.dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, 0.0f) || D.dnnl_primitive_attr_set_post_ops(attr, po))
            goto out;
    }
    if (D.dnnl_primitive_desc_create(&pd, &cd, attr, engine, NULL))
        pd = NULL;
out:
    if (po)
        D.dnnl_post_ops_destroy(po);
    if (attr)
        D.dnnl_primitive_attr_destroy(attr);
    return pd;
}

bool rlx_cpu_conv_nhwc_claim(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *xn = &g->nodes[n->in[0]], *wn = &g->nodes[n->in[1]];
    if (n->attrs.conv.layout != RLX_LAYOUT_NHWC || xn->shape.ndim != 4 || xn->dtype != RLX_F32 ||
        wn->dtype != RLX_F32 || (n->attrs.conv.has_bias && g->nodes[n->in[2]].dtype != RLX_F32) ||
        n->dtype != RLX_F32 || rlx_shape_numel(&n->shape) == 0 || !dnnl_available())
        return false;
    dnnl_memory_desc_t wmd;
    dnnl_primitive_desc_t pd = conv_pd(n, &xn->shape, &wn->shape, &wmd);
    if (!pd)
        return false;
    D.dnnl_primitive_desc_destroy(pd);
    return true;
}

/* Frees what build made and marks c unbuilt. */
static void free_built(conv_dnnl *c)
{
    dnnl_primitive_t prims[] = {c->prim, c->wreorder};
    for (size_t i = 0; i < 2; i++)
        if (prims[i])
            D.dnnl_primitive_destroy(prims[i]);
    dnnl_memory_t mems[] = {c->src, c->wplain, c->wprim, c->bias, c->dst, c->scratch};
    for (size_t i = 0; i < sizeof mems / sizeof mems[0]; i++)
        if (mems[i])
            D.dnnl_memory_destroy(mems[i]);
    if (c->stream)
        D.dnnl_stream_destroy(c->stream);
    free(c->wbuf);
    free(c->sbuf);
    memset(c, 0, sizeof *c);
}

void rlx_cpu_conv_nhwc_release(rlx_thunk *t)
{
    if (t->state)
        free_built(t->state);
}

static void *alloc64(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64 + 64); }

/* Plain weights -> the primitive's, on the calling thread count. */
static rlx_status reorder_weights(conv_dnnl *c, const void *w, int threads)
{
    if (!c->wreorder)
        return RLX_OK;
    D.dnnl_memory_set_data_handle(c->wplain, (void *)w);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, c->wplain}, {DNNL_ARG_TO, c->wprim}};
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    dnnl_status_t s = D.dnnl_primitive_execute(c->wreorder, c->stream, 2, args);
    if (s == dnnl_success)
        s = D.dnnl_stream_wait(c->stream);
    omp_set_num_threads(saved);
    return s == dnnl_success ? RLX_OK : rlx_set_error(RLX_ERR_DEVICE, "oneDNN weight reorder failed (%d)", (int)s);
}

/* The primitive for a team of `threads` (oneDNN sizes its work split and
 * scratchpad by the OpenMP team at creation, and runs several times slower
 * on a smaller one), with the weights reordered once if constant (a
 * constant's data is in place before the thunks are prepared). */
static rlx_status build(conv_dnnl *c, const rlx_thunk *t, int threads)
{
    const rlx_node_data *n = t->node;
    c->threads = threads;
    dnnl_memory_desc_t wmd;
    dnnl_primitive_desc_t pd = conv_pd(n, &t->in_node[0]->shape, &t->in_node[1]->shape, &wmd), rpd = NULL;
    if (!pd)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "oneDNN has no channels-last conv of this shape");
    const dnnl_memory_desc_t *smd = D.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *wpd = D.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *dmd = D.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *spd = D.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t sbytes = spd ? D.dnnl_memory_desc_get_size(spd) : 0;
    bool same = D.dnnl_memory_desc_equal(&wmd, wpd);
    rlx_status st = RLX_OK;
    if (D.dnnl_primitive_create(&c->prim, pd) || D.dnnl_stream_create(&c->stream, engine, dnnl_stream_default_flags) ||
        D.dnnl_memory_create(&c->src, smd, engine, DNNL_MEMORY_NONE) ||
        D.dnnl_memory_create(&c->dst, dmd, engine, DNNL_MEMORY_NONE) ||
        D.dnnl_memory_create(&c->wplain, &wmd, engine, DNNL_MEMORY_NONE)) {
        st = rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv primitive");
        goto out;
    }
    if (n->attrs.conv.has_bias) {
        const dnnl_memory_desc_t *bmd = D.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
        if (D.dnnl_memory_create(&c->bias, bmd, engine, DNNL_MEMORY_NONE)) {
            st = rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv primitive");
            goto out;
        }
    }
    if (sbytes && (!(c->sbuf = alloc64(sbytes)) || D.dnnl_memory_create(&c->scratch, spd, engine, c->sbuf))) {
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for its oneDNN scratchpad");
        goto out;
    }
    if (!same) {
        if (!(c->wbuf = alloc64(D.dnnl_memory_desc_get_size(wpd))) ||
            D.dnnl_memory_create(&c->wprim, wpd, engine, c->wbuf) ||
            D.dnnl_reorder_primitive_desc_create(&rpd, &wmd, engine, wpd, engine, NULL) ||
            D.dnnl_primitive_create(&c->wreorder, rpd)) {
            st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for its reordered weights");
            goto out;
        }
        c->wconst = t->in_node[1]->op == RLX_OP_CONSTANT;
        if (c->wconst)
            st = reorder_weights(c, t->in[1], threads);
    }
out:
    if (rpd)
        D.dnnl_primitive_desc_destroy(rpd);
    D.dnnl_primitive_desc_destroy(pd);
    return st;
}

static rlx_status build_for(conv_dnnl *c, const rlx_thunk *t, int threads)
{
    free_built(c);
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    rlx_status st = build(c, t, threads);
    omp_set_num_threads(saved);
    if (st != RLX_OK)
        free_built(c);
    return st;
}

/* The state only: the primitive is built at the first run, for its team. */
rlx_status rlx_cpu_conv_nhwc_prepare(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    if (!dnnl_available())
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "channels-last conv without oneDNN");
    if (!(t->state = calloc(1, sizeof(conv_dnnl))))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for its oneDNN state");
    return RLX_OK;
}

rlx_status rlx_cpu_conv_nhwc(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    conv_dnnl *c = t->state;
    /* one thread unless asked: Debian's oneDNN runs on OpenMP, whose idle
     * team worker spins for milliseconds beside the pool's threads */
    int threads = ctx->threads > 0 ? ctx->threads : 1, team = ctx->settings ? ctx->settings->dnnl_threads : 0;
    threads = team <= 0 ? 1 : team < threads ? team : threads;
    if (rlx_shape_numel(&t->node->shape) == 0)
        return RLX_OK;
    if (c->threads != threads) {
        rlx_status st = build_for(c, t, threads);
        if (st != RLX_OK)
            return st;
    }
    if (c->wreorder && !c->wconst) {
        rlx_status st = reorder_weights(c, t->in[1], threads);
        if (st != RLX_OK)
            return st;
    }
    D.dnnl_memory_set_data_handle(c->src, (void *)t->in[0]);
    D.dnnl_memory_set_data_handle(c->dst, t->out);
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wreorder ? c->wprim : c->wplain}, {DNNL_ARG_DST, c->dst}};
    int na = 3;
    if (!c->wreorder)
        D.dnnl_memory_set_data_handle(c->wplain, (void *)t->in[1]);
    if (c->bias) {
        D.dnnl_memory_set_data_handle(c->bias, (void *)t->in[2]);
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, c->bias};
    }
    if (c->scratch)
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, c->scratch};
    /* oneDNN's OpenMP regions take the calling thread's team size */
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    dnnl_status_t s = D.dnnl_primitive_execute(c->prim, c->stream, na, args);
    if (s == dnnl_success)
        s = D.dnnl_stream_wait(c->stream);
    omp_set_num_threads(saved);
    return s == dnnl_success ? RLX_OK : rlx_cpu_kernel_error(t, "oneDNN conv failed (%d)", (int)s);
}

#else /* no oneDNN header at build time */

bool rlx_cpu_conv_nhwc_claim(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g, (void)n;
    return false;
}

rlx_status rlx_cpu_conv_nhwc_prepare(const rlx_graph *g, rlx_thunk *t)
{
    (void)g, (void)t;
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "channels-last conv without oneDNN");
}

void rlx_cpu_conv_nhwc_release(rlx_thunk *t) { (void)t; }

rlx_status rlx_cpu_conv_nhwc(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    return rlx_cpu_kernel_error(t, "channels-last conv without oneDNN");
}

#endif
