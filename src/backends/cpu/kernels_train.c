/* kernels_train.c - training's own kernels: the optimizer step (param,
 * gradient and optimizer state updated in place, one pass over the
 * elements, split among threads; the formula is op_math.h's, shared with
 * the CUDA kernel), the cross-entropy with its gradient, a row each
 * (statistics in double), attention's gradient (the scores recomputed
 * row by row, never stored) and the norms' (a row at a time). */
#include <math.h>
#include <omp.h>
#include <string.h>

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
        const rlx_dtype gt = t->in_node[1]->dtype; /* f32, or f16/bf16 widened as read */
        const float *g = t->in[1];
        float dummy1 = 0, dummy2 = 0;
#pragma omp parallel for num_threads(threads) schedule(static) firstprivate(dummy1, dummy2)
        for (int64_t i = 0; i < total; i++)
            rlx_optim_step_f32(&c, hyper, gscale, &p[i], gt == RLX_F32 ? g[i] : (float)rlx_load(t->in[1], gt, i),
                               s1 ? &s1[i] : &dummy1, s2 ? &s2[i] : &dummy2);
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
static rlx_status xent_each_row(const rlx_thunk *t, const rlx_run_ctx *ctx,
                                void (*fn)(const rlx_thunk *t, int64_t r, int64_t C, const xent_row *row))
{
    const rlx_node_data *n = t->node, *x = t->in_node[0], *lab = t->in_node[1];
    int64_t C = x->shape.dims[x->shape.ndim - 1], rows = rlx_shape_numel(&lab->shape), bad = rows;
    int64_t ignore = n->attrs.xent.ignore_index;
    int threads = rlx_cpu_threads(ctx, rows * C * 4);
#pragma omp parallel for num_threads(threads) schedule(static) reduction(min : bad)
    for (int64_t r = 0; r < rows; r++) {
        xent_row row = {rlx_load_i(t->in[1], lab->dtype, r), false, 0, 0};
        row.counts = row.y != ignore;
        if (row.counts && (row.y < 0 || row.y >= C)) {
            bad = r < bad ? r : bad;
            continue;
        }
        if (row.counts)
            row_stats(t->in[0], x->dtype, r * C, C, &row.lse, &row.mean);
        fn(t, r, C, &row);
    }
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

/* ------------------------------------------------------------ attention's gradient */

typedef struct attn_grad_args {
    int64_t B, H, Hk, S, T, D, Dv;
    double scale;
    int causal;
    const void *mask; /* NULL: none */
    rlx_dtype mask_dt;
    int64_t mstr[RLX_MAX_DIMS]; /* over [B, H, S, T], 0 where broadcast */
} attn_grad_args;

/* One kv head (b, hk) and the G query heads that read it, row by row: the
 * probabilities of row s recomputed (p), dp = dy . v, and ds = p (dp -
 * sum p dp) scale; dq[s] = ds k, and dk += ds q, dv += p dy over the rows.
 * dk and dv belong to this item alone, so items run in parallel.  CT is the
 * arithmetic's type (double for f64, else float). */
#define ATTN_GRAD_CORE(SFX, CT, EXP)                                                                           \
    static void attn_grad_item_##SFX(const attn_grad_args *a, int64_t b, int64_t hk, const CT *q, const CT *k, \
                                     const CT *v, const CT *dy, CT *dq, CT *dk, CT *dv, CT *p, CT *dp)         \
    {                                                                                                          \
        const int64_t G = a->H / a->Hk, D = a->D, Dv = a->Dv, T = a->T, S = a->S, shift = T - S;               \
        const CT scale = (CT)a->scale;                                                                         \
        const CT *kb = k + (b * a->Hk + hk) * T * D, *vb = v + (b * a->Hk + hk) * T * Dv;                      \
        CT *dkb = dk + (b * a->Hk + hk) * T * D, *dvb = dv + (b * a->Hk + hk) * T * Dv;                        \
        memset(dkb, 0, (size_t)(T * D) * sizeof(CT));                                                          \
        memset(dvb, 0, (size_t)(T * Dv) * sizeof(CT));                                                         \
        for (int64_t h = hk * G; h < (hk + 1) * G; h++)                                                        \
            for (int64_t s = 0; s < S; s++) {                                                                  \
                const int64_t row = (b * a->H + h) * S + s;                                                    \
                const CT *qr = q + row * D, *dyr = dy + row * Dv;                                              \
                CT *dqr = dq + row * D;                                                                        \
                memset(dqr, 0, (size_t)D * sizeof(CT));                                                        \
                int64_t n = T;                                                                                 \
                if (a->causal)                                                                                 \
                    n = s + shift + 1 < 0 ? 0 : s + shift + 1 < T ? s + shift + 1 : T;                         \
                CT m = -INFINITY;                                                                              \
                for (int64_t t = 0; t < n; t++) {                                                              \
                    CT x = 0;                                                                                  \
                    for (int64_t d = 0; d < D; d++)                                                            \
                        x += qr[d] * kb[t * D + d];                                                            \
                    x *= scale;                                                                                \
                    if (a->mask) {                                                                             \
                        int64_t mo = b * a->mstr[0] + h * a->mstr[1] + s * a->mstr[2] + t * a->mstr[3];        \
                        if (a->mask_dt == RLX_BOOL)                                                            \
                            x = ((const uint8_t *)a->mask)[mo] ? x : (CT)-INFINITY;                            \
                        else                                                                                   \
                            x += (CT)rlx_load(a->mask, a->mask_dt, mo);                                        \
                    }                                                                                          \
                    p[t] = x;                                                                                  \
                    m = x > m ? x : m;                                                                         \
                }                                                                                              \
                if (m == -INFINITY) /* every key hidden: the row's output is zeros, its gradient too */        \
                    continue;                                                                                  \
                CT sum = 0, delta = 0;                                                                         \
                for (int64_t t = 0; t < n; t++)                                                                \
                    sum += p[t] = EXP(p[t] - m);                                                               \
                for (int64_t t = 0; t < n; t++) {                                                              \
                    p[t] /= sum;                                                                               \
                    CT x = 0;                                                                                  \
                    for (int64_t d = 0; d < Dv; d++)                                                           \
                        x += dyr[d] * vb[t * Dv + d];                                                          \
                    dp[t] = x;                                                                                 \
                    delta += p[t] * x;                                                                         \
                }                                                                                              \
                for (int64_t t = 0; t < n; t++) {                                                              \
                    const CT ds = p[t] * (dp[t] - delta) * scale, pt = p[t];                                   \
                    const CT *kr = kb + t * D;                                                                 \
                    CT *dkr = dkb + t * D, *dvr = dvb + t * Dv;                                                \
                    for (int64_t d = 0; d < D; d++) {                                                          \
                        dqr[d] += ds * kr[d];                                                                  \
                        dkr[d] += ds * qr[d];                                                                  \
                    }                                                                                          \
                    for (int64_t d = 0; d < Dv; d++)                                                           \
                        dvr[d] += pt * dyr[d];                                                                 \
                }                                                                                              \
            }                                                                                                  \
    }

