/* gguf_write.c - GGUF version 3 writer (see gguf_write.h; the layout is
 * described at the top of gguf.c).  Metadata values are serialized when
 * set, into one buffer per key, so that a value can be replaced and the
 * header written in one pass once every tensor is known. */
#include "io/gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define GGUF_WRITE_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

typedef struct wkv {
    char *key;
    buf val; /* u32 type, then the value */
} wkv;

typedef struct wtensor {
    char *name;
    int type, ndim;
    int64_t dims[RLX_MAX_DIMS];
    uint64_t offset;
    size_t bytes;
} wtensor;

struct rlx_gguf_writer {
    wkv *kvs;
    int64_t n_kv, cap_kv;
    wtensor *ts;
    int64_t n_t, cap_t;
    int64_t next_data; /* tensors whose data has been written */
    uint32_t align;
    bool header_done;
};

static bool put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n)
            cap *= 2;
        unsigned char *p = rlx_realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p, b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, d, n);
    b->n += n;
    return true;
}

/* The host is little-endian, as the reader requires too. */
static bool put_u32(buf *b, uint32_t v) { return put(b, &v, 4); }
static bool put_u64(buf *b, uint64_t v) { return put(b, &v, 8); }
static bool put_str(buf *b, const char *s, uint64_t n) { return put_u64(b, n) && put(b, s, (size_t)n); }

/* One value without its type tag (the tag precedes it in a kv; array
 * elements share the array's). */
static rlx_status put_value(buf *b, const rlx_gguf_value *v, int depth)
{
    bool ok = true;
    switch (v->type) {
    case RLX_GGUF_UINT8:
    case RLX_GGUF_UINT16:
    case RLX_GGUF_UINT32:
    case RLX_GGUF_UINT64: ok = put(b, &v->u, rlx_gguf_type_size(v->type)); break;
    case RLX_GGUF_INT8:
    case RLX_GGUF_INT16:
    case RLX_GGUF_INT32:
    case RLX_GGUF_INT64: ok = put(b, &v->i, rlx_gguf_type_size(v->type)); break;
    case RLX_GGUF_FLOAT32: {
        float f = (float)v->f;
        ok = put(b, &f, 4);
        break;
    }
    case RLX_GGUF_FLOAT64: ok = put(b, &v->f, 8); break;
    case RLX_GGUF_BOOL: {
        uint8_t x = v->b ? 1 : 0;
        ok = put(b, &x, 1);
        break;
    }
    case RLX_GGUF_STRING: ok = put_str(b, v->str.ptr, v->str.len); break;
    case RLX_GGUF_ARRAY: {
        if (depth > 8)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: arrays nested too deep");
        rlx_gguf_type et = v->arr.elem_type;
        size_t es = rlx_gguf_type_size(et);
        if (!es && et != RLX_GGUF_STRING && et != RLX_GGUF_ARRAY)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: array of unknown type %d", (int)et);
        ok = put_u32(b, (uint32_t)et) && put_u64(b, v->arr.count);
        if (ok && es) {
            if (v->arr.count > SIZE_MAX / es || (v->arr.count && !v->arr.raw))
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: array without its elements");
            ok = put(b, v->arr.raw, (size_t)v->arr.count * es);
        } else {
            for (uint64_t i = 0; ok && i < v->arr.count; i++) {
                if (!v->arr.items || v->arr.items[i].type != et)
                    return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: array element %llu is not a %s",
                                         (unsigned long long)i, rlx_gguf_type_name(et));
                rlx_status st = put_value(b, &v->arr.items[i], depth + 1);
                if (st != RLX_OK)
                    return st;
            }
        }
        break;
    }
    default: return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: unknown value type %d", (int)v->type);
    }
    return ok ? RLX_OK : rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
}

rlx_status rlx_gguf_writer_new(rlx_gguf_writer **out)
{
    if (!out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_writer_new: out is NULL");
    *out = rlx_calloc(1, sizeof **out);
    if (!*out)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    (*out)->align = GGUF_DEFAULT_ALIGNMENT;
    return RLX_OK;
}

void rlx_gguf_writer_free(rlx_gguf_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->n_kv; i++)
        free(w->kvs[i].key), free(w->kvs[i].val.p);
    for (int64_t i = 0; i < w->n_t; i++)
        free(w->ts[i].name);
    free(w->kvs);
    free(w->ts);
    free(w);
}

static int64_t find_kv(const rlx_gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key))
            return i;
    return -1;
}

