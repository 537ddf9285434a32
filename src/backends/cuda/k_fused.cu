/* k_fused.cu - kernels for the inference batch norm and some of the
 * optimizer's fused ops: SwiGLU (two cuBLASLt GEMMs and one combining pass)
 * and elementwise chains (one kernel runs the whole small program per
 * element, registers in f32: written out as its own kernel by NVRTC where
 * it can be, else interpreted).  The other fused ops live with their
 * primitives: matmul_bias_act in k_matmul.cu, conv_bias_act in k_conv.cu,
 * add+norm and softmax(scale, mask) in k_reduce.cu, the attention block in
 * k_attn_block.cu. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_jit.h"

/* ------------------------------------------------------------ batch norm */

template <typename T>
__global__ void batch_norm_kernel(const T *x, const T *scale, const T *bias, const T *mean, const T *var, T *y,
                                  int64_t total, int64_t C, int64_t inner, float eps)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / inner) % C;
        float s = cu_tof<T>(scale[c]) * rsqrtf(cu_tof<T>(var[c]) + eps);
        float sh = cu_tof<T>(bias[c]) - cu_tof<T>(mean[c]) * s;
        y[i] = cu_fromf<T>(cu_tof<T>(x[i]) * s + sh);
    }
}

static rlx_status k_batch_norm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *xn = t->in_node[0];
    int64_t C = xn->shape.dims[1], planes = xn->shape.dims[0] * C;
    int64_t total = rlx_shape_numel(&xn->shape), inner = planes ? total / planes : 0;
    if (!total)
        return RLX_OK;
    float eps = (float)t->node->attrs.batch_norm.eps;
    CU_FLOAT_DISPATCH(xn->dtype, T,
                      cu_launch(batch_norm_kernel<T>, cu_blocks(total, 256), 256, 0, (const T *)t->in[0],
                                (const T *)t->in[1], (const T *)t->in[2], (const T *)t->in[3], (const T *)t->in[4],
                                (T *)t->out, total, C, inner, eps));
    return rlx_cu_check(t, "batch norm launch");
}

/* ---------------------------------------------------------------- SwiGLU */

typedef struct swiglu_state {
    cu_gemm g;
    int64_t total;
    size_t half; /* bytes of one f32 product in scratch */
} swiglu_state;

static size_t round256(size_t b) { return (b + 255) / 256 * 256; }

static rlx_status prep_swiglu(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    swiglu_state *s = (swiglu_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    t->state = s;
    const rlx_node_data *n = t->node, *x = t->in_node[0], *w = t->in_node[1];
    int64_t N = n->shape.dims[n->shape.ndim - 1], K = x->shape.dims[x->shape.ndim - 1];
    s->total = rlx_shape_numel(&n->shape);
    int64_t M = N ? s->total / N : 0;
    s->half = round256((size_t)s->total * rlx_dtype_size(n->dtype));
    if (!s->total || w->shape.ndim != 2)
        return w->shape.ndim != 2 ? rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "swiglu weights must be 2-d") : RLX_OK;
    return rlx_cu_gemm_plan(&s->g, n->dtype, 0, 0, M, N, K, K, N, N, 1, 0, 0, 0, CU_EPI_NONE, 256);
}

static void release_swiglu(rlx_thunk *t)
{
    swiglu_state *s = (swiglu_state *)t->state;
    rlx_cu_gemm_free(&s->g);
    free(s);
}

/* silu(x) * u, the exponent never positive; one exponential and one
 * division (the two-sided form cost three of each and bound the kernel) */
__device__ __forceinline__ float cu_swiglu_f(float x, float u)
{
    const float e = __expf(-fabsf(x)), si = (x >= 0 ? x : x * e) / (1.0f + e);
    return si * u;
}

template <typename T> __global__ void swiglu_combine(const T *g, const T *u, T *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = cu_fromf<T>(cu_swiglu_f(cu_tof<T>(g[i]), cu_tof<T>(u[i])));
}

/* The same over 16-byte vectors (n16 of them; every pointer 16-byte aligned). */
template <typename T> __global__ void swiglu_combine_v(const uint4 *g, const uint4 *u, uint4 *y, int64_t n16)
{
    cu_grid_wait();
    constexpr int V = 16 / sizeof(T);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n16; i += (int64_t)gridDim.x * blockDim.x) {
        uint4 a = g[i], b = u[i], o;
        const T *pa = (const T *)&a, *pb = (const T *)&b;
        T *po = (T *)&o;
#pragma unroll
        for (int k = 0; k < V; k++)
            po[k] = cu_fromf<T>(cu_swiglu_f(cu_tof<T>(pa[k]), cu_tof<T>(pb[k])));
        y[i] = o;
    }
}

static size_t swiglu_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    return 2 * round256((size_t)rlx_shape_numel(&n->shape) * rlx_dtype_size(n->dtype)) + CU_GEMM_WORKSPACE;
}

static rlx_status k_swiglu(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const swiglu_state *s = (const swiglu_state *)t->state;
    if (!s->total)
        return RLX_OK;
    char *G = (char *)t->scratch, *U = G + s->half, *ws = U + s->half;
    rlx_status st = rlx_cu_gemm_run(t, &s->g, t->in[0], t->in[1], G, NULL, ws);
    if (st == RLX_OK)
        st = rlx_cu_gemm_run(t, &s->g, t->in[0], t->in[2], U, NULL, ws);
    if (st != RLX_OK)
        return st;
    const int64_t per16 = 16 / (int64_t)rlx_dtype_size(t->node->dtype);
    if (s->total % per16 == 0 && (uintptr_t)t->out % 16 == 0) { /* G and U start 256-byte aligned */
        const int64_t n16 = s->total / per16;
        CU_FLOAT_DISPATCH(t->node->dtype, T,
                          cu_launch(swiglu_combine_v<T>, cu_blocks(n16, 256), 256, 0, (const uint4 *)G,
                                    (const uint4 *)U, (uint4 *)t->out, n16));
    } else {
        CU_FLOAT_DISPATCH(t->node->dtype, T,
                          cu_launch(swiglu_combine<T>, cu_blocks(s->total, 256), 256, 0, (const T *)G, (const T *)U,
                                    (T *)t->out, s->total));
    }
    return rlx_cu_check(t, "swiglu launch");
}

