/* grad.h - reverse-mode differentiation on the IR: the gradient rules the
 * op table's rows name, and the sweep that applies them (grad.c).
 *
 * A rule receives node n (its inputs are ids of g), the gradient dy of the
 * loss with respect to n's value (n's shape and dtype), and need[j] telling
 * which inputs want a gradient; it appends nodes to g and writes dx[j] (the
 * gradient of input j, of its shape and dtype) for each needed j, or -1 for
 * "no contribution".  A rule returns RLX_OK or an error naming the node. */
#ifndef RLX_IR_GRAD_H
#define RLX_IR_GRAD_H

#include "ir/ir.h"

/* Elementwise ops: one rule each for the unary and binary families, with
 * the derivative of each op in one switch. */
rlx_status rlx_grad_unary(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_binary(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_where(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_cast(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_clip(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_matmul(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_qmatmul(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_reduce(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_softmax(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_cross_entropy(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_norm(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_reshape(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_transpose(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_slice(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_concat(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_gather(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_scatter_add(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_expand(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_pad(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_rope(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_attention(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_conv(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_pool(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
rlx_status rlx_grad_global_pool(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
/* Ops whose value carries no gradient back (random values, integer or bool
 * results, in-place state writes): a path through them is refused. */
rlx_status rlx_grad_refuse(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);
/* Fused ops and batch_norm: through their decomposition (decompose.c). */
rlx_status rlx_grad_decomposed(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);

/* Differentiates through the nodes [lo, g->n_nodes) that compute node n's
 * value as `root` from n's inputs (a decomposition built for the purpose):
 * dy is the gradient at root, dx receives the gradients of n's inputs. */
rlx_status rlx_grad_through(rlx_graph *g, rlx_node n, rlx_node lo, rlx_node root, rlx_node dy, const bool *need,
                            rlx_node *dx);
/* The same from an operand list (in[0..n_in), ids of g) instead of a node. */
rlx_status rlx_grad_through_inputs(rlx_graph *g, int n_in, const rlx_node *in, rlx_node lo, rlx_node root, rlx_node dy,
                                   const bool *need, rlx_node *dx);

#endif
