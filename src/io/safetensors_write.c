/* safetensors_write.c - writes a safetensors file: the u64 header length,
 * the JSON header (built with cJSON, so names are escaped as JSON wants)
 * padded with spaces to a multiple of 8, then each tensor's bytes in order. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"

#ifdef RLX_HAVE_CJSON
#include <cjson/cJSON.h>

static const char *st_name(rlx_dtype t)
{
    static const char *const names[RLX_DTYPE_COUNT] = {
        [RLX_F32] = "F32", [RLX_F16] = "F16", [RLX_BF16] = "BF16", [RLX_F64] = "F64",  [RLX_I64] = "I64",
        [RLX_I32] = "I32", [RLX_I8] = "I8",   [RLX_U8] = "U8",     [RLX_BOOL] = "BOOL"};
    return (unsigned)t < RLX_DTYPE_COUNT ? names[t] : NULL;
}

static size_t entry_bytes(const rlx_safetensors_entry *e)
{
    size_t n = rlx_dtype_size(e->dtype);
    for (int i = 0; i < e->ndim; i++)
        n *= (size_t)e->dims[i];
    return n;
}

static char *build_header(const rlx_safetensors_entry *e, int n)
{
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    if (!root || !meta || !cJSON_AddStringToObject(meta, "format", "pt")) {
        cJSON_Delete(root), cJSON_Delete(meta);
        return NULL;
    }
    cJSON_AddItemToObject(root, "__metadata__", meta);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        cJSON *t = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
        bool ok = t && shape && offs && cJSON_AddStringToObject(t, "dtype", st_name(e[i].dtype));
        for (int d = 0; ok && d < e[i].ndim; d++)
            ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e[i].dims[d]));
        size_t b = entry_bytes(&e[i]);
        ok = ok && cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)at)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(at + b)));
        if (!ok) {
            cJSON_Delete(t), cJSON_Delete(shape), cJSON_Delete(offs), cJSON_Delete(root);
            return NULL;
        }
        cJSON_AddItemToObject(t, "shape", shape);
        cJSON_AddItemToObject(t, "data_offsets", offs);
        cJSON_AddItemToObject(root, e[i].name, t);
        at += b;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

rlx_status rlx_safetensors_write(const char *path, int flags, const rlx_safetensors_entry *e, int n)
{
    if (!path || n < 0 || (n && !e))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "safetensors write: path and entries must be given");
    for (int i = 0; i < n; i++) {
        if (!e[i].name || !st_name(e[i].dtype) || e[i].ndim < 0 || e[i].ndim > RLX_MAX_DIMS ||
            (e[i].ndim && !e[i].dims) || (!e[i].data && entry_bytes(&e[i])))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "safetensors write '%s': entry %d ('%s') is malformed", path,
                                 i, e[i].name ? e[i].name : "");
        for (int j = 0; j < i; j++)
            if (!strcmp(e[i].name, e[j].name))
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "safetensors write '%s': tensor '%s' given twice", path,
                                     e[i].name);
    }
    char *header = build_header(e, n);
    if (!header)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "safetensors write '%s': out of memory", path);
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    rlx_file *f = NULL;
    rlx_status s = rlx_file_open(path, flags, &f);
    if (s != RLX_OK) {
        free(header);
        return s;
    }
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    s = rlx_file_write(f, len, 8);
    if (s == RLX_OK)
        s = rlx_file_write(f, header, hl);
    for (size_t i = hl; s == RLX_OK && i < padded; i++)
        s = rlx_file_write(f, " ", 1);
    free(header);
    for (int i = 0; s == RLX_OK && i < n; i++)
        s = rlx_file_write(f, e[i].data, entry_bytes(&e[i]));
    if (s != RLX_OK) {
        rlx_file_discard(f);
        return s;
    }
    return rlx_file_commit(f);
}

#else

rlx_status rlx_safetensors_write(const char *path, int flags, const rlx_safetensors_entry *e, int n)
{
    (void)path, (void)flags, (void)e, (void)n;
    return rlx_set_error(RLX_ERR_UNSUPPORTED,
                         "safetensors support needs cJSON (Debian: libcjson-dev); rebuild with it");
}

#endif
