/* onnx_fold.h - host evaluation of small constant tensors at import time. */
#ifndef RLX_IO_ONNX_FOLD_H
#define RLX_IO_ONNX_FOLD_H

#include "io/onnx/onnx_internal.h"

typedef enum onnx_fold_op {
    ONNX_FOLD_ADD,
    ONNX_FOLD_SUB,
    ONNX_FOLD_MUL,
    ONNX_FOLD_DIV,
    ONNX_FOLD_POW,
    ONNX_FOLD_MOD,
    ONNX_FOLD_MAX,
    ONNX_FOLD_MIN,
    ONNX_FOLD_EQ,
    ONNX_FOLD_LT,
    ONNX_FOLD_GT,
    ONNX_FOLD_LE,
    ONNX_FOLD_GE,
    ONNX_FOLD_AND,
    ONNX_FOLD_OR,
    ONNX_FOLD_XOR,
    ONNX_FOLD_NEG,
    ONNX_FOLD_ABS,
    ONNX_FOLD_SQRT,
    ONNX_FOLD_FLOOR,
    ONNX_FOLD_CEIL,
    ONNX_FOLD_SIGN,
    ONNX_FOLD_NOT,
    ONNX_FOLD_RELU,
    ONNX_FOLD_EXP,
    ONNX_FOLD_LOG,
    ONNX_FOLD_RECIP
} onnx_fold_op;

bool onnx_fold_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out);
/* Each returns a new tensor, or NULL when the operands do not fit. */
onnx_tensor *onnx_fold_binary(onnx_fold_op op, const onnx_tensor *a, const onnx_tensor *b, int fmod_flag);
onnx_tensor *onnx_fold_unary(onnx_fold_op op, const onnx_tensor *a);
onnx_tensor *onnx_fold_cast(const onnx_tensor *a, rlx_dtype to);
onnx_tensor *onnx_fold_where(const onnx_tensor *c, const onnx_tensor *a, const onnx_tensor *b);
onnx_tensor *onnx_fold_expand(const onnx_tensor *a, int nd, const int64_t *dims);
onnx_tensor *onnx_fold_transpose(const onnx_tensor *a, const int *perm);
onnx_tensor *onnx_fold_slice(const onnx_tensor *a, const int64_t *start, const int64_t *step, const int64_t *odims);
onnx_tensor *onnx_fold_concat(onnx_tensor *const *xs, int n, int axis);
onnx_tensor *onnx_fold_gather(const onnx_tensor *a, const onnx_tensor *ind, int axis);

#endif
