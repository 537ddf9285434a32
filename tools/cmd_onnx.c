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

/* What the comparisons of one case found. */
typedef struct verdict {
    int rc;
    double worst, seen_err, seen_rel;
    char where[256], reason[1024];
} verdict;

static bool has_output(rlx_session *s, const char *name)
{
    rlx_tensor_info info;
    return rlx_session_find(s, 2, name, &info) == RLX_OK;
}

/* Strings compare exactly, element by element (each NUL-ended). */
static void compare_strings(const char *name, const char *got, size_t got_bytes, const tensor *e, int64_t n, verdict *v)
{
    const char *want = e->data, *gend = got + got_bytes;
    for (int64_t i = 0; i < n; i++) {
        size_t gl = got < gend ? strnlen(got, (size_t)(gend - got)) : 0;
        if (got >= gend || got + gl == gend || strcmp(got, want) != 0) {
            v->rc = R_FAIL;
            v->worst = INFINITY;
            snprintf(v->where, sizeof v->where, "output '%s'[%lld]: got \"%.80s\" expected \"%.80s\"", name,
                     (long long)i, got < gend && got + gl < gend ? got : "(none)", want);
            return;
        }
        got += gl + 1;
        want += strlen(want) + 1;
    }
}

/* Compares output `name` (got: dtype, rank and dims in info) with the
 * expected tensor e. */
static void compare_values(const char *name, const rlx_tensor_info *pinfo, const void *got, tensor *e, verdict *v)
{
    rlx_tensor_info info = *pinfo;
    if (info.dtype == RLX_BF16 && e->t == RLX_I32)
        to_bf16_bits(e);
    int64_t en = 1, gn = 1;
    for (int d = 0; d < e->ndim; d++)
        en *= e->dims[d];
    for (int d = 0; d < info.ndim; d++)
        gn *= info.dims[d];
    bool shape_ok = en == gn && e->ndim == info.ndim;
    for (int d = 0; shape_ok && d < e->ndim; d++)
        shape_ok = e->dims[d] == info.dims[d];
    if (!shape_ok || info.dtype != e->t) {
        v->rc = R_FAIL;
        snprintf(v->where, sizeof v->where, "output '%s': got %s rank %d (%lld elements), expected %s rank %d (%lld)",
                 name, rlx_dtype_name(info.dtype), info.ndim, (long long)gn, rlx_dtype_name(e->t), e->ndim,
                 (long long)en);
        v->worst = INFINITY;
        return;
    }
    if (e->t == RLX_STRING) {
        compare_strings(name, got, info.bytes, e, en, v);
        return;
    }
    bool fl = is_float(e->t);
    for (int64_t i = 0; i < en; i++) {
        double a = get_d(got, info.dtype, (size_t)i), b = get_d(e->data, e->t, (size_t)i);
        bool ok;
        double err;
        {
            double e0 = fabs(a - b);
            if (e0 > v->seen_err && !isnan(e0))
                v->seen_err = e0;
            /* relative error where the expected value is not tiny */
            double rel = fabs(b) >= 1e-3 ? e0 / fabs(b) : 0;
            if (rel > v->seen_rel && !isnan(rel))
                v->seen_rel = rel;
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
            v->rc = R_FAIL;
            if (err > v->worst || v->where[0] == 0) {
                v->worst = err;
                snprintf(v->where, sizeof v->where, "output '%s'[%lld]: got %.9g expected %.9g", name, (long long)i, a,
                         b);
            }
        }
    }
}

/* Compares the session's output `name` with the expected tensor e. */
static void compare(rlx_session *s, const char *name, tensor *e, verdict *v)
{
    rlx_tensor_info info;
    if (rlx_session_find(s, 2, name, &info) != RLX_OK) {
        v->rc = R_ERROR;
        snprintf(v->reason, sizeof v->reason, "output '%s': %s", name, rlx_last_error());
        return;
    }
    void *got = malloc(info.bytes ? info.bytes : 1);
    if (!got || rlx_session_get_output(s, name, got, info.bytes) != RLX_OK) {
        v->rc = R_ERROR;
        snprintf(v->reason, sizeof v->reason, "get output '%s': %s", name, got ? rlx_last_error() : "out of memory");
        free(got);
        return;
    }
    compare_values(name, &info, got, e, v);
    free(got);
}

