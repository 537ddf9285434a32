/* Training: the optimizer steps against a float64 reference of
 * torch.optim's formulas (SGD, momentum, Nesterov, weight decay, Adam,
 * AdamW), the learning-rate schedule, gradient clipping, gradient
 * accumulation against one step on the whole batch, cross-entropy (ignore
 * index, label smoothing) against a direct computation, a loss that falls,
 * checkpoints that resume bit-identically, and the errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlx.h"

enum { N = 8, I = 5, O = 3 };

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double urand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* y = x @ w + b, loss = mean((y - t)^2) */
static rlx_graph *linear_model(int rows)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){rows, I});
    rlx_node t = rlx_input(g, "t", RLX_F32, 2, (int64_t[]){rows, O});
    rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){I, O});
    rlx_node b = rlx_param(g, "b", RLX_F32, 1, (int64_t[]){O});
    rlx_node y = rlx_add(g, rlx_matmul(g, x, w, 0, 0), b);
    rlx_output(g, "loss", rlx_mse_loss(g, y, t));
    return g;
}

typedef struct ref_state {
    double p[I * O + O], s1[I * O + O], s2[I * O + O];
    int64_t steps;
} ref_state;

/* d loss / d (w, b) in double for rows of x, t at params p */
static void ref_grad(const double *p, const float *x, const float *t, int rows, double *gr)
{
    memset(gr, 0, (I * O + O) * sizeof *gr);
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < O; o++) {
            double y = p[I * O + o];
            for (int i = 0; i < I; i++)
                y += x[r * I + i] * p[i * O + o];
            double d = 2 * (y - t[r * O + o]) / (rows * O);
            for (int i = 0; i < I; i++)
                gr[i * O + o] += d * x[r * I + i];
            gr[I * O + o] += d;
        }
}

static double ref_lr(const rlx_train_options *t, int64_t s)
{
    if (s < t->warmup_steps)
        return t->lr * (double)(s + 1) / t->warmup_steps;
    if (t->decay_steps <= 0)
        return t->lr;
    double pr = fmin(1.0, (double)(s - t->warmup_steps) / t->decay_steps);
    return t->min_lr + (t->lr - t->min_lr) * 0.5 * (1 + cos(M_PI * pr));
}

/* torch.optim's single-tensor update, in double */
static void ref_step(ref_state *st, const rlx_train_options *t, double *gr)
{
    double lr = ref_lr(t, st->steps), norm = 0;
    st->steps++;
    for (int k = 0; k < I * O + O; k++)
        norm += gr[k] * gr[k];
    norm = sqrt(norm);
    double scale = t->clip_norm > 0 ? fmin(1.0, t->clip_norm / (norm + 1e-6)) : 1.0;
    for (int k = 0; k < I * O + O; k++) {
        double g = gr[k] * scale, *p = &st->p[k];
        if (t->optimizer == RLX_OPTIM_SGD) {
            g += t->weight_decay * *p;
            if (t->momentum != 0) {
                st->s1[k] = st->steps == 1 ? g : t->momentum * st->s1[k] + (1 - t->dampening) * g;
                g = t->nesterov ? g + t->momentum * st->s1[k] : st->s1[k];
            }
            *p -= lr * g;
            continue;
        }
        if (t->optimizer == RLX_OPTIM_ADAM)
            g += t->weight_decay * *p;
        else
            *p *= 1 - lr * t->weight_decay;
        st->s1[k] = t->beta1 * st->s1[k] + (1 - t->beta1) * g;
        st->s2[k] = t->beta2 * st->s2[k] + (1 - t->beta2) * g * g;
        double bc1 = 1 - pow(t->beta1, (double)st->steps), bc2 = 1 - pow(t->beta2, (double)st->steps);
        *p -= lr / bc1 * st->s1[k] / (sqrt(st->s2[k]) / sqrt(bc2) + t->eps);
    }
}

static void random_batch(float *x, float *t, int rows)
{
    for (int k = 0; k < rows * I; k++)
        x[k] = (float)(urand() * 2 - 1);
    for (int k = 0; k < rows * O; k++)
        t[k] = (float)(urand() * 2 - 1);
}

