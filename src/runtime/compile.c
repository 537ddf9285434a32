/* compile.c - the compile step, stage by stage:
 *
 *   verify -> simplify (dce, cse, fold) -> fuse -> amp -> layout -> lower -> claim
 *   -> memory plan -> scratch -> arena -> constants -> thunk schedule
 *   -> slots -> pre-encode
 *
 * Each stage is timed and, with RLX_VERBOSE=1, reported on stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/branch.h"
#include "runtime/runtime.h"

static const char *stage_names[RLX_STAGE_COUNT] = {
    "verify", "simplify", "fuse",  "amp",       "layout",   "lower", "claim",
    "plan",   "scratch",  "arena", "constants", "schedule", "slots", "pre-encode",
};

const char *rlx_stage_name(rlx_stage s) { return (unsigned)s < RLX_STAGE_COUNT ? stage_names[s] : "?"; }

static void say(const rlx_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const rlx_session *s, const char *fmt, ...)
{
    if (!s->opts.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[rlx %s] ", s->backend->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

typedef struct peak_kind {
    rlx_op op;
    rlx_dtype dtype;
    int buffers;
    size_t bytes;
} peak_kind;

static int by_bytes_desc(const void *a, const void *b)
{
    size_t x = ((const peak_kind *)a)->bytes, y = ((const peak_kind *)b)->bytes;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* RLX_VERBOSE >= 2: what the transient region holds at the plan's peak, by
 * the op and dtype of the node that made each live buffer, largest first
 * (where a training step's memory goes: saved activations, logits, ...). */
static void say_plan_peak(const rlx_session *s)
{
    const rlx_plan *p = &s->plan;
    if (s->opts.verbose < 2 || p->peak_step < 0)
        return;
    peak_kind *k = rlx_calloc((size_t)p->n_buffers + 1, sizeof *k);
    if (!k)
        return;
    int nk = 0;
    for (int b = 0; b < p->n_buffers; b++) {
        const rlx_buffer *buf = &p->buffers[b];
        if (buf->region != RLX_REGION_TRANSIENT || buf->first > p->peak_step || buf->last < p->peak_step)
            continue;
        const rlx_node_data *nd = &s->graph->nodes[buf->first];
        int j = 0;
        while (j < nk && !(k[j].op == nd->op && k[j].dtype == nd->dtype))
            j++;
        if (j == nk)
            k[nk++] = (peak_kind){nd->op, nd->dtype, 0, 0};
        k[j].buffers++;
        k[j].bytes += buf->size;
    }
    qsort(k, (size_t)nk, sizeof *k, by_bytes_desc);
    const rlx_node_data *at = &s->graph->nodes[p->peak_step < s->graph->n_nodes ? p->peak_step : 0];
    say(s, "plan peak: %zu B live at node %d (%s), by the op that made each buffer:", p->lower_bound, p->peak_step,
        rlx_op_name(at->op));
    for (int j = 0; j < nk && j < 12; j++)
        say(s, "  %-24s %-5s %5d buffers %10.1f MiB", rlx_op_name(k[j].op), rlx_dtype_name(k[j].dtype), k[j].buffers,
            (double)k[j].bytes / 1048576.0);
    free(k);
}

rlx_graph *rlx_simplify(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    static const rlx_pass passes[] = {{"dce", rlx_pass_dce},
                                      {"cse", rlx_pass_cse},
                                      {"fold", rlx_pass_fold},
                                      {"canon", rlx_pass_canon},
                                      {"dce", rlx_pass_dce}};
    rlx_graph *cur = NULL;
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++) {
        rlx_graph *next = passes[i].run(cur ? cur : g, ctx);
        rlx_graph_free(cur);
        if (!next)
            return NULL;
        cur = next;
    }
    return cur;
}

