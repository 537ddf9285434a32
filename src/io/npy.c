/* npy.c - NumPy .npy files (format versions 1, 2 and 3): little-endian,
 * C order, dtypes f4 f2 f8 i8 i4 i1 u1 b1 (and <u2 read as bfloat16 is not
 * guessed: it is refused).  Every size in the header is checked against the
 * file before anything is allocated. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core/error.h"
#include "rlx.h"

static const struct {
    const char *descr;
    rlx_dtype t;
} npy_types[] = {
    {"f4", RLX_F32}, {"f2", RLX_F16}, {"f8", RLX_F64}, {"i8", RLX_I64},
    {"i4", RLX_I32}, {"i1", RLX_I8},  {"u1", RLX_U8},  {"b1", RLX_BOOL},
};

/* Finds 'key': in the header dict and returns a pointer just past the colon. */
static const char *find_key(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(h, pat);
    }
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

rlx_status rlx_npy_read(const char *path, rlx_dtype *t, int *ndim, int64_t *dims, void **data, size_t *bytes)
{
    if (!path || !t || !ndim || !dims || !data || !bytes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_npy_read: NULL argument");
    *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rlx_set_error(RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        bool dir = S_ISDIR(st.st_mode);
        fclose(f);
        return rlx_set_error(RLX_ERR_IO, "'%s' is %s", path, dir ? "a directory" : "not a regular file");
    }
    if (st.st_size == 0) {
        fclose(f);
        return rlx_set_error(RLX_ERR_FORMAT, "'%s' is empty", path);
    }
    unsigned char magic[12];
    rlx_status s = RLX_OK;
    char *hdr = NULL;
    void *buf = NULL;
    if (fread(magic, 1, 10, f) != 10 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s' is not a .npy file", path);
        goto out;
    }
    int major = magic[6];
    size_t hlen, pre;
    if (major == 1) {
        hlen = (size_t)magic[8] | ((size_t)magic[9] << 8);
        pre = 10;
    } else if (major == 2 || major == 3) {
        if (fread(magic + 10, 1, 2, f) != 2) {
            s = rlx_set_error(RLX_ERR_FORMAT, "'%s': truncated header", path);
            goto out;
        }
        hlen = (size_t)magic[8] | ((size_t)magic[9] << 8) | ((size_t)magic[10] << 16) | ((size_t)magic[11] << 24);
        pre = 12;
    } else {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s': .npy version %d is not supported", path, major);
        goto out;
    }
    if (hlen > 1 << 20 || pre + hlen > (size_t)st.st_size) {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s': bad header length %zu", path, hlen);
        goto out;
    }
    hdr = rlx_malloc(hlen + 1);
    if (!hdr) {
        s = RLX_ERR_OUT_OF_MEMORY;
        goto out;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s': truncated header", path);
        goto out;
    }
    hdr[hlen] = 0;
    const char *p = find_key(hdr, "descr");
    if (!p || (*p != '\'' && *p != '"')) {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s': no descr in header", path);
        goto out;
    }
    p++;
    char endian = *p;
    if (endian == '<' || endian == '|' || endian == '=')
        p++;
    else if (endian == '>') {
        s = rlx_set_error(RLX_ERR_UNSUPPORTED, "'%s': big-endian data is not supported", path);
        goto out;
    }
    bool found = false;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++) {
        size_t l = strlen(npy_types[i].descr);
        if (!strncmp(p, npy_types[i].descr, l) && (p[l] == '\'' || p[l] == '"')) {
            *t = npy_types[i].t;
            found = true;
        }
    }
    if (!found) {
        size_t dl = strcspn(p, "'\"");
        s = rlx_set_error(RLX_ERR_UNSUPPORTED, "'%s': dtype '%.*s' is not supported", path, (int)(dl < 16 ? dl : 16),
                          p);
        goto out;
    }
    p = find_key(hdr, "fortran_order");
    if (!p || strncmp(p, "False", 5) != 0) {
        s = rlx_set_error(RLX_ERR_UNSUPPORTED, "'%s': only C-order arrays are supported", path);
        goto out;
    }
    p = find_key(hdr, "shape");
    if (!p || *p != '(') {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s': no shape in header", path);
        goto out;
    }
    p++;
    int nd = 0;
    int64_t numel = 1;
    while (*p && *p != ')') {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        if (*p < '0' || *p > '9') {
            s = rlx_set_error(RLX_ERR_FORMAT, "'%s': bad shape", path);
            goto out;
        }
        int64_t v = 0;
        while (*p >= '0' && *p <= '9') {
            if (v > (INT64_C(1) << 40)) {
                s = rlx_set_error(RLX_ERR_FORMAT, "'%s': dimension too large", path);
                goto out;
            }
            v = v * 10 + (*p++ - '0');
        }
        if (nd >= RLX_MAX_DIMS) {
            s = rlx_set_error(RLX_ERR_UNSUPPORTED, "'%s': rank above %d", path, RLX_MAX_DIMS);
            goto out;
        }
        dims[nd++] = v;
        if (v && numel > (INT64_C(1) << 40) / v) {
            s = rlx_set_error(RLX_ERR_FORMAT, "'%s': array too large", path);
            goto out;
        }
        numel *= v;
    }
    *ndim = nd;
    size_t need = (size_t)numel * rlx_dtype_size(*t);
    if ((size_t)st.st_size - pre - hlen != need) {
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s': the shape needs %zu data bytes, the file has %zu", path, need,
                          (size_t)st.st_size - pre - hlen);
        goto out;
    }
    buf = rlx_malloc(need ? need : 1);
    if (!buf) {
        s = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "'%s': cannot allocate %zu bytes", path, need);
        goto out;
    }
    if (need && fread(buf, 1, need, f) != need) {
        s = rlx_set_error(RLX_ERR_IO, "'%s': short read", path);
        goto out;
    }
    *data = buf;
    *bytes = need;
    buf = NULL;
