/* gguf_write.h - GGUF version 3 writer: metadata (any value the reader
 * gives, so a file's metadata can be copied as it is), a tensor table, then
 * the tensors' data in the order they were added, each padded to the
 * alignment (general.alignment when set to a power of two, else 32).
 *
 * The file goes through rlx_file (rlx.h): the caller opens it, writes the
 * header and then every tensor's data, and commits or discards it.  Every
 * call checks its arguments and reports through rlx_set_error. */
#ifndef RLX_IO_GGUF_WRITE_H
#define RLX_IO_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "io/gguf.h"

typedef struct rlx_gguf_writer rlx_gguf_writer;

rlx_status rlx_gguf_writer_new(rlx_gguf_writer **out);
void rlx_gguf_writer_free(rlx_gguf_writer *w);

/* Sets key (replacing an earlier value of the key in its place).  The
 * value is serialized at once: nothing it points at is kept. */
rlx_status rlx_gguf_writer_set(rlx_gguf_writer *w, const char *key, const rlx_gguf_value *v);
rlx_status rlx_gguf_writer_set_u32(rlx_gguf_writer *w, const char *key, uint32_t v);
rlx_status rlx_gguf_writer_set_i32(rlx_gguf_writer *w, const char *key, int32_t v);
rlx_status rlx_gguf_writer_set_f32(rlx_gguf_writer *w, const char *key, float v);
rlx_status rlx_gguf_writer_set_bool(rlx_gguf_writer *w, const char *key, bool v);
rlx_status rlx_gguf_writer_set_str(rlx_gguf_writer *w, const char *key, const char *s);
/* An array of n strings (lens NULL: NUL-terminated). */
rlx_status rlx_gguf_writer_set_str_array(rlx_gguf_writer *w, const char *key, uint64_t n, const char *const *s,
                                         const size_t *lens);
/* An array of n fixed-size elements (packed little-endian at raw). */
rlx_status rlx_gguf_writer_set_array(rlx_gguf_writer *w, const char *key, rlx_gguf_type elem, uint64_t n,
                                     const void *raw);
void rlx_gguf_writer_remove(rlx_gguf_writer *w, const char *key);
int64_t rlx_gguf_writer_kv_count(const rlx_gguf_writer *w);

/* A tensor of a ggml type, dims row-major outermost first (as
 * rlx_weight_view), so GGUF's ne[] is dims reversed.  The innermost
 * dimension must be a multiple of the type's block.  *bytes (may be NULL)
 * gets the size its data must have. */
rlx_status rlx_gguf_writer_add_tensor(rlx_gguf_writer *w, const char *name, int ggml_type, int ndim,
                                      const int64_t *dims, size_t *bytes);

/* The header, metadata and tensor table, padded up to the data section. */
rlx_status rlx_gguf_writer_write_header(rlx_gguf_writer *w, rlx_file *f);
/* The next tensor's data (exactly its size), padded to the alignment. */
rlx_status rlx_gguf_writer_write_tensor(rlx_gguf_writer *w, rlx_file *f, const void *data, size_t bytes);

#endif
