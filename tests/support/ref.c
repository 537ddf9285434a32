/* ref.c - float64 reference ops, random tensors, dtype conversion,
 * comparison and the run harness for the op tests.  See ref.h. */
#include "support/ref.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ================================================================ random */

static uint64_t g_seed;
static int g_seeded;
static uint64_t g_state[4];

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void seed_state(uint64_t s)
{
    uint64_t x = s;
    for (int i = 0; i < 4; i++)
        g_state[i] = splitmix(&x);
}

void rt_seed_init(void)
{
    if (g_seeded)
        return;
    g_seeded = 1;
    const char *env = getenv("RLX_TEST_SEED");
    if (env && *env) {
        g_seed = strtoull(env, NULL, 0);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec;
        g_seed = splitmix(&x) % 1000000000ull; /* short enough to type */
    }
    seed_state(g_seed);
    fprintf(stderr, "[ref] random seed %" PRIu64 " (set RLX_TEST_SEED=%" PRIu64 " to repeat this run)\n", g_seed,
            g_seed);
}

uint64_t rt_seed(void)
{
    rt_seed_init();
    return g_seed;
}

void rt_reseed(uint64_t salt)
{
    rt_seed_init();
    seed_state(g_seed ^ (salt * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull));
}

int rt_setup(void **state)
{
    static uint64_t counter;
    (void)state;
    rt_reseed(++counter);
    return 0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rt_next_u64(void)
{
    rt_seed_init();
    uint64_t *s = g_state;
    uint64_t r = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double rt_uniform(double lo, double hi)
{
    double u = (double)(rt_next_u64() >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

double rt_normal(void)
{
    double u1 = rt_uniform(0, 1), u2 = rt_uniform(0, 1);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

int64_t rt_randint(int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(rt_next_u64() % (uint64_t)(hi - lo));
}

/* ================================================================ tensors */

int64_t rt_numel(int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= dims[i];
    return n;
}

rt_tensor *rt_new(int ndim, const int64_t *dims)
{
    rt_tensor *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->dims[i] = dims[i];
    t->n = rt_numel(ndim, dims);
    t->d = calloc((size_t)t->n + 1, sizeof(double));
    if (!t->d)
        abort();
    return t;
}

rt_tensor *rt_clone(const rt_tensor *t)
{
    rt_tensor *c = rt_new(t->ndim, t->dims);
    memcpy(c->d, t->d, (size_t)t->n * sizeof(double));
    return c;
}

void rt_free(rt_tensor *t)
{
    if (!t)
        return;
    free(t->d);
    free(t);
}

rt_tensor *rt_rand(int ndim, const int64_t *dims, double lo, double hi)
{
    rt_tensor *t = rt_new(ndim, dims);
    for (int64_t i = 0; i < t->n; i++)
        t->d[i] = rt_uniform(lo, hi);
    return t;
}

rt_tensor *rt_rand_away(int ndim, const int64_t *dims, double lo, double hi, double gap)
{
    rt_tensor *t = rt_new(ndim, dims);
    for (int64_t i = 0; i < t->n; i++) {
        double v;
        do
            v = rt_uniform(lo, hi);
        while (fabs(v) < gap);
        t->d[i] = v;
    }
    return t;
}

rt_tensor *rt_randn(int ndim, const int64_t *dims)
{
    rt_tensor *t = rt_new(ndim, dims);
    for (int64_t i = 0; i < t->n; i++)
        t->d[i] = rt_normal();
    return t;
}

rt_tensor *rt_randi(int ndim, const int64_t *dims, int64_t lo, int64_t hi)
{
    rt_tensor *t = rt_new(ndim, dims);
    for (int64_t i = 0; i < t->n; i++)
        t->d[i] = (double)rt_randint(lo, hi);
    return t;
}

rt_tensor *rt_randb(int ndim, const int64_t *dims, double p)
{
    rt_tensor *t = rt_new(ndim, dims);
    for (int64_t i = 0; i < t->n; i++)
        t->d[i] = rt_uniform(0, 1) < p ? 1.0 : 0.0;
    return t;
}

rt_tensor *rt_from(int ndim, const int64_t *dims, const double *vals)
{
    rt_tensor *t = rt_new(ndim, dims);
    memcpy(t->d, vals, (size_t)t->n * sizeof(double));
    return t;
}

bool rt_same_shape(const rt_tensor *a, const rt_tensor *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

const char *rt_shape_str(int ndim, const int64_t *dims)
{
    static char bufs[4][128];
    static int k;
    char *b = bufs[k++ & 3];
    size_t o = 0;
    o += (size_t)snprintf(b + o, 128 - o, "[");
    for (int i = 0; i < ndim && o < 120; i++)
        o += (size_t)snprintf(b + o, 128 - o, "%s%" PRId64, i ? ", " : "", dims[i]);
    snprintf(b + o, 128 - o, "]");
    return b;
}

int64_t rt_ravel(int ndim, const int64_t *dims, const int64_t *idx)
{
    int64_t off = 0;
    for (int i = 0; i < ndim; i++)
        off = off * dims[i] + idx[i];
    return off;
}

void rt_unravel(int64_t off, int ndim, const int64_t *dims, int64_t *idx)
{
    for (int i = ndim - 1; i >= 0; i--) {
        if (dims[i] == 0) {
            idx[i] = 0;
            continue;
        }
        idx[i] = off % dims[i];
        off /= dims[i];
    }
}

int64_t rt_bcast_off(const rt_tensor *t, int out_ndim, const int64_t *out_idx)
{
    int64_t off = 0;
    int shift = out_ndim - t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        int64_t k = t->dims[i] == 1 ? 0 : out_idx[i + shift];
        off = off * t->dims[i] + k;
    }
    return off;
}

/* ================================================================ dtypes */

/* Rounds x to a binary float with `prec` significand bits (incl. the
 * implicit one), smallest normal exponent emin (value 2^emin) and largest
 * finite value maxv; ties to even. */
static double round_binary(double x, int prec, int emin, double maxv)
{
    if (isnan(x) || isinf(x) || x == 0)
        return x;
    int e;
    frexp(fabs(x), &e); /* |x| in [2^(e-1), 2^e) */
    int lead = e - 1;
    if (lead < emin)
        lead = emin; /* subnormal: fixed quantum */
    double q = ldexp(1.0, lead - (prec - 1));
    double r = nearbyint(x / q) * q; /* x/q exact: power-of-two scaling */
    if (fabs(r) > maxv)
        return x > 0 ? INFINITY : -INFINITY;
    return r;
}

double rt_round_f16(double x) { return round_binary(x, 11, -14, 65504.0); }

double rt_round_bf16(double x) { return round_binary(x, 8, -126, ldexp(255.0 / 128.0, 127)); }

double rt_to_dtype(double x, rlx_dtype t)
{
    switch (t) {
    case RLX_F32: return (double)(float)x;
    case RLX_F16: return rt_round_f16(x);
    case RLX_BF16: return rt_round_bf16(x);
    case RLX_F64: return x;
    case RLX_I64: return (double)(int64_t)x;
    case RLX_I32: return (double)(int32_t)(int64_t)x;
    case RLX_I8: return (double)(int8_t)(int64_t)x;
    case RLX_U8: return (double)(uint8_t)(int64_t)x;
    case RLX_BOOL: return x != 0 ? 1.0 : 0.0;
    default: return x;
    }
}

void rt_quantize(rt_tensor *t, rlx_dtype dt)
{
    for (int64_t i = 0; i < t->n; i++)
        t->d[i] = rt_to_dtype(t->d[i], dt);
}

uint16_t rt_f16_bits(double x)
{
    double v = rt_round_f16(x);
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (isnan(v))
        return 0x7e00;
    if (isinf(a))
        return sign | 0x7c00;
    if (a == 0)
        return sign;
    if (a < ldexp(1.0, -14))
        return sign | (uint16_t)(a / ldexp(1.0, -24));
    int e;
    frexp(a, &e);
    int lead = e - 1;                                                  /* a in [2^lead, 2^(lead+1)) */
    uint16_t mant = (uint16_t)((a / ldexp(1.0, lead) - 1.0) * 1024.0); /* exact */
    return sign | (uint16_t)((lead + 15) << 10) | mant;
}

double rt_f16_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    double v;
    if (exp == 31)
        v = mant ? NAN : INFINITY;
    else if (exp == 0)
        v = ldexp((double)mant, -24);
    else
        v = ldexp(1.0 + mant / 1024.0, exp - 15);
    return sign ? -v : v;
}

uint16_t rt_bf16_bits(double x)
{
    double v = rt_round_bf16(x);
    if (isnan(v))
        return 0x7fc0;
    float f = (float)v; /* exact */
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

double rt_bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void *rt_pack(const rt_tensor *t, rlx_dtype dt, size_t *bytes)
{
    size_t es = rlx_dtype_size(dt);
    size_t nb = (size_t)t->n * es;
    unsigned char *buf = calloc(nb + 8, 1);
    if (!buf)
        abort();
    for (int64_t i = 0; i < t->n; i++) {
        double x = t->d[i];
        void *p = buf + (size_t)i * es;
        switch (dt) {
        case RLX_F32: {
            float v = (float)x;
            memcpy(p, &v, 4);
            break;
        }
        case RLX_F16: {
            uint16_t v = rt_f16_bits(x);
            memcpy(p, &v, 2);
            break;
        }
        case RLX_BF16: {
            uint16_t v = rt_bf16_bits(x);
            memcpy(p, &v, 2);
            break;
        }
        case RLX_F64: memcpy(p, &x, 8); break;
        case RLX_I64: {
            int64_t v = (int64_t)x;
            memcpy(p, &v, 8);
            break;
        }
        case RLX_I32: {
            int32_t v = (int32_t)(int64_t)x;
            memcpy(p, &v, 4);
            break;
        }
        case RLX_I8: {
            int8_t v = (int8_t)(int64_t)x;
            memcpy(p, &v, 1);
            break;
        }
        case RLX_U8: {
            uint8_t v = (uint8_t)(int64_t)x;
            memcpy(p, &v, 1);
            break;
        }
        case RLX_BOOL: {
            uint8_t v = x != 0;
            memcpy(p, &v, 1);
            break;
        }
        default: break;
        }
    }
    if (bytes)
        *bytes = nb;
    return buf;
}

rt_tensor *rt_unpack(rlx_dtype dt, int ndim, const int64_t *dims, const void *buf)
{
    rt_tensor *t = rt_new(ndim, dims);
    size_t es = rlx_dtype_size(dt);
    const unsigned char *b = buf;
    for (int64_t i = 0; i < t->n; i++) {
        const void *p = b + (size_t)i * es;
        double x = 0;
        switch (dt) {
        case RLX_F32: {
            float v;
            memcpy(&v, p, 4);
            x = v;
            break;
        }
        case RLX_F16: {
            uint16_t v;
            memcpy(&v, p, 2);
            x = rt_f16_value(v);
            break;
        }
        case RLX_BF16: {
            uint16_t v;
            memcpy(&v, p, 2);
            x = rt_bf16_value(v);
            break;
        }
        case RLX_F64: memcpy(&x, p, 8); break;
        case RLX_I64: {
            int64_t v;
            memcpy(&v, p, 8);
            x = (double)v;
            break;
        }
        case RLX_I32: {
            int32_t v;
            memcpy(&v, p, 4);
            x = v;
            break;
        }
        case RLX_I8: {
            int8_t v;
            memcpy(&v, p, 1);
            x = v;
            break;
        }
        case RLX_U8: {
            uint8_t v;
            memcpy(&v, p, 1);
            x = v;
            break;
        }
        case RLX_BOOL: {
            uint8_t v;
            memcpy(&v, p, 1);
            x = v;
            break;
        }
        default: break;
        }
        t->d[i] = x;
    }
    return t;
}

/* ================================================================ compare */

void rt_default_tol(rlx_dtype dt, double *rtol, double *atol)
{
    double r = 0, a = 0;
    switch (dt) {
    case RLX_F32: r = a = 1e-5; break;
    case RLX_F16: r = a = 1e-3; break;
    case RLX_BF16: r = a = 1e-2; break;
    case RLX_F64: r = a = 1e-10; break;
    default: r = a = 0; break;
    }
    *rtol = r;
    *atol = a;
}

bool rt_check(const char *what, const rt_tensor *got, const rt_tensor *want, rlx_dtype dt)
{
    double rtol, atol;
    rt_default_tol(dt, &rtol, &atol);
    return rt_check_tol(what, got, want, rtol, atol);
}

static bool check(const char *what, const rt_tensor *got, const rt_tensor *want, double rtol, double atol, int scaled);

bool rt_check_tol(const char *what, const rt_tensor *got, const rt_tensor *want, double rtol, double atol)
{
    return check(what, got, want, rtol, atol, 1);
}

bool rt_check_abs(const char *what, const rt_tensor *got, const rt_tensor *want, double rtol, double atol)
{
    return check(what, got, want, rtol, atol, 0);
}

static bool check(const char *what, const rt_tensor *got, const rt_tensor *want, double rtol, double atol, int scaled)
{
    if (!got || !want) {
        fprintf(stderr, "[ref] %s: %s is missing (seed %" PRIu64 ")\n", what, got ? "reference" : "result", rt_seed());
        return false;
    }
    if (!rt_same_shape(got, want)) {
        fprintf(stderr, "[ref] %s: shape %s, expected %s (seed %" PRIu64 ")\n", what,
                rt_shape_str(got->ndim, got->dims), rt_shape_str(want->ndim, want->dims), rt_seed());
        return false;
    }
    double scale = 1.0;
    for (int64_t i = 0; scaled && i < want->n; i++)
        if (isfinite(want->d[i]) && fabs(want->d[i]) > scale)
            scale = fabs(want->d[i]);
    int64_t bad = 0, worst = -1;
    double worst_ratio = 0;
    for (int64_t i = 0; i < want->n; i++) {
        double g = got->d[i], w = want->d[i];
        double ratio;
        if (isnan(w) || isnan(g)) {
            ratio = (isnan(w) && isnan(g)) ? 0 : INFINITY;
        } else if (isinf(w) || isinf(g)) {
            ratio = g == w ? 0 : INFINITY;
        } else {
            double tol = atol * scale + rtol * fabs(w);
            double err = fabs(g - w);
            ratio = err == 0 ? 0 : (tol > 0 ? err / tol : INFINITY);
        }
        if (ratio > 1.0)
            bad++;
        if (ratio > worst_ratio || worst < 0) {
            worst_ratio = ratio;
            worst = i;
        }
    }
    if (bad == 0)
        return true;
    int64_t idx[RT_MAXD];
    rt_unravel(worst, want->ndim, want->dims, idx);
    fprintf(stderr,
            "[ref] %s: %" PRId64 " of %" PRId64 " elements differ (shape %s, rtol %g, atol %g x %g); worst at %s: "
            "got %.9g, want %.9g (seed %" PRIu64 ")\n",
            what, bad, want->n, rt_shape_str(want->ndim, want->dims), rtol, atol, scale, rt_shape_str(want->ndim, idx),
            got->d[worst], want->d[worst], rt_seed());
    return false;
}

/* ================================================================ harness */

rt_graph *rt_graph_new(void)
{
    rt_graph *rg = calloc(1, sizeof *rg);
    if (!rg)
        abort();
    rt_seed_init();
    rg->g = rlx_graph_new();
    rlx_options_init(&rg->opts);
    rg->opts.device = RLX_DEVICE_CPU;
    return rg;
}

void rt_graph_free(rt_graph *rg)
{
    if (!rg)
        return;
    rlx_graph_free(rg->g);
    free(rg);
}

static rlx_node bind_leaf(rt_graph *rg, rlx_dtype dt, rt_tensor *t, int kind)
{
    rt_quantize(t, dt);
    if (kind == 2) {
        size_t bytes;
        void *buf = rt_pack(t, dt, &bytes);
        rlx_node n = rlx_constant(rg->g, dt, t->ndim, t->dims, buf, bytes);
        free(buf);
        return n;
    }
    if (rg->n_bind >= RT_MAX_BIND)
        return -1;
    rt_bind *b = &rg->bind[rg->n_bind];
    snprintf(b->name, sizeof b->name, "%s%d", kind ? "p" : "in", rg->n_bind);
    b->dt = dt;
    b->kind = kind;
    b->t = t;
    rg->n_bind++;
    return kind ? rlx_param(rg->g, b->name, dt, t->ndim, t->dims) : rlx_input(rg->g, b->name, dt, t->ndim, t->dims);
}

rlx_node rt_input(rt_graph *rg, rlx_dtype dt, rt_tensor *t) { return bind_leaf(rg, dt, t, 0); }
rlx_node rt_param(rt_graph *rg, rlx_dtype dt, rt_tensor *t) { return bind_leaf(rg, dt, t, 1); }
rlx_node rt_const(rt_graph *rg, rlx_dtype dt, rt_tensor *t) { return bind_leaf(rg, dt, t, 2); }

static rlx_status fail(rt_graph *rg, rlx_status st, const char *where)
{
    fprintf(stderr, "[ref] %s failed: %s: %s\n", where, rlx_status_name(st), rlx_last_error());
    rg->status = st;
    return st;
}

rlx_status rt_run(rt_graph *rg, int nout, const rlx_node *outs, rt_tensor **res)
{
    rlx_status st;
    for (int i = 0; i < nout; i++)
        res[i] = NULL;
    for (int i = 0; i < nout; i++) {
        char name[32];
        snprintf(name, sizeof name, "out%d", i);
        if (outs[i] < 0)
            return fail(rg, rlx_graph_verify(rg->g) != RLX_OK ? rlx_graph_verify(rg->g) : RLX_ERR_INTERNAL,
                        "building the graph");
        if ((st = rlx_output(rg->g, name, outs[i])) != RLX_OK)
            return fail(rg, st, "rlx_output");
    }
    if ((st = rlx_graph_verify(rg->g)) != RLX_OK)
        return fail(rg, st, "rlx_graph_verify");
    rlx_session *s = NULL;
    if ((st = rlx_compile(rg->g, &rg->opts, &s)) != RLX_OK)
        return fail(rg, st, "rlx_compile");
    for (int i = 0; i < rg->n_bind; i++) {
        rt_bind *b = &rg->bind[i];
        size_t bytes;
        void *buf = rt_pack(b->t, b->dt, &bytes);
        st = b->kind ? rlx_session_set_param(s, b->name, buf, bytes) : rlx_session_set_input(s, b->name, buf, bytes);
        free(buf);
        if (st != RLX_OK) {
            rlx_session_free(s);
            return fail(rg, st, b->kind ? "rlx_session_set_param" : "rlx_session_set_input");
        }
    }
    if ((st = rlx_session_run(s)) != RLX_OK) {
        rlx_session_free(s);
        return fail(rg, st, "rlx_session_run");
    }
    for (int i = 0; i < nout; i++) {
        char name[32];
        snprintf(name, sizeof name, "out%d", i);
        rlx_tensor_info info;
        if ((st = rlx_session_find(s, 2, name, &info)) != RLX_OK)
            break;
        int nd = 0;
        int64_t dims[RLX_MAX_DIMS];
        if ((st = rlx_node_shape(rg->g, outs[i], &nd, dims)) != RLX_OK)
            break;
        if (info.ndim != nd || memcmp(info.dims, dims, sizeof(int64_t) * (size_t)nd) != 0 ||
            info.dtype != rlx_node_dtype(rg->g, outs[i])) {
            fprintf(stderr, "[ref] session output %s is %s %s, graph node is %s %s\n", name, rlx_dtype_name(info.dtype),
                    rt_shape_str(info.ndim, info.dims), rlx_dtype_name(rlx_node_dtype(rg->g, outs[i])),
                    rt_shape_str(nd, dims));
            st = RLX_ERR_INTERNAL;
            break;
        }
        size_t bytes = (size_t)rt_numel(nd, dims) * rlx_dtype_size(info.dtype);
        unsigned char *buf = calloc(bytes + 8, 1);
        if ((st = rlx_session_get_output(s, name, buf, bytes)) != RLX_OK) {
            free(buf);
            break;
        }
        res[i] = rt_unpack(info.dtype, nd, dims, buf);
        free(buf);
    }
    rlx_session_free(s);
    if (st != RLX_OK) {
        for (int i = 0; i < nout; i++) {
            rt_free(res[i]);
            res[i] = NULL;
        }
        return fail(rg, st, "reading outputs");
    }
    rg->status = RLX_OK;
    return RLX_OK;
}

rt_tensor *rt_run1(rt_graph *rg, rlx_node out)
{
    rt_tensor *r = NULL;
    if (rt_run(rg, 1, &out, &r) != RLX_OK)
        return NULL;
    return r;
}

/* ================================================================ scalars */

double rt_f_neg(double x) { return -x; }
double rt_f_abs(double x) { return fabs(x); }
double rt_f_exp(double x) { return exp(x); }
double rt_f_log(double x) { return log(x); }
double rt_f_sqrt(double x) { return sqrt(x); }
double rt_f_rsqrt(double x) { return 1.0 / sqrt(x); }
double rt_f_reciprocal(double x) { return 1.0 / x; }
double rt_f_tanh(double x) { return tanh(x); }
double rt_f_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
double rt_f_relu(double x) { return x > 0 ? x : 0.0; }
/* through erfc: 1 + erf(x / sqrt 2) loses its digits where GELU is tiny (x < -5) */
double rt_f_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
double rt_f_gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double rt_f_silu(double x) { return x / (1.0 + exp(-x)); }
double rt_f_erf(double x) { return erf(x); }
double rt_f_sin(double x) { return sin(x); }
double rt_f_cos(double x) { return cos(x); }
double rt_f_floor(double x) { return floor(x); }
double rt_f_ceil(double x) { return ceil(x); }
double rt_f_round(double x)
{
    double f = floor(x), d = x - f;
    if (d > 0.5)
        return f + 1;
    if (d < 0.5)
        return f;
    return fmod(f, 2.0) == 0 ? f : f + 1; /* tie: to even */
}
double rt_f_sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
double rt_f_not(double x) { return x != 0 ? 0.0 : 1.0; }

double rt_f_add(double a, double b) { return a + b; }
double rt_f_sub(double a, double b) { return a - b; }
double rt_f_mul(double a, double b) { return a * b; }
double rt_f_div(double a, double b) { return a / b; }
double rt_f_idiv(double a, double b) { return trunc(a / b); }
double rt_f_pow(double a, double b) { return pow(a, b); }
double rt_f_max(double a, double b) { return a > b ? a : b; }
double rt_f_min(double a, double b) { return a < b ? a : b; }
double rt_f_mod_py(double a, double b)
{
    double r = fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0)))
        r += b;
    return r;
}
double rt_f_mod_c(double a, double b) { return fmod(a, b); }
double rt_f_equal(double a, double b) { return a == b; }
double rt_f_less(double a, double b) { return a < b; }
double rt_f_greater(double a, double b) { return a > b; }
double rt_f_and(double a, double b) { return (a != 0) && (b != 0); }
double rt_f_or(double a, double b) { return (a != 0) || (b != 0); }
double rt_f_xor(double a, double b) { return (a != 0) != (b != 0); }

/* ================================================================ elementwise */

rt_tensor *rt_map(const rt_tensor *x, rt_fn1 f)
{
    rt_tensor *y = rt_new(x->ndim, x->dims);
    for (int64_t i = 0; i < x->n; i++)
        y->d[i] = f(x->d[i]);
    return y;
}

bool rt_bcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return false;
        out[i] = da == 1 ? db : da;
    }
    *nout = n;
    return true;
}

