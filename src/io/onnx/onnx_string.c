/* onnx_string.c - tensors of strings.  RLX graphs compute on numbers
 * only, so a string tensor exists only as a host value known at import
 * (an initializer, a Constant, a graph input bound by value) and the ops
 * on strings run while importing (Cast and CastLike here, the others in
 * onnx_string_ops.c).  A numeric result is an ordinary constant; a string
 * graph output becomes a U8 constant of its bytes that sessions report as
 * RLX_STRING (rlx_graph_string_output).  A string tensor's bytes are its
 * elements in order, each ended by a NUL (the encoding of RLX_STRING in
 * rlx.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"
#include "io/onnx/onnx_string.h"
#include "ir/ir.h"

bool onnx_value_is_string(const onnx_value *v)
{
    return v && v->kind == ONNX_KIND_TENSOR && (v->unknown_string || (v->k && v->k->dtype == RLX_STRING));
}

/* ------------------------------------------------------------ graph inputs and outputs */

/* A graph input of strings: its value when bound by value (the bytes of
 * RLX_STRING), else a value that any op reading it refuses. */
rlx_status onnx_string_input(const char *name, int nd, const int64_t *dims, const rlx_onnx_binding *b, onnx_value *out)
{
    onnx_value_clear(out);
    if (!b || !b->value) {
        out->unknown_string = true;
        return RLX_OK;
    }
    int64_t numel;
    onnx_dims_fit(nd, dims, &numel);
    if (!onnx_string_check(b->value, b->bytes, numel))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "input '%s': a value of strings must be %lld NUL-ended strings (%zu bytes given)", name,
                             (long long)numel, b->bytes);
    onnx_tensor *k = onnx_string_new(nd, dims, b->bytes);
    if (!k)
        return rlx_set_error(rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY), "input '%s': %s", name, rlx_last_error());
    if (b->bytes)
        memcpy(k->data, b->value, b->bytes);
    out->k = k;
    return RLX_OK;
}

/* A graph output of strings: a U8 constant of its bytes, recorded as
 * strings of its shape (sessions report it as RLX_STRING). */
rlx_status onnx_string_output(onnx_ctx *c, const char *name, const onnx_value *x)
{
    if (!x->k)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "graph output '%s' is a tensor of strings, which must be known at import time (bind "
                             "the graph input by value)",
                             name);
    int64_t len = (int64_t)x->k->bytes;
    rlx_shape sh = {.ndim = x->k->ndim};
    memcpy(sh.dims, x->k->dims, sizeof sh.dims[0] * (size_t)sh.ndim);
    static const uint8_t none = 0; /* data for an empty tensor of strings (no bytes) */
    rlx_node nd = rlx_constant(c->g, RLX_U8, 1, &len, len ? x->k->data : &none, (size_t)len);
    if (nd < 0 || rlx_output(c->g, name, nd) != RLX_OK || rlx_graph_string_output(c->g, name, &sh) != RLX_OK)
        return rlx_set_error(rlx_last_status_or(RLX_ERR_FORMAT), "graph output '%s': %s", name, rlx_last_error());
    return RLX_OK;
}

/* ------------------------------------------------------------ casts */

/* The shortest "%.*g" that reads back as the same value (as NumPy prints
 * floats); NaN and infinities as the ONNX Cast spec spells them. */
static void format_float(char *buf, size_t n, double v, bool single)
{
    if (isnan(v)) {
        snprintf(buf, n, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-INF" : "INF");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v)
            return;
    }
}

static rlx_status cast_to_string(onnx_node *n, const onnx_tensor *x)
{
    char **s = rlx_calloc((size_t)(x->numel ? x->numel : 1), sizeof *s);
    if (!s)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    rlx_status st = RLX_OK;
    for (int64_t i = 0; i < x->numel && st == RLX_OK; i++) {
        char buf[64];
        if (onnx_dtype_is_float(x->dtype))
            format_float(buf, sizeof buf, onnx_get_f(x, i), x->dtype != RLX_F64);
        else
            snprintf(buf, sizeof buf, "%lld", (long long)onnx_get_i(x, i));
        if (!(s[i] = rlx_strdup(buf)))
            st = onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (st == RLX_OK)
        st = onnx_out_const(n, 0, onnx_string_pack(x->ndim, x->dims, s, x->numel));
    for (int64_t i = 0; i < x->numel; i++)
        free(s[i]);
    free(s);
    return st;
}

static rlx_status cast_from_string(onnx_node *n, const onnx_tensor *x, rlx_dtype to)
{
    if (to == RLX_BOOL)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "cast of strings to bool is not supported");
    const char **s = onnx_string_elems(x);
    onnx_tensor *y = s ? onnx_tensor_new(to, x->ndim, x->dims) : NULL;
    if (!y) {
        free(s);
        return onnx_fail(n, rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY), "%s", rlx_last_error());
    }
    for (int64_t i = 0; i < x->numel; i++) {
        char *end = NULL;
        errno = 0;
        if (to == RLX_F32)
            ((float *)y->data)[i] = strtof(s[i], &end); /* one rounding, not via double */
        else if (onnx_dtype_is_float(to))
            onnx_set_f(y, i, strtod(s[i], &end));
        else
            onnx_set_i(y, i, strtoll(s[i], &end, 10));
        bool range = errno == ERANGE && !onnx_dtype_is_float(to); /* float overflow is inf, as the spec wants */
        if (end == s[i] || *end || range) {
            rlx_status st = onnx_fail(n, RLX_ERR_INVALID_ARGUMENT, "element %lld, \"%.64s\", is not a %s number",
                                      (long long)i, s[i], rlx_dtype_name(to));
            free(s);
            onnx_tensor_free(y);
            return st;
        }
    }
    free(s);
    return onnx_out_const(n, 0, y);
}

rlx_status onnx_string_cast(onnx_node *n, bool to_string, rlx_dtype to)
{
    const onnx_tensor *x = n->in[0]->k;
    if (!x)
        return onnx_need_const(n, 0, "cast to strings: RLX computes on strings only while importing");
    if (x->dtype == RLX_STRING)
        return to_string ? onnx_out_const(n, 0, onnx_tensor_clone(x)) : cast_from_string(n, x, to);
    if (x->dtype == RLX_BOOL)
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "cast of bool to strings is not supported");
    return cast_to_string(n, x);
}
