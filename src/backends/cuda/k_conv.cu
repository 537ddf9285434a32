/* k_conv.cu - convolution and pooling.  A convolution runs the fastest
 * of the paths that can take it, each timed at compile time: cuDNN's
 * legacy calls, cuDNN's graph API (channels-last, 16-bit), or im2col + one
 * strided-batched cuBLASLt GEMM per group (1x1 stride-1 convolutions read
 * the input directly). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_dnn.h"
#include "backends/cuda/cuda_gemm.h"

typedef struct win2d {
    int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
} win2d;

static win2d window_of(const rlx_shape *x, const rlx_shape *y, int64_t kh, int64_t kw, const int64_t *stride,
                       const int64_t *dil, const int64_t *pads)
{
    win2d w;
    if (x->ndim == 3)
        w = (win2d){1, x->dims[2], 1, y->dims[2], 1, kw, 1, stride[0], 1, dil[0], 0, pads[0]};
    else
        w = (win2d){x->dims[2], x->dims[3], y->dims[2], y->dims[3], kh,      kw,
                    stride[0],  stride[1],  dil[0],     dil[1],     pads[0], pads[1]};
    return w;
}

static win2d conv_window(const rlx_node_data *n, const rlx_shape *x, const rlx_shape *w)
{
    int sp = x->ndim - 2;
    int64_t kh = sp == 2 ? w->dims[2] : 1, kw = w->dims[x->ndim - 1];
    return window_of(x, &n->shape, kh, kw, n->attrs.conv.p.stride, n->attrs.conv.p.dilation, n->attrs.conv.p.pads);
}

static bool pointwise(const win2d *w)
{
    return w->KH == 1 && w->KW == 1 && w->sh == 1 && w->sw == 1 && w->ph == 0 && w->pw == 0 && w->OH == w->H &&
           w->OW == w->W;
}

typedef struct conv_state {
#ifdef RLX_CUDNN
    int use_dnn;
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    size_t dnn_ws;
    /* channels-last: bias + ReLU/identity inside cudnnConvolutionBiasActivationForward */
    cudnnTensorDescriptor_t bd;
    cudnnActivationDescriptor_t ad;
    cudnnConvolutionFwdAlgo_t algo_fused;
    size_t ws_fused;
    int fused;
    /* channels-last through cuDNN's backend (graph) API */
    int use_graph;
    dnn_graph g;
    int g_post; /* bias/activation not in the graph: one pass after it */
#endif
    cu_gemm gemm;
    win2d w;
    int64_t N, C, G, Cg, O, Og, K, OHW, HW;
    int pw;
    /* gathered: small images of a batch side by side, one GEMM
     * Y'[O, N*OHW] = W[O, K] col[K, N*OHW], then a permuting bias/act pass */
    int gathered;
    /* channels-last on cuBLASLt: Y[N*OHW, O] = col[N*OHW, K] W[O, K]^T with
     * the bias/ReLU epilogue (post: an activation pass follows) */
    int nhwc_gemm, post;
} conv_state;

/* Small outputs make poor per-image GEMMs: gather the batch into one. */
static int conv_gathered(int64_t N, int64_t OHW) { return N > 1 && OHW < 1024; }

template <typename T, typename I> __global__ void im2col_gathered(const T *x, T *col, I N, I C, I c0, I Cg, win2d w64)
{
    cu_grid_wait();
    const I KH = (I)w64.KH, KW = (I)w64.KW, OW = (I)w64.OW;
    const long long H = w64.H, W = w64.W;
    I K = Cg * KH * KW, OHW = (I)(w64.OH * w64.OW), NP = N * OHW;
    I total = K * NP;
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        I pa = i % NP, r = i / NP, n = pa / OHW, p = pa % OHW;
        I c = r / (KH * KW), kk = r % (KH * KW), kh = kk / KW, kw = kk % KW;
        I oh = p / OW, ow = p % OW;
        long long ih = (long long)oh * w64.sh - w64.ph + (long long)kh * w64.dh;
        long long iw = (long long)ow * w64.sw - w64.pw + (long long)kw * w64.dw;
        T v = cu_fromf<T>(0.0f);
        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
            v = x[(((int64_t)n * C + c0 + c) * H + ih) * W + iw];
        col[i] = v;
    }
}

/* col[n][K][OHW] for channels c0.. of one group, every image. */
/* Index arithmetic in I: 32-bit where every index fits (far fewer
 * instructions per division than 64-bit). */
template <typename T, typename I> __global__ void im2col_kernel(const T *x, T *col, I N, I C, I c0, I Cg, win2d w64)
{
    cu_grid_wait();
    const I KH = (I)w64.KH, KW = (I)w64.KW, OW = (I)w64.OW, H = (I)w64.H, W = (I)w64.W;
    I K = Cg * KH * KW, OHW = (I)(w64.OH * w64.OW);
    I total = N * K * OHW;
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        I p = i % OHW, q = i / OHW, r = q % K, n = q / K;
        I c = r / (KH * KW), kk = r % (KH * KW), kh = kk / KW, kw = kk % KW;
        I oh = p / OW, ow = p % OW;
        long long ih = (long long)oh * w64.sh - w64.ph + (long long)kh * w64.dh;
        long long iw = (long long)ow * w64.sw - w64.pw + (long long)kw * w64.dw;
        struct {
            long long H, W;
        } w = {H, W};
        T v = cu_fromf<T>(0.0f);
        if (ih >= 0 && ih < w.H && iw >= 0 && iw < w.W)
            v = x[((n * C + c0 + c) * w.H + ih) * w.W + iw];
        col[i] = v;
    }
}

template <typename T, typename I>
__global__ void permute_bias_act(const T *yg, const T *bias, T *out, I N, I O, I OHW, int act)
{
    cu_grid_wait();
    I total = N * O * OHW;
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        I p = i % OHW, q = i / OHW, o = q % O, n = q / O;
        float v = cu_tof<T>(yg[(o * N + n) * OHW + p]);
        if (bias)
            v += cu_tof<T>(bias[o]);
        out[i] = cu_fromf<T>(rlx_act_f32(act, v));
    }
}

template <typename T, typename I> __global__ void bias_nchw(T *y, const T *bias, I total, I O, I HW, int act)
{
    cu_grid_wait();
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        float v = cu_tof<T>(y[i]);
        if (bias)
            v += cu_tof<T>(bias[(i / HW) % O]);
        y[i] = cu_fromf<T>(rlx_act_f32(act, v));
    }
}

/* col[m][(kh * KW + kw) * C + c] for output pixel m: the rows of an NHWC
 * weight [O, KH, KW, C] line up with it (groups 1) */
