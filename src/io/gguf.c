/* gguf.c - GGUF v2/v3 reader (see gguf.h).  Layout, from the GGUF spec:
 *
 *   u32 magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
 *   kv_count x { string key, u32 value_type, value },
 *   tensor_count x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
 *                    u64 offset (from the data section, a multiple of the alignment) },
 *   padding to general.alignment (default 32), then the data section.
 *
 * A string is u64 length + bytes (no NUL); an array is u32 element type,
 * u64 count, then the elements.  All little-endian.
 *
 * Every read goes through a cursor that checks the bytes are there, and
 * every count is bounded by the bytes left before anything is allocated
 * for it, so a file that claims 2^60 elements fails before allocating. */
#define _POSIX_C_SOURCE 200809L
#include "io/gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ARRAY_DEPTH 8

static const char *const value_type_names[RLX_GGUF_TYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

const char *rlx_gguf_type_name(rlx_gguf_type t)
{
    return (unsigned)t < RLX_GGUF_TYPE_COUNT ? value_type_names[t] : "unknown";
}

size_t rlx_gguf_type_size(uint32_t t)
{
    switch (t) {
    case RLX_GGUF_UINT8:
    case RLX_GGUF_INT8:
    case RLX_GGUF_BOOL: return 1;
    case RLX_GGUF_UINT16:
    case RLX_GGUF_INT16: return 2;
    case RLX_GGUF_UINT32:
    case RLX_GGUF_INT32:
    case RLX_GGUF_FLOAT32: return 4;
    case RLX_GGUF_UINT64:
    case RLX_GGUF_INT64:
    case RLX_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* ---------------------------------------------------------------- the reader */

/* Owned memory in chunks, so pointers into it stay put as it grows. */
typedef struct chunk {
    struct chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} chunk;

typedef struct kv {
    const char *key;
    uint64_t key_len;
    rlx_gguf_value value;
} kv;

struct rlx_gguf {
    rlx_file_map map;
    char label[256];
    uint32_t version, alignment;
    uint64_t data_offset;
    int64_t n_kv, n_tensors;
    kv *kvs;
    int64_t *kv_sorted; /* kv indices by key */
    rlx_weight_view *tensors;
    uint64_t *tensor_offsets; /* from the data section */
    int64_t *tensor_sorted;   /* tensor indices by name */
    chunk *chunks;
};

static void *arena_alloc(rlx_gguf *g, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!g->chunks || g->chunks->cap - g->chunks->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        chunk *c = malloc(sizeof *c + cap);
        if (!c) {
            rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "gguf '%s': out of memory (%zu bytes)", g->label, n);
            return NULL;
        }
        c->used = 0;
        c->cap = cap;
        if (g->chunks && n > 65536) { /* a large block: keep filling the current chunk */
            c->next = g->chunks->next;
            g->chunks->next = c;
            c->used = n;
            return c->mem;
        }
        c->next = g->chunks;
        g->chunks = c;
    }
    void *p = g->chunks->mem + g->chunks->used;
    g->chunks->used += n;
    return p;
}

typedef struct cursor {
    rlx_gguf *g;
    const unsigned char *p;
    uint64_t size, pos;
} cursor;

static rlx_status fail(rlx_gguf *g, rlx_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static rlx_status fail(rlx_gguf *g, rlx_status s, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rlx_set_error(s, "gguf '%s': %s", g->label, msg);
}

/* n bytes at the cursor, or NULL (error set) when fewer are left. */
static const unsigned char *take(cursor *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos) {
        fail(c->g, RLX_ERR_FORMAT, "truncated: %s needs %llu bytes at offset %llu, the file has %llu", what,
             (unsigned long long)n, (unsigned long long)c->pos, (unsigned long long)c->size);
        return NULL;
    }
    const unsigned char *r = c->p + c->pos;
    c->pos += n;
    return r;
}

static uint64_t le(const unsigned char *b, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

static rlx_status read_u32(cursor *c, uint32_t *v, const char *what)
{
    const unsigned char *b = take(c, 4, what);
    if (!b)
        return RLX_ERR_FORMAT;
    *v = (uint32_t)le(b, 4);
    return RLX_OK;
}

static rlx_status read_u64(cursor *c, uint64_t *v, const char *what)
{
    const unsigned char *b = take(c, 8, what);
    if (!b)
        return RLX_ERR_FORMAT;
    *v = le(b, 8);
    return RLX_OK;
}

/* A string, copied NUL-terminated into the arena. */
static rlx_status read_string(cursor *c, const char **s, uint64_t *len, const char *what)
{
    uint64_t n;
    if (read_u64(c, &n, what) != RLX_OK)
        return RLX_ERR_FORMAT;
    if (n > c->size - c->pos)
        return fail(c->g, RLX_ERR_FORMAT,
                    "%s: string length %llu at offset %llu runs past the end of the file (%llu bytes)", what,
                    (unsigned long long)n, (unsigned long long)(c->pos - 8), (unsigned long long)c->size);
    const unsigned char *b = take(c, n, what);
    char *d = arena_alloc(c->g, (size_t)n + 1);
    if (!d)
        return RLX_ERR_OUT_OF_MEMORY;
    memcpy(d, b, (size_t)n);
    d[n] = '\0';
    *s = d;
    *len = n;
    return RLX_OK;
}

/* Decodes one fixed-size element at b into v. */
static void decode_scalar(uint32_t t, const unsigned char *b, rlx_gguf_value *v)
{
    v->type = (rlx_gguf_type)t;
    switch (t) {
    case RLX_GGUF_UINT8: v->u = b[0]; break;
    case RLX_GGUF_INT8: v->i = (int8_t)b[0]; break;
    case RLX_GGUF_UINT16: v->u = le(b, 2); break;
    case RLX_GGUF_INT16: v->i = (int16_t)(uint16_t)le(b, 2); break;
    case RLX_GGUF_UINT32: v->u = le(b, 4); break;
    case RLX_GGUF_INT32: v->i = (int32_t)(uint32_t)le(b, 4); break;
    case RLX_GGUF_UINT64: v->u = le(b, 8); break;
    case RLX_GGUF_INT64: v->i = (int64_t)le(b, 8); break;
    case RLX_GGUF_BOOL: v->b = b[0] != 0; break;
    case RLX_GGUF_FLOAT32: {
        uint32_t u = (uint32_t)le(b, 4);
        float f;
        memcpy(&f, &u, 4);
        v->f = f;
        break;
    }
    case RLX_GGUF_FLOAT64: {
        uint64_t u = le(b, 8);
        memcpy(&v->f, &u, 8);
        break;
    }
    }
}

static rlx_status read_value(cursor *c, uint32_t t, rlx_gguf_value *v, int depth, const char *key)
{
    size_t sz = rlx_gguf_type_size(t);
    if (sz) {
        const unsigned char *b = take(c, sz, key);
        if (!b)
            return RLX_ERR_FORMAT;
        decode_scalar(t, b, v);
        return RLX_OK;
    }
    if (t == RLX_GGUF_STRING) {
        v->type = RLX_GGUF_STRING;
        return read_string(c, &v->str.ptr, &v->str.len, key);
    }
    if (t != RLX_GGUF_ARRAY)
        return fail(c->g, RLX_ERR_FORMAT, "key '%s': unknown value type %u at offset %llu", key, t,
                    (unsigned long long)(c->pos - 4));
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return fail(c->g, RLX_ERR_FORMAT, "key '%s': arrays nested deeper than %d", key, GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    if (read_u32(c, &et, key) != RLX_OK || read_u64(c, &n, key) != RLX_OK)
        return RLX_ERR_FORMAT;
    if (et >= RLX_GGUF_TYPE_COUNT)
        return fail(c->g, RLX_ERR_FORMAT, "key '%s': unknown array element type %u", key, et);
    v->type = RLX_GGUF_ARRAY;
    v->arr.elem_type = (rlx_gguf_type)et;
    v->arr.count = n;
    v->arr.raw = NULL;
    v->arr.items = NULL;
    uint64_t left = c->size - c->pos;
    sz = rlx_gguf_type_size(et);
    if (sz) {
        if (n > left / sz)
            return fail(c->g, RLX_ERR_FORMAT,
                        "key '%s': array of %llu %s elements needs more than the %llu bytes left in the file", key,
                        (unsigned long long)n, value_type_names[et], (unsigned long long)left);
        v->arr.raw = take(c, n * sz, key);
        return RLX_OK;
    }
    /* a string element takes at least 8 bytes, an array element 12 */
    uint64_t least = et == RLX_GGUF_STRING ? 8 : 12;
    if (n > left / least)
        return fail(c->g, RLX_ERR_FORMAT,
                    "key '%s': array of %llu %s elements needs more than the %llu bytes left in the file", key,
                    (unsigned long long)n, value_type_names[et], (unsigned long long)left);
    rlx_gguf_value *items = n ? arena_alloc(c->g, (size_t)n * sizeof *items) : NULL;
    if (n && !items)
        return RLX_ERR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < n; i++) {
        rlx_status s = read_value(c, et, &items[i], depth + 1, key);
        if (s != RLX_OK)
            return s;
    }
    v->arr.items = items;
    return RLX_OK;
}

rlx_status rlx_gguf_array_get(const rlx_gguf_value *v, uint64_t i, rlx_gguf_value *out)
{
    if (!v || !out || v->type != RLX_GGUF_ARRAY)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_array_get: not an array value");
    if (i >= v->arr.count)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_array_get: index %llu past the array's %llu elements",
                             (unsigned long long)i, (unsigned long long)v->arr.count);
    size_t sz = rlx_gguf_type_size(v->arr.elem_type);
    if (sz) {
        memset(out, 0, sizeof *out);
        decode_scalar(v->arr.elem_type, (const unsigned char *)v->arr.raw + i * sz, out);
    } else {
        *out = v->arr.items[i];
    }
    return RLX_OK;
}

/* Byte-wise order of (ptr, len) strings. */
static int cmp_bytes(const char *a, uint64_t la, const char *b, uint64_t lb)
{
    int r = memcmp(a, b, (size_t)(la < lb ? la : lb));
    return r ? r : (la > lb) - (la < lb);
}

/* qsort takes no context argument: the reader being sorted, per thread */
static _Thread_local const rlx_gguf *sort_ctx;

static int cmp_kv(const void *a, const void *b)
{
    const kv *x = &sort_ctx->kvs[*(const int64_t *)a], *y = &sort_ctx->kvs[*(const int64_t *)b];
    return cmp_bytes(x->key, x->key_len, y->key, y->key_len);
}

static int cmp_tensor_name(const void *a, const void *b)
{
    const rlx_weight_view *x = &sort_ctx->tensors[*(const int64_t *)a], *y = &sort_ctx->tensors[*(const int64_t *)b];
    return strcmp(x->name, y->name);
}

static int cmp_tensor_offset(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    uint64_t x = sort_ctx->tensor_offsets[i], y = sort_ctx->tensor_offsets[j];
    if (x != y)
        return (x > y) - (x < y);
    return (sort_ctx->tensors[i].nbytes > sort_ctx->tensors[j].nbytes) -
           (sort_ctx->tensors[i].nbytes < sort_ctx->tensors[j].nbytes);
}

static rlx_status read_tensor_info(cursor *c, int64_t idx, rlx_weight_view *t, uint64_t *offset)
{
    rlx_gguf *g = c->g;
    uint64_t name_len;
    char what[64];
    snprintf(what, sizeof what, "tensor %lld's name", (long long)idx);
    rlx_status s = read_string(c, &t->name, &name_len, what);
    if (s != RLX_OK)
        return s;
    if (strlen(t->name) != name_len)
        return fail(g, RLX_ERR_FORMAT, "tensor %lld: name contains a NUL byte", (long long)idx);
    uint32_t nd, type;
    if (read_u32(c, &nd, t->name) != RLX_OK)
        return RLX_ERR_FORMAT;
    if (nd > RLX_MAX_DIMS)
        return fail(g, RLX_ERR_FORMAT, "tensor '%s': %u dimensions (at most %d)", t->name, nd, RLX_MAX_DIMS);
    uint64_t ne[RLX_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++)
        if (read_u64(c, &ne[d], t->name) != RLX_OK)
            return RLX_ERR_FORMAT;
    if (read_u32(c, &type, t->name) != RLX_OK || read_u64(c, offset, t->name) != RLX_OK)
        return RLX_ERR_FORMAT;
    const char *tname = rlx_ggml_type_name((int)type);
    int64_t block;
    size_t bbytes;
    if (!tname)
        return fail(g, RLX_ERR_FORMAT, "tensor '%s': unknown ggml type id %u", t->name, type);
    if (!rlx_ggml_type_size((int)type, &block, &bbytes))
        return fail(g, RLX_ERR_UNSUPPORTED, "tensor '%s': ggml type %s (id %u) has no known block size", t->name, tname,
                    type);
    t->ggml_type = (int)type;
    t->type_name = tname;
    t->dtype = rlx_ggml_type_dtype(type);
    t->ndim = (int)nd;
    /* numel and bytes, each step checked against overflow */
    uint64_t numel = 1;
    for (uint32_t d = 0; d < nd; d++) {
        if (ne[d] > (uint64_t)INT64_MAX)
            return fail(g, RLX_ERR_FORMAT, "tensor '%s': dimension ne[%u] = %llu is negative or too large", t->name, d,
                        (unsigned long long)ne[d]);
        if (ne[d] && numel > (uint64_t)INT64_MAX / ne[d])
            return fail(g, RLX_ERR_FORMAT, "tensor '%s': element count overflows", t->name);
        numel *= ne[d];
        t->dims[nd - 1 - d] = (int64_t)ne[d];
    }
    uint64_t ne0 = nd ? ne[0] : 1;
    if (ne0 % (uint64_t)block)
        return fail(g, RLX_ERR_FORMAT, "tensor '%s': row length %llu is not a multiple of %s's block of %lld", t->name,
                    (unsigned long long)ne0, tname, (long long)block);
    uint64_t blocks = numel / (uint64_t)block;
    if (blocks > SIZE_MAX / bbytes || blocks > UINT64_MAX / bbytes)
        return fail(g, RLX_ERR_FORMAT, "tensor '%s': byte size overflows", t->name);
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)(blocks * bbytes);
    if (*offset % g->alignment)
        return fail(g, RLX_ERR_FORMAT, "tensor '%s': data offset %llu is not a multiple of the alignment %u", t->name,
                    (unsigned long long)*offset, g->alignment);
    return RLX_OK;
}

