/* jit.cu - NVRTC, opened at run time, and the process's cache of the
 * kernels built with it.  See cuda_jit.h. */
#include "backends/cuda/cuda_jit.h"

#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rlx_op_math_text.h" /* rlx_op_math_text: src/ir/op_math.h, embedded by the build */

static struct {
    nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
    nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
    nvrtcResult (*cubin)(nvrtcProgram, char *);
    nvrtcResult (*log_size)(nvrtcProgram, size_t *);
    nvrtcResult (*log)(nvrtcProgram, char *);
    nvrtcResult (*destroy)(nvrtcProgram *);
} nvrtc;
static bool nvrtc_ok;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void)
{
    static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so", "libnvrtc.so.12"};
    void *lib = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    bool ok = true;
#define NV_LOAD(field, sym) ok = ok && (*(void **)&nvrtc.field = dlsym(lib, #sym)) != NULL
    NV_LOAD(create, nvrtcCreateProgram);
    NV_LOAD(compile, nvrtcCompileProgram);
    NV_LOAD(cubin_size, nvrtcGetCUBINSize);
    NV_LOAD(cubin, nvrtcGetCUBIN);
    NV_LOAD(log_size, nvrtcGetProgramLogSize);
    NV_LOAD(log, nvrtcGetProgramLog);
    NV_LOAD(destroy, nvrtcDestroyProgram);
#undef NV_LOAD
    nvrtc_ok = ok;
}

struct cu_jit {
    char *src;
    int arch; /* 10 * major + minor */
    cudaLibrary_t lib;
    cudaKernel_t kernel;
    int refs;
    cu_jit *next;
};

static pthread_mutex_t jit_lock = PTHREAD_MUTEX_INITIALIZER;
static cu_jit *jit_list;
static long jit_built;

/* The cubin of src for sm_<arch>, or NULL: NVRTC's log then copied into
 * log (when given), or printed where verbose. */
static char *nv_build(const char *src, int arch, size_t *bytes, char *log_out, size_t log_cap)
{
    nvrtcProgram prog;
    const char *header = rlx_op_math_text, *header_name = "ir/op_math.h";
    if (nvrtc.create(&prog, src, "rlx_jit.cu", 1, &header, &header_name) != NVRTC_SUCCESS)
        return NULL;
    char arch_opt[40];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=sm_%d", arch);
    const char *opts[] = {arch_opt, "--std=c++17"};
    char *cubin = NULL;
    if (nvrtc.compile(prog, 2, opts) == NVRTC_SUCCESS && nvrtc.cubin_size(prog, bytes) == NVRTC_SUCCESS &&
        (cubin = (char *)rlx_malloc(*bytes)) != NULL && nvrtc.cubin(prog, cubin) != NVRTC_SUCCESS) {
        free(cubin);
        cubin = NULL;
    }
    size_t log_bytes = 0;
    if (!cubin && (log_out || rlx_cu_cfg.verbose) && nvrtc.log_size(prog, &log_bytes) == NVRTC_SUCCESS &&
        log_bytes > 1) {
        char *log = (char *)rlx_malloc(log_bytes);
        if (log && nvrtc.log(prog, log) == NVRTC_SUCCESS) {
            if (log_out)
                snprintf(log_out, log_cap, "%s", log);
            else
                fprintf(stderr, "[rlx cuda] NVRTC could not build a generated kernel:\n%s\n", log);
        }
        free(log);
    } else if (!cubin && log_out) {
        snprintf(log_out, log_cap, "NVRTC failed without a log");
    }
    nvrtc.destroy(&prog);
    return cubin;
}

cu_jit *rlx_cu_jit_get(const char *src, const char *name)
{
    pthread_once(&nv_once, nv_load);
    cu_device *d = rlx_cu_dev;
    if (!nvrtc_ok || !d || d->major < 8)
        return NULL;
    const int arch = 10 * d->major + d->minor;
    pthread_mutex_lock(&jit_lock);
    cu_jit *j = jit_list;
    while (j && (j->arch != arch || strcmp(j->src, src) != 0))
        j = j->next;
    if (j) {
        j->refs++;
        pthread_mutex_unlock(&jit_lock);
        return j;
    }
    /* built under the lock: two thunks of one source build it once */
    size_t bytes = 0;
    char *cubin = nv_build(src, arch, &bytes, NULL, 0);
    j = cubin ? (cu_jit *)rlx_calloc(1, sizeof *j) : NULL;
    bool ok = j && (j->src = rlx_strdup(src)) != NULL &&
              cudaLibraryLoadData(&j->lib, cubin, NULL, NULL, 0, NULL, NULL, 0) == cudaSuccess;
    if (ok && cudaLibraryGetKernel(&j->kernel, j->lib, name) != cudaSuccess) {
        cudaLibraryUnload(j->lib);
        ok = false;
    }
    if (!ok && j) {
        free(j->src);
        free(j);
        j = NULL;
    }
    free(cubin);
    cudaGetLastError(); /* a failed load leaves no error for the next launch's check */
    if (j) {
        j->arch = arch;
        j->refs = 1;
        j->next = jit_list;
        jit_list = j;
        jit_built++;
    }
    pthread_mutex_unlock(&jit_lock);
    return j;
}

void rlx_cu_jit_put(cu_jit *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&jit_lock);
    if (--j->refs == 0) {
        cu_jit **p = &jit_list;
        while (*p != j)
            p = &(*p)->next;
        *p = j->next;
        cudaLibraryUnload(j->lib);
        free(j->src);
        free(j);
    }
    pthread_mutex_unlock(&jit_lock);
}

int rlx_cu_jit_try_build(const char *src, int arch, char *log, size_t log_bytes)
{
    pthread_once(&nv_once, nv_load);
    if (!nvrtc_ok)
        return -1;
    size_t bytes = 0;
    char *cubin = nv_build(src, arch, &bytes, log, log_bytes);
    free(cubin);
    return cubin != NULL;
}

void rlx_cu_jit_launch(const cu_jit *j, unsigned grid, unsigned block, void *arg)
{
    cudaLaunchAttribute at[2];
    const cudaLaunchConfig_t cfg = cu_launch_config(dim3(grid), dim3(block), 0, 1, at);
    void *args[1] = {arg};
    cudaLaunchKernelExC(&cfg, (const void *)j->kernel, args);
}

extern "C" long rlx_cu_jit_built(void)
{
    pthread_mutex_lock(&jit_lock);
    long n = jit_built;
    pthread_mutex_unlock(&jit_lock);
    return n;
}
