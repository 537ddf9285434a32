/* cmd_run.c - `rlx run`: compile a model, run it, summarize the outputs and
 * time repeated runs; `rlx dump --dot`: the graph before and after
 * optimization as Graphviz. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "rlx.h"

#define MAX_FILE_ARGS 32

/* A failure found by the program itself (not the library), for the same
 * "rlx run: ..." line a library error gets. */
static char cli_msg[512];

static void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cli_msg, sizeof cli_msg, fmt, ap);
    va_end(ap);
}

static const char *why(void) { return cli_msg[0] ? cli_msg : rlx_last_error(); }

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* NAME=VALUE from --input and --shape. */
typedef struct name_value {
    const char *name;
    const char *value;
} name_value;

typedef struct run_args {
    const char *model; /* workload name or model file */
    rlx_options opts;
    int repeat, batch, seq;
    int report;
    name_value inputs[MAX_FILE_ARGS], shapes[MAX_FILE_ARGS], outputs[MAX_FILE_ARGS];
    int n_inputs, n_shapes, n_outputs;
    const char *output_dir; /* every output as DIR/NAME.npy (only when given) */
    int force;              /* replace existing files */
} run_args;

static void run_help(void)
{
    printf("usage: rlx run [MODEL] [options]\n"
           "\n"
           "Compiles MODEL and runs it once on seeded random inputs, printing the compile\n"
           "stages, the arena and a summary of each output.  MODEL is a built-in workload\n"
           "(encoder, mlp, resnet50, decoder-small, decoder; default encoder) or, where the\n"
           "ONNX module is built, a .onnx file (inputs not given with --input get seeded\n"
           "random values).\n"
           "\n"
           "options:\n"
           "  --device cpu|cuda|cuda:N   device to run on (default cpu; cuda is cuda:0)\n"
           "  --precision f32|f16|bf16   compute precision (default f32; f16/bf16 run the\n"
           "                             mixed-precision pass where the device supports it)\n"
           "  --threads N                CPU threads, 1 to 1024 (default: all cores)\n"
           "  --repeat N                 time N runs after a warm-up run and print\n"
           "                             'latency: median X ms, min Y ms over N runs'\n"
           "  --seed N                   seed for weights, inputs and random ops (default 1)\n"
           "  --batch N, --seq N         workload batch size and sequence length\n"
           "                             (encoder default 1 x 128, mlp default 256)\n"
           "  --input NAME=FILE          model files: an input from a .npy (or ONNX .pb)\n"
           "                             file; its shape binds the input's symbolic dims\n"
           "  --shape NAME=AxBxC         model files: bind an input's shape (symbolic dims\n"
           "                             left unbound are set to 1, with a note)\n"
           "  --output-dir DIR           write each output as DIR/NAME.npy (the folder must\n"
           "                             exist); without it or --output nothing is written\n"
           "  --output NAME=FILE         write output NAME as a .npy file\n"
           "  --force                    replace files that exist (else they are refused);\n"
           "                             every file is written beside and renamed into place\n"
           "  --max-memory SIZE          refuse to compile a model whose arena exceeds SIZE\n"
           "                             (bytes, or with K, M, G; also RLX_MAX_ARENA)\n"
           "  --report                   print the per-op dispatch report\n"
           "  --verbose                  print every compile stage (same as RLX_VERBOSE=1)\n"
           "  -h, --help                 this text\n");
}