static rlx_status parse(rlx_gguf *g)
{
    cursor c = {g, g->map.data, g->map.size, 0};
    const unsigned char *b = take(&c, 4, "magic");
    if (!b)
        return RLX_ERR_FORMAT;
    if (memcmp(b, "GGUF", 4) != 0)
        return fail(g, RLX_ERR_FORMAT, "not a GGUF file (magic %02x %02x %02x %02x)", b[0], b[1], b[2], b[3]);
    if (read_u32(&c, &g->version, "version") != RLX_OK)
        return RLX_ERR_FORMAT;
    if (g->version == 1)
        return fail(g, RLX_ERR_UNSUPPORTED, "GGUF version 1 is not supported (only 2 and 3)");
    if ((g->version & 0xffff) == 0 && g->version >> 16)
        return fail(g, RLX_ERR_UNSUPPORTED, "big-endian GGUF (version field %08x) is not supported", g->version);
    if (g->version != 2 && g->version != 3)
        return fail(g, RLX_ERR_UNSUPPORTED, "GGUF version %u is not supported (only 2 and 3)", g->version);
    uint64_t nt, nkv;
    if (read_u64(&c, &nt, "tensor count") != RLX_OK || read_u64(&c, &nkv, "metadata count") != RLX_OK)
        return RLX_ERR_FORMAT;
    /* a key/value takes at least 13 bytes (8 + 4 + 1), a tensor info 24 */
    uint64_t left = c.size - c.pos;
    if (nkv > left / 13)
        return fail(g, RLX_ERR_FORMAT, "metadata count %llu is more than the %llu bytes left could hold",
                    (unsigned long long)nkv, (unsigned long long)left);
    if (nt > left / 24)
        return fail(g, RLX_ERR_FORMAT, "tensor count %llu is more than the %llu bytes left could hold",
                    (unsigned long long)nt, (unsigned long long)left);
    g->kvs = rlx_calloc((size_t)nkv, sizeof *g->kvs);
    g->kv_sorted = rlx_calloc((size_t)nkv, sizeof *g->kv_sorted);
    if (!g->kvs || !g->kv_sorted)
        return RLX_ERR_OUT_OF_MEMORY;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < nkv; i++) {
        kv *e = &g->kvs[i];
        char what[64];
        snprintf(what, sizeof what, "metadata key %llu", (unsigned long long)i);
        rlx_status s = read_string(&c, &e->key, &e->key_len, what);
        if (s != RLX_OK)
            return s;
        if (strlen(e->key) != e->key_len)
            return fail(g, RLX_ERR_FORMAT, "metadata key %llu ('%s') contains a NUL byte", (unsigned long long)i,
                        e->key);
        uint32_t t;
        if (read_u32(&c, &t, e->key) != RLX_OK)
            return RLX_ERR_FORMAT;
        if (t >= RLX_GGUF_TYPE_COUNT)
            return fail(g, RLX_ERR_FORMAT, "key '%s': unknown value type %u", e->key, t);
        s = read_value(&c, t, &e->value, 0, e->key);
        if (s != RLX_OK)
            return s;
        g->n_kv = (int64_t)i + 1;
        g->kv_sorted[i] = (int64_t)i;
        if (!strcmp(e->key, "general.alignment")) {
            if (e->value.type != RLX_GGUF_UINT32)
                return fail(g, RLX_ERR_FORMAT, "general.alignment is a %s, not a uint32",
                            rlx_gguf_type_name(e->value.type));
            uint64_t a = e->value.u;
            if (a == 0 || (a & (a - 1)))
                return fail(g, RLX_ERR_FORMAT, "general.alignment %llu is not a power of two", (unsigned long long)a);
            g->alignment = (uint32_t)a;
        }
    }
    sort_ctx = g;
    qsort(g->kv_sorted, (size_t)g->n_kv, sizeof *g->kv_sorted, cmp_kv);
    for (int64_t i = 1; i < g->n_kv; i++) {
        const kv *x = &g->kvs[g->kv_sorted[i - 1]], *y = &g->kvs[g->kv_sorted[i]];
        if (!cmp_bytes(x->key, x->key_len, y->key, y->key_len))
            return fail(g, RLX_ERR_FORMAT, "duplicate metadata key '%s'", x->key);
    }

    g->tensors = rlx_calloc((size_t)nt, sizeof *g->tensors);
    g->tensor_offsets = rlx_calloc((size_t)nt, sizeof *g->tensor_offsets);
    g->tensor_sorted = rlx_calloc((size_t)nt, sizeof *g->tensor_sorted);
    if (!g->tensors || !g->tensor_offsets || !g->tensor_sorted)
        return RLX_ERR_OUT_OF_MEMORY;
    for (uint64_t i = 0; i < nt; i++) {
        rlx_status s = read_tensor_info(&c, (int64_t)i, &g->tensors[i], &g->tensor_offsets[i]);
        if (s != RLX_OK)
            return s;
        g->n_tensors = (int64_t)i + 1;
        g->tensor_sorted[i] = (int64_t)i;
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (g->alignment - c.pos % g->alignment) % g->alignment;
    g->data_offset = c.pos + pad;
    if (g->n_tensors && pad > c.size - c.pos)
        return fail(g, RLX_ERR_FORMAT,
                    "truncated: the data section would start at offset %llu, past the end (%llu bytes)",
                    (unsigned long long)g->data_offset, (unsigned long long)c.size);
    uint64_t data_size = g->data_offset <= c.size ? c.size - g->data_offset : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        rlx_weight_view *t = &g->tensors[i];
        uint64_t off = g->tensor_offsets[i];
        if (off > data_size || t->nbytes > data_size - off)
            return fail(g, RLX_ERR_FORMAT,
                        "tensor '%s': data [%llu, +%zu) runs past the end of the data section (%llu bytes)", t->name,
                        (unsigned long long)off, t->nbytes, (unsigned long long)data_size);
        t->data = g->map.data + g->data_offset + off;
    }
    sort_ctx = g;
    qsort(g->tensor_sorted, (size_t)g->n_tensors, sizeof *g->tensor_sorted, cmp_tensor_name);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[g->tensor_sorted[i - 1]].name, g->tensors[g->tensor_sorted[i]].name))
            return fail(g, RLX_ERR_FORMAT, "duplicate tensor name '%s'", g->tensors[g->tensor_sorted[i]].name);
    /* no two tensors share bytes */
    int64_t *by_off = rlx_calloc((size_t)g->n_tensors, sizeof *by_off);
    if (!by_off)
        return RLX_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < g->n_tensors; i++)
        by_off[i] = i;
    qsort(by_off, (size_t)g->n_tensors, sizeof *by_off, cmp_tensor_offset);
    rlx_status s = RLX_OK;
    for (int64_t i = 1; i < g->n_tensors && s == RLX_OK; i++) {
        const rlx_weight_view *a = &g->tensors[by_off[i - 1]], *b2 = &g->tensors[by_off[i]];
        if (g->tensor_offsets[by_off[i - 1]] + a->nbytes > g->tensor_offsets[by_off[i]])
            s = fail(g, RLX_ERR_FORMAT, "tensors '%s' and '%s' overlap in the data section", a->name, b2->name);
    }
    free(by_off);
    sort_ctx = NULL;
    return s;
}

