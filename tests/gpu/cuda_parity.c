/* cuda_parity.c - the CUDA backend against the CPU reference backend.
 *
 * Every case builds one small graph, compiles it for the CPU and for CUDA,
 * feeds both the same seeded random inputs and compares every output with
 * a tolerance fit for the dtype (f32 tight, f16/bf16 loose, integers and
 * bools exact).  Cases cover every op of the core table at several shapes
 * and in f32, f16 and bf16; the fused ops through patterns the optimizer
 * fuses on both devices; CUDA Graph replay against eager launches; random
 * ops across runs; and the mlp, encoder and resnet50 workloads end to end.
 *
 * Prints one line per failure, a summary line "N passed, M failed", and
 * exits 0 when all passed, 77 (skipped) when no CUDA device is usable, 1
 * otherwise.  RLX_GPU_TEST_FILTER=substr runs only matching cases;
 * RLX_GPU_TEST_CPU_ONLY=1 runs both sides on the CPU (checks the cases
 * themselves on a machine without a GPU). */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h" /* rlx_qkv_heads: a fused op the LLM builder emits */
#include "models/workloads.h"
#include "rlx.h"

static int n_pass, n_fail;
static const char *filter;
static const rlx_dtype FLOATS[3] = {RLX_F32, RLX_F16, RLX_BF16};

/* ------------------------------------------------------------ data */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Input names carry how to fill them: "name" uniform [-2, 2), "p_name"
 * positive [0.2, 2.2), "u_name" [-1, 1) small, "t_name" [-9, -1) (where
 * GELU and the like are tiny), "i<N>_name" integers in
 * [0, N), "nz_name" integers in [1, 9] with random sign, bools 0/1. */
static void fill(const rlx_tensor_info *info, uint64_t seed, void *buf)
{
    size_t n = info->bytes / rlx_dtype_size(info->dtype);
    uint64_t h0 = hash_str(info->name) ^ seed;
    int pos = !strncmp(info->name, "p_", 2), small = !strncmp(info->name, "u_", 2), nz = !strncmp(info->name, "nz_", 3);
    int tail = !strncmp(info->name, "t_", 2);
    long ihi = 0;
    if (info->name[0] == 'i' && info->name[1] >= '0' && info->name[1] <= '9')
        ihi = strtol(info->name + 1, NULL, 10);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = mix(h0 ^ mix(i));
        double u = (double)(r >> 11) / 9007199254740992.0; /* [0, 1) */
        double v = pos ? 0.2 + 2.0 * u : small ? 2.0 * u - 1.0 : tail ? 8.0 * u - 9.0 : 4.0 * u - 2.0;
        int64_t iv = ihi > 0 ? (int64_t)(r % (uint64_t)ihi)
                     : nz    ? (int64_t)(1 + r % 9) * ((r >> 40) & 1 ? -1 : 1)
                             : (int64_t)(r % 41) - 20;
        switch (info->dtype) {
        case RLX_F32: ((float *)buf)[i] = (float)v; break;
        case RLX_F64: ((double *)buf)[i] = v; break;
        case RLX_F16: ((uint16_t *)buf)[i] = rlx_f32_to_f16((float)v); break;
        case RLX_BF16: ((uint16_t *)buf)[i] = rlx_f32_to_bf16((float)v); break;
        case RLX_I64: ((int64_t *)buf)[i] = iv; break;
        case RLX_I32: ((int32_t *)buf)[i] = (int32_t)iv; break;
        case RLX_I8: ((int8_t *)buf)[i] = (int8_t)iv; break;
        case RLX_U8: ((uint8_t *)buf)[i] = (uint8_t)(r % 256); break;
        case RLX_BOOL: ((uint8_t *)buf)[i] = (r >> 20) % 3 != 0; break;
        default: break;
        }
    }
}

static double load(const void *p, rlx_dtype t, size_t i)
{
    switch (t) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    case RLX_F64: return ((const double *)p)[i];
    case RLX_I64: return (double)((const int64_t *)p)[i];
    case RLX_I32: return ((const int32_t *)p)[i];
    case RLX_I8: return ((const int8_t *)p)[i];
    case RLX_U8: return ((const uint8_t *)p)[i];
    case RLX_BOOL: return ((const uint8_t *)p)[i];
    default: return 0;
    }
}

/* ------------------------------------------------------------ running */

typedef struct outputs {
    int n;
    rlx_tensor_info info[8];
    void *data[8];
    rlx_compile_stats stats;
} outputs;

static void outputs_free(outputs *o)
{
    for (int i = 0; i < o->n; i++) {
        free(o->data[i]);
        free((char *)o->info[i].name);
    }
    memset(o, 0, sizeof *o);
}

typedef struct run_opts {
    rlx_device dev;
    rlx_precision prec;
    int no_graph, no_fusion, runs, workload_init;
} run_opts;

static rlx_status run_graph(const rlx_graph *g, const run_opts *ro, outputs *out, char *err, size_t errn)
{
    memset(out, 0, sizeof *out);
    rlx_options o;
    rlx_options_init(&o);
    o.device = getenv("RLX_GPU_TEST_CPU_ONLY") ? RLX_DEVICE_CPU : ro->dev; /* harness self-check */
    o.precision = ro->prec;
    o.no_preencode = ro->no_graph;
    o.no_fusion = ro->no_fusion;
    o.seed = 1234;
    /* Not ignore_env: the cases steer the CUDA backend through the RLX_CUDA_*
     * variables they set (paths, prologue, GEMM forms), which reach it only
     * through the environment the compile reads (src/runtime/env.c); the
     * suite's environment sets no RLX_* option otherwise. */
    o.ignore_env = 0;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    if (st != RLX_OK) {
        snprintf(err, errn, "compile (%s): %s", ro->dev == RLX_DEVICE_CUDA ? "cuda" : "cpu", rlx_last_error());
        return st;
    }
    rlx_session_stats(s, &out->stats);
    if (ro->workload_init && (st = rlx_workload_init_params(s, 7)) != RLX_OK)
        goto fail;
    for (int kind = 0; kind < 2; kind++) {
        if (kind == 1 && ro->workload_init)
            break;
        for (int i = 0; i < rlx_session_count(s, kind); i++) {
            rlx_tensor_info info;
            rlx_session_info(s, kind, i, &info);
            void *buf = malloc(info.bytes + 16);
            fill(&info, 99, buf);
            st = kind == 0 ? rlx_session_set_input(s, info.name, buf, info.bytes)
                           : rlx_session_set_param(s, info.name, buf, info.bytes);
            free(buf);
            if (st != RLX_OK)
                goto fail;
        }
    }
    for (int r = 0; r < (ro->runs > 0 ? ro->runs : 1); r++)
        if ((st = rlx_session_run(s)) != RLX_OK)
            goto fail;
    out->n = rlx_session_count(s, 2);
    for (int i = 0; i < out->n && i < 8; i++) {
        rlx_session_info(s, 2, i, &out->info[i]);
        out->info[i].name = strdup(out->info[i].name); /* the session owns the original */
        out->data[i] = malloc(out->info[i].bytes + 16);
        /* poison first: every element must be written */
        memset(out->data[i], 0xff, out->info[i].bytes);
        if ((st = rlx_session_get_output(s, out->info[i].name, out->data[i], out->info[i].bytes)) != RLX_OK)
            goto fail;
    }
    rlx_session_free(s);
    return RLX_OK;
fail:
    snprintf(err, errn, "run (%s): %s", ro->dev == RLX_DEVICE_CUDA ? "cuda" : "cpu", rlx_last_error());
    rlx_session_free(s);
    return st;
}

static void tol_for(rlx_dtype t, double *atol, double *rtol)
{
    switch (t) {
    case RLX_F32: *atol = 2e-4, *rtol = 2e-4; break;
    case RLX_F16: *atol = 1.5e-2, *rtol = 1.5e-2; break;
    case RLX_BF16: *atol = 6e-2, *rtol = 4e-2; break;
    default: *atol = 0, *rtol = 0; break;
    }
}

/* Compares a (cuda) with b (reference); 0 if within tolerance. */
static int compare(const outputs *a, const outputs *b, double scale_tol, char *msg, size_t n)
{
    if (a->n != b->n) {
        snprintf(msg, n, "output counts differ (%d vs %d)", a->n, b->n);
        return 1;
    }
    for (int k = 0; k < a->n; k++) {
        rlx_dtype ta = a->info[k].dtype, tb = b->info[k].dtype;
        size_t cnt = a->info[k].bytes / rlx_dtype_size(ta);
        if (cnt != b->info[k].bytes / rlx_dtype_size(tb)) {
            snprintf(msg, n, "output %d sizes differ", k);
            return 1;
        }
        double atol, rtol;
        tol_for(ta, &atol, &rtol);
        double atol2, rtol2;
        tol_for(tb, &atol2, &rtol2);
        atol = (atol > atol2 ? atol : atol2) * scale_tol;
        rtol = (rtol > rtol2 ? rtol : rtol2) * scale_tol;
        double worst = 0, num = 0, den = 0;
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < cnt; i++) {
            double x = load(a->data[k], ta, i), y = load(b->data[k], tb, i);
            if (isnan(x) && isnan(y))
                continue;
            if (isinf(x) && isinf(y) && (x > 0) == (y > 0))
                continue;
            double d = fabs(x - y);
            num += d * d;
            den += y * y;
            if (!(d <= atol + rtol * fabs(y))) {
                if (!bad)
                    first = i;
                bad++;
                if (!(d <= worst))
                    worst = d;
            }
        }
        if (bad) {
            snprintf(
                msg, n,
                "output '%s': %zu of %zu elements off (first at %zu: cuda %g vs cpu %g; worst |d| %g; rel l2 %.3g)",
                a->info[k].name, bad, cnt, first, load(a->data[k], ta, first), load(b->data[k], tb, first), worst,
                den > 0 ? sqrt(num / den) : sqrt(num));
            return 1;
        }
    }
    return 0;
}

static void report(const char *name, int ok, const char *msg)
{
    if (ok) {
        n_pass++;
    } else {
        n_fail++;
        printf("FAIL %s: %s\n", name, msg);
        fflush(stdout);
    }
}

static int wanted(const char *name) { return !filter || strstr(name, filter) != NULL; }

/* Runs g on both devices and compares (g is freed). */
static void check_ex(const char *name, rlx_graph *g, double scale_tol, const run_opts *cu, const run_opts *ref)
{
    if (!wanted(name)) {
        rlx_graph_free(g);
        return;
    }
    char err[1024] = "";
    if (!g || rlx_graph_verify(g) != RLX_OK) {
        snprintf(err, sizeof err, "graph: %s", rlx_last_error());
        report(name, 0, err);
        rlx_graph_free(g);
        return;
    }
    outputs a, b;
    run_opts dcu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 0};
    run_opts dref = {RLX_DEVICE_CPU, RLX_PRECISION_F32, 0, 0, 1, 0};
    if (!cu)
        cu = &dcu;
    if (!ref) {
        dref.runs = cu->runs;
        dref.workload_init = cu->workload_init;
        ref = &dref;
    }
    if (run_graph(g, cu, &a, err, sizeof err) != RLX_OK) {
        report(name, 0, err);
    } else if (run_graph(g, ref, &b, err, sizeof err) != RLX_OK) {
        report(name, 0, err);
        outputs_free(&a);
    } else {
        int bad = compare(&a, &b, scale_tol, err, sizeof err);
        report(name, !bad, err);
        outputs_free(&a);
        outputs_free(&b);
    }
    rlx_graph_free(g);
}

static void check(const char *name, rlx_graph *g) { check_ex(name, g, 1.0, NULL, NULL); }

static const char *dn(rlx_dtype t) { return rlx_dtype_name(t); }

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
#define DIMS(...) \
    (const int64_t[]) { __VA_ARGS__ }

/* ------------------------------------------------------------ cases */

typedef rlx_node (*unary_fn)(rlx_graph *, rlx_node);

static void test_unary(void)
{
    static const struct {
        const char *name;
        unary_fn fn;
        int pos;
    } ops[] = {
        {"neg", rlx_neg, 0},
        {"abs", rlx_abs, 0},
        {"exp", rlx_exp, 0},
        {"log", rlx_log, 1},
        {"sqrt", rlx_sqrt, 1},
        {"rsqrt", rlx_rsqrt, 1},
        {"reciprocal", rlx_reciprocal, 1},
        {"tanh", rlx_tanh, 0},
        {"sigmoid", rlx_sigmoid, 0},
        {"relu", rlx_relu, 0},
        {"gelu", rlx_gelu, 0},
        {"gelu_tanh", rlx_gelu_tanh, 0},
        {"silu", rlx_silu, 0},
        {"erf", rlx_erf, 0},
        {"sin", rlx_sin, 0},
        {"cos", rlx_cos, 0},
        {"floor", rlx_floor, 0},
        {"ceil", rlx_ceil, 0},
        {"round", rlx_round, 0},
        {"sign", rlx_sign, 0},
    };
    static const int64_t shapes[3][3] = {{7, 0, 0}, {33, 65, 0}, {4, 5, 132}};
    static const int ranks[3] = {1, 2, 3};
    char nm[128];
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int d = 0; d < 3; d++)
            for (int s = 0; s < 3; s++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node x = rlx_input(g, ops[o].pos ? "p_x" : "x", FLOATS[d], ranks[s], shapes[s]);
                rlx_output(g, "y", ops[o].fn(g, x));
                check(NAME("unary %s %s rank%d", ops[o].name, dn(FLOATS[d]), ranks[s]), g);
            }
    /* integers and bools */
    static const rlx_dtype ints[2] = {RLX_I64, RLX_I32};
    static const struct {
        const char *name;
        unary_fn fn;
    } iops[] = {{"neg", rlx_neg}, {"abs", rlx_abs}, {"sign", rlx_sign}, {"relu", rlx_relu}};
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 4; o++) {
            rlx_graph *g = rlx_graph_new();
            rlx_output(g, "y", iops[o].fn(g, rlx_input(g, "x", ints[d], 2, DIMS(9, 31))));
            check(NAME("unary %s %s", iops[o].name, dn(ints[d])), g);
        }
    rlx_graph *g = rlx_graph_new();
    rlx_output(g, "y", rlx_not(g, rlx_input(g, "x", RLX_BOOL, 2, DIMS(9, 31))));
    check("unary not bool", g);
}

/* GELU where it is tiny (x in [-9, -1)), alone and at the end of a fused
 * chain, in f32: CUDA against the CPU reference relative to each value
 * (the dtype tolerance's absolute part would accept anything there). */
