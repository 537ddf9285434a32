/* onnx_ops.h - helpers shared by the op handler files. */
#ifndef RLX_IO_ONNX_OPS_H
#define RLX_IO_ONNX_OPS_H

#include "io/onnx/onnx_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

rlx_node oxo_in(ox_node *n, int i); /* node of input i (-1 if absent) */
int oxo_shape(ox_node *n, rlx_node x, int64_t *dims);
int oxo_in_shape(ox_node *n, int i, int64_t *dims);
rlx_dtype oxo_in_dtype(ox_node *n, int i);
rlx_node oxo_scalar(ox_node *n, rlx_dtype t, double v);
/* Values of a constant integer input: count, -1 absent, -2 not constant, -3 too many. */
int oxo_const_ints(ox_node *n, int i, int64_t *out, int max);
bool oxo_const_scalar(ox_node *n, int i, double *v);
int oxo_norm_axis(int64_t a, int r);
rlx_status oxo_need_const(ox_node *n, int i, const char *what);
/* Every dim in [0, OX_MAX_NUMEL] and the product too. */
bool oxo_dims_ok(int nd, const int64_t *dims);
rlx_node oxo_reshape(ox_node *n, rlx_node x, int nd, const int64_t *dims);
bool oxo_onnx_dtype(int64_t ot, rlx_dtype *t);
/* 3-d convolution and pooling from 2-d primitives (onnx_ops3d.c). */
rlx_status oxo_conv3d(ox_node *n, rlx_node x, rlx_node w, rlx_node b);
rlx_node oxo_conv3d_p(ox_node *n, rlx_node x, rlx_node w, rlx_node b, const int64_t *st, const int64_t *dl,
                      const int64_t *pd, int64_t groups);
rlx_status oxo_pool3d(ox_node *n, rlx_node x, const int64_t *k, bool is_max);
rlx_status oxo_maxpool_indices(ox_node *n, rlx_node x, const int64_t *k);
/* The handlers of onnx_ops2.c. */
ox_handler oxo_find_more(const char *op_type);

#endif
