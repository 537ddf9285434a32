/* weights.c - the view's dtype check and the opener over GGUF and
 * safetensors (see weights.h); file maps are in file_map.c. */
#define _POSIX_C_SOURCE 200809L
#include "io/weights.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"

rlx_status rlx_weight_view_dtype(const rlx_weight_view *v, rlx_dtype *out)
{
    if (!v)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_weight_view_dtype: NULL view");
    if (v->dtype == RLX_WEIGHT_NO_DTYPE || (unsigned)v->dtype >= RLX_DTYPE_COUNT) {
        if (v->ggml_type >= 0)
            return rlx_set_error(RLX_ERR_UNSUPPORTED,
                                 "tensor '%s' has type %s (ggml type %d), which rlx cannot load as a tensor dtype yet",
                                 v->name ? v->name : "?", v->type_name ? v->type_name : "?", v->ggml_type);
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s' has dtype %s, which rlx cannot load as a tensor dtype",
                             v->name ? v->name : "?", v->type_name ? v->type_name : "?");
    }
    if (out)
        *out = v->dtype;
    return RLX_OK;
}

static bool is_float(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64; }

static float load_f32(rlx_dtype t, const unsigned char *p)
{
    switch (t) {
    case RLX_F16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return rlx_f16_to_f32(h);
    }
    case RLX_BF16: {
        uint16_t h;
        memcpy(&h, p, 2);
        return rlx_bf16_to_f32(h);
    }
    case RLX_F64: {
        double d;
        memcpy(&d, p, 8);
        return (float)d;
    }
    default: {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    }
}

static void store_f32(rlx_dtype t, unsigned char *p, float f)
{
    switch (t) {
    case RLX_F16: {
        uint16_t h = rlx_f32_to_f16(f);
        memcpy(p, &h, 2);
        break;
    }
    case RLX_BF16: {
        uint16_t h = rlx_f32_to_bf16(f);
        memcpy(p, &h, 2);
        break;
    }
    case RLX_F64: {
        double d = f;
        memcpy(p, &d, 8);
        break;
    }
    default: memcpy(p, &f, 4); break;
    }
}

rlx_status rlx_weight_view_read(const rlx_weight_view *v, rlx_dtype to, void *dst, size_t dst_bytes)
{
    rlx_dtype from;
    rlx_status s = rlx_weight_view_dtype(v, &from);
    if (s != RLX_OK)
        return s;
    if ((unsigned)to >= RLX_DTYPE_COUNT)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "tensor '%s': bad target dtype %d", v->name, (int)to);
    size_t want = (size_t)v->numel * rlx_dtype_size(to);
    if (dst_bytes != want || (!dst && want))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "tensor '%s': %zu bytes given for %lld %s elements (%zu bytes)",
                             v->name, dst_bytes, (long long)v->numel, rlx_dtype_name(to), want);
    if (from == to) {
        if (want)
            memcpy(dst, v->data, want);
        return RLX_OK;
    }
    if (!is_float(from) || !is_float(to))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s': no conversion from %s to %s", v->name,
                             rlx_dtype_name(from), rlx_dtype_name(to));
    size_t a = rlx_dtype_size(from), b = rlx_dtype_size(to);
    const unsigned char *src = v->data;
    unsigned char *d = dst;
    for (int64_t i = 0; i < v->numel; i++)
        store_f32(to, d + (size_t)i * b, load_f32(from, src + (size_t)i * a));
    return RLX_OK;
}

/* ---------------------------------------------------------------- either format */

struct rlx_weights {
    rlx_gguf *gguf;
    rlx_safetensors *st;
};

static int starts_with_gguf(const char *path)
{
    unsigned char b[4] = {0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = fread(b, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(b, "GGUF", 4);
}

rlx_status rlx_weights_open(const char *path, rlx_weights **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_weights_open: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rlx_set_error(RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    rlx_weights *w = rlx_calloc(1, sizeof *w);
    if (!w)
        return RLX_ERR_OUT_OF_MEMORY;
    size_t n = strlen(path);
    bool gguf = S_ISREG(sb.st_mode) && (starts_with_gguf(path) || (n >= 5 && !strcmp(path + n - 5, ".gguf")));
    rlx_status s = gguf ? rlx_gguf_open(path, &w->gguf) : rlx_safetensors_open(path, &w->st);
    if (s != RLX_OK) {
        free(w);
        return s;
    }
    *out = w;
    return RLX_OK;
}

void rlx_weights_close(rlx_weights *w)
{
    if (!w)
        return;
    rlx_gguf_close(w->gguf);
    rlx_safetensors_close(w->st);
    free(w);
}

int64_t rlx_weights_count(const rlx_weights *w)
{
    return !w ? 0 : w->gguf ? rlx_gguf_tensor_count(w->gguf) : rlx_safetensors_count(w->st);
}

const rlx_weight_view *rlx_weights_get(const rlx_weights *w, int64_t i)
{
    return !w ? NULL : w->gguf ? rlx_gguf_tensor(w->gguf, i) : rlx_safetensors_get(w->st, i);
}

rlx_status rlx_weights_find(const rlx_weights *w, const char *name, const rlx_weight_view **out)
{
    if (!w)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_weights_find: NULL argument");
    return w->gguf ? rlx_gguf_find_tensor(w->gguf, name, out) : rlx_safetensors_find(w->st, name, out);
}

struct rlx_gguf *rlx_weights_gguf(const rlx_weights *w) { return w ? w->gguf : NULL; }
struct rlx_safetensors *rlx_weights_safetensors(const rlx_weights *w) { return w ? w->st : NULL; }
