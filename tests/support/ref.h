/* ref.h - test support: an independent float64 reference for every op of
 * rlx.h, random tensors, dtype conversion, tolerant comparison, and a small
 * harness that builds a graph through the public API, compiles it for the
 * CPU, feeds inputs and reads outputs back as float64 tensors.
 *
 * The reference is written from the semantics documented in rlx.h, not from
 * the library's code: it shares no code with src/ (only the public header).
 *
 * Randomness: one generator per test program, seeded from the clock (printed
 * at start) unless RLX_TEST_SEED is set; a failing comparison prints the seed
 * so the run can be repeated exactly. */
#ifndef RLX_TEST_REF_H
#define RLX_TEST_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

#define RT_MAXD 8

/* A dense row-major tensor of doubles.  Integer and bool tensors hold
 * integral values (bool: 0 or 1). */
typedef struct rt_tensor {
    int ndim;
    int64_t dims[RT_MAXD];
    int64_t n; /* element count */
    double *d;
} rt_tensor;

/* Shape literal: RT_SHAPE(2, 3, 4) expands to `3, (int64_t[]){2, 3, 4}`. */
#define RT_SHAPE(...) \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }

/* ------------------------------------------------------------- random */

/* Seeds the generator (once per process; later calls do nothing) and
 * prints the seed.  Called implicitly by every random helper. */
void rt_seed_init(void);
uint64_t rt_seed(void);
/* Re-seeds with rt_seed() mixed with `salt` (e.g. a test's index), so a test
 * draws the same values whatever ran before it. */
void rt_reseed(uint64_t salt);
uint64_t rt_next_u64(void);
double rt_uniform(double lo, double hi);    /* [lo, hi) */
double rt_normal(void);                     /* standard normal */
int64_t rt_randint(int64_t lo, int64_t hi); /* [lo, hi) */
/* cmocka setup function that re-seeds per test (by a counter), usable with
 * cmocka_unit_test_setup. */
int rt_setup(void **state);

/* ------------------------------------------------------------ tensors */

rt_tensor *rt_new(int ndim, const int64_t *dims); /* zero filled */
rt_tensor *rt_clone(const rt_tensor *t);
void rt_free(rt_tensor *t);
/* Uniform in [lo, hi). */
rt_tensor *rt_rand(int ndim, const int64_t *dims, double lo, double hi);
/* Uniform in [lo, hi) with |x| >= gap (keeps values off a discontinuity). */
rt_tensor *rt_rand_away(int ndim, const int64_t *dims, double lo, double hi, double gap);
rt_tensor *rt_randn(int ndim, const int64_t *dims);
/* Integers in [lo, hi). */
rt_tensor *rt_randi(int ndim, const int64_t *dims, int64_t lo, int64_t hi);
/* 0/1 with probability p of 1. */
rt_tensor *rt_randb(int ndim, const int64_t *dims, double p);
rt_tensor *rt_from(int ndim, const int64_t *dims, const double *vals);

int64_t rt_numel(int ndim, const int64_t *dims);
bool rt_same_shape(const rt_tensor *a, const rt_tensor *b);
/* "[2, 3, 4]" (static buffer rotated over 4 calls). */
const char *rt_shape_str(int ndim, const int64_t *dims);
/* Element offset of a multi-index; multi-index of an offset. */
int64_t rt_ravel(int ndim, const int64_t *dims, const int64_t *idx);
void rt_unravel(int64_t off, int ndim, const int64_t *dims, int64_t *idx);
/* Offset into t of an index of a broadcast result of rank out_ndim
 * (numpy rules: right-aligned, size-1 dims repeat). */
int64_t rt_bcast_off(const rt_tensor *t, int out_ndim, const int64_t *out_idx);

/* --------------------------------------------------------- dtypes */

/* The value x takes when stored as dtype t (round to nearest even for the
 * 16-bit floats and f32; integers wrap like a two's complement store;
 * bool: x != 0). Written independently of the library's converters. */