rlx_status rlx_gguf_writer_set(rlx_gguf_writer *w, const char *key, const rlx_gguf_value *v)
{
    if (!w || !key || !*key || !v)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: NULL or empty key or value");
    if (w->header_done)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: metadata set after the header was written");
    buf b = {0};
    rlx_status st = put_u32(&b, (uint32_t)v->type) ? put_value(&b, v, 0) : RLX_ERR_OUT_OF_MEMORY;
    if (st != RLX_OK) {
        free(b.p);
        return st == RLX_ERR_OUT_OF_MEMORY ? rlx_set_error(st, "gguf writer: out of memory") : st;
    }
    if (!strcmp(key, "general.alignment")) { /* the data section follows it */
        uint64_t a = v->type == RLX_GGUF_UINT32 ? v->u : 0;
        if (!a || (a & (a - 1)) || a > (1u << 20)) {
            free(b.p);
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: general.alignment must be a u32 power of 2");
        }
        w->align = (uint32_t)a;
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        free(w->kvs[i].val.p);
        w->kvs[i].val = b;
        return RLX_OK;
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *k = rlx_realloc_array(w->kvs, (size_t)cap, sizeof *k);
        if (!k) {
            free(b.p);
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
        }
        w->kvs = k, w->cap_kv = cap;
    }
    char *kc = strdup(key);
    if (!kc) {
        free(b.p);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    }
    w->kvs[w->n_kv++] = (wkv){kc, b};
    return RLX_OK;
}

rlx_status rlx_gguf_writer_set_u32(rlx_gguf_writer *w, const char *key, uint32_t v)
{
    rlx_gguf_value x = {.type = RLX_GGUF_UINT32, .u = v};
    return rlx_gguf_writer_set(w, key, &x);
}

rlx_status rlx_gguf_writer_set_i32(rlx_gguf_writer *w, const char *key, int32_t v)
{
    rlx_gguf_value x = {.type = RLX_GGUF_INT32, .i = v};
    return rlx_gguf_writer_set(w, key, &x);
}

rlx_status rlx_gguf_writer_set_f32(rlx_gguf_writer *w, const char *key, float v)
{
    rlx_gguf_value x = {.type = RLX_GGUF_FLOAT32, .f = v};
    return rlx_gguf_writer_set(w, key, &x);
}

rlx_status rlx_gguf_writer_set_bool(rlx_gguf_writer *w, const char *key, bool v)
{
    rlx_gguf_value x = {.type = RLX_GGUF_BOOL, .b = v};
    return rlx_gguf_writer_set(w, key, &x);
}

rlx_status rlx_gguf_writer_set_str(rlx_gguf_writer *w, const char *key, const char *s)
{
    if (!s)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: NULL string for %s", key ? key : "?");
    rlx_gguf_value x = {.type = RLX_GGUF_STRING};
    x.str.ptr = s;
    x.str.len = strlen(s);
    return rlx_gguf_writer_set(w, key, &x);
}

rlx_status rlx_gguf_writer_set_str_array(rlx_gguf_writer *w, const char *key, uint64_t n, const char *const *s,
                                         const size_t *lens)
{
    rlx_gguf_value *items = rlx_calloc(n ? (size_t)n : 1, sizeof *items);
    if (!items)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        items[i].type = RLX_GGUF_STRING;
        items[i].str.ptr = s[i] ? s[i] : "";
        items[i].str.len = lens ? lens[i] : strlen(items[i].str.ptr);
    }
    rlx_gguf_value x = {.type = RLX_GGUF_ARRAY};
    x.arr.elem_type = RLX_GGUF_STRING;
    x.arr.count = n;
    x.arr.items = items;
    rlx_status st = rlx_gguf_writer_set(w, key, &x);
    free(items);
    return st;
}

rlx_status rlx_gguf_writer_set_array(rlx_gguf_writer *w, const char *key, rlx_gguf_type elem, uint64_t n,
                                     const void *raw)
{
    if (!rlx_gguf_type_size(elem))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: %s is not a fixed-size element type",
                             rlx_gguf_type_name(elem));
    rlx_gguf_value x = {.type = RLX_GGUF_ARRAY};
    x.arr.elem_type = elem;
    x.arr.count = n;
    x.arr.raw = raw;
    return rlx_gguf_writer_set(w, key, &x);
}

void rlx_gguf_writer_remove(rlx_gguf_writer *w, const char *key)
{
    int64_t i = w && key && !w->header_done ? find_kv(w, key) : -1;
    if (i < 0)
        return;
    free(w->kvs[i].key), free(w->kvs[i].val.p);
    memmove(w->kvs + i, w->kvs + i + 1, (size_t)(w->n_kv - i - 1) * sizeof *w->kvs);
    w->n_kv--;
}

