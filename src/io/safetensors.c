/* safetensors.c - safetensors reader (see safetensors.h): header JSON
 * parsed with cJSON, every entry checked against the file before a view
 * points into the map. */
#define _POSIX_C_SOURCE 200809L
#include "io/safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"

#ifdef RLX_HAVE_CJSON
#include <cjson/cJSON.h>

/* Headers above this are refused (as the reference implementation does). */
#define ST_MAX_HEADER ((uint64_t)100 << 20)
/* JSON files (config, index) read whole up to this size. */
#define ST_MAX_JSON_FILE ((long long)256 << 20)

static const struct {
    const char *name;
    size_t size;
    rlx_dtype dtype;
} st_dtypes[] = {
    {"F32", 4, RLX_F32},
    {"F16", 2, RLX_F16},
    {"BF16", 2, RLX_BF16},
    {"F64", 8, RLX_F64},
    {"I64", 8, RLX_I64},
    {"I32", 4, RLX_I32},
    {"I8", 1, RLX_I8},
    {"U8", 1, RLX_U8},
    {"BOOL", 1, RLX_BOOL},
    {"I16", 2, RLX_WEIGHT_NO_DTYPE},
    {"U16", 2, RLX_WEIGHT_NO_DTYPE},
    {"U32", 4, RLX_WEIGHT_NO_DTYPE},
    {"U64", 8, RLX_WEIGHT_NO_DTYPE},
    {"F8_E4M3", 1, RLX_WEIGHT_NO_DTYPE},
    {"F8_E5M2", 1, RLX_WEIGHT_NO_DTYPE},
    {"F8_E8M0", 1, RLX_WEIGHT_NO_DTYPE},
};

typedef struct st_file {
    rlx_file_map map;
    char *path;
    uint64_t data_start; /* 8 + header length */
} st_file;

struct rlx_safetensors {
    st_file *files;
    int n_files;
    rlx_weight_view *t;
    uint64_t *begin; /* each tensor's data offset in its file's data */
    int *file_of;    /* each tensor's file */
    int64_t n, cap;
    int64_t *sorted; /* tensor indices by name */
    char *label;
};