static int parse_int_range(const char *flag, const char *v, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        if (hi == 1 << 30)
            fprintf(stderr, "rlx run: %s needs an integer >= %d\n", flag, lo);
        else
            fprintf(stderr, "rlx run: %s needs an integer from %d to %d\n", flag, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int parse_int(const char *flag, const char *v, int lo, int *out)
{
    return parse_int_range(flag, v, lo, 1 << 30, out);
}

static int parse_run_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof *a);
    rlx_options_init(&a->opts);
    a->model = "encoder";
    a->opts.seed = 1;
    a->repeat = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int tmp;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            run_help();
            return 1;
        } else if (!strcmp(f, "--device")) {
            if (!v)
                return fprintf(stderr, "rlx run: --device takes cpu, cuda or cuda:N\n"), -1;
            if (rlx_device_parse(v, &a->opts.device, &a->opts.device_index) != RLX_OK)
                return fprintf(stderr, "rlx run: --device: %s\n", rlx_last_error()), -1;
            i++;
        } else if (!strcmp(f, "--precision")) {
            if (v && !strcmp(v, "f32"))
                a->opts.precision = RLX_PRECISION_F32;
            else if (v && !strcmp(v, "f16"))
                a->opts.precision = RLX_PRECISION_F16;
            else if (v && !strcmp(v, "bf16"))
                a->opts.precision = RLX_PRECISION_BF16;
            else
                return fprintf(stderr, "rlx run: --precision takes f32, f16 or bf16\n"), -1;
            i++;
        } else if (!strcmp(f, "--threads")) {
            if (parse_int_range(f, v, 1, 1024, &a->opts.threads))
                return -1;
            i++;
        } else if (!strcmp(f, "--repeat")) {
            if (parse_int(f, v, 1, &a->repeat))
                return -1;
            i++;
        } else if (!strcmp(f, "--seed")) {
            if (parse_int(f, v, 0, &tmp))
                return -1;
            a->opts.seed = (uint64_t)tmp;
            i++;
        } else if (!strcmp(f, "--batch")) {
            if (parse_int(f, v, 1, &a->batch))
                return -1;
            i++;
        } else if (!strcmp(f, "--seq")) {
            if (parse_int(f, v, 1, &a->seq))
                return -1;
            i++;
        } else if (!strcmp(f, "--input") || !strcmp(f, "--shape") || !strcmp(f, "--output")) {
            bool is_shape = !strcmp(f, "--shape"), is_input = !strcmp(f, "--input");
            const char *eq = v ? strchr(v, '=') : NULL;
            int *n = is_input ? &a->n_inputs : is_shape ? &a->n_shapes : &a->n_outputs;
            if (!eq || eq == v || !eq[1])
                return fprintf(stderr, "rlx run: %s takes NAME=%s\n", f, is_shape ? "AxBxC" : "FILE"), -1;
            if (*n == MAX_FILE_ARGS)
                return fprintf(stderr, "rlx run: at most %d %s options\n", MAX_FILE_ARGS, f), -1;
            name_value *nv = is_input ? &a->inputs[*n] : is_shape ? &a->shapes[*n] : &a->outputs[*n];
            argv[i + 1][eq - v] = '\0'; /* split NAME=VALUE in place */
            nv->name = v;
            nv->value = eq + 1;
            (*n)++;
            i++;
        } else if (!strcmp(f, "--output-dir")) {
            if (!v)
                return fprintf(stderr, "rlx run: --output-dir takes a folder\n"), -1;
            a->output_dir = v;
            i++;
        } else if (!strcmp(f, "--force")) {
            a->force = 1;
        } else if (!strcmp(f, "--max-memory")) {
            if (!(a->opts.max_arena_bytes = rlx_parse_size(v)))
                return fprintf(stderr, "rlx run: --max-memory takes a size such as 4096, 512M or 2G\n"), -1;
            i++;
        } else if (!strcmp(f, "--report")) {
            a->report = 1;
            a->opts.dispatch_report = 1;
        } else if (!strcmp(f, "--verbose")) {
            a->opts.verbose = 1;
        } else if (f[0] == '-') {
            fprintf(stderr, "rlx run: unknown option '%s' (see rlx run --help)\n", f);
            return -1;
        } else {
            a->model = f;
        }
    }
    return 0;
}

/* A tensor read from an --input file. */
typedef struct loaded_tensor {
    const char *name;
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    void *data;
    size_t bytes;
} loaded_tensor;

static bool is_model_file(const char *model) { return strchr(model, '/') || strstr(model, ".onnx"); }

#ifdef RLX_HAVE_ONNX
static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}
#endif

/* Reads every --input file; false (message printed, naming the command
 * `cmd`) on the first failure. */
static bool load_inputs(const char *cmd, const run_args *a, loaded_tensor *out)
{
    for (int i = 0; i < a->n_inputs; i++) {
        loaded_tensor *t = &out[i];
        t->name = a->inputs[i].name;
        const char *path = a->inputs[i].value;
        rlx_status st;
#ifdef RLX_HAVE_ONNX
        if (ends_with(path, ".pb"))
            st = rlx_onnx_read_tensor(path, &t->dtype, &t->ndim, t->dims, &t->data, &t->bytes);
        else
#endif
            st = rlx_npy_read(path, &t->dtype, &t->ndim, t->dims, &t->data, &t->bytes);
        if (st != RLX_OK) {
            fprintf(stderr, "rlx %s: --input %s: %s\n", cmd, t->name, rlx_last_error());
            return false;
        }
    }
    return true;
}

#ifdef RLX_HAVE_ONNX
/* "1x3x224x224" -> dims; false if malformed. */
static bool parse_dims(const char *text, int *ndim, int64_t *dims)
{
    *ndim = 0;
    const char *p = text;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || *ndim == RLX_MAX_DIMS)
            return false;
        dims[(*ndim)++] = v;
        if (*end == 'x' || *end == 'X' || *end == ',')
            end++;
        else if (*end)
            return false;
        p = end;
    }
    return *ndim > 0;
}

#endif

