/* sampler.c - token sampling (see sampler.h for the steps and their order)
 * and the stop checks. */
#include "llm/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

#define RLX_SAMPLER_BINS 1024

struct rlx_sampler {
    rlx_sampler_params p;
    int n;
    uint64_t rng[4];
    float *val;                    /* [n] penalised logits, NaN replaced by -inf */
    float *w;                      /* [n] weights exp((val - max) / T) */
    int32_t *idx;                  /* [n] the kept tokens; heaps while top-k/top-p pick them */
    uint8_t *seen;                 /* [n] all zero between calls */
    double mass[RLX_SAMPLER_BINS]; /* top-p's weight per bin of -ln(w) */
    int32_t best;                  /* the best token of the current call */
    int n_finite;                  /* its count of values above -inf */
};

/* ------------------------------------------------------------ random */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256** */
static uint64_t next_u64(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t s[4]) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

void rlx_sampler_set_seed(rlx_sampler *s, uint64_t seed)
{
    if (!s)
        return;
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
}

/* ------------------------------------------------------------ lifetime */

void rlx_sampler_params_init(rlx_sampler_params *p)
{
    if (!p)
        return;
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
}

rlx_status rlx_sampler_new(const rlx_sampler_params *p, int n_vocab, rlx_sampler **out)
{
    if (!p || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: NULL %s", p ? "out" : "params");
    *out = NULL;
    if (n_vocab < 1)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: n_vocab %d < 1", n_vocab);
    if (isnan(p->temperature))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: temperature is NaN");
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: top_p %g not in [0, 1]", (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: min_p %g not in [0, 1]", (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: repeat_penalty %g is not finite and > 0",
                             (double)p->repeat_penalty);
    if (p->repeat_last_n < -1)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_new: repeat_last_n %d < -1", p->repeat_last_n);
    rlx_sampler *s = rlx_calloc(1, sizeof *s);
    if (!s)
        return RLX_ERR_OUT_OF_MEMORY;
    s->p = *p;
    s->n = n_vocab;
    s->val = rlx_calloc((size_t)n_vocab, sizeof *s->val);
    s->w = s->val ? rlx_calloc((size_t)n_vocab, sizeof *s->w) : NULL;
    s->idx = s->w ? rlx_calloc((size_t)n_vocab, sizeof *s->idx) : NULL;
    s->seen = s->idx ? rlx_calloc((size_t)n_vocab, 1) : NULL;
    if (!s->seen) {
        rlx_sampler_free(s);
        return RLX_ERR_OUT_OF_MEMORY;
    }
    rlx_sampler_set_seed(s, p->seed);
    *out = s;
    return RLX_OK;
}

void rlx_sampler_free(rlx_sampler *s)
{
    if (!s)
        return;
    free(s->val);
    free(s->w);
    free(s->idx);
    free(s->seen);
    free(s);
}

/* ------------------------------------------------------------ steps */

/* out = logits with the penalty on each distinct recent id. */
static void penalize(rlx_sampler *s, const float *logits, const int32_t *hist, int n_hist, float *out)
{
    if (out != logits)
        memcpy(out, logits, (size_t)s->n * sizeof *out);
    float pen = s->p.repeat_penalty;
    if (pen == 1.0f || !hist || n_hist <= 0 || s->p.repeat_last_n == 0)
        return;
    int first = 0;
    if (s->p.repeat_last_n > 0 && n_hist > s->p.repeat_last_n)
        first = n_hist - s->p.repeat_last_n;
    for (int j = first; j < n_hist; j++) {
        int32_t t = hist[j];
        if (t < 0 || t >= s->n || s->seen[t])
            continue;
        s->seen[t] = 1;
        out[t] = out[t] > 0.0f ? out[t] / pen : out[t] * pen;
    }
    for (int j = first; j < n_hist; j++)
        if (hist[j] >= 0 && hist[j] < s->n)
            s->seen[hist[j]] = 0;
}

/* a ranks before b: larger value, then lower id. */
static inline int before(const float *v, int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); }

/* Max-heap (root ranks first) when best_first, else min-heap (root ranks
 * last), over h[0, n). */
