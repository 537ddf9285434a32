/* quantize.c - rlx_quantize_file: a GGUF file of quantized weights from a
 * Hugging Face safetensors checkpoint (Llama, Mistral, Qwen2, Qwen3) or
 * from another GGUF file.
 *
 * Which type each tensor gets follows llama.cpp's choice (its
 * llama_tensor_get_type), restated here:
 *   - only matrices are quantized: tensors of rank >= 2 whose name ends in
 *     "weight", not norms, not position_embd; the others keep their type
 *     (1-D tensors of a safetensors checkpoint are written as F32);
 *   - the every-tensor types give each matrix that type;
 *   - the presets q4_k_m / q5_k_m start from Q4_K / Q5_K and give Q6_K to
 *     output.weight (and token_embd.weight when the model ties them), and to
 *     attn_v and ffn_down of the layers where "more bits" pay off: the
 *     first and last eighth of the layers and every third one between;
 *     q6_k and q8_0 as presets differ from their every-tensor forms only in
 *     that output.weight is kept at Q8_0 or better;
 *   - a matrix whose rows are not a multiple of the type's block falls back
 *     as llama.cpp does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; a preset's
 *     output.weight -> Q8_0), and to F16 when even that block does not fit.
 *
 * From safetensors the tensors get llama.cpp's names, and q/k rows of a
 * Llama checkpoint are permuted for llama.cpp's RoPE layout (as its
 * converter does); config.json and tokenizer.json become GGUF metadata.
 * From GGUF every metadata key is copied. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/cpu/cpu_pool.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_write.h"
#include "io/safetensors.h"
#include "io/weights.h"
#include "llm/llm.h"
#include "llm/tokenizer.h"
#include "quant/quant.h"

/* llama.cpp's file-type numbers (general.file_type). */
enum { FTYPE_Q4_0 = 2, FTYPE_Q4_1 = 3, FTYPE_Q8_0 = 7, FTYPE_Q5_0 = 8, FTYPE_Q5_1 = 9 };
enum { FTYPE_Q4_K_S = 14, FTYPE_Q4_K_M = 15, FTYPE_Q5_K_S = 16, FTYPE_Q5_K_M = 17, FTYPE_Q6_K = 18 };

typedef struct preset {
    const char *name;
    int base;  /* ggml type of the matrices */
    int ftype; /* general.file_type (every-tensor Q4_K/Q5_K: the nearest, K_S) */
    bool mixed;
} preset;

static const preset presets[] = {
    {"q8_0", RLX_GGML_Q8_0, FTYPE_Q8_0, true},     {"q4_0", RLX_GGML_Q4_0, FTYPE_Q4_0, false},
    {"q4_1", RLX_GGML_Q4_1, FTYPE_Q4_1, false},    {"q5_0", RLX_GGML_Q5_0, FTYPE_Q5_0, false},
    {"q5_1", RLX_GGML_Q5_1, FTYPE_Q5_1, false},    {"q4_k", RLX_GGML_Q4_K, FTYPE_Q4_K_S, false},
    {"q5_k", RLX_GGML_Q5_K, FTYPE_Q5_K_S, false},  {"q6_k", RLX_GGML_Q6_K, FTYPE_Q6_K, true},
    {"q4_k_m", RLX_GGML_Q4_K, FTYPE_Q4_K_M, true}, {"q5_k_m", RLX_GGML_Q5_K, FTYPE_Q5_K_M, true},
};
#define N_PRESETS (sizeof presets / sizeof presets[0])

static const preset *find_preset(const char *name)
{
    for (size_t i = 0; i < N_PRESETS; i++) {
        const char *a = presets[i].name, *b = name;
        while (*a && *b && *a == tolower((unsigned char)*b)) /* any case: Q4_K_M or q4_k_m */
            a++, b++;
        if (!*a && !*b)
            return &presets[i];
    }
    return NULL;
}

/* ------------------------------------------------------------ type choice */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* llama.cpp quantizes matrices named *weight other than norms, expert
 * routers and learned positions. */
