/* kernels_reduce.c - reductions (sum, mean, max, min, prod over an axis
 * mask, keepdims) and argmax/argmin along one axis.
 *
 * The input's dims are split into kept and reduced ones; neighbouring dims of
 * the same kind are merged, so the usual cases (last axis, leading axes, all
 * axes) become one or two plain loops.  Floats accumulate in double; integer
 * types accumulate exactly in 64 bits (sum and prod wrap around modulo 2^64
 * and are then narrowed to the output type, as numpy does).  reduce_max and
 * reduce_min propagate NaN (numpy's max/min); an empty sum is 0, an empty
 * product 1 and an empty mean NaN (0/0). */
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/cpu_expf.h" /* RLX_VEC_* and the clang note on omp simd */

typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD } reduce_kind;

/* Dims of one reduction after merging, in row-major order of the input. */
typedef struct reduce_layout {
    int nk, nr; /* kept / reduced dims */
    int64_t kdim[RLX_MAX_DIMS], kstr[RLX_MAX_DIMS];
    int64_t rdim[RLX_MAX_DIMS], rstr[RLX_MAX_DIMS];
    int64_t n_out, n_red;
} reduce_layout;

static void push_dim(int *n, int64_t *dim, int64_t *str, int64_t d, int64_t s)
{
    /* merges d into the previous dim when they are adjacent in memory */
    if (*n > 0 && str[*n - 1] == d * s) {
        dim[*n - 1] *= d;
        str[*n - 1] = s;
        return;
    }
    dim[*n] = d;
    str[*n] = s;
    (*n)++;
}

static void make_layout(const rlx_shape *in, uint32_t axes, reduce_layout *L)
{
    int64_t st[RLX_MAX_DIMS];
    rlx_shape_strides(in, st);
    L->nk = L->nr = 0;
    L->n_out = L->n_red = 1;
    for (int d = 0; d < in->ndim; d++) {
        int64_t n = in->dims[d];
        if (axes & (1u << d)) {
            L->n_red *= n;
            if (n != 1)
                push_dim(&L->nr, L->rdim, L->rstr, n, st[d]);
        } else {
            L->n_out *= n;
            if (n != 1)
                push_dim(&L->nk, L->kdim, L->kstr, n, st[d]);
        }
    }
}

/* Input offset of output element o (kept dims only). */
static inline int64_t kept_offset(const reduce_layout *L, int64_t o)
{
    int64_t off = 0;
    for (int d = L->nk - 1; d >= 0; d--) {
        off += (o % L->kdim[d]) * L->kstr[d];
        o /= L->kdim[d];
    }
    return off;
}

/* ---- float accumulation over one run of n elements at stride s */

#define FLOAT_RUN(T, CONV)                                                                                            \
    static void run_##T(reduce_kind k, const void *p, int64_t off, int64_t n, int64_t s, double *acc)                 \
    {                                                                                                                 \
        const T *x = (const T *)p + off;                                                                              \
        double a = *acc;                                                                                              \
        switch (k) {                                                                                                  \
        case R_SUM:                                                                                                   \
        case R_MEAN: _Pragma("omp simd reduction(+ : a)") for (int64_t i = 0; i < n; i++) a += CONV(x[i * s]); break; \
        case R_PROD:                                                                                                  \
            for (int64_t i = 0; i < n; i++)                                                                           \
                a *= CONV(x[i * s]);                                                                                  \
            break;                                                                                                    \
        case R_MAX:                                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                                         \
                double v = CONV(x[i * s]);                                                                            \
                a = (v > a || v != v) ? v : a;                                                                        \
                if (a != a)                                                                                           \
                    break;                                                                                            \
            }                                                                                                         \
            break;                                                                                                    \
        case R_MIN:                                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                                         \
                double v = CONV(x[i * s]);                                                                            \
                a = (v < a || v != v) ? v : a;                                                                        \
                if (a != a)                                                                                           \
                    break;                                                                                            \
            }                                                                                                         \
            break;                                                                                                    \
        }                                                                                                             \
        *acc = a;                                                                                                     \
    }

#define CONV_ID(v) ((double)(v))
#define CONV_F16(v) ((double)rlx_f16_to_f32(v))
#define CONV_BF16(v) ((double)rlx_bf16_to_f32(v))
typedef uint16_t f16_t;
typedef uint16_t bf16_t;
FLOAT_RUN(float, CONV_ID)
FLOAT_RUN(double, CONV_ID)
FLOAT_RUN(f16_t, CONV_F16)
FLOAT_RUN(bf16_t, CONV_BF16)

