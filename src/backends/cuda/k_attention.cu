/* k_attention.cu - fused scaled-dot-product attention, flash style: keys
 * and values stream through shared memory in tiles of 32, each warp owns
 * one query row and keeps a running max, sum and output accumulator in
 * registers (online softmax), so the score matrix is never materialised.
 * Causal masking, a bool or additive mask broadcast to [B, H, S, T], and
 * grouped-query heads (H a multiple of Hkv). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"

#define TK 32  /* keys per tile */
#define QPB 8  /* query rows (warps) per block */

typedef struct attn_params {
    int64_t B, H, S, D, Hk, T, Dv;
    float scale;
    int causal;
    const void *mask;
    int mask_dt; /* -1 none */
    int64_t mst[4];
} attn_params;

template <typename T, int DVL>
__global__ void __launch_bounds__(QPB * 32) flash_attn(const T *q, const T *k, const T *v, T *out, attn_params p)
{
    extern __shared__ float sh[];
    const int D = (int)p.D, Dv = (int)p.Dv;
    float *ks = sh;                      /* [TK][D + 1] */
    float *vs = ks + TK * (D + 1);       /* [TK][Dv] */
    float *qs = vs + TK * Dv;            /* [QPB][D] */
    const int warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H, hk = h / (p.H / p.Hk);
    const int64_t s0 = (int64_t)blockIdx.x * QPB, s = s0 + warp;
    const bool active = s < p.S;
    const T *kb = k + (b * p.Hk + hk) * p.T * D;
    const T *vb = v + (b * p.Hk + hk) * p.T * Dv;
    float *qw = qs + warp * D;
    if (active)
        for (int d = lane; d < D; d += 32)
            qw[d] = cu_tof<T>(q[(bh * p.S + s) * D + d]) * p.scale;
    float acc[DVL];
#pragma unroll
    for (int r = 0; r < DVL; r++)
        acc[r] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int64_t shift = p.T - p.S;
    int64_t t_end = p.T;
    if (p.causal) {
        int64_t s_last = s0 + QPB - 1 < p.S - 1 ? s0 + QPB - 1 : p.S - 1;
        int64_t lim = s_last + shift + 1;
        t_end = lim < t_end ? (lim > 0 ? lim : 0) : t_end;
    }
    for (int64_t t0 = 0; t0 < t_end; t0 += TK) {
        __syncthreads();
        for (int i = threadIdx.x; i < TK * D; i += blockDim.x) {
            int j = i / D, d = i % D;
            ks[j * (D + 1) + d] = t0 + j < p.T ? cu_tof<T>(kb[(t0 + j) * D + d]) : 0.0f;
        }
        for (int i = threadIdx.x; i < TK * Dv; i += blockDim.x) {
            int j = i / Dv;
            vs[i] = t0 + j < p.T ? cu_tof<T>(vb[(t0 + j) * Dv + i % Dv]) : 0.0f;
        }
        __syncthreads();
        if (!active)
            continue;
        int64_t t = t0 + lane;
        float sc = 0.0f;
        const float *kr = ks + lane * (D + 1);
        for (int d = 0; d < D; d++)
            sc += qw[d] * kr[d];
        bool visible = t < p.T && (!p.causal || t <= s + shift);
        if (visible && p.mask_dt >= 0) {
            int64_t mo = b * p.mst[0] + h * p.mst[1] + s * p.mst[2] + t * p.mst[3];
            if (p.mask_dt == RLX_BOOL)
                visible = ((const unsigned char *)p.mask)[mo] != 0;
            else
                sc += cu_tof<T>(((const T *)p.mask)[mo]);
        }
        if (!visible)
            sc = -INFINITY;
        float mt = cu_warp_max(sc);
        float mn = fmaxf(m, mt);
        if (mn == -INFINITY)
            continue; /* every key of this tile masked so far */
        float corr = __expf(m - mn);
        float pr = sc == -INFINITY ? 0.0f : __expf(sc - mn);
        l = l * corr + cu_warp_sum(pr);
        m = mn;
#pragma unroll
        for (int r = 0; r < DVL; r++)
            acc[r] *= corr;
        int jn = (int)(p.T - t0 < TK ? p.T - t0 : TK);
        for (int j = 0; j < jn; j++) {
            float pj = __shfl_sync(0xffffffffu, pr, j);
            const float *vr = vs + j * Dv;
#pragma unroll
            for (int r = 0; r < DVL; r++) {
                int e = lane + 32 * r;
                if (e < Dv)
                    acc[r] += pj * vr[e];
            }
        }
    }
    if (!active)
        return;
    float inv = l > 0 ? 1.0f / l : 0.0f;
    T *o = out + (bh * p.S + s) * Dv;
#pragma unroll
    for (int r = 0; r < DVL; r++) {
        int e = lane + 32 * r;
        if (e < Dv)
            o[e] = cu_fromf<T>(acc[r] * inv);
    }
}

