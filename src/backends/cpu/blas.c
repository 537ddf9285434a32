/* blas.c - f32/f64 GEMM through the system's OpenBLAS.
 *
 * OpenBLAS picks its kernels when it is loaded, from the processor or from
 * OPENBLAS_CORETYPE.  Debian's 0.3.21 does not know recent Xeons and falls
 * back to an SSE3 kernel several times slower, so we load it ourselves at
 * first use, after naming the core type when the processor has AVX-512.
 * A user's own OPENBLAS_CORETYPE wins.  Without OpenBLAS a plain blocked
 * loop is used. */
#include <dlfcn.h>
#include <pthread.h>
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
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;

static void load_blas(void)
{
    if (getenv("RLX_NO_BLAS"))
        return;
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx512f"))
        setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
    static const char *names[] = {"libopenblas.so.0", "libopenblas.so", "libcblas.so.3", "libblas.so.3"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h)
            continue;
        blas_sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
        blas_dgemm = (dgemm_fn)dlsym(h, "cblas_dgemm");
        blas_set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
        if (blas_sgemm && blas_dgemm) {
            blas_name = names[i];
            return;
        }
        blas_sgemm = NULL;
        blas_dgemm = NULL;
        dlclose(h);
    }
}

const char *rlx_blas_name(void)
{
    pthread_once(&blas_once, load_blas);
    return blas_name;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= 2147483647; }

void rlx_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc, int threads)
{
    pthread_once(&blas_once, load_blas);
    if (M == 0 || N == 0)
        return;
    if (blas_sgemm && fits_int(M) && fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb) && fits_int(ldc) &&
        K > 0) {
        pthread_mutex_lock(&blas_lock);
        if (blas_set_threads)
            blas_set_threads(threads > 0 ? threads : 1);
        blas_sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                   B, (int)ldb, beta, C, (int)ldc);
        pthread_mutex_unlock(&blas_lock);
        return;
    }
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) if (M * N * K > 65536)
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = (float)(alpha * acc + (beta != 0 ? beta * C[i * ldc + j] : 0));
        }
    }
}

void rlx_dgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
               const double *B, int64_t ldb, double beta, double *C, int64_t ldc, int threads)
{
    pthread_once(&blas_once, load_blas);
    if (M == 0 || N == 0)
        return;
    if (blas_dgemm && fits_int(M) && fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb) && fits_int(ldc) &&
        K > 0) {
        pthread_mutex_lock(&blas_lock);
        if (blas_set_threads)
            blas_set_threads(threads > 0 ? threads : 1);
        blas_dgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N, (int)K, alpha, A, (int)lda,
                   B, (int)ldb, beta, C, (int)ldc);
        pthread_mutex_unlock(&blas_lock);
        return;
    }
#pragma omp parallel for num_threads(threads > 0 ? threads : 1) if (M * N * K > 65536)
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
            C[i * ldc + j] = alpha * acc + (beta != 0 ? beta * C[i * ldc + j] : 0);
        }
    }
}
