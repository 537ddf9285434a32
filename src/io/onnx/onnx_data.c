/* onnx_data.c - value files as the ONNX backend test suite stores them
 * (rlx_onnx_read_value): a TensorProto, a SequenceProto of tensors, or an
 * OptionalProto of either.  The last two are messages of onnx-data.proto,
 * whose C code the build generates when it finds that schema
 * (RLX_HAVE_ONNX_DATA, cmake/onnx.cmake); without it only tensors are read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/onnx/onnx_internal.h"
#ifdef RLX_HAVE_ONNX_DATA
#include "onnx-data.pb-c.h"
#endif

void rlx_onnx_tensors_free(rlx_onnx_tensor *tensors, int n)
{
    for (int i = 0; tensors && i < n; i++)
        free(tensors[i].data);
    free(tensors);
}

#ifdef RLX_HAVE_ONNX_DATA
/* Moves a TensorProto's values into *out. */
static rlx_status take_tensor(const Onnx__TensorProto *p, rlx_onnx_tensor *out)
{
    onnx_tensor *x = NULL;
    rlx_status st = onnx_tensor_from_proto(p, NULL, &x);
    if (st != RLX_OK)
        return st;
    out->dtype = x->dtype;
    out->ndim = x->ndim;
    memcpy(out->dims, x->dims, sizeof x->dims);
    out->data = x->data;
    out->bytes = x->bytes;
    free(x);
    return RLX_OK;
}

/* The tensors of a SequenceProto (sequences of anything else are refused). */
static rlx_status take_sequence(const Onnx__SequenceProto *sp, rlx_onnx_tensor **out, int *n)
{
    if (sp->n_sparse_tensor_values || sp->n_sequence_values || sp->n_map_values || sp->n_optional_values)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "a sequence of sparse tensors, sequences, maps or optionals");
    if (sp->has_elem_type && sp->elem_type != ONNX__SEQUENCE_PROTO__DATA_TYPE__TENSOR &&
        sp->elem_type != ONNX__SEQUENCE_PROTO__DATA_TYPE__UNDEFINED)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "a sequence of element type %d", (int)sp->elem_type);
    if (sp->n_tensor_values > ONNX_MAX_SEQ_LEN)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "a sequence of %zu tensors (at most %d)", sp->n_tensor_values,
                             ONNX_MAX_SEQ_LEN);
    rlx_onnx_tensor *t = rlx_calloc(sp->n_tensor_values + 1, sizeof *t);
    if (!t)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < sp->n_tensor_values; i++) {
        rlx_status st = sp->tensor_values[i] ? take_tensor(sp->tensor_values[i], &t[i])
                                             : rlx_set_error(RLX_ERR_FORMAT, "an empty sequence entry");
        if (st != RLX_OK) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", rlx_last_error());
            rlx_onnx_tensors_free(t, (int)i);
            return rlx_set_error(st, "element %zu: %s", i, msg);
        }
    }
    *out = t;
    *n = (int)sp->n_tensor_values;
    return RLX_OK;
}

static rlx_status read_message(const char *path, rlx_onnx_kind kind, rlx_onnx_kind *held, rlx_onnx_tensor **tensors,
                               int *n)
{
    const ProtobufCMessageDescriptor *d =
        kind == RLX_ONNX_SEQUENCE ? &onnx__sequence_proto__descriptor : &onnx__optional_proto__descriptor;
    uint8_t *buf;
    size_t size;
    rlx_status st = onnx_read_file(path, (size_t)1 << 34, &buf, &size);
    if (st != RLX_OK)
        return st;
    if (!onnx_pb_depth_ok(buf, size, d)) {
        free(buf);
        return rlx_set_error(RLX_ERR_FORMAT, "messages nested deeper than %d levels", ONNX_MAX_PB_DEPTH);
    }
    rlx_clear_error();
    ProtobufCMessage *m = protobuf_c_message_unpack(d, &onnx_pb_allocator, size, buf);
    free(buf);
    if (!m)
        return rlx_last_status_or(RLX_OK) == RLX_ERR_OUT_OF_MEMORY
                   ? RLX_ERR_OUT_OF_MEMORY
                   : rlx_set_error(RLX_ERR_FORMAT, "not a %s file",
                                   kind == RLX_ONNX_SEQUENCE ? "SequenceProto" : "OptionalProto");
    if (kind == RLX_ONNX_SEQUENCE) {
        *held = RLX_ONNX_SEQUENCE;
        st = take_sequence((const Onnx__SequenceProto *)m, tensors, n);
    } else {
        const Onnx__OptionalProto *o = (const Onnx__OptionalProto *)m;
        if (o->tensor_value) {
            *held = RLX_ONNX_TENSOR;
            *tensors = rlx_calloc(1, sizeof **tensors);
            st = !*tensors ? rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory")
                           : take_tensor(o->tensor_value, *tensors);
            if (st != RLX_OK) {
                free(*tensors);
                *tensors = NULL;
            } else
                *n = 1;
        } else if (o->sequence_value) {
            *held = RLX_ONNX_SEQUENCE;
            st = take_sequence(o->sequence_value, tensors, n);
        } else if (o->sparse_tensor_value || o->map_value || o->optional_value) {
            st = rlx_set_error(RLX_ERR_UNSUPPORTED, "an optional of a sparse tensor, a map or an optional");
        } else {
            *held = RLX_ONNX_NONE;
        }
    }
    protobuf_c_message_free_unpacked(m, &onnx_pb_allocator);
    return st;
}
#endif

rlx_status rlx_onnx_read_value(const char *path, rlx_onnx_kind kind, rlx_onnx_kind *held, rlx_onnx_tensor **tensors,
                               int *n)
{
    if (!path || !held || !tensors || !n)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_read_value: NULL argument");
    *tensors = NULL;
    *n = 0;
    *held = RLX_ONNX_NONE;
    rlx_status st;
    if (kind == RLX_ONNX_TENSOR) {
        rlx_onnx_tensor *t = rlx_calloc(1, sizeof *t);
        if (!t)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
        st = rlx_onnx_read_tensor(path, &t->dtype, &t->ndim, t->dims, &t->data, &t->bytes);
        if (st != RLX_OK) {
            free(t);
            return st;
        }
        *held = RLX_ONNX_TENSOR;
        *tensors = t;
        *n = 1;
        return RLX_OK;
    }
    if (kind != RLX_ONNX_SEQUENCE && kind != RLX_ONNX_OPTIONAL && kind != RLX_ONNX_OPTIONAL_SEQUENCE)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_read_value: '%s': kind %d has no file form", path,
                             (int)kind);
#ifdef RLX_HAVE_ONNX_DATA
    st = read_message(path, kind, held, tensors, n);
    if (st != RLX_OK) {
        char msg[700];
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
        *held = RLX_ONNX_NONE;
        return rlx_set_error(st, "'%s': %s", path, msg);
    }
    return RLX_OK;
#else
    (void)st;
    return rlx_set_error(RLX_ERR_UNSUPPORTED,
                         "'%s': sequence and optional files need a library built with onnx-data.proto (python3-onnx)",
                         path);
#endif
}
