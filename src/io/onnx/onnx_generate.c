/* onnx_generate.c - ops that make a tensor rather than transform one:
 * Constant, ConstantOfShape, Range, EyeLike, and the random ops
 * (RandomUniform/Normal, their *Like forms, Bernoulli). */
#include <math.h>
#include <string.h>

#include "io/onnx/onnx_ops.h"

#define G (n->c->g)

static rlx_status h_constant(onnx_node *n)
{
    const Onnx__AttributeProto *a = NULL;
    for (size_t i = 0; i < n->p->n_attribute; i++)
        if (n->p->attribute[i])
            a = n->p->attribute[i];
    if (!a || !a->name)
        return onnx_fail(n, RLX_ERR_FORMAT, "Constant without a value");
    onnx_tensor *k = NULL;
    if (!strcmp(a->name, "value") && a->t) {
        if (onnx_weight_from_proto(a->t, n->c->base_dir, false, &k) != RLX_OK)
            return onnx_fail(n, RLX_ERR_FORMAT, "%s", rlx_last_error());
    } else if (!strcmp(a->name, "value_float")) {
        k = onnx_tensor_derived(RLX_F32, 0, NULL);
        if (k)
            ((float *)k->data)[0] = a->f;
    } else if (!strcmp(a->name, "value_int")) {
        k = onnx_tensor_derived(RLX_I64, 0, NULL);
        if (k)
            ((int64_t *)k->data)[0] = a->i;
    } else if (!strcmp(a->name, "value_floats")) {
        int64_t d = (int64_t)a->n_floats;
        k = onnx_tensor_derived(RLX_F32, 1, &d);
        if (k && d)
            memcpy(k->data, a->floats, sizeof(float) * (size_t)d);
    } else if (!strcmp(a->name, "value_ints")) {
        int64_t d = (int64_t)a->n_ints;
        k = onnx_tensor_derived(RLX_I64, 1, &d);
        if (k && d)
            memcpy(k->data, a->ints, sizeof(int64_t) * (size_t)d);
    } else
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "Constant with attribute '%s'", a->name);
    return onnx_out_const(n, 0, k);
}

static rlx_status h_constant_of_shape(onnx_node *n)
{
    int64_t sh[RLX_MAX_DIMS + 1];
    int ns = onnx_const_ints(n, 0, sh, RLX_MAX_DIMS + 1);
    if (ns == -2)
        return onnx_need_const(n, 0, "shape");
    if (ns < 0 || ns > RLX_MAX_DIMS || !onnx_dims_ok(ns, sh))
        return onnx_fail(n, RLX_ERR_SHAPE, "bad shape");
    rlx_dtype t = RLX_F32;
    double v = 0;
    const Onnx__AttributeProto *a = onnx_attr(n, "value");
    if (a && a->t) {
        onnx_tensor *vt;
        if (onnx_tensor_from_proto(a->t, NULL, &vt) != RLX_OK)
            return onnx_fail(n, RLX_ERR_FORMAT, "%s", rlx_last_error());
        t = vt->dtype;
        v = vt->numel ? onnx_get_f(vt, 0) : 0;
        int64_t iv = vt->numel ? onnx_get_i(vt, 0) : 0;
        onnx_tensor_free(vt);
        int64_t numel = 1;
        for (int i = 0; i < ns; i++) {
            if (sh[i] < 0)
                return onnx_fail(n, RLX_ERR_SHAPE, "negative dim");
            numel *= sh[i];
        }
        if (numel <= ONNX_FOLD_MAX_NUMEL) {
            onnx_tensor *y = onnx_tensor_derived(t, ns, sh);
            if (y)
                for (int64_t i = 0; i < y->numel; i++) {
                    if (onnx_dtype_is_float(t))
                        onnx_set_f(y, i, v);
                    else
                        onnx_set_i(y, i, iv);
                }
            return onnx_out_const(n, 0, y);
        }
    } else {
        int64_t numel = 1;
        for (int i = 0; i < ns; i++) {
            if (sh[i] < 0)
                return onnx_fail(n, RLX_ERR_SHAPE, "negative dim");
            numel *= sh[i];
        }
        if (numel <= ONNX_FOLD_MAX_NUMEL)
            return onnx_out_const(n, 0, onnx_tensor_derived(RLX_F32, ns, sh));
    }
    return onnx_out_node(n, 0, rlx_expand(n->c->g, onnx_scalar(n, t, v), ns, sh));
}

