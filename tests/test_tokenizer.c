/* The LLM tokenizers (src/llm) on small handmade vocabularies: byte-level
 * BPE merges, every byte value and invalid UTF-8 round-tripping, special
 * and user-defined tokens in text, BOS/EOS, SentencePiece-style merging by
 * score with byte fallback and unknown tokens, streaming pieces, buffer
 * sizes, long inputs, tokenizer.json configurations, and the errors for
 * malformed vocabularies and ids.  Real vocabularies against independent
 * encoders: tests/llm/run_refs.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/error.h"
#include "llm/tokenizer.h"

static int msg_has(const char *w)
{
    const char *m = rlx_last_error();
    if (!m || !strstr(m, w)) {
        fprintf(stderr, "error message \"%s\" does not mention \"%s\"\n", m ? m : "", w);
        return 0;
    }
    return 1;
}

/* ---- a tiny byte-level vocabulary ---- */

/* GPT-2's printable stand-in for byte b, as UTF-8 into out; returns its length. */
static int byte_char(int b, char *out)
{
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    unsigned cp = (unsigned)b;
    if (!printable) {
        int n = 0;
        for (int c = 0; c < b; c++)
            if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
                n++;
        cp = 256u + (unsigned)n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

enum { BL_HE = 256, BL_LL, BL_HELL, BL_HELLO, BL_GW, BL_END, BL_THINK, BL_N };

static rlx_tokenizer *byte_level_pre(int add_bos, int with_bytes, const char *pre)
{
    static char bytes[256][3];
    const char *tokens[BL_N];
    int32_t types[BL_N];
    for (int b = 0; b < 256; b++) {
        int n = byte_char(b, bytes[b]);
        bytes[b][n] = '\0';
        tokens[b] = bytes[b];
        types[b] = with_bytes || (b >= 'a' && b <= 'z') || b == ' ' ? RLX_TOKEN_NORMAL : RLX_TOKEN_UNUSED;
    }
    tokens[BL_HE] = "he", tokens[BL_LL] = "ll", tokens[BL_HELL] = "hell", tokens[BL_HELLO] = "hello";
    tokens[BL_GW] = "\xc4\xa0w"; /* "Ġw": " w" */
    tokens[BL_END] = "<|end|>", tokens[BL_THINK] = "<think>";
    for (int i = 256; i < BL_N; i++)
        types[i] = RLX_TOKEN_NORMAL;
    types[BL_END] = RLX_TOKEN_CONTROL;
    types[BL_THINK] = RLX_TOKEN_USER_DEFINED;
    const char *merges[] = {"h e", "l l", "he ll", "hell o", "\xc4\xa0 w"};
    rlx_tokenizer_spec spec;
    rlx_tokenizer_spec_init(&spec);
    spec.model = "gpt2";
    spec.pre = pre;
    spec.n_tokens = BL_N;
    spec.tokens = tokens;
    spec.token_types = types;
    spec.merges = merges;
    spec.n_merges = 5;
    spec.bos_id = spec.eos_id = BL_END;
    spec.add_bos = add_bos;
    rlx_tokenizer *t = NULL;
    if (rlx_tokenizer_from_arrays(&spec, &t) != RLX_OK)
        fprintf(stderr, "byte-level vocabulary: %s\n", rlx_last_error());
    return t;
}

static rlx_tokenizer *byte_level(int add_bos, int with_bytes) { return byte_level_pre(add_bos, with_bytes, "gpt2"); }

static int encode(const rlx_tokenizer *t, const char *s, size_t n, unsigned flags, int32_t *ids, int cap)
{
    int got = -1;
    rlx_status st = rlx_tokenizer_encode(t, s, n, flags, ids, cap, &got);
    if (st != RLX_OK)
        fprintf(stderr, "encode: %s\n", rlx_last_error());
    assert_int_equal(st, RLX_OK);
    return got;
}

/* decode(encode(s)) == s, and the pieces add up to the decode */
static void assert_round_trip(const rlx_tokenizer *t, const char *s, size_t n, unsigned flags)
{
    int cap = (int)n + 8;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    char *out = malloc(n + 16), *pieces = malloc(n + 16);
    int got = encode(t, s, n, flags, ids, cap);
    size_t len = 0, plen = 0;
    assert_int_equal(rlx_tokenizer_decode(t, ids, got, out, n + 16, &len), RLX_OK);
    assert_int_equal(len, n);
    assert_memory_equal(out, s, n);
    for (int i = 0; i < got; i++) {
        size_t l = 0;
        assert_int_equal(
            rlx_tokenizer_token_piece(t, ids[i], i ? 0 : RLX_TOK_DECODE_FIRST, pieces + plen, n + 16 - plen, &l),
            RLX_OK);
        plen += l;
    }
    assert_int_equal(plen, n);
    assert_memory_equal(pieces, s, n);
    free(ids);
    free(out);
    free(pieces);
}

static void test_byte_level_merges(void **state)
{
    (void)state;
    rlx_tokenizer *t = byte_level(0, 1);
    assert_non_null(t);
    int32_t ids[64];
    assert_int_equal(encode(t, "hello", 5, 0, ids, 64), 1);
    assert_int_equal(ids[0], BL_HELLO);
    /* " world": the regex keeps the space with the word; "Ġ w" merges */
    int n = encode(t, "hello world", 11, 0, ids, 64);
    assert_int_equal(n, 6);
    assert_int_equal(ids[0], BL_HELLO);
    assert_int_equal(ids[1], BL_GW);
    assert_int_equal(ids[2], 'o');
    /* "hell" then "o": rank order, not left to right */
    n = encode(t, "hellhe", 6, 0, ids, 64);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], BL_HELL);
    assert_int_equal(ids[1], BL_HE);
    assert_int_equal(encode(t, "", 0, 0, ids, 64), 0);
    assert_int_equal(rlx_tokenizer_n_vocab(t), BL_N);
    assert_int_equal(rlx_tokenizer_token_id(t, "hello", 5), BL_HELLO);
    assert_int_equal(rlx_tokenizer_token_id(t, "nope", 4), -1);
    assert_string_equal(rlx_tokenizer_token_text(t, BL_GW), "\xc4\xa0w");
    assert_null(rlx_tokenizer_token_text(t, BL_N));
    rlx_tokenizer_free(t);
}

