/* cuda_train.c - training on CUDA against the CPU reference.
 *
 * Four groups:
 *   optimizer  rlx_trainer steps with SGD, momentum, Nesterov, Adam and
 *              AdamW (with weight decay, a warm-up/cosine schedule, global
 *              norm clipping, gradient accumulation) on both devices: the
 *              loss is sum(p * G) over params p and random inputs G, so each
 *              gradient is exactly its random G and only the optimizer_step
 *              kernels and the norm differ; params, optimizer state and the
 *              gradient norm are compared after every step.
 *   gradients  the cases of tests/support/grad_cases.h (shared with
 *              test_grad's finite differences) for the device: every op
 *              family with a gradient rule, y = op(params),
 *              loss = sum(y * R) with R random, rlx_gradients, the same
 *              graph compiled on CUDA and on the CPU in f32, every gradient
 *              compared with f32 tolerances (relative to the gradient's rms).
 *   gradients bf16  the attention, cross-entropy and norm cases again with
 *              precision bf16 on both devices (the device's low-precision
 *              kernels against the CPU's), within bf16's tolerance.
 *   trainer    a tiny Qwen3-shaped decoder (the decoder-small builder, 2
 *              layers, hidden 64) with next-token cross-entropy, AdamW for
 *              20 steps on a fixed batch: the CUDA losses follow the CPU's
 *              step by step (f32), and with precision bf16 on CUDA the loss
 *              falls.
 *
 * Prints one line per failure, a summary line "N passed, M failed", and
 * exits 0 when all passed, 77 (skipped) when no CUDA device is usable, 1
 * otherwise.  RLX_GPU_TEST_FILTER=substr runs only matching cases;
 * RLX_GPU_TEST_CPU_ONLY=1 runs both sides on the CPU (checks the harness
 * on a machine without a GPU).  tests/gpu/run_all.sh runs it. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ir/ir.h"
#include "models/workloads.h"
#include "rlx.h"
#include "support/grad_cases.h"

static int n_pass, n_fail;
static const char *filter;
static bool cpu_only;

static void report(const char *name, bool ok, const char *fmt, ...)
{
    if (ok) {
        n_pass++;
        return;
    }
    n_fail++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

static bool wanted(const char *name) { return !filter || strstr(name, filter) != NULL; }

static rlx_options device_options(rlx_device dev, rlx_precision prec)
{
    rlx_options o;
    rlx_options_init(&o);
    o.device = cpu_only ? RLX_DEVICE_CPU : dev;
    o.precision = prec;
    o.seed = 1234;
    o.ignore_env = 1;
    return o;
}

static const char *dev_name(rlx_device d) { return d == RLX_DEVICE_CUDA && !cpu_only ? "cuda" : "cpu"; }

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double unit(uint64_t seed, size_t i) { return (double)(mix(seed ^ mix(i)) >> 11) / 9007199254740992.0; }

/* max |a - b| / (atol_rel * rms(b) + rtol * |b|), and where */
static double rel_err(const float *a, const float *b, size_t n, double atol_rel, double rtol, size_t *at)
{
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (double)b[i] * b[i];
    double rms = n ? sqrt(ss / (double)n) : 0, worst = 0;
    double floor_ = atol_rel * (rms > 1e-30 ? rms : 1e-30);
    *at = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]) / (floor_ + rtol * fabs((double)b[i]));
        if (!(e <= worst)) { /* NaN counts as the worst */
            worst = isnan(e) ? INFINITY : e;
            *at = i;
        }
    }
    return worst;
}

/* ================================================================ optimizer */

typedef struct opt_param {
    const char *name;
    int ndim;
    int64_t dims[2];
} opt_param;

static const opt_param OPT_PARAMS[3] = {{"w", 2, {37, 19}}, {"b", 1, {19}}, {"c", 1, {1000}}};

static size_t numel_of(int ndim, const int64_t *d)
{
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= (size_t)d[i];
    return n;
}

/* loss = sum(w * gw) + sum(b * gb) + sum(c * gc): d loss / d p = gp */
static rlx_graph *opt_graph(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node loss = -1;
    for (int i = 0; i < 3; i++) {
        const opt_param *q = &OPT_PARAMS[i];
        char gname[8];
        snprintf(gname, sizeof gname, "g%s", q->name);
        rlx_node p = rlx_param(g, q->name, RLX_F32, q->ndim, q->dims);
        rlx_node gi = rlx_input(g, gname, RLX_F32, q->ndim, q->dims);
        int axes[2] = {0, 1};
        rlx_node s = rlx_reduce_sum(g, rlx_mul(g, p, gi), q->ndim, axes, 0);
        loss = loss < 0 ? s : rlx_add(g, loss, s);
    }
    rlx_output(g, "loss", loss);
    return g;
}