/* The tensors fed to a case's inputs: a tensor input under its own name,
 * each element of a sequence input as NAME[i] (as the importer names
 * them). */
typedef struct feed {
    char *name;
    tensor t;
} feed;

static void free_feeds(feed *f, int n)
{
    for (int i = 0; i < n; i++) {
        free(f[i].name);
        free(f[i].t.data);
    }
}

static void take_tensor(tensor *x, rlx_onnx_tensor *t)
{
    x->t = t->dtype;
    x->ndim = t->ndim;
    memcpy(x->dims, t->dims, sizeof x->dims);
    x->data = t->data;
    x->bytes = t->bytes;
    t->data = NULL;
}

/* One line for a case: PASS, FAIL, SKIP or ERROR (note follows a verbose PASS). */
static void report(const char *name, verdict *v, int verbose, const char *note)
{
    switch (v->rc) {
    case R_PASS:
        if (verbose)
            printf("PASS %s max_abs_err=%.3g max_rel_err=%.3g%s\n", name, v->seen_err, v->seen_rel, note);
        else
            printf("PASS %s\n", name);
        break;
    case R_FAIL: printf("FAIL %s max_err=%.3g (%s)\n", name, v->worst, v->where); break;
    case R_SKIP: printf("SKIP %s: %s\n", name, v->reason); break;
    default: {
        for (char *c = v->reason; *c; c++)
            if (*c == '\n')
                *c = ' ';
        printf("ERROR %s: %s\n", name, v->reason);
    }
    }
    fflush(stdout);
}

/* A case through rlx_model_run (--staged): the inputs as given, never
 * bound by value by the runner; the model runs in stages where its ops
 * need run-time values at import.  Tensor inputs and outputs only. */
