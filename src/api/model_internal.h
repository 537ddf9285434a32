/* model_internal.h - what an rlx_model holds: the file, the options its
 * sessions compile with, the sessions compiled per set of shape bindings
 * (model.c) and the windows of a staged run (model_run.c). */
#ifndef RLX_API_MODEL_INTERNAL_H
#define RLX_API_MODEL_INTERNAL_H

#include "rlx.h"

typedef struct cached_session {
    char *key;
    rlx_session *session;
} cached_session;

typedef struct cached_stage cached_stage; /* model_run.c */
/* A value that node `node` needed at import (bound by value there). */
typedef struct model_need {
    int node;
    char *name;
} model_need;
struct onnx_stage_model;

struct rlx_model {
    char *path;
    char *dir;   /* where external data lives */
    void *bytes; /* the file, read once */
    size_t size;
    rlx_options opts;
    cached_session *cache;
    int n_cache;
    /* rlx_model_run: the parsed model, each window compiled per key (first
     * node, the shapes and by-value bytes of the values entering it) ... */
    struct onnx_stage_model *parsed;
    cached_stage *stages;
    int n_stages;
    /* ... and the values that nodes needed at import */
    model_need *needs;
    int n_needs;
};

void rlx_model_free_stages(rlx_model *m);

#endif
