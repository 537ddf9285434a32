/* The GGUF reader (src/io/gguf.c): files written here byte by byte from
 * the spec (every metadata value type, versions 2 and 3, alignments 1 to
 * 256, F32/F16/BF16 data read back exactly, dims reversed from ne[],
 * quantized sizes), the typed getters, and malformed files: every prefix of
 * a small file, huge counts, offsets past the end, misaligned and
 * overlapping tensors, unknown types, each with the message expected.
 *
 * With a folder argument (the gguf_formats_py test) it reads the files
 * tests/llm/formats.py wrote there instead. */
#include "formats_testutil.h"

#include <math.h>

#include "core/error.h"
#include "io/gguf.h"

/* ---------------------------------------------------------------- writing */

static void put_str(bytes *b, const char *s)
{
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}

static void head(bytes *b, uint32_t version, uint64_t nt, uint64_t nkv)
{
    b_put(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, nt);
    b_u64(b, nkv);
}

static void kv_head(bytes *b, const char *key, uint32_t type)
{
    put_str(b, key);
    b_u32(b, type);
}

static void tinfo(bytes *b, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    put_str(b, name);
    b_u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++)
        b_u64(b, ne[i]);
    b_u32(b, type);
    b_u64(b, off);
}

/* Every value type, 19 keys (the fixture formats.py writes too). */
enum { N_ALL_KV = 19 };
static void all_kvs(bytes *b, uint32_t alignment)
{
    kv_head(b, "general.architecture", RLX_GGUF_STRING);
    put_str(b, "llama");
    kv_head(b, "t.u8", RLX_GGUF_UINT8), b_u8(b, 200);
    kv_head(b, "t.i8", RLX_GGUF_INT8), b_u8(b, (uint8_t)-100);
    kv_head(b, "t.u16", RLX_GGUF_UINT16), b_u16(b, 60000);
    kv_head(b, "t.i16", RLX_GGUF_INT16), b_u16(b, (uint16_t)-30000);
    kv_head(b, "t.u32", RLX_GGUF_UINT32), b_u32(b, 4000000000u);
    kv_head(b, "t.i32", RLX_GGUF_INT32), b_u32(b, (uint32_t)-2000000000);
    kv_head(b, "t.u64", RLX_GGUF_UINT64), b_u64(b, (UINT64_C(1) << 63) + 5);
    kv_head(b, "t.i64", RLX_GGUF_INT64), b_u64(b, (uint64_t) - (INT64_C(1) << 62));
    kv_head(b, "t.f32", RLX_GGUF_FLOAT32), b_f32(b, 0.5f);
    kv_head(b, "t.f64", RLX_GGUF_FLOAT64), b_f64(b, -1.25e300);
    kv_head(b, "t.bool", RLX_GGUF_BOOL), b_u8(b, 1);
    kv_head(b, "t.str", RLX_GGUF_STRING), put_str(b, "h\xc3\xa9llo");
    kv_head(b, "t.arr_i32", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_INT32), b_u64(b, 3);
    b_u32(b, 1), b_u32(b, (uint32_t)-2), b_u32(b, 3);
    kv_head(b, "t.arr_str", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_STRING), b_u64(b, 3);
    put_str(b, "a"), put_str(b, ""),
        put_str(b, "\xc3\xbc"
                   "ber");
    kv_head(b, "t.arr_f64", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_FLOAT64), b_u64(b, 2);
    b_f64(b, 0.25), b_f64(b, -8.0);
    kv_head(b, "t.arr_nested", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_ARRAY), b_u64(b, 3);
    b_u32(b, RLX_GGUF_STRING), b_u64(b, 2), put_str(b, "x"), put_str(b, "yz");
    b_u32(b, RLX_GGUF_STRING), b_u64(b, 0);
    b_u32(b, RLX_GGUF_UINT8), b_u64(b, 1), b_u8(b, 7);
    kv_head(b, "t.arr_empty", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_UINT64), b_u64(b, 0);
    kv_head(b, "general.alignment", RLX_GGUF_UINT32), b_u32(b, alignment);
}

/* f32 [2,3,4], f16 [3,5], bf16 [4,2], Q8_0 [1,32]: the values formats.py's
 * fixture holds too. */
static float f32_val(int i) { return (float)i * 0.25f - 1.0f; }
static uint16_t f16_bits(int i) { return rlx_f32_to_f16((float)i * 0.5f); }
static uint16_t bf16_bits(int i) { return rlx_f32_to_bf16((float)i * 1.5f - 2.0f); }

