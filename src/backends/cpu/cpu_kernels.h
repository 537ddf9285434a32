/* cpu_kernels.h - shared pieces of the CPU reference backend's kernels.
 *
 * Each kernel family (one file) registers its kernels into the backend's
 * table, indexed by op; the backend's claim is derived from that table.
 * A kernel reads t->in[i] (shape/dtype in t->in_node[i]) and writes t->out
 * (t->node); every pointer was resolved at compile time.  Kernels compute
 * in f32 or wider and store in the node's dtype (f16/bf16 are storage). */
#ifndef RLX_CPU_KERNELS_H
#define RLX_CPU_KERNELS_H

#include <math.h>
#include <string.h>

#include "backends/backend.h"
#include "backends/cpu/cpu_pool.h" /* rlx_cpu_parallel: every parallel loop */
#include "ir/op_math.h"            /* the scalar math, shared with the CUDA kernels and the ONNX folder */

typedef struct rlx_cpu_kernel {
    rlx_kernel_fn fn;
    /* Workspace per call (may depend on the thread count); NULL = none. */
    size_t (*scratch)(const rlx_graph *g, const rlx_node_data *n, int threads);
    /* Optional: what the kernel derives once from the node, malloc'd into
     * t->state (the backend's release frees it). */
    rlx_status (*prepare)(const rlx_graph *g, rlx_thunk *t);
    /* Optional: frees what prepare made inside t->state, before the
     * backend frees t->state. */
    void (*release)(rlx_thunk *t);
    /* Optional: the claim for this node (NULL: every node of the op). */
    bool (*claims)(const rlx_graph *g, const rlx_node_data *n);
} rlx_cpu_kernel;

/* t->state = RoPE's cos/sin table [S][D/2][2] (double, rlx_rope_table),
 * for a rope op or an attention block, once at prepare. */
rlx_status rlx_cpu_rope_state(rlx_thunk *t, int64_t S, int64_t D, double theta, int64_t offset);

/* Registration, one per family file. */
void rlx_cpu_register_elementwise(rlx_cpu_kernel *table);
void rlx_cpu_register_quant(rlx_cpu_kernel *table);
void rlx_cpu_register_int8(rlx_cpu_kernel *table);
void rlx_cpu_register_int8_conv(rlx_cpu_kernel *table);
void rlx_cpu_register_train(rlx_cpu_kernel *table);
void rlx_cpu_register_matmul(rlx_cpu_kernel *table);
void rlx_cpu_register_reduce(rlx_cpu_kernel *table);
void rlx_cpu_register_norm(rlx_cpu_kernel *table);
void rlx_cpu_register_shape(rlx_cpu_kernel *table);
void rlx_cpu_register_nn(rlx_cpu_kernel *table);
/* Whether the CPU runs this channels-last pool itself (kernels_nn.c). */
bool rlx_cpu_pool_nhwc_claim(const rlx_graph *g, const rlx_node_data *n);
void rlx_cpu_register_conv(rlx_cpu_kernel *table);
void rlx_cpu_register_random(rlx_cpu_kernel *table);
void rlx_cpu_register_fused(rlx_cpu_kernel *table);
/* Whether the kernel table has op (test_op_table checks every op). */
bool rlx_cpu_has_kernel(rlx_op op);

/* Element access by dtype (index in elements). */
static inline double rlx_load(const void *p, rlx_dtype t, int64_t i)
{
    switch (t) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    case RLX_F64: return ((const double *)p)[i];
    case RLX_I64: return (double)((const int64_t *)p)[i];
    case RLX_I32: return ((const int32_t *)p)[i];
    case RLX_I8: return ((const int8_t *)p)[i];
    case RLX_U8: return ((const uint8_t *)p)[i];
    case RLX_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
    }
}

/* Integer load (exact for i64). */
static inline int64_t rlx_load_i(const void *p, rlx_dtype t, int64_t i)
{
    switch (t) {
    case RLX_I64: return ((const int64_t *)p)[i];
    case RLX_I32: return ((const int32_t *)p)[i];
    case RLX_I8: return ((const int8_t *)p)[i];
    case RLX_U8: return ((const uint8_t *)p)[i];
    case RLX_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return (int64_t)rlx_load(p, t, i);
    }
}

static inline void rlx_store(void *p, rlx_dtype t, int64_t i, double v)
{
    switch (t) {
    case RLX_F32: ((float *)p)[i] = (float)v; break;
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16((float)v); break;
    case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16((float)v); break;
    case RLX_F64: ((double *)p)[i] = v; break;
    case RLX_I64: ((int64_t *)p)[i] = rlx_sat_i64(v, -9223372036854775808.0, 9223372036854774784.0); break;
    case RLX_I32: ((int32_t *)p)[i] = (int32_t)rlx_sat_i64(v, -2147483648.0, 2147483647.0); break;
    case RLX_I8: ((int8_t *)p)[i] = (int8_t)rlx_sat_i64(v, -128, 127); break;
    case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)rlx_sat_i64(v, 0, 255); break;
    case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: break;
    }
}

