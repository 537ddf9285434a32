/* libFuzzer target for the GGUF reader: any byte string must open or fail
 * with a clean error (no crash, no out-of-bounds read, no leak).  What
 * opens is walked whole: every key through every typed getter, every array
 * element (nested ones too), every tensor found by name, its dtype asked
 * for, its first and last data bytes read, and a small one converted to f32. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

static void walk(const rlx_gguf_value *v, int depth)
{
    if (v->type == RLX_GGUF_STRING) {
        if (v->str.len)
            sink += (unsigned char)v->str.ptr[v->str.len - 1];
        return;
    }
    if (v->type != RLX_GGUF_ARRAY || depth > 16)
        return;
    /* every element of a short array, the ends of a long one */
    for (uint64_t i = 0; i < v->arr.count; i++) {
        if (v->arr.count > 64 && i == 32)
            i = v->arr.count - 32;
        rlx_gguf_value e;
        if (rlx_gguf_array_get(v, i, &e) == RLX_OK) {
            sink += (unsigned)e.u;
            walk(&e, depth + 1);
        }
    }
    rlx_gguf_value e;
    if (rlx_gguf_array_get(v, v->arr.count, &e) == RLX_OK) /* past the end: must fail */
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_gguf *g = NULL;
    if (rlx_gguf_open_buffer(data, size, &g) != RLX_OK)
        return 0;
    for (int64_t i = 0; i < rlx_gguf_kv_count(g); i++) {
        const char *key = rlx_gguf_kv_key(g, i);
        const rlx_gguf_value *v = rlx_gguf_kv_value(g, i);
        if (!key || !v || !rlx_gguf_find(g, key))
            __builtin_trap();
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f32;
        bool b;
        const char *s;
        size_t len;
        const rlx_gguf_value *arr;
        rlx_gguf_get_u32(g, key, 0, &u32);
        rlx_gguf_get_u64(g, key, 0, &u64);
        rlx_gguf_get_i64(g, key, 0, &i64);
        rlx_gguf_get_f32(g, key, 0, &f32);
        rlx_gguf_get_bool(g, key, 0, &b);
        rlx_gguf_get_str(g, key, "", &s, &len);
        rlx_gguf_get_array(g, key, -1, &arr);
        sink += u32 + (unsigned)u64 + (unsigned)i64 + (unsigned)b + (unsigned)len + (unsigned)(f32 == 0);
        walk(v, 0);
    }
    for (int64_t i = 0; i < rlx_gguf_tensor_count(g); i++) {
        const rlx_weight_view *t = rlx_gguf_tensor(g, i), *f = NULL;
        if (!t || rlx_gguf_find_tensor(g, t->name, &f) != RLX_OK || f != t)
            __builtin_trap();
        rlx_dtype dt;
        if (rlx_weight_view_dtype(t, &dt) == RLX_OK && (size_t)t->numel * rlx_dtype_size(dt) != t->nbytes)
            __builtin_trap();
        if (t->nbytes) {
            const unsigned char *p = t->data;
            sink += p[0] + p[t->nbytes - 1];
        }
        /* small float tensors converted to f32 */
        if (t->numel <= 4096 && rlx_weight_view_dtype(t, &dt) == RLX_OK) {
            float *buf = malloc((size_t)t->numel * sizeof(float) + 1);
            if (buf && rlx_weight_view_read(t, RLX_F32, buf, (size_t)t->numel * sizeof(float)) == RLX_OK && t->numel)
                sink += (unsigned)(buf[t->numel - 1] == 0);
            free(buf);
        }
    }
    rlx_gguf_close(g);
    return 0;
}
