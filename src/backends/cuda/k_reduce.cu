/* k_reduce.cu - reductions (sum, mean, max, min, prod over any axes),
 * argmax/argmin, softmax/log-softmax, and layer/RMS norm over the last axis
 * (one read per pass, one warp per row; statistics in f32 registers). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"

/* ------------------------------------------------------------ reductions */

typedef struct red_state {
    int nk, nr;
    int64_t kdims[CU_MAX_DIMS], kst[CU_MAX_DIMS]; /* kept dims (output order) */
    int64_t rdims[CU_MAX_DIMS], rst[CU_MAX_DIMS]; /* reduced dims */
    int64_t n_out, R;
    bool cols;            /* col_form: x read as [R, N] summed over R */
    int64_t col_n, col_c; /* N, and the chunks of rows (col_chunks) */
} red_state;

/* Column reductions: x read as [R, N] (every reduced dim ahead of every
 * kept one) summed over R, a bias or norm gain's gradient over all tokens.
 * A warp per output would read addresses N apart; here 32 threads read 32
 * neighbouring columns and 8 rows at a time, and blocks split the rows
 * into chunks whose partials a second kernel combines in chunk order
 * (deterministic). */
static bool col_form(const rlx_shape *xs, uint32_t axes, int64_t *R, int64_t *N)
{
    *R = *N = 1;
    bool kept_seen = false;
    for (int d = 0; d < xs->ndim; d++) {
        if (xs->dims[d] == 1)
            continue;
        if (axes == 0 || (axes >> d) & 1u) {
            if (kept_seen)
                return false;
            *R *= xs->dims[d];
        } else {
            kept_seen = true;
            *N *= xs->dims[d];
        }
    }
    return *N >= 8 && *R >= 32;
}

/* chunks of rows: about two blocks per SM of an H100/H200, at least 256 rows each */
static int64_t col_chunks(int64_t R, int64_t N)
{
    int64_t c = 264 / ((N + 31) / 32);
    if (c > R / 256)
        c = R / 256;
    if (c > 1024)
        c = 1024;
    return c < 1 ? 1 : c;
}