rt_tensor *rt_zip(const rt_tensor *a, const rt_tensor *b, rt_fn2 f)
{
    int n;
    int64_t dims[RT_MAXD], idx[RT_MAXD];
    if (!rt_bcast_shape(a->ndim, a->dims, b->ndim, b->dims, &n, dims))
        return NULL;
    rt_tensor *y = rt_new(n, dims);
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, n, dims, idx);
        y->d[i] = f(a->d[rt_bcast_off(a, n, idx)], b->d[rt_bcast_off(b, n, idx)]);
    }
    return y;
}

rt_tensor *rt_ref_where(const rt_tensor *c, const rt_tensor *a, const rt_tensor *b)
{
    int n1, n;
    int64_t d1[RT_MAXD], dims[RT_MAXD], idx[RT_MAXD];
    if (!rt_bcast_shape(c->ndim, c->dims, a->ndim, a->dims, &n1, d1) ||
        !rt_bcast_shape(n1, d1, b->ndim, b->dims, &n, dims))
        return NULL;
    rt_tensor *y = rt_new(n, dims);
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, n, dims, idx);
        y->d[i] = c->d[rt_bcast_off(c, n, idx)] != 0 ? a->d[rt_bcast_off(a, n, idx)] : b->d[rt_bcast_off(b, n, idx)];
    }
    return y;
}