/* ---- integer accumulation (exact; sum/prod wrap modulo 2^64) */

#define INT_RUN(T)                                                                                      \
    static void irun_##T(reduce_kind k, const void *p, int64_t off, int64_t n, int64_t s, int64_t *acc) \
    {                                                                                                   \
        const T *x = (const T *)p + off;                                                                \
        int64_t a = *acc;                                                                               \
        switch (k) {                                                                                    \
        case R_SUM:                                                                                     \
        case R_MEAN:                                                                                    \
            for (int64_t i = 0; i < n; i++)                                                             \
                a = (int64_t)((uint64_t)a + (uint64_t)(int64_t)x[i * s]);                               \
            break;                                                                                      \
        case R_PROD:                                                                                    \
            for (int64_t i = 0; i < n; i++)                                                             \
                a = (int64_t)((uint64_t)a * (uint64_t)(int64_t)x[i * s]);                               \
            break;                                                                                      \
        case R_MAX:                                                                                     \
            for (int64_t i = 0; i < n; i++)                                                             \
                a = (int64_t)x[i * s] > a ? (int64_t)x[i * s] : a;                                      \
            break;                                                                                      \
        case R_MIN:                                                                                     \
            for (int64_t i = 0; i < n; i++)                                                             \
                a = (int64_t)x[i * s] < a ? (int64_t)x[i * s] : a;                                      \
            break;                                                                                      \
        }                                                                                               \
        *acc = a;                                                                                       \
    }

INT_RUN(int64_t)
INT_RUN(int32_t)
INT_RUN(int8_t)
INT_RUN(uint8_t)

/* ---- element-wise accumulation of one contiguous row into acc[0..n):
 * used when the innermost input dim is kept, so that every reduced
 * position contributes a whole row (no strided reads). */

#define FLOAT_ROW(T, CONV)                                                                 \
    static void row_##T(reduce_kind k, const void *p, int64_t off, int64_t n, double *acc) \
    {                                                                                      \
        const T *x = (const T *)p + off;                                                   \
        switch (k) {                                                                       \
        case R_SUM:                                                                        \
        case R_MEAN:                                                                       \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i] += CONV(x[i]);                                                      \
            break;                                                                         \
        case R_PROD:                                                                       \
            for (int64_t i = 0; i < n; i++)                                                \
                acc[i] *= CONV(x[i]);                                                      \
            break;                                                                         \
        case R_MAX:                                                                        \
            for (int64_t i = 0; i < n; i++) {                                              \
                double v = CONV(x[i]);                                                     \
                acc[i] = (v > acc[i] || v != v) ? v : acc[i];                              \
            }                                                                              \
            break;                                                                         \
        case R_MIN:                                                                        \
            for (int64_t i = 0; i < n; i++) {                                              \
                double v = CONV(x[i]);                                                     \
                acc[i] = (v < acc[i] || v != v) ? v : acc[i];                              \
            }                                                                              \
            break;                                                                         \
        }                                                                                  \
    }

FLOAT_ROW(float, CONV_ID)
FLOAT_ROW(double, CONV_ID)
FLOAT_ROW(f16_t, CONV_F16)
FLOAT_ROW(bf16_t, CONV_BF16)

#define INT_ROW(T)                                                                           \
    static void irow_##T(reduce_kind k, const void *p, int64_t off, int64_t n, int64_t *acc) \
    {                                                                                        \
        const T *x = (const T *)p + off;                                                     \
        switch (k) {                                                                         \
        case R_SUM:                                                                          \
        case R_MEAN:                                                                         \
            for (int64_t i = 0; i < n; i++)                                                  \
                acc[i] = (int64_t)((uint64_t)acc[i] + (uint64_t)(int64_t)x[i]);              \
            break;                                                                           \
        case R_PROD:                                                                         \
            for (int64_t i = 0; i < n; i++)                                                  \
                acc[i] = (int64_t)((uint64_t)acc[i] * (uint64_t)(int64_t)x[i]);              \
            break;                                                                           \
        case R_MAX:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                  \
                acc[i] = (int64_t)x[i] > acc[i] ? (int64_t)x[i] : acc[i];                    \
            break;                                                                           \
        case R_MIN:                                                                          \
            for (int64_t i = 0; i < n; i++)                                                  \
                acc[i] = (int64_t)x[i] < acc[i] ? (int64_t)x[i] : acc[i];                    \
            break;                                                                           \
        }                                                                                    \
    }