static bool is_quantizable(const char *name, int ndim)
{
    return ndim >= 2 && ends_with(name, "weight") && !strstr(name, "_norm.weight") &&
           !strstr(name, "ffn_gate_inp.weight") && strcmp(name, "position_embd.weight") != 0;
}

static int64_t block_of(int type)
{
    int64_t b = 1;
    rlx_ggml_type_size(type, &b, NULL);
    return b;
}

/* The first and last eighth of the layers, and every third between. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

typedef struct model_facts {
    int n_layers; /* for ffn_down */
    int n_attn_v; /* attn_v / attn_qkv tensors */
    bool tied;    /* no output.weight: token_embd is the output too */
} model_facts;

static int choose_type(const preset *p, const model_facts *mf, const char *name, int64_t row)
{
    int t = p->base;
    bool output = !strcmp(name, "output.weight");
    bool as_output = output || (mf->tied && !strcmp(name, "token_embd.weight"));
    int layer = -1;
    sscanf(name, "blk.%d.", &layer);
    if (p->mixed) {
        if (as_output) {
            if (row % block_of(t))
                t = RLX_GGML_Q8_0; /* F16 below when even 32 does not divide the rows */
            else if (t != RLX_GGML_Q8_0)
                t = RLX_GGML_Q6_K;
        } else if ((strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight")) && layer >= 0) {
            if ((p->ftype == FTYPE_Q4_K_M || p->ftype == FTYPE_Q5_K_M) && use_more_bits(layer, mf->n_attn_v))
                t = RLX_GGML_Q6_K;
        } else if (strstr(name, "ffn_down") && layer >= 0) {
            if ((p->ftype == FTYPE_Q4_K_M || p->ftype == FTYPE_Q5_K_M) && use_more_bits(layer, mf->n_layers))
                t = RLX_GGML_Q6_K;
        }
    }
    if (row % block_of(t) == 0)
        return t;
    switch (t) { /* llama.cpp's fallbacks to a block of 32 */
    case RLX_GGML_Q4_K: t = RLX_GGML_Q5_0; break;
    case RLX_GGML_Q5_K: t = RLX_GGML_Q5_1; break;
    case RLX_GGML_Q6_K: t = RLX_GGML_Q8_0; break;
    default: break;
    }
    return row % block_of(t) == 0 ? t : RLX_GGML_F16;
}

/* ------------------------------------------------------------ one tensor */

typedef struct plan {
    const rlx_weight_view *src;
    char name[128];
    int type;         /* ggml type written */
    int permute_head; /* > 0: permute rows for interleaved RoPE with this many heads */
    const float *f32; /* data made here (rope_freqs), or NULL */
    int64_t f32_n;
} plan;

/* The view's values as f32 (dequantized when block-quantized). */
static rlx_status read_f32(const rlx_weight_view *v, float *dst)
{
    int64_t be;
    if (v->ggml_type >= 0 && rlx_ggml_type_size(v->ggml_type, &be, NULL) && be > 1) {
        if (!rlx_quant_block_elems(v->ggml_type))
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s' is %s, which RLX cannot dequantize", v->name,
                                 v->type_name);
        int64_t row = v->dims[v->ndim - 1], rows = v->numel / (row ? row : 1);
        size_t rb = rlx_quant_row_bytes(v->ggml_type, row);
        for (int64_t r = 0; r < rows; r++) {
            rlx_status st =
                rlx_dequantize_row(v->ggml_type, (const char *)v->data + (size_t)r * rb, dst + r * row, row);
            if (st != RLX_OK)
                return st;
        }
        return RLX_OK;
    }
    rlx_dtype dt = v->dtype;
    if (dt != RLX_F32 && dt != RLX_F16 && dt != RLX_BF16 && dt != RLX_F64)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "tensor '%s' is %s: only float tensors (F32, F16, BF16, F64) and "
                             "ggml's quantized types can be quantized",
                             v->name, v->type_name);
    return rlx_weight_view_read(v, RLX_F32, dst, (size_t)v->numel * sizeof(float));
}

