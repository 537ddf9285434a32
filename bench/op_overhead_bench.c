/* op_overhead_bench.c - what a run costs per node on the CPU when the nodes
 * do almost nothing: a chain of tiny elementwise ops (add, mul, sub, max of
 * a few floats with one input), compiled once without fusion (which would
 * merge the chain into a few elementwise_chain nodes), run many times.
 *
 *   op_overhead_bench [--ops 1000] [--elems 4] [--runs 2000] [--threads 0]
 *
 * Prints the median time of one run over --runs runs (after a warm-up run),
 * that time per op in ns, and the same for a graph of one op, so what the
 * run itself costs (setting the input, the call) can be told apart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rlx.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* y = op_k(y, x) for k < ops, cycling through four cheap ops so that no
 * rewrite of the optimizer collapses the chain. */
static rlx_graph *chain(int ops, int64_t elems)
{
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, &elems);
    rlx_node y = x;
    for (int k = 0; k < ops; k++) {
        switch (k % 4) {
        case 0: y = rlx_add(g, y, x); break;
        case 1: y = rlx_mul(g, y, x); break;
        case 2: y = rlx_sub(g, y, x); break;
        default: y = rlx_max(g, y, x); break;
        }
    }
    rlx_output(g, "y", y);
    return g;
}

/* Median ns of one run (input set, run, output read) of a chain of `ops`. */
static int time_chain(int ops, int64_t elems, int runs, int threads, double *median_ns)
{
    rlx_graph *g = chain(ops, elems);
    rlx_options o;
    rlx_options_init(&o);
    o.threads = threads;
    o.no_fusion = 1;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    rlx_graph_free(g);
    if (st != RLX_OK) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return 1;
    }
    size_t bytes = (size_t)elems * sizeof(float);
    float *in = malloc(bytes), *out = malloc(bytes);
    double *t = malloc((size_t)runs * sizeof *t);
    if (!in || !out || !t) {
        free(in), free(out), free(t);
        rlx_session_free(s);
        return 1;
    }
    for (int64_t i = 0; i < elems; i++)
        in[i] = 0.5f + 0.001f * (float)i;
    for (int r = -1; r < runs && st == RLX_OK; r++) {
        double t0 = now_ns();
        st = rlx_session_set_input(s, "x", in, bytes);
        if (st == RLX_OK)
            st = rlx_session_run(s);
        if (st == RLX_OK)
            st = rlx_session_get_output(s, "y", out, bytes);
        if (r >= 0)
            t[r] = now_ns() - t0;
    }
    if (st != RLX_OK)
        fprintf(stderr, "run: %s\n", rlx_last_error());
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    *median_ns = t[runs / 2];
    free(in), free(out), free(t);
    rlx_session_free(s);
    return st != RLX_OK;
}

int main(int argc, char **argv)
{
    int ops = 1000, runs = 2000, threads = 0;
    int64_t elems = 4;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--ops"))
            ops = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--elems"))
            elems = atoll(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--runs"))
            runs = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--threads"))
            threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: op_overhead_bench [--ops N] [--elems N] [--runs N] [--threads N]\n");
            return 2;
        }
    }
    if (ops < 1 || elems < 1 || runs < 1 || threads < 0) {
        fprintf(stderr, "--ops, --elems and --runs must be at least 1, --threads at least 0\n");
        return 2;
    }
    double one, many;
    if (time_chain(1, elems, runs, threads, &one) || time_chain(ops, elems, runs, threads, &many))
        return 1;
    printf("chain of %d ops on %lld floats, threads %d (0: all cores), median of %d runs\n", ops, (long long)elems,
           threads, runs);
    printf("  1 op:      %10.0f ns per run\n", one);
    printf("  %d ops: %10.0f ns per run, %.1f ns per op (%.1f ns per op over the 1-op run)\n", ops, many, many / ops,
           ops > 1 ? (many - one) / (ops - 1) : 0.0);
    return 0;
}
