/* model_key.c - the entries of the cache keys under which a model keeps its
 * compiled sessions (model.c) and staged windows (model_run.c); see
 * model_internal.h. */
#include <stdio.h>
#include <string.h>

#include "api/model_internal.h"

size_t model_key_entry_cap(const char *name, size_t value_bytes)
{
    return strlen(name) + 32 + 21 * RLX_MAX_DIMS + 4 + 2 * value_bytes;
}

size_t model_key_append(char *key, size_t len, size_t cap, const char *name, int tag, int ndim, const int64_t *dims,
                        const void *value, size_t value_bytes)
{
    static const char hex[] = "0123456789abcdef";
    len += (size_t)snprintf(key + len, cap - len, "%s:%d:", name, tag);
    /* ndim < 0: a dim binding, its value in dims[0] */
    int nd = ndim < 0 ? 1 : (ndim > RLX_MAX_DIMS ? RLX_MAX_DIMS : ndim);
    for (int d = 0; d < nd; d++)
        len += (size_t)snprintf(key + len, cap - len, "%lld,", (long long)dims[d]);
    if (value) {
        key[len++] = ':';
        key[len++] = 'v';
        for (size_t k = 0; k < value_bytes; k++) {
            unsigned char c = ((const unsigned char *)value)[k];
            key[len++] = hex[c >> 4];
            key[len++] = hex[c & 15];
        }
    }
    key[len++] = ';';
    key[len] = '\0';
    return len;
}
