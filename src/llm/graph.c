/* graph.c - a decoder LLM as one RLX graph per step shape: `seq` new tokens
 * for each of `batch` sequences, read against (and appended to) a KV cache
 * of `ctx` positions.  The same builder gives the prefill graph (seq > 1)
 * and the decode graph (seq = 1); positions are run-time inputs, so one
 * compiled graph serves every position up to ctx. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/ggml_type.h"
#include "ir/ir.h"
#include "llm/llm.h"

typedef struct builder {
    rlx_graph *g;
    const llm_hparams *hp;
    rlx_dtype wdtype;
    int64_t B, S, T;
    const llm_storage *storage;
} builder;

/* Weights the graphs read joined where checkpoints keep them apart (one
 * product instead of two or three): the parts' rows one after another.
 * A checkpoint that stores the joined tensor (GPT-2's attn_qkv) gives it
 * as it is. */
static const struct {
    const char *joined, *parts[4];
} k_joined[] = {
    {"attn_qkv.weight", {"attn_q.weight", "attn_k.weight", "attn_v.weight", NULL}},
    {"attn_qkv.bias", {"attn_q.bias", "attn_k.bias", "attn_v.bias", NULL}},
    {"ffn_gate_up.weight", {"ffn_gate.weight", "ffn_up.weight", NULL}},
};

int llm_joined_parts(const char *name, char parts[4][128])
{
    const char *dot = !strncmp(name, "blk.", 4) ? strchr(name + 4, '.') : NULL;
    for (size_t j = 0; dot && j < sizeof k_joined / sizeof k_joined[0]; j++) {
        if (strcmp(dot + 1, k_joined[j].joined))
            continue;
        int n = 0;
        for (; k_joined[j].parts[n]; n++)
            snprintf(parts[n], 128, "%.*s.%s", (int)(dot - name), name, k_joined[j].parts[n]);
        return n;
    }
    return 0;
}

static int storage_of(const builder *b, const char *name)
{
    return b->storage ? b->storage->qtype(b->storage->ctx, name) : LLM_FLOAT;
}

/* x [.., in] @ W^T for W [out, in] stored quantized in qt: a u8 param. */
static rlx_node qlinear(builder *b, rlx_node x, int64_t out, int64_t in, const char *name, int qt)
{
    size_t rb = rlx_quant_row_bytes(qt, in);
    if (!rb) {
        rlx_set_error(RLX_ERR_SHAPE, "weight '%s': %s rows of %lld elements are not whole blocks", name,
                      rlx_ggml_type_name(qt), (long long)in);
        return -1;
    }
    rlx_node w = rlx_param(b->g, name, RLX_U8, 2, (int64_t[]){out, (int64_t)rb});
    return rlx_qmatmul(b->g, x, w, qt, in);
}

/* A weight as the checkpoint stores it: [d0, d1], or [d0] when d1 is 0. */
static rlx_node stored_weight(builder *b, int64_t d0, int64_t d1, const char *fmt, int layer)
{
    char name[96];
    snprintf(name, sizeof name, fmt, layer);
    return d1 ? rlx_param(b->g, name, b->wdtype, 2, (int64_t[]){d0, d1})
              : rlx_param(b->g, name, b->wdtype, 1, (int64_t[]){d0});
}

/* The same in f32. */
static rlx_node weight(builder *b, int64_t d0, int64_t d1, const char *fmt, int layer)
{
    rlx_node w = stored_weight(b, d0, d1, fmt, layer);
    return b->wdtype == RLX_F32 ? w : rlx_cast(b->g, w, RLX_F32);
}

/* x [.., in] @ W^T (+ bias): W is [out, in], as GGUF and torch.nn.Linear
 * store it; a quantized W stays so (qmatmul), a joined one whose parts are
 * quantized differently is multiplied part by part. */