static void sift_down(const float *v, int32_t *h, int n, int i, int best_first)
{
    int32_t x = h[i];
    for (;;) {
        int c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && before(v, h[c + 1], h[c]) == best_first)
            c++;
        if (before(v, h[c], x) != best_first)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* Fills s->val (penalised, NaN -> -inf) and returns the index of the best
 * token, or -1 when every value is -inf. */
static int32_t prepare(rlx_sampler *s, const float *logits, const int32_t *hist, int n_hist)
{
    float *v = s->val;
    penalize(s, logits, hist, n_hist, v);
    int32_t best = -1;
    float vbest = -INFINITY;
    int n_finite = 0;
    for (int i = 0; i < s->n; i++) {
        float x = v[i];
        if (x != x) /* NaN */
            v[i] = x = -INFINITY;
        n_finite += x != -INFINITY;
        if (x > vbest) {
            vbest = x;
            best = i;
        }
    }
    s->n_finite = n_finite;
    return best;
}

/* The k best of the tokens above -inf, in ranked order, into idx[0, k)
 * (fewer when fewer are above -inf): a min-heap of the k best so far, so a
 * token that does not beat the worst of them costs one comparison. */
static int top_k_ranked(rlx_sampler *s, int k)
{
    const float *v = s->val;
    int32_t *h = s->idx;
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if (v[i] == -INFINITY)
            continue;
        if (n < k) {
            h[n++] = i;
            if (n == k)
                for (int j = k / 2 - 1; j >= 0; j--)
                    sift_down(v, h, k, j, 0);
        } else if (before(v, i, h[0])) {
            h[0] = i;
            sift_down(v, h, k, 0, 0);
        }
    }
    if (n < k) /* fewer candidates than k: heapify what there is */
        for (int j = n / 2 - 1; j >= 0; j--)
            sift_down(v, h, n, j, 0);
    /* Heap sort: the worst goes to the end each time, so h ends best first. */
    for (int m = n - 1; m > 0; m--) {
        int32_t t = h[0];
        h[0] = h[m];
        h[m] = t;
        sift_down(v, h, m, 0, 0);
    }
    return n;
}

/* Top-p alone: the tokens whose mass, taken in ranked order, first reaches
 * want (of total).  Weights are binned by -ln(w) (RLX_SAMPLER_BINS bins of
 * 1/32 nat; the last takes the rest); every token in a bin before the one
 * where the running mass reaches want is kept as is, and only that bin's
 * tokens are ranked, through a heap taken from until the mass is reached.
 * Leaves the kept tokens in idx[0, return value). */
static int top_p_kept(rlx_sampler *s, double want)
{
    const float *v = s->val, *w = s->w;
    int32_t *idx = s->idx;
    double *mass = s->mass;
    const int n = s->n;
    const float vmax = v[s->best], scale = 32.0f / s->p.temperature;
    memset(mass, 0, RLX_SAMPLER_BINS * sizeof *mass);
#define BIN_OF(i)                                                                                         \
    (v[i] == vmax ? 0                                                                                     \
                  : ((vmax - v[i]) * scale < (float)(RLX_SAMPLER_BINS - 1) ? (int)((vmax - v[i]) * scale) \
                                                                           : RLX_SAMPLER_BINS - 1))
    for (int i = 0; i < n; i++)
        if (w[i] > 0.0f)
            mass[BIN_OF(i)] += w[i];
    double cum = 0.0;
    int cross = RLX_SAMPLER_BINS - 1;
    for (int b = 0; b < RLX_SAMPLER_BINS; b++) {
        if (mass[b] > 0.0 && cum + mass[b] >= want) {
            cross = b;
            break;
        }
        cum += mass[b];
    }
    /* Bins before `cross` to the front, the crossing bin's tokens to the back. */
    int front = 0, back = n;
    for (int i = 0; i < n; i++) {
        if (!(w[i] > 0.0f))
            continue;
        int b = BIN_OF(i);
        if (b < cross)
            idx[front++] = i;
        else if (b == cross)
            idx[--back] = i;
    }
#undef BIN_OF
    int32_t *h = idx + back;
    int m = n - back, taken = 0;
    for (int j = m / 2 - 1; j >= 0; j--)
        sift_down(v, h, m, j, 1);
    /* Each pop moves the next best to the heap's end: h[m - taken, m). */
    while (taken < m) {
        int32_t t = h[0];
        h[0] = h[m - 1 - taken];
        h[m - 1 - taken] = t;
        taken++;
        sift_down(v, h, m - taken, 0, 1);
        cum += w[t];
        if (cum >= want)
            break;
    }
    memmove(idx + front, h + m - taken, (size_t)taken * sizeof *idx);
    return front + taken;
}

