/* k_train.cu - training's kernels on the GPU: the optimizer step (param,
 * gradient and optimizer state updated in place, one thread per element,
 * by op_math.h's formula, the CPU kernel's) and the cross-entropy with its
 * gradient (a block per row, logits in f32, f16 or bf16; the row's
 * log-sum-exp in f32 from one read, running max and sum merged by warp
 * reductions), and the norms' gradient (a warp per row). */
#include "backends/cuda/cuda_common.h"
#include "ir/op_math.h"

#define THREADS 256

/* G: the gradient's dtype (f32, or f16/bf16 as mixed precision's backward
 * made it, widened as read) */
template <typename G>
__global__ void optimizer_step_kernel(rlx_optim_coef c, const float *hyper, const float *gscale, float *p, const G *g,
                                      float *s1, float *s2, int64_t n)
{
    cu_grid_wait();
    float scale = *gscale;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float a = s1 ? s1[i] : 0.0f, b = s2 ? s2[i] : 0.0f;
        rlx_optim_step_f32(&c, hyper, scale, &p[i], cu_tof<G>(g[i]), &a, &b);
        if (s1)
            s1[i] = a;
        if (s2)
            s2[i] = b;
    }
}

static rlx_status k_optimizer_step(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node;
    rlx_optim_coef c = {n->attrs.optim.kind,         n->attrs.optim.nesterov, n->n_in - 5,
                        n->attrs.optim.beta1,        n->attrs.optim.beta2,    n->attrs.optim.eps,
                        n->attrs.optim.weight_decay, n->attrs.optim.momentum, n->attrs.optim.dampening};
    int64_t total = rlx_shape_numel(&n->shape);
    if (t->out != t->in[0]) {
        cudaError_t e = cudaMemcpyAsync(t->out, t->in[0], rlx_node_bytes(n), cudaMemcpyDeviceToDevice, rlx_cu_stream);
        if (e != cudaSuccess)
            return rlx_set_error(RLX_ERR_DEVICE, "cuda: optimizer step copy: %s", cudaGetErrorString(e));
    }
    if (!total)
        return RLX_OK;
    float *s1 = c.n_states > 0 ? (float *)t->in[5] : NULL, *s2 = c.n_states > 1 ? (float *)t->in[6] : NULL;
    CU_FLOAT_DISPATCH(t->in_node[1]->dtype, G,
                      cu_launch(optimizer_step_kernel<G>, cu_blocks(total, THREADS), THREADS, 0, c,
                                (const float *)t->in[2], (const float *)t->in[3], (float *)t->out, (const G *)t->in[1],
                                s1, s2, total));
    return rlx_cu_check(t, "optimizer step launch");
}

/* f32 params (the master weights of mixed-precision training), gradients
 * in f32, f16 or bf16 */
static bool optimizer_step_ok(const rlx_graph *g, const rlx_node_data *n)
{
    return g->nodes[n->in[0]].dtype == RLX_F32 && cu_is_f(g->nodes[n->in[1]].dtype);
}

/* ------------------------------------------------------------ cross-entropy */

/* Running (max, sum of exp(x - max)) of part of a row: one read of the
 * logits gives the log-sum-exp (a 151936-wide row does not stay in cache
 * between two passes). */
struct xent_acc {
    float m, e, a; /* max, sum of exp(x - m), sum of x */
};

__device__ __forceinline__ void xent_add(xent_acc &s, const float *x, int n)
{
    float mx = s.m;
    for (int i = 0; i < n; i++)
        mx = fmaxf(mx, x[i]);
    if (mx > s.m) { /* rescale what was summed against the old max */
        s.e *= __expf(s.m - mx);
        s.m = mx;
    }
    if (s.m == -INFINITY) { /* every logit so far -inf: they add nothing (and -inf - -inf is NaN) */
        for (int i = 0; i < n; i++)
            s.a += x[i];
        return;
    }
    for (int i = 0; i < n; i++) {
        s.e += __expf(x[i] - s.m);
        s.a += x[i];
    }
}