static void test_byte_level_any_bytes(void **state)
{
    (void)state;
    rlx_tokenizer *t = byte_level(0, 1);
    assert_non_null(t);
    char all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (char)i;
    assert_round_trip(t, all, 256, 0);
    /* invalid UTF-8: stray continuation bytes, a cut sequence, overlong, NUL */
    static const char bad[] = "ab\x80\xbf cd\xc3 \xe2\x82\xf0\x9f\x98 \xc0\xaf\xff\xfe\0x hello\xed\xa0\x80";
    assert_round_trip(t, bad, sizeof bad - 1, 0);
    const char *mixed = "hello world \xf0\x9f\x98\x80  \t\n\n end ";
    assert_round_trip(t, mixed, strlen(mixed), 0);
    /* a byte with no token and no unknown token is an error naming it */
    rlx_tokenizer *u = byte_level(0, 0);
    assert_non_null(u);
    int32_t ids[16];
    int got = 0;
    assert_int_equal(rlx_tokenizer_encode(u, "a1", 2, 0, ids, 16, &got), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("0x31"));
    rlx_tokenizer_free(u);
    rlx_tokenizer_free(t);
}

static void test_special_tokens(void **state)
{
    (void)state;
    rlx_tokenizer *t = byte_level(1, 1);
    assert_non_null(t);
    int32_t ids[64];
    const char *s = "hello<|end|>he";
    int n = encode(t, s, strlen(s), RLX_TOK_PARSE_SPECIAL, ids, 64);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], BL_HELLO);
    assert_int_equal(ids[1], BL_END);
    assert_int_equal(ids[2], BL_HE);
    /* without parsing, the control token is text */
    n = encode(t, s, strlen(s), 0, ids, 64);
    assert_true(n > 3);
    for (int i = 0; i < n; i++)
        assert_int_not_equal(ids[i], BL_END);
    assert_round_trip(t, s, strlen(s), 0);
    assert_round_trip(t, s, strlen(s), RLX_TOK_PARSE_SPECIAL);
    /* a user-defined token is matched either way */
    n = encode(t, "he<think>", 9, 0, ids, 64);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], BL_THINK);
    /* BOS on request */
    n = encode(t, "he", 2, RLX_TOK_ADD_SPECIAL, ids, 64);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], BL_END);
    assert_int_equal(rlx_tokenizer_bos(t), BL_END);
    assert_true(rlx_tokenizer_is_special(t, BL_END));
    assert_false(rlx_tokenizer_is_special(t, BL_THINK));
    assert_true(rlx_tokenizer_is_eog(t, BL_END));
    assert_false(rlx_tokenizer_is_eog(t, BL_HE));
    assert_false(rlx_tokenizer_is_eog(t, -1));
    /* skipping specials when decoding */
    int32_t seq[] = {BL_END, BL_HE, BL_END};
    char out[32];
    size_t len = 0;
    assert_int_equal(rlx_tokenizer_decode_ex(t, seq, 3, RLX_TOK_DECODE_SKIP_SPECIAL, out, sizeof out, &len), RLX_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(out, "he", 2);
    assert_int_equal(rlx_tokenizer_decode(t, seq, 3, out, sizeof out, &len), RLX_OK);
    assert_string_equal(out, "<|end|>he<|end|>");
    rlx_tokenizer_free(t);
}

