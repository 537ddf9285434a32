/* cuda_quant.c - the quantized ops on CUDA against the CPU reference and
 * float64.
 *
 *   dequantize  every type into f32, f16 and bf16, on rows of random bytes
 *               (so scales take every value: subnormal, +-0, +-inf, NaN)
 *               and on rows quantized from random floats: the GPU's output
 *               equals the CPU's bit for bit (any NaN matching any NaN).
 *   qmatmul     every type, activations in f32, f16 and bf16, row counts on
 *               every path (<= 8: the few-row kernel; more: tensor-core
 *               tiles or the library's GEMM), depths of whole and odd
 *               64-element windows: both backends against a float64 product
 *               of the dequantized weights, each within its own bound
 *               relative to sum |x| |w| (the CPU rounds the activations to 8
 *               bits per block of up to 256; the GPU rounds 16-bit ones to 8
 *               bits per 32 for a few rows and the weights to their dtype
 *               past 8 rows, and f32 ones only sums in f32), and the two
 *               within the sum of their bounds.
 *   qprojection the decode step's fused products on a quantized weight
 *               (RMS norm before, gated unit or residual add after), every
 *               type and dtype, against float64 on both backends, and the
 *               fusion itself (one node on CUDA for up to 8 rows).
 *
 * Prints one line per failure and per qmatmul type (the worst errors
 * seen), "N passed, M failed" last; exits 0 when all passed, 77 when no
 * CUDA device is usable.  RLX_GPU_TEST_FILTER=substr runs only matching
 * cases; RLX_GPU_TEST_CPU_ONLY=1 runs both sides on the CPU (the harness
 * checked on a machine without a GPU; the CPU's bound then serves both).
 * tests/gpu/run_all.sh runs it. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/ggml_type.h"
#include "ir/ir.h" /* rlx_glu, rlx_qmatmul: what the decoder builder writes */
#include "quant/quant.h"
#include "rlx.h"

static int n_pass, n_fail;
static bool cpu_only;

static uint64_t rng_state = 0x2545f4914f6cdd1dULL;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double uniform(void) { return (double)(rng() >> 11) / 9007199254740992.0; }
static double normal(void)
{
    double u = uniform() + 1e-12, v = uniform();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static bool wanted(const char *name)
{
    const char *f = getenv("RLX_GPU_TEST_FILTER");
    return !f || strstr(name, f);
}

static const int TYPES[] = {RLX_GGML_Q8_0, RLX_GGML_Q4_0, RLX_GGML_Q4_1, RLX_GGML_Q5_0, RLX_GGML_Q5_1,
                            RLX_GGML_Q4_K, RLX_GGML_Q5_K, RLX_GGML_Q6_K, RLX_GGML_Q8_K};
static const rlx_dtype FLOATS[] = {RLX_F32, RLX_F16, RLX_BF16};
static const char *dn(rlx_dtype t) { return t == RLX_F32 ? "f32" : t == RLX_F16 ? "f16" : "bf16"; }

static double load(const void *p, rlx_dtype t, size_t i)
{
    switch (t) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    default: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    }
}

static void store(void *p, rlx_dtype t, size_t i, float v)
{
    switch (t) {
    case RLX_F32: ((float *)p)[i] = v; break;
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16(v); break;
    default: ((uint16_t *)p)[i] = rlx_f32_to_bf16(v); break;
    }
}

/* Compiles g for dev, sets the inputs named in[0..n) and runs; the one
 * output into out (bytes). */
static int fused_nodes; /* the last run's node count after fusion */

static rlx_status run_on(rlx_graph *g, rlx_device dev, int n, const char **names, const void **data,
                         const size_t *bytes, void *out, size_t out_bytes, char *err, size_t errn)
{
    rlx_options o;
    rlx_options_init(&o);
    o.device = cpu_only ? RLX_DEVICE_CPU : dev;
    o.ignore_env = 1;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    for (int i = 0; st == RLX_OK && i < n; i++)
        st = rlx_session_set_input(s, names[i], data[i], bytes[i]);
    rlx_compile_stats cs;
    if (st == RLX_OK && rlx_session_stats(s, &cs) == RLX_OK)
        fused_nodes = cs.nodes_after_fusion;
    if (st == RLX_OK)
        st = rlx_session_run(s);
    if (st == RLX_OK) {
        memset(out, 0xff, out_bytes); /* poison: every element must be written */
        st = rlx_session_get_output(s, "y", out, out_bytes);
    }
    if (st != RLX_OK)
        snprintf(err, errn, "%s: %s", dev == RLX_DEVICE_CUDA ? "cuda" : "cpu", rlx_last_error());
    rlx_session_free(s);
    return st;
}