static rlx_status prep_reduce(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    red_state *s = (red_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    const rlx_shape *xs = &t->in_node[0]->shape;
    uint32_t axes = t->node->attrs.reduce.axes;
    int64_t st[CU_MAX_DIMS];
    rlx_shape_strides(xs, st);
    s->n_out = 1;
    s->R = 1;
    for (int d = 0; d < xs->ndim; d++) {
        bool red = axes == 0 || (axes >> d) & 1u;
        if (red) {
            s->R *= xs->dims[d];
            if (xs->dims[d] == 1)
                continue;
            if (s->nr > 0 && s->rst[s->nr - 1] == xs->dims[d] * st[d]) {
                s->rdims[s->nr - 1] *= xs->dims[d];
                s->rst[s->nr - 1] = st[d];
            } else {
                s->rdims[s->nr] = xs->dims[d];
                s->rst[s->nr++] = st[d];
            }
        } else {
            s->n_out *= xs->dims[d];
            if (xs->dims[d] == 1)
                continue;
            if (s->nk > 0 && s->kst[s->nk - 1] == xs->dims[d] * st[d]) {
                s->kdims[s->nk - 1] *= xs->dims[d];
                s->kst[s->nk - 1] = st[d];
            } else {
                s->kdims[s->nk] = xs->dims[d];
                s->kst[s->nk++] = st[d];
            }
        }
    }
    int64_t R;
    s->cols = col_form(xs, axes, &R, &s->col_n);
    s->col_c = s->cols ? col_chunks(R, s->col_n) : 0;
    t->state = s;
    return RLX_OK;
}

static void free_state(rlx_thunk *t) { free(t->state); }

__device__ __forceinline__ double red_combine(int op, double a, double v)
{
    switch (op) {
    case RLX_OP_REDUCE_MAX: return (v > a || v != v) ? v : a;
    case RLX_OP_REDUCE_MIN: return (v < a || v != v) ? v : a;
    case RLX_OP_REDUCE_PROD: return a * v;
    default: return a + v;
    }
}

__device__ __forceinline__ double red_init(int op)
{
    return op == RLX_OP_REDUCE_MAX    ? -INFINITY
           : op == RLX_OP_REDUCE_MIN  ? INFINITY
           : op == RLX_OP_REDUCE_PROD ? 1.0
                                      : 0.0;
}

/* This thread's share of output element `out`: reduced elements first,
 * first + step, ... combined from red_init. */
__device__ __forceinline__ double red_walk(int op, int dt, const void *x, const red_state &s, int64_t out,
                                           int64_t first, int64_t step)
{
    int64_t base = 0, q = out;
    for (int d = s.nk - 1; d >= 0; d--) {
        base += (q % s.kdims[d]) * s.kst[d];
        q /= s.kdims[d];
    }
    double acc = red_init(op);
    for (int64_t r = first; r < s.R; r += step) {
        int64_t off = base, rr = r;
        for (int d = s.nr - 1; d >= 0; d--) {
            off += (rr % s.rdims[d]) * s.rst[d];
            rr /= s.rdims[d];
        }
        acc = red_combine(op, acc, cu_ld(x, dt, off));
    }
    return acc;
}

/* One warp per output element. */
__global__ void reduce_kernel(int op, int dt, const void *x, void *y, red_state s)
{
    cu_grid_wait();
    int64_t warp = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp >= s.n_out)
        return;
    double acc = red_walk(op, dt, x, s, warp, lane, 32);
    for (int o = 16; o > 0; o >>= 1)
        acc = red_combine(op, acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if (lane == 0) {
        if (op == RLX_OP_REDUCE_MEAN)
            acc = acc / (double)s.R;
        cu_st(y, dt, warp, acc);
    }
}

/* One block per output element, for long reductions (a gradient's sum of
 * squares, a bias gradient over every token): a warp alone would walk
 * millions of elements. */
#define RED_BLOCK 256
__global__ void __launch_bounds__(RED_BLOCK) reduce_block_kernel(int op, int dt, const void *x, void *y, red_state s)
{
    cu_grid_wait();
    __shared__ double part[RED_BLOCK / 32];
    int64_t out = blockIdx.x;
    double init = red_init(op), acc = red_walk(op, dt, x, s, out, threadIdx.x, RED_BLOCK);
    for (int o = 16; o > 0; o >>= 1)
        acc = red_combine(op, acc, __shfl_xor_sync(0xffffffffu, acc, o));
    if ((threadIdx.x & 31) == 0)
        part[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        acc = init;
        for (int w = 0; w < RED_BLOCK / 32; w++)
            acc = red_combine(op, acc, part[w]);
        if (op == RLX_OP_REDUCE_MEAN)
            acc = acc / (double)s.R;
        cu_st(y, dt, out, acc);
    }
}

static size_t reduce_scratch(const rlx_graph *g, const rlx_node_data *n)
{
    int64_t R, N;
    if (!col_form(&g->nodes[n->in[0]].shape, n->attrs.reduce.axes, &R, &N))
        return 0;
    int64_t c = col_chunks(R, N);
    return c > 1 ? (size_t)(c * N) * sizeof(double) : 0;
}

#define COL_ROWS 8
__global__ void __launch_bounds__(32 * COL_ROWS)
    col_reduce_kernel(int op, int dt, const void *x, void *y, double *part, int64_t R, int64_t N, int64_t chunk)
{
    cu_grid_wait();
    __shared__ double sh[COL_ROWS][33];
    int64_t n = blockIdx.x * 32LL + threadIdx.x, r0 = blockIdx.y * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
    double acc = red_init(op);
    if (n < N)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += COL_ROWS)
            acc = red_combine(op, acc, cu_ld(x, dt, r * N + n));
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y || n >= N)
        return;
    for (int k = 1; k < COL_ROWS; k++)
        acc = red_combine(op, acc, sh[k][threadIdx.x]);
    if (gridDim.y > 1) {
        part[blockIdx.y * N + n] = acc;
        return;
    }
    if (op == RLX_OP_REDUCE_MEAN)
        acc = acc / (double)R;
    cu_st(y, dt, n, acc);
}

__global__ void col_reduce_finish(int op, int dt, const double *part, void *y, int64_t C, int64_t N, int64_t R)
{
    cu_grid_wait();
    for (int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; n < N; n += (int64_t)gridDim.x * blockDim.x) {
        double acc = part[n];
        for (int64_t c = 1; c < C; c++)
            acc = red_combine(op, acc, part[c * N + n]);
        if (op == RLX_OP_REDUCE_MEAN)
            acc = acc / (double)R;
        cu_st(y, dt, n, acc);
    }
}

