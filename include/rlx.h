/* rlx.h - the public C API of RLX: build a tensor graph, compile it for a
 * device, run it.  Every call that can fail returns an rlx_status (or a
 * negative node id) and leaves a readable message in rlx_last_error().
 * Nothing in this API aborts on bad user input.
 *
 * Typical use:
 *   rlx_graph *g = rlx_graph_new();
 *   rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 8});
 *   rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){8, 3});
 *   rlx_output(g, "y", rlx_relu(g, rlx_matmul(g, x, w, 0, 0)));
 *   rlx_options o; rlx_options_init(&o);
 *   rlx_session *s = NULL;
 *   if (rlx_compile(g, &o, &s) != RLX_OK) puts(rlx_last_error());
 *   rlx_session_set_param(s, "w", wdata, sizeof wdata);
 *   rlx_session_set_input(s, "x", xdata, sizeof xdata);
 *   rlx_session_run(s);
 *   rlx_session_get_output(s, "y", ydata, sizeof ydata);
 *   rlx_session_free(s); rlx_graph_free(g);
 */
#ifndef RLX_H
#define RLX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* RLX_API marks the functions librlx exports: the build turns these marks
 * into the linker's export list, so nothing else in the library is visible
 * to programs that link it. */
#ifndef RLX_API
#if defined(__GNUC__) || defined(__clang__)
#define RLX_API __attribute__((visibility("default")))
#else
#define RLX_API
#endif
#endif

#define RLX_VERSION_MAJOR 0
#define RLX_VERSION_MINOR 1
#define RLX_VERSION_PATCH 0
#define RLX_MAX_DIMS 8

/* ---------------------------------------------------------------- errors */

typedef enum rlx_status {
    RLX_OK = 0,
    RLX_ERR_INVALID_ARGUMENT, /* a NULL pointer, a bad enum, a bad attribute */
    RLX_ERR_SHAPE,            /* shapes that do not fit the op */
    RLX_ERR_DTYPE,            /* dtypes that do not fit the op */
    RLX_ERR_NOT_FOUND,        /* unknown input, param or output name */
    RLX_ERR_UNSUPPORTED,      /* op, dtype or device not available */
    RLX_ERR_IO,               /* file missing, unreadable or unwritable */
    RLX_ERR_FORMAT,           /* malformed model or tensor file */
    RLX_ERR_OUT_OF_MEMORY,
    RLX_ERR_DEVICE,  /* device runtime failure */
    RLX_ERR_RUNTIME, /* a kernel found bad data (e.g. index out of range) */
    RLX_ERR_INTERNAL
} rlx_status;

/* The message of the last failed call on this thread ("" if none). */
RLX_API const char *rlx_last_error(void);
/* Short name of a status code, e.g. "shape error". */
RLX_API const char *rlx_status_name(rlx_status s);
RLX_API const char *rlx_version(void);
/* The CPU backend's GEMM library and the kernels it runs, e.g.
 * "libopenblas.so.0, core SkylakeX"; says so when OPENBLAS_CORETYPE names
 * a core below what this processor runs (OpenBLAS obeys it). */
RLX_API const char *rlx_cpu_gemm_info(void);
/* Frees memory the library allocated for the caller (the strings below). */
RLX_API void rlx_free(void *p);

/* ---------------------------------------------------------------- dtypes */

typedef enum rlx_dtype {
    RLX_F32 = 0,
    RLX_F16,
    RLX_BF16,
    RLX_F64,
    RLX_I64,
    RLX_I32,
    RLX_I8,
    RLX_U8,
    RLX_BOOL, /* one byte, 0 or 1 */
    RLX_DTYPE_COUNT,
    /* A tensor of strings: no graph node has it.  It appears only outside
     * graphs, in ONNX tensor files, bindings by value and the outputs of
     * strings an ONNX import computed (docs/ONNX.md "Strings"); its bytes
     * are its elements in order, each UTF-8 and ended by a NUL. */
    RLX_STRING = 32
} rlx_dtype;

RLX_API size_t rlx_dtype_size(rlx_dtype t);
RLX_API const char *rlx_dtype_name(rlx_dtype t);

/* Bit conversions for the 16-bit float storage types (round to nearest even). */
RLX_API uint16_t rlx_f32_to_f16(float f);
RLX_API float rlx_f16_to_f32(uint16_t h);
RLX_API uint16_t rlx_f32_to_bf16(float f);
RLX_API float rlx_bf16_to_f32(uint16_t h);

/* ---------------------------------------------------------------- graphs */

typedef struct rlx_graph rlx_graph;
/* A node id.  Builders return a negative id on failure; passing a negative
 * id to another builder fails too, so a chain of builders can be checked
 * once at the end (rlx_graph_verify reports the first failure). */
typedef int32_t rlx_node;

RLX_API rlx_graph *rlx_graph_new(void);
RLX_API void rlx_graph_free(rlx_graph *g);
/* Number of nodes, and the first builder error kept by the graph. */
RLX_API int rlx_graph_node_count(const rlx_graph *g);
/* Checks every node (operands, shapes, dtypes, attributes) and that the
 * graph has at least one output.  On failure the message names the node. */
RLX_API rlx_status rlx_graph_verify(const rlx_graph *g);
/* Human-readable listing of the graph, one node per line. */
RLX_API rlx_status rlx_graph_print(const rlx_graph *g, void *file /* FILE* */);
/* The graph as Graphviz text (what `rlx dump --dot` writes); *out is
 * allocated, free it with rlx_free.  title may be NULL. */
RLX_API rlx_status rlx_graph_to_dot(const rlx_graph *g, const char *title, char **out);

/* Shape and dtype of a node (after inference). */
RLX_API rlx_status rlx_node_shape(const rlx_graph *g, rlx_node n, int *ndim, int64_t dims[RLX_MAX_DIMS]);
RLX_API rlx_dtype rlx_node_dtype(const rlx_graph *g, rlx_node n);
/* Gives a node a name (used in messages and reports). */
RLX_API rlx_status rlx_node_set_name(rlx_graph *g, rlx_node n, const char *name);

/* Leaves. */
RLX_API rlx_node rlx_input(rlx_graph *g, const char *name, rlx_dtype t, int ndim, const int64_t *dims);
RLX_API rlx_node rlx_param(rlx_graph *g, const char *name, rlx_dtype t, int ndim, const int64_t *dims);
/* Copies `bytes` bytes of data (must equal the tensor's size). */
RLX_API rlx_node rlx_constant(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, const void *data, size_t bytes);
RLX_API rlx_node rlx_scalar(rlx_graph *g, rlx_dtype t, double value); /* 0-d constant */
/* Marks a node as a named graph output. */
RLX_API rlx_status rlx_output(rlx_graph *g, const char *name, rlx_node n);

