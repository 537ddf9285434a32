/* k_attn_block.cu - the fused attention block (RLX_OP_ATTENTION_BLOCK):
 * the q, k and v projections as one cuBLASLt GEMM (bias in the epilogue)
 * on weights packed side by side ([hid, (H + Hkv) * D + Hkv * Dv], copied
 * by the backend's pack hook, in the prologue when the weights are
 * params) into one scratch buffer of rows [B*S, width], attention reading
 * its heads from that buffer through strides and writing [B*S, H*Dv] rows,
 * which are already what the output projection (one more GEMM, bias in the
 * epilogue) reads.  A mask input (bool or additive) goes to the attention
 * kernels as the attention op's does.  Per-head q/k RMS norm and RoPE,
 * where the block has them, run as one more kernel over the q and k heads
 * of the projection buffer, in place, before attention.  Three or four
 * launches where the lowered form has about a dozen.  Also qkv_heads, the
 * same head preparation for a decoder step whose attention reads a KV
 * cache. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_gemm.h"

typedef struct ab_state {
    cu_gemm gqkv, go;
    int64_t B, S, rows, hid, H, Hk, D, Dv, width, out;
    size_t qkv_bytes; /* the projection buffer; the attention output follows it */
    size_t o_bytes;
    int empty;
    int bias[4];    /* input index of bq, bk, bv, bo; -1 absent */
    int gamma[2];   /* input index of the q and k norms' gammas; -1 absent */
    void *w_qkv;    /* packed [hid, width] weights (device) */
    void *b_qkv;    /* packed [width] biases (device); NULL when there are none */
    void *rope_tab; /* the RoPE table (device, rope_table_bytes); NULL without RoPE */
} ab_state;

static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

typedef struct ab_dims {
    int64_t B, S, hid, rows, H, Hk, D, Dv, width, out;
} ab_dims;

static ab_dims dims_of(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *x = &g->nodes[n->in[0]];
    ab_dims d;
    d.B = x->shape.dims[0];
    d.S = x->shape.dims[1];
    d.hid = x->shape.dims[2];
    d.rows = d.B * d.S;
    d.H = n->attrs.attn_block.heads;
    d.Hk = n->attrs.attn_block.kv_heads;
    d.D = n->attrs.attn_block.head_dim;
    d.Dv = n->attrs.attn_block.v_head_dim;
    d.width = (d.H + d.Hk) * d.D + d.Hk * d.Dv;
    d.out = n->shape.dims[2];
    return d;
}

static size_t ab_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    ab_dims d = dims_of(g, n);
    size_t es = rlx_dtype_size(n->dtype);
    /* room for f32 operands split for tensor cores, the larger of the two GEMMs' */
    size_t split = rlx_cu_gemm_split_bytes(n->dtype, d.rows, d.width, d.hid);
    size_t so = rlx_cu_gemm_split_bytes(n->dtype, d.rows, d.out, d.H * d.Dv);
    split = split > so ? split : so;
    /* the attention's own scratch shares the GEMMs' workspace: it runs between them */
    size_t ws = CU_GEMM_WORKSPACE + split, wa = rlx_cu_attention_scratch(n->dtype, d.B, d.H, d.S, d.S, d.D, d.Dv);
    return round256((size_t)(d.rows * d.width) * es) + round256((size_t)(d.rows * d.H * d.Dv) * es) +
           (ws > wa ? ws : wa);
}

/* Column offsets (elements) of the q, k and v parts of a projection row. */
static void part_cols(const ab_state *s, int64_t *off, int64_t *cols)
{
    cols[0] = s->H * s->D, cols[1] = s->Hk * s->D, cols[2] = s->Hk * s->Dv;
    off[0] = 0, off[1] = cols[0], off[2] = cols[0] + cols[1];
}

/* The pack hook: Wq, Wk, Wv side by side, and their biases (zeros for
 * any absent). */
