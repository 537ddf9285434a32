/* onnx_split.c - a model file's wire bytes without its initializers'
 * raw_data payloads, and where those payloads are (onnx_internal.h,
 * onnx_split_weights).  protobuf-c copies every bytes field it unpacks;
 * unpacking the model without them and reading each weight from the mapped
 * file once keeps the weights in memory once while a model imports, not
 * twice.  Anything unusual (a group, a field repeated where it is singular,
 * a length past its end) makes the split refuse, and the caller unpacks the
 * whole file as before, with the errors it gives. */
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_internal.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };
enum { MODEL_GRAPH = 7, GRAPH_INITIALIZER = 5, TENSOR_RAW_DATA = 9 };
/* a length written in place of a message's, before its size is known:
 * protobuf-c reads at most 5 bytes of a length */
enum { LEN_WIDTH = 5 };

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool failed;
} wbuf;

typedef struct {
    onnx_raw_slice *v;
    size_t n, cap;
} slices;

static void put(wbuf *o, const void *src, size_t len)
{
    if (o->failed)
        return;
    if (o->n + len > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + len)
            cap *= 2;
        uint8_t *p = rlx_realloc(o->p, cap);
        if (!p) {
            o->failed = true;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, src, len);
    o->n += len;
}

static void put_byte(wbuf *o, uint8_t b) { put(o, &b, 1); }

/* v in exactly LEN_WIDTH bytes (continuation bits on all but the last). */
static void set_len(wbuf *o, size_t at, uint64_t v)
{
    for (int k = 0; k < LEN_WIDTH; k++, v >>= 7)
        o->p[at + (size_t)k] = (uint8_t)((v & 0x7f) | (k < LEN_WIDTH - 1 ? 0x80 : 0));
}

/* One field at p[*i]: its number, wire type and where its value (a LEN
 * field's payload) starts and ends.  False on a group or a bad field. */
static bool next_field(const uint8_t *p, size_t n, size_t *i, uint64_t *num, int *wt, size_t *v0, size_t *v1)
{
    uint64_t tag, v;
    if (!onnx_rd_varint(p, n, i, &tag) || (tag >> 3) == 0)
        return false;
    *num = tag >> 3;
    *wt = (int)(tag & 7);
    switch (*wt) {
    case WT_VARINT:
        *v0 = *i;
        if (!onnx_rd_varint(p, n, i, &v))
            return false;
        break;
    case WT_I64:
    case WT_I32: {
        size_t w = *wt == WT_I64 ? 8 : 4;
        if (n - *i < w)
            return false;
        *v0 = *i;
        *i += w;
        break;
    }
    case WT_LEN:
        if (!onnx_rd_varint(p, n, i, &v) || v > n - *i || v >= (uint64_t)1 << 32)
            return false;
        *v0 = *i;
        *i += (size_t)v;
        break;
    default: return false;
    }
    *v1 = *i;
    return true;
}

/* Starts a LEN field whose length set_len fills in later; returns where. */
static size_t open_len(wbuf *o, uint64_t num)
{
    put_byte(o, (uint8_t)((num << 3) | WT_LEN)); /* the field numbers here are below 16 */
    size_t at = o->n;
    static const uint8_t zeros[LEN_WIDTH];
    put(o, zeros, LEN_WIDTH);
    return at;
}

static void close_len(wbuf *o, size_t at)
{
    if (!o->failed)
        set_len(o, at, o->n - at - LEN_WIDTH);
}

/* A TensorProto: its fields but raw_data's payload, which becomes a slice
 * (off 0, len 0 and present false when the tensor has none). */
static bool split_tensor(const uint8_t *base, size_t off, size_t n, wbuf *o, onnx_raw_slice *s)
{
    const uint8_t *p = base + off;
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < n;) {
        size_t start = i, v0, v1;
        uint64_t num;
        int wt;
        if (!next_field(p, n, &i, &num, &wt, &v0, &v1))
            return false;
        if (num == TENSOR_RAW_DATA && wt == WT_LEN) {
            if (s->present)
                return false; /* repeated: the last would win; leave it to protobuf-c */
            s->present = true;
            s->off = off + v0;
            s->len = v1 - v0;
            put_byte(o, (uint8_t)((TENSOR_RAW_DATA << 3) | WT_LEN));
            put_byte(o, 0); /* still present, empty */
            continue;
        }
        put(o, p + start, i - start);
    }
    return true;
}

static bool add_slice(slices *sl, const onnx_raw_slice *s)
{
    if (sl->n == sl->cap) {
        size_t cap = sl->cap ? sl->cap * 2 : 64;
        onnx_raw_slice *v = rlx_realloc_array(sl->v, cap, sizeof *v);
        if (!v)
            return false;
        sl->v = v;
        sl->cap = cap;
    }
    sl->v[sl->n++] = *s;
    return true;
}

static bool split_graph(const uint8_t *base, size_t off, size_t n, wbuf *o, slices *sl)
{
    const uint8_t *p = base + off;
    for (size_t i = 0; i < n;) {
        size_t start = i, v0, v1;
        uint64_t num;
        int wt;
        if (!next_field(p, n, &i, &num, &wt, &v0, &v1))
            return false;
        if (num == GRAPH_INITIALIZER && wt == WT_LEN) {
            onnx_raw_slice s;
            size_t at = open_len(o, GRAPH_INITIALIZER);
            if (!split_tensor(base, off + v0, v1 - v0, o, &s) || !add_slice(sl, &s))
                return false;
            close_len(o, at);
            continue;
        }
        put(o, p + start, i - start);
    }
    return true;
}

bool onnx_split_weights(const uint8_t *p, size_t n, uint8_t **out, size_t *out_n, onnx_raw_slice **raw, size_t *n_raw)
{
    wbuf o = {0};
    slices sl = {0};
    bool graph_seen = false, ok = true;
    for (size_t i = 0; i < n && ok;) {
        size_t start = i, v0, v1;
        uint64_t num;
        int wt;
        if (!next_field(p, n, &i, &num, &wt, &v0, &v1)) {
            ok = false;
        } else if (num == MODEL_GRAPH && wt == WT_LEN) {
            if (graph_seen) { /* two graph fields merge in protobuf: leave it to protobuf-c */
                ok = false;
                break;
            }
            graph_seen = true;
            size_t at = open_len(&o, MODEL_GRAPH);
            ok = split_graph(p, v0, v1 - v0, &o, &sl);
            close_len(&o, at);
        } else {
            put(&o, p + start, i - start);
        }
    }
    if (!ok || o.failed) {
        free(o.p);
        free(sl.v);
        return false;
    }
    *out = o.p ? o.p : rlx_malloc(1);
    *out_n = o.n;
    *raw = sl.v;
    *n_raw = sl.n;
    if (!*out) {
        free(sl.v);
        return false;
    }
    return true;
}
