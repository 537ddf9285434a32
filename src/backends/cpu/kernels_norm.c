/* kernels_norm.c - softmax and log-softmax over any axis, layer norm and RMS
 * norm over the last axis.  Statistics accumulate in double; the max is
 * subtracted before exponentiating, so large inputs do not overflow.  A row
 * that is all -inf gives NaN (as numpy and PyTorch do). */
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_expf.h"

/* ---- softmax family: the input is [outer, n, inner]; each (outer, inner)
 * pair is one row of n elements at stride inner. */

/* One row; returns 1 without writing anything if the row holds a NaN. */
RLX_VEC_BEGIN
RLX_CLONES static int softmax_row_f32(const float *x, float *y, int64_t n, int64_t s, int log_form)
{
    float m = -INFINITY;
    int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
    for (int64_t i = 0; i < n; i++) {
        m = x[i * s] > m ? x[i * s] : m;
        nan |= x[i * s] != x[i * s];
    }
    if (nan)
        return 1;
    double sum = 0;
    if (log_form) {
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; i++) {
            float e;
            RLX_EXPF_VEC(e, x[i * s] - m);
            sum += e;
        }
        double lse = (double)m + log(sum);
        for (int64_t i = 0; i < n; i++)
            y[i * s] = (float)((double)x[i * s] - lse);
    } else {
        /* y may alias x: each element is read before it is overwritten */
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; i++) {
            float e;
            RLX_EXPF_VEC(e, x[i * s] - m);
            y[i * s] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i * s] *= inv;
    }
    return 0;
}
RLX_VEC_END

static void softmax_row_any(const void *x, void *y, rlx_dtype dt, int64_t base, int64_t n, int64_t s, int log_form)
{
    double m = -INFINITY;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = rlx_load(x, dt, base + i * s);
        nan |= v != v;
        m = v > m ? v : m;
    }
    if (nan)
        m = NAN;
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += exp(rlx_load(x, dt, base + i * s) - m);
    double lse = m + log(sum), inv = 1.0 / sum;
    /* compute every value before storing: y may alias x */
    for (int64_t i = 0; i < n; i++) {
        double v = rlx_load(x, dt, base + i * s);
        rlx_store(y, dt, base + i * s, log_form ? v - lse : exp(v - m) * inv);
    }
}

typedef struct softmax_job {
    const rlx_thunk *t;
    int64_t n, inner;
} softmax_job;

static void softmax_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const softmax_job *j = arg;
    const rlx_thunk *t = j->t;
    rlx_dtype dt = t->in_node[0]->dtype;
    int log_form = t->node->op == RLX_OP_LOG_SOFTMAX;
    int64_t n = j->n, inner = j->inner;
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = (r / inner) * n * inner + (r % inner);
        if (dt == RLX_F32 &&
            softmax_row_f32((const float *)t->in[0] + base, (float *)t->out + base, n, inner, log_form) == 0)
            continue;
        softmax_row_any(t->in[0], t->out, dt, base, n, inner, log_form);
    }
}

static rlx_status k_softmax(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int axis = t->node->attrs.softmax.axis;
    int64_t outer = 1, n = xn->shape.dims[axis], inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= xn->shape.dims[d];
    for (int d = axis + 1; d < xn->shape.ndim; d++)
        inner *= xn->shape.dims[d];
    int64_t rows = outer * inner;
    if (rows == 0 || n == 0)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, rows * n * 8);
    if (rows < threads)
        threads = 1;
    softmax_job j = {.t = t, .n = n, .inner = inner};
    rlx_cpu_parallel(threads, rows, softmax_rows, &j);
    return RLX_OK;
}

/* ---- layer norm and RMS norm over the last axis */

/* Partial sums a row's statistics keep side by side: the adds of one do
 * not wait on another's (one vector sum was a chain of dependent adds, and
 * the row's statistics took half its time). */
enum { NORM_LANES = 16 };

