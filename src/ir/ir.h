/* ir.h - the internal tensor-graph IR: shapes, attributes, nodes, graphs and
 * the op table.  Knows nothing of passes, planning or backends. */
#ifndef RLX_IR_H
#define RLX_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rlx.h"
#include "core/dtype.h"
#include "core/error.h"

#define RLX_MAX_INPUTS 12

typedef struct rlx_shape {
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
} rlx_shape;

int64_t rlx_shape_numel(const rlx_shape *s);
bool rlx_shape_equal(const rlx_shape *a, const rlx_shape *b);
/* numpy broadcast of a and b into out; false if incompatible. */
bool rlx_shape_broadcast(const rlx_shape *a, const rlx_shape *b, rlx_shape *out);
/* Whether s broadcasts to exactly `to` (a mask over scores, say). */
bool rlx_shape_broadcasts_to(const rlx_shape *s, const rlx_shape *to);
/* Row-major strides (in elements) of s. */
void rlx_shape_strides(const rlx_shape *s, int64_t strides[RLX_MAX_DIMS]);
/* Strides of `in` read as if broadcast to `out` (0 on broadcast dims). */
void rlx_shape_broadcast_strides(const rlx_shape *in, const rlx_shape *out, int64_t strides[RLX_MAX_DIMS]);
/* "[2, 3, 4]" into buf. */
const char *rlx_shape_str(const rlx_shape *s, char *buf, size_t n);

/* Every op of the IR.  The op table (ops.c) has one row per entry, in this
 * order.  Fused ops are appended after RLX_OP_FIRST_FUSED by the optimizer. */
