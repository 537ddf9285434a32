/* cmd_train.c - `rlx train`: trains the built-in decoder (the decoder-small
 * shape over bytes) on a text corpus, by default the license texts every
 * Debian system has (/usr/share/common-licenses, package base-files), with
 * a progress line per step, and optionally saves a checkpoint, resumes from
 * one and draws the loss curve as SVG. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "rlx.h"

#define DEFAULT_CORPUS "/usr/share/common-licenses"
#define CORPUS_LIMIT ((size_t)256 << 20)

static void usage(FILE *f)
{
    fprintf(f, "usage: rlx train [MODEL.onnx --loss NAME --input NAME=FILE.npy ...] [options]\n"
               "\n"
               "Trains the built-in decoder (the decoder-small shape of bench/WORKLOADS.md: RMSNorm,\n"
               "grouped-query attention with RoPE, SwiGLU; over bytes, a vocabulary of 256) to predict\n"
               "the next byte of a text, with AdamW, warm-up and cosine decay, gradients clipped to\n"
               "norm 1.  The default text is the license texts in " DEFAULT_CORPUS "\n"
               "(Debian's base-files package).\n"
               "\n"
               "With MODEL.onnx it trains that model instead: its forward graph must have an output that\n"
               "is the loss (--loss NAME, one float); every float initializer of rank >= 1 is trained from\n"
               "the file's values; each graph input comes from --input NAME=FILE.npy, whose first axis\n"
               "holds the samples, --batch of them per step in order (wrapping around); symbolic dims\n"
               "of the inputs are --batch.\n"
               "\n"
               "options:\n"
               "  --text PATH               a text file, or a folder of them (default " DEFAULT_CORPUS ")\n"
               "  --loss NAME               MODEL.onnx: the output to minimize\n"
               "  --input NAME=FILE.npy     MODEL.onnx: the samples of input NAME (once per input)\n"
               "  --steps N                 optimizer steps in all (default 40; a resumed run goes on to N)\n"
               "  --stop-at N               stop (and --save) after step N of the --steps schedule\n"
               "  --batch N                 sequences per step (default 4)\n"
               "  --seq N                   bytes per sequence (default 128)\n"
               "  --layers N                decoder layers (default 8)\n"
               "  --lr LR                   peak learning rate (default 0.001)\n"
               "  --optimizer adamw|adam|sgd  (default adamw; sgd uses momentum 0.9)\n"
               "  --accumulate N            micro-batches per step (default 1)\n"
               "  --device cpu|cuda|cuda:N  (default cpu)\n"
               "  --precision f32|bf16|f16  compute precision; weights and optimizer state stay f32\n"
               "  --threads N               CPU threads (default: all cores)\n"
               "  --seed S                  weights and batch order (default 0)\n"
               "  --save FILE               write params and optimizer state as safetensors at the end\n"
               "  --resume FILE             start from a checkpoint --save wrote\n"
               "  --plot FILE.svg           draw the loss per step\n"
               "  --recompute               recompute cheap activations in the backward instead of keeping them\n"
               "  --force                   let --save and --plot replace existing files\n"
               "  --verbose                 compile stages on stderr\n");
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out)
{
    return cli_parse_long("train", flag, v, lo, hi, out);
}

/* ------------------------------------------------------------ corpus */

typedef struct corpus {
    unsigned char *data;
    size_t n, cap;
} corpus;

static int append_file(corpus *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "rlx train: cannot read '%s': %s\n", path, strerror(errno));
        return 1;
    }
    unsigned char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0 && c->n < CORPUS_LIMIT) {
        if (c->n + got > c->cap) {
            size_t cap = c->cap ? c->cap * 2 : (size_t)1 << 20;
            while (cap < c->n + got)
                cap *= 2;
            unsigned char *d = realloc(c->data, cap);
            if (!d) {
                fclose(f);
                fprintf(stderr, "rlx train: out of memory reading '%s'\n", path);
                return 1;
            }
            c->data = d, c->cap = cap;
        }
        memcpy(c->data + c->n, buf, got);
        c->n += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad)
        fprintf(stderr, "rlx train: error reading '%s'\n", path);
    return bad;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A file, or every regular file of a folder in name order. */
