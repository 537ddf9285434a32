/* k_elementwise.cu - unary and binary (broadcasting) elementwise ops, where,
 * cast, clip, and the random ops (same counter-based generator as the CPU
 * backend, so values match it up to the last rounding of log/sin/cos).
 *
 * Float dtypes (f32/f16/bf16) compute in f32 through templated kernels;
 * integers and bools compute in int64 through one generic kernel, like the
 * CPU reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"

#define THREADS 256

/* ------------------------------------------------------------ unary */

template <typename T> __global__ void unary_kernel(int op, const T *x, T *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = cu_fromf<T>(rlx_unary_f32(op, cu_tof<T>(x[i])));
}

/* 16-byte vectors: 16 / sizeof(T) elements per load and store. */
template <typename T> __global__ void unary_kernel_vec(int op, const uint4 *x, uint4 *y, int64_t nv)
{
    cu_grid_wait();
    constexpr int V = 16 / sizeof(T);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
        uint4 v = x[i];
        T *e = (T *)&v;
        float f[V];
#pragma unroll
        for (int k = 0; k < V; k++)
            f[k] = cu_tof<T>(e[k]);
        cu_unary_fv<V>(op, f, f);
#pragma unroll
        for (int k = 0; k < V; k++)
            e[k] = cu_fromf<T>(f[k]);
        y[i] = v;
    }
}

__global__ void unary_any_kernel(int op, int dt, int is_float, const void *x, void *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (is_float)
            cu_st(y, dt, i, rlx_unary_f64(op, cu_ld(x, dt, i)));
        else
            cu_sti(y, dt, i, rlx_unary_i64(op, cu_ldi(x, dt, i)));
    }
}

static rlx_status k_unary(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node;
    int64_t count = rlx_shape_numel(&n->shape);
    if (!count)
        return RLX_OK;
    rlx_dtype dt = n->dtype;
    if (cu_is_f(dt) && n->op != RLX_OP_NOT) {
        int64_t v = 16 / (int64_t)rlx_dtype_size(dt);
        if (count % v == 0 && (uintptr_t)t->in[0] % 16 == 0 && (uintptr_t)t->out % 16 == 0) {
            int64_t nv = count / v;
            CU_FLOAT_DISPATCH(dt, T,
                              cu_launch(unary_kernel_vec<T>, cu_blocks(nv, THREADS), THREADS, 0, n->op,
                                        (const uint4 *)t->in[0], (uint4 *)t->out, nv));
        } else {
            CU_FLOAT_DISPATCH(dt, T,
                              cu_launch(unary_kernel<T>, cu_blocks(count, THREADS), THREADS, 0, n->op,
                                        (const T *)t->in[0], (T *)t->out, count));
        }
    } else {
        int isf = rlx_dtype_is_float(dt);
        cu_launch(unary_any_kernel, cu_blocks(count, THREADS), THREADS, 0, n->op, dt, isf, t->in[0], t->out, count);
    }
    return rlx_cu_check(t, "unary launch");
}

static bool unary_ok(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    return n->dtype != RLX_DTYPE_COUNT;
}

/* ------------------------------------------------------------ binary */

static bool is_compare(int op)
{
    return op == RLX_OP_EQUAL || op == RLX_OP_LESS || op == RLX_OP_GREATER || op == RLX_OP_AND || op == RLX_OP_OR ||
           op == RLX_OP_XOR;
}

/* Same shape: flat. */
template <typename T> __global__ void binary_flat(int op, int fm, const T *a, const T *b, T *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = cu_fromf<T>(rlx_binary_f32(op, cu_tof<T>(a[i]), cu_tof<T>(b[i]), fm));
}

/* [rows, cols] op [cols] (bias-like): the second operand repeats per row. */
template <typename T>
__global__ void binary_rowvec(int op, int fm, const T *a, const T *b, T *y, int64_t n, int64_t cols, int swap)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float x = cu_tof<T>(a[i]), v = cu_tof<T>(b[i % cols]);
        y[i] = cu_fromf<T>(swap ? rlx_binary_f32(op, v, x, fm) : rlx_binary_f32(op, x, v, fm));
    }
}

/* 16-byte vectors (16 / sizeof(T) elements): a full operand and a second
 * one that is full too (vcols 0) or a row vector of vcols vectors; swap:
 * the row vector is the left operand. */