static void init_params(rlx_trainer *tr, ref_state *st)
{
    float w[I * O], b[O];
    for (int k = 0; k < I * O; k++)
        st->p[k] = w[k] = (float)(urand() - 0.5);
    for (int k = 0; k < O; k++)
        st->p[I * O + k] = b[k] = (float)(urand() - 0.5);
    assert_int_equal(rlx_trainer_set_param(tr, "w", w, sizeof w), RLX_OK);
    assert_int_equal(rlx_trainer_set_param(tr, "b", b, sizeof b), RLX_OK);
}

static void compare_params(rlx_trainer *tr, const ref_state *st, const char *what)
{
    float w[I * O], b[O];
    assert_int_equal(rlx_trainer_get_param(tr, "w", w, sizeof w), RLX_OK);
    assert_int_equal(rlx_trainer_get_param(tr, "b", b, sizeof b), RLX_OK);
    for (int k = 0; k < I * O + O; k++) {
        double got = k < I * O ? w[k] : b[k - I * O], want = st->p[k];
        if (!(fabs(got - want) <= 2e-6 + 2e-5 * fabs(want)))
            fail_msg("%s: param %d is %.9g, the float64 reference %.9g", what, k, got, want);
    }
}

/* several steps of each optimizer on fresh batches against the reference */
static void check_optimizer(const rlx_train_options *t, const char *what)
{
    rlx_graph *g = linear_model(N);
    rlx_trainer *tr = NULL;
    if (rlx_trainer_new(g, "loss", t, NULL, &tr) != RLX_OK)
        fail_msg("%s: %s", what, rlx_last_error());
    ref_state st;
    memset(&st, 0, sizeof st);
    init_params(tr, &st);
    for (int step = 0; step < 5; step++) {
        assert_true(fabs(rlx_trainer_lr(tr) - ref_lr(t, step)) <= 1e-12);
        float x[N * I], tt[N * O];
        random_batch(x, tt, N);
        double gr[I * O + O];
        ref_grad(st.p, x, tt, N, gr);
        ref_step(&st, t, gr);
        rlx_trainer_set_input(tr, "x", x, sizeof x);
        rlx_trainer_set_input(tr, "t", tt, sizeof tt);
        double loss;
        if (rlx_trainer_step(tr, &loss) != RLX_OK)
            fail_msg("%s: step: %s", what, rlx_last_error());
        assert_true(isfinite(loss));
    }
    assert_int_equal(rlx_trainer_steps(tr), 5);
    compare_params(tr, &st, what);
    printf("  %-40s matches the float64 reference\n", what);
    rlx_trainer_free(tr);
    rlx_graph_free(g);
}

static void test_optimizers(void **state)
{
    (void)state;
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.optimizer = RLX_OPTIM_SGD, t.lr = 0.1, t.weight_decay = 0;
    check_optimizer(&t, "SGD");
    t.momentum = 0.9, t.dampening = 0.1, t.weight_decay = 0.01;
    check_optimizer(&t, "SGD momentum, dampening, weight decay");
    t.dampening = 0, t.nesterov = 1;
    check_optimizer(&t, "SGD Nesterov");
    rlx_train_options_init(&t);
    t.optimizer = RLX_OPTIM_ADAM, t.lr = 0.05, t.weight_decay = 0.1;
    check_optimizer(&t, "Adam, L2 weight decay");
    rlx_train_options_init(&t);
    t.lr = 0.05, t.weight_decay = 0.1, t.beta1 = 0.8, t.beta2 = 0.95;
    check_optimizer(&t, "AdamW");
    t.warmup_steps = 2, t.decay_steps = 2, t.min_lr = 0.001;
    check_optimizer(&t, "AdamW, warm-up then cosine decay");
    t.clip_norm = 0.05;
    check_optimizer(&t, "AdamW, clipped to norm 0.05");
}

/* the global gradient norm is an output only where asked for (or where
 * clipping or loss scaling needs it) */
