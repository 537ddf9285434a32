/* graph.c - graph storage: adding nodes (with shape inference), cloning,
 * outputs, labels and small queries. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

rlx_graph *rlx_graph_new(void) { return rlx_calloc(1, sizeof(rlx_graph)); }

void rlx_graph_free(rlx_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        rlx_blob_unref(g->nodes[i].blob);
    }
    for (int i = 0; i < g->n_outputs; i++)
        free(g->outputs[i].name);
    free(g->nodes);
    free(g->outputs);
    rlx_bound_inputs_free(g->bound, g->n_bound);
    free(g);
}

rlx_status rlx_graph_bind_input(rlx_graph *g, const char *name, rlx_dtype t, const rlx_shape *shape, const void *value,
                                size_t bytes)
{
    rlx_bound_input *p = rlx_realloc_array(g->bound, (size_t)g->n_bound + 1, sizeof *p);
    if (!p)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory binding input '%s'", name);
    g->bound = p;
    rlx_bound_input *b = &p[g->n_bound];
    memset(b, 0, sizeof *b);
    b->name = rlx_strdup(name);
    b->value = rlx_malloc(bytes ? bytes : 1);
    if (!b->name || !b->value) {
        free(b->name);
        free(b->value);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory binding input '%s'", name);
    }
    if (bytes)
        memcpy(b->value, value, bytes);
    b->dtype = t;
    b->shape = *shape;
    b->bytes = bytes;
    g->n_bound++;
    return RLX_OK;
}

rlx_status rlx_graph_string_output(rlx_graph *g, const char *name, const rlx_shape *shape)
{
    rlx_status st = rlx_graph_bind_input(g, name, RLX_STRING, shape, NULL, 0);
    if (st == RLX_OK)
        g->bound[g->n_bound - 1].string_output = true;
    return st;
}

void rlx_bound_inputs_free(rlx_bound_input *b, int n)
{
    for (int i = 0; i < n; i++) {
        free(b[i].name);
        free(b[i].value);
    }
    free(b);
}

rlx_status rlx_bound_inputs_copy(const rlx_graph *g, rlx_bound_input **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!g->n_bound)
        return RLX_OK;
    rlx_graph tmp;
    memset(&tmp, 0, sizeof tmp);
    for (int i = 0; i < g->n_bound; i++) {
        const rlx_bound_input *b = &g->bound[i];
        if (rlx_graph_bind_input(&tmp, b->name, b->dtype, &b->shape, b->value, b->bytes) != RLX_OK) {
            rlx_bound_inputs_free(tmp.bound, tmp.n_bound);
            return RLX_ERR_OUT_OF_MEMORY;
        }
        tmp.bound[i].string_output = b->string_output;
    }
    *out = tmp.bound;
    *n = tmp.n_bound;
    return RLX_OK;
}

int rlx_graph_node_count(const rlx_graph *g) { return g ? g->n_nodes : 0; }

rlx_node rlx_graph_fail(rlx_graph *g, rlx_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g && g->error == RLX_OK) {
        g->error = s;
        snprintf(g->error_msg, sizeof g->error_msg, "%s", msg);
    }
    rlx_set_error(s, "%s", msg);
    return -1;
}

const char *rlx_node_label(const rlx_graph *g, rlx_node id, char *buf, size_t n)
{
    if (id < 0 || id >= g->n_nodes) {
        snprintf(buf, n, "node %d (invalid)", id);
        return buf;
    }
    const rlx_node_data *nd = &g->nodes[id];
    if (nd->name)
        snprintf(buf, n, "node %d (%s '%s')", id, rlx_op_name(nd->op), nd->name);
    else
        snprintf(buf, n, "node %d (%s)", id, rlx_op_name(nd->op));
    return buf;
}

/* The blob a new node holds proto's data in: proto's own when data is
 * its bytes (a node copied from another graph), else a copy. */
static rlx_blob *hold_data(const rlx_node_data *proto)
{
    if (proto->blob && proto->data == rlx_blob_data(proto->blob) && proto->data_bytes <= rlx_blob_bytes(proto->blob))
        return rlx_blob_ref(proto->blob);
    rlx_blob *b = rlx_blob_new(proto->data_bytes);
    if (b && proto->data_bytes)
        memcpy(rlx_blob_data(b), proto->data, proto->data_bytes);
    return b;
}

rlx_node rlx_graph_add(rlx_graph *g, const rlx_node_data *proto)
{
    if (!g) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "graph is NULL");
        return -1;
    }
    const rlx_op_info *info = rlx_op_info_of(proto->op);
    if (!info)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "unknown op %d", (int)proto->op);
    if (proto->n_in < info->min_in || proto->n_in > info->max_in)
        return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s takes %d to %d inputs, got %d", info->name, info->min_in,
                              info->max_in, proto->n_in);
    for (int i = 0; i < proto->n_in; i++) {
        if (proto->in[i] < 0 && g->error != RLX_OK) {
            rlx_set_error(g->error, "%s", g->error_msg); /* the first failure carries on */
            return -1;
        }
        if (proto->in[i] < 0 || proto->in[i] >= g->n_nodes)
            return rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "%s: operand %d is not a valid node (id %d)%s",
                                  info->name, i, proto->in[i],
                                  proto->in[i] < 0 ? "; an earlier builder call failed" : "");
    }
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? g->cap_nodes * 2 : 64;
        rlx_node_data *p = rlx_realloc_array(g->nodes, (size_t)cap, sizeof *p);
        if (!p)
            return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "out of memory growing the graph");
        g->nodes = p;
        g->cap_nodes = cap;
    }
    rlx_node_data n = *proto;
    n.name = NULL;
    n.data = NULL;
    n.blob = NULL;
    if (info->infer) {
        rlx_status s = info->infer(g, &n);
        if (s != RLX_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", rlx_last_error());
            return rlx_graph_fail(g, s, "%s%s%s: %s", info->name, proto->name ? " " : "",
                                  proto->name ? proto->name : "", msg);
        }
    }
    /* Every result stays below 2^40 elements, so sizes never overflow. */
    int64_t total = 1;
    for (int i = 0; i < n.shape.ndim; i++) {
        int64_t d = n.shape.dims[i];
        if (d < 0)
            return rlx_graph_fail(g, RLX_ERR_SHAPE, "%s: negative dimension %lld", info->name, (long long)d);
        if (d > 0 && total > (INT64_C(1) << 40) / d)
            return rlx_graph_fail(g, RLX_ERR_SHAPE, "%s: result of more than 2^40 elements", info->name);
        total *= d;
    }
    if (proto->name && !(n.name = rlx_strdup(proto->name)))
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    if (proto->data && !(n.blob = hold_data(proto))) {
        free(n.name);
        return rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "out of memory copying %zu bytes of constant data",
                              proto->data_bytes);
    }
    if (n.blob)
        n.data = rlx_blob_data(n.blob);
    g->nodes[g->n_nodes] = n;
    return g->n_nodes++;
}