ATTN_GRAD_CORE(f32, float, expf)
ATTN_GRAD_CORE(f64, double, exp)

/* Elements of q, k, v, dy (the operands the kernel reads) and of the result. */
static void attn_grad_sizes(const rlx_graph *g, const rlx_node_data *n, int64_t *in, int64_t *out)
{
    *in = rlx_shape_numel(&IN_NODE(g, n, 0)->shape) + rlx_shape_numel(&IN_NODE(g, n, 1)->shape) +
          rlx_shape_numel(&IN_NODE(g, n, 2)->shape) + rlx_shape_numel(&IN_NODE(g, n, 4)->shape);
    *out = rlx_shape_numel(&n->shape);
}

/* Per thread two score rows; f16/bf16 operands and result also as f32
 * copies. */
static size_t attn_grad_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    rlx_dtype t = n->dtype;
    size_t es = t == RLX_F64 ? sizeof(double) : sizeof(float);
    size_t rows = (size_t)(threads < 1 ? 1 : threads) * 2 * (size_t)IN_NODE(g, n, 1)->shape.dims[2] * es;
    if (t == RLX_F64 || t == RLX_F32)
        return rows;
    int64_t in, out;
    attn_grad_sizes(g, n, &in, &out);
    return rows + (size_t)(in + out) * sizeof(float);
}

