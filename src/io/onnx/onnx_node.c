/* onnx_node.c - what every op handler works with: scopes of named values
 * (subgraphs see their parents' names), a value's node, rank, shape and
 * dtype, a node's attributes, its failures and its results.  Below the
 * handlers (onnx_ops*.c, onnx_fold.c) and the importer that dispatches to
 * them (onnx_import.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_internal.h"
#include "ir/ir.h"

/* ------------------------------------------------------------ scopes */

uint32_t onnx_hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

onnx_scope *onnx_scope_new(onnx_scope *parent)
{
    onnx_scope *s = rlx_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->parent = parent;
    return s;
}

void onnx_scope_free(onnx_scope *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++) {
        free(s->vals[i]->name);
        onnx_tensor_free(s->vals[i]->k);
        onnx_tensor_free(s->vals[i]->init);
        free(s->vals[i]);
    }
    free(s->vals);
    free(s->hash);
    free(s);
}

static onnx_value *scope_find(onnx_scope *s, const char *name)
{
    if (!s->hcap)
        return NULL;
    uint32_t h = onnx_hash_str(name) & (uint32_t)(s->hcap - 1);
    while (s->hash[h] >= 0) {
        onnx_value *v = s->vals[s->hash[h]];
        if (!strcmp(v->name, name))
            return v;
        h = (h + 1) & (uint32_t)(s->hcap - 1);
    }
    return NULL;
}

static bool scope_rehash(onnx_scope *s, int hcap)
{
    int *h = rlx_malloc(sizeof(int) * (size_t)hcap);
    if (!h)
        return false;
    for (int i = 0; i < hcap; i++)
        h[i] = -1;
    for (int i = 0; i < s->n; i++) {
        uint32_t k = onnx_hash_str(s->vals[i]->name) & (uint32_t)(hcap - 1);
        while (h[k] >= 0)
            k = (k + 1) & (uint32_t)(hcap - 1);
        h[k] = i;
    }
    free(s->hash);
    s->hash = h;
    s->hcap = hcap;
    return true;
}

onnx_value *onnx_lookup(onnx_ctx *c, const char *name)
{
    for (onnx_scope *s = c->scope; s; s = s->parent) {
        onnx_value *v = scope_find(s, name);
        if (v)
            return v;
    }
    return NULL;
}

onnx_value *onnx_bind(onnx_ctx *c, const char *name, rlx_node node, onnx_tensor *k)
{
    onnx_scope *s = c->scope;
    onnx_value *v = scope_find(s, name);
    if (v) { /* the name now means the new value (a repeated initializer, say) */
        if (v->k != k)
            onnx_tensor_free(v->k);
        onnx_tensor_free(v->init);
        v->init = NULL;
        v->k = k;
        v->node = node;
        return v;
    }
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        onnx_value **nv = rlx_realloc_array(s->vals, (size_t)nc, sizeof *nv);
        if (!nv)
            goto oom;
        s->vals = nv;
        s->cap = nc;
    }
    if ((s->n + 1) * 2 > s->hcap && !scope_rehash(s, s->hcap ? s->hcap * 2 : 128))
        goto oom;
    v = rlx_calloc(1, sizeof *v);
    if (!v)
        goto oom;
    v->name = rlx_strdup(name);
    if (!v->name) {
        free(v);
        goto oom;
    }
    v->node = node;
    v->k = k;
    s->vals[s->n] = v;
    uint32_t h = onnx_hash_str(name) & (uint32_t)(s->hcap - 1);
    while (s->hash[h] >= 0)
        h = (h + 1) & (uint32_t)(s->hcap - 1);
    s->hash[h] = s->n++;
    return v;
oom:
    onnx_tensor_free(k);
    rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory binding '%s'", name);
    return NULL;
}

rlx_node onnx_node_of(onnx_ctx *c, onnx_value *v)
{
    if (!v)
        return -1;
    if (v->node >= 0)
        return v->node;
    if (v->init) /* an initializer made a param: the param once an op reads it */
        return v->node = rlx_param(c->g, v->name, v->init->dtype, v->init->ndim, v->init->dims);
    if (!v->k)
        return -1;
    v->node = rlx_constant(c->g, v->k->dtype, v->k->ndim, v->k->dims, v->k->data, v->k->bytes);
    return v->node;
}

