/* context.c - a generation context: the step graph compiled for prefill
 * (prefill_chunk tokens per sequence) and for decode (one token), the
 * decode session reading the prefill session's weights and KV cache in
 * place (rlx_compile_shared), and the positions of each sequence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/ggml_type.h"
#include "llm/llm_internal.h"
#include "quant/quant.h"

void rlx_llm_options_init(rlx_llm_options *o)
{
    memset(o, 0, sizeof *o);
    o->device = RLX_DEVICE_CPU;
    o->precision = RLX_PRECISION_F32;
    o->batch = 1;
}

/* Element i of checkpoint data, which may be unaligned (safetensors does
 * not pad tensors). */
static float to_f32(const void *p, rlx_dtype t, size_t i)
{
    const char *c = p;
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case RLX_F16: memcpy(&h, c + 2 * i, 2); return rlx_f16_to_f32(h);
    case RLX_BF16: memcpy(&h, c + 2 * i, 2); return rlx_bf16_to_f32(h);
    case RLX_F64: memcpy(&d, c + 8 * i, 8); return (float)d;
    default: memcpy(&f, c + 4 * i, 4); return f;
    }
}

static void store(void *p, rlx_dtype t, size_t i, float v)
{
    switch (t) {
    case RLX_F16: ((uint16_t *)p)[i] = rlx_f32_to_f16(v); break;
    case RLX_BF16: ((uint16_t *)p)[i] = rlx_f32_to_bf16(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

/* A block-quantized checkpoint tensor t (dims checked) into buf: its bytes
 * as they are for a u8 param the graph reads quantized, its rows
 * dequantized for a float one. */
static rlx_status convert_quantized(const llm_tensor *t, const rlx_tensor_info *info, void *buf)
{
    const char *tn = rlx_ggml_type_name(t->qtype);
    int64_t k = t->ndim ? t->dims[t->ndim - 1] : 0, rows = 1;
    for (int d = 0; d < t->ndim - 1; d++)
        rows *= t->dims[d];
    size_t rb = rlx_quant_row_bytes(t->qtype, k);
    /* the rows and k the param wants: [rows, row bytes] quantized, [rows, k] as floats */
    int64_t want_rows = 1, want_k = info->ndim ? info->dims[info->ndim - 1] : 0;
    for (int d = 0; d < info->ndim - 1; d++)
        want_rows *= info->dims[d];
    if (info->dtype == RLX_U8)
        want_k = k; /* checked through the bytes below */
    if (t->ndim < 1 || want_rows != rows || want_k != k)
        return rlx_set_error(RLX_ERR_SHAPE,
                             "weight '%s': %lld rows of %lld in the checkpoint; the model's config needs "
                             "%lld of %lld",
                             info->name, (long long)rows, (long long)k, (long long)want_rows, (long long)want_k);
    if (!rlx_qtype_supported(t->qtype) || !rb)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "weight '%s' is stored as %s (ggml type %d), which RLX cannot read yet", info->name,
                             tn ? tn : "?", t->qtype);
    if (t->in_out)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "weight '%s': a quantized tensor stored [in, out]", info->name);
    if ((size_t)rows * rb != t->bytes)
        return rlx_set_error(RLX_ERR_SHAPE, "weight '%s': %lld %s rows of %lld take %zu bytes; the file holds %zu",
                             info->name, (long long)rows, tn, (long long)k, (size_t)rows * rb, t->bytes);
    if (info->dtype == RLX_U8) {
        if (info->bytes != t->bytes)
            return rlx_set_error(RLX_ERR_SHAPE, "weight '%s': %zu bytes in the file, the graph reads %zu", info->name,
                                 t->bytes, info->bytes);
        memcpy(buf, t->data, t->bytes);
        return RLX_OK;
    }
    float *row = rlx_malloc((size_t)k * sizeof(float));
    if (!row)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "llm: no memory to dequantize '%s'", info->name);
    rlx_status st = RLX_OK;
    for (int64_t r = 0; r < rows && st == RLX_OK; r++) {
        st = rlx_dequantize_row(t->qtype, (const char *)t->data + (size_t)r * rb, row, k);
        for (int64_t i = 0; i < k && st == RLX_OK; i++)
            store(buf, info->dtype, (size_t)(r * k + i), row[i]);
    }
    free(row);
    return st;
}

