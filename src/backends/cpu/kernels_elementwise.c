/* kernels_elementwise.c - unary, binary (broadcasting), where, cast, clip.
 *
 * Floats compute in double and round once on store; integers compute in
 * int64 with wrap-around (no undefined overflow); bools are bytes 0/1.
 * Broadcast operands are walked row by row: the offsets of a row's start
 * are found once, then the innermost axis steps by 0 or 1. */
#include <stdatomic.h>
#include <stdint.h>

#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"

/* f32 in, f32 out: single-precision math (each within an ulp or two), which
 * vectorizes and is several times cheaper than going through double.  The
 * f32 elementwise chains call it too, so a fused chain gives what the
 * unfused nodes give. */
/* x * sigmoid(x) with one vectorisable exp of -|x| (within a few ulp of
 * the double form); NaN stays NaN. */
RLX_VEC_BEGIN
RLX_CLONES static void silu_f32(const float *restrict x, float *restrict y, int64_t n)
{
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], e;
        RLX_EXPF_VEC(e, -fabsf(v));
        y[i] = v >= 0 ? v / (1.0f + e) : v * e / (1.0f + e);
    }
}
RLX_VEC_END

void rlx_cpu_unary_f32(rlx_op op, const float *x, float *y, int64_t n)
{
    switch (op) {
    case RLX_OP_NEG:
        for (int64_t i = 0; i < n; i++)
            y[i] = -x[i];
        break;
    case RLX_OP_ABS:
        for (int64_t i = 0; i < n; i++)
            y[i] = fabsf(x[i]);
        break;
    case RLX_OP_EXP:
        for (int64_t i = 0; i < n; i++)
            y[i] = expf(x[i]);
        break;
    case RLX_OP_LOG:
        for (int64_t i = 0; i < n; i++)
            y[i] = logf(x[i]);
        break;
    case RLX_OP_SQRT:
        for (int64_t i = 0; i < n; i++)
            y[i] = sqrtf(x[i]);
        break;
    case RLX_OP_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        break;
    case RLX_OP_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = rlx_relu_f(x[i]);
        break;
    case RLX_OP_GELU: /* through erfc: accurate where GELU is tiny; vectorised with libmvec */
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] = rlx_gelu_erf_f(x[i]);
        break;
    case RLX_OP_SIN:
        for (int64_t i = 0; i < n; i++)
            y[i] = sinf(x[i]);
        break;
    case RLX_OP_COS:
        for (int64_t i = 0; i < n; i++)
            y[i] = cosf(x[i]);
        break;
    case RLX_OP_SILU: /* SwiGLU's gate: the double form took a quarter of a quantized prompt */
        silu_f32(x, y, n);
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            y[i] = (float)rlx_unary_f64(op, x[i]);
        break;
    }
}

/* One elementwise loop's operands for the pool. */
typedef struct ew_job {
    const rlx_thunk *t;
    const void *x;
    void *y;
    int64_t count;
    rlx_dtype from, to;
} ew_job;

static void unary_f32_blocks(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ew_job *j = p;
    for (int64_t b = lo; b < hi; b++) {
        int64_t o = b * 4096, len = j->count - o < 4096 ? j->count - o : 4096;
        rlx_cpu_unary_f32(j->t->node->op, (const float *)j->x + o, (float *)j->y + o, len);
    }
}

static void unary_any(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ew_job *j = p;
    rlx_op op = j->t->node->op;
    rlx_dtype dt = j->to;
    if (rlx_dtype_is_float(dt))
        for (int64_t i = lo; i < hi; i++)
            rlx_store(j->y, dt, i, rlx_unary_f64(op, rlx_load(j->x, dt, i)));
    else
        for (int64_t i = lo; i < hi; i++)
            rlx_store_i(j->y, dt, i, rlx_unary_i64(op, rlx_load_i(j->x, dt, i)));
}

static rlx_status unary_kernel(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    int64_t count = rlx_shape_numel(&n->shape);
    rlx_dtype dt = n->dtype;
    const void *x = t->in[0];
    void *y = t->out;
    ew_job j = {.t = t, .x = x, .y = y, .count = count, .from = dt, .to = dt};
    if (dt == RLX_F32) /* blocks of 4096 elements spread over the threads */
        rlx_cpu_parallel(rlx_cpu_threads(ctx, count * 8), (count + 4095) / 4096, unary_f32_blocks, &j);
    else
        rlx_cpu_parallel(rlx_cpu_threads(ctx, rlx_dtype_is_float(dt) ? count * 8 : count), count, unary_any, &j);
    return RLX_OK;
}