static bool opt_compare(rlx_trainer *a, rlx_trainer *b, const char *what, int step, const rlx_train_options *t)
{
    static const char *prefixes[5] = {"", "opt.m.", "opt.v.", "opt.buf.", "opt.acc."};
    for (int i = 0; i < 3; i++) {
        size_t n = numel_of(OPT_PARAMS[i].ndim, OPT_PARAMS[i].dims);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        for (int k = 0; k < 5; k++) {
            bool has = k == 0 || (k <= 2 && t->optimizer != RLX_OPTIM_SGD) ||
                       (k == 3 && t->optimizer == RLX_OPTIM_SGD && t->momentum != 0) || (k == 4 && t->accumulate > 1);
            if (!has)
                continue;
            char name[32];
            snprintf(name, sizeof name, "%s%s", prefixes[k], OPT_PARAMS[i].name);
            if (rlx_trainer_get_param(a, name, x, n * sizeof *x) != RLX_OK ||
                rlx_trainer_get_param(b, name, y, n * sizeof *y) != RLX_OK) {
                report(what, false, "step %d: reading %s: %s", step, name, rlx_last_error());
                free(x), free(y);
                return false;
            }
            size_t at;
            double e = rel_err(x, y, n, 1e-5, 2e-5, &at);
            if (!(e <= 1)) {
                report(what, false, "step %d: %s[%zu] is %.9g on %s, %.9g on the cpu (error %.3g of tolerance)", step,
                       name, at, x[at], dev_name(RLX_DEVICE_CUDA), y[at], e);
                free(x), free(y);
                return false;
            }
        }
        free(x), free(y);
    }
    return true;
}

static void opt_case(const char *what, const rlx_train_options *topt)
{
    if (!wanted(what))
        return;
    rlx_train_options tn = *topt, *t = &tn;
    tn.grad_norm = 1; /* compared below */
    rlx_graph *g = opt_graph();
    rlx_trainer *tr[2] = {NULL, NULL};
    const rlx_device devs[2] = {RLX_DEVICE_CUDA, RLX_DEVICE_CPU};
    for (int d = 0; d < 2; d++) {
        rlx_options o = device_options(devs[d], RLX_PRECISION_F32);
        if (rlx_trainer_new(g, "loss", t, &o, &tr[d]) != RLX_OK) {
            report(what, false, "trainer on %s: %s", dev_name(devs[d]), rlx_last_error());
            goto out;
        }
    }
    for (int i = 0; i < 3; i++) { /* the same initial params on both */
        size_t n = numel_of(OPT_PARAMS[i].ndim, OPT_PARAMS[i].dims);
        float *v = malloc(n * sizeof *v);
        for (size_t k = 0; k < n; k++)
            v[k] = (float)(unit(77 + (uint64_t)i, k) - 0.5);
        for (int d = 0; d < 2; d++)
            rlx_trainer_set_param(tr[d], OPT_PARAMS[i].name, v, n * sizeof *v);
        free(v);
    }
    int micro = 6 * t->accumulate;
    for (int s = 0; s < micro; s++) {
        for (int i = 0; i < 3; i++) {
            size_t n = numel_of(OPT_PARAMS[i].ndim, OPT_PARAMS[i].dims);
            float *v = malloc(n * sizeof *v);
            /* gradients of varied size: some elements tiny, some large */
            for (size_t k = 0; k < n; k++) {
                double u = unit(1000 + 31 * (uint64_t)s + (uint64_t)i, k), m = unit(5000 + (uint64_t)i, k);
                v[k] = (float)((2 * u - 1) * (m < 0.1 ? 1e-4 : m < 0.9 ? 0.5 : 4.0));
            }
            char gname[8];
            snprintf(gname, sizeof gname, "g%s", OPT_PARAMS[i].name);
            for (int d = 0; d < 2; d++)
                rlx_trainer_set_input(tr[d], gname, v, n * sizeof *v);
            free(v);
        }
        double loss[2];
        for (int d = 0; d < 2; d++)
            if (rlx_trainer_step(tr[d], &loss[d]) != RLX_OK) {
                report(what, false, "step %d on %s: %s", s, dev_name(devs[d]), rlx_last_error());
                goto out;
            }
        if (!(fabs(loss[0] - loss[1]) <= 1e-4 * (1 + fabs(loss[1])))) {
            report(what, false, "step %d: loss %.9g on %s, %.9g on the cpu", s, loss[0], dev_name(devs[0]), loss[1]);
            goto out;
        }
        if ((s + 1) % t->accumulate == 0) {
            float na, nb;
            if (rlx_trainer_get_output(tr[0], "grad_norm", &na, sizeof na) != RLX_OK ||
                rlx_trainer_get_output(tr[1], "grad_norm", &nb, sizeof nb) != RLX_OK) {
                report(what, false, "grad_norm: %s", rlx_last_error());
                goto out;
            }
            if (!(fabs(na - nb) <= 1e-5 * nb)) {
                report(what, false, "step %d: grad_norm %.9g on %s, %.9g on the cpu", s, na, dev_name(devs[0]), nb);
                goto out;
            }
        }
        if (!opt_compare(tr[0], tr[1], what, s, t))
            goto out;
    }
    report(what, true, "");
    printf("  %-52s ok (%d steps)\n", what, micro);
out:
    rlx_trainer_free(tr[0]);
    rlx_trainer_free(tr[1]);
    rlx_graph_free(g);
}

