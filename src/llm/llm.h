/* llm.h - decoder LLMs inside the library: hyperparameters read from a
 * checkpoint's config, weights by canonical name, the graphs a model
 * compiles to (one step graph, built at a batch and a token count) and the
 * generation context that runs them with a KV cache.
 *
 * Canonical weight names are llama.cpp's GGUF names (token_embd.weight,
 * blk.N.attn_q.weight, ...); a Hugging Face checkpoint's names are mapped to
 * them when it is opened.  Uses io, ir and runtime; knows no backend. */
#ifndef RLX_LLM_H
#define RLX_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

typedef enum llm_arch { LLM_LLAMA = 0, LLM_QWEN2, LLM_QWEN3, LLM_GPT2 } llm_arch;

typedef enum llm_rope_scaling { LLM_ROPE_NONE = 0, LLM_ROPE_LINEAR, LLM_ROPE_LLAMA3 } llm_rope_scaling;

typedef struct llm_hparams {
    llm_arch arch;
    char arch_name[64]; /* as the checkpoint names it (LlamaForCausalLM, qwen3, ...) */
    int layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
    int max_ctx;        /* positions the model was trained for (learned positions: the table's size) */
    int sliding_window; /* Mistral's attention window (0: none); contexts are kept within it */
    double norm_eps;
    double rope_theta;
    llm_rope_scaling rope_scaling;
    double rope_factor;                   /* linear and llama3 */
    double rope_low_freq, rope_high_freq; /* llama3 */
    int rope_orig_ctx;                    /* llama3 */
    bool rope_interleaved;                /* adjacent pairs (llama in GGUF, whose q/k rows are permuted) */
    bool layer_norm;                      /* LayerNorm with bias (gpt2), else RMSNorm */
    bool gelu_ffn;                        /* up -> gelu(tanh) -> down (gpt2), else SwiGLU */
    bool qkv_bias, out_bias, ffn_bias;
    bool qk_norm;                   /* per-head RMSNorm of q and k before RoPE (qwen3) */
    bool fused_qkv;                 /* one attn_qkv projection (gpt2) */
    bool learned_pos;               /* position_embd (gpt2) */
    bool tied;                      /* no output.weight: logits through token_embd */
    const float *rope_freq_factors; /* head_dim / 2 divisors of RoPE's frequencies (GGUF rope_freqs.weight), or NULL */
    int bos, eos;                   /* -1 if unknown */
} llm_hparams;

/* One tensor of a checkpoint, in row-major order.  in_out: a projection
 * stored [in, out] (GPT-2's Conv1D in Hugging Face files) rather than
 * [out, in]. */
typedef struct llm_tensor {
    rlx_dtype dtype; /* RLX_DTYPE_COUNT: block-quantized, of type qtype */
    int qtype;       /* the ggml type id of a block-quantized tensor */
    int ndim;
    int64_t dims[4];
    const void *data;
    size_t bytes;
    bool in_out;
} llm_tensor;

/* Where a model's weights come from. */
typedef struct llm_source {
    void *ctx;
    /* RLX_ERR_NOT_FOUND (message set) when the checkpoint has no such tensor */
    rlx_status (*get)(void *ctx, const char *name, llm_tensor *t);
    void (*close)(void *ctx);
} llm_source;

struct cJSON;
/* Hyperparameters of a Hugging Face config.json (parsed). */
rlx_status llm_hparams_from_hf(const struct cJSON *config, llm_hparams *hp);
struct rlx_tokenizer;
/* A GGUF file or a safetensors folder: hyperparameters, weights and the
 * tokenizer (*tok NULL when the checkpoint has none: a GGUF without
 * tokenizer.ggml.*, a folder without tokenizer.json). */
rlx_status llm_open_checkpoint(const char *path, llm_hparams *hp, llm_source *src, struct rlx_tokenizer **tok);
/* The canonical (GGUF) name of a Hugging Face tensor name; false when it
 * has none. */
bool llm_gguf_name_of_hf(bool gpt2, const char *hf, char *out, size_t n);
/* The shape of canonical weight `name` in a model of hp; its rank, or 0
 * for a name the model's graphs never read. */
int llm_canonical_shape(const llm_hparams *hp, const char *name, int64_t *dims);
/* Sets the derived defaults and checks the numbers are usable. */
rlx_status llm_hparams_check(llm_hparams *hp);

/* A built-in model: the `decoder` (Qwen3-0.6B) or `decoder-small` shape of
 * WORKLOADS.md with seeded weights, made as they are read. */
rlx_status llm_default_model(const char *shape, uint64_t seed, llm_hparams *hp, llm_source *src);

/* The step graph: `batch` sequences of `seq` new tokens each.
 * inputs:  tokens i64 [batch, seq]; pos i64 [batch] (the position of each
 *          sequence's first new token; pos = ctx marks a sequence idle: it
 *          writes nothing); last i64 [batch] (which of the seq rows gives
 *          the logits).
 * params:  the weights, by canonical name ([out, in] for projections), and
 *          the KV cache cache.N.k / cache.N.v [batch, kv_heads, ctx, head_dim],
 *          all in `wdtype` (f32, or the 16-bit type the model computes in).
 * output:  logits f32 [batch, vocab]. */
/* How a weight is stored, for the builder: the rlx_qtype of a weight kept
 * quantized (a u8 param [rows, row bytes] its products read as they are),
 * LLM_FLOAT for one loaded as floats, LLM_MIXED for a joined weight whose
 * parts are stored in different quantized types (built part by part). */
enum { LLM_FLOAT = -1, LLM_MIXED = -2 };
typedef struct llm_storage {
    void *ctx;
    int (*qtype)(void *ctx, const char *name);
} llm_storage;
/* The checkpoint names of the parts of a weight the graphs read joined
 * (blk.N.attn_qkv.weight: attn_q, attn_k, attn_v), NULL-terminated in
 * parts[0..3] with buffers of `cap` bytes; the count, 0 when `name` is not
 * joined. */
int llm_joined_parts(const char *name, char parts[4][128]);
/* storage NULL: every weight as floats. */
rlx_graph *llm_build_step(const llm_hparams *hp, int batch, int seq, int ctx, rlx_dtype wdtype,
                          const llm_storage *storage);

#endif
