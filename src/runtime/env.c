/* env.c - options and the environment variables that override them: the
 * one place the library reads its environment (docs/ENVIRONMENT_VARIABLES.md
 * lists every variable).  rlx_options_apply_env overrides the public
 * options; rlx_backend_settings_from_env fills the backend settings the
 * runtime hands to the backend.  With ignore_env neither reads an RLX_*
 * variable.  Nothing here (or anywhere in the library) writes the
 * environment. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "runtime/runtime.h"

void rlx_options_init(rlx_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->device = RLX_DEVICE_CPU;
    o->precision = RLX_PRECISION_F32;
    o->seed = 0x5eed;
}

rlx_status rlx_device_parse(const char *text, rlx_device *device, int *index)
{
    if (!text || !device || !index)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "rlx_device_parse: text, device and index must not be NULL");
    const char *colon = strchr(text, ':');
    size_t kind_len = colon ? (size_t)(colon - text) : strlen(text);
    rlx_device d;
    if (kind_len == 3 && !strncmp(text, "cpu", 3))
        d = RLX_DEVICE_CPU;
    else if (kind_len == 4 && !strncmp(text, "cuda", 4))
        d = RLX_DEVICE_CUDA;
    else
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "unknown device '%s' (cpu, cuda or cuda:N)", text);
    long n = 0;
    if (colon) {
        char *end = NULL;
        n = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || colon[1] == '-' || colon[1] == '+' || colon[1] == ' ' || n > 1023)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT,
                                 "device '%s': the index after ':' must be a number from 0 to 1023", text);
    }
    if (d == RLX_DEVICE_CPU && n != 0)
        return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "device '%s': the cpu is device 0 (cpu or cpu:0)", text);
    *device = d;
    *index = (int)n;
    return RLX_OK;
}

int rlx_env_int(const char *name, int def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end)
        return def;
    return (int)x;
}

long rlx_cpu_count(void) { return sysconf(_SC_NPROCESSORS_ONLN); }

size_t rlx_parse_size(const char *v)
{
    if (!v || *v < '0' || *v > '9')
        return 0;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno)
        return 0;
    int shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    case 't':
    case 'T':
        shift = 40;
        end++;
        break;
    default: break;
    }
    if (shift && end[0] == 'i' && end[1] == 'B')
        end += 2;
    else if (*end == 'B' || *end == 'b')
        end++;
    if (*end || x == 0 || x > (SIZE_MAX >> shift))
        return 0;
    return (size_t)x << shift;
}

size_t rlx_available_memory(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    size_t kb = 0;
    if (f) {
        char line[256];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1)
                break;
        fclose(f);
    }
    if (kb)
        return kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* ---------------------------------------------------------- parsing */

static bool word_is(const char *v, const char *w) { return strcasecmp(v, w) == 0; }

/* An integer, the whole text (sign allowed); false if anything else. */
static bool parse_long(const char *v, long *out)
{
    if (!v || !*v)
        return false;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno || end == v)
        return false;
    *out = x;
    return true;
}

int rlx_parse_bool(const char *v)
{
    if (!v || !*v)
        return -1;
    long x;
    if (parse_long(v, &x))
        return x != 0;
    if (word_is(v, "true") || word_is(v, "yes") || word_is(v, "on"))
        return 1;
    if (word_is(v, "false") || word_is(v, "no") || word_is(v, "off"))
        return 0;
    return -2;
}

static void note_bad(const char *name, const char *v, const char *what)
{
    fprintf(stderr, "[rlx] note: %s=%s is not %s; ignored\n", name, v, what);
}

/* A switch: a value the parser takes sets *field (false words turn it off
 * again), unset or empty leaves it, anything else leaves it with a note. */
static void env_bool(int *field, const char *name)
{
    const char *v = getenv(name);
    int b = rlx_parse_bool(v);
    if (b >= 0)
        *field = b;
    else if (b == -2)
        note_bad(name, v, "a switch (1/0, true/false, yes/no, on/off)");
}

/* A level: an integer as it is (RLX_VERBOSE=2), or a switch's words. */
static void env_level(int *field, const char *name)
{
    const char *v = getenv(name);
    long x;
    if (parse_long(v, &x))
        *field = x < 0 ? 0 : x > 9 ? 9 : (int)x;
    else
        env_bool(field, name);
}

/* A non-empty value read as atoi does (tuning knobs that filter by value:
 * a value that is no number matches nothing); unset or empty keeps def. */