static rlx_status k_reduce(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const red_state *s = (const red_state *)t->state;
    if (!s->n_out)
        return RLX_OK;
    if (s->cols) {
        int64_t R = s->R, N = s->col_n, C = s->col_c, chunk = (R + C - 1) / C;
        dim3 grid((unsigned)((N + 31) / 32), (unsigned)C), block(32, COL_ROWS);
        cu_launch(col_reduce_kernel, grid, block, 0, t->node->op, t->node->dtype, t->in[0], t->out,
                  (double *)t->scratch, R, N, chunk);
        if (C > 1)
            cu_launch(col_reduce_finish, cu_blocks(N, 256), 256, 0, t->node->op, t->node->dtype,
                      (const double *)t->scratch, t->out, C, N, R);
        return rlx_cu_check(t, "reduce launch");
    }
    if (s->R >= 2048 && s->n_out < (1LL << 31)) {
        cu_launch(reduce_block_kernel, (unsigned)s->n_out, RED_BLOCK, 0, t->node->op, t->node->dtype, t->in[0], t->out,
                  *s);
        return rlx_cu_check(t, "reduce launch");
    }
    int64_t threads = s->n_out * 32;
    cu_launch(reduce_kernel, cu_blocks(threads, 256), 256, 0, t->node->op, t->node->dtype, t->in[0], t->out, *s);
    return rlx_cu_check(t, "reduce launch");
}

static bool reduce_ok(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    return n->dtype != RLX_BOOL;
}

/* ------------------------------------------------------------ arg */

__global__ void arg_kernel(int is_max, int dt, const void *x, long long *y, int64_t n_out, int64_t n, int64_t inner)
{
    cu_grid_wait();
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n_out; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = (o / inner) * n * inner + (o % inner);
        int64_t best_i = 0;
        double best = cu_ld(x, dt, base);
        if (best == best) {
            for (int64_t i = 1; i < n; i++) {
                double v = cu_ld(x, dt, base + i * inner);
                if (v != v) {
                    best_i = i;
                    break;
                }
                if (is_max ? v > best : v < best) {
                    best = v;
                    best_i = i;
                }
            }
        }
        y[o] = best_i;
    }
}

/* (v, i) against the best so far: a NaN wins (the first one), then the
 * larger (smaller) value, then the lower index, as the scan above. */
__device__ __forceinline__ bool arg_better(int is_max, double v, int64_t i, double b, int64_t bi)
{
    bool vn = v != v, bn = b != b;
    if (vn || bn)
        return vn && (!bn || i < bi);
    if (v == b)
        return i < bi;
    return is_max ? v > b : v < b;
}

/* Lane 0 ends with the warp's best (value, index); bi < 0: no candidate. */
__device__ __forceinline__ void arg_warp_reduce(int is_max, double &best, int64_t &bi)
{
    for (int off = 16; off > 0; off >>= 1) {
        double ov = __shfl_down_sync(0xffffffffu, best, off);
        int64_t oi = __shfl_down_sync(0xffffffffu, bi, off);
        if (oi >= 0 && (bi < 0 || arg_better(is_max, ov, oi, best, bi)))
            best = ov, bi = oi;
    }
}

/* The block's best (value, index) from each thread's, written to y by
 * thread 0. */
__device__ __forceinline__ void arg_block_reduce(int is_max, double best, int64_t bi, long long *y)
{
    __shared__ double sv[32];
    __shared__ int64_t si[32];
    arg_warp_reduce(is_max, best, bi);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0)
        sv[warp] = best, si[warp] = bi;
    __syncthreads();
    if (warp == 0) {
        int nw = blockDim.x / 32;
        best = lane < nw ? sv[lane] : 0;
        bi = lane < nw ? si[lane] : -1;
        arg_warp_reduce(is_max, best, bi);
        if (lane == 0)
            *y = bi;
    }
}

/* One block per row of a contiguous last axis (a vocabulary's logits):
 * every thread scans a strided part, then the block reduces. */
#define ARG_ROW_THREADS 1024
__global__ void __launch_bounds__(ARG_ROW_THREADS)
    arg_row_kernel(int is_max, int dt, const void *x, long long *y, int64_t n)
{
    cu_grid_wait();
    const int64_t base = (int64_t)blockIdx.x * n;
    double best = 0;
    int64_t bi = -1;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        double v = cu_ld(x, dt, base + i);
        if (bi < 0 || arg_better(is_max, v, i, best, bi))
            best = v, bi = i;
    }
    arg_block_reduce(is_max, best, bi, y + blockIdx.x);
}

/* The same for f32 rows of whole 16-byte vectors, four vectors of a thread
 * in flight at once: a scan of one load at a time waited out the memory's
 * latency per element (44 us for a 151,936-word vocabulary on an H100). */