static rlx_status open_map(rlx_file_map map, const char *label, rlx_gguf **out)
{
    rlx_gguf *g = rlx_calloc(1, sizeof *g);
    if (!g) {
        rlx_file_map_release(&map);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    g->map = map;
    snprintf(g->label, sizeof g->label, "%s", label);
    rlx_status s = parse(g);
    sort_ctx = NULL;
    if (s != RLX_OK) {
        rlx_gguf_close(g);
        return s;
    }
    *out = g;
    return RLX_OK;
}

rlx_status rlx_gguf_open(const char *path, rlx_gguf **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_open: NULL argument");
    *out = NULL;
    rlx_file_map m;
    rlx_status s = rlx_file_map_open(path, "gguf", &m);
    if (s != RLX_OK)
        return s;
    return open_map(m, path, out);
}

rlx_status rlx_gguf_open_buffer(const void *data, size_t size, rlx_gguf **out)
{
    if ((!data && size) || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_open_buffer: NULL argument");
    *out = NULL;
    rlx_file_map m = {data, size, 0};
    return open_map(m, "<buffer>", out);
}

void rlx_gguf_close(rlx_gguf *g)
{
    if (!g)
        return;
    rlx_file_map_release(&g->map);
    free(g->kvs);
    free(g->kv_sorted);
    free(g->tensors);
    free(g->tensor_offsets);
    free(g->tensor_sorted);
    for (chunk *c = g->chunks, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    free(g);
}

uint32_t rlx_gguf_version(const rlx_gguf *g) { return g ? g->version : 0; }
uint32_t rlx_gguf_alignment(const rlx_gguf *g) { return g ? g->alignment : 0; }
uint64_t rlx_gguf_data_offset(const rlx_gguf *g) { return g ? g->data_offset : 0; }
int64_t rlx_gguf_kv_count(const rlx_gguf *g) { return g ? g->n_kv : 0; }
int64_t rlx_gguf_tensor_count(const rlx_gguf *g) { return g ? g->n_tensors : 0; }

const char *rlx_gguf_kv_key(const rlx_gguf *g, int64_t i) { return g && i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL; }

const rlx_gguf_value *rlx_gguf_kv_value(const rlx_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kvs[i].value : NULL;
}

const rlx_gguf_value *rlx_gguf_find(const rlx_gguf *g, const char *key)
{
    if (!g || !key)
        return NULL;
    uint64_t kl = strlen(key);
    int64_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const kv *e = &g->kvs[g->kv_sorted[mid]];
        int r = cmp_bytes(e->key, e->key_len, key, kl);
        if (!r)
            return &e->value;
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const rlx_weight_view *rlx_gguf_tensor(const rlx_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

rlx_status rlx_gguf_find_tensor(const rlx_gguf *g, const char *name, const rlx_weight_view **out)
{
    if (!g || !name || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_find_tensor: NULL argument");
    *out = NULL;
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        const rlx_weight_view *t = &g->tensors[g->tensor_sorted[mid]];
        int r = strcmp(t->name, name);
        if (!r) {
            *out = t;
            return RLX_OK;
        }
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return rlx_set_error(RLX_ERR_NOT_FOUND, "gguf '%s': no tensor named '%s'", g->label, name);
}

/* ---------------------------------------------------------------- typed getters */

static bool is_signed_int(rlx_gguf_type t)
{
    return t == RLX_GGUF_INT8 || t == RLX_GGUF_INT16 || t == RLX_GGUF_INT32 || t == RLX_GGUF_INT64;
}

static bool is_unsigned_int(rlx_gguf_type t)
{
    return t == RLX_GGUF_UINT8 || t == RLX_GGUF_UINT16 || t == RLX_GGUF_UINT32 || t == RLX_GGUF_UINT64;
}

/* The value of key, or an error naming it (absent: NOT_FOUND). */
static const rlx_gguf_value *lookup(const rlx_gguf *g, const char *key, rlx_status *s)
{
    *s = RLX_OK;
    if (!g || !key) {
        *s = rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_gguf_get: NULL argument");
        return NULL;
    }
    const rlx_gguf_value *v = rlx_gguf_find(g, key);
    if (!v)
        *s = rlx_set_error(RLX_ERR_NOT_FOUND, "gguf '%s': no metadata key '%s'", g->label, key);
    return v;
}

static rlx_status wrong_type(const rlx_gguf *g, const char *key, const rlx_gguf_value *v, const char *want)
{
    return rlx_set_error(RLX_ERR_DTYPE, "gguf '%s': metadata key '%s' is a %s, not %s", g->label, key,
                         rlx_gguf_type_name(v->type), want);
}

/* An integer value within [lo, hi] (as signed or unsigned 64-bit). */
static rlx_status get_int(const rlx_gguf *g, const char *key, bool want_unsigned, uint64_t umax, int64_t imin,
                          int64_t imax, uint64_t *uo, int64_t *io)
{
    rlx_status s;
    const rlx_gguf_value *v = lookup(g, key, &s);
    if (!v)
        return s;
    const char *want = want_unsigned ? "an unsigned integer in range" : "an integer in range";
    if (is_unsigned_int(v->type)) {
        if (want_unsigned ? v->u > umax : v->u > (uint64_t)imax)
            return wrong_type(g, key, v, want);
        *uo = v->u;
        *io = (int64_t)v->u;
        return RLX_OK;
    }
    if (is_signed_int(v->type)) {
        if (want_unsigned ? (v->i < 0 || (uint64_t)v->i > umax) : (v->i < imin || v->i > imax))
            return wrong_type(g, key, v, want);
        *uo = (uint64_t)v->i;
        *io = v->i;
        return RLX_OK;
    }
    return wrong_type(g, key, v, want);
}

rlx_status rlx_gguf_get_u32(const rlx_gguf *g, const char *key, uint32_t def, uint32_t *out)
{
    uint64_t u = 0;
    int64_t i = 0;
    rlx_status s = get_int(g, key, true, UINT32_MAX, 0, 0, &u, &i);
    if (out)
        *out = s == RLX_OK ? (uint32_t)u : def;
    return s;
}

rlx_status rlx_gguf_get_u64(const rlx_gguf *g, const char *key, uint64_t def, uint64_t *out)
{
    uint64_t u = 0;
    int64_t i = 0;
    rlx_status s = get_int(g, key, true, UINT64_MAX, 0, 0, &u, &i);
    if (out)
        *out = s == RLX_OK ? u : def;
    return s;
}

rlx_status rlx_gguf_get_i64(const rlx_gguf *g, const char *key, int64_t def, int64_t *out)
{
    uint64_t u = 0;
    int64_t i = 0;
    rlx_status s = get_int(g, key, false, 0, INT64_MIN, INT64_MAX, &u, &i);
    if (out)
        *out = s == RLX_OK ? i : def;
    return s;
}

rlx_status rlx_gguf_get_f64(const rlx_gguf *g, const char *key, double def, double *out)
{
    rlx_status s;
    const rlx_gguf_value *v = lookup(g, key, &s);
    double d = def;
    if (v) {
        if (v->type == RLX_GGUF_FLOAT32 || v->type == RLX_GGUF_FLOAT64)
            d = v->f;
        else if (is_signed_int(v->type))
            d = (double)v->i;
        else if (is_unsigned_int(v->type))
            d = (double)v->u;
        else
            s = wrong_type(g, key, v, "a number");
    }
    if (out)
        *out = d;
    return s;
}

rlx_status rlx_gguf_get_f32(const rlx_gguf *g, const char *key, float def, float *out)
{
    double d;
    rlx_status s = rlx_gguf_get_f64(g, key, def, &d);
    if (out)
        *out = s == RLX_OK ? (float)d : def;
    return s;
}

rlx_status rlx_gguf_get_bool(const rlx_gguf *g, const char *key, bool def, bool *out)
{
    rlx_status s;
    const rlx_gguf_value *v = lookup(g, key, &s);
    if (v && v->type != RLX_GGUF_BOOL)
        s = wrong_type(g, key, v, "a bool");
    if (out)
        *out = s == RLX_OK ? v->b : def;
    return s;
}

rlx_status rlx_gguf_get_str(const rlx_gguf *g, const char *key, const char *def, const char **out, size_t *len)
{
    rlx_status s;
    const rlx_gguf_value *v = lookup(g, key, &s);
    if (v && v->type != RLX_GGUF_STRING)
        s = wrong_type(g, key, v, "a string");
    const char *r = s == RLX_OK ? v->str.ptr : def;
    if (out)
        *out = r;
    if (len)
        *len = s == RLX_OK ? (size_t)v->str.len : (r ? strlen(r) : 0);
    return s;
}

rlx_status rlx_gguf_get_array(const rlx_gguf *g, const char *key, int elem_type, const rlx_gguf_value **out)
{
    rlx_status s;
    const rlx_gguf_value *v = lookup(g, key, &s);
    if (out)
        *out = NULL;
    if (!v)
        return s;
    if (v->type != RLX_GGUF_ARRAY)
        return wrong_type(g, key, v, "an array");
    if (elem_type >= 0 && (int)v->arr.elem_type != elem_type)
        return rlx_set_error(RLX_ERR_DTYPE, "gguf '%s': metadata key '%s' is an array of %s, not of %s", g->label, key,
                             rlx_gguf_type_name(v->arr.elem_type), rlx_gguf_type_name((rlx_gguf_type)elem_type));
    if (out)
        *out = v;
    return RLX_OK;
}