static rlx_status fail(const char *label, rlx_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static rlx_status fail(const char *label, rlx_status s, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rlx_set_error(s, "safetensors '%s': %s", label, msg);
}

/* A JSON number that is a whole number in [0, 2^53]. */
static bool json_uint(const cJSON *j, uint64_t *v)
{
    if (!cJSON_IsNumber(j))
        return false;
    double d = j->valuedouble;
    if (!isfinite(d) || d < 0 || d > 9007199254740992.0 || d != floor(d))
        return false;
    *v = (uint64_t)d;
    return true;
}

static rlx_status add_tensor(rlx_safetensors *st, rlx_weight_view **out)
{
    if (st->n == st->cap) {
        int64_t cap = st->cap ? st->cap * 2 : 64;
        rlx_weight_view *t = rlx_realloc_array(st->t, (size_t)cap, sizeof *t);
        if (!t)
            return RLX_ERR_OUT_OF_MEMORY;
        st->t = t;
        uint64_t *b = rlx_realloc_array(st->begin, (size_t)cap, sizeof *b);
        if (!b)
            return RLX_ERR_OUT_OF_MEMORY;
        st->begin = b;
        int *f = rlx_realloc_array(st->file_of, (size_t)cap, sizeof *f);
        if (!f)
            return RLX_ERR_OUT_OF_MEMORY;
        st->file_of = f;
        st->cap = cap;
    }
    *out = &st->t[st->n];
    memset(*out, 0, sizeof **out);
    return RLX_OK;
}

static _Thread_local const rlx_safetensors *sort_ctx;

static int cmp_begin(const void *a, const void *b)
{
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    uint64_t x = sort_ctx->begin[i], y = sort_ctx->begin[j];
    if (x != y)
        return (x > y) - (x < y);
    return (sort_ctx->t[i].nbytes > sort_ctx->t[j].nbytes) - (sort_ctx->t[i].nbytes < sort_ctx->t[j].nbytes);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(sort_ctx->t[*(const int64_t *)a].name, sort_ctx->t[*(const int64_t *)b].name);
}

/* One tensor entry of file fi's header. */
static rlx_status parse_entry(rlx_safetensors *st, int fi, const char *label, const cJSON *e, uint64_t data_size)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': entry is not a JSON object", name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd) || !jd->valuestring)
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': no \"dtype\" string", name);
    if (!cJSON_IsArray(js))
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': no \"shape\" array", name);
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': \"data_offsets\" is not an array of two numbers", name);
    int k = -1;
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(st_dtypes[i].name, jd->valuestring))
            k = (int)i;
    if (k < 0)
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': unknown dtype \"%.32s\"", name, jd->valuestring);
    rlx_weight_view *t;
    rlx_status s = add_tensor(st, &t);
    if (s != RLX_OK)
        return s;
    t->ggml_type = -1;
    t->type_name = st_dtypes[k].name;
    t->dtype = st_dtypes[k].dtype;
    int nd = cJSON_GetArraySize(js);
    if (nd > RLX_MAX_DIMS)
        return fail(label, RLX_ERR_UNSUPPORTED, "tensor '%s': %d dimensions (at most %d)", name, nd, RLX_MAX_DIMS);
    t->ndim = nd;
    uint64_t numel = 1;
    int d = 0;
    for (const cJSON *x = js->child; x; x = x->next, d++) {
        uint64_t v;
        if (!json_uint(x, &v))
            return fail(label, RLX_ERR_FORMAT, "tensor '%s': shape[%d] is not a non-negative integer", name, d);
        if (v && numel > (uint64_t)INT64_MAX / v)
            return fail(label, RLX_ERR_FORMAT, "tensor '%s': element count overflows", name);
        numel *= v;
        t->dims[d] = (int64_t)v;
    }
    uint64_t b, en;
    if (!json_uint(jo->child, &b) || !json_uint(jo->child->next, &en))
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': data_offsets are not non-negative integers", name);
    if (b > en)
        return fail(label, RLX_ERR_FORMAT, "tensor '%s': data_offsets [%llu, %llu] begin after they end", name,
                    (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return fail(label, RLX_ERR_FORMAT,
                    "tensor '%s': data_offsets [%llu, %llu] run past the end of the data (%llu bytes)", name,
                    (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_size);
    size_t es = st_dtypes[k].size;
    if (numel > UINT64_MAX / es || numel * es != en - b)
        return fail(label, RLX_ERR_FORMAT,
                    "tensor '%s': data_offsets [%llu, %llu] hold %llu bytes, its %s shape needs %llu x %zu", name,
                    (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b), st_dtypes[k].name,
                    (unsigned long long)numel, es);
    t->name = rlx_strdup(name);
    if (!t->name)
        return RLX_ERR_OUT_OF_MEMORY;
    t->numel = (int64_t)numel;
    t->nbytes = (size_t)(en - b);
    t->data = st->files[fi].map.data + st->files[fi].data_start + b;
    st->begin[st->n] = b;
    st->file_of[st->n] = fi;
    st->n++;
    return RLX_OK;
}

/* Parses file fi (mapped) and appends its tensors. */
static rlx_status parse_file(rlx_safetensors *st, int fi)
{
    st_file *f = &st->files[fi];
    const char *label = f->path;
    if (f->map.size < 8)
        return fail(label, RLX_ERR_FORMAT, "truncated: %zu bytes, less than the 8-byte header length", f->map.size);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | f->map.data[i];
    if (hl > f->map.size - 8)
        return fail(label, RLX_ERR_FORMAT, "header length %llu runs past the end of the file (%zu bytes)",
                    (unsigned long long)hl, f->map.size);
    if (hl > ST_MAX_HEADER)
        return fail(label, RLX_ERR_FORMAT, "header length %llu is above the %llu-byte limit", (unsigned long long)hl,
                    (unsigned long long)ST_MAX_HEADER);
    const char *h = (const char *)f->map.data + 8;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(h, (size_t)hl, &end, 0);
    if (!root) {
        size_t at = end && end >= h && end <= h + hl ? (size_t)(end - h) : 0;
        return fail(label, RLX_ERR_FORMAT, "header is not valid JSON (at byte %zu of %llu)", at,
                    (unsigned long long)hl);
    }
    rlx_status s = RLX_OK;
    for (const char *p = end; p < h + hl; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            s = fail(label, RLX_ERR_FORMAT, "header has bytes after its JSON object (at byte %zu)", (size_t)(p - h));
            break;
        }
    if (s == RLX_OK && !cJSON_IsObject(root))
        s = fail(label, RLX_ERR_FORMAT, "header is not a JSON object");
    f->data_start = 8 + hl;
    uint64_t data_size = f->map.size - f->data_start;
    int64_t first = st->n;
    for (const cJSON *e = root->child; s == RLX_OK && e; e = e->next) {
        if (!e->string) {
            s = fail(label, RLX_ERR_FORMAT, "header entry without a name");
        } else if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e))
                s = fail(label, RLX_ERR_FORMAT, "__metadata__ is not a JSON object");
        } else {
            s = parse_entry(st, fi, label, e, data_size);
        }
    }
    cJSON_Delete(root);
    if (s != RLX_OK)
        return s;
    /* this file's tensors in data order; no two share bytes */
    int64_t n = st->n - first;
    if (n == 0)
        return RLX_OK;
    int64_t *ord = rlx_calloc((size_t)n, sizeof *ord);
    if (!ord)
        return RLX_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < n; i++)
        ord[i] = first + i;
    sort_ctx = st;
    qsort(ord, (size_t)n, sizeof *ord, cmp_begin);
    sort_ctx = NULL;
    for (int64_t i = 1; i < n && s == RLX_OK; i++)
        if (st->begin[ord[i - 1]] + st->t[ord[i - 1]].nbytes > st->begin[ord[i]])
            s = fail(label, RLX_ERR_FORMAT, "tensors '%s' and '%s' overlap in the data", st->t[ord[i - 1]].name,
                     st->t[ord[i]].name);
    if (s == RLX_OK) {
        rlx_weight_view *tmp = rlx_calloc((size_t)n, sizeof *tmp);
        uint64_t *btmp = rlx_calloc((size_t)n, sizeof *btmp);
        if (!tmp || !btmp) {
            s = RLX_ERR_OUT_OF_MEMORY;
        } else {
            for (int64_t i = 0; i < n; i++) {
                tmp[i] = st->t[ord[i]];
                btmp[i] = st->begin[ord[i]];
            }
            memcpy(st->t + first, tmp, (size_t)n * sizeof *tmp);
            memcpy(st->begin + first, btmp, (size_t)n * sizeof *btmp);
        }
        free(tmp);
        free(btmp);
    }
    free(ord);
    return s;
}

