/* branch.h - which nodes only a branch of a one-element select needs.
 *
 * An ONNX If whose condition is known only at run time imports as both
 * branches and a where(cond, then, else) per output, cond one element.  A
 * node whose every use leads only into the then side (or only the else
 * side) of such a where need not run when cond picks the other side; the
 * schedule marks it so (rlx_thunk.guard) and the CPU loop skips it. */
#ifndef RLX_RUNTIME_BRANCH_H
#define RLX_RUNTIME_BRANCH_H

#include <stdint.h>

#include "ir/ir.h"

/* For each node i: cond[i] the node computing a one-element bool (a
 * select's condition, or the node it is a view of) whose value at run time
 * decides whether i is needed, and when[i] the value it must have (1 or 0);
 * cond[i] = -1 where i is always run.  A node only gets a guard computed
 * before it (cond[i] < i), and never a stateful one or an output.
 * Arrays of g->n_nodes entries; RLX_ERR_OUT_OF_MEMORY on failure. */
rlx_status rlx_branch_guards(const rlx_graph *g, rlx_node *cond, uint8_t *when);

#endif