rt_tensor *rt_ref_clip(const rt_tensor *x, double lo, double hi)
{
    rt_tensor *y = rt_clone(x);
    for (int64_t i = 0; i < y->n; i++) {
        if (y->d[i] < lo)
            y->d[i] = lo;
        if (y->d[i] > hi)
            y->d[i] = hi;
    }
    return y;
}

/* ================================================================ matmul */

rt_tensor *rt_ref_matmul(const rt_tensor *a, const rt_tensor *b, int trans_a, int trans_b)
{
    /* View both operands as [..., M, K] and [..., K, N]. */
    int64_t adims[RT_MAXD], bdims[RT_MAXD];
    int an = a->ndim, bn = b->ndim;
    int a_vec = an == 1, b_vec = bn == 1;
    if (an == 0 || bn == 0)
        return NULL;
    if (a_vec) {
        adims[0] = 1;
        adims[1] = a->dims[0];
        an = 2;
        trans_a = 0;
    } else {
        memcpy(adims, a->dims, sizeof(int64_t) * (size_t)an);
    }
    if (b_vec) {
        bdims[0] = b->dims[0];
        bdims[1] = 1;
        bn = 2;
        trans_b = 0;
    } else {
        memcpy(bdims, b->dims, sizeof(int64_t) * (size_t)bn);
    }
    int64_t M = trans_a ? adims[an - 1] : adims[an - 2];
    int64_t K = trans_a ? adims[an - 2] : adims[an - 1];
    int64_t Kb = trans_b ? bdims[bn - 1] : bdims[bn - 2];
    int64_t N = trans_b ? bdims[bn - 2] : bdims[bn - 1];
    if (K != Kb)
        return NULL;
    int nbatch;
    int64_t batch[RT_MAXD];
    if (!rt_bcast_shape(an - 2, adims, bn - 2, bdims, &nbatch, batch))
        return NULL;
    /* Full result [batch, M, N]; then drop vector dims. */
    int64_t full[RT_MAXD];
    memcpy(full, batch, sizeof(int64_t) * (size_t)nbatch);
    full[nbatch] = M;
    full[nbatch + 1] = N;
    rt_tensor *y = rt_new(nbatch + 2, full);
    /* Tensors describing a's and b's batch dims for broadcast offsets. */
    rt_tensor ab = {.ndim = an - 2}, bb = {.ndim = bn - 2};
    memcpy(ab.dims, adims, sizeof(int64_t) * (size_t)(an - 2));
    memcpy(bb.dims, bdims, sizeof(int64_t) * (size_t)(bn - 2));
    int64_t nb = rt_numel(nbatch, batch), idx[RT_MAXD];
    int64_t amat = adims[an - 2] * adims[an - 1], bmat = bdims[bn - 2] * bdims[bn - 1];
    int64_t acols = adims[an - 1], bcols = bdims[bn - 1];
    for (int64_t bi = 0; bi < nb; bi++) {
        rt_unravel(bi, nbatch, batch, idx);
        const double *A = a->d + rt_bcast_off(&ab, nbatch, idx) * amat;
        const double *B = b->d + rt_bcast_off(&bb, nbatch, idx) * bmat;
        double *Y = y->d + bi * M * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) {
                    double av = trans_a ? A[k * acols + m] : A[m * acols + k];
                    double bv = trans_b ? B[n * bcols + k] : B[k * bcols + n];
                    s += av * bv;
                }
                Y[m * N + n] = s;
            }
    }
    /* Drop the promoted dims. */
    int nd = 0;
    int64_t od[RT_MAXD];
    for (int i = 0; i < nbatch; i++)
        od[nd++] = batch[i];
    if (!a_vec)
        od[nd++] = M;
    if (!b_vec)
        od[nd++] = N;
    y->ndim = nd;
    memcpy(y->dims, od, sizeof(int64_t) * (size_t)nd);
    return y;
}