template <typename T>
__global__ void binary_vec(int op, int fm, const uint4 *a, const uint4 *b, uint4 *y, int64_t nv, int64_t vcols,
                           int swap)
{
    cu_grid_wait();
    constexpr int V = 16 / sizeof(T);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nv; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = !vcols ? i : nv <= UINT32_MAX ? (int64_t)((uint32_t)i % (uint32_t)vcols) : i % vcols;
        uint4 va = a[i], vb = b[j];
        T *x = (T *)&va;
        const T *v = (const T *)&vb;
        float l[V], r[V];
#pragma unroll
        for (int k = 0; k < V; k++) {
            float p = cu_tof<T>(x[k]), q = cu_tof<T>(v[k]);
            l[k] = swap ? q : p;
            r[k] = swap ? p : q;
        }
        cu_binary_fv<V>(op, l, r, l, fm);
#pragma unroll
        for (int k = 0; k < V; k++)
            x[k] = cu_fromf<T>(l[k]);
        y[i] = va;
    }
}

/* V values of operand k at vector v (cu_dm_offset): one broadcast value,
 * V consecutive ones in a 16-byte load, or (V 1) one. */
template <typename E, int V> struct __align__(V * sizeof(E) >= 16 ? 16 : V * sizeof(E)) dm_vec { E e[V]; };

template <typename E, typename I, int V>
__device__ __forceinline__ void dm_load(const E *p, const cu_divmod &d, int k, I v, dm_vec<E, V> &o)
{
    bool same;
    I off = cu_dm_offset<I, V>(d, k, v, &same);
    if (same) {
        E x = p[off];
#pragma unroll
        for (int e = 0; e < V; e++)
            o.e[e] = x;
    } else {
        o = *(const dm_vec<E, V> *)(p + off);
    }
}

/* Operands broadcast by rows, columns or blocks (cu_divmod); V 16 / sizeof(T)
 * on 16-byte aligned buffers, else 1. */
template <typename T, typename I, int V>
__global__ void binary_dm(int op, int fm, const T *a, const T *b, T *y, cu_divmod d)
{
    cu_grid_wait();
    const I nv = (I)(d.total / V);
    for (I v = blockIdx.x * (I)blockDim.x + threadIdx.x; v < nv; v += (I)gridDim.x * blockDim.x) {
        dm_vec<T, V> va, vb;
        dm_load<T, I, V>(a, d, 0, v, va);
        dm_load<T, I, V>(b, d, 1, v, vb);
        float l[V], r[V];
#pragma unroll
        for (int e = 0; e < V; e++)
            l[e] = cu_tof<T>(va.e[e]), r[e] = cu_tof<T>(vb.e[e]);
        cu_binary_fv<V>(op, l, r, l, fm);
#pragma unroll
        for (int e = 0; e < V; e++)
            va.e[e] = cu_fromf<T>(l[e]);
        *(dm_vec<T, V> *)(y + v * (I)V) = va;
    }
}

template <typename T> __global__ void binary_walk(int op, int fm, const T *a, const T *b, T *y, cu_walk w)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < w.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[CU_MAX_OPS];
        cu_walk_offsets(w, i, off);
        y[i] = cu_fromf<T>(rlx_binary_f32(op, cu_tof<T>(a[off[0]]), cu_tof<T>(b[off[1]]), fm));
    }
}

__global__ void binary_any(int op, int fm, int it, int ot, int isf, const void *a, const void *b, void *y, cu_walk w)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < w.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[CU_MAX_OPS];
        cu_walk_offsets(w, i, off);
        if (isf) {
            cu_st(y, ot, i, rlx_binary_f64(op, cu_ld(a, it, off[0]), cu_ld(b, it, off[1]), fm));
        } else {
            int64_t v; /* 0 on division by zero */
            rlx_binary_i64(op, cu_ldi(a, it, off[0]), cu_ldi(b, it, off[1]), fm, &v);
            cu_sti(y, ot, i, v);
        }
    }
}

typedef struct bin_state {
    cu_walk w;
    int mode; /* 0 flat, 1 a full + b row vector, 2 b full + a row vector, 3 walk */
    int64_t cols;
    bool use_dm; /* mode 3 through binary_dm */
    cu_divmod dm;
} bin_state;

/* The launch of a cu_divmod kernel K<T, I, V>: 16-byte vectors where the
 * layout and every address allow, 32-bit indices where they reach. */