int64_t rlx_gguf_writer_kv_count(const rlx_gguf_writer *w) { return w ? w->n_kv : 0; }

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

rlx_status rlx_gguf_writer_add_tensor(rlx_gguf_writer *w, const char *name, int ggml_type, int ndim,
                                      const int64_t *dims, size_t *bytes)
{
    if (!w || !name || !*name || ndim < 1 || ndim > 4 || !dims)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' needs a name and 1 to 4 dims",
                             name ? name : "");
    if (w->header_done)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' added after the header", name);
    int64_t be;
    size_t bb;
    if (!rlx_ggml_type_size(ggml_type, &be, &bb))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "gguf writer: tensor '%s': unknown ggml type %d", name, ggml_type);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] < 0 || (dims[d] && numel > (UINT64_MAX >> 8) / (uint64_t)dims[d]))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' has a bad shape", name);
        numel *= (uint64_t)dims[d];
    }
    if (dims[ndim - 1] % be)
        return rlx_set_error(RLX_ERR_SHAPE, "gguf writer: tensor '%s': rows of %lld are not a multiple of %s's %lld",
                             name, (long long)dims[ndim - 1], rlx_ggml_type_name(ggml_type), (long long)be);
    for (int64_t i = 0; i < w->n_t; i++)
        if (!strcmp(w->ts[i].name, name))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' added twice", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *t = rlx_realloc_array(w->ts, (size_t)cap, sizeof *t);
        if (!t)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
        w->ts = t, w->cap_t = cap;
    }
    wtensor t = {.type = ggml_type, .ndim = ndim, .bytes = (size_t)(numel / (uint64_t)be * bb)};
    memcpy(t.dims, dims, sizeof(int64_t) * (size_t)ndim);
    if (!(t.name = strdup(name)))
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    w->ts[w->n_t++] = t;
    if (bytes)
        *bytes = t.bytes;
    return RLX_OK;
}

static rlx_status write_padding(rlx_file *f, uint64_t n)
{
    static const unsigned char zeros[64];
    while (n) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        rlx_status st = rlx_file_write(f, zeros, k);
        if (st != RLX_OK)
            return st;
        n -= k;
    }
    return RLX_OK;
}

rlx_status rlx_gguf_writer_write_header(rlx_gguf_writer *w, rlx_file *f)
{
    if (!w || !f || w->header_done)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: header written twice or without a file");
    buf b = {0};
    bool ok = put(&b, "GGUF", 4) && put_u32(&b, GGUF_WRITE_VERSION) && put_u64(&b, (uint64_t)w->n_t) &&
              put_u64(&b, (uint64_t)w->n_kv);
    for (int64_t i = 0; ok && i < w->n_kv; i++)
        ok = put_str(&b, w->kvs[i].key, strlen(w->kvs[i].key)) && put(&b, w->kvs[i].val.p, w->kvs[i].val.n);
    uint64_t off = 0;
    for (int64_t i = 0; ok && i < w->n_t; i++) {
        wtensor *t = &w->ts[i];
        t->offset = off;
        ok = put_str(&b, t->name, strlen(t->name)) && put_u32(&b, (uint32_t)t->ndim);
        for (int d = t->ndim - 1; ok && d >= 0; d--) /* ne[0] is the innermost */
            ok = put_u64(&b, (uint64_t)t->dims[d]);
        ok = ok && put_u32(&b, (uint32_t)t->type) && put_u64(&b, t->offset);
        off = align_up(off + t->bytes, w->align);
    }
    if (!ok) {
        free(b.p);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf writer: out of memory");
    }
    rlx_status st = rlx_file_write(f, b.p, b.n);
    if (st == RLX_OK)
        st = write_padding(f, align_up(b.n, w->align) - b.n);
    free(b.p);
    if (st == RLX_OK)
        w->header_done = true;
    return st;
}

rlx_status rlx_gguf_writer_write_tensor(rlx_gguf_writer *w, rlx_file *f, const void *data, size_t bytes)
{
    if (!w || !f || !w->header_done || w->next_data >= w->n_t)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: tensor data before the header or past the end");
    const wtensor *t = &w->ts[w->next_data];
    if (bytes != t->bytes || (bytes && !data))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf writer: tensor '%s' is %zu bytes, got %zu", t->name,
                             t->bytes, bytes);
    rlx_status st = rlx_file_write(f, data, bytes);
    if (st == RLX_OK)
        st = write_padding(f, align_up(bytes, w->align) - bytes);
    if (st == RLX_OK)
        w->next_data++;
    return st;
}
