/* fuse_internal.h - the fusion pass's matcher state, shared by the pass
 * driver (fuse.c) and the patterns (fuse_patterns.c). */
#ifndef RLX_OPT_FUSE_INTERNAL_H
#define RLX_OPT_FUSE_INTERNAL_H

#include "opt/pass.h"

#define FUSE_MAX_CONSTS 2

/* A match: the node that replaces `root`.  node.in[i] >= 0 are ids of the
 * input graph; -1 - k refers to consts[k], a constant made by the pattern
 * (folded weights). */
typedef struct fuse_spec {
    rlx_node root;
    rlx_node_data node;
    int n_consts;
    rlx_node_data consts[FUSE_MAX_CONSTS]; /* data owned by the spec */
    /* Multi-result fused ops stack their results on a new leading axis:
     * node views[k] of the input graph becomes slice k of the fused node
     * (views[k] must be read only after the root).  0: the root is replaced
     * by the fused node itself. */
    int n_views;
    rlx_node views[2];
} fuse_spec;

typedef struct fuse_state {
    const rlx_graph *g;
    const rlx_pass_ctx *ctx;
    int *uses;    /* consumers per node */
    bool *is_out; /* graph outputs */
    bool *taken;  /* part of a match already */
    int *spec_of; /* root -> index in specs, else -1 */
    fuse_spec *specs;
    int n_specs, cap_specs;
    rlx_opt_stats *stats;
} fuse_state;

static inline const rlx_node_data *fs_node(const fuse_state *s, rlx_node id) { return &s->g->nodes[id]; }

/* A node a pattern may swallow: read once, by the pattern, and not an output. */
static inline bool fs_inner(const fuse_state *s, rlx_node id)
{
    return s->uses[id] == 1 && !s->is_out[id] && !s->taken[id];
}

static inline bool fs_is(const fuse_state *s, rlx_node id, rlx_op op)
{
    return !s->taken[id] && s->g->nodes[id].op == op;
}

/* Float types the fused kernels take (they compute in f32). */
static inline bool fs_fusable_dtype(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16; }

/* Records a match if the target claims the fused node: marks `nodes`
 * taken (the root among them) and returns true.  Frees the spec's
 * constants when it refuses. */
bool fs_commit(fuse_state *s, fuse_spec *spec, const rlx_node *nodes, int n_nodes);
/* Frees a spec's constants. */
void fs_spec_free(fuse_spec *sp);

/* The patterns, tried at each root from the last node back. */
bool fuse_attention_block(fuse_state *s, rlx_node root);
bool fuse_swiglu(fuse_state *s, rlx_node root);
bool fuse_conv(fuse_state *s, rlx_node root);
bool fuse_matmul_bias_act(fuse_state *s, rlx_node root);
bool fuse_projection(fuse_state *s, rlx_node root);
bool fuse_matmul_integer_scale(fuse_state *s, rlx_node root);
bool fuse_qlinear_matmul(fuse_state *s, rlx_node root);
bool fuse_add_norm(fuse_state *s, rlx_node root);
bool fuse_softmax(fuse_state *s, rlx_node root);
bool fuse_elementwise_chain(fuse_state *s, rlx_node root);

/* Activation of a unary op, or -1 (fuse_match.c, like fs_commit). */
int fs_act_of(rlx_op op);

#endif
