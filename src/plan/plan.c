/* plan.c - memory planning.
 *
 * Every node gets a slot.  Leaves that hold data between runs (inputs,
 * params, constants) live in a persistent region at the front of the arena.
 * Everything else lives in a transient region where buffers whose lifetimes
 * do not overlap share bytes.  Views (reshape, contiguous slice) alias their
 * operand's buffer; an elementwise op may write over an operand that dies
 * there.  Offsets are chosen greedily, largest buffer first, into the
 * smallest gap that fits among the buffers live at the same time. */
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* inputs, params, constants: they keep their values between runs */
static bool is_persistent_leaf(rlx_op op) { return (rlx_op_info_of(op)->flags & RLX_OPF_LEAF) != 0; }
/* writes into its first operand, whose memory its result is (cache_write) */
static bool writes_input0(rlx_op op) { return (rlx_op_info_of(op)->flags & RLX_OPF_STATEFUL) != 0; }

typedef struct {
    int buffer;
    size_t rel;
} placed_tensor;        /* offset within its buffer */
enum { EXTERNAL = -2 }; /* placed_tensor.buffer of external memory */

/* The placement order's key, carried with each buffer id so that the sort
 * reads no state outside its elements (compiles on several threads at once
 * each sort their own). */
typedef struct {
    size_t size;
    int first, id;
} sort_key;
static int cmp_size_desc(const void *pa, const void *pb)
{
    const sort_key *x = pa, *y = pb;
    if (x->size != y->size)
        return x->size > y->size ? -1 : 1;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    return x->id - y->id;
}

