/* k_shape.cu - data movement (reshape, transpose, slice, expand, concat,
 * gather, pad) by element size, so one path serves every dtype; and rotary
 * position embedding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cuda_common.h"

#define THREADS 256

static void free_state(rlx_thunk *t) { free(t->state); }

static bool any_ok(const rlx_graph *g, const rlx_node_data *n)
{
    (void)g;
    (void)n;
    return true;
}

/* dst (dense) = src read through walk strides (operand 0). */
template <typename E> __global__ void strided_copy(const E *src, E *dst, cu_walk w)
{
    cu_grid_wait();
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < w.total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t off = 0, q = i;
        for (int d = w.nd - 1; d >= 0; d--) {
            off += (q % w.dims[d]) * w.st[0][d];
            q /= w.dims[d];
        }
        dst[i] = src[off];
    }
}

/* The same with 32-bit index arithmetic (sizes under 2^31 elements). */
typedef struct walk32 {
    int nd;
    unsigned total;
    unsigned dims[CU_MAX_DIMS];
    int st[CU_MAX_DIMS];
} walk32;

/* strided_copy through a walk32; with U > 1 by runs of U consecutive
 * elements, contiguous in both (w walks the runs: its innermost dim counts
 * runs, its stride is U), the index arithmetic once a run, not once an
 * element.  Head transposes ([B, S, H, D] -> [B, H, S, D]) copied one
 * 16-byte unit a thread ran at about half the memory speed. */
template <typename E, int U = 1> __global__ void strided_copy32(const E *src, E *dst, walk32 w)
{
    cu_grid_wait();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < w.total; i += gridDim.x * blockDim.x) {
        int off = 0;
        unsigned q = i;
        for (int d = w.nd - 1; d >= 0; d--) {
            off += (int)(q % w.dims[d]) * w.st[d];
            q /= w.dims[d];
        }
#pragma unroll
        for (int u = 0; u < U; u++)
            dst[(size_t)i * U + u] = src[off + u];
    }
}

/* 2-d transpose of the last two collapsed dims through a shared tile. */
template <typename E> __global__ void transpose_tile(const E *src, E *dst, int64_t batch, int64_t R, int64_t C)
{
    cu_grid_wait();
    /* src [batch][R][C] -> dst [batch][C][R] */
    __shared__ E tile[32][33];
    int64_t b = blockIdx.z;
    int64_t r0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
    const E *s = src + b * R * C;
    E *d = dst + b * R * C;
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        int64_t r = r0 + k, c = c0 + threadIdx.x;
        if (r < R && c < C)
            tile[k][threadIdx.x] = s[r * C + c];
    }
    __syncthreads();
    for (int k = threadIdx.y; k < 32; k += blockDim.y) {
        int64_t c = c0 + k, r = r0 + threadIdx.x;
        if (r < R && c < C)
            d[c * R + r] = tile[threadIdx.x][k];
    }
}

static rlx_status launch_strided(const rlx_thunk *t, const void *src, const cu_walk *w, size_t es)
{
    if (!w->total)
        return RLX_OK;
    if (w->nd == 0 || (w->nd == 1 && w->st[0][0] == 1)) {
        cudaError_t e = cudaMemcpyAsync(t->out, src, (size_t)w->total * es, cudaMemcpyDeviceToDevice, rlx_cu_stream);
        return e == cudaSuccess ? RLX_OK : rlx_cu_error(t, e, "copy");
    }
    /* contiguous innermost runs of whole 16-byte units: move uint4s */
    cu_walk v = *w;
    size_t ves = es;
    if (w->st[0][w->nd - 1] == 1 && ((size_t)w->dims[w->nd - 1] * es) % 16 == 0 && (uintptr_t)src % 16 == 0) {
        bool ok = true;
        for (int d = 0; d < w->nd - 1; d++)
            ok = ok && ((size_t)w->st[0][d] * es) % 16 == 0;
        if (ok) {
            int64_t per = (int64_t)(16 / es);
            v.dims[w->nd - 1] /= per;
            for (int d = 0; d < w->nd - 1; d++)
                v.st[0][d] /= per;
            v.total /= per;
            ves = 16;
        }
    }
    bool small = v.total < (1LL << 31);
    int64_t span = 0;
    for (int d = 0; d < v.nd && small; d++) {
        span += (v.dims[d] - 1) * (v.st[0][d] < 0 ? -v.st[0][d] : v.st[0][d]);
        small = span < (1LL << 31);
    }
    if (small) {
        walk32 w32;
        memset(&w32, 0, sizeof w32);
        w32.nd = v.nd;
        w32.total = (unsigned)v.total;
        for (int d = 0; d < v.nd; d++) {
            w32.dims[d] = (unsigned)v.dims[d];
            w32.st[d] = (int)v.st[0][d];
        }
        /* runs of 4 units along a contiguous innermost dim */
        const int RUN = 4;
        if (ves == 16 && v.st[0][v.nd - 1] == 1 && v.dims[v.nd - 1] % RUN == 0) {
            w32.dims[v.nd - 1] /= RUN;
            w32.st[v.nd - 1] = RUN;
            w32.total /= RUN;
            cu_launch(strided_copy32<uint4, RUN>, cu_blocks(w32.total, THREADS), THREADS, 0, (const uint4 *)src,
                      (uint4 *)t->out, w32);
            return rlx_cu_check(t, "strided copy launch");
        }
        int b32 = cu_blocks(v.total, THREADS);
        switch (ves) {
        case 1:
            cu_launch(strided_copy32<unsigned char>, b32, THREADS, 0, (const unsigned char *)src,
                      (unsigned char *)t->out, w32);
            break;
        case 2:
            cu_launch(strided_copy32<unsigned short>, b32, THREADS, 0, (const unsigned short *)src,
                      (unsigned short *)t->out, w32);
            break;
        case 4:
            cu_launch(strided_copy32<unsigned int>, b32, THREADS, 0, (const unsigned int *)src, (unsigned int *)t->out,
                      w32);
            break;
        case 8:
            cu_launch(strided_copy32<unsigned long long>, b32, THREADS, 0, (const unsigned long long *)src,
                      (unsigned long long *)t->out, w32);
            break;
        default: cu_launch(strided_copy32<uint4>, b32, THREADS, 0, (const uint4 *)src, (uint4 *)t->out, w32); break;
        }
        return rlx_cu_check(t, "strided copy launch");
    }
    int blocks = cu_blocks(w->total, THREADS);
    switch (es) {
    case 1:
        cu_launch(strided_copy<unsigned char>, blocks, THREADS, 0, (const unsigned char *)src, (unsigned char *)t->out,
                  *w);
        break;
    case 2:
        cu_launch(strided_copy<unsigned short>, blocks, THREADS, 0, (const unsigned short *)src,
                  (unsigned short *)t->out, *w);
        break;
    case 4:
        cu_launch(strided_copy<unsigned int>, blocks, THREADS, 0, (const unsigned int *)src, (unsigned int *)t->out,
                  *w);
        break;
    default:
        cu_launch(strided_copy<unsigned long long>, blocks, THREADS, 0, (const unsigned long long *)src,
                  (unsigned long long *)t->out, *w);
        break;
    }
    return rlx_cu_check(t, "strided copy launch");
}

