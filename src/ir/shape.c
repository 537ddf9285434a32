/* shape.c - shapes: element counts, broadcasting, strides, printing, and a
 * node's size in bytes.  Below the op table (whose inference uses them)
 * and graph storage. */
#include <stdio.h>

#include "ir/ir.h"

int64_t rlx_shape_numel(const rlx_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= s->dims[i];
    return n;
}

bool rlx_shape_broadcasts_to(const rlx_shape *s, const rlx_shape *to)
{
    rlx_shape b;
    return s->ndim <= to->ndim && rlx_shape_broadcast(s, to, &b) && rlx_shape_equal(&b, to);
}

bool rlx_shape_equal(const rlx_shape *a, const rlx_shape *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i])
            return false;
    return true;
}

bool rlx_shape_broadcast(const rlx_shape *a, const rlx_shape *b, rlx_shape *out)
{
    rlx_shape r = {0};
    r.ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < r.ndim; i++) {
        int ia = a->ndim - r.ndim + i, ib = b->ndim - r.ndim + i;
        int64_t da = ia >= 0 ? a->dims[ia] : 1, db = ib >= 0 ? b->dims[ib] : 1;
        if (da == db || db == 1)
            r.dims[i] = da;
        else if (da == 1)
            r.dims[i] = db;
        else
            return false;
    }
    *out = r;
    return true;
}

void rlx_shape_strides(const rlx_shape *s, int64_t strides[RLX_MAX_DIMS])
{
    int64_t st = 1;
    for (int i = s->ndim - 1; i >= 0; i--) {
        strides[i] = st;
        st *= s->dims[i];
    }
}

void rlx_shape_broadcast_strides(const rlx_shape *in, const rlx_shape *out, int64_t strides[RLX_MAX_DIMS])
{
    int64_t own[RLX_MAX_DIMS];
    rlx_shape_strides(in, own);
    for (int i = 0; i < out->ndim; i++) {
        int j = in->ndim - out->ndim + i;
        strides[i] = (j < 0 || in->dims[j] == 1) ? 0 : own[j];
    }
}

const char *rlx_shape_str(const rlx_shape *s, char *buf, size_t n)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < s->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)s->dims[i]);
    if (used < n)
        snprintf(buf + used, n - used, "]");
    return buf;
}

size_t rlx_node_bytes(const rlx_node_data *n) { return (size_t)rlx_shape_numel(&n->shape) * rlx_dtype_size(n->dtype); }