static rlx_graph *load_model_file(const run_args *a, const loaded_tensor *files)
{
#ifdef RLX_HAVE_ONNX
    rlx_onnx_binding b[2 * MAX_FILE_ARGS];
    int n = 0;
    memset(b, 0, sizeof b);
    for (int i = 0; i < a->n_shapes; i++, n++) {
        b[n].name = a->shapes[i].name;
        if (!parse_dims(a->shapes[i].value, &b[n].ndim, b[n].dims)) {
            cli_error("--shape %s=%s: expected dims like 1x3x224x224", a->shapes[i].name, a->shapes[i].value);
            return NULL;
        }
    }
    for (int i = 0; i < a->n_inputs; i++, n++) {
        b[n].name = files[i].name;
        b[n].ndim = files[i].ndim;
        memcpy(b[n].dims, files[i].dims, sizeof b[n].dims);
    }
    rlx_onnx_options o;
    rlx_onnx_options_init(&o);
    o.bindings = b;
    o.n_bindings = n;
    o.default_dim = 1;
    rlx_graph *g = NULL;
    if (rlx_onnx_import(a->model, &o, &g) != RLX_OK)
        return NULL;
    return g;
#else
    (void)files;
    cli_error("'%s': this build of RLX has no ONNX importer", a->model);
    return NULL;
#endif
}

/* Builds the named workload or loads the model file; NULL with a message. */
static rlx_graph *build_model(const run_args *a, const loaded_tensor *files)
{
    if (is_model_file(a->model))
        return load_model_file(a, files);
    rlx_graph *g = NULL;
    rlx_status st = rlx_workload_graph(a->model, a->batch, a->seq, &g);
    if (st == RLX_ERR_NOT_FOUND)
        cli_error("unknown model '%s': not a model file, and %s", a->model, rlx_last_error());
    return st == RLX_OK ? g : NULL;
}

/* n seeded random values of dtype t into buf: token ids for integers,
 * normal values else; -1 when out of memory (message printed). */
static int fill_random(void *buf, rlx_dtype t, size_t n, uint64_t seed, const char *name)
{
    float *f = malloc(n * sizeof(float) + 1);
    if (!f) {
        cli_error("input '%s': cannot allocate %zu bytes for its values", name, n * sizeof(float));
        return -1;
    }
    rlx_fill_normal(f, (int64_t)n, 1.0, seed);
    for (size_t k = 0; k < n; k++) {
        switch (t) {
        case RLX_I64: ((int64_t *)buf)[k] = (int64_t)(fabsf(f[k]) * 7919.0f) % 30000; break;
        case RLX_I32: ((int32_t *)buf)[k] = (int32_t)((int64_t)(fabsf(f[k]) * 7919.0f) % 30000); break;
        case RLX_F16: ((uint16_t *)buf)[k] = rlx_f32_to_f16(f[k]); break;
        case RLX_BF16: ((uint16_t *)buf)[k] = rlx_f32_to_bf16(f[k]); break;
        case RLX_F64: ((double *)buf)[k] = f[k]; break;
        case RLX_F32: ((float *)buf)[k] = f[k]; break;
        default: ((uint8_t *)buf)[k] = f[k] > 0; break;
        }
    }
    free(f);
    return 0;
}

/* Inputs from --input files; the rest seeded random (fill_random). */
static int fill_inputs(rlx_session *s, uint64_t seed, const loaded_tensor *files, int n_files)
{
    for (int f = 0; f < n_files; f++) {
        rlx_tensor_info info;
        if (rlx_session_find(s, 0, files[f].name, &info) != RLX_OK)
            return -1;
        if (info.dtype != files[f].dtype) {
            cli_error("input '%s' is %s, the file holds %s", files[f].name, rlx_dtype_name(info.dtype),
                      rlx_dtype_name(files[f].dtype));
            return -1;
        }
        if (rlx_session_set_input(s, files[f].name, files[f].data, files[f].bytes) != RLX_OK)
            return -1;
    }
    for (int i = 0; i < rlx_session_count(s, 0); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 0, i, &info);
        bool from_file = false;
        for (int f = 0; f < n_files; f++)
            from_file |= !strcmp(files[f].name, info.name);
        if (from_file)
            continue;
        void *buf = malloc(info.bytes + 1);
        if (!buf) {
            cli_error("input '%s': cannot allocate %zu bytes", info.name, info.bytes);
            return -1;
        }
        rlx_status st = RLX_ERR_OUT_OF_MEMORY;
        if (fill_random(buf, info.dtype, info.bytes / rlx_dtype_size(info.dtype), seed + 77 + (uint64_t)i, info.name) ==
            0)
            st = rlx_session_set_input(s, info.name, buf, info.bytes);
        free(buf);
        if (st != RLX_OK)
            return -1;
    }
    return 0;
}

/* A model output after a run, on the host. */
typedef struct run_output {
    rlx_tensor_info info; /* info.name points into the session or the model's output list */
    void *data;
} run_output;