rlx_status rlx_cpu_evaluate(const rlx_graph *g, rlx_node id, void *out, const void *settings)
{
    const rlx_backend *cpu = rlx_cpu_backend();
    const rlx_node_data *n = &g->nodes[id];
    if (!cpu->supports(g, id))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "no CPU kernel for %s", rlx_op_name(n->op));
    rlx_thunk t;
    memset(&t, 0, sizeof t);
    t.id = id;
    t.node = n;
    t.out = out;
    for (int i = 0; i < n->n_in; i++) {
        t.in_node[i] = &g->nodes[n->in[i]];
        t.in[i] = g->nodes[n->in[i]].data;
    }
    t.scratch_bytes = cpu->scratch_bytes(g, id, 1);
    void *scratch = NULL;
    if (t.scratch_bytes && !(scratch = rlx_malloc(t.scratch_bytes)))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "fold: no memory for scratch");
    t.scratch = scratch;
    rlx_status s = cpu->prepare(cpu, g, &t);
    if (s == RLX_OK && t.fn) {
        rlx_run_ctx ctx = {.seed = 0, .run_index = 0, .threads = 1, .settings = settings};
        s = t.fn(&t, &ctx);
    }
    if (cpu->release)
        cpu->release(cpu, &t);
    free(scratch);
    return s;
}

/* Replaces *g by next (taking ownership); false if next is NULL. */
static bool advance(rlx_graph **g, rlx_graph *next)
{
    if (!next)
        return false;
    rlx_graph_free(*g);
    *g = next;
    return true;
}

static rlx_status check_claim(const rlx_session *s, const rlx_graph *g)
{
    char msg[2048];
    size_t used = 0;
    int missing = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (s->backend->supports(g, i))
            continue;
        char label[160];
        if (missing < 16 && used < sizeof msg)
            used += (size_t)snprintf(msg + used, sizeof msg - used, "%s%s %s", missing ? "; " : "",
                                     rlx_node_label(g, i, label, sizeof label), rlx_dtype_name(g->nodes[i].dtype));
        missing++;
    }
    if (!missing)
        return RLX_OK;
    return rlx_set_error(RLX_ERR_UNSUPPORTED, "the %s backend cannot run %d node(s): %s%s", s->backend->name, missing,
                         msg, missing > 16 ? "; ..." : "");
}

/* Where node i's value lives: the arena, or a shared param's memory. */
static char *node_ptr(const rlx_session *s, rlx_node i)
{
    const rlx_tensor_slot *sl = &s->plan.slots[i];
    return (sl->external ? (char *)s->ext[sl->root] : (char *)s->arena) + sl->offset;
}

/* The constant a stateful op writes into (through views), or -1. */
static rlx_node written_constant(const rlx_graph *g, rlx_node id)
{
    const rlx_node_data *n = &g->nodes[id];
    if (!(rlx_op_info_of(n->op)->flags & RLX_OPF_STATEFUL) || n->n_in < 1)
        return -1;
    rlx_node x = n->in[0];
    size_t off;
    while (g->nodes[x].op != RLX_OP_CONSTANT && rlx_node_is_view(g, x, &off))
        x = g->nodes[x].in[0];
    return g->nodes[x].op == RLX_OP_CONSTANT ? x : -1;
}

/* On a backend whose memory is the host's, constants stay in the graph's
 * blobs (shared with the graph compiled from) instead of a second copy in
 * the arena; a constant that a stateful op writes into keeps its slot. */
static void use_graph_constants(rlx_session *s, bool *external)
{
    const rlx_graph *g = s->graph;
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op == RLX_OP_CONSTANT && n->data && n->blob && n->data_bytes == rlx_node_bytes(n)) {
            external[i] = true;
            s->ext[i] = n->data;
        }
    }
    for (int i = 0; i < g->n_nodes; i++) {
        rlx_node c = written_constant(g, i);
        if (c >= 0) {
            external[c] = false;
            s->ext[c] = NULL;
        }
    }
}

/* Marks what lives outside the arena and records its address: on the CPU
 * the constants, and with rlx_compile_shared the params that the other
 * session has (same name, dtype and shape). */
