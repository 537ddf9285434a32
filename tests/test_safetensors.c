/* The safetensors reader (src/io/safetensors.c) and the opener over both
 * checkpoint formats (src/io/weights.c): files written here from the spec
 * (every dtype, data bytes read back exactly, unpadded headers), sharded
 * folders with their index json and config.json, and malformed files:
 * every prefix of a small file, bad JSON, offsets past the end, sizes that
 * disagree with the shape, overlapping tensors, bad shard maps, each with
 * the message expected.
 *
 * With a folder argument (the safetensors_formats_py test) it reads the
 * files tests/llm/formats.py wrote there instead. */
#include "formats_testutil.h"

#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"

#ifdef RLX_HAVE_CJSON
#include <cjson/cJSON.h>

/* ---------------------------------------------------------------- writing */

/* One file: u64 header length, the header (padded with spaces to pad), data. */
static void st_file(bytes *b, const char *header, const void *data, size_t n, size_t pad)
{
    size_t hl = strlen(header);
    size_t padded = pad ? hl + (pad - hl % pad) % pad : hl;
    b_u64(b, padded);
    b_put(b, header, hl);
    for (size_t i = hl; i < padded; i++)
        b_u8(b, ' ');
    b_put(b, data, n);
}

/* F32 [2,3] (0..5 / 4), F16 [3], BF16 [2,2], I64 [2], U8 [4], BOOL [3], I16 [2]:
 * 24 + 6 + 8 + 16 + 4 + 3 + 4 = 65 data bytes. */
static const char *all_header = "{\"__metadata__\":{\"format\":\"pt\"},"
                                "\"w.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                                "\"w.f16\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[24,30]},"
                                "\"w.bf16\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[30,38]},"
                                "\"w.i64\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[38,54]},"
                                "\"w.u8\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[54,58]},"
                                "\"w.bool\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[58,61]},"
                                "\"w.i16\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[61,65]}}";

static void all_data(bytes *d)
{
    for (int i = 0; i < 6; i++)
        b_f32(d, (float)i / 4);
    for (int i = 0; i < 3; i++)
        b_u16(d, rlx_f32_to_f16((float)i - 1.5f));
    for (int i = 0; i < 4; i++)
        b_u16(d, rlx_f32_to_bf16((float)i * 3.0f));
    b_u64(d, (uint64_t)-7), b_u64(d, 1ull << 40);
    b_u8(d, 0), b_u8(d, 1), b_u8(d, 254), b_u8(d, 255);
    b_u8(d, 1), b_u8(d, 0), b_u8(d, 1);
    b_u16(d, (uint16_t)-2), b_u16(d, 300);
}

static void all_file(bytes *b, size_t pad)
{
    bytes d = {0};
    all_data(&d);
    st_file(b, all_header, d.p, d.n, pad);
    b_free(&d);
}

/* ---------------------------------------------------------------- checks */

static void check_all(const rlx_safetensors *st)
{
    assert_int_equal(rlx_safetensors_count(st), 7);
    const rlx_weight_view *t;
    EXPECT_OK(rlx_safetensors_find(st, "w.f32", &t));
    assert_ptr_equal(t, rlx_safetensors_get(st, 0)); /* by data offset */
    assert_int_equal(t->dtype, RLX_F32);
    assert_string_equal(t->type_name, "F32");
    assert_int_equal(t->ggml_type, -1);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[1], 3);
    assert_int_equal(t->numel, 6);
    assert_int_equal(t->nbytes, 24);
    for (int i = 0; i < 6; i++) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * i, 4);
        assert_true(f == (float)i / 4);
    }
    EXPECT_OK(rlx_safetensors_find(st, "w.f16", &t));
    assert_int_equal(t->dtype, RLX_F16);
    for (int i = 0; i < 3; i++) {
        uint16_t u;
        memcpy(&u, (const char *)t->data + 2 * i, 2);
        assert_int_equal(u, rlx_f32_to_f16((float)i - 1.5f));
    }
    EXPECT_OK(rlx_safetensors_find(st, "w.bf16", &t));
    assert_int_equal(t->dtype, RLX_BF16);
    assert_int_equal(t->dims[0], 2);
    for (int i = 0; i < 4; i++) {
        uint16_t u;
        memcpy(&u, (const char *)t->data + 2 * i, 2);
        assert_int_equal(u, rlx_f32_to_bf16((float)i * 3.0f));
    }
    EXPECT_OK(rlx_safetensors_find(st, "w.i64", &t));
    assert_int_equal(t->dtype, RLX_I64);
    int64_t v;
    memcpy(&v, t->data, 8);
    assert_int_equal(v, -7);
    EXPECT_OK(rlx_safetensors_find(st, "w.u8", &t));
    assert_int_equal(t->dtype, RLX_U8);
    assert_int_equal(((const unsigned char *)t->data)[2], 254);
    EXPECT_OK(rlx_safetensors_find(st, "w.bool", &t));
    assert_int_equal(t->dtype, RLX_BOOL);
    EXPECT_OK(rlx_safetensors_find(st, "w.i16", &t));
    assert_int_equal(t->dtype, RLX_WEIGHT_NO_DTYPE);
    assert_int_equal(t->nbytes, 4);
    rlx_dtype dt;
    EXPECT_ERR(rlx_weight_view_dtype(t, &dt), RLX_ERR_UNSUPPORTED, "'w.i16' has dtype I16");
    EXPECT_ERR(rlx_safetensors_find(st, "__metadata__", &t), RLX_ERR_NOT_FOUND, "'__metadata__'");
    assert_null(rlx_safetensors_get(st, 7));
}