/* llama.cpp's converter reorders q/k rows of Llama checkpoints so that its
 * RoPE, which rotates adjacent pairs, matches Hugging Face's rotate_half:
 * within each head, rows i and i + D/2 become rows 2i and 2i + 1. */
static rlx_status permute_rows(float *x, int64_t rows, int64_t cols, int heads)
{
    if (heads <= 0 || rows % (2 * heads))
        return rlx_set_error(RLX_ERR_SHAPE, "q/k projection of %lld rows does not split into %d heads", (long long)rows,
                             heads);
    int64_t hd = rows / heads, half = hd / 2;
    float *tmp = rlx_malloc((size_t)(hd * cols) * sizeof *tmp);
    if (!tmp)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory permuting q/k rows");
    for (int h = 0; h < heads; h++) {
        float *head = x + (int64_t)h * hd * cols;
        for (int64_t i = 0; i < half; i++)
            for (int j = 0; j < 2; j++)
                memcpy(tmp + (2 * i + j) * cols, head + (j * half + i) * cols, (size_t)cols * sizeof *tmp);
        memcpy(head, tmp, (size_t)(hd * cols) * sizeof *tmp);
    }
    free(tmp);
    return RLX_OK;
}

/* Rows of f32 encoded into type, on the CPU pool's threads (each row on
 * its own: the bytes do not depend on the split). */
typedef struct encode_job {
    int type;
    const float *x;
    int64_t row;
    size_t row_bytes;
    void *out;
    _Atomic rlx_status st; /* a failed row's status (any one of them) */
} encode_job;

static void encode_rows(void *arg, int64_t r0, int64_t r1, int worker)
{
    (void)worker;
    encode_job *j = arg;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + r * j->row;
        if (j->type == RLX_GGML_F16 || j->type == RLX_GGML_BF16) {
            uint16_t *o = (uint16_t *)j->out + r * j->row;
            for (int64_t i = 0; i < j->row; i++)
                o[i] = j->type == RLX_GGML_F16 ? rlx_f32_to_f16(x[i]) : rlx_f32_to_bf16(x[i]);
            continue;
        }
        rlx_status s = rlx_quantize_row(j->type, x, (char *)j->out + (size_t)r * j->row_bytes, j->row);
        if (s != RLX_OK)
            atomic_store(&j->st, s);
    }
}

static rlx_status encode(int type, const float *x, int64_t rows, int64_t row, void *out)
{
    if (type == RLX_GGML_F32) {
        memcpy(out, x, (size_t)(rows * row) * sizeof *x);
        return RLX_OK;
    }
    encode_job j = {.type = type, .x = x, .row = row, .out = out};
    if (type != RLX_GGML_F16 && type != RLX_GGML_BF16)
        j.row_bytes = rlx_quant_row_bytes(type, row);
    atomic_init(&j.st, RLX_OK);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    rlx_cpu_parallel(cores > 1 ? (int)cores : 1, rows, encode_rows, &j);
    return atomic_load(&j.st);
}

/* The bytes of one planned tensor into the file. */
static rlx_status write_one(rlx_gguf_writer *gw, rlx_file *f, const plan *p, size_t bytes)
{
    const rlx_weight_view *v = p->src;
    if (v && v->ggml_type == p->type && !p->permute_head) /* already in the type: as it is */
        return rlx_gguf_writer_write_tensor(gw, f, v->data, v->nbytes);
    int64_t n = v ? v->numel : p->f32_n;
    int64_t row = v ? (v->ndim ? v->dims[v->ndim - 1] : 1) : p->f32_n;
    float *x = rlx_malloc((size_t)(n ? n : 1) * sizeof *x);
    void *out = rlx_malloc(bytes ? bytes : 1);
    rlx_status st = x && out ? RLX_OK : rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory for tensor '%s'", p->name);
    if (st == RLX_OK) {
        if (v)
            st = read_f32(v, x);
        else
            memcpy(x, p->f32, (size_t)n * sizeof *x);
    }
    if (st == RLX_OK && p->permute_head)
        st = permute_rows(x, v->ndim >= 2 ? v->dims[0] : v->numel, v->ndim >= 2 ? row : 1, p->permute_head);
    if (st == RLX_OK)
        st = encode(p->type, x, n / (row ? row : 1), row, out);
    if (st == RLX_OK)
        st = rlx_gguf_writer_write_tensor(gw, f, out, bytes);
    free(x);
    free(out);
    return st;
}