static rlx_status pack_ab(const rlx_thunk *t)
{
    const ab_state *s = (const ab_state *)t->state;
    if (s->empty)
        return RLX_OK;
    size_t es = rlx_dtype_size(t->node->dtype);
    int64_t off[3], cols[3];
    part_cols(s, off, cols);
    for (int i = 0; i < 3; i++) {
        cudaError_t e = cudaMemcpy2DAsync((char *)s->w_qkv + (size_t)off[i] * es, (size_t)s->width * es, t->in[1 + i],
                                          (size_t)cols[i] * es, (size_t)cols[i] * es, (size_t)s->hid,
                                          cudaMemcpyDeviceToDevice, rlx_cu_stream);
        if (e == cudaSuccess && s->b_qkv) {
            void *dst = (char *)s->b_qkv + (size_t)off[i] * es;
            e = s->bias[i] >= 0 ? cudaMemcpyAsync(dst, t->in[s->bias[i]], (size_t)cols[i] * es,
                                                  cudaMemcpyDeviceToDevice, rlx_cu_stream)
                                : cudaMemsetAsync(dst, 0, (size_t)cols[i] * es, rlx_cu_stream);
        }
        if (e != cudaSuccess)
            return rlx_cu_error(t, e, "packing the q/k/v weights");
    }
    return RLX_OK;
}

static uint32_t pack_ab_inputs(const rlx_thunk *t)
{
    const ab_state *s = (const ab_state *)t->state;
    uint32_t m = 0xeu; /* Wq, Wk, Wv */
    for (int i = 0; i < 3; i++)
        if (s->bias[i] >= 0)
            m |= 1u << s->bias[i];
    return m;
}

/* Bytes of the RoPE table: cos and sin (double) of every position's angle
 * for each of the D / 2 pairs. */
static size_t rope_table_bytes(const rlx_node_data *n, const ab_dims *d)
{
    return n->attrs.attn_block.has_rope ? (size_t)(d->S * (d->D / 2)) * 2 * sizeof(double) : 0;
}

/* The keep region: the packed q/k/v weights and biases (pack_ab), then the
 * RoPE table (filled once at prepare, since it depends on shapes alone). */
static size_t ab_keep(const rlx_graph *g, const rlx_node_data *n)
{
    ab_dims d = dims_of(g, n);
    size_t es = rlx_dtype_size(n->dtype);
    bool any_bias = false;
    for (int i = 1; i <= 3; i++)
        any_bias = any_bias || rlx_attn_block_input(n, i) >= 0;
    if (d.rows == 0 || d.out == 0)
        return 0;
    return round256((size_t)(d.hid * d.width) * es) + (any_bias ? round256((size_t)d.width * es) : 0) +
           rope_table_bytes(n, &d);
}

/* Per-head RMS norm (gq on the H q heads, gk on the k heads after them;
 * NULL: none) then rotary embedding (tab: the cos and sin of each
 * position's angles, rope_table_bytes; NULL: none) of the q and k head
 * vectors of the projection rows, in place, in f32 as the CPU kernel does
 * (the rotation in double).  One warp per head vector of D <= 256. */
#define QK_WARPS 4
template <typename T>
__global__ void __launch_bounds__(QK_WARPS * 32)
    qk_norm_rope(T *qkv, int64_t vectors, int heads, int H, int D, int64_t S, int64_t width, const T *gq, const T *gk,
                 float eps, const double *tab, int inter)
{
    cu_grid_wait();
    __shared__ float sv[QK_WARPS][256];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = D / 2;
    float *v = sv[warp];
    for (int64_t w = (int64_t)blockIdx.x * QK_WARPS + warp; w < vectors; w += (int64_t)gridDim.x * QK_WARPS) {
        const int64_t r = w / heads;
        const int hh = (int)(w % heads);
        T *x = qkv + r * width + (int64_t)hh * D;
        const T *g = hh < H ? gq : gk;
        float ss = 0.0f;
        for (int i = lane; i < D; i += 32) {
            float f = cu_tof<T>(x[i]);
            v[i] = f;
            ss += f * f;
        }
        if (g) {
            ss = cu_warp_sum(ss);
            const float inv = 1.0f / sqrtf(ss / (float)D + eps);
            for (int i = lane; i < D; i += 32)
                v[i] = v[i] * inv * cu_tof<T>(g[i]);
        }
        __syncwarp();
        if (tab) {
            const double *cs = tab + (r % S) * half * 2;
            for (int i = lane; i < half; i += 32) {
                int64_t ia, ib;
                cu_rope_pair(i, D, inter, &ia, &ib);
                cu_rope_apply(cs[2 * i], cs[2 * i + 1], &v[ia], &v[ib]);
            }
            __syncwarp();
        }
        for (int i = lane; i < D; i += 32)
            x[i] = cu_fromf<T>(v[i]);
        __syncwarp(); /* v is this warp's next vector */
    }
}