__device__ __forceinline__ xent_acc xent_merge(xent_acc p, xent_acc q)
{
    float m = fmaxf(p.m, q.m);
    if (m == -INFINITY)
        return {m, 0.0f, p.a + q.a};
    return {m, p.e * __expf(p.m - m) + q.e * __expf(q.m - m), p.a + q.a};
}

__device__ __forceinline__ xent_acc xent_warp(xent_acc s)
{
#pragma unroll
    for (int o = 16; o; o >>= 1) {
        xent_acc q = {__shfl_xor_sync(0xffffffffu, s.m, o), __shfl_xor_sync(0xffffffffu, s.e, o),
                      __shfl_xor_sync(0xffffffffu, s.a, o)};
        s = xent_merge(s, q);
    }
    return s;
}

/* E (16 bytes) neighbouring logits as f32 */
template <typename T> __device__ __forceinline__ void xent_load(const T *p, float *x)
{
    constexpr int E = 16 / sizeof(T);
    union {
        uint4 u;
        T v[E];
    } w;
    w.u = *(const uint4 *)p;
#pragma unroll
    for (int i = 0; i < E; i++)
        x[i] = cu_tof<T>(w.v[i]);
}

/* A row's log-sum-exp and mean, reduced over the block; vec: the row is
 * 16-byte aligned and C a multiple of 16 bytes. */
template <typename T> __device__ void xent_row_stats(const T *x, int64_t C, int vec, float *lse, float *mean)
{
    constexpr int E = 16 / sizeof(T);
    __shared__ xent_acc red[32];
    xent_acc s = {-INFINITY, 0.0f, 0.0f};
    if (vec) {
        for (int64_t c = (int64_t)threadIdx.x * E; c < C; c += (int64_t)blockDim.x * E) {
            float v[E];
            xent_load<T>(x + c, v);
            xent_add(s, v, E);
        }
    } else {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
            float v = cu_tof<T>(x[c]);
            xent_add(s, &v, 1);
        }
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    s = xent_warp(s);
    if (!lane)
        red[warp] = s;
    __syncthreads();
    s = lane < nw ? red[lane] : xent_acc{-INFINITY, 0.0f, 0.0f};
    s = xent_warp(s);
    *lse = s.m + logf(s.e);
    *mean = s.a / (float)C;
}

__device__ __forceinline__ long long xent_label(const void *labels, int dt, int64_t r)
{
    return dt == RLX_I64 ? ((const long long *)labels)[r] : ((const int *)labels)[r];
}

template <typename T>
__global__ void cross_entropy_kernel(const T *x, const void *labels, int label_dt, float *out, int64_t C, int vec,
                                     long long ignore, float smoothing, cu_fault *fault, int node)
{
    cu_grid_wait();
    int64_t r = blockIdx.x;
    long long y = xent_label(labels, label_dt, r);
    if (y == ignore) {
        if (!threadIdx.x)
            out[r] = 0.0f;
        return;
    }
    const T *row = x + r * C;
    float lse, mean;
    xent_row_stats<T>(row, C, vec, &lse, &mean);
    if (threadIdx.x)
        return;
    if (y < 0 || y >= C) {
        cu_report_index(fault, node, y, C);
        out[r] = NAN;
        return;
    }
    out[r] = (1.0f - smoothing) * (lse - cu_tof<T>(row[y])) + smoothing * (lse - mean);
}

