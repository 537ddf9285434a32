/* workloads.h - the benchmark workloads of WORKLOADS.md built through the
 * public API, and their seeded weights (normal, std 0.02; biases 0; norm
 * gains 1).  Used by `rlx run`, the tests and the benchmarks. */
#ifndef RLX_MODELS_WORKLOADS_H
#define RLX_MODELS_WORKLOADS_H

#include "rlx.h"

typedef struct rlx_encoder_config {
    int batch, seq, layers, hidden, heads, ffn, vocab, max_pos;
    double eps;
} rlx_encoder_config;

/* MiniLM-L6 shape at the given batch and sequence length. */
rlx_encoder_config rlx_encoder_minilm(int batch, int seq);

/* mlp: x [batch, 1024] -> 4096 -> 4096 -> 1024 with GELU between.
 * Input "x", output "y". */
rlx_graph *rlx_workload_mlp(int batch, rlx_dtype t);
/* encoder: input "input_ids" i64 [batch, seq], output "hidden" f32
 * [batch, seq, hidden].  Post-LayerNorm BERT with learned positions. */
rlx_graph *rlx_workload_encoder(const rlx_encoder_config *c);

/* resnet50: ResNet-50 v1.5 with BatchNorm folded (conv + bias); input
 * "image" [batch, 3, 224, 224], output "logits" [batch, 1000]. */
rlx_graph *rlx_workload_resnet50(int batch, rlx_dtype t);

/* decoder: Qwen3-shaped decoder, prefill over `seq` tokens (causal, from
 * position 0; no KV cache yet).  Input "input_ids" i64 [batch, seq], output
 * "logits" [batch, seq, vocab]. */
typedef struct rlx_decoder_config {
    int batch, seq, layers, hidden, heads, kv_heads, head_dim, ffn, vocab;
    double rope_theta, eps;
    rlx_dtype dtype;
} rlx_decoder_config;
rlx_decoder_config rlx_decoder_small(int seq);     /* decoder-small, f32 */
rlx_decoder_config rlx_decoder_qwen3_06b(int seq); /* decoder (Qwen3-0.6B shape), bf16 */
rlx_graph *rlx_workload_decoder(const rlx_decoder_config *c);

/* Sets every param of the session from a seeded generator by the naming
 * rule: names ending ".b" zero, ".g" one, anything else normal(0, 0.02). */
rlx_status rlx_workload_init_params(rlx_session *s, uint64_t seed);
/* The values init_params gives the param `name` (the index-th param of the
 * session), as f32. */
void rlx_workload_param_f32(const char *name, int index, size_t count, uint64_t seed, float *out);

#endif