static bool swiglu_ok(const rlx_graph *g, const rlx_node_data *n)
{
    return rlx_cu_float_ok(g, n) && g->nodes[n->in[1]].shape.ndim == 2 && g->nodes[n->in[2]].shape.ndim == 2;
}

/* ------------------------------------------------------------------ glu */

/* glu: y = act(x[r, c]) * x[r, F + c] over rows of [gate | up]; V values
 * of one row a thread (V = 1, or a 16-byte vector where F and the
 * pointers allow). */
template <typename T, int V> __global__ void glu_kernel(const T *x, T *y, int64_t rows, int64_t F, int op)
{
    cu_grid_wait();
    const int64_t per_row = F / V, n = rows * per_row;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / per_row, c = (i - r * per_row) * V;
        const T *gate = x + r * 2 * F + c;
        struct alignas(V * sizeof(T)) vec {
            T t[V];
        };
        const vec a = *(const vec *)gate, b = *(const vec *)(gate + F);
        float g[V], o[V];
#pragma unroll
        for (int e = 0; e < V; e++)
            g[e] = cu_tof<T>(a.t[e]);
        cu_unary_fv<V>(op, g, o);
        vec out;
#pragma unroll
        for (int e = 0; e < V; e++)
            out.t[e] = cu_fromf<T>(o[e] * cu_tof<T>(b.t[e]));
        *(vec *)(y + r * F + c) = out;
    }
}

static rlx_status k_glu(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_shape *xs = &t->in_node[0]->shape;
    const int64_t F = xs->dims[xs->ndim - 1] / 2, rows = F ? rlx_shape_numel(xs) / (2 * F) : 0;
    if (!rows)
        return RLX_OK;
    const int op = rlx_act_op((rlx_act)t->node->attrs.glu.act);
    const int V = 16 / (int)rlx_dtype_size(t->node->dtype);
    const bool vec = F % V == 0 && (uintptr_t)t->in[0] % 16 == 0 && (uintptr_t)t->out % 16 == 0;
    if (vec)
        CU_FLOAT_DISPATCH(t->node->dtype, T,
                          cu_launch(glu_kernel<T, 16 / sizeof(T)>, cu_blocks(rows * F / V, 256), 256, 0,
                                    (const T *)t->in[0], (T *)t->out, rows, F, op));
    else
        CU_FLOAT_DISPATCH(t->node->dtype, T,
                          cu_launch(glu_kernel<T, 1>, cu_blocks(rows * F, 256), 256, 0, (const T *)t->in[0],
                                    (T *)t->out, rows, F, op));
    return rlx_cu_check(t, "glu launch");
}

/* ----------------------------------------------------- elementwise chain */

typedef struct ew_prog {
    int nin, nops, nd;
    int64_t total;
    int64_t dims[CU_MAX_DIMS];
    int64_t st[RLX_MAX_INPUTS][CU_MAX_DIMS];
    const void *in[RLX_MAX_INPUTS];
    uint8_t code[3 * RLX_EW_MAX_OPS];
} ew_prog;

/* FLAT: every input dense and of the output's shape (no index math). */
template <typename T, bool FLAT> __global__ void ew_chain_kernel(ew_prog p, T *y)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        float reg[RLX_MAX_INPUTS + RLX_EW_MAX_OPS];
        int64_t off[RLX_MAX_INPUTS];
        if (FLAT) {
            for (int k = 0; k < p.nin; k++)
                off[k] = i;
        } else {
            int64_t q = i;
            for (int k = 0; k < p.nin; k++)
                off[k] = 0;
            for (int d = p.nd - 1; d >= 0; d--) {
                int64_t ix = q % p.dims[d];
                q /= p.dims[d];
                for (int k = 0; k < p.nin; k++)
                    off[k] += ix * p.st[k][d];
            }
        }
        for (int k = 0; k < p.nin; k++)
            reg[k] = cu_tof<T>(((const T *)p.in[k])[off[k]]);
        for (int j = 0; j < p.nops; j++) {
            int op = p.code[3 * j], a = p.code[3 * j + 1], b = p.code[3 * j + 2];
            float v = (op >= RLX_OP_ADD) ? rlx_binary_f32(op, reg[a], reg[b], 0) : rlx_unary_f32(op, reg[a]);
            reg[p.nin + j] = v;
        }
        y[i] = cu_fromf<T>(reg[p.nin + p.nops - 1]);
    }
}

/* Small flat programs (<= 4 inputs, <= 8 instructions, every input dense
 * and of the output's shape): the register file is unrolled so it stays
 * in registers; results live at 4 + j. */
#define EWS_IN 4
#define EWS_OPS 8

template <typename T> __global__ void ew_chain_small(ew_prog p, T *y)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        float r[EWS_IN + EWS_OPS];
#pragma unroll
        for (int k = 0; k < EWS_IN; k++)
            r[k] = k < p.nin ? cu_tof<T>(((const T *)p.in[k])[i]) : 0.0f;
#pragma unroll
        for (int j = 0; j < EWS_OPS; j++) {
            r[EWS_IN + j] = 0.0f;
            if (j < p.nops) {
                int op = p.code[3 * j], a = p.code[3 * j + 1], b = p.code[3 * j + 2];
                float va = 0.0f, vb = 0.0f;
#pragma unroll
                for (int q = 0; q < EWS_IN + j; q++) {
                    va = q == a ? r[q] : va;
                    vb = q == b ? r[q] : vb;
                }
                r[EWS_IN + j] = (op >= RLX_OP_ADD) ? rlx_binary_f32(op, va, vb, 0) : rlx_unary_f32(op, va);
            }
        }
        float out = 0.0f;
#pragma unroll
        for (int j = 0; j < EWS_OPS; j++)
            out = j == p.nops - 1 ? r[EWS_IN + j] : out;
        y[i] = cu_fromf<T>(out);
    }
}

/* Vectorised small programs: each thread runs the program once on V
 * neighbouring elements (one 16-byte load per input), so the dispatch on
 * the opcode and on the register numbers, uniform across the grid, is paid
 * once per V elements instead of once per element.  Inputs must be
 * 16-byte aligned and, along the innermost collapsed dim (a multiple of V),
 * dense (stride 1) or broadcast (stride 0); outer dims go through the
 * usual stride walk once per vector. */
