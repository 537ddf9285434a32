/* kernels_int8_conv.c - conv_integer (ONNX's ConvInteger, and QLinearConv's
 * product) on src/quant/igemm.h's kernels: per image and group, the input
 * transposed to channels-last ([H][W][C/groups]), then one row of K = KH *
 * KW * C/groups taps per output pixel (a copy of C/groups bytes per tap; a
 * 1x1 conv's rows are the transposed input itself) times the group's
 * weights in the same tap order, packed once at prepare when they are
 * constant.  Taps on the padding hold x_zp, so that they add nothing.  The
 * int32 sums come out [pixels][O/groups] and are transposed into NCHW. */

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_window.h"
#include "core/error.h"
#include "quant/igemm.h"

/* Output pixels per GEMM (whole output rows, at least one): bounds the
 * columns and sums in the scratch. */
enum { PIX_BLOCK = 2048, ROW_BLOCK = 96, PANEL_BLOCK = 8 };

static size_t up64(size_t b) { return (b + 63) / 64 * 64; }

typedef struct ci_dims {
    window2d w;
    int64_t N, C, G, Cg, O, Og, K, HW, OHW;
} ci_dims;

static ci_dims dims_of(const rlx_node_data *n, const rlx_node_data *x, const rlx_node_data *w)
{
    ci_dims d;
    int sp = x->shape.ndim - 2;
    int64_t kh = sp == 2 ? w->shape.dims[2] : 1, kw = w->shape.dims[x->shape.ndim - 1];
    d.w = conv_window(&x->shape, &n->shape, kh, kw, n->attrs.conv.p.stride, n->attrs.conv.p.dilation,
                      n->attrs.conv.p.pads);
    d.N = x->shape.dims[0];
    d.C = x->shape.dims[1];
    d.G = n->attrs.conv.p.groups;
    d.Cg = d.C / d.G;
    d.O = w->shape.dims[0];
    d.Og = d.O / d.G;
    d.K = d.Cg * d.w.KH * d.w.KW;
    d.HW = d.w.H * d.w.W;
    d.OHW = d.w.OH * d.w.OW;
    return d;
}

/* Whole output rows per GEMM, about PIX_BLOCK pixels. */
static int64_t rows_per_block(const ci_dims *d)
{
    int64_t r = d->w.OW ? PIX_BLOCK / d->w.OW : 1;
    return r < 1 ? 1 : r > d->w.OH ? d->w.OH : r;
}

static int64_t pix_block(const ci_dims *d) { return rows_per_block(d) * d->w.OW; }

static size_t packed_all(const ci_dims *d) { return (size_t)d->G * up64(rlx_igemm_packed_bytes(d->K, d->Og)); }

static size_t ci_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    (void)threads;
    const rlx_node_data *x = &g->nodes[n->in[0]], *w = &g->nodes[n->in[1]];
    ci_dims d = dims_of(n, x, w);
    int64_t P = pix_block(&d);
    size_t bytes = up64((size_t)(d.HW * d.Cg)) + up64((size_t)(P * d.K)) + up64((size_t)(P * d.Og) * sizeof(int32_t)) +
                   up64((size_t)(P + 1) * sizeof(int32_t)) + up64((size_t)(d.O + 1) * sizeof(int32_t));
    if (w->op != RLX_OP_CONSTANT)
        bytes += packed_all(&d) + up64((size_t)(d.K * d.Og));
    return bytes + 64;
}

/* Each group's weights [Og][K] transposed to [K][Og] and packed. */
static void pack_weights(const ci_dims *d, const uint8_t *w, bool w_signed, uint8_t *wt, char *packed)
{
    for (int64_t g = 0; g < d->G; g++) {
        const uint8_t *wg = w + g * d->Og * d->K;
        int64_t taps = d->w.KH * d->w.KW; /* row k = tap * Cg + c of the tap order above */
        for (int64_t c = 0; c < d->Cg; c++)
            for (int64_t tap = 0; tap < taps; tap++)
                for (int64_t o = 0; o < d->Og; o++)
                    wt[(tap * d->Cg + c) * d->Og + o] = wg[o * d->K + c * taps + tap];
        rlx_igemm_pack_b(wt, w_signed, d->K, d->Og, d->Og, packed + g * up64(rlx_igemm_packed_bytes(d->K, d->Og)));
    }
}

static rlx_status ci_prepare(const rlx_graph *g, rlx_thunk *t)
{
    const rlx_node_data *w = &g->nodes[t->node->in[1]];
    if (w->op != RLX_OP_CONSTANT || !t->in[1])
        return RLX_OK;
    ci_dims d = dims_of(t->node, &g->nodes[t->node->in[0]], w);
    char *packed = rlx_malloc(packed_all(&d) + (size_t)(d.K * d.Og) + 1);
    if (!packed)
        return rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY);
    pack_weights(&d, t->in[1], w->dtype == RLX_I8, (uint8_t *)packed + packed_all(&d), packed);
    t->state = packed;
    return RLX_OK;
}