static rlx_status add_file(rlx_safetensors *st, const char *path, const void *buf, size_t size)
{
    st_file *files = rlx_realloc_array(st->files, (size_t)st->n_files + 1, sizeof *files);
    if (!files)
        return RLX_ERR_OUT_OF_MEMORY;
    st->files = files;
    st_file *f = &files[st->n_files];
    memset(f, 0, sizeof *f);
    f->path = rlx_strdup(path);
    if (!f->path)
        return RLX_ERR_OUT_OF_MEMORY;
    st->n_files++;
    if (buf) {
        f->map.data = buf;
        f->map.size = size;
        return RLX_OK;
    }
    return rlx_file_map_open(path, "safetensors", &f->map);
}

/* Sorts the name index; duplicate names are an error. */
static rlx_status index_names(rlx_safetensors *st)
{
    st->sorted = rlx_calloc((size_t)st->n, sizeof *st->sorted);
    if (!st->sorted)
        return RLX_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < st->n; i++)
        st->sorted[i] = i;
    sort_ctx = st;
    qsort(st->sorted, (size_t)st->n, sizeof *st->sorted, cmp_name);
    sort_ctx = NULL;
    for (int64_t i = 1; i < st->n; i++) {
        int64_t a = st->sorted[i - 1], b = st->sorted[i];
        if (!strcmp(st->t[a].name, st->t[b].name))
            return fail(st->label, RLX_ERR_FORMAT, "tensor '%s' appears twice (in '%s' and '%s')", st->t[a].name,
                        st->files[st->file_of[a]].path, st->files[st->file_of[b]].path);
    }
    return RLX_OK;
}

