/* onnx_absent.c - the ONNX entry points of rlx.h in a library built without
 * the importer (no protobuf-c on the build machine).  They exist so that a
 * program or the Python package links against any build, and each says
 * plainly that this build cannot read ONNX instead of failing to load. */
#include <string.h>

#include "core/error.h"
#include "rlx.h"

#ifndef RLX_HAVE_ONNX

static rlx_status no_onnx(void)
{
    return rlx_set_error(RLX_ERR_UNSUPPORTED,
                         "this RLX library was built without the ONNX importer (it needs protobuf-c and "
                         "onnx.proto: Debian's protobuf-c-compiler, libprotobuf-c-dev and libonnx-dev)");
}

void rlx_onnx_options_init(rlx_onnx_options *o)
{
    if (o)
        memset(o, 0, sizeof *o);
}

rlx_status rlx_onnx_import(const char *path, const rlx_onnx_options *o, rlx_graph **out)
{
    (void)path, (void)o;
    if (out)
        *out = NULL;
    return no_onnx();
}

rlx_status rlx_onnx_import_buffer(const void *data, size_t size, const char *base_dir, const rlx_onnx_options *o,
                                  rlx_graph **out)
{
    (void)data, (void)size, (void)base_dir;
    return rlx_onnx_import(NULL, o, out);
}

rlx_status rlx_model_load_onnx(const char *path, const rlx_options *o, rlx_model **out)
{
    (void)path, (void)o;
    if (out)
        *out = NULL;
    return no_onnx();
}

rlx_status rlx_model_load_onnx_buffer(const void *data, size_t size, const char *base_dir, const rlx_options *o,
                                      rlx_model **out)
{
    (void)data, (void)size, (void)base_dir;
    return rlx_model_load_onnx(NULL, o, out);
}

rlx_status rlx_model_session(rlx_model *m, const rlx_onnx_binding *shapes, int n, rlx_session **out)
{
    (void)m, (void)shapes, (void)n;
    if (out)
        *out = NULL;
    return no_onnx();
}

int rlx_model_cached_sessions(const rlx_model *m)
{
    (void)m;
    return 0;
}

rlx_status rlx_model_run(rlx_model *m, int n_inputs, const char *const *names, const rlx_onnx_tensor *inputs,
                         rlx_onnx_tensor **outputs, int *n_outputs)
{
    (void)m, (void)n_inputs, (void)names, (void)inputs;
    if (outputs)
        *outputs = NULL;
    if (n_outputs)
        *n_outputs = 0;
    return no_onnx();
}

int rlx_model_cached_windows(const rlx_model *m)
{
    (void)m;
    return 0;
}

void rlx_model_free(rlx_model *m) { (void)m; }

rlx_status rlx_onnx_print_info(const char *path, void *file)
{
    (void)path, (void)file;
    return no_onnx();
}

rlx_status rlx_onnx_inputs(const char *path, rlx_onnx_input **inputs, int *n_inputs, char ***outputs, int *n_outputs)
{
    (void)path;
    if (inputs)
        *inputs = NULL;
    if (outputs)
        *outputs = NULL;
    if (n_inputs)
        *n_inputs = 0;
    if (n_outputs)
        *n_outputs = 0;
    return no_onnx();
}

void rlx_onnx_inputs_free(rlx_onnx_input *inputs, int n_inputs, char **outputs, int n_outputs)
{
    (void)inputs, (void)n_inputs, (void)outputs, (void)n_outputs;
}

rlx_status rlx_onnx_outputs(const char *path, rlx_onnx_input **outputs, int *n_outputs)
{
    (void)path;
    if (outputs)
        *outputs = NULL;
    if (n_outputs)
        *n_outputs = 0;
    return no_onnx();
}

rlx_status rlx_onnx_load_params(const char *path, rlx_onnx_param_fn fn, void *user)
{
    (void)path, (void)fn, (void)user;
    return no_onnx();
}

rlx_status rlx_onnx_read_tensor(const char *path, rlx_dtype *t, int *ndim, int64_t *dims, void **data, size_t *bytes)
{
    (void)path, (void)t, (void)ndim, (void)dims, (void)bytes;
    if (data)
        *data = NULL;
    return no_onnx();
}

rlx_status rlx_onnx_read_value(const char *path, rlx_onnx_kind kind, rlx_onnx_kind *held, rlx_onnx_tensor **tensors,
                               int *n)
{
    (void)path, (void)kind, (void)held;
    if (tensors)
        *tensors = NULL;
    if (n)
        *n = 0;
    return no_onnx();
}

void rlx_onnx_tensors_free(rlx_onnx_tensor *tensors, int n) { (void)tensors, (void)n; }

#endif
