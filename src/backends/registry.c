/* registry.c - which backend instance serves which device. */
#include "backends/backend.h"
#include "core/error.h"

rlx_status rlx_cuda_backend(int index, const rlx_backend **out) __attribute__((weak));
int rlx_cuda_device_count(void) __attribute__((weak));

rlx_status rlx_backend_get(rlx_device d, int index, const rlx_backend **out)
{
    *out = NULL;
    switch (d) {
    case RLX_DEVICE_CPU:
        if (index != 0)
            return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "device cpu:%d: the cpu is device 0 (cpu or cpu:0)", index);
        *out = rlx_cpu_backend();
        return RLX_OK;
    case RLX_DEVICE_CUDA:
        if (!rlx_cuda_backend)
            return rlx_set_error(RLX_ERR_UNSUPPORTED, "device cuda: this build of RLX has no backend for it");
        return rlx_cuda_backend(index, out);
    }
    return rlx_set_error(RLX_ERR_INVALID_ARGUMENT, "unknown device kind %d", (int)d);
}

int rlx_backend_device_count(rlx_device d)
{
    switch (d) {
    case RLX_DEVICE_CPU: return 1;
    case RLX_DEVICE_CUDA: return rlx_cuda_device_count ? rlx_cuda_device_count() : 0;
    }
    return 0;
}
