/* canon.h - the canon pass's families of rewrites (canon.c drives them):
 * each recognises node id of g as the one op a decomposition writes out
 * and, when it does, builds that op in out from the mapped operands (*y;
 * -1 when building failed). */
#ifndef RLX_OPT_CANON_H
#define RLX_OPT_CANON_H

#include "opt/pass.h"

/* GELU (erf and tanh forms) and SiLU: canon_act.c */
bool canon_activation(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y);
/* LayerNorm and RMSNorm: canon_norm.c */
bool canon_norm(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y);
/* rotary position embedding: canon_rope.c */
bool canon_rope(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y);
/* a projection of flattened rows reshaped back: canon_flat.c */
bool canon_unflatten_projection(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y);
/* one projection cut along its last axis: canon_split.c */
bool canon_split_projection(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y);
/* attention: canon_attn.c */
bool canon_attention(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, rlx_node *y);

/* Shared by the families (canon_util.c). */

/* x when id slices only x's last axis, with step 1, from *start for *len
 * elements; else -1. */
rlx_node canon_last_axis_slice(const rlx_graph *g, rlx_node id, int64_t *start, int64_t *len);
/* How many nodes read id (-1 when id is a graph output); with cuts, *cuts
 * of them slice its last axis. */
int canon_readers(const rlx_graph *g, rlx_node id, int *cuts);
/* p as a product plus a bias, in either order: the bias (a vector of p's
 * last axis, [N] or [1, ..., 1, N]; with constant_vector, a constant [N])
 * and *mm, a matmul of p's shape that p alone reads; -1 when p is not. */
rlx_node canon_biased_product(const rlx_graph *g, rlx_node p, bool constant_vector, rlx_node *mm);
/* A one-element constant equal to want within rel (relative). */
bool canon_is_scalar(const rlx_graph *g, rlx_node id, double want, double rel);

#endif