static rlx_node linear(builder *b, rlx_node x, int64_t out, int64_t in, const char *wfmt, const char *bfmt, int layer)
{
    char name[96];
    snprintf(name, sizeof name, wfmt, layer);
    int qt = storage_of(b, name);
    rlx_node y;
    if (qt == LLM_MIXED) {
        char parts[4][128];
        int np = llm_joined_parts(name, parts);
        rlx_node ys[4];
        int64_t rows_left = out;
        for (int i = 0; i < np; i++) {
            int64_t dims[4];
            int pq = storage_of(b, parts[i]);
            int64_t rows = llm_canonical_shape(b->hp, parts[i], dims) == 2 ? dims[0] : -1;
            if (rows <= 0 || rows > rows_left) {
                rlx_set_error(RLX_ERR_SHAPE, "weight '%s': its part '%s' has no shape", name, parts[i]);
                return -1;
            }
            rows_left -= rows;
            ys[i] = pq >= 0 ? qlinear(b, x, rows, in, parts[i], pq)
                            : rlx_matmul(b->g, x, weight(b, rows, in, parts[i], 0), 0, 1);
        }
        y = rlx_concat(b->g, np, ys, 2); /* joined weights multiply the [B, S, in] activations */
    } else if (qt >= 0) {
        y = qlinear(b, x, out, in, name, qt);
    } else {
        y = rlx_matmul(b->g, x, weight(b, out, in, wfmt, layer), 0, 1);
    }
    return bfmt ? rlx_add(b->g, y, weight(b, out, 0, bfmt, layer)) : y;
}

static rlx_node norm(builder *b, rlx_node x, int64_t n, const char *wfmt, const char *bfmt, int layer)
{
    if (b->hp->layer_norm)
        return rlx_layer_norm(b->g, x, weight(b, n, 0, wfmt, layer), weight(b, n, 0, bfmt, layer), b->hp->norm_eps);
    return rlx_rms_norm(b->g, x, weight(b, n, 0, wfmt, layer), b->hp->norm_eps);
}

static rlx_node iota(rlx_graph *g, int64_t n, int64_t from, int ndim, int axis)
{
    int64_t *v = rlx_malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "llm graph: no memory for a position table");
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        v[i] = from + i;
    int64_t dims[4] = {1, 1, 1, 1};
    dims[axis] = n;
    rlx_node c = rlx_constant(g, RLX_I64, ndim, dims, v, (size_t)n * sizeof *v);
    free(v);
    return c;
}

/* Inverse frequencies of RoPE with the config's scaling. */
static double inv_freq(const llm_hparams *hp, int i)
{
    double inv = pow(hp->rope_theta, -2.0 * i / hp->head_dim);
    if (hp->rope_freq_factors)
        return inv / hp->rope_freq_factors[i];
    if (hp->rope_scaling == LLM_ROPE_LINEAR)
        return inv / hp->rope_factor;
    if (hp->rope_scaling == LLM_ROPE_LLAMA3) {
        double wavelen = 2.0 * M_PI / inv;
        double low_wl = hp->rope_orig_ctx / hp->rope_low_freq, high_wl = hp->rope_orig_ctx / hp->rope_high_freq;
        if (wavelen < high_wl)
            return inv;
        if (wavelen > low_wl)
            return inv / hp->rope_factor;
        double smooth = (hp->rope_orig_ctx / wavelen - hp->rope_low_freq) / (hp->rope_high_freq - hp->rope_low_freq);
        return (1.0 - smooth) * inv / hp->rope_factor + smooth * inv;
    }
    return inv;
}

/* cos or sin of every position < T and frequency: f32 [T, D/2]. */
static rlx_node rope_table(builder *b, int want_sin)
{
    int64_t half = b->hp->head_dim / 2;
    float *t = rlx_malloc((size_t)(b->T * half) * sizeof *t);
    if (!t) {
        rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "llm graph: no memory for the RoPE table");
        return -1;
    }
    for (int64_t p = 0; p < b->T; p++)
        for (int64_t i = 0; i < half; i++) {
            double a = (double)p * inv_freq(b->hp, (int)i);
            t[p * half + i] = (float)(want_sin ? sin(a) : cos(a));
        }
    rlx_node c = rlx_constant(b->g, RLX_F32, 2, (int64_t[]){b->T, half}, t, (size_t)(b->T * half) * sizeof *t);
    free(t);
    return c;
}

/* The norm gamma of each q or k head, where the model has one, as stored
 * (qkv_heads reads f16 and bf16 gammas as such: no cast a step). */
static rlx_node head_gamma(builder *b, const char *fmt, int layer)
{
    return b->hp->qk_norm ? stored_weight(b, b->hp->head_dim, 0, fmt, layer) : -1;
}

/* Rows [from, from + n) of x's first axis. */
static rlx_node rows_of(rlx_graph *g, rlx_node x, int64_t from, int64_t n)
{
    return rlx_slice(g, x, 1, (int[]){0}, (int64_t[]){from}, (int64_t[]){from + n}, NULL);
}

