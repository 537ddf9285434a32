/* gemm.c - the CPU's f32/f64 GEMM: oneDNN's sgemm, OpenBLAS, or a plain
 * loop.
 *
 * Both libraries are opened at first use (dlopen: neither is a link
 * dependency).  oneDNN (libdnnl.so.2) compiles its kernels for the
 * processor it finds (AVX2, AVX-512, ...) whatever the environment says;
 * OpenBLAS picks its kernels when it is loaded, from the processor or from
 * OPENBLAS_CORETYPE (Debian's 0.3.21 falls back to an SSE3 kernel several
 * times slower on processors it does not know), which RLX leaves as the
 * process has it.  Opened once per process, under gemm_lock.
 *
 * Which library runs f32 (rlx_sgemm_choose): oneDNN where it is there (on
 * the shapes measured it was as fast as OpenBLAS named for the processor,
 * and twice as fast as OpenBLAS told Haswell), else OpenBLAS; the rule is
 * fixed, not timed, so a session gives the same bits in every process.
 * Products of a few thousand multiply-adds run a plain f32 loop instead
 * (sgemm_small: a library call costs more).  RLX_CPU_GEMM forces one.  f64 has OpenBLAS or the
 * loop.  RLX_NO_BLAS (or RLX_CPU_GEMM=builtin) keeps a session on the
 * plain loop.  Large products are split into row (or column) blocks over
 * our threads, one single-threaded library call per block. */
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_expf.h"
#include "backends/cpu/cpu_kernels.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);
typedef void (*set_threads_fn)(int);
/* oneDNN's row-major sgemm (dnnl.h: dnnl_sgemm; returns dnnl_status_t, 0 = success) */
typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *,
                             int64_t, float, float *, int64_t);

static sgemm_fn blas_sgemm;
static dgemm_fn blas_dgemm;
static set_threads_fn blas_set_threads;
static dnnl_sgemm_fn dnnl_sgemm;
static const char *blas_name = NULL;
static pthread_mutex_t gemm_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int gemm_loaded;

static const char *(*blas_corename)(void);

/* Not under AddressSanitizer, as conv_dnnl.c: LeakSanitizer's scan of the
 * threads at exit crashes ("Tracer caught signal 11", reading a thread's
 * dynamic TLS) once a pool worker has run oneDNN's sgemm; the path passes
 * ASan and UBSan with detect_leaks=0.  OpenBLAS takes the f32 products. */
static void load_dnnl(void)
{
#ifdef __SANITIZE_ADDRESS__
    return;
#endif
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&dnnl_sgemm = dlsym(h, "dnnl_sgemm");
    if (!dnnl_sgemm)
        dlclose(h);
}

static void load_blas(void)
{
    static const char *names[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3", "libblas.so.3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        blas_sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
        blas_dgemm = (dgemm_fn)dlsym(h, "cblas_dgemm");
        blas_set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
        *(void **)&blas_corename = dlsym(h, "openblas_get_corename");
        if (blas_sgemm && blas_dgemm) {
            /* We split large products across our own threads and call BLAS
             * single-threaded in each: its threaded path allocates per call. */
            if (blas_set_threads)
                blas_set_threads(1);
            blas_name = names[i];
            break;
        }
        blas_sgemm = NULL;
        blas_dgemm = NULL;
        dlclose(h);
    }
}

/* Opens the libraries once per process. */
static void ensure_libraries(void)
{
    if (atomic_load_explicit(&gemm_loaded, memory_order_acquire))
        return;
    pthread_mutex_lock(&gemm_lock);
    if (!atomic_load_explicit(&gemm_loaded, memory_order_relaxed)) {
        load_blas();
        load_dnnl();
        atomic_store_explicit(&gemm_loaded, 1, memory_order_release);
    }
    pthread_mutex_unlock(&gemm_lock);
}

static char gemm_info[512];
static pthread_once_t gemm_info_once = PTHREAD_ONCE_INIT;