static void test_grad_norm_output(void **state)
{
    (void)state;
    for (int ask = 0; ask < 2; ask++) {
        rlx_train_options t;
        rlx_train_options_init(&t);
        t.grad_norm = ask;
        rlx_graph *g = linear_model(N);
        rlx_trainer *tr = NULL;
        if (rlx_trainer_new(g, "loss", &t, NULL, &tr) != RLX_OK)
            fail_msg("%s", rlx_last_error());
        ref_state st;
        memset(&st, 0, sizeof st);
        init_params(tr, &st);
        float x[N * I], tt[N * O];
        random_batch(x, tt, N);
        double gr[I * O + O], want = 0;
        ref_grad(st.p, x, tt, N, gr);
        for (int k = 0; k < I * O + O; k++)
            want += gr[k] * gr[k];
        rlx_trainer_set_input(tr, "x", x, sizeof x);
        rlx_trainer_set_input(tr, "t", tt, sizeof tt);
        assert_int_equal(rlx_trainer_step(tr, NULL), RLX_OK);
        float norm = -1;
        rlx_status s = rlx_trainer_get_output(tr, "grad_norm", &norm, sizeof norm);
        if (ask) {
            assert_int_equal(s, RLX_OK);
            assert_true(fabs(norm - sqrt(want)) <= 1e-5 * sqrt(want));
        } else {
            assert_int_equal(s, RLX_ERR_NOT_FOUND);
            assert_non_null(strstr(rlx_last_error(), "grad_norm"));
        }
        rlx_trainer_free(tr);
        rlx_graph_free(g);
    }
}

/* dynamic loss scaling: a scale so large that the gradients overflow makes
 * the steps skip (params and optimizer state untouched) and the scale fall,
 * until the steps go through and then match the unscaled reference */
static void test_loss_scaling(void **state)
{
    (void)state;
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.lr = 0.05;
    t.loss_scaling = 1;
    t.initial_loss_scale = 3e37;
    rlx_graph *g = linear_model(N);
    rlx_trainer *tr = NULL;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_OK);
    assert_true(rlx_trainer_loss_scale(tr) == 3e37);
    ref_state st;
    memset(&st, 0, sizeof st);
    init_params(tr, &st);
    float x[N * I], tt[N * O];
    random_batch(x, tt, N);
    rlx_trainer_set_input(tr, "x", x, sizeof x);
    rlx_trainer_set_input(tr, "t", tt, sizeof tt);
    assert_int_equal(rlx_trainer_step(tr, NULL), RLX_OK);
    assert_int_equal(rlx_trainer_steps(tr), 0);
    assert_int_equal(rlx_trainer_skipped(tr), 1);
    assert_true(rlx_trainer_loss_scale(tr) == 1.5e37);
    compare_params(tr, &st, "after a skipped step");
    float m[I * O];
    assert_int_equal(rlx_trainer_get_param(tr, "opt.m.w", m, sizeof m), RLX_OK);
    for (int k = 0; k < I * O; k++)
        assert_true(m[k] == 0.0f);
    /* the same batch until three steps went through; the reference steps
     * with them (from the params before each) */
    for (int runs = 0; rlx_trainer_steps(tr) < 3 && runs < 200; runs++) {
        double gr[I * O + O];
        ref_grad(st.p, x, tt, N, gr);
        int64_t before = rlx_trainer_steps(tr);
        assert_int_equal(rlx_trainer_step(tr, NULL), RLX_OK);
        if (rlx_trainer_steps(tr) > before)
            ref_step(&st, &t, gr);
    }
    printf("  loss scale 3e37: %lld steps skipped, scale now %g\n", (long long)rlx_trainer_skipped(tr),
           rlx_trainer_loss_scale(tr));
    assert_true(rlx_trainer_skipped(tr) > 1);
    assert_int_equal(rlx_trainer_steps(tr), 3);
    compare_params(tr, &st, "loss scaling");
    rlx_trainer_free(tr);
    rlx_graph_free(g);
}

/* activation checkpointing: the decoder's step plans at least a fifth fewer
 * transient bytes and gives the same losses and weights */
