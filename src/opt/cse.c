/* cse.c - common-subexpression elimination: two nodes with the same op,
 * operands, attributes and (for constants) bytes become one.  Inputs,
 * params and random ops are never merged. */
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
    h = hash_bytes(h, &n->shape, sizeof n->shape);
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

rlx_graph *rlx_pass_cse(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    (void)ctx;
    int n = g->n_nodes;
    size_t cap = 16;
    while (cap < (size_t)n * 2)
        cap *= 2;
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_node *table = rlx_calloc(cap, sizeof(rlx_node)); /* new ids, -1 empty */
    rlx_graph *out = rlx_graph_new();
    if (!map || !table || !out)
        goto fail;
    for (size_t i = 0; i < cap; i++)
        table[i] = -1;
    for (int i = 0; i < n; i++) {
        const rlx_node_data *src = &g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(src->op);
        bool mergeable = src->op != RLX_OP_INPUT && src->op != RLX_OP_PARAM && !(info->flags & RLX_OPF_RANDOM);
        rlx_node_data probe = *src;
        for (int j = 0; j < probe.n_in; j++)
            probe.in[j] = map[probe.in[j]];
        size_t slot = 0;
        if (mergeable) {
            slot = node_hash(&probe) & (cap - 1);
            while (table[slot] >= 0) {
                if (same_node(&out->nodes[table[slot]], &probe))
                    break;
                slot = (slot + 1) & (cap - 1);
            }
            if (table[slot] >= 0) {
                map[i] = table[slot];
                continue;
            }
        }
        if ((map[i] = rlx_copy_node(out, g, i, map)) < 0)
            goto fail;
        if (mergeable)
            table[slot] = map[i];
    }
    if (rlx_copy_outputs(out, g, map) != RLX_OK)
        goto fail;
    free(map);
    free(table);
    return out;
fail:
    free(map);
    free(table);
    rlx_graph_free(out);
    return NULL;
}
