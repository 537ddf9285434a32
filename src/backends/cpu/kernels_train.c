/* kernels_train.c - the optimizer step: param, gradient and optimizer
 * state updated in place, one pass over the elements, split among threads
 * (the formula is op_math.h's, shared with the CUDA kernel). */
#include "backends/cpu/cpu_kernels.h"
#include "ir/op_math.h"

static rlx_optim_coef optim_coef(const rlx_node_data *n)
{
    return (rlx_optim_coef){n->attrs.optim.kind,         n->attrs.optim.nesterov, n->n_in - 5,
                            n->attrs.optim.beta1,        n->attrs.optim.beta2,    n->attrs.optim.eps,
                            n->attrs.optim.weight_decay, n->attrs.optim.momentum, n->attrs.optim.dampening};
}

static rlx_status k_optimizer_step(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    rlx_optim_coef c = optim_coef(n);
    int64_t total = rlx_shape_numel(&n->shape);
    const float *hyper = t->in[2];
    float gscale = *(const float *)t->in[3];
    if (t->out != t->in[0])
        memcpy(t->out, t->in[0], rlx_node_bytes(n));
    int threads = rlx_cpu_threads(ctx, total * 4);
    if (n->dtype == RLX_F32) {
        float *p = t->out, *s1 = c.n_states > 0 ? (float *)t->in[5] : NULL,
              *s2 = c.n_states > 1 ? (float *)t->in[6] : NULL;
        const float *g = t->in[1];
        float dummy1 = 0, dummy2 = 0;
#pragma omp parallel for num_threads(threads) schedule(static) firstprivate(dummy1, dummy2)
        for (int64_t i = 0; i < total; i++)
            rlx_optim_step_f32(&c, hyper, gscale, &p[i], g[i], s1 ? &s1[i] : &dummy1, s2 ? &s2[i] : &dummy2);
        return RLX_OK;
    }
    /* other float dtypes through double, stored back in their own */
    void *s1 = c.n_states > 0 ? (void *)t->in[5] : NULL, *s2 = c.n_states > 1 ? (void *)t->in[6] : NULL;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t i = 0; i < total; i++) {
        double p = rlx_load(t->out, n->dtype, i), a = s1 ? rlx_load(s1, n->dtype, i) : 0,
               b = s2 ? rlx_load(s2, n->dtype, i) : 0;
        rlx_optim_step_f64(&c, hyper, (double)gscale, &p, rlx_load(t->in[1], n->dtype, i), &a, &b);
        rlx_store(t->out, n->dtype, i, p);
        if (s1)
            rlx_store(s1, n->dtype, i, a);
        if (s2)
            rlx_store(s2, n->dtype, i, b);
    }
    return RLX_OK;
}

void rlx_cpu_register_train(rlx_cpu_kernel *table) { table[RLX_OP_OPTIMIZER_STEP].fn = k_optimizer_step; }