static void test_buffers_and_ids(void **state)
{
    (void)state;
    rlx_tokenizer *t = byte_level(0, 1);
    assert_non_null(t);
    int32_t ids[4];
    int got = 0;
    /* the count needed, with no buffer and with a short one */
    assert_int_equal(rlx_tokenizer_encode(t, "abcde", 5, 0, NULL, 0, &got), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(got, 5);
    assert_int_equal(rlx_tokenizer_encode(t, "abcde", 5, 0, ids, 4, &got), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(got, 5);
    assert_true(msg_has("5 ids"));
    assert_int_equal(rlx_tokenizer_encode(NULL, "a", 1, 0, ids, 4, &got), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_tokenizer_encode(t, NULL, 1, 0, ids, 4, &got), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_tokenizer_encode(t, NULL, 0, 0, ids, 4, &got), RLX_OK);
    assert_int_equal(got, 0);
    /* decode: ids out of range, short buffers */
    char out[8];
    size_t len = 0;
    int32_t bad[] = {BL_HE, BL_N};
    assert_int_equal(rlx_tokenizer_decode(t, bad, 2, out, sizeof out, &len), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("ids[1]"));
    int32_t neg[] = {-3};
    assert_int_equal(rlx_tokenizer_decode(t, neg, 1, out, sizeof out, &len), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(rlx_tokenizer_token_piece(t, 1 << 30, 0, out, sizeof out, &len), RLX_ERR_INVALID_ARGUMENT);
    int32_t many[] = {BL_HELLO, BL_HELLO};
    assert_int_equal(rlx_tokenizer_decode(t, many, 2, out, sizeof out, &len), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(len, 10);
    assert_int_equal(rlx_tokenizer_decode(t, many, 2, NULL, 0, &len), RLX_ERR_INVALID_ARGUMENT);
    assert_int_equal(len, 10);
    assert_int_equal(rlx_tokenizer_decode(t, many, 0, out, sizeof out, &len), RLX_OK);
    assert_int_equal(len, 0);
    /* a piece may be part of a UTF-8 sequence: U+00E9 is two byte tokens */
    int n = encode(t, "\xc3\xa9", 2, 0, (int32_t[4]){0}, 4);
    assert_int_equal(n, 2);
    rlx_tokenizer_free(t);
}

/* ---- a tiny SentencePiece-style vocabulary ---- */

static rlx_tokenizer *spm(int with_bytes, int with_unk, int use_merges)
{
    /* 0 <unk>, 1 <s>, 2 </s>, 3..258 <0xXX>, then pieces */
    enum { N = 3 + 256 + 8 };
    static char byte_tok[256][8];
    const char *tokens[N];
    int32_t types[N];
    float scores[N];
    tokens[0] = "<unk>", tokens[1] = "<s>", tokens[2] = "</s>";
    types[0] = RLX_TOKEN_UNKNOWN, types[1] = types[2] = RLX_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(byte_tok[b], sizeof byte_tok[b], "<0x%02X>", b);
        tokens[3 + b] = byte_tok[b];
        types[3 + b] = with_bytes ? RLX_TOKEN_BYTE : RLX_TOKEN_UNUSED;
    }
    const char *pieces[] = {"\xe2\x96\x81",   "h",  "i", "\xe2\x96\x81h",
                            "\xe2\x96\x81hi", "hi", "a", "\xe2\x96\x81\xe2\x96\x81"};
    float ps[] = {-1, -2, -3, -4, -5, -6, -7, -8};
    for (int i = 0; i < 259; i++)
        scores[i] = 0;
    for (int i = 0; i < 8; i++) {
        tokens[259 + i] = pieces[i];
        types[259 + i] = RLX_TOKEN_NORMAL;
        scores[259 + i] = ps[i];
    }
    const char *merges[] = {"\xe2\x96\x81 h", "\xe2\x96\x81h i", "h i", "\xe2\x96\x81 \xe2\x96\x81"};
    rlx_tokenizer_spec spec;
    rlx_tokenizer_spec_init(&spec);
    spec.model = "llama";
    spec.n_tokens = N;
    spec.tokens = tokens;
    spec.token_types = types;
    spec.scores = scores;
    if (use_merges) {
        spec.merges = merges;
        spec.n_merges = 4;
    }
    spec.unk_id = with_unk ? 0 : -1;
    spec.bos_id = 1;
    spec.eos_id = 2;
    spec.add_bos = 1;
    rlx_tokenizer *t = NULL;
    if (rlx_tokenizer_from_arrays(&spec, &t) != RLX_OK)
        fprintf(stderr, "SentencePiece vocabulary: %s\n", rlx_last_error());
    return t;
}

static void test_spm_byte_fallback(void **state)
{
    (void)state;
    for (int use_merges = 0; use_merges < 2; use_merges++) {
        rlx_tokenizer *t = spm(1, 1, use_merges);
        assert_non_null(t);
        int32_t ids[64];
        /* "hi" -> "▁hi" */
        int n = encode(t, "hi", 2, RLX_TOK_ADD_SPECIAL, ids, 64);
        assert_int_equal(n, 2);
        assert_int_equal(ids[0], 1);
        assert_int_equal(ids[1], 259 + 4);
        /* "hi é": é is not a piece -> its two bytes */
        n = encode(t, "hi \xc3\xa9", 5, 0, ids, 64);
        assert_int_equal(n, 4);
        assert_int_equal(ids[0], 259 + 4);
        assert_int_equal(ids[1], 259 + 0);
        assert_int_equal(ids[2], 3 + 0xc3);
        assert_int_equal(ids[3], 3 + 0xa9);
        /* decode drops the prepended space; pieces give the same */
        assert_round_trip(t, "hi \xc3\xa9", 5, 0);
        assert_round_trip(t, " hi  hi\n\xf0\x9f\x98\x80", 12, 0);
        assert_round_trip(t, "", 0, 0);
        assert_round_trip(t, "\xff\xfe", 2, 0); /* invalid UTF-8 still round-trips through byte tokens */
        char out[64];
        size_t len = 0;
        int32_t seq[] = {1, 259 + 4, 259 + 4};
        assert_int_equal(rlx_tokenizer_decode(t, seq, 3, out, sizeof out, &len), RLX_OK);
        assert_string_equal(out, "<s> hi hi");
        assert_int_equal(rlx_tokenizer_decode_ex(t, seq, 3, RLX_TOK_DECODE_SKIP_SPECIAL, out, sizeof out, &len),
                         RLX_OK);
        assert_string_equal(out, "hi hi");
        /* specials written in the text */
        n = encode(t, "hi</s>", 6, RLX_TOK_PARSE_SPECIAL, ids, 64);
        assert_int_equal(n, 2);
        assert_int_equal(ids[1], 2);
        rlx_tokenizer_free(t);
    }
}

static void test_spm_unknown(void **state)
{
    (void)state;
    /* no byte tokens: unknown characters become <unk> */
    rlx_tokenizer *t = spm(0, 1, 1);
    assert_non_null(t);
    int32_t ids[16];
    int n = encode(t, "hi \xc3\xa9", 5, 0, ids, 16);
    assert_int_equal(n, 3);
    assert_int_equal(ids[2], 0);
    assert_int_equal(rlx_tokenizer_unk(t), 0);
    rlx_tokenizer_free(t);
    /* and without <unk> either: an error that names the text */
    t = spm(0, 0, 1);
    assert_non_null(t);
    int got = 0;
    assert_int_equal(rlx_tokenizer_encode(t, "hi \xc3\xa9", 5, 0, ids, 16, &got), RLX_ERR_INVALID_ARGUMENT);
    assert_true(msg_has("0xc3"));
    rlx_tokenizer_free(t);
}

static void test_long_inputs(void **state)
{
    (void)state;
    size_t n = 1 << 20;
    char *s = malloc(n);
    rlx_tokenizer *bl = byte_level(0, 1), *sp = spm(1, 1, 0);
    assert_non_null(bl);
    assert_non_null(sp);
    /* one 1 MiB word, 1 MiB of spaces, and a mix: each well under a second
     * in a release build (the merge loop is O(n log n)) */
    for (int kind = 0; kind < 3; kind++) {
        for (size_t i = 0; i < n; i++)
            s[i] = kind == 0 ? "hel"[i % 3] : kind == 1 ? ' ' : "hello world \t\n\xc3\xa9!"[i % 16];
        double t0 = rlx_now_ms();
        assert_round_trip(bl, s, n, 0);
        double t1 = rlx_now_ms();
        assert_round_trip(sp, s, n, 0);
        double t2 = rlx_now_ms();
        fprintf(stderr, "1 MiB text %d: byte-level %.0f ms, SentencePiece %.0f ms\n", kind, t1 - t0, t2 - t1);
    }
    rlx_tokenizer_free(bl);
    rlx_tokenizer_free(sp);
    /* the three pre-tokenizer regexes on runs that make a backtracking
     * matcher work hard: whitespace before a letter, newlines mixed with
     * spaces, punctuation, digits, apostrophes, emoji */
    static const char *const pres[] = {"gpt2", "llama3", "qwen2"};
    static const char *const units[] = {" ", " \n", "\t \r\n", "!?", "0123456789", "'s'", "\xf0\x9f\x98\x80"};
    size_t m = 256 << 10;
    for (int p = 0; p < 3; p++) {
        rlx_tokenizer *t = byte_level_pre(0, 1, pres[p]);
        assert_non_null(t);
        double t0 = rlx_now_ms();
        for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
            size_t ul = strlen(units[u]), k = 0;
            while (k + ul <= m - 1) {
                memcpy(s + k, units[u], ul);
                k += ul;
            }
            s[k++] = 'x';
            assert_round_trip(t, s, k, 0);
        }
        fprintf(stderr, "pre-tokenizer %s: 7 texts of 256 KiB in %.0f ms\n", pres[p], rlx_now_ms() - t0);
        rlx_tokenizer_free(t);
    }
    free(s);
}

static void test_malformed_arrays(void **state)
{
    (void)state;
    const char *tokens[] = {"a", "b", "ab"};
    const char *merges[] = {"a b"}, *bad_merge[] = {"ab"};
    rlx_tokenizer_spec spec;
    rlx_tokenizer *t = (rlx_tokenizer *)&spec; /* must come back NULL */
    rlx_tokenizer_spec_init(&spec);
    spec.model = "bert";
    spec.n_tokens = 3;
    spec.tokens = tokens;
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_UNSUPPORTED);
    assert_null(t);
    assert_true(msg_has("bert"));
    spec.model = "gpt2";
    spec.pre = "no-such-pre";
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("no-such-pre"));
    spec.pre = "qwen2";
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_FORMAT); /* byte-level without merges */
    assert_true(msg_has("merges"));
    spec.merges = bad_merge;
    spec.n_merges = 1;
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_FORMAT);
    assert_true(msg_has("\"ab\""));
    spec.merges = merges;
    spec.bos_id = 7;
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_FORMAT);
    assert_true(msg_has("bos id 7"));
    spec.bos_id = -1;
    spec.n_tokens = 0;
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_INVALID_ARGUMENT);
    spec.n_tokens = 3;
    const char *with_null[] = {"a", NULL, "ab"};
    spec.tokens = with_null;
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_ERR_FORMAT);
    assert_true(msg_has("token 1"));
    assert_int_equal(rlx_tokenizer_from_arrays(NULL, &t), RLX_ERR_INVALID_ARGUMENT);
    /* lengths instead of NUL-terminated strings, merges too */
    const char *raw[] = {"axx", "bxx", "abx"};
    size_t lens[] = {1, 1, 2};
    const char *rm[] = {"a bzzz"};
    size_t rml[] = {3};
    spec.tokens = raw;
    spec.token_lens = lens;
    spec.merges = rm;
    spec.merge_lens = rml;
    assert_int_equal(rlx_tokenizer_from_arrays(&spec, &t), RLX_OK);
    int32_t ids[4];
    assert_int_equal(encode(t, "ab", 2, 0, ids, 4), 1);
    assert_int_equal(ids[0], 2);
    rlx_tokenizer_free(t);
    rlx_tokenizer_free(NULL);
    assert_int_equal(rlx_tokenizer_n_vocab(NULL), 0);
}