/* Copies checkpoint tensor t into buf as the param `info` wants it: its
 * dtype, and [out, in] for a projection stored [in, out]. */
static rlx_status convert_weight(const llm_tensor *t, const rlx_tensor_info *info, void *buf)
{
    if (t->dtype == RLX_DTYPE_COUNT)
        return convert_quantized(t, info, buf);
    int64_t want = 1, have = 1;
    for (int d = 0; d < info->ndim; d++)
        want *= info->dims[d];
    for (int d = 0; d < t->ndim; d++)
        have *= t->dims[d];
    bool same_dims = t->ndim == info->ndim;
    for (int d = 0; same_dims && d < t->ndim; d++)
        same_dims = t->in_out ? t->dims[d] == info->dims[info->ndim - 1 - d] : t->dims[d] == info->dims[d];
    if (!same_dims || want != have) {
        char a[96] = "", b[96] = "";
        for (int d = 0, k = 0; d < t->ndim; d++)
            k += snprintf(a + k, sizeof a - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->dims[d]);
        for (int d = 0, k = 0; d < info->ndim; d++)
            k += snprintf(b + k, sizeof b - (size_t)k, "%s%lld", d ? ", " : "", (long long)info->dims[d]);
        return rlx_set_error(RLX_ERR_SHAPE, "weight '%s' is [%s] in the checkpoint; the model's config needs [%s]%s",
                             info->name, a, b, t->in_out ? " (transposed)" : "");
    }
    if (t->dtype != RLX_F32 && t->dtype != RLX_F16 && t->dtype != RLX_BF16 && t->dtype != RLX_F64)
        return rlx_set_error(RLX_ERR_DTYPE, "weight '%s' is %s; f32, f16 and bf16 weights are supported", info->name,
                             rlx_dtype_name(t->dtype));
    if (t->in_out && t->ndim == 2) {
        int64_t rows = info->dims[0], cols = info->dims[1]; /* want [rows = out, cols = in] from [in, out] */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++)
                store(buf, info->dtype, (size_t)(r * cols + c), to_f32(t->data, t->dtype, (size_t)(c * rows + r)));
        return RLX_OK;
    }
    if (t->dtype == info->dtype) {
        memcpy(buf, t->data, info->bytes);
        return RLX_OK;
    }
    for (int64_t i = 0; i < want; i++)
        store(buf, info->dtype, (size_t)i, to_f32(t->data, t->dtype, (size_t)i));
    return RLX_OK;
}

/* The parts of `name` the checkpoint keeps apart (0: it is read whole). */
static int stored_parts(const rlx_llm_context *c, const char *name, char parts[4][128])
{
    int n = llm_joined_parts(name, parts);
    if (n && c->model->hp.fused_qkv && strstr(name, ".attn_qkv."))
        return 0; /* stored joined */
    return n;
}

/* How the checkpoint stores weight `name` (llm_storage.qtype): a joined
 * weight is quantized when all its parts are, in one type. */
static int weight_storage(void *ctx, const char *name)
{
    const rlx_llm_context *c = ctx;
    const llm_source *src = &c->model->src;
    char parts[4][128];
    int n = stored_parts(c, name, parts), q = LLM_FLOAT;
    for (int i = 0; i < (n ? n : 1); i++) {
        llm_tensor t;
        if (src->get(src->ctx, n ? parts[i] : name, &t) != RLX_OK)
            return LLM_FLOAT; /* the load says what is missing */
        int pq = t.dtype == RLX_DTYPE_COUNT && rlx_qtype_supported(t.qtype) ? t.qtype : LLM_FLOAT;
        if (i > 0 && pq != q)
            return LLM_MIXED;
        q = pq;
    }
    rlx_clear_error();
    return q;
}

