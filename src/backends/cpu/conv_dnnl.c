/* conv_dnnl.c - channels-last f32 convolutions through oneDNN's primitives.
 *
 * oneDNN's convolutions for plain NCHW tensors are im2col + GEMM, no faster
 * than RLX's own; its channels-last (NHWC) kernels (brgconv, brdgmm for
 * depthwise) ran 1.2-2.5x faster than either on ResNet-50's and PaddleOCR's
 * shapes here.  So the CPU claims a channels-last f32 2-D conv where
 * oneDNN can build one, the layout stage turns those convs (and the
 * elementwise ops between them) channels-last, and each claimed node gets
 * its primitives once, at its first run: weights in the layout they prefer
 * (reordered once when they are a constant, at every run otherwise), bias
 * and activation as their epilogue.  A residual joins as oneDNN's sum
 * post-op: the output starts as the residual (the planner lets the conv
 * write over it where nothing reads it later; else each slice copies its
 * part in first) and the conv adds onto it before the activation.
 *
 * Debian's oneDNN runs on OpenMP, and an OpenMP team beside RLX's pool
 * spins on the cores the pool needs.  So every primitive is built for and
 * run on one thread, and a conv is cut into slices (runs of images, of
 * one image's output rows, or of a small image's output channels), one
 * per session thread, each its own primitive with its own scratchpad, run
 * on the pool.
 *
 * oneDNN is opened at first use (cpu_dnnl.h); without it, nothing is
 * claimed channels-last and convs stay NCHW. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_conv.h"
#include "backends/cpu/cpu_dnnl.h"
#include "backends/cpu/cpu_pool.h"
#include "backends/cpu/cpu_window.h"

#ifdef RLX_HAVE_DNNL_H

static _Atomic long winograd_parts;

/* One slice of a conv's output (a run of images, of one image's output
 * rows, or of its output channels) with its own primitive, built for one
 * thread: a session's threads run the slices on RLX's pool, so no OpenMP
 * team exists beside it. */
typedef struct conv_part {
    dnnl_primitive_t prim;
    dnnl_stream_t stream;
    dnnl_memory_t src, dst, scratch;
    size_t src_off, dst_off; /* where the slice starts, in elements */
    size_t dst_len;          /* its output's elements from dst_off (not a channel slice) */
    size_t work_bytes;       /* its scratchpad, then Winograd's blocked input and output, in thread_work */
    size_t blocked_src_at, blocked_dst_at;
    float *obuf;      /* a channel slice's output, dense, copied into place after the run; else NULL */
    int64_t oc0, noc; /* its output channels */
    /* A Winograd primitive reads and writes 16-channel blocks (nChw16c):
     * the slice is reordered into them from the node's channels-last input
     * (nhwc_src) before the run and out of them into the output (nhwc_dst,
     * strided for a channel slice) after; NULL for a direct primitive. */
    dnnl_primitive_t to_blocked, from_blocked;
    dnnl_memory_t nhwc_src, nhwc_dst;
} conv_part;

/* One set of weights (all of them, or a channel slice's) in the layout its
 * primitives prefer, and the bias beside it. */
typedef struct conv_weights {
    dnnl_primitive_t reorder; /* plain (or oihw) -> the primitives' weights; NULL if the same */
    dnnl_stream_t stream;
    dnnl_memory_t plain, prim, bias;
    void *buf;           /* the reordered weights */
    size_t w_off, b_off; /* where the slice's weights and bias start, in elements */
    /* oneDNN reorders into Winograd's weight layout from oihw only: plain
     * -> oihw (in the thread's working memory) first; NULL where one
     * reorder does it */
    dnnl_primitive_t to_oihw;
    dnnl_memory_t oihw;
    size_t oihw_bytes;
} conv_weights;

/* Everything one node's conv needs, built at its first run (t->state). */
typedef struct conv_dnnl {
    conv_part *part;
    int nparts;      /* 0: not built */
    int threads;     /* the session threads it was built for */
    conv_weights *w; /* one set shared by the parts, or one per channel slice */
    int nw;          /* 1, or nparts (part i has w[i]) */
    bool wconst;     /* weights reordered once, when built */
} conv_dnnl;

/* Which part of a channels-last conv a primitive computes: images
 * [n0, n0 + nn), output rows [oh0, oh0 + noh) of each, reading input rows
 * [ih0, ih0 + nih) with pad_t / pad_b rows of zeros above and below,
 * output channels [oc0, oc0 + noc). */
