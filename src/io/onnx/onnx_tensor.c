/* onnx_tensor.c - host tensors, ONNX dtypes, TensorProto decoding (typed
 * fields, raw_data, external data files) and .pb tensor files. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/onnx/onnx_internal.h"

/* protobuf-c allocates through the library's helpers (onnx_internal.h) */
static void *onnx_pb_alloc(void *data, size_t size)
{
    (void)data;
    return rlx_malloc(size);
}
static void onnx_pb_free(void *data, void *p)
{
    (void)data;
    free(p);
}
ProtobufCAllocator onnx_pb_allocator = {onnx_pb_alloc, onnx_pb_free, NULL};

bool onnx_dtype_is_float(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64; }

bool onnx_dims_fit(int ndim, const int64_t *dims, int64_t *numel)
{
    /* the product of the non-zero dims is bounded too, so that no product
     * of some of the dims overflows where a zero dim makes the count 0 */
    int64_t nz = 1;
    bool zero = false;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] < 0 || dims[i] > ONNX_MAX_NUMEL)
            return false;
        if (dims[i] == 0) {
            zero = true;
            continue;
        }
        if (nz > ONNX_MAX_NUMEL / dims[i])
            return false;
        nz *= dims[i];
    }
    if (numel)
        *numel = zero ? 0 : nz;
    return true;
}

static onnx_tensor *tensor_new(rlx_dtype t, int ndim, const int64_t *dims, bool in_blob);

onnx_tensor *onnx_tensor_new(rlx_dtype t, int ndim, const int64_t *dims) { return tensor_new(t, ndim, dims, false); }

static onnx_tensor *tensor_new(rlx_dtype t, int ndim, const int64_t *dims, bool in_blob)
{
    if (ndim < 0 || ndim > RLX_MAX_DIMS || (unsigned)t >= RLX_DTYPE_COUNT) {
        rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor of rank %d (at most %d)", ndim, RLX_MAX_DIMS);
        return NULL;
    }
    int64_t n;
    if (!onnx_dims_fit(ndim, dims, &n)) {
        rlx_set_error(RLX_ERR_FORMAT, "tensor dimensions negative or too large");
        return NULL;
    }
    if ((uint64_t)n * rlx_dtype_size(t) > ONNX_MAX_HOST_BYTES) {
        rlx_set_error(RLX_ERR_UNSUPPORTED, "a %lld-element host tensor is too large for import-time evaluation",
                      (long long)n);
        return NULL;
    }
    onnx_tensor *x = rlx_calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->dtype = t;
    x->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        x->dims[i] = dims[i];
    x->numel = n;
    x->bytes = (size_t)n * rlx_dtype_size(t);
    if (in_blob && (x->blob = rlx_blob_new(x->bytes))) {
        x->data = rlx_blob_data(x->blob);
        memset(x->data, 0, x->bytes);
    } else if (!in_blob) {
        x->data = rlx_calloc(x->bytes ? x->bytes : 1, 1);
    }
    if (!x->data) {
        free(x);
        return NULL;
    }
    return x;
}

onnx_tensor *onnx_tensor_derived(rlx_dtype t, int ndim, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < ndim && i < RLX_MAX_DIMS; i++) {
        if (dims[i] < 0 || (dims[i] && n > ONNX_MAX_DERIVED_BYTES / dims[i])) {
            rlx_set_error(RLX_ERR_UNSUPPORTED, "an import-time index or weight table would be too large");
            return NULL;
        }
        n *= dims[i];
    }
    if ((uint64_t)n * rlx_dtype_size(t) > ONNX_MAX_DERIVED_BYTES) {
        rlx_set_error(RLX_ERR_UNSUPPORTED, "an import-time index or weight table of %lld elements is too large",
                      (long long)n);
        return NULL;
    }
    return onnx_tensor_new(t, ndim, dims);
}

void onnx_tensor_free(onnx_tensor *t)
{
    if (!t)
        return;
    if (t->refs > 0) {
        t->refs--;
        return;
    }
    if (t->blob)
        rlx_blob_unref(t->blob);
    else
        free(t->data);
    free(t);
}

