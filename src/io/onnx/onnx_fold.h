/* onnx_fold.h - host evaluation of small constant tensors at import time. */
#ifndef RLX_IO_ONNX_FOLD_H
#define RLX_IO_ONNX_FOLD_H

#include "io/onnx/onnx_internal.h"

typedef enum oxh_op {
    OXH_ADD,
    OXH_SUB,
    OXH_MUL,
    OXH_DIV,
    OXH_POW,
    OXH_MOD,
    OXH_MAX,
    OXH_MIN,
    OXH_EQ,
    OXH_LT,
    OXH_GT,
    OXH_LE,
    OXH_GE,
    OXH_AND,
    OXH_OR,
    OXH_XOR,
    OXH_NEG,
    OXH_ABS,
    OXH_SQRT,
    OXH_FLOOR,
    OXH_CEIL,
    OXH_SIGN,
    OXH_NOT,
    OXH_RELU,
    OXH_EXP,
    OXH_LOG,
    OXH_RECIP
} oxh_op;

bool oxh_broadcast(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out);
/* Each returns a new tensor, or NULL when the operands do not fit. */
ox_tensor *oxh_binary(oxh_op op, const ox_tensor *a, const ox_tensor *b, int fmod_flag);
ox_tensor *oxh_unary(oxh_op op, const ox_tensor *a);
ox_tensor *oxh_cast(const ox_tensor *a, rlx_dtype to);
ox_tensor *oxh_where(const ox_tensor *c, const ox_tensor *a, const ox_tensor *b);
ox_tensor *oxh_expand(const ox_tensor *a, int nd, const int64_t *dims);
ox_tensor *oxh_transpose(const ox_tensor *a, const int *perm);
ox_tensor *oxh_slice(const ox_tensor *a, const int64_t *start, const int64_t *step, const int64_t *odims);
ox_tensor *oxh_concat(ox_tensor *const *xs, int n, int axis);
ox_tensor *oxh_gather(const ox_tensor *a, const ox_tensor *ind, int axis);

#endif