/* Small heads (D, Dv <= 64): one thread per query row, q and the output
 * accumulator in registers, keys and values of a tile in shared memory read
 * as broadcasts; scores in base-2 units, softmax rescaled once per chunk of
 * 16 keys. */
#define SQB 64 /* queries (threads) per block */
#define SKT 64 /* keys per tile */

template <typename T, int D, int DV>
__global__ void __launch_bounds__(SQB) flash_small(const T *q, const T *k, const T *v, T *out, attn_params p)
{
    __shared__ float ks[SKT][D];
    __shared__ float vs[SKT][DV];
    const int64_t bh = blockIdx.y, b = bh / p.H, h = bh % p.H, hk = h / (p.H / p.Hk);
    const int64_t s0 = (int64_t)blockIdx.x * SQB, s = s0 + threadIdx.x;
    const bool active = s < p.S;
    const float LOG2E = 1.4426950408889634f;
    const float sl2 = p.scale * LOG2E;
    float qr[D], acc[DV];
#pragma unroll
    for (int d = 0; d < D; d++)
        qr[d] = active ? cu_tof<T>(q[(bh * p.S + s) * D + d]) * sl2 : 0.0f;
#pragma unroll
    for (int e = 0; e < DV; e++)
        acc[e] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const T *kb = k + (b * p.Hk + hk) * p.T * D;
    const T *vb = v + (b * p.Hk + hk) * p.T * DV;
    const int64_t shift = p.T - p.S;
    int64_t t_end = p.T;
    if (p.causal) {
        int64_t s_last = s0 + SQB - 1 < p.S - 1 ? s0 + SQB - 1 : p.S - 1;
        int64_t lim = s_last + shift + 1;
        t_end = lim < t_end ? (lim > 0 ? lim : 0) : t_end;
    }
    for (int64_t t0 = 0; t0 < t_end; t0 += SKT) {
        __syncthreads();
        for (int i = threadIdx.x; i < SKT * D; i += SQB) {
            int j = i / D, d = i % D;
            ks[j][d] = t0 + j < p.T ? cu_tof<T>(kb[(t0 + j) * D + d]) : 0.0f;
        }
        for (int i = threadIdx.x; i < SKT * DV; i += SQB) {
            int j = i / DV, e = i % DV;
            vs[j][e] = t0 + j < p.T ? cu_tof<T>(vb[(t0 + j) * DV + e]) : 0.0f;
        }
        __syncthreads();
        if (!active)
            continue;
        int jn = (int)(p.T - t0 < SKT ? p.T - t0 : SKT);
        for (int c = 0; c < jn; c += 16) {
            float sc[16];
            float mc = -INFINITY;
#pragma unroll
            for (int u = 0; u < 16; u++) {
                int j = c + u;
                int64_t t = t0 + j;
                float x = -INFINITY;
                if (j < jn && (!p.causal || t <= s + shift)) {
                    float a = 0.0f;
#pragma unroll
                    for (int d = 0; d < D; d++)
                        a += qr[d] * ks[j][d];
                    bool vis = true;
                    if (p.mask_dt >= 0) {
                        int64_t mo = b * p.mst[0] + h * p.mst[1] + s * p.mst[2] + t * p.mst[3];
                        if (p.mask_dt == RLX_BOOL)
                            vis = ((const unsigned char *)p.mask)[mo] != 0;
                        else
                            a += cu_tof<T>(((const T *)p.mask)[mo]) * LOG2E;
                    }
                    if (vis)
                        x = a;
                }
                sc[u] = x;
                mc = fmaxf(mc, x);
            }
            float mn = fmaxf(m, mc);
            if (mn == -INFINITY)
                continue;
            float corr = exp2f(m - mn);
            l *= corr;
#pragma unroll
            for (int e = 0; e < DV; e++)
                acc[e] *= corr;
#pragma unroll
            for (int u = 0; u < 16; u++) {
                float pu = exp2f(sc[u] - mn);
                l += pu;
                if (c + u < jn) {
#pragma unroll
                    for (int e = 0; e < DV; e++)
                        acc[e] += pu * vs[c + u][e];
                }
            }
            m = mn;
        }
    }
    if (!active)
        return;
    float inv = l > 0 ? 1.0f / l : 0.0f;
    T *o = out + (bh * p.S + s) * DV;
#pragma unroll
    for (int e = 0; e < DV; e++)
        o[e] = cu_fromf<T>(acc[e] * inv);
}

