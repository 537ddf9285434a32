/* libFuzzer target for the safetensors reader: the bytes as one
 * .safetensors file (and, starting with '{', as a header alone) must open
 * or fail with a clean error (no crash, no out-of-bounds read, no leak).  What opens is walked whole: every tensor
 * found by name, its size checked against its shape and dtype, its first
 * and last data bytes read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink;

/* Opens data (size bytes) and walks what opens. */
static void one_file(const uint8_t *data, size_t size)
{
    rlx_safetensors *st = NULL;
    if (rlx_safetensors_open_buffer(data, size, &st) != RLX_OK)
        return;
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
}

/* An input that starts with '{' is also taken as a header alone: framed
 * with its length and followed by 4 KiB of data, so that mutations of the
 * JSON need not keep the length prefix in step. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one_file(data, size);
    if (size && data[0] == '{' && size <= 65536) {
        size_t n = 8 + size + 4096;
        uint8_t *buf = malloc(n);
        if (!buf)
            return 0;
        for (int i = 0; i < 8; i++)
            buf[i] = (uint8_t)((uint64_t)size >> (8 * i));
        memcpy(buf + 8, data, size);
        for (size_t i = 0; i < 4096; i++)
            buf[8 + size + i] = (uint8_t)(i * 7);
        one_file(buf, n);
        free(buf);
    }
    return 0;
}