static int run_case_staged(const char *dir, const char *model, int verbose)
{
    const char *name = case_name(dir);
    rlx_onnx_input *ins = NULL, *outs = NULL;
    int nin = 0, nout = 0, nsets = 0;
    char **sets = NULL;
    rlx_model *m = NULL;
    verdict v = {.rc = R_ERROR};
    rlx_onnx_tensor *xs = NULL, *ys = NULL;
    const char **xn = NULL;
    int nx = 0, ny = 0;
    rlx_options o;
    rlx_options_init(&o);
    o.threads = 1;
    if (rlx_onnx_inputs(model, &ins, &nin, NULL, NULL) != RLX_OK || rlx_onnx_outputs(model, &outs, &nout) != RLX_OK ||
        rlx_model_load_onnx(model, &o, &m) != RLX_OK) {
        snprintf(v.reason, sizeof v.reason, "%s", rlx_last_error());
        goto done;
    }
    for (int i = 0; i < nin + nout; i++) {
        const rlx_onnx_input *x = i < nin ? &ins[i] : &outs[i - nin];
        if (x->kind != RLX_ONNX_TENSOR) {
            v.rc = R_SKIP;
            snprintf(v.reason, sizeof v.reason, "'%s' is not a tensor (a staged run takes tensors)", x->name);
            goto done;
        }
    }
    sets = list_dirs(dir, "test_data_set_", &nsets);
    xs = calloc((size_t)nin + 1, sizeof *xs);
    xn = calloc((size_t)nin + 1, sizeof *xn);
    if (!nsets || !xs || !xn) {
        snprintf(v.reason, sizeof v.reason, nsets ? "out of memory" : "no test_data_set_* folder");
        goto done;
    }
    v.rc = R_PASS;
    for (int si = 0; si < nsets && v.rc == R_PASS; si++) {
        rlx_onnx_tensors_free(xs, nx); /* the array itself stays */
        xs = calloc((size_t)nin + 1, sizeof *xs);
        nx = 0;
        for (int i = 0; i < nin && xs; i++) {
            char p[4096];
            rlx_onnx_kind held;
            rlx_onnx_tensor *ts = NULL;
            int nt = 0;
            if (snprintf(p, sizeof p, "%s/%s/input_%d.pb", dir, sets[si], i) >= (int)sizeof p || !file_exists(p))
                continue; /* optional input left out */
            if (rlx_onnx_read_value(p, RLX_ONNX_TENSOR, &held, &ts, &nt) != RLX_OK || nt != 1) {
                v.rc = R_ERROR;
                snprintf(v.reason, sizeof v.reason, "%s/input_%d.pb: %s", sets[si], i, rlx_last_error());
                rlx_onnx_tensors_free(ts, nt);
                break;
            }
            tensor x;
            take_tensor(&x, &ts[0]);
            rlx_onnx_tensors_free(ts, nt);
            if (ins[i].dtype == RLX_BF16 && x.t == RLX_I32)
                to_bf16_bits(&x);
            xn[nx] = ins[i].name;
            xs[nx++] = (rlx_onnx_tensor){.dtype = x.t, .ndim = x.ndim, .data = x.data, .bytes = x.bytes};
            memcpy(xs[nx - 1].dims, x.dims, sizeof x.dims);
        }
        if (!xs || v.rc != R_PASS) {
            v.rc = R_ERROR;
            break;
        }
        rlx_onnx_tensors_free(ys, ny);
        ys = NULL;
        ny = 0;
        if (rlx_model_run(m, nx, xn, xs, &ys, &ny) != RLX_OK) {
            v.rc = R_ERROR;
            snprintf(v.reason, sizeof v.reason, "%s", rlx_last_error());
            break;
        }
        for (int k = 0; k < nout && k < ny && v.rc != R_ERROR; k++) {
            char p[4096];
            rlx_onnx_kind held;
            rlx_onnx_tensor *ts = NULL;
            int nt = 0;
            if (snprintf(p, sizeof p, "%s/%s/output_%d.pb", dir, sets[si], k) >= (int)sizeof p || !file_exists(p))
                continue;
            if (rlx_onnx_read_value(p, RLX_ONNX_TENSOR, &held, &ts, &nt) != RLX_OK || nt != 1) {
                v.rc = R_ERROR;
                snprintf(v.reason, sizeof v.reason, "output_%d.pb: %s", k, rlx_last_error());
                rlx_onnx_tensors_free(ts, nt);
                break;
            }
            tensor e;
            take_tensor(&e, &ts[0]);
            rlx_tensor_info info = {
                .name = outs[k].name, .dtype = ys[k].dtype, .ndim = ys[k].ndim, .bytes = ys[k].bytes};
            memcpy(info.dims, ys[k].dims, sizeof info.dims);
            compare_values(outs[k].name, &info, ys[k].data, &e, &v);
            free(e.data);
            rlx_onnx_tensors_free(ts, nt);
        }
        if (v.rc != R_ERROR && ny != nout) {
            v.rc = R_FAIL;
            v.worst = INFINITY;
            snprintf(v.where, sizeof v.where, "%d outputs, the model has %d", ny, nout);
        }
    }
done:;
    char note[64];
    snprintf(note, sizeof note, " (%d stage%s)", m ? rlx_model_cached_windows(m) : 0,
             m && rlx_model_cached_windows(m) == 1 ? "" : "s");
    report(name, &v, verbose, note);
    rlx_onnx_tensors_free(xs, nx);
    rlx_onnx_tensors_free(ys, ny);
    free(xn);
    rlx_model_free(m);
    free_list(sets, nsets);
    rlx_onnx_inputs_free(ins, nin, NULL, 0);
    rlx_onnx_inputs_free(outs, nout, NULL, 0);
    return v.rc;
}

static int g_staged;