static void test_gelu_tails(void)
{
    char nm[128];
    for (int chain = 0; chain < 2; chain++) {
        const char *name = NAME("unary gelu f32 tails%s", chain ? " (fused chain)" : "");
        if (!wanted(name))
            continue;
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "t_x", RLX_F32, 1, DIMS(4099));
        if (chain)
            x = rlx_add(g, x, rlx_scalar(g, RLX_F32, 0.25));
        rlx_output(g, "y", rlx_gelu(g, x));
        outputs a, b;
        char err[256] = "";
        run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 0},
                 ref = {RLX_DEVICE_CPU, RLX_PRECISION_F32, 0, 0, 1, 0};
        if (run_graph(g, &cu, &a, err, sizeof err) != RLX_OK) {
            report(name, 0, err);
        } else if (run_graph(g, &ref, &b, err, sizeof err) != RLX_OK) {
            report(name, 0, err);
            outputs_free(&a);
        } else {
            const float *ya = (const float *)a.data[0], *yb = (const float *)b.data[0];
            double worst = 0;
            for (int i = 0; i < 4099; i++) {
                double r = fabs((double)ya[i] - yb[i]) / fabs((double)yb[i]);
                if (!(r <= worst))
                    worst = r; /* NaN sticks */
            }
            snprintf(err, sizeof err, "max relative difference %.3g (want <= 1e-5)", worst);
            report(name, worst <= 1e-5, err);
            outputs_free(&a);
            outputs_free(&b);
        }
        rlx_graph_free(g);
    }
}

typedef rlx_node (*binary_fn)(rlx_graph *, rlx_node, rlx_node);

static rlx_node mod0(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_mod(g, a, b, 0); }
static rlx_node mod1(rlx_graph *g, rlx_node a, rlx_node b) { return rlx_mod(g, a, b, 1); }

static void test_binary(void)
{
    static const struct {
        const char *name;
        binary_fn fn;
        const char *an, *bn;
    } ops[] = {
        {"add", rlx_add, "x", "y"},     {"sub", rlx_sub, "x", "y"},   {"mul", rlx_mul, "x", "y"},
        {"div", rlx_div, "x", "p_y"},   {"pow", rlx_pow, "p_x", "y"}, {"max", rlx_max, "x", "y"},
        {"min", rlx_min, "x", "y"},     {"mod", mod0, "x", "p_y"},    {"fmod", mod1, "x", "p_y"},
        {"equal", rlx_equal, "x", "x"}, {"less", rlx_less, "x", "y"}, {"greater", rlx_greater, "x", "y"},
    };
    static const struct {
        int ra;
        int64_t a[3];
        int rb;
        int64_t b[3];
    } sh[] = {
        {2, {33, 65}, 2, {33, 65}},
        {2, {33, 65}, 1, {65}},
        {1, {65}, 2, {33, 65}},
        {3, {4, 1, 6}, 2, {5, 1}},
        {1, {1}, 2, {3, 7}},
        {3, {2, 3, 4}, 3, {2, 1, 4}},
        /* multiples of 8 (16-bit kernels take 8-wide vectors): same shape, row vector right, left */
        {2, {24, 72}, 2, {24, 72}},
        {2, {24, 72}, 1, {72}},
        {1, {72}, 2, {24, 72}},
        /* a column broadcast (one division per operand; 8-wide where the rows allow) */
        {3, {4, 6, 16}, 3, {4, 6, 1}},
        {2, {6, 1}, 2, {6, 16}},
        {3, {4, 6, 7}, 3, {4, 6, 1}},
    };
    char nm[128];
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int d = 0; d < 3; d++)
            for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node a = rlx_input(g, ops[o].an, FLOATS[d], sh[s].ra, sh[s].a);
                rlx_node b = !strcmp(ops[o].an, ops[o].bn) ? rlx_input(g, "x2", FLOATS[d], sh[s].rb, sh[s].b)
                                                           : rlx_input(g, ops[o].bn, FLOATS[d], sh[s].rb, sh[s].b);
                rlx_output(g, "z", ops[o].fn(g, a, b));
                check(NAME("binary %s %s shape%zu", ops[o].name, dn(FLOATS[d]), s), g);
            }
    /* equal on values that do match somewhere */
    for (int d = 0; d < 3; d++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node a = rlx_input(g, "i5_a", RLX_I64, 2, DIMS(17, 19));
        rlx_node b = rlx_input(g, "i5_b", RLX_I64, 1, DIMS(19));
        rlx_node fa = rlx_cast(g, a, FLOATS[d]), fb = rlx_cast(g, b, FLOATS[d]);
        rlx_output(g, "eq", rlx_equal(g, fa, fb));
        check(NAME("binary equal-hits %s", dn(FLOATS[d])), g);
    }
    static const rlx_dtype ints[2] = {RLX_I64, RLX_I32};
    static const struct {
        const char *name;
        binary_fn fn;
    } iops[] = {{"add", rlx_add}, {"sub", rlx_sub}, {"mul", rlx_mul}, {"div", rlx_div},   {"mod", mod0},
                {"fmod", mod1},   {"max", rlx_max}, {"min", rlx_min}, {"less", rlx_less}, {"equal", rlx_equal}};
    for (int d = 0; d < 2; d++)
        for (size_t o = 0; o < sizeof iops / sizeof iops[0]; o++) {
            rlx_graph *g = rlx_graph_new();
            rlx_node a = rlx_input(g, "x", ints[d], 2, DIMS(9, 31));
            rlx_node b = rlx_input(g, "nz_y", ints[d], 1, DIMS(31));
            rlx_output(g, "z", iops[o].fn(g, a, b));
            check(NAME("binary %s %s", iops[o].name, dn(ints[d])), g);
        }
    static const struct {
        const char *name;
        binary_fn fn;
    } bops[] = {{"and", rlx_and}, {"or", rlx_or}, {"xor", rlx_xor}};
    for (int o = 0; o < 3; o++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node a = rlx_input(g, "a", RLX_BOOL, 2, DIMS(9, 31)), b = rlx_input(g, "b", RLX_BOOL, 2, DIMS(9, 1));
        rlx_output(g, "z", bops[o].fn(g, a, b));
        check(NAME("binary %s bool", bops[o].name), g);
    }
}

static void test_where_cast_clip(void)
{
    char nm[128];
    static const rlx_dtype wt[4] = {RLX_F32, RLX_F16, RLX_BF16, RLX_I64};
    for (int d = 0; d < 4; d++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node c = rlx_input(g, "c", RLX_BOOL, 3, DIMS(4, 1, 6));
        rlx_node a = rlx_input(g, "a", wt[d], 2, DIMS(5, 6)), b = rlx_input(g, "b", wt[d], 3, DIMS(4, 5, 1));
        rlx_output(g, "y", rlx_where(g, c, a, b));
        check(NAME("where %s", dn(wt[d])), g);
    }
    /* the attention mask's layouts: a [S, T] mask over [B, H, S, T] with a
     * scalar fill, and a column mask with a row of fills; T a multiple of
     * 16 (vectors) and not */
    for (int d = 0; d < 4; d++)
        for (int v = 0; v < 2; v++) {
            int64_t T = v ? 7 : 16;
            rlx_graph *g = rlx_graph_new();
            rlx_node a = rlx_input(g, "a", wt[d], 4, DIMS(2, 3, 5, T));
            rlx_node m = rlx_input(g, "c", RLX_BOOL, 2, DIMS(5, T));
            rlx_node cm = rlx_input(g, "c2", RLX_BOOL, 4, DIMS(2, 3, 5, 1));
            rlx_node row = rlx_input(g, "b", wt[d], 1, DIMS(T));
            rlx_node y = rlx_where(g, m, a, rlx_scalar(g, wt[d], -4.0));
            rlx_output(g, "y", rlx_where(g, cm, y, row));
            check(NAME("where mask layouts %s T=%lld", dn(wt[d]), (long long)T), g);
        }
    static const rlx_dtype casts[][2] = {
        {RLX_F32, RLX_F16}, {RLX_F32, RLX_BF16}, {RLX_F16, RLX_F32},  {RLX_BF16, RLX_F32}, {RLX_F16, RLX_BF16},
        {RLX_F32, RLX_I64}, {RLX_I64, RLX_F32},  {RLX_F32, RLX_I32},  {RLX_BOOL, RLX_F32}, {RLX_I32, RLX_I64},
        {RLX_F32, RLX_U8},  {RLX_F16, RLX_I32},  {RLX_I64, RLX_BF16}, {RLX_F32, RLX_BOOL}, {RLX_I64, RLX_I8},
    };
    for (size_t k = 0; k < sizeof casts / sizeof casts[0]; k++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", casts[k][0], 2, DIMS(13, 29));
        if (casts[k][0] != RLX_BOOL)
            x = rlx_mul(g, x, x);
        rlx_output(g, "y", rlx_cast(g, x, casts[k][1]));
        check(NAME("cast %s->%s", dn(casts[k][0]), dn(casts[k][1])), g);
    }
    static const rlx_dtype ct[5] = {RLX_F32, RLX_F16, RLX_BF16, RLX_I64, RLX_I32};
    for (int d = 0; d < 5; d++) {
        rlx_graph *g = rlx_graph_new();
        rlx_output(g, "y", rlx_clip(g, rlx_input(g, "x", ct[d], 2, DIMS(13, 29)), -0.5, 1.25));
        check(NAME("clip %s", dn(ct[d])), g);
    }
}

typedef rlx_node (*reduce_fn)(rlx_graph *, rlx_node, int, const int *, int);

static void test_reduce(void)
{
    static const struct {
        const char *name;
        reduce_fn fn;
    } ops[] = {{"sum", rlx_reduce_sum},
               {"mean", rlx_reduce_mean},
               {"max", rlx_reduce_max},
               {"min", rlx_reduce_min},
               {"prod", rlx_reduce_prod}};
    static const struct {
        int n;
        int axes[3];
    } ax[] = {{1, {-1}}, {1, {0}}, {2, {0, 2}}, {0, {0}}, {1, {1}}};
    char nm[128];
    for (int o = 0; o < 5; o++)
        for (int d = 0; d < 3; d++)
            for (int a = 0; a < 5; a++)
                for (int kd = 0; kd < 2; kd++) {
                    rlx_graph *g = rlx_graph_new();
                    int is_prod = o == 4;
                    rlx_node x =
                        rlx_input(g, is_prod ? "u_x" : "x", FLOATS[d], 3, is_prod ? DIMS(3, 4, 5) : DIMS(6, 7, 129));
                    if (is_prod)
                        x = rlx_add(g, x, rlx_scalar(g, FLOATS[d], 1.0)); /* around 1, no underflow */
                    rlx_output(g, "y", ops[o].fn(g, x, ax[a].n, ax[a].axes, kd));
                    check(NAME("reduce %s %s axes%d keep%d", ops[o].name, dn(FLOATS[d]), a, kd), g);
                }
    /* long reductions (a gradient's sum of squares, a bias gradient over
     * every token) take the block-per-output kernel */
    for (int o = 0; o < 4; o++)
        for (int d = 0; d < 3; d += 2)
            for (int a = 2; a < 4; a++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node x = rlx_input(g, "x", FLOATS[d], 3, DIMS(64, 3, 4099));
                rlx_output(g, "y", ops[o].fn(g, x, ax[a].n, ax[a].axes, 0));
                check(NAME("reduce %s %s long axes%d", ops[o].name, dn(FLOATS[d]), a), g);
            }
    /* column reductions (every reduced axis ahead of every kept one: a
     * bias or gain's gradient): row chunks and their combine, one chunk */
    static const struct {
        int rank;
        int64_t dims[3];
        int n;
        int axes[2];
    } col[] = {{2, {4096, 40}, 1, {0}}, {3, {3, 700, 48}, 2, {0, 1}}, {3, {40, 9, 33}, 1, {0}}};
    for (int o = 0; o < 4; o++)
        for (int d = 0; d < 3; d += 2)
            for (int c = 0; c < 3; c++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node x = rlx_input(g, "x", FLOATS[d], col[c].rank, col[c].dims);
                rlx_output(g, "y", ops[o].fn(g, x, col[c].n, col[c].axes, c == 1));
                check(NAME("reduce %s %s columns%d", ops[o].name, dn(FLOATS[d]), c), g);
            }
    rlx_graph *g = rlx_graph_new();
    int axis = 1;
    rlx_output(g, "y", rlx_reduce_sum(g, rlx_input(g, "x", RLX_I64, 2, DIMS(9, 33)), 1, &axis, 0));
    check("reduce sum i64", g);
    g = rlx_graph_new();
    axis = 0;
    rlx_output(g, "y", rlx_reduce_sum(g, rlx_input(g, "x", RLX_I64, 2, DIMS(64, 33)), 1, &axis, 0));
    check("reduce sum i64 columns", g);
    for (int d = 0; d < 3; d++)
        for (int a = -1; a < 2; a++)
            for (int mx = 0; mx < 2; mx++) {
                g = rlx_graph_new();
                rlx_node x = rlx_input(g, "x", FLOATS[d], 3, DIMS(5, 6, 37));
                rlx_output(g, "y", mx ? rlx_argmax(g, x, a, a == 0) : rlx_argmin(g, x, a, 0));
                check(NAME("%s %s axis%d", mx ? "argmax" : "argmin", dn(FLOATS[d]), a), g);
            }
    /* a long last axis (a vocabulary's logits) takes the block-per-row kernel */
    for (int d = 0; d < 3; d++)
        for (int mx = 0; mx < 2; mx++) {
            g = rlx_graph_new();
            rlx_node x = rlx_input(g, "x", FLOATS[d], 2, DIMS(3, 50021));
            rlx_output(g, "y", mx ? rlx_argmax(g, x, 1, 0) : rlx_argmin(g, x, 1, 1));
            check(NAME("%s %s long rows", mx ? "argmax" : "argmin", dn(FLOATS[d])), g);
        }
    /* f32 rows of whole 16-byte vectors (a Qwen3 vocabulary; one of a few
     * vectors) take the vector kernel */
    static const int64_t vocab[2] = {151936, 2052};
    for (int k = 0; k < 2; k++)
        for (int mx = 0; mx < 2; mx++) {
            g = rlx_graph_new();
            rlx_node x = rlx_input(g, "x", RLX_F32, 2, DIMS(3, vocab[k]));
            rlx_output(g, "y", mx ? rlx_argmax(g, x, 1, 0) : rlx_argmin(g, x, 1, 1));
            check(NAME("%s f32 rows of %lld", mx ? "argmax" : "argmin", (long long)vocab[k]), g);
        }
}

