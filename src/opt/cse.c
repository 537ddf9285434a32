/* cse.c - common-subexpression elimination: two nodes with the same op,
 * operands, attributes and (for constants) bytes become one.  Inputs,
 * params, random ops and values recomputed for the backward are never
 * merged. */
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t node_hash(const rlx_node_data *n)
{
    uint64_t h = 1469598103934665603ULL;
    h = hash_bytes(h, &n->op, sizeof n->op);
    h = hash_bytes(h, &n->dtype, sizeof n->dtype);
    /* the dims in use: those past ndim may hold anything */
    h = hash_bytes(h, &n->shape.ndim, sizeof n->shape.ndim);
    h = hash_bytes(h, n->shape.dims, sizeof(int64_t) * (size_t)(n->shape.ndim > 0 ? n->shape.ndim : 0));
    h = hash_bytes(h, n->in, sizeof(rlx_node) * (size_t)n->n_in);
    h = hash_bytes(h, &n->attrs, sizeof n->attrs);
    if (n->data)
        h = hash_bytes(h, n->data, n->data_bytes < 4096 ? n->data_bytes : 4096);
    return h;
}

static bool same_node(const rlx_node_data *a, const rlx_node_data *b)
{
    return a->op == b->op && a->dtype == b->dtype && rlx_shape_equal(&a->shape, &b->shape) && a->n_in == b->n_in &&
           memcmp(a->in, b->in, sizeof(rlx_node) * (size_t)a->n_in) == 0 &&
           memcmp(&a->attrs, &b->attrs, sizeof a->attrs) == 0 && a->data_bytes == b->data_bytes &&
           (a->data_bytes == 0 || memcmp(a->data, b->data, a->data_bytes) == 0);
}

typedef struct cse_table {
    rlx_node *slots; /* new ids, -1 empty */
    size_t cap;      /* a power of two */
} cse_table;

/* An earlier node of out equal to node id (operands renamed), or a copy
 * of it that later equal nodes will find. */
static rlx_node merge_node(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg)
{
    cse_table *t = (cse_table *)arg;
    const rlx_node_data *src = &g->nodes[id];
    const rlx_op_info *info = rlx_op_info_of(src->op);
    if (src->op == RLX_OP_INPUT || src->op == RLX_OP_PARAM || (info->flags & (RLX_OPF_RANDOM | RLX_OPF_STATEFUL)) ||
        src->recompute)
        return RLX_REBUILD_COPY;
    rlx_node_data probe = *src;
    for (int j = 0; j < probe.n_in; j++)
        probe.in[j] = map[probe.in[j]];
    size_t slot = node_hash(&probe) & (t->cap - 1);
    for (; t->slots[slot] >= 0; slot = (slot + 1) & (t->cap - 1))
        if (same_node(&out->nodes[t->slots[slot]], &probe))
            return t->slots[slot];
    return t->slots[slot] = rlx_copy_node(out, g, id, map);
}

rlx_graph *rlx_pass_cse(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    (void)ctx;
    cse_table t = {NULL, 16};
    while (t.cap < (size_t)g->n_nodes * 2)
        t.cap *= 2;
    if (!(t.slots = rlx_calloc(t.cap, sizeof(rlx_node))))
        return NULL;
    for (size_t i = 0; i < t.cap; i++)
        t.slots[i] = -1;
    rlx_graph *out = rlx_rebuild(g, merge_node, &t);
    free(t.slots);
    return out;
}
