/* model_run.c - rlx_model_run: a model run on given tensors, in stages
 * when its ops need values known only at run time.  Shapes in RLX are
 * static, so an op whose output shape follows its input values (NonZero,
 * NonMaxSuppression, Unique, a Reshape to a computed shape...) is
 * evaluated while importing, and needs those values then.  The run imports
 * the nodes before such an op as one graph (a window), compiles and runs
 * it, and imports the next window with the values that op reads bound by
 * value: one compiled session per window and key (first node, the shapes
 * of the values entering it, and the bytes of those bound by value),
 * cached in the model; the values are copied to the host between windows.
 * A model with no such op is one window. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/model_internal.h"
#include "core/error.h"
#include "rlx.h"

#ifdef RLX_HAVE_ONNX

#include "io/onnx/onnx_stage.h"
#include "io/onnx/onnx_string.h"

/* Windows a run may pass through (a guard against a model that keeps
 * asking for another value). */
#define MAX_WINDOWS 4096

struct cached_stage {
    char *key;
    rlx_session *session; /* NULL when the window has no graph outputs */
    onnx_stage st;
};

/* A value between windows: a host tensor under its ONNX name. */
typedef struct run_value {
    char *name;
    rlx_onnx_tensor t; /* data owned */
    bool is_const;     /* known at import: bound by value in the next window */
} run_value;

typedef struct run_values {
    run_value *v;
    int n;
} run_values;

static void values_free(run_values *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->v[i].name);
        free(r->v[i].t.data);
    }
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

static run_value *values_find(const run_values *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].name, name))
            return &r->v[i];
    return NULL;
}

/* A new value at the end of r (name copied, t taken); NULL when out of memory (t freed). */
static run_value *values_push(run_values *r, const char *name, rlx_onnx_tensor t, bool is_const)
{
    run_value *nv = rlx_realloc_array(r->v, (size_t)r->n + 1, sizeof *nv);
    char *nm = rlx_strdup(name);
    if (!nv || !nm) {
        if (nv)
            r->v = nv;
        free(nm);
        free(t.data);
        return NULL;
    }
    r->v = nv;
    r->v[r->n] = (run_value){nm, t, is_const};
    return &r->v[r->n++];
}

static void stage_free(cached_stage *cs)
{
    free(cs->key);
    rlx_session_free(cs->session);
    onnx_stage_clear(&cs->st);
}

void rlx_model_free_stages(rlx_model *m)
{
    for (int i = 0; i < m->n_stages; i++)
        stage_free(&m->stages[i]);
    free(m->stages);
    for (int i = 0; i < m->n_needs; i++)
        free(m->needs[i].name);
    free(m->needs);
    onnx_stage_model_close(m->parsed);
    m->parsed = NULL;
    m->stages = NULL;
    m->needs = NULL;
    m->n_stages = m->n_needs = 0;
}

/* Whether node `node` needed values at import (its window is that node alone). */
static bool node_needs(const rlx_model *m, int node)
{
    for (int i = 0; i < m->n_needs; i++)
        if (m->needs[i].node == node)
            return true;
    return false;
}

/* Whether v enters the window at `first` by value: a constant, or a value
 * that node `first` reads at import. */
static bool is_by_value(const rlx_model *m, int first, const run_value *v)
{
    if (v->is_const || v->t.dtype == RLX_STRING) /* RLX computes on strings at import only */
        return true;
    for (int i = 0; i < m->n_needs; i++)
        if (m->needs[i].node == first && !strcmp(m->needs[i].name, v->name))
            return true;
    return false;
}

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp((*(const run_value *const *)a)->name, (*(const run_value *const *)b)->name);
}

/* "first|" and one entry per value (model_key_append; the tag is its
 * dtype), sorted by name. */
static char *stage_key(const rlx_model *m, int first, const run_values *in)
{
    const run_value **sorted = rlx_calloc((size_t)in->n + 1, sizeof *sorted);
    if (!sorted)
        return NULL;
    size_t cap = 32;
    for (int i = 0; i < in->n; i++) {
        sorted[i] = &in->v[i];
        cap += model_key_entry_cap(in->v[i].name, is_by_value(m, first, &in->v[i]) ? in->v[i].t.bytes : 0);
    }
    qsort(sorted, (size_t)in->n, sizeof *sorted, cmp_by_name);
    char *key = rlx_calloc(cap, 1);
    size_t len = key ? (size_t)snprintf(key, cap, "%d|", first) : 0;
    for (int i = 0; key && i < in->n; i++) {
        const run_value *v = sorted[i];
        bool by_value = is_by_value(m, first, v);
        len = model_key_append(key, len, cap, v->name, (int)v->t.dtype, v->t.ndim, v->t.dims,
                               by_value ? v->t.data : NULL, by_value ? v->t.bytes : 0);
    }
    free(sorted);
    return key;
}

/* The window starting at `first` for these values: from the cache, or
 * imported (and compiled) now.  A one-node window that needs no session
 * (its values are all computed at import, from run-time data) is not
 * cached: *owned is set and the caller frees it. */
