/* model.c - rlx_llm: a model's hyperparameters, where its weights come
 * from and its tokenizer; the embedded default model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "llm/llm_internal.h"
#include "models/workloads.h"

/* ------------------------------------------------------------ the default */

typedef struct default_src {
    llm_hparams hp;
    uint64_t seed;
    float *buf; /* the last tensor asked for (valid until the next get) */
    size_t cap;
} default_src;

int llm_canonical_shape(const llm_hparams *hp, const char *name, int64_t *dims)
{
    int64_t H = hp->hidden, D = hp->head_dim, Hq = hp->heads * D, Hk = hp->kv_heads * D, F = hp->ffn;
    const char *w = name;
    if (!strncmp(name, "blk.", 4)) {
        w = strchr(name + 4, '.');
        if (!w)
            return 0;
        w++;
    }
#define SHAPE2(n, a, b)               \
    if (!strcmp(w, n)) {              \
        dims[0] = (a), dims[1] = (b); \
        return 2;                     \
    }
#define SHAPE1(n, a)     \
    if (!strcmp(w, n)) { \
        dims[0] = (a);   \
        return 1;        \
    }
    SHAPE2("token_embd.weight", hp->vocab, H)
    SHAPE2("output.weight", hp->vocab, H)
    SHAPE2("position_embd.weight", hp->max_ctx, H)
    SHAPE1("output_norm.weight", H)
    SHAPE1("output_norm.bias", H)
    SHAPE1("attn_norm.weight", H)
    SHAPE1("attn_norm.bias", H)
    SHAPE1("ffn_norm.weight", H)
    SHAPE1("ffn_norm.bias", H)
    SHAPE2("attn_q.weight", Hq, H)
    SHAPE2("attn_k.weight", Hk, H)
    SHAPE2("attn_v.weight", Hk, H)
    SHAPE1("attn_q.bias", Hq)
    SHAPE1("attn_k.bias", Hk)
    SHAPE1("attn_v.bias", Hk)
    SHAPE2("attn_qkv.weight", Hq + 2 * Hk, H)
    SHAPE1("attn_qkv.bias", Hq + 2 * Hk)
    SHAPE1("attn_q_norm.weight", D)
    SHAPE1("attn_k_norm.weight", D)
    SHAPE2("attn_output.weight", H, Hq)
    SHAPE1("attn_output.bias", H)
    SHAPE2("ffn_gate.weight", F, H)
    SHAPE2("ffn_up.weight", F, H)
    SHAPE1("ffn_up.bias", F)
    SHAPE2("ffn_down.weight", H, F)
    SHAPE1("ffn_down.bias", H)
#undef SHAPE1
#undef SHAPE2
    return 0;
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ULL;
    return h;
}

static rlx_status default_get(void *ctx, const char *name, llm_tensor *t)
{
    default_src *d = ctx;
    memset(t, 0, sizeof *t);
    int nd = llm_canonical_shape(&d->hp, name, t->dims);
    if (!nd)
        return rlx_set_error(RLX_ERR_NOT_FOUND, "the default model has no weight '%s'", name);
    t->ndim = nd;
    t->dtype = RLX_F32;
    size_t n = (size_t)t->dims[0] * (size_t)(nd == 2 ? t->dims[1] : 1);
    if (n > d->cap) {
        float *p = rlx_realloc(d->buf, n * sizeof *p);
        if (!p)
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "default model: no memory for '%s'", name);
        d->buf = p;
        d->cap = n;
    }
    if (strstr(name, "norm.weight")) { /* norm gains: 1 */
        for (size_t i = 0; i < n; i++)
            d->buf[i] = 1.0f;
    } else {
        rlx_fill_normal(d->buf, (int64_t)n, 0.02, d->seed ^ name_hash(name));
    }
    t->data = d->buf;
    t->bytes = n * sizeof(float);
    return RLX_OK;
}

static void default_close(void *ctx)
{
    default_src *d = ctx;
    if (d)
        free(d->buf);
    free(d);
}

rlx_status llm_default_model(const char *shape, uint64_t seed, llm_hparams *hp, llm_source *src)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = LLM_QWEN3;
    if (!strcmp(shape, "decoder")) { /* Qwen3-0.6B */
        hp->layers = 28, hp->hidden = 1024, hp->heads = 16, hp->kv_heads = 8, hp->head_dim = 128, hp->ffn = 3072;
        hp->vocab = 151936, hp->max_ctx = 40960;
    } else if (!strcmp(shape, "decoder-small")) {
        hp->layers = 8, hp->hidden = 512, hp->heads = 8, hp->kv_heads = 4, hp->head_dim = 64, hp->ffn = 1536;
        hp->vocab = 32000, hp->max_ctx = 4096;
    } else {
        return rlx_set_error(RLX_ERR_NOT_FOUND, "no built-in model '%s' (decoder, decoder-small)", shape);
    }
    snprintf(hp->arch_name, sizeof hp->arch_name, "qwen3 (built-in %s, seeded)", shape);
    hp->rope_theta = 1e6, hp->norm_eps = 1e-6;
    hp->qk_norm = hp->tied = true;
    hp->bos = hp->eos = -1;
    rlx_status st = llm_hparams_check(hp);
    if (st != RLX_OK)
        return st;
    default_src *d = rlx_calloc(1, sizeof *d);
    if (!d)
        return RLX_ERR_OUT_OF_MEMORY;
    d->hp = *hp;
    d->seed = seed;
    src->ctx = d;
    src->get = default_get;
    src->close = default_close;
    return RLX_OK;
}