template <int V> struct ew_vec {
    float v[V];
};

/* r[q] for a q known only at run time (uniform): a switch with constant
 * indices keeps the register file in registers.  R = 4 + NO registers:
 * the kernel is instantiated for programs of up to 2, 4 and 8
 * instructions, since the register file's size sets the occupancy. */
template <int V, int R> __device__ __forceinline__ void ew_pick(const ew_vec<V> (&r)[R], int q, ew_vec<V> &o)
{
    switch (q) {
        // clang-format off
#define EW_CASE(n) case n: o = r[n < R ? n : 0]; break;
        EW_CASE(0) EW_CASE(1) EW_CASE(2) EW_CASE(3) EW_CASE(4) EW_CASE(5)
        EW_CASE(6) EW_CASE(7) EW_CASE(8) EW_CASE(9) EW_CASE(10) EW_CASE(11)
#undef EW_CASE
        default: break;
        // clang-format on
    }
}

template <typename T, int V> __device__ __forceinline__ void ew_load(const T *p, int stride, ew_vec<V> &o)
{
    if (stride == 0) {
        float x = cu_tof<T>(p[0]);
#pragma unroll
        for (int e = 0; e < V; e++)
            o.v[e] = x;
        return;
    }
    union {
        uint4 u[V * sizeof(T) / 16];
        T t[V];
    } b;
#pragma unroll
    for (int w = 0; w < (int)(V * sizeof(T) / 16); w++)
        b.u[w] = ((const uint4 *)p)[w];
#pragma unroll
    for (int e = 0; e < V; e++)
        o.v[e] = cu_tof<T>(b.t[e]);
}

/* Loads vector i of every input: the stride walk gives the offset of its
 * first element (the innermost index from i % inner; one dim needs no
 * division). */
template <typename T, int V, int N>
__device__ __forceinline__ void ew_load_inputs(const ew_prog &p, int dense_mask, int64_t i, int64_t inner,
                                               ew_vec<V> (&in)[N])
{
    int64_t off[EWS_IN];
    int64_t q = p.nd == 1 ? 0 : i / inner, first = p.nd == 1 ? i * V : (i % inner) * V;
#pragma unroll
    for (int k = 0; k < EWS_IN; k++)
        off[k] = k < p.nin ? first * p.st[k][p.nd - 1] : 0;
    for (int d = p.nd - 2; d >= 0; d--) {
        int64_t ix = q % p.dims[d];
        q /= p.dims[d];
#pragma unroll
        for (int k = 0; k < EWS_IN; k++)
            if (k < p.nin)
                off[k] += ix * p.st[k][d];
    }
#pragma unroll
    for (int k = 0; k < EWS_IN; k++)
        if (k < p.nin)
            ew_load<T, V>((const T *)p.in[k] + off[k], (dense_mask >> k) & 1, in[k]);
}

template <typename T, int V> __device__ __forceinline__ void ew_store(T *y, int64_t i, const ew_vec<V> &o)
{
    union {
        uint4 u[V * sizeof(T) / 16];
        T t[V];
    } b;
#pragma unroll
    for (int e = 0; e < V; e++)
        b.t[e] = cu_fromf<T>(o.v[e]);
#pragma unroll
    for (int w = 0; w < (int)(V * sizeof(T) / 16); w++)
        ((uint4 *)(y + i * V))[w] = b.u[w];
}

template <typename T, int V, int NO> __global__ void ew_chain_vec(ew_prog p, int inner_stride_mask, T *y)
{
    cu_grid_wait();
    constexpr int R = EWS_IN + NO;
    const int64_t nvec = p.total / V, inner = p.dims[p.nd - 1] / V;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
        ew_vec<V> r[R];
        ew_load_inputs<T, V>(p, inner_stride_mask, i, inner, r);
#pragma unroll
        for (int j = 0; j < NO; j++) {
            if (j >= p.nops)
                break;
            const int op = p.code[3 * j];
            ew_vec<V> a, b;
            ew_pick<V, R>(r, p.code[3 * j + 1], a);
            if (op >= RLX_OP_ADD) {
                ew_pick<V, R>(r, p.code[3 * j + 2], b);
                cu_binary_fv<V>(op, a.v, b.v, r[EWS_IN + j].v, 0);
            } else {
                cu_unary_fv<V>(op, a.v, r[EWS_IN + j].v);
            }
        }
        ew_vec<V> o;
        ew_pick<V, R>(r, EWS_IN + p.nops - 1, o);
        ew_store<T, V>(y, i, o);
    }
}

/* Long programs (more than EWR_FROM instructions, or more inputs than
 * ew_chain_vec takes: a GELU's or SwiGLU's backward with its scalars), on
 * the vector path with at most two collapsed dims.  Registers are assigned by liveness when the
 * thunk is prepared: an input is loaded into a register just before its
 * first use, and a value's register is free again after its last read, so
 * the register file stays EWR_REGS vectors however long the program (the
 * per-element interpreter keeps its file in local memory).  Up to EWS_IN
 * inputs dense along the vector (pre[m]) are loaded into registers m
 * before the program starts, so that their loads are in flight together
 * (a load inside the program waits for its data before the next
 * instruction).  Instruction j: op[j] (EWR_LOAD: input a[j]), operands
 * a[j], b[j], result register d[j]. */
#define EWR_REGS 12
#define EWR_FROM 4
#define EWR_LOAD 255
#define EWR_MAX (RLX_MAX_INPUTS + RLX_EW_MAX_OPS)

typedef struct ew_regs {
    int n, out, npre;
    uint8_t pre[EWS_IN];
    uint8_t op[EWR_MAX], a[EWR_MAX], b[EWR_MAX], d[EWR_MAX];
} ew_regs;

/* Input k's vector at (outer, first): see ew_chain_regs. */
template <typename T, int V>
__device__ __forceinline__ void ew_load_at(const ew_prog &p, int k, int inner_stride_mask, int64_t outer, int64_t first,
                                           ew_vec<V> &o)
{
    const int64_t off = first * p.st[k][p.nd - 1] + (p.nd == 1 ? 0 : outer * p.st[k][0]);
    ew_load<T, V>((const T *)p.in[k] + off, (inner_stride_mask >> k) & 1, o);
}