typedef struct conv_slice {
    int64_t n0, nn, oh0, noh, ih0, nih, pad_t, pad_b, oc0, noc;
} conv_slice;

/* The whole conv as one slice. */
static conv_slice whole_slice(const rlx_node_data *n, const rlx_shape *xs, const rlx_shape *ws)
{
    const rlx_conv_params *p = &n->attrs.conv.p;
    int64_t OH = n->shape.dims[1], H = xs->dims[1];
    int64_t pad_t = p->pads[0], pad_b = (OH - 1) * p->stride[0] + (ws->dims[1] - 1) * p->dilation[0] + 1 - H - pad_t;
    return (conv_slice){0, xs->dims[0], 0, OH, 0, H, pad_t, pad_b, 0, ws->dims[0]};
}

/* Output rows [oh0, oh0 + noh) of every image: the input rows they read,
 * clamped to the image, the rest as padding.  False if they read only
 * padding (oneDNN has no conv of an empty input). */
static bool row_slice(const rlx_node_data *n, const rlx_shape *xs, const rlx_shape *ws, int64_t oh0, int64_t noh,
                      conv_slice *sl)
{
    const rlx_conv_params *p = &n->attrs.conv.p;
    int64_t H = xs->dims[1];
    int64_t lo = oh0 * p->stride[0] - p->pads[0];
    int64_t hi = (oh0 + noh - 1) * p->stride[0] - p->pads[0] + (ws->dims[1] - 1) * p->dilation[0] + 1;
    int64_t a = lo > 0 ? lo : 0, b = hi < H ? hi : H;
    *sl = (conv_slice){0, xs->dims[0], oh0, noh, a, b - a, a - lo, hi - b, 0, ws->dims[0]};
    return b > a;
}

/* Whether a slice can be asked for as a Winograd conv: 3 x 3, stride 1,
 * not dilated or grouped, input and output channels in 16-blocks. */
static bool winograd_shape(const rlx_node_data *n, const rlx_shape *ws, const conv_slice *sl)
{
    const rlx_conv_params *p = &n->attrs.conv.p;
    return p->groups == 1 && ws->dims[1] == 3 && ws->dims[2] == 3 && p->stride[0] == 1 && p->stride[1] == 1 &&
           p->dilation[0] == 1 && p->dilation[1] == 1 && ws->dims[3] % 16 == 0 && sl->noc % 16 == 0;
}

/* The primitive descriptor of one slice of a channels-last conv node whose
 * inputs have shapes xs (x [N, H, W, C]) and ws (weight [O, KH, KW, C/G]);
 * the plain weights' descriptor in *wmd.  With `wino`, a Winograd conv on
 * 16-channel blocks (nChw16c) in and out; else a direct one on the
 * channels-last tensors.  NULL where oneDNN has no such conv.  Built for
 * the calling thread's OpenMP team size. */
