/* Random ops: uniform and normal moments and range, dropout keep rate and
 * scaling, determinism for one seed and variation across runs, seeds and
 * nodes.  Bounds are several standard errors wide, so a correct generator
 * fails them with negligible probability. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "support/ref.h"

/* Compiles g (outputs already marked) with seed, optionally binds one
 * input, runs `runs` times and reads output `name` of each run into
 * res[run] (n floats each). */
static rlx_status run_seeded(rlx_graph *g, uint64_t seed, const char *in_name, const float *in, size_t in_bytes,
                             const char *name, int runs, float **res, size_t n)
{
    rlx_options o;
    rlx_options_init(&o);
    o.seed = seed;
    rlx_session *s = NULL;
    rlx_status st = rlx_compile(g, &o, &s);
    if (st != RLX_OK) {
        fprintf(stderr, "compile: %s\n", rlx_last_error());
        return st;
    }
    if (in_name && (st = rlx_session_set_input(s, in_name, in, in_bytes)) != RLX_OK)
        goto out;
    for (int r = 0; r < runs; r++) {
        if ((st = rlx_session_run(s)) != RLX_OK)
            goto out;
        if ((st = rlx_session_get_output(s, name, res[r], n * sizeof(float))) != RLX_OK)
            goto out;
    }
out:
    if (st != RLX_OK)
        fprintf(stderr, "run: %s\n", rlx_last_error());
    rlx_session_free(s);
    return st;
}

typedef struct moments {
    double mean, var, min, max, skew, kurt;
} moments;

static moments stats(const float *x, size_t n)
{
    moments m = {0, 0, INFINITY, -INFINITY, 0, 0};
    for (size_t i = 0; i < n; i++) {
        m.mean += x[i];
        m.min = fmin(m.min, x[i]);
        m.max = fmax(m.max, x[i]);
    }
    m.mean /= (double)n;
    double m3 = 0, m4 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = x[i] - m.mean;
        m.var += d * d;
        m3 += d * d * d;
        m4 += d * d * d * d;
    }
    m.var /= (double)n;
    m.skew = m3 / (double)n / pow(m.var, 1.5);
    m.kurt = m4 / (double)n / (m.var * m.var);
    return m;
}

#define NSAMP 40000

static void test_uniform(void **state)
{
    (void)state;
    const double ranges[][2] = {{0, 1}, {-2, 3}, {5, 5.5}, {-1e3, -999}};
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        double lo = ranges[r][0], hi = ranges[r][1];
        rlx_graph *g = rlx_graph_new();
        rlx_node u = rlx_random_uniform(g, RLX_F32, 2, (int64_t[]){200, NSAMP / 200}, lo, hi);
        assert_int_equal(rlx_output(g, "u", u), RLX_OK);
        float *buf = malloc(NSAMP * sizeof(float));
        assert_int_equal(run_seeded(g, rt_next_u64(), NULL, NULL, 0, "u", 1, &buf, NSAMP), RLX_OK);
        moments m = stats(buf, NSAMP);
        double w = hi - lo, sd = w / sqrt(12.0), se = sd / sqrt((double)NSAMP);
        fprintf(stderr, "uniform [%g, %g): mean %.6g var %.6g min %.6g max %.6g\n", lo, hi, m.mean, m.var, m.min,
                m.max);
        /* every value inside [lo, hi] (hi may be reached by float rounding) */
        assert_true(m.min >= (float)lo);
        assert_true(m.max <= (float)hi);
        assert_true(fabs(m.mean - (lo + hi) / 2) < 6 * se);
        assert_true(fabs(m.var / (sd * sd) - 1) < 0.05);
        /* spread over the whole range: 10 bins, each near n/10 */
        int bins[10] = {0};
        for (int i = 0; i < NSAMP; i++) {
            int b = (int)((buf[i] - lo) / w * 10);
            bins[b < 0 ? 0 : b > 9 ? 9 : b]++;
        }
        double expect = NSAMP / 10.0, bsd = sqrt(NSAMP * 0.1 * 0.9);
        for (int b = 0; b < 10; b++)
            assert_true(fabs(bins[b] - expect) < 6 * bsd);
        free(buf);
        rlx_graph_free(g);
    }
}