static int64_t find_index(const rlx_safetensors *st, const char *name)
{
    int64_t lo = 0, hi = st->n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int r = strcmp(st->t[st->sorted[mid]].name, name);
        if (!r)
            return st->sorted[mid];
        if (r < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

void rlx_safetensors_close(rlx_safetensors *st)
{
    if (!st)
        return;
    for (int64_t i = 0; i < st->n; i++)
        free((char *)st->t[i].name);
    for (int i = 0; i < st->n_files; i++) {
        rlx_file_map_release(&st->files[i].map);
        free(st->files[i].path);
    }
    free(st->files);
    free(st->t);
    free(st->begin);
    free(st->file_of);
    free(st->sorted);
    free(st->label);
    free(st);
}

static rlx_safetensors *new_reader(const char *label)
{
    rlx_safetensors *st = rlx_calloc(1, sizeof *st);
    if (st && !(st->label = rlx_strdup(label))) {
        free(st);
        st = NULL;
    }
    return st;
}

static rlx_status finish(rlx_safetensors *st, rlx_status s, rlx_safetensors **out)
{
    if (s == RLX_OK)
        s = index_names(st);
    if (s != RLX_OK) {
        rlx_safetensors_close(st);
        return s;
    }
    *out = st;
    return RLX_OK;
}

rlx_status rlx_safetensors_open_buffer(const void *data, size_t size, rlx_safetensors **out)
{
    if ((!data && size) || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_safetensors_open_buffer: NULL argument");
    *out = NULL;
    rlx_safetensors *st = new_reader("<buffer>");
    if (!st)
        return RLX_ERR_OUT_OF_MEMORY;
    static const unsigned char empty[1];
    rlx_status s = add_file(st, "<buffer>", data ? data : empty, size);
    if (s == RLX_OK)
        s = parse_file(st, 0);
    return finish(st, s, out);
}

rlx_status rlx_json_read_file(const char *path, cJSON **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_json_read_file: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rlx_set_error(RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return rlx_set_error(RLX_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((long long)sb.st_size > ST_MAX_JSON_FILE) {
        fclose(f);
        return rlx_set_error(RLX_ERR_FORMAT, "'%s': %lld bytes is too large for a JSON file", path,
                             (long long)sb.st_size);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "'%s': out of memory", path);
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return rlx_set_error(RLX_ERR_IO, "'%s': read %zu of %zu bytes", path, got, n);
    }
    buf[n] = '\0';
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(buf, n, &end, 0);
    rlx_status s = RLX_OK;
    if (!j) {
        size_t at = end && end >= buf && end <= buf + n ? (size_t)(end - buf) : 0;
        int line = 1;
        for (size_t i = 0; i < at; i++)
            line += buf[i] == '\n';
        s = rlx_set_error(RLX_ERR_FORMAT, "'%s' is not valid JSON (line %d, byte %zu)", path, line, at);
    }
    free(buf);
    *out = j;
    return s;
}

/* dir + "/" + name into buf; false when it does not fit. */
static bool join(char *buf, size_t cap, const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    if (a + 1 + b + 1 > cap)
        return false;
    memcpy(buf, dir, a);
    buf[a] = '/';
    memcpy(buf + a + 1, name, b + 1);
    return true;
}

/* The folder of a file path ("." when it has none). */
static void dir_of(const char *path, char *buf, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, cap, ".");
    else if (slash == path)
        snprintf(buf, cap, "/");
    else
        snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

static rlx_status open_sharded(rlx_safetensors *st, const char *index_path)
{
    char dir[4096], file[4096];
    dir_of(index_path, dir, sizeof dir);
    cJSON *idx = NULL;
    rlx_status s = rlx_json_read_file(index_path, &idx);
    if (s != RLX_OK)
        return s;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(idx);
        return fail(index_path, RLX_ERR_FORMAT, "no \"weight_map\" object");
    }
    /* each shard once, in the order the map first names it */
    for (const cJSON *e = wm->child; s == RLX_OK && e; e = e->next) {
        if (!cJSON_IsString(e) || !e->valuestring || !e->valuestring[0]) {
            s = fail(index_path, RLX_ERR_FORMAT, "weight_map entry '%s' is not a file name",
                     e->string ? e->string : "");
            break;
        }
        const char *fn = e->valuestring;
        if (strchr(fn, '/') || !strcmp(fn, ".") || !strcmp(fn, "..")) {
            s = fail(index_path, RLX_ERR_FORMAT,
                     "weight_map entry '%s': file name '%s' is not a plain name in the folder", e->string, fn);
            break;
        }
        if (!join(file, sizeof file, dir, fn)) {
            s = fail(index_path, RLX_ERR_FORMAT, "path of shard '%s' is too long", fn);
            break;
        }
        bool seen = false;
        for (int i = 0; i < st->n_files && !seen; i++)
            seen = !strcmp(st->files[i].path, file);
        if (seen)
            continue;
        s = add_file(st, file, NULL, 0);
        if (s == RLX_OK)
            s = parse_file(st, st->n_files - 1);
    }
    if (s == RLX_OK)
        s = index_names(st);
    /* every name the map gives is in the shard it names */
    for (const cJSON *e = wm->child; s == RLX_OK && e; e = e->next) {
        int64_t i = find_index(st, e->string);
        join(file, sizeof file, dir, e->valuestring);
        if (i < 0 || strcmp(st->files[st->file_of[i]].path, file))
            s = fail(index_path, RLX_ERR_FORMAT, "weight_map puts tensor '%s' in '%s', which does not hold it",
                     e->string, e->valuestring);
    }
    cJSON_Delete(idx);
    return s;
}

static bool is_regular(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

rlx_status rlx_safetensors_open(const char *path, rlx_safetensors **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_safetensors_open: NULL argument");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return rlx_set_error(RLX_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    char file[4096];
    const char *target = path;
    if (S_ISDIR(sb.st_mode)) {
        if (!join(file, sizeof file, path, "model.safetensors.index.json"))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "path '%s' is too long", path);
        if (!is_regular(file)) {
            join(file, sizeof file, path, "model.safetensors");
            if (!is_regular(file))
                return rlx_set_error(RLX_ERR_NOT_FOUND,
                                     "folder '%s' has neither model.safetensors.index.json nor model.safetensors",
                                     path);
        }
        target = file;
    }
    rlx_safetensors *st = new_reader(target);
    if (!st)
        return RLX_ERR_OUT_OF_MEMORY;
    rlx_status s;
    if (ends_with(target, ".json")) {
        s = open_sharded(st, target);
        if (s != RLX_OK) {
            rlx_safetensors_close(st);
            return s;
        }
        *out = st;
        return RLX_OK;
    }
    s = add_file(st, target, NULL, 0);
    if (s == RLX_OK)
        s = parse_file(st, 0);
    return finish(st, s, out);
}

rlx_status rlx_safetensors_read_config(const char *path, cJSON **out)
{
    if (!path || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_safetensors_read_config: NULL argument");
    *out = NULL;
    struct stat sb;
    char dir[4096], file[4096];
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        snprintf(dir, sizeof dir, "%s", path);
    else
        dir_of(path, dir, sizeof dir);
    if (!join(file, sizeof file, dir, "config.json"))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "path '%s' is too long", path);
    return rlx_json_read_file(file, out);
}

#else /* no cJSON: every entry point says so */

struct rlx_safetensors {
    int unused;
};

static rlx_status no_cjson(void)
{
    return rlx_set_error(RLX_ERR_UNSUPPORTED,
                         "safetensors support needs cJSON (Debian: libcjson-dev); rebuild with it");
}

rlx_status rlx_safetensors_open(const char *path, rlx_safetensors **out)
{
    (void)path;
    if (out)
        *out = NULL;
    return no_cjson();
}

rlx_status rlx_safetensors_open_buffer(const void *data, size_t size, rlx_safetensors **out)
{
    (void)data;
    (void)size;
    if (out)
        *out = NULL;
    return no_cjson();
}

void rlx_safetensors_close(rlx_safetensors *st) { (void)st; }

rlx_status rlx_json_read_file(const char *path, struct cJSON **out)
{
    (void)path;
    if (out)
        *out = NULL;
    return no_cjson();
}

rlx_status rlx_safetensors_read_config(const char *path, struct cJSON **out) { return rlx_json_read_file(path, out); }

static rlx_status find_index_stub(void) { return no_cjson(); }
#define RLX_ST_STUB 1
#endif

int64_t rlx_safetensors_count(const rlx_safetensors *st)
{
#ifdef RLX_ST_STUB
    (void)st;
    return 0;
#else
    return st ? st->n : 0;
#endif
}

const rlx_weight_view *rlx_safetensors_get(const rlx_safetensors *st, int64_t i)
{
#ifdef RLX_ST_STUB
    (void)st;
    (void)i;
    return NULL;
#else
    return st && i >= 0 && i < st->n ? &st->t[i] : NULL;
#endif
}

int rlx_safetensors_file_count(const rlx_safetensors *st)
{
#ifdef RLX_ST_STUB
    (void)st;
    return 0;
#else
    return st ? st->n_files : 0;
#endif
}

rlx_status rlx_safetensors_find(const rlx_safetensors *st, const char *name, const rlx_weight_view **out)
{
    if (!st || !name || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_safetensors_find: NULL argument");
    *out = NULL;
#ifdef RLX_ST_STUB
    return find_index_stub();
#else
    int64_t i = find_index(st, name);
    if (i < 0)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "safetensors '%s': no tensor named '%s'", st->label, name);
    *out = &st->t[i];
    return RLX_OK;
#endif
}