template <typename T, typename I> __global__ void im2col_nhwc(const T *x, T *col, I total, I C, I K, win2d w64)
{
    cu_grid_wait();
    const I KW = (I)w64.KW, OW = (I)w64.OW, OH = (I)w64.OH;
    const long long H = w64.H, W = w64.W;
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        I k = i % K, m = i / K;
        I c = k % C, kk = k / C, kh = kk / KW, kw = kk % KW;
        I ow = m % OW, q = m / OW, oh = q % OH, n = q / OH;
        long long ih = (long long)oh * w64.sh - w64.ph + (long long)kh * w64.dh;
        long long iw = (long long)ow * w64.sw - w64.pw + (long long)kw * w64.dw;
        T v = cu_fromf<T>(0.0f);
        if (ih >= 0 && ih < H && iw >= 0 && iw < W)
            v = x[(((long long)n * H + ih) * W + iw) * C + c];
        col[i] = v;
    }
}

/* channels-last output: the channel is the fastest axis */
template <typename T, typename I> __global__ void bias_nhwc(T *y, const T *bias, I total, I O, int act)
{
    cu_grid_wait();
    for (I i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        float v = cu_tof<T>(y[i]);
        if (bias)
            v += cu_tof<T>(bias[i % O]);
        y[i] = cu_fromf<T>(rlx_act_f32(act, v));
    }
}

#ifdef RLX_CUDNN
static void release_dnn(conv_state *s)
{
    if (s->xd)
        rlx_dnn.cudnnDestroyTensorDescriptor(s->xd);
    if (s->yd)
        rlx_dnn.cudnnDestroyTensorDescriptor(s->yd);
    if (s->wd)
        rlx_dnn.cudnnDestroyFilterDescriptor(s->wd);
    if (s->cd)
        rlx_dnn.cudnnDestroyConvolutionDescriptor(s->cd);
    if (s->bd)
        rlx_dnn.cudnnDestroyTensorDescriptor(s->bd);
    if (s->ad)
        rlx_dnn.cudnnDestroyActivationDescriptor(s->ad);
    s->bd = NULL;
    s->ad = NULL;
    s->fused = 0;
    s->xd = s->yd = NULL;
    s->wd = NULL;
    s->cd = NULL;
    s->use_dnn = 0;
}

/* The legacy API's descriptors of this convolution in one layout (the
 * filter in the same one: KCRS for NCHW, KRSC for NHWC). */

static bool dnn_describe(conv_state *s, rlx_dtype dt, cudnnTensorFormat_t fmt)
{
    cudnnDataType_t ty = dnn_type(dt);
    const win2d &w = s->w;
    return rlx_dnn.cudnnCreateTensorDescriptor(&s->xd) == CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnCreateTensorDescriptor(&s->yd) == CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnCreateFilterDescriptor(&s->wd) == CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnCreateConvolutionDescriptor(&s->cd) == CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnSetTensor4dDescriptor(s->xd, fmt, ty, (int)s->N, (int)s->C, (int)w.H, (int)w.W) ==
               CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnSetTensor4dDescriptor(s->yd, fmt, ty, (int)s->N, (int)s->O, (int)w.OH, (int)w.OW) ==
               CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnSetFilter4dDescriptor(s->wd, ty, fmt, (int)s->O, (int)s->Cg, (int)w.KH, (int)w.KW) ==
               CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnSetConvolution2dDescriptor(s->cd, (int)w.ph, (int)w.pw, (int)w.sh, (int)w.sw, (int)w.dh,
                                                   (int)w.dw, CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT) == CUDNN_STATUS_SUCCESS &&
           rlx_dnn.cudnnSetConvolutionGroupCount(s->cd, (int)s->G) == CUDNN_STATUS_SUCCESS &&
           /* f32 stays f32 (no TF32); f16/bf16 on the tensor cores, f32 accumulation */
           rlx_dnn.cudnnSetConvolutionMathType(s->cd, dt == RLX_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH) ==
               CUDNN_STATUS_SUCCESS;
}

/* cuDNN's algorithm search on the real buffers (descriptors set): the
 * fastest result that fits the scratch becomes the thunk's algorithm
 * (*pick), and *precomp is the first fitting IMPLICIT_PRECOMP_GEMM, the one
 * algorithm the fused bias call takes with an identity activation (-1
 * none).  False when nothing fits. */
static bool dnn_find(rlx_thunk *t, conv_state *s, cudnnConvolutionFwdAlgoPerf_t *perf, int *pick, int *precomp)
{
    int found = 0;
    bool ok = rlx_dnn.cudnnFindConvolutionForwardAlgorithmEx(rlx_dnn_h, s->xd, t->in[0], s->wd, t->in[1], s->cd, s->yd,
                                                             t->out, 8, &found, perf, t->scratch,
                                                             t->scratch_bytes) == CUDNN_STATUS_SUCCESS;
    *pick = *precomp = -1;
    for (int i = 0; ok && i < found; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= t->scratch_bytes) {
            if (*pick < 0)
                *pick = i;
            if (*precomp < 0 && perf[i].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
                *precomp = i;
        }
    cudaGetLastError();
    if (!ok || *pick < 0)
        return false;
    s->algo = perf[*pick].algo;
    s->dnn_ws = perf[*pick].memory;
    s->use_dnn = 1;
    return true;
}

/* Sets up the cuDNN path and picks its fastest algorithm that fits the
 * scratch; false (and the im2col path) when anything does not fit. */
static bool prep_dnn(rlx_thunk *t, conv_state *s)
{
    if (!rlx_dnn_ready() || !t->scratch)
        return false;
    const rlx_node_data *n = t->node;
    const int64_t *pads = n->attrs.conv.p.pads;
    int sp = t->in_node[0]->shape.ndim - 2;
    if (sp == 2 ? (pads[0] != pads[2] || pads[1] != pads[3]) : pads[0] != pads[1])
        return false;
    rlx_dtype dt = n->dtype;
    bool ok = dnn_describe(s, dt, CUDNN_TENSOR_NCHW);
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int pick = -1, precomp = -1;
    if (!ok || !dnn_find(t, s, perf, &pick, &precomp)) {
        release_dnn(s);
        return false;
    }
    return true;
}
#endif

static rlx_status k_conv(const rlx_thunk *t, const rlx_run_ctx *ctx);
static rlx_status prep_conv_gemm(rlx_thunk *t, conv_state *s);

enum { CONV_REPS = 6 }; /* launches per captured timing graph */
static bool launch_conv(void *t) { return k_conv((const rlx_thunk *)t, NULL) == RLX_OK; }

/* Device time of one run of this convolution as prepared. */
static float time_conv(rlx_thunk *t) { return rlx_cu_time_captured(launch_conv, t, CONV_REPS); }

/* Channels-last (the layout pass makes these only where conv_ok claims
 * them, i.e. with cuDNN loaded): x [N, H, W, C], w [O, KH, KW, C/G],
 * y [N, OH, OW, O], all through cuDNN's NHWC format. */
static void nhwc_dims(const rlx_node_data *n, const rlx_shape *xs, const rlx_shape *ws, conv_state *s)
{
    const rlx_conv_params *p = &n->attrs.conv.p;
    s->N = xs->dims[0];
    s->C = xs->dims[3];
    s->G = p->groups;
    s->Cg = s->C / s->G;
    s->O = ws->dims[0];
    s->Og = s->O / s->G;
    s->w = (win2d){xs->dims[1],  xs->dims[2],  n->shape.dims[1], n->shape.dims[2], ws->dims[1], ws->dims[2],
                   p->stride[0], p->stride[1], p->dilation[0],   p->dilation[1],   p->pads[0],  p->pads[1]};
    s->K = s->Cg * s->w.KH * s->w.KW;
    s->OHW = s->w.OH * s->w.OW;
    s->HW = s->w.H * s->w.W;
}

static size_t nhwc_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    conv_state s;
    nhwc_dims(n, &g->nodes[n->in[0]].shape, &g->nodes[n->in[1]].shape, &s);
    /* cuDNN's workspace budget: what im2col would have used, plus the GEMM's */
    return cu_round256((size_t)(s.N * s.K * s.OHW) * rlx_dtype_size(n->dtype)) + CU_GEMM_WORKSPACE;
}

