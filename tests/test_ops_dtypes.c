/* Dtypes: f16/bf16 storage and f64 through elementwise ops, integer
 * arithmetic and reductions, bool logic, casts between every pair of dtypes
 * (f32 -> f16/bf16 rounding checked bit-exactly against the reference), and
 * the public 16-bit converters against independent ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "support/ref.h"

typedef rlx_node (*unary_fn)(rlx_graph *, rlx_node);
typedef rlx_node (*binary_fn)(rlx_graph *, rlx_node, rlx_node);

static const rlx_dtype k_floats[] = {RLX_F16, RLX_BF16, RLX_F64};

/* Per-element tolerances for elementwise results stored in dt: relative to
 * each element, with an absolute floor near zero. */
static int check_elem(const char *what, const rt_tensor *got, const rt_tensor *want, rlx_dtype dt)
{
    switch (dt) {
    case RLX_F16: return rt_check_abs(what, got, want, 1e-3, 1e-7);
    case RLX_BF16: return rt_check_abs(what, got, want, 1e-2, 1e-12);
    case RLX_F64: return rt_check_abs(what, got, want, 1e-10, 1e-14);
    default: return rt_check(what, got, want, dt);
    }
}

/* ------------------------------------------------------------ float storage */

static void test_float_storage_unary(void **state)
{
    (void)state;
    const struct {
        const char *name;
        unary_fn op;
        rt_fn1 f;
        double lo, hi;
    } cases[] = {
        {"neg", rlx_neg, rt_f_neg, -4, 4},       {"exp", rlx_exp, rt_f_exp, -3, 3},
        {"log", rlx_log, rt_f_log, 0.1, 10},     {"tanh", rlx_tanh, rt_f_tanh, -3, 3},
        {"gelu", rlx_gelu, rt_f_gelu, -3, 3},    {"silu", rlx_silu, rt_f_silu, -4, 4},
        {"sqrt", rlx_sqrt, rt_f_sqrt, 0, 9},     {"sigmoid", rlx_sigmoid, rt_f_sigmoid, -5, 5},
        {"round", rlx_round, rt_f_round, -9, 9}, {"erf", rlx_erf, rt_f_erf, -2, 2},
    };
    const struct {
        int ndim;
        int64_t dims[3];
    } shapes[] = {{1, {1}}, {2, {5, 7}}, {3, {2, 1, 33}}, {1, {0}}, {0, {0}}};
    int bad = 0;
    for (int d = 0; d < 3; d++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                rt_graph *rg = rt_graph_new();
                rt_tensor *x = rt_rand(shapes[s].ndim, shapes[s].dims, cases[c].lo, cases[c].hi);
                rlx_node y = cases[c].op(rg->g, rt_input(rg, k_floats[d], x));
                if (y >= 0 && rlx_node_dtype(rg->g, y) != k_floats[d]) {
                    fprintf(stderr, "%s keeps dtype %s? got %s\n", cases[c].name, rlx_dtype_name(k_floats[d]),
                            rlx_dtype_name(rlx_node_dtype(rg->g, y)));
                    bad++;
                }
                rt_tensor *got = rt_run1(rg, y), *want = rt_map(x, cases[c].f);
                char what[128];
                snprintf(what, sizeof what, "%s %s %s", cases[c].name, rlx_dtype_name(k_floats[d]),
                         rt_shape_str(x->ndim, x->dims));
                bad += !check_elem(what, got, want, k_floats[d]);
                rt_free(got);
                rt_free(want);
                rt_free(x);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

static void test_float_storage_binary(void **state)
{
    (void)state;
    const struct {
        const char *name;
        binary_fn op;
        rt_fn2 f;
    } cases[] = {{"add", rlx_add, rt_f_add}, {"sub", rlx_sub, rt_f_sub}, {"mul", rlx_mul, rt_f_mul},
                 {"div", rlx_div, rt_f_div}, {"max", rlx_max, rt_f_max}, {"less", rlx_less, rt_f_less}};
    const struct {
        int na;
        int64_t a[3];
        int nb;
        int64_t b[3];
    } pairs[] = {
        {2, {4, 5}, 2, {4, 5}}, {2, {4, 5}, 1, {5}}, {3, {2, 1, 5}, 2, {3, 1}}, {0, {0}, 1, {9}}, {2, {0, 5}, 1, {5}}};
    int bad = 0;
    for (int d = 0; d < 3; d++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
                rt_graph *rg = rt_graph_new();
                rt_tensor *a = rt_rand(pairs[p].na, pairs[p].a, -4, 4);
                rt_tensor *b = rt_rand_away(pairs[p].nb, pairs[p].b, -4, 4, 0.25);
                rlx_node y = cases[c].op(rg->g, rt_input(rg, k_floats[d], a), rt_input(rg, k_floats[d], b));
                rt_tensor *got = rt_run1(rg, y), *want = rt_zip(a, b, cases[c].f);
                char what[128];
                snprintf(what, sizeof what, "%s %s %s x %s", cases[c].name, rlx_dtype_name(k_floats[d]),
                         rt_shape_str(a->ndim, a->dims), rt_shape_str(b->ndim, b->dims));
                rlx_dtype out = cases[c].f == rt_f_less ? RLX_BOOL : k_floats[d];
                bad += !check_elem(what, got, want, out);
                rt_free(got);
                rt_free(want);
                rt_free(a);
                rt_free(b);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

/* Reductions and softmax on 16-bit storage accumulate in f32 at least. */
static void test_float_storage_reduce(void **state)
{
    (void)state;
    int bad = 0;
    for (int d = 0; d < 3; d++) {
        const int ax[] = {-1};
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(RT_SHAPE(3, 500), 0, 1);
        rlx_node xn = rt_input(rg, k_floats[d], x);
        rlx_node outs[3] = {rlx_reduce_sum(rg->g, xn, 1, ax, 0), rlx_reduce_mean(rg->g, xn, 1, ax, 0),
                            rlx_softmax(rg->g, xn, -1)};
        rt_tensor *got[3];
        rlx_status st = rt_run(rg, 3, outs, got);
        rt_tensor *want[3] = {rt_ref_reduce(x, RT_SUM, 1, ax, 0), rt_ref_reduce(x, RT_MEAN, 1, ax, 0),
                              rt_ref_softmax(x, -1, 0)};
        const char *names[3] = {"sum of 500", "mean of 500", "softmax of 500"};
        for (int i = 0; i < 3; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s", names[i], rlx_dtype_name(k_floats[d]));
            bad += !rt_check(what, st == RLX_OK ? got[i] : NULL, want[i], k_floats[d]);
            if (st == RLX_OK)
                rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ integers */

static const rlx_dtype k_ints[] = {RLX_I64, RLX_I32, RLX_I8, RLX_U8};

static void test_int_binary(void **state)
{
    (void)state;
    const struct {
        const char *name;
        binary_fn op;
        rt_fn2 f;
        int64_t alo, ahi, blo, bhi; /* signed ranges; u8 uses |.| + offsets below */
        int nonzero_b, out_bool;
    } cases[] = {
        {"add", rlx_add, rt_f_add, -50, 50, -50, 50, 0, 0},
        {"sub", rlx_sub, rt_f_sub, -50, 50, -50, 50, 0, 0},
        {"mul", rlx_mul, rt_f_mul, -11, 12, -11, 12, 0, 0},
        {"div", rlx_div, rt_f_idiv, -100, 100, -9, 10, 1, 0},
        {"mod(python)", NULL, rt_f_mod_py, -100, 100, -9, 10, 1, 0},
        {"mod(fmod)", NULL, rt_f_mod_c, -100, 100, -9, 10, 1, 0},
        {"max", rlx_max, rt_f_max, -100, 100, -100, 100, 0, 0},
        {"min", rlx_min, rt_f_min, -100, 100, -100, 100, 0, 0},
        {"equal", rlx_equal, rt_f_equal, -3, 3, -3, 3, 0, 1},
        {"less", rlx_less, rt_f_less, -3, 3, -3, 3, 0, 1},
        {"greater", rlx_greater, rt_f_greater, -3, 3, -3, 3, 0, 1},
    };
    const struct {
        int na;
        int64_t a[3];
        int nb;
        int64_t b[3];
    } pairs[] = {
        {2, {4, 5}, 2, {4, 5}}, {2, {3, 1}, 1, {7}}, {0, {0}, 2, {2, 3}}, {2, {0, 2}, 1, {2}}, {1, {37}, 1, {37}}};
    int bad = 0;
    for (int d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
                rlx_dtype dt = k_ints[d];
                int64_t alo = cases[c].alo, ahi = cases[c].ahi, blo = cases[c].blo, bhi = cases[c].bhi;
                if (dt == RLX_U8) { /* non-negative and no wrap-around */
                    if (cases[c].out_bool) {
                        alo = blo = 98;
                        ahi = bhi = 103;
                    } else if (cases[c].f == rt_f_mul) {
                        alo = blo = 0;
                        ahi = bhi = 16;
                    } else {
                        ahi = 100 + (ahi - alo) / 2; /* a in [100, 100 + span/2) */
                        alo = 100;
                        bhi = 1 + (bhi - blo) / 2; /* b in [1, 1 + span/2) */
                        blo = 1;
                    }
                }
                rt_graph *rg = rt_graph_new();
                rt_tensor *a = rt_randi(pairs[p].na, pairs[p].a, alo, ahi);
                rt_tensor *b = rt_randi(pairs[p].nb, pairs[p].b, blo, bhi);
                if (cases[c].nonzero_b)
                    for (int64_t i = 0; i < b->n; i++)
                        if (b->d[i] == 0)
                            b->d[i] = 3;
                rlx_node an = rt_input(rg, dt, a), bn = rt_input(rg, dt, b);
                rlx_node y =
                    cases[c].op ? cases[c].op(rg->g, an, bn) : rlx_mod(rg->g, an, bn, cases[c].f == rt_f_mod_c);
                rt_tensor *got = rt_run1(rg, y), *want = rt_zip(a, b, cases[c].f);
                char what[128];
                snprintf(what, sizeof what, "%s %s %s x %s", cases[c].name, rlx_dtype_name(dt),
                         rt_shape_str(a->ndim, a->dims), rt_shape_str(b->ndim, b->dims));
                bad += !rt_check(what, got, want, cases[c].out_bool ? RLX_BOOL : dt);
                rt_free(got);
                rt_free(want);
                rt_free(a);
                rt_free(b);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

/* Values beyond 2^24 (not representable in f32) must stay exact in i64. */
static void test_int64_exact(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *a = rt_randi(RT_SHAPE(64), (int64_t)1 << 40, (int64_t)1 << 50);
    rt_tensor *b = rt_randi(RT_SHAPE(64), 1, 1000);
    for (int64_t i = 0; i < a->n; i++)
        a->d[i] = a->d[i] * 2 + 1; /* odd: not a float-friendly round number */
    rlx_node an = rt_input(rg, RLX_I64, a), bn = rt_input(rg, RLX_I64, b);
    rlx_node outs[3] = {rlx_add(rg->g, an, bn), rlx_sub(rg->g, an, bn), rlx_div(rg->g, an, bn)};
    rt_tensor *got[3];
    rlx_status st = rt_run(rg, 3, outs, got);
    rt_tensor *want[3] = {rt_zip(a, b, rt_f_add), rt_zip(a, b, rt_f_sub), rt_new(1, a->dims)};
    for (int64_t i = 0; i < a->n; i++)
        want[2]->d[i] = (double)((int64_t)a->d[i] / (int64_t)b->d[i]);
    int bad = 0;
    const char *names[3] = {"i64 add beyond 2^24", "i64 sub beyond 2^24", "i64 div beyond 2^24"};
    for (int i = 0; i < 3; i++) {
        bad += !rt_check(names[i], st == RLX_OK ? got[i] : NULL, want[i], RLX_I64);
        if (st == RLX_OK)
            rt_free(got[i]);
        rt_free(want[i]);
    }
    rt_free(a);
    rt_free(b);
    rt_graph_free(rg);
    assert_int_equal(bad, 0);
}

static void test_int_unary(void **state)
{
    (void)state;
    const struct {
        const char *name;
        unary_fn op;
        rt_fn1 f;
        int signed_only;
    } cases[] = {{"neg", rlx_neg, rt_f_neg, 1},
                 {"abs", rlx_abs, rt_f_abs, 0},
                 {"sign", rlx_sign, rt_f_sign, 0},
                 {"relu", rlx_relu, rt_f_relu, 0}};
    int bad = 0;
    for (int d = 0; d < 4; d++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (k_ints[d] == RLX_U8 && cases[c].signed_only)
                continue;
            rt_graph *rg = rt_graph_new();
            rt_tensor *x =
                k_ints[d] == RLX_U8 ? rt_randi(RT_SHAPE(3, 11), 0, 256) : rt_randi(RT_SHAPE(3, 11), -127, 128);
            rlx_node y = cases[c].op(rg->g, rt_input(rg, k_ints[d], x));
            rt_tensor *got = rt_run1(rg, y), *want = rt_map(x, cases[c].f);
            char what[64];
            snprintf(what, sizeof what, "%s %s", cases[c].name, rlx_dtype_name(k_ints[d]));
            bad += !rt_check(what, got, want, k_ints[d]);
            rt_free(got);
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

static void test_int_reduce(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int naxes;
        int axes[2];
    } ax[] = {{1, {0}}, {1, {-1}}, {0, {0}}, {2, {0, 2}}};
    for (int d = 0; d < 4; d++)
        for (size_t a = 0; a < sizeof ax / sizeof ax[0]; a++)
            for (int keep = 0; keep < 2; keep++) {
                rlx_dtype dt = k_ints[d];
                rt_graph *rg = rt_graph_new();
                /* small values: sums of 24 stay inside i8 */
                rt_tensor *x = rt_randi(RT_SHAPE(2, 3, 4), dt == RLX_U8 ? 0 : -4, 5);
                rt_tensor *xp = rt_randi(RT_SHAPE(2, 3, 4), dt == RLX_U8 ? 1 : -2, 3);
                rlx_node xn = rt_input(rg, dt, x), xpn = rt_input(rg, dt, xp);
                rlx_node outs[5] = {rlx_reduce_sum(rg->g, xn, ax[a].naxes, ax[a].axes, keep),
                                    rlx_reduce_max(rg->g, xn, ax[a].naxes, ax[a].axes, keep),
                                    rlx_reduce_min(rg->g, xn, ax[a].naxes, ax[a].axes, keep),
                                    rlx_argmax(rg->g, xn, 1, keep), rlx_reduce_prod(rg->g, xpn, 1, (int[]){-1}, keep)};
                rt_tensor *got[5];
                rlx_status st = rt_run(rg, 5, outs, got);
                rt_tensor *want[5] = {rt_ref_reduce(x, RT_SUM, ax[a].naxes, ax[a].axes, keep),
                                      rt_ref_reduce(x, RT_MAX, ax[a].naxes, ax[a].axes, keep),
                                      rt_ref_reduce(x, RT_MIN, ax[a].naxes, ax[a].axes, keep),
                                      rt_ref_arg(x, 1, keep, 1), rt_ref_reduce(xp, RT_PROD, 1, (int[]){-1}, keep)};
                /* prod of 4 values in [-2, 2] fits i8; u8 values [1, 2]: at most 16 */
                const char *names[5] = {"sum", "max", "min", "argmax", "prod"};
                for (int i = 0; i < 5; i++) {
                    char what[96];
                    snprintf(what, sizeof what, "%s %s axes case %zu keepdims %d", names[i], rlx_dtype_name(dt), a,
                             keep);
                    bad += !rt_check(what, st == RLX_OK ? got[i] : NULL, want[i], i == 3 ? RLX_I64 : dt);
                    if (st == RLX_OK)
                        rt_free(got[i]);
                    rt_free(want[i]);
                }
                rt_free(x);
                rt_free(xp);
                rt_graph_free(rg);
            }
    assert_int_equal(bad, 0);
}

/* Data movement is dtype-blind: transpose, slice, concat, gather, where,
 * pad on every dtype. */
static void test_movement_all_dtypes(void **state)
{
    (void)state;
    int bad = 0;
    for (int dt = 0; dt < RLX_DTYPE_COUNT; dt++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x, *z;
        if (dt == RLX_BOOL) {
            x = rt_randb(RT_SHAPE(3, 4, 5), 0.5);
            z = rt_randb(RT_SHAPE(3, 4, 5), 0.5);
        } else {
            x = rt_randi(RT_SHAPE(3, 4, 5), dt == RLX_U8 ? 0 : -100, 100);
            z = rt_randi(RT_SHAPE(3, 4, 5), dt == RLX_U8 ? 0 : -100, 100);
        }
        rt_tensor *idx = rt_randi(RT_SHAPE(2, 3), -4, 4);
        rt_tensor *c = rt_randb(RT_SHAPE(4, 1), 0.5);
        rlx_node xn = rt_input(rg, (rlx_dtype)dt, x), zn = rt_input(rg, (rlx_dtype)dt, z);
        rlx_node in = rt_input(rg, RLX_I64, idx), cn = rt_input(rg, RLX_BOOL, c);
        const int perm[3] = {2, 0, 1};
        const int sax[1] = {1};
        const int64_t ss[1] = {3}, se[1] = {-100}, sst[1] = {-2};
        const int64_t pads[6] = {0, 1, 0, 1, 0, 2};
        rlx_node outs[6] = {rlx_transpose(rg->g, xn, perm),
                            rlx_slice(rg->g, xn, 1, sax, ss, se, sst),
                            rlx_concat(rg->g, 2, (rlx_node[]){xn, zn}, -1),
                            rlx_gather(rg->g, xn, in, 1),
                            rlx_where(rg->g, cn, xn, zn),
                            rlx_pad(rg->g, xn, pads, RLX_PAD_EDGE, 0)};
        rt_tensor *got[6];
        rlx_status st = rt_run(rg, 6, outs, got);
        const rt_tensor *xz[2] = {x, z};
        rt_tensor *want[6] = {rt_ref_transpose(x, perm), rt_ref_slice(x, 1, sax, ss, se, sst),
                              rt_ref_concat(2, xz, -1),  rt_ref_gather(x, idx, 1),
                              rt_ref_where(c, x, z),     rt_ref_pad(x, pads, RLX_PAD_EDGE, 0)};
        const char *names[6] = {"transpose", "slice", "concat", "gather", "where", "pad"};
        for (int i = 0; i < 6; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s", names[i], rlx_dtype_name((rlx_dtype)dt));
            bad += !rt_check_tol(what, st == RLX_OK ? got[i] : NULL, want[i], 0, 0);
            if (st == RLX_OK)
                rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_free(x);
        rt_free(z);
        rt_free(idx);
        rt_free(c);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ casts */

/* Random values every dtype in `from` can hold and `to` can take (no
 * overflow, no NaN into integers). */
static rt_tensor *cast_values(rlx_dtype from, rlx_dtype to, int64_t n)
{
    rt_tensor *t = rt_new(1, &n);
    int int_from = !(from == RLX_F32 || from == RLX_F16 || from == RLX_BF16 || from == RLX_F64);
    int to_u8 = to == RLX_U8 || from == RLX_U8, to_i8 = to == RLX_I8 || from == RLX_I8;
    for (int64_t i = 0; i < n; i++) {
        double v;
        if (from == RLX_BOOL) {
            v = rt_uniform(0, 1) < 0.5;
        } else {
            double lo = to_u8 ? 0 : to_i8 ? -120 : -3000, hi = to_i8 ? 120 : to_u8 ? 250 : 3000;
            if (to == RLX_BOOL && i % 5 == 0)
                v = 0; /* zeros must give false */
            else
                v = int_from ? (double)rt_randint((int64_t)lo, (int64_t)hi) : rt_uniform(lo, hi);
        }
        /* f64 sources hold f32 values when going to a 16-bit float, so
         * the expected value does not depend on one rounding or two */
        if (from == RLX_F64 && (to == RLX_F16 || to == RLX_BF16))
            v = (double)(float)v;
        t->d[i] = v;
    }
    return t;
}

static void test_cast_matrix(void **state)
{
    (void)state;
    int bad = 0;
    for (int from = 0; from < RLX_DTYPE_COUNT; from++)
        for (int to = 0; to < RLX_DTYPE_COUNT; to++) {
            rt_graph *rg = rt_graph_new();
            /* mostly 257 values; every fifth pair casts an empty tensor */
            rt_tensor *x = cast_values((rlx_dtype)from, (rlx_dtype)to, (from + to) % 5 == 0 ? 0 : 257);
            rlx_node y = rlx_cast(rg->g, rt_input(rg, (rlx_dtype)from, x), (rlx_dtype)to);
            if (y >= 0 && rlx_node_dtype(rg->g, y) != (rlx_dtype)to)
                bad++;
            rt_tensor *got = rt_run1(rg, y);
            /* the reference: the stored value converted (floats to ints
             * truncate toward zero), rounded once to the target */
            rt_tensor *want = rt_clone(x);
            for (int64_t i = 0; i < want->n; i++) {
                double v = want->d[i];
                if (to != RLX_BOOL && (to == RLX_I64 || to == RLX_I32 || to == RLX_I8 || to == RLX_U8))
                    v = trunc(v);
                want->d[i] = rt_to_dtype(v, (rlx_dtype)to);
            }
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", rlx_dtype_name((rlx_dtype)from),
                     rlx_dtype_name((rlx_dtype)to));
            bad += !rt_check_tol(what, got, want, 0, 0);
            rt_free(got);
            rt_free(want);
            rt_free(x);
            rt_graph_free(rg);
        }
    assert_int_equal(bad, 0);
}

/* f32 -> f16 / bf16 rounding across the whole exponent range, including
 * f16 subnormals, ties, overflow to infinity, NaN and signed zeros. */
static void test_cast_rounding(void **state)
{
    (void)state;
    int64_t n = 4096;
    rt_tensor *x = rt_new(1, &n);
    for (int64_t i = 0; i < n; i++) {
        double m = rt_uniform(1, 2);
        int e = (int)rt_randint(-30, 20);
        double v = ldexp(m, e) * (rt_uniform(0, 1) < 0.5 ? -1 : 1);
        switch (i % 16) {
        case 0: /* an exact f16 tie: 11 significant bits and a half */
            v = ldexp(floor(rt_uniform(1024, 2048)) + 0.5, (int)rt_randint(-24, 5));
            break;
        case 1: /* a bf16 tie */ v = ldexp(floor(rt_uniform(128, 256)) + 0.5, (int)rt_randint(-20, 20)); break;
        case 2: v = rt_uniform(65504, 65536); break;     /* largest f16 and overflow */
        case 3: v = ldexp(rt_uniform(0, 1), -24); break; /* below the smallest f16 subnormal */
        case 4: v = i % 32 ? -0.0 : 0.0; break;
        case 5: v = i % 32 ? INFINITY : -INFINITY; break;
        case 6: v = NAN; break;
        default: break;
        }
        x->d[i] = v;
    }
    int bad = 0;
    const rlx_dtype tos[] = {RLX_F16, RLX_BF16};
    for (int t = 0; t < 2; t++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *xc = rt_clone(x);
        rlx_node y = rlx_cast(rg->g, rt_input(rg, RLX_F32, xc), tos[t]);
        rt_tensor *got = rt_run1(rg, y), *want = rt_clone(xc);
        rt_quantize(want, tos[t]);
        char what[64];
        snprintf(what, sizeof what, "cast f32 -> %s rounding", rlx_dtype_name(tos[t]));
        bad += !rt_check_tol(what, got, want, 0, 0);
        /* signs of zeros survive */
        if (got)
            for (int64_t i = 0; i < n; i++)
                if (want->d[i] == 0 && signbit(got->d[i]) != signbit(want->d[i])) {
                    fprintf(stderr, "%s: sign of zero lost at %lld\n", what, (long long)i);
                    bad++;
                    break;
                }
        rt_free(got);
        rt_free(want);
        rt_free(xc);
        rt_graph_free(rg);
    }
    rt_free(x);
    assert_int_equal(bad, 0);
}

/* f16 -> f32 -> f16 and bf16 -> f32 -> bf16 are identities; f32 -> f64 ->
 * f32 too; i32 -> i64 -> i32 too. */
static void test_cast_round_trips(void **state)
{
    (void)state;
    int bad = 0;
    const rlx_dtype pairs[][2] = {{RLX_F16, RLX_F32}, {RLX_BF16, RLX_F32}, {RLX_F32, RLX_F64},
                                  {RLX_F16, RLX_F64}, {RLX_I32, RLX_I64},  {RLX_I8, RLX_I32},
                                  {RLX_U8, RLX_I64},  {RLX_BOOL, RLX_U8},  {RLX_F16, RLX_BF16}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        rlx_dtype a = pairs[p][0], b = pairs[p][1];
        rt_graph *rg = rt_graph_new();
        rt_tensor *x;
        if (a == RLX_BOOL)
            x = rt_randb(RT_SHAPE(5, 13), 0.5);
        else if (a == RLX_U8)
            x = rt_randi(RT_SHAPE(5, 13), 0, 256);
        else if (a == RLX_I8)
            x = rt_randi(RT_SHAPE(5, 13), -128, 128);
        else if (a == RLX_I32)
            x = rt_randi(RT_SHAPE(5, 13), -2000000000, 2000000000);
        else
            x = rt_randn(RT_SHAPE(5, 13));
        if (a == RLX_F16 && b == RLX_BF16) /* values both can hold exactly: 8 significant bits */
            for (int64_t i = 0; i < x->n; i++)
                x->d[i] = rt_round_bf16(x->d[i]);
        rlx_node y = rlx_cast(rg->g, rlx_cast(rg->g, rt_input(rg, a, x), b), a);
        rt_tensor *got = rt_run1(rg, y);
        char what[64];
        snprintf(what, sizeof what, "cast %s -> %s -> %s", rlx_dtype_name(a), rlx_dtype_name(b), rlx_dtype_name(a));
        bad += !rt_check_tol(what, got, x, 0, 0);
        rt_free(got);
        rt_free(x);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

/* The public converters against the independent ones. */
static void test_public_converters(void **state)
{
    (void)state;
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = rt_f16_value((uint16_t)h), got = rlx_f16_to_f32((uint16_t)h);
        if (!(want == got || (isnan(want) && isnan(got)))) {
            if (bad++ < 5)
                fprintf(stderr, "rlx_f16_to_f32(0x%04x) = %.9g, want %.9g\n", h, got, want);
        }
        want = rt_bf16_value((uint16_t)h);
        got = rlx_bf16_to_f32((uint16_t)h);
        if (!(want == got || (isnan(want) && isnan(got)))) {
            if (bad++ < 5)
                fprintf(stderr, "rlx_bf16_to_f32(0x%04x) = %.9g, want %.9g\n", h, got, want);
        }
    }
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)rt_next_u64();
        float f;
        memcpy(&f, &u, 4);
        if (isnan(f))
            continue;
        uint16_t h = rlx_f32_to_f16(f), hw = rt_f16_bits(f);
        uint16_t b = rlx_f32_to_bf16(f), bw = rt_bf16_bits(f);
        if (h != hw && bad++ < 10)
            fprintf(stderr, "rlx_f32_to_f16(%.9g) = 0x%04x, want 0x%04x\n", (double)f, h, hw);
        if (b != bw && bad++ < 10)
            fprintf(stderr, "rlx_f32_to_bf16(%.9g) = 0x%04x, want 0x%04x\n", (double)f, b, bw);
    }
    /* NaN stays NaN */
    assert_true(isnan(rlx_f16_to_f32(rlx_f32_to_f16(NAN))));
    assert_true(isnan(rlx_bf16_to_f32(rlx_f32_to_bf16(NAN))));
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ bool */

static void test_bool_logic(void **state)
{
    (void)state;
    /* De Morgan and friends, built from the ops, against the reference */
    rt_graph *rg = rt_graph_new();
    rt_tensor *a = rt_randb(RT_SHAPE(6, 7), 0.5), *b = rt_randb(RT_SHAPE(7), 0.3);
    rt_tensor *x = rt_rand(RT_SHAPE(6, 7), -1, 1);
    rlx_node an = rt_input(rg, RLX_BOOL, a), bn = rt_input(rg, RLX_BOOL, b), xn = rt_input(rg, RLX_F32, x);
    rlx_node zero = rlx_scalar(rg->g, RLX_F32, 0.0);
    rlx_node pos = rlx_greater(rg->g, xn, zero);
    rlx_node e1 = rlx_not(rg->g, rlx_and(rg->g, an, bn));
    rlx_node e2 = rlx_xor(rg->g, rlx_or(rg->g, an, pos), bn);
    rlx_node e3 = rlx_equal(rg->g, an, bn); /* equal on bool */
    rlx_node e4 = rlx_cast(rg->g, rlx_and(rg->g, pos, an), RLX_F32);
    rlx_node outs[4] = {e1, e2, e3, e4};
    rt_tensor *got[4];
    rlx_status st = rt_run(rg, 4, outs, got);
    rt_tensor *posr = rt_new(2, x->dims);
    for (int64_t i = 0; i < x->n; i++)
        posr->d[i] = x->d[i] > 0;
    rt_tensor *t1 = rt_zip(a, b, rt_f_and), *t2 = rt_zip(a, posr, rt_f_or);
    rt_tensor *want[4] = {rt_map(t1, rt_f_not), rt_zip(t2, b, rt_f_xor), rt_zip(a, b, rt_f_equal),
                          rt_zip(posr, a, rt_f_and)};
    int bad = 0;
    const char *names[4] = {"not(a and b)", "(a or x>0) xor b", "a == b (bool)", "cast(x>0 and a)"};
    for (int i = 0; i < 4; i++) {
        bad += !rt_check_tol(names[i], st == RLX_OK ? got[i] : NULL, want[i], 0, 0);
        if (st == RLX_OK)
            rt_free(got[i]);
        rt_free(want[i]);
    }
    rt_free(t1);
    rt_free(t2);
    rt_free(posr);
    rt_free(a);
    rt_free(b);
    rt_free(x);
    rt_graph_free(rg);
    assert_int_equal(bad, 0);
}

/* Every vector length 1..70 and a few long ones: bulk conversion and
 * elementwise loops with SIMD bodies and scalar tails must all round alike. */
static void test_lengths_and_tails(void **state)
{
    (void)state;
    int bad = 0;
    for (int64_t n = 1; n <= 70 + 3; n++) {
        int64_t len = n <= 70 ? n : n == 71 ? 1023 : n == 72 ? 4097 : 70001;
        for (int t = 0; t < 2; t++) {
            rlx_dtype dt = t ? RLX_BF16 : RLX_F16;
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rt_new(1, &len), *a = rt_rand(1, &len, -4, 4), *b = rt_rand(1, &len, -4, 4);
            for (int64_t i = 0; i < len; i++) /* wide exponent range, f16 subnormals included */
                x->d[i] = ldexp(rt_uniform(1, 2), (int)rt_randint(-26, 16)) * (i & 1 ? -1 : 1);
            rlx_node xn = rt_input(rg, RLX_F32, x);
            rlx_node an = rt_input(rg, dt, a), bn = rt_input(rg, dt, b);
            rlx_node outs[4] = {rlx_cast(rg->g, xn, dt), rlx_add(rg->g, an, bn), rlx_mul(rg->g, an, bn),
                                rlx_cast(rg->g, an, RLX_F32)};
            rt_tensor *got[4] = {0};
            rlx_status st = rt_run(rg, 4, outs, got);
            rt_tensor *xq = rt_clone(x);
            rt_quantize(xq, dt);
            rt_tensor *sum = rt_zip(a, b, rt_f_add), *prod = rt_zip(a, b, rt_f_mul);
            rt_quantize(sum, dt); /* one rounding of the exact result */
            rt_quantize(prod, dt);
            rt_tensor *want[4] = {xq, sum, prod, rt_clone(a)};
            const char *names[4] = {"cast f32 ->", "add", "mul", "cast -> f32"};
            for (int i = 0; i < 4; i++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s, length %lld", names[i], rlx_dtype_name(dt), (long long)len);
                /* exact: the sum and product of two 16-bit floats are exact in f32, so one rounding */
                bad += !rt_check_tol(what, st == RLX_OK ? got[i] : NULL, want[i], 0, 0);
                rt_free(got[i]);
                rt_free(want[i]);
            }
            rt_free(x);
            rt_free(a);
            rt_free(b);
            rt_graph_free(rg);
        }
    }
    assert_int_equal(bad, 0);
}

/* Integer kernels on tensors large enough for their threaded paths. */
static void test_int_large(void **state)
{
    (void)state;
    int bad = 0;
    for (int d = 0; d < 4; d++) {
        rlx_dtype dt = k_ints[d];
        rt_graph *rg = rt_graph_new();
        int64_t lo = dt == RLX_U8 ? 0 : -10, hi = 11;
        rt_tensor *a = rt_randi(RT_SHAPE(300, 257), lo, hi), *b = rt_randi(RT_SHAPE(257), dt == RLX_U8 ? 1 : -10, hi);
        for (int64_t i = 0; i < b->n; i++)
            if (b->d[i] == 0)
                b->d[i] = 1;
        rlx_node an = rt_input(rg, dt, a), bn = rt_input(rg, dt, b);
        rlx_node outs[5] = {rlx_add(rg->g, an, bn), rlx_mul(rg->g, an, bn), rlx_div(rg->g, an, bn),
                            rlx_less(rg->g, an, bn), rlx_reduce_max(rg->g, an, 1, (int[]){0}, 0)};
        rt_tensor *got[5] = {0};
        rlx_status st = rt_run(rg, 5, outs, got);
        rt_tensor *want[5] = {rt_zip(a, b, rt_f_add), rt_zip(a, b, rt_f_mul), rt_zip(a, b, rt_f_idiv),
                              rt_zip(a, b, rt_f_less), rt_ref_reduce(a, RT_MAX, 1, (int[]){0}, 0)};
        const char *names[5] = {"add", "mul", "div", "less", "reduce_max"};
        for (int i = 0; i < 5; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s %s [300, 257]", names[i], rlx_dtype_name(dt));
            bad += !rt_check(what, st == RLX_OK ? got[i] : NULL, want[i], i == 3 ? RLX_BOOL : dt);
            rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_free(a);
        rt_free(b);
        rt_graph_free(rg);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_float_storage_unary, rt_setup),
        cmocka_unit_test_setup(test_float_storage_binary, rt_setup),
        cmocka_unit_test_setup(test_float_storage_reduce, rt_setup),
        cmocka_unit_test_setup(test_int_binary, rt_setup),
        cmocka_unit_test_setup(test_int64_exact, rt_setup),
        cmocka_unit_test_setup(test_int_unary, rt_setup),
        cmocka_unit_test_setup(test_int_reduce, rt_setup),
        cmocka_unit_test_setup(test_movement_all_dtypes, rt_setup),
        cmocka_unit_test_setup(test_cast_matrix, rt_setup),
        cmocka_unit_test_setup(test_cast_rounding, rt_setup),
        cmocka_unit_test_setup(test_cast_round_trips, rt_setup),
        cmocka_unit_test_setup(test_public_converters, rt_setup),
        cmocka_unit_test_setup(test_bool_logic, rt_setup),
        cmocka_unit_test_setup(test_lengths_and_tails, rt_setup),
        cmocka_unit_test_setup(test_int_large, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