static void test_recompute(void **state)
{
    (void)state;
    enum { B = 8, S = 64, V = 64 };
    rlx_graph *g = NULL;
    assert_int_equal(rlx_decoder_train_graph(B, S, V, 2, &g), RLX_OK);
    size_t transient[2];
    float w[2][V * 512];
    double loss[2][3];
    for (int r = 0; r < 2; r++) {
        rlx_train_options t;
        rlx_train_options_init(&t);
        t.recompute = r;
        rlx_trainer *tr = NULL;
        if (rlx_trainer_new(g, "loss", &t, NULL, &tr) != RLX_OK)
            fail_msg("recompute %d: %s", r, rlx_last_error());
        const rlx_session *s = rlx_trainer_session(tr);
        rng = 76; /* the same weights and batches for both */
        for (int i = 0; i < rlx_session_count(s, 1); i++) {
            rlx_tensor_info info;
            rlx_session_info(s, 1, i, &info);
            if (strncmp(info.name, "opt.", 4)) {
                size_t n = info.bytes / sizeof(float);
                float *v = malloc(info.bytes);
                for (size_t k = 0; k < n; k++)
                    v[k] = strstr(info.name, ".g") ? 1.0f : (float)(urand() - 0.5) * 0.04f;
                rlx_trainer_set_param(tr, info.name, v, info.bytes);
                free(v);
            }
        }
        rng = 77;
        for (int step = 0; step < 3; step++) {
            int64_t ids[B * S], lab[B * S];
            for (int k = 0; k < B * S; k++)
                ids[k] = (int64_t)(urand() * V), lab[k] = (int64_t)(urand() * V);
            rlx_trainer_set_input(tr, "input_ids", ids, sizeof ids);
            rlx_trainer_set_input(tr, "labels", lab, sizeof lab);
            assert_int_equal(rlx_trainer_step(tr, &loss[r][step]), RLX_OK);
        }
        rlx_trainer_get_param(tr, "embed.w", w[r], sizeof w[r]);
        rlx_compile_stats st;
        assert_int_equal(rlx_session_stats(s, &st), RLX_OK);
        transient[r] = st.transient_bytes;
        int count;
        size_t bytes;
        rlx_trainer_recomputed(tr, &count, &bytes);
        printf("  recompute %d: transient %zu B; %d values (%zu B) recomputed\n", r, transient[r], count, bytes);
        assert_true(r ? count > 0 && bytes > 0 : count == 0);
        rlx_trainer_free(tr);
    }
    /* the plan is deterministic: 54.8 against 40.1 MB, from the SwiGLU
     * product, the heads' norm-transpose-rotation chains, the transposed
     * attention outputs and the norms no longer held beside their sums */
    assert_true(transient[1] < 0.8 * transient[0]);
    for (int step = 0; step < 3; step++) {
        printf("  step %d: loss %.9g kept, %.9g recomputed\n", step, loss[0][step], loss[1][step]);
        assert_true(fabs(loss[1][step] - loss[0][step]) <= 1e-6 * fabs(loss[0][step]));
    }
    for (int k = 0; k < V * 512; k++)
        assert_true(fabsf(w[1][k] - w[0][k]) <= 1e-6f + 1e-5f * fabsf(w[0][k]));
    rlx_graph_free(g);
}

/* two micro-batches of N rows averaged = one step on the 2N rows */
static void test_accumulation(void **state)
{
    (void)state;
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.lr = 0.05;
    t.accumulate = 2;
    t.clip_norm = 0.1;
    rlx_graph *g = linear_model(N);
    rlx_trainer *tr = NULL;
    if (rlx_trainer_new(g, "loss", &t, NULL, &tr) != RLX_OK)
        fail_msg("%s", rlx_last_error());
    ref_state st;
    memset(&st, 0, sizeof st);
    init_params(tr, &st);
    for (int step = 0; step < 3; step++) {
        float x[2 * N * I], tt[2 * N * O];
        random_batch(x, tt, 2 * N);
        double gr[I * O + O];
        ref_grad(st.p, x, tt, 2 * N, gr);
        ref_step(&st, &t, gr);
        for (int half = 0; half < 2; half++) {
            rlx_trainer_set_input(tr, "x", x + half * N * I, N * I * sizeof(float));
            rlx_trainer_set_input(tr, "t", tt + half * N * O, N * O * sizeof(float));
            assert_int_equal(rlx_trainer_step(tr, NULL), RLX_OK);
            assert_int_equal(rlx_trainer_steps(tr), step + half);
        }
        float norm;
        assert_int_equal(rlx_trainer_get_output(tr, "grad_norm", &norm, sizeof norm), RLX_OK);
        double want = 0;
        for (int k = 0; k < I * O + O; k++)
            want += gr[k] * gr[k];
        assert_true(fabs(norm - sqrt(want)) <= 1e-5 * sqrt(want));
    }
    compare_params(tr, &st, "accumulate 2");
    rlx_trainer_free(tr);
    rlx_graph_free(g);
}