double rt_round_f16(double x);
double rt_round_bf16(double x);
double rt_to_dtype(double x, rlx_dtype t);
/* Rounds every element to dtype t in place. */
void rt_quantize(rt_tensor *t, rlx_dtype dt);
/* Packs to a newly allocated buffer of dtype dt (bytes written to *bytes). */
void *rt_pack(const rt_tensor *t, rlx_dtype dt, size_t *bytes);
rt_tensor *rt_unpack(rlx_dtype dt, int ndim, const int64_t *dims, const void *buf);
/* Independent bit encoders for f16/bf16 (from doubles). */
uint16_t rt_f16_bits(double x);
uint16_t rt_bf16_bits(double x);
double rt_f16_value(uint16_t h);
double rt_bf16_value(uint16_t h);

/* --------------------------------------------------------- compare */

/* Default tolerances for results stored in dtype dt: |got - want| <=
 * atol * max(1, max|want|) + rtol * |want|.  f32 1e-5, f16 1e-3, bf16 1e-2,
 * f64 1e-10, integers and bool exact. */
void rt_default_tol(rlx_dtype dt, double *rtol, double *atol);
/* Compares shapes and values; NaN equals NaN, infinities must match.  On
 * failure prints what, the seed, the shapes, the worst element (index, got,
 * want) and the number of mismatches; returns false. */
bool rt_check(const char *what, const rt_tensor *got, const rt_tensor *want, rlx_dtype dt);
bool rt_check_tol(const char *what, const rt_tensor *got, const rt_tensor *want, double rtol, double atol);
/* Like rt_check_tol but atol is absolute (not scaled by the largest |want|):
 * for elementwise results, where each element's error follows its own size. */
bool rt_check_abs(const char *what, const rt_tensor *got, const rt_tensor *want, double rtol, double atol);

/* --------------------------------------------------------- harness */

#define RT_MAX_BIND 16

typedef struct rt_bind {
    char name[32];
    rlx_dtype dt;
    int kind; /* 0 input, 1 param */
    const rt_tensor *t;
} rt_bind;

typedef struct rt_graph {
    rlx_graph *g;
    int n_bind;
    rt_bind bind[RT_MAX_BIND];
    rlx_options opts;  /* rlx_options_init, CPU; tests may change it */
    rlx_status status; /* of the last rt_run */
} rt_graph;

rt_graph *rt_graph_new(void);
void rt_graph_free(rt_graph *rg);
/* Declares an input (param, constant) holding t in dtype dt.  t is rounded
 * to dt in place first, so the reference sees exactly what RLX is fed.  The
 * tensor must outlive the run. */
rlx_node rt_input(rt_graph *rg, rlx_dtype dt, rt_tensor *t);
rlx_node rt_param(rt_graph *rg, rlx_dtype dt, rt_tensor *t);
rlx_node rt_const(rt_graph *rg, rlx_dtype dt, rt_tensor *t);
/* Marks outs as outputs "out0".., compiles with rg->opts, binds every input
 * and param, runs once and reads every output into res[i] (float64, with
 * the node's shape).  Returns RLX_OK or the failing status (and prints the
 * message). */
rlx_status rt_run(rt_graph *rg, int nout, const rlx_node *outs, rt_tensor **res);
/* One output; NULL on failure (the message is printed). */
rt_tensor *rt_run1(rt_graph *rg, rlx_node out);

/* ------------------------------------------------- reference ops */

typedef double (*rt_fn1)(double);
typedef double (*rt_fn2)(double, double);

/* Scalar functions with the documented semantics. */
double rt_f_neg(double x);
double rt_f_abs(double x);
double rt_f_exp(double x);
double rt_f_log(double x);
double rt_f_sqrt(double x);
double rt_f_rsqrt(double x);
double rt_f_reciprocal(double x);
double rt_f_tanh(double x);
double rt_f_sigmoid(double x);
double rt_f_relu(double x);
double rt_f_gelu(double x);
double rt_f_gelu_tanh(double x);
double rt_f_silu(double x);
double rt_f_erf(double x);
double rt_f_sin(double x);
double rt_f_cos(double x);
double rt_f_floor(double x);
double rt_f_ceil(double x);
double rt_f_round(double x); /* half to even */
double rt_f_sign(double x);
double rt_f_not(double x);

