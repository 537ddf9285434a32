/* k_attn_block.cu - the fused attention block (RLX_OP_ATTENTION_BLOCK):
 * q, k and v projections as three cuBLASLt GEMMs (bias in the epilogue)
 * writing side by side into one scratch buffer of rows [B*S, (H + 2*Hkv)*D]
 * (ldc = the whole row, so no concat and no head transposes), attention
 * reading its heads from that buffer through strides and writing [B*S, H*Dv]
 * rows, which are already what the output projection (one more GEMM, bias
 * in the epilogue) reads.  Five launches where the lowered form has about a
 * dozen.  Per-head q/k RMS norm and RoPE are not done here: such blocks are
 * not claimed and the optimizer lowers them to primitives. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_gemm.h"

typedef struct ab_state {
    cu_gemm gq, gk, gv, go;
    int64_t B, S, rows, H, Hk, D, Dv, width, out;
    size_t qkv_bytes; /* the projection buffer; the attention output follows it */
    size_t o_bytes;
    int empty;
    int bias[4]; /* input index of bq, bk, bv, bo; -1 absent */
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
    return round256((size_t)(d.rows * d.width) * es) + round256((size_t)(d.rows * d.H * d.Dv) * es) + CU_GEMM_WORKSPACE;
}

/* Largest power of two (<= 256) dividing every byte offset given. */
static size_t align_of(const size_t *off, int n)
{
    size_t a = 256;
    for (int i = 0; i < n; i++)
        a |= off[i];
    return a & ~(a - 1);
}

static rlx_status prep_ab(const rlx_graph *g, rlx_thunk *t)
{
    ab_state *s = (ab_state *)calloc(1, sizeof *s);
    if (!s)
        return rlx_cu_fail(t, RLX_ERR_OUT_OF_MEMORY, "no memory for the attention block state");
    t->state = s;
    const rlx_node_data *n = t->node;
    ab_dims d = dims_of(g, n);
    s->B = d.B, s->S = d.S, s->rows = d.rows, s->H = d.H, s->Hk = d.Hk, s->D = d.D, s->Dv = d.Dv;
    s->width = d.width, s->out = d.out;
    for (int i = 0; i < 4; i++)
        s->bias[i] = rlx_attn_block_input(n, i + 1);
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
    /* byte offsets of k and v inside a row, and the row pitch: they bound the alignment */
    size_t off[3] = {(size_t)(d.H * d.D) * es, (size_t)((d.H + d.Hk) * d.D) * es, (size_t)d.width * es};
    size_t al = align_of(off, 3);
    rlx_status st;
#define EPI(i) (s->bias[i] >= 0 ? CU_EPI_BIAS : CU_EPI_NONE)
    if ((st = rlx_cu_gemm_plan(&s->gq, dt, 0, 0, d.rows, d.H * d.D, d.hid, d.hid, d.H * d.D, d.width, 1, 0, 0, 0,
                               EPI(0), al)) != RLX_OK ||
        (st = rlx_cu_gemm_plan(&s->gk, dt, 0, 0, d.rows, d.Hk * d.D, d.hid, d.hid, d.Hk * d.D, d.width, 1, 0, 0, 0,
                               EPI(1), al)) != RLX_OK ||
        (st = rlx_cu_gemm_plan(&s->gv, dt, 0, 0, d.rows, d.Hk * d.Dv, d.hid, d.hid, d.Hk * d.Dv, d.width, 1, 0, 0, 0,
                               EPI(2), al)) != RLX_OK ||
        (st = rlx_cu_gemm_plan(&s->go, dt, 0, 0, d.rows, d.out, d.H * d.Dv, d.H * d.Dv, d.out, d.out, 1, 0, 0, 0, EPI(3),
                               256)) != RLX_OK)
        return st;
#undef EPI
    if ((st = rlx_cu_attention_prepare(t, dt, d.D, d.Dv)) != RLX_OK)
        return st;
    /* pick each GEMM's algorithm on the real buffers (compile time, not captured) */
    char *qkv = (char *)t->scratch, *ob = qkv + s->qkv_bytes, *ws = ob + s->o_bytes;
#define BIAS(i) (s->bias[i] >= 0 ? t->in[s->bias[i]] : NULL)
    rlx_cu_gemm_tune(&s->gq, t->in[0], t->in[1], qkv, BIAS(0), ws);
    rlx_cu_gemm_tune(&s->gk, t->in[0], t->in[2], qkv + off[0], BIAS(1), ws);
    rlx_cu_gemm_tune(&s->gv, t->in[0], t->in[3], qkv + off[1], BIAS(2), ws);
    rlx_cu_gemm_tune(&s->go, ob, t->in[4], t->out, BIAS(3), ws);
    return RLX_OK;
}

