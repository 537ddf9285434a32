#define _POSIX_C_SOURCE 200809L
#include "core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char last_error[1024];

rlx_status rlx_set_errorv(rlx_status s, const char *fmt, va_list ap)
{
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    return s;
}

rlx_status rlx_set_error(rlx_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rlx_set_errorv(s, fmt, ap);
    va_end(ap);
    return s;
}

void rlx_clear_error(void) { last_error[0] = '\0'; }

const char *rlx_last_error(void) { return last_error; }

const char *rlx_status_name(rlx_status s)
{
    switch (s) {
    case RLX_OK: return "ok";
    case RLX_ERR_INVALID_ARGUMENT: return "invalid argument";
    case RLX_ERR_SHAPE: return "shape error";
    case RLX_ERR_DTYPE: return "dtype error";
    case RLX_ERR_NOT_FOUND: return "not found";
    case RLX_ERR_UNSUPPORTED: return "unsupported";
    case RLX_ERR_IO: return "I/O error";
    case RLX_ERR_FORMAT: return "format error";
    case RLX_ERR_OUT_OF_MEMORY: return "out of memory";
    case RLX_ERR_DEVICE: return "device error";
    case RLX_ERR_RUNTIME: return "runtime error";
    case RLX_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *rlx_version(void) { return "0.1.0"; }

void *rlx_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *rlx_realloc_array(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    size_t total = n * size;
    void *q = realloc(p, total ? total : 1);
    if (!q)
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", n * size);
    return q;
}

char *rlx_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = rlx_calloc(n, 1);
    if (d)
        memcpy(d, s, n);
    return d;
}

double rlx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void rlx_free(void *p) { free(p); }
