/* onnx_control.c - If, Loop, Scan and SequenceMap.  Subgraphs run in a
 * child scope that sees the enclosing names.  If with a condition known at
 * import inlines one branch; otherwise both branches are built and each
 * output selected with Where (sequences element by element, when both
 * branches give the same lengths and shapes).  Loop and Scan are
 * unrolled: the trip count must be known at import, and a Loop's condition
 * must fold on every iteration.  SequenceMap runs its body once per
 * element (sequences are lists made at import, onnx_sequence.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"

#define G (n->c->g)
#define ONNX_MAX_UNROLL 4096

static const Onnx__GraphProto *graph_attr(onnx_node *n, const char *name)
{
    const Onnx__AttributeProto *a = onnx_attr(n, name);
    return a ? a->g : NULL;
}

static void init_res(onnx_value *r, int n)
{
    memset(r, 0, sizeof *r * (size_t)n);
    for (int i = 0; i < n; i++)
        r[i].node = -1;
}

static void free_res(onnx_value *r, int n)
{
    for (int i = 0; i < n; i++)
        onnx_value_clear(&r[i]);
}

/* Runs gp in a child scope with its inputs bound to copies of `args` (by
 * position).  Fills res[0..n_output) (left empty by the caller) with copies
 * of the subgraph's outputs. */
static rlx_status run_sub(onnx_node *n, const Onnx__GraphProto *gp, onnx_value *const *args, int nargs, onnx_value *res,
                          int nres)
{
    onnx_ctx *c = n->c;
    if (c->depth > 16)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "subgraphs nested too deep");
    if ((int)gp->n_output != nres)
        return onnx_fail(n, RLX_ERR_FORMAT, "subgraph has %zu outputs, %d expected", gp->n_output, nres);
    onnx_scope *child = onnx_scope_new(c->scope);
    if (!child)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    c->scope = child;
    c->depth++;
    rlx_status st = RLX_OK;
    for (size_t i = 0; i < gp->n_initializer && st == RLX_OK; i++) {
        const Onnx__TensorProto *tp = gp->initializer[i];
        onnx_tensor *k;
        if (!tp || !tp->name)
            st = onnx_fail(n, RLX_ERR_FORMAT, "subgraph initializer without a name");
        else if ((st = onnx_weight_from_proto(tp, c->base_dir, false, &k)) == RLX_OK && !onnx_bind(c, tp->name, -1, k))
            st = RLX_ERR_OUT_OF_MEMORY;
    }
    for (int i = 0; i < nargs && st == RLX_OK; i++) {
        if (i >= (int)gp->n_input || !gp->input[i] || !gp->input[i]->name)
            break;
        onnx_value *a = args[i], copy = {.node = -1};
        if (!a)
            continue;
        if ((st = onnx_value_copy(c, &copy, a)) != RLX_OK)
            st = onnx_fail(n, st, "subgraph input %d: %s", i, rlx_last_error());
        else if (!onnx_bind_move(c, gp->input[i]->name, &copy))
            st = RLX_ERR_OUT_OF_MEMORY;
    }
    if (st == RLX_OK)
        st = onnx_run_nodes(c, gp);
    for (int i = 0; i < nres && st == RLX_OK; i++) {
        const char *nm = gp->output[i] ? gp->output[i]->name : NULL;
        onnx_value *v = nm ? onnx_lookup(c, nm) : NULL;
        if (!v) {
            st = onnx_fail(n, RLX_ERR_FORMAT, "subgraph output '%s' is not produced", nm ? nm : "?");
            break;
        }
        if ((st = onnx_value_copy(c, &res[i], v)) != RLX_OK)
            st = onnx_fail(n, st, "subgraph output '%s': %s", nm, rlx_last_error());
    }
    c->depth--;
    c->scope = child->parent;
    onnx_scope_free(child);
    return st;
}

static rlx_status set_out(onnx_node *n, int i, onnx_value *r) { return onnx_out_value(n, i, r); }

