/* kernels_train.c - training's own kernels: the optimizer step (param,
 * gradient and optimizer state updated in place, one pass over the
 * elements, split among threads; the formula is op_math.h's, shared with
 * the CUDA kernel), the cross-entropy with its gradient, a row each
 * (statistics in double), attention's gradient (each head's probabilities
 * recomputed a block of rows at a time, never kept) and the norms' (a row
 * at a time). */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

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
        const rlx_dtype gt = t->in_node[1]->dtype; /* f32, or f16/bf16 widened as read */
        const float *g = t->in[1];
        float dummy1 = 0, dummy2 = 0;
        for (int64_t i = begin; i < end; i++)
            rlx_optim_step_f32(&c, hyper, gscale, &p[i], gt == RLX_F32 ? g[i] : (float)rlx_load(t->in[1], gt, i),
                               s1 ? &s1[i] : &dummy1, s2 ? &s2[i] : &dummy2);
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

/* ------------------------------------------------------------ attention's gradient */

typedef struct attn_grad_args {
    int64_t B, H, Hk, S, T, D, Dv;
    double scale;
    int causal;
    const void *mask; /* NULL: none */
    rlx_dtype mask_dt;
    int64_t mstr[RLX_MAX_DIMS]; /* over [B, H, S, T], 0 where broadcast */
} attn_grad_args;

/* Keys row s of the head sees: all T, or causal, up to its diagonal. */
static int64_t attn_grad_keys(const attn_grad_args *a, int64_t s)
{
    if (!a->causal)
        return a->T;
    int64_t n = s + a->T - a->S + 1;
    return n < 0 ? 0 : n < a->T ? n : a->T;
}

/* The mask's effect on score x of row s, key t of head (b, h): -inf where
 * it hides the key, x plus its value where additive. */
static double attn_grad_mask(const attn_grad_args *a, int64_t b, int64_t h, int64_t s, int64_t t, double x)
{
    if (!a->mask)
        return x;
    int64_t mo = b * a->mstr[0] + h * a->mstr[1] + s * a->mstr[2] + t * a->mstr[3];
    if (a->mask_dt == RLX_BOOL)
        return ((const uint8_t *)a->mask)[mo] ? x : -INFINITY;
    return x + rlx_load(a->mask, a->mask_dt, mo);
}

/* f64 (the gradient checks' dtype): one kv head (b, hk) and the G query
 * heads that read it, row by row in double: the probabilities of row s
 * recomputed (p), dp = dy . v, ds = p (dp - sum p dp) scale; dq[s] = ds k,
 * dk += ds q, dv += p dy.  dk and dv belong to this item alone. */
static void attn_grad_item_f64(const attn_grad_args *a, int64_t b, int64_t hk, const double *q, const double *k,
                               const double *v, const double *dy, double *dq, double *dk, double *dv, double *p,
                               double *dp)
{
    const int64_t G = a->H / a->Hk, D = a->D, Dv = a->Dv, T = a->T, S = a->S;
    const double *kb = k + (b * a->Hk + hk) * T * D, *vb = v + (b * a->Hk + hk) * T * Dv;
    double *dkb = dk + (b * a->Hk + hk) * T * D, *dvb = dv + (b * a->Hk + hk) * T * Dv;
    memset(dkb, 0, (size_t)(T * D) * sizeof *dkb);
    memset(dvb, 0, (size_t)(T * Dv) * sizeof *dvb);
    for (int64_t h = hk * G; h < (hk + 1) * G; h++)
        for (int64_t s = 0; s < S; s++) {
            const int64_t row = (b * a->H + h) * S + s, n = attn_grad_keys(a, s);
            const double *qr = q + row * D, *dyr = dy + row * Dv;
            double *dqr = dq + row * D, m = -INFINITY, sum = 0, delta = 0;
            memset(dqr, 0, (size_t)D * sizeof *dqr);
            for (int64_t t = 0; t < n; t++) {
                double x = 0;
                for (int64_t d = 0; d < D; d++)
                    x += qr[d] * kb[t * D + d];
                p[t] = attn_grad_mask(a, b, h, s, t, x * a->scale);
                m = p[t] > m ? p[t] : m;
            }
            if (m == -INFINITY) /* every key hidden: the row's output is zeros, its gradient too */
                continue;
            for (int64_t t = 0; t < n; t++)
                sum += p[t] = exp(p[t] - m);
            for (int64_t t = 0; t < n; t++) {
                double x = 0;
                p[t] /= sum;
                for (int64_t d = 0; d < Dv; d++)
                    x += dyr[d] * vb[t * Dv + d];
                dp[t] = x;
                delta += p[t] * x;
            }
            for (int64_t t = 0; t < n; t++) {
                const double ds = p[t] * (dp[t] - delta) * a->scale;
                for (int64_t d = 0; d < D; d++) {
                    dqr[d] += ds * kb[t * D + d];
                    dkb[t * D + d] += ds * qr[d];
                }
                for (int64_t d = 0; d < Dv; d++)
                    dvb[t * Dv + d] += p[t] * dyr[d];
            }
        }
}

