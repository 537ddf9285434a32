/* checkpoint.c - a model's hyperparameters and weights from a GGUF file
 * (llama.cpp's metadata keys and tensor names) or a Hugging Face folder
 * (config.json and safetensors, whose tensor names are mapped to the
 * canonical GGUF ones here). */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "llm/llm.h"
#include "llm/tokenizer.h"

typedef struct ckpt {
    rlx_weights *w;
    bool hf; /* Hugging Face names */
    bool gpt2;
    float *rope_freqs; /* owned copy of rope_freqs.weight, or NULL */
} ckpt;

static bool has_tensor(const rlx_weights *w, const char *name)
{
    const rlx_weight_view *v;
    return rlx_weights_find(w, name, &v) == RLX_OK;
}

/* Canonical (GGUF) weight names and their Hugging Face names: per layer
 * (blk.N. / model.layers.N. or h.N.) and global. */
static const char *llama[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},          {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_k.bias", "self_attn.k_proj.bias"},          {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_v.bias", "self_attn.v_proj.bias"},          {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_output.bias", "self_attn.o_proj.bias"},     {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},       {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
static const char *gpt2_layer[][2] = {
    {"attn_norm.weight", "ln_1.weight"},          {"attn_norm.bias", "ln_1.bias"},
    {"attn_qkv.weight", "attn.c_attn.weight"},    {"attn_qkv.bias", "attn.c_attn.bias"},
    {"attn_output.weight", "attn.c_proj.weight"}, {"attn_output.bias", "attn.c_proj.bias"},
    {"ffn_norm.weight", "ln_2.weight"},           {"ffn_norm.bias", "ln_2.bias"},
    {"ffn_up.weight", "mlp.c_fc.weight"},         {"ffn_up.bias", "mlp.c_fc.bias"},
    {"ffn_down.weight", "mlp.c_proj.weight"},     {"ffn_down.bias", "mlp.c_proj.bias"},
};
static const char *llama_global[][2] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
static const char *gpt2_global[][2] = {
    {"token_embd.weight", "wte.weight"}, {"position_embd.weight", "wpe.weight"}, {"output_norm.weight", "ln_f.weight"},
    {"output_norm.bias", "ln_f.bias"},   {"output.weight", "lm_head.weight"},
};

/* The Hugging Face name of canonical weight `name` (in_out: stored [in, out]). */
static bool hf_name(bool gpt2, const char *name, char *out, size_t n, bool *in_out)
{
    *in_out = false;
    int layer;
    char rest[64];
    if (sscanf(name, "blk.%d.%63s", &layer, rest) == 2) {
        size_t k = gpt2 ? sizeof gpt2_layer / sizeof gpt2_layer[0] : sizeof llama / sizeof llama[0];
        for (size_t i = 0; i < k; i++) {
            const char *const *row = gpt2 ? gpt2_layer[i] : llama[i];
            if (strcmp(rest, row[0]))
                continue;
            snprintf(out, n, gpt2 ? "h.%d.%s" : "model.layers.%d.%s", layer, row[1]);
            *in_out = gpt2 && strstr(row[1], "c_") && strstr(row[1], ".weight"); /* GPT-2's Conv1D */
            return true;
        }
        return false;
    }
    size_t k = gpt2 ? sizeof gpt2_global / sizeof gpt2_global[0] : sizeof llama_global / sizeof llama_global[0];
    for (size_t i = 0; i < k; i++) {
        const char *const *row = gpt2 ? gpt2_global[i] : llama_global[i];
        if (!strcmp(name, row[0])) {
            snprintf(out, n, "%s", row[1]);
            return true;
        }
    }
    return false;
}

bool llm_gguf_name_of_hf(bool gpt2, const char *hf, char *out, size_t n)
{
    int layer, used = 0;
    if (gpt2 && !strncmp(hf, "transformer.", 12))
        hf += 12;
    if (sscanf(hf, gpt2 ? "h.%d.%n" : "model.layers.%d.%n", &layer, &used) == 1 && used > 0) {
        size_t k = gpt2 ? sizeof gpt2_layer / sizeof gpt2_layer[0] : sizeof llama / sizeof llama[0];
        for (size_t i = 0; i < k; i++) {
            const char *const *row = gpt2 ? gpt2_layer[i] : llama[i];
            if (!strcmp(hf + used, row[1])) {
                snprintf(out, n, "blk.%d.%s", layer, row[0]);
                return true;
            }
        }
        return false;
    }
    size_t k = gpt2 ? sizeof gpt2_global / sizeof gpt2_global[0] : sizeof llama_global / sizeof llama_global[0];
    for (size_t i = 0; i < k; i++) {
        const char *const *row = gpt2 ? gpt2_global[i] : llama_global[i];
        if (!strcmp(hf, row[1])) {
            snprintf(out, n, "%s", row[0]);
            return true;
        }
    }
    return false;
}

static rlx_status ckpt_get(void *ctx, const char *name, llm_tensor *t)
{
    ckpt *c = ctx;
    const rlx_weight_view *v = NULL;
    char stored[160];
    bool in_out = false;
    memset(t, 0, sizeof *t);
    if (c->hf) {
        if (!hf_name(c->gpt2, name, stored, sizeof stored, &in_out))
            return rlx_set_error(RLX_ERR_NOT_FOUND, "no Hugging Face name for weight '%s'", name);
        rlx_status st = rlx_weights_find(c->w, stored, &v);
        if (st != RLX_OK && c->gpt2) { /* GPT-2 files name tensors with or without "transformer." */
            char alt[200];
            snprintf(alt, sizeof alt, "transformer.%s", stored);
            st = rlx_weights_find(c->w, alt, &v);
        }
        if (st != RLX_OK)
            return rlx_set_error(RLX_ERR_NOT_FOUND, "the checkpoint has no tensor '%s' (weight %s)", stored, name);
    } else {
        rlx_status st = rlx_weights_find(c->w, name, &v);
        if (st != RLX_OK)
            return st;
    }
    int64_t block = 0;
    if (v->ggml_type >= 0 && rlx_ggml_type_size(v->ggml_type, &block, NULL) && block > 1) {
        t->dtype = RLX_DTYPE_COUNT; /* block-quantized: its bytes as they are */
        t->qtype = v->ggml_type;
    } else {
        rlx_status st = rlx_weight_view_dtype(v, &t->dtype);
        if (st != RLX_OK)
            return st;
    }
    if (v->ndim > 4)
        return rlx_set_error(RLX_ERR_SHAPE, "tensor '%s' has rank %d", v->name, v->ndim);
    t->ndim = v->ndim;
    memcpy(t->dims, v->dims, sizeof(int64_t) * (size_t)v->ndim);
    t->data = v->data;
    t->bytes = v->nbytes;
    t->in_out = in_out;
    return RLX_OK;
}

static void ckpt_close(void *ctx)
{
    ckpt *c = ctx;
    if (!c)
        return;
    rlx_weights_close(c->w);
    free(c->rope_freqs);
    free(c);
}

/* ------------------------------------------------------------ GGUF metadata */

static rlx_status gguf_int(const rlx_gguf *g, const char *arch, const char *key, int def, int *out)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    int64_t v;
    rlx_status st = rlx_gguf_get_i64(g, full, def, &v);
    if (st != RLX_OK && st != RLX_ERR_NOT_FOUND) /* absent: the default, checked with the rest later */
        return st;
    if (v < -1 || v > (int64_t)1 << 30)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf: %s = %lld is out of range", full, (long long)v);
    *out = (int)v;
    return RLX_OK;
}