/* ---------------------------------------------------------------- tests */

static void test_single_file(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_temp_dir(dir, "st");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t pads[3] = {8, 0, 1}; /* padded as the reference writer does, and not */
    for (int p = 0; p < 3; p++) {
        bytes b = {0};
        all_file(&b, pads[p]);
        write_file(path, b.p, b.n);
        rlx_safetensors *st = NULL;
        EXPECT_OK(rlx_safetensors_open(path, &st));
        assert_int_equal(rlx_safetensors_file_count(st), 1);
        check_all(st);
        rlx_safetensors_close(st);
        EXPECT_OK(rlx_safetensors_open(dir, &st)); /* a folder with model.safetensors */
        check_all(st);
        rlx_safetensors_close(st);
        EXPECT_OK(rlx_safetensors_open_buffer(b.p, b.n, &st));
        check_all(st);
        rlx_safetensors_close(st);
        b_free(&b);
    }
    /* no tensors at all */
    bytes b = {0};
    st_file(&b, "{}", NULL, 0, 8);
    rlx_safetensors *st = NULL;
    EXPECT_OK(rlx_safetensors_open_buffer(b.p, b.n, &st));
    assert_int_equal(rlx_safetensors_count(st), 0);
    rlx_safetensors_close(st);
    b_free(&b);
    /* a 0-d tensor and an empty one at the same offset */
    float one = 1.0f;
    st_file(&b,
            "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
            "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
            "\"e2\":{\"dtype\":\"F16\",\"shape\":[2,0],\"data_offsets\":[4,4]}}",
            &one, 4, 8);
    EXPECT_OK(rlx_safetensors_open_buffer(b.p, b.n, &st));
    const rlx_weight_view *t;
    EXPECT_OK(rlx_safetensors_find(st, "s", &t));
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    EXPECT_OK(rlx_safetensors_find(st, "e", &t));
    assert_int_equal(t->numel, 0);
    assert_int_equal(t->dims[1], 3);
    rlx_safetensors_close(st);
    b_free(&b);
    remove_tree(dir);
}

/* Two shards (f32 + f16 in the first, the rest in the second) + index + config. */
static void write_sharded(const char *dir, const char *index)
{
    char path[400];
    bytes d = {0}, b = {0};
    all_data(&d);
    st_file(&b,
            "{\"w.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
            "\"w.f16\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[24,30]}}",
            d.p, 30, 8);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_file(path, b.p, b.n);
    b.n = 0;
    st_file(&b,
            "{\"w.bf16\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
            "\"w.i64\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[8,24]},"
            "\"w.u8\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[24,28]},"
            "\"w.bool\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[28,31]},"
            "\"w.i16\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[31,35]}}",
            d.p + 30, 35, 8);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_file(path, b.p, b.n);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    write_file(path, index, strlen(index));
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *cfg = "{\"hidden_size\": 64, \"model_type\": \"llama\", \"rope_theta\": 10000.0}";
    write_file(path, cfg, strlen(cfg));
    b_free(&b);
    b_free(&d);
}

static const char *good_index =
    "{\"metadata\":{\"total_size\":65},\"weight_map\":{"
    "\"w.f32\":\"model-00001-of-00002.safetensors\",\"w.f16\":\"model-00001-of-00002.safetensors\","
    "\"w.bf16\":\"model-00002-of-00002.safetensors\",\"w.i64\":\"model-00002-of-00002.safetensors\","
    "\"w.u8\":\"model-00002-of-00002.safetensors\",\"w.bool\":\"model-00002-of-00002.safetensors\","
    "\"w.i16\":\"model-00002-of-00002.safetensors\"}}";