static inline void rlx_store_i(void *p, rlx_dtype t, int64_t i, int64_t v)
{
    switch (t) {
    case RLX_I64: ((int64_t *)p)[i] = v; break;
    case RLX_I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case RLX_I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case RLX_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case RLX_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: rlx_store(p, t, i, (double)v); break;
    }
}

/* c[j] = act(c[j] + bias[j]) for n f32 values (bias NULL: none), the fused
 * epilogues' vectorised f32 math (kernels_fused.c). */
void rlx_cpu_act_f32(int act, float *restrict c, const float *restrict bias, int64_t n);
/* y = op(x) for n f32 values, the unary kernel's f32 math (kernels_elementwise.c). */
void rlx_cpu_unary_f32(rlx_op op, const float *x, float *y, int64_t n);

/* One head of f32 attention (kernels_nn.c), run by the attention op and
 * the attention block alike, so that the fused and unfused forms give the
 * same bits.  Query row s is q + s * ldq, key j k + j * ldk (j < T), value
 * j v + j * ldv, output row s o + s * ldo.  Causal: row s sees keys
 * j <= s + shift.  Mask (NULL: none) element of (s, j): mask[mbase + s *
 * mrow + j * mcol], bool (false hides the key) or added to the score. */
typedef struct rlx_attn_head {
    const float *q, *k, *v;
    float *o;
    int64_t ldq, ldk, ldv, ldo;
    int64_t D, Dv, T;
    float scale;
    bool causal;
    int64_t shift;
    const void *mask;
    rlx_dtype mask_dt;
    int64_t mbase, mrow, mcol;
    bool wide; /* the AVX-512 builds (rlx_cpu_avx512) */
} rlx_attn_head;

/* Query rows per tile: the callers cut a head's rows at multiples of it. */
#define RLX_ATTN_TILE 64

/* Tiles of a head's S rows per work item of an f32 attention over BH
 * heads on `threads` threads: all of them (the head's keys transposed once)
 * where there are heads enough to share out, else one.  The tiles, and so
 * the bits, are the same either way. */
static inline int64_t rlx_attn_tiles_per_item(int64_t BH, int64_t S, int threads)
{
    int64_t tiles = (S + RLX_ATTN_TILE - 1) / RLX_ATTN_TILE;
    return BH >= 4 * (int64_t)threads ? tiles : 1;
}

/* Scratch floats a tile of a head with T keys of D elements needs: its
 * scores and the head's keys transposed. */
static inline size_t rlx_cpu_attn_tile_floats(int64_t T, int64_t D) { return (size_t)((RLX_ATTN_TILE + D) * T); }

/* Rows [s0, s0 + rows) of the head (rows <= RLX_ATTN_TILE) on one thread;
 * sc: rlx_cpu_attn_tile_floats of scratch.  softmax(scale q k^T + mask) v,
 * each row's sum in double; a row whose keys are all hidden gets zeros.
 * *keys_done: how many of the head's keys an earlier tile on this scratch
 * left transposed there (the caller sets 0 for a new key head); updated. */
void rlx_cpu_attn_tile_f32(const rlx_attn_head *h, int64_t s0, int64_t rows, float *sc, int64_t *keys_done);

/* Layer norm (is_layer) or RMS norm of one f32 row of n into y (which may
 * be x), gamma g and beta b NULL where absent: the norm kernel's row, which
 * the residual add + norm runs too, so the fused and unfused forms give the
 * same bits (kernels_norm.c). */
void rlx_cpu_norm_row_f32(const float *x, float *y, const float *g, const float *b, int64_t n, int is_layer,
                          double eps);
/* Converts n elements of any dtype to f32 (dst must not alias src unless
 * both are f32). */
void rlx_cpu_to_f32(float *dst, const void *src, rlx_dtype t, int64_t n);
/* The max (else min) of n f32 values in one vectorised pass (kernels_reduce.c):
 * NaN if any is; only a zero's sign may differ from reduce_max's general
 * loop (which of a tie comes first). */
float rlx_cpu_minmax_f32(const float *x, int64_t n, bool max);
void rlx_cpu_from_f32(void *dst, rlx_dtype t, const float *src, int64_t n);

/* Flat index -> input offset through broadcast strides. */
static inline int64_t rlx_bcast_offset(int64_t flat, const rlx_shape *out, const int64_t *strides)
{
    int64_t off = 0;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t dim = out->dims[d];
        off += (flat % dim) * strides[d];
        flat /= dim;
    }
    return off;
}

/* Merges adjacent dims of out where every operand's broadcast strides
 * allow it (contiguous across the pair, or broadcast along both) and drops
 * dims of 1, rewriting out and strides[0..n) to match: an elementwise loop
 * over the result then has its innermost run as long as it can be (NCHW
 * [1, C, 7, 7] plus the same shape is one run of C*49, not C*7 runs of 7). */