static rlx_status gguf_num(const rlx_gguf *g, const char *arch, const char *key, double def, double *out)
{
    char full[160];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    rlx_status st = rlx_gguf_get_f64(g, full, def, out);
    return st == RLX_ERR_NOT_FOUND ? RLX_OK : st;
}

static rlx_status hparams_from_gguf(ckpt *c, const rlx_gguf *g, llm_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    const char *arch;
    size_t alen;
    rlx_status st = rlx_gguf_get_str(g, "general.architecture", NULL, &arch, &alen);
    if (st != RLX_OK || !arch)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf: no general.architecture");
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", arch);
    if (!strcmp(arch, "llama"))
        hp->arch = LLM_LLAMA, hp->rope_interleaved = true; /* q/k rows permuted by llama.cpp's converter */
    else if (!strcmp(arch, "qwen2"))
        hp->arch = LLM_QWEN2;
    else if (!strcmp(arch, "qwen3"))
        hp->arch = LLM_QWEN3, hp->qk_norm = true;
    else if (!strcmp(arch, "gpt2"))
        hp->arch = LLM_GPT2;
    else
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "gguf: unknown architecture '%s' (supported: llama, qwen2, qwen3, gpt2)", arch);
    int kl = 0;
    if ((st = gguf_int(g, arch, "block_count", 0, &hp->layers)) != RLX_OK ||
        (st = gguf_int(g, arch, "embedding_length", 0, &hp->hidden)) != RLX_OK ||
        (st = gguf_int(g, arch, "feed_forward_length", 0, &hp->ffn)) != RLX_OK ||
        (st = gguf_int(g, arch, "attention.head_count", 0, &hp->heads)) != RLX_OK ||
        (st = gguf_int(g, arch, "attention.head_count_kv", 0, &hp->kv_heads)) != RLX_OK ||
        (st = gguf_int(g, arch, "attention.key_length", 0, &kl)) != RLX_OK ||
        (st = gguf_int(g, arch, "context_length", 2048, &hp->max_ctx)) != RLX_OK ||
        (st = gguf_num(g, arch, "rope.freq_base", 10000.0, &hp->rope_theta)) != RLX_OK)
        return st;
    hp->head_dim = kl;
    bool gpt2 = hp->arch == LLM_GPT2;
    if ((st = gguf_num(g, arch, gpt2 ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon",
                       gpt2 ? 1e-5 : 1e-6, &hp->norm_eps)) != RLX_OK)
        return st;
    const rlx_weight_view *emb;
    if ((st = rlx_weights_find(c->w, "token_embd.weight", &emb)) != RLX_OK)
        return st;
    hp->vocab = emb->ndim == 2 ? (int)emb->dims[0] : 0;
    int64_t id;
    hp->bos = rlx_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", -1, &id) == RLX_OK ? (int)id : -1;
    hp->eos = rlx_gguf_get_i64(g, "tokenizer.ggml.eos_token_id", -1, &id) == RLX_OK ? (int)id : -1;
    char key[160];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const char *scaling = NULL;
    if (rlx_gguf_get_str(g, key, NULL, &scaling, &alen) == RLX_OK && scaling && strcmp(scaling, "none")) {
        if (strcmp(scaling, "linear"))
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "gguf: RoPE scaling '%s' is not supported (none, linear are)",
                                 scaling);
        hp->rope_scaling = LLM_ROPE_LINEAR;
        if ((st = gguf_num(g, arch, "rope.scaling.factor", 1.0, &hp->rope_factor)) != RLX_OK)
            return st;
    }
    if (gpt2) {
        hp->kv_heads = hp->heads;
        hp->layer_norm = hp->gelu_ffn = hp->fused_qkv = hp->learned_pos = true;
        hp->qkv_bias = hp->out_bias = hp->ffn_bias = true;
    } else {
        hp->qkv_bias = has_tensor(c->w, "blk.0.attn_q.bias");
        hp->out_bias = has_tensor(c->w, "blk.0.attn_output.bias");
    }
    hp->tied = !has_tensor(c->w, "output.weight");
    return RLX_OK;
}