#define CU_DM_LAUNCH(K, T, dmv, ptrs_aligned, ...)                           \
    do {                                                                     \
        constexpr int VV = 16 / sizeof(T);                                   \
        bool vv = (dmv).vec && (ptrs_aligned);                               \
        bool small = (dmv).total < ((int64_t)1 << 31);                       \
        int bl = cu_blocks(vv ? (dmv).total / VV : (dmv).total, THREADS);    \
        if (vv && small)                                                     \
            cu_launch(K<T, uint32_t, VV>, bl, THREADS, 0, __VA_ARGS__, dmv); \
        else if (vv)                                                         \
            cu_launch(K<T, int64_t, VV>, bl, THREADS, 0, __VA_ARGS__, dmv);  \
        else if (small)                                                      \
            cu_launch(K<T, uint32_t, 1>, bl, THREADS, 0, __VA_ARGS__, dmv);  \
        else                                                                 \
            cu_launch(K<T, int64_t, 1>, bl, THREADS, 0, __VA_ARGS__, dmv);   \
    } while (0)

static bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

static void walk_for(const rlx_node_data *out, int nops, const rlx_node_data *const *ins, cu_walk *w)
{
    int64_t st[CU_MAX_OPS][CU_MAX_DIMS];
    for (int k = 0; k < nops; k++)
        rlx_shape_broadcast_strides(&ins[k]->shape, &out->shape, st[k]);
    rlx_cu_walk_init(w, out->shape.ndim, out->shape.dims, nops, st);
}

static rlx_status prep_binary(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    bin_state *s = (bin_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    walk_for(t->node, 2, t->in_node, &s->w);
    s->mode = 3;
    const cu_walk *w = &s->w;
    if (w->nd <= 1 && w->st[0][0] == (w->nd ? 1 : 0) && w->st[1][0] == w->st[0][0])
        s->mode = 0;
    else if (w->nd == 2 && w->st[0][1] == 1 && w->st[0][0] == w->dims[1] && w->st[1][1] == 1 && w->st[1][0] == 0)
        s->mode = 1, s->cols = w->dims[1];
    else if (w->nd == 2 && w->st[1][1] == 1 && w->st[1][0] == w->dims[1] && w->st[0][1] == 1 && w->st[0][0] == 0)
        s->mode = 2, s->cols = w->dims[1];
    if (s->mode == 3)
        s->use_dm = rlx_cu_walk_divmod(w, 16 / (int)rlx_dtype_size(t->node->dtype), &s->dm);
    t->state = s;
    return RLX_OK;
}

static void free_state(rlx_thunk *t) { free(t->state); }

/* The flat and row-vector cases in 16-byte vectors, when sizes and
 * addresses allow; false when they do not. */
static bool binary_vectorised(const rlx_thunk *t, const bin_state *s, int fm, int64_t count)
{
    rlx_dtype dt = t->node->dtype;
    int full = s->mode == 2 ? 1 : 0;
    const void *a = t->in[full], *b = t->in[1 - full];
    int64_t v = 16 / (int64_t)rlx_dtype_size(dt);
    if (s->mode > 2 || count % v || (s->mode && s->cols % v) || (uintptr_t)a % 16 || (uintptr_t)b % 16 ||
        (uintptr_t)t->out % 16)
        return false;
    int64_t nv = count / v, vcols = s->mode ? s->cols / v : 0;
    CU_FLOAT_DISPATCH(dt, T,
                      cu_launch(binary_vec<T>, cu_blocks(nv, THREADS), THREADS, 0, t->node->op, fm, (const uint4 *)a,
                                (const uint4 *)b, (uint4 *)t->out, nv, vcols, full));
    return true;
}

static rlx_status k_binary(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node;
    const bin_state *s = (const bin_state *)t->state;
    int64_t count = s->w.total;
    if (!count)
        return RLX_OK;
    rlx_dtype it = t->in_node[0]->dtype, ot = n->dtype;
    int fm = n->op == RLX_OP_MOD ? n->attrs.mod.fmod : 0;
    int blocks = cu_blocks(count, THREADS);
    if (cu_is_f(it) && it == ot && !is_compare(n->op) && binary_vectorised(t, s, fm, count)) {
        /* launched */
    } else if (cu_is_f(it) && it == ot && !is_compare(n->op)) {
        switch (s->mode) {
        case 0:
            CU_FLOAT_DISPATCH(it, T,
                              cu_launch(binary_flat<T>, blocks, THREADS, 0, n->op, fm, (const T *)t->in[0],
                                        (const T *)t->in[1], (T *)t->out, count));
            break;
        case 1:
            CU_FLOAT_DISPATCH(it, T,
                              cu_launch(binary_rowvec<T>, blocks, THREADS, 0, n->op, fm, (const T *)t->in[0],
                                        (const T *)t->in[1], (T *)t->out, count, s->cols, 0));
            break;
        case 2:
            CU_FLOAT_DISPATCH(it, T,
                              cu_launch(binary_rowvec<T>, blocks, THREADS, 0, n->op, fm, (const T *)t->in[1],
                                        (const T *)t->in[0], (T *)t->out, count, s->cols, 1));
            break;
        default:
            if (s->use_dm) {
                bool al = aligned16(t->in[0]) && aligned16(t->in[1]) && aligned16(t->out);
                CU_FLOAT_DISPATCH(it, T,
                                  CU_DM_LAUNCH(binary_dm, T, s->dm, al, n->op, fm, (const T *)t->in[0],
                                               (const T *)t->in[1], (T *)t->out));
            } else {
                CU_FLOAT_DISPATCH(it, T,
                                  cu_launch(binary_walk<T>, blocks, THREADS, 0, n->op, fm, (const T *)t->in[0],
                                            (const T *)t->in[1], (T *)t->out, s->w));
            }
        }
    } else {
        cu_launch(binary_any, blocks, THREADS, 0, n->op, fm, it, ot, rlx_dtype_is_float(it), t->in[0], t->in[1], t->out,
                  s->w);
    }
    return rlx_cu_check(t, "binary launch");
}

static bool any_ok(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    (void)n;
    return true;
}

/* ------------------------------------------------------------ where */

template <int ES> struct elem_t;
template <> struct elem_t<1> {
    typedef unsigned char T;
};
template <> struct elem_t<2> {
    typedef unsigned short T;
};
template <> struct elem_t<4> {
    typedef unsigned int T;
};
template <> struct elem_t<8> {
    typedef unsigned long long T;
};

template <typename E> __global__ void where_kernel(const unsigned char *c, const E *a, const E *b, E *y, cu_walk w)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < w.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off[CU_MAX_OPS];
        cu_walk_offsets(w, i, off);
        y[i] = c[off[0]] ? a[off[1]] : b[off[2]];
    }
}