double rt_f_add(double a, double b);
double rt_f_sub(double a, double b);
double rt_f_mul(double a, double b);
double rt_f_div(double a, double b);
double rt_f_idiv(double a, double b); /* integer division, truncating */
double rt_f_pow(double a, double b);
double rt_f_max(double a, double b);
double rt_f_min(double a, double b);
double rt_f_mod_py(double a, double b); /* sign of the divisor */
double rt_f_mod_c(double a, double b);  /* sign of the dividend */
double rt_f_equal(double a, double b);
double rt_f_less(double a, double b);
double rt_f_greater(double a, double b);
double rt_f_and(double a, double b);
double rt_f_or(double a, double b);
double rt_f_xor(double a, double b);

rt_tensor *rt_map(const rt_tensor *x, rt_fn1 f);
/* numpy broadcast of two shapes; false if incompatible. */
bool rt_bcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out);
rt_tensor *rt_zip(const rt_tensor *a, const rt_tensor *b, rt_fn2 f);
rt_tensor *rt_ref_where(const rt_tensor *c, const rt_tensor *a, const rt_tensor *b);
rt_tensor *rt_ref_clip(const rt_tensor *x, double lo, double hi);

rt_tensor *rt_ref_matmul(const rt_tensor *a, const rt_tensor *b, int trans_a, int trans_b);

typedef enum rt_reduce { RT_SUM, RT_MEAN, RT_MAX, RT_MIN, RT_PROD } rt_reduce;
rt_tensor *rt_ref_reduce(const rt_tensor *x, rt_reduce kind, int naxes, const int *axes, int keepdims);
rt_tensor *rt_ref_arg(const rt_tensor *x, int axis, int keepdims, int is_max);
rt_tensor *rt_ref_softmax(const rt_tensor *x, int axis, int log);
rt_tensor *rt_ref_layer_norm(const rt_tensor *x, const rt_tensor *gamma, const rt_tensor *beta, double eps);
rt_tensor *rt_ref_rms_norm(const rt_tensor *x, const rt_tensor *gamma, double eps);
/* Inference batch norm over axis 1 (all parameters [C]). */
rt_tensor *rt_ref_batch_norm(const rt_tensor *x, const rt_tensor *scale, const rt_tensor *bias, const rt_tensor *mean,
                             const rt_tensor *var, double eps);

/* Resolves -1 and 0 like rlx_reshape. */
rt_tensor *rt_ref_reshape(const rt_tensor *x, int ndim, const int64_t *dims);
rt_tensor *rt_ref_transpose(const rt_tensor *x, const int *perm);
rt_tensor *rt_ref_slice(const rt_tensor *x, int naxes, const int *axes, const int64_t *starts, const int64_t *ends,
                        const int64_t *steps);
rt_tensor *rt_ref_concat(int n, const rt_tensor *const *xs, int axis);
void rt_ref_split(const rt_tensor *x, int axis, int n, const int64_t *sizes, rt_tensor **outs);
rt_tensor *rt_ref_gather(const rt_tensor *data, const rt_tensor *idx, int axis);
rt_tensor *rt_ref_expand(const rt_tensor *x, int ndim, const int64_t *dims);
rt_tensor *rt_ref_pad(const rt_tensor *x, const int64_t *pads, rlx_pad_mode mode, double value);

rt_tensor *rt_ref_rope(const rt_tensor *x, double theta, int64_t offset, int interleaved);
/* mask may be NULL; mask_is_bool selects keep-mask vs additive. */
rt_tensor *rt_ref_attention(const rt_tensor *q, const rt_tensor *k, const rt_tensor *v, const rt_tensor *mask,
                            int mask_is_bool, int causal, double scale);
/* bias may be NULL. */
rt_tensor *rt_ref_conv(const rt_tensor *x, const rt_tensor *w, const rt_tensor *bias, const rlx_conv_params *p);
rt_tensor *rt_ref_pool(const rt_tensor *x, const rlx_pool_params *p, int is_max);
rt_tensor *rt_ref_global_avg_pool(const rt_tensor *x);

#endif