static void all_tensors(bytes *b, uint32_t alignment)
{
    size_t off = 0, sizes[4] = {24 * 4, 15 * 2, 8 * 2, 34}, offs[4];
    for (int i = 0; i < 4; i++) {
        off += (alignment - off % alignment) % alignment;
        offs[i] = off;
        off += sizes[i];
    }
    tinfo(b, "f32", 3, (uint64_t[]){4, 3, 2}, RLX_GGML_F32, offs[0]);
    tinfo(b, "f16", 2, (uint64_t[]){5, 3}, RLX_GGML_F16, offs[1]);
    tinfo(b, "bf16", 2, (uint64_t[]){2, 4}, RLX_GGML_BF16, offs[2]);
    tinfo(b, "q8", 2, (uint64_t[]){32, 1}, RLX_GGML_Q8_0, offs[3]);
    b_align(b, alignment);
    size_t base = b->n;
    for (int i = 0; i < 24; i++)
        b_f32(b, f32_val(i));
    b_zero(b, base + offs[1] - b->n);
    for (int i = 0; i < 15; i++)
        b_u16(b, f16_bits(i));
    b_zero(b, base + offs[2] - b->n);
    for (int i = 0; i < 8; i++)
        b_u16(b, bf16_bits(i));
    b_zero(b, base + offs[3] - b->n);
    for (int i = 0; i < 34; i++)
        b_u8(b, (uint8_t)i);
}

static void full_file(bytes *b, uint32_t version, uint32_t alignment)
{
    head(b, version, 4, N_ALL_KV);
    all_kvs(b, alignment);
    all_tensors(b, alignment);
}

/* ---------------------------------------------------------------- checking */

static void check_metadata(const rlx_gguf *g, int n_kv)
{
    assert_int_equal(rlx_gguf_kv_count(g), n_kv);
    const rlx_gguf_value *v;
    assert_non_null(v = rlx_gguf_find(g, "t.u8"));
    assert_int_equal(v->type, RLX_GGUF_UINT8);
    assert_int_equal(v->u, 200);
    assert_int_equal((v = rlx_gguf_find(g, "t.i8"))->i, -100);
    assert_int_equal(v->type, RLX_GGUF_INT8);
    assert_int_equal(rlx_gguf_find(g, "t.u16")->u, 60000);
    assert_int_equal(rlx_gguf_find(g, "t.i16")->i, -30000);
    assert_int_equal(rlx_gguf_find(g, "t.u32")->u, 4000000000u);
    assert_int_equal(rlx_gguf_find(g, "t.i32")->i, -2000000000);
    assert_true(rlx_gguf_find(g, "t.u64")->u == (UINT64_C(1) << 63) + 5);
    assert_true(rlx_gguf_find(g, "t.i64")->i == -(INT64_C(1) << 62));
    assert_true(rlx_gguf_find(g, "t.f32")->f == 0.5);
    assert_int_equal(rlx_gguf_find(g, "t.f32")->type, RLX_GGUF_FLOAT32);
    assert_true(rlx_gguf_find(g, "t.f64")->f == -1.25e300);
    assert_true(rlx_gguf_find(g, "t.bool")->b);
    v = rlx_gguf_find(g, "t.str");
    assert_int_equal(v->type, RLX_GGUF_STRING);
    assert_int_equal(v->str.len, 6);
    assert_string_equal(v->str.ptr, "h\xc3\xa9llo");

    rlx_gguf_value e;
    v = rlx_gguf_find(g, "t.arr_i32");
    assert_int_equal(v->type, RLX_GGUF_ARRAY);
    assert_int_equal(v->arr.elem_type, RLX_GGUF_INT32);
    assert_int_equal(v->arr.count, 3);
    EXPECT_OK(rlx_gguf_array_get(v, 1, &e));
    assert_int_equal(e.type, RLX_GGUF_INT32);
    assert_int_equal(e.i, -2);
    EXPECT_ERR(rlx_gguf_array_get(v, 3, &e), RLX_ERR_INVALID_ARGUMENT, "past");

    v = rlx_gguf_find(g, "t.arr_str");
    assert_int_equal(v->arr.elem_type, RLX_GGUF_STRING);
    const char *want[3] = {"a", "",
                           ("\xc3\xbc"
                            "ber")};
    for (int i = 0; i < 3; i++) {
        EXPECT_OK(rlx_gguf_array_get(v, (uint64_t)i, &e));
        assert_int_equal(e.type, RLX_GGUF_STRING);
        assert_string_equal(e.str.ptr, want[i]);
        assert_int_equal(e.str.len, strlen(want[i]));
    }
    v = rlx_gguf_find(g, "t.arr_f64");
    EXPECT_OK(rlx_gguf_array_get(v, 1, &e));
    assert_true(e.f == -8.0);

    v = rlx_gguf_find(g, "t.arr_nested");
    assert_int_equal(v->arr.elem_type, RLX_GGUF_ARRAY);
    assert_int_equal(v->arr.count, 3);
    EXPECT_OK(rlx_gguf_array_get(v, 0, &e));
    assert_int_equal(e.arr.elem_type, RLX_GGUF_STRING);
    rlx_gguf_value e2;
    EXPECT_OK(rlx_gguf_array_get(&e, 1, &e2));
    assert_string_equal(e2.str.ptr, "yz");
    EXPECT_OK(rlx_gguf_array_get(v, 1, &e));
    assert_int_equal(e.arr.count, 0);
    EXPECT_OK(rlx_gguf_array_get(v, 2, &e));
    EXPECT_OK(rlx_gguf_array_get(&e, 0, &e2));
    assert_int_equal(e2.type, RLX_GGUF_UINT8);
    assert_int_equal(e2.u, 7);
    v = rlx_gguf_find(g, "t.arr_empty");
    assert_int_equal(v->arr.count, 0);
    assert_int_equal(v->arr.elem_type, RLX_GGUF_UINT64);

    /* iteration in file order */
    assert_string_equal(rlx_gguf_kv_key(g, 0), "general.architecture");
    assert_string_equal(rlx_gguf_kv_key(g, 1), "t.u8");
    assert_ptr_equal(rlx_gguf_kv_value(g, 1), rlx_gguf_find(g, "t.u8"));
    assert_null(rlx_gguf_kv_key(g, n_kv));
    assert_null(rlx_gguf_find(g, "t.missing"));
}