/* ------------------------------------------------------------ metadata from Hugging Face */

static const char *gguf_arch(const llm_hparams *hp)
{
    switch (hp->arch) {
    case LLM_LLAMA: return "llama";
    case LLM_QWEN2: return "qwen2";
    case LLM_QWEN3: return "qwen3";
    default: return NULL;
    }
}

static rlx_status set_arch_u32(rlx_gguf_writer *w, const char *arch, const char *key, uint32_t v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return rlx_gguf_writer_set_u32(w, k, v);
}

static rlx_status set_arch_f32(rlx_gguf_writer *w, const char *arch, const char *key, float v)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return rlx_gguf_writer_set_f32(w, k, v);
}

static rlx_status hf_metadata(rlx_gguf_writer *w, const llm_hparams *hp, const char *name)
{
    const char *a = gguf_arch(hp);
    rlx_status st;
    if ((st = rlx_gguf_writer_set_str(w, "general.architecture", a)) != RLX_OK ||
        (st = rlx_gguf_writer_set_str(w, "general.name", name)) != RLX_OK ||
        (st = set_arch_u32(w, a, "context_length", (uint32_t)hp->max_ctx)) != RLX_OK ||
        (st = set_arch_u32(w, a, "embedding_length", (uint32_t)hp->hidden)) != RLX_OK ||
        (st = set_arch_u32(w, a, "block_count", (uint32_t)hp->layers)) != RLX_OK ||
        (st = set_arch_u32(w, a, "feed_forward_length", (uint32_t)hp->ffn)) != RLX_OK ||
        (st = set_arch_u32(w, a, "attention.head_count", (uint32_t)hp->heads)) != RLX_OK ||
        (st = set_arch_u32(w, a, "attention.head_count_kv", (uint32_t)hp->kv_heads)) != RLX_OK ||
        (st = set_arch_f32(w, a, "rope.freq_base", (float)hp->rope_theta)) != RLX_OK ||
        (st = set_arch_u32(w, a, "rope.dimension_count", (uint32_t)hp->head_dim)) != RLX_OK ||
        (st = set_arch_f32(w, a, "attention.layer_norm_rms_epsilon", (float)hp->norm_eps)) != RLX_OK ||
        (st = set_arch_u32(w, a, "vocab_size", (uint32_t)hp->vocab)) != RLX_OK)
        return st;
    if (hp->head_dim * hp->heads != hp->hidden &&
        ((st = set_arch_u32(w, a, "attention.key_length", (uint32_t)hp->head_dim)) != RLX_OK ||
         (st = set_arch_u32(w, a, "attention.value_length", (uint32_t)hp->head_dim)) != RLX_OK))
        return st;
    if (hp->rope_scaling == LLM_ROPE_LINEAR) {
        char k[128];
        snprintf(k, sizeof k, "%s.rope.scaling.type", a);
        if ((st = rlx_gguf_writer_set_str(w, k, "linear")) != RLX_OK ||
            (st = set_arch_f32(w, a, "rope.scaling.factor", (float)hp->rope_factor)) != RLX_OK)
            return st;
    }
    return RLX_OK;
}

/* llama.cpp keeps Llama 3's RoPE scaling as divisors of the frequencies
 * (rope_freqs.weight), as its converter computes them. */