/* ------------------------------------------------------------ dequantize */

static void dequantize_case(int qt, rlx_dtype to, bool random_bytes)
{
    char name[128];
    snprintf(name, sizeof name, "dequantize %s to %s, %s", rlx_ggml_type_name(qt), dn(to),
             random_bytes ? "random bytes" : "quantized floats");
    if (!wanted(name))
        return;
    const int64_t rows = 37, k = 512;
    const size_t rb = rlx_quant_row_bytes(qt, k);
    uint8_t *w = malloc(rows * rb);
    float *src = malloc(sizeof(float) * k);
    for (int64_t r = 0; r < rows; r++) {
        if (random_bytes) {
            for (size_t i = 0; i < rb; i++)
                w[r * rb + i] = (uint8_t)rng();
        } else {
            for (int64_t i = 0; i < k; i++)
                src[i] = (float)(normal() * (r % 5 == 0 ? 1e-3 : 1.0));
            rlx_quantize_row(qt, src, w + r * rb, k);
        }
    }
    size_t ob = (size_t)(rows * k) * rlx_dtype_size(to);
    void *a = malloc(ob), *b = malloc(ob);
    rlx_graph *g = rlx_graph_new();
    rlx_node wn = rlx_input(g, "w", RLX_U8, 2, (int64_t[]){rows, (int64_t)rb});
    rlx_output(g, "y", rlx_dequantize(g, wn, qt, k, to));
    const char *names[] = {"w"};
    const void *data[] = {w};
    const size_t bytes[] = {rows * rb};
    char err[512] = "";
    if (run_on(g, RLX_DEVICE_CUDA, 1, names, data, bytes, a, ob, err, sizeof err) != RLX_OK ||
        run_on(g, RLX_DEVICE_CPU, 1, names, data, bytes, b, ob, err, sizeof err) != RLX_OK) {
        printf("FAIL %s: %s\n", name, err);
        n_fail++;
    } else {
        size_t es = rlx_dtype_size(to), bad = 0, first = 0;
        for (int64_t i = 0; i < rows * k; i++) {
            double x = load(a, to, i), y = load(b, to, i);
            if (isnan(x) && isnan(y))
                continue;
            if (memcmp((char *)a + i * es, (char *)b + i * es, es)) {
                if (!bad)
                    first = (size_t)i;
                bad++;
            }
        }
        if (bad) {
            printf("FAIL %s: %zu elements differ from the CPU's bits, first at %zu (%.9g vs %.9g)\n", name, bad, first,
                   load(a, to, first), load(b, to, first));
            n_fail++;
        } else {
            n_pass++;
        }
    }
    rlx_graph_free(g);
    free(w), free(src), free(a), free(b);
}

/* --------------------------------------------------------------- qmatmul */

/* unit roundoff of a dtype */
static double unit(rlx_dtype t) { return t == RLX_F32 ? 0x1p-24 : t == RLX_F16 ? 0x1p-11 : 0x1p-8; }

/* rows x k weights of normal * 0.05 quantized to qt (rows of rb bytes)
 * into w and read back into wf; src is a row's scratch. */
static void random_weights(int qt, int64_t rows, int64_t k, size_t rb, float *src, uint8_t *w, float *wf)
{
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t e = 0; e < k; e++)
            src[e] = (float)(normal() * 0.05);
        rlx_quantize_row(qt, src, w + r * rb, k);
        rlx_dequantize_row(qt, w + r * rb, wf + r * k, k);
    }
}

/* The error of rounding x to 8 bits per block of `block` elements in
 * x . w: each element within max |block| / 254. */
