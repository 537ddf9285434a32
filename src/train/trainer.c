/* trainer.c - a training step as one compiled graph: the user's forward
 * and loss, the gradients rlx_gradients appends, the global gradient norm
 * (and clipping), and one optimizer_step node per trained param that
 * updates it and its optimizer state in place.  The per-step scalars
 * (learning rate from the schedule, bias corrections) arrive as a small
 * input, so the graph is compiled once.
 *
 * Under dynamic loss scaling the backward starts from loss * scale (an
 * input), the gradients are divided by it in the optimizer's gradient
 * scale, and a step whose gradients are not finite gets a NaN scale, which
 * the optimizer kernels take as "skip"; the host halves the scale then.
 *
 * With gradient accumulation a second graph, compiled sharing the params,
 * runs the first accumulate-1 micro-batches: it adds grad / accumulate
 * into an accumulator per param; the step graph adds its own share, steps,
 * and zeroes the accumulators. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "ir/ir.h"
#include "ir/op_math.h"
#include "train/train.h"

enum { MODE_STEP, MODE_ACCUMULATE };

/* torch.cuda.amp.GradScaler's defaults */
#define SCALE_INIT 65536.0
#define SCALE_GROWTH_INTERVAL 2000

typedef struct trained_param {
    char *name;
    rlx_dtype dtype;
    rlx_shape shape;
} trained_param;

struct rlx_trainer {
    rlx_train_options t;
    rlx_session *step, *accum; /* accum: NULL without accumulation */
    rlx_session *last;         /* the session the last step ran */
    trained_param *params;
    int n_params;
    char **state_names; /* every optimizer-state param (zeroed at start) */
    int n_states;
    char *loss;
    rlx_dtype loss_dtype;
    int64_t steps, micro;  /* optimizer steps taken; micro-batches since the last one */
    bool scaling;          /* dynamic loss scaling */
    double scale;          /* the loss scale of the next run */
    int64_t good, skipped; /* steps since the scale last changed; steps skipped */
    int recomputed;        /* activation checkpointing: values computed again, their bytes */
    size_t recomputed_bytes;
};

void rlx_train_options_init(rlx_train_options *t)
{
    if (!t)
        return;
    memset(t, 0, sizeof *t);
    t->optimizer = RLX_OPTIM_ADAMW;
    t->lr = 1e-3;
    t->beta1 = 0.9;
    t->beta2 = 0.999;
    t->eps = 1e-8;
    t->weight_decay = 0.01;
    t->accumulate = 1;
}

