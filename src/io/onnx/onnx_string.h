/* onnx_string.h - tensors of strings at import (onnx_string.c): host
 * tensors of dtype RLX_STRING whose bytes are NUL-ended elements. */
#ifndef RLX_IO_ONNX_STRING_H
#define RLX_IO_ONNX_STRING_H

#include "io/onnx/onnx_internal.h"

/* A string tensor of `bytes` zeroed bytes (filled by the caller). */
onnx_tensor *onnx_string_new(int ndim, const int64_t *dims, size_t bytes);
/* Whether `bytes` of data are exactly numel NUL-ended strings. */
bool onnx_string_check(const void *data, size_t bytes, int64_t numel);
/* Pointers to t's elements, into t's data (free the array only). */
const char **onnx_string_elems(const onnx_tensor *t);
/* A string tensor of n strings. */
onnx_tensor *onnx_string_pack(int ndim, const int64_t *dims, char *const *strs, int64_t n);
/* A TensorProto of data type STRING. */
rlx_status onnx_string_from_proto(const Onnx__TensorProto *p, onnx_tensor **out);
/* Whether v is a tensor of strings (known or not). */
bool onnx_value_is_string(const onnx_value *v);
/* A graph input of strings: its value when bound by value (b->value: the
 * bytes of RLX_STRING), else a value that any op reading it refuses. */
rlx_status onnx_string_input(const char *name, int nd, const int64_t *dims, const rlx_onnx_binding *b, onnx_value *out);
/* A graph output of strings: a U8 constant of its bytes, recorded as
 * strings of its shape (sessions report it as RLX_STRING). */
rlx_status onnx_string_output(onnx_ctx *c, const char *name, const onnx_value *x);
/* Equal where the inputs are strings (opset 19; onnx_string_ops.c). */
rlx_status onnx_string_equal(onnx_node *n);
/* Cast and CastLike where the input or the target is strings: input 0
 * must be known at import; to: the numeric target when not to_string. */
rlx_status onnx_string_cast(onnx_node *n, bool to_string, rlx_dtype to);

#endif