static void free_run_outputs(run_output *o, int n)
{
    for (int i = 0; i < n; i++)
        free(o[i].data);
    free(o);
}

/* The session's outputs, copied; -1 with the message printed. */
static int session_outputs(rlx_session *s, run_output **out, int *n_out)
{
    int n = rlx_session_count(s, 2);
    run_output *o = calloc((size_t)n + 1, sizeof *o);
    if (!o)
        return cli_error("out of memory"), -1;
    for (int i = 0; i < n; i++) {
        rlx_session_info(s, 2, i, &o[i].info);
        if (!(o[i].data = malloc(o[i].info.bytes + 1)) ||
            rlx_session_get_output(s, o[i].info.name, o[i].data, o[i].info.bytes) != RLX_OK) {
            cli_error("output '%s': %s", o[i].info.name, o[i].data ? rlx_last_error() : "out of memory");
            free_run_outputs(o, i + 1);
            return -1;
        }
    }
    *out = o;
    *n_out = n;
    return 0;
}

static void summarize_outputs(const run_output *outs, int n_outs)
{
    for (int i = 0; i < n_outs; i++) {
        rlx_tensor_info info = outs[i].info;
        size_t n = info.bytes / rlx_dtype_size(info.dtype);
        const unsigned char *buf = outs[i].data;
        double sum = 0, sq = 0, lo = INFINITY, hi = -INFINITY;
        size_t bad = 0;
        double first[4] = {0};
        for (size_t k = 0; k < n; k++) {
            double v;
            switch (info.dtype) {
            case RLX_F32: v = ((float *)buf)[k]; break;
            case RLX_F16: v = rlx_f16_to_f32(((uint16_t *)buf)[k]); break;
            case RLX_BF16: v = rlx_bf16_to_f32(((uint16_t *)buf)[k]); break;
            case RLX_F64: v = ((double *)buf)[k]; break;
            case RLX_I64: v = (double)((int64_t *)buf)[k]; break;
            case RLX_I32: v = ((int32_t *)buf)[k]; break;
            case RLX_I8: v = ((int8_t *)buf)[k]; break;
            default: v = buf[k]; break;
            }
            if (k < 4)
                first[k] = v;
            if (!isfinite(v)) {
                bad++;
                continue;
            }
            sum += v;
            sq += v * v;
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        double mean = n ? sum / (double)n : 0, var = n ? sq / (double)n - mean * mean : 0;
        printf("output %s: %s [", info.name, rlx_dtype_name(info.dtype));
        for (int d = 0; d < info.ndim; d++)
            printf(d ? ", %lld" : "%lld", (long long)info.dims[d]);
        printf("] mean %.6g std %.6g min %.6g max %.6g non-finite %zu\n", mean, sqrt(var > 0 ? var : 0), lo, hi, bad);
        printf("  first values:");
        for (size_t k = 0; k < n && k < 4; k++)
            printf(" %.6g", first[k]);
        printf("\n");
    }
}

/* A file asked for: an output and where it goes. */
typedef struct out_file {
    const char *name;
    char *path;
} out_file;

static void free_out_files(out_file *of, int n)
{
    for (int i = 0; i < n; i++)
        free(of[i].path);
    free(of);
}

static char *path_join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 8;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s.npy", dir, name);
    return p;
}

/* The files to write: each --output NAME=FILE, and every output as
 * DIR/NAME.npy under --output-dir (the name reduced to [A-Za-z0-9._-]).
 * Each target is checked before anything runs (exists without --force, no
 * such folder, not writable); -1 with the message printed. */
static int plan_outputs(const char *const *names, int n_model, const run_args *a, out_file **out, int *n_out)
{
    int cap = a->n_outputs + (a->output_dir ? n_model : 0), n = 0;
    out_file *of = calloc((size_t)cap + 1, sizeof *of);
    if (!of)
        return fprintf(stderr, "rlx run: out of memory\n"), -1;
    for (int i = 0; i < a->n_outputs; i++) {
        int found = -1;
        for (int k = 0; k < n_model && found < 0; k++)
            if (!strcmp(names[k], a->outputs[i].name))
                found = k;
        if (found < 0) {
            fprintf(stderr, "rlx run: --output %s: the model has no output '%s' (outputs:", a->outputs[i].name,
                    a->outputs[i].name);
            for (int k = 0; k < n_model; k++)
                fprintf(stderr, " %s", names[k]);
            fprintf(stderr, ")\n");
            goto fail;
        }
        of[n].name = names[found];
        if (!(of[n++].path = strdup(a->outputs[i].value)))
            goto oom;
    }
    for (int i = 0; a->output_dir && i < n_model; i++) {
        char safe[256];
        size_t k = 0;
        for (const char *c = names[i]; *c && k + 1 < sizeof safe; c++)
            safe[k++] = (isalnum((unsigned char)*c) || *c == '.' || *c == '-' || *c == '_') ? *c : '_';
        safe[k] = '\0';
        if (k == 0 || !strcmp(safe, ".") || !strcmp(safe, ".."))
            snprintf(safe, sizeof safe, "output%d", i);
        of[n].name = names[i];
        if (!(of[n++].path = path_join(a->output_dir, safe)))
            goto oom;
    }
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < i; k++)
            if (!strcmp(of[i].path, of[k].path)) {
                fprintf(stderr, "rlx run: outputs '%s' and '%s' would both be written to '%s'\n", of[k].name,
                        of[i].name, of[i].path);
                goto fail;
            }
        if (rlx_file_check_target(of[i].path, a->force ? RLX_FILE_FORCE : 0) != RLX_OK) {
            fprintf(stderr, "rlx run: output '%s': %s\n", of[i].name, rlx_last_error());
            goto fail;
        }
    }
    *out = of;
    *n_out = n;
    return 0;
