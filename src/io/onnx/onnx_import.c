/* onnx_import.c - ModelProto -> rlx_graph: topological order (ONNX allows
 * unsorted nodes), graph inputs with symbolic dims bound, the dispatch to
 * op handlers, and `rlx info`.  Scopes, attributes and node results, which
 * the handlers share, are in onnx_node.c. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_internal.h"
#include "io/onnx/onnx_ops.h"
#include "io/onnx/onnx_stage.h"
#include "io/onnx/onnx_string.h"
#include "io/weights.h"
#include "ir/ir.h"

#define ONNX_MAX_MODEL_BYTES ((size_t)1 << 31)

/* ------------------------------------------------------------ node order */

/* Input names of a node, including free names used inside its subgraphs. */
typedef struct name_list {
    const char **v;
    int n, cap;
} name_list;

static void names_push(name_list *l, const char *s)
{
    if (!s || !*s)
        return;
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 16;
        const char **nv = rlx_realloc(l->v, sizeof *nv * (size_t)nc);
        if (!nv)
            return;
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = s;
}

static void subgraph_names(const Onnx__GraphProto *gp, name_list *l, int depth)
{
    if (!gp || depth > 32)
        return;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        if (!nd)
            continue;
        for (size_t j = 0; j < nd->n_input; j++)
            names_push(l, nd->input[j]);
        for (size_t a = 0; a < nd->n_attribute; a++) {
            const Onnx__AttributeProto *at = nd->attribute[a];
            if (!at)
                continue;
            if (at->g)
                subgraph_names(at->g, l, depth + 1);
            for (size_t k = 0; k < at->n_graphs; k++)
                subgraph_names(at->graphs[k], l, depth + 1);
        }
    }
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i])
            names_push(l, gp->output[i]->name);
}

static void node_names(const Onnx__NodeProto *nd, name_list *l)
{
    l->n = 0;
    for (size_t j = 0; j < nd->n_input; j++)
        names_push(l, nd->input[j]);
    for (size_t a = 0; a < nd->n_attribute; a++) {
        const Onnx__AttributeProto *at = nd->attribute[a];
        if (!at)
            continue;
        if (at->g)
            subgraph_names(at->g, l, 1);
        for (size_t k = 0; k < at->n_graphs; k++)
            subgraph_names(at->graphs[k], l, 1);
    }
}

/* A Gradient node (ai.onnx.preview.training) reads the tensor its
 * attribute `y` names, though not as an input: that tensor's name. */
static void gradient_target(const Onnx__GraphProto *gp, const Onnx__NodeProto *nd, name_list *l)
{
    if (!nd->op_type || strcmp(nd->op_type, "Gradient") || !nd->domain ||
        strcmp(nd->domain, "ai.onnx.preview.training"))
        return;
    for (size_t a = 0; a < nd->n_attribute; a++) {
        const Onnx__AttributeProto *at = nd->attribute[a];
        if (!at || !at->name || strcmp(at->name, "y") || !at->has_s)
            continue;
        for (size_t i = 0; i < gp->n_node; i++)
            for (size_t j = 0; gp->node[i] && j < gp->node[i]->n_output; j++) {
                const char *o = gp->node[i]->output[j];
                if (o && strlen(o) == at->s.len && !memcmp(o, at->s.data, at->s.len))
                    names_push(l, o);
            }
    }
}

typedef struct prod_map {
    const char **names;
    int *node;
    int cap;
} prod_map;

static int prod_find(const prod_map *m, const char *name)
{
    uint32_t h = onnx_hash_str(name) & (uint32_t)(m->cap - 1);
    while (m->names[h]) {
        if (!strcmp(m->names[h], name))
            return m->node[h];
        h = (h + 1) & (uint32_t)(m->cap - 1);
    }
    return -1;
}

/* Kahn's algorithm, keeping the file's order among ready nodes. */
static rlx_status topo_sort(const Onnx__GraphProto *gp, int **order_out)
{
    int n = (int)gp->n_node;
    *order_out = NULL;
    int cap = 64;
    size_t nouts = 0;
    for (int i = 0; i < n; i++) {
        if (!gp->node[i])
            return rlx_set_error(RLX_ERR_FORMAT, "graph has an empty node entry");
        nouts += gp->node[i]->n_output;
    }
    while ((size_t)cap < nouts * 2 + 2)
        cap *= 2;
    prod_map m = {rlx_calloc((size_t)cap, sizeof(char *)), rlx_calloc((size_t)cap, sizeof(int)), cap};
    int *indeg = rlx_calloc((size_t)n + 1, sizeof(int));
    int *order = rlx_calloc((size_t)n + 1, sizeof(int));
    int **users = rlx_calloc((size_t)n + 1, sizeof(int *));
    int *nusers = rlx_calloc((size_t)n + 1, sizeof(int)), *capusers = rlx_calloc((size_t)n + 1, sizeof(int));
    name_list l = {0};
    rlx_status st = RLX_OK;
    if (!m.names || !m.node || !indeg || !order || !users || !nusers || !capusers) {
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory sorting nodes");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        for (size_t j = 0; j < nd->n_output; j++) {
            const char *o = nd->output[j];
            if (!o || !*o)
                continue;
            uint32_t h = onnx_hash_str(o) & (uint32_t)(cap - 1);
            while (m.names[h]) {
                if (!strcmp(m.names[h], o)) {
                    st = rlx_set_error(RLX_ERR_FORMAT, "tensor '%s' is produced by two nodes ('%s' and '%s')", o,
                                       gp->node[m.node[h]]->name ? gp->node[m.node[h]]->name : "",
                                       nd->name ? nd->name : "");
                    goto done;
                }
                h = (h + 1) & (uint32_t)(cap - 1);
            }
            m.names[h] = o;
            m.node[h] = i;
        }
    }
    for (int i = 0; i < n; i++) {
        node_names(gp->node[i], &l);
        gradient_target(gp, gp->node[i], &l);
        for (int j = 0; j < l.n; j++) {
            int p = prod_find(&m, l.v[j]);
            if (p < 0)
                continue;
            if (p == i) {
                /* A node reading its own output (not inside a subgraph of itself, where names may be reused). */
                bool direct = false;
                for (size_t k = 0; k < gp->node[i]->n_input; k++)
                    if (gp->node[i]->input[k] && !strcmp(gp->node[i]->input[k], l.v[j]))
                        direct = true;
                if (direct) {
                    st = rlx_set_error(RLX_ERR_FORMAT, "cycle: node '%s' reads its own output '%s'",
                                       gp->node[i]->name ? gp->node[i]->name : "", l.v[j]);
                    goto done;
                }
                continue;
            }
            if (nusers[p] == capusers[p]) {
                int nc = capusers[p] ? capusers[p] * 2 : 4;
                int *nu = rlx_realloc(users[p], sizeof(int) * (size_t)nc);
                if (!nu) {
                    st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory sorting nodes");
                    goto done;
                }
                users[p] = nu;
                capusers[p] = nc;
            }
            users[p][nusers[p]++] = i;
            indeg[i]++;
        }
    }
    int head = 0, tail = 0;
    for (int i = 0; i < n; i++)
        if (indeg[i] == 0)
            order[tail++] = i;
    while (head < tail) {
        int i = order[head++];
        for (int k = 0; k < nusers[i]; k++)
            if (--indeg[users[i][k]] == 0)
                order[tail++] = users[i][k];
    }
    if (tail < n) {
        int bad = 0;
        for (int i = 0; i < n; i++)
            if (indeg[i] > 0) {
                bad = i;
                break;
            }
        st = rlx_set_error(RLX_ERR_FORMAT, "the graph has a cycle: %d of %d nodes never become ready (e.g. '%s', %s)",
                           n - tail, n, gp->node[bad]->name ? gp->node[bad]->name : "",
                           gp->node[bad]->op_type ? gp->node[bad]->op_type : "?");
        goto done;
    }
    *order_out = order;
    order = NULL;
done:
    for (int i = 0; i < n && users; i++)
        free(users[i]);
    free(users);
    free(nusers);
    free(capusers);
    free(indeg);
    free(order);
    free(m.names);
    free(m.node);
    free(l.v);
    return st;
}

