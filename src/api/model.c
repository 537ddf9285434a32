/* model.c - a model file kept for compiling at several input shapes: each
 * distinct set of shape bindings compiles once, and its session is cached
 * under a key made from those bindings.  Sits above io (the importer) and
 * runtime (compile), which know nothing of each other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "rlx.h"

#ifdef RLX_HAVE_ONNX

#include "api/model_internal.h"

/* The whole file; NULL with *st and the error set. */
static void *read_file(const char *path, size_t *size, rlx_status *st)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *st = rlx_set_error(RLX_ERR_IO, "cannot open '%s'", path);
        return NULL;
    }
    void *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = rlx_malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        fclose(f);
        *size = (size_t)n;
        return buf;
    }
    rlx_status why = (n >= 0 && !buf) ? RLX_ERR_OUT_OF_MEMORY : RLX_ERR_IO;
    free(buf);
    fclose(f);
    *st = rlx_set_error(why, "cannot read '%s'", path);
    return NULL;
}

void rlx_model_free(rlx_model *m)
{
    if (!m)
        return;
    for (int i = 0; i < m->n_cache; i++) {
        free(m->cache[i].key);
        rlx_session_free(m->cache[i].session);
    }
    free(m->cache);
    rlx_model_free_stages(m);
    free(m->bytes);
    free(m->path);
    free(m->dir);
    free(m);
}

rlx_status rlx_model_load_onnx(const char *path, const rlx_options *o, rlx_model **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_model_load_onnx: path and out must not be NULL");
    *out = NULL;
    rlx_model *m = rlx_calloc(1, sizeof *m);
    if (!m)
        return RLX_ERR_OUT_OF_MEMORY;
    if (o)
        m->opts = *o;
    else
        rlx_options_init(&m->opts);
    rlx_status st = RLX_ERR_OUT_OF_MEMORY;
    m->path = rlx_strdup(path);
    m->dir = rlx_strdup(path);
    if (!m->path || !m->dir || !(m->bytes = read_file(path, &m->size, &st))) {
        rlx_model_free(m);
        return st;
    }
    char *slash = strrchr(m->dir, '/');
    if (slash)
        slash[1] = '\0';
    else
        strcpy(m->dir, ".");
    *out = m;
    return RLX_OK;
}

rlx_status rlx_model_load_onnx_buffer(const void *data, size_t size, const char *base_dir, const rlx_options *o,
                                      rlx_model **out)
{
    if (!data || !size || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "rlx_model_load_onnx_buffer: data (non-empty) and out must not be NULL");
    *out = NULL;
    rlx_model *m = rlx_calloc(1, sizeof *m);
    if (!m)
        return RLX_ERR_OUT_OF_MEMORY;
    if (o)
        m->opts = *o;
    else
        rlx_options_init(&m->opts);
    m->path = rlx_strdup("<memory>");
    m->dir = rlx_strdup(base_dir && *base_dir ? base_dir : ".");
    m->bytes = rlx_calloc(size + 1, 1);
    if (!m->path || !m->dir || !m->bytes) {
        rlx_model_free(m);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "rlx_model_load_onnx_buffer: no memory for %zu bytes", size);
    }
    memcpy(m->bytes, data, size);
    m->size = size;
    *out = m;
    return RLX_OK;
}

static int cmp_binding(const void *a, const void *b)
{
    return strcmp(((const rlx_onnx_binding *)a)->name, ((const rlx_onnx_binding *)b)->name);
}

size_t model_key_entry_cap(const char *name, size_t value_bytes)
{
    return strlen(name) + 32 + 21 * RLX_MAX_DIMS + 4 + 2 * value_bytes;
}

size_t model_key_append(char *key, size_t len, size_t cap, const char *name, int tag, int ndim, const int64_t *dims,
                        const void *value, size_t value_bytes)
{
    static const char hex[] = "0123456789abcdef";
    len += (size_t)snprintf(key + len, cap - len, "%s:%d:", name, tag);
    /* ndim < 0: a dim binding, its value in dims[0] */
    int nd = ndim < 0 ? 1 : (ndim > RLX_MAX_DIMS ? RLX_MAX_DIMS : ndim);
    for (int d = 0; d < nd; d++)
        len += (size_t)snprintf(key + len, cap - len, "%lld,", (long long)dims[d]);
    if (value) {
        key[len++] = ':';
        key[len++] = 'v';
        for (size_t k = 0; k < value_bytes; k++) {
            unsigned char c = ((const unsigned char *)value)[k];
            key[len++] = hex[c >> 4];
            key[len++] = hex[c & 15];
        }
    }
    key[len++] = ';';
    key[len] = '\0';
    return len;
}

/* One entry per binding (the tag is its rank), sorted by name. */
static char *binding_key(const rlx_onnx_binding *b, int n)
{
    rlx_onnx_binding *sorted = rlx_calloc((size_t)n + 1, sizeof *sorted);
    if (!sorted)
        return NULL;
    memcpy(sorted, b, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_binding);
    size_t cap = 64, len = 0;
    for (int i = 0; i < n; i++)
        cap += model_key_entry_cap(sorted[i].name, sorted[i].value ? sorted[i].bytes : 0);
    char *key = rlx_calloc(cap, 1);
    for (int i = 0; key && i < n; i++) {
        const rlx_onnx_binding *x = &sorted[i];
        len = model_key_append(key, len, cap, x->name, x->ndim, x->ndim, x->dims, x->value, x->value ? x->bytes : 0);
    }
    free(sorted);
    return key;
}

rlx_status rlx_model_session(rlx_model *m, const rlx_onnx_binding *shapes, int n, rlx_session **out)
{
    if (!m || !out || n < 0 || (n > 0 && !shapes))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_model_session: bad arguments");
    *out = NULL;
    for (int i = 0; i < n; i++)
        if (!shapes[i].name)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_model_session: binding %d has no name", i);
    char *key = binding_key(shapes, n);
    if (!key)
        return RLX_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < m->n_cache; i++) {
        if (!strcmp(m->cache[i].key, key)) {
            free(key);
            *out = m->cache[i].session;
            return RLX_OK;
        }
    }
    cached_session *grown = rlx_realloc_array(m->cache, (size_t)m->n_cache + 1, sizeof *grown);
    if (!grown) {
        free(key);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    m->cache = grown;
    rlx_onnx_options io;
    rlx_onnx_options_init(&io);
    io.bindings = shapes;
    io.n_bindings = n;
    rlx_graph *g = NULL;
    rlx_session *s = NULL;
    rlx_status st = rlx_onnx_import_buffer(m->bytes, m->size, m->dir, &io, &g);
    if (st == RLX_OK)
        st = rlx_compile(g, &m->opts, &s);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        free(key);
        return st;
    }
    m->cache[m->n_cache].key = key;
    m->cache[m->n_cache].session = s;
    m->n_cache++;
    *out = s;
    return RLX_OK;
}

int rlx_model_cached_sessions(const rlx_model *m) { return m ? m->n_cache : 0; }

#endif