#define ARG_ROW_UNROLL 4
__global__ void __launch_bounds__(ARG_ROW_THREADS) arg_row_f32v(int is_max, const float4 *x, long long *y, int64_t n4)
{
    cu_grid_wait();
    const float4 *row = x + (int64_t)blockIdx.x * n4;
    double best = 0;
    int64_t bi = -1;
    for (int64_t i0 = threadIdx.x; i0 < n4; i0 += ARG_ROW_UNROLL * (int64_t)blockDim.x) {
        float4 v[ARG_ROW_UNROLL];
#pragma unroll
        for (int k = 0; k < ARG_ROW_UNROLL; k++) {
            const int64_t i = i0 + k * (int64_t)blockDim.x;
            v[k] = i < n4 ? row[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int k = 0; k < ARG_ROW_UNROLL; k++) {
            const int64_t i = (i0 + k * (int64_t)blockDim.x) * 4;
            if (i >= n4 * 4)
                break;
            const float e[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (bi < 0 || arg_better(is_max, e[j], i + j, best, bi))
                    best = e[j], bi = i + j;
        }
    }
    arg_block_reduce(is_max, best, bi, y + blockIdx.x);
}

static rlx_status k_arg(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *xn = t->in_node[0];
    int axis = t->node->attrs.arg.axis;
    int64_t outer = 1, n = xn->shape.dims[axis], inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= xn->shape.dims[d];
    for (int d = axis + 1; d < xn->shape.ndim; d++)
        inner *= xn->shape.dims[d];
    int64_t n_out = outer * inner;
    if (!n_out || !n)
        return RLX_OK;
    /* a long contiguous axis takes a block per row; short or strided ones a
     * thread per output */
    const int is_max = t->node->op == RLX_OP_ARGMAX;
    if (inner == 1 && n >= 2048 && xn->dtype == RLX_F32 && n % 4 == 0 && (uintptr_t)t->in[0] % 16 == 0)
        cu_launch(arg_row_f32v, (unsigned)n_out, ARG_ROW_THREADS, 0, is_max, (const float4 *)t->in[0],
                  (long long *)t->out, n / 4);
    else if (inner == 1 && n >= 2048)
        cu_launch(arg_row_kernel, (unsigned)n_out, ARG_ROW_THREADS, 0, is_max, xn->dtype, t->in[0], (long long *)t->out,
                  n);
    else
        cu_launch(arg_kernel, cu_blocks(n_out, 256), 256, 0, is_max, xn->dtype, t->in[0], (long long *)t->out, n_out, n,
                  inner);
    return rlx_cu_check(t, "arg launch");
}

static bool arg_ok(const rlx_graph *g, const rlx_node_data *n) { return g->nodes[n->in[0]].dtype != RLX_BOOL; }

/* ------------------------------------------------------------ softmax */

/* Rows along the last axis: one block per row; online max/sum in one read,
 * then one more read to write. */
template <typename T> __global__ void softmax_rows(const T *x, T *y, int64_t n, int logsm)
{
    cu_grid_wait();
    int64_t row = blockIdx.x;
    const T *xr = x + row * n;
    T *yr = y + row * n;
    float m = -INFINITY, s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = cu_tof<T>(xr[i]);
        if (v > m) {
            s = s * __expf(m - v) + 1.0f;
            m = v;
        } else if (v == v) {
            if (v != -INFINITY) /* a masked element adds nothing (and -inf - -inf is NaN) */
                s += __expf(v - m);
        } else {
            m = v; /* NaN */
        }
    }
    __shared__ float sm[32], ss[32];
    /* warp combine */
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mm = fmaxf(m, m2);
        if (m != m || m2 != m2)
            mm = m != m ? m : m2;
        float a = (m == -INFINITY) ? 0.0f : s * __expf(m - mm), b = (m2 == -INFINITY) ? 0.0f : s2 * __expf(m2 - mm);
        m = mm;
        s = a + b;
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x & 31, nw = blockDim.x / 32;
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nw ? sm[lane] : -INFINITY;
        s = lane < nw ? ss[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
            float mm = fmaxf(m, m2);
            if (m != m || m2 != m2)
                mm = m != m ? m : m2;
            float a = (m == -INFINITY) ? 0.0f : s * __expf(m - mm), b = (m2 == -INFINITY) ? 0.0f : s2 * __expf(m2 - mm);
            m = mm;
            s = a + b;
        }
        if (lane == 0) {
            sm[0] = m;
            ss[0] = s;
        }
    }
    __syncthreads();
    m = sm[0];
    s = ss[0];
    float inv = 1.0f / s, logs = logf(s);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = cu_tof<T>(xr[i]);
        yr[i] = cu_fromf<T>(logsm ? v - m - logs : expf(v - m) * inv);
    }
}

