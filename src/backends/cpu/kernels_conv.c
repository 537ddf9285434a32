/* kernels_conv.c - convolution and its fused form conv_bias_act (NCHW, 1
 * or 2 spatial dims): a direct kernel for f32 depthwise convolutions
 * (groups == channels, any channel multiplier), im2col + GEMM for the rest
 * and for f64/f16/bf16.
 *
 * Depthwise convs have one input channel per output channel: as im2col +
 * GEMM they are one GEMM of a single row per channel, all overhead (the
 * PaddleOCR models spent most of their conv time there); the direct kernel
 * runs each output row once over its taps, with bias and activation fused.
 *
 * Workspace comes from t->scratch, sized by conv_scratch. */
#include "backends/cpu/cpu_conv.h"
#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_window.h"

static size_t round64(size_t b) { return (b + 63) / 64 * 64; }

static window2d conv_window_of(const rlx_node_data *n, const rlx_shape *x, const rlx_shape *w)
{
    int sp = x->ndim - 2;
    int64_t kh = sp == 2 ? w->dims[2] : 1, kw = w->dims[x->ndim - 1];
    return conv_window(x, &n->shape, kh, kw, n->attrs.conv.p.stride, n->attrs.conv.p.dilation, n->attrs.conv.p.pads);
}

static int conv_is_pointwise(const window2d *w)
{
    return w->KH == 1 && w->KW == 1 && w->sh == 1 && w->sw == 1 && w->ph == 0 && w->pw == 0 && w->OH == w->H &&
           w->OW == w->W;
}

/* Whether the node is a depthwise conv this kernel takes: f32, one input
 * channel per group (groups == C), O a multiple of C.  A single input
 * channel (C == 1) is one GEMM already: it stays there unless its outputs
 * are few and its window short (Silero's STFT, 258 outputs of a 256-tap
 * window at stride 64, ran 20x slower tap by tap). */
static bool conv_is_depthwise(const rlx_node_data *xn, const rlx_node_data *wn, const rlx_node_data *n)
{
    int64_t G = n->attrs.conv.p.groups, C = xn->shape.dims[1], O = wn->shape.dims[0];
    int64_t taps = rlx_shape_numel(&wn->shape) / (O > 0 ? O : 1);
    if (G == 1 && (O >= 8 || taps > 16))
        return false;
    return xn->dtype == RLX_F32 && n->attrs.conv.layout == RLX_LAYOUT_NCHW && G == C && G > 0 &&
           wn->shape.dims[1] == 1 && O % G == 0;
}

static size_t conv_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    if (n->attrs.conv.layout == RLX_LAYOUT_NHWC || conv_is_depthwise(IN_NODE(g, n, 0), IN_NODE(g, n, 1), n))
        return 0;
    const rlx_shape *x = &IN_NODE(g, n, 0)->shape, *w = &IN_NODE(g, n, 1)->shape;
    rlx_dtype dt = IN_NODE(g, n, 0)->dtype;
    window2d win = conv_window_of(n, x, w);
    int64_t G = n->attrs.conv.p.groups, Cg = x->dims[1] / G, O = w->dims[0], Og = O / G;
    int64_t K = Cg * win.KH * win.KW, OHW = win.OH * win.OW;
    size_t bytes = 0;
    int need_col = !conv_is_pointwise(&win) || (dt != RLX_F32 && dt != RLX_F64);
    if (dt == RLX_F64) {
        if (need_col)
            bytes += round64((size_t)(K * OHW) * sizeof(double));
    } else {
        if (need_col)
            bytes += round64((size_t)(K * OHW) * sizeof(float));
        if (dt != RLX_F32)
            bytes += round64((size_t)(O * K) * sizeof(float)) + round64((size_t)(Og * OHW) * sizeof(float));
    }
    return bytes;
}

/* col[K][OH*OW] from one image's channels c0..c0+Cg (source element type
 * ST, converted to CT).  One row of col per (channel, kh, kw): for each output row,
 * the taps that fall on the image are copied (a plain copy at stride 1) and
 * those on the padding are zero; the bounds are worked out once per row
 * rather than tested per element. */
typedef struct im2col_job {
    void *col;
    const void *x;
    const window2d *w;
} im2col_job;

