/* plan.h - the memory planner: liveness over the node order, one arena,
 * slot reuse (best fit by size), in-place reuse and views as aliases.
 * Backend-neutral: the backend only gives its alignment. */
#ifndef RLX_PLAN_H
#define RLX_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/ir.h"

typedef struct rlx_plan_options {
    size_t alignment;
    bool no_reuse;             /* every buffer its own slot */
    bool no_inplace;           /* no output written over a dying input */
    bool pin_output_ancestors; /* every ancestor of an output lives to the end */
    bool inplace_elementwise;  /* the backend's kernels accept out == in (elementwise; accumulate inputs) */
    /* Per node, or NULL: params whose memory lies outside the arena (another
     * session's, see rlx_compile_shared).  They take no arena bytes; views of
     * them and cache writes into them are external too. */
    const bool *external;
} rlx_plan_options;

typedef enum rlx_region { RLX_REGION_NONE = 0, RLX_REGION_PERSISTENT, RLX_REGION_TRANSIENT } rlx_region;

typedef struct rlx_tensor_slot {
    rlx_region region;
    size_t offset; /* absolute byte offset in the arena */
    size_t bytes;
    int buffer;    /* index of the buffer it lives in, -1 if empty */
    bool view;     /* aliases an operand's buffer (reshape, contiguous slice) */
    bool inplace;  /* written over a dying operand */
    bool external; /* in an external param's memory: offset is from that param (root) */
    rlx_node root;
} rlx_tensor_slot;

typedef struct rlx_buffer {
    rlx_region region;
    size_t size;     /* aligned */
    size_t offset;   /* absolute */
    int first, last; /* node index of definition and of last use (n_nodes = end) */
} rlx_buffer;

typedef struct rlx_plan {
    rlx_tensor_slot *slots; /* one per node */
    int n_slots;
    rlx_buffer *buffers;
    int n_buffers;
    size_t persistent_bytes; /* region [0, persistent_bytes) */
    size_t transient_base;   /* aligned start of the transient region */
    size_t transient_bytes;
    size_t lower_bound; /* most transient bytes live at one step */
    int peak_step;      /* the first node at which they are (-1: no transient buffer) */
    size_t arena_bytes; /* persistent + transient (+ scratch, added later) */
    int n_views, n_inplace;
} rlx_plan;

/* Views alias their operand by the one alias rule, rlx_node_is_view
 * (src/ir/ir.h, each view op's row), which backends call too. */

rlx_status rlx_plan_memory(const rlx_graph *g, const rlx_plan_options *o, rlx_plan *out);
void rlx_plan_free(rlx_plan *p);

#endif