static size_t attn_smem(int64_t D, int64_t Dv) { return (size_t)(TK * (D + 1) + TK * Dv + QPB * D) * sizeof(float); }

template <typename T> static void *attn_fn(int dvl)
{
    switch (dvl) {
    case 1: return (void *)flash_attn<T, 1>;
    case 2: return (void *)flash_attn<T, 2>;
    case 4: return (void *)flash_attn<T, 4>;
    default: return (void *)flash_attn<T, 8>;
    }
}

static int dvl_of(int64_t Dv) { return Dv <= 32 ? 1 : Dv <= 64 ? 2 : Dv <= 128 ? 4 : 8; }

static rlx_status prep_attention(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    const rlx_node_data *q = t->in_node[0], *v = t->in_node[2];
    size_t smem = attn_smem(q->shape.dims[3], v->shape.dims[3]);
    if (smem > 48 * 1024) {
        void *fn;
        CU_FLOAT_DISPATCH(q->dtype, T, fn = attn_fn<T>(dvl_of(v->shape.dims[3])));
        cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess)
            return rlx_cu_error(t, e, "attention shared memory");
    }
    return RLX_OK;
}

static rlx_status k_attention(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *q = t->in_node[0], *k = t->in_node[1], *v = t->in_node[2];
    attn_params p;
    memset(&p, 0, sizeof p);
    p.B = q->shape.dims[0];
    p.H = q->shape.dims[1];
    p.S = q->shape.dims[2];
    p.D = q->shape.dims[3];
    p.Hk = k->shape.dims[1];
    p.T = k->shape.dims[2];
    p.Dv = v->shape.dims[3];
    double scale = t->node->attrs.attention.scale;
    p.scale = (float)(scale > 0 ? scale : 1.0 / sqrt((double)p.D));
    p.causal = t->node->attrs.attention.causal;
    p.mask_dt = -1;
    if (t->node->attrs.attention.has_mask) {
        rlx_shape full = {4, {p.B, p.H, p.S, p.T}};
        p.mask = t->in[3];
        p.mask_dt = t->in_node[3]->dtype;
        rlx_shape_broadcast_strides(&t->in_node[3]->shape, &full, p.mst);
    }
    if (!p.B || !p.H || !p.S || !p.Dv)
        return RLX_OK;
    if ((p.D == 32 && p.Dv == 32) || (p.D == 64 && p.Dv == 64)) {
        dim3 sg((unsigned)((p.S + SQB - 1) / SQB), (unsigned)(p.B * p.H));
        if (p.D == 32)
            CU_FLOAT_DISPATCH(q->dtype, T, flash_small<T, 32, 32><<<sg, SQB, 0, rlx_cu_stream>>>((const T *)t->in[0], (const T *)t->in[1], (const T *)t->in[2], (T *)t->out, p));
        else
            CU_FLOAT_DISPATCH(q->dtype, T, flash_small<T, 64, 64><<<sg, SQB, 0, rlx_cu_stream>>>((const T *)t->in[0], (const T *)t->in[1], (const T *)t->in[2], (T *)t->out, p));
        return rlx_cu_check(t, "attention launch");
    }
    size_t smem = attn_smem(p.D, p.Dv);
    dim3 grid((unsigned)((p.S + QPB - 1) / QPB), (unsigned)(p.B * p.H));
    int dvl = dvl_of(p.Dv);
#define LAUNCH(TT, N) flash_attn<TT, N><<<grid, QPB * 32, smem, rlx_cu_stream>>>((const TT *)t->in[0], (const TT *)t->in[1], (const TT *)t->in[2], (TT *)t->out, p)
    CU_FLOAT_DISPATCH(q->dtype, T, {
        switch (dvl) {
        case 1: LAUNCH(T, 1); break;
        case 2: LAUNCH(T, 2); break;
        case 4: LAUNCH(T, 4); break;
        default: LAUNCH(T, 8); break;
        }
    });
#undef LAUNCH
    return rlx_cu_check(t, "attention launch");
}

static bool attention_ok(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *q = &g->nodes[n->in[0]], *v = &g->nodes[n->in[2]];
    if (!cu_is_f(q->dtype) || q->shape.dims[3] > 256 || v->shape.dims[3] > 256)
        return false;
    if (n->attrs.attention.has_mask) {
        rlx_dtype md = g->nodes[n->in[3]].dtype;
        if (md != RLX_BOOL && md != q->dtype)
            return false;
    }
    return true;
}

extern "C" void rlx_cuda_register_attention(cu_kernel *tab)
{
    tab[RLX_OP_ATTENTION] = (cu_kernel){k_attention, NULL, attention_ok, prep_attention, NULL};
}
