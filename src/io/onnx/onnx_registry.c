/* onnx_registry.c - the ONNX ops the importer knows: the topic files'
 * tables (onnx_<topic>.c, one each), looked up by op type in one place.
 * The import loop, the unsupported-op check and the op-count report all
 * ask here. */
#include <stdio.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

static const onnx_op *const tables[] = {
    onnx_elementwise_ops, onnx_nn_ops,       onnx_linalg_ops,   onnx_conv_ops,   onnx_image_ops,     onnx_reduce_ops,
    onnx_shape_ops,       onnx_gather_ops,   onnx_generate_ops, onnx_signal_ops, onnx_quantized_ops, onnx_rnn_ops,
    onnx_control_ops,     onnx_sequence_ops, onnx_dynamic_ops,  onnx_string_ops, onnx_training_ops,
};

const onnx_op *onnx_find_op(const char *op_type)
{
    if (!op_type)
        return NULL;
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const onnx_op *op = tables[t]; op->name; op++)
            if (!strcmp(op->name, op_type))
                return op;
    return NULL;
}

const onnx_op *onnx_find_node_op(const Onnx__NodeProto *nd)
{
    if (!nd->domain || !*nd->domain || !strcmp(nd->domain, "ai.onnx"))
        return onnx_find_op(nd->op_type);
    char key[256]; /* another domain's rows are named DOMAIN.OpType */
    if (!nd->op_type || snprintf(key, sizeof key, "%s.%s", nd->domain, nd->op_type) >= (int)sizeof key)
        return NULL;
    return onnx_find_op(key);
}

int onnx_op_min_inputs(const onnx_op *op, int opset)
{
    return op->later_opset && opset >= op->later_opset ? op->later_min_inputs : op->min_inputs;
}
