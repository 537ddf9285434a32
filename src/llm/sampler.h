/* sampler.h - choosing the next token from one row of logits, and the
 * end-of-generation checks (end-of-sequence ids, stop strings).
 *
 * A sampler is made once per generation stream with its parameters and
 * the vocabulary size; it allocates its scratch then, so sampling a token
 * allocates nothing.  The steps, in the order Hugging Face's generate()
 * applies them:
 *
 *   1. repetition penalty: each distinct id among the last repeat_last_n
 *      entries of the history has its logit divided by repeat_penalty when
 *      the logit is > 0, multiplied by it otherwise;
 *   2. greedy when temperature <= 0 or top_k == 1: the largest logit, the
 *      lowest id among equal ones;
 *   3. temperature: weights w_i = exp((l_i - l_max) / T), so p = w / sum(w)
 *      is softmax(l / T);
 *   4. top-k: only the k largest logits (equal logits ordered by id, lowest
 *      first) stay;
 *   5. top-p: of what is left, the shortest prefix in that order whose
 *      probability (renormalised over what is left) reaches top_p;
 *   6. min-p: tokens with p_i < min_p * p_max are dropped;
 *   7. one draw from what remains, in proportion to w.
 *
 * Costs per call, V the vocabulary: O(V) for the penalty and the draw.
 * Top-k is one pass keeping a min-heap of the k best so far (a token that
 * does not beat the worst of them costs one comparison), and only those k
 * are weighed.  Top-p without top-k weighs every token, bins the weights by
 * -ln(w) (1024 bins of 1/32 nat) and ranks only the tokens of the bin
 * where the running mass reaches top_p, through a heap taken from until it
 * does.  No call sorts the vocabulary, except in effect when that one bin
 * holds most of it (logits nearly all equal).
 *
 * Non-finite logits: a NaN logit is treated as -inf (never chosen).  When
 * some logits are +inf, the choice is among those alone, with equal
 * weight (the limit of the softmax); their order for top-k/top-p is by id.
 * When every logit is NaN or -inf there is nothing to choose:
 * rlx_sampler_sample returns -1 and sets rlx_last_error().
 *
 * The random numbers come from xoshiro256** seeded through splitmix64, so a
 * seed gives the same stream everywhere; the draws follow it as long as
 * expf rounds the same way.
 */
#ifndef RLX_LLM_SAMPLER_H
#define RLX_LLM_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "rlx.h"

typedef struct rlx_sampler_params {
    float temperature;    /* <= 0: greedy                                 */
    int top_k;            /* <= 0: off                                    */
    float top_p;          /* in [0, 1]; 1: off (0 keeps the top token)     */
    float min_p;          /* in [0, 1]; 0: off                            */
    float repeat_penalty; /* > 0; 1: off                                  */
    int repeat_last_n;    /* history entries the penalty looks at; 0: none, -1: all */
    uint64_t seed;
} rlx_sampler_params;

typedef struct rlx_sampler rlx_sampler;

/* Neutral values: temperature 1, top_k 0, top_p 1, min_p 0, penalty 1,
 * repeat_last_n 64, seed 0 (plain sampling from softmax(logits)). */
void rlx_sampler_params_init(rlx_sampler_params *p);

/* RLX_ERR_INVALID_ARGUMENT for a NULL pointer, n_vocab < 1, a NaN
 * temperature, top_p or min_p outside [0, 1], repeat_penalty not finite
 * and > 0, repeat_last_n < -1. */
rlx_status rlx_sampler_new(const rlx_sampler_params *p, int n_vocab, rlx_sampler **out);
void rlx_sampler_free(rlx_sampler *s);

/* Restarts the random stream (the stream a new sampler with this seed has). */
void rlx_sampler_set_seed(rlx_sampler *s, uint64_t seed);

/* The next token for logits[n_vocab].  history[n_history] are the ids so
 * far (prompt and generated; may be NULL when n_history is 0), read by the
 * repetition penalty only; ids outside [0, n_vocab) in it are ignored.
 * Returns an id in [0, n_vocab), or -1 (rlx_last_error set) for a NULL
 * sampler or logits, or logits with no finite or +inf value. */
int32_t rlx_sampler_sample(rlx_sampler *s, const float *logits, const int32_t *history, int n_history);

/* The distribution rlx_sampler_sample draws from, as probs[n_vocab]
 * (zero for the tokens the filters drop; one-hot when greedy).  Draws no
 * random number.  RLX_ERR_RUNTIME when no logit is finite or +inf. */
rlx_status rlx_sampler_probs(rlx_sampler *s, const float *logits, const int32_t *history, int n_history, float *probs);

/* Step 1 alone: out[n_vocab] = logits with the repetition penalty applied
 * (NaN stays NaN).  out may be logits itself. */
rlx_status rlx_sampler_penalize(rlx_sampler *s, const float *logits, const int32_t *history, int n_history, float *out);

/* ------------------------------------------------------------ stopping */

#define RLX_STOP_MAX_EOS 16
#define RLX_STOP_MAX_STRINGS 16
#define RLX_STOP_BYTES 1024

/* End-of-sequence ids and stop strings, held by value (no allocation; the
 * strings are copied into `bytes`).  Initialise with rlx_stop_init. */
typedef struct rlx_stop {
    int32_t eos[RLX_STOP_MAX_EOS];
    int n_eos;
    uint16_t off[RLX_STOP_MAX_STRINGS], len[RLX_STOP_MAX_STRINGS];
    int n_strings;
    size_t used, max_len;
    char bytes[RLX_STOP_BYTES];
} rlx_stop;

void rlx_stop_init(rlx_stop *st);
/* RLX_ERR_INVALID_ARGUMENT when full (or, for a string, empty or NULL). */
rlx_status rlx_stop_add_eos(rlx_stop *st, int32_t id);
rlx_status rlx_stop_add_string(rlx_stop *st, const char *str);
/* 1 when id is one of the end-of-sequence ids. */
int rlx_stop_is_eos(const rlx_stop *st, int32_t id);

/* Looks for a stop string in text[0, len), the text generated so far (not
 * NUL-terminated necessarily).  `checked` is the length already searched by
 * an earlier call that found nothing (0 the first time), so only
 * occurrences that end past it are looked for, which catches a stop string
 * split across tokens.  Returns the offset of the earliest one (the caller
 * keeps text[0, offset)), with its length in *match_len when not NULL, or
 * -1 when there is none. */
ptrdiff_t rlx_stop_find(const rlx_stop *st, const char *text, size_t len, size_t checked, size_t *match_len);

/* The length of the longest tail of text[0, len) that is a proper prefix
 * of a stop string: bytes a streaming caller should hold back until the
 * next token shows whether a stop string begins there. */
size_t rlx_stop_holdback(const rlx_stop *st, const char *text, size_t len);

#endif
