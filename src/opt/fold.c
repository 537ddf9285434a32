/* fold.c - constant folding: a pure node whose operands are all constants
 * is evaluated at compile time (by the evaluator the runtime supplies) and
 * becomes a constant, if the result is not larger than ctx->fold_limit. */
#include <stdlib.h>
#include <string.h>

#include "opt/pass.h"

rlx_graph *rlx_pass_fold(const rlx_graph *g, const rlx_pass_ctx *ctx)
{
    int n = g->n_nodes;
    rlx_node *map = rlx_calloc((size_t)n + 1, sizeof(rlx_node));
    rlx_graph *out = rlx_graph_new();
    if (!map || !out)
        goto fail;
    for (int i = 0; i < n; i++) {
        const rlx_node_data *src = &g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(src->op);
        bool foldable = ctx && ctx->evaluate && src->n_in > 0 && !(info->flags & (RLX_OPF_LEAF | RLX_OPF_RANDOM)) &&
                        rlx_node_bytes(src) <= ctx->fold_limit;
        for (int j = 0; foldable && j < src->n_in; j++)
            if (out->nodes[map[src->in[j]]].op != RLX_OP_CONSTANT)
                foldable = false;
        if (foldable) {
            /* evaluate against the already-folded operands in `out` */
            rlx_node_data probe = *src;
            for (int j = 0; j < probe.n_in; j++)
                probe.in[j] = map[probe.in[j]];
            rlx_node tmp = rlx_graph_add(out, &probe);
            if (tmp < 0)
                goto fail;
            size_t bytes = rlx_node_bytes(&out->nodes[tmp]);
            void *buf = malloc(bytes ? bytes : 1);
            if (!buf) {
                rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "fold: out of memory");
                goto fail;
            }
            rlx_status s = ctx->evaluate(out, tmp, buf);
            if (s != RLX_OK) { /* leave it to run time, where the error names the node */
                free(buf);
                map[i] = tmp;
                continue;
            }
            rlx_node_data c = out->nodes[tmp];
            c.op = RLX_OP_CONSTANT;
            c.n_in = 0;
            memset(&c.attrs, 0, sizeof c.attrs);
            c.data = buf;
            c.data_bytes = bytes;
            /* replace the evaluated node in place: it is the last one */
            free(out->nodes[tmp].name);
            out->nodes[tmp].name = NULL;
            c.name = src->name ? rlx_strdup(src->name) : NULL;
            out->nodes[tmp] = c;
            map[i] = tmp;
            continue;
        }
        if ((map[i] = rlx_copy_node(out, g, i, map)) < 0)
            goto fail;
    }
    if (rlx_copy_outputs(out, g, map) != RLX_OK)
        goto fail;
    free(map);
    return out;
fail:
    free(map);
    rlx_graph_free(out);
    return NULL;
}