/* llama.cpp keeps Llama 3's RoPE scaling as a tensor of frequency divisors. */
static rlx_status read_rope_freqs(ckpt *c, llm_hparams *hp)
{
    const rlx_weight_view *v;
    if (rlx_weights_find(c->w, "rope_freqs.weight", &v) != RLX_OK)
        return RLX_OK;
    if (v->dtype != RLX_F32 || v->numel != hp->head_dim / 2)
        return rlx_set_error(RLX_ERR_SHAPE,
                             "rope_freqs.weight: %s with %lld values; f32 with head_dim / 2 = %d expected",
                             v->type_name, (long long)v->numel, hp->head_dim / 2);
    if (!(c->rope_freqs = rlx_malloc((size_t)v->numel * sizeof(float))))
        return RLX_ERR_OUT_OF_MEMORY;
    memcpy(c->rope_freqs, v->data, (size_t)v->numel * sizeof(float));
    for (int64_t i = 0; i < v->numel; i++)
        if (!(c->rope_freqs[i] > 0))
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rope_freqs.weight[%lld] = %g is not positive", (long long)i,
                                 c->rope_freqs[i]);
    hp->rope_freq_factors = c->rope_freqs;
    return RLX_OK;
}

/* ------------------------------------------------------------ tokenizers */