/* The node of a tensor result (-1 for a sequence or an empty optional). */
static rlx_node res_node(onnx_node *n, onnx_value *r) { return onnx_node_of(n->c, r); }

static rlx_status need_tensor_res(onnx_node *n, onnx_value *r, const char *what, int i)
{
    if (r->kind == ONNX_KIND_TENSOR)
        return RLX_OK;
    return onnx_fail(n, RLX_ERR_UNSUPPORTED, "%s %d is %s; it must be a tensor", what, i, onnx_kind_name(r));
}

/* *r = cond ? a : b, a tensor at a time: RLX_ERR_UNSUPPORTED (no message
 * set) when a and b differ in kind, length, shape or dtype. */
static rlx_status select_value(onnx_node *n, rlx_node cond, onnx_value *a, onnx_value *b, onnx_value *r)
{
    if (a->kind != b->kind)
        return RLX_ERR_UNSUPPORTED;
    if (a->kind == ONNX_KIND_NONE) {
        onnx_value_clear(r);
        r->kind = ONNX_KIND_NONE;
        return RLX_OK;
    }
    if (a->kind == ONNX_KIND_SEQUENCE) {
        if (a->n_elems != b->n_elems || a->elem_dtype != b->elem_dtype)
            return RLX_ERR_UNSUPPORTED;
        onnx_value seq = {.node = -1};
        onnx_seq_init(&seq, a->elem_dtype);
        rlx_status st = RLX_OK;
        for (int i = 0; i < a->n_elems && st == RLX_OK; i++) {
            onnx_value e = {.node = -1};
            st = select_value(n, cond, &a->elems[i], &b->elems[i], &e);
            if (st == RLX_OK)
                st = onnx_seq_push(n->c, &seq, &e);
            onnx_value_clear(&e);
        }
        if (st != RLX_OK) {
            onnx_value_clear(&seq);
            return st;
        }
        onnx_value_clear(r);
        *r = seq;
        return RLX_OK;
    }
    int xr, yr;
    int64_t xd[RLX_MAX_DIMS], yd[RLX_MAX_DIMS];
    onnx_value_shape(n->c, a, &xr, xd);
    onnx_value_shape(n->c, b, &yr, yd);
    if (xr != yr || memcmp(xd, yd, sizeof xd[0] * (size_t)xr) || onnx_value_dtype(n->c, a) != onnx_value_dtype(n->c, b))
        return RLX_ERR_UNSUPPORTED;
    rlx_node y = rlx_where(G, cond, res_node(n, a), res_node(n, b));
    if (y < 0)
        return onnx_out_node(n, 0, -1); /* the builder's failure, naming the node */
    onnx_value_clear(r);
    r->node = y;
    return RLX_OK;
}