static void test_normal(void **state)
{
    (void)state;
    const double params[][2] = {{0, 1}, {1.5, 0.5}, {-3, 2}};
    for (size_t r = 0; r < sizeof params / sizeof params[0]; r++) {
        double mu = params[r][0], sigma = params[r][1];
        rlx_graph *g = rlx_graph_new();
        rlx_node u = rlx_random_normal(g, RLX_F32, 1, (int64_t[]){NSAMP}, mu, sigma);
        assert_int_equal(rlx_output(g, "n", u), RLX_OK);
        float *buf = malloc(NSAMP * sizeof(float));
        assert_int_equal(run_seeded(g, rt_next_u64(), NULL, NULL, 0, "n", 1, &buf, NSAMP), RLX_OK);
        moments m = stats(buf, NSAMP);
        fprintf(stderr, "normal(%g, %g): mean %.6g std %.6g skew %.3g kurtosis %.3g\n", mu, sigma, m.mean, sqrt(m.var),
                m.skew, m.kurt);
        assert_true(fabs(m.mean - mu) < 6 * sigma / sqrt((double)NSAMP));
        assert_true(fabs(sqrt(m.var) / sigma - 1) < 0.03);
        assert_true(fabs(m.skew) < 0.1);
        assert_true(fabs(m.kurt - 3) < 0.25);
        /* 68.27% within one sigma */
        int in1 = 0;
        for (int i = 0; i < NSAMP; i++)
            in1 += fabs(buf[i] - mu) < sigma;
        assert_true(fabs(in1 / (double)NSAMP - 0.6827) < 0.015);
        free(buf);
        rlx_graph_free(g);
    }
}

/* f16 / bf16 / f64 random tensors stay in range and look right. */
static void test_random_dtypes(void **state)
{
    (void)state;
    const rlx_dtype dts[] = {RLX_F16, RLX_BF16, RLX_F64};
    for (int d = 0; d < 3; d++) {
        rlx_graph *g = rlx_graph_new();
        int64_t n = 4096;
        rlx_node u = rlx_random_uniform(g, dts[d], 1, &n, -1, 2);
        rlx_node z = rlx_random_normal(g, dts[d], 1, &n, 0, 1);
        assert_int_equal(rlx_output(g, "u", rlx_cast(g, u, RLX_F32)), RLX_OK);
        assert_int_equal(rlx_output(g, "z", rlx_cast(g, z, RLX_F32)), RLX_OK);
        rlx_options o;
        rlx_options_init(&o);
        o.seed = rt_next_u64();
        rlx_session *s = NULL;
        assert_int_equal(rlx_compile(g, &o, &s), RLX_OK);
        assert_int_equal(rlx_session_run(s), RLX_OK);
        float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
        assert_int_equal(rlx_session_get_output(s, "u", a, (size_t)n * 4), RLX_OK);
        assert_int_equal(rlx_session_get_output(s, "z", b, (size_t)n * 4), RLX_OK);
        moments mu = stats(a, (size_t)n), mz = stats(b, (size_t)n);
        fprintf(stderr, "%s: uniform mean %.4g min %.4g max %.4g; normal mean %.4g std %.4g\n", rlx_dtype_name(dts[d]),
                mu.mean, mu.min, mu.max, mz.mean, sqrt(mz.var));
        assert_true(mu.min >= -1 && mu.max <= 2);
        assert_true(fabs(mu.mean - 0.5) < 0.1);
        assert_true(fabs(mz.mean) < 0.1);
        assert_true(fabs(sqrt(mz.var) - 1) < 0.1);
        free(a);
        free(b);
        rlx_session_free(s);
        rlx_graph_free(g);
    }
}

static void test_dropout(void **state)
{
    (void)state;
    const double ps[] = {0.0, 0.1, 0.3, 0.5, 0.9};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        double p = ps[k];
        rlx_graph *g = rlx_graph_new();
        int64_t n = NSAMP;
        rlx_node x = rlx_input(g, "x", RLX_F32, 1, &n);
        assert_int_equal(rlx_output(g, "y", rlx_dropout(g, x, p)), RLX_OK);
        float *in = malloc(NSAMP * sizeof(float)), *out = malloc(NSAMP * sizeof(float));
        for (int i = 0; i < NSAMP; i++)
            in[i] = (float)rt_uniform(1, 2) * (i & 1 ? 1.f : -1.f); /* never zero */
        assert_int_equal(run_seeded(g, rt_next_u64(), "x", in, NSAMP * sizeof(float), "y", 1, &out, NSAMP), RLX_OK);
        int kept = 0, wrong = 0;
        double scale = 1.0 / (1.0 - p);
        for (int i = 0; i < NSAMP; i++) {
            if (out[i] == 0)
                continue;
            kept++;
            double want = in[i] * scale;
            if (fabs(out[i] - want) > 1e-5 * fabs(want)) {
                if (wrong < 3)
                    fprintf(stderr, "dropout p=%g: element %d is %.8g, expected 0 or %.8g\n", p, i, out[i], want);
                wrong++;
            }
        }
        double rate = kept / (double)NSAMP, se = sqrt(p * (1 - p) / NSAMP);
        fprintf(stderr, "dropout p=%g: kept %.4f (expected %.4f), %d scaled wrongly\n", p, rate, 1 - p, wrong);
        assert_int_equal(wrong, 0);
        if (p == 0)
            assert_int_equal(kept, NSAMP);
        else
            assert_true(fabs(rate - (1 - p)) < 6 * se);
        /* dropping is independent of position: odd and even halves alike */
        int kept_even = 0;
        for (int i = 0; i < NSAMP; i += 2)
            kept_even += out[i] != 0;
        if (p > 0)
            assert_true(fabs(kept_even / (NSAMP / 2.0) - (1 - p)) < 6 * sqrt(p * (1 - p) / (NSAMP / 2.0)));
        free(in);
        free(out);
        rlx_graph_free(g);
    }
}