INT_ROW(int64_t)
INT_ROW(int32_t)
INT_ROW(int8_t)
INT_ROW(uint8_t)

typedef void (*float_run_fn)(reduce_kind, const void *, int64_t, int64_t, int64_t, double *);
typedef void (*int_run_fn)(reduce_kind, const void *, int64_t, int64_t, int64_t, int64_t *);
typedef void (*float_row_fn)(reduce_kind, const void *, int64_t, int64_t, double *);
typedef void (*int_row_fn)(reduce_kind, const void *, int64_t, int64_t, int64_t *);

static reduce_kind kind_of(rlx_op op)
{
    switch (op) {
    case RLX_OP_REDUCE_MEAN: return R_MEAN;
    case RLX_OP_REDUCE_MAX: return R_MAX;
    case RLX_OP_REDUCE_MIN: return R_MIN;
    case RLX_OP_REDUCE_PROD: return R_PROD;
    default: return R_SUM;
    }
}

/* Calls fn over every innermost run of the reduced dims for one output. */
#define FOR_EACH_RUN(L, base, BODY)                               \
    do {                                                          \
        if ((L)->nr == 0) {                                       \
            int64_t off_ = (base), n_ = 1, s_ = 1;                \
            BODY;                                                 \
            break;                                                \
        }                                                         \
        int64_t idx_[RLX_MAX_DIMS] = {0};                         \
        int last_ = (L)->nr - 1;                                  \
        int64_t runs_ = (L)->n_red / (L)->rdim[last_];            \
        for (int64_t r_ = 0; r_ < runs_; r_++) {                  \
            int64_t off_ = (base);                                \
            for (int d_ = 0; d_ < last_; d_++)                    \
                off_ += idx_[d_] * (L)->rstr[d_];                 \
            int64_t n_ = (L)->rdim[last_], s_ = (L)->rstr[last_]; \
            BODY;                                                 \
            for (int d_ = last_ - 1; d_ >= 0; d_--) {             \
                if (++idx_[d_] < (L)->rdim[d_])                   \
                    break;                                        \
                idx_[d_] = 0;                                     \
            }                                                     \
        }                                                         \
    } while (0)

#define ROW_CHUNK 256

/* Calls BODY with off_ = input offset of every reduced position (rows kept
 * innermost), innermost reduced dim fastest. */
#define FOR_EACH_POSITION(L, BODY)                      \
    do {                                                \
        int64_t idx_[RLX_MAX_DIMS] = {0}, off_ = 0;     \
        for (int64_t r_ = 0; r_ < (L)->n_red; r_++) {   \
            BODY;                                       \
            for (int d_ = (L)->nr - 1; d_ >= 0; d_--) { \
                off_ += (L)->rstr[d_];                  \
                if (++idx_[d_] < (L)->rdim[d_])         \
                    break;                              \
                off_ -= (L)->rdim[d_] * (L)->rstr[d_];  \
                idx_[d_] = 0;                           \
            }                                           \
        }                                               \
    } while (0)

/* A reduction's outputs for the pool. */
typedef struct reduce_job {
    const rlx_thunk *t;
    const reduce_layout *L;
    reduce_kind k;
    int64_t I, nch;
} reduce_job;

/* Items of up to ROW_CHUNK kept outputs, each summed over every reduced
 * position in order. */