static int env_atoi(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

/* One of the words choices[0..n) (exactly), as its index; unset or empty
 * gives def; another word gives def with a note. */
static int env_choice(const char *name, const char *const *choices, int n, int def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    for (int i = 0; i < n; i++)
        if (choices[i] && strcmp(v, choices[i]) == 0)
            return i;
    note_bad(name, v, "one of the values it takes");
    return def;
}

/* ---------------------------------------------------------- options */

void rlx_options_apply_env(rlx_options *o)
{
    if (o->ignore_env)
        return;
    env_level(&o->verbose, "RLX_VERBOSE");
    env_bool(&o->dispatch_report, "RLX_DISPATCH_REPORT");
    env_bool(&o->no_reuse, "RLX_ARENA_NO_REUSE");
    env_bool(&o->no_inplace, "RLX_DISABLE_INPLACE");
    env_bool(&o->pin_output_ancestors, "RLX_PIN_OUTPUT_ANCESTORS");
    env_bool(&o->no_fusion, "RLX_DISABLE_FUSION");
    env_bool(&o->no_amp, "RLX_DISABLE_AMP");
    env_bool(&o->no_simplify, "RLX_DISABLE_SIMPLIFY");
    env_bool(&o->no_preencode, "RLX_DISABLE_CUDA_GRAPH");
    env_bool(&o->no_layout, "RLX_DISABLE_LAYOUT");
    env_bool(&o->no_layout, "RLX_NO_LAYOUT");
    if (o->verbose)
        o->dispatch_report = 1;
    const char *lim = getenv("RLX_MAX_ARENA");
    if (lim && *lim) {
        size_t b = rlx_parse_size(lim);
        if (b)
            o->max_arena_bytes = b;
        else
            fprintf(stderr, "[rlx] note: RLX_MAX_ARENA=%s is not a size (such as 512M or 2G); ignored\n", lim);
    }
    int t = rlx_env_int("RLX_THREADS", 0);
    if (t > 0)
        o->threads = t;
}

/* --------------------------------------------------- backend settings */

void rlx_backend_settings_from_env(rlx_backend_settings *s, const rlx_options *o)
{
    rlx_backend_settings_init(s);
    s->verbose = o ? o->verbose : 0;
    s->no_preencode = o ? o->no_preencode : 0;
    if (o && o->ignore_env)
        return;
    const char *cap = getenv("RLX_MAX_BUFFER_BYTES");
    if (cap && *cap)
        s->max_buffer_bytes = (size_t)strtoull(cap, NULL, 10);
    /* CPU */
    env_bool(&s->no_blas, "RLX_NO_BLAS");
    static const char *const cpu_gemm[] = {NULL, "onednn", "openblas", "builtin"};
    s->cpu_gemm = env_choice("RLX_CPU_GEMM", cpu_gemm, 4, RLX_CPU_GEMM_AUTO);
    env_bool(&s->profile, "RLX_PROFILE");
    env_bool(&s->cpu_no_avx512, "RLX_CPU_NO_AVX512");
    env_bool(&s->cpu_winograd, "RLX_CPU_WINOGRAD");
    /* CUDA */
    env_bool(&s->cuda_profile, "RLX_CUDA_PROFILE");
    const char *run = getenv("RLX_CUDA_PROFILE_RUN");
    if (run && *run)
        s->cuda_profile_run = strtol(run, NULL, 10);
    env_bool(&s->cuda_no_prologue, "RLX_CUDA_NO_PROLOGUE");
    env_bool(&s->cuda_no_pdl, "RLX_CUDA_NO_PDL");
    env_bool(&s->cuda_no_cudnn, "RLX_CUDA_NO_CUDNN");
    env_bool(&s->cuda_no_cudnn_graph, "RLX_CUDA_NO_CUDNN_GRAPH");
    env_bool(&s->cuda_tf32, "RLX_CUDA_TF32");
    static const char *const f32_gemm[] = {"sgemm", NULL, "split"};
    s->cuda_f32_gemm = env_choice("RLX_CUDA_F32_GEMM", f32_gemm, 3, RLX_CUDA_F32_GEMM_TUNED);
    env_bool(&s->cuda_autotune, "RLX_CUDA_AUTOTUNE");
    static const char *const mm_path[] = {NULL, "cublaslt", "cudnn", "wgmma"};
    s->cuda_mm_path = env_choice("RLX_CUDA_MM_PATH", mm_path, 4, RLX_CUDA_MM_AUTO);
    env_bool(&s->cuda_wgmma, "RLX_CUDA_WGMMA");
    s->cuda_wgmma_bn = env_atoi("RLX_CUDA_WGMMA_BN", -1);
    s->cuda_wgmma_split = env_atoi("RLX_CUDA_WGMMA_SPLIT", -1);
    s->cuda_wgmma_stages = env_atoi("RLX_CUDA_WGMMA_STAGES", -1);
    env_bool(&s->cuda_ew_lin, "RLX_CUDA_EW_LIN");
    env_bool(&s->cuda_jit, "RLX_CUDA_JIT");
    env_bool(&s->cuda_no_attn_block, "RLX_CUDA_NO_ATTN_BLOCK");
    env_bool(&s->cuda_no_tc_attention, "RLX_CUDA_NO_TC_ATTENTION");
    env_bool(&s->cuda_decode_attention, "RLX_CUDA_DECODE_ATTENTION");
    s->cuda_attn_split = env_atoi("RLX_CUDA_ATTN_SPLIT", 0);
    int rows = env_atoi("RLX_CUDA_PROJ_ROWS", 0);
    s->cuda_proj_rows = rows >= 1 && rows <= RLX_PROJ_FEW_ROWS ? rows : 0;
    int warps = env_atoi("RLX_CUDA_ATTN_WARPS", 0);
    s->cuda_attn_warps = warps == 2 || warps == 4 || warps == 8 ? warps : 0;
    int lanes = env_atoi("RLX_CUDA_ATTN_LANES", 0);
    s->cuda_attn_lanes = lanes == 4 || lanes == 8 || lanes == 16 ? lanes : 0;
    env_bool(&s->cuda_nhwc, "RLX_CUDA_NHWC");
    static const char *const conv_path[] = {NULL, "gemm", "graph", "legacy"};
    s->cuda_conv_path = env_choice("RLX_CUDA_CONV_PATH", conv_path, 4, RLX_CUDA_CONV_AUTO);
    env_bool(&s->cuda_conv_legacy, "RLX_CUDA_CONV_LEGACY");
    env_bool(&s->cuda_conv_rtc, "RLX_CUDA_CONV_RTC");
}

const char *rlx_cpu_gemm_info(void)
{
    rlx_backend_settings s;
    rlx_backend_settings_from_env(&s, NULL);
    return rlx_cpu_gemm_describe(&s);
}