typedef struct {
    size_t off, end;
} span;
static int cmp_span(const void *pa, const void *pb)
{
    const span *a = pa, *b = pb;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Places transient buffers; returns the region's size. */
static size_t assign_offsets(rlx_buffer *bufs, const int *ids, int n, bool no_reuse, int *order, sort_key *keys,
                             span *tmp, bool *placed)
{
    size_t top = 0;
    if (no_reuse) {
        for (int i = 0; i < n; i++) {
            bufs[ids[i]].offset = top;
            top += bufs[ids[i]].size;
        }
        return top;
    }
    for (int i = 0; i < n; i++)
        keys[i] = (sort_key){bufs[ids[i]].size, bufs[ids[i]].first, ids[i]};
    qsort(keys, (size_t)n, sizeof *keys, cmp_size_desc);
    for (int i = 0; i < n; i++)
        order[i] = keys[i].id;
    for (int i = 0; i < n; i++) {
        rlx_buffer *b = &bufs[order[i]];
        int nt = 0;
        for (int j = 0; j < i; j++) {
            const rlx_buffer *o = &bufs[order[j]];
            if (placed[j] && o->first <= b->last && b->first <= o->last)
                tmp[nt++] = (span){o->offset, o->offset + o->size};
        }
        qsort(tmp, (size_t)nt, sizeof(span), cmp_span);
        size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
        for (int j = 0; j < nt; j++) {
            if (tmp[j].off > cursor) {
                size_t gap = tmp[j].off - cursor;
                if (gap >= b->size && gap < best_gap) {
                    best_gap = gap;
                    best = cursor;
                }
            }
            if (tmp[j].end > cursor)
                cursor = tmp[j].end;
        }
        if (best == SIZE_MAX)
            best = cursor; /* after everything live at the same time */
        b->offset = best;
        placed[i] = true;
        if (best + b->size > top)
            top = best + b->size;
    }
    return top;
}

rlx_status rlx_plan_memory(const rlx_graph *g, const rlx_plan_options *o, rlx_plan *out)
{
    memset(out, 0, sizeof *out);
    int n = g->n_nodes;
    size_t align = o->alignment ? o->alignment : 64;
    int *last_use = rlx_calloc((size_t)n + 1, sizeof(int));
    placed_tensor *pt = rlx_calloc((size_t)n + 1, sizeof(placed_tensor));
    out->slots = rlx_calloc((size_t)n + 1, sizeof(rlx_tensor_slot));
    out->buffers = rlx_calloc((size_t)n + 1, sizeof(rlx_buffer));
    int *ids = rlx_calloc((size_t)n + 1, sizeof(int));
    int *order = rlx_calloc((size_t)n + 1, sizeof(int));
    sort_key *keys = rlx_calloc((size_t)n + 1, sizeof(sort_key));
    span *tmp = rlx_calloc((size_t)n + 1, sizeof(span));
    bool *placed = rlx_calloc((size_t)n + 1, sizeof(bool));
    long long *delta = rlx_calloc((size_t)n + 2, sizeof(long long));
    if (!last_use || !pt || !out->slots || !out->buffers || !ids || !order || !keys || !tmp || !placed || !delta) {
        free(last_use), free(pt), free(ids), free(order), free(keys), free(tmp), free(placed), free(delta);
        rlx_plan_free(out);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    out->n_slots = n;

    /* Liveness: a tensor lives from its node to its last reader; outputs
     * (and, if asked, everything they depend on) to the end. */
    for (int i = 0; i < n; i++) {
        last_use[i] = i;
        for (int j = 0; j < g->nodes[i].n_in; j++)
            last_use[g->nodes[i].in[j]] = i;
    }
    for (int k = 0; k < g->n_outputs; k++)
        last_use[g->outputs[k].node] = n;
    if (o->pin_output_ancestors) {
        for (int i = n - 1; i >= 0; i--)
            if (last_use[i] == n)
                for (int j = 0; j < g->nodes[i].n_in; j++)
                    last_use[g->nodes[i].in[j]] = n;
    }

    for (int i = 0; i < n; i++) {
        const rlx_node_data *nd = &g->nodes[i];
        rlx_tensor_slot *s = &out->slots[i];
        s->bytes = rlx_node_bytes(nd);
        s->buffer = -1;
        pt[i].buffer = -1;
        const rlx_op_info *info = rlx_op_info_of(nd->op);
        size_t view_off = 0;
        bool is_view = info && rlx_node_is_view(g, i, &view_off);
        if (s->bytes == 0)
            continue;
        if (o->external && o->external[i]) {
            pt[i].buffer = EXTERNAL;
            pt[i].rel = 0;
            s->external = true;
            s->root = i;
            continue;
        }
        /* an alias of external memory is external too */
        if ((is_view || writes_input0(nd->op)) && pt[nd->in[0]].buffer == EXTERNAL) {
            pt[i].buffer = EXTERNAL;
            pt[i].rel = pt[nd->in[0]].rel + view_off;
            s->external = true;
            s->root = out->slots[nd->in[0]].root;
            s->offset = pt[i].rel;
            s->view = is_view;
            s->inplace = !is_view;
            continue;
        }
        if (is_view && pt[nd->in[0]].buffer >= 0) {
            int b = pt[nd->in[0]].buffer;
            pt[i].buffer = b;
            pt[i].rel = pt[nd->in[0]].rel + view_off;
            if (out->buffers[b].last < last_use[i])
                out->buffers[b].last = last_use[i];
            s->view = true;
            out->n_views++;
            continue;
        }
        /* a stateful op's result is its first operand's memory (that is
         * what makes cache_write's KV cache persist), whatever the reuse
         * options say */
        if (writes_input0(nd->op) && pt[nd->in[0]].buffer >= 0) {
            int b = pt[nd->in[0]].buffer;
            pt[i] = pt[nd->in[0]];
            if (out->buffers[b].last < last_use[i])
                out->buffers[b].last = last_use[i];
            s->inplace = true;
            out->n_inplace++;
            continue;
        }
        /* an elementwise op over any operand, another op over the one it
         * may take (rlx_node_inplace_input), where that operand dies here */
        int own = rlx_node_inplace_input(nd);
        bool elementwise = info && (info->flags & RLX_OPF_ELEMENTWISE);
        int j0 = elementwise ? 0 : own, j1 = elementwise ? nd->n_in : own + 1; /* the operands it may take */
        if (!o->no_inplace && !o->no_reuse && o->inplace_elementwise && (elementwise || own >= 0)) {
            for (int j = j0; j < j1; j++) {
                rlx_node src = nd->in[j];
                int b = pt[src].buffer;
                if (b < 0 || out->buffers[b].region != RLX_REGION_TRANSIENT || out->buffers[b].last != i)
                    continue;
                const rlx_node_data *sn = &g->nodes[src];
                if (pt[src].rel != 0 || out->buffers[b].size != align_up(s->bytes, align) ||
                    rlx_node_bytes(sn) != s->bytes || !rlx_shape_equal(&sn->shape, &nd->shape) ||
                    rlx_dtype_size(sn->dtype) != rlx_dtype_size(nd->dtype))
                    continue;
                /* another operand reading the same buffer differently would be overwritten */
                bool clash = false;
                for (int k = 0; k < nd->n_in; k++)
                    if (nd->in[k] != src && pt[nd->in[k]].buffer == b)
                        clash = true;
                if (clash)
                    continue;
                pt[i].buffer = b;
                pt[i].rel = 0;
                out->buffers[b].last = last_use[i];
                s->inplace = true;
                out->n_inplace++;
                break;
            }
            if (pt[i].buffer >= 0)
                continue;
        }
        int b = out->n_buffers++;
        out->buffers[b].region = is_persistent_leaf(nd->op) ? RLX_REGION_PERSISTENT : RLX_REGION_TRANSIENT;
        out->buffers[b].size = align_up(s->bytes, align);
        out->buffers[b].first = i;
        out->buffers[b].last = is_persistent_leaf(nd->op) ? n : last_use[i];
        pt[i].buffer = b;
        pt[i].rel = 0;
    }

    /* Persistent region: one after another. */
    size_t top = 0;
    int nt = 0;
    for (int b = 0; b < out->n_buffers; b++) {
        if (out->buffers[b].region == RLX_REGION_PERSISTENT) {
            out->buffers[b].offset = top;
            top += out->buffers[b].size;
        } else {
            ids[nt++] = b;
        }
    }
    out->persistent_bytes = top;
    out->transient_base = align_up(top, align);
    out->transient_bytes = assign_offsets(out->buffers, ids, nt, o->no_reuse, order, keys, tmp, placed);
    for (int k = 0; k < nt; k++)
        out->buffers[ids[k]].offset += out->transient_base;

    /* Lower bound: the most bytes live at one step. */
    for (int k = 0; k < nt; k++) {
        const rlx_buffer *b = &out->buffers[ids[k]];
        delta[b->first] += (long long)b->size;
        delta[b->last + 1] -= (long long)b->size;
    }
    long long live = 0, peak = 0;
    out->peak_step = -1;
    for (int i = 0; i <= n; i++) {
        live += delta[i];
        if (live > peak) {
            peak = live;
            out->peak_step = i;
        }
    }
    out->lower_bound = (size_t)peak;
    out->arena_bytes = out->transient_base + out->transient_bytes;

    for (int i = 0; i < n; i++) {
        rlx_tensor_slot *s = &out->slots[i];
        if (pt[i].buffer < 0)
            continue;
        s->buffer = pt[i].buffer;
        s->region = out->buffers[pt[i].buffer].region;
        s->offset = out->buffers[pt[i].buffer].offset + pt[i].rel;
    }
    free(last_use), free(pt), free(ids), free(order), free(keys), free(tmp), free(placed), free(delta);
    return RLX_OK;
}

void rlx_plan_free(rlx_plan *p)
{
    free(p->slots);
    free(p->buffers);
    memset(p, 0, sizeof *p);
}