static int run_case(const char *dir, int verbose)
{
    const char *name = case_name(dir);
    char model[4096];
    if (snprintf(model, sizeof model, "%s/model.onnx", dir) >= (int)sizeof model) {
        printf("ERROR %s: path too long\n", name);
        return R_ERROR;
    }
    if (g_staged)
        return run_case_staged(dir, model, verbose);
    rlx_onnx_input *ins = NULL, *outs = NULL;
    int nin = 0, nout = 0;
    int nsets = 0;
    char **sets = NULL;
    feed *feeds = NULL;
    int nfeeds = 0, cap = 0;
    rlx_graph *g = NULL;
    rlx_session *s = NULL;
    rlx_onnx_binding *binds = NULL;
    verdict v = {.rc = R_ERROR};
    int value_mode = 0;
    char *last_sig = NULL;

    if (rlx_onnx_inputs(model, &ins, &nin, NULL, NULL) != RLX_OK || rlx_onnx_outputs(model, &outs, &nout) != RLX_OK) {
        snprintf(v.reason, sizeof v.reason, "%s", rlx_last_error());
        goto report;
    }
    for (int i = 0; i < nin; i++)
        if (ins[i].kind == RLX_ONNX_OTHER) {
            v.rc = R_SKIP;
            snprintf(v.reason, sizeof v.reason, "input '%s' is a map, sparse or nested type (not supported)",
                     ins[i].name);
            goto report;
        }
    sets = list_dirs(dir, "test_data_set_", &nsets);
    if (!nsets) {
        snprintf(v.reason, sizeof v.reason, "no test_data_set_* folder");
        goto report;
    }
    /* Shapes come from the input files.  When the model needs an input's
     * value at import (a Reshape target fed by a graph input), small inputs
     * are bound by value and the model is imported again for each set. */
    v.rc = R_PASS;
    for (int si = 0; si < nsets && v.rc == R_PASS; si++) {
        free_feeds(feeds, nfeeds);
        nfeeds = 0;
        int nbind = 0;
        for (int i = 0; i < nin && v.rc == R_PASS; i++) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s/input_%d.pb", dir, sets[si], i) >= (int)sizeof p || !file_exists(p))
                continue; /* optional input left out */
            rlx_onnx_kind held;
            rlx_onnx_tensor *ts = NULL;
            int nt = 0;
            rlx_status st = rlx_onnx_read_value(p, ins[i].kind, &held, &ts, &nt);
            if (st != RLX_OK) {
                v.rc = st == RLX_ERR_UNSUPPORTED ? R_SKIP : R_ERROR;
                snprintf(v.reason, sizeof v.reason, "%s/input_%d.pb: %s", sets[si], i, rlx_last_error());
                break;
            }
            /* room for the tensors and a binding of the input's own name */
            if (nfeeds + nt + 1 > cap) {
                int nc = (nfeeds + nt + 1) * 2;
                feed *nf = realloc(feeds, sizeof *nf * (size_t)nc);
                rlx_onnx_binding *nb = nf ? realloc(binds, sizeof *nb * (size_t)(nc + nin)) : NULL;
                if (nf)
                    feeds = nf;
                if (nb) {
                    binds = nb;
                    cap = nc;
                }
                if (!nf || !nb) {
                    rlx_onnx_tensors_free(ts, nt);
                    v.rc = R_ERROR;
                    snprintf(v.reason, sizeof v.reason, "out of memory");
                    break;
                }
            }
            if (held != RLX_ONNX_TENSOR) { /* the sequence's length, or an empty optional */
                memset(&binds[nbind], 0, sizeof binds[nbind]);
                binds[nbind].name = ins[i].name;
                binds[nbind].ndim = held == RLX_ONNX_NONE ? RLX_ONNX_EMPTY : -1;
                binds[nbind++].dims[0] = nt;
            }
            for (int j = 0; j < nt; j++) {
                feed *f = &feeds[nfeeds];
                memset(f, 0, sizeof *f);
                take_tensor(&f->t, &ts[j]);
                if (held == RLX_ONNX_SEQUENCE) {
                    size_t l = strlen(ins[i].name) + 24;
                    if ((f->name = malloc(l)))
                        snprintf(f->name, l, "%s[%d]", ins[i].name, j);
                } else
                    f->name = strdup(ins[i].name);
                nfeeds++;
                if (!f->name) {
                    v.rc = R_ERROR;
                    snprintf(v.reason, sizeof v.reason, "out of memory");
                    break;
                }
                if (ins[i].dtype == RLX_BF16 && f->t.t == RLX_I32)
                    to_bf16_bits(&f->t);
                rlx_onnx_binding *b = &binds[nbind++];
                memset(b, 0, sizeof *b);
                b->name = f->name;
                b->ndim = f->t.ndim;
                memcpy(b->dims, f->t.dims, sizeof f->t.dims);
                /* value mode 1: every small input but the first (usually
                 * the data); mode 2: every small input.  Strings always:
                 * RLX computes on them only at import */
                if ((value_mode && f->t.bytes <= 4096 && (value_mode == 2 || i > 0)) || f->t.t == RLX_STRING) {
                    b->value = f->t.data;
                    b->bytes = f->t.bytes;
                }
            }
            rlx_onnx_tensors_free(ts, nt);
        }
        if (v.rc != R_PASS)
            break;
        /* a set whose bindings differ (another sequence length, an empty
         * optional, other shapes) needs its own import */
        size_t sl = 1;
        for (int b = 0; b < nbind; b++)
            sl += strlen(binds[b].name) + 24 * (RLX_MAX_DIMS + 2);
        char *sig = malloc(sl);
        if (!sig) {
            v.rc = R_ERROR;
            snprintf(v.reason, sizeof v.reason, "out of memory");
            break;
        }
        size_t at = 0;
        sig[0] = 0;
        for (int b = 0; b < nbind; b++) {
            at += (size_t)snprintf(sig + at, sl - at, "%s:%d", binds[b].name, binds[b].ndim);
            for (int d = 0; d < (binds[b].ndim < 0 ? 1 : binds[b].ndim); d++)
                at += (size_t)snprintf(sig + at, sl - at, ",%lld", (long long)binds[b].dims[d]);
            at += (size_t)snprintf(sig + at, sl - at, ";");
        }
        bool same = last_sig && !strcmp(sig, last_sig);
        free(last_sig);
        last_sig = sig;
        if (si == 0 || value_mode || !same) {
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
                v.rc = strstr(msg, "ai.onnx.preview.training") ? R_SKIP : R_ERROR;
                snprintf(v.reason, sizeof v.reason, "%s", msg);
                break;
            }
            rlx_options o;
            rlx_options_init(&o);
            o.threads = 1;
            if (rlx_compile(g, &o, &s) != RLX_OK) {
                v.rc = R_ERROR;
                snprintf(v.reason, sizeof v.reason, "compile: %s", rlx_last_error());
                break;
            }
        }
        for (int i = 0; i < nfeeds; i++) {
            /* an input bound by value is set too: the session checks that
             * the value is the one it was compiled for */
            rlx_status st = rlx_session_set_input(s, feeds[i].name, feeds[i].t.data, feeds[i].t.bytes);
            if (st == RLX_ERR_NOT_FOUND)
                continue; /* unused */
            if (st != RLX_OK) {
                v.rc = R_ERROR;
                snprintf(v.reason, sizeof v.reason, "set input '%s': %s", feeds[i].name, rlx_last_error());
                break;
            }
        }
        if (v.rc != R_PASS)
            break;
        if (rlx_session_run(s) != RLX_OK) {
            v.rc = R_ERROR;
            snprintf(v.reason, sizeof v.reason, "run: %s", rlx_last_error());
            break;
        }
        for (int k = 0; k < nout && v.rc != R_ERROR; k++) {
            char p[4096];
            if (snprintf(p, sizeof p, "%s/%s/output_%d.pb", dir, sets[si], k) >= (int)sizeof p || !file_exists(p))
                continue;
            rlx_onnx_kind held;
            rlx_onnx_tensor *ts = NULL;
            int nt = 0;
            rlx_status st = rlx_onnx_read_value(p, outs[k].kind, &held, &ts, &nt);
            if (st != RLX_OK) {
                v.rc = st == RLX_ERR_UNSUPPORTED ? R_SKIP : R_ERROR;
                snprintf(v.reason, sizeof v.reason, "output_%d.pb: %s", k, rlx_last_error());
                break;
            }
            const char *on = outs[k].name;
            char en[600];
            if (held == RLX_ONNX_TENSOR) {
                tensor e;
                take_tensor(&e, &ts[0]);
                compare(s, on, &e, &v);
                free(e.data);
            } else {
                /* a sequence's elements as NAME[i], and no more of them;
                 * an empty optional as no output at all */
                for (int j = 0; j < nt && v.rc != R_ERROR; j++) {
                    tensor e;
                    take_tensor(&e, &ts[j]);
                    snprintf(en, sizeof en, "%s[%d]", on, j);
                    if (has_output(s, en))
                        compare(s, en, &e, &v);
                    else {
                        v.rc = R_FAIL;
                        v.worst = INFINITY;
                        snprintf(v.where, sizeof v.where, "output '%s': %d elements, expected %d", on, j, nt);
                    }
                    free(e.data);
                }
                snprintf(en, sizeof en, "%s[%d]", on, nt);
                if (v.rc != R_ERROR && (has_output(s, en) || (held == RLX_ONNX_NONE && has_output(s, on)))) {
                    v.rc = R_FAIL;
                    v.worst = INFINITY;
                    snprintf(v.where, sizeof v.where, "output '%s': expected %s", on,
                             held == RLX_ONNX_NONE ? "an empty optional" : "fewer elements");
                }
            }
            rlx_onnx_tensors_free(ts, nt);
        }
    }
