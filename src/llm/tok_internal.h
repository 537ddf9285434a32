/* tok_internal.h - the tokenizer's representation, shared by its files:
 * tokenizer.c (construction, special tokens, encode/decode), tok_bpe.c (the
 * merge loop), tok_pretok.c (normalizers and the pre-tokenizer regex),
 * tok_hf.c (tokenizer.json), tok_util.c (the small containers). */
#ifndef RLX_LLM_TOK_INTERNAL_H
#define RLX_LLM_TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "llm/tokenizer.h"

/* An open-addressing table: byte string -> token id, over the strings of
 * the tokenizer's blob (keys are not copied). */
typedef struct tok_strmap {
    int32_t *slot; /* id or -1 */
    uint32_t mask;
} tok_strmap;

/* (left id, right id) -> merge rank and merged id. */
typedef struct tok_pairmap {
    uint64_t *key; /* UINT64_MAX: empty */
    int32_t *rank, *merged;
    uint32_t mask;
} tok_pairmap;

typedef struct tok_token {
    uint32_t text_off, text_len; /* the vocabulary string, as stored */
    uint32_t raw_off, raw_len;   /* the bytes it stands for in text */
    float score;
    uint8_t type; /* RLX_TOKEN_* */
} tok_token;

typedef struct tok_special {
    int32_t id;
    uint32_t off, len; /* in the blob: the text matched */
    int always;        /* user-defined: matched without RLX_TOK_PARSE_SPECIAL */
    int lstrip, rstrip;
    unsigned char first; /* its first byte */
} tok_special;

enum { TOK_NORM_NFC = 1, TOK_NORM_PREPEND, TOK_NORM_REPLACE };
typedef struct tok_norm {
    int kind;
    char *a, *b; /* PREPEND: a; REPLACE: a -> b */
    size_t alen, blen;
    int first_only; /* PREPEND: only to the text's first section (Metaspace's "first") */
    int if_absent;  /* PREPEND: only when the text does not start with it (Metaspace) */
} tok_norm;

#define TOK_MAX_NORM 8

/* What a tokenizer does beyond its vocabulary: derived from the GGUF model
 * and pre names, or read from tokenizer.json. */
typedef struct tok_config {
    int byte_level;      /* byte-level BPE (else SentencePiece-style) */
    const char *regex;   /* pre-tokenizer split pattern (PCRE2 syntax), NULL: none */
    int prefix_space;    /* ByteLevel add_prefix_space: a space before text not starting with one */
    int metaspace_split; /* split the normalized text before each U+2581 */
    int ignore_merges;   /* a piece found whole in the vocabulary is one token */
    int byte_fallback;   /* unknown characters become <0xXX> tokens */
    int fuse_unk;        /* consecutive unknown characters become one unk */
    int use_scores;      /* no merges: merge by the score of the merged piece */
    int n_norm;
    tok_norm norm[TOK_MAX_NORM];
    int strip_leading_space; /* decoder: drop one space at the start of the text */
} tok_config;

struct rlx_tokenizer {
    tok_config cfg;
    char *blob;
    size_t blob_len;
    int32_t n_vocab;
    tok_token *tokens;
    tok_strmap text_map; /* vocabulary string -> id */
    tok_strmap key_map;  /* raw bytes (byte-level) or text (SentencePiece) -> id, for BPE */
    tok_pairmap merges;
    int32_t byte_id[256]; /* byte-level: the token of one byte; SentencePiece: <0xXX> */
    tok_special *special; /* sorted by first byte, then longest first */
    int n_special;
    int special_start[257]; /* special[special_start[b] .. special_start[b+1]) begin with b */
    int32_t bos, eos, unk, pad, eot, eom;
    int add_bos, add_eos;
    uint8_t *eog; /* per id */
    void *re;     /* pcre2_code_8 */
    char pre[24]; /* byte-level: the GGUF tokenizer.ggml.pre naming its regex ("" when none does) */
};

/* A growable id vector. */
typedef struct tok_ivec {
    int32_t *v;
    size_t n, cap;
} tok_ivec;
int tok_ivec_push(tok_ivec *a, int32_t x);

/* A growable byte buffer. */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;
int tok_buf_append(tok_buf *b, const void *s, size_t n);

uint64_t tok_hash(const void *s, size_t n);
int32_t tok_strmap_get(const tok_strmap *m, const char *blob, const tok_token *tokens, int use_raw, const void *s,
                       size_t n);
int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged);
/* Building the maps (tokenizer.c builds them): room for n entries, then one per id. */
int tok_strmap_init(tok_strmap *m, size_t n);
void tok_strmap_put(tok_strmap *m, const char *blob, const tok_token *tokens, int use_raw, int32_t id);
uint64_t tok_pair_key(int32_t a, int32_t b);

/* tok_bpe.c: the ids of one pre-token, appended to out. */
typedef struct tok_scratch tok_scratch;
tok_scratch *tok_scratch_new(void);
void tok_scratch_free(tok_scratch *sc);
rlx_status tok_bpe_word(const rlx_tokenizer *t, const uint8_t *s, size_t n, tok_scratch *sc, tok_ivec *out);

/* tok_pretok.c */
rlx_status tok_regex_compile(rlx_tokenizer *t, const char *pattern);
void tok_regex_free(rlx_tokenizer *t);
/* Applies the normalizers to s[0..n) into out (replacing its contents);
 * at_start: s begins the whole text (no special token before it). */
rlx_status tok_normalize(const rlx_tokenizer *t, const char *s, size_t n, int at_start, tok_buf *out);
/* Splits s[0..n) into pieces, calling fn on each in order. */
typedef rlx_status (*tok_piece_fn)(void *ctx, const char *s, size_t n);
rlx_status tok_pretokenize(const rlx_tokenizer *t, const char *s, size_t n, tok_piece_fn fn, void *ctx);
/* The pattern GGUF's tokenizer.ggml.pre names, NULL when unknown. */
const char *tok_pre_regex(const char *pre, int *ignore_merges);
/* The GGUF pre name of a split pattern (one of tok_pre_regex's), NULL when none. */
const char *tok_pre_name(const char *regex);
extern const char TOK_REGEX_GPT2[];

/* tokenizer.c: the common constructor; takes ownership of cfg's normalizer strings. */
rlx_status tok_create(const rlx_tokenizer_spec *spec, tok_config *cfg, rlx_tokenizer **out);
void tok_config_free(tok_config *cfg);

#endif