int onnx_value_rank(onnx_ctx *c, onnx_value *v)
{
    int nd;
    int64_t d[RLX_MAX_DIMS];
    onnx_value_shape(c, v, &nd, d);
    return nd;
}

void onnx_value_shape(onnx_ctx *c, onnx_value *v, int *ndim, int64_t *dims)
{
    const onnx_tensor *k = v->k ? v->k : v->init;
    if (k) {
        *ndim = k->ndim;
        for (int i = 0; i < k->ndim; i++)
            dims[i] = k->dims[i];
        return;
    }
    if (rlx_node_shape(c->g, v->node, ndim, dims) != RLX_OK)
        *ndim = 0;
}

rlx_dtype onnx_value_dtype(onnx_ctx *c, onnx_value *v)
{
    if (v->k || v->init)
        return v->k ? v->k->dtype : v->init->dtype;
    return rlx_node_dtype(c->g, v->node);
}

/* ------------------------------------------------------------ attributes */

const Onnx__AttributeProto *onnx_attr(const onnx_node *n, const char *name)
{
    for (size_t i = 0; i < n->p->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->p->attribute[i];
        if (a && a->name && !strcmp(a->name, name))
            return a;
    }
    return NULL;
}

int64_t onnx_attr_i(const onnx_node *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a)
        return def;
    if (a->has_i)
        return a->i;
    if (a->has_f) { /* a float where an int belongs: saturate (the cast is UB out of range) */
        double f = a->f;
        if (f != f)
            return def;
        if (f >= 9.2e18)
            return INT64_MAX;
        if (f <= -9.2e18)
            return INT64_MIN;
        return (int64_t)f;
    }
    return def;
}

double onnx_attr_f(const onnx_node *n, const char *name, double def)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a)
        return def;
    if (a->has_f)
        return a->f;
    if (a->has_i)
        return (double)a->i;
    return def;
}

const char *onnx_attr_s(const onnx_node *n, const char *name, const char *def, char *buf, size_t bufn)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a || !a->has_s)
        return def;
    size_t l = a->s.len < bufn - 1 ? a->s.len : bufn - 1;
    if (l) /* an empty string may come with no data pointer at all */
        memcpy(buf, a->s.data, l);
    buf[l] = 0;
    return buf;
}

int onnx_attr_ints(const onnx_node *n, const char *name, int64_t *vals, int max)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a)
        return -1;
    int k = (int)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
    for (int i = 0; i < k; i++)
        vals[i] = a->ints[i];
    return a->n_ints > (size_t)max ? max + 1 : k;
}

int onnx_attr_floats(const onnx_node *n, const char *name, float *vals, int max)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    if (!a)
        return -1;
    int k = (int)(a->n_floats < (size_t)max ? a->n_floats : (size_t)max);
    for (int i = 0; i < k; i++)
        vals[i] = a->floats[i];
    return a->n_floats > (size_t)max ? max + 1 : k;
}

rlx_status onnx_fail(onnx_node *n, rlx_status s, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rlx_set_error(s, "node '%s' (%s, opset %d): %s", n->p->name && *n->p->name ? n->p->name : "",
                         n->p->op_type ? n->p->op_type : "?", n->opset, msg);
}

rlx_status onnx_out_node(onnx_node *n, int i, rlx_node node)
{
    if (i >= n->n_out)
        return RLX_OK; /* optional output not asked for */
    if (node < 0) {
        char buf[600];
        snprintf(buf, sizeof buf, "%s", rlx_last_error());
        return onnx_fail(n, RLX_ERR_SHAPE, "%s", buf);
    }
    const char *name = n->p->output[i];
    if (!name || !*name)
        return RLX_OK;
    n->out[i] = onnx_bind(n->c, name, node, NULL);
    return n->out[i] ? RLX_OK : RLX_ERR_OUT_OF_MEMORY;
}

rlx_status onnx_out_const(onnx_node *n, int i, onnx_tensor *k)
{
    if (!k)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "cannot make constant: %s", rlx_last_error());
    if (i >= n->n_out || !n->p->output[i] || !*n->p->output[i]) {
        onnx_tensor_free(k);
        return RLX_OK;
    }
    n->out[i] = onnx_bind(n->c, n->p->output[i], -1, k);
    return n->out[i] ? RLX_OK : RLX_ERR_OUT_OF_MEMORY;
}