/* pos2: each sequence's position twice, [2 B], for the joined k/v cache. */
static rlx_node attention(builder *b, rlx_node x, int l, rlx_node pos, rlx_node pos2, rlx_node cs, rlx_node sn)
{
    const llm_hparams *hp = b->hp;
    rlx_graph *g = b->g;
    int64_t H = hp->hidden, D = hp->head_dim, Hq = hp->heads, Hk = hp->kv_heads, B = b->B, S = b->S;
    /* one product for q, k and v (the loader joins separate checkpoint
     * tensors row-wise), then one node that cuts it into heads, normalises
     * and rotates q and k, and lays k and v out as the cache's update */
    rlx_node qkv =
        linear(b, x, (Hq + 2 * Hk) * D, H, "blk.%d.attn_qkv.weight", hp->qkv_bias ? "blk.%d.attn_qkv.bias" : NULL, l);
    rlx_node heads = rlx_qkv_heads(
        g, qkv, hp->learned_pos ? -1 : cs, hp->learned_pos ? -1 : sn, head_gamma(b, "blk.%d.attn_q_norm.weight", l),
        head_gamma(b, "blk.%d.attn_k_norm.weight", l), (int)Hq, (int)Hk, hp->norm_eps, hp->rope_interleaved);
    const int64_t nq = B * Hq * S * D;
    rlx_node q = rlx_reshape(g, rows_of(g, heads, 0, nq), 4, (int64_t[]){B, Hq, S, D});
    rlx_node kv = rlx_reshape(g, rows_of(g, heads, nq, 2 * B * Hk * S * D), 4, (int64_t[]){2 * B, Hk, S, D});
    /* k and v of every sequence in one cache [2 B, Hk, T, D]: one write a step */
    char name[64];
    snprintf(name, sizeof name, "cache.%d.kv", l);
    rlx_node kvc = rlx_param(g, name, b->wdtype, 4, (int64_t[]){2 * B, Hk, b->T, D});
    if (b->wdtype != RLX_F32) /* the cache is kept in the weights' 16-bit type */
        kv = rlx_cast(g, kv, b->wdtype);
    kvc = rlx_cache_write(g, kvc, kv, pos2);
    rlx_node kc = rows_of(g, kvc, 0, B), vc = rows_of(g, kvc, B, B);
    if (b->wdtype != RLX_F32) { /* cut before the casts, so that mixed precision cancels them */
        kc = rlx_cast(g, kc, RLX_F32);
        vc = rlx_cast(g, vc, RLX_F32);
    }
    /* row s of sequence b sees the cache up to its own position pos[b] + s */
    rlx_node a = rlx_attention_at(g, q, kc, vc, pos, 0.0);
    a = rlx_reshape(g, rlx_transpose(g, a, (int[]){0, 2, 1, 3}), 3, (int64_t[]){B, S, Hq * D});
    return linear(b, a, H, Hq * D, "blk.%d.attn_output.weight", hp->out_bias ? "blk.%d.attn_output.bias" : NULL, l);
}

static rlx_node ffn(builder *b, rlx_node x, int l)
{
    const llm_hparams *hp = b->hp;
    int64_t H = hp->hidden, F = hp->ffn;
    if (hp->gelu_ffn) {
        rlx_node u = linear(b, x, F, H, "blk.%d.ffn_up.weight", hp->ffn_bias ? "blk.%d.ffn_up.bias" : NULL, l);
        return linear(b, rlx_gelu_tanh(b->g, u), H, F, "blk.%d.ffn_down.weight",
                      hp->ffn_bias ? "blk.%d.ffn_down.bias" : NULL, l);
    }
    /* gate and up as one product (joined by the loader), then silu(gate) * up
     * as one node reading both halves where they lie */
    rlx_node gu = linear(b, x, 2 * F, H, "blk.%d.ffn_gate_up.weight", NULL, l);
    return linear(b, rlx_glu(b->g, gu, RLX_ACT_SILU), H, F, "blk.%d.ffn_down.weight", NULL, l);
}