/* dy * (softmax(x) - (1 - s) onehot(y) - s / C), written in the logits' dtype */
template <typename T>
__global__ void cross_entropy_grad_kernel(const T *x, const void *labels, int label_dt, const float *dy, T *out,
                                          int64_t C, int vec, long long ignore, float smoothing, cu_fault *fault,
                                          int node)
{
    cu_grid_wait();
    constexpr int E = 16 / sizeof(T);
    int64_t r = blockIdx.x;
    long long y = xent_label(labels, label_dt, r);
    T *o = out + r * C;
    if (y == ignore || y < 0 || y >= C) {
        if (y != ignore && !threadIdx.x)
            cu_report_index(fault, node, y, C);
        const T fill = cu_fromf<T>(y == ignore ? 0.0f : NAN);
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = fill;
        return;
    }
    const T *row = x + r * C;
    float lse, mean, d = dy[r], u = smoothing / (float)C;
    xent_row_stats<T>(row, C, vec, &lse, &mean);
    (void)mean;
    if (vec) {
        for (int64_t c = (int64_t)threadIdx.x * E; c < C; c += (int64_t)blockDim.x * E) {
            float v[E];
            xent_load<T>(row + c, v);
            union {
                uint4 u;
                T v[E];
            } w;
#pragma unroll
            for (int i = 0; i < E; i++)
                w.v[i] = cu_fromf<T>(d * (__expf(v[i] - lse) - (c + i == y ? 1.0f - smoothing : 0.0f) - u));
            *(uint4 *)(o + c) = w.u;
        }
    } else {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = cu_fromf<T>(d * (__expf(cu_tof<T>(row[c]) - lse) - (c == y ? 1.0f - smoothing : 0.0f) - u));
    }
}

template <typename T> static void cross_entropy_launch(const rlx_thunk *t, int64_t rows, int64_t C)
{
    const rlx_node_data *n = t->node;
    const size_t row_bytes = (size_t)C * sizeof(T);
    const int vec = row_bytes % 16 == 0 && (uintptr_t)t->in[0] % 16 == 0 && (uintptr_t)t->out % 16 == 0;
    const long long ignore = (long long)n->attrs.xent.ignore_index;
    const float smoothing = (float)n->attrs.xent.smoothing;
    if (n->op == RLX_OP_CROSS_ENTROPY)
        cu_launch(cross_entropy_kernel<T>, (unsigned)rows, THREADS, 0, (const T *)t->in[0], t->in[1],
                  t->in_node[1]->dtype, (float *)t->out, C, vec, ignore, smoothing, rlx_cu_fault, t->id);
    else
        cu_launch(cross_entropy_grad_kernel<T>, (unsigned)rows, THREADS, 0, (const T *)t->in[0], t->in[1],
                  t->in_node[1]->dtype, (const float *)t->in[2], (T *)t->out, C, vec, ignore, smoothing, rlx_cu_fault,
                  t->id);
}

static rlx_status k_cross_entropy(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *x = t->in_node[0];
    int64_t C = x->shape.dims[x->shape.ndim - 1], rows = rlx_shape_numel(&t->in_node[1]->shape);
    if (!rows)
        return RLX_OK;
    switch (x->dtype) {
    case RLX_F16: cross_entropy_launch<__half>(t, rows, C); break;
    case RLX_BF16: cross_entropy_launch<__nv_bfloat16>(t, rows, C); break;
    default: cross_entropy_launch<float>(t, rows, C); break;
    }
    return rlx_cu_check(t, "cross-entropy launch");
}

/* f32, f16 or bf16 logits (the loss and dy f32); rows fit a grid */
static bool cross_entropy_ok(const rlx_graph *g, const rlx_node_data *n)
{
    rlx_dtype t = g->nodes[n->in[0]].dtype;
    return (t == RLX_F32 || t == RLX_F16 || t == RLX_BF16) && rlx_shape_numel(&g->nodes[n->in[1]].shape) < INT32_MAX;
}

/* ------------------------------------------------------------ the norms' gradient */

#define NG_WARPS 8 /* rows per block, one warp each */

/* One warp per row of norm_grad: the statistics in f32 over the row (re-read
 * from cache by each pass), then x's gradient to out's first plane and
 * dy * xhat to its second (rlx_decompose_norm_grad's formulas). */