static float *llama3_freq_factors(const llm_hparams *hp)
{
    int half = hp->head_dim / 2;
    float *f = rlx_malloc((size_t)half * sizeof *f);
    if (!f)
        return NULL;
    double lo = hp->rope_low_freq, hi = hp->rope_high_freq, old = hp->rope_orig_ctx;
    for (int i = 0; i < half; i++) {
        double freq = pow(hp->rope_theta, -2.0 * i / hp->head_dim), wl = 2.0 * M_PI / freq;
        if (wl < old / hi)
            f[i] = 1.0f;
        else if (wl > old / lo)
            f[i] = (float)hp->rope_factor;
        else {
            double s = (old / wl - lo) / (hi - lo);
            f[i] = (float)(1.0 / ((1.0 - s) / hp->rope_factor + s));
        }
    }
    return f;
}

/* tokenizer.json beside the checkpoint as tokenizer.ggml.*; the token list
 * padded to the embedding's rows as llama.cpp's converter pads it. */
static rlx_status hf_tokenizer_metadata(rlx_gguf_writer *w, const char *dir, const llm_hparams *hp, FILE *log)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/tokenizer.json", dir) >= (int)sizeof path)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "quantize: the folder path %.64s... is too long", dir);
    if (access(path, F_OK) != 0) {
        if (log)
            fprintf(log, "note: no tokenizer.json in %s: the GGUF file has no tokenizer\n", dir);
        return RLX_OK;
    }
    rlx_tokenizer *tok = NULL;
    rlx_tokenizer_arrays ta;
    rlx_status st = rlx_tokenizer_from_hf_json(path, &tok);
    if (st != RLX_OK)
        return st;
    st = rlx_tokenizer_export(tok, &ta);
    if (st != RLX_OK) {
        rlx_tokenizer_free(tok);
        return st;
    }
    int64_t n = ta.n_tokens, nv = hp->vocab;
    const char **tokens = NULL;
    size_t *lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char(*pads)[32] = NULL; /* "[PAD" + any int64 + "]" */
    if (n > nv)
        st = rlx_set_error(RLX_ERR_SHAPE, "%s has %lld tokens, the model's vocabulary %lld", path, (long long)n,
                           (long long)nv);
    else if (!strcmp(ta.model, "gpt2") && !ta.pre)
        st = rlx_set_error(RLX_ERR_UNSUPPORTED,
                           "%s: its pre-tokenizer regex is none that GGUF names (GPT-2's, Llama 3's, Qwen2's): "
                           "llama.cpp would split text differently",
                           path);
    if (st == RLX_OK) {
        tokens = rlx_calloc((size_t)nv, sizeof *tokens);
        lens = rlx_calloc((size_t)nv, sizeof *lens);
        scores = rlx_calloc((size_t)nv, sizeof *scores);
        types = rlx_calloc((size_t)nv, sizeof *types);
        pads = rlx_calloc((size_t)(nv - n + 1), sizeof *pads);
        if (!tokens || !lens || !scores || !types || !pads)
            st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory for the tokenizer");
    }
    if (st == RLX_OK) {
        for (int64_t i = 0; i < nv; i++) {
            if (i < n) {
                tokens[i] = ta.tokens[i], lens[i] = ta.token_lens[i];
                scores[i] = ta.scores[i], types[i] = ta.token_types[i];
            } else { /* rows the tokenizer does not use */
                snprintf(pads[i - n], sizeof pads[0], "[PAD%lld]", (long long)i);
                tokens[i] = pads[i - n], lens[i] = strlen(pads[i - n]);
                types[i] = RLX_TOKEN_UNUSED;
            }
        }
        int32_t bos = ta.bos_id >= 0 ? ta.bos_id : hp->bos, eos = ta.eos_id >= 0 ? ta.eos_id : hp->eos;
        bool spm = !strcmp(ta.model, "llama");
        st = rlx_gguf_writer_set_str(w, "tokenizer.ggml.model", ta.model);
        if (st == RLX_OK && !spm)
            st = rlx_gguf_writer_set_str(w, "tokenizer.ggml.pre", ta.pre);
        if (st == RLX_OK)
            st = rlx_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", (uint64_t)nv, tokens, lens);
        if (st == RLX_OK && spm)
            st = rlx_gguf_writer_set_array(w, "tokenizer.ggml.scores", RLX_GGUF_FLOAT32, (uint64_t)nv, scores);
        if (st == RLX_OK)
            st = rlx_gguf_writer_set_array(w, "tokenizer.ggml.token_type", RLX_GGUF_INT32, (uint64_t)nv, types);
        if (st == RLX_OK && !spm)
            st = rlx_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", (uint64_t)ta.n_merges,
                                               (const char *const *)ta.merges, NULL);
        const char *id_keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                 "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
        int32_t ids[] = {bos, eos, ta.unk_id, ta.pad_id};
        for (int k = 0; st == RLX_OK && k < 4; k++)
            if (ids[k] >= 0)
                st = rlx_gguf_writer_set_u32(w, id_keys[k], (uint32_t)ids[k]);
        if (st == RLX_OK)
            st = rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", ta.add_bos);
        if (st == RLX_OK)
            st = rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", ta.add_eos);
        if (st == RLX_OK && spm)
            st = rlx_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", ta.add_space_prefix);
    }
    free(tokens), free(lens), free(scores), free(types), free(pads);
    rlx_tokenizer_arrays_free(&ta);
    rlx_tokenizer_free(tok);
    return st;
}