/* where over operands broadcast by rows, columns or blocks (a causal mask
 * [S, T] over scores [B, H, S, T], a scalar fill): cu_divmod */
template <typename E, typename I, int V>
__global__ void where_dm(const unsigned char *c, const E *a, const E *b, E *y, cu_divmod d)
{
    cu_grid_wait();
    const I nv = (I)(d.total / V);
    for (I v = blockIdx.x * (I)blockDim.x + threadIdx.x; v < nv; v += (I)gridDim.x * blockDim.x) {
        bool same;
        I oc = cu_dm_offset<I, V>(d, 0, v, &same);
        dm_vec<E, V> va, vb;
        dm_load<E, I, V>(a, d, 1, v, va);
        dm_load<E, I, V>(b, d, 2, v, vb);
#pragma unroll
        for (int e = 0; e < V; e++)
            if (!c[same ? oc : oc + e])
                va.e[e] = vb.e[e];
        *(dm_vec<E, V> *)(y + v * (I)V) = va;
    }
}

typedef struct where_state {
    cu_walk w;
    bool use_dm;
    cu_divmod dm;
} where_state;

static rlx_status prep_where(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    where_state *s = (where_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    walk_for(t->node, 3, t->in_node, &s->w);
    s->use_dm = rlx_cu_walk_divmod(&s->w, 16 / (int)rlx_dtype_size(t->node->dtype), &s->dm);
    t->state = s;
    return RLX_OK;
}

/* E: an unsigned type of the element's size (where only moves bits) */
template <typename E> static void launch_where(const rlx_thunk *t, const where_state *s)
{
    const unsigned char *c = (const unsigned char *)t->in[0];
    const E *a = (const E *)t->in[1], *b = (const E *)t->in[2];
    if (s->use_dm) {
        bool al = aligned16(a) && aligned16(b) && aligned16(t->out);
        CU_DM_LAUNCH(where_dm, E, s->dm, al, c, a, b, (E *)t->out);
    } else {
        cu_launch(where_kernel<E>, cu_blocks(s->w.total, THREADS), THREADS, 0, c, a, b, (E *)t->out, s->w);
    }
}

static rlx_status k_where(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const where_state *s = (const where_state *)t->state;
    if (!s->w.total)
        return RLX_OK;
    switch (rlx_dtype_size(t->node->dtype)) {
    case 1: launch_where<unsigned char>(t, s); break;
    case 2: launch_where<unsigned short>(t, s); break;
    case 4: launch_where<unsigned int>(t, s); break;
    default: launch_where<unsigned long long>(t, s); break;
    }
    return rlx_cu_check(t, "where launch");
}

/* ------------------------------------------------------------ cast, clip */

template <typename A, typename B> __global__ void cast_ff(const A *x, B *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = cu_fromf<B>(cu_tof<A>(x[i]));
}

__global__ void cast_any(int from, int to, int mode, const void *x, void *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (mode == 0)
            cu_sti(y, to, i, cu_ldi(x, from, i));
        else if (mode == 1)
            cu_st(y, to, i, (double)cu_ldi(x, from, i));
        else
            cu_st(y, to, i, cu_ld(x, from, i));
    }
}

