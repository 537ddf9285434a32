/* The C API's bad-input matrix for files, writers and limits: each row a
 * call that must fail with the documented status and exactly the message
 * given, leaving no file behind.  (The same rows through the `rlx` program
 * are in tests/cli/check_cli.sh.) */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "rlx.h"

static char dir[512];

#define EXPECT_ERROR(expr, want, ...)                                                                    \
    do {                                                                                                 \
        char want_[2048];                                                                                \
        snprintf(want_, sizeof want_, __VA_ARGS__);                                                      \
        rlx_status st_ = (expr);                                                                         \
        if (st_ != (want) || strcmp(rlx_last_error(), want_) != 0)                                       \
            fail_msg("%s:\n  gave %s: %s\n  want %s: %s", #expr, rlx_status_name(st_), rlx_last_error(), \
                     rlx_status_name(want), want_);                                                      \
    } while (0)

static const char *path_of(const char *name)
{
    static char p[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *name, const void *data, size_t n)
{
    FILE *f = fopen(path_of(name), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A version-1 .npy with the given header dict and data bytes. */
static void put_npy(const char *name, const char *dict, size_t data_bytes, const char *magic, int hlen_override)
{
    char buf[4096];
    int hl = (int)strlen(dict);
    int pad = (64 - (10 + hl + 1) % 64) % 64;
    int h2 = hlen_override ? hlen_override : hl + pad + 1;
    memcpy(buf, magic ? magic : "\x93NUMPY", 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(h2 & 0xff);
    buf[9] = (char)(h2 >> 8);
    memcpy(buf + 10, dict, (size_t)hl);
    memset(buf + 10 + hl, ' ', (size_t)pad);
    buf[10 + hl + pad] = '\n';
    size_t n = (size_t)(10 + hl + pad + 1);
    memset(buf + n, 0, data_bytes);
    put(name, buf, n + data_bytes);
}

static rlx_status read_npy(const char *name)
{
    rlx_dtype t;
    int nd;
    int64_t d[RLX_MAX_DIMS];
    void *data = (void *)1;
    size_t bytes;
    rlx_status st = rlx_npy_read(path_of(name), &t, &nd, d, &data, &bytes);
    if (st == RLX_OK)
        free(data);
    else
        assert_null(data);
    return st;
}

static void test_npy_read_matrix(void **state)
{
    (void)state;
    EXPECT_ERROR(read_npy("none.npy"), RLX_ERR_IO, "cannot open '%s': No such file or directory", path_of("none.npy"));
    mkdir(path_of("sub"), 0755);
    EXPECT_ERROR(read_npy("sub"), RLX_ERR_IO, "'%s' is a directory", path_of("sub"));
    put("empty.npy", "", 0);
    EXPECT_ERROR(read_npy("empty.npy"), RLX_ERR_FORMAT, "'%s' is empty", path_of("empty.npy"));
    if (geteuid() != 0) { /* root reads any file */
        put("locked.npy", "x", 1);
        chmod(path_of("locked.npy"), 0);
        EXPECT_ERROR(read_npy("locked.npy"), RLX_ERR_IO, "cannot open '%s': Permission denied", path_of("locked.npy"));
    }
    put("short.npy", "\x93NUM", 4);
    EXPECT_ERROR(read_npy("short.npy"), RLX_ERR_FORMAT, "'%s' is not a .npy file", path_of("short.npy"));
    const char *ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }";
    put_npy("good.npy", ok, 32, NULL, 0);
    assert_int_equal(read_npy("good.npy"), RLX_OK);
    put_npy("magic.npy", ok, 32, "\x93NUMPX", 0);
    EXPECT_ERROR(read_npy("magic.npy"), RLX_ERR_FORMAT, "'%s' is not a .npy file", path_of("magic.npy"));
    put_npy("hlen.npy", ok, 32, NULL, 65535);
    EXPECT_ERROR(read_npy("hlen.npy"), RLX_ERR_FORMAT, "'%s': bad header length 65535", path_of("hlen.npy"));
    put_npy("trunc.npy", ok, 12, NULL, 0);
    EXPECT_ERROR(read_npy("trunc.npy"), RLX_ERR_FORMAT, "'%s': the shape needs 32 data bytes, the file has 12",
                 path_of("trunc.npy"));
    put_npy("long.npy", ok, 40, NULL, 0);
    EXPECT_ERROR(read_npy("long.npy"), RLX_ERR_FORMAT, "'%s': the shape needs 32 data bytes, the file has 40",
                 path_of("long.npy"));
    put_npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 4), }", 32, NULL, 0);
    EXPECT_ERROR(read_npy("fortran.npy"), RLX_ERR_UNSUPPORTED, "'%s': only C-order arrays are supported",
                 path_of("fortran.npy"));
    put_npy("object.npy", "{'descr': '|O', 'fortran_order': False, 'shape': (2, 4), }", 64, NULL, 0);
    EXPECT_ERROR(read_npy("object.npy"), RLX_ERR_UNSUPPORTED, "'%s': dtype 'O' is not supported",
                 path_of("object.npy"));
    put_npy("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 4), }", 32, NULL, 0);
    EXPECT_ERROR(read_npy("be.npy"), RLX_ERR_UNSUPPORTED, "'%s': big-endian data is not supported", path_of("be.npy"));
    put_npy("huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000000, 4000000000000), }", 0, NULL,
            0);
    EXPECT_ERROR(read_npy("huge.npy"), RLX_ERR_FORMAT, "'%s': array too large", path_of("huge.npy"));
    put_npy("noshape.npy", "{'descr': '<f4', 'fortran_order': False, }", 0, NULL, 0);
    EXPECT_ERROR(read_npy("noshape.npy"), RLX_ERR_FORMAT, "'%s': no shape in header", path_of("noshape.npy"));
}

static void test_onnx_read_matrix(void **state)
{
    (void)state;
#ifndef RLX_HAVE_ONNX
    skip(); /* no ONNX module in this build */
#else
    rlx_graph *g = NULL;
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    rlx_status st = rlx_onnx_import(path_of("none.onnx"), &o, &g);
    if (st == RLX_ERR_UNSUPPORTED) {
        skip(); /* no ONNX module in this build */
        return;
    }
    EXPECT_ERROR(st, RLX_ERR_IO, "cannot open '%s': No such file or directory", path_of("none.onnx"));
    mkdir(path_of("dir.onnx"), 0755);
    EXPECT_ERROR(rlx_onnx_import(path_of("dir.onnx"), &o, &g), RLX_ERR_IO, "'%s' is a directory", path_of("dir.onnx"));
    put("empty.onnx", "", 0);
    EXPECT_ERROR(rlx_onnx_import(path_of("empty.onnx"), &o, &g), RLX_ERR_FORMAT, "'%s' is empty",
                 path_of("empty.onnx"));
    put("junk.onnx", "\xff\xff\xff\xff\xff\xff\xff", 7);
    EXPECT_ERROR(rlx_onnx_import(path_of("junk.onnx"), &o, &g), RLX_ERR_FORMAT,
                 "'%s' is not a valid ONNX model (protobuf decoding failed)", path_of("junk.onnx"));
    assert_null(g);
#endif
}

/* A directory holds exactly the names given (NULL-terminated), nothing else
 * (no temporary file of the writer). */
static void assert_dir_holds(const char *sub, const char *const *names)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s/%s' | sort | tr '\\n' ' '", dir, sub);
    FILE *p = popen(cmd, "r");
    char got[1024] = "";
    assert_non_null(p);
    if (!fgets(got, sizeof got, p))
        got[0] = '\0';
    pclose(p);
    char want[1024] = "";
    for (int i = 0; names[i]; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s ", names[i]);
    assert_string_equal(got, want);
}

static void test_writer_matrix(void **state)
{
    (void)state;
    mkdir(path_of("w"), 0755);
    char a[600];
    snprintf(a, sizeof a, "%s", path_of("w/a.bin"));
    EXPECT_ERROR(rlx_write_file(a, 0, "one", 3), RLX_OK, "%s", rlx_last_error());
    EXPECT_ERROR(rlx_write_file(a, 0, "two", 3), RLX_ERR_IO, "'%s' exists; not replaced (pass --force to overwrite)",
                 a);
    FILE *f = fopen(a, "rb");
    char buf[8] = "";
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof buf, f), 3);
    fclose(f);
    assert_memory_equal(buf, "one", 3);
    EXPECT_ERROR(rlx_write_file(a, RLX_FILE_FORCE, "three", 5), RLX_OK, "%s", rlx_last_error());
    EXPECT_ERROR(rlx_write_file(path_of("w"), RLX_FILE_FORCE, "x", 1), RLX_ERR_IO,
                 "cannot write '%s': it is a directory", path_of("w"));
    EXPECT_ERROR(rlx_write_file(path_of("nowhere/a.bin"), 0, "x", 1), RLX_ERR_IO,
                 "cannot write '%s': folder '%s' does not exist", path_of("nowhere/a.bin"), path_of("nowhere"));
    EXPECT_ERROR(rlx_write_file(path_of("w/a.bin/b"), 0, "x", 1), RLX_ERR_IO, "cannot write '%s': Not a directory",
                 path_of("w/a.bin/b"));
    EXPECT_ERROR(rlx_write_file("", 0, "x", 1), RLX_ERR_INVALID_ARGUMENT, "no file name given");
    /* a full disk: the error names the path; forced, since /dev/full exists */
    EXPECT_ERROR(rlx_write_file("/dev/full", 0, "x", 1), RLX_ERR_IO,
                 "'/dev/full' exists; not replaced (pass --force to overwrite)");
    static char big[1 << 16];
    EXPECT_ERROR(rlx_write_file("/dev/full", RLX_FILE_FORCE, big, sizeof big), RLX_ERR_IO,
                 "cannot write '/dev/full': No space left on device");
    /* a discarded or failed file leaves nothing, not even its temporary */
    rlx_file *w = NULL;
    assert_int_equal(rlx_file_open(path_of("w/b.bin"), 0, &w), RLX_OK);
    assert_int_equal(rlx_file_write(w, "partial", 7), RLX_OK);
    rlx_file_discard(w);
    /* what a signal handler calls: the temporary of a pending file goes */
    assert_int_equal(rlx_file_open(path_of("w/d.bin"), 0, &w), RLX_OK);
    assert_int_equal(rlx_file_write(w, "interrupted", 11), RLX_OK);
    rlx_file_remove_pending();
    assert_dir_holds("w", (const char *const[]){"a.bin", NULL});
    rlx_file_discard(w);
    /* one created meanwhile is not replaced at commit */
    assert_int_equal(rlx_file_open(path_of("w/c.bin"), 0, &w), RLX_OK);
    assert_int_equal(rlx_file_write(w, "late", 4), RLX_OK);
    put("w/c.bin", "first", 5);
    EXPECT_ERROR(rlx_file_commit(w), RLX_ERR_IO, "'%s' exists; not replaced (pass --force to overwrite)",
                 path_of("w/c.bin"));
    assert_dir_holds("w", (const char *const[]){"a.bin", "c.bin", NULL});
    /* the .npy writer goes through the same rules */
    float v[2] = {1, 2};
    int64_t d[1] = {2};
    EXPECT_ERROR(rlx_npy_write(a, RLX_F32, 1, d, v, sizeof v), RLX_ERR_IO,
                 "'%s' exists; not replaced (pass --force to overwrite)", a);
    EXPECT_ERROR(rlx_npy_write(path_of("w/v.npy"), RLX_F32, 1, d, v, 4), RLX_ERR_INVALID_ARGUMENT,
                 "npy: 4 bytes for 2 elements");
    assert_int_equal(rlx_file_open(path_of("w/v.npy"), 0, &w), RLX_OK);
    assert_int_equal(rlx_npy_write_file(w, RLX_F32, 1, d, v, sizeof v), RLX_OK);
    assert_int_equal(rlx_file_commit(w), RLX_OK);
    assert_dir_holds("w", (const char *const[]){"a.bin", "c.bin", "v.npy", NULL});
}