static void test_norm_softmax(void)
{
    char nm[128];
    for (int d = 0; d < 3; d++) {
        for (int a = 0; a < 3; a++)
            for (int lg = 0; lg < 2; lg++) {
                int axes[3] = {-1, 1, 0};
                rlx_graph *g = rlx_graph_new();
                rlx_node x = rlx_input(g, "x", FLOATS[d], 3, a == 0 ? DIMS(5, 17, 1000) : DIMS(5, 17, 33));
                rlx_output(g, "y", lg ? rlx_log_softmax(g, x, axes[a]) : rlx_softmax(g, x, axes[a]));
                check(NAME("%s %s axis%d", lg ? "log_softmax" : "softmax", dn(FLOATS[d]), axes[a]), g);
            }
        static const int64_t widths[4] = {384, 1000, 31, 2048}; /* register paths of 1-8 loads per lane, and none */
        for (int w = 0; w < 4; w++)
            for (int v = 0; v < 3; v++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node x = rlx_input(g, "x", FLOATS[d], 3, DIMS(3, 5, widths[w]));
                rlx_node ga = v > 0 ? rlx_param(g, "g", FLOATS[d], 1, DIMS(widths[w])) : -1;
                rlx_node be = v > 1 ? rlx_param(g, "b", FLOATS[d], 1, DIMS(widths[w])) : -1;
                rlx_output(g, "ln", rlx_layer_norm(g, x, ga, be, 1e-5));
                rlx_output(g, "rms", rlx_rms_norm(g, x, ga, 1e-6));
                check(NAME("norm %s width%lld variant%d", dn(FLOATS[d]), (long long)widths[w], v), g);
            }
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", FLOATS[d], 4, DIMS(2, 6, 5, 7));
        rlx_node sc = rlx_param(g, "g", FLOATS[d], 1, DIMS(6)), bi = rlx_param(g, "b", FLOATS[d], 1, DIMS(6));
        rlx_node mu = rlx_param(g, "mu", FLOATS[d], 1, DIMS(6)), var = rlx_param(g, "p_var", FLOATS[d], 1, DIMS(6));
        rlx_output(g, "y", rlx_batch_norm(g, x, sc, bi, mu, var, 1e-5));
        check(NAME("batch_norm %s", dn(FLOATS[d])), g);
    }
}

static void test_shape(void)
{
    char nm[128];
    static const rlx_dtype all[5] = {RLX_F32, RLX_F16, RLX_BF16, RLX_I64, RLX_BOOL};
    for (int d = 0; d < 5; d++) {
        rlx_dtype t = all[d];
        static const struct {
            int r;
            int64_t dims[4];
            int perm[4];
        } tp[] = {{3, {5, 6, 7}, {2, 0, 1}},
                  {4, {2, 3, 4, 5}, {0, 2, 1, 3}},
                  {2, {33, 65}, {1, 0}},
                  {3, {3, 40, 70}, {0, 2, 1}},
                  {4, {2, 3, 4, 5}, {3, 2, 1, 0}},
                  /* head transposes: rows of 16-byte units in runs of 4 (64) or not (24) */
                  {4, {2, 5, 3, 64}, {0, 2, 1, 3}},
                  {4, {2, 5, 3, 24}, {0, 2, 1, 3}}};
        for (int k = 0; k < 7; k++) {
            rlx_graph *g = rlx_graph_new();
            rlx_output(g, "y", rlx_transpose(g, rlx_input(g, "x", t, tp[k].r, tp[k].dims), tp[k].perm));
            check(NAME("transpose %s case%d", dn(t), k), g);
        }
        rlx_graph *g = rlx_graph_new();
        int axes[2] = {0, 2};
        rlx_node x = rlx_input(g, "x", t, 3, DIMS(9, 10, 11));
        rlx_output(g, "a", rlx_slice(g, x, 2, axes, DIMS(1, -2), DIMS(8, 0), DIMS(2, -3)));
        rlx_output(g, "b", rlx_slice(g, x, 1, axes + 1, DIMS(3), DIMS(9), DIMS(1)));
        rlx_output(g, "c", rlx_slice(g, x, 1, axes, DIMS(2), DIMS(5), DIMS(1)));
        check(NAME("slice %s", dn(t)), g);
        for (int ax = 0; ax < 3; ax++) {
            g = rlx_graph_new();
            int64_t d1[3] = {4, 5, 6}, d2[3] = {4, 5, 6}, d3[3] = {4, 5, 6};
            d2[ax] = 2;
            d3[ax] = 7;
            rlx_node xs[3] = {rlx_input(g, "x1", t, 3, d1), rlx_input(g, "x2", t, 3, d2), rlx_input(g, "x3", t, 3, d3)};
            rlx_output(g, "y", rlx_concat(g, 3, xs, ax));
            check(NAME("concat %s axis%d", dn(t), ax), g);
        }
        g = rlx_graph_new();
        rlx_output(g, "y", rlx_expand(g, rlx_input(g, "x", t, 2, DIMS(3, 1)), 3, DIMS(2, 3, 4)));
        check(NAME("expand %s", dn(t)), g);
        for (int mode = 0; mode < 3; mode++) {
            g = rlx_graph_new();
            rlx_output(
                g, "y",
                rlx_pad(g, rlx_input(g, "x", t, 3, DIMS(3, 5, 6)), DIMS(0, 2, 1, 1, 3, 2), (rlx_pad_mode)mode, 1.5));
            check(NAME("pad %s mode%d", dn(t), mode), g);
        }
        g = rlx_graph_new();
        rlx_node r = rlx_reshape(g, rlx_input(g, "x", t, 3, DIMS(4, 6, 5)), 2, DIMS(-1, 10));
        rlx_output(g, "y", rlx_transpose(g, r, (const int[]){1, 0}));
        check(NAME("reshape %s", dn(t)), g);
    }
    for (int d = 0; d < 3; d++)
        for (int it = 0; it < 2; it++)
            for (int ax = 0; ax < 2; ax++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node data = rlx_input(g, "x", FLOATS[d], 2, DIMS(50, 24));
                rlx_node idx = rlx_input(g, ax == 0 ? "i50_idx" : "i24_idx", it ? RLX_I32 : RLX_I64, 2, DIMS(3, 7));
                rlx_output(g, "y", rlx_gather(g, data, idx, ax));
                check(NAME("gather %s idx%s axis%d", dn(FLOATS[d]), it ? "i32" : "i64", ax), g);
            }
    /* an index out of range fails the run on CUDA as on the CPU, naming the
     * index; the next run with good indices succeeds (the fault is cleared) */
    if (wanted("gather out of range")) {
        rlx_graph *g = rlx_graph_new();
        rlx_node data = rlx_input(g, "x", RLX_F16, 2, DIMS(50, 32));
        rlx_output(g, "y", rlx_gather(g, data, rlx_input(g, "i", RLX_I64, 1, DIMS(5)), 0));
        char msg[300] = "";
        int ok = 0;
        rlx_options o;
        rlx_options_init(&o);
        o.device = RLX_DEVICE_CUDA;
        o.ignore_env = 1;
        rlx_session *s = NULL;
        if (rlx_compile(g, &o, &s) == RLX_OK) {
            uint16_t x[50 * 32];
            for (int i = 0; i < 50 * 32; i++)
                x[i] = (uint16_t)(0x3c00 + i % 512);
            int64_t bad[5] = {1, 2, 50, 3, 4}, good[5] = {1, 2, 49, -1, 4};
            rlx_session_set_input(s, "x", x, sizeof x);
            rlx_session_set_input(s, "i", bad, sizeof bad);
            rlx_status st1 = rlx_session_run(s);
            snprintf(msg, sizeof msg, "%s", rlx_last_error());
            rlx_session_set_input(s, "i", good, sizeof good);
            rlx_status st2 = rlx_session_run(s);
            uint16_t y[5 * 32];
            rlx_session_get_output(s, "y", y, sizeof y);
            ok = st1 == RLX_ERR_RUNTIME && strstr(msg, "index 50 out of range [0, 50)") && st2 == RLX_OK &&
                 y[2 * 32] == x[49 * 32] && y[3 * 32 + 5] == x[49 * 32 + 5];
            if (!ok)
                snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (bad run %d, good run %d)", (int)st1, (int)st2);
            rlx_session_free(s);
        } else {
            snprintf(msg, sizeof msg, "compile: %s", rlx_last_error());
        }
        rlx_graph_free(g);
        report("gather out of range", ok, msg);
    }
    /* head dims whose pairs fill 16-byte vectors in every dtype (16, 128:
     * the vector kernels) and one whose pairs do not but in f32 interleaved
     * (12: a pair a thread) */
    static const int64_t rope_dims[3] = {16, 128, 12};
    for (int d = 0; d < 3; d++)
        for (int inter = 0; inter < 2; inter++)
            for (int hd = 0; hd < 3; hd++) {
                rlx_graph *g = rlx_graph_new();
                int64_t D = rope_dims[hd];
                rlx_output(g, "y", rlx_rope(g, rlx_input(g, "x", FLOATS[d], 4, DIMS(2, 3, 9, D)), 10000.0, 5, inter));
                check(NAME("rope %s head dim %lld interleaved%d", dn(FLOATS[d]), (long long)D, inter), g);
            }
    /* rope nodes of one graph share the device's angle table where their
     * positions and frequencies agree, and only there */
    for (int d = 0; d < 3; d++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", FLOATS[d], 4, DIMS(2, 3, 9, 16));
        rlx_node x2 = rlx_input(g, "x2", FLOATS[d], 4, DIMS(1, 2, 9, 16));
        rlx_output(g, "a", rlx_rope(g, x, 10000.0, 5, 0));
        rlx_output(g, "b", rlx_rope(g, x2, 10000.0, 5, 0));
        rlx_output(g, "c", rlx_rope(g, x, 10000.0, 7, 0));
        rlx_output(g, "e", rlx_rope(g, x2, 500.0, 5, 0));
        check(NAME("rope %s shared tables", dn(FLOATS[d])), g);
    }
    /* RoPE by tables: f32 tables (as mixed precision keeps them) or of x's
     * dtype, per sequence [B, 1, S, D/2] or shared [1, 1, S, D/2] */
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 4; k++)
            for (int hd = 0; hd < 3; hd++) {
                rlx_graph *g = rlx_graph_new();
                int inter = k & 1, shared = k >> 1;
                int64_t D = rope_dims[hd];
                rlx_dtype tt = k == 3 ? FLOATS[d] : RLX_F32;
                rlx_node x = rlx_input(g, "x", FLOATS[d], 4, DIMS(2, 3, 9, D));
                rlx_node cs = rlx_input(g, "cs", tt, 4, DIMS(shared ? 1 : 2, 1, 9, D / 2));
                rlx_node sn = rlx_input(g, "sn", tt, 4, DIMS(shared ? 1 : 2, 1, 9, D / 2));
                rlx_output(g, "y", rlx_rope_tables(g, x, cs, sn, inter));
                check(NAME("rope tables %s (%s tables%s) head dim %lld interleaved%d", dn(FLOATS[d]), dn(tt),
                           shared ? ", shared" : "", (long long)D, inter),
                      g);
            }
    /* KV-cache writes: rows at random positions (some outside the cache,
     * which both backends skip); head dims of 16-byte rows and of odd ones */
    static const int64_t cw_dims[2] = {64, 6};
    static const rlx_dtype cw_pos[2] = {RLX_I64, RLX_I32};
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 2; k++) {
            rlx_graph *g = rlx_graph_new();
            int64_t D = cw_dims[k];
            rlx_node cache = rlx_param(g, "cache", FLOATS[d], 4, DIMS(3, 2, 17, D));
            rlx_node upd = rlx_input(g, "u", FLOATS[d], 4, DIMS(3, 2, 4, D));
            rlx_node pos = rlx_input(g, "pos", cw_pos[k], 1, DIMS(3));
            rlx_output(g, "y", rlx_mul(g, rlx_cache_write(g, cache, upd, pos), rlx_scalar(g, FLOATS[d], 1.0)));
            check(NAME("cache_write %s head dim %lld pos %s", dn(FLOATS[d]), (long long)D, dn(cw_pos[k])), g);
        }
}

static void test_matmul(void)
{
    char nm[128];
    static const struct {
        int ra;
        int64_t a[4];
        int rb;
        int64_t b[4];
        int ta, tb;
    } mm[] = {
        {2, {37, 64}, 2, {64, 29}, 0, 0},           {2, {64, 37}, 2, {64, 29}, 1, 0},
        {2, {37, 64}, 2, {29, 64}, 0, 1},           {2, {64, 37}, 2, {29, 64}, 1, 1},
        {3, {3, 37, 64}, 2, {64, 29}, 0, 0},        {3, {3, 37, 64}, 3, {3, 64, 29}, 0, 0},
        {4, {2, 1, 8, 16}, 4, {1, 3, 16, 8}, 0, 0}, {3, {4, 16, 33}, 3, {4, 40, 33}, 0, 1},
        {2, {256, 512}, 2, {512, 384}, 0, 0},       {3, {1, 5, 7}, 3, {6, 7, 9}, 0, 0},
    };
    for (size_t k = 0; k < sizeof mm / sizeof mm[0]; k++)
        for (int d = 0; d < 3; d++) {
            rlx_graph *g = rlx_graph_new();
            rlx_node a = rlx_input(g, "u_a", FLOATS[d], mm[k].ra, mm[k].a);
            rlx_node b = rlx_input(g, "u_b", FLOATS[d], mm[k].rb, mm[k].b);
            rlx_output(g, "c", rlx_matmul(g, a, b, mm[k].ta, mm[k].tb));
            check(NAME("matmul %s case%zu", dn(FLOATS[d]), k), g);
        }
    /* up to 8 rows times a [N, K] weight read transposed, 16-bit: the
     * matrix-vector kernel (one or four warps per column), plain and with a
     * bias and an activation fused; 9 rows: the GEMM again */
    static const struct {
        int ra;
        int64_t a[3];
        int64_t N, K;
        int act;
    } mv[] = {
        {3, {1, 1, 1024}, 4099, 1024, 0}, {3, {3, 1, 64}, 5, 64, 0},  {2, {8, 3072}, 1024, 3072, 0},
        {3, {2, 4, 16}, 33, 16, 1},       {2, {6, 8}, 1, 8, 0},       {2, {1, 1032}, 6144, 1032, 2},
        {2, {4, 256}, 2048, 256, 1},      {2, {9, 128}, 300, 128, 1},
    };
    for (size_t k = 0; k < sizeof mv / sizeof mv[0]; k++)
        for (int d = 1; d < 3; d++) {
            rlx_graph *g = rlx_graph_new();
            rlx_node a = rlx_input(g, "u_a", FLOATS[d], mv[k].ra, mv[k].a);
            rlx_node w = rlx_param(g, "u_w", FLOATS[d], 2, DIMS(mv[k].N, mv[k].K));
            rlx_node y = rlx_matmul(g, a, w, 0, 1);
            if (mv[k].act) {
                y = rlx_add(g, y, rlx_param(g, "u_bias", FLOATS[d], 1, DIMS(mv[k].N)));
                y = mv[k].act == 1 ? rlx_silu(g, y) : rlx_gelu(g, y);
            }
            rlx_output(g, "c", y);
            check(NAME("matvec %s rows %lld N %lld K %lld%s", dn(FLOATS[d]),
                       (long long)(mv[k].ra == 3 ? mv[k].a[0] * mv[k].a[1] : mv[k].a[0]), (long long)mv[k].N,
                       (long long)mv[k].K, mv[k].act ? (mv[k].act == 1 ? " + bias, silu" : " + bias, gelu") : ""),
                  g);
        }
}

/* f32 GEMMs on tensor cores (3xTF32) against a float64 product.  Error is
 * measured as max |y - exact| / (sum_k |a_ik b_kj| + |bias_j|).  The split
 * form (RLX_CUDA_F32_GEMM=split) must stay within 2e-6 (about 2^-19; the
 * plain f32 GEMM measures ~5e-8, tensor cores accumulate less exactly than
 * the CUDA cores' FMAs); plain TF32, the control, must be at least 10x
 * worse where it runs on tensor cores, which shows the check can tell the
 * two apart; and the split run
 * must differ from the plain one somewhere, which shows the split path
 * ran. */