/* ------------------------------------------------------------ running nodes */

static rlx_status run_one(onnx_ctx *c, const Onnx__NodeProto *nd)
{
    onnx_node n;
    memset(&n, 0, sizeof n);
    n.c = c;
    n.p = nd;
    n.opset = c->opset;
    if (!nd->op_type)
        return rlx_set_error(RLX_ERR_FORMAT, "node '%s' has no op_type", nd->name ? nd->name : "");
    if (nd->n_input > 64 || nd->n_output > 64)
        return onnx_fail(&n, RLX_ERR_UNSUPPORTED, "too many inputs or outputs");
    n.n_in = (int)nd->n_input;
    n.n_out = (int)nd->n_output;
    for (int i = 0; i < n.n_in; i++) {
        const char *nm = nd->input[i];
        if (!nm || !*nm)
            continue;
        n.in[i] = onnx_lookup(c, nm);
        if (!n.in[i])
            return onnx_fail(&n, RLX_ERR_FORMAT, "input '%s' is not produced by any node, initializer or graph input",
                             nm);
    }
    while (n.n_in > 0 && !n.in[n.n_in - 1])
        n.n_in--; /* trailing optional inputs left out */
    n.op = onnx_find_node_op(nd);
    int need = n.op ? onnx_op_min_inputs(n.op, c->opset) : 1;
    for (int i = 0; i < need; i++)
        if (i >= n.n_in || !n.in[i])
            return onnx_fail(&n, RLX_ERR_FORMAT, "needs at least %d inputs; input %d is missing", need, i);
    if (!n.op)
        return onnx_fail(&n, RLX_ERR_UNSUPPORTED, "unsupported op");
    for (int i = 0; i < n.n_in && !n.op->any_kind; i++)
        if (n.in[i] && n.in[i]->kind != ONNX_KIND_TENSOR)
            return onnx_fail(&n, RLX_ERR_UNSUPPORTED, "input %d ('%s') is %s; this op takes tensors", i, nd->input[i],
                             onnx_kind_name(n.in[i]));
    bool strings = false;
    for (int i = 0; i < n.n_in; i++) {
        if (n.in[i] && n.in[i]->unknown_string) {
            onnx_note_need(&n, i);
            return onnx_fail(&n, RLX_ERR_UNSUPPORTED,
                             "input %d ('%s') is a tensor of strings, which must be known at import time: RLX "
                             "computes on strings only while importing (bind the graph input by value)",
                             i, nd->input[i]);
        }
        strings |= onnx_value_is_string(n.in[i]);
    }
    if (strings && !n.op->strings)
        return onnx_fail(&n, RLX_ERR_UNSUPPORTED,
                         "this op does not take tensors of strings (RLX evaluates only the string ops docs/ONNX.md "
                         "lists, at import)");
    int first_new = rlx_graph_node_count(c->g);
    /* the host evaluator knows numbers only */
    rlx_status st = strings ? RLX_ERR_UNSUPPORTED : onnx_try_fold(&n);
    if (st == RLX_ERR_UNSUPPORTED) {
        rlx_clear_error();
        st = n.op->fn(&n);
    }
    if (st != RLX_OK && c->g->error == RLX_ERR_OUT_OF_MEMORY)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "%s", c->g->error_msg);
    if (st != RLX_OK)
        return st;
    for (int i = 0; i < n.n_out; i++) {
        const char *nm = nd->output[i];
        if (!nm || !*nm)
            continue;
        if (!n.out[i])
            return onnx_fail(&n, RLX_ERR_UNSUPPORTED, "output %d ('%s') is not supported", i, nm);
        /* name new nodes after their ONNX output (never rename an input,
         * nor a param made for an initializer this node read) */
        bool passed = false;
        for (int j = 0; j < n.n_in && !passed; j++)
            passed = n.in[j] && n.in[j]->node == n.out[i]->node;
        if (n.out[i]->node >= first_new && !n.out[i]->k && !passed)
            rlx_node_set_name(c->g, n.out[i]->node, nm);
        for (int e = 0; e < n.out[i]->n_elems; e++) { /* a new sequence element: NAME[e] */
            onnx_value *x = &n.out[i]->elems[e];
            char en[300];
            if (x->node >= first_new && !x->k && snprintf(en, sizeof en, "%s[%d]", nm, e) < (int)sizeof en)
                rlx_node_set_name(c->g, x->node, en);
        }
    }
    return RLX_OK;
}

rlx_status onnx_run_nodes(onnx_ctx *c, const Onnx__GraphProto *gp)
{
    int *order = NULL;
    rlx_status st = topo_sort(gp, &order);
    if (st != RLX_OK)
        return st;
    for (size_t i = 0; i < gp->n_node; i++) {
        st = run_one(c, gp->node[order[i]]);
        if (st != RLX_OK)
            break;
    }
    free(order);
    return st;
}

/* ------------------------------------------------------------ unsupported ops */

typedef struct op_seen {
    char op[64];
    char names[200];
    int count;
} op_seen;

static void collect(const Onnx__GraphProto *gp, op_seen *seen, int *nseen, int max, int depth)
{
    if (!gp || depth > 32)
        return;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        if (!nd)
            continue;
        const char *op = nd->op_type ? nd->op_type : "";
        bool std_domain = !nd->domain || !*nd->domain || !strcmp(nd->domain, "ai.onnx");
        if (!onnx_find_node_op(nd)) {
            char key[64];
            if (std_domain)
                snprintf(key, sizeof key, "%s", op);
            else
                snprintf(key, sizeof key, "%s.%s", nd->domain, op);
            int k;
            for (k = 0; k < *nseen; k++)
                if (!strcmp(seen[k].op, key))
                    break;
            if (k == *nseen && *nseen < max) {
                memset(&seen[k], 0, sizeof seen[k]);
                snprintf(seen[k].op, sizeof seen[k].op, "%s", key);
                (*nseen)++;
            }
            if (k < *nseen) {
                size_t l = strlen(seen[k].names);
                if (seen[k].count < 3)
                    snprintf(seen[k].names + l, sizeof seen[k].names - l, "%s'%s'", seen[k].count ? ", " : "",
                             nd->name && *nd->name ? nd->name : "(unnamed)");
                else if (seen[k].count == 3)
                    snprintf(seen[k].names + l, sizeof seen[k].names - l, ", ...");
                seen[k].count++;
            }
        }
        for (size_t a = 0; a < nd->n_attribute; a++) {
            const Onnx__AttributeProto *at = nd->attribute[a];
            if (!at)
                continue;
            if (at->g)
                collect(at->g, seen, nseen, max, depth + 1);
            for (size_t k = 0; k < at->n_graphs; k++)
                collect(at->graphs[k], seen, nseen, max, depth + 1);
        }
    }
}

void onnx_collect_unsupported(const Onnx__GraphProto *gp, int opset, char *buf, size_t n, int *count)
{
    op_seen seen[32];
    int nseen = 0;
    collect(gp, seen, &nseen, 32, 0);
    *count = nseen;
    buf[0] = 0;
    size_t l = 0;
    for (int i = 0; i < nseen && l < n; i++) {
        l += (size_t)snprintf(buf + l, n - l, "%s%s (opset %d; %d node%s: %s)", i ? "; " : "", seen[i].op, opset,
                              seen[i].count, seen[i].count == 1 ? "" : "s", seen[i].names);
    }
}

/* ------------------------------------------------------------ import */