#ifdef RLX_CUDNN
/* cuDNN with NHWC descriptors; bias + ReLU (any algorithm) or bias alone
 * (identity: cuDNN runs it only with IMPLICIT_PRECOMP_GEMM) fused into
 * cudnnConvolutionBiasActivationForward if that times faster than the
 * convolution and a bias pass.  False (state released) if it cannot. */
static bool prep_dnn_nhwc(rlx_thunk *t, conv_state *s)
{
    if (!rlx_dnn_ready() || !t->scratch)
        return false;
    const rlx_node_data *n = t->node;
    rlx_dtype dt = n->dtype;
    bool ok = dnn_describe(s, dt, CUDNN_TENSOR_NHWC);
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    int pick = -1, precomp = -1;
    if (!ok || !dnn_find(t, s, perf, &pick, &precomp)) {
        release_dnn(s);
        return false;
    }
    int act = n->op == RLX_OP_CONV_BIAS_ACT ? n->attrs.conv.act : RLX_ACT_NONE;
    int fused_pick = act == RLX_ACT_RELU ? pick : precomp;
    if (n->attrs.conv.has_bias && (act == RLX_ACT_RELU || act == RLX_ACT_NONE) && fused_pick >= 0 &&
        rlx_dnn.cudnnCreateTensorDescriptor(&s->bd) == CUDNN_STATUS_SUCCESS &&
        rlx_dnn.cudnnSetTensor4dDescriptor(s->bd, CUDNN_TENSOR_NCHW, dnn_type(dt), 1, (int)s->O, 1, 1) ==
            CUDNN_STATUS_SUCCESS &&
        rlx_dnn.cudnnCreateActivationDescriptor(&s->ad) == CUDNN_STATUS_SUCCESS &&
        rlx_dnn.cudnnSetActivationDescriptor(s->ad,
                                             act == RLX_ACT_RELU ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                                             CUDNN_PROPAGATE_NAN, 0.0) == CUDNN_STATUS_SUCCESS) {
        s->algo_fused = perf[fused_pick].algo;
        s->ws_fused = perf[fused_pick].memory;
        s->fused = 1;
        float t_fused = time_conv(t);
        s->fused = 0;
        float t_split = time_conv(t);
        s->fused = t_fused <= t_split && t_fused < 1e30f;
    }
    cudaGetLastError();
    return true;
}

/* ---- channels-last conv through cuDNN's backend (graph) API.
 * Operation graph: conv (x [N,C,H,W] with NHWC strides, w [O,C/G,KH,KW]
 * with KRSC strides, f32 compute) -> [add bias [1,O,1,1]] -> [ReLU] -> y,
 * the intermediates virtual f32 tensors.  Engine configs from the
 * heuristics (mode A, then B, then the fallback list); the first few that
 * finalize into a plan whose workspace fits the thunk's scratch are each
 * timed on the real buffers, the fastest kept with its variant pack.  Any
 * status other than success: the path is not used for this conv.  True
 * with s->g.plan/s->g.pack set and s->use_graph 1; false (everything
 * released, a note under RLX_VERBOSE) otherwise. */
