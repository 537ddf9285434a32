/* runtime.h - the compiled session and the compile stages' shared state. */
#ifndef RLX_RUNTIME_H
#define RLX_RUNTIME_H

#include "backends/backend.h"
#include "opt/pass.h"
#include "plan/plan.h"

/* Compile stages, in order; their names appear in the RLX_VERBOSE report. */
typedef enum rlx_stage {
    RLX_STAGE_VERIFY,
    RLX_STAGE_SIMPLIFY,
    RLX_STAGE_FUSE,
    RLX_STAGE_AMP,
    RLX_STAGE_LAYOUT,
    RLX_STAGE_LOWER,
    RLX_STAGE_CLAIM,
    RLX_STAGE_PLAN,
    RLX_STAGE_SCRATCH,
    RLX_STAGE_ARENA,
    RLX_STAGE_CONSTANTS,
    RLX_STAGE_SCHEDULE,
    RLX_STAGE_SLOTS,
    RLX_STAGE_PREENCODE,
    RLX_STAGE_COUNT
} rlx_stage;

const char *rlx_stage_name(rlx_stage s);

typedef struct rlx_io_slot {
    char *name;      /* owned */
    rlx_node node;
    void *ptr;       /* device address (in the arena, or a shared param's owner's) */
    size_t bytes;
    bool set;        /* inputs and params: written since compile */
} rlx_io_slot;

struct rlx_session {
    rlx_options opts; /* after environment overrides */
    const rlx_backend *backend;
    rlx_graph *graph; /* the compiled (optimized) graph; thunks point into it */
    rlx_plan plan;
    void *arena;
    size_t arena_bytes;
    size_t scratch_offset;
    size_t *keep_bytes;  /* per node: its keep region's size (NULL: the backend keeps none) */
    size_t *keep_offset; /* and its offset in the arena */
    rlx_schedule schedule;
    rlx_io_slot *io[3]; /* 0 inputs, 1 params, 2 outputs */
    int n_io[3];
    rlx_run_ctx run_ctx;
    rlx_compile_stats stats;
    /* rlx_compile_shared: the session whose params this one reads in place
     * (ext[i]: the address of external param node i, else NULL) */
    const rlx_session *params_from;
    void **ext;
    char *report; /* the dispatch report when asked for (opts.dispatch_report) */
};

/* Applies RLX_* environment variables on top of o (unless o->ignore_env). */
void rlx_options_apply_env(rlx_options *o);
/* An integer environment variable, or def. */
int rlx_env_int(const char *name, int def);
/* Online processors. */
long rlx_cpu_count(void);
/* "4096", "512K", "64M", "2G", "1T" (powers of 1024, optional B or iB) ->
 * bytes; 0 if malformed, zero or out of range. */
size_t rlx_parse_size(const char *text);
/* Memory the machine can give without swapping (MemAvailable), in bytes;
 * 0 when unknown. */
size_t rlx_available_memory(void);

/* Optimizer stages (src/opt/fuse.c, amp.c, lower.c); each returns a new
 * graph or NULL with the error set. */
rlx_graph *rlx_opt_fuse(const rlx_graph *g, const rlx_pass_ctx *ctx);
rlx_graph *rlx_opt_amp(const rlx_graph *g, const rlx_pass_ctx *ctx);
rlx_graph *rlx_opt_lower(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Per-op dispatch report (src/runtime/report.c). */
void rlx_opt_dispatch_report(const rlx_graph *before, const rlx_graph *after, const rlx_backend *be,
                             const rlx_opt_stats *stats, FILE *f);

/* Runs the simplify passes (dce, cse, fold, dce). */
rlx_graph *rlx_simplify(const rlx_graph *g, const rlx_pass_ctx *ctx);
/* Evaluates one node with the CPU reference kernels (constant folding). */
rlx_status rlx_cpu_evaluate(const rlx_graph *g, rlx_node id, void *out);

#endif
