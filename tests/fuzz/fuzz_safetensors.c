/* libFuzzer target for the safetensors reader: the bytes as one
 * .safetensors file must open or fail with a clean error (no crash, no
 * out-of-bounds read, no leak).  What opens is walked whole: every tensor
 * found by name, its size checked against its shape and dtype, its first
 * and last data bytes read. */
#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rlx_safetensors *st = NULL;
    if (rlx_safetensors_open_buffer(data, size, &st) != RLX_OK)
        return 0;
    for (int64_t i = 0; i < rlx_safetensors_count(st); i++) {
        const rlx_weight_view *t = rlx_safetensors_get(st, i), *f = NULL;
        if (!t || rlx_safetensors_find(st, t->name, &f) != RLX_OK || f != t)
            __builtin_trap();
        rlx_dtype dt;
        if (rlx_weight_view_dtype(t, &dt) == RLX_OK && (size_t)t->numel * rlx_dtype_size(dt) != t->nbytes)
            __builtin_trap();
        const unsigned char *p = t->data;
        if (p < data || p + t->nbytes > data + size)
            __builtin_trap();
        if (t->nbytes)
            sink += p[0] + p[t->nbytes - 1];
    }
    rlx_safetensors_close(st);
    return 0;
}
