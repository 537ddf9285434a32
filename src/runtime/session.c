/* session.c - a compiled graph ready to run: set params and inputs by name,
 * run the thunk schedule (no allocation), read outputs. */
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime.h"

static const char *kind_name[3] = {"input", "param", "output"};

void rlx_session_free(rlx_session *s)
{
    if (!s)
        return;
    if (s->schedule.thunks && s->backend) {
        if (s->backend->release_schedule)
            s->backend->release_schedule(s->backend, &s->schedule);
        for (int i = 0; i < s->schedule.n_thunks; i++)
            if (s->backend->release)
                s->backend->release(s->backend, &s->schedule.thunks[i]);
    }
    free(s->schedule.thunks);
    free(s->keep_bytes);
    free(s->keep_offset);
    free(s->ext);
    if (s->arena && s->backend)
        s->backend->free(s->backend, s->arena);
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < s->n_io[k]; i++)
            free(s->io[k][i].name);
        free(s->io[k]);
    }
    free(s->report);
    rlx_bound_inputs_free(s->bound, s->n_bound);
    rlx_plan_free(&s->plan);
    rlx_graph_free(s->graph);
    free(s);
}

static rlx_io_slot *find(rlx_session *s, int kind, const char *name)
{
    for (int i = 0; i < s->n_io[kind]; i++)
        if (strcmp(s->io[kind][i].name, name) == 0)
            return &s->io[kind][i];
    return NULL;
}

static rlx_status check_bytes(const rlx_session *s, int kind, const rlx_io_slot *slot, size_t bytes)
{
    if (bytes == slot->bytes)
        return RLX_OK;
    const rlx_node_data *n = &s->graph->nodes[slot->node];
    char sh[128];
    return rlx_set_error(RLX_ERR_SHAPE, "%s '%s' is %s%s (%zu bytes), got %zu bytes", kind_name[kind], slot->name,
                         rlx_dtype_name(n->dtype), rlx_shape_str(&n->shape, sh, sizeof sh), slot->bytes, bytes);
}

/* Up to 8 values of a bound input, as text: "3, 4". */
static const char *values_str(rlx_dtype t, const void *v, size_t bytes, char *buf, size_t n)
{
    size_t es = rlx_dtype_size(t), len = 0, count = es ? bytes / es : 0;
    buf[0] = '\0';
    for (size_t i = 0; i < count && i < 8 && len < n; i++) {
        const char *p = (const char *)v + i * es, *sep = i ? ", " : "";
        double d = 0;
        float f;
        uint16_t h;
        int64_t q64;
        int32_t q32;
        long long q = 0;
        int is_int = 1;
        switch (t) {
        case RLX_F32: memcpy(&f, p, sizeof f), d = (double)f, is_int = 0; break;
        case RLX_F64: memcpy(&d, p, sizeof d), is_int = 0; break;
        case RLX_F16: memcpy(&h, p, sizeof h), d = (double)rlx_f16_to_f32(h), is_int = 0; break;
        case RLX_BF16: memcpy(&h, p, sizeof h), d = (double)rlx_bf16_to_f32(h), is_int = 0; break;
        case RLX_I64: memcpy(&q64, p, sizeof q64), q = (long long)q64; break;
        case RLX_I32: memcpy(&q32, p, sizeof q32), q = q32; break;
        case RLX_I8: q = *(const int8_t *)p; break;
        default: q = *(const uint8_t *)p; break;
        }
        len += is_int ? (size_t)snprintf(buf + len, n - len, "%s%lld", sep, q)
                      : (size_t)snprintf(buf + len, n - len, "%s%g", sep, d);
    }
    if (count > 8 && len < n)
        snprintf(buf + len, n - len, ", ... (%zu values)", count);
    return buf;
}

/* An input bound by value when the graph was built: it has no slot; the
 * value it was bound to is accepted (nothing to do), any other is refused,
 * since the compiled graph holds the old one. */
static rlx_status check_bound(const rlx_bound_input *b, const void *data, size_t bytes)
{
    char want[256], sh[128];
    values_str(b->dtype, b->value, b->bytes, want, sizeof want);
    if (bytes != b->bytes)
        return rlx_set_error(RLX_ERR_SHAPE,
                             "input '%s' was bound by value when the model was imported (%s%s: %s); got %zu bytes "
                             "where it has %zu: import it again with the new value",
                             b->name, rlx_dtype_name(b->dtype), rlx_shape_str(&b->shape, sh, sizeof sh), want, bytes,
                             b->bytes);
    if (bytes && memcmp(data, b->value, bytes) != 0) {
        char got[256];
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "input '%s' was bound by value when the model was imported (%s%s: %s), and the session "
                             "was compiled for that value; got %s: import it again with the new value (an rlx_model "
                             "compiles once per value)",
                             b->name, rlx_dtype_name(b->dtype), rlx_shape_str(&b->shape, sh, sizeof sh), want,
                             values_str(b->dtype, data, bytes, got, sizeof got));
    }
    return RLX_OK;
}