static void check_tensors(const rlx_gguf *g)
{
    assert_int_equal(rlx_gguf_tensor_count(g), 4);
    const rlx_weight_view *t;
    EXPECT_OK(rlx_gguf_find_tensor(g, "f32", &t));
    assert_ptr_equal(t, rlx_gguf_tensor(g, 0));
    assert_string_equal(t->type_name, "F32");
    assert_int_equal(t->ggml_type, RLX_GGML_F32);
    assert_int_equal(t->dtype, RLX_F32);
    assert_int_equal(t->ndim, 3);
    assert_int_equal(t->dims[0], 2); /* row-major: ne[] reversed */
    assert_int_equal(t->dims[1], 3);
    assert_int_equal(t->dims[2], 4);
    assert_int_equal(t->numel, 24);
    assert_int_equal(t->nbytes, 96);
    for (int i = 0; i < 24; i++) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * i, 4);
        assert_true(f == f32_val(i));
    }
    EXPECT_OK(rlx_gguf_find_tensor(g, "f16", &t));
    assert_int_equal(t->dtype, RLX_F16);
    assert_int_equal(t->dims[0], 3);
    assert_int_equal(t->dims[1], 5);
    for (int i = 0; i < 15; i++) {
        uint16_t u;
        memcpy(&u, (const char *)t->data + 2 * i, 2);
        assert_int_equal(u, f16_bits(i));
    }
    EXPECT_OK(rlx_gguf_find_tensor(g, "bf16", &t));
    assert_int_equal(t->dtype, RLX_BF16);
    assert_string_equal(t->type_name, "BF16");
    assert_int_equal(t->dims[0], 4);
    assert_int_equal(t->dims[1], 2);
    for (int i = 0; i < 8; i++) {
        uint16_t u;
        memcpy(&u, (const char *)t->data + 2 * i, 2);
        assert_int_equal(u, bf16_bits(i));
        assert_true(rlx_bf16_to_f32(u) == (float)i * 1.5f - 2.0f);
    }
    EXPECT_OK(rlx_gguf_find_tensor(g, "q8", &t));
    assert_int_equal(t->ggml_type, RLX_GGML_Q8_0);
    assert_string_equal(t->type_name, "Q8_0");
    assert_int_equal(t->dtype, RLX_WEIGHT_NO_DTYPE);
    assert_int_equal(t->nbytes, 34);
    assert_int_equal(t->numel, 32);
    for (int i = 0; i < 34; i++)
        assert_int_equal(((const unsigned char *)t->data)[i], i);
    rlx_dtype dt;
    EXPECT_ERR(rlx_weight_view_dtype(t, &dt), RLX_ERR_UNSUPPORTED, "'q8' has type Q8_0");
    float f32buf[32];
    EXPECT_ERR(rlx_weight_view_read(t, RLX_F32, f32buf, sizeof f32buf), RLX_ERR_UNSUPPORTED, "type Q8_0 (ggml type 8)");
    EXPECT_ERR(rlx_gguf_find_tensor(g, "nope", &t), RLX_ERR_NOT_FOUND, "'nope'");
    assert_null(t);
    for (int64_t i = 0; i < 4; i++)
        assert_int_equal(((uintptr_t)rlx_gguf_tensor(g, i)->data - (uintptr_t)rlx_gguf_tensor(g, 0)->data) %
                             rlx_gguf_alignment(g),
                         0);
}

/* ---------------------------------------------------------------- tests */

