/* k_train.cu - training's kernels on the GPU: the optimizer step (param,
 * gradient and optimizer state updated in place, one thread per element,
 * by op_math.h's formula, the CPU kernel's) and the cross-entropy with its
 * gradient (a block per row; the row's max and log-sum-exp in f32 with
 * warp reductions). */
#include "backends/cuda/cuda_common.h"
#include "ir/op_math.h"

#define THREADS 256

__global__ void optimizer_step_kernel(rlx_optim_coef c, const float *hyper, const float *gscale, float *p,
                                      const float *g, float *s1, float *s2, int64_t n)
{
    cu_grid_wait();
    float scale = *gscale;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float a = s1 ? s1[i] : 0.0f, b = s2 ? s2[i] : 0.0f;
        rlx_optim_step_f32(&c, hyper, scale, &p[i], g[i], &a, &b);
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
    cu_launch(optimizer_step_kernel, cu_blocks(total, THREADS), THREADS, 0, c, (const float *)t->in[2],
              (const float *)t->in[3], (float *)t->out, (const float *)t->in[1], s1, s2, total);
    return rlx_cu_check(t, "optimizer step launch");
}

/* f32 params (the master weights of mixed-precision training) */
static bool optimizer_step_ok(const rlx_graph *g, const rlx_node_data *n)
{
    return g->nodes[n->in[0]].dtype == RLX_F32;
}

/* ------------------------------------------------------------ cross-entropy */

/* max, sum of exp(x - max) and sum of x over a row, reduced over the block */
__device__ void xent_row_stats(const float *x, int64_t C, float *lse, float *mean)
{
    __shared__ float red[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        m = fmaxf(m, x[c]);
    m = cu_warp_max(m);
    if (!lane)
        red[warp] = m;
    __syncthreads();
    m = lane < nw ? red[lane] : -INFINITY;
    m = cu_warp_max(m);
    __syncthreads();
    float e = 0, a = 0;
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
        e += __expf(x[c] - m);
        a += x[c];
    }
    e = cu_warp_sum(e);
    a = cu_warp_sum(a);
    __shared__ float red2[32];
    if (!lane)
        red[warp] = e, red2[warp] = a;
    __syncthreads();
    e = cu_warp_sum(lane < nw ? red[lane] : 0.0f);
    a = cu_warp_sum(lane < nw ? red2[lane] : 0.0f);
    *lse = m + logf(e);
    *mean = a / (float)C;
}

__device__ __forceinline__ long long xent_label(const void *labels, int dt, int64_t r)
{
    return dt == RLX_I64 ? ((const long long *)labels)[r] : ((const int *)labels)[r];
}

__global__ void cross_entropy_kernel(const float *x, const void *labels, int label_dt, float *out, int64_t C,
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
    const float *row = x + r * C;
    float lse, mean;
    xent_row_stats(row, C, &lse, &mean);
    if (threadIdx.x)
        return;
    if (y < 0 || y >= C) {
        cu_report_index(fault, node, y, C);
        out[r] = NAN;
        return;
    }
    out[r] = (1.0f - smoothing) * (lse - row[y]) + smoothing * (lse - mean);
}

__global__ void cross_entropy_grad_kernel(const float *x, const void *labels, int label_dt, const float *dy, float *out,
                                          int64_t C, long long ignore, float smoothing, cu_fault *fault, int node)
{
    cu_grid_wait();
    int64_t r = blockIdx.x;
    long long y = xent_label(labels, label_dt, r);
    float *o = out + r * C;
    if (y == ignore) {
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = 0.0f;
        return;
    }
    if (y < 0 || y >= C) {
        if (!threadIdx.x)
            cu_report_index(fault, node, y, C);
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
            o[c] = NAN;
        return;
    }
    const float *row = x + r * C;
    float lse, mean, d = dy[r], u = smoothing / (float)C;
    xent_row_stats(row, C, &lse, &mean);
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
        o[c] = d * (__expf(row[c] - lse) - (c == y ? 1.0f - smoothing : 0.0f) - u);
}

static rlx_status k_cross_entropy(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    (void)ctx;
    const rlx_node_data *n = t->node, *x = t->in_node[0];
    int64_t C = x->shape.dims[x->shape.ndim - 1], rows = rlx_shape_numel(&t->in_node[1]->shape);
    if (!rows)
        return RLX_OK;
    if (n->op == RLX_OP_CROSS_ENTROPY)
        cu_launch(cross_entropy_kernel, (unsigned)rows, THREADS, 0, (const float *)t->in[0], t->in[1],
                  t->in_node[1]->dtype, (float *)t->out, C, (long long)n->attrs.xent.ignore_index,
                  (float)n->attrs.xent.smoothing, rlx_cu_fault, t->id);
    else
        cu_launch(cross_entropy_grad_kernel, (unsigned)rows, THREADS, 0, (const float *)t->in[0], t->in[1],
                  t->in_node[1]->dtype, (const float *)t->in[2], (float *)t->out, C,
                  (long long)n->attrs.xent.ignore_index, (float)n->attrs.xent.smoothing, rlx_cu_fault, t->id);
    return rlx_cu_check(t, "cross-entropy launch");
}

/* f32 logits (mixed precision keeps the op in f32); rows fit a grid */
static bool cross_entropy_ok(const rlx_graph *g, const rlx_node_data *n)
{
    return g->nodes[n->in[0]].dtype == RLX_F32 && rlx_shape_numel(&g->nodes[n->in[1]].shape) < INT32_MAX;
}

extern "C" void rlx_cuda_register_train(cu_kernel *tab)
{
    tab[RLX_OP_CROSS_ENTROPY] = (cu_kernel){k_cross_entropy, NULL, cross_entropy_ok, NULL, NULL};
    tab[RLX_OP_CROSS_ENTROPY_GRAD] = (cu_kernel){k_cross_entropy, NULL, cross_entropy_ok, NULL, NULL};
    tab[RLX_OP_OPTIMIZER_STEP] = (cu_kernel){k_optimizer_step, NULL, optimizer_step_ok, NULL, NULL};
}
