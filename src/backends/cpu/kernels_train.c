/* kernels_train.c - training's own kernels: the optimizer step (param,
 * gradient and optimizer state updated in place, one pass over the
 * elements, split among threads; the formula is op_math.h's, shared with
 * the CUDA kernel) and the cross-entropy with its gradient, a row each
 * (statistics in double). */
#include <stdatomic.h>

#include "backends/cpu/cpu_kernels.h"
#include "ir/op_math.h"

static rlx_optim_coef optim_coef(const rlx_node_data *n)
{
    return (rlx_optim_coef){n->attrs.optim.kind,         n->attrs.optim.nesterov, n->n_in - 5,
                            n->attrs.optim.beta1,        n->attrs.optim.beta2,    n->attrs.optim.eps,
                            n->attrs.optim.weight_decay, n->attrs.optim.momentum, n->attrs.optim.dampening};
}

static void optimizer_values(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *n = t->node;
    rlx_optim_coef c = optim_coef(n);
    const float *hyper = t->in[2];
    float gscale = *(const float *)t->in[3];
    if (n->dtype == RLX_F32) {
        float *p = t->out, *s1 = c.n_states > 0 ? (float *)t->in[5] : NULL,
              *s2 = c.n_states > 1 ? (float *)t->in[6] : NULL;
        const float *g = t->in[1];
        float dummy1 = 0, dummy2 = 0;
        for (int64_t i = begin; i < end; i++)
            rlx_optim_step_f32(&c, hyper, gscale, &p[i], g[i], s1 ? &s1[i] : &dummy1, s2 ? &s2[i] : &dummy2);
        return;
    }
    /* other float dtypes through double, stored back in their own */
    void *s1 = c.n_states > 0 ? (void *)t->in[5] : NULL, *s2 = c.n_states > 1 ? (void *)t->in[6] : NULL;
    for (int64_t i = begin; i < end; i++) {
        double p = rlx_load(t->out, n->dtype, i), a = s1 ? rlx_load(s1, n->dtype, i) : 0,
               b = s2 ? rlx_load(s2, n->dtype, i) : 0;
        rlx_optim_step_f64(&c, hyper, (double)gscale, &p, rlx_load(t->in[1], n->dtype, i), &a, &b);
        rlx_store(t->out, n->dtype, i, p);
        if (s1)
            rlx_store(s1, n->dtype, i, a);
        if (s2)
            rlx_store(s2, n->dtype, i, b);
    }
}

static rlx_status k_optimizer_step(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    int64_t total = rlx_shape_numel(&n->shape);
    if (t->out != t->in[0])
        memcpy(t->out, t->in[0], rlx_node_bytes(n));
    rlx_cpu_parallel(rlx_cpu_threads(ctx, total * 4), total, optimizer_values, (void *)t);
    return RLX_OK;
}

/* A row's max and log-sum-exp (in double) and the mean of its logits. */
static void row_stats(const void *x, rlx_dtype t, int64_t base, int64_t C, double *lse, double *mean)
{
    double m = -INFINITY, sum = 0, all = 0;
    for (int64_t c = 0; c < C; c++) {
        double v = rlx_load(x, t, base + c);
        m = v > m ? v : m;
        all += v;
    }
    for (int64_t c = 0; c < C; c++)
        sum += exp(rlx_load(x, t, base + c) - m);
    *lse = m + log(sum);
    *mean = all / (double)C;
}

/* One row of the cross-entropy: its label, whether the row counts (the
 * label is not the ignored one) and, if it does, its statistics. */
typedef struct xent_row {
    int64_t y;
    bool counts;
    double lse, mean;
} xent_row;

/* Runs fn on every row, split among threads, each label read once: a label
 * that is neither a class nor the ignored one fails the run, naming the
 * first such row. */
typedef struct xent_job {
    const rlx_thunk *t;
    void (*fn)(const rlx_thunk *t, int64_t r, int64_t C, const xent_row *row);
    _Atomic int64_t bad; /* the first row whose label is out of range */
} xent_job;

