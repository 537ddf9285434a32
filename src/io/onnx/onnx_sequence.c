/* onnx_sequence.c - sequence and optional ops.  A sequence is a list made
 * at import (onnx_value.elems): its length and its elements are known
 * while importing, so construction, insertion, erasure, splitting and
 * concatenation build no node of their own, only the slices and concats
 * of the tensors involved.  Positions must be known at import, except
 * SequenceAt's over elements of one shape (a stack and a gather).  An
 * optional is the value it holds, or an empty-optional value.  SequenceMap,
 * which runs a subgraph, is with the control flow (onnx_control.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_fold.h"
#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

static rlx_status need_kind(onnx_node *n, int i, onnx_kind kind)
{
    if (i >= n->n_in || !n->in[i])
        return onnx_fail(n, RLX_ERR_FORMAT, "input %d is missing", i);
    if (n->in[i]->kind != kind)
        return onnx_fail(n, RLX_ERR_FORMAT, "input %d ('%s') is %s, not %s", i, n->p->input[i],
                         onnx_kind_name(n->in[i]), kind == ONNX_KIND_SEQUENCE ? "a sequence" : "a tensor");
    return RLX_OK;
}

/* Appends a copy of x to s; the failure names the node. */
static rlx_status push(onnx_node *n, onnx_value *s, onnx_value *x)
{
    rlx_status st = onnx_seq_push(n->c, s, x);
    if (st == RLX_OK)
        return RLX_OK;
    char msg[400];
    snprintf(msg, sizeof msg, "%s", rlx_last_error());
    return onnx_fail(n, st, "%s", msg);
}

/* The position in input i, known at import, as an index into a sequence
 * of len elements: [-len, len - 1], or [-len, len] where it is an insert
 * position (len: after the last). */
static rlx_status const_pos(onnx_node *n, int i, int64_t len, bool insert, int64_t *pos)
{
    const onnx_tensor *k = onnx_in_const(n, i);
    if (!k)
        return onnx_need_const(n, i, "position");
    if (k->numel != 1 || (k->dtype != RLX_I64 && k->dtype != RLX_I32))
        return onnx_fail(n, RLX_ERR_FORMAT, "the position must be one int32 or int64 value");
    int64_t p = onnx_get_i(k, 0), hi = insert ? len : len - 1;
    if (p < -len || p > hi) {
        if (len == 0 && !insert)
            return onnx_fail(n, RLX_ERR_SHAPE, "position %lld in an empty sequence", (long long)p);
        return onnx_fail(n, RLX_ERR_SHAPE, "position %lld is outside [%lld, %lld] (the sequence has %lld element%s)",
                         (long long)p, (long long)-len, (long long)hi, (long long)len, len == 1 ? "" : "s");
    }
    *pos = p < 0 ? p + len : p;
    return RLX_OK;
}

/* out i = a sequence of s's elements, with x inserted before position at
 * (at = -1: none inserted) and the element at skip left out (-1: none). */
static rlx_status out_edited(onnx_node *n, int o, onnx_value *s, onnx_value *x, int64_t at, int64_t skip)
{
    onnx_value r = {.node = -1};
    onnx_seq_init(&r, s->elem_dtype);
    rlx_status st = RLX_OK;
    for (int64_t i = 0; i <= s->n_elems && st == RLX_OK; i++) {
        if (i == at)
            st = push(n, &r, x);
        if (st == RLX_OK && i < s->n_elems && i != skip)
            st = push(n, &r, &s->elems[i]);
    }
    if (st != RLX_OK) {
        onnx_value_clear(&r);
        return st;
    }
    return onnx_out_value(n, o, &r);
}

static rlx_status h_sequence_empty(onnx_node *n)
{
    int64_t ot = onnx_attr_i(n, "dtype", 1 /* FLOAT */);
    rlx_dtype t;
    if (ot < 0 || ot > 1000 || !onnx_dtype_from_onnx((int)ot, &t))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "element type %s is not supported",
                         ot >= 0 && ot <= 1000 ? onnx_type_name((int)ot) : "?");
    onnx_value r = {.node = -1};
    onnx_seq_init(&r, t);
    return onnx_out_value(n, 0, &r);
}