static void test_sharded(void **state)
{
    (void)state;
    char dir[256], path[400];
    make_temp_dir(dir, "st");
    write_sharded(dir, good_index);
    rlx_safetensors *st = NULL;
    EXPECT_OK(rlx_safetensors_open(dir, &st));
    assert_int_equal(rlx_safetensors_file_count(st), 2);
    check_all(st);
    rlx_safetensors_close(st);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    EXPECT_OK(rlx_safetensors_open(path, &st));
    check_all(st);
    rlx_safetensors_close(st);

    /* config.json from the folder or from a file in it */
    cJSON *cfg = NULL;
    EXPECT_OK(rlx_safetensors_read_config(dir, &cfg));
    assert_int_equal(cJSON_GetObjectItem(cfg, "hidden_size")->valueint, 64);
    assert_string_equal(cJSON_GetObjectItem(cfg, "model_type")->valuestring, "llama");
    cJSON_Delete(cfg);
    EXPECT_OK(rlx_safetensors_read_config(path, &cfg));
    assert_true(cJSON_GetObjectItem(cfg, "rope_theta")->valuedouble == 10000.0);
    cJSON_Delete(cfg);

    /* the opener over either format */
    rlx_weights *w = NULL;
    EXPECT_OK(rlx_weights_open(dir, &w));
    assert_non_null(rlx_weights_safetensors(w));
    assert_null(rlx_weights_gguf(w));
    assert_int_equal(rlx_weights_count(w), 7);
    const rlx_weight_view *t;
    EXPECT_OK(rlx_weights_find(w, "w.bf16", &t));
    assert_int_equal(t->dtype, RLX_BF16);
    EXPECT_ERR(rlx_weights_find(w, "lm_head.weight", &t), RLX_ERR_NOT_FOUND, "lm_head.weight");
    assert_non_null(rlx_weights_get(w, 6));
    rlx_weights_close(w);
    remove_tree(dir);
}

