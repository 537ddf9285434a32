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
        onnx_value_clear(s->vals[i]);
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
        if (v->k == k)
            v->k = NULL; /* kept, not freed */
        onnx_value_clear(v);
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

void onnx_value_clear(onnx_value *v)
{
    onnx_tensor_free(v->k);
    onnx_tensor_free(v->init);
    for (int i = 0; i < v->n_elems; i++)
        onnx_value_clear(&v->elems[i]);
    free(v->elems);
    char *name = v->name;
    memset(v, 0, sizeof *v);
    v->name = name;
    v->node = -1;
}

rlx_status onnx_value_copy(onnx_ctx *c, onnx_value *dst, onnx_value *src)
{
    onnx_value_clear(dst);
    if (src->kind == ONNX_KIND_NONE) {
        dst->kind = ONNX_KIND_NONE;
        return RLX_OK;
    }
    if (src->kind == ONNX_KIND_SEQUENCE) {
        onnx_seq_init(dst, src->elem_dtype);
        for (int i = 0; i < src->n_elems; i++) {
            rlx_status st = onnx_seq_push(c, dst, &src->elems[i]);
            if (st != RLX_OK) {
                onnx_value_clear(dst);
                return st;
            }
        }
        return RLX_OK;
    }
    dst->k = onnx_tensor_share(src->k);
    /* a param initializer is read as its param: nothing folds it */
    dst->node = src->k ? src->node : onnx_node_of(c, src);
    if (!src->k && dst->node < 0)
        return rlx_set_error(rlx_last_status_or(RLX_ERR_INVALID_ARGUMENT), "value '%s' has no node: %s",
                             src->name ? src->name : "", rlx_last_error());
    return RLX_OK;
}

onnx_value *onnx_bind_move(onnx_ctx *c, const char *name, onnx_value *src)
{
    onnx_value *v = onnx_bind(c, name, src->node, NULL);
    if (!v) {
        onnx_value_clear(src);
        return NULL;
    }
    onnx_tensor *k = src->k, *init = src->init;
    v->kind = src->kind;
    v->elems = src->elems;
    v->n_elems = src->n_elems;
    v->elem_dtype = src->elem_dtype;
    src->k = src->init = NULL;
    src->elems = NULL;
    src->n_elems = 0;
    onnx_value_clear(src);
    v->k = k;
    v->init = init;
    return v;
}

void onnx_seq_init(onnx_value *s, rlx_dtype elem_dtype)
{
    onnx_value_clear(s);
    s->kind = ONNX_KIND_SEQUENCE;
    s->elem_dtype = elem_dtype;
}

rlx_status onnx_seq_push(onnx_ctx *c, onnx_value *s, onnx_value *x)
{
    if (x->kind != ONNX_KIND_TENSOR)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "a sequence element must be a tensor, not %s", onnx_kind_name(x));
    rlx_dtype t = onnx_value_dtype(c, x);
    if (t != s->elem_dtype)
        return rlx_set_error(RLX_ERR_DTYPE, "an element of type %s in a sequence of %s", rlx_dtype_name(t),
                             rlx_dtype_name(s->elem_dtype));
    if (s->n_elems >= ONNX_MAX_SEQ_LEN)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "a sequence longer than %d elements", ONNX_MAX_SEQ_LEN);
    if ((s->n_elems & (s->n_elems - 1)) == 0) { /* 0, 1, 2, 4, ...: grow */
        onnx_value *e = rlx_realloc_array(s->elems, (size_t)(s->n_elems ? s->n_elems * 2 : 1), sizeof *e);
        if (!e)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory growing a sequence");
        s->elems = e;
    }
    onnx_value *e = &s->elems[s->n_elems];
    memset(e, 0, sizeof *e);
    e->node = -1;
    rlx_status st = onnx_value_copy(c, e, x);
    if (st == RLX_OK)
        s->n_elems++;
    return st;
}

const char *onnx_kind_name(const onnx_value *v)
{
    switch (v->kind) {
    case ONNX_KIND_SEQUENCE: return "a sequence";
    case ONNX_KIND_NONE: return "an empty optional";
    default: return "a tensor";
    }
}

rlx_node onnx_node_of(onnx_ctx *c, onnx_value *v)
{
    if (!v || v->kind != ONNX_KIND_TENSOR)
        return -1;
    if (v->node >= 0)
        return v->node;
    if (v->init) /* an initializer made a param: the param once an op reads it */
        return v->node = rlx_param(c->g, v->name, v->init->dtype, v->init->ndim, v->init->dims);
    if (!v->k)
        return -1;
    const onnx_tensor *k = v->k;
    v->node = k->blob ? rlx_constant_blob(c->g, k->dtype, k->ndim, k->dims, k->blob, k->bytes)
                      : rlx_constant(c->g, k->dtype, k->ndim, k->dims, k->data, k->bytes);
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
    if (v->kind != ONNX_KIND_TENSOR) {
        *ndim = 0;
        return;
    }
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
    if (v->kind == ONNX_KIND_SEQUENCE)
        return v->elem_dtype;
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
    if (bufn)
        buf[0] = 0;
    if (!(a && a->has_s) && !def)
        return NULL;
    const char *src = a && a->has_s ? (const char *)a->s.data : def;
    size_t len = a && a->has_s ? a->s.len : strlen(def);
    size_t l = len < bufn - 1 ? len : bufn - 1;
    if (l) /* an empty string may come with no data pointer at all */
        memcpy(buf, src, l);
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

rlx_status onnx_out_value(onnx_node *n, int i, onnx_value *v)
{
    if (i >= n->n_out || !n->p->output[i] || !*n->p->output[i]) {
        onnx_value_clear(v);
        return RLX_OK;
    }
    n->out[i] = onnx_bind_move(n->c, n->p->output[i], v);
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