/* r[q] = v for a q known only at run time (uniform): see ew_pick */
template <int V, int R> __device__ __forceinline__ void ew_put(ew_vec<V> (&r)[R], int q, const ew_vec<V> &v)
{
    switch (q) {
        // clang-format off
#define EW_CASE(n) case n: r[n < R ? n : 0] = v; break;
        EW_CASE(0) EW_CASE(1) EW_CASE(2) EW_CASE(3) EW_CASE(4) EW_CASE(5)
        EW_CASE(6) EW_CASE(7) EW_CASE(8) EW_CASE(9) EW_CASE(10) EW_CASE(11)
#undef EW_CASE
        default: break;
        // clang-format on
    }
}

template <typename T, int V> __global__ void ew_chain_regs(ew_prog p, ew_regs rc, int inner_stride_mask, T *y)
{
    cu_grid_wait();
    const int64_t nvec = p.total / V, inner = p.dims[p.nd - 1] / V;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
        /* vector i: row `outer` of the outer dim (two dims), its first element `first` along the inner one */
        const int64_t outer = p.nd == 1 ? 0 : i / inner, first = p.nd == 1 ? i * V : (i % inner) * V;
        ew_vec<V> r[EWR_REGS];
#pragma unroll
        for (int m = 0; m < EWS_IN; m++)
            if (m < rc.npre)
                ew_load_at<T, V>(p, rc.pre[m], inner_stride_mask, outer, first, r[m]);
        for (int j = 0; j < rc.n; j++) {
            const int op = rc.op[j];
            ew_vec<V> o;
            if (op == EWR_LOAD) {
                ew_load_at<T, V>(p, rc.a[j], inner_stride_mask, outer, first, o);
            } else {
                ew_vec<V> a, b;
                ew_pick<V, EWR_REGS>(r, rc.a[j], a);
                if (op >= RLX_OP_ADD) {
                    ew_pick<V, EWR_REGS>(r, rc.b[j], b);
                    cu_binary_fv<V>(op, a.v, b.v, o.v, 0);
                } else {
                    cu_unary_fv<V>(op, a.v, o.v);
                }
            }
            ew_put<V, EWR_REGS>(r, rc.d[j], o);
        }
        ew_vec<V> o;
        ew_pick<V, EWR_REGS>(r, rc.out, o);
        ew_store<T, V>(y, i, o);
    }
}

/* Operands instruction op reads: two for the binary ops, else one. */
static inline int ew_nargs(int op) { return op >= RLX_OP_ADD ? 2 : 1; }

/* Fills rc for program p (values numbered as in ew_prog: inputs 0..nin-1,
 * results nin+j), with the first `dense` inputs dense along the vector
 * (bit k of dense_mask) loaded ahead; false if more than EWR_REGS values
 * are live at once. */
static bool ew_assign_regs(const ew_prog *p, int dense_mask, int ahead, ew_regs *rc)
{
    const int nv = p->nin + p->nops;
    int last[EWR_MAX], reg[EWR_MAX];
    bool busy[EWR_REGS] = {false};
    for (int v = 0; v < nv; v++)
        last[v] = -1, reg[v] = -1;
    for (int j = 0; j < p->nops; j++) {
        last[p->code[3 * j + 1]] = j;
        if (p->code[3 * j] >= RLX_OP_ADD)
            last[p->code[3 * j + 2]] = j;
    }
    last[nv - 1] = p->nops; /* the result is read at the end */
    memset(rc, 0, sizeof *rc);
    for (int k = 0; k < p->nin && rc->npre < ahead; k++)
        if (((dense_mask >> k) & 1) && last[k] >= 0) {
            reg[k] = rc->npre;
            busy[rc->npre] = true;
            rc->pre[rc->npre++] = (uint8_t)k;
        }
    int n = 0;
    for (int j = 0; j < p->nops; j++) {
        const int op = p->code[3 * j], nargs = ew_nargs(op);
        for (int k = 1; k <= nargs; k++) {
            const int v = p->code[3 * j + k];
            if (reg[v] >= 0)
                continue;
            if (v >= p->nin)
                return false; /* a result read before it is computed: not a program of ours */
            int q = 0;
            while (q < EWR_REGS && busy[q])
                q++;
            if (q == EWR_REGS)
                return false;
            busy[q] = true;
            reg[v] = q;
            rc->op[n] = EWR_LOAD, rc->a[n] = (uint8_t)v, rc->d[n++] = (uint8_t)q;
        }
        const int a = p->code[3 * j + 1], b = p->code[3 * j + 2];
        rc->op[n] = (uint8_t)op, rc->a[n] = (uint8_t)reg[a], rc->b[n] = (uint8_t)(nargs == 2 ? reg[b] : 0);
        /* operands read for the last time free their registers before the result takes one */
        if (last[a] == j)
            busy[reg[a]] = false;
        if (nargs == 2 && last[b] == j)
            busy[reg[b]] = false;
        int q = 0;
        while (q < EWR_REGS && busy[q])
            q++;
        if (q == EWR_REGS)
            return false;
        reg[p->nin + j] = q;
        busy[q] = last[p->nin + j] >= 0; /* a result nobody reads frees its register at once */
        rc->d[n++] = (uint8_t)q;
    }
    rc->n = n;
    rc->out = reg[nv - 1];
    return true;
}

/* Linear programs, the common case (residual add + ReLU, embedding sums):
 * instruction 0 reads inputs only, every later one reads the previous
 * result and at most one input.  One accumulator instead of a register
 * file, so few registers and full occupancy.  lin[j] = {op, input or -1,
 * 1 if the accumulator is the right-hand operand}. */
typedef struct ew_lin {
    int n;
    int8_t op[EWS_OPS], first[EWS_OPS], other[EWS_OPS], rev[EWS_OPS];
} ew_lin;

template <int V> __device__ __forceinline__ void ew_pick_in(const ew_vec<V> (&in)[EWS_IN], int k, ew_vec<V> &o)
{
    switch (k) {
    case 0: o = in[0]; break;
    case 1: o = in[1]; break;
    case 2: o = in[2]; break;
    default: o = in[3]; break;
    }
}