oom:
    fprintf(stderr, "rlx run: out of memory\n");
fail:
    free_out_files(of, n);
    return -1;
}

/* Writes every planned file, each beside its path; only when all are
 * written are they moved into place, so a failure leaves none of them. */
static int write_outputs(const run_output *outs, int n_outs, const out_file *of, int n, int force)
{
    rlx_file **w = calloc((size_t)n + 1, sizeof *w);
    if (!w)
        return fprintf(stderr, "rlx run: out of memory\n"), -1;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const run_output *o = NULL;
        for (int k = 0; k < n_outs && !o; k++)
            if (!strcmp(outs[k].info.name, of[i].name))
                o = &outs[k];
        if (!o) {
            fprintf(stderr, "rlx run: output '%s': the run gave no such output\n", of[i].name);
            rc = -1;
            break;
        }
        rlx_status st = rlx_file_open(of[i].path, force ? RLX_FILE_FORCE : 0, &w[i]);
        if (st == RLX_OK)
            st = rlx_npy_write_file(w[i], o->info.dtype, o->info.ndim, o->info.dims, o->data, o->info.bytes);
        if (st != RLX_OK) {
            fprintf(stderr, "rlx run: output '%s': %s\n", of[i].name, why());
            rc = -1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (rc != 0) {
            rlx_file_discard(w[i]);
        } else if (rlx_file_commit(w[i]) != RLX_OK) {
            fprintf(stderr, "rlx run: output '%s': %s\n", of[i].name, rlx_last_error());
            rc = -1;
        } else {
            printf("wrote %s\n", of[i].path);
        }
    }
    free(w);
    return rc;
}