static void test_optimizer(void)
{
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.optimizer = RLX_OPTIM_SGD, t.lr = 0.1, t.weight_decay = 0;
    opt_case("optimizer SGD", &t);
    t.clip_norm = 1.0;
    opt_case("optimizer SGD clipped", &t);
    t.momentum = 0.9, t.dampening = 0.1, t.weight_decay = 0.01, t.clip_norm = 0;
    opt_case("optimizer SGD momentum, dampening, weight decay", &t);
    t.dampening = 0, t.nesterov = 1, t.clip_norm = 2.0;
    opt_case("optimizer SGD Nesterov clipped", &t);
    rlx_train_options_init(&t);
    t.optimizer = RLX_OPTIM_ADAM, t.lr = 0.05, t.weight_decay = 0.1;
    opt_case("optimizer Adam, L2 weight decay", &t);
    t.clip_norm = 1.0;
    opt_case("optimizer Adam clipped", &t);
    rlx_train_options_init(&t);
    t.lr = 0.05, t.weight_decay = 0.1, t.beta1 = 0.8, t.beta2 = 0.95;
    opt_case("optimizer AdamW", &t);
    t.warmup_steps = 2, t.decay_steps = 3, t.min_lr = 0.001, t.clip_norm = 0.5;
    opt_case("optimizer AdamW warm-up, cosine, clipped", &t);
    t.accumulate = 2;
    opt_case("optimizer AdamW clipped, accumulate 2", &t);
}

/* ================================================================ gradients */

/* the value of element i of n (the cases' own domains, grad_cases.h) */
static double draw(int domain, uint64_t seed, size_t i, size_t n)
{
    return grad_case_value(domain, unit(seed, i), unit(seed ^ 0xabcdefULL, i), i, n);
}

typedef struct grad_run {
    float *loss;
    float *grad[GC_MAXP];
} grad_run;

static rlx_status run_grad_graph(const rlx_graph *g, rlx_device dev, rlx_precision prec, const grad_case *c,
                                 float *const *val, grad_run *out, char *err, size_t errn)
{
    rlx_options o = device_options(dev, prec);
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    if (st != RLX_OK) {
        snprintf(err, errn, "compile (%s): %s", dev_name(dev), rlx_last_error());
        return st;
    }
    for (int i = 0; i < c->np && st == RLX_OK; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        st = rlx_session_set_param(s, name, val[i], numel_of(c->ndim[i], c->dims[i]) * sizeof(float));
    }
    if (st == RLX_OK)
        st = rlx_session_run(s);
    out->loss = malloc(sizeof(float));
    if (st == RLX_OK)
        st = rlx_session_get_output(s, "loss", out->loss, sizeof(float));
    for (int i = 0; i < c->np; i++) {
        size_t n = numel_of(c->ndim[i], c->dims[i]);
        out->grad[i] = malloc(n * sizeof(float) + 1);
        memset(out->grad[i], 0xff, n * sizeof(float)); /* NaN unless written */
        char name[16];
        snprintf(name, sizeof name, "g%d", i);
        if (st == RLX_OK)
            st = rlx_session_get_output(s, name, out->grad[i], n * sizeof(float));
    }
    if (st != RLX_OK)
        snprintf(err, errn, "run (%s): %s", dev_name(dev), rlx_last_error());
    rlx_session_free(s);
    return st;
}