static rlx_status check_options(const rlx_train_options *t)
{
    if (t->optimizer < RLX_OPTIM_SGD || t->optimizer > RLX_OPTIM_ADAMW)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: unknown optimizer %d", (int)t->optimizer);
    if (!(t->lr >= 0) || !(t->min_lr >= 0) || !(t->weight_decay >= 0) || !(t->eps >= 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "trainer: lr (%g), min_lr (%g), weight decay (%g) and eps (%g) must be >= 0", t->lr,
                             t->min_lr, t->weight_decay, t->eps);
    if (!(t->beta1 >= 0 && t->beta1 < 1) || !(t->beta2 >= 0 && t->beta2 < 1))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: betas (%g, %g) must be in [0, 1)", t->beta1, t->beta2);
    if (!(t->momentum >= 0) || !(t->dampening >= 0 && t->dampening <= 1))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: momentum %g must be >= 0, dampening %g in [0, 1]",
                             t->momentum, t->dampening);
    if (t->nesterov && (t->momentum <= 0 || t->dampening != 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "trainer: Nesterov momentum needs momentum > 0 and no dampening");
    if (t->loss_scaling < -1 || t->loss_scaling > 1 || !(t->initial_loss_scale >= 0 && t->initial_loss_scale < 1e38))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: loss_scaling is -1, 0 or 1; the initial scale >= 0");
    if (t->accumulate < 1 || t->warmup_steps < 0 || t->decay_steps < 0 || !(t->clip_norm >= 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "trainer: accumulate must be >= 1; warm-up, decay steps and clip norm >= 0");
    if (t->recompute < 0 || t->recompute > 1)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: recompute is 0 or 1");
    if (t->n_frozen < 0 || (t->n_frozen && !t->frozen))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: bad frozen list");
    return RLX_OK;
}

static bool is_frozen(const rlx_train_options *t, const char *name)
{
    for (int i = 0; i < t->n_frozen; i++)
        if (t->frozen[i] && !strcmp(t->frozen[i], name))
            return true;
    return false;
}

static char *joined(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s%s", a, b);
    return s;
}

static rlx_node state_param(rlx_graph *g, const char *prefix, const rlx_node_data *p)
{
    char *name = joined(prefix, p->name);
    if (!name)
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    rlx_node s = rlx_param(g, name, p->dtype, p->shape.ndim, p->shape.dims);
    free(name);
    return s;
}

static rlx_node optimizer_node(rlx_graph *g, const rlx_optim_coef *c, rlx_node p, rlx_node grad, rlx_node hyper,
                               rlx_node gscale, rlx_node after, rlx_node s1, rlx_node s2)
{
    rlx_node_data n;
    memset(&n, 0, sizeof n);
    n.op = RLX_OP_OPTIMIZER_STEP;
    rlx_node in[7] = {p, grad, hyper, gscale, after, s1, s2};
    n.n_in = 5 + c->n_states;
    for (int i = 0; i < n.n_in; i++)
        n.in[i] = in[i];
    n.attrs.optim.kind = c->kind;
    n.attrs.optim.nesterov = c->nesterov;
    n.attrs.optim.beta1 = c->beta1;
    n.attrs.optim.beta2 = c->beta2;
    n.attrs.optim.eps = c->eps;
    n.attrs.optim.weight_decay = c->weight_decay;
    n.attrs.optim.momentum = c->momentum;
    n.attrs.optim.dampening = c->dampening;
    return rlx_graph_add(g, &n);
}

static rlx_node f32_of(rlx_graph *g, rlx_node x) { return g->nodes[x].dtype == RLX_F32 ? x : rlx_cast(g, x, RLX_F32); }

/* The sum of every element, in two stages (each row, then the row sums),
 * so that a device splits the work among many rows first. */
static rlx_node sum_all(rlx_graph *g, rlx_node x)
{
    int r = g->nodes[x].shape.ndim, last = r - 1, axes[RLX_MAX_DIMS];
    if (r >= 2)
        x = rlx_reduce_sum(g, x, 1, &last, 0), r--;
    for (int i = 0; i < r; i++)
        axes[i] = i;
    return r ? rlx_reduce_sum(g, x, r, axes, 0) : x;
}

/* Appends gradients and updates to g (a copy of the user's graph). */
static rlx_status build(rlx_graph *g, const rlx_trainer *tr, int mode, rlx_node *first_backward)
{
    const rlx_train_options *t = &tr->t;
    rlx_node loss = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->outputs[i].name, tr->loss))
            loss = g->outputs[i].node;
    int n = tr->n_params;
    rlx_node *p = malloc((size_t)(n ? n : 1) * sizeof *p), *gr = malloc((size_t)(n ? n : 1) * sizeof *gr);
    if (!p || !gr) {
        free(p), free(gr);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    }
    for (int i = 0, k = 0; i < g->n_nodes; i++)
        if (k < n && g->nodes[i].op == RLX_OP_PARAM && g->nodes[i].name &&
            !strcmp(g->nodes[i].name, tr->params[k].name))
            p[k++] = i;
    rlx_node scale = -1, seed = loss;
    if (tr->scaling) { /* the gradients of loss * scale; divided again below */
        scale = rlx_input(g, "opt.loss_scale", RLX_F32, 0, NULL);
        rlx_node sl = g->nodes[loss].dtype == RLX_F32 ? scale : rlx_cast(g, scale, g->nodes[loss].dtype);
        seed = rlx_mul(g, loss, sl);
    }
    *first_backward = g->n_nodes;
    rlx_status s = seed < 0 ? g->error : rlx_gradients(g, seed, n, p, gr);
    if (s != RLX_OK)
        goto out;
    double k_inv = 1.0 / t->accumulate;
    rlx_node hyper = rlx_input(g, "opt.hyper", RLX_F32, 1, (int64_t[]){4});
    rlx_optim_coef plain = {RLX_OPTIM_SGD, 0, 0, 0, 0, 0, 0, 0, 0};
    if (mode == MODE_ACCUMULATE) {
        rlx_node one = rlx_scalar(g, RLX_F32, 1.0);
        for (int i = 0; i < n; i++) {
            rlx_node acc = state_param(g, "opt.acc.", &g->nodes[p[i]]);
            optimizer_node(g, &plain, acc, gr[i], hyper, one, loss, -1, -1);
        }
    } else {
        /* the global norm where clipping, loss scaling or the caller needs
         * it: otherwise a reduction of every gradient per step for nothing */
        const bool want_norm = t->clip_norm > 0 || scale >= 0 || t->grad_norm;
        rlx_node norm2 = -1;
        for (int i = 0; i < n; i++) {
            if (t->accumulate > 1) {
                rlx_node acc = state_param(g, "opt.acc.", &g->nodes[p[i]]);
                gr[i] = rlx_add(g, rlx_mul(g, gr[i], rlx_scalar(g, g->nodes[gr[i]].dtype, k_inv)), acc);
            }
            if (want_norm) {
                rlx_node sq = f32_of(g, sum_all(g, rlx_mul(g, gr[i], gr[i])));
                norm2 = norm2 < 0 ? sq : rlx_add(g, norm2, sq);
            }
        }
        if (norm2 < 0)
            norm2 = rlx_scalar(g, RLX_F32, 0.0);
        /* the updates come after every gradient in the graph's order, which
         * the passes keep and the schedule runs: no update writes a param
         * before the backward's last read of it */
        rlx_node gscale = rlx_scalar(g, RLX_F32, 1.0);
        if (want_norm) {
            rlx_node norm = rlx_sqrt(g, norm2);
            if (scale >= 0)
                norm = rlx_div(g, norm, scale);
            rlx_output(g, "grad_norm", norm);
            if (t->clip_norm > 0)
                gscale = rlx_min(
                    g, rlx_div(g, rlx_scalar(g, RLX_F32, t->clip_norm), rlx_add(g, norm, rlx_scalar(g, RLX_F32, 1e-6))),
                    rlx_scalar(g, RLX_F32, 1.0));
        }
        if (scale >= 0) {
            /* unscaled; NaN (the optimizer then skips) where the gradients overflowed */
            rlx_node ok = rlx_equal(g, rlx_sub(g, norm2, norm2), rlx_scalar(g, RLX_F32, 0.0));
            gscale = rlx_where(g, ok, rlx_div(g, gscale, scale), rlx_scalar(g, RLX_F32, NAN));
        }
        rlx_optim_coef c = {(int)t->optimizer, t->nesterov, 0,           t->beta1, t->beta2, t->eps,
                            t->weight_decay,   t->momentum, t->dampening};
        c.n_states = t->optimizer == RLX_OPTIM_SGD ? (t->momentum != 0) : 2;
        for (int i = 0; i < n; i++) {
            rlx_node s1 = -1, s2 = -1;
            const rlx_node_data *pd = &g->nodes[p[i]];
            if (t->optimizer == RLX_OPTIM_SGD && c.n_states)
                s1 = state_param(g, "opt.buf.", pd);
            else if (t->optimizer != RLX_OPTIM_SGD) {
                s1 = state_param(g, "opt.m.", &g->nodes[p[i]]);
                s2 = state_param(g, "opt.v.", &g->nodes[p[i]]);
            }
            optimizer_node(g, &c, p[i], gr[i], hyper, gscale, loss, s1, s2);
        }
        if (t->accumulate > 1) { /* the accumulators start again from zero */
            static const float zero_step[4] = {1, 0, 0, 0};
            rlx_node h = rlx_constant(g, RLX_F32, 1, (int64_t[]){4}, zero_step, sizeof zero_step);
            rlx_node one = rlx_scalar(g, RLX_F32, 1.0);
            for (int i = 0; i < n; i++) {
                char *name = joined("opt.acc.", g->nodes[p[i]].name);
                rlx_node acc = -1;
                for (int j = 0; name && j < g->n_nodes; j++)
                    if (g->nodes[j].op == RLX_OP_PARAM && !strcmp(g->nodes[j].name, name))
                        acc = j;
                free(name);
                optimizer_node(g, &plain, acc, acc, h, one, gscale, -1, -1);
            }
        }
    }
    s = g->error;
    if (s != RLX_OK)
        rlx_set_error(s, "trainer: %s", g->error_msg);
out:
    free(p), free(gr);
    return s;
}