static dnnl_primitive_desc_t conv_pd(const rlx_node_data *n, const rlx_shape *xs, const rlx_shape *ws,
                                     const conv_slice *sl, bool wino, dnnl_memory_desc_t *wmd)
{
    if (wino && !winograd_shape(n, ws, sl))
        return NULL;
    const rlx_conv_params *p = &n->attrs.conv.p;
    int64_t W = xs->dims[2], C = xs->dims[3];
    int64_t O = sl->noc, KH = ws->dims[1], KW = ws->dims[2], G = p->groups;
    int64_t OW = n->shape.dims[2];
    dnnl_dims_t sd = {sl->nn, C, sl->nih, W}, dd = {sl->nn, O, sl->noh, OW}, bd = {O};
    dnnl_dims_t st = {p->stride[0], p->stride[1]}, dl = {p->dilation[0] - 1, p->dilation[1] - 1};
    /* the end pads that give the node's output size */
    dnnl_dims_t pl = {sl->pad_t, p->pads[1]};
    dnnl_dims_t pr = {sl->pad_b, (OW - 1) * p->stride[1] + (KW - 1) * p->dilation[1] + 1 - W - pl[1]};
    dnnl_memory_desc_t smd, dmd, bmd, wany;
    if (G == 1) {
        dnnl_dims_t wd = {O, C, KH, KW};
        if (rlx_dnnl.dnnl_memory_desc_init_by_tag(wmd, 4, wd, dnnl_f32, dnnl_ohwi) ||
            rlx_dnnl.dnnl_memory_desc_init_by_tag(&wany, 4, wd, dnnl_f32, dnnl_format_tag_any))
            return NULL;
    } else {
        dnnl_dims_t wd = {G, O / G, C / G, KH, KW};
        if (rlx_dnnl.dnnl_memory_desc_init_by_tag(wmd, 5, wd, dnnl_f32, dnnl_gohwi) ||
            rlx_dnnl.dnnl_memory_desc_init_by_tag(&wany, 5, wd, dnnl_f32, dnnl_format_tag_any))
            return NULL;
    }
    dnnl_format_tag_t act_tag = wino ? dnnl_nChw16c : dnnl_nhwc;
    if (rlx_dnnl.dnnl_memory_desc_init_by_tag(&smd, 4, sd, dnnl_f32, act_tag) ||
        rlx_dnnl.dnnl_memory_desc_init_by_tag(&dmd, 4, dd, dnnl_f32, act_tag) ||
        rlx_dnnl.dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x))
        return NULL;
    dnnl_convolution_desc_t cd;
    dnnl_alg_kind_t conv_alg = wino ? dnnl_convolution_winograd : dnnl_convolution_direct;
    if (rlx_dnnl.dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, conv_alg, &smd, &wany,
                                                            n->attrs.conv.has_bias ? &bmd : NULL, &dmd, st, dl, pl, pr))
        return NULL;
    /* the residual (the output's starting value) added before the activation */
    return rlx_dnnl_pd(&cd, rlx_conv_residual_input(n) >= 0,
                       n->op == RLX_OP_CONV_BIAS_ACT ? n->attrs.conv.act : RLX_ACT_NONE);
}

bool rlx_cpu_conv_nhwc_claim(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *xn = &g->nodes[n->in[0]], *wn = &g->nodes[n->in[1]];
    int ri = rlx_conv_residual_input(n);
    if (n->attrs.conv.layout != RLX_LAYOUT_NHWC || xn->shape.ndim != 4 || xn->dtype != RLX_F32 ||
        wn->dtype != RLX_F32 || (n->attrs.conv.has_bias && g->nodes[n->in[2]].dtype != RLX_F32) ||
        (ri >= 0 && g->nodes[n->in[ri]].dtype != RLX_F32) || n->dtype != RLX_F32 || rlx_shape_numel(&n->shape) == 0 ||
        !rlx_dnnl_available())
        return false;
    dnnl_memory_desc_t wmd;
    conv_slice whole = whole_slice(n, &xn->shape, &wn->shape);
    dnnl_primitive_desc_t pd = conv_pd(n, &xn->shape, &wn->shape, &whole, false, &wmd);
    if (!pd)
        return false;
    rlx_dnnl.dnnl_primitive_desc_destroy(pd);
    return true;
}

/* Destroys a primitive, its stream and memories (any of them NULL) and
 * frees the buffer behind them. */
static void release(dnnl_primitive_t prim, dnnl_stream_t stream, const dnnl_memory_t mems[3], void *buf)
{
    if (prim)
        rlx_dnnl.dnnl_primitive_destroy(prim);
    for (int k = 0; k < 3; k++)
        if (mems[k])
            rlx_dnnl.dnnl_memory_destroy(mems[k]);
    if (stream)
        rlx_dnnl.dnnl_stream_destroy(stream);
    free(buf);
}

/* Frees what build made and marks c unbuilt. */
static void free_built(conv_dnnl *c)
{
    for (int i = 0; c->part && i < c->threads; i++) {
        conv_part *q = &c->part[i];
        release(q->prim, q->stream, (dnnl_memory_t[3]){q->src, q->dst, q->scratch}, NULL);
        release(q->to_blocked, NULL, (dnnl_memory_t[3]){q->nhwc_src, q->nhwc_dst, NULL}, NULL);
        if (q->from_blocked)
            rlx_dnnl.dnnl_primitive_destroy(q->from_blocked);
        free(q->obuf);
    }
    free(c->part);
    for (int i = 0; c->w && i < c->threads; i++) {
        conv_weights *w = &c->w[i];
        release(w->reorder, w->stream, (dnnl_memory_t[3]){w->plain, w->prim, w->bias}, w->buf);
        release(w->to_oihw, NULL, (dnnl_memory_t[3]){w->oihw, NULL, NULL}, NULL);
    }
    free(c->w);
    memset(c, 0, sizeof *c);
}

