/* k_matmul.cu - matmul and matmul + bias + activation (batched,
 * transposes, broadcast batch dims, f32/f16/bf16 with f32 accumulation)
 * on cuBLASLt (gemm.cu); for 16-bit matmuls whose exact GELU/SiLU
 * cuBLASLt cannot fuse, one cuDNN-compiled kernel; on request, on Hopper,
 * for 16-bit single GEMMs, our own (gemm_wgmma.cu).  Each is kept where it
 * measures fastest.  A 16-bit product of up to 8 rows by a weight stored
 * [N, K] (a decode step's projections) is a matrix-vector product bound by
 * reading the weight: k_proj.cu's kernel, with bias and activation. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_dnn.h"
#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_proj.h"

struct dnn_graph;

typedef struct mm_state {
    cu_gemm gemm;
    /* matmul + bias + GELU/SiLU as one cuDNN graph (16-bit; cuBLASLt has no
     * exact epilogue for these): used when it measured faster than
     * cuBLASLt followed by the activation pass */
    struct dnn_graph *dnn;
    /* our Hopper GEMM (bias and activation fused), when it measured faster
     * than the above */
    cu_wg_plan wg;
    int use_wg;
    int gemv; /* 1: the few-row kernel (k_proj.cu; rows gm) */
    int64_t gm;
    int loop; /* 1: one GEMM per batch (general broadcast) */
    int64_t batch, mat_a, mat_b, mat_c;
    rlx_shape bshape;
    int64_t a_st[RLX_MAX_DIMS], b_st[RLX_MAX_DIMS];
} mm_state;

/* Batch layout: 0 = every batch distinct and contiguous, 1 = shared (all
 * strides 0), -1 = neither. */
static int batch_kind(const int64_t *st, const rlx_shape *bshape)
{
    bool zero = true, dense = true;
    int64_t expect = 1;
    for (int d = bshape->ndim - 1; d >= 0; d--) {
        if (bshape->dims[d] == 1)
            continue;
        if (st[d] != 0)
            zero = false;
        if (st[d] != expect)
            dense = false;
        expect *= bshape->dims[d];
    }
    return zero ? 1 : dense ? 0 : -1;
}