onnx_tensor *onnx_tensor_share(onnx_tensor *t)
{
    if (t)
        t->refs++;
    return t;
}

onnx_tensor *onnx_tensor_clone(const onnx_tensor *t)
{
    onnx_tensor *x = t->dtype == RLX_STRING ? onnx_string_new(t->ndim, t->dims, t->bytes)
                                            : onnx_tensor_new(t->dtype, t->ndim, t->dims);
    if (x && t->bytes)
        memcpy(x->data, t->data, t->bytes);
    return x;
}

double onnx_get_f(const onnx_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case RLX_F32: return ((const float *)d)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)d)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)d)[i]);
    case RLX_F64: return ((const double *)d)[i];
    case RLX_I64: return (double)((const int64_t *)d)[i];
    case RLX_I32: return ((const int32_t *)d)[i];
    case RLX_I8: return ((const int8_t *)d)[i];
    case RLX_U8: return ((const uint8_t *)d)[i];
    case RLX_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: return 0;
    }
}

int64_t onnx_get_i(const onnx_tensor *t, int64_t i)
{
    const void *d = t->data;
    switch (t->dtype) {
    case RLX_I64: return ((const int64_t *)d)[i];
    case RLX_I32: return ((const int32_t *)d)[i];
    case RLX_I8: return ((const int8_t *)d)[i];
    case RLX_U8: return ((const uint8_t *)d)[i];
    case RLX_BOOL: return ((const uint8_t *)d)[i] != 0;
    default: {
        double v = onnx_get_f(t, i);
        if (isnan(v))
            return 0;
        if (v >= 9.2e18)
            return INT64_MAX;
        if (v <= -9.2e18)
            return INT64_MIN;
        return (int64_t)v;
    }
    }
}

void onnx_set_f(onnx_tensor *t, int64_t i, double v)
{
    void *d = t->data;
    switch (t->dtype) {
    case RLX_F32: ((float *)d)[i] = (float)v; break;
    case RLX_F16: ((uint16_t *)d)[i] = rlx_f32_to_f16((float)v); break;
    case RLX_BF16: ((uint16_t *)d)[i] = rlx_f32_to_bf16((float)v); break;
    case RLX_F64: ((double *)d)[i] = v; break;
    case RLX_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    default: {
        int64_t x;
        if (isnan(v))
            x = 0;
        else if (v >= 9.2e18)
            x = INT64_MAX;
        else if (v <= -9.2e18)
            x = INT64_MIN;
        else
            x = (int64_t)v;
        onnx_set_i(t, i, x);
    }
    }
}

void onnx_set_i(onnx_tensor *t, int64_t i, int64_t v)
{
    void *d = t->data;
    switch (t->dtype) {
    case RLX_I64: ((int64_t *)d)[i] = v; break;
    case RLX_I32: ((int32_t *)d)[i] = (int32_t)v; break;
    case RLX_I8: ((int8_t *)d)[i] = (int8_t)v; break;
    case RLX_U8: ((uint8_t *)d)[i] = (uint8_t)v; break;
    case RLX_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    default: onnx_set_f(t, i, (double)v); break;
    }
}

bool onnx_dtype_from_onnx(int onnx_type, rlx_dtype *out)
{
    switch (onnx_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = RLX_F32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: *out = RLX_U8; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: *out = RLX_I8; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = RLX_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = RLX_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = RLX_BOOL; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = RLX_F16; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = RLX_F64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = RLX_BF16; return true;
    /* widened: RLX has no 16-bit or unsigned wide integers */
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: *out = RLX_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *out = RLX_I32; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: *out = RLX_I64; return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: *out = RLX_I64; return true;
    default: return false;
    }
}