static rlx_status k_attention_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node, *q = t->in_node[0], *k = t->in_node[1], *v = t->in_node[2];
    attn_grad_args a = {q->shape.dims[0],
                        q->shape.dims[1],
                        k->shape.dims[1],
                        q->shape.dims[2],
                        k->shape.dims[2],
                        q->shape.dims[3],
                        v->shape.dims[3],
                        n->attrs.attention.scale,
                        n->attrs.attention.causal,
                        NULL,
                        RLX_BOOL,
                        {0}};
    if (n->attrs.attention.has_mask) {
        rlx_shape full = {4, {a.B, a.H, a.S, a.T}};
        a.mask = t->in[5];
        a.mask_dt = t->in_node[5]->dtype;
        rlx_shape_broadcast_strides(&t->in_node[5]->shape, &full, a.mstr);
    }
    const int64_t nq = rlx_shape_numel(&q->shape), nk = rlx_shape_numel(&k->shape), items = a.B * a.Hk;
    int threads = rlx_cpu_threads(ctx, items * a.S * a.T * (a.D + a.Dv) * (a.H / (a.Hk ? a.Hk : 1)));
    threads = items < threads ? (int)(items > 0 ? items : 1) : threads;
    size_t es = n->dtype == RLX_F64 ? sizeof(double) : sizeof(float), row = 2 * (size_t)a.T * es;
    if (t->scratch_bytes < (size_t)threads * row)
        return rlx_cpu_kernel_error(t, "attention gradient scratch of %zu bytes is too small", t->scratch_bytes);
    if (n->dtype == RLX_F64) {
        double *out = t->out;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            double *p = (double *)((char *)t->scratch + (size_t)omp_get_thread_num() * row);
            attn_grad_item_f64(&a, it / a.Hk, it % a.Hk, t->in[0], t->in[1], t->in[2], t->in[4], out, out + nq,
                               out + nq + nk, p, p + a.T);
        }
        return RLX_OK;
    }
    /* f32 in place; f16/bf16 through f32 copies after the score rows */
    const float *ops[4];
    float *out = t->out;
    if (n->dtype != RLX_F32) {
        float *c = (float *)((char *)t->scratch + (size_t)threads * row);
        for (int j = 0; j < 5; j++) {
            if (j == 3)
                continue; /* o: the kernel sums p dp instead of reading it */
            int64_t cnt = rlx_shape_numel(&t->in_node[j]->shape);
            for (int64_t i = 0; i < cnt; i++)
                c[i] = (float)rlx_load(t->in[j], t->in_node[j]->dtype, i);
            ops[j < 3 ? j : 3] = c;
            c += cnt;
        }
        out = c;
    } else {
        ops[0] = t->in[0], ops[1] = t->in[1], ops[2] = t->in[2], ops[3] = t->in[4];
    }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
    for (int64_t it = 0; it < items; it++) {
        float *p = (float *)((char *)t->scratch + (size_t)omp_get_thread_num() * row);
        attn_grad_item_f32(&a, it / a.Hk, it % a.Hk, ops[0], ops[1], ops[2], ops[3], out, out + nq, out + nq + nk, p,
                           p + a.T);
    }
    if (n->dtype != RLX_F32)
        for (int64_t i = 0, cnt = rlx_shape_numel(&n->shape); i < cnt; i++)
            rlx_store(t->out, n->dtype, i, out[i]);
    return RLX_OK;
}

/* ------------------------------------------------------------ the norms' gradient */

/* One row of norm_grad, in double: the statistics, then x's gradient into
 * dx and dy * xhat into dyx (rlx_decompose_norm_grad's formulas). */
static void norm_grad_row(const rlx_thunk *t, int64_t r, int64_t C, int64_t plane)
{
    const rlx_node_data *n = t->node;
    const rlx_dtype dt = t->in_node[0]->dtype;
    const void *x = t->in[0], *dy = t->in[1], *gamma = n->attrs.norm.has_gamma ? t->in[2] : NULL;
    const bool layer = !n->attrs.norm.rms;
    const int64_t base = r * C;
    double mu = 0, var = 0, sg = 0, sgx = 0;
    if (layer) {
        for (int64_t c = 0; c < C; c++)
            mu += rlx_load(x, dt, base + c);
        mu /= (double)C;
    }
    for (int64_t c = 0; c < C; c++) {
        double xc = rlx_load(x, dt, base + c) - mu, gd = rlx_load(dy, dt, base + c);
        if (gamma)
            gd *= rlx_load(gamma, dt, c);
        var += xc * xc;
        sg += gd;
        sgx += gd * xc;
    }
    const double rstd = 1.0 / sqrt(var / (double)C + n->attrs.norm.eps);
    const double mgx = sgx * rstd / (double)C, mg = layer ? sg / (double)C : 0.0;
    for (int64_t c = 0; c < C; c++) {
        double d = rlx_load(dy, dt, base + c), xhat = (rlx_load(x, dt, base + c) - mu) * rstd;
        double gd = gamma ? d * rlx_load(gamma, dt, c) : d;
        rlx_store(t->out, n->dtype, base + c, rstd * (gd - mg - xhat * mgx));
        rlx_store(t->out, n->dtype, plane + base + c, d * xhat);
    }
}

static rlx_status k_norm_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_shape *xs = &t->in_node[0]->shape;
    const int64_t C = xs->dims[xs->ndim - 1], plane = rlx_shape_numel(xs), rows = C ? plane / C : 0;
    RLX_CPU_FOR(rlx_cpu_threads(ctx, plane * 8), r, rows, norm_grad_row(t, r, C, plane););
    return RLX_OK;
}

void rlx_cpu_register_train(rlx_cpu_kernel *table)
{
    table[RLX_OP_NORM_GRAD].fn = k_norm_grad;
    table[RLX_OP_ATTENTION_GRAD] = (rlx_cpu_kernel){.fn = k_attention_grad, .scratch = attn_grad_scratch};
    table[RLX_OP_OPTIMIZER_STEP].fn = k_optimizer_step;
    table[RLX_OP_CROSS_ENTROPY].fn = k_cross_entropy;
    table[RLX_OP_CROSS_ENTROPY_GRAD].fn = k_cross_entropy_grad;
}
