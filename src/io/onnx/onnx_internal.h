/* onnx_internal.h - shared pieces of the ONNX importer: host tensors (for
 * initializers and the import-time constant evaluator), values (what an
 * ONNX tensor name stands for), scopes (subgraphs see their parents'
 * names) and the per-node context the op handlers work with. */
#ifndef RLX_IO_ONNX_INTERNAL_H
#define RLX_IO_ONNX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "rlx.h"
#include "core/error.h"
#include "ir/ir.h"

/* protobuf-c allocates through the library's helpers (so allocation
 * failures are reported and can be injected in tests). */
extern ProtobufCAllocator onnx_pb_allocator;

/* FNV-1a of a name (scope and producer tables). */
uint32_t onnx_hash_str(const char *s);

/* Largest tensor the importer accepts (elements), and the largest that the
 * import-time evaluator folds on the host. */
#define ONNX_MAX_NUMEL (INT64_C(1) << 34)
#define ONNX_FOLD_MAX_NUMEL (INT64_C(1) << 20)
/* Largest host tensor (initializer or folded value) in bytes. */
#define ONNX_MAX_HOST_BYTES (UINT64_C(1) << 32)

/* A dense host tensor, row-major, rlx dtype. */
typedef struct onnx_tensor {
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    int64_t numel;
    void *data; /* owned, may be NULL when numel == 0 */
    size_t bytes;
    int refs; /* owners beyond the first (onnx_tensor_share); never written through once shared */
    /* holds data when the graph may share it (a weight): its constant
     * node reads the same bytes (onnx_node_of) */
    rlx_blob *blob;
} onnx_tensor;

/* Whether dims are each in [0, ONNX_MAX_NUMEL] and their non-zero ones
 * multiply to at most ONNX_MAX_NUMEL; *numel (if not NULL) gets the count. */
bool onnx_dims_fit(int ndim, const int64_t *dims, int64_t *numel);
onnx_tensor *onnx_tensor_new(rlx_dtype t, int ndim, const int64_t *dims); /* zeroed */
/* The same for tables an op handler derives from shapes (indices, masks,
 * DFT matrices): capped at ONNX_MAX_DERIVED_BYTES. */
#define ONNX_MAX_DERIVED_BYTES (INT64_C(1) << 26)
onnx_tensor *onnx_tensor_derived(rlx_dtype t, int ndim, const int64_t *dims);
void onnx_tensor_free(onnx_tensor *t); /* drops one owner */
onnx_tensor *onnx_tensor_clone(const onnx_tensor *t);
/* One more owner of t (sequences hold their elements' constants without copies). */
onnx_tensor *onnx_tensor_share(onnx_tensor *t);
double onnx_get_f(const onnx_tensor *t, int64_t i);
int64_t onnx_get_i(const onnx_tensor *t, int64_t i);
void onnx_set_f(onnx_tensor *t, int64_t i, double v);
void onnx_set_i(onnx_tensor *t, int64_t i, int64_t v);
bool onnx_dtype_is_float(rlx_dtype t);

/* Tensors of strings (dtype RLX_STRING): bytes are the elements in order,
 * each ended by a NUL; numel counts the strings.  A string tensor of
 * `bytes` zeroed bytes (filled by the caller): */
onnx_tensor *onnx_string_new(int ndim, const int64_t *dims, size_t bytes);
/* Whether `bytes` of data are exactly numel NUL-ended strings. */
bool onnx_string_check(const void *data, size_t bytes, int64_t numel);
/* Pointers to t's elements, into t's data (free the array only). */
const char **onnx_string_elems(const onnx_tensor *t);
/* A string tensor of n strings. */
onnx_tensor *onnx_string_pack(int ndim, const int64_t *dims, char *const *strs, int64_t n);
/* A TensorProto of data type STRING. */
rlx_status onnx_string_from_proto(const Onnx__TensorProto *p, onnx_tensor **out);

/* ONNX TensorProto.DataType -> rlx dtype; false when RLX has no such type. */
bool onnx_dtype_from_onnx(int onnx_type, rlx_dtype *out);
const char *onnx_type_name(int onnx_type);

/* TensorProto -> host tensor.  base_dir: folder for external data (NULL: none
 * allowed).  Checks every size against the declared dims. */
rlx_status onnx_tensor_from_proto(const Onnx__TensorProto *p, const char *base_dir, onnx_tensor **out);
/* The same for a weight (an initializer, a Constant's value): its bytes in
 * a blob that the graph's constant node shares, never written after.  With
 * `mapped`, raw_data lies in a read-only file mapping whose pages are given
 * back as they are copied. */