static int model_opset(const Onnx__ModelProto *m)
{
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = m->opset_import[i];
        if (o && (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")))
            return o->has_version ? (int)o->version : 1;
    }
    return m->n_opset_import ? 1 : 1;
}

static const rlx_onnx_binding *find_binding(const rlx_onnx_options *o, const char *name, bool dim)
{
    if (!o || !name)
        return NULL;
    for (int i = 0; i < o->n_bindings; i++) {
        const rlx_onnx_binding *b = &o->bindings[i];
        /* a dim binding: ndim -1, or a one-value binding whose name is no input's */
        if (b->name && !strcmp(b->name, name) &&
            (dim ? ((b->ndim < 0 && b->ndim != RLX_ONNX_EMPTY) || b->ndim == 1) : b->ndim >= 0))
            return b;
    }
    return NULL;
}

/* Whether a binding makes the optional input `name` empty. */
static bool bound_empty(const rlx_onnx_options *o, const char *name)
{
    for (int i = 0; o && i < o->n_bindings; i++)
        if (o->bindings[i].name && !strcmp(o->bindings[i].name, name) && o->bindings[i].ndim == RLX_ONNX_EMPTY)
            return true;
    return false;
}

/* Declared type of a graph input/output value: what it holds, and the
 * type and shape of its tensors. */
static rlx_onnx_kind value_kind(const Onnx__ValueInfoProto *vi, int *onnx_type, int *ndim,
                                const Onnx__TensorShapeProto **shape)
{
    *onnx_type = 0;
    *ndim = -1;
    *shape = NULL;
    const Onnx__TypeProto *t = vi->type;
    rlx_onnx_kind kind = RLX_ONNX_TENSOR;
    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && t->optional_type) {
        t = t->optional_type->elem_type;
        kind = RLX_ONNX_OPTIONAL;
    }
    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && t->sequence_type) {
        t = t->sequence_type->elem_type;
        kind = kind == RLX_ONNX_OPTIONAL ? RLX_ONNX_OPTIONAL_SEQUENCE : RLX_ONNX_SEQUENCE;
    }
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return RLX_ONNX_OTHER;
    const Onnx__TypeProto__Tensor *tt = t->tensor_type;
    *onnx_type = tt->has_elem_type ? tt->elem_type : 0;
    if (tt->shape) {
        *ndim = (int)tt->shape->n_dim;
        *shape = tt->shape;
    }
    return kind;
}

/* The graph input tensor `name` (a whole input, or an element of a
 * sequence input) of declared type ot and shape (nd, sh): an RLX input, or
 * a constant when bound by value; *out gets it. */
static rlx_status add_tensor_input(onnx_ctx *c, const char *name, int ot, int nd, const Onnx__TensorShapeProto *sh,
                                   onnx_value *out)
{
    rlx_dtype t = RLX_STRING;
    if (ot != ONNX__TENSOR_PROTO__DATA_TYPE__STRING && !onnx_dtype_from_onnx(ot, &t))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "graph input '%s' has data type %s, which RLX does not support", name,
                             onnx_type_name(ot));
    int64_t dims[RLX_MAX_DIMS];
    const rlx_onnx_binding *b = find_binding(c->opt, name, false);
    if (b) {
        if (b->ndim > RLX_MAX_DIMS)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "binding for '%s': rank %d", name, b->ndim);
        if (nd >= 0 && nd != b->ndim)
            return rlx_set_error(RLX_ERR_SHAPE, "input '%s' has rank %d, the binding gives rank %d", name, nd, b->ndim);
        for (int i = 0; i < b->ndim; i++) {
            if (b->dims[i] < 0)
                return rlx_set_error(RLX_ERR_SHAPE, "binding for '%s': negative dim", name);
            if (sh && sh->dim[i] && sh->dim[i]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
                sh->dim[i]->dim_value > 0 && sh->dim[i]->dim_value != b->dims[i])
                return rlx_set_error(RLX_ERR_SHAPE, "input '%s' dim %d is %lld in the model, the binding gives %lld",
                                     name, i, (long long)sh->dim[i]->dim_value, (long long)b->dims[i]);
            dims[i] = b->dims[i];
        }
        nd = b->ndim;
    } else {
        if (nd < 0)
            return rlx_set_error(RLX_ERR_SHAPE, "input '%s' has no declared shape; bind it (name=dims)", name);
        if (nd > RLX_MAX_DIMS)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "input '%s' has rank %d", name, nd);
        for (int i = 0; i < nd; i++) {
            const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
            if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0) {
                dims[i] = d->dim_value;
                continue;
            }
            const char *sym =
                d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM ? d->dim_param : NULL;
            const rlx_onnx_binding *db = find_binding(c->opt, sym, true);
            if (db)
                dims[i] = db->dims[0];
            else if (c->opt && c->opt->default_dim > 0)
                dims[i] = c->opt->default_dim;
            else
                return rlx_set_error(RLX_ERR_SHAPE,
                                     "input '%s' dim %d is symbolic ('%s'); bind it with %s=N or %s=AxBx...", name, i,
                                     sym ? sym : "?", sym ? sym : "dim", name);
        }
    }
    if (!onnx_dims_fit(nd, dims, NULL))
        return rlx_set_error(RLX_ERR_SHAPE, "input '%s': dimensions too large", name);
    if (t == RLX_STRING)
        return onnx_string_input(name, nd, dims, b, out);
    if (b && b->value) {
        onnx_tensor *k = onnx_tensor_new(t, nd, dims);
        if (!k)
            return rlx_set_error(rlx_last_status_or(RLX_ERR_SHAPE), "input '%s': %s", name, rlx_last_error());
        if (k->bytes != b->bytes) {
            onnx_tensor_free(k);
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                 "input '%s': value has %zu bytes, its shape and dtype need %zu", name, b->bytes,
                                 k->bytes);
        }
        if (k->bytes)
            memcpy(k->data, b->value, k->bytes);
        /* kept with the graph, so that a session refuses other values */
        rlx_shape ks = {.ndim = nd};
        memcpy(ks.dims, dims, sizeof dims[0] * (size_t)nd);
        if (rlx_graph_bind_input(c->g, name, t, &ks, b->value, b->bytes) != RLX_OK) {
            onnx_tensor_free(k);
            return RLX_ERR_OUT_OF_MEMORY;
        }
        onnx_value_clear(out);
        out->k = k;
        return RLX_OK;
    }
    rlx_node x = rlx_input(c->g, name, t, nd, dims);
    if (x < 0)
        return rlx_set_error(rlx_last_status_or(RLX_ERR_SHAPE), "input '%s': %s", name, rlx_last_error());
    onnx_value_clear(out);
    out->node = x;
    return RLX_OK;
}

/* A sequence input `name`: one input per element, NAME[i]; its length from
 * a dim binding of its name, else from the element bindings there are,
 * else default_dim. */
static rlx_status add_sequence_input(onnx_ctx *c, const char *name, int ot, int nd, const Onnx__TensorShapeProto *sh,
                                     onnx_value *out)
{
    rlx_dtype t;
    if (!onnx_dtype_from_onnx(ot, &t))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "graph input '%s' is a sequence of %s, which RLX does not support",
                             name, onnx_type_name(ot));
    char en[512];
    int64_t len = 0;
    const rlx_onnx_binding *b = find_binding(c->opt, name, true);
    if (b) {
        len = b->dims[0];
        if (len < 0 || len > ONNX_MAX_SEQ_LEN)
            return rlx_set_error(RLX_ERR_SHAPE, "sequence input '%s': length %lld (at most %d)", name, (long long)len,
                                 ONNX_MAX_SEQ_LEN);
    } else {
        while (len < ONNX_MAX_SEQ_LEN && snprintf(en, sizeof en, "%s[%lld]", name, (long long)len) < (int)sizeof en &&
               find_binding(c->opt, en, false))
            len++;
        if (len == 0 && c->opt && c->opt->default_dim > 0) /* like an unbound symbolic dim */
            len = c->opt->default_dim < ONNX_MAX_SEQ_LEN ? c->opt->default_dim : ONNX_MAX_SEQ_LEN;
        if (len == 0)
            return rlx_set_error(RLX_ERR_SHAPE,
                                 "sequence input '%s': bind its length (%s=N) or its elements (%s[0]=dims, ...)", name,
                                 name, name);
    }
    onnx_seq_init(out, t);
    for (int64_t i = 0; i < len; i++) {
        if (snprintf(en, sizeof en, "%s[%lld]", name, (long long)i) >= (int)sizeof en)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "sequence input '%s': name too long", name);
        onnx_value e = {.node = -1};
        rlx_status st = add_tensor_input(c, en, ot, nd, sh, &e);
        if (st == RLX_OK)
            st = onnx_seq_push(c, out, &e);
        onnx_value_clear(&e);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