/* Elementwise unary. */
RLX_API rlx_node rlx_neg(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_abs(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_exp(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_log(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_sqrt(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_rsqrt(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_reciprocal(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_tanh(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_sigmoid(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_relu(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_gelu(rlx_graph *g, rlx_node x);      /* exact, erf form */
RLX_API rlx_node rlx_gelu_tanh(rlx_graph *g, rlx_node x); /* tanh approximation */
RLX_API rlx_node rlx_silu(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_erf(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_sin(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_cos(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_floor(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_ceil(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_round(rlx_graph *g, rlx_node x); /* half to even */
RLX_API rlx_node rlx_sign(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_not(rlx_graph *g, rlx_node x); /* bool only */

/* Elementwise binary, numpy broadcasting; both operands share one dtype.
 * Comparisons give bool; and/or/xor take bool. */
RLX_API rlx_node rlx_add(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_sub(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_mul(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_div(rlx_graph *g, rlx_node a, rlx_node b); /* integers truncate */
RLX_API rlx_node rlx_pow(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_max(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_min(rlx_graph *g, rlx_node a, rlx_node b);
/* fmod=0: result takes the divisor's sign (Python); fmod=1: the dividend's (C). */
RLX_API rlx_node rlx_mod(rlx_graph *g, rlx_node a, rlx_node b, int fmod);
RLX_API rlx_node rlx_equal(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_less(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_greater(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_and(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_or(rlx_graph *g, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_xor(rlx_graph *g, rlx_node a, rlx_node b);

RLX_API rlx_node rlx_where(rlx_graph *g, rlx_node cond, rlx_node a, rlx_node b);
RLX_API rlx_node rlx_cast(rlx_graph *g, rlx_node x, rlx_dtype to);
RLX_API rlx_node rlx_clip(rlx_graph *g, rlx_node x, double lo, double hi);

/* Batched matmul: a [..., M, K] x b [..., K, N], batch dims broadcast.
 * trans_a / trans_b swap the last two dims of that operand first.
 * 1-d operands follow numpy (a vector is promoted, then the dim dropped). */
RLX_API rlx_node rlx_matmul(rlx_graph *g, rlx_node a, rlx_node b, int trans_a, int trans_b);

/* Reductions over `naxes` axes (negative axes count from the end; naxes 0
 * reduces every axis). */
RLX_API rlx_node rlx_reduce_sum(rlx_graph *g, rlx_node x, int naxes, const int *axes, int keepdims);
RLX_API rlx_node rlx_reduce_mean(rlx_graph *g, rlx_node x, int naxes, const int *axes, int keepdims);
RLX_API rlx_node rlx_reduce_max(rlx_graph *g, rlx_node x, int naxes, const int *axes, int keepdims);
RLX_API rlx_node rlx_reduce_min(rlx_graph *g, rlx_node x, int naxes, const int *axes, int keepdims);
RLX_API rlx_node rlx_reduce_prod(rlx_graph *g, rlx_node x, int naxes, const int *axes, int keepdims);
/* Index (i64) of the first extreme value along one axis. */
RLX_API rlx_node rlx_argmax(rlx_graph *g, rlx_node x, int axis, int keepdims);
RLX_API rlx_node rlx_argmin(rlx_graph *g, rlx_node x, int axis, int keepdims);

RLX_API rlx_node rlx_softmax(rlx_graph *g, rlx_node x, int axis);
RLX_API rlx_node rlx_log_softmax(rlx_graph *g, rlx_node x, int axis);
/* Normalise over the last axis; gamma/beta are [last] or -1 for none. */
RLX_API rlx_node rlx_layer_norm(rlx_graph *g, rlx_node x, rlx_node gamma, rlx_node beta, double eps);
RLX_API rlx_node rlx_rms_norm(rlx_graph *g, rlx_node x, rlx_node gamma, double eps);
/* Inference batch norm over axis 1 of x [N, C, ...]; scale, bias, mean, var
 * are [C]: y = (x - mean) / sqrt(var + eps) * scale + bias.  With constant
 * parameters after a conv, the optimizer folds it into the conv weights. */
RLX_API rlx_node rlx_batch_norm(rlx_graph *g, rlx_node x, rlx_node scale, rlx_node bias, rlx_node mean, rlx_node var,
                                double eps);

/* Shape ops.  Reshape takes one -1 (inferred) and 0 (copy that dim). */
RLX_API rlx_node rlx_reshape(rlx_graph *g, rlx_node x, int ndim, const int64_t *dims);
RLX_API rlx_node rlx_transpose(rlx_graph *g, rlx_node x, const int *perm); /* perm has x's rank */
/* Per listed axis: start, end (clamped, negatives count from the end), step
 * (non-zero, may be negative). Unlisted axes are kept whole. */
RLX_API rlx_node rlx_slice(rlx_graph *g, rlx_node x, int naxes, const int *axes, const int64_t *starts,
                           const int64_t *ends, const int64_t *steps);
RLX_API rlx_node rlx_concat(rlx_graph *g, int n, const rlx_node *xs, int axis);
/* Splits along axis into n parts of the given sizes; writes n node ids. */
RLX_API rlx_status rlx_split(rlx_graph *g, rlx_node x, int axis, int n, const int64_t *sizes, rlx_node *outs);
/* numpy take: out = data.shape[:axis] + indices.shape + data.shape[axis+1:];
 * indices i32/i64, negatives wrap, out of range is a run error. */
RLX_API rlx_node rlx_gather(rlx_graph *g, rlx_node data, rlx_node indices, int axis);
/* Broadcast to a shape (numpy rules, the result is the broadcast of both). */
RLX_API rlx_node rlx_expand(rlx_graph *g, rlx_node x, int ndim, const int64_t *dims);

typedef enum rlx_pad_mode { RLX_PAD_CONSTANT = 0, RLX_PAD_REFLECT, RLX_PAD_EDGE } rlx_pad_mode;
/* pads: rank*2 values, all begins then all ends (ONNX order), >= 0. */
RLX_API rlx_node rlx_pad(rlx_graph *g, rlx_node x, const int64_t *pads, rlx_pad_mode mode, double value);

/* Rotary position embedding on x [..., S, D] (D even): position p = offset+s,
 * frequency theta^(-2i/D).  interleaved=0 rotates halves (GPT-NeoX, Llama,
 * Qwen); interleaved=1 rotates adjacent pairs (GPT-J). */
RLX_API rlx_node rlx_rope(rlx_graph *g, rlx_node x, double theta, int64_t offset, int interleaved);
/* Rotary position embedding by tables: cos_table and sin_table [..., S,
 * D/2] (the rank of x, each axis 1 or x's) hold the cosines and sines of
 * each row's angles, so any position and frequency scaling can be given.  Under mixed precision the
 * tables keep their dtype (f32 tables keep the angles exact). */
RLX_API rlx_node rlx_rope_tables(rlx_graph *g, rlx_node x, rlx_node cos_table, rlx_node sin_table, int interleaved);

/* Scaled dot-product attention.  q [B, H, S, D], k [B, Hkv, T, D],
 * v [B, Hkv, T, Dv], H a multiple of Hkv (grouped-query heads).
 * mask: -1 for none, else bool (true = keep) or float (added to the scores),
 * broadcastable to [B, H, S, T].  causal masks key t > s + (T - S).
 * A query whose keys are all masked gives zeros.
 * scale <= 0 means 1/sqrt(D). Result [B, H, S, Dv]. */
RLX_API rlx_node rlx_attention(rlx_graph *g, rlx_node q, rlx_node k, rlx_node v, rlx_node mask, int causal,
                               double scale);
/* Causal attention at per-sequence positions: query row s of sequence b is
 * at position pos[b] + s (pos: i64 or i32 [B]) and sees the keys t <=
 * pos[b] + s; later keys are never read (a KV cache longer than the
 * sequence costs nothing).  Otherwise as rlx_attention. */
RLX_API rlx_node rlx_attention_at(rlx_graph *g, rlx_node q, rlx_node k, rlx_node v, rlx_node pos, double scale);

/* KV-cache write: update [B, H, S, D] goes into cache [B, H, T, D] at rows
 * pos[b] .. pos[b] + S - 1 of each sequence b (pos: i64 or i32 [B]); rows
 * outside [0, T) are skipped.  Returns the cache with the rows written.  The
 * result shares the cache's memory, so when the cache is a param the rows
 * stay there across runs (and across sessions that share the param, see
 * rlx_compile_shared): read the result, not the param, to see them. */
RLX_API rlx_node rlx_cache_write(rlx_graph *g, rlx_node cache, rlx_node update, rlx_node pos);

/* Convolution over 1 or 2 spatial dims: x [N, C, *spatial], w [O, C/groups,
 * *kernel], bias [O] or -1.  Arrays have one entry per spatial dim; pads
 * has 2 per spatial dim (all begins, then all ends). */
typedef struct rlx_conv_params {
    int64_t stride[2];
    int64_t dilation[2];
    int64_t pads[4];
    int64_t groups;
} rlx_conv_params;
RLX_API void rlx_conv_params_init(rlx_conv_params *p); /* stride 1, dilation 1, pads 0, groups 1 */
RLX_API rlx_node rlx_conv(rlx_graph *g, rlx_node x, rlx_node w, rlx_node bias, const rlx_conv_params *p);

typedef struct rlx_pool_params {
    int64_t kernel[2];
    int64_t stride[2];
    int64_t dilation[2];
    int64_t pads[4];
    int count_include_pad; /* average pooling only */
    int ceil_mode;
} rlx_pool_params;
RLX_API void rlx_pool_params_init(rlx_pool_params *p, int64_t kernel); /* square kernel, stride = kernel */
RLX_API rlx_node rlx_max_pool(rlx_graph *g, rlx_node x, const rlx_pool_params *p);
RLX_API rlx_node rlx_avg_pool(rlx_graph *g, rlx_node x, const rlx_pool_params *p);
/* [N, C, *spatial] -> [N, C, 1, ...] */
RLX_API rlx_node rlx_global_avg_pool(rlx_graph *g, rlx_node x);

/* Reverse-mode differentiation: appends to g the nodes computing the
 * gradient of `loss` (a float tensor of one element) with respect to each
 * wrt[i] (float params, inputs or any node), and writes their ids to
 * grads[i] (wrt[i]'s shape and dtype; zeros where the loss does not depend
 * on it).  The forward stays as it was, so compile sees one graph: give the
 * gradients names with rlx_output to read them.  A path through an op with
 * no gradient (dropout, argmax's index, a KV-cache write) is refused with an
 * error naming the node. */
RLX_API rlx_status rlx_gradients(rlx_graph *g, rlx_node loss, int n, const rlx_node *wrt, rlx_node *grads);

/* Losses (src/train/loss.c), scalars built from primitives.
 * Cross-entropy of logits [..., C] against class indices labels [...] (i64
 * or i32), as torch.nn.functional.cross_entropy: mean over the rows whose
 * label is not ignore_index, with label smoothing s in [0, 1]. */
RLX_API rlx_node rlx_cross_entropy(rlx_graph *g, rlx_node logits, rlx_node labels, int64_t ignore_index,
                                   double label_smoothing);
/* mean((pred - target)^2), broadcasting as sub does. */
RLX_API rlx_node rlx_mse_loss(rlx_graph *g, rlx_node pred, rlx_node target);

/* Optimizers (rlx_trainer, below): the update rules of PyTorch's
 * torch.optim.SGD, Adam and AdamW. */
typedef enum rlx_optim_kind { RLX_OPTIM_SGD = 0, RLX_OPTIM_ADAM, RLX_OPTIM_ADAMW } rlx_optim_kind;

/* Random ops: deterministic for one compile seed (rlx_options.seed) and node,
 * different for each run of a session. */
RLX_API rlx_node rlx_random_uniform(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, double lo, double hi);
RLX_API rlx_node rlx_random_normal(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, double mean, double std);
/* Zeroes each element with probability p and scales the rest by 1/(1-p). */
RLX_API rlx_node rlx_dropout(rlx_graph *g, rlx_node x, double p);

/* Quantized weights in ggml's block formats (the ids GGUF files use): a
 * weight of N rows of k elements is a u8 tensor [N, rlx_quant_row_bytes(
 * qtype, k)], each row whole blocks as GGUF stores them. */
typedef enum rlx_qtype {
    RLX_Q4_0 = 2,
    RLX_Q4_1 = 3,
    RLX_Q5_0 = 6,
    RLX_Q5_1 = 7,
    RLX_Q8_0 = 8,
    RLX_Q4_K = 12,
    RLX_Q5_K = 13,
    RLX_Q6_K = 14,
    RLX_Q8_K = 15
} rlx_qtype;
/* Bytes of one row of k elements; 0 when the type is not one of the above
 * or k is not whole blocks (32 elements, 256 for the _K types). */
RLX_API size_t rlx_quant_row_bytes(int qtype, int64_t k);
/* x [.., k] times the transpose of the quantized w [N, row bytes]: [.., N]
 * in x's dtype, w never expanded (the activations are quantized per block
 * as the kernels need). */
RLX_API rlx_node rlx_qmatmul(rlx_graph *g, rlx_node x, rlx_node w, int qtype, int64_t k);
/* ONNX's MatMulInteger: a [.., M, K] (u8 or i8) times b [K, N] (i8 or u8),
 * zero points subtracted (a_zp one element of a's dtype, b_zp one or N of
 * b's), exact int32 sums [.., M, N]. */
RLX_API rlx_node rlx_matmul_integer(rlx_graph *g, rlx_node a, rlx_node b, rlx_node a_zp, rlx_node b_zp);
/* ONNX's ConvInteger: x [N, C, ..] (u8 or i8) convolved with w [O,
 * C/groups, ..] (i8 or u8), 1 or 2 spatial dims, as (x - x_zp) and (w -
 * w_zp) (x_zp one element of x's dtype, w_zp one or O elements of w's;
 * padding counts as x_zp): exact int32 [N, O, ..]. */
RLX_API rlx_node rlx_conv_integer(rlx_graph *g, rlx_node x, rlx_node w, rlx_node x_zp, rlx_node w_zp,
                                  const rlx_conv_params *p);
/* ONNX's DynamicQuantizeLinear in two passes: the range of x (f32) as f32
 * [2] {scale, zero point}, min and max widened to hold 0, scale = (max -
 * min) / 255, zero point = clip(round(-min / scale), 0, 255); then x as u8
 * levels: saturate(round(x / scale) + zero point), ties to even. */
RLX_API rlx_node rlx_dynamic_quantize_range(rlx_graph *g, rlx_node x);
RLX_API rlx_node rlx_quantize_u8(rlx_graph *g, rlx_node x, rlx_node range);
/* The quantized w [N, row bytes] as floats [N, k] of dtype `to` (f32, f16,
 * bf16). */
RLX_API rlx_node rlx_dequantize(rlx_graph *g, rlx_node w, int qtype, int64_t k, rlx_dtype to);

/* ------------------------------------------------------------- compiling */

typedef enum rlx_device { RLX_DEVICE_CPU = 0, RLX_DEVICE_CUDA } rlx_device;
typedef enum rlx_precision { RLX_PRECISION_F32 = 0, RLX_PRECISION_F16, RLX_PRECISION_BF16 } rlx_precision;

typedef struct rlx_options {
    rlx_device device;
    int device_index; /* which device of that kind: cuda:N (0 = the first; the cpu is 0) */
    rlx_precision precision;
    int threads;              /* 0 = all cores */
    uint64_t seed;            /* random ops */
    int verbose;              /* 1 = stage report on stderr (RLX_VERBOSE) */
    int dispatch_report;      /* per-op dispatch report: 1 on stderr and kept (RLX_DISPATCH_REPORT),
                             * 2 kept only; read it with rlx_session_report */
    int no_reuse;             /* every buffer its own slot (RLX_ARENA_NO_REUSE) */
    int no_inplace;           /* no in-place reuse (RLX_DISABLE_INPLACE) */
    int pin_output_ancestors; /* ancestors of outputs live to the end (RLX_PIN_OUTPUT_ANCESTORS) */
    int no_fusion;            /* skip fusion (RLX_DISABLE_FUSION) */
    int no_amp;               /* skip mixed precision (RLX_DISABLE_AMP) */
    int no_simplify;          /* skip dce/cse/fold (RLX_DISABLE_SIMPLIFY) */
    int no_preencode;         /* no graph capture (RLX_DISABLE_CUDA_GRAPH) */
    int no_layout;            /* keep convolutions NCHW (RLX_DISABLE_LAYOUT, RLX_NO_LAYOUT) */
    int ignore_env;           /* 1 = environment variables do not override */
    /* Largest arena compile may allocate, in bytes; 0 = no limit of its own
     * (RLX_MAX_ARENA=N, with K/M/G suffixes).  Checked once the plan knows
     * the size, before the arena is allocated; on the CPU the arena must also
     * fit the machine's available memory (its constant weights are read
     * from the graph, not copied into the arena).  A refusal names both
     * sizes. */
    size_t max_arena_bytes;
} rlx_options;

RLX_API void rlx_options_init(rlx_options *o);

/* "cpu", "cuda", "cuda:N" (also "cpu:0") as a device and its index; an
 * error naming the text otherwise.  Whether the device exists is checked
 * at compile. */
RLX_API rlx_status rlx_device_parse(const char *text, rlx_device *device, int *index);
/* How many devices of a kind this process can use: 1 for the cpu; the
 * CUDA devices where the backend is built and a driver sees them; else 0. */
RLX_API int rlx_device_count(rlx_device device);

typedef struct rlx_session rlx_session;

/* Optimizes, plans and prepares the graph for the device.  The graph is
 * copied; it may be freed or changed afterwards. */
RLX_API rlx_status rlx_compile(const rlx_graph *g, const rlx_options *o, rlx_session **out);
/* As rlx_compile, but every param of g that `params_from` also has (same
 * name, dtype and shape) is not allocated: the new session reads and writes
 * that session's memory in place (weights loaded once, a KV cache written
 * by one graph and read by another).  Setting such a param through either
 * session sets it for both.  params_from must be on the same device and
 * outlive the new session. */
RLX_API rlx_status rlx_compile_shared(const rlx_graph *g, const rlx_options *o, const rlx_session *params_from,
                                      rlx_session **out);
RLX_API void rlx_session_free(rlx_session *s);

/* Tensors are host memory, dense, row-major, of the node's dtype; `bytes`
 * must equal the tensor's byte size. */
RLX_API rlx_status rlx_session_set_param(rlx_session *s, const char *name, const void *data, size_t bytes);
RLX_API rlx_status rlx_session_set_input(rlx_session *s, const char *name, const void *data, size_t bytes);
RLX_API rlx_status rlx_session_run(rlx_session *s);
RLX_API rlx_status rlx_session_get_output(rlx_session *s, const char *name, void *data, size_t bytes);
/* A param's current value (a training step or a cache write changes it). */
RLX_API rlx_status rlx_session_get_param(rlx_session *s, const char *name, void *data, size_t bytes);

/* The same with device memory, for a CUDA session: `device_ptr` points into
 * the memory of the session's GPU (cudaMalloc'd, or another library's
 * tensor on that device) and is copied device to device, dense and
 * row-major as above.  The copy is ordered after the work queued on CUDA's
 * legacy default stream (DLPack's stream 1) and has finished when the call
 * returns.  A pointer that is not device memory of the session's device is
 * RLX_ERR_INVALID_ARGUMENT; a CPU session gives RLX_ERR_UNSUPPORTED (its
 * tensors are host memory: use the calls above). */
RLX_API rlx_status rlx_session_set_input_device(rlx_session *s, const char *name, const void *device_ptr, size_t bytes);
RLX_API rlx_status rlx_session_get_output_device(rlx_session *s, const char *name, void *device_ptr, size_t bytes);
/* Device memory to hand those calls: `bytes` (zeroed) on device `index` of
 * kind `device` (cuda:index); free it with rlx_device_free and the same
 * device.  RLX_ERR_UNSUPPORTED for RLX_DEVICE_CPU and where the library
 * has no CUDA backend; RLX_ERR_DEVICE where it has no such GPU. */
RLX_API rlx_status rlx_device_alloc(rlx_device device, int index, size_t bytes, void **out);
RLX_API void rlx_device_free(rlx_device device, int index, void *ptr);

/* What the compiled session takes and gives. kind: 0 input, 1 param, 2 output. */
typedef struct rlx_tensor_info {
    const char *name;
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    size_t bytes;
} rlx_tensor_info;
RLX_API int rlx_session_count(const rlx_session *s, int kind);
RLX_API rlx_status rlx_session_info(const rlx_session *s, int kind, int index, rlx_tensor_info *info);
RLX_API rlx_status rlx_session_find(const rlx_session *s, int kind, const char *name, rlx_tensor_info *info);

/* Figures from the compile (for reports and tests). */
typedef struct rlx_compile_stats {
    int nodes_in, nodes_after_simplify, nodes_after_fusion, nodes_final;
    size_t arena_bytes;           /* whole device arena */
    size_t persistent_bytes;      /* params, constants, inputs */
    size_t transient_bytes;       /* planned intermediates and outputs */
    size_t transient_lower_bound; /* most bytes live at one step */
    size_t scratch_bytes;
    int buffers; /* distinct planned slots */
    int thunks, noop_thunks;
    int channels_last; /* convs and pools the layout stage made channels-last */
    double stage_ms[16];
} rlx_compile_stats;
RLX_API rlx_status rlx_session_stats(const rlx_session *s, rlx_compile_stats *st);
/* The dispatch report of a session compiled with dispatch_report set, as
 * text ("" when it was not asked for).  Owned by the session. */
RLX_API const char *rlx_session_report(const rlx_session *s);
/* The compiled (optimized) graph as Graphviz text; free *out with rlx_free. */
RLX_API rlx_status rlx_session_to_dot(const rlx_session *s, const char *title, char **out);

/* ------------------------------------------------------------- workloads */
/* The built-in workloads of bench/WORKLOADS.md, as `rlx run NAME` builds
 * them: "encoder", "mlp", "resnet50", "decoder-small", "decoder"; batch and
 * seq 0 take each one's default.  Their weights are params: after compiling,
 * rlx_workload_set_params fills them from a seeded generator. */
RLX_API rlx_status rlx_workload_graph(const char *name, int batch, int seq, rlx_graph **out);
RLX_API rlx_status rlx_workload_set_params(rlx_session *s, uint64_t seed);
/* The decoder-small shape (WORKLOADS.md; `layers` > 0 overrides its 8) as a
 * training graph over a vocabulary of `vocab` tokens: inputs "input_ids"
 * and "labels" (i64 [batch, seq]; label -100 is ignored), outputs "logits"
 * and "loss" (mean next-token cross-entropy).  Params named as the
 * decoder workload's ("embed.w", "l0.q.w", ..., norms' gains end in ".g"). */
RLX_API rlx_status rlx_decoder_train_graph(int batch, int seq, int vocab, int layers, rlx_graph **out);
/* n values drawn from normal(0, std) by RLX's seeded generator (f32): the
 * values `rlx run` gives inputs it was not handed. */
RLX_API void rlx_fill_normal(float *dst, int64_t n, double std, uint64_t seed);
/* "4096", "512K", "64M", "2G", "1T" (powers of 1024, optional B or iB) ->
 * bytes, as RLX_MAX_ARENA and `--max-arena` read them; 0 if malformed, zero
 * or out of range. */
RLX_API size_t rlx_parse_size(const char *text);

/* ------------------------------------------------------------------ ONNX */
/* Present when the library was built with the ONNX importer (RLX_HAVE_ONNX;
 * needs protobuf-c).  Shapes in RLX are static: every symbolic dimension of
 * the model is bound at import, from a binding by input name (whole shape)
 * or by dimension name, or from default_dim.
 *
 * Sequences and optionals.  A sequence's length is fixed at import too: a
 * graph input `x` that is a sequence of tensors becomes one RLX input per
 * element, named `x[0]`, `x[1]`, ...; its length comes from a dim binding
 * of its own name (ndim -1 with dims[0] = N, or ndim 1: "x=N"), else from
 * how many element bindings `x[0]`, `x[1]`, ... there are, else from
 * default_dim; each element's shape from its own binding (else the
 * declared element shape).
 * A graph output that is a sequence gives one RLX output per element, named
 * the same way.  An optional is the value it holds (a tensor `x`, or a
 * sequence as above); a binding of its name with ndim RLX_ONNX_EMPTY makes
 * an optional input empty, and an empty optional output gives no output. */
#define RLX_ONNX_EMPTY (-2)

/* What a graph input or output holds. */
typedef enum rlx_onnx_kind {
    RLX_ONNX_TENSOR = 0,
    RLX_ONNX_SEQUENCE,          /* a sequence of tensors */
    RLX_ONNX_OPTIONAL,          /* an optional tensor */
    RLX_ONNX_OPTIONAL_SEQUENCE, /* an optional sequence of tensors */
    RLX_ONNX_NONE,              /* what an empty optional holds (rlx_onnx_read_value) */
    RLX_ONNX_OTHER              /* a map, a sparse tensor, nested sequences: not supported */
} rlx_onnx_kind;

typedef struct rlx_onnx_binding {
    const char *name; /* a graph input's name, or a symbolic dim's name */
    int ndim;         /* input binding: its rank; -1: dim binding, value in dims[0]
                       * (a rank-1 binding of a name that is no input's also
                       * binds that symbolic dim, so "--shape N=4" works) */
    int64_t dims[RLX_MAX_DIMS];
    /* Optional: the input's value (model dtype, `bytes` long).  The input
     * then becomes a constant, so shape computations that read it (Reshape
     * targets, Range limits, ...) fold at import.  A session compiled from
     * the graph accepts only that value for it (rlx_session_set_input
     * fails naming the input otherwise); an rlx_model compiles per value. */
    const void *value;
    size_t bytes;
} rlx_onnx_binding;

typedef struct rlx_onnx_options {
    const rlx_onnx_binding *bindings;
    int n_bindings;
    int64_t default_dim; /* for unbound symbolic dims and sequence lengths; 0 = unbound is an error */
    /* 0: initializers become constants (so they fold).  1: float
     * initializers of rank >= 1 become params named as in the model (to
     * train, or to set other weights); rank-0 and integer ones stay
     * constants (shapes, axes).  An op that needs such a param's value at
     * import (Resize scales, ...) reads the model's; where it cannot, the
     * error names the op and the initializer.  rlx_onnx_load_params reads
     * the model's values. */
    int initializers_as_params;
} rlx_onnx_options;

RLX_API void rlx_onnx_options_init(rlx_onnx_options *o);
/* Reads an ONNX model (external data next to it) and builds a graph whose
 * inputs and outputs carry the model's names.  An unsupported op fails with
 * one message listing every unsupported op type, node names and opset. */
RLX_API rlx_status rlx_onnx_import(const char *path, const rlx_onnx_options *o, rlx_graph **out);
/* Same from memory; base_dir (may be NULL) is where external data lives. */
RLX_API rlx_status rlx_onnx_import_buffer(const void *data, size_t size, const char *base_dir,
                                          const rlx_onnx_options *o, rlx_graph **out);
/* A model file kept for running at several input shapes (a shape-keyed
 * compile cache): rlx_model_session returns the session compiled for these
 * bindings (as for rlx_onnx_import: by input name or by symbolic dim name),
 * compiling on the first request for a shape and reusing it afterwards.
 * Sessions belong to the model and are freed with it. */
typedef struct rlx_model rlx_model;
RLX_API rlx_status rlx_model_load_onnx(const char *path, const rlx_options *o, rlx_model **out);
/* The same from a model in memory (copied); base_dir (may be NULL: the
 * current directory) is where external data lives. */
RLX_API rlx_status rlx_model_load_onnx_buffer(const void *data, size_t size, const char *base_dir, const rlx_options *o,
                                              rlx_model **out);
RLX_API rlx_status rlx_model_session(rlx_model *m, const rlx_onnx_binding *shapes, int n, rlx_session **out);
RLX_API int rlx_model_cached_sessions(const rlx_model *m);
RLX_API void rlx_model_free(rlx_model *m);
/* `rlx info`: inputs, outputs (with symbolic dims), opsets and op counts. */
RLX_API rlx_status rlx_onnx_print_info(const char *path, void *file /* FILE* */);

/* A model's graph input (not an initializer), as declared: dims -1 where
 * symbolic (name in dim_names, owned by the caller via rlx_onnx_inputs_free). */
typedef struct rlx_onnx_input {
    char *name;
    int onnx_type;   /* TensorProto.DataType; 0 when not a tensor */
    int is_tensor;   /* 0 for sequence/optional/map inputs */
    rlx_dtype dtype; /* RLX_STRING for strings, RLX_DTYPE_COUNT for a type RLX lacks */
    int ndim;        /* -1 when the rank is unknown */
    int64_t dims[RLX_MAX_DIMS];
    char *dim_names[RLX_MAX_DIMS]; /* a symbolic dim's name, or NULL (unnamed or fixed) */
    /* what it holds; for a sequence or an optional, onnx_type to dim_names
     * describe the tensors in it */
    rlx_onnx_kind kind;
} rlx_onnx_input;
RLX_API rlx_status rlx_onnx_inputs(const char *path, rlx_onnx_input **inputs, int *n_inputs, char ***outputs,
                                   int *n_outputs);
RLX_API void rlx_onnx_inputs_free(rlx_onnx_input *inputs, int n_inputs, char **outputs, int n_outputs);
/* The graph outputs, described the same way (free with
 * rlx_onnx_inputs_free(outputs, n_outputs, NULL, 0)). */
RLX_API rlx_status rlx_onnx_outputs(const char *path, rlx_onnx_input **outputs, int *n_outputs);

/* Hands `fn` each initializer of the model's main graph that
 * initializers_as_params may make a param (float, rank >= 1), in file
 * order, as host bytes of its dtype: e.g. to rlx_session_set_param or
 * rlx_trainer_set_param.  One that no op of the graph reads (or only at
 * import, as Resize's scales) is no param of the graph: a caller setting
 * params may skip names the session lacks.  A non-OK return from fn stops
 * the walk and is returned. */
typedef rlx_status (*rlx_onnx_param_fn)(void *user, const char *name, rlx_dtype t, int ndim, const int64_t *dims,
                                        const void *data, size_t bytes);
RLX_API rlx_status rlx_onnx_load_params(const char *path, rlx_onnx_param_fn fn, void *user);

/* ONNX types RLX lacks are widened at import: int16 and uint16 become i32,
 * uint32 and uint64 become i64 (graph inputs and outputs too; uint64 values
 * above 2^63 do not survive).  Tensor files below are widened the same way.
 *
 * Tensor files.  *data is malloc'd (free it); dims has RLX_MAX_DIMS room.
 * TensorProto (.pb) as the ONNX test suite stores them: */
RLX_API rlx_status rlx_onnx_read_tensor(const char *path, rlx_dtype *t, int *ndim, int64_t *dims, void **data,
                                        size_t *bytes);
/* A tensor of a file (data malloc'd). */
typedef struct rlx_onnx_tensor {
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    void *data;
    size_t bytes;
} rlx_onnx_tensor;
/* A value file of the kind a graph input or output declares: a TensorProto
 * (RLX_ONNX_TENSOR), a SequenceProto (RLX_ONNX_SEQUENCE) or an
 * OptionalProto (the optional kinds).  *held: RLX_ONNX_TENSOR (one tensor),
 * RLX_ONNX_SEQUENCE (*n tensors, maybe none) or RLX_ONNX_NONE (an empty
 * optional); free *tensors with rlx_onnx_tensors_free.  Sequence and
 * optional files need a library built with onnx-data.proto (python3-onnx);
 * without it they give RLX_ERR_UNSUPPORTED. */
RLX_API rlx_status rlx_onnx_read_value(const char *path, rlx_onnx_kind kind, rlx_onnx_kind *held,
                                       rlx_onnx_tensor **tensors, int *n);
RLX_API void rlx_onnx_tensors_free(rlx_onnx_tensor *tensors, int n);
/* Runs a model on tensors (names[i] is inputs[i]'s graph input; every graph
 * input that has no initializer must be given; the shapes are the tensors')
 * and returns the outputs in the model's graph output order (names as
 * rlx_onnx_outputs gives them; free with rlx_onnx_tensors_free).  Models
 * whose ops need values known only at run time (NonZero,
 * NonMaxSuppression, Unique, ... on data the model computes; a Reshape to
 * a computed shape) run in stages: the nodes before such an op are
 * compiled and run as one graph, then the rest is imported with the
 * values that op reads bound by value, and so on.  Each stage compiles
 * once per set of shapes (and of the bytes bound by value) and is cached in
 * the model; values cross between stages through host memory.  A model
 * without such ops is one stage.  Tensors of strings (RLX_STRING) are
 * taken and returned as well; strings are always bound by value.
 * Tensors only (no sequence inputs or
 * outputs). */
RLX_API rlx_status rlx_model_run(rlx_model *m, int n_inputs, const char *const *names, const rlx_onnx_tensor *inputs,
                                 rlx_onnx_tensor **outputs, int *n_outputs);
/* Stages compiled so far by rlx_model_run (each stage and key once). */
RLX_API int rlx_model_cached_windows(const rlx_model *m);
/* NumPy .npy, always built (version 1-3, little-endian, C order; f4 f2 f8 i8 i4 i1 u1 b1): */
RLX_API rlx_status rlx_npy_read(const char *path, rlx_dtype *t, int *ndim, int64_t *dims, void **data, size_t *bytes);
/* Writes a new file through rlx_file_open (below): an existing `path` is
 * refused, and a failed write leaves nothing under `path`. */
RLX_API rlx_status rlx_npy_write(const char *path, rlx_dtype t, int ndim, const int64_t *dims, const void *data,
                                 size_t bytes);
/* The same into a file opened with rlx_file_open (commit or discard it after). */
typedef struct rlx_file rlx_file;
RLX_API rlx_status rlx_npy_write_file(rlx_file *f, rlx_dtype t, int ndim, const int64_t *dims, const void *data,
                                      size_t bytes);

/* ----------------------------------------------------------------- training */
/* A trainer compiles a graph's forward, its gradients (rlx_gradients) and
 * the optimizer's update into one session: each step is one run, updating
 * the params and the optimizer state in place on the device. */
typedef struct rlx_train_options {
    rlx_optim_kind optimizer; /* RLX_OPTIM_ADAMW */
    double lr;                /* peak learning rate: 1e-3 */
    double beta1, beta2, eps; /* Adam: 0.9, 0.999, 1e-8 */
    double weight_decay;      /* 0.01 (AdamW's default; SGD and Adam add it to the gradient) */
    double momentum;          /* SGD: 0 */
    double dampening;         /* SGD: 0 */
    int nesterov;             /* SGD: 0 */
    double clip_norm;         /* > 0: gradients scaled so that their global L2 norm is at most this */
    int warmup_steps;         /* learning rate rises linearly over these optimizer steps (0: none) */
    int decay_steps;          /* > 0: then falls to min_lr along a cosine over these steps */
    double min_lr;            /* 0 */
    int accumulate;           /* micro-batches per optimizer step, gradients averaged: 1 */
    /* Dynamic loss scaling (as torch.cuda.amp.GradScaler): the loss is
     * multiplied by a scale before the backward and the gradients divided
     * after; a step whose gradients overflow is skipped and the scale
     * halved, and after 2000 good steps it doubles.  0: on when the
     * compile's precision is f16 (from 65536), 1: on, -1: off. */
    int loss_scaling;
    double initial_loss_scale; /* 0: 65536 */
    /* Activation checkpointing: cheap forward values the backward reads
     * (activations, elementwise products, norms' outputs, softmax
     * probabilities, rotated or transposed copies), and the chains of them
     * that lead back to values the backward keeps anyway, are computed
     * again in the backward instead of kept (rlx_trainer_recomputed says
     * how many and how many bytes).  No matrix product is recomputed. */
    int recompute;
    const char *const *frozen; /* names of float params not to train (n_frozen of them) */
    int n_frozen;
    /* 1: every optimizer step also writes the global L2 norm of the
     * gradients (before clipping) as the output "grad_norm".  It is
     * computed anyway where clipping or loss scaling needs it; otherwise
     * it is a reduction of every gradient per step, skipped unless asked. */
    int grad_norm;
} rlx_train_options;
RLX_API void rlx_train_options_init(rlx_train_options *t);

typedef struct rlx_trainer rlx_trainer;
/* loss: the name of g's output holding the (one-element, float) loss.
 * Every float param of g not frozen is trained; the rest stay as set. */
RLX_API rlx_status rlx_trainer_new(const rlx_graph *g, const char *loss, const rlx_train_options *t,
                                   const rlx_options *o, rlx_trainer **out);
RLX_API void rlx_trainer_free(rlx_trainer *tr);
/* The compiled step (to list params with rlx_session_count/info, read the
 * report or the memory statistics); owned by the trainer. */
RLX_API const rlx_session *rlx_trainer_session(const rlx_trainer *tr);
/* Params (initial weights) and inputs (the batch) by name, as for a session. */
RLX_API rlx_status rlx_trainer_set_param(rlx_trainer *tr, const char *name, const void *data, size_t bytes);
RLX_API rlx_status rlx_trainer_get_param(rlx_trainer *tr, const char *name, void *data, size_t bytes);
RLX_API rlx_status rlx_trainer_set_input(rlx_trainer *tr, const char *name, const void *data, size_t bytes);
/* One micro-batch: forward and backward; on every `accumulate`-th, the
 * optimizer step.  *loss (may be NULL) gets this micro-batch's loss. */
RLX_API rlx_status rlx_trainer_step(rlx_trainer *tr, double *loss);
/* An output of the last step (the loss, "grad_norm": the global gradient
 * norm before clipping, written by the optimizer steps where clipping, loss
 * scaling or rlx_train_options.grad_norm asks for it, or any output of g). */
RLX_API rlx_status rlx_trainer_get_output(rlx_trainer *tr, const char *name, void *data, size_t bytes);
RLX_API int64_t rlx_trainer_steps(const rlx_trainer *tr); /* optimizer steps taken */
RLX_API double rlx_trainer_lr(const rlx_trainer *tr);     /* learning rate of the next optimizer step */
/* The loss scale of the next step (1 without loss scaling), and how many
 * steps were skipped for overflowing gradients. */
RLX_API double rlx_trainer_loss_scale(const rlx_trainer *tr);
RLX_API int64_t rlx_trainer_skipped(const rlx_trainer *tr);
/* With recompute: how many forward values the step computes again, and
 * their bytes (what the forward no longer keeps for the backward). */
RLX_API void rlx_trainer_recomputed(const rlx_trainer *tr, int *count, size_t *bytes);
/* The compile figures of the step's session (rlx_session_stats): its arena
 * holds the params, optimizer state, gradients and activations of a step.
 * With accumulation, the micro-batch session's arena (params shared) is
 * added to arena_bytes and transient_bytes. */
RLX_API rlx_status rlx_trainer_stats(const rlx_trainer *tr, rlx_compile_stats *st);
/* Saves every param, the optimizer state ("opt.m.NAME", "opt.v.NAME",
 * "opt.buf.NAME", "opt.acc.NAME"), the step count ("opt.step", i64 [2]:
 * optimizer steps, micro-batches) and, with loss scaling, "opt.scaler" (f64
 * [3]: scale, good steps, skipped steps) as one safetensors file (flags as
 * rlx_file_open); load puts them back, so that training continues exactly
 * as if it had not stopped. */
RLX_API rlx_status rlx_trainer_save(rlx_trainer *tr, const char *path, int flags);
RLX_API rlx_status rlx_trainer_load(rlx_trainer *tr, const char *path);

/* ----------------------------------------------------------------- files */
/* Every file RLX or its program writes goes through these calls, so that
 * nothing is written or replaced unasked and no failure leaves a partial
 * file.  rlx_file_open refuses an existing `path` unless flags has
 * RLX_FILE_FORCE, and a missing or unwritable folder, with a message naming
 * the path; the data goes to a temporary file beside `path`, which
 * rlx_file_commit checks (every write, flush, fsync) and moves into place
 * atomically (without FORCE, never over a file that appeared meanwhile).
 * rlx_file_discard, or a failed commit, removes the temporary file.  A
 * forced target that is not a regular file (/dev/null, a FIFO) is written
 * in place.  The handle is freed by commit and by discard. */
#define RLX_FILE_FORCE 1
RLX_API rlx_status rlx_file_open(const char *path, int flags, rlx_file **out);
RLX_API rlx_status rlx_file_write(rlx_file *f, const void *data, size_t bytes);
RLX_API void *rlx_file_stream(rlx_file *f); /* FILE* for fprintf; errors surface at commit */
RLX_API rlx_status rlx_file_commit(rlx_file *f);
RLX_API void rlx_file_discard(rlx_file *f);
/* The checks of rlx_file_open without opening: to refuse before work is done. */
RLX_API rlx_status rlx_file_check_target(const char *path, int flags);
/* Async-signal-safe: unlinks the temporary file of every rlx_file not yet
 * committed or discarded, for a SIGINT/SIGTERM handler, so that an
 * interrupted program leaves no temporary behind either (after SIGKILL one
 * may remain, named .NAME.rlx-XXXXXX; the target is never half-written). */
RLX_API void rlx_file_remove_pending(void);
/* Opens, writes `bytes` and commits. */
RLX_API rlx_status rlx_write_file(const char *path, int flags, const void *data, size_t bytes);

/* ------------------------------------------------------------ decoder LLMs
 *
 * A model: a GGUF file, or a folder holding config.json and safetensors
 * (model.safetensors, or shards listed in model.safetensors.index.json);
 * or the name of a built-in shape of bench/WORKLOADS.md, "decoder-small"
 * (NULL: the default) or "decoder" (Qwen3-0.6B), with seeded weights and a
 * byte tokenizer.  The architectures: Llama, Mistral, Qwen2, Qwen3, GPT-2. */
typedef struct rlx_llm rlx_llm;
RLX_API rlx_status rlx_llm_load(const char *path, rlx_llm **out);
RLX_API void rlx_llm_free(rlx_llm *m);

typedef struct rlx_llm_info {
    const char *arch; /* as the checkpoint names it */
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
    int max_ctx;  /* positions the model was made for */
    int bos, eos; /* -1 when the model has none */
} rlx_llm_info;
RLX_API rlx_status rlx_llm_get_info(const rlx_llm *m, rlx_llm_info *info);

/* Text -> token ids.  Returns the number of ids (which may exceed cap: call
 * again with more room), or -1 with the error set.  add_special: the
 * model's begin-of-sequence token first, where it uses one. */
RLX_API int rlx_llm_tokenize(const rlx_llm *m, const char *text, size_t len, int add_special, int32_t *ids, int cap);
/* The bytes of one token (a piece of UTF-8 that may end mid-character:
 * concatenate pieces to get the text).  Returns the length (which may
 * exceed cap), or -1 for an id outside the vocabulary. */
RLX_API int rlx_llm_token_piece(const rlx_llm *m, int32_t id, char *buf, size_t cap);
/* Token ids -> text (special tokens included).  Returns the length (which
 * may exceed cap: call again with more room), or -1 with the error set (an
 * id outside the vocabulary). */
RLX_API long rlx_llm_detokenize(const rlx_llm *m, const int32_t *ids, int n, char *buf, size_t cap);
/* Whether id ends generation (end of sequence, end of turn). */
RLX_API int rlx_llm_is_eog(const rlx_llm *m, int32_t id);

/* A generation context: the model compiled twice (a prefill graph over
 * `prefill_chunk` tokens and a decode graph over one token per sequence)
 * sharing the weights and a KV cache of `ctx` positions for `batch`
 * sequences. */
typedef struct rlx_llm_options {
    rlx_device device;
    int device_index; /* cuda:N */
    rlx_precision precision;
    int threads;       /* 0 = all cores */
    int ctx;           /* positions per sequence (0 = min(model's, 2048)) */
    int batch;         /* sequences decoded together (>= 1) */
    int prefill_chunk; /* tokens per prefill run (0 = min(ctx, 512)) */
    int verbose;
} rlx_llm_options;
RLX_API void rlx_llm_options_init(rlx_llm_options *o);
typedef struct rlx_llm_context rlx_llm_context;
RLX_API rlx_status rlx_llm_context_new(rlx_llm *m, const rlx_llm_options *o, rlx_llm_context **out);
RLX_API void rlx_llm_context_free(rlx_llm_context *c);

/* Starts sequences 0 .. n_seqs-1 afresh with the prompts ids[i] of n_ids[i]
 * (>= 1) tokens; other sequences keep their state.  Afterwards
 * rlx_llm_logits(c, i) is the distribution after the prompt's last token. */
RLX_API rlx_status rlx_llm_prefill(rlx_llm_context *c, int n_seqs, const int32_t *const *ids, const int *n_ids);
/* Appends one token to each sequence i with tokens[i] >= 0 (-1: leave it
 * idle), and computes their next logits. */
RLX_API rlx_status rlx_llm_decode(rlx_llm_context *c, const int32_t *tokens);
/* The last logits of sequence seq ([vocab] f32), or NULL (for a bad seq, or
 * with the error set when they cannot be copied from the device). */
RLX_API const float *rlx_llm_logits(rlx_llm_context *c, int seq);
/* The most likely next token of each sequence (tokens[batch]): the first
 * index of the largest logit.  After a decode step it is computed on the
 * device and the logits are not copied to the host (a greedy loop calling
 * only this reads batch ids a step, not batch * vocab floats). */
RLX_API rlx_status rlx_llm_argmax(rlx_llm_context *c, int32_t *tokens);
/* Tokens in sequence seq's cache. */
RLX_API int rlx_llm_position(const rlx_llm_context *c, int seq);
/* Positions per sequence (the ctx asked for, or its default), or -1. */
RLX_API int rlx_llm_context_size(const rlx_llm_context *c);

/* Sampling and generation. temperature 0: greedy. */
typedef struct rlx_generate_params {
    int max_tokens;
    float temperature;
    int top_k;            /* 0 = off */
    float top_p;          /* 1 = off */
    float min_p;          /* 0 = off */
    float repeat_penalty; /* 1 = off */
    int repeat_last_n;
    uint64_t seed;
    const char *const *stop; /* stop strings, or NULL */
    int n_stop;
    int ignore_eos;
    float *prompt_logits; /* if set: receives the prompt's last logits ([vocab]) */
} rlx_generate_params;
RLX_API void rlx_generate_params_init(rlx_generate_params *p);
/* Called for each generated token with its text (the bytes it completes);
 * a nonzero return stops generation. */
typedef int (*rlx_token_fn)(void *user, int32_t id, const char *text, size_t len);
typedef struct rlx_generate_stats {
    int prompt_tokens, generated_tokens;
    double prefill_ms, decode_ms;
} rlx_generate_stats;
/* Generates from one prompt in sequence 0 of c. */
RLX_API rlx_status rlx_llm_generate(rlx_llm_context *c, const int32_t *prompt, int n_prompt,
                                    const rlx_generate_params *p, rlx_token_fn fn, void *user,
                                    rlx_generate_stats *stats);

/* --------------------------------------------------------- quantization
 *
 * Writes `out`, a GGUF (v3) model file, from `in`: a Hugging Face folder
 * (config.json, safetensors single or sharded, tokenizer.json; Llama,
 * Mistral, Qwen2, Qwen3) converted as llama.cpp's converter does, or a GGUF
 * file whose metadata is copied.  `type`: q8_0 q4_0 q4_1 q5_0 q5_1 q4_k q5_k
 * q6_k (every weight matrix in that type) or q4_k_m q5_k_m (llama.cpp's
 * mixes; q8_0 and q6_k follow its rules too).  Norms and biases stay
 * unquantized.  The file is written through rlx_file_open with `flags`
 * (RLX_FILE_FORCE replaces an existing `out`): an error leaves nothing.
 * log_file: a FILE* for one line per tensor, or NULL. */
RLX_API rlx_status rlx_quantize_file(const char *in, const char *out, const char *type, int flags, void *log_file);

#ifdef __cplusplus
}
#endif
#endif /* RLX_H */
