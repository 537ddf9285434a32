/* tok_pretok.c - normalizers (NFC, prepend, replace) and the pre-tokenizer:
 * a split regex (PCRE2, Unicode properties, JIT) whose matches and the text
 * between them become the pieces BPE runs on, or Metaspace's split before
 * each U+2581. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "llm/tok_internal.h"

/* GPT-2's pattern (as in OpenAI's encoder). */
const char TOK_REGEX_GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Llama 3's: case-insensitive contractions, numbers in groups of three. */
static const char REGEX_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* Qwen2's (and Qwen3's): Llama 3's with one digit per piece. */
static const char REGEX_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const char *tok_pre_regex(const char *pre, int *ignore_merges)
{
    static const char *const gpt2[] = {"default", "gpt2", "gpt-2", "mpt", "olmo", NULL};
    static const char *const llama3[] = {"llama3", "llama-bpe", "llama-v3", "smaug-bpe", NULL};
    static const char *const qwen2[] = {"qwen2", "qwen3", "deepseek-r1-qwen", NULL};
    *ignore_merges = 0;
    for (int i = 0; gpt2[i]; i++)
        if (strcmp(pre, gpt2[i]) == 0)
            return TOK_REGEX_GPT2;
    for (int i = 0; llama3[i]; i++)
        if (strcmp(pre, llama3[i]) == 0) {
            *ignore_merges = 1;
            return REGEX_LLAMA3;
        }
    for (int i = 0; qwen2[i]; i++)
        if (strcmp(pre, qwen2[i]) == 0)
            return REGEX_QWEN2;
    return NULL;
}

const char *tok_pre_name(const char *regex)
{
    static const char *const names[] = {"gpt-2", "llama-bpe", "qwen2"};
    int im;
    for (int i = 0; regex && i < 3; i++)
        if (strcmp(regex, tok_pre_regex(names[i], &im)) == 0)
            return names[i];
    return NULL;
}

rlx_status tok_regex_compile(rlx_tokenizer *t, const char *pattern)
{
    int err;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer regex \"%s\" does not compile at %zu: %s",
                             pattern, (size_t)at, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    t->re = re;
    return RLX_OK;
}

void tok_regex_free(rlx_tokenizer *t)
{
    pcre2_code_free((pcre2_code *)t->re);
    t->re = NULL;
}

static rlx_status nfc(const char *s, size_t n, tok_buf *out)
{
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t m =
        utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    int bad = m < 0;
    /* invalid UTF-8 stays as it is: its bytes still round-trip */
    int rc = bad ? tok_buf_append(out, s, n) : tok_buf_append(out, dst, (size_t)m);
    free(dst);
    return rc ? RLX_ERR_OUT_OF_MEMORY : RLX_OK;
}

rlx_status tok_normalize(const rlx_tokenizer *t, const char *s, size_t n, int at_start, tok_buf *out)
{
    tok_buf a = {0}, b = {0};
    out->n = 0;
    if (tok_buf_append(&a, s, n))
        return RLX_ERR_OUT_OF_MEMORY;
    rlx_status st = RLX_OK;
    for (int i = 0; i < t->cfg.n_norm && st == RLX_OK; i++) {
        const tok_norm *op = &t->cfg.norm[i];
        b.n = 0;
        if (op->kind == TOK_NORM_NFC) {
            st = nfc(a.p, a.n, &b);
        } else if (op->kind == TOK_NORM_PREPEND) {
            int present = a.n >= op->alen && memcmp(a.p, op->a, op->alen) == 0;
            int add = a.n && (at_start || !op->first_only) && !(op->if_absent && present);
            if ((add && tok_buf_append(&b, op->a, op->alen)) || tok_buf_append(&b, a.p, a.n))
                st = RLX_ERR_OUT_OF_MEMORY;
        } else if (op->kind == TOK_NORM_REPLACE) {
            size_t j = 0;
            while (j < a.n && st == RLX_OK) {
                if (op->alen && j + op->alen <= a.n && memcmp(a.p + j, op->a, op->alen) == 0) {
                    if (tok_buf_append(&b, op->b, op->blen))
                        st = RLX_ERR_OUT_OF_MEMORY;
                    j += op->alen;
                } else {
                    size_t k = j + 1;
                    while (k < a.n && (!op->alen || (unsigned char)a.p[k] != (unsigned char)op->a[0]))
                        k++;
                    if (tok_buf_append(&b, a.p + j, k - j))
                        st = RLX_ERR_OUT_OF_MEMORY;
                    j = k;
                }
            }
        }
        tok_buf tmp = a;
        a = b;
        b = tmp;
    }
    if (st == RLX_OK && tok_buf_append(out, a.p ? a.p : "", a.n))
        st = RLX_ERR_OUT_OF_MEMORY;
    free(a.p);
    free(b.p);
    return st;
}

static rlx_status split_regex(const rlx_tokenizer *t, const char *s, size_t n, tok_piece_fn fn, void *ctx)
{
    const pcre2_code *re = t->re;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (regex match data)");
    rlx_status st = RLX_OK;
    size_t off = 0, last = 0;
    while (off < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, 0, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its stack on the heap */
            rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = rlx_set_error(RLX_ERR_RUNTIME, "tokenizer: pre-tokenizer regex failed at byte %zu: %s", off,
                               (const char *)msg);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* an empty match: step over one byte */
            off = ms + 1;
            continue;
        }
        if (ms > last && (st = fn(ctx, s + last, ms - last)) != RLX_OK)
            break;
        if ((st = fn(ctx, s + ms, me - ms)) != RLX_OK)
            break;
        last = off = me;
    }
    if (st == RLX_OK && last < n)
        st = fn(ctx, s + last, n - last);
    pcre2_match_data_free(md);
    return st;
}

rlx_status tok_pretokenize(const rlx_tokenizer *t, const char *s, size_t n, tok_piece_fn fn, void *ctx)
{
    if (t->re)
        return split_regex(t, s, n, fn, ctx);
    if (t->cfg.metaspace_split) {
        size_t start = 0;
        for (size_t i = 1; i + 3 <= n; i++)
            if (memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                rlx_status st = fn(ctx, s + start, i - start);
                if (st != RLX_OK)
                    return st;
                start = i;
            }
        return fn(ctx, s + start, n - start);
    }
    return fn(ctx, s, n);
}
