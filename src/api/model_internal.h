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

/* Cache keys of sessions (model.c) and windows (model_run.c) are built from
 * one entry per value: "name:tag:d0,d1,...[:v<hex of the bytes>];".  Bytes
 * bound by value are part of the key byte for byte, so another value is
 * another key (never a hash two values could share).  key_entry_cap is the
 * room one entry needs; key_append writes it at key + len and returns the
 * new length. */
size_t model_key_entry_cap(const char *name, size_t value_bytes);
size_t model_key_append(char *key, size_t len, size_t cap, const char *name, int tag, int ndim, const int64_t *dims,
                        const void *value, size_t value_bytes);

#endif