/* 8 values a thread in 16-byte loads and stores (mixed precision casts
 * every param and gradient of a training step) */
template <typename A, typename B> __global__ void cast_ff8(const A *x, B *y, int64_t n8)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n8; i += (int64_t)gridDim.x * blockDim.x) {
        dm_vec<A, 8> a = ((const dm_vec<A, 8> *)x)[i];
        dm_vec<B, 8> b;
#pragma unroll
        for (int e = 0; e < 8; e++)
            b.e[e] = cu_fromf<B>(cu_tof<A>(a.e[e]));
        ((dm_vec<B, 8> *)y)[i] = b;
    }
}

template <typename A, typename B> static void cast_to(const void *x, void *y, int64_t n)
{
    if (n % 8 == 0 && aligned16(x) && aligned16(y))
        cu_launch(cast_ff8<A, B>, cu_blocks(n / 8, THREADS), THREADS, 0, (const A *)x, (B *)y, n / 8);
    else
        cu_launch(cast_ff<A, B>, cu_blocks(n, THREADS), THREADS, 0, (const A *)x, (B *)y, n);
}

template <typename A> static void cast_from(rlx_dtype to, const void *x, void *y, int64_t n)
{
    if (to == RLX_F32)
        cast_to<A, float>(x, y, n);
    else if (to == RLX_F16)
        cast_to<A, __half>(x, y, n);
    else
        cast_to<A, __nv_bfloat16>(x, y, n);
}

static rlx_status k_cast(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    rlx_dtype from = t->in_node[0]->dtype, to = t->node->dtype;
    int64_t n = rlx_shape_numel(&t->node->shape);
    if (!n)
        return RLX_OK;
    if (from == to) {
        if (t->in[0] != t->out) {
            cudaError_t e = cudaMemcpyAsync(t->out, t->in[0], (size_t)n * rlx_dtype_size(to), cudaMemcpyDeviceToDevice,
                                            rlx_cu_stream);
            if (e != cudaSuccess)
                return rlx_cu_error(t, e, "cast copy");
        }
        return RLX_OK;
    }
    if (cu_is_f(from) && cu_is_f(to)) {
        CU_FLOAT_DISPATCH(from, A, cast_from<A>(to, t->in[0], t->out, n));
    } else {
        bool exact_int = !rlx_dtype_is_float(from) && !rlx_dtype_is_float(to);
        int mode = exact_int ? 0 : (from == RLX_I64 && rlx_dtype_is_float(to)) ? 1 : 2;
        cu_launch(cast_any, cu_blocks(n, THREADS), THREADS, 0, from, to, mode, t->in[0], t->out, n);
    }
    return rlx_cu_check(t, "cast launch");
}

__global__ void clip_any(int dt, int isf, double lo, double hi, const void *x, void *y, int64_t n)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (isf) {
            double v = cu_ld(x, dt, i);
            if (v < lo)
                v = lo;
            if (v > hi)
                v = hi;
            cu_st(y, dt, i, v);
        } else {
            int64_t v = cu_ldi(x, dt, i);
            if ((double)v < lo)
                v = rlx_clip_bound_i(ceil(lo), dt);
            if ((double)v > hi)
                v = rlx_clip_bound_i(floor(hi), dt);
            cu_sti(y, dt, i, v);
        }
    }
}

static rlx_status k_clip(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    int64_t n = rlx_shape_numel(&t->node->shape);
    if (!n)
        return RLX_OK;
    rlx_dtype dt = t->node->dtype;
    cu_launch(clip_any, cu_blocks(n, THREADS), THREADS, 0, dt, rlx_dtype_is_float(dt), t->node->attrs.clip.lo,
              t->node->attrs.clip.hi, t->in[0], t->out, n);
    return rlx_cu_check(t, "clip launch");
}