static rlx_status h_sequence_construct(onnx_node *n)
{
    for (int i = 0; i < n->n_in; i++) {
        rlx_status st = need_kind(n, i, ONNX_KIND_TENSOR);
        if (st != RLX_OK)
            return st;
    }
    onnx_value r = {.node = -1};
    onnx_seq_init(&r, onnx_value_dtype(n->c, n->in[0]));
    for (int i = 0; i < n->n_in; i++) {
        rlx_status st = push(n, &r, n->in[i]);
        if (st != RLX_OK) {
            onnx_value_clear(&r);
            return st;
        }
    }
    return onnx_out_value(n, 0, &r);
}

static rlx_status h_sequence_insert(onnx_node *n)
{
    rlx_status st = need_kind(n, 0, ONNX_KIND_SEQUENCE);
    if (st == RLX_OK)
        st = need_kind(n, 1, ONNX_KIND_TENSOR);
    if (st != RLX_OK)
        return st;
    onnx_value *s = n->in[0];
    int64_t at = s->n_elems;
    if (n->n_in > 2 && n->in[2] && (st = const_pos(n, 2, s->n_elems, true, &at)) != RLX_OK)
        return st;
    return out_edited(n, 0, s, n->in[1], at, -1);
}

static rlx_status h_sequence_erase(onnx_node *n)
{
    rlx_status st = need_kind(n, 0, ONNX_KIND_SEQUENCE);
    if (st != RLX_OK)
        return st;
    onnx_value *s = n->in[0];
    if (s->n_elems == 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "erasing from an empty sequence");
    int64_t at = s->n_elems - 1;
    if (n->n_in > 1 && n->in[1] && (st = const_pos(n, 1, s->n_elems, false, &at)) != RLX_OK)
        return st;
    return out_edited(n, 0, s, NULL, -1, at);
}

static rlx_status h_sequence_length(onnx_node *n)
{
    rlx_status st = need_kind(n, 0, ONNX_KIND_SEQUENCE);
    if (st != RLX_OK)
        return st;
    onnx_tensor *k = onnx_tensor_new(RLX_I64, 0, NULL);
    if (k)
        *(int64_t *)k->data = n->in[0]->n_elems;
    return onnx_out_const(n, 0, k);
}

/* Whether every element of s has the shape of the first. */
static bool same_shapes(onnx_node *n, onnx_value *s, int *r, int64_t *dims)
{
    onnx_value_shape(n->c, &s->elems[0], r, dims);
    for (int i = 1; i < s->n_elems; i++) {
        int ri;
        int64_t d[RLX_MAX_DIMS];
        onnx_value_shape(n->c, &s->elems[i], &ri, d);
        if (ri != *r || memcmp(d, dims, sizeof d[0] * (size_t)ri))
            return false;
    }
    return true;
}

/* s's elements stacked along a new axis 0 (all of one shape). */
static rlx_node stack_elems(onnx_node *n, onnx_value *s, int r, const int64_t *dims)
{
    int64_t u[RLX_MAX_DIMS];
    u[0] = 1;
    memcpy(u + 1, dims, sizeof dims[0] * (size_t)r);
    rlx_node *xs = rlx_calloc((size_t)s->n_elems, sizeof *xs);
    if (!xs)
        return -1;
    for (int i = 0; i < s->n_elems; i++)
        xs[i] = rlx_reshape(G, onnx_node_of(n->c, &s->elems[i]), r + 1, u);
    rlx_node y = s->n_elems == 1 ? xs[0] : rlx_concat(G, s->n_elems, xs, 0);
    free(xs);
    return y;
}