/* Converts weight `info` into buf from the checkpoint, joining its parts
 * where the checkpoint has them apart (a quantized weight: their rows'
 * bytes one after another). */
static rlx_status load_weight(rlx_llm_context *c, const rlx_tensor_info *info, void *buf)
{
    const llm_source *src = &c->model->src;
    llm_tensor t;
    char parts[4][128];
    int n = stored_parts(c, info->name, parts);
    if (!n) {
        rlx_status st = src->get(src->ctx, info->name, &t);
        return st != RLX_OK ? st : convert_weight(&t, info, buf);
    }
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        rlx_tensor_info part = *info;
        part.name = parts[k];
        part.ndim = llm_canonical_shape(&c->model->hp, parts[k], part.dims);
        rlx_status st = src->get(src->ctx, parts[k], &t);
        if (st != RLX_OK)
            return st;
        if (info->dtype == RLX_U8) { /* rows of the part's own quantized bytes */
            part.dims[1] = part.ndim == 2 ? (int64_t)rlx_quant_row_bytes(t.qtype, part.dims[1]) : 0;
            part.bytes = (size_t)(part.dims[0] * part.dims[1]);
        } else {
            part.bytes = rlx_dtype_size(info->dtype);
            for (int d = 0; d < part.ndim; d++)
                part.bytes *= (size_t)part.dims[d];
        }
        if (at + part.bytes > info->bytes)
            return rlx_set_error(RLX_ERR_SHAPE, "weight '%s' is larger than '%s' holds", parts[k], info->name);
        if ((st = convert_weight(&t, &part, (char *)buf + at)) != RLX_OK)
            return st;
        at += part.bytes;
    }
    if (at != info->bytes)
        return rlx_set_error(RLX_ERR_SHAPE, "the parts of '%s' hold %zu bytes, it needs %zu", info->name, at,
                             info->bytes);
    return RLX_OK;
}

/* Every param of the prefill session: weights from the checkpoint, the
 * cache zeroed (masked keys then read zeros, never stale NaNs). */
static rlx_status load_params(rlx_llm_context *c)
{
    rlx_session *s = c->prefill;
    size_t cap = 0;
    void *buf = NULL;
    rlx_status st = RLX_OK;
    for (int i = 0; i < rlx_session_count(s, 1) && st == RLX_OK; i++) {
        rlx_tensor_info info;
        if ((st = rlx_session_info(s, 1, i, &info)) != RLX_OK)
            break;
        if (info.bytes > cap) {
            free(buf);
            cap = info.bytes;
            if (!(buf = rlx_malloc(cap))) {
                st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "llm: no memory to convert '%s' (%zu bytes)", info.name, cap);
                break;
            }
        }
        if (!strncmp(info.name, "cache.", 6)) {
            memset(buf, 0, info.bytes);
        } else if ((st = load_weight(c, &info, buf)) != RLX_OK) {
            break;
        }
        st = rlx_session_set_param(s, info.name, buf, info.bytes);
    }
    free(buf);
    return st;
}

void rlx_llm_context_free(rlx_llm_context *c)
{
    if (!c)
        return;
    rlx_session_free(c->decode);
    rlx_session_free(c->prefill);
    free(c->pos);
    free(c->logits);
    free(c->step_logits);
    free(c->in_decode);
    free(c->next);
    free(c->tokens);
    free(c->in_pos);
    free(c->in_last);
    free(c);
}