static bool prep_graph_nhwc(rlx_thunk *t, conv_state *s, int verbose, bool fuse)
{
    if (!rlx_dnn_graph_ready() || !t->scratch || rlx_cu_cfg.cuda_no_cudnn_graph)
        return false;
    const rlx_node_data *n = t->node;
    rlx_dtype dt = n->dtype;
    if (dt != RLX_F16 && dt != RLX_BF16)
        return false; /* f32 stays off the tensor cores (no TF32) */
    rlx_dnn.cudnnSetStream(rlx_dnn_h, rlx_cu_stream);
    cudnnDataType_t ty = dt == RLX_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    const win2d &w = s->w;
    int act = n->op == RLX_OP_CONV_BIAS_ACT ? n->attrs.conv.act : RLX_ACT_NONE;
    bool has_bias = n->attrs.conv.has_bias, relu = act == RLX_ACT_RELU;
    if (!fuse)
        relu = false;
    /* not fused: conv in the graph, then one bias/activation pass */
    s->g_post = (act != RLX_ACT_NONE && !relu) || (has_bias && !fuse);
    bool fuse_bias = has_bias && !s->g_post;
    graph_build b = {&s->g, CUDNN_STATUS_SUCCESS, NULL};
    const int64_t C = s->C, O = s->O, Cg = s->Cg;
    int64_t xdim[4] = {s->N, C, w.H, w.W}, xstr[4] = {w.H * w.W * C, 1, w.W * C, C};
    int64_t wdim[4] = {O, Cg, w.KH, w.KW}, wstr[4] = {w.KH * w.KW * Cg, 1, w.KW * Cg, Cg};
    int64_t ydim[4] = {s->N, O, w.OH, w.OW}, ystr[4] = {w.OH * w.OW * O, 1, w.OW * O, O};
    int64_t bdim[4] = {1, O, 1, 1}, bstr[4] = {O, 1, O, O};
    const int64_t *pads = n->attrs.conv.p.pads;
    int64_t sd = 2, pre[2] = {pads[0], pads[1]}, post[2] = {pads[2], pads[3]}, str[2] = {w.sh, w.sw},
            dil[2] = {w.dh, w.dw};
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    float alpha = 1.0f, beta = 0.0f;
    bdesc xt, wt, yt, bt = NULL, ct = NULL, at = NULL, cd, conv, ops[3];
    int nops = 0;
    /* the conv writes y directly when nothing follows it in the graph */
    bool chain = fuse_bias || relu;
    bool ok =
        gb_tensor(&b, &xt, 1, ty, 4, xdim, xstr, false, t->in[0]) &&
        gb_tensor(&b, &wt, 2, ty, 4, wdim, wstr, false, t->in[1]) &&
        gb_tensor(&b, &yt, 3, ty, 4, ydim, ystr, false, t->out) &&
        (!fuse_bias || gb_tensor(&b, &bt, 4, ty, 4, bdim, bstr, false, t->in[2])) &&
        (!chain || gb_tensor(&b, &ct, 5, f32, 4, ydim, ystr, true, NULL)) &&
        (!(fuse_bias && relu) || gb_tensor(&b, &at, 6, f32, 4, ydim, ystr, true, NULL)) &&
        gb_new(&b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &cd, "conv desc create") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd, "conv dims") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "conv compute type") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, "conv mode") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre, "conv pre pads") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post, "conv post pads") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str, "conv strides") &&
        gb_set(&b, cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil, "conv dilations") &&
        gb_ok(&b, rlx_dnn.cudnnBackendFinalize(cd), "conv desc finalize") &&
        gb_new(&b, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &conv, "conv op create") &&
        gb_set(&b, conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xt, "conv x") &&
        gb_set(&b, conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &wt, "conv w") &&
        gb_set(&b, conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               chain ? &ct : &yt, "conv y") &&
        gb_set(&b, conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd,
               "conv op desc") &&
        gb_set(&b, conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha, "conv alpha") &&
        gb_set(&b, conv, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta, "conv beta") &&
        gb_ok(&b, rlx_dnn.cudnnBackendFinalize(conv), "conv op finalize");
    if (ok) {
        ops[nops++] = conv;
        if (fuse_bias)
            ok = gb_pointwise(&b, &ops[nops++], CUDNN_POINTWISE_ADD, ct, bt, relu ? at : yt);
        if (ok && relu)
            ok = gb_pointwise(&b, &ops[nops++], CUDNN_POINTWISE_RELU_FWD, fuse_bias ? at : ct, NULL, yt);
    }
    bdesc og = NULL;
    ok = ok && gb_new(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &og, "op graph create") &&
         gb_set(&b, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops, "op graph ops");
    if (ok) {
        /* the handle attribute is deprecated in newer cuDNN 9 releases but still read by older ones */
        rlx_dnn.cudnnBackendSetAttribute(og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &rlx_dnn_h);
        ok = gb_ok(&b, rlx_dnn.cudnnBackendFinalize(og), "op graph finalize");
    }
    bool allow_rtc = rlx_cu_cfg.cuda_conv_rtc;
    void *ptrs[4] = {(void *)t->in[0], (void *)t->in[1], t->out, fuse_bias ? (void *)t->in[2] : NULL};
    int64_t uids[4] = {1, 2, 3, 4};
    if (ok)
        dnn_pick_plan(&b, og, ptrs, uids, fuse_bias ? 4 : 3, t->scratch, t->scratch_bytes, allow_rtc, 4, -1, CONV_REPS);
    int tried = s->g.plans;
    if (!s->g.plan) {
        if (verbose && b.where)
            fprintf(stderr, "[rlx cuda] conv node %d: cuDNN graph%s not used (%s: status %d)\n", (int)t->id,
                    chain ? " with bias/ReLU" : "", b.where, (int)b.st);
        else if (verbose)
            fprintf(stderr,
                    "[rlx cuda] conv node %d: cuDNN graph%s not used (no engine config passed the notes, "
                    "fit the scratch and ran; %d plans timed)\n",
                    (int)t->id, chain ? " with bias/ReLU" : "", tried);
        dnn_release_graph(&s->g);
        return false;
    }
    s->use_graph = 1;
    return true;
}
#endif

/* Channels-last: cuBLASLt (groups 1: a 1x1 stride-1 conv reads x as it
 * is, others an NHWC im2col), cuDNN's graph API and cuDNN's legacy calls,
 * each timed (captured launches), the fastest kept.  RLX_CUDA_CONV_PATH=
 * gemm|graph|legacy prefers one where it can run the conv (tests). */
static rlx_status prep_conv_nhwc(rlx_thunk *t, conv_state *s)
{
    const rlx_node_data *n = t->node;
    nhwc_dims(n, &t->in_node[0]->shape, &t->in_node[1]->shape, s);
    if (!s->N || !s->O || !s->OHW)
        return RLX_OK;
    int verbose = rlx_cu_cfg.verbose != 0;
    /* RLX_CUDA_CONV_PATH: -1 none, else the index into ms[] below */
    int want = rlx_cu_cfg.cuda_conv_path == RLX_CUDA_CONV_GEMM     ? 0
               : rlx_cu_cfg.cuda_conv_path == RLX_CUDA_CONV_GRAPH  ? 1
               : rlx_cu_cfg.cuda_conv_path == RLX_CUDA_CONV_LEGACY ? 2
                                                                   : -1;
    int act = n->op == RLX_OP_CONV_BIAS_ACT ? n->attrs.conv.act : RLX_ACT_NONE;
    const void *bias = n->attrs.conv.has_bias ? t->in[2] : NULL;
    float ms[3] = {1e30f, 1e30f, 1e30f}; /* gemm, graph, legacy */
    bool ready[3] = {false, false, false};
    if (s->G == 1) {
        s->pw = pointwise(&s->w);
        cu_epi epi = rlx_cu_gemm_epilogue(n->attrs.conv.has_bias, act, &s->post);
        int64_t M = s->N * s->OHW;
        rlx_status gst =
            rlx_cu_gemm_plan(&s->gemm, n->dtype, 0, 1, M, s->O, s->K, s->K, s->K, s->O, 1, 0, 0, 0, epi, 256);
        if (gst == RLX_OK && t->scratch) {
            size_t col_b = s->pw ? 0 : cu_round256((size_t)(M * s->K) * rlx_dtype_size(n->dtype));
            rlx_cu_gemm_tune(&s->gemm, s->pw ? t->in[0] : t->scratch, t->in[1], t->out, bias,
                             (char *)t->scratch + col_b);
        }
        if (gst != RLX_OK)
            rlx_clear_error(); /* cuDNN may still run it */
        ready[0] = gst == RLX_OK;
        if (ready[0]) {
            s->nhwc_gemm = 1;
            ms[0] = time_conv(t);
            s->nhwc_gemm = 0;
        }
    }
#ifdef RLX_CUDNN
    /* bias/ReLU in the graph where an engine takes them, else conv alone */
    bool fusable = n->attrs.conv.has_bias || act == RLX_ACT_RELU;
    if (prep_graph_nhwc(t, s, verbose, true) || (fusable && prep_graph_nhwc(t, s, verbose, false))) {
        ready[1] = true;
        ms[1] = time_conv(t);
        s->use_graph = 0;
    }
    /* the legacy calls (RLX_CUDA_CONV_LEGACY=0 skips them where another path runs) */
    if (rlx_cu_cfg.cuda_conv_legacy || want == 2 || (!ready[0] && !ready[1])) {
        ready[2] = prep_dnn_nhwc(t, s);
        if (ready[2])
            ms[2] = time_conv(t);
    }
#endif
    int pick = -1;
    for (int i = 0; i < 3; i++)
        if (ready[i] && (pick < 0 || ms[i] < ms[pick]))
            pick = i;
    if (want >= 0 && ready[want])
        pick = want;
    if (pick < 0)
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "no channels-last path for this conv (groups %lld needs cuDNN)",
                           (long long)s->G);
    s->nhwc_gemm = pick == 0;