static void fill_gemm_info(void)
{
    char blas[160];
    const char *core = blas_corename ? blas_corename() : NULL;
    if (!blas_name)
        snprintf(blas, sizeof blas, "no OpenBLAS");
    else if (!core)
        snprintf(blas, sizeof blas, "%s", blas_name);
    else
        snprintf(blas, sizeof blas, "%s, core %s", blas_name, core);
    if (dnnl_sgemm && blas_sgemm)
        snprintf(gemm_info, sizeof gemm_info, "f32: oneDNN (libdnnl.so.2); f64: %s", blas);
    else if (dnnl_sgemm)
        snprintf(gemm_info, sizeof gemm_info, "f32: oneDNN (libdnnl.so.2); f64: builtin loops");
    else if (blas_sgemm)
        snprintf(gemm_info, sizeof gemm_info, "%s", blas);
    else
        snprintf(gemm_info, sizeof gemm_info, "builtin loops");
}

const char *rlx_cpu_gemm_describe(const rlx_backend_settings *set)
{
    if (set && (set->no_blas || set->cpu_gemm == RLX_CPU_GEMM_BUILTIN))
        return "builtin loops";
    ensure_libraries();
    if (set && set->cpu_gemm == RLX_CPU_GEMM_ONEDNN)
        return dnnl_sgemm ? "f32: oneDNN (libdnnl.so.2), as RLX_CPU_GEMM asks" : "builtin loops (no oneDNN)";
    if (set && set->cpu_gemm == RLX_CPU_GEMM_OPENBLAS)
        return blas_sgemm ? "OpenBLAS, as RLX_CPU_GEMM asks" : "builtin loops (no OpenBLAS)";
    pthread_once(&gemm_info_once, fill_gemm_info);
    return gemm_info;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= 2147483647; }

/* Splits C into `parts` blocks along its longer side (block k of n). */
static void split_range(int64_t total, int parts, int k, int64_t *lo, int64_t *len)
{
    int64_t base = total / parts, extra = total % parts;
    *lo = k * base + (k < extra ? k : extra);
    *len = base + (k < extra);
}

static int gemm_parts(int64_t M, int64_t N, int64_t K, int threads)
{
    if (threads <= 1 || M * N * K < (int64_t)1 << 21)
        return 1;
    return threads;
}

enum { LIB_LOOP = 0, LIB_ONEDNN, LIB_OPENBLAS };

/* One block of C through a library, single-threaded: oneDNN reads the
 * OpenMP thread count of the calling task, set to one here and restored
 * after (outside a parallel region it is the caller's setting). */
static void sgemm_block(int lib, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (lib == LIB_ONEDNN) {
        int caller = omp_get_max_threads();
        omp_set_num_threads(1);
        dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        omp_set_num_threads(caller);
    } else {
        blas_sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                   B, (int)ldb, beta, C, (int)ldc);
    }
}

/* One product for the pool: its blocks (parts of C) or, for the plain
 * loops, its rows. */
typedef struct gemm_job {
    int lib, ta, tb, parts;
    bool by_rows;
    int64_t M, N, K, lda, ldb, ldc;
    double alpha, beta; /* exact for f32's too */
    const void *A, *B;
    void *C;
} gemm_job;

static void sgemm_blocks(void *p, int64_t lo_k, int64_t hi_k, int worker)
{
    (void)worker;
    const gemm_job *j = p;
    const float *A = j->A, *B = j->B;
    float *C = j->C;
    for (int64_t k = lo_k; k < hi_k; k++) {
        int64_t lo, len;
        split_range(j->by_rows ? j->M : j->N, j->parts, (int)k, &lo, &len);
        if (len == 0)
            continue;
        const float *a = j->by_rows ? (j->ta ? A + lo : A + lo * j->lda) : A;
        const float *b = j->by_rows ? B : (j->tb ? B + lo * j->ldb : B + lo);
        float *c = j->by_rows ? C + lo * j->ldc : C + lo;
        sgemm_block(j->lib, j->ta, j->tb, j->by_rows ? len : j->M, j->by_rows ? j->N : len, j->K, (float)j->alpha, a,
                    j->lda, b, j->ldb, (float)j->beta, c, j->ldc);
    }
}

/* C = alpha op(A) op(B) + beta C in blocks of rows or columns (whichever
 * side is longer), each block by `blocks` (sgemm_blocks or dgemm_blocks)
 * on the pool. */