static void grad_run_free(grad_run *r, int np)
{
    free(r->loss);
    for (int i = 0; i < np; i++)
        free(r->grad[i]);
}

/* prec: the precision both devices compile the graph in.  bf16 compares
 * within bf16's reach: 5e-2 of the gradient's rms plus 5e-2 relative (the
 * kernels round different intermediates to 8 bits of mantissa: the CUDA
 * attention gradient its probabilities for the tensor cores, the CPU's
 * none); the loss, a sum of many products of either sign, is not compared
 * there (its rounding can be large against a sum that cancels). */
static void grad_case_check(const grad_case *c, uint64_t seed, rlx_precision prec)
{
    const bool low = prec != RLX_PRECISION_F32;
    char name[112];
    snprintf(name, sizeof name, "gradient %s%s", low ? "bf16 " : "", c->name);
    if (!wanted(name))
        return;
    rlx_graph *g = rlx_graph_new();
    rlx_node p[GC_MAXP];
    float *val[GC_MAXP] = {0};
    for (int i = 0; i < c->np; i++) {
        char pn[16];
        snprintf(pn, sizeof pn, "p%d", i);
        p[i] = rlx_param(g, pn, RLX_F32, c->ndim[i], c->dims[i]);
        size_t n = numel_of(c->ndim[i], c->dims[i]);
        val[i] = malloc(n * sizeof(float) + 1);
        for (size_t j = 0; j < n; j++)
            val[i][j] = (float)draw(c->domain[i], seed * 131 + (uint64_t)i, j, n);
    }
    char err[1024] = "";
    grad_run a = {0}, b = {0};
    rlx_node y = c->body(g, p);
    int ndim = 0;
    int64_t dims[RLX_MAX_DIMS];
    if (y < 0 || rlx_node_shape(g, y, &ndim, dims) != RLX_OK) {
        report(name, false, "building the forward: %s", rlx_last_error());
        goto out;
    }
    size_t ny = numel_of(ndim, dims);
    float *r = malloc(ny * sizeof *r + 1);
    for (size_t j = 0; j < ny; j++)
        r[j] = (float)(2 * unit(seed ^ 0x5151, j) - 1);
    rlx_node rn = rlx_constant(g, RLX_F32, ndim, dims, r, ny * sizeof *r);
    free(r);
    int all[RLX_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        all[i] = i;
    rlx_node prod = rlx_mul(g, y, rn);
    rlx_node loss = ndim ? rlx_reduce_sum(g, prod, ndim, all, 0) : prod;
    rlx_node grads[GC_MAXP];
    if (rlx_gradients(g, loss, c->np, p, grads) != RLX_OK) {
        report(name, false, "rlx_gradients: %s", rlx_last_error());
        goto out;
    }
    rlx_output(g, "loss", loss);
    for (int i = 0; i < c->np; i++) {
        char gn[16];
        snprintf(gn, sizeof gn, "g%d", i);
        rlx_output(g, gn, grads[i]);
    }
    if (rlx_graph_verify(g) != RLX_OK) {
        report(name, false, "graph: %s", rlx_last_error());
        goto out;
    }
    if (run_grad_graph(g, RLX_DEVICE_CUDA, prec, c, val, &a, err, sizeof err) != RLX_OK ||
        run_grad_graph(g, RLX_DEVICE_CPU, prec, c, val, &b, err, sizeof err) != RLX_OK) {
        report(name, false, "%s", err);
        goto out;
    }
    if (!low && !(fabs(*a.loss - *b.loss) <= 1e-4 * (1 + fabs(*b.loss)))) {
        report(name, false, "loss %.9g on %s, %.9g on the cpu", *a.loss, dev_name(RLX_DEVICE_CUDA), *b.loss);
        goto out;
    }
    double worst = 0;
    for (int i = 0; i < c->np; i++) {
        size_t n = numel_of(c->ndim[i], c->dims[i]), at;
        /* f32 on both: 1e-4 of the gradient's rms plus 1e-4 relative, as a
         * sum of a few hundred f32 products in another order can differ */
        double e =
            low ? rel_err(a.grad[i], b.grad[i], n, 5e-2, 5e-2, &at) : rel_err(a.grad[i], b.grad[i], n, 1e-4, 1e-4, &at);
        if (!(e <= 1)) {
            report(name, false, "d loss / d p%d[%zu] is %.9g on %s, %.9g on the cpu (%.3g x the tolerance)", i, at,
                   a.grad[i][at], dev_name(RLX_DEVICE_CUDA), b.grad[i][at], e);
            goto out;
        }
        if (e > worst)
            worst = e;
    }
    report(name, true, "");
    printf("  %-52s ok (worst %.2g of the tolerance)\n", name, worst);
out:
    grad_run_free(&a, c->np);
    grad_run_free(&b, c->np);
    for (int i = 0; i < c->np; i++)
        free(val[i]);
    rlx_graph_free(g);
}

static void test_gradients(void)
{
    for (size_t i = 0; i < sizeof GRAD_CASES / sizeof *GRAD_CASES; i++)
        if (GRAD_CASES[i].runs & GC_DEVICE)
            grad_case_check(&GRAD_CASES[i], 1 + i, RLX_PRECISION_F32);
}

/* The cases whose ops have kernels of their own in low precision (the
 * tensor-core attention gradient, the cross-entropy reading bf16 logits,
 * the norms' gradient), compiled with precision bf16 on the device and on
 * the CPU. */
static void test_gradients_bf16(void)
{
    for (size_t i = 0; i < sizeof GRAD_CASES / sizeof *GRAD_CASES; i++) {
        const grad_case *c = &GRAD_CASES[i];
        if ((c->runs & GC_DEVICE) &&
            (!strncmp(c->name, "attention", 9) || !strncmp(c->name, "cross_entropy", 13) || strstr(c->name, "norm")))
            grad_case_check(c, 1 + i, RLX_PRECISION_BF16);
    }
}

/* ================================================================ trainer */

/* The decoder-small builder at a tiny size, its logits replaced as the
 * output by next-token cross-entropy against "labels" (the next id, -100 at
 * each sequence's last position). */
static rlx_graph *tiny_decoder(rlx_dtype t, int batch, int seq)
{
    rlx_decoder_config c = rlx_decoder_small(seq);
    c.batch = batch, c.layers = 2, c.hidden = 64, c.heads = 4, c.kv_heads = 2, c.head_dim = 16, c.ffn = 128;
    c.vocab = 256, c.rope_theta = 1e4, c.dtype = t;
    rlx_graph *g = rlx_workload_decoder(&c);
    if (!g)
        return NULL;
    rlx_node logits = g->outputs[0].node;
    rlx_node labels = rlx_input(g, "labels", RLX_I64, 2, (int64_t[]){batch, seq});
    rlx_node loss = rlx_cross_entropy(g, logits, labels, -100, 0);
    free(g->outputs[0].name);
    g->outputs[0].name = strdup("loss");
    g->outputs[0].node = loss;
    if (rlx_graph_verify(g) != RLX_OK) {
        rlx_graph_free(g);
        return NULL;
    }
    return g;
}

static rlx_status train_run(rlx_graph *g, rlx_device dev, rlx_precision prec, int batch, int seq, int steps,
                            double *losses)
{
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.lr = 3e-3, t.warmup_steps = 2, t.clip_norm = 1.0;
    rlx_options o = device_options(dev, prec);
    rlx_trainer *tr = NULL;
    rlx_status s = rlx_trainer_new(g, "loss", &t, &o, &tr);
    if (s != RLX_OK)
        return s;
    /* the workloads' seeded weights, read back from one session and set */
    int64_t *ids = malloc((size_t)batch * seq * sizeof *ids), *lab = malloc((size_t)batch * seq * sizeof *lab);
    for (int i = 0; i < batch * seq; i++)
        ids[i] = (int64_t)(mix(4242 + (uint64_t)i) % 256);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < seq; i++)
            lab[b * seq + i] = i + 1 < seq ? ids[b * seq + i + 1] : -100;
    for (int i = 0; s == RLX_OK && i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op != RLX_OP_PARAM)
            continue;
        size_t cnt = (size_t)rlx_shape_numel(&n->shape), bytes = cnt * rlx_dtype_size(n->dtype);
        float *f = malloc(cnt * sizeof *f + 1);
        uint16_t *h = malloc(cnt * sizeof *h + 1);
        rlx_workload_param_f32(n->name, i, cnt, 7, f);
        const void *src = f;
        if (n->dtype == RLX_BF16) {
            for (size_t k = 0; k < cnt; k++)
                h[k] = rlx_f32_to_bf16(f[k]);
            src = h;
        }
        s = rlx_trainer_set_param(tr, n->name, src, bytes);
        free(f), free(h);
    }
    if (s == RLX_OK)
        s = rlx_trainer_set_input(tr, "input_ids", ids, (size_t)batch * seq * sizeof *ids);
    if (s == RLX_OK)
        s = rlx_trainer_set_input(tr, "labels", lab, (size_t)batch * seq * sizeof *lab);
    for (int i = 0; s == RLX_OK && i < steps; i++)
        s = rlx_trainer_step(tr, &losses[i]);
    free(ids), free(lab);
    rlx_trainer_free(tr);
    return s;
}