static void test_sharded_errors(void **state)
{
    (void)state;
    struct {
        const char *index;
        rlx_status want;
        const char *msg;
    } cases[] = {
        {"{\"metadata\":{}}", RLX_ERR_FORMAT, "no \"weight_map\" object"},
        {"{\"weight_map\":{\"w.f32\":\"model-00003-of-00002.safetensors\"}}", RLX_ERR_IO,
         "model-00003-of-00002.safetensors"},
        {"{\"weight_map\":{\"w.f32\":\"../model.safetensors\"}}", RLX_ERR_FORMAT, "not a plain name"},
        {"{\"weight_map\":{\"w.f32\":7}}", RLX_ERR_FORMAT, "weight_map entry 'w.f32' is not a file name"},
        {"{\"weight_map\":{\"w.f32\":\"model-00002-of-00002.safetensors\"}}", RLX_ERR_FORMAT,
         "puts tensor 'w.f32' in 'model-00002-of-00002.safetensors', which does not hold it"},
        {"{\"weight_map\":{\"w.f32\":\"model-00001-of-00002.safetensors\",\"w.x\":\"model-00001-of-00002.safetensors\"}"
         "}",
         RLX_ERR_FORMAT, "tensor 'w.x'"},
        {"{\"weight_map\":{\"w.f32\":\"model-00001-of-00002.safetensors\",", RLX_ERR_FORMAT,
         "is not valid JSON (line 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[256];
        make_temp_dir(dir, "st");
        write_sharded(dir, cases[i].index);
        rlx_safetensors *st = (rlx_safetensors *)1;
        rlx_clear_error();
        rlx_status s = rlx_safetensors_open(dir, &st);
        if (s != cases[i].want || !strstr(rlx_last_error(), cases[i].msg))
            fprintf(stderr, "index %zu: %s \"%s\", expected %s with \"%s\"\n", i, rlx_status_name(s), rlx_last_error(),
                    rlx_status_name(cases[i].want), cases[i].msg);
        assert_int_equal(s, cases[i].want);
        assert_non_null(strstr(rlx_last_error(), cases[i].msg));
        assert_null(st);
        remove_tree(dir);
    }
    /* the same tensor in two shards */
    char dir[256], path[400];
    make_temp_dir(dir, "st");
    write_sharded(dir, good_index);
    bytes b = {0};
    float f[6] = {0};
    st_file(&b, "{\"w.f32\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", f, 24, 8);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_file(path, b.p, b.n);
    rlx_safetensors *st = NULL;
    EXPECT_ERR(rlx_safetensors_open(dir, &st), RLX_ERR_FORMAT, "tensor 'w.f32' appears twice");
    b_free(&b);
    remove_tree(dir);
    /* folders and files that are not checkpoints */
    make_temp_dir(dir, "st");
    EXPECT_ERR(rlx_safetensors_open(dir, &st), RLX_ERR_NOT_FOUND, "neither model.safetensors.index.json");
    snprintf(path, sizeof path, "%s/nope.safetensors", dir);
    EXPECT_ERR(rlx_safetensors_open(path, &st), RLX_ERR_IO, "nope.safetensors");
    cJSON *j = NULL;
    EXPECT_ERR(rlx_safetensors_read_config(dir, &j), RLX_ERR_IO, "config.json");
    snprintf(path, sizeof path, "%s/config.json", dir);
    write_file(path, "{\n\"a\": 1,\n\"b\": }", 16);
    EXPECT_ERR(rlx_json_read_file(path, &j), RLX_ERR_FORMAT, "not valid JSON (line 3");
    assert_null(j);
    remove_tree(dir);
}

/* Every prefix of a valid file fails cleanly (its last tensor ends the file). */
static void test_truncated_everywhere(void **state)
{
    (void)state;
    bytes b = {0};
    all_file(&b, 8);
    for (size_t n = 0; n < b.n; n++) {
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        rlx_safetensors *st = (rlx_safetensors *)1;
        rlx_clear_error();
        rlx_status s = rlx_safetensors_open_buffer(copy, n, &st);
        if (s != RLX_ERR_FORMAT)
            fprintf(stderr, "prefix of %zu bytes: %s \"%s\"\n", n, rlx_status_name(s), rlx_last_error());
        assert_int_equal(s, RLX_ERR_FORMAT);
        assert_null(st);
        assert_non_null(strstr(rlx_last_error(), "safetensors '<buffer>'"));
        free(copy);
    }
    b_free(&b);
}

static const struct {
    const char *what;
    const char *header; /* NULL: raw bytes below */
    size_t data;        /* data bytes after the header */
    const char *msg;
} malformed[] = {
    {"not JSON", "{\"a\":", 0, "header is not valid JSON"},
    {"trailing bytes", "{}x", 0, "bytes after its JSON object"},
    {"two objects", "{} {}", 0, "bytes after its JSON object"},
    {"not an object", "[1,2]", 0, "header is not a JSON object"},
    {"entry not object", "{\"w\":3}", 0, "tensor 'w': entry is not a JSON object"},
    {"no dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'w': no \"dtype\" string"},
    {"no shape", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "no \"shape\" array"},
    {"no offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "\"data_offsets\" is not an array of two"},
    {"three offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8, "array of two"},
    {"unknown dtype", "{\"w\":{\"dtype\":\"F12\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype \"F12\""},
    {"negative dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
     "shape[0] is not a non-negative"},
    {"fractional dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1.5],\"data_offsets\":[0,4]}}", 4, "shape[1]"},
    {"string dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, "shape[0]"},
    {"huge dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,4]}}", 4, "shape[0]"},
    {"numel overflow",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
     "element count overflows"},
    {"rank 9", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "9 dimensions"},
    {"negative offset", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
     "not non-negative integers"},
    {"begin after end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4, "begin after they end"},
    {"past end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
     "data_offsets [0, 8] run past the end of the data (4 bytes)"},
    {"huge offset", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9007199254740988,9007199254740992]}}", 4,
     "run past the end"},
    {"size mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 12,
     "hold 8 bytes, its F32 shape needs 3 x 4"},
    {"overlap",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     12, "tensors 'a' and 'b' overlap"},
    {"duplicate name",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, "tensor 'a' appears twice"},
    {"metadata not object", "{\"__metadata__\":[1]}", 0, "__metadata__ is not a JSON object"},
};

static void test_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        bytes b = {0}, d = {0};
        b_zero(&d, malformed[i].data + 1);
        st_file(&b, malformed[i].header, d.p, malformed[i].data, 8);
        unsigned char *copy = malloc(b.n);
        memcpy(copy, b.p, b.n);
        rlx_safetensors *st = (rlx_safetensors *)1;
        rlx_clear_error();
        rlx_status s = rlx_safetensors_open_buffer(copy, b.n, &st);
        if (s == RLX_OK || !strstr(rlx_last_error(), malformed[i].msg))
            fprintf(stderr, "case '%s': %s \"%s\", expected \"%s\"\n", malformed[i].what, rlx_status_name(s),
                    rlx_last_error(), malformed[i].msg);
        assert_int_not_equal(s, RLX_OK);
        assert_non_null(strstr(rlx_last_error(), malformed[i].msg));
        assert_null(st);
        free(copy);
        b_free(&b);
        b_free(&d);
    }
    /* the header length itself */
    rlx_safetensors *st = NULL;
    bytes b = {0};
    b_u64(&b, 1000);
    b_put(&b, "{}", 2);
    EXPECT_ERR(rlx_safetensors_open_buffer(b.p, b.n, &st), RLX_ERR_FORMAT, "header length 1000 runs past the end");
    b.n = 0;
    b_u64(&b, UINT64_MAX);
    EXPECT_ERR(rlx_safetensors_open_buffer(b.p, b.n, &st), RLX_ERR_FORMAT, "runs past the end");
    EXPECT_ERR(rlx_safetensors_open_buffer(b.p, 5, &st), RLX_ERR_FORMAT, "less than the 8-byte header length");
    b_free(&b);
}