/* ---- tokenizer.json ---- */

static const char HF_HEAD[] =
    "{\"added_tokens\": [{\"id\": 5, \"content\": \"<|x|>\", \"special\": true}],"
    " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2, \"\xc4\xa0\": 3, \"\xc4\xa0"
    "ab\": 4},"
    " \"merges\": [[\"a\", \"b\"], \"\xc4\xa0 ab\"]},";

static rlx_status hf(const char *tail, rlx_tokenizer **t)
{
    size_t n = strlen(HF_HEAD) + strlen(tail) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%s%s", HF_HEAD, tail);
    rlx_status st = rlx_tokenizer_from_hf_json_text(s, strlen(s), NULL, t);
    free(s);
    return st;
}

static void test_hf_json(void **state)
{
    (void)state;
    rlx_tokenizer *t = NULL;
    const char *ok =
        "\"normalizer\": {\"type\": \"NFC\"}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\":"
        " [{\"type\": \"Split\", \"pattern\": {\"Regex\": \"\\\\s?\\\\p{L}+|\\\\s+\"}, \"behavior\": "
        "\"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]},"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\":"
        " \"<|x|>\"}}, {\"Sequence\": {\"id\": \"A\"}}]}, \"decoder\": {\"type\": \"ByteLevel\"}}";
    if (hf(ok, &t) != RLX_OK)
        fprintf(stderr, "%s\n", rlx_last_error());
    assert_non_null(t);
    int32_t ids[8];
    int n = encode(t, "ab ab<|x|>", 10, RLX_TOK_ADD_SPECIAL | RLX_TOK_PARSE_SPECIAL, ids, 8);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 5);
    assert_int_equal(ids[1], 2);
    assert_int_equal(ids[2], 4);
    assert_int_equal(ids[3], 5);
    assert_int_equal(rlx_tokenizer_bos(t), 5);
    assert_int_equal(rlx_tokenizer_n_vocab(t), 6); /* the vocabulary and the added token */
    rlx_tokenizer_free(t);

    /* ByteLevel's add_prefix_space: "ab" is encoded as " ab" */
    const char *prefix = "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": true}}";
    assert_int_equal(hf(prefix, &t), RLX_OK);
    n = encode(t, "ab", 2, 0, ids, 8);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 4);
    n = encode(t, " ab", 3, 0, ids, 8);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 4);
    rlx_tokenizer_free(t);

    /* unsupported components are named */
    struct {
        const char *tail, *word;
        rlx_status st;
    } bad[] = {
        {"\"normalizer\": {\"type\": \"Lowercase\"}}", "Lowercase", RLX_ERR_UNSUPPORTED},
        {"\"pre_tokenizer\": {\"type\": \"Whitespace\"}}", "Whitespace", RLX_ERR_UNSUPPORTED},
        {"\"decoder\": {\"type\": \"WordPiece\"}}", "WordPiece", RLX_ERR_UNSUPPORTED},
        {"\"post_processor\": {\"type\": \"BertProcessing\"}}", "BertProcessing", RLX_ERR_UNSUPPORTED},
        {"\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"(\"}, \"behavior\": \"Isolated\"}, {\"type\": \"ByteLevel\", \"use_regex\": false}]}}",
         "regex", RLX_ERR_UNSUPPORTED},
        {"\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Isolated\"}}",
         "without ByteLevel", RLX_ERR_UNSUPPORTED},
        {"\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"a\"}, \"behavior\": \"Removed\"}}",
         "Removed", RLX_ERR_UNSUPPORTED},
        {"\"normalizer\": null", "JSON", RLX_ERR_FORMAT}, /* cut short */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = NULL;
        rlx_status st = hf(bad[i].tail, &t);
        if (st != bad[i].st)
            fprintf(stderr, "case %zu: %s\n", i, rlx_last_error());
        assert_int_equal(st, bad[i].st);
        assert_null(t);
        assert_true(msg_has(bad[i].word));
    }
    const char *wordpiece = "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}";
    assert_int_equal(rlx_tokenizer_from_hf_json_text(wordpiece, strlen(wordpiece), NULL, &t), RLX_ERR_UNSUPPORTED);
    assert_true(msg_has("WordPiece"));
    const char *badid = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -4}, \"merges\": []}}";
    assert_int_equal(rlx_tokenizer_from_hf_json_text(badid, strlen(badid), NULL, &t), RLX_ERR_FORMAT);
    assert_int_equal(rlx_tokenizer_from_hf_json("/nonexistent/tokenizer.json", &t), RLX_ERR_IO);
    assert_true(msg_has("/nonexistent/tokenizer.json"));
}