static int64_t gguf_id(const rlx_gguf *g, const char *key)
{
    int64_t v;
    return rlx_gguf_get_i64(g, key, -1, &v) == RLX_OK && v >= 0 && v <= INT32_MAX ? v : -1;
}

static bool gguf_flag(const rlx_gguf *g, const char *key, bool def)
{
    bool b;
    return rlx_gguf_get_bool(g, key, def, &b) == RLX_OK ? b : def;
}

/* The strings of a GGUF string array, as pointer and length arrays. */
static rlx_status gguf_strings(const rlx_gguf_value *v, const char ***ptrs, size_t **lens)
{
    uint64_t n = v->arr.count;
    *ptrs = rlx_malloc((size_t)(n ? n : 1) * sizeof **ptrs);
    *lens = rlx_malloc((size_t)(n ? n : 1) * sizeof **lens);
    if (!*ptrs || !*lens)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: no memory for %llu strings", (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        (*ptrs)[i] = v->arr.items[i].str.ptr;
        (*lens)[i] = (size_t)v->arr.items[i].str.len;
    }
    return RLX_OK;
}

static rlx_status gguf_tokenizer(const rlx_gguf *g, int vocab, rlx_tokenizer **out)
{
    const rlx_gguf_value *tokens = NULL, *scores = NULL, *types = NULL, *merges = NULL;
    if (rlx_gguf_get_array(g, "tokenizer.ggml.tokens", RLX_GGUF_STRING, &tokens) != RLX_OK)
        return RLX_OK; /* no tokenizer in the file */
    rlx_tokenizer_spec sp;
    rlx_tokenizer_spec_init(&sp);
    size_t len;
    if (rlx_gguf_get_str(g, "tokenizer.ggml.model", NULL, &sp.model, &len) != RLX_OK || !sp.model)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "gguf: tokenizer.ggml.tokens without tokenizer.ggml.model");
    if (rlx_gguf_get_str(g, "tokenizer.ggml.pre", NULL, &sp.pre, &len) != RLX_OK)
        sp.pre = NULL;
    if ((int64_t)tokens->arr.count != vocab)
        return rlx_set_error(RLX_ERR_SHAPE, "gguf: the tokenizer has %llu tokens, the embedding %d rows",
                             (unsigned long long)tokens->arr.count, vocab);
    if (rlx_gguf_get_array(g, "tokenizer.ggml.scores", RLX_GGUF_FLOAT32, &scores) != RLX_OK)
        scores = NULL;
    if (rlx_gguf_get_array(g, "tokenizer.ggml.token_type", RLX_GGUF_INT32, &types) != RLX_OK)
        types = NULL;
    if (rlx_gguf_get_array(g, "tokenizer.ggml.merges", RLX_GGUF_STRING, &merges) != RLX_OK)
        merges = NULL;
    if ((scores && scores->arr.count != tokens->arr.count) || (types && types->arr.count != tokens->arr.count))
        return rlx_set_error(RLX_ERR_SHAPE, "gguf: tokenizer scores or token types disagree with the %llu tokens",
                             (unsigned long long)tokens->arr.count);
    const char **tp = NULL, **mp = NULL;
    size_t *tl = NULL, *ml = NULL;
    float *sc = NULL;
    int32_t *ty = NULL;
    rlx_status st = gguf_strings(tokens, &tp, &tl);
    if (st == RLX_OK && merges)
        st = gguf_strings(merges, &mp, &ml);
    size_t n = (size_t)tokens->arr.count;
    if (st == RLX_OK && scores && (sc = rlx_malloc((n ? n : 1) * sizeof *sc)))
        memcpy(sc, scores->arr.raw, n * sizeof *sc);
    if (st == RLX_OK && types && (ty = rlx_malloc((n ? n : 1) * sizeof *ty)))
        memcpy(ty, types->arr.raw, n * sizeof *ty);
    if (st == RLX_OK && ((scores && !sc) || (types && !ty)))
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "tokenizer: no memory for %zu scores", n);
    if (st == RLX_OK) {
        sp.n_tokens = (int64_t)n;
        sp.tokens = tp;
        sp.token_lens = tl;
        sp.scores = sc;
        sp.token_types = ty;
        sp.n_merges = merges ? (int64_t)merges->arr.count : 0;
        sp.merges = merges ? (mp ? mp : (const char *const *)tp) : NULL; /* an empty list stays a list */
        sp.merge_lens = ml;
        sp.bos_id = (int32_t)gguf_id(g, "tokenizer.ggml.bos_token_id");
        sp.eos_id = (int32_t)gguf_id(g, "tokenizer.ggml.eos_token_id");
        sp.unk_id = (int32_t)gguf_id(g, "tokenizer.ggml.unknown_token_id");
        sp.pad_id = (int32_t)gguf_id(g, "tokenizer.ggml.padding_token_id");
        sp.eot_id = (int32_t)gguf_id(g, "tokenizer.ggml.eot_token_id");
        sp.eom_id = (int32_t)gguf_id(g, "tokenizer.ggml.eom_token_id");
        bool spm = !strcmp(sp.model, "llama");
        sp.add_bos = gguf_flag(g, "tokenizer.ggml.add_bos_token", spm);
        sp.add_eos = gguf_flag(g, "tokenizer.ggml.add_eos_token", false);
        sp.add_space_prefix = gguf_flag(g, "tokenizer.ggml.add_space_prefix", spm);
        st = rlx_tokenizer_from_arrays(&sp, out);
    }
    free(tp), free(tl), free(mp), free(ml), free(sc), free(ty);
    return st;
}