static void xent_rows(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    xent_job *j = arg;
    const rlx_thunk *t = j->t;
    const rlx_node_data *n = t->node, *x = t->in_node[0], *lab = t->in_node[1];
    int64_t C = x->shape.dims[x->shape.ndim - 1], ignore = n->attrs.xent.ignore_index;
    for (int64_t r = begin; r < end; r++) {
        xent_row row = {rlx_load_i(t->in[1], lab->dtype, r), false, 0, 0};
        row.counts = row.y != ignore;
        if (row.counts && (row.y < 0 || row.y >= C)) {
            int64_t b = atomic_load_explicit(&j->bad, memory_order_relaxed);
            while (r < b &&
                   !atomic_compare_exchange_weak_explicit(&j->bad, &b, r, memory_order_relaxed, memory_order_relaxed))
                ;
            continue;
        }
        if (row.counts)
            row_stats(t->in[0], x->dtype, r * C, C, &row.lse, &row.mean);
        j->fn(t, r, C, &row);
    }
}

static rlx_status xent_each_row(const rlx_thunk *t, const rlx_run_ctx *ctx,
                                void (*fn)(const rlx_thunk *t, int64_t r, int64_t C, const xent_row *row))
{
    const rlx_node_data *n = t->node, *x = t->in_node[0], *lab = t->in_node[1];
    int64_t C = x->shape.dims[x->shape.ndim - 1], rows = rlx_shape_numel(&lab->shape);
    int64_t ignore = n->attrs.xent.ignore_index;
    xent_job j = {.t = t, .fn = fn};
    atomic_init(&j.bad, rows);
    rlx_cpu_parallel(rlx_cpu_threads(ctx, rows * C * 4), rows, xent_rows, &j);
    int64_t bad = atomic_load_explicit(&j.bad, memory_order_relaxed);
    if (bad < rows)
        return rlx_cpu_kernel_error(t, "label %lld of row %lld is not a class of [0, %lld) nor the ignored %lld",
                                    (long long)rlx_load_i(t->in[1], lab->dtype, bad), (long long)bad, (long long)C,
                                    (long long)ignore);
    return RLX_OK;
}

static void xent_loss_row(const rlx_thunk *t, int64_t r, int64_t C, const xent_row *row)
{
    double s = t->node->attrs.xent.smoothing, loss = 0;
    if (row->counts)
        loss = (1 - s) * (row->lse - rlx_load(t->in[0], t->in_node[0]->dtype, r * C + row->y)) +
               s * (row->lse - row->mean);
    rlx_store(t->out, t->node->dtype, r, loss);
}

static void xent_grad_row(const rlx_thunk *t, int64_t r, int64_t C, const xent_row *row)
{
    double s = t->node->attrs.xent.smoothing, dy = rlx_load(t->in[2], t->in_node[2]->dtype, r);
    for (int64_t c = 0; c < C; c++) {
        double d = 0;
        if (row->counts) {
            double p = exp(rlx_load(t->in[0], t->in_node[0]->dtype, r * C + c) - row->lse);
            d = dy * (p - (c == row->y ? 1 - s : 0.0) - s / (double)C);
        }
        rlx_store(t->out, t->node->dtype, r * C + c, d);
    }
}

static rlx_status k_cross_entropy(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    return xent_each_row(t, ctx, xent_loss_row);
}

static rlx_status k_cross_entropy_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    return xent_each_row(t, ctx, xent_grad_row);
}

void rlx_cpu_register_train(rlx_cpu_kernel *table)
{
    table[RLX_OP_OPTIMIZER_STEP].fn = k_optimizer_step;
    table[RLX_OP_CROSS_ENTROPY].fn = k_cross_entropy;
    table[RLX_OP_CROSS_ENTROPY_GRAD].fn = k_cross_entropy_grad;
}