static void test_versions_and_alignments(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_temp_dir(dir, "gguf");
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    uint32_t aligns[] = {32, 1, 8, 64, 256};
    for (uint32_t version = 2; version <= 3; version++)
        for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
            bytes b = {0};
            full_file(&b, version, aligns[a]);
            write_file(path, b.p, b.n);
            rlx_gguf *g = NULL;
            EXPECT_OK(rlx_gguf_open(path, &g));
            assert_int_equal(rlx_gguf_version(g), version);
            assert_int_equal(rlx_gguf_alignment(g), aligns[a]);
            assert_int_equal(rlx_gguf_data_offset(g) % aligns[a], 0);
            check_metadata(g, N_ALL_KV);
            check_tensors(g);
            rlx_gguf_close(g);
            /* the same bytes from memory */
            EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
            check_tensors(g);
            rlx_gguf_close(g);
            b_free(&b);
        }
    remove_tree(dir);
}

/* No general.alignment: 32; no tensors and no metadata is a valid file. */
static void test_defaults_and_empty(void **state)
{
    (void)state;
    bytes b = {0};
    head(&b, 3, 1, 1);
    kv_head(&b, "k", RLX_GGUF_UINT32), b_u32(&b, 7);
    tinfo(&b, "x", 1, (uint64_t[]){3}, RLX_GGML_F32, 0);
    b_align(&b, 32);
    assert_int_equal(b.n % 32, 0);
    for (int i = 0; i < 3; i++)
        b_f32(&b, (float)i);
    rlx_gguf *g = NULL;
    EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
    assert_int_equal(rlx_gguf_alignment(g), 32);
    assert_int_equal(rlx_gguf_tensor(g, 0)->ndim, 1);
    assert_int_equal(rlx_gguf_tensor(g, 0)->dims[0], 3);
    rlx_gguf_close(g);
    b_free(&b);

    head(&b, 3, 0, 0);
    EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
    assert_int_equal(rlx_gguf_tensor_count(g), 0);
    assert_int_equal(rlx_gguf_kv_count(g), 0);
    rlx_gguf_close(g);
    b_free(&b);

    /* a 0-d tensor and one with a zero dimension */
    head(&b, 3, 2, 0);
    tinfo(&b, "scalar", 0, NULL, RLX_GGML_F32, 0);
    tinfo(&b, "empty", 2, (uint64_t[]){0, 5}, RLX_GGML_F16, 32);
    b_align(&b, 32);
    b_f32(&b, 42.0f);
    b_zero(&b, 28);
    EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
    assert_int_equal(rlx_gguf_tensor(g, 0)->ndim, 0);
    assert_int_equal(rlx_gguf_tensor(g, 0)->numel, 1);
    assert_int_equal(rlx_gguf_tensor(g, 1)->numel, 0);
    assert_int_equal(rlx_gguf_tensor(g, 1)->nbytes, 0);
    assert_int_equal(rlx_gguf_tensor(g, 1)->dims[0], 5);
    assert_int_equal(rlx_gguf_tensor(g, 1)->dims[1], 0);
    rlx_gguf_close(g);
    b_free(&b);
}

