/* config.c - a model's hyperparameters from a Hugging Face config.json
 * (read with cJSON), with the defaults each architecture's config class
 * applies, and the checks that every later stage relies on. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "llm/llm.h"

static double num(const cJSON *o, const char *key, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static int flag(const cJSON *o, const char *key, int def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* A token id, or the first of a list of them; -1 if absent. */
static int token_id(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsArray(v))
        v = cJSON_GetArrayItem(v, 0);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
}

static rlx_status read_rope_scaling(const cJSON *root, llm_hparams *hp)
{
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs))
        return RLX_OK;
    if (!cJSON_IsObject(rs))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "config.json: rope_scaling is not an object");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!cJSON_IsString(t))
        t = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "default";
    hp->rope_factor = num(rs, "factor", 1.0);
    if (!strcmp(type, "default"))
        return RLX_OK;
    if (!strcmp(type, "linear")) {
        hp->rope_scaling = LLM_ROPE_LINEAR;
        return RLX_OK;
    }
    if (!strcmp(type, "llama3")) {
        hp->rope_scaling = LLM_ROPE_LLAMA3;
        hp->rope_low_freq = num(rs, "low_freq_factor", 1.0);
        hp->rope_high_freq = num(rs, "high_freq_factor", 4.0);
        hp->rope_orig_ctx = (int)num(rs, "original_max_position_embeddings", 8192);
        return RLX_OK;
    }
    return rlx_set_error(RLX_ERR_UNSUPPORTED,
                         "config.json: rope_scaling type '%s' is not supported (default, linear, llama3 are)", type);
}

rlx_status llm_hparams_from_hf(const cJSON *root, llm_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    rlx_status st = RLX_OK;
    if (!cJSON_IsObject(root))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "config.json is not a JSON object");
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    const cJSON *a0 = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const char *arch = cJSON_IsString(a0) ? a0->valuestring : (cJSON_IsString(mt) ? mt->valuestring : NULL);
    if (!arch) {
        st = rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                           "config.json names no architecture (no 'architectures' or 'model_type')");
        goto done;
    }
    snprintf(hp->arch_name, sizeof hp->arch_name, "%s", arch);
    if (!strcmp(arch, "LlamaForCausalLM") || !strcmp(arch, "MistralForCausalLM") || !strcmp(arch, "llama") ||
        !strcmp(arch, "mistral"))
        hp->arch = LLM_LLAMA;
    else if (!strcmp(arch, "Qwen2ForCausalLM") || !strcmp(arch, "qwen2"))
        hp->arch = LLM_QWEN2;
    else if (!strcmp(arch, "Qwen3ForCausalLM") || !strcmp(arch, "qwen3"))
        hp->arch = LLM_QWEN3;
    else if (!strcmp(arch, "GPT2LMHeadModel") || !strcmp(arch, "gpt2"))
        hp->arch = LLM_GPT2;
    else {
        st = rlx_set_error(RLX_ERR_UNSUPPORTED,
                           "unknown architecture '%s' (supported: LlamaForCausalLM, MistralForCausalLM, "
                           "Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel)",
                           arch);
        goto done;
    }
    hp->vocab = (int)num(root, "vocab_size", 0);
    hp->bos = token_id(root, "bos_token_id");
    hp->eos = token_id(root, "eos_token_id");
    if (hp->arch == LLM_GPT2) {
        hp->hidden = (int)num(root, "n_embd", 768);
        hp->layers = (int)num(root, "n_layer", 12);
        hp->heads = (int)num(root, "n_head", 12);
        hp->kv_heads = hp->heads;
        hp->ffn = (int)num(root, "n_inner", 0);
        if (hp->ffn <= 0)
            hp->ffn = 4 * hp->hidden;
        hp->max_ctx = (int)num(root, "n_positions", 1024);
        hp->norm_eps = num(root, "layer_norm_epsilon", 1e-5);
        hp->layer_norm = hp->gelu_ffn = hp->fused_qkv = hp->learned_pos = true;
        hp->qkv_bias = hp->out_bias = hp->ffn_bias = true;
        hp->tied = flag(root, "tie_word_embeddings", 1);
        const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
        if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_new") &&
            strcmp(act->valuestring, "gelu_pytorch_tanh")) {
            st = rlx_set_error(RLX_ERR_UNSUPPORTED, "config.json: GPT-2 activation '%s' is not supported (gelu_new is)",
                               act->valuestring);
            goto done;
        }
    } else {
        hp->hidden = (int)num(root, "hidden_size", 0);
        hp->layers = (int)num(root, "num_hidden_layers", 0);
        hp->heads = (int)num(root, "num_attention_heads", 0);
        hp->kv_heads = (int)num(root, "num_key_value_heads", hp->heads);
        hp->head_dim = (int)num(root, "head_dim", 0);
        hp->ffn = (int)num(root, "intermediate_size", 0);
        hp->max_ctx = (int)num(root, "max_position_embeddings", 2048);
        hp->norm_eps = num(root, "rms_norm_eps", 1e-6);
        hp->rope_theta = num(root, "rope_theta", 10000.0);
        hp->tied = flag(root, "tie_word_embeddings", 0);
        bool attn_bias = flag(root, "attention_bias", 0);
        hp->qkv_bias = attn_bias || hp->arch == LLM_QWEN2;
        hp->out_bias = attn_bias;
        if (flag(root, "mlp_bias", 0)) {
            st = rlx_set_error(RLX_ERR_UNSUPPORTED, "config.json: mlp_bias is not supported");
            goto done;
        }
        hp->qk_norm = hp->arch == LLM_QWEN3;
        /* a window only matters past its length: contexts are limited to it */
        const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
        if (cJSON_IsNumber(sw) && sw->valuedouble >= 1 && flag(root, "use_sliding_window", 1))
            hp->sliding_window = (int)sw->valuedouble;
        if ((st = read_rope_scaling(root, hp)) != RLX_OK)
            goto done;
    }
    st = llm_hparams_check(hp);