__device__ __forceinline__ float ew_cheap(int op, float x, float y)
{
    switch (op) {
    case RLX_OP_ADD: return x + y;
    case RLX_OP_SUB: return x - y;
    case RLX_OP_MUL: return x * y;
    case RLX_OP_MAX: return (x != x || y != y) ? rlx_nan_f() : fmaxf(x, y);
    case RLX_OP_MIN: return (x != x || y != y) ? rlx_nan_f() : fminf(x, y);
    case RLX_OP_RELU: return rlx_relu_f(x);
    case RLX_OP_NEG: return -x;
    default: return fabsf(x); /* RLX_OP_ABS */
    }
}

/* ew_cheap on V values, dispatched once for all V (see cu_unary_fv). */
template <int V> __device__ __forceinline__ void ew_cheap_v(int op, const float *x, const float *y, float *o)
{
    switch (op) {
        // clang-format off
#define EW_CHEAP_CASE(c) \
    case c: _Pragma("unroll") for (int e = 0; e < V; e++) o[e] = ew_cheap(c, x[e], y[e]); return;
        EW_CHEAP_CASE(RLX_OP_ADD) EW_CHEAP_CASE(RLX_OP_SUB) EW_CHEAP_CASE(RLX_OP_MUL)
        EW_CHEAP_CASE(RLX_OP_MAX) EW_CHEAP_CASE(RLX_OP_MIN) EW_CHEAP_CASE(RLX_OP_RELU) EW_CHEAP_CASE(RLX_OP_NEG)
#undef EW_CHEAP_CASE
        default:
#pragma unroll
            for (int e = 0; e < V; e++) o[e] = ew_cheap(RLX_OP_ABS, x[e], y[e]);
        // clang-format on
    }
}

template <typename T, int V> __global__ void ew_chain_lin(ew_prog p, ew_lin lin, int inner_stride_mask, T *y)
{
    cu_grid_wait();
    const int64_t nvec = p.total / V, inner = p.dims[p.nd - 1] / V;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nvec; i += (int64_t)gridDim.x * blockDim.x) {
        ew_vec<V> in[EWS_IN];
        ew_load_inputs<T, V>(p, inner_stride_mask, i, inner, in);
        ew_vec<V> acc;
        ew_pick_in<V>(in, lin.first[0], acc);
        for (int j = 0; j < lin.n; j++) {
            const int op = lin.op[j];
            ew_vec<V> b;
            if (lin.other[j] >= 0)
                ew_pick_in<V>(in, lin.other[j], b);
            float l[V], r[V];
#pragma unroll
            for (int e = 0; e < V; e++) {
                float x = acc.v[e], y = lin.other[j] >= 0 ? b.v[e] : 0.0f;
                l[e] = lin.rev[j] ? y : x;
                r[e] = lin.rev[j] ? x : y;
            }
            ew_cheap_v<V>(op, l, r, acc.v);
        }
        ew_store<T, V>(y, i, acc);
    }
}

/* The instructions ew_chain_lin runs: a few cheap ones, so the kernel
 * stays small (no transcendental code inlined eight times over). */
static bool ew_is_cheap(int op)
{
    return op == RLX_OP_ADD || op == RLX_OP_SUB || op == RLX_OP_MUL || op == RLX_OP_MAX || op == RLX_OP_MIN ||
           op == RLX_OP_RELU || op == RLX_OP_NEG || op == RLX_OP_ABS;
}

/* Fills lin if the program (registers numbered as in ew_prog: inputs
 * 0..nin-1, results nin+j) is linear and cheap. */
static bool ew_linear(const ew_prog *p, ew_lin *lin)
{
    memset(lin, 0, sizeof *lin);
    lin->n = p->nops;
    for (int j = 0; j < p->nops; j++) {
        int op = p->code[3 * j], a = p->code[3 * j + 1], b = p->code[3 * j + 2];
        bool unary = op < RLX_OP_ADD;
        int prev = j == 0 ? -1 : p->nin + j - 1;
        lin->op[j] = (int8_t)op;
        lin->other[j] = -1;
        if (!ew_is_cheap(op))
            return false;
        if (j == 0) {
            /* start from operand a (an input); a binary op then takes b */
            lin->first[0] = (int8_t)a;
            if (a >= p->nin)
                return false;
            if (!unary) {
                if (b >= p->nin)
                    return false;
                lin->other[0] = (int8_t)b;
            }
            continue;
        }
        if (unary) {
            if (a != prev)
                return false;
            continue;
        }
        if (a == prev && b < p->nin) {
            lin->other[j] = (int8_t)b;
        } else if (b == prev && a < p->nin) {
            lin->other[j] = (int8_t)a;
            lin->rev[j] = 1; /* op(input, acc) */
        } else {
            return false;
        }
        if (lin->rev[j] && (op == RLX_OP_ADD || op == RLX_OP_MUL))
            lin->rev[j] = 0; /* commutative */
    }
    return true;
}

/* ---------------------------------- chains as generated kernels (NVRTC)
 * The interpreters above pay for every instruction a dispatch over all the
 * ops, whose code is inlined V times over: a SwiGLU backward's 7
 * instructions ran at 1/18 of the memory's speed.  A chain on the vector
 * path (at most two collapsed dims) is instead written out as a kernel of
 * its own when the thunk is prepared: its inputs' loads, then one line per
 * instruction calling op_math.h's float form with the opcode a constant
 * (so the switch folds away), then the store.  NVRTC builds it once per
 * distinct source and device (jit.cu); RLX_CUDA_JIT=0 keeps the
 * interpreters. */

/* The generated kernel's one argument, by value; EW_JIT_ARGS is the same
 * definition as text for the generated source. */
typedef struct ew_jit_args {
    const void *in[RLX_MAX_INPUTS];
    long long outer[RLX_MAX_INPUTS]; /* input k's stride along the outer dim, in elements */
    void *y;
    long long nvec, inner; /* vectors in all; vectors along the inner dim */
} ew_jit_args;
#define EW_JIT_STR_(x) #x
#define EW_JIT_STR(x) EW_JIT_STR_(x)
#define EW_JIT_ARGS                                                                                     \
    "struct ew_jit_args { const void *in[" EW_JIT_STR(RLX_MAX_INPUTS) "]; long long outer[" EW_JIT_STR( \
        RLX_MAX_INPUTS) "]; void *y; long long nvec, inner; };\n"

typedef struct ew_src {
    char *s;
    size_t n, cap;
    bool failed;
} ew_src;