/* xt[p][c] = xg[c][p] ^ flip (s8 made u8): one image's group, channels-last,
 * in blocks of 64 x 64 that stay in cache. */
typedef struct cl_job {
    uint8_t *xt;
    const uint8_t *xg;
    int64_t Cg, HW;
    uint8_t flip;
} cl_job;

enum { CL_B = 64 };

static void to_channels_last_blocks(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const cl_job *j = arg;
    for (int64_t pb = lo; pb < hi; pb++) {
        int64_t p0 = pb * CL_B, p1 = p0 + CL_B < j->HW ? p0 + CL_B : j->HW;
        for (int64_t c0 = 0; c0 < j->Cg; c0 += CL_B) {
            int64_t c1 = c0 + CL_B < j->Cg ? c0 + CL_B : j->Cg;
            for (int64_t p = p0; p < p1; p++)
                for (int64_t c = c0; c < c1; c++)
                    j->xt[p * j->Cg + c] = (uint8_t)(j->xg[c * j->HW + p] ^ j->flip);
        }
    }
}

static void to_channels_last(uint8_t *xt, const uint8_t *xg, int64_t Cg, int64_t HW, uint8_t flip, int threads)
{
    cl_job j = {xt, xg, Cg, HW, flip};
    rlx_cpu_parallel(threads, (HW + CL_B - 1) / CL_B, to_channels_last_blocks, &j);
}

/* Output rows [oh0, oh1) of the columns from the channels-last xt: row
 * (oh - oh0) * OW + ow of A holds pixel (oh, ow)'s taps, tap by tap (kh,
 * kw), each Cg bytes; taps off the image hold pad. */
typedef struct im2row_job {
    uint8_t *A;
    const uint8_t *xt;
    const ci_dims *d;
    int64_t oh0;
    uint8_t pad;
} im2row_job;

static void im2row_rows(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const im2row_job *j = arg;
    const window2d *w = &j->d->w;
    const int64_t Cg = j->d->Cg;
    for (int64_t r = lo; r < hi; r++) {
        int64_t oh = j->oh0 + r / w->OW, ow = r % w->OW;
        uint8_t *dst = j->A + r * j->d->K;
        for (int64_t kh = 0; kh < w->KH; kh++) {
            int64_t ih = oh * w->sh - w->ph + kh * w->dh;
            for (int64_t kw = 0; kw < w->KW; kw++, dst += Cg) {
                int64_t iw = ow * w->sw - w->pw + kw * w->dw;
                if (ih < 0 || ih >= w->H || iw < 0 || iw >= w->W)
                    memset(dst, j->pad, (size_t)Cg);
                else
                    memcpy(dst, j->xt + (ih * w->W + iw) * Cg, (size_t)Cg);
            }
        }
    }
}

static void im2row(uint8_t *A, const uint8_t *xt, const ci_dims *d, int64_t oh0, int64_t oh1, uint8_t pad, int threads)
{
    im2row_job j = {A, xt, d, oh0, pad};
    rlx_cpu_parallel(threads, (oh1 - oh0) * d->w.OW, im2row_rows, &j);
}

/* A 1x1 conv of stride 1 without padding: its rows are the pixels. */
static bool pointwise(const window2d *w)
{
    return w->KH == 1 && w->KW == 1 && w->sh == 1 && w->sw == 1 && w->ph == 0 && w->pw == 0 && w->OH == w->H &&
           w->OW == w->W;
}

/* One product of conv_integer's columns for the pool: by row and panel
 * blocks, then its [m][Og] result into the output's [Og][OHW] rows. */
typedef struct ci_job {
    const rlx_igemm_args *g;
    rlx_igemm_isa isa;
    int64_t m, rb, rows, np;
    int32_t *yg;
    const int32_t *Cm;
    int64_t Og, OHW;
} ci_job;

static void ci_blocks(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ci_job *j = arg;
    for (int64_t task = lo; task < hi; task++) {
        int64_t r = task % j->rb, pp = task / j->rb;
        int64_t i0 = r * j->rows, i1 = i0 + j->rows < j->m ? i0 + j->rows : j->m;
        int64_t p1 = (pp + 1) * PANEL_BLOCK < j->np ? (pp + 1) * PANEL_BLOCK : j->np;
        rlx_igemm_block(j->isa, j->g, i0, i1, pp * PANEL_BLOCK, p1);
    }
}