static void test_trainer(void)
{
    enum { B = 2, S = 32, STEPS = 20 };
    const char *name = "trainer tiny decoder f32: cuda losses follow the cpu's";
    if (wanted(name)) {
        rlx_graph *g = tiny_decoder(RLX_F32, B, S);
        double la[STEPS], lb[STEPS];
        if (!g) {
            report(name, false, "graph: %s", rlx_last_error());
        } else if (train_run(g, RLX_DEVICE_CUDA, RLX_PRECISION_F32, B, S, STEPS, la) != RLX_OK ||
                   train_run(g, RLX_DEVICE_CPU, RLX_PRECISION_F32, B, S, STEPS, lb) != RLX_OK) {
            report(name, false, "%s", rlx_last_error());
        } else {
            double worst = 0;
            int at = 0;
            for (int i = 0; i < STEPS; i++) {
                double e = fabs(la[i] - lb[i]) / fabs(lb[i]);
                if (!(e <= worst))
                    worst = e, at = i;
            }
            /* the losses drift apart with the steps as f32 rounding compounds
             * through AdamW; 1e-3 relative is far below a falling loss's step */
            bool falls = lb[STEPS - 1] < 0.9 * lb[0];
            report(name, worst <= 1e-3 && falls,
                   "step %d: loss %.7f on %s, %.7f on the cpu (relative %.3g); cpu loss %.4f -> %.4f", at, la[at],
                   dev_name(RLX_DEVICE_CUDA), lb[at], worst, lb[0], lb[STEPS - 1]);
            printf("  %-52s loss %.4f -> %.4f, largest difference %.2g relative (step %d)\n", name, lb[0],
                   lb[STEPS - 1], worst, at);
        }
        rlx_graph_free(g);
    }
    const char *nm = "trainer tiny decoder precision bf16: the loss falls";
    if (wanted(nm)) {
        rlx_graph *g = tiny_decoder(RLX_F32, B, S); /* f32 params: the master weights */
        double l[STEPS];
        if (!g) {
            report(nm, false, "graph: %s", rlx_last_error());
        } else if (train_run(g, RLX_DEVICE_CUDA, RLX_PRECISION_BF16, B, S, STEPS, l) != RLX_OK) {
            report(nm, false, "%s", rlx_last_error());
        } else {
            bool finite = true;
            for (int i = 0; i < STEPS; i++)
                finite = finite && isfinite(l[i]);
            report(nm, finite && l[STEPS - 1] < 0.9 * l[0], "loss %.4f -> %.4f over %d steps", l[0], l[STEPS - 1],
                   STEPS);
            printf("  %-52s loss %.4f -> %.4f\n", nm, l[0], l[STEPS - 1]);
        }
        rlx_graph_free(g);
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    filter = getenv("RLX_GPU_TEST_FILTER");
    if (filter && !*filter)
        filter = NULL;
    cpu_only = getenv("RLX_GPU_TEST_CPU_ONLY") != NULL;
    /* skip cleanly where CUDA is not built or no device is usable */
    rlx_graph *probe = rlx_graph_new();
    rlx_output(probe, "y", rlx_relu(probe, rlx_input(probe, "x", RLX_F32, 1, (int64_t[]){4})));
    rlx_options o = device_options(RLX_DEVICE_CUDA, RLX_PRECISION_F32);
    rlx_session *s = NULL;
    if (rlx_compile(probe, &o, &s) != RLX_OK) {
        printf("SKIPPED: CUDA backend not usable here: %s\n", rlx_last_error());
        printf("0 passed, 0 failed (skipped)\n");
        rlx_graph_free(probe);
        return 77;
    }
    rlx_session_free(s);
    rlx_graph_free(probe);
    if (cpu_only)
        printf("RLX_GPU_TEST_CPU_ONLY: both sides on the cpu (a check of the cases, not of CUDA)\n");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    static const struct {
        const char *name;
        void (*fn)(void);
    } groups[] = {
        {"optimizer", test_optimizer},
        {"gradients", test_gradients},
        {"gradients bf16", test_gradients_bf16},
        {"trainer", test_trainer},
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