static double split_err(rlx_graph *g, const double *ref, const double *norm, size_t n, float *y_out, char *err,
                        size_t errn, int *ok)
{
    run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 0};
    outputs o;
    *ok = run_graph(g, &cu, &o, err, errn) == RLX_OK;
    if (!*ok)
        return INFINITY;
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double y = ((const float *)o.data[0])[i], d = fabs(y - ref[i]) / norm[i];
        if (!(d <= e))
            e = d; /* NaN propagates */
        if (y_out)
            y_out[i] = (float)y;
    }
    outputs_free(&o);
    return e;
}

static void test_f32_split(void)
{
    char nm[160];
    /* control: whether to ask the TF32 control to be 10x worse; cuBLASLt
     * may run an odd-width FAST_TF32 GEMM on the CUDA cores (exact f32), so
     * the last case does not ask it */
    static const struct {
        int64_t M, K, N;
        int ta, tb, control;
    } cs[] = {
        {256, 1536, 384, 0, 0, 1}, /* the encoder's FFN down projection at batch 2 */
        {100, 384, 1152, 0, 1, 1}, /* B stored [N, K] */
        {96, 300, 68, 1, 0, 1},    /* A stored [K, M], odd K */
        {37, 65, 29, 0, 1, 0},     /* widths not a multiple of 4: the split copies go element by element */
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        int64_t M = cs[k].M, K = cs[k].K, N = cs[k].N;
        if (!wanted(NAME("f32 gemm 3xtf32 %lldx%lldx%lld ta%d tb%d", (long long)M, (long long)K, (long long)N, cs[k].ta,
                         cs[k].tb)))
            continue;
        rlx_graph *g = rlx_graph_new();
        int64_t ad[2] = {cs[k].ta ? K : M, cs[k].ta ? M : K}, bd[2] = {cs[k].tb ? N : K, cs[k].tb ? K : N};
        rlx_node a = rlx_input(g, "a", RLX_F32, 2, ad), b = rlx_input(g, "b", RLX_F32, 2, bd);
        rlx_node bias = rlx_input(g, "bias", RLX_F32, 1, DIMS(N));
        rlx_output(g, "y", rlx_add(g, rlx_matmul(g, a, b, cs[k].ta, cs[k].tb), bias));
        /* the same inputs run_graph fills, and the exact product */
        rlx_tensor_info ia = {"a", RLX_F32, 2, {ad[0], ad[1]}, (size_t)(M * K) * 4};
        rlx_tensor_info ib = {"b", RLX_F32, 2, {bd[0], bd[1]}, (size_t)(K * N) * 4};
        rlx_tensor_info ic = {"bias", RLX_F32, 1, {N}, (size_t)N * 4};
        float *A = malloc(ia.bytes), *B = malloc(ib.bytes), *C = malloc(ic.bytes), *ys = malloc((size_t)(M * N) * 4),
              *yp = malloc((size_t)(M * N) * 4);
        double *ref = malloc((size_t)(M * N) * sizeof(double)), *nrm = malloc((size_t)(M * N) * sizeof(double));
        fill(&ia, 99, A);
        fill(&ib, 99, B);
        fill(&ic, 99, C);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = C[j], mag = fabs(C[j]);
                for (int64_t q = 0; q < K; q++) {
                    double x = cs[k].ta ? A[q * M + i] : A[i * K + q], w = cs[k].tb ? B[j * K + q] : B[q * N + j];
                    acc += x * w;
                    mag += fabs(x * w);
                }
                ref[i * N + j] = acc;
                nrm[i * N + j] = mag > 0 ? mag : 1;
            }
        char err[512] = "";
        int ok1, ok2, ok3;
        size_t n = (size_t)(M * N);
        setenv("RLX_CUDA_F32_GEMM", "sgemm", 1);
        double e_plain = split_err(g, ref, nrm, n, yp, err, sizeof err, &ok1);
        setenv("RLX_CUDA_TF32", "1", 1);
        double e_tf32 = ok1 ? split_err(g, ref, nrm, n, NULL, err, sizeof err, &ok2) : 0;
        unsetenv("RLX_CUDA_TF32");
        setenv("RLX_CUDA_F32_GEMM", "split", 1);
        double e_split = ok1 && ok2 ? split_err(g, ref, nrm, n, ys, err, sizeof err, &ok3) : 0;
        unsetenv("RLX_CUDA_F32_GEMM");
        const double bound = 2e-6;
        if (ok1 && ok2 && ok3) {
            int differs = memcmp(ys, yp, n * 4) != 0, control_ok = !cs[k].control || e_tf32 >= 10 * e_split;
            if (!(e_split <= bound))
                snprintf(err, sizeof err, "3xTF32 error %.3g above the bound %.3g (plain f32 %.3g)", e_split, bound,
                         e_plain);
            else if (!control_ok)
                snprintf(err, sizeof err, "control: plain TF32 error %.3g is not 10x the split's %.3g", e_tf32,
                         e_split);
            else if (!differs)
                snprintf(err, sizeof err, "the split run matches the plain one bit for bit: split path not taken?");
            report(nm, e_split <= bound && control_ok && differs, err);
            printf("  %s: error plain f32 %.3g, 3xTF32 %.3g, TF32 %.3g\n", nm, e_plain, e_split, e_tf32);
        } else {
            report(nm, 0, err);
        }
        free(A), free(B), free(C), free(ys), free(yp), free(ref), free(nrm);
        rlx_graph_free(g);
    }
}

static void test_attention(void)
{
    char nm[128];
    static const struct {
        int64_t B, H, Hk, S, T, D, Dv;
        int causal, mask;
    } at[] = {
        {2, 4, 4, 37, 37, 32, 32, 0, 0},
        {2, 4, 2, 37, 45, 32, 32, 1, 0},
        {1, 8, 2, 64, 64, 64, 64, 1, 0},
        {2, 4, 4, 16, 45, 32, 32, 0, 1},
        {2, 4, 4, 16, 45, 32, 32, 0, 2},
        {1, 2, 1, 1, 1000, 128, 128, 1, 0},
        {1, 2, 2, 130, 130, 128, 64, 1, 1},
        {1, 2, 2, 20, 20, 256, 256, 0, 0},
        /* f16/bf16 with D == Dv in {32, 64, 128} run on tensor cores */
        {2, 12, 12, 128, 128, 32, 32, 0, 0},
        {2, 4, 2, 77, 77, 64, 64, 1, 1},
        {1, 4, 4, 77, 77, 128, 128, 0, 2},
        {3, 6, 2, 1, 77, 32, 32, 0, 0},
        {2, 4, 4, 128, 128, 128, 128, 1, 0},
        {2, 4, 1, 77, 150, 64, 64, 1, 2},
        {1, 8, 8, 1, 1, 32, 32, 1, 1},
        {1, 2, 2, 100, 40, 64, 64, 1, 0}, /* fully masked rows: zeros */
        /* larger grids: eight-warp tensor-core blocks once B*H*ceil(S/128) reaches twice the SMs */
        {4, 12, 12, 330, 330, 32, 32, 0, 0},
        {4, 12, 4, 300, 300, 64, 64, 1, 1},
        {8, 12, 12, 300, 300, 32, 32, 0, 0},
        {8, 12, 4, 260, 260, 64, 64, 1, 1},
        /* additive masks the same for every query row: [B, 1, 1, T], and per head [B, H, 1, T] */
        {2, 4, 4, 16, 45, 32, 32, 0, 3},
        {2, 12, 12, 128, 128, 32, 32, 0, 3},
        {2, 4, 2, 77, 150, 64, 64, 1, 4},
        /* keys split into chunks merged by tc_combine (few blocks, 4+ key tiles): the decoder's prefill shape
         * (first query blocks unsplit), T not a multiple of the tile, rows that see no key (T < S, causal) */
        {1, 16, 8, 512, 512, 128, 128, 1, 0},
        {1, 2, 2, 40, 300, 64, 64, 0, 0},
        {1, 2, 2, 400, 260, 128, 128, 1, 0},
        {1, 4, 2, 300, 300, 64, 64, 1, 3},
    };
    for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
        for (int d = 0; d < 3; d++) {
            rlx_graph *g = rlx_graph_new();
            rlx_node q = rlx_input(g, "q", FLOATS[d], 4, DIMS(at[k].B, at[k].H, at[k].S, at[k].D));
            rlx_node kk = rlx_input(g, "k", FLOATS[d], 4, DIMS(at[k].B, at[k].Hk, at[k].T, at[k].D));
            rlx_node v = rlx_input(g, "v", FLOATS[d], 4, DIMS(at[k].B, at[k].Hk, at[k].T, at[k].Dv));
            rlx_node m = -1;
            if (at[k].mask == 1)
                m = rlx_input(g, "m", RLX_BOOL, 4, DIMS(at[k].B, 1, 1, at[k].T)); /* padding mask */
            else if (at[k].mask == 2)
                m = rlx_input(g, "u_m", FLOATS[d], 4, DIMS(at[k].B, 1, at[k].S, at[k].T));
            else if (at[k].mask == 3)
                m = rlx_input(g, "u_m", FLOATS[d], 4, DIMS(at[k].B, 1, 1, at[k].T));
            else if (at[k].mask == 4)
                m = rlx_input(g, "u_m", FLOATS[d], 4, DIMS(at[k].B, at[k].H, 1, at[k].T));
            rlx_output(g, "o", rlx_attention(g, q, kk, v, m, at[k].causal, 0.0));
            check(NAME("attention %s case%zu", dn(FLOATS[d]), k), g);
        }
    /* at per-sequence positions (a KV cache read up to each sequence's
     * length): decode steps and prefill chunks, each kernel family's dims */
    static const struct {
        int64_t B, H, Hk, S, T, D;
        const char *pos; /* "iN": positions in [0, N) */
    } ap[] = {
        {4, 16, 8, 1, 640, 128, "i640"},
        {1, 16, 8, 1, 640, 128, "i640"},
        {1, 16, 8, 512, 640, 128, "i129"},
        {2, 4, 2, 77, 300, 64, "i224"},
        {3, 6, 2, 1, 77, 32, "i77"},
        {2, 4, 2, 5, 50, 48, "i46"},
        {8, 4, 4, 3, 200, 64, "i198"},
        /* one query row: the decode kernel's groups of 4, 8 and 1 heads */
        {3, 8, 2, 1, 300, 128, "i300"},
        {2, 8, 1, 1, 130, 64, "i130"},
        {5, 4, 4, 1, 37, 64, "i37"},
        /* a long cache over few kv heads: attn_decode cuts the keys into
         * many chunks, sized by each sequence's position, not the capacity */
        {2, 8, 2, 1, 4096, 128, "i4096"},
        {1, 8, 1, 1, 2000, 64, "i300"},
    };
    /* one-row cases run twice: by the default kernels and by attn_decode
     * (RLX_CUDA_DECODE_ATTENTION, which the compile reads from here) */
    for (int dec = 0; dec < 2; dec++) {
        if (dec)
            setenv("RLX_CUDA_DECODE_ATTENTION", "1", 1);
        for (size_t k = 0; k < sizeof ap / sizeof ap[0]; k++)
            for (int d = 0; d < 3; d++)
                for (int i32 = 0; i32 < (k == 0 ? 2 : 1) && (!dec || ap[k].S == 1); i32++) {
                    rlx_graph *g = rlx_graph_new();
                    rlx_node q = rlx_input(g, "q", FLOATS[d], 4, DIMS(ap[k].B, ap[k].H, ap[k].S, ap[k].D));
                    rlx_node kk = rlx_input(g, "k", FLOATS[d], 4, DIMS(ap[k].B, ap[k].Hk, ap[k].T, ap[k].D));
                    rlx_node v = rlx_input(g, "v", FLOATS[d], 4, DIMS(ap[k].B, ap[k].Hk, ap[k].T, ap[k].D));
                    rlx_node pos = rlx_input(g, ap[k].pos, i32 ? RLX_I32 : RLX_I64, 1, DIMS(ap[k].B));
                    rlx_output(g, "o", rlx_attention_at(g, q, kk, v, pos, 0.0));
                    check(NAME("attention_at %s B%lld H%lld/%lld S%lld T%lld D%lld%s%s", dn(FLOATS[d]),
                               (long long)ap[k].B, (long long)ap[k].H, (long long)ap[k].Hk, (long long)ap[k].S,
                               (long long)ap[k].T, (long long)ap[k].D, i32 ? " i32 positions" : "",
                               dec ? " attn_decode" : ""),
                          g);
                }
        /* one query row without positions: every key (or, causal, up to the last) */
        for (int d = 0; d < 3; d++)
            for (int causal = 0; causal < 2; causal++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node q = rlx_input(g, "q", FLOATS[d], 4, DIMS(2, 8, 1, 128));
                rlx_node kk = rlx_input(g, "k", FLOATS[d], 4, DIMS(2, 4, 70, 128));
                rlx_node v = rlx_input(g, "v", FLOATS[d], 4, DIMS(2, 4, 70, 128));
                rlx_output(g, "o", rlx_attention(g, q, kk, v, -1, causal, 0.0));
                check(
                    NAME("attention %s one row%s%s", dn(FLOATS[d]), causal ? " causal" : "", dec ? " attn_decode" : ""),
                    g);
            }
        if (dec)
            unsetenv("RLX_CUDA_DECODE_ATTENTION");
    }
}

/* The fused attention block, built the way the fuser recognises it (as
 * the encoder layer in src/models/workloads.c): projections (+bias),
 * reshape, head transpose, attention, transpose back, reshape, output
 * projection (+bias).  x is scaled by 0.1 first (a node outside the
 * block) so the scores stay soft and the comparison measures the
 * kernels, not the rounding of near-ties.  rope_norm: RN_* flags (q/k
 * RMS norm on the heads before the head transpose, RoPE after it).  mask: 1 a
 * bool padding mask [B, 1, 1, S], 2 an additive one [B, 1, S, S], 3 an
 * additive padding mask [B, 1, 1, S] (inputs of the block either way). */
enum {
    RN_NORM = 1,
    RN_ROPE = 2,
    RN_INTER = 4 /* interleaved pairs, positions from 7 */,
    RN_QONLY = 8 /* q norm only */
};
typedef struct ab_case {
    int64_t B, S, hid, H, Hk, D;
    int bias, causal, rope_norm, mask;
} ab_case;

