/* workloads.c - graphs of the benchmark workloads and their seeded weights. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu_pool.h"
#include "core/error.h"
#include "models/workloads.h"

rlx_encoder_config rlx_encoder_minilm(int batch, int seq)
{
    rlx_encoder_config c = {batch, seq, 6, 384, 12, 1536, 30522, 512, 1e-12};
    return c;
}

static rlx_node param2(rlx_graph *g, const char *prefix, const char *leaf, int64_t a, int64_t b)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", prefix, leaf);
    return b ? rlx_param(g, name, RLX_F32, 2, (int64_t[]){a, b}) : rlx_param(g, name, RLX_F32, 1, (int64_t[]){a});
}

/* x @ W + b with W [in, out]. */
static rlx_node dense(rlx_graph *g, rlx_node x, const char *prefix, int64_t in, int64_t out, rlx_dtype t)
{
    char name[128];
    snprintf(name, sizeof name, "%s.w", prefix);
    rlx_node w = rlx_param(g, name, t, 2, (int64_t[]){in, out});
    snprintf(name, sizeof name, "%s.b", prefix);
    rlx_node b = rlx_param(g, name, t, 1, (int64_t[]){out});
    return rlx_add(g, rlx_matmul(g, x, w, 0, 0), b);
}

rlx_graph *rlx_workload_mlp(int batch, rlx_dtype t)
{
    rlx_graph *g = rlx_graph_new();
    if (!g)
        return NULL;
    rlx_node x = rlx_input(g, "x", t, 2, (int64_t[]){batch, 1024});
    x = rlx_gelu(g, dense(g, x, "fc1", 1024, 4096, t));
    x = rlx_gelu(g, dense(g, x, "fc2", 4096, 4096, t));
    x = dense(g, x, "fc3", 4096, 1024, t);
    rlx_output(g, "y", x);
    if (rlx_graph_verify(g) != RLX_OK) {
        rlx_graph_free(g);
        return NULL;
    }
    return g;
}

static rlx_node layer_norm(rlx_graph *g, rlx_node x, const char *prefix, int64_t h, double eps)
{
    return rlx_layer_norm(g, x, param2(g, prefix, "g", h, 0), param2(g, prefix, "b", h, 0), eps);
}

rlx_graph *rlx_workload_encoder(const rlx_encoder_config *c)
{
    rlx_graph *g = rlx_graph_new();
    if (!g)
        return NULL;
    int64_t B = c->batch, S = c->seq, H = c->hidden, NH = c->heads, D = c->hidden / c->heads;
    rlx_node ids = rlx_input(g, "input_ids", RLX_I64, 2, (int64_t[]){B, S});
    rlx_node word = param2(g, "emb.word", "w", c->vocab, H);
    rlx_node pos = param2(g, "emb.pos", "w", c->max_pos, H);
    rlx_node type = param2(g, "emb.type", "w", 2, H);
    rlx_node x = rlx_gather(g, word, ids, 0); /* [B, S, H] */
    int axis0 = 0;
    int64_t zero = 0, s_end = S, one = 1;
    x = rlx_add(g, x, rlx_slice(g, pos, 1, &axis0, &zero, &s_end, NULL));
    x = rlx_add(g, x, rlx_slice(g, type, 1, &axis0, &zero, &one, NULL));
    x = layer_norm(g, x, "emb.ln", H, c->eps);
    const int to_heads[4] = {0, 2, 1, 3};
    for (int l = 0; l < c->layers; l++) {
        char p[64], q[96];
        snprintf(p, sizeof p, "l%d", l);
        rlx_node heads[3];
        const char *names[3] = {"q", "k", "v"};
        for (int i = 0; i < 3; i++) {
            snprintf(q, sizeof q, "%s.%s", p, names[i]);
            rlx_node y = dense(g, x, q, H, H, RLX_F32);
            y = rlx_reshape(g, y, 4, (int64_t[]){B, S, NH, D});
            heads[i] = rlx_transpose(g, y, to_heads);
        }
        rlx_node a = rlx_attention(g, heads[0], heads[1], heads[2], -1, 0, 0.0);
        a = rlx_reshape(g, rlx_transpose(g, a, to_heads), 3, (int64_t[]){B, S, H});
        snprintf(q, sizeof q, "%s.o", p);
        a = dense(g, a, q, H, H, RLX_F32);
        snprintf(q, sizeof q, "%s.ln1", p);
        x = layer_norm(g, rlx_add(g, x, a), q, H, c->eps);
        snprintf(q, sizeof q, "%s.ffn1", p);
        rlx_node f = rlx_gelu(g, dense(g, x, q, H, c->ffn, RLX_F32));
        snprintf(q, sizeof q, "%s.ffn2", p);
        f = dense(g, f, q, c->ffn, H, RLX_F32);
        snprintf(q, sizeof q, "%s.ln2", p);
        x = layer_norm(g, rlx_add(g, x, f), q, H, c->eps);
    }
    rlx_output(g, "hidden", x);
    if (rlx_graph_verify(g) != RLX_OK) {
        rlx_graph_free(g);
        return NULL;
    }
    return g;
}