/* RoPE of a head vector of D = 32 E elements held E a lane (lane l:
 * elements [l E, l E + E)): a rotated pair is two of a lane's own elements
 * (interleaved) or its element and the one of lane l ^ 16 (halves), which
 * the two lanes swap.  angle(i, &c, &s) gives pair i's cosine and sine. */
template <int E, typename A> __device__ __forceinline__ void rope_lanes(float (&v)[E], int lane, int inter, A angle)
{
    constexpr int HALF = 16 * E;
    const int i0 = lane * E;
    if (inter) {
#pragma unroll
        for (int e = 0; e < E; e += 2) {
            double c, sn;
            angle((i0 + e) / 2, &c, &sn);
            cu_rope_apply(c, sn, &v[e], &v[e + 1]);
        }
        return;
    }
    /* lane l < 16 holds the first elements of pairs i0 .. i0 + E - 1, lane
     * l + 16 their second elements; lane l rotates the pairs of its first
     * E / 2 elements, lane l + 16 those of the rest, and each hands the
     * other its half of the results */
    const bool first = lane < 16;
#pragma unroll
    for (int j = 0; j < E / 2; j++) {
        const int e = first ? j : j + E / 2, i = (first ? i0 : i0 - HALF) + e;
        const float other = __shfl_xor_sync(0xffffffffu, first ? v[j + E / 2] : v[j], 16);
        float a = first ? v[e] : other, b = first ? other : v[e];
        double c, sn;
        angle(i, &c, &sn);
        cu_rope_apply(c, sn, &a, &b);
        const float back = __shfl_xor_sync(0xffffffffu, first ? b : a, 16);
        v[e] = first ? a : b;
        v[first ? j + E / 2 : j] = back;
    }
}

/* The same for head dims D = 32 E with E even (64, 128, 256): lane l holds
 * elements [l E, l E + E) in registers, loaded and stored as one vector;
 * a rotated pair is two of its own elements (interleaved) or its element
 * and the one of lane l ^ 16 (halves).  No shared memory, one pass. */
template <typename T, int E>
__global__ void __launch_bounds__(QK_WARPS * 32)
    qk_norm_rope_v(T *qkv, int64_t vectors, int heads, int H, int64_t S, int64_t width, const T *gq, const T *gk,
                   float eps, const double *tab, int inter)
{
    cu_grid_wait();
    constexpr int D = 32 * E, HALF = D / 2;
    struct alignas(E * sizeof(T)) vec {
        T t[E];
    };
    const int lane = threadIdx.x & 31;
    for (int64_t w = (int64_t)blockIdx.x * QK_WARPS + (threadIdx.x >> 5); w < vectors;
         w += (int64_t)gridDim.x * QK_WARPS) {
        const int64_t r = w / heads;
        const int hh = (int)(w - r * heads);
        vec *x = (vec *)(qkv + r * width + (int64_t)hh * D) + lane;
        const vec in = *x;
        float v[E];
        float ss = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) {
            v[e] = cu_tof<T>(in.t[e]);
            ss += v[e] * v[e];
        }
        const T *g = hh < H ? gq : gk;
        if (g) {
            const float inv = 1.0f / sqrtf(cu_warp_sum(ss) / (float)D + eps);
            const vec gv = ((const vec *)g)[lane];
#pragma unroll
            for (int e = 0; e < E; e++)
                v[e] = v[e] * inv * cu_tof<T>(gv.t[e]);
        }
        if (tab) {
            const double *cs = tab + (r % S) * HALF * 2;
            rope_lanes<E>(v, lane, inter, [cs](int i, double *c, double *sn) { *c = cs[2 * i], *sn = cs[2 * i + 1]; });
        }
        vec out;
#pragma unroll
        for (int e = 0; e < E; e++)
            out.t[e] = cu_fromf<T>(v[e]);
        *x = out;
    }
}

