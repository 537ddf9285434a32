/* test_e2e_reference.c - the mlp and encoder workloads end to end against an
 * independent float64 NumPy implementation (tests/reference/workloads_ref.py)
 * on seeded random weights and fresh random inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "models/workloads.h"
#include "rlx.h"

static char folder[256];

static void write_tensor(FILE *manifest, const char *name, rlx_dtype t, int ndim, const int64_t *dims, const void *data,
                         size_t bytes)
{
    fprintf(manifest, "%s %s", name, rlx_dtype_name(t));
    for (int i = 0; i < ndim; i++)
        fprintf(manifest, " %lld", (long long)dims[i]);
    fprintf(manifest, "\n");
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", folder, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, bytes, f), bytes);
    assert_int_equal(fclose(f), 0);
}

/* Compiles g, fills params (seeded) and inputs (fresh random), runs, and
 * writes every param, input and output for the reference script. */
static void run_and_dump(rlx_graph *g, uint64_t seed)
{
    snprintf(folder, sizeof folder, "%s/rlx-e2e-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(folder));
    rlx_options o;
    rlx_options_init(&o);
    rlx_session *s = NULL;
    assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
    assert_int_equal(rlx_workload_init_params(s, seed), RLX_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/manifest.txt", folder);
    FILE *m = fopen(path, "w");
    assert_non_null(m);
    for (int kind = 0; kind < 3; kind++) {
        for (int i = 0; i < rlx_session_count(s, kind); i++) {
            rlx_tensor_info info;
            assert_int_equal(rlx_session_info(s, kind, i, &info), RLX_OK);
            size_t n = info.bytes / rlx_dtype_size(info.dtype);
            void *buf = malloc(info.bytes + 8);
            assert_non_null(buf);
            if (kind == 0) { /* fresh random inputs */
                float *f = malloc(n * sizeof(float) + 4);
                rlx_fill_normal(f, (int64_t)n, 1.0, seed ^ (uint64_t)time(NULL));
                for (size_t k = 0; k < n; k++) {
                    if (info.dtype == RLX_I64)
                        ((int64_t *)buf)[k] = (int64_t)(fabsf(f[k]) * 10007.0f) % 30522;
                    else
                        ((float *)buf)[k] = f[k];
                }
                free(f);
                assert_int_equal(rlx_session_set_input(s, info.name, buf, info.bytes), RLX_OK);
            } else if (kind == 1) {
                free(buf); /* written below */
                continue;
            } else {
                if (i == 0)
                    assert_int_equal(rlx_session_run(s), RLX_OK);
                assert_int_equal(rlx_session_get_output(s, info.name, buf, info.bytes), RLX_OK);
            }
            write_tensor(m, info.name, info.dtype, info.ndim, info.dims, buf, info.bytes);
            free(buf);
        }
    }
    /* params: the values rlx_workload_init_params set */
    for (int i = 0; i < rlx_session_count(s, 1); i++) {
        rlx_tensor_info info;
        rlx_session_info(s, 1, i, &info);
        size_t n = info.bytes / 4;
        float *f = malloc(info.bytes + 4);
        rlx_workload_param_f32(info.name, i, n, seed, f);
        write_tensor(m, info.name, info.dtype, info.ndim, info.dims, f, info.bytes);
        free(f);
    }
    assert_int_equal(fclose(m), 0);
    rlx_session_free(s);
}

static int run_reference(const char *args)
{
    const char *src = getenv("RLX_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/reference/workloads_ref.py %s %s", src ? src : ".", folder,
             args);
    int rc = system(cmd);
    snprintf(cmd, sizeof cmd, "rm -rf %s", folder);
    if (system(cmd) != 0)
        print_message("could not remove %s\n", folder);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void test_mlp_matches_numpy(void **state)
{
    (void)state;
    rlx_graph *g = rlx_workload_mlp(4, RLX_F32);
    assert_non_null(g);
    run_and_dump(g, 11);
    rlx_graph_free(g);
    assert_int_equal(run_reference("mlp"), 0);
}

static void test_encoder_matches_numpy(void **state)
{
    (void)state;
    rlx_encoder_config c = rlx_encoder_minilm(2, 32);
    rlx_graph *g = rlx_workload_encoder(&c);
    assert_non_null(g);
    run_and_dump(g, 12);
    rlx_graph_free(g);
    char args[128];
    snprintf(args, sizeof args, "encoder %d %d %g", c.layers, c.heads, c.eps);
    assert_int_equal(run_reference(args), 0);
}

int main(void)
{
    if (access("/usr/bin/python3", X_OK) != 0 || system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
        printf("skipped: /usr/bin/python3 with NumPy is missing (apt-get install python3-numpy)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_matches_numpy),
        cmocka_unit_test(test_encoder_matches_numpy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
