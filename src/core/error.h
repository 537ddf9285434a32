/* error.h - the thread's last error, and small allocation helpers that
 * report out-of-memory as an error value instead of aborting. */
#ifndef RLX_CORE_ERROR_H
#define RLX_CORE_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "rlx.h"

/* Records status and message; returns status so callers can
 * `return rlx_set_error(RLX_ERR_SHAPE, "...")`. */
rlx_status rlx_set_error(rlx_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
rlx_status rlx_set_errorv(rlx_status s, const char *fmt, va_list ap);
void rlx_clear_error(void);
/* The status of the last rlx_set_error on this thread, or `fallback` when
 * none since rlx_clear_error: for a caller that got NULL from a function
 * that sets an error (a pass, an allocation) and must return its status. */
rlx_status rlx_last_status_or(rlx_status fallback);

/* Every heap allocation of the library goes through these (free with
 * free()); on failure they set RLX_ERR_OUT_OF_MEMORY and return NULL. */
void *rlx_malloc(size_t bytes);
void *rlx_calloc(size_t n, size_t size);
void *rlx_realloc(void *p, size_t bytes);
void *rlx_realloc_array(void *p, size_t n, size_t size);
char *rlx_strdup(const char *s);

/* Allocation-failure injection, for tests: rlx_alloc_fail_nth(n) makes the
 * nth allocation from now fail (1 = the next one; 0 = none) and resets the
 * count; rlx_alloc_count() is the number of allocations since then.  An
 * allocator outside the helpers above (the CPU arena) asks
 * rlx_alloc_injected_failure() first. */
void rlx_alloc_fail_nth(long n);
long rlx_alloc_count(void);
int rlx_alloc_injected_failure(void);
void rlx_alloc_failure_point(void); /* a debugger's breakpoint */
/* Monotonic milliseconds. */
double rlx_now_ms(void);

#endif