static rlx_status collect(rlx_trainer *tr, const rlx_graph *g)
{
    rlx_node loss = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->outputs[i].name, tr->loss))
            loss = g->outputs[i].node;
    if (loss < 0)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "trainer: the graph has no output named '%s' (the loss)", tr->loss);
    tr->loss_dtype = g->nodes[loss].dtype;
    for (int f = 0; f < tr->t.n_frozen; f++) {
        bool found = false;
        for (int i = 0; i < g->n_nodes && !found; i++)
            found = g->nodes[i].op == RLX_OP_PARAM && g->nodes[i].name && tr->t.frozen[f] &&
                    !strcmp(g->nodes[i].name, tr->t.frozen[f]);
        if (!found)
            return rlx_set_error(RLX_ERR_NOT_FOUND, "trainer: frozen param '%s' is not a param of the graph",
                                 tr->t.frozen[f] ? tr->t.frozen[f] : "(null)");
    }
    tr->params = calloc((size_t)g->n_nodes + 1, sizeof *tr->params);
    if (!tr->params)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op != RLX_OP_PARAM || !rlx_dtype_is_float(n->dtype) || is_frozen(&tr->t, n->name))
            continue;
        if (!strncmp(n->name, "opt.", 4))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                 "trainer: param '%s': names starting 'opt.' are the "
                                 "optimizer's",
                                 n->name);
        trained_param *tp = &tr->params[tr->n_params++];
        if (!(tp->name = strdup(n->name)))
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
        tp->dtype = n->dtype;
        tp->shape = n->shape;
    }
    if (!tr->n_params)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: the graph has no float param to train");
    return RLX_OK;
}