report:
    report(name, &v, verbose, value_mode ? " (inputs bound by value)" : "");
    rlx_session_free(s);
    rlx_graph_free(g);
    free_feeds(feeds, nfeeds);
    free(feeds);
    free(binds);
    free(last_sig);
    free_list(sets, nsets);
    rlx_onnx_inputs_free(ins, nin, NULL, 0);
    rlx_onnx_inputs_free(outs, nout, NULL, 0);
    return v.rc == R_PASS && value_mode ? R_PASS_BY_VALUE : v.rc;
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
                "usage: rlx onnx-test [--no-fork] [--timeout S] [--filter TEXT] [--rtol R] [--atol A] [--staged] [-v] "
                "DIR...\n\n"
                "Runs ONNX backend test cases: DIR is a case folder (model.onnx and\n"
                "test_data_set_N/) or a folder of case folders.  One line per case:\n"
                "PASS name | FAIL name max_err=E | ERROR name: reason | SKIP name: reason,\n"
                "then 'N passed, M failed, K skipped' (errors count as failed).\n"
                "Tolerance: rtol 1e-3, atol 1e-7 for floats (--rtol, --atol); exact for integers\n"
                "and bools.  -v prints the largest errors of passing cases too (the relative\n"
                "one over expected values of magnitude 1e-3 or more).\n"
                "--staged runs each case through rlx_model_run: inputs as given (never bound\n"
                "by value); the model runs in stages where an op needs run-time values at\n"
                "import (NonZero, NonMaxSuppression, Unique, ...); -v counts the stages.\n"
                "Exit status: 0 all passed, 1 some failed, 2 a case crashed.\n");
            return 0;
        } else if (!strcmp(argv[i], "--no-fork"))
            use_fork = 0;
        else if (!strcmp(argv[i], "-v"))
            verbose = 1;
        else if (!strcmp(argv[i], "--staged"))
            g_staged = 1;
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