static void gemm_split(rlx_cpu_chunk_fn blocks, int lib, int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha,
                       const void *A, int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc,
                       int threads)
{
    gemm_job j = {.lib = lib,
                  .ta = ta,
                  .tb = tb,
                  .parts = gemm_parts(M, N, K, threads),
                  .by_rows = M >= N,
                  .M = M,
                  .N = N,
                  .K = K,
                  .lda = lda,
                  .ldb = ldb,
                  .ldc = ldc,
                  .alpha = alpha,
                  .beta = beta,
                  .A = A,
                  .B = B,
                  .C = C};
    rlx_cpu_parallel_shares(j.parts, blocks, &j);
}

int rlx_sgemm_choose(int ta, int tb, int64_t M, int64_t N, int64_t K, int threads, const rlx_backend_settings *set)
{
    (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)threads;
    if (set && (set->no_blas || set->cpu_gemm == RLX_CPU_GEMM_BUILTIN))
        return LIB_LOOP;
    ensure_libraries();
    if (set && set->cpu_gemm == RLX_CPU_GEMM_OPENBLAS)
        return blas_sgemm ? LIB_OPENBLAS : LIB_LOOP;
    if (set && set->cpu_gemm == RLX_CPU_GEMM_ONEDNN)
        return dnnl_sgemm ? LIB_ONEDNN : LIB_LOOP;
    return dnnl_sgemm ? LIB_ONEDNN : blas_sgemm ? LIB_OPENBLAS : LIB_LOOP;
}

/* The plain loop, accumulating in double: without a library, past its int
 * sizes, or when the settings ask for it; rows of C over the threads. */
#define DEFINE_GEMM_LOOP(NAME, T)                                                                                   \
    static void NAME##_rows(void *p, int64_t lo, int64_t hi, int worker)                                            \
    {                                                                                                               \
        (void)worker;                                                                                               \
        const gemm_job *g = p;                                                                                      \
        const T *A = g->A, *B = g->B, alpha = (T)g->alpha, beta = (T)g->beta;                                       \
        T *C = g->C;                                                                                                \
        int64_t N = g->N, K = g->K, lda = g->lda, ldb = g->ldb, ldc = g->ldc;                                       \
        int ta = g->ta, tb = g->tb;                                                                                 \
        for (int64_t i = lo; i < hi; i++) {                                                                         \
            for (int64_t j = 0; j < N; j++) {                                                                       \
                double acc = 0;                                                                                     \
                for (int64_t k = 0; k < K; k++)                                                                     \
                    acc += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]); \
                C[i * ldc + j] = (T)(alpha * acc + (beta != 0 ? beta * C[i * ldc + j] : 0));                        \
            }                                                                                                       \
        }                                                                                                           \
    }                                                                                                               \
    static void NAME(int ta, int tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B, \
                     int64_t ldb, T beta, T *C, int64_t ldc, int threads)                                           \
    {                                                                                                               \
        gemm_job g = {.ta = ta,                                                                                     \
                      .tb = tb,                                                                                     \
                      .M = M,                                                                                       \
                      .N = N,                                                                                       \
                      .K = K,                                                                                       \
                      .lda = lda,                                                                                   \
                      .ldb = ldb,                                                                                   \
                      .ldc = ldc,                                                                                   \
                      .alpha = alpha,                                                                               \
                      .beta = beta,                                                                                 \
                      .A = A,                                                                                       \
                      .B = B,                                                                                       \
                      .C = C};                                                                                      \
        rlx_cpu_parallel(M *N *K > 65536 ? threads : 1, M, NAME##_rows, &g);                                        \
    }
DEFINE_GEMM_LOOP(gemm_loop_f32, float)
DEFINE_GEMM_LOOP(gemm_loop_f64, double)

/* Products of at most SMALL_MACS multiply-adds, where a library call costs
 * more than the product (oneDNN's sgemm: about 1.5 us a call here, with an
 * allocation; a depthwise conv of 258 channels is 258 of them): rows of C
 * built as sums of scaled rows (or columns) of B, in f32, one thread. */
enum { SMALL_MACS = 8192 };

/* C narrower than this takes the dot-product form below: the row form's
 * inner loop runs over C's N columns, a loop of one to a few iterations on
 * the pointwise convs of a single time step (Silero: 64 x 64 x 1 took 14 us). */
enum { SMALL_NARROW = 8 };

/* The dot-product form: C[i][j] from A's row i and B's column j, both read
 * contiguously (B's columns first gathered into bt when stored [K, N]). */
RLX_CLONES static void sgemm_small_dots(int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                                        int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    float bt[SMALL_MACS];
    const float *cols = B;
    int64_t ldcol = ldb;
    if (!tb && !(N == 1 && ldb == 1)) {
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++)
                bt[j * K + k] = B[k * ldb + j];
        cols = bt, ldcol = K;
    }
    for (int64_t i = 0; i < M; i++) {
        const float *a = A + i * lda;
        for (int64_t j = 0; j < N; j++) {
            const float *b = cols + j * ldcol;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int64_t k = 0; k < K; k++)
                acc += a[k] * b[k];
            float *c = C + i * ldc + j;
            *c = alpha * acc + (beta == 0 ? 0 : beta * *c); /* beta 0: C is not read (BLAS) */
        }
    }
}

