/* onnx_string.h - strings at import (onnx_string.c, onnx_string_ops.c):
 * string values of the importer, graph inputs and outputs of strings and
 * the casts.  The host tensors of dtype RLX_STRING themselves are
 * onnx_tensor.c's (onnx_internal.h). */
#ifndef RLX_IO_ONNX_STRING_H
#define RLX_IO_ONNX_STRING_H

#include "io/onnx/onnx_internal.h"

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