static rlx_status add_input(onnx_ctx *c, const Onnx__ValueInfoProto *vi)
{
    const char *name = vi->name;
    int ot, nd;
    const Onnx__TensorShapeProto *sh;
    rlx_onnx_kind kind = value_kind(vi, &ot, &nd, &sh);
    onnx_value v = {.node = -1};
    rlx_status st;
    if (kind == RLX_ONNX_OTHER)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "graph input '%s' is not a tensor, a sequence of tensors or an optional of either (maps, "
                             "sparse tensors and nested sequences are not supported)",
                             name);
    if ((kind == RLX_ONNX_OPTIONAL || kind == RLX_ONNX_OPTIONAL_SEQUENCE) && bound_empty(c->opt, name)) {
        v.kind = ONNX_KIND_NONE;
        st = RLX_OK;
    } else if (kind == RLX_ONNX_SEQUENCE || kind == RLX_ONNX_OPTIONAL_SEQUENCE)
        st = add_sequence_input(c, name, ot, nd, sh, &v);
    else
        st = add_tensor_input(c, name, ot, nd, sh, &v);
    if (st != RLX_OK) {
        onnx_value_clear(&v);
        return st;
    }
    return onnx_bind_move(c, name, &v) ? RLX_OK : RLX_ERR_OUT_OF_MEMORY;
}

void rlx_onnx_options_init(rlx_onnx_options *o)
{
    if (o)
        memset(o, 0, sizeof *o);
}

/* Whether initializers_as_params makes this initializer a param. */
static bool is_param_initializer(const rlx_onnx_options *o, const onnx_tensor *k)
{
    return o && o->initializers_as_params && onnx_dtype_is_float(k->dtype) && k->ndim >= 1;
}

/* A graph output: a tensor as itself, a sequence as one output per element
 * (NAME[i]), an empty optional as none. */
static rlx_status add_output(onnx_ctx *c, const char *name, onnx_value *v)
{
    if (v->kind == ONNX_KIND_NONE)
        return RLX_OK;
    int n = v->kind == ONNX_KIND_SEQUENCE ? v->n_elems : 1;
    for (int i = 0; i < n; i++) {
        char en[512];
        onnx_value *x = v->kind == ONNX_KIND_SEQUENCE ? &v->elems[i] : v;
        if (v->kind == ONNX_KIND_SEQUENCE && snprintf(en, sizeof en, "%s[%d]", name, i) >= (int)sizeof en)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "graph output '%s': name too long", name);
        const char *on = v->kind == ONNX_KIND_SEQUENCE ? en : name;
        if (onnx_value_is_string(x)) {
            rlx_status st = onnx_string_output(c, on, x);
            if (st != RLX_OK)
                return st;
            continue;
        }
        rlx_node nd = onnx_node_of(c, x);
        if (nd < 0 || rlx_output(c->g, on, nd) != RLX_OK)
            return rlx_set_error(rlx_last_status_or(RLX_ERR_FORMAT), "graph output '%s': %s", on, rlx_last_error());
    }
    return RLX_OK;
}

/* ------------------------------------------------------------ staged imports */

/* The values entering a window: constants when bound by value, else
 * inputs of its graph.  The first window must be given every graph input
 * that is no initializer. */
static rlx_status add_stage_inputs(onnx_ctx *c, const Onnx__GraphProto *gp, const onnx_stage *stage)
{
    for (int i = 0; i < stage->n_inputs; i++) {
        const onnx_stage_in *in = &stage->inputs[i];
        if (!in->name || in->ndim < 0 || in->ndim > RLX_MAX_DIMS || !onnx_dims_fit(in->ndim, in->dims, NULL))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "staged input %d: bad name or shape", i);
        onnx_value v = {.node = -1};
        if (in->dtype == RLX_STRING) { /* known when bound by value, else refused by the ops reading it */
            rlx_onnx_binding b = {.value = in->value, .bytes = in->bytes};
            rlx_status st = onnx_string_input(in->name, in->ndim, in->dims, &b, &v);
            if (st != RLX_OK)
                return st;
        } else if (in->value) {
            v.k = onnx_tensor_new(in->dtype, in->ndim, in->dims);
            if (!v.k)
                return rlx_set_error(rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY), "input '%s': %s", in->name,
                                     rlx_last_error());
            if (v.k->bytes != in->bytes) {
                onnx_value_clear(&v);
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "input '%s': %zu bytes given, its shape needs %zu",
                                     in->name, in->bytes, v.k->bytes);
            }
            if (in->bytes)
                memcpy(v.k->data, in->value, in->bytes);
        } else if ((v.node = rlx_input(c->g, in->name, in->dtype, in->ndim, in->dims)) < 0)
            return rlx_set_error(rlx_last_status_or(RLX_ERR_SHAPE), "input '%s': %s", in->name, rlx_last_error());
        if (!onnx_bind_move(c, in->name, &v)) {
            onnx_value_clear(&v);
            return RLX_ERR_OUT_OF_MEMORY;
        }
    }
    for (size_t i = 0; stage->first == 0 && i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !*vi->name)
            return rlx_set_error(RLX_ERR_FORMAT, "graph input %zu has no name", i);
        onnx_value *v = onnx_lookup(c, vi->name);
        if (!v)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "graph input '%s' was not given", vi->name);
        int ot, nd;
        const Onnx__TensorShapeProto *sh;
        rlx_dtype want;
        rlx_onnx_kind kind = value_kind(vi, &ot, &nd, &sh);
        if (kind != RLX_ONNX_TENSOR && kind != RLX_ONNX_OPTIONAL)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "graph input '%s' is no tensor; a staged run takes tensors only",
                                 vi->name);
        if (onnx_dtype_from_onnx(ot, &want) && want != onnx_value_dtype(c, v))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "graph input '%s' is %s in the model, given %s", vi->name,
                                 rlx_dtype_name(want), rlx_dtype_name(onnx_value_dtype(c, v)));
        if (nd >= 0 && nd != onnx_value_rank(c, v))
            return rlx_set_error(RLX_ERR_SHAPE, "graph input '%s' has rank %d in the model, given rank %d", vi->name,
                                 nd, onnx_value_rank(c, v));
    }
    return RLX_OK;
}

/* Imports nodes [first, ...) of the sorted order until the end or until a
 * node after the first needs a value at import that the window does not
 * know (stage->end says where it stopped).  The first node needing one
 * stops the window empty, naming the value in stage->need. */
/* The window's first node needs c->need_name at import: that name, and
 * every input of the node not known at import (a handler may name one of
 * several values it needs). */
static rlx_status stage_need(onnx_ctx *c, const Onnx__NodeProto *nd, onnx_stage *stage)
{
    if (!(stage->need = rlx_strdup(c->need_name)) ||
        !(stage->need_inputs = rlx_calloc(nd->n_input + 1, sizeof *stage->need_inputs)))
        return RLX_ERR_OUT_OF_MEMORY;
    for (size_t j = 0; j < nd->n_input; j++) {
        onnx_value *v = nd->input[j] && *nd->input[j] ? onnx_lookup(c, nd->input[j]) : NULL;
        if (v && !v->k && !v->init && v->kind == ONNX_KIND_TENSOR &&
            !(stage->need_inputs[stage->n_need_inputs++] = rlx_strdup(nd->input[j])))
            return RLX_ERR_OUT_OF_MEMORY;
    }
    return RLX_OK;
}

static rlx_status run_stage_nodes(onnx_ctx *c, const Onnx__GraphProto *gp, const int *order, onnx_stage *stage)
{
    int n = (int)gp->n_node;
    stage->n_nodes = n;
    stage->end = n;
    if (stage->first < 0 || stage->first > n)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "staged import: first node %d of %d", stage->first, n);
    for (int p = stage->first; p < n; p++) {
        c->need_name = NULL;
        rlx_status st = run_one(c, gp->node[order[p]]);
        if (st == RLX_OK && stage->single) {
            stage->end = p + 1;
            return RLX_OK;
        }
        if (st == RLX_OK)
            continue;
        /* only a value a top-level node reads can be carried in from a run */
        if (st != RLX_ERR_UNSUPPORTED || !c->need_name || c->need_depth != 0)
            return st;
        rlx_clear_error();
        stage->end = p;
        return p == stage->first ? stage_need(c, gp->node[order[p]], stage) : RLX_OK;
    }
    return RLX_OK;
}