static void test_getters(void **state)
{
    (void)state;
    bytes b = {0};
    full_file(&b, 3, 32);
    rlx_gguf *g = NULL;
    EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool bl;
    const char *s;
    size_t len;
    EXPECT_OK(rlx_gguf_get_u32(g, "t.u8", 0, &u32));
    assert_int_equal(u32, 200);
    EXPECT_OK(rlx_gguf_get_u32(g, "t.u32", 0, &u32));
    assert_int_equal(u32, 4000000000u);
    EXPECT_ERR(rlx_gguf_get_u32(g, "t.u64", 9, &u32), RLX_ERR_DTYPE, "'t.u64'");
    assert_int_equal(u32, 9); /* the default on failure */
    EXPECT_ERR(rlx_gguf_get_u32(g, "t.i8", 9, &u32), RLX_ERR_DTYPE, "is a int8");
    EXPECT_OK(rlx_gguf_get_u32(g, "general.alignment", 0, &u32));
    EXPECT_OK(rlx_gguf_get_u64(g, "t.u64", 0, &u64));
    assert_true(u64 == (UINT64_C(1) << 63) + 5);
    EXPECT_OK(rlx_gguf_get_i64(g, "t.i16", 0, &i64));
    assert_int_equal(i64, -30000);
    EXPECT_OK(rlx_gguf_get_i64(g, "t.u32", 0, &i64));
    assert_int_equal(i64, 4000000000);
    EXPECT_ERR(rlx_gguf_get_i64(g, "t.u64", -1, &i64), RLX_ERR_DTYPE, "integer");
    EXPECT_ERR(rlx_gguf_get_i64(g, "t.str", -1, &i64), RLX_ERR_DTYPE, "is a string");
    assert_int_equal(i64, -1);
    EXPECT_OK(rlx_gguf_get_f32(g, "t.f32", 0, &f32));
    assert_true(f32 == 0.5f);
    EXPECT_OK(rlx_gguf_get_f32(g, "t.u16", 0, &f32));
    assert_true(f32 == 60000.0f);
    EXPECT_OK(rlx_gguf_get_f64(g, "t.f64", 0, &f64));
    assert_true(f64 == -1.25e300);
    EXPECT_ERR(rlx_gguf_get_f32(g, "t.bool", 3.0f, &f32), RLX_ERR_DTYPE, "is a bool");
    assert_true(f32 == 3.0f);
    EXPECT_OK(rlx_gguf_get_bool(g, "t.bool", false, &bl));
    assert_true(bl);
    EXPECT_ERR(rlx_gguf_get_bool(g, "t.u8", false, &bl), RLX_ERR_DTYPE, "not a bool");
    EXPECT_OK(rlx_gguf_get_str(g, "general.architecture", NULL, &s, &len));
    assert_string_equal(s, "llama");
    assert_int_equal(len, 5);
    EXPECT_ERR(rlx_gguf_get_str(g, "llama.block_count", "dflt", &s, &len), RLX_ERR_NOT_FOUND, "llama.block_count");
    assert_string_equal(s, "dflt");
    assert_int_equal(len, 4);
    EXPECT_ERR(rlx_gguf_get_u32(g, "absent.key", 77, &u32), RLX_ERR_NOT_FOUND, "no metadata key 'absent.key'");
    assert_int_equal(u32, 77);
    const rlx_gguf_value *arr;
    EXPECT_OK(rlx_gguf_get_array(g, "t.arr_str", RLX_GGUF_STRING, &arr));
    assert_int_equal(arr->arr.count, 3);
    EXPECT_OK(rlx_gguf_get_array(g, "t.arr_str", -1, &arr));
    EXPECT_ERR(rlx_gguf_get_array(g, "t.arr_str", RLX_GGUF_INT32, &arr), RLX_ERR_DTYPE,
               "array of string, not of int32");
    EXPECT_ERR(rlx_gguf_get_array(g, "t.u8", -1, &arr), RLX_ERR_DTYPE, "not an array");
    assert_null(arr);
    rlx_gguf_close(g);
    b_free(&b);
}

static void test_type_table(void **state)
{
    (void)state;
    int64_t blk;
    size_t bytes_;
    struct {
        int id;
        const char *name;
        int64_t blk;
        size_t bytes;
    } want[] = {
        {RLX_GGML_F32, "F32", 1, 4},           {RLX_GGML_F16, "F16", 1, 2},        {RLX_GGML_Q4_0, "Q4_0", 32, 18},
        {RLX_GGML_Q4_1, "Q4_1", 32, 20},       {RLX_GGML_Q5_0, "Q5_0", 32, 22},    {RLX_GGML_Q5_1, "Q5_1", 32, 24},
        {RLX_GGML_Q8_0, "Q8_0", 32, 34},       {RLX_GGML_Q8_1, "Q8_1", 32, 36},    {RLX_GGML_Q2_K, "Q2_K", 256, 84},
        {RLX_GGML_Q3_K, "Q3_K", 256, 110},     {RLX_GGML_Q4_K, "Q4_K", 256, 144},  {RLX_GGML_Q5_K, "Q5_K", 256, 176},
        {RLX_GGML_Q6_K, "Q6_K", 256, 210},     {RLX_GGML_Q8_K, "Q8_K", 256, 292},  {RLX_GGML_IQ4_NL, "IQ4_NL", 32, 18},
        {RLX_GGML_IQ4_XS, "IQ4_XS", 256, 136}, {RLX_GGML_BF16, "BF16", 1, 2},      {RLX_GGML_I16, "I16", 1, 2},
        {RLX_GGML_F64, "F64", 1, 8},           {RLX_GGML_TQ2_0, "TQ2_0", 256, 66}, {RLX_GGML_MXFP4, "MXFP4", 32, 17},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(rlx_ggml_type_name(want[i].id), want[i].name);
        assert_true(rlx_ggml_type_size(want[i].id, &blk, &bytes_));
        assert_int_equal(blk, want[i].blk);
        assert_int_equal(bytes_, want[i].bytes);
    }
    assert_false(rlx_ggml_type_size(4, &blk, &bytes_)); /* Q4_2, retired */
    assert_non_null(strstr(rlx_ggml_type_name(4), "Q4_2"));
    assert_null(rlx_ggml_type_name(40));
    assert_null(rlx_ggml_type_name(-1));
    /* a Q4_K tensor's size: blocks x 144 */
    bytes b = {0};
    head(&b, 3, 1, 0);
    tinfo(&b, "q", 2, (uint64_t[]){512, 3}, RLX_GGML_Q4_K, 0);
    b_align(&b, 32);
    b_zero(&b, 6 * 144);
    rlx_gguf *g = NULL;
    EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
    assert_int_equal(rlx_gguf_tensor(g, 0)->nbytes, 6 * 144);
    assert_int_equal(rlx_gguf_tensor(g, 0)->dims[0], 3);
    rlx_gguf_close(g);
    b.n--; /* one byte short */
    EXPECT_ERR(rlx_gguf_open_buffer(b.p, b.n, &g), RLX_ERR_FORMAT, "tensor 'q': data [0, +864) runs past");
    b_free(&b);
}

