/* tokenizer.c - construction from GGUF-style arrays, lookups, special
 * tokens, encode and decode.  The merge loop is in tok_bpe.c, normalizers
 * and the pre-tokenizer in tok_pretok.c, tokenizer.json in tok_hf.c, the
 * small containers they share in tok_util.c. */
#include "llm/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* ---- construction ---- */

void rlx_tokenizer_spec_init(rlx_tokenizer_spec *spec)
{
    if (!spec)
        return;
    memset(spec, 0, sizeof *spec);
    spec->bos_id = spec->eos_id = spec->unk_id = spec->pad_id = -1;
    spec->eot_id = spec->eom_id = -1;
    spec->add_space_prefix = 1;
}

void tok_config_free(tok_config *cfg)
{
    for (int i = 0; i < cfg->n_norm; i++) {
        free(cfg->norm[i].a);
        free(cfg->norm[i].b);
    }
    cfg->n_norm = 0;
}

void rlx_tokenizer_free(rlx_tokenizer *t)
{
    if (!t)
        return;
    tok_regex_free(t);
    tok_config_free(&t->cfg);
    free(t->blob);
    free(t->tokens);
    free(t->text_map.slot);
    free(t->key_map.slot);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.merged);
    free(t->special);
    free(t->eog);
    free(t);
}

/* GPT-2's map of bytes to printable characters: byte -> code point. */
static uint32_t byte_to_cp(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    int n = 0;
    for (int c = 0; c < b; c++)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
            n++;
    return 256u + (uint32_t)n;
}

/* Decodes one UTF-8 sequence at s (n bytes left); returns its length, 0 if invalid. */
static int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    int len = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!len || (size_t)len > n)
        return 0;
    uint32_t c = s[0] & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    *cp = c;
    return len;
}

