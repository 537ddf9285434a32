/* print.c - text listing and Graphviz export of a graph. */
#include <stdio.h>
#include <stdlib.h>

#include "ir/ir.h"

void rlx_graph_print_to(const rlx_graph *g, FILE *f)
{
    char sh[128];
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        fprintf(f, "%%%d = %s", i, rlx_op_name(n->op));
        if (((n->op == RLX_OP_CONV || n->op == RLX_OP_CONV_BIAS_ACT) && n->attrs.conv.layout) ||
            ((n->op == RLX_OP_MAX_POOL || n->op == RLX_OP_AVG_POOL) && n->attrs.pool.layout))
            fprintf(f, ".nhwc");
        if (rlx_conv_residual_input(n) >= 0)
            fprintf(f, ".residual");
        if (n->name)
            fprintf(f, " '%s'", n->name);
        fprintf(f, "(");
        for (int j = 0; j < n->n_in; j++)
            fprintf(f, j ? ", %%%d" : "%%%d", n->in[j]);
        fprintf(f, ") : %s%s\n", rlx_dtype_name(n->dtype), rlx_shape_str(&n->shape, sh, sizeof sh));
    }
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, "output '%s' = %%%d\n", g->outputs[i].name, g->outputs[i].node);
}

rlx_status rlx_graph_print(const rlx_graph *g, void *file)
{
    if (!g || !file)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_graph_print: graph and file must not be NULL");
    rlx_graph_print_to(g, (FILE *)file);
    return RLX_OK;
}

void rlx_graph_write_dot(const rlx_graph *g, FILE *f, const char *title)
{
    char sh[128];
    fprintf(f, "digraph \"%s\" {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n", title ? title : "rlx");
    for (int i = 0; i < g->n_nodes; i++) {
        const rlx_node_data *n = &g->nodes[i];
        const rlx_op_info *info = rlx_op_info_of(n->op);
        const char *color = (info && (info->flags & RLX_OPF_FUSED))  ? "lightblue"
                            : (info && (info->flags & RLX_OPF_LEAF)) ? "lightgrey"
                                                                     : "white";
        fprintf(f, "  n%d [label=\"%s%s%s\\n%s%s\", style=filled, fillcolor=%s];\n", i, rlx_op_name(n->op),
                n->name ? " " : "", n->name ? n->name : "", rlx_dtype_name(n->dtype),
                rlx_shape_str(&n->shape, sh, sizeof sh), color);
        for (int j = 0; j < n->n_in; j++)
            fprintf(f, "  n%d -> n%d;\n", n->in[j], i);
    }
    for (int i = 0; i < g->n_outputs; i++)
        fprintf(f, "  out%d [label=\"%s\", shape=ellipse];\n  n%d -> out%d;\n", i, g->outputs[i].name,
                g->outputs[i].node, i);
    fprintf(f, "}\n");
}

rlx_status rlx_graph_to_dot(const rlx_graph *g, const char *title, char **out)
{
    if (!g || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_graph_to_dot: graph and out must not be NULL");
    *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    if (!f)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "rlx_graph_to_dot: no memory for the text");
    rlx_graph_write_dot(g, f, title);
    if (fclose(f) != 0 || !*out) {
        free(*out);
        *out = NULL;
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "rlx_graph_to_dot: no memory for the text");
    }
    return RLX_OK;
}