static void test_hf_spm_json(void **state)
{
    (void)state;
    /* Llama 2's configuration: Prepend + Replace normalizers, byte fallback,
     * the Replace/ByteFallback/Fuse/Strip decoder, and a config's BOS */
    const char *json =
        "{\"added_tokens\": [{\"id\": 0, \"content\": \"<unk>\", \"special\": true},"
        " {\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
        " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"Prepend\", \"prepend\": "
        "\"\xe2\x96\x81\"},"
        " {\"type\": \"Replace\", \"pattern\": {\"String\": \" \"}, \"content\": \"\xe2\x96\x81\"}]},"
        " \"pre_tokenizer\": null,"
        " \"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": {\"String\": "
        "\"\xe2\x96\x81\"}, \"content\": \" \"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Fuse\"}, {\"type\": "
        "\"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}]},"
        " \"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"byte_fallback\": true, \"fuse_unk\": true,"
        " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"<0x21>\": 2, \"\xe2\x96\x81\": 3, \"x\": 4, \"\xe2\x96\x81x\": 5},"
        " \"merges\": [\"\xe2\x96\x81 x\"]}}";
    const char *conf = "{\"bos_token\": {\"content\": \"<s>\"}, \"add_bos_token\": true}";
    rlx_tokenizer *t = NULL;
    if (rlx_tokenizer_from_hf_json_text(json, strlen(json), conf, &t) != RLX_OK)
        fprintf(stderr, "%s\n", rlx_last_error());
    assert_non_null(t);
    int32_t ids[16];
    /* "x !yz": ▁x ▁ <0x21> then y and z unknown, fused into one <unk> */
    int n = encode(t, "x !yz", 5, RLX_TOK_ADD_SPECIAL, ids, 16);
    assert_int_equal(n, 5);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 5);
    assert_int_equal(ids[2], 3);
    assert_int_equal(ids[3], 2);
    assert_int_equal(ids[4], 0);
    assert_round_trip(t, "x x! x", 6, 0);
    assert_true(rlx_tokenizer_add_bos(t));
    rlx_tokenizer_free(t);

    /* the Metaspace form (Mistral's later files): U+2581 prepended only to
     * the text's first section and only when not there already */
    const char *meta =
        "{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\", \"special\": true}],"
        " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", \"prepend_scheme\": "
        "\"first\", \"split\": false},"
        " \"decoder\": {\"type\": \"Metaspace\", \"replacement\": \"\xe2\x96\x81\", \"prepend_scheme\": \"first\"},"
        " \"model\": {\"type\": \"BPE\", \"byte_fallback\": true,"
        " \"vocab\": {\"<unk>\": 0, \"<s>\": 1, \"\xe2\x96\x81\": 2, \"x\": 3, \"\xe2\x96\x81x\": 4},"
        " \"merges\": [\"\xe2\x96\x81 x\"]}}";
    assert_int_equal(rlx_tokenizer_from_hf_json_text(meta, strlen(meta), NULL, &t), RLX_OK);
    n = encode(t, "x x", 3, 0, ids, 16);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 4);
    assert_int_equal(ids[1], 4);
    n = encode(t, " x", 2, 0, ids, 16);
    assert_int_equal(n, 1);
    assert_int_equal(ids[0], 4);
    n = encode(t, "<s>x", 4, RLX_TOK_PARSE_SPECIAL, ids, 16);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 3);
    assert_round_trip(t, "x x", 3, 0);
    rlx_tokenizer_free(t);
}