static rlx_status run_qk_norm_rope(const rlx_thunk *t, const ab_state *s, char *qkv)
{
    const rlx_node_data *n = t->node;
    const bool rope = n->attrs.attn_block.has_rope;
    if (s->gamma[0] < 0 && s->gamma[1] < 0 && !rope)
        return RLX_OK;
    const int64_t vectors = s->rows * (s->H + s->Hk);
    const int64_t want = (vectors + QK_WARPS - 1) / QK_WARPS;
    const int blocks = (int)(want < 65536 ? want : 65536);
    const void *gq = s->gamma[0] >= 0 ? t->in[s->gamma[0]] : NULL, *gk = s->gamma[1] >= 0 ? t->in[s->gamma[1]] : NULL;
    const int heads = (int)(s->H + s->Hk), inter = n->attrs.attn_block.rope_interleaved;
    const float eps = (float)n->attrs.attn_block.norm_eps;
    const double *tab = rope ? (const double *)s->rope_tab : NULL;
    /* the vector form: a lane's D / 32 elements as one vector (rows, heads and gammas aligned to it) */
    const size_t es = rlx_dtype_size(n->dtype), vb = (size_t)s->D / 32 * es;
    const bool vec = (s->D == 64 || s->D == 128 || s->D == 256) && (uintptr_t)qkv % vb == 0 &&
                     (size_t)s->width * es % vb == 0 && (uintptr_t)gq % vb == 0 && (uintptr_t)gk % vb == 0;
    if (vec) {
        CU_FLOAT_DISPATCH(n->dtype, T, {
            auto fn = s->D == 64 ? qk_norm_rope_v<T, 2> : s->D == 128 ? qk_norm_rope_v<T, 4> : qk_norm_rope_v<T, 8>;
            cu_launch(fn, blocks, QK_WARPS * 32, 0, (T *)qkv, vectors, heads, (int)s->H, s->S, s->width, (const T *)gq,
                      (const T *)gk, eps, tab, inter);
        });
    } else {
        CU_FLOAT_DISPATCH(n->dtype, T,
                          cu_launch(qk_norm_rope<T>, blocks, QK_WARPS * 32, 0, (T *)qkv, vectors, heads, (int)s->H,
                                    (int)s->D, s->S, s->width, (const T *)gq, (const T *)gk, eps, tab, inter));
    }
    return rlx_cu_check(t, "q/k norm and rope launch");
}