#define IM2COL(NAME, ST, CT, CONV)                                                     \
    static void NAME##_rows(void *p, int64_t r0, int64_t r1, int worker)               \
    {                                                                                  \
        (void)worker;                                                                  \
        const im2col_job *job = p;                                                     \
        const window2d *w = job->w;                                                    \
        const ST *x = job->x;                                                          \
        CT *col = job->col;                                                            \
        int64_t OHW = w->OH * w->OW;                                                   \
        for (int64_t r = r0; r < r1; r++) {                                            \
            int64_t c = r / (w->KH * w->KW), kh = (r / w->KW) % w->KH, kw = r % w->KW; \
            const ST *xc = x + c * w->H * w->W;                                        \
            CT *dst = col + r * OHW;                                                   \
            int64_t iw0 = -w->pw + kw * w->dw;                                         \
            int64_t lo = tap_lo(iw0, 0, w->sw), hi = tap_hi(iw0, w->W, w->sw, w->OW);  \
            lo = lo < w->OW ? lo : w->OW;                                              \
            hi = hi > lo ? hi : lo;                                                    \
            for (int64_t oh = 0; oh < w->OH; oh++) {                                   \
                int64_t ih = oh * w->sh - w->ph + kh * w->dh;                          \
                CT *drow = dst + oh * w->OW;                                           \
                if (ih < 0 || ih >= w->H) {                                            \
                    for (int64_t ow = 0; ow < w->OW; ow++)                             \
                        drow[ow] = 0;                                                  \
                    continue;                                                          \
                }                                                                      \
                /* the first tap on the image: iw0 + lo * sw >= 0 */                   \
                const ST *xr = xc + ih * w->W + (hi > lo ? iw0 + lo * w->sw : 0);      \
                for (int64_t ow = 0; ow < lo; ow++)                                    \
                    drow[ow] = 0;                                                      \
                if (w->sw == 1) {                                                      \
                    for (int64_t j = 0; j < hi - lo; j++)                              \
                        drow[lo + j] = (CT)CONV(xr[j]);                                \
                } else {                                                               \
                    for (int64_t j = 0; j < hi - lo; j++)                              \
                        drow[lo + j] = (CT)CONV(xr[j * w->sw]);                        \
                }                                                                      \
                for (int64_t ow = hi; ow < w->OW; ow++)                                \
                    drow[ow] = 0;                                                      \
            }                                                                          \
        }                                                                              \
    }                                                                                  \
    static void NAME(CT *col, const ST *x, int64_t Cg, const window2d *w, int threads) \
    {                                                                                  \
        im2col_job job = {.col = col, .x = x, .w = w};                                 \
        rlx_cpu_parallel(threads, Cg * w->KH * w->KW, NAME##_rows, &job);              \
    }

#define CV_ID(v) (v)
IM2COL(im2col_f32, float, float, CV_ID)
IM2COL(im2col_f64, double, double, CV_ID)
IM2COL(im2col_f16, uint16_t, float, rlx_f16_to_f32)
IM2COL(im2col_bf16, uint16_t, float, rlx_bf16_to_f32)

/* A conv's planes for the pool (the start fill, the depthwise kernel, the
 * activation pass). */
typedef struct conv_job {
    const rlx_thunk *t;
    const window2d *w;
    const void *bias, *res; /* either may be NULL */
    int64_t O, OHW, lo, hi, total;
    int act;
} conv_job;

/* A conv_bias_act's residual (added before the activation; it may be the
 * output's own memory, the planner's in-place choice), or NULL. */
static const void *conv_residual(const rlx_thunk *t)
{
    int ri = rlx_conv_residual_input(t->node);
    return ri >= 0 ? t->in[ri] : NULL;
}

/* Output planes [N*O] start as the bias plus the residual (read before
 * each element is written, so the residual may be the output itself). */
static void conv_start_planes(void *p, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const conv_job *j = p;
    int64_t OHW = j->OHW, O = j->O;
    for (int64_t i = i0; i < i1; i++) {
        if (j->t->node->dtype == RLX_F32) {
            const float *r = j->res ? (const float *)j->res + i * OHW : NULL;
            float b = j->bias ? ((const float *)j->bias)[i % O] : 0.0f, *y = (float *)j->t->out + i * OHW;
            for (int64_t k = 0; k < OHW; k++)
                y[k] = b + (r ? r[k] : 0.0f);
        } else {
            const double *r = j->res ? (const double *)j->res + i * OHW : NULL;
            double b = j->bias ? ((const double *)j->bias)[i % O] : 0.0, *y = (double *)j->t->out + i * OHW;
            for (int64_t k = 0; k < OHW; k++)
                y[k] = b + (r ? r[k] : 0.0);
        }
    }
}

/* im2col + GEMM, any dtype, groups, stride, dilation and padding. */
static rlx_status conv_gemm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0], *wn = t->in_node[1];
    const rlx_shape *xs = &xn->shape, *ws = &wn->shape;
    rlx_dtype dt = xn->dtype;
    window2d win = conv_window_of(t->node, xs, ws);
    int64_t N = xs->dims[0], C = xs->dims[1], G = t->node->attrs.conv.p.groups, Cg = C / G;
    int64_t O = ws->dims[0], Og = O / G;
    int64_t K = Cg * win.KH * win.KW, HW = win.H * win.W, OHW = win.OH * win.OW;
    const void *bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL, *res = conv_residual(t);
    if (N == 0 || O == 0 || OHW == 0)
        return RLX_OK;
    int pointwise = conv_is_pointwise(&win);
    int threads = ctx->threads > 0 ? ctx->threads : 1;
    int im_threads = rlx_cpu_threads(ctx, K * OHW);
    if (K < im_threads)
        im_threads = 1;

    /* f32/f64: the bias (and residual) are C's starting value and the
     * GEMMs add onto it (beta = 1): BLAS passes over C before its product
     * when beta is not 1, so the bias then costs no pass of its own */
    bool start = bias || res;
    if (start && (dt == RLX_F32 || dt == RLX_F64)) {
        conv_job j = {.t = t, .bias = bias, .res = res, .O = O, .OHW = OHW};
        rlx_cpu_parallel(rlx_cpu_threads(ctx, N * O * OHW), N * O, conv_start_planes, &j);
    }
    /* f32/f64: per image and group, the columns (or the input itself for a
     * pointwise conv) times the group's weights, onto the bias */