static void sgemm_small(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (!ta && N < SMALL_NARROW && K > 1) {
        sgemm_small_dots(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (int64_t j = 0; j < N; j++)
            c[j] = beta == 0 ? 0 : beta * c[j]; /* beta 0: C is not read (BLAS) */
        for (int64_t k = 0; k < K; k++) {
            float a = alpha * (ta ? A[k * lda + i] : A[i * lda + k]);
            if (tb)
                for (int64_t j = 0; j < N; j++)
                    c[j] += a * B[j * ldb + k];
            else
                for (int64_t j = 0; j < N; j++)
                    c[j] += a * B[k * ldb + j];
        }
    }
}

void rlx_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int threads,
               const rlx_backend_settings *set)
{
    if (M == 0 || N == 0)
        return;
    int lib = rlx_sgemm_choose(ta, tb, M, N, K, threads, set);
    if (lib != LIB_LOOP && M * N * K <= SMALL_MACS && !(set && set->cpu_gemm != RLX_CPU_GEMM_AUTO)) {
        sgemm_small(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (lib == LIB_OPENBLAS && !(fits_int(lda) && fits_int(ldb) && fits_int(ldc)))
        lib = dnnl_sgemm ? LIB_ONEDNN : LIB_LOOP;
    if (lib != LIB_LOOP) {
        gemm_split(sgemm_blocks, lib, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
        return;
    }
    gemm_loop_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
}

static void dgemm_blocks(void *p, int64_t lo_k, int64_t hi_k, int worker)
{
    (void)worker;
    const gemm_job *j = p;
    const double *A = j->A, *B = j->B;
    double *C = j->C;
    for (int64_t k = lo_k; k < hi_k; k++) {
        int64_t lo, len;
        split_range(j->by_rows ? j->M : j->N, j->parts, (int)k, &lo, &len);
        if (len == 0)
            continue;
        const double *a = j->by_rows ? (j->ta ? A + lo : A + lo * j->lda) : A;
        const double *b = j->by_rows ? B : (j->tb ? B + lo * j->ldb : B + lo);
        double *c = j->by_rows ? C + lo * j->ldc : C + lo;
        blas_dgemm(ROW_MAJOR, j->ta ? TRANS : NO_TRANS, j->tb ? TRANS : NO_TRANS, (int)(j->by_rows ? len : j->M),
                   (int)(j->by_rows ? j->N : len), (int)j->K, j->alpha, a, (int)j->lda, b, (int)j->ldb, j->beta, c,
                   (int)j->ldc);
    }
}

/* f64: OpenBLAS, split like f32, or the loop. */
void rlx_dgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
               const double *B, int64_t ldb, double beta, double *C, int64_t ldc, int threads,
               const rlx_backend_settings *set)
{
    bool use_blas = !(set && (set->no_blas || set->cpu_gemm == RLX_CPU_GEMM_BUILTIN));
    if (use_blas)
        ensure_libraries();
    if (M == 0 || N == 0)
        return;
    if (use_blas && blas_dgemm && fits_int(M) && fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb) &&
        fits_int(ldc) && K > 0) {
        gemm_split(dgemm_blocks, 0, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
        return;
    }
    gemm_loop_f64(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, threads);
}