/* ================================================================ reductions */

static int norm_axis(int axis, int ndim) { return axis < 0 ? axis + ndim : axis; }

rt_tensor *rt_ref_reduce(const rt_tensor *x, rt_reduce kind, int naxes, const int *axes, int keepdims)
{
    int red[RT_MAXD] = {0};
    if (naxes == 0)
        for (int i = 0; i < x->ndim; i++)
            red[i] = 1;
    for (int i = 0; i < naxes; i++) {
        int a = norm_axis(axes[i], x->ndim);
        if (a < 0 || a >= x->ndim)
            return NULL;
        red[a] = 1;
    }
    int64_t kd[RT_MAXD], od[RT_MAXD];
    int on = 0;
    int64_t count = 1;
    for (int i = 0; i < x->ndim; i++) {
        kd[i] = red[i] ? 1 : x->dims[i];
        if (red[i])
            count *= x->dims[i];
        if (!red[i] || keepdims)
            od[on++] = kd[i];
    }
    rt_tensor *y = rt_new(on, od);
    double init = kind == RT_PROD ? 1.0 : kind == RT_MAX ? -INFINITY : kind == RT_MIN ? INFINITY : 0.0;
    for (int64_t i = 0; i < y->n; i++)
        y->d[i] = init;
    int64_t idx[RT_MAXD];
    for (int64_t i = 0; i < x->n; i++) {
        rt_unravel(i, x->ndim, x->dims, idx);
        for (int k = 0; k < x->ndim; k++)
            if (red[k])
                idx[k] = 0;
        int64_t o = rt_ravel(x->ndim, kd, idx);
        double v = x->d[i];
        switch (kind) {
        case RT_SUM:
        case RT_MEAN: y->d[o] += v; break;
        case RT_PROD: y->d[o] *= v; break;
        case RT_MAX:
            if (v > y->d[o])
                y->d[o] = v;
            break;
        case RT_MIN:
            if (v < y->d[o])
                y->d[o] = v;
            break;
        }
    }
    if (kind == RT_MEAN)
        for (int64_t i = 0; i < y->n; i++)
            y->d[i] /= (double)count;
    return y;
}

