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
    char *name; /* owned */
    rlx_node node;
    void *ptr; /* device address (in the arena, or a shared param's owner's) */
    size_t bytes;
    bool set; /* inputs and params: written since compile */
} rlx_io_slot;

struct rlx_session {
    rlx_options opts;              /* after environment overrides */
    rlx_backend_settings settings; /* the backend's, from the environment (env.c); run_ctx points to it */
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
    char *report;           /* the dispatch report when asked for (opts.dispatch_report) */
    rlx_bound_input *bound; /* inputs bound by value at import: only that value is accepted */
    int n_bound;
};

/* Applies RLX_* environment variables on top of o (unless o->ignore_env). */
void rlx_options_apply_env(rlx_options *o);
/* The backend settings for options o (after rlx_options_apply_env): the
 * defaults, o's verbose and no_preencode, the loaded libraries' own
 * variables (OMP_DYNAMIC, OPENBLAS_CORETYPE), and unless o->ignore_env the
 * RLX_* variables of the backends.  o NULL: as default options. */
void rlx_backend_settings_from_env(rlx_backend_settings *s, const rlx_options *o);
/* The one parser of every switch: 1 for 1/true/yes/on (any case) or a
 * non-zero integer, 0 for 0/false/no/off or zero, -1 for NULL or empty
 * (keep the default), -2 for anything else. */
int rlx_parse_bool(const char *text);
/* An integer environment variable, or def. */
int rlx_env_int(const char *name, int def);
/* Online processors. */
long rlx_cpu_count(void);
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
/* Evaluates one node with the CPU reference kernels (constant folding);
 * settings: the session's backend settings (a rlx_backend_settings, NULL
 * for the defaults). */
rlx_status rlx_cpu_evaluate(const rlx_graph *g, rlx_node id, void *out, const void *settings);

#endif