const char *onnx_type_name(int t)
{
    static const char *names[] = {"undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
                                  "int32",     "int64",  "string",    "bool",       "float16", "double",
                                  "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
    if (t >= 0 && t < (int)(sizeof names / sizeof names[0]))
        return names[t];
    return "unknown";
}

rlx_status onnx_read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size)
{
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rlx_set_error(RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        bool dir = S_ISDIR(st.st_mode);
        fclose(f);
        return rlx_set_error(RLX_ERR_IO, "'%s' is %s", path, dir ? "a directory" : "not a regular file");
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return rlx_set_error(RLX_ERR_IO, "'%s' is too large (%lld bytes)", path, (long long)st.st_size);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = rlx_malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory reading '%s'", path);
    }
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return rlx_set_error(RLX_ERR_IO, "short read on '%s'", path);
    }
    fclose(f);
    *data = buf;
    *size = n;
    return RLX_OK;
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        if (v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

/* Reads [offset, offset+len) of an external data file that must lie in base_dir. */
static rlx_status read_external(const Onnx__TensorProto *p, const char *base_dir, void *dst, size_t want)
{
    const char *loc = NULL, *off_s = NULL, *len_s = NULL;
    for (size_t i = 0; i < p->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = p->external_data[i];
        if (!e || !e->key)
            continue;
        if (!strcmp(e->key, "location"))
            loc = e->value;
        else if (!strcmp(e->key, "offset"))
            off_s = e->value;
        else if (!strcmp(e->key, "length"))
            len_s = e->value;
    }
    const char *tn = p->name ? p->name : "?";
    if (!loc || !*loc)
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': external data without a location", tn);
    if (!base_dir)
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': external data but no model folder", tn);
    if (loc[0] == '/' || strstr(loc, "..") || strchr(loc, '\\'))
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': external data location '%s' leaves the model's folder", tn,
                             loc);
    uint64_t off = 0, len = want;
    if (off_s && !parse_u64(off_s, &off))
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': bad external offset '%s'", tn, off_s);
    if (len_s && !parse_u64(len_s, &len))
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': bad external length '%s'", tn, len_s);
    if (len != want)
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': external length %llu, the tensor needs %zu bytes", tn,
                             (unsigned long long)len, want);
    size_t pl = strlen(base_dir) + strlen(loc) + 2;
    char *path = rlx_malloc(pl);
    if (!path)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(path, pl, "%s/%s", base_dir, loc);
    /* Symlinks must not lead out of the folder either. */
    char *rbase = realpath(base_dir, NULL), *rpath = realpath(path, NULL);
    rlx_status st = RLX_OK;
    if (!rbase || !rpath) {
        st = rlx_set_error(RLX_ERR_IO, "tensor '%s': cannot open external data '%s'", tn, path);
    } else {
        size_t bl = strlen(rbase);
        if (strncmp(rpath, rbase, bl) != 0 || rpath[bl] != '/')
            st = rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': external data '%s' leaves the model's folder", tn, loc);
    }
    if (st == RLX_OK) {
        FILE *f = fopen(rpath, "rb");
        struct stat sb;
        if (!f)
            st = rlx_set_error(RLX_ERR_IO, "tensor '%s': cannot open external data '%s'", tn, path);
        else {
            if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode))
                st = rlx_set_error(RLX_ERR_IO, "tensor '%s': '%s' is not a regular file", tn, path);
            else if (off > (uint64_t)sb.st_size || len > (uint64_t)sb.st_size - off)
                st = rlx_set_error(RLX_ERR_FORMAT,
                                   "tensor '%s': external data [%llu, +%llu) beyond the end of '%s' (%lld bytes)", tn,
                                   (unsigned long long)off, (unsigned long long)len, loc, (long long)sb.st_size);
            else if (fseeko(f, (off_t)off, SEEK_SET) != 0 || (want && fread(dst, 1, want, f) != want))
                st = rlx_set_error(RLX_ERR_IO, "tensor '%s': short read on '%s'", tn, path);
            fclose(f);
        }
    }
    free(rbase);
    free(rpath);
    free(path);
    return st;
}