#ifdef RLX_CUDNN
    s->use_graph = pick == 1;
    if (ready[1] && pick != 1)
        dnn_release_graph(&s->g);
    if (ready[2] && pick != 2)
        release_dnn(s);
#endif
    if (verbose) {
        static const char *names[3] = {"cublaslt", "cudnn-graph", "cudnn-legacy"};
        char alt[160] = "";
        int at = 0;
        for (int i = 0; i < 3; i++)
            if (i != pick && ready[i] && at < (int)sizeof alt)
                at += snprintf(alt + at, sizeof alt - at, "%s %s %.4f ms", at ? "," : "; vs", names[i],
                               ms[i] < 1e29f ? ms[i] : -1.0f);
        char how[96] = "";
#ifdef RLX_CUDNN
        if (pick == 1)
            snprintf(how, sizeof how, " [%s, %d plans timed, workspace %lld B]",
                     s->g_post ? "conv, then a bias/act pass" : "bias/act in the graph", s->g.plans,
                     (long long)s->g.ws);
#endif
        fprintf(stderr,
                "[rlx cuda] conv node %d nhwc %lldx%lldx%lldx%lld -> %lld k%lldx%lld s%lld g%lld: %s %.4f ms%s%s%s\n",
                (int)t->id, (long long)s->N, (long long)s->w.H, (long long)s->w.W, (long long)s->C, (long long)s->O,
                (long long)s->w.KH, (long long)s->w.KW, (long long)s->w.sh, (long long)s->G, names[pick],
                ms[pick] < 1e29f ? ms[pick] : -1.0f, how, alt, want >= 0 && pick == want ? " (forced)" : "");
    }
    return RLX_OK;
}

static rlx_status k_conv_nhwc(const rlx_thunk *t)
{
    const conv_state *s = (const conv_state *)t->state;
    if (!s->N || !s->O || !s->OHW)
        return RLX_OK;
    rlx_dtype dt = t->node->dtype;
    int act = t->node->op == RLX_OP_CONV_BIAS_ACT ? t->node->attrs.conv.act : RLX_ACT_NONE;
    if (s->nhwc_gemm) {
        int64_t M = s->N * s->OHW, total_col = M * s->K;
        const void *A = t->in[0];
        size_t col_b = 0;
        if (!s->pw) {
            bool small = total_col < (1LL << 31) && s->N * s->HW * s->C < (1LL << 31);
            CU_FLOAT_DISPATCH(dt, T, {
                if (small)
                    cu_launch(im2col_nhwc<T, unsigned>, cu_blocks(total_col, 256), 256, 0, (const T *)t->in[0],
                              (T *)t->scratch, (unsigned)total_col, (unsigned)s->C, (unsigned)s->K, s->w);
                else
                    cu_launch(im2col_nhwc<T, int64_t>, cu_blocks(total_col, 256), 256, 0, (const T *)t->in[0],
                              (T *)t->scratch, total_col, s->C, s->K, s->w);
            });
            rlx_status st = rlx_cu_check(t, "im2col launch");
            if (st != RLX_OK)
                return st;
            A = t->scratch;
            col_b = cu_round256((size_t)total_col * rlx_dtype_size(dt));
        }
        rlx_status st = rlx_cu_gemm_run(t, &s->gemm, A, t->in[1], t->out,
                                        t->node->attrs.conv.has_bias ? t->in[2] : NULL, (char *)t->scratch + col_b);
        if (st != RLX_OK || !s->post)
            return st;
        int64_t total = M * s->O;
        rlx_cu_act_pass(dt, t->out, total, act);
        return rlx_cu_check(t, "conv activation launch");
    }
#ifdef RLX_CUDNN
    if (s->use_graph) {
        cudnnStatus_t gs = rlx_dnn.cudnnBackendExecute(rlx_dnn_h, s->g.plan, s->g.pack);
        if (gs != CUDNN_STATUS_SUCCESS)
            return rlx_cu_fail(t, RLX_ERR_DEVICE, "cudnnBackendExecute (channels-last conv) failed (status %d)",
                               (int)gs);
        if (!s->g_post)
            return RLX_OK;
        int64_t total = s->N * s->O * s->OHW;
        const void *bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL;
        CU_FLOAT_DISPATCH(dt, T, {
            if (total < (1LL << 31))
                cu_launch(bias_nhwc<T, unsigned>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias,
                          (unsigned)total, (unsigned)s->O, act);
            else
                cu_launch(bias_nhwc<T, int64_t>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias, total,
                          s->O, act);
        });
        return rlx_cu_check(t, "conv bias launch");
    }
    float one = 1.0f, zero = 0.0f;
    cudnnStatus_t ds;
    if (s->fused) {
        /* y = act(conv(x) + 0 * z + bias), z = y (not read with alpha2 0) */
        ds = rlx_dnn.cudnnConvolutionBiasActivationForward(rlx_dnn_h, &one, s->xd, t->in[0], s->wd, t->in[1], s->cd,
                                                           s->algo_fused, t->scratch, s->ws_fused, &zero, s->yd, t->out,
                                                           s->bd, t->in[2], s->ad, s->yd, t->out);
        if (ds != CUDNN_STATUS_SUCCESS)
            return rlx_cu_fail(t, RLX_ERR_DEVICE, "cudnnConvolutionBiasActivationForward failed (status %d)", (int)ds);
        return RLX_OK;
    }
    ds = rlx_dnn.cudnnConvolutionForward(rlx_dnn_h, &one, s->xd, t->in[0], s->wd, t->in[1], s->cd, s->algo, t->scratch,
                                         s->dnn_ws, &zero, s->yd, t->out);
    if (ds != CUDNN_STATUS_SUCCESS)
        return rlx_cu_fail(t, RLX_ERR_DEVICE, "cudnnConvolutionForward (channels-last) failed (status %d)", (int)ds);
    if (!t->node->attrs.conv.has_bias && act == RLX_ACT_NONE)
        return RLX_OK;
    int64_t total = s->N * s->O * s->OHW;
    const void *bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL;
    CU_FLOAT_DISPATCH(dt, T, {
        if (total < (1LL << 31))
            cu_launch(bias_nhwc<T, unsigned>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias,
                      (unsigned)total, (unsigned)s->O, act);
        else
            cu_launch(bias_nhwc<T, int64_t>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias, total, s->O,
                      act);
    });
    return rlx_cu_check(t, "conv bias launch");
#else
    return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "channels-last conv needs cuDNN");