static int hexval(int c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* "<0xAB>" -> 0xAB, else -1. */
static int byte_token_value(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int h = hexval((unsigned char)s[3]), l = hexval((unsigned char)s[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

static const char *const EOG_NAMES[] = {"<|eot_id|>",      "<|im_end|>", "<|endoftext|>",
                                        "<|end_of_text|>", "</s>",       "<end_of_turn>",
                                        "<|eom_id|>",      "<|end|>",    NULL};

static int cmp_special(const void *pa, const void *pb)
{
    const tok_special *a = pa, *b = pb;
    unsigned char ca = a->first, cb = b->first;
    if (ca != cb)
        return ca < cb ? -1 : 1;
    if (a->len != b->len)
        return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static rlx_status build_merges(rlx_tokenizer *t, const rlx_tokenizer_spec *spec)
{
    tok_pairmap *m = &t->merges;
    uint32_t cap = 16;
    while (cap < 2 * (uint64_t)spec->n_merges)
        cap *= 2;
    m->key = malloc(cap * sizeof *m->key);
    m->rank = malloc(cap * sizeof *m->rank);
    m->merged = malloc(cap * sizeof *m->merged);
    if (!m->key || !m->rank || !m->merged)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory for %lld merges",
                             (long long)spec->n_merges);
    memset(m->key, 0xff, cap * sizeof *m->key);
    m->mask = cap - 1;
    tok_buf tmp = {0};
    for (int64_t r = 0; r < spec->n_merges; r++) {
        const char *s = spec->merges[r];
        if (!s) {
            free(tmp.p);
            return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: merge %lld is NULL", (long long)r);
        }
        size_t n = spec->merge_lens ? spec->merge_lens[r] : strlen(s);
        const char *sp = memchr(s, ' ', n);
        if (!sp || sp == s || sp == s + n - 1) {
            free(tmp.p);
            return rlx_set_error(RLX_ERR_FORMAT, "tokenizer: merge %lld \"%.*s\" is not two pieces \"a b\"",
                                 (long long)r, (int)(n > 64 ? 64 : n), s);
        }
        /* Merges name pieces by their vocabulary strings. */
        int32_t a = tok_strmap_get(&t->text_map, t->blob, t->tokens, 0, s, (size_t)(sp - s));
        int32_t b = tok_strmap_get(&t->text_map, t->blob, t->tokens, 0, sp + 1, (size_t)(s + n - sp - 1));
        tmp.n = 0;
        if (tok_buf_append(&tmp, s, (size_t)(sp - s)) || tok_buf_append(&tmp, sp + 1, (size_t)(s + n - sp - 1))) {
            free(tmp.p);
            return RLX_ERR_OUT_OF_MEMORY;
        }
        int32_t c = tok_strmap_get(&t->text_map, t->blob, t->tokens, 0, tmp.p, tmp.n);
        if (a < 0 || b < 0 || c < 0)
            continue; /* a merge of pieces not in the vocabulary can never apply */
        uint64_t k = tok_pair_key(a, b);
        for (uint32_t i = (uint32_t)tok_hash(&k, sizeof k) & m->mask;; i = (i + 1) & m->mask) {
            if (m->key[i] == k)
                break; /* the first (best) rank stays */
            if (m->key[i] == UINT64_MAX) {
                m->key[i] = k;
                m->rank[i] = (int32_t)r;
                m->merged[i] = c;
                break;
            }
        }
    }
    free(tmp.p);
    return RLX_OK;
}

rlx_status tok_create(const rlx_tokenizer_spec *spec, tok_config *cfg, rlx_tokenizer **out)
{
    rlx_status st;
    rlx_tokenizer *t = rlx_calloc(1, sizeof *t);
    if (!t) {
        tok_config_free(cfg);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    t->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg); /* owned by t now */
    int64_t n = spec->n_tokens;
    if (n <= 0 || n > INT32_MAX / 2) {
        st = rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "tokenizer: %lld tokens (need 1 .. 2^30)", (long long)n);
        goto fail;
    }
    if (!spec->tokens) {
        st = rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "tokenizer: no token strings");
        goto fail;
    }
    t->n_vocab = (int32_t)n;
    t->tokens = rlx_calloc((size_t)n, sizeof *t->tokens);
    t->eog = rlx_calloc((size_t)n, 1);
    if (!t->tokens || !t->eog) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    uint32_t unicode_to_byte[512];
    memset(unicode_to_byte, 0xff, sizeof unicode_to_byte);
    for (int b = 0; b < 256; b++)
        unicode_to_byte[byte_to_cp(b)] = (uint32_t)b;

    tok_buf blob = {0};
    for (int64_t i = 0; i < n; i++) {
        const char *s = spec->tokens[i];
        if (!s) {
            free(blob.p);
            st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer: token %lld is NULL", (long long)i);
            goto fail;
        }
        size_t len = spec->token_lens ? spec->token_lens[i] : strlen(s);
        tok_token *tk = &t->tokens[i];
        int type = spec->token_types ? spec->token_types[i] : RLX_TOKEN_NORMAL;
        if (type < RLX_TOKEN_NORMAL || type > RLX_TOKEN_BYTE)
            type = RLX_TOKEN_NORMAL;
        int bv = byte_token_value(s, len);
        if (!t->cfg.byte_level && bv >= 0 && (type == RLX_TOKEN_BYTE || !spec->token_types))
            type = RLX_TOKEN_BYTE;
        tk->type = (uint8_t)type;
        tk->score = spec->scores ? spec->scores[i] : 0.0f;
        if (blob.n + 2 * len + 8 > UINT32_MAX) {
            free(blob.p);
            st = rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer: vocabulary strings over 4 GiB");
            goto fail;
        }
        tk->text_off = (uint32_t)blob.n;
        tk->text_len = (uint32_t)len;
        if (tok_buf_append(&blob, s, len) || tok_buf_append(&blob, "", 1)) {
            free(blob.p);
            st = RLX_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        tk->raw_off = (uint32_t)blob.n;
        int plain = type == RLX_TOKEN_CONTROL || type == RLX_TOKEN_USER_DEFINED || type == RLX_TOKEN_UNKNOWN;
        if (t->cfg.byte_level && !plain) {
            /* the bytes behind GPT-2's printable characters; a string
             * outside that alphabet stands for itself */
            size_t start = blob.n;
            int ok = 1;
            for (size_t j = 0; j < len && ok;) {
                uint32_t cp;
                int l = utf8_decode((const uint8_t *)s + j, len - j, &cp);
                if (!l || cp >= 512 || unicode_to_byte[cp] == 0xffffffffu) {
                    ok = 0;
                    break;
                }
                char c = (char)unicode_to_byte[cp];
                if (tok_buf_append(&blob, &c, 1)) {
                    free(blob.p);
                    st = RLX_ERR_OUT_OF_MEMORY;
                    goto fail;
                }
                j += (size_t)l;
            }
            if (!ok) {
                blob.n = start;
                if (tok_buf_append(&blob, s, len)) {
                    free(blob.p);
                    st = RLX_ERR_OUT_OF_MEMORY;
                    goto fail;
                }
            }
        } else if (!t->cfg.byte_level && type == RLX_TOKEN_BYTE && bv >= 0) {
            char c = (char)bv;
            if (tok_buf_append(&blob, &c, 1)) {
                free(blob.p);
                st = RLX_ERR_OUT_OF_MEMORY;
                goto fail;
            }
        } else if (!t->cfg.byte_level && !plain) {
            /* U+2581 stands for a space */
            for (size_t j = 0; j < len;) {
                int sp = j + 3 <= len && memcmp(s + j, "\xe2\x96\x81", 3) == 0;
                if (tok_buf_append(&blob, sp ? " " : s + j, 1)) {
                    free(blob.p);
                    st = RLX_ERR_OUT_OF_MEMORY;
                    goto fail;
                }
                j += sp ? 3 : 1;
            }
        } else if (tok_buf_append(&blob, s, len)) {
            free(blob.p);
            st = RLX_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        tk->raw_len = (uint32_t)(blob.n - tk->raw_off);
    }
    t->blob = blob.p;
    t->blob_len = blob.n;

    /* lookups */
    if (tok_strmap_init(&t->text_map, (size_t)n) || tok_strmap_init(&t->key_map, (size_t)n)) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tok_strmap_put(&t->text_map, t->blob, t->tokens, 0, i);
        int ty = t->tokens[i].type;
        if (ty == RLX_TOKEN_NORMAL || ty == RLX_TOKEN_BYTE || ty == RLX_TOKEN_USER_DEFINED)
            if (!(ty == RLX_TOKEN_BYTE && !t->cfg.byte_level)) /* <0xXX> are reached by fallback */
                tok_strmap_put(&t->key_map, t->blob, t->tokens, !!t->cfg.byte_level, i);
    }
    for (int b = 0; b < 256; b++)
        t->byte_id[b] = -1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tok_token *tk = &t->tokens[i];
        if (t->cfg.byte_level) {
            if (tk->raw_len == 1 && (tk->type == RLX_TOKEN_NORMAL || tk->type == RLX_TOKEN_BYTE)) {
                unsigned char b = (unsigned char)t->blob[tk->raw_off];
                if (t->byte_id[b] < 0)
                    t->byte_id[b] = i;
            }
        } else if (tk->type == RLX_TOKEN_BYTE) {
            unsigned char b = (unsigned char)t->blob[tk->raw_off];
            if (t->byte_id[b] < 0)
                t->byte_id[b] = i;
        }
    }

    /* merges, or merging by score */
    if (spec->n_merges < 0 || spec->n_merges > INT32_MAX / 4) {
        st = rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "tokenizer: %lld merges (need 0 .. 2^29)",
                           (long long)spec->n_merges);
        goto fail;
    }
    if (spec->merges && spec->n_merges > 0) {
        if ((st = build_merges(t, spec)) != RLX_OK)
            goto fail;
    } else if (t->cfg.byte_level && !spec->merges) { /* a present, empty list: no merges (bytes stay tokens) */
        st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer: a byte-level BPE tokenizer needs merges");
        goto fail;
    } else {
        t->cfg.use_scores = 1;
    }

    /* ids */
    int32_t *ids[] = {&t->bos, &t->eos, &t->unk, &t->pad, &t->eot, &t->eom};
    int32_t given[] = {spec->bos_id, spec->eos_id, spec->unk_id, spec->pad_id, spec->eot_id, spec->eom_id};
    static const char *const names[] = {"bos", "eos", "unk", "pad", "eot", "eom"};
    for (int k = 0; k < 6; k++) {
        if (given[k] >= t->n_vocab) {
            st = rlx_set_error(RLX_ERR_FORMAT, "tokenizer: %s id %d is out of range (%d tokens)", names[k], given[k],
                               t->n_vocab);
            goto fail;
        }
        *ids[k] = given[k] < 0 ? -1 : given[k];
    }
    t->add_bos = spec->add_bos && t->bos >= 0;
    t->add_eos = spec->add_eos && t->eos >= 0;

    /* special tokens, matched in text */
    int ns = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        int ty = t->tokens[i].type;
        if ((ty == RLX_TOKEN_CONTROL || ty == RLX_TOKEN_USER_DEFINED || ty == RLX_TOKEN_UNKNOWN) &&
            t->tokens[i].text_len > 0)
            ns++;
    }
    t->special = rlx_calloc((size_t)ns + 1, sizeof *t->special);
    if (!t->special) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tok_token *tk = &t->tokens[i];
        int ty = tk->type;
        if ((ty == RLX_TOKEN_CONTROL || ty == RLX_TOKEN_USER_DEFINED || ty == RLX_TOKEN_UNKNOWN) && tk->text_len > 0)
            t->special[t->n_special++] = (tok_special){i,
                                                       tk->text_off,
                                                       tk->text_len,
                                                       ty == RLX_TOKEN_USER_DEFINED,
                                                       0,
                                                       0,
                                                       (unsigned char)t->blob[tk->text_off]};
    }
    qsort(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special);
    for (int b = 0, k = 0; b <= 256; b++) {
        while (k < t->n_special && t->special[k].first < b)
            k++;
        t->special_start[b] = k;
    }

    /* end of generation */
    for (int k = 1; k < 6; k++)
        if (k != 2 && k != 3 && *ids[k] >= 0)
            t->eog[*ids[k]] = 1;
    for (int k = 0; EOG_NAMES[k]; k++) {
        int32_t id = rlx_tokenizer_token_id(t, EOG_NAMES[k], strlen(EOG_NAMES[k]));
        if (id >= 0 && t->tokens[id].type == RLX_TOKEN_CONTROL)
            t->eog[id] = 1;
    }

    if (t->cfg.regex && (st = tok_regex_compile(t, t->cfg.regex)) != RLX_OK)
        goto fail;
    *out = t;
    return RLX_OK;