void onnx_release_pages(const void *p, size_t len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p;
    uintptr_t lo = (a + page - 1) / page * page, hi = (a + len) / page * page;
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* memcpy, from a file mapping whose pages go back every few MiB copied:
 * the file's bytes and the copy are not both resident. */
static void copy_from_map(void *dst, const void *src, size_t n)
{
    const size_t step = (size_t)8 << 20;
    for (size_t done = 0; done < n; done += step) {
        size_t k = n - done < step ? n - done : step;
        memcpy((char *)dst + done, (const char *)src + done, k);
        onnx_release_pages(src, done + k);
    }
}

static rlx_status from_proto(const Onnx__TensorProto *p, const char *base_dir, bool in_blob, bool mapped,
                             onnx_tensor **out);

rlx_status onnx_tensor_from_proto(const Onnx__TensorProto *p, const char *base_dir, onnx_tensor **out)
{
    return from_proto(p, base_dir, false, false, out);
}

rlx_status onnx_weight_from_proto(const Onnx__TensorProto *p, const char *base_dir, bool mapped, onnx_tensor **out)
{
    return from_proto(p, base_dir, true, mapped, out);
}

static rlx_status from_proto(const Onnx__TensorProto *p, const char *base_dir, bool in_blob, bool mapped,
                             onnx_tensor **out)
{
    *out = NULL;
    const char *tn = p->name ? p->name : "?";
    int ot = p->has_data_type ? p->data_type : 0;
    if (ot == ONNX__TENSOR_PROTO__DATA_TYPE__STRING)
        return onnx_string_from_proto(p, out);
    rlx_dtype t;
    if (!onnx_dtype_from_onnx(ot, &t))
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s': data type %s (%d) is not supported", tn,
                             onnx_type_name(ot), ot);
    if (p->n_dims > RLX_MAX_DIMS)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s': rank %zu (at most %d)", tn, p->n_dims, RLX_MAX_DIMS);
    if (p->segment)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s': segmented tensors", tn);
    int64_t numel;
    if (!onnx_dims_fit((int)p->n_dims, p->dims, &numel))
        return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': dimensions negative or too large", tn);
    size_t es = rlx_dtype_size(t), want = (size_t)numel * es;
    /* stored element size (differs from es for widened types) */
    size_t ses = ot == ONNX__TENSOR_PROTO__DATA_TYPE__INT16 || ot == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16 ? 2
                 : ot == ONNX__TENSOR_PROTO__DATA_TYPE__UINT32                                             ? 4
                                                                                                           : es;
    bool widened = ses != es || ot == ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
    size_t stored = (size_t)numel * ses;
    bool external = p->has_data_location && p->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    /* Check the stored size before allocating what the dims claim. */
    size_t have_typed = 0;
    switch (ot) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: have_typed = p->n_float_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: have_typed = p->n_int64_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: have_typed = p->n_double_data; break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: have_typed = p->n_uint64_data; break;
    default: have_typed = p->n_int32_data; break;
    }
    if (!external) {
        if (p->has_raw_data && p->raw_data.len != stored)
            return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': raw_data has %zu bytes, its %lld %s elements need %zu",
                                 tn, p->raw_data.len, (long long)numel, onnx_type_name(ot), stored);
        if (!p->has_raw_data && have_typed != (size_t)numel)
            return rlx_set_error(RLX_ERR_FORMAT, "tensor '%s': %zu stored values for %lld elements", tn, have_typed,
                                 (long long)numel);
    }
    onnx_tensor *x = tensor_new(t, (int)p->n_dims, p->dims, in_blob);
    if (!x)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tensor '%s': cannot allocate %zu bytes", tn, want);
    rlx_status st = RLX_OK;
    if (external && widened) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s': external %s data", tn, onnx_type_name(ot));
    } else if (external) {
        st = read_external(p, base_dir, x->data, want);
    } else if (p->has_raw_data && widened) {
        const uint8_t *r = p->raw_data.data;
        for (int64_t i = 0; i < numel; i++) {
            const uint8_t *e = r + (size_t)i * ses;
            int64_t v;
            switch (ot) {
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: v = (int16_t)(uint16_t)(e[0] | (e[1] << 8)); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: v = (uint16_t)(e[0] | (e[1] << 8)); break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: {
                uint32_t u;
                memcpy(&u, e, 4);
                v = u;
                break;
            }
            default: {
                uint64_t u;
                memcpy(&u, e, 8);
                v = (int64_t)u;
                break;
            }
            }
            onnx_set_i(x, i, v);
        }
    } else if (p->has_raw_data) {
        if (want && mapped)
            copy_from_map(x->data, p->raw_data.data, want);
        else if (want)
            memcpy(x->data, p->raw_data.data, want);
    } else {
        for (int64_t i = 0; i < numel; i++) {
            switch (ot) {
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: ((float *)x->data)[i] = p->float_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: ((int64_t *)x->data)[i] = p->int64_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: ((double *)x->data)[i] = p->double_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
            case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: ((uint16_t *)x->data)[i] = (uint16_t)p->int32_data[i]; break;
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
            case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: onnx_set_i(x, i, (int64_t)p->uint64_data[i]); break;
            default: onnx_set_i(x, i, p->int32_data[i]); break;
            }
        }
    }
    if (st != RLX_OK) {
        onnx_tensor_free(x);
        return st;
    }
    *out = x;
    return RLX_OK;
}