rlx_status rlx_llm_context_new(rlx_llm *m, const rlx_llm_options *opts, rlx_llm_context **out)
{
    if (!m || !out)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_llm_context_new: model and out must not be NULL");
    *out = NULL;
    rlx_llm_options o;
    if (opts)
        o = *opts;
    else
        rlx_llm_options_init(&o);
    const llm_hparams *hp = &m->hp;
    if (o.ctx <= 0)
        o.ctx = hp->max_ctx < 2048 ? hp->max_ctx : 2048;
    if (o.ctx > (1 << 22) || o.batch < 1 || o.batch > 4096 || o.prefill_chunk < 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "llm context: ctx %d, batch %d or prefill chunk %d out of range",
                             o.ctx, o.batch, o.prefill_chunk);
    if (hp->learned_pos && o.ctx > hp->max_ctx)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "llm context: %d positions asked, the model has %d (learned positions)", o.ctx,
                             hp->max_ctx);
    if (hp->sliding_window > 0 && o.ctx > hp->sliding_window) {
        if (opts && opts->ctx > 0)
            return rlx_set_error(RLX_ERR_UNSUPPORTED,
                                 "llm context: %d positions asked; %s attends within a sliding window of %d, which "
                                 "RLX does not implement, so contexts are limited to the window",
                                 o.ctx, hp->arch_name, hp->sliding_window);
        o.ctx = hp->sliding_window;
    }
    if (o.prefill_chunk == 0)
        o.prefill_chunk = o.ctx < 512 ? o.ctx : 512;
    if (o.prefill_chunk > o.ctx)
        o.prefill_chunk = o.ctx;
    rlx_llm_context *c = rlx_calloc(1, sizeof *c);
    if (!c)
        return RLX_ERR_OUT_OF_MEMORY;
    c->model = m;
    c->opts = o;
    int B = o.batch, S = o.prefill_chunk;
    c->pos = rlx_calloc((size_t)B, sizeof *c->pos);
    c->logits = rlx_calloc((size_t)B * (size_t)hp->vocab, sizeof *c->logits);
    c->step_logits = B > 1 ? rlx_calloc((size_t)B * (size_t)hp->vocab, sizeof *c->logits) : NULL;
    c->in_decode = rlx_calloc((size_t)B, sizeof *c->in_decode);
    c->next = rlx_calloc((size_t)B, sizeof *c->next);
    c->tokens = rlx_calloc((size_t)B * (size_t)S, sizeof *c->tokens);
    c->in_pos = rlx_calloc((size_t)B, sizeof *c->in_pos);
    c->in_last = rlx_calloc((size_t)B, sizeof *c->in_last);
    if (!c->pos || !c->logits || (B > 1 && !c->step_logits) || !c->in_decode || !c->next || !c->tokens || !c->in_pos ||
        !c->in_last) {
        rlx_llm_context_free(c);
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "llm context: no memory for %d sequences of %d logits", B,
                             hp->vocab);
    }
    rlx_options so;
    rlx_options_init(&so);
    so.device = o.device;
    so.device_index = o.device_index;
    so.precision = o.precision;
    so.threads = o.threads;
    so.verbose = o.verbose;
    /* weights and cache in the 16-bit type the model computes in */
    rlx_dtype wdtype = o.precision == RLX_PRECISION_BF16  ? RLX_BF16
                       : o.precision == RLX_PRECISION_F16 ? RLX_F16
                                                          : RLX_F32;
    rlx_status st = RLX_OK;
    /* block-quantized weights stay so (qmatmul reads them as stored) */
    llm_storage storage = {c, weight_storage};
    rlx_graph *gp = llm_build_step(hp, B, S, o.ctx, wdtype, &storage);
    rlx_graph *gd = gp ? llm_build_step(hp, B, 1, o.ctx, wdtype, &storage) : NULL;
    if (!gp || !gd)
        st = rlx_last_error()[0] ? RLX_ERR_INVALID_ARGUMENT : RLX_ERR_OUT_OF_MEMORY;
    if (st == RLX_OK)
        st = rlx_compile(gp, &so, &c->prefill);
    if (st == RLX_OK)
        st = rlx_compile_shared(gd, &so, c->prefill, &c->decode);
    rlx_graph_free(gp);
    rlx_graph_free(gd);
    if (st == RLX_OK)
        st = load_params(c);
    if (st != RLX_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", rlx_last_error());
        rlx_llm_context_free(c);
        return rlx_set_error(st, "%s", msg);
    }
    *out = c;
    return RLX_OK;
}

