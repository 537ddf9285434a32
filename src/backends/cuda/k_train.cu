/* k_train.cu - the optimizer step on the GPU: param, gradient and
 * optimizer state updated in place, one thread per element, by op_math.h's
 * formula (the CPU kernel's). */
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

extern "C" void rlx_cuda_register_train(cu_kernel *tab)
{
    tab[RLX_OP_OPTIMIZER_STEP] = (cu_kernel){k_optimizer_step, NULL, optimizer_step_ok, NULL, NULL};
}