/* tokenizer.json beside the config, if there is one. */
static rlx_status hf_tokenizer(const char *path, rlx_tokenizer **out)
{
    char file[4096];
    struct stat sb;
    bool dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    if (dir) {
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
    } else {
        const char *slash = strrchr(path, '/');
        int n = slash ? (int)(slash - path) : 1;
        snprintf(file, sizeof file, "%.*s/tokenizer.json", n, slash ? path : ".");
    }
    if (access(file, F_OK) != 0)
        return RLX_OK;
    return rlx_tokenizer_from_hf_json(file, out);
}

rlx_status llm_open_checkpoint(const char *path, llm_hparams *hp, llm_source *src, rlx_tokenizer **tok)
{
    *tok = NULL;
    ckpt *c = rlx_calloc(1, sizeof *c);
    if (!c)
        return RLX_ERR_OUT_OF_MEMORY;
    rlx_status st = rlx_weights_open(path, &c->w);
    const rlx_gguf *g = st == RLX_OK ? rlx_weights_gguf(c->w) : NULL;
    if (st == RLX_OK && g) {
        if ((st = hparams_from_gguf(c, g, hp)) == RLX_OK && (st = llm_hparams_check(hp)) == RLX_OK &&
            (st = read_rope_freqs(c, hp)) == RLX_OK)
            st = gguf_tokenizer(g, hp->vocab, tok);
    } else if (st == RLX_OK) {
        cJSON *cfg = NULL;
        c->hf = true;
        if ((st = rlx_safetensors_read_config(path, &cfg)) == RLX_OK)
            st = llm_hparams_from_hf(cfg, hp);
        cJSON_Delete(cfg);
        c->gpt2 = hp->arch == LLM_GPT2;
        if (st == RLX_OK) {
            char stored[160];
            bool in_out;
            hf_name(c->gpt2, "output.weight", stored, sizeof stored, &in_out);
            if (!hp->tied && !has_tensor(c->w, stored))
                st = rlx_set_error(RLX_ERR_NOT_FOUND,
                                   "config.json says the output embedding is separate, but the checkpoint has no '%s'",
                                   stored);
            if (!c->gpt2) { /* biases as the checkpoint has them (Qwen2: q/k/v only) */
                hp->qkv_bias = has_tensor(c->w, "model.layers.0.self_attn.q_proj.bias");
                hp->out_bias = has_tensor(c->w, "model.layers.0.self_attn.o_proj.bias");
            }
        }
        if (st == RLX_OK)
            st = hf_tokenizer(path, tok);
    }
    if (st == RLX_OK && *tok && rlx_tokenizer_n_vocab(*tok) > hp->vocab)
        st = rlx_set_error(RLX_ERR_SHAPE, "the tokenizer has %d tokens, the model's vocabulary %d",
                           (int)rlx_tokenizer_n_vocab(*tok), hp->vocab);
    if (st != RLX_OK) {
        rlx_tokenizer_free(*tok);
        *tok = NULL;
        ckpt_close(c);
        return st;
    }
    src->ctx = c;
    src->get = ckpt_get;
    src->close = ckpt_close;
    return RLX_OK;
}