/* ------------------------------------------------------------ rlx_llm */

void rlx_llm_free(rlx_llm *m)
{
    if (!m)
        return;
    if (m->src.close)
        m->src.close(m->src.ctx);
    rlx_tokenizer_free(m->tok);
    free(m);
}

rlx_status rlx_llm_load(const char *path, rlx_llm **out)
{
    if (!out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_llm_load: out must not be NULL");
    *out = NULL;
    rlx_llm *m = rlx_calloc(1, sizeof *m);
    if (!m)
        return RLX_ERR_OUT_OF_MEMORY;
    /* a built-in shape by name, unless a file or folder of that name exists */
    bool builtin = !path || ((!strcmp(path, "decoder") || !strcmp(path, "decoder-small")) && access(path, F_OK) != 0);
    rlx_status st = builtin ? llm_default_model(path ? path : "decoder-small", 1, &m->hp, &m->src)
                            : llm_open_checkpoint(path, &m->hp, &m->src, &m->tok);
    if (st != RLX_OK) {
        rlx_llm_free(m);
        return st;
    }
    *out = m;
    return RLX_OK;
}

rlx_status rlx_llm_get_info(const rlx_llm *m, rlx_llm_info *info)
{
    if (!m || !info)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_llm_get_info: model and info must not be NULL");
    const llm_hparams *hp = &m->hp;
    *info = (rlx_llm_info){hp->arch_name, hp->layers, hp->hidden,  hp->heads, hp->kv_heads, hp->head_dim,
                           hp->ffn,       hp->vocab,  hp->max_ctx, hp->bos,   hp->eos};
    return RLX_OK;
}

/* ------------------------------------------------------------ tokens */

int rlx_llm_tokenize(const rlx_llm *m, const char *text, size_t len, int add_special, int32_t *ids, int cap)
{
    if (!m || (!text && len) || (!ids && cap > 0) || cap < 0) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_llm_tokenize: bad argument");
        return -1;
    }
    if (!m->tok) { /* byte tokens */
        if (len > (size_t)INT32_MAX) {
            rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_llm_tokenize: %zu bytes is too long", len);
            return -1;
        }
        for (size_t i = 0; i < len && (int)i < cap; i++)
            ids[i] = (uint8_t)text[i];
        return (int)len;
    }
    int n = 0;
    unsigned flags = RLX_TOK_PARSE_SPECIAL | (add_special ? RLX_TOK_ADD_SPECIAL : 0);
    rlx_status st = rlx_tokenizer_encode(m->tok, text, len, flags, ids, cap, &n);
    if (st != RLX_OK && n <= cap)
        return -1;
    return n;
}

int rlx_llm_token_piece(const rlx_llm *m, int32_t id, char *buf, size_t cap)
{
    if (!m || id < 0 || id >= m->hp.vocab || (!buf && cap)) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "token %d is outside the vocabulary", (int)id);
        return -1;
    }
    if (!m->tok) {
        char tmp[16];
        int n = id < 256 ? 1 : snprintf(tmp, sizeof tmp, "[%d]", (int)id);
        if (id < 256)
            tmp[0] = (char)id;
        memcpy(buf, tmp, (size_t)n < cap ? (size_t)n : cap);
        return n;
    }
    size_t len = 0;
    rlx_status st = rlx_tokenizer_token_piece(m->tok, id, 0, buf, cap, &len);
    if (st != RLX_OK && len <= cap)
        return -1;
    return (int)len;
}

long rlx_llm_detokenize(const rlx_llm *m, const int32_t *ids, int n, char *buf, size_t cap)
{
    if (!m || n < 0 || (!ids && n) || (!buf && cap)) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_llm_detokenize: bad argument");
        return -1;
    }
    if (m->tok) {
        size_t len = 0;
        rlx_status st = rlx_tokenizer_decode(m->tok, ids, n, buf, cap, &len);
        return st != RLX_OK && len <= cap ? -1 : (long)len;
    }
    size_t len = 0; /* byte tokens: the pieces one after another */
    for (int i = 0; i < n; i++) {
        char piece[16];
        int k = rlx_llm_token_piece(m, ids[i], piece, sizeof piece);
        if (k < 0)
            return -1;
        if (len + (size_t)k <= cap)
            memcpy(buf + len, piece, (size_t)k);
        len += (size_t)k;
    }
    return (long)len;
}

int rlx_llm_is_eog(const rlx_llm *m, int32_t id)
{
    if (!m)
        return 0;
    if (m->tok)
        return rlx_tokenizer_is_eog(m->tok, id);
    return m->hp.eos >= 0 && id == m->hp.eos;
}