/* A set of names (open addressing), for the values leaving a window. */
typedef struct name_set {
    const char **v;
    int cap, n;
} name_set;

static bool name_set_add(name_set *s, const char *name)
{
    if (!name || !*name)
        return false;
    if (2 * (s->n + 1) > s->cap) {
        int nc = s->cap ? s->cap * 2 : 64;
        const char **nv = rlx_calloc((size_t)nc, sizeof *nv);
        if (!nv)
            return false;
        for (int i = 0; i < s->cap; i++)
            if (s->v[i]) {
                uint32_t h = onnx_hash_str(s->v[i]) & (uint32_t)(nc - 1);
                while (nv[h])
                    h = (h + 1) & (uint32_t)(nc - 1);
                nv[h] = s->v[i];
            }
        free(s->v);
        s->v = nv;
        s->cap = nc;
    }
    uint32_t h = onnx_hash_str(name) & (uint32_t)(s->cap - 1);
    while (s->v[h]) {
        if (!strcmp(s->v[h], name))
            return false;
        h = (h + 1) & (uint32_t)(s->cap - 1);
    }
    s->v[h] = name;
    s->n++;
    return true;
}

static bool name_set_has(const name_set *s, const char *name)
{
    if (!s->cap || !name)
        return false;
    uint32_t h = onnx_hash_str(name) & (uint32_t)(s->cap - 1);
    for (; s->v[h]; h = (h + 1) & (uint32_t)(s->cap - 1))
        if (!strcmp(s->v[h], name))
            return true;
    return false;
}

static rlx_status stage_out_const(onnx_stage_out *o, const onnx_tensor *k)
{
    o->kind = ONNX_STAGE_OUT_CONST;
    o->value.dtype = k->dtype;
    o->value.ndim = k->ndim;
    memcpy(o->value.dims, k->dims, sizeof k->dims);
    o->value.bytes = k->bytes;
    o->value.data = rlx_malloc(k->bytes ? k->bytes : 1);
    if (!o->value.data)
        return RLX_ERR_OUT_OF_MEMORY;
    if (k->bytes)
        memcpy(o->value.data, k->data, k->bytes);
    return RLX_OK;
}

/* Names in the order first read, each once. */
typedef struct ordered_names {
    name_set seen;
    const char **v;
    int n, cap;
} ordered_names;

static rlx_status ordered_add(ordered_names *o, const name_list *l)
{
    for (int j = 0; j < l->n; j++) {
        if (!name_set_add(&o->seen, l->v[j]))
            continue;
        if (o->n == o->cap) {
            int nc = o->cap ? 2 * o->cap : 64;
            const char **nv = rlx_realloc(o->v, sizeof *nv * (size_t)nc);
            if (!nv)
                return RLX_ERR_OUT_OF_MEMORY;
            o->v = nv;
            o->cap = nc;
        }
        o->v[o->n++] = l->v[j];
    }
    return RLX_OK;
}

/* The values leaving a window: the graph outputs, then what the nodes
 * after it read (each once), skipping initializers (the next window reads
 * them from the model again) and names no node has made yet. */
static rlx_status stage_outputs(onnx_ctx *c, const Onnx__GraphProto *gp, const int *order, onnx_stage *stage)
{
    ordered_names names = {0};
    name_set inits = {0}, entered = {0};
    name_list l = {0};
    rlx_status st = RLX_OK;
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i])
            names_push(&l, gp->output[i]->name);
    st = ordered_add(&names, &l);
    for (int p = stage->end; p < stage->n_nodes && st == RLX_OK; p++) {
        node_names(gp->node[order[p]], &l);
        st = ordered_add(&names, &l);
    }
    for (size_t i = 0; i < gp->n_initializer; i++)
        if (gp->initializer[i])
            name_set_add(&inits, gp->initializer[i]->name);
    for (int i = 0; i < stage->n_inputs; i++)
        name_set_add(&entered, stage->inputs[i].name);
    if (st == RLX_OK && !(stage->outs = rlx_calloc((size_t)names.n + 1, sizeof *stage->outs)))
        st = RLX_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < names.n && st == RLX_OK; i++) {
        const char *name = names.v[i];
        bool was_in = !name_set_add(&entered, name), is_init = !name_set_add(&inits, name);
        onnx_value *v = onnx_lookup(c, name);
        if (!v || (is_init && !was_in) || v->init)
            continue;
        if (v->kind != ONNX_KIND_TENSOR) {
            st = rlx_set_error(RLX_ERR_UNSUPPORTED,
                               "'%s' is %s read after an op that needs run-time values at import; a staged run "
                               "carries tensors only",
                               name, onnx_kind_name(v));
            break;
        }
        onnx_stage_out *o = &stage->outs[stage->n_outs];
        if (!(o->name = rlx_strdup(name))) {
            st = RLX_ERR_OUT_OF_MEMORY;
            break;
        }
        stage->n_outs++;
        if (was_in)
            o->kind = ONNX_STAGE_OUT_PASS;
        else if (v->k)
            st = stage_out_const(o, v->k);
        else {
            o->kind = ONNX_STAGE_OUT_GRAPH;
            if (rlx_output(c->g, name, onnx_node_of(c, v)) != RLX_OK)
                st = rlx_set_error(rlx_last_status_or(RLX_ERR_FORMAT), "'%s': %s", name, rlx_last_error());
        }
    }
    free(names.seen.v);
    free(names.v);
    free(inits.v);
    free(entered.v);
    free(l.v);
    return st;
}

void onnx_stage_clear(onnx_stage *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n_outs; i++) {
        free(st->outs[i].name);
        free(st->outs[i].value.data);
    }
    free(st->outs);
    free(st->need);
    for (int i = 0; i < st->n_need_inputs; i++)
        free(st->need_inputs[i]);
    free(st->need_inputs);
    st->outs = NULL;
    st->n_outs = 0;
    st->need = NULL;
    st->need_inputs = NULL;
    st->n_need_inputs = 0;
}

static bool in_map(const rlx_file_map *fm, const void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)fm->data;
    return fm->data && a >= b && a - b < fm->size;
}

/* Frees an initializer's stored values once its tensor holds them, so
 * that the model's weights are not in memory twice while it imports; bytes
 * read from the mapped file (fm) give their pages back instead. */
static void drop_values(Onnx__TensorProto *tp, const rlx_file_map *fm)
{
    if (!tp->has_raw_data || !tp->raw_data.data)
        return;
    if (fm && in_map(fm, tp->raw_data.data)) {
        if (fm->owned) /* a file this import mapped */
            onnx_release_pages(tp->raw_data.data, tp->raw_data.len);
    } else {
        onnx_pb_allocator.free(onnx_pb_allocator.allocator_data, tp->raw_data.data);
    }
    tp->raw_data.data = NULL;
    tp->raw_data.len = 0;
}

/* The model's graph as an rlx_graph; with a stage, only the window it
 * names (see onnx_stage.h).  With `consume`, m is read once: each
 * initializer's values are freed as they are taken (fm: the mapped file
 * its raw_data may point into, or NULL). */