static rlx_status k_reshape(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    if (t->out == t->in[0])
        return RLX_OK;
    cudaError_t e = cudaMemcpyAsync(t->out, t->in[0], rlx_node_bytes(t->node), cudaMemcpyDeviceToDevice, rlx_cu_stream);
    return e == cudaSuccess ? RLX_OK : rlx_cu_error(t, e, "reshape copy");
}

typedef struct copy_state {
    cu_walk w;
    int64_t first; /* element offset of the source start */
} copy_state;

static rlx_status prep_transpose(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    copy_state *s = (copy_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    const rlx_node_data *xn = t->in_node[0];
    int64_t st[CU_MAX_DIMS], str[1][CU_MAX_DIMS];
    rlx_shape_strides(&xn->shape, st);
    for (int i = 0; i < xn->shape.ndim; i++)
        str[0][i] = st[t->node->attrs.transpose.perm[i]];
    rlx_cu_walk_init(&s->w, t->node->shape.ndim, t->node->shape.dims, 1, str);
    t->state = s;
    return RLX_OK;
}

static rlx_status k_transpose(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const copy_state *s = (const copy_state *)t->state;
    const cu_walk *w = &s->w;
    size_t es = rlx_dtype_size(t->node->dtype);
    /* [.., C, R] read as [.., R, C] swapped: a batched 2-d transpose */
    bool tile = false;
    int64_t batch = 1, R = 0, C = 0;
    if (w->nd >= 2 && w->st[0][w->nd - 2] == 1) {
        /* out dims [.., A, B]; source strides: A -> 1, B -> A (i.e. src [.., B, A]) */
        int64_t A = w->dims[w->nd - 2], B = w->dims[w->nd - 1];
        if (w->st[0][w->nd - 1] == A) {
            tile = true;
            R = B;
            C = A;
            for (int d = 0; d < w->nd - 2; d++) {
                int64_t expect = A * B;
                for (int e = d + 1; e < w->nd - 2; e++)
                    expect *= w->dims[e];
                if (w->st[0][d] != expect)
                    tile = false;
                batch *= w->dims[d];
            }
        }
    }
    if (tile && batch < 65536 && (R + 31) / 32 < 65536 && (es == 2 || es == 4)) {
        dim3 grid((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32), (unsigned)batch), block(32, 8);
        if (es == 2)
            cu_launch(transpose_tile<unsigned short>, grid, block, 0, (const unsigned short *)t->in[0],
                      (unsigned short *)t->out, batch, R, C);
        else
            cu_launch(transpose_tile<unsigned int>, grid, block, 0, (const unsigned int *)t->in[0],
                      (unsigned int *)t->out, batch, R, C);
        return rlx_cu_check(t, "transpose launch");
    }
    return launch_strided(t, t->in[0], w, es);
}

static rlx_status prep_slice(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    copy_state *s = (copy_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    const rlx_node_data *xn = t->in_node[0];
    const rlx_shape *os = &t->node->shape;
    int64_t st[CU_MAX_DIMS], str[1][CU_MAX_DIMS];
    rlx_shape_strides(&xn->shape, st);
    for (int i = 0; i < os->ndim; i++) {
        s->first += t->node->attrs.slice.start[i] * st[i];
        str[0][i] = t->node->attrs.slice.step[i] * st[i];
    }
    rlx_cu_walk_init(&s->w, os->ndim, os->dims, 1, str);
    t->state = s;
    return RLX_OK;
}

static rlx_status k_slice(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const copy_state *s = (const copy_state *)t->state;
    size_t es = rlx_dtype_size(t->node->dtype);
    const char *src = (const char *)t->in[0] + s->first * (int64_t)es;
    if ((const void *)src == t->out)
        return RLX_OK; /* a view the planner placed in its source */
    return launch_strided(t, src, &s->w, es);
}

static rlx_status prep_expand(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    copy_state *s = (copy_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    int64_t str[1][CU_MAX_DIMS];
    rlx_shape_broadcast_strides(&t->in_node[0]->shape, &t->node->shape, str[0]);
    rlx_cu_walk_init(&s->w, t->node->shape.ndim, t->node->shape.dims, 1, str);
    t->state = s;
    return RLX_OK;
}

static rlx_status k_expand(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const copy_state *s = (const copy_state *)t->state;
    return launch_strided(t, t->in[0], &s->w, rlx_dtype_size(t->node->dtype));
}

static rlx_status k_concat(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_shape *os = &t->node->shape;
    int axis = t->node->attrs.concat.axis;
    size_t es = rlx_dtype_size(t->node->dtype);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= os->dims[d];
    for (int d = axis + 1; d < os->ndim; d++)
        inner *= os->dims[d];
    size_t out_row = (size_t)(os->dims[axis] * inner) * es;
    if (!outer || !out_row)
        return RLX_OK;
    size_t at = 0;
    for (int k = 0; k < t->node->n_in; k++) {
        size_t chunk = (size_t)(t->in_node[k]->shape.dims[axis] * inner) * es;
        if (!chunk)
            continue;
        cudaError_t e = cudaMemcpy2DAsync((char *)t->out + at, out_row, t->in[k], chunk, chunk, (size_t)outer,
                                          cudaMemcpyDeviceToDevice, rlx_cu_stream);
        if (e != cudaSuccess)
            return rlx_cu_error(t, e, "concat copy");
        at += chunk;
    }
    return RLX_OK;
}

/* Gather rows of `row` bytes; an index out of range writes zeros and is
 * recorded as a fault, so the run fails as the CPU reference's does. */
template <typename E>
__global__ void gather_kernel(const E *data, const void *idx, int idx_dt, E *out, int64_t outer, int64_t n, int64_t m,
                              int64_t inner, cu_fault *fault, int node)
{
    cu_grid_wait();
    int64_t total = outer * m * inner;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = i % inner, r = i / inner;
        int64_t j = r % m, o = r / m;
        int64_t ix0 = idx_dt == RLX_I64 ? ((const long long *)idx)[j] : ((const int *)idx)[j];
        int64_t ix = ix0 < 0 ? ix0 + n : ix0;
        bool ok = ix >= 0 && ix < n;
        out[i] = ok ? data[(o * n + ix) * inner + e] : E();
        if (!ok)
            cu_report_index(fault, node, ix0, n);
    }
}

static rlx_status k_gather(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *dn = t->in_node[0], *in = t->in_node[1];
    int axis = t->node->attrs.gather.axis;
    size_t es = rlx_dtype_size(dn->dtype);
    int64_t outer = 1, n = dn->shape.dims[axis], inner = 1, m = rlx_shape_numel(&in->shape);
    for (int d = 0; d < axis; d++)
        outer *= dn->shape.dims[d];
    for (int d = axis + 1; d < dn->shape.ndim; d++)
        inner *= dn->shape.dims[d];
    int64_t total = outer * m * inner;
    if (!total)
        return RLX_OK;
    /* widen the element to 16 bytes where rows allow */
    int64_t bytes_row = inner * (int64_t)es;
    int blocks;
    if (bytes_row % 16 == 0 && (uintptr_t)t->in[0] % 16 == 0) {
        int64_t in16 = bytes_row / 16;
        blocks = cu_blocks(outer * m * in16, THREADS);
        cu_launch(gather_kernel<uint4>, blocks, THREADS, 0, (const uint4 *)t->in[0], t->in[1], in->dtype,
                  (uint4 *)t->out, outer, n, m, in16, rlx_cu_fault, t->id);
        return rlx_cu_check(t, "gather launch");
    }
    blocks = cu_blocks(total, THREADS);
    switch (es) {
    case 1:
        cu_launch(gather_kernel<unsigned char>, blocks, THREADS, 0, (const unsigned char *)t->in[0], t->in[1],
                  in->dtype, (unsigned char *)t->out, outer, n, m, inner, rlx_cu_fault, t->id);
        break;
    case 2:
        cu_launch(gather_kernel<unsigned short>, blocks, THREADS, 0, (const unsigned short *)t->in[0], t->in[1],
                  in->dtype, (unsigned short *)t->out, outer, n, m, inner, rlx_cu_fault, t->id);
        break;
    case 4:
        cu_launch(gather_kernel<unsigned int>, blocks, THREADS, 0, (const unsigned int *)t->in[0], t->in[1], in->dtype,
                  (unsigned int *)t->out, outer, n, m, inner, rlx_cu_fault, t->id);
        break;
    default:
        cu_launch(gather_kernel<unsigned long long>, blocks, THREADS, 0, (const unsigned long long *)t->in[0], t->in[1],
                  in->dtype, (unsigned long long *)t->out, outer, n, m, inner, rlx_cu_fault, t->id);
        break;
    }
    return rlx_cu_check(t, "gather launch");
}

static bool gather_ok(const rlx_graph *g, const rlx_node_data *n)
{
    rlx_dtype it = g->nodes[n->in[1]].dtype;
    return it == RLX_I64 || it == RLX_I32;
}

/* ------------------------------------------------------------ pad */

typedef struct pad_state {
    int r, mode;
    int64_t idims[CU_MAX_DIMS], odims[CU_MAX_DIMS], ist[CU_MAX_DIMS], begin[CU_MAX_DIMS];
    unsigned long long fill;
} pad_state;

__device__ __forceinline__ int64_t pad_src(int64_t i, int64_t n, int64_t b, int mode)
{
    int64_t k = i - b;
    if (k >= 0 && k < n)
        return k;
    if (mode == RLX_PAD_REFLECT) {
        if (n == 1)
            return 0;
        if (k < 0)
            k = -k;
        if (k >= n)
            k = 2 * (n - 1) - k;
        return k;
    }
    if (mode == RLX_PAD_EDGE)
        return k < 0 ? 0 : n - 1;
    return -1;
}

template <typename E> __global__ void pad_kernel(const E *x, E *y, int64_t total, pad_state s)
{
    cu_grid_wait();
    E fill;
    memcpy(&fill, &s.fill, sizeof(E));
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t q = i, off = 0;
        bool constant = false;
        for (int d = s.r - 1; d >= 0; d--) {
            int64_t id = q % s.odims[d];
            q /= s.odims[d];
            int64_t k = pad_src(id, s.idims[d], s.begin[d], s.mode);
            if (k < 0)
                constant = true;
            else
                off += k * s.ist[d];
        }
        y[i] = constant ? fill : x[off];
    }
}

static void host_store(void *p, rlx_dtype t, double v)
{
    switch (t) {
    case RLX_F32: *(float *)p = (float)v; break;
    case RLX_F16: *(uint16_t *)p = rlx_f32_to_f16((float)v); break;
    case RLX_BF16: *(uint16_t *)p = rlx_f32_to_bf16((float)v); break;
    case RLX_F64: *(double *)p = v; break;
    case RLX_I64: *(int64_t *)p = (int64_t)v; break;
    case RLX_I32: *(int32_t *)p = (int32_t)v; break;
    case RLX_I8: *(int8_t *)p = (int8_t)v; break;
    case RLX_U8: *(uint8_t *)p = (uint8_t)v; break;
    case RLX_BOOL: *(uint8_t *)p = v != 0; break;
    default: break;
    }
}

static rlx_status prep_pad(const rlx_graph *g, rlx_thunk *t)
{
    (void)g;
    pad_state *s = (pad_state *)rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    const rlx_shape *is = &t->in_node[0]->shape, *os = &t->node->shape;
    s->r = is->ndim;
    s->mode = t->node->attrs.pad.mode;
    rlx_shape_strides(is, s->ist);
    for (int d = 0; d < s->r; d++) {
        s->idims[d] = is->dims[d];
        s->odims[d] = os->dims[d];
        s->begin[d] = t->node->attrs.pad.pads[d];
    }
    host_store(&s->fill, t->node->dtype, t->node->attrs.pad.value);
    t->state = s;
    return RLX_OK;
}

static rlx_status k_pad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const pad_state *s = (const pad_state *)t->state;
    int64_t total = rlx_shape_numel(&t->node->shape);
    if (!total)
        return RLX_OK;
    size_t es = rlx_dtype_size(t->node->dtype);
    int blocks = cu_blocks(total, THREADS);
    switch (es) {
    case 1:
        cu_launch(pad_kernel<unsigned char>, blocks, THREADS, 0, (const unsigned char *)t->in[0],
                  (unsigned char *)t->out, total, *s);
        break;
    case 2:
        cu_launch(pad_kernel<unsigned short>, blocks, THREADS, 0, (const unsigned short *)t->in[0],
                  (unsigned short *)t->out, total, *s);
        break;
    case 4:
        cu_launch(pad_kernel<unsigned int>, blocks, THREADS, 0, (const unsigned int *)t->in[0], (unsigned int *)t->out,
                  total, *s);
        break;
    default:
        cu_launch(pad_kernel<unsigned long long>, blocks, THREADS, 0, (const unsigned long long *)t->in[0],
                  (unsigned long long *)t->out, total, *s);
        break;
    }
    return rlx_cu_check(t, "pad launch");
}