#endif
}

static rlx_status prep_conv(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    conv_state *s = (conv_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    t->state = s;
    if (t->node->attrs.conv.layout == RLX_LAYOUT_NHWC)
        return prep_conv_nhwc(t, s);
    const rlx_shape *xs = &t->in_node[0]->shape, *ws = &t->in_node[1]->shape;
    s->w = conv_window(t->node, xs, ws);
    s->N = xs->dims[0];
    s->C = xs->dims[1];
    s->G = t->node->attrs.conv.p.groups;
    s->Cg = s->C / s->G;
    s->O = ws->dims[0];
    s->Og = s->O / s->G;
    s->K = s->Cg * s->w.KH * s->w.KW;
    s->OHW = s->w.OH * s->w.OW;
    s->HW = s->w.H * s->w.W;
    s->pw = pointwise(&s->w);
    s->gathered = conv_gathered(s->N, s->OHW);
    if (!s->N || !s->O || !s->OHW)
        return RLX_OK;
    rlx_status st = prep_conv_gemm(t, s);
#ifdef RLX_CUDNN
    /* both paths ready: keep whichever runs this convolution faster */
    if (prep_dnn(t, s) && st == RLX_OK) {
        float t_dnn = time_conv(t);
        s->use_dnn = 0;
        float t_gemm = time_conv(t);
        s->use_dnn = t_dnn < t_gemm;
        if (!s->use_dnn)
            release_dnn(s);
    } else if (s->use_dnn) {
        st = RLX_OK;
    }
#endif
    return st;
}

static rlx_status prep_conv_gemm(rlx_thunk *t, conv_state *s)
{
    if (s->gathered) {
        int64_t NP = s->N * s->OHW;
        size_t es0 = rlx_dtype_size(t->node->dtype);
        size_t al = s->G > 1 ? ((size_t)(s->Og * s->K) * es0 | (size_t)(s->Og * NP) * es0 | 256) : 256;
        al &= ~(al - 1);
        rlx_status st = rlx_cu_gemm_plan(&s->gemm, t->node->dtype, 0, 0, s->Og, NP, s->K, s->K, NP, NP, 1, 0, 0, 0,
                                         CU_EPI_NONE, al);
        if (st == RLX_OK && t->scratch) {
            size_t col_b = cu_round256((size_t)(s->N * s->K * s->OHW) * es0);
            size_t y_b = cu_round256((size_t)(s->N * s->O * s->OHW) * es0);
            char *col = (char *)t->scratch;
            rlx_cu_gemm_tune(&s->gemm, t->in[1], col, col + col_b, NULL, col + col_b + y_b);
        }
        return st;
    }
    /* Y_n[Og, OHW] = W_g[Og, K] * col_n[K, OHW], all n in one batched GEMM */
    int64_t ldb = s->OHW, stride_b = s->pw ? s->C * s->HW : s->K * s->OHW;
    size_t es = rlx_dtype_size(t->node->dtype);
    size_t align = 256;
    if (s->G > 1) {
        align = (size_t)(s->Og * s->K) * es | (size_t)(s->Og * s->OHW) * es | 256;
        if (s->pw)
            align |= (size_t)(s->Cg * s->HW) * es;
        align &= ~(align - 1);
    }
    rlx_status st = rlx_cu_gemm_plan(&s->gemm, t->node->dtype, 0, 0, s->Og, s->OHW, s->K, s->K, ldb, s->OHW, s->N, 0,
                                     stride_b, s->O * s->OHW, CU_EPI_NONE, align);
    if (st == RLX_OK && t->scratch) {
        size_t col_bytes = s->pw ? 0 : cu_round256((size_t)(s->N * s->K * s->OHW) * es);
        rlx_cu_gemm_tune(&s->gemm, t->in[1], s->pw ? t->in[0] : t->scratch, t->out, NULL,
                         (char *)t->scratch + col_bytes);
    }
    return st;
}

static void release_conv(rlx_thunk *t)
{
    conv_state *s = (conv_state *)t->state;
#ifdef RLX_CUDNN
    if (s->use_dnn)
        release_dnn(s);
    if (s->g.plan || s->g.n_keep)
        dnn_release_graph(&s->g);
#endif
    rlx_cu_gemm_free(&s->gemm);
    free(s);
}

static size_t conv_col_bytes(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_shape *xs = &g->nodes[n->in[0]].shape, *ws = &g->nodes[n->in[1]].shape;
    win2d w = conv_window(n, xs, ws);
    int64_t N = xs->dims[0], OHW = w.OH * w.OW;
    size_t es = rlx_dtype_size(n->dtype);
    int64_t G = n->attrs.conv.p.groups, Cg = xs->dims[1] / G;
    size_t col = cu_round256((size_t)(N * Cg * w.KH * w.KW * OHW) * es);
    if (conv_gathered(N, OHW))
        return col + cu_round256((size_t)(N * ws->dims[0] * OHW) * es); /* columns + Y' */
    if (pointwise(&w))
        return 0;
    return col;
}

static size_t conv_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    if (n->attrs.conv.layout == RLX_LAYOUT_NHWC)
        return nhwc_scratch(g, n);
    return conv_col_bytes(g, n) + CU_GEMM_WORKSPACE;
}