static void test_cross_entropy(void **state)
{
    (void)state;
    enum { R = 6, C = 5 };
    double logits[R * C];
    int64_t labels[R] = {0, 4, -100, 2, 3, 1};
    for (int k = 0; k < R * C; k++)
        logits[k] = urand() * 6 - 3;
    const double smooth[2] = {0, 0.1};
    for (int si = 0; si < 2; si++) {
        rlx_graph *g = rlx_graph_new();
        rlx_node l = rlx_constant(g, RLX_F64, 2, (int64_t[]){R, C}, logits, sizeof logits);
        rlx_node y = rlx_constant(g, RLX_I64, 1, (int64_t[]){R}, labels, sizeof labels);
        rlx_output(g, "ce", rlx_cross_entropy(g, l, y, -100, smooth[si]));
        rlx_options o;
        rlx_options_init(&o);
        rlx_session *s = NULL;
        assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        double got = 0, want = 0;
        assert_int_equal(rlx_session_get_output(s, "ce", &got, sizeof got), RLX_OK);
        int rows = 0;
        for (int r = 0; r < R; r++) {
            if (labels[r] == -100)
                continue;
            double mx = -INFINITY, z = 0, all = 0;
            for (int c = 0; c < C; c++)
                mx = fmax(mx, logits[r * C + c]);
            for (int c = 0; c < C; c++)
                z += exp(logits[r * C + c] - mx);
            for (int c = 0; c < C; c++)
                all += -(logits[r * C + c] - mx - log(z));
            double nll = -(logits[r * C + labels[r]] - mx - log(z));
            want += (1 - smooth[si]) * nll + smooth[si] * all / C;
            rows++;
        }
        want /= rows;
        if (!(fabs(got - want) <= 1e-12 * fabs(want)))
            fail_msg("cross-entropy (smoothing %g): %.15g, want %.15g", smooth[si], got, want);
        rlx_session_free(s);
        rlx_graph_free(g);
    }
    /* a label that is no class fails the run, naming it */
    rlx_graph *g = rlx_graph_new();
    rlx_node l = rlx_input(g, "l", RLX_F32, 2, (int64_t[]){2, 3});
    rlx_node y = rlx_input(g, "y", RLX_I32, 1, (int64_t[]){2});
    rlx_output(g, "ce", rlx_cross_entropy(g, l, y, -1, 0));
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    float lv[6] = {1, 2, 3, 4, 5, 6};
    int32_t yv[2] = {1, 3};
    rlx_session_set_input(s, "l", lv, sizeof lv);
    rlx_session_set_input(s, "y", yv, sizeof yv);
    assert_int_equal(rlx_session_run(s), RLX_ERR_RUNTIME);
    assert_non_null(strstr(rlx_last_error(), "label 3"));
    yv[1] = -1; /* the ignored label */
    rlx_session_set_input(s, "y", yv, sizeof yv);
    assert_int_equal(rlx_session_run(s), RLX_OK);
    rlx_session_free(s);
    rlx_graph_free(g);
}