/* ------------------------------------------------------------ rope */

/* One thread per rotated pair, its angle's cosine and sine from tab
 * [S][D/2] (the device's cu_rope_table); I as in rope_tables_kernel. */
template <typename T, typename I>
__global__ void rope_kernel(const T *x, const double2 *tab, T *y, int64_t pairs, int64_t S, int64_t D, int inter)
{
    cu_grid_wait();
    const I half = (I)(D / 2);
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pairs; p += (int64_t)gridDim.x * blockDim.x) {
        const I i = (I)p % half, r = (I)p / half, pos = r % (I)S;
        const int64_t rs = (int64_t)r;
        int64_t ia, ib;
        cu_rope_pair(i, D, inter, &ia, &ib);
        ia += rs * D;
        ib += rs * D;
        float x1 = cu_tof<T>(x[ia]), x2 = cu_tof<T>(x[ib]);
        const double2 cs = tab[(int64_t)pos * (int64_t)half + (int64_t)i];
        cu_rope_apply(cs.x, cs.y, &x1, &x2);
        y[ia] = cu_fromf<T>(x1);
        y[ib] = cu_fromf<T>(x2);
    }
}

/* RoPE by cos and sin tables (inputs 1 and 2): the leading dims of x and
 * where each row's table row lies in either table. */