/* *fused_nodes: the node count of the graph when the whole block is one node. */
static rlx_graph *attn_block_graph(rlx_dtype t, const ab_case *c, int *fused_nodes)
{
    static const int perm[4] = {0, 2, 1, 3};
    static const char *wn[3] = {"u_wq", "u_wk", "u_wv"}, *bn[3] = {"u_bq", "u_bk", "u_bv"}, *gn[2] = {"p_gq", "p_gk"};
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_mul(g, rlx_input(g, "u_x", t, 3, DIMS(c->B, c->S, c->hid)), rlx_scalar(g, t, 0.1));
    int n = 3 + 1; /* input, scalar, mul; the block */
    rlx_node heads[3];
    for (int i = 0; i < 3; i++) {
        int64_t h = i == 0 ? c->H : c->Hk;
        rlx_node y = rlx_matmul(g, x, rlx_param(g, wn[i], t, 2, DIMS(c->hid, h * c->D)), 0, 0);
        n++;
        if (c->bias) {
            y = rlx_add(g, y, rlx_param(g, bn[i], t, 1, DIMS(h * c->D)));
            n++;
        }
        y = rlx_reshape(g, y, 4, DIMS(c->B, c->S, h, c->D));
        if ((c->rope_norm & RN_NORM) && (i == 0 || (i == 1 && !(c->rope_norm & RN_QONLY)))) {
            y = rlx_rms_norm(g, y, rlx_param(g, gn[i], t, 1, DIMS(c->D)), 1e-6);
            n++;
        }
        y = rlx_transpose(g, y, perm);
        if ((c->rope_norm & RN_ROPE) && i < 2)
            y = c->rope_norm & RN_INTER ? rlx_rope(g, y, 500000.0, 7, 1) : rlx_rope(g, y, 10000.0, 0, 0);
        heads[i] = y;
    }
    rlx_node m = -1;
    if (c->mask == 1)
        m = rlx_input(g, "m", RLX_BOOL, 4, DIMS(c->B, 1, 1, c->S));
    else if (c->mask == 2)
        m = rlx_input(g, "u_m", t, 4, DIMS(c->B, 1, c->S, c->S));
    else if (c->mask == 3)
        m = rlx_input(g, "u_m", t, 4, DIMS(c->B, 1, 1, c->S));
    n += c->mask != 0;
    rlx_node a = rlx_attention(g, heads[0], heads[1], heads[2], m, c->causal, 0.0);
    a = rlx_reshape(g, rlx_transpose(g, a, perm), 3, DIMS(c->B, c->S, c->H * c->D));
    a = rlx_matmul(g, a, rlx_param(g, "u_wo", t, 2, DIMS(c->H * c->D, c->hid)), 0, 0);
    n++;
    if (c->bias) {
        a = rlx_add(g, a, rlx_param(g, "u_bo", t, 1, DIMS(c->hid)));
        n++;
    }
    rlx_output(g, "y", a);
    *fused_nodes = n;
    return g;
}

/* Like check_ex, and the CUDA compile must have fused the graph down to
 * fused_nodes nodes in all.  For attention blocks, where the q/k/v weights
 * get packed: mode 0 in the prologue (the default), 1 before every launch
 * with the thunks run one by one, 2 inside the captured graph
 * (RLX_CUDA_NO_PROLOGUE=1); modes 1 and 2 run twice. */
static void check_fused(const char *name, rlx_graph *g, int fused_nodes, double scale_tol, int mode)
{
    if (!wanted(name)) {
        rlx_graph_free(g);
        return;
    }
    char err[1024] = "";
    outputs a, b;
    run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, mode == 1, 0, mode ? 2 : 1, 0};
    run_opts ref = {RLX_DEVICE_CPU, RLX_PRECISION_F32, 0, 0, 1, 0};
    rlx_status st = RLX_OK;
    if (!g || rlx_graph_verify(g) != RLX_OK) {
        snprintf(err, sizeof err, "graph: %s", rlx_last_error());
        report(name, 0, err);
        rlx_graph_free(g);
        return;
    }
    if (mode == 2)
        setenv("RLX_CUDA_NO_PROLOGUE", "1", 1);
    st = run_graph(g, &cu, &a, err, sizeof err);
    unsetenv("RLX_CUDA_NO_PROLOGUE");
    if (st != RLX_OK) {
        report(name, 0, err);
    } else {
        int nodes = a.stats.nodes_final;
        if (nodes != fused_nodes) {
            snprintf(err, sizeof err, "not fused on cuda (%d nodes; %d when fused)", nodes, fused_nodes);
            report(name, 0, err);
        } else if (run_graph(g, &ref, &b, err, sizeof err) != RLX_OK) {
            report(name, 0, err);
        } else {
            int bad = compare(&a, &b, scale_tol, err, sizeof err);
            report(name, !bad, err);
            outputs_free(&b);
        }
        outputs_free(&a);
    }
    rlx_graph_free(g);
}

/* qkv_heads (a decoder step's head preparation) on CUDA, one node there:
 * head dims of one, two and eight elements a lane and one that is not a
 * multiple of 32; with both norms and rope from per-sequence tables, with
 * the q norm only and interleaved rope from a shared table, and with
 * neither (GPT-2's split alone); gammas in f32 and, with both norms, in
 * each 16-bit type (a checkpoint's, read as such) */
static void test_qkv_heads(void)
{
    char nm[160];
    static const int64_t dims[4] = {32, 64, 128, 36};
    static const rlx_dtype gammas[3] = {RLX_F32, RLX_BF16, RLX_F16};
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 4; k++)
            for (int form = 0; form < 3; form++)
                for (int gd = 0; gd < (form == 0 ? 3 : 1); gd++) {
                    const int64_t B = 2, S = 3, H = 4, Hk = 2, D = dims[k];
                    rlx_graph *g = rlx_graph_new();
                    rlx_node x = rlx_input(g, "x", FLOATS[d], 3, DIMS(B, S, (H + 2 * Hk) * D));
                    rlx_node cs = -1, sn = -1, gq = -1, gk = -1;
                    if (form < 2) {
                        cs = rlx_input(g, "cs", RLX_F32, 4, DIMS(form ? 1 : B, 1, S, D / 2));
                        sn = rlx_input(g, "sn", RLX_F32, 4, DIMS(form ? 1 : B, 1, S, D / 2));
                        gq = rlx_input(g, "gq", gammas[gd], 1, DIMS(D));
                        gk = form ? -1 : rlx_input(g, "gk", gammas[gd], 1, DIMS(D));
                    }
                    rlx_output(g, "y", rlx_qkv_heads(g, x, cs, sn, gq, gk, (int)H, (int)Hk, 1e-6, form == 1));
                    int leaves = 1 + (form < 2 ? 3 : 0) + (form == 0);
                    check_fused(NAME("qkv_heads %s head dim %lld%s, %s gammas", dn(FLOATS[d]), (long long)D,
                                     form == 0   ? " norms, rope"
                                     : form == 1 ? " q norm, interleaved rope, shared tables"
                                                 : " split only",
                                     dn(gammas[gd])),
                                g, leaves + 1, 1.0, 0);
                }
}

/* glu (SwiGLU on a joined gate/up product): 16-byte vectors and element by
 * element (a half width no vector divides) */
static void test_glu(void)
{
    char nm[128];
    static const int64_t half[2] = {3072, 37};
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 2; k++)
            for (int a = 0; a < 2; a++) {
                rlx_graph *g = rlx_graph_new();
                rlx_node x = rlx_input(g, "x", FLOATS[d], 3, DIMS(2, 5, 2 * half[k]));
                rlx_output(g, "y", rlx_glu(g, x, a ? RLX_ACT_GELU : RLX_ACT_SILU));
                check_fused(NAME("glu %s %s half width %lld", a ? "gelu" : "silu", dn(FLOATS[d]), (long long)half[k]),
                            g, 2, 1.0, 0);
            }
}

/* projection (a decode step's product with the RMS norm before it, a gated
 * unit or a residual add after it), built from primitives as the decoder
 * builder writes them and fused on CUDA into one node: rows 1 to 8 (x
 * [M, 1, K]), head-sized and odd widths, normalised rows in more than the
 * default 48 KB of shared memory (f32, 8 x 3072); 9 rows are not claimed
 * (the parts run, still against the CPU). */
static void test_projection(void)
{
    char nm[160];
    /* form 0: rms_norm -> product; 1: rms_norm -> product -> silu glu;
     * 2: product -> gelu glu; 3: r + product; 4: product + r */
    static const struct {
        int64_t M, K, N;
        int form;
    } pc[] = {
        {1, 1024, 4096, 0}, {3, 256, 300, 0},   {8, 1024, 6144, 1}, {1, 1024, 6144, 1}, {2, 64, 18, 2},
        {1, 2048, 1024, 3}, {8, 3072, 1024, 4}, {5, 512, 4100, 3},  {8, 3072, 520, 0},  {9, 256, 64, 1},
    };
    static const char *forms[] = {"rms_norm", "rms_norm + silu glu", "gelu glu", "residual first", "residual"};
    const bool cpu_only = getenv("RLX_GPU_TEST_CPU_ONLY") != NULL;
    for (size_t k = 0; k < sizeof pc / sizeof pc[0]; k++)
        for (int d = 0; d < 3; d++) {
            const rlx_dtype t = FLOATS[d];
            rlx_graph *g = rlx_graph_new();
            rlx_node x = rlx_input(g, "x", t, 3, DIMS(pc[k].M, 1, pc[k].K));
            rlx_node w = rlx_param(g, "w", t, 2, DIMS(pc[k].N, pc[k].K));
            if (pc[k].form <= 1)
                x = rlx_rms_norm(g, x, rlx_param(g, "g", t, 1, DIMS(pc[k].K)), 1e-6);
            rlx_node y = rlx_matmul(g, x, w, 0, 1);
            if (pc[k].form == 1 || pc[k].form == 2)
                y = rlx_glu(g, y, pc[k].form == 1 ? RLX_ACT_SILU : RLX_ACT_GELU);
            if (pc[k].form >= 3) {
                rlx_node r = rlx_input(g, "r", t, 3, DIMS(pc[k].M, 1, pc[k].N));
                y = pc[k].form == 3 ? rlx_add(g, r, y) : rlx_add(g, y, r);
            }
            rlx_output(g, "y", y);
            /* fused: the leaves and the projection; the CPU (self-check)
             * and 9 rows keep every node */
            const int leaves = 2 + (pc[k].form <= 1) + (pc[k].form >= 3);
            const int fused = cpu_only || pc[k].M > 8 ? g->n_nodes : leaves + 1;
            NAME("projection %s %s rows %lld K %lld N %lld", forms[pc[k].form], dn(t), (long long)pc[k].M,
                 (long long)pc[k].K, (long long)pc[k].N);
            /* a gated unit multiplies the up sum's rounding by the gate's
             * activation (up to ~50 for these inputs' 1024-term sums): an
             * up near 0 by cancellation carries that error into y */
            check_fused(nm, g, fused, pc[k].form == 1 || pc[k].form == 2 ? 8.0 : 1.0, 0);
        }
}

static void test_attn_block(void)
{
    char nm[160];
    static const ab_case cases[] = {
        {2, 128, 384, 12, 12, 32, 1, 0, 0, 0},                /* the encoder's layer */
        {2, 77, 256, 4, 4, 64, 1, 0, 0, 0},                   /* tails */
        {1, 77, 256, 4, 2, 128, 0, 1, 0, 0},                  /* grouped heads, causal */
        {3, 1, 128, 4, 4, 32, 1, 0, 0, 0},                    /* one position */
        {2, 77, 192, 8, 2, 32, 0, 1, 0, 0},                   /* 4 heads per kv head, causal */
        {1, 130, 160, 2, 1, 64, 1, 1, 0, 0},                  /* three key tiles, causal */
        {2, 40, 96, 2, 2, 48, 1, 0, 0, 0},                    /* head dim 48: CUDA-core attention */
        {2, 33, 128, 4, 2, 32, 1, 1, RN_NORM | RN_ROPE, 0},   /* rope + q/k norm */
        {2, 128, 384, 12, 12, 32, 1, 0, 0, 1},                /* the encoder's layer with a padding mask */
        {2, 77, 192, 8, 2, 32, 0, 1, 0, 2},                   /* an additive mask, grouped heads, causal */
        {2, 40, 96, 2, 2, 48, 1, 0, 0, 1},                    /* a padding mask on the CUDA-core attention */
        {2, 128, 384, 12, 12, 32, 1, 0, 0, 3},                /* an additive padding mask, as BERT's exports add it */
        {1, 77, 256, 4, 2, 128, 0, 1, RN_ROPE | RN_INTER, 0}, /* interleaved rope from position 7 */
        {2, 40, 96, 2, 2, 48, 1, 0, RN_NORM | RN_QONLY, 0},   /* q norm only, CUDA-core attention */
        {2, 64, 256, 8, 2, 64, 0, 1, RN_NORM | RN_ROPE, 1},   /* a decoder layer's shape, padding mask */
        {1, 130, 512, 4, 4, 128, 1, 0, RN_NORM, 0},           /* q/k norm only */
        {2, 40, 72, 2, 2, 36, 1, 0, RN_NORM | RN_ROPE, 0},    /* head dim 36: 16-bit norm + rope element by element */
        {1, 320, 256, 4, 2, 128, 0, 1, RN_NORM | RN_ROPE,
         0}, /* keys split (5 tiles, 20 query blocks), in the GEMM workspace */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int d = 0; d < 3; d++) {
            const ab_case *c = &cases[k];
            int fused_nodes = 0;
            rlx_graph *g = attn_block_graph(FLOATS[d], c, &fused_nodes);
            const int rn = c->rope_norm;
            check_fused(NAME("attention_block %s B%lld S%lld H%lld/%lld D%lld bias%d causal%d%s%s%s", dn(FLOATS[d]),
                             (long long)c->B, (long long)c->S, (long long)c->H, (long long)c->Hk, (long long)c->D,
                             c->bias, c->causal, rn & RN_NORM ? (rn & RN_QONLY ? " q norm" : " q/k norm") : "",
                             rn & RN_ROPE ? (rn & RN_INTER ? " interleaved rope" : " rope") : "",
                             c->mask == 1   ? " bool mask"
                             : c->mask == 2 ? " additive mask"
                             : c->mask == 3 ? " additive key mask"
                                            : ""),
                        g, fused_nodes, 1.0, 0);
            for (int mode = 1; mode <= 2 && k < 3; mode++) {
                g = attn_block_graph(FLOATS[d], c, &fused_nodes);
                check_fused(NAME("attention_block %s B%lld S%lld H%lld/%lld %s", dn(FLOATS[d]), (long long)c->B,
                                 (long long)c->S, (long long)c->H, (long long)c->Hk,
                                 mode == 1 ? "no graph" : "no prologue"),
                            g, fused_nodes, 1.0, mode);
            }
        }
}