rlx_status onnx_weight_from_proto(const Onnx__TensorProto *p, const char *base_dir, bool mapped, onnx_tensor **out);
/* Gives back the whole pages of [p, p + len) in a read-only file mapping. */
void onnx_release_pages(const void *p, size_t len);

/* Where an initializer's raw_data payload lies in a model file's bytes;
 * present is false for one stored another way. */
/* A protobuf varint at p[*i] (of n bytes), *i moved past it; false when it
 * runs past n or over 64 bits.  The wire-format walks (the nesting depth
 * check, the weights' split) read with it. */
static inline bool onnx_rd_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && *i < n; s += 7) {
        uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

typedef struct onnx_raw_slice {
    size_t off, len;
    bool present;
} onnx_raw_slice;
/* The ModelProto bytes p[0, n) without the raw_data payloads of its
 * graph's initializers (each left present and empty), in *out (malloc'd),
 * and one slice per initializer in wire order, in *raw (malloc'd).  False
 * (nothing allocated) on bytes it does not split: unpack them whole. */
bool onnx_split_weights(const uint8_t *p, size_t n, uint8_t **out, size_t *out_n, onnx_raw_slice **raw, size_t *n_raw);

/* Deepest nesting of protobuf messages accepted (graphs in attributes of
 * nodes in graphs...); checked before protobuf-c unpacks recursively. */
#define ONNX_MAX_PB_DEPTH 100
bool onnx_pb_depth_ok(const void *data, size_t size, const ProtobufCMessageDescriptor *d);

/* Reads a whole file (bounded by max_bytes). */
rlx_status onnx_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size);

/* What a value holds.  A sequence is a list made at import: its length
 * and each element are known while importing (every element an ordinary
 * tensor value), so the sequence ops resolve then.  An optional is the
 * value it holds, or ONNX_KIND_NONE when it is empty. */
typedef enum onnx_kind { ONNX_KIND_TENSOR = 0, ONNX_KIND_SEQUENCE, ONNX_KIND_NONE } onnx_kind;

/* Longest sequence the importer builds (each element is a graph value). */
#define ONNX_MAX_SEQ_LEN 4096

/* A value: an ONNX tensor name bound to an RLX node, a host constant, or
 * both (a constant gets its node when a graph op first needs it). */
typedef struct onnx_value {
    char *name;
    rlx_node node;  /* -1 until materialised */
    onnx_tensor *k; /* owned; NULL when not known at import */
    /* an initializer made a param (initializers_as_params): its value in
     * the model (owned), for ops that need one at import; k stays NULL so
     * that nothing folds it */
    onnx_tensor *init;
    onnx_kind kind;
    /* a sequence: its elements (tensor values without names, owned) and
     * their dtype, known even when it is empty */
    struct onnx_value *elems;
    int n_elems;
    rlx_dtype elem_dtype;
    /* a graph input of strings not bound by value: no node, no constant
     * (RLX computes on strings only at import, so any op reading it fails) */
    bool unknown_string;
} onnx_value;

typedef struct onnx_scope {
    struct onnx_scope *parent;
    onnx_value **vals;
    int n, cap;
    int *hash; /* open addressing over vals, -1 empty */
    int hcap;
} onnx_scope;

typedef struct onnx_ctx {
    rlx_graph *g;
    const char *base_dir;
    int opset; /* ai.onnx opset of the model */
    const rlx_onnx_options *opt;
    onnx_scope *scope; /* innermost */
    char err[1024];
    int depth; /* subgraph nesting */
    /* the input whose value a handler needed at import and did not have
     * (onnx_need_const), and at which nesting: a staged run (onnx_stage.h)
     * cuts the model there */
    const char *need_name;
    int need_depth;
} onnx_ctx;

/* Per-node view for handlers. */
typedef struct onnx_node {
    onnx_ctx *c;
    const Onnx__NodeProto *p;
    const struct onnx_op *op; /* its row in the registry */
    int opset;
    int n_in, n_out;
    onnx_value *in[64];  /* NULL for a missing optional input */
    onnx_value *out[64]; /* filled by the handler */
} onnx_node;

/* Scopes. */
onnx_scope *onnx_scope_new(onnx_scope *parent);
void onnx_scope_free(onnx_scope *s);
onnx_value *onnx_lookup(onnx_ctx *c, const char *name);
/* Binds name in the innermost scope (replaces an earlier binding). Takes k. */
onnx_value *onnx_bind(onnx_ctx *c, const char *name, rlx_node node, onnx_tensor *k);

/* Frees what v holds (not its name) and leaves an empty tensor value. */
void onnx_value_clear(onnx_value *v);
/* *dst (its old contents dropped, its name kept) = src's contents: constants
 * shared, an initializer made a param read as its param, elements copied
 * the same way. */
