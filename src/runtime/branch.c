/* branch.c - guards of the nodes only one side of a one-element select
 * needs (see branch.h).  One sweep from the last node back: node ids are a
 * topological order, so every use of a node is seen before the node.  A
 * use by where's then (else) operand asks for (cond, 1) ((cond, 0)); any
 * other use asks for what its user has.  A node takes the guard all its
 * uses agree on, else none; a nested branch keeps only its inner guard,
 * which runs it more often than needed but never less. */
#include <stdlib.h>

#include "core/error.h"
#include "runtime/branch.h"

enum { UNSEEN = -2, NONE = -1 };

static void merge(rlx_node *cond, uint8_t *when, rlx_node i, rlx_node c, uint8_t w)
{
    if (cond[i] == UNSEEN) {
        cond[i] = c;
        when[i] = w;
    } else if (cond[i] != c || (c != NONE && when[i] != w))
        cond[i] = NONE;
}

/* The node that computes x's memory: views (reshapes, contiguous slices)
 * compute nothing, so a view made after a branch's nodes (the If importer
 * reshapes its condition last) still names an early producer. */
static rlx_node producer(const rlx_graph *g, rlx_node x)
{
    size_t off;
    while (rlx_node_is_view(g, x, &off) && off == 0)
        x = g->nodes[x].in[0];
    return x;
}

static bool one_element_bool(const rlx_node_data *n) { return n->dtype == RLX_BOOL && rlx_shape_numel(&n->shape) == 1; }

rlx_status rlx_branch_guards(const rlx_graph *g, rlx_node *cond, uint8_t *when)
{
    for (int i = 0; i < g->n_nodes; i++) {
        cond[i] = UNSEEN;
        when[i] = 0;
    }
    for (int i = 0; i < g->n_outputs; i++)
        cond[g->outputs[i].node] = NONE;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const rlx_node_data *n = &g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(n->op);
        if (cond[i] == UNSEEN || cond[i] >= i || (info && (info->flags & RLX_OPF_STATEFUL)))
            cond[i] = NONE; /* dead, decided too late, or an effect */
        bool select = n->op == RLX_OP_WHERE && n->n_in == 3 && one_element_bool(&g->nodes[n->in[0]]);
        for (int k = 0; k < n->n_in; k++) {
            if (select && k > 0)
                merge(cond, when, n->in[k], producer(g, n->in[0]), k == 1);
            else
                merge(cond, when, n->in[k], cond[i], when[i]);
        }
    }
    return RLX_OK;
}
