/* onnx_ops.h - what the op handler files share, and the one table each
 * topic file (onnx_<topic>.c) defines; onnx_registry.c lists the tables. */
#ifndef RLX_IO_ONNX_OPS_H
#define RLX_IO_ONNX_OPS_H

#include "io/onnx/onnx_internal.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* A row of a topic table: op type, handler, inputs that must be present;
 * ONNX_OP_SINCE for an op that needs more inputs from some opset on. */
#define ONNX_OP(name, fn, min)                              \
    {                                                       \
        (name), (fn), (min), 0, 0, NULL, NULL, false, false \
    }
#define ONNX_OP_SINCE(name, fn, min, opset, later_min)                      \
    {                                                                       \
        (name), (fn), (min), (opset), (later_min), NULL, NULL, false, false \
    }
/* A row whose handler takes sequences and optionals (onnx_op.any_kind). */
#define ONNX_OP_ANY(name, fn, min)                         \
    {                                                      \
        (name), (fn), (min), 0, 0, NULL, NULL, true, false \
    }
/* A row whose handler takes tensors of strings (onnx_op.strings). */
#define ONNX_OP_STR(name, fn, min)                         \
    {                                                      \
        (name), (fn), (min), 0, 0, NULL, NULL, false, true \
    }
#define ONNX_OP_END                                   \
    {                                                 \
        NULL, NULL, 0, 0, 0, NULL, NULL, false, false \
    }

/* The topic tables, each ended by ONNX_OP_END. */
extern const onnx_op onnx_elementwise_ops[];
extern const onnx_op onnx_nn_ops[];
extern const onnx_op onnx_linalg_ops[];
extern const onnx_op onnx_conv_ops[];
extern const onnx_op onnx_image_ops[];
extern const onnx_op onnx_reduce_ops[];
extern const onnx_op onnx_shape_ops[];
extern const onnx_op onnx_gather_ops[];
extern const onnx_op onnx_generate_ops[];
extern const onnx_op onnx_signal_ops[];
extern const onnx_op onnx_quantized_ops[];
extern const onnx_op onnx_rnn_ops[];
extern const onnx_op onnx_control_ops[];
extern const onnx_op onnx_sequence_ops[];
extern const onnx_op onnx_dynamic_ops[];
extern const onnx_op onnx_string_ops[];
extern const onnx_op onnx_training_ops[];

/* A MatMul of two DequantizeLinear results as an integer product
 * (onnx_quantized.c); -1 where its operands are not such. */
rlx_node onnx_qdq_matmul(onnx_node *n, rlx_node a, rlx_node b);
rlx_node onnx_in(onnx_node *n, int i); /* node of input i (-1 if absent) */
int onnx_shape(onnx_node *n, rlx_node x, int64_t *dims);
int onnx_in_shape(onnx_node *n, int i, int64_t *dims);
rlx_dtype onnx_in_dtype(onnx_node *n, int i);
rlx_node onnx_scalar(onnx_node *n, rlx_dtype t, double v);
/* Values of a constant integer input: count, -1 absent, -2 not constant, -3 too many. */
/* Input i's value when known at import: a constant, or the model's value
 * of an initializer made a param; NULL otherwise. */
const onnx_tensor *onnx_in_const(onnx_node *n, int i);
int onnx_const_ints(onnx_node *n, int i, int64_t *out, int max);
bool onnx_const_scalar(onnx_node *n, int i, double *v);
int onnx_norm_axis(int64_t a, int r);
rlx_status onnx_need_const(onnx_node *n, int i, const char *what);
/* Records that input i's value is needed at import, for a staged run to
 * bind it by value (onnx_need_const does, with its message). */
void onnx_note_need(onnx_node *n, int i);
/* Every dim in [0, ONNX_MAX_NUMEL] and the product too. */
bool onnx_dims_ok(int nd, const int64_t *dims);
rlx_node onnx_reshape(onnx_node *n, rlx_node x, int nd, const int64_t *dims);
/* Output o = the value of input i, as a host constant when it is one. */
rlx_status onnx_pass_through(onnx_node *n, int i, int o);
/* A graph constant of a host tensor (takes k; -1 when k is NULL). */
rlx_node onnx_const_node(onnx_node *n, onnx_tensor *k);
int64_t onnx_numel(int r, const int64_t *d);
rlx_node onnx_to_i64(onnx_node *n, rlx_node x);
/* Negative indices wrap by dim. */
rlx_node onnx_wrap_index(onnx_node *n, rlx_node idx, int64_t dim);
/* out[i...] = data[..., idx[i...] on axis, ...]: a gather over the flattened data. */
rlx_node onnx_gather_elements(onnx_node *n, rlx_node data, rlx_node idx, int axis);
/* Scatter of updates [U, R] into rows pos [U] of data [P, R] by a one-hot
 * matmul; red: "none", "add", "mul", "max" or "min". */
rlx_node onnx_scatter_rows(onnx_node *n, rlx_node data2, rlx_node pos, rlx_node upd2, int64_t P, const char *red);
/* 3-d convolution and pooling from 2-d primitives (onnx_conv3d.c). */
rlx_status onnx_conv3d(onnx_node *n, rlx_node x, rlx_node w, rlx_node b);
rlx_node onnx_conv3d_p(onnx_node *n, rlx_node x, rlx_node w, rlx_node b, const int64_t *st, const int64_t *dl,
                       const int64_t *pd, int64_t groups);
rlx_status onnx_pool3d(onnx_node *n, rlx_node x, const int64_t *k, bool is_max);
rlx_status onnx_maxpool_indices(onnx_node *n, rlx_node x, const int64_t *k);

#endif
