/* quantize_check.c - checks a file written by `rlx quantize` from a GGUF
 * source, tensor by tensor, against RLX's reference quantizer:
 *
 *   quantize_check SRC.gguf OUT.gguf
 *
 * Every tensor of SRC is in OUT with its shape; a quantized one holds
 * exactly the bytes rlx_quantize_row makes of the source rows, and its
 * dequantized values stay near the source (rms error below 1/8 of the
 * rms); an unquantized one holds the source values.  Every metadata key
 * of SRC is in OUT.  Prints one line per tensor; exit 0 when all agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "quant/quant.h"

static int check_tensor(const rlx_weight_view *s, const rlx_weight_view *o)
{
    if (s->ndim != o->ndim || memcmp(s->dims, o->dims, sizeof(int64_t) * (size_t)s->ndim)) {
        printf("FAIL %s: shape differs\n", s->name);
        return 1;
    }
    int64_t n = s->numel, row = s->dims[s->ndim - 1], rows = n / row;
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    if (!x || !y || rlx_weight_view_read(s, RLX_F32, x, (size_t)n * sizeof *x) != RLX_OK) {
        printf("FAIL %s: source unreadable: %s\n", s->name, rlx_last_error());
        return 1;
    }
    int bad = 0;
    if (rlx_quant_block_elems(o->ggml_type) > 0) {
        size_t rb = rlx_quant_row_bytes(o->ggml_type, row);
        unsigned char *q = malloc(rb);
        for (int64_t r = 0; r < rows && !bad; r++) {
            rlx_quantize_row(o->ggml_type, x + r * row, q, row);
            if (memcmp(q, (const char *)o->data + (size_t)r * rb, rb)) {
                printf("FAIL %s: row %lld is not the reference quantizer's %s\n", s->name, (long long)r, o->type_name);
                bad = 1;
            }
            rlx_dequantize_row(o->ggml_type, (const char *)o->data + (size_t)r * rb, y + r * row, row);
        }
        free(q);
    } else if (rlx_weight_view_read(o, RLX_F32, y, (size_t)n * sizeof *y) != RLX_OK) {
        printf("FAIL %s: output unreadable: %s\n", s->name, rlx_last_error());
        bad = 1;
    }
    double e = 0, m = 0;
    for (int64_t i = 0; i < n && !bad; i++)
        e += (double)(x[i] - y[i]) * (x[i] - y[i]), m += (double)x[i] * x[i];
    double rel = m > 0 ? sqrt(e / m) : sqrt(e);
    if (!bad && (o->ggml_type == RLX_GGML_F32 ? rel != 0 : !(rel < 0.125))) {
        printf("FAIL %s: %s values are %.3g (relative rms) off the source\n", s->name, o->type_name, rel);
        bad = 1;
    }
    if (!bad)
        printf("ok %-28s %-5s -> %-5s rel rms %.4f\n", s->name, s->type_name, o->type_name, rel);
    free(x);
    free(y);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: quantize_check SRC.gguf OUT.gguf\n");
        return 2;
    }
    rlx_gguf *s = NULL, *o = NULL;
    if (rlx_gguf_open(argv[1], &s) != RLX_OK || rlx_gguf_open(argv[2], &o) != RLX_OK) {
        printf("FAIL: %s\n", rlx_last_error());
        return 1;
    }
    int bad = 0;
    if (rlx_gguf_version(o) != 3)
        printf("FAIL: version %u, 3 expected\n", rlx_gguf_version(o)), bad++;
    for (int64_t i = 0; i < rlx_gguf_kv_count(s); i++)
        if (!rlx_gguf_find(o, rlx_gguf_kv_key(s, i)))
            printf("FAIL: metadata key %s was not copied\n", rlx_gguf_kv_key(s, i)), bad++;
    if (rlx_gguf_tensor_count(o) != rlx_gguf_tensor_count(s))
        printf("FAIL: %lld tensors, %lld in the source\n", (long long)rlx_gguf_tensor_count(o),
               (long long)rlx_gguf_tensor_count(s)),
            bad++;
    for (int64_t i = 0; i < rlx_gguf_tensor_count(s); i++) {
        const rlx_weight_view *sv = rlx_gguf_tensor(s, i), *ov;
        if (rlx_gguf_find_tensor(o, sv->name, &ov) != RLX_OK) {
            printf("FAIL: %s is missing\n", sv->name);
            bad++;
            continue;
        }
        bad += check_tensor(sv, ov);
    }
    rlx_gguf_close(s);
    rlx_gguf_close(o);
    printf("%s\n", bad ? "FAILED" : "all tensors agree");
    return bad ? 1 : 0;
}
