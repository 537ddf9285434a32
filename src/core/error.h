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

/* calloc/realloc that set RLX_ERR_OUT_OF_MEMORY on failure. */
void *rlx_calloc(size_t n, size_t size);
void *rlx_realloc_array(void *p, size_t n, size_t size);
char *rlx_strdup(const char *s);
/* Monotonic milliseconds. */
double rlx_now_ms(void);

#endif
