/* kernels_random.c - random uniform, random normal and dropout.
 *
 * Every value comes from rlx_uniform01(seed, stream, index): a counter-based
 * generator, so element i of a node gets the same number whatever the thread
 * count or device, and a new number on each run (the stream mixes in the
 * node id and the run index). */
#include "backends/cpu/cpu_kernels.h"

typedef struct random_job {
    const rlx_thunk *t;
    const rlx_run_ctx *ctx;
} random_job;

static void uniform_values(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const random_job *j = arg;
    const rlx_thunk *t = j->t;
    rlx_dtype dt = t->node->dtype;
    double lo = t->node->attrs.random.a, span = t->node->attrs.random.b - lo;
    uint64_t stream = rlx_random_stream(t, j->ctx);
    for (int64_t i = begin; i < end; i++)
        rlx_store(t->out, dt, i, lo + span * rlx_uniform01(j->ctx->seed, stream, (uint64_t)i));
}

static rlx_status k_uniform(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    int64_t n = rlx_shape_numel(&t->node->shape);
    random_job j = {t, ctx};
    rlx_cpu_parallel(rlx_cpu_threads(ctx, n * 4), n, uniform_values, &j);
    return RLX_OK;
}

/* Box-Muller: elements 2j and 2j+1 share the pair of uniforms (2j, 2j+1)
 * and take the cosine and the sine branch. */
static void normal_values(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const random_job *jb = arg;
    const rlx_thunk *t = jb->t;
    rlx_dtype dt = t->node->dtype;
    double mean = t->node->attrs.random.a, sd = t->node->attrs.random.b;
    uint64_t stream = rlx_random_stream(t, jb->ctx), seed = jb->ctx->seed;
    for (int64_t i = begin; i < end; i++) {
        uint64_t j = (uint64_t)i & ~(uint64_t)1;
        double u1 = rlx_uniform01(seed, stream, j), u2 = rlx_uniform01(seed, stream, j + 1);
        double r = sqrt(-2.0 * log(u1)), a = 2.0 * M_PI * u2;
        double z = (i & 1) ? r * sin(a) : r * cos(a);
        rlx_store(t->out, dt, i, mean + sd * z);
    }
}

static rlx_status k_normal(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    int64_t n = rlx_shape_numel(&t->node->shape);
    random_job j = {t, ctx};
    rlx_cpu_parallel(rlx_cpu_threads(ctx, n * 8), n, normal_values, &j);
    return RLX_OK;
}

/* Keeps an element when its uniform is >= p (probability 1 - p) and scales
 * it by 1 / (1 - p); the rest become 0. */
static void dropout_values(void *arg, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const random_job *j = arg;
    const rlx_thunk *t = j->t;
    rlx_dtype dt = t->node->dtype;
    double p = t->node->attrs.dropout.p, scale = 1.0 / (1.0 - p);
    uint64_t stream = rlx_random_stream(t, j->ctx);
    for (int64_t i = begin; i < end; i++) {
        int keep = rlx_uniform01(j->ctx->seed, stream, (uint64_t)i) >= p;
        if (dt == RLX_F32) {
            float v = ((const float *)t->in[0])[i];
            ((float *)t->out)[i] = keep ? (float)(v * scale) : 0.0f;
        } else {
            rlx_store(t->out, dt, i, keep ? rlx_load(t->in[0], dt, i) * scale : 0.0);
        }
    }
}

static rlx_status k_dropout(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    int64_t n = rlx_shape_numel(&t->node->shape);
    if (t->node->attrs.dropout.p == 0) {
        if (t->out != t->in[0])
            memmove(t->out, t->in[0], rlx_node_bytes(t->node));
        return RLX_OK;
    }
    random_job j = {t, ctx};
    rlx_cpu_parallel(rlx_cpu_threads(ctx, n * 4), n, dropout_values, &j);
    return RLX_OK;
}

void rlx_cpu_register_random(rlx_cpu_kernel *table)
{
    table[RLX_OP_RANDOM_UNIFORM].fn = k_uniform;
    table[RLX_OP_RANDOM_NORMAL].fn = k_normal;
    table[RLX_OP_DROPOUT].fn = k_dropout;
}