rlx_status onnx_value_copy(onnx_ctx *c, onnx_value *dst, onnx_value *src);
/* Binds name to src's contents, which it takes (src is left empty). */
onnx_value *onnx_bind_move(onnx_ctx *c, const char *name, onnx_value *src);
/* A sequence value with no elements yet; elements added by onnx_seq_push. */
void onnx_seq_init(onnx_value *s, rlx_dtype elem_dtype);
/* Appends a copy of tensor value x: its dtype must be the sequence's. */
rlx_status onnx_seq_push(onnx_ctx *c, onnx_value *s, onnx_value *x);
/* "a tensor", "a sequence", "an empty optional" */
const char *onnx_kind_name(const onnx_value *v);

/* The node of a value, making a constant node for a host constant. */
rlx_node onnx_node_of(onnx_ctx *c, onnx_value *v);
/* Static shape/dtype of a value. */
int onnx_value_rank(onnx_ctx *c, onnx_value *v);
void onnx_value_shape(onnx_ctx *c, onnx_value *v, int *ndim, int64_t *dims);
rlx_dtype onnx_value_dtype(onnx_ctx *c, onnx_value *v);

/* Attributes. */
const Onnx__AttributeProto *onnx_attr(const onnx_node *n, const char *name);
int64_t onnx_attr_i(const onnx_node *n, const char *name, int64_t def);
double onnx_attr_f(const onnx_node *n, const char *name, double def);
/* A string attribute, or def when absent, written into buf (truncated to
 * bufn - 1 bytes, NUL-ended); returns buf, or NULL (buf empty) when the
 * attribute is absent and def is NULL. */
const char *onnx_attr_s(const onnx_node *n, const char *name, const char *def, char *buf, size_t bufn);
/* Ints attribute: count, or -1 when absent; copies at most max. */
int onnx_attr_ints(const onnx_node *n, const char *name, int64_t *vals, int max);
int onnx_attr_floats(const onnx_node *n, const char *name, float *vals, int max);

/* Handlers report errors with this (message names the node). */
rlx_status onnx_fail(onnx_node *n, rlx_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Output helpers. */
rlx_status onnx_out_node(onnx_node *n, int i, rlx_node node);
rlx_status onnx_out_const(onnx_node *n, int i, onnx_tensor *k); /* takes k */
rlx_status onnx_out_value(onnx_node *n, int i, onnx_value *v);  /* takes v's contents */

/* Op handlers, one row per ONNX op in the table of a topic file
 * (onnx_<topic>.c); onnx_registry.c holds the list of tables. */
typedef rlx_status (*onnx_handler)(onnx_node *n);
typedef struct onnx_op {
    const char *name; /* op_type, in the ai.onnx domain */
    onnx_handler fn;
    int min_inputs;       /* inputs that must be present before fn runs */
    int later_opset;      /* from this opset on (0: none) ... */
    int later_min_inputs; /* ... this many instead */
    /* the builder of an op that maps one-to-one onto one (fn applies it) */
    rlx_node (*unary)(rlx_graph *, rlx_node);
    rlx_node (*binary)(rlx_graph *, rlx_node, rlx_node);
    /* fn takes sequences and empty optionals too (and checks each input's
     * kind itself); every other op is refused them before fn runs */
    bool any_kind;
    /* fn takes tensors of strings (onnx_string.c); every other op is
     * refused them, and a string input not known at import is refused
     * before any fn runs */
    bool strings;
} onnx_op;
/* The row of an op type, or NULL when the importer has no handler for it. */
const onnx_op *onnx_find_op(const char *op_type);
/* The row of a node's op: op_type in the ai.onnx domain, else DOMAIN.op_type. */
const onnx_op *onnx_find_node_op(const Onnx__NodeProto *nd);
int onnx_op_min_inputs(const onnx_op *op, int opset);
/* Import-time evaluation: fills outputs when every input is constant and
 * the op is one the evaluator knows; returns RLX_ERR_UNSUPPORTED to mean
 * "not folded, build graph nodes". */
rlx_status onnx_try_fold(onnx_node *n);

/* Runs the nodes of a graph (topologically sorted first) in the current
 * scope.  Used for the main graph and for subgraphs (If/Loop/Scan bodies). */
rlx_status onnx_run_nodes(onnx_ctx *c, const Onnx__GraphProto *gp);
/* Lists the ops of a graph (and its subgraphs) that have no handler. */
void onnx_collect_unsupported(const Onnx__GraphProto *gp, int opset, char *buf, size_t n, int *count);

#endif