/* rlx_weight_view_read: copies, float conversions, refusals. */
static void test_view_read(void **state)
{
    (void)state;
    bytes b = {0};
    all_file(&b, 8);
    rlx_safetensors *st = NULL;
    EXPECT_OK(rlx_safetensors_open_buffer(b.p, b.n, &st));
    const rlx_weight_view *t;
    float f[6];
    EXPECT_OK(rlx_safetensors_find(st, "w.f16", &t));
    EXPECT_OK(rlx_weight_view_read(t, RLX_F32, f, 3 * sizeof(float)));
    for (int i = 0; i < 3; i++)
        assert_true(f[i] == (float)i - 1.5f);
    EXPECT_OK(rlx_safetensors_find(st, "w.bf16", &t));
    EXPECT_OK(rlx_weight_view_read(t, RLX_F32, f, 4 * sizeof(float)));
    for (int i = 0; i < 4; i++)
        assert_true(f[i] == (float)i * 3.0f);
    double d[4];
    EXPECT_OK(rlx_weight_view_read(t, RLX_F64, d, sizeof d));
    assert_true(d[3] == 9.0);
    EXPECT_OK(rlx_safetensors_find(st, "w.f32", &t));
    uint16_t h[6];
    EXPECT_OK(rlx_weight_view_read(t, RLX_BF16, h, sizeof h));
    for (int i = 0; i < 6; i++)
        assert_int_equal(h[i], rlx_f32_to_bf16((float)i / 4));
    EXPECT_OK(rlx_weight_view_read(t, RLX_F32, f, sizeof f));
    assert_true(f[5] == 1.25f);
    EXPECT_ERR(rlx_weight_view_read(t, RLX_F32, f, sizeof f - 4), RLX_ERR_INVALID_ARGUMENT, "'w.f32': 20 bytes");
    int64_t v[2];
    EXPECT_OK(rlx_safetensors_find(st, "w.i64", &t));
    EXPECT_OK(rlx_weight_view_read(t, RLX_I64, v, sizeof v));
    assert_int_equal(v[1], INT64_C(1) << 40);
    EXPECT_ERR(rlx_weight_view_read(t, RLX_F32, f, 2 * sizeof(float)), RLX_ERR_UNSUPPORTED, "from i64 to f32");
    EXPECT_OK(rlx_safetensors_find(st, "w.i16", &t));
    EXPECT_ERR(rlx_weight_view_read(t, RLX_I32, v, 8), RLX_ERR_UNSUPPORTED, "dtype I16");
    rlx_safetensors_close(st);
    b_free(&b);
}