static void reduce_row_items(void *arg, int64_t it0, int64_t it1, int worker)
{
    (void)worker;
    const reduce_job *j = arg;
    const reduce_layout *L = j->L;
    reduce_kind k = j->k;
    rlx_dtype dt = j->t->in_node[0]->dtype;
    const void *x = j->t->in[0];
    void *y = j->t->out;
    int64_t I = j->I, nch = j->nch;
    if (rlx_dtype_is_float(dt)) {
        float_row_fn fn = dt == RLX_F32   ? row_float
                          : dt == RLX_F64 ? row_double
                          : dt == RLX_F16 ? row_f16_t
                                          : row_bf16_t;
        double init = (k == R_PROD) ? 1.0 : (k == R_MAX) ? -INFINITY : (k == R_MIN) ? INFINITY : 0.0;
        for (int64_t it = it0; it < it1; it++) {
            int64_t o0 = it / nch * I + it % nch * ROW_CHUNK, c = it % nch;
            int64_t len = I - c * ROW_CHUNK < ROW_CHUNK ? I - c * ROW_CHUNK : ROW_CHUNK;
            int64_t base = kept_offset(L, o0);
            double acc[ROW_CHUNK];
            for (int64_t i = 0; i < len; i++)
                acc[i] = init;
            FOR_EACH_POSITION(L, fn(k, x, base + off_, len, acc));
            for (int64_t i = 0; i < len; i++)
                rlx_store(y, dt, o0 + i, k == R_MEAN ? acc[i] / (double)L->n_red : acc[i]);
        }
    } else {
        int_row_fn fn = dt == RLX_I64   ? irow_int64_t
                        : dt == RLX_I32 ? irow_int32_t
                        : dt == RLX_I8  ? irow_int8_t
                                        : irow_uint8_t;
        int64_t init = (k == R_PROD) ? 1 : (k == R_MAX) ? INT64_MIN : (k == R_MIN) ? INT64_MAX : 0;
        for (int64_t it = it0; it < it1; it++) {
            int64_t o0 = it / nch * I + it % nch * ROW_CHUNK, c = it % nch;
            int64_t len = I - c * ROW_CHUNK < ROW_CHUNK ? I - c * ROW_CHUNK : ROW_CHUNK;
            int64_t base = kept_offset(L, o0);
            int64_t acc[ROW_CHUNK];
            for (int64_t i = 0; i < len; i++)
                acc[i] = init;
            FOR_EACH_POSITION(L, fn(k, x, base + off_, len, acc));
            for (int64_t i = 0; i < len; i++)
                rlx_store_i(y, dt, o0 + i, acc[i]);
        }
    }
}

static rlx_status reduce_rows(const rlx_thunk *t, const rlx_run_ctx *ctx, const reduce_layout *L, reduce_kind k,
                              int64_t n_out)
{
    int64_t I = L->kdim[L->nk - 1], nch = (I + ROW_CHUNK - 1) / ROW_CHUNK, items = n_out / I * nch;
    int threads = rlx_cpu_threads(ctx, L->n_red * n_out);
    if (items < threads)
        threads = 1;
    reduce_job j = {.t = t, .L = L, .k = k, .I = I, .nch = nch};
    rlx_cpu_parallel(threads, items, reduce_row_items, &j);
    return RLX_OK;
}

float rlx_cpu_minmax_f32(const float *x, int64_t n, bool max)
{
    float m = max ? -INFINITY : INFINITY;
    int nan = 0;
    if (max) {
#pragma omp simd reduction(max : m) reduction(| : nan)
        for (int64_t i = 0; i < n; i++) {
            nan |= x[i] != x[i];
            m = x[i] > m ? x[i] : m;
        }
    } else {
#pragma omp simd reduction(min : m) reduction(| : nan)
        for (int64_t i = 0; i < n; i++) {
            nan |= x[i] != x[i];
            m = x[i] < m ? x[i] : m;
        }
    }
    return nan ? NAN : m;
}

/* Outputs one by one, each over its runs of reduced positions. */
static void reduce_outputs(void *arg, int64_t o0, int64_t o1, int worker)
{
    (void)worker;
    const reduce_job *j = arg;
    const reduce_layout L = *j->L;
    reduce_kind k = j->k;
    rlx_dtype dt = j->t->in_node[0]->dtype;
    const void *x = j->t->in[0];
    void *y = j->t->out;
    if (rlx_dtype_is_float(dt)) {
        float_run_fn fn = dt == RLX_F32   ? run_float
                          : dt == RLX_F64 ? run_double
                          : dt == RLX_F16 ? run_f16_t
                                          : run_bf16_t;
        double init = (k == R_PROD) ? 1.0 : (k == R_MAX) ? -INFINITY : (k == R_MIN) ? INFINITY : 0.0;
        for (int64_t o = o0; o < o1; o++) {
            double acc = init;
            if (L.n_red > 0) {
                int64_t base = kept_offset(&L, o);
                FOR_EACH_RUN(&L, base, fn(k, x, off_, n_, s_, &acc));
            }
            if (k == R_MEAN)
                acc = L.n_red ? acc / (double)L.n_red : NAN;
            rlx_store(y, dt, o, acc);
        }
    } else {
        int_run_fn fn = dt == RLX_I64   ? irun_int64_t
                        : dt == RLX_I32 ? irun_int32_t
                        : dt == RLX_I8  ? irun_int8_t
                                        : irun_uint8_t;
        int64_t init = (k == R_PROD) ? 1 : (k == R_MAX) ? INT64_MIN : (k == R_MIN) ? INT64_MAX : 0;
        for (int64_t o = o0; o < o1; o++) {
            int64_t acc = init;
            if (L.n_red > 0) {
                int64_t base = kept_offset(&L, o);
                FOR_EACH_RUN(&L, base, fn(k, x, off_, n_, s_, &acc));
            }
            rlx_store_i(y, dt, o, acc);
        }
    }
}