/* Every prefix and many one-byte changes of a valid tokenizer.json: an
 * error or a tokenizer, never a crash (ASan checks the reads). */
static void test_hf_json_damaged(void **state)
{
    (void)state;
    const char *tail = "\"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}]},"
                       " \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"decoder\": {\"type\": \"ByteLevel\"}}";
    size_t n = strlen(HF_HEAD) + strlen(tail);
    char *full = malloc(n + 1), *s = malloc(n + 1);
    snprintf(full, n + 1, "%s%s", HF_HEAD, tail);
    rlx_tokenizer *t = NULL;
    assert_int_equal(rlx_tokenizer_from_hf_json_text(full, n, NULL, &t), RLX_OK);
    rlx_tokenizer_free(t);
    int ok = 0;
    for (size_t k = 0; k < n; k++) {
        t = NULL;
        if (rlx_tokenizer_from_hf_json_text(full, k, NULL, &t) == RLX_OK)
            ok++;
        rlx_tokenizer_free(t);
    }
    assert_int_equal(ok, 0);
    static const char subst[] = "\"{}[],:0-9 x\\";
    uint32_t r = 12345;
    for (int k = 0; k < 3000; k++) {
        memcpy(s, full, n + 1);
        r = r * 1103515245u + 12345u;
        size_t at = (r >> 8) % n;
        r = r * 1103515245u + 12345u;
        s[at] = subst[(r >> 8) % (sizeof subst - 1)];
        t = NULL;
        rlx_status st = rlx_tokenizer_from_hf_json_text(s, n, NULL, &t);
        if (st == RLX_OK) {
            /* what loads must still work */
            int32_t ids[32];
            int got = 0;
            rlx_tokenizer_encode(t, "ab ab\xff", 6, RLX_TOK_PARSE_SPECIAL, ids, 32, &got);
            rlx_tokenizer_free(t);
        } else {
            assert_null(t);
            assert_true(rlx_last_error()[0] != '\0');
        }
    }
    free(full);
    free(s);
}