void rlx_cpu_conv_nhwc_release(rlx_thunk *t)
{
    if (t->state)
        free_built(t->state);
}

/* Plain weights -> each set's layout, on the calling thread. */
static rlx_status reorder_weights(conv_dnnl *c, const float *w)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    dnnl_status_t s = dnnl_success;
    for (int i = 0; i < c->nw && s == dnnl_success; i++) {
        conv_weights *cw = &c->w[i];
        if (!cw->reorder)
            continue;
        rlx_dnnl.dnnl_memory_set_data_handle(cw->plain, (void *)(w + cw->w_off));
        if (cw->to_oihw) {
            char *mid = rlx_dnnl_thread_work(cw->oihw_bytes);
            if (!mid) {
                omp_set_num_threads(saved);
                return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory to reorder its weights");
            }
            rlx_dnnl.dnnl_memory_set_data_handle(cw->oihw, mid);
            s = rlx_dnnl.dnnl_primitive_execute(
                cw->to_oihw, cw->stream, 2, (dnnl_exec_arg_t[2]){{DNNL_ARG_FROM, cw->plain}, {DNNL_ARG_TO, cw->oihw}});
        }
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, cw->to_oihw ? cw->oihw : cw->plain}, {DNNL_ARG_TO, cw->prim}};
        if (s == dnnl_success)
            s = rlx_dnnl.dnnl_primitive_execute(cw->reorder, cw->stream, 2, args);
        if (s == dnnl_success)
            s = rlx_dnnl.dnnl_stream_wait(cw->stream);
    }
    omp_set_num_threads(saved);
    return s == dnnl_success ? RLX_OK : rlx_set_error(RLX_ERR_DEVICE, "oneDNN weight reorder failed (%d)", (int)s);
}

#define CONV_SLICE_MACS (1 << 20)

/* An image of at most this many output pixels is cut by output channels
 * (each slice's output dense, then copied into place): cut by rows, each
 * thread has a few rows (ResNet-50's 7 x 7 stage splits 4 / 3) and reads
 * all the weights.  ResNet-50 b1, 2 threads, medians of 5 alternated runs:
 * 25.8 ms cut by rows, 23.5 ms with its 14 x 14 and 7 x 7 outputs cut by
 * channels, 25.7 ms with the 28 x 28 ones too. */
#define CONV_CHANNEL_SPLIT_PIXELS 256
#define WINOGRAD_CHANNEL_SPLIT_PIXELS 1024

/* How a conv is cut into at most `parts_max` slices: runs of images when
 * there are at least as many images; one small image (not grouped, its
 * channels a multiple of 16 a slice) by runs of output channels; else by
 * runs of output rows (sl[] gets the slices; returns their count, 1 = the
 * whole conv). */
static int plan_slices(const rlx_node_data *n, const rlx_shape *xs, const rlx_shape *ws, int parts_max, bool wino,
                       conv_slice *sl)
{
    conv_slice whole = whole_slice(n, xs, ws);
    int64_t N = xs->dims[0], OH = n->shape.dims[1], O = ws->dims[0];
    /* a slice is worth a thread's wake-up from about a million MACs */
    int64_t macs = rlx_shape_numel(&n->shape) * ws->dims[1] * ws->dims[2] * ws->dims[3];
    if (macs / CONV_SLICE_MACS < parts_max)
        parts_max = macs / CONV_SLICE_MACS > 1 ? (int)(macs / CONV_SLICE_MACS) : 1;
    /* runs of images while there are enough; one image: runs of its rows */
    int64_t split_pixels = wino ? WINOGRAD_CHANNEL_SPLIT_PIXELS : CONV_CHANNEL_SPLIT_PIXELS;
    bool by_channels = N == 1 && n->attrs.conv.p.groups == 1 && OH * n->shape.dims[2] <= split_pixels &&
                       O % (16 * (int64_t)parts_max) == 0;
    int64_t parts = N > 1 || by_channels ? (N > 1 && N < parts_max ? N : parts_max) : (OH < parts_max ? OH : parts_max);
    if (parts <= 1)
        goto one;
    for (int64_t i = 0; i < parts; i++) {
        if (by_channels) {
            sl[i] = whole;
            sl[i].oc0 = O * i / parts;
            sl[i].noc = O * (i + 1) / parts - sl[i].oc0;
        } else if (N > 1) {
            sl[i] = whole;
            sl[i].n0 = N * i / parts;
            sl[i].nn = N * (i + 1) / parts - sl[i].n0;
        } else if (!row_slice(n, xs, ws, OH * i / parts, OH * (i + 1) / parts - OH * i / parts, &sl[i])) {
            goto one;
        }
    }
    return (int)parts;
one:
    sl[0] = whole;
    return 1;
}