static const rlx_bound_input *find_bound(const rlx_session *s, const char *name)
{
    for (int i = 0; i < s->n_bound; i++)
        if (!s->bound[i].string_output && strcmp(s->bound[i].name, name) == 0)
            return &s->bound[i];
    return NULL;
}

static rlx_status set_tensor(rlx_session *s, int kind, const char *name, const void *data, size_t bytes)
{
    if (!s || !name || (!data && bytes))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "set %s: session, name and data must not be NULL",
                             kind_name[kind]);
    rlx_io_slot *slot = find(s, kind, name);
    const rlx_bound_input *b = !slot && kind == 0 ? find_bound(s, name) : NULL;
    if (b)
        return check_bound(b, data, bytes);
    if (!slot)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "the compiled graph has no %s named '%s'", kind_name[kind], name);
    rlx_status st = check_bytes(s, kind, slot, bytes);
    if (st != RLX_OK)
        return st;
    if (bytes && (st = s->backend->upload(s->backend, slot->ptr, data, bytes)) != RLX_OK)
        return st;
    slot->set = true;
    return RLX_OK;
}

rlx_status rlx_session_set_param(rlx_session *s, const char *name, const void *data, size_t bytes)
{
    return set_tensor(s, 1, name, data, bytes);
}

rlx_status rlx_session_set_input(rlx_session *s, const char *name, const void *data, size_t bytes)
{
    return set_tensor(s, 0, name, data, bytes);
}

rlx_status rlx_session_run(rlx_session *s)
{
    if (!s)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "run: session is NULL");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < s->n_io[k]; i++)
            if (!s->io[k][i].set && s->io[k][i].bytes)
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s '%s' was never set", kind_name[k], s->io[k][i].name);
    rlx_status st = s->backend->run(s->backend, &s->schedule, &s->run_ctx);
    s->run_ctx.run_index++;
    return st;
}

rlx_status rlx_session_get_output(rlx_session *s, const char *name, void *data, size_t bytes)
{
    if (!s || !name || (!data && bytes))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "get output: session, name and data must not be NULL");
    rlx_io_slot *slot = find(s, 2, name);
    if (!slot)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "the compiled graph has no output named '%s'", name);
    rlx_status st = check_bytes(s, 2, slot, bytes);
    if (st != RLX_OK)
        return st;
    if (!bytes)
        return RLX_OK;
    /* A constant output lives in the persistent region; anything else was
     * written by the last run. */
    return s->backend->download(s->backend, data, slot->ptr, bytes);
}

rlx_status rlx_session_get_param(rlx_session *s, const char *name, void *data, size_t bytes)
{
    if (!s || !name || (!data && bytes))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "get param: session, name and data must not be NULL");
    rlx_io_slot *slot = find(s, 1, name);
    if (!slot)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "the compiled graph has no param named '%s'", name);
    rlx_status st = check_bytes(s, 1, slot, bytes);
    if (st != RLX_OK || !bytes)
        return st;
    return s->backend->download(s->backend, data, slot->ptr, bytes);
}

/* Device pointers: a device -> device copy between the caller's memory and
 * the slot, where the backend has one (CUDA); the CPU's tensors are host
 * memory, so it has none. */
static rlx_status device_copy(rlx_session *s, int kind, const char *name, void *dst, const void *src, size_t bytes,
                              rlx_io_slot **out)
{
    if (!s || !name || (!dst && !src))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "%s %s on the device: session, name and pointer must not be NULL", kind ? "get" : "set",
                             kind_name[kind]);
    if (!s->backend->copy_device)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "%s %s '%s' on the device: the session runs on the %s, whose tensors are host memory "
                             "(use rlx_session_%s)",
                             kind ? "get" : "set", kind_name[kind], name, s->backend->name,
                             kind ? "get_output" : "set_input");
    rlx_io_slot *slot = find(s, kind, name);
    if (!slot && kind == 0 && find_bound(s, name))
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "input '%s' was bound by value when the model was imported: set it from host memory "
                             "(rlx_session_set_input), which checks the value",
                             name);
    if (!slot)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "the compiled graph has no %s named '%s'", kind_name[kind], name);
    rlx_status st = check_bytes(s, kind, slot, bytes);
    if (st != RLX_OK)
        return st;
    if ((kind ? (const void *)dst : src) == NULL && bytes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s '%s' on the device: the pointer is NULL", kind_name[kind],
                             name);
    if (bytes &&
        (st = s->backend->copy_device(s->backend, kind ? dst : slot->ptr, kind ? slot->ptr : src, bytes)) != RLX_OK)
        return st;
    *out = slot;
    return RLX_OK;
}