typedef struct rope_rows {
    int nd;
    int64_t dims[RLX_MAX_DIMS], cst[RLX_MAX_DIMS], sst[RLX_MAX_DIMS];
} rope_rows;

/* ---- RoPE by 16-byte vectors: a thread rotates the P pairs of a vector
 * (interleaved: P = V / 2, the pairs side by side) or of two (halves:
 * P = V, the vectors at i0 and i0 + D/2), where the rows are whole vectors
 * and P divides D/2 (rope_vec_fits).  Each element is computed as the
 * scalar kernels compute it; one pair a thread (2-byte loads, the row's
 * index arithmetic for every pair) ran at about a tenth of memory speed. */
template <typename T, bool INTER> struct rope_vec_shape {
    static constexpr int V = 16 / (int)sizeof(T);
    static constexpr int P = INTER ? V / 2 : V;
    struct alignas(16) vec {
        T v[V];
    };
};

/* Rotates pairs [i0, i0 + P) of row xr into yr by c[k], s[k]. */
template <typename T, bool INTER>
__device__ __forceinline__ void rope_vec_rotate(const T *xr, T *yr, int64_t i0, int64_t half,
                                                const double (&c)[rope_vec_shape<T, INTER>::P],
                                                const double (&s)[rope_vec_shape<T, INTER>::P])
{
    typedef rope_vec_shape<T, INTER> sh;
    typedef typename sh::vec vec;
    if (INTER) {
        vec a = *(const vec *)(xr + 2 * i0);
#pragma unroll
        for (int k = 0; k < sh::P; k++) {
            float x1 = cu_tof<T>(a.v[2 * k]), x2 = cu_tof<T>(a.v[2 * k + 1]);
            cu_rope_apply(c[k], s[k], &x1, &x2);
            a.v[2 * k] = cu_fromf<T>(x1);
            a.v[2 * k + 1] = cu_fromf<T>(x2);
        }
        *(vec *)(yr + 2 * i0) = a;
    } else {
        vec a = *(const vec *)(xr + i0), b = *(const vec *)(xr + half + i0);
#pragma unroll
        for (int k = 0; k < sh::P; k++) {
            float x1 = cu_tof<T>(a.v[k]), x2 = cu_tof<T>(b.v[k]);
            cu_rope_apply(c[k], s[k], &x1, &x2);
            a.v[k] = cu_fromf<T>(x1);
            b.v[k] = cu_fromf<T>(x2);
        }
        *(vec *)(yr + i0) = a;
        *(vec *)(yr + half + i0) = b;
    }
}