void rlx_row_walk_init(rlx_row_walk *w, const rlx_shape *out_shape, int n_ops, const rlx_shape *const *ins, bool cut)
{
    int64_t s[RLX_MAX_INPUTS][RLX_MAX_DIMS];
    for (int k = 0; k < n_ops; k++)
        rlx_shape_broadcast_strides(ins[k], out_shape, s[k]);
    rlx_shape shape = *out_shape, *out = &shape; /* dims merged where the operands allow */
    rlx_collapse_dims(out, n_ops, s);
    /* a few lengths tried: this runs on every call */
    static const int64_t cuts[] = {8192, 6144, 4096, 3072, 2048, 1536, 1024};
    int64_t last = out->ndim ? out->dims[out->ndim - 1] : 1, b = 0;
    for (size_t i = 0; cut && last > 8192 && !b && i < sizeof cuts / sizeof cuts[0]; i++)
        b = last % cuts[i] ? 0 : cuts[i];
    if (b && out->ndim < RLX_MAX_DIMS) {
        int d = out->ndim - 1;
        out->dims[d] = last / b;
        out->dims[d + 1] = b;
        out->ndim++;
        for (int k = 0; k < n_ops; k++) {
            s[k][d + 1] = s[k][d];
            s[k][d] *= b;
        }
    }
    w->cols = out->ndim ? out->dims[out->ndim - 1] : 1;
    w->outer = *out;
    if (w->outer.ndim)
        w->outer.ndim--;
    w->rows = w->cols ? rlx_shape_numel(out) / w->cols : 0;
    for (int k = 0; k < n_ops; k++) {
        w->inner[k] = out->ndim ? s[k][out->ndim - 1] : 0;
        for (int d = 0; d < w->outer.ndim; d++)
            w->st[k][d] = s[k][d];
    }
}

/* A binary op's rows for the pool. */
typedef struct binary_job {
    const rlx_row_walk *w;
    rlx_op op;
    int fm;
    rlx_dtype it, ot;
    const void *a, *b;
    void *y;
    atomic_int bad; /* an integer division by zero */
} binary_job;

static void binary_f32_rows(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    binary_job *j = p;
    const rlx_row_walk *w = j->w;
    const float *af = j->a, *bf = j->b;
    float *yf = j->y;
    int64_t sa = w->inner[0], sb = w->inner[1], cols = w->cols;
    for (int64_t r = lo; r < hi; r++) {
        const float *pa = af + rlx_row_start(w, 0, r), *pb = bf + rlx_row_start(w, 1, r);
        float *py = yf + r * cols;
        switch (j->op) {
        case RLX_OP_ADD:
            for (int64_t c = 0; c < cols; c++)
                py[c] = pa[c * sa] + pb[c * sb];
            break;
        case RLX_OP_SUB:
            for (int64_t c = 0; c < cols; c++)
                py[c] = pa[c * sa] - pb[c * sb];
            break;
        case RLX_OP_MUL:
            for (int64_t c = 0; c < cols; c++)
                py[c] = pa[c * sa] * pb[c * sb];
            break;
        case RLX_OP_DIV:
            for (int64_t c = 0; c < cols; c++)
                py[c] = pa[c * sa] / pb[c * sb];
            break;
        default:
            for (int64_t c = 0; c < cols; c++)
                py[c] = (float)rlx_binary_f64(j->op, pa[c * sa], pb[c * sb], j->fm);
        }
    }
}

static void binary_any_rows(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    binary_job *j = p;
    const rlx_row_walk *w = j->w;
    bool is_float = rlx_dtype_is_float(j->it);
    int bad = 0;
    for (int64_t r = lo; r < hi; r++) {
        int64_t oa = rlx_row_start(w, 0, r), ob = rlx_row_start(w, 1, r);
        for (int64_t c = 0; c < w->cols; c++) {
            if (is_float) {
                rlx_store(j->y, j->ot, r * w->cols + c,
                          rlx_binary_f64(j->op, rlx_load(j->a, j->it, oa + c * w->inner[0]),
                                         rlx_load(j->b, j->it, ob + c * w->inner[1]), j->fm));
                continue;
            }
            int64_t v;
            if (!rlx_binary_i64(j->op, rlx_load_i(j->a, j->it, oa + c * w->inner[0]),
                                rlx_load_i(j->b, j->it, ob + c * w->inner[1]), j->fm, &v))
                bad = 1;
            rlx_store_i(j->y, j->ot, r * w->cols + c, v);
        }
    }
    if (bad)
        atomic_store_explicit(&j->bad, 1, memory_order_relaxed);
}

