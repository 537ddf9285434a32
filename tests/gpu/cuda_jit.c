/* cuda_jit.c - the CUDA backend's generated elementwise-chain kernels
 * (src/backends/cuda/k_fused.cu, jit.cu), built by NVRTC for sm_80 and
 * sm_90 without a GPU: every float op of src/ir/op_math.h in f32, bf16
 * and f16 must compile there, or a chain using it would fall back to the
 * interpreters unnoticed on the GPU machine.  Exits 77 (skipped) where the
 * CUDA backend is not built or NVRTC is not found, saying which. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "rlx.h"

int main(void)
{
    /* found at run time: a build without the CUDA backend has no such
     * function (rlx_version links the library in either way) */
    int (*selftest)(int, char *, size_t) = NULL;
    *(void **)&selftest = dlsym(RTLD_DEFAULT, "rlx_cu_chain_jit_selftest");
    if (!selftest) {
        printf("skipped: RLX %s was built without the CUDA backend\n", rlx_version());
        return 77;
    }
    char msg[4096];
    static const int archs[] = {80, 90};
    for (int i = 0; i < 2; i++) {
        int r = selftest(archs[i], msg, sizeof msg);
        printf("%s\n", msg);
        if (r == -1)
            return 77;
        if (r <= 0)
            return 1;
    }
    return 0;
}