static int differ(const float *a, const float *b, size_t n)
{
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += a[i] == b[i];
    return same < n / 2; /* most values differ */
}

/* One seed: the same values from two compiles; a second run of a session,
 * another seed and another node give other values. */
static void test_random_determinism(void **state)
{
    (void)state;
    const size_t n = 1000;
    uint64_t seed = rt_next_u64();
    rlx_graph *g = rlx_graph_new();
    rlx_node u1 = rlx_random_uniform(g, RLX_F32, 1, (int64_t[]){(int64_t)n}, 0, 1);
    rlx_node u2 = rlx_random_uniform(g, RLX_F32, 1, (int64_t[]){(int64_t)n}, 0, 1);
    rlx_node z = rlx_random_normal(g, RLX_F32, 1, (int64_t[]){(int64_t)n}, 0, 1);
    assert_int_equal(rlx_output(g, "u1", u1), RLX_OK);
    assert_int_equal(rlx_output(g, "u2", u2), RLX_OK);
    assert_int_equal(rlx_output(g, "z", z), RLX_OK);
    float *a[2], *b[2], *c[2], *z1[2], *z2[2], *other[1];
    for (int i = 0; i < 2; i++) {
        a[i] = malloc(n * 4);
        b[i] = malloc(n * 4);
        c[i] = malloc(n * 4);
        z1[i] = malloc(n * 4);
        z2[i] = malloc(n * 4);
    }
    other[0] = malloc(n * 4);
    assert_int_equal(run_seeded(g, seed, NULL, NULL, 0, "u1", 2, a, n), RLX_OK);
    assert_int_equal(run_seeded(g, seed, NULL, NULL, 0, "u1", 2, b, n), RLX_OK);
    assert_int_equal(run_seeded(g, seed, NULL, NULL, 0, "u2", 2, c, n), RLX_OK);
    assert_int_equal(run_seeded(g, seed, NULL, NULL, 0, "z", 2, z1, n), RLX_OK);
    assert_int_equal(run_seeded(g, seed, NULL, NULL, 0, "z", 2, z2, n), RLX_OK);
    assert_int_equal(run_seeded(g, seed + 1, NULL, NULL, 0, "u1", 1, other, n), RLX_OK);
    /* same seed, same node, same run index: identical */
    assert_memory_equal(a[0], b[0], n * 4);
    assert_memory_equal(a[1], b[1], n * 4);
    assert_memory_equal(z1[0], z2[0], n * 4);
    assert_memory_equal(z1[1], z2[1], n * 4);
    /* each run draws new values */
    assert_true(differ(a[0], a[1], n));
    assert_true(differ(z1[0], z1[1], n));
    /* two nodes of one graph are independent streams */
    assert_true(differ(a[0], c[0], n));
    /* another seed, other values */
    assert_true(differ(a[0], other[0], n));
    for (int i = 0; i < 2; i++) {
        free(a[i]);
        free(b[i]);
        free(c[i]);
        free(z1[i]);
        free(z2[i]);
    }
    free(other[0]);
    rlx_graph_free(g);
}

/* Dropout masks: fixed per seed, new per run. */
static void test_dropout_determinism(void **state)
{
    (void)state;
    const size_t n = 2000;
    rlx_graph *g = rlx_graph_new();
    rlx_node x = rlx_input(g, "x", RLX_F32, 1, (int64_t[]){(int64_t)n});
    assert_int_equal(rlx_output(g, "y", rlx_dropout(g, x, 0.5)), RLX_OK);
    float *in = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        in[i] = (float)rt_uniform(1, 2);
    float *a[2] = {malloc(n * 4), malloc(n * 4)}, *b[2] = {malloc(n * 4), malloc(n * 4)};
    uint64_t seed = rt_next_u64();
    assert_int_equal(run_seeded(g, seed, "x", in, n * 4, "y", 2, a, n), RLX_OK);
    assert_int_equal(run_seeded(g, seed, "x", in, n * 4, "y", 2, b, n), RLX_OK);
    assert_memory_equal(a[0], b[0], n * 4);
    assert_memory_equal(a[1], b[1], n * 4);
    size_t same_mask = 0;
    for (size_t i = 0; i < n; i++)
        same_mask += (a[0][i] == 0) == (a[1][i] == 0);
    assert_true(same_mask < n * 3 / 4); /* about half agree by chance */
    free(in);
    for (int i = 0; i < 2; i++) {
        free(a[i]);
        free(b[i]);
    }
    rlx_graph_free(g);
}

