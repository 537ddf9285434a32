/* generate.c - the generation loop: prefill the prompt, then sample and
 * decode one token at a time, streaming each token's text, until a
 * maximum, an end-of-generation token or a stop string. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "llm/llm_internal.h"
#include "llm/sampler.h"

void rlx_generate_params_init(rlx_generate_params *p)
{
    memset(p, 0, sizeof *p);
    p->max_tokens = 128;
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
}

rlx_status rlx_llm_generate(rlx_llm_context *c, const int32_t *prompt, int n_prompt, const rlx_generate_params *gp,
                            rlx_token_fn fn, void *user, rlx_generate_stats *stats)
{
    if (!c || !prompt || n_prompt < 1)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "generate: a context and a prompt of at least one token are needed");
    rlx_generate_params p;
    if (gp)
        p = *gp;
    else
        rlx_generate_params_init(&p);
    if (p.max_tokens < 0 || n_prompt + p.max_tokens > c->opts.ctx)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "generate: %d prompt tokens + %d new ones exceed the context of %d", n_prompt,
                             p.max_tokens, c->opts.ctx);
    rlx_sampler_params sp;
    rlx_sampler_params_init(&sp);
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.repeat_penalty = p.repeat_penalty;
    sp.repeat_last_n = p.repeat_last_n;
    sp.seed = p.seed;
    rlx_stop stops;
    rlx_stop_init(&stops);
    for (int i = 0; i < p.n_stop; i++)
        if (p.stop[i] && p.stop[i][0] && rlx_stop_add_string(&stops, p.stop[i]) != RLX_OK)
            return RLX_ERR_INVALID_ARGUMENT;
    rlx_sampler *smp = NULL;
    int V = c->model->hp.vocab, total = n_prompt + p.max_tokens;
    rlx_status st = rlx_sampler_new(&sp, V, &smp);
    if (st != RLX_OK)
        return st;
    int32_t *hist = rlx_malloc((size_t)total * sizeof *hist);
    /* the text so far, for stop strings (only when there are any) */
    size_t cap = p.n_stop ? 256 : 0, len = 0;
    char *text = cap ? rlx_malloc(cap) : NULL;
    if (!hist || (cap && !text)) {
        free(hist), free(text), rlx_sampler_free(smp);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "generate: no memory for %d tokens of history", total);
    }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    rlx_generate_stats s = {n_prompt, 0, 0, 0};
    double t0 = rlx_now_ms();
    st = rlx_llm_prefill(c, 1, &prompt, &n_prompt);
    s.prefill_ms = rlx_now_ms() - t0;
    if (st == RLX_OK && p.prompt_logits)
        memcpy(p.prompt_logits, rlx_llm_logits(c, 0), (size_t)V * sizeof(float));
    t0 = rlx_now_ms();
    int n = n_prompt;
    int32_t *step = rlx_calloc((size_t)c->opts.batch, sizeof *step);
    if (!step && st == RLX_OK)
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "generate: no memory");
    for (int b = 1; step && b < c->opts.batch; b++)
        step[b] = -1; /* other sequences stay idle */
    /* plain greedy needs no logits on the host: the device's argmax */
    bool device_greedy = !(sp.temperature > 0) && sp.repeat_penalty == 1.0f && c->opts.batch <= 64;
    while (st == RLX_OK && s.generated_tokens < p.max_tokens) {
        int32_t id, ids[64];
        if (device_greedy) {
            if ((st = rlx_llm_argmax(c, ids)) != RLX_OK)
                break;
            id = ids[0];
        } else {
            const float *logits = rlx_llm_logits(c, 0);
            id = logits ? rlx_sampler_sample(smp, logits, hist, n) : -1;
        }
        if (id < 0) {
            st = rlx_last_status_or(RLX_ERR_INVALID_ARGUMENT);
            break;
        }
        hist[n++] = id;
        s.generated_tokens++;
        if (!p.ignore_eos && rlx_llm_is_eog(c->model, id))
            break;
        char piece[256];
        int k = rlx_llm_token_piece(c->model, id, piece, sizeof piece);
        if (k < 0 || k > (int)sizeof piece)
            k = 0;
        bool stop = false;
        if (p.n_stop) {
            if (len + (size_t)k > cap) {
                size_t nc = (len + (size_t)k) * 2;
                char *t = rlx_realloc(text, nc);
                if (!t) {
                    st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "generate: no memory for the text");
                    break;
                }
                text = t, cap = nc;
            }
            memcpy(text + len, piece, (size_t)k);
            ptrdiff_t at = rlx_stop_find(&stops, text, len + (size_t)k, len, NULL);
            if (at >= 0) { /* give only what precedes the stop string */
                k = at > (long)len ? (int)(at - (long)len) : 0;
                stop = true;
            }
            len += (size_t)k;
        }
        if (fn && (k > 0 || !stop) && fn(user, id, piece, (size_t)k))
            break;
        if (stop || s.generated_tokens == p.max_tokens)
            break;
        step[0] = id;
        st = rlx_llm_decode(c, step);
    }
    s.decode_ms = rlx_now_ms() - t0;
    if (stats)
        *stats = s;
    free(step), free(hist), free(text);
    rlx_sampler_free(smp);
    return st;
}