static bool any_row(const bool *rows, int B)
{
    for (int b = 0; b < B; b++)
        if (rows[b])
            return true;
    return false;
}

/* Copies session s's logits of the sequences in `rows` into c->logits. */
static rlx_status copy_logits(rlx_llm_context *c, rlx_session *s, const bool *rows)
{
    int B = c->opts.batch, V = c->model->hp.vocab;
    if (!any_row(rows, B))
        return RLX_OK;
    if (B == 1)
        return rlx_session_get_output(s, "logits", c->logits, (size_t)V * sizeof(float));
    rlx_status st = rlx_session_get_output(s, "logits", c->step_logits, (size_t)B * (size_t)V * sizeof(float));
    for (int b = 0; st == RLX_OK && b < B; b++)
        if (rows[b])
            memcpy(c->logits + (size_t)b * V, c->step_logits + (size_t)b * V, (size_t)V * sizeof(float));
    return st;
}

/* Copies the decode session's logits of every sequence whose latest ones
 * are still only there (before another step overwrites them). */
static rlx_status fetch_decode_logits(rlx_llm_context *c)
{
    rlx_status st = copy_logits(c, c->decode, c->in_decode);
    if (st == RLX_OK)
        memset(c->in_decode, 0, (size_t)c->opts.batch * sizeof *c->in_decode);
    return st;
}

/* Runs one step session over the staged inputs.  The logits of the
 * sequences in `take` are copied at once after a prefill step, and left in
 * the session after a decode step (fetch_decode_logits copies them when
 * they are asked for). */
static rlx_status run_step(rlx_llm_context *c, rlx_session *s, int S, const bool *take)
{
    int B = c->opts.batch;
    rlx_status st;
    /* rows whose logits are still in the decode session and that this step
     * does not replace are copied out before it overwrites them */
    bool keep = false;
    for (int b = 0; b < B; b++)
        keep = keep || (c->in_decode[b] && !take[b]);
    if (keep && (st = fetch_decode_logits(c)) != RLX_OK)
        return st;
    if ((st = rlx_session_set_input(s, "tokens", c->tokens, (size_t)B * (size_t)S * sizeof(int64_t))) != RLX_OK ||
        (st = rlx_session_set_input(s, "pos", c->in_pos, (size_t)B * sizeof(int64_t))) != RLX_OK ||
        (st = rlx_session_set_input(s, "last", c->in_last, (size_t)B * sizeof(int64_t))) != RLX_OK ||
        (st = rlx_session_run(s)) != RLX_OK)
        return st;
    if (s == c->decode) {
        memcpy(c->in_decode, take, (size_t)B * sizeof *c->in_decode);
        return RLX_OK;
    }
    for (int b = 0; b < B; b++)
        if (take[b])
            c->in_decode[b] = false;
    return copy_logits(c, s, take);
}

