/* blas.c - f32/f64 GEMM through the system's OpenBLAS.
 *
 * OpenBLAS picks its kernels when it is loaded, from the processor or from
 * OPENBLAS_CORETYPE.  Debian's 0.3.21 does not know recent Xeons and falls
 * back to an SSE3 kernel several times slower, so we load it ourselves at
 * first use, naming the core type when the processor has AVX-512.  OpenBLAS
 * has no call that picks the core type (it reads the variable once, in its
 * constructor, while dlopen runs), so the variable is set just for that
 * dlopen and removed right after: the process's environment is left as it
 * was.  This happens once per process, under blas_lock; a thread of the
 * host reading the environment at that very moment may see the variable
 * (glibc never frees an environment array, so such a read is safe).  A
 * user's own OPENBLAS_CORETYPE (rlx_backend_settings.openblas_coretype_user,
 * read in src/runtime/env.c) wins and is never touched.  RLX_NO_BLAS (the
 * session's settings) keeps a session on the plain blocked loop, which is
 * also what runs without OpenBLAS. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_kernels.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);
typedef void (*set_threads_fn)(int);

static sgemm_fn blas_sgemm;
static dgemm_fn blas_dgemm;
static set_threads_fn blas_set_threads;
static const char *blas_name = "builtin loops";
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int blas_loaded;

static const char *(*blas_corename)(void);
static bool core_from_user; /* OPENBLAS_CORETYPE was set before we loaded OpenBLAS */

static void load_blas(bool user_core)
{
    core_from_user = user_core;
    bool name_core = !user_core && __builtin_cpu_supports("avx512f");
    if (name_core)
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 0); /* for OpenBLAS's constructor only: removed below */
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
    if (name_core)
        unsetenv("OPENBLAS_CORETYPE");
}

/* Loads BLAS once per process (set: the settings of the session that asks
 * first; NULL: as if OPENBLAS_CORETYPE were the user's, so nothing is
 * named). */
static void ensure_blas(const rlx_backend_settings *set)
{
    if (atomic_load_explicit(&blas_loaded, memory_order_acquire))
        return;
    pthread_mutex_lock(&blas_lock);
    if (!atomic_load_explicit(&blas_loaded, memory_order_relaxed)) {
        load_blas(!set || set->openblas_coretype_user);
        atomic_store_explicit(&blas_loaded, 1, memory_order_release);
    }
    pthread_mutex_unlock(&blas_lock);
}

static char gemm_info[192];
static pthread_once_t gemm_info_once = PTHREAD_ONCE_INIT;

static void fill_gemm_info(void)
{
    const char *core = blas_corename ? blas_corename() : NULL;
    if (!core) {
        snprintf(gemm_info, sizeof gemm_info, "%s", blas_name);
        return;
    }
    /* a core type named by the user wins, even one below this processor's */
    bool below = core_from_user && __builtin_cpu_supports("avx512f") && strcmp(core, "SkylakeX") != 0 &&
                 strcmp(core, "Cooperlake") != 0 && strcmp(core, "SapphireRapids") != 0;
    snprintf(gemm_info, sizeof gemm_info, "%s, core %s%s", blas_name, core,
             below ? " (set by OPENBLAS_CORETYPE; this processor runs the faster SkylakeX kernels)" : "");
}

const char *rlx_cpu_gemm_describe(const rlx_backend_settings *set)
{
    if (set && set->no_blas)
        return "builtin loops";
    ensure_blas(set);
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

/* One body for both precisions: large products are split into row (or
 * column) blocks, one single-threaded BLAS call per block; without BLAS
 * (or with the settings' no_blas), or past its int sizes, a plain loop
 * accumulating in double. */
#define DEFINE_GEMM(NAME, T, BLAS)                                                                                  \
    void NAME(int ta, int tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B,        \
              int64_t ldb, T beta, T *C, int64_t ldc, int threads, const rlx_backend_settings *set)                 \
    {                                                                                                               \
        bool use_blas = !(set && set->no_blas);                                                                     \
        if (use_blas)                                                                                               \
            ensure_blas(set);                                                                                       \
        if (M == 0 || N == 0)                                                                                       \
            return;                                                                                                 \
        if (use_blas && BLAS && fits_int(M) && fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb) &&      \
            fits_int(ldc) && K > 0) {                                                                               \
            int parts = gemm_parts(M, N, K, threads);                                                               \
            bool by_rows = M >= N;                                                                                  \
            _Pragma("omp parallel for num_threads(parts) if (parts > 1)") for (int k = 0; k < parts; k++)           \
            {                                                                                                       \
                int64_t lo, len;                                                                                    \
                split_range(by_rows ? M : N, parts, k, &lo, &len);                                                  \
                if (len == 0)                                                                                       \
                    continue;                                                                                       \
                const T *a = by_rows ? (ta ? A + lo : A + lo * lda) : A;                                            \
                const T *b = by_rows ? B : (tb ? B + lo * ldb : B + lo);                                            \
                T *c = by_rows ? C + lo * ldc : C + lo;                                                             \
                BLAS(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)(by_rows ? len : M),             \
                     (int)(by_rows ? N : len), (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);         \
            }                                                                                                       \
            return;                                                                                                 \
        }                                                                                                           \
        int nt = threads > 0 ? threads : 1;                                                                         \
        _Pragma("omp parallel for num_threads(nt) if (M * N * K > 65536)") for (int64_t i = 0; i < M; i++)          \
        {                                                                                                           \
            for (int64_t j = 0; j < N; j++) {                                                                       \
                double acc = 0;                                                                                     \
                for (int64_t k = 0; k < K; k++)                                                                     \
                    acc += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]); \
                C[i * ldc + j] = (T)(alpha * acc + (beta != 0 ? beta * C[i * ldc + j] : 0));                        \
            }                                                                                                       \
        }                                                                                                           \
    }

DEFINE_GEMM(rlx_sgemm, float, blas_sgemm)
DEFINE_GEMM(rlx_dgemm, double, blas_dgemm)
