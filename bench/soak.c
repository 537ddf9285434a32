/* soak.c - resident memory over many runs and compiles.
 *
 *   rlx_soak [RUNS [COMPILES [MODEL.onnx]]]
 *
 * Phase 1 runs a small model RUNS times (default 100000): with MODEL.onnx
 * (and the ONNX module) through rlx_model_session, the shape-keyed cache
 * asked on every run, else a small C-API graph; each run sets the input,
 * runs and reads the output.  Phase 2 compiles and frees the encoder
 * workload (MiniLM shape, batch 1, seq 128) COMPILES times (default 1000),
 * setting its params and running it on every tenth.  Each phase prints the
 * resident set size (VmRSS) at ten points, then its growth from the first
 * point after warm-up to the last; the program exits 1 when a phase grows by
 * more than RLX_SOAK_MAX_GROWTH_KB (default 4096 KiB).  Not a timed test:
 * bench/soak.sh runs the full counts and tests/soak.cmake a short one. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/workloads.h"
#include "rlx.h"

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int die(const char *what)
{
    fprintf(stderr, "soak: %s: %s\n", what, rlx_last_error());
    return 2;
}

/* Prints RSS at 10 points; returns the growth from point 1 (after warm-up)
 * to the end, in KiB. */
typedef struct tracker {
    const char *phase;
    long total, base, first, last, peak;
} tracker;

static void track(tracker *t, long i)
{
    long step = t->total / 10 ? t->total / 10 : 1;
    if ((i + 1) % step != 0 && i + 1 != t->total)
        return;
    long kb = rss_kb();
    if (t->first < 0)
        t->first = kb;
    t->last = kb;
    if (kb > t->peak)
        t->peak = kb;
    printf("%s %8ld / %ld: rss %ld KiB\n", t->phase, i + 1, t->total, kb);
    fflush(stdout);
}

static rlx_graph *small_graph(void)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){4, 64});
    rlx_node w = rlx_param(g, "w", RLX_F32, 2, (int64_t[]){64, 64});
    rlx_node h = rlx_gelu(g, rlx_matmul(g, x, w, 0, 0));
    rlx_output(g, "y", rlx_layer_norm(g, h, -1, -1, 1e-5));
    return g;
}

static int soak_runs(long runs, const char *model_path, tracker *t)
{
    rlx_options o;
    rlx_options_init(&o);
    o.threads = 1;
    rlx_model *m = NULL;
    rlx_session *own = NULL;
    rlx_graph *g = NULL;
    const char *in = "x", *out = "y";
    static float x[4 * 64], y[4 * 64], w[64 * 64];
    size_t xb = sizeof x, yb = sizeof y;
    for (int i = 0; i < 64 * 64; i++)
        w[i] = (float)((i * 37) % 17 - 8) * 0.01f;
    if (model_path) {
        if (rlx_model_load_onnx(model_path, &o, &m) != RLX_OK)
            return die(model_path);
        xb = 2 * 4 * sizeof(float); /* tests/cli/data/tiny.onnx: x [N, 4] -> y [N, 3] */
        yb = 2 * 3 * sizeof(float);
    } else {
        if (!(g = small_graph()) || rlx_compile(g, &o, &own) != RLX_OK ||
            rlx_session_set_param(own, "w", w, sizeof w) != RLX_OK)
            return die("small graph");
    }
    rlx_onnx_binding b;
    memset(&b, 0, sizeof b);
    b.name = "x";
    b.ndim = 2;
    b.dims[0] = 2;
    b.dims[1] = 4;
    for (long i = 0; i < runs; i++) {
        rlx_session *s = own;
        if (m && rlx_model_session(m, &b, 1, &s) != RLX_OK)
            return die("model session");
        for (size_t k = 0; k < xb / sizeof(float); k++)
            x[k] = (float)((i + (long)k) % 11) * 0.1f;
        if (rlx_session_set_input(s, in, x, xb) != RLX_OK || rlx_session_run(s) != RLX_OK ||
            rlx_session_get_output(s, out, y, yb) != RLX_OK)
            return die("run");
        track(t, i);
    }
    rlx_model_free(m);
    rlx_session_free(own);
    rlx_graph_free(g);
    return 0;
}

static int soak_compiles(long compiles, tracker *t)
{
    rlx_encoder_config c = rlx_encoder_minilm(1, 128);
    rlx_graph *g = rlx_workload_encoder(&c);
    rlx_options o;
    rlx_options_init(&o);
    o.threads = 1;
    size_t ids_bytes = (size_t)c.batch * (size_t)c.seq * sizeof(int64_t);
    int64_t *ids = malloc(ids_bytes);
    if (!g || !ids)
        return die("encoder");
    for (int k = 0; k < c.batch * c.seq; k++)
        ids[k] = (k * 7919) % c.vocab;
    for (long i = 0; i < compiles; i++) {
        rlx_session *s = NULL;
        if (rlx_compile(g, &o, &s) != RLX_OK)
            return die("compile");
        if (i % 10 == 0 &&
            (rlx_workload_init_params(s, 1) != RLX_OK ||
             rlx_session_set_input(s, "input_ids", ids, ids_bytes) != RLX_OK || rlx_session_run(s) != RLX_OK))
            return die("encoder run");
        rlx_session_free(s);
        track(t, i);
    }
    free(ids);
    rlx_graph_free(g);
    return 0;
}

static int report(const tracker *t, long limit_kb)
{
    long growth = t->last - t->first;
    printf("%s: rss %ld KiB after warm-up, %ld KiB at the end (growth %+ld KiB, peak %ld KiB; limit %ld KiB)\n",
           t->phase, t->first, t->last, growth, t->peak, limit_kb);
    return growth > limit_kb;
}

int main(int argc, char **argv)
{
    long runs = argc > 1 ? atol(argv[1]) : 100000, compiles = argc > 2 ? atol(argv[2]) : 1000;
    const char *model = argc > 3 ? argv[3] : NULL;
#ifndef RLX_HAVE_ONNX
    model = NULL;
#endif
    long limit = getenv("RLX_SOAK_MAX_GROWTH_KB") ? atol(getenv("RLX_SOAK_MAX_GROWTH_KB")) : 4096;
    printf("soak: start rss %ld KiB; %ld runs of %s, %ld encoder compiles\n", rss_kb(), runs,
           model ? model : "a small C-API graph", compiles);
    tracker tr = {"run", runs, 0, -1, 0, 0}, tc = {"compile", compiles, 0, -1, 0, 0};
    double t0 = now_s();
    int rc = soak_runs(runs, model, &tr);
    if (rc)
        return rc;
    double t1 = now_s();
    if ((rc = soak_compiles(compiles, &tc)))
        return rc;
    double t2 = now_s();
    printf("time: runs %.1f s, compiles %.1f s\n", t1 - t0, t2 - t1);
    int bad = (runs > 0 && report(&tr, limit)) | (compiles > 0 && report(&tc, limit));
    printf("soak: %s\n", bad ? "FAIL (resident memory grew)" : "ok (resident memory flat)");
    return bad;
}