rlx_graph *rlx_graph_clone(const rlx_graph *g)
{
    rlx_graph *c = rlx_graph_new();
    if (!c)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        if (c->n_nodes == c->cap_nodes) {
            int cap = c->cap_nodes ? c->cap_nodes * 2 : 64;
            rlx_node_data *p = rlx_realloc_array(c->nodes, (size_t)cap, sizeof *p);
            if (!p)
                goto fail;
            c->nodes = p;
            c->cap_nodes = cap;
        }
        rlx_node_data n = g->nodes[i];
        n.name = NULL;
        rlx_blob_ref(n.blob); /* the same bytes, not a copy */
        c->nodes[c->n_nodes++] = n;
        if (g->nodes[i].name && !(c->nodes[i].name = rlx_strdup(g->nodes[i].name)))
            goto fail;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (rlx_output(c, g->outputs[i].name, g->outputs[i].node) != RLX_OK)
            goto fail;
    if (rlx_bound_inputs_copy(g, &c->bound, &c->n_bound) != RLX_OK)
        goto fail;
    c->error = g->error;
    memcpy(c->error_msg, g->error_msg, sizeof c->error_msg);
    return c;
fail:
    rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory cloning a graph of %d nodes", g->n_nodes);
    rlx_graph_free(c);
    return NULL;
}

rlx_status rlx_output(rlx_graph *g, const char *name, rlx_node n)
{
    if (!g || !name)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_output: graph and name must not be NULL");
    if (n < 0 && g->error != RLX_OK)
        return rlx_set_error(g->error, "%s", g->error_msg); /* an earlier builder failed: its error carries on */
    if (n < 0 || n >= g->n_nodes) {
        rlx_graph_fail(g, RLX_ERR_INVALID_ARGUMENT, "output '%s': not a valid node (id %d)", name, n);
        return RLX_ERR_INVALID_ARGUMENT;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "output '%s' is already defined", name);
    if (g->n_outputs == g->cap_outputs) {
        int cap = g->cap_outputs ? g->cap_outputs * 2 : 8;
        rlx_output_ref *p = rlx_realloc_array(g->outputs, (size_t)cap, sizeof *p);
        if (!p) /* kept as the graph's error, so that verify and compile report it */
            return (rlx_status)(rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "output '%s': out of memory", name),
                                RLX_ERR_OUT_OF_MEMORY);
        g->outputs = p;
        g->cap_outputs = cap;
    }
    char *copy = rlx_strdup(name);
    if (!copy)
        return (rlx_status)(rlx_graph_fail(g, RLX_ERR_OUT_OF_MEMORY, "output '%s': out of memory", name),
                            RLX_ERR_OUT_OF_MEMORY);
    g->outputs[g->n_outputs].name = copy;
    g->outputs[g->n_outputs].node = n;
    g->n_outputs++;
    return RLX_OK;
}

bool rlx_graph_is_output(const rlx_graph *g, rlx_node id)
{
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i].node == id)
            return true;
    return false;
}

int *rlx_graph_use_counts(const rlx_graph *g)
{
    int *uses = rlx_calloc((size_t)g->n_nodes + 1, sizeof(int));
    if (!uses)
        return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            uses[g->nodes[i].in[j]]++;
    return uses;
}

rlx_status rlx_node_shape(const rlx_graph *g, rlx_node n, int *ndim, int64_t dims[RLX_MAX_DIMS])
{
    if (!g || !ndim || n < 0 || n >= g->n_nodes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_node_shape: invalid graph or node %d", n);
    *ndim = g->nodes[n].shape.ndim;
    if (dims)
        memcpy(dims, g->nodes[n].shape.dims, sizeof(int64_t) * RLX_MAX_DIMS);
    return RLX_OK;
}

rlx_dtype rlx_node_dtype(const rlx_graph *g, rlx_node n)
{
    if (!g || n < 0 || n >= g->n_nodes)
        return RLX_DTYPE_COUNT;
    return g->nodes[n].dtype;
}

rlx_status rlx_node_set_name(rlx_graph *g, rlx_node n, const char *name)
{
    if (!g || !name || n < 0 || n >= g->n_nodes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_node_set_name: invalid graph, node or name");
    char *copy = rlx_strdup(name);
    if (!copy)
        return RLX_ERR_OUT_OF_MEMORY;
    free(g->nodes[n].name);
    g->nodes[n].name = copy;
    return RLX_OK;
}