/* Any axis: one thread per (outer, inner) position, three reads. */
template <typename T>
__global__ void softmax_strided(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, int logsm)
{
    cu_grid_wait();
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < outer * inner;
         o += (int64_t)gridDim.x * blockDim.x) {
        int64_t base = (o / inner) * n * inner + (o % inner);
        float m = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            float v = cu_tof<T>(x[base + i * inner]);
            m = (v > m || v != v) ? v : m;
        }
        float s = 0;
        for (int64_t i = 0; i < n; i++)
            s += expf(cu_tof<T>(x[base + i * inner]) - m);
        float inv = 1.0f / s, logs = logf(s);
        for (int64_t i = 0; i < n; i++) {
            float v = cu_tof<T>(x[base + i * inner]);
            y[base + i * inner] = cu_fromf<T>(logsm ? v - m - logs : expf(v - m) * inv);
        }
    }
}

static rlx_status k_softmax(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *xn = t->in_node[0];
    int r = xn->shape.ndim;
    int axis = t->node->attrs.softmax.axis;
    if (axis < 0)
        axis += r;
    int64_t outer = 1, n = r ? xn->shape.dims[axis] : 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= xn->shape.dims[d];
    for (int d = axis + 1; d < r; d++)
        inner *= xn->shape.dims[d];
    if (!outer || !n || !inner)
        return RLX_OK;
    int logsm = t->node->op == RLX_OP_LOG_SOFTMAX;
    rlx_dtype dt = xn->dtype;
    if (inner == 1 && outer < (1LL << 31)) {
        int threads = n >= 1024 ? 256 : n >= 256 ? 128 : 32;
        CU_FLOAT_DISPATCH(
            dt, T, cu_launch(softmax_rows<T>, (unsigned)outer, threads, 0, (const T *)t->in[0], (T *)t->out, n, logsm));
    } else {
        CU_FLOAT_DISPATCH(dt, T,
                          cu_launch(softmax_strided<T>, cu_blocks(outer * inner, 256), 256, 0, (const T *)t->in[0],
                                    (T *)t->out, outer, n, inner, logsm));
    }
    return rlx_cu_check(t, "softmax launch");
}

/* ------------------------------------------------------------ norms */

/* Norms of x, or of the residual sum x + res.  KEEP (add_rms_norm_keep):
 * the sum is rounded to T, as the unfused add would store it, written to
 * sum and normalised as rounded; a template flag, so that the other
 * instances carry none of it. */

/* One warp per row: mean, then variance about the mean (second read hits
 * L1), then the scaled write. */
template <typename T, bool KEEP>
__global__ void norm_rows(const T *x, const T *res, const T *gamma, const T *beta, T *y, T *sum, int64_t rows,
                          int64_t n, float eps, int is_layer)
{
    cu_grid_wait();
    int64_t row = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const T *xr = x + row * n, *rr = res ? res + row * n : NULL;
    T *yr = y + row * n, *sr = KEEP ? sum + row * n : NULL;
#define XV(i)                                                           \
    (KEEP ? cu_tof<T>(cu_fromf<T>(cu_tof<T>(xr[i]) + cu_tof<T>(rr[i]))) \
     : rr ? cu_tof<T>(xr[i]) + cu_tof<T>(rr[i])                         \
          : cu_tof<T>(xr[i]))
    float mean = 0;
    if (is_layer) {
        float s = 0;
        for (int64_t i = lane; i < n; i += 32)
            s += XV(i);
        mean = cu_warp_sum(s) / (float)n;
    }
    float v = 0;
    for (int64_t i = lane; i < n; i += 32) {
        float xi = XV(i), d = xi - mean;
        v += d * d;
        if (KEEP)
            sr[i] = cu_fromf<T>(xi);
    }
    float inv = rsqrtf(cu_warp_sum(v) / (float)n + eps);
    for (int64_t i = lane; i < n; i += 32) {
        float o = (XV(i) - mean) * inv;
        if (gamma)
            o *= cu_tof<T>(gamma[i]);
        if (beta)
            o += cu_tof<T>(beta[i]);
        yr[i] = cu_fromf<T>(o);
    }
#undef XV
}

/* Rows of at most 32 * PER * V elements: one warp per row, the row read
 * once with 16-byte loads into registers (V elements per load), then the
 * statistics and the write from registers. */