typedef enum rlx_op {
    /* leaves */
    RLX_OP_INPUT,
    RLX_OP_PARAM,
    RLX_OP_CONSTANT,
    /* unary elementwise */
    RLX_OP_NEG,
    RLX_OP_ABS,
    RLX_OP_EXP,
    RLX_OP_LOG,
    RLX_OP_SQRT,
    RLX_OP_RSQRT,
    RLX_OP_RECIPROCAL,
    RLX_OP_TANH,
    RLX_OP_SIGMOID,
    RLX_OP_RELU,
    RLX_OP_GELU,
    RLX_OP_GELU_TANH,
    RLX_OP_SILU,
    RLX_OP_ERF,
    RLX_OP_SIN,
    RLX_OP_COS,
    RLX_OP_FLOOR,
    RLX_OP_CEIL,
    RLX_OP_ROUND,
    RLX_OP_SIGN,
    RLX_OP_NOT,
    /* binary elementwise (broadcasting) */
    RLX_OP_ADD,
    RLX_OP_SUB,
    RLX_OP_MUL,
    RLX_OP_DIV,
    RLX_OP_POW,
    RLX_OP_MAX,
    RLX_OP_MIN,
    RLX_OP_MOD,
    RLX_OP_EQUAL,
    RLX_OP_LESS,
    RLX_OP_GREATER,
    RLX_OP_AND,
    RLX_OP_OR,
    RLX_OP_XOR,
    /* other elementwise */
    RLX_OP_WHERE,
    RLX_OP_CAST,
    RLX_OP_CLIP,
    /* linear algebra */
    RLX_OP_MATMUL,
    /* quantized weights (ggml's block formats, rlx_qtype): qmatmul(x [.., K],
     * w u8 [N, row bytes]) = x @ dequantize(w)^T [.., N] without expanding
     * w; dequantize(w) [N, K] in the node's float dtype */
    RLX_OP_QMATMUL,
    RLX_OP_DEQUANTIZE,
    /* 8-bit integer product, ONNX's MatMulInteger: matmul_integer(a [.., M,
     * K] u8/i8, b [K, N] i8/u8, a_zp (one element, a's dtype), b_zp (one or
     * N elements, b's dtype)) = sum_k (a - a_zp)(b - b_zp), i32 [.., M, N] */
    RLX_OP_MATMUL_INTEGER,
    /* ONNX's ConvInteger: conv_integer(x [N, C, ..] u8/i8, w [O, C/groups, ..]
     * i8/u8, x_zp (one element, x's dtype), w_zp (one or O elements, w's
     * dtype)) = the convolution of (x - x_zp) and (w - w_zp), i32; NCHW,
     * padding counts as x_zp (a zero difference); attrs.conv */
    RLX_OP_CONV_INTEGER,
    /* ONNX's DynamicQuantizeLinear in two passes: dynamic_quantize_range(x
     * f32) = f32 [2] {scale, zero point} of x's range widened to hold 0;
     * quantize_u8(x f32, range) = saturate(round(x / scale) + zero point), u8 */
    RLX_OP_DYNAMIC_QUANTIZE_RANGE,
    RLX_OP_QUANTIZE_U8,
    /* reductions */
    RLX_OP_REDUCE_SUM,
    RLX_OP_REDUCE_MEAN,
    RLX_OP_REDUCE_MAX,
    RLX_OP_REDUCE_MIN,
    RLX_OP_REDUCE_PROD,
    RLX_OP_ARGMAX,
    RLX_OP_ARGMIN,
    /* normalisation */
    RLX_OP_SOFTMAX,
    RLX_OP_LOG_SOFTMAX,
    RLX_OP_LAYER_NORM,
    RLX_OP_RMS_NORM,
    /* training: cross_entropy(logits [..., C], labels [...] i64/i32) [...]
     * per row -(1 - s) log softmax(x)[label] - s/C sum_c log softmax(x)[c],
     * 0 where label = ignore_index; cross_entropy_grad(logits, labels,
     * dy [...]) its gradient with respect to the logits, in one pass:
     * dy * (softmax(x) - (1 - s) onehot(label) - s/C) */
    RLX_OP_CROSS_ENTROPY, /* its loss: f32 for f16/bf16 logits (rlx_cross_entropy_loss_dtype) */
    RLX_OP_CROSS_ENTROPY_GRAD,
    /* data movement */
    RLX_OP_RESHAPE,
    RLX_OP_TRANSPOSE,
    RLX_OP_SLICE,
    RLX_OP_CONCAT,
    RLX_OP_GATHER,
    /* gather's gradient: scatter_add(dy, indices) is zeros of the node's
     * shape (the gathered data's) with each slice of dy added where
     * gather(.., indices, axis) read it (attrs.gather.axis) */
    RLX_OP_SCATTER_ADD,
    RLX_OP_EXPAND,
    RLX_OP_PAD,
    /* transformer */
    RLX_OP_ROPE,
    RLX_OP_ATTENTION,
    /* convolution */
    RLX_OP_CONV,
    RLX_OP_MAX_POOL,
    RLX_OP_AVG_POOL,
    RLX_OP_GLOBAL_AVG_POOL,
    /* random */
    RLX_OP_RANDOM_UNIFORM,
    RLX_OP_RANDOM_NORMAL,
    RLX_OP_DROPOUT,
    /* inference batch norm over axis 1: inputs x, scale, bias, mean, var */
    RLX_OP_BATCH_NORM,
    /* state: cache_write(cache, update, pos) writes update [B, H, S, D] into
     * cache [B, H, T, D] at rows pos[b] .. pos[b] + S - 1 of sequence b and
     * returns the cache.  Its output is the cache's own memory (the planner
     * aliases it), so a param used as the cache keeps what was written
     * across runs: a KV cache.  Rows outside [0, T) are not written. */
    RLX_OP_CACHE_WRITE,
    /* state: optimizer_step(param, grad, hyper, gscale, after[, s1[, s2]])
     * updates param (and its optimizer state s1, s2, params of param's
     * shape) in place from grad * gscale, by attrs.optim (SGD with
     * momentum, Adam, AdamW).  hyper f32 [4] carries the per-step scalars
     * (trainer.c), so a schedule changes no compiled graph; `after`
     * (the loss) is read by nothing and orders the step after the forward.
     * Its result is param's memory. */
    RLX_OP_OPTIMIZER_STEP,
    /* fused ops, produced by the fusion pass (src/opt/fuse*.c); each has a
     * reference CPU kernel and a decomposition into the primitives above
     * (src/opt/lower.c) */
    RLX_OP_FIRST_FUSED,
    RLX_OP_MATMUL_BIAS_ACT = RLX_OP_FIRST_FUSED, /* act(a @ b + bias) */
    RLX_OP_ADD_LAYER_NORM,                       /* layer_norm(x + residual) */
    RLX_OP_ADD_RMS_NORM,                         /* rms_norm(x + residual) */
    RLX_OP_SWIGLU,                               /* silu(x @ wg) * (x @ wu) */
    RLX_OP_ATTENTION_BLOCK,                      /* qkv proj, q/k norm, rope, attention, out proj */
    RLX_OP_ELEMENTWISE_CHAIN,                    /* a small elementwise program */
    RLX_OP_SOFTMAX_SCALE_MASK,                   /* softmax(x * scale + mask) */
    RLX_OP_CONV_BIAS_ACT,                        /* act(conv(x, w) + bias[ + residual]) */
    RLX_OP_ADD_RMS_NORM_KEEP,                    /* [2, ...]: x + residual, then its rms_norm */
    RLX_OP_MATMUL_INTEGER_SCALE,                 /* act(f32(matmul_integer) * scale + bias) */
    /* attention's gradient, made by its gradient rule: inputs q, k, v, o
     * (attention's value), dy[, mask], attrs.attention; the result is flat
     * [numel(q) + numel(k) + numel(v)] in q's dtype, dq, dk and dv one after
     * another (a backend may run it as one kernel that recomputes the
     * scores instead of storing them) */
    RLX_OP_ATTENTION_GRAD,
    /* layer_norm's or rms_norm's gradient, made by their gradient rule:
     * inputs x, dy[, gamma], attrs.norm (rms set for rms_norm); the result
     * is [2, ...x]: the gradient with respect to x, then dy * xhat (the
     * normalised x), whose sums over the rows are gamma's gradient */
    RLX_OP_NORM_GRAD,
    RLX_OP_QLINEAR_MATMUL, /* matmul_integer_scale with requantization stages (attrs.qmm) */
    /* a joined q/k/v projection [B, S, (H + 2 Hk) D] cut into heads, each q
     * and k head RMS-normalised (optional gammas) and rotated by RoPE (cos
     * and sin tables [B or 1, 1, S, D/2]), attrs.qkv; the result is flat:
     * q [B, H, S, D], then k and v [B, Hk, S, D] (a decoder's KV-cache
     * update, [2 B, Hk, S, D], is its second part as it stands) */
    RLX_OP_QKV_HEADS,
    /* act(x[..., :F]) * x[..., F:] for x [..., 2 F] (attrs.glu.act): a gated
     * unit on a joined gate/up product, as SwiGLU's is */
    RLX_OP_GLU,
    /* a projection by a weight stored [N, K] with what comes before and
     * after it in a decoder: pre(x) @ w^T, then glu (act(y[..., :N/2]) *
     * y[..., N/2:], attrs.proj.glu), then + r; pre (attrs.proj.pre) is
     * none or rms_norm(x, gamma, eps); r, the residual, has the result's
     * shape.  Inputs x, w, then gamma (rms_norm), then r (has_res).  With
     * attrs.proj.quant, w is a qmatmul's: u8 rows [N, row bytes] of that
     * ggml block type, and the product is qmatmul(x, w).  Made by fusion
     * only where a target claims it (CPU and CUDA, for a decode step's few
     * rows; CUDA alone with a quantized weight). */
    RLX_OP_PROJECTION,
    RLX_OP_COUNT
} rlx_op;