static rlx_graph *small_graph(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){64, 64});
    rlx_output(g, "y", rlx_relu(g, x));
    return g;
}

static void test_limits(void **state)
{
    (void)state;
    rlx_graph *g = small_graph();
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *s = NULL;
    o.threads = -1;
    EXPECT_ERROR(rlx_compile(g, &o, &s), RLX_ERR_INVALID_ARGUMENT,
                 "rlx_compile: threads -1 is out of range (0 = all cores, at most 1024)");
    o.threads = 5000;
    EXPECT_ERROR(rlx_compile(g, &o, &s), RLX_ERR_INVALID_ARGUMENT,
                 "rlx_compile: threads 5000 is out of range (0 = all cores, at most 1024)");
    assert_null(s);
    o.threads = 1;
    o.max_arena_bytes = 1000;
    EXPECT_ERROR(rlx_compile(g, &o, &s), RLX_ERR_OUT_OF_MEMORY,
                 "the arena needs 32768 bytes (32.0 KiB), over the limit of 1000 bytes (1.0 KiB) set by "
                 "max_arena_bytes / RLX_MAX_ARENA / --max-memory");
    assert_null(s);
    o.max_arena_bytes = 32768;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_session_free(s);
    s = NULL;
    /* the environment's limit, unless the options are final */
    setenv("RLX_MAX_ARENA", "16K", 1);
    o.max_arena_bytes = 0;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    rlx_session_free(s);
    s = NULL;
    o.ignore_env = 0;
    EXPECT_ERROR(rlx_compile(g, &o, &s), RLX_ERR_OUT_OF_MEMORY,
                 "the arena needs 32768 bytes (32.0 KiB), over the limit of 16384 bytes (16.0 KiB) set by "
                 "max_arena_bytes / RLX_MAX_ARENA / --max-memory");
    unsetenv("RLX_MAX_ARENA");
    /* an arena beyond the machine's memory is refused before it is touched */
    rlx_graph *big = rlx_graph_new();
    rlx_node x = rlx_input(big, "x", RLX_F32, 2, (int64_t[]){1 << 19, 1 << 20});
    rlx_output(big, "y", rlx_relu(big, x));
    o.ignore_env = 1;
    rlx_status st = rlx_compile(big, &o, &s);
    if (st != RLX_ERR_OUT_OF_MEMORY)
        fail_msg("%s: %s", rlx_status_name(st), rlx_last_error());
    assert_non_null(strstr(rlx_last_error(), "the arena needs 4398046511104 bytes (4096.0 GiB), more than the"));
    assert_non_null(strstr(rlx_last_error(), "of memory available"));
    rlx_graph_free(big);
    rlx_graph_free(g);
}

/* Bad inputs to a compiled session: an unknown name, a missing input, a
 * size that does not fit. */
static void test_session_inputs(void **state)
{
    (void)state;
    rlx_graph *g = small_graph();
    rlx_options o;
    rlx_options_init(&o);
    o.ignore_env = 1;
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    static float x[64 * 64];
    EXPECT_ERROR(rlx_session_set_input(s, "nosuch", x, sizeof x), RLX_ERR_NOT_FOUND,
                 "the compiled graph has no input named 'nosuch'");
    assert_int_not_equal(rlx_session_run(s), RLX_OK);
    assert_non_null(strstr(rlx_last_error(), "'x'"));
    assert_int_equal(rlx_session_set_input(s, "x", x, 12), RLX_ERR_SHAPE);
    assert_non_null(strstr(rlx_last_error(), "'x'"));
    rlx_session_free(s);
    rlx_graph_free(g);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s/rlx-bad-files-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_read_matrix), cmocka_unit_test(test_onnx_read_matrix),
        cmocka_unit_test(test_writer_matrix),   cmocka_unit_test(test_limits),
        cmocka_unit_test(test_session_inputs),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}