static rlx_status prep_ab(const rlx_graph *g, rlx_thunk *t)
{
    ab_state *s = (ab_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return rlx_cu_fail(t, RLX_ERR_OUT_OF_MEMORY, "no memory for the attention block state");
    t->state = s;
    const rlx_node_data *n = t->node;
    ab_dims d = dims_of(g, n);
    s->B = d.B, s->S = d.S, s->rows = d.rows, s->hid = d.hid, s->H = d.H, s->Hk = d.Hk, s->D = d.D, s->Dv = d.Dv;
    s->width = d.width, s->out = d.out;
    for (int i = 0; i < 4; i++)
        s->bias[i] = rlx_attn_block_input(n, i + 1);
    for (int i = 0; i < 2; i++)
        s->gamma[i] = rlx_attn_block_input(n, i + 5);
    rlx_dtype dt = n->dtype;
    size_t es = rlx_dtype_size(dt);
    s->qkv_bytes = round256((size_t)(d.rows * d.width) * es);
    s->o_bytes = round256((size_t)(d.rows * d.H * d.Dv) * es);
    s->empty = d.rows == 0 || d.out == 0;
    if (s->empty)
        return RLX_OK;
    if (!t->scratch || t->scratch_bytes < s->qkv_bytes + s->o_bytes + CU_GEMM_WORKSPACE)
        return rlx_cu_fail(t, RLX_ERR_INTERNAL, "attention block scratch of %zu bytes, %zu needed", t->scratch_bytes,
                           s->qkv_bytes + s->o_bytes + CU_GEMM_WORKSPACE);
    bool any_bias = s->bias[0] >= 0 || s->bias[1] >= 0 || s->bias[2] >= 0;
    /* the packed weights live in the thunk's keep region of the arena */
    size_t need = ab_keep(g, n);
    if (!t->keep || t->keep_bytes < need)
        return rlx_cu_fail(t, RLX_ERR_INTERNAL, "attention block keep region of %zu bytes, %zu needed", t->keep_bytes,
                           need);
    s->w_qkv = t->keep;
    size_t at = round256((size_t)(d.hid * d.width) * es);
    if (any_bias) {
        s->b_qkv = (char *)s->w_qkv + at;
        at += round256((size_t)d.width * es);
    }
    /* defined contents for the tuning runs below; pack fills them before any real run */
    cudaError_t e = cudaMemsetAsync(s->w_qkv, 0, need, rlx_cu_stream);
    if (e != cudaSuccess)
        return rlx_cu_error(t, e, "clearing the packed weights");
    size_t tab_bytes = rope_table_bytes(n, &d);
    if (tab_bytes) {
        /* the angles the CPU reference uses */
        double *tab = (double *)rlx_malloc(tab_bytes);
        if (!tab)
            return rlx_cu_fail(t, RLX_ERR_OUT_OF_MEMORY, "no memory for the RoPE table");
        rlx_rope_table(tab, d.S, d.D, n->attrs.attn_block.rope_theta, n->attrs.attn_block.rope_offset);
        s->rope_tab = (char *)s->w_qkv + at;
        e = cudaMemcpyAsync(s->rope_tab, tab, tab_bytes, cudaMemcpyHostToDevice, rlx_cu_stream);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(rlx_cu_stream);
        free(tab);
        if (e != cudaSuccess)
            return rlx_cu_error(t, e, "uploading the RoPE table");
    }
    /* k and v start inside a row, and the row pitch: they bound the alignment of the attention views */
    rlx_status st;
    if ((st = rlx_cu_gemm_plan(&s->gqkv, dt, 0, 0, d.rows, d.width, d.hid, d.hid, d.width, d.width, 1, 0, 0, 0,
                               any_bias ? CU_EPI_BIAS : CU_EPI_NONE, 256)) != RLX_OK ||
        (st = rlx_cu_gemm_plan(&s->go, dt, 0, 0, d.rows, d.out, d.H * d.Dv, d.H * d.Dv, d.out, d.out, 1, 0, 0, 0,
                               s->bias[3] >= 0 ? CU_EPI_BIAS : CU_EPI_NONE, 256)) != RLX_OK)
        return st;
    if ((st = rlx_cu_attention_prepare(t, dt, d.D, d.Dv)) != RLX_OK)
        return st;
    /* pick each GEMM's algorithm on the real buffers (compile time, not captured) */
    char *qkv = (char *)t->scratch, *ob = qkv + s->qkv_bytes, *ws = ob + s->o_bytes;
    size_t ws_bytes = t->scratch_bytes - s->qkv_bytes - s->o_bytes;
    rlx_cu_gemm_plan_split(&s->gqkv, ws_bytes);
    rlx_cu_gemm_plan_split(&s->go, ws_bytes);
    rlx_cu_gemm_tune(&s->gqkv, t->in[0], s->w_qkv, qkv, s->b_qkv, ws);
    rlx_cu_gemm_tune(&s->go, ob, t->in[4], t->out, s->bias[3] >= 0 ? t->in[s->bias[3]] : NULL, ws);
    return RLX_OK;
}

static void release_ab(rlx_thunk *t)
{
    ab_state *s = (ab_state *)t->state;
    rlx_cu_gemm_free(&s->gqkv);
    rlx_cu_gemm_free(&s->go);
    free(s);
}

static rlx_status k_attn_block(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const ab_state *s = (const ab_state *)t->state;
    if (s->empty)
        return RLX_OK;
    const rlx_node_data *n = t->node;
    size_t es = rlx_dtype_size(n->dtype);
    char *qkv = (char *)t->scratch, *ob = qkv + s->qkv_bytes, *ws = ob + s->o_bytes;
    int64_t off[3], cols[3];
    part_cols(s, off, cols);
    rlx_status st = rlx_cu_gemm_run(t, &s->gqkv, t->in[0], s->w_qkv, qkv, s->b_qkv, ws);
    if (st == RLX_OK)
        st = run_qk_norm_rope(t, s, qkv);
    if (st != RLX_OK)
        return st;
    cu_attn a;
    memset(&a, 0, sizeof a);
    a.B = s->B, a.H = s->H, a.Hk = s->Hk, a.S = s->S, a.T = s->S, a.D = s->D, a.Dv = s->Dv;
    double scale = n->attrs.attn_block.scale;
    a.scale = (float)(scale > 0 ? scale : 1.0 / sqrt((double)s->D));
    a.causal = n->attrs.attn_block.causal;
    /* heads are column blocks of the projection rows */
    const int64_t pitch = s->S * s->width;
    a.q = qkv, a.k = qkv + (size_t)off[1] * es, a.v = qkv + (size_t)off[2] * es, a.o = ob;
    a.qst[0] = pitch, a.qst[1] = s->D, a.qst[2] = s->width;
    a.kst[0] = pitch, a.kst[1] = s->D, a.kst[2] = s->width;
    a.vst[0] = pitch, a.vst[1] = s->Dv, a.vst[2] = s->width;
    a.ost[0] = s->S * s->H * s->Dv, a.ost[1] = s->Dv, a.ost[2] = s->H * s->Dv;
    a.ws = ws;
    a.ws_bytes = t->scratch_bytes - s->qkv_bytes - s->o_bytes;
    a.mask_dt = -1;
    int km = rlx_attn_block_input(n, 7);
    if (km >= 0)
        cu_attn_mask(&a, t->in[km], t->in_node[km]);
    if ((st = rlx_cu_attention_run(t, n->dtype, &a)) != RLX_OK)
        return st;
    return rlx_cu_gemm_run(t, &s->go, ob, t->in[4], t->out, s->bias[3] >= 0 ? t->in[s->bias[3]] : NULL, ws);
}

/* The claim: any float dtype (every input the node's, a mask also bool),
 * head dims the attention kernels take (and qk_norm_rope's 256).
 * RLX_CUDA_NO_ATTN_BLOCK=1 declines every block (they are lowered). */
static bool ab_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (!cu_is_f(n->dtype) || rlx_cu_cfg.cuda_no_attn_block)
        return false;
    int km = rlx_attn_block_input(n, 7);
    for (int i = 0; i < n->n_in; i++)
        if (g->nodes[n->in[i]].dtype != n->dtype && !(i == km && g->nodes[n->in[i]].dtype == RLX_BOOL))
            return false;
    const rlx_node_data *x = &g->nodes[n->in[0]];
    if (x->shape.ndim != 3 || n->shape.ndim != 3)
        return false;
    const bool prep = n->attrs.attn_block.has_qnorm || n->attrs.attn_block.has_knorm || n->attrs.attn_block.has_rope;
    if (prep && n->attrs.attn_block.head_dim > 256)
        return false;
    int64_t H = n->attrs.attn_block.heads, Hk = n->attrs.attn_block.kv_heads;
    if (H < 1 || Hk < 1 || H % Hk)
        return false;
    return rlx_cu_attention_dims_ok(n->dtype, n->attrs.attn_block.head_dim, n->attrs.attn_block.v_head_dim);
}