static rlx_status import_model(Onnx__ModelProto *m, const char *base_dir, const rlx_onnx_options *o, onnx_stage *stage,
                               bool consume, const rlx_file_map *fm, rlx_graph **out)
{
    const Onnx__GraphProto *gp = m->graph;
    if (!gp)
        return rlx_set_error(RLX_ERR_FORMAT, "the model has no graph");
    int opset = model_opset(m);
    char unsup[2048];
    int nunsup = 0;
    onnx_collect_unsupported(gp, opset, unsup, sizeof unsup, &nunsup);
    if (nunsup)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "%d unsupported op type%s: %s", nunsup, nunsup == 1 ? "" : "s",
                             unsup);
    onnx_ctx c;
    memset(&c, 0, sizeof c);
    c.base_dir = base_dir;
    c.opset = opset;
    c.opt = o;
    c.g = rlx_graph_new();
    c.scope = onnx_scope_new(NULL);
    rlx_status st = RLX_OK;
    int *order = NULL;
    name_set only = {0}; /* a one-node window reads just these initializers */
    if (!c.g || !c.scope) {
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    if (stage && (st = topo_sort(gp, &order)) != RLX_OK)
        goto done;
    if (stage && stage->single && stage->first >= 0 && stage->first < (int)gp->n_node) {
        name_list l = {0};
        node_names(gp->node[order[stage->first]], &l);
        for (int j = 0; j < l.n; j++)
            name_set_add(&only, l.v[j]);
        free(l.v);
    }
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp || !tp->name || !*tp->name) {
            st = rlx_set_error(RLX_ERR_FORMAT, "initializer %zu has no name", i);
            goto done;
        }
        if (only.cap && !name_set_has(&only, tp->name))
            continue;
        onnx_tensor *k;
        st = onnx_weight_from_proto(tp, base_dir, consume && fm && fm->owned && in_map(fm, tp->raw_data.data), &k);
        if (st != RLX_OK)
            goto done;
        if (consume)
            drop_values(gp->initializer[i], fm);
        if (is_param_initializer(o, k)) { /* a param once a graph op reads it (onnx_node_of) */
            onnx_value *v = onnx_bind(&c, tp->name, -1, NULL);
            if (!v) {
                onnx_tensor_free(k);
                st = RLX_ERR_OUT_OF_MEMORY;
                goto done;
            }
            v->init = k;
            continue;
        }
        if (!onnx_bind(&c, tp->name, -1, k)) {
            st = RLX_ERR_OUT_OF_MEMORY;
            goto done;
        }
    }
    if (gp->n_sparse_initializer) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "sparse initializers are not supported");
        goto done;
    }
    if (stage) {
        if ((st = add_stage_inputs(&c, gp, stage)) == RLX_OK &&
            (st = run_stage_nodes(&c, gp, order, stage)) == RLX_OK && !stage->need)
            st = stage_outputs(&c, gp, order, stage);
        if (st == RLX_OK && (stage->need || c.g->n_outputs == 0)) {
            rlx_graph_free(c.g); /* nothing to run: constants, values passed on, or a value to bind first */
            c.g = NULL;
        } else if (st == RLX_OK)
            st = rlx_graph_verify(c.g);
        goto done;
    }
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name || !*vi->name) {
            st = rlx_set_error(RLX_ERR_FORMAT, "graph input %zu has no name", i);
            goto done;
        }
        if (onnx_lookup(&c, vi->name))
            continue; /* an initializer (default value) */
        st = add_input(&c, vi);
        if (st != RLX_OK)
            goto done;
    }
    st = onnx_run_nodes(&c, gp);
    if (st != RLX_OK)
        goto done;
    if (!gp->n_output) {
        st = rlx_set_error(RLX_ERR_FORMAT, "the graph has no outputs");
        goto done;
    }
    for (size_t i = 0; i < gp->n_output; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        if (!vi || !vi->name) {
            st = rlx_set_error(RLX_ERR_FORMAT, "graph output %zu has no name", i);
            goto done;
        }
        onnx_value *v = onnx_lookup(&c, vi->name);
        if (!v) {
            st = rlx_set_error(RLX_ERR_FORMAT, "graph output '%s' is not produced by any node", vi->name);
            goto done;
        }
        if ((st = add_output(&c, vi->name, v)) != RLX_OK)
            goto done;
    }
    if (c.g->n_outputs == 0) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "the graph's outputs are all empty sequences or empty optionals");
        goto done;
    }
    st = rlx_graph_verify(c.g);
done:
    free(order);
    free(only.v);
    onnx_scope_free(c.scope);
    if (st != RLX_OK) {
        rlx_graph_free(c.g);
        return st;
    }
    *out = c.g;
    return RLX_OK;
}

static Onnx__ModelProto *unpack_model(const void *data, size_t size)
{
    if (!onnx_pb_depth_ok(data, size, &onnx__model_proto__descriptor)) {
        rlx_set_error(RLX_ERR_FORMAT, "the model nests messages deeper than %d levels", ONNX_MAX_PB_DEPTH);
        return NULL;
    }
    rlx_clear_error();
    return onnx__model_proto__unpack(&onnx_pb_allocator, size, data);
}

/* Points each initializer's emptied raw_data at its bytes in src
 * (onnx_split_weights' slices); false if m does not match them. */
static bool attach_raw(Onnx__ModelProto *m, const rlx_file_map *fm, const onnx_raw_slice *raw, size_t n_raw)
{
    Onnx__GraphProto *gp = m->graph;
    if (gp ? gp->n_initializer != n_raw : n_raw != 0)
        return false;
    for (size_t i = 0; i < n_raw; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (!raw[i].present || !raw[i].len)
            continue;
        if (!tp || !tp->has_raw_data || tp->raw_data.len)
            return false;
        if (tp->raw_data.data)
            onnx_pb_allocator.free(onnx_pb_allocator.allocator_data, tp->raw_data.data);
        tp->raw_data.data = (uint8_t *)fm->data + raw[i].off;
        tp->raw_data.len = raw[i].len;
    }
    return true;
}

/* Undoes attach_raw where drop_values has not, before m is freed. */
static void detach_raw(Onnx__ModelProto *m, const rlx_file_map *fm)
{
    Onnx__GraphProto *gp = m->graph;
    for (size_t i = 0; gp && i < gp->n_initializer; i++) {
        Onnx__TensorProto *tp = gp->initializer[i];
        if (tp && tp->raw_data.data && in_map(fm, tp->raw_data.data)) {
            tp->raw_data.data = NULL;
            tp->raw_data.len = 0;
        }
    }
}

/* The model in src unpacked without its initializers' raw_data, each
 * pointing at its bytes in src instead (protobuf-c would copy them): the
 * weights are not in memory twice while it imports.  NULL, with no error
 * set, when the bytes do not split so: unpack them whole. */
static Onnx__ModelProto *unpack_split(const rlx_file_map *src)
{
    uint8_t *bytes = NULL;
    size_t n = 0, n_raw = 0;
    onnx_raw_slice *raw = NULL;
    if (!onnx_split_weights(src->data, src->size, &bytes, &n, &raw, &n_raw)) {
        rlx_clear_error();
        return NULL;
    }
    Onnx__ModelProto *m = unpack_model(bytes, n);
    free(bytes);
    if (m && !attach_raw(m, src, raw, n_raw)) {
        detach_raw(m, src);
        onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
        m = NULL;
    }
    free(raw);
    rlx_clear_error();
    return m;
}

/* data -> graph (or the window of a stage). */
static rlx_status import_buffer(const void *data, size_t size, const char *base_dir, const rlx_onnx_options *o,
                                onnx_stage *stage, rlx_graph **out)
{
    rlx_file_map src = {.data = data, .size = size}; /* the caller's: read, never released */
    Onnx__ModelProto *m = unpack_split(&src);
    if (!m && !(m = unpack_model(data, size))) {
        if (rlx_last_status_or(RLX_OK) != RLX_OK)
            return rlx_last_status_or(RLX_OK);
        return rlx_set_error(RLX_ERR_FORMAT, "not a valid ONNX model (protobuf decoding failed)");
    }
    rlx_status st = import_model(m, base_dir, o, stage, true, &src, out);
    detach_raw(m, &src);
    onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
    return st;
}

rlx_status rlx_onnx_import_buffer(const void *data, size_t size, const char *base_dir, const rlx_onnx_options *o,
                                  rlx_graph **out)
{
    if (!out || (!data && size))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_import_buffer: NULL argument");
    *out = NULL;
    return import_buffer(data, size, base_dir, o, NULL, out);
}

struct onnx_stage_model {
    Onnx__ModelProto *m;
    char *dir;
};

