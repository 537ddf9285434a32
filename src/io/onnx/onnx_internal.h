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

/* protobuf-c allocates through the library's helpers (so allocation
 * failures are reported and can be injected in tests). */
extern ProtobufCAllocator ox_pb_allocator;

/* FNV-1a of a name (scope and producer tables). */
uint32_t ox_hash_str(const char *s);

/* Largest tensor the importer accepts (elements), and the largest that the
 * import-time evaluator folds on the host. */
#define OX_MAX_NUMEL (INT64_C(1) << 34)
#define OX_FOLD_MAX_NUMEL (INT64_C(1) << 20)
/* Largest host tensor (initializer or folded value) in bytes. */
#define OX_MAX_HOST_BYTES (UINT64_C(1) << 32)

/* A dense host tensor, row-major, rlx dtype. */
typedef struct ox_tensor {
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    int64_t numel;
    void *data; /* owned, may be NULL when numel == 0 */
    size_t bytes;
} ox_tensor;

/* Whether dims are each in [0, OX_MAX_NUMEL] and their non-zero ones
 * multiply to at most OX_MAX_NUMEL; *numel (if not NULL) gets the count. */
bool ox_dims_fit(int ndim, const int64_t *dims, int64_t *numel);
ox_tensor *ox_tensor_new(rlx_dtype t, int ndim, const int64_t *dims); /* zeroed */
/* The same for tables an op handler derives from shapes (indices, masks,
 * DFT matrices): capped at OX_MAX_DERIVED_BYTES. */
#define OX_MAX_DERIVED_BYTES (INT64_C(1) << 26)
ox_tensor *oxo_tensor(rlx_dtype t, int ndim, const int64_t *dims);
void ox_tensor_free(ox_tensor *t);
ox_tensor *ox_tensor_clone(const ox_tensor *t);
double ox_get_f(const ox_tensor *t, int64_t i);
int64_t ox_get_i(const ox_tensor *t, int64_t i);
void ox_set_f(ox_tensor *t, int64_t i, double v);
void ox_set_i(ox_tensor *t, int64_t i, int64_t v);
bool ox_dtype_is_float(rlx_dtype t);

/* ONNX TensorProto.DataType -> rlx dtype; false when RLX has no such type. */
bool ox_dtype_from_onnx(int onnx_type, rlx_dtype *out);
const char *ox_onnx_type_name(int onnx_type);

/* TensorProto -> host tensor.  base_dir: folder for external data (NULL: none
 * allowed).  Checks every size against the declared dims. */
rlx_status ox_tensor_from_proto(const Onnx__TensorProto *p, const char *base_dir, ox_tensor **out);

/* Deepest nesting of protobuf messages accepted (graphs in attributes of
 * nodes in graphs...); checked before protobuf-c unpacks recursively. */
#define OX_MAX_PB_DEPTH 100
bool ox_pb_depth_ok(const void *data, size_t size, const ProtobufCMessageDescriptor *d);

/* Reads a whole file (bounded by max_bytes). */
rlx_status ox_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size);

/* A value: an ONNX tensor name bound to an RLX node, a host constant, or
 * both (a constant gets its node when a graph op first needs it). */
typedef struct ox_value {
    char *name;
    rlx_node node; /* -1 until materialised */
    ox_tensor *k;  /* owned; NULL when not known at import */
} ox_value;

typedef struct ox_scope {
    struct ox_scope *parent;
    ox_value **vals;
    int n, cap;
    int *hash; /* open addressing over vals, -1 empty */
    int hcap;
} ox_scope;

typedef struct ox_ctx {
    rlx_graph *g;
    const char *base_dir;
    int opset; /* ai.onnx opset of the model */
    const rlx_onnx_options *opt;
    ox_scope *scope; /* innermost */
    char err[1024];
    int depth; /* subgraph nesting */
} ox_ctx;

/* Per-node view for handlers. */
typedef struct ox_node {
    ox_ctx *c;
    const Onnx__NodeProto *p;
    int opset;
    int n_in, n_out;
    ox_value *in[64];  /* NULL for a missing optional input */
    ox_value *out[16]; /* filled by the handler */
} ox_node;

/* Scopes. */
ox_scope *ox_scope_new(ox_scope *parent);
void ox_scope_free(ox_scope *s);
ox_value *ox_lookup(ox_ctx *c, const char *name);
/* Binds name in the innermost scope (replaces an earlier binding). Takes k. */
ox_value *ox_bind(ox_ctx *c, const char *name, rlx_node node, ox_tensor *k);

/* The node of a value, making a constant node for a host constant. */
rlx_node ox_node_of(ox_ctx *c, ox_value *v);
/* Static shape/dtype of a value. */
int ox_rank(ox_ctx *c, ox_value *v);
void ox_shape(ox_ctx *c, ox_value *v, int *ndim, int64_t *dims);
rlx_dtype ox_dtype(ox_ctx *c, ox_value *v);

/* Attributes. */
const Onnx__AttributeProto *ox_attr(const ox_node *n, const char *name);
int64_t ox_attr_i(const ox_node *n, const char *name, int64_t def);
double ox_attr_f(const ox_node *n, const char *name, double def);
const char *ox_attr_s(const ox_node *n, const char *name, const char *def, char *buf, size_t bufn);
/* Ints attribute: count, or -1 when absent; copies at most max. */
int ox_attr_ints(const ox_node *n, const char *name, int64_t *vals, int max);
int ox_attr_floats(const ox_node *n, const char *name, float *vals, int max);

/* Handlers report errors with this (message names the node). */
rlx_status ox_fail(ox_node *n, rlx_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Output helpers. */
rlx_status ox_out_node(ox_node *n, int i, rlx_node node);
rlx_status ox_out_const(ox_node *n, int i, ox_tensor *k); /* takes k */

/* Op handlers. */
typedef rlx_status (*ox_handler)(ox_node *n);
ox_handler ox_find_handler(const char *op_type);
/* Import-time evaluation: fills outputs when every input is constant and
 * the op is one the evaluator knows; returns RLX_ERR_UNSUPPORTED to mean
 * "not folded, build graph nodes". */
rlx_status ox_try_fold(ox_node *n);

/* Runs the nodes of a graph (topologically sorted first) in the current
 * scope.  Used for the main graph and for subgraphs (If/Loop/Scan bodies). */
rlx_status ox_run_nodes(ox_ctx *c, const Onnx__GraphProto *gp);
/* Lists the ops of a graph (and its subgraphs) that have no handler. */
void ox_collect_unsupported(const Onnx__GraphProto *gp, int opset, char *buf, size_t n, int *count);

#endif