/* Every prefix of a valid file fails cleanly (its last tensor ends the file). */
static void test_truncated_everywhere(void **state)
{
    (void)state;
    bytes b = {0};
    full_file(&b, 3, 32);
    rlx_gguf *g = NULL;
    EXPECT_OK(rlx_gguf_open_buffer(b.p, b.n, &g));
    rlx_gguf_close(g);
    for (size_t n = 0; n < b.n; n++) {
        unsigned char *copy = malloc(n ? n : 1); /* exactly n bytes, so ASan sees a read past them */
        memcpy(copy, b.p, n);
        rlx_clear_error();
        rlx_status s = rlx_gguf_open_buffer(copy, n, &g);
        if (s != RLX_ERR_FORMAT || !*rlx_last_error())
            fprintf(stderr, "prefix of %zu bytes: %s \"%s\"\n", n, rlx_status_name(s), rlx_last_error());
        assert_int_equal(s, RLX_ERR_FORMAT);
        assert_null(g);
        assert_non_null(strstr(rlx_last_error(), "gguf '<buffer>'"));
        free(copy);
    }
    b_free(&b);
}

/* ---------------------------------------------------------------- malformed files */

typedef void (*builder)(bytes *b);

static void one_f32(bytes *b, const char *name, uint64_t n, uint64_t off)
{
    tinfo(b, name, 1, (uint64_t[]){n}, RLX_GGML_F32, off);
}

