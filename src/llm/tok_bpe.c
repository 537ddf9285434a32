/* tok_bpe.c - the BPE merge loop over one pre-token.
 *
 * The piece starts as one symbol per byte (byte-level) or per UTF-8
 * character (SentencePiece-style), kept in a doubly linked list.  Every
 * adjacent pair that can merge is a candidate in a binary heap ordered by
 * merge rank (or by the negated score of the merged piece when merging by
 * score), ties to the leftmost.  Popping the best candidate merges its two
 * symbols when both are still as they were when it was pushed, and pushes
 * the new pairs with its neighbours: O(n log n) for a piece of n symbols. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/tok_internal.h"

typedef struct sym {
    uint32_t start, len; /* len 0: merged into its left neighbour */
    int32_t id;          /* -1: not in the vocabulary */
    int32_t prev, next;
} sym;

typedef struct cand {
    double prio;
    uint32_t start;
    int32_t l, r;
    uint32_t llen, rlen;
    int32_t id;
} cand;

struct tok_scratch {
    sym *s;
    size_t scap;
    cand *h;
    size_t hn, hcap;
};

tok_scratch *tok_scratch_new(void) { return rlx_calloc(1, sizeof(tok_scratch)); }

void tok_scratch_free(tok_scratch *sc)
{
    if (!sc)
        return;
    free(sc->s);
    free(sc->h);
    free(sc);
}

static int cand_less(const cand *a, const cand *b)
{
    return a->prio < b->prio || (a->prio == b->prio && a->start < b->start);
}

static int heap_push(tok_scratch *sc, cand c)
{
    if (sc->hn == sc->hcap) {
        size_t nc = sc->hcap ? sc->hcap * 2 : 256;
        cand *h = realloc(sc->h, nc * sizeof *h);
        if (!h)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (merge heap)"), -1;
        sc->h = h;
        sc->hcap = nc;
    }
    size_t i = sc->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &sc->h[p]))
            break;
        sc->h[i] = sc->h[p];
        i = p;
    }
    sc->h[i] = c;
    return 0;
}

static cand heap_pop(tok_scratch *sc)
{
    cand top = sc->h[0];
    cand last = sc->h[--sc->hn];
    size_t i = 0, n = sc->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_less(&sc->h[c + 1], &sc->h[c]))
            c++;
        if (!cand_less(&sc->h[c], &last))
            break;
        sc->h[i] = sc->h[c];
        i = c;
    }
    if (n)
        sc->h[i] = last;
    return top;
}

static int try_pair(const rlx_tokenizer *t, const uint8_t *s, tok_scratch *sc, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return 0;
    const sym *a = &sc->s[l], *b = &sc->s[r];
    cand c = {0, a->start, l, r, a->len, b->len, -1};
    if (t->cfg.use_scores) {
        int32_t id = tok_strmap_get(&t->key_map, t->blob, t->tokens, 0, s + a->start, (size_t)a->len + b->len);
        if (id < 0)
            return 0;
        c.prio = -(double)t->tokens[id].score;
        c.id = id;
    } else {
        int32_t rank, merged;
        if (a->id < 0 || b->id < 0 || !tok_pairmap_get(&t->merges, a->id, b->id, &rank, &merged))
            return 0;
        c.prio = rank;
        c.id = merged;
    }
    return heap_push(sc, c);
}

static rlx_status emit_unknown(const rlx_tokenizer *t, const uint8_t *s, size_t n, int *prev_unk, tok_ivec *out)
{
    if (t->cfg.byte_fallback) {
        int ok = 1;
        for (size_t i = 0; i < n; i++)
            ok &= t->byte_id[s[i]] >= 0;
        if (ok) {
            for (size_t i = 0; i < n; i++)
                if (tok_ivec_push(out, t->byte_id[s[i]]))
                    return RLX_ERR_OUT_OF_MEMORY;
            *prev_unk = 0;
            return RLX_OK;
        }
    }
    if (t->unk < 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "tokenizer: the text holds \"%.*s\" (first byte 0x%02x), which no token covers, and the "
                             "vocabulary has no unknown token",
                             (int)(n > 16 ? 16 : n), (const char *)s, s[0]);
    if (t->cfg.fuse_unk && *prev_unk)
        return RLX_OK;
    *prev_unk = 1;
    return tok_ivec_push(out, t->unk) ? RLX_ERR_OUT_OF_MEMORY : RLX_OK;
}

static int utf8_len(const uint8_t *s, size_t n)
{
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 1;
    if ((size_t)len > n)
        return 1;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 1;
    return len;
}

rlx_status tok_bpe_word(const rlx_tokenizer *t, const uint8_t *s, size_t n, tok_scratch *sc, tok_ivec *out)
{
    if (n == 0)
        return RLX_OK;
    if (n > UINT32_MAX / 2)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tokenizer: a piece of %zu bytes is too long", n);
    if (t->cfg.ignore_merges) {
        int32_t id = tok_strmap_get(&t->key_map, t->blob, t->tokens, t->cfg.byte_level, s, n);
        if (id >= 0)
            return tok_ivec_push(out, id) ? RLX_ERR_OUT_OF_MEMORY : RLX_OK;
    }
    if (sc->scap < n) {
        sym *ns = realloc(sc->s, n * sizeof *ns);
        if (!ns)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu symbols)", n);
        sc->s = ns;
        sc->scap = n;
    }
    int32_t m = 0;
    for (size_t i = 0; i < n;) {
        int len = t->cfg.byte_level ? 1 : utf8_len(s + i, n - i);
        int32_t id = t->cfg.byte_level ? t->byte_id[s[i]]
                                       : tok_strmap_get(&t->key_map, t->blob, t->tokens, 0, s + i, (size_t)len);
        sc->s[m] = (sym){(uint32_t)i, (uint32_t)len, id, m - 1, m + 1};
        m++;
        i += (size_t)len;
    }
    sc->s[m - 1].next = -1;
    sc->hn = 0;
    for (int32_t i = 0; i + 1 < m; i++)
        if (try_pair(t, s, sc, i, i + 1))
            return RLX_ERR_OUT_OF_MEMORY;
    while (sc->hn > 0) {
        cand c = heap_pop(sc);
        sym *a = &sc->s[c.l], *b = &sc->s[c.r];
        if (a->len != c.llen || b->len != c.rlen || a->next != c.r)
            continue; /* stale: one side changed since */
        a->len += b->len;
        a->id = c.id;
        a->next = b->next;
        if (b->next >= 0)
            sc->s[b->next].prev = c.l;
        b->len = 0;
        if (try_pair(t, s, sc, a->prev, c.l) || try_pair(t, s, sc, c.l, a->next))
            return RLX_ERR_OUT_OF_MEMORY;
    }
    int prev_unk = 0;
    for (int32_t i = 0; i >= 0; i = sc->s[i].next) {
        const sym *a = &sc->s[i];
        if (a->id >= 0) {
            if (tok_ivec_push(out, a->id))
                return RLX_ERR_OUT_OF_MEMORY;
            prev_unk = 0;
            continue;
        }
        rlx_status st = emit_unknown(t, s + a->start, a->len, &prev_unk, out);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}