/* The computed form: row r at position r % S of tab [S][D/2]. */
template <typename T, bool INTER, typename I>
__global__ void rope_vec_kernel(const T *x, const double2 *tab, T *y, int64_t groups, int64_t S, int64_t D)
{
    cu_grid_wait();
    typedef rope_vec_shape<T, INTER> sh;
    const I half = (I)(D / 2), per_row = half / (I)sh::P;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < groups; g += (int64_t)gridDim.x * blockDim.x) {
        const I r = (I)g / per_row, i0 = (I)g % per_row * (I)sh::P;
        const double2 *cs = tab + (int64_t)(r % (I)S) * half + i0;
        double c[sh::P], s[sh::P];
#pragma unroll
        for (int k = 0; k < sh::P; k++)
            c[k] = cs[k].x, s[k] = cs[k].y;
        rope_vec_rotate<T, INTER>(x + (int64_t)r * D, y + (int64_t)r * D, i0, half, c, s);
    }
}

/* The tables form: row r's table rows through the leading dims' strides. */
template <typename T, typename C, bool INTER, typename I>
__global__ void rope_tables_vec_kernel(const T *x, const C *cs, const C *sn, T *y, int64_t groups, int64_t D,
                                       rope_rows w)
{
    cu_grid_wait();
    typedef rope_vec_shape<T, INTER> sh;
    const I half = (I)(D / 2), per_row = half / (I)sh::P;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < groups; g += (int64_t)gridDim.x * blockDim.x) {
        const I r = (I)g / per_row, i0 = (I)g % per_row * (I)sh::P;
        I q = r, co = i0, so = i0;
        for (int d = w.nd - 1; d >= 0; d--) {
            const I k = q % (I)w.dims[d];
            q /= (I)w.dims[d];
            co += k * (I)w.cst[d];
            so += k * (I)w.sst[d];
        }
        double c[sh::P], s[sh::P];
#pragma unroll
        for (int k = 0; k < sh::P; k++)
            c[k] = (double)cu_tof<C>(cs[co + k]), s[k] = (double)cu_tof<C>(sn[so + k]);
        rope_vec_rotate<T, INTER>(x + (int64_t)r * D, y + (int64_t)r * D, i0, half, c, s);
    }
}

/* Whether x's rows of D elements (dtype size es) are whole 16-byte vectors
 * whose pairs fill vectors (rope_vec_shape), x and y 16-byte aligned. */
static bool rope_vec_fits(const void *x, const void *y, int64_t D, size_t es, int inter)
{
    const int64_t V = 16 / (int64_t)es, P = inter ? V / 2 : V;
    return D % 2 == 0 && (D / 2) % P == 0 && ((uintptr_t)x | (uintptr_t)y) % 16 == 0;
}

/* I: the index type, 32-bit where every index fits (a 64-bit division per
 * leading dim and pair cost more than the pair's memory traffic) */
template <typename T, typename C, typename I>
__global__ void rope_tables_kernel(const T *x, const C *cs, const C *sn, T *y, int64_t pairs, int64_t D, int inter,
                                   rope_rows w)
{
    cu_grid_wait();
    const I half = (I)(D / 2);
    for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < pairs; p += (int64_t)gridDim.x * blockDim.x) {
        I i = (I)p % half, q = (I)p / half, co = i, so = i;
        const int64_t row = (int64_t)q;
        int64_t ia, ib;
        for (int d = w.nd - 1; d >= 0; d--) {
            const I k = q % (I)w.dims[d];
            q /= (I)w.dims[d];
            co += k * (I)w.cst[d];
            so += k * (I)w.sst[d];
        }
        cu_rope_pair(i, D, inter, &ia, &ib);
        ia += row * D;
        ib += row * D;
        float x1 = cu_tof<T>(x[ia]), x2 = cu_tof<T>(x[ib]);
        cu_rope_apply((double)cu_tof<C>(cs[co]), (double)cu_tof<C>(sn[so]), &x1, &x2);
        y[ia] = cu_fromf<T>(x1);
        y[ib] = cu_fromf<T>(x2);
    }
}

