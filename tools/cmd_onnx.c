/* cmd_onnx.c - `rlx info MODEL` and `rlx onnx-test DIR...`, the ONNX
 * backend-test conformance runner: each case folder holds model.onnx and
 * test_data_set_N/{input,output}_K.pb.  Each case runs in a child process
 * so that a crash is reported as such and the run goes on. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "rlx.h"

#ifdef RLX_HAVE_ONNX

int rlx_cmd_info(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: rlx info MODEL.onnx\n\nPrints the model's inputs and outputs (symbolic dims by name),\n"
               "opset imports, initializers and a count of each op type (unsupported ones marked).\n");
        return argc < 2 ? 1 : 0;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        if (rlx_onnx_print_info(argv[i], stdout) != RLX_OK) {
            fprintf(stderr, "rlx info: %s\n", rlx_last_error());
            rc = 1;
        }
    }
    return rc;
}

/* ------------------------------------------------------------ runner */

typedef struct tensor {
    rlx_dtype t;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    void *data;
    size_t bytes;
} tensor;

enum { R_PASS = 0, R_FAIL = 1, R_ERROR = 2, R_SKIP = 3, R_PASS_BY_VALUE = 4 };

static double get_d(const void *p, rlx_dtype t, size_t i)
{
    switch (t) {
    case RLX_F32: return ((const float *)p)[i];
    case RLX_F16: return rlx_f16_to_f32(((const uint16_t *)p)[i]);
    case RLX_BF16: return rlx_bf16_to_f32(((const uint16_t *)p)[i]);
    case RLX_F64: return ((const double *)p)[i];
    case RLX_I64: return (double)((const int64_t *)p)[i];
    case RLX_I32: return ((const int32_t *)p)[i];
    case RLX_I8: return ((const int8_t *)p)[i];
    case RLX_U8: return ((const uint8_t *)p)[i];
    case RLX_BOOL: return ((const uint8_t *)p)[i] != 0;
    default: return 0;
    }
}

static bool is_float(rlx_dtype t) { return t == RLX_F32 || t == RLX_F16 || t == RLX_BF16 || t == RLX_F64; }

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted subfolder names of dir matching prefix ("" = all); caller frees. */
static char **list_dirs(const char *dir, const char *prefix, int *n)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char **v = NULL;
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (strncmp(e->d_name, prefix, strlen(prefix)))
            continue;
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", dir, e->d_name) >= (int)sizeof p)
            continue;
        struct stat st;
        if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nv = realloc(v, sizeof *v * (size_t)cap);
            if (!nv)
                break;
            v = nv;
        }
        v[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n)
        qsort(v, (size_t)*n, sizeof *v, cmp_str);
    return v;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Reads a .pb; tells a non-tensor (sequence/optional) file apart. */
static rlx_status read_pb(const char *path, tensor *x)
{
    memset(x, 0, sizeof *x);
    return rlx_onnx_read_tensor(path, &x->t, &x->ndim, x->dims, &x->data, &x->bytes);
}

/* The suite stores bfloat16 tensors as uint16 bit patterns (read widened to
 * i32): narrow them back to bf16 bits. */
static void to_bf16_bits(tensor *x)
{
    size_t n = x->bytes / 4;
    uint16_t *b = malloc(n * 2 + 1);
    if (!b)
        return;
    for (size_t i = 0; i < n; i++)
        b[i] = (uint16_t)((int32_t *)x->data)[i];
    free(x->data);
    x->data = b;
    x->bytes = n * 2;
    x->t = RLX_BF16;
}

static const char *case_name(const char *dir)
{
    const char *s = strrchr(dir, '/');
    return s && s[1] ? s + 1 : dir;
}

/* Runs one case; prints its line; returns R_*. */
static double g_rtol = 1e-3, g_atol = 1e-7;

/* True when every op of an "unsupported op types: A (...); B (...)" message
 * works on sequences or optionals, which RLX does not model (out of scope). */