static double act_bound(const double *x, const float *w, int64_t k, int64_t block)
{
    double b = 0;
    for (int64_t b0 = 0; b0 < k; b0 += block) {
        double mx = 0, sw = 0;
        for (int64_t e = b0; e < b0 + block && e < k; e++) {
            mx = fmax(mx, fabs(x[e]));
            sw += fabs(w[e]);
        }
        b += mx / 254.0 * sw;
    }
    return b;
}

typedef struct worst {
    double gpu, cpu; /* max |error| / sum |x w| over a type's cases */
} worst;

static void qmatmul_case(int qt, rlx_dtype dt, int64_t m, int64_t k, int64_t n, worst *wst)
{
    char name[160];
    snprintf(name, sizeof name, "qmatmul %s x %s m%lld k%lld n%lld", rlx_ggml_type_name(qt), dn(dt), (long long)m,
             (long long)k, (long long)n);
    if (!wanted(name))
        return;
    const size_t rb = rlx_quant_row_bytes(qt, k), es = rlx_dtype_size(dt);
    uint8_t *w = malloc(n * rb);
    float *wf = malloc(sizeof(float) * n * k), *src = malloc(sizeof(float) * k);
    void *x = malloc(m * k * es), *yg = malloc(m * n * es), *yc = malloc(m * n * es);
    double *xd = malloc(sizeof(double) * m * k);
    random_weights(qt, n, k, rb, src, w, wf);
    for (int64_t i = 0; i < m * k; i++) {
        store(x, dt, i, (float)(2.0 * uniform() - 1.0));
        xd[i] = load(x, dt, i);
    }
    rlx_graph *g = rlx_graph_new();
    rlx_node xn = rlx_input(g, "x", dt, 2, (int64_t[]){m, k});
    rlx_node wn = rlx_input(g, "w", RLX_U8, 2, (int64_t[]){n, (int64_t)rb});
    rlx_output(g, "y", rlx_qmatmul(g, xn, wn, qt, k));
    const char *names[] = {"x", "w"};
    const void *data[] = {x, w};
    const size_t bytes[] = {m * k * es, n * rb};
    char err[512] = "";
    if (run_on(g, RLX_DEVICE_CUDA, 2, names, data, bytes, yg, m * n * es, err, sizeof err) != RLX_OK ||
        run_on(g, RLX_DEVICE_CPU, 2, names, data, bytes, yc, m * n * es, err, sizeof err) != RLX_OK) {
        printf("FAIL %s: %s\n", name, err);
        n_fail++;
        goto done;
    }
    /* the GPU: 16-bit activations of a few rows rounded to 8 bits per 32,
     * f32 ones exact, f32 sums of exact weights; 16-bit activations past 8
     * rows meet weights rounded to their dtype (tiles, or the dequantized
     * copy the library multiplies) */
    const bool gpu_i8 = m <= 8 && dt != RLX_F32;
    const double gpu_rel = m <= 8 || dt == RLX_F32 ? 1e-5 : unit(dt) + 1e-5;
    bool ok = true;
    for (int64_t i = 0; i < m && ok; i++)
        for (int64_t j = 0; j < n; j++) {
            double ref = 0, S = 0;
            for (int64_t e = 0; e < k; e++) {
                ref += xd[i * k + e] * wf[j * k + e];
                S += fabs(xd[i * k + e] * wf[j * k + e]);
            }
            const double out_round = unit(dt) * fabs(ref) * 1.01;
            /* the CPU rounds activations to 8 bits per block of at most 256 */
            const double cpu_bound = act_bound(xd + i * k, wf + j * k, k, 256) + 1e-5 * S + out_round;
            const double gpu_bound = cpu_only ? cpu_bound
                                     : gpu_i8 ? act_bound(xd + i * k, wf + j * k, k, 32) + 1e-5 * S + out_round
                                              : gpu_rel * S + out_round;
            const double g = load(yg, dt, i * n + j), c = load(yc, dt, i * n + j);
            const double eg = fabs(g - ref), ec = fabs(c - ref);
            if (S > 0) {
                wst->gpu = fmax(wst->gpu, eg / S);
                wst->cpu = fmax(wst->cpu, ec / S);
            }
            if (!(eg <= gpu_bound)) {
                printf("FAIL %s [%lld, %lld]: cuda %.6g, float64 %.6g, off by %.3g, bound %.3g\n", name, (long long)i,
                       (long long)j, g, ref, eg, gpu_bound);
                ok = false;
                break;
            }
            if (!(ec <= cpu_bound)) {
                printf("FAIL %s [%lld, %lld]: cpu %.6g, float64 %.6g, off by %.3g, bound %.3g\n", name, (long long)i,
                       (long long)j, c, ref, ec, cpu_bound);
                ok = false;
                break;
            }
            if (!(fabs(g - c) <= gpu_bound + cpu_bound)) {
                printf("FAIL %s [%lld, %lld]: cuda %.6g against cpu %.6g\n", name, (long long)i, (long long)j, g, c);
                ok = false;
                break;
            }
        }
    if (ok)
        n_pass++;
    else
        n_fail++;
done:
    rlx_graph_free(g);
    free(w), free(wf), free(src), free(x), free(yg), free(yc), free(xd);
}