rlx_status onnx_stage_model_open(const void *data, size_t size, const char *base_dir, onnx_stage_model **out)
{
    *out = NULL;
    onnx_stage_model *sm = rlx_calloc(1, sizeof *sm);
    if (!sm || !(sm->dir = rlx_strdup(base_dir ? base_dir : "."))) {
        free(sm);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    if (!(sm->m = unpack_model(data, size))) {
        onnx_stage_model_close(sm);
        if (rlx_last_status_or(RLX_OK) != RLX_OK)
            return rlx_last_status_or(RLX_OK);
        return rlx_set_error(RLX_ERR_FORMAT, "not a valid ONNX model (protobuf decoding failed)");
    }
    *out = sm;
    return RLX_OK;
}

void onnx_stage_model_close(onnx_stage_model *sm)
{
    if (!sm)
        return;
    if (sm->m)
        onnx__model_proto__free_unpacked(sm->m, &onnx_pb_allocator);
    free(sm->dir);
    free(sm);
}

rlx_status onnx_import_stage(onnx_stage_model *sm, onnx_stage *stage, rlx_graph **out)
{
    if (!out || !stage || !sm)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "onnx_import_stage: NULL argument");
    *out = NULL;
    stage->need = NULL;
    stage->need_inputs = NULL;
    stage->n_need_inputs = 0;
    stage->outs = NULL;
    stage->n_outs = 0;
    rlx_status st = import_model(sm->m, sm->dir, NULL, stage, false, NULL, out);
    if (st != RLX_OK)
        onnx_stage_clear(stage);
    return st;
}

static char *dir_of(const char *path)
{
    const char *s = strrchr(path, '/');
    if (!s)
        return rlx_strdup(".");
    if (s == path)
        return rlx_strdup("/");
    char *d = rlx_malloc((size_t)(s - path) + 1);
    if (!d)
        return NULL;
    memcpy(d, path, (size_t)(s - path));
    d[s - path] = 0;
    return d;
}

static rlx_status load_model(const char *path, Onnx__ModelProto **m, char **dir)
{
    uint8_t *buf;
    size_t n;
    rlx_status st = onnx_read_file(path, ONNX_MAX_MODEL_BYTES, &buf, &n);
    if (st != RLX_OK)
        return st;
    if (n == 0) {
        free(buf);
        return rlx_set_error(RLX_ERR_FORMAT, "'%s' is empty", path);
    }
    rlx_clear_error();
    *m = unpack_model(buf, n);
    free(buf);
    if (!*m) {
        if (rlx_last_status_or(RLX_OK) == RLX_ERR_OUT_OF_MEMORY)
            return RLX_ERR_OUT_OF_MEMORY;
        if (strstr(rlx_last_error(), "nests messages"))
            return rlx_set_error(RLX_ERR_FORMAT, "'%s': %s", path, "the model nests messages too deeply");
        return rlx_set_error(RLX_ERR_FORMAT, "'%s' is not a valid ONNX model (protobuf decoding failed)", path);
    }
    if (dir && !(*dir = dir_of(path))) {
        onnx__model_proto__free_unpacked(*m, &onnx_pb_allocator);
        *m = NULL;
        return RLX_ERR_OUT_OF_MEMORY;
    }
    return RLX_OK;
}

/* load_model, reading the initializers' raw_data from the mapped file
 * (fm, kept until the import is done; unpack_split); the plain load, and
 * its errors, when the file does not split that way. */
static rlx_status load_model_mapped(const char *path, Onnx__ModelProto **m, char **dir, rlx_file_map *fm)
{
    *m = NULL;
    if (rlx_file_map_open(path, "onnx", fm) == RLX_OK && fm->size <= ONNX_MAX_MODEL_BYTES && (*m = unpack_split(fm))) {
        if ((*dir = dir_of(path)))
            return RLX_OK;
        detach_raw(*m, fm);
        onnx__model_proto__free_unpacked(*m, &onnx_pb_allocator);
        *m = NULL;
    }
    rlx_file_map_release(fm);
    rlx_clear_error();
    return load_model(path, m, dir);
}

rlx_status rlx_onnx_import(const char *path, const rlx_onnx_options *o, rlx_graph **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_import: NULL argument");
    *out = NULL;
    Onnx__ModelProto *m;
    char *dir = NULL;
    rlx_file_map fm;
    rlx_status st = load_model_mapped(path, &m, &dir, &fm);
    if (st != RLX_OK)
        return st;
    st = import_model(m, dir, o, NULL, true, &fm, out);
    if (st != RLX_OK) {
        char msg[1500];
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
        rlx_set_error(st, "%s: %s", path, msg);
    }
    detach_raw(m, &fm);
    onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
    rlx_file_map_release(&fm);
    free(dir);
    return st;
}

rlx_status rlx_onnx_load_params(const char *path, rlx_onnx_param_fn fn, void *user)
{
    if (!path || !fn)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_load_params: NULL argument");
    Onnx__ModelProto *m;
    char *dir = NULL;
    rlx_status st = load_model(path, &m, &dir);
    if (st != RLX_OK)
        return st;
    const Onnx__GraphProto *gp = m->graph;
    rlx_onnx_options o = {.initializers_as_params = 1};
    if (!gp)
        st = rlx_set_error(RLX_ERR_FORMAT, "'%s' has no graph", path);
    for (size_t i = 0; st == RLX_OK && i < gp->n_initializer; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        if (!tp || !tp->name || !*tp->name) {
            st = rlx_set_error(RLX_ERR_FORMAT, "'%s': initializer %zu has no name", path, i);
            break;
        }
        onnx_tensor *k;
        st = onnx_tensor_from_proto(tp, dir, &k);
        if (st != RLX_OK) {
            char msg[1000];
            snprintf(msg, sizeof msg, "%s", rlx_last_error());
            st = rlx_set_error(st, "'%s': initializer '%s': %s", path, tp->name, msg);
            break;
        }
        if (is_param_initializer(&o, k))
            st = fn(user, tp->name, k->dtype, k->ndim, k->dims, k->data, k->bytes);
        onnx_tensor_free(k);
    }
    onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
    free(dir);
    return st;
}

/* ------------------------------------------------------------ info */

static void print_value(FILE *f, const Onnx__ValueInfoProto *vi)
{
    int ot, nd;
    const Onnx__TensorShapeProto *sh;
    rlx_onnx_kind kind = value_kind(vi, &ot, &nd, &sh);
    if (kind == RLX_ONNX_OTHER) {
        const char *what = "non-tensor";
        const Onnx__TypeProto *t = vi->type;
        if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE && t->optional_type)
            t = t->optional_type->elem_type;
        if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE)
            what = "sequence (of non-tensors)";
        else if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE)
            what = "map";
        fprintf(f, "  %s: %s\n", vi->name ? vi->name : "?", what);
        return;
    }
    static const char *const prefix[] = {"", "sequence of ", "optional ", "optional sequence of "};
    fprintf(f, "  %s: %s%s ", vi->name ? vi->name : "?", prefix[kind], onnx_type_name(ot));
    if (nd < 0) {
        fprintf(f, "[?]\n");
        return;
    }
    fputc('[', f);
    for (int i = 0; i < nd; i++) {
        const Onnx__TensorShapeProto__Dimension *d = sh->dim[i];
        if (i)
            fputs(", ", f);
        if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
            fprintf(f, "%lld", (long long)d->dim_value);
        else if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
            fprintf(f, "%s", d->dim_param);
        else
            fputc('?', f);
    }
    fputs("]\n", f);
}

static void count_ops(const Onnx__GraphProto *gp, op_seen *seen, int *nseen, int max, int depth)
{
    if (!gp || depth > 32)
        return;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *nd = gp->node[i];
        if (!nd)
            continue;
        char key[64];
        if (nd->domain && *nd->domain && strcmp(nd->domain, "ai.onnx"))
            snprintf(key, sizeof key, "%s.%s", nd->domain, nd->op_type ? nd->op_type : "?");
        else
            snprintf(key, sizeof key, "%s", nd->op_type ? nd->op_type : "?");
        int k;
        for (k = 0; k < *nseen; k++)
            if (!strcmp(seen[k].op, key))
                break;
        if (k == *nseen && *nseen < max) {
            memset(&seen[k], 0, sizeof seen[k]);
            snprintf(seen[k].op, sizeof seen[k].op, "%s", key);
            (*nseen)++;
        }
        if (k < *nseen)
            seen[k].count++;
        for (size_t a = 0; a < nd->n_attribute; a++) {
            const Onnx__AttributeProto *at = nd->attribute[a];
            if (!at)
                continue;
            if (at->g)
                count_ops(at->g, seen, nseen, max, depth + 1);
            for (size_t k2 = 0; k2 < at->n_graphs; k2++)
                count_ops(at->graphs[k2], seen, nseen, max, depth + 1);
        }
    }
}