/* ------------------------------------------------------------ qkv_heads */

/* qkv_heads (a decoder step's q/k/v projection rows cut into heads, q and
 * k normalised and rotated, laid out [B, H, S, D] then [2, B, Hk, S, D]):
 * one warp per head vector of D <= 256 elements, as qk_norm_rope, reading
 * the RoPE angles from f32 cos and sin tables [B or 1, 1, S, D/2] and the
 * norms' gammas in f32, f16 or bf16 (a checkpoint's own dtype: no cast
 * kernel a step). */
typedef struct qkv_args {
    int H, Hk, D, inter;
    int64_t B, S, vectors;
    const float *cs, *sn; /* NULL: absent */
    const void *gq, *gk;  /* NULL: absent */
    int gq_dt, gk_dt;     /* their rlx_dtype */
    int64_t cs_b, sn_b;   /* the tables' strides between sequences (0: shared) */
    float eps;
} qkv_args;

/* Element i of a gamma stored as dt (f32, f16 or bf16), as f32. */
__device__ __forceinline__ float gamma_at(const void *g, int dt, int i)
{
    return dt == RLX_F16    ? __half2float(((const __half *)g)[i])
           : dt == RLX_BF16 ? __bfloat162float(((const __nv_bfloat16 *)g)[i])
                            : ((const float *)g)[i];
}