/* An --output-dir must be a writable folder: checked before any work. */
static int check_output_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return fprintf(stderr, "rlx run: --output-dir '%s': %s\n", dir,
                       errno == ENOENT ? "no such folder" : strerror(errno)),
               -1;
    if (!S_ISDIR(st.st_mode))
        return fprintf(stderr, "rlx run: --output-dir '%s': not a folder\n", dir), -1;
    if (access(dir, W_OK | X_OK) != 0)
        return fprintf(stderr, "rlx run: --output-dir '%s': not writable (%s)\n", dir, strerror(errno)), -1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *times, int n)
{
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

#ifdef RLX_HAVE_ONNX
/* The shape of graph input x for a staged run: its --input file's, else
 * --shape NAME=dims, else the declared dims with symbolic ones from
 * --shape DIM=N (default 1).  false with the message printed. */
static bool staged_shape(const run_args *a, const rlx_onnx_input *x, int *ndim, int64_t *dims)
{
    for (int i = 0; i < a->n_shapes; i++)
        if (!strcmp(a->shapes[i].name, x->name)) {
            if (parse_dims(a->shapes[i].value, ndim, dims))
                return true;
            cli_error("--shape %s=%s: expected dims like 1x3x224x224", x->name, a->shapes[i].value);
            return false;
        }
    if (x->ndim < 0) {
        cli_error("input '%s' has no declared shape; give it with --shape %s=dims", x->name, x->name);
        return false;
    }
    *ndim = x->ndim;
    for (int d = 0; d < x->ndim; d++) {
        dims[d] = x->dims[d] >= 0 ? x->dims[d] : 1;
        for (int i = 0; x->dims[d] < 0 && x->dim_names[d] && i < a->n_shapes; i++)
            if (!strcmp(a->shapes[i].name, x->dim_names[d]))
                dims[d] = strtoll(a->shapes[i].value, NULL, 10);
    }
    return true;
}

/* `rlx run MODEL.onnx` for a model whose ops need values it computes
 * (NonZero, NonMaxSuppression, ... on its own data): rlx_model_run, in
 * stages, on the --input files and seeded random values for the rest. */
static int run_staged(const run_args *a, const loaded_tensor *files)
{
    rlx_onnx_input *ins = NULL, *outs_decl = NULL;
    int nin = 0, nout = 0, rc = 1, n_outs = 0, n_results = 0, n_y = 0;
    rlx_model *m = NULL;
    rlx_onnx_tensor *xs = NULL, *ys = NULL;
    const char **xn = NULL, **names = NULL;
    out_file *outs = NULL;
    run_output *results = NULL;
    if (rlx_onnx_inputs(a->model, &ins, &nin, NULL, NULL) != RLX_OK ||
        rlx_onnx_outputs(a->model, &outs_decl, &nout) != RLX_OK) {
        fprintf(stderr, "rlx run: %s\n", why());
        goto done;
    }
    xs = calloc((size_t)nin + 1, sizeof *xs);
    xn = calloc((size_t)nin + 1, sizeof *xn);
    names = calloc((size_t)nout + 1, sizeof *names);
    if (!xs || !xn || !names) {
        cli_error("out of memory");
        goto done;
    }
    for (int i = 0; i < nout; i++)
        names[i] = outs_decl[i].name;
    if (plan_outputs(names, nout, a, &outs, &n_outs) != 0)
        goto done;
    for (int i = 0; i < nin; i++) {
        rlx_onnx_tensor *x = &xs[i];
        xn[i] = ins[i].name;
        const loaded_tensor *f = NULL;
        for (int k = 0; k < a->n_inputs && !f; k++)
            if (!strcmp(files[k].name, ins[i].name))
                f = &files[k];
        if (f) {
            *x = (rlx_onnx_tensor){.dtype = f->dtype, .ndim = f->ndim, .bytes = f->bytes};
            memcpy(x->dims, f->dims, sizeof x->dims);
            if (!(x->data = malloc(f->bytes + 1))) {
                cli_error("out of memory");
                goto done;
            }
            memcpy(x->data, f->data, f->bytes);
            continue;
        }
        if (!staged_shape(a, &ins[i], &x->ndim, x->dims))
            goto done;
        size_t n = 1;
        for (int d = 0; d < x->ndim; d++)
            n *= (size_t)x->dims[d];
        x->dtype = ins[i].dtype;
        x->bytes = n * rlx_dtype_size(x->dtype);
        if (!(x->data = malloc(x->bytes + 1))) {
            cli_error("input '%s': cannot allocate %zu bytes", ins[i].name, x->bytes);
            goto done;
        }
        if (fill_random(x->data, x->dtype, n, a->opts.seed + 77 + (uint64_t)i, ins[i].name) != 0)
            goto done;
    }
    if (rlx_model_load_onnx(a->model, &a->opts, &m) != RLX_OK) {
        fprintf(stderr, "rlx run: %s\n", why());
        goto done;
    }
    printf("model: %s (ops that need values it computes: run in stages)\n", a->model);
    double t0 = now_ms();
    if (rlx_model_run(m, nin, xn, xs, &ys, &n_y) != RLX_OK) {
        fprintf(stderr, "rlx run: run failed: %s\n", rlx_last_error());
        goto done;
    }
    printf("first run: %.2f ms (imports and compiles %d stage%s)\n", now_ms() - t0, rlx_model_cached_windows(m),
           rlx_model_cached_windows(m) == 1 ? "" : "s");
    if (!(results = calloc((size_t)n_y + 1, sizeof *results))) {
        cli_error("out of memory");
        goto done;
    }
    for (int i = 0; i < n_y && i < nout; i++, n_results++) {
        results[i].info =
            (rlx_tensor_info){.name = names[i], .dtype = ys[i].dtype, .ndim = ys[i].ndim, .bytes = ys[i].bytes};
        memcpy(results[i].info.dims, ys[i].dims, sizeof ys[i].dims);
        results[i].data = ys[i].data; /* taken */
        ys[i].data = NULL;
    }
    summarize_outputs(results, n_results);
    if (n_outs > 0 && write_outputs(results, n_results, outs, n_outs, a->force) != 0)
        goto done;
    if (n_outs == 0)
        printf("outputs not written (ask with --output-dir DIR or --output NAME=FILE)\n");
    if (a->repeat > 0) {
        double *times = malloc(sizeof(double) * (size_t)a->repeat);
        if (!times) {
            fprintf(stderr, "rlx run: --repeat %d: cannot allocate the timing table\n", a->repeat);
            goto done;
        }
        for (int i = 0; i < a->repeat; i++) {
            rlx_onnx_tensors_free(ys, n_y);
            ys = NULL;
            t0 = now_ms();
            if (rlx_model_run(m, nin, xn, xs, &ys, &n_y) != RLX_OK) {
                fprintf(stderr, "rlx run: run failed: %s\n", rlx_last_error());
                free(times);
                goto done;
            }
            times[i] = now_ms() - t0;
        }
        double median = median_of(times, a->repeat);
        printf("latency: median %.3f ms, min %.3f ms over %d runs (%d stages compiled)\n", median, times[0], a->repeat,
               rlx_model_cached_windows(m));
        free(times);
    }
    rc = 0;
done:
    free_out_files(outs, n_outs);
    free_run_outputs(results, n_results);
    rlx_onnx_tensors_free(ys, n_y);
    rlx_onnx_tensors_free(xs, nin);
    free(xn);
    free(names);
    rlx_model_free(m);
    rlx_onnx_inputs_free(ins, nin, NULL, 0);
    rlx_onnx_inputs_free(outs_decl, nout, NULL, 0);
    return rc;
}
#endif

int rlx_cmd_run(int argc, char **argv)
{
    run_args a;
    int pr = parse_run_args(argc, argv, &a);
    if (pr)
        return pr > 0 ? 0 : 2;
    loaded_tensor files[MAX_FILE_ARGS];
    memset(files, 0, sizeof files);
    rlx_session *s = NULL;
    rlx_graph *g = NULL;
    int rc = 1;
    out_file *outs = NULL;
    run_output *results = NULL;
    int n_outs = 0, n_results = 0;
    if (a.output_dir && check_output_dir(a.output_dir) != 0)
        goto done;
    if (!load_inputs("run", &a, files))
        goto done;
    if (!(g = build_model(&a, files))) {
#ifdef RLX_HAVE_ONNX
        /* an op needs a value the model computes: run it in stages */
        if (is_model_file(a.model) && strstr(rlx_last_error(), "must be known at import time")) {
            rc = run_staged(&a, files);
            goto done;
        }
#endif
        fprintf(stderr, "rlx run: %s\n", why());
        goto done;
    }
    printf("model: %s (%d nodes)\n", a.model, rlx_graph_node_count(g));
    double t0 = now_ms();
    if (rlx_compile(g, &a.opts, &s) != RLX_OK) {
        fprintf(stderr, "rlx run: compile failed: %s\n", rlx_last_error());
        goto done;
    }
    double compile_ms = now_ms() - t0;
    /* the session holds what it runs: constants it rewrote (channels-last
     * weights) need not stay beside the originals */
    rlx_graph_free(g);
    g = NULL;
    rlx_compile_stats st;
    rlx_session_stats(s, &st);
    printf("compile: %.1f ms; nodes %d -> %d (simplify) -> %d (fuse) -> %d (final)\n", compile_ms, st.nodes_in,
           st.nodes_after_simplify, st.nodes_after_fusion, st.nodes_final);
    printf("arena: %.2f MiB = persistent %.2f MiB + transient %.2f MiB (lower bound %.2f MiB) + scratch %.2f MiB; "
           "%d buffers\n",
           st.arena_bytes / 1048576.0, st.persistent_bytes / 1048576.0, st.transient_bytes / 1048576.0,
           st.transient_lower_bound / 1048576.0, st.scratch_bytes / 1048576.0, st.buffers);
    printf("schedule: %d thunks (%d compute, %d no-op)\n", st.thunks, st.thunks - st.noop_thunks, st.noop_thunks);
    if (a.opts.device == RLX_DEVICE_CPU)
        printf("cpu gemm: %s\n", rlx_cpu_gemm_info());
    int n_model = rlx_session_count(s, 2);
    const char **names = calloc((size_t)n_model + 1, sizeof *names);
    for (int i = 0; names && i < n_model; i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 2, i, &info);
        names[i] = info.name;
    }
    int planned = names ? plan_outputs(names, n_model, &a, &outs, &n_outs) : (cli_error("out of memory"), -1);
    free(names);
    if (planned != 0)
        goto done;
    if (rlx_workload_set_params(s, a.opts.seed) != RLX_OK || fill_inputs(s, a.opts.seed, files, a.n_inputs) != 0) {
        fprintf(stderr, "rlx run: cannot set params/inputs: %s\n", why());
        goto done;
    }
    t0 = now_ms();
    if (rlx_session_run(s) != RLX_OK) {
        fprintf(stderr, "rlx run: run failed: %s\n", rlx_last_error());
        goto done;
    }
    printf("first run: %.2f ms\n", now_ms() - t0);
    if (session_outputs(s, &results, &n_results) != 0)
        goto done;
    summarize_outputs(results, n_results);
    if (n_outs > 0 && write_outputs(results, n_results, outs, n_outs, a.force) != 0)
        goto done;
    if (n_outs == 0 && is_model_file(a.model))
        printf("outputs not written (ask with --output-dir DIR or --output NAME=FILE)\n");
    if (a.repeat > 0) {
        double *times = malloc(sizeof(double) * (size_t)a.repeat);
        if (!times) {
            fprintf(stderr, "rlx run: --repeat %d: cannot allocate the timing table\n", a.repeat);
            goto done;
        }
        for (int i = 0; i < a.repeat; i++) {
            t0 = now_ms();
            if (rlx_session_run(s) != RLX_OK) {
                fprintf(stderr, "rlx run: run failed: %s\n", rlx_last_error());
                free(times);
                goto done;
            }
            times[i] = now_ms() - t0;
        }
        double median = median_of(times, a.repeat);
        printf("latency: median %.3f ms, min %.3f ms over %d runs\n", median, times[0], a.repeat);
        free(times);
    }
    rc = 0;
done:
    free_out_files(outs, n_outs);
    free_run_outputs(results, n_results);
    rlx_session_free(s);
    rlx_graph_free(g);
    for (int i = 0; i < a.n_inputs; i++)
        free(files[i].data);
    return rc;
}

