/* llm_internal.h - the structs behind rlx_llm and rlx_llm_context. */
#ifndef RLX_LLM_INTERNAL_H
#define RLX_LLM_INTERNAL_H

#include "llm/llm.h"
#include "llm/tokenizer.h"

struct rlx_llm {
    llm_hparams hp;
    llm_source src;
    rlx_tokenizer *tok; /* NULL: bytes are tokens 0-255 (the embedded default) */
};

struct rlx_llm_context {
    rlx_llm *model;
    rlx_llm_options opts;
    rlx_session *prefill, *decode; /* decode reads prefill's params (weights, cache) in place */
    int *pos;                      /* per sequence: tokens in its cache */
    float *logits;                 /* [batch, vocab]: each sequence's last logits */
    float *step_logits;            /* [batch, vocab]: a run's output (batch > 1) */
    /* per sequence: 1 while its latest logits are still only in the decode
     * session's output (copied when asked for: a greedy caller takes the
     * device's argmax and never copies them) */
    bool *in_decode;
    int64_t *next;                      /* [batch]: the decode step's argmax */
    int64_t *tokens, *in_pos, *in_last; /* the step's inputs */
};

#endif