/* The opener tells GGUF from safetensors by the magic. */
static void test_weights_open(void **state)
{
    (void)state;
    char dir[256], path[300];
    make_temp_dir(dir, "st");
    bytes b = {0};
    b_put(&b, "GGUF", 4), b_u32(&b, 3), b_u64(&b, 1), b_u64(&b, 0);
    b_u64(&b, 1), b_put(&b, "w", 1), b_u32(&b, 2), b_u64(&b, 2), b_u64(&b, 3), b_u32(&b, RLX_GGML_F32), b_u64(&b, 0);
    b_align(&b, 32);
    for (int i = 0; i < 6; i++)
        b_f32(&b, (float)i);
    snprintf(path, sizeof path, "%s/m.gguf", dir);
    write_file(path, b.p, b.n);
    rlx_weights *w = NULL;
    EXPECT_OK(rlx_weights_open(path, &w));
    assert_non_null(rlx_weights_gguf(w));
    assert_null(rlx_weights_safetensors(w));
    const rlx_weight_view *t;
    EXPECT_OK(rlx_weights_find(w, "w", &t));
    assert_int_equal(t->dims[0], 3);
    assert_int_equal(t->dims[1], 2);
    assert_int_equal(rlx_weights_count(w), 1);
    rlx_weights_close(w);
    b.n = 0;
    all_file(&b, 8);
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    write_file(path, b.p, b.n);
    EXPECT_OK(rlx_weights_open(path, &w));
    assert_int_equal(rlx_weights_count(w), 7);
    rlx_weights_close(w);
    snprintf(path, sizeof path, "%s/x.gguf", dir); /* named .gguf: the GGUF reader's message */
    write_file(path, "{}", 2);
    EXPECT_ERR(rlx_weights_open(path, &w), RLX_ERR_FORMAT, "gguf '");
    snprintf(path, sizeof path, "%s/missing", dir);
    EXPECT_ERR(rlx_weights_open(path, &w), RLX_ERR_IO, "missing");
    assert_null(w);
    b_free(&b);
    remove_tree(dir);
}

/* ---------------------------------------------------------------- formats.py's files */

static const char *py_dir;

static void check_py(const rlx_safetensors *st)
{
    assert_int_equal(rlx_safetensors_count(st), 4);
    const rlx_weight_view *t;
    EXPECT_OK(rlx_safetensors_find(st, "f32", &t));
    assert_int_equal(t->ndim, 3);
    assert_int_equal(t->dims[0], 2);
    assert_int_equal(t->dims[2], 4);
    for (int i = 0; i < 24; i++) {
        float f;
        memcpy(&f, (const char *)t->data + 4 * i, 4);
        assert_true(f == (float)i * 0.25f - 1.0f);
    }
    EXPECT_OK(rlx_safetensors_find(st, "f16", &t));
    assert_int_equal(t->dtype, RLX_F16);
    for (int i = 0; i < 15; i++) {
        uint16_t u;
        memcpy(&u, (const char *)t->data + 2 * i, 2);
        assert_int_equal(u, rlx_f32_to_f16((float)i * 0.5f));
    }
    EXPECT_OK(rlx_safetensors_find(st, "bf16", &t));
    assert_int_equal(t->dtype, RLX_BF16);
    assert_int_equal(t->dims[0], 4);
    for (int i = 0; i < 8; i++) {
        uint16_t u;
        memcpy(&u, (const char *)t->data + 2 * i, 2);
        assert_int_equal(u, rlx_f32_to_bf16((float)i * 1.5f - 2.0f));
    }
    EXPECT_OK(rlx_safetensors_find(st, "i64", &t));
    int64_t v[4];
    memcpy(v, t->data, 32);
    assert_int_equal(v[0], -1);
    assert_int_equal(v[3], -4);
}

static void test_formats_py(void **state)
{
    (void)state;
    char path[1024];
    rlx_safetensors *st = NULL;
    snprintf(path, sizeof path, "%s/py_single.safetensors", py_dir);
    EXPECT_OK(rlx_safetensors_open(path, &st));
    check_py(st);
    rlx_safetensors_close(st);
    snprintf(path, sizeof path, "%s/py_sharded", py_dir);
    EXPECT_OK(rlx_safetensors_open(path, &st));
    assert_int_equal(rlx_safetensors_file_count(st), 2);
    check_py(st);
    rlx_safetensors_close(st);
    cJSON *cfg = NULL;
    EXPECT_OK(rlx_safetensors_read_config(path, &cfg));
    assert_int_equal(cJSON_GetObjectItem(cfg, "hidden_size")->valueint, 64);
    cJSON_Delete(cfg);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        py_dir = argv[1];
        const struct CMUnitTest py[] = {cmocka_unit_test(test_formats_py)};
        return cmocka_run_group_tests(py, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file),    cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_sharded_errors), cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_malformed),      cmocka_unit_test(test_view_read),
        cmocka_unit_test(test_weights_open),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else
int main(void)
{
    printf("SKIP: built without cJSON (libcjson-dev): no safetensors reader\n");
    return 77;
}
#endif