/* The optimizer-state params of the compiled step graph, zeroed. */
static rlx_status zero_states(rlx_trainer *tr)
{
    int n = rlx_session_count(tr->step, 1);
    tr->state_names = calloc((size_t)n + 1, sizeof *tr->state_names);
    if (!tr->state_names)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    for (int i = 0; i < n; i++) {
        rlx_tensor_info info;
        rlx_status s = rlx_session_info(tr->step, 1, i, &info);
        if (s != RLX_OK)
            return s;
        if (strncmp(info.name, "opt.", 4))
            continue;
        size_t bytes = rlx_dtype_size(info.dtype);
        for (int d = 0; d < info.ndim; d++)
            bytes *= (size_t)info.dims[d];
        void *z = calloc(bytes ? bytes : 1, 1);
        if (!z || !(tr->state_names[tr->n_states] = strdup(info.name))) {
            free(z);
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
        }
        tr->n_states++;
        s = rlx_session_set_param(tr->step, info.name, z, bytes);
        free(z);
        if (s != RLX_OK)
            return s;
    }
    return RLX_OK;
}

rlx_status rlx_trainer_new(const rlx_graph *g, const char *loss, const rlx_train_options *t, const rlx_options *o,
                           rlx_trainer **out)
{
    if (!out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: out is NULL");
    *out = NULL;
    if (!g || !loss)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: graph and loss name must be given");
    if (g->error != RLX_OK)
        return rlx_set_error(g->error, "%s", g->error_msg);
    rlx_trainer *tr = calloc(1, sizeof *tr);
    if (!tr)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    if (t)
        tr->t = *t;
    else
        rlx_train_options_init(&tr->t);
    rlx_status s = check_options(&tr->t);
    if (s == RLX_OK && !(tr->loss = strdup(loss)))
        s = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
    if (s == RLX_OK)
        s = collect(tr, g);
    rlx_options opts;
    if (o)
        opts = *o;
    else
        rlx_options_init(&opts);
    tr->scaling = tr->t.loss_scaling > 0 || (tr->t.loss_scaling == 0 && opts.precision == RLX_PRECISION_F16);
    tr->scale = tr->scaling ? (tr->t.initial_loss_scale > 0 ? tr->t.initial_loss_scale : SCALE_INIT) : 1.0;
    for (int mode = MODE_STEP; s == RLX_OK && mode <= (tr->t.accumulate > 1 ? MODE_ACCUMULATE : MODE_STEP); mode++) {
        rlx_graph *c = rlx_graph_clone(g);
        if (!c) {
            s = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer: out of memory");
            break;
        }
        rlx_node first_backward = 0;
        s = build(c, tr, mode, &first_backward);
        if (s == RLX_OK && tr->t.recompute) {
            int count = 0;
            size_t bytes = 0;
            rlx_graph *r = rlx_recompute_activations(c, first_backward, &count, &bytes);
            rlx_graph_free(c);
            if (!(c = r)) {
                s = RLX_ERR_OUT_OF_MEMORY;
                break;
            }
            if (mode == MODE_STEP)
                tr->recomputed = count, tr->recomputed_bytes = bytes;
        }
        if (s == RLX_OK)
            s = mode == MODE_STEP ? rlx_compile(c, &opts, &tr->step)
                                  : rlx_compile_shared(c, &opts, tr->step, &tr->accum);
        rlx_graph_free(c);
    }
    if (s == RLX_OK)
        s = zero_states(tr);
    if (s == RLX_OK && tr->accum) {
        const float h[4] = {(float)(-1.0 / tr->t.accumulate), 0, 0, 0}; /* acc - (-1/k) * grad */
        s = rlx_session_set_input(tr->accum, "opt.hyper", h, sizeof h);
    }
    if (s != RLX_OK) {
        rlx_trainer_free(tr);
        return s;
    }
    *out = tr;
    return RLX_OK;
}

void rlx_trainer_free(rlx_trainer *tr)
{
    if (!tr)
        return;
    rlx_session_free(tr->accum);
    rlx_session_free(tr->step);
    for (int i = 0; i < tr->n_params; i++)
        free(tr->params[i].name);
    free(tr->params);
    for (int i = 0; i < tr->n_states; i++)
        free(tr->state_names[i]);
    free(tr->state_names);
    free(tr->loss);
    free(tr);
}

static bool is_optimizer_name(const char *name) { return name && !strncmp(name, "opt.", 4); }

rlx_status rlx_trainer_set_param(rlx_trainer *tr, const char *name, const void *data, size_t bytes)
{
    if (!tr)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer is NULL");
    /* one param memory, shared by both sessions */
    return rlx_session_set_param(tr->step, name, data, bytes);
}

rlx_status rlx_trainer_get_param(rlx_trainer *tr, const char *name, void *data, size_t bytes)
{
    if (!tr)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer is NULL");
    return rlx_session_get_param(tr->step, name, data, bytes);
}

rlx_status rlx_trainer_set_input(rlx_trainer *tr, const char *name, const void *data, size_t bytes)
{
    if (!tr)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer is NULL");
    if (is_optimizer_name(name))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: input '%s' is the optimizer's own", name);
    rlx_status s = rlx_session_set_input(tr->step, name, data, bytes);
    if (s == RLX_OK && tr->accum)
        s = rlx_session_set_input(tr->accum, name, data, bytes);
    return s;
}

double rlx_trainer_lr(const rlx_trainer *tr)
{
    if (!tr)
        return NAN;
    const rlx_train_options *t = &tr->t;
    int64_t s = tr->steps;
    if (s < t->warmup_steps)
        return t->lr * (double)(s + 1) / t->warmup_steps;
    if (t->decay_steps <= 0)
        return t->lr;
    double progress = (double)(s - t->warmup_steps) / t->decay_steps;
    if (progress > 1)
        progress = 1;
    return t->min_lr + (t->lr - t->min_lr) * 0.5 * (1 + cos(M_PI * progress));
}

int64_t rlx_trainer_steps(const rlx_trainer *tr) { return tr ? tr->steps : -1; }

const rlx_session *rlx_trainer_session(const rlx_trainer *tr) { return tr ? tr->step : NULL; }

double rlx_trainer_loss_scale(const rlx_trainer *tr) { return tr ? tr->scale : NAN; }

int64_t rlx_trainer_skipped(const rlx_trainer *tr) { return tr ? tr->skipped : -1; }

void rlx_trainer_recomputed(const rlx_trainer *tr, int *count, size_t *bytes)
{
    if (count)
        *count = tr ? tr->recomputed : 0;
    if (bytes)
        *bytes = tr ? tr->recomputed_bytes : 0;
}

rlx_status rlx_trainer_stats(const rlx_trainer *tr, rlx_compile_stats *st)
{
    if (!tr || !st)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer stats: trainer and stats must be given");
    rlx_status s = rlx_session_stats(tr->step, st);
    rlx_compile_stats acc;
    if (s == RLX_OK && tr->accum && (s = rlx_session_stats(tr->accum, &acc)) == RLX_OK) {
        st->arena_bytes += acc.arena_bytes;
        st->transient_bytes += acc.transient_bytes;
    }
    return s;
}

/* The scalars of optimizer step tr->steps + 1 (op_math.h's layout). */
static void hyper_of(const rlx_trainer *tr, float h[4])
{
    const rlx_train_options *t = &tr->t;
    double lr = rlx_trainer_lr(tr), step = (double)(tr->steps + 1);
    if (t->optimizer == RLX_OPTIM_SGD) {
        h[0] = (float)lr, h[1] = tr->steps == 0 ? 1.0f : 0.0f, h[2] = 0, h[3] = 0;
        return;
    }
    double bc1 = 1 - pow(t->beta1, step), bc2 = 1 - pow(t->beta2, step);
    h[0] = (float)lr;
    h[1] = (float)(lr / bc1);
    h[2] = (float)sqrt(bc2);
    h[3] = (float)(1 - lr * t->weight_decay);
}

static double loss_value(const void *b, rlx_dtype t)
{
    switch (t) {
    case RLX_F32: return *(const float *)b;
    case RLX_F64: return *(const double *)b;
    case RLX_F16: return rlx_f16_to_f32(*(const uint16_t *)b);
    case RLX_BF16: return rlx_bf16_to_f32(*(const uint16_t *)b);
    default: return NAN;
    }
}

rlx_status rlx_trainer_step(rlx_trainer *tr, double *loss)
{
    if (!tr)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer is NULL");
    bool apply = tr->micro + 1 >= tr->t.accumulate;
    rlx_session *s = apply ? tr->step : tr->accum;
    rlx_status st = RLX_OK;
    if (apply) {
        float h[4];
        hyper_of(tr, h);
        st = rlx_session_set_input(s, "opt.hyper", h, sizeof h);
    }
    if (st == RLX_OK && tr->scaling) {
        float sc = (float)tr->scale;
        st = rlx_session_set_input(s, "opt.loss_scale", &sc, sizeof sc);
    }
    if (st == RLX_OK)
        st = rlx_session_run(s);
    if (st != RLX_OK)
        return st;
    tr->last = s;
    if (!apply) {
        tr->micro++;
    } else {
        tr->micro = 0;
        bool overflow = false;
        if (tr->scaling) {
            float norm = 0;
            st = rlx_session_get_output(s, "grad_norm", &norm, sizeof norm);
            if (st != RLX_OK)
                return st;
            overflow = !isfinite(norm);
        }
        if (overflow) { /* the updates skipped themselves: a smaller scale */
            tr->skipped++;
            tr->good = 0;
            tr->scale = fmax(tr->scale * 0.5, 1.0 / 65536);
        } else {
            tr->steps++;
            if (tr->scaling && ++tr->good >= SCALE_GROWTH_INTERVAL) {
                tr->good = 0;
                tr->scale = fmin(tr->scale * 2, 1e30);
            }
        }
    }
    if (loss) {
        unsigned char b[8];
        st = rlx_session_get_output(s, tr->loss, b, rlx_dtype_size(tr->loss_dtype));
        *loss = st == RLX_OK ? loss_value(b, tr->loss_dtype) : NAN;
    }
    return st;
}

rlx_status rlx_trainer_get_output(rlx_trainer *tr, const char *name, void *data, size_t bytes)
{
    if (!tr || !tr->last)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer: no step has run yet");
    if (name && !strcmp(name, "grad_norm") && !(tr->t.clip_norm > 0 || tr->scaling || tr->t.grad_norm))
        return rlx_set_error(RLX_ERR_NOT_FOUND, "trainer: no grad_norm: it is computed with clipping, loss scaling or "
                                                "rlx_train_options.grad_norm = 1");
    return rlx_session_get_output(tr->last, name, data, bytes);
}

/* ------------------------------------------------------------ checkpoints */

rlx_status rlx_trainer_save(rlx_trainer *tr, const char *path, int flags)
{
    if (!tr || !path)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer save: trainer and path must be given");
    int n = rlx_session_count(tr->step, 1);
    rlx_safetensors_entry *e = calloc((size_t)n + 2, sizeof *e);
    void **data = calloc((size_t)n + 1, sizeof *data);
    rlx_tensor_info *info = calloc((size_t)n + 1, sizeof *info);
    rlx_status s = e && data && info ? RLX_OK : rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer save: out of memory");
    for (int i = 0; s == RLX_OK && i < n; i++) {
        if ((s = rlx_session_info(tr->step, 1, i, &info[i])) != RLX_OK)
            break;
        size_t bytes = rlx_dtype_size(info[i].dtype);
        for (int d = 0; d < info[i].ndim; d++)
            bytes *= (size_t)info[i].dims[d];
        if (!(data[i] = malloc(bytes ? bytes : 1))) {
            s = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer save: out of memory");
            break;
        }
        s = rlx_session_get_param(tr->step, info[i].name, data[i], bytes);
        e[i] = (rlx_safetensors_entry){info[i].name, info[i].dtype, info[i].ndim, info[i].dims, data[i]};
    }
    int64_t counts[2] = {tr->steps, tr->micro};
    double scaler[3] = {tr->scale, (double)tr->good, (double)tr->skipped};
    if (s == RLX_OK) {
        e[n] = (rlx_safetensors_entry){"opt.step", RLX_I64, 1, (int64_t[]){2}, counts};
        e[n + 1] = (rlx_safetensors_entry){"opt.scaler", RLX_F64, 1, (int64_t[]){3}, scaler};
        s = rlx_safetensors_write(path, flags, e, n + 1 + tr->scaling);
    }
    for (int i = 0; data && i < n; i++)
        free(data[i]);
    free(data), free(e), free(info);
    return s;
}

rlx_status rlx_trainer_load(rlx_trainer *tr, const char *path)
{
    if (!tr || !path)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "trainer load: trainer and path must be given");
    rlx_safetensors *st = NULL;
    rlx_status s = rlx_safetensors_open(path, &st);
    if (s != RLX_OK)
        return s;
    const rlx_weight_view *v = NULL;
    int64_t counts[2] = {0, 0};
    s = rlx_safetensors_find(st, "opt.step", &v);
    if (s == RLX_OK && (v->dtype != RLX_I64 || v->numel != 2))
        s = rlx_set_error(RLX_ERR_FORMAT, "trainer load '%s': opt.step must be i64 [2]", path);
    if (s == RLX_OK)
        s = rlx_weight_view_read(v, RLX_I64, counts, sizeof counts);
    if (s == RLX_OK && (counts[0] < 0 || counts[1] < 0 || counts[1] >= tr->t.accumulate))
        s = rlx_set_error(RLX_ERR_FORMAT, "trainer load '%s': step counts %lld, %lld do not fit accumulate = %d", path,
                          (long long)counts[0], (long long)counts[1], tr->t.accumulate);
    double scaler[3] = {tr->scale, (double)tr->good, (double)tr->skipped};
    if (s == RLX_OK && tr->scaling) {
        if (rlx_safetensors_find(st, "opt.scaler", &v) != RLX_OK || v->dtype != RLX_F64 || v->numel != 3)
            s = rlx_set_error(RLX_ERR_FORMAT, "trainer load '%s': no loss scaler state (opt.scaler, f64 [3])", path);
        else if ((s = rlx_weight_view_read(v, RLX_F64, scaler, sizeof scaler)) == RLX_OK &&
                 !(scaler[0] > 0 && scaler[0] < 1e38 && scaler[1] >= 0 && scaler[2] >= 0))
            s = rlx_set_error(RLX_ERR_FORMAT, "trainer load '%s': loss scaler state out of range", path);
    }
    /* every param of the session from the file: checked first, then set,
     * so that a bad file changes nothing */
    int n = rlx_session_count(tr->step, 1);
    void **data = calloc((size_t)n + 1, sizeof *data);
    size_t *size = calloc((size_t)n + 1, sizeof *size);
    rlx_tensor_info *info = calloc((size_t)n + 1, sizeof *info);
    if (s == RLX_OK && (!data || !size || !info))
        s = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer load: out of memory");
    for (int i = 0; s == RLX_OK && i < n; i++) {
        if ((s = rlx_session_info(tr->step, 1, i, &info[i])) != RLX_OK)
            break;
        if ((s = rlx_safetensors_find(st, info[i].name, &v)) != RLX_OK) {
            s = rlx_set_error(RLX_ERR_NOT_FOUND, "trainer load '%s': no tensor '%s'", path, info[i].name);
            break;
        }
        bool same = v->dtype == info[i].dtype && v->ndim == info[i].ndim;
        for (int d = 0; same && d < v->ndim; d++)
            same = v->dims[d] == info[i].dims[d];
        if (!same) {
            s = rlx_set_error(RLX_ERR_SHAPE, "trainer load '%s': tensor '%s' is %s of %d dims; the model's is %s", path,
                              info[i].name, v->type_name, v->ndim, rlx_dtype_name(info[i].dtype));
            break;
        }
        size[i] = v->nbytes;
        if (!(data[i] = malloc(size[i] ? size[i] : 1)))
            s = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "trainer load: out of memory");
        else
            s = rlx_weight_view_read(v, info[i].dtype, data[i], size[i]);
    }
    for (int i = 0; s == RLX_OK && i < n; i++)
        s = rlx_session_set_param(tr->step, info[i].name, data[i], size[i]);
    if (s == RLX_OK) {
        tr->steps = counts[0];
        tr->micro = counts[1];
        tr->scale = scaler[0];
        tr->good = (int64_t)scaler[1];
        tr->skipped = (int64_t)scaler[2];
    }
    for (int i = 0; data && i < n; i++)
        free(data[i]);
    free(data), free(size), free(info);
    rlx_safetensors_close(st);
    return s;
}