/* Empty and scalar random tensors. */
static void test_random_shapes(void **state)
{
    (void)state;
    rlx_graph *g = rlx_graph_new();
    rlx_node e = rlx_random_uniform(g, RLX_F32, 2, (int64_t[]){0, 3}, 0, 1);
    rlx_node s = rlx_random_normal(g, RLX_F32, 0, NULL, 2, 0.001);
    rlx_node one = rlx_random_uniform(g, RLX_F32, 3, (int64_t[]){1, 1, 1}, 4, 5);
    rlx_node x = rlx_input(g, "x", RLX_F32, 2, (int64_t[]){3, 0});
    assert_int_equal(rlx_output(g, "d", rlx_dropout(g, x, 0.5)), RLX_OK); /* dropout of an empty tensor */
    assert_int_equal(rlx_output(g, "e", e), RLX_OK);
    assert_int_equal(rlx_output(g, "s", s), RLX_OK);
    assert_int_equal(rlx_output(g, "one", one), RLX_OK);
    rlx_options o;
    rlx_options_init(&o);
    o.seed = rt_next_u64();
    rlx_session *sess = NULL;
    assert_int_equal(rlx_compile(g, &o, &sess), RLX_OK);
    float v = 0, w = 0, dummy = 0;
    assert_int_equal(rlx_session_set_input(sess, "x", &dummy, 0), RLX_OK);
    assert_int_equal(rlx_session_run(sess), RLX_OK);
    assert_int_equal(rlx_session_get_output(sess, "e", &dummy, 0), RLX_OK);
    assert_int_equal(rlx_session_get_output(sess, "s", &v, 4), RLX_OK);
    assert_int_equal(rlx_session_get_output(sess, "one", &w, 4), RLX_OK);
    assert_int_equal(rlx_session_get_output(sess, "d", &dummy, 0), RLX_OK);
    assert_true(fabs(v - 2) < 0.01);
    assert_true(w >= 4 && w <= 5);
    rlx_session_free(sess);
    rlx_graph_free(g);
}

/* rlx_fill_normal, which seeds every built-in model's weights, split over
 * threads: the same values, bit for bit, as one pass over one splitmix64
 * stream (Box-Muller on consecutive outputs), for an odd length past the
 * size where it goes parallel; and moments of a standard normal. */
static void test_fill_normal_is_one_stream(void **state)
{
    (void)state;
    const int64_t n = 300001;
    const uint64_t seed = 0x1234abcdULL;
    float *got = malloc(sizeof *got * (size_t)n), *want = malloc(sizeof *want * (size_t)n);
    assert_non_null(got);
    assert_non_null(want);
    rlx_fill_normal(got, n, 1.0, seed);
    uint64_t st = seed;
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t r[2];
        for (int k = 0; k < 2; k++) {
            uint64_t z = (st += 0x9e3779b97f4a7c15ULL);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
            r[k] = z ^ (z >> 31);
        }
        double u1 = ((double)(r[0] >> 11) + 0.5) / 9007199254740992.0;
        double u2 = ((double)(r[1] >> 11) + 0.5) / 9007199254740992.0;
        double rad = sqrt(-2.0 * log(u1));
        want[i] = (float)(rad * cos(6.283185307179586 * u2));
        if (i + 1 < n)
            want[i + 1] = (float)(rad * sin(6.283185307179586 * u2));
    }
    assert_memory_equal(got, want, sizeof *got * (size_t)n);
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++)
        m += got[i];
    m /= (double)n;
    for (int64_t i = 0; i < n; i++)
        v += (got[i] - m) * (got[i] - m);
    v /= (double)n;
    assert_true(fabs(m) < 5.0 / sqrt((double)n)); /* 5 standard errors */
    assert_true(fabs(v - 1.0) < 5.0 * sqrt(2.0 / (double)n));
    free(got);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_uniform, rt_setup),
        cmocka_unit_test_setup(test_normal, rt_setup),
        cmocka_unit_test_setup(test_random_dtypes, rt_setup),
        cmocka_unit_test_setup(test_dropout, rt_setup),
        cmocka_unit_test_setup(test_random_determinism, rt_setup),
        cmocka_unit_test_setup(test_dropout_determinism, rt_setup),
        cmocka_unit_test_setup(test_random_shapes, rt_setup),
        cmocka_unit_test(test_fill_normal_is_one_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