static void test_conv_nhwc(void);
static void test_conv_pool(void)
{
    char nm[128];
    for (int d = 0; d < 3; d++) {
        static const struct {
            int64_t C, O, k, s, p, dil, g;
            int bias;
        } cv[] = {
            {3, 8, 3, 1, 1, 1, 1, 1},  {4, 6, 3, 2, 0, 2, 1, 0},  {4, 6, 3, 1, 1, 1, 2, 1},
            {8, 16, 1, 1, 0, 1, 1, 1}, {8, 16, 1, 2, 0, 1, 1, 0}, {3, 16, 7, 2, 3, 1, 1, 1},
        };
        for (int k = 0; k < 8; k++) {
            /* cases 6, 7: cases 0, 3 on larger images (per-image GEMMs rather than one gathered GEMM) */
            int big = k >= 6, kc = k == 6 ? 0 : k == 7 ? 3 : k;
            rlx_graph *g = rlx_graph_new();
            rlx_conv_params p;
            rlx_conv_params_init(&p);
            p.stride[0] = p.stride[1] = cv[kc].s;
            p.dilation[0] = p.dilation[1] = cv[kc].dil;
            for (int i = 0; i < 4; i++)
                p.pads[i] = cv[kc].p;
            p.groups = cv[kc].g;
            rlx_node x = rlx_input(g, "u_x", FLOATS[d], 4, big ? DIMS(2, cv[kc].C, 40, 41) : DIMS(2, cv[kc].C, 17, 19));
            rlx_node w = rlx_param(g, "u_w", FLOATS[d], 4, DIMS(cv[kc].O, cv[kc].C / cv[kc].g, cv[kc].k, cv[kc].k));
            rlx_node b = cv[kc].bias ? rlx_param(g, "u_b", FLOATS[d], 1, DIMS(cv[kc].O)) : -1;
            rlx_output(g, "y", rlx_conv(g, x, w, b, &p));
            check(NAME("conv2d %s case%d", dn(FLOATS[d]), k), g);
        }
        rlx_graph *g = rlx_graph_new();
        rlx_conv_params p;
        rlx_conv_params_init(&p);
        p.pads[0] = 2;
        p.pads[1] = 1;
        rlx_output(g, "y",
                   rlx_conv(g, rlx_input(g, "u_x", FLOATS[d], 3, DIMS(2, 4, 20)),
                            rlx_param(g, "u_w", FLOATS[d], 3, DIMS(6, 4, 5)),
                            rlx_param(g, "u_b", FLOATS[d], 1, DIMS(6)), &p));
        check(NAME("conv1d %s", dn(FLOATS[d])), g);
        for (int k = 0; k < 5; k++) { /* case 4: dilated windows, counting pads */
            g = rlx_graph_new();
            rlx_pool_params pp;
            rlx_pool_params_init(&pp, 3);
            pp.stride[0] = pp.stride[1] = 2;
            pp.dilation[0] = pp.dilation[1] = k == 4 ? 2 : 1;
            pp.pads[0] = pp.pads[1] = pp.pads[2] = pp.pads[3] = k == 3 ? 0 : 1;
            pp.count_include_pad = k == 2 || k == 4;
            pp.ceil_mode = k == 3;
            rlx_node x = rlx_input(g, "x", FLOATS[d], 4, DIMS(2, 3, 17, 18));
            rlx_output(g, "mx", rlx_max_pool(g, x, &pp));
            rlx_output(g, "av", rlx_avg_pool(g, x, &pp));
            check(NAME("pool %s case%d", dn(FLOATS[d]), k), g);
        }
        g = rlx_graph_new();
        rlx_output(g, "y", rlx_global_avg_pool(g, rlx_input(g, "x", FLOATS[d], 4, DIMS(2, 5, 9, 11))));
        check(NAME("global_avg_pool %s", dn(FLOATS[d])), g);
    }
    test_conv_nhwc();
}

/* Channels-last convolutions (the default where cuDNN loads; RLX_CUDA_NHWC=1
 * is set here around the CUDA runs anyway): the layout stage makes f16/bf16
 * convs NHWC (cuBLASLt with a bias/ReLU epilogue, cuDNN's graph API or its
 * legacy calls, the fastest); each case also checks that it did
 * (stats.channels_last), and that f32 stays NCHW. */
static void check_nhwc(const char *name, rlx_graph *g, int want_nhwc, double scale_tol)
{
    if (!wanted(name)) {
        rlx_graph_free(g);
        return;
    }
    char err[1024] = "";
    outputs a, b;
    run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 0},
             ref = {RLX_DEVICE_CPU, RLX_PRECISION_F32, 0, 0, 1, 0};
    const char *no_dnn = getenv("RLX_CUDA_NO_CUDNN");
    if (no_dnn && *no_dnn && strcmp(no_dnn, "0") != 0)
        want_nhwc = 0; /* channels-last runs only through cuDNN */
    if (!g || rlx_graph_verify(g) != RLX_OK) {
        snprintf(err, sizeof err, "graph: %s", rlx_last_error());
        report(name, 0, err);
    } else if (setenv("RLX_CUDA_NHWC", "1", 1), run_graph(g, &cu, &a, err, sizeof err) != RLX_OK) {
        unsetenv("RLX_CUDA_NHWC");
        report(name, 0, err);
    } else if (unsetenv("RLX_CUDA_NHWC"), run_graph(g, &ref, &b, err, sizeof err) != RLX_OK) {
        report(name, 0, err);
        outputs_free(&a);
    } else {
        int bad = compare(&a, &b, scale_tol, err, sizeof err);
        int cl = a.stats.channels_last;
        if (!bad && !getenv("RLX_GPU_TEST_CPU_ONLY") && (want_nhwc ? cl < want_nhwc : cl != 0)) {
            snprintf(err, sizeof err, "%d ops made channels-last, expected %s%d", a.stats.channels_last,
                     want_nhwc ? "at least " : "", want_nhwc);
            bad = 1;
        }
        report(name, !bad, err);
        outputs_free(&a);
        outputs_free(&b);
    }
    rlx_graph_free(g);
}

static rlx_node act_of(rlx_graph *g, int act, rlx_node y)
{
    return act == 1 ? rlx_relu(g, y) : act == 2 ? rlx_gelu(g, y) : act == 3 ? rlx_silu(g, y) : y;
}

/* A conv weight scaled by 1/sqrt(fan in), so activations stay near 1
 * through the block and f16/bf16 rounding stays comparable. */
static rlx_node wparam(rlx_graph *g, const char *name, rlx_dtype t, int64_t O, int64_t C, int64_t k)
{
    return rlx_mul(g, rlx_param(g, name, t, 4, DIMS(O, C, k, k)), rlx_scalar(g, t, 1.0 / sqrt((double)(C * k * k))));
}

static void test_conv_nhwc(void)
{
    static const char *acts[4] = {"none", "relu", "gelu", "silu"};
    static const struct {
        int64_t C, O, k, s, g;
        int bias, act, big;
    } cv[] = {
        {16, 32, 3, 1, 1, 1, 1, 0}, {16, 32, 3, 2, 1, 1, 0, 0}, {16, 32, 1, 1, 1, 1, 0, 1},  {32, 16, 1, 2, 1, 0, 1, 0},
        {3, 16, 7, 2, 1, 1, 1, 1},  {16, 16, 3, 1, 2, 1, 1, 0}, {16, 16, 3, 1, 16, 1, 0, 0}, {8, 24, 3, 1, 1, 1, 2, 0},
        {8, 24, 1, 1, 1, 0, 3, 1},  {8, 8, 3, 1, 1, 0, 0, 0},
    };
    char nm[160];
    /* each case once per channels-last path (RLX_CUDA_CONV_PATH prefers
     * one where it can run the conv; "auto" keeps the fastest) */
    static const char *paths[4] = {"auto", "graph", "gemm", "legacy"};
    for (int pi = 0; pi < 4; pi++)
        for (int d = 0; d < 3; d++)
            for (size_t k = 0; k < sizeof cv / sizeof cv[0]; k++) {
                if (pi && FLOATS[d] == RLX_F32)
                    continue; /* f32 stays NCHW */
                if (pi)
                    setenv("RLX_CUDA_CONV_PATH", paths[pi], 1);
                else
                    unsetenv("RLX_CUDA_CONV_PATH");
                rlx_graph *g = rlx_graph_new();
                rlx_conv_params p;
                rlx_conv_params_init(&p);
                p.stride[0] = p.stride[1] = cv[k].s;
                for (int i = 0; i < 4; i++)
                    p.pads[i] = cv[k].k / 2;
                p.groups = cv[k].g;
                rlx_node x =
                    rlx_input(g, "u_x", FLOATS[d], 4, cv[k].big ? DIMS(2, cv[k].C, 40, 41) : DIMS(2, cv[k].C, 17, 19));
                rlx_node w = rlx_param(g, "u_w", FLOATS[d], 4, DIMS(cv[k].O, cv[k].C / cv[k].g, cv[k].k, cv[k].k));
                rlx_node b = cv[k].bias ? rlx_param(g, "u_b", FLOATS[d], 1, DIMS(cv[k].O)) : -1;
                rlx_output(g, "y", act_of(g, cv[k].act, rlx_conv(g, x, w, b, &p)));
                check_nhwc(NAME("conv-nhwc %s k%lld s%lld g%lld bias%d %s%s %s", dn(FLOATS[d]), (long long)cv[k].k,
                                (long long)cv[k].s, (long long)cv[k].g, cv[k].bias, acts[cv[k].act],
                                cv[k].big ? " big" : "", paths[pi]),
                           g, FLOATS[d] == RLX_F32 ? 0 : 1, 1.0);
            }
    unsetenv("RLX_CUDA_CONV_PATH");
    /* a residual block: stem conv + relu, max pool (channels-last too),
     * conv relu -> conv -> add -> relu, stride-2 conv, global pool */
    for (int d = 0; d < 3; d++) {
        rlx_graph *g = rlx_graph_new();
        rlx_dtype t = FLOATS[d];
        rlx_conv_params p1, p2, p7;
        rlx_conv_params_init(&p1);
        p1.pads[0] = p1.pads[1] = p1.pads[2] = p1.pads[3] = 1;
        p2 = p1;
        p2.stride[0] = p2.stride[1] = 2;
        rlx_conv_params_init(&p7);
        p7.stride[0] = p7.stride[1] = 2;
        p7.pads[0] = p7.pads[1] = p7.pads[2] = p7.pads[3] = 3;
        rlx_node h = rlx_relu(g, rlx_conv(g, rlx_input(g, "u_x", t, 4, DIMS(2, 3, 32, 32)),
                                          wparam(g, "u_w0", t, 16, 3, 7), rlx_param(g, "u_b0", t, 1, DIMS(16)), &p7));
        rlx_pool_params pp;
        rlx_pool_params_init(&pp, 3);
        pp.stride[0] = pp.stride[1] = 2;
        pp.pads[0] = pp.pads[1] = pp.pads[2] = pp.pads[3] = 1;
        h = rlx_max_pool(g, h, &pp);
        rlx_node a =
            rlx_relu(g, rlx_conv(g, h, wparam(g, "u_w1", t, 16, 16, 3), rlx_param(g, "u_b1", t, 1, DIMS(16)), &p1));
        a = rlx_conv(g, a, wparam(g, "u_w2", t, 16, 16, 3), rlx_param(g, "u_b2", t, 1, DIMS(16)), &p1);
        rlx_node r = rlx_relu(g, rlx_add(g, a, h));
        rlx_node c =
            rlx_relu(g, rlx_conv(g, r, wparam(g, "u_w3", t, 32, 16, 3), rlx_param(g, "u_b3", t, 1, DIMS(32)), &p2));
        rlx_output(g, "y", rlx_global_avg_pool(g, c));
        rlx_output(g, "r", r);
        check_nhwc(NAME("conv-nhwc block %s", dn(t)), g, t == RLX_F32 ? 0 : 5, 2.0);
    }
    /* resnet50 end to end through the channels-last path */
    run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 1};
    setenv("RLX_CUDA_NHWC", "1", 1);
    check_ex("e2e resnet50 f16 b1 nhwc", rlx_workload_resnet50(1, RLX_F16), 3.0, &cu, NULL);
    setenv("RLX_CUDA_CONV_PATH", "graph", 1);
    check_ex("e2e resnet50 f16 b2 nhwc graph", rlx_workload_resnet50(2, RLX_F16), 3.0, &cu, NULL);
    unsetenv("RLX_CUDA_CONV_PATH");
    unsetenv("RLX_CUDA_NHWC");
}

static void test_random(void)
{
    char nm[128];
    for (int d = 0; d < 3; d++)
        for (int runs = 1; runs <= 2; runs++) {
            rlx_graph *g = rlx_graph_new();
            rlx_output(g, "u", rlx_random_uniform(g, FLOATS[d], 2, DIMS(37, 41), -1.0, 3.0));
            rlx_output(g, "n", rlx_random_normal(g, FLOATS[d], 2, DIMS(37, 41), 0.5, 2.0));
            rlx_output(g, "d", rlx_dropout(g, rlx_input(g, "x", FLOATS[d], 2, DIMS(37, 41)), 0.3));
            run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, runs, 0};
            check_ex(NAME("random %s run%d", dn(FLOATS[d]), runs), g, 1.0, &cu, NULL);
        }
}

/* Patterns the fusion pass turns into fused ops on both devices. */
/* Elementwise chains of every kernel's kind (element by element, the
 * vector path with broadcasts, long programs, linear ones) in dtype t;
 * `how` ends each case's name. */