static rlx_status k_conv(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    if (t->node->attrs.conv.layout == RLX_LAYOUT_NHWC)
        return k_conv_nhwc(t);
    const conv_state *s = (const conv_state *)t->state;
    if (!s->N || !s->O || !s->OHW)
        return RLX_OK;
    rlx_dtype dt = t->node->dtype;
    size_t es = rlx_dtype_size(dt);
    /* 32-bit indices when every index (columns, outputs, input) fits */
    int64_t biggest = s->N * s->K * s->OHW;
    if (s->N * s->O * s->OHW > biggest)
        biggest = s->N * s->O * s->OHW;
    if (s->N * s->C * s->HW > biggest)
        biggest = s->N * s->C * s->HW;
    bool small = biggest < (1LL << 31);
    int act = t->node->op == RLX_OP_CONV_BIAS_ACT ? t->node->attrs.conv.act : RLX_ACT_NONE;
#ifdef RLX_CUDNN
    if (s->use_dnn) {
        float one = 1.0f, zero = 0.0f;
        cudnnStatus_t ds = rlx_dnn.cudnnConvolutionForward(rlx_dnn_h, &one, s->xd, t->in[0], s->wd, t->in[1], s->cd,
                                                           s->algo, t->scratch, s->dnn_ws, &zero, s->yd, t->out);
        if (ds != CUDNN_STATUS_SUCCESS)
            return rlx_cu_fail(t, RLX_ERR_DEVICE, "cudnnConvolutionForward failed (status %d)", (int)ds);
        if (!t->node->attrs.conv.has_bias && act == RLX_ACT_NONE)
            return RLX_OK;
        int64_t total = s->N * s->O * s->OHW;
        const void *bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL;
        CU_FLOAT_DISPATCH(dt, T, {
            if (small)
                cu_launch(bias_nchw<T, unsigned>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias,
                          (unsigned)total, (unsigned)s->O, (unsigned)s->OHW, act);
            else
                cu_launch(bias_nchw<T, int64_t>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias, total,
                          s->O, s->OHW, act);
        });
        return rlx_cu_check(t, "conv bias launch");
    }
#endif
    if (s->gathered) {
        int64_t NP = s->N * s->OHW;
        size_t col_b = cu_round256((size_t)(s->N * s->K * s->OHW) * es);
        size_t y_b = cu_round256((size_t)(s->N * s->O * s->OHW) * es);
        char *col = (char *)t->scratch, *yg = col + col_b, *ws = yg + y_b;
        for (int64_t g = 0; g < s->G; g++) {
            int64_t total = s->K * NP;
            CU_FLOAT_DISPATCH(dt, T, {
                if (small)
                    cu_launch(im2col_gathered<T, unsigned>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0],
                              (T *)col, (unsigned)s->N, (unsigned)s->C, (unsigned)(g * s->Cg), (unsigned)s->Cg, s->w);
                else
                    cu_launch(im2col_gathered<T, int64_t>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0], (T *)col,
                              s->N, s->C, g * s->Cg, s->Cg, s->w);
            });
            rlx_status st = rlx_cu_check(t, "im2col launch");
            if (st != RLX_OK)
                return st;
            const char *A = (const char *)t->in[1] + (size_t)(g * s->Og * s->K) * es;
            if ((st = rlx_cu_gemm_run(t, &s->gemm, A, col, yg + (size_t)(g * s->Og * NP) * es, NULL, ws)) != RLX_OK)
                return st;
        }
        int64_t total = s->N * s->O * s->OHW;
        const void *bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL;
        CU_FLOAT_DISPATCH(dt, T, {
            if (small)
                cu_launch(permute_bias_act<T, unsigned>, cu_blocks(total, 256), 256, 0, (const T *)yg, (const T *)bias,
                          (T *)t->out, (unsigned)s->N, (unsigned)s->O, (unsigned)s->OHW, act);
            else
                cu_launch(permute_bias_act<T, int64_t>, cu_blocks(total, 256), 256, 0, (const T *)yg, (const T *)bias,
                          (T *)t->out, s->N, s->O, s->OHW, act);
        });
        return rlx_cu_check(t, "conv output launch");
    }
    size_t col_bytes = s->pw ? 0 : cu_round256((size_t)(s->N * s->K * s->OHW) * es);
    char *col = (char *)t->scratch, *ws = (char *)t->scratch + col_bytes;
    for (int64_t g = 0; g < s->G; g++) {
        const void *B;
        if (s->pw) {
            B = (const char *)t->in[0] + (size_t)(g * s->Cg * s->HW) * es;
        } else {
            int64_t total = s->N * s->K * s->OHW;
            CU_FLOAT_DISPATCH(dt, T, {
                if (small)
                    cu_launch(im2col_kernel<T, unsigned>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0], (T *)col,
                              (unsigned)s->N, (unsigned)s->C, (unsigned)(g * s->Cg), (unsigned)s->Cg, s->w);
                else
                    cu_launch(im2col_kernel<T, int64_t>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0], (T *)col,
                              s->N, s->C, g * s->Cg, s->Cg, s->w);
            });
            rlx_status st = rlx_cu_check(t, "im2col launch");
            if (st != RLX_OK)
                return st;
            B = col;
        }
        const char *A = (const char *)t->in[1] + (size_t)(g * s->Og * s->K) * es;
        char *C = (char *)t->out + (size_t)(g * s->Og * s->OHW) * es;
        rlx_status st = rlx_cu_gemm_run(t, &s->gemm, A, B, C, NULL, ws);
        if (st != RLX_OK)
            return st;
    }
    if (t->node->attrs.conv.has_bias || act != RLX_ACT_NONE) {
        int64_t total = s->N * s->O * s->OHW;
        const void *bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL;
        CU_FLOAT_DISPATCH(dt, T, {
            if (small)
                cu_launch(bias_nchw<T, unsigned>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias,
                          (unsigned)total, (unsigned)s->O, (unsigned)s->OHW, act);
            else
                cu_launch(bias_nchw<T, int64_t>, cu_blocks(total, 256), 256, 0, (T *)t->out, (const T *)bias, total,
                          s->O, s->OHW, act);
        });
        return rlx_cu_check(t, "conv bias launch");
    }
    return RLX_OK;
}

/* ------------------------------------------------------------ pools */

typedef struct pool_args {
    win2d w;
    int is_max, count_include_pad;
    int64_t ph_end, pw_end;
} pool_args;

/* NHWC: C channels fastest (element (ih, iw) at (ih * W + iw) * C from the
 * (n, c) base); NCHW: one plane per (n, c). */