/* matmul and matmul_bias_act share this; epi applies to every GEMM. */
static rlx_status prep_mm_plan(rlx_thunk *t, int ta, int tb, cu_epi epi)
{
    mm_state *s = (mm_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    t->state = s;
    const rlx_node_data *n = t->node, *a = t->in_node[0], *b = t->in_node[1];
    int ra = a->shape.ndim, rb = b->shape.ndim, ro = n->shape.ndim;
    int64_t M = n->shape.dims[ro - 2], N = n->shape.dims[ro - 1];
    int64_t a_rows = a->shape.dims[ra - 2], a_cols = a->shape.dims[ra - 1];
    int64_t b_rows = b->shape.dims[rb - 2], b_cols = b->shape.dims[rb - 1];
    int64_t K = ta ? a_rows : a_cols;
    s->bshape = n->shape;
    s->bshape.ndim = ro - 2;
    s->batch = rlx_shape_numel(&s->bshape);
    rlx_shape ab = a->shape, bb = b->shape;
    ab.ndim = ra - 2;
    bb.ndim = rb - 2;
    rlx_shape_broadcast_strides(&ab, &s->bshape, s->a_st);
    rlx_shape_broadcast_strides(&bb, &s->bshape, s->b_st);
    s->mat_a = a_rows * a_cols;
    s->mat_b = b_rows * b_cols;
    s->mat_c = M * N;
    int ka = batch_kind(s->a_st, &s->bshape), kb = batch_kind(s->b_st, &s->bshape);
    if (!M || !N || !s->batch)
        return RLX_OK;
    if (s->batch > 1 && kb == 1 && ka == 0 && !ta) {
        /* shared B: fold the batch into M */
        return rlx_cu_gemm_plan(&s->gemm, n->dtype, ta, tb, M * s->batch, N, K, a_cols, b_cols, N, 1, 0, 0, 0, epi,
                                256);
    }
    if (ka >= 0 && kb >= 0) {
        return rlx_cu_gemm_plan(&s->gemm, n->dtype, ta, tb, M, N, K, a_cols, b_cols, N, s->batch,
                                ka == 1 ? 0 : s->mat_a, kb == 1 ? 0 : s->mat_b, s->mat_c, epi, 256);
    }
    s->loop = 1;
    size_t es = rlx_dtype_size(n->dtype);
    size_t align = (size_t)s->mat_a * es | (size_t)s->mat_b * es | (size_t)s->mat_c * es | 256;
    align &= ~(align - 1);
    return rlx_cu_gemm_plan(&s->gemm, n->dtype, ta, tb, M, N, K, a_cols, b_cols, N, 1, 0, 0, 0, epi, align);
}

/* ------------------------------------------- few rows times [N, K]^T */

/* Whether thunk t's product suits the kernel: 16-bit, one shared [N, K]
 * weight read transposed, up to CU_PROJ_MAX_ROWS contiguous rows of A. */
static bool gemv_fits(const rlx_thunk *t, int ta, int tb, int64_t *rows)
{
    const rlx_node_data *n = t->node, *a = t->in_node[0], *b = t->in_node[1];
    if ((n->dtype != RLX_F16 && n->dtype != RLX_BF16) || ta || !tb || b->shape.ndim != 2)
        return false;
    const int64_t K = b->shape.dims[1], N = b->shape.dims[0];
    const int64_t M = rlx_shape_numel(&n->shape) / (N ? N : 1);
    if (M < 1 || M > cu_proj_float_rows() || K < 8 || K % 8 || a->shape.dims[a->shape.ndim - 1] != K ||
        rlx_shape_numel(&a->shape) != M * K)
        return false;
    if (((uintptr_t)t->in[0] | (uintptr_t)t->in[1] | (uintptr_t)t->out) % 16)
        return false;
    *rows = M;
    return true;
}

static rlx_status run_gemv(const rlx_thunk *t, const void *bias, int act)
{
    const mm_state *s = (const mm_state *)t->state;
    const rlx_shape *w = &t->in_node[1]->shape;
    cu_proj_args a;
    memset(&a, 0, sizeof a);
    a.x = t->in[0];
    a.w = t->in[1];
    a.bias = bias;
    a.y = t->out;
    a.M = s->gm;
    a.N = w->dims[0];
    a.K = w->dims[1];
    a.act = act;
    a.w_fixed = (t->in_fixed >> 1) & 1;
    rlx_cu_rows_launch(t->node->dtype, a);
    return rlx_cu_check(t, "matrix-vector product launch");
}

static rlx_status prep_mm(rlx_thunk *t, int ta, int tb, cu_epi epi)
{
    {
        int64_t rows;
        if (rlx_cu_cfg.cuda_mm_path == RLX_CUDA_MM_AUTO && gemv_fits(t, ta, tb, &rows)) {
            mm_state *s = (mm_state *)rlx_calloc(1, sizeof *s);
            if (!s)
                return RLX_ERR_OUT_OF_MEMORY;
            s->gemv = 1;
            s->gm = rows;
            s->batch = 1;
            s->mat_c = rows;
            t->state = s;
            return RLX_OK;
        }
    }
    rlx_status st = prep_mm_plan(t, ta, tb, epi);
    mm_state *s = (mm_state *)t->state;
    if (st == RLX_OK && s && s->gemm.p.has_algo) {
        rlx_cu_gemm_plan_split(&s->gemm, t->scratch_bytes);
        const void *bias = (t->node->op == RLX_OP_MATMUL_BIAS_ACT && t->node->attrs.mm_act.has_bias) ? t->in[2] : NULL;
        rlx_cu_gemm_tune(&s->gemm, t->in[0], t->in[1], t->out, bias, t->scratch);
    }
    return st;
}

static rlx_status prep_mm_wg(rlx_thunk *t);

static rlx_status prep_matmul(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    rlx_status st = prep_mm(t, t->node->attrs.matmul.trans_a, t->node->attrs.matmul.trans_b, CU_EPI_NONE);
    return st == RLX_OK ? prep_mm_wg(t) : st;
}

static void release_mm_dnn(mm_state *s);

static void release_matmul(rlx_thunk *t)
{
    mm_state *s = (mm_state *)t->state;
    release_mm_dnn(s);
    rlx_cu_gemm_free(&s->gemm);
    free(s);
}

/* Our GEMM for this thunk's one product; act 0 for a plain matmul. */
static rlx_status run_mm_wg(const rlx_thunk *t, const void *bias, int act)
{
    const mm_state *s = (const mm_state *)t->state;
    const cu_gemm *g = &s->gemm;
    rlx_cu_wg_launch(&s->wg, g->dt, g->M, g->N, g->K, g->ldc, t->out, bias, act, (t->in_fixed >> 1) & 1);
    return rlx_cu_check(t, "wgmma GEMM launch");
}

static rlx_status run_mm(const rlx_thunk *t, const void *bias)
{
    const mm_state *s = (const mm_state *)t->state;
    if (!s->mat_c || !s->batch)
        return RLX_OK;
    if (s->gemv)
        return run_gemv(t, bias, 0);
    if (s->use_wg)
        return run_mm_wg(t, bias, 0);
    if (!s->loop)
        return rlx_cu_gemm_run(t, &s->gemm, t->in[0], t->in[1], t->out, bias, t->scratch);
    size_t es = rlx_dtype_size(t->node->dtype);
    for (int64_t i = 0; i < s->batch; i++) {
        int64_t oa = 0, ob = 0, q = i;
        for (int d = s->bshape.ndim - 1; d >= 0; d--) {
            int64_t k = q % s->bshape.dims[d];
            q /= s->bshape.dims[d];
            oa += k * s->a_st[d];
            ob += k * s->b_st[d];
        }
        rlx_status st = rlx_cu_gemm_run(t, &s->gemm, (const char *)t->in[0] + oa * s->mat_a * (int64_t)es,
                                        (const char *)t->in[1] + ob * s->mat_b * (int64_t)es,
                                        (char *)t->out + i * s->mat_c * (int64_t)es, bias, t->scratch);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

static rlx_status k_matmul(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    return run_mm(t, NULL);
}

/* ------------------------------------------------- matmul + bias + act */

static rlx_status prep_mm_dnn(rlx_thunk *t);
static rlx_status run_mm_dnn(const rlx_thunk *t);

static rlx_status prep_mm_act(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    int post;
    const rlx_node_data *n = t->node;
    cu_epi epi = rlx_cu_gemm_epilogue(n->attrs.mm_act.has_bias, n->attrs.mm_act.act, &post);
    rlx_status st = prep_mm(t, n->attrs.mm_act.trans_a, n->attrs.mm_act.trans_b, epi);
    if (st == RLX_OK && post && !((mm_state *)t->state)->gemv)
        st = prep_mm_dnn(t);
    return st == RLX_OK ? prep_mm_wg(t) : st;
}

static rlx_status k_mm_act(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const mm_state *s = (const mm_state *)t->state;
    const rlx_node_data *n = t->node;
    if (s->gemv)
        return run_gemv(t, n->attrs.mm_act.has_bias ? t->in[2] : NULL, n->attrs.mm_act.act);
    if (s->use_wg && s->mat_c)
        return run_mm_wg(t, n->attrs.mm_act.has_bias ? t->in[2] : NULL, n->attrs.mm_act.act);
    if (s->dnn)
        return run_mm_dnn(t);
    int post;
    rlx_cu_gemm_epilogue(n->attrs.mm_act.has_bias, n->attrs.mm_act.act, &post);
    rlx_status st = run_mm(t, n->attrs.mm_act.has_bias ? t->in[2] : NULL);
    if (st != RLX_OK || !post)
        return st;
    int64_t total = rlx_shape_numel(&n->shape);
    if (!total)
        return RLX_OK;
    rlx_cu_act_pass(n->dtype, t->out, total, n->attrs.mm_act.act);
    return rlx_cu_check(t, "activation launch");
}

/* cuBLASLt's workspace, and room for f32 operands split for tensor cores. */
static size_t matmul_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *a = &g->nodes[n->in[0]];
    int ta = n->op == RLX_OP_MATMUL ? n->attrs.matmul.trans_a : n->attrs.mm_act.trans_a;
    int ra = a->shape.ndim, ro = n->shape.ndim;
    int64_t N = n->shape.dims[ro - 1], K = a->shape.dims[ta ? ra - 2 : ra - 1];
    int64_t rows = N ? rlx_shape_numel(&n->shape) / N : 0; /* M, times the batch when it folds into M */
    return CU_GEMM_WORKSPACE + rlx_cu_gemm_split_bytes(n->dtype, rows, N, K);
}

/* What the tuning chose for a GEMM shape is kept in the device's memos
 * (cu_device): identical GEMMs (an encoder's layers) reuse it instead of
 * building or timing every candidate again.  One memo per choice; a key is
 * the shape, layout, epilogue and what else the choice depends on. */
/* ---- matmul + bias + GELU/SiLU through cuDNN's graph API.
 * Operation graph: matmul (A [1, M, K], B [1, K, N] in either stored
 * layout, f32 compute) -> [add bias [1, 1, N]] -> GELU (erf form) or
 * SiLU -> y, the intermediates virtual f32 tensors.  cuDNN compiles these
 * fused kernels at plan time (NVRTC), so only GEMMs whose activation
 * cuBLASLt cannot fuse come here; the plan is kept when it measured
 * faster than cuBLASLt plus the activation pass (RLX_CUDA_MM_PATH=cudnn
 * keeps it wherever it builds, =cublaslt never tries it). */
#ifdef RLX_CUDNN
enum { MM_REPS = 8 }; /* launches per captured timing graph */
/* per shape: the cuDNN plan chosen, -1 for cuBLASLt and the activation pass */

static bool launch_mm_act(void *t) { return k_mm_act((const rlx_thunk *)t, NULL) == RLX_OK; }

static void release_mm_dnn(mm_state *s)
{
    if (!s->dnn)
        return;
    dnn_release_graph(s->dnn);
    free(s->dnn);
    s->dnn = NULL;
}

static rlx_status run_mm_dnn(const rlx_thunk *t)
{
    const dnn_graph *d = ((const mm_state *)t->state)->dnn;
    cudnnStatus_t st = rlx_dnn.cudnnBackendExecute(rlx_dnn_h, d->plan, d->pack);
    if (st != CUDNN_STATUS_SUCCESS)
        return rlx_cu_fail(t, RLX_ERR_DEVICE, "cuDNN matmul graph failed (status %d)", (int)st);
    return rlx_cu_check(t, "cuDNN matmul graph");
}

static rlx_status prep_mm_dnn(rlx_thunk *t)
{
    mm_state *s = (mm_state *)t->state;
    const rlx_node_data *n = t->node;
    const int path = rlx_cu_cfg.cuda_mm_path;
    bool forced = path == RLX_CUDA_MM_CUDNN;
    if (path == RLX_CUDA_MM_CUBLASLT || (n->dtype != RLX_F16 && n->dtype != RLX_BF16) || s->loop ||
        !s->gemm.p.has_algo || s->gemm.batch != 1 || s->gemm.trans_a || !t->scratch)
        return RLX_OK;
    int act = n->attrs.mm_act.act;
    if (act != RLX_ACT_GELU && act != RLX_ACT_SILU)
        return RLX_OK;
    if (!rlx_dnn_graph_ready() || rlx_cu_cfg.cuda_no_cudnn_graph)
        return forced ? rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "RLX_CUDA_MM_PATH=cudnn: cuDNN's graph API is not loaded")
                      : RLX_OK;
    const cu_gemm *g = &s->gemm;
    const int64_t M = g->M, N = g->N, K = g->K;
    bool has_bias = n->attrs.mm_act.has_bias;
    /* the shape, layout, epilogue and operand alignments (a plan's validity depends on them) */
    int64_t key[10] = {n->dtype,
                       M,
                       N,
                       K,
                       g->lda,
                       g->ldb,
                       g->ldc,
                       g->trans_b | has_bias << 1 | act << 2,
                       cu_ptr_align(t->in[0]) << 16 | cu_ptr_align(t->in[1]) << 8 | cu_ptr_align(t->out),
                       has_bias ? cu_ptr_align(t->in[2]) : 0};
    int memo[4],
        known = !forced && rlx_cu_memo_find(&rlx_cu_dev->mm_dnn, key, memo) ? memo[0] : -2; /* -2: not tuned yet */
    if (known == -1)
        return RLX_OK; /* cuBLASLt won for this shape before */
    rlx_dnn.cudnnSetStream(rlx_dnn_h, rlx_cu_stream);
    /* the path as it stands: cuBLASLt (tuned) and the activation pass */
    float lt_ms = forced || known >= 0 ? 1e30f : rlx_cu_time_captured(launch_mm_act, t, MM_REPS);
    dnn_graph *d = (dnn_graph *)rlx_calloc(1, sizeof *d);
    if (!d)
        return RLX_ERR_OUT_OF_MEMORY;
    cudnnDataType_t ty = n->dtype == RLX_F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16, f32 = CUDNN_DATA_FLOAT;
    int64_t adim[3] = {1, M, K}, astr[3] = {M * g->lda, g->lda, 1};
    int64_t bdim[3] = {1, K, N}, bstr_kn[3] = {K * g->ldb, g->ldb, 1}, bstr_nk[3] = {N * g->ldb, 1, g->ldb};
    int64_t ydim[3] = {1, M, N}, ystr[3] = {M * g->ldc, g->ldc, 1};
    int64_t cdim[3] = {1, M, N}, cstr[3] = {M * N, N, 1};
    int64_t vdim[3] = {1, 1, N}, vstr[3] = {N, N, 1};
    cudnnPointwiseMode_t mode = act == RLX_ACT_GELU ? CUDNN_POINTWISE_GELU_FWD : CUDNN_POINTWISE_SWISH_FWD;
    graph_build b = {d, CUDNN_STATUS_SUCCESS, NULL};
    bdesc at, bt, yt, vt = NULL, ct, dt = NULL, mm, mmop, ops[3], og = NULL;
    int nops = 0;
    bool ok =
        gb_tensor(&b, &at, 1, ty, 3, adim, astr, false, t->in[0]) &&
        gb_tensor(&b, &bt, 2, ty, 3, bdim, g->trans_b ? bstr_nk : bstr_kn, false, t->in[1]) &&
        gb_tensor(&b, &yt, 3, ty, 3, ydim, ystr, false, t->out) &&
        (!has_bias || gb_tensor(&b, &vt, 4, ty, 3, vdim, vstr, false, t->in[2])) &&
        gb_tensor(&b, &ct, 5, f32, 3, cdim, cstr, true, NULL) &&
        (!has_bias || gb_tensor(&b, &dt, 6, f32, 3, cdim, cstr, true, NULL)) &&
        gb_new(&b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, &mm, "matmul desc create") &&
        gb_set(&b, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul compute type") &&
        gb_ok(&b, rlx_dnn.cudnnBackendFinalize(mm), "matmul desc finalize") &&
        gb_new(&b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, &mmop, "matmul op create") &&
        gb_set(&b, mmop, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &at, "matmul a") &&
        gb_set(&b, mmop, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bt, "matmul b") &&
        gb_set(&b, mmop, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ct, "matmul c") &&
        gb_set(&b, mmop, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, "matmul op desc") &&
        gb_ok(&b, rlx_dnn.cudnnBackendFinalize(mmop), "matmul op finalize");
    if (ok) {
        ops[nops++] = mmop;
        if (has_bias)
            ok = gb_pointwise(&b, &ops[nops++], CUDNN_POINTWISE_ADD, ct, vt, dt);
        ok = ok && gb_pointwise(&b, &ops[nops++], mode, has_bias ? dt : ct, NULL, yt);
    }
    ok = ok && gb_new(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &og, "op graph create") &&
         gb_set(&b, og, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops, "op graph ops");
    if (ok) {
        rlx_dnn.cudnnBackendSetAttribute(og, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &rlx_dnn_h);
        ok = gb_ok(&b, rlx_dnn.cudnnBackendFinalize(og), "op graph finalize");
    }
    void *ptrs[4] = {(void *)t->in[0], (void *)t->in[1], t->out, has_bias ? (void *)t->in[2] : NULL};
    int64_t uids[4] = {1, 2, 3, 4};
    /* these engines are compiled at finalize: a few candidates only (the
     * first that runs when forced, as the tests do) */
    float ms = ok ? dnn_pick_plan(&b, og, ptrs, uids, has_bias ? 4 : 3, t->scratch, t->scratch_bytes, true,
                                  forced ? 1 : 6, known, MM_REPS)
                  : 1e30f;
    if (!forced && known == -2) {
        int chosen[4] = {d->plan && ms < lt_ms ? d->pick : -1};
        rlx_cu_memo_add(&rlx_cu_dev->mm_dnn, key, chosen);
    }
    if (rlx_cu_cfg.verbose)
        fprintf(stderr,
                "[rlx cuda] matmul node %d %lldx%lldx%lld: cuBLASLt + %s pass %.2f us, cuDNN graph %s%.2f us "
                "(%d plans%s%s%s)\n",
                (int)t->id, (long long)M, (long long)N, (long long)K, act == RLX_ACT_GELU ? "GELU" : "SiLU",
                lt_ms < 1e29f ? lt_ms * 1e3f : -1.0f, ms < lt_ms ? "(kept) " : "", ms < 1e29f ? ms * 1e3f : -1.0f,
                d->plans, known >= 0 ? ", the one chosen for this shape before" : "",
                b.where ? ", first failure: " : "", b.where ? b.where : "");
    if (d->plan && ms < lt_ms) {
        s->dnn = d;
        return RLX_OK;
    }
    rlx_status st = RLX_OK;
    if (forced)
        st = rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "RLX_CUDA_MM_PATH=cudnn: no cuDNN plan for this matmul (%s%s%d plans)",
                         b.where ? b.where : "", b.where ? ", " : "", d->plans);
    dnn_release_graph(d);
    free(d);
    return st;
}
#else
static void release_mm_dnn(mm_state *s) { (void)s; }
static rlx_status run_mm_dnn(const rlx_thunk *t)
{
    (void)t;
    return RLX_OK;
}
static rlx_status prep_mm_dnn(rlx_thunk *t)
{
    (void)t;
    return RLX_OK;
}
#endif

/* ---- our Hopper GEMM (gemm_wgmma.cu), on request: RLX_CUDA_WGMMA=1 times
 * it against the path chosen above (cuBLASLt, with its activation pass,
 * or cuDNN's fused kernel), each of its plans as 8 launches captured into
 * a graph, and keeps it when faster; it measured slower on every shape
 * tried, so by default it is not timed (its 16 plans would cost compile
 * time for nothing).  RLX_CUDA_MM_PATH=wgmma requires it for every 16-bit
 * matmul (compile fails where it does not apply, so a test cannot pass on
 * another path); =cublaslt or =cudnn never try it. */
static bool launch_mm_any(void *t)
{
    const rlx_thunk *th = (const rlx_thunk *)t;
    return th->fn(th, NULL) == RLX_OK;
}

/* per shape: {kept, bn, split, stages} of the wgmma plan timed */

static rlx_status prep_mm_wg(rlx_thunk *t)
{
    mm_state *s = (mm_state *)t->state;
    const int path = rlx_cu_cfg.cuda_mm_path;
    bool forced = path == RLX_CUDA_MM_WGMMA;
    if (!s || s->gemv || (path != RLX_CUDA_MM_AUTO && !forced) || (!forced && !rlx_cu_cfg.cuda_wgmma) ||
        (t->node->dtype != RLX_F16 && t->node->dtype != RLX_BF16))
        return RLX_OK;
    if (forced && !rlx_cu_wg_available())
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED,
                           "RLX_CUDA_MM_PATH=wgmma: no wgmma GEMM here (it needs an sm_90 device and a build with "
                           "sm_90a code)");
    const cu_gemm *g = &s->gemm;
    bool fits = s->mat_c && s->batch && !s->loop && g->p.has_algo && g->batch == 1 && !g->trans_a && !g->trans_b &&
                rlx_cu_wg_fits(t->node->dtype, g->M, g->N, g->K, g->lda, g->ldb, g->ldc, t->in[0], t->in[1], t->out);
    if (!fits)
        return forced ? rlx_cu_fail(t, RLX_ERR_UNSUPPORTED,
                                    "RLX_CUDA_MM_PATH=wgmma: this matmul does not suit the wgmma GEMM "
                                    "(one GEMM, N %% 64 == 0, K %% 64 == 0, B not transposed, 16-byte aligned)")
                      : RLX_OK;
    cudaStreamCaptureStatus cs;
    if (cudaStreamIsCapturing(rlx_cu_stream, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
        return RLX_OK;
    const rlx_node_data *n = t->node;
    int act_bias = n->op == RLX_OP_MATMUL_BIAS_ACT ? n->attrs.mm_act.act | n->attrs.mm_act.has_bias << 4 | 1 << 5 : 0;
    const int64_t key[10] = {n->dtype, g->M,   g->N,   g->K,
                             g->lda,   g->ldb, g->ldc, act_bias | (int)(t->in_fixed >> 1 & 1) << 6};
    int known[4] = {0}; /* kept, bn, split, stages */
    bool reuse = !forced && rlx_cu_memo_find(&rlx_cu_dev->mm_wgmma, key, known);
    if (reuse && !known[0])
        return RLX_OK; /* the path above won for this shape before */
    enum { REPS = 8, MAX_PLANS = 16 };
    bool each = rlx_cu_cfg.verbose >= 2; /* RLX_VERBOSE=2: every plan's time too */
    float best = forced || reuse ? 1e30f : rlx_cu_time_captured(launch_mm_any, t, REPS), before = best;
    cu_wg_plan *cand = (cu_wg_plan *)rlx_malloc(MAX_PLANS * sizeof *cand);
    if (!cand)
        return RLX_ERR_OUT_OF_MEMORY;
    cu_wg_plan pick = {}, fastest = {};
    float wg_best = 1e30f;
    int nc = rlx_cu_wg_candidates(n->dtype, g->M, g->N, g->K, g->lda, g->ldb, t->in[0], t->in[1], cand, MAX_PLANS);
    for (int i = 0; i < nc; i++) {
        const cu_wg_plan *c = &cand[i];
        if (reuse && (c->bn != known[1] || c->split != known[2] || c->stages != known[3]))
            continue;
        s->wg = *c;
        s->use_wg = 1;
        float ms = reuse ? 0.0f : rlx_cu_time_captured(launch_mm_any, t, REPS);
        if (each && !reuse)
            fprintf(stderr, "[rlx cuda]   wgmma 128x%d split %d, %d stages: %.2f us\n", c->bn, c->split, c->stages,
                    ms * 1e3f);
        if (ms < wg_best) {
            wg_best = ms;
            fastest = *c;
        }
    }
    free(cand);
    if (wg_best < best)
        pick = fastest;
    s->use_wg = pick.split > 0;
    s->wg = pick;
    if (!forced && !reuse) {
        int chosen[4] = {s->use_wg, pick.bn, pick.split, pick.stages};
        rlx_cu_memo_add(&rlx_cu_dev->mm_wgmma, key, chosen);
    }
    if (rlx_cu_cfg.verbose && !reuse)
        fprintf(stderr,
                "[rlx cuda] matmul node %d %lldx%lldx%lld: path as chosen %.2f us, wgmma %s%.2f us ("
                "tile 128x%d, split %d, %d stages, B %s)\n",
                (int)t->id, (long long)g->M, (long long)g->N, (long long)g->K, before < 1e29f ? before * 1e3f : -1.0f,
                s->use_wg ? "(kept) " : "", wg_best < 1e29f ? wg_best * 1e3f : -1.0f, fastest.bn, fastest.split,
                fastest.stages, (t->in_fixed >> 1 & 1) ? "fixed" : "computed");
    if (forced && !s->use_wg)
        return rlx_cu_fail(t, RLX_ERR_DEVICE, "RLX_CUDA_MM_PATH=wgmma: no wgmma plan ran (%d candidates)", nc);
    return RLX_OK;
}

extern "C" void rlx_cuda_register_matmul(cu_kernel *tab)
{
    tab[RLX_OP_MATMUL] = (cu_kernel){k_matmul, matmul_scratch, NULL, prep_matmul, release_matmul};
    tab[RLX_OP_MATMUL_BIAS_ACT] = (cu_kernel){k_mm_act, matmul_scratch, NULL, prep_mm_act, release_matmul};
}