static rlx_status find_external(rlx_session *s, bool **external)
{
    const rlx_session *o = s->params_from;
    const rlx_graph *g = s->graph;
    bool host = s->backend->device == RLX_DEVICE_CPU;
    *external = NULL;
    if (!o && !host)
        return RLX_OK;
    if (o && o->backend != s->backend)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "shared params: the sessions are on different devices (%s:%d, %s:%d)", o->backend->name,
                             o->backend->index, s->backend->name, s->backend->index);
    if (!(*external = rlx_calloc((size_t)g->n_nodes + 1, sizeof(bool))) ||
        !(s->ext = rlx_calloc((size_t)g->n_nodes + 1, sizeof(void *))))
        return RLX_ERR_OUT_OF_MEMORY;
    if (host)
        use_graph_constants(s, *external);
    for (int i = 0; o && i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        if (n->op != RLX_OP_PARAM || !n->name)
            continue;
        for (int k = 0; k < o->n_io[1]; k++) {
            const rlx_io_slot *p = &o->io[1][k];
            if (strcmp(p->name, n->name) != 0)
                continue;
            const rlx_node_data *pn = &o->graph->nodes[p->node];
            if (pn->dtype != n->dtype || !rlx_shape_equal(&pn->shape, &n->shape)) {
                char a[128], b[128];
                return rlx_set_error(RLX_ERR_SHAPE, "shared param '%s' is %s%s here and %s%s in the other session",
                                     n->name, rlx_dtype_name(n->dtype), rlx_shape_str(&n->shape, a, sizeof a),
                                     rlx_dtype_name(pn->dtype), rlx_shape_str(&pn->shape, b, sizeof b));
            }
            (*external)[i] = true;
            s->ext[i] = p->ptr;
        }
    }
    return RLX_OK;
}

static rlx_status add_io(rlx_session *s, int kind, const char *name, rlx_node node)
{
    int k = s->n_io[kind];
    rlx_io_slot *p = rlx_realloc_array(s->io[kind], (size_t)k + 1, sizeof *p);
    if (!p)
        return RLX_ERR_OUT_OF_MEMORY;
    s->io[kind] = p;
    memset(&p[k], 0, sizeof p[k]);
    p[k].name = rlx_strdup(name ? name : "");
    if (!p[k].name)
        return RLX_ERR_OUT_OF_MEMORY;
    p[k].node = node;
    p[k].ptr = node_ptr(s, node);
    p[k].bytes = s->plan.slots[node].bytes;
    p[k].set = s->plan.slots[node].external; /* its owner session sets it */
    s->n_io[kind]++;
    return RLX_OK;
}

static rlx_status plan_with_limits(rlx_session *s, const rlx_graph *g, const bool *external)
{
    rlx_plan_options po = {
        .alignment = s->backend->alignment,
        .no_reuse = s->opts.no_reuse != 0,
        .no_inplace = s->opts.no_inplace != 0,
        .pin_output_ancestors = s->opts.pin_output_ancestors != 0,
        .inplace_elementwise = s->backend->inplace_elementwise,
        .external = external,
    };
    rlx_status st = rlx_plan_memory(g, &po, &s->plan);
    if (st != RLX_OK)
        return st;
    size_t limit = s->backend->max_buffer(s->backend);
    /* RLX_MAX_BUFFER_BYTES: act as if the device's largest buffer were this
     * small (to rehearse memory-constrained devices). */
    size_t cap = s->settings.max_buffer_bytes;
    if (cap > 0 && cap < limit)
        limit = cap;
    if (s->plan.arena_bytes > limit && (po.no_reuse || po.pin_output_ancestors)) {
        say(s, "arena %zu B exceeds the largest buffer %zu B; re-planning with slot reuse and no pinning",
            s->plan.arena_bytes, limit);
        rlx_plan_free(&s->plan);
        po.no_reuse = false;
        po.pin_output_ancestors = false;
        if ((st = rlx_plan_memory(g, &po, &s->plan)) != RLX_OK)
            return st;
    }
    if (s->plan.arena_bytes > limit)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "the arena needs %zu bytes, the %s device's largest buffer is %zu",
                             s->plan.arena_bytes, s->backend->name, limit);
    return RLX_OK;
}