template <typename T>
__global__ void __launch_bounds__(NG_WARPS * 32)
    norm_grad_kernel(const T *x, const T *dy, const T *gamma, T *out, int64_t rows, int64_t C, float eps, int layer)
{
    cu_grid_wait();
    const int lane = threadIdx.x & 31;
    const int64_t r = (int64_t)blockIdx.x * NG_WARPS + (threadIdx.x >> 5);
    if (r >= rows)
        return;
    const T *xr = x + r * C, *dr = dy + r * C;
    float mu = 0.0f;
    if (layer) {
        for (int64_t c = lane; c < C; c += 32)
            mu += cu_tof<T>(xr[c]);
        mu = cu_warp_sum(mu) / (float)C;
    }
    float var = 0.0f, sg = 0.0f, sgx = 0.0f;
    for (int64_t c = lane; c < C; c += 32) {
        const float xc = cu_tof<T>(xr[c]) - mu, gd = cu_tof<T>(dr[c]) * (gamma ? cu_tof<T>(gamma[c]) : 1.0f);
        var += xc * xc;
        sg += gd;
        sgx += gd * xc;
    }
    var = cu_warp_sum(var);
    sg = cu_warp_sum(sg);
    sgx = cu_warp_sum(sgx);
    const float rstd = rsqrtf(var / (float)C + eps), mgx = sgx * rstd / (float)C, mg = layer ? sg / (float)C : 0.0f;
    T *dx = out + r * C, *dyx = out + rows * C + r * C;
    for (int64_t c = lane; c < C; c += 32) {
        const float d = cu_tof<T>(dr[c]), xhat = (cu_tof<T>(xr[c]) - mu) * rstd;
        const float gd = gamma ? d * cu_tof<T>(gamma[c]) : d;
        dx[c] = cu_fromf<T>(rstd * (gd - mg - xhat * mgx));
        dyx[c] = cu_fromf<T>(d * xhat);
    }
}

static rlx_status k_norm_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    const int64_t C = x->shape.dims[x->shape.ndim - 1], rows = C ? rlx_shape_numel(&x->shape) / C : 0;
    if (!rows)
        return RLX_OK;
    const unsigned grid = (unsigned)((rows + NG_WARPS - 1) / NG_WARPS);
    const void *gamma = n->attrs.norm.has_gamma ? t->in[2] : NULL;
    const float eps = (float)n->attrs.norm.eps;
    const int layer = !n->attrs.norm.rms;
    CU_FLOAT_DISPATCH(x->dtype, T,
                      cu_launch(norm_grad_kernel<T>, grid, NG_WARPS * 32, 0, (const T *)t->in[0], (const T *)t->in[1],
                                (const T *)gamma, (T *)t->out, rows, C, eps, layer));
    return rlx_cu_check(t, "norm gradient launch");
}

/* rows fit a grid */
static bool norm_grad_ok(const rlx_graph *g, const rlx_node_data *n)
{
    const rlx_node_data *x = &g->nodes[n->in[0]];
    return cu_is_f(x->dtype) && rlx_shape_numel(&x->shape) / NG_WARPS < INT32_MAX;
}

extern "C" void rlx_cuda_register_train(cu_kernel *tab)
{
    tab[RLX_OP_NORM_GRAD] = (cu_kernel){k_norm_grad, NULL, norm_grad_ok, NULL, NULL};
    tab[RLX_OP_CROSS_ENTROPY] = (cu_kernel){k_cross_entropy, NULL, cross_entropy_ok, NULL, NULL};
    tab[RLX_OP_CROSS_ENTROPY_GRAD] = (cu_kernel){k_cross_entropy, NULL, cross_entropy_ok, NULL, NULL};
    tab[RLX_OP_OPTIMIZER_STEP] = (cu_kernel){k_optimizer_step, NULL, optimizer_step_ok, NULL, NULL};
}