/* One f32 row: statistics in double over NORM_LANES interleaved partial
 * sums, then the scale in f32 from the mean split in two floats, hi + lo:
 * x - hi is exact near the mean, so a mean far from zero (1e6 with a
 * spread of 1) costs no accuracy (within 4e-7 of a long double row, where
 * the scale in double gave 1.2e-7); y may be x. */
RLX_CLONES void rlx_cpu_norm_row_f32(const float *x, float *y, const float *g, const float *b, int64_t n, int is_layer,
                                     double eps)
{
    double part[NORM_LANES] = {0}, mean = 0, var = 0;
    const int64_t body = n / NORM_LANES * NORM_LANES;
    if (is_layer) {
        for (int64_t i = 0; i < body; i += NORM_LANES)
            for (int k = 0; k < NORM_LANES; k++)
                part[k] += x[i + k];
        for (int64_t i = body; i < n; i++)
            part[i - body] += x[i];
        for (int k = 0; k < NORM_LANES; k++)
            mean += part[k], part[k] = 0;
        mean /= (double)n;
    }
    for (int64_t i = 0; i < body; i += NORM_LANES)
        for (int k = 0; k < NORM_LANES; k++) {
            double d = x[i + k] - mean;
            part[k] += d * d;
        }
    for (int64_t i = body; i < n; i++) {
        double d = x[i] - mean;
        part[i - body] += d * d;
    }
    for (int k = 0; k < NORM_LANES; k++)
        var += part[k];
    const float hi = (float)mean, lo = (float)(mean - hi), s = (float)(1.0 / sqrt(var / (double)n + eps));
    if (g && b) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] = ((x[i] - hi) - lo) * s * g[i] + b[i];
    } else if (g) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] = ((x[i] - hi) - lo) * s * g[i];
    } else if (b) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] = ((x[i] - hi) - lo) * s + b[i];
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] = ((x[i] - hi) - lo) * s;
    }
}

static void norm_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    const rlx_thunk *t = arg;
    const rlx_node_data *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    int is_layer = t->node->op == RLX_OP_LAYER_NORM;
    double eps = t->node->attrs.norm.eps;
    int64_t n = xn->shape.dims[xn->shape.ndim - 1];
    int k = 1;
    const void *gamma = t->node->attrs.norm.has_gamma ? t->in[k++] : NULL;
    const void *beta = (is_layer && t->node->attrs.norm.has_beta) ? t->in[k++] : NULL;
    for (int64_t r = r0; r < r1; r++) {
        int64_t base = r * n;
        if (dt == RLX_F32) {
            rlx_cpu_norm_row_f32((const float *)t->in[0] + base, (float *)t->out + base, gamma, beta, n, is_layer, eps);
            continue;
        }
        double mean = 0, var = 0;
        if (is_layer) {
            for (int64_t i = 0; i < n; i++)
                mean += rlx_load(t->in[0], dt, base + i);
            mean /= (double)n;
        }
        for (int64_t i = 0; i < n; i++) {
            double d = rlx_load(t->in[0], dt, base + i) - mean;
            var += d * d;
        }
        double inv = 1.0 / sqrt(var / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            double v = (rlx_load(t->in[0], dt, base + i) - mean) * inv;
            if (gamma)
                v *= rlx_load(gamma, dt, i);
            if (beta)
                v += rlx_load(beta, dt, i);
            rlx_store(t->out, dt, base + i, v);
        }
    }
}

static rlx_status k_norm(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int64_t n = xn->shape.dims[xn->shape.ndim - 1];
    int64_t rows = n ? rlx_shape_numel(&xn->shape) / n : 0;
    if (rows == 0 || n == 0)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, rows * n * 4);
    if (rows < threads)
        threads = 1;
    rlx_cpu_parallel(threads, rows, norm_rows, (void *)t);
    return RLX_OK;
}

void rlx_cpu_register_norm(rlx_cpu_kernel *table)
{
    table[RLX_OP_SOFTMAX].fn = k_softmax;
    table[RLX_OP_LOG_SOFTMAX].fn = k_softmax;
    table[RLX_OP_LAYER_NORM].fn = k_norm;
    table[RLX_OP_RMS_NORM].fn = k_norm;
}