#define AG_ROWS 64 /* query rows per block of the f32 path's products */

/* f32: the same per kv head, a block of up to AG_ROWS query rows at a time
 * as products (the library's GEMM): P = softmax(scale q k^T + mask),
 * dP = dy v^T, dS = P (dP - rowsum(P dP)) scale, dq = dS k, dk += dS^T q,
 * dv += P^T dy.  p and dp: AG_ROWS x T each. */
static void attn_grad_item_f32(const attn_grad_args *a, const rlx_backend_settings *set, int64_t b, int64_t hk,
                               const float *q, const float *k, const float *v, const float *dy, float *dq, float *dk,
                               float *dv, float *p, float *dp)
{
    const int64_t G = a->H / a->Hk, D = a->D, Dv = a->Dv, T = a->T, S = a->S;
    const float *kb = k + (b * a->Hk + hk) * T * D, *vb = v + (b * a->Hk + hk) * T * Dv;
    float *dkb = dk + (b * a->Hk + hk) * T * D, *dvb = dv + (b * a->Hk + hk) * T * Dv;
    memset(dkb, 0, (size_t)(T * D) * sizeof *dkb);
    memset(dvb, 0, (size_t)(T * Dv) * sizeof *dvb);
    for (int64_t h = hk * G; h < (hk + 1) * G; h++)
        for (int64_t s0 = 0; s0 < S; s0 += AG_ROWS) {
            const int64_t rows = S - s0 < AG_ROWS ? S - s0 : AG_ROWS, row0 = (b * a->H + h) * S + s0;
            const int64_t n = attn_grad_keys(a, s0 + rows - 1); /* the block's widest row */
            const float *qr = q + row0 * D, *dyr = dy + row0 * Dv;
            float *dqr = dq + row0 * D;
            if (n == 0) {
                memset(dqr, 0, (size_t)(rows * D) * sizeof *dqr);
                continue;
            }
            rlx_sgemm(0, 1, rows, n, D, (float)a->scale, qr, D, kb, D, 0.0f, p, T, 1, set);
            rlx_sgemm(0, 1, rows, n, Dv, 1.0f, dyr, Dv, vb, Dv, 0.0f, dp, T, 1, set);
            for (int64_t r = 0; r < rows; r++) {
                float *pr = p + r * T, *dpr = dp + r * T;
                const int64_t s = s0 + r, nr = attn_grad_keys(a, s);
                float m = -INFINITY;
                for (int64_t t = 0; t < n; t++) {
                    float x = t < nr ? pr[t] : -INFINITY;
                    if (a->mask && t < nr)
                        x = (float)attn_grad_mask(a, b, h, s, t, x);
                    pr[t] = x;
                    m = x > m ? x : m;
                }
                if (m == -INFINITY) { /* every key hidden: zeros, as the op gives */
                    memset(pr, 0, (size_t)n * sizeof *pr);
                    memset(dpr, 0, (size_t)n * sizeof *dpr);
                    continue;
                }
                float sum = 0, delta = 0;
                for (int64_t t = 0; t < n; t++)
                    sum += pr[t] = expf(pr[t] - m);
                const float inv = 1.0f / sum;
                for (int64_t t = 0; t < n; t++) {
                    pr[t] *= inv;
                    delta += pr[t] * dpr[t];
                }
                for (int64_t t = 0; t < n; t++)
                    dpr[t] = pr[t] * (dpr[t] - delta) * (float)a->scale;
            }
            rlx_sgemm(0, 0, rows, D, n, 1.0f, dp, T, kb, D, 0.0f, dqr, D, 1, set);
            rlx_sgemm(1, 0, n, D, rows, 1.0f, dp, T, qr, D, 1.0f, dkb, D, 1, set);
            rlx_sgemm(1, 0, n, Dv, rows, 1.0f, p, T, dyr, Dv, 1.0f, dvb, Dv, 1, set);
        }
}

typedef struct attn_grad_job {
    const rlx_thunk *t;
    const rlx_run_ctx *ctx;
    attn_grad_args a;
    const void *q, *k, *v, *dy; /* f64 or f32 */
    void *out;
    size_t row; /* scratch bytes per worker */
} attn_grad_job;

static void attn_grad_items(void *arg, int64_t lo, int64_t hi, int worker)
{
    const attn_grad_job *j = arg;
    const attn_grad_args *a = &j->a;
    const int64_t nq = a->B * a->H * a->S * a->D, nk = a->B * a->Hk * a->T * a->D;
    char *mine = (char *)j->t->scratch + (size_t)worker * j->row;
    for (int64_t it = lo; it < hi; it++) {
        if (j->t->node->dtype == RLX_F64) {
            double *o = j->out, *pr = (double *)mine;
            attn_grad_item_f64(a, it / a->Hk, it % a->Hk, j->q, j->k, j->v, j->dy, o, o + nq, o + nq + nk, pr,
                               pr + a->T);
        } else {
            float *o = j->out, *pr = (float *)mine;
            attn_grad_item_f32(a, j->ctx->settings, it / a->Hk, it % a->Hk, j->q, j->k, j->v, j->dy, o, o + nq,
                               o + nq + nk, pr, pr + AG_ROWS * a->T);
        }
    }
}