static void ci_transpose(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ci_job *j = arg;
    for (int64_t o = lo; o < hi; o++)
        for (int64_t i = 0; i < j->m; i++)
            j->yg[o * j->OHW + i] = j->Cm[i * j->Og + o];
}

static rlx_status k_conv_integer(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0], *wn = t->in_node[1];
    ci_dims d = dims_of(t->node, xn, wn);
    int32_t *y = t->out;
    if (d.N == 0 || d.O == 0 || d.OHW == 0)
        return RLX_OK;
    int64_t P = pix_block(&d), rpb = rows_per_block(&d);
    char *sp = (char *)(((uintptr_t)t->scratch + 63) & ~(uintptr_t)63);
    uint8_t *xt = (uint8_t *)sp;
    sp += up64((size_t)(d.HW * d.Cg));
    uint8_t *A = (uint8_t *)sp;
    sp += up64((size_t)(P * d.K));
    int32_t *Cm = (int32_t *)sp;
    sp += up64((size_t)(P * d.Og) * sizeof(int32_t));
    int32_t *rowsum = (int32_t *)sp;
    sp += up64((size_t)(P + 1) * sizeof(int32_t));
    int32_t *zb = (int32_t *)sp;
    sp += up64((size_t)(d.O + 1) * sizeof(int32_t));
    const char *packed = t->state;
    if (!packed) {
        pack_weights(&d, t->in[1], wn->dtype == RLX_I8, (uint8_t *)sp + packed_all(&d), sp);
        packed = sp;
    }
    /* u8 x s8 as igemm.h runs every case: s8 activations + 128, u8 weights - 128 */
    uint8_t flip = xn->dtype == RLX_I8 ? 0x80 : 0;
    int32_t za = (int32_t)rlx_load_i(t->in[2], xn->dtype, 0) + (flip ? 128 : 0);
    int64_t nzb = rlx_shape_numel(&t->in_node[3]->shape);
    for (int64_t o = 0; o < d.O; o++)
        zb[o] = (int32_t)rlx_load_i(t->in[3], wn->dtype, nzb > 1 ? o : 0) - (wn->dtype == RLX_U8 ? 128 : 0);
    rlx_igemm_isa isa = rlx_igemm_isa_best();
    const uint8_t *x = t->in[0];
    int64_t np = rlx_igemm_panels(d.Og), pb = (np + PANEL_BLOCK - 1) / PANEL_BLOCK;
    bool pw = pointwise(&d.w);
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t g = 0; g < d.G; g++) {
            to_channels_last(xt, x + (n * d.C + g * d.Cg) * d.HW, d.Cg, d.HW, flip, rlx_cpu_threads(ctx, d.HW * d.Cg));
            for (int64_t oh0 = 0; oh0 < d.w.OH; oh0 += rpb) {
                int64_t oh1 = oh0 + rpb < d.w.OH ? oh0 + rpb : d.w.OH, p0 = oh0 * d.w.OW, m = (oh1 - oh0) * d.w.OW;
                const uint8_t *arows = xt + p0 * d.Cg;
                if (!pw) {
                    im2row(A, xt, &d, oh0, oh1, (uint8_t)za, rlx_cpu_threads(ctx, m * d.K));
                    arows = A;
                }
                rlx_igemm_row_sums(arows, d.K, m, d.K, rowsum);
                rlx_igemm_args ga = {.m = m,
                                     .k = d.K,
                                     .n = d.Og,
                                     .a = arows,
                                     .lda = d.K,
                                     .packed = packed + g * up64(rlx_igemm_packed_bytes(d.K, d.Og)),
                                     .za = za,
                                     .zb = zb + g * d.Og,
                                     .zb_per_col = nzb > 1,
                                     .rowsum = rowsum,
                                     .c = Cm,
                                     .ldc = d.Og};
                int64_t rb = (m + ROW_BLOCK - 1) / ROW_BLOCK, rows = ((m + rb - 1) / rb + 5) / 6 * 6;
                ci_job job = {&ga, isa, m, rb, rows, np, NULL, NULL, d.Og, d.OHW};
                rlx_cpu_parallel(rlx_cpu_threads(ctx, m * d.Og * d.K / 8), rb * pb, ci_blocks, &job);
                job.yg = y + (n * d.O + g * d.Og) * d.OHW + p0;
                job.Cm = Cm;
                rlx_cpu_parallel(rlx_cpu_threads(ctx, m * d.Og), d.Og, ci_transpose, &job);
            }
        }
    return RLX_OK;
}

void rlx_cpu_register_int8_conv(rlx_cpu_kernel *table)
{
    table[RLX_OP_CONV_INTEGER] = (rlx_cpu_kernel){.fn = k_conv_integer, .scratch = ci_scratch, .prepare = ci_prepare};
}