/* exp((x - vmax) / T), exactly 1 for the best; with vmax = +inf, 1 for the
 * +inf tokens and 0 for the rest. */
static inline float weight(float x, float vmax, float inv_t)
{
    if (vmax == INFINITY)
        return x == INFINITY ? 1.0f : 0.0f;
    if (x == vmax)
        return 1.0f;
    float d = x - vmax; /* < 0, or -inf (also when it overflows) */
    return d == -INFINITY ? 0.0f : expf(d * inv_t);
}

/* Steps 3-6: the weights into s->w (those of the top k only when top-k
 * cuts), the kept tokens into s->idx[0, *n_kept); returns the sum of their
 * weights. */
static double select_tokens(rlx_sampler *s, int *n_kept)
{
    const float *v = s->val;
    float *w = s->w;
    int32_t *idx = s->idx;
    const float vmax = v[s->best];
    const float inv_t = 1.0f / s->p.temperature;
    const int use_k = s->p.top_k > 0 && s->p.top_k < s->n_finite, use_p = s->p.top_p < 1.0f;
    const float min_p = s->p.min_p;
    int n = 0;
    if (use_k) {
        n = top_k_ranked(s, s->p.top_k);
        for (int j = 0; j < n; j++)
            w[idx[j]] = weight(v[idx[j]], vmax, inv_t);
        if (use_p) {
            double zk = 0.0, c = 0.0;
            for (int j = 0; j < n; j++)
                zk += w[idx[j]];
            double want = (double)s->p.top_p * zk;
            int keep = 0;
            while (keep < n) {
                c += w[idx[keep++]];
                if (c >= want)
                    break;
            }
            n = keep;
        }
    } else {
        /* (a top_k at or above the count of tokens keeps them all) */
        double total = 0.0;
        for (int i = 0; i < s->n; i++)
            total += w[i] = weight(v[i], vmax, inv_t);
        if (use_p)
            n = top_p_kept(s, (double)s->p.top_p * total);
        else
            for (int i = 0; i < s->n; i++)
                if (w[i] > 0.0f)
                    idx[n++] = i;
    }
    /* min-p keeps w >= min_p (p_max has weight 1): a filter, order kept */
    double sum = 0.0;
    int k = 0;
    for (int j = 0; j < n; j++)
        if (w[idx[j]] > 0.0f && w[idx[j]] >= min_p) {
            idx[k++] = idx[j];
            sum += w[idx[j]];
        }
    *n_kept = k;
    return sum;
}

static int greedy_mode(const rlx_sampler *s) { return !(s->p.temperature > 0.0f) || s->p.top_k == 1; }

int32_t rlx_sampler_sample(rlx_sampler *s, const float *logits, const int32_t *history, int n_history)
{
    if (!s || !logits) {
        rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_sample: NULL %s", s ? "logits" : "sampler");
        return -1;
    }
    s->best = prepare(s, logits, history, n_history);
    if (s->best < 0) {
        rlx_set_error(RLX_ERR_RUNTIME, "rlx_sampler_sample: every logit is NaN or -inf");
        return -1;
    }
    if (greedy_mode(s))
        return s->best;
    int n;
    double sum = select_tokens(s, &n);
    double target = next_unit(s->rng) * sum, c = 0.0;
    for (int j = 0; j < n; j++) {
        c += s->w[s->idx[j]];
        if (c > target)
            return s->idx[j];
    }
    /* Rounding left target at the very top: the last kept token (all
     * have weight > 0; the best is always kept). */
    return n > 0 ? s->idx[n - 1] : s->best;
}