static rlx_status h_sequence_at(onnx_node *n)
{
    rlx_status st = need_kind(n, 0, ONNX_KIND_SEQUENCE);
    if (st == RLX_OK)
        st = need_kind(n, 1, ONNX_KIND_TENSOR);
    if (st != RLX_OK)
        return st;
    onnx_value *s = n->in[0];
    if (s->n_elems == 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "the sequence is empty");
    if (onnx_in_const(n, 1)) {
        int64_t at;
        if ((st = const_pos(n, 1, s->n_elems, false, &at)) != RLX_OK)
            return st;
        onnx_value r = {.node = -1};
        if ((st = onnx_value_copy(n->c, &r, &s->elems[at])) != RLX_OK)
            return onnx_fail(n, st, "cannot copy element %lld", (long long)at);
        return onnx_out_value(n, 0, &r);
    }
    /* a position known at run time: a gather from the stacked elements
     * (the gather fails the run on a position out of range) */
    int r;
    int64_t dims[RLX_MAX_DIMS];
    if (!same_shapes(n, s, &r, dims))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED,
                         "input 1 (position) must be known at import time, since the sequence's elements differ in "
                         "shape (bind it by value)");
    if (r + 1 > RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "elements of rank %d cannot be stacked", r);
    int64_t pd[RLX_MAX_DIMS];
    int pr = onnx_in_shape(n, 1, pd);
    rlx_dtype pt = onnx_in_dtype(n, 1);
    if (onnx_numel(pr, pd) != 1 || (pt != RLX_I64 && pt != RLX_I32))
        return onnx_fail(n, RLX_ERR_FORMAT, "the position must be one int32 or int64 value");
    rlx_node pos = rlx_reshape(G, onnx_in(n, 1), 0, NULL);
    return onnx_out_node(n, 0, rlx_gather(G, stack_elems(n, s, r, dims), pos, 0));
}

static rlx_status h_split_to_sequence(onnx_node *n)
{
    rlx_status st = need_kind(n, 0, ONNX_KIND_TENSOR);
    if (st != RLX_OK)
        return st;
    int64_t in[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, in);
    int axis = onnx_norm_axis(onnx_attr_i(n, "axis", 0), r);
    if (axis < 0 || axis >= r)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for rank %d", (long long)onnx_attr_i(n, "axis", 0),
                         r);
    int64_t len = in[axis], cnt, chunk = 1;
    const onnx_tensor *sk = NULL;
    bool squeeze = false;
    if (n->n_in > 1 && n->in[1]) {
        if ((st = need_kind(n, 1, ONNX_KIND_TENSOR)) != RLX_OK)
            return st;
        if (!(sk = onnx_in_const(n, 1)))
            return onnx_need_const(n, 1, "split");
        if (sk->dtype != RLX_I64 && sk->dtype != RLX_I32)
            return onnx_fail(n, RLX_ERR_FORMAT, "split must be int32 or int64");
        if (sk->ndim == 0) { /* one size: chunks of it, the last one shorter */
            chunk = onnx_get_i(sk, 0);
            if (chunk < 1)
                return onnx_fail(n, RLX_ERR_SHAPE, "split size %lld", (long long)chunk);
            cnt = len / chunk + (len % chunk != 0);
            sk = NULL;
        } else if (sk->ndim == 1) {
            cnt = sk->numel;
            int64_t sum = 0;
            for (int64_t i = 0; i < cnt; i++) {
                int64_t v = onnx_get_i(sk, i);
                if (v < 0 || v > len - sum)
                    return onnx_fail(n, RLX_ERR_SHAPE, "split sizes are negative or exceed the axis (%lld)",
                                     (long long)len);
                sum += v;
            }
            if (sum != len)
                return onnx_fail(n, RLX_ERR_SHAPE, "split sizes add up to %lld, the axis has %lld", (long long)sum,
                                 (long long)len);
        } else
            return onnx_fail(n, RLX_ERR_SHAPE, "split must be a scalar or 1-d");
    } else { /* pieces of one, the axis dropped unless keepdims */
        cnt = len;
        squeeze = onnx_attr_i(n, "keepdims", 1) == 0;
    }
    if (cnt > ONNX_MAX_SEQ_LEN)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "%lld pieces: sequences longer than %d elements are not supported",
                         (long long)cnt, ONNX_MAX_SEQ_LEN);
    onnx_value res = {.node = -1};
    onnx_seq_init(&res, onnx_in_dtype(n, 0));
    onnx_value *x = n->in[0];
    int64_t start = 0;
    for (int64_t i = 0; i < cnt && st == RLX_OK; i++) {
        int64_t size = sk ? onnx_get_i(sk, i) : (len - start < chunk ? len - start : chunk), end = start + size;
        int64_t od[RLX_MAX_DIMS], sq[RLX_MAX_DIMS];
        memcpy(od, in, sizeof in[0] * (size_t)r);
        od[axis] = size;
        for (int d = 0, k = 0; d < r; d++)
            if (d != axis)
                sq[k++] = in[d];
        onnx_value e = {.node = -1};
        if (x->k && x->k->numel <= ONNX_FOLD_MAX_NUMEL) {
            int64_t s0[RLX_MAX_DIMS] = {0}, sp[RLX_MAX_DIMS];
            for (int d = 0; d < r; d++)
                sp[d] = 1;
            s0[axis] = start;
            e.k = onnx_fold_slice(x->k, s0, sp, od);
            if (e.k && squeeze) {
                e.k->ndim = r - 1;
                memcpy(e.k->dims, sq, sizeof sq[0] * (size_t)(r - 1));
            }
            if (!e.k)
                st = onnx_fail(n, rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY), "cannot slice: %s", rlx_last_error());
        } else {
            e.node = rlx_slice(G, onnx_node_of(n->c, x), 1, &axis, &start, &end, NULL);
            if (squeeze)
                e.node = rlx_reshape(G, e.node, r - 1, sq);
            if (e.node < 0)
                st = onnx_out_node(n, 0, -1); /* the builder's failure, naming the node */
        }
        if (st == RLX_OK)
            st = push(n, &res, &e);
        onnx_value_clear(&e);
        start = end;
    }
    if (st != RLX_OK) {
        onnx_value_clear(&res);
        return st;
    }
    return onnx_out_value(n, 0, &res);
}

