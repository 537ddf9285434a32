/* tokenizer.h - text <-> token ids for decoder LLMs.
 *
 * Two model kinds:
 *   byte-level BPE ("gpt2": GPT-2, Qwen2/Qwen3, Llama 3): text is split by a
 *     pre-tokenizer regex, each piece's UTF-8 bytes are merged by ranked
 *     merges; every byte string round-trips exactly, valid UTF-8 or not.
 *   SentencePiece-style BPE with byte fallback ("llama": Llama 2, Mistral):
 *     spaces become U+2581, an optional one is prepended, characters merge by
 *     ranked merges (or, without merges, by the scores of the merged pieces);
 *     a character missing from the vocabulary becomes its <0xXX> byte tokens.
 *
 * Built from the arrays a GGUF file stores (tokenizer.ggml.*) or from a
 * Hugging Face tokenizer.json.  Every call reports failure through
 * rlx_set_error (rlx_last_error()) and a status; nothing aborts.
 * A tokenizer is read-only after construction: calls on one tokenizer may run
 * on several threads at once. */
#ifndef RLX_LLM_TOKENIZER_H
#define RLX_LLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

typedef struct rlx_tokenizer rlx_tokenizer;

/* GGUF's tokenizer.ggml.token_type values. */
enum {
    RLX_TOKEN_NORMAL = 1,
    RLX_TOKEN_UNKNOWN = 2,
    RLX_TOKEN_CONTROL = 3,      /* special: <s>, <|endoftext|>, ... */
    RLX_TOKEN_USER_DEFINED = 4, /* added tokens matched in text as they are */
    RLX_TOKEN_UNUSED = 5,
    RLX_TOKEN_BYTE = 6 /* <0xXX> */
};

/* The arrays as GGUF stores them.  Strings need not be NUL-terminated when
 * their lengths are given.  Nothing is kept: the tokenizer copies. */
typedef struct rlx_tokenizer_spec {
    const char *model; /* tokenizer.ggml.model: "gpt2" or "llama" */
    const char *pre;   /* tokenizer.ggml.pre, for "gpt2": the split regex.  GPT-2's for
                                     NULL, "default", "gpt2", "gpt-2", "mpt", "olmo"; Llama 3's
                                     (and ignore_merges) for "llama3", "llama-bpe", "llama-v3",
                                     "smaug-bpe"; Qwen2's for "qwen2", "qwen3", "deepseek-r1-qwen";
                                     another name is an error.  Unused for "llama". */
    int64_t n_tokens;
    const char *const *tokens;  /* tokenizer.ggml.tokens */
    const size_t *token_lens;   /* NULL: tokens are NUL-terminated */
    const float *scores;        /* tokenizer.ggml.scores, or NULL */
    const int32_t *token_types; /* tokenizer.ggml.token_type, or NULL (all normal) */
    int64_t n_merges;
    const char *const *merges;              /* tokenizer.ggml.merges "a b", or NULL */
    const size_t *merge_lens;               /* NULL: merges are NUL-terminated */
    int32_t bos_id, eos_id, unk_id, pad_id; /* -1: none */
    int32_t eot_id, eom_id;                 /* end of turn / message, -1: none (end generation too) */
    int add_bos, add_eos;                   /* what RLX_TOK_ADD_SPECIAL adds */
    int add_space_prefix;                   /* "llama": prepend one space to each text section */
} rlx_tokenizer_spec;

/* Every id -1, flags 0, add_space_prefix 1, the rest NULL/0. */
void rlx_tokenizer_spec_init(rlx_tokenizer_spec *spec);

rlx_status rlx_tokenizer_from_arrays(const rlx_tokenizer_spec *spec, rlx_tokenizer **out);

/* A Hugging Face tokenizer.json.  When a tokenizer_config.json sits beside
 * it, its bos/eos/pad/unk tokens and add_bos_token/add_eos_token are read too. */
rlx_status rlx_tokenizer_from_hf_json(const char *path, rlx_tokenizer **out);
/* The same from the text of a tokenizer.json (config_json may be NULL). */
rlx_status rlx_tokenizer_from_hf_json_text(const char *json, size_t len, const char *config_json, rlx_tokenizer **out);

void rlx_tokenizer_free(rlx_tokenizer *tok);

/* encode flags */
enum {
    RLX_TOK_ADD_SPECIAL = 1,  /* add BOS/EOS as the tokenizer asks (add_bos/add_eos) */
    RLX_TOK_PARSE_SPECIAL = 2 /* control tokens written in the text become their ids;
                                  without it they are encoded as plain text.
                                  User-defined added tokens are always matched. */
};