static rlx_status build_schedule(rlx_session *s)
{
    const rlx_graph *g = s->graph;
    s->schedule.thunks = rlx_calloc((size_t)g->n_nodes + 1, sizeof(rlx_thunk));
    if (!s->schedule.thunks)
        return RLX_ERR_OUT_OF_MEMORY;
    s->schedule.graph = g;
    rlx_node *cond = rlx_malloc((size_t)g->n_nodes * sizeof *cond + 1);
    uint8_t *when = rlx_malloc((size_t)g->n_nodes + 1);
    rlx_status st = cond && when ? rlx_branch_guards(g, cond, when) : RLX_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < g->n_nodes && st == RLX_OK; i++) {
        rlx_thunk *t = &s->schedule.thunks[s->schedule.n_thunks++];
        const rlx_node_data *n = &g->nodes[i];
        t->id = i;
        t->node = n;
        t->out = node_ptr(s, i);
        for (int j = 0; j < n->n_in; j++) {
            t->in_node[j] = &g->nodes[n->in[j]];
            t->in[j] = node_ptr(s, n->in[j]);
        }
        if (s->plan.slots[i].view || s->plan.slots[i].bytes == 0) {
            t->fn = NULL; /* an alias: nothing to compute */
            s->schedule.n_noop++;
            continue;
        }
        t->scratch_bytes = s->backend->scratch_bytes(g, i, s->opts.threads);
        t->scratch = t->scratch_bytes ? (char *)s->arena + s->scratch_offset : NULL;
        t->keep_bytes = s->keep_bytes ? s->keep_bytes[i] : 0;
        t->keep = t->keep_bytes ? (char *)s->arena + s->keep_offset[i] : NULL;
        st = s->backend->prepare(s->backend, g, t);
        if (st == RLX_OK && !t->fn)
            s->schedule.n_noop++;
        if (st == RLX_OK && t->fn && cond[i] >= 0) {
            t->guard = (const uint8_t *)node_ptr(s, cond[i]);
            t->guard_when = when[i];
            s->schedule.n_guarded++;
        }
    }
    free(cond);
    free(when);
    return st;
}

/* The arena's size is known before it is allocated: refuse one over the
 * option's (or RLX_MAX_ARENA's) limit, and on the CPU one over the memory
 * the machine has available, naming the sizes. */
static const char *human_bytes(size_t n, char *buf, size_t cap)
{
    if (n >= (size_t)1 << 30)
        snprintf(buf, cap, "%.1f GiB", (double)n / (1 << 30));
    else if (n >= (size_t)1 << 20)
        snprintf(buf, cap, "%.1f MiB", (double)n / (1 << 20));
    else
        snprintf(buf, cap, "%.1f KiB", (double)n / 1024);
    return buf;
}

static rlx_status check_arena_limits(rlx_session *s)
{
    size_t need = s->arena_bytes;
    char h1[32], h2[32];
    if (s->opts.max_arena_bytes && need > s->opts.max_arena_bytes)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY,
                             "the arena needs %zu bytes (%s), over the limit of %zu bytes (%s) "
                             "set by max_arena_bytes / RLX_MAX_ARENA / --max-memory",
                             need, human_bytes(need, h1, sizeof h1), s->opts.max_arena_bytes,
                             human_bytes(s->opts.max_arena_bytes, h2, sizeof h2));
    if (s->opts.device == RLX_DEVICE_CPU) {
        size_t avail = rlx_available_memory();
        if (avail && need > avail)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY,
                                 "the arena needs %zu bytes (%s), more than the %zu bytes (%s) of memory "
                                 "available",
                                 need, human_bytes(need, h1, sizeof h1), avail, human_bytes(avail, h2, sizeof h2));
    }
    return RLX_OK;
}