fail:
    rlx_tokenizer_free(t);
    return st;
}

rlx_status rlx_tokenizer_from_arrays(const rlx_tokenizer_spec *spec, rlx_tokenizer **out)
{
    if (!spec || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_from_arrays: NULL argument");
    *out = NULL;
    tok_config cfg = {0};
    const char *model = spec->model ? spec->model : "";
    if (strcmp(model, "gpt2") == 0) {
        const char *pre = spec->pre ? spec->pre : "default";
        cfg.byte_level = 1;
        cfg.regex = tok_pre_regex(pre, &cfg.ignore_merges);
        if (!cfg.regex)
            return rlx_set_error(RLX_ERR_UNSUPPORTED,
                                 "tokenizer: pre-tokenizer \"%s\" (tokenizer.ggml.pre) is not supported; known: "
                                 "default, gpt2, gpt-2, llama3, llama-bpe, llama-v3, qwen2, qwen3, "
                                 "deepseek-r1-qwen, smaug-bpe, olmo, mpt, jais, dbrx",
                                 pre);
    } else if (strcmp(model, "llama") == 0) {
        cfg.byte_fallback = 1;
        if (spec->add_space_prefix) {
            cfg.norm[cfg.n_norm++] = (tok_norm){TOK_NORM_PREPEND, rlx_strdup(" "), NULL, 1, 0, 0, 0};
            if (!cfg.norm[0].a)
                return RLX_ERR_OUT_OF_MEMORY;
            cfg.strip_leading_space = 1;
        }
        char *a = rlx_strdup(" "), *b = rlx_strdup("\xe2\x96\x81");
        if (!a || !b) {
            free(a);
            free(b);
            tok_config_free(&cfg);
            return RLX_ERR_OUT_OF_MEMORY;
        }
        cfg.norm[cfg.n_norm++] = (tok_norm){TOK_NORM_REPLACE, a, b, 1, 3, 0, 0};
    } else {
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "tokenizer: model \"%s\" (tokenizer.ggml.model) is not supported; known: gpt2 "
                             "(byte-level BPE), llama (SentencePiece BPE)",
                             model);
    }
    rlx_status st = tok_create(spec, &cfg, out);
    if (st == RLX_OK && cfg.byte_level)
        snprintf((*out)->pre, sizeof(*out)->pre, "%s", spec->pre ? spec->pre : "default");
    return st;
}