/* ------------------------------------------------------------ projection */

static double silu(double v) { return v / (1.0 + exp(-v)); }

/* A decode step's products as the decoder builder writes them, a weight
 * quantized in qt: form 0 rms_norm -> qmatmul -> silu glu (gate rows, then
 * up rows), 1 rms_norm -> qmatmul -> + r, 2 qmatmul -> silu glu.  CUDA
 * fuses each into one projection for up to 8 rows (9 keep their parts);
 * both backends against float64 on the same dequantized weights, each
 * within its bound: the normalised rows rounded to the dtype, the
 * activations to 8 bits per block (CPU: up to 256; CUDA, 16-bit: 32), f32
 * sums, then the gated unit's or the residual add's roundings. */
static void qproj_case(int qt, rlx_dtype dt, int form, int64_t m, int64_t k, int64_t n)
{
    static const char *forms[] = {"rms_norm + silu glu", "rms_norm + residual", "silu glu"};
    char name[200];
    snprintf(name, sizeof name, "qprojection %s %s x %s m%lld k%lld n%lld", forms[form], rlx_ggml_type_name(qt), dn(dt),
             (long long)m, (long long)k, (long long)n);
    if (!wanted(name))
        return;
    const bool rms = form <= 1, glu = form != 1;
    const int64_t rows = glu ? 2 * n : n;
    const size_t rb = rlx_quant_row_bytes(qt, k), es = rlx_dtype_size(dt);
    uint8_t *w = malloc(rows * rb);
    float *wf = malloc(sizeof(float) * rows * k), *src = malloc(sizeof(float) * k);
    void *x = malloc(m * k * es), *gm = malloc(k * es), *r = malloc(m * n * es), *yg = malloc(m * n * es),
         *yc = malloc(m * n * es);
    double *h = malloc(sizeof(double) * m * k);
    random_weights(qt, rows, k, rb, src, w, wf);
    for (int64_t e = 0; e < m * k; e++)
        store(x, dt, e, (float)(2.0 * uniform() - 1.0));
    for (int64_t e = 0; e < k; e++)
        store(gm, dt, e, (float)(0.5 + uniform()));
    for (int64_t e = 0; e < m * n; e++)
        store(r, dt, e, (float)(2.0 * uniform() - 1.0));
    /* the rows the product takes, as stored in dt */
    for (int64_t i = 0; i < m; i++) {
        double ss = 0;
        for (int64_t e = 0; e < k; e++)
            ss += load(x, dt, i * k + e) * load(x, dt, i * k + e);
        const double inv = 1.0 / sqrt(ss / (double)k + 1e-6);
        for (int64_t e = 0; e < k; e++) {
            const double v = load(x, dt, i * k + e);
            if (!rms) {
                h[i * k + e] = v;
                continue;
            }
            float one; /* room for any of the dtypes */
            store(&one, dt, 0, (float)(v * inv * load(gm, dt, e)));
            h[i * k + e] = load(&one, dt, 0);
        }
    }
    rlx_graph *g = rlx_graph_new();
    rlx_node xn = rlx_input(g, "x", dt, 3, (int64_t[]){m, 1, k});
    rlx_node wn = rlx_input(g, "w", RLX_U8, 2, (int64_t[]){rows, (int64_t)rb});
    if (rms)
        xn = rlx_rms_norm(g, xn, rlx_input(g, "g", dt, 1, (int64_t[]){k}), 1e-6);
    rlx_node y = rlx_qmatmul(g, xn, wn, qt, k);
    y = glu ? rlx_glu(g, y, RLX_ACT_SILU) : rlx_add(g, y, rlx_input(g, "r", dt, 3, (int64_t[]){m, 1, n}));
    rlx_output(g, "y", y);
    const int leaves = 2 + rms + !glu, unfused = g->n_nodes;
    const char *names[] = {"x", "w", "g", "r"};
    const void *data[] = {x, w, gm, r};
    const size_t bytes[] = {m * k * es, rows * rb, k * es, m * n * es};
    /* inputs in the order of names, those the form has */
    const char *nm[4];
    const void *dp[4];
    size_t bs[4];
    int ni = 0;
    for (int q = 0; q < 4; q++)
        if (q < 2 || (q == 2 && rms) || (q == 3 && !glu)) {
            nm[ni] = names[q];
            dp[ni] = data[q];
            bs[ni++] = bytes[q];
        }
    char err[512] = "";
    bool ok = true;
    if (run_on(g, RLX_DEVICE_CUDA, ni, nm, dp, bs, yg, m * n * es, err, sizeof err) != RLX_OK) {
        printf("FAIL %s: %s\n", name, err);
        ok = false;
    } else if (!cpu_only && fused_nodes != (m <= 8 ? leaves + 1 : unfused)) {
        printf("FAIL %s: %d nodes after fusion on CUDA, expected %d\n", name, fused_nodes,
               m <= 8 ? leaves + 1 : unfused);
        ok = false;
    } else if (run_on(g, RLX_DEVICE_CPU, ni, nm, dp, bs, yc, m * n * es, err, sizeof err) != RLX_OK) {
        printf("FAIL %s: %s\n", name, err);
        ok = false;
    }
    const double u = unit(dt);
    const int64_t gpu_block = cpu_only ? 256 : dt == RLX_F32 ? 0 : m <= 8 ? 32 : 0;
    for (int64_t i = 0; i < m && ok; i++)
        for (int64_t j = 0; j < n && ok; j++) {
            /* product c's value and bounds (rows rounded to dt, the
             * activations' 8 bits, f32 sums) */
            double p[2], eg[2], ec[2];
            for (int c = 0; c < 1 + glu; c++) {
                const float *wr = wf + (j + c * n) * k;
                double v = 0, S = 0;
                for (int64_t e = 0; e < k; e++) {
                    v += h[i * k + e] * wr[e];
                    S += fabs(h[i * k + e] * wr[e]);
                }
                const double base = (rms ? u : 0.0) * S + 1e-5 * S + u * fabs(v);
                p[c] = v;
                ec[c] = base + act_bound(h + i * k, wr, k, 256);
                /* past 8 rows (16-bit) the tiles round the weights to dt */
                const double tiles = !cpu_only && m > 8 && dt != RLX_F32 ? u * S : 0.0;
                eg[c] = base + tiles + (gpu_block ? act_bound(h + i * k, wr, k, gpu_block) : 0.0);
            }
            double ref, bg, bc;
            if (glu) {
                const double a = silu(p[0]), b = p[1];
                ref = a * b;
                bg = 1.1 * eg[0] * (fabs(b) + eg[1]) + fabs(a) * eg[1] +
                     2 * u * (1.1 * (fabs(p[0]) + eg[0]) + fabs(a)) * (fabs(b) + eg[1]) + 2 * u * fabs(ref);
                bc = 1.1 * ec[0] * (fabs(b) + ec[1]) + fabs(a) * ec[1] +
                     2 * u * (1.1 * (fabs(p[0]) + ec[0]) + fabs(a)) * (fabs(b) + ec[1]) + 2 * u * fabs(ref);
            } else {
                ref = p[0] + load(r, dt, i * n + j);
                bg = eg[0] + u * (fabs(p[0]) + eg[0]) + 2 * u * fabs(ref);
                bc = ec[0] + u * (fabs(p[0]) + ec[0]) + 2 * u * fabs(ref);
            }
            const double gv = load(yg, dt, i * n + j), cv = load(yc, dt, i * n + j);
            if (!(fabs(gv - ref) <= bg) || !(fabs(cv - ref) <= bc)) {
                printf("FAIL %s [%lld, %lld]: cuda %.6g (bound %.3g), cpu %.6g (bound %.3g), float64 %.6g\n", name,
                       (long long)i, (long long)j, gv, bg, cv, bc, ref);
                ok = false;
            }
        }
    if (ok)
        n_pass++;
    else
        n_fail++;
    rlx_graph_free(g);
    free(w), free(wf), free(src), free(x), free(gm), free(r), free(yg), free(yc), free(h);
}