template <typename T> __global__ void __launch_bounds__(QK_WARPS * 32) qkv_heads_kernel(const T *x, T *y, qkv_args a)
{
    cu_grid_wait();
    __shared__ float sv[QK_WARPS][256];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, D = a.D, half = D / 2, heads = a.H + 2 * a.Hk;
    float *v = sv[warp];
    for (int64_t w = (int64_t)blockIdx.x * QK_WARPS + warp; w < a.vectors; w += (int64_t)gridDim.x * QK_WARPS) {
        const int64_t row = w / heads, b = row / a.S, s = row - b * a.S;
        const int hh = (int)(w - row * heads), part = hh < a.H ? 0 : hh < a.H + a.Hk ? 1 : 2;
        const int j = part == 0 ? hh : part == 1 ? hh - a.H : hh - a.H - a.Hk, nh = part == 0 ? a.H : a.Hk;
        const int64_t base = part == 0 ? 0 : a.B * a.H * a.S * D + (part == 2 ? a.B * a.Hk * a.S * D : 0);
        const T *in = x + w * D;
        T *out = y + base + ((b * nh + j) * a.S + s) * D;
        float ss = 0.0f;
        for (int i = lane; i < D; i += 32) {
            const float f = cu_tof<T>(in[i]);
            v[i] = f;
            ss += f * f;
        }
        const void *g = part == 0 ? a.gq : part == 1 ? a.gk : NULL;
        if (g) {
            const int gdt = part == 0 ? a.gq_dt : a.gk_dt;
            const float inv = 1.0f / sqrtf(cu_warp_sum(ss) / (float)D + a.eps);
            for (int i = lane; i < D; i += 32)
                v[i] = v[i] * inv * gamma_at(g, gdt, i);
        }
        __syncwarp();
        if (a.cs && part < 2) {
            const float *c = a.cs + (b * a.cs_b + s) * half, *sn = a.sn + (b * a.sn_b + s) * half;
            for (int i = lane; i < half; i += 32) {
                int64_t ia, ib;
                cu_rope_pair(i, D, a.inter, &ia, &ib);
                cu_rope_apply((double)c[i], (double)sn[i], &v[ia], &v[ib]);
            }
            __syncwarp();
        }
        for (int i = lane; i < D; i += 32)
            out[i] = cu_fromf<T>(v[i]);
        __syncwarp(); /* v is this warp's next vector */
    }
}

/* The same for head dims D = 32 E (64, 128, 256): a lane's E elements
 * loaded and stored as one vector, the norm and rotation in registers. */
template <typename T, int E> __global__ void __launch_bounds__(QK_WARPS * 32) qkv_heads_v(const T *x, T *y, qkv_args a)
{
    cu_grid_wait();
    constexpr int D = 32 * E, HALF = D / 2;
    struct alignas(E * sizeof(T)) vec {
        T t[E];
    };
    const int lane = threadIdx.x & 31, heads = a.H + 2 * a.Hk;
    for (int64_t w = (int64_t)blockIdx.x * QK_WARPS + (threadIdx.x >> 5); w < a.vectors;
         w += (int64_t)gridDim.x * QK_WARPS) {
        const int64_t row = w / heads, b = row / a.S, s = row - b * a.S;
        const int hh = (int)(w - row * heads), part = hh < a.H ? 0 : hh < a.H + a.Hk ? 1 : 2;
        const int j = part == 0 ? hh : part == 1 ? hh - a.H : hh - a.H - a.Hk, nh = part == 0 ? a.H : a.Hk;
        const int64_t base = part == 0 ? 0 : a.B * a.H * a.S * D + (part == 2 ? a.B * a.Hk * a.S * D : 0);
        const vec in = ((const vec *)(x + w * D))[lane];
        float v[E];
        float ss = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) {
            v[e] = cu_tof<T>(in.t[e]);
            ss += v[e] * v[e];
        }
        const void *g = part == 0 ? a.gq : part == 1 ? a.gk : NULL;
        if (g) {
            const int gdt = part == 0 ? a.gq_dt : a.gk_dt;
            const float inv = 1.0f / sqrtf(cu_warp_sum(ss) / (float)D + a.eps);
#pragma unroll
            for (int e = 0; e < E; e++)
                v[e] = v[e] * inv * gamma_at(g, gdt, lane * E + e);
        }
        if (a.cs && part < 2) {
            const float *c = a.cs + (b * a.cs_b + s) * HALF, *sn = a.sn + (b * a.sn_b + s) * HALF;
            rope_lanes<E>(v, lane, a.inter, [c, sn](int i, double *co, double *si) { *co = c[i], *si = sn[i]; });
        }
        vec out;
#pragma unroll
        for (int e = 0; e < E; e++)
            out.t[e] = cu_fromf<T>(v[e]);
        ((vec *)(y + base + ((b * nh + j) * a.S + s) * D))[lane] = out;
    }
}

