/* weights.h - one view of a stored tensor, shared by the checkpoint readers
 * (gguf.h, safetensors.h), and a source-neutral opener over both, so that a
 * model builder treats a GGUF file and a Hugging Face safetensors folder the
 * same way.
 *
 * A view points into the reader's read-only memory map: it and its data stay
 * valid until the reader is closed.  The data is the file's bytes as stored
 * (little-endian); it may be unaligned for its element type (safetensors does
 * not pad tensors), so copy it with memcpy rather than casting the pointer. */
#ifndef RLX_IO_WEIGHTS_H
#define RLX_IO_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

/* rlx_weight_view.dtype when the stored type is not an rlx dtype (a
 * quantized ggml type, I16, U16, F8, ...). */
#define RLX_WEIGHT_NO_DTYPE RLX_DTYPE_COUNT

typedef struct rlx_weight_view {
    const char *name;      /* NUL-terminated */
    const char *type_name; /* the format's own spelling: "F32", "BF16", "Q4_K", "I64", ... */
    int ggml_type;         /* GGUF: the ggml type id (see gguf.h); safetensors: -1 */
    rlx_dtype dtype;       /* RLX_WEIGHT_NO_DTYPE when the type has none */
    int ndim;
    /* Row-major, outermost first, as NumPy and PyTorch write shapes.  For
     * GGUF this is ne[] reversed: ne[0], the contiguous dimension, is
     * dims[ndim - 1]. */
    int64_t dims[RLX_MAX_DIMS];
    int64_t numel;    /* product of dims (1 when ndim is 0) */
    size_t nbytes;    /* bytes of data; for block-quantized types, blocks * bytes per block */
    const void *data; /* nbytes bytes inside the map */
} rlx_weight_view;

/* The view's dtype, or RLX_ERR_UNSUPPORTED with a message naming the
 * tensor and its stored type when that type is not an rlx dtype. */
rlx_status rlx_weight_view_dtype(const rlx_weight_view *v, rlx_dtype *out);

/* Copies the view's elements into dst (dst_bytes = numel * the size of
 * `to`), converting between the float dtypes (F32, F16, BF16, F64; through
 * f32, rounding to nearest even); other dtypes only to themselves.  Errors:
 * RLX_ERR_UNSUPPORTED for a type with no dtype or a conversion it does
 * not do, RLX_ERR_INVALID_ARGUMENT for a wrong dst_bytes; both name the
 * tensor. */
rlx_status rlx_weight_view_read(const rlx_weight_view *v, rlx_dtype to, void *dst, size_t dst_bytes);

/* A read-only memory map of a whole file (or a caller's buffer, not owned). */
typedef struct rlx_file_map {
    const unsigned char *data;
    size_t size;
    int owned; /* 1: munmap on release */
} rlx_file_map;
/* Maps path read-only; RLX_ERR_IO when it cannot be opened or is not a
 * regular file, RLX_ERR_FORMAT when it is empty.  what names the format in
 * messages ("gguf", "safetensors"). */
rlx_status rlx_file_map_open(const char *path, const char *what, rlx_file_map *m);
void rlx_file_map_release(rlx_file_map *m);

/* ------------------------------------------------ either format */

typedef struct rlx_weights rlx_weights;
struct rlx_gguf;
struct rlx_safetensors;

/* Opens a checkpoint: a folder (safetensors: model.safetensors.index.json
 * when present, else model.safetensors), a file that starts with "GGUF" or
 * is named *.gguf, or any other file as safetensors (single file or index
 * json). */
rlx_status rlx_weights_open(const char *path, rlx_weights **out);
void rlx_weights_close(rlx_weights *w);
int64_t rlx_weights_count(const rlx_weights *w);
/* The i-th tensor (file order; shards in index order), or NULL past the end. */
const rlx_weight_view *rlx_weights_get(const rlx_weights *w, int64_t i);
/* RLX_ERR_NOT_FOUND (with the name in the message) when absent. */
rlx_status rlx_weights_find(const rlx_weights *w, const char *name, const rlx_weight_view **out);
/* The reader underneath: exactly one of these is non-NULL (the GGUF one
 * carries the metadata; for safetensors read config.json with
 * rlx_safetensors_read_config). */
struct rlx_gguf *rlx_weights_gguf(const rlx_weights *w);
struct rlx_safetensors *rlx_weights_safetensors(const rlx_weights *w);

#endif
