/* onnx_stage.h - importing a model a window of nodes at a time, for the
 * models whose ops need values known only at run time (NonZero or
 * NonMaxSuppression on data the model computes): rlx_model_run imports the
 * nodes up to the first such op, runs them, and imports the rest with the
 * values that op needs bound by value.  Nodes are counted in the
 * importer's topological order. */
#ifndef RLX_IO_ONNX_STAGE_H
#define RLX_IO_ONNX_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

/* A value entering a window: a graph input of the window's graph, or a
 * constant when `value` is given. */
typedef struct onnx_stage_in {
    const char *name;
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    const void *value; /* NULL: an input */
    size_t bytes;
} onnx_stage_in;

typedef enum onnx_stage_out_kind {
    ONNX_STAGE_OUT_GRAPH, /* an output of the window's graph, same name */
    ONNX_STAGE_OUT_CONST, /* known at import: `value` */
    ONNX_STAGE_OUT_PASS   /* a value that entered the window, unchanged */
} onnx_stage_out_kind;

/* A value leaving a window: one that a later node or a graph output reads. */
typedef struct onnx_stage_out {
    char *name;
    onnx_stage_out_kind kind;
    rlx_onnx_tensor value; /* ONNX_STAGE_OUT_CONST: owned */
} onnx_stage_out;

typedef struct onnx_stage {
    /* in */
    int first;  /* the window starts at this node; 0: every graph input that is no
                 * initializer must be among `inputs` */
    int single; /* import node `first` alone (the op that needed a run-time value) */
    const onnx_stage_in *inputs;
    int n_inputs;
    /* out */
    int end;            /* nodes [first, end) imported; end == n_nodes: the model is done */
    int n_nodes;        /* nodes of the model's graph */
    char *need;         /* set (and end == first) when node `first` needs this value at import */
    char **need_inputs; /* with need: every input of that node not known at import */
    int n_need_inputs;
    onnx_stage_out *outs;
    int n_outs;
} onnx_stage;

/* A model parsed once for the windows imported from it. */
typedef struct onnx_stage_model onnx_stage_model;
rlx_status onnx_stage_model_open(const void *data, size_t size, const char *base_dir, onnx_stage_model **out);
void onnx_stage_model_close(onnx_stage_model *m);

/* Imports nodes from st->first until the end or the first node (after the
 * first) that needs a value at import which the window does not know.
 * *out gets the window's graph, or NULL when it has no graph outputs (its
 * values are all constants or passed through, or st->need is set). */
rlx_status onnx_import_stage(onnx_stage_model *m, onnx_stage *st, rlx_graph **out);
/* Frees what onnx_import_stage gave st (need, need_inputs, outs). */
void onnx_stage_clear(onnx_stage *st);

#endif