/* splitmix64's k-th output (k from 0) from `seed`: its state only ever
 * adds the same constant, so any element can be drawn on its own. */
static uint64_t splitmix_at(uint64_t seed, uint64_t k)
{
    uint64_t z = seed + (k + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Box-Muller over consecutive splitmix64 outputs: pair p draws outputs 2p
 * and 2p + 1.  Pairs are independent, so large fills (a 0.6B-parameter
 * default model) are split across the CPU pool's threads with the same
 * values. */
typedef struct normal_job {
    float *dst;
    int64_t n;
    double std;
    uint64_t seed;
} normal_job;

static void normal_pairs(void *arg, int64_t p0, int64_t p1, int worker)
{
    (void)worker;
    const normal_job *j = arg;
    for (int64_t p = p0; p < p1; p++) {
        double u1 = ((double)(splitmix_at(j->seed, 2 * (uint64_t)p) >> 11) + 0.5) / 9007199254740992.0;
        double u2 = ((double)(splitmix_at(j->seed, 2 * (uint64_t)p + 1) >> 11) + 0.5) / 9007199254740992.0;
        double r = sqrt(-2.0 * log(u1));
        j->dst[2 * p] = (float)(j->std * r * cos(6.283185307179586 * u2));
        if (2 * p + 1 < j->n)
            j->dst[2 * p + 1] = (float)(j->std * r * sin(6.283185307179586 * u2));
    }
}

void rlx_fill_normal(float *dst, int64_t n, double std, uint64_t seed)
{
    int64_t pairs = (n + 1) / 2;
    normal_job j = {.dst = dst, .n = n, .std = std, .seed = seed};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    rlx_cpu_parallel(pairs > (1 << 16) && cores > 1 ? (int)cores : 1, pairs, normal_pairs, &j);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

void rlx_workload_param_f32(const char *name, int index, size_t count, uint64_t seed, float *out)
{
    if (ends_with(name, ".b"))
        memset(out, 0, count * sizeof(float));
    else if (ends_with(name, ".g"))
        for (size_t k = 0; k < count; k++)
            out[k] = 1.0f;
    else
        rlx_fill_normal(out, (int64_t)count, 0.02, seed * 1000003ULL + (uint64_t)index);
}

rlx_status rlx_workload_init_params(rlx_session *s, uint64_t seed)
{
    int n = rlx_session_count(s, 1);
    for (int i = 0; i < n; i++) {
        rlx_tensor_info info;
        rlx_status st = rlx_session_info(s, 1, i, &info);
        if (st != RLX_OK)
            return st;
        size_t count = info.bytes / rlx_dtype_size(info.dtype);
        float *f = rlx_malloc(count * sizeof(float) + 1);
        void *buf = rlx_malloc(info.bytes + 1);
        if (!f || !buf) {
            free(f);
            free(buf);
            return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "init params: out of memory");
        }
        rlx_workload_param_f32(info.name, i, count, seed, f);
        for (size_t k = 0; k < count; k++) {
            switch (info.dtype) {
            case RLX_F16: ((uint16_t *)buf)[k] = rlx_f32_to_f16(f[k]); break;
            case RLX_BF16: ((uint16_t *)buf)[k] = rlx_f32_to_bf16(f[k]); break;
            case RLX_F64: ((double *)buf)[k] = f[k]; break;
            default: ((float *)buf)[k] = f[k]; break;
            }
        }
        st = rlx_session_set_param(s, info.name, buf, info.bytes);
        free(f);
        free(buf);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

/* The public entry points (rlx.h) over the builders above. */
rlx_status rlx_workload_graph(const char *name, int batch, int seq, rlx_graph **out)
{
    if (!name || !out || batch < 0 || seq < 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                             "rlx_workload_graph: name and out must not be NULL, batch and seq >= 0");
    *out = NULL;
    rlx_graph *g = NULL;
    if (!strcmp(name, "encoder")) {
        rlx_encoder_config c = rlx_encoder_minilm(batch ? batch : 1, seq ? seq : 128);
        g = rlx_workload_encoder(&c);
    } else if (!strcmp(name, "mlp")) {
        g = rlx_workload_mlp(batch ? batch : 256, RLX_F32);
    } else if (!strcmp(name, "decoder-small") || !strcmp(name, "decoder")) {
        rlx_decoder_config c = !strcmp(name, "decoder-small") ? rlx_decoder_small(seq ? seq : 128)
                                                              : rlx_decoder_qwen3_06b(seq ? seq : 512);
        if (batch)
            c.batch = batch;
        g = rlx_workload_decoder(&c);
    } else if (!strcmp(name, "resnet50")) {
        g = rlx_workload_resnet50(batch ? batch : 1, RLX_F32);
    } else {
        return rlx_set_error(RLX_ERR_NOT_FOUND,
                             "unknown workload '%s' (built-in: encoder, mlp, resnet50, decoder-small, decoder)", name);
    }
    if (!g)
        return rlx_set_error(RLX_ERR_OUT_OF_MEMORY, "workload '%s': the graph could not be built", name);
    *out = g;
    return RLX_OK;
}

rlx_status rlx_workload_set_params(rlx_session *s, uint64_t seed) { return rlx_workload_init_params(s, seed); }