static int load_corpus(const char *path, corpus *c)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "rlx train: --text '%s': %s\n", path, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode))
        return append_file(c, path);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "rlx train: cannot open folder '%s': %s\n", path, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            char **p = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *names);
            if (!p)
                break;
            names = p;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        if ((names[n] = malloc(len)))
            snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rc && stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            rc = append_file(c, names[i]);
        free(names[i]);
    }
    free(names);
    return rc;
}

/* ------------------------------------------------------------ an ONNX model's data */

#define MAX_INPUTS 16

typedef struct npy_input {
    const char *name, *path;
    rlx_dtype dtype;
    int ndim;
    int64_t dims[RLX_MAX_DIMS];
    void *data;
    size_t bytes, row; /* whole, one sample */
} npy_input;

static rlx_status set_onnx_param(void *user, const char *name, rlx_dtype t, int ndim, const int64_t *dims,
                                 const void *data, size_t bytes)
{
    (void)t, (void)ndim, (void)dims;
    rlx_trainer *tr = user;
    rlx_tensor_info info;
    if (rlx_session_find(rlx_trainer_session(tr), 1, name, &info) != RLX_OK)
        return RLX_OK; /* read only at import: no param of the graph */
    return rlx_trainer_set_param(tr, name, data, bytes);
}

/* Every input of the step has its samples, of its dtype and sample shape. */
static int check_inputs(rlx_trainer *tr, npy_input *in, int n, long batch)
{
    const rlx_session *s = rlx_trainer_session(tr);
    for (int i = 0; i < rlx_session_count(s, 0); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 0, i, &info);
        if (!strncmp(info.name, "opt.", 4))
            continue;
        npy_input *x = NULL;
        for (int k = 0; k < n && !x; k++)
            if (!strcmp(in[k].name, info.name))
                x = &in[k];
        if (!x) {
            fprintf(stderr, "rlx train: the model's input '%s' needs --input %s=FILE.npy\n", info.name, info.name);
            return 1;
        }
        bool fits = x->dtype == info.dtype && x->ndim == info.ndim && info.ndim >= 1 && info.dims[0] == batch &&
                    x->dims[0] >= 1;
        for (int d = 1; fits && d < info.ndim; d++)
            fits = x->dims[d] == info.dims[d];
        if (!fits) {
            fprintf(stderr,
                    "rlx train: '%s' holds %s of %d dims; input '%s' takes %s [%ld, ...] of %d dims (samples along "
                    "the first axis)\n",
                    x->path, rlx_dtype_name(x->dtype), x->ndim, info.name, rlx_dtype_name(info.dtype), batch,
                    info.ndim);
            return 1;
        }
    }
    return 0;
}

/* batch samples from `first` on (wrapping around) of every input */
static rlx_status feed_inputs(rlx_trainer *tr, const npy_input *in, int n, long batch, int64_t first, void *buf)
{
    for (int k = 0; k < n; k++) {
        int64_t samples = in[k].dims[0];
        for (long b = 0; b < batch; b++)
            memcpy((char *)buf + (size_t)b * in[k].row,
                   (const char *)in[k].data + (size_t)((first + b) % samples) * in[k].row, in[k].row);
        rlx_status s = rlx_trainer_set_input(tr, in[k].name, buf, (size_t)batch * in[k].row);
        if (s != RLX_OK)
            return s;
    }
    return RLX_OK;
}

/* ------------------------------------------------------------ weights, batches */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Norm gains 1, the rest N(0, 0.02), each param from its own stream. */
static rlx_status init_weights(rlx_trainer *tr, uint64_t seed)
{
    const rlx_session *s = rlx_trainer_session(tr);
    int n = rlx_session_count(s, 1);
    for (int i = 0; i < n; i++) {
        rlx_tensor_info info;
        rlx_status st = rlx_session_info(s, 1, i, &info);
        if (st != RLX_OK)
            return st;
        if (!strncmp(info.name, "opt.", 4) || info.dtype != RLX_F32)
            continue;
        size_t count = info.bytes / sizeof(float);
        float *w = malloc(info.bytes + 1);
        if (!w)
            return RLX_ERR_OUT_OF_MEMORY;
        if (ends_with(info.name, ".g"))
            for (size_t k = 0; k < count; k++)
                w[k] = 1.0f;
        else
            rlx_fill_normal(w, (int64_t)count, 0.02, seed * 1000003ULL + (uint64_t)i);
        st = rlx_trainer_set_param(tr, info.name, w, info.bytes);
        free(w);
        if (st != RLX_OK)
            return st;
    }
    return RLX_OK;
}