/* ------------------------------------------------------------ random */

/* The run index lives on the device so a captured graph sees each run's. */
static __device__ unsigned long long rlx_cu_run_index;

cudaError_t rlx_cu_set_run_index(const unsigned long long *src)
{
    return cudaMemcpyToSymbolAsync(rlx_cu_run_index, src, sizeof *src, 0, cudaMemcpyHostToDevice, rlx_cu_stream);
}

/* kind 0 uniform (a lo, b hi), 1 normal (a mean, b std), 2 dropout (a p) */
__global__ void random_kernel(int kind, int dt, unsigned long long seed, unsigned long long node_id, double a, double b,
                              const void *x, void *y, int64_t n)
{
    cu_grid_wait();
    unsigned long long stream = (node_id << 32) ^ rlx_cu_run_index;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (kind == 0) {
            cu_st(y, dt, i, a + (b - a) * rlx_uniform01(seed, stream, (unsigned long long)i));
        } else if (kind == 1) {
            unsigned long long j = (unsigned long long)i & ~1ULL;
            double u1 = rlx_uniform01(seed, stream, j), u2 = rlx_uniform01(seed, stream, j + 1);
            double r = sqrt(-2.0 * log(u1)), ang = 2.0 * 3.14159265358979323846 * u2;
            double z = (i & 1) ? r * sin(ang) : r * cos(ang);
            cu_st(y, dt, i, a + b * z);
        } else {
            int keep = rlx_uniform01(seed, stream, (unsigned long long)i) >= a;
            double scale = 1.0 / (1.0 - a);
            if (dt == RLX_F32) {
                float v = ((const float *)x)[i];
                ((float *)y)[i] = keep ? (float)(v * scale) : 0.0f;
            } else {
                cu_st(y, dt, i, keep ? cu_ld(x, dt, i) * scale : 0.0);
            }
        }
    }
}

static rlx_status k_random(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    int64_t count = rlx_shape_numel(&n->shape);
    if (!count)
        return RLX_OK;
    int kind = n->op == RLX_OP_RANDOM_UNIFORM ? 0 : n->op == RLX_OP_RANDOM_NORMAL ? 1 : 2;
    double a = kind == 2 ? n->attrs.dropout.p : n->attrs.random.a, b = kind == 2 ? 0 : n->attrs.random.b;
    if (kind == 2 && a == 0) {
        if (t->out != t->in[0]) {
            cudaError_t e =
                cudaMemcpyAsync(t->out, t->in[0], rlx_node_bytes(n), cudaMemcpyDeviceToDevice, rlx_cu_stream);
            if (e != cudaSuccess)
                return rlx_cu_error(t, e, "dropout copy");
        }
        return RLX_OK;
    }
    cu_launch(random_kernel, cu_blocks(count, THREADS), THREADS, 0, kind, n->dtype, (unsigned long long)ctx->seed,
              (unsigned long long)(uint32_t)t->id, a, b, kind == 2 ? t->in[0] : NULL, t->out, count);
    return rlx_cu_check(t, "random launch");
}

static bool random_ok(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    return rlx_dtype_is_float(n->dtype);
}

extern "C" void rlx_cuda_register_elementwise(cu_kernel *tab)
{
    for (int op = RLX_OP_NEG; op <= RLX_OP_NOT; op++)
        tab[op] = (cu_kernel){k_unary, NULL, unary_ok, NULL, NULL};
    for (int op = RLX_OP_ADD; op <= RLX_OP_XOR; op++)
        tab[op] = (cu_kernel){k_binary, NULL, any_ok, prep_binary, free_state};
    tab[RLX_OP_WHERE] = (cu_kernel){k_where, NULL, any_ok, prep_where, free_state};
    tab[RLX_OP_CAST] = (cu_kernel){k_cast, NULL, any_ok, NULL, NULL};
    tab[RLX_OP_CLIP] = (cu_kernel){k_clip, NULL, any_ok, NULL, NULL};
    tab[RLX_OP_RANDOM_UNIFORM] = (cu_kernel){k_random, NULL, random_ok, NULL, NULL};
    tab[RLX_OP_RANDOM_NORMAL] = (cu_kernel){k_random, NULL, random_ok, NULL, NULL};
    tab[RLX_OP_DROPOUT] = (cu_kernel){k_random, NULL, random_ok, NULL, NULL};
}
