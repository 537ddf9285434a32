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

/* ---- ggml tensor types */
enum {
    RLX_GGML_F32 = 0,
    RLX_GGML_F16 = 1,
    RLX_GGML_Q4_0 = 2,
    RLX_GGML_Q4_1 = 3,
    RLX_GGML_Q5_0 = 6,
    RLX_GGML_Q5_1 = 7,
    RLX_GGML_Q8_0 = 8,
    RLX_GGML_Q8_1 = 9,
    RLX_GGML_Q2_K = 10,
    RLX_GGML_Q3_K = 11,
    RLX_GGML_Q4_K = 12,
    RLX_GGML_Q5_K = 13,
    RLX_GGML_Q6_K = 14,
    RLX_GGML_Q8_K = 15,
    RLX_GGML_IQ2_XXS = 16,
    RLX_GGML_IQ2_XS = 17,
    RLX_GGML_IQ3_XXS = 18,
    RLX_GGML_IQ1_S = 19,
    RLX_GGML_IQ4_NL = 20,
    RLX_GGML_IQ3_S = 21,
    RLX_GGML_IQ2_S = 22,
    RLX_GGML_IQ4_XS = 23,
    RLX_GGML_I8 = 24,
    RLX_GGML_I16 = 25,
    RLX_GGML_I32 = 26,
    RLX_GGML_I64 = 27,
    RLX_GGML_F64 = 28,
    RLX_GGML_IQ1_M = 29,
    RLX_GGML_BF16 = 30,
    RLX_GGML_TQ1_0 = 34,
    RLX_GGML_TQ2_0 = 35,
    RLX_GGML_MXFP4 = 39,
    RLX_GGML_TYPE_COUNT = 40
};
/* Name of a ggml type id ("Q4_K"; ids ggml has retired are named too,
 * e.g. "Q4_2 (removed)"), or NULL when unknown. */
const char *rlx_ggml_type_name(int type);
/* Elements per block and bytes per block (1 and the element size for the
 * plain types); false for an unknown or retired id. */
bool rlx_ggml_type_size(int type, int64_t *block_elems, size_t *block_bytes);

#endif