static bool only_sequence_ops(const char *msg)
{
    const char *p = strstr(msg, "unsupported op type");
    if (!p)
        return false;
    int n = 0;
    for (const char *q = strstr(p, " (opset "); q; q = strstr(q + 1, " (opset ")) {
        const char *w = q;
        while (w > p && w[-1] != ' ')
            w--;
        size_t l = (size_t)(q - w);
        char op[64];
        if (l == 0 || l >= sizeof op)
            return false;
        memcpy(op, w, l);
        op[l] = 0;
        if (strncmp(op, "Sequence", 8) && strcmp(op, "SplitToSequence") && strcmp(op, "ConcatFromSequence") &&
            strncmp(op, "Optional", 8))
            return false;
        n++;
    }
    return n > 0;
}

static int run_case(const char *dir, int verbose)
{
    const char *name = case_name(dir);
    char model[4096];
    if (snprintf(model, sizeof model, "%s/model.onnx", dir) >= (int)sizeof model) {
        printf("ERROR %s: path too long\n", name);
        return R_ERROR;
    }
    rlx_onnx_input *ins = NULL;
    char **outs = NULL;
    int nin = 0, nout = 0, rc = R_ERROR;
    int nsets = 0;
    char **sets = NULL;
    tensor *inputs = NULL;
    rlx_graph *g = NULL;
    rlx_session *s = NULL;
    rlx_onnx_binding *binds = NULL;
    char reason[1024] = "";
    double worst = 0, seen_err = 0, seen_rel = 0;
    int value_mode = 0;
    char worst_where[256] = "";

    if (rlx_onnx_inputs(model, &ins, &nin, &outs, &nout) != RLX_OK) {
        snprintf(reason, sizeof reason, "%s", rlx_last_error());
        goto report;
    }
    for (int i = 0; i < nin; i++)
        if (!ins[i].is_tensor) {
            rc = R_SKIP;
            snprintf(reason, sizeof reason, "input '%s' is a sequence/optional/map type (not supported)", ins[i].name);
            goto report;
        } else if (ins[i].onnx_type == 8) {
            rc = R_SKIP;
            snprintf(reason, sizeof reason, "input '%s' is a string tensor (not supported)", ins[i].name);
            goto report;
        }
    sets = list_dirs(dir, "test_data_set_", &nsets);
    if (!nsets) {
        snprintf(reason, sizeof reason, "no test_data_set_* folder");
        goto report;
    }
    inputs = calloc((size_t)nin + 1, sizeof *inputs);
    binds = calloc((size_t)nin + 1, sizeof *binds);
    if (!inputs || !binds) {
        snprintf(reason, sizeof reason, "out of memory");
        goto report;
    }
    /* Shapes come from the input files.  When the model needs an input's
     * value at import (a Reshape target fed by a graph input), small inputs
     * are bound by value and the model is imported again for each set. */
    rc = R_PASS;
    for (int si = 0; si < nsets && rc == R_PASS; si++) {
        int nbind = 0;
        for (int i = 0; i < nin; i++) {
            char p[4096];
            free(inputs[i].data);
            memset(&inputs[i], 0, sizeof inputs[i]);
            inputs[i].ndim = -1;
            if (snprintf(p, sizeof p, "%s/%s/input_%d.pb", dir, sets[si], i) >= (int)sizeof p)
                continue;
            if (!file_exists(p))
                continue; /* optional input left out */
            if (read_pb(p, &inputs[i]) != RLX_OK) {
                rc = R_ERROR;
                snprintf(reason, sizeof reason, "%s/input_%d.pb: %s", sets[si], i, rlx_last_error());
                break;
            }
            if (ins[i].dtype == RLX_BF16 && inputs[i].t == RLX_I32)
                to_bf16_bits(&inputs[i]);
            binds[nbind].name = ins[i].name;
            binds[nbind].ndim = inputs[i].ndim;
            memcpy(binds[nbind].dims, inputs[i].dims, sizeof inputs[i].dims);
            binds[nbind].value = NULL;
            binds[nbind].bytes = 0;
            /* value mode 1: every small input but the first (usually the
             * data); mode 2: every small input */
            if (value_mode && inputs[i].bytes <= 4096 && (value_mode == 2 || i > 0)) {
                binds[nbind].value = inputs[i].data;
                binds[nbind].bytes = inputs[i].bytes;
            }
            nbind++;
        }
        if (rc != R_PASS)
            break;
        if (si == 0 || value_mode) {
            rlx_session_free(s);
            rlx_graph_free(g);
            s = NULL;
            g = NULL;
            rlx_onnx_options oo;
            rlx_onnx_options_init(&oo);
            oo.bindings = binds;
            oo.n_bindings = nbind;
            if (rlx_onnx_import(model, &oo, &g) != RLX_OK) {
                const char *msg = rlx_last_error();
                if (value_mode < 2 && strstr(msg, "must be known at import time")) {
                    value_mode++;
                    si--;
                    continue;
                }
                rc = strstr(msg, "ai.onnx.preview.training") || only_sequence_ops(msg) ? R_SKIP : R_ERROR;
                snprintf(reason, sizeof reason, "%s%s",
                         rc == R_SKIP && !strstr(msg, "training") ? "sequence/optional types are out of scope: " : "",
                         msg);
                break;
            }
            rlx_options o;
            rlx_options_init(&o);
            o.threads = 1;
            if (rlx_compile(g, &o, &s) != RLX_OK) {
                rc = R_ERROR;
                snprintf(reason, sizeof reason, "compile: %s", rlx_last_error());
                break;
            }
        }
        for (int i = 0; i < nin; i++) {
            if (inputs[i].ndim < 0)
                continue; /* left out */
            /* an input bound by value is set too: the session checks that
             * the value is the one it was compiled for */
            rlx_status st = rlx_session_set_input(s, ins[i].name, inputs[i].data, inputs[i].bytes);
            if (st == RLX_ERR_NOT_FOUND)
                continue; /* unused */
            if (st != RLX_OK) {
                rc = R_ERROR;
                snprintf(reason, sizeof reason, "set input '%s': %s", ins[i].name, rlx_last_error());
                break;
            }
        }
        if (rc != R_PASS)
            break;
        if (rlx_session_run(s) != RLX_OK) {
            rc = R_ERROR;
            snprintf(reason, sizeof reason, "run: %s", rlx_last_error());
            break;
        }
        for (int k = 0; k < nout; k++) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s/output_%d.pb", dir, sets[si], k) >= (int)sizeof p)
                continue;
            if (!file_exists(p))
                continue;
            tensor e;
            if (read_pb(p, &e) != RLX_OK) {
                rc = R_ERROR;
                snprintf(reason, sizeof reason, "output_%d.pb: %s", k, rlx_last_error());
                break;
            }
            rlx_tensor_info info;
            if (rlx_session_find(s, 2, outs[k], &info) != RLX_OK) {
                rc = R_ERROR;
                snprintf(reason, sizeof reason, "output '%s': %s", outs[k], rlx_last_error());
                free(e.data);
                break;
            }
            if (info.dtype == RLX_BF16 && e.t == RLX_I32)
                to_bf16_bits(&e);
            int64_t en = 1, gn = 1;
            for (int d = 0; d < e.ndim; d++)
                en *= e.dims[d];
            for (int d = 0; d < info.ndim; d++)
                gn *= info.dims[d];
            bool shape_ok = en == gn && e.ndim == info.ndim;
            for (int d = 0; shape_ok && d < e.ndim; d++)
                shape_ok = e.dims[d] == info.dims[d];
            if (!shape_ok || info.dtype != e.t) {
                rc = R_FAIL;
                snprintf(worst_where, sizeof worst_where,
                         "output '%s': got %s rank %d (%lld elements), expected %s rank %d (%lld)", outs[k],
                         rlx_dtype_name(info.dtype), info.ndim, (long long)gn, rlx_dtype_name(e.t), e.ndim,
                         (long long)en);
                worst = INFINITY;
                free(e.data);
                break;
            }
            void *got = malloc(info.bytes ? info.bytes : 1);
            if (!got || rlx_session_get_output(s, outs[k], got, info.bytes) != RLX_OK) {
                rc = R_ERROR;
                snprintf(reason, sizeof reason, "get output '%s': %s", outs[k],
                         got ? rlx_last_error() : "out of memory");
                free(got);
                free(e.data);
                break;
            }
            bool fl = is_float(e.t);
            for (int64_t i = 0; i < en; i++) {
                double a = get_d(got, info.dtype, (size_t)i), b = get_d(e.data, e.t, (size_t)i);
                bool ok;
                double err;
                {
                    double e0 = fabs(a - b);
                    if (e0 > seen_err && !isnan(e0))
                        seen_err = e0;
                    /* relative error where the expected value is not tiny */
                    double rel = fabs(b) >= 1e-3 ? e0 / fabs(b) : 0;
                    if (rel > seen_rel && !isnan(rel))
                        seen_rel = rel;
                }
                if (fl) {
                    if (isnan(b))
                        ok = isnan(a), err = ok ? 0 : INFINITY;
                    else if (isinf(b))
                        ok = a == b, err = ok ? 0 : INFINITY;
                    else {
                        err = fabs(a - b);
                        if (isnan(err))
                            err = INFINITY;
                        ok = err <= g_atol + g_rtol * fabs(b);
                    }
                } else {
                    ok = a == b;
                    err = fabs(a - b);
                }
                if (!ok) {
                    rc = R_FAIL;
                    if (err > worst || worst_where[0] == 0) {
                        worst = err;
                        snprintf(worst_where, sizeof worst_where, "output '%s'[%lld]: got %.9g expected %.9g", outs[k],
                                 (long long)i, a, b);
                    }
                }
            }
            free(got);
            free(e.data);
        }
    }
