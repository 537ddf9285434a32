/* blob.c - constant data that graphs share (ir.h, rlx_blob): a clone or
 * a pass's result holds the same bytes as its source instead of a copy,
 * and a CPU session reads its constants there (compile.c). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ir/ir.h"

/* The header sits in the block's first 64 bytes, the data after it. */
#define HEADER 64
#define HUGE_PAGE ((size_t)2 << 20)

struct rlx_blob {
    atomic_int refs;
    size_t bytes;
    size_t map_bytes; /* a mapping's length; 0 for a heap block */
};

static size_t up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* Blocks of a huge page or more are their own mapping, on a 2 MiB
 * boundary and asking for transparent huge pages as the arena does (a
 * weight streamed once per run is slower through 4 KiB pages); freed, they
 * go back to the system at once. */
static rlx_blob *map_blob(size_t total)
{
    size_t len = up(total, 4096), span = len + HUGE_PAGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *base = (char *)up((uintptr_t)p, HUGE_PAGE);
    if (base > p)
        munmap(p, (size_t)(base - p));
    if (base + len < p + span)
        munmap(base + len, (size_t)(p + span - (base + len)));
#ifdef MADV_HUGEPAGE
    (void)madvise(base, len, MADV_HUGEPAGE); /* a request: refused, the pages stay small */
#endif
    rlx_blob *b = (rlx_blob *)base;
    b->map_bytes = len;
    return b;
}

rlx_blob *rlx_blob_new(size_t bytes)
{
    /* padded with zeros to 64 bytes, as arena slots are */
    size_t total = HEADER + up(bytes ? bytes : 1, 64);
    rlx_blob *b = NULL;
    if (!rlx_alloc_injected_failure()) {
        if (total >= HUGE_PAGE) {
            b = map_blob(total); /* zeroed by the system */
        } else {
            void *p = NULL;
            if (posix_memalign(&p, 64, total) == 0 && p) {
                memset((char *)p + HEADER + bytes, 0, total - HEADER - bytes);
                b = p;
                b->map_bytes = 0;
            }
        }
    }
    if (!b) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes of constant data", bytes);
        return NULL;
    }
    atomic_init(&b->refs, 1);
    b->bytes = bytes;
    return b;
}

void *rlx_blob_data(const rlx_blob *b) { return b ? (char *)b + HEADER : NULL; }

size_t rlx_blob_bytes(const rlx_blob *b) { return b ? b->bytes : 0; }

rlx_blob *rlx_blob_ref(rlx_blob *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

void rlx_blob_unref(rlx_blob *b)
{
    if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (b->map_bytes)
        munmap(b, b->map_bytes);
    else
        free(b);
}