/* ---- getters ---- */

int32_t rlx_tokenizer_n_vocab(const rlx_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t rlx_tokenizer_bos(const rlx_tokenizer *t) { return t ? t->bos : -1; }
int32_t rlx_tokenizer_eos(const rlx_tokenizer *t) { return t ? t->eos : -1; }
int32_t rlx_tokenizer_unk(const rlx_tokenizer *t) { return t ? t->unk : -1; }
int32_t rlx_tokenizer_pad(const rlx_tokenizer *t) { return t ? t->pad : -1; }
int rlx_tokenizer_add_bos(const rlx_tokenizer *t) { return t ? t->add_bos : 0; }

int32_t rlx_tokenizer_token_id(const rlx_tokenizer *t, const char *s, size_t len)
{
    if (!t || !s)
        return -1;
    return tok_strmap_get(&t->text_map, t->blob, t->tokens, 0, s, len);
}

const char *rlx_tokenizer_token_text(const rlx_tokenizer *t, int32_t id)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return NULL;
    return t->blob + t->tokens[id].text_off;
}

int rlx_tokenizer_token_type(const rlx_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab ? t->tokens[id].type : 0;
}

int rlx_tokenizer_is_special(const rlx_tokenizer *t, int32_t id)
{
    return rlx_tokenizer_token_type(t, id) == RLX_TOKEN_CONTROL;
}