/* protobuf-c unpacks nested messages recursively with no depth limit, so a
 * small file of deeply nested graphs would overflow the stack.  This pass
 * walks the wire format, guided by the generated descriptors, and only
 * measures how deep message fields nest; malformed input is left for
 * protobuf-c to reject. */
static bool depth_ok(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *d, int depth)
{
    if (depth > ONNX_MAX_PB_DEPTH)
        return false;
    size_t i = 0;
    while (i < n) {
        uint64_t tag, v;
        if (!onnx_rd_varint(p, n, &i, &tag))
            return true;
        switch (tag & 7) {
        case 0:
            if (!onnx_rd_varint(p, n, &i, &v))
                return true;
            break;
        case 1:
            if (n - i < 8)
                return true;
            i += 8;
            break;
        case 5:
            if (n - i < 4)
                return true;
            i += 4;
            break;
        case 2: {
            if (!onnx_rd_varint(p, n, &i, &v) || v > n - i)
                return true;
            const ProtobufCFieldDescriptor *f =
                d && (tag >> 3) <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3)) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !depth_ok(p + i, (size_t)v, f->descriptor, depth + 1))
                return false;
            i += (size_t)v;
            break;
        }
        default: return true;
        }
    }
    return true;
}

bool onnx_pb_depth_ok(const void *data, size_t size, const ProtobufCMessageDescriptor *d)
{
    return depth_ok(data, size, d, 0);
}