/* Activation of the fused ops. */
typedef enum rlx_act {
    RLX_ACT_NONE = 0,
    RLX_ACT_RELU,
    RLX_ACT_GELU,
    RLX_ACT_SILU,
    RLX_ACT_GELU_TANH,
    RLX_ACT_COUNT
} rlx_act;

/* The rows of a projection a backend fuses: a decode step's, up to a batch
 * of 8 sequences (the CUDA kernel's templates stop there too). */
#define RLX_PROJ_FEW_ROWS 8

/* What a projection applies to its rows before the product. */
typedef enum rlx_proj_pre {
    RLX_PROJ_PLAIN = 0,
    RLX_PROJ_RMS_NORM,
} rlx_proj_pre;

/* Data layout of conv and pooling (attrs.conv.layout, attrs.pool.layout).
 * Channels-last is made only by the layout pass (src/opt/layout.c), for
 * targets that claim it; lowering turns it back into NCHW with transposes. */
enum { RLX_LAYOUT_NCHW = 0, RLX_LAYOUT_NHWC = 1 };

/* Elementwise-chain programs: registers 0..n_in-1 are the node's inputs,
 * register n_in+i the result of instruction i; the last one is the output.
 * An instruction is 3 bytes: op (a unary or binary rlx_op), a, b. */
#define RLX_EW_MAX_OPS 24

/* Attributes.  One union member per op family; a node's attribute bytes are
 * zeroed first so memcmp compares them (CSE). */