static rlx_status h_concat_from_sequence(onnx_node *n)
{
    rlx_status st = need_kind(n, 0, ONNX_KIND_SEQUENCE);
    if (st != RLX_OK)
        return st;
    onnx_value *s = n->in[0];
    if (s->n_elems == 0)
        return onnx_fail(n, RLX_ERR_SHAPE, "the sequence is empty: nothing to concatenate");
    bool new_axis = onnx_attr_i(n, "new_axis", 0) != 0;
    int r;
    int64_t d0[RLX_MAX_DIMS];
    onnx_value_shape(n->c, &s->elems[0], &r, d0);
    int rr = r + new_axis;
    int64_t a = onnx_attr_i(n, "axis", 0);
    int axis = onnx_norm_axis(a, rr);
    if (axis < 0 || axis >= rr || rr > RLX_MAX_DIMS)
        return onnx_fail(n, RLX_ERR_SHAPE, "axis %lld out of range for elements of rank %d", (long long)a, r);
    /* each element as it enters the concat: with the new axis if asked */
    int64_t tot = 0;
    bool allk = true;
    for (int i = 0; i < s->n_elems; i++) {
        int ri;
        int64_t d[RLX_MAX_DIMS];
        onnx_value_shape(n->c, &s->elems[i], &ri, d);
        bool fits = ri == r;
        for (int k = 0; fits && k < r; k++)
            fits = d[k] == d0[k] || (!new_axis && k == axis);
        if (!fits)
            return onnx_fail(n, RLX_ERR_SHAPE, "element %d's shape does not concatenate with element 0's on axis %d", i,
                             axis);
        if (s->elems[i].k)
            tot += s->elems[i].k->numel;
        else
            allk = false;
    }
    if (allk && tot <= ONNX_FOLD_MAX_NUMEL) {
        onnx_tensor **ks = rlx_calloc((size_t)s->n_elems, sizeof *ks),
                    *views = rlx_calloc((size_t)s->n_elems, sizeof *views);
        onnx_tensor *y = NULL;
        if (ks && views) {
            for (int i = 0; i < s->n_elems; i++) {
                views[i] = *s->elems[i].k; /* the same data, read only */
                if (new_axis) {
                    memmove(views[i].dims + axis + 1, views[i].dims + axis,
                            sizeof views[i].dims[0] * (size_t)(r - axis));
                    views[i].dims[axis] = 1;
                    views[i].ndim = rr;
                }
                ks[i] = &views[i];
            }
            y = onnx_fold_concat(ks, s->n_elems, axis);
        }
        free(ks);
        free(views);
        if (!y)
            return onnx_fail(n, RLX_ERR_SHAPE, "elements do not concatenate: %s", rlx_last_error());
        return onnx_out_const(n, 0, y);
    }
    rlx_node *xs = rlx_calloc((size_t)s->n_elems, sizeof *xs);
    if (!xs)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    int k = 0;
    for (int i = 0; i < s->n_elems; i++) {
        int ri;
        int64_t d[RLX_MAX_DIMS], u[RLX_MAX_DIMS];
        onnx_value_shape(n->c, &s->elems[i], &ri, d);
        rlx_node x = onnx_node_of(n->c, &s->elems[i]);
        if (new_axis) {
            for (int j = 0, q = 0; j < rr; j++)
                u[j] = j == axis ? 1 : d[q++];
            x = rlx_reshape(G, x, rr, u);
        } else if (d[axis] == 0 && k + (s->n_elems - i - 1) > 0) {
            continue; /* an empty part adds nothing (unless all are empty) */
        }
        xs[k++] = x;
    }
    rlx_node y = k == 1 ? xs[0] : rlx_concat(G, k, xs, axis);
    free(xs);
    return onnx_out_node(n, 0, y);
}