int main(void)
{
    cpu_only = getenv("RLX_GPU_TEST_CPU_ONLY") != NULL;
    if (!cpu_only && rlx_device_count(RLX_DEVICE_CUDA) < 1) {
        printf("0 passed, 0 failed (skipped: no CUDA device usable%s%s)\n", *rlx_last_error() ? ": " : "",
               rlx_last_error());
        return 77;
    }
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
        for (int d = 0; d < 3; d++)
            for (int rb = 0; rb < 2; rb++)
                dequantize_case(TYPES[t], FLOATS[d], rb);
    /* rows: 1, 2, 5 (launches of 4 and 1) and 8 on the few-row kernel;
     * 9, 13 and 64 on the tiles (16-bit) or the few-row kernel in groups
     * of up to 8 (f32); 70 and 100 dequantized whole for the library's
     * GEMM.  Depth 288 is an odd number of 32-element blocks (a short span
     * of 9 units; the tiles' half window at the end).  4104 columns take
     * a warp a column, with a last block of columns short; 3000 and 9000
     * columns take more than 1,024 blocks' worth, so blocks loop over
     * groups of them (four warps a column and one). */
    static const int64_t shapes[][3] = {{1, 512, 300}, {2, 256, 77},   {5, 1024, 129},  {8, 512, 1000}, {13, 512, 70},
                                        {9, 256, 64},  {64, 512, 128}, {100, 768, 130}, {3, 288, 50},   {70, 288, 65},
                                        {1, 4096, 96}, {2, 512, 4104}, {2, 256, 3000},  {1, 256, 9000}};
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++) {
        worst wst = {0, 0};
        const int qt = TYPES[t];
        const int64_t be = rlx_quant_block_elems(qt);
        for (int d = 0; d < 3; d++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                if (shapes[s][1] % be == 0)
                    qmatmul_case(qt, FLOATS[d], shapes[s][0], shapes[s][1], shapes[s][2], &wst);
        printf("qmatmul %-5s worst |error| / sum |x w|: cuda %.3g, cpu %.3g\n", rlx_ggml_type_name(qt), wst.gpu,
               wst.cpu);
    }
    /* rows 1, 3 (launches of 2 and 1), 8 and 9 (not fused); 4096 weight
     * rows take a warp a column; depths of 32-element blocks only (288),
     * three spans of 32 units (3072), a short last span (2304); 8300
     * columns loop over groups of columns */
    static const int64_t pshapes[][3] = {{1, 1024, 2048}, {3, 512, 300},  {8, 3072, 520}, {9, 256, 64},
                                         {2, 288, 77},    {1, 2304, 130}, {2, 256, 8300}};
    for (size_t t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
        for (int d = 0; d < 3; d++)
            for (int form = 0; form < 3; form++)
                for (size_t s = 0; s < sizeof pshapes / sizeof pshapes[0]; s++)
                    if (pshapes[s][1] % rlx_quant_block_elems(TYPES[t]) == 0)
                        qproj_case(TYPES[t], FLOATS[d], form, pshapes[s][0], pshapes[s][1], pshapes[s][2]);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