static rlx_status k_qkv_heads(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    qkv_args a;
    memset(&a, 0, sizeof a);
    a.H = n->attrs.qkv.heads, a.Hk = n->attrs.qkv.kv_heads, a.D = n->attrs.qkv.head_dim;
    a.inter = n->attrs.qkv.rope_interleaved, a.eps = (float)n->attrs.qkv.norm_eps;
    a.B = x->shape.dims[0], a.S = x->shape.dims[1];
    a.vectors = a.B * a.S * (a.H + 2 * a.Hk);
    for (int i = 1; i <= 4; i++) {
        int k = rlx_qkv_heads_input(n, i);
        if (k < 0)
            continue;
        if (i <= 2) { /* a table and its stride between sequences */
            *(i == 1 ? &a.cs : &a.sn) = (const float *)t->in[k];
            *(i == 1 ? &a.cs_b : &a.sn_b) = t->in_node[k]->shape.dims[0] == 1 ? 0 : a.S;
        } else { /* a gamma and its dtype */
            *(i == 3 ? &a.gq : &a.gk) = t->in[k];
            *(i == 3 ? &a.gq_dt : &a.gk_dt) = t->in_node[k]->dtype;
        }
    }
    if (!a.vectors)
        return RLX_OK;
    const int64_t want = (a.vectors + QK_WARPS - 1) / QK_WARPS;
    const int blocks = (int)(want < 65536 ? want : 65536);
    /* the vector form where a lane's elements are one aligned vector */
    const size_t es = rlx_dtype_size(n->dtype), vb = (size_t)a.D / 32 * es;
    const bool vec =
        (a.D == 64 || a.D == 128 || a.D == 256) && (uintptr_t)t->in[0] % vb == 0 && (uintptr_t)t->out % vb == 0;
    if (vec)
        CU_FLOAT_DISPATCH(n->dtype, T, {
            auto fn = a.D == 64 ? qkv_heads_v<T, 2> : a.D == 128 ? qkv_heads_v<T, 4> : qkv_heads_v<T, 8>;
            cu_launch(fn, blocks, QK_WARPS * 32, 0, (const T *)t->in[0], (T *)t->out, a);
        });
    else
        CU_FLOAT_DISPATCH(
            n->dtype, T, cu_launch(qkv_heads_kernel<T>, blocks, QK_WARPS * 32, 0, (const T *)t->in[0], (T *)t->out, a));
    return rlx_cu_check(t, "qkv_heads launch");
}

/* The claim: a float x, head dims up to 256, tables in f32 (as mixed
 * precision keeps them), gammas in f32, f16 or bf16; others are lowered. */
static bool qkv_heads_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (!cu_is_f(n->dtype) || n->attrs.qkv.head_dim > 256)
        return false;
    for (int i = 1; i <= 4; i++) {
        int k = rlx_qkv_heads_input(n, i);
        if (k >= 0 && (i <= 2 ? g->nodes[n->in[k]].dtype != RLX_F32 : !cu_is_f(g->nodes[n->in[k]].dtype)))
            return false;
    }
    return true;
}

extern "C" void rlx_cuda_register_attn_block(cu_kernel *tab)
{
    tab[RLX_OP_ATTENTION_BLOCK] =
        (cu_kernel){k_attn_block, ab_scratch, ab_ok, prep_ab, release_ab, pack_ab, pack_ab_inputs, ab_keep};
    tab[RLX_OP_QKV_HEADS] = (cu_kernel){k_qkv_heads, NULL, qkv_heads_ok, NULL, NULL};
}