static rlx_status k_reduce(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    rlx_dtype dt = xn->dtype;
    reduce_kind k = kind_of(t->node->op);
    reduce_layout L;
    make_layout(&xn->shape, t->node->attrs.reduce.axes, &L);
    int64_t n_out = rlx_shape_numel(&t->node->shape);
    if (n_out == 0)
        return RLX_OK;
    if (rlx_shape_numel(&xn->shape) == 0)
        L.n_red = 0; /* only reduced dims can be empty here */
    const void *x = t->in[0];
    void *y = t->out;
    if (dt == RLX_F32 && n_out == 1 && (k == R_MAX || k == R_MIN)) {
        *(float *)y = rlx_cpu_minmax_f32(x, L.n_red, k == R_MAX);
        return RLX_OK;
    }
    int threads = rlx_cpu_threads(ctx, L.n_red * n_out);
    if (n_out < threads)
        threads = 1;

    /* innermost input dim kept (e.g. a reduction over leading axes): add
     * whole rows of up to ROW_CHUNK outputs per reduced position */
    if (L.n_red > 0 && L.nr > 0 && L.nk > 0 && L.kstr[L.nk - 1] == 1 && L.kdim[L.nk - 1] >= 16)
        return reduce_rows(t, ctx, &L, k, n_out);

    reduce_job j = {.t = t, .L = &L, .k = k};
    rlx_cpu_parallel(threads, n_out, reduce_outputs, &j);
    return RLX_OK;
}

/* ---- argmax / argmin: index of the first extreme value along one axis.
 * NaN counts as the extreme for both (numpy): the first NaN wins. */

typedef struct arg_job {
    const rlx_thunk *t;
    int64_t n, inner;
} arg_job;

static void arg_outputs(void *arg, int64_t o0, int64_t o1, int worker)
{
    (void)worker;
    const arg_job *j = arg;
    rlx_dtype dt = j->t->in_node[0]->dtype;
    int is_max = j->t->node->op == RLX_OP_ARGMAX, is_float = rlx_dtype_is_float(dt);
    int64_t n = j->n, inner = j->inner;
    const void *x = j->t->in[0];
    int64_t *y = (int64_t *)j->t->out;
    for (int64_t o = o0; o < o1; o++) {
        int64_t base = (o / inner) * n * inner + (o % inner);
        int64_t best_i = 0;
        if (is_float) {
            /* doubles hold every float dtype exactly, so one loop serves all */
            double best = rlx_load(x, dt, base);
            if (best == best) {
                for (int64_t i = 1; i < n; i++) {
                    double v = rlx_load(x, dt, base + i * inner);
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
        } else {
            int64_t best = rlx_load_i(x, dt, base);
            for (int64_t i = 1; i < n; i++) {
                int64_t v = rlx_load_i(x, dt, base + i * inner);
                if (is_max ? v > best : v < best) {
                    best = v;
                    best_i = i;
                }
            }
        }
        y[o] = best_i;
    }
}

static rlx_status k_arg(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *xn = t->in_node[0];
    int axis = t->node->attrs.arg.axis;
    int64_t outer = 1, n = xn->shape.dims[axis], inner = 1;
    for (int d = 0; d < axis; d++)
        outer *= xn->shape.dims[d];
    for (int d = axis + 1; d < xn->shape.ndim; d++)
        inner *= xn->shape.dims[d];
    int64_t n_out = outer * inner;
    if (n_out == 0 || n == 0)
        return RLX_OK;
    int threads = rlx_cpu_threads(ctx, n_out * n);
    if (n_out < threads)
        threads = 1;
    arg_job j = {.t = t, .n = n, .inner = inner};
    rlx_cpu_parallel(threads, n_out, arg_outputs, &j);
    return RLX_OK;
}

void rlx_cpu_register_reduce(rlx_cpu_kernel *table)
{
    table[RLX_OP_REDUCE_SUM].fn = k_reduce;
    table[RLX_OP_REDUCE_MEAN].fn = k_reduce;
    table[RLX_OP_REDUCE_MAX].fn = k_reduce;
    table[RLX_OP_REDUCE_MIN].fn = k_reduce;
    table[RLX_OP_REDUCE_PROD].fn = k_reduce;
    table[RLX_OP_ARGMAX].fn = k_arg;
    table[RLX_OP_ARGMIN].fn = k_arg;
}