rt_tensor *rt_ref_arg(const rt_tensor *x, int axis, int keepdims, int is_max)
{
    int a = norm_axis(axis, x->ndim);
    if (a < 0 || a >= x->ndim)
        return NULL;
    int64_t od[RT_MAXD] = {0};
    int on = 0;
    int64_t outer = 1, inner = 1, len = x->dims[a];
    for (int i = 0; i < x->ndim; i++) {
        if (i < a)
            outer *= x->dims[i];
        if (i > a)
            inner *= x->dims[i];
        if (i != a)
            od[on++] = x->dims[i];
        else if (keepdims)
            od[on++] = 1;
    }
    rt_tensor *y = rt_new(on, od);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            int64_t best = 0;
            for (int64_t k = 1; k < len; k++) {
                double v = x->d[(o * len + k) * inner + in], b = x->d[(o * len + best) * inner + in];
                if (is_max ? v > b : v < b)
                    best = k;
            }
            y->d[o * inner + in] = (double)best;
        }
    return y;
}

rt_tensor *rt_ref_softmax(const rt_tensor *x, int axis, int log_)
{
    int a = norm_axis(axis, x->ndim);
    if (a < 0 || a >= x->ndim)
        return NULL;
    rt_tensor *y = rt_new(x->ndim, x->dims);
    int64_t outer = 1, inner = 1, len = x->dims[a];
    for (int i = 0; i < x->ndim; i++) {
        if (i < a)
            outer *= x->dims[i];
        if (i > a)
            inner *= x->dims[i];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < len; k++)
                m = fmax(m, x->d[(o * len + k) * inner + in]);
            for (int64_t k = 0; k < len; k++)
                s += exp(x->d[(o * len + k) * inner + in] - m);
            for (int64_t k = 0; k < len; k++) {
                int64_t i = (o * len + k) * inner + in;
                y->d[i] = log_ ? x->d[i] - m - log(s) : exp(x->d[i] - m) / s;
            }
        }
    return y;
}