/* A Winograd part's blocked buffers (src then dst) and the reorders
 * between them and the node's channels-last tensors: the slice's input
 * rows, dense, and its output channels, strided in the output's pixels. */
static rlx_status build_blocked(conv_part *q, const rlx_thunk *t, const conv_slice *sl, const dnnl_memory_desc_t *smd,
                                const dnnl_memory_desc_t *dmd)
{
    const rlx_shape *xs = &t->in_node[0]->shape, *ys = &t->node->shape;
    int64_t W = xs->dims[2], C = xs->dims[3], OH = ys->dims[1], OW = ys->dims[2], O = ys->dims[3];
    q->blocked_src_at = q->work_bytes;
    q->blocked_dst_at = q->blocked_src_at + rlx_dnnl_round64(rlx_dnnl.dnnl_memory_desc_get_size(smd));
    q->work_bytes = q->blocked_dst_at + rlx_dnnl_round64(rlx_dnnl.dnnl_memory_desc_get_size(dmd));
    dnnl_dims_t sd = {sl->nn, C, sl->nih, W}, dd = {sl->nn, sl->noc, sl->noh, OW};
    dnnl_dims_t dst_strides = {OH * OW * O, 1, OW * O, O};
    dnnl_memory_desc_t nsmd, ndmd;
    if (rlx_dnnl.dnnl_memory_desc_init_by_tag(&nsmd, 4, sd, dnnl_f32, dnnl_nhwc) ||
        rlx_dnnl.dnnl_memory_desc_init_by_strides(&ndmd, 4, dd, dnnl_f32, dst_strides) ||
        rlx_dnnl.dnnl_memory_create(&q->src, smd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
        rlx_dnnl.dnnl_memory_create(&q->dst, dmd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
        rlx_dnnl.dnnl_memory_create(&q->nhwc_src, &nsmd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
        rlx_dnnl.dnnl_memory_create(&q->nhwc_dst, &ndmd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
        !(q->to_blocked = rlx_dnnl_reorder(&nsmd, smd)) || !(q->from_blocked = rlx_dnnl_reorder(dmd, &ndmd)))
        return rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv's layout reorders");
    return RLX_OK;
}

/* One part's primitive and memories (Winograd's with `wino`); its plain
 * and preferred weights descriptors in *wmd and *wpd_out, its bias's in
 * *bmd_out. */
static rlx_status build_part(conv_part *q, const rlx_thunk *t, const conv_slice *sl, bool wino, dnnl_memory_desc_t *wmd,
                             dnnl_memory_desc_t *wpd_out, dnnl_memory_desc_t *bmd_out)
{
    const rlx_node_data *n = t->node;
    const rlx_shape *xs = &t->in_node[0]->shape;
    dnnl_primitive_desc_t pd = conv_pd(n, xs, &t->in_node[1]->shape, sl, wino, wmd);
    if (!pd)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "oneDNN has no channels-last conv of this shape");
    const dnnl_memory_desc_t *smd = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *dmd = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *spd = rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    *wpd_out = *rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (n->attrs.conv.has_bias)
        *bmd_out = *rlx_dnnl.dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1);
    size_t sbytes = spd ? rlx_dnnl.dnnl_memory_desc_get_size(spd) : 0;
    int64_t H = xs->dims[1], W = xs->dims[2], C = xs->dims[3];
    int64_t OH = n->shape.dims[1], OW = n->shape.dims[2], O = n->shape.dims[3];
    rlx_status st = RLX_OK;
    q->work_bytes = rlx_dnnl_round64(sbytes);
    if (rlx_dnnl.dnnl_primitive_create(&q->prim, pd) ||
        rlx_dnnl.dnnl_stream_create(&q->stream, rlx_dnnl_engine, dnnl_stream_default_flags))
        st = rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv primitive");
    else if (wino)
        st = build_blocked(q, t, sl, smd, dmd);
    else if (rlx_dnnl.dnnl_memory_create(&q->src, smd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
             rlx_dnnl.dnnl_memory_create(&q->dst, dmd, rlx_dnnl_engine, DNNL_MEMORY_NONE))
        st = rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv primitive");
    else if (sl->noc != O && !(q->obuf = rlx_dnnl_alloc64((size_t)(sl->nn * OH * OW * sl->noc) * sizeof(float))))
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for a channel slice's output");
    if (st == RLX_OK && sbytes && rlx_dnnl.dnnl_memory_create(&q->scratch, spd, rlx_dnnl_engine, DNNL_MEMORY_NONE))
        st = rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv's scratchpad");
    q->src_off = (size_t)((sl->n0 * H + sl->ih0) * W * C);
    q->dst_off = (size_t)((sl->n0 * OH + sl->oh0) * OW * O + (wino ? sl->oc0 : 0));
    q->dst_len = (size_t)(sl->nn * sl->noh * OW * O);
    q->oc0 = sl->oc0;
    q->noc = sl->noc;
    rlx_dnnl.dnnl_primitive_desc_destroy(pd);
    return st;
}

/* A set of weights: plain memory over the node's (or a slice of them),
 * and where the primitives prefer another layout, its buffer and reorder. */
static rlx_status build_weights(conv_weights *w, const dnnl_memory_desc_t *wmd, const dnnl_memory_desc_t *wpd,
                                const dnnl_memory_desc_t *bmd, bool has_bias)
{
    if (rlx_dnnl.dnnl_stream_create(&w->stream, rlx_dnnl_engine, dnnl_stream_default_flags) ||
        rlx_dnnl.dnnl_memory_create(&w->plain, wmd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
        (has_bias && rlx_dnnl.dnnl_memory_create(&w->bias, bmd, rlx_dnnl_engine, DNNL_MEMORY_NONE)))
        return rlx_set_error(RLX_ERR_DEVICE, "oneDNN: could not create a conv primitive");
    if (rlx_dnnl.dnnl_memory_desc_equal(wmd, wpd))
        return RLX_OK;
    if (!(w->buf = rlx_dnnl_alloc64(rlx_dnnl.dnnl_memory_desc_get_size(wpd))) ||
        rlx_dnnl.dnnl_memory_create(&w->prim, wpd, rlx_dnnl_engine, w->buf))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for its reordered weights");
    if ((w->reorder = rlx_dnnl_reorder(wmd, wpd)))
        return RLX_OK;
    dnnl_memory_desc_t omd;
    w->oihw_bytes = wmd->ndims == 4 ? rlx_dnnl.dnnl_memory_desc_get_size(wmd) : 0;
    if (wmd->ndims != 4 || rlx_dnnl.dnnl_memory_desc_init_by_tag(&omd, 4, wmd->dims, dnnl_f32, dnnl_oihw) ||
        rlx_dnnl.dnnl_memory_create(&w->oihw, &omd, rlx_dnnl_engine, DNNL_MEMORY_NONE) ||
        !(w->to_oihw = rlx_dnnl_reorder(wmd, &omd)) || !(w->reorder = rlx_dnnl_reorder(&omd, wpd)))
        return rlx_set_error(RLX_ERR_DEVICE, "oneDNN: no reorder into the conv's weight layout");
    return RLX_OK;
}

/* The parts for `threads` session threads, each primitive built for one
 * thread (oneDNN sizes its work split and scratchpad by the OpenMP team at
 * creation).  Slices of images or rows share one copy of the weights in
 * the layout they prefer; slices of channels have their own.  Weights are
 * reordered once if constant (a constant's data is in place before the
 * thunks are prepared).  Where Winograd was asked for and oneDNN cannot
 * build it for every slice with one weight layout (the weights' reorder
 * included), the conv goes direct, cut the same way; a direct conv whose
 * slices oneDNN cannot build, or whose row or image slices want different
 * weight layouts, is not cut. */
static rlx_status build(conv_dnnl *c, const rlx_thunk *t, int threads, bool split, bool wino)
{
    const rlx_node_data *n = t->node;
    const rlx_shape *ws = &t->in_node[1]->shape;
    conv_slice *sl = malloc(sizeof *sl * (size_t)threads);
    c->threads = threads;
    c->part = calloc((size_t)threads, sizeof *c->part);
    c->w = calloc((size_t)threads, sizeof *c->w);
    if (!sl || !c->part || !c->w) {
        free(sl);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for its oneDNN state");
    }
    c->nparts = plan_slices(n, &t->in_node[0]->shape, ws, split ? threads : 1, wino, sl);
    bool own_weights = sl[0].noc != n->shape.dims[3]; /* channel slices */
    c->nw = own_weights ? c->nparts : 1;
    dnnl_memory_desc_t wmd, wpd, wpd_i, bmd;
    rlx_status st = RLX_OK;
    for (int i = 0; i < c->nparts && st == RLX_OK; i++) {
        st = build_part(&c->part[i], t, &sl[i], wino, &wmd, i && !own_weights ? &wpd_i : &wpd, &bmd);
        bool same_weights = !i || own_weights || rlx_dnnl.dnnl_memory_desc_equal(&wpd, &wpd_i);
        if (st == RLX_OK && same_weights && (own_weights || i == 0)) {
            conv_weights *w = &c->w[own_weights ? i : 0];
            w->w_off = (size_t)(sl[i].oc0 * ws->dims[1] * ws->dims[2] * ws->dims[3]);
            w->b_off = (size_t)sl[i].oc0;
            st = build_weights(w, &wmd, &wpd, &bmd, n->attrs.conv.has_bias);
        }
        if ((wino || c->nparts > 1) && (st != RLX_OK || !same_weights)) {
            /* Winograd first, then a direct conv cut the same way, then uncut */
            free(sl);
            free_built(c);
            return wino ? build(c, t, threads, split, false) : build(c, t, threads, false, false);
        }
    }
    free(sl);
    if (st == RLX_OK && wino)
        winograd_parts += c->nparts;
    c->wconst = t->in_node[1]->op == RLX_OP_CONSTANT;
    if (st == RLX_OK && c->wconst)
        st = reorder_weights(c, t->in[1]);
    return st;
}

/* Whether the settings ask Winograd for this node (where oneDNN has it;
 * not with a residual: the blocked output would need it reordered in). */
static bool winograd_wanted(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    if (rlx_conv_residual_input(t->node) >= 0)
        return false;
    int mode = ctx->settings ? ctx->settings->cpu_winograd : RLX_CPU_WINOGRAD_SMALL;
    int64_t bytes = rlx_shape_numel(&t->in_node[1]->shape) * (int64_t)sizeof(float);
    return mode == RLX_CPU_WINOGRAD_ALL || (mode == RLX_CPU_WINOGRAD_SMALL && bytes <= RLX_CPU_WINOGRAD_SMALL_BYTES);
}

/* build on one OpenMP thread; unbuilt again if it fails. */
static rlx_status build_single_threaded(conv_dnnl *c, const rlx_thunk *t, int threads, bool wino)
{
    free_built(c);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    rlx_status st = build(c, t, threads, true, wino);
    omp_set_num_threads(saved);
    if (st != RLX_OK)
        free_built(c);
    return st;
}

/* The state only: the primitives are built at the first run, for its threads. */
rlx_status rlx_cpu_conv_nhwc_prepare(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    if (!rlx_dnnl_available())
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "channels-last conv without oneDNN");
    if (!(t->state = calloc(1, sizeof(conv_dnnl))))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for its oneDNN state");
    return RLX_OK;
}

typedef struct conv_run {
    conv_dnnl *c;
    float *out;         /* the node's output */
    const float *res;   /* its residual, or NULL */
    int64_t pixels, O;  /* its rows of O channels */
    _Atomic int failed; /* a oneDNN status, 0 while every part succeeded */
} conv_run;

/* Runs one part on the calling thread, in its working memory: a oneDNN
 * status, or -1 when that memory could not be had. */
static int run_part(conv_part *q, const conv_weights *w)
{
    char *work = q->work_bytes ? rlx_dnnl_thread_work(q->work_bytes) : NULL;
    if (q->work_bytes && !work)
        return -1;
    if (q->scratch)
        rlx_dnnl.dnnl_memory_set_data_handle(q->scratch, work);
    dnnl_status_t s = dnnl_success;
    if (q->to_blocked) {
        rlx_dnnl.dnnl_memory_set_data_handle(q->src, work + q->blocked_src_at);
        rlx_dnnl.dnnl_memory_set_data_handle(q->dst, work + q->blocked_dst_at);
        s = rlx_dnnl.dnnl_primitive_execute(q->to_blocked, q->stream, 2,
                                            (dnnl_exec_arg_t[2]){{DNNL_ARG_FROM, q->nhwc_src}, {DNNL_ARG_TO, q->src}});
    }
    dnnl_exec_arg_t args[5] = {
        {DNNL_ARG_SRC, q->src}, {DNNL_ARG_WEIGHTS, w->reorder ? w->prim : w->plain}, {DNNL_ARG_DST, q->dst}};
    int na = 3;
    if (w->bias)
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, w->bias};
    if (q->scratch)
        args[na++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, q->scratch};
    if (s == dnnl_success)
        s = rlx_dnnl.dnnl_primitive_execute(q->prim, q->stream, na, args);
    if (q->to_blocked && s == dnnl_success)
        s = rlx_dnnl.dnnl_primitive_execute(q->from_blocked, q->stream, 2,
                                            (dnnl_exec_arg_t[2]){{DNNL_ARG_FROM, q->dst}, {DNNL_ARG_TO, q->nhwc_dst}});
    if (s == dnnl_success)
        s = rlx_dnnl.dnnl_stream_wait(q->stream);
    return (int)s;
}

static void run_parts(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    conv_run *r = arg;
    conv_dnnl *c = r->c;
    /* oneDNN's OpenMP regions take the calling thread's team size: one */
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int64_t i = lo; i < hi; i++) {
        conv_part *q = &c->part[i];
        /* the residual as the slice's starting value (in place already
         * where the output is the residual's memory) */
        if (r->res && q->obuf)
            for (int64_t p = 0; p < r->pixels; p++)
                memcpy(q->obuf + p * q->noc, r->res + p * r->O + q->oc0, (size_t)q->noc * sizeof(float));
        else if (r->res && r->res != r->out)
            memcpy(r->out + q->dst_off, r->res + q->dst_off, q->dst_len * sizeof(float));
        int s = run_part(q, &c->w[c->nw > 1 ? i : 0]); /* a channel slice's own weights, or the shared set */
        if (s != dnnl_success)
            r->failed = s;
        else if (q->obuf) /* a channel slice: its channels into each output pixel */
            for (int64_t p = 0; p < r->pixels; p++)
                memcpy(r->out + p * r->O + q->oc0, q->obuf + p * q->noc, (size_t)q->noc * sizeof(float));
    }
    omp_set_num_threads(saved);
}

rlx_status rlx_cpu_conv_nhwc(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    conv_dnnl *c = t->state;
    int threads = ctx->threads > 0 ? ctx->threads : 1;
    if (rlx_shape_numel(&t->node->shape) == 0)
        return RLX_OK;
    if (c->threads != threads) {
        rlx_status st = build_single_threaded(c, t, threads, winograd_wanted(t, ctx));
        if (st != RLX_OK)
            return st;
    }
    if (!c->wconst) {
        rlx_status st = reorder_weights(c, t->in[1]);
        if (st != RLX_OK)
            return st;
    }
    for (int i = 0; i < c->nw; i++) {
        conv_weights *w = &c->w[i];
        if (!w->reorder)
            rlx_dnnl.dnnl_memory_set_data_handle(w->plain, (float *)t->in[1] + w->w_off);
        if (w->bias)
            rlx_dnnl.dnnl_memory_set_data_handle(w->bias, (float *)t->in[2] + w->b_off);
    }
    for (int i = 0; i < c->nparts; i++) {
        conv_part *q = &c->part[i];
        rlx_dnnl.dnnl_memory_set_data_handle(q->to_blocked ? q->nhwc_src : q->src, (float *)t->in[0] + q->src_off);
        rlx_dnnl.dnnl_memory_set_data_handle(q->to_blocked ? q->nhwc_dst : q->dst,
                                             q->obuf ? q->obuf : (float *)t->out + q->dst_off);
    }
    const rlx_shape *ys = &t->node->shape;
    int ri = rlx_conv_residual_input(t->node);
    conv_run r = {c, t->out, ri >= 0 ? t->in[ri] : NULL, ys->dims[0] * ys->dims[1] * ys->dims[2], ys->dims[3], 0};
    rlx_cpu_parallel_shares(c->nparts, run_parts, &r);
    if (r.failed == -1)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "conv: no memory for a thread's scratchpad");
    return r.failed == 0 ? RLX_OK : rlx_cpu_kernel_error(t, "oneDNN conv failed (%d)", r.failed);
}

long rlx_cpu_conv_winograd_parts(void) { return rlx_dnnl_available() ? winograd_parts : -1; }

#else /* no oneDNN header at build time */

long rlx_cpu_conv_winograd_parts(void) { return -1; }

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
