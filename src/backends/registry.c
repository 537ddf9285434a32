/* registry.c - which backend serves which device. */
#include "backends/backend.h"

const rlx_backend *rlx_cuda_backend(void) __attribute__((weak));

const rlx_backend *rlx_backend_for(rlx_device d)
{
    switch (d) {
    case RLX_DEVICE_CPU: return rlx_cpu_backend();
    case RLX_DEVICE_CUDA: return rlx_cuda_backend ? rlx_cuda_backend() : NULL;
    }
    return NULL;
}