static rlx_status h_range(onnx_node *n)
{
    double s, l, d;
    if (!onnx_const_scalar(n, 0, &s) || !onnx_const_scalar(n, 1, &l) || !onnx_const_scalar(n, 2, &d))
        return onnx_need_const(n, 0, "start/limit/delta");
    if (d == 0)
        return onnx_fail(n, RLX_ERR_FORMAT, "delta is 0");
    double cnt = ceil((l - s) / d);
    if (cnt < 0)
        cnt = 0;
    if (!(cnt <= (double)ONNX_FOLD_MAX_NUMEL * 8))
        return onnx_fail(n, RLX_ERR_SHAPE, "range too long (or not a number)");
    int64_t len = (int64_t)cnt;
    rlx_dtype t = onnx_in_dtype(n, 0);
    onnx_tensor *y = onnx_tensor_derived(t, 1, &len);
    if (y) {
        if (onnx_dtype_is_float(t))
            for (int64_t i = 0; i < len; i++)
                onnx_set_f(y, i, s + (double)i * d);
        else {
            int64_t si = onnx_get_i(n->in[0]->k, 0), di = onnx_get_i(n->in[2]->k, 0);
            for (int64_t i = 0; i < len; i++)
                onnx_set_i(y, i, si + i * di);
        }
    }
    return onnx_out_const(n, 0, y);
}

static rlx_status h_eyelike(onnx_node *n)
{
    int64_t xd[RLX_MAX_DIMS];
    int r = onnx_in_shape(n, 0, xd);
    if (r != 2)
        return onnx_fail(n, RLX_ERR_SHAPE, "needs rank 2");
    rlx_dtype t = onnx_in_dtype(n, 0);
    const Onnx__AttributeProto *a = onnx_attr(n, "dtype");
    if (a && !onnx_dtype_from_onnx((int)a->i, &t))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    int64_t k = onnx_attr_i(n, "k", 0);
    /* past either edge the diagonal is empty; clipped so i + k cannot overflow */
    if (k > xd[1])
        k = xd[1];
    if (k < -xd[0])
        k = -xd[0];
    onnx_tensor *y = onnx_tensor_derived(t, 2, xd);
    if (!y)
        return onnx_fail(n, RLX_ERR_OUT_OF_MEMORY, "oom");
    for (int64_t i = 0; i < xd[0]; i++)
        if (i + k >= 0 && i + k < xd[1])
            onnx_set_f(y, i * xd[1] + i + k, 1);
    return onnx_out_const(n, 0, y);
}

/* Random ops (RLX's generator: deterministic per compile seed, not numpy's). */
static rlx_status h_random(onnx_node *n)
{
    const char *op = n->p->op_type;
    bool like = strstr(op, "Like") != NULL, bern = !strcmp(op, "Bernoulli");
    int64_t d[RLX_MAX_DIMS];
    int r;
    rlx_dtype t = RLX_F32;
    if (like || bern) {
        if (n->n_in < 1 || !n->in[0])
            return onnx_fail(n, RLX_ERR_FORMAT, "needs an input");
        r = onnx_in_shape(n, 0, d);
        t = onnx_in_dtype(n, 0);
    } else {
        r = onnx_attr_ints(n, "shape", d, RLX_MAX_DIMS + 1);
        if (r < 0 || r > RLX_MAX_DIMS || !onnx_dims_ok(r, d))
            return onnx_fail(n, RLX_ERR_SHAPE, "bad shape");
    }
    const Onnx__AttributeProto *a = onnx_attr(n, "dtype");
    if (a && !onnx_dtype_from_onnx((int)a->i, &t))
        return onnx_fail(n, RLX_ERR_UNSUPPORTED, "dtype");
    if (bern) {
        rlx_dtype pt = onnx_in_dtype(n, 0);
        rlx_node u = rlx_random_uniform(G, pt, r, d, 0, 1);
        return onnx_out_node(n, 0, rlx_cast(G, rlx_less(G, u, onnx_in(n, 0)), t));
    }
    if (!onnx_dtype_is_float(t))
        return onnx_fail(n, RLX_ERR_DTYPE, "random values of a non-float type");
    if (strstr(op, "Uniform"))
        return onnx_out_node(n, 0, rlx_random_uniform(G, t, r, d, onnx_attr_f(n, "low", 0), onnx_attr_f(n, "high", 1)));
    return onnx_out_node(n, 0, rlx_random_normal(G, t, r, d, onnx_attr_f(n, "mean", 0), onnx_attr_f(n, "scale", 1)));
}

const onnx_op onnx_generate_ops[] = {
    ONNX_OP("ConstantOfShape", h_constant_of_shape, 1),
    ONNX_OP("Constant", h_constant, 0),
    ONNX_OP("Range", h_range, 3),
    ONNX_OP("EyeLike", h_eyelike, 1),
    ONNX_OP("RandomUniform", h_random, 0),
    ONNX_OP("RandomNormal", h_random, 0),
    ONNX_OP("RandomUniformLike", h_random, 1),
    ONNX_OP("RandomNormalLike", h_random, 1),
    ONNX_OP("Bernoulli", h_random, 1),
    ONNX_OP_END,
};
