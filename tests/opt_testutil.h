/* opt_testutil.h - small helpers of the optimizer tests (test_fusion,
 * test_amp, test_lower, test_switches): compile a graph with given options,
 * feed every input and param seeded random values, run, read one output as
 * f32, and compare two results.  Header-only (static functions). */
#ifndef RLX_OPT_TESTUTIL_H
#define RLX_OPT_TESTUTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "opt/pass.h"
#include "rlx.h"

static inline uint64_t ot_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static inline uint64_t ot_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Uniform in [-1, 1) from (seed, name, index). */
static inline double ot_uniform(uint64_t seed, const char *name, int64_t i)
{
    uint64_t h = ot_mix(seed ^ ot_mix(ot_hash(name) ^ ot_mix((uint64_t)i)));
    return ((double)(h >> 11) / 9007199254740992.0) * 2.0 - 1.0;
}

/* Fills a tensor: floats uniform in [-scale, scale) (norm gains, named
 * "*.g", around 1), integers in [0, int_hi), bools 0/1. */
static inline void *ot_fill(const rlx_tensor_info *info, uint64_t seed, double scale, int64_t int_hi)
{
    size_t n = info->bytes / rlx_dtype_size(info->dtype);
    unsigned char *buf = malloc(info->bytes + 8);
    size_t len = strlen(info->name);
    int gain = len > 2 && !strcmp(info->name + len - 2, ".g");
    for (size_t i = 0; i < n; i++) {
        double u = ot_uniform(seed, info->name, (int64_t)i);
        double v = gain ? 1.0 + 0.1 * u : scale * u;
        switch (info->dtype) {
        case RLX_F32: ((float *)buf)[i] = (float)v; break;
        case RLX_F64: ((double *)buf)[i] = v; break;
        case RLX_F16: ((uint16_t *)buf)[i] = rlx_f32_to_f16((float)v); break;
        case RLX_BF16: ((uint16_t *)buf)[i] = rlx_f32_to_bf16((float)v); break;
        case RLX_I64: ((int64_t *)buf)[i] = (int64_t)((u + 1) * 0.5 * (double)int_hi) % int_hi; break;
        case RLX_I32: ((int32_t *)buf)[i] = (int32_t)((int64_t)((u + 1) * 0.5 * (double)int_hi) % int_hi); break;
        case RLX_BOOL: buf[i] = u > -0.6; break;
        default: buf[i] = 0; break;
        }
    }
    return buf;
}

typedef struct ot_result {
    float *data;
    size_t n;
    rlx_dtype dtype; /* of the output node */
    rlx_compile_stats stats;
} ot_result;

static inline void ot_result_free(ot_result *r)
{
    free(r->data);
    memset(r, 0, sizeof *r);
}

/* Compiles g with o, sets every input (uniform, ints < int_hi) and param
 * (uniform * param_scale, or the workload init when workload_seed != 0),
 * runs and reads output `out`.  Returns RLX_OK or the failing status. */
typedef rlx_status (*ot_param_init)(rlx_session *s, uint64_t seed);

static inline rlx_status ot_run(const rlx_graph *g, const rlx_options *o, uint64_t seed, double param_scale,
                                int64_t int_hi, ot_param_init init, const char *out, ot_result *res)
{
    memset(res, 0, sizeof *res);
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, o, &s);
    if (st != RLX_OK) {
        fprintf(stderr, "compile failed: %s\n", rlx_last_error());
        return st;
    }
    rlx_session_stats(s, &res->stats);
    for (int kind = 0; kind < 2; kind++)
        for (int i = 0; i < rlx_session_count(s, kind); i++) {
            rlx_tensor_info info;
            rlx_session_info(s, kind, i, &info);
            if (kind == 1 && init)
                continue;
            void *buf = ot_fill(&info, seed + 17 * (uint64_t)kind, kind ? param_scale : 1.0, int_hi);
            st = kind ? rlx_session_set_param(s, info.name, buf, info.bytes)
                      : rlx_session_set_input(s, info.name, buf, info.bytes);
            free(buf);
            if (st != RLX_OK)
                goto done;
        }
    if (init && (st = init(s, seed)) != RLX_OK)
        goto done;
    if ((st = rlx_session_run(s)) != RLX_OK) {
        fprintf(stderr, "run failed: %s\n", rlx_last_error());
        goto done;
    }
    rlx_tensor_info info;
    if ((st = rlx_session_find(s, 2, out, &info)) != RLX_OK)
        goto done;
    res->n = info.bytes / rlx_dtype_size(info.dtype);
    res->dtype = info.dtype;
    unsigned char *raw = malloc(info.bytes + 8);
    res->data = malloc(res->n * sizeof(float) + 8);
    if ((st = rlx_session_get_output(s, out, raw, info.bytes)) == RLX_OK)
        for (size_t i = 0; i < res->n; i++) {
            switch (info.dtype) {
            case RLX_F32: res->data[i] = ((float *)raw)[i]; break;
            case RLX_F64: res->data[i] = (float)((double *)raw)[i]; break;
            case RLX_F16: res->data[i] = rlx_f16_to_f32(((uint16_t *)raw)[i]); break;
            case RLX_BF16: res->data[i] = rlx_bf16_to_f32(((uint16_t *)raw)[i]); break;
            default: res->data[i] = 0; break;
            }
        }
    free(raw);
done:
    rlx_session_free(s);
    return st;
}

/* |a - b| <= atol * max(1, max|b|) + rtol * |b| everywhere (NaN == NaN);
 * prints the worst element on failure. */
static inline int ot_close(const char *what, const ot_result *a, const ot_result *b, double rtol, double atol)
{
    if (a->n != b->n || !a->data || !b->data) {
        fprintf(stderr, "%s: sizes differ (%zu vs %zu) or no data\n", what, a->n, b->n);
        return 0;
    }
    double scale = 1.0;
    for (size_t i = 0; i < b->n; i++)
        if (isfinite(b->data[i]) && fabs(b->data[i]) > scale)
            scale = fabs(b->data[i]);
    size_t worst = 0, bad = 0;
    double worst_err = 0;
    for (size_t i = 0; i < a->n; i++) {
        double x = a->data[i], y = b->data[i];
        if (isnan(x) && isnan(y))
            continue;
        double err = fabs(x - y), lim = atol * scale + rtol * fabs(y);
        if (!(err <= lim)) {
            bad++;
            if (!(err <= worst_err)) {
                worst_err = err;
                worst = i;
            }
        }
    }
    if (bad)
        fprintf(stderr, "%s: %zu of %zu elements differ; worst at %zu: %.9g vs %.9g\n", what, bad, a->n, worst,
                a->data[worst], b->data[worst]);
    return bad == 0;
}

/* Count of nodes of op in g. */
static inline int ot_count(const rlx_graph *g, rlx_op op)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += g->nodes[i].op == op;
    return c;
}

static inline int ot_count_fused(const rlx_graph *g)
{
    int c = 0;
    for (int i = 0; i < g->n_nodes; i++)
        c += (rlx_op_info_of(g->nodes[i].op)->flags & RLX_OPF_FUSED) != 0;
    return c;
}

/* A pass context for the CPU backend's claim. */
static inline rlx_pass_ctx ot_cpu_ctx(rlx_opt_stats *stats)
{
    rlx_pass_ctx c;
    memset(&c, 0, sizeof c);
    c.supports = rlx_cpu_backend()->supports;
    c.precision = RLX_PRECISION_F32;
    c.stats = stats;
    return c;
}

#endif