report:
    switch (rc) {
    case R_PASS:
        if (verbose)
            printf("PASS %s max_abs_err=%.3g max_rel_err=%.3g%s\n", name, seen_err, seen_rel,
                   value_mode ? " (inputs bound by value)" : "");
        else
            printf("PASS %s\n", name);
        break;
    case R_FAIL:
        printf("FAIL %s max_err=%.3g", name, worst);
        printf(" (%s)", worst_where);
        printf("\n");
        break;
    case R_SKIP: printf("SKIP %s: %s\n", name, reason); break;
    default: {
        for (char *c = reason; *c; c++)
            if (*c == '\n')
                *c = ' ';
        printf("ERROR %s: %s\n", name, reason);
    }
    }
    fflush(stdout);
    rlx_session_free(s);
    rlx_graph_free(g);
    for (int i = 0; inputs && i < nin; i++)
        free(inputs[i].data);
    free(inputs);
    free(binds);
    free_list(sets, nsets);
    rlx_onnx_inputs_free(ins, nin, outs, nout);
    return rc == R_PASS && value_mode ? R_PASS_BY_VALUE : rc;
}

typedef struct tally {
    int pass, fail, error, skip, crash, by_value;
} tally;

static void run_one_forked(const char *dir, int use_fork, int verbose, int timeout, tally *t)
{
    int rc;
    if (!use_fork) {
        rc = run_case(dir, verbose);
    } else {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            if (timeout > 0)
                alarm((unsigned)timeout);
            int r = run_case(dir, verbose);
            fflush(stdout);
            _exit(r);
        }
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) < 0) {
            printf("ERROR %s: cannot fork\n", case_name(dir));
            rc = R_ERROR;
        } else if (WIFSIGNALED(status)) {
            int sig = WTERMSIG(status);
            if (sig == SIGALRM)
                printf("ERROR %s: timed out after %d s\n", case_name(dir), timeout);
            else {
                printf("ERROR %s: crashed (signal %d, %s)\n", case_name(dir), sig, strsignal(sig));
                t->crash++;
            }
            rc = R_ERROR;
        } else {
            rc = WEXITSTATUS(status);
            if (rc > R_PASS_BY_VALUE) {
                printf("ERROR %s: exited with status %d\n", case_name(dir), rc);
                t->crash++;
                rc = R_ERROR;
            }
        }
        fflush(stdout);
    }
    if (rc == R_PASS_BY_VALUE) {
        t->by_value++;
        rc = R_PASS;
    }
    switch (rc) {
    case R_PASS: t->pass++; break;
    case R_FAIL: t->fail++; break;
    case R_SKIP: t->skip++; break;
    default: t->error++; break;
    }
}