typedef union rlx_attrs {
    struct {
        int fmod;
    } mod;
    struct {
        rlx_dtype to;
    } cast;
    struct {
        double lo, hi;
    } clip;
    struct {
        int trans_a, trans_b;
    } matmul;
    struct {
        int qtype;    /* rlx_qtype: ggml's type id */
        int64_t k;    /* elements per weight row */
        rlx_dtype to; /* dequantize: the float dtype it gives */
    } quant;          /* qmatmul, dequantize */
    struct {
        uint32_t axes;
        int keepdims;
    } reduce; /* axes: bit mask */
    struct {
        int axis;
        int keepdims;
    } arg; /* argmax/argmin */
    struct {
        int axis;
    } softmax; /* softmax, log_softmax */
    struct {
        double eps;
        int has_gamma, has_beta;
        int rms; /* norm_grad: of rms_norm (else layer_norm) */
    } norm;
    struct {
        int perm[RLX_MAX_DIMS];
    } transpose;
    struct {
        int64_t start[RLX_MAX_DIMS], step[RLX_MAX_DIMS];
    } slice; /* normalised, every axis */
    struct {
        int axis;
    } concat;
    struct {
        int axis;
    } gather;
    struct {
        int64_t pads[2 * RLX_MAX_DIMS];
        int mode;
        double value;
    } pad;
    /* rope: with two more inputs, cos and sin tables (see rlx_rope_tables),
     * theta and offset are unused */
    struct {
        double theta;
        int64_t offset;
        int interleaved;
    } rope;
    /* has_pos: a last input pos [B] (i64/i32) puts query row s of sequence b
     * at position pos[b] + s; causal then hides keys t > pos[b] + s */
    struct {
        double scale;
        int causal, has_mask, has_pos;
    } attention;
    /* act, has_residual: conv_bias_act only (a last input r of the
     * output's shape and dtype: act(conv(x, w) + bias + r)).  layout:
     * RLX_LAYOUT_NCHW (0, the default) or RLX_LAYOUT_NHWC: x [N, H, W, C],
     * weight [O, KH, KW, C/groups], y [N, OH, OW, O] */
    struct {
        rlx_conv_params p;
        int spatial, has_bias, act, layout, has_residual;
    } conv;
    struct {
        rlx_pool_params p;
        int spatial, layout;
    } pool; /* layout as for conv (max/avg pool) */
    struct {
        double a, b;
    } random; /* lo/hi or mean/std */
    struct {
        double p;
    } dropout;
    struct {
        double eps;
    } batch_norm;
    struct {
        int64_t ignore_index;
        double smoothing;
    } xent;
    struct {
        int kind; /* rlx_optim_kind */
        int nesterov;
        double beta1, beta2, eps, weight_decay, momentum, dampening;
    } optim;
    /* fused ops */
    struct {
        int trans_a, trans_b, act, has_bias;
    } mm_act;
    /* qlinear_matmul(a, b, a_zp, b_zp, scale, [rq_range, dq_zp, dq_scale],
     * [bias], [out_range]): y = f32(matmul_integer) * scale; requant: y =
     * (f32(quantize_u8(y, rq_range)) - dq_zp) * dq_scale (ONNX's
     * QLinearMatMul, then DequantizeLinear); y = act(y + bias); out_u8: y =
     * quantize_u8(y, out_range) (the next product's QuantizeLinear) */
    struct {
        int act, has_bias, requant, out_u8;
    } qmm;
    struct {
        int n_ops;
        uint8_t code[3 * RLX_EW_MAX_OPS];
    } ew;
    struct {
        double scale;
        int axis, has_mask;
    } sm;
    /* attention block inputs: x, wq, wk, wv, wo, then those flagged, in this
     * order: bq, bk, bv, bo (has_bias bits 1, 2, 4, 8), q gamma, k gamma,
     * mask (bool, true keeps the key, or added to the scores in the block's
     * dtype; broadcast to [B, H, S, S]) */
    struct {
        int heads, kv_heads, head_dim, v_head_dim;
        int has_bias, has_qnorm, has_knorm, has_rope, rope_interleaved, causal, has_mask;
        double norm_eps, rope_theta, scale;
        int64_t rope_offset;
    } attn_block;
    /* qkv_heads inputs: x, then those flagged, in this order: cos and sin
     * tables (has_rope), q gamma, k gamma */
    struct {
        int heads, kv_heads, head_dim;
        int has_rope, rope_interleaved, has_qnorm, has_knorm;
        double norm_eps;
    } qkv;
    struct {
        int act; /* rlx_act */
    } glu;
    struct {
        int pre; /* rlx_proj_pre */
        int glu; /* rlx_act of the gated unit after the product; RLX_ACT_NONE: none */
        int has_res;
        double eps; /* rms_norm's */
        int quant;  /* the weight's ggml block type (a qmatmul's), or 0: a float weight */
    } proj;
    uint8_t raw[160];
} rlx_attrs;