rt_tensor *rt_ref_layer_norm(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta, double eps)
{
    rt_tensor *y = rt_new(x->ndim, x->dims);
    int64_t d = x->ndim ? x->dims[x->ndim - 1] : 1;
    int64_t rows = d ? x->n / d : 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x->d + r * d;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < d; i++)
            mean += xr[i];
        mean /= (double)d;
        for (int64_t i = 0; i < d; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        var /= (double)d;
        double inv = 1.0 / sqrt(var + eps);
        for (int64_t i = 0; i < d; i++) {
            double v = (xr[i] - mean) * inv;
            if (gamma)
                v *= gamma->d[i];
            if (beta)
                v += beta->d[i];
            y->d[r * d + i] = v;
        }
    }
    return y;
}

rt_tensor *rt_ref_rms_norm(const rt_tensor *x, const rt_tensor *gamma, double eps)
{
    rt_tensor *y = rt_new(x->ndim, x->dims);
    int64_t d = x->ndim ? x->dims[x->ndim - 1] : 1;
    int64_t rows = d ? x->n / d : 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x->d + r * d;
        double ms = 0;
        for (int64_t i = 0; i < d; i++)
            ms += xr[i] * xr[i];
        ms /= (double)d;
        double inv = 1.0 / sqrt(ms + eps);
        for (int64_t i = 0; i < d; i++)
            y->d[r * d + i] = xr[i] * inv * (gamma ? gamma->d[i] : 1.0);
    }
    return y;
}

rt_tensor *rt_ref_batch_norm(const rt_tensor *x, const rt_tensor *scale, const rt_tensor *bias, const rt_tensor *mean,
                             const rt_tensor *var, double eps)
{
    rt_tensor *y = rt_new(x->ndim, x->dims);
    int64_t C = x->dims[1], inner = 1;
    for (int i = 2; i < x->ndim; i++)
        inner *= x->dims[i];
    for (int64_t i = 0; i < x->n; i++) {
        int64_t c = (i / inner) % C;
        y->d[i] = (x->d[i] - mean->d[c]) / sqrt(var->d[c] + eps) * scale->d[c] + bias->d[c];
    }
    return y;
}

/* ================================================================ shape ops */

rt_tensor *rt_ref_reshape(const rt_tensor *x, int ndim, const int64_t *dims)
{
    int64_t od[RT_MAXD];
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        od[i] = dims[i];
        if (dims[i] == 0 && i < x->ndim)
            od[i] = x->dims[i];
        if (dims[i] == -1)
            infer = i;
        else
            known *= od[i];
    }
    if (infer >= 0)
        od[infer] = known ? x->n / known : 0;
    if (rt_numel(ndim, od) != x->n)
        return NULL;
    rt_tensor *y = rt_new(ndim, od);
    memcpy(y->d, x->d, sizeof(double) * (size_t)x->n);
    return y;
}

rt_tensor *rt_ref_transpose(const rt_tensor *x, const int *perm)
{
    int64_t od[RT_MAXD], oi[RT_MAXD], xi[RT_MAXD];
    for (int i = 0; i < x->ndim; i++)
        od[i] = x->dims[perm[i]];
    rt_tensor *y = rt_new(x->ndim, od);
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, y->ndim, od, oi);
        for (int k = 0; k < x->ndim; k++)
            xi[perm[k]] = oi[k];
        y->d[i] = x->d[rt_ravel(x->ndim, x->dims, xi)];
    }
    return y;
}

rt_tensor *rt_ref_slice(const rt_tensor *x, int naxes, const int *axes, const int64_t *starts, const int64_t *ends,
                        const int64_t *steps)
{
    int64_t st[RT_MAXD], sp[RT_MAXD], od[RT_MAXD];
    for (int i = 0; i < x->ndim; i++) {
        st[i] = 0;
        sp[i] = 1;
        od[i] = x->dims[i];
    }
    for (int k = 0; k < naxes; k++) {
        int a = norm_axis(axes[k], x->ndim);
        if (a < 0 || a >= x->ndim || steps[k] == 0)
            return NULL;
        int64_t d = x->dims[a], s = starts[k], e = ends[k], step = steps[k];
        if (s < 0)
            s += d;
        if (e < 0)
            e += d;
        int64_t cnt;
        if (step > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
            cnt = e > s ? (e - s - 1) / step + 1 : 0;
        } else {
            s = s < -1 ? -1 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            uint64_t mag = (uint64_t)0 - (uint64_t)step; /* |step|, also for INT64_MIN */
            cnt = s > e ? (int64_t)((uint64_t)(s - e - 1) / mag) + 1 : 0;
        }
        st[a] = s;
        sp[a] = step;
        od[a] = cnt;
    }
    rt_tensor *y = rt_new(x->ndim, od);
    int64_t oi[RT_MAXD], xi[RT_MAXD];
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, y->ndim, od, oi);
        for (int k = 0; k < x->ndim; k++)
            xi[k] = st[k] + oi[k] * sp[k];
        y->d[i] = x->d[rt_ravel(x->ndim, x->dims, xi)];
    }
    return y;
}