rlx_status rlx_onnx_read_tensor(const char *path, rlx_dtype *t, int *ndim, int64_t *dims, void **data, size_t *bytes)
{
    if (!path || !t || !ndim || !dims || !data || !bytes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_onnx_read_tensor: NULL argument");
    *data = NULL;
    uint8_t *buf;
    size_t n;
    rlx_status st = onnx_read_file(path, (size_t)1 << 34, &buf, &n);
    if (st != RLX_OK)
        return st;
    if (!onnx_pb_depth_ok(buf, n, &onnx__tensor_proto__descriptor)) {
        free(buf);
        return rlx_set_error(RLX_ERR_FORMAT, "'%s': messages nested deeper than %d levels", path, ONNX_MAX_PB_DEPTH);
    }
    rlx_clear_error();
    Onnx__TensorProto *p = onnx__tensor_proto__unpack(&onnx_pb_allocator, n, buf);
    free(buf);
    if (!p && rlx_last_status_or(RLX_OK) == RLX_ERR_OUT_OF_MEMORY)
        return RLX_ERR_OUT_OF_MEMORY;
    if (!p)
        return rlx_set_error(RLX_ERR_FORMAT, "'%s' is not a TensorProto file", path);
    onnx_tensor *x = NULL;
    st = onnx_tensor_from_proto(p, NULL, &x);
    onnx__tensor_proto__free_unpacked(p, &onnx_pb_allocator);
    if (st != RLX_OK)
        return st;
    *t = x->dtype;
    *ndim = x->ndim;
    for (int i = 0; i < x->ndim; i++)
        dims[i] = x->dims[i];
    *data = x->data;
    *bytes = x->bytes;
    free(x);
    return RLX_OK;
}

/* ------------------------------------------------------------ tensors of strings */

onnx_tensor *onnx_string_new(int ndim, const int64_t *dims, size_t bytes)
{
    int64_t n;
    if (ndim < 0 || ndim > RLX_MAX_DIMS || !onnx_dims_fit(ndim, dims, &n) || bytes > ONNX_MAX_HOST_BYTES) {
        rlx_set_error(RLX_ERR_UNSUPPORTED, "a string tensor of rank %d and %zu bytes is too large", ndim, bytes);
        return NULL;
    }
    onnx_tensor *x = rlx_calloc(1, sizeof *x);
    if (!x || !(x->data = rlx_calloc(bytes ? bytes : 1, 1))) {
        free(x);
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory for a string tensor");
        return NULL;
    }
    x->dtype = RLX_STRING;
    x->ndim = ndim;
    if (ndim) /* a scalar may come with no dims at all */
        memcpy(x->dims, dims, sizeof dims[0] * (size_t)ndim);
    x->numel = n;
    x->bytes = bytes;
    return x;
}

bool onnx_string_check(const void *data, size_t bytes, int64_t numel)
{
    const char *s = data;
    int64_t ends = 0;
    for (size_t i = 0; i < bytes; i++)
        ends += s[i] == 0;
    return ends == numel && (bytes == 0 || s[bytes - 1] == 0);
}

const char **onnx_string_elems(const onnx_tensor *t)
{
    const char **v = rlx_malloc(sizeof *v * (size_t)(t->numel ? t->numel : 1));
    if (!v) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory reading strings");
        return NULL;
    }
    const char *s = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        v[i] = s;
        s += strlen(s) + 1;
    }
    return v;
}

onnx_tensor *onnx_string_pack(int ndim, const int64_t *dims, char *const *strs, int64_t n)
{
    size_t bytes = 0;
    for (int64_t i = 0; i < n; i++)
        bytes += strlen(strs[i]) + 1;
    onnx_tensor *t = onnx_string_new(ndim, dims, bytes);
    if (!t)
        return NULL;
    char *d = t->data;
    for (int64_t i = 0; i < n; i++) {
        size_t l = strlen(strs[i]) + 1;
        memcpy(d, strs[i], l);
        d += l;
    }
    return t;
}

rlx_status onnx_string_from_proto(const Onnx__TensorProto *p, onnx_tensor **out)
{
    int64_t numel;
    if (p->n_dims > RLX_MAX_DIMS || !onnx_dims_fit((int)p->n_dims, p->dims, &numel))
        return rlx_set_error(RLX_ERR_FORMAT, "string tensor '%s': bad dimensions", p->name ? p->name : "?");
    if ((uint64_t)numel != p->n_string_data)
        return rlx_set_error(RLX_ERR_FORMAT, "string tensor '%s': %zu strings for %lld elements",
                             p->name ? p->name : "?", p->n_string_data, (long long)numel);
    size_t bytes = 0;
    for (size_t i = 0; i < p->n_string_data; i++) {
        if (p->string_data[i].len && memchr(p->string_data[i].data, 0, p->string_data[i].len))
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "string tensor '%s': element %zu holds a NUL byte",
                                 p->name ? p->name : "?", i);
        bytes += p->string_data[i].len + 1;
    }
    onnx_tensor *t = onnx_string_new((int)p->n_dims, p->dims, bytes);
    if (!t)
        return rlx_last_status_or(RLX_ERR_OUT_OF_MEMORY);
    char *d = t->data;
    for (size_t i = 0; i < p->n_string_data; i++) {
        if (p->string_data[i].len)
            memcpy(d, p->string_data[i].data, p->string_data[i].len);
        d += p->string_data[i].len + 1; /* the NUL: calloc'd */
    }
    *out = t;
    return RLX_OK;
}