static rlx_status h_if(onnx_node *n)
{
    const Onnx__GraphProto *tg = graph_attr(n, "then_branch"), *eg = graph_attr(n, "else_branch");
    if (!tg || !eg)
        return onnx_fail(n, RLX_ERR_FORMAT, "If needs then_branch and else_branch");
    if (n->in[0]->kind != ONNX_KIND_TENSOR)
        return onnx_fail(n, RLX_ERR_FORMAT, "the condition is %s", onnx_kind_name(n->in[0]));
    int no = n->n_out;
    /* a merged decoder's If gives every layer's cache (moonshine: 33 outputs) */
    onnx_value *a = rlx_calloc((size_t)no + 1, sizeof *a), *b = rlx_calloc((size_t)no + 1, sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    }
    init_res(a, no);
    init_res(b, no);
    rlx_status st;
    if (n->in[0]->k) {
        bool cond = n->in[0]->k->numel > 0 && onnx_get_i(n->in[0]->k, 0) != 0;
        st = run_sub(n, cond ? tg : eg, NULL, 0, a, no);
        for (int i = 0; i < no && st == RLX_OK; i++)
            st = set_out(n, i, &a[i]);
        free_res(a, no);
        free(a);
        free(b);
        return st;
    }
    /* Both branches are built on the same inputs, but the one not taken may
     * not fit them (Silero VAD's 8 kHz branch on a 16 kHz frame gives its
     * LSTM a rank-4 input); its failure asks for the condition's value. */
    st = run_sub(n, tg, NULL, 0, a, no);
    if (st == RLX_OK)
        st = run_sub(n, eg, NULL, 0, b, no);
    if (st != RLX_OK && st != RLX_ERR_OUT_OF_MEMORY) {
        char why[600];
        snprintf(why, sizeof why, "%s", rlx_last_error());
        free_res(a, no);
        free_res(b, no);
        free(a);
        free(b);
        onnx_note_need(n, 0);
        return onnx_fail(n, RLX_ERR_UNSUPPORTED,
                         "the condition must be known at import time (bind it by value): with it unknown, both "
                         "branches are built and one fails: %s",
                         why);
    }
    rlx_node cond = st == RLX_OK ? rlx_reshape(G, onnx_in(n, 0), 0, NULL) : -1;
    for (int i = 0; i < no && st == RLX_OK; i++) {
        onnx_value r = {.node = -1};
        st = select_value(n, cond, &a[i], &b[i], &r);
        if (st == RLX_ERR_UNSUPPORTED)
            st = onnx_fail(n, RLX_ERR_UNSUPPORTED,
                           "branches give output %d different kinds, lengths or shapes, so the condition must be known "
                           "at import time (bind it by value)",
                           i);
        else if (st == RLX_OK)
            st = set_out(n, i, &r);
        onnx_value_clear(&r);
    }
    free_res(a, no);
    free_res(b, no);
    free(a);
    free(b);
    return st;
}

/* Stacks per-iteration values along a new axis 0. */
static rlx_node stack(onnx_node *n, rlx_node *xs, int cnt, int axis)
{
    int64_t d[RLX_MAX_DIMS];
    int r = onnx_shape(n, xs[0], d);
    int64_t u[RLX_MAX_DIMS];
    int k = 0;
    for (int i = 0; i <= r; i++)
        u[i] = i == axis ? 1 : d[k++];
    for (int i = 0; i < cnt; i++)
        xs[i] = rlx_reshape(G, xs[i], r + 1, u);
    return rlx_concat(G, cnt, xs, axis);
}

static onnx_value *temp_value(onnx_value *store, rlx_node node, onnx_tensor *k)
{
    memset(store, 0, sizeof *store);
    store->node = node;
    store->k = k;
    return store;
}