static void chain_cases(rlx_dtype t, const char *how)
{
    char nm[128];
    rlx_graph *g;
    rlx_node x, r;
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 3, DIMS(4, 33, 65));
    rlx_node y = rlx_input(g, "y", t, 1, DIMS(65)), z = rlx_input(g, "z", t, 3, DIMS(4, 1, 65));
    rlx_output(g, "o", rlx_add(g, rlx_mul(g, x, rlx_sigmoid(g, y)), rlx_tanh(g, rlx_sub(g, z, x))));
    check(NAME("fused elementwise_chain %s%s", dn(t), how), g);
    /* the vector path: innermost dim a multiple of 8, inputs dense or broadcast along it */
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 3, DIMS(4, 33, 64));
    y = rlx_input(g, "y", t, 1, DIMS(64));
    z = rlx_input(g, "z", t, 3, DIMS(4, 1, 64));
    rlx_output(g, "o", rlx_add(g, rlx_mul(g, x, rlx_sigmoid(g, y)), rlx_gelu(g, rlx_sub(g, z, x))));
    check(NAME("fused elementwise_chain vec broadcast %s%s", dn(t), how), g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 4, DIMS(3, 28, 28, 128));
    r = rlx_input(g, "r", t, 4, DIMS(3, 28, 28, 128));
    rlx_output(g, "o", rlx_relu(g, rlx_add(g, x, r)));
    check(NAME("fused elementwise_chain vec residual relu %s%s", dn(t), how), g);
    /* softmax's backward: a column [.., 1] broadcast along the vector
     * (read once per vector, from any address), and a scalar */
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 4, DIMS(2, 3, 24, 64));
    y = rlx_input(g, "y", t, 4, DIMS(2, 3, 24, 64));
    z = rlx_input(g, "z", t, 4, DIMS(2, 3, 24, 1));
    rlx_output(g, "o", rlx_mul(g, rlx_mul(g, x, rlx_sub(g, y, z)), rlx_scalar(g, t, 0.125)));
    check(NAME("fused elementwise_chain column broadcast %s%s", dn(t), how), g);
    /* a long chain over two tensors and four scalars (a GELU backward's
     * shape): more inputs and instructions than the vector kernels take */
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 3, DIMS(4, 24, 64));
    y = rlx_input(g, "y", t, 3, DIMS(4, 24, 64));
    rlx_node e1 =
        rlx_mul(g, rlx_add(g, rlx_mul(g, x, rlx_scalar(g, t, 0.7)), rlx_scalar(g, t, 0.25)), rlx_sigmoid(g, y));
    rlx_node e2 = rlx_exp(g, rlx_mul(g, rlx_mul(g, x, x), rlx_scalar(g, t, -0.5)));
    rlx_node e3 = rlx_mul(g, rlx_add(g, e1, rlx_mul(g, e2, rlx_scalar(g, t, 0.4))), rlx_tanh(g, y));
    rlx_output(g, "o", rlx_sub(g, rlx_mul(g, e3, y), x));
    check(NAME("fused elementwise_chain long %s%s", dn(t), how), g);
    /* SwiGLU's backward for the gate: dy u sig(g) (1 + g (1 - sig(g))),
     * three tensors and a scalar, more instructions than the vector
     * kernels take (the long-program kernel, inputs loaded ahead) */
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 3, DIMS(4, 24, 64));
    y = rlx_input(g, "y", t, 3, DIMS(4, 24, 64));
    z = rlx_input(g, "z", t, 3, DIMS(4, 24, 64));
    rlx_node sg = rlx_sigmoid(g, x), one = rlx_scalar(g, t, 1.0);
    rlx_node dsilu = rlx_mul(g, sg, rlx_add(g, one, rlx_mul(g, x, rlx_sub(g, one, sg))));
    rlx_output(g, "o", rlx_mul(g, rlx_mul(g, z, y), rlx_mul(g, dsilu, rlx_tanh(g, rlx_mul(g, x, y)))));
    check(NAME("fused elementwise_chain swiglu backward %s%s", dn(t), how), g);
    /* a long program over a column broadcast (two collapsed dims) */
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 4, DIMS(2, 3, 24, 64));
    y = rlx_input(g, "y", t, 4, DIMS(2, 3, 24, 64));
    z = rlx_input(g, "z", t, 4, DIMS(2, 3, 24, 1));
    rlx_node c1 = rlx_mul(g, rlx_sub(g, x, z), rlx_sigmoid(g, rlx_add(g, y, z)));
    rlx_node c2 = rlx_mul(g, rlx_exp(g, rlx_mul(g, z, rlx_scalar(g, t, -0.5))), rlx_tanh(g, x));
    rlx_output(g, "o", rlx_sub(g, rlx_mul(g, rlx_add(g, c1, c2), rlx_abs(g, rlx_sub(g, y, x))), z));
    check(NAME("fused elementwise_chain long column broadcast %s%s", dn(t), how), g);
    /* linear programs: broadcast sums, and an input minus the running value */
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 3, DIMS(4, 33, 64));
    y = rlx_input(g, "y", t, 2, DIMS(33, 64));
    z = rlx_input(g, "z", t, 1, DIMS(64));
    rlx_output(g, "o", rlx_add(g, rlx_add(g, x, y), z));
    check(NAME("fused elementwise_chain linear broadcast %s%s", dn(t), how), g);
    g = rlx_graph_new();
    x = rlx_input(g, "x", t, 2, DIMS(48, 96));
    y = rlx_input(g, "y", t, 2, DIMS(48, 96));
    z = rlx_input(g, "z", t, 2, DIMS(48, 96));
    rlx_output(g, "o", rlx_sub(g, z, rlx_relu(g, rlx_add(g, x, y))));
    check(NAME("fused elementwise_chain linear reversed %s%s", dn(t), how), g);
}

/* The chains again with RLX_CUDA_JIT=0: the interpreting kernels, which
 * the generated ones replace by default. */
static void test_chains_interpreted(void)
{
    setenv("RLX_CUDA_JIT", "0", 1);
    for (int d = 0; d < 3; d++)
        chain_cases(FLOATS[d], " interpreted");
    unsetenv("RLX_CUDA_JIT");
}

/* Where NVRTC can be opened, the chains' kernels are generated: building
 * them must not have failed silently back to the interpreters. */
static void test_chains_generated(void)
{
    if (getenv("RLX_GPU_TEST_CPU_ONLY"))
        return; /* both sides on the CPU: nothing is generated */
    void *nvrtc = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!nvrtc)
        nvrtc = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
    if (!nvrtc) {
        printf("note: NVRTC not found; the chains ran interpreted, no generated kernel checked\n");
        return;
    }
    dlclose(nvrtc);
    /* src/backends/cuda/jit.cu's count of generated kernels built, found at
     * run time: a build without the CUDA backend has no such function */
    long (*jit_built)(void) = NULL;
    *(void **)&jit_built = dlsym(RTLD_DEFAULT, "rlx_cu_jit_built");
    if (!jit_built) {
        report("fused elementwise_chain generated kernels built", 0, "rlx_cu_jit_built is not in the library");
        return;
    }
    long before = jit_built();
    for (int d = 0; d < 3; d++)
        chain_cases(FLOATS[d], " generated");
    char msg[128];
    long built = jit_built() - before;
    snprintf(msg, sizeof msg, "%ld generated kernels built for the chains (NVRTC is there)", built);
    if (wanted("fused elementwise_chain"))
        report("fused elementwise_chain generated kernels built", built > 0, msg);
}

static void test_fused(void)
{
    char nm[128];
    for (int d = 0; d < 3; d++) {
        rlx_dtype t = FLOATS[d];
        static unary_fn acts[5] = {NULL, rlx_relu, rlx_gelu, rlx_gelu_tanh, rlx_silu};
        for (int a = 0; a < 5; a++)
            for (int batched = 0; batched < 3; batched++) {
                /* batched 2: an output width that is no multiple of the activation pass's vector */
                int64_t N = batched == 2 ? 135 : 136;
                rlx_graph *g = rlx_graph_new();
                rlx_node x =
                    batched == 1 ? rlx_input(g, "u_x", t, 3, DIMS(3, 40, 96)) : rlx_input(g, "u_x", t, 2, DIMS(70, 96));
                rlx_node y = rlx_add(g, rlx_matmul(g, x, rlx_param(g, "u_w", t, 2, DIMS(96, N)), 0, 0),
                                     rlx_param(g, "u_b", t, 1, DIMS(N)));
                if (acts[a])
                    y = acts[a](g, y);
                rlx_output(g, "y", y);
                check(NAME("fused matmul_bias_act %s act%d batched%d", dn(t), a, batched), g);
            }
        rlx_graph *g = rlx_graph_new();
        rlx_node x = rlx_input(g, "x", t, 3, DIMS(2, 9, 384)), r = rlx_input(g, "r", t, 3, DIMS(2, 9, 384));
        rlx_node ga = rlx_param(g, "g", t, 1, DIMS(384)), be = rlx_param(g, "b", t, 1, DIMS(384));
        rlx_output(g, "ln", rlx_layer_norm(g, rlx_add(g, x, r), ga, be, 1e-12));
        check(NAME("fused add_layer_norm %s", dn(t)), g);
        g = rlx_graph_new();
        x = rlx_input(g, "x", t, 2, DIMS(9, 512));
        r = rlx_input(g, "r", t, 2, DIMS(9, 512));
        rlx_output(g, "rms", rlx_rms_norm(g, rlx_add(g, x, r), rlx_param(g, "g", t, 1, DIMS(512)), 1e-6));
        check(NAME("fused add_rms_norm %s", dn(t)), g);
        /* a pre-norm residual stream: the sum is read again after its norm
         * (add_rms_norm_keep, its two halves views: 11 nodes, 8 unfused);
         * rows of 512 go through registers, of 197 the plain kernel */
        for (int64_t w = 512; w >= 197; w -= 315) {
            g = rlx_graph_new();
            x = rlx_input(g, "x", t, 3, DIMS(2, 9, w));
            r = rlx_input(g, "r", t, 3, DIMS(2, 9, w));
            rlx_node sum = rlx_add(g, x, r);
            rlx_node h = rlx_rms_norm(g, sum, rlx_param(g, "g", t, 1, DIMS(w)), 1e-6);
            h = rlx_matmul(g, h, rlx_param(g, "u_w", t, 2, DIMS(w, w)), 0, 0);
            rlx_output(g, "y", rlx_add(g, sum, h));
            check_fused(NAME("fused add_rms_norm_keep %s width %lld", dn(t), (long long)w), g, 11, 1.0, 0);
        }
        /* 344 columns: 16-byte vectors; 343: element by element */
        for (int64_t f = 344; f >= 343; f--) {
            g = rlx_graph_new();
            x = rlx_input(g, "u_x", t, 3, DIMS(2, 11, 128));
            rlx_node wg = rlx_param(g, "u_wg", t, 2, DIMS(128, f)), wu = rlx_param(g, "u_wu", t, 2, DIMS(128, f));
            rlx_output(g, "y", rlx_mul(g, rlx_silu(g, rlx_matmul(g, x, wg, 0, 0)), rlx_matmul(g, x, wu, 0, 0)));
            check(NAME("fused swiglu %s ffn %lld", dn(t), (long long)f), g);
        }
        chain_cases(t, "");
        for (int mk = 0; mk < 3; mk++) {
            g = rlx_graph_new();
            x = rlx_input(g, "x", t, 4, DIMS(2, 3, 17, 40));
            rlx_node s = rlx_mul(g, x, rlx_scalar(g, t, 0.125));
            if (mk == 1)
                s = rlx_add(g, s, rlx_input(g, "u_m", t, 4, DIMS(2, 1, 1, 40)));
            if (mk == 2)
                s = rlx_where(g, rlx_input(g, "m", RLX_BOOL, 4, DIMS(2, 1, 17, 40)), s, rlx_scalar(g, t, -INFINITY));
            rlx_output(g, "p", rlx_softmax(g, s, -1));
            check(NAME("fused softmax_scale_mask %s mask%d", dn(t), mk), g);
        }
        for (int act = 0; act < 2; act++) {
            g = rlx_graph_new();
            rlx_conv_params p;
            rlx_conv_params_init(&p);
            p.pads[0] = p.pads[1] = p.pads[2] = p.pads[3] = 1;
            rlx_node c =
                rlx_conv(g, rlx_input(g, "u_x", t, 4, DIMS(2, 8, 12, 12)), rlx_param(g, "u_w", t, 4, DIMS(16, 8, 3, 3)),
                         rlx_param(g, "u_b", t, 1, DIMS(16)), &p);
            rlx_output(g, "y", act ? rlx_relu(g, c) : c);
            check(NAME("fused conv_bias_act %s relu%d", dn(t), act), g);
        }
    }
}

/* CUDA Graph replay against eager launches, and against the CPU. */
/* matmul + bias + GELU/SiLU as one cuDNN graph, in f16 and bf16, with and
 * without a bias, B stored [K, N] and [N, K], a batch folded into M.
 * RLX_CUDA_MM_PATH=cudnn requires the path (compile fails where cuDNN has
 * no plan), so a case cannot pass on the cuBLASLt path instead. */
static void test_mm_cudnn(void)
{
    char nm[128];
    static unary_fn acts[2] = {rlx_gelu, rlx_silu};
    static const char *act_names[2] = {"gelu", "silu"};
    static const struct {
        int rank;
        int64_t x[3];
        int64_t N;
    } sh[] = {
        {2, {70, 96}, 136},
        {3, {3, 40, 96}, 200},
        {2, {256, 512}, 1024},
    };
    setenv("RLX_CUDA_MM_PATH", "cudnn", 1);
    for (int d = 1; d < 3; d++)
        for (int a = 0; a < 2; a++)
            for (int bias = 0; bias < 2; bias++)
                for (int tb = 0; tb < 2; tb++)
                    for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++) {
                        rlx_dtype t = FLOATS[d];
                        int64_t K = sh[k].x[sh[k].rank - 1], N = sh[k].N;
                        rlx_graph *g = rlx_graph_new();
                        rlx_node x = rlx_input(g, "u_x", t, sh[k].rank, sh[k].x);
                        rlx_node w = rlx_param(g, "u_w", t, 2, tb ? DIMS(N, K) : DIMS(K, N));
                        rlx_node y = rlx_matmul(g, x, w, 0, tb);
                        if (bias)
                            y = rlx_add(g, y, rlx_param(g, "u_b", t, 1, DIMS(N)));
                        rlx_output(g, "y", acts[a](g, y));
                        check(NAME("matmul cudnn %s %s bias%d tb%d case%zu", dn(t), act_names[a], bias, tb, k), g);
                    }
    unsetenv("RLX_CUDA_MM_PATH");
}

/* Our Hopper GEMM (wgmma): RLX_CUDA_MM_PATH=wgmma requires it (compile
 * fails where it does not apply, so a case cannot pass on another path).
 * f16 and bf16; plain, + bias, + bias + GELU/SiLU/ReLU fused into its
 * store; rows not a multiple of its 128-row tile; a batch folded into M;
 * B an input (read after the wait) and a param (its first stages read
 * before it); both tile widths, every K split (a cluster adding parts
 * through shared memory) and both pipeline depths.  Off sm_90 the group
 * says so and skips (the path's own message, from a probe compile). */
static void wg_case(const char *name, int rank, const int64_t *xd, int64_t N, rlx_dtype t, int act, int bias,
                    int b_param, double tol)
{
    unary_fn acts[4] = {NULL, rlx_gelu, rlx_silu, rlx_relu};
    int64_t K = xd[rank - 1];
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "u_x", t, rank, xd);
    rlx_node w = b_param ? rlx_param(g, "u_w", t, 2, DIMS(K, N)) : rlx_input(g, "u_w", t, 2, DIMS(K, N));
    rlx_node y = rlx_matmul(g, x, w, 0, 0);
    if (bias)
        y = rlx_add(g, y, rlx_param(g, "u_b", t, 1, DIMS(N)));
    rlx_output(g, "y", act ? acts[act](g, y) : y);
    check_ex(name, g, tol, NULL, NULL);
}