/* Constant data, reference counted so that the graphs holding the same
 * bytes (a clone, a pass's result, the graph a session compiled from)
 * share one copy (blob.c).  The bytes start 64-byte aligned and are padded
 * with zeros to a multiple of 64. */
typedef struct rlx_blob rlx_blob;
/* NULL when out of memory (error set). */
rlx_blob *rlx_blob_new(size_t bytes);
void *rlx_blob_data(const rlx_blob *b);
size_t rlx_blob_bytes(const rlx_blob *b);
rlx_blob *rlx_blob_ref(rlx_blob *b);
void rlx_blob_unref(rlx_blob *b);
/* rlx_constant whose node holds the blob's first `bytes` bytes, not a copy. */
rlx_node rlx_constant_blob(rlx_graph *g, rlx_dtype t, int ndim, const int64_t *dims, rlx_blob *b, size_t bytes);

typedef struct rlx_node_data {
    rlx_op op;
    rlx_dtype dtype;
    rlx_shape shape;
    int n_in;
    rlx_node in[RLX_MAX_INPUTS];
    rlx_attrs attrs;
    char *name; /* owned; may be NULL */
    /* a forward value computed again for the backward (activation
     * checkpointing, src/train/recompute.c): CSE never merges it back */
    bool recompute;
    void *data; /* constants only: blob's bytes, never written once held */
    size_t data_bytes;
    rlx_blob *blob; /* holds data; other graphs' nodes may share it */
} rlx_node_data;

typedef struct rlx_output_ref {
    char *name;
    rlx_node node;
} rlx_output_ref;

/* A model input an importer bound to a value (it became a constant, so the
 * graph could be shaped): a session compiled from the graph accepts that
 * value for it and refuses any other. */
typedef struct rlx_bound_input {
    char *name;
    rlx_dtype dtype;
    rlx_shape shape;
    void *value; /* owned */
    size_t bytes;
    /* not an input but a graph output of strings an importer computed
     * (dtype RLX_STRING, value unused): its node is a U8 constant of the
     * strings' bytes, and sessions report it as strings of `shape` */
    bool string_output;
} rlx_bound_input;

struct rlx_graph {
    rlx_node_data *nodes;
    int n_nodes, cap_nodes;
    rlx_output_ref *outputs;
    int n_outputs, cap_outputs;
    rlx_bound_input *bound; /* inputs bound by value (rlx_graph_bind_input) */
    int n_bound;
    /* First builder failure, reported by verify. */
    rlx_status error;
    char error_msg[512];
};

/* ----------------------------------------------------------- op table */

typedef enum rlx_op_flags {
    RLX_OPF_LEAF = 1 << 0,           /* input, param, constant: persistent, no kernel */
    RLX_OPF_ELEMENTWISE = 1 << 1,    /* out[i] depends on in[i] (after broadcast): may be written in place */
    RLX_OPF_VIEW = 1 << 2,           /* may alias its first input: the row's `view` says when */
    RLX_OPF_RANDOM = 1 << 3,         /* not pure: never CSE'd or folded */
    RLX_OPF_FUSED = 1 << 4,          /* produced by fusion; has a decomposition */
    RLX_OPF_STATEFUL = 1 << 5,       /* writes into its first input's memory: never CSE'd, folded or moved;
                                     its result is that input's memory */
    RLX_OPF_AUX_KEEP_DTYPE = 1 << 6, /* mixed precision converts input 0 only; the rest keep their dtype */
    RLX_OPF_CHAIN = 1 << 7,          /* may be an instruction of an elementwise_chain (float unary/binary) */
    RLX_OPF_CHAIN_F32 = 1 << 8,      /* range-sensitive (exp, log, ...): a chain holding it stays f32 */
} rlx_op_flags;

/* What kind of computation an op is: what passes that treat ops by family
 * (fusion, layout, the dispatch report) go by.  0 is "not set", which
 * test_op_table refuses. */
