/* gguf.h - GGUF (versions 2 and 3, little-endian) checkpoint reader.
 *
 * The file is memory-mapped read-only; metadata is parsed into values at
 * open, tensor data is never copied.  Every count, length and offset is
 * checked against the file's size before use, so a malformed file gives
 * RLX_ERR_FORMAT (or RLX_ERR_UNSUPPORTED for a valid file this reader
 * cannot take: version 1, big-endian) with a message naming the problem.
 *
 * Tensors are presented as rlx_weight_view (weights.h): dims row-major,
 * outermost first, which is GGUF's ne[] reversed (ne[0], the contiguous
 * dimension, is dims[ndim - 1]).  Every ggml type id is known by name with
 * its block size and bytes per block, so the sizes of quantized tensors
 * are checked too; a view keeps the raw ggml type and the raw bytes. */
#ifndef RLX_IO_GGUF_H
#define RLX_IO_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ggml_type.h"
#include "io/weights.h"

/* Metadata value types, numbered as in the file. */
typedef enum rlx_gguf_type {
    RLX_GGUF_UINT8 = 0,
    RLX_GGUF_INT8 = 1,
    RLX_GGUF_UINT16 = 2,
    RLX_GGUF_INT16 = 3,
    RLX_GGUF_UINT32 = 4,
    RLX_GGUF_INT32 = 5,
    RLX_GGUF_FLOAT32 = 6,
    RLX_GGUF_BOOL = 7,
    RLX_GGUF_STRING = 8,
    RLX_GGUF_ARRAY = 9,
    RLX_GGUF_UINT64 = 10,
    RLX_GGUF_INT64 = 11,
    RLX_GGUF_FLOAT64 = 12,
    RLX_GGUF_TYPE_COUNT
} rlx_gguf_type;

/* One metadata value.  Which member holds it follows type:
 *   UINT8/16/32/64 -> u;  INT8/16/32/64 -> i (sign-extended);
 *   FLOAT32/64 -> f;  BOOL -> b;
 *   STRING -> str (NUL-terminated copy; len counts the bytes, which may
 *            include NULs);
 *   ARRAY -> arr: elements of elem_type; for fixed-size element types
 *            raw points at count packed little-endian elements in the map,
 *            for STRING and ARRAY elements items holds count values.
 *   Read elements of either kind with rlx_gguf_array_get. */
typedef struct rlx_gguf_value {
    rlx_gguf_type type;
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
        struct {
            const char *ptr;
            uint64_t len;
        } str;
        struct {
            rlx_gguf_type elem_type;
            uint64_t count;
            const void *raw;
            const struct rlx_gguf_value *items;
        } arr;
    };
} rlx_gguf_value;

typedef struct rlx_gguf rlx_gguf;

rlx_status rlx_gguf_open(const char *path, rlx_gguf **out);
/* The same over a caller's buffer, which must outlive the reader (not copied). */
rlx_status rlx_gguf_open_buffer(const void *data, size_t size, rlx_gguf **out);
void rlx_gguf_close(rlx_gguf *g);

uint32_t rlx_gguf_version(const rlx_gguf *g);
uint32_t rlx_gguf_alignment(const rlx_gguf *g);   /* general.alignment, default 32 */
uint64_t rlx_gguf_data_offset(const rlx_gguf *g); /* file offset of the tensor data section */

/* ---- metadata */
int64_t rlx_gguf_kv_count(const rlx_gguf *g);
/* The i-th key and value in file order (NULL past the end). */
const char *rlx_gguf_kv_key(const rlx_gguf *g, int64_t i);
const rlx_gguf_value *rlx_gguf_kv_value(const rlx_gguf *g, int64_t i);
/* The value of key, or NULL when absent (no error is set). */
const rlx_gguf_value *rlx_gguf_find(const rlx_gguf *g, const char *key);
/* Element i of an array value: a fixed-size element is decoded into *out,
 * a string or array element copied (its pointers stay in the reader).
 * RLX_ERR_INVALID_ARGUMENT when v is not an array or i is past its end. */
rlx_status rlx_gguf_array_get(const rlx_gguf_value *v, uint64_t i, rlx_gguf_value *out);
const char *rlx_gguf_type_name(rlx_gguf_type t); /* "uint32", "string", "array", ... */
/* Bytes of one value of a fixed-size type; 0 for string, array or an unknown type. */
size_t rlx_gguf_type_size(uint32_t t);

/* Typed getters: *out = the value, or def when the key is absent
 * (RLX_ERR_NOT_FOUND) or holds another type (RLX_ERR_DTYPE); both set a
 * message naming the key.  Integer getters take any integer type whose
 * value fits; get_f32/f64 take float32, float64 and integers; get_bool a
 * bool; get_str a string (*out NUL-terminated, *len may be NULL). */
rlx_status rlx_gguf_get_u32(const rlx_gguf *g, const char *key, uint32_t def, uint32_t *out);
rlx_status rlx_gguf_get_u64(const rlx_gguf *g, const char *key, uint64_t def, uint64_t *out);
rlx_status rlx_gguf_get_i64(const rlx_gguf *g, const char *key, int64_t def, int64_t *out);
rlx_status rlx_gguf_get_f32(const rlx_gguf *g, const char *key, float def, float *out);
rlx_status rlx_gguf_get_f64(const rlx_gguf *g, const char *key, double def, double *out);
rlx_status rlx_gguf_get_bool(const rlx_gguf *g, const char *key, bool def, bool *out);
rlx_status rlx_gguf_get_str(const rlx_gguf *g, const char *key, const char *def, const char **out, size_t *len);
/* An array key: *out its value (RLX_ERR_NOT_FOUND / RLX_ERR_DTYPE as above;
 * elem_type < 0 takes any element type). */
rlx_status rlx_gguf_get_array(const rlx_gguf *g, const char *key, int elem_type, const rlx_gguf_value **out);

/* ---- tensors */
int64_t rlx_gguf_tensor_count(const rlx_gguf *g);
const rlx_weight_view *rlx_gguf_tensor(const rlx_gguf *g, int64_t i); /* NULL past the end */
/* RLX_ERR_NOT_FOUND (naming it) when absent. */
rlx_status rlx_gguf_find_tensor(const rlx_gguf *g, const char *name, const rlx_weight_view **out);

/* ggml tensor types: src/core/ggml_type.h */

#endif