/* a two-layer network fits a fixed batch: the loss falls 10x */
static void test_loss_falls(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){32, 4});
    rlx_node lab = rlx_input(g, "labels", RLX_I64, 1, (int64_t[]){32});
    rlx_node w1 = rlx_param(g, "w1", RLX_F32, 2, (int64_t[]){4, 32});
    rlx_node w2 = rlx_param(g, "w2", RLX_F32, 2, (int64_t[]){32, 3});
    rlx_node h = rlx_gelu(g, rlx_matmul(g, x, w1, 0, 0));
    rlx_output(g, "loss", rlx_cross_entropy(g, rlx_matmul(g, h, w2, 0, 0), lab, -100, 0));
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.lr = 0.02;
    rlx_trainer *tr = NULL;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_OK);
    float xv[32 * 4], a[4 * 32], b[32 * 3];
    int64_t lv[32];
    for (int k = 0; k < 32 * 4; k++)
        xv[k] = (float)(urand() * 2 - 1);
    for (int k = 0; k < 32; k++) /* a class the inputs decide */
        lv[k] = xv[k * 4] + xv[k * 4 + 1] > 0.5 ? 2 : xv[k * 4 + 2] > 0 ? 1 : 0;
    for (int k = 0; k < 4 * 32; k++)
        a[k] = (float)(urand() - 0.5);
    for (int k = 0; k < 32 * 3; k++)
        b[k] = (float)(urand() - 0.5) * 0.5f;
    rlx_trainer_set_param(tr, "w1", a, sizeof a);
    rlx_trainer_set_param(tr, "w2", b, sizeof b);
    rlx_trainer_set_input(tr, "x", xv, sizeof xv);
    rlx_trainer_set_input(tr, "labels", lv, sizeof lv);
    double first = 0, last = 0;
    for (int s = 0; s < 300; s++)
        assert_int_equal(rlx_trainer_step(tr, s ? &last : &first), RLX_OK);
    printf("  loss %.4f -> %.4f over 300 AdamW steps\n", first, last);
    assert_true(last < first / 10);
    rlx_trainer_free(tr);
    rlx_graph_free(g);
}

/* 6 steps straight = 3 steps, save, a new trainer, load, 3 steps: bit for bit */
static void run_steps(rlx_trainer *tr, int from, int to)
{
    for (int s = from; s < to; s++) {
        uint64_t keep = rng;
        rng = 0x1234567ull + (uint64_t)s; /* the same batch for step s in both runs */
        float x[N * I], tt[N * O];
        random_batch(x, tt, N);
        rng = keep;
        rlx_trainer_set_input(tr, "x", x, sizeof x);
        rlx_trainer_set_input(tr, "t", tt, sizeof tt);
        assert_int_equal(rlx_trainer_step(tr, NULL), RLX_OK);
    }
}

static void test_checkpoint_resume(void **state)
{
    (void)state;
    char path[] = "/tmp/rlx_train_ckpt_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int acc = 1; acc <= 2; acc++) {
        rlx_train_options t;
        rlx_train_options_init(&t);
        t.accumulate = acc;
        t.lr = 0.03;
        rlx_graph *g = linear_model(N);
        rlx_trainer *a = NULL, *b = NULL;
        assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &a), RLX_OK);
        assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &b), RLX_OK);
        ref_state st;
        init_params(a, &st);
        float w0[I * O], b0[O];
        rlx_trainer_get_param(a, "w", w0, sizeof w0);
        rlx_trainer_get_param(a, "b", b0, sizeof b0);
        run_steps(a, 0, 7);
        /* the interrupted run: 3 micro-batches (mid-accumulation when acc = 2) */
        rlx_trainer_set_param(b, "w", w0, sizeof w0);
        rlx_trainer_set_param(b, "b", b0, sizeof b0);
        run_steps(b, 0, 3);
        /* an existing file is refused without force, then written */
        assert_int_equal(rlx_trainer_save(b, path, 0), RLX_ERR_IO);
        assert_int_equal(rlx_trainer_save(b, path, RLX_FILE_FORCE), RLX_OK);
        rlx_trainer_free(b);
        assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &b), RLX_OK);
        if (rlx_trainer_load(b, path) != RLX_OK)
            fail_msg("load: %s", rlx_last_error());
        assert_int_equal(rlx_trainer_steps(b), acc == 1 ? 3 : 1);
        run_steps(b, 3, 7);
        float wa[I * O], wb[I * O], ma[I * O], mb[I * O];
        rlx_trainer_get_param(a, "w", wa, sizeof wa);
        rlx_trainer_get_param(b, "w", wb, sizeof wb);
        assert_memory_equal(wa, wb, sizeof wa);
        rlx_trainer_get_param(a, "opt.v.w", ma, sizeof ma);
        rlx_trainer_get_param(b, "opt.v.w", mb, sizeof mb);
        assert_memory_equal(ma, mb, sizeof ma);
        assert_int_equal(rlx_trainer_steps(a), rlx_trainer_steps(b));
        rlx_trainer_free(a);
        rlx_trainer_free(b);
        rlx_graph_free(g);
    }
    /* a checkpoint of another model is refused, naming the tensor */
    rlx_graph *other = rlx_graph_new();
    rlx_node x = rlx_input(other, "x", RLX_F32, 2, (int64_t[]){2, 2});
    rlx_node w = rlx_param(other, "w", RLX_F32, 2, (int64_t[]){2, 2});
    rlx_output(other, "loss", rlx_reduce_sum(other, rlx_matmul(other, x, w, 0, 0), 2, (int[]){0, 1}, 0));
    rlx_trainer *o = NULL;
    assert_int_equal(rlx_trainer_new(other, "loss", NULL, NULL, &o), RLX_OK);
    /* the file stopped mid-accumulation of 2: no fit for accumulate = 1 */
    assert_int_equal(rlx_trainer_load(o, path), RLX_ERR_FORMAT);
    assert_non_null(strstr(rlx_last_error(), "accumulate"));
    rlx_trainer_free(o);
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.accumulate = 2;
    assert_int_equal(rlx_trainer_new(other, "loss", &t, NULL, &o), RLX_OK);
    assert_int_equal(rlx_trainer_load(o, path), RLX_ERR_SHAPE);
    assert_non_null(strstr(rlx_last_error(), "'w'"));
    rlx_trainer_free(o);
    rlx_graph_free(other);
    unlink(path);
}