static rlx_status h_loop(onnx_node *n)
{
    const Onnx__GraphProto *body = graph_attr(n, "body");
    if (!body)
        return onnx_fail(n, RLX_ERR_FORMAT, "Loop without a body");
    for (int i = 0; i < 2 && i < n->n_in; i++)
        if (n->in[i] && n->in[i]->kind != ONNX_KIND_TENSOR)
            return onnx_fail(n, RLX_ERR_FORMAT, "input %d (%s) is %s", i, i ? "cond" : "trip count M",
                             onnx_kind_name(n->in[i]));
    int64_t M = -1;
    if (n->n_in > 0 && n->in[0]) {
        if (!n->in[0]->k)
            return onnx_need_const(n, 0, "trip count M");
        if (n->in[0]->k->numel != 1)
            return onnx_fail(n, RLX_ERR_SHAPE, "trip count must have one element");
        M = onnx_get_i(n->in[0]->k, 0);
    }
    int cond_known = 1, cond = 1;
    /* A condition only known at run time (input or body output) is carried
     * as a bool node: once false, later iterations leave the state alone.
     * That needs a known trip count and no scan outputs. */
    rlx_node active = -1;
    if (n->n_in > 1 && n->in[1] && !n->in[1]->k && M >= 0 &&
        (int)graph_attr(n, "body")->n_output - 1 - (n->n_in - 2) == 0) {
        active = rlx_reshape(G, onnx_in(n, 1), 0, NULL);
    } else if (n->n_in > 1 && n->in[1]) {
        if (!n->in[1]->k)
            cond_known = 0;
        else if (n->in[1]->k->numel != 1)
            return onnx_fail(n, RLX_ERR_SHAPE, "cond must have one element");
        else
            cond = onnx_get_i(n->in[1]->k, 0) != 0;
    }
    if (!cond_known)
        return onnx_need_const(n, 1, "cond");
    if (M < 0 && !cond_known)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "Loop without a trip count");
    int nv = n->n_in - 2;
    if (nv < 0)
        nv = 0;
    int nbody_out = (int)body->n_output;
    int nscan = nbody_out - 1 - nv;
    if (nscan < 0 || nv > 14 || nscan > 14)
        return onnx_fail(n, RLX_ERR_FORMAT, "body outputs do not fit the loop");
    onnx_value cur[16];
    init_res(cur, 16);
    rlx_status st = RLX_OK;
    for (int i = 0; i < nv && st == RLX_OK; i++) {
        if (!n->in[2 + i])
            st = onnx_fail(n, RLX_ERR_FORMAT, "loop-carried input %d missing", i);
        else if ((st = onnx_value_copy(n->c, &cur[i], n->in[2 + i])) != RLX_OK)
            st = onnx_fail(n, st, "loop-carried input %d: %s", i, rlx_last_error());
    }
    rlx_node *scans[14] = {0};
    int64_t it = 0;
    int64_t limit = M >= 0 ? M : ONNX_MAX_UNROLL + 1;
    for (; it < limit && cond && st == RLX_OK; it++) {
        if (it >= ONNX_MAX_UNROLL) {
            st = onnx_fail(n, RLX_ERR_UNSUPPORTED, "more than %d iterations to unroll", ONNX_MAX_UNROLL);
            break;
        }
        onnx_value store[2], *args[16];
        onnx_tensor *itk = onnx_tensor_derived(RLX_I64, 0, NULL), *ck = onnx_tensor_derived(RLX_BOOL, 0, NULL);
        if (!itk || !ck) {
            onnx_tensor_free(itk);
            onnx_tensor_free(ck);
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
            break;
        }
        *(int64_t *)itk->data = it;
        *(uint8_t *)ck->data = 1;
        args[0] = temp_value(&store[0], -1, itk);
        args[1] = active >= 0 ? temp_value(&store[1], active, NULL) : temp_value(&store[1], -1, ck);
        for (int i = 0; i < nv; i++)
            args[2 + i] = &cur[i];
        onnx_value out[32];
        init_res(out, 32);
        st = run_sub(n, body, args, 2 + nv, out, nbody_out);
        onnx_tensor_free(itk);
        onnx_tensor_free(ck);
        for (int i = 0; i < nbody_out && st == RLX_OK; i++)
            if (i == 0 || i > nv)
                st = need_tensor_res(n, &out[i], i ? "scan output" : "body output", i ? i - 1 - nv : 0);
        if (st != RLX_OK) {
            free_res(out, nbody_out);
            break;
        }
        if (!out[0].k && (M < 0 || nscan > 0)) {
            free_res(out, nbody_out);
            st = onnx_fail(
                n, RLX_ERR_UNSUPPORTED,
                "the loop condition depends on run-time values (supported with a known trip count and no scan "
                "outputs)");
            break;
        }
        rlx_node was_active = active;
        if (!out[0].k) {
            rlx_node c = rlx_reshape(G, rlx_cast(G, res_node(n, &out[0]), RLX_BOOL), 0, NULL);
            active = active >= 0 ? rlx_and(G, active, c) : c;
        } else {
            cond = out[0].k->numel == 1 && onnx_get_i(out[0].k, 0) != 0;
        }
        for (int i = 0; i < nv && was_active >= 0 && st == RLX_OK; i++) {
            /* this iteration counts only where the loop was still running */
            onnx_value r = {.node = -1};
            st = select_value(n, was_active, &out[1 + i], &cur[i], &r);
            if (st == RLX_ERR_UNSUPPORTED)
                st = onnx_fail(n, RLX_ERR_UNSUPPORTED,
                               "loop-carried value %d changes kind, length or shape, so the loop condition must be "
                               "known at import time (bind it by value)",
                               i);
            else if (st == RLX_OK) {
                onnx_value_clear(&out[1 + i]);
                out[1 + i] = r;
                r.elems = NULL; /* moved */
                r.n_elems = 0;
            }
        }
        if (st != RLX_OK) {
            free_res(out, nbody_out);
            break;
        }
        free_res(cur, nv);
        for (int i = 0; i < nv; i++) {
            cur[i] = out[1 + i];
            init_res(&out[1 + i], 1);
        }
        for (int i = 0; i < nscan; i++) {
            rlx_node *nv2 = rlx_realloc(scans[i], sizeof(rlx_node) * (size_t)(it + 1));
            if (!nv2) {
                st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
                break;
            }
            scans[i] = nv2;
            scans[i][it] = res_node(n, &out[1 + nv + i]);
        }
        free_res(out, nbody_out);
    }
    for (int i = 0; i < nv && st == RLX_OK; i++)
        st = set_out(n, i, &cur[i]);
    for (int i = 0; i < nscan && st == RLX_OK; i++) {
        if (it == 0)
            st = onnx_fail(n, RLX_ERR_UNSUPPORTED, "zero iterations with scan outputs");
        else
            st = onnx_out_node(n, nv + i, stack(n, scans[i], (int)it, 0));
    }
    free_res(cur, nv);
    for (int i = 0; i < nscan; i++)
        free(scans[i]);
    return st;
}