/* Random byte strings round-trip through byte-level BPE; random ids decode
 * to their pieces' concatenation. */
static void test_random_round_trips(void **state)
{
    (void)state;
    rlx_tokenizer *t = byte_level(0, 1), *sp = spm(1, 1, 1);
    assert_non_null(t);
    assert_non_null(sp);
    uint32_t r = 777;
    char s[200], a[4096], b[4096];
    for (int k = 0; k < 2000; k++) {
        r = r * 1103515245u + 12345u;
        size_t n = (r >> 8) % sizeof s;
        for (size_t i = 0; i < n; i++) {
            r = r * 1103515245u + 12345u;
            /* mostly letters, spaces and UTF-8 lead/continuation bytes */
            static const char pool[] = "hel o wr\t\n\xc3\xa9\xe2\x96\x81\xf0\x9f\x98\x80'sx1";
            s[i] = (r >> 20) & 1 ? (char)(r >> 8) : pool[(r >> 8) % (sizeof pool - 1)];
        }
        assert_round_trip(t, s, n, k & 1 ? RLX_TOK_PARSE_SPECIAL : 0);
        int32_t ids[64];
        for (int i = 0; i < 64; i++) {
            r = r * 1103515245u + 12345u;
            ids[i] = (int32_t)((r >> 8) % (uint32_t)rlx_tokenizer_n_vocab(sp));
        }
        size_t la = 0, lb = 0;
        assert_int_equal(rlx_tokenizer_decode(sp, ids, 64, a, sizeof a, &la), RLX_OK);
        for (int i = 0; i < 64; i++) {
            size_t l = 0;
            assert_int_equal(
                rlx_tokenizer_token_piece(sp, ids[i], i ? 0 : RLX_TOK_DECODE_FIRST, b + lb, sizeof b - lb, &l), RLX_OK);
            lb += l;
        }
        assert_int_equal(la, lb);
        assert_memory_equal(a, b, la);
    }
    rlx_tokenizer_free(t);
    rlx_tokenizer_free(sp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byte_level_merges), cmocka_unit_test(test_byte_level_any_bytes),
        cmocka_unit_test(test_special_tokens),    cmocka_unit_test(test_buffers_and_ids),
        cmocka_unit_test(test_spm_byte_fallback), cmocka_unit_test(test_spm_unknown),
        cmocka_unit_test(test_long_inputs),       cmocka_unit_test(test_malformed_arrays),
        cmocka_unit_test(test_hf_json),           cmocka_unit_test(test_hf_spm_json),
        cmocka_unit_test(test_hf_json_damaged),   cmocka_unit_test(test_random_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