template <typename T, bool NHWC> __global__ void pool_kernel(const T *x, T *y, int64_t total, pool_args a, int64_t C)
{
    cu_grid_wait();
    const win2d &w = a.w;
    int64_t OHW = w.OH * w.OW, HW = w.H * w.W;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = NHWC ? o / C : o, es = NHWC ? C : 1;
        int64_t pl = q / OHW, oh = (q % OHW) / w.OW, ow = q % w.OW;
        int64_t base = NHWC ? pl * HW * C + o % C : pl * HW, h0 = oh * w.sh - w.ph, w0 = ow * w.sw - w.pw;
        float acc = a.is_max ? -INFINITY : 0.0f;
        int64_t count = 0;
        bool nan = false;
        for (int64_t kh = 0; kh < w.KH; kh++) {
            int64_t ih = h0 + kh * w.dh;
            bool in_h = ih >= 0 && ih < w.H;
            for (int64_t kw = 0; kw < w.KW; kw++) {
                int64_t iw = w0 + kw * w.dw;
                bool in_w = iw >= 0 && iw < w.W;
                if (in_h && in_w) {
                    float v = cu_tof<T>(x[base + (ih * w.W + iw) * es]);
                    if (a.is_max) {
                        nan |= v != v;
                        acc = v > acc ? v : acc;
                    } else {
                        acc += v;
                    }
                    count++;
                } else if (!a.is_max && a.count_include_pad && ih >= -w.ph && ih < w.H + a.ph_end && iw >= -w.pw &&
                           iw < w.W + a.pw_end) {
                    count++;
                }
            }
        }
        float r = a.is_max ? (nan ? rlx_nan_f() : acc) : (count ? acc / (float)count : 0.0f);
        y[o] = cu_fromf<T>(r);
    }
}

static rlx_status k_pool(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_shape *xs = &t->in_node[0]->shape;
    const rlx_pool_params *p = &t->node->attrs.pool.p;
    pool_args a;
    a.is_max = t->node->op == RLX_OP_MAX_POOL;
    a.count_include_pad = p->count_include_pad;
    int sp = xs->ndim - 2;
    bool nhwc = t->node->attrs.pool.layout == RLX_LAYOUT_NHWC;
    /* the window over an NCHW view of the same sizes */
    rlx_shape xv = *xs, yv = t->node->shape;
    if (nhwc) {
        xv.dims[1] = xs->dims[3], xv.dims[2] = xs->dims[1], xv.dims[3] = xs->dims[2];
        yv.dims[1] = yv.dims[3], yv.dims[2] = t->node->shape.dims[1], yv.dims[3] = t->node->shape.dims[2];
    }
    a.w = window_of(&xv, &yv, sp == 2 ? p->kernel[0] : 1, p->kernel[sp - 1], p->stride, p->dilation, p->pads);
    a.ph_end = sp == 2 ? p->pads[2] : 0;
    a.pw_end = sp == 2 ? p->pads[3] : p->pads[1];
    int64_t C = xv.dims[1], total = xv.dims[0] * C * a.w.OH * a.w.OW;
    if (!total)
        return RLX_OK;
    if (nhwc)
        CU_FLOAT_DISPATCH(t->node->dtype, T,
                          cu_launch(pool_kernel<T, true>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0],
                                    (T *)t->out, total, a, C));
    else
        CU_FLOAT_DISPATCH(xs->ndim ? t->node->dtype : RLX_F32, T,
                          cu_launch(pool_kernel<T, false>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0],
                                    (T *)t->out, total, a, C));
    return rlx_cu_check(t, "pool launch");
}

template <typename T> __global__ void gap_kernel(const T *x, T *y, int64_t planes, int64_t n)
{
    cu_grid_wait();
    int64_t pl = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (pl >= planes)
        return;
    float s = 0;
    for (int64_t i = lane; i < n; i += 32)
        s += cu_tof<T>(x[pl * n + i]);
    s = cu_warp_sum(s);
    if (lane == 0)
        y[pl] = cu_fromf<T>(n ? s / (float)n : rlx_nan_f());
}

static rlx_status k_gap(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *xn = t->in_node[0];
    int64_t planes = xn->shape.dims[0] * xn->shape.dims[1];
    int64_t n = planes ? rlx_shape_numel(&xn->shape) / planes : 0;
    if (!planes)
        return RLX_OK;
    CU_FLOAT_DISPATCH(
        xn->dtype, T,
        cu_launch(gap_kernel<T>, cu_blocks(planes * 32, 256), 256, 0, (const T *)t->in[0], (T *)t->out, planes, n));
    return rlx_cu_check(t, "global average pool launch");
}

/* Channels-last conv: claimed when cuDNN loads (asked at compile time;
 * otherwise the layout pass keeps NCHW), for f16/bf16 (f32 stays on the
 * NCHW path), symmetric pads, int sizes.  RLX_CUDA_NHWC=0 turns the claim
 * off, =1 on (the settings' cuda_nhwc, on by default: backend.h).  On by default since the three-way
 * per-conv choice (cuBLASLt, cuDNN graph API, cuDNN legacy; captured
 * timing) measured faster than NCHW end to end on an H200: ResNet-50 f16
 * b1 0.396 vs 0.701 ms, b16 1.389 vs 3.085 ms. */
static bool conv_ok(const rlx_graph *g, const rlx_node_data *n)
{
    /* a residual add stays its own node here (its kernels take none) */
    if (!rlx_cu_float_ok(g, n) || rlx_conv_residual_input(n) >= 0)
        return false;
    if (n->attrs.conv.layout == RLX_LAYOUT_NCHW)
        return true;
#ifdef RLX_CUDNN
    if (!rlx_cu_cfg.cuda_nhwc)
        return false;
    const rlx_shape *xs = &g->nodes[n->in[0]].shape;
    const int64_t *pads = n->attrs.conv.p.pads;
    if (xs->ndim != 4 || (n->dtype != RLX_F16 && n->dtype != RLX_BF16) || pads[0] != pads[2] || pads[1] != pads[3] ||
        rlx_shape_numel(xs) >= (INT64_C(1) << 31) || rlx_shape_numel(&n->shape) >= (INT64_C(1) << 31))
        return false;
    return rlx_dnn_ready();
#else
    return false;
#endif
}

/* Pooling runs in either layout (its own kernel). */
static bool pool_ok(const rlx_graph *g, const rlx_node_data *n)
{
    return rlx_cu_float_ok(g, n) && (n->attrs.pool.layout == RLX_LAYOUT_NCHW || g->nodes[n->in[0]].shape.ndim == 4);
}

extern "C" void rlx_cuda_register_conv(cu_kernel *tab)
{
    tab[RLX_OP_CONV] = (cu_kernel){k_conv, conv_scratch, conv_ok, prep_conv, release_conv};
    tab[RLX_OP_CONV_BIAS_ACT] = (cu_kernel){k_conv, conv_scratch, conv_ok, prep_conv, release_conv};
    tab[RLX_OP_MAX_POOL] = (cu_kernel){k_pool, NULL, pool_ok, NULL, NULL};
    tab[RLX_OP_AVG_POOL] = (cu_kernel){k_pool, NULL, pool_ok, NULL, NULL};
    tab[RLX_OP_GLOBAL_AVG_POOL] = (cu_kernel){k_gap, NULL, NULL, NULL, NULL};
}