/* ------------------------------------------------------------ the plan */

typedef struct job {
    const preset *p;
    rlx_weights *w;
    rlx_gguf_writer *gw;
    plan *plans;
    int64_t n_plans;
    float *rope_freqs;
    llm_hparams hp;
    model_facts mf;
    FILE *log;
} job;

static void job_free(job *j)
{
    rlx_weights_close(j->w);
    rlx_gguf_writer_free(j->gw);
    free(j->plans);
    free(j->rope_freqs);
}

static int src_type(const rlx_weight_view *v)
{
    if (v->ggml_type >= 0)
        return v->ggml_type;
    switch (v->dtype) {
    case RLX_F32: return RLX_GGML_F32;
    case RLX_F16: return RLX_GGML_F16;
    case RLX_BF16: return RLX_GGML_BF16;
    default: return -1;
    }
}

/* The type of one tensor: quantized by the preset, or kept. */
static rlx_status plan_type(const job *j, plan *pl, const rlx_weight_view *v, bool from_hf)
{
    int64_t row = v->ndim ? v->dims[v->ndim - 1] : 1;
    if (is_quantizable(pl->name, v->ndim)) {
        if (src_type(v) < 0 && !(v->dtype == RLX_F64))
            return rlx_set_error(RLX_ERR_UNSUPPORTED,
                                 "tensor '%s' is %s: only float tensors (F32, F16, BF16, F64) "
                                 "and ggml's quantized types can be quantized",
                                 v->name, v->type_name);
        pl->type = choose_type(j->p, &j->mf, pl->name, row);
        return RLX_OK;
    }
    int t = src_type(v);
    if (from_hf && v->ndim <= 1) /* norms and biases: F32, as llama.cpp's converter writes them */
        t = RLX_GGML_F32;
    else if (v->dtype == RLX_F64)
        t = RLX_GGML_F32;
    if (t < 0)
        return rlx_set_error(RLX_ERR_UNSUPPORTED, "tensor '%s' is %s, which a GGUF model file cannot take here",
                             v->name, v->type_name);
    pl->type = t;
    return RLX_OK;
}