static void m_magic(bytes *b) { b_put(b, "GGUX", 4), b_u32(b, 3), b_u64(b, 0), b_u64(b, 0); }
static void m_v1(bytes *b) { head(b, 1, 0, 0); }
static void m_v4(bytes *b) { head(b, 4, 0, 0); }
static void m_big_endian(bytes *b) { head(b, 0x03000000u, 0, 0); }
static void m_huge_kv(bytes *b) { head(b, 3, 0, UINT64_C(1) << 62); }
static void m_huge_tensors(bytes *b) { head(b, 3, UINT64_MAX, 0); }
static void m_huge_string(bytes *b)
{
    head(b, 3, 0, 1);
    b_u64(b, UINT64_MAX - 3);
    b_put(b, "key", 3);
    b_zero(b, 16);
}
static void m_value_type(bytes *b) { head(b, 3, 0, 1), kv_head(b, "k", 13), b_u32(b, 0); }
static void m_elem_type(bytes *b)
{
    head(b, 3, 0, 1), kv_head(b, "k", RLX_GGUF_ARRAY), b_u32(b, 99), b_u64(b, 1), b_u32(b, 0);
}
static void m_huge_array(bytes *b)
{
    head(b, 3, 0, 1), kv_head(b, "k", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_UINT64), b_u64(b, UINT64_C(1) << 61);
    b_zero(b, 64);
}
static void m_huge_str_array(bytes *b)
{
    head(b, 3, 0, 1), kv_head(b, "tokens", RLX_GGUF_ARRAY), b_u32(b, RLX_GGUF_STRING), b_u64(b, 1000);
    b_zero(b, 64);
}
static void m_deep(bytes *b)
{
    head(b, 3, 0, 1), kv_head(b, "deep", RLX_GGUF_ARRAY);
    for (int i = 0; i < 12; i++)
        b_u32(b, RLX_GGUF_ARRAY), b_u64(b, 1);
    b_u32(b, RLX_GGUF_UINT8), b_u64(b, 0);
}
static void m_dup_key(bytes *b)
{
    head(b, 3, 0, 2);
    kv_head(b, "a.b", RLX_GGUF_UINT8), b_u8(b, 1);
    kv_head(b, "a.b", RLX_GGUF_UINT8), b_u8(b, 2);
}
static void m_align_zero(bytes *b) { head(b, 3, 0, 1), kv_head(b, "general.alignment", RLX_GGUF_UINT32), b_u32(b, 0); }
static void m_align_three(bytes *b) { head(b, 3, 0, 1), kv_head(b, "general.alignment", RLX_GGUF_UINT32), b_u32(b, 3); }
static void m_align_type(bytes *b) { head(b, 3, 0, 1), kv_head(b, "general.alignment", RLX_GGUF_UINT64), b_u64(b, 32); }
static void m_ggml_type(bytes *b)
{
    head(b, 3, 1, 0), tinfo(b, "w", 1, (uint64_t[]){4}, 99, 0), b_align(b, 32), b_zero(b, 64);
}
static void m_retired_type(bytes *b)
{
    head(b, 3, 1, 0), tinfo(b, "w", 1, (uint64_t[]){32}, 4, 0), b_align(b, 32), b_zero(b, 64);
}
static void m_ndims(bytes *b)
{
    head(b, 3, 1, 0);
    tinfo(b, "w", 9, (uint64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, RLX_GGML_F32, 0);
    b_align(b, 32), b_zero(b, 4);
}
static void m_negative_dim(bytes *b)
{
    head(b, 3, 1, 0), tinfo(b, "w", 2, (uint64_t[]){4, UINT64_MAX}, RLX_GGML_F32, 0), b_align(b, 32), b_zero(b, 16);
}
static void m_numel_overflow(bytes *b)
{
    head(b, 3, 1, 0);
    tinfo(b, "w", 3, (uint64_t[]){UINT64_C(1) << 40, UINT64_C(1) << 20, UINT64_C(1) << 10}, RLX_GGML_F32, 0);
    b_align(b, 32), b_zero(b, 16);
}
static void m_bytes_overflow(bytes *b)
{
    head(b, 3, 1, 0), tinfo(b, "w", 1, (uint64_t[]){UINT64_C(1) << 62}, RLX_GGML_F64, 0), b_align(b, 32), b_zero(b, 8);
}
static void m_block(bytes *b)
{
    head(b, 3, 1, 0), tinfo(b, "w", 2, (uint64_t[]){33, 2}, RLX_GGML_Q4_0, 0), b_align(b, 32), b_zero(b, 128);
}
static void m_misaligned(bytes *b)
{
    head(b, 3, 2, 0), one_f32(b, "a", 4, 0), one_f32(b, "b", 4, 16), b_align(b, 32), b_zero(b, 64);
}
static void m_past_end(bytes *b) { head(b, 3, 1, 0), one_f32(b, "w", 4, 64), b_align(b, 32), b_zero(b, 64); }
static void m_offset_huge(bytes *b)
{
    head(b, 3, 1, 0), one_f32(b, "w", 4, UINT64_MAX - 31), b_align(b, 32), b_zero(b, 16);
}
static void m_overlap(bytes *b)
{
    head(b, 3, 2, 0), one_f32(b, "a", 16, 0), one_f32(b, "b", 4, 32), b_align(b, 32), b_zero(b, 64);
}
static void m_dup_tensor(bytes *b)
{
    head(b, 3, 2, 0), one_f32(b, "w", 4, 0), one_f32(b, "w", 4, 32), b_align(b, 32), b_zero(b, 64);
}
static void m_nul_name(bytes *b)
{
    head(b, 3, 1, 0);
    b_u64(b, 3), b_put(b, "a\0b", 3), b_u32(b, 1), b_u64(b, 1), b_u32(b, RLX_GGML_F32), b_u64(b, 0);
    b_align(b, 32), b_zero(b, 4);
}
static void m_padding(bytes *b) { head(b, 3, 1, 0), one_f32(b, "w", 0, 0); }

static const struct {
    const char *what;
    builder build;
    rlx_status want;
    const char *msg;
} malformed[] = {
    {"bad magic", m_magic, RLX_ERR_FORMAT, "not a GGUF file"},
    {"version 1", m_v1, RLX_ERR_UNSUPPORTED, "version 1 is not supported"},
    {"version 4", m_v4, RLX_ERR_UNSUPPORTED, "version 4 is not supported"},
    {"big-endian", m_big_endian, RLX_ERR_UNSUPPORTED, "big-endian"},
    {"huge kv count", m_huge_kv, RLX_ERR_FORMAT, "metadata count 4611686018427387904"},
    {"huge tensor count", m_huge_tensors, RLX_ERR_FORMAT, "tensor count 18446744073709551615"},
    {"huge string", m_huge_string, RLX_ERR_FORMAT, "runs past the end of the file"},
    {"value type", m_value_type, RLX_ERR_FORMAT, "key 'k': unknown value type 13"},
    {"array element type", m_elem_type, RLX_ERR_FORMAT, "unknown array element type 99"},
    {"huge array", m_huge_array, RLX_ERR_FORMAT, "array of 2305843009213693952 uint64 elements"},
    {"huge string array", m_huge_str_array, RLX_ERR_FORMAT, "key 'tokens'"},
    {"nesting", m_deep, RLX_ERR_FORMAT, "nested deeper than"},
    {"duplicate key", m_dup_key, RLX_ERR_FORMAT, "duplicate metadata key 'a.b'"},
    {"alignment 0", m_align_zero, RLX_ERR_FORMAT, "general.alignment 0 is not a power of two"},
    {"alignment 3", m_align_three, RLX_ERR_FORMAT, "general.alignment 3 is not a power of two"},
    {"alignment type", m_align_type, RLX_ERR_FORMAT, "general.alignment is a uint64, not a uint32"},
    {"ggml type", m_ggml_type, RLX_ERR_FORMAT, "tensor 'w': unknown ggml type id 99"},
    {"retired type", m_retired_type, RLX_ERR_UNSUPPORTED, "Q4_2"},
    {"rank", m_ndims, RLX_ERR_FORMAT, "9 dimensions"},
    {"negative dim", m_negative_dim, RLX_ERR_FORMAT, "negative or too large"},
    {"numel overflow", m_numel_overflow, RLX_ERR_FORMAT, "element count overflows"},
    {"bytes overflow", m_bytes_overflow, RLX_ERR_FORMAT, "tensor 'w'"},
    {"block", m_block, RLX_ERR_FORMAT, "row length 33 is not a multiple of Q4_0's block of 32"},
    {"misaligned", m_misaligned, RLX_ERR_FORMAT, "tensor 'b': data offset 16 is not a multiple of the alignment 32"},
    {"past end", m_past_end, RLX_ERR_FORMAT, "tensor 'w': data [64, +16) runs past the end"},
    {"offset huge", m_offset_huge, RLX_ERR_FORMAT, "runs past the end"},
    {"overlap", m_overlap, RLX_ERR_FORMAT, "tensors 'a' and 'b' overlap"},
    {"duplicate tensor", m_dup_tensor, RLX_ERR_FORMAT, "duplicate tensor name 'w'"},
    {"NUL in name", m_nul_name, RLX_ERR_FORMAT, "NUL"},
    {"no padding before data", m_padding, RLX_ERR_FORMAT, "data section would start"},
};

static void test_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        bytes b = {0};
        malformed[i].build(&b);
        unsigned char *copy = malloc(b.n);
        memcpy(copy, b.p, b.n);
        rlx_gguf *g = (rlx_gguf *)1;
        rlx_clear_error();
        rlx_status s = rlx_gguf_open_buffer(copy, b.n, &g);
        if (s != malformed[i].want || !strstr(rlx_last_error(), malformed[i].msg))
            fprintf(stderr, "case '%s': %s \"%s\", expected %s with \"%s\"\n", malformed[i].what, rlx_status_name(s),
                    rlx_last_error(), rlx_status_name(malformed[i].want), malformed[i].msg);
        assert_int_equal(s, malformed[i].want);
        assert_non_null(strstr(rlx_last_error(), malformed[i].msg));
        assert_null(g);
        free(copy);
        b_free(&b);
    }
}