static rlx_status k_rope_tables(const rlx_thunk *t)
{
    const rlx_node_data *xn = t->in_node[0];
    const int r = xn->shape.ndim;
    const int64_t D = xn->shape.dims[r - 1], pairs = rlx_shape_numel(&xn->shape) / 2;
    if (!pairs)
        return RLX_OK;
    rlx_shape want = xn->shape;
    want.dims[r - 1] = D / 2;
    int64_t cst[RLX_MAX_DIMS], sst[RLX_MAX_DIMS];
    rlx_shape_broadcast_strides(&t->in_node[1]->shape, &want, cst);
    rlx_shape_broadcast_strides(&t->in_node[2]->shape, &want, sst);
    rope_rows w;
    memset(&w, 0, sizeof w);
    w.nd = r - 1;
    for (int d = 0; d < r - 1; d++)
        w.dims[d] = xn->shape.dims[d], w.cst[d] = cst[d], w.sst[d] = sst[d];
    const int inter = t->node->attrs.rope.interleaved;
    const rlx_dtype ct = t->in_node[1]->dtype;
    if (t->in_node[2]->dtype != ct || (ct != RLX_F32 && ct != xn->dtype))
        return rlx_cu_fail(t, RLX_ERR_UNSUPPORTED, "rope tables of %s and %s over %s x", rlx_dtype_name(ct),
                           rlx_dtype_name(t->in_node[2]->dtype), rlx_dtype_name(xn->dtype));
    /* 32-bit indices where the pairs and the tables' elements fit */
    const bool narrow = pairs < INT32_MAX && rlx_shape_numel(&t->in_node[1]->shape) < INT32_MAX &&
                        rlx_shape_numel(&t->in_node[2]->shape) < INT32_MAX;
    if (rope_vec_fits(t->in[0], t->out, D, rlx_dtype_size(xn->dtype), inter)) {
        const int64_t V = 16 / (int64_t)rlx_dtype_size(xn->dtype), groups = pairs / (inter ? V / 2 : V);
        const unsigned vb = cu_blocks(groups, THREADS);
#define ROPE_TABLES_VEC(C, INTER, I)                                                                         \
    CU_FLOAT_DISPATCH(xn->dtype, T,                                                                          \
                      cu_launch(rope_tables_vec_kernel<T, C, INTER, I>, vb, THREADS, 0, (const T *)t->in[0], \
                                (const C *)t->in[1], (const C *)t->in[2], (T *)t->out, groups, D, w))
#define ROPE_TABLES_VEC_I(C, INTER)              \
    do {                                         \
        if (narrow)                              \
            ROPE_TABLES_VEC(C, INTER, uint32_t); \
        else                                     \
            ROPE_TABLES_VEC(C, INTER, int64_t);  \
    } while (0)
        if (ct == RLX_F32 && inter)
            ROPE_TABLES_VEC_I(float, true);
        else if (ct == RLX_F32)
            ROPE_TABLES_VEC_I(float, false);
        else if (inter)
            ROPE_TABLES_VEC_I(T, true);
        else
            ROPE_TABLES_VEC_I(T, false);
#undef ROPE_TABLES_VEC_I
#undef ROPE_TABLES_VEC
        return rlx_cu_check(t, "rope launch");
    }
    const unsigned blocks = cu_blocks(pairs, THREADS);
#define ROPE_TABLES(C, I)                                                                             \
    CU_FLOAT_DISPATCH(xn->dtype, T,                                                                   \
                      cu_launch(rope_tables_kernel<T, C, I>, blocks, THREADS, 0, (const T *)t->in[0], \
                                (const C *)t->in[1], (const C *)t->in[2], (T *)t->out, pairs, D, inter, w))
    if (ct == RLX_F32 && narrow)
        ROPE_TABLES(float, uint32_t);
    else if (ct == RLX_F32)
        ROPE_TABLES(float, int64_t);
    else if (narrow)
        CU_FLOAT_DISPATCH(xn->dtype, T,
                          cu_launch(rope_tables_kernel<T, T, uint32_t>, blocks, THREADS, 0, (const T *)t->in[0],
                                    (const T *)t->in[1], (const T *)t->in[2], (T *)t->out, pairs, D, inter, w));
    else
        CU_FLOAT_DISPATCH(xn->dtype, T,
                          cu_launch(rope_tables_kernel<T, T, int64_t>, blocks, THREADS, 0, (const T *)t->in[0],
                                    (const T *)t->in[1], (const T *)t->in[2], (T *)t->out, pairs, D, inter, w));
#undef ROPE_TABLES
    return rlx_cu_check(t, "rope launch");
}

/* Tables of f32 or of x's dtype, both the same. */
static bool rope_ok(const rlx_graph *g, const rlx_node_data *n)
{
    if (n->n_in != 3)
        return true;
    rlx_dtype x = g->nodes[n->in[0]].dtype, c = g->nodes[n->in[1]].dtype;
    return c == g->nodes[n->in[2]].dtype && (c == RLX_F32 || c == x);
}

/* The computed form's angles: a table [S][D/2] of (cos, sin) in double,
 * rlx_rope_table's (the CPU's), one per (S, D, theta, offset) on a device,
 * shared by the rope nodes of every session there (a decoder has two a
 * layer) and freed with the last.  Computing pow and sincos in double for
 * every pair cost a decoder's training step about 4 ms. */
struct cu_rope_table {
    int64_t S, D, offset;
    double theta;
    double2 *dev;
    int refs;
    struct cu_rope_table *next;
};

/* *out = the device's table for these angles, made if it has none, and
 * counted.  Under handles_lock. */