rt_tensor *rt_ref_concat(int n, const rt_tensor *const *xs, int axis)
{
    int nd = xs[0]->ndim, a = norm_axis(axis, nd);
    int64_t od[RT_MAXD];
    memcpy(od, xs[0]->dims, sizeof(int64_t) * (size_t)nd);
    od[a] = 0;
    for (int i = 0; i < n; i++)
        od[a] += xs[i]->dims[a];
    rt_tensor *y = rt_new(nd, od);
    int64_t oi[RT_MAXD];
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, nd, od, oi);
        int64_t k = oi[a];
        int j = 0;
        while (k >= xs[j]->dims[a]) {
            k -= xs[j]->dims[a];
            j++;
        }
        oi[a] = k;
        y->d[i] = xs[j]->d[rt_ravel(nd, xs[j]->dims, oi)];
    }
    return y;
}

void rt_ref_split(const rt_tensor *x, int axis, int n, const int64_t *sizes, rt_tensor **outs)
{
    int a = norm_axis(axis, x->ndim);
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        int ax[1] = {a};
        int64_t s[1] = {start}, e[1] = {start + sizes[i]}, st[1] = {1};
        outs[i] = rt_ref_slice(x, 1, ax, s, e, st);
        start += sizes[i];
    }
}

rt_tensor *rt_ref_gather(const rt_tensor *data, const rt_tensor *idx, int axis)
{
    int a = norm_axis(axis, data->ndim);
    int64_t od[RT_MAXD];
    int on = 0;
    for (int i = 0; i < a; i++)
        od[on++] = data->dims[i];
    for (int i = 0; i < idx->ndim; i++)
        od[on++] = idx->dims[i];
    for (int i = a + 1; i < data->ndim; i++)
        od[on++] = data->dims[i];
    rt_tensor *y = rt_new(on, od);
    int64_t oi[RT_MAXD], di[RT_MAXD], ii[RT_MAXD];
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, on, od, oi);
        for (int k = 0; k < idx->ndim; k++)
            ii[k] = oi[a + k];
        int64_t j = (int64_t)idx->d[rt_ravel(idx->ndim, idx->dims, ii)];
        if (j < 0)
            j += data->dims[a];
        for (int k = 0; k < a; k++)
            di[k] = oi[k];
        di[a] = j;
        for (int k = a + 1; k < data->ndim; k++)
            di[k] = oi[k - 1 + idx->ndim];
        y->d[i] = data->d[rt_ravel(data->ndim, data->dims, di)];
    }
    return y;
}

rt_tensor *rt_ref_expand(const rt_tensor *x, int ndim, const int64_t *dims)
{
    int n;
    int64_t od[RT_MAXD], oi[RT_MAXD];
    if (!rt_bcast_shape(x->ndim, x->dims, ndim, dims, &n, od))
        return NULL;
    rt_tensor *y = rt_new(n, od);
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, n, od, oi);
        y->d[i] = x->d[rt_bcast_off(x, n, oi)];
    }
    return y;
}

rt_tensor *rt_ref_pad(const rt_tensor *x, const int64_t *pads, rlx_pad_mode mode, double value)
{
    int nd = x->ndim;
    int64_t od[RT_MAXD], oi[RT_MAXD], xi[RT_MAXD];
    for (int i = 0; i < nd; i++)
        od[i] = x->dims[i] + pads[i] + pads[nd + i];
    rt_tensor *y = rt_new(nd, od);
    for (int64_t i = 0; i < y->n; i++) {
        rt_unravel(i, nd, od, oi);
        int outside = 0;
        for (int k = 0; k < nd; k++) {
            int64_t d = x->dims[k], j = oi[k] - pads[k];
            if (j < 0 || j >= d) {
                outside = 1;
                if (mode == RLX_PAD_EDGE) {
                    j = j < 0 ? 0 : d - 1;
                } else if (mode == RLX_PAD_REFLECT) {
                    if (d == 1)
                        j = 0;
                    while (j < 0 || j >= d) {
                        if (j < 0)
                            j = -j;
                        if (j >= d)
                            j = 2 * (d - 1) - j;
                    }
                }
            }
            xi[k] = j;
        }
        y->d[i] = (outside && mode == RLX_PAD_CONSTANT) ? value : x->d[rt_ravel(nd, x->dims, xi)];
    }
    return y;
}

/* ================================================================ transformer */

rt_tensor *rt_ref_rope(const rt_tensor *x, double theta, int64_t offset, int interleaved)
{
    rt_tensor *y = rt_clone(x);
    int nd = x->ndim;
    int64_t S = x->dims[nd - 2], D = x->dims[nd - 1], half = D / 2;
    int64_t rows = (S * D != 0) ? x->n / (S * D) : 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t s = 0; s < S; s++) {
            const double *xr = x->d + (r * S + s) * D;
            double *yr = y->d + (r * S + s) * D;
            double pos = (double)(offset + s);
            for (int64_t i = 0; i < half; i++) {
                double freq = pow(theta, -2.0 * (double)i / (double)D);
                double c = cos(pos * freq), sn = sin(pos * freq);
                int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
                double x1 = xr[i1], x2 = xr[i2];
                yr[i1] = x1 * c - x2 * sn;
                yr[i2] = x2 * c + x1 * sn;
            }
        }
    return y;
}

rt_tensor *rt_ref_attention(const rt_tensor *q, const rt_tensor *k, const rt_tensor *v, const rt_tensor *mask,
                            int mask_is_bool, int causal, double scale)
{
    int64_t B = q->dims[0], H = q->dims[1], S = q->dims[2], D = q->dims[3];
    int64_t Hkv = k->dims[1], T = k->dims[2], Dv = v->dims[3];
    if (scale <= 0)
        scale = 1.0 / sqrt((double)D);
    int64_t group = H / Hkv;
    rt_tensor *y = rt_new(4, (int64_t[]){B, H, S, Dv});
    double *sc = calloc((size_t)T + 1, sizeof(double));
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            int64_t hk = h / group;
            for (int64_t s = 0; s < S; s++) {
                const double *qr = q->d + ((b * H + h) * S + s) * D;
                double m = -INFINITY;
                for (int64_t t = 0; t < T; t++) {
                    const double *kr = k->d + ((b * Hkv + hk) * T + t) * D;
                    double dot = 0;
                    for (int64_t i = 0; i < D; i++)
                        dot += qr[i] * kr[i];
                    double val = dot * scale;
                    if (mask) {
                        int64_t mi[4] = {b, h, s, t};
                        double mv = mask->d[rt_bcast_off(mask, 4, mi)];
                        if (mask_is_bool)
                            val = mv != 0 ? val : -INFINITY;
                        else
                            val += mv;
                    }
                    if (causal && t > s + (T - S))
                        val = -INFINITY;
                    sc[t] = val;
                    m = fmax(m, val);
                }
                double sum = 0;
                for (int64_t t = 0; t < T; t++) {
                    sc[t] = exp(sc[t] - m);
                    sum += sc[t];
                }
                double *yr = y->d + ((b * H + h) * S + s) * Dv;
                for (int64_t j = 0; j < Dv; j++) {
                    double acc = 0;
                    for (int64_t t = 0; t < T; t++)
                        acc += sc[t] * v->d[((b * Hkv + hk) * T + t) * Dv + j];
                    yr[j] = acc / sum;
                }
            }
        }
    free(sc);
    return y;
}