int rlx_tokenizer_is_eog(const rlx_tokenizer *t, int32_t id) { return t && id >= 0 && id < t->n_vocab && t->eog[id]; }

/* ---- encode ---- */

typedef struct enc_ctx {
    const rlx_tokenizer *t;
    tok_scratch *sc;
    tok_ivec *out;
} enc_ctx;

static rlx_status enc_piece(void *p, const char *s, size_t n)
{
    enc_ctx *c = p;
    return tok_bpe_word(c->t, (const uint8_t *)s, n, c->sc, c->out);
}

static rlx_status encode_section(const rlx_tokenizer *t, const char *s, size_t n, int at_start, tok_buf *norm,
                                 enc_ctx *c)
{
    if (n == 0)
        return RLX_OK;
    const char *p = s;
    size_t pn = n;
    if (t->cfg.n_norm > 0) {
        rlx_status st = tok_normalize(t, s, n, at_start, norm);
        if (st != RLX_OK)
            return st;
        p = norm->p;
        pn = norm->n;
    }
    /* ByteLevel's add_prefix_space, after the normalizers */
    if (t->cfg.prefix_space && pn > 0 && p[0] != ' ') {
        tok_buf tmp = {0};
        if (tok_buf_append(&tmp, " ", 1) || tok_buf_append(&tmp, p, pn)) {
            free(tmp.p);
            return RLX_ERR_OUT_OF_MEMORY;
        }
        free(norm->p);
        *norm = tmp;
        p = norm->p;
        pn = norm->n;
    }
    if (pn == 0)
        return RLX_OK;
    return tok_pretokenize(t, p, pn, enc_piece, c);
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

rlx_status rlx_tokenizer_encode(const rlx_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t *ids,
                                int cap, int *n_out)
{
    if (!t || (!text && len) || !n_out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_encode: NULL argument");
    *n_out = 0;
    if (cap < 0 || (cap > 0 && !ids))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_encode: capacity %d with %s ids", cap,
                             ids ? "an" : "no");
    tok_ivec out = {0};
    tok_buf norm = {0};
    enc_ctx c = {t, tok_scratch_new(), &out};
    rlx_status st = RLX_OK;
    if (!c.sc) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if ((flags & RLX_TOK_ADD_SPECIAL) && t->add_bos && tok_ivec_push(&out, t->bos)) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto done;
    }
    int parse = !!(flags & RLX_TOK_PARSE_SPECIAL);
    size_t seg = 0, pos = 0;
    while (pos < len) {
        unsigned char b = (unsigned char)text[pos];
        const tok_special *hit = NULL;
        for (int k = t->special_start[b]; k < t->special_start[b + 1]; k++) {
            const tok_special *sp = &t->special[k];
            if ((sp->always || parse) && sp->len <= len - pos && memcmp(text + pos, t->blob + sp->off, sp->len) == 0) {
                hit = sp;
                break;
            }
        }
        if (!hit) {
            pos++;
            continue;
        }
        size_t end = pos;
        if (hit->lstrip)
            while (end > seg && is_ws(text[end - 1]))
                end--;
        if ((st = encode_section(t, text + seg, end - seg, seg == 0, &norm, &c)) != RLX_OK)
            goto done;
        if (tok_ivec_push(&out, hit->id)) {
            st = RLX_ERR_OUT_OF_MEMORY;
            goto done;
        }
        pos += hit->len;
        if (hit->rstrip)
            while (pos < len && is_ws(text[pos]))
                pos++;
        seg = pos;
    }
    if ((st = encode_section(t, text + seg, len - seg, seg == 0, &norm, &c)) != RLX_OK)
        goto done;
    if ((flags & RLX_TOK_ADD_SPECIAL) && t->add_eos && tok_ivec_push(&out, t->eos)) {
        st = RLX_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (out.n > (size_t)INT32_MAX) {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED, "rlx_tokenizer_encode: %zu tokens do not fit an int", out.n);
        goto done;
    }
    *n_out = (int)out.n;
    if (out.n > (size_t)cap)
        st = rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_encode: the text needs %zu ids, capacity %d", out.n,
                           cap);
    else if (out.n)
        memcpy(ids, out.v, out.n * sizeof *ids);