#define CONV_GROUPS(CT, IM2COL_FN, GEMM)                                                                             \
    do {                                                                                                             \
        const CT *x = t->in[0], *w = t->in[1];                                                                       \
        CT *y = t->out, *col = t->scratch;                                                                           \
        for (int64_t n = 0; n < N; n++)                                                                              \
            for (int64_t g = 0; g < G; g++) {                                                                        \
                const CT *xg = x + (n * C + g * Cg) * HW, *B = xg;                                                   \
                if (!pointwise) {                                                                                    \
                    IM2COL_FN(col, xg, Cg, &win, im_threads);                                                        \
                    B = col;                                                                                         \
                }                                                                                                    \
                GEMM(0, 0, Og, OHW, K, 1, w + g * Og * K, K, B, OHW, start ? 1 : 0, y + (n * O + g * Og) * OHW, OHW, \
                     threads, ctx->settings);                                                                        \
            }                                                                                                        \
        return RLX_OK;                                                                                               \
    } while (0)
    if (dt == RLX_F64)
        CONV_GROUPS(double, im2col_f64, rlx_dgemm);
    if (dt == RLX_F32)
        CONV_GROUPS(float, im2col_f32, rlx_sgemm);
#undef CONV_GROUPS

    /* f16 / bf16 storage: f32 weights, columns and a per-group f32 result */
    float *col = t->scratch;
    float *wf = (float *)((char *)t->scratch + round64((size_t)(K * OHW) * sizeof(float)));
    float *tmp = (float *)((char *)wf + round64((size_t)(O * K) * sizeof(float)));
    rlx_cpu_to_f32(wf, t->in[1], dt, O * K);
    const uint16_t *x = t->in[0];
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            const uint16_t *xg = x + (n * C + g * Cg) * HW;
            if (dt == RLX_F16)
                im2col_f16(col, xg, Cg, &win, im_threads);
            else
                im2col_bf16(col, xg, Cg, &win, im_threads);
            rlx_sgemm(0, 0, Og, OHW, K, 1.0f, wf + g * Og * K, K, col, OHW, 0.0f, tmp, OHW, threads, ctx->settings);
            for (int64_t o = 0; o < Og; o++) {
                double bv = bias ? rlx_load(bias, dt, g * Og + o) : 0.0;
                int64_t ybase = (n * O + g * Og + o) * OHW;
                for (int64_t j = 0; j < OHW; j++)
                    rlx_store(t->out, dt, ybase + j,
                              tmp[o * OHW + j] + bv + (res ? rlx_load(res, dt, ybase + j) : 0.0));
            }
        }
    return RLX_OK;
}

/* ------------------------------------------------------ depthwise, direct */

/* yr[ow] += sum_k wk[k] xr[ow*S + off + k*d] for ow in [lo, hi), every tap
 * inside the row: KW and the stride S constant, so that the taps unroll and
 * the loop over ow vectorises (S = 2 as strided loads). */