static void test_errors(void **state)
{
    (void)state;
    rlx_graph *g = linear_model(N);
    rlx_trainer *tr = NULL;
    assert_int_equal(rlx_trainer_new(g, "nope", NULL, NULL, &tr), RLX_ERR_NOT_FOUND);
    assert_non_null(strstr(rlx_last_error(), "'nope'"));
    rlx_train_options t;
    rlx_train_options_init(&t);
    const char *frozen[1] = {"missing"};
    t.frozen = frozen, t.n_frozen = 1;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_ERR_NOT_FOUND);
    assert_non_null(strstr(rlx_last_error(), "missing"));
    rlx_train_options_init(&t);
    t.beta1 = 1.0;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_ERR_INVALID_ARGUMENT);
    rlx_train_options_init(&t);
    t.accumulate = 0;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_ERR_INVALID_ARGUMENT);
    /* a frozen param keeps its value */
    rlx_train_options_init(&t);
    const char *fb[1] = {"b"};
    t.frozen = fb, t.n_frozen = 1;
    assert_int_equal(rlx_trainer_new(g, "loss", &t, NULL, &tr), RLX_OK);
    ref_state st;
    init_params(tr, &st);
    float x[N * I], tt[N * O], b[O];
    random_batch(x, tt, N);
    rlx_trainer_set_input(tr, "x", x, sizeof x);
    rlx_trainer_set_input(tr, "t", tt, sizeof tt);
    assert_int_equal(rlx_trainer_set_input(tr, "opt.hyper", x, 16), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_trainer_step(tr, NULL), RLX_OK);
    rlx_trainer_get_param(tr, "b", b, sizeof b);
    for (int k = 0; k < O; k++)
        assert_true(b[k] == (float)st.p[I * O + k]);
    /* the step session's figures: params and AdamW state are persistent */
    rlx_compile_stats cs;
    assert_int_equal(rlx_trainer_stats(tr, &cs), RLX_OK);
    assert_true(cs.persistent_bytes >= 3 * (I * O + O) * sizeof(float) && cs.arena_bytes >= cs.persistent_bytes);
    assert_int_equal(rlx_trainer_stats(NULL, &cs), RLX_ERR_INVALID_ARGUMENT);
    rlx_trainer_free(tr);
    rlx_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optimizers),        cmocka_unit_test(test_loss_scaling),
        cmocka_unit_test(test_recompute),         cmocka_unit_test(test_accumulation),
        cmocka_unit_test(test_cross_entropy),     cmocka_unit_test(test_loss_falls),
        cmocka_unit_test(test_checkpoint_resume), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_grad_norm_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