static void __attribute__((format(printf, 2, 3))) ew_emit(ew_src *b, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !b->failed; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = true;
        } else if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        } else {
            size_t cap = (b->cap + (size_t)k + 1) * 2;
            char *grown = (char *)realloc(b->s, cap);
            if (!grown)
                b->failed = true;
            else
                b->s = grown, b->cap = cap;
        }
    }
}

/* The source of program p on the vector path: V elements of dtype dt a
 * thread; input k dense along the inner dim where bit k of dense_mask is
 * set, else one value per vector.  NULL when out of memory. */
static char *ew_jit_source(const ew_prog *p, rlx_dtype dt, int dense_mask)
{
    ew_src b = {};
    const int V = rlx_dtype_size(dt) == 4 ? 4 : 8;
#define EW_JIT_DEFINE(o) ew_emit(&b, "#define " #o " %d\n", (int)(o));
    RLX_FLOAT_UNARY_OPS(EW_JIT_DEFINE)
    RLX_FLOAT_BINARY_OPS(EW_JIT_DEFINE)
    EW_JIT_DEFINE(RLX_ACT_RELU)
    EW_JIT_DEFINE(RLX_ACT_GELU)
    EW_JIT_DEFINE(RLX_ACT_GELU_TANH)
    EW_JIT_DEFINE(RLX_ACT_SILU)
#undef EW_JIT_DEFINE
    ew_emit(&b, "#include \"ir/op_math.h\"\n" EW_JIT_ARGS);
    /* loads and stores as op_math's callers convert (cu_tof / cu_fromf) */
    if (dt == RLX_F32)
        ew_emit(&b, "typedef float ew_t;\n"
                    "__device__ __forceinline__ float ew_ld(float v) { return v; }\n"
                    "__device__ __forceinline__ float ew_st(float v) { return v; }\n");
    else if (dt == RLX_BF16)
        ew_emit(&b, "typedef unsigned short ew_t;\n"
                    "__device__ __forceinline__ float ew_ld(unsigned short h) { return __uint_as_float((unsigned)h << "
                    "16); }\n"
                    "__device__ __forceinline__ unsigned short ew_st(float f) { unsigned short h; "
                    "asm(\"cvt.rn.bf16.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n");
    else
        ew_emit(&b, "typedef unsigned short ew_t;\n"
                    "__device__ __forceinline__ float ew_ld(unsigned short h) { float f; "
                    "asm(\"cvt.f32.f16 %%0, %%1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n"
                    "__device__ __forceinline__ unsigned short ew_st(float f) { unsigned short h; "
                    "asm(\"cvt.rn.f16.f32 %%0, %%1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n");
    ew_emit(&b,
            "union ew_vec { uint4 u; ew_t t[%d]; };\n"
            "extern \"C\" __global__ void __launch_bounds__(256) rlx_ew(ew_jit_args a)\n{\n"
            "#if __CUDA_ARCH__ >= 900\n"
            "    asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
            "    asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
            "#endif\n"
            "    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.nvec;\n"
            "         i += (long long)gridDim.x * blockDim.x) {\n",
            V);
    if (p->nd == 1)
        ew_emit(&b, "        const long long outer = 0, first = i * %d;\n", V);
    else
        ew_emit(&b, "        const long long outer = i / a.inner, first = (i - outer * a.inner) * %d;\n", V);
    bool used[RLX_MAX_INPUTS] = {false};
    for (int j = 0; j < p->nops; j++)
        for (int k = 1; k <= ew_nargs(p->code[3 * j]); k++)
            if (p->code[3 * j + k] < p->nin)
                used[p->code[3 * j + k]] = true;
    for (int k = 0; k < p->nin; k++) {
        if (!used[k])
            continue;
        if ((dense_mask >> k) & 1)
            ew_emit(&b,
                    "        float v%d[%d];\n        {\n"
                    "            ew_vec q;\n"
                    "            q.u = *(const uint4 *)((const ew_t *)a.in[%d] + first + outer * a.outer[%d]);\n"
                    "#pragma unroll\n"
                    "            for (int e = 0; e < %d; e++) v%d[e] = ew_ld(q.t[e]);\n        }\n",
                    k, V, k, k, V, k);
        else
            ew_emit(&b,
                    "        float v%d[%d];\n        {\n"
                    "            const float x = ew_ld(((const ew_t *)a.in[%d])[outer * a.outer[%d]]);\n"
                    "#pragma unroll\n"
                    "            for (int e = 0; e < %d; e++) v%d[e] = x;\n        }\n",
                    k, V, k, k, V, k);
    }
    for (int j = 0; j < p->nops; j++) {
        const int op = p->code[3 * j], r = p->nin + j, x = p->code[3 * j + 1], y = p->code[3 * j + 2];
        ew_emit(&b, "        float v%d[%d];\n#pragma unroll\n        for (int e = 0; e < %d; e++) ", r, V, V);
        if (op >= RLX_OP_ADD)
            ew_emit(&b, "v%d[e] = rlx_binary_f32(%d, v%d[e], v%d[e], 0);\n", r, op, x, y);
        else
            ew_emit(&b, "v%d[e] = rlx_unary_f32(%d, v%d[e]);\n", r, op, x);
    }
    ew_emit(&b,
            "        ew_vec o;\n#pragma unroll\n"
            "        for (int e = 0; e < %d; e++) o.t[e] = ew_st(v%d[e]);\n"
            "        *(uint4 *)((ew_t *)a.y + i * %d) = o.u;\n    }\n}\n",
            V, p->nin + p->nops - 1, V);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* Whether a program's every instruction reads values already there (the
 * interpreters assume as much; a generated kernel would not compile). */
static bool ew_well_formed(const ew_prog *p)
{
    for (int j = 0; j < p->nops; j++)
        for (int k = 1; k <= ew_nargs(p->code[3 * j]); k++)
            if (p->code[3 * j + k] >= p->nin + j)
                return false;
    return p->nops > 0;
}

/* Builds, without a device, generated chains that use every float op of
 * op_math.h in each dtype for sm_<arch>: the unary ops one after another
 * on a dense input, the binary ops between the running value and a
 * broadcast one (two collapsed dims; f32 also one).  Returns the kernels
 * built, -1 where NVRTC is not found, -2 on a failure (msg says which). */