rlx_status rlx_session_set_input_device(rlx_session *s, const char *name, const void *device_ptr, size_t bytes)
{
    rlx_io_slot *slot = NULL;
    rlx_status st = device_copy(s, 0, name, NULL, device_ptr, bytes, &slot);
    if (st == RLX_OK)
        slot->set = true;
    return st;
}

rlx_status rlx_session_get_output_device(rlx_session *s, const char *name, void *device_ptr, size_t bytes)
{
    rlx_io_slot *slot = NULL;
    return device_copy(s, 2, name, device_ptr, NULL, bytes, &slot);
}

rlx_status rlx_device_alloc(rlx_device device, int index, size_t bytes, void **out)
{
    if (!out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_device_alloc: out must not be NULL");
    *out = NULL;
    if (device == RLX_DEVICE_CPU)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_device_alloc: the cpu's memory is host memory (use malloc)");
    const rlx_backend *be = NULL;
    rlx_status st = rlx_backend_get(device, index, &be);
    if (st != RLX_OK)
        return st;
    return be->alloc(be, bytes, out);
}

void rlx_device_free(rlx_device device, int index, void *ptr)
{
    const rlx_backend *be = NULL;
    if (ptr && device != RLX_DEVICE_CPU && rlx_backend_get(device, index, &be) == RLX_OK)
        be->free(be, ptr);
}

int rlx_device_count(rlx_device device) { return rlx_backend_device_count(device); }

int rlx_session_count(const rlx_session *s, int kind)
{
    if (!s || kind < 0 || kind > 2)
        return 0;
    return s->n_io[kind];
}

static void fill_info(const rlx_session *s, const rlx_io_slot *slot, rlx_tensor_info *info)
{
    const rlx_node_data *n = &s->graph->nodes[slot->node];
    memset(info, 0, sizeof *info);
    info->name = slot->name;
    info->dtype = n->dtype;
    info->ndim = n->shape.ndim;
    memcpy(info->dims, n->shape.dims, sizeof info->dims);
    info->bytes = slot->bytes;
    /* an output of strings: its bytes as they are, its shape the strings' */
    for (int i = 0; i < s->n_bound; i++)
        if (s->bound[i].string_output && !strcmp(s->bound[i].name, slot->name) && n->dtype == RLX_U8) {
            info->dtype = RLX_STRING;
            info->ndim = s->bound[i].shape.ndim;
            memcpy(info->dims, s->bound[i].shape.dims, sizeof info->dims);
        }
}

rlx_status rlx_session_info(const rlx_session *s, int kind, int index, rlx_tensor_info *info)
{
    if (!s || !info || kind < 0 || kind > 2 || index < 0 || index >= s->n_io[kind])
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "session info: bad session, kind %d or index %d", kind, index);
    fill_info(s, &s->io[kind][index], info);
    return RLX_OK;
}

rlx_status rlx_session_find(const rlx_session *s, int kind, const char *name, rlx_tensor_info *info)
{
    if (!s || !info || !name || kind < 0 || kind > 2)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "session find: bad arguments");
    rlx_io_slot *slot = find((rlx_session *)s, kind, name);
    if (!slot)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "the compiled graph has no %s named '%s'", kind_name[kind], name);
    fill_info(s, slot, info);
    return RLX_OK;
}

rlx_status rlx_session_stats(const rlx_session *s, rlx_compile_stats *st)
{
    if (!s || !st)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "stats: NULL argument");
    *st = s->stats;
    return RLX_OK;
}

const char *rlx_session_report(const rlx_session *s) { return s && s->report ? s->report : ""; }

rlx_status rlx_session_to_dot(const rlx_session *s, const char *title, char **out)
{
    if (!s)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_session_to_dot: session is NULL");
    return rlx_graph_to_dot(s->graph, title, out);
}
