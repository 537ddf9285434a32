/* tok_compare - RLX's tokenizers against reference ids from independent
 * encoders (tests/llm/make_refs.js), text by text, and the round trip
 * decode(encode(x)) == x with the per-token pieces adding up to the decode.
 *
 *   tok_compare NAME SOURCE CORPUS REFS [--parse-special] [--nfc-only] [--special-refs FILE] [--long]
 *   SOURCE: json:PATH                  a tokenizer.json
 *           arrays:PATH:MODEL:PRE      the same file's vocabulary and merges
 *                                      given as GGUF stores them
 *           arrays:PATH:llama:PRE:scores  no merges but scores: the piece
 *                                      merge r makes scores -r (SentencePiece's
 *                                      scores are what such merges come from)
 *           gpt2:ENCODER_JSON:VOCAB_BPE  OpenAI's GPT-2 files, as GGUF arrays
 * --nfc-only: texts that NFC changes are left out (a GGUF tokenizer does not
 * normalize).  --special-refs: the first texts' ids with BOS/EOS added as
 * the tokenizer's files ask (RLX_TOK_ADD_SPECIAL).  --long: the whole corpus
 * three times over as one text (1.2 MB) must round-trip.  Prints the
 * counts; exits 1 on any difference. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "llm/tokenizer.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) {
        b[n] = '\0';
        *len = (size_t)n;
    }
    return b;
}

typedef struct arrays {
    char **tokens;
    int32_t *types;
    int64_t n;
    char **merges;
    int64_t n_merges;
} arrays;

static void arrays_free(arrays *a)
{
    for (int64_t i = 0; i < a->n; i++)
        free(a->tokens[i]);
    for (int64_t i = 0; i < a->n_merges; i++)
        free(a->merges[i]);
    free(a->tokens);
    free(a->types);
    free(a->merges);
}

static char *dup(const char *s) { return strcpy(malloc(strlen(s) + 1), s); }

/* vocab object + added tokens -> arrays by id */
static int vocab_arrays(const cJSON *vocab, const cJSON *added, arrays *a)
{
    const cJSON *it;
    int64_t n = 0;
    cJSON_ArrayForEach(it, vocab) if (it->valueint + 1 > n) n = it->valueint + 1;
    cJSON_ArrayForEach(it, added)
    {
        int id = cJSON_GetObjectItem(it, "id")->valueint;
        if (id + 1 > n)
            n = id + 1;
    }
    a->n = n;
    a->tokens = calloc((size_t)n, sizeof *a->tokens);
    a->types = calloc((size_t)n, sizeof *a->types);
    cJSON_ArrayForEach(it, vocab)
    {
        a->tokens[it->valueint] = dup(it->string);
        a->types[it->valueint] = RLX_TOKEN_NORMAL;
    }
    cJSON_ArrayForEach(it, added)
    {
        int id = cJSON_GetObjectItem(it, "id")->valueint;
        free(a->tokens[id]);
        a->tokens[id] = dup(cJSON_GetObjectItem(it, "content")->valuestring);
        a->types[id] = cJSON_IsTrue(cJSON_GetObjectItem(it, "special")) ? RLX_TOKEN_CONTROL : RLX_TOKEN_USER_DEFINED;
    }
    for (int64_t i = 0; i < n; i++)
        if (!a->tokens[i]) {
            a->tokens[i] = dup("");
            a->types[i] = RLX_TOKEN_UNUSED;
        }
    return 0;
}