static rlx_status rope_table_get(const rlx_thunk *t, int64_t S, int64_t D, double theta, int64_t offset,
                                 cu_rope_table **out)
{
    cu_device *d = rlx_cu_dev;
    cu_rope_table *e = d->rope_tables;
    while (e && !(e->S == S && e->D == D && e->theta == theta && e->offset == offset))
        e = e->next;
    if (e) {
        e->refs++;
        *out = e;
        return RLX_OK;
    }
    const size_t bytes = (size_t)(S * (D / 2)) * 2 * sizeof(double);
    double *tab = (double *)rlx_malloc(bytes);
    e = (cu_rope_table *)rlx_calloc(1, sizeof *e);
    if (!tab || !e) {
        free(tab);
        free(e);
        return rlx_cu_fail(t, RLX_ERR_OUT_OF_MEMORY, "no memory for the RoPE table");
    }
    rlx_rope_table(tab, S, D, theta, offset);
    cudaError_t err = cudaMalloc((void **)&e->dev, bytes);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(e->dev, tab, bytes, cudaMemcpyHostToDevice, rlx_cu_stream);
    if (err == cudaSuccess)
        err = cudaStreamSynchronize(rlx_cu_stream);
    free(tab);
    if (err != cudaSuccess) {
        cudaFree(e->dev);
        free(e);
        return rlx_cu_error(t, err, "uploading the RoPE table");
    }
    *e = (cu_rope_table){S, D, offset, theta, e->dev, 1, d->rope_tables};
    d->rope_tables = *out = e;
    return RLX_OK;
}

static rlx_status prep_rope(const rlx_graph *g, rlx_thunk *t)
{
    const rlx_node_data *n = t->node;
    if (n->n_in == 3)
        return RLX_OK; /* the tables are inputs */
    const rlx_shape *s = &g->nodes[n->in[0]].shape;
    const int64_t S = s->dims[s->ndim - 2], D = s->dims[s->ndim - 1];
    if (S * (D / 2) == 0)
        return RLX_OK;
    cu_rope_table *e = NULL;
    pthread_mutex_lock(&rlx_cu_dev->handles_lock);
    rlx_status st = rope_table_get(t, S, D, n->attrs.rope.theta, n->attrs.rope.offset, &e);
    pthread_mutex_unlock(&rlx_cu_dev->handles_lock);
    t->state = e;
    return st;
}

static void release_rope(rlx_thunk *t)
{
    cu_device *d = rlx_cu_dev;
    cu_rope_table *e = (cu_rope_table *)t->state;
    pthread_mutex_lock(&d->handles_lock);
    if (--e->refs == 0) {
        cu_rope_table **p = &d->rope_tables;
        while (*p != e)
            p = &(*p)->next;
        *p = e->next;
        cudaFree(e->dev);
        free(e);
    }
    pthread_mutex_unlock(&d->handles_lock);
}

static rlx_status k_rope(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    if (t->node->n_in == 3)
        return k_rope_tables(t);
    const rlx_node_data *xn = t->in_node[0];
    int r = xn->shape.ndim;
    int64_t S = xn->shape.dims[r - 2], D = xn->shape.dims[r - 1];
    int64_t total = rlx_shape_numel(&xn->shape);
    if (!total)
        return RLX_OK;
    int64_t pairs = total / 2;
    const double2 *tab = ((const cu_rope_table *)t->state)->dev;
    const int inter = t->node->attrs.rope.interleaved;
    if (rope_vec_fits(t->in[0], t->out, D, rlx_dtype_size(xn->dtype), inter)) {
        const int64_t V = 16 / (int64_t)rlx_dtype_size(xn->dtype), groups = pairs / (inter ? V / 2 : V);
        const unsigned vb = cu_blocks(groups, THREADS);
#define ROPE_VEC(INTER, I) \
    CU_FLOAT_DISPATCH(     \
        xn->dtype, T,      \
        cu_launch(rope_vec_kernel<T, INTER, I>, vb, THREADS, 0, (const T *)t->in[0], tab, (T *)t->out, groups, S, D))
        if (pairs < INT32_MAX && inter)
            ROPE_VEC(true, uint32_t);
        else if (pairs < INT32_MAX)
            ROPE_VEC(false, uint32_t);
        else if (inter)
            ROPE_VEC(true, int64_t);
        else
            ROPE_VEC(false, int64_t);
#undef ROPE_VEC
        return rlx_cu_check(t, "rope launch");
    }
    if (pairs < INT32_MAX)
        CU_FLOAT_DISPATCH(xn->dtype, T,
                          cu_launch(rope_kernel<T, uint32_t>, cu_blocks(pairs, THREADS), THREADS, 0,
                                    (const T *)t->in[0], tab, (T *)t->out, pairs, S, D, inter));
    else
        CU_FLOAT_DISPATCH(xn->dtype, T,
                          cu_launch(rope_kernel<T, int64_t>, cu_blocks(pairs, THREADS), THREADS, 0, (const T *)t->in[0],
                                    tab, (T *)t->out, pairs, S, D, inter));
    return rlx_cu_check(t, "rope launch");
}

/* ------------------------------------------------------------ scatter add */

/* one thread per element of the updates, added with atomics into zeros */
__global__ void scatter_add_kernel(const float *upd, const void *idx, int idx_dt, float *out, int64_t outer, int64_t V,
                                   int64_t m, int64_t inner, cu_fault *fault, int node)
{
    cu_grid_wait();
    int64_t total = outer * m * inner;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = i % inner, r = i / inner;
        int64_t j = r % m, o = r / m;
        int64_t ix0 = idx_dt == RLX_I64 ? ((const long long *)idx)[j] : ((const int *)idx)[j];
        int64_t ix = ix0 < 0 ? ix0 + V : ix0;
        if (ix >= 0 && ix < V)
            atomicAdd(&out[(o * V + ix) * inner + e], upd[i]);
        else if (e == 0)
            cu_report_index(fault, node, ix0, V);
    }
}