static rlx_status binary_kernel(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    const rlx_node_data *na = t->in_node[0], *nb = t->in_node[1];
    rlx_dtype it = na->dtype, ot = n->dtype;
    int fm = n->op == RLX_OP_MOD ? n->attrs.mod.fmod : 0;
    const rlx_shape *ins[2] = {&na->shape, &nb->shape};
    rlx_row_walk w; /* rows are what the threads share */
    rlx_row_walk_init(&w, &n->shape, 2, ins, true);
    const void *a = t->in[0], *b = t->in[1];
    void *y = t->out;
    int threads = rlx_cpu_threads(ctx, w.rows * w.cols * 2);
    binary_job j = {.w = &w, .op = n->op, .fm = fm, .it = it, .ot = ot, .a = a, .b = b, .y = y};
    atomic_init(&j.bad, 0);
    rlx_cpu_parallel(threads, w.rows, it == RLX_F32 && ot == RLX_F32 ? binary_f32_rows : binary_any_rows, &j);
    if (atomic_load_explicit(&j.bad, memory_order_relaxed))
        return rlx_cpu_kernel_error(t, "integer division by zero");
    return RLX_OK;
}

typedef struct where_job {
    const rlx_row_walk *w;
    const uint8_t *c, *a, *b;
    uint8_t *y;
    size_t es;
} where_job;

static void where_rows(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const where_job *j = p;
    const rlx_row_walk *w = j->w;
    size_t es = j->es;
    for (int64_t r = lo; r < hi; r++) {
        int64_t oc = rlx_row_start(w, 0, r), oa = rlx_row_start(w, 1, r), ob = rlx_row_start(w, 2, r);
        for (int64_t k = 0; k < w->cols; k++) {
            const uint8_t *src = j->c[oc + k * w->inner[0]] ? j->a + (size_t)(oa + k * w->inner[1]) * es
                                                            : j->b + (size_t)(ob + k * w->inner[2]) * es;
            memmove(j->y + (size_t)(r * w->cols + k) * es, src, es);
        }
    }
}

static rlx_status where_kernel(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    const rlx_shape *ins[3] = {&t->in_node[0]->shape, &t->in_node[1]->shape, &t->in_node[2]->shape};
    rlx_row_walk w;
    rlx_row_walk_init(&w, &n->shape, 3, ins, true);
    const uint8_t *c = t->in[0];
    size_t es = rlx_dtype_size(n->dtype);
    const uint8_t *a = t->in[1], *b = t->in[2];
    uint8_t *y = t->out;
    where_job j = {.w = &w, .c = c, .a = a, .b = b, .y = y, .es = es};
    rlx_cpu_parallel(rlx_cpu_threads(ctx, w.rows * w.cols), w.rows, where_rows, &j);
    return RLX_OK;
}

/* The casts around 8-bit integer products (int32 sums to f32, levels to
 * and from f32) as plain typed loops the compiler vectorises; the same
 * results as rlx_store's (f32 -> u8/i8: NaN 0, saturated, truncated).
 * false: not one of these pairs. */
static bool cast_fast(rlx_dtype from, rlx_dtype to, const void *x, void *y, int64_t i0, int64_t i1)
{
    if (to == RLX_F32 && (from == RLX_I32 || from == RLX_U8 || from == RLX_I8)) {
        float *f = y;
        if (from == RLX_I32)
            for (int64_t i = i0; i < i1; i++)
                f[i] = (float)((const int32_t *)x)[i];
        else if (from == RLX_U8)
            for (int64_t i = i0; i < i1; i++)
                f[i] = (float)((const uint8_t *)x)[i];
        else
            for (int64_t i = i0; i < i1; i++)
                f[i] = (float)((const int8_t *)x)[i];
        return true;
    }
    if (from == RLX_F32 && (to == RLX_U8 || to == RLX_I8)) {
        const float *f = x, lo = to == RLX_U8 ? 0.0f : -128.0f, hi = to == RLX_U8 ? 255.0f : 127.0f;
        for (int64_t i = i0; i < i1; i++) {
            float v = f[i] != f[i] ? 0.0f : f[i] <= lo ? lo : f[i] >= hi ? hi : f[i];
            if (to == RLX_U8)
                ((uint8_t *)y)[i] = (uint8_t)(int)v;
            else
                ((int8_t *)y)[i] = (int8_t)(int)v;
        }
        return true;
    }
    return false;
}

static void cast_blocks(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ew_job *j = p;
    for (int64_t b = lo; b < hi; b++)
        cast_fast(j->from, j->to, j->x, j->y, b * 4096, (b + 1) * 4096 < j->count ? (b + 1) * 4096 : j->count);
}