static void test_files(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_temp_dir(dir, "gguf");
    rlx_gguf *g = NULL;
    snprintf(path, sizeof path, "%s/missing.gguf", dir);
    EXPECT_ERR(rlx_gguf_open(path, &g), RLX_ERR_IO, "missing.gguf");
    EXPECT_ERR(rlx_gguf_open(dir, &g), RLX_ERR_IO, "not a regular file");
    snprintf(path, sizeof path, "%s/empty.gguf", dir);
    write_file(path, "", 0);
    EXPECT_ERR(rlx_gguf_open(path, &g), RLX_ERR_FORMAT, "empty");
    EXPECT_ERR(rlx_gguf_open(NULL, &g), RLX_ERR_INVALID_ARGUMENT, "NULL");
    assert_null(g);
    rlx_gguf_close(NULL);
    remove_tree(dir);
}

/* ---------------------------------------------------------------- formats.py's files */

static const char *py_dir;

static void test_formats_py(void **state)
{
    (void)state;
    const char *names[2] = {"py_v3.gguf", "py_v2.gguf"};
    uint32_t versions[2] = {3, 2}, aligns[2] = {64, 32};
    for (int i = 0; i < 2; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", py_dir, names[i]);
        rlx_gguf *g = NULL;
        EXPECT_OK(rlx_gguf_open(path, &g));
        assert_int_equal(rlx_gguf_version(g), versions[i]);
        assert_int_equal(rlx_gguf_alignment(g), aligns[i]);
        /* formats.py adds general.alignment only when it is not 32 */
        check_metadata(g, aligns[i] == 32 ? N_ALL_KV - 1 : N_ALL_KV);
        check_tensors(g);
        rlx_gguf_close(g);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        py_dir = argv[1];
        const struct CMUnitTest py[] = {cmocka_unit_test(test_formats_py)};
        return cmocka_run_group_tests(py, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_versions_and_alignments),
        cmocka_unit_test(test_defaults_and_empty),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
