/* pass.h - optimizer passes.  A pass is a named function graph -> graph: it
 * reads its input and returns a new graph (or NULL with the error set), so
 * passes can be listed, reordered and tested one at a time.  Passes learn
 * what the target runs only through the claim callback in the context. */
#ifndef RLX_OPT_PASS_H
#define RLX_OPT_PASS_H

#include "ir/ir.h"

/* What the optimizer stages did, for the dispatch report and tests. */
typedef struct rlx_opt_stats {
    int nodes_before_fusion, nodes_after_fusion;
    int fused[RLX_OP_COUNT];   /* fused nodes made, by fused op */
    int bn_folded;             /* batch norms folded into conv weights */
    int affine_folded;         /* per-channel add/sub/mul/div steps folded into conv weights */
    int fusion_refused;        /* matches dropped because the target does not claim the fused op */
    int lowered[RLX_OP_COUNT]; /* nodes decomposed by lowering, by their op */
    int casts_inserted, casts_removed, amp_low, amp_fallback;
    /* layout pass: ops made channels-last; its transposes cancelled / left */
    int layout_convs, layout_pools, layout_transposes_removed, layout_transposes_left;
} rlx_opt_stats;

typedef struct rlx_pass_ctx {
    /* The target's claim: can node `id` of g run natively? NULL = anything. */
    bool (*supports)(const rlx_graph *g, rlx_node id);
    /* Evaluates node `id` (all operands constant) into `out` (node bytes);
     * supplied by the runtime for constant folding, which passes it
     * evaluate_arg (the session's backend settings).  NULL = no folding. */
    rlx_status (*evaluate)(const rlx_graph *g, rlx_node id, void *out, const void *arg);
    const void *evaluate_arg;
    rlx_precision precision;
    /* Largest constant folding may create, in bytes. */
    size_t fold_limit;
    int verbose;
    /* Optional: where fuse, amp and lower record what they did. */
    rlx_opt_stats *stats;
    /* Optional: a helper that cannot allocate (a claim probe) records
     * RLX_ERR_OUT_OF_MEMORY here instead of answering "no", and compile
     * fails with it after the pass rather than go on with another graph. */
    rlx_status *failure;
} rlx_pass_ctx;

typedef rlx_graph *(*rlx_pass_fn)(const rlx_graph *g, const rlx_pass_ctx *ctx);

typedef struct rlx_pass {
    const char *name;
    rlx_pass_fn run;
} rlx_pass;

rlx_graph *rlx_pass_dce(const rlx_graph *g, const rlx_pass_ctx *ctx);
rlx_graph *rlx_pass_cse(const rlx_graph *g, const rlx_pass_ctx *ctx);
rlx_graph *rlx_pass_fold(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Decompositions of native ops rewritten into them (canon.c): GELU written
 * out with Erf. */
rlx_graph *rlx_pass_canon(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Target-aware pattern fusion (fuse.c, patterns in fuse_patterns.c). */
rlx_graph *rlx_pass_fuse(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Automatic mixed precision to ctx->precision (amp.c). */
rlx_graph *rlx_pass_amp(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Channels-last conv / pool where the target claims it, transposes pushed
 * through elementwise ops and cancelled (layout.c). */
rlx_graph *rlx_pass_layout(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Decomposes what the target does not claim into primitives (lower.c). */
rlx_graph *rlx_pass_lower(const rlx_graph *g, const rlx_pass_ctx *ctx);

/* Would the target claim a node like `proto` whose inputs have these dtypes
 * and shapes?  Asked on a small probe graph (leaves + the node); false if
 * the node does not even type-check.  True when ctx->supports is NULL. */
bool rlx_probe_claim(const rlx_pass_ctx *ctx, const rlx_node_data *proto, const rlx_dtype *dtypes,
                     const rlx_shape *shapes);
/* Value of a one-element float constant node; false if n is not one. */
bool rlx_scalar_value(const rlx_node_data *n, double *v);
/* Element i (row-major) of a float constant node; false if n is not one. */
bool rlx_const_element(const rlx_node_data *n, int64_t i, double *v);

/* Copies node `id` of src into dst with operands renamed through map
 * (old id -> new id); shape inference runs again.  Returns the new id. */
rlx_node rlx_copy_node(rlx_graph *dst, const rlx_graph *src, rlx_node id, const rlx_node *map);
/* Declares src's outputs on dst through map. */
rlx_status rlx_copy_outputs(rlx_graph *dst, const rlx_graph *src, const rlx_node *map);

/* Rebuilding a graph node by node, the shape of most passes: for each node
 * id of g in order, fn returns its id in out (built there from map, which
 * holds the new ids of earlier nodes), RLX_REBUILD_COPY for an unchanged
 * copy, RLX_REBUILD_DROP to leave it out (nothing kept may read it), or
 * RLX_REBUILD_FAIL with the error set.  Then g's outputs are declared on
 * out.  Returns out, or NULL on failure. */
enum { RLX_REBUILD_FAIL = -1, RLX_REBUILD_COPY = -2, RLX_REBUILD_DROP = -3 };
typedef rlx_node (*rlx_rebuild_fn)(rlx_graph *out, const rlx_graph *g, rlx_node id, const rlx_node *map, void *arg);
rlx_graph *rlx_rebuild(const rlx_graph *g, rlx_rebuild_fn fn, void *arg);

#endif