/* batch windows of seq + 1 bytes: ids the first seq, labels the next */
static void sample_batch(const corpus *c, int batch, int seq, uint64_t *rng, int64_t *ids, int64_t *labels)
{
    size_t span = c->n - (size_t)seq - 1;
    for (int b = 0; b < batch; b++) {
        size_t o = (size_t)(splitmix(rng) % (span + 1));
        for (int s = 0; s < seq; s++) {
            ids[(size_t)b * seq + s] = c->data[o + s];
            labels[(size_t)b * seq + s] = c->data[o + s + 1];
        }
    }
}

/* ------------------------------------------------------------ output */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void progress(int step, int steps, double loss, double rate, const char *unit, double left, int tty)
{
    char bar[31];
    int w = 30, filled = steps ? (int)((double)step * w / steps) : w;
    for (int i = 0; i < w; i++)
        bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
    bar[w] = 0;
    int m = (int)(left / 60), s = (int)fmod(left, 60);
    fprintf(stderr, "%sstep %*d/%d [%s] loss %.4f | %.0f %s/s | %d:%02d left%s", tty ? "\r" : "",
            (int)snprintf(NULL, 0, "%d", steps), step, steps, bar, loss, rate, unit, m, s, tty ? "" : "\n");
    fflush(stderr);
}