extern "C" int rlx_cu_chain_jit_selftest(int arch, char *msg, size_t n)
{
#define EW_SELF_OP(o) o,
    static const int unary[] = {RLX_FLOAT_UNARY_OPS(EW_SELF_OP)}, binary[] = {RLX_FLOAT_BINARY_OPS(EW_SELF_OP)};
#undef EW_SELF_OP
    const rlx_dtype dts[3] = {RLX_F32, RLX_BF16, RLX_F16};
    int built = 0;
    for (int d = 0; d < 3; d++)
        for (int kind = 0; kind < 2; kind++)
            for (int nd = 2; nd >= (dts[d] == RLX_F32 ? 1 : 2); nd--) {
                ew_prog p = {};
                p.nin = 2;
                p.nd = nd;
                const int *ops = kind ? binary : unary;
                const int count = kind ? (int)(sizeof binary / sizeof *binary) : (int)(sizeof unary / sizeof *unary);
                for (int j = 0; j < count && j < RLX_EW_MAX_OPS; j++) {
                    const int prev = j ? p.nin + j - 1 : 0; /* input 0, then the running value */
                    p.code[3 * j] = (uint8_t)ops[j];
                    p.code[3 * j + 1] = (uint8_t)prev;
                    p.code[3 * j + 2] = 1; /* the broadcast input */
                    p.nops = j + 1;
                }
                char *src = ew_jit_source(&p, dts[d], 0x1);
                if (!src) {
                    snprintf(msg, n, "out of memory writing a chain's source");
                    return -2;
                }
                char log[2048] = "";
                const int r = rlx_cu_jit_try_build(src, arch, log, sizeof log);
                free(src);
                if (r < 0) {
                    snprintf(msg, n, "NVRTC (libnvrtc.so) not found");
                    return -1;
                }
                if (r == 0) {
                    snprintf(msg, n, "%s %s chain (%d collapsed dims) for sm_%d: %s", rlx_dtype_name(dts[d]),
                             kind ? "binary" : "unary", nd, arch, log);
                    return -2;
                }
                built++;
            }
    snprintf(msg, n, "%d generated chain kernels built for sm_%d", built, arch);
    return built;
}

typedef struct ew_state {
    ew_prog prog;
    ew_prog small; /* the program renumbered for ew_chain_small and ew_chain_vec */
    int use_small;
    int use_vec, inner_stride_mask; /* ew_chain_vec; bit k: input k dense along the innermost dim */
    int use_lin;                    /* ew_chain_lin, a linear program on the vector path */
    ew_lin lin;
    int use_regs; /* ew_chain_regs, a long program on the vector path */
    ew_regs regs;
    cu_jit *jit; /* the program as a generated kernel (NVRTC), its argument */
    ew_jit_args jit_args;
} ew_state;