done:
    tok_scratch_free(c.sc);
    free(out.v);
    free(norm.p);
    return st;
}

/* ---- decode ---- */

static rlx_status piece_of(const rlx_tokenizer *t, int32_t id, unsigned flags, const char **p, size_t *n)
{
    if (id < 0 || id >= t->n_vocab)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "tokenizer: token id %d is out of range (%d tokens)", id,
                             t->n_vocab);
    const tok_token *tk = &t->tokens[id];
    if ((flags & RLX_TOK_DECODE_SKIP_SPECIAL) && tk->type == RLX_TOKEN_CONTROL) {
        *p = "";
        *n = 0;
        return RLX_OK;
    }
    *p = t->blob + tk->raw_off;
    *n = tk->raw_len;
    if ((flags & RLX_TOK_DECODE_FIRST) && t->cfg.strip_leading_space && *n > 0 && **p == ' ') {
        (*p)++;
        (*n)--;
    }
    return RLX_OK;
}

rlx_status rlx_tokenizer_token_piece(const rlx_tokenizer *t, int32_t id, unsigned flags, char *out, size_t cap,
                                     size_t *len_out)
{
    if (!t || !len_out || (cap && !out))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_token_piece: NULL argument");
    *len_out = 0;
    const char *p = "";
    size_t n = 0;
    rlx_status st = piece_of(t, id, flags, &p, &n);
    if (st != RLX_OK)
        return st;
    *len_out = n;
    if (n > cap)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_token_piece: %zu bytes needed, capacity %zu", n,
                             cap);
    if (n)
        memcpy(out, p, n);
    if (n < cap)
        out[n] = '\0';
    return RLX_OK;
}

rlx_status rlx_tokenizer_decode_ex(const rlx_tokenizer *t, const int32_t *ids, int n, unsigned flags, char *out,
                                   size_t cap, size_t *len_out)
{
    if (!t || !len_out || (n > 0 && !ids) || (cap && !out) || n < 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_decode: NULL argument or negative count");
    *len_out = 0;
    size_t total = 0;
    int first = 1;
    for (int i = 0; i < n; i++) {
        const char *p = "";
        size_t pn = 0;
        rlx_status st = piece_of(
            t, ids[i], (flags & ~(unsigned)RLX_TOK_DECODE_FIRST) | (first ? RLX_TOK_DECODE_FIRST : 0), &p, &pn);
        if (st != RLX_OK)
            return rlx_set_error(st, "rlx_tokenizer_decode: ids[%d] = %d is out of range (%d tokens)", i, ids[i],
                                 t->n_vocab);
        if (first && (flags & RLX_TOK_DECODE_SKIP_SPECIAL) && t->tokens[ids[i]].type == RLX_TOKEN_CONTROL)
            continue; /* a skipped token does not start the text */
        first = 0;
        if (total + pn <= cap && pn)
            memcpy(out + total, p, pn);
        total += pn;
    }
    *len_out = total;
    if (total > cap)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_decode: %zu bytes needed, capacity %zu", total,
                             cap);
    if (total < cap)
        out[total] = '\0';
    return RLX_OK;
}

rlx_status rlx_tokenizer_decode(const rlx_tokenizer *t, const int32_t *ids, int n, char *out, size_t cap,
                                size_t *len_out)
{
    return rlx_tokenizer_decode_ex(t, ids, n, 0, out, cap, len_out);
}