static rlx_status window_for(rlx_model *m, int first, const run_values *in, cached_stage **out, cached_stage **owned)
{
    *owned = NULL;
    char *key = stage_key(m, first, in);
    if (!key)
        return RLX_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < m->n_stages; i++)
        if (!strcmp(m->stages[i].key, key)) {
            free(key);
            *out = &m->stages[i];
            return RLX_OK;
        }
    rlx_status st = RLX_OK;
    if (!m->parsed && (st = onnx_stage_model_open(m->bytes, m->size, m->dir, &m->parsed)) != RLX_OK) {
        free(key);
        return st;
    }
    onnx_stage_in *ins = rlx_calloc((size_t)in->n + 1, sizeof *ins);
    cached_stage *cs = rlx_calloc(1, sizeof *cs);
    if (!ins || !cs) {
        free(ins);
        free(cs);
        free(key);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < in->n; i++) {
        const run_value *v = &in->v[i];
        ins[i] = (onnx_stage_in){.name = v->name, .dtype = v->t.dtype, .ndim = v->t.ndim};
        memcpy(ins[i].dims, v->t.dims, sizeof ins[i].dims);
        if (is_by_value(m, first, v)) {
            ins[i].value = v->t.data;
            ins[i].bytes = v->t.bytes;
        }
    }
    *cs = (cached_stage){.key = key,
                         .st = {.first = first, .single = node_needs(m, first), .inputs = ins, .n_inputs = in->n}};
    rlx_graph *g = NULL;
    st = onnx_import_stage(m->parsed, &cs->st, &g);
    free(ins);
    cs->st.inputs = NULL;
    cs->st.n_inputs = 0;
    if (st == RLX_OK && g)
        st = rlx_compile(g, &m->opts, &cs->session);
    rlx_graph_free(g);
    cached_stage *grown = NULL;
    if (st == RLX_OK && !cs->st.need && !(cs->st.single && !cs->session) &&
        !(grown = rlx_realloc_array(m->stages, (size_t)m->n_stages + 1, sizeof *grown)))
        st = RLX_ERR_OUT_OF_MEMORY;
    if (st != RLX_OK) {
        stage_free(cs);
        free(cs);
        return st;
    }
    if (!grown) {
        *out = *owned = cs;
        return RLX_OK;
    }
    m->stages = grown;
    m->stages[m->n_stages] = *cs;
    free(cs);
    *out = &m->stages[m->n_stages++];
    return RLX_OK;
}

/* Runs one window on `in`; *next gets the values leaving it. */
static rlx_status run_window(const rlx_model *m, const cached_stage *cs, run_values *in, run_values *next)
{
    rlx_status st = RLX_OK;
    rlx_tensor_info ti;
    if (cs->session) {
        for (int i = 0; i < in->n && st == RLX_OK; i++)
            if (!is_by_value(m, cs->st.first, &in->v[i]) &&
                rlx_session_find(cs->session, 0, in->v[i].name, &ti) == RLX_OK)
                st = rlx_session_set_input(cs->session, in->v[i].name, in->v[i].t.data, in->v[i].t.bytes);
        rlx_clear_error();
        if (st == RLX_OK)
            st = rlx_session_run(cs->session);
    }
    for (int i = 0; i < cs->st.n_outs && st == RLX_OK; i++) {
        const onnx_stage_out *o = &cs->st.outs[i];
        rlx_onnx_tensor t = {0};
        bool is_const = false;
        if (o->kind == ONNX_STAGE_OUT_PASS) {
            run_value *v = values_find(in, o->name);
            if (!v)
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "staged run: '%s' did not reach this window", o->name);
            t = v->t; /* moved */
            v->t.data = NULL;
            is_const = v->is_const;
        } else if (o->kind == ONNX_STAGE_OUT_CONST) {
            t = o->value;
            if (!(t.data = rlx_malloc(t.bytes ? t.bytes : 1)))
                return RLX_ERR_OUT_OF_MEMORY;
            memcpy(t.data, o->value.data, t.bytes);
            is_const = !cs->st.single; /* a one-node window's values follow run-time data: inputs next */
        } else {
            if ((st = rlx_session_find(cs->session, 2, o->name, &ti)) != RLX_OK)
                break;
            t = (rlx_onnx_tensor){.dtype = ti.dtype, .ndim = ti.ndim, .bytes = ti.bytes};
            memcpy(t.dims, ti.dims, sizeof t.dims);
            if (!(t.data = rlx_malloc(ti.bytes ? ti.bytes : 1)))
                return RLX_ERR_OUT_OF_MEMORY;
            if ((st = rlx_session_get_output(cs->session, o->name, t.data, ti.bytes)) != RLX_OK) {
                free(t.data);
                break;
            }
        }
        if (!values_push(next, o->name, t, is_const))
            st = RLX_ERR_OUT_OF_MEMORY;
    }
    return st;
}

/* Node `first` needs `name` at import: bound by value there from now on.
 * *added says whether it was new. */
