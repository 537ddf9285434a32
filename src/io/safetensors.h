/* safetensors.h - Hugging Face safetensors reader: one file, or a sharded
 * checkpoint (model.safetensors.index.json naming a file per tensor).
 *
 * A file is u64 (little-endian) N, N bytes of JSON header, then the data.
 * The header maps each tensor name to {"dtype", "shape", "data_offsets":
 * [begin, end]} (offsets from the start of the data); "__metadata__" (a
 * string map) is parsed and ignored.  Each file is memory-mapped read-only
 * and the header checked before use: offsets inside the data, begin <= end,
 * end - begin == numel * element size, no two tensors sharing bytes, shapes
 * of non-negative integers; a malformed file gives RLX_ERR_FORMAT with a
 * message naming the file and tensor.
 *
 * Dtypes BOOL U8 I8 I32 I64 F16 BF16 F32 F64 map to rlx dtypes; I16 U16 U32
 * U64 and the F8 kinds are read (views with dtype RLX_WEIGHT_NO_DTYPE, see
 * rlx_weight_view_dtype); an unknown dtype string is a format error. */
#ifndef RLX_IO_SAFETENSORS_H
#define RLX_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "io/weights.h"

struct cJSON;
typedef struct rlx_safetensors rlx_safetensors;

/* path: a .safetensors file, an index json (its shards are found beside
 * it), or a folder (its model.safetensors.index.json when present, else
 * its model.safetensors). */
rlx_status rlx_safetensors_open(const char *path, rlx_safetensors **out);
/* One file's bytes, which must outlive the reader (not copied). */
rlx_status rlx_safetensors_open_buffer(const void *data, size_t size, rlx_safetensors **out);
void rlx_safetensors_close(rlx_safetensors *st);

int64_t rlx_safetensors_count(const rlx_safetensors *st);
/* The i-th tensor (shards in the order the index first names them, each
 * file's tensors by data offset), or NULL past the end. */
const rlx_weight_view *rlx_safetensors_get(const rlx_safetensors *st, int64_t i);
/* RLX_ERR_NOT_FOUND (naming it) when absent. */
rlx_status rlx_safetensors_find(const rlx_safetensors *st, const char *name, const rlx_weight_view **out);
int rlx_safetensors_file_count(const rlx_safetensors *st); /* 1, or the shards */

/* Parses a JSON file into *out (free it with cJSON_Delete).  RLX_ERR_IO
 * when unreadable, RLX_ERR_FORMAT (with the position) when not JSON. */
rlx_status rlx_json_read_file(const char *path, struct cJSON **out);
/* The config.json beside a checkpoint: path is the folder, or a file in it
 * (the .safetensors or index json). */
rlx_status rlx_safetensors_read_config(const char *path, struct cJSON **out);

/* Writing: one tensor of a file to write. */
typedef struct rlx_safetensors_entry {
    const char *name;
    rlx_dtype dtype;
    int ndim;
    const int64_t *dims;
    const void *data; /* numel * element size bytes, little-endian */
} rlx_safetensors_entry;

/* Writes a safetensors file of the n entries, in their order, through
 * rlx_file_open (flags as there: an existing path is refused unless
 * RLX_FILE_FORCE; a failure leaves nothing behind). */
rlx_status rlx_safetensors_write(const char *path, int flags, const rlx_safetensors_entry *e, int n);

#endif
