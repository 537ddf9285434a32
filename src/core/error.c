#define _POSIX_C_SOURCE 200809L
#include "core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static _Thread_local char last_error[1024];
static _Thread_local rlx_status last_status;

rlx_status rlx_set_errorv(rlx_status s, const char *fmt, va_list ap)
{
    char msg[sizeof last_error]; /* the arguments may include rlx_last_error() itself */
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(last_error, msg, sizeof msg);
    last_status = s;
    return s;
}

rlx_status rlx_last_status_or(rlx_status fallback) { return last_status != RLX_OK ? last_status : fallback; }

rlx_status rlx_set_error(rlx_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    rlx_set_errorv(s, fmt, ap);
    va_end(ap);
    return s;
}

void rlx_clear_error(void)
{
    last_error[0] = '\0';
    last_status = RLX_OK;
}

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

static _Atomic long alloc_count, alloc_fail_at;

void rlx_alloc_fail_nth(long n)
{
    alloc_count = 0;
    alloc_fail_at = n > 0 ? n : 0;
}

long rlx_alloc_count(void) { return alloc_count; }

/* Where an injected failure happens: a breakpoint here shows the caller. */
__attribute__((noinline)) void rlx_alloc_failure_point(void) { __asm__ volatile(""); }

int rlx_alloc_injected_failure(void)
{
    long n = ++alloc_count;
    if (!alloc_fail_at || n != alloc_fail_at)
        return 0;
    rlx_alloc_failure_point();
    return 1;
}

void *rlx_malloc(size_t bytes)
{
    void *p = rlx_alloc_injected_failure() ? NULL : malloc(bytes ? bytes : 1);
    if (!p)
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    return p;
}

void *rlx_calloc(size_t n, size_t size)
{
    void *p = rlx_alloc_injected_failure() ? NULL : calloc(n ? n : 1, size ? size : 1);
    if (!p)
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *rlx_realloc(void *p, size_t bytes)
{
    void *q = rlx_alloc_injected_failure() ? NULL : realloc(p, bytes ? bytes : 1);
    if (!q)
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
    return q;
}

void *rlx_realloc_array(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", n, size);
        return NULL;
    }
    return rlx_realloc(p, n * size);
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