static void cast_any(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ew_job *j = p;
    rlx_dtype from = j->from, to = j->to;
    bool exact_int = !rlx_dtype_is_float(from) && !rlx_dtype_is_float(to);
    for (int64_t i = lo; i < hi; i++) {
        if (exact_int)
            rlx_store_i(j->y, to, i, rlx_load_i(j->x, from, i));
        else if (from == RLX_I64 && rlx_dtype_is_float(to))
            rlx_store(j->y, to, i, (double)rlx_load_i(j->x, from, i));
        else
            rlx_store(j->y, to, i, rlx_load(j->x, from, i));
    }
}

static rlx_status cast_kernel(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    rlx_dtype from = t->in_node[0]->dtype, to = n->dtype;
    int64_t count = rlx_shape_numel(&n->shape);
    const void *x = t->in[0];
    void *y = t->out;
    if (from == to) {
        if (x != y)
            memmove(y, x, (size_t)count * rlx_dtype_size(to));
        return RLX_OK;
    }
    ew_job j = {.t = t, .x = x, .y = y, .count = count, .from = from, .to = to};
    if (cast_fast(from, to, x, y, 0, 0)) /* in blocks of 4096 */
        rlx_cpu_parallel(rlx_cpu_threads(ctx, count), (count + 4095) / 4096, cast_blocks, &j);
    else
        rlx_cpu_parallel(rlx_cpu_threads(ctx, count * 4), count, cast_any, &j);
    return RLX_OK;
}

/* f32 clip between the bounds rounded to f32: rounding is monotonic, so
 * this is the double comparison's result to the bit (NaN and -0 kept). */
RLX_VEC_BEGIN
RLX_CLONES static void clip_f32(const float *x, float *y, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        v = v < lo ? lo : v;
        y[i] = v > hi ? hi : v;
    }
}
RLX_VEC_END

static void clip_blocks(void *p, int64_t lo, int64_t hi, int worker)
{
    (void)worker;
    const ew_job *j = p;
    const rlx_node_data *n = j->t->node;
    float lf = (float)n->attrs.clip.lo, hf = (float)n->attrs.clip.hi;
    for (int64_t b = lo; b < hi; b++) {
        int64_t o = b * 4096, len = j->count - o < 4096 ? j->count - o : 4096;
        clip_f32((const float *)j->x + o, (float *)j->y + o, len, lf, hf);
    }
}

static void clip_any(void *p, int64_t i0, int64_t i1, int worker)
{
    (void)worker;
    const ew_job *j = p;
    double lo = j->t->node->attrs.clip.lo, hi = j->t->node->attrs.clip.hi;
    rlx_dtype dt = j->to;
    for (int64_t i = i0; i < i1; i++) {
        if (rlx_dtype_is_float(dt)) {
            double v = rlx_load(j->x, dt, i);
            if (v < lo)
                v = lo;
            if (v > hi)
                v = hi;
            rlx_store(j->y, dt, i, v);
        } else {
            int64_t v = rlx_load_i(j->x, dt, i);
            if ((double)v < lo)
                v = rlx_clip_bound_i(ceil(lo), dt);
            if ((double)v > hi)
                v = rlx_clip_bound_i(floor(hi), dt);
            rlx_store_i(j->y, dt, i, v);
        }
    }
}

static rlx_status clip_kernel(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    const rlx_node_data *n = t->node;
    int64_t count = rlx_shape_numel(&n->shape);
    ew_job j = {.t = t, .x = t->in[0], .y = t->out, .count = count, .from = n->dtype, .to = n->dtype};
    if (n->dtype == RLX_F32) /* blocks of 4096 spread over the threads, as the unary kernel's */
        rlx_cpu_parallel(rlx_cpu_threads(ctx, count * 2), (count + 4095) / 4096, clip_blocks, &j);
    else
        rlx_cpu_parallel(rlx_cpu_threads(ctx, count * 2), count, clip_any, &j);
    return RLX_OK;
}

void rlx_cpu_register_elementwise(rlx_cpu_kernel *table)
{
    for (int op = RLX_OP_NEG; op <= RLX_OP_NOT; op++)
        table[op].fn = unary_kernel;
    for (int op = RLX_OP_ADD; op <= RLX_OP_XOR; op++)
        table[op].fn = binary_kernel;
    table[RLX_OP_WHERE].fn = where_kernel;
    table[RLX_OP_CAST].fn = cast_kernel;
    table[RLX_OP_CLIP].fn = clip_kernel;
}