template <typename T, int V> struct norm_vec {
    union {
        uint4 u[V * sizeof(T) / 16];
        T t[V];
    };
};

template <typename T, int V> __device__ __forceinline__ void norm_load(const T *p, float (&o)[V])
{
    norm_vec<T, V> b;
#pragma unroll
    for (int w = 0; w < (int)(V * sizeof(T) / 16); w++)
        b.u[w] = ((const uint4 *)p)[w];
#pragma unroll
    for (int e = 0; e < V; e++)
        o[e] = cu_tof<T>(b.t[e]);
}

template <typename T, int V, int PER, bool KEEP>
__global__ void norm_rows_reg(const T *x, const T *res, const T *gamma, const T *beta, T *y, T *sum, int64_t rows,
                              int n, float eps, int is_layer)
{
    cu_grid_wait();
    int64_t row = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    const int chunks = n / V;
    /* every load of the row is issued before any store (a store to sum
     * between them would order each chunk's loads after the previous
     * chunk's store: four round trips instead of one) */
    float v[PER][V];
    norm_vec<T, V> rv[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int c = lane + 32 * j;
        if (c < chunks) {
            norm_load<T, V>(x + row * n + c * V, v[j]);
            if (res)
#pragma unroll
                for (int w = 0; w < (int)(V * sizeof(T) / 16); w++)
                    rv[j].u[w] = ((const uint4 *)(res + row * n + c * V))[w];
        }
    }
    float s = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int c = lane + 32 * j;
        if (c < chunks) {
            if (KEEP) {
                norm_vec<T, V> o;
#pragma unroll
                for (int e = 0; e < V; e++) {
                    o.t[e] = cu_fromf<T>(v[j][e] + cu_tof<T>(rv[j].t[e]));
                    v[j][e] = cu_tof<T>(o.t[e]);
                }
#pragma unroll
                for (int w = 0; w < (int)(V * sizeof(T) / 16); w++)
                    ((uint4 *)(sum + row * n + c * V))[w] = o.u[w];
            } else if (res) {
#pragma unroll
                for (int e = 0; e < V; e++)
                    v[j][e] += cu_tof<T>(rv[j].t[e]);
            }
#pragma unroll
            for (int e = 0; e < V; e++)
                s += v[j][e];
        }
    }
    const float mean = is_layer ? cu_warp_sum(s) / (float)n : 0.0f;
    float q = 0;
#pragma unroll
    for (int j = 0; j < PER; j++)
        if (lane + 32 * j < chunks)
#pragma unroll
            for (int e = 0; e < V; e++) {
                float d = v[j][e] - mean;
                q += d * d;
            }
    const float inv = rsqrtf(cu_warp_sum(q) / (float)n + eps);
    /* gamma and beta, all loaded before the first store for the same reason */
    norm_vec<T, V> gv[PER], bv[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int c = lane + 32 * j;
        if (c < chunks)
#pragma unroll
            for (int w = 0; w < (int)(V * sizeof(T) / 16); w++) {
                if (gamma)
                    gv[j].u[w] = ((const uint4 *)(gamma + c * V))[w];
                if (beta)
                    bv[j].u[w] = ((const uint4 *)(beta + c * V))[w];
            }
    }
#pragma unroll
    for (int j = 0; j < PER; j++) {
        int c = lane + 32 * j;
        if (c >= chunks)
            continue;
        norm_vec<T, V> o;
#pragma unroll
        for (int e = 0; e < V; e++) {
            float r = (v[j][e] - mean) * inv;
            if (gamma)
                r *= cu_tof<T>(gv[j].t[e]);
            if (beta)
                r += cu_tof<T>(bv[j].t[e]);
            o.t[e] = cu_fromf<T>(r);
        }
#pragma unroll
        for (int w = 0; w < (int)(V * sizeof(T) / 16); w++)
            ((uint4 *)(y + row * n + c * V))[w] = o.u[w];
    }
}