/* Per worker: f64 two score rows, f32 two blocks of AG_ROWS score rows. */
static size_t attn_grad_worker_bytes(rlx_dtype t, int64_t T)
{
    return t == RLX_F64 ? 2 * (size_t)T * sizeof(double) : 2 * (size_t)AG_ROWS * (size_t)T * sizeof(float);
}

/* The workers' rows; f16/bf16 operands and result also as f32 copies. */
static size_t attn_grad_scratch(const rlx_graph *g, const rlx_node_data *n, int threads)
{
    size_t rows =
        (size_t)(threads < 1 ? 1 : threads) * attn_grad_worker_bytes(n->dtype, IN_NODE(g, n, 1)->shape.dims[2]);
    if (n->dtype == RLX_F64 || n->dtype == RLX_F32)
        return rows;
    int64_t in = 0;
    for (int j = 0; j < 5; j++)
        if (j != 3) /* o: the kernel sums p dp instead of reading it */
            in += rlx_shape_numel(&IN_NODE(g, n, j)->shape);
    return rows + (size_t)(in + rlx_shape_numel(&n->shape)) * sizeof(float);
}

static rlx_status k_attention_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node, *q = t->in_node[0], *k = t->in_node[1], *v = t->in_node[2];
    attn_grad_job j = {t, ctx, {0}, NULL, NULL, NULL, NULL, t->out, 0};
    attn_grad_args *a = &j.a;
    *a = (attn_grad_args){q->shape.dims[0],
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
        rlx_shape full = {4, {a->B, a->H, a->S, a->T}};
        a->mask = t->in[5];
        a->mask_dt = t->in_node[5]->dtype;
        rlx_shape_broadcast_strides(&t->in_node[5]->shape, &full, a->mstr);
    }
    const int64_t items = a->B * a->Hk;
    int threads = rlx_cpu_threads(ctx, items * a->S * a->T * (a->D + a->Dv) * (a->H / (a->Hk ? a->Hk : 1)));
    threads = items < threads ? (int)(items > 0 ? items : 1) : threads;
    j.row = attn_grad_worker_bytes(n->dtype, a->T);
    if (t->scratch_bytes < (size_t)threads * j.row)
        return rlx_cpu_kernel_error(t, "attention gradient scratch of %zu bytes is too small", t->scratch_bytes);
    j.q = t->in[0], j.k = t->in[1], j.v = t->in[2], j.dy = t->in[4];
    if (n->dtype != RLX_F32 && n->dtype != RLX_F64) { /* f16/bf16 through f32 copies after the rows */
        float *c = (float *)((char *)t->scratch + (size_t)threads * j.row);
        const void **ops[5] = {&j.q, &j.k, &j.v, NULL, &j.dy};
        for (int i = 0; i < 5; i++) {
            if (!ops[i])
                continue;
            int64_t cnt = rlx_shape_numel(&t->in_node[i]->shape);
            for (int64_t e = 0; e < cnt; e++)
                c[e] = (float)rlx_load(t->in[i], t->in_node[i]->dtype, e);
            *ops[i] = c;
            c += cnt;
        }
        j.out = c;
    }
    rlx_cpu_parallel(threads, items, attn_grad_items, &j);
    if (j.out != t->out)
        for (int64_t e = 0, cnt = rlx_shape_numel(&n->shape); e < cnt; e++)
            rlx_store(t->out, n->dtype, e, ((const float *)j.out)[e]);
    return RLX_OK;
}

/* ------------------------------------------------------------ the norms' gradient */

/* One row of norm_grad, in double: the statistics, then x's gradient into
 * the first plane and dy * xhat into the second (rlx_decompose_norm_grad's
 * formulas). */
static void norm_grad_rows(void *arg, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *n = t->node;
    const rlx_dtype dt = t->in_node[0]->dtype;
    const rlx_shape *xs = &t->in_node[0]->shape;
    const int64_t C = xs->dims[xs->ndim - 1], plane = rlx_shape_numel(xs);
    const void *x = t->in[0], *dy = t->in[1], *gamma = n->attrs.norm.has_gamma ? t->in[2] : NULL;
    const bool layer = !n->attrs.norm.rms;
    for (int64_t r = lo; r < hi; r++) {
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
}

static rlx_status k_norm_grad(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_shape *xs = &t->in_node[0]->shape;
    const int64_t C = xs->dims[xs->ndim - 1], plane = rlx_shape_numel(xs), rows = C ? plane / C : 0;
    rlx_cpu_parallel(rlx_cpu_threads(ctx, plane * 8), rows, norm_grad_rows, (void *)t);
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