static rlx_node take(onnx_node *n, rlx_node x, int axis, int64_t i)
{
    int64_t d[RLX_MAX_DIMS], q[RLX_MAX_DIMS];
    int r = onnx_shape(n, x, d), k = 0;
    int64_t s = i, e = i + 1;
    rlx_node sl = rlx_slice(G, x, 1, &axis, &s, &e, NULL);
    for (int j = 0; j < r; j++)
        if (j != axis)
            q[k++] = d[j];
    return rlx_reshape(G, sl, r - 1, q);
}

/* Scan-8: batch axis 0 on every input, scan axis 1 on scan inputs,
 * optional sequence_lens first (all equal to the length only). */
static rlx_status scan8(onnx_node *n, const Onnx__GraphProto *body)
{
    int nsi = (int)onnx_attr_i(n, "num_scan_inputs", 0);
    int first = 1; /* input 0: sequence_lens */
    int nst = n->n_in - first - nsi;
    if (nsi < 1 || nst < 0 || nst > 14 || nsi > 14)
        return onnx_fail(n, RLX_ERR_FORMAT, "bad num_scan_inputs");
    int nso = (int)body->n_output - nst;
    if (nso < 0 || nso > 14)
        return onnx_fail(n, RLX_ERR_FORMAT, "body outputs do not fit");
    int64_t dirs[16] = {0};
    onnx_attr_ints(n, "directions", dirs, 16);
    int64_t d0[RLX_MAX_DIMS];
    if (!n->in[first + nst])
        return onnx_fail(n, RLX_ERR_FORMAT, "scan input missing");
    int r0 = onnx_in_shape(n, first + nst, d0);
    if (r0 < 2)
        return onnx_fail(n, RLX_ERR_SHAPE, "scan inputs need [batch, sequence, ...]");
    int64_t B = d0[0], L = d0[1];
    if (B < 1 || L < 1 || B * L > ONNX_MAX_UNROLL)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "scan of %lld x %lld steps", (long long)B, (long long)L);
    if (n->in[0]) {
        const onnx_tensor *k = n->in[0]->k;
        if (!k)
            return onnx_need_const(n, 0, "sequence_lens");
        for (int64_t i = 0; i < k->numel; i++)
            if (onnx_get_i(k, i) != L)
                return onnx_fail(n, RLX_ERR_UNSUPPORTED, "sequence_lens shorter than the sequence");
    }
    for (int i = 0; i < nst + nsi; i++)
        if (!n->in[first + i])
            return onnx_fail(n, RLX_ERR_FORMAT, "input %d missing", first + i);
    rlx_node fin[14][64], outs[14][64];
    if (B > 64)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "batch above 64");
    rlx_status st = RLX_OK;
    rlx_node *steps[14] = {0};
    for (int i = 0; i < nso && st == RLX_OK; i++)
        if (!(steps[i] = rlx_calloc((size_t)L, sizeof(rlx_node))))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t b = 0; b < B && st == RLX_OK; b++) {
        onnx_value cur[16];
        init_res(cur, 16);
        for (int i = 0; i < nst; i++)
            cur[i].node = take(n, onnx_in(n, first + i), 0, b);
        for (int64_t t = 0; t < L && st == RLX_OK; t++) {
            onnx_value store[32], *args[32];
            for (int i = 0; i < nst; i++)
                args[i] = &cur[i];
            for (int i = 0; i < nsi; i++) {
                rlx_node xb = take(n, onnx_in(n, first + nst + i), 0, b);
                args[nst + i] = temp_value(&store[nst + i], take(n, xb, 0, dirs[i] ? L - 1 - t : t), NULL);
            }
            onnx_value out[32];
            init_res(out, 32);
            st = run_sub(n, body, args, nst + nsi, out, nst + nso);
            for (int i = 0; i < nst + nso && st == RLX_OK; i++)
                st = need_tensor_res(n, &out[i], "body output", i);
            if (st == RLX_OK) {
                free_res(cur, nst);
                for (int i = 0; i < nst; i++) {
                    cur[i] = out[i];
                    init_res(&out[i], 1);
                    res_node(n, &cur[i]);
                }
                for (int i = 0; i < nso; i++)
                    steps[i][t] = res_node(n, &out[nst + i]);
            }
            free_res(out, nst + nso);
        }
        for (int i = 0; i < nst && st == RLX_OK; i++)
            fin[i][b] = res_node(n, &cur[i]);
        for (int i = 0; i < nso && st == RLX_OK; i++)
            outs[i][b] = stack(n, steps[i], (int)L, 0);
        free_res(cur, nst);
    }
    for (int i = 0; i < nst && st == RLX_OK; i++)
        st = onnx_out_node(n, i, stack(n, fin[i], (int)B, 0));
    for (int i = 0; i < nso && st == RLX_OK; i++)
        st = onnx_out_node(n, nst + i, stack(n, outs[i], (int)B, 0));
    for (int i = 0; i < nso; i++)
        free(steps[i]);
    return st;
}