static rlx_tokenizer *load(const char *source)
{
    rlx_tokenizer *t = NULL;
    char *src = dup(source);
    char *kind = strtok(src, ":"), *p1 = strtok(NULL, ":"), *p2 = strtok(NULL, ":"), *p3 = strtok(NULL, ":");
    char *p4 = strtok(NULL, ":");
    float *scores = NULL;
    rlx_status st = RLX_ERR_INVALID_ARGUMENT;
    arrays a = {0};
    rlx_tokenizer_spec spec;
    rlx_tokenizer_spec_init(&spec);
    if (kind && strcmp(kind, "json") == 0 && p1) {
        st = rlx_tokenizer_from_hf_json(p1, &t);
    } else if (kind && strcmp(kind, "arrays") == 0 && p1 && p2 && p3) {
        size_t len;
        char *text = slurp(p1, &len);
        cJSON *root = text ? cJSON_Parse(text) : NULL;
        if (root) {
            cJSON *model = cJSON_GetObjectItem(root, "model"), *it;
            vocab_arrays(cJSON_GetObjectItem(model, "vocab"), cJSON_GetObjectItem(root, "added_tokens"), &a);
            cJSON *mj = cJSON_GetObjectItem(model, "merges");
            a.n_merges = cJSON_GetArraySize(mj);
            a.merges = calloc((size_t)a.n_merges + 1, sizeof *a.merges);
            int64_t k = 0;
            cJSON_ArrayForEach(it, mj)
            {
                if (cJSON_IsString(it)) {
                    a.merges[k++] = dup(it->valuestring);
                } else {
                    const char *x = it->child->valuestring, *y = it->child->next->valuestring;
                    char *s = malloc(strlen(x) + strlen(y) + 2);
                    sprintf(s, "%s %s", x, y);
                    a.merges[k++] = s;
                }
            }
            const char *unk = cJSON_GetStringValue(cJSON_GetObjectItem(model, "unk_token"));
            for (int64_t i = 0; i < a.n; i++) {
                if (unk && strcmp(a.tokens[i], unk) == 0) {
                    spec.unk_id = (int32_t)i;
                    a.types[i] = RLX_TOKEN_UNKNOWN;
                }
                if (strcmp(p2, "llama") == 0 && strlen(a.tokens[i]) == 6 && strncmp(a.tokens[i], "<0x", 3) == 0)
                    a.types[i] = RLX_TOKEN_BYTE;
                if (strcmp(a.tokens[i], "<s>") == 0)
                    spec.bos_id = (int32_t)i;
                if (strcmp(a.tokens[i], "</s>") == 0)
                    spec.eos_id = (int32_t)i;
            }
            spec.model = p2;
            spec.pre = p3;
            spec.n_tokens = a.n;
            spec.tokens = (const char *const *)a.tokens;
            spec.token_types = a.types;
            spec.merges = (const char *const *)a.merges;
            spec.n_merges = a.n_merges;
            if (p4 && strcmp(p4, "scores") == 0) {
                scores = calloc((size_t)a.n, sizeof *scores);
                for (int64_t i = 0; i < a.n; i++) /* one character: 0; made by no merge: last */
                    scores[i] = utf8proc_iterate((const utf8proc_uint8_t *)a.tokens[i], -1, &(utf8proc_int32_t){0}) ==
                                        (utf8proc_ssize_t)strlen(a.tokens[i])
                                    ? 0.0f
                                    : -1e9f;
                /* the pieces by name, to find what each merge makes */
                rlx_tokenizer *plain = NULL;
                if (rlx_tokenizer_from_arrays(&spec, &plain) == RLX_OK) {
                    for (int64_t r = a.n_merges - 1; r >= 0; r--) {
                        char *m = dup(a.merges[r]), *sp = strchr(m, ' ');
                        memmove(sp, sp + 1, strlen(sp));
                        int32_t id = rlx_tokenizer_token_id(plain, m, strlen(m));
                        if (id >= 0)
                            scores[id] = -(float)r;
                        free(m);
                    }
                    rlx_tokenizer_free(plain);
                }
                spec.scores = scores;
                spec.merges = NULL;
                spec.n_merges = 0;
            }
            st = rlx_tokenizer_from_arrays(&spec, &t);
            cJSON_Delete(root);
        }
        free(text);
    } else if (kind && strcmp(kind, "gpt2") == 0 && p1 && p2) {
        size_t len, blen;
        char *text = slurp(p1, &len), *bpe = slurp(p2, &blen);
        cJSON *root = text ? cJSON_Parse(text) : NULL;
        if (root && bpe) {
            vocab_arrays(root, NULL, &a);
            a.merges = calloc(blen / 2 + 1, sizeof *a.merges);
            char *save = NULL;
            for (char *line = strtok_r(bpe, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                if (line[0] != '#' && strchr(line, ' '))
                    a.merges[a.n_merges++] = dup(line);
            for (int64_t i = 0; i < a.n; i++)
                if (strcmp(a.tokens[i], "<|endoftext|>") == 0) {
                    a.types[i] = RLX_TOKEN_CONTROL;
                    spec.bos_id = spec.eos_id = (int32_t)i;
                }
            spec.model = "gpt2";
            spec.pre = "gpt2";
            spec.n_tokens = a.n;
            spec.tokens = (const char *const *)a.tokens;
            spec.token_types = a.types;
            spec.merges = (const char *const *)a.merges;
            spec.n_merges = a.n_merges;
            st = rlx_tokenizer_from_arrays(&spec, &t);
        }
        cJSON_Delete(root);
        free(text);
        free(bpe);
    }
    if (st != RLX_OK)
        fprintf(stderr, "cannot load %s: %s\n", source, rlx_last_error());
    arrays_free(&a);
    free(scores);
    free(src);
    return t;
}

static void print_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '\t')
            fputs("\\t", stderr);
        else if (c == '\r')
            fputs("\\r", stderr);
        else
            fputc(c, stderr);
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: tok_compare NAME SOURCE CORPUS REFS [--parse-special] [--nfc-only]\n");
        return 2;
    }
    const char *name = argv[1];
    int parse = 0, nfc_only = 0;
    const char *special_refs = NULL;
    int long_text = 0;
    for (int i = 5; i < argc; i++) {
        long_text |= strcmp(argv[i], "--long") == 0;
        parse |= strcmp(argv[i], "--parse-special") == 0;
        nfc_only |= strcmp(argv[i], "--nfc-only") == 0;
        if (strcmp(argv[i], "--special-refs") == 0 && i + 1 < argc)
            special_refs = argv[++i];
    }
    double t0 = rlx_now_ms();
    rlx_tokenizer *t = load(argv[2]);
    if (!t)
        return 1;
    double t_load = rlx_now_ms() - t0;
    size_t clen, rlen;
    char *corpus = slurp(argv[3], &clen), *refs = slurp(argv[4], &rlen);
    if (!corpus || !refs) {
        fprintf(stderr, "cannot read %s or %s\n", argv[3], argv[4]);
        return 1;
    }
    int cap = 1 << 16;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap), *want = malloc(sizeof *want * (size_t)cap);
    size_t ocap = 1 << 20;
    char *dec = malloc(ocap), *stream = malloc(ocap);
    int texts = 0, match = 0, skipped = 0, rt_ok = 0, rt_n = 0, shown = 0;
    size_t ci = 0;
    char *rp = refs;
    t0 = rlx_now_ms();
    while (ci < clen) {
        char *end;
        size_t n = strtoul(corpus + ci, &end, 10);
        const char *text = end + 1;
        ci = (size_t)(text - corpus) + n + 1;
        char *rl = rp, *nl = strchr(rp, '\n');
        if (!nl)
            break;
        *nl = '\0';
        rp = nl + 1;
        int nw = 0;
        for (char *q = rl; *q;) {
            want[nw++] = (int32_t)strtol(q, &q, 10);
            while (*q == ' ')
                q++;
        }
        texts++;
        if (nfc_only) {
            utf8proc_uint8_t *norm = NULL;
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)n, &norm,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            int same = m == (utf8proc_ssize_t)n && memcmp(norm, text, n) == 0;
            free(norm);
            if (!same) {
                skipped++;
                continue;
            }
        }
        int got = 0;
        if (rlx_tokenizer_encode(t, text, n, parse ? RLX_TOK_PARSE_SPECIAL : 0, ids, cap, &got) != RLX_OK) {
            fprintf(stderr, "%s: text %d: encode failed: %s\n", name, texts, rlx_last_error());
            continue;
        }
        if (got == nw && memcmp(ids, want, sizeof *ids * (size_t)nw) == 0) {
            match++;
        } else if (shown++ < 8) {
            fprintf(stderr, "%s: text %d differs: \"", name, texts);
            print_text(text, n);
            fprintf(stderr, "\"\n  want");
            for (int i = 0; i < nw && i < 40; i++)
                fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n  got ");
            for (int i = 0; i < got && i < 40; i++)
                fprintf(stderr, " %d", ids[i]);
            fprintf(stderr, "\n");
        }
        /* round trip, special tokens as plain text (user-defined ones still match) */
        rt_n++;
        size_t dl = 0, sl = 0;
        if (rlx_tokenizer_encode(t, text, n, 0, ids, cap, &got) == RLX_OK &&
            rlx_tokenizer_decode(t, ids, got, dec, ocap, &dl) == RLX_OK) {
            for (int i = 0; i < got; i++) {
                size_t pl = 0;
                rlx_tokenizer_token_piece(t, ids[i], i == 0 ? RLX_TOK_DECODE_FIRST : 0, stream + sl, ocap - sl, &pl);
                sl += pl;
            }
            /* the normalized text when the tokenizer normalizes (NFC) */
            utf8proc_uint8_t *norm = NULL;
            const char *x = text;
            size_t xn = n;
            if (strstr(argv[2], "qwen") && strncmp(argv[2], "json:", 5) == 0) {
                utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)n, &norm,
                                                  UTF8PROC_STABLE | UTF8PROC_COMPOSE);
                if (m >= 0) {
                    x = (const char *)norm;
                    xn = (size_t)m;
                }
            }
            if (dl == xn && memcmp(dec, x, xn) == 0 && sl == dl && memcmp(stream, dec, dl) == 0)
                rt_ok++;
            else if (shown++ < 8) {
                fprintf(stderr, "%s: text %d does not round-trip: \"", name, texts);
                print_text(text, n);
                fprintf(stderr, "\" -> \"");
                print_text(dec, dl);
                fprintf(stderr, "\" (pieces %s)\n", sl == dl && memcmp(stream, dec, dl) == 0 ? "agree" : "differ");
            }
            free(norm);
        }
    }
    double t_run = rlx_now_ms() - t0;
    int compared = texts - skipped;
    printf("%s: %d/%d texts give the reference ids, %d/%d round trips", name, match, compared, rt_ok, rt_n);
    if (skipped)
        printf(" (%d texts that NFC changes left out)", skipped);
    printf("; load %.0f ms, encode+decode %.0f ms\n", t_load, t_run);
    int ok = match == compared && rt_ok == rt_n && compared > 0;

    /* BOS/EOS */
    if (special_refs) {
        size_t slen;
        char *sr = slurp(special_refs, &slen);
        int sm = 0, sn = 0;
        ci = 0;
        for (char *q = sr; sr && ci < clen && *q;) {
            char *end;
            size_t n = strtoul(corpus + ci, &end, 10);
            const char *text = end + 1;
            ci = (size_t)(text - corpus) + n + 1;
            int nw = 0;
            while (*q && *q != '\n') {
                want[nw++] = (int32_t)strtol(q, &q, 10);
                while (*q == ' ')
                    q++;
            }
            if (*q)
                q++;
            int got = 0;
            sn++;
            if (rlx_tokenizer_encode(t, text, n, RLX_TOK_ADD_SPECIAL | RLX_TOK_PARSE_SPECIAL, ids, cap, &got) ==
                    RLX_OK &&
                got == nw && memcmp(ids, want, sizeof *ids * (size_t)nw) == 0)
                sm++;
        }
        printf("%s: %d/%d texts give the reference ids with BOS/EOS added (bos %d, eos %d, add_bos %d)\n", name, sm, sn,
               rlx_tokenizer_bos(t), rlx_tokenizer_eos(t), rlx_tokenizer_add_bos(t));
        ok &= sm == sn && sn > 0;
        free(sr);
    }

    /* the corpus as one long text */
    if (long_text) {
        size_t total = 0;
        char *big = malloc(3 * clen + 1);
        for (int rep = 0; rep < 3; rep++)
            for (ci = 0; ci < clen;) {
                char *end;
                size_t n = strtoul(corpus + ci, &end, 10);
                const char *text = end + 1;
                ci = (size_t)(text - corpus) + n + 1;
                memcpy(big + total, text, n);
                total += n;
            }
        int need = 0;
        double t1 = rlx_now_ms();
        rlx_tokenizer_encode(t, big, total, 0, NULL, 0, &need);
        int32_t *bids = malloc(sizeof *bids * (size_t)(need + 1));
        char *back = malloc(total + 1);
        size_t bl = 0;
        int got = 0;
        int rt = rlx_tokenizer_encode(t, big, total, 0, bids, need, &got) == RLX_OK &&
                 rlx_tokenizer_decode(t, bids, got, back, total + 1, &bl) == RLX_OK;
        double t2 = rlx_now_ms();
        /* the normalized text when the tokenizer normalizes (NFC) */
        utf8proc_uint8_t *norm = NULL;
        const char *x = big;
        size_t xn = total;
        if (strstr(argv[2], "qwen") && strncmp(argv[2], "json:", 5) == 0) {
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)big, (utf8proc_ssize_t)total, &norm,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (m >= 0) {
                x = (const char *)norm;
                xn = (size_t)m;
            }
        }
        rt = rt && bl == xn && memcmp(back, x, xn) == 0;
        printf("%s: one text of %zu bytes, %d tokens: %s (counted, encoded and decoded in %.0f ms)\n", name, total, got,
               rt ? "round trip" : "DIFFERS", t2 - t1);
        ok &= rt;
        free(norm);
        free(big);
        free(bids);
        free(back);
    }
    rlx_tokenizer_free(t);
    free(ids);
    free(want);
    free(dec);
    free(stream);
    free(corpus);
    free(refs);
    return ok ? 0 : 1;
}