int rlx_cmd_dump(int argc, char **argv)
{
    run_args a;
    int dot = 0;
    const char *out = "rlx-graph";
    /* strip dump-only flags, pass the rest to the run parser */
    char **rest = calloc((size_t)argc + 1, sizeof(char *));
    int nrest = 0;
    if (!rest)
        return 1;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dot"))
            dot = 1;
        else if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: rlx dump --dot [MODEL] [-o PREFIX] [run options]\n"
                   "Writes PREFIX.before.dot (the graph as built) and PREFIX.after.dot (after\n"
                   "simplify, fusion, mixed precision and lowering).  Default PREFIX: rlx-graph.\n"
                   "Files that exist are refused unless --force is given.\n");
            free(rest);
            return 0;
        } else
            rest[nrest++] = argv[i];
    }
    int pr = parse_run_args(nrest, rest, &a);
    free(rest);
    if (pr)
        return pr > 0 ? 0 : 2;
    if (!dot) {
        fprintf(stderr, "rlx dump: only --dot output exists; pass --dot\n");
        return 2;
    }
    /* both files are checked before anything is built, and written beside
     * their names until both are complete */
    char path[2][1024];
    int flags = a.force ? RLX_FILE_FORCE : 0;
    for (int which = 0; which < 2; which++) {
        if ((size_t)snprintf(path[which], sizeof path[which], "%s.%s.dot", out, which ? "after" : "before") >=
            sizeof path[which]) {
            fprintf(stderr, "rlx dump: -o %s: name too long\n", out);
            return 1;
        }
        if (rlx_file_check_target(path[which], flags) != RLX_OK) {
            fprintf(stderr, "rlx dump: %s\n", rlx_last_error());
            return 1;
        }
    }
    /* --input files give the model's input shapes, as for `rlx run` */
    loaded_tensor files[MAX_FILE_ARGS];
    memset(files, 0, sizeof files);
    bool loaded = load_inputs("dump", &a, files);
    rlx_graph *g = loaded ? build_model(&a, files) : NULL;
    for (int i = 0; i < a.n_inputs; i++)
        free(files[i].data);
    if (!g) {
        if (loaded) /* else load_inputs said why */
            fprintf(stderr, "rlx dump: %s\n", why());
        return 1;
    }
    rlx_session *s = NULL;
    if (rlx_compile(g, &a.opts, &s) != RLX_OK) {
        fprintf(stderr, "rlx dump: compile failed: %s\n", rlx_last_error());
        rlx_graph_free(g);
        return 1;
    }
    int rc = 0;
    rlx_file *w[2] = {NULL, NULL};
    rlx_compile_stats stats;
    rlx_session_stats(s, &stats);
    for (int which = 0; which < 2 && rc == 0; which++) {
        char *text = NULL;
        if ((which ? rlx_session_to_dot(s, "after optimization", &text) : rlx_graph_to_dot(g, "as built", &text)) !=
                RLX_OK ||
            rlx_file_open(path[which], flags, &w[which]) != RLX_OK) {
            fprintf(stderr, "rlx dump: %s\n", rlx_last_error());
            rlx_free(text);
            rc = 1;
            break;
        }
        fputs(text, (FILE *)rlx_file_stream(w[which]));
        rlx_free(text);
    }
    for (int which = 0; which < 2; which++) {
        if (rc != 0) {
            rlx_file_discard(w[which]);
        } else if (rlx_file_commit(w[which]) != RLX_OK) {
            fprintf(stderr, "rlx dump: %s\n", rlx_last_error());
            rc = 1;
        } else {
            printf("wrote %s (%d nodes)\n", path[which], which ? stats.nodes_final : rlx_graph_node_count(g));
        }
    }
    rlx_session_free(s);
    rlx_graph_free(g);
    return rc;
}