static rlx_status h_scan(onnx_node *n)
{
    const Onnx__GraphProto *body = graph_attr(n, "body");
    if (!body)
        return onnx_fail(n, RLX_ERR_FORMAT, "Scan without a body");
    if (n->opset < 9)
        return scan8(n, body);
    int nsi = (int)onnx_attr_i(n, "num_scan_inputs", 0);
    int nst = n->n_in - nsi;
    if (nsi < 1 || nst < 0 || nst > 14 || nsi > 14)
        return onnx_fail(n, RLX_ERR_FORMAT, "bad num_scan_inputs");
    int nso = (int)body->n_output - nst;
    if (nso < 0 || nso > 14)
        return onnx_fail(n, RLX_ERR_FORMAT, "body outputs do not fit");
    for (int i = 0; i < n->n_in; i++)
        if (!n->in[i])
            return onnx_fail(n, RLX_ERR_FORMAT, "input %d missing", i);
    int64_t in_axes[16] = {0}, in_dirs[16] = {0}, out_axes[16] = {0}, out_dirs[16] = {0};
    onnx_attr_ints(n, "scan_input_axes", in_axes, 16);
    onnx_attr_ints(n, "scan_input_directions", in_dirs, 16);
    onnx_attr_ints(n, "scan_output_axes", out_axes, 16);
    onnx_attr_ints(n, "scan_output_directions", out_dirs, 16);
    int64_t L = -1;
    int axes[16];
    for (int i = 0; i < nsi; i++) {
        int64_t d[RLX_MAX_DIMS];
        int r = onnx_in_shape(n, nst + i, d);
        axes[i] = onnx_norm_axis(in_axes[i], r);
        if (axes[i] < 0 || axes[i] >= r)
            return onnx_fail(n, RLX_ERR_SHAPE, "scan axis");
        if (L >= 0 && d[axes[i]] != L)
            return onnx_fail(n, RLX_ERR_SHAPE, "scan inputs differ in length");
        L = d[axes[i]];
    }
    if (L < 1 || L > ONNX_MAX_UNROLL)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "scan length %lld", (long long)L);
    onnx_value cur[16];
    init_res(cur, 16);
    rlx_status st = RLX_OK;
    for (int i = 0; i < nst && st == RLX_OK; i++)
        if ((st = onnx_value_copy(n->c, &cur[i], n->in[i])) != RLX_OK)
            st = onnx_fail(n, st, "state input %d: %s", i, rlx_last_error());
    rlx_node *outs[14] = {0};
    for (int i = 0; i < nso && st == RLX_OK; i++)
        if (!(outs[i] = rlx_calloc((size_t)L, sizeof(rlx_node))))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t t = 0; t < L && st == RLX_OK; t++) {
        onnx_value store[32], *args[32];
        for (int i = 0; i < nst; i++)
            args[i] = &cur[i];
        for (int i = 0; i < nsi; i++) {
            int64_t d[RLX_MAX_DIMS];
            rlx_node x = onnx_in(n, nst + i);
            int r = onnx_shape(n, x, d);
            int64_t s = in_dirs[i] ? L - 1 - t : t, e = s + 1;
            rlx_node sl = rlx_slice(G, x, 1, &axes[i], &s, &e, NULL);
            int64_t q[RLX_MAX_DIMS];
            int k = 0;
            for (int j = 0; j < r; j++)
                if (j != axes[i])
                    q[k++] = d[j];
            args[nst + i] = temp_value(&store[nst + i], rlx_reshape(G, sl, r - 1, q), NULL);
        }
        onnx_value out[32];
        init_res(out, 32);
        st = run_sub(n, body, args, nst + nsi, out, nst + nso);
        for (int i = 0; i < nst + nso && st == RLX_OK; i++)
            st = need_tensor_res(n, &out[i], "body output", i);
        if (st != RLX_OK) {
            free_res(out, nst + nso);
            break;
        }
        free_res(cur, nst);
        for (int i = 0; i < nst; i++) {
            cur[i] = out[i];
            init_res(&out[i], 1);
        }
        for (int i = 0; i < nso; i++)
            outs[i][out_dirs[i] ? L - 1 - t : t] = res_node(n, &out[nst + i]);
        free_res(out, nst + nso);
    }
    for (int i = 0; i < nst && st == RLX_OK; i++)
        st = set_out(n, i, &cur[i]);
    for (int i = 0; i < nso && st == RLX_OK; i++) {
        int64_t d[RLX_MAX_DIMS];
        int r = onnx_shape(n, outs[i][0], d);
        int ax = onnx_norm_axis(out_axes[i], r + 1);
        st = onnx_out_node(n, nst + i, stack(n, outs[i], (int)L, ax));
    }
    free_res(cur, nst);
    for (int i = 0; i < nso; i++)
        free(outs[i]);
    return st;
}