static rlx_status compile_stages(rlx_session *s, const rlx_graph *user)
{
    rlx_compile_stats *st = &s->stats;
    double t0 = rlx_now_ms(), t;
    rlx_status rc;
#define STAGE_DONE(stage) (t = rlx_now_ms(), st->stage_ms[stage] = t - t0, t0 = t)

    /* 1. verify */
    if ((rc = rlx_graph_verify(user)) != RLX_OK)
        return rc;
    if (!(s->graph = rlx_graph_clone(user)) || rlx_bound_inputs_copy(user, &s->bound, &s->n_bound) != RLX_OK)
        return RLX_ERR_OUT_OF_MEMORY;
    st->nodes_in = s->graph->n_nodes;
    STAGE_DONE(RLX_STAGE_VERIFY);
    say(s, "verify: %d nodes, %d outputs", st->nodes_in, user->n_outputs);

    rlx_status pass_failure = RLX_OK; /* a probe that could not allocate */
#define PASS_FAILED(name)                                                                                             \
    (pass_failure != RLX_OK ? rlx_set_error(pass_failure, "%s: out of memory while asking the backend's claim", name) \
                            : RLX_OK)
    rlx_opt_stats ost;
    memset(&ost, 0, sizeof ost);
    rlx_pass_ctx pc = {
        .supports = s->backend->supports,
        .evaluate = rlx_cpu_evaluate,
        .evaluate_arg = &s->settings,
        .precision = s->opts.precision,
        .fold_limit = (size_t)64 << 20,
        .verbose = s->opts.verbose,
        .stats = &ost,
        .failure = &pass_failure,
    };
    /* 2. simplify */
    if (!s->opts.no_simplify && !advance(&s->graph, rlx_simplify(s->graph, &pc)))
        return rlx_last_status_or(RLX_ERR_INTERNAL);
    st->nodes_after_simplify = s->graph->n_nodes;
    if (PASS_FAILED("simplify") != RLX_OK) {
        return pass_failure;
    }
    STAGE_DONE(RLX_STAGE_SIMPLIFY);
    say(s, "simplify (dce, cse, fold): %d -> %d nodes%s", st->nodes_in, st->nodes_after_simplify,
        s->opts.no_simplify ? " (disabled)" : "");

    /* 3. fusion, aware of what the backend claims */
    rlx_graph *before_fusion = s->opts.dispatch_report ? rlx_graph_clone(s->graph) : NULL;
    if (!s->opts.no_fusion && !advance(&s->graph, rlx_opt_fuse(s->graph, &pc))) {
        rlx_graph_free(before_fusion);
        return rlx_last_status_or(RLX_ERR_INTERNAL);
    }
    st->nodes_after_fusion = s->graph->n_nodes;
    if (PASS_FAILED("fuse") != RLX_OK) {
        rlx_graph_free(before_fusion);
        return pass_failure;
    }
    STAGE_DONE(RLX_STAGE_FUSE);
    say(s, "fuse: %d -> %d nodes%s", st->nodes_after_simplify, st->nodes_after_fusion,
        s->opts.no_fusion ? " (disabled)" : "");

    /* 4. automatic mixed precision, after fusion */
    if (s->opts.precision != RLX_PRECISION_F32) {
        if (s->opts.no_amp) {
            fprintf(stderr, "[rlx] note: precision %s requested but mixed precision is disabled; running f32\n",
                    s->opts.precision == RLX_PRECISION_F16 ? "f16" : "bf16");
            s->opts.precision = RLX_PRECISION_F32;
        } else if (!advance(&s->graph, rlx_opt_amp(s->graph, &pc))) {
            rlx_graph_free(before_fusion);
            return rlx_last_status_or(RLX_ERR_INTERNAL);
        }
    }
    if (PASS_FAILED("amp") != RLX_OK) {
        rlx_graph_free(before_fusion);
        return pass_failure;
    }
    STAGE_DONE(RLX_STAGE_AMP);
    say(s, "amp: %d nodes (precision %s)", s->graph->n_nodes,
        s->opts.precision == RLX_PRECISION_F32 ? "f32" : (s->opts.precision == RLX_PRECISION_F16 ? "f16" : "bf16"));

    /* 5. channels-last convolutions where the backend claims them */
    int nodes_before_layout = s->graph->n_nodes;
    if (!s->opts.no_layout && !advance(&s->graph, rlx_pass_layout(s->graph, &pc))) {
        rlx_graph_free(before_fusion);
        return rlx_last_status_or(RLX_ERR_INTERNAL);
    }
    st->channels_last = ost.layout_convs + ost.layout_pools;
    if (PASS_FAILED("layout") != RLX_OK) {
        rlx_graph_free(before_fusion);
        return pass_failure;
    }
    STAGE_DONE(RLX_STAGE_LAYOUT);
    say(s, "layout: %d -> %d nodes (%d conv, %d pool channels-last; transposes %d cancelled, %d left)%s",
        nodes_before_layout, s->graph->n_nodes, ost.layout_convs, ost.layout_pools, ost.layout_transposes_removed,
        ost.layout_transposes_left, s->opts.no_layout ? " (disabled)" : "");

    /* 6. lowering of what the backend cannot run natively */
    if (!advance(&s->graph, rlx_opt_lower(s->graph, &pc))) {
        rlx_graph_free(before_fusion);
        return rlx_last_status_or(RLX_ERR_INTERNAL);
    }
    st->nodes_final = s->graph->n_nodes;
    if (PASS_FAILED("lower") != RLX_OK) {
        return pass_failure;
    }
    STAGE_DONE(RLX_STAGE_LOWER);
    say(s, "lower: %d nodes", st->nodes_final);

    /* 7. the backend's claim covers every node */
    if (s->opts.dispatch_report) {
        /* kept as text for rlx_session_report; 1 also prints it */
        size_t len = 0;
        FILE *mf = open_memstream(&s->report, &len);
        if (mf) {
            rlx_opt_dispatch_report(before_fusion ? before_fusion : s->graph, s->graph, s->backend, &ost, mf);
            fclose(mf);
        }
        if (s->opts.dispatch_report == 1) {
            if (s->report)
                fputs(s->report, stderr);
            else
                rlx_opt_dispatch_report(before_fusion ? before_fusion : s->graph, s->graph, s->backend, &ost, stderr);
        }
    }
    rlx_graph_free(before_fusion);
    if ((rc = check_claim(s, s->graph)) != RLX_OK)
        return rc;
    STAGE_DONE(RLX_STAGE_CLAIM);

    /* 8. memory plan */
    bool *external = NULL;
    if ((rc = find_external(s, &external)) == RLX_OK)
        rc = plan_with_limits(s, s->graph, external);
    free(external);
    if (rc != RLX_OK)
        return rc;
    st->persistent_bytes = s->plan.persistent_bytes;
    st->transient_bytes = s->plan.transient_bytes;
    st->transient_lower_bound = s->plan.lower_bound;
    st->buffers = s->plan.n_buffers;
    STAGE_DONE(RLX_STAGE_PLAN);
    say(s,
        "plan: %d buffers (%d views, %d in place); persistent %zu B; transient %zu B vs lower bound %zu B (%.1f%%)%s",
        s->plan.n_buffers, s->plan.n_views, s->plan.n_inplace, s->plan.persistent_bytes, s->plan.transient_bytes,
        s->plan.lower_bound,
        s->plan.lower_bound ? 100.0 * (double)s->plan.transient_bytes / (double)s->plan.lower_bound - 100.0 : 0.0,
        s->opts.no_reuse ? " [no reuse]" : "");
    say_plan_peak(s);

    /* 9. scratch: one region at the tail, as large as the largest need */
    size_t scratch = 0;
    for (int i = 0; i < s->graph->n_nodes; i++) {
        size_t need = s->backend->scratch_bytes(s->graph, i, s->opts.threads);
        if (need > scratch)
            scratch = need;
    }
    s->scratch_offset = align_up(s->plan.arena_bytes, s->backend->alignment);
    s->arena_bytes = s->scratch_offset + align_up(scratch, s->backend->alignment);
    st->scratch_bytes = scratch;
    /* then one region per node that keeps something across runs */
    size_t keep = 0;
    if (s->backend->keep_bytes) {
        size_t n = (size_t)s->graph->n_nodes + 1;
        if (!(s->keep_bytes = rlx_calloc(n, sizeof *s->keep_bytes)) ||
            !(s->keep_offset = rlx_calloc(n, sizeof *s->keep_offset)))
            return RLX_ERR_OUT_OF_MEMORY;
        s->backend->keep_bytes(s->graph, s->keep_bytes);
        for (int i = 0; i < s->graph->n_nodes; i++) {
            s->keep_offset[i] = s->arena_bytes + keep;
            keep += align_up(s->keep_bytes[i], s->backend->alignment);
        }
        s->arena_bytes += keep;
    }
    STAGE_DONE(RLX_STAGE_SCRATCH);
    say(s, "scratch: %zu B at offset %zu; kept across runs: %zu B", scratch, s->scratch_offset, keep);

    /* 10. the arena, allocated once, if it fits the limits */
    if ((rc = check_arena_limits(s)) != RLX_OK)
        return rc;
    if ((rc = s->backend->alloc(s->backend, s->arena_bytes, &s->arena)) != RLX_OK)
        return rc;
    st->arena_bytes = s->arena_bytes;
    STAGE_DONE(RLX_STAGE_ARENA);
    say(s, "arena: %zu B", s->arena_bytes);

    /* 11. constants copied in */
    size_t const_bytes = 0;
    for (int i = 0; i < s->graph->n_nodes; i++) {
        const rlx_node_data *n = &s->graph->nodes[i];
        if (n->op != RLX_OP_CONSTANT || !s->plan.slots[i].bytes || s->plan.slots[i].external)
            continue;
        if ((rc = s->backend->upload(s->backend, (char *)s->arena + s->plan.slots[i].offset, n->data, n->data_bytes)) !=
            RLX_OK)
            return rc;
        const_bytes += n->data_bytes;
    }
    STAGE_DONE(RLX_STAGE_CONSTANTS);
    say(s, "constants: %zu B", const_bytes);

    /* 12. thunk schedule */
    if ((rc = build_schedule(s)) != RLX_OK)
        return rc;
    st->thunks = s->schedule.n_thunks;
    st->noop_thunks = s->schedule.n_noop;
    STAGE_DONE(RLX_STAGE_SCHEDULE);
    say(s, "schedule: %d thunks (%d compute, %d no-op); %d run only on one side of a run-time branch", st->thunks,
        st->thunks - st->noop_thunks, st->noop_thunks, s->schedule.n_guarded);

    /* 13. slots: names -> arena offsets */
    for (int i = 0; i < s->graph->n_nodes; i++) {
        const rlx_node_data *n = &s->graph->nodes[i];
        if ((n->op == RLX_OP_INPUT && (rc = add_io(s, 0, n->name, i)) != RLX_OK) ||
            (n->op == RLX_OP_PARAM && (rc = add_io(s, 1, n->name, i)) != RLX_OK))
            return rc;
    }
    for (int i = 0; i < s->graph->n_outputs; i++)
        if ((rc = add_io(s, 2, s->graph->outputs[i].name, s->graph->outputs[i].node)) != RLX_OK)
            return rc;
    STAGE_DONE(RLX_STAGE_SLOTS);
    say(s, "slots: %d inputs, %d params, %d outputs", s->n_io[0], s->n_io[1], s->n_io[2]);

    /* 14. pre-encoding (graph capture) where the backend offers it */
    if (!s->opts.no_preencode && s->backend->finalize &&
        (rc = s->backend->finalize(s->backend, &s->schedule, &s->run_ctx)) != RLX_OK)
        return rc;
    STAGE_DONE(RLX_STAGE_PREENCODE);
    if (s->backend->finalize)
        say(s, "pre-encode: %s", s->opts.no_preencode ? "disabled" : "recorded");
    if (s->opts.verbose) {
        double total = 0;
        fprintf(stderr, "[rlx %s] stage times (ms):", s->backend->name);
        for (int i = 0; i < RLX_STAGE_COUNT; i++) {
            fprintf(stderr, " %s %.2f", stage_names[i], st->stage_ms[i]);
            total += st->stage_ms[i];
        }
        fprintf(stderr, "; total %.2f\n", total);
    }
    return RLX_OK;
#undef STAGE_DONE
#undef PASS_FAILED
}

