/* tok_export.c - a tokenizer as GGUF's tokenizer.ggml.* arrays, so that a
 * checkpoint converted from tokenizer.json carries its tokenizer in the
 * form llama.cpp (and RLX's GGUF path) reads. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/tok_internal.h"

typedef struct merge_ref {
    int32_t rank, a, b;
} merge_ref;

static int cmp_rank(const void *x, const void *y)
{
    const merge_ref *p = x, *q = y;
    return (p->rank > q->rank) - (p->rank < q->rank);
}

void rlx_tokenizer_arrays_free(rlx_tokenizer_arrays *a)
{
    if (!a)
        return;
    if (a->merges)
        for (int64_t i = 0; i < a->n_merges; i++)
            free(a->merges[i]);
    free(a->merges);
    free(a->tokens);
    free(a->token_lens);
    free(a->scores);
    free(a->token_types);
    memset(a, 0, sizeof *a);
}

/* The merge table, by rank (ranks are kept in order; gaps left by merges
 * of unknown tokens close up). */
static rlx_status export_merges(const rlx_tokenizer *t, rlx_tokenizer_arrays *a)
{
    const tok_pairmap *m = &t->merges;
    int64_t n = 0;
    if (m->key)
        for (uint64_t i = 0; i <= m->mask; i++)
            n += m->key[i] != UINT64_MAX;
    merge_ref *refs = rlx_calloc(n ? (size_t)n : 1, sizeof *refs);
    a->merges = rlx_calloc(n ? (size_t)n : 1, sizeof *a->merges);
    if (!refs || !a->merges) {
        free(refs);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory exporting merges");
    }
    int64_t k = 0;
    if (m->key)
        for (uint64_t i = 0; i <= m->mask; i++)
            if (m->key[i] != UINT64_MAX)
                refs[k++] = (merge_ref){m->rank[i], (int32_t)(m->key[i] >> 32), (int32_t)(uint32_t)m->key[i]};
    qsort(refs, (size_t)n, sizeof *refs, cmp_rank);
    for (int64_t i = 0; i < n; i++) {
        const tok_token *x = &t->tokens[refs[i].a], *y = &t->tokens[refs[i].b];
        char *s = malloc((size_t)x->text_len + y->text_len + 2);
        if (!s) {
            free(refs);
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory exporting merges");
        }
        memcpy(s, t->blob + x->text_off, x->text_len);
        s[x->text_len] = ' ';
        memcpy(s + x->text_len + 1, t->blob + y->text_off, y->text_len);
        s[x->text_len + 1 + y->text_len] = '\0';
        a->merges[a->n_merges++] = s;
    }
    free(refs);
    return RLX_OK;
}

rlx_status rlx_tokenizer_export(const rlx_tokenizer *t, rlx_tokenizer_arrays *a)
{
    if (!t || !a)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_tokenizer_export: NULL argument");
    memset(a, 0, sizeof *a);
    size_t n = (size_t)t->n_vocab;
    a->model = t->cfg.byte_level ? "gpt2" : "llama";
    a->pre = t->cfg.byte_level && t->pre[0] ? t->pre : NULL;
    a->n_tokens = t->n_vocab;
    a->tokens = rlx_calloc(n ? n : 1, sizeof *a->tokens);
    a->token_lens = rlx_calloc(n ? n : 1, sizeof *a->token_lens);
    a->scores = rlx_calloc(n ? n : 1, sizeof *a->scores);
    a->token_types = rlx_calloc(n ? n : 1, sizeof *a->token_types);
    if (!a->tokens || !a->token_lens || !a->scores || !a->token_types) {
        rlx_tokenizer_arrays_free(a);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: out of memory exporting %zu tokens", n);
    }
    bool any_score = false;
    for (size_t i = 0; i < n; i++) {
        const tok_token *tk = &t->tokens[i];
        a->tokens[i] = t->blob + tk->text_off;
        a->token_lens[i] = tk->text_len;
        a->scores[i] = tk->score;
        a->token_types[i] = tk->type;
        any_score |= tk->score != 0.0f;
    }
    rlx_status st = export_merges(t, a);
    if (st != RLX_OK) {
        rlx_tokenizer_arrays_free(a);
        return st;
    }
    /* llama.cpp's SentencePiece tokenizer merges by score, not by a merge
     * list: a tokenizer.json without scores gets each merged token's rank
     * as one (earlier merges score higher), which merges alike. */
    if (!t->cfg.byte_level && !any_score && t->merges.key) {
        for (uint64_t i = 0; i <= t->merges.mask; i++) {
            int32_t id = t->merges.key[i] != UINT64_MAX ? t->merges.merged[i] : -1;
            float s = -(float)t->merges.rank[i] - 1.0f;
            if (id >= 0 && (a->scores[id] == 0.0f || s > a->scores[id]))
                a->scores[id] = s;
        }
    }
    a->bos_id = t->bos, a->eos_id = t->eos, a->unk_id = t->unk, a->pad_id = t->pad;
    a->eot_id = t->eot, a->eom_id = t->eom;
    a->add_bos = t->add_bos, a->add_eos = t->add_eos;
    for (int i = 0; i < t->cfg.n_norm; i++)
        a->add_space_prefix |= t->cfg.norm[i].kind == TOK_NORM_PREPEND;
    return RLX_OK;
}