/* The loss per step as an SVG line chart. */
static int write_plot(const char *path, int force, const double *loss, int n, const char *title)
{
    rlx_file *f = NULL;
    if (rlx_file_open(path, force ? RLX_FILE_FORCE : 0, &f) != RLX_OK) {
        fprintf(stderr, "rlx train: --plot: %s\n", rlx_last_error());
        return 1;
    }
    FILE *o = rlx_file_stream(f);
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++)
        if (isfinite(loss[i]))
            lo = fmin(lo, loss[i]), hi = fmax(hi, loss[i]);
    if (!(hi > lo))
        lo = isfinite(lo) ? lo - 1 : 0, hi = lo + 2;
    const double W = 640, H = 400, L = 60, R = 20, T = 40, B = 50;
    fprintf(o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
            "<text x=\"%g\" y=\"24\" font-size=\"14\">%s</text>\n",
            W, H, L, title);
    fprintf(o, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
    fprintf(o, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, T, L, H - B);
    for (int k = 0; k <= 4; k++) {
        double v = lo + (hi - lo) * k / 4, y = H - B - (H - T - B) * k / 4;
        fprintf(o, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.3g</text>\n", L - 6, y + 4, v);
        fprintf(o, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/>\n", L, y, W - R, y);
        int s = 1 + (int)((double)(n - 1) * k / 4);
        double x = L + (W - L - R) * (n > 1 ? (double)(s - 1) / (n - 1) : 0);
        fprintf(o, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%d</text>\n", x, H - B + 18, s);
    }
    fprintf(o, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 12);
    fprintf(o, "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" text-anchor=\"middle\">loss</text>\n",
            (T + H - B) / 2, (T + H - B) / 2);
    fprintf(o, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"");
    for (int i = 0; i < n; i++) {
        double x = L + (W - L - R) * (n > 1 ? (double)i / (n - 1) : 0);
        double y = H - B - (H - T - B) * ((isfinite(loss[i]) ? loss[i] : hi) - lo) / (hi - lo);
        fprintf(o, "%.1f,%.1f ", x, y);
    }
    fprintf(o, "\"/>\n</svg>\n");
    if (rlx_file_commit(f) != RLX_OK) {
        fprintf(stderr, "rlx train: --plot: %s\n", rlx_last_error());
        return 1;
    }
    fprintf(stderr, "wrote %s (loss over %d steps)\n", path, n);
    return 0;
}

/* ------------------------------------------------------------ the command */

typedef struct train_args {
    const char *text, *save, *resume, *plot, *model, *loss;
    npy_input inputs[MAX_INPUTS];
    int n_inputs;
    long steps, stop_at, batch, seq, layers, accumulate, threads, seed;
    int force;
} train_args;

static int train(train_args *a, const rlx_train_options *topt, const rlx_options *o)
{
    corpus c = {0};
    for (int k = 0; k < a->n_inputs; k++) {
        npy_input *x = &a->inputs[k];
        if (rlx_npy_read(x->path, &x->dtype, &x->ndim, x->dims, &x->data, &x->bytes) != RLX_OK) {
            fprintf(stderr, "rlx train: --input %s: %s\n", x->name, rlx_last_error());
            return 1;
        }
        x->row = x->ndim && x->dims[0] ? x->bytes / (size_t)x->dims[0] : 0;
    }
    if (!a->model && load_corpus(a->text, &c))
        return 1;
    if (!a->model && c.n < (size_t)a->seq + 2) {
        fprintf(stderr, "rlx train: the text '%s' has %zu bytes; --seq %ld needs at least %ld\n", a->text, c.n, a->seq,
                a->seq + 2);
        free(c.data);
        return 1;
    }
    rlx_graph *g = NULL;
    rlx_trainer *tr = NULL;
    size_t feed = (size_t)(a->batch * a->seq) * 2 * sizeof(int64_t);
    for (int k = 0; k < a->n_inputs; k++)
        if ((size_t)a->batch * a->inputs[k].row > feed)
            feed = (size_t)a->batch * a->inputs[k].row;
    int64_t *ids = malloc(feed ? feed : 1), *labels = ids + a->batch * a->seq;
    double *losses = calloc((size_t)a->steps + 1, sizeof *losses);
    int rc = 1;
    double t0 = now();
    if (!ids || !losses) {
        fprintf(stderr, "rlx train: out of memory\n");
        goto out;
    }
    if (a->model) {
        rlx_onnx_options oo;
        rlx_onnx_options_init(&oo);
        oo.initializers_as_params = 1;
        oo.default_dim = a->batch;
        if (rlx_onnx_import(a->model, &oo, &g) != RLX_OK || rlx_trainer_new(g, a->loss, topt, o, &tr) != RLX_OK ||
            rlx_onnx_load_params(a->model, set_onnx_param, tr) != RLX_OK) {
            fprintf(stderr, "rlx train: %s: %s\n", a->model, rlx_last_error());
            goto out;
        }
        if (check_inputs(tr, a->inputs, a->n_inputs, a->batch))
            goto out;
    } else if (rlx_decoder_train_graph((int)a->batch, (int)a->seq, 256, (int)a->layers, &g) != RLX_OK ||
               rlx_trainer_new(g, "loss", topt, o, &tr) != RLX_OK) {
        fprintf(stderr, "rlx train: %s\n", rlx_last_error());
        goto out;
    } else if (init_weights(tr, (uint64_t)a->seed) != RLX_OK) {
        fprintf(stderr, "rlx train: setting the weights: %s\n", rlx_last_error());
        goto out;
    }
    if (a->resume && rlx_trainer_load(tr, a->resume) != RLX_OK) {
        fprintf(stderr, "rlx train: --resume: %s\n", rlx_last_error());
        goto out;
    }
    /* --steps counts from the start of training: a resumed run goes on to it */
    long end = a->stop_at && a->stop_at < a->steps ? a->stop_at : a->steps;
    long first = (long)rlx_trainer_steps(tr), todo = end - first;
    if (todo <= 0) {
        fprintf(stderr, "rlx train: the checkpoint is at step %ld already; --steps/--stop-at %ld asks for no more\n",
                first, end);
        goto out;
    }
    if (a->model)
        fprintf(stderr, "compiled in %.1f s; training steps %ld to %ld of %ld samples of %s\n", now() - t0, first + 1,
                end, a->batch * a->accumulate, a->model);
    else
        fprintf(stderr,
                "compiled in %.1f s; training steps %ld to %ld of %ld x %ld bytes on %zu bytes of text from %s\n",
                now() - t0, first + 1, end, a->batch * a->accumulate, a->seq, c.n, a->text);
    rlx_compile_stats cs;
    if (rlx_session_stats(rlx_trainer_session(tr), &cs) == RLX_OK) {
        int nre = 0;
        size_t bre = 0;
        rlx_trainer_recomputed(tr, &nre, &bre);
        fprintf(stderr, "memory: %.1f MiB params and optimizer state, %.1f MiB planned for one step",
                cs.persistent_bytes / 1048576.0, cs.transient_bytes / 1048576.0);
        if (topt->recompute)
            fprintf(stderr, " (%d activations, %.1f MiB, recomputed in the backward)", nre, bre / 1048576.0);
        fputc('\n', stderr);
    }
    int tty = isatty(2);
    double start = now(), tokens = 0;
    for (long s = 0; s < todo; s++) {
        double step_start = now(), loss = 0;
        for (long m = 0; m < a->accumulate; m++) {
            double l = 0;
            /* each micro-batch's windows from (seed, its index): a resumed
             * run sees the batches the uninterrupted one would have */
            int64_t micro = (first + s) * a->accumulate + m;
            rlx_status st;
            if (a->model) {
                st = feed_inputs(tr, a->inputs, a->n_inputs, a->batch, micro * a->batch, ids);
            } else {
                uint64_t rng = (uint64_t)a->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)micro;
                sample_batch(&c, (int)a->batch, (int)a->seq, &rng, ids, labels);
                size_t bytes = (size_t)(a->batch * a->seq) * sizeof *ids;
                st = rlx_trainer_set_input(tr, "input_ids", ids, bytes);
                if (st == RLX_OK)
                    st = rlx_trainer_set_input(tr, "labels", labels, bytes);
            }
            if (st != RLX_OK || rlx_trainer_step(tr, &l) != RLX_OK) {
                fprintf(stderr, "%srlx train: step %ld: %s\n", tty ? "\n" : "", first + s + 1, rlx_last_error());
                goto out;
            }
            loss += l / (double)a->accumulate;
        }
        losses[s] = loss;
        double per_step = (double)(a->batch * (a->model ? 1 : a->seq) * a->accumulate);
        tokens += per_step;
        double elapsed = now() - start, per = elapsed / (double)(s + 1);
        if (tty || (s + 1) % (todo >= 20 ? todo / 20 : 1) == 0 || s + 1 == todo || s == 0)
            progress((int)(first + s + 1), (int)end, loss, per_step / (now() - step_start),
                     a->model ? "samples" : "tok", per * (double)(todo - s - 1), tty);
    }
    if (tty)
        fputc('\n', stderr);
    int k = todo < 5 ? (int)todo : 5;
    double head = 0, tail = 0;
    for (int i = 0; i < k; i++)
        head += losses[i] / k, tail += losses[todo - k + i] / k;
    double elapsed = now() - start;
    if (a->model)
        printf("trained %ld steps (%lld in all) in %.1f s, %.1f steps/s: loss %.4g -> %.4g (mean of the first and "
               "last %d steps)\n",
               todo, (long long)rlx_trainer_steps(tr), elapsed, (double)todo / elapsed, head, tail, k);
    else
        printf("trained %ld steps (%lld in all) in %.1f s, %.0f tokens/s: loss %.4f -> %.4f (mean of the first and "
               "last %d steps; %.4f is a uniform guess over bytes)\n",
               todo, (long long)rlx_trainer_steps(tr), elapsed, tokens / elapsed, head, tail, k, log(256.0));
    rc = 0;
    if (a->save) {
        if (rlx_trainer_save(tr, a->save, a->force ? RLX_FILE_FORCE : 0) != RLX_OK) {
            fprintf(stderr, "rlx train: --save: %s\n", rlx_last_error());
            rc = 1;
        } else {
            fprintf(stderr, "wrote %s (params and optimizer state after %lld steps)\n", a->save,
                    (long long)rlx_trainer_steps(tr));
        }
    }
    if (a->plot) {
        char title[160];
        if (a->model)
            snprintf(title, sizeof title, "rlx train: %s, %ld samples per step, lr %g", a->model, a->batch, topt->lr);
        else
            snprintf(title, sizeof title, "rlx train: decoder over bytes, %ld x %ld per step, lr %g", a->batch, a->seq,
                     topt->lr);
        rc |= write_plot(a->plot, a->force, losses, (int)todo, title);
    }
out:
    rlx_trainer_free(tr);
    rlx_graph_free(g);
    free(ids);
    free(losses);
    free(c.data);
    return rc;
}

int rlx_cmd_train(int argc, char **argv)
{
    train_args a;
    memset(&a, 0, sizeof a);
    a.text = DEFAULT_CORPUS, a.steps = 40, a.batch = 4, a.seq = 128, a.accumulate = 1;
    rlx_train_options t;
    rlx_train_options_init(&t);
    t.clip_norm = 1.0;
    rlx_options o;
    rlx_options_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(f, "--force")) {
            a.force = 1;
            continue;
        } else if (!strcmp(f, "--verbose")) {
            o.verbose = 1;
            continue;
        } else if (!strcmp(f, "--recompute")) {
            t.recompute = 1;
            continue;
        }
        if (f[0] != '-' && !a.model) {
            a.model = f;
            continue;
        }
        if (!v) {
            fprintf(stderr, "rlx train: unknown option '%s' or it lacks its value\n", f);
            usage(stderr);
            return 2;
        }
        i++;
        if (!strcmp(f, "--text"))
            a.text = v;
        else if (!strcmp(f, "--loss"))
            a.loss = v;
        else if (!strcmp(f, "--input")) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || !eq[1] || a.n_inputs == MAX_INPUTS) {
                fprintf(stderr, "rlx train: --input wants NAME=FILE.npy (up to %d), got '%s'\n", MAX_INPUTS, v);
                return 2;
            }
            npy_input *x = &a.inputs[a.n_inputs++];
            x->name = strndup(v, (size_t)(eq - v));
            x->path = eq + 1;
        } else if (!strcmp(f, "--save"))
            a.save = v;
        else if (!strcmp(f, "--resume"))
            a.resume = v;
        else if (!strcmp(f, "--plot"))
            a.plot = v;
        else if (!strcmp(f, "--steps"))
            bad = parse_long(f, v, 1, 100000000, &a.steps);
        else if (!strcmp(f, "--stop-at"))
            bad = parse_long(f, v, 1, 100000000, &a.stop_at);
        else if (!strcmp(f, "--batch"))
            bad = parse_long(f, v, 1, 65536, &a.batch);
        else if (!strcmp(f, "--seq"))
            bad = parse_long(f, v, 1, 65536, &a.seq);
        else if (!strcmp(f, "--layers"))
            bad = parse_long(f, v, 1, 256, &a.layers);
        else if (!strcmp(f, "--accumulate"))
            bad = parse_long(f, v, 1, 65536, &a.accumulate);
        else if (!strcmp(f, "--threads"))
            bad = parse_long(f, v, 0, 4096, &a.threads);
        else if (!strcmp(f, "--seed"))
            bad = parse_long(f, v, 0, 2147483647, &a.seed);
        else if (!strcmp(f, "--lr"))
            bad = cli_parse_double("train", f, v, 0, 10, &t.lr);
        else if (!strcmp(f, "--optimizer")) {
            if (!strcmp(v, "adamw"))
                t.optimizer = RLX_OPTIM_ADAMW;
            else if (!strcmp(v, "adam"))
                t.optimizer = RLX_OPTIM_ADAM, t.weight_decay = 0;
            else if (!strcmp(v, "sgd"))
                t.optimizer = RLX_OPTIM_SGD, t.momentum = 0.9, t.weight_decay = 0;
            else {
                fprintf(stderr, "rlx train: --optimizer is adamw, adam or sgd, not '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(f, "--device")) {
            if (rlx_device_parse(v, &o.device, &o.device_index) != RLX_OK) {
                fprintf(stderr, "rlx train: --device: %s\n", rlx_last_error());
                return 2;
            }
        } else if (!strcmp(f, "--precision")) {
            if (!strcmp(v, "f32"))
                o.precision = RLX_PRECISION_F32;
            else if (!strcmp(v, "bf16"))
                o.precision = RLX_PRECISION_BF16;
            else if (!strcmp(v, "f16"))
                o.precision = RLX_PRECISION_F16;
            else {
                fprintf(stderr, "rlx train: --precision is f32, bf16 or f16, not '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "rlx train: unknown option '%s'\n", f);
            usage(stderr);
            return 2;
        }
        if (bad)
            return 2;
    }
    o.threads = (int)a.threads;
    o.seed = (uint64_t)a.seed;
    t.accumulate = (int)a.accumulate;
    t.warmup_steps = (int)(a.steps / 10);
    t.decay_steps = (int)(a.steps - t.warmup_steps);
    t.min_lr = t.lr / 10;
    /* refuse unwritable outputs before the work, not after */
    int flags = a.force ? RLX_FILE_FORCE : 0;
    if ((a.save && rlx_file_check_target(a.save, flags) != RLX_OK) ||
        (a.plot && rlx_file_check_target(a.plot, flags) != RLX_OK)) {
        fprintf(stderr, "rlx train: %s\n", rlx_last_error());
        return 1;
    }
    if (!a.model != !a.loss || (!a.model && a.n_inputs)) {
        fprintf(stderr, "rlx train: MODEL.onnx, --loss and --input go together\n");
        return 2;
    }
    int rc = train(&a, &t, &o);
    for (int k = 0; k < a.n_inputs; k++) {
        free((char *)a.inputs[k].name);
        rlx_free(a.inputs[k].data);
    }
    return rc;
}