rlx_status rlx_compile(const rlx_graph *g, const rlx_options *o, rlx_session **out)
{
    return rlx_compile_shared(g, o, NULL, out);
}

rlx_status rlx_compile_shared(const rlx_graph *g, const rlx_options *o, const rlx_session *params_from,
                              rlx_session **out)
{
    if (!g || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_compile: graph and out must not be NULL");
    *out = NULL;
    rlx_clear_error(); /* a failed stage returns the status it set */
    rlx_session *s = rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    s->params_from = params_from;
    if (o)
        s->opts = *o;
    else
        rlx_options_init(&s->opts);
    rlx_options_apply_env(&s->opts);
    if (s->opts.threads < 0 || s->opts.threads > 1024) {
        int t = s->opts.threads;
        rlx_session_free(s);
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "rlx_compile: threads %d is out of range (0 = all cores, "
                             "at most 1024)",
                             t);
    }
    if (s->opts.threads <= 0) {
        long n = rlx_cpu_count();
        s->opts.threads = n > 0 ? (int)n : 1;
    }
    rlx_status rc;
    if ((unsigned)s->opts.precision > RLX_PRECISION_BF16) {
        rc = rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_compile: unknown precision %d", (int)s->opts.precision);
        goto fail;
    }
    if ((rc = rlx_backend_get(s->opts.device, s->opts.device_index, &s->backend)) != RLX_OK)
        goto fail;
    /* the backend's settings, read once here and handed to it: before the
     * optimizer asks its claim, and in every run context */
    rlx_backend_settings_from_env(&s->settings, &s->opts);
    if (s->backend->configure)
        s->backend->configure(s->backend, &s->settings);
    s->run_ctx.seed = s->opts.seed;
    s->run_ctx.threads = s->opts.threads;
    s->run_ctx.settings = &s->settings;
    if ((rc = compile_stages(s, g)) != RLX_OK)
        goto fail;
    *out = s;
    return RLX_OK;
fail:;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rlx_last_error());
    rlx_session_free(s);
    rlx_set_error(rc, "%s", msg);
    return rc;
}