done:
    return st;
}

rlx_status llm_hparams_check(llm_hparams *hp)
{
    if (hp->heads > 0 && hp->head_dim <= 0 && hp->hidden % hp->heads == 0)
        hp->head_dim = hp->hidden / hp->heads;
    if (hp->kv_heads <= 0)
        hp->kv_heads = hp->heads;
    const int big = 1 << 20;
    if (hp->layers < 1 || hp->layers > 4096 || hp->hidden < 1 || hp->hidden > big || hp->heads < 1 ||
        hp->heads > 4096 || hp->head_dim < 2 || hp->head_dim > 4096 || hp->ffn < 1 || hp->ffn > big || hp->vocab < 1 ||
        hp->vocab > (1 << 24) || hp->max_ctx < 1)
        return rlx_set_error(
            RLX_ERR_INVALID_ARGUMENT,
            "%s: unusable sizes (layers %d, hidden %d, heads %d, head_dim %d, ffn %d, vocab %d, context %d)",
            hp->arch_name, hp->layers, hp->hidden, hp->heads, hp->head_dim, hp->ffn, hp->vocab, hp->max_ctx);
    if (hp->kv_heads > hp->heads || hp->heads % hp->kv_heads)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: %d query heads are not a multiple of %d key/value heads",
                             hp->arch_name, hp->heads, hp->kv_heads);
    if (hp->head_dim % 2)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: head dim %d is odd (RoPE rotates pairs)", hp->arch_name,
                             hp->head_dim);
    if (!hp->learned_pos && !(hp->rope_theta > 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: RoPE theta %g is not positive", hp->arch_name,
                             hp->rope_theta);
    if (hp->rope_scaling != LLM_ROPE_NONE && !(hp->rope_factor > 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: RoPE scaling factor %g is not positive", hp->arch_name,
                             hp->rope_factor);
    if (hp->rope_scaling == LLM_ROPE_LLAMA3 &&
        !(hp->rope_high_freq > hp->rope_low_freq && hp->rope_low_freq > 0 && hp->rope_orig_ctx > 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "%s: llama3 RoPE scaling needs high_freq_factor > low_freq_factor > 0", hp->arch_name);
    if (!(hp->norm_eps >= 0))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "%s: norm epsilon %g is negative", hp->arch_name, hp->norm_eps);
    if (hp->bos >= hp->vocab)
        hp->bos = -1;
    if (hp->eos >= hp->vocab)
        hp->eos = -1;
    return RLX_OK;
}