static rlx_status k_scatter_add(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node, *in = t->in_node[1];
    int axis = n->attrs.gather.axis;
    int64_t outer = 1, V = n->shape.dims[axis], inner = 1, m = rlx_shape_numel(&in->shape);
    for (int d = 0; d < axis; d++)
        outer *= n->shape.dims[d];
    for (int d = axis + 1; d < n->shape.ndim; d++)
        inner *= n->shape.dims[d];
    cudaError_t e = cudaMemsetAsync(t->out, 0, rlx_node_bytes(n), rlx_cu_stream);
    if (e != cudaSuccess)
        return rlx_set_error(RLX_ERR_DEVICE, "cuda: scatter_add zeroing: %s", cudaGetErrorString(e));
    if (outer * m * inner == 0)
        return RLX_OK;
    cu_launch(scatter_add_kernel, cu_blocks(outer * m * inner, THREADS), THREADS, 0, (const float *)t->in[0], t->in[1],
              in->dtype, (float *)t->out, outer, V, m, inner, rlx_cu_fault, t->id);
    return rlx_cu_check(t, "scatter_add launch");
}

/* f32 (mixed precision keeps the op in f32) */
static bool scatter_add_ok(const rlx_graph *g, const rlx_node_data *n)
{
    return n->dtype == RLX_F32 && g->nodes[n->in[0]].dtype == RLX_F32;
}

/* ------------------------------------------------------------ cache write */

/* update [B, H, S, W] into cache [B, H, T, W] at rows pos[b] + s (W in
 * elements of E); rows outside [0, T) are skipped, as on the CPU. */
template <typename E>
__global__ void cache_write_kernel(E *cache, const E *upd, const void *pos, int pos_dt, int64_t BH, int64_t H,
                                   int64_t S, int64_t T, int64_t W)
{
    cu_grid_wait();
    int64_t total = BH * S * W;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t w = i % W, r = i / W;
        int64_t s = r % S, bh = r / S;
        int64_t b = bh / H;
        int64_t p = (pos_dt == RLX_I64 ? ((const long long *)pos)[b] : ((const int *)pos)[b]) + s;
        if (p >= 0 && p < T)
            cache[(bh * T + p) * W + w] = upd[i];
    }
}

static rlx_status k_cache_write(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *c = t->in_node[0], *u = t->in_node[1], *p = t->in_node[2];
    int64_t B = c->shape.dims[0], H = c->shape.dims[1], T = c->shape.dims[2], D = c->shape.dims[3];
    int64_t S = u->shape.dims[2];
    size_t es = rlx_dtype_size(c->dtype);
    if (t->out != t->in[0]) {
        cudaError_t e = cudaMemcpyAsync(t->out, t->in[0], rlx_node_bytes(c), cudaMemcpyDeviceToDevice, rlx_cu_stream);
        if (e != cudaSuccess)
            return rlx_set_error(RLX_ERR_DEVICE, "cuda: cache_write copy: %s", cudaGetErrorString(e));
    }
    if (B * H * S * D == 0)
        return RLX_OK;
    int64_t row = D * (int64_t)es;
    if (row % 16 == 0) {
        int64_t W = row / 16;
        cu_launch(cache_write_kernel<uint4>, cu_blocks(B * H * S * W, THREADS), THREADS, 0, (uint4 *)t->out,
                  (const uint4 *)t->in[1], t->in[2], p->dtype, B * H, H, S, T, W);
    } else {
        switch (es) {
        case 2:
            cu_launch(cache_write_kernel<unsigned short>, cu_blocks(B * H * S * D, THREADS), THREADS, 0,
                      (unsigned short *)t->out, (const unsigned short *)t->in[1], t->in[2], p->dtype, B * H, H, S, T,
                      D);
            break;
        case 4:
            cu_launch(cache_write_kernel<unsigned int>, cu_blocks(B * H * S * D, THREADS), THREADS, 0,
                      (unsigned int *)t->out, (const unsigned int *)t->in[1], t->in[2], p->dtype, B * H, H, S, T, D);
            break;
        default:
            cu_launch(cache_write_kernel<unsigned long long>, cu_blocks(B * H * S * D, THREADS), THREADS, 0,
                      (unsigned long long *)t->out, (const unsigned long long *)t->in[1], t->in[2], p->dtype, B * H, H,
                      S, T, D);
            break;
        }
    }
    return rlx_cu_check(t, "cache_write launch");
}

static bool cache_write_ok(const rlx_graph *g, const rlx_node_data *n)
{
    size_t es = rlx_dtype_size(g->nodes[n->in[0]].dtype);
    return es == 2 || es == 4 || es == 8;
}

extern "C" void rlx_cuda_register_shape(cu_kernel *tab)
{
    tab[RLX_OP_RESHAPE] = (cu_kernel){k_reshape, NULL, any_ok, NULL, NULL};
    tab[RLX_OP_TRANSPOSE] = (cu_kernel){k_transpose, NULL, any_ok, prep_transpose, free_state};
    tab[RLX_OP_SLICE] = (cu_kernel){k_slice, NULL, any_ok, prep_slice, free_state};
    tab[RLX_OP_EXPAND] = (cu_kernel){k_expand, NULL, any_ok, prep_expand, free_state};
    tab[RLX_OP_CONCAT] = (cu_kernel){k_concat, NULL, any_ok, NULL, NULL};
    tab[RLX_OP_GATHER] = (cu_kernel){k_gather, NULL, gather_ok, NULL, NULL};
    tab[RLX_OP_SCATTER_ADD] = (cu_kernel){k_scatter_add, NULL, scatter_add_ok, NULL, NULL};
    tab[RLX_OP_PAD] = (cu_kernel){k_pad, NULL, any_ok, prep_pad, free_state};
    tab[RLX_OP_ROPE] = (cu_kernel){k_rope, NULL, rope_ok, prep_rope, release_rope};
    tab[RLX_OP_CACHE_WRITE] = (cu_kernel){k_cache_write, NULL, cache_write_ok, NULL, NULL};
}
