/* decoder.c - the Qwen3-shaped decoder workloads (WORKLOADS.md `decoder`
 * and `decoder-small`) built through the public C API: token embedding,
 * per layer pre-RMSNorm grouped-query attention (q/k RMSNorm per head, RoPE)
 * and a SwiGLU FFN with residuals, final RMSNorm, and logits through the
 * tied embedding.  This is the prefill graph over `seq` tokens from position
 * 0 (causal); decoding with a KV cache is not built here yet. */
#include <stdio.h>
#include <string.h>

#include "ir/ir.h"
#include "models/workloads.h"

rlx_decoder_config rlx_decoder_small(int seq)
{
    rlx_decoder_config c = {1, seq, 8, 512, 8, 4, 64, 1536, 32000, 1e6, 1e-6, RLX_F32};
    return c;
}

rlx_decoder_config rlx_decoder_qwen3_06b(int seq)
{
    rlx_decoder_config c = {1, seq, 28, 1024, 16, 8, 128, 3072, 151936, 1e6, 1e-6, RLX_BF16};
    return c;
}

static rlx_node mat(rlx_graph *g, const char *layer, const char *leaf, int64_t a, int64_t b, rlx_dtype t)
{
    char name[96];
    snprintf(name, sizeof name, "%s.%s", layer, leaf);
    return b ? rlx_param(g, name, t, 2, (int64_t[]){a, b}) : rlx_param(g, name, t, 1, (int64_t[]){a});
}

/* x [B,S,hidden] @ w -> heads [B, h, S, d], with an optional per-head RMS
 * norm (before the transpose, as Qwen3 does) and RoPE. */
static rlx_node heads(rlx_graph *g, const rlx_decoder_config *c, rlx_node x, const char *layer, const char *which,
                      int64_t h, rlx_node gamma, int rope)
{
    static const int to_heads[4] = {0, 2, 1, 3};
    rlx_node y = rlx_matmul(g, x, mat(g, layer, which, c->hidden, h * c->head_dim, c->dtype), 0, 0);
    y = rlx_reshape(g, y, 4, (int64_t[]){c->batch, c->seq, h, c->head_dim});
    if (gamma >= 0)
        y = rlx_rms_norm(g, y, gamma, c->eps);
    y = rlx_transpose(g, y, to_heads);
    return rope ? rlx_rope(g, y, c->rope_theta, 0, 0) : y;
}

rlx_graph *rlx_workload_decoder(const rlx_decoder_config *c)
{
    static const int to_tokens[4] = {0, 2, 1, 3};
    rlx_graph *g = rlx_graph_new();
    if (!g)
        return NULL;
    rlx_dtype t = c->dtype;
    int64_t B = c->batch, S = c->seq, Hd = c->hidden;
    rlx_node ids = rlx_input(g, "input_ids", RLX_I64, 2, (int64_t[]){B, S});
    rlx_node emb = mat(g, "embed", "w", c->vocab, Hd, t);
    rlx_node x = rlx_gather(g, emb, ids, 0); /* [B, S, hidden] */
    for (int l = 0; l < c->layers; l++) {
        char p[32];
        snprintf(p, sizeof p, "l%d", l);
        rlx_node h = rlx_rms_norm(g, x, mat(g, p, "attn_norm.g", Hd, 0, t), c->eps);
        rlx_node q = heads(g, c, h, p, "q.w", c->heads, mat(g, p, "q_norm.g", c->head_dim, 0, t), 1);
        rlx_node k = heads(g, c, h, p, "k.w", c->kv_heads, mat(g, p, "k_norm.g", c->head_dim, 0, t), 1);
        rlx_node v = heads(g, c, h, p, "v.w", c->kv_heads, -1, 0);
        rlx_node a = rlx_attention(g, q, k, v, -1, 1, 0.0);
        a = rlx_reshape(g, rlx_transpose(g, a, to_tokens), 3, (int64_t[]){B, S, (int64_t)c->heads * c->head_dim});
        a = rlx_matmul(g, a, mat(g, p, "o.w", (int64_t)c->heads * c->head_dim, Hd, t), 0, 0);
        x = rlx_add(g, x, a);
        h = rlx_rms_norm(g, x, mat(g, p, "ffn_norm.g", Hd, 0, t), c->eps);
        rlx_node gate = rlx_silu(g, rlx_matmul(g, h, mat(g, p, "gate.w", Hd, c->ffn, t), 0, 0));
        rlx_node up = rlx_matmul(g, h, mat(g, p, "up.w", Hd, c->ffn, t), 0, 0);
        rlx_node f = rlx_matmul(g, rlx_mul(g, gate, up), mat(g, p, "down.w", c->ffn, Hd, t), 0, 0);
        x = rlx_add(g, x, f);
    }
    x = rlx_rms_norm(g, x, mat(g, "final_norm", "g", Hd, 0, t), c->eps);
    rlx_output(g, "logits", rlx_matmul(g, x, emb, 0, 1)); /* tied: x @ embed^T */
    if (rlx_graph_verify(g) != RLX_OK) {
        rlx_graph_free(g);
        return NULL;
    }
    return g;
}

rlx_status rlx_decoder_train_graph(int batch, int seq, int vocab, int layers, rlx_graph **out)
{
    if (!out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "decoder train graph: out is NULL");
    *out = NULL;
    if (batch < 1 || seq < 1 || vocab < 2 || layers < 0 || layers > 256)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "decoder train graph: batch %d, seq %d, vocab %d, layers %d out of range", batch, seq,
                             vocab, layers);
    rlx_decoder_config c = rlx_decoder_small(seq);
    c.batch = batch;
    c.vocab = vocab;
    if (layers)
        c.layers = layers;
    rlx_graph *g = rlx_workload_decoder(&c);
    if (!g)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "decoder train graph: building it failed");
    rlx_node logits = -1;
    for (int i = 0; i < g->n_outputs; i++)
        if (!strcmp(g->outputs[i].name, "logits"))
            logits = g->outputs[i].node;
    rlx_node labels = rlx_input(g, "labels", RLX_I64, 2, (int64_t[]){batch, seq});
    rlx_status s = rlx_output(g, "loss", rlx_cross_entropy(g, logits, labels, -100, 0.0));
    if (s == RLX_OK)
        s = rlx_graph_verify(g);
    if (s != RLX_OK) {
        rlx_graph_free(g);
        return s;
    }
    *out = g;
    return RLX_OK;
}
