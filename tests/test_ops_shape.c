/* Shape and data-movement ops: reshape, transpose, slice, concat, split,
 * gather, expand, pad, against the float64 reference on random inputs. */
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

typedef struct shape {
    int ndim;
    int64_t dims[RT_MAXD];
} shape;

/* Checks one output and frees everything given. */
static int finish(const char *what, rt_graph *rg, rt_tensor *got, rt_tensor *want, rlx_dtype dt)
{
    int ok = rt_check(what, got, want, dt);
    rt_free(got);
    rt_free(want);
    rt_graph_free(rg);
    return !ok;
}

/* ------------------------------------------------------------ reshape */

static void test_reshape(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        shape in, to;
    } cases[] = {
        {{3, {2, 3, 4}}, {2, {6, 4}}},     {{3, {2, 3, 4}}, {1, {-1}}},       {{3, {2, 3, 4}}, {2, {4, -1}}},
        {{3, {2, 3, 4}}, {3, {0, -1, 2}}},                                                          /* 0 copies dim 0 */
        {{3, {2, 3, 4}}, {3, {0, 0, 4}}},  {{3, {2, 3, 4}}, {3, {1, 24, 1}}}, {{1, {1}}, {0, {0}}}, /* to a scalar */
        {{0, {0}}, {2, {1, 1}}},                                                                    /* from a scalar */
        {{2, {0, 3}}, {3, {0, 1, 3}}}, /* empty (0 copies the 0) */
        {{2, {7, 5}}, {4, {5, 1, 7, 1}}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int chained = 0; chained < 2; chained++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rt_rand(cases[c].in.ndim, cases[c].in.dims, -3, 3);
            rlx_node y = rlx_reshape(rg->g, rt_input(rg, RLX_F32, x), cases[c].to.ndim, cases[c].to.dims);
            if (chained) /* a reshape read by a kernel (a view as an operand) */
                y = rlx_exp(rg->g, y);
            rt_tensor *got = rt_run1(rg, y), *want = rt_ref_reshape(x, cases[c].to.ndim, cases[c].to.dims);
            if (chained && want) {
                rt_tensor *e = rt_map(want, rt_f_exp);
                rt_free(want);
                want = e;
            }
            char what[128];
            snprintf(what, sizeof what, "reshape %s -> %s%s", rt_shape_str(x->ndim, x->dims),
                     rt_shape_str(cases[c].to.ndim, cases[c].to.dims), chained ? " -> exp" : "");
            bad += finish(what, rg, got, want, RLX_F32);
            rt_free(x);
        }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ transpose */

static void test_transpose(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        shape in;
        int perm[RT_MAXD];
    } cases[] = {
        {{2, {3, 5}}, {1, 0}},
        {{2, {3, 5}}, {0, 1}},
        {{3, {2, 3, 4}}, {2, 0, 1}},
        {{3, {2, 3, 4}}, {1, 2, 0}},
        {{3, {2, 3, 4}}, {0, 2, 1}},
        {{4, {2, 3, 4, 5}}, {0, 2, 1, 3}}, /* the attention head swap */
        {{4, {2, 3, 4, 5}}, {3, 2, 1, 0}},
        {{4, {1, 3, 1, 5}}, {2, 3, 0, 1}},
        {{3, {0, 3, 2}}, {2, 1, 0}},
        {{1, {9}}, {0}},
        {{2, {33, 65}}, {1, 0}},
        {{5, {2, 1, 3, 2, 2}}, {4, 3, 2, 1, 0}},
        {{6, {1, 5, 7, 3, 2, 2}}, {0, 3, 1, 4, 2, 5}}, /* a pixel shuffle: pairs copied as one 8-byte value */
        {{5, {3, 4, 5, 3, 2}}, {2, 1, 0, 3, 4}},       /* a run of 6 values: too wide for one */
        {{4, {1, 3, 20, 37}}, {0, 2, 3, 1}},           /* NCHW to channels-last, rows of 3: tiled */
        {{3, {2, 5, 41}}, {0, 2, 1}},                  /* rows of 5 read at stride 41 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(cases[c].in.ndim, cases[c].in.dims, -3, 3);
        rlx_node y = rlx_transpose(rg->g, rt_input(rg, RLX_F32, x), cases[c].perm);
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_transpose(x, cases[c].perm);
        char what[128];
        snprintf(what, sizeof what, "transpose %s", rt_shape_str(x->ndim, x->dims));
        bad += finish(what, rg, got, want, RLX_F32);
        rt_free(x);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ slice */

typedef struct slice_case {
    shape in;
    int naxes;
    int axes[4];
    int64_t starts[4], ends[4], steps[4];
} slice_case;

static void test_slice(void **state)
{
    (void)state;
    int bad = 0;
    const slice_case cases[] = {
        {{1, {10}}, 1, {0}, {2}, {8}, {1}},
        {{1, {10}}, 1, {0}, {1}, {10}, {3}},
        {{1, {10}}, 1, {0}, {8}, {2}, {-1}},
        {{1, {10}}, 1, {0}, {-3}, {100}, {1}},        /* negative start, end clamped */
        {{1, {10}}, 1, {0}, {-100}, {-2}, {1}},       /* start clamped to 0 */
        {{1, {10}}, 1, {0}, {-1}, {-100}, {-2}},      /* reverse with step 2 */
        {{1, {10}}, 1, {0}, {-1}, {INT64_MIN}, {-1}}, /* whole reverse */
        {{1, {10}}, 1, {0}, {0}, {INT64_MAX}, {4}},
        {{1, {10}}, 1, {0}, {5}, {5}, {1}},     /* empty */
        {{1, {10}}, 1, {0}, {8}, {2}, {1}},     /* empty: start after end */
        {{1, {10}}, 1, {-1}, {100}, {3}, {-3}}, /* negative axis, start clamped to 9 */
        {{3, {4, 6, 5}}, 2, {0, 2}, {1, 0}, {4, 5}, {2, 2}},
        {{3, {4, 6, 5}}, 2, {-1, 1}, {4, -1}, {-6, 0}, {-1, -2}},
        {{3, {4, 6, 5}}, 1, {1}, {1}, {2}, {1}}, /* size-1 result dim */
        {{3, {4, 6, 5}}, 3, {0, 1, 2}, {3, 5, 4}, {-5, -7, -6}, {-1, -1, -1}},
        {{4, {2, 3, 4, 5}}, 1, {-2}, {1}, {3}, {1}}, /* a contiguous block */
        {{2, {0, 5}}, 1, {1}, {1}, {4}, {1}},        /* empty input */
        {{2, {3, 1}}, 1, {1}, {0}, {1}, {1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const slice_case *s = &cases[c];
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(s->in.ndim, s->in.dims, -3, 3);
        rlx_node y = rlx_slice(rg->g, rt_input(rg, RLX_F32, x), s->naxes, s->axes, s->starts, s->ends, s->steps);
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_slice(x, s->naxes, s->axes, s->starts, s->ends, s->steps);
        char what[128];
        snprintf(what, sizeof what, "slice case %zu of %s", c, rt_shape_str(x->ndim, x->dims));
        bad += finish(what, rg, got, want, RLX_F32);
        rt_free(x);
    }
    assert_int_equal(bad, 0);
}

/* A slice read by a kernel and a slice of a slice. */
static void test_slice_chained(void **state)
{
    (void)state;
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(6, 8), -3, 3);
    rlx_node xn = rt_input(rg, RLX_F32, x);
    rlx_node a = rlx_slice(rg->g, xn, 1, (int[]){0}, (int64_t[]){1}, (int64_t[]){5}, (int64_t[]){1});
    rlx_node b = rlx_slice(rg->g, a, 1, (int[]){1}, (int64_t[]){7}, (int64_t[]){0}, (int64_t[]){-2});
    rlx_node y = rlx_add(rg->g, b, b);
    rt_tensor *got = rt_run1(rg, y);
    rt_tensor *ar = rt_ref_slice(x, 1, (int[]){0}, (int64_t[]){1}, (int64_t[]){5}, (int64_t[]){1});
    rt_tensor *br = rt_ref_slice(ar, 1, (int[]){1}, (int64_t[]){7}, (int64_t[]){0}, (int64_t[]){-2});
    rt_tensor *want = rt_zip(br, br, rt_f_add);
    int bad = finish("slice of slice, then add", rg, got, want, RLX_F32);
    rt_free(ar);
    rt_free(br);
    rt_free(x);
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ concat / split */

static void test_concat(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        int n;
        shape in[3];
        int axis;
    } cases[] = {
        {2, {{2, {2, 3}}, {2, {4, 3}}}, 0},
        {2, {{2, {2, 3}}, {2, {2, 5}}}, 1},
        {2, {{2, {2, 3}}, {2, {2, 5}}}, -1},
        {3, {{3, {2, 1, 4}}, {3, {2, 3, 4}}, {3, {2, 2, 4}}}, 1},
        {3, {{3, {2, 3, 1}}, {3, {2, 3, 2}}, {3, {2, 3, 1}}}, -1},
        {3, {{3, {1, 3, 4}}, {3, {2, 3, 4}}, {3, {1, 3, 4}}}, -3},
        {2, {{2, {0, 3}}, {2, {2, 3}}}, 0}, /* an empty part */
        {2, {{2, {2, 0}}, {2, {2, 0}}}, 0}, /* all empty */
        {1, {{2, {3, 4}}}, 1},              /* one input */
        {2, {{1, {1}}, {1, {1}}}, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *xs[3];
        rlx_node ns[3];
        for (int i = 0; i < cases[c].n; i++) {
            xs[i] = rt_rand(cases[c].in[i].ndim, cases[c].in[i].dims, -3, 3);
            ns[i] = rt_input(rg, RLX_F32, xs[i]);
        }
        rlx_node y = rlx_concat(rg->g, cases[c].n, ns, cases[c].axis);
        rt_tensor *got = rt_run1(rg, y);
        rt_tensor *want = rt_ref_concat(cases[c].n, (const rt_tensor *const *)xs, cases[c].axis);
        char what[128];
        snprintf(what, sizeof what, "concat case %zu axis %d", c, cases[c].axis);
        bad += finish(what, rg, got, want, RLX_F32);
        for (int i = 0; i < cases[c].n; i++)
            rt_free(xs[i]);
    }
    /* the same node twice */
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(2, 3), -3, 3);
    rlx_node xn = rt_input(rg, RLX_F32, x);
    rlx_node y = rlx_concat(rg->g, 2, (rlx_node[]){xn, xn}, 1);
    rt_tensor *got = rt_run1(rg, y);
    const rt_tensor *pair[2] = {x, x};
    bad += finish("concat x with itself", rg, got, rt_ref_concat(2, pair, 1), RLX_F32);
    rt_free(x);
    assert_int_equal(bad, 0);
}

static void test_split(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        shape in;
        int axis, n;
        int64_t sizes[4];
    } cases[] = {
        {{2, {10, 4}}, 0, 2, {3, 7}},
        {{2, {10, 4}}, -1, 3, {1, 1, 2}},
        {{3, {2, 6, 3}}, 1, 3, {2, 2, 2}},
        {{3, {2, 6, 3}}, 1, 3, {0, 6, 0}}, /* empty parts */
        {{1, {5}}, 0, 1, {5}},
        {{3, {4, 3, 8}}, -1, 4, {1, 3, 2, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(cases[c].in.ndim, cases[c].in.dims, -3, 3);
        rlx_node outs[4] = {-1, -1, -1, -1};
        rlx_status st = rlx_split(rg->g, rt_input(rg, RLX_F32, x), cases[c].axis, cases[c].n, cases[c].sizes, outs);
        if (st != RLX_OK) {
            fprintf(stderr, "split case %zu: %s: %s\n", c, rlx_status_name(st), rlx_last_error());
            bad++;
            rt_graph_free(rg);
            rt_free(x);
            continue;
        }
        rt_tensor *got[4] = {0}, *want[4] = {0};
        rt_run(rg, cases[c].n, outs, got);
        rt_ref_split(x, cases[c].axis, cases[c].n, cases[c].sizes, want);
        for (int i = 0; i < cases[c].n; i++) {
            char what[96];
            snprintf(what, sizeof what, "split case %zu part %d", c, i);
            bad += !rt_check(what, got[i], want[i], RLX_F32);
            rt_free(got[i]);
            rt_free(want[i]);
        }
        rt_graph_free(rg);
        rt_free(x);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ gather */

static void test_gather(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        shape data, idx;
        int axis;
    } cases[] = {
        {{2, {10, 4}}, {1, {3}}, 0},    /* embedding lookup */
        {{2, {10, 4}}, {2, {2, 3}}, 0}, /* 2-d token ids */
        {{2, {10, 4}}, {1, {5}}, 1},    {{3, {3, 5, 2}}, {2, {2, 2}}, -2},
        {{3, {3, 5, 2}}, {1, {4}}, -1}, {{2, {10, 4}}, {0, {0}}, 0}, /* scalar index drops the axis */
        {{2, {10, 4}}, {1, {0}}, 0},                                 /* no indices: empty result */
        {{1, {7}}, {3, {2, 1, 3}}, 0},  {{2, {1, 6}}, {1, {4}}, 0},  /* size-1 axis: every index 0 or -1 */
    };
    const rlx_dtype idt[] = {RLX_I64, RLX_I32};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int t = 0; t < 2; t++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *d = rt_rand(cases[c].data.ndim, cases[c].data.dims, -3, 3);
            int a = cases[c].axis < 0 ? cases[c].axis + d->ndim : cases[c].axis;
            int64_t len = d->dims[a];
            /* indices in [-len, len): negatives wrap */
            rt_tensor *ix = rt_randi(cases[c].idx.ndim, cases[c].idx.dims, -len, len);
            rlx_node y = rlx_gather(rg->g, rt_input(rg, RLX_F32, d), rt_input(rg, idt[t], ix), cases[c].axis);
            rt_tensor *got = rt_run1(rg, y), *want = rt_ref_gather(d, ix, cases[c].axis);
            char what[160];
            snprintf(what, sizeof what, "gather %s[%s %s] axis %d", rt_shape_str(d->ndim, d->dims),
                     rlx_dtype_name(idt[t]), rt_shape_str(ix->ndim, ix->dims), cases[c].axis);
            bad += finish(what, rg, got, want, RLX_F32);
            rt_free(d);
            rt_free(ix);
        }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ expand */

static void test_expand(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        shape in, to;
    } cases[] = {
        {{2, {3, 1}}, {2, {3, 4}}},
        {{1, {1}}, {2, {2, 3}}},
        {{1, {4}}, {3, {2, 3, 4}}},
        {{3, {2, 1, 3}}, {3, {2, 5, 3}}},
        {{2, {3, 1}}, {2, {1, 4}}}, /* result is the broadcast of both: [3, 4] */
        {{2, {3, 4}}, {1, {1}}},    /* target smaller: stays [3, 4] */
        {{0, {0}}, {2, {2, 2}}},    /* scalar */
        {{2, {1, 4}}, {2, {0, 4}}}, /* to empty */
        {{4, {1, 3, 1, 1}}, {4, {2, 3, 4, 5}}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        rt_graph *rg = rt_graph_new();
        rt_tensor *x = rt_rand(cases[c].in.ndim, cases[c].in.dims, -3, 3);
        rlx_node y = rlx_expand(rg->g, rt_input(rg, RLX_F32, x), cases[c].to.ndim, cases[c].to.dims);
        rt_tensor *got = rt_run1(rg, y), *want = rt_ref_expand(x, cases[c].to.ndim, cases[c].to.dims);
        char what[128];
        snprintf(what, sizeof what, "expand %s to %s", rt_shape_str(x->ndim, x->dims),
                 rt_shape_str(cases[c].to.ndim, cases[c].to.dims));
        bad += finish(what, rg, got, want, RLX_F32);
        rt_free(x);
    }
    assert_int_equal(bad, 0);
}

/* ------------------------------------------------------------ pad */

static void test_pad(void **state)
{
    (void)state;
    int bad = 0;
    const struct {
        shape in;
        int64_t pads[8];
    } cases[] = {
        {{1, {5}}, {2, 3}},
        {{1, {5}}, {0, 4}},
        {{1, {5}}, {4, 0}},
        {{2, {3, 4}}, {1, 2, 2, 1}},
        {{2, {3, 4}}, {0, 0, 0, 0}},
        {{2, {3, 4}}, {2, 0, 2, 3}},
        {{3, {2, 3, 4}}, {0, 1, 2, 1, 2, 3}},
        {{4, {1, 2, 3, 4}}, {0, 0, 1, 1, 0, 0, 2, 3}}, /* image-style H/W padding */
        {{2, {1, 4}}, {0, 1, 0, 2}},                   /* size-1 dim left alone (reflect needs pad < dim) */
    };
    const rlx_pad_mode modes[] = {RLX_PAD_CONSTANT, RLX_PAD_REFLECT, RLX_PAD_EDGE};
    const char *names[] = {"constant", "reflect", "edge"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int m = 0; m < 3; m++) {
            rt_graph *rg = rt_graph_new();
            rt_tensor *x = rt_rand(cases[c].in.ndim, cases[c].in.dims, -3, 3);
            double value = rt_uniform(-5, 5);
            rlx_node y = rlx_pad(rg->g, rt_input(rg, RLX_F32, x), cases[c].pads, modes[m], value);
            rt_tensor *got = rt_run1(rg, y);
            rt_tensor *want = rt_ref_pad(x, cases[c].pads, modes[m], rt_to_dtype(value, RLX_F32));
            char what[128];
            snprintf(what, sizeof what, "pad %s case %zu of %s", names[m], c, rt_shape_str(x->ndim, x->dims));
            bad += finish(what, rg, got, want, RLX_F32);
            rt_free(x);
        }
    /* constant padding of an empty tensor: all value */
    rt_graph *rg = rt_graph_new();
    rt_tensor *x = rt_rand(RT_SHAPE(0, 3), -1, 1);
    const int64_t pads[4] = {1, 0, 1, 2};
    rlx_node y = rlx_pad(rg->g, rt_input(rg, RLX_F32, x), pads, RLX_PAD_CONSTANT, 1.5);
    bad += finish("constant pad of [0, 3]", rg, rt_run1(rg, y), rt_ref_pad(x, pads, RLX_PAD_CONSTANT, 1.5), RLX_F32);
    rt_free(x);
    assert_int_equal(bad, 0);
}

/* Tensors large enough for the kernels' multi-threaded paths. */
static void test_shape_large(void **state)
{
    (void)state;
    int bad = 0;
    rt_graph *rg;
    rt_tensor *x = rt_rand(RT_SHAPE(64, 128, 9), -3, 3), *z = rt_rand(RT_SHAPE(64, 128, 9), -3, 3);
    /* rounded up front: below, the reference may be evaluated before rt_input rounds */
    rt_quantize(x, RLX_F32);
    rt_quantize(z, RLX_F32);
    const int perm[3] = {2, 0, 1};
    rg = rt_graph_new();
    bad += finish("transpose [64, 128, 9]", rg, rt_run1(rg, rlx_transpose(rg->g, rt_input(rg, RLX_F32, x), perm)),
                  rt_ref_transpose(x, perm), RLX_F32);
    const int ax[2] = {1, -1};
    const int64_t st[2] = {-1, 1}, en[2] = {INT64_MIN, 9}, sp[2] = {-3, 2};
    rg = rt_graph_new();
    bad += finish("slice [64, 128, 9]", rg, rt_run1(rg, rlx_slice(rg->g, rt_input(rg, RLX_F32, x), 2, ax, st, en, sp)),
                  rt_ref_slice(x, 2, ax, st, en, sp), RLX_F32);
    const rt_tensor *xz[2] = {x, z};
    rg = rt_graph_new();
    rlx_node xn = rt_input(rg, RLX_F32, x), zn = rt_input(rg, RLX_F32, z);
    bad += finish("concat 2 x [64, 128, 9] axis 1", rg, rt_run1(rg, rlx_concat(rg->g, 2, (rlx_node[]){xn, zn}, 1)),
                  rt_ref_concat(2, xz, 1), RLX_F32);
    const int64_t pads[6] = {1, 2, 3, 2, 1, 0};
    const rlx_pad_mode modes[3] = {RLX_PAD_CONSTANT, RLX_PAD_REFLECT, RLX_PAD_EDGE};
    for (int m = 0; m < 3; m++) {
        rg = rt_graph_new();
        bad +=
            finish("pad [64, 128, 9]", rg, rt_run1(rg, rlx_pad(rg->g, rt_input(rg, RLX_F32, x), pads, modes[m], 0.5)),
                   rt_ref_pad(x, pads, modes[m], 0.5), RLX_F32);
    }
    rt_tensor *emb = rt_rand(RT_SHAPE(5000, 64), -1, 1), *ids = rt_randi(RT_SHAPE(3, 300), -5000, 5000);
    rt_quantize(emb, RLX_F32);
    rg = rt_graph_new();
    bad += finish("gather [5000, 64][3, 300]", rg,
                  rt_run1(rg, rlx_gather(rg->g, rt_input(rg, RLX_F32, emb), rt_input(rg, RLX_I64, ids), 0)),
                  rt_ref_gather(emb, ids, 0), RLX_F32);
    rt_tensor *row = rt_rand(RT_SHAPE(1, 300), -1, 1);
    rt_quantize(row, RLX_F32);
    rg = rt_graph_new();
    bad += finish("expand [1, 300] to [200, 300]", rg,
                  rt_run1(rg, rlx_expand(rg->g, rt_input(rg, RLX_F32, row), 2, (int64_t[]){200, 300})),
                  rt_ref_expand(row, 2, (int64_t[]){200, 300}), RLX_F32);
    rt_free(x);
    rt_free(z);
    rt_free(emb);
    rt_free(ids);
    rt_free(row);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reshape, rt_setup), cmocka_unit_test_setup(test_transpose, rt_setup),
        cmocka_unit_test_setup(test_slice, rt_setup),   cmocka_unit_test_setup(test_slice_chained, rt_setup),
        cmocka_unit_test_setup(test_concat, rt_setup),  cmocka_unit_test_setup(test_split, rt_setup),
        cmocka_unit_test_setup(test_gather, rt_setup),  cmocka_unit_test_setup(test_expand, rt_setup),
        cmocka_unit_test_setup(test_pad, rt_setup),     cmocka_unit_test_setup(test_shape_large, rt_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