/* The element type a subgraph declares for output i (its elements', when
 * it is a sequence); F32 when it declares none. */
static rlx_dtype declared_dtype(const Onnx__GraphProto *gp, int i)
{
    const Onnx__TypeProto *t = i < (int)gp->n_output && gp->output[i] ? gp->output[i]->type : NULL;
    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE && t->sequence_type)
        t = t->sequence_type->elem_type;
    rlx_dtype d;
    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type && t->tensor_type->has_elem_type &&
        onnx_dtype_from_onnx(t->tensor_type->elem_type, &d))
        return d;
    return RLX_F32;
}

/* SequenceMap: the body once per position of the input sequences (all of
 * one length), other inputs passed whole; output j collects the body's
 * output j. */
static rlx_status h_sequence_map(onnx_node *n)
{
    const Onnx__GraphProto *body = graph_attr(n, "body");
    if (!body)
        return onnx_fail(n, RLX_ERR_FORMAT, "SequenceMap without a body");
    if (n->in[0]->kind != ONNX_KIND_SEQUENCE)
        return onnx_fail(n, RLX_ERR_FORMAT, "input 0 is %s, not a sequence", onnx_kind_name(n->in[0]));
    int len = n->in[0]->n_elems, no = n->n_out;
    if ((int)body->n_input != n->n_in)
        return onnx_fail(n, RLX_ERR_FORMAT, "the body takes %zu inputs, the node has %d", body->n_input, n->n_in);
    if (no < 1 || no > 16 || (int)body->n_output != no)
        return onnx_fail(n, RLX_ERR_FORMAT, "the body has %zu outputs, the node %d", body->n_output, no);
    for (int i = 0; i < n->n_in; i++) {
        if (!n->in[i])
            return onnx_fail(n, RLX_ERR_FORMAT, "input %d is missing", i);
        if (n->in[i]->kind == ONNX_KIND_NONE)
            return onnx_fail(n, RLX_ERR_FORMAT, "input %d is an empty optional", i);
        if (n->in[i]->kind == ONNX_KIND_SEQUENCE && n->in[i]->n_elems != len)
            return onnx_fail(n, RLX_ERR_SHAPE, "input %d has %d elements, input 0 has %d", i, n->in[i]->n_elems, len);
    }
    onnx_value res[16];
    init_res(res, 16);
    for (int j = 0; j < no; j++)
        onnx_seq_init(&res[j], declared_dtype(body, j));
    rlx_status st = RLX_OK;
    for (int t = 0; t < len && st == RLX_OK; t++) {
        onnx_value *args[64], out[16];
        for (int i = 0; i < n->n_in; i++)
            args[i] = n->in[i]->kind == ONNX_KIND_SEQUENCE ? &n->in[i]->elems[t] : n->in[i];
        init_res(out, no);
        st = run_sub(n, body, args, n->n_in, out, no);
        for (int j = 0; j < no && st == RLX_OK; j++) {
            if ((st = need_tensor_res(n, &out[j], "body output", j)) != RLX_OK)
                break;
            if (t == 0)
                res[j].elem_dtype = onnx_value_dtype(n->c, &out[j]);
            if ((st = onnx_seq_push(n->c, &res[j], &out[j])) != RLX_OK)
                st = onnx_fail(n, st, "output %d: %s", j, rlx_last_error());
        }
        free_res(out, no);
    }
    for (int j = 0; j < no && st == RLX_OK; j++)
        st = set_out(n, j, &res[j]);
    free_res(res, no);
    return st;
}

const onnx_op onnx_control_ops[] = {
    ONNX_OP_ANY("If", h_if, 1),
    ONNX_OP_ANY("Loop", h_loop, 0),
    ONNX_OP("Scan", h_scan, 0),
    ONNX_OP_ANY("SequenceMap", h_sequence_map, 1),
    ONNX_OP_END,
};
