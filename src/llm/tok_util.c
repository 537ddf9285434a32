/* tok_util.c - the small containers the tokenizer files share (growable
 * arrays and buffers, hash maps of strings and of id pairs; tok_internal.h).
 * Below tokenizer.c, tok_bpe.c, tok_pretok.c and tok_hf.c. */
#include "llm/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int tok_ivec_push(tok_ivec *a, int32_t x)
{
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, nc * sizeof *v);
        if (!v)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu ids)", nc), -1;
        a->v = v;
        a->cap = nc;
    }
    a->v[a->n++] = x;
    return 0;
}

int tok_buf_append(tok_buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory (%zu bytes)", nc), -1;
        b->p = p;
        b->cap = nc;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

uint64_t tok_hash(const void *s, size_t n)
{
    const uint8_t *p = s;
    uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9e3779b97f4a7c15ull);
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static const char *tok_key(const char *blob, const tok_token *t, int use_raw, size_t *n)
{
    *n = use_raw ? t->raw_len : t->text_len;
    return blob + (use_raw ? t->raw_off : t->text_off);
}

int32_t tok_strmap_get(const tok_strmap *m, const char *blob, const tok_token *tokens, int use_raw, const void *s,
                       size_t n)
{
    if (!m->slot)
        return -1;
    for (uint32_t i = (uint32_t)tok_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0)
            return -1;
        size_t kn;
        const char *k = tok_key(blob, &tokens[id], use_raw, &kn);
        if (kn == n && memcmp(k, s, n) == 0)
            return id;
    }
}

/* Inserts id unless its key is there already (the lower id stays). */
void tok_strmap_put(tok_strmap *m, const char *blob, const tok_token *tokens, int use_raw, int32_t id)
{
    size_t n;
    const char *s = tok_key(blob, &tokens[id], use_raw, &n);
    for (uint32_t i = (uint32_t)tok_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
        int32_t o = m->slot[i];
        if (o < 0) {
            m->slot[i] = id;
            return;
        }
        size_t kn;
        const char *k = tok_key(blob, &tokens[o], use_raw, &kn);
        if (kn == n && memcmp(k, s, n) == 0)
            return;
    }
}

int tok_strmap_init(tok_strmap *m, size_t n)
{
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory"), -1;
    memset(m->slot, 0xff, cap * sizeof *m->slot);
    m->mask = cap - 1;
    return 0;
}

uint64_t tok_pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

int tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged)
{
    if (!m->key)
        return 0;
    uint64_t k = tok_pair_key(a, b);
    for (uint32_t i = (uint32_t)tok_hash(&k, sizeof k) & m->mask;; i = (i + 1) & m->mask) {
        if (m->key[i] == UINT64_MAX)
            return 0;
        if (m->key[i] == k) {
            *rank = m->rank[i];
            *merged = m->merged[i];
            return 1;
        }
    }
}