out:
    free(buf);
    free(hdr);
    fclose(f);
    return s;
}

rlx_status rlx_npy_write_file(rlx_file *w, rlx_dtype t, int ndim, const int64_t *dims, const void *data, size_t bytes)
{
    if (!w || (ndim > 0 && !dims) || (!data && bytes) || ndim < 0 || ndim > RLX_MAX_DIMS)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_npy_write: bad argument");
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof npy_types / sizeof npy_types[0]; i++)
        if (npy_types[i].t == t)
            descr = npy_types[i].descr;
    if (!descr)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "npy: dtype %s has no .npy type", rlx_dtype_name(t));
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= dims[i];
    if ((size_t)numel * rlx_dtype_size(t) != bytes)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "npy: %zu bytes for %lld elements", bytes, (long long)numel);
    char shape[256];
    size_t l = 0;
    shape[0] = 0;
    for (int i = 0; i < ndim; i++)
        l += (size_t)snprintf(shape + l, sizeof shape - l, "%lld,%s", (long long)dims[i], i + 1 < ndim ? " " : "");
    if (ndim > 1)
        shape[l - 1] = 0; /* numpy writes (2, 3) but (4,) */
    char hdr[512];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '%c%s', 'fortran_order': False, 'shape': (%s), }",
                      t == RLX_U8 || t == RLX_I8 || t == RLX_BOOL ? '|' : '<', descr, shape);
    int total = 10 + hl + 1;
    int padn = (64 - total % 64) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    int h2 = hl + padn + 1;
    pre[8] = (unsigned char)(h2 & 0xff);
    pre[9] = (unsigned char)(h2 >> 8);
    memset(hdr + hl, ' ', (size_t)padn);
    hdr[hl + padn] = '\n';
    rlx_status s = rlx_file_write(w, pre, 10);
    if (s == RLX_OK)
        s = rlx_file_write(w, hdr, (size_t)(hl + padn + 1));
    if (s == RLX_OK)
        s = rlx_file_write(w, data, bytes);
    return s;
}

/* A new file, written beside and moved into place (rlx_file_open). */
rlx_status rlx_npy_write(const char *path, rlx_dtype t, int ndim, const int64_t *dims, const void *data, size_t bytes)
{
    rlx_file *w = NULL;
    rlx_status s = rlx_file_open(path, 0, &w);
    if (s != RLX_OK)
        return s;
    if ((s = rlx_npy_write_file(w, t, ndim, dims, data, bytes)) != RLX_OK) {
        rlx_file_discard(w);
        return s;
    }
    return rlx_file_commit(w);
}