static rlx_status prep_ew(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    ew_state *s = (ew_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    t->state = s;
    const rlx_node_data *n = t->node;
    ew_prog *p = &s->prog;
    p->nin = n->n_in;
    p->nops = n->attrs.ew.n_ops;
    memcpy(p->code, n->attrs.ew.code, sizeof p->code);
    /* collapse dims where every input is contiguous across them */
    int64_t st[RLX_MAX_INPUTS][CU_MAX_DIMS];
    for (int k = 0; k < p->nin; k++)
        rlx_shape_broadcast_strides(&t->in_node[k]->shape, &n->shape, st[k]);
    p->total = 1;
    int nd = 0;
    for (int i = 0; i < n->shape.ndim; i++) {
        int64_t d = n->shape.dims[i];
        p->total *= d;
        if (d == 1)
            continue;
        bool merge = nd > 0;
        for (int k = 0; k < p->nin && merge; k++)
            if (p->st[k][nd - 1] != d * st[k][i])
                merge = false;
        if (merge) {
            p->dims[nd - 1] *= d;
            for (int k = 0; k < p->nin; k++)
                p->st[k][nd - 1] = st[k][i];
            continue;
        }
        p->dims[nd] = d;
        for (int k = 0; k < p->nin; k++)
            p->st[k][nd] = st[k][i];
        nd++;
    }
    p->nd = nd;
    for (int k = 0; k < p->nin; k++)
        p->in[k] = t->in[k];
    bool flat = p->nd <= 1;
    for (int k = 0; k < p->nin && flat; k++)
        flat = p->nd == 0 || p->st[k][0] == 1;
    /* the vector path: V elements of the innermost dim per thread; an
     * input dense along it is read in 16-byte loads (aligned), one
     * broadcast along it is read once per vector (anywhere) */
    int V = rlx_dtype_size(n->dtype) == 4 ? 4 : 8;
    bool vec = p->nops > 0 && p->nd >= 1 && p->dims[p->nd - 1] % V == 0 && ((uintptr_t)t->out & 15) == 0;
    for (int k = 0; k < p->nin && vec; k++) {
        int64_t in_st = p->st[k][p->nd - 1];
        vec = in_st == 0 || (in_st == 1 && ((uintptr_t)t->in[k] & 15) == 0);
        for (int d = 0; d < p->nd - 1 && vec && in_st; d++)
            vec = p->st[k][d] % V == 0; /* every vector starts 16-byte aligned */
        s->inner_stride_mask |= (in_st == 1) << k;
    }
    const bool fits_vec = p->nin <= EWS_IN && p->nops <= EWS_OPS && p->nops > 0;
    if (fits_vec) {
        s->small = *p;
        for (int j = 0; j < p->nops; j++)
            for (int k = 1; k <= 2; k++) {
                int r = p->code[3 * j + k];
                s->small.code[3 * j + k] = (uint8_t)(r < p->nin ? r : EWS_IN + (r - p->nin));
            }
        s->use_small = flat;
        s->use_vec = vec;
        /* RLX_CUDA_EW_LIN=0: keep linear programs on the general vector path */
        s->use_lin = vec && ew_linear(p, &s->lin) && rlx_cu_cfg.cuda_ew_lin;
    }
    /* Programs the vector kernels cannot take, and those of more than
     * EWR_FROM instructions, take the long-program kernel where it
     * applies: its one copy of the op dispatch ran a SwiGLU backward's 7
     * instructions in 0.63 ms against 0.90 for the vector kernel unrolled
     * 8 times (H200, [8, 512, 3072] bf16). */
    if (vec && !s->use_lin && p->nd <= 2 && (p->nops > EWR_FROM || !fits_vec))
        /* inputs loaded ahead where the registers allow, else each at its first use */
        s->use_regs = ew_assign_regs(p, s->inner_stride_mask, EWS_IN, &s->regs) ||
                      ew_assign_regs(p, s->inner_stride_mask, 0, &s->regs);
    /* every program of the vector path but the linear ones (already at
     * memory speed) as a kernel of its own */
    if (vec && !s->use_lin && p->nd <= 2 && rlx_cu_cfg.cuda_jit && ew_well_formed(p)) {
        char *src = ew_jit_source(p, n->dtype, s->inner_stride_mask);
        s->jit = src ? rlx_cu_jit_get(src, "rlx_ew") : NULL;
        free(src);
        if (s->jit) {
            ew_jit_args *a = &s->jit_args;
            for (int k = 0; k < p->nin; k++)
                a->in[k] = p->in[k], a->outer[k] = p->nd == 2 ? p->st[k][0] : 0;
            a->y = t->out;
            a->nvec = p->total / V;
            a->inner = p->dims[p->nd - 1] / V;
        }
        if (rlx_cu_cfg.verbose)
            fprintf(stderr, "[rlx cuda] elementwise chain node %d (%d instructions): %s\n", (int)t->id, p->nops,
                    s->jit ? "generated kernel (NVRTC)" : "interpreted (no generated kernel)");
    }
    return RLX_OK;
}

static void release_ew(rlx_thunk *t)
{
    ew_state *s = (ew_state *)t->state;
    if (s)
        rlx_cu_jit_put(s->jit);
    free(s);
}

static rlx_status k_ew(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const ew_state *s = (const ew_state *)t->state;
    if (!s->prog.total)
        return RLX_OK;
    bool flat = s->prog.nd <= 1;
    for (int k = 0; k < s->prog.nin && flat; k++)
        flat = s->prog.nd == 0 || s->prog.st[k][0] == 1;
/* Kernel K<T, V> (V: 4 floats or 8 16-bit values a vector) over the
 * output's vectors, its leading arguments the rest. */
#define EW_VECTORS_LAUNCH(K, ...)                                                                          \
    do {                                                                                                   \
        const bool f32_ = rlx_dtype_size(t->node->dtype) == 4;                                             \
        const int blocks_ = cu_blocks(s->prog.total / (f32_ ? 4 : 8), 256);                                \
        if (f32_)                                                                                          \
            cu_launch(K<float, 4>, blocks_, 256, 0, __VA_ARGS__, s->inner_stride_mask, (float *)t->out);   \
        else if (t->node->dtype == RLX_F16)                                                                \
            cu_launch(K<__half, 8>, blocks_, 256, 0, __VA_ARGS__, s->inner_stride_mask, (__half *)t->out); \
        else                                                                                               \
            cu_launch(K<__nv_bfloat16, 8>, blocks_, 256, 0, __VA_ARGS__, s->inner_stride_mask,             \
                      (__nv_bfloat16 *)t->out);                                                            \
    } while (0)
    if (s->jit) {
        ew_jit_args a = s->jit_args;
        rlx_cu_jit_launch(s->jit, (unsigned)cu_blocks(a.nvec, 256), 256, &a);
    } else if (s->use_lin) {
        EW_VECTORS_LAUNCH(ew_chain_lin, s->small, s->lin);
    } else if (s->use_regs) {
        EW_VECTORS_LAUNCH(ew_chain_regs, s->prog, s->regs);
    } else if (s->use_vec) {
        int V = rlx_dtype_size(t->node->dtype) == 4 ? 4 : 8, nops = s->prog.nops;
        int64_t nvec = s->prog.total / V;
        int blocks = cu_blocks(nvec, 256);
#define EWV_LAUNCH(T, VV, NO) \
    cu_launch(ew_chain_vec<T, VV, NO>, blocks, 256, 0, s->small, s->inner_stride_mask, (T *)t->out)
#define EWV_SIZES(T, VV)          \
    do {                          \
        if (nops <= 2)            \
            EWV_LAUNCH(T, VV, 2); \
        else if (nops <= 4)       \
            EWV_LAUNCH(T, VV, 4); \
        else                      \
            EWV_LAUNCH(T, VV, 8); \
    } while (0)
        if (V == 4)
            EWV_SIZES(float, 4);
        else if (t->node->dtype == RLX_F16)
            EWV_SIZES(__half, 8);
        else
            EWV_SIZES(__nv_bfloat16, 8);
#undef EWV_SIZES
#undef EWV_LAUNCH
#undef EW_VECTORS_LAUNCH
    } else if (s->use_small)
        CU_FLOAT_DISPATCH(t->node->dtype, T,
                          cu_launch(ew_chain_small<T>, cu_blocks(s->prog.total, 256), 256, 0, s->small, (T *)t->out));
    else if (flat)
        CU_FLOAT_DISPATCH(
            t->node->dtype, T,
            cu_launch(ew_chain_kernel<T, true>, cu_blocks(s->prog.total, 256), 256, 0, s->prog, (T *)t->out));
    else
        CU_FLOAT_DISPATCH(
            t->node->dtype, T,
            cu_launch(ew_chain_kernel<T, false>, cu_blocks(s->prog.total, 256), 256, 0, s->prog, (T *)t->out));
    return rlx_cu_check(t, "elementwise chain launch");
}

static bool ew_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (!cu_is_f(n->dtype))
        return false;
    for (int i = 0; i < n->n_in; i++)
        if (g->nodes[n->in[i]].dtype != n->dtype)
            return false;
    return true;
}

extern "C" void rlx_cuda_register_fused(cu_kernel *tab)
{
    tab[RLX_OP_BATCH_NORM] = (cu_kernel){k_batch_norm, NULL, NULL, NULL, NULL};
    tab[RLX_OP_SWIGLU] = (cu_kernel){k_swiglu, swiglu_scratch, swiglu_ok, prep_swiglu, release_swiglu};
    tab[RLX_OP_ELEMENTWISE_CHAIN] = (cu_kernel){k_ew, NULL, ew_ok, prep_ew, release_ew};
    tab[RLX_OP_GLU] = (cu_kernel){k_glu, NULL, NULL, NULL, NULL};
}
