/* formats_testutil.h - a growable byte buffer for writing checkpoint files
 * from C in the format tests, a temporary folder, and the error checks
 * (status + message substring) they share. */
#ifndef RLX_TESTS_FORMATS_TESTUTIL_H
#define RLX_TESTS_FORMATS_TESTUTIL_H

#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "rlx.h"

typedef struct bytes {
    unsigned char *p;
    size_t n, cap;
} bytes;

static inline void b_put(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void b_u8(bytes *b, uint8_t v) { b_put(b, &v, 1); }
static inline void b_le(bytes *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b_u8(b, (uint8_t)(v >> (8 * i)));
}
static inline void b_u16(bytes *b, uint16_t v) { b_le(b, v, 2); }
static inline void b_u32(bytes *b, uint32_t v) { b_le(b, v, 4); }
static inline void b_u64(bytes *b, uint64_t v) { b_le(b, v, 8); }
static inline void b_f32(bytes *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    b_u32(b, u);
}
static inline void b_f64(bytes *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    b_u64(b, u);
}
static inline void b_zero(bytes *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b_u8(b, 0);
}
static inline void b_align(bytes *b, size_t a) { b_zero(b, (a - b->n % a) % a); }
static inline void b_free(bytes *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}
static inline void b_patch_u64(bytes *b, size_t at, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b->p[at + i] = (unsigned char)(v >> (8 * i));
}

/* A fresh folder under $TMPDIR (or /tmp); path in dir (256 bytes). */
static inline void make_temp_dir(char *dir, const char *tag)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, 256, "%s/rlx_%s_XXXXXX", t && *t ? t : "/tmp", tag);
    assert_non_null(mkdtemp(dir));
}

static inline void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static inline void remove_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* Status want, and the last error contains sub. */
#define EXPECT_ERR(expr, want, sub)                                                                           \
    do {                                                                                                      \
        rlx_status st_ = (expr);                                                                              \
        const char *m_ = rlx_last_error();                                                                    \
        if (st_ != (want) || !strstr(m_, (sub)))                                                              \
            fprintf(stderr, "%s:%d: %s gave %s \"%s\", expected %s with \"%s\"\n", __FILE__, __LINE__, #expr, \
                    rlx_status_name(st_), m_, rlx_status_name(want), (sub));                                  \
        assert_int_equal(st_, (want));                                                                        \
        assert_non_null(strstr(m_, (sub)));                                                                   \
    } while (0)

#define EXPECT_OK(expr)                                                                                 \
    do {                                                                                                \
        rlx_status st_ = (expr);                                                                        \
        if (st_ != RLX_OK)                                                                              \
            fprintf(stderr, "%s:%d: %s gave %s: %s\n", __FILE__, __LINE__, #expr, rlx_status_name(st_), \
                    rlx_last_error());                                                                  \
        assert_int_equal(st_, RLX_OK);                                                                  \
    } while (0)

#endif