template <typename T>
static bool norm_launch_reg(const void *x, const void *res, const void *gamma, const void *beta, void *y, void *sum,
                            int64_t rows, int64_t n, float eps, int is_layer)
{
    const int V = 16 / (int)sizeof(T);
    const void *ptrs[6] = {x, res, gamma, beta, y, sum};
    for (int i = 0; i < 6; i++)
        if ((uintptr_t)ptrs[i] & 15)
            return false;
    if (n % V || n / V > 32 * 8)
        return false;
    int per = (int)((n / V + 31) / 32);
    int blocks = cu_blocks(rows * 32, 128);
#define NR_LAUNCH(P)                                                                                           \
    (sum ? cu_launch(norm_rows_reg<T, 16 / sizeof(T), P, true>, blocks, 128, 0, (const T *)x, (const T *)res,  \
                     (const T *)gamma, (const T *)beta, (T *)y, (T *)sum, rows, (int)n, eps, is_layer)         \
         : cu_launch(norm_rows_reg<T, 16 / sizeof(T), P, false>, blocks, 128, 0, (const T *)x, (const T *)res, \
                     (const T *)gamma, (const T *)beta, (T *)y, (T *)sum, rows, (int)n, eps, is_layer))
    if (per <= 1)
        NR_LAUNCH(1);
    else if (per <= 2)
        NR_LAUNCH(2);
    else if (per <= 4)
        NR_LAUNCH(4);
    else
        NR_LAUNCH(8);
#undef NR_LAUNCH
    return true;
}

static rlx_status k_norm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *xn = t->in_node[0];
    rlx_op op = t->node->op;
    int is_layer = op == RLX_OP_LAYER_NORM || op == RLX_OP_ADD_LAYER_NORM;
    int keep = op == RLX_OP_ADD_RMS_NORM_KEEP; /* out is [2, ...]: the sum, then its norm */
    int fused = op == RLX_OP_ADD_LAYER_NORM || op == RLX_OP_ADD_RMS_NORM || keep;
    int64_t n = xn->shape.dims[xn->shape.ndim - 1];
    int64_t total = rlx_shape_numel(&xn->shape), rows = n ? total / n : 0;
    if (!rows || !n)
        return RLX_OK;
    int k = fused ? 2 : 1;
    const void *res = fused ? t->in[1] : NULL;
    const void *gamma = t->node->attrs.norm.has_gamma ? t->in[k++] : NULL;
    const void *beta = (is_layer && t->node->attrs.norm.has_beta) ? t->in[k++] : NULL;
    float eps = (float)t->node->attrs.norm.eps;
    void *sum = keep ? t->out : NULL;
    void *y = keep ? (char *)t->out + (size_t)total * rlx_dtype_size(xn->dtype) : t->out;
    bool done = false;
    CU_FLOAT_DISPATCH(xn->dtype, T,
                      done = norm_launch_reg<T>(t->in[0], res, gamma, beta, y, sum, rows, n, eps, is_layer));
    if (!done)
        CU_FLOAT_DISPATCH(xn->dtype, T,
                          (keep ? cu_launch(norm_rows<T, true>, cu_blocks(rows * 32, 128), 128, 0, (const T *)t->in[0],
                                            (const T *)res, (const T *)gamma, (const T *)beta, (T *)y, (T *)sum, rows,
                                            n, eps, is_layer)
                                : cu_launch(norm_rows<T, false>, cu_blocks(rows * 32, 128), 128, 0, (const T *)t->in[0],
                                            (const T *)res, (const T *)gamma, (const T *)beta, (T *)y, (T *)sum, rows,
                                            n, eps, is_layer)));
    return rlx_cu_check(t, "norm launch");
}

/* ------------------------------------------------ softmax(x*scale + mask) */

typedef struct ssm_state {
    int64_t outer, n, inner;
    int nd;
    int64_t dims[CU_MAX_DIMS], mst[CU_MAX_DIMS]; /* x dims, mask strides */
} ssm_state;

template <typename T>
__device__ __forceinline__ float ssm_val(const T *x, const void *mask, int mdt, const ssm_state &s, float scale,
                                         int64_t o)
{
    float v = cu_tof<T>(x[o]) * scale;
    if (mdt >= 0) {
        int64_t mo = 0, q = o;
        for (int d = s.nd - 1; d >= 0; d--) {
            mo += (q % s.dims[d]) * s.mst[d];
            q /= s.dims[d];
        }
        if (mdt == RLX_BOOL)
            v = ((const unsigned char *)mask)[mo] ? v : -INFINITY;
        else
            v += cu_tof<T>(((const T *)mask)[mo]);
    }
    return v;
}