static inline void rlx_collapse_dims(rlx_shape *out, int n, int64_t (*strides)[RLX_MAX_DIMS])
{
    int64_t dims[RLX_MAX_DIMS], st[RLX_MAX_INPUTS][RLX_MAX_DIMS];
    int m = 0; /* merged dims, innermost first */
    for (int d = out->ndim - 1; d >= 0; d--) {
        if (out->dims[d] == 1 && out->ndim > 1)
            continue;
        bool merge = m > 0;
        for (int k = 0; merge && k < n; k++)
            merge = strides[k][d] == st[k][m - 1] * dims[m - 1];
        if (merge) {
            dims[m - 1] *= out->dims[d];
            continue;
        }
        dims[m] = out->dims[d];
        for (int k = 0; k < n; k++)
            st[k][m] = strides[k][d];
        m++;
    }
    if (m == 0 && out->ndim > 0) { /* every dim was 1 */
        dims[0] = 1;
        for (int k = 0; k < n; k++)
            st[k][0] = 0;
        m = 1;
    }
    if (out->ndim == 0)
        return;
    out->ndim = m;
    for (int i = 0; i < m; i++) {
        out->dims[i] = dims[m - 1 - i];
        for (int k = 0; k < n; k++)
            strides[k][i] = st[k][m - 1 - i];
    }
}

/* An elementwise result walked as rows of its innermost run, with the
 * operands' dims merged wherever they all allow (rlx_collapse_dims); row r
 * of operand k starts at rlx_row_start(w, k, r) and steps by inner[k].
 * cut: a long run is cut into rows of 1024-8192 where its length allows, so
 * that threads can share it (for callers that hand whole rows to threads). */
typedef struct rlx_row_walk {
    int64_t rows, cols;
    int64_t st[RLX_MAX_INPUTS][RLX_MAX_DIMS]; /* per operand broadcast strides over outer */
    int64_t inner[RLX_MAX_INPUTS];            /* per operand stride along a row */
    rlx_shape outer;                          /* the walked shape without its innermost dim */
} rlx_row_walk;

void rlx_row_walk_init(rlx_row_walk *w, const rlx_shape *out_shape, int n_ops, const rlx_shape *const *ins, bool cut);

static inline int64_t rlx_row_start(const rlx_row_walk *w, int k, int64_t row)
{
    return rlx_bcast_offset(row, &w->outer, w->st[k]);
}

/* Stream id of a node within one run: distinct per node and per run. */
static inline uint64_t rlx_random_stream(const rlx_thunk *t, const rlx_run_ctx *ctx)
{
    return ((uint64_t)(uint32_t)t->id << 32) ^ ctx->run_index;
}

/* Operand i of node n of graph g (scratch and prepare functions see the graph, not the thunk). */
#define IN_NODE(g, n, i) (&(g)->nodes[(n)->in[i]])

/* Runtime errors from kernels name the node. */
rlx_status rlx_cpu_kernel_error(const rlx_thunk *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Threads for a parallel loop of `work` elementary operations. */
static inline int rlx_cpu_threads(const rlx_run_ctx *ctx, int64_t work)
{
    if (work < 32768 || ctx->threads <= 1)
        return 1;
    return ctx->threads;
}

/* f32 GEMM through oneDNN or OpenBLAS (gemm.c: opened at first use, the
 * library as RLX_CPU_GEMM says), falling back to a plain loop if neither is
 * there or when the session's settings say so (set: the run context's
 * settings, NULL for the defaults).  Row-major C[M,N] = alpha * op(A)
 * op(B) + beta * C.  f64: OpenBLAS or the loop. */
void rlx_sgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int threads,
               const rlx_backend_settings *set);
/* The library a shape runs on (see gemm.c). */
int rlx_sgemm_choose(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, int threads,
                     const rlx_backend_settings *set);

/* Whether kernels of our own may take their AVX-512 builds (RLX_WIDE): the
 * processor has AVX-512 (F, BW, CD, DQ, VL) and the settings do not say
 * RLX_CPU_NO_AVX512. */
bool rlx_cpu_avx512(const rlx_backend_settings *set);

/* C [M, N] = A [M, K] op(B) in f32, A's rows contiguous (lda K), B [K, N]
 * or, with tb, [N, K] (ldb its row stride): one row by the matrix-vector
 * kernel (decode steps read the weight once at memory speed), more by the
 * GEMM.  The matmul kernel's product and the fused ops'. */
void rlx_cpu_product_f32(int tb, int64_t M, int64_t N, int64_t K, const float *A, const float *B, int64_t ldb, float *C,
                         int threads, const rlx_backend_settings *set);
void rlx_dgemm(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
               const double *B, int64_t ldb, double beta, double *C, int64_t ldc, int threads,
               const rlx_backend_settings *set);

#endif