rlx_status rlx_llm_prefill(rlx_llm_context *c, int n_seqs, const int32_t *const *ids, const int *n_ids)
{
    if (!c || !ids || !n_ids || n_seqs < 1 || n_seqs > c->opts.batch)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "prefill: %d sequences asked, the context has %d", n_seqs,
                             c ? c->opts.batch : 0);
    int B = c->opts.batch, S = c->opts.prefill_chunk, T = c->opts.ctx, V = c->model->hp.vocab;
    int longest = 0;
    for (int b = 0; b < n_seqs; b++) {
        if (!ids[b] || n_ids[b] < 1 || n_ids[b] > T)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                 "prefill: sequence %d has %d tokens; 1 to %d fit the context", b, n_ids[b], T);
        for (int i = 0; i < n_ids[b]; i++)
            if (ids[b][i] < 0 || ids[b][i] >= V)
                return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                     "prefill: token %d of sequence %d is %d, outside the vocabulary of %d", i, b,
                                     (int)ids[b][i], V);
        if (n_ids[b] > longest)
            longest = n_ids[b];
    }
    bool take[4096] = {false};
    for (int start = 0; start < longest; start += S) {
        for (int b = 0; b < B; b++) {
            bool active = b < n_seqs && start < n_ids[b];
            int n = active ? n_ids[b] - start : 0;
            for (int i = 0; i < S; i++)
                c->tokens[(size_t)b * S + i] = i < n ? ids[b][start + i] : 0;
            c->in_pos[b] = active ? start : T; /* an idle row writes nothing */
            c->in_last[b] = active ? (n < S ? n : S) - 1 : 0;
            take[b] = active && n <= S;
        }
        rlx_status st = run_step(c, c->prefill, S, take);
        if (st != RLX_OK)
            return st;
    }
    for (int b = 0; b < n_seqs; b++)
        c->pos[b] = n_ids[b];
    return RLX_OK;
}

rlx_status rlx_llm_decode(rlx_llm_context *c, const int32_t *tokens)
{
    if (!c || !tokens)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "decode: context and tokens must not be NULL");
    int B = c->opts.batch, T = c->opts.ctx, V = c->model->hp.vocab;
    bool take[4096] = {false};
    for (int b = 0; b < B; b++) {
        take[b] = tokens[b] >= 0;
        if (take[b] && tokens[b] >= V)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                 "decode: token %d of sequence %d is outside the vocabulary of %d", (int)tokens[b], b,
                                 V);
        if (take[b] && c->pos[b] >= T)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "decode: sequence %d is full (%d positions)", b, T);
        c->tokens[b] = take[b] ? tokens[b] : 0;
        c->in_pos[b] = take[b] ? c->pos[b] : T;
        c->in_last[b] = 0;
    }
    rlx_status st = run_step(c, c->decode, 1, take);
    if (st != RLX_OK)
        return st;
    for (int b = 0; b < B; b++)
        c->pos[b] += take[b];
    return RLX_OK;
}

const float *rlx_llm_logits(rlx_llm_context *c, int seq)
{
    if (!c || seq < 0 || seq >= c->opts.batch)
        return NULL;
    if (c->in_decode[seq] && fetch_decode_logits(c) != RLX_OK)
        return NULL;
    return c->logits + (size_t)seq * (size_t)c->model->hp.vocab;
}

/* First index of the largest value, or of the first NaN: the graph's argmax. */
static int32_t argmax_row(const float *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n && x[best] == x[best]; i++)
        if (x[i] > x[best] || x[i] != x[i])
            best = i;
    return best;
}

rlx_status rlx_llm_argmax(rlx_llm_context *c, int32_t *tokens)
{
    if (!c || !tokens)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "argmax: context and tokens must not be NULL");
    int B = c->opts.batch, V = c->model->hp.vocab;
    rlx_status st = any_row(c->in_decode, B)
                        ? rlx_session_get_output(c->decode, "next", c->next, (size_t)B * sizeof(int64_t))
                        : RLX_OK;
    if (st != RLX_OK)
        return st;
    for (int b = 0; b < B; b++)
        tokens[b] = c->in_decode[b] ? (int32_t)c->next[b] : argmax_row(c->logits + (size_t)b * V, V);
    return RLX_OK;
}

int rlx_llm_position(const rlx_llm_context *c, int seq)
{
    return c && seq >= 0 && seq < c->opts.batch ? c->pos[seq] : -1;
}

int rlx_llm_context_size(const rlx_llm_context *c) { return c ? c->opts.ctx : -1; }