static void release_ab(rlx_thunk *t)
{
    ab_state *s = (ab_state *)t->state;
    rlx_cu_gemm_free(&s->gq);
    rlx_cu_gemm_free(&s->gk);
    rlx_cu_gemm_free(&s->gv);
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
    char *kp = qkv + (size_t)(s->H * s->D) * es, *vp = qkv + (size_t)((s->H + s->Hk) * s->D) * es;
    rlx_status st;
    if ((st = rlx_cu_gemm_run(t, &s->gq, t->in[0], t->in[1], qkv, BIAS(0), ws)) != RLX_OK ||
        (st = rlx_cu_gemm_run(t, &s->gk, t->in[0], t->in[2], kp, BIAS(1), ws)) != RLX_OK ||
        (st = rlx_cu_gemm_run(t, &s->gv, t->in[0], t->in[3], vp, BIAS(2), ws)) != RLX_OK)
        return st;
    cu_attn a;
    memset(&a, 0, sizeof a);
    a.B = s->B, a.H = s->H, a.Hk = s->Hk, a.S = s->S, a.T = s->S, a.D = s->D, a.Dv = s->Dv;
    double scale = n->attrs.attn_block.scale;
    a.scale = (float)(scale > 0 ? scale : 1.0 / sqrt((double)s->D));
    a.causal = n->attrs.attn_block.causal;
    /* heads are column blocks of the projection rows */
    const int64_t pitch = s->S * s->width;
    a.q = qkv, a.k = kp, a.v = vp, a.o = ob;
    a.qst[0] = pitch, a.qst[1] = s->D, a.qst[2] = s->width;
    a.kst[0] = pitch, a.kst[1] = s->D, a.kst[2] = s->width;
    a.vst[0] = pitch, a.vst[1] = s->Dv, a.vst[2] = s->width;
    a.ost[0] = s->S * s->H * s->Dv, a.ost[1] = s->Dv, a.ost[2] = s->H * s->Dv;
    a.mask_dt = -1;
    if ((st = rlx_cu_attention_run(t, n->dtype, &a)) != RLX_OK)
        return st;
    return rlx_cu_gemm_run(t, &s->go, ob, t->in[4], t->out, BIAS(3), ws);
}
#undef BIAS

/* The claim: any float dtype (every input the node's), no q/k norm, no
 * rope, head dims the attention kernels take. */
static bool ab_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (!rlx_cu_float_ok(g, n))
        return false;
    for (int i = 0; i < n->n_in; i++)
        if (g->nodes[n->in[i]].dtype != n->dtype)
            return false;
    const rlx_node_data *x = &g->nodes[n->in[0]];
    if (x->shape.ndim != 3 || n->shape.ndim != 3)
        return false;
    if (n->attrs.attn_block.has_qnorm || n->attrs.attn_block.has_knorm || n->attrs.attn_block.has_rope)
        return false;
    int64_t H = n->attrs.attn_block.heads, Hk = n->attrs.attn_block.kv_heads;
    if (H < 1 || Hk < 1 || H % Hk)
        return false;
    return rlx_cu_attention_dims_ok(n->dtype, n->attrs.attn_block.head_dim, n->attrs.attn_block.v_head_dim);
}

extern "C" void rlx_cuda_register_attn_block(cu_kernel *tab)
{
    tab[RLX_OP_ATTENTION_BLOCK] = (cu_kernel){k_attn_block, ab_scratch, ab_ok, prep_ab, release_ab};
}