typedef enum rlx_op_kind {
    RLX_KIND_UNSET = 0,
    RLX_KIND_LEAF,        /* input, param, constant */
    RLX_KIND_UNARY,       /* unary elementwise: out = f(x) */
    RLX_KIND_BINARY,      /* binary elementwise, broadcasting: out = f(a, b) */
    RLX_KIND_ELEMENTWISE, /* other elementwise (where, cast, clip, elementwise_chain) */
    RLX_KIND_MATMUL,      /* matmul and its fused forms */
    RLX_KIND_REDUCTION,   /* reduce_*, argmax/argmin */
    RLX_KIND_NORM,        /* softmax, norms and their fused forms */
    RLX_KIND_SHAPE,       /* data movement (reshape, transpose, slice, concat, gather, expand, pad) */
    RLX_KIND_ATTENTION,   /* rope, attention, attention_block */
    RLX_KIND_CONV,        /* conv, conv_bias_act */
    RLX_KIND_POOL,        /* pooling windows */
    RLX_KIND_RANDOM,      /* random values */
    RLX_KIND_STATE,       /* writes into a param (cache_write) */
    RLX_KIND_COUNT
} rlx_op_kind;

/* How automatic mixed precision (src/opt/amp.c) treats an op that computes
 * in f32.  0 is "not set", which test_op_table refuses: an op can no longer
 * stay f32 only because nobody listed it. */
typedef enum rlx_amp_class {
    RLX_AMP_UNSET = 0,
    RLX_AMP_LEAF,   /* inputs, params, constants: keep their declared dtype */
    RLX_AMP_LOW,    /* f16/bf16-safe: runs in the low type */
    RLX_AMP_F32,    /* keeps f32 (range- or accumulation-sensitive, or no low kernel expected) */
    RLX_AMP_FOLLOW, /* data movement: runs in the dtype its f32 operands arrive in */
    RLX_AMP_CAST,   /* a cast: becomes a conversion of its operand */
    RLX_AMP_STATE, /* writes into input 0 in that input's dtype: the update is converted (an optimizer step reads a low gradient as it is where the target can), input 0 never */
    RLX_AMP_CHAIN, /* an elementwise program: low unless an instruction is RLX_OPF_CHAIN_F32 */
    RLX_AMP_COUNT
} rlx_amp_class;

/* Where an op keeps its data layout (RLX_LAYOUT_*), if it has one. */
typedef enum rlx_layout_attr { RLX_LAYOUT_ATTR_NONE = 0, RLX_LAYOUT_ATTR_CONV, RLX_LAYOUT_ATTR_POOL } rlx_layout_attr;

/* An op's gradient rule (src/ir/grad_rules.c, contract in src/ir/grad.h). */
typedef rlx_status (*rlx_grad_fn)(rlx_graph *g, rlx_node n, rlx_node dy, const bool *need, rlx_node *dx);

/* One row per op: everything a pass or the planner needs to know about an
 * op.  Passes read these traits; none keeps a per-op list of its own.
 * docs/ADDING_AN_OP.md lists what else a new op needs; test_op_table checks
 * every row. */
typedef struct rlx_op_info {
    const char *name;
    int min_in, max_in;
    unsigned flags; /* RLX_OPF_* */
    rlx_op_kind kind;
    rlx_amp_class amp;
    rlx_act act;            /* the fused-epilogue activation this op is (RLX_ACT_NONE: not one) */
    rlx_layout_attr layout; /* its layout attribute, if any */
    /* Computes n->shape and n->dtype from its inputs and attributes;
     * returns RLX_OK or sets the error (naming the problem). */
    rlx_status (*infer)(const rlx_graph *g, rlx_node_data *n);
    /* RLX_OPF_VIEW only: whether node n aliases its first input's memory,
     * and at which byte offset (the planner's alias rule). */
    bool (*view)(const rlx_graph *g, const rlx_node_data *n, size_t *byte_offset);
    /* The op's definition in primitives (decompose.c): appends them to g (n's
     * inputs already ids of g) and returns the result; RLX_NO_DECOMPOSITION
     * when this node has none (an NCHW conv); -1 when a builder failed.
     * Every fused op has one. */
    rlx_node (*decompose)(rlx_graph *g, const rlx_node_data *n);
    /* Its gradient rule (every op but the leaves has one; rlx_grad_refuse
     * for those a gradient cannot pass through). */
    rlx_grad_fn grad;
} rlx_op_info;

#define RLX_NO_DECOMPOSITION (-2)