/* ================================================================ conv / pool */

/* Spatial geometry normalised to two dims (1-d uses a height of 1). */
typedef struct geom {
    int sp;
    int64_t in[2], k[2], st[2], dil[2], pb[2], pe[2], out[2];
} geom;

static void geom_init(geom *g, const rt_tensor *x, int sp, const int64_t *k, const int64_t *st, const int64_t *dil,
                      const int64_t *pads)
{
    g->sp = sp;
    for (int i = 0; i < 2; i++) {
        g->in[i] = 1;
        g->k[i] = 1;
        g->st[i] = 1;
        g->dil[i] = 1;
        g->pb[i] = g->pe[i] = 0;
    }
    for (int i = 0; i < sp; i++) {
        int j = 2 - sp + i;
        g->in[j] = x->dims[2 + i];
        g->k[j] = k[i];
        g->st[j] = st[i];
        g->dil[j] = dil[i];
        g->pb[j] = pads[i];
        g->pe[j] = pads[sp + i];
    }
}

static void out_dims(const rt_tensor *x, int64_t c, const geom *g, int64_t *od)
{
    od[0] = x->dims[0];
    od[1] = c;
    for (int i = 0; i < g->sp; i++)
        od[2 + i] = g->out[2 - g->sp + i];
}

rt_tensor *rt_ref_conv(const rt_tensor *x, const rt_tensor *w, const rt_tensor *bias, const rlx_conv_params *p)
{
    int sp = x->ndim - 2;
    geom g;
    geom_init(&g, x, sp, w->dims + 2, p->stride, p->dilation, p->pads);
    for (int i = 0; i < 2; i++)
        g.out[i] = (g.in[i] + g.pb[i] + g.pe[i] - g.dil[i] * (g.k[i] - 1) - 1) / g.st[i] + 1;
    int64_t N = x->dims[0], C = x->dims[1], O = w->dims[0], G = p->groups, cg = C / G, og = O / G;
    int64_t od[RT_MAXD];
    out_dims(x, O, &g, od);
    rt_tensor *y = rt_new(x->ndim, od);
    int64_t IH = g.in[0], IW = g.in[1], KH = g.k[0], KW = g.k[1], OH = g.out[0], OW = g.out[1];
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++) {
            int64_t grp = o / og;
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = bias ? bias->d[o] : 0.0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * g.st[0] - g.pb[0] + kh * g.dil[0];
                                int64_t iw = ow * g.st[1] - g.pb[1] + kw * g.dil[1];
                                if (ih < 0 || ih >= IH || iw < 0 || iw >= IW)
                                    continue;
                                double xv = x->d[((n * C + grp * cg + c) * IH + ih) * IW + iw];
                                double wv = w->d[((o * cg + c) * KH + kh) * KW + kw];
                                acc += xv * wv;
                            }
                    y->d[((n * O + o) * OH + oh) * OW + ow] = acc;
                }
        }
    return y;
}

rt_tensor *rt_ref_pool(const rt_tensor *x, const rlx_pool_params *p, int is_max)
{
    int sp = x->ndim - 2;
    geom g;
    geom_init(&g, x, sp, p->kernel, p->stride, p->dilation, p->pads);
    for (int i = 0; i < 2; i++) {
        int64_t span = g.in[i] + g.pb[i] + g.pe[i] - g.dil[i] * (g.k[i] - 1) - 1;
        int64_t o = p->ceil_mode ? (span + g.st[i] - 1) / g.st[i] + 1 : span / g.st[i] + 1;
        /* A window must start inside the input or its begin padding. */
        if (p->ceil_mode && (o - 1) * g.st[i] >= g.in[i] + g.pb[i])
            o--;
        g.out[i] = o;
    }
    int64_t N = x->dims[0], C = x->dims[1];
    int64_t od[RT_MAXD];
    out_dims(x, C, &g, od);
    rt_tensor *y = rt_new(x->ndim, od);
    int64_t IH = g.in[0], IW = g.in[1], OH = g.out[0], OW = g.out[1];
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double m = -INFINITY, s = 0;
                int64_t inside = 0, padded = 0;
                for (int64_t kh = 0; kh < g.k[0]; kh++)
                    for (int64_t kw = 0; kw < g.k[1]; kw++) {
                        int64_t ih = oh * g.st[0] - g.pb[0] + kh * g.dil[0];
                        int64_t iw = ow * g.st[1] - g.pb[1] + kw * g.dil[1];
                        /* taps inside the padded input count with count_include_pad */
                        if (ih >= -g.pb[0] && ih < IH + g.pe[0] && iw >= -g.pb[1] && iw < IW + g.pe[1])
                            padded++;
                        if (ih < 0 || ih >= IH || iw < 0 || iw >= IW)
                            continue;
                        double v = x->d[(nc * IH + ih) * IW + iw];
                        inside++;
                        s += v;
                        if (v > m || isnan(v)) /* a NaN tap makes the max NaN, as the kernels do */
                            m = v;
                    }
                double r;
                if (is_max)
                    r = m;
                else
                    r = s / (double)(p->count_include_pad ? padded : inside);
                y->d[(nc * OH + oh) * OW + ow] = r;
            }
    return y;
}

rt_tensor *rt_ref_global_avg_pool(const rt_tensor *x)
{
    int64_t od[RT_MAXD];
    od[0] = x->dims[0];
    od[1] = x->dims[1];
    int64_t sp = 1;
    for (int i = 2; i < x->ndim; i++) {
        od[i] = 1;
        sp *= x->dims[i];
    }
    rt_tensor *y = rt_new(x->ndim, od);
    for (int64_t nc = 0; nc < x->dims[0] * x->dims[1]; nc++) {
        double s = 0;
        for (int64_t i = 0; i < sp; i++)
            s += x->d[nc * sp + i];
        y->d[nc] = s / (double)sp;
    }
    return y;
}