/* Encodes len bytes of text (any bytes; NUL is allowed).  On success writes
 * *n_out ids.  When cap is too small (ids may be NULL with cap 0) nothing is
 * guaranteed in ids, *n_out is the count needed and the status is
 * RLX_ERR_INVALID_ARGUMENT. */
rlx_status rlx_tokenizer_encode(const rlx_tokenizer *tok, const char *text, size_t len, unsigned flags, int32_t *ids,
                                int cap, int *n_out);

/* decode/piece flags */
enum {
    RLX_TOK_DECODE_SKIP_SPECIAL = 1, /* control tokens produce nothing */
    RLX_TOK_DECODE_FIRST = 2         /* the piece starts the text: the leading space a
                                        SentencePiece tokenizer prepended is dropped */
};

/* The bytes of ids[0..n), control tokens included, as text: for every x
 * (after the tokenizer's normalization) decode(encode(x)) == x.
 * out may be NULL with cap 0; *len_out is always the full length; when it
 * does not fit (plus no NUL: out is not terminated) the status is
 * RLX_ERR_INVALID_ARGUMENT.  An id out of range is an error. */
rlx_status rlx_tokenizer_decode(const rlx_tokenizer *tok, const int32_t *ids, int n, char *out, size_t cap,
                                size_t *len_out);
rlx_status rlx_tokenizer_decode_ex(const rlx_tokenizer *tok, const int32_t *ids, int n, unsigned flags, char *out,
                                   size_t cap, size_t *len_out);

/* The bytes one token adds to the text, for streaming: a piece may end
 * inside a UTF-8 sequence.  Concatenating piece(ids[0], RLX_TOK_DECODE_FIRST)
 * and piece(ids[i], 0) for i >= 1 gives exactly decode(ids). */
rlx_status rlx_tokenizer_token_piece(const rlx_tokenizer *tok, int32_t id, unsigned flags, char *out, size_t cap,
                                     size_t *len_out);

int32_t rlx_tokenizer_n_vocab(const rlx_tokenizer *tok);
int32_t rlx_tokenizer_bos(const rlx_tokenizer *tok); /* -1: none */
int32_t rlx_tokenizer_eos(const rlx_tokenizer *tok);
int32_t rlx_tokenizer_unk(const rlx_tokenizer *tok);
int32_t rlx_tokenizer_pad(const rlx_tokenizer *tok);
int rlx_tokenizer_add_bos(const rlx_tokenizer *tok);
/* The id of the token whose vocabulary string (as stored: "Ġthe", "▁the",
 * "<|im_end|>") is s, or -1. */
int32_t rlx_tokenizer_token_id(const rlx_tokenizer *tok, const char *s, size_t len);
/* The vocabulary string of id (NUL-terminated), or NULL when out of range. */
const char *rlx_tokenizer_token_text(const rlx_tokenizer *tok, int32_t id);
int rlx_tokenizer_token_type(const rlx_tokenizer *tok, int32_t id); /* 0 when out of range */
/* A control token (BOS, EOS, <|im_start|>, ...). */
int rlx_tokenizer_is_special(const rlx_tokenizer *tok, int32_t id);
/* Ends generation: EOS, EOT, EOM, and control tokens named like one
 * (<|eot_id|>, <|im_end|>, <|endoftext|>, <|end_of_text|>, </s>, <end_of_turn>, <|eom_id|>). */
int rlx_tokenizer_is_eog(const rlx_tokenizer *tok, int32_t id);

/* A tokenizer as the tokenizer.ggml.* arrays of a GGUF file, for writing
 * one (tok_export.c).  Strings point into the tokenizer (tokens) or into
 * the arrays' own memory (merges); free with rlx_tokenizer_arrays_free. */
typedef struct rlx_tokenizer_arrays {
    const char *model; /* "gpt2" or "llama" */
    const char *pre;   /* "gpt2": the pre-tokenizer's name; NULL when no GGUF name fits its regex */
    int64_t n_tokens;
    const char **tokens;
    size_t *token_lens;
    float *scores;
    int32_t *token_types;
    int64_t n_merges;
    char **merges; /* "a b", by rank */
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id, eom_id;
    int add_bos, add_eos, add_space_prefix;
} rlx_tokenizer_arrays;
rlx_status rlx_tokenizer_export(const rlx_tokenizer *tok, rlx_tokenizer_arrays *out);
void rlx_tokenizer_arrays_free(rlx_tokenizer_arrays *a);

#endif