#define DW_ROW(NAME, KWC, SC)                                                                                       \
    RLX_CLONES static void NAME(float *restrict yr, const float *restrict xr, const float *restrict wk, int64_t lo, \
                                int64_t hi, int64_t off, int64_t d)                                                 \
    {                                                                                                               \
        for (int64_t ow = lo; ow < hi; ow++) {                                                                      \
            float s = yr[ow];                                                                                       \
            for (int k = 0; k < KWC; k++)                                                                           \
                s += wk[k] * xr[ow * SC + off + k * d];                                                             \
            yr[ow] = s;                                                                                             \
        }                                                                                                           \
    }
DW_ROW(dw_row_k3s1, 3, 1)
DW_ROW(dw_row_k3s2, 3, 2)
DW_ROW(dw_row_k5s1, 5, 1)
DW_ROW(dw_row_k5s2, 5, 2)

/* Any KW and stride: one pass over the row per tap. */
RLX_CLONES static void dw_row_any(float *restrict yr, const float *restrict xr, const float *restrict wk, int64_t lo,
                                  int64_t hi, int64_t off, int64_t d, int64_t KW, int64_t S)
{
    for (int64_t k = 0; k < KW; k++) {
        const float *xk = xr + off + k * d;
        float wv = wk[k];
        if (S == 1)
            for (int64_t ow = lo; ow < hi; ow++)
                yr[ow] += wv * xk[ow];
        else
            for (int64_t ow = lo; ow < hi; ow++)
                yr[ow] += wv * xk[ow * S];
    }
}

/* Output columns whose taps all lie inside the input row: [*lo, *hi). */
static void dw_interior(const window2d *w, int64_t *lo, int64_t *hi)
{
    int64_t a = (w->pw + w->sw - 1) / w->sw;               /* ow*sw - pw >= 0 */
    int64_t last = w->W - 1 - (w->KW - 1) * w->dw + w->pw; /* ow*sw <= last */
    int64_t b = last < 0 ? 0 : last / w->sw + 1;
    *lo = a < w->OW ? a : w->OW;
    *hi = b < *lo ? *lo : b < w->OW ? b : w->OW;
}

/* One output row: taps on the image added onto yr (holding the bias), the
 * border columns tap by tap. */
static void dw_accumulate_row(float *yr, const float *xr, const float *wk, const window2d *w, int64_t lo, int64_t hi)
{
    int64_t off = -w->pw;
    if (w->KW == 3 && w->sw == 1)
        dw_row_k3s1(yr, xr, wk, lo, hi, off, w->dw);
    else if (w->KW == 3 && w->sw == 2)
        dw_row_k3s2(yr, xr, wk, lo, hi, off, w->dw);
    else if (w->KW == 5 && w->sw == 1)
        dw_row_k5s1(yr, xr, wk, lo, hi, off, w->dw);
    else if (w->KW == 5 && w->sw == 2)
        dw_row_k5s2(yr, xr, wk, lo, hi, off, w->dw);
    else
        dw_row_any(yr, xr, wk, lo, hi, off, w->dw, w->KW, w->sw);
    for (int64_t ow = 0; ow < w->OW; ow++) {
        if (ow == lo)
            ow = hi;
        if (ow >= w->OW)
            break;
        int64_t iw0 = ow * w->sw - w->pw;
        float s = yr[ow];
        for (int64_t k = tap_lo(iw0, 0, w->dw), k1 = tap_hi(iw0, w->W, w->dw, w->KW); k < k1; k++)
            s += wk[k] * xr[iw0 + k * w->dw];
        yr[ow] = s;
    }
}

/* y [N, C*M, OH, OW] = act(depthwise(x [N, C, H, W], w [C*M, 1, KH, KW]) +
 * bias): output channel o reads input channel o / M.  One task per output
 * plane, row by row (a row stays in L1 while its taps are added). */