/* One warp per row (outer, inner): max, sum, write. */
template <typename T> __global__ void ssm_kernel(const T *x, const void *mask, int mdt, T *y, ssm_state s, float scale)
{
    cu_grid_wait();
    int64_t row = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (row >= s.outer * s.inner)
        return;
    int64_t base = (row / s.inner) * s.n * s.inner + (row % s.inner);
    float m = -INFINITY;
    bool nan = false;
    for (int64_t i = lane; i < s.n; i += 32) {
        float v = ssm_val<T>(x, mask, mdt, s, scale, base + i * s.inner);
        nan |= v != v;
        m = fmaxf(m, v);
    }
    m = cu_warp_max(m);
    if (__any_sync(0xffffffffu, nan))
        m = rlx_nan_f();
    float sum = 0;
    for (int64_t i = lane; i < s.n; i += 32)
        sum += __expf(ssm_val<T>(x, mask, mdt, s, scale, base + i * s.inner) - m);
    float inv = 1.0f / cu_warp_sum(sum);
    for (int64_t i = lane; i < s.n; i += 32) {
        int64_t o = base + i * s.inner;
        y[o] = cu_fromf<T>(__expf(ssm_val<T>(x, mask, mdt, s, scale, o) - m) * inv);
    }
}

static rlx_status prep_ssm(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    ssm_state *s = (ssm_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    const rlx_node_data *xn = t->in_node[0];
    int axis = t->node->attrs.sm.axis;
    if (axis < 0)
        axis += xn->shape.ndim;
    s->outer = 1;
    s->inner = 1;
    s->n = xn->shape.dims[axis];
    for (int d = 0; d < axis; d++)
        s->outer *= xn->shape.dims[d];
    for (int d = axis + 1; d < xn->shape.ndim; d++)
        s->inner *= xn->shape.dims[d];
    s->nd = xn->shape.ndim;
    for (int d = 0; d < s->nd; d++)
        s->dims[d] = xn->shape.dims[d];
    if (t->node->attrs.sm.has_mask)
        rlx_shape_broadcast_strides(&t->in_node[1]->shape, &xn->shape, s->mst);
    t->state = s;
    return RLX_OK;
}

static rlx_status k_ssm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const ssm_state *s = (const ssm_state *)t->state;
    int64_t rows = s->outer * s->inner;
    if (!rows || !s->n)
        return RLX_OK;
    int mdt = t->node->attrs.sm.has_mask ? (int)t->in_node[1]->dtype : -1;
    const void *mask = mdt >= 0 ? t->in[1] : NULL;
    float scale = (float)t->node->attrs.sm.scale;
    CU_FLOAT_DISPATCH(t->node->dtype, T,
                      cu_launch(ssm_kernel<T>, cu_blocks(rows * 32, 128), 128, 0, (const T *)t->in[0], mask, mdt,
                                (T *)t->out, *s, scale));
    return rlx_cu_check(t, "softmax launch");
}

static bool ssm_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (!cu_is_f(n->dtype))
        return false;
    if (n->attrs.sm.has_mask) {
        rlx_dtype md = g->nodes[n->in[1]].dtype;
        return md == RLX_BOOL || md == n->dtype;
    }
    return true;
}

extern "C" void rlx_cuda_register_reduce(cu_kernel *tab)
{
    for (int op = RLX_OP_REDUCE_SUM; op <= RLX_OP_REDUCE_PROD; op++)
        tab[op] = (cu_kernel){k_reduce, reduce_scratch, reduce_ok, prep_reduce, free_state};
    tab[RLX_OP_ARGMAX] = (cu_kernel){k_arg, NULL, arg_ok, NULL, NULL};
    tab[RLX_OP_ARGMIN] = (cu_kernel){k_arg, NULL, arg_ok, NULL, NULL};
    tab[RLX_OP_SOFTMAX] = (cu_kernel){k_softmax, NULL, NULL, NULL, NULL};
    tab[RLX_OP_LOG_SOFTMAX] = (cu_kernel){k_softmax, NULL, NULL, NULL, NULL};
    tab[RLX_OP_LAYER_NORM] = (cu_kernel){k_norm, NULL, NULL, NULL, NULL};
    tab[RLX_OP_RMS_NORM] = (cu_kernel){k_norm, NULL, NULL, NULL, NULL};
    tab[RLX_OP_ADD_LAYER_NORM] = (cu_kernel){k_norm, NULL, NULL, NULL, NULL};
    tab[RLX_OP_ADD_RMS_NORM] = (cu_kernel){k_norm, NULL, NULL, NULL, NULL};
    tab[RLX_OP_ADD_RMS_NORM_KEEP] = (cu_kernel){k_norm, NULL, NULL, NULL, NULL};
    tab[RLX_OP_SOFTMAX_SCALE_MASK] = (cu_kernel){k_ssm, NULL, ssm_ok, prep_ssm, free_state};
}