static void test_mm_wgmma(void)
{
    char nm[160];
    static const char *act_names[4] = {"none", "gelu", "silu", "relu"};
    static const struct {
        int rank;
        int64_t x[3];
        int64_t N;
    } sh[] = {
        {2, {256, 1024}, 256},
        {2, {70, 256}, 128},
        {3, {3, 40, 192}, 64},
        {2, {300, 512}, 192},
    };
    setenv("RLX_CUDA_MM_PATH", "wgmma", 1);
    /* the path exists on sm_90 only: elsewhere the group says so and skips */
    if (!getenv("RLX_GPU_TEST_CPU_ONLY")) {
        rlx_graph *g = rlx_graph_new();
        rlx_output(g, "y",
                   rlx_matmul(g, rlx_input(g, "x", RLX_F16, 2, DIMS(128, 64)),
                              rlx_param(g, "w", RLX_F16, 2, DIMS(64, 64)), 0, 0));
        rlx_options o;
        rlx_options_init(&o);
        o.device = RLX_DEVICE_CUDA;
        rlx_session *sess = NULL;
        rlx_status st = rlx_compile(g, &o, &sess);
        if (st != RLX_OK && strstr(rlx_last_error(), "no wgmma GEMM here")) {
            printf("skipping the wgmma cases: %s\n", rlx_last_error());
            rlx_graph_free(g);
            unsetenv("RLX_CUDA_MM_PATH");
            return;
        }
        if (sess)
            rlx_session_free(sess);
        rlx_graph_free(g);
    }
    for (int d = 1; d < 3; d++) {
        rlx_dtype t = FLOATS[d];
        for (size_t k = 0; k < sizeof sh / sizeof sh[0]; k++)
            for (int a = 0; a < 4; a++)
                for (int bias = 0; bias < 2; bias++) {
                    if (a && !bias && k % 2) /* activations without a bias on half the shapes */
                        continue;
                    wg_case(NAME("matmul wgmma %s %s bias%d case%zu", dn(t), act_names[a], bias, k), sh[k].rank,
                            sh[k].x, sh[k].N, t, a, bias, (int)(k + a) % 2, 1.0);
                }
        /* each tile width, K split and pipeline depth, B a param and an
         * input; 200 rows: the second row of tiles runs past M */
        for (int bn = 64; bn <= 128; bn *= 2)
            for (int split = 1; split <= 8; split *= 2)
                for (int stages = 4; stages <= 6; stages += 2)
                    for (int bp = 0; bp < 2; bp++) {
                        char v[16];
                        snprintf(v, sizeof v, "%d", bn);
                        setenv("RLX_CUDA_WGMMA_BN", v, 1);
                        snprintf(v, sizeof v, "%d", split);
                        setenv("RLX_CUDA_WGMMA_SPLIT", v, 1);
                        snprintf(v, sizeof v, "%d", stages);
                        setenv("RLX_CUDA_WGMMA_STAGES", v, 1);
                        wg_case(NAME("matmul wgmma %s bn%d split%d stages%d bparam%d", dn(t), bn, split, stages, bp), 2,
                                DIMS(200, 2048), 256, t, 1, 1, bp, 2.0);
                    }
        unsetenv("RLX_CUDA_WGMMA_BN");
        unsetenv("RLX_CUDA_WGMMA_SPLIT");
        unsetenv("RLX_CUDA_WGMMA_STAGES");
        /* the mlp workload end to end, and under mixed precision (its weights cast by the prologue) */
        run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 1};
        check_ex(NAME("matmul wgmma e2e mlp %s b64", dn(t)), rlx_workload_mlp(64, t), 2.0, &cu, NULL);
        run_opts amp = {RLX_DEVICE_CUDA, t == RLX_F16 ? RLX_PRECISION_F16 : RLX_PRECISION_BF16, 0, 0, 2, 1};
        run_opts ref = {RLX_DEVICE_CPU, RLX_PRECISION_F32, 0, 0, 2, 1};
        check_ex(NAME("matmul wgmma e2e mlp amp %s b256", dn(t)), rlx_workload_mlp(256, RLX_F32),
                 t == RLX_F16 ? 100.0 : 200.0, &amp, &ref);
    }
    unsetenv("RLX_CUDA_MM_PATH");
}

static void test_graph_replay(void)
{
    rlx_graph *g = rlx_workload_mlp(32, RLX_F32);
    run_opts eager = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 1, 0, 2, 1};
    run_opts graph = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 3, 1};
    check_ex("cuda graph vs eager (mlp)", g, 1.0, &graph, &eager);
    g = rlx_workload_mlp(32, RLX_F32);
    run_opts nofuse = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 1, 1, 1};
    check_ex("mlp without fusion", g, 1.0, &nofuse, NULL);
}

/* Params swapped after a run without recompiling: what the prologue
 * derives from params (the casts of mixed precision, the attention block's
 * packed q/k/v weights) must follow the new values.  The CUDA session runs
 * once with params of seed 7, then with seed 8; the CPU one with seed 8. */
static void param_swap_case(const char *name, rlx_graph *g, rlx_precision prec, double tol)
{
    if (!wanted(name)) {
        rlx_graph_free(g);
        return;
    }
    char err[512] = "";
    int ok = 0;
    float *res[2] = {NULL, NULL};
    size_t n = 0;
    for (int dev = 0; dev < 2; dev++) {
        rlx_options o;
        rlx_options_init(&o);
        o.ignore_env = 1;
        o.device = dev == 0 && !getenv("RLX_GPU_TEST_CPU_ONLY") ? RLX_DEVICE_CUDA : RLX_DEVICE_CPU;
        o.precision = dev == 0 ? prec : RLX_PRECISION_F32;
        rlx_session *s = NULL;
        if (rlx_compile(g, &o, &s) != RLX_OK) {
            snprintf(err, sizeof err, "compile: %s", rlx_last_error());
            break;
        }
        int bad = 0;
        for (int i = 0; i < rlx_session_count(s, 0) && !bad; i++) {
            rlx_tensor_info xi;
            rlx_session_info(s, 0, i, &xi);
            void *x = malloc(xi.bytes + 16);
            fill(&xi, 5, x);
            bad |= rlx_session_set_input(s, xi.name, x, xi.bytes) != RLX_OK;
            free(x);
        }
        rlx_tensor_info yi;
        rlx_session_info(s, 2, 0, &yi);
        n = yi.bytes / 4;
        float *y = malloc(yi.bytes);
        if (dev == 0) /* a first run with other params */
            bad |= rlx_workload_init_params(s, 7) != RLX_OK || rlx_session_run(s) != RLX_OK;
        bad |= yi.dtype != RLX_F32 || rlx_workload_init_params(s, 8) != RLX_OK || rlx_session_run(s) != RLX_OK ||
               rlx_session_get_output(s, yi.name, y, yi.bytes) != RLX_OK;
        if (bad)
            snprintf(err, sizeof err, "run: %s", rlx_last_error());
        rlx_session_free(s);
        res[dev] = y;
        if (bad)
            break;
    }
    if (res[0] && res[1] && !err[0]) {
        size_t off = 0;
        for (size_t i = 0; i < n; i++)
            if (!(fabs(res[0][i] - res[1][i]) <= tol + tol * fabs(res[1][i])))
                off++;
        ok = off == 0;
        snprintf(err, sizeof err, "%zu of %zu elements off after swapping params", off, n);
    }
    report(name, ok, err);
    free(res[0]);
    free(res[1]);
    rlx_graph_free(g);
}

/* A decode step's attention run again with new inputs: the key chunks'
 * merge (by the last block of each kv head, counted on tickets the thunk
 * keeps across runs) must give the second run's rows, not the first's.
 * CUDA runs with inputs of seed 5 then 9; the CPU with seed 9. */
static void decode_rerun_case(const char *name, rlx_graph *g)
{
    if (!wanted(name)) {
        rlx_graph_free(g);
        return;
    }
    char err[512] = "";
    float *res[2] = {NULL, NULL};
    size_t n = 0;
    for (int dev = 0; dev < 2 && !err[0]; dev++) {
        rlx_options o;
        rlx_options_init(&o);
        o.ignore_env = 1;
        o.device = dev == 0 && !getenv("RLX_GPU_TEST_CPU_ONLY") ? RLX_DEVICE_CUDA : RLX_DEVICE_CPU;
        rlx_session *s = NULL;
        if (rlx_compile(g, &o, &s) != RLX_OK) {
            snprintf(err, sizeof err, "compile: %s", rlx_last_error());
            break;
        }
        int bad = 0;
        for (int run = dev; run < 2 && !bad; run++) { /* CUDA: seed 5, then 9; the CPU: 9 */
            for (int i = 0; i < rlx_session_count(s, 0) && !bad; i++) {
                rlx_tensor_info xi;
                rlx_session_info(s, 0, i, &xi);
                void *x = malloc(xi.bytes + 16);
                fill(&xi, run ? 9 : 5, x);
                bad |= rlx_session_set_input(s, xi.name, x, xi.bytes) != RLX_OK;
                free(x);
            }
            bad |= rlx_session_run(s) != RLX_OK;
        }
        rlx_tensor_info yi;
        rlx_session_info(s, 2, 0, &yi);
        n = yi.bytes / 4;
        res[dev] = malloc(yi.bytes);
        bad |= yi.dtype != RLX_F32 || rlx_session_get_output(s, yi.name, res[dev], yi.bytes) != RLX_OK;
        if (bad)
            snprintf(err, sizeof err, "run: %s", rlx_last_error());
        rlx_session_free(s);
    }
    if (!err[0]) {
        double scale = 0, worst = 0;
        for (size_t i = 0; i < n; i++)
            scale = fmax(scale, fabs(res[1][i]));
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs(res[0][i] - res[1][i]));
        if (!(worst <= 1e-5 * fmax(scale, 1.0)))
            snprintf(err, sizeof err, "second run off by %g (max |y| %g)", worst, scale);
    }
    report(name, !err[0], err);
    free(res[0]);
    free(res[1]);
    rlx_graph_free(g);
}

static void test_decode_rerun(void)
{
    static const int64_t shapes[2][5] = {{1, 16, 8, 640, 128}, {3, 8, 2, 300, 64}}; /* B, H, Hk, T, D */
    for (int k = 0; k < 2; k++) {
        const int64_t *d = shapes[k];
        rlx_graph *g = rlx_graph_new();
        rlx_node q = rlx_input(g, "q", RLX_F32, 4, DIMS(d[0], d[1], 1, d[4]));
        rlx_node kk = rlx_input(g, "k", RLX_F32, 4, DIMS(d[0], d[2], d[3], d[4]));
        rlx_node v = rlx_input(g, "v", RLX_F32, 4, DIMS(d[0], d[2], d[3], d[4]));
        rlx_node pos = rlx_input(g, k ? "i300" : "i640", RLX_I64, 1, DIMS(d[0]));
        rlx_output(g, "o", rlx_attention_at(g, q, kk, v, pos, 0.0));
        char nm[96];
        decode_rerun_case(NAME("attention_at one row, run again with new inputs (B%lld T%lld D%lld)", (long long)d[0],
                               (long long)d[3], (long long)d[4]),
                          g);
    }
}

static void test_param_swap(void)
{
    param_swap_case("param swap (amp f16 mlp)", rlx_workload_mlp(16, RLX_F32), RLX_PRECISION_F16, 3e-2);
    rlx_encoder_config ec = rlx_encoder_minilm(2, 32);
    ec.layers = 2;
    param_swap_case("param swap (f32 encoder: packed q/k/v weights)", rlx_workload_encoder(&ec), RLX_PRECISION_F32,
                    1e-3);
    param_swap_case("param swap (amp f16 encoder: packed casts)", rlx_workload_encoder(&ec), RLX_PRECISION_F16, 6e-2);
}

static void test_workloads(void)
{
    test_param_swap();
    test_decode_rerun();
    run_opts cu = {RLX_DEVICE_CUDA, RLX_PRECISION_F32, 0, 0, 1, 1};
    check_ex("e2e mlp f32 b64", rlx_workload_mlp(64, RLX_F32), 2.0, &cu, NULL);
    check_ex("e2e mlp f16 b64", rlx_workload_mlp(64, RLX_F16), 2.0, &cu, NULL);
    check_ex("e2e mlp bf16 b64", rlx_workload_mlp(64, RLX_BF16), 2.0, &cu, NULL);
    rlx_encoder_config ec = rlx_encoder_minilm(2, 64);
    ec.layers = 2;
    check_ex("e2e encoder f32 b2 s64", rlx_workload_encoder(&ec), 5.0, &cu, NULL);
    run_opts amp = {RLX_DEVICE_CUDA, RLX_PRECISION_F16, 0, 0, 1, 1};
    run_opts ref = {RLX_DEVICE_CPU, RLX_PRECISION_F32, 0, 0, 1, 1};
    /* mixed precision against the f32 CPU reference: f16 tolerances */
    ec = rlx_encoder_minilm(2, 64);
    ec.layers = 2;
    /* f32 outputs of an f16/bf16 body: tolerances scaled to those dtypes */
    check_ex("e2e encoder amp f16", rlx_workload_encoder(&ec), 100.0, &amp, &ref);
    rlx_graph *g;
    g = rlx_workload_mlp(64, RLX_F32);
    check_ex("e2e mlp amp bf16", g, 200.0, &(run_opts){RLX_DEVICE_CUDA, RLX_PRECISION_BF16, 0, 0, 1, 1}, &ref);
    /* a Qwen3-shaped decoder's prefill (q/k norm, RoPE, grouped heads, causal: attention blocks), cut short */
    rlx_decoder_config dc = rlx_decoder_small(48);
    dc.layers = 2;
    dc.vocab = 4096;
    check_ex("e2e decoder f32 s48", rlx_workload_decoder(&dc), 5.0, &cu, NULL);
    dc.dtype = RLX_BF16;
    check_ex("e2e decoder bf16 s48", rlx_workload_decoder(&dc), 3.0, &cu, NULL);
    /* resnet50 itself, batch 1, f32 and f16 */
    check_ex("e2e resnet50 f32 b1", rlx_workload_resnet50(1, RLX_F32), 5.0, &cu, NULL);
    check_ex("e2e resnet50 f16 b1", rlx_workload_resnet50(1, RLX_F16), 3.0, &cu, NULL);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    filter = getenv("RLX_GPU_TEST_FILTER");
    if (filter && !*filter)
        filter = NULL;
    /* skip cleanly where CUDA is not built or no device is usable */
    rlx_graph *probe = rlx_graph_new();
    rlx_output(probe, "y", rlx_relu(probe, rlx_input(probe, "x", RLX_F32, 1, DIMS(4))));
    rlx_options o;
    rlx_options_init(&o);
    o.device = RLX_DEVICE_CUDA;
    rlx_session *s = NULL;
    if (getenv("RLX_GPU_TEST_CPU_ONLY"))
        o.device = RLX_DEVICE_CPU;
    if (rlx_compile(probe, &o, &s) != RLX_OK) {
        printf("SKIPPED: CUDA backend not usable here: %s\n", rlx_last_error());
        printf("0 passed, 0 failed (skipped)\n");
        rlx_graph_free(probe);
        return 77;
    }
    rlx_session_free(s);
    rlx_graph_free(probe);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    static const struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {
        {"unary", test_unary},
        {"gelu tails", test_gelu_tails},
        {"binary", test_binary},
        {"where/cast/clip", test_where_cast_clip},
        {"reduce", test_reduce},
        {"norm/softmax", test_norm_softmax},
        {"shape", test_shape},
        {"matmul", test_matmul},
        {"f32 3xtf32", test_f32_split},
        {"attention", test_attention},
        {"attention block", test_attn_block},
        {"qkv_heads", test_qkv_heads},
        {"glu", test_glu},
        {"projection", test_projection},
        {"conv/pool", test_conv_pool},
        {"random", test_random},
        {"fused", test_fused},
        {"chains generated", test_chains_generated},
        {"chains interpreted", test_chains_interpreted},
        {"matmul cudnn", test_mm_cudnn},
        {"matmul wgmma", test_mm_wgmma},
        {"graph replay", test_graph_replay},
        {"workloads", test_workloads},
    };
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++) {
        int p0 = n_pass, f0 = n_fail;
        groups[i].fn();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("group %-16s %4d passed %4d failed  (%.1f s)\n", groups[i].name, n_pass - p0, n_fail - f0,
               (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    }
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