static void depthwise_planes(void *arg, int64_t p0, int64_t p1, int worker)
{
    (void)worker;
    const conv_job *j = arg;
    const rlx_thunk *t = j->t;
    const window2d w = *j->w;
    int64_t C = t->in_node[0]->shape.dims[1], O = j->O, M = O / C;
    int64_t HW = w.H * w.W, OHW = w.OH * w.OW, KK = w.KH * w.KW;
    const float *x = t->in[0], *wt = t->in[1], *bias = j->bias, *res = j->res;
    float *y = t->out;
    for (int64_t p = p0; p < p1; p++) {
        int64_t o = p % O;
        const float *xp = x + (p / O * C + o / M) * HW, *wo = wt + o * KK;
        float b = bias ? bias[o] : 0.0f;
        for (int64_t oh = 0; oh < w.OH; oh++) {
            float *yr = y + p * OHW + oh * w.OW;
            const float *rr = res ? res + p * OHW + oh * w.OW : NULL;
            for (int64_t ow = 0; ow < w.OW; ow++)
                yr[ow] = b + (rr ? rr[ow] : 0.0f);
            int64_t ih0 = oh * w.sh - w.ph;
            for (int64_t kh = tap_lo(ih0, 0, w.dh), kh1 = tap_hi(ih0, w.H, w.dh, w.KH); kh < kh1; kh++)
                dw_accumulate_row(yr, xp + (ih0 + kh * w.dh) * w.W, wo + kh * w.KW, &w, j->lo, j->hi);
            if (j->act != RLX_ACT_NONE)
                rlx_cpu_act_f32(j->act, yr, NULL, w.OW);
        }
    }
}

static void conv_depthwise_f32(const rlx_thunk *t, const rlx_run_ctx *ctx, int act)
{
    const rlx_shape *xs = &t->in_node[0]->shape, *ws = &t->in_node[1]->shape;
    window2d w = conv_window_of(t->node, xs, ws);
    int64_t N = xs->dims[0], O = ws->dims[0];
    conv_job j = {.t = t,
                  .w = &w,
                  .bias = t->node->attrs.conv.has_bias ? t->in[2] : NULL,
                  .res = conv_residual(t),
                  .O = O,
                  .act = act};
    dw_interior(&w, &j.lo, &j.hi);
    rlx_cpu_parallel(rlx_cpu_threads(ctx, N * O * w.OH * w.OW * w.KH * w.KW), N * O, depthwise_planes, &j);
}

/* ---------------------------------------------------------------- kernels */

static void act_blocks(void *p, int64_t b0, int64_t b1, int worker)
{
    (void)worker;
    const conv_job *j = p;
    for (int64_t b = b0; b < b1; b++)
        rlx_cpu_act_f32(j->act, (float *)j->t->out + b * 4096, NULL,
                        j->total - b * 4096 < 4096 ? j->total - b * 4096 : 4096);
}

static void act_any(void *p, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const conv_job *j = p;
    rlx_dtype dt = j->t->node->dtype;
    for (int64_t i = i0; i < i1; i++)
        rlx_store(j->t->out, dt, i, rlx_act_f64(j->act, rlx_load(j->t->out, dt, i)));
}

/* act(y) in place, after a kernel that does not fuse it. */
static void conv_act(const rlx_thunk *t, const rlx_run_ctx *ctx, int act)
{
    rlx_dtype dt = t->node->dtype;
    int64_t total = rlx_shape_numel(&t->node->shape);
    conv_job j = {.t = t, .act = act, .total = total};
    if (dt == RLX_F32) /* blocks of 4096 values spread over the threads */
        rlx_cpu_parallel(rlx_cpu_threads(ctx, total * 8), (total + 4095) / 4096, act_blocks, &j);
    else
        rlx_cpu_parallel(rlx_cpu_threads(ctx, total * 8), total, act_any, &j);
}

/* conv and conv_bias_act (whose act is RLX_ACT_NONE on a plain conv). */
static rlx_status k_conv(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    if (t->node->attrs.conv.layout == RLX_LAYOUT_NHWC)
        return rlx_cpu_conv_nhwc(t, ctx);
    int act = t->node->op == RLX_OP_CONV_BIAS_ACT ? t->node->attrs.conv.act : RLX_ACT_NONE;
    if (conv_is_depthwise(t->in_node[0], t->in_node[1], t->node)) {
        conv_depthwise_f32(t, ctx, act);
        return RLX_OK;
    }
    rlx_status s = conv_gemm(t, ctx);
    if (s == RLX_OK && act != RLX_ACT_NONE)
        conv_act(t, ctx, act);
    return s;
}

static rlx_status conv_prepare(const rlx_graph *g, rlx_thunk *t)
{
    return t->node->attrs.conv.layout == RLX_LAYOUT_NHWC ? rlx_cpu_conv_nhwc_prepare(g, t) : RLX_OK;
}

void rlx_cpu_register_conv(rlx_cpu_kernel *table)
{
    rlx_cpu_kernel k = {
        .fn = k_conv, .scratch = conv_scratch, .prepare = conv_prepare, .release = rlx_cpu_conv_nhwc_release};
    table[RLX_OP_CONV] = k;
    table[RLX_OP_CONV_BIAS_ACT] = k;
}