static rlx_status plan_hf(job *j, const char *in)
{
    cJSON *cfg = NULL;
    rlx_status st = rlx_safetensors_read_config(in, &cfg);
    if (st == RLX_OK)
        st = llm_hparams_from_hf(cfg, &j->hp);
    cJSON_Delete(cfg);
    if (st != RLX_OK)
        return st;
    const char *arch = gguf_arch(&j->hp);
    if (!arch)
        return rlx_set_error(RLX_ERR_UNSUPPORTED,
                             "quantize: %s checkpoints are not converted (Llama, Mistral, Qwen2, Qwen3 are); "
                             "convert it to GGUF with llama.cpp first, then quantize that",
                             j->hp.arch_name);
    bool permute = j->hp.arch == LLM_LLAMA;
    int64_t n = rlx_weights_count(j->w);
    j->plans = rlx_calloc((size_t)n + 1, sizeof *j->plans);
    if (!j->plans)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    bool has_output = false;
    for (int64_t i = 0; i < n; i++) {
        const rlx_weight_view *v = rlx_weights_get(j->w, i);
        plan *pl = &j->plans[j->n_plans];
        if (ends_with(v->name, "rotary_emb.inv_freq")) /* recomputed by every runtime */
            continue;
        if (!llm_gguf_name_of_hf(false, v->name, pl->name, sizeof pl->name))
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "quantize: tensor '%s' has no llama.cpp name (%s)", v->name,
                                 j->hp.arch_name);
        if (!strcmp(pl->name, "output.weight")) {
            if (j->hp.tied)
                continue; /* the embedding serves as the output */
            has_output = true;
        }
        pl->src = v;
        if (permute && strstr(pl->name, ".attn_q."))
            pl->permute_head = j->hp.heads;
        else if (permute && strstr(pl->name, ".attn_k."))
            pl->permute_head = j->hp.kv_heads;
        j->mf.n_attn_v += strstr(pl->name, "attn_v.weight") != NULL;
        j->n_plans++;
    }
    j->mf.n_layers = j->hp.layers;
    j->mf.tied = !has_output;
    const rlx_weight_view *emb;
    if ((st = rlx_weights_find(j->w, "model.embed_tokens.weight", &emb)) != RLX_OK)
        return st;
    if (emb->ndim == 2 && emb->dims[0] != j->hp.vocab) /* the rows are the vocabulary llama.cpp sees */
        j->hp.vocab = (int)emb->dims[0];
    for (int64_t i = 0; i < j->n_plans; i++)
        if ((st = plan_type(j, &j->plans[i], j->plans[i].src, true)) != RLX_OK)
            return st;
    if (j->hp.rope_scaling == LLM_ROPE_LLAMA3) {
        if (!(j->rope_freqs = llama3_freq_factors(&j->hp)))
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
        plan *pl = &j->plans[j->n_plans++];
        snprintf(pl->name, sizeof pl->name, "rope_freqs.weight");
        pl->type = RLX_GGML_F32;
        pl->f32 = j->rope_freqs;
        pl->f32_n = j->hp.head_dim / 2;
    }
    /* the folder's name, as llama.cpp's converter names a model */
    char dir[4096], name[256];
    struct stat sb;
    if (snprintf(dir, sizeof dir, "%s", in) >= (int)sizeof dir)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "quantize: the path %.64s... is too long", in);
    if (!(stat(in, &sb) == 0 && S_ISDIR(sb.st_mode))) {
        char *slash = strrchr(dir, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - in) : 1, slash ? in : ".");
    }
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dir[--dl] = '\0';
    const char *base = strrchr(dir, '/');
    snprintf(name, sizeof name, "%.*s", (int)sizeof name - 1, base ? base + 1 : dir); /* a name, cut if long */
    if ((st = hf_metadata(j->gw, &j->hp, name)) != RLX_OK)
        return st;
    return hf_tokenizer_metadata(j->gw, dir, &j->hp, j->log);
}