const rlx_op_info *rlx_op_info_of(rlx_op op);
/* Shape inference of the batch-norm primitive and the fused ops (ops_fused.c). */
rlx_status rlx_infer_batch_norm(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_matmul_bias_act(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_matmul_integer_scale(const rlx_graph *g, rlx_node_data *n);
rlx_node rlx_decompose_matmul_integer_scale(rlx_graph *g, const rlx_node_data *n);
rlx_status rlx_infer_qlinear_matmul(const rlx_graph *g, rlx_node_data *n);
rlx_node rlx_decompose_qlinear_matmul(rlx_graph *g, const rlx_node_data *n);
rlx_status rlx_infer_add_norm(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_swiglu(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_attention_block(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_elementwise_chain(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_softmax_scale_mask(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_conv_bias_act(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_qkv_heads(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_glu(const rlx_graph *g, rlx_node_data *n);
rlx_status rlx_infer_projection(const rlx_graph *g, rlx_node_data *n);
/* Whether w is a quantized weight of ggml type qt with rows of k elements:
 * u8 [N, row bytes] of a supported type; sets the error when not. */
rlx_status rlx_check_quant_weight(int qt, int64_t k, const rlx_node_data *w);
/* Decompositions (decompose.c): the definitions of the fused ops, of
 * batch_norm, and of channels-last conv and pooling, in primitives. */
rlx_node rlx_decompose_batch_norm(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_matmul_integer(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_conv_integer(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_dynamic_quantize_range(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_quantize_u8(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_channels_last(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_matmul_bias_act(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_add_norm(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_add_rms_norm_keep(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_swiglu(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_attention_block(rlx_graph *g, const rlx_node_data *n);
/* attention_grad's and norm_grad's, in grad_rules.c beside the gradient rules that make them */
rlx_node rlx_decompose_attention_grad(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_norm_grad(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_elementwise_chain(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_softmax_scale_mask(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_conv_bias_act(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_qkv_heads(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_glu(rlx_graph *g, const rlx_node_data *n);
rlx_node rlx_decompose_projection(rlx_graph *g, const rlx_node_data *n);
/* Builds glu: act(x[..., :F]) * x[..., F:]. */
rlx_node rlx_glu(rlx_graph *g, rlx_node x, rlx_act act);
/* Builds a projection: pre(x) @ w^T, then glu with activation glu
 * (RLX_ACT_NONE: none), then + r (-1: none); gamma for RLX_PROJ_RMS_NORM
 * (else -1). */
rlx_node rlx_projection(rlx_graph *g, rlx_node x, rlx_node w, rlx_proj_pre pre, rlx_node gamma, double eps, rlx_act glu,
                        rlx_node r);
/* The rows of a projection whose input is x (every axis of x but the last). */
int64_t rlx_projection_rows(const rlx_node_data *x);
/* Index of qkv_heads' optional input (1 cos, 2 sin, 3 q gamma, 4 k
 * gamma), or -1 when absent. */
int rlx_qkv_heads_input(const rlx_node_data *n, int which);
/* Builds qkv_heads (attrs as in rlx_attrs.qkv; cos/sin, gq, gk -1 when
 * absent). */
rlx_node rlx_qkv_heads(rlx_graph *g, rlx_node x, rlx_node cos_table, rlx_node sin_table, rlx_node gq, rlx_node gk,
                       int heads, int kv_heads, double eps, int interleaved);
/* Index of the attention block's optional input (bias bits 1,2,4,8 as
 * 1..4, 5 q gamma, 6 k gamma, 7 mask), or -1 when absent. */
int rlx_attn_block_input(const rlx_node_data *n, int which);

/* RoPE's angles, as every backend applies them: tab[(s * D/2 + i) * 2] and
 * [.. + 1] are the cosine and sine of (offset + s) * theta^(-2i / D), for
 * positions s < S and pairs i < D / 2 (computed in double, on the calling
 * thread: built once per compile). */
void rlx_rope_table(double *tab, int64_t S, int64_t D, double theta, int64_t offset);
const char *rlx_op_name(rlx_op op);
bool rlx_op_is_unary(rlx_op op);  /* kind RLX_KIND_UNARY */
bool rlx_op_is_binary(rlx_op op); /* kind RLX_KIND_BINARY */
/* The op whose row has fused activation a (RLX_OP_COUNT for RLX_ACT_NONE). */
rlx_op rlx_act_op(rlx_act a);
/* The node's layout attribute (RLX_LAYOUT_NCHW for ops without one). */
int rlx_node_layout(const rlx_node_data *n);

/* The input a conv_bias_act adds to its output before the activation
 * (its residual), or -1 where it has none. */
int rlx_conv_residual_input(const rlx_node_data *n);
/* An input whose buffer node n may take over as its own output's, where
 * nothing reads that input after n (the planner's in-place rule beside
 * elementwise ops'): a conv_bias_act's residual, which its kernels use as
 * the output's starting value, and cross_entropy_grad's logits, whose
 * kernels read a row whole before writing that row's gradient (element c
 * last read by the one that writes it).  -1 for none. */
int rlx_node_inplace_input(const rlx_node_data *n);

/* Whether node n writes into the memory of its input k: input 0 of every
 * RLX_OPF_STATEFUL op (its result is that memory), and the optimizer
 * state of optimizer_step. */
bool rlx_node_writes_input(const rlx_node_data *n, int k);
/* Whether leaf id (a param) is written by some node of g: its value changes
 * during a run, so no backend may treat it as fixed or cache what is
 * computed from it. */
bool rlx_leaf_is_written(const rlx_graph *g, rlx_node id);

/* The planner's alias rule, in one place: whether node id aliases its
 * operand's memory (at *byte_offset): a reshape, a contiguous slice, or a
 * transpose that moves only axes of length 1 (the row's `view`).  The
 * planner places it so; backends compute nothing for it. */
bool rlx_node_is_view(const rlx_graph *g, rlx_node id, size_t *byte_offset);
/* No kernel runs for node id: it is a view of its operand or has no bytes. */
bool rlx_node_is_no_op(const rlx_graph *g, rlx_node id);
/* True when slicing node `id` reads one contiguous range of its operand. */
bool rlx_slice_is_contiguous(const rlx_graph *g, rlx_node id, size_t *byte_offset);

/* Appends to g the primitives computing node n (its inputs already ids of
 * g) through its row's decomposition; returns the id of the result, -1 if a
 * builder failed (g->error says which), RLX_NO_DECOMPOSITION if n has none. */
rlx_node rlx_decompose(rlx_graph *g, const rlx_node_data *n);
/* Whether node n has a decomposition (every fused op and batch_norm; conv
 * and pooling only in channels-last layout). */
bool rlx_node_has_decomposition(const rlx_node_data *n);
/* Whether every node of op has one. */
bool rlx_has_decomposition(rlx_op op);

/* ----------------------------------------------------------- graphs */

rlx_graph *rlx_graph_clone(const rlx_graph *g);
/* Records that input `name` was bound to `value` (copied). */
rlx_status rlx_graph_bind_input(rlx_graph *g, const char *name, rlx_dtype t, const rlx_shape *shape, const void *value,
                                size_t bytes);
/* Records that output `name` (a U8 constant of NUL-ended strings) is a
 * tensor of strings of `shape`. */
rlx_status rlx_graph_string_output(rlx_graph *g, const char *name, const rlx_shape *shape);
/* A copy of g's bound inputs (*out NULL when it has none); freed with
 * rlx_bound_inputs_free. */
rlx_status rlx_bound_inputs_copy(const rlx_graph *g, rlx_bound_input **out, int *n);
void rlx_bound_inputs_free(rlx_bound_input *b, int n);
static inline rlx_node_data *rlx_graph_node(const rlx_graph *g, rlx_node id) { return &g->nodes[id]; }
/* The cross-entropy's per-row loss dtype for logits of dtype t: f32 for
 * f16/bf16 logits (a loss rounded to 8 bits of mantissa per row would move
 * the mean), else t. */
static inline rlx_dtype rlx_cross_entropy_loss_dtype(rlx_dtype t)
{
    return t == RLX_F16 || t == RLX_BF16 ? RLX_F32 : t;
}
/* Appends a node: checks its operands, runs shape inference and records
 * the first failure in the graph.  The node is copied (name and data are
 * duplicated).  Returns the new id or -1. */
rlx_node rlx_graph_add(rlx_graph *g, const rlx_node_data *proto);
/* Sets the graph's sticky error (first one wins) and the thread's error. */
rlx_node rlx_graph_fail(rlx_graph *g, rlx_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Label for messages: "node 12 (matmul 'attn.q')". */
const char *rlx_node_label(const rlx_graph *g, rlx_node id, char *buf, size_t n);
size_t rlx_node_bytes(const rlx_node_data *n);
bool rlx_graph_is_output(const rlx_graph *g, rlx_node id);
/* Per node, how many times it is read by later nodes (outputs not counted). */
int *rlx_graph_use_counts(const rlx_graph *g);
void rlx_graph_print_to(const rlx_graph *g, FILE *f);
/* Graphviz */
void rlx_graph_write_dot(const rlx_graph *g, FILE *f, const char *title);

/* Dtype helpers: rlx_dtype_is_float, rlx_dtype_is_int (core/dtype.h). */

#endif
