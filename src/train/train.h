/* train.h - what the trainer uses inside src/train. */
#ifndef RLX_TRAIN_TRAIN_H
#define RLX_TRAIN_TRAIN_H

#include "ir/ir.h"

/* A copy of g where each cheap forward value (id < first_backward) that
 * the backward reads is computed again before its first backward reader,
 * so it is not kept alive from the forward (recompute.c).  *count and
 * *bytes say how many values and bytes were taken.  NULL on failure. */
rlx_graph *rlx_recompute_activations(const rlx_graph *g, rlx_node first_backward, int *count, size_t *bytes);

#endif