rlx_status rlx_sampler_probs(rlx_sampler *s, const float *logits, const int32_t *history, int n_history, float *probs)
{
    if (!s || !logits || !probs)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_probs: NULL argument");
    s->best = prepare(s, logits, history, n_history);
    if (s->best < 0)
        return rlx_set_error(RLX_ERR_RUNTIME, "rlx_sampler_probs: every logit is NaN or -inf");
    memset(probs, 0, (size_t)s->n * sizeof *probs);
    if (greedy_mode(s)) {
        probs[s->best] = 1.0f;
        return RLX_OK;
    }
    int n;
    double sum = select_tokens(s, &n);
    for (int j = 0; j < n; j++)
        probs[s->idx[j]] = (float)(s->w[s->idx[j]] / sum);
    return RLX_OK;
}

rlx_status rlx_sampler_penalize(rlx_sampler *s, const float *logits, const int32_t *history, int n_history, float *out)
{
    if (!s || !logits || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_sampler_penalize: NULL argument");
    penalize(s, logits, history, n_history, out);
    return RLX_OK;
}

/* ------------------------------------------------------------ stopping */

void rlx_stop_init(rlx_stop *st)
{
    if (st)
        memset(st, 0, sizeof *st);
}

rlx_status rlx_stop_add_eos(rlx_stop *st, int32_t id)
{
    if (!st)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_stop_add_eos: NULL stop set");
    if (rlx_stop_is_eos(st, id))
        return RLX_OK;
    if (st->n_eos >= RLX_STOP_MAX_EOS)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_stop_add_eos: more than %d ids", RLX_STOP_MAX_EOS);
    st->eos[st->n_eos++] = id;
    return RLX_OK;
}

rlx_status rlx_stop_add_string(rlx_stop *st, const char *str)
{
    if (!st || !str || !*str)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_stop_add_string: %s",
                             st ? "empty or NULL string" : "NULL stop set");
    size_t n = strlen(str);
    if (st->n_strings >= RLX_STOP_MAX_STRINGS || n > RLX_STOP_BYTES - st->used)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_stop_add_string: more than %d strings or %d bytes",
                             RLX_STOP_MAX_STRINGS, RLX_STOP_BYTES);
    memcpy(st->bytes + st->used, str, n);
    st->off[st->n_strings] = (uint16_t)st->used;
    st->len[st->n_strings] = (uint16_t)n;
    st->n_strings++;
    st->used += n;
    if (n > st->max_len)
        st->max_len = n;
    return RLX_OK;
}

int rlx_stop_is_eos(const rlx_stop *st, int32_t id)
{
    if (!st)
        return 0;
    for (int i = 0; i < st->n_eos; i++)
        if (st->eos[i] == id)
            return 1;
    return 0;
}

ptrdiff_t rlx_stop_find(const rlx_stop *st, const char *text, size_t len, size_t checked, size_t *match_len)
{
    if (!st || !text || st->n_strings == 0)
        return -1;
    if (checked > len)
        checked = len;
    /* An occurrence ending past `checked` starts after checked - max_len. */
    size_t start = checked >= st->max_len ? checked - st->max_len + 1 : 0;
    for (size_t pos = start; pos < len; pos++) {
        for (int i = 0; i < st->n_strings; i++) {
            size_t n = st->len[i];
            if (n <= len - pos && pos + n > checked && memcmp(text + pos, st->bytes + st->off[i], n) == 0) {
                if (match_len)
                    *match_len = n;
                return (ptrdiff_t)pos;
            }
        }
    }
    return -1;
}

size_t rlx_stop_holdback(const rlx_stop *st, const char *text, size_t len)
{
    if (!st || !text)
        return 0;
    size_t best = 0;
    for (int i = 0; i < st->n_strings; i++) {
        const char *str = st->bytes + st->off[i];
        for (size_t k = st->len[i] - 1; k > best; k--)
            if (k <= len && memcmp(text + len - k, str, k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}