static rlx_status add_need(rlx_model *m, const run_values *cur, int first, const char *name, bool *added)
{
    const run_value *v = values_find(cur, name);
    *added = false;
    if (!v || is_by_value(m, first, v))
        return RLX_OK;
    char *nm = rlx_strdup(name);
    model_need *grown = nm ? rlx_realloc_array(m->needs, (size_t)m->n_needs + 1, sizeof *grown) : NULL;
    if (!grown) {
        free(nm);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    m->needs = grown;
    m->needs[m->n_needs++] = (model_need){first, nm};
    *added = true;
    return RLX_OK;
}

/* The window's first node needs a value at import: the one it named, or
 * when that one is bound already, every input it does not know. */
static rlx_status add_needs(rlx_model *m, const run_values *cur, const onnx_stage *st)
{
    bool added = false;
    rlx_status s = add_need(m, cur, st->first, st->need, &added);
    for (int i = 0; i < st->n_need_inputs && s == RLX_OK && !added; i++) {
        bool one = false;
        s = add_need(m, cur, st->first, st->need_inputs[i], &one);
        added = one; /* one more each round: the handler says which it lacks next */
    }
    if (s == RLX_OK && !added)
        s = rlx_set_error(RLX_ERR_UNSUPPORTED, "node %d of the model needs '%s' at import, which %s", st->first,
                          st->need, values_find(cur, st->need) ? "it had and still refused" : "no earlier node made");
    return s;
}

rlx_status rlx_model_run(rlx_model *m, int n_inputs, const char *const *names, const rlx_onnx_tensor *inputs,
                         rlx_onnx_tensor **outputs, int *n_outputs)
{
    if (!m || !outputs || !n_outputs || n_inputs < 0 || (n_inputs > 0 && (!names || !inputs)))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_model_run: bad arguments");
    *outputs = NULL;
    *n_outputs = 0;
    run_values cur = {0}, next = {0};
    rlx_status st = RLX_OK;
    for (int i = 0; i < n_inputs && st == RLX_OK; i++) {
        const rlx_onnx_tensor *x = &inputs[i];
        size_t es = rlx_dtype_size(x->dtype);
        int64_t numel = 1;
        for (int d = 0; d < x->ndim && d < RLX_MAX_DIMS; d++)
            numel = x->dims[d] >= 0 && numel <= INT64_MAX / (x->dims[d] + 1) ? numel * x->dims[d] : -1;
        bool fits = x->dtype == RLX_STRING
                        ? numel >= 0 && (!x->bytes || x->data) && onnx_string_check(x->data, x->bytes, numel)
                        : es && (uint64_t)numel * es == x->bytes;
        if (!names[i] || x->ndim < 0 || x->ndim > RLX_MAX_DIMS || numel < 0 || !fits || (x->bytes && !x->data) ||
            values_find(&cur, names[i])) {
            st = rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                               "rlx_model_run: input %d ('%s'): no name, a repeated name, or bytes that do not fit "
                               "its dtype and shape",
                               i, names[i] ? names[i] : "");
            break;
        }
        rlx_onnx_tensor t = *x;
        if (!(t.data = rlx_malloc(x->bytes ? x->bytes : 1)) || !values_push(&cur, names[i], t, false))
            st = RLX_ERR_OUT_OF_MEMORY;
        else if (x->bytes)
            memcpy(cur.v[cur.n - 1].t.data, x->data, x->bytes);
    }
    int first = 0;
    for (int w = 0; st == RLX_OK; w++) {
        cached_stage *cs = NULL, *owned = NULL;
        if (w == MAX_WINDOWS) {
            st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_model_run: more than %d windows", MAX_WINDOWS);
            break;
        }
        if ((st = window_for(m, first, &cur, &cs, &owned)) != RLX_OK)
            break;
        if (cs->st.need) /* node `first` reads this value at import: bind it by value there */
            st = add_needs(m, &cur, &cs->st);
        else {
            st = run_window(m, cs, &cur, &next);
            values_free(&cur);
            cur = next;
            next = (run_values){0};
            if (cs->st.end >= cs->st.n_nodes)
                w = MAX_WINDOWS + 1; /* done */
            first = cs->st.end;
        }
        if (owned) {
            stage_free(owned);
            free(owned);
        }
        if (w > MAX_WINDOWS)
            break;
    }
    if (st == RLX_OK) { /* the last window's values are the graph outputs, in order */
        *outputs = rlx_calloc((size_t)cur.n + 1, sizeof **outputs);
        if (!*outputs)
            st = RLX_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < cur.n && *outputs; i++) {
            (*outputs)[i] = cur.v[i].t;
            cur.v[i].t.data = NULL;
        }
        *n_outputs = *outputs ? cur.n : 0;
    }
    values_free(&cur);
    values_free(&next);
    return st;
}

int rlx_model_cached_windows(const rlx_model *m)
{
    int n = 0;
    for (int i = 0; m && i < m->n_stages; i++)
        n += !m->stages[i].st.need; /* not the imports that only learned a value to bind */
    return n;
}

#endif