static void run_path(const char *path, int use_fork, int verbose, int timeout, const char *filter, tally *t, int depth)
{
    char model[4096];
    if (snprintf(model, sizeof model, "%s/model.onnx", path) >= (int)sizeof model)
        return;
    if (file_exists(model)) {
        if (!filter || strstr(case_name(path), filter))
            run_one_forked(path, use_fork, verbose, timeout, t);
        return;
    }
    if (depth > 3)
        return;
    int n;
    char **subs = list_dirs(path, "", &n);
    for (int i = 0; i < n; i++) {
        char p[4096];
        if (snprintf(p, sizeof p, "%s/%s", path, subs[i]) >= (int)sizeof p)
            continue;
        run_path(p, use_fork, verbose, timeout, filter, t, depth + 1);
    }
    free_list(subs, n);
}

int rlx_cmd_onnx_test(int argc, char **argv)
{
    int use_fork = 1, verbose = 0, timeout = 120, ndirs = 0;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf(
                "usage: rlx onnx-test [--no-fork] [--timeout S] [--filter TEXT] [--rtol R] [--atol A] [-v] DIR...\n\n"
                "Runs ONNX backend test cases: DIR is a case folder (model.onnx and\n"
                "test_data_set_N/) or a folder of case folders.  One line per case:\n"
                "PASS name | FAIL name max_err=E | ERROR name: reason | SKIP name: reason,\n"
                "then 'N passed, M failed, K skipped' (errors count as failed).\n"
                "Tolerance: rtol 1e-3, atol 1e-7 for floats (--rtol, --atol); exact for integers\n"
                "and bools.  -v prints the largest errors of passing cases too (the relative\n"
                "one over expected values of magnitude 1e-3 or more).\n"
                "Exit status: 0 all passed, 1 some failed, 2 a case crashed.\n");
            return 0;
        } else if (!strcmp(argv[i], "--no-fork"))
            use_fork = 0;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc)
            g_rtol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--atol") && i + 1 < argc)
            g_atol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
            filter = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "rlx onnx-test: unknown option '%s'\n", argv[i]);
            return 1;
        } else
            ndirs++;
    }
    if (!ndirs) {
        fprintf(stderr, "usage: rlx onnx-test DIR...\n");
        return 1;
    }
    tally t = {0};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') {
            if (!strcmp(argv[i], "--timeout") || !strcmp(argv[i], "--filter") || !strcmp(argv[i], "--rtol") ||
                !strcmp(argv[i], "--atol"))
                i++;
            continue;
        }
        struct stat st;
        if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "rlx onnx-test: '%s' is not a folder\n", argv[i]);
            t.error++;
            continue;
        }
        run_path(argv[i], use_fork, verbose, timeout, filter, &t, 0);
    }
    if (t.crash)
        printf("%d case%s crashed\n", t.crash, t.crash == 1 ? "" : "s");
    printf("(%d failed on values, %d errors; %d of the passes needed small inputs bound by value at import)\n", t.fail,
           t.error, t.by_value);
    printf("%d passed, %d failed, %d skipped\n", t.pass, t.fail + t.error, t.skip);
    return t.crash ? 2 : (t.fail + t.error ? 1 : 0);
}

#else /* no ONNX module */

int rlx_cmd_info(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "rlx info: this build has no ONNX importer (needs protobuf-c and libonnx-dev)\n");
    return 1;
}

int rlx_cmd_onnx_test(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "rlx onnx-test: this build has no ONNX importer (needs protobuf-c and libonnx-dev)\n");
    return 1;
}

#endif