static int cmp_seen(const void *a, const void *b)
{
    const op_seen *x = a, *y = b;
    if (x->count != y->count)
        return y->count - x->count;
    return strcmp(x->op, y->op);
}

rlx_status rlx_onnx_print_info(const char *path, void *file)
{
    FILE *f = file ? file : stdout;
    if (!path)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_print_info: NULL path");
    Onnx__ModelProto *m;
    rlx_status st = load_model(path, &m, NULL);
    if (st != RLX_OK)
        return st;
    const Onnx__GraphProto *gp = m->graph;
    fprintf(f, "model: %s\n", path);
    fprintf(f, "ir_version: %lld  producer: %s %s\n", (long long)m->ir_version,
            m->producer_name ? m->producer_name : "", m->producer_version ? m->producer_version : "");
    fprintf(f, "opsets:");
    for (size_t i = 0; i < m->n_opset_import; i++)
        if (m->opset_import[i])
            fprintf(f, " %s=%lld",
                    m->opset_import[i]->domain && *m->opset_import[i]->domain ? m->opset_import[i]->domain : "ai.onnx",
                    (long long)m->opset_import[i]->version);
    fputc('\n', f);
    if (!gp) {
        fprintf(f, "(no graph)\n");
        onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
        return RLX_OK;
    }
    size_t ninit = 0;
    int64_t nparams = 0;
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Onnx__TensorProto *t = gp->initializer[i];
        if (!t)
            continue;
        ninit++;
        int64_t n = 1;
        for (size_t d = 0; d < t->n_dims; d++)
            n *= t->dims[d] > 0 ? t->dims[d] : 0;
        nparams += n;
    }
    fprintf(f, "inputs:\n");
    for (size_t i = 0; i < gp->n_input; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi)
            continue;
        bool init = false;
        for (size_t k = 0; k < gp->n_initializer && !init; k++)
            if (gp->initializer[k] && gp->initializer[k]->name && vi->name &&
                !strcmp(gp->initializer[k]->name, vi->name))
                init = true;
        if (!init)
            print_value(f, vi);
    }
    fprintf(f, "outputs:\n");
    for (size_t i = 0; i < gp->n_output; i++)
        if (gp->output[i])
            print_value(f, gp->output[i]);
    fprintf(f, "initializers: %zu (%lld elements)\n", ninit, (long long)nparams);
    op_seen seen[256];
    int nseen = 0;
    count_ops(gp, seen, &nseen, 256, 0);
    qsort(seen, (size_t)nseen, sizeof seen[0], cmp_seen);
    long total = 0;
    for (int i = 0; i < nseen; i++)
        total += seen[i].count;
    fprintf(f, "nodes: %zu at the top level, %ld with subgraphs; op types: %d\n", gp->n_node, total, nseen);
    for (int i = 0; i < nseen; i++) {
        fprintf(f, "  %-28s %d%s\n", seen[i].op, seen[i].count, onnx_find_op(seen[i].op) ? "" : "   (unsupported)");
    }
    onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
    return RLX_OK;
}

/* x (name set) described from its declared type. */
static void describe(const Onnx__ValueInfoProto *vi, rlx_onnx_input *x)
{
    int ot, nd;
    const Onnx__TensorShapeProto *sh;
    x->ndim = -1;
    x->kind = value_kind(vi, &ot, &nd, &sh);
    if (x->kind == RLX_ONNX_OTHER)
        return;
    x->is_tensor = x->kind == RLX_ONNX_TENSOR;
    x->onnx_type = ot;
    if (ot == ONNX__TENSOR_PROTO__DATA_TYPE__STRING)
        x->dtype = RLX_STRING;
    else if (!onnx_dtype_from_onnx(ot, &x->dtype))
        x->dtype = RLX_DTYPE_COUNT;
    if (nd >= 0 && nd <= RLX_MAX_DIMS) {
        x->ndim = nd;
        for (int d = 0; d < nd; d++) {
            x->dims[d] = sh->dim[d] && sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                             ? sh->dim[d]->dim_value
                             : -1;
            if (sh->dim[d] && sh->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                sh->dim[d]->dim_param && *sh->dim[d]->dim_param)
                x->dim_names[d] = strdup(sh->dim[d]->dim_param); /* NULL on no memory: unnamed */
        }
    }
}

/* The model at path, which must hold a graph (freed here when it does not). */
static rlx_status load_graph(const char *path, Onnx__ModelProto **m)
{
    rlx_status st = load_model(path, m, NULL);
    if (st != RLX_OK)
        return st;
    if (!(*m)->graph) {
        onnx__model_proto__free_unpacked(*m, &onnx_pb_allocator);
        return rlx_set_error(RLX_ERR_FORMAT, "'%s' has no graph", path);
    }
    return RLX_OK;
}

rlx_status rlx_onnx_inputs(const char *path, rlx_onnx_input **inputs, int *n_inputs, char ***outputs, int *n_outputs)
{
    if (!path || !inputs || !n_inputs)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_inputs: NULL argument");
    *inputs = NULL;
    *n_inputs = 0;
    if (outputs)
        *outputs = NULL;
    if (n_outputs)
        *n_outputs = 0;
    Onnx__ModelProto *m;
    rlx_status st = load_graph(path, &m);
    if (st != RLX_OK)
        return st;
    const Onnx__GraphProto *gp = m->graph;
    rlx_onnx_input *in = rlx_calloc(gp->n_input + 1, sizeof *in);
    char **outs = rlx_calloc(gp->n_output + 1, sizeof *outs);
    int k = 0;
    for (size_t i = 0; i < gp->n_input && in; i++) {
        const Onnx__ValueInfoProto *vi = gp->input[i];
        if (!vi || !vi->name)
            continue;
        bool init = false;
        for (size_t j = 0; j < gp->n_initializer && !init; j++)
            if (gp->initializer[j] && gp->initializer[j]->name && !strcmp(gp->initializer[j]->name, vi->name))
                init = true;
        if (init)
            continue;
        rlx_onnx_input *x = &in[k++];
        x->name = rlx_strdup(vi->name);
        describe(vi, x);
    }
    int no = 0;
    for (size_t i = 0; i < gp->n_output && outs; i++)
        outs[no++] = rlx_strdup(gp->output[i] && gp->output[i]->name ? gp->output[i]->name : "");
    onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
    if (!in || !outs) {
        rlx_onnx_inputs_free(in, k, outs, no);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    }
    *inputs = in;
    *n_inputs = k;
    if (outputs)
        *outputs = outs;
    else
        rlx_onnx_inputs_free(NULL, 0, outs, no);
    if (n_outputs)
        *n_outputs = no;
    return RLX_OK;
}

rlx_status rlx_onnx_outputs(const char *path, rlx_onnx_input **outputs, int *n_outputs)
{
    if (!path || !outputs || !n_outputs)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_outputs: NULL argument");
    *outputs = NULL;
    *n_outputs = 0;
    Onnx__ModelProto *m;
    rlx_status st = load_graph(path, &m);
    if (st != RLX_OK)
        return st;
    const Onnx__GraphProto *gp = m->graph;
    rlx_onnx_input *out = rlx_calloc(gp->n_output + 1, sizeof *out);
    int k = 0;
    for (size_t i = 0; i < gp->n_output && out; i++) {
        const Onnx__ValueInfoProto *vi = gp->output[i];
        rlx_onnx_input *x = &out[k++];
        x->name = rlx_strdup(vi && vi->name ? vi->name : "");
        if (vi)
            describe(vi, x);
        else
            x->kind = RLX_ONNX_OTHER;
    }
    onnx__model_proto__free_unpacked(m, &onnx_pb_allocator);
    if (!out)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    *outputs = out;
    *n_outputs = k;
    return RLX_OK;
}

void rlx_onnx_inputs_free(rlx_onnx_input *inputs, int n_inputs, char **outputs, int n_outputs)
{
    for (int i = 0; inputs && i < n_inputs; i++) {
        free(inputs[i].name);
        for (int d = 0; d < RLX_MAX_DIMS; d++)
            free(inputs[i].dim_names[d]);
    }
    free(inputs);
    for (int i = 0; outputs && i < n_outputs; i++)
        free(outputs[i]);
    free(outputs);
}