rlx_graph *llm_build_step(const llm_hparams *hp, int batch, int seq, int ctx, rlx_dtype wdtype,
                          const llm_storage *storage)
{
    rlx_graph *g = rlx_graph_new();
    if (!g)
        return NULL;
    builder b = {g, hp, wdtype, batch, seq, ctx, storage};
    int64_t B = batch, S = seq, T = ctx, H = hp->hidden;
    rlx_node tokens = rlx_input(g, "tokens", RLX_I64, 2, (int64_t[]){B, S});
    rlx_node pos = rlx_input(g, "pos", RLX_I64, 1, (int64_t[]){B});
    rlx_node last = rlx_input(g, "last", RLX_I64, 1, (int64_t[]){B});

    /* position of row s of sequence b: pos[b] + s, clamped into the tables
     * (an idle sequence's rows, pos = ctx, read the last entry and write
     * nothing) */
    rlx_node p = rlx_add(g, rlx_reshape(g, pos, 2, (int64_t[]){B, 1}), iota(g, S, 0, 2, 1));
    rlx_node pc = rlx_min(g, p, rlx_scalar(g, RLX_I64, (double)(T - 1)));
    rlx_node pos2 = rlx_concat(g, 2, (rlx_node[]){pos, pos}, 0);

    /* the rows of the embedding in its stored dtype, then f32: never the
     * whole table converted (a quantized table: its rows dequantized) */
    int emb_q = storage_of(&b, "token_embd.weight");
    rlx_node emb, emb_u8 = -1, x;
    if (emb_q >= 0) {
        size_t rb = rlx_quant_row_bytes(emb_q, H);
        emb_u8 = rlx_param(g, "token_embd.weight", RLX_U8, 2, (int64_t[]){hp->vocab, (int64_t)rb});
        rlx_node rows = rlx_gather(g, emb_u8, rlx_reshape(g, tokens, 1, (int64_t[]){B * S}), 0);
        x = rlx_reshape(g, rlx_dequantize(g, rows, emb_q, H, RLX_F32), 3, (int64_t[]){B, S, H});
        emb = -1;
    } else {
        emb = rlx_param(g, "token_embd.weight", wdtype, 2, (int64_t[]){hp->vocab, H});
        x = rlx_gather(g, emb, tokens, 0);
        if (wdtype != RLX_F32) {
            x = rlx_cast(g, x, RLX_F32);
            emb = rlx_cast(g, emb, RLX_F32);
        }
    }
    rlx_node cs = -1, sn = -1;
    if (hp->learned_pos) {
        x = rlx_add(g, x, rlx_gather(g, weight(&b, hp->max_ctx, H, "position_embd.weight", 0), pc, 0));
    } else {
        int64_t half = hp->head_dim / 2;
        cs = rlx_reshape(g, rlx_gather(g, rope_table(&b, 0), pc, 0), 4, (int64_t[]){B, 1, S, half});
        sn = rlx_reshape(g, rlx_gather(g, rope_table(&b, 1), pc, 0), 4, (int64_t[]){B, 1, S, half});
    }
    for (int l = 0; l < hp->layers; l++) {
        rlx_node h = norm(&b, x, H, "blk.%d.attn_norm.weight", "blk.%d.attn_norm.bias", l);
        x = rlx_add(g, x, attention(&b, h, l, pos, pos2, cs, sn));
        h = norm(&b, x, H, "blk.%d.ffn_norm.weight", "blk.%d.ffn_norm.bias", l);
        x = rlx_add(g, x, ffn(&b, h, l));
    }
    /* the row of each sequence whose logits are wanted: b * S + last[b] */
    rlx_node rows = rlx_add(g, last, rlx_mul(g, iota(g, B, 0, 1, 0), rlx_scalar(g, RLX_I64, (double)S)));
    x = rlx_gather(g, rlx_reshape(g, x, 2, (int64_t[]){B * S, H}), rows, 0);
    x = norm(&b, x, H, "output_norm.weight", "output_norm.bias", 0);
    rlx_node logits;
    if (hp->tied && emb_q >= 0)
        logits = rlx_qmatmul(g, x, emb_u8, emb_q, H);
    else if (hp->tied)
        logits = rlx_matmul(g, x, emb, 0, 1);
    else
        logits = linear(&b, x, hp->vocab, H, "output.weight", NULL, 0);
    rlx_output(g, "logits", logits);
    /* the most likely next token, so that greedy decoding reads B ids
     * rather than B * vocab logits from the device */
    rlx_output(g, "next", rlx_argmax(g, logits, 1, 0));
    if (rlx_graph_verify(g) != RLX_OK) {
        rlx_graph_free(g);
        return NULL;
    }
    return g;
}