static rlx_status h_optional(onnx_node *n)
{
    onnx_value r = {.node = -1};
    if (n->n_in < 1 || !n->in[0]) {
        r.kind = ONNX_KIND_NONE;
        return onnx_out_value(n, 0, &r);
    }
    rlx_status st = onnx_value_copy(n->c, &r, n->in[0]);
    if (st != RLX_OK)
        return onnx_fail(n, st, "cannot copy the input");
    return onnx_out_value(n, 0, &r);
}

static rlx_status h_optional_has_element(onnx_node *n)
{
    onnx_tensor *k = onnx_tensor_new(RLX_BOOL, 0, NULL);
    if (k)
        *(uint8_t *)k->data = n->n_in > 0 && n->in[0] && n->in[0]->kind != ONNX_KIND_NONE;
    return onnx_out_const(n, 0, k);
}

static rlx_status h_optional_get_element(onnx_node *n)
{
    if (n->in[0]->kind == ONNX_KIND_NONE)
        return onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "input 0 ('%s') is an empty optional", n->p->input[0]);
    onnx_value r = {.node = -1};
    rlx_status st = onnx_value_copy(n->c, &r, n->in[0]);
    if (st != RLX_OK)
        return onnx_fail(n, st, "cannot copy the input");
    return onnx_out_value(n, 0, &r);
}

const onnx_op onnx_sequence_ops[] = {
    ONNX_OP_ANY("SequenceEmpty", h_sequence_empty, 0),
    ONNX_OP_ANY("SequenceConstruct", h_sequence_construct, 1),
    ONNX_OP_ANY("SequenceInsert", h_sequence_insert, 2),
    ONNX_OP_ANY("SequenceErase", h_sequence_erase, 1),
    ONNX_OP_ANY("SequenceAt", h_sequence_at, 2),
    ONNX_OP_ANY("SequenceLength", h_sequence_length, 1),
    ONNX_OP_ANY("SplitToSequence", h_split_to_sequence, 1),
    ONNX_OP_ANY("ConcatFromSequence", h_concat_from_sequence, 1),
    ONNX_OP_ANY("Optional", h_optional, 0),
    ONNX_OP_ANY("OptionalHasElement", h_optional_has_element, 0),
    ONNX_OP_ANY("OptionalGetElement", h_optional_get_element, 1),
    ONNX_OP_END,
};
