/* probe.c - small helpers the optimizer passes share: asking the target's
 * claim about a node that does not exist yet, and reading scalar constants. */
#include <string.h>

#include "opt/pass.h"

bool rlx_probe_claim(const rlx_pass_ctx *ctx, const rlx_node_data *proto, const rlx_dtype *dtypes,
                     const rlx_shape *shapes)
{
    rlx_graph *p = rlx_graph_new();
    if (!p) {
        if (ctx && ctx->failure)
            *ctx->failure = RLX_ERR_OUT_OF_MEMORY;
        return false;
    }
    rlx_clear_error();
    rlx_node_data leaf;
    bool ok = true;
    for (int i = 0; i < proto->n_in && ok; i++) {
        memset(&leaf, 0, sizeof leaf);
        leaf.op = RLX_OP_INPUT;
        leaf.dtype = dtypes[i];
        leaf.shape = shapes[i];
        ok = rlx_graph_add(p, &leaf) == i;
    }
    rlx_node_data n = *proto;
    n.name = NULL;
    n.data = NULL;
    n.data_bytes = 0;
    for (int i = 0; i < n.n_in; i++)
        n.in[i] = i;
    rlx_node id = ok ? rlx_graph_add(p, &n) : -1;
    ok = id >= 0 && (!ctx || !ctx->supports || ctx->supports(p, id));
    rlx_graph_free(p);
    if (!ok && rlx_last_status_or(RLX_OK) == RLX_ERR_OUT_OF_MEMORY) {
        if (ctx && ctx->failure)
            *ctx->failure = RLX_ERR_OUT_OF_MEMORY;
        return false;
    }
    if (id < 0)
        rlx_clear_error(); /* a probe that does not type-check is only a "no" */
    return ok;
}

bool rlx_const_element(const rlx_node_data *n, int64_t i, double *v)
{
    if (n->op != RLX_OP_CONSTANT || !n->data || i < 0 || i >= rlx_shape_numel(&n->shape))
        return false;
    switch (n->dtype) {
    case RLX_F32: {
        float f;
        memcpy(&f, (const char *)n->data + 4 * i, 4);
        *v = f;
        return true;
    }
    case RLX_F64: memcpy(v, (const char *)n->data + 8 * i, 8); return true;
    case RLX_F16: {
        uint16_t h;
        memcpy(&h, (const char *)n->data + 2 * i, 2);
        *v = rlx_f16_to_f32(h);
        return true;
    }
    case RLX_BF16: {
        uint16_t h;
        memcpy(&h, (const char *)n->data + 2 * i, 2);
        *v = rlx_bf16_to_f32(h);
        return true;
    }
    default: return false;
    }
}

bool rlx_scalar_value(const rlx_node_data *n, double *v)
{
    return rlx_shape_numel(&n->shape) == 1 && rlx_const_element(n, 0, v);
}