static rlx_status plan_gguf(job *j, const rlx_gguf *g)
{
    rlx_status st;
    for (int64_t i = 0; i < rlx_gguf_kv_count(g); i++)
        if ((st = rlx_gguf_writer_set(j->gw, rlx_gguf_kv_key(g, i), rlx_gguf_kv_value(g, i))) != RLX_OK)
            return st;
    int64_t n = rlx_weights_count(j->w);
    j->plans = rlx_calloc((size_t)n + 1, sizeof *j->plans);
    if (!j->plans)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    bool has_output = false;
    int max_layer = -1;
    for (int64_t i = 0; i < n; i++) {
        const rlx_weight_view *v = rlx_weights_get(j->w, i);
        plan *pl = &j->plans[j->n_plans++];
        pl->src = v;
        if (strlen(v->name) >= sizeof pl->name)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "quantize: tensor name '%.40s...' is too long", v->name);
        snprintf(pl->name, sizeof pl->name, "%s", v->name);
        has_output |= !strcmp(v->name, "output.weight");
        j->mf.n_attn_v += strstr(v->name, "attn_v.weight") || strstr(v->name, "attn_qkv.weight");
        int layer;
        if (sscanf(v->name, "blk.%d.", &layer) == 1 && layer > max_layer)
            max_layer = layer;
    }
    j->mf.n_layers = max_layer + 1;
    j->mf.tied = !has_output;
    for (int64_t i = 0; i < j->n_plans; i++)
        if ((st = plan_type(j, &j->plans[i], j->plans[i].src, false)) != RLX_OK)
            return st;
    return RLX_OK;
}

rlx_status rlx_quantize_file(const char *in, const char *out, const char *type, int flags, void *log_file)
{
    FILE *log = log_file;
    if (!in || !out || !type)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_quantize_file: in, out and type are needed");
    job j = {0};
    if (!(j.p = find_preset(type)))
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "unknown quantization type '%s' (known: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, "
                             "q4_k_m, q5_k_m)",
                             type);
    rlx_status st = rlx_file_check_target(out, flags); /* refuse before any work */
    if (st != RLX_OK)
        return st;
    if ((st = rlx_weights_open(in, &j.w)) != RLX_OK)
        return st;
    st = rlx_gguf_writer_new(&j.gw);
    if (st == RLX_OK)
        st = rlx_weights_gguf(j.w) ? plan_gguf(&j, rlx_weights_gguf(j.w)) : plan_hf(&j, in);
    if (st == RLX_OK && (st = rlx_gguf_writer_set_u32(j.gw, "general.quantization_version", 2)) == RLX_OK)
        st = rlx_gguf_writer_set_u32(j.gw, "general.file_type", (uint32_t)j.p->ftype);
    size_t *bytes = st == RLX_OK ? rlx_calloc((size_t)j.n_plans + 1, sizeof *bytes) : NULL;
    if (st == RLX_OK && !bytes)
        st = rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "out of memory");
    for (int64_t i = 0; st == RLX_OK && i < j.n_plans; i++) {
        const plan *pl = &j.plans[i];
        int64_t one = pl->f32_n;
        st = rlx_gguf_writer_add_tensor(j.gw, pl->name, pl->type, pl->src ? pl->src->ndim : 1,
                                        pl->src ? pl->src->dims : &one, &bytes[i]);
    }
    rlx_file *f = NULL;
    if (st == RLX_OK && (st = rlx_file_open(out, flags, &f)) == RLX_OK)
        st = rlx_gguf_writer_write_header(j.gw, f);
    size_t total_in = 0, total_out = 0;
    for (int64_t i = 0; st == RLX_OK && i < j.n_plans; i++) {
        const plan *pl = &j.plans[i];
        st = write_one(j.gw, f, pl, bytes[i]);
        total_in += pl->src ? pl->src->nbytes : (size_t)pl->f32_n * 4;
        total_out += bytes[i];
        if (st == RLX_OK && log)
            fprintf(log, "[%lld/%lld] %-32s %-5s -> %s\n", (long long)i + 1, (long long)j.n_plans, pl->name,
                    pl->src ? pl->src->type_name : "F32", rlx_ggml_type_name(pl->type));
    }
    if (f) {
        if (st == RLX_OK)
            st = rlx_file_commit(f);
        else
            rlx_file_discard(f);
    }
    if (st == RLX_OK && log)
        fprintf(log, "%s: %lld tensors, %.2f MiB -> %.2f MiB (%s)\n", out, (long long)j.n_plans, total_in / 1048576.0,
                total_out / 1048576.0, j.p->name);
    free(bytes);
    job_free(&j);
    return st;
}
